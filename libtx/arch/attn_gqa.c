// SPDX-License-Identifier: MIT
/*
 * GQA attention shared by the architecture modules (glm4_moe.c,
 * qwen3_moe.c): q/k/v/o projections with optional q/k/v biases and
 * optional per-head q/k RMSNorm (Glm4MoeAttention, Qwen3MoeAttention).
 * Tensor shapes, KV geometry, activation layout, the runtime and reference
 * layers, glm-analyze figures. See attn.h, docs/architectures.md.
 */
#include <errno.h>
#include <string.h>

#include <json-c/json.h>

#include "arch/attn.h"
#include <tx-internal/tx_config_json.h>
#include "runtime/blocks.h"

void tx_gqa_parse_head_dim(struct json_object *root, struct glm_config *c)
{
    if (!cj_field(root, "head_dim"))
        c->head_dim = c->num_attention_heads > 0 ? c->hidden_size / c->num_attention_heads : 0;
}

int tx_gqa_layer_tensor(const struct glm_config *c, enum glm_tensor_role role, int bias,
                        int qk_norm, struct glm_tensor_info *t)
{
    const int64_t H = c->hidden_size, nh = c->num_attention_heads, nkv = c->num_key_value_heads,
                  hd = c->head_dim;
    switch (role) {
    case GLM_T_Q_PROJ:
        tx_shape2(t, nh * hd, H);
        return 0;
    case GLM_T_K_PROJ:
    case GLM_T_V_PROJ:
        tx_shape2(t, nkv * hd, H);
        return 0;
    case GLM_T_Q_BIAS:
        if (!bias)
            return TX_ENOENT;
        tx_shape1(t, nh * hd);
        return 0;
    case GLM_T_K_BIAS:
    case GLM_T_V_BIAS:
        if (!bias)
            return TX_ENOENT;
        tx_shape1(t, nkv * hd);
        return 0;
    case GLM_T_Q_NORM:
    case GLM_T_K_NORM:
        if (!qk_norm)
            return TX_ENOENT;
        tx_shape1(t, hd);
        return 0;
    case GLM_T_O_PROJ:
        tx_shape2(t, H, nh * hd);
        return 0;
    default:
        return role >= GLM_T_Q_PROJ && role <= GLM_T_IDX_WEIGHTS_PROJ ? TX_ENOENT : TX_ARCH_COMMON;
    }
}

void tx_gqa_kv_geometry(const struct glm_config *c, int l, struct tx_arch_kv *kv)
{
    (void)l;
    kv->k = kv->v = (uint64_t)c->num_key_value_heads * (uint64_t)c->head_dim;
    kv->ik = 0;
    kv->ref_k = kv->k;
    kv->ref_v = kv->v;
    kv->run = (uint64_t)c->head_dim;
}

int tx_gqa_act_layout(const struct glm_config *c, uint64_t t, struct act_layout *a, uint64_t *o)
{
    int hd = c->head_dim, Hq = c->num_attention_heads, Hk = c->num_key_value_heads;
    a->q = blk_take(o, t * Hq * hd * 4);
    a->k = blk_take(o, t * Hk * hd * 4);
    a->v = blk_take(o, t * Hk * hd * 4);
    a->ao = blk_take(o, t * Hq * hd * 4);
    return Hq * hd;
}

/* Glm4MoeDecoderLayer / Qwen3MoeDecoderLayer: the pre-norm residual layer
 * over GQA; blk_ffn routes as tx_arch_ops.router says */
void tx_gqa_layer(struct gctx *g, int l)
{
    blk_decoder_layer(g, l, blk_gqa_attention);
}

int tx_arch_layer_selects_none(const struct glm_config *c, int l)
{
    (void)c;
    (void)l;
    return 0;
}

int tx_arch_select_k_none(const struct glm_config *c)
{
    (void)c;
    return 0;
}
