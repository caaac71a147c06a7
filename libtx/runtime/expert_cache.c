/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: the expert cache (article 2.3 / 5.2, issue 13).
 *
 * A model whose routed experts do not fit keeps everything else resident
 * (attention, dense and shared MLPs, routers, norms, embedding, lm_head)
 * and its routed experts in an expert cache: one device buffer of n_slots
 * equal slots, each holding one expert's gate, up and down extents exactly
 * as stored in the package (+ room for converted copies when the plan
 * executes the experts in another precision).
 *
 * A MoE layer's pass runs in two device jobs: up to MOE_ROUTE (the routing
 * lands in the activations), then -- once the host has read the routing,
 * made every routed expert present and pointed the layer's expert table at
 * their slots -- MOE_FFN and the rest up to the next MoE layer's routing.
 * A miss reads the expert's three extents with io_uring straight into its
 * slot's mapped device memory (zero copy; O_DIRECT when the package is
 * larger than host RAM, the page cache otherwise). When a pass routes to
 * more experts than the cache holds (a long prefill), MOE_FFN runs once per
 * group of experts in increasing expert order with the other routed ids
 * masked (-1); MOE_FFN adds each expert's contribution to y in increasing
 * expert order, so the result is the same bits as one MOE_FFN over all.
 *
 * Prediction: online statistics per (MoE layer, expert) -- a decayed
 * selection frequency and the transition counts of the layer-to-layer
 * access graph, trans[l][e][e'] = passes-rows that chose e at MoE layer l
 * and e' at l + 1. While layer l runs, the experts of layer l + 1 most
 * likely given l's routing are read ahead:
 *   p_row(e')  = max over e in row's selection of trans[l][e][e'] / n[l][e]
 *   p_freq(e') = min(1, top_k * freq[l+1][e'] / sum freq[l+1])
 *   score(e')  = 1 - prod over rows (1 - (a p_row + (1 - a) p_freq))
 * with a = XC_ALPHA when the row's experts were seen XC_MIN_OBS times.
 * Prefetch never evicts a slot the current layer uses (pinned), and evicts
 * another only if that slot's value is below the candidate's score.
 *
 * Replacement: LRFU (frequency + recency): each use adds 1 to a slot's
 * value, which halves every XC_HALF_PASSES passes; the victim is the
 * lowest value. GLM_LOAD_EXPERT_LRU selects plain LRU,
 * GLM_LOAD_EXPERT_NO_PREFETCH no prefetch (the comparison of
 * docs/glm-inference.md).
 */
#include "runtime/expert_cache.h"
#include "runtime/weight_store.h"

#include "runtime/blocks.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tx/tx_dtype.h>
#include <tx/tx_profile.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))
#define XC_PAGE 4096u
#define XC_CHUNK (8u << 20)
#define XC_RING 128
#define XC_HALF_PASSES 2.0 /* half-life of the recency term, in passes */
#define XC_DECAY 0.995     /* frequency decay per visit of a layer */
#define XC_ALPHA 0.8       /* weight of the transition graph in a score */
#define XC_MIN_OBS 1       /* selections of e before its transitions count */
#define XC_PF_WORTH 16.0   /* a prefetch evicts a slot of value < f + this * score */
#define XC_PRIOR 4.0       /* pseudo-observations of p_freq in P(e'|e) */
#define XC_PF_MIN 0.15     /* least score prefetched */
#define XC_PF_BUDGET 2     /* prefetches per layer and row: top_k times this */

struct xreq {
    int slot;
    int direct;
    uint8_t *dst;
    uint64_t foff;
    uint32_t len, got;
};

struct xlay {
    uint64_t so[3];      /* stored extents in the slot */
    struct rt_copy c[3]; /* converted copies (c.bo != NULL: converted) */
    uint64_t end;        /* bytes used */
};

static int xmat(const glm_model_t *m, int l, int e, int q)
{
    int E = m->cfg.n_routed_experts;
    return m->exp_mat[((size_t)l * (size_t)E + (size_t)e) * 3 + (size_t)q];
}

static int is_expert(const struct rt_tensor *t)
{
    return t->info.expert >= 0 && t->info.ndim == 2;
}

uint64_t rt_xc_expert_bytes(const glm_model_t *m)
{
    uint64_t b = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (is_expert(&m->tensors[i]))
            b += m->tensors[i].smd->extent_size;
    return b;
}

static void repack(glm_model_t *m)
{
    uint64_t off = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        struct rt_tensor *t = &m->tensors[i];
        t->off = t->streamed ? 0 : off;
        if (!t->streamed)
            off += t->smd->extent_size;
    }
    m->w_size = off;
}

void rt_xc_mark(glm_model_t *m)
{
    for (int i = 0; i < m->n_tensors; i++)
        m->tensors[i].streamed = is_expert(&m->tensors[i]);
    repack(m);
}

void rt_xc_unmark(glm_model_t *m)
{
    for (int i = 0; i < m->n_tensors; i++)
        m->tensors[i].streamed = 0;
    repack(m);
}

/* Layout of expert (l, e) in a slot; p < 0: the stored extents only. */
static void layout(const glm_model_t *m, int l, int e, int p, struct xlay *o)
{
    memset(o, 0, sizeof(*o));
    uint64_t off = 0;
    for (int q = 0; q < 3; q++) {
        o->so[q] = off;
        off += ALIGN_UP(m->tensors[m->mats[xmat(m, l, e, q)].t].smd->extent_size, XC_PAGE);
    }
    if (p >= 0)
        for (int q = 0; q < 3; q++) {
            const struct rt_mat *x = &m->mats[xmat(m, l, e, q)];
            if (rt_stored_fits(m, x, (glm_precision_t)p))
                continue;
            struct rt_copy *c = &o->c[q];
            uint16_t dt = rt_prec_dtype((glm_precision_t)p);
            uint32_t g = dt == TX8_DTYPE_I8 ? rt_copy_group(m, x) : 0;
            c->dtype = dt;
            c->group = g;
            c->data = ALIGN_UP(off, 256);
            off = c->data + rt_copy_data_bytes(m, x, dt);
            c->scales = ALIGN_UP(off, 64);
            off = c->scales + rt_copy_scales_bytes(m, x, dt, g);
            c->bo = (tx_bo_t *)1; /* marks "converted" */
        }
    o->end = off;
}

static uint64_t stored_bytes(const glm_model_t *m, int l, int e)
{
    uint64_t b = 0;
    for (int q = 0; q < 3; q++)
        b += m->tensors[m->mats[xmat(m, l, e, q)].t].smd->extent_size;
    return b;
}

uint64_t rt_xc_slot_bytes(const glm_model_t *m, int prec)
{
    uint64_t mx = 0;
    int E = m->cfg.n_routed_experts;
    for (int i = 0; i < m->n_moe_layers; i++)
        for (int e = 0; e < E; e++) {
            struct xlay o;
            int l = m->moe_layer[i];
            if (xmat(m, l, e, 0) == RT_NONE || xmat(m, l, e, 1) == RT_NONE ||
                xmat(m, l, e, 2) == RT_NONE)
                return 0;
            layout(m, l, e, prec, &o); /* stored extents, then the copies */
            if (o.end > mx)
                mx = o.end;
        }
    return ALIGN_UP(mx, XC_PAGE);
}

static uint64_t host_ram(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

int rt_xc_setup(glm_model_t *m, uint64_t bytes, unsigned flags)
{
    int E = m->cfg.n_routed_experts, K = m->cfg.num_experts_per_tok, n = m->n_moe_layers;
    struct rt_xcache *xc = calloc(1, sizeof(*xc));
    if (!xc)
        return tx_error(TX_ENOMEM, "expert cache: out of memory");
    m->xc = xc;
    xc->fd_direct = -1;
    xc->n_moe = n;
    xc->E = E;
    xc->K = K;
    xc->lru = !!(flags & GLM_LOAD_EXPERT_LRU);
    xc->prefetch = !(flags & GLM_LOAD_EXPERT_NO_PREFETCH);
    xc->prev_mi = -1;
    glm_precision_plan_t plan;
    rt_plan_of(m->dev, &plan, NULL);
    xc->slot_prec = (int)plan.precision[GLM_EXPERT];
    xc->slot_size = rt_xc_slot_bytes(m, xc->slot_prec);
    xc->budget = bytes;
    xc->bytes_all = rt_xc_expert_bytes(m);
    if (!xc->slot_size)
        return tx_error(TX_EINVAL, "expert cache: an expert of the package lacks a matrix");
    uint64_t total = (uint64_t)n * (uint64_t)E;
    uint64_t ns = bytes / xc->slot_size;
    if (ns > total)
        ns = total;
    if (ns < (uint64_t)K || ns < 1)
        return tx_error(TX_ENOSPC,
                        "expert cache: %llu bytes hold %llu experts of %llu bytes; a MoE layer "
                        "routes a token to %d (num_experts_per_tok), so at least %llu bytes "
                        "are needed",
                        (unsigned long long)bytes, (unsigned long long)ns,
                        (unsigned long long)xc->slot_size, K,
                        (unsigned long long)((uint64_t)K * xc->slot_size));
    xc->n_slots = (int)ns;
    int rc = tx_bo_alloc(m->dev, ns * xc->slot_size, 0, m->label_w, &xc->bo);
    if (!rc)
        rc = tx_bo_map(xc->bo, &xc->map);
    if (rc)
        return tx_error(rc, "expert cache: %llu slots of %llu bytes: %s", (unsigned long long)ns,
                        (unsigned long long)xc->slot_size, tx_last_error());
    /* f32 scratch of the conversions: the largest dense expert matrix */
    uint64_t tmax = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const struct tx_smd_tensor *st = m->tensors[i].smd;
        if (is_expert(&m->tensors[i]) && st->format == TX8_WFMT_DENSE &&
            (uint64_t)st->rows * st->cols * 4 > tmax)
            tmax = (uint64_t)st->rows * st->cols * 4;
    }
    rc = tx_bo_alloc(m->dev, tmax ? tmax : 4096, 0, m->label_w, &xc->scratch);
    if (rc)
        return tx_error(rc, "expert cache: conversion scratch of %llu bytes: %s",
                        (unsigned long long)tmax, tx_last_error());
    xc->scratch_size = tmax;
    xc->slot = calloc(ns, sizeof(*xc->slot));
    xc->where = malloc(total * sizeof(int32_t));
    xc->freq = calloc(total, sizeof(double));
    xc->trans = calloc(total * (uint64_t)E, sizeof(uint32_t));
    xc->trow = calloc(total, sizeof(uint32_t));
    if (tx_profile_enabled()) {
        xc->p_hit = calloc(total, sizeof(uint64_t));
        xc->p_miss = calloc(total, sizeof(uint64_t));
        if (!xc->p_hit || !xc->p_miss)
            return tx_error(TX_ENOMEM, "expert cache: out of memory");
    }
    if (!xc->slot || !xc->where || !xc->freq || !xc->trans || !xc->trow)
        return tx_error(TX_ENOMEM, "expert cache: out of memory");
    for (uint64_t i = 0; i < total; i++)
        xc->where[i] = -1;
    for (uint64_t s = 0; s < ns; s++) {
        xc->slot[s].mi = xc->slot[s].e = -1;
        xc->slot[s].conv_prec = -1;
    }
    int r = io_uring_queue_init(XC_RING, &xc->ring, 0);
    if (r < 0)
        return tx_error(TX_ENOTSUP, "expert cache needs io_uring: %s", strerror(-r));
    xc->ring_ok = 1;
    xc->fd = tx_smd_fd(m->smd);
    uint64_t ram = host_ram();
    if ((flags & GLM_LOAD_DIRECT) || (ram && tx_smd_header(m->smd)->file_size > ram)) {
        xc->fd_direct = open(tx_smd_path(m->smd), O_RDONLY | O_DIRECT | O_CLOEXEC);
        xc->direct = xc->fd_direct >= 0;
    }
    xc->dev_flags = TX8_IF_MINOR(m->dinfo.if_version) >= 6;
    xc->on = 1;
    m->streaming = 2;
    rt_debug("expert cache: %d slots of %llu bytes (%.1f%% of %llu routed experts), %s "
             "replacement, prefetch %s, %s reads",
             xc->n_slots, (unsigned long long)xc->slot_size, 100.0 * (double)ns / (double)total,
             (unsigned long long)total, xc->lru ? "LRU" : "LRFU", xc->prefetch ? "on" : "off",
             xc->direct ? "O_DIRECT" : "page-cache");
    return TX_OK;
}

/* ---- reads ------------------------------------------------------------------ */

static int reap_one(struct rt_xcache *xc);

static int submit_read(struct rt_xcache *xc, int slot, uint8_t *dst, uint64_t foff, uint32_t len,
                       int direct)
{
    /* at most XC_RING reads in flight: the completion queue never overflows */
    while (xc->inflight >= XC_RING) {
        io_uring_submit(&xc->ring);
        if (reap_one(xc) < 0)
            return TX_EIO;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&xc->ring);
    if (!sqe) {
        io_uring_submit(&xc->ring);
        sqe = io_uring_get_sqe(&xc->ring);
    }
    struct xreq *r = sqe ? malloc(sizeof(*r)) : NULL;
    if (!r)
        return TX_ENOMEM;
    r->slot = slot;
    r->direct = direct;
    r->dst = dst;
    r->foff = foff;
    r->len = len;
    r->got = 0;
    io_uring_prep_read(sqe, direct ? xc->fd_direct : xc->fd, dst, len, foff);
    io_uring_sqe_set_data(sqe, r);
    xc->slot[slot].inflight++;
    xc->inflight++;
    return 0;
}

static int reap_one(struct rt_xcache *xc)
{
    struct io_uring_cqe *cqe;
    int rc;
    do
        rc = io_uring_wait_cqe(&xc->ring, &cqe);
    while (rc == -EINTR);
    if (rc < 0)
        return rc;
    struct xreq *r = io_uring_cqe_get_data(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(&xc->ring, cqe);
    struct rt_xslot *s = &xc->slot[r->slot];
    s->inflight--;
    xc->inflight--;
    if (res < 0 && r->direct && (res == -EINVAL || res == -EOPNOTSUPP)) {
        xc->direct = 0; /* this file system refuses O_DIRECT: the page cache from now on */
        res = 0;
        r->direct = 0;
    } else if (res < 0) {
        if (!s->err)
            s->err = res;
        free(r);
        return 0;
    }
    r->got += (uint32_t)res;
    xc->bytes_read += (uint64_t)res;
    if (xc->in_decode)
        xc->dec_bytes_read += (uint64_t)res;
    if (r->got < r->len) {
        if (res == 0 && r->got) { /* past the end of the file: the last extent's padding */
            memset(r->dst + r->got, 0, r->len - r->got);
            free(r);
            return 0;
        }
        int direct = r->direct && !(r->got % XC_PAGE) && xc->direct;
        int e =
            submit_read(xc, r->slot, r->dst + r->got, r->foff + r->got, r->len - r->got, direct);
        if (e && !s->err)
            s->err = -ENOMEM;
        else
            io_uring_submit(&xc->ring);
    }
    free(r);
    return 0;
}

static int drain(struct rt_xcache *xc)
{
    while (xc->inflight > 0) {
        int rc = reap_one(xc);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int wait_slot(glm_model_t *m, int s)
{
    struct rt_xcache *xc = m->xc;
    while (xc->slot[s].inflight > 0) {
        int rc = reap_one(xc);
        if (rc < 0)
            return tx_error(tx_errno_code(rc), "expert cache: io_uring wait: %s", strerror(-rc));
    }
    struct rt_xslot *sl = &xc->slot[s];
    if (sl->err) {
        int e = sl->err;
        int l = sl->mi >= 0 ? m->moe_layer[sl->mi] : -1;
        return tx_error(tx_errno_code(e), "expert cache: reading layer %d expert %d from %s: %s", l,
                        sl->e, tx_smd_path(m->smd), strerror(-e));
    }
    return TX_OK;
}

/* Queue the reads of expert (mi, e) into slot s. */
static int load(glm_model_t *m, int s, int mi, int e)
{
    struct rt_xcache *xc = m->xc;
    struct rt_xslot *sl = &xc->slot[s];
    if (sl->mi >= 0) {
        xc->where[(size_t)sl->mi * xc->E + (size_t)sl->e] = -1;
        xc->evictions++;
    }
    sl->mi = mi;
    sl->e = e;
    sl->err = 0;
    sl->conv_prec = -1;
    sl->prefetched = 0;
    xc->where[(size_t)mi * xc->E + (size_t)e] = s;
    int l = m->moe_layer[mi];
    struct xlay o;
    layout(m, l, e, -1, &o);
    uint8_t *base = (uint8_t *)xc->map + (uint64_t)s * xc->slot_size;
    for (int q = 0; q < 3; q++) {
        const struct tx_smd_tensor *st = m->tensors[m->mats[xmat(m, l, e, q)].t].smd;
        uint64_t ext = st->extent_size;
        for (uint64_t off = 0; off < ext; off += XC_CHUNK) {
            uint32_t len = (uint32_t)(ext - off < XC_CHUNK ? ext - off : XC_CHUNK);
            int r =
                submit_read(xc, s, base + o.so[q] + off, st->data_offset + off, len, xc->direct);
            if (r) {
                sl->err = -ENOMEM;
                return tx_error(TX_ENOMEM, "expert cache: cannot queue a read");
            }
        }
    }
    int r = io_uring_submit(&xc->ring);
    if (r < 0) {
        sl->err = r;
        return tx_error(tx_errno_code(r), "expert cache: io_uring_submit: %s", strerror(-r));
    }
    return TX_OK;
}

/* ---- replacement ----------------------------------------------------------- */

static double half_visits(const struct rt_xcache *xc)
{
    return XC_HALF_PASSES * (double)(xc->n_moe > 0 ? xc->n_moe : 1);
}

/* LRU: the clock of the last use. Otherwise frequency + recency: the
 * expert's decayed selection count (kept while it is not cached) plus a
 * recency term in [0, 1] halving every XC_HALF_PASSES passes. */
static double value(const struct rt_xcache *xc, const struct rt_xslot *s)
{
    if (s->mi < 0)
        return -1e300;
    if (xc->lru)
        return (double)s->last;
    double f = xc->freq[(size_t)s->mi * xc->E + (size_t)s->e];
    return f + pow(0.5, (double)(xc->clock - s->last) / half_visits(xc));
}

static void touch(struct rt_xcache *xc, struct rt_xslot *s)
{
    s->last = xc->clock;
}

/* The evictable slot of least value (-1: every slot pinned). */
static int victim(const struct rt_xcache *xc)
{
    int best = -1;
    double bv = 0;
    for (int s = 0; s < xc->n_slots; s++) {
        const struct rt_xslot *sl = &xc->slot[s];
        if (sl->pin == xc->stamp)
            continue;
        double v = value(xc, sl);
        if (best < 0 || v < bv) {
            best = s;
            bv = v;
        }
    }
    return best;
}

/* ---- statistics and prediction --------------------------------------------- */

static void stats_update(struct rt_xcache *xc, int mi, const int32_t *ids, int T)
{
    int E = xc->E, K = xc->K;
    double *f = xc->freq + (size_t)mi * E;
    for (int e = 0; e < E; e++)
        f[e] *= XC_DECAY;
    for (int i = 0; i < T * K; i++)
        if (ids[i] >= 0 && ids[i] < E)
            f[ids[i]] += 1.0;
    if (xc->prev_mi == mi - 1 && mi > 0 && xc->prev_T == T) {
        uint32_t *tr = xc->trans + (size_t)(mi - 1) * E * E;
        uint32_t *rs = xc->trow + (size_t)(mi - 1) * E;
        for (int t = 0; t < T; t++)
            for (int a = 0; a < K; a++) {
                int ea = xc->prev[t * K + a];
                if (ea < 0 || ea >= E)
                    continue;
                rs[ea]++;
                for (int b = 0; b < K; b++) {
                    int eb = ids[t * K + b];
                    if (eb >= 0 && eb < E)
                        tr[(size_t)ea * E + eb]++;
                }
            }
    }
    size_t n = (size_t)T * K;
    if (n > xc->prev_cap) {
        int32_t *p = realloc(xc->prev, n * sizeof(int32_t));
        if (!p) {
            xc->prev_mi = -1;
            return;
        }
        xc->prev = p;
        xc->prev_cap = n;
    }
    memcpy(xc->prev, ids, n * sizeof(int32_t));
    xc->prev_mi = mi;
    xc->prev_T = T;
}

/* Read ahead the experts predicted for the MoE layer after mi. */
static void prefetch(glm_model_t *m, int mi, const int32_t *ids, int T)
{
    struct rt_xcache *xc = m->xc;
    int E = xc->E, K = xc->K;
    int nmi = mi + 1 < xc->n_moe ? mi + 1 : 0;
    double *score = calloc((size_t)E, sizeof(double));
    double *pr = calloc((size_t)E, sizeof(double));
    if (!score || !pr) {
        free(score);
        free(pr);
        return;
    }
    const double *f = xc->freq + (size_t)nmi * E;
    double fs = 0;
    for (int e = 0; e < E; e++)
        fs += f[e];
    double *pm = calloc((size_t)E, sizeof(double)); /* p_freq */
    if (!pm) {
        free(score);
        free(pr);
        return;
    }
    for (int e = 0; e < E; e++) {
        pm[e] = fs > 0 ? (double)K * f[e] / fs : 0;
        if (pm[e] > 1)
            pm[e] = 1;
    }
    for (int e = 0; e < E; e++)
        score[e] = 1.0;         /* prod (1 - p_row) */
    int rows = T < 64 ? T : 64; /* a long prefill: its first rows are enough */
    for (int t = 0; t < rows; t++) {
        int seen = 0;
        for (int e = 0; e < E; e++)
            pr[e] = 0;
        if (nmi == mi + 1) {
            const uint32_t *tr = xc->trans + (size_t)mi * E * E;
            const uint32_t *rs = xc->trow + (size_t)mi * E;
            for (int a = 0; a < K; a++) {
                int ea = ids[t * K + a];
                if (ea < 0 || ea >= E || rs[ea] < XC_MIN_OBS)
                    continue;
                seen++;
                for (int b = 0; b < E; b++) {
                    /* smoothed towards p_freq: few observations, little trust */
                    double q = ((double)tr[(size_t)ea * E + b] + XC_PRIOR * pm[b]) /
                               ((double)rs[ea] + XC_PRIOR);
                    if (q > pr[b])
                        pr[b] = q;
                }
            }
        }
        for (int e = 0; e < E; e++) {
            double p = seen ? XC_ALPHA * pr[e] + (1 - XC_ALPHA) * pm[e] : pm[e];
            if (p > 1)
                p = 1;
            score[e] *= 1.0 - p;
        }
    }
    for (int e = 0; e < E; e++)
        score[e] = 1.0 - score[e];
    int budget = XC_PF_BUDGET * K * (T < 4 ? T : 4);
    for (int n = 0; n < budget; n++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (xc->where[(size_t)nmi * E + e] < 0 && score[e] >= XC_PF_MIN &&
                (best < 0 || score[e] > score[best]))
                best = e;
        if (best < 0)
            break;
        int v = victim(xc);
        if (v < 0)
            break;
        /* LRU: only slots unused for a pass; else only a slot worth less than
         * the candidate once used (its frequency + the score) */
        if (xc->slot[v].mi >= 0 &&
            (xc->lru ? xc->clock - xc->slot[v].last < (uint64_t)xc->n_moe
                     : value(xc, &xc->slot[v]) >= f[best] + XC_PF_WORTH * score[best])) {
            score[best] = -1; /* not worth its slot: the next candidate */
            continue;
        }
        score[best] = -1;
        if (load(m, v, nmi, best))
            break; /* a failed prefetch is not an error: the layer misses */
        struct rt_xslot *sl = &xc->slot[v];
        sl->prefetched = 1;
        sl->pin = xc->stamp;
        sl->last = xc->clock;
        xc->prefetches++;
    }
    free(score);
    free(pr);
    free(pm);
}

/* ---- a MoE layer --------------------------------------------------------------- */

static void weight_ref(glm_model_t *m, int l, int e, int q, int s, const struct xlay *o,
                       struct tx_weight_ref *w)
{
    struct rt_xcache *xc = m->xc;
    const struct tx_smd_tensor *st = m->tensors[m->mats[xmat(m, l, e, q)].t].smd;
    uint64_t base = (uint64_t)s * xc->slot_size;
    memset(w, 0, sizeof(*w));
    w->rows = st->rows;
    w->cols = st->cols;
    w->format = st->format;
    if (st->format == TX8_WFMT_BLOCK_SPARSE) {
        w->nnz_blocks = st->nnz_blocks;
        w->index = tx_ref(xc->bo, base + o->so[q] + (st->index_offset - st->data_offset));
    }
    const struct rt_copy *c = &o->c[q];
    if (c->bo) {
        w->data = tx_ref(xc->bo, base + c->data);
        if (c->dtype == TX8_DTYPE_I8)
            w->scales = tx_ref(xc->bo, base + c->scales);
        w->dtype = c->dtype;
        w->group_size = c->dtype == TX8_DTYPE_I8 ? c->group : 0;
    } else {
        w->data = tx_ref(xc->bo, base + o->so[q]);
        if (rt_dtype_scaled(st->dtype)) {
            w->scales = tx_ref(xc->bo, base + o->so[q] + (st->scales_offset - st->data_offset));
            w->group_size = st->group_size;
        }
        w->dtype = st->dtype;
    }
}

/* Converted copies of the expert in slot s for precision p. */
static int convert(struct gctx *g, int l, int e, int s, int p)
{
    glm_model_t *m = g->m;
    struct rt_xcache *xc = m->xc;
    struct xlay o;
    layout(m, l, e, p, &o);
    uint64_t base = (uint64_t)s * xc->slot_size;
    for (int q = 0; q < 3; q++) {
        if (!o.c[q].bo)
            continue;
        const struct tx_smd_tensor *st = m->tensors[m->mats[xmat(m, l, e, q)].t].smd;
        struct rt_copy c = o.c[q];
        c.data += base;
        c.scales += base;
        if (st->format == TX8_WFMT_BLOCK_SPARSE &&
            (st->dtype == TX8_DTYPE_I8 || c.dtype == TX8_DTYPE_I8)) {
            rt_host_convert_sparse(st, (const uint8_t *)xc->map + base + o.so[q], &c, xc->map);
            continue;
        }
        int rc = rt_emit_convert(g->cb, st, xc->bo, base + o.so[q], xc->bo, &c, xc->scratch);
        if (rc)
            return rc;
        g->ncmd++;
        g->total++;
    }
    xc->slot[s].conv_prec = p;
    return TX_OK;
}

void rt_xc_moe_ffn(struct gctx *g, int l, int mi, struct tx_moe_ffn_args *x)
{
    glm_model_t *m = g->m;
    struct rt_xcache *xc = m->xc;
    int T = (int)x->tokens, K = (int)x->top_k, E = xc->E;
    if (g->rc)
        return;
    /* the routing: the jobs so far must have run */
    int rc = rt_graph_sync(g);
    if (rc) {
        g->rc = rc;
        return;
    }
    size_t n = (size_t)T * (size_t)K;
    if (n > xc->ids_cap) {
        int32_t *p = realloc(xc->ids, n * sizeof(int32_t));
        if (!p) {
            g->rc = tx_error(TX_ENOMEM, "expert cache: out of memory");
            return;
        }
        xc->ids = p;
        xc->ids_cap = n;
    }
    int32_t *rid = (int32_t *)((uint8_t *)m->act_map + g->a.rid);
    memcpy(xc->ids, rid, n * sizeof(int32_t));
    xc->clock++;
    drain(xc); /* prefetches issued during the last job (their errors: below) */
    for (int s = 0; s < xc->n_slots; s++)
        if (xc->slot[s].err && xc->slot[s].mi >= 0) { /* a failed read: the slot is free */
            xc->where[(size_t)xc->slot[s].mi * E + (size_t)xc->slot[s].e] = -1;
            xc->slot[s].mi = xc->slot[s].e = -1;
            xc->slot[s].err = 0;
        }
    stats_update(xc, mi, xc->ids, T);

    uint8_t *need = calloc((size_t)E, 2);
    if (!need) {
        g->rc = tx_error(TX_ENOMEM, "expert cache: out of memory");
        return;
    }
    uint8_t *miss = need + E;
    int total = 0;
    for (size_t i = 0; i < n; i++)
        if (xc->ids[i] >= 0 && xc->ids[i] < E && !need[xc->ids[i]]) {
            need[xc->ids[i]] = 1;
            total++;
        }
    int p = (int)g->plan->precision[GLM_EXPERT];
    struct tx8_weight *tab =
        (struct tx8_weight *)((uint8_t *)m->meta_map + m->table_off) + (size_t)mi * E * 3;
    int e0 = 0, done = 0, groups = 0;
    while (!g->rc && (done < total || groups == 0)) {
        /* a group: the next routed experts in increasing order, at most n_slots */
        xc->stamp++;
        int e1 = e0, cnt = 0;
        memset(miss, 0, (size_t)E);
        /* the group's experts; those present are pinned first, so that no
         * miss of the group evicts another of its experts */
        for (; e1 < E && cnt < xc->n_slots; e1++) {
            if (!need[e1])
                continue;
            int s = xc->where[(size_t)mi * E + e1];
            if (s >= 0) {
                xc->hits++;
                if (xc->p_hit)
                    xc->p_hit[(size_t)mi * E + e1]++;
                if (xc->slot[s].prefetched) {
                    xc->prefetch_useful++;
                    xc->slot[s].prefetched = 0;
                }
                touch(xc, &xc->slot[s]);
                xc->slot[s].pin = xc->stamp;
            } else {
                miss[e1] = 1;
            }
            if (xc->in_decode)
                xc->dec_bytes_needed += stored_bytes(m, l, e1);
            cnt++;
        }
        for (int e = e0; e < e1 && !g->rc; e++) {
            if (!miss[e])
                continue;
            int s = victim(xc);
            if (s < 0 || (rc = load(m, s, mi, e))) {
                g->rc = s < 0 ? tx_error(TX_EINVAL, "internal: expert cache full") : rc;
                break;
            }
            xc->misses++;
            if (xc->p_miss)
                xc->p_miss[(size_t)mi * E + e]++;
            if (xc->in_decode)
                xc->dec_misses++;
            touch(xc, &xc->slot[s]);
            xc->slot[s].pin = xc->stamp;
        }
        if (g->rc)
            break;
        done += cnt;
        groups++;
        int last = done >= total;
        if (last && xc->prefetch)
            prefetch(m, mi, xc->ids, T); /* overlaps this layer's job */
        for (int e = e0; e < e1 && !g->rc; e++) {
            if (!need[e])
                continue;
            int s = xc->where[(size_t)mi * E + e];
            rc = wait_slot(m, s);
            if (!rc && xc->slot[s].conv_prec != p)
                rc = convert(g, l, e, s, p);
            if (rc)
                g->rc = rc;
        }
        if (g->rc)
            break;
        /* the layer's table: routed experts of the group at their slots,
         * the others at a placeholder (slot 0, never read) */
        for (int e = 0; e < E && !g->rc; e++) {
            int in = e >= e0 && e < e1 && need[e];
            int s = in ? xc->where[(size_t)mi * E + e] : 0;
            struct xlay o;
            layout(m, l, e, p, &o);
            for (int q = 0; q < 3; q++) {
                struct tx_weight_ref w;
                weight_ref(m, l, e, q, s, &o, &w);
                struct tx8_weight *tw = &tab[(size_t)e * 3 + (size_t)q];
                rc = tx_weight_encode(&w, tw);
                if (rc) {
                    g->rc = tx_error(rc, "expert cache: expert table: %s", tx_last_error());
                    break;
                }
                if (xc->dev_flags && in && q == 0)
                    tw->rsvd = TX8_WEIGHT_F_XCACHE | (miss[e] ? TX8_WEIGHT_F_XMISS : 0);
            }
        }
        if (g->rc)
            break;
        if (!(last && groups == 1)) /* several groups: this one's rows only */
            for (size_t i = 0; i < n; i++) {
                int e = xc->ids[i];
                rid[i] = e >= e0 && e < e1 ? e : -1;
            }
        int nmiss = 0;
        for (int e = e0; e < e1; e++)
            nmiss += miss[e];
        blk_dbg(g,
                "MOE_FFN layer %d tokens=%d top_k=%d w=%s experts %d..%d of %d routed (expert "
                "cache: %d hits, %d misses; totals %llu hits %llu misses %llu prefetches %llu "
                "bytes read)",
                l, T, K, tx_dtype_name(rt_prec_dtype(g->plan->precision[GLM_EXPERT])), e0,
                e1 - 1, total, cnt - nmiss, nmiss, (unsigned long long)xc->hits,
                (unsigned long long)xc->misses, (unsigned long long)xc->prefetches,
                (unsigned long long)xc->bytes_read);
        if (blk_emit(g, tx_cmd_moe_ffn(g->cb, x)))
            break;
        e0 = e1;
        if (!last) {
            rc = rt_graph_sync(g);
            if (rc)
                g->rc = rc;
        }
        if (total == 0)
            break;
    }
    free(need);
}

/* ---- the rest -------------------------------------------------------------- */

/* Reads every (MoE layer, expert) of want[n_moe][E] into a free slot now
 * (expert parallelism: a device's experts at load; the cache holds them
 * all, so they are never evicted). */
int rt_xc_preload(glm_model_t *m, const uint8_t *want)
{
    struct rt_xcache *xc = m->xc;
    int E = xc->E, s = 0;
    for (int mi = 0; mi < xc->n_moe; mi++)
        for (int e = 0; e < E; e++) {
            if (!want[(size_t)mi * E + e] || xc->where[(size_t)mi * E + e] >= 0)
                continue;
            while (s < xc->n_slots && xc->slot[s].mi >= 0)
                s++;
            if (s >= xc->n_slots)
                return tx_error(TX_ENOSPC, "expert cache: no free slot to preload into");
            int rc = load(m, s, mi, e);
            if (rc)
                return rc;
            xc->slot[s].last = xc->clock;
        }
    io_uring_submit(&xc->ring);
    for (int k = 0; k < xc->n_slots; k++)
        if (xc->slot[k].mi >= 0) {
            int rc = wait_slot(m, k);
            if (rc)
                return rc;
        }
    return TX_OK;
}

void rt_xc_pass_begin(glm_model_t *m, int T, int decode)
{
    struct rt_xcache *xc = m->xc;
    if (!xc)
        return;
    xc->prev_mi = -1;
    xc->in_decode = decode;
    if (decode)
        xc->dec_tokens += (uint64_t)T;
}

int rt_xc_declare(glm_model_t *m, tx_cmdbuf_t *cb)
{
    struct rt_xcache *xc = m->xc;
    if (!xc)
        return TX_OK;
    if (!xc->on || !xc->bo)
        return tx_error(TX_EINVAL, "expert cache: unusable after a failed relayout");
    int rc = tx_cmdbuf_use(cb, xc->bo, TX_ACCESS_RW);
    if (!rc)
        rc = tx_cmdbuf_use(cb, xc->scratch, TX_ACCESS_RW);
    return rc;
}

/* A plan whose expert precision needs another slot size: the same bytes
 * laid out again (the statistics stay, the cached experts go). Slots
 * remember the precision of their converted copies (conv_prec) otherwise. */
int rt_xc_plan_changed(glm_model_t *m, const glm_precision_plan_t *plan)
{
    struct rt_xcache *xc = m->xc;
    int p = (int)plan->precision[GLM_EXPERT];
    if (!xc || p == xc->slot_prec)
        return TX_OK;
    uint64_t need = rt_xc_slot_bytes(m, p);
    if (need == xc->slot_size) {
        xc->slot_prec = p;
        return TX_OK;
    }
    drain(xc);
    uint64_t total = (uint64_t)xc->n_moe * (uint64_t)xc->E;
    uint64_t ns = xc->budget / need;
    if (ns > total)
        ns = total;
    if (ns < (uint64_t)xc->K)
        return tx_error(TX_ENOSPC,
                        "expert cache: precision %s for the experts needs slots of %llu bytes; "
                        "the cache's %llu bytes hold %llu, fewer than num_experts_per_tok %d",
                        glm_precision_name((glm_precision_t)p), (unsigned long long)need,
                        (unsigned long long)xc->budget, (unsigned long long)ns, xc->K);
    tx_bo_t *nb = NULL;
    void *map = NULL;
    struct rt_xslot *sl = calloc(ns, sizeof(*sl));
    int rc = sl ? TX_OK : TX_ENOMEM;
    if (!rc) {
        tx_bo_free(xc->bo); /* first: the same bytes are allocated again */
        xc->bo = NULL;
        rc = tx_bo_alloc(m->dev, ns * need, 0, m->label_w, &nb);
        if (!rc)
            rc = tx_bo_map(nb, &map);
    }
    if (rc) {
        free(sl);
        if (nb)
            tx_bo_free(nb);
        xc->on = 0;
        return tx_error(rc, "expert cache: relayout for %s experts (%llu slots of %llu bytes): %s",
                        glm_precision_name((glm_precision_t)p), (unsigned long long)ns,
                        (unsigned long long)need, tx_last_error());
    }
    free(xc->slot);
    xc->slot = sl;
    xc->bo = nb;
    xc->map = map;
    xc->n_slots = (int)ns;
    xc->slot_size = need;
    xc->slot_prec = p;
    for (uint64_t i = 0; i < total; i++)
        xc->where[i] = -1;
    for (uint64_t s = 0; s < ns; s++) {
        xc->slot[s].mi = xc->slot[s].e = -1;
        xc->slot[s].conv_prec = -1;
    }
    rt_debug("expert cache: laid out again for %s experts: %d slots of %llu bytes",
             glm_precision_name((glm_precision_t)p), xc->n_slots, (unsigned long long)need);
    return TX_OK;
}

void rt_xc_free(glm_model_t *m)
{
    struct rt_xcache *xc = m->xc;
    if (!xc)
        return;
    if (xc->ring_ok) {
        while (xc->inflight > 0) {
            struct io_uring_cqe *cqe;
            if (io_uring_wait_cqe(&xc->ring, &cqe) < 0)
                break;
            free(io_uring_cqe_get_data(cqe));
            io_uring_cqe_seen(&xc->ring, cqe);
            xc->inflight--;
        }
        io_uring_queue_exit(&xc->ring);
    }
    if (xc->fd_direct >= 0)
        close(xc->fd_direct);
    if (xc->bo)
        tx_bo_free(xc->bo);
    if (xc->scratch)
        tx_bo_free(xc->scratch);
    free(xc->slot);
    free(xc->where);
    free(xc->p_hit);
    free(xc->p_miss);
    free(xc->freq);
    free(xc->trans);
    free(xc->trow);
    free(xc->prev);
    free(xc->ids);
    free(xc);
    m->xc = NULL;
}

TX_API int glm_model_expert_cache_stats(glm_model_t *m, struct glm_expert_cache_stats *out)
{
    if (!m || !out)
        return tx_error(TX_EINVAL, "glm_model_expert_cache_stats: NULL argument");
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&m->lock);
    const struct rt_xcache *xc = m->xc;
    if (xc && xc->on) {
        out->slots = (uint64_t)xc->n_slots;
        out->slot_bytes = xc->slot_size;
        out->cache_bytes = (uint64_t)xc->n_slots * xc->slot_size;
        out->experts = (uint64_t)xc->n_moe * (uint64_t)xc->E;
        out->hits = xc->hits;
        out->misses = xc->misses;
        out->prefetches = xc->prefetches;
        out->prefetch_useful = xc->prefetch_useful;
        out->evictions = xc->evictions;
        out->bytes_read = xc->bytes_read;
        out->decode_tokens = xc->dec_tokens;
        out->decode_misses = xc->dec_misses;
        out->decode_bytes_read = xc->dec_bytes_read;
        out->decode_bytes_needed = xc->dec_bytes_needed;
        out->policy = xc->lru;
        out->prefetch = xc->prefetch;
        out->direct = xc->direct;
    }
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}

/* ---- the weight store "expert cache" -------------------------------------- */

/* The resident part (everything but the routed experts) in the weights BO,
 * the experts in slots. TX_ENOSPC (state undone) when the resident part or
 * top_k slots do not fit. */
static int xc_place(glm_model_t *m, const struct rt_place *p)
{
    const struct glm_load_options *o = p->o;
    const char *path = p->path;
    uint64_t total_w = m->w_size;
    rt_xc_mark(m);
    glm_precision_plan_t plan;
    rt_plan_of(m->dev, &plan, NULL);
    uint64_t res = m->w_size, slot = rt_xc_slot_bytes(m, (int)plan.precision[GLM_EXPERT]);
    uint64_t xb = rt_xc_expert_bytes(m);
    int K = m->cfg.num_experts_per_tok;
    uint64_t all = slot * (uint64_t)m->n_moe_layers * (uint64_t)m->cfg.n_routed_experts;
    int rc;
    if (o->max_weight_bytes && res + slot * (uint64_t)K > o->max_weight_bytes) {
        rc = tx_error(TX_ENOSPC,
                      "%s: without its routed experts the model still needs %llu bytes, over "
                      "max_weight_bytes %llu less %d expert slots",
                      path, (unsigned long long)res, (unsigned long long)o->max_weight_bytes, K);
        goto undo;
    }
    rc = tx_bo_alloc(m->dev, res ? res : 4096, 0, m->label_w, &m->w_bo);
    if (rc) {
        rc = tx_error(rc,
                      "%s: the resident part without routed experts (%llu of %llu bytes) does "
                      "not fit: %s",
                      path, (unsigned long long)res, (unsigned long long)total_w, tx_last_error());
        goto undo;
    }
    uint64_t bytes = o->expert_cache_bytes;
    if (!bytes && o->max_weight_bytes) {
        bytes = o->max_weight_bytes - res;
    } else if (!bytes) {
        /* what is free now, less a reserve for the meta buffer, activations
         * and KV caches of the sessions to come: a quarter, >= 16 MiB */
        struct tx_device_info di;
        uint64_t fr = 0;
        if (tx_device_info(m->dev, &di) == TX_OK && di.heap_size > di.mem_used)
            fr = di.heap_size - di.mem_used;
        uint64_t rsv = fr / 4 > (16u << 20) ? fr / 4 : (16u << 20);
        bytes = fr > rsv ? fr - rsv : 0;
        if (bytes > all)
            bytes = all;
    }
    rc = rt_xc_setup(m, bytes, o->flags);
    if (rc)
        goto undo;
    rt_debug("load: expert cache: %llu bytes resident, %llu bytes of routed experts in %d slots "
             "(%llu bytes)",
             (unsigned long long)res, (unsigned long long)xb, m->xc->n_slots,
             (unsigned long long)((uint64_t)m->xc->n_slots * m->xc->slot_size));
    return TX_OK;
undo:
    rt_xc_free(m);
    if (m->w_bo)
        tx_bo_free(m->w_bo);
    m->w_bo = NULL;
    m->streaming = 0;
    rt_xc_unmark(m);
    if (rc == TX_ENOSPC && p->may_fall)
        rt_debug("load: no room for the expert cache (%s): streaming the layers", tx_last_error());
    return rc;
}

static void xc_moe_ffn(struct gctx *g, int l, int mi, struct tx_moe_ffn_args *x)
{
    x->experts = tx_ref(g->m->meta_bo, rt_store_layer_table(g->m, mi));
    rt_xc_moe_ffn(g, l, mi, x);
}

static void xc_info(const glm_model_t *m, struct glm_model_info *info)
{
    const struct rt_xcache *xc = m->xc;
    info->weights_bytes += (uint64_t)xc->n_slots * xc->slot_size;
    info->prefetch_hits = xc->hits;
    info->prefetch_misses = xc->misses;
}

static int xc_telemetry(const glm_model_t *m, struct tx_telemetry_cache *tc)
{
    const struct rt_xcache *xc = m->xc;
    *tc = (struct tx_telemetry_cache){(uint64_t)xc->n_slots,
                                      (uint64_t)xc->n_moe * (uint64_t)xc->E,
                                      xc->hits,
                                      xc->misses,
                                      xc->prefetches,
                                      xc->prefetch_useful,
                                      xc->bytes_read};
    return 1;
}

const struct rt_store_ops rt_store_expert_cache = {
    .name = "expert cache",
    .layer_jobs = 0,
    .decode_graph = 0,
    .place = xc_place,
    .ready = rt_store_nop_ready,
    .free = rt_xc_free,
    .n_expert_tables = rt_store_per_layer_tables,
    .plan = rt_xc_plan_changed, /* a layer's table is written when the layer runs */
    .pass_begin = rt_xc_pass_begin,
    .declare = rt_xc_declare,
    .layer_enter = rt_store_nop_enter,
    .layer_leave = rt_store_nop_layer,
    .moe_ffn = xc_moe_ffn,
    .info = xc_info,
    .telemetry = xc_telemetry,
};
