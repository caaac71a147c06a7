/* SPDX-License-Identifier: MIT */
/*
 * The host reference's arithmetic type. The reference sources
 * (glm_reference.c, ref_blocks.c, ref_ops.c) are compiled twice:
 *   - as they are: the FP32 reference (ref_real = float), the public
 *     glm_ref_* functions of tx-internal/glm_reference.h;
 *   - with TXREF_F64 defined (glm_reference64.c, ref_blocks64.c,
 *     ref_ops64.c): the float64 reference (ref_real = double), every
 *     external name renamed below to txref64_*, reached through
 *     glm_ref_model_create64() and then the same glm_ref_* calls.
 * Weights come from the provider in ref_real (a float64 provider can hand
 * over exactly dequantised FP8 weights: an E4M3 value times an f32 scale
 * has at most 28 significant bits); the hooks and the logits the caller
 * sees stay float (tx-internal/glm_reference.h).
 */
#ifndef TX_REF_REAL_H
#define TX_REF_REAL_H

#include <math.h>
#include <stdint.h>

/* the public declarations keep their float types and names */
#include <tx-internal/glm_reference.h>

#ifdef TXREF_F64
typedef double ref_real;
#define REF_EXP exp
/* struct tags */
#define glm_ref_model glm_ref64_model
#define glm_ref_session glm_ref64_session
#define ref_fwd ref64_fwd
#define glm_ref_tensor_fn glm_ref_tensor64_fn
/* the public entry points (dispatched to by glm_reference.c) */
#define glm_ref_model_create txref64_model_create
#define glm_ref_model_destroy txref64_model_destroy
#define glm_ref_model_config txref64_model_config
#define glm_ref_session_create txref64_session_create
#define glm_ref_session_destroy txref64_session_destroy
#define glm_ref_session_reset txref64_session_reset
#define glm_ref_session_pos txref64_session_pos
#define glm_ref_forward txref64_forward
#define glm_ref_session_set_attn_mask txref64_session_set_attn_mask
/* the building blocks */
#define glm_ref_rmsnorm txref64_rmsnorm
#define glm_ref_layernorm txref64_layernorm
#define glm_ref_rope txref64_rope
#define glm_ref_route txref64_route
#define txref_pool_create txref64_pool_create
#define txref_pool_destroy txref64_pool_destroy
#define txref_parallel_for txref64_parallel_for
#define txref_linear txref64_linear
#define txref_dot txref64_dot
#define txref_rope_scaled txref64_rope_scaled
#define txref_route_softmax txref64_route_softmax
#define txref_hook_view txref64_hook_view
#define txref_numel txref64_numel
#define txref_fetch txref64_fetch
#define txref_w txref64_w
#define txref_key_visible txref64_key_visible
#define txref_gqa_attention txref64_gqa_attention
#define txref_mla_attention txref64_mla_attention
#define txref_dsa_select txref64_dsa_select
#define txref_decoder_layer txref64_decoder_layer
#define txref_arch_layer txref64_arch_layer
#else
typedef float ref_real;
#define REF_EXP expf
#endif

/* The float64 reference's entry points, for glm_reference.c's dispatch
 * (a model or session made by glm_ref_model_create64 starts with a
 * nonzero `f64`). */
struct glm_ref64_model;
struct glm_ref64_session;
int txref64_model_create(const struct glm_config *cfg, glm_ref_tensor64_fn get, void *get_ctx,
                         const struct glm_ref_options *opt, struct glm_ref64_model **out, char *err,
                         size_t errsz);
void txref64_model_destroy(struct glm_ref64_model *m);
const struct glm_config *txref64_model_config(const struct glm_ref64_model *m);
int txref64_session_create(struct glm_ref64_model *m, int max_tokens,
                           struct glm_ref64_session **out, char *err, size_t errsz);
void txref64_session_destroy(struct glm_ref64_session *s);
void txref64_session_reset(struct glm_ref64_session *s);
int txref64_session_pos(const struct glm_ref64_session *s);
int txref64_forward(struct glm_ref64_session *s, const int32_t *tokens, int n, float *logits,
                    const struct glm_ref_hooks *hooks, char *err, size_t errsz);
int txref64_session_set_attn_mask(struct glm_ref64_session *s, const struct glm_attn_mask *m,
                                  char *err, size_t errsz);

#endif
