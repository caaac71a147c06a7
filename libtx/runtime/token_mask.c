/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: a session's allowed-token mask, the input of grammar-
 * constrained sampling. The mask is kept with the session and copied into
 * the activation buffer for every SAMPLE of one of its rows, which reads it
 * on the device (interface 1.9, docs/hardware.md); runtime/graph.c does
 * the copy. docs/grammar.md.
 */
#include "runtime/rt_internal.h"

#include <stdlib.h>
#include <string.h>

uint32_t rt_token_mask_words(const glm_model_t *m)
{
    return ((uint32_t)rt_sample_vocab(m) + 31u) / 32u;
}

int rt_fwd_has_token_mask(const struct rt_fwd *f)
{
    if (!f->sampling)
        return 0;
    for (int i = 0; i < f->n_seg; i++)
        if (f->seg[i].s && f->seg[i].s->allow)
            return 1;
    return 0;
}

TX_API int glm_session_set_token_mask(glm_session_t *s, const uint32_t *mask, int n_words)
{
    if (!s)
        return tx_error(TX_EINVAL, "glm_session_set_token_mask: NULL session");
    glm_model_t *m = s->m;
    if (!mask) {
        pthread_mutex_lock(&m->lock);
        free(s->allow);
        s->allow = NULL;
        pthread_mutex_unlock(&m->lock);
        return TX_OK;
    }
    uint32_t words = rt_token_mask_words(m);
    if (n_words < 0 || (uint32_t)n_words != words)
        return tx_error(TX_EINVAL,
                        "glm_session_set_token_mask: %d words, the model samples %d ids: %u words",
                        n_words, rt_sample_vocab(m), words);
    uint32_t any = 0;
    for (uint32_t i = 0; i < words; i++)
        any |= mask[i];
    if (!any)
        return tx_error(TX_EINVAL, "glm_session_set_token_mask: the mask allows no token");
    pthread_mutex_lock(&m->lock);
    if (!s->allow)
        s->allow = malloc((size_t)words * 4);
    int rc = TX_OK;
    if (s->allow) {
        memcpy(s->allow, mask, (size_t)words * 4);
        /* ids past the sampled vocabulary are never candidates */
        uint32_t tail = (uint32_t)rt_sample_vocab(m) % 32u;
        if (tail)
            s->allow[words - 1] &= (1u << tail) - 1u;
    } else {
        rc = tx_error(TX_ENOMEM, "glm_session_set_token_mask: out of memory");
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}
