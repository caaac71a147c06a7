// SPDX-License-Identifier: MIT
/*
 * Architecture module: DeepseekV3ForCausalLM (model_type "deepseek_v3":
 * DeepSeek-V3, V3.1, R1, Kimi-K2 ship the same class). MLA attention
 * (low-rank q and kv, one shared rope key per token, interleaved RoPE with
 * YaRN scaling) over every causal key (no DSA indexer); dense MLP in the
 * first first_k_dense_replace layers, then the sigmoid-routed,
 * group-limited (n_group / topk_group) MoE with shared experts. Formulas
 * and the transformers functions they mirror: docs/architectures.md
 * ("deepseek_v3"). Errors: TX_E* codes (tx/tx_error.h) like the other modules
 * (tx_errbuf).
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
    /* DeepseekV3Config.__init__ (configuration_deepseek_v3.py) */
    c->vocab_size = 129280;
    c->hidden_size = 7168;
    c->intermediate_size = 18432;
    c->moe_intermediate_size = 2048;
    c->num_hidden_layers = 61;
    c->num_attention_heads = 128;
    c->num_key_value_heads = 128;
    c->n_shared_experts = 1;
    c->n_routed_experts = 256;
    c->routed_scaling_factor = 2.5;
    c->kv_lora_rank = 512;
    c->q_lora_rank = 1536;
    c->qk_rope_head_dim = 64;
    c->v_head_dim = 128;
    c->qk_nope_head_dim = 128;
    c->n_group = 8;
    c->topk_group = 4;
    c->num_experts_per_tok = 8;
    c->first_k_dense_replace = 3;
    c->norm_topk_prob = 1;
    c->max_position_embeddings = 4096;
    c->rms_norm_eps = 1e-6;
    c->rope_theta = 10000.0;
    c->bos_token_id = 0;
    c->n_eos = 1;
    c->eos_token_ids[0] = 1;
    c->head_dim = 64; /* the config sets head_dim = qk_rope_head_dim */
    c->partial_rotary_factor = 1.0;
    c->rope_interleave = 1; /* rope_interleave=True */
}

static int parse(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    /* q_lora_rank null is DeepSeek-V2-Lite's plain q_proj: not DeepSeek-V3 */
    int rc = tx_mla_parse_dims(root, c,
                               "(a plain q_proj, DeepSeek-V2-Lite) is not supported for "
                               "deepseek_v3: the MLA blocks read the q latent",
                               err, errsz);
    if (rc < 0)
        return rc;
    CJ_GET(cj_bool, "rope_interleave", &c->rope_interleave);
    rc = tx_mla_parse_qk_head_dim(root, c, err, errsz);
    if (rc < 0)
        return rc;
    /* DeepseekV3Config: head_dim = qk_rope_head_dim (what the rotary
     * embedding sizes itself by); an explicit head_dim is kept as given */
    if (!cj_field(root, "head_dim"))
        c->head_dim = c->qk_rope_head_dim;
    return 0;
}

static int parse_layers(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    (void)root;
    (void)err;
    (void)errsz;
    c->rotary_dim = c->qk_rope_head_dim;
    return 0;
}

static int validate(const struct glm_config *c, char *err, size_t errsz)
{
    int rc = tx_mla_validate_dims(c, err, errsz);
    if (rc == 0)
        rc = tx_mla_validate_rope(c, err, errsz);
    if (rc == 0)
        rc = tx_mla_validate_heads(c, "deepseek_v3", err, errsz);
    if (rc < 0)
        return rc;
    if (c->index_topk || c->index_head_dim || c->index_n_heads)
        return tx_errbuf(err, errsz, TX_EINVAL,
                       "config: index_topk/index_head_dim/index_n_heads are glm_moe_dsa fields "
                       "(deepseek_v3 has no DSA indexer)");
    return 0;
}

static int to_json(const struct glm_config *c, struct json_object *o)
{
    int bad = tx_mla_to_json(c, o);
    bad |= cj_add(o, "rope_interleave", json_object_new_boolean(c->rope_interleave));
    return bad;
}

/* DeepseekV3Attention.__init__: scaling = qk_head_dim ** -0.5, times
 * yarn_get_mscale(factor, mscale_all_dim) ** 2 when the rope is scaled and
 * mscale_all_dim is set */
static double attn_scale(const struct glm_config *c)
{
    return tx_cfg_rope_softmax_mult(c) / sqrt((double)c->qk_head_dim);
}

/* ---- tensors -------------------------------------------------------------- */

/* the attention block's tensors (DeepseekV3Attention: MLA, attn_mla.c);
 * everything else as common (DeepseekV3MLP, DeepseekV3TopkRouter,
 * DeepseekV3MoE) */
static int layer_tensor(const struct glm_config *c, enum glm_tensor_role role, int layer,
                        int expert, struct glm_tensor_info *t)
{
    (void)expert;
    (void)layer;
    return tx_mla_layer_tensor(c, role, t);
}

static const char *layer_note(const struct glm_config *c, int layer)
{
    (void)c;
    (void)layer;
    return "";
}

/* ---- runtime ------------------------------------------------------------- */

static void kv_geometry(const struct glm_config *c, int l, struct tx_arch_kv *kv)
{
    (void)l;
    tx_mla_kv_geometry(c, kv);
}

/* DeepseekV3DecoderLayer / DeepseekV3Attention: MLA over every causal key
 * (tx_mla_layer and TX_REF_ATTN_MLA in the ops table) */

static const char *const aliases[] = {"deepseek3", "dsv3", "kimi-k2", NULL};

const struct tx_arch_ops tx_arch_deepseek_v3 = {
    .id = GLM_ARCH_DEEPSEEK_V3,
    .model_type = "deepseek_v3",
    .class_name = "DeepseekV3ForCausalLM",
    .family = "DeepSeek-V3",
    .models = "DeepSeek-V3/R1, Kimi-K2",
    .aliases = aliases,
    .attn_short = "MLA",
    .attn_long = "MLA attention",
    .defaults = defaults,
    .parse_moe = tx_cfg_parse_moe_sigmoid,
    .parse = parse,
    .parse_mlp_layers = tx_cfg_parse_mlp_layers,
    .parse_layers = parse_layers,
    .validate = validate,
    .to_json = to_json,
    .attn_scale = attn_scale,
    .layer_tensor = layer_tensor,
    .layer_note = layer_note,
    .layer_selects = tx_arch_layer_selects_none,
    .load_check = NULL,
    .kv_geometry = kv_geometry,
    .act_layout = tx_mla_act_layout,
    .expand_keys = tx_mla_expand_keys,
    .select_k = tx_arch_select_k_none,
    .layer = tx_mla_layer,
    .ref_attention = TX_REF_ATTN_MLA,
    .chat_format = TX_CHAT_DEEPSEEK3,
};
