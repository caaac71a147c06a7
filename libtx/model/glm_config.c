// SPDX-License-Identifier: MIT
/*
 * GLM config.json parsing (json-c), validation, serialisation and the
 * expected tensor list. Semantics: docs/glm-architectures.md.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/glm_config.h>

#include "model_internal.h"

const char *glm_arch_name(enum glm_arch arch)
{
    switch (arch) {
    case GLM_ARCH_GLM4_MOE:
        return "glm4_moe";
    case GLM_ARCH_GLM_MOE_DSA:
        return "glm_moe_dsa";
    default:
        return "unknown";
    }
}

static const char *arch_class_name(enum glm_arch arch)
{
    return arch == GLM_ARCH_GLM4_MOE ? "Glm4MoeForCausalLM" : "GlmMoeDsaForCausalLM";
}

const char *glm_tensor_class_name(enum glm_tensor_class cls)
{
    static const char *const names[] = {"embedding", "attention", "mlp",   "expert",
                                        "norm",      "output",    "router"};
    if ((unsigned)cls < sizeof(names) / sizeof(names[0]))
        return names[cls];
    return "unknown";
}

/* ------------------------------------------------------------------------ */
/* JSON field readers. A JSON null counts as "absent" (HF writes e.g.
 * "rope_scaling": null, "pad_token_id": null). */

static struct json_object *field(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    if (!o || !json_object_object_get_ex(o, key, &v))
        return NULL;
    if (json_object_get_type(v) == json_type_null)
        return NULL;
    return v;
}

/* Reads an integer; returns 1 if present, 0 if absent, <0 on error. */
static int get_i64(struct json_object *o, const char *key, const char *ctx, int64_t *out, char *err,
                   size_t errsz)
{
    struct json_object *v = field(o, key);
    if (!v)
        return 0;
    if (json_object_get_type(v) == json_type_int) {
        errno = 0;
        int64_t x = json_object_get_int64(v);
        if (errno == ERANGE)
            return txm_err(err, errsz, -EINVAL, "config.json: %s%s: integer out of range", ctx,
                           key);
        *out = x;
        return 1;
    }
    if (json_object_get_type(v) == json_type_double) {
        double d = json_object_get_double(v);
        if (isfinite(d) && d == floor(d) && fabs(d) < 9.0e15) {
            *out = (int64_t)d;
            return 1;
        }
    }
    return txm_err(err, errsz, -EINVAL, "config.json: %s%s: expected an integer, got %s", ctx, key,
                   json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
}

static int get_int(struct json_object *o, const char *key, int *out, char *err, size_t errsz)
{
    int64_t x = 0;
    int rc = get_i64(o, key, "", &x, err, errsz);
    if (rc <= 0)
        return rc;
    if (x < -2147483647LL || x > 2147483647LL)
        return txm_err(err, errsz, -EINVAL, "config.json: %s: %lld does not fit in 32 bits", key,
                       (long long)x);
    *out = (int)x;
    return 1;
}

static int get_num(struct json_object *o, const char *key, const char *ctx, double *out, char *err,
                   size_t errsz)
{
    struct json_object *v = field(o, key);
    if (!v)
        return 0;
    enum json_type t = json_object_get_type(v);
    if (t != json_type_int && t != json_type_double)
        return txm_err(err, errsz, -EINVAL, "config.json: %s%s: expected a number, got %s", ctx,
                       key, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    double d = t == json_type_int ? (double)json_object_get_int64(v) : json_object_get_double(v);
    if (!isfinite(d))
        return txm_err(err, errsz, -EINVAL, "config.json: %s%s: not a finite number", ctx, key);
    *out = d;
    return 1;
}

static int get_bool(struct json_object *o, const char *key, int *out, char *err, size_t errsz)
{
    struct json_object *v = field(o, key);
    if (!v)
        return 0;
    if (json_object_get_type(v) != json_type_boolean)
        return txm_err(err, errsz, -EINVAL, "config.json: %s: expected true or false, got %s", key,
                       json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    *out = json_object_get_boolean(v) ? 1 : 0;
    return 1;
}

static int get_str(struct json_object *o, const char *key, const char *ctx, const char **out,
                   char *err, size_t errsz)
{
    struct json_object *v = field(o, key);
    if (!v)
        return 0;
    if (json_object_get_type(v) != json_type_string)
        return txm_err(err, errsz, -EINVAL, "config.json: %s%s: expected a string, got %s", ctx,
                       key, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    *out = json_object_get_string(v);
    return 1;
}

/* token id: an int, or an explicit null -> -1; absent keeps the default */
static int get_token(struct json_object *o, const char *key, int *out, char *err, size_t errsz)
{
    struct json_object *v = NULL;
    if (o && json_object_object_get_ex(o, key, &v) && json_object_get_type(v) == json_type_null) {
        *out = -1;
        return 1;
    }
    int rc = get_int(o, key, out, err, errsz);
    if (rc < 0)
        return rc;
    if (rc == 1 && *out < 0)
        return txm_err(err, errsz, -EINVAL, "config.json: %s: negative token id %d", key, *out);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* defaults: the transformers config classes' defaults */

static void set_defaults(struct glm_config *c, enum glm_arch arch)
{
    memset(c, 0, sizeof(*c));
    c->arch = arch;
    snprintf(c->model_type, sizeof(c->model_type), "%s", glm_arch_name(arch));
    snprintf(c->architecture, sizeof(c->architecture), "%s", arch_class_name(arch));
    c->rms_norm_eps = 1e-5;
    c->rope_theta = 10000.0;
    c->rope_type = GLM_ROPE_DEFAULT;
    c->rope_factor = 1.0;
    c->n_group = 1;
    c->topk_group = 1;
    c->norm_topk_prob = 1;
    c->n_shared_experts = 1;
    c->num_experts_per_tok = 8;
    c->bos_token_id = -1;
    c->pad_token_id = -1;
    c->n_eos = 0;
    if (arch == GLM_ARCH_GLM4_MOE) {
        /* Glm4MoeConfig */
        c->vocab_size = 151552;
        c->hidden_size = 4096;
        c->intermediate_size = 10944;
        c->num_hidden_layers = 46;
        c->num_attention_heads = 96;
        c->num_key_value_heads = 8;
        c->max_position_embeddings = 131072;
        c->moe_intermediate_size = 1408;
        c->n_routed_experts = 128;
        c->routed_scaling_factor = 1.0;
        c->first_k_dense_replace = 1;
        c->partial_rotary_factor = 0.5;
    } else {
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
}

/* ------------------------------------------------------------------------ */
/* pieces */

static int parse_arch(struct json_object *root, enum glm_arch *arch, char *err, size_t errsz)
{
    const char *mt = NULL;
    int rc = get_str(root, "model_type", "", &mt, err, errsz);
    if (rc < 0)
        return rc;
    enum glm_arch from_mt = GLM_ARCH_UNKNOWN, from_arch = GLM_ARCH_UNKNOWN;
    if (mt) {
        if (!strcmp(mt, "glm4_moe"))
            from_mt = GLM_ARCH_GLM4_MOE;
        else if (!strcmp(mt, "glm_moe_dsa"))
            from_mt = GLM_ARCH_GLM_MOE_DSA;
        else
            return txm_err(err, errsz, -EINVAL,
                           "config.json: model_type: \"%s\" is not supported "
                           "(supported: glm4_moe, glm_moe_dsa)",
                           mt);
    }
    struct json_object *a = field(root, "architectures");
    if (a) {
        if (json_object_get_type(a) != json_type_array || json_object_array_length(a) < 1)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: architectures: expected a non-empty list of strings");
        struct json_object *a0 = json_object_array_get_idx(a, 0);
        if (json_object_get_type(a0) != json_type_string)
            return txm_err(err, errsz, -EINVAL, "config.json: architectures[0]: expected a string");
        const char *s = json_object_get_string(a0);
        if (!strcmp(s, "Glm4MoeForCausalLM"))
            from_arch = GLM_ARCH_GLM4_MOE;
        else if (!strcmp(s, "GlmMoeDsaForCausalLM"))
            from_arch = GLM_ARCH_GLM_MOE_DSA;
        else if (!mt)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: architectures[0]: \"%s\" is not supported "
                           "(supported: Glm4MoeForCausalLM, GlmMoeDsaForCausalLM)",
                           s);
        else
            return txm_err(err, errsz, -EINVAL,
                           "config.json: architectures[0]: \"%s\" does not match model_type \"%s\"",
                           s, mt);
    }
    if (from_mt && from_arch && from_mt != from_arch)
        return txm_err(err, errsz, -EINVAL,
                       "config.json: architectures[0] (%s) does not match model_type (%s)",
                       arch_class_name(from_arch), glm_arch_name(from_mt));
    *arch = from_mt ? from_mt : from_arch;
    if (!*arch)
        return txm_err(err, errsz, -EINVAL,
                       "config.json: model_type: missing (and no architectures list)");
    return 0;
}

static int parse_dtype(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    const char *s = NULL;
    const char *key = "dtype";
    int rc = get_str(root, "dtype", "", &s, err, errsz);
    if (rc < 0)
        return rc;
    if (!rc) {
        key = "torch_dtype";
        rc = get_str(root, "torch_dtype", "", &s, err, errsz);
        if (rc < 0)
            return rc;
    }
    if (!rc)
        return 0;
    if (!strcmp(s, "bfloat16"))
        c->dtype = GLM_DTYPE_BF16;
    else if (!strcmp(s, "float16"))
        c->dtype = GLM_DTYPE_F16;
    else if (!strcmp(s, "float32"))
        c->dtype = GLM_DTYPE_F32;
    else
        return txm_err(err, errsz, -EINVAL,
                       "config.json: %s: \"%s\" is not supported (bfloat16, float16, float32)", key,
                       s);
    return 0;
}

/* rope_theta / rope_parameters / rope_scaling / partial_rotary_factor */
static int parse_rope(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    int rc;
    rc = get_num(root, "rope_theta", "", &c->rope_theta, err, errsz);
    if (rc < 0)
        return rc;
    rc = get_num(root, "partial_rotary_factor", "", &c->partial_rotary_factor, err, errsz);
    if (rc < 0)
        return rc;

    /* transformers v5 writes "rope_parameters"; v4 wrote "rope_scaling" (or
     * null). rope_parameters wins where both exist, as in transformers'
     * standardisation of the two forms. */
    const char *src = "rope_parameters";
    struct json_object *rp = field(root, "rope_parameters");
    if (!rp) {
        src = "rope_scaling";
        rp = field(root, "rope_scaling");
    }
    if (!rp)
        return 0;
    if (json_object_get_type(rp) != json_type_object)
        return txm_err(err, errsz, -EINVAL, "config.json: %s: expected an object", src);
    char ctx[40];
    snprintf(ctx, sizeof(ctx), "%s.", src);
    rc = get_num(rp, "rope_theta", ctx, &c->rope_theta, err, errsz);
    if (rc < 0)
        return rc;
    rc = get_num(rp, "partial_rotary_factor", ctx, &c->partial_rotary_factor, err, errsz);
    if (rc < 0)
        return rc;
    const char *type = NULL;
    rc = get_str(rp, "rope_type", ctx, &type, err, errsz);
    if (rc < 0)
        return rc;
    if (!rc) { /* legacy key */
        rc = get_str(rp, "type", ctx, &type, err, errsz);
        if (rc < 0)
            return rc;
    }
    if (!type || !strcmp(type, "default")) {
        c->rope_type = GLM_ROPE_DEFAULT;
        c->rope_factor = 1.0;
    } else if (!strcmp(type, "linear")) {
        c->rope_type = GLM_ROPE_LINEAR;
        rc = get_num(rp, "factor", ctx, &c->rope_factor, err, errsz);
        if (rc < 0)
            return rc;
        if (rc == 0)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: %sfactor: required for rope_type linear", ctx);
        if (!(c->rope_factor >= 1.0))
            return txm_err(err, errsz, -EINVAL, "config.json: %sfactor: must be >= 1 (got %g)", ctx,
                           c->rope_factor);
    } else {
        return txm_err(err, errsz, -ENOTSUP,
                       "config.json: %srope_type: \"%s\" is not supported (supported: default, "
                       "linear)",
                       ctx, type);
    }
    return 0;
}

static int parse_eos(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    struct json_object *v;
    if (!json_object_object_get_ex(root, "eos_token_id", &v))
        return 0; /* keep the default */
    c->n_eos = 0;
    if (json_object_get_type(v) == json_type_null)
        return 0;
    if (json_object_get_type(v) == json_type_array) {
        size_t n = json_object_array_length(v);
        if (n > GLM_MAX_EOS)
            return txm_err(err, errsz, -EINVAL, "config.json: eos_token_id: more than %d ids",
                           GLM_MAX_EOS);
        for (size_t i = 0; i < n; i++) {
            struct json_object *e = json_object_array_get_idx(v, i);
            if (json_object_get_type(e) != json_type_int)
                return txm_err(err, errsz, -EINVAL,
                               "config.json: eos_token_id[%zu]: expected an integer", i);
            int64_t x = json_object_get_int64(e);
            if (x < 0 || x > 2147483647LL)
                return txm_err(err, errsz, -EINVAL,
                               "config.json: eos_token_id[%zu]: invalid token id %lld", i,
                               (long long)x);
            c->eos_token_ids[c->n_eos++] = (int)x;
        }
        return 0;
    }
    int id = 0;
    int rc = get_token(root, "eos_token_id", &id, err, errsz);
    if (rc < 0)
        return txm_err(
            err, errsz, -EINVAL,
            "config.json: eos_token_id: expected an integer, a list of integers or null");
    c->eos_token_ids[0] = id;
    c->n_eos = 1;
    return 0;
}

static int parse_layer_list(struct json_object *root, const char *key, const char *a, const char *b,
                            uint8_t *out, int n, int *present, char *err, size_t errsz)
{
    struct json_object *v = field(root, key);
    *present = 0;
    if (!v)
        return 0;
    if (json_object_get_type(v) != json_type_array)
        return txm_err(err, errsz, -EINVAL, "config.json: %s: expected a list of strings", key);
    size_t len = json_object_array_length(v);
    if (len != (size_t)n)
        return txm_err(err, errsz, -EINVAL,
                       "config.json: %s: has %zu entries, num_hidden_layers is %d", key, len, n);
    for (size_t i = 0; i < len; i++) {
        struct json_object *e = json_object_array_get_idx(v, i);
        const char *s =
            json_object_get_type(e) == json_type_string ? json_object_get_string(e) : NULL;
        if (s && !strcmp(s, a))
            out[i] = 0;
        else if (s && !strcmp(s, b))
            out[i] = 1;
        else
            return txm_err(err, errsz, -EINVAL,
                           "config.json: %s[%zu]: expected \"%s\" or \"%s\", got %s", key, i, a, b,
                           json_object_to_json_string_ext(e, JSON_C_TO_STRING_PLAIN));
    }
    *present = 1;
    return 0;
}

/* GlmMoeDsaConfig.__post_init__: indexer_types, else index_topk_pattern
 * ("FSSF..." or a list), else the index_topk_freq / index_skip_topk_offset
 * schedule: layer i is "full" iff max(i - offset + 1, 0) % freq == 0. */
static int parse_indexer_types(struct json_object *root, struct glm_config *c, char *err,
                               size_t errsz)
{
    int present = 0, rc;
    int n = c->num_hidden_layers;
    rc = parse_layer_list(root, "indexer_types", "full", "shared", c->indexer_types, n, &present,
                          err, errsz);
    if (rc < 0 || present)
        return rc;
    struct json_object *pat = field(root, "index_topk_pattern");
    if (pat && json_object_get_type(pat) == json_type_string) {
        const char *s = json_object_get_string(pat);
        if ((int)strlen(s) != n)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: index_topk_pattern: has %zu letters, num_hidden_layers is "
                           "%d",
                           strlen(s), n);
        for (int i = 0; i < n; i++) {
            if (s[i] == 'F')
                c->indexer_types[i] = GLM_INDEXER_FULL;
            else if (s[i] == 'S')
                c->indexer_types[i] = GLM_INDEXER_SHARED;
            else
                return txm_err(err, errsz, -EINVAL,
                               "config.json: index_topk_pattern[%d]: expected 'F' or 'S', got '%c'",
                               i, s[i]);
        }
        return 0;
    }
    if (pat)
        return parse_layer_list(root, "index_topk_pattern", "full", "shared", c->indexer_types, n,
                                &present, err, errsz);
    int freq = 1, offset = 2;
    rc = get_int(root, "index_topk_freq", &freq, err, errsz);
    if (rc < 0)
        return rc;
    rc = get_int(root, "index_skip_topk_offset", &offset, err, errsz);
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

/* ------------------------------------------------------------------------ */

#define GET(kind, key, dst)                                                                        \
    do {                                                                                           \
        int r_ = kind(root, key, dst, err, errsz);                                                 \
        if (r_ < 0)                                                                                \
            return r_;                                                                             \
    } while (0)

/*
 * Required fields: every field that decides a tensor's shape or the layer
 * structure. transformers' configuration classes give them defaults too
 * (Glm4MoeConfig hidden_size 4096, GlmMoeDsaConfig 6144, ...), but those
 * describe one particular model: a checkpoint whose config.json lacks
 * hidden_size is broken, not a 6144-wide model. The optional fields keep
 * the transformers defaults (set_defaults; docs/glm-config.md lists both).
 */
#define REQ(kind, key, dst)                                                                        \
    do {                                                                                           \
        int r_ = kind(root, key, dst, err, errsz);                                                 \
        if (r_ < 0)                                                                                \
            return r_;                                                                             \
        if (r_ == 0)                                                                               \
            return txm_err(err, errsz, -EINVAL,                                                    \
                           "config.json: %s: required field is missing (it decides the shape "     \
                           "of the model's tensors; transformers' default describes another "      \
                           "model)",                                                               \
                           key);                                                                   \
    } while (0)

static int from_object(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    if (json_object_get_type(root) != json_type_object)
        return txm_err(err, errsz, -EINVAL, "config.json: top level is not a JSON object");
    enum glm_arch arch = GLM_ARCH_UNKNOWN;
    int rc = parse_arch(root, &arch, err, errsz);
    if (rc < 0)
        return rc;
    set_defaults(c, arch);

    REQ(get_int, "vocab_size", &c->vocab_size);
    REQ(get_int, "hidden_size", &c->hidden_size);
    REQ(get_int, "intermediate_size", &c->intermediate_size);
    REQ(get_int, "moe_intermediate_size", &c->moe_intermediate_size);
    REQ(get_int, "num_hidden_layers", &c->num_hidden_layers);
    GET(get_int, "num_nextn_predict_layers", &c->num_nextn_predict_layers);
    REQ(get_int, "num_attention_heads", &c->num_attention_heads);
    REQ(get_int, "num_key_value_heads", &c->num_key_value_heads);
    GET(get_int, "max_position_embeddings", &c->max_position_embeddings);
    GET(get_bool, "attention_bias", &c->attention_bias);
    GET(get_bool, "tie_word_embeddings", &c->tie_word_embeddings);
    rc = get_num(root, "rms_norm_eps", "", &c->rms_norm_eps, err, errsz);
    if (rc < 0)
        return rc;

    /* head_dim: glm4_moe uses getattr(config, "head_dim", hidden // heads) */
    int hd = 0;
    rc = get_int(root, "head_dim", &hd, err, errsz);
    if (rc < 0)
        return rc;
    if (rc == 1)
        c->head_dim = hd;
    else if (arch == GLM_ARCH_GLM4_MOE)
        c->head_dim = c->num_attention_heads > 0 ? c->hidden_size / c->num_attention_heads : 0;

    const char *act = NULL;
    rc = get_str(root, "hidden_act", "", &act, err, errsz);
    if (rc < 0)
        return rc;
    if (act && strcmp(act, "silu") != 0)
        return txm_err(err, errsz, -ENOTSUP,
                       "config.json: hidden_act: \"%s\" is not supported (GLM uses silu)", act);

    /* MoE */
    GET(get_int, "n_routed_experts", &c->n_routed_experts);
    {
        int ne = 0; /* BC: num_experts -> n_routed_experts (GlmMoeDsaConfig) */
        rc = get_int(root, "num_experts", &ne, err, errsz);
        if (rc < 0)
            return rc;
        if (rc == 1 && !field(root, "n_routed_experts"))
            c->n_routed_experts = ne;
        if (rc == 0 && !field(root, "n_routed_experts"))
            return txm_err(err, errsz, -EINVAL,
                           "config.json: n_routed_experts: required field is missing (or "
                           "num_experts; it decides the number of expert tensors)");
    }
    REQ(get_int, "n_shared_experts", &c->n_shared_experts);
    REQ(get_int, "num_experts_per_tok", &c->num_experts_per_tok);
    rc = get_num(root, "routed_scaling_factor", "", &c->routed_scaling_factor, err, errsz);
    if (rc < 0)
        return rc;
    GET(get_int, "n_group", &c->n_group);
    GET(get_int, "topk_group", &c->topk_group);
    GET(get_bool, "norm_topk_prob", &c->norm_topk_prob);
    GET(get_int, "first_k_dense_replace", &c->first_k_dense_replace);
    const char *s = NULL;
    rc = get_str(root, "scoring_func", "", &s, err, errsz);
    if (rc < 0)
        return rc;
    if (s && strcmp(s, "sigmoid") != 0)
        return txm_err(
            err, errsz, -ENOTSUP,
            "config.json: scoring_func: \"%s\" is not supported (GLM routers use sigmoid)", s);
    s = NULL;
    rc = get_str(root, "topk_method", "", &s, err, errsz);
    if (rc < 0)
        return rc;
    if (s && strcmp(s, "noaux_tc") != 0)
        return txm_err(err, errsz, -ENOTSUP,
                       "config.json: topk_method: \"%s\" is not supported (GLM uses noaux_tc)", s);

    if (arch == GLM_ARCH_GLM4_MOE) {
        GET(get_bool, "use_qk_norm", &c->use_qk_norm);
    } else {
        /* q_lora_rank: null would mean a plain q_proj; the DSA indexer needs
         * the q latent, so GLM-5 always has one. */
        struct json_object *q;
        if (json_object_object_get_ex(root, "q_lora_rank", &q) &&
            json_object_get_type(q) == json_type_null)
            return txm_err(err, errsz, -ENOTSUP,
                           "config.json: q_lora_rank: null (no q latent) is not supported: the DSA "
                           "indexer reads the q latent");
        REQ(get_int, "q_lora_rank", &c->q_lora_rank);
        REQ(get_int, "kv_lora_rank", &c->kv_lora_rank);
        REQ(get_int, "qk_nope_head_dim", &c->qk_nope_head_dim);
        REQ(get_int, "qk_rope_head_dim", &c->qk_rope_head_dim);
        REQ(get_int, "v_head_dim", &c->v_head_dim);
        GET(get_int, "index_topk", &c->index_topk);
        REQ(get_int, "index_head_dim", &c->index_head_dim);
        REQ(get_int, "index_n_heads", &c->index_n_heads);
        GET(get_bool, "rope_interleave", &c->rope_interleave);
        GET(get_bool, "indexer_rope_interleave", &c->indexer_rope_interleave);
        int qkh = 0;
        rc = get_int(root, "qk_head_dim", &qkh, err, errsz);
        if (rc < 0)
            return rc;
        if (rc == 1 && qkh != c->qk_nope_head_dim + c->qk_rope_head_dim)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: qk_head_dim (%d) != qk_nope_head_dim (%d) + "
                           "qk_rope_head_dim (%d)",
                           qkh, c->qk_nope_head_dim, c->qk_rope_head_dim);
        c->qk_head_dim = c->qk_nope_head_dim + c->qk_rope_head_dim;
    }

    rc = parse_rope(root, c, err, errsz);
    if (rc < 0)
        return rc;
    rc = parse_dtype(root, c, err, errsz);
    if (rc < 0)
        return rc;

    GET(get_token, "bos_token_id", &c->bos_token_id);
    GET(get_token, "pad_token_id", &c->pad_token_id);
    rc = parse_eos(root, c, err, errsz);
    if (rc < 0)
        return rc;

    struct json_object *qc = field(root, "quantization_config");
    if (qc) {
        const char *qm = NULL;
        if (json_object_get_type(qc) != json_type_object)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: quantization_config: expected an object");
        rc = get_str(qc, "quant_method", "quantization_config.", &qm, err, errsz);
        if (rc < 0)
            return rc;
        snprintf(c->quant_method, sizeof(c->quant_method), "%s", qm ? qm : "unknown");
    }

    struct json_object *a = field(root, "architectures");
    if (a)
        snprintf(c->architecture, sizeof(c->architecture), "%s",
                 json_object_get_string(json_object_array_get_idx(a, 0)));

    /* per-layer lists need a sane layer count first */
    if (c->num_hidden_layers < 1 || c->num_hidden_layers > GLM_MAX_LAYERS)
        return txm_err(err, errsz, -EINVAL, "config.json: num_hidden_layers: %d is outside [1, %d]",
                       c->num_hidden_layers, GLM_MAX_LAYERS);
    int present = 0;
    rc = parse_layer_list(root, "mlp_layer_types", "dense", "sparse", c->mlp_layer_types,
                          c->num_hidden_layers, &present, err, errsz);
    if (rc < 0)
        return rc;
    if (!present) {
        if (!field(root, "first_k_dense_replace"))
            return txm_err(err, errsz, -EINVAL,
                           "config.json: first_k_dense_replace: required field is missing (or "
                           "mlp_layer_types; it decides which layers have a dense MLP)");
        for (int i = 0; i < c->num_hidden_layers; i++)
            c->mlp_layer_types[i] = i < c->first_k_dense_replace ? GLM_MLP_DENSE : GLM_MLP_SPARSE;
    }
    if (arch == GLM_ARCH_GLM_MOE_DSA) {
        rc = parse_indexer_types(root, c, err, errsz);
        if (rc < 0)
            return rc;
    }

    /* derived */
    if (arch == GLM_ARCH_GLM4_MOE)
        c->rotary_dim = (int)(c->head_dim * c->partial_rotary_factor);
    else
        c->rotary_dim = c->qk_rope_head_dim;
    return glm_config_validate(c, err, errsz);
}

int glm_config_from_json(const char *json, struct glm_config *cfg, char *err, size_t errsz)
{
    if (err && errsz)
        err[0] = 0;
    if (!json || !cfg)
        return txm_err(err, errsz, -EINVAL, "glm_config_from_json: NULL argument");
    struct json_tokener *tok = json_tokener_new();
    if (!tok)
        return txm_err(err, errsz, -ENOMEM, "out of memory");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    size_t len = strlen(json);
    struct json_object *root = json_tokener_parse_ex(tok, json, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t off = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!root || jerr != json_tokener_success) {
        if (root)
            json_object_put(root);
        if (jerr == json_tokener_continue)
            return txm_err(err, errsz, -EINVAL, "config.json: truncated JSON");
        int line = 1, col = 1;
        for (size_t i = 0; i < off && i < len; i++) {
            if (json[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        return txm_err(err, errsz, -EINVAL, "config.json: invalid JSON at line %d column %d: %s",
                       line, col, json_tokener_error_desc(jerr));
    }
    for (size_t i = off; i < len; i++) {
        if (json[i] != ' ' && json[i] != '\n' && json[i] != '\r' && json[i] != '\t') {
            json_object_put(root);
            return txm_err(err, errsz, -EINVAL, "config.json: trailing data at byte %zu", i);
        }
    }
    struct glm_config tmp;
    int rc = from_object(root, &tmp, err, errsz);
    json_object_put(root);
    if (rc == 0)
        memcpy(cfg, &tmp, sizeof(tmp)); /* padding included: memcmp-comparable */
    return rc;
}

int glm_config_load(const char *path, struct glm_config *cfg, char *err, size_t errsz)
{
    if (!path || !cfg)
        return txm_err(err, errsz, -EINVAL, "glm_config_load: NULL argument");
    char *buf;
    size_t n;
    /* config.json is a few KiB */
    int rc = txm_read_file(path, 16u << 20, &buf, &n, err, errsz);
    if (rc < 0)
        return rc;
    if (memchr(buf, 0, n)) {
        free(buf);
        return txm_err(err, errsz, -EINVAL, "%s: contains a NUL byte, not a JSON text", path);
    }
    char inner[384];
    inner[0] = 0;
    rc = glm_config_from_json(buf, cfg, inner, sizeof(inner));
    free(buf);
    if (rc < 0) {
        /* "config.json: field: ..." -> "PATH: field: ..." */
        const char *msg = inner;
        if (!strncmp(msg, "config.json: ", 13))
            msg += 13;
        return txm_err(err, errsz, rc, "%s: %s", path, msg);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* validation */

#define POS(fieldname)                                                                             \
    do {                                                                                           \
        if (c->fieldname <= 0)                                                                     \
            return txm_err(err, errsz, -EINVAL,                                                    \
                           "config.json: " #fieldname ": must be > 0 (got %d)", c->fieldname);     \
    } while (0)

int glm_config_validate(const struct glm_config *c, char *err, size_t errsz)
{
    if (!c)
        return txm_err(err, errsz, -EINVAL, "glm_config_validate: NULL config");
    if (c->arch != GLM_ARCH_GLM4_MOE && c->arch != GLM_ARCH_GLM_MOE_DSA)
        return txm_err(err, errsz, -EINVAL, "config: unknown architecture %d", (int)c->arch);
    POS(vocab_size);
    POS(hidden_size);
    POS(num_hidden_layers);
    POS(num_attention_heads);
    POS(num_key_value_heads);
    POS(max_position_embeddings);
    /* Upper bounds, checked before anything iterates over a count
     * (docs/glm-architectures.md, "Limits"). Generous: the largest real
     * checkpoints are far below them. */
    const struct {
        const char *name;
        int value;
        int limit;
    } lim[] = {
        {"vocab_size", c->vocab_size, GLM_MAX_VOCAB},
        {"hidden_size", c->hidden_size, GLM_MAX_HIDDEN},
        {"intermediate_size", c->intermediate_size, GLM_MAX_FFN},
        {"moe_intermediate_size", c->moe_intermediate_size, GLM_MAX_FFN},
        {"num_hidden_layers", c->num_hidden_layers, GLM_MAX_LAYERS},
        {"num_nextn_predict_layers", c->num_nextn_predict_layers, GLM_MAX_NEXTN},
        {"num_attention_heads", c->num_attention_heads, GLM_MAX_HEADS},
        {"num_key_value_heads", c->num_key_value_heads, GLM_MAX_HEADS},
        {"head_dim", c->head_dim, GLM_MAX_HEAD_DIM},
        {"max_position_embeddings", c->max_position_embeddings, GLM_MAX_POSITIONS},
        {"n_routed_experts", c->n_routed_experts, GLM_MAX_EXPERTS},
        {"n_shared_experts", c->n_shared_experts, GLM_MAX_SHARED_EXPERTS},
        {"num_experts_per_tok", c->num_experts_per_tok, GLM_MAX_EXPERTS},
        {"n_group", c->n_group, GLM_MAX_EXPERTS},
        {"topk_group", c->topk_group, GLM_MAX_EXPERTS},
        {"first_k_dense_replace", c->first_k_dense_replace, GLM_MAX_LAYERS},
        {"q_lora_rank", c->q_lora_rank, GLM_MAX_HIDDEN},
        {"kv_lora_rank", c->kv_lora_rank, GLM_MAX_HIDDEN},
        {"qk_nope_head_dim", c->qk_nope_head_dim, GLM_MAX_HEAD_DIM},
        {"qk_rope_head_dim", c->qk_rope_head_dim, GLM_MAX_HEAD_DIM},
        {"v_head_dim", c->v_head_dim, GLM_MAX_HEAD_DIM},
        {"index_topk", c->index_topk, GLM_MAX_POSITIONS},
        {"index_head_dim", c->index_head_dim, GLM_MAX_HEAD_DIM},
        {"index_n_heads", c->index_n_heads, GLM_MAX_HEADS},
        {"bos_token_id", c->bos_token_id, GLM_MAX_VOCAB},
        {"pad_token_id", c->pad_token_id, GLM_MAX_VOCAB},
    };
    for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
        if (lim[i].value > lim[i].limit)
            return txm_err(err, errsz, -EINVAL, "config.json: %s: %d exceeds the limit %d",
                           lim[i].name, lim[i].value, lim[i].limit);
    }
    for (int i = 0; i < c->n_eos && i < GLM_MAX_EOS; i++) {
        if (c->eos_token_ids[i] > GLM_MAX_VOCAB)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: eos_token_id[%d]: %d exceeds the limit %d", i,
                           c->eos_token_ids[i], GLM_MAX_VOCAB);
    }
    if (c->num_nextn_predict_layers < 0)
        return txm_err(err, errsz, -EINVAL, "config.json: num_nextn_predict_layers: must be >= 0");
    if (!(c->rms_norm_eps > 0.0) || !isfinite(c->rms_norm_eps))
        return txm_err(err, errsz, -EINVAL, "config.json: rms_norm_eps: must be > 0 (got %g)",
                       c->rms_norm_eps);
    if (!(c->rope_theta > 0.0) || !isfinite(c->rope_theta))
        return txm_err(err, errsz, -EINVAL, "config.json: rope_theta: must be > 0 (got %g)",
                       c->rope_theta);
    if (c->rope_type != GLM_ROPE_DEFAULT && c->rope_type != GLM_ROPE_LINEAR)
        return txm_err(err, errsz, -EINVAL, "config: rope_type: unknown value %d",
                       (int)c->rope_type);
    if (!(c->rope_factor >= 1.0) || !isfinite(c->rope_factor))
        return txm_err(err, errsz, -EINVAL, "config.json: rope_parameters.factor: must be >= 1");
    if (c->num_attention_heads % c->num_key_value_heads != 0)
        return txm_err(err, errsz, -EINVAL,
                       "config.json: num_attention_heads (%d) is not a multiple of "
                       "num_key_value_heads (%d)",
                       c->num_attention_heads, c->num_key_value_heads);

    /* feed-forward */
    int any_dense = 0, any_sparse = 0;
    for (int i = 0; i < c->num_hidden_layers; i++) {
        if (c->mlp_layer_types[i] == GLM_MLP_DENSE)
            any_dense = 1;
        else if (c->mlp_layer_types[i] == GLM_MLP_SPARSE)
            any_sparse = 1;
        else
            return txm_err(err, errsz, -EINVAL, "config: mlp_layer_types[%d]: invalid value", i);
    }
    if (c->first_k_dense_replace < 0)
        return txm_err(err, errsz, -EINVAL,
                       "config.json: first_k_dense_replace: must be >= 0 (got %d)",
                       c->first_k_dense_replace);
    if (any_dense)
        POS(intermediate_size);
    if (any_sparse) {
        POS(moe_intermediate_size);
        POS(n_routed_experts);
        POS(num_experts_per_tok);
        POS(n_group);
        POS(topk_group);
        if (c->n_shared_experts < 0)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: n_shared_experts: must be >= 0 (got %d)",
                           c->n_shared_experts);
        if (c->n_routed_experts % c->n_group != 0)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: n_routed_experts (%d) is not a multiple of n_group (%d)",
                           c->n_routed_experts, c->n_group);
        if (c->n_routed_experts / c->n_group < 2)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: n_group (%d): each group needs at least 2 experts "
                           "(group score = sum of its top 2)",
                           c->n_group);
        if (c->topk_group > c->n_group)
            return txm_err(err, errsz, -EINVAL, "config.json: topk_group (%d) exceeds n_group (%d)",
                           c->topk_group, c->n_group);
        if (c->num_experts_per_tok > c->topk_group * (c->n_routed_experts / c->n_group))
            return txm_err(
                err, errsz, -EINVAL,
                "config.json: num_experts_per_tok (%d) exceeds the experts in topk_group "
                "(%d) groups of %d",
                c->num_experts_per_tok, c->topk_group, c->n_routed_experts / c->n_group);
        if (!(c->routed_scaling_factor > 0.0) || !isfinite(c->routed_scaling_factor))
            return txm_err(err, errsz, -EINVAL,
                           "config.json: routed_scaling_factor: must be > 0 (got %g)",
                           c->routed_scaling_factor);
    }

    if (c->arch == GLM_ARCH_GLM4_MOE) {
        POS(head_dim);
        if (!(c->partial_rotary_factor > 0.0 && c->partial_rotary_factor <= 1.0))
            return txm_err(err, errsz, -EINVAL,
                           "config.json: partial_rotary_factor: must be in (0, 1] (got %g)",
                           c->partial_rotary_factor);
        if (c->rotary_dim != (int)(c->head_dim * c->partial_rotary_factor))
            return txm_err(err, errsz, -EINVAL, "config: rotary_dim inconsistent with head_dim");
        if (c->rotary_dim <= 0 || c->rotary_dim % 2 != 0)
            return txm_err(
                err, errsz, -EINVAL,
                "config.json: head_dim (%d) * partial_rotary_factor (%g) = %d rotary dims: "
                "must be even and > 0",
                c->head_dim, c->partial_rotary_factor, c->rotary_dim);
        if (c->rope_interleave)
            return txm_err(err, errsz, -EINVAL,
                           "config: glm4_moe uses NeoX RoPE (rope_interleave 0)");
    } else {
        POS(q_lora_rank);
        POS(kv_lora_rank);
        POS(qk_nope_head_dim);
        POS(qk_rope_head_dim);
        POS(v_head_dim);
        POS(index_topk);
        POS(index_head_dim);
        POS(index_n_heads);
        if (c->qk_rope_head_dim % 2 != 0)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: qk_rope_head_dim: must be even (got %d)",
                           c->qk_rope_head_dim);
        if (c->qk_head_dim != c->qk_nope_head_dim + c->qk_rope_head_dim)
            return txm_err(err, errsz, -EINVAL,
                           "config: qk_head_dim != qk_nope_head_dim + qk_rope_head_dim");
        if (c->rotary_dim != c->qk_rope_head_dim)
            return txm_err(err, errsz, -EINVAL, "config: rotary_dim must equal qk_rope_head_dim");
        if (c->index_head_dim < c->qk_rope_head_dim)
            return txm_err(
                err, errsz, -EINVAL,
                "config.json: index_head_dim (%d) is smaller than qk_rope_head_dim (%d), "
                "the indexer's rotary slice",
                c->index_head_dim, c->qk_rope_head_dim);
        if (c->num_key_value_heads != c->num_attention_heads)
            return txm_err(
                err, errsz, -EINVAL,
                "config.json: num_key_value_heads (%d) must equal num_attention_heads (%d) "
                "for MLA (kv_b_proj expands one K/V per head)",
                c->num_key_value_heads, c->num_attention_heads);
        if (c->partial_rotary_factor != 1.0)
            return txm_err(
                err, errsz, -ENOTSUP,
                "config.json: partial_rotary_factor: %g is not supported for glm_moe_dsa "
                "(RoPE covers the qk_rope_head_dim slice)",
                c->partial_rotary_factor);
        if (c->use_qk_norm)
            return txm_err(err, errsz, -EINVAL, "config: use_qk_norm is a glm4_moe field");
        for (int i = 0; i < c->num_hidden_layers; i++) {
            if (c->indexer_types[i] > GLM_INDEXER_SHARED)
                return txm_err(err, errsz, -EINVAL, "config: indexer_types[%d]: invalid value", i);
        }
        if (c->indexer_types[0] != GLM_INDEXER_FULL)
            return txm_err(err, errsz, -EINVAL,
                           "config.json: indexer_types[0]: must be \"full\" (a \"shared\" layer "
                           "reuses the top-k of the previous full layer)");
    }
    if (c->n_eos < 0 || c->n_eos > GLM_MAX_EOS)
        return txm_err(err, errsz, -EINVAL, "config: n_eos out of range");
    /* the tensor list: counted without enumerating the expert names */
    int64_t nt = glm_config_tensor_count(c);
    if (nt > GLM_MAX_TENSORS)
        return txm_err(err, errsz, -EINVAL,
                       "config.json: num_hidden_layers (%d) x n_routed_experts (%d) gives %lld "
                       "tensors, more than the limit %d",
                       c->num_hidden_layers, c->n_routed_experts, (long long)nt, GLM_MAX_TENSORS);
    for (int i = 0; i < c->n_eos; i++) {
        if (c->eos_token_ids[i] < 0)
            return txm_err(err, errsz, -EINVAL, "config.json: eos_token_id[%d]: negative", i);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* serialisation */

static int add(struct json_object *o, const char *k, struct json_object *v)
{
    if (!v)
        return -1;
    return json_object_object_add(o, k, v);
}

static struct json_object *num(double d)
{
    char buf[40];
    /* shortest representation that reads back to the same double */
    for (int p = 6; p <= 17; p++) {
        snprintf(buf, sizeof(buf), "%.*g", p, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    if (!strpbrk(buf, ".eEni")) /* keep it a JSON float */
        strncat(buf, ".0", sizeof(buf) - strlen(buf) - 1);
    return json_object_new_double_s(d, buf);
}

static struct json_object *layer_list(const uint8_t *v, int n, const char *a, const char *b)
{
    struct json_object *arr = json_object_new_array();
    if (!arr)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (json_object_array_add(arr, json_object_new_string(v[i] ? b : a)) < 0) {
            json_object_put(arr);
            return NULL;
        }
    }
    return arr;
}

static struct json_object *token_or_null(int id)
{
    return id < 0 ? NULL : json_object_new_int(id);
}

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
                                                                : arch_class_name(c->arch)));
    bad |= add(o, "architectures", archs);
    bad |= add(o, "model_type", json_object_new_string(glm_arch_name(c->arch)));
    if (c->dtype) {
        const char *d = c->dtype == GLM_DTYPE_BF16  ? "bfloat16"
                        : c->dtype == GLM_DTYPE_F16 ? "float16"
                                                    : "float32";
        bad |= add(o, "dtype", json_object_new_string(d));
    }
    bad |= add(o, "vocab_size", json_object_new_int(c->vocab_size));
    bad |= add(o, "hidden_size", json_object_new_int(c->hidden_size));
    bad |= add(o, "intermediate_size", json_object_new_int(c->intermediate_size));
    bad |= add(o, "moe_intermediate_size", json_object_new_int(c->moe_intermediate_size));
    bad |= add(o, "num_hidden_layers", json_object_new_int(c->num_hidden_layers));
    bad |= add(o, "num_nextn_predict_layers", json_object_new_int(c->num_nextn_predict_layers));
    bad |= add(o, "num_attention_heads", json_object_new_int(c->num_attention_heads));
    bad |= add(o, "num_key_value_heads", json_object_new_int(c->num_key_value_heads));
    bad |= add(o, "head_dim", json_object_new_int(c->head_dim));
    bad |= add(o, "max_position_embeddings", json_object_new_int(c->max_position_embeddings));
    bad |= add(o, "rms_norm_eps", num(c->rms_norm_eps));
    bad |= add(o, "attention_bias", json_object_new_boolean(c->attention_bias));
    bad |= add(o, "tie_word_embeddings", json_object_new_boolean(c->tie_word_embeddings));
    bad |= add(o, "hidden_act", json_object_new_string("silu"));

    struct json_object *rp = json_object_new_object();
    if (rp) {
        bad |= add(rp, "rope_type",
                   json_object_new_string(c->rope_type == GLM_ROPE_LINEAR ? "linear" : "default"));
        bad |= add(rp, "rope_theta", num(c->rope_theta));
        if (c->rope_type == GLM_ROPE_LINEAR)
            bad |= add(rp, "factor", num(c->rope_factor));
    }
    bad |= add(o, "rope_parameters", rp);
    bad |= add(o, "partial_rotary_factor", num(c->partial_rotary_factor));

    bad |= add(o, "n_routed_experts", json_object_new_int(c->n_routed_experts));
    bad |= add(o, "n_shared_experts", json_object_new_int(c->n_shared_experts));
    bad |= add(o, "num_experts_per_tok", json_object_new_int(c->num_experts_per_tok));
    bad |= add(o, "routed_scaling_factor", num(c->routed_scaling_factor));
    bad |= add(o, "n_group", json_object_new_int(c->n_group));
    bad |= add(o, "topk_group", json_object_new_int(c->topk_group));
    bad |= add(o, "norm_topk_prob", json_object_new_boolean(c->norm_topk_prob));
    bad |= add(o, "first_k_dense_replace", json_object_new_int(c->first_k_dense_replace));
    bad |= add(o, "scoring_func", json_object_new_string("sigmoid"));
    bad |= add(o, "topk_method", json_object_new_string("noaux_tc"));
    bad |= add(o, "mlp_layer_types",
               layer_list(c->mlp_layer_types, c->num_hidden_layers, "dense", "sparse"));

    if (c->arch == GLM_ARCH_GLM4_MOE) {
        bad |= add(o, "use_qk_norm", json_object_new_boolean(c->use_qk_norm));
    } else {
        bad |= add(o, "q_lora_rank", json_object_new_int(c->q_lora_rank));
        bad |= add(o, "kv_lora_rank", json_object_new_int(c->kv_lora_rank));
        bad |= add(o, "qk_nope_head_dim", json_object_new_int(c->qk_nope_head_dim));
        bad |= add(o, "qk_rope_head_dim", json_object_new_int(c->qk_rope_head_dim));
        bad |= add(o, "qk_head_dim", json_object_new_int(c->qk_head_dim));
        bad |= add(o, "v_head_dim", json_object_new_int(c->v_head_dim));
        bad |= add(o, "index_topk", json_object_new_int(c->index_topk));
        bad |= add(o, "index_head_dim", json_object_new_int(c->index_head_dim));
        bad |= add(o, "index_n_heads", json_object_new_int(c->index_n_heads));
        bad |= add(o, "rope_interleave", json_object_new_boolean(c->rope_interleave));
        bad |=
            add(o, "indexer_rope_interleave", json_object_new_boolean(c->indexer_rope_interleave));
        bad |= add(o, "indexer_types",
                   layer_list(c->indexer_types, c->num_hidden_layers, "full", "shared"));
    }

    json_object_object_add(o, "bos_token_id", token_or_null(c->bos_token_id));
    json_object_object_add(o, "pad_token_id", token_or_null(c->pad_token_id));
    if (c->n_eos == 1) {
        bad |= add(o, "eos_token_id", json_object_new_int(c->eos_token_ids[0]));
    } else if (c->n_eos == 0) {
        json_object_object_add(o, "eos_token_id", NULL);
    } else {
        struct json_object *e = json_object_new_array();
        for (int i = 0; e && i < c->n_eos; i++)
            json_object_array_add(e, json_object_new_int(c->eos_token_ids[i]));
        bad |= add(o, "eos_token_id", e);
    }
    if (c->quant_method[0]) {
        struct json_object *q = json_object_new_object();
        if (q)
            bad |= add(q, "quant_method", json_object_new_string(c->quant_method));
        bad |= add(o, "quantization_config", q);
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

/* ------------------------------------------------------------------------ */
/* RoPE helpers */

int glm_config_rope_inv_freq(const struct glm_config *c, float *out, int n)
{
    if (!c || !out || c->rotary_dim <= 0 || n < c->rotary_dim / 2)
        return -EINVAL;
    int dim = c->rotary_dim;
    for (int i = 0; i < dim / 2; i++) {
        double f = 1.0 / pow(c->rope_theta, (double)(2 * i) / (double)dim);
        if (c->rope_type == GLM_ROPE_LINEAR)
            f /= c->rope_factor;
        out[i] = (float)f;
    }
    return 0;
}

double glm_config_attn_scale(const struct glm_config *c)
{
    if (c->arch == GLM_ARCH_GLM_MOE_DSA)
        return 1.0 / sqrt((double)c->qk_head_dim);
    return 1.0 / sqrt((double)c->head_dim);
}

/* ------------------------------------------------------------------------ */
/* tensors */

struct role_desc {
    const char *suffix; /* after "model.layers.N." ; %d = expert */
    enum glm_tensor_class cls;
};

static const struct role_desc roles[GLM_T_ROLE_COUNT] = {
    [GLM_T_EMBED] = {"model.embed_tokens.weight", GLM_TC_EMBEDDING},
    [GLM_T_FINAL_NORM] = {"model.norm.weight", GLM_TC_NORM},
    [GLM_T_LM_HEAD] = {"lm_head.weight", GLM_TC_OUTPUT},
    [GLM_T_INPUT_NORM] = {"input_layernorm.weight", GLM_TC_NORM},
    [GLM_T_POST_ATTN_NORM] = {"post_attention_layernorm.weight", GLM_TC_NORM},
    [GLM_T_Q_PROJ] = {"self_attn.q_proj.weight", GLM_TC_ATTENTION},
    [GLM_T_Q_BIAS] = {"self_attn.q_proj.bias", GLM_TC_ATTENTION},
    [GLM_T_K_PROJ] = {"self_attn.k_proj.weight", GLM_TC_ATTENTION},
    [GLM_T_K_BIAS] = {"self_attn.k_proj.bias", GLM_TC_ATTENTION},
    [GLM_T_V_PROJ] = {"self_attn.v_proj.weight", GLM_TC_ATTENTION},
    [GLM_T_V_BIAS] = {"self_attn.v_proj.bias", GLM_TC_ATTENTION},
    [GLM_T_Q_NORM] = {"self_attn.q_norm.weight", GLM_TC_NORM},
    [GLM_T_K_NORM] = {"self_attn.k_norm.weight", GLM_TC_NORM},
    [GLM_T_O_PROJ] = {"self_attn.o_proj.weight", GLM_TC_ATTENTION},
    [GLM_T_O_BIAS] = {"self_attn.o_proj.bias", GLM_TC_ATTENTION},
    [GLM_T_Q_A_PROJ] = {"self_attn.q_a_proj.weight", GLM_TC_ATTENTION},
    [GLM_T_Q_A_BIAS] = {"self_attn.q_a_proj.bias", GLM_TC_ATTENTION},
    [GLM_T_Q_A_NORM] = {"self_attn.q_a_layernorm.weight", GLM_TC_NORM},
    [GLM_T_Q_B_PROJ] = {"self_attn.q_b_proj.weight", GLM_TC_ATTENTION},
    [GLM_T_KV_A_PROJ] = {"self_attn.kv_a_proj_with_mqa.weight", GLM_TC_ATTENTION},
    [GLM_T_KV_A_BIAS] = {"self_attn.kv_a_proj_with_mqa.bias", GLM_TC_ATTENTION},
    [GLM_T_KV_A_NORM] = {"self_attn.kv_a_layernorm.weight", GLM_TC_NORM},
    [GLM_T_KV_B_PROJ] = {"self_attn.kv_b_proj.weight", GLM_TC_ATTENTION},
    [GLM_T_IDX_WQ_B] = {"self_attn.indexer.wq_b.weight", GLM_TC_ATTENTION},
    [GLM_T_IDX_WK] = {"self_attn.indexer.wk.weight", GLM_TC_ATTENTION},
    [GLM_T_IDX_K_NORM] = {"self_attn.indexer.k_norm.weight", GLM_TC_NORM},
    [GLM_T_IDX_K_NORM_BIAS] = {"self_attn.indexer.k_norm.bias", GLM_TC_NORM},
    [GLM_T_IDX_WEIGHTS_PROJ] = {"self_attn.indexer.weights_proj.weight", GLM_TC_ATTENTION},
    [GLM_T_MLP_GATE] = {"mlp.gate_proj.weight", GLM_TC_MLP},
    [GLM_T_MLP_UP] = {"mlp.up_proj.weight", GLM_TC_MLP},
    [GLM_T_MLP_DOWN] = {"mlp.down_proj.weight", GLM_TC_MLP},
    [GLM_T_ROUTER] = {"mlp.gate.weight", GLM_TC_ROUTER},
    [GLM_T_ROUTER_BIAS] = {"mlp.gate.e_score_correction_bias", GLM_TC_ROUTER},
    [GLM_T_EXP_GATE] = {"mlp.experts.%d.gate_proj.weight", GLM_TC_EXPERT},
    [GLM_T_EXP_UP] = {"mlp.experts.%d.up_proj.weight", GLM_TC_EXPERT},
    [GLM_T_EXP_DOWN] = {"mlp.experts.%d.down_proj.weight", GLM_TC_EXPERT},
    [GLM_T_SHEXP_GATE] = {"mlp.shared_experts.gate_proj.weight", GLM_TC_MLP},
    [GLM_T_SHEXP_UP] = {"mlp.shared_experts.up_proj.weight", GLM_TC_MLP},
    [GLM_T_SHEXP_DOWN] = {"mlp.shared_experts.down_proj.weight", GLM_TC_MLP},
};

static int is_model_level(enum glm_tensor_role r)
{
    return r == GLM_T_EMBED || r == GLM_T_FINAL_NORM || r == GLM_T_LM_HEAD;
}

static int is_expert_role(enum glm_tensor_role r)
{
    return r == GLM_T_EXP_GATE || r == GLM_T_EXP_UP || r == GLM_T_EXP_DOWN;
}

static void shape1(struct glm_tensor_info *t, int64_t a)
{
    t->ndim = 1;
    t->shape[0] = a;
    t->shape[1] = 0;
}

static void shape2(struct glm_tensor_info *t, int64_t out, int64_t in)
{
    t->ndim = 2;
    t->shape[0] = out;
    t->shape[1] = in;
}

int glm_config_tensor_info(const struct glm_config *c, enum glm_tensor_role role, int layer,
                           int expert, struct glm_tensor_info *t)
{
    if (!c || !t || (unsigned)role >= GLM_T_ROLE_COUNT)
        return -EINVAL;
    memset(t, 0, sizeof(*t));
    t->role = role;
    t->cls = roles[role].cls;
    t->layer = -1;
    t->expert = -1;
    const int64_t H = c->hidden_size;
    const int dsa = c->arch == GLM_ARCH_GLM_MOE_DSA;

    if (is_model_level(role)) {
        if (role == GLM_T_LM_HEAD && c->tie_word_embeddings)
            return -ENOENT;
        snprintf(t->name, sizeof(t->name), "%s", roles[role].suffix);
        if (role == GLM_T_FINAL_NORM)
            shape1(t, H);
        else
            shape2(t, c->vocab_size, H);
        return 0;
    }
    if (layer < 0 || layer >= c->num_hidden_layers)
        return -ENOENT;
    const int sparse = c->mlp_layer_types[layer] == GLM_MLP_SPARSE;
    const int full_idx = dsa && c->indexer_types[layer] == GLM_INDEXER_FULL;
    const int64_t nh = c->num_attention_heads, nkv = c->num_key_value_heads, hd = c->head_dim;
    const int64_t E = c->n_routed_experts, Im = c->moe_intermediate_size;
    const int64_t Ish = (int64_t)c->moe_intermediate_size * c->n_shared_experts;

    switch (role) {
    case GLM_T_INPUT_NORM:
    case GLM_T_POST_ATTN_NORM:
        shape1(t, H);
        break;
    case GLM_T_Q_PROJ:
        if (dsa)
            return -ENOENT;
        shape2(t, nh * hd, H);
        break;
    case GLM_T_K_PROJ:
    case GLM_T_V_PROJ:
        if (dsa)
            return -ENOENT;
        shape2(t, nkv * hd, H);
        break;
    case GLM_T_Q_BIAS:
        if (dsa || !c->attention_bias)
            return -ENOENT;
        shape1(t, nh * hd);
        break;
    case GLM_T_K_BIAS:
    case GLM_T_V_BIAS:
        if (dsa || !c->attention_bias)
            return -ENOENT;
        shape1(t, nkv * hd);
        break;
    case GLM_T_Q_NORM:
    case GLM_T_K_NORM:
        if (dsa || !c->use_qk_norm)
            return -ENOENT;
        shape1(t, hd);
        break;
    case GLM_T_O_PROJ:
        shape2(t, H, dsa ? nh * c->v_head_dim : nh * hd);
        break;
    case GLM_T_O_BIAS:
        if (!dsa || !c->attention_bias)
            return -ENOENT;
        shape1(t, H);
        break;
    case GLM_T_Q_A_PROJ:
        if (!dsa)
            return -ENOENT;
        shape2(t, c->q_lora_rank, H);
        break;
    case GLM_T_Q_A_BIAS:
        if (!dsa || !c->attention_bias)
            return -ENOENT;
        shape1(t, c->q_lora_rank);
        break;
    case GLM_T_Q_A_NORM:
        if (!dsa)
            return -ENOENT;
        shape1(t, c->q_lora_rank);
        break;
    case GLM_T_Q_B_PROJ:
        if (!dsa)
            return -ENOENT;
        shape2(t, nh * c->qk_head_dim, c->q_lora_rank);
        break;
    case GLM_T_KV_A_PROJ:
        if (!dsa)
            return -ENOENT;
        shape2(t, (int64_t)c->kv_lora_rank + c->qk_rope_head_dim, H);
        break;
    case GLM_T_KV_A_BIAS:
        if (!dsa || !c->attention_bias)
            return -ENOENT;
        shape1(t, (int64_t)c->kv_lora_rank + c->qk_rope_head_dim);
        break;
    case GLM_T_KV_A_NORM:
        if (!dsa)
            return -ENOENT;
        shape1(t, c->kv_lora_rank);
        break;
    case GLM_T_KV_B_PROJ:
        if (!dsa)
            return -ENOENT;
        shape2(t, nh * ((int64_t)c->qk_nope_head_dim + c->v_head_dim), c->kv_lora_rank);
        break;
    case GLM_T_IDX_WQ_B:
        if (!full_idx)
            return -ENOENT;
        shape2(t, (int64_t)c->index_n_heads * c->index_head_dim, c->q_lora_rank);
        break;
    case GLM_T_IDX_WK:
        if (!full_idx)
            return -ENOENT;
        shape2(t, c->index_head_dim, H);
        break;
    case GLM_T_IDX_K_NORM:
    case GLM_T_IDX_K_NORM_BIAS:
        if (!full_idx)
            return -ENOENT;
        shape1(t, c->index_head_dim);
        break;
    case GLM_T_IDX_WEIGHTS_PROJ:
        if (!full_idx)
            return -ENOENT;
        shape2(t, c->index_n_heads, H);
        break;
    case GLM_T_MLP_GATE:
    case GLM_T_MLP_UP:
        if (sparse)
            return -ENOENT;
        shape2(t, c->intermediate_size, H);
        break;
    case GLM_T_MLP_DOWN:
        if (sparse)
            return -ENOENT;
        shape2(t, H, c->intermediate_size);
        break;
    case GLM_T_ROUTER:
        if (!sparse)
            return -ENOENT;
        shape2(t, E, H);
        break;
    case GLM_T_ROUTER_BIAS:
        if (!sparse)
            return -ENOENT;
        shape1(t, E);
        t->keep_fp32 = 1;
        break;
    case GLM_T_EXP_GATE:
    case GLM_T_EXP_UP:
    case GLM_T_EXP_DOWN:
        if (!sparse || expert < 0 || expert >= E)
            return -ENOENT;
        if (role == GLM_T_EXP_DOWN)
            shape2(t, H, Im);
        else
            shape2(t, Im, H);
        t->expert = expert;
        break;
    case GLM_T_SHEXP_GATE:
    case GLM_T_SHEXP_UP:
    case GLM_T_SHEXP_DOWN:
        if (!sparse || Ish == 0)
            return -ENOENT;
        if (role == GLM_T_SHEXP_DOWN)
            shape2(t, H, Ish);
        else
            shape2(t, Ish, H);
        break;
    default:
        return -ENOENT;
    }
    t->layer = layer;
    char suffix[64];
    if (is_expert_role(role))
        snprintf(suffix, sizeof(suffix), roles[role].suffix, expert);
    else
        snprintf(suffix, sizeof(suffix), "%s", roles[role].suffix);
    snprintf(t->name, sizeof(t->name), "model.layers.%d.%s", layer, suffix);
    return 0;
}

/* per-layer order: input norm, attention, post-attention norm, feed-forward */
static const enum glm_tensor_role layer_order[] = {
    GLM_T_INPUT_NORM,     GLM_T_Q_PROJ,      GLM_T_Q_BIAS,          GLM_T_K_PROJ,
    GLM_T_K_BIAS,         GLM_T_V_PROJ,      GLM_T_V_BIAS,          GLM_T_Q_NORM,
    GLM_T_K_NORM,         GLM_T_Q_A_PROJ,    GLM_T_Q_A_BIAS,        GLM_T_Q_A_NORM,
    GLM_T_Q_B_PROJ,       GLM_T_KV_A_PROJ,   GLM_T_KV_A_BIAS,       GLM_T_KV_A_NORM,
    GLM_T_KV_B_PROJ,      GLM_T_O_PROJ,      GLM_T_O_BIAS,          GLM_T_IDX_WQ_B,
    GLM_T_IDX_WK,         GLM_T_IDX_K_NORM,  GLM_T_IDX_K_NORM_BIAS, GLM_T_IDX_WEIGHTS_PROJ,
    GLM_T_POST_ATTN_NORM, GLM_T_MLP_GATE,    GLM_T_MLP_UP,          GLM_T_MLP_DOWN,
    GLM_T_ROUTER,         GLM_T_ROUTER_BIAS, GLM_T_SHEXP_GATE,      GLM_T_SHEXP_UP,
    GLM_T_SHEXP_DOWN,
};

int glm_config_tensor_list(const struct glm_config *c, glm_tensor_cb cb, void *ctx)
{
    if (!c || !cb)
        return -EINVAL;
    struct glm_tensor_info t;
    int rc;
    if (glm_config_tensor_info(c, GLM_T_EMBED, -1, -1, &t) == 0 && (rc = cb(ctx, &t)) != 0)
        return rc;
    for (int l = 0; l < c->num_hidden_layers; l++) {
        for (size_t i = 0; i < sizeof(layer_order) / sizeof(layer_order[0]); i++) {
            if (glm_config_tensor_info(c, layer_order[i], l, -1, &t) == 0 &&
                (rc = cb(ctx, &t)) != 0)
                return rc;
            if (layer_order[i] == GLM_T_ROUTER_BIAS && c->mlp_layer_types[l] == GLM_MLP_SPARSE) {
                for (int e = 0; e < c->n_routed_experts; e++) {
                    for (int r = GLM_T_EXP_GATE; r <= GLM_T_EXP_DOWN; r++) {
                        if (glm_config_tensor_info(c, (enum glm_tensor_role)r, l, e, &t) == 0 &&
                            (rc = cb(ctx, &t)) != 0)
                            return rc;
                    }
                }
            }
        }
    }
    if (glm_config_tensor_info(c, GLM_T_FINAL_NORM, -1, -1, &t) == 0 && (rc = cb(ctx, &t)) != 0)
        return rc;
    if (glm_config_tensor_info(c, GLM_T_LM_HEAD, -1, -1, &t) == 0 && (rc = cb(ctx, &t)) != 0)
        return rc;
    return 0;
}

/* Same count as glm_config_tensor_list, in time linear in the layers: the
 * routed experts' three matrices per sparse layer are counted, not named. */
int64_t glm_config_tensor_count(const struct glm_config *c)
{
    if (!c || c->num_hidden_layers < 0 || c->num_hidden_layers > GLM_MAX_LAYERS)
        return -EINVAL;
    struct glm_tensor_info t;
    int64_t n = 0;
    if (glm_config_tensor_info(c, GLM_T_EMBED, -1, -1, &t) == 0)
        n++;
    for (int l = 0; l < c->num_hidden_layers; l++) {
        for (size_t i = 0; i < sizeof(layer_order) / sizeof(layer_order[0]); i++) {
            if (glm_config_tensor_info(c, layer_order[i], l, -1, &t) == 0)
                n++;
        }
        if (c->mlp_layer_types[l] == GLM_MLP_SPARSE && c->n_routed_experts > 0)
            n += 3 * (int64_t)c->n_routed_experts;
    }
    if (glm_config_tensor_info(c, GLM_T_FINAL_NORM, -1, -1, &t) == 0)
        n++;
    if (glm_config_tensor_info(c, GLM_T_LM_HEAD, -1, -1, &t) == 0)
        n++;
    return n;
}

/* parses a non-negative decimal at *p (no sign, no leading zeros except "0") */
static int parse_index(const char **p, int *out)
{
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return -1;
    if (*s == '0' && s[1] >= '0' && s[1] <= '9')
        return -1;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        if (v > 1000000000L)
            return -1;
        s++;
    }
    *out = (int)v;
    *p = s;
    return 0;
}

int glm_config_tensor_lookup(const struct glm_config *c, const char *name,
                             struct glm_tensor_info *out, char *err, size_t errsz)
{
    if (!c || !name || !out)
        return txm_err(err, errsz, -EINVAL, "glm_config_tensor_lookup: NULL argument");
    for (int r = GLM_T_EMBED; r <= GLM_T_LM_HEAD; r++) {
        if (!strcmp(name, roles[r].suffix)) {
            if (glm_config_tensor_info(c, (enum glm_tensor_role)r, -1, -1, out) == 0)
                return 0;
            return txm_err(err, errsz, -ENOENT,
                           "tensor %s: not expected (tie_word_embeddings is true)", name);
        }
    }
    static const char prefix[] = "model.layers.";
    if (strncmp(name, prefix, sizeof(prefix) - 1) != 0)
        return txm_err(err, errsz, -ENOENT, "tensor %s: not a tensor of %s", name,
                       arch_class_name(c->arch));
    const char *p = name + sizeof(prefix) - 1;
    int layer;
    if (parse_index(&p, &layer) < 0 || *p != '.')
        return txm_err(err, errsz, -ENOENT, "tensor %s: malformed layer index", name);
    p++;
    if (layer >= c->num_hidden_layers + c->num_nextn_predict_layers)
        return txm_err(err, errsz, -ENOENT,
                       "tensor %s: layer %d does not exist (num_hidden_layers %d + "
                       "num_nextn_predict_layers %d)",
                       name, layer, c->num_hidden_layers, c->num_nextn_predict_layers);
    if (layer >= c->num_hidden_layers) {
        memset(out, 0, sizeof(*out));
        snprintf(out->name, sizeof(out->name), "%.*s", GLM_TENSOR_NAME_MAX - 1, name);
        out->layer = layer;
        out->expert = -1;
        return 1; /* MTP / next-n layer: ignored */
    }
    static const char ex[] = "mlp.experts.";
    if (!strncmp(p, ex, sizeof(ex) - 1)) {
        const char *q = p + sizeof(ex) - 1;
        int e;
        if (parse_index(&q, &e) < 0 || *q != '.')
            return txm_err(err, errsz, -ENOENT, "tensor %s: malformed expert index", name);
        q++;
        for (int r = GLM_T_EXP_GATE; r <= GLM_T_EXP_DOWN; r++) {
            const char *tail = strchr(roles[r].suffix, '%') + 3; /* after "%d." */
            if (!strcmp(q, tail)) {
                if (glm_config_tensor_info(c, (enum glm_tensor_role)r, layer, e, out) == 0)
                    return 0;
                if (c->mlp_layer_types[layer] != GLM_MLP_SPARSE)
                    return txm_err(err, errsz, -ENOENT,
                                   "tensor %s: layer %d has a dense MLP (mlp_layer_types / "
                                   "first_k_dense_replace), not experts",
                                   name, layer);
                return txm_err(err, errsz, -ENOENT,
                               "tensor %s: expert %d out of range (n_routed_experts is %d)", name,
                               e, c->n_routed_experts);
            }
        }
        return txm_err(err, errsz, -ENOENT, "tensor %s: unknown expert tensor", name);
    }
    for (int r = GLM_T_INPUT_NORM; r < GLM_T_ROLE_COUNT; r++) {
        if (is_expert_role((enum glm_tensor_role)r))
            continue;
        if (!strcmp(p, roles[r].suffix)) {
            if (glm_config_tensor_info(c, (enum glm_tensor_role)r, layer, -1, out) == 0)
                return 0;
            return txm_err(err, errsz, -ENOENT,
                           "tensor %s: not expected for this %s config (layer %d: %s MLP%s%s)",
                           name, glm_arch_name(c->arch), layer,
                           c->mlp_layer_types[layer] == GLM_MLP_SPARSE ? "MoE" : "dense",
                           c->arch == GLM_ARCH_GLM_MOE_DSA ? ", indexer " : "",
                           c->arch == GLM_ARCH_GLM_MOE_DSA
                               ? (c->indexer_types[layer] == GLM_INDEXER_FULL ? "full" : "shared")
                               : "");
        }
    }
    return txm_err(err, errsz, -ENOENT, "tensor %s: not a tensor of %s", name,
                   arch_class_name(c->arch));
}
