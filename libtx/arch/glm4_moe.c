// SPDX-License-Identifier: MIT
/*
 * Architecture module: Glm4MoeForCausalLM (model_type "glm4_moe": GLM-4.5,
 * 4.5-Air, 4.6, 4.7). GQA attention with q/k/v biases, optional per-head
 * q/k RMSNorm, partial NeoX RoPE; dense MLP in the first layers, then
 * sigmoid-routed MoE with shared experts. Formulas and the transformers
 * functions they mirror: docs/architectures.md, docs/glm-architectures.md.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/tx_tokenizer.h>

#include <tx-internal/tx_arch.h>
#include "arch/attn.h"
#include <tx-internal/tx_config_json.h>
#include "runtime/blocks.h"

/* ---- config.json --------------------------------------------------------- */

static void defaults(struct glm_config *c)
{
    /* Glm4MoeConfig */
    c->vocab_size = 151552;
    c->hidden_size = 4096;
    c->intermediate_size = 10944;
    c->num_hidden_layers = 46;
    c->num_attention_heads = 96;
    c->num_key_value_heads = 8;
    c->max_position_embeddings = 131072;
    c->moe_intermediate_size = 1408;
    c->n_routed_experts = 128;
    c->routed_scaling_factor = 1.0;
    c->first_k_dense_replace = 1;
    c->partial_rotary_factor = 0.5;
}

static int parse(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    tx_gqa_parse_head_dim(root, c);
    CJ_GET(cj_bool, "use_qk_norm", &c->use_qk_norm);
    return 0;
}

static int parse_layers(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    (void)root;
    (void)err;
    (void)errsz;
    c->rotary_dim = (int)(c->head_dim * c->partial_rotary_factor);
    return 0;
}

static int validate(const struct glm_config *c, char *err, size_t errsz)
{
    CJ_POS(head_dim);
    if (!(c->partial_rotary_factor > 0.0 && c->partial_rotary_factor <= 1.0))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: partial_rotary_factor: must be in (0, 1] (got %g)",
                         c->partial_rotary_factor);
    if (c->rotary_dim != (int)(c->head_dim * c->partial_rotary_factor))
        return tx_errbuf(err, errsz, TX_EINVAL, "config: rotary_dim inconsistent with head_dim");
    if (c->rotary_dim <= 0 || c->rotary_dim % 2 != 0)
        return tx_errbuf(
            err, errsz, TX_EINVAL,
            "config.json: head_dim (%d) * partial_rotary_factor (%g) = %d rotary dims: "
            "must be even and > 0",
            c->head_dim, c->partial_rotary_factor, c->rotary_dim);
    if (c->rope_interleave)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config: glm4_moe uses NeoX RoPE (rope_interleave 0)");
    return 0;
}

static int to_json(const struct glm_config *c, struct json_object *o)
{
    return cj_add(o, "use_qk_norm", json_object_new_boolean(c->use_qk_norm));
}

/* Glm4MoeAttention.scaling = head_dim ** -0.5 */
static double attn_scale(const struct glm_config *c)
{
    return 1.0 / sqrt((double)c->head_dim);
}

/* ---- tensors -------------------------------------------------------------- */

/* Glm4MoeAttention: GQA, q/k/v biases as attention_bias, q/k norm as
 * use_qk_norm; everything else as common */
static int layer_tensor(const struct glm_config *c, enum glm_tensor_role role, int layer,
                        int expert, struct glm_tensor_info *t)
{
    (void)expert;
    (void)layer;
    return tx_gqa_layer_tensor(c, role, c->attention_bias, c->use_qk_norm, t);
}

static const char *const aliases[] = {"glm4", "glm4.5", NULL};

const struct tx_arch_ops tx_arch_glm4_moe = {
    .id = GLM_ARCH_GLM4_MOE,
    .model_type = "glm4_moe",
    .class_name = "Glm4MoeForCausalLM",
    .family = "GLM-4.5",
    .models = "GLM-4.5/4.6/4.7",
    .aliases = aliases,
    .attn_short = "GQA",
    .attn_long = "GQA attention",
    .defaults = defaults,
    .parse_moe = tx_cfg_parse_moe_sigmoid,
    .parse = parse,
    .parse_mlp_layers = tx_cfg_parse_mlp_layers,
    .parse_layers = parse_layers,
    .validate = validate,
    .to_json = to_json,
    .attn_scale = attn_scale,
    .layer_tensor = layer_tensor,
    .layer_note = NULL,
    .layer_selects = tx_arch_layer_selects_none,
    .load_check = NULL,
    .kv_geometry = tx_gqa_kv_geometry,
    .act_layout = tx_gqa_act_layout,
    .select_k = tx_arch_select_k_none,
    .layer = tx_gqa_layer,
    .ref_attention = TX_REF_ATTN_GQA,
    .chat_format = TX_CHAT_GLM45,
};
