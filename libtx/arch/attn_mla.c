// SPDX-License-Identifier: MIT
/*
 * MLA attention shared by the architecture modules (deepseek_v3.c,
 * glm_moe_dsa.c): DeepseekV3Attention / GlmMoeDsaAttention's low-rank q
 * and kv, one shared rope key per token. Config fields, tensor shapes, KV
 * geometry, activation layout, runtime graph, glm-analyze figures; the
 * DSA indexer stays in glm_moe_dsa.c. See attn.h, docs/architectures.md.
 */
#include <errno.h>
#include <string.h>

#include <json-c/json.h>

#include "arch/attn.h"
#include <tx-internal/tx_config_json.h>
#include "runtime/blocks.h"

/* ---- config.json --------------------------------------------------------- */

int tx_mla_parse_dims(struct json_object *root, struct glm_config *c, const char *null_msg,
                      char *err, size_t errsz)
{
    struct json_object *q;
    if (json_object_object_get_ex(root, "q_lora_rank", &q) &&
        json_object_get_type(q) == json_type_null)
        return tx_errbuf(err, errsz, TX_ENOTSUP, "config.json: q_lora_rank: null %s", null_msg);
    CJ_REQ(cj_int, "q_lora_rank", &c->q_lora_rank);
    CJ_REQ(cj_int, "kv_lora_rank", &c->kv_lora_rank);
    CJ_REQ(cj_int, "qk_nope_head_dim", &c->qk_nope_head_dim);
    CJ_REQ(cj_int, "qk_rope_head_dim", &c->qk_rope_head_dim);
    CJ_REQ(cj_int, "v_head_dim", &c->v_head_dim);
    return 0;
}

int tx_mla_parse_qk_head_dim(struct json_object *root, struct glm_config *c, char *err,
                             size_t errsz)
{
    int qkh = 0;
    int rc = cj_int(root, "qk_head_dim", &qkh, err, errsz);
    if (rc < 0)
        return rc;
    if (rc == 1 && qkh != c->qk_nope_head_dim + c->qk_rope_head_dim)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: qk_head_dim (%d) != qk_nope_head_dim (%d) + "
                         "qk_rope_head_dim (%d)",
                         qkh, c->qk_nope_head_dim, c->qk_rope_head_dim);
    c->qk_head_dim = c->qk_nope_head_dim + c->qk_rope_head_dim;
    return 0;
}

int tx_mla_validate_dims(const struct glm_config *c, char *err, size_t errsz)
{
    CJ_POS(q_lora_rank);
    CJ_POS(kv_lora_rank);
    CJ_POS(qk_nope_head_dim);
    CJ_POS(qk_rope_head_dim);
    CJ_POS(v_head_dim);
    return 0;
}

int tx_mla_validate_rope(const struct glm_config *c, char *err, size_t errsz)
{
    if (c->qk_rope_head_dim % 2 != 0)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: qk_rope_head_dim: must be even (got %d)",
                         c->qk_rope_head_dim);
    if (c->qk_head_dim != c->qk_nope_head_dim + c->qk_rope_head_dim)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config: qk_head_dim != qk_nope_head_dim + qk_rope_head_dim");
    if (c->rotary_dim != c->qk_rope_head_dim)
        return tx_errbuf(err, errsz, TX_EINVAL, "config: rotary_dim must equal qk_rope_head_dim");
    return 0;
}

int tx_mla_validate_heads(const struct glm_config *c, const char *model_type, char *err,
                          size_t errsz)
{
    if (c->num_key_value_heads != c->num_attention_heads)
        return tx_errbuf(
            err, errsz, TX_EINVAL,
            "config.json: num_key_value_heads (%d) must equal num_attention_heads (%d) "
            "for MLA (kv_b_proj expands one K/V per head)",
            c->num_key_value_heads, c->num_attention_heads);
    if (c->partial_rotary_factor != 1.0)
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                         "config.json: partial_rotary_factor: %g is not supported for %s "
                         "(RoPE covers the qk_rope_head_dim slice)",
                         c->partial_rotary_factor, model_type);
    if (c->use_qk_norm)
        return tx_errbuf(err, errsz, TX_EINVAL, "config: use_qk_norm is a glm4_moe field");
    return 0;
}

int tx_mla_to_json(const struct glm_config *c, struct json_object *o)
{
    int bad = 0;
    bad |= cj_add(o, "q_lora_rank", json_object_new_int(c->q_lora_rank));
    bad |= cj_add(o, "kv_lora_rank", json_object_new_int(c->kv_lora_rank));
    bad |= cj_add(o, "qk_nope_head_dim", json_object_new_int(c->qk_nope_head_dim));
    bad |= cj_add(o, "qk_rope_head_dim", json_object_new_int(c->qk_rope_head_dim));
    bad |= cj_add(o, "qk_head_dim", json_object_new_int(c->qk_head_dim));
    bad |= cj_add(o, "v_head_dim", json_object_new_int(c->v_head_dim));
    return bad;
}

/* ---- tensors -------------------------------------------------------------- */

int tx_mla_layer_tensor(const struct glm_config *c, enum glm_tensor_role role,
                        struct glm_tensor_info *t)
{
    const int64_t H = c->hidden_size, nh = c->num_attention_heads;
    switch (role) {
    case GLM_T_O_PROJ:
        tx_shape2(t, H, nh * c->v_head_dim);
        return 0;
    case GLM_T_O_BIAS:
        if (!c->attention_bias)
            return TX_ENOENT;
        tx_shape1(t, H);
        return 0;
    case GLM_T_Q_A_PROJ:
        tx_shape2(t, c->q_lora_rank, H);
        return 0;
    case GLM_T_Q_A_BIAS:
        if (!c->attention_bias)
            return TX_ENOENT;
        tx_shape1(t, c->q_lora_rank);
        return 0;
    case GLM_T_Q_A_NORM:
        tx_shape1(t, c->q_lora_rank);
        return 0;
    case GLM_T_Q_B_PROJ:
        tx_shape2(t, nh * c->qk_head_dim, c->q_lora_rank);
        return 0;
    case GLM_T_KV_A_PROJ:
        tx_shape2(t, (int64_t)c->kv_lora_rank + c->qk_rope_head_dim, H);
        return 0;
    case GLM_T_KV_A_BIAS:
        if (!c->attention_bias)
            return TX_ENOENT;
        tx_shape1(t, (int64_t)c->kv_lora_rank + c->qk_rope_head_dim);
        return 0;
    case GLM_T_KV_A_NORM:
        tx_shape1(t, c->kv_lora_rank);
        return 0;
    case GLM_T_KV_B_PROJ:
        tx_shape2(t, nh * ((int64_t)c->qk_nope_head_dim + c->v_head_dim), c->kv_lora_rank);
        return 0;
    default:
        /* q/k/v of GQA, the DSA indexer (unless the module shapes it): none */
        return role >= GLM_T_Q_PROJ && role <= GLM_T_IDX_WEIGHTS_PROJ ? TX_ENOENT : TX_ARCH_COMMON;
    }
}

/* ---- runtime ------------------------------------------------------------- */

/* The latent cache of absorbed MLA: per position the normalised latent
 * (kv_lora_rank) and the roped shared key (qk_rope_head_dim) once, not per
 * head; V is the latent part of the same row (v = 0). The reference keeps
 * the expanded cache, as transformers' DeepseekV3Attention caches
 * key_states / value_states. */
void tx_mla_kv_geometry(const struct glm_config *c, struct tx_arch_kv *kv)
{
    kv->k = (uint64_t)c->kv_lora_rank + (uint64_t)c->qk_rope_head_dim;
    kv->v = 0;
    kv->ik = 0;
    kv->ref_k = (uint64_t)c->num_attention_heads * (uint64_t)c->qk_head_dim;
    kv->ref_v = (uint64_t)c->num_attention_heads * (uint64_t)c->v_head_dim;
    uint64_t a = (uint64_t)c->kv_lora_rank, b = (uint64_t)c->qk_rope_head_dim;
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    kv->run = a;
}

/* bytes per key of the expanded form's buffers (K and V sized as f32) */
static uint64_t expand_key_bytes(const struct glm_config *c)
{
    uint64_t H = (uint64_t)c->num_attention_heads,
             cw = (uint64_t)c->kv_lora_rank + c->qk_rope_head_dim;
    return 4 * (cw + H * ((uint64_t)c->qk_nope_head_dim + c->v_head_dim) +
                H * (uint64_t)c->qk_head_dim + H * (uint64_t)c->v_head_dim);
}

/* the expanded form's buffers stay below this */
#define MLA_EXPAND_MAX_BYTES (1ull << 30)

/*
 * The form of a pass's MLA attention (issue 11, "choose by measurement").
 * Per segment of n queries after pos0 cached positions, with P causal
 * (query, key) pairs:
 *   absorbed: P H (2 lora + rope) + n H lora (nope + vd)  (the absorbed
 *             query and the output out of latent space)
 *   expanded: P H (qk + vd) + (pos0 + n) H lora (nope + vd)  (kv_b_proj of
 *             every key the segment sees, read back from the cache)
 * The expanded form is taken when its MACs are fewer over the pass (a
 * prefill from an empty cache always; after a prefix, chunks of some
 * hundred tokens; never decode), no DSA selection applies and its buffers
 * stay below 1 GiB. The engine runs both kinds of attention at about the
 * same MAC rate (tx-bench --attn, docs/engine.md). force (TX_MLA_FORM=
 * absorbed|expanded at model load) overrides the choice (the buffer bound
 * stays), for A/B runs and the tests of both forms.
 */
uint64_t tx_mla_expand_keys(const struct glm_config *c, const struct rt_fwd *f, int force)
{
    if (force < 0 || !f || f->n_seg <= 0)
        return 0;
    double H = c->num_attention_heads, lora = c->kv_lora_rank, rope = c->qk_rope_head_dim,
           nope = c->qk_nope_head_dim, vd = c->v_head_dim, qk = c->qk_head_dim;
    double K = c->arch == GLM_ARCH_GLM_MOE_DSA && c->index_topk > 0 ? c->index_topk : 0;
    double abs_macs = 0, exp_macs = 0;
    uint64_t keys = 0;
    for (int i = 0; i < f->n_seg; i++) {
        double n = f->seg[i].n, p0 = f->seg[i].pos0;
        /* a DSA selection: each query its own key list, which the
         * expanded form's MHA would run one query at a time while the
         * absorbed form shares every key row among the heads (measured:
         * pp256 @ d2048 6.2 t/s expanded, 30.3 absorbed) */
        if (K > 0 && p0 + n > K && !force)
            return 0;
        double pairs = n * p0 + n * (n + 1) / 2;
        abs_macs += pairs * H * (2 * lora + rope) + n * H * lora * (nope + vd);
        exp_macs += pairs * H * (qk + vd) + (p0 + n) * H * lora * (nope + vd);
        uint64_t kv = (uint64_t)f->seg[i].pos0 + (uint64_t)f->seg[i].n;
        if (kv > keys)
            keys = kv;
    }
    if (keys * expand_key_bytes(c) > MLA_EXPAND_MAX_BYTES)
        return 0;
    return force > 0 || exp_macs < abs_macs ? keys : 0;
}

int tx_mla_act_layout(const struct glm_config *c, uint64_t t, struct act_layout *a, uint64_t *o)
{
    int H = c->num_attention_heads, qk = c->qk_head_dim, nope = c->qk_nope_head_dim,
        vd = c->v_head_dim, lora = c->kv_lora_rank, rope = c->qk_rope_head_dim;
    uint64_t x = a->xkeys;
    a->qa = blk_take(o, t * c->q_lora_rank * 4);
    a->q = blk_take(o, t * H * qk * 4);
    a->ckv = blk_take(o, t * (lora + rope) * 4);
    if (x) { /* the expanded form */
        a->lat = blk_take(o, x * (lora + rope) * 4);
        a->kvb = blk_take(o, x * H * (nope + vd) * 4);
        a->kx = blk_take(o, x * H * qk * 4);
        a->vx = blk_take(o, x * H * vd * 4);
    } else {
        a->qabs = blk_take(o, t * H * (lora + rope) * 4); /* absorbed q: [q_nope W_UK | q_rope] */
        a->aol = blk_take(o, t * H * lora * 4);           /* attention output in latent space */
    }
    a->ao = blk_take(o, t * H * vd * 4);
    return c->q_lora_rank > lora + rope ? c->q_lora_rank : lora + rope;
}

void tx_mla_attention(struct gctx *g, int l, void (*project)(struct gctx *g, int l),
                      int (*select)(struct gctx *g, int l, const struct rt_seg *sg))
{
    const struct glm_config *c = g->c;
    blk_mla_project(g, l);
    if (project)
        project(g, l);
    for (int si = 0; si < g->f->n_seg && !g->rc; si++) {
        const struct rt_seg *sg = &g->f->seg[si];
        blk_mla_cache(g, l, sg);
        int sel_k = select ? select(g, l, sg) : 0;
        if (g->a.xkeys)
            blk_mla_attend_expanded(g, l, sg, sel_k);
        else
            blk_mla_attend(g, l, sg, sel_k);
    }
    if (!g->a.xkeys)
        blk_mla_unabsorb(g, l);
    blk_attn_out(g, l, c->num_attention_heads * c->v_head_dim);
}

/* MLA over every causal key (DeepseekV3Attention) */
static void attention_all_keys(struct gctx *g, int l)
{
    tx_mla_attention(g, l, NULL, NULL);
}

void tx_mla_layer(struct gctx *g, int l)
{
    blk_decoder_layer(g, l, attention_all_keys);
}
