/* SPDX-License-Identifier: MIT */
/*
 * Shared blocks of the runtime graph: plain functions that append TX8
 * commands for one piece of a decoder layer (norm, projection, RoPE, GQA
 * attention, MLA attention with the DSA indexer, dense MLP, MoE). The
 * architecture modules (libtx/arch/) build a layer from them; rt_forward
 * (graph.c) runs the embedding, module->layer() per layer, the final norm,
 * lm_head and sampling. The formulas follow the FP32 reference
 * (libtx/reference, docs/architectures.md):
 *
 * GQA attention (Glm4MoeAttention)
 *   q,k,v = xn W^T + b; per-head RMSNorm of q,k (use_qk_norm);
 *   RoPE (NeoX, first rotary_dim dims); K,V -> cache; ATTENTION (GQA);
 *   h += o_proj(attn)
 * MLA attention + DSA indexer (GlmMoeDsaAttention), absorbed (issue 11)
 *   qa = RMSNorm(q_a_proj(xn)); q = q_b_proj(qa), RoPE on the rope slice;
 *   ckv = kv_a_proj(xn) = [latent | k_rope]; latent RMSNorm, RoPE on k_rope;
 *   ckv -> the latent cache (one row per position, not per head);
 *   qabs_h = [q_nope_h W_UK_h | q_rope_h]; ATTENTION over the latent rows
 *   (one shared kv head, V = the latent); ao_h = W_UV_h aol_h;
 *   indexer: ki = LayerNorm(wk xn), RoPE; qi = wq_b(qa), RoPE;
 *   w = weights_proj(xn) * n_heads^-0.5 * head_dim^-0.5; DSA_INDEX keeps the
 *   top index_topk keys (skipped when every visible key fits: dense);
 *   ATTENTION with the selection; h += o_proj(attn)
 * Feed-forward: dense SwiGLU MLP, or MoE: router MATMUL in FP32, MOE_ROUTE
 * (sigmoid, correction bias, group limit, top-k, normalise, scale; live
 * counts; optional load penalty), MOE_FFN accumulating into h, shared
 * expert as a SwiGLU MLP.
 *
 * Errors are sticky: a block does nothing once g->rc is set, and the first
 * failure is kept in g->rc (no macro hides a return).
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
#define MLA_NORM_EPS 1e-6f     /* q_a_layernorm / kv_a_layernorm (DeepseekV3RMSNorm) */
#define INDEXER_NORM_EPS 1e-6f /* indexer.k_norm (nn.LayerNorm eps=1e-6) */

uint64_t blk_take(uint64_t *off, uint64_t bytes)
{
    uint64_t o = ALIGN_UP(*off, 256);
    *off = o + bytes;
    return o;
}

tx_ref_t blk_act(struct gctx *g, uint64_t off)
{
    return tx_ref(g->act, off);
}

tx_ref_t blk_vec(struct gctx *g, int vec)
{
    if (vec == RT_NONE)
        return tx_ref(NULL, 0);
    return tx_ref(g->m->meta_bo, g->m->vecs[vec].off);
}

/* The profiling name of a command from its debug line "OP what k=v ...":
 * "what" with "model." and ".weight" dropped and "layer N" as "layers.N"
 * (plus the module for MoE and attention), then a tab and the parameters. */
static void prof_name(struct gctx *g, const char *line)
{
    char name[160], part[64];
    const char *sp = strchr(line, ' ');
    size_t oplen = sp ? (size_t)(sp - line) : strlen(line);
    const char *p = sp ? sp + 1 : "";
    int layer = -1;
    name[0] = 0;
    if (sscanf(p, "layer %d", &layer) == 1 || strstr(p, " layer ")) {
        const char *q = strstr(p, "layer ");
        if (q && sscanf(q, "layer %d", &layer) == 1) {
            const char *mod = "";
            if (!strncmp(line, "MOE_FFN", oplen))
                mod = ".mlp.experts";
            else if (!strncmp(line, "MOE_ROUTE", oplen))
                mod = ".mlp.gate";
            else if (!strncmp(line, "ATTENTION", oplen))
                mod = ".self_attn";
            else if (!strncmp(line, "DSA_INDEX", oplen))
                mod = ".self_attn.indexer";
            snprintf(name, sizeof(name), "layers.%d%s", layer, mod);
        }
    } else if (sscanf(p, "%63s", part) == 1 && !strchr(part, '=')) {
        const char *t = !strncmp(part, "model.", 6) ? part + 6 : part;
        size_t n = strlen(t);
        if (n > 7 && !strcmp(t + n - 7, ".weight"))
            n -= 7;
        snprintf(name, sizeof(name), "%.*s", (int)n, t);
    }
    char full[400];
    snprintf(full, sizeof(full), "%s\t%s", name, p);
    txd_cmdbuf_name(g->cb, full);
}

void blk_dbg(struct gctx *g, const char *fmt, ...)
{
    if (!g->dbg && !g->prof)
        return;
    uint64_t t = g->dbg ? 0 : tx_profile_now(); /* the line only for the profiler */
    char line[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (g->dbg)
        fprintf(stderr, "glm: cmd %4u %s\n", g->total, line);
    if (g->prof) {
        if (!t)
            t = tx_profile_now();
        prof_name(g, line);
        txp_self_since(t);
    }
}

int blk_emit(struct gctx *g, int r)
{
    if (g->rc)
        return g->rc;
    if (r) {
        g->rc = tx_error(r, "forward: building command %u: %s", g->total, tx_last_error());
        return g->rc;
    }
    g->ncmd++;
    g->total++;
    return 0;
}

static glm_precision_t prec_of(struct gctx *g, int mat)
{
    int lt = g->m->mats[mat].ltype;
    return lt == RT_ROUTER ? FP32 : g->plan->precision[lt];
}

/* y[T x N] (+)= x W^T (+ bias) in the precision of W's layer type */
void blk_matmul(struct gctx *g, uint64_t y, uint64_t x, int mat, int tokens, int ld_x, int ld_y,
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
    a.x = blk_act(g, x);
    a.tokens = (uint32_t)tokens;
    a.ld_x = (uint32_t)ld_x;
    a.ld_y = (uint32_t)ld_y;
    a.act_dtype = rt_prec_act_dtype(p);
    a.flags = (uint16_t)flags;
    if (bias != RT_NONE) {
        a.bias = blk_vec(g, bias);
        a.flags |= TX8_MATMUL_F_BIAS;
    }
    blk_dbg(g, "MATMUL %-28s T=%d N=%u K=%u w=%s%s act=%s%s",
            g->m->tensors[g->m->mats[mat].t].info.name, tokens, a.w.rows, a.w.cols,
            tx_dtype_name(a.w.dtype), a.w.format == TX8_WFMT_BLOCK_SPARSE ? "/sparse" : "",
            tx_dtype_name(a.act_dtype), (flags & TX8_MATMUL_F_ACCUMULATE) ? " +=" : "");
    blk_emit(g, tx_cmd_matmul(g->cb, &a));
}

/* Round rows x cols (stride ld) of f32 through the NORM precision. */
void blk_round_norm(struct gctx *g, uint64_t x, int rows, int cols, int ld)
{
    glm_precision_t p = g->plan->precision[GLM_NORM];
    if (p == FP32 || p == INT8_MIXED || g->rc)
        return;
    struct tx_convert_args c;
    memset(&c, 0, sizeof(c));
    c.dst = blk_act(g, g->a.r16);
    c.src = blk_act(g, x);
    c.rows = (uint32_t)rows;
    c.cols = (uint32_t)cols;
    c.ld_dst = (uint32_t)cols;
    c.ld_src = (uint32_t)ld;
    c.dst_dtype = rt_prec_dtype(p);
    c.src_dtype = TX8_DTYPE_F32;
    blk_dbg(g, "CONVERT norm output %dx%d f32 -> %s -> f32", rows, cols,
            tx_dtype_name(c.dst_dtype));
    if (blk_emit(g, tx_cmd_convert(g->cb, &c)))
        return;
    c.dst = blk_act(g, x);
    c.src = blk_act(g, g->a.r16);
    c.ld_dst = (uint32_t)ld;
    c.ld_src = (uint32_t)cols;
    c.dst_dtype = TX8_DTYPE_F32;
    c.src_dtype = rt_prec_dtype(p);
    blk_emit(g, tx_cmd_convert(g->cb, &c));
}

void blk_rmsnorm(struct gctx *g, uint64_t y, uint64_t x, int vec, int rows, int dim, int ld_x,
                 int ld_y, float eps)
{
    if (g->rc)
        return;
    struct tx_rmsnorm_args a;
    memset(&a, 0, sizeof(a));
    a.y = blk_act(g, y);
    a.x = blk_act(g, x);
    a.gamma = blk_vec(g, vec);
    a.rows = (uint32_t)rows;
    a.dim = (uint32_t)dim;
    a.ld_x = (uint32_t)ld_x;
    a.ld_y = (uint32_t)ld_y;
    a.eps = eps;
    blk_dbg(g, "RMSNORM %-27s rows=%d dim=%d", g->m->tensors[g->m->vecs[vec].t].info.name, rows,
            dim);
    blk_emit(g, tx_cmd_rmsnorm(g->cb, &a));
    blk_round_norm(g, y, rows, dim, ld_y);
}

void blk_rope(struct gctx *g, tx_ref_t x, uint64_t pos, int tokens, int heads, int ld_token,
              int ld_head, int offset, int rot, int interleaved)
{
    if (g->rc || rot <= 0)
        return;
    struct tx_rope_args a;
    memset(&a, 0, sizeof(a));
    a.x = x;
    a.pos = blk_act(g, pos);
    a.inv_freq = tx_ref(g->m->meta_bo, g->m->inv_freq_off);
    a.tokens = (uint32_t)tokens;
    a.heads = (uint32_t)heads;
    a.ld_token = (uint32_t)ld_token;
    a.ld_head = (uint32_t)ld_head;
    a.offset = (uint32_t)offset;
    a.rot_dim = (uint32_t)rot;
    a.mode = interleaved ? TX8_ROPE_INTERLEAVED : TX8_ROPE_NEOX;
    if (g->c->rope_type == GLM_ROPE_YARN) { /* YaRN attention_factor (interface 1.4) */
        a.flags = TX8_ROPE_F_ATTN_FACTOR;
        a.attn_factor = (float)tx_cfg_rope_attn_factor(g->c);
    }
    blk_dbg(g, "ROPE %s tokens=%d heads=%d offset=%d rot=%d", interleaved ? "interleaved" : "neox",
            tokens, heads, offset, rot);
    blk_emit(g, tx_cmd_rope(g->cb, &a));
}

void blk_convert(struct gctx *g, tx_ref_t dst, tx_ref_t src, int rows, int cols, int ld_dst,
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
    blk_emit(g, tx_cmd_convert(g->cb, &c));
}

void blk_swiglu_mlp(struct gctx *g, int wg, int wu, int wd, int T)
{
    const struct glm_config *c = g->c;
    int D = c->hidden_size;
    int F = (int)g->m->mats[wg].rows;
    blk_matmul(g, g->a.g, g->a.xn, wg, T, D, F, RT_NONE, 0, NULL);
    blk_matmul(g, g->a.u, g->a.xn, wu, T, D, F, RT_NONE, 0, NULL);
    if (g->rc)
        return;
    struct tx_swiglu_args s;
    memset(&s, 0, sizeof(s));
    s.y = blk_act(g, g->a.a);
    s.gate = blk_act(g, g->a.g);
    s.up = blk_act(g, g->a.u);
    s.rows = (uint32_t)T;
    s.cols = (uint32_t)F;
    s.ld_y = s.ld_gate = s.ld_up = (uint32_t)F;
    blk_dbg(g, "SWIGLU rows=%d cols=%d", T, F);
    blk_emit(g, tx_cmd_swiglu(g->cb, &s));
    blk_matmul(g, g->a.h, g->a.a, wd, T, F, D, RT_NONE, TX8_MATMUL_F_ACCUMULATE, NULL);
}

/* ---- attention ---------------------------------------------------------- */

/* ATTENTION's flags: BF16 products where the plan's attention precision is
 * BF16 or INT8_MIXED (FP16's f16 is finer than BF16, FP32 stays exact), the
 * K and V caches are BF16 (the BF16 plan's default cache, and an MLA
 * latent's under INT8_MIXED: the operands are then the cache's own values;
 * other caches keep f32 products) and the model's device can
 * (glm_model.attn_bf16) */
static uint16_t blk_attn_flags(const struct gctx *g, const struct tx_attention_args *a,
                               uint16_t v_dtype)
{
    glm_precision_t p = g->plan->precision[GLM_ATTENTION];
    if (!g->m->attn_bf16 || (p != BF16 && p != INT8_MIXED) || a->kv_dtype != TX8_DTYPE_BF16 ||
        v_dtype != TX8_DTYPE_BF16 || ((a->qk_dim | a->v_dim | a->ld_k_head | a->ld_v_head) & 1))
        return 0;
    return TX8_ATTN_F_BF16;
}

/* ATTENTION of segment sg, with its custom attention mask's key bitmap
 * when it has masked positions (runtime/attn_mask.c) */
static int attention_cmd(struct gctx *g, const struct rt_seg *sg, const struct tx_attention_args *a,
                         uint16_t v_dtype, uint16_t af)
{
    tx_ref_t mask = {0};
    uint32_t ld = 0;
    rt_attn_mask_ref(g, sg, &mask, &ld);
    return txd_cmd_attention_mask(g->cb, a, v_dtype, af, mask, ld);
}

static void count_pairs(struct gctx *g, const struct rt_seg *sg, int sel_k, uint64_t *ex,
                        uint64_t *dense);
static void dg_keys(struct gctx *g, const struct rt_seg *sg, size_t at, size_t kv_len,
                    size_t q_pos0);

void blk_gqa_attention(struct gctx *g, int l)
{
    const struct glm_config *c = g->c;
    glm_model_t *m = g->m;
    struct rt_fwd *f = g->f;
    int T = f->T, D = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads,
        Hk = c->num_key_value_heads;
    int qw = Hq * hd, kw = Hk * hd;
    float eps = (float)c->rms_norm_eps;

    blk_matmul(g, g->a.q, g->a.xn, rt_mat_of(m, GLM_T_Q_PROJ, l), T, D, qw,
               rt_vec_of(m, GLM_T_Q_BIAS, l), 0, NULL);
    blk_matmul(g, g->a.k, g->a.xn, rt_mat_of(m, GLM_T_K_PROJ, l), T, D, kw,
               rt_vec_of(m, GLM_T_K_BIAS, l), 0, NULL);
    blk_matmul(g, g->a.v, g->a.xn, rt_mat_of(m, GLM_T_V_PROJ, l), T, D, kw,
               rt_vec_of(m, GLM_T_V_BIAS, l), 0, NULL);
    if (c->use_qk_norm) {
        blk_rmsnorm(g, g->a.q, g->a.q, rt_vec_of(m, GLM_T_Q_NORM, l), T * Hq, hd, hd, hd, eps);
        blk_rmsnorm(g, g->a.k, g->a.k, rt_vec_of(m, GLM_T_K_NORM, l), T * Hk, hd, hd, hd, eps);
    }
    blk_rope(g, blk_act(g, g->a.q), g->a.pos, T, Hq, qw, hd, 0, c->rotary_dim, c->rope_interleave);
    blk_rope(g, blk_act(g, g->a.k), g->a.pos, T, Hk, kw, hd, 0, c->rotary_dim, c->rope_interleave);
    float scale = (float)glm_config_attn_scale(c);
    for (int si = 0; si < f->n_seg; si++) {
        struct rt_seg *sg = &f->seg[si];
        glm_session_t *s = sg->s;
        tx_ref_t kc = tx_ref(s->kv_bo, s->k_off[l]), vc = tx_ref(s->kv_bo, s->v_off[l]);
        blk_dbg(g, "CONVERT K,V -> cache layer %d pos %d..%d (K %s, V %s)", l, sg->pos0,
                sg->pos0 + sg->n - 1, tx_dtype_name(s->kv_dtype), tx_dtype_name(s->v_dtype));
        size_t at = rt_dg_mark(g);
        blk_convert(g,
                    tx_ref(s->kv_bo, s->k_off[l] +
                                         tx_dtype_row_bytes(s->kv_dtype, (uint64_t)sg->pos0 * kw)),
                    blk_act(g, g->a.k + (uint64_t)sg->row0 * kw * 4), sg->n, kw, kw, kw,
                    s->kv_dtype);
        rt_dg_cache_row(g, sg, at, s->kv_dtype, (uint64_t)kw);
        at = rt_dg_mark(g);
        blk_convert(g,
                    tx_ref(s->kv_bo, s->v_off[l] +
                                         tx_dtype_row_bytes(s->v_dtype, (uint64_t)sg->pos0 * kw)),
                    blk_act(g, g->a.v + (uint64_t)sg->row0 * kw * 4), sg->n, kw, kw, kw,
                    s->v_dtype);
        rt_dg_cache_row(g, sg, at, s->v_dtype, (uint64_t)kw);
        if (g->rc)
            return;
        struct tx_attention_args a;
        memset(&a, 0, sizeof(a));
        a.out = blk_act(g, g->a.ao + (uint64_t)sg->row0 * qw * 4);
        a.q = blk_act(g, g->a.q + (uint64_t)sg->row0 * qw * 4);
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
        uint16_t af = blk_attn_flags(g, &a, s->v_dtype);
        blk_dbg(g, "ATTENTION layer %d tokens=%d heads=%d/%d kv_len=%u %s products", l, sg->n, Hq,
                Hk, a.kv_len, af & TX8_ATTN_F_BF16 ? "bf16" : "f32");
        count_pairs(g, sg, 0, NULL, NULL);
        at = rt_dg_mark(g);
        if (blk_emit(g, attention_cmd(g, sg, &a, s->v_dtype, af)))
            return;
        dg_keys(g, sg, at, offsetof(struct tx8_cmd_attention, kv_len),
                offsetof(struct tx8_cmd_attention, q_pos0));
    }
    blk_matmul(g, g->a.h, g->a.ao, rt_mat_of(m, GLM_T_O_PROJ, l), T, qw, D,
               rt_vec_of(m, GLM_T_O_BIAS, l), TX8_MATMUL_F_ACCUMULATE, NULL);
}

/* y[T x rows] = x W^T with an absorbed-MLA weight (absorb.c) of layer l,
 * head h (which 0: W_UK_h^T, 1: W_UV_h), activations in the attention
 * precision */
static void mla_absorbed_matmul(struct gctx *g, int l, int h, int which, uint64_t y, uint64_t x,
                                int ld_x, int ld_y)
{
    if (g->rc)
        return;
    struct tx_matmul_args a;
    memset(&a, 0, sizeof(a));
    int r = rt_absorb_ref(g->m, l, h, which, &a.w);
    if (r) {
        g->rc = r;
        return;
    }
    a.y = blk_act(g, y);
    a.x = blk_act(g, x);
    a.tokens = (uint32_t)g->f->T;
    a.ld_x = (uint32_t)ld_x;
    a.ld_y = (uint32_t)ld_y;
    a.act_dtype = rt_prec_act_dtype(g->plan->precision[GLM_ATTENTION]);
    if (h == 0)
        blk_dbg(g, "MATMUL %s layer %d heads=%d T=%d N=%u K=%u w=%s (absorbed MLA, per head)",
                which ? "W_UV" : "W_UK^T", l, g->c->num_attention_heads, g->f->T, a.w.rows,
                a.w.cols, tx_dtype_name(a.w.dtype));
    blk_emit(g, tx_cmd_matmul(g->cb, &a));
}

/* MLA projections, absorbed (DeepseekV3Attention's algebra, the cache as
 * FlashMLA keeps it): qa = RMSNorm(q_a_proj(xn)) (the q latent, eps 1e-6);
 * q = q_b_proj(qa), RoPE on each head's rope slice; ckv = kv_a_proj(xn) =
 * [latent | k_rope], latent RMSNorm (eps 1e-6), RoPE on k_rope (ckv is what
 * the cache holds). The absorbed query per head: qabs_h = [q_nope_h W_UK_h
 * | q_rope_h] (W_UK_h^T MATMUL per head, one CONVERT for the rope parts). */
void blk_mla_project(struct gctx *g, int l)
{
    const struct glm_config *c = g->c;
    glm_model_t *m = g->m;
    int T = g->f->T, D = c->hidden_size, H = c->num_attention_heads, qk = c->qk_head_dim,
        nope = c->qk_nope_head_dim, rope_d = c->qk_rope_head_dim, lora = c->kv_lora_rank,
        qr = c->q_lora_rank;
    int cw = lora + rope_d;

    blk_matmul(g, g->a.qa, g->a.xn, rt_mat_of(m, GLM_T_Q_A_PROJ, l), T, D, qr,
               rt_vec_of(m, GLM_T_Q_A_BIAS, l), 0, NULL);
    blk_rmsnorm(g, g->a.qa, g->a.qa, rt_vec_of(m, GLM_T_Q_A_NORM, l), T, qr, qr, qr, MLA_NORM_EPS);
    blk_matmul(g, g->a.q, g->a.qa, rt_mat_of(m, GLM_T_Q_B_PROJ, l), T, qr, H * qk, RT_NONE, 0,
               NULL);
    blk_rope(g, blk_act(g, g->a.q), g->a.pos, T, H, H * qk, qk, nope, rope_d, c->rope_interleave);

    blk_matmul(g, g->a.ckv, g->a.xn, rt_mat_of(m, GLM_T_KV_A_PROJ, l), T, D, cw,
               rt_vec_of(m, GLM_T_KV_A_BIAS, l), 0, NULL);
    blk_rmsnorm(g, g->a.ckv, g->a.ckv, rt_vec_of(m, GLM_T_KV_A_NORM, l), T, lora, cw, cw,
                MLA_NORM_EPS);
    blk_rope(g, blk_act(g, g->a.ckv), g->a.pos, T, 1, cw, cw, lora, rope_d, c->rope_interleave);

    if (g->a.xkeys) /* the expanded form: q as it is */
        return;
    /* the absorbed query */
    for (int h = 0; h < H; h++)
        mla_absorbed_matmul(g, l, h, 0, g->a.qabs + (uint64_t)h * cw * 4,
                            g->a.q + (uint64_t)h * qk * 4, H * qk, H * cw);
    blk_dbg(g, "CONVERT q_rope -> absorbed q layer %d rows=%d", l, T * H);
    blk_convert(g, blk_act(g, g->a.qabs + (uint64_t)lora * 4),
                blk_act(g, g->a.q + (uint64_t)nope * 4), T * H, rope_d, cw, qk, TX8_DTYPE_F32);
}

/* The DSA lightning indexer's projections of a full indexer layer
 * (GlmMoeDsaIndexer.forward): ki = LayerNorm(wk xn) (eps 1e-6), RoPE; and,
 * when some query sees more than index_topk keys, qi = wq_b(qa), RoPE,
 * w = weights_proj(xn) * n_heads^-0.5 * head_dim^-0.5. Shared layers:
 * nothing (they reuse the last full layer's selection). */
void blk_dsa_indexer_project(struct gctx *g, int l)
{
    const struct glm_config *c = g->c;
    glm_model_t *m = g->m;
    struct rt_fwd *f = g->f;
    int T = f->T, D = c->hidden_size, rope_d = c->qk_rope_head_dim, qr = c->q_lora_rank,
        Hi = c->index_n_heads, Di = c->index_head_dim, K = c->index_topk;
    if (c->indexer_types[l] != GLM_INDEXER_FULL)
        return;
    int need_index = 0;
    for (int si = 0; si < f->n_seg; si++) {
        if (f->seg[si].pos0 + f->seg[si].n > K)
            need_index = 1;
        rt_dg_threshold(g, &f->seg[si], K);
    }
    blk_matmul(g, g->a.ki, g->a.xn, rt_mat_of(m, GLM_T_IDX_WK, l), T, D, Di, RT_NONE, 0, NULL);
    if (!g->rc) {
        struct tx_layernorm_args ln;
        memset(&ln, 0, sizeof(ln));
        ln.y = ln.x = blk_act(g, g->a.ki);
        ln.gamma = blk_vec(g, rt_vec_of(m, GLM_T_IDX_K_NORM, l));
        ln.beta = blk_vec(g, rt_vec_of(m, GLM_T_IDX_K_NORM_BIAS, l));
        ln.rows = (uint32_t)T;
        ln.dim = ln.ld_x = ln.ld_y = (uint32_t)Di;
        ln.eps = INDEXER_NORM_EPS;
        blk_dbg(g, "LAYERNORM indexer k_norm layer %d rows=%d dim=%d", l, T, Di);
        blk_emit(g, tx_cmd_layernorm(g->cb, &ln));
        blk_round_norm(g, g->a.ki, T, Di, Di);
    }
    blk_rope(g, blk_act(g, g->a.ki), g->a.pos, T, 1, Di, Di, 0, rope_d, c->indexer_rope_interleave);
    if (!need_index)
        return;
    blk_matmul(g, g->a.qi, g->a.qa, rt_mat_of(m, GLM_T_IDX_WQ_B, l), T, qr, Hi * Di, RT_NONE, 0,
               NULL);
    blk_rope(g, blk_act(g, g->a.qi), g->a.pos, T, Hi, Hi * Di, Di, 0, rope_d,
             c->indexer_rope_interleave);
    blk_matmul(g, g->a.iw, g->a.xn, rt_mat_of(m, GLM_T_IDX_WEIGHTS_PROJ, l), T, D, Hi, RT_NONE, 0,
               NULL);
    float sc = (float)(1.0 / sqrt((double)Hi) / sqrt((double)Di));
    blk_dbg(g, "ADD indexer weights *= %g", (double)sc);
    if (g->rc)
        return;
    blk_emit(g, tx_cmd_add(g->cb, blk_act(g, g->a.iw), blk_act(g, g->a.iw), blk_act(g, g->a.iw),
                           (uint64_t)T * (uint64_t)Hi, sc, 0.0f));
}

/* Segment sg's latent rows [latent | k_rope] into its session's cache:
 * one CONVERT, no per-head K/V */
void blk_mla_cache(struct gctx *g, int l, const struct rt_seg *sg)
{
    const struct glm_config *c = g->c;
    int cw = c->kv_lora_rank + c->qk_rope_head_dim;
    glm_session_t *s = sg->s;
    blk_dbg(g, "CONVERT latent -> cache layer %d pos %d..%d (%s)", l, sg->pos0,
            sg->pos0 + sg->n - 1, tx_dtype_name(s->kv_dtype));
    size_t at = rt_dg_mark(g);
    blk_convert(g,
                tx_ref(s->kv_bo,
                       s->k_off[l] + tx_dtype_row_bytes(s->kv_dtype, (uint64_t)sg->pos0 * cw)),
                blk_act(g, g->a.ckv + (uint64_t)sg->row0 * cw * 4), sg->n, cw, cw, cw,
                s->kv_dtype);
    rt_dg_cache_row(g, sg, at, s->kv_dtype, (uint64_t)cw);
}

/* The DSA selection of segment sg: a full layer appends its indexer keys
 * to the cache and, when a query sees more than index_topk keys, runs
 * DSA_INDEX into the selection buffer (shared layers reuse it). Returns
 * the selection size the attention uses (0: dense, every key fits). */
int blk_dsa_indexer_select(struct gctx *g, int l, const struct rt_seg *sg)
{
    const struct glm_config *c = g->c;
    int T = g->f->T, Hi = c->index_n_heads, Di = c->index_head_dim, K = c->index_topk;
    int full = c->indexer_types[l] == GLM_INDEXER_FULL;
    glm_session_t *s = sg->s;
    if (full && s->ik_off[l] != UINT64_MAX && !g->rc) {
        tx_ref_t dst = tx_ref(s->kv_bo, s->ik_off[l] +
                                            tx_dtype_row_bytes(s->ik_dtype, (uint64_t)sg->pos0 * Di));
        tx_ref_t src = blk_act(g, g->a.ki + (uint64_t)sg->row0 * Di * 4);
        blk_dbg(g, "CONVERT indexer key -> cache layer %d (%s)", l, tx_dtype_name(s->ik_dtype));
        size_t at = rt_dg_mark(g);
        if (s->ik_dtype == TX8_DTYPE_F32) {
            if (blk_emit(g, tx_cmd_copy(g->cb, dst, src, (uint64_t)sg->n * Di * 4)))
                return 0;
        } else {
            blk_convert(g, dst, src, sg->n, Di, Di, Di, s->ik_dtype);
            if (g->rc)
                return 0;
        }
        rt_dg_cache_row(g, sg, at, s->ik_dtype, (uint64_t)Di);
    }
    int use_sel = sg->pos0 + sg->n > K;
    rt_dg_threshold(g, sg, K);
    if (use_sel && full && !g->rc) {
        struct tx_dsa_index_args d;
        memset(&d, 0, sizeof(d));
        d.sel = blk_act(g, g->a.sel + (uint64_t)sg->row0 * K * 4);
        d.q = blk_act(g, g->a.qi + (uint64_t)sg->row0 * Hi * Di * 4);
        d.k = tx_ref(s->kv_bo, s->ik_off[l]);
        d.w = blk_act(g, g->a.iw + (uint64_t)sg->row0 * Hi * 4);
        d.tokens = (uint32_t)sg->n;
        d.heads = (uint32_t)Hi;
        d.dim = (uint32_t)Di;
        d.kv_len = (uint32_t)(sg->pos0 + sg->n);
        d.q_pos0 = (uint32_t)sg->pos0;
        d.top_k = (uint32_t)K;
        d.ld_q_head = (uint32_t)Di;
        d.ld_k = (uint32_t)Di;
        blk_dbg(g, "DSA_INDEX layer %d tokens=%d keys=%u top_k=%d", l, sg->n, d.kv_len, K);
        size_t at = rt_dg_mark(g);
        tx_ref_t mask = {0};
        uint32_t ld = 0;
        rt_attn_mask_ref(g, sg, &mask, &ld); /* the top-k among the keys it shows */
        if (blk_emit(g, txd_cmd_dsa_index_mask(g->cb, &d, s->ik_dtype,
                                               g->m->dsa_q8 && s->ik_dtype == TX8_DTYPE_Q8_0,
                                               mask, ld)))
            return 0;
        dg_keys(g, sg, at, offsetof(struct tx8_cmd_dsa_index, kv_len),
                offsetof(struct tx8_cmd_dsa_index, q_pos0));
        if (g->a.dump_sel &&
            blk_emit(g, tx_cmd_copy(
                            g->cb, blk_act(g, g->a.dump_sel + ((uint64_t)l * T + sg->row0) * K * 4),
                            blk_act(g, g->a.sel + (uint64_t)sg->row0 * K * 4),
                            (uint64_t)sg->n * K * 4)))
            return 0;
    }
    return use_sel ? K : 0;
}

void rt_count_pairs(struct rt_fwd *f, const struct rt_seg *sg, int sel_k, uint64_t *ex,
                    uint64_t *dense)
{
    uint64_t e = 0, d = 0;
    for (int t = 0; t < sg->n; t++) {
        uint64_t vis = (uint64_t)sg->pos0 + t + 1;
        d += vis;
        e += sel_k > 0 && vis > (uint64_t)sel_k ? (uint64_t)sel_k : vis;
    }
    f->attn_pairs += e;
    f->attn_pairs_dense += d;
    sg->s->attn_pairs += e;
    sg->s->attn_pairs_dense += d;
    if (ex)
        *ex = e;
    if (dense)
        *dense = d;
}

/* ... and note them for the decode graph, which counts them on replay */
static void count_pairs(struct gctx *g, const struct rt_seg *sg, int sel_k, uint64_t *ex,
                        uint64_t *dense)
{
    rt_count_pairs(g->f, sg, sel_k, ex, dense);
    rt_dg_pairs(g, sg, sel_k);
}

/* kv_len and q_pos0 of the ATTENTION or DSA_INDEX command at `at` follow
 * segment sg's position (decode graph) */
static void dg_keys(struct gctx *g, const struct rt_seg *sg, size_t at, size_t kv_len,
                    size_t q_pos0)
{
    rt_dg_field(g, sg, at, kv_len, 4, 1);
    rt_dg_field(g, sg, at, q_pos0, 4, 1);
}

/* ATTENTION of segment sg over its latent cache: every head's absorbed
 * query against the one shared [latent | k_rope] row per key (kv_heads 1,
 * qk_dim lora + rope), V = the latent part of the same rows (v_dim lora),
 * output in latent space (aol); scale attn_scale. sel_k > 0: each query
 * attends the sel_k keys of the selection buffer (gathered from the
 * latent cache), else every causal key. */
void blk_mla_attend(struct gctx *g, int l, const struct rt_seg *sg, int sel_k)
{
    const struct glm_config *c = g->c;
    int H = c->num_attention_heads, lora = c->kv_lora_rank, cw = lora + c->qk_rope_head_dim;
    if (g->rc)
        return;
    glm_session_t *s = sg->s;
    struct tx_attention_args a;
    memset(&a, 0, sizeof(a));
    a.out = blk_act(g, g->a.aol + (uint64_t)sg->row0 * H * lora * 4);
    a.q = blk_act(g, g->a.qabs + (uint64_t)sg->row0 * H * cw * 4);
    a.k = tx_ref(s->kv_bo, s->k_off[l]);
    a.v = tx_ref(s->kv_bo, s->k_off[l]);
    if (sel_k > 0) {
        a.sel = blk_act(g, g->a.sel + (uint64_t)sg->row0 * sel_k * 4);
        a.sel_k = (uint32_t)sel_k;
    }
    a.tokens = (uint32_t)sg->n;
    a.q_heads = (uint32_t)H;
    a.kv_heads = 1;
    a.qk_dim = (uint32_t)cw;
    a.v_dim = (uint32_t)lora;
    a.kv_len = (uint32_t)(sg->pos0 + sg->n);
    a.q_pos0 = (uint32_t)sg->pos0;
    a.ld_q_head = a.ld_k_head = a.ld_v_head = (uint32_t)cw;
    a.ld_o_head = (uint32_t)lora;
    a.scale = (float)glm_config_attn_scale(c);
    a.kv_dtype = s->kv_dtype;
    uint64_t ex = 0, dense = 0;
    count_pairs(g, sg, sel_k, &ex, &dense);
    uint16_t af = blk_attn_flags(g, &a, a.kv_dtype);
    blk_dbg(g,
            "ATTENTION layer %d tokens=%d heads=%d kv_len=%u latent=%d%s pairs=%llu/%llu dense, "
            "%s products",
            l, sg->n, H, a.kv_len, cw, sel_k > 0 ? " (DSA selection)" : " (dense)",
            (unsigned long long)ex, (unsigned long long)dense, af & TX8_ATTN_F_BF16 ? "bf16" : "f32");
    size_t at = rt_dg_mark(g);
    if (!blk_emit(g, attention_cmd(g, sg, &a, a.kv_dtype, af)))
        dg_keys(g, sg, at, offsetof(struct tx8_cmd_attention, kv_len),
                offsetof(struct tx8_cmd_attention, q_pos0));
}

/* The expanded form: the kv keys of the segment (its cache rows, the new
 * ones included) read back as f32 latent rows, expanded by kv_b_proj to
 * [k_nope_h | v_h] per head, K_h = [k_nope_h | the shared k_rope] and V_h
 * (f32 under the FP32 attention precision, else the cache's 16-bit type:
 * F16 for an f16 cache, BF16 otherwise), then MHA over them into ao. The
 * same keys as the absorbed form reads, so both forms compute one
 * function. */
void blk_mla_attend_expanded(struct gctx *g, int l, const struct rt_seg *sg, int sel_k)
{
    const struct glm_config *c = g->c;
    glm_model_t *m = g->m;
    int H = c->num_attention_heads, lora = c->kv_lora_rank, rope = c->qk_rope_head_dim,
        nope = c->qk_nope_head_dim, vd = c->v_head_dim, qk = c->qk_head_dim, cw = lora + rope,
        nv = nope + vd;
    int kv = sg->pos0 + sg->n;
    if (g->rc)
        return;
    rt_dg_unpatchable(g); /* its commands' sizes follow the keys */
    glm_session_t *s = sg->s;
    /* f32 under the FP32 attention precision (the forms then differ by the
     * order of f32 sums only), else the cache's 16-bit type */
    uint16_t xt = g->plan->precision[GLM_ATTENTION] == FP32 || s->kv_dtype == TX8_DTYPE_F32
                      ? TX8_DTYPE_F32
                  : s->kv_dtype == TX8_DTYPE_F16 ? TX8_DTYPE_F16
                                                 : TX8_DTYPE_BF16;
    uint64_t xs = tx_dtype_size(xt);
    struct tx_convert_args cv;
    memset(&cv, 0, sizeof(cv));
    cv.dst = blk_act(g, g->a.lat);
    cv.src = tx_ref(s->kv_bo, s->k_off[l]);
    cv.rows = (uint32_t)kv;
    cv.cols = cv.ld_dst = cv.ld_src = (uint32_t)cw;
    cv.dst_dtype = TX8_DTYPE_F32;
    cv.src_dtype = s->kv_dtype;
    blk_dbg(g, "CONVERT cache -> latent rows layer %d keys=%d (%s, expanded MLA)", l, kv,
            tx_dtype_name(s->kv_dtype));
    if (blk_emit(g, tx_cmd_convert(g->cb, &cv)))
        return;
    blk_matmul(g, g->a.kvb, g->a.lat, rt_mat_of(m, GLM_T_KV_B_PROJ, l), kv, cw, H * nv, RT_NONE, 0,
               NULL);
    blk_dbg(g, "CONVERT k_nope, v -> expanded K, V layer %d rows=%d (%s)", l, kv * H,
            tx_dtype_name(xt));
    blk_convert(g, blk_act(g, g->a.kx), blk_act(g, g->a.kvb), kv * H, nope, qk, nv, xt);
    blk_convert(g, blk_act(g, g->a.vx), blk_act(g, g->a.kvb + (uint64_t)nope * 4), kv * H, vd, vd,
                nv, xt);
    blk_dbg(g, "CONVERT k_rope -> expanded K layer %d heads=%d", l, H);
    for (int h = 0; h < H; h++)
        blk_convert(g, blk_act(g, g->a.kx + ((uint64_t)h * qk + nope) * xs),
                    blk_act(g, g->a.lat + (uint64_t)lora * 4), kv, rope, H * qk, cw, xt);
    if (g->rc)
        return;
    struct tx_attention_args a;
    memset(&a, 0, sizeof(a));
    a.out = blk_act(g, g->a.ao + (uint64_t)sg->row0 * H * vd * 4);
    a.q = blk_act(g, g->a.q + (uint64_t)sg->row0 * H * qk * 4);
    a.k = blk_act(g, g->a.kx);
    a.v = blk_act(g, g->a.vx);
    if (sel_k > 0) {
        a.sel = blk_act(g, g->a.sel + (uint64_t)sg->row0 * sel_k * 4);
        a.sel_k = (uint32_t)sel_k;
    }
    a.tokens = (uint32_t)sg->n;
    a.q_heads = a.kv_heads = (uint32_t)H;
    a.qk_dim = a.ld_q_head = a.ld_k_head = (uint32_t)qk;
    a.v_dim = a.ld_v_head = a.ld_o_head = (uint32_t)vd;
    a.kv_len = (uint32_t)kv;
    a.q_pos0 = (uint32_t)sg->pos0;
    a.scale = (float)glm_config_attn_scale(c);
    a.kv_dtype = xt;
    uint64_t ex = 0, dense = 0;
    count_pairs(g, sg, sel_k, &ex, &dense);
    uint16_t af = blk_attn_flags(g, &a, xt);
    blk_dbg(g,
            "ATTENTION layer %d tokens=%d heads=%d kv_len=%u expanded qk=%d v=%d%s "
            "pairs=%llu/%llu dense, %s products",
            l, sg->n, H, a.kv_len, qk, vd, sel_k > 0 ? " (DSA selection)" : " (dense)",
            (unsigned long long)ex, (unsigned long long)dense, af & TX8_ATTN_F_BF16 ? "bf16" : "f32");
    blk_emit(g, attention_cmd(g, sg, &a, xt, af));
}

/* The attention output out of latent space: ao_h = W_UV_h aol_h per head */
void blk_mla_unabsorb(struct gctx *g, int l)
{
    const struct glm_config *c = g->c;
    int H = c->num_attention_heads, lora = c->kv_lora_rank, vd = c->v_head_dim;
    for (int h = 0; h < H; h++)
        mla_absorbed_matmul(g, l, h, 1, g->a.ao + (uint64_t)h * vd * 4,
                            g->a.aol + (uint64_t)h * lora * 4, H * lora, H * vd);
}

/* h += o_proj(ao) (+ o_proj bias) over `width` attention outputs per row */
void blk_attn_out(struct gctx *g, int l, int width)
{
    glm_model_t *m = g->m;
    blk_matmul(g, g->a.h, g->a.ao, rt_mat_of(m, GLM_T_O_PROJ, l), g->f->T, width, g->c->hidden_size,
               rt_vec_of(m, GLM_T_O_BIAS, l), TX8_MATMUL_F_ACCUMULATE, NULL);
}

/* ---- feed-forward -------------------------------------------------------- */

void blk_ffn(struct gctx *g, int l)
{
    const struct glm_config *c = g->c;
    glm_model_t *m = g->m;
    int T = g->f->T, D = c->hidden_size;
    int mi = m->moe_index[l];
    if (mi < 0) {
        blk_swiglu_mlp(g, rt_mat_of(m, GLM_T_MLP_GATE, l), rt_mat_of(m, GLM_T_MLP_UP, l),
                       rt_mat_of(m, GLM_T_MLP_DOWN, l), T);
        return;
    }
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    blk_matmul(g, g->a.rl, g->a.xn, rt_mat_of(m, GLM_T_ROUTER, l), T, D, E, RT_NONE, 0, NULL);
    if (g->rc)
        return;
    struct tx_moe_route_args r;
    memset(&r, 0, sizeof(r));
    r.out_ids = blk_act(g, g->a.rid);
    r.out_w = blk_act(g, g->a.rw);
    r.logits = blk_act(g, g->a.rl);
    r.bias = blk_vec(g, rt_vec_of(m, GLM_T_ROUTER_BIAS, l));
    r.counts = tx_ref(m->meta_bo, m->counts_off + (uint64_t)mi * E * 8);
    r.tokens = (uint32_t)T;
    r.experts = (uint32_t)E;
    r.top_k = (uint32_t)K;
    r.n_group = (uint32_t)(c->n_group > 1 ? c->n_group : 0);
    r.topk_group = (uint32_t)(c->n_group > 1 ? c->topk_group : 0);
    r.scaling = (float)c->routed_scaling_factor;
    r.flags = TX8_ROUTE_F_COUNT | (c->norm_topk_prob ? TX8_ROUTE_F_NORM_TOPK : 0);
    /* the module's router family: softmax (Qwen3-MoE, no bias, no groups) */
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    if (arch && arch->router == TX_ROUTER_SOFTMAX)
        r.flags |= TX8_ROUTE_F_SOFTMAX;
    int pen = m->moe.balance == GLM_BALANCE_ON ||
              (m->moe.balance == GLM_BALANCE_AUTO && m->cold_layer[mi]);
    if (pen) {
        r.flags |= TX8_ROUTE_F_LOAD_PENALTY;
        /* the device's load is the share of all selections; the API's load is
         * the utilisation (count / mean count = share * experts) */
        r.lambda = m->moe.lambda * (float)E;
    }
    blk_dbg(g, "MOE_ROUTE layer %d tokens=%d experts=%d top_k=%d%s", l, T, E, K,
            pen ? " load-penalty" : "");
    if (blk_emit(g, tx_cmd_moe_route(g->cb, &r)))
        return;
    if (g->a.dump_rid &&
        blk_emit(g, tx_cmd_copy(g->cb, blk_act(g, g->a.dump_rid + (uint64_t)mi * T * K * 4),
                                blk_act(g, g->a.rid), (uint64_t)T * K * 4)))
        return;

    struct tx_moe_ffn_args x;
    memset(&x, 0, sizeof(x));
    x.y = blk_act(g, g->a.h);
    x.x = blk_act(g, g->a.xn);
    x.ids = blk_act(g, g->a.rid);
    x.w = blk_act(g, g->a.rw);
    x.tokens = (uint32_t)T;
    x.top_k = (uint32_t)K;
    x.num_experts = (uint32_t)E;
    x.dim = (uint32_t)D;
    x.ffn_dim = (uint32_t)c->moe_intermediate_size;
    x.ld_x = x.ld_y = (uint32_t)D;
    x.act_dtype = rt_prec_act_dtype(g->plan->precision[GLM_EXPERT]);
    x.flags = TX8_MOE_FFN_F_ACCUMULATE;
    /* the routed experts where the weight store keeps them */
    m->store->moe_ffn(g, l, mi, &x);
    if (!g->rc && c->n_shared_experts > 0)
        blk_swiglu_mlp(g, rt_mat_of(m, GLM_T_SHEXP_GATE, l), rt_mat_of(m, GLM_T_SHEXP_UP, l),
                       rt_mat_of(m, GLM_T_SHEXP_DOWN, l), T);
}

/* ---- decoder layer ---------------------------------------------------------- */

/* Pre-norm residual layer (Glm4MoeDecoderLayer, GlmMoeDsaDecoderLayer):
 * h += attn(RMSNorm(h)); h += FFN(RMSNorm(h)) */
void blk_decoder_layer(struct gctx *g, int l, void (*attn)(struct gctx *g, int l))
{
    const struct glm_config *c = g->c;
    glm_model_t *m = g->m;
    int T = g->f->T, D = c->hidden_size;
    float eps = (float)c->rms_norm_eps;
    blk_rmsnorm(g, g->a.xn, g->a.h, rt_vec_of(m, GLM_T_INPUT_NORM, l), T, D, D, D, eps);
    attn(g, l);
    blk_rmsnorm(g, g->a.xn, g->a.h, rt_vec_of(m, GLM_T_POST_ATTN_NORM, l), T, D, D, D, eps);
    blk_ffn(g, l);
}
