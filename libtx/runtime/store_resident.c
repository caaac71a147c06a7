/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime, weight store "resident" (runtime/weight_store.h): every
 * tensor extent in one BO (<name>_Weights), read once at load. The MoE
 * expert tables of the meta BO (tx8_weight [n_moe][E][3]) name every
 * expert's copy in the plan's expert precision; MOE_FFN reads them.
 *
 * Also the pieces other stores share: the resident BO of what they keep
 * resident, the per-layer table layout, MOE_FFN's emission and the
 * operations a mode does not need.
 */
#include "runtime/weight_store.h"

#include "runtime/blocks.h"

#include <string.h>

#include <tx/tx_dtype.h>

int rt_store_place_resident(glm_model_t *m, const struct rt_place *p)
{
    int rc = tx_bo_alloc(m->dev, m->w_size ? m->w_size : 4096, 0, m->label_w, &m->w_bo);
    if (rc == TX_ENOSPC && p->may_fall) {
        rt_debug("load: %llu bytes of weights do not fit (%llu free)",
                 (unsigned long long)m->w_size, (unsigned long long)p->avail);
        return rc;
    }
    if (rc)
        return tx_error(rc, "%s: cannot allocate the weights: %s", p->path, tx_last_error());
    return TX_OK;
}

uint64_t rt_store_layer_table(const glm_model_t *m, int mi)
{
    return m->table_off +
           (uint64_t)mi * (uint64_t)m->cfg.n_routed_experts * 3 * sizeof(struct tx8_weight);
}

void rt_store_emit_moe_ffn(struct gctx *g, int l, struct tx_moe_ffn_args *x)
{
    blk_dbg(g, "MOE_FFN layer %d tokens=%u top_k=%u F=%u w=%s act=%s", l, x->tokens, x->top_k,
            x->ffn_dim, tx_dtype_name(rt_prec_dtype(g->plan->precision[GLM_EXPERT])),
            tx_dtype_name(x->act_dtype));
    blk_emit(g, tx_cmd_moe_ffn(g->cb, x));
}

int rt_store_per_layer_tables(const glm_model_t *m)
{
    return m->n_moe_layers;
}

int rt_store_nop_ready(glm_model_t *m)
{
    (void)m;
    return TX_OK;
}

int rt_store_nop_declare(glm_model_t *m, tx_cmdbuf_t *cb)
{
    (void)m;
    (void)cb;
    return TX_OK;
}

void rt_store_nop_pass_begin(glm_model_t *m, int T, int decode)
{
    (void)m;
    (void)T;
    (void)decode;
}

int rt_store_nop_enter(struct gctx *g, int l)
{
    (void)g;
    (void)l;
    return TX_OK;
}

int rt_store_nop_layer(struct gctx *g, int l, int next)
{
    (void)g;
    (void)l;
    (void)next;
    return TX_OK;
}

void rt_store_nop_info(const glm_model_t *m, struct glm_model_info *info)
{
    (void)m;
    (void)info;
}

int rt_store_nop_telemetry(const glm_model_t *m, struct tx_telemetry_cache *tc)
{
    (void)m;
    (void)tc;
    return 0;
}

/* ---- resident ------------------------------------------------------------ */

static int write_expert_tables(glm_model_t *m, glm_precision_t p)
{
    int E = m->cfg.n_routed_experts;
    struct tx8_weight *tab = (struct tx8_weight *)((uint8_t *)m->meta_map + m->table_off);
    for (int i = 0; i < m->n_moe_layers; i++) {
        int l = m->moe_layer[i];
        for (int e = 0; e < E; e++)
            for (int k = 0; k < 3; k++) {
                int mi = m->exp_mat[((size_t)l * (size_t)E + (size_t)e) * 3 + (size_t)k];
                struct tx_weight_ref w;
                if (mi == RT_NONE)
                    return tx_error(TX_EINVAL, "layer %d expert %d: weight missing", l, e);
                int rc = rt_weight_ref(m, mi, p, &w);
                if (rc)
                    return rc;
                rc =
                    tx_weight_encode(&w, &tab[((size_t)i * (size_t)E + (size_t)e) * 3 + (size_t)k]);
                if (rc)
                    return tx_error(rc, "expert table: %s", tx_last_error());
            }
    }
    m->tables_prec = (int)p;
    return TX_OK;
}

static int resident_plan(glm_model_t *m, const glm_precision_plan_t *plan)
{
    if (m->n_moe_layers && m->tables_prec != (int)plan->precision[GLM_EXPERT])
        return write_expert_tables(m, plan->precision[GLM_EXPERT]);
    return TX_OK;
}

static void resident_free(glm_model_t *m)
{
    (void)m; /* w_bo is the model's */
}

static void resident_moe_ffn(struct gctx *g, int l, int mi, struct tx_moe_ffn_args *x)
{
    x->experts = tx_ref(g->m->meta_bo, rt_store_layer_table(g->m, mi));
    rt_store_emit_moe_ffn(g, l, x);
}

const struct rt_store_ops rt_store_resident = {
    .name = "resident",
    .layer_jobs = 0,
    .decode_graph = 1,
    .place = rt_store_place_resident,
    .ready = rt_store_nop_ready,
    .free = resident_free,
    .n_expert_tables = rt_store_per_layer_tables,
    .plan = resident_plan,
    .pass_begin = rt_store_nop_pass_begin,
    .declare = rt_store_nop_declare,
    .layer_enter = rt_store_nop_enter,
    .layer_leave = rt_store_nop_layer,
    .moe_ffn = resident_moe_ffn,
    .info = rt_store_nop_info,
    .telemetry = rt_store_nop_telemetry,
};
