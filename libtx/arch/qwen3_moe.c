// SPDX-License-Identifier: MIT
/*
 * Architecture module: Qwen3MoeForCausalLM (model_type "qwen3_moe":
 * Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder MoE). GQA attention without
 * biases, per-head q/k RMSNorm before a full NeoX RoPE; per layer a dense
 * MLP or a softmax-routed MoE (no shared expert, no correction bias, no
 * groups) as Qwen3MoeDecoderLayer decides from decoder_sparse_step and
 * mlp_only_layers. Formulas and the transformers functions they mirror:
 * docs/architectures.md ("qwen3_moe").
 *
 * Errors: TX_E* codes (tx/tx_error.h) through tx_errbuf(), like the other
 * modules.
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
    /* Qwen3MoeConfig.__init__ */
    c->vocab_size = 151936;
    c->hidden_size = 2048;
    c->intermediate_size = 6144;
    c->num_hidden_layers = 24;
    c->num_attention_heads = 32;
    c->num_key_value_heads = 4;
    c->max_position_embeddings = 32768;
    c->rms_norm_eps = 1e-6;
    c->rope_theta = 10000.0;
    c->moe_intermediate_size = 768;
    c->num_experts_per_tok = 8;
    c->n_routed_experts = 128;
    c->norm_topk_prob = 0;
    /* what the DeepSeek-V3 router family has and Qwen3-MoE has not */
    c->n_shared_experts = 0;
    c->n_group = 1;
    c->topk_group = 1;
    c->routed_scaling_factor = 1.0;
    c->first_k_dense_replace = 0;
    /* Qwen3MoeAttention: q_norm / k_norm always; full rotary */
    c->use_qk_norm = 1;
    c->partial_rotary_factor = 1.0;
}

/* Qwen3MoeSparseMoeBlock: num_experts, num_experts_per_tok, norm_topk_prob;
 * the router is softmax (no scoring_func field; one naming another is
 * refused) */
static int parse_moe(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    int rc;
    CJ_REQ(cj_int, "num_experts", &c->n_routed_experts);
    CJ_REQ(cj_int, "num_experts_per_tok", &c->num_experts_per_tok);
    CJ_GET(cj_bool, "norm_topk_prob", &c->norm_topk_prob);
    const char *s = NULL;
    rc = cj_str(root, "scoring_func", "", &s, err, errsz);
    if (rc < 0)
        return rc;
    if (s && strcmp(s, "softmax") != 0)
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                       "config.json: scoring_func: \"%s\" is not supported (Qwen3-MoE routes "
                       "with softmax)",
                       s);
    int shared = 0;
    rc = cj_int(root, "shared_expert_intermediate_size", &shared, err, errsz);
    if (rc < 0)
        return rc;
    if (shared > 0)
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                       "config.json: shared_expert_intermediate_size: %d: Qwen3-MoE has no "
                       "shared expert (a Qwen2-MoE checkpoint?)",
                       shared);
    return 0;
}

static int parse(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    /* Qwen3MoeAttention: getattr(config, "head_dim", hidden_size // num_attention_heads) */
    tx_gqa_parse_head_dim(root, c);
    /* sliding-window attention (use_sliding_window, max_window_layers) is
     * not implemented: refused when enabled */
    int sw = 0;
    CJ_GET(cj_bool, "use_sliding_window", &sw);
    if (sw)
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                       "config.json: use_sliding_window: true is not supported (qwen3_moe "
                       "runs full causal attention; set it to false)");
    struct json_object *lt = cj_field(root, "layer_types");
    if (lt) {
        if (json_object_get_type(lt) != json_type_array)
            return tx_errbuf(err, errsz, TX_EINVAL, "config.json: layer_types: expected a list");
        for (size_t i = 0; i < json_object_array_length(lt); i++) {
            const char *t = json_object_get_string(json_object_array_get_idx(lt, i));
            if (!t || strcmp(t, "full_attention") != 0)
                return tx_errbuf(err, errsz, TX_ENOTSUP,
                               "config.json: layer_types[%zu]: \"%s\" is not supported (only "
                               "full_attention)",
                               i, t ? t : "?");
        }
    }
    return 0;
}

/* Qwen3MoeDecoderLayer.__init__: layer l has the sparse MoE block iff
 * l not in mlp_only_layers and num_experts > 0 and (l + 1) %
 * decoder_sparse_step == 0; else Qwen3MoeMLP(intermediate_size). */
static int parse_mlp_layers(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    int step = 1;
    CJ_REQ(cj_int, "decoder_sparse_step", &step);
    if (step < 1)
        return tx_errbuf(err, errsz, TX_EINVAL,
                       "config.json: decoder_sparse_step: must be >= 1 (got %d)", step);
    uint8_t only[GLM_MAX_LAYERS];
    memset(only, 0, sizeof(only));
    struct json_object *ml = cj_field(root, "mlp_only_layers");
    if (ml) {
        if (json_object_get_type(ml) != json_type_array)
            return tx_errbuf(err, errsz, TX_EINVAL,
                           "config.json: mlp_only_layers: expected a list of layer indices");
        for (size_t i = 0; i < json_object_array_length(ml); i++) {
            struct json_object *e = json_object_array_get_idx(ml, i);
            if (json_object_get_type(e) != json_type_int)
                return tx_errbuf(err, errsz, TX_EINVAL,
                               "config.json: mlp_only_layers[%zu]: expected an integer", i);
            int64_t v = json_object_get_int64(e);
            if (v < 0 || v >= c->num_hidden_layers)
                return tx_errbuf(err, errsz, TX_EINVAL,
                               "config.json: mlp_only_layers[%zu]: %lld is not a layer index "
                               "(num_hidden_layers %d)",
                               i, (long long)v, c->num_hidden_layers);
            only[v] = 1;
        }
    }
    for (int l = 0; l < c->num_hidden_layers; l++)
        c->mlp_layer_types[l] = !only[l] && c->n_routed_experts > 0 && (l + 1) % step == 0
                                    ? GLM_MLP_SPARSE
                                    : GLM_MLP_DENSE;
    return 0;
}

static int parse_layers(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    (void)root;
    (void)err;
    (void)errsz;
    c->rotary_dim = c->head_dim; /* Qwen3MoeRotaryEmbedding: dim = head_dim */
    return 0;
}

static int validate(const struct glm_config *c, char *err, size_t errsz)
{
    CJ_POS(head_dim);
    if (c->partial_rotary_factor != 1.0)
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                       "config.json: partial_rotary_factor: %g is not supported (Qwen3-MoE "
                       "rotates the whole head)",
                       c->partial_rotary_factor);
    if (c->rotary_dim != c->head_dim || c->head_dim % 2 != 0)
        return tx_errbuf(err, errsz, TX_EINVAL,
                       "config: qwen3_moe: rotary_dim (%d) must equal head_dim (%d), even",
                       c->rotary_dim, c->head_dim);
    if (c->rope_interleave)
        return tx_errbuf(err, errsz, TX_EINVAL, "config: qwen3_moe uses NeoX RoPE (rope_interleave 0)");
    if (!c->use_qk_norm)
        return tx_errbuf(err, errsz, TX_EINVAL, "config: qwen3_moe always has q_norm/k_norm");
    if (c->n_shared_experts != 0 || c->n_group != 1 || c->topk_group != 1 ||
        c->routed_scaling_factor != 1.0 || c->first_k_dense_replace != 0)
        return tx_errbuf(err, errsz, TX_EINVAL,
                       "config: qwen3_moe has no shared experts, expert groups, routed scaling "
                       "or first_k_dense_replace");
    return 0;
}

/* the fields of Qwen3MoeConfig; the common writer's DeepSeek-router fields
 * are replaced (the round trip keeps the struct: mlp_layer_types becomes
 * decoder_sparse_step 1 + mlp_only_layers, which decides the same layers) */
static int to_json(const struct glm_config *c, struct json_object *o)
{
    static const char *const drop[] = {
        "n_routed_experts", "n_shared_experts",      "routed_scaling_factor", "n_group",
        "topk_group",       "first_k_dense_replace", "scoring_func",          "topk_method",
        "mlp_layer_types",  "partial_rotary_factor",
    };
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        json_object_object_del(o, drop[i]);
    int bad = 0;
    bad |= cj_add(o, "num_experts", json_object_new_int(c->n_routed_experts));
    bad |= cj_add(o, "decoder_sparse_step", json_object_new_int(1));
    struct json_object *ml = json_object_new_array();
    for (int l = 0; ml && l < c->num_hidden_layers; l++)
        if (c->mlp_layer_types[l] == GLM_MLP_DENSE && c->n_routed_experts > 0)
            json_object_array_add(ml, json_object_new_int(l));
    bad |= cj_add(o, "mlp_only_layers", ml);
    bad |= cj_add(o, "use_sliding_window", json_object_new_boolean(0));
    return bad;
}

/* Qwen3MoeAttention.scaling = head_dim ** -0.5 */
static double attn_scale(const struct glm_config *c)
{
    return 1.0 / sqrt((double)c->head_dim);
}

/* ---- tensors -------------------------------------------------------------- */

/* Qwen3MoeAttention's tensors (no biases; q_norm / k_norm of head_dim), no
 * router correction bias; everything else as common */
static int layer_tensor(const struct glm_config *c, enum glm_tensor_role role, int layer,
                        int expert, struct glm_tensor_info *t)
{
    (void)expert;
    (void)layer;
    if (role == GLM_T_ROUTER_BIAS)
        return TX_ENOENT;
    return tx_gqa_layer_tensor(c, role, 0, 1, t);
}

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

static const char *const aliases[] = {"qwen3moe", "qwen3", NULL};

const struct tx_arch_ops tx_arch_qwen3_moe = {
    .id = GLM_ARCH_QWEN3_MOE,
    .model_type = "qwen3_moe",
    .class_name = "Qwen3MoeForCausalLM",
    .family = "Qwen3-MoE",
    .models = "Qwen3-30B-A3B/235B-A22B",
    .aliases = aliases,
    .attn_short = "GQA",
    .attn_long = "GQA attention",
    .defaults = defaults,
    .parse_moe = parse_moe,
    .parse = parse,
    .parse_mlp_layers = parse_mlp_layers,
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
    .router = TX_ROUTER_SOFTMAX,
    .ref_attention = TX_REF_ATTN_GQA,
    .cost = tx_gqa_cost,
    .analyze_json = analyze_json,
    .chat_format = TX_CHAT_QWEN3,
    .chat_template = chat_template,
    .synth_config = synth_config,
};
