// SPDX-License-Identifier: MIT
/*
 * The JSON file format of glm-inference --attn-mask (common/attn_mask_file.h):
 * spans, table cells or explicit rows, compiled to one row of sorted,
 * disjoint key ranges per prompt token.
 */
#include "common/attn_mask_file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* one range of the file: [s, e), and (table) its row and column */
struct seg {
    int32_t s, e;
    int64_t row, col;
};

struct ctx {
    const char *what;
    int n;
    char *err;
    size_t errsz;
};

__attribute__((format(printf, 2, 3))) static int fail(const struct ctx *c, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errsz, "%s: %s", c->what, msg);
    return -1;
}

/* [s, e) from a JSON array of two integers inside the prompt */
static int range_of(const struct ctx *c, struct json_object *a, const char *name, int32_t *s,
                    int32_t *e)
{
    if (!json_object_is_type(a, json_type_array) || json_object_array_length(a) != 2 ||
        !json_object_is_type(json_object_array_get_idx(a, 0), json_type_int) ||
        !json_object_is_type(json_object_array_get_idx(a, 1), json_type_int))
        return fail(c, "%s: must be [start, end], two integers", name);
    int64_t a0 = json_object_get_int64(json_object_array_get_idx(a, 0));
    int64_t a1 = json_object_get_int64(json_object_array_get_idx(a, 1));
    if (a0 < 0 || a1 <= a0)
        return fail(c, "%s: [%lld, %lld) is empty or negative (start < end, both >= 0)", name,
                    (long long)a0, (long long)a1);
    if (a1 > c->n)
        return fail(c, "%s: [%lld, %lld) ends past the prompt's %d tokens", name, (long long)a0,
                    (long long)a1, c->n);
    *s = (int32_t)a0;
    *e = (int32_t)a1;
    return 0;
}

/* segs sorted by start and disjoint */
static int check_order(const struct ctx *c, const struct seg *g, size_t n, const char *kind)
{
    for (size_t i = 1; i < n; i++)
        if (g[i].s < g[i - 1].e)
            return fail(c,
                        "%s %zu [%d, %d) %s %s %zu [%d, %d): list them sorted by start, without "
                        "overlaps",
                        kind, i, g[i].s, g[i].e, g[i].s < g[i - 1].s ? "comes before" : "overlaps",
                        kind, i - 1, g[i - 1].s, g[i - 1].e);
    return 0;
}

struct rows {
    int32_t *row_start, *ranges;
    size_t nr, cap;
};

static int push(struct rows *r, int32_t s, int32_t e)
{
    if (r->nr == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        int32_t *p = realloc(r->ranges, cap * 2 * sizeof(int32_t));
        if (!p)
            return -1;
        r->ranges = p;
        r->cap = cap;
    }
    r->ranges[2 * r->nr] = s;
    r->ranges[2 * r->nr + 1] = e;
    r->nr++;
    return 0;
}

/* which segment token t lies in (-1: none), segs sorted and disjoint */
static long seg_of(const struct seg *g, size_t n, int32_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g[mid].e <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && g[lo].s <= t ? (long)lo : -1;
}

/* kinds of file */
enum { F_SPANS, F_TABLE, F_ROWS };

/* the rows: a token outside every segment sees [0, n); one in segment k
 * sees the gaps between segments and the segments `sees` allows (spans:
 * its own; table: its row's and column's) or, for F_ROWS, the key ranges
 * of its query (keys[k]) */
static int build(const struct ctx *c, int kind, const struct seg *g, size_t ng,
                 struct seg *const *keys, const size_t *nkeys, struct rows *r)
{
    r->row_start = malloc(sizeof(int32_t) * ((size_t)c->n + 1));
    if (!r->row_start)
        return fail(c, "out of memory");
    for (int32_t t = 0; t < c->n; t++) {
        r->row_start[t] = (int32_t)r->nr;
        long k = seg_of(g, ng, t);
        int bad = 0;
        if (k < 0) {
            bad = push(r, 0, c->n);
        } else if (kind == F_ROWS) {
            for (size_t j = 0; j < nkeys[k] && !bad; j++)
                bad = push(r, keys[k][j].s, keys[k][j].e);
        } else {
            int32_t at = 0; /* the gaps before each segment, then it if seen */
            for (size_t j = 0; j < ng && !bad; j++) {
                if (g[j].s > at)
                    bad = push(r, at, g[j].s);
                int seen =
                    kind == F_SPANS ? (long)j == k : g[j].row == g[k].row || g[j].col == g[k].col;
                if (seen && !bad)
                    bad = push(r, g[j].s, g[j].e);
                at = g[j].e;
            }
            if (at < c->n && !bad)
                bad = push(r, at, c->n);
        }
        if (bad)
            return fail(c, "out of memory");
    }
    r->row_start[c->n] = (int32_t)r->nr;
    return 0;
}

static struct json_object *member(struct json_object *o, const char *k)
{
    struct json_object *v = NULL;
    return json_object_object_get_ex(o, k, &v) ? v : NULL;
}

/* a non-negative integer member of a table cell */
static int cell_index(const struct ctx *c, struct json_object *cell, const char *k, size_t i,
                      int64_t *out)
{
    struct json_object *v = member(cell, k);
    if (!v || !json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
        return fail(c, "table.cells[%zu]: \"%s\" must be an integer >= 0", i, k);
    *out = json_object_get_int64(v);
    return 0;
}

static int parse_root(const struct ctx *c, struct json_object *root, struct rows *r)
{
    if (!json_object_is_type(root, json_type_object))
        return fail(c, "the mask must be a JSON object with \"spans\", \"table\" or \"rows\"");
    int kind = -1, nkind = 0;
    struct json_object *list = NULL;
    json_object_object_foreach(root, key, val)
    {
        if (!strcmp(key, "spans") || !strcmp(key, "table") || !strcmp(key, "rows")) {
            kind = !strcmp(key, "spans") ? F_SPANS : !strcmp(key, "table") ? F_TABLE : F_ROWS;
            list = val;
            nkind++;
        } else if (!strcmp(key, "n_tokens")) {
            if (!json_object_is_type(val, json_type_int) || json_object_get_int64(val) != c->n)
                return fail(c, "\"n_tokens\" is %s, the prompt has %d tokens",
                            json_object_to_json_string(val), c->n);
        } else {
            return fail(c, "unknown key \"%s\" (spans, table, rows, n_tokens)", key);
        }
    }
    if (nkind != 1)
        return fail(c, "give exactly one of \"spans\", \"table\", \"rows\" (found %d)", nkind);
    if (kind == F_TABLE) {
        if (!json_object_is_type(list, json_type_object) || !member(list, "cells"))
            return fail(c, "\"table\" must be an object with \"cells\"");
        list = member(list, "cells");
    }
    const char *lname = kind == F_SPANS ? "spans" : kind == F_TABLE ? "table.cells" : "rows";
    if (!json_object_is_type(list, json_type_array))
        return fail(c, "\"%s\" must be an array", lname);
    size_t n = json_object_array_length(list);
    struct seg *g = calloc(n + 1, sizeof(*g));
    struct seg **keys = kind == F_ROWS ? calloc(n + 1, sizeof(*keys)) : NULL;
    size_t *nkeys = kind == F_ROWS ? calloc(n + 1, sizeof(*nkeys)) : NULL;
    int rc = -1;
    if (!g || (kind == F_ROWS && (!keys || !nkeys))) {
        fail(c, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct json_object *e = json_object_array_get_idx(list, i);
        char name[64];
        snprintf(name, sizeof(name), "%s[%zu]", lname, i);
        if (kind == F_SPANS) {
            if (range_of(c, e, name, &g[i].s, &g[i].e))
                goto out;
            continue;
        }
        if (!json_object_is_type(e, json_type_object)) {
            fail(c, "%s: must be an object", name);
            goto out;
        }
        const char *rk = kind == F_TABLE ? "span" : "query";
        struct json_object *sp = member(e, rk);
        if (!sp) {
            fail(c, "%s: no \"%s\"", name, rk);
            goto out;
        }
        char sname[80];
        snprintf(sname, sizeof(sname), "%s.%s", name, rk);
        if (range_of(c, sp, sname, &g[i].s, &g[i].e))
            goto out;
        if (kind == F_TABLE) {
            if (cell_index(c, e, "row", i, &g[i].row) || cell_index(c, e, "col", i, &g[i].col))
                goto out;
            continue;
        }
        struct json_object *ks = member(e, "keys");
        if (!ks || !json_object_is_type(ks, json_type_array)) {
            fail(c, "%s: \"keys\" must be an array of [start, end]", name);
            goto out;
        }
        size_t nk = json_object_array_length(ks);
        keys[i] = calloc(nk + 1, sizeof(**keys));
        if (!keys[i]) {
            fail(c, "out of memory");
            goto out;
        }
        nkeys[i] = nk;
        for (size_t j = 0; j < nk; j++) {
            char kname[100];
            snprintf(kname, sizeof(kname), "%s.keys[%zu]", name, j);
            if (range_of(c, json_object_array_get_idx(ks, j), kname, &keys[i][j].s, &keys[i][j].e))
                goto out;
        }
        char kind_name[80];
        snprintf(kind_name, sizeof(kind_name), "%s key", name);
        if (check_order(c, keys[i], nk, kind_name))
            goto out;
    }
    if (check_order(c, g, n, kind == F_SPANS ? "span" : kind == F_TABLE ? "cell" : "query"))
        goto out;
    rc = build(c, kind, g, n, keys, nkeys, r);
out:
    for (size_t i = 0; keys && i < n; i++)
        free(keys[i]);
    free(keys);
    free(nkeys);
    free(g);
    return rc;
}

int txc_attn_mask_parse(const char *json, const char *what, int n_tokens, struct txc_attn_mask *out,
                        char *err, size_t errsz)
{
    struct ctx c = {what, n_tokens, err, errsz};
    memset(out, 0, sizeof(*out));
    if (n_tokens <= 0)
        return fail(&c, "the prompt has no tokens");
    enum json_tokener_error je = json_tokener_success;
    struct json_object *root = json_tokener_parse_verbose(json, &je);
    if (!root)
        return fail(&c, "not JSON: %s",
                    je == json_tokener_continue || je == json_tokener_success
                        ? "the text ends inside a value"
                        : json_tokener_error_desc(je));
    struct rows r = {0};
    int rc = parse_root(&c, root, &r);
    json_object_put(root);
    if (rc) {
        free(r.row_start);
        free(r.ranges);
        return -1;
    }
    out->row_start = r.row_start;
    out->ranges = r.ranges;
    out->m.n_tokens = n_tokens;
    out->m.row_start = r.row_start;
    out->m.ranges = r.ranges;
    return 0;
}

int txc_attn_mask_load(const char *path, int n_tokens, struct txc_attn_mask *out, char *err,
                       size_t errsz)
{
    memset(out, 0, sizeof(*out));
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errsz, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            size_t nc = cap ? cap * 2 : 65536;
            char *p = nc <= (64u << 20) ? realloc(buf, nc) : NULL;
            if (!p) {
                snprintf(err, errsz, "%s: %s", path,
                         nc > (64u << 20) ? "larger than 64 MiB" : "out of memory");
                free(buf);
                fclose(f);
                return -1;
            }
            buf = p;
            cap = nc;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    int rerr = ferror(f);
    fclose(f);
    if (rerr) {
        snprintf(err, errsz, "%s: read error", path);
        free(buf);
        return -1;
    }
    buf[len] = 0;
    if (strlen(buf) != len) {
        snprintf(err, errsz, "%s: not JSON text (a NUL byte at offset %zu)", path, strlen(buf));
        free(buf);
        return -1;
    }
    int rc = txc_attn_mask_parse(buf, path, n_tokens, out, err, errsz);
    free(buf);
    return rc;
}

void txc_attn_mask_free(struct txc_attn_mask *m)
{
    free(m->row_start);
    free(m->ranges);
    memset(m, 0, sizeof(*m));
}
