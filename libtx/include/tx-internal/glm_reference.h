/* SPDX-License-Identifier: MIT */
/*
 * Independent FP32 (and float64) host reference forward pass of the GLM architectures
 * (GLM-4.5/4.6/4.7 Glm4MoeForCausalLM, GLM-5/5.1 GlmMoeDsaForCausalLM),
 * computing what Hugging Face transformers computes. Plain C, no device
 * code; used by glm-inference --validate and by the tests.
 *
 * Every formula and the transformers function it mirrors:
 * docs/glm-architectures.md.
 *
 * Errors: 0 or a negative TX_E* code (tx/tx_error.h), with a message in
 * err[0..errsz-1] when err is not NULL (same convention as glm_config.h).
 */
#ifndef TX_GLM_REFERENCE_H
#define TX_GLM_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include <tx/glm_config.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Weight provider: fill dst (t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1)
 * floats, row-major in PyTorch order, Linear weights [out, in]) with the
 * tensor named t->name (the real Hugging Face name), converted to float.
 * Return 0, or a negative TX_E* code with a message in err. */
typedef int (*glm_ref_tensor_fn)(void *ctx, const struct glm_tensor_info *t, float *dst, char *err,
                                 size_t errsz);

struct glm_ref_options {
    /* 0: convert every weight to FP32 once at creation (fast forwards,
     *    4 bytes per parameter of host memory);
     * 1: fetch weights from the provider when a layer needs them (memory is
     *    one layer's weights; every forward re-reads them). */
    int lazy;
    /* worker threads for matrix products and attention (0 or 1 = none) */
    int n_threads;
    /* glm_moe_dsa only, for tests: ignore the DSA indexer and attend to every
     * causal key (the indexer weights are still loaded). */
    int disable_indexer;
};

struct glm_ref_model;
struct glm_ref_session;

TX_API int glm_ref_model_create(const struct glm_config *cfg, glm_ref_tensor_fn get, void *get_ctx,
                                const struct glm_ref_options *opt, struct glm_ref_model **out,
                                char *err, size_t errsz);
/* The float64 reference: the same forward with every weight, activation,
 * cache and sum in double (transformers' float32 inv_freq and eps are
 * kept). The provider fills doubles, so an FP8 weight can be handed over
 * dequantised exactly (tx_tensor_read_f64). The model works with every
 * glm_ref_* function below; the hooks and the logits are rounded once to
 * float at the end. */
typedef int (*glm_ref_tensor64_fn)(void *ctx, const struct glm_tensor_info *t, double *dst,
                                   char *err, size_t errsz);
TX_API int glm_ref_model_create64(const struct glm_config *cfg, glm_ref_tensor64_fn get,
                                  void *get_ctx, const struct glm_ref_options *opt,
                                  struct glm_ref_model **out, char *err, size_t errsz);
TX_API void glm_ref_model_destroy(struct glm_ref_model *m);
TX_API const struct glm_config *glm_ref_model_config(const struct glm_ref_model *m);

/* A session is one sequence with its KV cache (and the DSA indexer key
 * cache) for up to max_tokens positions. */
TX_API int glm_ref_session_create(struct glm_ref_model *m, int max_tokens,
                                  struct glm_ref_session **out, char *err, size_t errsz);
TX_API void glm_ref_session_destroy(struct glm_ref_session *s);
TX_API void glm_ref_session_reset(struct glm_ref_session *s);    /* back to position 0 */
TX_API int glm_ref_session_pos(const struct glm_ref_session *s); /* tokens processed so far */

/* Observation hooks (all optional). `h` is only valid during the call. */
struct glm_ref_stats {
    double mean, std, max_abs; /* over all n_tokens * hidden values */
};

struct glm_ref_hooks {
    void *ctx;
    /* after decoder layer `layer` (residual stream, [n_tokens x hidden]);
     * called once more with layer == num_hidden_layers for the output of the
     * final RMSNorm (the lm_head input). */
    void (*layer_output)(void *ctx, int layer, const float *h, int n_tokens, int hidden,
                         const struct glm_ref_stats *st);
    /* routed experts of a MoE layer: experts/weights [n_tokens x k] in
     * descending order of the (biased) selection score; weights are the final
     * gate values (normalised, times routed_scaling_factor). */
    void (*router)(void *ctx, int layer, int n_tokens, int k, const int32_t *experts,
                   const float *weights);
    /* DSA key selection of a glm_moe_dsa layer (full or shared): for query i
     * (position pos0 + i) the n_sel[i] selected key positions, ascending, at
     * sel[i * stride ...]. */
    void (*indexer)(void *ctx, int layer, int n_tokens, int pos0, const int32_t *sel,
                    const int32_t *n_sel, int stride);
};

struct glm_attn_mask;
/* A custom attention mask for the session's next m->n_tokens positions
 * (the semantics of glm_session_set_attn_mask, tx/glm.h): query p + i
 * attends key position j only if j < p, j == p + i, or j - p lies in a
 * range of row i with j <= p + i; the DSA indexer chooses its top-k among
 * those keys. Copied; NULL removes it; glm_ref_session_reset removes it.
 * A malformed mask: TX_EINVAL naming the row and range. */
TX_API int glm_ref_session_set_attn_mask(struct glm_ref_session *s, const struct glm_attn_mask *m,
                                         char *err, size_t errsz);

/* Runs n tokens at positions pos..pos+n-1 of the session (prefill when
 * n > 1, decode when n == 1; any split gives the same logits as one call).
 * logits (may be NULL): [n x vocab_size]. */
TX_API int glm_ref_forward(struct glm_ref_session *s, const int32_t *tokens, int n, float *logits,
                           const struct glm_ref_hooks *hooks, char *err, size_t errsz);

/* ---- building blocks (exported for tests and device comparisons) ------- */

/* transformers RMSNorm: out = w * (x / sqrt(mean(x^2) + eps)) */
TX_API void glm_ref_rmsnorm(const float *x, const float *w, int n, float eps, float *out);
/* torch.nn.LayerNorm: out = (x - mean) / sqrt(var + eps) * w + b (biased var) */
TX_API void glm_ref_layernorm(const float *x, const float *w, const float *b, int n, float eps,
                              float *out);
/* RoPE on x[0..dim) in place at position pos with inv_freq[0..dim/2):
 * interleaved == 0: NeoX / rotate_half pairs (i, i + dim/2);
 * interleaved == 1: adjacent pairs (2i, 2i + 1). */
TX_API void glm_ref_rope(float *x, int dim, int interleaved, const float *inv_freq, int64_t pos);
/* MoE router for one token: logits[n_routed_experts] (router linear output),
 * bias = e_score_correction_bias. Writes num_experts_per_tok expert ids and
 * gate weights (descending biased score). */
TX_API int glm_ref_route(const struct glm_config *cfg, const float *logits, const float *bias,
                         int32_t *experts, float *weights);

/* Deterministic synthetic weights for tests and synthetic checkpoints: fills
 * dst for tensor t from (seed, t->name): norm weights near 1, biases and
 * e_score_correction_bias small, Linear weights ~ U(-a, a) with
 * a = sqrt(3 / in_features) (unit-variance outputs), embedding rows ~ U(-1, 1). */
TX_API void glm_ref_synth_weight(const struct glm_tensor_info *t, uint64_t seed, float *dst);

#ifdef __cplusplus
}
#endif
#endif
