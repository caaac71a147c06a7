/* SPDX-License-Identifier: MIT */
/*
 * tuna report: the trace's expert tables (otherData.experts, written by
 * libtx/profile/experts.c): read, freed, and per MoE layer as JSON and
 * text (the HTML page's heatmaps: report_html.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

int read_experts(const char *path, json_object *other, struct xmodel **out, int *n)
{
    json_object *xa;
    *out = NULL;
    *n = 0;
    if (!other || !json_object_object_get_ex(other, "experts", &xa))
        return 0;
    if (!json_object_is_type(xa, json_type_array))
        goto bad;
    size_t nx = json_object_array_length(xa);
    struct xmodel *xm = calloc(nx + 1, sizeof(*xm));
    if (!xm)
        goto bad;
    *out = xm;
    for (size_t i = 0; i < nx; i++) {
        json_object *o = json_object_array_get_idx(xa, i), *ls, *m[3];
        struct xmodel *x = &xm[(*n)++];
        x->model = jstr(o, "model") ? jstr(o, "model") : "model";
        x->n_experts = (int)jnum(o, "experts");
        x->top_k = (int)jnum(o, "top_k");
        if (!json_object_object_get_ex(o, "layers", &ls) ||
            !json_object_is_type(ls, json_type_array) || x->n_experts <= 0 ||
            x->n_experts > 65536 || json_object_array_length(ls) > 4096)
            goto bad;
        x->n_layers = (int)json_object_array_length(ls);
        size_t cells = (size_t)x->n_layers * (size_t)x->n_experts;
        x->layer = calloc((size_t)x->n_layers + 1, sizeof(int));
        if (!x->layer)
            goto bad;
        for (int l = 0; l < x->n_layers; l++)
            x->layer[l] = json_object_get_int(json_object_array_get_idx(ls, (size_t)l));
        static const char *const key[3] = {"selections", "cache_hits", "cache_misses"};
        double **dst[3] = {&x->sel, &x->hit, &x->miss};
        for (int k = 0; k < 3; k++) {
            if (!json_object_object_get_ex(o, key[k], &m[k])) {
                if (k == 0)
                    goto bad;
                continue;
            }
            if (!json_object_is_type(m[k], json_type_array) ||
                json_object_array_length(m[k]) != (size_t)x->n_layers)
                goto bad;
            double *v = calloc(cells + 1, sizeof(double));
            if (!v)
                goto bad;
            *dst[k] = v;
            for (int l = 0; l < x->n_layers; l++) {
                json_object *row = json_object_array_get_idx(m[k], (size_t)l);
                if (!json_object_is_type(row, json_type_array) ||
                    json_object_array_length(row) != (size_t)x->n_experts)
                    goto bad;
                for (int e = 0; e < x->n_experts; e++) {
                    double d = json_object_get_double(json_object_array_get_idx(row, (size_t)e));
                    if (!(d >= 0))
                        goto bad;
                    v[(size_t)l * x->n_experts + e] = d;
                }
            }
        }
        if (!x->hit != !x->miss)
            goto bad;
    }
    return 0;
bad:
    fprintf(stderr,
            "tuna report: %s: otherData.experts is malformed (expected per model "
            "\"experts\" > 0, \"layers\" and a layers x experts \"selections\" matrix of "
            "counts >= 0, optionally \"cache_hits\" and \"cache_misses\" alike)\n",
            path);
    return -1;
}

void free_experts(struct xmodel *xm, int n)
{
    for (int i = 0; xm && i < n; i++) {
        free(xm[i].layer);
        free(xm[i].sel);
        free(xm[i].hit);
        free(xm[i].miss);
    }
    free(xm);
}

/* Per MoE layer of x: selections, the hottest expert and its share, the
 * cache's hits and misses. */
struct xlayer {
    double sel, hot_sel, hits, misses;
    int hot;
};

static void expert_layer(const struct xmodel *x, int l, struct xlayer *o)
{
    memset(o, 0, sizeof(*o));
    for (int e = 0; e < x->n_experts; e++) {
        size_t k = (size_t)l * x->n_experts + e;
        o->sel += x->sel[k];
        if (x->sel[k] > o->hot_sel) {
            o->hot_sel = x->sel[k];
            o->hot = e;
        }
        o->hits += x->hit ? x->hit[k] : 0;
        o->misses += x->miss ? x->miss[k] : 0;
    }
}

json_object *experts_json(const struct xmodel *xm, int nxm)
{
    json_object *a = json_object_new_array();
    for (int i = 0; i < nxm; i++) {
        const struct xmodel *x = &xm[i];
        json_object *o = json_object_new_object(), *ls = json_object_new_array();
        json_object_object_add(o, "model", json_object_new_string(x->model));
        json_object_object_add(o, "experts", json_object_new_int(x->n_experts));
        json_object_object_add(o, "top_k", json_object_new_int(x->top_k));
        for (int l = 0; l < x->n_layers; l++) {
            struct xlayer s;
            expert_layer(x, l, &s);
            json_object *r = json_object_new_object();
            json_object_object_add(r, "layer", json_object_new_int(x->layer[l]));
            json_object_object_add(r, "selections", json_object_new_double(s.sel));
            json_object_object_add(r, "hottest_expert", json_object_new_int(s.hot));
            json_object_object_add(r, "hottest_share_pct",
                                   json_object_new_double(s.sel > 0 ? 100 * s.hot_sel / s.sel : 0));
            if (x->hit) {
                json_object_object_add(r, "cache_hits", json_object_new_double(s.hits));
                json_object_object_add(r, "cache_misses", json_object_new_double(s.misses));
            }
            json_object_array_add(ls, r);
        }
        json_object_object_add(o, "layers", ls);
        json_object_array_add(a, o);
    }
    return a;
}

void experts_text(const struct xmodel *xm, int nxm)
{
    for (int i = 0; i < nxm; i++) {
        const struct xmodel *x = &xm[i];
        printf("\nexperts of %s: %d MoE layers x %d experts, top-%d (the HTML page's heatmap)\n",
               x->model, x->n_layers, x->n_experts, x->top_k);
        printf("%-12s %10s %8s %7s", "layer", "selections", "hottest", "share");
        if (x->hit)
            printf(" %10s %10s %9s", "cache hits", "misses", "hit rate");
        printf("\n");
        for (int l = 0; l < x->n_layers; l++) {
            struct xlayer s;
            expert_layer(x, l, &s);
            char name[32];
            snprintf(name, sizeof(name), "layers.%d", x->layer[l]);
            printf("%-12s %10.0f %8d %6.1f%%", name, s.sel, s.hot,
                   s.sel > 0 ? 100 * s.hot_sel / s.sel : 0.0);
            if (x->hit)
                printf(" %10.0f %10.0f %8.1f%%", s.hits, s.misses,
                       s.hits + s.misses > 0 ? 100 * s.hits / (s.hits + s.misses) : 0.0);
            printf("\n");
        }
    }
}
