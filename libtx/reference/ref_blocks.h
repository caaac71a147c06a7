/* SPDX-License-Identifier: MIT */
/*
 * The FP32 reference's model, session and forward state, and its shared
 * blocks (reference/ref_blocks.c), used by glm_reference.c and the
 * decoder layer of txref_arch_layer() (libtx/arch/ names the attention).
 */
#ifndef TX_REF_BLOCKS_H
#define TX_REF_BLOCKS_H

#include <stdint.h>
#include <stdlib.h>

#include <tx-internal/glm_reference.h>

#include <tx-internal/tx_errors.h>
#include "reference/ref_internal.h"

/* ------------------------------------------------------------------------ */
/* model and weights */

struct lazy_slot {
    int layer, expert, valid;
    ref_real *buf;
    int64_t cap;
};

struct glm_ref_model {
    int f64; /* first: 1 in the float64 build (ref_real.h) */
    struct glm_config cfg;
    struct glm_ref_options opt;
    glm_ref_tensor_fn get;
    void *get_ctx;
    struct txref_pool *pool;
    ref_real *inv_freq; /* rotary_dim / 2 */
    /* preloaded weights: model-level + per layer [role] + experts */
    ref_real *model_w[3]; /* EMBED, FINAL_NORM, LM_HEAD */
    ref_real **layer_w;   /* [L * GLM_T_ROLE_COUNT] */
    ref_real **expert_w;  /* [L * E * 3] (sparse layers only) */
    struct lazy_slot slot[GLM_T_ROLE_COUNT];
};

/* ------------------------------------------------------------------------ */
/* sessions */

struct glm_ref_session {
    int f64; /* first, as the model's */
    struct glm_ref_model *m;
    int max_tokens;
    int pos;
    ref_real **k_cache;  /* per layer [max_tokens x kdim] */
    ref_real **v_cache;  /* per layer [max_tokens x vdim] */
    ref_real **ik_cache; /* glm_moe_dsa full layers: [max_tokens x index_head_dim] */
    int64_t kdim, vdim;
    /* custom attention mask of positions [am_base, am_base + am_n) (am_n 0:
     * none): row i's ranges am_ranges[2k, 2k + 1), k in [am_row[i], am_row[i + 1]) */
    int am_base, am_n;
    int32_t *am_row, *am_ranges;
};

/* whether query position p of session s may attend key position j (j <= p):
 * its custom attention mask, else every causal key */
int txref_key_visible(const struct glm_ref_session *s, int p, int j);

/* ------------------------------------------------------------------------ */
/* forward pass state for one call */

struct ref_fwd {
    struct glm_ref_session *s;
    struct glm_ref_model *m;
    const struct glm_config *c;
    const struct glm_ref_hooks *hooks;
    int n, pos0;
    char *err;
    size_t errsz;
    /* DSA selection of the most recent full indexer layer (this call) */
    int32_t *sel, *n_sel;
    int sel_stride, have_sel;
};

/* The reference reports failures with tx_errbuf (tx-internal/tx_errors.h): the
 * message goes into err and tx_last_error(), the TX_E* code is returned.
 * txref_fail is its old name, kept only for modules written against it. */
#define txref_fail tx_errbuf

int64_t txref_numel(const struct glm_tensor_info *t);
/* one tensor from the weight provider into dst */
int txref_fetch(struct glm_ref_model *m, const struct glm_tensor_info *t, ref_real *dst, char *err,
                size_t errsz);

/* The weights of (role, layer, expert): *out = NULL when this config has no
 * such tensor (e.g. absent biases). */
int txref_w(struct glm_ref_model *m, enum glm_tensor_role role, int layer, int expert,
            const ref_real **out, char *err, size_t errsz);

/* attention blocks: y (n x hidden) = attention of x (the normed rows) with
 * the session's caches of layer l */
/* GQA (Glm4MoeAttention) */
int txref_gqa_attention(struct ref_fwd *f, int l, const ref_real *x, ref_real *y);
/* A key selector of the MLA block: after the cache write of layer l, fills
 * f->sel / f->n_sel and returns 1 if the attention uses them, 0 for every
 * causal key, <0 on error (message in f->err). */
typedef int (*txref_select_fn)(struct ref_fwd *f, int l, const ref_real *x, const ref_real *q_lat);
/* MLA (DeepseekV3Attention), keys restricted by `select` (NULL: all) */
int txref_mla_attention(struct ref_fwd *f, int l, const ref_real *x, ref_real *y,
                        txref_select_fn select);
/* the DSA lightning indexer as an MLA key selector (GlmMoeDsaIndexer) */
int txref_dsa_select(struct ref_fwd *f, int l, const ref_real *x, const ref_real *q_lat);

/* the pre-norm residual decoder layer around an attention block, with the
 * dense MLP or the MoE of layer l: h (n x hidden) updated in place */
int txref_decoder_layer(struct ref_fwd *f, int l, ref_real *h,
                        int (*attn)(struct ref_fwd *f, int l, const ref_real *x, ref_real *y));

/* One decoder layer of the model's architecture: txref_decoder_layer
 * around the attention its module names (tx_arch_ops.ref_attention). */
int txref_arch_layer(struct ref_fwd *f, int l, ref_real *h);

/* In a function with `int ret` and an `out:` label: */
#define TRY(x)                                                                                     \
    do {                                                                                           \
        int rc_ = (x);                                                                             \
        if (rc_ < 0) {                                                                             \
            ret = rc_;                                                                             \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

#define ALLOC(p, count)                                                                            \
    do {                                                                                           \
        (p) = malloc(sizeof(*(p)) * (size_t)(count) + 1);                                          \
        if (!(p)) {                                                                                \
            ret = tx_errbuf(f->err, f->errsz, TX_ENOMEM, "reference: out of memory");              \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

#endif
