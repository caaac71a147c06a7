/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: speculative decoding in continuous batching
 * (glm_decode_batch_spec, glm-server --spec-type mtp; issue 39).
 *
 * One step for n decode sessions and n_chunks prefill chunks, as
 * glm_decode_batch_prefill, but each decode session verifies its own k
 * drafts (docs/speculative-decoding.md):
 *   1. drafts: the MTP layer, batched over the sessions: a pass of one row
 *      per session that has no draft yet (from the hidden state of its last
 *      row), then k - 1 chained one-row passes;
 *   2. verify: ONE pass: k_i + 1 rows per decode session (each row sampled
 *      with the session's glm_sampling at its own position) and the chunks;
 *   3. per session: the accepted length j_i, its position rolled back to
 *      P_i + j_i + 1, the tokens y_0..y_j;
 *   4. the MTP layer over every session's kept rows and the chunks' rows
 *      (its cache, and each session's next first draft).
 * The MTP state of a session (the hidden row before its position, the next
 * draft) lives in the session and is valid only at the position it was
 * made for: any other evaluation of the session simply makes it redraft.
 */
#include "runtime/rt_internal.h"

#include <stdlib.h>
#include <string.h>

#define SB_MAX 32 /* sessions and chunks per step (RT_MAX_LOGIT_ROWS) */

/* the session's MTP state, allocated on first use */
static int sess_state(glm_session_t *s)
{
    if (s->sp_h)
        return TX_OK;
    int D = s->m->cfg.hidden_size;
    s->sp_h = calloc((size_t)2 * D, sizeof(float));
    if (!s->sp_h)
        return tx_error(TX_ENOMEM, "glm_decode_batch_spec: out of memory");
    s->sp_g = s->sp_h + D;
    s->sp_pos = -1;
    s->sp_d1_pos = -1;
    return TX_OK;
}

/* One pass over segments seg[0..ns) (rows in order), logits rows [0, lr)
 * sampled per row (row_seg / sampling per row); hout may be NULL */
static int run(glm_model_t *m, struct rt_seg *seg, int ns, const int32_t *ids, int T, int lr,
               const int *row_seg, const struct glm_sampling *smp, int32_t *out, int mtp,
               const float *hin, float *hout, int row_pos)
{
    struct rt_fwd f;
    memset(&f, 0, sizeof(f));
    f.n_seg = ns;
    f.seg = seg;
    f.T = T;
    f.ids = ids;
    f.lrows = lr;
    f.sampling = lr ? smp : NULL;
    f.n_sampling = lr;
    f.sampled = out;
    f.row_seg = row_seg;
    f.row_pos = row_pos;
    f.mtp = mtp;
    f.hin = hin;
    f.hout = hout;
    return rt_forward(m, &f);
}

/* chained MTP drafts: step t (1..kmax-1) for every session with k_i > t */
static int draft_chain(glm_model_t *m, glm_session_t *const *ss, int n, const int *k,
                       int32_t (*d)[GLM_SPEC_MAX_DRAFT], const struct glm_sampling *greedy)
{
    int D = m->cfg.hidden_size, kmax = 0;
    for (int i = 0; i < n; i++)
        kmax = k[i] > kmax ? k[i] : kmax;
    float *hin = malloc((size_t)n * D * sizeof(float)), *hout = malloc((size_t)n * D * sizeof(float));
    struct rt_seg seg[SB_MAX];
    int32_t ids[SB_MAX], out[SB_MAX];
    int who[SB_MAX], rs[SB_MAX], rc = hin && hout ? TX_OK : TX_ENOMEM;
    struct glm_sampling g[SB_MAX];
    for (int t = 1; t < kmax && !rc; t++) {
        int c = 0;
        for (int i = 0; i < n; i++) {
            if (k[i] <= t)
                continue;
            glm_session_t *s = ss[i];
            seg[c] = (struct rt_seg){s, s->pos - 1 + t, 1, c};
            ids[c] = d[i][t - 1];
            memcpy(hin + (size_t)c * D, s->sp_g, (size_t)D * sizeof(float));
            rs[c] = c;
            g[c] = *greedy;
            who[c++] = i;
        }
        rc = run(m, seg, c, ids, c, c, rs, g, out, 1, hin, hout, 0);
        for (int j = 0; j < c && !rc; j++) {
            d[who[j]][t] = out[j];
            memcpy(ss[who[j]]->sp_g, hout + (size_t)j * D, (size_t)D * sizeof(float));
        }
    }
    free(hin);
    free(hout);
    return rc == TX_ENOMEM ? tx_error(rc, "glm_decode_batch_spec: out of memory") : rc;
}

TX_API int glm_decode_batch_spec(glm_session_t *const *sessions, const int32_t *ids, int n,
                                 const struct glm_sampling *sampling, int draft_max,
                                 int32_t *next, int *n_next, const struct glm_prefill_chunk *chunks,
                                 int n_chunks)
{
    const char *who = "glm_decode_batch_spec";
    if (n < 1 || n > SB_MAX || n_chunks < 0 || n_chunks > SB_MAX || !sessions || !ids ||
        !sampling || !next || !n_next || (n_chunks && !chunks))
        return tx_error(TX_EINVAL, "%s: 1..%d sessions with ids, sampling, next and n_next, "
                                   "0..%d chunks",
                        who, SB_MAX, SB_MAX);
    if (draft_max < 1 || draft_max > GLM_SPEC_MAX_DRAFT)
        return tx_error(TX_EINVAL, "%s: draft_max %d is outside [1, %d]", who, draft_max,
                        GLM_SPEC_MAX_DRAFT);
    glm_model_t *m = sessions[0] ? sessions[0]->m : NULL;
    if (!m)
        return tx_error(TX_EINVAL, "%s: session 0 is NULL", who);
    if (!m->mtp)
        return tx_error(TX_ENOTSUP, "%s: the model was not loaded with its MTP layer "
                                    "(GLM_LOAD_MTP)",
                        who);
    int D = m->cfg.hidden_size, V = m->cfg.vocab_size;
    for (int i = 0; i < n; i++) {
        if (!sessions[i] || sessions[i]->m != m || ids[i] < 0 || ids[i] >= V)
            return tx_error(TX_EINVAL, "%s: session %d is NULL or of another model, or its id %d "
                                       "is outside the vocabulary",
                            who, i, ids[i]);
        for (int j = 0; j < i; j++)
            if (sessions[j] == sessions[i])
                return tx_error(TX_EINVAL, "%s: session %d appears twice", who, i);
        int rc = rt_sampling_check(m, &sampling[i], who);
        if (rc)
            return rc;
    }
    int Tc = 0;
    for (int j = 0; j < n_chunks; j++) {
        const struct glm_prefill_chunk *c = &chunks[j];
        if (!c->session || c->session->m != m || !c->ids || c->n <= 0 ||
            c->session->pos + c->n > c->session->n_ctx || c->n > 1 << 20)
            return tx_error(TX_EINVAL, "%s: chunk %d: no session, ids or tokens, another model, "
                                       "or past the context",
                            who, j);
        for (int i = 0; i < n; i++)
            if (sessions[i] == c->session)
                return tx_error(TX_EINVAL, "%s: chunk %d's session is also decoding", who, j);
        for (int k = 0; k < j; k++)
            if (chunks[k].session == c->session)
                return tx_error(TX_EINVAL, "%s: chunk %d's session appears twice", who, j);
        for (int t = 0; t < c->n; t++)
            if (c->ids[t] < 0 || c->ids[t] >= V)
                return tx_error(TX_EINVAL, "%s: chunk %d: id %d outside the vocabulary", who, j,
                                c->ids[t]);
        Tc += c->n;
    }

    static const struct glm_sampling greedy = {0};
    int k[SB_MAX], j_acc[SB_MAX];
    int32_t d[SB_MAX][GLM_SPEC_MAX_DRAFT];
    struct rt_seg seg[2 * SB_MAX];
    int T = n * (GLM_SPEC_MAX_DRAFT + 1) + Tc;
    int32_t *all = malloc((size_t)T * sizeof(int32_t)), *y = malloc((size_t)T * sizeof(int32_t));
    int *rs = malloc((size_t)T * sizeof(int));
    float *H = malloc((size_t)T * D * sizeof(float)), *G = malloc((size_t)T * D * sizeof(float));
    struct glm_sampling *smp = malloc((size_t)T * sizeof(*smp));
    int rc = all && y && rs && H && G && smp ? TX_OK
                                              : tx_error(TX_ENOMEM, "%s: out of memory", who);
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < n && !rc; i++) {
        glm_session_t *s = sessions[i];
        rc = sess_state(s);
        k[i] = draft_max < s->n_ctx - s->pos - 1 ? draft_max : s->n_ctx - s->pos - 1;
        if (!rc && k[i] < 0)
            rc = tx_error(TX_EINVAL, "%s: session %d's context is full", who, i);
    }
    /* 1. first drafts where the session has none for this position: the MTP
     * layer at position P - 1 from the hidden row kept there */
    int c = 0;
    for (int i = 0; i < n && !rc; i++) {
        glm_session_t *s = sessions[i];
        if (k[i] < 1 || s->sp_d1_pos == s->pos)
            continue;
        if (s->sp_pos != s->pos || s->pos < 1) {
            k[i] = 0; /* no hidden row for this position: no drafts this step */
            continue;
        }
        seg[c] = (struct rt_seg){s, s->pos - 1, 1, c};
        all[c] = ids[i];
        memcpy(H + (size_t)c * D, s->sp_h, (size_t)D * sizeof(float));
        rs[c] = c;
        smp[c] = greedy;
        c++;
    }
    if (!rc && c) {
        rc = run(m, seg, c, all, c, c, rs, smp, y, 1, H, G, 0);
        for (int i = 0, t = 0; i < n && !rc; i++) {
            glm_session_t *s = sessions[i];
            if (k[i] < 1 || s->sp_d1_pos == s->pos)
                continue;
            s->sp_d1 = y[t];
            s->sp_d1_pos = s->pos;
            memcpy(s->sp_g, G + (size_t)t * D, (size_t)D * sizeof(float));
            t++;
        }
    }
    for (int i = 0; i < n && !rc; i++)
        d[i][0] = sessions[i]->sp_d1;
    if (!rc)
        rc = draft_chain(m, sessions, n, k, d, &greedy);

    /* 2. verify: k_i + 1 rows per decode session, then the chunks */
    int row = 0, lr;
    for (int i = 0; i < n && !rc; i++) {
        glm_session_t *s = sessions[i];
        seg[i] = (struct rt_seg){s, s->pos, k[i] + 1, row};
        all[row] = ids[i];
        memcpy(all + row + 1, d[i], (size_t)k[i] * sizeof(int32_t));
        for (int t = 0; t <= k[i]; t++) {
            rs[row + t] = i;
            smp[row + t] = sampling[i];
        }
        memcpy(s->toks + s->pos, all + row, (size_t)(k[i] + 1) * sizeof(int32_t));
        row += k[i] + 1;
    }
    lr = row;
    for (int j = 0; j < n_chunks && !rc; j++) {
        glm_session_t *cs = chunks[j].session;
        seg[n + j] = (struct rt_seg){cs, cs->pos, chunks[j].n, row};
        memcpy(all + row, chunks[j].ids, (size_t)chunks[j].n * sizeof(int32_t));
        memcpy(cs->toks + cs->pos, chunks[j].ids, (size_t)chunks[j].n * sizeof(int32_t));
        row += chunks[j].n;
    }
    if (!rc)
        rc = run(m, seg, n + n_chunks, all, row, lr, rs, smp, y, 0, NULL, H, 1);

    /* 3. acceptance, rollback; 4. the MTP layer over the kept rows */
    int mrow = 0, ms = 0;
    int32_t *mids = all; /* the verify ids are no longer needed */
    float *mh = G;
    for (int i = 0; i < n && !rc; i++) {
        glm_session_t *s = sessions[i];
        int r0 = seg[i].row0, j = 0;
        while (j < k[i] && y[r0 + j] == d[i][j])
            j++;
        j_acc[i] = j;
        memcpy(next + (size_t)i * (GLM_SPEC_MAX_DRAFT + 1), y + r0, (size_t)(j + 1) * 4);
        n_next[i] = j + 1;
        int P = s->pos;
        s->pos = P + j + 1;
        if (k[i] > 0) {
            s->spec.rounds++;
            s->spec.drafted += (uint64_t)k[i];
            s->spec.accepted += (uint64_t)j;
            s->spec.emitted += (uint64_t)(j + 1);
        }
        /* MTP rows P..P+j: hidden rows of the verify pass, next tokens y */
        seg[ms] = (struct rt_seg){s, P, j + 1, mrow};
        memcpy(mids + mrow, y + r0, (size_t)(j + 1) * 4);
        memcpy(mh + (size_t)mrow * D, H + (size_t)r0 * D, (size_t)(j + 1) * D * sizeof(float));
        /* the hidden row before the new position */
        memcpy(s->sp_h, H + (size_t)(r0 + j) * D, (size_t)D * sizeof(float));
        s->sp_pos = s->pos;
        for (int t = 0; t <= j; t++) {
            rs[mrow + t] = ms;
            smp[mrow + t] = greedy;
        }
        mrow += j + 1;
        ms++;
    }
    int mlr = mrow;
    /* the chunks: rows whose next token the chunk holds (all but its last) */
    for (int jc = 0, vrow = lr; jc < n_chunks && !rc; vrow += chunks[jc].n, jc++) {
        const struct glm_prefill_chunk *ch = &chunks[jc];
        glm_session_t *cs = ch->session;
        int P = cs->pos;
        cs->pos = P + ch->n;
        if (sess_state(cs) == TX_OK) {
            memcpy(cs->sp_h, H + (size_t)(vrow + ch->n - 1) * D, (size_t)D * sizeof(float));
            cs->sp_pos = cs->pos;
        }
        if (ch->n < 2)
            continue;
        seg[ms++] = (struct rt_seg){cs, P, ch->n - 1, mrow};
        memcpy(mids + mrow, ch->ids + 1, (size_t)(ch->n - 1) * 4);
        memcpy(mh + (size_t)mrow * D, H + (size_t)vrow * D, (size_t)(ch->n - 1) * D * sizeof(float));
        mrow += ch->n - 1;
    }
    if (!rc) {
        /* out: one draft per MTP row of the decode sessions (the last of
         * each is the next first draft); H: the MTP outputs */
        rc = run(m, seg, ms, mids, mrow, mlr, rs, smp, y, 1, mh, H, 0);
        for (int i = 0, r = 0; i < n && !rc; r += j_acc[i] + 1, i++) {
            glm_session_t *s = sessions[i];
            int last = r + j_acc[i];
            s->sp_d1 = y[last];
            s->sp_d1_pos = s->pos;
            memcpy(s->sp_g, H + (size_t)last * D, (size_t)D * sizeof(float));
        }
    }
    pthread_mutex_unlock(&m->lock);
    free(all);
    free(y);
    free(rs);
    free(H);
    free(G);
    free(smp);
    return rc;
}
