/* SPDX-License-Identifier: MIT */
/*
 * The FP32 reference's model, session and forward state, and its shared
 * blocks (reference/ref_blocks.c), used by glm_reference.c and the
 * architecture modules' ref_layer() (libtx/arch/).
 */
#ifndef TX_REF_BLOCKS_H
#define TX_REF_BLOCKS_H

#include <stdint.h>
#include <stdlib.h>

#include <tx/glm_reference.h>

#include "common/error.h"
#include "reference/ref_internal.h"

/* ------------------------------------------------------------------------ */
/* model and weights */

struct lazy_slot {
    int layer, expert, valid;
    float *buf;
    int64_t cap;
};

struct glm_ref_model {
    struct glm_config cfg;
    struct glm_ref_options opt;
    glm_ref_tensor_fn get;
    void *get_ctx;
    struct txref_pool *pool;
    float *inv_freq; /* rotary_dim / 2 */
    /* preloaded weights: model-level + per layer [role] + experts */
    float *model_w[3]; /* EMBED, FINAL_NORM, LM_HEAD */
    float **layer_w;   /* [L * GLM_T_ROLE_COUNT] */
    float **expert_w;  /* [L * E * 3] (sparse layers only) */
    struct lazy_slot slot[GLM_T_ROLE_COUNT];
};

/* ------------------------------------------------------------------------ */
/* sessions */

struct glm_ref_session {
    struct glm_ref_model *m;
    int max_tokens;
    int pos;
    float **k_cache;  /* per layer [max_tokens x kdim] */
    float **v_cache;  /* per layer [max_tokens x vdim] */
    float **ik_cache; /* glm_moe_dsa full layers: [max_tokens x index_head_dim] */
    int64_t kdim, vdim;
};

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

/* The reference reports failures with tx_errbuf (common/error.h): the
 * message goes into err and tx_last_error(), the TX_E* code is returned.
 * txref_fail is its old name, kept only for modules written against it. */
#define txref_fail tx_errbuf

int64_t txref_numel(const struct glm_tensor_info *t);
/* one tensor from the weight provider into dst */
int txref_fetch(struct glm_ref_model *m, const struct glm_tensor_info *t, float *dst, char *err,
                size_t errsz);

/* The weights of (role, layer, expert): *out = NULL when this config has no
 * such tensor (e.g. absent biases). */
int txref_w(struct glm_ref_model *m, enum glm_tensor_role role, int layer, int expert,
            const float **out, char *err, size_t errsz);

/* attention blocks: y (n x hidden) = attention of x (the normed rows) with
 * the session's caches of layer l */
/* GQA (Glm4MoeAttention) */
int txref_gqa_attention(struct ref_fwd *f, int l, const float *x, float *y);
/* A key selector of the MLA block: after the cache write of layer l, fills
 * f->sel / f->n_sel and returns 1 if the attention uses them, 0 for every
 * causal key, <0 on error (message in f->err). */
typedef int (*txref_select_fn)(struct ref_fwd *f, int l, const float *x, const float *q_lat);
/* MLA (DeepseekV3Attention), keys restricted by `select` (NULL: all) */
int txref_mla_attention(struct ref_fwd *f, int l, const float *x, float *y, txref_select_fn select);
/* the DSA lightning indexer as an MLA key selector (GlmMoeDsaIndexer) */
int txref_dsa_select(struct ref_fwd *f, int l, const float *x, const float *q_lat);

/* the pre-norm residual decoder layer around an attention block, with the
 * dense MLP or the MoE of layer l: h (n x hidden) updated in place */
int txref_decoder_layer(struct ref_fwd *f, int l, float *h,
                        int (*attn)(struct ref_fwd *f, int l, const float *x, float *y));

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
