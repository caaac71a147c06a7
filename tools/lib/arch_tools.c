/* SPDX-License-Identifier: MIT */
/*
 * The tools' side of the architecture modules (common/arch_tools.h): the
 * list of families, and what GQA and MLA families share of glm-analyze's
 * figures.
 */
#include "common/arch_tools.h"

#include <stddef.h>
#include <string.h>

#include <json-c/json.h>

#include <tx-internal/tx_arch.h>

static const struct tx_arch_tools *const families[] = {
    &tx_arch_tools_glm4_moe,
    &tx_arch_tools_glm_moe_dsa,
    &tx_arch_tools_qwen3_moe,
    &tx_arch_tools_deepseek_v3,
};

const struct tx_arch_tools *tx_arch_tools_get(enum glm_arch id)
{
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        if (families[i]->id == id)
            return families[i];
    return NULL;
}

/* ---- GQA ------------------------------------------------------------------ */

void tx_gqa_cost(const struct glm_config *c, struct tx_arch_cost *o)
{
    memset(o, 0, sizeof(*o));
    o->kv_layer = 2.0 * c->num_key_value_heads * c->head_dim * 2.0;
    o->kv_latent = o->kv_layer;
    o->kv_expanded = o->kv_layer;
    o->kv_elems = 2.0 * c->num_key_value_heads * c->head_dim;
    o->kv_run = c->head_dim;
    o->pair_macs = (double)c->num_attention_heads * 2.0 * c->head_dim;
}

void tx_gqa_analyze_json(const struct glm_config *c, struct json_object *ar)
{
    json_object_object_add(ar, "head_dim", json_object_new_int64(c->head_dim));
    json_object_object_add(ar, "rotary_dim", json_object_new_int64(c->rotary_dim));
    json_object_object_add(ar, "use_qk_norm", json_object_new_boolean(c->use_qk_norm));
    json_object_object_add(ar, "attention_bias", json_object_new_boolean(c->attention_bias));
}

/* ---- MLA ------------------------------------------------------------------ */

void tx_mla_cost(const struct glm_config *c, struct tx_arch_cost *o)
{
    const double nh = c->num_attention_heads;
    memset(o, 0, sizeof(*o));
    /* absorbed MLA: the latent cache; a (query, key) pair costs the
     * latent + rope dot product and the latent PV per head */
    o->kv_elems = (double)c->kv_lora_rank + c->qk_rope_head_dim;
    o->kv_layer = o->kv_elems * 2.0;
    o->kv_latent = o->kv_layer;
    o->kv_expanded = nh * (c->qk_head_dim + c->v_head_dim) * 2.0;
    o->pair_macs = nh * (2.0 * c->kv_lora_rank + c->qk_rope_head_dim);
    struct tx_arch_kv kv;
    const struct tx_arch_ops *ops = tx_arch_get(c->arch);
    memset(&kv, 0, sizeof(kv));
    if (ops && ops->kv_geometry)
        ops->kv_geometry(c, 0, &kv);
    o->kv_run = (int)kv.run;
}

void tx_mla_analyze_json(const struct glm_config *c, struct json_object *ar)
{
    static const char *const k[] = {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                    "qk_rope_head_dim", "v_head_dim"};
    const int v[] = {c->q_lora_rank, c->kv_lora_rank, c->qk_nope_head_dim, c->qk_rope_head_dim,
                     c->v_head_dim};
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
        json_object_object_add(ar, k[i], json_object_new_int64(v[i]));
}
