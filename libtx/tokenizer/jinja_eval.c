/* SPDX-License-Identifier: MIT */
/*
 * The Jinja evaluator: runs a parsed template (jinja_parse.c) over its
 * variables, with Jinja2's scoping (a loop iteration and a macro call are
 * frames; `set` binds in the innermost one; namespace() attributes are the
 * way out), Python's operators, and a step count that bounds the time.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_error.h>

#include "jinja.h"

_Noreturn void jr_fail(struct jrender *r, const struct jnode *at, int status, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (at)
        snprintf(r->err, r->errsz, "line %d, column %d: %s", at->line, at->col, msg);
    else
        snprintf(r->err, r->errsz, "%s", msg);
    r->status = status;
    longjmp(r->fail, 1);
}

void *jr_alloc(struct jrender *r, size_t n)
{
    void *p = jarena_alloc(r->arena, n);
    if (!p)
        jr_fail(r, NULL, TX_ENOMEM,
                "rendering needs more than the memory limit (%zu bytes in use)", r->arena->used);
    return p;
}

void jr_step(struct jrender *r, const struct jnode *at)
{
    if (++r->steps > r->max_steps)
        jr_fail(r, at, TX_ETIMEDOUT,
                "rendering took more than the step limit (%llu steps): the template loops "
                "too long",
                (unsigned long long)r->max_steps);
}

/* ---- frames ---- */

static struct jframe *frame_new(struct jrender *r, struct jframe *parent)
{
    struct jframe *f = jr_alloc(r, sizeof(*f));
    memset(f, 0, sizeof(*f));
    f->parent = parent;
    return f;
}

static void bind(struct jrender *r, struct jframe *f, const char *name, struct jv v)
{
    jv_dict_set(r, &f->vars, jv_cstr(name), v);
}

static struct jv lookup(struct jrender *r, struct jframe *f, const struct jnode *n)
{
    (void)r;
    for (; f; f = f->parent) {
        struct jv *v = jv_dict_gets(&f->vars, n->s, n->n);
        if (v)
            return *v;
    }
    int fn = jinja_global_func(n->s, n->n);
    if (fn >= 0) {
        struct jv v = {.t = JV_FUNC};
        v.u.fn = fn;
        return v;
    }
    return jv_undef(n->s, n->n);
}

/* ---- output ---- */

static void emit(struct jrender *r, const char *s, size_t n)
{
    if (r->out_n + n > r->out_max)
        jr_fail(r, NULL, TX_ENOMEM, "the rendered text exceeds the output limit (%zu bytes)",
                r->out_max);
    struct jbuf b = {r->out, r->out_n, r->out_cap};
    jb_put(r, &b, s, n);
    r->out = b.p;
    r->out_n = b.n;
    r->out_cap = b.cap;
}

static void emit_value(struct jrender *r, struct jv v)
{
    if (v.t == JV_STR) {
        emit(r, v.u.s, v.n);
        return;
    }
    struct jbuf b = {0};
    jv_str_append(r, &b, v);
    emit(r, b.p, b.n);
}

struct capture {
    char *out;
    size_t n, cap;
};

static void capture_begin(struct jrender *r, struct capture *c)
{
    c->out = r->out;
    c->n = r->out_n;
    c->cap = r->out_cap;
    r->out = NULL;
    r->out_n = r->out_cap = 0;
}

static struct jv capture_end(struct jrender *r, struct capture *c)
{
    struct jv v = jv_str_ref(r->out ? r->out : "", r->out_n);
    r->out = c->out;
    r->out_n = c->n;
    r->out_cap = c->cap;
    return v;
}

/* ---- expressions ---- */

static struct jv eval(struct jrender *r, struct jframe *f, const struct jnode *n);

_Noreturn static void undefined_use(struct jrender *r, const struct jnode *at, struct jv u)
{
    if (u.u.s)
        jr_fail(r, at, TX_EINVAL, "'%.*s' is undefined", (int)(u.n > 80 ? 80 : u.n), u.u.s);
    jr_fail(r, at, TX_EINVAL, "an undefined value used");
}

struct jv *jargs_get(struct jargs *a, size_t pos, const char *name)
{
    if (name)
        for (size_t i = 0; i < a->n; i++)
            if (a->names[i] && !strcmp(a->names[i], name))
                return &a->v[i];
    size_t k = 0;
    for (size_t i = 0; i < a->n; i++) {
        if (a->names[i])
            continue;
        if (k++ == pos)
            return &a->v[i];
    }
    return NULL;
}

static void eval_args(struct jrender *r, struct jframe *f, const struct jnode *n, struct jargs *a)
{
    a->n = n->nkids;
    a->v = n->nkids ? jr_alloc(r, n->nkids * sizeof(*a->v)) : NULL;
    a->names = n->params;
    for (size_t i = 0; i < n->nkids; i++)
        a->v[i] = eval(r, f, n->kids[i]);
}

struct jv jr_iterate(struct jrender *r, const struct jnode *at, struct jv v)
{
    switch (v.t) {
    case JV_LIST:
    case JV_TUPLE: {
        struct jv l = v;
        l.t = JV_LIST;
        return l;
    }
    case JV_DICT:
    case JV_NS: {
        struct jv l = jv_list_new(r, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++)
            jv_list_push(r, l, v.u.d->k[i]);
        return l;
    }
    case JV_STR: {
        struct jv l = jv_list_new(r, ju_len(v.u.s, v.n));
        size_t i = 0;
        while (i < v.n) {
            size_t k;
            ju_decode(v.u.s + i, v.n - i, &k);
            jv_list_push(r, l, jv_str_ref(v.u.s + i, k));
            i += k;
        }
        return l;
    }
    case JV_UNDEF:
        return jv_list_new(r, 0);
    default:
        jr_fail(r, at, TX_EINVAL, "'%s' object is not iterable", jv_type_name(v));
    }
}

static const char *dict_methods[] = {"items", "keys", "values", "get", NULL};

struct jv jr_getattr(struct jrender *r, const struct jnode *at, struct jv obj, const char *name,
                     size_t n)
{
    switch (obj.t) {
    case JV_UNDEF:
        undefined_use(r, at, obj);
    case JV_DICT:
        for (size_t i = 0; dict_methods[i]; i++)
            if (strlen(dict_methods[i]) == n && !memcmp(dict_methods[i], name, n))
                goto method;
        /* fall through */
    case JV_NS:
    case JV_LOOP: {
        if (obj.t == JV_LOOP && n == 5 && !memcmp(name, "cycle", 5))
            goto method;
        struct jv *v = jv_dict_gets(obj.u.d, name, n);
        return v ? *v : jv_undef(name, n);
    }
    default:
        if (jinja_has_method(obj, name, n))
            goto method;
        if (jinja_is_unsafe_method(obj, name, n))
            jr_fail(r, at, TX_EINVAL,
                    "access to attribute '%.*s' of '%s' object is unsafe (the sandbox's "
                    "values are immutable)",
                    (int)(n > 40 ? 40 : n), name, jv_type_name(obj));
        return jv_undef(name, n);
    }
method: {
    struct jbound *bm = jr_alloc(r, sizeof(*bm));
    bm->self = obj;
    char *nm = jr_alloc(r, n + 1);
    memcpy(nm, name, n);
    nm[n] = 0;
    bm->name = nm;
    struct jv v = {.t = JV_METHOD};
    v.u.bm = bm;
    return v;
}
}

/* Python's index normalisation: i in [0, len) or -1 when out of range */
static int64_t norm_index(int64_t i, size_t len)
{
    if (i < 0)
        i += (int64_t)len;
    return i < 0 || i >= (int64_t)len ? -1 : i;
}

struct jv jr_getitem(struct jrender *r, const struct jnode *at, struct jv obj, struct jv key)
{
    switch (obj.t) {
    case JV_UNDEF:
        undefined_use(r, at, obj);
    case JV_DICT:
    case JV_NS:
    case JV_LOOP: {
        struct jv *v = jv_dict_get(obj.u.d, key);
        if (v)
            return *v;
        break;
    }
    case JV_LIST:
    case JV_TUPLE:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t i = norm_index(key.t == JV_INT ? key.u.i : key.u.b, obj.u.l->n);
            return i < 0 ? jv_undef(NULL, 0) : obj.u.l->v[i];
        }
        break;
    case JV_STR:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            size_t len = ju_len(obj.u.s, obj.n);
            int64_t i = norm_index(key.t == JV_INT ? key.u.i : key.u.b, len);
            if (i < 0)
                return jv_undef(NULL, 0);
            size_t b = ju_offset(obj.u.s, obj.n, (size_t)i), k;
            ju_decode(obj.u.s + b, obj.n - b, &k);
            return jv_str_ref(obj.u.s + b, k);
        }
        break;
    default:
        break;
    }
    if (key.t == JV_STR)
        return jr_getattr(r, at, obj, key.u.s, key.n);
    return jv_undef(NULL, 0);
}

static bool slice_arg(struct jrender *r, struct jframe *f, const struct jnode *n, int64_t *out)
{
    if (!n)
        return false;
    struct jv v = eval(r, f, n);
    if (v.t == JV_NONE)
        return false;
    if (v.t != JV_INT && v.t != JV_BOOL)
        jr_fail(r, n, TX_EINVAL, "slice indices must be integers or None");
    *out = v.t == JV_INT ? v.u.i : v.u.b;
    return true;
}

static struct jv eval_slice(struct jrender *r, struct jframe *f, const struct jnode *n)
{
    struct jv obj = eval(r, f, n->a);
    int64_t start = 0, stop = 0, step = 1;
    bool has_start = slice_arg(r, f, n->b, &start), has_stop = slice_arg(r, f, n->c, &stop);
    slice_arg(r, f, n->d, &step);
    if (step == 0)
        jr_fail(r, n, TX_EINVAL, "slice step cannot be zero");
    int64_t len;
    if (obj.t == JV_STR)
        len = (int64_t)ju_len(obj.u.s, obj.n);
    else if (jv_is_seq(obj))
        len = (int64_t)obj.u.l->n;
    else if (obj.t == JV_UNDEF)
        undefined_use(r, n, obj);
    else
        jr_fail(r, n, TX_EINVAL, "'%s' object is not subscriptable", jv_type_name(obj));
    /* Python's PySlice_AdjustIndices */
    if (!has_start)
        start = step < 0 ? len - 1 : 0;
    else if (start < 0) {
        start += len;
        if (start < 0)
            start = step < 0 ? -1 : 0;
    } else if (start >= len) {
        start = step < 0 ? len - 1 : len;
    }
    if (!has_stop)
        stop = step < 0 ? -1 : len;
    else if (stop < 0) {
        stop += len;
        if (stop < 0)
            stop = step < 0 ? -1 : 0;
    } else if (stop >= len) {
        stop = step < 0 ? len - 1 : len;
    }
    if (obj.t == JV_STR) {
        struct jbuf b = {0};
        if (step == 1) {
            if (stop > start) {
                size_t bs = ju_offset(obj.u.s, obj.n, (size_t)start);
                size_t be = ju_offset(obj.u.s, obj.n, (size_t)stop);
                return jv_str_ref(obj.u.s + bs, be - bs);
            }
            return jv_cstr("");
        }
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            jr_step(r, n);
            size_t bo = ju_offset(obj.u.s, obj.n, (size_t)i), k;
            ju_decode(obj.u.s + bo, obj.n - bo, &k);
            jb_put(r, &b, obj.u.s + bo, k);
        }
        return jb_value(&b);
    }
    struct jv l = jv_list_new(r, 0);
    l.t = JV_LIST;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        jr_step(r, n);
        jv_list_push(r, l, obj.u.l->v[i]);
    }
    l.t = obj.t;
    return l;
}

_Noreturn static void bad_operands(struct jrender *r, const struct jnode *at, const char *op,
                                   struct jv a, struct jv b)
{
    if (a.t == JV_UNDEF)
        undefined_use(r, at, a);
    if (b.t == JV_UNDEF)
        undefined_use(r, at, b);
    if (a.t == JV_STR && !strcmp(op, "+"))
        jr_fail(r, at, TX_EINVAL, "can only concatenate str (not \"%s\") to str", jv_type_name(b));
    jr_fail(r, at, TX_EINVAL, "unsupported operand type(s) for %s: '%s' and '%s'", op,
            jv_type_name(a), jv_type_name(b));
}

static struct jv int_result(struct jrender *r, const struct jnode *at, bool overflow, int64_t v)
{
    if (overflow)
        jr_fail(r, at, TX_ENOTSUP, "integer result outside the 64-bit range");
    return jv_int(v);
}

static struct jv repeat(struct jrender *r, const struct jnode *at, struct jv seq, int64_t times)
{
    if (times < 0)
        times = 0;
    if (seq.t == JV_STR ? !seq.n : !seq.u.l->n)
        return seq.t == JV_STR ? jv_cstr("") : jv_list_new(r, 0); /* nothing to repeat */
    if (seq.t == JV_STR) {
        if (seq.n && (uint64_t)times > r->out_max / seq.n)
            jr_fail(r, at, TX_ENOMEM, "string repetition larger than the output limit");
        struct jbuf b = {0};
        for (int64_t i = 0; i < times; i++)
            jb_put(r, &b, seq.u.s, seq.n);
        return jb_value(&b);
    }
    if ((uint64_t)times * seq.u.l->n > (uint64_t)r->max_steps)
        jr_fail(r, at, TX_ETIMEDOUT, "list repetition larger than the step limit");
    struct jv l = jv_list_new(r, 0);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++)
            jv_list_push(r, l, seq.u.l->v[k]);
    l.t = seq.t;
    return l;
}

static struct jv arith(struct jrender *r, const struct jnode *at, int op, struct jv a, struct jv b)
{
    static const char *const names[] = {[JO_ADD] = "+",      [JO_SUB] = "-",
                                        [JO_MUL] = "*",      [JO_DIV] = "/",
                                        [JO_FLOORDIV] = "//", [JO_MOD] = "%",
                                        [JO_POW] = "**"};
    int64_t x = 0;
    if (jv_is_num(a) && jv_is_num(b)) {
        bool flt = a.t == JV_FLOAT || b.t == JV_FLOAT;
        switch (op) {
        case JO_ADD:
            if (flt)
                return jv_float(jv_num_f(a) + jv_num_f(b));
            {
                bool ovf = __builtin_add_overflow(jv_num_i(a), jv_num_i(b), &x);
                return int_result(r, at, ovf, x);
            }
        case JO_SUB:
            if (flt)
                return jv_float(jv_num_f(a) - jv_num_f(b));
            {
                bool ovf = __builtin_sub_overflow(jv_num_i(a), jv_num_i(b), &x);
                return int_result(r, at, ovf, x);
            }
        case JO_MUL:
            if (flt)
                return jv_float(jv_num_f(a) * jv_num_f(b));
            {
                bool ovf = __builtin_mul_overflow(jv_num_i(a), jv_num_i(b), &x);
                return int_result(r, at, ovf, x);
            }
        case JO_DIV:
            if (jv_num_f(b) == 0.0)
                jr_fail(r, at, TX_EINVAL, "division by zero");
            return jv_float(jv_num_f(a) / jv_num_f(b));
        case JO_FLOORDIV:
        case JO_MOD:
            if (jv_num_f(b) == 0.0)
                jr_fail(r, at, TX_EINVAL, "integer division or modulo by zero");
            if (flt) {
                double q = floor(jv_num_f(a) / jv_num_f(b));
                double m = fmod(jv_num_f(a), jv_num_f(b));
                if (m != 0.0 && ((m < 0) != (jv_num_f(b) < 0)))
                    m += jv_num_f(b);
                return op == JO_FLOORDIV ? jv_float(q) : jv_float(m);
            } else {
                int64_t p = jv_num_i(a), q = jv_num_i(b);
                if (p == INT64_MIN && q == -1)
                    jr_fail(r, at, TX_ENOTSUP, "integer result outside the 64-bit range");
                int64_t d = p / q, m = p % q;
                if (m != 0 && ((m < 0) != (q < 0))) {
                    d--;
                    m += q;
                }
                return op == JO_FLOORDIV ? jv_int(d) : jv_int(m);
            }
        case JO_POW:
            if (!flt && jv_num_i(b) >= 0) {
                int64_t base = jv_num_i(a), e = jv_num_i(b), res = 1;
                while (e > 0) {
                    if (__builtin_mul_overflow(res, base, &res))
                        jr_fail(r, at, TX_ENOTSUP, "integer result outside the 64-bit range");
                    e--;
                    if (res == 0 || res == 1)
                        break;
                    jr_step(r, at);
                }
                return jv_int(res);
            }
            return jv_float(pow(jv_num_f(a), jv_num_f(b)));
        default:
            break;
        }
    }
    if (op == JO_ADD && a.t == JV_STR && b.t == JV_STR) {
        char *p = jr_alloc(r, a.n + b.n + 1);
        memcpy(p, a.u.s, a.n);
        memcpy(p + a.n, b.u.s, b.n);
        p[a.n + b.n] = 0;
        return jv_str_ref(p, a.n + b.n);
    }
    if (op == JO_ADD && jv_is_seq(a) && a.t == b.t) {
        struct jv l = jv_list_new(r, a.u.l->n + b.u.l->n);
        for (size_t i = 0; i < a.u.l->n; i++)
            jv_list_push(r, l, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++)
            jv_list_push(r, l, b.u.l->v[i]);
        l.t = a.t;
        return l;
    }
    if (op == JO_MUL && (a.t == JV_STR || jv_is_seq(a)) && (b.t == JV_INT || b.t == JV_BOOL))
        return repeat(r, at, a, jv_num_i(b));
    if (op == JO_MUL && (b.t == JV_STR || jv_is_seq(b)) && (a.t == JV_INT || a.t == JV_BOOL))
        return repeat(r, at, b, jv_num_i(a));
    if (op == JO_MOD && a.t == JV_STR)
        jr_fail(r, at, TX_ENOTSUP, "unsupported: printf-style string formatting with '%%'");
    bad_operands(r, at, names[op], a, b);
}

static bool contains(struct jrender *r, const struct jnode *at, struct jv needle, struct jv hay)
{
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR) {
            if (needle.t == JV_UNDEF)
                undefined_use(r, at, needle);
            jr_fail(r, at, TX_EINVAL, "'in <string>' requires string as left operand, not %s",
                    jv_type_name(needle));
        }
        if (!needle.n)
            return true;
        for (size_t i = 0; i + needle.n <= hay.n; i++)
            if (!memcmp(hay.u.s + i, needle.u.s, needle.n))
                return true;
        return false;
    case JV_LIST:
    case JV_TUPLE:
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (jv_equal(hay.u.l->v[i], needle))
                return true;
        return false;
    case JV_DICT:
    case JV_NS:
        return jv_dict_get(hay.u.d, needle) != NULL;
    case JV_UNDEF:
        return false;
    default:
        jr_fail(r, at, TX_EINVAL, "argument of type '%s' is not iterable", jv_type_name(hay));
    }
}

static bool compare_op(struct jrender *r, const struct jnode *at, int op, struct jv a, struct jv b)
{
    switch (op) {
    case JO_EQ:
        return jv_equal(a, b);
    case JO_NE:
        return !jv_equal(a, b);
    case JO_IN:
        return contains(r, at, a, b);
    case JO_NOTIN:
        return !contains(r, at, a, b);
    default: {
        if (a.t == JV_UNDEF)
            undefined_use(r, at, a);
        if (b.t == JV_UNDEF)
            undefined_use(r, at, b);
        int c = jv_compare(r, at, a, b);
        return op == JO_LT ? c < 0 : op == JO_LE ? c <= 0 : op == JO_GT ? c > 0 : c >= 0;
    }
    }
}

static struct jv call_macro(struct jrender *r, const struct jnode *at, struct jv callee,
                            struct jargs *args);

struct jv jr_call(struct jrender *r, const struct jnode *at, struct jv callee, struct jargs *args)
{
    switch (callee.t) {
    case JV_MACRO:
        return call_macro(r, at, callee, args);
    case JV_FUNC:
        return jinja_call_func(r, at, callee.u.fn, args, jv_none());
    case JV_METHOD:
        return jinja_call_method(r, at, callee.u.bm, args);
    case JV_UNDEF:
        undefined_use(r, at, callee);
    default:
        jr_fail(r, at, TX_EINVAL, "'%s' object is not callable", jv_type_name(callee));
    }
}

static struct jv eval(struct jrender *r, struct jframe *f, const struct jnode *n)
{
    jr_step(r, n);
    switch (n->kind) {
    case JN_CONST:
        return n->v;
    case JN_NAME:
        return lookup(r, f, n);
    case JN_LIST:
    case JN_TUPLE: {
        struct jv l = jv_list_new(r, n->nkids);
        for (size_t i = 0; i < n->nkids; i++)
            jv_list_push(r, l, eval(r, f, n->kids[i]));
        l.t = n->kind == JN_LIST ? JV_LIST : JV_TUPLE;
        return l;
    }
    case JN_DICT: {
        struct jv d = jv_dict_new(r, n->nkids / 2);
        for (size_t i = 0; i + 1 < n->nkids; i += 2) {
            struct jv k = eval(r, f, n->kids[i]);
            if (k.t == JV_LIST || k.t == JV_DICT || k.t == JV_NS)
                jr_fail(r, n->kids[i], TX_EINVAL, "unhashable type: '%s'", jv_type_name(k));
            jv_dict_set(r, d.u.d, k, eval(r, f, n->kids[i + 1]));
        }
        return d;
    }
    case JN_ATTR:
        return jr_getattr(r, n, eval(r, f, n->a), n->s, n->n);
    case JN_ITEM:
        return jr_getitem(r, n, eval(r, f, n->a), eval(r, f, n->b));
    case JN_SLICE:
        return eval_slice(r, f, n);
    case JN_CALL: {
        struct jv callee = eval(r, f, n->a);
        struct jargs args;
        eval_args(r, f, n, &args);
        return jr_call(r, n, callee, &args);
    }
    case JN_FILTER: {
        struct jv x = eval(r, f, n->a);
        struct jargs args;
        eval_args(r, f, n, &args);
        return jinja_filter(r, n, n->s, x, &args);
    }
    case JN_TEST: {
        struct jv x = eval(r, f, n->a);
        struct jargs args;
        eval_args(r, f, n, &args);
        bool t = jinja_test(r, n, n->s, x, &args);
        return jv_bool(n->neg ? !t : t);
    }
    case JN_UNARY: {
        struct jv x = eval(r, f, n->a);
        if (!jv_is_num(x)) {
            if (x.t == JV_UNDEF)
                undefined_use(r, n, x);
            jr_fail(r, n, TX_EINVAL, "bad operand type for unary %s: '%s'",
                    n->op == JO_NEG ? "-" : "+", jv_type_name(x));
        }
        if (n->op == JO_POS)
            return x.t == JV_BOOL ? jv_int(x.u.b) : x;
        if (x.t == JV_FLOAT)
            return jv_float(-x.u.f);
        if (jv_num_i(x) == INT64_MIN)
            jr_fail(r, n, TX_ENOTSUP, "integer result outside the 64-bit range");
        return jv_int(-jv_num_i(x));
    }
    case JN_BINARY: {
        struct jv a = eval(r, f, n->a), b = eval(r, f, n->b);
        if (n->op == JO_CONCAT) {
            struct jbuf buf = {0};
            jv_str_append(r, &buf, a);
            jv_str_append(r, &buf, b);
            return jb_value(&buf);
        }
        return arith(r, n, n->op, a, b);
    }
    case JN_COMPARE: {
        struct jv a = eval(r, f, n->a);
        for (size_t i = 0; i < n->nkids; i++) {
            struct jv b = eval(r, f, n->kids[i]);
            if (!compare_op(r, n, n->ops[i], a, b))
                return jv_bool(false);
            a = b;
        }
        return jv_bool(true);
    }
    case JN_AND: {
        struct jv a = eval(r, f, n->a);
        return jv_truthy(a) ? eval(r, f, n->b) : a;
    }
    case JN_OR: {
        struct jv a = eval(r, f, n->a);
        return jv_truthy(a) ? a : eval(r, f, n->b);
    }
    case JN_NOT:
        return jv_bool(!jv_truthy(eval(r, f, n->a)));
    case JN_COND:
        if (jv_truthy(eval(r, f, n->a)))
            return eval(r, f, n->b);
        return n->c ? eval(r, f, n->c) : jv_undef(NULL, 0);
    default:
        jr_fail(r, n, TX_ENOTSUP, "internal: a statement where an expression was expected");
    }
}

/* ---- statements ---- */

enum flow { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

static enum flow exec(struct jrender *r, struct jframe *f, const struct jnode *n);

static void assign_targets(struct jrender *r, struct jframe *f, const struct jnode *at,
                           const char *const *names, size_t nn, struct jv v)
{
    if (nn == 1) {
        bind(r, f, names[0], v);
        return;
    }
    struct jv seq = v;
    if (v.t == JV_STR || v.t == JV_DICT)
        seq = jr_iterate(r, at, v);
    if (!jv_is_seq(seq))
        jr_fail(r, at, TX_EINVAL, "cannot unpack a non-sequence '%s'", jv_type_name(v));
    if (seq.u.l->n != nn)
        jr_fail(r, at, TX_EINVAL, "cannot unpack %zu values into %zu names", seq.u.l->n, nn);
    for (size_t i = 0; i < nn; i++)
        bind(r, f, names[i], seq.u.l->v[i]);
}

static enum flow exec_body(struct jrender *r, struct jframe *f, const struct jnode *n)
{
    for (size_t i = 0; i < n->nkids; i++) {
        enum flow fl = exec(r, f, n->kids[i]);
        if (fl != FLOW_NEXT)
            return fl;
    }
    return FLOW_NEXT;
}

static void loop_set(struct jrender *r, struct jdict *d, const char *k, struct jv v)
{
    jv_dict_set(r, d, jv_cstr(k), v);
}

static enum flow exec_for(struct jrender *r, struct jframe *f, const struct jnode *n)
{
    struct jv it = eval(r, f, n->a);
    struct jv items = jr_iterate(r, n->a, it);
    if (n->d) {
        /* the loop filter runs before loop.* is known, in its own frame */
        struct jv kept = jv_list_new(r, items.u.l->n);
        struct jframe *ff = frame_new(r, f);
        for (size_t i = 0; i < items.u.l->n; i++) {
            ff->vars.n = 0;
            assign_targets(r, ff, n, n->params, n->nparams, items.u.l->v[i]);
            if (jv_truthy(eval(r, ff, n->d)))
                jv_list_push(r, kept, items.u.l->v[i]);
        }
        items = kept;
    }
    size_t len = items.u.l->n;
    if (!len) {
        if (n->c)
            return exec_body(r, f, n->c) == FLOW_NEXT ? FLOW_NEXT : FLOW_NEXT;
        return FLOW_NEXT;
    }
    /* one frame and one loop object for the whole loop, reset at each
     * iteration (Jinja2's LoopContext is one object that advances too): an
     * iteration allocates nothing */
    struct jframe *ff = frame_new(r, f);
    struct jv loop = jv_dict_new(r, 12);
    loop.t = JV_LOOP;
    struct jdict *d = loop.u.d;
    for (size_t i = 0; i < len; i++) {
        ff->vars.n = 0;
        assign_targets(r, ff, n, n->params, n->nparams, items.u.l->v[i]);
        struct jv vals[] = {
            jv_int((int64_t)i + 1),
            jv_int((int64_t)i),
            jv_int((int64_t)(len - i)),
            jv_int((int64_t)(len - i - 1)),
            jv_bool(i == 0),
            jv_bool(i + 1 == len),
            jv_int((int64_t)len),
            jv_int(1),
            jv_int(0),
            i ? items.u.l->v[i - 1] : jv_undef(NULL, 0),
            i + 1 < len ? items.u.l->v[i + 1] : jv_undef(NULL, 0),
        };
        if (!i) {
            static const char *const keys[] = {"index",  "index0", "revindex", "revindex0",
                                               "first",  "last",   "length",   "depth",
                                               "depth0", "previtem", "nextitem"};
            for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++)
                loop_set(r, d, keys[k], vals[k]);
        } else {
            memcpy(d->v, vals, sizeof(vals)); /* the same keys, in the same order */
        }
        bind(r, ff, "loop", loop);
        enum flow fl = exec_body(r, ff, n->b);
        if (fl == FLOW_BREAK)
            break;
    }
    return FLOW_NEXT;
}

static struct jv call_macro(struct jrender *r, const struct jnode *at, struct jv callee,
                            struct jargs *args)
{
    const struct jnode *m = callee.u.m;
    if (r->depth >= r->max_depth)
        jr_fail(r, at, TX_EINVAL, "macro calls nested more than %d deep", r->max_depth);
    struct jframe *f = frame_new(r, r->root);
    size_t npos = 0;
    for (size_t i = 0; i < args->n; i++)
        if (!args->names[i])
            npos++;
    if (npos > m->nparams)
        jr_fail(r, at, TX_EINVAL, "macro '%s' takes not more than %zu argument(s)", m->s,
                m->nparams);
    for (size_t i = 0; i < args->n; i++) {
        if (!args->names[i])
            continue;
        bool known = false;
        for (size_t k = 0; k < m->nparams; k++)
            known |= !strcmp(m->params[k], args->names[i]);
        if (!known)
            jr_fail(r, at, TX_EINVAL, "macro '%s' has no parameter '%s'", m->s, args->names[i]);
    }
    for (size_t k = 0; k < m->nparams; k++) {
        struct jv *v = jargs_get(args, k, m->params[k]);
        struct jv val;
        if (v)
            val = *v;
        else if (m->kids[k])
            val = eval(r, f, m->kids[k]);
        else
            val = jv_undef(m->params[k], strlen(m->params[k]));
        bind(r, f, m->params[k], val);
    }
    struct capture c;
    capture_begin(r, &c);
    r->depth++;
    exec_body(r, f, m->b);
    r->depth--;
    return capture_end(r, &c);
}

/* a block's text v through the filter chain of {% set x | f %} or
 * {% filter f | g %} (its innermost operand is the hole the text fills) */
static struct jv filter_text(struct jrender *r, struct jframe *f, const struct jnode *chain_top,
                             struct jv v)
{
    const struct jnode *chain[64];
    size_t k = 0;
    for (const struct jnode *x = chain_top; x && x->kind == JN_FILTER && k < 64; x = x->a)
        chain[k++] = x;
    while (k--) {
        struct jargs args;
        eval_args(r, f, chain[k], &args);
        v = jinja_filter(r, chain[k], chain[k]->s, v, &args);
    }
    return v;
}

static enum flow exec(struct jrender *r, struct jframe *f, const struct jnode *n)
{
    jr_step(r, n);
    switch (n->kind) {
    case JN_BODY:
        return exec_body(r, f, n);
    case JN_DATA:
        emit(r, n->s, n->n);
        return FLOW_NEXT;
    case JN_OUTPUT:
        emit_value(r, eval(r, f, n->a));
        return FLOW_NEXT;
    case JN_IF:
        if (jv_truthy(eval(r, f, n->a)))
            return exec(r, f, n->b);
        return n->c ? exec(r, f, n->c) : FLOW_NEXT;
    case JN_FOR:
        return exec_for(r, f, n);
    case JN_SET: {
        struct jv v = eval(r, f, n->b);
        if (n->a) {
            struct jv ns = lookup(r, f, n->a->a);
            if (ns.t != JV_NS)
                jr_fail(r, n->a, TX_EINVAL, "cannot assign attribute on non-namespace object");
            jv_dict_set(r, ns.u.d, jv_cstr(n->a->s), v);
        } else {
            assign_targets(r, f, n, n->params, n->nparams, v);
        }
        return FLOW_NEXT;
    }
    case JN_SET_BLOCK: {
        struct capture c;
        capture_begin(r, &c);
        exec_body(r, f, n->b);
        struct jv v = capture_end(r, &c);
        if (n->a)
            v = filter_text(r, f, n->a, v);
        bind(r, f, n->params[0], v);
        return FLOW_NEXT;
    }
    case JN_FILTER_BLOCK: {
        struct capture c;
        capture_begin(r, &c);
        exec_body(r, f, n->b);
        struct jv v = capture_end(r, &c);
        emit_value(r, filter_text(r, f, n->a, v));
        return FLOW_NEXT;
    }
    case JN_MACRO: {
        struct jv m = {.t = JV_MACRO};
        m.u.m = n;
        bind(r, f, n->s, m);
        return FLOW_NEXT;
    }
    case JN_WITH: {
        struct jframe *ff = frame_new(r, f);
        for (size_t i = 0; i < n->nkids; i++)
            bind(r, ff, n->params[i], eval(r, f, n->kids[i]));
        return exec_body(r, ff, n->b);
    }
    case JN_BREAK:
        return FLOW_BREAK;
    case JN_CONTINUE:
        return FLOW_CONTINUE;
    default:
        emit_value(r, eval(r, f, n));
        return FLOW_NEXT;
    }
}

int jinja_run(struct jrender *r, const struct jnode *root, struct jframe *globals)
{
    r->root = globals;
    if (setjmp(r->fail))
        return r->status ? r->status : TX_EINVAL;
    exec(r, globals, root);
    return 0;
}
