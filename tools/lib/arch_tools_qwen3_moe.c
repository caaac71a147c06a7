/* SPDX-License-Identifier: MIT */
/*
 * The tools' side of the Qwen3MoeForCausalLM module (libtx/arch/qwen3_moe.c):
 * glm-analyze's figures and glm-synth's config.json and chat template.
 */
#include "common/arch_tools.h"

#include <string.h>

#include <json-c/json.h>

#include <tx-internal/tx_config_json.h>

/* ---- glm-analyze ---------------------------------------------------------- */

/* the GQA fields and the router */
static void analyze_json(const struct glm_config *c, struct json_object *ar)
{
    tx_gqa_analyze_json(c, ar);
    json_object_object_add(ar, "router", json_object_new_string("softmax"));
}

/* ---- glm-synth ------------------------------------------------------------ */

/* The project's own Qwen3-form chat template (ChatML, tool definitions in
 * the first system turn): what tx_tokenizer_chat_render renders for
 * TX_CHAT_QWEN3 -- a think block only for assistant turns after the last
 * query (the last user turn that is not a <tool_response> wrapper) that
 * have reasoning, and always for the last message (empty when it has
 * none); other assistant turns keep their content as it is; tool results
 * grouped in one user turn of <tool_response> blocks. */
static const char chat_template[] =
    "{%- if tools -%}{{ '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0].role == 'system' -%}"
    "{{ (messages[0].content or '') + '\\n\\n' }}{%- endif -%}"
    "{{ '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for t in tools -%}{{ '\\n' + t | tojson }}{%- endfor -%}"
    "{{ '\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    "{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n"
    "</tool_call><|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- set ns = namespace(last_q=messages | length - 1, found=false) -%}"
    "{%- for m in messages | reverse -%}{%- set c = m.content or '' -%}"
    "{%- if not ns.found and m.role == 'user' and not (c.startswith('<tool_response>') and "
    "c.endswith('</tool_response>')) -%}"
    "{%- set ns.last_q = messages | length - 1 - loop.index0 -%}{%- set ns.found = true -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- set tool = m.role == 'tool' or m.role == 'observation' -%}"
    "{%- if m.role == 'system' and loop.first and tools -%}"
    "{%- elif m.role == 'system' or m.role == 'user' -%}"
    "{{ '<|im_start|>' + m.role + '\\n' + (m.content or '') + '<|im_end|>\\n' }}"
    "{%- elif m.role == 'assistant' -%}"
    "{%- set c = m.content or '' -%}"
    "{%- if m.reasoning_content is string -%}{%- set r = m.reasoning_content -%}"
    "{%- elif '</think>' in c -%}"
    "{%- set r = c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') -%}"
    "{%- set c = c.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- else -%}{%- set r = '' -%}{%- endif -%}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{%- if loop.index0 > ns.last_q and (loop.last or r) -%}"
    "{{ '<think>\\n' + r.strip('\\n') + '\\n</think>\\n\\n' + c.lstrip('\\n') }}"
    "{%- else -%}{{ c }}{%- endif -%}"
    "{%- for tc in (m.tool_calls or []) -%}{%- set f = tc.function if tc.function else tc -%}"
    "{%- if not loop.first or c -%}{{ '\\n' }}{%- endif -%}"
    "{{ '<tool_call>\\n{\\\"name\\\": \\\"' + f.name + '\\\", \\\"arguments\\\": ' + "
    "(f.arguments if f.arguments is string else (f.arguments or {}) | tojson) + "
    "'}\\n</tool_call>' }}"
    "{%- endfor -%}{{ '<|im_end|>\\n' }}"
    "{%- elif tool -%}"
    "{%- if loop.first or "
    "(loop.previtem.role != 'tool' and loop.previtem.role != 'observation') -%}"
    "{{ '<|im_start|>user' }}{%- endif -%}"
    "{{ '\\n<tool_response>\\n' + (m.content or '') + '\\n</tool_response>' }}"
    "{%- if loop.last or "
    "(loop.nextitem.role != 'tool' and loop.nextitem.role != 'observation') -%}"
    "{{ '<|im_end|>\\n' }}{%- endif -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and not enable_thinking -%}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif -%}{%- endif -%}";

struct preset {
    int hidden, inter, moe_inter, layers, heads, kv_heads, head_dim;
    int experts, topk, step, max_pos;
};

/* tiny: 3 layers, the middle one dense through mlp_only_layers; small:
 * decoder_sparse_step 2 (layers 1 and 3 sparse) */
static const struct preset presets[3] = {
    {64, 128, 64, 3, 4, 2, 32, 8, 2, 1, 4096},
    {128, 384, 64, 4, 4, 2, 32, 16, 4, 2, 8192},
    {1024, 2816, 512, 8, 16, 4, 64, 48, 8, 1, 32768},
};

/* the field set of Qwen3-30B-A3B's config.json */
static struct json_object *synth_config(enum tx_synth_preset preset, int vocab_size,
                                        const int32_t *eos_ids, int n_eos, int32_t pad)
{
    (void)pad;
    (void)eos_ids;
    (void)n_eos;
    const struct preset *p = &presets[preset];
    struct json_object *o = json_object_new_object();
    struct json_object *a = json_object_new_array();
    json_object_array_add(a, json_object_new_string("Qwen3MoeForCausalLM"));
    json_object_object_add(o, "architectures", a);
    cj_put_b(o, "attention_bias", 0);
    cj_put_d(o, "attention_dropout", 0.0);
    /* Qwen3's <|endoftext|> / <|im_end|> when the vocabulary has them */
    if (vocab_size > 151645) {
        cj_put_i(o, "bos_token_id", 151643);
        cj_put_i(o, "eos_token_id", 151645);
    } else {
        cj_put_i(o, "bos_token_id", 0);
        cj_put_i(o, "eos_token_id", 1);
    }
    cj_put_i(o, "decoder_sparse_step", p->step);
    cj_put_i(o, "head_dim", p->head_dim);
    cj_put_s(o, "hidden_act", "silu");
    cj_put_i(o, "hidden_size", p->hidden);
    cj_put_d(o, "initializer_range", 0.02);
    cj_put_i(o, "intermediate_size", p->inter);
    cj_put_i(o, "max_position_embeddings", p->max_pos);
    cj_put_i(o, "max_window_layers", p->layers);
    struct json_object *ml = json_object_new_array();
    if (preset == TX_SYNTH_TINY)
        json_object_array_add(ml, json_object_new_int(1));
    json_object_object_add(o, "mlp_only_layers", ml);
    cj_put_s(o, "model_type", "qwen3_moe");
    cj_put_i(o, "moe_intermediate_size", p->moe_inter);
    cj_put_b(o, "norm_topk_prob", 1);
    cj_put_i(o, "num_attention_heads", p->heads);
    cj_put_i(o, "num_experts", p->experts);
    cj_put_i(o, "num_experts_per_tok", p->topk);
    cj_put_i(o, "num_hidden_layers", p->layers);
    cj_put_i(o, "num_key_value_heads", p->kv_heads);
    cj_put_b(o, "output_router_logits", 0);
    cj_put_d(o, "rms_norm_eps", 1e-6);
    json_object_object_add(o, "rope_scaling", NULL);
    cj_put_d(o, "rope_theta", 1000000.0);
    cj_put_d(o, "router_aux_loss_coef", 0.001);
    json_object_object_add(o, "sliding_window", NULL);
    cj_put_b(o, "tie_word_embeddings", 0);
    cj_put_s(o, "torch_dtype", "bfloat16");
    cj_put_s(o, "transformers_version", "4.51.0");
    cj_put_b(o, "use_cache", 1);
    cj_put_b(o, "use_sliding_window", 0);
    cj_put_i(o, "vocab_size", vocab_size);
    return o;
}

const struct tx_arch_tools tx_arch_tools_qwen3_moe = {
    .id = GLM_ARCH_QWEN3_MOE,
    .cost = tx_gqa_cost,
    .analyze_json = analyze_json,
    .chat_template = chat_template,
    .synth_config = synth_config,
};
