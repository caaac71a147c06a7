/* SPDX-License-Identifier: MIT */
/*
 * The tools' side of the Glm4MoeForCausalLM (GLM-4.5) module (libtx/arch/glm4_moe.c):
 * glm-analyze's figures and glm-synth's config.json and chat template.
 */
#include "common/arch_tools.h"

#include <string.h>

#include <json-c/json.h>

#include <tx-internal/tx_config_json.h>

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

const struct tx_arch_tools tx_arch_tools_glm4_moe = {
    .id = GLM_ARCH_GLM4_MOE,
    .cost = tx_gqa_cost,
    .analyze_json = tx_gqa_analyze_json,
    .chat_template = chat_template,
    .synth_config = synth_config,
};
