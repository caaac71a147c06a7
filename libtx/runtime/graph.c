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
 * Glm4MoeForCausalLM layer
 *   xn = RMSNorm(h); q,k,v = xn W^T + b; per-head RMSNorm of q,k (use_qk_norm);
 *   RoPE (NeoX, first rotary_dim dims); K,V -> cache; ATTENTION (GQA);
 *   h += o_proj(attn); xn = RMSNorm(h); h += MLP or MoE(xn)
 * GlmMoeDsaForCausalLM layer (MLA + DSA)
 *   qa = RMSNorm(q_a_proj(xn)); q = q_b_proj(qa), RoPE on the rope slice;
 *   ckv = kv_a_proj(xn) = [latent | k_rope]; latent RMSNorm, RoPE on k_rope;
 *   kvb = kv_b_proj(latent) -> K_h = [k_nope_h | k_rope], V_h into the cache;
 *   indexer: ki = LayerNorm(wk xn), RoPE; qi = wq_b(qa), RoPE;
 *   w = weights_proj(xn) * n_heads^-0.5 * head_dim^-0.5; DSA_INDEX keeps the
 *   top index_topk keys (skipped when every visible key fits: dense);
 *   ATTENTION with the selection; h += o_proj(attn); FFN as above.
 * MoE: router MATMUL in FP32, MOE_ROUTE (sigmoid, correction bias, group
 * limit, top-k, normalise, scale; live counts; optional load penalty),
 * MOE_FFN accumulating into h, shared expert as a SwiGLU MLP.
 */
#include "runtime/rt_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_dtype.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))
#define MLA_NORM_EPS 1e-6f     /* q_a_layernorm / kv_a_layernorm (DeepseekV3RMSNorm) */
#define INDEXER_NORM_EPS 1e-6f /* indexer.k_norm (nn.LayerNorm eps=1e-6) */

/* Offsets of the activation buffers of a pass. */
struct act_layout {
    uint64_t ids, pos, h, xn, r16;
    uint64_t q, k, v, ao;                   /* glm4 */
    uint64_t qa, ckv, kvb, qi, ki, iw, sel; /* dsa (q, ao shared) */
    uint64_t g, u, a;                       /* MLP */
    uint64_t rl, rid, rw;                   /* MoE */
    uint64_t logits, tok, prob, hist;
    uint64_t dump, dump_rid, dump_sel;
    uint64_t total;
};

struct gctx {
    glm_model_t *m;
    const struct glm_config *c;
    const glm_precision_plan_t *plan;
    tx_cmdbuf_t *cb;
    struct rt_fwd *f;
    struct act_layout a;
    tx_bo_t *act;
    int dbg;
    unsigned ncmd;  /* commands in the current job */
    unsigned total; /* commands of the pass */
    tx_job_t *jobs; /* submitted jobs of the pass */
    char *waited;
    int njobs, cap_jobs;
    int first_err;
    struct rt_fwd *acc;
    int rc;
};

static uint64_t take(uint64_t *off, uint64_t bytes)
{
    uint64_t o = ALIGN_UP(*off, 256);
    *off = o + bytes;
    return o;
}

static int max_i(int a, int b)
{
    return a > b ? a : b;
}

static void layout(const glm_model_t *m, int T, int R, int dump, struct act_layout *a)
{
    const struct glm_config *c = &m->cfg;
    uint64_t o = 0, t = (uint64_t)T;
    int D = c->hidden_size;
    memset(a, 0, sizeof(*a));
    a->ids = take(&o, t * 4);
    a->pos = take(&o, t * 4);
    a->h = take(&o, t * D * 4);
    a->xn = take(&o, t * D * 4);
    int nd = D;
    if (c->arch == GLM_ARCH_GLM4_MOE) {
        int hd = c->head_dim, Hq = c->num_attention_heads, Hk = c->num_key_value_heads;
        a->q = take(&o, t * Hq * hd * 4);
        a->k = take(&o, t * Hk * hd * 4);
        a->v = take(&o, t * Hk * hd * 4);
        a->ao = take(&o, t * Hq * hd * 4);
        nd = max_i(nd, Hq * hd);
    } else {
        int H = c->num_attention_heads, qk = c->qk_head_dim, nope = c->qk_nope_head_dim,
            vd = c->v_head_dim, lora = c->kv_lora_rank, rope = c->qk_rope_head_dim;
        a->qa = take(&o, t * c->q_lora_rank * 4);
        a->q = take(&o, t * H * qk * 4);
        a->ckv = take(&o, t * (lora + rope) * 4);
        a->kvb = take(&o, t * H * (nope + vd) * 4);
        a->ao = take(&o, t * H * vd * 4);
        a->qi = take(&o, t * c->index_n_heads * c->index_head_dim * 4);
        a->ki = take(&o, t * c->index_head_dim * 4);
        a->iw = take(&o, t * c->index_n_heads * 4);
        a->sel = take(&o, t * (c->index_topk > 0 ? c->index_topk : 1) * 4);
        nd = max_i(nd, max_i(c->q_lora_rank, max_i(lora + rope, c->index_head_dim)));
    }
    a->r16 = take(&o, t * nd * 2);
    int F = max_i(c->intermediate_size, c->moe_intermediate_size * max_i(c->n_shared_experts, 1));
    a->g = take(&o, t * F * 4);
    a->u = take(&o, t * F * 4);
    a->a = take(&o, t * F * 4);
    int E = c->n_routed_experts > 0 ? c->n_routed_experts : 1;
    int K = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
    a->rl = take(&o, t * E * 4);
    a->rid = take(&o, t * K * 4);
    a->rw = take(&o, t * K * 4);
    uint64_t r = (uint64_t)(R > 0 ? R : 1);
    a->logits = take(&o, r * (uint64_t)c->vocab_size * 4);
    a->tok = take(&o, r * 4);
    a->prob = take(&o, r * 4);
    a->hist = take(&o, r * GLM_MAX_REPEAT_LAST_N * 4);
    a->dump = dump ? take(&o, (uint64_t)(c->num_hidden_layers + 1) * t * D * 4) : 0;
    a->dump_rid = dump ? take(&o, (uint64_t)m->n_moe_layers * t * K * 4) : 0;
    a->dump_sel = dump && c->arch == GLM_ARCH_GLM_MOE_DSA
                      ? take(&o, (uint64_t)c->num_hidden_layers * t * c->index_topk * 4)
                      : 0;
    a->total = ALIGN_UP(o, 4096);
}

static tx_ref_t A(struct gctx *g, uint64_t off)
{
    return tx_ref(g->act, off);
}

static tx_ref_t V(struct gctx *g, int vec)
{
    if (vec == RT_NONE)
        return tx_ref(NULL, 0);
    return tx_ref(g->m->meta_bo, g->m->vecs[vec].off);
}

/* Declare every weight BO of the model to the current job (MOE_FFN reaches
 * expert weights through its table). */
static int declare(struct gctx *g)
{
    glm_model_t *m = g->m;
    int rc = tx_cmdbuf_use(g->cb, m->w_bo, TX_ACCESS_READ);
    if (!rc)
        rc = tx_cmdbuf_use(g->cb, m->meta_bo, TX_ACCESS_RW);
    for (int lt = 0; lt < RT_NLTYPES && !rc; lt++)
        for (int p = 0; p < GLM_PRECISION_COUNT && !rc; p++)
            if (m->conv[lt][p].bo)
                rc = tx_cmdbuf_use(g->cb, m->conv[lt][p].bo, TX_ACCESS_READ);
    if (rc)
        return tx_error(rc, "forward: %s", tx_last_error());
    return TX_OK;
}

static void dbg(struct gctx *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dbg(struct gctx *g, const char *fmt, ...)
{
    if (!g->dbg)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "glm: cmd %4u ", g->total);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

#define EMIT(expr)                                                                                 \
    do {                                                                                           \
        if (g->rc)                                                                                 \
            return;                                                                                \
        int _r = (expr);                                                                           \
        if (_r) {                                                                                  \
            g->rc = tx_error(_r, "forward: building command %u: %s", g->total, tx_last_error());   \
            return;                                                                                \
        }                                                                                          \
        g->ncmd++;                                                                                 \
        g->total++;                                                                                \
    } while (0)

static glm_precision_t prec_of(struct gctx *g, int mat)
{
    int lt = g->m->mats[mat].ltype;
    return lt == RT_ROUTER ? FP32 : g->plan->precision[lt];
}

/* y[T x N] (+)= x W^T (+ bias) in the precision of W's layer type */
static void mm(struct gctx *g, uint64_t y, uint64_t x, int mat, int tokens, int ld_x, int ld_y,
               int bias, unsigned flags, tx_bo_t *ybo)
{
    if (g->rc)
        return;
    struct tx_matmul_args a;
    memset(&a, 0, sizeof(a));
    glm_precision_t p = prec_of(g, mat);
    int r = rt_weight_ref(g->m, mat, p, &a.w);
    if (r) {
        g->rc = r;
        return;
    }
    a.y = tx_ref(ybo ? ybo : g->act, y);
    a.x = A(g, x);
    a.tokens = (uint32_t)tokens;
    a.ld_x = (uint32_t)ld_x;
    a.ld_y = (uint32_t)ld_y;
    a.act_dtype = rt_prec_dtype(p);
    a.flags = (uint16_t)flags;
    if (bias != RT_NONE) {
        a.bias = V(g, bias);
        a.flags |= TX8_MATMUL_F_BIAS;
    }
    dbg(g, "MATMUL %-28s T=%d N=%u K=%u w=%s%s act=%s%s",
        g->m->tensors[g->m->mats[mat].t].info.name, tokens, a.w.rows, a.w.cols,
        tx_dtype_name(a.w.dtype), a.w.format == TX8_WFMT_BLOCK_SPARSE ? "/sparse" : "",
        tx_dtype_name(a.act_dtype), (flags & TX8_MATMUL_F_ACCUMULATE) ? " +=" : "");
    EMIT(tx_cmd_matmul(g->cb, &a));
}

/* Round rows x cols (stride ld) of f32 through the NORM precision. */
static void round_norm(struct gctx *g, uint64_t x, int rows, int cols, int ld)
{
    glm_precision_t p = g->plan->precision[GLM_NORM];
    if (p == FP32 || p == INT8_MIXED || g->rc)
        return;
    struct tx_convert_args c;
    memset(&c, 0, sizeof(c));
    c.dst = A(g, g->a.r16);
    c.src = A(g, x);
    c.rows = (uint32_t)rows;
    c.cols = (uint32_t)cols;
    c.ld_dst = (uint32_t)cols;
    c.ld_src = (uint32_t)ld;
    c.dst_dtype = rt_prec_dtype(p);
    c.src_dtype = TX8_DTYPE_F32;
    dbg(g, "CONVERT norm output %dx%d f32 -> %s -> f32", rows, cols, tx_dtype_name(c.dst_dtype));
    EMIT(tx_cmd_convert(g->cb, &c));
    c.dst = A(g, x);
    c.src = A(g, g->a.r16);
    c.ld_dst = (uint32_t)ld;
    c.ld_src = (uint32_t)cols;
    c.dst_dtype = TX8_DTYPE_F32;
    c.src_dtype = rt_prec_dtype(p);
    EMIT(tx_cmd_convert(g->cb, &c));
}

static void rmsnorm(struct gctx *g, uint64_t y, uint64_t x, int vec, int rows, int dim, int ld_x,
                    int ld_y, float eps)
{
    if (g->rc)
        return;
    struct tx_rmsnorm_args a;
    memset(&a, 0, sizeof(a));
    a.y = A(g, y);
    a.x = A(g, x);
    a.gamma = V(g, vec);
    a.rows = (uint32_t)rows;
    a.dim = (uint32_t)dim;
    a.ld_x = (uint32_t)ld_x;
    a.ld_y = (uint32_t)ld_y;
    a.eps = eps;
    dbg(g, "RMSNORM %-27s rows=%d dim=%d", g->m->tensors[g->m->vecs[vec].t].info.name, rows, dim);
    EMIT(tx_cmd_rmsnorm(g->cb, &a));
    round_norm(g, y, rows, dim, ld_y);
}

static void rope(struct gctx *g, tx_ref_t x, uint64_t pos, int tokens, int heads, int ld_token,
                 int ld_head, int offset, int rot, int interleaved)
{
    if (g->rc || rot <= 0)
        return;
    struct tx_rope_args a;
    memset(&a, 0, sizeof(a));
    a.x = x;
    a.pos = A(g, pos);
    a.inv_freq = tx_ref(g->m->meta_bo, g->m->inv_freq_off);
    a.tokens = (uint32_t)tokens;
    a.heads = (uint32_t)heads;
    a.ld_token = (uint32_t)ld_token;
    a.ld_head = (uint32_t)ld_head;
    a.offset = (uint32_t)offset;
    a.rot_dim = (uint32_t)rot;
    a.mode = interleaved ? TX8_ROPE_INTERLEAVED : TX8_ROPE_NEOX;
    dbg(g, "ROPE %s tokens=%d heads=%d offset=%d rot=%d", interleaved ? "interleaved" : "neox",
        tokens, heads, offset, rot);
    EMIT(tx_cmd_rope(g->cb, &a));
}

static void convert(struct gctx *g, tx_ref_t dst, tx_ref_t src, int rows, int cols, int ld_dst,
                    int ld_src, uint16_t ddt)
{
    if (g->rc)
        return;
    struct tx_convert_args c;
    memset(&c, 0, sizeof(c));
    c.dst = dst;
    c.src = src;
    c.rows = (uint32_t)rows;
    c.cols = (uint32_t)cols;
    c.ld_dst = (uint32_t)ld_dst;
    c.ld_src = (uint32_t)ld_src;
    c.dst_dtype = ddt;
    c.src_dtype = TX8_DTYPE_F32;
    EMIT(tx_cmd_convert(g->cb, &c));
}

static void swiglu_mlp(struct gctx *g, int wg, int wu, int wd, int T)
{
    const struct glm_config *c = g->c;
    int D = c->hidden_size;
    int F = (int)g->m->mats[wg].rows;
    mm(g, g->a.g, g->a.xn, wg, T, D, F, RT_NONE, 0, NULL);
    mm(g, g->a.u, g->a.xn, wu, T, D, F, RT_NONE, 0, NULL);
    if (g->rc)
        return;
    struct tx_swiglu_args s;
    memset(&s, 0, sizeof(s));
    s.y = A(g, g->a.a);
    s.gate = A(g, g->a.g);
    s.up = A(g, g->a.u);
    s.rows = (uint32_t)T;
    s.cols = (uint32_t)F;
    s.ld_y = s.ld_gate = s.ld_up = (uint32_t)F;
    dbg(g, "SWIGLU rows=%d cols=%d", T, F);
    EMIT(tx_cmd_swiglu(g->cb, &s));
    mm(g, g->a.h, g->a.a, wd, T, F, D, RT_NONE, TX8_MATMUL_F_ACCUMULATE, NULL);
}

static uint64_t kv_elem(const glm_session_t *s)
{
    return tx_dtype_size(s->kv_dtype);
}

/* ---- attention ---------------------------------------------------------- */

static void attn_glm4(struct gctx *g, int l)
{
    const struct glm_config *c = g->c;
    glm_model_t *m = g->m;
    struct rt_fwd *f = g->f;
    int T = f->T, D = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads,
        Hk = c->num_key_value_heads;
    int qw = Hq * hd, kw = Hk * hd;
    float eps = (float)c->rms_norm_eps;

    mm(g, g->a.q, g->a.xn, rt_mat_of(m, GLM_T_Q_PROJ, l), T, D, qw, rt_vec_of(m, GLM_T_Q_BIAS, l),
       0, NULL);
    mm(g, g->a.k, g->a.xn, rt_mat_of(m, GLM_T_K_PROJ, l), T, D, kw, rt_vec_of(m, GLM_T_K_BIAS, l),
       0, NULL);
    mm(g, g->a.v, g->a.xn, rt_mat_of(m, GLM_T_V_PROJ, l), T, D, kw, rt_vec_of(m, GLM_T_V_BIAS, l),
       0, NULL);
    if (c->use_qk_norm) {
        rmsnorm(g, g->a.q, g->a.q, rt_vec_of(m, GLM_T_Q_NORM, l), T * Hq, hd, hd, hd, eps);
        rmsnorm(g, g->a.k, g->a.k, rt_vec_of(m, GLM_T_K_NORM, l), T * Hk, hd, hd, hd, eps);
    }
    rope(g, A(g, g->a.q), g->a.pos, T, Hq, qw, hd, 0, c->rotary_dim, c->rope_interleave);
    rope(g, A(g, g->a.k), g->a.pos, T, Hk, kw, hd, 0, c->rotary_dim, c->rope_interleave);
    float scale = (float)glm_config_attn_scale(c);
    for (int si = 0; si < f->n_seg; si++) {
        struct rt_seg *sg = &f->seg[si];
        glm_session_t *s = sg->s;
        uint64_t es = kv_elem(s);
        tx_ref_t kc = tx_ref(s->kv_bo, s->k_off[l]), vc = tx_ref(s->kv_bo, s->v_off[l]);
        dbg(g, "CONVERT K,V -> cache layer %d pos %d..%d (%s)", l, sg->pos0, sg->pos0 + sg->n - 1,
            tx_dtype_name(s->kv_dtype));
        convert(g, tx_ref(s->kv_bo, s->k_off[l] + (uint64_t)sg->pos0 * kw * es),
                A(g, g->a.k + (uint64_t)sg->row0 * kw * 4), sg->n, kw, kw, kw, s->kv_dtype);
        convert(g, tx_ref(s->kv_bo, s->v_off[l] + (uint64_t)sg->pos0 * kw * es),
                A(g, g->a.v + (uint64_t)sg->row0 * kw * 4), sg->n, kw, kw, kw, s->kv_dtype);
        if (g->rc)
            return;
        struct tx_attention_args a;
        memset(&a, 0, sizeof(a));
        a.out = A(g, g->a.ao + (uint64_t)sg->row0 * qw * 4);
        a.q = A(g, g->a.q + (uint64_t)sg->row0 * qw * 4);
        a.k = kc;
        a.v = vc;
        a.tokens = (uint32_t)sg->n;
        a.q_heads = (uint32_t)Hq;
        a.kv_heads = (uint32_t)Hk;
        a.qk_dim = a.v_dim = (uint32_t)hd;
        a.kv_len = (uint32_t)(sg->pos0 + sg->n);
        a.q_pos0 = (uint32_t)sg->pos0;
        a.ld_q_head = a.ld_k_head = a.ld_v_head = a.ld_o_head = (uint32_t)hd;
        a.scale = scale;
        a.kv_dtype = s->kv_dtype;
        dbg(g, "ATTENTION layer %d tokens=%d heads=%d/%d kv_len=%u", l, sg->n, Hq, Hk, a.kv_len);
        EMIT(tx_cmd_attention(g->cb, &a));
    }
    mm(g, g->a.h, g->a.ao, rt_mat_of(m, GLM_T_O_PROJ, l), T, qw, D, rt_vec_of(m, GLM_T_O_BIAS, l),
       TX8_MATMUL_F_ACCUMULATE, NULL);
}

static void attn_dsa(struct gctx *g, int l)
{
    const struct glm_config *c = g->c;
    glm_model_t *m = g->m;
    struct rt_fwd *f = g->f;
    int T = f->T, D = c->hidden_size, H = c->num_attention_heads, qk = c->qk_head_dim,
        nope = c->qk_nope_head_dim, rope_d = c->qk_rope_head_dim, vd = c->v_head_dim,
        lora = c->kv_lora_rank, qr = c->q_lora_rank, Hi = c->index_n_heads, Di = c->index_head_dim,
        K = c->index_topk;
    int cw = lora + rope_d;
    int full = c->indexer_types[l] == GLM_INDEXER_FULL;

    mm(g, g->a.qa, g->a.xn, rt_mat_of(m, GLM_T_Q_A_PROJ, l), T, D, qr,
       rt_vec_of(m, GLM_T_Q_A_BIAS, l), 0, NULL);
    rmsnorm(g, g->a.qa, g->a.qa, rt_vec_of(m, GLM_T_Q_A_NORM, l), T, qr, qr, qr, MLA_NORM_EPS);
    mm(g, g->a.q, g->a.qa, rt_mat_of(m, GLM_T_Q_B_PROJ, l), T, qr, H * qk, RT_NONE, 0, NULL);
    rope(g, A(g, g->a.q), g->a.pos, T, H, H * qk, qk, nope, rope_d, c->rope_interleave);

    mm(g, g->a.ckv, g->a.xn, rt_mat_of(m, GLM_T_KV_A_PROJ, l), T, D, cw,
       rt_vec_of(m, GLM_T_KV_A_BIAS, l), 0, NULL);
    rmsnorm(g, g->a.ckv, g->a.ckv, rt_vec_of(m, GLM_T_KV_A_NORM, l), T, lora, cw, cw, MLA_NORM_EPS);
    rope(g, A(g, g->a.ckv), g->a.pos, T, 1, cw, cw, lora, rope_d, c->rope_interleave);
    mm(g, g->a.kvb, g->a.ckv, rt_mat_of(m, GLM_T_KV_B_PROJ, l), T, cw, H * (nope + vd), RT_NONE, 0,
       NULL);

    int need_index = 0;
    for (int si = 0; si < f->n_seg; si++)
        if (f->seg[si].pos0 + f->seg[si].n > K)
            need_index = 1;
    if (full) {
        mm(g, g->a.ki, g->a.xn, rt_mat_of(m, GLM_T_IDX_WK, l), T, D, Di, RT_NONE, 0, NULL);
        if (!g->rc) {
            struct tx_layernorm_args ln;
            memset(&ln, 0, sizeof(ln));
            ln.y = ln.x = A(g, g->a.ki);
            ln.gamma = V(g, rt_vec_of(m, GLM_T_IDX_K_NORM, l));
            ln.beta = V(g, rt_vec_of(m, GLM_T_IDX_K_NORM_BIAS, l));
            ln.rows = (uint32_t)T;
            ln.dim = ln.ld_x = ln.ld_y = (uint32_t)Di;
            ln.eps = INDEXER_NORM_EPS;
            dbg(g, "LAYERNORM indexer k_norm layer %d rows=%d dim=%d", l, T, Di);
            EMIT(tx_cmd_layernorm(g->cb, &ln));
            round_norm(g, g->a.ki, T, Di, Di);
        }
        rope(g, A(g, g->a.ki), g->a.pos, T, 1, Di, Di, 0, rope_d, c->indexer_rope_interleave);
        if (need_index) {
            mm(g, g->a.qi, g->a.qa, rt_mat_of(m, GLM_T_IDX_WQ_B, l), T, qr, Hi * Di, RT_NONE, 0,
               NULL);
            rope(g, A(g, g->a.qi), g->a.pos, T, Hi, Hi * Di, Di, 0, rope_d,
                 c->indexer_rope_interleave);
            mm(g, g->a.iw, g->a.xn, rt_mat_of(m, GLM_T_IDX_WEIGHTS_PROJ, l), T, D, Hi, RT_NONE, 0,
               NULL);
            float sc = (float)(1.0 / sqrt((double)Hi) / sqrt((double)Di));
            dbg(g, "ADD indexer weights *= %g", (double)sc);
            EMIT(tx_cmd_add(g->cb, A(g, g->a.iw), A(g, g->a.iw), A(g, g->a.iw),
                            (uint64_t)T * (uint64_t)Hi, sc, 0.0f));
        }
    }

    float scale = (float)glm_config_attn_scale(c);
    for (int si = 0; si < f->n_seg; si++) {
        struct rt_seg *sg = &f->seg[si];
        glm_session_t *s = sg->s;
        uint64_t es = kv_elem(s);
        uint64_t kb = s->k_off[l] + (uint64_t)sg->pos0 * H * qk * es;
        dbg(g, "CONVERT K,V -> cache layer %d pos %d..%d (%s)", l, sg->pos0, sg->pos0 + sg->n - 1,
            tx_dtype_name(s->kv_dtype));
        /* k_nope of every (token, head), V of every (token, head) */
        convert(g, tx_ref(s->kv_bo, kb), A(g, g->a.kvb + (uint64_t)sg->row0 * H * (nope + vd) * 4),
                sg->n * H, nope, qk, nope + vd, s->kv_dtype);
        convert(g, tx_ref(s->kv_bo, s->v_off[l] + (uint64_t)sg->pos0 * H * vd * es),
                A(g, g->a.kvb + ((uint64_t)sg->row0 * H * (nope + vd) + nope) * 4), sg->n * H, vd,
                vd, nope + vd, s->kv_dtype);
        /* the shared rope key into every head */
        for (int h = 0; h < H; h++)
            convert(g, tx_ref(s->kv_bo, kb + ((uint64_t)h * qk + nope) * es),
                    A(g, g->a.ckv + ((uint64_t)sg->row0 * cw + lora) * 4), sg->n, rope_d, H * qk,
                    cw, s->kv_dtype);
        if (full && s->ik_off[l] != UINT64_MAX && !g->rc) {
            dbg(g, "COPY indexer key -> cache layer %d", l);
            EMIT(tx_cmd_copy(g->cb, tx_ref(s->kv_bo, s->ik_off[l] + (uint64_t)sg->pos0 * Di * 4),
                             A(g, g->a.ki + (uint64_t)sg->row0 * Di * 4),
                             (uint64_t)sg->n * Di * 4));
        }
        int use_sel = sg->pos0 + sg->n > K;
        if (use_sel && full && !g->rc) {
            struct tx_dsa_index_args d;
            memset(&d, 0, sizeof(d));
            d.sel = A(g, g->a.sel + (uint64_t)sg->row0 * K * 4);
            d.q = A(g, g->a.qi + (uint64_t)sg->row0 * Hi * Di * 4);
            d.k = tx_ref(s->kv_bo, s->ik_off[l]);
            d.w = A(g, g->a.iw + (uint64_t)sg->row0 * Hi * 4);
            d.tokens = (uint32_t)sg->n;
            d.heads = (uint32_t)Hi;
            d.dim = (uint32_t)Di;
            d.kv_len = (uint32_t)(sg->pos0 + sg->n);
            d.q_pos0 = (uint32_t)sg->pos0;
            d.top_k = (uint32_t)K;
            d.ld_q_head = (uint32_t)Di;
            d.ld_k = (uint32_t)Di;
            dbg(g, "DSA_INDEX layer %d tokens=%d keys=%u top_k=%d", l, sg->n, d.kv_len, K);
            EMIT(tx_cmd_dsa_index(g->cb, &d));
            if (g->a.dump_sel)
                EMIT(tx_cmd_copy(g->cb, A(g, g->a.dump_sel + ((uint64_t)l * T + sg->row0) * K * 4),
                                 A(g, g->a.sel + (uint64_t)sg->row0 * K * 4),
                                 (uint64_t)sg->n * K * 4));
        }
        if (g->rc)
            return;
        struct tx_attention_args a;
        memset(&a, 0, sizeof(a));
        a.out = A(g, g->a.ao + (uint64_t)sg->row0 * H * vd * 4);
        a.q = A(g, g->a.q + (uint64_t)sg->row0 * H * qk * 4);
        a.k = tx_ref(s->kv_bo, s->k_off[l]);
        a.v = tx_ref(s->kv_bo, s->v_off[l]);
        if (use_sel) {
            a.sel = A(g, g->a.sel + (uint64_t)sg->row0 * K * 4);
            a.sel_k = (uint32_t)K;
        }
        a.tokens = (uint32_t)sg->n;
        a.q_heads = a.kv_heads = (uint32_t)H;
        a.qk_dim = (uint32_t)qk;
        a.v_dim = (uint32_t)vd;
        a.kv_len = (uint32_t)(sg->pos0 + sg->n);
        a.q_pos0 = (uint32_t)sg->pos0;
        a.ld_q_head = a.ld_k_head = (uint32_t)qk;
        a.ld_v_head = a.ld_o_head = (uint32_t)vd;
        a.scale = scale;
        a.kv_dtype = s->kv_dtype;
        dbg(g, "ATTENTION layer %d tokens=%d heads=%d kv_len=%u%s", l, sg->n, H, a.kv_len,
            use_sel ? " (DSA selection)" : " (dense)");
        EMIT(tx_cmd_attention(g->cb, &a));
    }
    mm(g, g->a.h, g->a.ao, rt_mat_of(m, GLM_T_O_PROJ, l), T, H * vd, D,
       rt_vec_of(m, GLM_T_O_BIAS, l), TX8_MATMUL_F_ACCUMULATE, NULL);
}

/* ---- feed-forward -------------------------------------------------------- */

static void ffn(struct gctx *g, int l)
{
    const struct glm_config *c = g->c;
    glm_model_t *m = g->m;
    int T = g->f->T, D = c->hidden_size;
    int mi = m->moe_index[l];
    if (mi < 0) {
        swiglu_mlp(g, rt_mat_of(m, GLM_T_MLP_GATE, l), rt_mat_of(m, GLM_T_MLP_UP, l),
                   rt_mat_of(m, GLM_T_MLP_DOWN, l), T);
        return;
    }
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    mm(g, g->a.rl, g->a.xn, rt_mat_of(m, GLM_T_ROUTER, l), T, D, E, RT_NONE, 0, NULL);
    if (g->rc)
        return;
    struct tx_moe_route_args r;
    memset(&r, 0, sizeof(r));
    r.out_ids = A(g, g->a.rid);
    r.out_w = A(g, g->a.rw);
    r.logits = A(g, g->a.rl);
    r.bias = V(g, rt_vec_of(m, GLM_T_ROUTER_BIAS, l));
    r.counts = tx_ref(m->meta_bo, m->counts_off + (uint64_t)mi * E * 8);
    r.tokens = (uint32_t)T;
    r.experts = (uint32_t)E;
    r.top_k = (uint32_t)K;
    r.n_group = (uint32_t)(c->n_group > 1 ? c->n_group : 0);
    r.topk_group = (uint32_t)(c->n_group > 1 ? c->topk_group : 0);
    r.scaling = (float)c->routed_scaling_factor;
    r.flags = TX8_ROUTE_F_COUNT | (c->norm_topk_prob ? TX8_ROUTE_F_NORM_TOPK : 0);
    int pen = m->moe.balance == GLM_BALANCE_ON ||
              (m->moe.balance == GLM_BALANCE_AUTO && m->cold_layer[mi]);
    if (pen) {
        r.flags |= TX8_ROUTE_F_LOAD_PENALTY;
        /* the device's load is the share of all selections; the API's load is
         * the utilisation (count / mean count = share * experts) */
        r.lambda = m->moe.lambda * (float)E;
    }
    dbg(g, "MOE_ROUTE layer %d tokens=%d experts=%d top_k=%d%s", l, T, E, K,
        pen ? " load-penalty" : "");
    EMIT(tx_cmd_moe_route(g->cb, &r));
    if (g->a.dump_rid)
        EMIT(tx_cmd_copy(g->cb, A(g, g->a.dump_rid + (uint64_t)mi * T * K * 4), A(g, g->a.rid),
                         (uint64_t)T * K * 4));

    struct tx_moe_ffn_args x;
    memset(&x, 0, sizeof(x));
    x.y = A(g, g->a.h);
    x.x = A(g, g->a.xn);
    x.ids = A(g, g->a.rid);
    x.w = A(g, g->a.rw);
    uint64_t tab = m->st.on ? m->st.table_off + (uint64_t)rt_stream_slot_of(m, l) * E * 3 *
                                                    sizeof(struct tx8_weight)
                            : m->table_off + (uint64_t)mi * E * 3 * sizeof(struct tx8_weight);
    x.experts = tx_ref(m->meta_bo, tab);
    x.tokens = (uint32_t)T;
    x.top_k = (uint32_t)K;
    x.num_experts = (uint32_t)E;
    x.dim = (uint32_t)D;
    x.ffn_dim = (uint32_t)c->moe_intermediate_size;
    x.ld_x = x.ld_y = (uint32_t)D;
    x.act_dtype = rt_prec_dtype(g->plan->precision[GLM_EXPERT]);
    x.flags = TX8_MOE_FFN_F_ACCUMULATE;
    dbg(g, "MOE_FFN layer %d tokens=%d top_k=%d F=%d act=%s", l, T, K, c->moe_intermediate_size,
        tx_dtype_name(x.act_dtype));
    EMIT(tx_cmd_moe_ffn(g->cb, &x));
    if (c->n_shared_experts > 0)
        swiglu_mlp(g, rt_mat_of(m, GLM_T_SHEXP_GATE, l), rt_mat_of(m, GLM_T_SHEXP_UP, l),
                   rt_mat_of(m, GLM_T_SHEXP_DOWN, l), T);
}

/* ---- jobs ----------------------------------------------------------------- */

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
    if (g->njobs == g->cap_jobs) {
        int cap = g->cap_jobs ? g->cap_jobs * 2 : 16;
        tx_job_t *j = realloc(g->jobs, sizeof(*j) * (size_t)cap);
        if (j)
            g->jobs = j;
        char *w = j ? realloc(g->waited, (size_t)cap) : NULL;
        if (!j || !w) {
            g->rc = tx_error(TX_ENOMEM, "forward: out of memory");
            return;
        }
        g->waited = w;
        g->cap_jobs = cap;
    }
    int rc = tx_submit(g->m->dev, g->cb, &g->jobs[g->njobs]);
    if (rc) {
        g->rc = tx_error(rc, "forward: submit: %s", tx_last_error());
        return;
    }
    g->waited[g->njobs] = 0;
    g->njobs++;
    tx_cmdbuf_reset(g->cb);
    g->ncmd = 0;
    g->rc = declare(g);
}

/* Wait for job i of the pass (once), accumulating its figures. */
static int wait_job(struct gctx *g, int i)
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
        wait_job(g, i);
    return g->first_err;
}

/* ---- parameter shard streaming ------------------------------------------- */

/* Index of the job of this pass that last read slot k (-1: none). */
static int slot_job_index(struct gctx *g, int k)
{
    uint64_t id = g->m->st.slot_job[k];
    for (int i = g->njobs - 1; i >= 0 && id; i--)
        if (g->jobs[i] == id)
            return i;
    return -1;
}

/* Layer l into a slot before its commands are built: prefetched (a hit)
 * or read now (a miss); then its conversions, expert table and BOs. */
static int stream_enter(struct gctx *g, int l)
{
    glm_model_t *m = g->m;
    struct rt_stream *s = &m->st;
    int k = rt_stream_slot_of(m, l);
    if (k < 0) {
        int prev = l > 0 ? rt_stream_slot_of(m, l - 1) : -1;
        k = prev == 0 ? 1 : 0;
        wait_job(g, slot_job_index(g, k));
        int rc = rt_stream_load(m, l, k);
        if (rc)
            return rc;
        s->misses++;
    } else if (rt_stream_poll(m), s->inflight[k] > 0) {
        s->misses++; /* prefetched, but the reads are not complete yet */
    } else {
        s->hits++;
    }
    int rc = rt_stream_wait(m, k);
    if (rc)
        return rc;
    rc = rt_stream_begin_layer(m, l, k, g->plan, g->cb);
    return rc;
}

/* After layer l's job was submitted: note that it reads its slot, and
 * prefetch layer `next` into the other slot once the job that last read
 * that slot has finished (the device meanwhile runs layer l). */
static int stream_leave(struct gctx *g, int l, int next)
{
    glm_model_t *m = g->m;
    struct rt_stream *s = &m->st;
    int k = rt_stream_slot_of(m, l);
    if (k >= 0 && g->njobs)
        s->slot_job[k] = g->jobs[g->njobs - 1];
    if (next < 0 || rt_stream_slot_of(m, next) >= 0)
        return TX_OK;
    int t = k == 0 ? 1 : 0;
    wait_job(g, slot_job_index(g, t));
    if (g->first_err)
        return g->first_err;
    return rt_stream_load(m, next, t);
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

int rt_forward(glm_model_t *m, struct rt_fwd *f)
{
    const struct glm_config *c = &m->cfg;
    glm_precision_plan_t plan;
    int L = c->num_hidden_layers, D = c->hidden_size, Vv = c->vocab_size, T = f->T;
    int rc;

    rt_plan_of(m->dev, &plan, NULL);
    rc = rt_prepare_plan(m, &plan);
    if (rc)
        return rc;
    uint16_t kvdt = rt_kv_dtype(plan.precision[GLM_ATTENTION]);
    for (int i = 0; i < f->n_seg; i++) {
        if (f->seg[i].s->kv_dtype != kvdt) {
            rc = rt_session_kv_convert(f->seg[i].s, kvdt);
            if (rc)
                return rc;
        }
    }
    int want_dump = f->dump != NULL || rt_debug_on();

    struct gctx g;
    memset(&g, 0, sizeof(g));
    g.m = m;
    g.c = c;
    g.plan = &plan;
    g.f = f;
    g.dbg = rt_debug_on();
    g.acc = f;
    layout(m, T, f->lrows, want_dump, &g.a);
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

    rc = tx_cmdbuf_create(m->dev, &g.cb);
    if (rc)
        return tx_error(rc, "forward: %s", tx_last_error());
    g.rc = declare(&g);
    for (int i = 0; i < f->n_seg && !g.rc; i++) {
        int r = tx_cmdbuf_use(g.cb, f->seg[i].s->kv_bo, TX_ACCESS_RW);
        if (r)
            g.rc = tx_error(r, "forward: %s", tx_last_error());
    }
    if (g.dbg)
        rt_debug("forward: %d rows in %d segment(s), %d logits rows, plan %s", T, f->n_seg,
                 f->lrows, rt_plan_short(&plan, (char[160]){0}, 160));

    /* embedding */
    if (!g.rc) {
        struct tx_embed_args e;
        struct tx_weight_ref w;
        memset(&e, 0, sizeof(e));
        int em = rt_mat_of(m, GLM_T_EMBED, -1);
        g.rc = rt_weight_ref(m, em, plan.precision[GLM_EMBEDDING], &w);
        if (!g.rc) {
            e.out = A(&g, g.a.h);
            e.ids = A(&g, g.a.ids);
            e.table = w.data;
            e.scales = w.scales;
            e.tokens = (uint32_t)T;
            e.vocab = w.rows;
            e.dim = w.cols;
            e.ld_out = (uint32_t)D;
            e.dtype = w.dtype;
            struct gctx *gp = &g;
            dbg(gp, "EMBED tokens=%d vocab=%u dim=%u table=%s", T, w.rows, w.cols,
                tx_dtype_name(w.dtype));
            int r = tx_cmd_embed(g.cb, &e);
            if (r)
                g.rc = tx_error(r, "forward: embed: %s", tx_last_error());
            g.ncmd++;
            g.total++;
        }
    }

    float eps = (float)c->rms_norm_eps;
    int streaming = m->st.on;
    for (int l = 0; l < L && !g.rc; l++) {
        if (streaming) {
            g.rc = stream_enter(&g, l);
            if (g.rc)
                break;
        }
        rmsnorm(&g, g.a.xn, g.a.h, rt_vec_of(m, GLM_T_INPUT_NORM, l), T, D, D, D, eps);
        if (c->arch == GLM_ARCH_GLM4_MOE)
            attn_glm4(&g, l);
        else
            attn_dsa(&g, l);
        rmsnorm(&g, g.a.xn, g.a.h, rt_vec_of(m, GLM_T_POST_ATTN_NORM, l), T, D, D, D, eps);
        ffn(&g, l);
        if (want_dump && !g.rc) {
            struct gctx *gp = &g;
            dbg(gp, "COPY layer %d output -> dump", l);
            int r = tx_cmd_copy(g.cb, A(&g, g.a.dump + (uint64_t)l * T * D * 4), A(&g, g.a.h),
                                (uint64_t)T * D * 4);
            if (r)
                g.rc = tx_error(r, "forward: %s", tx_last_error());
            g.ncmd++;
            g.total++;
        }
        if (streaming && l < L - 1) {
            /* one job per layer: the next layer's reads overlap this job */
            maybe_flush(&g, 1);
            if (!g.rc)
                g.rc = stream_leave(&g, l, l + 1);
        } else {
            maybe_flush(&g, 0);
        }
    }

    /* final norm: the logits rows (all rows when dumping) */
    int nr0 = want_dump ? 0 : f->lrow0, nrows = want_dump ? T : f->lrows;
    if (nrows > 0)
        rmsnorm(&g, g.a.xn + (uint64_t)nr0 * D * 4, g.a.h + (uint64_t)nr0 * D * 4,
                rt_vec_of(m, GLM_T_FINAL_NORM, -1), nrows, D, D, D, eps);
    if (want_dump && !g.rc) {
        int r = tx_cmd_copy(g.cb, A(&g, g.a.dump + (uint64_t)L * T * D * 4), A(&g, g.a.xn),
                            (uint64_t)T * D * 4);
        if (r)
            g.rc = tx_error(r, "forward: %s", tx_last_error());
        g.ncmd++;
        g.total++;
    }
    if (f->lrows > 0) {
        mm(&g, g.a.logits, g.a.xn + (uint64_t)f->lrow0 * D * 4, rt_mat_of(m, GLM_T_LM_HEAD, -1),
           f->lrows, D, Vv, RT_NONE, 0, NULL);
        if (f->sampling && !g.rc) {
            for (int r = 0; r < f->lrows && !g.rc; r++) {
                struct tx_sample_args s;
                memset(&s, 0, sizeof(s));
                s.out = A(&g, g.a.tok + (uint64_t)r * 4);
                s.logits = A(&g, g.a.logits + (uint64_t)r * Vv * 4);
                s.probs = A(&g, g.a.prob + (uint64_t)r * 4);
                /* one glm_sampling per row (per session), or one for all */
                const struct glm_sampling *sp = f->sampling + (f->n_sampling > 1 ? r : 0);
                s.seed = sp->seed;
                /* counter: the position the sampled token will take */
                const struct rt_seg *sg = f->n_seg == f->lrows ? &f->seg[r] : &f->seg[0];
                s.counter = (uint64_t)(sg->pos0 + sg->n);
                s.rows = 1;
                /* the padding rows of lm_head (ids the tokenizer does not
                 * have) are never candidates */
                s.vocab = (uint32_t)rt_sample_vocab(m);
                s.ld_logits = (uint32_t)Vv;
                /* rt_sampling_check refused what the device cannot do;
                 * greedy ignores top-k and top-p */
                int greedy = !(sp->temperature > 0.0f);
                s.top_k = !greedy && sp->top_k > 0 ? (uint32_t)sp->top_k : 0;
                s.temperature = greedy ? 0.0f : sp->temperature;
                s.top_p = greedy ? 1.0f : sp->top_p;
                s.min_p = greedy ? 0.0f : sp->min_p;
                s.flags = !greedy && sp->order == GLM_SAMPLER_ORDER_LLAMA && sp->temperature != 1.0f
                              ? TX8_SAMPLE_F_TEMP_LAST
                              : 0;
                /* penalties: the session's last repeat_last_n ids */
                int pen = (sp->repeat_penalty != 0.0f && sp->repeat_penalty != 1.0f) ||
                          sp->presence_penalty != 0.0f || sp->frequency_penalty != 0.0f;
                if (pen && sp->repeat_last_n != 0 && sg->s && sg->s->toks) {
                    int end = sg->pos0 + sg->n;
                    int nl = sp->repeat_last_n < 0 ? GLM_MAX_REPEAT_LAST_N : sp->repeat_last_n;
                    int from = end - nl > 0 ? end - nl : 0;
                    int32_t *h = (int32_t *)((uint8_t *)m->act_map + g.a.hist +
                                             (uint64_t)r * GLM_MAX_REPEAT_LAST_N * 4);
                    /* the ids of this pass are in toks already */
                    memcpy(h, sg->s->toks + from, (size_t)(end - from) * 4);
                    s.history = A(&g, g.a.hist + (uint64_t)r * GLM_MAX_REPEAT_LAST_N * 4);
                    s.n_history = (uint32_t)(end - from);
                    s.repeat_penalty = sp->repeat_penalty;
                    s.presence_penalty = sp->presence_penalty;
                    s.frequency_penalty = sp->frequency_penalty;
                }
                /* logit bias -inf (GLM_GEN_IGNORE_EOS): written into the
                 * row on the device before SAMPLE reads it */
                for (int b = 0; b < f->n_ban && !g.rc; b++) {
                    if (f->ban[b] < 0 || f->ban[b] >= Vv)
                        continue;
                    int fr = tx_cmd_fill(
                        g.cb, A(&g, g.a.logits + ((uint64_t)r * Vv + (uint64_t)f->ban[b]) * 4), 4,
                        0xff800000u /* -inf */);
                    if (fr)
                        g.rc = tx_error(fr, "forward: logit bias: %s", tx_last_error());
                    g.ncmd++;
                    g.total++;
                }
                struct gctx *gp = &g;
                dbg(gp, "SAMPLE row %d temp=%g top_k=%u top_p=%g seed=%llu counter=%llu", r,
                    (double)s.temperature, s.top_k, (double)s.top_p, (unsigned long long)s.seed,
                    (unsigned long long)s.counter);
                int rr = tx_cmd_sample(g.cb, &s);
                if (rr)
                    g.rc = tx_error(rr, "forward: sample: %s", tx_last_error());
                g.ncmd++;
                g.total++;
            }
        }
    }
    maybe_flush(&g, 1);
    if (streaming && !g.rc)
        g.rc = stream_leave(&g, L - 1, L > 1 ? 0 : -1); /* layer 0 of the next pass */
    rc = wait_all(&g);
    if (g.rc && !rc)
        rc = g.rc;
    for (int k = 0; k < RT_SLOTS; k++)
        m->st.slot_job[k] = 0; /* every job of the pass has finished */
    free(g.jobs);
    free(g.waited);
    tx_cmdbuf_destroy(g.cb);
    if (rc)
        return rc;

    m->forwards++;
    if (f->logits && f->lrows)
        memcpy(f->logits, (uint8_t *)m->act_map + g.a.logits, (size_t)f->lrows * Vv * 4);
    if (f->sampled && f->sampling)
        memcpy(f->sampled, (uint8_t *)m->act_map + g.a.tok, (size_t)f->lrows * 4);
    if (want_dump) {
        const float *d = (const float *)((uint8_t *)m->act_map + g.a.dump);
        if (f->dump)
            memcpy(f->dump, d, (size_t)(L + 1) * T * D * 4);
        if (f->dump_rid && g.a.dump_rid)
            memcpy(f->dump_rid, (uint8_t *)m->act_map + g.a.dump_rid,
                   (size_t)m->n_moe_layers * T * c->num_experts_per_tok * 4);
        if (f->dump_sel && g.a.dump_sel)
            memcpy(f->dump_sel, (uint8_t *)m->act_map + g.a.dump_sel,
                   (size_t)L * T * c->index_topk * 4);
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
        rt_debug("forward: %u commands, device %.3f ms, %llu MACs", g.total, f->busy_ns / 1e6,
                 (unsigned long long)f->macs);
    return TX_OK;
}
