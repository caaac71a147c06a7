/* SPDX-License-Identifier: MIT */
/*
 * glm-inference --bench-spec 1,2,3,4: MTP speculative decoding's tg speed
 * against non-speculative decoding, side by side in one run (issue 39,
 * docs/speculative-decoding.md). Every round runs each mode once at each
 * depth, so the host's load falls on all of them alike; a row gives the
 * median t/s, the ratio to k = 0 (the median of the rounds' ratios), the
 * acceptance, the mean accepted length, and whether the tokens equal the
 * non-speculative ones.
 */
#include "bench_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_error.h>

#define SPEC_PROMPT 32 /* prompt tokens after the depth */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* one generation of tg tokens after the prompt; t/s of the eval, tokens */
static int one(glm_session_t *s, const int32_t *prompt, int np, int tg, int k, double *tps,
               int32_t *out, struct glm_spec_stats *st)
{
    if (glm_session_reset(s))
        return -1;
    struct glm_generate_params gp;
    memset(&gp, 0, sizeof(gp));
    gp.prompt = prompt;
    gp.n_prompt = np;
    gp.n_predict = tg;
    gp.flags = GLM_GEN_IGNORE_EOS;
    gp.spec_draft_max = k;
    struct glm_spec_stats a, b;
    glm_session_spec_stats(s, &a);
    struct glm_timings t;
    int n = 0;
    if (glm_generate(s, &gp, out, tg, &n, &t))
        return -1;
    glm_session_spec_stats(s, &b);
    st->rounds += b.rounds - a.rounds;
    st->drafted += b.drafted - a.drafted;
    st->accepted += b.accepted - a.accepted;
    st->emitted += b.emitted - a.emitted;
    *tps = t.eval_tps;
    return n;
}

int bench_spec_run(glm_model_t *m, const char *text, const int *ks, int nk, const int *depths,
                   int nd, int tg, int reps, const char *prog)
{
    int32_t *ids = NULL;
    size_t nids = 0;
    int maxd = 0;
    for (int i = 0; i < nd; i++)
        maxd = depths[i] > maxd ? depths[i] : maxd;
    if (!text || glm_tokenize(m, text, &ids, &nids)) {
        fprintf(stderr, "%s: --bench-spec: a text is needed (-f FILE or -p TEXT)%s%s\n", prog,
                text ? ": " : "", text ? tx_last_error() : "");
        return 1;
    }
    if (nids < (size_t)(maxd + SPEC_PROMPT)) {
        fprintf(stderr, "%s: --bench-spec: the text has %zu tokens, depth %d needs %d\n", prog,
                nids, maxd, maxd + SPEC_PROMPT);
        free(ids);
        return 1;
    }
    int nm = nk + 1; /* k = 0 (non-speculative), then ks */
    struct glm_session_options so;
    memset(&so, 0, sizeof(so));
    so.n_ctx = maxd + SPEC_PROMPT + tg + 16;
    glm_session_t *s = NULL;
    double *tps = calloc((size_t)nd * nm * reps, sizeof(double));
    double *ratio = calloc((size_t)reps, sizeof(double));
    int32_t *ref = calloc((size_t)nd * tg, sizeof(int32_t)), *out = calloc((size_t)tg, 4);
    struct glm_spec_stats *st = calloc((size_t)nd * nm, sizeof(*st));
    int *same = calloc((size_t)nd * nm, sizeof(int));
    int rc = 0;
    if (!tps || !ratio || !ref || !out || !st || !same) {
        fprintf(stderr, "%s: --bench-spec: out of memory\n", prog);
        rc = 1;
        goto done;
    }
    if (glm_session_create(m, &so, &s)) {
        fprintf(stderr, "%s: --bench-spec: session: %s\n", prog, tx_last_error());
        rc = 1;
        goto done;
    }
    for (int i = 0; i < nd * nm; i++)
        same[i] = 1;
    for (int r = 0; r < reps && !rc; r++)
        for (int d = 0; d < nd && !rc; d++)
            for (int j = 0; j < nm && !rc; j++) {
                int k = j ? ks[j - 1] : 0;
                double v = 0;
                int n = one(s, ids, depths[d] + SPEC_PROMPT, tg, k, &v, j ? out : ref + (size_t)d * tg,
                            &st[d * nm + j]);
                if (n < 0) {
                    fprintf(stderr, "%s: --bench-spec: depth %d, k %d: %s\n", prog, depths[d], k,
                            tx_last_error());
                    rc = 1;
                    break;
                }
                tps[((size_t)d * nm + j) * reps + r] = v;
                if (j && memcmp(out, ref + (size_t)d * tg, (size_t)n * 4))
                    same[d * nm + j] = 0;
            }
    if (rc)
        goto done;
    printf("| depth | k | tg t/s | vs k=0 | acceptance | mean accepted length | tokens = k=0 |\n");
    printf("|---:|---:|---:|---:|---:|---:|:---:|\n");
    for (int d = 0; d < nd; d++)
        for (int j = 0; j < nm; j++) {
            const double *base = tps + (size_t)d * nm * reps;
            const double *row = tps + ((size_t)d * nm + j) * reps;
            for (int r = 0; r < reps; r++)
                ratio[r] = base[r] > 0 ? row[r] / base[r] : 0;
            double med_ratio = median(ratio, reps);
            double tmp[reps];
            memcpy(tmp, row, sizeof(tmp));
            const struct glm_spec_stats *x = &st[d * nm + j];
            if (!j)
                printf("| %d | 0 | %.1f | 1.00 | - | - | - |\n", depths[d], median(tmp, reps));
            else
                printf("| %d | %d | %.1f | %.2f | %.1f%% | %.2f | %s |\n", depths[d], ks[j - 1],
                       median(tmp, reps), med_ratio,
                       x->drafted ? 100.0 * (double)x->accepted / (double)x->drafted : 0.0,
                       x->rounds ? (double)x->emitted / (double)x->rounds : 0.0,
                       same[d * nm + j] ? "yes" : "no");
        }
    fflush(stdout);
done:
    if (s)
        glm_session_free(s);
    free(ids);
    free(tps);
    free(ratio);
    free(ref);
    free(out);
    free(st);
    free(same);
    return rc;
}
