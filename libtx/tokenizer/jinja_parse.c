/* SPDX-License-Identifier: MIT */
/*
 * The Jinja parser: tokens into a syntax tree (struct jnode), with Jinja2's
 * operator precedence. A construct this renderer does not implement is an
 * error naming it and its line and column, never skipped.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "jinja.h"

#define MAX_NEST 100

struct parser {
    struct jarena *a;
    const struct jtoken *t;
    size_t n, i;
    char *err;
    size_t errsz;
    int depth;
    bool failed;
    jmp_buf fail;
};

_Noreturn static void pfail(struct parser *P, const struct jtoken *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

_Noreturn static void pfail(struct parser *P, const struct jtoken *at, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (at)
        snprintf(P->err, P->errsz, "line %d, column %d: %s", at->line, at->col, msg);
    else
        snprintf(P->err, P->errsz, "%s", msg);
    longjmp(P->fail, 1);
}

static const struct jtoken *cur(struct parser *P)
{
    return &P->t[P->i];
}

static const struct jtoken *next(struct parser *P)
{
    const struct jtoken *k = &P->t[P->i];
    if (k->t != JT_EOF)
        P->i++;
    return k;
}

static bool is_op(const struct jtoken *k, const char *op)
{
    return k->t == JT_OP && k->n == strlen(op) && !memcmp(k->s, op, k->n);
}

static bool is_name(const struct jtoken *k, const char *w)
{
    return k->t == JT_NAME && k->n == strlen(w) && !memcmp(k->s, w, k->n);
}

static const char *tok_desc(const struct jtoken *k, char *buf, size_t sz)
{
    switch (k->t) {
    case JT_EOF:
        return "the end of the template";
    case JT_DATA:
        return "template text";
    case JT_VAR_BEGIN:
        return "'{{'";
    case JT_VAR_END:
        return "'}}'";
    case JT_BLOCK_BEGIN:
        return "'{%'";
    case JT_BLOCK_END:
        return "'%}'";
    case JT_STRING:
        return "a string";
    case JT_INT:
    case JT_FLOAT:
        return "a number";
    case JT_NAME:
    case JT_OP:
        snprintf(buf, sz, "'%.*s'", (int)(k->n > 40 ? 40 : k->n), k->s);
        return buf;
    }
    return "?";
}

_Noreturn static void unexpected(struct parser *P, const char *wanted)
{
    char b[64];
    pfail(P, cur(P), "expected %s, got %s", wanted, tok_desc(cur(P), b, sizeof(b)));
}

static void expect_op(struct parser *P, const char *op)
{
    if (!is_op(cur(P), op)) {
        char w[16];
        snprintf(w, sizeof(w), "'%s'", op);
        unexpected(P, w);
    }
    next(P);
}

static void *palloc(struct parser *P, size_t n)
{
    void *p = jarena_alloc(P->a, n);
    if (!p)
        pfail(P, NULL, "out of memory (the template is too large for the memory limit)");
    memset(p, 0, n);
    return p;
}

static struct jnode *node(struct parser *P, enum jnode_kind k, const struct jtoken *at)
{
    struct jnode *x = palloc(P, sizeof(*x));
    x->kind = k;
    x->line = at->line;
    x->col = at->col;
    return x;
}

static const char *name_str(struct parser *P, const struct jtoken *k)
{
    char *s = palloc(P, k->n + 1);
    memcpy(s, k->s, k->n);
    return s;
}

/* growable arrays in the arena */
struct kids {
    struct jnode **v;
    const char **names;
    int *ops;
    size_t n, cap;
};

static void kids_push(struct parser *P, struct kids *k, struct jnode *x, const char *name, int op)
{
    if (k->n == k->cap) {
        size_t nc = k->cap ? k->cap * 2 : 4;
        struct jnode **nv = palloc(P, nc * sizeof(*nv));
        const char **nn = palloc(P, nc * sizeof(*nn));
        int *no = palloc(P, nc * sizeof(*no));
        if (k->n) {
            memcpy(nv, k->v, k->n * sizeof(*nv));
            memcpy(nn, k->names, k->n * sizeof(*nn));
            memcpy(no, k->ops, k->n * sizeof(*no));
        }
        k->v = nv;
        k->names = nn;
        k->ops = no;
        k->cap = nc;
    }
    k->v[k->n] = x;
    k->names[k->n] = name;
    k->ops[k->n] = op;
    k->n++;
}

static void enter(struct parser *P)
{
    if (++P->depth > MAX_NEST)
        pfail(P, cur(P), "expressions or blocks nested more than %d deep", MAX_NEST);
}

static struct jnode *parse_expr(struct parser *P);
static struct jnode *parse_unary(struct parser *P, bool with_filter);
static struct jnode *parse_or(struct parser *P);

/* call arguments after '(' up to ')': positional and name=value */
static void parse_args(struct parser *P, struct kids *k)
{
    expect_op(P, "(");
    while (!is_op(cur(P), ")")) {
        if (k->n)
            expect_op(P, ",");
        if (is_op(cur(P), ")"))
            break;
        if (is_op(cur(P), "*") || is_op(cur(P), "**"))
            pfail(P, cur(P), "unsupported: *args / **kwargs in a call");
        const char *name = NULL;
        if (cur(P)->t == JT_NAME && is_op(&P->t[P->i + 1], "=")) {
            name = name_str(P, next(P));
            next(P);
        }
        kids_push(P, k, parse_expr(P), name, 0);
    }
    next(P);
}

static void set_kids(struct jnode *x, struct kids *k)
{
    x->kids = k->v;
    x->nkids = k->n;
    x->params = k->names;
    x->nparams = k->n;
    x->ops = k->ops;
}

static struct jnode *parse_primary(struct parser *P)
{
    const struct jtoken *k = cur(P);
    struct jnode *x;
    switch (k->t) {
    case JT_NAME: {
        next(P);
        if (is_name(k, "true") || is_name(k, "True") || is_name(k, "false") ||
            is_name(k, "False")) {
            x = node(P, JN_CONST, k);
            x->v = jv_bool(k->s[0] == 't' || k->s[0] == 'T');
        } else if (is_name(k, "none") || is_name(k, "None")) {
            x = node(P, JN_CONST, k);
            x->v = jv_none();
        } else {
            x = node(P, JN_NAME, k);
            x->s = name_str(P, k);
            x->n = k->n;
        }
        return x;
    }
    case JT_STRING: {
        /* adjacent literals concatenate */
        size_t total = 0, j = P->i;
        while (P->t[j].t == JT_STRING)
            total += P->t[j++].n;
        char *s = palloc(P, total + 1);
        size_t o = 0;
        while (cur(P)->t == JT_STRING) {
            const struct jtoken *t = next(P);
            memcpy(s + o, t->s, t->n);
            o += t->n;
        }
        x = node(P, JN_CONST, k);
        x->v = jv_str_ref(s, total);
        return x;
    }
    case JT_INT:
        next(P);
        x = node(P, JN_CONST, k);
        x->v = jv_int(k->i);
        return x;
    case JT_FLOAT:
        next(P);
        x = node(P, JN_CONST, k);
        x->v = jv_float(k->f);
        return x;
    case JT_OP:
        if (is_op(k, "(")) {
            next(P);
            if (is_op(cur(P), ")")) {
                next(P);
                return node(P, JN_TUPLE, k);
            }
            struct jnode *e = parse_expr(P);
            if (!is_op(cur(P), ",")) {
                expect_op(P, ")");
                return e;
            }
            struct kids kk = {0};
            kids_push(P, &kk, e, NULL, 0);
            while (is_op(cur(P), ",")) {
                next(P);
                if (is_op(cur(P), ")"))
                    break;
                kids_push(P, &kk, parse_expr(P), NULL, 0);
            }
            expect_op(P, ")");
            x = node(P, JN_TUPLE, k);
            set_kids(x, &kk);
            return x;
        }
        if (is_op(k, "[")) {
            next(P);
            struct kids kk = {0};
            while (!is_op(cur(P), "]")) {
                if (kk.n)
                    expect_op(P, ",");
                if (is_op(cur(P), "]"))
                    break;
                kids_push(P, &kk, parse_expr(P), NULL, 0);
            }
            next(P);
            x = node(P, JN_LIST, k);
            set_kids(x, &kk);
            return x;
        }
        if (is_op(k, "{")) {
            next(P);
            struct kids kk = {0};
            while (!is_op(cur(P), "}")) {
                if (kk.n)
                    expect_op(P, ",");
                if (is_op(cur(P), "}"))
                    break;
                kids_push(P, &kk, parse_expr(P), NULL, 0);
                expect_op(P, ":");
                kids_push(P, &kk, parse_expr(P), NULL, 0);
            }
            next(P);
            x = node(P, JN_DICT, k);
            set_kids(x, &kk);
            return x;
        }
        break;
    default:
        break;
    }
    unexpected(P, "an expression");
}

static struct jnode *parse_subscript(struct parser *P, struct jnode *obj, const struct jtoken *at)
{
    /* after '[' */
    struct jnode *parts[3] = {NULL, NULL, NULL};
    int np = 0;
    bool slice = false;
    for (;;) {
        if (is_op(cur(P), ":")) {
            slice = true;
            if (np >= 2)
                pfail(P, cur(P), "a slice has at most three parts");
            next(P);
            np++;
            continue;
        }
        if (is_op(cur(P), "]"))
            break;
        if (is_op(cur(P), ","))
            pfail(P, cur(P), "unsupported: a tuple as a subscript");
        if (parts[np])
            unexpected(P, "':' or ']'");
        parts[np] = parse_expr(P);
    }
    next(P);
    struct jnode *x;
    if (slice) {
        x = node(P, JN_SLICE, at);
        x->a = obj;
        x->b = parts[0];
        x->c = parts[1];
        x->d = parts[2];
    } else {
        if (!parts[0])
            pfail(P, at, "empty subscript []");
        x = node(P, JN_ITEM, at);
        x->a = obj;
        x->b = parts[0];
    }
    return x;
}

static struct jnode *parse_postfix(struct parser *P, struct jnode *x)
{
    for (;;) {
        const struct jtoken *k = cur(P);
        if (is_op(k, ".")) {
            next(P);
            const struct jtoken *nm = cur(P);
            if (nm->t == JT_NAME) {
                next(P);
                struct jnode *y = node(P, JN_ATTR, k);
                y->a = x;
                y->s = name_str(P, nm);
                y->n = nm->n;
                x = y;
            } else if (nm->t == JT_INT) {
                next(P);
                struct jnode *y = node(P, JN_ITEM, k);
                y->a = x;
                y->b = node(P, JN_CONST, nm);
                y->b->v = jv_int(nm->i);
                x = y;
            } else {
                unexpected(P, "an attribute name after '.'");
            }
        } else if (is_op(k, "[")) {
            next(P);
            x = parse_subscript(P, x, k);
        } else if (is_op(k, "(")) {
            struct kids kk = {0};
            parse_args(P, &kk);
            struct jnode *y = node(P, JN_CALL, k);
            y->a = x;
            set_kids(y, &kk);
            x = y;
        } else {
            return x;
        }
    }
}

/* a filter name at the current token and its (args), applied to x */
static struct jnode *parse_filter_call(struct parser *P, struct jnode *x)
{
    const struct jtoken *nm = cur(P);
    if (nm->t != JT_NAME)
        unexpected(P, "a filter name");
    next(P);
    const char *fname = name_str(P, nm);
    if (!jinja_has_filter(fname))
        pfail(P, nm, "unsupported filter '%s'", fname);
    struct jnode *y = node(P, JN_FILTER, nm);
    y->a = x;
    y->s = fname;
    if (is_op(cur(P), "(")) {
        struct kids kk = {0};
        parse_args(P, &kk);
        set_kids(y, &kk);
    }
    return y;
}

static struct jnode *parse_filter_expr(struct parser *P, struct jnode *x)
{
    for (;;) {
        const struct jtoken *k = cur(P);
        if (is_op(k, "|")) {
            next(P);
            x = parse_filter_call(P, x);
        } else if (is_name(k, "is")) {
            next(P);
            bool neg = false;
            if (is_name(cur(P), "not")) {
                next(P);
                neg = true;
            }
            const struct jtoken *nm = cur(P);
            if (nm->t != JT_NAME)
                unexpected(P, "a test name after 'is'");
            next(P);
            const char *tname = name_str(P, nm);
            if (is_name(nm, "none") || is_name(nm, "None"))
                tname = "none";
            else if (is_name(nm, "true") || is_name(nm, "True"))
                tname = "true";
            else if (is_name(nm, "false") || is_name(nm, "False"))
                tname = "false";
            if (!jinja_has_test(tname))
                pfail(P, nm, "unsupported test '%s'", tname);
            struct jnode *y = node(P, JN_TEST, nm);
            y->a = x;
            y->s = tname;
            y->neg = neg;
            const struct jtoken *t2 = cur(P);
            if (is_op(t2, "(")) {
                struct kids kk = {0};
                parse_args(P, &kk);
                set_kids(y, &kk);
            } else if ((t2->t == JT_NAME || t2->t == JT_STRING || t2->t == JT_INT ||
                        t2->t == JT_FLOAT || is_op(t2, "[") || is_op(t2, "{")) &&
                       !is_name(t2, "else") && !is_name(t2, "or") && !is_name(t2, "and") &&
                       !is_name(t2, "if") && !is_name(t2, "in") && !is_name(t2, "not") &&
                       !is_name(t2, "is")) {
                /* a single argument without parentheses: x is divisibleby 3 */
                struct kids kk = {0};
                struct jnode *arg = parse_postfix(P, parse_primary(P));
                kids_push(P, &kk, arg, NULL, 0);
                set_kids(y, &kk);
            }
            x = y;
        } else if (is_op(k, "(")) {
            struct kids kk = {0};
            parse_args(P, &kk);
            struct jnode *y = node(P, JN_CALL, k);
            y->a = x;
            set_kids(y, &kk);
            x = y;
        } else {
            return x;
        }
    }
}

static struct jnode *parse_unary(struct parser *P, bool with_filter)
{
    enter(P);
    const struct jtoken *k = cur(P);
    struct jnode *x;
    if (is_op(k, "-") || is_op(k, "+")) {
        next(P);
        x = node(P, JN_UNARY, k);
        x->op = is_op(k, "-") ? JO_NEG : JO_POS;
        x->a = parse_unary(P, false);
    } else {
        x = parse_postfix(P, parse_primary(P));
    }
    if (with_filter)
        x = parse_filter_expr(P, x);
    P->depth--;
    return x;
}

static struct jnode *binary(struct parser *P, const struct jtoken *at, int op, struct jnode *a,
                            struct jnode *b)
{
    struct jnode *x = node(P, JN_BINARY, at);
    x->op = op;
    x->a = a;
    x->b = b;
    return x;
}

static struct jnode *parse_pow(struct parser *P)
{
    struct jnode *x = parse_unary(P, true);
    while (is_op(cur(P), "**")) {
        const struct jtoken *k = next(P);
        x = binary(P, k, JO_POW, x, parse_unary(P, true));
    }
    return x;
}

static struct jnode *parse_math2(struct parser *P)
{
    struct jnode *x = parse_pow(P);
    for (;;) {
        const struct jtoken *k = cur(P);
        int op = is_op(k, "*")    ? JO_MUL
                 : is_op(k, "/")  ? JO_DIV
                 : is_op(k, "//") ? JO_FLOORDIV
                 : is_op(k, "%")  ? JO_MOD
                                  : -1;
        if (op < 0)
            return x;
        next(P);
        x = binary(P, k, op, x, parse_pow(P));
    }
}

static struct jnode *parse_concat(struct parser *P)
{
    struct jnode *x = parse_math2(P);
    while (is_op(cur(P), "~")) {
        const struct jtoken *k = next(P);
        x = binary(P, k, JO_CONCAT, x, parse_math2(P));
    }
    return x;
}

static struct jnode *parse_math1(struct parser *P)
{
    struct jnode *x = parse_concat(P);
    for (;;) {
        const struct jtoken *k = cur(P);
        int op = is_op(k, "+") ? JO_ADD : is_op(k, "-") ? JO_SUB : -1;
        if (op < 0)
            return x;
        next(P);
        x = binary(P, k, op, x, parse_concat(P));
    }
}

static struct jnode *parse_compare(struct parser *P)
{
    const struct jtoken *at = cur(P);
    struct jnode *x = parse_math1(P);
    struct kids kk = {0};
    for (;;) {
        const struct jtoken *k = cur(P);
        int op = is_op(k, "==")   ? JO_EQ
                 : is_op(k, "!=") ? JO_NE
                 : is_op(k, "<")  ? JO_LT
                 : is_op(k, "<=") ? JO_LE
                 : is_op(k, ">")  ? JO_GT
                 : is_op(k, ">=") ? JO_GE
                 : is_name(k, "in") ? JO_IN
                                    : -1;
        if (op < 0 && is_name(k, "not") && is_name(&P->t[P->i + 1], "in")) {
            next(P);
            op = JO_NOTIN;
        }
        if (op < 0)
            break;
        next(P);
        kids_push(P, &kk, parse_math1(P), NULL, op);
    }
    if (!kk.n)
        return x;
    struct jnode *c = node(P, JN_COMPARE, at);
    c->a = x;
    set_kids(c, &kk);
    return c;
}

static struct jnode *parse_not(struct parser *P)
{
    if (is_name(cur(P), "not")) {
        const struct jtoken *k = next(P);
        enter(P);
        struct jnode *x = node(P, JN_NOT, k);
        x->a = parse_not(P);
        P->depth--;
        return x;
    }
    return parse_compare(P);
}

/* left-associative "x WORD y WORD z ...", each operand from sub */
static struct jnode *parse_word_op(struct parser *P, const char *word, enum jnode_kind kind,
                                   struct jnode *(*sub)(struct parser *))
{
    struct jnode *x = sub(P);
    while (is_name(cur(P), word)) {
        const struct jtoken *k = next(P);
        struct jnode *y = node(P, kind, k);
        y->a = x;
        y->b = sub(P);
        x = y;
    }
    return x;
}

static struct jnode *parse_and(struct parser *P)
{
    return parse_word_op(P, "and", JN_AND, parse_not);
}

static struct jnode *parse_or(struct parser *P)
{
    return parse_word_op(P, "or", JN_OR, parse_and);
}

/* condexpr: or ['if' or ['else' condexpr]] */
static struct jnode *parse_expr(struct parser *P)
{
    enter(P);
    struct jnode *x = parse_or(P);
    while (is_name(cur(P), "if")) {
        const struct jtoken *k = next(P);
        struct jnode *c = node(P, JN_COND, k);
        c->b = x;
        c->a = parse_or(P);
        if (is_name(cur(P), "else")) {
            next(P);
            c->c = parse_expr(P);
        }
        x = c;
    }
    P->depth--;
    return x;
}

/* an expression, or a tuple without parentheses (a, b) */
static struct jnode *parse_tuple_expr(struct parser *P)
{
    const struct jtoken *at = cur(P);
    struct jnode *x = parse_expr(P);
    if (!is_op(cur(P), ","))
        return x;
    struct kids kk = {0};
    kids_push(P, &kk, x, NULL, 0);
    while (is_op(cur(P), ",")) {
        next(P);
        if (cur(P)->t == JT_BLOCK_END || cur(P)->t == JT_VAR_END)
            break;
        kids_push(P, &kk, parse_expr(P), NULL, 0);
    }
    struct jnode *t = node(P, JN_TUPLE, at);
    set_kids(t, &kk);
    return t;
}

/* ---- statements ---- */

static void expect_block_end(struct parser *P)
{
    if (cur(P)->t != JT_BLOCK_END)
        unexpected(P, "'%}'");
    next(P);
}

/* assignment targets: name [, name]* (parenthesised too) */
static void parse_targets(struct parser *P, struct kids *k)
{
    bool paren = false;
    if (is_op(cur(P), "(")) {
        paren = true;
        next(P);
    }
    for (;;) {
        const struct jtoken *nm = cur(P);
        if (nm->t != JT_NAME)
            unexpected(P, "a variable name");
        next(P);
        kids_push(P, k, NULL, name_str(P, nm), 0);
        if (!is_op(cur(P), ","))
            break;
        next(P);
    }
    if (paren)
        expect_op(P, ")");
}

static struct jnode *parse_body(struct parser *P, const char *const *ends, const char **which);

/* the body up to {% end %} (a one-word end tag), the end tag consumed */
static struct jnode *parse_block_to(struct parser *P, const char *end)
{
    const char *const ends[] = {end, NULL};
    const char *which = NULL;
    struct jnode *b = parse_body(P, ends, &which);
    next(P);
    next(P);
    expect_block_end(P);
    return b;
}

static bool block_word(struct parser *P, const char *const *words, const char **which)
{
    const struct jtoken *b = cur(P);
    if (b->t != JT_BLOCK_BEGIN)
        return false;
    const struct jtoken *w = &P->t[P->i + 1];
    for (size_t i = 0; words && words[i]; i++)
        if (is_name(w, words[i])) {
            *which = words[i];
            return true;
        }
    return false;
}

static struct jnode *parse_if(struct parser *P, const struct jtoken *at)
{
    struct jnode *x = node(P, JN_IF, at);
    x->a = parse_tuple_expr(P);
    expect_block_end(P);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    const char *which = NULL;
    x->b = parse_body(P, ends, &which);
    const struct jtoken *w = (next(P), next(P)); /* {% and the word */
    if (!strcmp(which, "elif")) {
        x->c = parse_if(P, w);
        return x;
    }
    if (!strcmp(which, "else")) {
        expect_block_end(P);
        static const char *const ends2[] = {"endif", NULL};
        x->c = parse_body(P, ends2, &which);
        next(P);
        next(P);
    }
    expect_block_end(P);
    return x;
}

static struct jnode *parse_for(struct parser *P, const struct jtoken *at)
{
    struct jnode *x = node(P, JN_FOR, at);
    struct kids t = {0};
    parse_targets(P, &t);
    x->params = t.names;
    x->nparams = t.n;
    if (!is_name(cur(P), "in"))
        unexpected(P, "'in'");
    next(P);
    /* the iterable: no conditional expression (its 'if' is the loop filter) */
    x->a = parse_or(P);
    if (is_op(cur(P), ",")) {
        struct kids kk = {0};
        kids_push(P, &kk, x->a, NULL, 0);
        while (is_op(cur(P), ",")) {
            next(P);
            kids_push(P, &kk, parse_or(P), NULL, 0);
        }
        struct jnode *tup = node(P, JN_TUPLE, at);
        set_kids(tup, &kk);
        x->a = tup;
    }
    if (is_name(cur(P), "if")) {
        next(P);
        x->d = parse_expr(P);
    }
    if (is_name(cur(P), "recursive"))
        pfail(P, cur(P), "unsupported: recursive loops");
    expect_block_end(P);
    static const char *const ends[] = {"else", "endfor", NULL};
    const char *which = NULL;
    x->b = parse_body(P, ends, &which);
    next(P);
    next(P);
    if (!strcmp(which, "else")) {
        expect_block_end(P);
        static const char *const ends2[] = {"endfor", NULL};
        x->c = parse_body(P, ends2, &which);
        next(P);
        next(P);
    }
    expect_block_end(P);
    return x;
}

static struct jnode *parse_set(struct parser *P, const struct jtoken *at)
{
    const struct jtoken *nm = cur(P);
    if (nm->t == JT_NAME && is_op(&P->t[P->i + 1], ".")) {
        /* set ns.attr = value */
        next(P);
        next(P);
        const struct jtoken *an = cur(P);
        if (an->t != JT_NAME)
            unexpected(P, "an attribute name");
        next(P);
        struct jnode *tgt = node(P, JN_ATTR, an);
        tgt->a = node(P, JN_NAME, nm);
        tgt->a->s = name_str(P, nm);
        tgt->a->n = nm->n;
        tgt->s = name_str(P, an);
        tgt->n = an->n;
        expect_op(P, "=");
        struct jnode *x = node(P, JN_SET, at);
        x->a = tgt;
        x->b = parse_tuple_expr(P);
        expect_block_end(P);
        return x;
    }
    struct kids t = {0};
    parse_targets(P, &t);
    if (cur(P)->t == JT_BLOCK_END || is_op(cur(P), "|")) {
        if (t.n != 1)
            pfail(P, at, "a {%% set %%} block assigns one name");
        struct jnode *x = node(P, JN_SET_BLOCK, at);
        x->params = t.names;
        x->nparams = 1;
        if (is_op(cur(P), "|")) {
            /* set x | filter: the filters apply to the body's text */
            struct jnode *hole = node(P, JN_CONST, cur(P));
            hole->v = jv_undef(NULL, 0);
            x->a = parse_filter_expr(P, hole);
        }
        expect_block_end(P);
        x->b = parse_block_to(P, "endset");
        return x;
    }
    expect_op(P, "=");
    struct jnode *x = node(P, JN_SET, at);
    x->params = t.names;
    x->nparams = t.n;
    x->b = parse_tuple_expr(P);
    expect_block_end(P);
    return x;
}

static struct jnode *parse_macro(struct parser *P, const struct jtoken *at)
{
    const struct jtoken *nm = cur(P);
    if (nm->t != JT_NAME)
        unexpected(P, "a macro name");
    next(P);
    struct jnode *x = node(P, JN_MACRO, at);
    x->s = name_str(P, nm);
    x->n = nm->n;
    struct kids k = {0};
    expect_op(P, "(");
    while (!is_op(cur(P), ")")) {
        if (k.n)
            expect_op(P, ",");
        const struct jtoken *pn = cur(P);
        if (pn->t != JT_NAME)
            unexpected(P, "a parameter name");
        next(P);
        struct jnode *def = NULL;
        if (is_op(cur(P), "=")) {
            next(P);
            def = parse_expr(P);
        }
        kids_push(P, &k, def, name_str(P, pn), 0);
    }
    next(P);
    set_kids(x, &k);
    expect_block_end(P);
    static const char *const ends[] = {"endmacro", NULL};
    const char *which = NULL;
    x->b = parse_body(P, ends, &which);
    next(P);
    next(P);
    if (cur(P)->t == JT_NAME)
        next(P); /* {% endmacro name %} */
    expect_block_end(P);
    return x;
}

static struct jnode *parse_statement(struct parser *P)
{
    next(P); /* {% */
    const struct jtoken *w = cur(P);
    if (w->t != JT_NAME)
        unexpected(P, "a statement name");
    next(P);
    enter(P);
    struct jnode *x;
    if (is_name(w, "if")) {
        x = parse_if(P, w);
    } else if (is_name(w, "for")) {
        x = parse_for(P, w);
    } else if (is_name(w, "set")) {
        x = parse_set(P, w);
    } else if (is_name(w, "macro")) {
        x = parse_macro(P, w);
    } else if (is_name(w, "break") || is_name(w, "continue")) {
        x = node(P, is_name(w, "break") ? JN_BREAK : JN_CONTINUE, w);
        expect_block_end(P);
    } else if (is_name(w, "generation")) {
        /* transformers' {% generation %}: renders its body */
        expect_block_end(P);
        x = parse_block_to(P, "endgeneration");
    } else if (is_name(w, "with")) {
        x = node(P, JN_WITH, w);
        struct kids k = {0};
        while (cur(P)->t != JT_BLOCK_END) {
            if (k.n)
                expect_op(P, ",");
            const struct jtoken *nm = cur(P);
            if (nm->t != JT_NAME)
                unexpected(P, "a variable name");
            next(P);
            expect_op(P, "=");
            kids_push(P, &k, parse_expr(P), name_str(P, nm), 0);
        }
        set_kids(x, &k);
        expect_block_end(P);
        x->b = parse_block_to(P, "endwith");
    } else if (is_name(w, "filter")) {
        x = node(P, JN_FILTER_BLOCK, w);
        struct jnode *hole = node(P, JN_CONST, w);
        hole->v = jv_undef(NULL, 0);
        /* filter name [(args)] [| filter ...] */
        struct jnode *f = parse_filter_call(P, hole);
        x->a = parse_filter_expr(P, f);
        expect_block_end(P);
        x->b = parse_block_to(P, "endfilter");
    } else {
        pfail(P, w, "unsupported tag '{%% %.*s %%}'", (int)(w->n > 40 ? 40 : w->n), w->s);
    }
    P->depth--;
    return x;
}

/* statements up to a {% WORD %} with WORD in ends (left unconsumed), or the
 * end of the template when ends is NULL */
static struct jnode *parse_body(struct parser *P, const char *const *ends, const char **which)
{
    const struct jtoken *start = cur(P);
    struct kids k = {0};
    for (;;) {
        const struct jtoken *t = cur(P);
        if (t->t == JT_EOF) {
            if (ends) {
                char want[64];
                snprintf(want, sizeof(want), "{%% %s %%}", ends[0] && ends[1] ? ends[1] : ends[0]);
                for (size_t i = 0; ends[i]; i++)
                    if (!strncmp(ends[i], "end", 3))
                        snprintf(want, sizeof(want), "{%% %s %%}", ends[i]);
                pfail(P, start, "this block is not closed: %s missing", want);
            }
            break;
        }
        if (t->t == JT_DATA) {
            next(P);
            struct jnode *x = node(P, JN_DATA, t);
            x->s = t->s;
            x->n = t->n;
            kids_push(P, &k, x, NULL, 0);
        } else if (t->t == JT_VAR_BEGIN) {
            next(P);
            struct jnode *x = node(P, JN_OUTPUT, t);
            x->a = parse_tuple_expr(P);
            if (cur(P)->t != JT_VAR_END)
                unexpected(P, "'}}'");
            next(P);
            kids_push(P, &k, x, NULL, 0);
        } else if (t->t == JT_BLOCK_BEGIN) {
            if (block_word(P, ends, which))
                break;
            const struct jtoken *w = &P->t[P->i + 1];
            if (w->t == JT_NAME &&
                (is_name(w, "endif") || is_name(w, "endfor") || is_name(w, "else") ||
                 is_name(w, "elif") || is_name(w, "endmacro") || is_name(w, "endset") ||
                 is_name(w, "endwith") || is_name(w, "endfilter") || is_name(w, "endgeneration")))
                pfail(P, w, "unexpected '{%% %.*s %%}'", (int)w->n, w->s);
            kids_push(P, &k, parse_statement(P), NULL, 0);
        } else {
            char b[64];
            pfail(P, t, "unexpected %s", tok_desc(t, b, sizeof(b)));
        }
    }
    struct jnode *body = node(P, JN_BODY, start);
    set_kids(body, &k);
    return body;
}

struct jnode *jinja_parse(struct jarena *a, const struct jtoken *toks, size_t ntoks, char *err,
                          size_t errsz)
{
    struct parser P = {.a = a, .t = toks, .n = ntoks, .err = err, .errsz = errsz};
    if (setjmp(P.fail))
        return NULL;
    return parse_body(&P, NULL, NULL);
}
