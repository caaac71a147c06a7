/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: the tables of a loaded model (every package tensor matched
 * to the config's catalogue, matrices and vectors by role and layer, MoE
 * layer indices) and the meta BO (vectors in FP32, RoPE frequencies,
 * expert tables, routing counters).
 */
#include "runtime/weight_store.h"

#include <tx-internal/tx_arch.h>
#include <tx-internal/tx_model_internal.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_dtype.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

/* ------------------------------------------------------------------------ */
/* Tables of tensors, matrices and vectors                                   */
/* ------------------------------------------------------------------------ */

static int add_mat(glm_model_t *m, int t, int ltype)
{
    if (m->n_mats == m->cap_mats) {
        int cap = m->cap_mats ? m->cap_mats * 2 : 256;
        void *p = realloc(m->mats, (size_t)cap * sizeof(*m->mats));
        if (!p)
            return TX_ENOMEM;
        m->mats = p;
        m->cap_mats = cap;
    }
    struct rt_mat *x = &m->mats[m->n_mats];
    memset(x, 0, sizeof(*x));
    x->t = t;
    x->ltype = ltype;
    x->rows = m->tensors[t].smd->rows;
    x->cols = m->tensors[t].smd->cols;
    return m->n_mats++;
}

static int add_vec(glm_model_t *m, int t)
{
    if (m->n_vecs == m->cap_vecs) {
        int cap = m->cap_vecs ? m->cap_vecs * 2 : 256;
        void *p = realloc(m->vecs, (size_t)cap * sizeof(*m->vecs));
        if (!p)
            return TX_ENOMEM;
        m->vecs = p;
        m->cap_vecs = cap;
    }
    struct rt_vec *v = &m->vecs[m->n_vecs];
    v->t = t;
    v->off = 0;
    v->n = (uint32_t)(m->tensors[t].smd->rows * m->tensors[t].smd->cols);
    return m->n_vecs++;
}

struct expect_ctx {
    glm_model_t *m;
    int missing;
    char name[GLM_TENSOR_NAME_MAX];
};

static int expect_cb(void *ctx, const struct glm_tensor_info *t)
{
    struct expect_ctx *c = ctx;
    if (!tx_smd_find(c->m->smd, t->name)) {
        c->missing = 1;
        snprintf(c->name, sizeof(c->name), "%s", t->name);
        return 1;
    }
    return 0;
}

static int mtp_present_cb(void *ctx, const struct glm_tensor_info *t)
{
    glm_model_t *m = ctx;
    return tx_smd_find(m->smd, t->name) ? 0 : 1;
}

/* The package has the whole MTP layer (txm_mtp_tensor_list) */
static int mtp_complete(glm_model_t *m)
{
    return m->cfg.num_nextn_predict_layers > 0 && txm_mtp_tensor_list(&m->cfg, mtp_present_cb, m) == 0;
}

int rt_build_tables(glm_model_t *m)
{
    const struct glm_config *cfg = &m->cfg;
    int L = cfg->num_hidden_layers, E = cfg->n_routed_experts;
    size_t nt = tx_smd_tensor_count(m->smd);
    char err[TX_ERR_MAX];
    const char *path = tx_smd_path(m->smd);

    m->tensors = calloc(nt ? nt : 1, sizeof(*m->tensors));
    /* the MTP layer (layer L) is loaded when asked for and complete */
    if (m->mtp && !mtp_complete(m))
        m->mtp = 0;
    const int LL = L + 1; /* room for the MTP layer */
    m->n_role_slots = GLM_T_ROLE_COUNT * (L + 2);
    m->role_mat = malloc((size_t)m->n_role_slots * sizeof(int));
    m->role_vec = malloc((size_t)m->n_role_slots * sizeof(int));
    m->exp_mat = malloc((size_t)LL * (size_t)(E > 0 ? E : 1) * 3 * sizeof(int));
    m->moe_index = malloc((size_t)LL * sizeof(int));
    m->moe_layer = malloc((size_t)LL * sizeof(int));
    if (!m->tensors || !m->role_mat || !m->role_vec || !m->exp_mat || !m->moe_index ||
        !m->moe_layer)
        return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
    for (int i = 0; i < m->n_role_slots; i++)
        m->role_mat[i] = m->role_vec[i] = RT_NONE;
    for (size_t i = 0; i < (size_t)LL * (size_t)(E > 0 ? E : 1) * 3; i++)
        m->exp_mat[i] = RT_NONE;

    uint64_t off = 0;
    for (size_t i = 0; i < nt; i++) {
        const struct tx_smd_tensor *st = tx_smd_tensor_at(m->smd, i);
        const char *name = tx_smd_tensor_name(m->smd, st);
        struct glm_tensor_info info;
        int rc = glm_config_tensor_lookup(cfg, name, &info, err, sizeof(err));
        if (rc == 1 && (!m->mtp || info.role == GLM_T_ROLE_COUNT ||
                        info.layer != L))
            continue; /* MTP layer: not loaded */
        if (rc != 0 && rc != 1)
            return tx_error(TX_EINVAL, "%s: tensor '%s' is not part of a %s model: %s", path, name,
                            glm_arch_name(cfg->arch), err);
        /* shape must match the architecture */
        int ok = st->ndim == info.ndim && st->shape[0] == (uint64_t)info.shape[0] &&
                 (info.ndim == 1 || st->shape[1] == (uint64_t)info.shape[1]);
        if (!ok)
            return tx_error(TX_EINVAL,
                            "%s: tensor '%s' has shape [%llu%s%llu] (ndim %u), the config "
                            "implies [%lld%s%lld]",
                            path, name, (unsigned long long)st->shape[0], st->ndim > 1 ? ", " : "",
                            st->ndim > 1 ? (unsigned long long)st->shape[1] : 0ull, st->ndim,
                            (long long)info.shape[0], info.ndim > 1 ? ", " : "",
                            info.ndim > 1 ? (long long)info.shape[1] : 0ll);
        if (info.ndim == 1 && st->format != TX8_WFMT_DENSE)
            return tx_error(TX_EINVAL, "%s: vector tensor '%s' is stored sparse", path, name);
        if (info.role == GLM_T_EMBED && st->format != TX8_WFMT_DENSE)
            return tx_error(TX_EINVAL,
                            "%s: embedding '%s' is stored sparse (EMBED needs a dense "
                            "table)",
                            path, name);
        int t = m->n_tensors++;
        struct rt_tensor *rt = &m->tensors[t];
        rt->smd = st;
        rt->info = info;
        rt->off = off;
        rt->ltype = (int)info.cls;
        off += st->extent_size;
        m->package_bytes += st->extent_size;
        uint64_t nel = (uint64_t)info.shape[0] * (uint64_t)(info.ndim == 2 ? info.shape[1] : 1);
        m->n_params += nel;
        if (info.role == GLM_T_EXP_GATE || info.role == GLM_T_EXP_UP || info.role == GLM_T_EXP_DOWN)
            m->n_params_active += E ? nel * (uint64_t)cfg->num_experts_per_tok / (uint64_t)E : 0;
        else
            m->n_params_active += nel;

        int slot = (int)info.role * (L + 2) + info.layer + 1;
        if (info.ndim == 1) {
            int v = add_vec(m, t);
            if (v < 0)
                return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
            m->role_vec[slot] = v;
        } else if (info.expert >= 0) {
            int k = info.role == GLM_T_EXP_GATE ? 0 : info.role == GLM_T_EXP_UP ? 1 : 2;
            int x = add_mat(m, t, rt->ltype);
            if (x < 0)
                return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
            m->exp_mat[((size_t)info.layer * (size_t)E + (size_t)info.expert) * 3 + (size_t)k] = x;
        } else {
            int x = add_mat(m, t, rt->ltype);
            if (x < 0)
                return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
            m->role_mat[slot] = x;
        }
    }
    m->w_size = off;

    /* every tensor of the architecture must be present */
    struct expect_ctx ec = {m, 0, ""};
    glm_config_tensor_list(cfg, expect_cb, &ec);
    if (ec.missing)
        return tx_error(TX_EINVAL, "%s: tensor '%s' is missing from the package", path, ec.name);

    /* tied lm_head: the embedding in the OUTPUT class */
    if (rt_mat_of(m, GLM_T_LM_HEAD, -1) == RT_NONE) {
        int e = rt_mat_of(m, GLM_T_EMBED, -1);
        if (e == RT_NONE)
            return tx_error(TX_EINVAL, "%s: no lm_head and no embedding", path);
        int x = add_mat(m, m->mats[e].t, GLM_OUTPUT);
        if (x < 0)
            return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
        m->role_mat[GLM_T_LM_HEAD * (L + 2)] = x;
    }

    /* MoE layers */
    m->n_moe_layers = 0;
    for (int l = 0; l < rt_layers(m); l++) {
        m->moe_index[l] = -1;
        if (l < L ? cfg->mlp_layer_types[l] == GLM_MLP_SPARSE : E > 0) {
            m->moe_index[l] = m->n_moe_layers;
            m->moe_layer[m->n_moe_layers++] = l;
        }
    }
    /* the architecture's own cross-layer checks */
    const struct tx_arch_ops *arch = tx_arch_get(cfg->arch);
    if (arch && arch->load_check) {
        char msg[256];
        if (arch->load_check(cfg, path, msg, sizeof(msg)) < 0)
            return tx_error(TX_EINVAL, "%s", msg);
    }
    return TX_OK;
}

/* ------------------------------------------------------------------------ */
/* Meta BO: vectors, RoPE frequencies, expert tables, counters               */
/* ------------------------------------------------------------------------ */

static int tensor_to_f32(glm_model_t *m, int t, float *dst)
{
    char err[TX_ERR_MAX];
    const struct rt_tensor *rt = &m->tensors[t];
    int rc = tx_smd_dequant(rt->smd, (const uint8_t *)m->w_map + rt->off, dst, err, sizeof(err));
    if (rc)
        return tx_error(rc, "%s: %s", tx_smd_path(m->smd), err);
    return TX_OK;
}

int rt_build_meta(glm_model_t *m)
{
    const struct glm_config *cfg = &m->cfg;
    int E = cfg->n_routed_experts;
    uint64_t off = 0;
    for (int i = 0; i < m->n_vecs; i++) {
        m->vecs[i].off = off;
        off = ALIGN_UP(off + (uint64_t)m->vecs[i].n * 4, 64);
    }
    m->n_inv_freq = cfg->rotary_dim / 2;
    m->inv_freq_off = off;
    off = ALIGN_UP(off + (uint64_t)(m->n_inv_freq > 0 ? m->n_inv_freq : 1) * 4, 64);
    m->table_off = off;
    m->st.table_off = off;
    off = ALIGN_UP(off + (uint64_t)m->store->n_expert_tables(m) * (uint64_t)E * 3 *
                             sizeof(struct tx8_weight),
                   64);
    m->counts_off = off;
    off = ALIGN_UP(off + (uint64_t)m->n_moe_layers * (uint64_t)E * 8, 64);
    m->meta_size = off ? off : 64;

    int rc = tx_bo_alloc(m->dev, m->meta_size, 0, m->label_w, &m->meta_bo);
    if (rc)
        return tx_error(rc,
                        "glm_model_load: cannot allocate %llu bytes of device memory for "
                        "norm weights and expert tables: %s",
                        (unsigned long long)m->meta_size, tx_last_error());
    rc = tx_bo_map(m->meta_bo, &m->meta_map);
    if (rc)
        return tx_error(rc, "glm_model_load: cannot map the meta buffer: %s", tx_last_error());
    for (int i = 0; i < m->n_vecs; i++) {
        rc = tensor_to_f32(m, m->vecs[i].t, (float *)((uint8_t *)m->meta_map + m->vecs[i].off));
        if (rc)
            return rc;
    }
    if (m->n_inv_freq > 0) {
        float *f = (float *)((uint8_t *)m->meta_map + m->inv_freq_off);
        if (glm_config_rope_inv_freq(cfg, f, m->n_inv_freq))
            return tx_error(TX_EINVAL, "glm_model_load: cannot compute the RoPE frequencies");
    }
    memset((uint8_t *)m->meta_map + m->counts_off, 0, (size_t)m->n_moe_layers * (size_t)E * 8);
    m->tables_prec = -1;
    return TX_OK;
}
