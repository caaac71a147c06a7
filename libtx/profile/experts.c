/* SPDX-License-Identifier: MIT */
/*
 * libtx's profiler: the expert table of the trace (otherData.experts, the
 * expert heatmap of tuna's report, docs/tuna.md).
 *
 * Per model and (MoE layer, expert): the selections (rows routed to the
 * expert, the change of the device's MOE_ROUTE counters over each pass)
 * and, when the model runs its routed experts from the runtime's expert
 * cache, the uses found in the cache (hits) and read into it (misses).
 * The GLM runtime adds one pass's figures after the pass, only while
 * profiling is on; the table is written with the trace.
 */
#include "profile/profile_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

struct xtab {
    const void *key;
    char *name;
    int n_layers, n_experts, top_k;
    int *layer;
    uint64_t *sel, *hit, *miss; /* [n_layers][n_experts] */
    int have_cache;
};

static pthread_mutex_t x_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xtab *x_tab;
static int x_n;

/* The table of key, name and this geometry (a new one for a model that
 * reloaded at the same address); NULL when out of memory. Lock held. */
static struct xtab *tab_of(const void *key, const char *name, int nl, const int *layer, int ne,
                           int top_k)
{
    if (!name)
        name = "model";
    for (int i = 0; i < x_n; i++)
        if (x_tab[i].key == key && !strcmp(x_tab[i].name, name) && x_tab[i].n_layers == nl &&
            x_tab[i].n_experts == ne && !memcmp(x_tab[i].layer, layer, (size_t)nl * sizeof(int)))
            return &x_tab[i];
    struct xtab *n = realloc(x_tab, (size_t)(x_n + 1) * sizeof(*n));
    if (!n)
        return NULL;
    x_tab = n;
    struct xtab *t = &x_tab[x_n];
    memset(t, 0, sizeof(*t));
    size_t cells = (size_t)nl * (size_t)ne;
    t->name = strdup(name);
    t->layer = malloc((size_t)nl * sizeof(int));
    t->sel = calloc(cells, sizeof(uint64_t));
    t->hit = calloc(cells, sizeof(uint64_t));
    t->miss = calloc(cells, sizeof(uint64_t));
    if (!t->name || !t->layer || !t->sel || !t->hit || !t->miss) {
        free(t->name);
        free(t->layer);
        free(t->sel);
        free(t->hit);
        free(t->miss);
        return NULL;
    }
    memcpy(t->layer, layer, (size_t)nl * sizeof(int));
    t->key = key;
    t->n_layers = nl;
    t->n_experts = ne;
    t->top_k = top_k;
    x_n++;
    return t;
}

void txp_experts_add(const void *key, const char *name, int n_layers, const int *layer,
                     int n_experts, int top_k, const uint64_t *sel, const uint64_t *hit,
                     const uint64_t *miss)
{
    if (!tx_profile_enabled() || n_layers <= 0 || n_experts <= 0 || !layer || !sel)
        return;
    uint64_t t0 = tx_profile_now();
    pthread_mutex_lock(&x_lock);
    struct xtab *t = tab_of(key, name, n_layers, layer, n_experts, top_k);
    if (t) {
        size_t cells = (size_t)n_layers * (size_t)n_experts;
        for (size_t i = 0; i < cells; i++)
            t->sel[i] += sel[i];
        if (hit && miss) {
            t->have_cache = 1;
            for (size_t i = 0; i < cells; i++) {
                t->hit[i] += hit[i];
                t->miss[i] += miss[i];
            }
        }
    }
    pthread_mutex_unlock(&x_lock);
    txp_self_since(t0);
}

static json_object *matrix(const uint64_t *v, int nl, int ne)
{
    json_object *rows = json_object_new_array();
    for (int l = 0; l < nl; l++) {
        json_object *r = json_object_new_array();
        for (int e = 0; e < ne; e++)
            json_object_array_add(r, json_object_new_int64((int64_t)v[(size_t)l * ne + e]));
        json_object_array_add(rows, r);
    }
    return rows;
}

json_object *txp_experts_json(void)
{
    pthread_mutex_lock(&x_lock);
    json_object *a = NULL;
    if (x_n) {
        a = json_object_new_array();
        for (int i = 0; i < x_n; i++) {
            const struct xtab *t = &x_tab[i];
            json_object *o = json_object_new_object();
            json_object_object_add(o, "model", json_object_new_string(t->name));
            json_object_object_add(o, "experts", json_object_new_int(t->n_experts));
            json_object_object_add(o, "top_k", json_object_new_int(t->top_k));
            json_object *ls = json_object_new_array();
            for (int l = 0; l < t->n_layers; l++)
                json_object_array_add(ls, json_object_new_int(t->layer[l]));
            json_object_object_add(o, "layers", ls);
            json_object_object_add(o, "selections", matrix(t->sel, t->n_layers, t->n_experts));
            if (t->have_cache) {
                json_object_object_add(o, "cache_hits", matrix(t->hit, t->n_layers, t->n_experts));
                json_object_object_add(o, "cache_misses",
                                       matrix(t->miss, t->n_layers, t->n_experts));
            }
            json_object_array_add(a, o);
        }
    }
    pthread_mutex_unlock(&x_lock);
    return a;
}
