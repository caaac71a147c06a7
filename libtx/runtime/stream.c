/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: parameter shard prefetch (article section 2.3).
 *
 * When a model's weights do not fit in device memory (or the caller asks,
 * GLM_LOAD_STREAM / max_weight_bytes), only the model-level tensors (the
 * embedding, the final norm, the lm_head) and the small vectors stay
 * resident. The matrices of the decoder layers stay in the package and pass
 * through RT_SLOTS device buffers of one layer each. A forward pass runs one
 * device job per layer; right after submitting layer l's job, the host
 * issues io_uring reads of layer l + 1 (after the last layer: layer 0 of the
 * next pass) straight into the other slot's mapped memory, so the reads
 * overlap the device's work on layer l -- the layer-to-layer dependency the
 * article follows. A slot is reused only after the job that read it
 * finished.
 *
 * Precision: a streamed matrix whose stored type differs from the plan is
 * converted at the start of its layer's job by CONVERT commands into the
 * slot's conversion buffer (sparse INT8 cases on the host); the MoE expert
 * table of a slot is rewritten for the layer it holds.
 */
#include "runtime/weight_store.h"

#include "runtime/blocks.h"
#include "profile/profile_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))
#define CHUNK (8u << 20)
#define RING_DEPTH 64

struct sreq {
    int slot;
    uint8_t *dst;
    uint64_t foff;
    uint32_t len, got;
};

static int group_layers(glm_model_t *m);
static int stream_wait(glm_model_t *m, int slot);

static int is_streamed(const struct rt_tensor *t)
{
    return t->info.layer >= 0 && t->info.ndim == 2;
}

static int stream_setup(glm_model_t *m)
{
    struct rt_stream *s = &m->st;
    int L = m->cfg.num_hidden_layers;
    s->layer_bytes = calloc((size_t)L, sizeof(uint64_t));
    s->conv = calloc((size_t)m->n_mats, sizeof(*s->conv));
    if (!s->layer_bytes || !s->conv)
        return tx_error(TX_ENOMEM, "streaming: out of memory");
    /* resident tensors packed first; streamed ones by layer */
    uint64_t res = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        struct rt_tensor *t = &m->tensors[i];
        t->streamed = is_streamed(t);
        if (t->streamed) {
            int l = t->info.layer;
            t->off = s->layer_bytes[l];
            s->layer_bytes[l] += t->smd->extent_size;
        } else {
            t->off = res;
            res += t->smd->extent_size;
        }
    }
    m->w_size = res;
    s->slot_size = 0;
    for (int l = 0; l < L; l++)
        if (s->layer_bytes[l] > s->slot_size)
            s->slot_size = s->layer_bytes[l];
    for (int k = 0; k < RT_SLOTS; k++) {
        s->slot_layer[k] = -1;
        int rc =
            tx_bo_alloc(m->dev, s->slot_size ? s->slot_size : 4096, 0, m->label_w, &s->slot_bo[k]);
        if (!rc)
            rc = tx_bo_map(s->slot_bo[k], &s->slot_map[k]);
        if (rc)
            return tx_error(rc,
                            "streaming: a layer slot needs %llu bytes of device memory (%d "
                            "slots): %s",
                            (unsigned long long)s->slot_size, RT_SLOTS, tx_last_error());
    }
    s->ring = calloc(1, sizeof(*s->ring));
    if (!s->ring)
        return tx_error(TX_ENOMEM, "streaming: out of memory");
    int r = io_uring_queue_init(RING_DEPTH, s->ring, 0);
    if (r < 0) {
        free(s->ring);
        s->ring = NULL;
        return tx_error(TX_ENOTSUP, "streaming needs io_uring: %s", strerror(-r));
    }
    s->fd = tx_smd_fd(m->smd);
    if (group_layers(m))
        return tx_error(TX_ENOMEM, "streaming: out of memory");
    s->on = 1;
    m->streaming = 1;
    rt_debug("streaming: %llu bytes resident, %d layers streamed through %d slots of %llu bytes",
             (unsigned long long)res, L, RT_SLOTS, (unsigned long long)s->slot_size);
    return TX_OK;
}

static int group_layers(glm_model_t *m)
{
    int L = m->cfg.num_hidden_layers;
    int *lt_idx, *lt_start;
    lt_idx = malloc(sizeof(int) * (size_t)(m->n_tensors ? m->n_tensors : 1));
    lt_start = calloc((size_t)L + 2, sizeof(int));
    m->st.lt_idx = lt_idx;
    m->st.lt_start = lt_start;
    if (!lt_idx || !lt_start)
        return TX_ENOMEM;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].streamed)
            lt_start[m->tensors[i].info.layer + 1]++;
    for (int l = 0; l < L; l++)
        lt_start[l + 1] += lt_start[l];
    int *fill = calloc((size_t)L + 1, sizeof(int));
    if (!fill)
        return TX_ENOMEM;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].streamed) {
            int l = m->tensors[i].info.layer;
            lt_idx[lt_start[l] + fill[l]++] = i;
        }
    free(fill);
    return 0;
}

static void stream_free(glm_model_t *m)
{
    struct rt_stream *s = &m->st;
    if (s->ring) {
        for (int k = 0; k < RT_SLOTS; k++)
            while (s->inflight[k] > 0) {
                struct io_uring_cqe *cqe;
                if (io_uring_wait_cqe(s->ring, &cqe) < 0)
                    break;
                struct sreq *r = io_uring_cqe_get_data(cqe);
                s->inflight[r->slot]--;
                free(r);
                io_uring_cqe_seen(s->ring, cqe);
            }
        io_uring_queue_exit(s->ring);
        free(s->ring);
    }
    for (int k = 0; k < RT_SLOTS; k++) {
        if (s->slot_bo[k])
            tx_bo_free(s->slot_bo[k]);
        if (s->cslot_bo[k])
            tx_bo_free(s->cslot_bo[k]);
    }
    if (s->scratch_bo)
        tx_bo_free(s->scratch_bo);
    free(s->layer_bytes);
    free(s->conv);
    free(s->lt_idx);
    free(s->lt_start);
    memset(s, 0, sizeof(*s));
}

static int stream_slot_of(const glm_model_t *m, int layer)
{
    for (int k = 0; k < RT_SLOTS; k++)
        if (m->st.slot_layer[k] == layer)
            return k;
    return TX_NONE;
}

static int submit_read(struct rt_stream *s, int slot, uint8_t *dst, uint64_t foff, uint32_t len)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(s->ring);
    if (!sqe) {
        io_uring_submit(s->ring);
        sqe = io_uring_get_sqe(s->ring);
    }
    struct sreq *r = sqe ? malloc(sizeof(*r)) : NULL;
    if (!r)
        return TX_ENOMEM;
    r->slot = slot;
    r->dst = dst;
    r->foff = foff;
    r->len = len;
    r->got = 0;
    io_uring_prep_read(sqe, s->fd, dst, len, foff);
    io_uring_sqe_set_data(sqe, r);
    s->inflight[slot]++;
    return 0;
}

static int reap_one(glm_model_t *m)
{
    struct rt_stream *s = &m->st;
    struct io_uring_cqe *cqe;
    int rc;
    do
        rc = io_uring_wait_cqe(s->ring, &cqe);
    while (rc == -EINTR);
    if (rc < 0)
        return rc;
    struct sreq *r = io_uring_cqe_get_data(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(s->ring, cqe);
    s->inflight[r->slot]--;
    if (res < 0) {
        s->slot_err[r->slot] = res;
        free(r);
        return 0;
    }
    r->got += (uint32_t)res;
    s->bytes_read += (uint64_t)res;
    if (r->got < r->len) {
        if (res == 0) { /* past the end of the file: the last extent's padding */
            memset(r->dst + r->got, 0, r->len - r->got);
            free(r);
            return 0;
        }
        int e = submit_read(s, r->slot, r->dst + r->got, r->foff + r->got, r->len - r->got);
        if (e)
            s->slot_err[r->slot] = e;
        else
            io_uring_submit(s->ring);
    }
    free(r);
    return 0;
}

static int stream_load(glm_model_t *m, int layer, int slot)
{
    struct rt_stream *s = &m->st;
    if (!s->lt_idx && group_layers(m))
        return tx_error(TX_ENOMEM, "streaming: out of memory");
    if (s->inflight[slot] > 0) {
        s->slot_layer[slot] = -2; /* drain reads of a layer no longer wanted */
        stream_wait(m, slot);
    }
    s->slot_layer[slot] = layer;
    s->slot_err[slot] = 0;
    for (int j = s->lt_start[layer]; j < s->lt_start[layer + 1]; j++) {
        const struct rt_tensor *t = &m->tensors[s->lt_idx[j]];
        uint64_t ext = t->smd->extent_size;
        for (uint64_t o = 0; o < ext; o += CHUNK) {
            uint32_t len = (uint32_t)(ext - o < CHUNK ? ext - o : CHUNK);
            int e = submit_read(s, slot, (uint8_t *)s->slot_map[slot] + t->off + o,
                                t->smd->data_offset + o, len);
            if (e) {
                s->slot_layer[slot] = -1;
                return tx_error(TX_ENOMEM, "streaming: cannot queue a read");
            }
        }
    }
    int r = io_uring_submit(s->ring);
    if (r < 0) {
        s->slot_layer[slot] = -1;
        return tx_error(tx_errno_code(r), "streaming: io_uring_submit: %s", strerror(-r));
    }
    return TX_OK;
}

/* Reap the completions that are already there. */
static void stream_poll(glm_model_t *m)
{
    struct rt_stream *s = &m->st;
    struct io_uring_cqe *cqe;
    while (s->ring && (s->inflight[0] || s->inflight[1]) && io_uring_peek_cqe(s->ring, &cqe) == 0)
        if (reap_one(m) < 0)
            break;
}

static int stream_wait(glm_model_t *m, int slot)
{
    struct rt_stream *s = &m->st;
    while (s->inflight[slot] > 0) {
        int rc = reap_one(m);
        if (rc < 0)
            return tx_error(tx_errno_code(rc), "streaming: io_uring wait: %s", strerror(-rc));
    }
    if (s->slot_err[slot]) {
        int e = s->slot_err[slot];
        int l = s->slot_layer[slot];
        s->slot_layer[slot] = -1;
        return tx_error(tx_errno_code(e), "streaming: reading layer %d from %s failed: %s", l,
                        tx_smd_path(m->smd), strerror(-e));
    }
    return TX_OK;
}

/* Layout of the converted copies of every layer under plan p (offsets
 * relative to a layer's conversion buffer); (re)allocates the buffers. */
static int stream_prepare_plan(glm_model_t *m, const glm_precision_plan_t *plan)
{
    struct rt_stream *s = &m->st;
    if (s->conv_valid && !memcmp(&s->conv_plan, plan, sizeof(*plan)))
        return TX_OK;
    int L = m->cfg.num_hidden_layers;
    uint64_t *lay = calloc((size_t)L, sizeof(uint64_t));
    if (!lay)
        return tx_error(TX_ENOMEM, "streaming: out of memory");
    uint64_t cmax = 0, tmax = 0;
    for (int i = 0; i < m->n_mats; i++) {
        struct rt_mat *x = &m->mats[i];
        const struct rt_tensor *t = &m->tensors[x->t];
        struct rt_copy *c = &s->conv[i];
        memset(c, 0, sizeof(*c));
        if (!t->streamed)
            continue;
        glm_precision_t p = x->ltype == RT_ROUTER ? FP32 : plan->precision[x->ltype];
        if (rt_stored_fits(m, x, p))
            continue;
        int l = t->info.layer;
        uint16_t dt = x->ltype == RT_ROUTER ? TX8_DTYPE_F32 : rt_prec_dtype(p);
        uint32_t g = dt == TX8_DTYPE_I8 ? rt_copy_group(m, x) : 0;
        c->dtype = dt;
        c->group = g;
        c->data = ALIGN_UP(lay[l], 256);
        lay[l] = c->data + rt_copy_data_bytes(m, x, dt);
        c->scales = ALIGN_UP(lay[l], 64);
        lay[l] = c->scales + rt_copy_scales_bytes(m, x, dt, g);
        c->bo = (tx_bo_t *)1; /* marks "converted"; the slot gives the BO */
        uint64_t f32b = (uint64_t)t->smd->rows * t->smd->cols * 4;
        if (t->smd->format == TX8_WFMT_DENSE && f32b > tmax)
            tmax = f32b;
        if (lay[l] > cmax)
            cmax = lay[l];
    }
    free(lay);
    int rc = TX_OK;
    if (cmax > s->cslot_size) {
        for (int k = 0; k < RT_SLOTS; k++) {
            if (s->cslot_bo[k])
                tx_bo_free(s->cslot_bo[k]);
            s->cslot_bo[k] = NULL;
            rc = tx_bo_alloc(m->dev, cmax, 0, m->label_w, &s->cslot_bo[k]);
            if (!rc)
                rc = tx_bo_map(s->cslot_bo[k], &s->cslot_map[k]);
            if (rc) {
                s->cslot_size = 0;
                return tx_error(rc, "streaming: converted copies need %llu bytes per slot: %s",
                                (unsigned long long)cmax, tx_last_error());
            }
        }
        s->cslot_size = cmax;
    }
    if (tmax > s->scratch_size) {
        if (s->scratch_bo)
            tx_bo_free(s->scratch_bo);
        s->scratch_bo = NULL;
        rc = tx_bo_alloc(m->dev, tmax, 0, m->label_w, &s->scratch_bo);
        if (rc) {
            s->scratch_size = 0;
            return tx_error(rc, "streaming: conversion scratch of %llu bytes: %s",
                            (unsigned long long)tmax, tx_last_error());
        }
        s->scratch_size = tmax;
    }
    s->conv_plan = *plan;
    s->conv_valid = 1;
    return TX_OK;
}

int rt_stream_weight_ref(glm_model_t *m, int mi, glm_precision_t p, struct tx_weight_ref *w)
{
    struct rt_stream *s = &m->st;
    const struct rt_mat *x = &m->mats[mi];
    const struct rt_tensor *t = &m->tensors[x->t];
    const struct tx_smd_tensor *st = t->smd;
    int k = stream_slot_of(m, t->info.layer);
    if (k < 0)
        return tx_error(TX_EINVAL, "internal: layer %d is not in a slot", t->info.layer);
    memset(w, 0, sizeof(*w));
    w->rows = st->rows;
    w->cols = st->cols;
    w->format = st->format;
    if (st->format == TX8_WFMT_BLOCK_SPARSE) {
        w->nnz_blocks = st->nnz_blocks;
        w->index = tx_ref(s->slot_bo[k], t->off + (st->index_offset - st->data_offset));
    }
    (void)p; /* the conversion layout was made for the plan of this pass */
    const struct rt_copy *c = &s->conv[mi];
    if (c->bo) {
        w->data = tx_ref(s->cslot_bo[k], c->data);
        if (c->dtype == TX8_DTYPE_I8)
            w->scales = tx_ref(s->cslot_bo[k], c->scales);
        w->dtype = c->dtype;
        w->group_size = c->dtype == TX8_DTYPE_I8 ? c->group : 0;
    } else {
        w->data = tx_ref(s->slot_bo[k], t->off);
        if (rt_dtype_scaled(st->dtype)) {
            w->scales = tx_ref(s->slot_bo[k], t->off + (st->scales_offset - st->data_offset));
            w->group_size = st->group_size;
        }
        w->dtype = st->dtype;
    }
    return TX_OK;
}

static int stream_begin_layer(glm_model_t *m, int layer, int k, const glm_precision_plan_t *plan,
                              tx_cmdbuf_t *cb)
{
    struct rt_stream *s = &m->st;
    (void)plan;
    int rc = tx_cmdbuf_use(cb, s->slot_bo[k], TX_ACCESS_READ);
    if (!rc && s->cslot_bo[k])
        rc = tx_cmdbuf_use(cb, s->cslot_bo[k], TX_ACCESS_RW);
    if (!rc && s->scratch_bo)
        rc = tx_cmdbuf_use(cb, s->scratch_bo, TX_ACCESS_RW);
    if (rc)
        return tx_error(rc, "streaming: %s", tx_last_error());
    /* conversions of this layer's matrices into the slot's copies */
    for (int j = s->lt_start[layer]; j < s->lt_start[layer + 1]; j++) {
        int ti = s->lt_idx[j];
        const struct rt_tensor *t = &m->tensors[ti];
        for (int mi = 0; mi < m->n_mats; mi++) {
            if (m->mats[mi].t != ti || !s->conv[mi].bo)
                continue;
            struct rt_copy c = s->conv[mi];
            const struct tx_smd_tensor *st = t->smd;
            if (st->format == TX8_WFMT_BLOCK_SPARSE &&
                (st->dtype == TX8_DTYPE_I8 || c.dtype == TX8_DTYPE_I8)) {
                rt_host_convert_sparse(st, (const uint8_t *)s->slot_map[k] + t->off, &c,
                                       s->cslot_map[k]);
                continue;
            }
            rc = rt_emit_convert(cb, st, s->slot_bo[k], t->off, s->cslot_bo[k], &c, s->scratch_bo);
            if (rc)
                return rc;
        }
    }
    /* the slot's expert table */
    int mi = m->moe_index[layer];
    if (mi >= 0) {
        int E = m->cfg.n_routed_experts;
        struct tx8_weight *tab =
            (struct tx8_weight *)((uint8_t *)m->meta_map + s->table_off) + (size_t)k * E * 3;
        for (int e = 0; e < E; e++)
            for (int q = 0; q < 3; q++) {
                int x = m->exp_mat[((size_t)layer * (size_t)E + (size_t)e) * 3 + (size_t)q];
                struct tx_weight_ref w;
                rc = rt_stream_weight_ref(m, x, FP32, &w);
                if (!rc)
                    rc = tx_weight_encode(&w, &tab[(size_t)e * 3 + (size_t)q]);

                if (rc)
                    return tx_error(rc, "streaming: expert table: %s", tx_last_error());
            }
    }
    return TX_OK;
}

/* A streamed tensor's extent read from the package (malloc'd), for the
 * host reference. */
int rt_stream_read_tensor(glm_model_t *m, int ti, void **buf)
{
    char err[TX_ERR_MAX];
    const struct tx_smd_tensor *st = m->tensors[ti].smd;
    void *b = malloc(st->extent_size);
    if (!b)
        return tx_error(TX_ENOMEM, "out of memory");
    int rc = tx_smd_read_extent(m->smd, st, b, st->extent_size, 0, err, sizeof(err));
    if (rc) {
        free(b);
        return tx_error(rc, "%s", err);
    }
    *buf = b;
    return TX_OK;
}

/* ---- the pass: one job per layer, the next layer read meanwhile ---------- */

/* Index of the job of this pass that last read slot k (-1: none). */
static int slot_job_index(struct gctx *g, int k)
{
    uint64_t id = g->m->st.slot_job[k];
    for (int i = g->njobs - 1; i >= 0 && id; i--)
        if (g->jobs[i] == id)
            return i;
    return TX_NONE;
}

/* Layer l into a slot before its commands are built: prefetched (a hit)
 * or read now (a miss); then its conversions, expert table and BOs. */
static int stream_layer_enter(struct gctx *g, int l)
{
    glm_model_t *m = g->m;
    struct rt_stream *s = &m->st;
    int k = stream_slot_of(m, l);
    if (k < 0) {
        int prev = l > 0 ? stream_slot_of(m, l - 1) : -1;
        k = prev == 0 ? 1 : 0;
        rt_graph_wait_job(g, slot_job_index(g, k));
        int rc = stream_load(m, l, k);
        if (rc)
            return rc;
        s->misses++;
    } else if (stream_poll(m), s->inflight[k] > 0) {
        s->misses++; /* prefetched, but the reads are not complete yet */
    } else {
        s->hits++;
    }
    uint64_t t0 = txp_begin();
    int rc = stream_wait(m, k);
    txp_end("weight streaming", t0);
    if (rc)
        return rc;
    rc = stream_begin_layer(m, l, k, g->plan, g->cb);
    return rc;
}

/* After layer l's job was submitted: note that it reads its slot, and
 * prefetch layer `next` into the other slot once the job that last read
 * that slot has finished (the device meanwhile runs layer l). */
static int stream_layer_leave(struct gctx *g, int l, int next)
{
    glm_model_t *m = g->m;
    struct rt_stream *s = &m->st;
    int k = stream_slot_of(m, l);
    if (k >= 0 && g->njobs)
        s->slot_job[k] = g->jobs[g->njobs - 1];
    if (next < 0 || stream_slot_of(m, next) >= 0)
        return TX_OK;
    int t = k == 0 ? 1 : 0;
    rt_graph_wait_job(g, slot_job_index(g, t));
    if (g->first_err)
        return g->first_err;
    return stream_load(m, next, t);
}

/* ---- the weight store "streamed" ----------------------------------------- */

/* The decoder layers' matrices through the slots, the rest resident. */
static int stream_place(glm_model_t *m, const struct rt_place *p)
{
    if (m->mtp)
        return tx_error(TX_ENOTSUP,
                        "%s: the MTP layer (GLM_LOAD_MTP, --spec-type mtp) needs the weights "
                        "resident or the expert cache, not layer streaming",
                        p->path);
    int rc = stream_setup(m);
    if (!rc)
        rc = tx_bo_alloc(m->dev, m->w_size ? m->w_size : 4096, 0, m->label_w, &m->w_bo);
    if (rc)
        return tx_error(rc,
                        "%s: the weights need %llu bytes (%llu resident when streaming the "
                        "layers through 2 slots of %llu bytes); about %llu of %llu bytes of "
                        "device memory are free: %s",
                        p->path, (unsigned long long)p->total_w, (unsigned long long)m->w_size,
                        (unsigned long long)m->st.slot_size, (unsigned long long)p->avail,
                        (unsigned long long)m->dinfo.heap_size, tx_last_error());
    return TX_OK;
}

/* the first pass finds layer 0 ready */
static int stream_ready(glm_model_t *m)
{
    return stream_load(m, 0, 0);
}

/* one expert table per slot, rewritten for the layer it holds */
static int stream_tables(const glm_model_t *m)
{
    (void)m;
    return RT_SLOTS;
}

static void stream_pass_begin(glm_model_t *m, int T, int decode)
{
    (void)T;
    (void)decode;
    for (int k = 0; k < RT_SLOTS; k++)
        m->st.slot_job[k] = 0; /* the jobs of the passes before have finished */
}

static void stream_moe_ffn(struct gctx *g, int l, int mi, struct tx_moe_ffn_args *x)
{
    glm_model_t *m = g->m;
    (void)mi;
    x->experts = tx_ref(m->meta_bo, m->st.table_off + (uint64_t)stream_slot_of(m, l) *
                                                          (uint64_t)m->cfg.n_routed_experts * 3 *
                                                          sizeof(struct tx8_weight));
    rt_store_emit_moe_ffn(g, l, x);
}

static void stream_info(const glm_model_t *m, struct glm_model_info *info)
{
    info->prefetch_hits = m->st.hits;
    info->prefetch_misses = m->st.misses;
}

const struct rt_store_ops rt_store_streamed = {
    .name = "streamed",
    .layer_jobs = 1,
    .decode_graph = 0,
    .place = stream_place,
    .ready = stream_ready,
    .free = stream_free,
    .n_expert_tables = stream_tables,
    .plan = stream_prepare_plan,
    .pass_begin = stream_pass_begin,
    .declare = rt_store_nop_declare,
    .layer_enter = stream_layer_enter,
    .layer_leave = stream_layer_leave,
    .moe_ffn = stream_moe_ffn,
    .info = stream_info,
    .telemetry = rt_store_nop_telemetry,
};
