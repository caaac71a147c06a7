/* SPDX-License-Identifier: MIT */
/*
 * Private to libtx/arch: the attention families the architecture modules
 * share. attn_mla.c holds DeepSeek-style MLA (low-rank q and kv, one shared
 * rope key per token): its config fields, tensor shapes, KV geometry,
 * activation layout, runtime attention graph and glm-analyze figures, used
 * by deepseek_v3.c and glm_moe_dsa.c (which adds the DSA indexer on top).
 * attn_gqa.c holds GQA (q/k/v/o projections, optional biases and per-head
 * q/k RMSNorm), used by glm4_moe.c and qwen3_moe.c. Each module keeps what
 * differs: defaults, its own config fields and checks, the softmax scale,
 * chat template and glm-synth config. Not part of the SDK (hidden symbols).
 */
#ifndef TX_ARCH_ATTN_H
#define TX_ARCH_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include <tx-internal/tx_arch.h>

struct json_object;
struct rt_seg;

/* ---- MLA (attn_mla.c) ---------------------------------------------------- */

/* config.json: q_lora_rank (null refused, null_msg saying why after
 * "config.json: q_lora_rank: null "), kv_lora_rank, qk_nope_head_dim,
 * qk_rope_head_dim, v_head_dim (required) */
int tx_mla_parse_dims(struct json_object *root, struct glm_config *c, const char *null_msg,
                      char *err, size_t errsz);
/* qk_head_dim: checked against nope + rope when given, then set */
int tx_mla_parse_qk_head_dim(struct json_object *root, struct glm_config *c, char *err,
                             size_t errsz);
/* the MLA fields > 0 (CJ_POS order: q_lora_rank .. v_head_dim) */
int tx_mla_validate_dims(const struct glm_config *c, char *err, size_t errsz);
/* rope even, qk_head_dim / rotary_dim consistent */
int tx_mla_validate_rope(const struct glm_config *c, char *err, size_t errsz);
/* num_key_value_heads == num_attention_heads, partial_rotary_factor 1
 * (message names model_type), no use_qk_norm */
int tx_mla_validate_heads(const struct glm_config *c, const char *model_type, char *err,
                          size_t errsz);
/* q_lora_rank .. v_head_dim (not rope_interleave: each module writes it
 * where its key order has it) */
int tx_mla_to_json(const struct glm_config *c, struct json_object *o);
/* O / q_a / q_b / kv_a / kv_b projections, their optional biases and the
 * latent norms; a role of another attention family is TX_ENOENT, anything
 * else TX_ARCH_COMMON */
int tx_mla_layer_tensor(const struct glm_config *c, enum glm_tensor_role role,
                        struct glm_tensor_info *t);
/* the latent cache: K = [latent | k_rope] once per token, v = 0 (V is the
 * latent part of the K row); ref_k / ref_v: the reference's expanded
 * [k_nope_h | k_rope] / V_h per head; ik = 0 */
void tx_mla_kv_geometry(const struct glm_config *c, struct tx_arch_kv *kv);
/* qa, q, ckv, qabs, aol, ao; returns the widest latent (q_lora_rank,
 * kv_lora_rank + qk_rope_head_dim) */
int tx_mla_act_layout(const struct glm_config *c, uint64_t t, struct act_layout *a, uint64_t *o);
/* the keys of the pass's longest segment if its attention runs in the
 * expanded form (fewer MACs: prefill), else 0 (absorbed); form: -1
 * absorbed, 1 expanded, 0 choose (TX_MLA_FORM, read at model load) */
uint64_t tx_mla_expand_keys(const struct glm_config *c, const struct rt_fwd *f, int form);
/* blk_mla_project, [project(g, l)], per segment blk_mla_cache and
 * blk_mla_attend over the keys select (NULL: every causal key) chose,
 * blk_attn_out; project / select are the DSA indexer's */
void tx_mla_attention(struct gctx *g, int l, void (*project)(struct gctx *g, int l),
                      int (*select)(struct gctx *g, int l, const struct rt_seg *sg));
/* the decoder layer over MLA without a key selector (DeepseekV3DecoderLayer),
 * runtime graph (the reference: TX_REF_ATTN_MLA) */
void tx_mla_layer(struct gctx *g, int l);

/* ---- GQA (attn_gqa.c) ---------------------------------------------------- */

/* head_dim: getattr(config, "head_dim", hidden_size // num_attention_heads) */
void tx_gqa_parse_head_dim(struct json_object *root, struct glm_config *c);
/* q/k/v/o projections; q/k/v biases when bias, q_norm / k_norm (head_dim)
 * when qk_norm; other attention roles TX_ENOENT, the rest TX_ARCH_COMMON */
int tx_gqa_layer_tensor(const struct glm_config *c, enum glm_tensor_role role, int bias,
                        int qk_norm, struct glm_tensor_info *t);
/* the ops-table members every GQA module shares as they are */
void tx_gqa_kv_geometry(const struct glm_config *c, int l, struct tx_arch_kv *kv);
int tx_gqa_act_layout(const struct glm_config *c, uint64_t t, struct act_layout *a, uint64_t *o);
void tx_gqa_layer(struct gctx *g, int l);
/* layer_selects / select_k of a module without a key selector */
int tx_arch_layer_selects_none(const struct glm_config *c, int l);
int tx_arch_select_k_none(const struct glm_config *c);

#endif
