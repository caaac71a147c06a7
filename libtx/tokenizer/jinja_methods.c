/* SPDX-License-Identifier: MIT */
/*
 * Methods of Jinja values (Python's str.startswith / split / strip ...,
 * dict.items / get ..., loop.cycle) and the global functions chat
 * templates call: range, namespace, dict, raise_exception (transformers'),
 * strftime_now (transformers'). A list's mutating methods (append, pop...)
 * are refused, as in transformers' ImmutableSandboxedEnvironment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <utf8proc.h>

#include <tx/tx_error.h>

#include <tx-internal/tx_errors.h>
#include "jinja.h"

static const char *const STR_METHODS[] = {
    "startswith", "endswith", "split",   "rsplit",  "strip",      "lstrip",  "rstrip",
    "replace",    "upper",    "lower",   "title",   "capitalize", "find",    "rfind",
    "count",      "join",     "isdigit", "isalpha", "isalnum",    "isspace", "isupper",
    "islower",    "splitlines", NULL,
};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", NULL};

static bool named(const char *const *l, const char *name, size_t n)
{
    for (size_t i = 0; l[i]; i++)
        if (strlen(l[i]) == n && !memcmp(l[i], name, n))
            return true;
    return false;
}

bool jinja_has_method(struct jv obj, const char *name, size_t n)
{
    if (obj.t == JV_STR)
        return named(STR_METHODS, name, n);
    if (obj.t == JV_DICT)
        return named(DICT_METHODS, name, n);
    return false;
}

bool jinja_is_unsafe_method(struct jv obj, const char *name, size_t n)
{
    static const char *const MUTATING[] = {"append", "pop",    "insert",     "extend",
                                           "remove", "clear",  "update",     "setdefault",
                                           "popitem", "sort",  "reverse",    NULL};
    return (obj.t == JV_LIST || obj.t == JV_DICT) && named(MUTATING, name, n);
}

int jinja_global_func(const char *name, size_t n)
{
    static const struct {
        const char *name;
        int fn;
    } G[] = {{"range", JF_RANGE},
             {"namespace", JF_NAMESPACE},
             {"raise_exception", JF_RAISE},
             {"strftime_now", JF_STRFTIME_NOW},
             {"dict", JF_DICT}};
    for (size_t i = 0; i < sizeof(G) / sizeof(G[0]); i++)
        if (strlen(G[i].name) == n && !memcmp(G[i].name, name, n))
            return G[i].fn;
    return TX_NONE;
}

/* ---- string helpers ---- */

struct jv ju_case(struct jrender *r, struct jv s, bool upper)
{
    struct jbuf b = {0};
    size_t i = 0;
    while (i < s.n) {
        size_t k;
        uint32_t c = ju_decode(s.u.s + i, s.n - i, &k);
        utf8proc_int32_t m = upper ? utf8proc_toupper((utf8proc_int32_t)c)
                                   : utf8proc_tolower((utf8proc_int32_t)c);
        if ((uint32_t)m == c || k == 1) {
            if (k == 1 && (uint32_t)m != c)
                jb_putc(r, &b, (char)m);
            else
                jb_put(r, &b, s.u.s + i, k);
        } else {
            utf8proc_uint8_t enc[4];
            utf8proc_ssize_t en = utf8proc_encode_char(m, enc);
            jb_put(r, &b, (const char *)enc, (size_t)en);
        }
        i += k;
    }
    return b.n ? jb_value(&b) : jv_cstr("");
}

static bool in_chars(const struct jv *chars, uint32_t c)
{
    if (!chars)
        return ju_isspace(c);
    size_t i = 0;
    while (i < chars->n) {
        size_t k;
        if (ju_decode(chars->u.s + i, chars->n - i, &k) == c)
            return true;
        i += k;
    }
    return false;
}

struct jv ju_strip(struct jrender *r, struct jv s, const struct jv *chars, int which)
{
    (void)r;
    size_t b = 0, e = s.n;
    if (which & 1) {
        while (b < e) {
            size_t k;
            uint32_t c = ju_decode(s.u.s + b, e - b, &k);
            if (!in_chars(chars, c))
                break;
            b += k;
        }
    }
    if (which & 2) {
        while (e > b) {
            size_t st = e - 1;
            while (st > b && ((unsigned char)s.u.s[st] & 0xC0) == 0x80)
                st--;
            size_t k;
            uint32_t c = ju_decode(s.u.s + st, e - st, &k);
            if (!in_chars(chars, c))
                break;
            e = st;
        }
    }
    return jv_str_ref(s.u.s + b, e - b);
}

static const struct jv *str_arg(struct jrender *r, const struct jnode *at, struct jargs *a,
                                size_t pos, const char *name, const char *method)
{
    struct jv *v = jargs_get(a, pos, name);
    if (!v || v->t == JV_NONE)
        return NULL;
    if (v->t != JV_STR)
        jr_fail(r, at, TX_EINVAL, "%s: expected a string argument, got %s", method,
                jv_type_name(*v));
    return v;
}

static bool affix(struct jv s, struct jv p, bool start)
{
    if (p.n > s.n)
        return false;
    return !memcmp(start ? s.u.s : s.u.s + s.n - p.n, p.u.s, p.n);
}

static struct jv split(struct jrender *r, const struct jnode *at, struct jv s, struct jargs *a,
                       bool from_right)
{
    const struct jv *sep = str_arg(r, at, a, 0, "sep", "split");
    struct jv ms = jargs_get(a, 1, "maxsplit") ? *jargs_get(a, 1, "maxsplit") : jv_int(-1);
    if (ms.t != JV_INT)
        jr_fail(r, at, TX_EINVAL, "split: maxsplit must be an integer");
    int64_t left = ms.u.i;
    struct jv out = jv_list_new(r, 4);
    if (sep && !sep->n)
        jr_fail(r, at, TX_EINVAL, "empty separator");
    /* the pieces, left to right; rsplit with a limit counts from the right */
    if (sep) {
        size_t *cuts = jr_alloc(r, (s.n / sep->n + 2) * sizeof(*cuts));
        size_t nc = 0;
        for (size_t i = 0; i + sep->n <= s.n;) {
            if (!memcmp(s.u.s + i, sep->u.s, sep->n)) {
                cuts[nc++] = i;
                i += sep->n;
            } else {
                i++;
            }
        }
        size_t use_from = 0, use_to = nc;
        if (left >= 0 && (size_t)left < nc) {
            if (from_right)
                use_from = nc - (size_t)left;
            else
                use_to = (size_t)left;
        }
        /* rsplit finds separators from the right: recompute them that way */
        if (from_right && left >= 0) {
            nc = 0;
            size_t i = s.n;
            while (i >= sep->n && nc < (size_t)left) {
                if (!memcmp(s.u.s + i - sep->n, sep->u.s, sep->n)) {
                    cuts[nc++] = i - sep->n;
                    i -= sep->n;
                } else {
                    i--;
                }
            }
            for (size_t k = 0; k < nc / 2; k++) {
                size_t t = cuts[k];
                cuts[k] = cuts[nc - 1 - k];
                cuts[nc - 1 - k] = t;
            }
            use_from = 0;
            use_to = nc;
        }
        size_t prev = 0;
        for (size_t k = use_from; k < use_to; k++) {
            jv_list_push(r, out, jv_str_ref(s.u.s + prev, cuts[k] - prev));
            prev = cuts[k] + sep->n;
        }
        if (use_from > 0 && !from_right)
            prev = 0;
        jv_list_push(r, out, jv_str_ref(s.u.s + prev, s.n - prev));
        return out;
    }
    /* white-space split: runs of white space, no empty pieces */
    size_t i = 0;
    if (from_right && left >= 0) {
        struct jv rev = jv_list_new(r, 4);
        size_t e = s.n;
        for (;;) {
            while (e > 0) {
                size_t st = e - 1, k;
                while (st > 0 && ((unsigned char)s.u.s[st] & 0xC0) == 0x80)
                    st--;
                if (!ju_isspace(ju_decode(s.u.s + st, e - st, &k)))
                    break;
                e = st;
            }
            if (!e)
                break;
            if (left == 0) {
                jv_list_push(r, rev, jv_str_ref(s.u.s, e));
                break;
            }
            size_t b = e;
            while (b > 0) {
                size_t st = b - 1, k;
                while (st > 0 && ((unsigned char)s.u.s[st] & 0xC0) == 0x80)
                    st--;
                if (ju_isspace(ju_decode(s.u.s + st, b - st, &k)))
                    break;
                b = st;
            }
            jv_list_push(r, rev, jv_str_ref(s.u.s + b, e - b));
            left--;
            e = b;
        }
        for (size_t k = rev.u.l->n; k-- > 0;)
            jv_list_push(r, out, rev.u.l->v[k]);
        return out;
    }
    for (;;) {
        size_t k;
        while (i < s.n && ju_isspace(ju_decode(s.u.s + i, s.n - i, &k)))
            i += k;
        if (i >= s.n)
            break;
        if (left == 0) {
            struct jv rest = ju_strip(r, jv_str_ref(s.u.s + i, s.n - i), NULL, 2);
            jv_list_push(r, out, rest);
            break;
        }
        size_t b = i;
        while (i < s.n && !ju_isspace(ju_decode(s.u.s + i, s.n - i, &k)))
            i += k;
        jv_list_push(r, out, jv_str_ref(s.u.s + b, i - b));
        if (left > 0)
            left--;
    }
    return out;
}

static int64_t find(struct jv s, struct jv sub, bool last)
{
    if (sub.n > s.n)
        return TX_NONE;
    int64_t hit = -1;
    for (size_t i = 0; i + sub.n <= s.n; i++)
        if (!memcmp(s.u.s + i, sub.u.s, sub.n)) {
            hit = (int64_t)ju_len(s.u.s, i);
            if (!last)
                return hit;
        }
    return hit;
}

static bool all_chars(struct jv s, int kind)
{
    if (!s.n)
        return false;
    size_t i = 0;
    while (i < s.n) {
        size_t k;
        uint32_t c = ju_decode(s.u.s + i, s.n - i, &k);
        utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
        bool alpha = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
        bool digit = cat == UTF8PROC_CATEGORY_ND;
        bool ok = kind == 0 ? digit : kind == 1 ? alpha : kind == 2 ? (alpha || digit) : ju_isspace(c);
        if (!ok)
            return false;
        i += k;
    }
    return true;
}

static struct jv str_method(struct jrender *r, const struct jnode *at, struct jv s, const char *m,
                            struct jargs *a)
{
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        struct jv *p = jargs_get(a, 0, NULL);
        bool start = m[0] == 's';
        if (!p)
            jr_fail(r, at, TX_EINVAL, "%s: needs an argument", m);
        if (jv_is_seq(*p)) {
            for (size_t i = 0; i < p->u.l->n; i++) {
                if (p->u.l->v[i].t != JV_STR)
                    jr_fail(r, at, TX_EINVAL, "%s: a tuple of strings expected", m);
                if (affix(s, p->u.l->v[i], start))
                    return jv_bool(true);
            }
            return jv_bool(false);
        }
        if (p->t != JV_STR)
            jr_fail(r, at, TX_EINVAL, "%s first arg must be str or a tuple of str, not %s", m,
                    jv_type_name(*p));
        return jv_bool(affix(s, *p, start));
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit"))
        return split(r, at, s, a, m[0] == 'r');
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip"))
        return ju_strip(r, s, str_arg(r, at, a, 0, "chars", m),
                        m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3);
    if (!strcmp(m, "replace"))
        return jinja_filter(r, at, "replace", s, a);
    if (!strcmp(m, "upper") || !strcmp(m, "lower"))
        return ju_case(r, s, m[0] == 'u');
    if (!strcmp(m, "title") || !strcmp(m, "capitalize"))
        return jinja_filter(r, at, m, s, &(struct jargs){0});
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "count")) {
        const struct jv *sub = str_arg(r, at, a, 0, NULL, m);
        if (!sub)
            jr_fail(r, at, TX_EINVAL, "%s: needs a string", m);
        if (m[0] == 'c') {
            if (!sub->n)
                return jv_int((int64_t)ju_len(s.u.s, s.n) + 1);
            int64_t c = 0;
            for (size_t i = 0; i + sub->n <= s.n;) {
                if (!memcmp(s.u.s + i, sub->u.s, sub->n)) {
                    c++;
                    i += sub->n;
                } else {
                    i++;
                }
            }
            return jv_int(c);
        }
        return jv_int(find(s, *sub, m[0] == 'r'));
    }
    if (!strcmp(m, "join")) {
        struct jv *it = jargs_get(a, 0, NULL);
        if (!it)
            jr_fail(r, at, TX_EINVAL, "join: needs an iterable");
        struct jv items = jr_iterate(r, at, *it);
        struct jbuf b = {0};
        for (size_t i = 0; i < items.u.l->n; i++) {
            if (items.u.l->v[i].t != JV_STR)
                jr_fail(r, at, TX_EINVAL, "sequence item %zu: expected str instance, %s found", i,
                        jv_type_name(items.u.l->v[i]));
            if (i)
                jb_put(r, &b, s.u.s, s.n);
            jb_put(r, &b, items.u.l->v[i].u.s, items.u.l->v[i].n);
        }
        return jb_value(&b);
    }
    if (!strcmp(m, "isdigit"))
        return jv_bool(all_chars(s, 0));
    if (!strcmp(m, "isalpha"))
        return jv_bool(all_chars(s, 1));
    if (!strcmp(m, "isalnum"))
        return jv_bool(all_chars(s, 2));
    if (!strcmp(m, "isspace"))
        return jv_bool(all_chars(s, 3));
    if (!strcmp(m, "isupper") || !strcmp(m, "islower"))
        return jv_bool(jinja_test(r, at, m + 2, s, &(struct jargs){0}));
    if (!strcmp(m, "splitlines")) {
        struct jv out = jv_list_new(r, 4);
        size_t i = 0;
        while (i < s.n) {
            size_t b = i;
            while (i < s.n && s.u.s[i] != '\n' && s.u.s[i] != '\r')
                i++;
            jv_list_push(r, out, jv_str_ref(s.u.s + b, i - b));
            if (i < s.n && s.u.s[i] == '\r' && i + 1 < s.n && s.u.s[i + 1] == '\n')
                i++;
            if (i < s.n)
                i++;
        }
        return out;
    }
    jr_fail(r, at, TX_ENOTSUP, "unsupported method str.%s", m);
}

struct jv jinja_call_method(struct jrender *r, const struct jnode *at, struct jbound *bm,
                            struct jargs *a)
{
    struct jv self = bm->self;
    const char *m = bm->name;
    jr_step(r, at);
    if (self.t == JV_STR)
        return str_method(r, at, self, m, a);
    if (self.t == JV_LOOP && !strcmp(m, "cycle")) {
        if (!a->n)
            jr_fail(r, at, TX_EINVAL, "no items for cycling given");
        struct jv *i0 = jv_dict_gets(self.u.d, "index0", 6);
        return a->v[(size_t)i0->u.i % a->n];
    }
    if (self.t == JV_DICT) {
        if (!strcmp(m, "get")) {
            struct jv *k = jargs_get(a, 0, NULL);
            if (!k)
                jr_fail(r, at, TX_EINVAL, "get expected at least 1 argument, got 0");
            struct jv *v = jv_dict_get(self.u.d, *k);
            if (v)
                return *v;
            struct jv *def = jargs_get(a, 1, NULL);
            return def ? *def : jv_none();
        }
        if (!strcmp(m, "items"))
            return jinja_filter(r, at, "items", self, &(struct jargs){0});
        struct jv out = jv_list_new(r, self.u.d->n);
        for (size_t i = 0; i < self.u.d->n; i++)
            jv_list_push(r, out, m[0] == 'k' ? self.u.d->k[i] : self.u.d->v[i]);
        return out;
    }
    jr_fail(r, at, TX_ENOTSUP, "unsupported method %s.%s", jv_type_name(self), m);
}

/* ---- global functions ---- */

static int64_t int_arg(struct jrender *r, const struct jnode *at, struct jv v, const char *what)
{
    if (v.t != JV_INT && v.t != JV_BOOL)
        jr_fail(r, at, TX_EINVAL, "%s: expected an integer, got %s", what, jv_type_name(v));
    return v.t == JV_INT ? v.u.i : v.u.b;
}

struct jv jinja_call_func(struct jrender *r, const struct jnode *at, int fn, struct jargs *a,
                          struct jv self)
{
    (void)self;
    switch (fn) {
    case JF_RANGE: {
        int64_t start = 0, stop, step = 1;
        if (a->n == 1) {
            stop = int_arg(r, at, a->v[0], "range");
        } else if (a->n == 2 || a->n == 3) {
            start = int_arg(r, at, a->v[0], "range");
            stop = int_arg(r, at, a->v[1], "range");
            if (a->n == 3)
                step = int_arg(r, at, a->v[2], "range");
        } else {
            jr_fail(r, at, TX_EINVAL, "range expected 1 to 3 arguments, got %zu", a->n);
        }
        if (!step)
            jr_fail(r, at, TX_EINVAL, "range() arg 3 must not be zero");
        struct jv out = jv_list_new(r, 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            jr_step(r, at);
            jv_list_push(r, out, jv_int(i));
            if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step))
                break;
        }
        return out;
    }
    case JF_NAMESPACE:
    case JF_DICT: {
        struct jv d = jv_dict_new(r, a->n);
        for (size_t i = 0; i < a->n; i++) {
            if (a->names[i]) {
                jv_dict_set(r, d.u.d, jv_cstr(a->names[i]), a->v[i]);
            } else if (a->v[i].t == JV_DICT || a->v[i].t == JV_NS) {
                for (size_t k = 0; k < a->v[i].u.d->n; k++)
                    jv_dict_set(r, d.u.d, a->v[i].u.d->k[k], a->v[i].u.d->v[k]);
            } else {
                jr_fail(r, at, TX_EINVAL, "%s: positional arguments must be mappings",
                        fn == JF_DICT ? "dict" : "namespace");
            }
        }
        if (fn == JF_NAMESPACE)
            d.t = JV_NS;
        return d;
    }
    case JF_RAISE: {
        struct jv msg = a->n ? jv_to_str(r, a->v[0]) : jv_cstr("");
        if (msg.n)
            snprintf(r->err, r->errsz, "%.*s", (int)(msg.n > 100000 ? 100000 : msg.n), msg.u.s);
        else /* an error always says something (an undefined message is "") */
            snprintf(r->err, r->errsz,
                     "the template called raise_exception() with an "
                     "empty message");
        r->status = TX_EINVAL;
        r->raised = 1;
        longjmp(r->fail, 1);
    }
    case JF_STRFTIME_NOW: {
        struct jv *f = jargs_get(a, 0, "format");
        if (!f || f->t != JV_STR || f->n > 256)
            jr_fail(r, at, TX_EINVAL, "strftime_now: needs a format string");
        char fmt[260];
        memcpy(fmt, f->u.s, f->n);
        fmt[f->n] = 0;
        time_t t = (time_t)r->now;
        struct tm tm;
        localtime_r(&t, &tm);
        char out[1024];
        size_t n = strftime(out, sizeof(out), fmt, &tm);
        return jv_str(r, out, n);
    }
    default:
        jr_fail(r, at, TX_ENOTSUP, "internal: unknown function");
    }
}
