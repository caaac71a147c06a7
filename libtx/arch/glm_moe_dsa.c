// SPDX-License-Identifier: MIT
/*
 * Architecture module: GlmMoeDsaForCausalLM (model_type "glm_moe_dsa":
 * GLM-5, 5.1). MLA attention (low-rank q and kv, one shared rope key per
 * token, interleaved RoPE) with the DSA lightning indexer choosing the
 * index_topk keys each query attends; dense MLP in the first layers, then
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
#include <tx-internal/tx_config_json.h>
#include "runtime/blocks.h"

/* ---- config.json --------------------------------------------------------- */

static void defaults(struct glm_config *c)
{
    /* GlmMoeDsaConfig */
    c->vocab_size = 154880;
    c->hidden_size = 6144;
    c->intermediate_size = 12288;
    c->moe_intermediate_size = 2048;
    c->num_hidden_layers = 78;
    c->num_attention_heads = 64;
    c->num_key_value_heads = 64;
    c->n_routed_experts = 256;
    c->routed_scaling_factor = 2.5;
    c->kv_lora_rank = 512;
    c->q_lora_rank = 2048;
    c->qk_rope_head_dim = 64;
    c->v_head_dim = 256;
    c->qk_nope_head_dim = 192;
    c->max_position_embeddings = 202752;
    c->bos_token_id = 0;
    c->n_eos = 1;
    c->eos_token_ids[0] = 1;
    c->index_topk = 2048;
    c->index_head_dim = 128;
    c->index_n_heads = 32;
    c->head_dim = 64;
    c->first_k_dense_replace = 3;
    c->partial_rotary_factor = 1.0;
    c->rope_interleave = 1;
    c->indexer_rope_interleave = 1;
}

static int parse(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    /* q_lora_rank: null would mean a plain q_proj; the DSA indexer needs
     * the q latent, so GLM-5 always has one. */
    int rc = tx_mla_parse_dims(
        root, c, "(no q latent) is not supported: the DSA indexer reads the q latent", err, errsz);
    if (rc < 0)
        return rc;
    CJ_GET(cj_int, "index_topk", &c->index_topk);
    CJ_REQ(cj_int, "index_head_dim", &c->index_head_dim);
    CJ_REQ(cj_int, "index_n_heads", &c->index_n_heads);
    CJ_GET(cj_bool, "rope_interleave", &c->rope_interleave);
    CJ_GET(cj_bool, "indexer_rope_interleave", &c->indexer_rope_interleave);
    return tx_mla_parse_qk_head_dim(root, c, err, errsz);
}

/* GlmMoeDsaConfig.__post_init__: indexer_types, else index_topk_pattern
 * ("FSSF..." or a list), else the index_topk_freq / index_skip_topk_offset
 * schedule: layer i is "full" iff max(i - offset + 1, 0) % freq == 0. */
static int parse_indexer_types(struct json_object *root, struct glm_config *c, char *err,
                               size_t errsz)
{
    int present = 0, rc;
    int n = c->num_hidden_layers;
    rc = cj_layer_list(root, "indexer_types", "full", "shared", c->indexer_types, n, &present, err,
                       errsz);
    if (rc < 0 || present)
        return rc;
    struct json_object *pat = cj_field(root, "index_topk_pattern");
    if (pat && json_object_get_type(pat) == json_type_string) {
        const char *s = json_object_get_string(pat);
        if ((int)strlen(s) != n)
            return tx_errbuf(
                err, errsz, TX_EINVAL,
                "config.json: index_topk_pattern: has %zu letters, num_hidden_layers is "
                "%d",
                strlen(s), n);
        for (int i = 0; i < n; i++) {
            if (s[i] == 'F')
                c->indexer_types[i] = GLM_INDEXER_FULL;
            else if (s[i] == 'S')
                c->indexer_types[i] = GLM_INDEXER_SHARED;
            else
                return tx_errbuf(
                    err, errsz, TX_EINVAL,
                    "config.json: index_topk_pattern[%d]: expected 'F' or 'S', got '%c'", i, s[i]);
        }
        return 0;
    }
    if (pat)
        return cj_layer_list(root, "index_topk_pattern", "full", "shared", c->indexer_types, n,
                             &present, err, errsz);
    int freq = 1, offset = 2;
    rc = cj_int(root, "index_topk_freq", &freq, err, errsz);
    if (rc < 0)
        return rc;
    rc = cj_int(root, "index_skip_topk_offset", &offset, err, errsz);
    if (rc < 0)
        return rc;
    if (freq < 1)
        freq = 1;
    for (int i = 0; i < n; i++) {
        int d = i - offset + 1;
        if (d < 0)
            d = 0;
        c->indexer_types[i] = (d % freq) == 0 ? GLM_INDEXER_FULL : GLM_INDEXER_SHARED;
    }
    return 0;
}

static int parse_layers(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    int rc = parse_indexer_types(root, c, err, errsz);
    if (rc < 0)
        return rc;
    c->rotary_dim = c->qk_rope_head_dim;
    return 0;
}

static int validate(const struct glm_config *c, char *err, size_t errsz)
{
    int rc = tx_mla_validate_dims(c, err, errsz);
    if (rc < 0)
        return rc;
    CJ_POS(index_topk);
    CJ_POS(index_head_dim);
    CJ_POS(index_n_heads);
    rc = tx_mla_validate_rope(c, err, errsz);
    if (rc < 0)
        return rc;
    if (c->index_head_dim < c->qk_rope_head_dim)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: index_head_dim (%d) is smaller than qk_rope_head_dim (%d), "
                         "the indexer's rotary slice",
                         c->index_head_dim, c->qk_rope_head_dim);
    rc = tx_mla_validate_heads(c, "glm_moe_dsa", err, errsz);
    if (rc < 0)
        return rc;
    for (int i = 0; i < c->num_hidden_layers; i++) {
        if (c->indexer_types[i] > GLM_INDEXER_SHARED)
            return tx_errbuf(err, errsz, TX_EINVAL, "config: indexer_types[%d]: invalid value", i);
    }
    if (c->indexer_types[0] != GLM_INDEXER_FULL)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: indexer_types[0]: must be \"full\" (a \"shared\" layer "
                         "reuses the top-k of the previous full layer)");
    return 0;
}

static int to_json(const struct glm_config *c, struct json_object *o)
{
    int bad = tx_mla_to_json(c, o);
    bad |= cj_add(o, "index_topk", json_object_new_int(c->index_topk));
    bad |= cj_add(o, "index_head_dim", json_object_new_int(c->index_head_dim));
    bad |= cj_add(o, "index_n_heads", json_object_new_int(c->index_n_heads));
    bad |= cj_add(o, "rope_interleave", json_object_new_boolean(c->rope_interleave));
    bad |=
        cj_add(o, "indexer_rope_interleave", json_object_new_boolean(c->indexer_rope_interleave));
    bad |= cj_add(o, "indexer_types",
                  cj_layer_list_json(c->indexer_types, c->num_hidden_layers, "full", "shared"));
    return bad;
}

/* GlmMoeDsaAttention.scaling = qk_head_dim ** -0.5 */
static double attn_scale(const struct glm_config *c)
{
    return 1.0 / sqrt((double)c->qk_head_dim);
}

/* ---- tensors -------------------------------------------------------------- */

/* the attention block's tensors: MLA (attn_mla.c) and the DSA indexer of
 * the full indexer layers; everything else as common */
static int layer_tensor(const struct glm_config *c, enum glm_tensor_role role, int layer,
                        int expert, struct glm_tensor_info *t)
{
    (void)expert;
    const int64_t H = c->hidden_size;
    const int full_idx = c->indexer_types[layer] == GLM_INDEXER_FULL;
    switch (role) {
    case GLM_T_IDX_WQ_B:
        if (!full_idx)
            return TX_ENOENT;
        tx_shape2(t, (int64_t)c->index_n_heads * c->index_head_dim, c->q_lora_rank);
        return 0;
    case GLM_T_IDX_WK:
        if (!full_idx)
            return TX_ENOENT;
        tx_shape2(t, c->index_head_dim, H);
        return 0;
    case GLM_T_IDX_K_NORM:
    case GLM_T_IDX_K_NORM_BIAS:
        if (!full_idx)
            return TX_ENOENT;
        tx_shape1(t, c->index_head_dim);
        return 0;
    case GLM_T_IDX_WEIGHTS_PROJ:
        if (!full_idx)
            return TX_ENOENT;
        tx_shape2(t, c->index_n_heads, H);
        return 0;
    default:
        return tx_mla_layer_tensor(c, role, t);
    }
}

static const char *layer_note(const struct glm_config *c, int layer)
{
    return c->indexer_types[layer] == GLM_INDEXER_FULL ? ", indexer full" : ", indexer shared";
}

static int layer_selects(const struct glm_config *c, int l)
{
    return c->indexer_types[l] == GLM_INDEXER_FULL;
}

/* a shared indexer layer needs an earlier full one */
static int load_check(const struct glm_config *c, const char *path, char *err, size_t errsz)
{
    int seen_full = 0;
    for (int l = 0; l < c->num_hidden_layers; l++) {
        if (c->indexer_types[l] == GLM_INDEXER_FULL)
            seen_full = 1;
        else if (!seen_full)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: layer %d shares the DSA indexer selection but no earlier "
                             "layer runs the indexer",
                             path, l);
    }
    return 0;
}

/* ---- runtime ------------------------------------------------------------- */

/* MLA's K and V (attn_mla.c); the indexer keys (FP32) of the full indexer
 * layers */
static void kv_geometry(const struct glm_config *c, int l, struct tx_arch_kv *kv)
{
    tx_mla_kv_geometry(c, kv);
    kv->ik = c->indexer_types[l] == GLM_INDEXER_FULL ? (uint64_t)c->index_head_dim : 0;
}

/* MLA's activations, then the indexer's */
static int act_layout(const struct glm_config *c, uint64_t t, struct act_layout *a, uint64_t *o)
{
    int w = tx_mla_act_layout(c, t, a, o);
    a->qi = blk_take(o, t * c->index_n_heads * c->index_head_dim * 4);
    a->ki = blk_take(o, t * c->index_head_dim * 4);
    a->iw = blk_take(o, t * c->index_n_heads * 4);
    a->sel = blk_take(o, t * (c->index_topk > 0 ? c->index_topk : 1) * 4);
    return w > c->index_head_dim ? w : c->index_head_dim;
}

static int select_k(const struct glm_config *c)
{
    return c->index_topk;
}

/* GlmMoeDsaAttention: MLA whose keys the DSA lightning indexer selects */
static void attention(struct gctx *g, int l)
{
    tx_mla_attention(g, l, blk_dsa_indexer_project, blk_dsa_indexer_select);
}

/* GlmMoeDsaDecoderLayer */
static void layer(struct gctx *g, int l)
{
    blk_decoder_layer(g, l, attention);
}

static const char *const aliases[] = {"glm5", "glm5.1", NULL};

const struct tx_arch_ops tx_arch_glm_moe_dsa = {
    .id = GLM_ARCH_GLM_MOE_DSA,
    .model_type = "glm_moe_dsa",
    .class_name = "GlmMoeDsaForCausalLM",
    .family = "GLM-5.1",
    .models = "GLM-5/5.1",
    .aliases = aliases,
    .attn_short = "MLA + DSA lightning indexer",
    .attn_long = "MLA attention + DSA indexer",
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
    .layer_selects = layer_selects,
    .load_check = load_check,
    .kv_geometry = kv_geometry,
    .act_layout = act_layout,
    .expand_keys = tx_mla_expand_keys,
    .select_k = select_k,
    .layer = layer,
    .ref_attention = TX_REF_ATTN_MLA_DSA,
    .chat_format = TX_CHAT_GLM5,
};
