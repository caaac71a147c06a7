/* SPDX-License-Identifier: MIT */
/*
 * The runtime graph's shared blocks (runtime/blocks.c) and the state of one
 * forward pass they append commands to. Used by rt_forward (graph.c) and the
 * architecture modules' layer functions (libtx/arch/).
 */
#ifndef TX_RT_BLOCKS_H
#define TX_RT_BLOCKS_H

#include "runtime/rt_internal.h"

/* Offsets of the activation buffers of a pass. The common ones are laid
 * out by graph.c; the attention block's by the module's act_layout(). */
/* Offsets of the activation buffers of a pass. */
struct act_layout {
    uint64_t ids, pos, h, xn, r16;
    uint64_t q, k, v, ao;                   /* glm4 */
    uint64_t qa, ckv, qabs, aol, qi, ki, iw, sel; /* MLA, DSA (q, ao shared) */
    /* MLA's expanded form (xkeys > 0: the keys of the pass's longest
     * segment): the latent rows read back from the cache, kv_b_proj of
     * them, and the per-head K ([nope | rope]) and V rows */
    uint64_t xkeys, lat, kvb, kx, vx;
    uint64_t g, u, a;                       /* MLP */
    uint64_t rl, rid, rw;                   /* MoE */
    uint64_t logits, tok, prob, hist, allow;
    uint64_t dump, dump_rid, dump_sel;
    uint64_t mtp_hin, mtp_cat; /* MTP pass: hnorm's input, [enorm(e) | hnorm(h)] */
    /* custom attention masks: the key bitmaps u64 [T][amask_ld] (amask_ld 0:
     * no masked position in the pass; runtime/attn_mask.c) */
    uint64_t amask, amask_ld;
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
    int prof; /* $TX_PROFILE: name each command (blk_dbg) */
    unsigned ncmd;  /* commands in the current job */
    unsigned total; /* commands of the pass */
    tx_job_t *jobs; /* submitted jobs of the pass */
    char *waited;
    int njobs, cap_jobs;
    int first_err;
    struct rt_fwd *acc;
    int rc;
    /* decode passes: the first job is submitted after layer 0 so that the
     * device runs while the host builds the rest; the time of that first
     * submission (host time, docs/glm-inference.md "Depth benchmark") */
    int early_flush;
    uint64_t t_first_submit;
    /* the decode graph (runtime/decode_graph.c): the one being recorded,
     * or (verify) the patched one each flushed job is compared with */
    struct rt_dgraph *dg, *dg_cmp;
    int dg_cjob;
};

/* The slot of the pass's next job (NULL: out of memory, with the message
 * set), and: the job in it was submitted (its wait state, the time of the
 * pass's first submission) */
tx_job_t *rt_graph_next_job(struct gctx *g);
void rt_graph_job_added(struct gctx *g);

/* Submit what the pass has built and wait for every job of it (the
 * expert cache reads the routing between MOE_ROUTE and MOE_FFN). */
int rt_graph_sync(struct gctx *g);
/* Submit what is built (no wait) / wait for every submitted job: a pass
 * on another device (expert parallelism). */
int rt_graph_flush(struct gctx *g);
int rt_graph_wait(struct gctx *g);
/* Wait for job i of the pass once (i < 0: none), adding its figures; its
 * error is the pass's first (g->first_err) */
int rt_graph_wait_job(struct gctx *g, int i);

/* Count the (query, key) pairs segment sg attends with a selection of
 * sel_k keys (0: dense) against dense causal attention, into the pass's
 * and the session's figures (--bench, TX_DEBUG); *ex, *dense (may be NULL):
 * this segment's */
void rt_count_pairs(struct rt_fwd *f, const struct rt_seg *sg, int sel_k, uint64_t *ex,
                    uint64_t *dense);

struct tx_arch_ops;
/* Lays out the activations of a pass of T rows, R logits rows (dump: the
 * per-layer dumps too) into a (runtime/activations.c). */
void rt_act_layout(const glm_model_t *m, const struct tx_arch_ops *arch, const struct rt_fwd *f,
                   int T, int R, int dump, struct act_layout *a);

uint64_t blk_take(uint64_t *off, uint64_t bytes); /* 256-byte aligned offset */
tx_ref_t blk_act(struct gctx *g, uint64_t off);   /* activation buffer + off */
tx_ref_t blk_vec(struct gctx *g, int vec);        /* a vector (norm weight, bias) */
void blk_dbg(struct gctx *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Account one built command (r: its tx_cmd_* result): 0, or the sticky error */
int blk_emit(struct gctx *g, int r);

/* y[T x N] (+)= x W^T (+ bias) in the precision of W's layer type */
void blk_matmul(struct gctx *g, uint64_t y, uint64_t x, int mat, int tokens, int ld_x, int ld_y,
                int bias, unsigned flags, tx_bo_t *ybo);
/* round rows x cols (stride ld) of f32 through the NORM precision */
void blk_round_norm(struct gctx *g, uint64_t x, int rows, int cols, int ld);
void blk_rmsnorm(struct gctx *g, uint64_t y, uint64_t x, int vec, int rows, int dim, int ld_x,
                 int ld_y, float eps);
void blk_rope(struct gctx *g, tx_ref_t x, uint64_t pos, int tokens, int heads, int ld_token,
              int ld_head, int offset, int rot, int interleaved);
void blk_convert(struct gctx *g, tx_ref_t dst, tx_ref_t src, int rows, int cols, int ld_dst,
                 int ld_src, uint16_t ddt);
/* h += down(silu(gate(xn)) * up(xn)) */
void blk_swiglu_mlp(struct gctx *g, int wg, int wu, int wd, int T);

/* attention blocks: h += o_proj(attention(xn)) with the KV cache of layer l */
void blk_gqa_attention(struct gctx *g, int l); /* GQA, per-head q/k norm, partial RoPE */
/* MLA (DeepseekV3Attention) in pieces, for a module to combine per
 * segment with a key selector (the DSA indexer) or none:
 *   blk_mla_project(g, l); [blk_dsa_indexer_project(g, l);]
 *   for each segment: blk_mla_cache(); sel_k = [blk_dsa_indexer_select()];
 *                     blk_mla_attend(..., sel_k);
 *   blk_mla_unabsorb(g, l); blk_attn_out(g, l, heads * v_head_dim);
 * Absorbed MLA (issue 11): the cache holds the latent rows, W_UK is
 * absorbed into the query and W_UV applied after attention. */
void blk_mla_project(struct gctx *g, int l);
void blk_mla_cache(struct gctx *g, int l, const struct rt_seg *sg);
void blk_mla_attend(struct gctx *g, int l, const struct rt_seg *sg, int sel_k);
/* The expanded form of a prefill pass (a.xkeys > 0, chosen by
 * tx_mla_expand_keys): the segment's keys expanded per head from the
 * latent cache (kv_b_proj), attention over per-head K and V straight into
 * ao; blk_mla_project then makes no absorbed query and no
 * blk_mla_unabsorb follows. */
void blk_mla_attend_expanded(struct gctx *g, int l, const struct rt_seg *sg, int sel_k);
/* ao_h = W_UV_h aol_h per head (absorbed MLA's output out of latent space) */
void blk_mla_unabsorb(struct gctx *g, int l);
void blk_dsa_indexer_project(struct gctx *g, int l);
int blk_dsa_indexer_select(struct gctx *g, int l, const struct rt_seg *sg);
/* h += o_proj(attention output) */
void blk_attn_out(struct gctx *g, int l, int width);
/* feed-forward: h += dense SwiGLU MLP or MoE (+ shared experts) of xn */
void blk_ffn(struct gctx *g, int l);

/* a pre-norm residual decoder layer around an attention block */
void blk_decoder_layer(struct gctx *g, int l, void (*attn)(struct gctx *g, int l));

/* runtime/attn_mask.c: custom attention masks. The key bitmap's u64 words
 * per row of a pass (0: no masked position); stale masks dropped before a
 * pass; the bitmaps written into the activation buffer; a segment's
 * bitmap (0: unmasked) for ATTENTION / DSA_INDEX. rt_attn_mask_drop:
 * rt_internal.h. */
uint32_t rt_attn_mask_words(const struct rt_fwd *f);
void rt_attn_mask_prepare(struct rt_fwd *f);
void rt_attn_mask_fill(struct gctx *g);
int rt_attn_mask_ref(struct gctx *g, const struct rt_seg *sg, tx_ref_t *ref, uint32_t *ld);

#endif
