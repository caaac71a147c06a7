/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: expert parallelism -- one model on several TX8 devices, in
 * one process or across processes through a caller-supplied transport
 * (include/tx/glm.h "Expert parallelism", docs/multi-device.md).
 *
 * The primary (global device 0) is an ordinary model loaded with its
 * routed experts marked non-resident (RT_LOAD_EP_PRIMARY). Every device of
 * this process also gets a shard: a glm_model_t that shares the primary's
 * package and tables (tensors, mats, exp_mat: read-only after load) and
 * owns, on its device, an expert cache (expert_cache.c) large enough for
 * every expert placed on it -- so it never evicts and reads each expert
 * once, with io_uring, straight into its slot -- a meta BO for its MoE
 * expert tables and a pair buffer (its "activations"):
 *   x[P][D] f32   the pairs' input rows (copied from the primary's xn)
 *   y[P][D] f32   the pairs' outputs (preset to -0.0; MOE_FFN accumulates)
 *   ids[P] i32    the pair's expert
 *   w[P] f32      1.0: y = -0.0 + 1 * out, the expert's output exactly
 * A MoE layer on the shard is rt_xc_moe_ffn over P rows with top_k 1, the
 * same command a one-device expert cache builds; for each expert it sees
 * the rows routed to it, in row order, as one device's MOE_FFN does.
 *
 * Combine: MOE_FFN's sum is defined by the hardware interface
 * (include/tx8/tx8_hw.h, MOE_FFN): expert after expert in increasing expert
 * id, one fused multiply-add per element. The host continues it the same
 * way (fmaf, in expert order), so the result has the same bits as one
 * device's. A shard's pair rows start at -0.0, so y = fma(1, out, -0.0) is
 * the expert's output exactly, the sign of a zero included.
 */
#include "runtime/expert_parallel.h"

#include "runtime/blocks.h"
#include <tx-internal/tx_ep_place.h>
#include "runtime/expert_cache.h"
#include "runtime/weight_store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_dtype.h>

#define EP_ALIGN(x) (((x) + 255) / 256 * 256)
#define EP_OP_LAYER 1
#define EP_OP_STOP 2
#define EP_OP_REBALANCE 3

struct ep_dev {
    int gidx;                 /* global device index */
    int rank;                 /* the rank driving it */
    tx_device_t *dev;         /* local: the device, else NULL */
    glm_model_t *sm;          /* local: the shard */
    tx_cmdbuf_t *cb;          /* local */
    uint64_t owned;           /* (MoE layer, expert) pairs placed here */
    const int16_t *owner_map; /* the model's placement [n_moe][E] */
    uint64_t pcap;            /* pairs the pair buffer holds */
    uint64_t off_y, off_ids, off_w;
    uint32_t np;   /* pairs of the current layer */
    uint64_t roff; /* outputs in the receive buffer (remote) */
    struct gctx g;
    struct rt_fwd acc;
    struct glm_ep_device_stats st;
};

struct rt_ep {
    int n, rank, size, first, n_local;
    int has_tr;
    struct glm_ep_transport tr;
    int groups;
    int16_t *owner;   /* [n_moe][E] global device */
    struct ep_dev *d; /* [n] */
    int32_t *pidx;    /* [T*K] pair index in its device, -1 */
    size_t pidx_cap;
    uint8_t *sbuf, *rbuf;
    size_t scap, rcap;
    size_t *cnt; /* 4 * size: scounts, sdispls, rcounts, rdispls */
    uint32_t *hdr;
    size_t hdr_bytes;
    uint64_t layers, tokens;
    double dispatch_ms, wait_ms, combine_ms;
    int stopped;
    /* memory-aware placement, per global device */
    uint64_t *msize, *room, *resident;
    /* rebalancing */
    uint32_t rebalances;
    uint64_t moved, bmoved, bmoved_remote;
    double imb_before, imb_after;
};

/* ---- shards ------------------------------------------------------------- */

static void shard_free(glm_model_t *s)
{
    if (!s)
        return;
    rt_xc_free(s);
    if (s->act_bo)
        tx_bo_free(s->act_bo);
    if (s->meta_bo)
        tx_bo_free(s->meta_bo);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static int shard_declare(struct ep_dev *d)
{
    tx_cmdbuf_reset(d->cb);
    int rc = tx_cmdbuf_use(d->cb, d->sm->meta_bo, TX_ACCESS_RW);
    if (!rc)
        rc = rt_xc_declare(d->sm, d->cb);
    if (!rc && d->sm->act_bo)
        rc = tx_cmdbuf_use(d->cb, d->sm->act_bo, TX_ACCESS_RW);
    if (rc)
        return tx_error(rc, "expert parallel: device %d: %s", d->gidx, tx_last_error());
    return TX_OK;
}

/* Slots for every expert placed on d at expert precision p. */
static uint64_t shard_budget(const struct ep_dev *d, int p)
{
    uint64_t k = (uint64_t)d->sm->cfg.num_experts_per_tok;
    uint64_t n = d->owned > k ? d->owned : k;
    return n * rt_xc_slot_bytes(d->sm, p);
}

static int shard_open(const glm_model_t *pm, struct ep_dev *d, unsigned flags)
{
    glm_model_t *s = calloc(1, sizeof(*s));
    if (!s)
        return tx_error(TX_ENOMEM, "expert parallel: out of memory");
    pthread_mutex_init(&s->lock, NULL);
    d->sm = s;
    s->dev = d->dev;
    s->store = &rt_store_expert_cache; /* a shard's jobs declare its cache */
    int rc = tx_device_info(d->dev, &s->dinfo);
    if (rc)
        return tx_error(rc, "expert parallel: device %d: %s", d->gidx, tx_last_error());
    s->submit_flags = pm->submit_flags;
    memcpy(s->name, pm->name, sizeof(s->name));
    snprintf(s->label_w, sizeof(s->label_w), "%.16s_Experts_d%d", pm->name, d->gidx);
    snprintf(s->label_act, sizeof(s->label_act), "%.16s_Dispatch_d%d", pm->name, d->gidx);
    s->cfg = pm->cfg;
    s->smd = pm->smd;
    s->stored_plan = pm->stored_plan;
    memcpy(s->plan_group, pm->plan_group, sizeof(s->plan_group));
    s->n_tensors = pm->n_tensors;
    s->tensors = pm->tensors;
    s->n_mats = pm->n_mats;
    s->mats = pm->mats;
    s->exp_mat = pm->exp_mat;
    s->n_moe_layers = pm->n_moe_layers;
    s->moe_index = pm->moe_index;
    s->moe_layer = pm->moe_layer;
    int E = s->cfg.n_routed_experts;
    s->table_off = 0;
    s->meta_size = (uint64_t)s->n_moe_layers * (uint64_t)E * 3 * sizeof(struct tx8_weight);
    rc = tx_bo_alloc(d->dev, s->meta_size, 0, s->label_w, &s->meta_bo);
    if (!rc)
        rc = tx_bo_map(s->meta_bo, &s->meta_map);
    if (rc)
        return tx_error(rc, "expert parallel: device %d: expert tables: %s", d->gidx,
                        tx_last_error());
    memset(s->meta_map, 0, s->meta_size);
    glm_precision_plan_t plan;
    rt_plan_of(d->dev, &plan, NULL);
    uint64_t bytes = shard_budget(d, (int)plan.precision[GLM_EXPERT]);
    rc = rt_xc_setup(s, bytes, (flags & (GLM_LOAD_DIRECT)) | GLM_LOAD_EXPERT_NO_PREFETCH);
    if (rc)
        return tx_error(rc, "expert parallel: device %d (%s): the %llu experts placed on it: %s",
                        d->gidx, s->dinfo.path, (unsigned long long)d->owned, tx_last_error());
    s->streaming = 0;
    s->xc->K = 1; /* the shard's MOE_FFN rows are (row, expert) pairs: top_k 1 */
    /* its experts now: the passes then never read the package */
    size_t ne = (size_t)s->n_moe_layers * (size_t)E;
    uint8_t *want = calloc(ne ? ne : 1, 1);
    if (!want)
        return tx_error(TX_ENOMEM, "expert parallel: out of memory");
    for (size_t i = 0; i < ne; i++)
        want[i] = d->owner_map && d->owner_map[i] == d->gidx;
    rc = rt_xc_preload(s, want);
    free(want);
    if (rc)
        return tx_error(rc, "expert parallel: device %d: reading its experts: %s", d->gidx,
                        tx_last_error());
    rc = tx_cmdbuf_create(d->dev, &d->cb);
    if (rc)
        return tx_error(rc, "expert parallel: device %d: %s", d->gidx, tx_last_error());
    d->st.experts = (uint32_t)d->owned;
    return TX_OK;
}

/* Room for np pairs in d's pair buffer. */
static int shard_reserve(struct ep_dev *d, uint64_t np)
{
    glm_model_t *s = d->sm;
    int D = s->cfg.hidden_size;
    if (np <= d->pcap && s->act_bo)
        return TX_OK;
    uint64_t cap = d->pcap ? d->pcap : 64;
    while (cap < np)
        cap *= 2;
    uint64_t row = (uint64_t)D * 4;
    uint64_t oy = EP_ALIGN(cap * row), oi = oy + EP_ALIGN(cap * row), ow = oi + EP_ALIGN(cap * 4);
    uint64_t total = ow + EP_ALIGN(cap * 4);
    if (s->act_bo)
        tx_bo_free(s->act_bo);
    s->act_bo = NULL;
    s->act_map = NULL;
    d->pcap = 0;
    int rc = tx_bo_alloc(d->dev, total, 0, s->label_act, &s->act_bo);
    if (!rc)
        rc = tx_bo_map(s->act_bo, &s->act_map);
    if (rc)
        return tx_error(rc, "expert parallel: device %d: pair buffer of %llu bytes: %s", d->gidx,
                        (unsigned long long)total, tx_last_error());
    s->act_size = total;
    d->pcap = cap;
    d->off_y = oy;
    d->off_ids = oi;
    d->off_w = ow;
    return TX_OK;
}

static float *pair_x(struct ep_dev *d)
{
    return (float *)d->sm->act_map;
}
static float *pair_y(struct ep_dev *d)
{
    return (float *)((uint8_t *)d->sm->act_map + d->off_y);
}
static int32_t *pair_ids(struct ep_dev *d)
{
    return (int32_t *)((uint8_t *)d->sm->act_map + d->off_ids);
}
static float *pair_w(struct ep_dev *d)
{
    return (float *)((uint8_t *)d->sm->act_map + d->off_w);
}

/* Submit MoE layer (l, mi) over d's np pairs (already in its pair buffer;
 * y is preset here). */
static int shard_submit(struct ep_dev *d, int l, int mi, const glm_precision_plan_t *plan,
                        uint32_t submit_flags)
{
    glm_model_t *s = d->sm;
    int D = s->cfg.hidden_size, E = s->cfg.n_routed_experts;
    int p = (int)plan->precision[GLM_EXPERT];
    s->submit_flags = submit_flags;
    if (p != s->xc->slot_prec) {
        s->xc->budget = shard_budget(d, p);
        int rc = rt_xc_plan_changed(s, plan);
        if (rc)
            return rc;
    }
    float *y = pair_y(d), *w = pair_w(d);
    for (size_t i = 0; i < (size_t)d->np * (size_t)D; i++)
        y[i] = -0.0f; /* fma(1, out, -0.0) == out, -0.0 included */
    for (uint32_t j = 0; j < d->np; j++)
        w[j] = 1.0f;
    int rc = shard_declare(d);
    if (rc)
        return rc;
    struct gctx *g = &d->g;
    memset(g, 0, sizeof(*g));
    memset(&d->acc, 0, sizeof(d->acc));
    d->acc.T = (int)d->np;
    g->m = s;
    g->c = &s->cfg;
    g->plan = plan;
    g->cb = d->cb;
    g->f = &d->acc;
    g->acc = &d->acc;
    g->act = s->act_bo;
    g->a.rid = d->off_ids;
    g->dbg = rt_debug_on();
    rt_xc_pass_begin(s, (int)d->np, 0);
    struct tx_moe_ffn_args x;
    memset(&x, 0, sizeof(x));
    x.y = tx_ref(s->act_bo, d->off_y);
    x.x = tx_ref(s->act_bo, 0);
    x.ids = tx_ref(s->act_bo, d->off_ids);
    x.w = tx_ref(s->act_bo, d->off_w);
    x.experts = tx_ref(s->meta_bo, s->table_off + (uint64_t)mi * E * 3 * sizeof(struct tx8_weight));
    x.tokens = d->np;
    x.top_k = 1;
    x.num_experts = (uint32_t)E;
    x.dim = (uint32_t)D;
    x.ffn_dim = (uint32_t)s->cfg.moe_intermediate_size;
    x.ld_x = x.ld_y = (uint32_t)D;
    x.act_dtype = rt_prec_act_dtype(plan->precision[GLM_EXPERT]);
    x.flags = TX8_MOE_FFN_F_ACCUMULATE; /* y = -0.0 + 1 * out (the cache may run groups) */
    if (g->dbg)
        rt_debug("expert parallel: device %d: MoE layer %d, %u pairs", d->gidx, l, d->np);
    rt_xc_moe_ffn(g, l, mi, &x);
    if (!g->rc)
        rt_graph_flush(g);
    if (g->rc) {
        rt_graph_wait(g); /* what was submitted */
        free(g->jobs);
        free(g->waited);
        g->jobs = NULL;
        g->waited = NULL;
        return g->rc;
    }
    d->st.pairs += d->np;
    return TX_OK;
}

static int shard_wait(struct ep_dev *d)
{
    struct gctx *g = &d->g;
    int rc = rt_graph_wait(g);
    free(g->jobs);
    free(g->waited);
    g->jobs = NULL;
    g->waited = NULL;
    g->njobs = g->cap_jobs = 0;
    d->st.compute_ms += (double)d->acc.busy_ns / 1e6;
    if (rc)
        return tx_error(rc, "expert parallel: device %d: %s", d->gidx, tx_last_error());
    return TX_OK;
}

/* ---- placement (tx-internal/tx_ep_place.h: the rule, shared with glm-analyze) ------ */

/* The groups and the load counters of the options (every rank checks the
 * same options the same way). */
static int place_check(glm_model_t *m, struct rt_ep *ep, const struct glm_ep_options *o)
{
    int E = m->cfg.n_routed_experts, nm = m->n_moe_layers, n = ep->n;
    int G = o && o->expert_parallel ? o->expert_parallel : E;
    if (G < 1 || G > E || E % G)
        return tx_error(TX_EINVAL,
                        "expert parallel: expert_parallel %d does not divide the model's %d routed "
                        "experts",
                        G, E);
    if (G < n)
        return tx_error(TX_EINVAL,
                        "expert parallel: %d devices but only %d expert group(s) per MoE layer "
                        "(expert_parallel %d of %d routed experts): every device needs at least "
                        "one group; use at most %d devices or more groups",
                        n, G, G, E, G);
    const uint64_t *load = o ? o->expert_load : NULL;
    if (load && o->n_expert_load != (uint64_t)nm * (uint64_t)E)
        return tx_error(TX_EINVAL,
                        "expert parallel: expert_load has %llu entries; the model has %d MoE "
                        "layers x %d experts = %llu",
                        (unsigned long long)o->n_expert_load, nm, E,
                        (unsigned long long)((uint64_t)nm * (uint64_t)E));
    ep->groups = G;
    ep->owner = malloc(((size_t)nm * (size_t)E + 1) * sizeof(int16_t));
    if (!ep->owner)
        return tx_error(TX_ENOMEM, "expert parallel: out of memory");
    return TX_OK;
}

/* Device bytes of one expert: a slot of the expert cache for the primary's
 * expert precision. */
static uint64_t ep_expert_bytes(const glm_model_t *m)
{
    glm_precision_plan_t plan;
    rt_plan_of(m->dev, &plan, NULL);
    return rt_xc_slot_bytes(m, (int)plan.precision[GLM_EXPERT]);
}

/* owner <- the placement (rank 0): by memory (load NULL or all zero) or
 * by the load counters, within the devices' rooms. */
static int place_run(glm_model_t *m, struct rt_ep *ep, const uint64_t *load, int16_t *owner)
{
    int E = m->cfg.n_routed_experts, nm = m->n_moe_layers;
    size_t ne = (size_t)nm * (size_t)E;
    uint64_t *b = malloc((ne ? ne : 1) * sizeof(uint64_t));
    if (!b)
        return tx_error(TX_ENOMEM, "expert parallel: out of memory");
    uint64_t sb = ep_expert_bytes(m);
    for (size_t i = 0; i < ne; i++)
        b[i] = sb;
    struct ep_place_in in = {.n = ep->n,
                             .E = E,
                             .G = ep->groups,
                             .nm = nm,
                             .bytes = b,
                             .load = load,
                             .size = ep->msize,
                             .resident = ep->resident,
                             .room = ep->room};
    uint64_t mem[GLM_EP_MAX_DEVICES];
    uint32_t cnt[GLM_EP_MAX_DEVICES];
    char err[1024];
    int rc = ep_place(&in, owner, mem, cnt, err, sizeof(err));
    free(b);
    if (rc)
        return tx_error(rc, "expert parallel: %s", err);
    return TX_OK;
}

static void set_owned(struct rt_ep *ep, size_t ne)
{
    for (int d = 0; d < ep->n; d++)
        ep->d[d].owned = 0;
    for (size_t i = 0; i < ne; i++)
        ep->d[ep->owner[i]].owned++;
    for (int d = 0; d < ep->n; d++)
        ep->d[d].st.experts = (uint32_t)ep->d[d].owned;
}

/* Pairs a pair buffer is expected to hold: the part of the room kept for it. */
#define EP_PAIR_RESERVE 1024

/* A local device's memory: its size and the room its experts may take now
 * (free bytes less the shard's tables, conversion scratch, a pair buffer of
 * EP_PAIR_RESERVE pairs, 1 MiB of slack and `reserve`). */
static int dev_mem(const glm_model_t *m, tx_device_t *dev, int gidx, uint64_t reserve,
                   uint64_t *size, uint64_t *room)
{
    struct tx_device_info in;
    if (tx_device_info(dev, &in))
        return tx_error(TX_EIO, "expert parallel: device %d: %s", gidx, tx_last_error());
    int E = m->cfg.n_routed_experts, D = m->cfg.hidden_size;
    uint64_t over = (uint64_t)m->n_moe_layers * (uint64_t)E * 3 * sizeof(struct tx8_weight);
    uint64_t tmax = 0;
    for (int mi = 0; mi < m->n_moe_layers; mi++)
        for (int e = 0; e < E; e++)
            for (int q = 0; q < 3; q++) {
                int x = m->exp_mat[((size_t)m->moe_layer[mi] * E + e) * 3 + q];
                if (x == RT_NONE)
                    continue;
                const struct tx_smd_tensor *st = m->tensors[m->mats[x].t].smd;
                if ((uint64_t)st->rows * st->cols * 4 > tmax)
                    tmax = (uint64_t)st->rows * st->cols * 4;
            }
    over += tmax + EP_PAIR_RESERVE * ((uint64_t)D * 8 + 8) + (1u << 20) + reserve;
    uint64_t fr = in.heap_size > in.mem_used ? in.heap_size - in.mem_used : 0;
    *size = in.heap_size;
    *room = fr > over ? fr - over : 0;
    return TX_OK;
}

/* Device 0's bytes of the model besides its experts: the primary. */
static uint64_t primary_bytes(glm_model_t *m)
{
    struct glm_model_info i;
    if (glm_model_info(m, &i))
        return 0;
    return i.weights_bytes + i.converted_bytes + i.activation_bytes + i.kv_bytes + m->meta_size;
}

/* ---- the combine ---------------------------------------------------------- */

/* y continues the device's sum: fma per element (tx8_hw.h, MOE_FFN) */
static void combine_row(float *h, float w, const float *o, int D)
{
    for (int c = 0; c < D; c++)
        h[c] = fmaf(w, o[c], h[c]);
}

/* ---- transport ------------------------------------------------------------- */

static int tr_grow(uint8_t **b, size_t *cap, size_t need)
{
    if (need <= *cap)
        return TX_OK;
    uint8_t *p = realloc(*b, need);
    if (!p)
        return tx_error(TX_ENOMEM, "expert parallel: out of memory");
    *b = p;
    *cap = need;
    return TX_OK;
}

static int tr_bcast(struct rt_ep *ep, void *buf, size_t bytes)
{
    if (ep->tr.bcast(ep->tr.ctx, buf, bytes, 0))
        return tx_error(TX_EIO, "expert parallel: rank %d: transport bcast of %zu bytes failed",
                        ep->rank, bytes);
    return TX_OK;
}

static int tr_a2a(struct rt_ep *ep, const void *s, void *r)
{
    size_t *c = ep->cnt;
    int n = ep->size;
    if (ep->tr.alltoallv(ep->tr.ctx, s, c, c + n, r, c + 2 * n, c + 3 * n))
        return tx_error(TX_EIO, "expert parallel: rank %d: transport alltoallv failed", ep->rank);
    return TX_OK;
}

/* ---- a MoE layer: rank 0 ----------------------------------------------------- */

static int pairs_of_row(const int32_t *rid, const int32_t *pidx, int t, int K, int E, int *ks)
{
    int n = 0;
    for (int k = 0; k < K; k++) {
        int i = t * K + k;
        if (rid[i] < 0 || rid[i] >= E || pidx[i] < 0)
            continue;
        int j = n++;
        while (j > 0 && rid[t * K + ks[j - 1]] > rid[i]) {
            ks[j] = ks[j - 1];
            j--;
        }
        ks[j] = k;
    }
    return n;
}

static int ep_layer(struct gctx *g, int l, int mi)
{
    glm_model_t *m = g->m;
    struct rt_ep *ep = m->ep;
    int T = g->f->T, K = m->cfg.num_experts_per_tok, D = m->cfg.hidden_size;
    int E = m->cfg.n_routed_experts, n = ep->n;
    int rc = rt_graph_sync(g); /* the routing */
    if (rc)
        return rc;
    double t0 = rt_now_ms();
    const int32_t *rid = (const int32_t *)((uint8_t *)m->act_map + g->a.rid);
    const float *rw = (const float *)((uint8_t *)m->act_map + g->a.rw);
    const float *xn = (const float *)((uint8_t *)m->act_map + g->a.xn);
    float *h = (float *)((uint8_t *)m->act_map + g->a.h);
    size_t nk = (size_t)T * (size_t)K;
    if (nk > ep->pidx_cap) {
        int32_t *p = realloc(ep->pidx, nk * sizeof(int32_t));
        if (!p)
            return tx_error(TX_ENOMEM, "expert parallel: out of memory");
        ep->pidx = p;
        ep->pidx_cap = nk;
    }
    for (int d = 0; d < n; d++)
        ep->d[d].np = 0;
    for (size_t i = 0; i < nk; i++) {
        int e = rid[i];
        if (e < 0 || e >= E) {
            ep->pidx[i] = -1;
            continue;
        }
        struct ep_dev *d = &ep->d[ep->owner[(size_t)mi * E + e]];
        ep->pidx[i] = (int32_t)d->np++;
    }
    /* local devices: rows straight from the primary's mapping into theirs */
    for (int d = 0; d < n && !rc; d++) {
        struct ep_dev *dv = &ep->d[d];
        if (!dv->sm || !dv->np)
            continue;
        rc = shard_reserve(dv, dv->np);
    }
    if (rc)
        return rc;
    for (size_t i = 0; i < nk; i++) {
        if (ep->pidx[i] < 0)
            continue;
        struct ep_dev *dv = &ep->d[ep->owner[(size_t)mi * E + rid[i]]];
        if (!dv->sm)
            continue;
        uint32_t j = (uint32_t)ep->pidx[i];
        memcpy(pair_x(dv) + (size_t)j * D, xn + (i / (size_t)K) * D, (size_t)D * 4);
        pair_ids(dv)[j] = rid[i];
        dv->st.bytes_in += (uint64_t)D * 4 + 4;
    }
    int submitted[GLM_EP_MAX_DEVICES] = {0};
    for (int d = 0; d < n && !rc; d++) {
        struct ep_dev *dv = &ep->d[d];
        if (!dv->sm || !dv->np)
            continue;
        rc = shard_submit(dv, l, mi, g->plan, m->submit_flags);
        submitted[d] = !rc;
    }
    /* other ranks: header, pairs, outputs -- always the whole exchange once
     * the header went out, so that the ranks stay in step */
    int trc = TX_OK;
    if (ep->has_tr && ep->size > 1) {
        uint32_t *hd = ep->hdr;
        hd[0] = EP_OP_LAYER;
        hd[1] = (uint32_t)mi;
        hd[2] = (uint32_t)g->plan->precision[GLM_EXPERT];
        hd[3] = m->submit_flags;
        for (int d = 0; d < n; d++)
            hd[4 + d] = ep->d[d].np;
        trc = tr_bcast(ep, hd, ep->hdr_bytes);
        int S = ep->size;
        size_t *sc = ep->cnt, *sd = sc + S, *rcn = sc + 2 * S, *rd = sc + 3 * S;
        size_t pb = 4 + (size_t)D * 4, tot = 0;
        for (int r = 0; r < S; r++) {
            sc[r] = 0;
            for (int d = 0; d < n; d++)
                if (ep->d[d].rank == r && r != 0)
                    sc[r] += ep->d[d].np * pb;
            sd[r] = tot;
            tot += sc[r];
            rcn[r] = rd[r] = 0;
        }
        if (!trc)
            trc = tr_grow(&ep->sbuf, &ep->scap, tot ? tot : 1);
        if (trc) /* nothing to send from a buffer we do not have */
            for (int r = 0; r < S; r++)
                sc[r] = sd[r] = 0;
        if (!trc) {
            /* per remote device, in device order: its pairs in pair order */
            size_t *pos = calloc((size_t)n, sizeof(size_t));
            if (!pos)
                trc = tx_error(TX_ENOMEM, "expert parallel: out of memory");
            for (int d = 0, r = -1; d < n && pos; d++) {
                if (ep->d[d].rank != r) {
                    r = ep->d[d].rank;
                    pos[d] = sd[r];
                } else {
                    pos[d] = pos[d - 1] + ep->d[d - 1].np * pb;
                }
            }
            for (size_t i = 0; i < nk && pos; i++) {
                if (ep->pidx[i] < 0)
                    continue;
                int d = ep->owner[(size_t)mi * E + rid[i]];
                struct ep_dev *dv = &ep->d[d];
                if (dv->sm)
                    continue;
                uint8_t *p = ep->sbuf + pos[d] + (size_t)ep->pidx[i] * pb;
                memcpy(p, &rid[i], 4);
                memcpy(p + 4, xn + (i / (size_t)K) * D, (size_t)D * 4);
                dv->st.bytes_in += pb;
            }
            free(pos);
        }
        int a2 = tr_a2a(ep, ep->sbuf, ep->rbuf);
        if (!trc)
            trc = a2;
        /* the outputs: status (8 bytes), then [np][D] per device */
        tot = 0;
        for (int r = 0; r < S; r++) {
            sc[r] = sd[r] = 0;
            rcn[r] = 0;
            if (r)
                rcn[r] = 8;
            for (int d = 0; d < n; d++)
                if (ep->d[d].rank == r && r != 0)
                    rcn[r] += (size_t)ep->d[d].np * D * 4;
            rd[r] = tot;
            tot += rcn[r];
        }
        int gr = tr_grow(&ep->rbuf, &ep->rcap, tot ? tot : 1);
        a2 = gr ? gr : tr_a2a(ep, ep->sbuf, ep->rbuf);
        if (!trc)
            trc = a2;
        for (int r = 1; r < S && !trc; r++) {
            int32_t st;
            memcpy(&st, ep->rbuf + rd[r], 4);
            if (st)
                trc = tx_error(st < 0 ? st : TX_EIO,
                               "expert parallel: rank %d failed MoE layer %d (its stderr says why)",
                               r, l);
        }
        for (int d = 0, r = -1; d < n; d++) {
            struct ep_dev *dv = &ep->d[d];
            if (dv->rank == 0)
                continue;
            if (dv->rank != r) {
                r = dv->rank;
                dv->roff = rd[r] + 8;
            } else {
                dv->roff = ep->d[d - 1].roff + (size_t)ep->d[d - 1].np * D * 4;
            }
            dv->st.bytes_out += (uint64_t)dv->np * D * 4;
            dv->st.pairs += dv->np;
        }
    }
    double t1 = rt_now_ms();
    for (int d = 0; d < n; d++)
        if (submitted[d]) {
            int w = shard_wait(&ep->d[d]);
            if (!rc)
                rc = w;
        }
    if (!rc)
        rc = trc;
    double t2 = rt_now_ms();
    if (rc)
        return rc;
    for (int d = 0; d < n; d++)
        if (ep->d[d].sm)
            ep->d[d].st.bytes_out += (uint64_t)ep->d[d].np * D * 4;
    /* combine: each row's experts in increasing id, with the device's rounding */
    int ks[64];
    for (int t = 0; t < T; t++) {
        int c = pairs_of_row(rid, ep->pidx, t, K < 64 ? K : 64, E, ks);
        for (int q = 0; q < c; q++) {
            int i = t * K + ks[q];
            struct ep_dev *dv = &ep->d[ep->owner[(size_t)mi * E + rid[i]]];
            const float *o = dv->sm
                                 ? pair_y(dv) + (size_t)ep->pidx[i] * D
                                 : (const float *)(ep->rbuf + dv->roff) + (size_t)ep->pidx[i] * D;
            combine_row(h + (size_t)t * D, rw[i], o, D);
        }
    }
    double t3 = rt_now_ms();
    ep->layers++;
    ep->tokens += (uint64_t)T;
    ep->dispatch_ms += t1 - t0;
    ep->wait_ms += t2 - t1;
    ep->combine_ms += t3 - t2;
    if (g->dbg) {
        char line[512];
        int o = snprintf(line, sizeof(line),
                         "expert parallel: MoE layer %d: %d rows, dispatch %.3f ms, wait %.3f ms, "
                         "combine %.3f ms; pairs per device:",
                         l, T, t1 - t0, t2 - t1, t3 - t2);
        for (int d = 0; d < n && o > 0 && (size_t)o < sizeof(line); d++)
            o += snprintf(line + o, sizeof(line) - (size_t)o, " %u", ep->d[d].np);
        rt_debug("%s", line);
    }
    return TX_OK;
}

/* ---- rebalancing (glm_model_ep_rebalance) ------------------------------------ */

/* max / mean of the devices' selections under placement own (0: none). */
static double imbalance_of(int n, const uint64_t *cnt, const int16_t *own, size_t ne, uint64_t *sel)
{
    uint64_t s[GLM_EP_MAX_DEVICES] = {0}, tot = 0, mx = 0;
    for (size_t i = 0; i < ne; i++) {
        s[own[i]] += cnt[i];
        tot += cnt[i];
    }
    for (int d = 0; d < n; d++) {
        if (s[d] > mx)
            mx = s[d];
        if (sel)
            sel[d] = s[d];
    }
    return tot ? (double)mx / ((double)tot / n) : 0;
}

static int xc_free_slot(const struct rt_xcache *xc)
{
    for (int s = 0; s < xc->n_slots; s++)
        if (xc->slot[s].mi < 0)
            return s;
    return TX_NONE;
}

static void xc_put(struct rt_xcache *xc, int s, int mi, int e, int conv)
{
    struct rt_xslot *sl = &xc->slot[s];
    sl->mi = mi;
    sl->e = e;
    sl->err = 0;
    sl->inflight = 0;
    sl->pin = 0;
    sl->prefetched = 0;
    sl->conv_prec = conv;
    sl->last = xc->clock;
    xc->where[(size_t)mi * xc->E + (size_t)e] = s;
}

static void xc_drop(struct rt_xcache *xc, int mi, int e)
{
    int s = xc->where[(size_t)mi * xc->E + (size_t)e];
    if (s < 0)
        return;
    xc->slot[s].mi = xc->slot[s].e = -1;
    xc->slot[s].conv_prec = -1;
    xc->slot[s].prefetched = 0;
    xc->where[(size_t)mi * xc->E + (size_t)e] = -1;
}

/* d's expert buffer grown to ns slots: a new buffer, the slots copied from
 * the old buffer's mapping into the new one's, the old one freed. */
static int xc_grow(struct ep_dev *d, int ns)
{
    glm_model_t *s = d->sm;
    struct rt_xcache *xc = s->xc;
    if (ns <= xc->n_slots)
        return TX_OK;
    tx_bo_t *nb = NULL;
    void *map = NULL;
    int rc = tx_bo_alloc(d->dev, (uint64_t)ns * xc->slot_size, 0, s->label_w, &nb);
    if (!rc)
        rc = tx_bo_map(nb, &map);
    struct rt_xslot *sl = rc ? NULL : realloc(xc->slot, (size_t)ns * sizeof(*sl));
    if (rc || !sl) {
        if (nb)
            tx_bo_free(nb);
        return tx_error(rc ? rc : TX_ENOMEM,
                        "expert parallel: device %d: %d slots of %llu bytes for its new experts: "
                        "%s",
                        d->gidx, ns, (unsigned long long)xc->slot_size,
                        rc ? tx_last_error() : "out of memory");
    }
    memcpy(map, xc->map, (size_t)xc->n_slots * xc->slot_size);
    xc->slot = sl;
    for (int k = xc->n_slots; k < ns; k++) {
        memset(&sl[k], 0, sizeof(sl[k]));
        sl[k].mi = sl[k].e = -1;
        sl[k].conv_prec = -1;
    }
    tx_bo_free(xc->bo);
    xc->bo = nb;
    xc->map = map;
    xc->n_slots = ns;
    xc->budget = (uint64_t)ns * xc->slot_size;
    d->st.expert_bytes = xc->budget;
    return TX_OK;
}

/* Collective (under a transport): every rank's rc to rank 0, its verdict
 * back. TX_OK when every rank is fine. */
static int ep_allok(struct rt_ep *ep, int rc, const char *what)
{
    if (!ep->has_tr || ep->size < 2)
        return rc;
    int S = ep->size;
    size_t *sc = ep->cnt, *sd = sc + S, *rcn = sc + 2 * S, *rd = sc + 3 * S;
    int32_t mine = rc, all[GLM_EP_MAX_DEVICES] = {0}, v[2] = {rc, ep->rank};
    for (int r = 0; r < S; r++) {
        sc[r] = sd[r] = 0;
        rcn[r] = ep->rank == 0 && r ? 4 : 0;
        rd[r] = (size_t)r * 4;
    }
    if (ep->rank)
        sc[0] = 4;
    if (ep->tr.alltoallv(ep->tr.ctx, &mine, sc, sd, all, rcn, rd))
        return tx_error(TX_EIO, "expert parallel: rank %d: transport alltoallv failed", ep->rank);
    if (ep->rank == 0)
        for (int r = 1; r < S && !v[0]; r++)
            if (all[r]) {
                v[0] = all[r];
                v[1] = r;
            }
    int b = tr_bcast(ep, v, sizeof(v));
    if (b)
        return b;
    if (rc)
        return rc;
    if (v[0])
        return tx_error(v[0] < 0 ? v[0] : TX_EIO,
                        "expert parallel: rank %d failed %s (its stderr says why)", v[1], what);
    return TX_OK;
}

/* Every rank: the experts whose device changes from ep->owner to nw move.
 * Destinations grow first (collectively agreed: nothing moves unless every
 * rank has the room), then the experts leaving for another rank are packed
 * from their slots and their slots freed, experts between two devices of
 * this process go slot to slot (mapping to mapping), then one alltoallv
 * carries the others, which land in free slots. */
static int ep_move(glm_model_t *m, struct rt_ep *ep, const int16_t *nw)
{
    int E = m->cfg.n_routed_experts, nm = m->n_moe_layers, n = ep->n, me = ep->rank;
    size_t ne = (size_t)nm * (size_t)E;
    int multi = ep->has_tr && ep->size > 1, rc = TX_OK;
    uint64_t span = rt_xc_slot_bytes(m, -1); /* the stored extents of an expert */
    for (int d = 0; d < n && !rc; d++) {
        struct ep_dev *dv = &ep->d[d];
        if (!dv->sm)
            continue;
        int need = 0;
        for (size_t i = 0; i < ne; i++)
            need += nw[i] == d;
        rc = xc_grow(dv, need);
    }
    rc = ep_allok(ep, rc, "to make room for its new experts");
    if (rc)
        return rc;
    uint64_t moved = 0;
    int S = ep->size;
    size_t *sc = ep->cnt, *sd = sc + S, *rcn = sc + 2 * S, *rd = sc + 3 * S;
    if (multi) {
        size_t st = 0, rt = 0;
        for (int r = 0; r < S; r++) {
            sc[r] = rcn[r] = 0;
            for (size_t i = 0; i < ne; i++) {
                int a = ep->owner[i], b = nw[i];
                if (a == b)
                    continue;
                if (ep->d[a].rank == me && ep->d[b].rank == r && r != me)
                    sc[r] += span;
                if (ep->d[b].rank == me && ep->d[a].rank == r && r != me)
                    rcn[r] += span;
            }
            sd[r] = st;
            rd[r] = rt;
            st += sc[r];
            rt += rcn[r];
        }
        int g1 = tr_grow(&ep->sbuf, &ep->scap, st + 1), g2 = tr_grow(&ep->rbuf, &ep->rcap, rt + 1);
        if (g1 || g2) /* cannot take part in the exchange: the run is lost */
            return g1 ? g1 : g2;
        size_t pos[GLM_EP_MAX_DEVICES];
        for (int r = 0; r < S; r++)
            pos[r] = sd[r];
        for (size_t i = 0; i < ne; i++) {
            int a = ep->owner[i], b = nw[i];
            if (a == b || ep->d[a].rank != me || ep->d[b].rank == me)
                continue;
            struct rt_xcache *xc = ep->d[a].sm->xc;
            int s = xc->where[i];
            uint8_t *dst = ep->sbuf + pos[ep->d[b].rank];
            if (s >= 0)
                memcpy(dst, (uint8_t *)xc->map + (uint64_t)s * xc->slot_size, span);
            else
                memset(dst, 0, span); /* not there (a failed read): the receiver reads it */
            pos[ep->d[b].rank] += span;
            xc_drop(xc, (int)(i / (size_t)E), (int)(i % (size_t)E));
        }
    }
    /* between two devices of this process: straight from slot to slot */
    int pending = 1;
    while (pending && !rc) {
        pending = 0;
        int progress = 0;
        for (size_t i = 0; i < ne; i++) {
            int a = ep->owner[i], b = nw[i];
            if (a == b || !ep->d[a].sm || !ep->d[b].sm)
                continue;
            struct rt_xcache *xa = ep->d[a].sm->xc, *xb = ep->d[b].sm->xc;
            int mi = (int)(i / (size_t)E), e = (int)(i % (size_t)E);
            if (xb->where[i] >= 0 || xa->where[i] < 0) {
                xc_drop(xa, mi, e);
                continue; /* done (or nothing to copy: the destination reads it) */
            }
            int t = xc_free_slot(xb);
            if (t < 0) {
                pending = 1;
                continue;
            }
            int s = xa->where[i];
            int same = xa->slot_size == xb->slot_size;
            memcpy((uint8_t *)xb->map + (uint64_t)t * xb->slot_size,
                   (uint8_t *)xa->map + (uint64_t)s * xa->slot_size, same ? xa->slot_size : span);
            xc_put(xb, t, mi, e, same ? xa->slot[s].conv_prec : -1);
            xc_drop(xa, mi, e);
            progress = 1;
        }
        if (pending && !progress) { /* a cycle of full devices: one more slot */
            for (size_t i = 0; i < ne && !rc; i++) {
                int a = ep->owner[i], b = nw[i];
                if (a != b && ep->d[a].sm && ep->d[b].sm && ep->d[b].sm->xc->where[i] < 0 &&
                    ep->d[a].sm->xc->where[i] >= 0) {
                    rc = xc_grow(&ep->d[b], ep->d[b].sm->xc->n_slots + 1);
                    break;
                }
            }
        }
    }
    if (rc)
        return rc; /* this process only: the moves so far hold (both copies agree) */
    if (multi) {
        int a2 = tr_a2a(ep, ep->sbuf, ep->rbuf);
        if (a2)
            return a2;
        size_t pos[GLM_EP_MAX_DEVICES];
        for (int r = 0; r < S; r++)
            pos[r] = rd[r];
        for (size_t i = 0; i < ne; i++) {
            int a = ep->owner[i], b = nw[i];
            if (a == b || ep->d[b].rank != me || ep->d[a].rank == me)
                continue;
            struct rt_xcache *xc = ep->d[b].sm->xc;
            int t = xc_free_slot(xc);
            if (t < 0)
                return tx_error(TX_EINVAL, "internal: expert parallel: device %d: no free slot", b);
            memcpy((uint8_t *)xc->map + (uint64_t)t * xc->slot_size, ep->rbuf + pos[ep->d[a].rank],
                   span);
            pos[ep->d[a].rank] += span;
            xc_put(xc, t, (int)(i / (size_t)E), (int)(i % (size_t)E), -1);
        }
    }
    for (size_t i = 0; i < ne; i++)
        if (ep->owner[i] != nw[i]) {
            moved++;
            if (ep->d[ep->owner[i]].rank != ep->d[nw[i]].rank)
                ep->bmoved_remote += span;
        }
    memcpy(ep->owner, nw, ne * sizeof(int16_t));
    set_owned(ep, ne);
    ep->moved += moved;
    ep->bmoved += moved * span;
    ep->rebalances++;
    return TX_OK;
}

TX_API int glm_model_ep_rebalance(glm_model_t *m, unsigned flags)
{
    if (!m)
        return tx_error(TX_EINVAL, "glm_model_ep_rebalance: model is NULL");
    struct rt_ep *ep = m->ep;
    if (!ep)
        return tx_error(TX_EINVAL, "glm_model_ep_rebalance: not a multi-device model");
    if (m->ep_worker)
        return tx_error(TX_EINVAL,
                        "glm_model_ep_rebalance: rank %d: rank 0 decides; ranks > 0 "
                        "follow inside glm_ep_worker_run",
                        ep->rank);
    if (flags)
        return tx_error(TX_EINVAL, "glm_model_ep_rebalance: flags 0x%x: none defined", flags);
    if (ep->stopped)
        return tx_error(TX_EINVAL, "glm_model_ep_rebalance: the ranks were stopped");
    int E = m->cfg.n_routed_experts, nm = m->n_moe_layers;
    size_t ne = (size_t)nm * (size_t)E;
    int16_t *nw = malloc((ne ? ne : 1) * sizeof(int16_t));
    if (!nw)
        return tx_error(TX_ENOMEM, "expert parallel: out of memory");
    pthread_mutex_lock(&m->lock);
    const uint64_t *cnt = (const uint64_t *)((const uint8_t *)m->meta_map + m->counts_off);
    uint64_t tot = 0;
    for (size_t i = 0; i < ne; i++)
        tot += cnt[i];
    int rc = TX_OK;
    if (!tot) { /* nothing counted yet: the placement stays */
        pthread_mutex_unlock(&m->lock);
        free(nw);
        return TX_OK;
    }
    rc = place_run(m, ep, cnt, nw);
    if (!rc) {
        double before = imbalance_of(ep->n, cnt, ep->owner, ne, NULL);
        double after = imbalance_of(ep->n, cnt, nw, ne, NULL);
        if (ep->has_tr && ep->size > 1) {
            memset(ep->hdr, 0, ep->hdr_bytes);
            ep->hdr[0] = EP_OP_REBALANCE;
            rc = tr_bcast(ep, ep->hdr, ep->hdr_bytes);
            if (!rc)
                rc = tr_bcast(ep, nw, ne * sizeof(int16_t));
        }
        if (!rc) {
            uint64_t before_moved = ep->moved;
            rc = ep_move(m, ep, nw);
            if (!rc) {
                ep->imb_before = before;
                ep->imb_after = after;
                rt_debug("expert parallel: rebalance %u: %llu experts moved, imbalance %.3f -> "
                         "%.3f",
                         ep->rebalances, (unsigned long long)(ep->moved - before_moved), before,
                         after);
            }
        }
    }
    pthread_mutex_unlock(&m->lock);
    free(nw);
    return rc;
}

/* Ranks > 0: the placement rank 0 broadcast, then the moves. */
static int ep_follow(glm_model_t *m)
{
    struct rt_ep *ep = m->ep;
    size_t ne = (size_t)m->n_moe_layers * (size_t)m->cfg.n_routed_experts;
    int16_t *nw = malloc((ne ? ne : 1) * sizeof(int16_t));
    if (!nw)
        return tx_error(TX_ENOMEM, "expert parallel: out of memory"); /* the run is lost */
    int rc = tr_bcast(ep, nw, ne * sizeof(int16_t));
    for (size_t i = 0; i < ne && !rc; i++)
        if (nw[i] < 0 || nw[i] >= ep->n)
            rc =
                tx_error(TX_EIO, "expert parallel: rank %d: rank 0 sent a bad placement", ep->rank);
    if (!rc)
        rc = ep_move(m, ep, nw);
    free(nw);
    return rc;
}

/* ---- ranks > 0 ---------------------------------------------------------------- */

TX_API int glm_ep_worker_run(glm_model_t *m)
{
    if (!m)
        return tx_error(TX_EINVAL, "glm_ep_worker_run: model is NULL");
    struct rt_ep *ep = m->ep;
    if (!ep || !m->ep_worker)
        return tx_error(TX_EINVAL, "glm_ep_worker_run: not the model of a rank > 0 (rank 0 runs "
                                   "the passes itself)");
    if (ep->stopped)
        return TX_OK;
    int D = m->cfg.hidden_size, n = ep->n, S = ep->size, me = ep->rank;
    size_t pb = 4 + (size_t)D * 4;
    size_t *sc = ep->cnt, *sd = sc + S, *rcn = sc + 2 * S, *rd = sc + 3 * S;
    for (;;) {
        uint32_t *hd = ep->hdr;
        int rc = tr_bcast(ep, hd, ep->hdr_bytes);
        if (rc)
            return rc;
        if (hd[0] == EP_OP_STOP) {
            ep->stopped = 1;
            return TX_OK;
        }
        if (hd[0] == EP_OP_REBALANCE) {
            rc = ep_follow(m);
            if (rc) /* rank 0 reports it too; the placement stays */
                fprintf(stderr, "glm: expert parallel: rank %d: rebalance: %s\n", me,
                        tx_last_error());
            continue;
        }
        if (hd[0] != EP_OP_LAYER || (int)hd[1] < 0 || (int)hd[1] >= m->n_moe_layers ||
            hd[2] >= GLM_PRECISION_COUNT)
            return tx_error(TX_EIO, "expert parallel: rank %d: bad message from rank 0 (op %u)", me,
                            hd[0]);
        int mi = (int)hd[1];
        size_t mine = 0;
        for (int d = 0; d < n; d++) {
            ep->d[d].np = hd[4 + d];
            if (ep->d[d].rank == me)
                mine += ep->d[d].np;
        }
        for (int r = 0; r < S; r++)
            sc[r] = sd[r] = rcn[r] = rd[r] = 0;
        rcn[0] = mine * pb;
        rc = tr_grow(&ep->rbuf, &ep->rcap, mine * pb + 1);
        if (!rc)
            rc = tr_a2a(ep, ep->sbuf, ep->rbuf);
        if (rc)
            return rc; /* the run is lost: rank 0 waits for this rank */
        int lrc = TX_OK;
        glm_precision_plan_t plan;
        rt_plan_of(m->dev, &plan, NULL);
        plan.precision[GLM_EXPERT] = (glm_precision_t)hd[2];
        int submitted[GLM_EP_MAX_DEVICES] = {0};
        size_t pos = 0;
        for (int d = 0; d < n && !lrc; d++) {
            struct ep_dev *dv = &ep->d[d];
            if (dv->rank != me || !dv->np)
                continue;
            lrc = shard_reserve(dv, dv->np);
            for (uint32_t j = 0; j < dv->np && !lrc; j++) {
                const uint8_t *p = ep->rbuf + pos + (size_t)j * pb;
                int32_t e;
                memcpy(&e, p, 4);
                if (e < 0 || e >= m->cfg.n_routed_experts ||
                    m->ep->owner[(size_t)mi * m->cfg.n_routed_experts + e] != dv->gidx)
                    lrc = tx_error(TX_EIO,
                                   "expert parallel: rank %d: rank 0 sent expert %d of MoE layer "
                                   "%d, not placed on device %d",
                                   me, e, mi, dv->gidx);
                pair_ids(dv)[j] = e;
                memcpy(pair_x(dv) + (size_t)j * D, p + 4, (size_t)D * 4);
            }
            pos += (size_t)dv->np * pb;
            dv->st.bytes_in += (uint64_t)dv->np * pb;
            if (!lrc)
                lrc = shard_submit(dv, m->moe_layer[mi], mi, &plan, hd[3]);
            submitted[d] = !lrc;
        }
        for (int d = 0; d < n; d++)
            if (submitted[d]) {
                int w = shard_wait(&ep->d[d]);
                if (!lrc)
                    lrc = w;
            }
        /* the outputs */
        size_t out = 8 + mine * (size_t)D * 4;
        for (int r = 0; r < S; r++)
            sc[r] = sd[r] = rcn[r] = rd[r] = 0;
        int gr = tr_grow(&ep->sbuf, &ep->scap, out);
        if (gr)
            return gr; /* cannot even say so: the run is lost */
        int32_t st = lrc;
        memset(ep->sbuf, 0, 8);
        memcpy(ep->sbuf, &st, 4);
        pos = 8;
        for (int d = 0; d < n; d++) {
            struct ep_dev *dv = &ep->d[d];
            if (dv->rank != me || !dv->np)
                continue;
            if (!lrc)
                memcpy(ep->sbuf + pos, pair_y(dv), (size_t)dv->np * D * 4);
            else
                memset(ep->sbuf + pos, 0, (size_t)dv->np * D * 4);
            pos += (size_t)dv->np * D * 4;
            dv->st.bytes_out += (uint64_t)dv->np * D * 4;
        }
        sc[0] = out;
        rc = tr_a2a(ep, ep->sbuf, ep->rbuf);
        if (rc)
            return rc;
        if (lrc)
            fprintf(stderr, "glm: expert parallel: rank %d: MoE layer %d: %s\n", me,
                    m->moe_layer[mi], tx_last_error());
        ep->layers++;
    }
}

/* ---- load, free, figures -------------------------------------------------------- */

static void ep_free(glm_model_t *m)
{
    struct rt_ep *ep = m->ep;
    if (!ep)
        return;
    if (ep->has_tr && ep->size > 1 && ep->rank == 0 && !ep->stopped && ep->hdr) {
        memset(ep->hdr, 0, ep->hdr_bytes);
        ep->hdr[0] = EP_OP_STOP;
        tr_bcast(ep, ep->hdr, ep->hdr_bytes);
        ep->stopped = 1;
    }
    for (int d = 0; d < ep->n && ep->d; d++) {
        if (ep->d[d].cb)
            tx_cmdbuf_destroy(ep->d[d].cb);
        shard_free(ep->d[d].sm);
    }
    free(ep->d);
    free(ep->owner);
    free(ep->pidx);
    free(ep->sbuf);
    free(ep->rbuf);
    free(ep->cnt);
    free(ep->hdr);
    free(ep->msize);
    free(ep->room);
    free(ep->resident);
    free(ep);
    m->ep = NULL;
}

TX_API int glm_ep_share(int n_total, int rank, int size, int *first, int *count)
{
    if (!first || !count)
        return tx_error(TX_EINVAL, "glm_ep_share: NULL argument");
    if (size < 1 || rank < 0 || rank >= size)
        return tx_error(TX_EINVAL, "glm_ep_share: rank %d of %d ranks", rank, size);
    if (n_total < size)
        return tx_error(TX_EINVAL,
                        "glm_ep_share: %d device(s) for %d ranks: every rank needs at least one "
                        "device of the list",
                        n_total, size);
    int a = (int)((long long)rank * n_total / size);
    int b = (int)((long long)(rank + 1) * n_total / size);
    *first = a;
    *count = b - a;
    return TX_OK;
}

static int check_devices(tx_device_t **devs, int n)
{
    struct tx_device_info *in = calloc((size_t)n, sizeof(*in));
    if (!in)
        return tx_error(TX_ENOMEM, "expert parallel: out of memory");
    int rc = TX_OK;
    for (int i = 0; i < n && !rc; i++) {
        if (!devs[i]) {
            rc = tx_error(TX_EINVAL, "expert parallel: device %d of the list is NULL", i);
            break;
        }
        if (tx_device_info(devs[i], &in[i])) {
            rc = tx_error(TX_EIO, "expert parallel: device %d: %s", i, tx_last_error());
            break;
        }
        for (int j = 0; j < i; j++)
            if (devs[j] == devs[i] ||
                (!strcmp(in[j].backend, in[i].backend) && !strcmp(in[j].path, in[i].path))) {
                rc = tx_error(TX_EINVAL,
                              "expert parallel: devices %d and %d of the list are the same device "
                              "(%s %s); each device may appear once",
                              j, i, in[i].backend, in[i].path);
                break;
            }
    }
    free(in);
    return rc;
}

/* Collective end of a load: every rank learns whether all ranks loaded the
 * same model (rc: this rank's result; dims: hidden size, experts, MoE
 * layers). Returns this rank's error, or the first failing rank's. */
static int ep_agree(const struct glm_ep_transport *tr, int rc, const int32_t dims[3])
{
    int size = tr->size, rank = tr->rank;
    size_t *c = calloc((size_t)size * 4, sizeof(size_t));
    int32_t *all = calloc((size_t)size, 16);
    int32_t mine[4] = {rc, dims[0], dims[1], dims[2]};
    int32_t verdict[2] = {rc, rank};
    int trc = TX_OK;
    if (!c || !all) {
        free(c);
        free(all);
        /* cannot take part: the other ranks block; nothing better to do */
        return tx_error(TX_ENOMEM, "expert parallel: out of memory");
    }
    for (int r = 0; r < size; r++) {
        c[2 * size + r] = rank == 0 && r ? 16 : 0;
        c[3 * size + r] = (size_t)r * 16;
    }
    if (rank != 0)
        c[0] = 16;
    if (tr->alltoallv(tr->ctx, mine, c, c + size, all, c + 2 * size, c + 3 * size))
        trc = TX_EIO;
    if (rank == 0 && !trc && !rc)
        for (int r = 1; r < size; r++) {
            if (all[r * 4]) {
                verdict[0] = all[r * 4];
                verdict[1] = r;
                break;
            }
            if (all[r * 4 + 1] != dims[0] || all[r * 4 + 2] != dims[1] ||
                all[r * 4 + 3] != dims[2]) {
                verdict[0] = TX_EINVAL;
                verdict[1] = -r;
                break;
            }
        }
    if (!trc && tr->bcast(tr->ctx, verdict, sizeof(verdict), 0))
        trc = TX_EIO;
    free(c);
    free(all);
    if (rc)
        return rc;
    if (trc)
        return tx_error(TX_EIO,
                        "expert parallel: rank %d: the transport failed while the ranks "
                        "agreed on the load",
                        rank);
    if (verdict[0] && verdict[1] < 0)
        return tx_error(TX_EINVAL,
                        "expert parallel: rank %d loaded another model (hidden size, experts or "
                        "MoE layers differ): every rank needs the same package",
                        -verdict[1]);
    if (verdict[0])
        return tx_error(verdict[0] < 0 ? verdict[0] : TX_EIO,
                        "expert parallel: rank %d failed to load (its stderr says why)",
                        verdict[1]);
    return TX_OK;
}

/* Collective start of the placement under a transport (size > 1): every
 * rank sends rank 0 its result so far (rc), its model's dimensions and, per
 * device of its share, {memory size, room, resident bytes} (mine, NULL:
 * zeros); rank 0 places the experts and broadcasts its verdict, then, when
 * every rank is fine, the devices' figures and the placement (ep->owner).
 * m and ep: NULL on a rank that failed before it had them. */
#define EP_VERDICT_MSG 248
static int ep_exchange(const struct glm_ep_transport *tr, int rc, const int32_t dims[3], int n,
                       const uint64_t *mine, glm_model_t *m, struct rt_ep *ep,
                       const struct glm_ep_options *o)
{
    int S = tr->size, me = tr->rank;
    size_t *c = calloc((size_t)S * 4, sizeof(size_t));
    int *k = calloc((size_t)S, sizeof(int));
    struct {
        int32_t rc, rank;
        char msg[EP_VERDICT_MSG];
    } v;
    memset(&v, 0, sizeof(v));
    if (!c || !k) {
        free(c);
        free(k);
        return tx_error(TX_ENOMEM, "expert parallel: out of memory"); /* the others block */
    }
    for (int r = 0; r < S; r++) {
        int f, cn;
        k[r] = glm_ep_share(n, r, S, &f, &cn) ? 0 : cn;
    }
    size_t hb = 16, tot = 0;
    for (int r = 0; r < S; r++) {
        c[2 * S + r] = me == 0 && r ? hb + 24 * (size_t)k[r] : 0;
        c[3 * S + r] = tot;
        tot += c[2 * S + r];
    }
    size_t mb = hb + 24 * (size_t)k[me];
    uint8_t *sb = calloc(1, mb), *rb = calloc(1, tot ? tot : 1);
    size_t fb = 24 * (size_t)n + (m ? (size_t)m->n_moe_layers * m->cfg.n_routed_experts * 2 : 0);
    uint8_t *fig = calloc(1, fb ? fb : 1);
    int trc = TX_OK;
    if (!sb || !rb || !fig) {
        free(sb);
        free(rb);
        free(fig);
        free(c);
        free(k);
        return tx_error(TX_ENOMEM, "expert parallel: out of memory");
    }
    int32_t h[4] = {rc, dims[0], dims[1], dims[2]};
    memcpy(sb, h, 16);
    if (mine)
        memcpy(sb + 16, mine, 24 * (size_t)k[me]);
    if (me != 0)
        c[0] = mb;
    if (tr->alltoallv(tr->ctx, sb, c, c + S, rb, c + 2 * S, c + 3 * S))
        trc = TX_EIO;
    if (me == 0 && !trc) {
        if (rc) {
            v.rc = rc;
            snprintf(v.msg, sizeof(v.msg), "%s", tx_last_error());
        }
        for (int r = 1; r < S && !v.rc; r++) {
            const uint8_t *p = rb + c[3 * S + r];
            int32_t hr[4];
            memcpy(hr, p, 16);
            if (hr[0]) {
                v.rc = hr[0];
                v.rank = r;
                snprintf(v.msg, sizeof(v.msg), "rank %d failed to load (its stderr says why)", r);
            } else if (hr[1] != dims[0] || hr[2] != dims[1] || hr[3] != dims[2]) {
                v.rc = TX_EINVAL;
                v.rank = r;
                snprintf(v.msg, sizeof(v.msg),
                         "rank %d loaded another model (hidden size, experts or MoE layers "
                         "differ): every rank needs the same package",
                         r);
            } else {
                int f, cn;
                glm_ep_share(n, r, S, &f, &cn);
                for (int j = 0; j < cn; j++) {
                    uint64_t x[3];
                    memcpy(x, p + 16 + 24 * (size_t)j, 24);
                    ep->msize[f + j] = x[0];
                    ep->room[f + j] = x[1];
                    ep->resident[f + j] = x[2];
                }
            }
        }
        if (!v.rc) {
            int prc = place_run(m, ep, o ? o->expert_load : NULL, ep->owner);
            if (prc) {
                v.rc = prc;
                snprintf(v.msg, sizeof(v.msg), "%s", tx_last_error());
            }
        }
    }
    if (!trc && tr->bcast(tr->ctx, &v, sizeof(v), 0))
        trc = TX_EIO;
    if (!trc && !v.rc && m && ep) {
        size_t ne = (size_t)m->n_moe_layers * m->cfg.n_routed_experts;
        if (me == 0)
            for (int d = 0; d < n; d++) {
                memcpy(fig + 24 * (size_t)d, &ep->msize[d], 8);
                memcpy(fig + 24 * (size_t)d + 8, &ep->room[d], 8);
                memcpy(fig + 24 * (size_t)d + 16, &ep->resident[d], 8);
            }
        if (me == 0)
            memcpy(fig + 24 * (size_t)n, ep->owner, ne * 2);
        if (tr->bcast(tr->ctx, fig, fb, 0))
            trc = TX_EIO;
        else if (me != 0) {
            for (int d = 0; d < n; d++) {
                memcpy(&ep->msize[d], fig + 24 * (size_t)d, 8);
                memcpy(&ep->room[d], fig + 24 * (size_t)d + 8, 8);
                memcpy(&ep->resident[d], fig + 24 * (size_t)d + 16, 8);
            }
            memcpy(ep->owner, fig + 24 * (size_t)n, ne * 2);
            for (size_t i = 0; i < ne && !v.rc; i++)
                if (ep->owner[i] < 0 || ep->owner[i] >= n)
                    v.rc = TX_EIO;
            if (v.rc)
                snprintf(v.msg, sizeof(v.msg), "rank 0 sent a bad placement");
        }
    }
    free(sb);
    free(rb);
    free(fig);
    free(c);
    free(k);
    if (rc)
        return rc;
    if (trc)
        return tx_error(TX_EIO,
                        "expert parallel: rank %d: the transport failed while the ranks "
                        "placed the experts",
                        me);
    if (v.rc)
        return tx_error(v.rc < 0 ? v.rc : TX_EIO, "expert parallel: %s%s", me ? "rank 0: " : "",
                        v.msg);
    return TX_OK;
}

/* A rank that failed before the placement still takes part in the load's
 * collectives. */
static void ep_fail(const struct glm_ep_transport *tr, int rc, int n)
{
    static const int32_t nodims[3] = {0, 0, 0};
    char keep[512];
    snprintf(keep, sizeof(keep), "%s", tx_last_error());
    ep_exchange(tr, rc, nodims, n, NULL, NULL, NULL, NULL);
    ep_agree(tr, rc, nodims);
    tx_error(rc, "%s", keep);
}

static int ep_load(tx_device_t **devs, int n_local, const char *path,
                   const struct glm_load_options *opt, const struct glm_ep_options *o,
                   glm_model_t **out)
{
    const struct glm_ep_transport *tr = o ? o->transport : NULL;
    int rank = tr ? tr->rank : 0, size = tr ? tr->size : 1;
    int n = tr && o->n_devices_total ? o->n_devices_total : n_local;
    if (n > GLM_EP_MAX_DEVICES)
        return tx_error(TX_EINVAL, "expert parallel: %d devices: at most %d", n,
                        GLM_EP_MAX_DEVICES);
    int first = 0, count = n_local, rc = TX_OK;
    int multi = tr && size > 1;
    if (tr) {
        rc = glm_ep_share(n, rank, size, &first, &count);
        if (!rc && count != n_local)
            rc = tx_error(TX_EINVAL,
                          "expert parallel: rank %d of %d drives devices %d..%d of the %d in the "
                          "list (%d), but was given %d",
                          rank, size, first, first + count - 1, n, count, n_local);
    }
    if (!rc)
        rc = check_devices(devs, n_local);
    glm_model_t *m = NULL;
    if (!rc)
        rc = rt_model_load_mode(devs[0], path, opt,
                                rank == 0 ? RT_LOAD_EP_PRIMARY : RT_LOAD_EP_WORKER, &m);
    if (rc) {
        if (multi)
            ep_fail(tr, rc, n);
        return rc;
    }
    struct rt_ep *ep = calloc(1, sizeof(*ep));
    if (!ep) {
        rt_model_free_now(m);
        rc = tx_error(TX_ENOMEM, "expert parallel: out of memory");
        if (multi)
            ep_fail(tr, rc, n);
        return rc;
    }
    m->ep = ep;
    ep->stopped = 1; /* no stop message until every rank agreed */
    m->ep_worker = rank != 0;
    ep->n = n;
    ep->rank = rank;
    ep->size = size;
    ep->first = first;
    ep->n_local = n_local;
    if (tr) {
        ep->has_tr = 1;
        ep->tr = *tr;
    }
    ep->d = calloc((size_t)n, sizeof(*ep->d));
    ep->cnt = calloc((size_t)size * 4, sizeof(size_t));
    ep->hdr_bytes = 16 + 4 * (size_t)n;
    ep->hdr = calloc(1, ep->hdr_bytes);
    ep->msize = calloc((size_t)n, sizeof(uint64_t));
    ep->room = calloc((size_t)n, sizeof(uint64_t));
    ep->resident = calloc((size_t)n, sizeof(uint64_t));
    if (!ep->d || !ep->cnt || !ep->hdr || !ep->msize || !ep->room || !ep->resident) {
        rt_model_free_now(m);
        rc = tx_error(TX_ENOMEM, "expert parallel: out of memory");
        if (multi)
            ep_fail(tr, rc, n);
        return rc;
    }
    for (int d = 0; d < n; d++) {
        int r = 0, f, c;
        for (r = 0; r < size; r++)
            if (!glm_ep_share(n, r, size, &f, &c) && d >= f && d < f + c)
                break;
        ep->d[d].gidx = d;
        ep->d[d].rank = r;
        ep->d[d].st.rank = r;
        if (d >= first && d < first + n_local) {
            ep->d[d].dev = devs[d - first];
            ep->d[d].st.local = 1;
        }
    }
    rc = m->cfg.num_experts_per_tok > 64
             ? tx_error(TX_ENOTSUP, "expert parallel: num_experts_per_tok %d: at most 64",
                        m->cfg.num_experts_per_tok)
             : place_check(m, ep, o);
    /* this rank's devices: size, room, resident bytes */
    uint64_t mine[3 * GLM_EP_MAX_DEVICES];
    memset(mine, 0, sizeof(mine));
    uint64_t res0 = o ? o->reserve_bytes : 0;
    for (int j = 0; j < n_local && !rc; j++) {
        int gd = first + j;
        rc = dev_mem(m, devs[j], gd, gd == 0 ? res0 : 0, &mine[3 * j], &mine[3 * j + 1]);
        mine[3 * j + 2] = gd == 0 ? primary_bytes(m) + res0 : 0;
        ep->msize[gd] = mine[3 * j];
        ep->room[gd] = mine[3 * j + 1];
        ep->resident[gd] = mine[3 * j + 2];
    }
    int32_t dims[3] = {m->cfg.hidden_size, m->cfg.n_routed_experts, m->n_moe_layers};
    size_t ne = (size_t)m->n_moe_layers * (size_t)m->cfg.n_routed_experts;
    if (multi)
        rc = ep_exchange(tr, rc, dims, n, mine, m, ep, o);
    else if (!rc)
        rc = place_run(m, ep, o ? o->expert_load : NULL, ep->owner);
    if (!rc) {
        set_owned(ep, ne);
    }
    unsigned flags = opt ? opt->flags : 0;
    for (int d = 0; d < n && !rc; d++)
        if (ep->d[d].dev) {
            ep->d[d].owner_map = ep->owner;
            rc = shard_open(m, &ep->d[d], flags);
            if (!rc)
                ep->d[d].st.expert_bytes =
                    (uint64_t)ep->d[d].sm->xc->n_slots * ep->d[d].sm->xc->slot_size;
        }
    if (!rc) {
        int g1 = tr_grow(&ep->sbuf, &ep->scap, 64), g2 = tr_grow(&ep->rbuf, &ep->rcap, 64);
        rc = g1 ? g1 : g2;
    }
    if (multi)
        rc = ep_agree(tr, rc, dims);
    if (rc) {
        rt_model_free_now(m);
        return rc;
    }
    ep->stopped = 0;
    if (rt_debug_on())
        for (int d = 0; d < n; d++)
            rt_debug("expert parallel: device %d (rank %d%s): %u experts, %.1f MiB of %.1f MiB "
                     "room, %.1f MiB resident, size %.1f MiB",
                     d, ep->d[d].rank, ep->d[d].dev ? "" : ", remote", ep->d[d].st.experts,
                     ep->d[d].st.expert_bytes / 1048576.0, ep->room[d] / 1048576.0,
                     ep->resident[d] / 1048576.0, ep->msize[d] / 1048576.0);
    *out = m;
    return TX_OK;
}

TX_API int glm_model_load_ep(tx_device_t **devs, int n_local, const char *smd_path,
                             const struct glm_load_options *opt, const struct glm_ep_options *ep,
                             glm_model_t **out)
{
    if (!out)
        return tx_error(TX_EINVAL, "glm_model_load_ep: out is NULL");
    *out = NULL;
    if (!devs || !smd_path)
        return tx_error(TX_EINVAL, "glm_model_load_ep: devices or path is NULL");
    if (n_local < 1 || n_local > GLM_EP_MAX_DEVICES)
        return tx_error(TX_EINVAL, "glm_model_load_ep: %d devices (1..%d)", n_local,
                        GLM_EP_MAX_DEVICES);
    const struct glm_ep_transport *tr = ep ? ep->transport : NULL;
    if (tr &&
        (tr->size < 1 || tr->rank < 0 || tr->rank >= tr->size || !tr->alltoallv || !tr->bcast))
        return tx_error(
            TX_EINVAL, "glm_model_load_ep: transport: rank %d of %d, alltoallv %s, bcast %s",
            tr->rank, tr->size, tr->alltoallv ? "set" : "NULL", tr->bcast ? "set" : "NULL");
    if (ep && ep->n_devices_total < 0)
        return tx_error(TX_EINVAL, "glm_model_load_ep: n_devices_total %d", ep->n_devices_total);
    return ep_load(devs, n_local, smd_path, opt, ep, out);
}

TX_API int glm_model_load_multi(tx_device_t **devs, int n, const char *smd_path,
                                const struct glm_load_options *opt, glm_model_t **out)
{
    return glm_model_load_ep(devs, n, smd_path, opt, NULL, out);
}

TX_API int glm_model_ep_stats(glm_model_t *m, struct glm_ep_stats *out)
{
    if (!m || !out)
        return tx_error(TX_EINVAL, "glm_model_ep_stats: NULL argument");
    memset(out, 0, sizeof(*out));
    const struct rt_ep *ep = m->ep;
    if (!ep)
        return tx_error(TX_EINVAL, "glm_model_ep_stats: not a multi-device model");
    pthread_mutex_lock(&m->lock);
    out->n_devices = ep->n;
    out->n_ranks = ep->size;
    out->rank = ep->rank;
    out->expert_parallel = ep->groups;
    out->layers = ep->layers;
    out->tokens = ep->tokens;
    out->dispatch_ms = ep->dispatch_ms;
    out->wait_ms = ep->wait_ms;
    out->combine_ms = ep->combine_ms;
    out->dim = (uint32_t)m->cfg.hidden_size;
    for (int d = 0; d < ep->n; d++)
        out->dev[d] = ep->d[d].st;
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}

TX_API int glm_model_ep_placement_stats(glm_model_t *m, struct glm_ep_placement_stats *out)
{
    if (!m || !out)
        return tx_error(TX_EINVAL, "glm_model_ep_placement_stats: NULL argument");
    memset(out, 0, sizeof(*out));
    const struct rt_ep *ep = m->ep;
    if (!ep)
        return tx_error(TX_EINVAL, "glm_model_ep_placement_stats: not a multi-device model");
    pthread_mutex_lock(&m->lock);
    out->n_devices = ep->n;
    for (int d = 0; d < ep->n; d++) {
        out->dev[d].mem_size = ep->msize[d];
        out->dev[d].room_bytes = ep->room[d];
        out->dev[d].resident_bytes = ep->resident[d];
    }
    out->rebalances = ep->rebalances;
    out->experts_moved = ep->moved;
    out->bytes_moved = ep->bmoved;
    out->bytes_moved_remote = ep->bmoved_remote;
    out->imbalance_before = ep->imb_before;
    out->imbalance_after = ep->imb_after;
    if (!m->ep_worker && m->meta_map && ep->owner) {
        uint64_t sel[GLM_EP_MAX_DEVICES];
        size_t ne = (size_t)m->n_moe_layers * (size_t)m->cfg.n_routed_experts;
        out->imbalance =
            imbalance_of(ep->n, (const uint64_t *)((const uint8_t *)m->meta_map + m->counts_off),
                         ep->owner, ne, sel);
        for (int d = 0; d < ep->n; d++)
            out->dev[d].selections = sel[d];
    }
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}

TX_API int glm_model_ep_owner(const glm_model_t *m, int mi, int e)
{
    if (!m || !m->ep || mi < 0 || mi >= m->n_moe_layers || e < 0 || e >= m->cfg.n_routed_experts)
        return TX_NONE;
    return m->ep->owner[(size_t)mi * m->cfg.n_routed_experts + e];
}

/* ---- the weight store "expert parallel" ---------------------------------------- */

/* The primary's weights but the routed experts (rt_xc_mark at load, with
 * every device's expert buffer made by ep_load once the placement is
 * known); a rank > 0 places nothing (model.c) */
static int ep_plan(glm_model_t *m, const glm_precision_plan_t *plan)
{
    (void)m;
    (void)plan; /* each shard follows the plan of the layer it runs (shard_submit) */
    return TX_OK;
}

/* MoE layer l (index mi) after MOE_ROUTE was emitted on the primary: waits
 * for the routing, dispatches the pairs, runs every device's MOE_FFN (each
 * builds its own, shard_submit: x is not used), combines into h (g->a.h). */
static void ep_moe_ffn(struct gctx *g, int l, int mi, struct tx_moe_ffn_args *x)
{
    (void)x;
    if (g->rc)
        return;
    int rc = ep_layer(g, l, mi);
    if (rc)
        g->rc = rc;
}

const struct rt_store_ops rt_store_expert_parallel = {
    .name = "expert parallel",
    .layer_jobs = 0,
    .decode_graph = 0,
    .place = rt_store_place_resident,
    .ready = rt_store_nop_ready,
    .free = ep_free, /* rank 0 tells the workers to stop */
    .n_expert_tables = rt_store_per_layer_tables,
    .plan = ep_plan,
    .pass_begin = rt_store_nop_pass_begin,
    .declare = rt_store_nop_declare,
    .layer_enter = rt_store_nop_enter,
    .layer_leave = rt_store_nop_layer,
    .moe_ffn = ep_moe_ffn,
    .info = rt_store_nop_info,
    .telemetry = rt_store_nop_telemetry,
};
