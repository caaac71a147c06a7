// SPDX-License-Identifier: MIT
/*
 * GLM runtime: a session's custom attention mask (glm_session_set_attn_mask,
 * tx/glm.h). The mask is kept as its rows of ranges; each pass with masked
 * positions gets a key bitmap per activation row in the activation buffer
 * (u64 [T][ld], bit s: key position s visible, the causal rule already
 * applied), which the ATTENTION commands (and DSA_INDEX: the indexer's
 * top-k among the visible keys) read on the device (interface 1.10, the
 * bitmap path of DSA's selections). docs/libtx-glm.md.
 */
#include "runtime/blocks.h"

#include <stdlib.h>
#include <string.h>

#include "common/attn_mask.h"

static void mask_free(glm_session_t *s)
{
    if (!s->amask)
        return;
    free(s->amask->row_start);
    free(s->amask->ranges);
    free(s->amask);
    s->amask = NULL;
}

void rt_attn_mask_drop(glm_session_t *s)
{
    mask_free(s);
}

TX_API int glm_session_set_attn_mask(glm_session_t *s, const struct glm_attn_mask *m)
{
    static const char who[] = "glm_session_set_attn_mask";
    if (!s)
        return tx_error(TX_EINVAL, "%s: NULL session", who);
    glm_model_t *md = s->m;
    if (!m) {
        pthread_mutex_lock(&md->lock);
        mask_free(s);
        pthread_mutex_unlock(&md->lock);
        return TX_OK;
    }
    pthread_mutex_lock(&md->lock);
    int left = s->n_ctx - s->pos, base = s->pos;
    pthread_mutex_unlock(&md->lock);
    int rc = tx_attn_mask_check(m, left, who, NULL, 0);
    if (rc)
        return rc;
    struct rt_attn_mask *a = calloc(1, sizeof(*a));
    if (!a)
        return tx_error(TX_ENOMEM, "%s: out of memory", who);
    rc = tx_attn_mask_copy(m, &a->row_start, &a->ranges);
    if (rc) {
        free(a);
        return rc;
    }
    a->base = base;
    a->n = m->n_tokens;
    pthread_mutex_lock(&md->lock);
    mask_free(s);
    s->amask = a;
    pthread_mutex_unlock(&md->lock);
    return TX_OK;
}

/* whether segment sg has positions of its session's mask */
static int seg_masked(const struct rt_seg *sg)
{
    const struct rt_attn_mask *a = sg->s ? sg->s->amask : NULL;
    return a && sg->pos0 < a->base + a->n && sg->pos0 + sg->n > a->base;
}

uint32_t rt_attn_mask_words(const struct rt_fwd *f)
{
    uint32_t words = 0;
    for (int i = 0; f && i < f->n_seg; i++) {
        const struct rt_seg *sg = &f->seg[i];
        if (!seg_masked(sg))
            continue;
        uint32_t w = (uint32_t)(((uint64_t)sg->pos0 + (uint64_t)sg->n + 63) / 64);
        if (w > words)
            words = w;
    }
    return words;
}

void rt_attn_mask_prepare(struct rt_fwd *f)
{
    for (int i = 0; i < f->n_seg; i++) {
        glm_session_t *s = f->seg[i].s;
        /* a pass past the mask's positions: it has served */
        if (s && s->amask && f->seg[i].pos0 >= s->amask->base + s->amask->n)
            mask_free(s);
    }
}

/* bits [lo, hi) of row b */
static void set_bits(uint64_t *b, size_t lo, size_t hi)
{
    for (size_t k = lo; k < hi;) {
        if (k % 64 == 0 && hi - k >= 64) {
            b[k / 64] = ~(uint64_t)0;
            k += 64;
        } else {
            b[k / 64] |= (uint64_t)1 << (k % 64);
            k++;
        }
    }
}

void rt_attn_mask_fill(struct gctx *g)
{
    uint32_t ld = g->a.amask_ld;
    if (!ld)
        return;
    uint64_t *bits = (uint64_t *)(void *)((uint8_t *)g->m->act_map + g->a.amask);
    memset(bits, 0, (size_t)g->f->T * ld * 8);
    for (int si = 0; si < g->f->n_seg; si++) {
        const struct rt_seg *sg = &g->f->seg[si];
        if (!seg_masked(sg))
            continue;
        const struct rt_attn_mask *a = sg->s->amask;
        for (int t = 0; t < sg->n; t++) {
            uint64_t *b = bits + (size_t)(sg->row0 + t) * ld;
            int p = sg->pos0 + t, i = p - a->base;
            if (i < 0 || i >= a->n) { /* outside the mask: every earlier key */
                set_bits(b, 0, (size_t)p + 1);
                continue;
            }
            set_bits(b, 0, (size_t)a->base); /* the context before the mask */
            for (int32_t k = a->row_start[i]; k < a->row_start[i + 1]; k++) {
                int lo = a->ranges[2 * k], hi = a->ranges[2 * k + 1];
                if (hi > i + 1) /* the causal rule */
                    hi = i + 1;
                if (lo < hi)
                    set_bits(b, (size_t)(a->base + lo), (size_t)(a->base + hi));
            }
            b[p / 64] |= (uint64_t)1 << (p % 64); /* itself */
        }
    }
}

int rt_attn_mask_ref(struct gctx *g, const struct rt_seg *sg, tx_ref_t *ref, uint32_t *ld)
{
    if (!g->a.amask_ld || !seg_masked(sg))
        return 0;
    *ref = blk_act(g, g->a.amask + (uint64_t)sg->row0 * g->a.amask_ld * 8);
    *ld = g->a.amask_ld;
    return 1;
}
