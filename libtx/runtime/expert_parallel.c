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
 *   y[P][D] f32   the pairs' outputs (zeroed; MOE_FFN accumulates)
 *   ids[P] i32    the pair's expert
 *   w[P] f32      1.0: y = 0 + 1 * out, the expert's raw output exactly
 * A MoE layer on the shard is rt_xc_moe_ffn over P rows with top_k 1, the
 * same command a one-device expert cache builds; for each expert it sees
 * the rows routed to it, in row order, as one device's MOE_FFN does.
 *
 * Combine: MOE_FFN adds y[row] += w * out expert after expert in increasing
 * expert order; with which rounding depends on the device's kernels (a
 * fused multiply-add per column in vector lanes, a multiply then an add in
 * the portable kernels and the AVX2 tail columns). The load measures it on
 * device 0 (calibrate(): two MOE_FFNs of 64 random rows through one
 * expert: raw outputs, then y0 + w * out, compared per column with both
 * roundings) and the host combine uses the same per column, so the sum is
 * the same bits as one device's.
 */
#include "runtime/expert_parallel.h"

#include "runtime/blocks.h"
#include "runtime/expert_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_dtype.h>

#define EP_ALIGN(x) (((x) + 255) / 256 * 256)
#define EP_CAL_ROWS 64
#define EP_OP_LAYER 1
#define EP_OP_STOP 2

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
    int16_t *owner; /* [n_moe][E] global device */
    uint8_t *fma;   /* [D] 1: the device's scatter fuses column c */
    uint32_t fma_cols;
    int exact;        /* the calibration found one of the two roundings per column */
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
 * y is zeroed here). */
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
    memset(pair_y(d), 0, (size_t)d->np * (size_t)D * 4);
    float *w = pair_w(d);
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
    x.act_dtype = rt_prec_dtype(plan->precision[GLM_EXPERT]);
    x.flags = TX8_MOE_FFN_F_ACCUMULATE; /* y is zero: y = out (the cache may run groups) */
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

/* ---- placement ------------------------------------------------------------ */

static int place(glm_model_t *m, struct rt_ep *ep, const struct glm_ep_options *o)
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
    int gs = E / G;
    ep->owner = malloc((size_t)nm * (size_t)E * sizeof(int16_t));
    double *wt = malloc((size_t)G * sizeof(double));
    int *ord = malloc((size_t)G * sizeof(int));
    double *A = calloc((size_t)n, sizeof(double));
    uint64_t *M = calloc((size_t)n, sizeof(uint64_t));
    int *cnt = calloc((size_t)n, sizeof(int));
    int rc = TX_OK;
    if (!ep->owner || !wt || !ord || !A || !M || !cnt) {
        rc = tx_error(TX_ENOMEM, "expert parallel: out of memory");
        goto out;
    }
    for (int mi = 0; mi < nm; mi++) {
        int l = m->moe_layer[mi];
        uint64_t lsum = 0;
        if (load)
            for (int e = 0; e < E; e++)
                lsum += load[(size_t)mi * E + e];
        for (int gi = 0; gi < G; gi++) {
            double w = 0;
            for (int e = gi * gs; e < (gi + 1) * gs; e++) {
                if (lsum)
                    w += (double)load[(size_t)mi * E + e];
                else
                    for (int q = 0; q < 3; q++) {
                        int x = m->exp_mat[((size_t)l * E + e) * 3 + q];
                        if (x != RT_NONE)
                            w += (double)m->tensors[m->mats[x].t].smd->extent_size;
                    }
            }
            wt[gi] = w;
            ord[gi] = gi;
        }
        /* heaviest first (stable: lower group first at ties) */
        for (int i = 1; i < G; i++) {
            int v = ord[i], j = i;
            while (j > 0 && wt[ord[j - 1]] < wt[v]) {
                ord[j] = ord[j - 1];
                j--;
            }
            ord[j] = v;
        }
        for (int d = 0; d < n; d++) {
            A[d] = 0;
            cnt[d] = 0;
        }
        for (int i = 0; i < G; i++) {
            int gi = ord[i], best = 0;
            for (int d = 1; d < n; d++)
                if (A[d] < A[best] || (A[d] == A[best] && cnt[d] < cnt[best]) ||
                    (A[d] == A[best] && cnt[d] == cnt[best] && M[d] < M[best]))
                    best = d;
            A[best] += wt[gi];
            cnt[best]++;
            for (int e = gi * gs; e < (gi + 1) * gs; e++) {
                ep->owner[(size_t)mi * E + e] = (int16_t)best;
                ep->d[best].owned++;
                for (int q = 0; q < 3; q++) {
                    int x = m->exp_mat[((size_t)l * E + e) * 3 + q];
                    if (x != RT_NONE)
                        M[best] += m->tensors[m->mats[x].t].smd->extent_size;
                }
            }
        }
    }
    for (int d = 0; d < n; d++)
        ep->d[d].st.experts = (uint32_t)ep->d[d].owned;
out:
    free(wt);
    free(ord);
    free(A);
    free(M);
    free(cnt);
    return rc;
}

/* ---- the combine's rounding ------------------------------------------------ */

static uint32_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

static float urand(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)(lcg(s) & 0xffffff) / (float)0x1000000;
}

static float mul_add(float y, float w, float o)
{
    float p = w * o; /* -std=c11: no contraction into a fused multiply-add */
    return y + p;
}

static int calibrate(glm_model_t *m, struct rt_ep *ep)
{
    struct ep_dev *d = &ep->d[0];
    int D = m->cfg.hidden_size, E = m->cfg.n_routed_experts;
    int mi = -1, e = -1;
    for (int i = 0; i < m->n_moe_layers && mi < 0; i++)
        for (int x = 0; x < E; x++)
            if (ep->owner[(size_t)i * E + x] == 0) {
                mi = i;
                e = x;
                break;
            }
    ep->fma = malloc((size_t)D);
    float *O = malloc((size_t)EP_CAL_ROWS * D * 4);
    float *Y0 = malloc((size_t)EP_CAL_ROWS * D * 4);
    float *W0 = malloc(EP_CAL_ROWS * 4);
    int rc = TX_OK;
    if (!ep->fma || !O || !Y0 || !W0) {
        rc = tx_error(TX_ENOMEM, "expert parallel: out of memory");
        goto out;
    }
    if (mi < 0) {
        rc = tx_error(TX_EINVAL, "internal: no expert on device 0");
        goto out;
    }
    glm_precision_plan_t plan;
    rt_plan_of(m->dev, &plan, NULL);
    if ((rc = shard_reserve(d, EP_CAL_ROWS)))
        goto out;
    uint64_t seed = 0x7e8a11e1ull;
    d->np = EP_CAL_ROWS;
    float *x = pair_x(d);
    for (size_t i = 0; i < (size_t)EP_CAL_ROWS * D; i++)
        x[i] = urand(&seed, -1.0f, 1.0f);
    for (int r = 0; r < EP_CAL_ROWS; r++)
        pair_ids(d)[r] = e;
    int l = m->moe_layer[mi];
    if ((rc = shard_submit(d, l, mi, &plan, m->submit_flags)) || (rc = shard_wait(d)))
        goto out;
    memcpy(O, pair_y(d), (size_t)EP_CAL_ROWS * D * 4);
    /* the same job again, y0 + w0 * out: through a second MOE_FFN on the
     * pair buffer with y preset (shard_submit zeroes y: set it after) */
    /* y0 close to -w0 * out: the sum cancels, so the product's rounding
     * shows in nearly every element (a fused multiply-add keeps it exact) */
    for (int r = 0; r < EP_CAL_ROWS; r++)
        W0[r] = urand(&seed, 0.01f, 1.0f);
    for (size_t i = 0; i < (size_t)EP_CAL_ROWS * D; i++) {
        float p = W0[i / (size_t)D] * O[i];
        Y0[i] = -p * (1.0f + urand(&seed, -1e-3f, 1e-3f));
        if (!(p != 0.0f))
            Y0[i] = urand(&seed, -1.0f, 1.0f);
    }
    {
        /* a hand-built MOE_FFN: the table of (mi, e) is already written */
        glm_model_t *s = d->sm;
        memcpy(pair_y(d), Y0, (size_t)EP_CAL_ROWS * D * 4);
        memcpy(pair_w(d), W0, EP_CAL_ROWS * 4);
        if ((rc = shard_declare(d)))
            goto out;
        struct tx_moe_ffn_args a;
        memset(&a, 0, sizeof(a));
        a.y = tx_ref(s->act_bo, d->off_y);
        a.x = tx_ref(s->act_bo, 0);
        a.ids = tx_ref(s->act_bo, d->off_ids);
        a.w = tx_ref(s->act_bo, d->off_w);
        a.experts =
            tx_ref(s->meta_bo, s->table_off + (uint64_t)mi * E * 3 * sizeof(struct tx8_weight));
        a.tokens = EP_CAL_ROWS;
        a.top_k = 1;
        a.num_experts = (uint32_t)E;
        a.dim = (uint32_t)D;
        a.ffn_dim = (uint32_t)m->cfg.moe_intermediate_size;
        a.ld_x = a.ld_y = (uint32_t)D;
        a.act_dtype = rt_prec_dtype(plan.precision[GLM_EXPERT]);
        a.flags = TX8_MOE_FFN_F_ACCUMULATE;
        /* the other experts' entries may name the placeholder slot: only e
         * is routed */
        rc = tx_cmd_moe_ffn(d->cb, &a);
        if (!rc)
            rc = rt_run(s, d->cb, "expert parallel: calibration", NULL);
        if (rc)
            goto out;
    }
    const float *Y1 = pair_y(d);
    uint32_t nf = 0, und = 0, bad = 0;
    for (int c = 0; c < D; c++) {
        int f = 0, a = 0, b = 0;
        for (int r = 0; r < EP_CAL_ROWS; r++) {
            size_t i = (size_t)r * D + c;
            float vf = fmaf(W0[r], O[i], Y0[i]), va = mul_add(Y0[i], W0[r], O[i]);
            if (!memcmp(&vf, &va, 4)) {
                if (memcmp(&vf, &Y1[i], 4))
                    b++;
                continue;
            }
            if (!memcmp(&vf, &Y1[i], 4))
                f++;
            else if (!memcmp(&va, &Y1[i], 4))
                a++;
            else
                b++;
        }
        if (b || (f && a))
            bad++;
        if (!f && !a)
            und++;
        ep->fma[c] = a ? 0 : 1;
        nf += ep->fma[c];
    }
    ep->fma_cols = nf;
    ep->exact = bad == 0;
    rt_debug("expert parallel: the combine rounds like device 0's MOE_FFN: %u of %d columns fused "
             "multiply-add (%u undetermined, %u inconsistent)%s%s",
             nf, D, und, bad, und ? " (some undetermined: fused assumed)" : "",
             bad ? "; WARNING: some columns match neither rounding, the output may differ from "
                   "one device's in the last bits"
                 : "");
out:
    /* the calibration is not part of the figures */
    d->st.pairs = 0;
    d->st.compute_ms = 0;
    d->np = 0;
    free(O);
    free(Y0);
    free(W0);
    return rc;
}

static void combine_row(float *h, float w, const float *o, const uint8_t *fma, int D)
{
    for (int c = 0; c < D; c++)
        h[c] = fma[c] ? fmaf(w, o[c], h[c]) : mul_add(h[c], w, o[c]);
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
            combine_row(h + (size_t)t * D, rw[i], o, ep->fma, D);
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

void rt_ep_moe_ffn(struct gctx *g, int l, int mi)
{
    if (g->rc)
        return;
    int rc = ep_layer(g, l, mi);
    if (rc)
        g->rc = rc;
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

void rt_ep_free(glm_model_t *m)
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
    free(ep->fma);
    free(ep->pidx);
    free(ep->sbuf);
    free(ep->rbuf);
    free(ep->cnt);
    free(ep->hdr);
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
    static const int32_t nodims[3] = {0, 0, 0};
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
        if (tr && size > 1)
            ep_agree(tr, rc, nodims);
        return rc;
    }
    struct rt_ep *ep = calloc(1, sizeof(*ep));
    if (!ep) {
        rt_model_free_now(m);
        rc = tx_error(TX_ENOMEM, "expert parallel: out of memory");
        if (tr && size > 1)
            ep_agree(tr, rc, nodims);
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
    if (!ep->d || !ep->cnt || !ep->hdr) {
        rt_model_free_now(m);
        rc = tx_error(TX_ENOMEM, "expert parallel: out of memory");
        if (tr && size > 1)
            ep_agree(tr, rc, nodims);
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
             : place(m, ep, o);
    unsigned flags = opt ? opt->flags : 0;
    for (int d = 0; d < n && !rc; d++)
        if (ep->d[d].dev) {
            ep->d[d].owner_map = ep->owner;
            rc = shard_open(m, &ep->d[d], flags);
            if (!rc)
                ep->d[d].st.expert_bytes =
                    (uint64_t)ep->d[d].sm->xc->n_slots * ep->d[d].sm->xc->slot_size;
        }
    if (!rc && rank == 0)
        rc = calibrate(m, ep);
    if (!rc) {
        int g1 = tr_grow(&ep->sbuf, &ep->scap, 64), g2 = tr_grow(&ep->rbuf, &ep->rcap, 64);
        rc = g1 ? g1 : g2;
    }
    if (tr && size > 1) {
        int32_t dims[3] = {m->cfg.hidden_size, m->cfg.n_routed_experts, m->n_moe_layers};
        rc = ep_agree(tr, rc, dims);
    }
    if (rc) {
        rt_model_free_now(m);
        return rc;
    }
    ep->stopped = 0;
    if (rt_debug_on())
        for (int d = 0; d < n; d++)
            rt_debug("expert parallel: device %d (rank %d%s): %u experts%s", d, ep->d[d].rank,
                     ep->d[d].dev ? "" : ", remote", ep->d[d].st.experts, "");
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
    out->fma_columns = ep->fma_cols;
    out->dim = (uint32_t)m->cfg.hidden_size;
    for (int d = 0; d < ep->n; d++)
        out->dev[d] = ep->d[d].st;
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}

TX_API int glm_model_ep_owner(const glm_model_t *m, int mi, int e)
{
    if (!m || !m->ep || mi < 0 || mi >= m->n_moe_layers || e < 0 || e >= m->cfg.n_routed_experts)
        return -1;
    return m->ep->owner[(size_t)mi * m->cfg.n_routed_experts + e];
}
