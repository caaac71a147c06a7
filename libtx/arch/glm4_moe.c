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
#include "model/config_json.h"
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

/* ---- glm-synth ------------------------------------------------------------ */

/* The project's own GLM-4.5-form chat template: it renders what
 * tx_tokenizer_chat_render(_tools) renders for TX_CHAT_GLM45 -- tool
 * definitions in a <|system|> turn first (one JSON per line, the call
 * format with the arguments one per line), reasoning kept in <think> only
 * for assistant turns after the last user turn, contents stripped, tool
 * calls after the content ("\n<tool_call>NAME\n", "<arg_key>K</arg_key>\n
 * <arg_value>V</arg_value>\n" each), tool results grouped after one
 * <|observation|> (tools/chat-template-check compares the two with Jinja2
 * in make check). */
static const char chat_template[] =
    "[gMASK]<sop>"
    "{%- if tools -%}"
    "{{ '<|system|>\\n# Tools\\n\\nYou may call one or more functions to assist with the user "
    "query.\\n\\nYou are provided with function signatures within <tools></tools> XML "
    "tags:\\n<tools>\\n' }}"
    "{%- for t in tools -%}{{ t | tojson(ensure_ascii=False) + '\\n' }}{%- endfor -%}"
    "{{ '</tools>\\n\\nFor each function call, output the function name and arguments within "
    "the following XML format:\\n' }}"
    "{{ '<tool_call>{function-name}\\n<arg_key>{arg-key-1}</arg_key>\\n<arg_value>{arg-value-1}"
    "</arg_value>\\n<arg_key>{arg-key-2}</arg_key>\\n<arg_value>{arg-value-2}</arg_value>\\n...\\n"
    "</tool_call>' }}"
    "{%- endif -%}"
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}{{ '<|system|>\\n' + (m.content or '') }}"
    "{%- elif m.role == 'user' -%}{{ '<|user|>\\n' + (m.content or '') }}"
    "{%- if enable_thinking is defined and not enable_thinking and "
    "not (m.content or '').endswith('/nothink') -%}{{ '/nothink' }}{%- endif -%}"
    "{%- elif m.role == 'assistant' -%}"
    "{%- set c = m.content or '' -%}"
    "{%- if m.reasoning_content is string -%}{%- set r = m.reasoning_content -%}"
    "{%- elif '</think>' in c -%}"
    "{%- set r = c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') -%}"
    "{%- set c = c.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- else -%}{%- set r = '' -%}{%- endif -%}"
    "{{ '<|assistant|>' }}"
    "{%- if loop.index0 > ns.last_user and r -%}{{ '\\n<think>' + r.strip() + '</think>' }}"
    "{%- else -%}{{ '\\n<think></think>' }}{%- endif -%}"
    "{%- if c.strip() -%}{{ '\\n' + c.strip() }}{%- endif -%}"
    "{%- for tc in (m.tool_calls or []) -%}{%- set f = tc.function if tc.function else tc -%}"
    "{{ '\\n<tool_call>' + f.name + '\\n' }}"
    "{%- for k, v in (f.arguments or {}).items() -%}"
    "{{ '<arg_key>' + k + '</arg_key>\\n<arg_value>' + "
    "(v if v is string else v | tojson(ensure_ascii=False)) + '</arg_value>\\n' }}"
    "{%- endfor -%}{{ '</tool_call>' }}{%- endfor -%}"
    "{%- elif m.role == 'tool' or m.role == 'observation' -%}"
    "{%- if loop.first or "
    "(loop.previtem.role != 'tool' and loop.previtem.role != 'observation') -%}"
    "{{ '<|observation|>' }}{%- endif -%}"
    "{{ '\\n<tool_response>\\n' + (m.content or '') + '\\n</tool_response>' }}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|assistant|>' }}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{ '\\n<think></think>' }}"
    "{%- endif -%}{%- endif -%}";

struct preset {
    int hidden, inter, moe_inter, layers, dense, heads, kv_heads, head_dim;
    int experts, topk, shared, n_group, topk_group, max_pos;
};

static const struct preset presets[3] = {
    {64, 128, 64, 3, 1, 4, 2, 32, 8, 2, 1, 2, 1, 4096},
    {128, 384, 64, 4, 1, 4, 2, 32, 16, 4, 1, 1, 1, 8192},
    {1024, 2816, 512, 8, 1, 16, 4, 64, 48, 8, 1, 1, 1, 32768},
};

/* the field set of GLM-4.5's config.json */
static struct json_object *synth_config(enum tx_synth_preset preset, int vocab_size,
                                        const int32_t *eos_ids, int n_eos, int32_t pad)
{
    const struct preset *p = &presets[preset];
    struct json_object *o = json_object_new_object();
    struct json_object *a = json_object_new_array();
    json_object_array_add(a, json_object_new_string("Glm4MoeForCausalLM"));
    json_object_object_add(o, "architectures", a);
    /* as the GLM configs list them: <|endoftext|>, <|user|>, <|observation|> */
    struct json_object *eos = json_object_new_array();
    for (int i = 0; i < n_eos; i++)
        json_object_array_add(eos, json_object_new_int(eos_ids[i]));
    cj_put_b(o, "attention_bias", 1);
    cj_put_d(o, "attention_dropout", 0.0);
    cj_put_i(o, "pad_token_id", pad);
    json_object_object_add(o, "eos_token_id", eos);
    cj_put_i(o, "head_dim", p->head_dim);
    cj_put_s(o, "hidden_act", "silu");
    cj_put_i(o, "hidden_size", p->hidden);
    cj_put_d(o, "partial_rotary_factor", 0.5);
    cj_put_d(o, "initializer_range", 0.02);
    cj_put_i(o, "intermediate_size", p->inter);
    cj_put_i(o, "max_position_embeddings", p->max_pos);
    cj_put_s(o, "model_type", "glm4_moe");
    cj_put_i(o, "moe_intermediate_size", p->moe_inter);
    cj_put_b(o, "norm_topk_prob", 1);
    cj_put_i(o, "num_attention_heads", p->heads);
    cj_put_i(o, "n_group", p->n_group);
    cj_put_i(o, "topk_group", p->topk_group);
    cj_put_i(o, "n_routed_experts", p->experts);
    cj_put_i(o, "n_shared_experts", p->shared);
    cj_put_d(o, "routed_scaling_factor", 2.5);
    cj_put_i(o, "num_experts_per_tok", p->topk);
    cj_put_i(o, "first_k_dense_replace", p->dense);
    cj_put_i(o, "num_hidden_layers", p->layers);
    cj_put_i(o, "num_key_value_heads", p->kv_heads);
    cj_put_d(o, "rms_norm_eps", 1e-5);
    json_object_object_add(o, "rope_scaling", NULL);
    cj_put_d(o, "rope_theta", 1000000.0);
    cj_put_i(o, "num_nextn_predict_layers", 1);
    cj_put_b(o, "tie_word_embeddings", 0);
    cj_put_s(o, "torch_dtype", "bfloat16");
    cj_put_s(o, "transformers_version", "4.54.0");
    cj_put_b(o, "use_cache", 1);
    cj_put_b(o, "use_qk_norm", 1);
    cj_put_i(o, "vocab_size", vocab_size);
    return o;
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
    .cost = tx_gqa_cost,
    .analyze_json = tx_gqa_analyze_json,
    .chat_format = TX_CHAT_GLM45,
    .chat_template = chat_template,
    .synth_config = synth_config,
};
