/* SPDX-License-Identifier: MIT */
/*
 * Jinja filters ({{ x | name(args) }}) and tests ({% if x is name %}), as
 * Jinja2 3.x defines them, with transformers' tojson (json.dumps with
 * ensure_ascii=False by default, no HTML escaping). The names jinja_parse.c
 * accepts are exactly the ones implemented here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include <tx/tx_error.h>

#include "jinja.h"

static const char *const FILTERS[] = {
    "abs",        "attr",      "capitalize", "count",     "d",       "default",
    "dictsort",   "e",         "escape",     "first",     "float",   "forceescape",
    "indent",     "int",       "items",      "join",      "last",    "length",
    "list",       "lower",     "map",        "max",       "min",     "reject",
    "rejectattr", "replace",   "reverse",    "round",     "safe",    "select",
    "selectattr", "sort",      "string",     "sum",       "title",   "tojson",
    "trim",       "unique",    "upper",      "wordcount", NULL,
};

static const char *const TESTS[] = {
    "boolean", "callable", "defined", "divisibleby", "eq",       "equalto", "escaped",
    "even",    "false",    "float",   "ge",          "gt",       "in",      "integer",
    "iterable", "le",      "lower",   "lt",          "mapping",  "ne",      "none",
    "number",  "odd",      "sameas",  "sequence",    "string",   "true",    "undefined",
    "upper",   "==",       "!=",      "<",           "<=",       ">",       ">=",
    NULL,
};

static bool in_list(const char *const *l, const char *name)
{
    for (size_t i = 0; l[i]; i++)
        if (!strcmp(l[i], name))
            return true;
    return false;
}

bool jinja_has_filter(const char *name)
{
    return in_list(FILTERS, name);
}

bool jinja_has_test(const char *name)
{
    return in_list(TESTS, name);
}

static struct jv arg_or(struct jargs *a, size_t pos, const char *name, struct jv def)
{
    struct jv *v = jargs_get(a, pos, name);
    return v ? *v : def;
}

static struct jv need_str(struct jrender *r, const struct jnode *at, struct jv v, const char *what)
{
    if (v.t != JV_STR)
        jr_fail(r, at, TX_EINVAL, "%s: expected a string, got %s", what, jv_type_name(v));
    return v;
}

static size_t length_of(struct jrender *r, const struct jnode *at, struct jv x)
{
    switch (x.t) {
    case JV_STR:
        return ju_len(x.u.s, x.n);
    case JV_LIST:
    case JV_TUPLE:
        return x.u.l->n;
    case JV_DICT:
    case JV_NS:
        return x.u.d->n;
    case JV_UNDEF:
        return 0;
    default:
        jr_fail(r, at, TX_EINVAL, "object of type '%s' has no len()", jv_type_name(x));
    }
}

/* x's attribute path "a.b" (Jinja's make_attrgetter; digits index) */
static struct jv attr_path(struct jrender *r, const struct jnode *at, struct jv x, struct jv path)
{
    if (path.t == JV_INT)
        return jr_getitem(r, at, x, path);
    need_str(r, at, path, "attribute");
    size_t i = 0;
    while (i <= path.n) {
        size_t j = i;
        while (j < path.n && path.u.s[j] != '.')
            j++;
        struct jv key = jv_str_ref(path.u.s + i, j - i);
        bool digits = j > i;
        for (size_t k = i; k < j; k++)
            digits &= path.u.s[k] >= '0' && path.u.s[k] <= '9';
        if (digits && j - i < 18)
            key = jv_int(strtoll(key.u.s, NULL, 10));
        x = jr_getitem(r, at, x, key);
        i = j + 1;
    }
    return x;
}

static struct jv tojson(struct jrender *r, const struct jnode *at, struct jv x, struct jargs *a)
{
    struct jjson_opts o = {.ensure_ascii = false, .indent = -1};
    struct jv ea = arg_or(a, 0, "ensure_ascii", jv_bool(false));
    struct jv ind = arg_or(a, 1, "indent", jv_none());
    struct jv sep = arg_or(a, 2, "separators", jv_none());
    struct jv sk = arg_or(a, 3, "sort_keys", jv_bool(false));
    o.ensure_ascii = jv_truthy(ea);
    o.sort_keys = jv_truthy(sk);
    if (ind.t == JV_INT) {
        if (ind.u.i < 0 || ind.u.i > 64)
            jr_fail(r, at, TX_EINVAL, "tojson: indent %lld out of range", (long long)ind.u.i);
        o.indent = (int)ind.u.i;
    } else if (ind.t != JV_NONE) {
        jr_fail(r, at, TX_ENOTSUP, "tojson: indent must be an integer or none");
    }
    o.item_sep = o.indent >= 0 ? "," : ", ";
    o.key_sep = ": ";
    if (jv_is_seq(sep)) {
        if (sep.u.l->n != 2 || sep.u.l->v[0].t != JV_STR || sep.u.l->v[1].t != JV_STR)
            jr_fail(r, at, TX_EINVAL, "tojson: separators must be two strings");
        o.item_sep = sep.u.l->v[0].u.s;
        o.item_sep_n = sep.u.l->v[0].n;
        o.key_sep = sep.u.l->v[1].u.s;
        o.key_sep_n = sep.u.l->v[1].n;
    } else {
        if (sep.t != JV_NONE)
            jr_fail(r, at, TX_EINVAL, "tojson: separators must be two strings");
        o.item_sep_n = strlen(o.item_sep);
        o.key_sep_n = strlen(o.key_sep);
    }
    struct jbuf b = {0};
    jv_json_append(r, at, &b, x, &o, 0);
    return jb_value(&b);
}

static struct jv join(struct jrender *r, const struct jnode *at, struct jv x, struct jargs *a)
{
    struct jv sep = arg_or(a, 0, "d", jv_cstr(""));
    struct jv *attr = jargs_get(a, 1, "attribute");
    struct jv items = jr_iterate(r, at, x);
    struct jbuf b = {0};
    for (size_t i = 0; i < items.u.l->n; i++) {
        if (i)
            jv_str_append(r, &b, sep);
        struct jv e = items.u.l->v[i];
        if (attr)
            e = attr_path(r, at, e, *attr);
        jv_str_append(r, &b, e);
    }
    return jb_value(&b);
}

static struct jv replace(struct jrender *r, const struct jnode *at, struct jv x, struct jargs *a)
{
    struct jv s = jv_to_str(r, x);
    struct jv *o = jargs_get(a, 0, "old"), *nw = jargs_get(a, 1, "new");
    if (!o || !nw)
        jr_fail(r, at, TX_EINVAL, "replace: needs the old and the new text");
    struct jv old = need_str(r, at, jv_to_str(r, *o), "replace");
    struct jv neu = jv_to_str(r, *nw);
    struct jv cnt = arg_or(a, 2, "count", jv_none());
    int64_t left = cnt.t == JV_INT ? cnt.u.i : -1;
    struct jbuf b = {0};
    size_t i = 0;
    if (!old.n) {
        /* Python inserts new between every character (and at both ends) */
        size_t k;
        while (left != 0) {
            jb_put(r, &b, neu.u.s, neu.n);
            if (left > 0)
                left--;
            if (i >= s.n)
                break;
            ju_decode(s.u.s + i, s.n - i, &k);
            jb_put(r, &b, s.u.s + i, k);
            i += k;
        }
        jb_put(r, &b, s.u.s + i, s.n - i);
        return jb_value(&b);
    }
    while (i < s.n) {
        if (left != 0 && i + old.n <= s.n && !memcmp(s.u.s + i, old.u.s, old.n)) {
            jb_put(r, &b, neu.u.s, neu.n);
            i += old.n;
            if (left > 0)
                left--;
            continue;
        }
        jb_putc(r, &b, s.u.s[i++]);
    }
    return b.n ? jb_value(&b) : jv_cstr("");
}

static struct jv title(struct jrender *r, struct jv s, bool whole_words)
{
    struct jbuf b = {0};
    size_t i = 0;
    bool start = true;
    while (i < s.n) {
        size_t k;
        uint32_t c = ju_decode(s.u.s + i, s.n - i, &k);
        struct jv one = jv_str_ref(s.u.s + i, k);
        struct jv m = ju_case(r, one, start);
        jb_put(r, &b, m.u.s, m.n);
        if (whole_words)
            start = ju_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
        else
            start = false;
        i += k;
    }
    return jb_value(&b);
}

static struct jv indent(struct jrender *r, const struct jnode *at, struct jv x, struct jargs *a)
{
    struct jv s = jv_to_str(r, x);
    struct jv w = arg_or(a, 0, "width", jv_int(4));
    bool first = jv_truthy(arg_or(a, 1, "first", jv_bool(false)));
    bool blank = jv_truthy(arg_or(a, 2, "blank", jv_bool(false)));
    struct jbuf pad = {0};
    if (w.t == JV_INT) {
        if (w.u.i > 256)
            jr_fail(r, at, TX_EINVAL, "indent: width too large");
        for (int64_t i = 0; i < w.u.i; i++)
            jb_putc(r, &pad, ' ');
    } else {
        jv_str_append(r, &pad, w);
    }
    struct jbuf b = {0};
    size_t i = 0;
    bool line_start = true, first_line = true;
    while (i <= s.n) {
        size_t j = i;
        while (j < s.n && s.u.s[j] != '\n')
            j++;
        bool empty = j == i;
        if (line_start && (first_line ? first : true) && (blank || !empty) &&
            !(j == s.n && empty && !first_line))
            jb_put(r, &b, pad.p, pad.n);
        jb_put(r, &b, s.u.s + i, j - i);
        if (j < s.n)
            jb_putc(r, &b, '\n');
        first_line = false;
        i = j + 1;
    }
    return jb_value(&b);
}

static int cmp_values(struct jrender *r, const struct jnode *at, struct jv a, struct jv b, bool cs)
{
    if (!cs && a.t == JV_STR && b.t == JV_STR) {
        a = ju_case(r, a, false);
        b = ju_case(r, b, false);
    }
    return jv_compare(r, at, a, b);
}

/* insertion sort (stable, like Python's), bounded by the step count */
static struct jv sorted(struct jrender *r, const struct jnode *at, struct jv x, bool rev, bool cs,
                        struct jv *attr)
{
    struct jv items = jr_iterate(r, at, x);
    size_t n = items.u.l->n;
    struct jv out = jv_list_new(r, n);
    struct jv *keys = jr_alloc(r, (n ? n : 1) * sizeof(*keys));
    for (size_t i = 0; i < n; i++) {
        struct jv e = items.u.l->v[i];
        struct jv k = attr ? attr_path(r, at, e, *attr) : e;
        size_t j = i;
        while (j > 0) {
            jr_step(r, at);
            int c = cmp_values(r, at, keys[j - 1], k, cs);
            if (rev ? c >= 0 : c <= 0)
                break;
            keys[j] = keys[j - 1];
            out.u.l->v[j] = out.u.l->v[j - 1];
            j--;
        }
        keys[j] = k;
        out.u.l->v[j] = e;
        out.u.l->n++;
    }
    return out;
}

static struct jv select_items(struct jrender *r, const struct jnode *at, struct jv x,
                              struct jargs *a, bool by_attr, bool keep)
{
    struct jv items = jr_iterate(r, at, x);
    struct jv out = jv_list_new(r, items.u.l->n);
    size_t first = by_attr ? 1 : 0;
    struct jv attr = by_attr ? arg_or(a, 0, NULL, jv_undef(NULL, 0)) : jv_none();
    if (by_attr && attr.t == JV_UNDEF)
        jr_fail(r, at, TX_EINVAL, "selectattr/rejectattr: needs an attribute name");
    struct jv *test = jargs_get(a, first, NULL);
    struct jargs rest = {0};
    if (test) {
        need_str(r, at, *test, "select test");
        /* the test's arguments: the positional ones after it */
        size_t k = 0;
        rest.v = jr_alloc(r, (a->n + 1) * sizeof(*rest.v));
        rest.names = jr_alloc(r, (a->n + 1) * sizeof(*rest.names));
        size_t pos = 0;
        for (size_t i = 0; i < a->n; i++) {
            if (a->names[i])
                continue;
            if (pos++ <= first)
                continue;
            rest.v[k] = a->v[i];
            rest.names[k++] = NULL;
        }
        rest.n = k;
    }
    char tname[32] = "";
    if (test)
        snprintf(tname, sizeof(tname), "%.*s", (int)(test->n < 31 ? test->n : 31), test->u.s);
    if (test && !jinja_has_test(tname))
        jr_fail(r, at, TX_ENOTSUP, "unsupported test '%s'", tname);
    for (size_t i = 0; i < items.u.l->n; i++) {
        struct jv e = items.u.l->v[i];
        struct jv v = by_attr ? attr_path(r, at, e, attr) : e;
        bool t = test ? jinja_test(r, at, tname, v, &rest) : jv_truthy(v);
        if (t == keep)
            jv_list_push(r, out, e);
    }
    return out;
}

static struct jv map_items(struct jrender *r, const struct jnode *at, struct jv x, struct jargs *a)
{
    struct jv items = jr_iterate(r, at, x);
    struct jv out = jv_list_new(r, items.u.l->n);
    struct jv *attr = jargs_get(a, SIZE_MAX, "attribute");
    if (attr) {
        struct jv *def = jargs_get(a, SIZE_MAX, "default");
        for (size_t i = 0; i < items.u.l->n; i++) {
            struct jv v = attr_path(r, at, items.u.l->v[i], *attr);
            if (v.t == JV_UNDEF && def)
                v = *def;
            jv_list_push(r, out, v);
        }
        return out;
    }
    struct jv *fname = jargs_get(a, 0, NULL);
    if (!fname || fname->t != JV_STR)
        jr_fail(r, at, TX_EINVAL, "map: needs a filter name or attribute=");
    char name[32];
    snprintf(name, sizeof(name), "%.*s", (int)(fname->n < 31 ? fname->n : 31), fname->u.s);
    if (!jinja_has_filter(name))
        jr_fail(r, at, TX_ENOTSUP, "unsupported filter '%s'", name);
    struct jargs rest = {.n = a->n ? a->n - 1 : 0, .v = a->v + 1, .names = a->names + 1};
    for (size_t i = 0; i < items.u.l->n; i++)
        jv_list_push(r, out, jinja_filter(r, at, name, items.u.l->v[i], &rest));
    return out;
}

static struct jv html_escape(struct jrender *r, struct jv x)
{
    struct jv s = jv_to_str(r, x);
    struct jbuf b = {0};
    for (size_t i = 0; i < s.n; i++) {
        switch (s.u.s[i]) {
        case '&':
            jb_puts(r, &b, "&amp;");
            break;
        case '<':
            jb_puts(r, &b, "&lt;");
            break;
        case '>':
            jb_puts(r, &b, "&gt;");
            break;
        case '"':
            jb_puts(r, &b, "&#34;");
            break;
        case '\'':
            jb_puts(r, &b, "&#39;");
            break;
        default:
            jb_putc(r, &b, s.u.s[i]);
        }
    }
    return jb_value(&b);
}

static struct jv min_max(struct jrender *r, const struct jnode *at, struct jv x, struct jargs *a,
                         bool max)
{
    bool cs = jv_truthy(arg_or(a, 0, "case_sensitive", jv_bool(false)));
    struct jv *attr = jargs_get(a, 1, "attribute");
    struct jv items = jr_iterate(r, at, x);
    if (!items.u.l->n)
        return jv_undef(NULL, 0);
    struct jv best = items.u.l->v[0];
    for (size_t i = 1; i < items.u.l->n; i++) {
        struct jv e = items.u.l->v[i];
        struct jv ka = attr ? attr_path(r, at, e, *attr) : e;
        struct jv kb = attr ? attr_path(r, at, best, *attr) : best;
        int c = cmp_values(r, at, ka, kb, cs);
        if (max ? c > 0 : c < 0)
            best = e;
    }
    return best;
}

struct jv jinja_filter(struct jrender *r, const struct jnode *at, const char *name, struct jv x,
                       struct jargs *a)
{
    jr_step(r, at);
    if (!strcmp(name, "tojson"))
        return tojson(r, at, x, a);
    if (!strcmp(name, "trim")) {
        struct jv *chars = jargs_get(a, 0, "chars");
        return ju_strip(r, jv_to_str(r, x), chars && chars->t != JV_NONE ? chars : NULL, 3);
    }
    if (!strcmp(name, "string"))
        return jv_to_str(r, x);
    if (!strcmp(name, "length") || !strcmp(name, "count"))
        return jv_int((int64_t)length_of(r, at, x));
    if (!strcmp(name, "items")) {
        if (x.t == JV_UNDEF)
            return jv_list_new(r, 0);
        if (x.t != JV_DICT && x.t != JV_NS)
            jr_fail(r, at, TX_EINVAL, "Can only get item pairs from a mapping.");
        struct jv out = jv_list_new(r, x.u.d->n);
        for (size_t i = 0; i < x.u.d->n; i++) {
            struct jv t = jv_list_new(r, 2);
            jv_list_push(r, t, x.u.d->k[i]);
            jv_list_push(r, t, x.u.d->v[i]);
            t.t = JV_TUPLE;
            jv_list_push(r, out, t);
        }
        return out;
    }
    if (!strcmp(name, "join"))
        return join(r, at, x, a);
    if (!strcmp(name, "replace"))
        return replace(r, at, x, a);
    if (!strcmp(name, "upper") || !strcmp(name, "lower"))
        return ju_case(r, jv_to_str(r, x), name[0] == 'u');
    if (!strcmp(name, "capitalize")) {
        struct jv s = ju_case(r, jv_to_str(r, x), false);
        return title(r, s, false);
    }
    if (!strcmp(name, "title"))
        return title(r, ju_case(r, jv_to_str(r, x), false), true);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        struct jv def = arg_or(a, 0, "default_value", jv_cstr(""));
        bool boolean = jv_truthy(arg_or(a, 1, "boolean", jv_bool(false)));
        if (x.t == JV_UNDEF || (boolean && !jv_truthy(x)))
            return def;
        return x;
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        struct jv items = jr_iterate(r, at, x);
        if (!items.u.l->n)
            return jv_undef(NULL, 0);
        return items.u.l->v[name[0] == 'f' ? 0 : items.u.l->n - 1];
    }
    if (!strcmp(name, "list"))
        return jr_iterate(r, at, x);
    if (!strcmp(name, "reverse")) {
        if (x.t == JV_STR) {
            struct jv items = jr_iterate(r, at, x);
            struct jbuf b = {0};
            for (size_t i = items.u.l->n; i-- > 0;)
                jb_put(r, &b, items.u.l->v[i].u.s, items.u.l->v[i].n);
            return jb_value(&b);
        }
        struct jv items = jr_iterate(r, at, x);
        struct jv out = jv_list_new(r, items.u.l->n);
        for (size_t i = items.u.l->n; i-- > 0;)
            jv_list_push(r, out, items.u.l->v[i]);
        return out;
    }
    if (!strcmp(name, "sort")) {
        bool rev = jv_truthy(arg_or(a, 0, "reverse", jv_bool(false)));
        bool cs = jv_truthy(arg_or(a, 1, "case_sensitive", jv_bool(false)));
        return sorted(r, at, x, rev, cs, jargs_get(a, 2, "attribute"));
    }
    if (!strcmp(name, "dictsort")) {
        if (x.t != JV_DICT)
            jr_fail(r, at, TX_EINVAL, "dictsort: expected a mapping");
        struct jv pairs = jinja_filter(r, at, "items", x, &(struct jargs){0});
        struct jv zero = jv_int(0);
        return sorted(r, at, pairs, false, false, &zero);
    }
    if (!strcmp(name, "unique")) {
        struct jv items = jr_iterate(r, at, x);
        struct jv out = jv_list_new(r, items.u.l->n);
        for (size_t i = 0; i < items.u.l->n; i++) {
            bool seen = false;
            for (size_t k = 0; k < out.u.l->n && !seen; k++) {
                jr_step(r, at);
                seen = jv_equal(out.u.l->v[k], items.u.l->v[i]);
            }
            if (!seen)
                jv_list_push(r, out, items.u.l->v[i]);
        }
        return out;
    }
    if (!strcmp(name, "min") || !strcmp(name, "max"))
        return min_max(r, at, x, a, name[1] == 'a');
    if (!strcmp(name, "sum")) {
        struct jv *attr = jargs_get(a, 0, "attribute");
        struct jv acc = arg_or(a, 1, "start", jv_int(0));
        struct jv items = jr_iterate(r, at, x);
        for (size_t i = 0; i < items.u.l->n; i++) {
            struct jv e = attr ? attr_path(r, at, items.u.l->v[i], *attr) : items.u.l->v[i];
            if ((acc.t != JV_INT && acc.t != JV_FLOAT) || (e.t != JV_INT && e.t != JV_FLOAT))
                jr_fail(r, at, TX_EINVAL, "sum: only numbers");
            if (acc.t == JV_INT && e.t == JV_INT) {
                int64_t s;
                if (__builtin_add_overflow(acc.u.i, e.u.i, &s))
                    jr_fail(r, at, TX_ENOTSUP, "integer result outside the 64-bit range");
                acc = jv_int(s);
            } else {
                acc = jv_float((acc.t == JV_INT ? (double)acc.u.i : acc.u.f) +
                               (e.t == JV_INT ? (double)e.u.i : e.u.f));
            }
        }
        return acc;
    }
    if (!strcmp(name, "map"))
        return map_items(r, at, x, a);
    if (!strcmp(name, "select") || !strcmp(name, "reject"))
        return select_items(r, at, x, a, false, name[0] == 's');
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
        return select_items(r, at, x, a, true, name[0] == 's');
    if (!strcmp(name, "attr")) {
        struct jv *nm = jargs_get(a, 0, "name");
        if (!nm || nm->t != JV_STR)
            jr_fail(r, at, TX_EINVAL, "attr: needs a name");
        return jr_getattr(r, at, x, nm->u.s, nm->n);
    }
    if (!strcmp(name, "safe"))
        return x.t == JV_STR ? x : jv_to_str(r, x);
    if (!strcmp(name, "e") || !strcmp(name, "escape") || !strcmp(name, "forceescape"))
        return html_escape(r, x);
    if (!strcmp(name, "int")) {
        struct jv def = arg_or(a, 0, "default", jv_int(0));
        if (x.t == JV_INT)
            return x;
        if (x.t == JV_BOOL)
            return jv_int(x.u.b);
        if (x.t == JV_FLOAT) {
            if (!isfinite(x.u.f) || fabs(x.u.f) >= 9.2e18)
                return def;
            return jv_int((int64_t)x.u.f);
        }
        if (x.t == JV_STR) {
            struct jv s = ju_strip(r, x, NULL, 3);
            char buf[64];
            if (!s.n || s.n >= sizeof(buf))
                return def;
            memcpy(buf, s.u.s, s.n);
            buf[s.n] = 0;
            char *end;
            long long v = strtoll(buf, &end, 10);
            if (*end) {
                double d = strtod(buf, &end);
                if (*end || !isfinite(d) || fabs(d) >= 9.2e18)
                    return def;
                return jv_int((int64_t)d);
            }
            return jv_int(v);
        }
        return def;
    }
    if (!strcmp(name, "float")) {
        struct jv def = arg_or(a, 0, "default", jv_float(0.0));
        if (x.t == JV_FLOAT)
            return x;
        if (x.t == JV_INT || x.t == JV_BOOL)
            return jv_float(x.t == JV_INT ? (double)x.u.i : x.u.b);
        if (x.t == JV_STR) {
            struct jv s = ju_strip(r, x, NULL, 3);
            char buf[64];
            if (!s.n || s.n >= sizeof(buf))
                return def;
            memcpy(buf, s.u.s, s.n);
            buf[s.n] = 0;
            char *end;
            double d = strtod(buf, &end);
            return *end ? def : jv_float(d);
        }
        return def;
    }
    if (!strcmp(name, "abs")) {
        if (x.t == JV_INT)
            return x.u.i == INT64_MIN ? jv_float(9.223372036854775808e18)
                                      : jv_int(x.u.i < 0 ? -x.u.i : x.u.i);
        if (x.t == JV_FLOAT)
            return jv_float(fabs(x.u.f));
        if (x.t == JV_BOOL)
            return jv_int(x.u.b);
        jr_fail(r, at, TX_EINVAL, "bad operand type for abs(): '%s'", jv_type_name(x));
    }
    if (!strcmp(name, "round")) {
        struct jv p = arg_or(a, 0, "precision", jv_int(0));
        struct jv m = arg_or(a, 1, "method", jv_cstr("common"));
        if (p.t != JV_INT || p.u.i < 0 || p.u.i > 15 || m.t != JV_STR)
            jr_fail(r, at, TX_EINVAL, "round: bad precision or method");
        double v = x.t == JV_FLOAT ? x.u.f : x.t == JV_INT ? (double)x.u.i : NAN;
        if (isnan(v))
            jr_fail(r, at, TX_EINVAL, "round: expected a number");
        double s = pow(10.0, (double)p.u.i);
        if (m.n == 4 && !memcmp(m.u.s, "ceil", 4))
            return jv_float(ceil(v * s) / s);
        if (m.n == 5 && !memcmp(m.u.s, "floor", 5))
            return jv_float(floor(v * s) / s);
        return jv_float(round(v * s) / s);
    }
    if (!strcmp(name, "indent"))
        return indent(r, at, x, a);
    if (!strcmp(name, "wordcount")) {
        struct jv s = jv_to_str(r, x);
        int64_t words = 0;
        bool in = false;
        size_t i = 0;
        while (i < s.n) {
            size_t k;
            uint32_t c = ju_decode(s.u.s + i, s.n - i, &k);
            utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
            /* Python's \w: letters, numbers, underscore */
            bool w = c == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                     (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
            if (w && !in)
                words++;
            in = w;
            i += k;
        }
        return jv_int(words);
    }
    jr_fail(r, at, TX_ENOTSUP, "unsupported filter '%s'", name);
}

/* ---- tests ---- */

static bool is_lower_or_upper(struct jrender *r, struct jv x, bool upper)
{
    if (x.t != JV_STR)
        return false;
    struct jv o = ju_case(r, x, upper);
    struct jv other = ju_case(r, x, !upper);
    /* Python: has a cased character and all cased characters are in that case */
    return o.n == x.n && !memcmp(o.u.s, x.u.s, x.n) &&
           !(other.n == x.n && !memcmp(other.u.s, x.u.s, x.n));
}

bool jinja_test(struct jrender *r, const struct jnode *at, const char *name, struct jv x,
                struct jargs *a)
{
    jr_step(r, at);
    struct jv *arg = jargs_get(a, 0, NULL);
    if (!arg)
        arg = a->n ? &a->v[0] : NULL;
    if (!strcmp(name, "defined"))
        return x.t != JV_UNDEF;
    if (!strcmp(name, "undefined"))
        return x.t == JV_UNDEF;
    if (!strcmp(name, "none"))
        return x.t == JV_NONE;
    if (!strcmp(name, "string"))
        return x.t == JV_STR;
    if (!strcmp(name, "mapping"))
        return x.t == JV_DICT;
    if (!strcmp(name, "iterable"))
        return x.t == JV_STR || x.t == JV_LIST || x.t == JV_TUPLE || x.t == JV_DICT ||
               x.t == JV_UNDEF;
    if (!strcmp(name, "sequence"))
        return x.t == JV_STR || x.t == JV_LIST || x.t == JV_TUPLE || x.t == JV_DICT ||
               x.t == JV_UNDEF;
    if (!strcmp(name, "number"))
        return x.t == JV_INT || x.t == JV_FLOAT || x.t == JV_BOOL;
    if (!strcmp(name, "integer"))
        return x.t == JV_INT;
    if (!strcmp(name, "float"))
        return x.t == JV_FLOAT;
    if (!strcmp(name, "boolean"))
        return x.t == JV_BOOL;
    if (!strcmp(name, "true"))
        return x.t == JV_BOOL && x.u.b;
    if (!strcmp(name, "false"))
        return x.t == JV_BOOL && !x.u.b;
    if (!strcmp(name, "callable"))
        return x.t == JV_MACRO || x.t == JV_FUNC || x.t == JV_METHOD;
    if (!strcmp(name, "escaped"))
        return false;
    if (!strcmp(name, "lower"))
        return is_lower_or_upper(r, x, false);
    if (!strcmp(name, "upper"))
        return is_lower_or_upper(r, x, true);
    if (!strcmp(name, "even") || !strcmp(name, "odd")) {
        if (x.t != JV_INT && x.t != JV_BOOL)
            jr_fail(r, at, TX_EINVAL, "%s: expected an integer", name);
        int64_t v = x.t == JV_INT ? x.u.i : x.u.b;
        return (v % 2 == 0) == (name[0] == 'e');
    }
    if (!arg)
        jr_fail(r, at, TX_EINVAL, "test '%s' needs an argument", name);
    if (!strcmp(name, "divisibleby")) {
        if ((x.t != JV_INT && x.t != JV_BOOL) || arg->t != JV_INT || arg->u.i == 0)
            jr_fail(r, at, TX_EINVAL, "divisibleby: expected integers (and not 0)");
        int64_t v = x.t == JV_INT ? x.u.i : x.u.b;
        return arg->u.i == -1 || v % arg->u.i == 0;
    }
    if (!strcmp(name, "sameas")) {
        if (x.t != arg->t)
            return false;
        if (x.t == JV_NONE || x.t == JV_UNDEF)
            return true;
        if (x.t == JV_BOOL)
            return x.u.b == arg->u.b;
        if (x.t == JV_LIST || x.t == JV_TUPLE)
            return x.u.l == arg->u.l;
        if (x.t == JV_DICT || x.t == JV_NS)
            return x.u.d == arg->u.d;
        return jv_equal(x, *arg) && x.t != JV_FLOAT && x.t != JV_STR;
    }
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "=="))
        return jv_equal(x, *arg);
    if (!strcmp(name, "ne") || !strcmp(name, "!="))
        return !jv_equal(x, *arg);
    if (!strcmp(name, "in")) {
        struct jv hay = *arg;
        if (hay.t == JV_STR) {
            if (x.t != JV_STR)
                jr_fail(r, at, TX_EINVAL, "'in <string>' requires string as left operand");
            for (size_t i = 0; i + x.n <= hay.n; i++)
                if (!memcmp(hay.u.s + i, x.u.s, x.n))
                    return true;
            return false;
        }
        struct jv items = jr_iterate(r, at, hay);
        for (size_t i = 0; i < items.u.l->n; i++)
            if (jv_equal(items.u.l->v[i], x))
                return true;
        return false;
    }
    int c = jv_compare(r, at, x, *arg);
    if (!strcmp(name, "lt") || !strcmp(name, "<"))
        return c < 0;
    if (!strcmp(name, "le") || !strcmp(name, "<="))
        return c <= 0;
    if (!strcmp(name, "gt") || !strcmp(name, ">"))
        return c > 0;
    if (!strcmp(name, "ge") || !strcmp(name, ">="))
        return c >= 0;
    jr_fail(r, at, TX_ENOTSUP, "unsupported test '%s'", name);
}
