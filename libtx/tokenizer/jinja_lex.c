/* SPDX-License-Identifier: MIT */
/*
 * The Jinja lexer: template text into tokens, with the white-space control
 * transformers' environment sets (trim_blocks, lstrip_blocks) and the tag
 * modifiers ({%- -%} strip, {%+ +%} keep), comments, {% raw %} blocks and
 * Python-style string literals, as Jinja2 3.x's lexer does.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include <tx-internal/tx_errors.h>
#include "jinja.h"

struct lexer {
    size_t cur_off; /* where(): the last position computed, its line and column */
    int cur_line, cur_col;
    struct jarena *a;
    const char *src;
    size_t len, pos;
    struct jtoken *toks;
    size_t n, cap;
    char *err;
    size_t errsz;
};

static void where(struct lexer *L, size_t off, int *line, int *col)
{
    int ln = 1, c = 1;
    size_t i = 0;
    if (L->cur_line && off >= L->cur_off) { /* positions mostly grow: go on from the last */
        i = L->cur_off;
        ln = L->cur_line;
        c = L->cur_col;
    }
    for (; i < off && i < L->len; i++) {
        if (L->src[i] == '\n') {
            ln++;
            c = 1;
        } else if (((unsigned char)L->src[i] & 0xC0) != 0x80) {
            c++;
        }
    }
    L->cur_off = i;
    L->cur_line = ln;
    L->cur_col = c;
    *line = ln;
    *col = c;
}

static int lex_fail(struct lexer *L, size_t off, const char *msg)
{
    int ln, c;
    where(L, off, &ln, &c);
    snprintf(L->err, L->errsz, "line %d, column %d: %s", ln, c, msg);
    return TX_EINVAL;
}

static struct jtoken *push(struct lexer *L, enum jtok t, size_t off)
{
    if (L->n == L->cap) {
        size_t nc = L->cap ? L->cap * 2 : 256;
        struct jtoken *nt = jarena_alloc(L->a, nc * sizeof(*nt));
        if (!nt)
            return NULL;
        if (L->n)
            memcpy(nt, L->toks, L->n * sizeof(*nt));
        L->toks = nt;
        L->cap = nc;
    }
    struct jtoken *k = &L->toks[L->n++];
    memset(k, 0, sizeof(*k));
    k->t = t;
    where(L, off, &k->line, &k->col);
    return k;
}

static bool starts(const struct lexer *L, size_t at, const char *s)
{
    size_t n = strlen(s);
    return at + n <= L->len && !memcmp(L->src + at, s, n);
}

/* length of the Python-whitespace code point at at, 0 if none */
static size_t space_at(const struct lexer *L, size_t at)
{
    if (at >= L->len)
        return 0;
    size_t k;
    uint32_t c = ju_decode(L->src + at, L->len - at, &k);
    return ju_isspace(c) ? k : 0;
}

static size_t skip_space(const struct lexer *L, size_t at)
{
    size_t k;
    while ((k = space_at(L, at)))
        at += k;
    return at;
}

/* Python's str.rstrip() of src[b, e): the new end */
static size_t rstrip_end(const struct lexer *L, size_t b, size_t e)
{
    size_t end = e;
    size_t i = b;
    /* walk forward to find the last non-space code point */
    size_t last = b;
    while (i < e) {
        size_t k;
        uint32_t c = ju_decode(L->src + i, e - i, &k);
        i += k;
        if (!ju_isspace(c))
            last = i;
    }
    end = last;
    return end;
}

/* {% raw %} at p (p at '{'): the offset after "%}" and the modifier of the
 * end, or 0 if p is not a raw tag */
static size_t raw_tag(const struct lexer *L, size_t p, const char *word, char *open_mod,
                      char *close_mod)
{
    if (!starts(L, p, "{%"))
        return 0;
    size_t q = p + 2;
    *open_mod = 0;
    if (q < L->len && (L->src[q] == '-' || L->src[q] == '+'))
        *open_mod = L->src[q++];
    q = skip_space(L, q);
    size_t wn = strlen(word);
    if (!starts(L, q, word))
        return 0;
    q += wn;
    if (q < L->len && (isalnum((unsigned char)L->src[q]) || L->src[q] == '_'))
        return 0;
    q = skip_space(L, q);
    *close_mod = 0;
    if (q < L->len && (L->src[q] == '-' || L->src[q] == '+'))
        *close_mod = L->src[q++];
    if (!starts(L, q, "%}"))
        return 0;
    return q + 2;
}

/* after a tag end with modifier mod ('-', '+' or 0) of kind block/comment:
 * the position after the white space the environment removes */
static size_t after_end(const struct lexer *L, size_t q, char mod, bool block)
{
    if (mod == '-')
        return skip_space(L, q);
    if (mod == 0 && block && q < L->len && L->src[q] == '\n')
        return q + 1;
    return q;
}

/* Emit data src[b, e) before a tag starting at e with kind ('{', '%', '#')
 * and modifier mod. */
static int emit_data(struct lexer *L, size_t b, size_t e, char kind, char mod)
{
    size_t end = e;
    if (mod == '-') {
        end = rstrip_end(L, b, e);
    } else if (mod != '+' && kind != '{' && kind != 0) {
        /* lstrip_blocks: spaces and tabs from the line's start to the tag */
        size_t nl = e;
        while (nl > b && L->src[nl - 1] != '\n')
            nl--;
        bool line_start = nl > b || b == 0 || L->src[b - 1] == '\n';
        if (line_start) {
            size_t i = nl;
            while (i < e && (L->src[i] == ' ' || L->src[i] == '\t'))
                i++;
            if (i == e)
                end = nl;
        }
    }
    if (end > b) {
        struct jtoken *k = push(L, JT_DATA, b);
        if (!k)
            return lex_fail(L, b, "out of memory");
        k->s = L->src + b;
        k->n = end - b;
    }
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return TX_NONE;
}

static size_t put_utf8(char *o, uint32_t c)
{
    return (size_t)utf8proc_encode_char((utf8proc_int32_t)c, (utf8proc_uint8_t *)o);
}

/* A string literal at L->pos (the quote): decoded as Python's
 * "unicode-escape" decodes it, as Jinja2 does. */
static int lex_string(struct lexer *L)
{
    size_t p = L->pos;
    char q = L->src[p];
    size_t i = p + 1;
    char *o = jarena_alloc(L->a, L->len - p + 1);
    if (!o)
        return lex_fail(L, p, "out of memory");
    size_t n = 0;
    for (;;) {
        if (i >= L->len)
            return lex_fail(L, p, "unterminated string literal");
        char c = L->src[i];
        if (c == q) {
            i++;
            break;
        }
        if (c != '\\') {
            o[n++] = c;
            i++;
            continue;
        }
        if (i + 1 >= L->len)
            return lex_fail(L, p, "unterminated string literal");
        char e = L->src[i + 1];
        i += 2;
        int digits = 0;
        switch (e) {
        case '\n':
            break; /* line continuation */
        case '\\':
            o[n++] = '\\';
            break;
        case '\'':
            o[n++] = '\'';
            break;
        case '"':
            o[n++] = '"';
            break;
        case 'a':
            o[n++] = '\a';
            break;
        case 'b':
            o[n++] = '\b';
            break;
        case 'f':
            o[n++] = '\f';
            break;
        case 'n':
            o[n++] = '\n';
            break;
        case 'r':
            o[n++] = '\r';
            break;
        case 't':
            o[n++] = '\t';
            break;
        case 'v':
            o[n++] = '\v';
            break;
        case 'x':
            digits = 2;
            break;
        case 'u':
            digits = 4;
            break;
        case 'U':
            digits = 8;
            break;
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i < L->len && L->src[i] >= '0' && L->src[i] <= '7'; k++)
                    v = v * 8 + (uint32_t)(L->src[i++] - '0');
                n += put_utf8(o + n, v);
            } else {
                o[n++] = '\\'; /* unknown escape: kept */
                i--;
            }
        }
        if (digits) {
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                int h = i < L->len ? hexval(L->src[i]) : -1;
                if (h < 0)
                    return lex_fail(L, i, "truncated \\x, \\u or \\U escape in a string literal");
                v = v * 16 + (uint32_t)h;
                i++;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
                return lex_fail(L, p, "a string literal's escape is not a Unicode scalar value");
            n += put_utf8(o + n, v);
        }
    }
    struct jtoken *k = push(L, JT_STRING, p);
    if (!k)
        return lex_fail(L, p, "out of memory");
    k->s = o;
    k->n = n;
    L->pos = i;
    return 0;
}

static int lex_number(struct lexer *L)
{
    size_t p = L->pos, i = p;
    char buf[64];
    size_t bn = 0;
    bool is_float = false;
    while (i < L->len && (isdigit((unsigned char)L->src[i]) || L->src[i] == '_')) {
        if (L->src[i] != '_' && bn < sizeof(buf) - 1)
            buf[bn++] = L->src[i];
        i++;
    }
    if (i + 1 < L->len && L->src[i] == '.' && isdigit((unsigned char)L->src[i + 1])) {
        is_float = true;
        buf[bn < sizeof(buf) - 1 ? bn++ : bn] = '.';
        i++;
        while (i < L->len && (isdigit((unsigned char)L->src[i]) || L->src[i] == '_')) {
            if (L->src[i] != '_' && bn < sizeof(buf) - 1)
                buf[bn++] = L->src[i];
            i++;
        }
    }
    if (i < L->len && (L->src[i] == 'e' || L->src[i] == 'E')) {
        size_t j = i + 1;
        if (j < L->len && (L->src[j] == '+' || L->src[j] == '-'))
            j++;
        if (j < L->len && isdigit((unsigned char)L->src[j])) {
            is_float = true;
            while (i < j && bn < sizeof(buf) - 1)
                buf[bn++] = L->src[i++];
            while (i < L->len && isdigit((unsigned char)L->src[i])) {
                if (bn < sizeof(buf) - 1)
                    buf[bn++] = L->src[i];
                i++;
            }
        }
    }
    buf[bn] = 0;
    if (bn >= sizeof(buf) - 1)
        return lex_fail(L, p, "number literal too long");
    struct jtoken *k = push(L, is_float ? JT_FLOAT : JT_INT, p);
    if (!k)
        return lex_fail(L, p, "out of memory");
    if (is_float) {
        k->f = strtod(buf, NULL);
    } else {
        char *end;
        unsigned long long v = strtoull(buf, &end, 10);
        if (v > (unsigned long long)INT64_MAX || bn > 19)
            return lex_fail(L, p, "integer literal out of the 64-bit range");
        k->i = (int64_t)v;
    }
    L->pos = i;
    return 0;
}

static const char *const OPS[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                  "~",  "<",  ">",  "=",  "(",  ")",  "[", "]", "{", "}", ",",
                                  ".",  ":",  "|",  ";"};

/* The inside of a tag up to its end ("}}" or "%}"); kind '{' or '%'. */
static int lex_tag(struct lexer *L, char kind, char *close_mod)
{
    const char *end = kind == '{' ? "}}" : "%}";
    char stack[256];
    size_t depth = 0;
    for (;;) {
        L->pos = skip_space(L, L->pos);
        size_t p = L->pos;
        if (p >= L->len)
            return lex_fail(L, p, kind == '{' ? "unexpected end of the template inside {{ ... }}"
                                             : "unexpected end of the template inside {% ... %}");
        if (!depth) {
            if ((L->src[p] == '-' || L->src[p] == '+') && starts(L, p + 1, end) &&
                !(kind == '{' && L->src[p] == '+')) {
                *close_mod = L->src[p];
                L->pos = p + 3;
                return 0;
            }
            if (starts(L, p, end)) {
                *close_mod = 0;
                L->pos = p + 2;
                return 0;
            }
        }
        char c = L->src[p];
        if (c == '\'' || c == '"') {
            if (lex_string(L))
                return TX_EINVAL;
            continue;
        }
        if (isdigit((unsigned char)c)) {
            if (lex_number(L))
                return TX_EINVAL;
            continue;
        }
        if (isalpha((unsigned char)c) || c == '_') {
            size_t i = p;
            while (i < L->len && (isalnum((unsigned char)L->src[i]) || L->src[i] == '_'))
                i++;
            struct jtoken *k = push(L, JT_NAME, p);
            if (!k)
                return lex_fail(L, p, "out of memory");
            k->s = L->src + p;
            k->n = i - p;
            L->pos = i;
            continue;
        }
        const char *op = NULL;
        for (size_t j = 0; j < sizeof(OPS) / sizeof(OPS[0]); j++)
            if (starts(L, p, OPS[j])) {
                op = OPS[j];
                break;
            }
        if (!op) {
            char msg[64];
            snprintf(msg, sizeof(msg), "unexpected character '%c' in a tag",
                     (unsigned char)c >= 0x20 && (unsigned char)c < 0x7f ? c : '?');
            return lex_fail(L, p, msg);
        }
        size_t on = strlen(op);
        if (on == 1 && (*op == '(' || *op == '[' || *op == '{')) {
            if (depth == sizeof(stack))
                return lex_fail(L, p, "brackets nested too deeply");
            stack[depth++] = *op == '(' ? ')' : *op == '[' ? ']' : '}';
        } else if (on == 1 && (*op == ')' || *op == ']' || *op == '}')) {
            if (!depth || stack[depth - 1] != *op) {
                char msg[64];
                snprintf(msg, sizeof(msg), "unexpected '%c'", *op);
                return lex_fail(L, p, msg);
            }
            depth--;
        }
        struct jtoken *k = push(L, JT_OP, p);
        if (!k)
            return lex_fail(L, p, "out of memory");
        k->s = op;
        k->n = on;
        L->pos = p + on;
    }
}

int jinja_lex(struct jarena *a, const char *src, size_t len, struct jtoken **out, size_t *n,
              char *err, size_t errsz)
{
    struct lexer L = {.a = a, .src = src, .len = len, .err = err, .errsz = errsz};
    size_t data_start = 0;
    while (L.pos <= L.len) {
        /* the next tag start */
        size_t p = L.pos;
        const char *hit = NULL;
        while (p + 1 < L.len) {
            if (L.src[p] == '{' && (L.src[p + 1] == '{' || L.src[p + 1] == '%' ||
                                    L.src[p + 1] == '#')) {
                hit = L.src + p;
                break;
            }
            p++;
        }
        if (!hit) {
            if (emit_data(&L, data_start, L.len, 0, 0))
                return TX_EINVAL;
            break;
        }
        char kind = L.src[p + 1];
        char mod = 0;
        if (p + 2 < L.len && (L.src[p + 2] == '-' || L.src[p + 2] == '+'))
            mod = L.src[p + 2];
        if (kind == '{' && mod == '+')
            mod = 0; /* {{+ is not a modifier */
        char om, cm;
        size_t raw_end = kind == '%' ? raw_tag(&L, p, "raw", &om, &cm) : 0;
        if (raw_end) {
            if (emit_data(&L, data_start, p, '%', om))
                return TX_EINVAL;
            size_t q = raw_end;
            if (cm == '-')
                q = skip_space(&L, q);
            size_t r = q, close = 0;
            char om2 = 0, cm2 = 0;
            while (r + 1 < L.len) {
                if (L.src[r] == '{' && L.src[r + 1] == '%' &&
                    (close = raw_tag(&L, r, "endraw", &om2, &cm2)))
                    break;
                r++;
            }
            if (!close)
                return lex_fail(&L, p, "{% raw %} without {% endraw %}");
            size_t e = r;
            if (om2 == '-')
                e = rstrip_end(&L, q, r);
            if (e > q) {
                struct jtoken *k = push(&L, JT_DATA, q);
                if (!k)
                    return lex_fail(&L, q, "out of memory");
                k->s = L.src + q;
                k->n = e - q;
            }
            L.pos = after_end(&L, close, cm2, true);
            data_start = L.pos;
            continue;
        }
        if (emit_data(&L, data_start, p, kind, mod))
            return TX_EINVAL;
        size_t q = p + 2 + (mod ? 1 : 0);
        if (kind == '#') {
            size_t r = q;
            for (;;) {
                if (r + 1 >= L.len)
                    return lex_fail(&L, p, "comment {# without #}");
                if (L.src[r] == '#' && L.src[r + 1] == '}')
                    break;
                r++;
            }
            char cmod = 0;
            if (r > q && (L.src[r - 1] == '-' || L.src[r - 1] == '+'))
                cmod = L.src[r - 1];
            L.pos = after_end(&L, r + 2, cmod, true);
            data_start = L.pos;
            continue;
        }
        struct jtoken *k = push(&L, kind == '{' ? JT_VAR_BEGIN : JT_BLOCK_BEGIN, p);
        if (!k)
            return lex_fail(&L, p, "out of memory");
        L.pos = q;
        char cmod = 0;
        if (lex_tag(&L, kind, &cmod))
            return TX_EINVAL;
        k = push(&L, kind == '{' ? JT_VAR_END : JT_BLOCK_END, L.pos - 2);
        if (!k)
            return lex_fail(&L, L.pos, "out of memory");
        L.pos = after_end(&L, L.pos, cmod, kind == '%');
        data_start = L.pos;
    }
    if (!push(&L, JT_EOF, L.len))
        return lex_fail(&L, L.len, "out of memory");
    *out = L.toks;
    *n = L.n;
    return 0;
}
