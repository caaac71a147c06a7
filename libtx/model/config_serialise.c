// SPDX-License-Identifier: MIT
/*
 * struct glm_config -> config.json (all fields explicit, per-layer lists
 * included): the common fields here, the architecture's own from its module.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/glm_config.h>

#include <tx-internal/tx_arch.h>
#include <tx-internal/tx_config_json.h>
/* ------------------------------------------------------------------------ */
/* serialisation */

char *glm_config_to_json(const struct glm_config *c)
{
    if (!c)
        return NULL;
    struct json_object *o = json_object_new_object();
    if (!o)
        return NULL;
    int bad = 0;
    struct json_object *archs = json_object_new_array();
    if (archs)
        json_object_array_add(archs, json_object_new_string(c->architecture[0]
                                                                ? c->architecture
                                                                : glm_arch_class_name(c->arch)));
    bad |= cj_add(o, "architectures", archs);
    bad |= cj_add(o, "model_type", json_object_new_string(glm_arch_name(c->arch)));
    if (c->dtype) {
        const char *d = c->dtype == GLM_DTYPE_BF16  ? "bfloat16"
                        : c->dtype == GLM_DTYPE_F16 ? "float16"
                                                    : "float32";
        bad |= cj_add(o, "dtype", json_object_new_string(d));
    }
    bad |= cj_add(o, "vocab_size", json_object_new_int(c->vocab_size));
    bad |= cj_add(o, "hidden_size", json_object_new_int(c->hidden_size));
    bad |= cj_add(o, "intermediate_size", json_object_new_int(c->intermediate_size));
    bad |= cj_add(o, "moe_intermediate_size", json_object_new_int(c->moe_intermediate_size));
    bad |= cj_add(o, "num_hidden_layers", json_object_new_int(c->num_hidden_layers));
    bad |= cj_add(o, "num_nextn_predict_layers", json_object_new_int(c->num_nextn_predict_layers));
    bad |= cj_add(o, "num_attention_heads", json_object_new_int(c->num_attention_heads));
    bad |= cj_add(o, "num_key_value_heads", json_object_new_int(c->num_key_value_heads));
    bad |= cj_add(o, "head_dim", json_object_new_int(c->head_dim));
    bad |= cj_add(o, "max_position_embeddings", json_object_new_int(c->max_position_embeddings));
    bad |= cj_add(o, "rms_norm_eps", cj_double(c->rms_norm_eps));
    bad |= cj_add(o, "attention_bias", json_object_new_boolean(c->attention_bias));
    bad |= cj_add(o, "tie_word_embeddings", json_object_new_boolean(c->tie_word_embeddings));
    bad |= cj_add(o, "hidden_act", json_object_new_string("silu"));

    struct json_object *rp = json_object_new_object();
    if (rp) {
        bad |= cj_add(rp, "rope_type",
                      json_object_new_string(c->rope_type == GLM_ROPE_LINEAR ? "linear"
                                             : c->rope_type == GLM_ROPE_YARN ? "yarn"
                                                                             : "default"));
        bad |= cj_add(rp, "rope_theta", cj_double(c->rope_theta));
        if (c->rope_type != GLM_ROPE_DEFAULT)
            bad |= cj_add(rp, "factor", cj_double(c->rope_factor));
        if (c->rope_type == GLM_ROPE_YARN) {
            if (c->rope_yarn_original_max_pos)
                bad |= cj_add(rp, "original_max_position_embeddings",
                              json_object_new_int(c->rope_yarn_original_max_pos));
            bad |= cj_add(rp, "beta_fast", cj_double(c->rope_yarn_beta_fast));
            bad |= cj_add(rp, "beta_slow", cj_double(c->rope_yarn_beta_slow));
            if (c->rope_yarn_mscale != 0.0)
                bad |= cj_add(rp, "mscale", cj_double(c->rope_yarn_mscale));
            if (c->rope_yarn_mscale_all_dim != 0.0)
                bad |= cj_add(rp, "mscale_all_dim", cj_double(c->rope_yarn_mscale_all_dim));
            if (c->rope_yarn_has_af)
                bad |= cj_add(rp, "attention_factor", cj_double(c->rope_yarn_attention_factor));
            bad |= cj_add(rp, "truncate", json_object_new_boolean(c->rope_yarn_truncate));
        }
    }
    bad |= cj_add(o, "rope_parameters", rp);
    bad |= cj_add(o, "partial_rotary_factor", cj_double(c->partial_rotary_factor));

    bad |= cj_add(o, "n_routed_experts", json_object_new_int(c->n_routed_experts));
    bad |= cj_add(o, "n_shared_experts", json_object_new_int(c->n_shared_experts));
    bad |= cj_add(o, "num_experts_per_tok", json_object_new_int(c->num_experts_per_tok));
    bad |= cj_add(o, "routed_scaling_factor", cj_double(c->routed_scaling_factor));
    bad |= cj_add(o, "n_group", json_object_new_int(c->n_group));
    bad |= cj_add(o, "topk_group", json_object_new_int(c->topk_group));
    bad |= cj_add(o, "norm_topk_prob", json_object_new_boolean(c->norm_topk_prob));
    bad |= cj_add(o, "first_k_dense_replace", json_object_new_int(c->first_k_dense_replace));
    bad |= cj_add(o, "scoring_func", json_object_new_string("sigmoid"));
    bad |= cj_add(o, "topk_method", json_object_new_string("noaux_tc"));
    bad |= cj_add(o, "mlp_layer_types",
                  cj_layer_list_json(c->mlp_layer_types, c->num_hidden_layers, "dense", "sparse"));

    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    if (!arch) {
        json_object_put(o);
        return NULL;
    }
    bad |= arch->to_json(c, o);

    json_object_object_add(o, "bos_token_id", cj_token_or_null(c->bos_token_id));
    json_object_object_add(o, "pad_token_id", cj_token_or_null(c->pad_token_id));
    if (c->n_eos == 1) {
        bad |= cj_add(o, "eos_token_id", json_object_new_int(c->eos_token_ids[0]));
    } else if (c->n_eos == 0) {
        json_object_object_add(o, "eos_token_id", NULL);
    } else {
        struct json_object *e = json_object_new_array();
        for (int i = 0; e && i < c->n_eos; i++)
            json_object_array_add(e, json_object_new_int(c->eos_token_ids[i]));
        bad |= cj_add(o, "eos_token_id", e);
    }
    if (c->quant_method[0]) {
        struct json_object *q = json_object_new_object();
        if (q)
            bad |= cj_add(q, "quant_method", json_object_new_string(c->quant_method));
        bad |= cj_add(o, "quantization_config", q);
    }
    char *out = NULL;
    if (!bad) {
        const char *s = json_object_to_json_string_ext(
            o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
        out = s ? strdup(s) : NULL;
    }
    json_object_put(o);
    return out;
}
