/* SPDX-License-Identifier: MIT */
/*
 * The Jinja renderer's values: the arena they live in, constructors, lists
 * and dicts, Python's truth, equality and ordering, str() / repr() as
 * Python prints them, and json.dumps as transformers' tojson calls it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include <tx/tx_error.h>

#include "jinja.h"

/* ---- arena ---- */

struct jarena_chunk {
    struct jarena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
};

#define CHUNK_MIN (64u * 1024u)

void *jarena_alloc(struct jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!n)
        n = 16;
    if (a->limit && (n > a->limit || a->used > a->limit - n))
        return NULL;
    struct jarena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
        c = malloc(sizeof(*c) + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    a->used += n;
    return p;
}

void jarena_free(struct jarena *a)
{
    struct jarena_chunk *c = a->head;
    while (c) {
        struct jarena_chunk *nx = c->next;
        free(c);
        c = nx;
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- UTF-8 ---- */

uint32_t ju_decode(const char *s, size_t n, size_t *len)
{
    const unsigned char *u = (const unsigned char *)s;
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate(u, (utf8proc_ssize_t)(n > 4 ? 4 : n), &c);
    if (k <= 0) {
        *len = 1;
        return u[0];
    }
    *len = (size_t)k;
    return (uint32_t)c;
}

size_t ju_len(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            c++;
    return c;
}

size_t ju_offset(const char *s, size_t n, size_t cp)
{
    size_t i = 0, c = 0;
    while (i < n) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (c == cp)
                return i;
            c++;
        }
        i++;
    }
    return n;
}

bool ju_isspace(uint32_t c)
{
    /* Python's str.isspace() */
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* ---- constructors ---- */

struct jv jv_undef(const char *name, size_t n)
{
    struct jv v = {.t = JV_UNDEF, .n = n};
    v.u.s = name;
    return v;
}

struct jv jv_none(void)
{
    return (struct jv){.t = JV_NONE};
}

struct jv jv_bool(bool b)
{
    struct jv v = {.t = JV_BOOL};
    v.u.b = b;
    return v;
}

struct jv jv_int(int64_t i)
{
    struct jv v = {.t = JV_INT};
    v.u.i = i;
    return v;
}

struct jv jv_float(double f)
{
    struct jv v = {.t = JV_FLOAT};
    v.u.f = f;
    return v;
}

struct jv jv_str_ref(const char *s, size_t n)
{
    struct jv v = {.t = JV_STR, .n = n};
    v.u.s = s;
    return v;
}

struct jv jv_cstr(const char *s)
{
    return jv_str_ref(s, strlen(s));
}

struct jv jv_str(struct jrender *r, const char *s, size_t n)
{
    char *p = jr_alloc(r, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = 0;
    return jv_str_ref(p, n);
}

struct jv jv_list_new(struct jrender *r, size_t cap)
{
    struct jlist *l = jr_alloc(r, sizeof(*l));
    l->n = 0;
    l->cap = cap;
    l->v = cap ? jr_alloc(r, cap * sizeof(*l->v)) : NULL;
    struct jv v = {.t = JV_LIST};
    v.u.l = l;
    return v;
}

void jv_list_push(struct jrender *r, struct jv list, struct jv x)
{
    struct jlist *l = list.u.l;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        struct jv *nv = jr_alloc(r, nc * sizeof(*nv));
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof(*nv));
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = x;
}

struct jv jv_dict_new(struct jrender *r, size_t cap)
{
    struct jdict *d = jr_alloc(r, sizeof(*d));
    memset(d, 0, sizeof(*d));
    if (cap) {
        d->k = jr_alloc(r, cap * sizeof(*d->k));
        d->v = jr_alloc(r, cap * sizeof(*d->v));
        d->cap = cap;
    }
    struct jv v = {.t = JV_DICT};
    v.u.d = d;
    return v;
}

static bool key_equal(struct jv a, struct jv b)
{
    if (a.t == JV_STR && b.t == JV_STR)
        return a.n == b.n && !memcmp(a.u.s, b.u.s, a.n);
    if (a.t == JV_STR || b.t == JV_STR)
        return false;
    return jv_equal(a, b);
}

struct jv *jv_dict_get(const struct jdict *d, struct jv k)
{
    for (size_t i = 0; i < d->n; i++)
        if (key_equal(d->k[i], k))
            return &d->v[i];
    return NULL;
}

struct jv *jv_dict_gets(const struct jdict *d, const char *k, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].n == n && !memcmp(d->k[i].u.s, k, n))
            return &d->v[i];
    return NULL;
}

void jv_dict_set(struct jrender *r, struct jdict *d, struct jv k, struct jv v)
{
    struct jv *e = jv_dict_get(d, k);
    if (e) {
        *e = v;
        return;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 8;
        struct jv *nk = jr_alloc(r, nc * sizeof(*nk));
        struct jv *nv = jr_alloc(r, nc * sizeof(*nv));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(*nk));
            memcpy(nv, d->v, d->n * sizeof(*nv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = nc;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

/* ---- Python semantics ---- */

bool jv_is_str(struct jv v)
{
    return v.t == JV_STR;
}

bool jv_is_seq(struct jv v)
{
    return v.t == JV_LIST || v.t == JV_TUPLE;
}

bool jv_is_mapping(struct jv v)
{
    return v.t == JV_DICT;
}

bool jv_truthy(struct jv v)
{
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE:
        return false;
    case JV_BOOL:
        return v.u.b;
    case JV_INT:
        return v.u.i != 0;
    case JV_FLOAT:
        return v.u.f != 0.0;
    case JV_STR:
        return v.n != 0;
    case JV_LIST:
    case JV_TUPLE:
        return v.u.l->n != 0;
    case JV_DICT:
        return v.u.d->n != 0;
    default:
        return true;
    }
}

bool jv_is_num(struct jv v)
{
    return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}

double jv_num_f(struct jv v)
{
    return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : (double)v.u.b;
}

int64_t jv_num_i(struct jv v)
{
    return v.t == JV_INT ? v.u.i : (int64_t)v.u.b;
}

#define VALUE_DEPTH_MAX 512 /* nesting that equality, ordering and repr follow */

static bool equal_at(struct jv a, struct jv b, int depth);

bool jv_equal(struct jv a, struct jv b)
{
    return equal_at(a, b, 0);
}

/* values nested deeper than VALUE_DEPTH_MAX compare unequal (a template can
 * build such a value; the recursion must stay bounded) */
static bool equal_at(struct jv a, struct jv b, int depth)
{
    if (depth > VALUE_DEPTH_MAX)
        return false;
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT)
            return jv_num_f(a) == jv_num_f(b);
        return jv_num_i(a) == jv_num_i(b);
    }
    if (a.t != b.t)
        return false;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE:
        return true;
    case JV_STR:
        return a.n == b.n && !memcmp(a.u.s, b.u.s, a.n);
    case JV_LIST:
    case JV_TUPLE:
        if (a.u.l->n != b.u.l->n)
            return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_at(a.u.l->v[i], b.u.l->v[i], depth + 1))
                return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n)
            return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            struct jv *o = jv_dict_get(b.u.d, a.u.d->k[i]);
            if (!o || !equal_at(a.u.d->v[i], *o, depth + 1))
                return false;
        }
        return true;
    case JV_NS:
    case JV_LOOP:
        return a.u.d == b.u.d;
    case JV_MACRO:
        return a.u.m == b.u.m;
    case JV_FUNC:
        return a.u.fn == b.u.fn;
    case JV_METHOD:
        return a.u.bm == b.u.bm;
    default:
        return false;
    }
}

const char *jv_type_name(struct jv v)
{
    static const char *const names[] = {
        [JV_UNDEF] = "Undefined", [JV_NONE] = "NoneType",  [JV_BOOL] = "bool",
        [JV_INT] = "int",         [JV_FLOAT] = "float",    [JV_STR] = "str",
        [JV_LIST] = "list",       [JV_TUPLE] = "tuple",    [JV_DICT] = "dict",
        [JV_NS] = "Namespace",    [JV_MACRO] = "Macro",    [JV_FUNC] = "function",
        [JV_METHOD] = "method",   [JV_LOOP] = "LoopContext",
    };
    return names[v.t];
}

static int compare_at(struct jrender *r, const struct jnode *at, struct jv a, struct jv b,
                      int depth);

int jv_compare(struct jrender *r, const struct jnode *at, struct jv a, struct jv b)
{
    return compare_at(r, at, a, b, 0);
}

static int compare_at(struct jrender *r, const struct jnode *at, struct jv a, struct jv b,
                      int depth)
{
    if (depth > VALUE_DEPTH_MAX)
        jr_fail(r, at, TX_EINVAL, "comparing values nested more than %d deep", VALUE_DEPTH_MAX);
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t == JV_FLOAT || b.t == JV_FLOAT) {
            double x = jv_num_f(a), y = jv_num_f(b);
            return x < y ? -1 : x > y ? 1 : 0;
        }
        int64_t x = jv_num_i(a), y = jv_num_i(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.n < b.n ? a.n : b.n;
        int c = memcmp(a.u.s, b.u.s, n);
        if (c)
            return c < 0 ? -1 : 1;
        return a.n < b.n ? -1 : a.n > b.n ? 1 : 0;
    }
    if (jv_is_seq(a) && a.t == b.t) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_equal(a.u.l->v[i], b.u.l->v[i]))
                continue;
            return compare_at(r, at, a.u.l->v[i], b.u.l->v[i], depth + 1);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n ? 1 : 0;
    }
    jr_fail(r, at, TX_EINVAL, "'<' not supported between instances of '%s' and '%s'",
            jv_type_name(a), jv_type_name(b));
}

/* ---- text ---- */

void jb_put(struct jrender *r, struct jbuf *b, const char *s, size_t n)
{
    if (!n)
        return;
    if (b->cap - b->n < n + 1) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *np = jr_alloc(r, nc);
        if (b->n)
            memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jb_puts(struct jrender *r, struct jbuf *b, const char *s)
{
    jb_put(r, b, s, strlen(s));
}

void jb_putc(struct jrender *r, struct jbuf *b, char c)
{
    jb_put(r, b, &c, 1);
}

struct jv jb_value(struct jbuf *b)
{
    return jv_str_ref(b->n ? b->p : "", b->n);
}

void jv_float_repr(double f, char *buf, size_t sz)
{
    if (isnan(f)) {
        snprintf(buf, sz, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, sz, f < 0 ? "-inf" : "inf");
        return;
    }
    /* the shortest digits that read back as f */
    char e[40];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(e, sizeof(e), "%.*e", p - 1, f);
        if (strtod(e, NULL) == f)
            break;
    }
    /* e: [-]d[.ddd]e[+-]XX */
    char digits[32];
    size_t nd = 0;
    const char *q = e;
    bool neg = false;
    if (*q == '-') {
        neg = true;
        q++;
    }
    for (; *q && *q != 'e'; q++)
        if (*q != '.')
            digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    int exp = atoi(q + 1);
    char out[64];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (exp >= -5 + 1 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++)
                out[o++] = (size_t)i < nd ? digits[i] : '0';
            out[o++] = '.';
            if ((size_t)exp + 1 < nd) {
                for (size_t i = (size_t)exp + 1; i < nd; i++)
                    out[o++] = digits[i];
            } else {
                out[o++] = '0';
            }
        } else {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -exp - 1; i++)
                out[o++] = '0';
            for (size_t i = 0; i < nd; i++)
                out[o++] = digits[i];
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (size_t i = 1; i < nd; i++)
                out[o++] = digits[i];
        }
        snprintf(out + o, sizeof(out) - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    snprintf(buf, sz, "%s", out);
}

static bool printable(uint32_t c)
{
    if (c == ' ')
        return true;
    if (c < 0x20 || c == 0x7f)
        return false;
    if (c < 0x7f)
        return true;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
        return false;
    default:
        return true;
    }
}

static void str_repr(struct jrender *r, struct jbuf *b, const char *s, size_t n)
{
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    jb_putc(r, b, q);
    size_t i = 0;
    while (i < n) {
        size_t k;
        uint32_t c = ju_decode(s + i, n - i, &k);
        char t[16];
        if (c == (uint32_t)q || c == '\\') {
            t[0] = '\\';
            t[1] = (char)c;
            jb_put(r, b, t, 2);
        } else if (c == '\n') {
            jb_puts(r, b, "\\n");
        } else if (c == '\r') {
            jb_puts(r, b, "\\r");
        } else if (c == '\t') {
            jb_puts(r, b, "\\t");
        } else if (!printable(c)) {
            if (c < 0x100)
                snprintf(t, sizeof(t), "\\x%02x", c);
            else if (c < 0x10000)
                snprintf(t, sizeof(t), "\\u%04x", c);
            else
                snprintf(t, sizeof(t), "\\U%08x", c);
            jb_puts(r, b, t);
        } else {
            jb_put(r, b, s + i, k);
        }
        i += k;
    }
    jb_putc(r, b, q);
}

static void repr_at(struct jrender *r, struct jbuf *b, struct jv v, int depth);

void jv_repr_append(struct jrender *r, struct jbuf *b, struct jv v)
{
    repr_at(r, b, v, 0);
}

static void repr_at(struct jrender *r, struct jbuf *b, struct jv v, int depth)
{
    jr_step(r, NULL);
    if (depth > VALUE_DEPTH_MAX)
        jr_fail(r, NULL, TX_EINVAL, "printing a value nested more than %d deep", VALUE_DEPTH_MAX);
    switch (v.t) {
    case JV_STR:
        str_repr(r, b, v.u.s, v.n);
        return;
    case JV_UNDEF:
        jb_puts(r, b, "Undefined");
        return;
    case JV_LIST:
    case JV_TUPLE:
        jb_putc(r, b, v.t == JV_LIST ? '[' : '(');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                jb_puts(r, b, ", ");
            repr_at(r, b, v.u.l->v[i], depth + 1);
        }
        if (v.t == JV_TUPLE && v.u.l->n == 1)
            jb_putc(r, b, ',');
        jb_putc(r, b, v.t == JV_LIST ? ']' : ')');
        return;
    case JV_DICT:
    case JV_NS:
        if (v.t == JV_NS)
            jb_puts(r, b, "<Namespace ");
        jb_putc(r, b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i)
                jb_puts(r, b, ", ");
            repr_at(r, b, v.u.d->k[i], depth + 1);
            jb_puts(r, b, ": ");
            repr_at(r, b, v.u.d->v[i], depth + 1);
        }
        jb_putc(r, b, '}');
        if (v.t == JV_NS)
            jb_putc(r, b, '>');
        return;
    default:
        jv_str_append(r, b, v);
    }
}

void jv_str_append(struct jrender *r, struct jbuf *b, struct jv v)
{
    char t[64];
    switch (v.t) {
    case JV_UNDEF:
        return;
    case JV_NONE:
        jb_puts(r, b, "None");
        return;
    case JV_BOOL:
        jb_puts(r, b, v.u.b ? "True" : "False");
        return;
    case JV_INT:
        snprintf(t, sizeof(t), "%lld", (long long)v.u.i);
        jb_puts(r, b, t);
        return;
    case JV_FLOAT:
        jv_float_repr(v.u.f, t, sizeof(t));
        jb_puts(r, b, t);
        return;
    case JV_STR:
        jb_put(r, b, v.u.s, v.n);
        return;
    case JV_MACRO:
        jb_puts(r, b, "<Macro '");
        jb_puts(r, b, v.u.m->s);
        jb_puts(r, b, "'>");
        return;
    case JV_FUNC:
        jb_puts(r, b, "<built-in function>");
        return;
    case JV_METHOD:
        jb_puts(r, b, "<built-in method ");
        jb_puts(r, b, v.u.bm->name);
        jb_puts(r, b, ">");
        return;
    case JV_LOOP:
        jb_puts(r, b, "<LoopContext>");
        return;
    default:
        jv_repr_append(r, b, v);
    }
}

struct jv jv_to_str(struct jrender *r, struct jv v)
{
    if (v.t == JV_STR)
        return v;
    struct jbuf b = {0};
    jv_str_append(r, &b, v);
    return jb_value(&b);
}

/* ---- JSON ---- */

static void json_str(struct jrender *r, struct jbuf *b, const char *s, size_t n, bool ascii)
{
    jb_putc(r, b, '"');
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        char t[16];
        if (c == '"' || c == '\\') {
            t[0] = '\\';
            t[1] = (char)c;
            jb_put(r, b, t, 2);
            i++;
        } else if (c < 0x20) {
            const char *e = c == '\n'   ? "\\n"
                            : c == '\r' ? "\\r"
                            : c == '\t' ? "\\t"
                            : c == '\b' ? "\\b"
                            : c == '\f' ? "\\f"
                                        : NULL;
            if (e) {
                jb_puts(r, b, e);
            } else {
                snprintf(t, sizeof(t), "\\u%04x", c);
                jb_puts(r, b, t);
            }
            i++;
        } else if (c >= 0x80 && ascii) {
            size_t k;
            uint32_t cp = ju_decode(s + i, n - i, &k);
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(t, sizeof(t), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                snprintf(t, sizeof(t), "\\u%04x", cp);
            }
            jb_puts(r, b, t);
            i += k;
        } else {
            size_t j = i + 1;
            while (j < n && (unsigned char)s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' &&
                   !(ascii && (unsigned char)s[j] >= 0x80))
                j++;
            jb_put(r, b, s + i, j - i);
            i = j;
        }
    }
    jb_putc(r, b, '"');
}

static void json_indent(struct jrender *r, struct jbuf *b, int indent, int level)
{
    jb_putc(r, b, '\n');
    for (int i = 0; i < indent * level; i++)
        jb_putc(r, b, ' ');
}

static int key_cmp(const void *x, const void *y)
{
    const struct jv *a = *(const struct jv *const *)x, *c = *(const struct jv *const *)y;
    size_t n = a->n < c->n ? a->n : c->n;
    int d = memcmp(a->u.s, c->u.s, n);
    return d ? d : (a->n < c->n ? -1 : a->n > c->n);
}

void jv_json_append(struct jrender *r, const struct jnode *at, struct jbuf *b, struct jv v,
                    const struct jjson_opts *o, int level)
{
    char t[64];
    jr_step(r, at);
    if (level > 200)
        jr_fail(r, at, TX_EINVAL, "tojson: a value nested more than 200 deep");
    switch (v.t) {
    case JV_NONE:
        jb_puts(r, b, "null");
        return;
    case JV_BOOL:
        jb_puts(r, b, v.u.b ? "true" : "false");
        return;
    case JV_INT:
        snprintf(t, sizeof(t), "%lld", (long long)v.u.i);
        jb_puts(r, b, t);
        return;
    case JV_FLOAT:
        if (isnan(v.u.f))
            jb_puts(r, b, "NaN");
        else if (isinf(v.u.f))
            jb_puts(r, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            jv_float_repr(v.u.f, t, sizeof(t));
            jb_puts(r, b, t);
        }
        return;
    case JV_STR:
        json_str(r, b, v.u.s, v.n, o->ensure_ascii);
        return;
    case JV_LIST:
    case JV_TUPLE: {
        struct jlist *l = v.u.l;
        if (!l->n) {
            jb_puts(r, b, "[]");
            return;
        }
        jb_putc(r, b, '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                jb_put(r, b, o->item_sep, o->item_sep_n);
            if (o->indent >= 0)
                json_indent(r, b, o->indent, level + 1);
            jv_json_append(r, at, b, l->v[i], o, level + 1);
        }
        if (o->indent >= 0)
            json_indent(r, b, o->indent, level);
        jb_putc(r, b, ']');
        return;
    }
    case JV_DICT: {
        struct jdict *d = v.u.d;
        if (!d->n) {
            jb_puts(r, b, "{}");
            return;
        }
        /* the keys as JSON strings (Python converts numbers, None, bools) */
        struct jv **order = jr_alloc(r, d->n * sizeof(*order));
        struct jv *keys = jr_alloc(r, d->n * sizeof(*keys));
        for (size_t i = 0; i < d->n; i++) {
            struct jv k = d->k[i];
            if (k.t == JV_NONE)
                k = jv_cstr("null");
            else if (k.t == JV_BOOL)
                k = jv_cstr(k.u.b ? "true" : "false");
            else if (k.t == JV_INT || k.t == JV_FLOAT)
                k = jv_to_str(r, k);
            else if (k.t != JV_STR)
                jr_fail(r, at, TX_EINVAL, "tojson: keys must be str, int, float, bool or None, not %s",
                        jv_type_name(k));
            keys[i] = k;
            keys[i].t = JV_STR;
            order[i] = &keys[i];
        }
        if (o->sort_keys)
            qsort(order, d->n, sizeof(*order), key_cmp);
        jb_putc(r, b, '{');
        for (size_t i = 0; i < d->n; i++) {
            size_t idx = (size_t)(order[i] - keys);
            if (i)
                jb_put(r, b, o->item_sep, o->item_sep_n);
            if (o->indent >= 0)
                json_indent(r, b, o->indent, level + 1);
            json_str(r, b, keys[idx].u.s, keys[idx].n, o->ensure_ascii);
            jb_put(r, b, o->key_sep, o->key_sep_n);
            jv_json_append(r, at, b, d->v[idx], o, level + 1);
        }
        if (o->indent >= 0)
            json_indent(r, b, o->indent, level);
        jb_putc(r, b, '}');
        return;
    }
    default:
        jr_fail(r, at, TX_EINVAL, "tojson: Object of type %s is not JSON serializable",
                jv_type_name(v));
    }
}
