// SPDX-License-Identifier: MIT
/*
 * GLM config.json parsing, validation, serialisation and tensor naming.
 * The samples are written the way the released checkpoints ship them.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include <tx/tx_error.h>
#include <tx/glm_config.h>
#include "tx_test_main.h"

/* zai-org/GLM-4.5-Air config.json (transformers 4.54 era: rope_theta,
 * rope_scaling null, torch_dtype) */
static const char *AIR_JSON = "{\n"
                              "  \"architectures\": [\"Glm4MoeForCausalLM\"],\n"
                              "  \"attention_bias\": true,\n"
                              "  \"attention_dropout\": 0.0,\n"
                              "  \"pad_token_id\": 151329,\n"
                              "  \"eos_token_id\": [151329, 151336, 151338],\n"
                              "  \"head_dim\": 128,\n"
                              "  \"hidden_act\": \"silu\",\n"
                              "  \"hidden_size\": 4096,\n"
                              "  \"partial_rotary_factor\": 0.5,\n"
                              "  \"initializer_range\": 0.02,\n"
                              "  \"intermediate_size\": 10944,\n"
                              "  \"max_position_embeddings\": 131072,\n"
                              "  \"model_type\": \"glm4_moe\",\n"
                              "  \"moe_intermediate_size\": 1408,\n"
                              "  \"norm_topk_prob\": true,\n"
                              "  \"num_attention_heads\": 96,\n"
                              "  \"n_group\": 1,\n"
                              "  \"topk_group\": 1,\n"
                              "  \"n_routed_experts\": 128,\n"
                              "  \"n_shared_experts\": 1,\n"
                              "  \"routed_scaling_factor\": 1.0,\n"
                              "  \"num_experts_per_tok\": 8,\n"
                              "  \"first_k_dense_replace\": 1,\n"
                              "  \"num_hidden_layers\": 46,\n"
                              "  \"num_key_value_heads\": 8,\n"
                              "  \"rms_norm_eps\": 1e-05,\n"
                              "  \"rope_scaling\": null,\n"
                              "  \"rope_theta\": 1000000,\n"
                              "  \"num_nextn_predict_layers\": 1,\n"
                              "  \"tie_word_embeddings\": false,\n"
                              "  \"torch_dtype\": \"bfloat16\",\n"
                              "  \"transformers_version\": \"4.54.0\",\n"
                              "  \"use_cache\": true,\n"
                              "  \"use_qk_norm\": false,\n"
                              "  \"vocab_size\": 151552\n"
                              "}\n";

/* GLM-4.5/4.7-sized config as transformers v5 re-saves it: rope_parameters
 * (with partial_rotary_factor inside), dtype, qk norm on. */
static const char *G47_JSON =
    "{\"architectures\": [\"Glm4MoeForCausalLM\"], \"model_type\": \"glm4_moe\",\n"
    " \"attention_bias\": true, \"head_dim\": 128, \"hidden_act\": \"silu\",\n"
    " \"hidden_size\": 5120, \"intermediate_size\": 12288, \"max_position_embeddings\": 202752,\n"
    " \"moe_intermediate_size\": 1536, \"norm_topk_prob\": true, \"num_attention_heads\": 96,\n"
    " \"n_group\": 1, \"topk_group\": 1, \"n_routed_experts\": 160, \"n_shared_experts\": 1,\n"
    " \"routed_scaling_factor\": 2.5, \"num_experts_per_tok\": 8, \"first_k_dense_replace\": 3,\n"
    " \"num_hidden_layers\": 92, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-05,\n"
    " \"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": \"default\",\n"
    "                     \"partial_rotary_factor\": 0.5},\n"
    " \"num_nextn_predict_layers\": 1, \"tie_word_embeddings\": false, \"dtype\": \"bfloat16\",\n"
    " \"use_qk_norm\": true, \"vocab_size\": 151552, \"pad_token_id\": 151329,\n"
    " \"eos_token_id\": [151329, 151336, 151338]}\n";

/* zai-org/GLM-5-like config.json (GlmMoeDsaForCausalLM) */
static const char *GLM5_JSON =
    "{\n"
    "  \"architectures\": [\"GlmMoeDsaForCausalLM\"],\n"
    "  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"dtype\": \"bfloat16\",\n"
    "  \"eos_token_id\": [154820, 154827, 154829],\n"
    "  \"ep_size\": 1,\n"
    "  \"first_k_dense_replace\": 3,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"head_dim\": 64,\n"
    "  \"hidden_size\": 6144,\n"
    "  \"index_head_dim\": 128,\n"
    "  \"index_n_heads\": 32,\n"
    "  \"index_topk\": 2048,\n"
    "  \"indexer_rope_interleave\": true,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 12288,\n"
    "  \"kv_lora_rank\": 512,\n"
    "  \"max_position_embeddings\": 202752,\n"
    "  \"model_type\": \"glm_moe_dsa\",\n"
    "  \"moe_intermediate_size\": 2048,\n"
    "  \"moe_layer_freq\": 1,\n"
    "  \"n_group\": 1,\n"
    "  \"n_routed_experts\": 256,\n"
    "  \"n_shared_experts\": 1,\n"
    "  \"norm_topk_prob\": true,\n"
    "  \"num_attention_heads\": 64,\n"
    "  \"num_experts_per_tok\": 8,\n"
    "  \"num_hidden_layers\": 78,\n"
    "  \"num_key_value_heads\": 64,\n"
    "  \"num_nextn_predict_layers\": 1,\n"
    "  \"pad_token_id\": 154820,\n"
    "  \"pretraining_tp\": 1,\n"
    "  \"q_lora_rank\": 2048,\n"
    "  \"qk_head_dim\": 256,\n"
    "  \"qk_nope_head_dim\": 192,\n"
    "  \"qk_rope_head_dim\": 64,\n"
    "  \"rms_norm_eps\": 1e-05,\n"
    "  \"rope_interleave\": true,\n"
    "  \"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": \"default\"},\n"
    "  \"routed_scaling_factor\": 2.5,\n"
    "  \"scoring_func\": \"sigmoid\",\n"
    "  \"tie_word_embeddings\": false,\n"
    "  \"topk_group\": 1,\n"
    "  \"topk_method\": \"noaux_tc\",\n"
    "  \"transformers_version\": \"5.0.2.dev0\",\n"
    "  \"use_cache\": true,\n"
    "  \"v_head_dim\": 256,\n"
    "  \"vocab_size\": 154880\n"
    "}\n";

/* Qwen/Qwen3-30B-A3B config.json (transformers 4.51) */
static const char *Q3_JSON = "{\n"
                             "  \"architectures\": [\"Qwen3MoeForCausalLM\"],\n"
                             "  \"attention_bias\": false,\n"
                             "  \"attention_dropout\": 0.0,\n"
                             "  \"bos_token_id\": 151643,\n"
                             "  \"decoder_sparse_step\": 1,\n"
                             "  \"eos_token_id\": 151645,\n"
                             "  \"head_dim\": 128,\n"
                             "  \"hidden_act\": \"silu\",\n"
                             "  \"hidden_size\": 2048,\n"
                             "  \"initializer_range\": 0.02,\n"
                             "  \"intermediate_size\": 6144,\n"
                             "  \"max_position_embeddings\": 40960,\n"
                             "  \"max_window_layers\": 48,\n"
                             "  \"mlp_only_layers\": [],\n"
                             "  \"model_type\": \"qwen3_moe\",\n"
                             "  \"moe_intermediate_size\": 768,\n"
                             "  \"norm_topk_prob\": true,\n"
                             "  \"num_attention_heads\": 32,\n"
                             "  \"num_experts\": 128,\n"
                             "  \"num_experts_per_tok\": 8,\n"
                             "  \"num_hidden_layers\": 48,\n"
                             "  \"num_key_value_heads\": 4,\n"
                             "  \"output_router_logits\": false,\n"
                             "  \"rms_norm_eps\": 1e-06,\n"
                             "  \"rope_scaling\": null,\n"
                             "  \"rope_theta\": 1000000.0,\n"
                             "  \"router_aux_loss_coef\": 0.001,\n"
                             "  \"sliding_window\": null,\n"
                             "  \"tie_word_embeddings\": false,\n"
                             "  \"torch_dtype\": \"bfloat16\",\n"
                             "  \"transformers_version\": \"4.51.0\",\n"
                             "  \"use_cache\": true,\n"
                             "  \"use_sliding_window\": false,\n"
                             "  \"vocab_size\": 151936\n"
                             "}\n";

static char err[512];

/* Replace the first occurrence of `from` in `src` by `to` (test helper). */
static char *patch(const char *src, const char *from, const char *to)
{
    const char *p = strstr(src, from);
    ck_assert_msg(p != NULL, "sample does not contain %s", from);
    size_t a = (size_t)(p - src), lf = strlen(from), lt = strlen(to), ls = strlen(src);
    char *out = malloc(ls - lf + lt + 1);
    ck_assert_ptr_nonnull(out);
    memcpy(out, src, a);
    memcpy(out + a, to, lt);
    memcpy(out + a + lt, p + lf, ls - a - lf + 1);
    return out;
}

struct tally {
    int64_t tensors, params, experts, indexer, mtp;
    int ordered;
    int last_layer;
};

static int tally_cb(void *ctx, const struct glm_tensor_info *t)
{
    struct tally *ty = ctx;
    ty->tensors++;
    ty->params += t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
    if (t->expert >= 0)
        ty->experts++;
    if (strstr(t->name, ".indexer."))
        ty->indexer++;
    if (t->layer >= 0) {
        if (t->layer < ty->last_layer)
            ty->ordered = 0;
        ty->last_layer = t->layer;
    }
    return 0;
}

static struct tally tally_of(const struct glm_config *c)
{
    struct tally ty = {0, 0, 0, 0, 0, 1, -1};
    ck_assert_int_eq(glm_config_tensor_list(c, tally_cb, &ty), 0);
    ck_assert_int_eq(glm_config_tensor_count(c), ty.tensors);
    return ty;
}

START_TEST(test_air)
{
    struct glm_config c;
    int rc = glm_config_from_json(AIR_JSON, &c, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(c.arch, GLM_ARCH_GLM4_MOE);
    ck_assert_str_eq(c.model_type, "glm4_moe");
    ck_assert_str_eq(c.architecture, "Glm4MoeForCausalLM");
    ck_assert_int_eq(c.dtype, GLM_DTYPE_BF16);
    ck_assert_int_eq(c.vocab_size, 151552);
    ck_assert_int_eq(c.hidden_size, 4096);
    ck_assert_int_eq(c.num_hidden_layers, 46);
    ck_assert_int_eq(c.num_attention_heads, 96);
    ck_assert_int_eq(c.num_key_value_heads, 8);
    ck_assert_int_eq(c.head_dim, 128);
    ck_assert_int_eq(c.rotary_dim, 64);
    ck_assert_int_eq(c.rope_interleave, 0);
    ck_assert_double_eq(c.rope_theta, 1000000.0);
    ck_assert_int_eq(c.rope_type, GLM_ROPE_DEFAULT);
    ck_assert_int_eq(c.attention_bias, 1);
    ck_assert_int_eq(c.use_qk_norm, 0);
    ck_assert_int_eq(c.n_routed_experts, 128);
    ck_assert_int_eq(c.num_experts_per_tok, 8);
    ck_assert_double_eq(c.routed_scaling_factor, 1.0);
    ck_assert_int_eq(c.first_k_dense_replace, 1);
    ck_assert_int_eq(c.mlp_layer_types[0], GLM_MLP_DENSE);
    ck_assert_int_eq(c.mlp_layer_types[1], GLM_MLP_SPARSE);
    ck_assert_int_eq(c.mlp_layer_types[45], GLM_MLP_SPARSE);
    ck_assert_int_eq(c.num_nextn_predict_layers, 1);
    ck_assert_int_eq(c.pad_token_id, 151329);
    ck_assert_int_eq(c.bos_token_id, -1);
    ck_assert_int_eq(c.n_eos, 3);
    ck_assert_int_eq(c.eos_token_ids[2], 151338);
    ck_assert_double_eq_tol(glm_config_attn_scale(&c), 1.0 / sqrt(128.0), 1e-15);

    /* The transformers model has 106,852,245,504 parameters; the checkpoint
     * additionally stores 45 MoE layers x 128 e_score_correction_bias
     * buffers. */
    struct tally ty = tally_of(&c);
    ck_assert_int_eq(ty.params, 106852245504LL + 45 * 128);
    ck_assert_int_eq(ty.experts, 45LL * 128 * 3);
    ck_assert_int_eq(ty.indexer, 0);
    ck_assert_int_eq(ty.ordered, 1);
}
END_TEST

static void expect_tensor(const struct glm_config *c, const char *name, int ndim, int64_t d0,
                          int64_t d1)
{
    struct glm_tensor_info t;
    int rc = glm_config_tensor_lookup(c, name, &t, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %s", name, err);
    ck_assert_str_eq(t.name, name);
    ck_assert_int_eq(t.ndim, ndim);
    ck_assert_int_eq(t.shape[0], d0);
    if (ndim == 2)
        ck_assert_int_eq(t.shape[1], d1);
}

static void expect_no_tensor(const struct glm_config *c, const char *name, const char *why)
{
    struct glm_tensor_info t;
    err[0] = 0;
    int rc = glm_config_tensor_lookup(c, name, &t, err, sizeof(err));
    ck_assert_msg(rc == TX_ENOENT, "%s: rc %d", name, rc);
    ck_assert_msg(strstr(err, name) != NULL, "message does not name the tensor: %s", err);
    if (why)
        ck_assert_msg(strstr(err, why) != NULL, "message lacks '%s': %s", why, err);
}

START_TEST(test_air_names)
{
    struct glm_config c;
    ck_assert_int_eq(glm_config_from_json(AIR_JSON, &c, err, sizeof(err)), 0);
    expect_tensor(&c, "model.embed_tokens.weight", 2, 151552, 4096);
    expect_tensor(&c, "model.layers.0.input_layernorm.weight", 1, 4096, 0);
    expect_tensor(&c, "model.layers.0.self_attn.q_proj.weight", 2, 12288, 4096);
    expect_tensor(&c, "model.layers.0.self_attn.q_proj.bias", 1, 12288, 0);
    expect_tensor(&c, "model.layers.0.self_attn.k_proj.weight", 2, 1024, 4096);
    expect_tensor(&c, "model.layers.0.self_attn.k_proj.bias", 1, 1024, 0);
    expect_tensor(&c, "model.layers.0.self_attn.v_proj.bias", 1, 1024, 0);
    expect_tensor(&c, "model.layers.0.self_attn.o_proj.weight", 2, 4096, 12288);
    expect_tensor(&c, "model.layers.0.mlp.gate_proj.weight", 2, 10944, 4096);
    expect_tensor(&c, "model.layers.0.mlp.down_proj.weight", 2, 4096, 10944);
    expect_tensor(&c, "model.layers.1.mlp.gate.weight", 2, 128, 4096);
    expect_tensor(&c, "model.layers.1.mlp.gate.e_score_correction_bias", 1, 128, 0);
    expect_tensor(&c, "model.layers.1.mlp.experts.127.down_proj.weight", 2, 4096, 1408);
    expect_tensor(&c, "model.layers.45.mlp.experts.0.gate_proj.weight", 2, 1408, 4096);
    expect_tensor(&c, "model.layers.45.mlp.shared_experts.up_proj.weight", 2, 1408, 4096);
    expect_tensor(&c, "model.layers.45.post_attention_layernorm.weight", 1, 4096, 0);
    expect_tensor(&c, "model.norm.weight", 1, 4096, 0);
    expect_tensor(&c, "lm_head.weight", 2, 151552, 4096);

    struct glm_tensor_info t;
    ck_assert_int_eq(glm_config_tensor_lookup(&c, "model.layers.1.mlp.gate.e_score_correction_bias",
                                              &t, err, sizeof(err)),
                     0);
    ck_assert_int_eq(t.keep_fp32, 1);
    ck_assert_int_eq(t.cls, GLM_TC_ROUTER);
    ck_assert_int_eq(glm_config_tensor_lookup(&c, "model.layers.7.mlp.experts.3.up_proj.weight", &t,
                                              err, sizeof(err)),
                     0);
    ck_assert_int_eq(t.cls, GLM_TC_EXPERT);
    ck_assert_int_eq(t.layer, 7);
    ck_assert_int_eq(t.expert, 3);
    ck_assert_int_eq(t.role, GLM_T_EXP_UP);

    /* the MTP layer (index 46) is recognised and ignored */
    ck_assert_int_eq(
        glm_config_tensor_lookup(&c, "model.layers.46.eh_proj.weight", &t, err, sizeof(err)), 1);
    ck_assert_int_eq(t.layer, 46);
    ck_assert_int_eq(glm_config_tensor_lookup(&c, "model.layers.46.mlp.experts.5.up_proj.weight",
                                              &t, err, sizeof(err)),
                     1);

    expect_no_tensor(&c, "model.layers.0.self_attn.q_norm.weight", NULL); /* use_qk_norm false */
    expect_no_tensor(&c, "model.layers.0.mlp.experts.0.up_proj.weight", "dense MLP");
    expect_no_tensor(&c, "model.layers.1.mlp.experts.128.up_proj.weight", "out of range");
    expect_no_tensor(&c, "model.layers.1.mlp.gate_proj.weight", NULL);
    expect_no_tensor(&c, "model.layers.0.self_attn.o_proj.bias", NULL);
    expect_no_tensor(&c, "model.layers.0.self_attn.q_a_proj.weight", NULL);
    expect_no_tensor(&c, "model.layers.01.input_layernorm.weight", "layer index");
    expect_no_tensor(&c, "model.layers.x.input_layernorm.weight", "layer index");
    expect_no_tensor(&c, "model.layers.2.mlp.experts.x.up_proj.weight", "expert index");
    expect_no_tensor(&c, "model.layers.2.mlp.experts.1.up_proj.bias", NULL);
    expect_no_tensor(&c, "transformer.wte.weight", "Glm4MoeForCausalLM");

    /* names built from roles */
    ck_assert_int_eq(glm_config_tensor_info(&c, GLM_T_EXP_DOWN, 3, 9, &t), 0);
    ck_assert_str_eq(t.name, "model.layers.3.mlp.experts.9.down_proj.weight");
    ck_assert_int_eq(glm_config_tensor_info(&c, GLM_T_EXP_DOWN, 0, 9, &t), TX_ENOENT);
    /* the MTP layer 46 has a catalogue (issue 39): its decoder layer and
     * its own tensors; nothing beyond it, no MTP role in a decoder layer */
    ck_assert_int_eq(glm_config_tensor_info(&c, GLM_T_INPUT_NORM, 46, -1, &t), 0);
    ck_assert_str_eq(t.name, "model.layers.46.input_layernorm.weight");
    ck_assert_int_eq(glm_config_tensor_info(&c, GLM_T_INPUT_NORM, 47, -1, &t), TX_ENOENT);
    ck_assert_int_eq(glm_config_tensor_info(&c, GLM_T_MTP_EH_PROJ, 3, -1, &t), TX_ENOENT);
    ck_assert_int_eq(glm_config_tensor_info(&c, GLM_T_MTP_EH_PROJ, 46, -1, &t), 0);
    ck_assert_int_eq(t.shape[0], c.hidden_size);
    ck_assert_int_eq(t.shape[1], 2 * c.hidden_size);
    ck_assert_int_eq(
        glm_config_tensor_lookup(&c, "model.layers.46.shared_head.norm.weight", &t, err, sizeof(err)),
        1);
    ck_assert_int_eq(t.role, GLM_T_MTP_HEAD_NORM);
    ck_assert_int_eq(
        glm_config_tensor_lookup(&c, "model.layers.46.mlp.experts.5.up_proj.weight", &t, err,
                                 sizeof(err)),
        1);
    ck_assert_int_eq(t.role, GLM_T_EXP_UP);
    ck_assert_int_eq(t.expert, 5);
}
END_TEST

START_TEST(test_g47_rope_parameters)
{
    struct glm_config c;
    int rc = glm_config_from_json(G47_JSON, &c, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(c.dtype, GLM_DTYPE_BF16);
    ck_assert_double_eq(c.rope_theta, 1000000.0);
    ck_assert_double_eq(c.partial_rotary_factor, 0.5);
    ck_assert_int_eq(c.rotary_dim, 64);
    ck_assert_int_eq(c.use_qk_norm, 1);
    ck_assert_int_eq(c.mlp_layer_types[2], GLM_MLP_DENSE);
    ck_assert_int_eq(c.mlp_layer_types[3], GLM_MLP_SPARSE);
    expect_tensor(&c, "model.layers.0.self_attn.q_norm.weight", 1, 128, 0);
    expect_tensor(&c, "model.layers.91.self_attn.k_norm.weight", 1, 128, 0);
    expect_tensor(&c, "model.layers.3.mlp.experts.159.gate_proj.weight", 2, 1536, 5120);

    /* rope_parameters wins over a top-level rope_theta */
    char *j = patch(G47_JSON, "\"attention_bias\"", "\"rope_theta\": 10000, \"attention_bias\"");
    ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), 0);
    ck_assert_double_eq(c.rope_theta, 1000000.0);
    free(j);

    /* legacy rope_scaling linear */
    j = patch(AIR_JSON, "\"rope_scaling\": null",
              "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 4.0}");
    ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(c.rope_type, GLM_ROPE_LINEAR);
    ck_assert_double_eq(c.rope_factor, 4.0);
    float f[32];
    ck_assert_int_eq(glm_config_rope_inv_freq(&c, f, 32), 0);
    ck_assert_float_eq_tol(f[0], 0.25f, 1e-7f);
    free(j);
}
END_TEST

/* deepseek-ai/DeepSeek-V3's config.json as shipped (Kimi-K2 ships the same
 * class); auto_map's remote-code entries are ignored */
static const char *DSV3_JSON =
    "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"attention_bias\": false,\n"
    " \"attention_dropout\": 0.0, \"auto_map\": {\"AutoConfig\": "
    "\"configuration_deepseek.DeepseekV3Config\", \"AutoModel\": "
    "\"modeling_deepseek.DeepseekV3Model\", \"AutoModelForCausalLM\": "
    "\"modeling_deepseek.DeepseekV3ForCausalLM\"},\n"
    " \"aux_loss_alpha\": 0.001, \"bos_token_id\": 0, \"eos_token_id\": 1, \"ep_size\": 1,\n"
    " \"first_k_dense_replace\": 3, \"hidden_act\": \"silu\", \"hidden_size\": 7168,\n"
    " \"initializer_range\": 0.02, \"intermediate_size\": 18432, \"kv_lora_rank\": 512,\n"
    " \"max_position_embeddings\": 163840, \"model_type\": \"deepseek_v3\",\n"
    " \"moe_intermediate_size\": 2048, \"moe_layer_freq\": 1, \"n_group\": 8,\n"
    " \"n_routed_experts\": 256, \"n_shared_experts\": 1, \"norm_topk_prob\": true,\n"
    " \"num_attention_heads\": 128, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 61,\n"
    " \"num_key_value_heads\": 128, \"num_nextn_predict_layers\": 1, \"pretraining_tp\": 1,\n"
    " \"q_lora_rank\": 1536, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64,\n"
    " \"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\",\n"
    "   \"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]},\n"
    " \"rms_norm_eps\": 1e-06,\n"
    " \"rope_scaling\": {\"beta_fast\": 32, \"beta_slow\": 1, \"factor\": 40, \"mscale\": 1.0,\n"
    "   \"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096, \"type\": \"yarn\"},\n"
    " \"rope_theta\": 10000, \"routed_scaling_factor\": 2.5, \"scoring_func\": \"sigmoid\",\n"
    " \"seq_aux\": true, \"tie_word_embeddings\": false, \"topk_group\": 4,\n"
    " \"topk_method\": \"noaux_tc\", \"torch_dtype\": \"bfloat16\",\n"
    " \"transformers_version\": \"4.33.1\", \"use_cache\": true, \"v_head_dim\": 128,\n"
    " \"vocab_size\": 129280}\n";

START_TEST(test_deepseek_v3)
{
    struct glm_config c, c2;
    int rc = glm_config_from_json(DSV3_JSON, &c, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(c.arch, GLM_ARCH_DEEPSEEK_V3);
    ck_assert_str_eq(c.architecture, "DeepseekV3ForCausalLM");
    ck_assert_int_eq(c.hidden_size, 7168);
    ck_assert_int_eq(c.num_hidden_layers, 61);
    ck_assert_int_eq(c.q_lora_rank, 1536);
    ck_assert_int_eq(c.kv_lora_rank, 512);
    ck_assert_int_eq(c.qk_head_dim, 192);
    ck_assert_int_eq(c.v_head_dim, 128);
    ck_assert_int_eq(c.rotary_dim, 64);
    ck_assert_int_eq(c.head_dim, 64); /* DeepseekV3Config: head_dim = qk_rope_head_dim */
    ck_assert_int_eq(c.rope_interleave, 1);
    ck_assert_int_eq(c.n_routed_experts, 256);
    ck_assert_int_eq(c.num_experts_per_tok, 8);
    ck_assert_int_eq(c.n_group, 8);
    ck_assert_int_eq(c.topk_group, 4);
    ck_assert_int_eq(c.n_shared_experts, 1);
    ck_assert_int_eq(c.norm_topk_prob, 1);
    ck_assert_double_eq(c.routed_scaling_factor, 2.5);
    ck_assert_int_eq(c.first_k_dense_replace, 3);
    for (int l = 0; l < 61; l++)
        ck_assert_int_eq(c.mlp_layer_types[l], l < 3 ? GLM_MLP_DENSE : GLM_MLP_SPARSE);
    ck_assert_int_eq(c.vocab_size, 129280);
    ck_assert_int_eq(c.bos_token_id, 0);
    ck_assert_int_eq(c.n_eos, 1);
    ck_assert_int_eq(c.eos_token_ids[0], 1);
    ck_assert_str_eq(c.quant_method, "fp8");
    ck_assert_double_eq(c.rms_norm_eps, 1e-6);
    /* YaRN as transformers reads it */
    ck_assert_int_eq(c.rope_type, GLM_ROPE_YARN);
    ck_assert_double_eq(c.rope_theta, 10000.0);
    ck_assert_double_eq(c.rope_factor, 40.0);
    ck_assert_int_eq(c.rope_yarn_original_max_pos, 4096);
    ck_assert_double_eq(c.rope_yarn_beta_fast, 32.0);
    ck_assert_double_eq(c.rope_yarn_beta_slow, 1.0);
    /* the softmax scale: 192^-0.5 * (0.1 ln 40 + 1)^2 (DeepseekV3Attention) */
    double m = 0.1 * log(40.0) + 1.0;
    ck_assert_double_eq_tol(glm_config_attn_scale(&c), m * m / sqrt(192.0), 1e-12);
    /* inv_freq: extrapolated at the fast end, interpolated (/ 40) at the slow end */
    float f[32];
    ck_assert_int_eq(glm_config_rope_inv_freq(&c, f, 32), 0);
    ck_assert_float_eq_tol(f[0], 1.0f, 1e-7f);
    ck_assert_float_eq_tol(f[31], (float)(pow(10000.0, -62.0 / 64.0) / 40.0), 1e-12f);
    /* round trip */
    char *j = glm_config_to_json(&c);
    ck_assert_ptr_nonnull(j);
    rc = glm_config_from_json(j, &c2, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %s", err, j);
    free(j);
    ck_assert_int_eq(memcmp(&c, &c2, sizeof(c)), 0);
    /* q_lora_rank null (DeepSeek-V2-Lite's plain q_proj): refused by name */
    char *bad = strdup(DSV3_JSON);
    char *q = strstr(bad, "\"q_lora_rank\": 1536");
    memcpy(q, "\"q_lora_rank\": null", strlen("\"q_lora_rank\": null"));
    ck_assert_int_lt(glm_config_from_json(bad, &c2, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "q_lora_rank"), "%s", err);
    free(bad);
    /* a bad rope_scaling field is named */
    bad = strdup(DSV3_JSON);
    q = strstr(bad, "\"beta_fast\": 32");
    memcpy(q, "\"beta_fast\": -1", strlen("\"beta_fast\": -1"));
    ck_assert_int_lt(glm_config_from_json(bad, &c2, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "beta"), "%s", err);
    free(bad);
}
END_TEST

START_TEST(test_glm5)
{
    struct glm_config c;
    int rc = glm_config_from_json(GLM5_JSON, &c, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(c.arch, GLM_ARCH_GLM_MOE_DSA);
    ck_assert_str_eq(c.architecture, "GlmMoeDsaForCausalLM");
    ck_assert_int_eq(c.q_lora_rank, 2048);
    ck_assert_int_eq(c.kv_lora_rank, 512);
    ck_assert_int_eq(c.qk_nope_head_dim, 192);
    ck_assert_int_eq(c.qk_rope_head_dim, 64);
    ck_assert_int_eq(c.qk_head_dim, 256);
    ck_assert_int_eq(c.v_head_dim, 256);
    ck_assert_int_eq(c.rotary_dim, 64);
    ck_assert_int_eq(c.rope_interleave, 1);
    ck_assert_int_eq(c.indexer_rope_interleave, 1);
    ck_assert_int_eq(c.index_topk, 2048);
    ck_assert_int_eq(c.index_head_dim, 128);
    ck_assert_int_eq(c.index_n_heads, 32);
    ck_assert_double_eq(c.rope_theta, 1000000.0);
    ck_assert_double_eq(c.routed_scaling_factor, 2.5);
    ck_assert_int_eq(c.n_routed_experts, 256);
    ck_assert_int_eq(c.bos_token_id, 0); /* GlmMoeDsaConfig default */
    ck_assert_int_eq(c.pad_token_id, 154820);
    ck_assert_int_eq(c.n_eos, 3);
    for (int l = 0; l < 78; l++) {
        ck_assert_int_eq(c.indexer_types[l], GLM_INDEXER_FULL);
        ck_assert_int_eq(c.mlp_layer_types[l], l < 3 ? GLM_MLP_DENSE : GLM_MLP_SPARSE);
    }
    ck_assert_double_eq_tol(glm_config_attn_scale(&c), 1.0 / 16.0, 1e-15);

    expect_tensor(&c, "model.layers.0.self_attn.q_a_proj.weight", 2, 2048, 6144);
    expect_tensor(&c, "model.layers.0.self_attn.q_a_layernorm.weight", 1, 2048, 0);
    expect_tensor(&c, "model.layers.0.self_attn.q_b_proj.weight", 2, 64 * 256, 2048);
    expect_tensor(&c, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", 2, 576, 6144);
    expect_tensor(&c, "model.layers.0.self_attn.kv_a_layernorm.weight", 1, 512, 0);
    expect_tensor(&c, "model.layers.0.self_attn.kv_b_proj.weight", 2, 64 * (192 + 256), 512);
    expect_tensor(&c, "model.layers.0.self_attn.o_proj.weight", 2, 6144, 64 * 256);
    expect_tensor(&c, "model.layers.0.self_attn.indexer.wq_b.weight", 2, 32 * 128, 2048);
    expect_tensor(&c, "model.layers.0.self_attn.indexer.wk.weight", 2, 128, 6144);
    expect_tensor(&c, "model.layers.0.self_attn.indexer.k_norm.weight", 1, 128, 0);
    expect_tensor(&c, "model.layers.0.self_attn.indexer.k_norm.bias", 1, 128, 0);
    expect_tensor(&c, "model.layers.0.self_attn.indexer.weights_proj.weight", 2, 32, 6144);
    expect_tensor(&c, "model.layers.77.mlp.experts.255.up_proj.weight", 2, 2048, 6144);
    expect_no_tensor(&c, "model.layers.0.self_attn.q_proj.weight", NULL);
    expect_no_tensor(&c, "model.layers.0.self_attn.kv_a_proj_with_mqa.bias", NULL);

    /* parameter count from the architecture by hand */
    const int64_t H = 6144, V = 154880, nh = 64;
    int64_t attn = 2048 * H + 2048 + nh * 256 * 2048 + 576 * H + 512 + nh * 448 * 512 +
                   H * nh * 256 + 4096 * 2048 + 128 * H + 128 + 128 + 32 * H;
    int64_t dense = 3 * H * 12288;
    int64_t moe = 256 * H + 256 + 256 * 3 * H * 2048 + 3 * H * 2048;
    int64_t expect = 2 * V * H + H + 78 * (attn + 2 * H) + 3 * dense + 75 * moe;
    struct tally ty = tally_of(&c);
    ck_assert_int_eq(ty.params, expect);
    ck_assert_int_eq(ty.indexer, 78 * 5);
    ck_assert_int_eq(ty.ordered, 1);
}
END_TEST

START_TEST(test_indexer_schedule)
{
    struct glm_config c;
    /* index_topk_freq / index_skip_topk_offset: full iff max(i-off+1,0) % freq == 0 */
    char *j = patch(GLM5_JSON, "\"index_topk\": 2048",
                    "\"index_topk\": 2048, \"index_topk_freq\": 4, \"index_skip_topk_offset\": 3");
    int rc = glm_config_from_json(j, &c, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    free(j);
    /* offset 3, freq 4 is GLM-5.2's IndexShare schedule (llama.cpp
     * GLM_DSA_DEFAULT_INDEXER_TYPES: 1,1,1,0,0,0,1,0,0,0,1,...) */
    const char *expect = "FFFSSSFSSSFS";
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq(c.indexer_types[i],
                         expect[i] == 'F' ? GLM_INDEXER_FULL : GLM_INDEXER_SHARED);
    /* shared layers have no indexer weights */
    expect_tensor(&c, "model.layers.6.self_attn.indexer.wk.weight", 2, 128, 6144);
    expect_no_tensor(&c, "model.layers.4.self_attn.indexer.wk.weight", "shared");
    struct tally ty = tally_of(&c);
    int full = 0;
    for (int i = 0; i < 78; i++)
        full += c.indexer_types[i] == GLM_INDEXER_FULL;
    ck_assert_int_eq(ty.indexer, full * 5);

    /* explicit list wins; pattern string */
    char list[78 * 10 + 64];
    strcpy(list, "\"indexer_types\": [");
    for (int i = 0; i < 78; i++)
        strcat(list, i % 2 ? "\"shared\"," : "\"full\",");
    list[strlen(list) - 1] = 0;
    strcat(list, "], \"index_topk\": 2048");
    j = patch(GLM5_JSON, "\"index_topk\": 2048", list);
    ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(c.indexer_types[0], GLM_INDEXER_FULL);
    ck_assert_int_eq(c.indexer_types[1], GLM_INDEXER_SHARED);
    ck_assert_int_eq(c.indexer_types[77], GLM_INDEXER_SHARED);
    free(j);
}
END_TEST

static void roundtrip(const char *json)
{
    struct glm_config a, b;
    ck_assert_int_eq(glm_config_from_json(json, &a, err, sizeof(err)), 0);
    char *s = glm_config_to_json(&a);
    ck_assert_ptr_nonnull(s);
    memset(&b, 0x5a, sizeof(b));
    int rc = glm_config_from_json(s, &b, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s\n%s", err, s);
    ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0, "round trip differs:\n%s", s);
    free(s);
}

START_TEST(test_roundtrip)
{
    roundtrip(AIR_JSON);
    roundtrip(G47_JSON);
    roundtrip(GLM5_JSON);
    /* an explicit null overrides a non-null default (GlmMoeDsaConfig bos 0) */
    char *n = patch(GLM5_JSON, "\"pad_token_id\": 154820", "\"bos_token_id\": null");
    struct glm_config cn;
    ck_assert_int_eq(glm_config_from_json(n, &cn, err, sizeof(err)), 0);
    ck_assert_int_eq(cn.bos_token_id, -1);
    ck_assert_int_eq(cn.pad_token_id, -1);
    roundtrip(n);
    free(n);
    char *j = patch(AIR_JSON, "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1.234567e-06");
    roundtrip(j);
    free(j);
    j = patch(AIR_JSON, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true");
    roundtrip(j);
    struct glm_config c;
    ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), 0);
    expect_no_tensor(&c, "lm_head.weight", "tie_word_embeddings");
    struct tally ty = tally_of(&c);
    ck_assert_int_eq(ty.params, 106852245504LL + 45 * 128 - 151552LL * 4096);
    free(j);
}
END_TEST

START_TEST(test_qwen3_moe)
{
    struct glm_config c;
    int rc = glm_config_from_json(Q3_JSON, &c, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(c.arch, GLM_ARCH_QWEN3_MOE);
    ck_assert_str_eq(c.model_type, "qwen3_moe");
    ck_assert_str_eq(c.architecture, "Qwen3MoeForCausalLM");
    ck_assert_int_eq(c.vocab_size, 151936);
    ck_assert_int_eq(c.hidden_size, 2048);
    ck_assert_int_eq(c.num_hidden_layers, 48);
    ck_assert_int_eq(c.num_attention_heads, 32);
    ck_assert_int_eq(c.num_key_value_heads, 4);
    ck_assert_int_eq(c.head_dim, 128);
    ck_assert_int_eq(c.rotary_dim, 128);
    ck_assert_int_eq(c.rope_interleave, 0);
    ck_assert_double_eq(c.rope_theta, 1000000.0);
    ck_assert_double_eq(c.rms_norm_eps, 1e-6);
    ck_assert_int_eq(c.use_qk_norm, 1);
    ck_assert_int_eq(c.attention_bias, 0);
    ck_assert_int_eq(c.n_routed_experts, 128);
    ck_assert_int_eq(c.n_shared_experts, 0);
    ck_assert_int_eq(c.num_experts_per_tok, 8);
    ck_assert_int_eq(c.norm_topk_prob, 1);
    ck_assert_int_eq(c.max_position_embeddings, 40960);
    for (int l = 0; l < 48; l++)
        ck_assert_int_eq(c.mlp_layer_types[l], GLM_MLP_SPARSE);
    ck_assert_int_eq(c.bos_token_id, 151643);
    ck_assert_int_eq(c.n_eos, 1);
    ck_assert_int_eq(c.eos_token_ids[0], 151645);
    ck_assert_double_eq_tol(glm_config_attn_scale(&c), 1.0 / sqrt(128.0), 1e-15);
    expect_tensor(&c, "model.layers.0.self_attn.q_proj.weight", 2, 4096, 2048);
    expect_tensor(&c, "model.layers.0.self_attn.k_proj.weight", 2, 512, 2048);
    expect_tensor(&c, "model.layers.0.self_attn.o_proj.weight", 2, 2048, 4096);
    expect_tensor(&c, "model.layers.0.self_attn.q_norm.weight", 1, 128, 0);
    expect_tensor(&c, "model.layers.47.self_attn.k_norm.weight", 1, 128, 0);
    expect_tensor(&c, "model.layers.3.mlp.gate.weight", 2, 128, 2048);
    expect_tensor(&c, "model.layers.3.mlp.experts.127.down_proj.weight", 2, 2048, 768);
    expect_tensor(&c, "lm_head.weight", 2, 151936, 2048);
    expect_no_tensor(&c, "model.layers.0.self_attn.q_proj.bias", NULL);
    expect_no_tensor(&c, "model.layers.0.mlp.gate.e_score_correction_bias", NULL);
    expect_no_tensor(&c, "model.layers.0.mlp.shared_experts.gate_proj.weight", NULL);
    expect_no_tensor(&c, "model.layers.0.mlp.gate_proj.weight", NULL);
    /* 48 x (attention 18,874,880 + norms 4,096 + router 262,144 + experts
     * 128 x 3 x 768 x 2048) + embedding + lm_head + final norm */
    struct tally ty = tally_of(&c);
    ck_assert_int_eq(ty.params, 48LL * (18874624 + 4096 + 262144 + 128LL * 3 * 768 * 2048) +
                                    2LL * 151936 * 2048 + 2048);
    ck_assert_int_eq(ty.experts, 48LL * 128 * 3);
    roundtrip(Q3_JSON);

    /* Qwen3MoeDecoderLayer: sparse iff l not in mlp_only_layers and
     * (l + 1) % decoder_sparse_step == 0 */
    char *j = patch(Q3_JSON, "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 3");
    char *k = patch(j, "\"mlp_only_layers\": []", "\"mlp_only_layers\": [5, 47]");
    ck_assert_int_eq(glm_config_from_json(k, &c, err, sizeof(err)), 0);
    for (int l = 0; l < 48; l++)
        ck_assert_int_eq(c.mlp_layer_types[l],
                         (l + 1) % 3 == 0 && l != 5 && l != 47 ? GLM_MLP_SPARSE : GLM_MLP_DENSE);
    expect_tensor(&c, "model.layers.0.mlp.gate_proj.weight", 2, 6144, 2048);
    expect_tensor(&c, "model.layers.2.mlp.gate.weight", 2, 128, 2048);
    expect_no_tensor(&c, "model.layers.5.mlp.gate.weight", NULL);
    roundtrip(k);
    free(j);
    free(k);
    /* num_experts 0: every layer dense */
    j = patch(Q3_JSON, "\"num_experts\": 128", "\"num_experts\": 0");
    ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(c.mlp_layer_types[0], GLM_MLP_DENSE);
    ck_assert_int_eq(c.mlp_layer_types[47], GLM_MLP_DENSE);
    free(j);

    /* YaRN as Qwen3's long-context recipe ships it (transformers' yarn rope
     * init; the module has no softmax-scale multiplier) */
    j = patch(Q3_JSON, "\"rope_scaling\": null",
              "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
              "\"original_max_position_embeddings\": 32768}");
    ck_assert_msg(glm_config_from_json(j, &c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(c.rope_type, GLM_ROPE_YARN);
    free(j);

    /* refused with the field named */
    static const struct {
        const char *from, *to, *field;
    } no[] = {
        {"\"use_sliding_window\": false", "\"use_sliding_window\": true", "use_sliding_window"},
        {"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 4}",
         "rope_type"},
        {"\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 0", "decoder_sparse_step"},
        {"\"decoder_sparse_step\": 1,\n", "", "decoder_sparse_step"},
        {"\"num_experts\": 128", "\"n_routed_experts\": 128", "num_experts"},
        {"\"mlp_only_layers\": []", "\"mlp_only_layers\": [48]", "mlp_only_layers"},
        {"\"mlp_only_layers\": []", "\"mlp_only_layers\": [\"a\"]", "mlp_only_layers"},
        {"\"mlp_only_layers\": []", "\"mlp_only_layers\": 3", "mlp_only_layers"},
        {"\"num_experts_per_tok\": 8", "\"num_experts_per_tok\": 200", "num_experts_per_tok"},
        {"\"norm_topk_prob\": true", "\"norm_topk_prob\": true, \"scoring_func\": \"sigmoid\"",
         "scoring_func"},
        {"\"head_dim\": 128", "\"head_dim\": 127", "head_dim"},
        {"\"rope_theta\": 1000000.0", "\"rope_theta\": 1000000.0, \"partial_rotary_factor\": 0.5",
         "partial_rotary_factor"},
        {"\"norm_topk_prob\": true",
         "\"norm_topk_prob\": true, \"shared_expert_intermediate_size\": 5632",
         "shared_expert_intermediate_size"},
        {"\"model_type\": \"qwen3_moe\"", "\"model_type\": \"qwen2_moe\"", "model_type"},
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        j = patch(Q3_JSON, no[i].from, no[i].to);
        err[0] = 0;
        ck_assert_msg(glm_config_from_json(j, &c, err, sizeof(err)) < 0, "%s accepted", no[i].to);
        ck_assert_msg(strstr(err, no[i].field), "%s: message lacks %s: %s", no[i].to, no[i].field,
                      err);
        free(j);
    }
}
END_TEST

/* Each malformed config must fail with a message naming the field. */
struct bad {
    const char *base; /* "A" air, "5" glm5 */
    const char *from, *to;
    const char *field;
};

static const struct bad bads[] = {
    {"A", "\"vocab_size\": 151552\n}", "\"vocab_size\": 151552\n", "truncated"},
    {"A", "\"vocab_size\": 151552\n}", "\"vocab_size\": 151552,\n}", "invalid JSON"},
    {"A", "\"vocab_size\": 151552\n}\n", "\"vocab_size\": 151552\n}\n{}", "line 38"},
    {"A", "\"model_type\": \"glm4_moe\"", "\"model_type\": \"llama\"", "model_type"},
    {"A", "\"Glm4MoeForCausalLM\"", "\"GlmMoeDsaForCausalLM\"", "architectures"},
    {"A", "\"hidden_size\": 4096", "\"hidden_size\": \"4096\"", "hidden_size"},
    {"A", "\"hidden_size\": 4096", "\"hidden_size\": 4096.5", "hidden_size"},
    {"A", "\"vocab_size\": 151552", "\"vocab_size\": -3", "vocab_size"},
    {"A", "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 7", "num_key_value_heads"},
    {"A", "\"num_hidden_layers\": 46", "\"num_hidden_layers\": 0", "num_hidden_layers"},
    {"A", "\"num_hidden_layers\": 46", "\"num_hidden_layers\": 100000", "num_hidden_layers"},
    {"A", "\"head_dim\": 128", "\"head_dim\": 126", "partial_rotary_factor"},
    {"A", "\"partial_rotary_factor\": 0.5", "\"partial_rotary_factor\": 1.5",
     "partial_rotary_factor"},
    {"A", "\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 4}",
     "rope_type"},
    {"A", "\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factr\": 4}",
     "factr"},
    {"A", "\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"linear\"}", "factor"},
    {"A", "\"rope_scaling\": null", "\"rope_scaling\": 3", "rope_scaling"},
    {"A", "\"rope_theta\": 1000000", "\"rope_theta\": -1", "rope_theta"},
    {"A", "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 0", "rms_norm_eps"},
    {"A", "\"eos_token_id\": [151329, 151336, 151338]", "\"eos_token_id\": [151329, \"x\"]",
     "eos_token_id"},
    {"A", "\"pad_token_id\": 151329", "\"pad_token_id\": -5", "pad_token_id"},
    {"A", "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": \"no\"",
     "tie_word_embeddings"},
    {"A", "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "hidden_act"},
    {"A", "\"n_group\": 1", "\"n_group\": 3", "n_group"},
    {"A", "\"n_group\": 1", "\"n_group\": 128", "n_group"},
    {"A", "\"topk_group\": 1", "\"topk_group\": 2", "topk_group"},
    {"A", "\"num_experts_per_tok\": 8", "\"num_experts_per_tok\": 200", "num_experts_per_tok"},
    {"A", "\"moe_intermediate_size\": 1408", "\"moe_intermediate_size\": 0",
     "moe_intermediate_size"},
    {"A", "\"torch_dtype\": \"bfloat16\"", "\"torch_dtype\": \"int4\"", "torch_dtype"},
    {"A", "\"first_k_dense_replace\": 1",
     "\"first_k_dense_replace\": 1, \"mlp_layer_types\": "
     "[\"dense\", \"sparse\"]",
     "mlp_layer_types"},
    {"5", "\"q_lora_rank\": 2048", "\"q_lora_rank\": null", "q_lora_rank"},
    {"5", "\"num_key_value_heads\": 64", "\"num_key_value_heads\": 8", "num_key_value_heads"},
    {"5", "\"qk_head_dim\": 256", "\"qk_head_dim\": 255", "qk_head_dim"},
    {"5", "\"qk_rope_head_dim\": 64", "\"qk_rope_head_dim\": 63", "qk_rope_head_dim"},
    {"5", "\"index_head_dim\": 128", "\"index_head_dim\": 32", "index_head_dim"},
    {"5", "\"index_topk\": 2048", "\"index_topk\": 0", "index_topk"},
    {"5", "\"index_topk\": 2048", "\"index_topk\": 2048, \"index_topk_pattern\": \"SF\"",
     "index_topk_pattern"},
    {"5", "\"index_topk\": 2048", "\"index_topk\": 2048, \"indexer_types\": [\"full\"]",
     "indexer_types"},
    {"5", "\"scoring_func\": \"sigmoid\"", "\"scoring_func\": \"softmax\"", "scoring_func"},
    {"5", "\"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": \"default\"}",
     "\"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": \"dynamic\"}", "rope_type"},
    {"5", "\"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": \"default\"}",
     "\"rope_parameters\": {\"rope_theta\": \"big\"}", "rope_parameters.rope_theta"},
};

START_TEST(test_malformed)
{
    const struct bad *b = &bads[_i];
    char *j = patch(b->base[0] == 'A' ? AIR_JSON : GLM5_JSON, b->from, b->to);
    struct glm_config c;
    memset(&c, 0x77, sizeof(c));
    struct glm_config before = c;
    err[0] = 0;
    int rc = glm_config_from_json(j, &c, err, sizeof(err));
    ck_assert_msg(rc < 0, "case %d (%s) accepted", _i, b->field);
    ck_assert_msg(strstr(err, b->field) != NULL, "case %d: message does not name %s: %s", _i,
                  b->field, err);
    ck_assert_msg(memcmp(&c, &before, sizeof(c)) == 0, "case %d: output modified on error", _i);
    free(j);
}
END_TEST

START_TEST(test_not_object)
{
    struct glm_config c;
    ck_assert_int_lt(glm_config_from_json("[1, 2]", &c, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(err, "top level"));
    ck_assert_int_lt(glm_config_from_json("", &c, err, sizeof(err)), 0);
    ck_assert_int_lt(glm_config_from_json("{}", &c, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(err, "model_type"));
    ck_assert_int_lt(glm_config_from_json(NULL, &c, err, sizeof(err)), 0);
    /* a tiny error buffer is still NUL-terminated and nothing overflows */
    char small[8];
    ck_assert_int_lt(glm_config_from_json("{}", &c, small, sizeof(small)), 0);
    ck_assert_int_eq(strlen(small), 7);
    ck_assert_int_lt(glm_config_from_json("{}", &c, NULL, 0), 0);
}
END_TEST

START_TEST(test_load_file)
{
    char dir[] = "/tmp/test_glm_config.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    struct glm_config c;
    int rc = glm_config_load(path, &c, err, sizeof(err));
    ck_assert_int_eq(rc, TX_ENOENT);
    ck_assert_ptr_nonnull(strstr(err, path));

    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(GLM5_JSON, f);
    fclose(f);
    rc = glm_config_load(path, &c, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(c.arch, GLM_ARCH_GLM_MOE_DSA);

    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"model_type\": \"glm4_moe\", \"vocab_size\": 8, \"hidden_size\": [1]}", f);
    fclose(f);
    rc = glm_config_load(path, &c, err, sizeof(err));
    ck_assert_int_eq(rc, TX_EINVAL);
    ck_assert_msg(strstr(err, path) && strstr(err, "hidden_size"), "%s", err);

    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite("{\0}", 1, 3, f);
    fclose(f);
    ck_assert_int_lt(glm_config_load(path, &c, err, sizeof(err)), 0);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* src without the top-level field key (json-c round trip), malloc'd */
static char *without(const char *src, const char *key)
{
    struct json_object *o = json_tokener_parse(src);
    ck_assert_ptr_nonnull(o);
    ck_assert_msg(json_object_object_get_ex(o, key, NULL), "sample lacks %s", key);
    json_object_object_del(o, key);
    char *r = strdup(json_object_to_json_string(o));
    json_object_put(o);
    return r;
}

/* Fields that decide a tensor's shape or the layer structure are required:
 * no silent transformers default (hidden_size 6144 is another model). The
 * optional ones keep the defaults of the transformers classes. */
START_TEST(test_required_fields)
{
    static const char *const common[] = {
        "vocab_size",        "hidden_size",         "intermediate_size",    "moe_intermediate_size",
        "num_hidden_layers", "num_attention_heads", "num_key_value_heads",  "n_routed_experts",
        "n_shared_experts",  "num_experts_per_tok", "first_k_dense_replace"};
    static const char *const dsa[] = {"q_lora_rank",      "kv_lora_rank", "qk_nope_head_dim",
                                      "qk_rope_head_dim", "v_head_dim",   "index_head_dim",
                                      "index_n_heads"};
    static const char *const optional[] = {"rms_norm_eps",
                                           "max_position_embeddings",
                                           "attention_bias",
                                           "tie_word_embeddings",
                                           "routed_scaling_factor",
                                           "n_group",
                                           "topk_group",
                                           "norm_topk_prob",
                                           "num_nextn_predict_layers",
                                           "eos_token_id",
                                           "pad_token_id"};
    const char *samples[] = {AIR_JSON, GLM5_JSON};
    struct glm_config c;
    for (int k = 0; k < 2; k++) {
        size_t n = sizeof(common) / sizeof(common[0]) + (k ? sizeof(dsa) / sizeof(dsa[0]) : 0);
        for (size_t i = 0; i < n; i++) {
            const char *key = i < sizeof(common) / sizeof(common[0])
                                  ? common[i]
                                  : dsa[i - sizeof(common) / sizeof(common[0])];
            char *j = without(samples[k], key);
            ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), TX_EINVAL);
            ck_assert_msg(strstr(err, key) && strstr(err, "required field is missing"),
                          "%s without %s: %s", k ? "GLM-5" : "Air", key, err);
            free(j);
        }
        for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++) {
            char *j = without(samples[k], optional[i]);
            ck_assert_msg(glm_config_from_json(j, &c, err, sizeof(err)) == 0, "%s without %s: %s",
                          k ? "GLM-5" : "Air", optional[i], err);
            free(j);
        }
    }
    /* the old spelling num_experts stands in for n_routed_experts, and
     * mlp_layer_types for first_k_dense_replace */
    char *j = patch(AIR_JSON, "\"n_routed_experts\"", "\"num_experts\"");
    ck_assert_msg(glm_config_from_json(j, &c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(c.n_routed_experts, 128);
    free(j);
    /* the MTP layers are model.layers.[L, L + num_nextn_predict_layers) */
    ck_assert_int_eq(glm_config_from_json(AIR_JSON, &c, err, sizeof(err)), 0);
    struct glm_tensor_info ti;
    ck_assert_int_eq(
        glm_config_tensor_lookup(&c, "model.layers.46.eh_proj.weight", &ti, err, sizeof(err)), 1);
    ck_assert_int_eq(
        glm_config_tensor_lookup(&c, "model.layers.47.eh_proj.weight", &ti, err, sizeof(err)),
        TX_ENOENT);
    ck_assert_msg(strstr(err, "model.layers.47.eh_proj.weight") && strstr(err, "does not exist"),
                  "%s", err);
}
END_TEST

START_TEST(test_inv_freq)
{
    struct glm_config c;
    char *j = patch(AIR_JSON, "\"rope_theta\": 1000000", "\"rope_theta\": 10000");
    ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), 0);
    free(j);
    float f[32];
    ck_assert_int_eq(glm_config_rope_inv_freq(&c, f, 32), 0);
    /* rotary_dim 64: inv_freq[i] = 10000^(-2i/64) */
    ck_assert_float_eq(f[0], 1.0f);
    ck_assert_float_eq_tol(f[16], 0.01f, 1e-9f);
    ck_assert_float_eq_tol(f[8], 0.1f, 1e-8f);
    ck_assert_int_eq(glm_config_rope_inv_freq(&c, f, 31), TX_EINVAL);
}
END_TEST

/* Deterministic mutation fuzzing: random byte edits of the samples must give
 * either a valid config (that survives validation and a JSON round trip) or
 * an error with a message; never a crash (run under ASan/UBSan in CI). */
static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

START_TEST(test_mutations)
{
    static const char alphabet[] = "{}[]\",:0123456789.-eE truenullfalse\\\n";
    const char *bases[3] = {AIR_JSON, G47_JSON, GLM5_JSON};
    int accepted = 0, rejected = 0;
    for (int it = 0; it < 1500; it++) {
        const char *base = bases[it % 3];
        size_t len = strlen(base);
        char *buf = malloc(len + 64);
        ck_assert_ptr_nonnull(buf);
        memcpy(buf, base, len + 1);
        int edits = 1 + (int)(rnd() % 4);
        for (int e = 0; e < edits; e++) {
            size_t cur = strlen(buf);
            size_t at = cur ? rnd() % cur : 0;
            switch (rnd() % 4) {
            case 0: /* replace a byte */
                buf[at] = alphabet[rnd() % (sizeof(alphabet) - 1)];
                break;
            case 1: /* delete a byte */
                memmove(buf + at, buf + at + 1, cur - at);
                break;
            case 2: /* truncate */
                buf[at] = 0;
                break;
            default: /* insert a byte */
                if (cur + 2 < len + 64) {
                    memmove(buf + at + 1, buf + at, cur - at + 1);
                    buf[at] = alphabet[rnd() % (sizeof(alphabet) - 1)];
                }
                break;
            }
        }
        struct glm_config c;
        err[0] = 0;
        int rc = glm_config_from_json(buf, &c, err, sizeof(err));
        if (rc == 0) {
            accepted++;
            ck_assert_int_eq(glm_config_validate(&c, err, sizeof(err)), 0);
            char *j = glm_config_to_json(&c);
            ck_assert_ptr_nonnull(j);
            struct glm_config d;
            ck_assert_int_eq(glm_config_from_json(j, &d, err, sizeof(err)), 0);
            ck_assert_int_eq(memcmp(&c, &d, sizeof(c)), 0);
            free(j);
            struct glm_tensor_info t;
            ck_assert_int_eq(glm_config_tensor_info(&c, GLM_T_EMBED, -1, -1, &t), 0);
        } else {
            rejected++;
            ck_assert_msg(err[0] != 0, "error %d without a message for:\n%s", rc, buf);
        }
        free(buf);
    }
    ck_assert_int_gt(accepted, 0);
    ck_assert_int_gt(rejected, 0);

    /* random tensor names against a valid config */
    struct glm_config c;
    ck_assert_int_eq(glm_config_from_json(GLM5_JSON, &c, err, sizeof(err)), 0);
    static const char *parts[] = {
        "model.",   "layers.",  "7",     "77",      "78",           "999999999999", ".",
        "mlp.",     "experts.", "255",   "256",     "gate_proj",    ".weight",      "self_attn.",
        "indexer.", "k_norm",   ".bias", "lm_head", "embed_tokens", "-1",           "0",
        "00"};
    for (int it = 0; it < 3000; it++) {
        char name[256] = "";
        int np = 1 + (int)(rnd() % 8);
        for (int k = 0; k < np; k++)
            strncat(name, parts[rnd() % (sizeof(parts) / sizeof(parts[0]))],
                    sizeof(name) - strlen(name) - 1);
        struct glm_tensor_info t;
        err[0] = 0;
        int rc = glm_config_tensor_lookup(&c, name, &t, err, sizeof(err));
        ck_assert(rc == 0 || rc == 1 || rc == TX_ENOENT);
        if (rc == 0)
            ck_assert_str_eq(t.name, name);
        if (rc == TX_ENOENT)
            ck_assert(err[0] != 0);
    }
}
END_TEST

static int count_listed(void *ctx, const struct glm_tensor_info *t)
{
    (void)t;
    (*(int64_t *)ctx)++;
    return 0;
}

/* issue 16: counts beyond what a real checkpoint holds fail at once with
 * the field, its value and the limit, before anything iterates over them */
static char *with_field(const char *base, const char *key, const char *value)
{
    struct json_object *o = json_tokener_parse(base);
    ck_assert_ptr_nonnull(o);
    json_object_object_add(o, key, json_tokener_parse(value));
    char *s = strdup(json_object_to_json_string(o));
    json_object_put(o);
    return s;
}

START_TEST(test_limits)
{
    static const struct {
        const char *key, *value, *msg;
    } cases[] = {
        {"n_routed_experts", "851643", "n_routed_experts: 851643 exceeds the limit 4096"},
        {"num_hidden_layers", "513", "num_hidden_layers: 513 is outside [1, 512]"},
        {"vocab_size", "2000000000", "vocab_size: 2000000000 exceeds the limit 1048576"},
        {"hidden_size", "1000000", "hidden_size: 1000000 exceeds the limit 65536"},
        {"num_attention_heads", "65536", "num_attention_heads: 65536 exceeds the limit 1024"},
        {"max_position_embeddings", "2000000000", "max_position_embeddings: 2000000000 exceeds"},
        {"head_dim", "100000", "head_dim: 100000 exceeds the limit 4096"},
        {"moe_intermediate_size", "1000000", "moe_intermediate_size: 1000000 exceeds"},
        {"n_shared_experts", "1000", "n_shared_experts: 1000 exceeds the limit 64"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *j = with_field(AIR_JSON, cases[i].key, cases[i].value);
        struct glm_config c;
        err[0] = 0;
        ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), TX_EINVAL);
        ck_assert_msg(strstr(err, cases[i].msg), "%s: got \"%s\"", cases[i].key, err);
        free(j);
    }
    /* both inside their own limits, together too many tensors */
    char *j = with_field(AIR_JSON, "n_routed_experts", "4096");
    char *k = with_field(j, "num_hidden_layers", "500");
    struct glm_config c;
    ck_assert_int_eq(glm_config_from_json(k, &c, err, sizeof(err)), TX_EINVAL);
    ck_assert_msg(strstr(err, "num_hidden_layers (500) x n_routed_experts (4096) gives") &&
                      strstr(err, "more than the limit 262144"),
                  "got \"%s\"", err);
    free(k);
    free(j);
    /* Kimi-K2-sized expert counts stay accepted, and the count is exact */
    j = with_field(AIR_JSON, "n_routed_experts", "384");
    ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), 0);
    int64_t n = glm_config_tensor_count(&c);
    ck_assert_int_gt(n, 45 * 384 * 3);
    int64_t listed = 0;
    ck_assert_int_eq(glm_config_tensor_list(&c, count_listed, &listed), 0);
    ck_assert_int_eq(n, listed);
    free(j);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("glm_config");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_air);
    tcase_add_test(tc, test_air_names);
    tcase_add_test(tc, test_g47_rope_parameters);
    tcase_add_test(tc, test_glm5);
    tcase_add_test(tc, test_deepseek_v3);
    tcase_add_test(tc, test_indexer_schedule);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_qwen3_moe);
    tcase_add_loop_test(tc, test_malformed, 0, (int)(sizeof(bads) / sizeof(bads[0])));
    tcase_add_test(tc, test_not_object);
    tcase_add_test(tc, test_load_file);
    tcase_add_test(tc, test_inv_freq);
    tcase_add_test(tc, test_required_fields);
    tcase_add_test(tc, test_mutations);
    tcase_add_test(tc, test_limits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
