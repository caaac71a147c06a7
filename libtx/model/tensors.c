// SPDX-License-Identifier: MIT
/*
 * The tensor catalogue: real Hugging Face names, shapes, roles and classes
 * of the tensors a config describes. The embedding, the norms, the MLP /
 * MoE tensors and lm_head are common; the attention block's tensors come
 * from the architecture module, which is asked first about every layer
 * tensor (tx_arch_ops.layer_tensor).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm_config.h>

#include <tx-internal/tx_arch.h>
#include <tx-internal/tx_model_internal.h>

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
    [GLM_T_MTP_EH_PROJ] = {"eh_proj.weight", GLM_TC_ATTENTION},
    [GLM_T_MTP_ENORM] = {"enorm.weight", GLM_TC_NORM},
    [GLM_T_MTP_HNORM] = {"hnorm.weight", GLM_TC_NORM},
    [GLM_T_MTP_HEAD_NORM] = {"shared_head.norm.weight", GLM_TC_NORM},
    [GLM_T_MTP_HEAD] = {"shared_head.head.weight", GLM_TC_OUTPUT},
    [GLM_T_MTP_EMBED] = {"embed_tokens.weight", GLM_TC_EMBEDDING},
};

static int is_model_level(enum glm_tensor_role r)
{
    return r == GLM_T_EMBED || r == GLM_T_FINAL_NORM || r == GLM_T_LM_HEAD;
}

static int is_mtp_role(enum glm_tensor_role r)
{
    return r >= GLM_T_MTP_EH_PROJ && r <= GLM_T_MTP_EMBED;
}

/* layer is one of the MTP (NextN) layers [L, L + num_nextn_predict_layers) */
static int is_mtp_layer(const struct glm_config *c, int layer)
{
    return layer >= c->num_hidden_layers &&
           layer < c->num_hidden_layers + c->num_nextn_predict_layers;
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
        return TX_EINVAL;
    memset(t, 0, sizeof(*t));
    t->role = role;
    t->cls = roles[role].cls;
    t->layer = -1;
    t->expert = -1;
    const int64_t H = c->hidden_size;
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    if (!arch)
        return TX_EINVAL;

    if (is_model_level(role)) {
        if (role == GLM_T_LM_HEAD && c->tie_word_embeddings)
            return TX_ENOENT;
        snprintf(t->name, sizeof(t->name), "%s", roles[role].suffix);
        if (role == GLM_T_FINAL_NORM)
            shape1(t, H);
        else
            shape2(t, c->vocab_size, H);
        return 0;
    }
    const int mtp = is_mtp_layer(c, layer);
    if (layer < 0 || (layer >= c->num_hidden_layers && !mtp))
        return TX_ENOENT;
    if (is_mtp_role(role)) {
        /* the MTP layer's own tensors (DeepSeek-V3 / GLM-4.5 NextN names) */
        if (!mtp)
            return TX_ENOENT;
        if (role == GLM_T_MTP_EH_PROJ)
            shape2(t, H, 2 * H);
        else if (role == GLM_T_MTP_HEAD || role == GLM_T_MTP_EMBED)
            shape2(t, c->vocab_size, H);
        else
            shape1(t, H);
        t->layer = layer;
        snprintf(t->name, sizeof(t->name), "model.layers.%d.%s", layer, roles[role].suffix);
        return 0;
    }
    /* the MTP layer's decoder layer is a MoE layer (DeepSeek-V3, GLM) */
    const int sparse = mtp ? c->n_routed_experts > 0 : c->mlp_layer_types[layer] == GLM_MLP_SPARSE;
    const int64_t E = c->n_routed_experts, Im = c->moe_intermediate_size;
    const int64_t Ish = (int64_t)c->moe_intermediate_size * c->n_shared_experts;

    /* the architecture decides first: its attention block's tensors, and
     * any common one it lacks or shapes otherwise */
    int rc = arch->layer_tensor(c, role, layer, expert, t);
    if (rc < 0)
        return rc;
    switch (rc == TX_ARCH_COMMON ? role : GLM_T_ROLE_COUNT) {
    case GLM_T_ROLE_COUNT: /* shaped by the module */
        if (is_expert_role(role))
            t->expert = expert;
        break;
    case GLM_T_INPUT_NORM:
    case GLM_T_POST_ATTN_NORM:
        shape1(t, H);
        break;
    case GLM_T_MLP_GATE:
    case GLM_T_MLP_UP:
        if (sparse)
            return TX_ENOENT;
        shape2(t, c->intermediate_size, H);
        break;
    case GLM_T_MLP_DOWN:
        if (sparse)
            return TX_ENOENT;
        shape2(t, H, c->intermediate_size);
        break;
    case GLM_T_ROUTER:
        if (!sparse)
            return TX_ENOENT;
        shape2(t, E, H);
        break;
    case GLM_T_ROUTER_BIAS:
        if (!sparse)
            return TX_ENOENT;
        shape1(t, E);
        t->keep_fp32 = 1;
        break;
    case GLM_T_EXP_GATE:
    case GLM_T_EXP_UP:
    case GLM_T_EXP_DOWN:
        if (!sparse || expert < 0 || expert >= E)
            return TX_ENOENT;
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
            return TX_ENOENT;
        if (role == GLM_T_SHEXP_DOWN)
            shape2(t, H, Ish);
        else
            shape2(t, Ish, H);
        break;
    default: /* an attention tensor the module does not have */
        return TX_ENOENT;
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
        return TX_EINVAL;
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

int txm_mtp_tensor_list(const struct glm_config *c, glm_tensor_cb cb, void *ctx)
{
    if (!c || !cb)
        return TX_EINVAL;
    if (c->num_nextn_predict_layers < 1)
        return 0;
    static const enum glm_tensor_role head[] = {GLM_T_MTP_ENORM, GLM_T_MTP_HNORM,
                                                GLM_T_MTP_EH_PROJ};
    const int l = c->num_hidden_layers;
    struct glm_tensor_info t;
    int rc;
    for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
        if (glm_config_tensor_info(c, head[i], l, -1, &t) == 0 && (rc = cb(ctx, &t)) != 0)
            return rc;
    for (size_t i = 0; i < sizeof(layer_order) / sizeof(layer_order[0]); i++) {
        if (glm_config_tensor_info(c, layer_order[i], l, -1, &t) == 0 && (rc = cb(ctx, &t)) != 0)
            return rc;
        if (layer_order[i] == GLM_T_ROUTER_BIAS)
            for (int e = 0; e < c->n_routed_experts; e++)
                for (int r = GLM_T_EXP_GATE; r <= GLM_T_EXP_DOWN; r++)
                    if (glm_config_tensor_info(c, (enum glm_tensor_role)r, l, e, &t) == 0 &&
                        (rc = cb(ctx, &t)) != 0)
                        return rc;
    }
    if (glm_config_tensor_info(c, GLM_T_MTP_HEAD_NORM, l, -1, &t) == 0 && (rc = cb(ctx, &t)) != 0)
        return rc;
    return 0;
}

/* Same count as glm_config_tensor_list, in time linear in the layers: the
 * routed experts' three matrices per sparse layer are counted, not named. */
int64_t glm_config_tensor_count(const struct glm_config *c)
{
    if (!c || c->num_hidden_layers < 0 || c->num_hidden_layers > GLM_MAX_LAYERS)
        return TX_EINVAL;
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
        return TX_EINVAL;
    if (*s == '0' && s[1] >= '0' && s[1] <= '9')
        return TX_EINVAL;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        if (v > 1000000000L)
            return TX_EINVAL;
        s++;
    }
    *out = (int)v;
    *p = s;
    return 0;
}

static int lookup_layer_tensor(const struct glm_config *c, const char *name, const char *p,
                               int layer, struct glm_tensor_info *out, char *err, size_t errsz);

int glm_config_tensor_lookup(const struct glm_config *c, const char *name,
                             struct glm_tensor_info *out, char *err, size_t errsz)
{
    if (!c || !name || !out)
        return tx_errbuf(err, errsz, TX_EINVAL, "glm_config_tensor_lookup: NULL argument");
    for (int r = GLM_T_EMBED; r <= GLM_T_LM_HEAD; r++) {
        if (!strcmp(name, roles[r].suffix)) {
            if (glm_config_tensor_info(c, (enum glm_tensor_role)r, -1, -1, out) == 0)
                return 0;
            return tx_errbuf(err, errsz, TX_ENOENT,
                             "tensor %s: not expected (tie_word_embeddings is true)", name);
        }
    }
    static const char prefix[] = "model.layers.";
    if (strncmp(name, prefix, sizeof(prefix) - 1) != 0)
        return tx_errbuf(err, errsz, TX_ENOENT, "tensor %s: not a tensor of %s", name,
                         glm_arch_class_name(c->arch));
    const char *p = name + sizeof(prefix) - 1;
    int layer;
    if (parse_index(&p, &layer) < 0 || *p != '.')
        return tx_errbuf(err, errsz, TX_ENOENT, "tensor %s: malformed layer index", name);
    p++;
    if (layer >= c->num_hidden_layers + c->num_nextn_predict_layers)
        return tx_errbuf(err, errsz, TX_ENOENT,
                         "tensor %s: layer %d does not exist (num_hidden_layers %d + "
                         "num_nextn_predict_layers %d)",
                         name, layer, c->num_hidden_layers, c->num_nextn_predict_layers);
    const int mtp = layer >= c->num_hidden_layers;
    if (mtp) {
        /* the MTP / next-n layer: not part of the main model; its
         * catalogue's tensors are described in full */
        char sub[TX_ERR_MAX];
        if (lookup_layer_tensor(c, name, p, layer, out, sub, sizeof(sub)) != 0) {
            memset(out, 0, sizeof(*out));
            snprintf(out->name, sizeof(out->name), "%.*s", GLM_TENSOR_NAME_MAX - 1, name);
            out->role = GLM_T_ROLE_COUNT;
            out->layer = layer;
            out->expert = -1;
        }
        return 1;
    }
    return lookup_layer_tensor(c, name, p, layer, out, err, errsz);
}

/* The tensor `name` of decoder (or MTP) layer `layer`, p: the name after
 * "model.layers.N.": 0 (*out filled) or TX_ENOENT with the message */
static int lookup_layer_tensor(const struct glm_config *c, const char *name, const char *p,
                               int layer, struct glm_tensor_info *out, char *err, size_t errsz)
{
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    const int sparse = layer >= c->num_hidden_layers ? c->n_routed_experts > 0
                                                      : c->mlp_layer_types[layer] == GLM_MLP_SPARSE;
    static const char ex[] = "mlp.experts.";
    if (!strncmp(p, ex, sizeof(ex) - 1)) {
        const char *q = p + sizeof(ex) - 1;
        int e;
        if (parse_index(&q, &e) < 0 || *q != '.')
            return tx_errbuf(err, errsz, TX_ENOENT, "tensor %s: malformed expert index", name);
        q++;
        for (int r = GLM_T_EXP_GATE; r <= GLM_T_EXP_DOWN; r++) {
            const char *tail = strchr(roles[r].suffix, '%') + 3; /* after "%d." */
            if (!strcmp(q, tail)) {
                if (glm_config_tensor_info(c, (enum glm_tensor_role)r, layer, e, out) == 0)
                    return 0;
                if (!sparse)
                    return tx_errbuf(err, errsz, TX_ENOENT,
                                     "tensor %s: layer %d has a dense MLP (mlp_layer_types / "
                                     "first_k_dense_replace), not experts",
                                     name, layer);
                return tx_errbuf(err, errsz, TX_ENOENT,
                                 "tensor %s: expert %d out of range (n_routed_experts is %d)", name,
                                 e, c->n_routed_experts);
            }
        }
        return tx_errbuf(err, errsz, TX_ENOENT, "tensor %s: unknown expert tensor", name);
    }
    for (int r = GLM_T_INPUT_NORM; r < GLM_T_ROLE_COUNT; r++) {
        if (is_expert_role((enum glm_tensor_role)r))
            continue;
        if (!strcmp(p, roles[r].suffix)) {
            if (glm_config_tensor_info(c, (enum glm_tensor_role)r, layer, -1, out) == 0)
                return 0;
            return tx_errbuf(err, errsz, TX_ENOENT,
                             "tensor %s: not expected for this %s config (layer %d: %s MLP%s)",
                             name, glm_arch_name(c->arch), layer,
                             sparse ? "MoE" : "dense",
                             arch && arch->layer_note ? arch->layer_note(c, layer) : "");
        }
    }
    return tx_errbuf(err, errsz, TX_ENOENT, "tensor %s: not a tensor of %s", name,
                     glm_arch_class_name(c->arch));
}
