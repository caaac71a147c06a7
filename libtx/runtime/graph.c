/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: one forward pass as TX8 commands.
 *
 * The pass runs T activation rows that belong to one or more sequences
 * (segments: a prefill chunk of one session, or one decode token of each of
 * several sessions). Row-wise work (projections, norms, RoPE with per-row
 * positions, MoE routing and experts) covers all rows at once; the KV cache
 * writes, the DSA indexer and attention run per segment over that session's
 * cache. Every formula follows the FP32 reference (libtx/reference,
 * docs/glm-architectures.md):
 *
 * Read top to bottom, rt_forward: the inputs, EMBED, then for each layer
 * the module's layer() (libtx/arch/<arch>.c, built from the shared blocks
 * of runtime/blocks.c), the final norm, lm_head, SAMPLE; the pass is
 * submitted as one or more jobs (one per layer when streaming parameter
 * shards).
 */
#include "runtime/blocks.h"
#include "runtime/decode_graph.h"
#include "runtime/weight_store.h"

#include <tx-internal/tx_arch.h>
#include "device/device_internal.h"
#include "profile/profile_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_dtype.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

/* Declare every weight BO of the model to the current job (MOE_FFN reaches
 * expert weights through its table). */
static int declare(struct gctx *g)
{
    glm_model_t *m = g->m;
    int rc = m->w_bo ? tx_cmdbuf_use(g->cb, m->w_bo, TX_ACCESS_READ) : TX_OK;
    if (!rc)
        rc = tx_cmdbuf_use(g->cb, m->meta_bo, TX_ACCESS_RW);
    for (int lt = 0; lt < RT_NLTYPES && !rc; lt++)
        for (int p = 0; p < GLM_PRECISION_COUNT && !rc; p++)
            if (m->conv[lt][p].bo)
                rc = tx_cmdbuf_use(g->cb, m->conv[lt][p].bo, TX_ACCESS_READ);
    if (!rc)
        rc = m->store->declare(m, g->cb);
    if (rc)
        return tx_error(rc, "forward: %s", tx_last_error());
    return TX_OK;
}

/* ---- jobs ----------------------------------------------------------------- */

tx_job_t *rt_graph_next_job(struct gctx *g)
{
    if (g->njobs == g->cap_jobs) {
        int cap = g->cap_jobs ? g->cap_jobs * 2 : 16;
        tx_job_t *j = realloc(g->jobs, sizeof(*j) * (size_t)cap);
        if (j)
            g->jobs = j;
        char *w = j ? realloc(g->waited, (size_t)cap) : NULL;
        if (!j || !w) {
            tx_error(TX_ENOMEM, "forward: out of memory");
            return NULL;
        }
        g->waited = w;
        g->cap_jobs = cap;
    }
    return &g->jobs[g->njobs];
}

void rt_graph_job_added(struct gctx *g)
{
    g->waited[g->njobs] = 0;
    if (!g->njobs)
        g->t_first_submit = tx_now_ns();
    g->njobs++;
}

/* Submit the current job if it is getting large (jobs of a queue run in
 * order, so the pass may span several). */
static void maybe_flush(struct gctx *g, int force)
{
    if (g->rc)
        return;
    size_t bytes = 0;
    tx_cmdbuf_size(g->cb, &bytes, NULL);
    size_t lim = g->m->dinfo.max_cmd_size ? g->m->dinfo.max_cmd_size : (1u << 20);
    if (!force && bytes < lim / 2)
        return;
    if (!g->ncmd)
        return;
    if (g->dg_cmp) {
        /* verifying the decode graph: this job against its patched one */
        g->rc = rt_dgraph_compare(g);
        tx_cmdbuf_reset(g->cb);
        g->ncmd = 0;
        if (!g->rc)
            g->rc = declare(g);
        return;
    }
    tx_job_t *job = rt_graph_next_job(g);
    if (!job) {
        g->rc = TX_ENOMEM;
        return;
    }
    int rc = g->dg ? rt_dgraph_job(g, job)
                   : tx_submit_ex(g->m->dev, g->cb, g->m->submit_flags, 0, job);
    if (rc) {
        g->rc = tx_error(rc, "forward: submit: %s", tx_last_error());
        return;
    }
    rt_graph_job_added(g);
    tx_cmdbuf_reset(g->cb);
    g->ncmd = 0;
    g->rc = declare(g);
}

/* Wait for job i of the pass (once), accumulating its figures. */
int rt_graph_wait_job(struct gctx *g, int i)
{
    if (i < 0 || i >= g->njobs || g->waited[i])
        return TX_OK;
    struct tx_job_result r;
    int rc = tx_wait(g->m->dev, g->jobs[i], -1, &r);
    g->waited[i] = 1;
    if (rc == TX_OK || rc == TX_EJOB) {
        g->acc->busy_ns += r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
        g->acc->macs += r.macs;
    }
    if (rc && !g->first_err) {
        if (rc == TX_EJOB)
            g->first_err = tx_error(TX_EJOB,
                                    "forward: device job %d of %d failed: %s at command %u "
                                    "(fault address 0x%llx)",
                                    i + 1, g->njobs, tx_job_status_str(r.status), r.fault_cmd,
                                    (unsigned long long)r.fault_addr);
        else
            g->first_err = tx_error(rc, "forward: wait: %s", tx_last_error());
    }
    return rc;
}

static int wait_all(struct gctx *g)
{
    for (int i = 0; i < g->njobs; i++)
        rt_graph_wait_job(g, i);
    return g->first_err;
}

int rt_graph_flush(struct gctx *g)
{
    maybe_flush(g, 1);
    return g->rc;
}

int rt_graph_wait(struct gctx *g)
{
    return wait_all(g);
}

int rt_graph_sync(struct gctx *g)
{
    maybe_flush(g, 1);
    if (g->rc)
        return g->rc;
    return wait_all(g);
}

static void layer_stats(const float *x, uint64_t n, double *mean, double *sd, double *mx)
{
    double s = 0, s2 = 0, m = 0;
    for (uint64_t i = 0; i < n; i++) {
        double v = x[i];
        s += v;
        s2 += v * v;
        if (fabs(v) > m)
            m = fabs(v);
    }
    *mean = n ? s / (double)n : 0;
    double var = n ? s2 / (double)n - *mean * *mean : 0;
    *sd = var > 0 ? sqrt(var) : 0;
    *mx = m;
}

static int forward_pass(glm_model_t *m, struct rt_fwd *f);

/* The profiler's KV counters after pass f (model lock held): "KV cache
 * used", the bytes the cached positions of all live sessions occupy (the
 * pass's positions included: its sessions advance after it), and "KV cache
 * allocated", the sessions' KV BOs. */
static void kv_counters(glm_model_t *m, const struct rt_fwd *f)
{
    const struct glm_config *c = &m->cfg;
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    if (!arch)
        return;
    double used = 0, alloc = 0;
    for (int i = 0; i < m->n_sessions; i++) {
        const glm_session_t *s = m->sessions[i];
        int pos = s->pos;
        for (int j = 0; j < f->n_seg; j++)
            if (f->seg[j].s == s && f->seg[j].pos0 + f->seg[j].n > pos)
                pos = f->seg[j].pos0 + f->seg[j].n;
        /* bytes per position, all layers, in the session's cache types
         * (block types: whole blocks of a row) */
        uint64_t bpp = 0;
        for (int l = 0; l < c->num_hidden_layers; l++) {
            struct tx_arch_kv kv;
            arch->kv_geometry(c, l, &kv);
            bpp += tx_dtype_row_bytes(s->kv_dtype, kv.k) + tx_dtype_row_bytes(s->v_dtype, kv.v);
            if (kv.ik)
                bpp += tx_dtype_row_bytes(s->ik_dtype, kv.ik);
        }
        used += (double)pos * (double)bpp;
        alloc += (double)s->kv_size;
    }
    tx_profile_counter("KV cache used", used);
    tx_profile_counter("KV cache allocated", alloc);
}

/* One pass, a host span "prefill" or "decode step" and the KV counters
 * when profiling. */
int rt_forward(glm_model_t *m, struct rt_fwd *f)
{
    uint64_t t0 = txp_begin();
    int rc = forward_pass(m, f);
    int prefill = 0;
    for (int i = 0; i < f->n_seg; i++)
        prefill |= f->seg[i].n > 1;
    txp_end(prefill ? "prefill" : "decode step", t0);
    if (t0 && !rc) {
        uint64_t t = tx_profile_now();
        kv_counters(m, f);
        txp_self_since(t);
    }
    return rc;
}

static int history_len(const struct glm_sampling *sp)
{
    return sp->repeat_last_n < 0 ? GLM_MAX_REPEAT_LAST_N : sp->repeat_last_n;
}

/* The sampling of logits row r: its glm_sampling (one per row, per
 * session, or one for all) and the segment whose next position it samples:
 * the one holding activation row lrow0 + r (a mixed decode + prefill pass
 * has more segments than logits rows) */
static const struct glm_sampling *row_sampling(const struct rt_fwd *f, int r,
                                               const struct rt_seg **sg)
{
    if (f->row_seg) { /* a verify pass: given per row */
        *sg = &f->seg[f->row_seg[r]];
        return f->sampling + (f->n_sampling > 1 ? r : 0);
    }
    int row = f->lrow0 + r;
    *sg = &f->seg[0];
    for (int i = 0; i < f->n_seg; i++)
        if (row >= f->seg[i].row0 && row < f->seg[i].row0 + f->seg[i].n) {
            *sg = &f->seg[i];
            break;
        }
    return f->sampling + (f->n_sampling > 1 ? r : 0);
}

/* The position after logits row r: after its segment's last (a segment
 * samples its next token), or after the row's own (a verify pass) */
static int row_end(const struct rt_fwd *f, const struct rt_seg *sg, int r)
{
    if (f->row_pos)
        return sg->pos0 + (f->lrow0 + r - sg->row0) + 1;
    return sg->pos0 + sg->n;
}

/* The penalties' history of row r: the session's last repeat_last_n ids
 * written into the activation buffer (host data, also when the decode
 * graph runs); returns the ids (0: no penalty history) */
static uint32_t sample_history(struct gctx *g, int r)
{
    const struct rt_seg *sg;
    const struct glm_sampling *sp = row_sampling(g->f, r, &sg);
    int pen = (sp->repeat_penalty != 0.0f && sp->repeat_penalty != 1.0f) ||
              sp->presence_penalty != 0.0f || sp->frequency_penalty != 0.0f;
    if (!pen || sp->repeat_last_n == 0 || !sg->s || !sg->s->toks)
        return 0;
    int end = row_end(g->f, sg, r), nl = history_len(sp);
    int from = end - nl > 0 ? end - nl : 0;
    int32_t *h = (int32_t *)((uint8_t *)g->m->act_map + g->a.hist +
                             (uint64_t)r * GLM_MAX_REPEAT_LAST_N * 4);
    /* the ids of this pass are in toks already */
    memcpy(h, sg->s->toks + from, (size_t)(end - from) * 4);
    return (uint32_t)(end - from);
}

/* SAMPLE of logits row r (after the logit bias) */
static void build_sample(struct gctx *g, int r)
{
    glm_model_t *m = g->m;
    const struct rt_fwd *f = g->f;
    int Vv = g->c->vocab_size;
    const struct rt_seg *sg;
    const struct glm_sampling *sp = row_sampling(f, r, &sg);
    struct tx_sample_args s;
    memset(&s, 0, sizeof(s));
    s.out = blk_act(g, g->a.tok + (uint64_t)r * 4);
    s.logits = blk_act(g, g->a.logits + (uint64_t)r * Vv * 4);
    s.probs = blk_act(g, g->a.prob + (uint64_t)r * 4);
    s.seed = sp->seed;
    /* counter: the position the sampled token will take */
    s.counter = (uint64_t)row_end(f, sg, r);
    s.rows = 1;
    /* the padding rows of lm_head (ids the tokenizer does not have) are
     * never candidates */
    s.vocab = (uint32_t)rt_sample_vocab(m);
    s.ld_logits = (uint32_t)Vv;
    /* rt_sampling_check refused what the device cannot do; greedy ignores
     * top-k and top-p */
    int greedy = !(sp->temperature > 0.0f);
    s.top_k = !greedy && sp->top_k > 0 ? (uint32_t)sp->top_k : 0;
    s.temperature = greedy ? 0.0f : sp->temperature;
    s.top_p = greedy ? 1.0f : sp->top_p;
    s.min_p = greedy ? 0.0f : sp->min_p;
    s.flags = !greedy && sp->order == GLM_SAMPLER_ORDER_LLAMA && sp->temperature != 1.0f
                  ? TX8_SAMPLE_F_TEMP_LAST
                  : 0;
    /* penalties: the session's last repeat_last_n ids */
    s.n_history = sample_history(g, r);
    if (s.n_history) {
        s.history = blk_act(g, g->a.hist + (uint64_t)r * GLM_MAX_REPEAT_LAST_N * 4);
        s.repeat_penalty = sp->repeat_penalty;
        s.presence_penalty = sp->presence_penalty;
        s.frequency_penalty = sp->frequency_penalty;
    }
    /* logit bias -inf (GLM_GEN_IGNORE_EOS): written into the row on the
     * device before SAMPLE reads it */
    for (int b = 0; b < f->n_ban && !g->rc; b++) {
        if (f->ban[b] < 0 || f->ban[b] >= Vv)
            continue;
        uint64_t at = g->a.logits + ((uint64_t)r * Vv + (uint64_t)f->ban[b]) * 4;
        blk_emit(g, tx_cmd_fill(g->cb, blk_act(g, at), 4, 0xff800000u /* -inf */));
    }
    blk_dbg(g, "SAMPLE row %d temp=%g top_k=%u top_p=%g seed=%llu counter=%llu", r,
            (double)s.temperature, s.top_k, (double)s.top_p, (unsigned long long)s.seed,
            (unsigned long long)s.counter);
    /* the session's allowed-token mask (grammar sampling): copied into the
     * activation buffer, read by SAMPLE (interface 1.9) */
    uint32_t words = rt_token_mask_words(m);
    tx_ref_t allow = {0};
    if (sg->s && sg->s->allow) {
        uint64_t off = g->a.allow + (uint64_t)r * words * 4;
        memcpy((uint8_t *)m->act_map + off, sg->s->allow, (size_t)words * 4);
        allow = blk_act(g, off);
    }
    size_t at = rt_dg_mark(g);
    if (blk_emit(g, txd_cmd_sample_allow(g->cb, &s, allow, sg->s && sg->s->allow ? words : 0)))
        return;
    rt_dg_field(g, sg, at, offsetof(struct tx8_cmd_sample, counter), 8, 1);
    if (s.n_history)
        rt_dg_clamped(g, sg, at, offsetof(struct tx8_cmd_sample, n_history), 4,
                      row_end(f, sg, r) - sg->pos0, (uint64_t)history_len(sp));
}

static void build_input(struct gctx *g);
static void build_mtp_tail(struct gctx *g, const struct tx_arch_ops *arch);

/* Build the commands of pass g->f and submit them as one or more jobs. */
static int build_pass(struct gctx *g, const struct tx_arch_ops *arch, int decode, int want_dump)
{
    glm_model_t *m = g->m;
    const struct glm_config *c = g->c;
    struct rt_fwd *f = g->f;
    int L = c->num_hidden_layers, D = c->hidden_size, Vv = c->vocab_size, T = f->T;
    float eps = (float)c->rms_norm_eps;
    int rc;

    rc = tx_cmdbuf_create(m->dev, &g->cb);
    if (rc)
        return tx_error(rc, "forward: %s", tx_last_error());
    const struct rt_store_ops *ws = m->store;
    ws->pass_begin(m, T, decode);
    /* decode: layer 0 is submitted on its own, the device runs it while
     * the host builds the other layers (the one job per pass otherwise
     * waits for the whole build) */
    g->early_flush = decode && !ws->layer_jobs && !want_dump && c->num_hidden_layers > 1;
    g->rc = declare(g);
    for (int i = 0; i < f->n_seg && !g->rc; i++) {
        int r = tx_cmdbuf_use(g->cb, f->seg[i].s->kv_bo, TX_ACCESS_RW);
        if (r)
            g->rc = tx_error(r, "forward: %s", tx_last_error());
    }
    if (g->dbg)
        rt_debug("forward: %d rows in %d segment(s), %d logits rows, plan %s", T, f->n_seg,
                 f->lrows, plan_short(g->plan, (char[160]){0}, 160));

    /* embedding (and the MTP layer's input) */
    build_input(g);
    for (int l = f->mtp ? L : 0; l < (f->mtp ? L + 1 : L) && !g->rc; l++) {
        g->rc = ws->layer_enter(g, l);
        if (g->rc)
            break;
        arch->layer(g, l);
        if (want_dump && !g->rc) {
            blk_dbg(g, "COPY layer %d output -> dump", l);
            int r = tx_cmd_copy(g->cb, blk_act(g, g->a.dump + (uint64_t)l * T * D * 4),
                                blk_act(g, g->a.h), (uint64_t)T * D * 4);
            if (r)
                g->rc = tx_error(r, "forward: %s", tx_last_error());
            g->ncmd++;
            g->total++;
        }
        if (ws->layer_jobs && l < L - 1 && !f->mtp) {
            /* one job per layer: the next layer's reads overlap this job */
            maybe_flush(g, 1);
            if (!g->rc)
                g->rc = ws->layer_leave(g, l, l + 1);
        } else {
            maybe_flush(g, g->early_flush && l == 0);
        }
    }

    /* final norm: the logits rows (all rows when dumping) */
    int nr0 = want_dump ? 0 : f->lrow0, nrows = want_dump ? T : f->lrows;
    if (nrows > 0)
        blk_rmsnorm(g, g->a.xn + (uint64_t)nr0 * D * 4, g->a.h + (uint64_t)nr0 * D * 4,
                    f->mtp ? rt_vec_of(m, GLM_T_MTP_HEAD_NORM, L)
                           : rt_vec_of(m, GLM_T_FINAL_NORM, -1),
                    nrows, D, D, D, eps);
    if (want_dump && !g->rc) {
        int r = tx_cmd_copy(g->cb, blk_act(g, g->a.dump + (uint64_t)L * T * D * 4),
                            blk_act(g, g->a.xn), (uint64_t)T * D * 4);
        if (r)
            g->rc = tx_error(r, "forward: %s", tx_last_error());
        g->ncmd++;
        g->total++;
    }
    if (f->lrows > 0) {
        int head = rt_mat_of(m, GLM_T_LM_HEAD, -1);
        if (f->mtp && rt_mat_of(m, GLM_T_MTP_HEAD, L) != RT_NONE)
            head = rt_mat_of(m, GLM_T_MTP_HEAD, L); /* shared_head.head */
        blk_matmul(g, g->a.logits, g->a.xn + (uint64_t)f->lrow0 * D * 4, head, f->lrows, D, Vv,
                   RT_NONE, 0, NULL);
        for (int r = 0; f->sampling && r < f->lrows && !g->rc; r++)
            build_sample(g, r);
    }
    if (f->mtp_tail && !g->rc)
        build_mtp_tail(g, arch);
    maybe_flush(g, 1);
    if (!g->rc)
        g->rc = ws->layer_leave(g, L - 1, L > 1 ? 0 : -1); /* layer 0 of the next pass */
    return TX_OK;
}

/* EMBED of the pass's ids into h; for an MTP pass (g->f->mtp) then
 * h = eh_proj([enorm(embed(next)) | hnorm(h_main)]) */
static void build_input(struct gctx *g)
{
    glm_model_t *m = g->m;
    const struct glm_config *c = g->c;
    struct rt_fwd *f = g->f;
    int L = c->num_hidden_layers, D = c->hidden_size, T = f->T;
    if (!g->rc) {
        struct tx_embed_args e;
        struct tx_weight_ref w;
        memset(&e, 0, sizeof(e));
        int em = rt_mat_of(m, GLM_T_EMBED, -1);
        if (f->mtp && rt_mat_of(m, GLM_T_MTP_EMBED, L) != RT_NONE)
            em = rt_mat_of(m, GLM_T_MTP_EMBED, L);
        g->rc = rt_weight_ref(m, em, g->plan->precision[GLM_EMBEDDING], &w);
        if (!g->rc) {
            e.out = blk_act(g, g->a.h);
            e.ids = blk_act(g, g->a.ids);
            e.table = w.data;
            e.scales = w.scales;
            e.tokens = (uint32_t)T;
            e.vocab = w.rows;
            e.dim = w.cols;
            e.ld_out = (uint32_t)D;
            e.dtype = w.dtype;
            blk_dbg(g, "EMBED tokens=%d vocab=%u dim=%u table=%s", T, w.rows, w.cols,
                    tx_dtype_name(w.dtype));
            int r = tx_cmd_embed(g->cb, &e);
            if (r)
                g->rc = tx_error(r, "forward: embed: %s", tx_last_error());
            g->ncmd++;
            g->total++;
        }
    }

    float eps = (float)c->rms_norm_eps;
    /* an MTP pass: h = eh_proj([enorm(embed(next)) | hnorm(h_main)]), then
     * the MTP layer (layer L) alone */
    if (f->mtp) {
        blk_rmsnorm(g, g->a.mtp_cat, g->a.h, rt_vec_of(m, GLM_T_MTP_ENORM, L), T, D, D, 2 * D,
                    eps);
        blk_rmsnorm(g, g->a.mtp_cat + (uint64_t)D * 4, g->a.mtp_hin,
                    rt_vec_of(m, GLM_T_MTP_HNORM, L), T, D, D, 2 * D, eps);
        blk_matmul(g, g->a.h, g->a.mtp_cat, rt_mat_of(m, GLM_T_MTP_EH_PROJ, L), T, 2 * D, D,
                   RT_NONE, 0, NULL);
    }
}

/* A verify pass with the MTP layer after it (f->mtp_tail, runtime/spec.c):
 * in the same job, the MTP layer over the same rows -- row i's next id is
 * the token row i sampled, its hidden row the main model's last-layer row
 * (device copies a.tok -> a.ids, a.h -> a.mtp_hin) -- writing its own
 * cache at the rows' positions and drafting greedily into a.tok. The main
 * rows' tokens are then in a.ids, their hidden rows in a.mtp_hin. */
static void build_mtp_tail(struct gctx *g, const struct tx_arch_ops *arch)
{
    glm_model_t *m = g->m;
    struct rt_fwd *f = g->f;
    int L = g->c->num_hidden_layers, D = g->c->hidden_size, T = f->T;
    static const struct glm_sampling greedy = {0};
    blk_dbg(g, "COPY sampled ids -> ids, hidden rows -> MTP input (verify pass + MTP layer)");
    if (blk_emit(g, tx_cmd_copy(g->cb, blk_act(g, g->a.ids), blk_act(g, g->a.tok),
                                (uint64_t)T * 4)) ||
        blk_emit(g, tx_cmd_copy(g->cb, blk_act(g, g->a.mtp_hin), blk_act(g, g->a.h),
                                (uint64_t)T * D * 4)))
        return;
    /* the MTP layer's pass over the same rows: drafts greedy, no logit
     * bias, no penalties (the pass's own figures are added back) */
    struct rt_fwd tf = *f;
    tf.mtp = 1;
    tf.sampling = &greedy;
    tf.n_sampling = 1;
    tf.ban = NULL;
    tf.n_ban = 0;
    tf.row_seg = NULL;
    tf.row_pos = 0;
    g->f = &tf;
    build_input(g);
    if (!g->rc)
        g->rc = m->store->layer_enter(g, L);
    if (!g->rc)
        arch->layer(g, L);
    maybe_flush(g, 0);
    blk_rmsnorm(g, g->a.xn, g->a.h, rt_vec_of(m, GLM_T_MTP_HEAD_NORM, L), T, D, D, D,
                (float)g->c->rms_norm_eps);
    int head = rt_mat_of(m, GLM_T_LM_HEAD, -1);
    if (rt_mat_of(m, GLM_T_MTP_HEAD, L) != RT_NONE)
        head = rt_mat_of(m, GLM_T_MTP_HEAD, L);
    blk_matmul(g, g->a.logits, g->a.xn, head, T, D, g->c->vocab_size, RT_NONE, 0, NULL);
    for (int r = 0; r < T && !g->rc; r++)
        build_sample(g, r);
    g->f = f;
    f->attn_pairs = tf.attn_pairs;
    f->attn_pairs_dense = tf.attn_pairs_dense;
}

static int forward_pass(glm_model_t *m, struct rt_fwd *f)
{
    const struct glm_config *c = &m->cfg;
    glm_precision_plan_t plan;
    int L = c->num_hidden_layers, D = c->hidden_size, Vv = c->vocab_size, T = f->T;
    int rc;

    uint64_t t_enter = tx_now_ns(), busy0 = f->busy_ns;
    int decode = f->n_seg > 0;
    for (int i = 0; i < f->n_seg; i++)
        decode &= f->seg[i].n == 1;
    rt_plan_of(m->dev, &plan, NULL);
    rc = rt_prepare_plan(m, &plan);
    if (rc)
        return rc;
    for (int i = 0; i < f->n_seg; i++) {
        glm_session_t *ss = f->seg[i].s;
        uint16_t dt[3];
        rt_session_kv_types(ss, &plan, dt);
        if (ss->kv_dtype != dt[0] || ss->v_dtype != dt[1] || ss->ik_dtype != dt[2]) {
            rc = rt_session_kv_convert(ss, dt);
            if (rc)
                return rc;
        }
    }
    if ((f->mtp || f->mtp_tail) && !m->mtp)
        return tx_error(TX_EINVAL, "internal: an MTP pass without the MTP layer");
    if (f->mtp_tail && (f->mtp || f->n_seg != 1 || f->lrow0 || f->lrows != T || !f->sampling))
        return tx_error(TX_EINVAL, "internal: an MTP tail needs one segment, every row sampled");
    int want_dump = !f->mtp && !f->mtp_tail && (f->dump != NULL || rt_debug_on());

    struct gctx g;
    memset(&g, 0, sizeof(g));
    g.m = m;
    g.c = c;
    g.plan = &plan;
    g.f = f;
    g.dbg = rt_debug_on();
    g.prof = tx_profile_enabled();
    g.acc = f;
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    if (!arch)
        return tx_error(TX_EINVAL, "forward: unknown architecture %d", (int)c->arch);
    rt_attn_mask_prepare(f);
    rt_act_layout(m, arch, f, T, f->lrows, want_dump, &g.a);
    rc = rt_ensure_act(m, g.a.total);
    if (rc)
        return rc;
    g.act = m->act_bo;

    /* inputs through the mapping */
    int32_t *ids = (int32_t *)((uint8_t *)m->act_map + g.a.ids);
    int32_t *pos = (int32_t *)((uint8_t *)m->act_map + g.a.pos);
    memcpy(ids, f->ids, (size_t)T * 4);
    for (int i = 0; i < f->n_seg; i++)
        for (int t = 0; t < f->seg[i].n; t++)
            pos[f->seg[i].row0 + t] = f->seg[i].pos0 + t;
    if (f->mtp)
        memcpy((uint8_t *)m->act_map + g.a.mtp_hin, f->hin, (size_t)T * D * 4);
    rt_attn_mask_fill(&g);

    /* a decode pass of the sessions and plan the decode graph was recorded
     * for runs it patched (runtime/decode_graph.c); another one is built and
     * recorded */
    /* and so do speculative decoding's passes (verify, MTP: a few rows) */
    int spec_pass = f->row_pos || f->mtp || f->mtp_tail;
    for (int i = 0; i < f->n_seg; i++)
        spec_pass &= f->seg[i].n <= GLM_SPEC_MAX_DRAFT + 1;
    int use_dg = (decode || spec_pass) && m->dg_mode != RT_DG_OFF && m->store->decode_graph &&
                 !want_dump && !g.prof && !g.a.xkeys && !rt_fwd_has_token_mask(f) &&
                 !g.a.amask_ld;
    int replayed = 0;
    if (use_dg) {
        rc = rt_dgraph_replay(&g, &replayed);
        if (rc)
            return rc;
        if (!replayed && !g.dg_cmp)
            rt_dgraph_begin(&g);
    }
    if (replayed) {
        for (int r = 0; f->sampling && r < f->lrows; r++)
            sample_history(&g, r);
    } else {
        rc = build_pass(&g, arch, decode, want_dump);
        if (rc) {
            rt_dgraph_end(&g, 0);
            return rc;
        }
        if (g.dg_cmp && !g.rc)
            g.rc = rt_dgraph_compare_end(&g);
        if (g.dg_cmp && !g.rc)
            g.rc = rt_dgraph_submit(&g, &replayed);
    }
    rc = wait_all(&g);
    if (g.rc && !rc)
        rc = g.rc;
    rt_dgraph_end(&g, !rc);
    free(g.jobs);
    free(g.waited);
    if (g.cb)
        tx_cmdbuf_destroy(g.cb);
    if (rc)
        return rc;

    m->forwards++;
    uint64_t t_done = tx_now_ns();
    struct rt_pass_times *pt = decode ? &m->dec : &m->pre;
    pt->passes++;
    pt->jobs += (uint64_t)g.njobs;
    pt->wall_ns += t_done - t_enter;
    pt->build_ns += g.t_first_submit > t_enter ? g.t_first_submit - t_enter : 0;
    pt->device_ns += f->busy_ns - busy0;
    /* with an MTP tail: the main rows' hidden rows and tokens where the
     * tail copied them, its own rows' and drafts where they were made */
    const uint8_t *am = (const uint8_t *)m->act_map;
    if (f->hout)
        memcpy(f->hout, am + (f->mtp_tail ? g.a.mtp_hin : g.a.h), (size_t)T * D * 4);
    if (f->mtp_tail) {
        if (f->mtp_hout)
            memcpy(f->mtp_hout, am + g.a.h, (size_t)T * D * 4);
        if (f->mtp_sampled)
            memcpy(f->mtp_sampled, am + g.a.tok, (size_t)T * 4);
    }
    if (f->probs && f->sampling)
        memcpy(f->probs, am + g.a.prob, (size_t)f->lrows * 4);
    if (f->logits && f->lrows)
        memcpy(f->logits, (uint8_t *)m->act_map + g.a.logits, (size_t)f->lrows * Vv * 4);
    for (int r = 0; f->row_logits && r < f->lrows; r++)
        if (f->row_logits[r])
            memcpy(f->row_logits[r], (uint8_t *)m->act_map + g.a.logits + (uint64_t)r * Vv * 4,
                   (size_t)Vv * 4);
    if (f->sampled && f->sampling)
        memcpy(f->sampled, am + (f->mtp_tail ? g.a.ids : g.a.tok), (size_t)f->lrows * 4);
    if (want_dump) {
        const float *d = (const float *)((uint8_t *)m->act_map + g.a.dump);
        if (f->dump)
            memcpy(f->dump, d, (size_t)(L + 1) * T * D * 4);
        if (f->dump_rid && g.a.dump_rid)
            memcpy(f->dump_rid, (uint8_t *)m->act_map + g.a.dump_rid,
                   (size_t)m->n_moe_layers * T * c->num_experts_per_tok * 4);
        if (f->dump_sel && g.a.dump_sel)
            memcpy(f->dump_sel, (uint8_t *)m->act_map + g.a.dump_sel,
                   (size_t)L * T * arch->select_k(c) * 4);
        if (g.dbg) {
            for (int l = 0; l <= L; l++) {
                double mean, sd, mx;
                layer_stats(d + (uint64_t)l * T * D, (uint64_t)T * D, &mean, &sd, &mx);
                fprintf(stderr, "glm: layer %3d%s mean %+.6f std %.6f max|x| %.6f\n", l,
                        l == L ? " (final norm)" : "", mean, sd, mx);
            }
        }
    }
    rt_moe_after_pass(m, T);
    if (g.dbg)
        rt_debug("forward: %u commands in %d job(s), wall %.3f ms (host until the first "
                 "submission %.3f ms), device %.3f ms, %llu MACs; attention (query, key) pairs "
                 "executed %llu of %llu dense causal (%.1f%%)",
                 g.total, g.njobs, (double)(t_done - t_enter) / 1e6,
                 g.t_first_submit > t_enter ? (double)(g.t_first_submit - t_enter) / 1e6 : 0.0,
                 (double)(f->busy_ns - busy0) / 1e6, (unsigned long long)f->macs,
                 (unsigned long long)f->attn_pairs, (unsigned long long)f->attn_pairs_dense,
                 f->attn_pairs_dense ? 100.0 * (double)f->attn_pairs / (double)f->attn_pairs_dense
                                     : 100.0);
    return TX_OK;
}

static int pass_times(glm_model_t *m, struct glm_decode_times *out, int decode, const char *fn)
{
    if (!m || !out)
        return tx_error(TX_EINVAL, "%s: NULL model or result", fn);
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&m->lock);
    const struct rt_pass_times *pt = decode ? &m->dec : &m->pre;
    out->passes = pt->passes;
    out->jobs = pt->jobs;
    out->wall_ms = (double)pt->wall_ns / 1e6;
    out->build_ms = (double)pt->build_ns / 1e6;
    out->device_ms = (double)pt->device_ns / 1e6;
    out->replays = pt->replays;
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}

TX_API int glm_model_decode_times(glm_model_t *m, struct glm_decode_times *out)
{
    return pass_times(m, out, 1, "glm_model_decode_times");
}

TX_API int glm_model_prefill_times(glm_model_t *m, struct glm_decode_times *out)
{
    return pass_times(m, out, 0, "glm_model_prefill_times");
}
