// SPDX-License-Identifier: MIT
/*
 * config.json -> struct glm_config: the fields every architecture has
 * (vocabulary, layers, heads, RoPE, MoE, special tokens), the choice of the
 * architecture module (libtx/arch/registry.c) and validation. The
 * architecture's own fields, defaults and checks are in its module
 * (libtx/arch/<model_type>.c); the JSON readers in config_json.c, the
 * serialisation in config_serialise.c, the tensor catalogue in tensors.c.
 * Semantics: docs/glm-architectures.md, docs/architectures.md.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/glm_config.h>

#include <tx-internal/tx_arch.h>
#include <tx-internal/tx_config_json.h>
#include "model/rope_scaling.h"
#include <tx-internal/tx_model_internal.h>

const char *glm_tensor_class_name(enum glm_tensor_class cls)
{
    static const char *const names[] = {"embedding", "attention", "mlp",   "expert",
                                        "norm",      "output",    "router"};
    if ((unsigned)cls < sizeof(names) / sizeof(names[0]))
        return names[cls];
    return "unknown";
}

/* ------------------------------------------------------------------------ */
/* defaults: the transformers config classes' defaults (common ones here, the
 * rest from the module) */

static void set_defaults(struct glm_config *c, const struct tx_arch_ops *arch)
{
    memset(c, 0, sizeof(*c));
    c->arch = arch->id;
    snprintf(c->model_type, sizeof(c->model_type), "%s", arch->model_type);
    snprintf(c->architecture, sizeof(c->architecture), "%s", arch->class_name);
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
    arch->defaults(c);
}

/* ------------------------------------------------------------------------ */
/* pieces */

/* model_type and architectures[0] -> the module (registry); an unknown one
 * is refused with the list of the supported ones */
static int parse_arch(struct json_object *root, const struct tx_arch_ops **arch, char *err,
                      size_t errsz)
{
    const char *mt = NULL;
    int rc = cj_str(root, "model_type", "", &mt, err, errsz);
    if (rc < 0)
        return rc;
    const struct tx_arch_ops *from_mt = NULL, *from_arch = NULL;
    if (mt) {
        from_mt = tx_arch_by_model_type(mt);
        if (!from_mt)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: model_type: \"%s\" is not supported "
                             "(supported: %s)",
                             mt, tx_arch_list_model_types());
    }
    struct json_object *a = cj_field(root, "architectures");
    if (a) {
        if (json_object_get_type(a) != json_type_array || json_object_array_length(a) < 1)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: architectures: expected a non-empty list of strings");
        struct json_object *a0 = json_object_array_get_idx(a, 0);
        if (json_object_get_type(a0) != json_type_string)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: architectures[0]: expected a string");
        const char *s = json_object_get_string(a0);
        from_arch = tx_arch_by_class(s);
        if (!from_arch && !mt)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: architectures[0]: \"%s\" is not supported "
                             "(supported: %s)",
                             s, tx_arch_list_classes());
        else if (!from_arch)
            return tx_errbuf(
                err, errsz, TX_EINVAL,
                "config.json: architectures[0]: \"%s\" does not match model_type \"%s\"", s, mt);
    }
    if (from_mt && from_arch && from_mt != from_arch)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: architectures[0] (%s) does not match model_type (%s)",
                         from_arch->class_name, from_mt->model_type);
    *arch = from_mt ? from_mt : from_arch;
    if (!*arch)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: model_type: missing (and no architectures list)");
    return 0;
}

static int parse_dtype(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    const char *s = NULL;
    const char *key = "dtype";
    int rc = cj_str(root, "dtype", "", &s, err, errsz);
    if (rc < 0)
        return rc;
    if (!rc) {
        key = "torch_dtype";
        rc = cj_str(root, "torch_dtype", "", &s, err, errsz);
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
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: %s: \"%s\" is not supported (bfloat16, float16, float32)",
                         key, s);
    return 0;
}

/* rope_theta / rope_parameters / rope_scaling / partial_rotary_factor */
static int parse_rope(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    int rc;
    rc = cj_num(root, "rope_theta", "", &c->rope_theta, err, errsz);
    if (rc < 0)
        return rc;
    rc = cj_num(root, "partial_rotary_factor", "", &c->partial_rotary_factor, err, errsz);
    if (rc < 0)
        return rc;

    /* transformers v5 writes "rope_parameters"; v4 wrote "rope_scaling" (or
     * null). rope_parameters wins where both exist, as in transformers'
     * standardisation of the two forms. */
    const char *src = "rope_parameters";
    struct json_object *rp = cj_field(root, "rope_parameters");
    if (!rp) {
        src = "rope_scaling";
        rp = cj_field(root, "rope_scaling");
    }
    if (!rp)
        return 0;
    if (json_object_get_type(rp) != json_type_object)
        return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %s: expected an object", src);
    char ctx[40];
    snprintf(ctx, sizeof(ctx), "%s.", src);
    rc = cj_num(rp, "rope_theta", ctx, &c->rope_theta, err, errsz);
    if (rc < 0)
        return rc;
    rc = cj_num(rp, "partial_rotary_factor", ctx, &c->partial_rotary_factor, err, errsz);
    if (rc < 0)
        return rc;
    const char *type = NULL;
    rc = cj_str(rp, "rope_type", ctx, &type, err, errsz);
    if (rc < 0)
        return rc;
    if (!rc) { /* legacy key */
        rc = cj_str(rp, "type", ctx, &type, err, errsz);
        if (rc < 0)
            return rc;
    }
    if (!type || !strcmp(type, "default")) {
        c->rope_type = GLM_ROPE_DEFAULT;
        c->rope_factor = 1.0;
    } else if (!strcmp(type, "linear")) {
        c->rope_type = GLM_ROPE_LINEAR;
        rc = cj_num(rp, "factor", ctx, &c->rope_factor, err, errsz);
        if (rc < 0)
            return rc;
        if (rc == 0)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: %sfactor: required for rope_type linear", ctx);
        if (!(c->rope_factor >= 1.0))
            return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %sfactor: must be >= 1 (got %g)", ctx,
                           c->rope_factor);
    } else if (!strcmp(type, "yarn")) {
        /* DeepSeek-V3 / Kimi-K2 (libtx/model/rope_scaling.h) */
        struct tx_rope_yarn y;
        char e2[200];
        rc = tx_rope_yarn_parse(rp, &y, e2, sizeof(e2));
        if (rc < 0)
            return tx_errbuf(err, errsz, rc, "config.json: %s (%s)", e2, src);
        c->rope_type = GLM_ROPE_YARN;
        c->rope_factor = y.factor;
        c->rope_yarn_original_max_pos = y.original_max_pos;
        c->rope_yarn_beta_fast = y.beta_fast;
        c->rope_yarn_beta_slow = y.beta_slow;
        c->rope_yarn_mscale = y.mscale;
        c->rope_yarn_mscale_all_dim = y.mscale_all_dim;
        c->rope_yarn_attention_factor = y.attention_factor;
        c->rope_yarn_has_af = y.has_attention_factor;
        c->rope_yarn_truncate = y.truncate;
    } else {
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                       "config.json: %srope_type: \"%s\" is not supported (supported: default, "
                       "linear, yarn)",
                       ctx, type);
    }
    return 0;
}

static void cfg_yarn(const struct glm_config *c, struct tx_rope_yarn *y)
{
    tx_rope_yarn_init(y);
    y->factor = c->rope_factor;
    y->original_max_pos = c->rope_yarn_original_max_pos;
    y->beta_fast = c->rope_yarn_beta_fast;
    y->beta_slow = c->rope_yarn_beta_slow;
    y->mscale = c->rope_yarn_mscale;
    y->mscale_all_dim = c->rope_yarn_mscale_all_dim;
    y->attention_factor = c->rope_yarn_attention_factor;
    y->has_attention_factor = c->rope_yarn_has_af;
    y->truncate = c->rope_yarn_truncate;
}

double tx_cfg_rope_attn_factor(const struct glm_config *c)
{
    struct tx_rope_yarn y;
    if (c->rope_type != GLM_ROPE_YARN)
        return 1.0;
    cfg_yarn(c, &y);
    return tx_rope_yarn_attention_factor(&y);
}

double tx_cfg_rope_softmax_mult(const struct glm_config *c)
{
    struct tx_rope_yarn y;
    if (c->rope_type != GLM_ROPE_YARN)
        return 1.0;
    cfg_yarn(c, &y);
    return tx_rope_yarn_softmax_scale_mult(&y);
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
            return tx_errbuf(err, errsz, TX_EINVAL, "config.json: eos_token_id: more than %d ids",
                             GLM_MAX_EOS);
        for (size_t i = 0; i < n; i++) {
            struct json_object *e = json_object_array_get_idx(v, i);
            if (json_object_get_type(e) != json_type_int)
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "config.json: eos_token_id[%zu]: expected an integer", i);
            int64_t x = json_object_get_int64(e);
            if (x < 0 || x > 2147483647LL)
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "config.json: eos_token_id[%zu]: invalid token id %lld", i,
                                 (long long)x);
            c->eos_token_ids[c->n_eos++] = (int)x;
        }
        return 0;
    }
    int id = 0;
    int rc = cj_token(root, "eos_token_id", &id, err, errsz);
    if (rc < 0)
        return tx_errbuf(
            err, errsz, TX_EINVAL,
            "config.json: eos_token_id: expected an integer, a list of integers or null");
    c->eos_token_ids[0] = id;
    c->n_eos = 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* shared parts the modules choose (tx_arch_ops.parse_moe, parse_mlp_layers) */

/* The DeepSeek-V3 router family (GLM-4.5, GLM-5.1): n_routed_experts (or
 * num_experts), n_shared_experts, num_experts_per_tok,
 * routed_scaling_factor, n_group / topk_group, norm_topk_prob,
 * first_k_dense_replace; scoring_func sigmoid, topk_method noaux_tc. */
int tx_cfg_parse_moe_sigmoid(struct json_object *root, struct glm_config *c, char *err,
                             size_t errsz)
{
    int rc;
    CJ_GET(cj_int, "n_routed_experts", &c->n_routed_experts);
    {
        int ne = 0; /* BC: num_experts -> n_routed_experts (GlmMoeDsaConfig) */
        rc = cj_int(root, "num_experts", &ne, err, errsz);
        if (rc < 0)
            return rc;
        if (rc == 1 && !cj_field(root, "n_routed_experts"))
            c->n_routed_experts = ne;
        if (rc == 0 && !cj_field(root, "n_routed_experts"))
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: n_routed_experts: required field is missing (or "
                             "num_experts; it decides the number of expert tensors)");
    }
    CJ_REQ(cj_int, "n_shared_experts", &c->n_shared_experts);
    CJ_REQ(cj_int, "num_experts_per_tok", &c->num_experts_per_tok);
    rc = cj_num(root, "routed_scaling_factor", "", &c->routed_scaling_factor, err, errsz);
    if (rc < 0)
        return rc;
    CJ_GET(cj_int, "n_group", &c->n_group);
    CJ_GET(cj_int, "topk_group", &c->topk_group);
    CJ_GET(cj_bool, "norm_topk_prob", &c->norm_topk_prob);
    CJ_GET(cj_int, "first_k_dense_replace", &c->first_k_dense_replace);
    const char *s = NULL;
    rc = cj_str(root, "scoring_func", "", &s, err, errsz);
    if (rc < 0)
        return rc;
    if (s && strcmp(s, "sigmoid") != 0)
        return tx_errbuf(
            err, errsz, TX_ENOTSUP,
            "config.json: scoring_func: \"%s\" is not supported (GLM routers use sigmoid)", s);
    s = NULL;
    rc = cj_str(root, "topk_method", "", &s, err, errsz);
    if (rc < 0)
        return rc;
    if (s && strcmp(s, "noaux_tc") != 0)
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                         "config.json: topk_method: \"%s\" is not supported (GLM uses noaux_tc)",
                         s);
    return 0;
}

/* mlp_layer_types, else first_k_dense_replace dense layers then MoE */
int tx_cfg_parse_mlp_layers(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    int rc;
    int present = 0;
    rc = cj_layer_list(root, "mlp_layer_types", "dense", "sparse", c->mlp_layer_types,
                       c->num_hidden_layers, &present, err, errsz);
    if (rc < 0)
        return rc;
    if (!present) {
        if (!cj_field(root, "first_k_dense_replace"))
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: first_k_dense_replace: required field is missing (or "
                             "mlp_layer_types; it decides which layers have a dense MLP)");
        for (int i = 0; i < c->num_hidden_layers; i++)
            c->mlp_layer_types[i] = i < c->first_k_dense_replace ? GLM_MLP_DENSE : GLM_MLP_SPARSE;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */

static int from_object(struct json_object *root, struct glm_config *c, char *err, size_t errsz)
{
    if (json_object_get_type(root) != json_type_object)
        return tx_errbuf(err, errsz, TX_EINVAL, "config.json: top level is not a JSON object");
    const struct tx_arch_ops *arch = NULL;
    int rc = parse_arch(root, &arch, err, errsz);
    if (rc < 0)
        return rc;
    set_defaults(c, arch);

    CJ_REQ(cj_int, "vocab_size", &c->vocab_size);
    CJ_REQ(cj_int, "hidden_size", &c->hidden_size);
    CJ_REQ(cj_int, "intermediate_size", &c->intermediate_size);
    CJ_REQ(cj_int, "moe_intermediate_size", &c->moe_intermediate_size);
    CJ_REQ(cj_int, "num_hidden_layers", &c->num_hidden_layers);
    CJ_GET(cj_int, "num_nextn_predict_layers", &c->num_nextn_predict_layers);
    CJ_REQ(cj_int, "num_attention_heads", &c->num_attention_heads);
    CJ_REQ(cj_int, "num_key_value_heads", &c->num_key_value_heads);
    CJ_GET(cj_int, "max_position_embeddings", &c->max_position_embeddings);
    CJ_GET(cj_bool, "attention_bias", &c->attention_bias);
    CJ_GET(cj_bool, "tie_word_embeddings", &c->tie_word_embeddings);
    rc = cj_num(root, "rms_norm_eps", "", &c->rms_norm_eps, err, errsz);
    if (rc < 0)
        return rc;

    /* head_dim: absent, the module's default (or its own rule) applies */
    CJ_GET(cj_int, "head_dim", &c->head_dim);

    const char *act = NULL;
    rc = cj_str(root, "hidden_act", "", &act, err, errsz);
    if (rc < 0)
        return rc;
    if (act && strcmp(act, "silu") != 0)
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                         "config.json: hidden_act: \"%s\" is not supported (GLM uses silu)", act);

    /* MoE fields: the architecture's router family */
    rc = arch->parse_moe(root, c, err, errsz);
    if (rc < 0)
        return rc;

    /* the architecture's own fields */
    rc = arch->parse(root, c, err, errsz);
    if (rc < 0)
        return rc;

    rc = parse_rope(root, c, err, errsz);
    if (rc < 0)
        return rc;
    rc = parse_dtype(root, c, err, errsz);
    if (rc < 0)
        return rc;

    CJ_GET(cj_token, "bos_token_id", &c->bos_token_id);
    CJ_GET(cj_token, "pad_token_id", &c->pad_token_id);
    rc = parse_eos(root, c, err, errsz);
    if (rc < 0)
        return rc;

    struct json_object *qc = cj_field(root, "quantization_config");
    if (qc) {
        const char *qm = NULL;
        if (json_object_get_type(qc) != json_type_object)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: quantization_config: expected an object");
        rc = cj_str(qc, "quant_method", "quantization_config.", &qm, err, errsz);
        if (rc < 0)
            return rc;
        snprintf(c->quant_method, sizeof(c->quant_method), "%s", qm ? qm : "unknown");
    }

    struct json_object *a = cj_field(root, "architectures");
    if (a)
        snprintf(c->architecture, sizeof(c->architecture), "%s",
                 json_object_get_string(json_object_array_get_idx(a, 0)));

    /* per-layer lists need a sane layer count first */
    if (c->num_hidden_layers < 1 || c->num_hidden_layers > GLM_MAX_LAYERS)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: num_hidden_layers: %d is outside [1, %d]",
                         c->num_hidden_layers, GLM_MAX_LAYERS);
    /* which layers are dense / MoE */
    rc = arch->parse_mlp_layers(root, c, err, errsz);
    if (rc < 0)
        return rc;
    /* the architecture's per-layer lists and derived fields */
    rc = arch->parse_layers(root, c, err, errsz);
    if (rc < 0)
        return rc;
    return glm_config_validate(c, err, errsz);
}

int glm_config_from_json(const char *json, struct glm_config *cfg, char *err, size_t errsz)
{
    if (err && errsz)
        err[0] = 0;
    if (!json || !cfg)
        return tx_errbuf(err, errsz, TX_EINVAL, "glm_config_from_json: NULL argument");
    struct json_tokener *tok = json_tokener_new();
    if (!tok)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
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
            return tx_errbuf(err, errsz, TX_EINVAL, "config.json: truncated JSON");
        int line = 1, col = 1;
        for (size_t i = 0; i < off && i < len; i++) {
            if (json[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: invalid JSON at line %d column %d: %s", line, col,
                         json_tokener_error_desc(jerr));
    }
    for (size_t i = off; i < len; i++) {
        if (json[i] != ' ' && json[i] != '\n' && json[i] != '\r' && json[i] != '\t') {
            json_object_put(root);
            return tx_errbuf(err, errsz, TX_EINVAL, "config.json: trailing data at byte %zu", i);
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
        return tx_errbuf(err, errsz, TX_EINVAL, "glm_config_load: NULL argument");
    char *buf;
    size_t n;
    /* config.json is a few KiB */
    int rc = txm_read_file(path, 16u << 20, &buf, &n, err, errsz);
    if (rc < 0)
        return rc;
    if (memchr(buf, 0, n)) {
        free(buf);
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: contains a NUL byte, not a JSON text", path);
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
        return tx_errbuf(err, errsz, rc, "%s: %s", path, msg);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* validation */

int glm_config_validate(const struct glm_config *c, char *err, size_t errsz)
{
    if (!c)
        return tx_errbuf(err, errsz, TX_EINVAL, "glm_config_validate: NULL config");
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    if (!arch)
        return tx_errbuf(err, errsz, TX_EINVAL, "config: unknown architecture %d (supported: %s)",
                         (int)c->arch, tx_arch_list_model_types());
    CJ_POS(vocab_size);
    CJ_POS(hidden_size);
    CJ_POS(num_hidden_layers);
    CJ_POS(num_attention_heads);
    CJ_POS(num_key_value_heads);
    CJ_POS(max_position_embeddings);
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
            return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %s: %d exceeds the limit %d",
                             lim[i].name, lim[i].value, lim[i].limit);
    }
    for (int i = 0; i < c->n_eos && i < GLM_MAX_EOS; i++) {
        if (c->eos_token_ids[i] > GLM_MAX_VOCAB)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: eos_token_id[%d]: %d exceeds the limit %d", i,
                             c->eos_token_ids[i], GLM_MAX_VOCAB);
    }
    if (c->num_nextn_predict_layers < 0)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: num_nextn_predict_layers: must be >= 0");
    if (!(c->rms_norm_eps > 0.0) || !isfinite(c->rms_norm_eps))
        return tx_errbuf(err, errsz, TX_EINVAL, "config.json: rms_norm_eps: must be > 0 (got %g)",
                         c->rms_norm_eps);
    if (!(c->rope_theta > 0.0) || !isfinite(c->rope_theta))
        return tx_errbuf(err, errsz, TX_EINVAL, "config.json: rope_theta: must be > 0 (got %g)",
                       c->rope_theta);
    if (c->rope_type != GLM_ROPE_DEFAULT && c->rope_type != GLM_ROPE_LINEAR &&
        c->rope_type != GLM_ROPE_YARN)
        return tx_errbuf(err, errsz, TX_EINVAL, "config: rope_type: unknown value %d",
                       (int)c->rope_type);
    if (c->rope_type == GLM_ROPE_YARN &&
        (!(c->rope_yarn_beta_fast > 0.0) || !(c->rope_yarn_beta_slow > 0.0) ||
         c->rope_yarn_beta_fast < c->rope_yarn_beta_slow || c->rope_yarn_original_max_pos < 0 ||
         !isfinite(c->rope_yarn_mscale) || !isfinite(c->rope_yarn_mscale_all_dim) ||
         (c->rope_yarn_has_af && !(c->rope_yarn_attention_factor > 0.0))))
        return tx_errbuf(err, errsz, TX_EINVAL,
                       "config: rope_scaling (yarn): beta_fast %g / beta_slow %g / "
                       "original_max_position_embeddings %d / mscale / attention_factor out of "
                       "range",
                       c->rope_yarn_beta_fast, c->rope_yarn_beta_slow,
                       c->rope_yarn_original_max_pos);
    if (!(c->rope_factor >= 1.0) || !isfinite(c->rope_factor))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: rope_parameters.factor: must be >= 1");
    if (c->num_attention_heads % c->num_key_value_heads != 0)
        return tx_errbuf(err, errsz, TX_EINVAL,
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
            return tx_errbuf(err, errsz, TX_EINVAL, "config: mlp_layer_types[%d]: invalid value",
                             i);
    }
    if (c->first_k_dense_replace < 0)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: first_k_dense_replace: must be >= 0 (got %d)",
                         c->first_k_dense_replace);
    if (any_dense)
        CJ_POS(intermediate_size);
    if (any_sparse) {
        CJ_POS(moe_intermediate_size);
        CJ_POS(n_routed_experts);
        CJ_POS(num_experts_per_tok);
        CJ_POS(n_group);
        CJ_POS(topk_group);
        if (c->n_shared_experts < 0)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: n_shared_experts: must be >= 0 (got %d)",
                             c->n_shared_experts);
        if (c->n_routed_experts % c->n_group != 0)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: n_routed_experts (%d) is not a multiple of n_group (%d)",
                             c->n_routed_experts, c->n_group);
        if (c->n_routed_experts / c->n_group < 2)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: n_group (%d): each group needs at least 2 experts "
                             "(group score = sum of its top 2)",
                             c->n_group);
        if (c->topk_group > c->n_group)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: topk_group (%d) exceeds n_group (%d)", c->topk_group,
                             c->n_group);
        if (c->num_experts_per_tok > c->topk_group * (c->n_routed_experts / c->n_group))
            return tx_errbuf(
                err, errsz, TX_EINVAL,
                "config.json: num_experts_per_tok (%d) exceeds the experts in topk_group "
                "(%d) groups of %d",
                c->num_experts_per_tok, c->topk_group, c->n_routed_experts / c->n_group);
        if (!(c->routed_scaling_factor > 0.0) || !isfinite(c->routed_scaling_factor))
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: routed_scaling_factor: must be > 0 (got %g)",
                             c->routed_scaling_factor);
    }

    /* the architecture's fields */
    int rc = arch->validate(c, err, errsz);
    if (rc < 0)
        return rc;
    if (c->n_eos < 0 || c->n_eos > GLM_MAX_EOS)
        return tx_errbuf(err, errsz, TX_EINVAL, "config: n_eos out of range");
    /* the tensor list: counted without enumerating the expert names */
    int64_t nt = glm_config_tensor_count(c);
    if (nt > GLM_MAX_TENSORS)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: num_hidden_layers (%d) x n_routed_experts (%d) gives %lld "
                         "tensors, more than the limit %d",
                         c->num_hidden_layers, c->n_routed_experts, (long long)nt, GLM_MAX_TENSORS);
    for (int i = 0; i < c->n_eos; i++) {
        if (c->eos_token_ids[i] < 0)
            return tx_errbuf(err, errsz, TX_EINVAL, "config.json: eos_token_id[%d]: negative", i);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* RoPE helpers */

int glm_config_rope_inv_freq(const struct glm_config *c, float *out, int n)
{
    if (!c || !out || c->rotary_dim <= 0 || n < c->rotary_dim / 2)
        return TX_EINVAL;
    int dim = c->rotary_dim;
    if (c->rope_type == GLM_ROPE_YARN) {
        struct tx_rope_yarn y;
        cfg_yarn(c, &y);
        return tx_rope_yarn_inv_freq(&y, c->rope_theta, dim, c->max_position_embeddings, out, NULL,
                                     0);
    }
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
    const struct tx_arch_ops *a = c ? tx_arch_get(c->arch) : NULL;
    return a ? a->attn_scale(c) : 0.0;
}
