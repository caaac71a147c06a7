/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: the activations of a pass: the layout of its buffers (the
 * common ones here, the attention block's from the architecture module)
 * and the activation BO that holds them.
 */
#include "runtime/blocks.h"

#include <tx-internal/tx_arch.h>

#include <string.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

/* ------------------------------------------------------------------------ */
/* Activations                                                               */
/* ------------------------------------------------------------------------ */

int rt_ensure_act(glm_model_t *m, uint64_t bytes)
{
    if (m->act_bo && m->act_size >= bytes)
        return TX_OK;
    uint64_t sz = ALIGN_UP(bytes, 1u << 20);
    rt_dgraph_drop(m); /* its commands address the old buffer */
    if (m->act_bo) {
        tx_bo_free(m->act_bo);
        m->act_bo = NULL;
        m->act_map = NULL;
        m->act_size = 0;
    }
    int rc = tx_bo_alloc(m->dev, sz, 0, m->label_act, &m->act_bo);
    if (rc)
        return tx_error(rc, "cannot allocate %llu bytes of device memory for activations: %s",
                        (unsigned long long)sz, tx_last_error());
    rc = tx_bo_map(m->act_bo, &m->act_map);
    if (rc) {
        tx_bo_free(m->act_bo);
        m->act_bo = NULL;
        return tx_error(rc, "cannot map the activation buffer: %s", tx_last_error());
    }
    m->act_size = sz;
    return TX_OK;
}

static int max_i(int a, int b)
{
    return a > b ? a : b;
}

void rt_act_layout(const glm_model_t *m, const struct tx_arch_ops *arch, const struct rt_fwd *f,
                   int T, int R, int dump, struct act_layout *a)
{
    const struct glm_config *c = &m->cfg;
    uint64_t o = 0, t = (uint64_t)T;
    int D = c->hidden_size;
    memset(a, 0, sizeof(*a));
    a->ids = blk_take(&o, t * 4);
    a->pos = blk_take(&o, t * 4);
    a->h = blk_take(&o, t * D * 4);
    a->xn = blk_take(&o, t * D * 4);
    /* the attention block's buffers: the architecture's (MLA: of the
     * form it chooses for this pass) */
    a->xkeys = f && arch->expand_keys ? arch->expand_keys(c, f, m->mla_form) : 0;
    int nd = max_i(D, arch->act_layout(c, t, a, &o));
    a->r16 = blk_take(&o, t * nd * 2);
    int F = max_i(c->intermediate_size, c->moe_intermediate_size * max_i(c->n_shared_experts, 1));
    a->g = blk_take(&o, t * F * 4);
    a->u = blk_take(&o, t * F * 4);
    a->a = blk_take(&o, t * F * 4);
    int E = c->n_routed_experts > 0 ? c->n_routed_experts : 1;
    int K = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 1;
    a->rl = blk_take(&o, t * E * 4);
    a->rid = blk_take(&o, t * K * 4);
    a->rw = blk_take(&o, t * K * 4);
    uint64_t r = (uint64_t)(R > 0 ? R : 1);
    a->logits = blk_take(&o, r * (uint64_t)c->vocab_size * 4);
    a->tok = blk_take(&o, r * 4);
    a->prob = blk_take(&o, r * 4);
    a->hist = blk_take(&o, r * GLM_MAX_REPEAT_LAST_N * 4);
    a->allow = blk_take(&o, r * rt_token_mask_words(m) * 4);
    a->dump = dump ? blk_take(&o, (uint64_t)(c->num_hidden_layers + 1) * t * D * 4) : 0;
    a->dump_rid = dump ? blk_take(&o, (uint64_t)m->n_moe_layers * t * K * 4) : 0;
    int nsel = arch->select_k(c);
    a->dump_sel =
        dump && nsel > 0 ? blk_take(&o, (uint64_t)c->num_hidden_layers * t * nsel * 4) : 0;
    a->amask_ld = rt_attn_mask_words(f);
    a->amask = a->amask_ld ? blk_take(&o, t * a->amask_ld * 8) : 0;
    if (f && (f->mtp || f->mtp_tail)) {
        a->mtp_hin = blk_take(&o, t * D * 4);
        a->mtp_cat = blk_take(&o, t * 2 * D * 4);
    }
    a->total = ALIGN_UP(o, 4096);
}
