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
#include <tx-internal/tx_config_json.h>
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
    .chat_format = TX_CHAT_QWEN3,
};
