/* SPDX-License-Identifier: MIT */
/*
 * The tools' side of the DeepseekV3ForCausalLM module (libtx/arch/deepseek_v3.c):
 * glm-analyze's figures and glm-synth's config.json and chat template.
 */
#include "common/arch_tools.h"

#include <string.h>

#include <json-c/json.h>

#include <tx-internal/tx_config_json.h>

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

const struct tx_arch_tools tx_arch_tools_deepseek_v3 = {
    .id = GLM_ARCH_DEEPSEEK_V3,
    .cost = tx_mla_cost,
    .analyze_json = analyze_json,
    .chat_template = tx_arch_glm5_synth_template,
    .synth_config = synth_config,
};
