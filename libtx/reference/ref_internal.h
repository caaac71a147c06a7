/* SPDX-License-Identifier: MIT */
/* Internal helpers of the FP32 reference forward (libtx/reference/). */
#ifndef TX_REF_INTERNAL_H
#define TX_REF_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <tx/tx_error.h>

#include "reference/ref_real.h"

/* A tiny persistent thread pool: txref_parallel_for() splits [0, total) into
 * one contiguous range per thread (the caller's thread takes the first). */
typedef void (*txref_range_fn)(void *ctx, int64_t begin, int64_t end);

struct txref_pool {
    pthread_t *threads;
    int n_workers; /* threads besides the caller */
    pthread_mutex_t mu;
    pthread_cond_t start;
    pthread_cond_t done;
    txref_range_fn fn;
    void *ctx;
    int64_t total;
    uint64_t generation;
    int pending;
    int quit;
};

int txref_pool_create(struct txref_pool **out, int n_threads);
void txref_pool_destroy(struct txref_pool *p);
/* pool may be NULL (runs inline) */
void txref_parallel_for(struct txref_pool *p, int64_t total, txref_range_fn fn, void *ctx);

/* y[t][o] = sum_i x[t][i] * w[o][i] + (b ? b[o] : 0), t < n, o < out */
void txref_linear(struct txref_pool *p, const ref_real *x, int64_t n, int64_t in, const ref_real *w,
                  const ref_real *b, int64_t out, ref_real *y);

ref_real txref_dot(const ref_real *a, const ref_real *b, int64_t n);

/* glm_ref_rope with cos and sin multiplied by attn_factor (in f32, as
 * transformers' `cos * attention_scaling`): YaRN's attention_factor
 * (libtx/model/rope_scaling.h). attn_factor 1.0f is glm_ref_rope exactly.
 * The device's ROPE with TX8_ROPE_F_ATTN_FACTOR computes the same. */
void txref_rope_scaled(ref_real *x, int dim, int interleaved, const ref_real *inv_freq, int64_t pos,
                       ref_real attn_factor);

/* Softmax router of one token, as transformers' Qwen3MoeSparseMoeBlock:
 * p = softmax(logits[0..experts)) (f32 result, double sum), the top_k
 * experts by p, descending (ties: lower index) into ids[top_k], their p into
 * weights[top_k], divided by the sum of the k when norm_topk_prob. No bias,
 * no groups, no scaling. The device's MOE_ROUTE with TX8_ROUTE_F_SOFTMAX
 * computes the same. Returns 0, TX_EINVAL (bad sizes, NULL) or TX_ENOMEM. */
int txref_route_softmax(const ref_real *logits, int experts, int top_k, int norm_topk_prob,
                        int32_t *ids, ref_real *weights);

/* tx-internal/glm_reference.h's building blocks in ref_real (the same functions in
 * the FP32 build, their txref64_* twins in the float64 one) */
void glm_ref_rmsnorm(const ref_real *x, const ref_real *w, int n, float eps, ref_real *out);
void glm_ref_layernorm(const ref_real *x, const ref_real *w, const ref_real *b, int n, float eps,
                       ref_real *out);
void glm_ref_rope(ref_real *x, int dim, int interleaved, const ref_real *inv_freq, int64_t pos);
int glm_ref_route(const struct glm_config *cfg, const ref_real *logits, const ref_real *bias,
                  int32_t *experts, ref_real *weights);

/* What a hook (float, tx-internal/glm_reference.h) sees of x[0..n): x itself in the
 * FP32 reference; in the float64 one a float copy in *tmp (free it; NULL
 * and a NULL return when out of memory). */
const float *txref_hook_view(const ref_real *x, int64_t n, float **tmp);

#endif
