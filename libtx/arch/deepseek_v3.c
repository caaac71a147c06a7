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
#include "model/config_json.h"
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

/* ---- glm-analyze ---------------------------------------------------------- */

static void analyze_json(const struct glm_config *c, struct json_object *ar)
{
    tx_mla_analyze_json(c, ar);
    json_object_object_add(ar, "rope_scaling",
                           json_object_new_string(c->rope_type == GLM_ROPE_YARN ? "yarn" : "none"));
}

/* ---- glm-synth ------------------------------------------------------------ */

/* The synthetic checkpoint carries the project's Qwen3 tokenizer with GLM's
 * special tokens (tx_synth_glm_tokenizer), so it ships GLM-5's synthetic
 * template (tx_arch_glm5_synth_template, rendered as TX_CHAT_GLM5). A real
 * package ships DeepSeek's own template (<｜User｜> ... <｜Assistant｜>),
 * recognised as TX_CHAT_DEEPSEEK3, which is also the format of a package
 * without a template. */

struct preset {
    int hidden, inter, moe_inter, layers, dense, heads;
    int experts, topk, shared, n_group, topk_group;
    int q_lora, kv_lora, nope, rope, v_dim;
};

/* n_group > 1 in every preset: the group-limited routing runs */
static const struct preset presets[3] = {
    {64, 128, 64, 3, 1, 4, 8, 2, 1, 4, 2, 32, 32, 16, 16, 16},
    {128, 384, 64, 4, 1, 4, 16, 4, 1, 4, 2, 64, 64, 32, 32, 32},
    {1024, 2816, 512, 8, 1, 16, 48, 8, 1, 8, 4, 512, 256, 64, 32, 64},
};

/* the field set of DeepSeek-V3's config.json (deepseek-ai/DeepSeek-V3),
 * bfloat16 weights (no quantization_config: the real one is FP8) */
static struct json_object *synth_config(enum tx_synth_preset preset, int vocab_size,
                                        const int32_t *eos_ids, int n_eos, int32_t pad)
{
    const struct preset *p = &presets[preset];
    struct json_object *o = json_object_new_object();
    struct json_object *a = json_object_new_array();
    json_object_array_add(a, json_object_new_string("DeepseekV3ForCausalLM"));
    json_object_object_add(o, "architectures", a);
    struct json_object *eos = json_object_new_array();
    for (int i = 0; i < n_eos; i++)
        json_object_array_add(eos, json_object_new_int(eos_ids[i]));
    cj_put_b(o, "attention_bias", 0);
    cj_put_d(o, "attention_dropout", 0.0);
    cj_put_d(o, "aux_loss_alpha", 0.001);
    cj_put_i(o, "bos_token_id", 0); /* as the real config (unused by the runtime) */
    json_object_object_add(o, "eos_token_id", eos);
    cj_put_i(o, "pad_token_id", pad);
    cj_put_i(o, "ep_size", 1);
    cj_put_i(o, "first_k_dense_replace", p->dense);
    cj_put_s(o, "hidden_act", "silu");
    cj_put_i(o, "hidden_size", p->hidden);
    cj_put_d(o, "initializer_range", 0.02);
    cj_put_i(o, "intermediate_size", p->inter);
    cj_put_i(o, "kv_lora_rank", p->kv_lora);
    cj_put_i(o, "max_position_embeddings", 163840);
    cj_put_s(o, "model_type", "deepseek_v3");
    cj_put_i(o, "moe_intermediate_size", p->moe_inter);
    cj_put_i(o, "moe_layer_freq", 1);
    cj_put_i(o, "n_group", p->n_group);
    cj_put_i(o, "n_routed_experts", p->experts);
    cj_put_i(o, "n_shared_experts", p->shared);
    cj_put_b(o, "norm_topk_prob", 1);
    cj_put_i(o, "num_attention_heads", p->heads);
    cj_put_i(o, "num_experts_per_tok", p->topk);
    cj_put_i(o, "num_hidden_layers", p->layers);
    cj_put_i(o, "num_key_value_heads", p->heads);
    cj_put_i(o, "num_nextn_predict_layers", 1);
    cj_put_i(o, "pretraining_tp", 1);
    cj_put_i(o, "q_lora_rank", p->q_lora);
    cj_put_i(o, "qk_nope_head_dim", p->nope);
    cj_put_i(o, "qk_rope_head_dim", p->rope);
    cj_put_d(o, "rms_norm_eps", 1e-6);
    struct json_object *rs = json_object_new_object();
    cj_put_d(rs, "beta_fast", 32);
    cj_put_d(rs, "beta_slow", 1);
    cj_put_d(rs, "factor", 40);
    cj_put_d(rs, "mscale", 1.0);
    cj_put_d(rs, "mscale_all_dim", 1.0);
    cj_put_i(rs, "original_max_position_embeddings", 4096);
    cj_put_s(rs, "type", "yarn");
    json_object_object_add(o, "rope_scaling", rs);
    cj_put_d(o, "rope_theta", 10000.0);
    cj_put_d(o, "routed_scaling_factor", 2.5);
    cj_put_s(o, "scoring_func", "sigmoid");
    cj_put_b(o, "seq_aux", 1);
    cj_put_b(o, "tie_word_embeddings", 0);
    cj_put_i(o, "topk_group", p->topk_group);
    cj_put_s(o, "topk_method", "noaux_tc");
    cj_put_s(o, "torch_dtype", "bfloat16");
    cj_put_s(o, "transformers_version", "4.33.1");
    cj_put_b(o, "use_cache", 1);
    cj_put_i(o, "v_head_dim", p->v_dim);
    cj_put_i(o, "vocab_size", vocab_size);
    return o;
}

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
    .cost = tx_mla_cost,
    .analyze_json = analyze_json,
    .chat_format = TX_CHAT_DEEPSEEK3,
    .chat_template = tx_arch_glm5_synth_template,
    .synth_config = synth_config,
};
