/* SPDX-License-Identifier: MIT */
/*
 * The tools' side of the GlmMoeDsaForCausalLM (GLM-5.1) module (libtx/arch/glm_moe_dsa.c):
 * glm-analyze's figures and glm-synth's config.json and chat template.
 */
#include "common/arch_tools.h"

#include <string.h>

#include <json-c/json.h>

#include <tx-internal/tx_config_json.h>

/* ---- glm-analyze ---------------------------------------------------------- */

static void cost(const struct glm_config *c, struct tx_arch_cost *o)
{
    tx_mla_cost(c, o);
    /* the indexer keys: q8_0 beside an f16 cache when 32 | index_head_dim */
    double ik = c->index_head_dim % 32 == 0 ? c->index_head_dim / 32.0 * 34.0
                                            : c->index_head_dim * 4.0;
    o->ik_elems = c->index_head_dim;
    o->kv_layer += ik;
    o->kv_latent += ik;
    o->kv_expanded += c->index_head_dim * 4.0;
    o->sel_pair_macs = (double)c->index_n_heads * (c->index_head_dim + 1);
    o->select_k = c->index_topk;
}

static void analyze_json(const struct glm_config *c, struct json_object *ar)
{
    static const char *const k[] = {"index_topk", "index_n_heads", "index_head_dim"};
    const int v[] = {c->index_topk, c->index_n_heads, c->index_head_dim};
    tx_mla_analyze_json(c, ar);
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
        json_object_object_add(ar, k[i], json_object_new_int64(v[i]));
}

/* ---- glm-synth ------------------------------------------------------------ */

/* The project's own GLM-5-form chat template (no tool definitions): it
 * renders what tx_tokenizer_chat_render renders for TX_CHAT_GLM5 (as the
 * GLM-4.5 one in glm4_moe.c, without the newlines); also the template of
 * DeepSeek-V3's synthetic checkpoint (arch.h) and, in make check, of the
 * GLM-4.7-style glm4_moe package (tools/chat-template-check). */
const char tx_arch_glm5_synth_template[] =
    "[gMASK]<sop>"
    "{%- if tools -%}"
    "{{ '<|system|>\\n# Tools\\n\\nYou may call one or more functions to assist with the user "
    "query.\\n\\nYou are provided with function signatures within <tools></tools> XML "
    "tags:\\n<tools>\\n' }}"
    "{%- for t in tools -%}{{ t | tojson(ensure_ascii=False) + '\\n' }}{%- endfor -%}"
    "{{ '</tools>\\n\\nFor each function call, output the function name and arguments within "
    "the following XML format:\\n' }}"
    "{{ '<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}"
    "</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>..."
    "</tool_call>' }}"
    "{%- endif -%}"
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}{{ '<|system|>' + (m.content or '') }}"
    "{%- elif m.role == 'user' -%}{{ '<|user|>' + (m.content or '') }}"
    "{%- elif m.role == 'assistant' -%}"
    "{%- set c = m.content or '' -%}"
    "{%- if m.reasoning_content is string -%}{%- set r = m.reasoning_content -%}"
    "{%- elif '</think>' in c -%}"
    "{%- set r = c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') -%}"
    "{%- set c = c.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- else -%}{%- set r = '' -%}{%- endif -%}"
    "{{ '<|assistant|>' }}"
    "{%- if loop.index0 > ns.last_user and r -%}{{ '<think>' + r.strip() + '</think>' }}"
    "{%- else -%}{{ '</think>' }}{%- endif -%}"
    "{{ c.strip() }}"
    "{%- for tc in (m.tool_calls or []) -%}{%- set f = tc.function if tc.function else tc -%}"
    "{{ '<tool_call>' + f.name }}"
    "{%- for k, v in (f.arguments or {}).items() -%}"
    "{{ '<arg_key>' + k + '</arg_key><arg_value>' + "
    "(v if v is string else v | tojson(ensure_ascii=False)) + '</arg_value>' }}"
    "{%- endfor -%}{{ '</tool_call>' }}{%- endfor -%}"
    "{%- elif m.role == 'tool' or m.role == 'observation' -%}"
    "{%- if loop.first or "
    "(loop.previtem.role != 'tool' and loop.previtem.role != 'observation') -%}"
    "{{ '<|observation|>' }}{%- endif -%}"
    "{{ '<tool_response>' + (m.content or '') + '</tool_response>' }}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{ '<|assistant|></think>' }}"
    "{%- else -%}{{ '<|assistant|><think>' }}{%- endif -%}{%- endif -%}";

struct preset {
    int hidden, inter, moe_inter, layers, dense, heads, kv_heads, head_dim;
    int experts, topk, shared, n_group, topk_group, max_pos;
    int q_lora, kv_lora, nope, rope, v_dim, idx_heads, idx_dim, idx_topk;
};

static const struct preset presets[3] = {
    {64, 128, 64, 3, 1, 4, 4, 16, 8, 2, 1, 1, 1, 4096, 32, 32, 16, 16, 16, 4, 32, 8},
    {128, 384, 64, 4, 1, 4, 4, 32, 16, 4, 1, 1, 1, 8192, 64, 64, 32, 32, 32, 4, 32, 64},
    {1024, 2816, 512, 8, 1, 16, 16, 32, 48, 8, 1, 1, 1, 32768, 512, 256, 64, 32, 64, 8, 64, 256},
};

/* the field set of GLM-5's config.json */
static struct json_object *synth_config(enum tx_synth_preset preset, int vocab_size,
                                        const int32_t *eos_ids, int n_eos, int32_t pad)
{
    const struct preset *p = &presets[preset];
    struct json_object *o = json_object_new_object();
    struct json_object *a = json_object_new_array();
    json_object_array_add(a, json_object_new_string("GlmMoeDsaForCausalLM"));
    json_object_object_add(o, "architectures", a);
    /* as the GLM configs list them: <|endoftext|>, <|user|>, <|observation|> */
    struct json_object *eos = json_object_new_array();
    for (int i = 0; i < n_eos; i++)
        json_object_array_add(eos, json_object_new_int(eos_ids[i]));
    cj_put_b(o, "attention_bias", 0);
    cj_put_d(o, "attention_dropout", 0.0);
    json_object_object_add(o, "eos_token_id", eos);
    cj_put_i(o, "pad_token_id", pad);
    cj_put_i(o, "ep_size", 1);
    cj_put_i(o, "first_k_dense_replace", p->dense);
    cj_put_s(o, "hidden_act", "silu");
    cj_put_i(o, "head_dim", p->rope);
    cj_put_i(o, "hidden_size", p->hidden);
    cj_put_i(o, "index_head_dim", p->idx_dim);
    cj_put_i(o, "index_n_heads", p->idx_heads);
    cj_put_i(o, "index_topk", p->idx_topk);
    cj_put_b(o, "indexer_rope_interleave", 1);
    cj_put_d(o, "initializer_range", 0.02);
    cj_put_i(o, "intermediate_size", p->inter);
    cj_put_i(o, "kv_lora_rank", p->kv_lora);
    cj_put_i(o, "max_position_embeddings", p->max_pos);
    cj_put_s(o, "model_type", "glm_moe_dsa");
    cj_put_i(o, "moe_intermediate_size", p->moe_inter);
    cj_put_i(o, "moe_layer_freq", 1);
    cj_put_i(o, "n_group", p->n_group);
    cj_put_i(o, "n_routed_experts", p->experts);
    cj_put_i(o, "n_shared_experts", p->shared);
    cj_put_b(o, "norm_topk_prob", 1);
    cj_put_i(o, "num_attention_heads", p->heads);
    cj_put_i(o, "num_experts_per_tok", p->topk);
    cj_put_i(o, "num_hidden_layers", p->layers);
    cj_put_i(o, "num_key_value_heads", p->kv_heads);
    cj_put_i(o, "num_nextn_predict_layers", 1);
    cj_put_i(o, "q_lora_rank", p->q_lora);
    cj_put_i(o, "qk_head_dim", p->nope + p->rope);
    cj_put_i(o, "qk_nope_head_dim", p->nope);
    cj_put_i(o, "qk_rope_head_dim", p->rope);
    cj_put_d(o, "rms_norm_eps", 1e-5);
    cj_put_b(o, "rope_interleave", 1);
    struct json_object *rp = json_object_new_object();
    cj_put_d(rp, "rope_theta", 1000000.0);
    cj_put_s(rp, "rope_type", "default");
    json_object_object_add(o, "rope_parameters", rp);
    cj_put_d(o, "routed_scaling_factor", 2.5);
    cj_put_s(o, "scoring_func", "sigmoid");
    cj_put_b(o, "tie_word_embeddings", 0);
    cj_put_i(o, "topk_group", p->topk_group);
    cj_put_s(o, "topk_method", "noaux_tc");
    cj_put_s(o, "dtype", "bfloat16");
    cj_put_s(o, "transformers_version", "5.0.0");
    cj_put_b(o, "use_cache", 1);
    cj_put_i(o, "v_head_dim", p->v_dim);
    cj_put_i(o, "vocab_size", vocab_size);

    return o;
}

const struct tx_arch_tools tx_arch_tools_glm_moe_dsa = {
    .id = GLM_ARCH_GLM_MOE_DSA,
    .cost = cost,
    .analyze_json = analyze_json,
    .chat_template = tx_arch_glm5_synth_template,
    .synth_config = synth_config,
};
