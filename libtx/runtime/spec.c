/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: speculative decoding with the model's MTP (NextN) layer
 * (issue 39, docs/speculative-decoding.md).
 *
 * One round at cache position P with the current token t (sampled, not yet
 * in the cache) and k drafts d1..dk:
 *   verify  one pass of the k + 1 rows [t, d1..dk] at positions P..P+k;
 *           every row samples (the device's SAMPLE, counter = the position
 *           its token takes, as non-speculative decoding) y0..yk;
 *   accept  the longest prefix with d(i+1) == y(i): j drafts; the round
 *           yields y0..yj (the drafts accepted and the token after them);
 *   rollback the session's position becomes P + j + 1: the rows of the
 *           rejected positions in every cache of every layer (GQA K/V, MLA
 *           latent, DSA indexer keys, any KV type) are never read again
 *           and the next pass overwrites them;
 *   draft   one MTP pass over the rows P..P+j (hidden states h of the verify
 *           pass, next tokens y0..yj: it also writes the MTP layer's own
 *           cache there) whose last row drafts d1 of the next round, then
 *           k - 1 one-row MTP passes, each fed the MTP layer's own output
 *           and the previous draft (the one MTP module reused, as GLM-5).
 *           With the resident store the MTP pass over the kept rows is
 *           part of the verify pass's job (rt_fwd.mtp_tail: over all k + 1
 *           rows, the host keeps row j's draft); a draft the MTP layer
 *           gives less than p_min (--draft-p-min) ends the drafts.
 * Drafts are the MTP layer's argmax (a deterministic draft distribution q);
 * sampling y(i) and comparing is then exactly the rejection rule: d is kept
 * with probability min(1, p(d)/q(d)) = p(d) and otherwise the token is a
 * draw from max(0, p - q) normalised = p without d; and since y(i) is drawn
 * with the same seed and counter as without drafts, the output is the
 * non-speculative output token for token (greedy or sampled).
 */
#include "runtime/rt_internal.h"
#include "runtime/weight_store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Adaptive switch-off (llama.cpp's --draft-p-min in spirit): after
 * SPEC_WINDOW rounds whose acceptance is below SPEC_P_MIN, draft nothing
 * for SPEC_OFF_STEPS tokens (doubling each time, up to SPEC_OFF_MAX), then
 * try again. */
#define SPEC_WINDOW 4
#define SPEC_P_MIN 0.10
#define SPEC_OFF_STEPS 256
#define SPEC_OFF_MAX 8192

struct spec_state {
    glm_session_t *s;
    const struct glm_generate_params *p;
    const struct glm_sampling *greedy; /* the drafts' sampling */
    int k, mode, D;
    float *h;     /* [(k + 1) x D] hidden rows of the last main pass */
    float *g;     /* [D] the MTP layer's output of its last row */
    int32_t d[GLM_SPEC_MAX_DRAFT];
    float dp[GLM_SPEC_MAX_DRAFT]; /* the drafts' MTP probabilities */
    int have_d1;  /* d[0] is the MTP draft for the current token */
    int fused;    /* the verify pass carries the MTP layer (f.mtp_tail) */
    float p_min;  /* drafting stops at a draft less probable than this */
    float *mh;    /* fused: [(k + 1) x D] the MTP layer's output rows */
    int32_t *md;  /* fused: [k + 1] its drafts after each row */
    float *mp;    /* fused: [k + 1] their probabilities */
    /* adaptivity */
    int win_rounds, win_drafted, win_accepted;
    int off_left, off_len;
    uint64_t *busy, *macs;
    const int32_t *ban;
    int n_ban;
};

/* One pass of n rows of session s at position pos0 (not advanced). */
static int pass(struct spec_state *st, const int32_t *ids, int n, int pos0, int lrow0, int lrows,
                const struct glm_sampling *sampling, int32_t *sampled, int row_pos, int mtp,
                const float *hin, float *hout, float *probs)
{
    glm_session_t *s = st->s;
    struct rt_seg seg = {s, pos0, n, 0};
    struct rt_fwd f;
    memset(&f, 0, sizeof(f));
    f.n_seg = 1;
    f.seg = &seg;
    f.T = n;
    f.ids = ids;
    f.lrow0 = lrow0;
    f.lrows = lrows;
    if (sampling && lrows) {
        f.sampling = sampling;
        f.n_sampling = 1;
        f.sampled = sampled;
        f.ban = mtp ? NULL : st->ban;
        f.n_ban = mtp ? 0 : st->n_ban;
    }
    f.row_pos = row_pos;
    f.mtp = mtp;
    f.hin = hin;
    f.hout = hout;
    f.probs = probs;
    if (mtp < 0) { /* a verify pass with the MTP layer after it */
        f.mtp = 0;
        f.mtp_tail = 1;
        f.mtp_sampled = st->md;
        f.mtp_hout = st->mh;
    }
    if (mtp <= 0) /* the sequence's ids (the penalties read them) */
        memcpy(s->toks + pos0, ids, (size_t)n * sizeof(int32_t));
    int rc = rt_forward(s->m, &f);
    if (st->busy)
        *st->busy += f.busy_ns;
    if (st->macs)
        *st->macs += f.macs;
    return rc;
}

/* The MTP layer over rows pos0 .. pos0 + n - 1 (hidden rows hin, next ids):
 * its cache there, and the draft after the last row into *d (its
 * probability *dp), its output row into st->g */
static int mtp_pass(struct spec_state *st, const int32_t *next, int n, int pos0, const float *hin,
                    int32_t *d, float *dp)
{
    float *out = malloc((size_t)n * st->D * sizeof(float));
    if (!out)
        return tx_error(TX_ENOMEM, "speculative decoding: out of memory");
    int rc = pass(st, next, n, pos0, n - 1, 1, st->greedy, d, 0, 1, hin, out, dp);
    if (!rc)
        memcpy(st->g, out + (size_t)(n - 1) * st->D, (size_t)st->D * sizeof(float));
    free(out);
    return rc;
}

/* The drafts of the round at position P with current token t, at most k,
 * into st->d[0..*kk). MTP: d[0] came with the last MTP pass (st->have_d1),
 * then chained passes; a draft less probable (to the MTP layer) than
 * st->p_min is dropped and ends the chain (llama.cpp's --draft-p-min).
 * Test modes: the main model's own choices by single-token passes that are
 * rolled back afterwards. */
static int draft(struct spec_state *st, int P, int32_t t, int k, int *kk)
{
    *kk = k;
    glm_session_t *s = st->s;
    if (st->mode == GLM_SPEC_PERFECT || st->mode == GLM_SPEC_WRONG) {
        int32_t in = t;
        for (int i = 0; i < k; i++) {
            int rc =
                pass(st, &in, 1, P + i, 0, 1, &st->p->sampling, &st->d[i], 0, 0, NULL, NULL, NULL);
            if (rc)
                return rc;
            in = st->d[i];
        }
        if (st->mode == GLM_SPEC_WRONG) {
            int V = rt_sample_vocab(s->m);
            for (int i = 0; i < k; i++)
                st->d[i] = (st->d[i] + 1) % V;
        }
        return TX_OK;
    }
    if (!st->have_d1) { /* after steps without drafting: from the last main row */
        int rc = mtp_pass(st, &t, 1, P - 1, st->h, &st->d[0], &st->dp[0]);
        if (rc)
            return rc;
    }
    for (int i = 0; i < k; i++) {
        if (st->dp[i] < st->p_min) {
            *kk = i;
            break;
        }
        if (i == k - 1)
            break;
        float *hin = malloc((size_t)st->D * sizeof(float));
        if (!hin)
            return tx_error(TX_ENOMEM, "speculative decoding: out of memory");
        memcpy(hin, st->g, (size_t)st->D * sizeof(float));
        int rc = mtp_pass(st, &st->d[i], 1, P + i, hin, &st->d[i + 1], &st->dp[i + 1]);
        free(hin);
        if (rc)
            return rc;
    }
    return TX_OK;
}

/* Evaluate the prompt (its last row samples *tok) keeping every row's hidden
 * state, then run the MTP layer over it: its cache, and d1. */
int rt_spec_prompt(struct spec_state *st, const int32_t *prompt, int n, int32_t *tok)
{
    glm_session_t *s = st->s;
    int D = st->D, P0 = s->pos;
    float *H = malloc((size_t)n * D * sizeof(float));
    int32_t *next = malloc((size_t)n * sizeof(int32_t));
    if (!H || !next) {
        free(H);
        free(next);
        return tx_error(TX_ENOMEM, "speculative decoding: out of memory");
    }
    int rc = TX_OK;
    for (int done = 0; done < n && !rc;) {
        int c = n - done < s->n_batch ? n - done : s->n_batch;
        int last = done + c == n;
        rc = pass(st, prompt + done, c, s->pos, last ? c - 1 : 0, last ? 1 : 0,
                  last ? &st->p->sampling : NULL, tok, 0, 0, NULL, H + (size_t)done * D, NULL);
        if (!rc)
            s->pos += c;
        done += c;
    }
    if (!rc && st->mode == GLM_SPEC_MTP) {
        memcpy(next, prompt + 1, (size_t)(n - 1) * sizeof(int32_t));
        next[n - 1] = *tok;
        for (int done = 0; done < n && !rc;) {
            int c = n - done < s->n_batch ? n - done : s->n_batch;
            rc = mtp_pass(st, next + done, c, P0 + done, H + (size_t)done * D, &st->d[0],
                          &st->dp[0]);
            done += c;
        }
        st->have_d1 = !rc;
    }
    if (!rc)
        memcpy(st->h, H + (size_t)(n - 1) * D, (size_t)D * sizeof(float));
    free(H);
    free(next);
    return rc;
}

/* One step from the current token t at position s->pos: a verify round of
 * k drafts (or a plain step when drafting is off or k is 0). The tokens it
 * yields go to y[0..*ny) (the last one is the next current token). */
int rt_spec_step(struct spec_state *st, int32_t t, int k, int32_t *y, int *ny)
{
    glm_session_t *s = st->s;
    int P = s->pos, D = st->D;
    int adapt = !(st->p->spec_mode & GLM_SPEC_NO_ADAPT);
    *ny = 0;
    if (k > st->k)
        k = st->k;
    if (k > s->n_ctx - P - 1)
        k = s->n_ctx - P - 1;
    if (k < 1 || st->off_left > 0) {
        /* plain decode: the last hidden row is kept for the next draft */
        int rc = pass(st, &t, 1, P, 0, 1, &st->p->sampling, &y[0], 0, 0, NULL, st->h, NULL);
        if (rc)
            return rc;
        s->pos = P + 1;
        *ny = 1;
        st->have_d1 = 0;
        if (st->off_left > 0) {
            st->off_left--;
            s->spec.plain_steps++;
        }
        return TX_OK;
    }
    int kr = k; /* asked for; k: the drafts kept (--draft-p-min) */
    int rc = draft(st, P, t, kr, &k);
    if (rc)
        return rc;
    int32_t ids[GLM_SPEC_MAX_DRAFT + 1];
    ids[0] = t;
    memcpy(ids + 1, st->d, (size_t)k * sizeof(int32_t));
    /* fused: the MTP layer over the k + 1 rows in the same job (its rows
     * past the accepted ones are rolled back with the rest) */
    rc = pass(st, ids, k + 1, P, 0, k + 1, &st->p->sampling, y, 1, st->fused ? -1 : 0, NULL,
              st->h, st->fused ? st->mp : NULL);
    if (rc)
        return rc;
    int j = 0;
    while (j < k && y[j] == st->d[j])
        j++;
    /* rollback: positions P + j + 1 .. P + k are forgotten */
    s->pos = P + j + 1;
    *ny = j + 1;
    s->spec.rounds++;
    s->spec.drafted += (uint64_t)k;
    s->spec.accepted += (uint64_t)j;
    s->spec.emitted += (uint64_t)(j + 1);
    if (st->fused) {
        /* the next d1: the MTP layer's draft after row j */
        st->d[0] = st->md[j];
        st->dp[0] = st->mp[j];
        memcpy(st->g, st->mh + (size_t)j * D, (size_t)D * sizeof(float));
        st->have_d1 = 1;
    } else if (st->mode == GLM_SPEC_MTP) {
        /* the MTP layer over the kept rows: its cache, and the next d1 */
        rc = mtp_pass(st, y, j + 1, P, st->h, &st->d[0], &st->dp[0]);
        if (rc)
            return rc;
        st->have_d1 = 1;
    }
    /* keep the last kept row's hidden state first (a plain step or a
     * re-start drafts from it) */
    memmove(st->h, st->h + (size_t)j * D, (size_t)D * sizeof(float));
    if (adapt) {
        st->win_rounds++;
        st->win_drafted += kr; /* drafts dropped for --draft-p-min count as rejected */
        st->win_accepted += j;
        if (st->win_rounds >= SPEC_WINDOW) {
            if (st->win_accepted < SPEC_P_MIN * st->win_drafted) {
                st->off_left = st->off_len;
                st->off_len = st->off_len * 2 < SPEC_OFF_MAX ? st->off_len * 2 : SPEC_OFF_MAX;
                s->spec.off_switches++;
            } else {
                st->off_len = SPEC_OFF_STEPS;
            }
            st->win_rounds = st->win_drafted = st->win_accepted = 0;
        }
    }
    return TX_OK;
}

int rt_spec_begin(glm_session_t *s, const struct glm_generate_params *p, uint64_t *busy,
                  uint64_t *macs, const int32_t *ban, int n_ban, struct spec_state **out)
{
    glm_model_t *m = s->m;
    int mode = p->spec_mode & GLM_SPEC_MODE_MASK;
    if (p->spec_draft_max < 0 || p->spec_draft_max > GLM_SPEC_MAX_DRAFT)
        return tx_error(TX_EINVAL, "glm_generate: spec_draft_max %d is outside [0, %d]",
                        p->spec_draft_max, GLM_SPEC_MAX_DRAFT);
    if (mode > GLM_SPEC_WRONG || (p->spec_mode & ~(GLM_SPEC_MODE_MASK | GLM_SPEC_NO_ADAPT)))
        return tx_error(TX_EINVAL, "glm_generate: unknown spec_mode 0x%x", p->spec_mode);
    if (isnan(p->spec_p_min) || p->spec_p_min > 1.0f)
        return tx_error(TX_EINVAL, "glm_generate: spec_p_min %g is not a probability (<= 1; 0: "
                                   "the default, < 0: off)",
                        (double)p->spec_p_min);
    if (mode == GLM_SPEC_MTP && !m->mtp)
        return tx_error(TX_ENOTSUP,
                        "speculative decoding with the MTP layer: the model was not loaded "
                        "with it (GLM_LOAD_MTP, and a package glm-export wrote from a checkpoint "
                        "with a complete MTP layer, without --no-mtp)");
    struct spec_state *st = calloc(1, sizeof(*st));
    int D = m->cfg.hidden_size;
    if (st) {
        st->h = calloc((size_t)(GLM_SPEC_MAX_DRAFT + 1) * D, sizeof(float));
        st->g = calloc((size_t)D, sizeof(float));
        st->mh = calloc((size_t)(GLM_SPEC_MAX_DRAFT + 1) * D, sizeof(float));
        st->md = calloc(GLM_SPEC_MAX_DRAFT + 1, sizeof(int32_t));
        st->mp = calloc(GLM_SPEC_MAX_DRAFT + 1, sizeof(float));
    }
    static const struct glm_sampling greedy = {0};
    if (!st || !st->h || !st->g || !st->mh || !st->md || !st->mp) {
        rt_spec_end(st);
        return tx_error(TX_ENOMEM, "speculative decoding: out of memory");
    }
    st->s = s;
    st->p = p;
    st->greedy = &greedy;
    st->k = p->spec_draft_max;
    st->mode = mode;
    st->D = D;
    st->off_len = SPEC_OFF_STEPS;
    /* the MTP layer in the verify pass's job where the pass may run as a
     * recorded graph (the resident store); else its own pass after it */
    st->fused = mode == GLM_SPEC_MTP && m->store->decode_graph;
    /* llama.cpp's --draft-p-min (GLM_SPEC_NO_ADAPT: none) */
    st->p_min = p->spec_mode & GLM_SPEC_NO_ADAPT ? 0.0f
                : p->spec_p_min == 0.0f          ? GLM_SPEC_P_MIN_DEFAULT
                : p->spec_p_min < 0.0f           ? 0.0f
                                                 : p->spec_p_min;
    st->busy = busy;
    st->macs = macs;
    st->ban = ban;
    st->n_ban = n_ban;
    *out = st;
    return TX_OK;
}

void rt_spec_end(struct spec_state *st)
{
    if (!st)
        return;
    free(st->h);
    free(st->g);
    free(st->mh);
    free(st->md);
    free(st->mp);
    free(st);
}

TX_API int glm_session_spec_stats(const glm_session_t *s, struct glm_spec_stats *out)
{
    if (!s || !out)
        return tx_error(TX_EINVAL, "glm_session_spec_stats: NULL argument");
    pthread_mutex_lock(&s->m->lock);
    *out = s->spec;
    pthread_mutex_unlock(&s->m->lock);
    return TX_OK;
}

TX_API int glm_model_has_mtp(const glm_model_t *m)
{
    return m && m->mtp ? 1 : 0;
}
