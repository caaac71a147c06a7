/* SPDX-License-Identifier: MIT */
/*
 * glm-inference --bench-spec 1,2,3,4: MTP speculative decoding's tg speed
 * against non-speculative decoding, side by side in one run (issue 39,
 * docs/speculative-decoding.md). Every round runs each mode once at each
 * depth, so the host's load falls on all of them alike; a row gives the
 * median t/s, the ratio to k = 0 (the median of the rounds' ratios), the
 * ratio of the best rounds (each mode's fastest run against k = 0's: on a
 * shared host the least disturbed runs), the acceptance, the mean
 * accepted length, and whether the tokens equal the non-speculative ones.
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

static double best(const double *v, int n)
{
    double b = 0;
    for (int i = 0; i < n; i++)
        b = v[i] > b ? v[i] : b;
    return b;
}

/* one generation of tg tokens after the prompt: the prompt's pass samples
 * the first, then the timed call makes the other tg - 1 from it (eval t/s;
 * the device's busy time and the passes of that call per token, from the
 * model's pass counters) */
static int one(glm_model_t *m, glm_session_t *s, const int32_t *prompt, int np, int tg, int k,
               float p_min, double *tps, double *dev, double *npass, int32_t *out,
               struct glm_spec_stats *st)
{
    if (glm_session_reset(s))
        return -1;
    struct glm_generate_params gp;
    memset(&gp, 0, sizeof(gp));
    gp.prompt = prompt;
    gp.n_prompt = np;
    gp.n_predict = 1;
    gp.flags = GLM_GEN_IGNORE_EOS;
    gp.spec_draft_max = k;
    gp.spec_p_min = p_min;
    int n = 0;
    if (glm_generate(s, &gp, out, 1, &n, NULL) || n != 1)
        return -1;
    gp.prompt = out;
    gp.n_prompt = 1;
    gp.n_predict = tg - 1;
    struct glm_spec_stats a, b;
    struct glm_decode_times d0, d1, p0, p1;
    glm_session_spec_stats(s, &a);
    glm_model_decode_times(m, &d0);
    glm_model_prefill_times(m, &p0);
    struct glm_timings t;
    if (glm_generate(s, &gp, out + 1, tg - 1, &n, &t))
        return -1;
    glm_model_decode_times(m, &d1);
    glm_model_prefill_times(m, &p1);
    glm_session_spec_stats(s, &b);
    st->rounds += b.rounds - a.rounds;
    st->drafted += b.drafted - a.drafted;
    st->accepted += b.accepted - a.accepted;
    st->emitted += b.emitted - a.emitted;
    *tps = t.eval_tps;
    *dev = n ? (d1.device_ms - d0.device_ms + p1.device_ms - p0.device_ms) / n : 0;
    *npass = n ? (double)(d1.passes - d0.passes + p1.passes - p0.passes) / n : 0;
    return n + 1;
}

int bench_spec_run(glm_model_t *m, const char *text, const int *ks, int nk, const int *depths,
                   int nd, int tg, int reps, float p_min, const char *prog)
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
    double *dev = calloc((size_t)nd * nm * reps, sizeof(double));
    double *npass = calloc((size_t)nd * nm * reps, sizeof(double));
    double *ratio = calloc((size_t)reps, sizeof(double));
    int32_t *ref = calloc((size_t)nd * tg, sizeof(int32_t)), *out = calloc((size_t)tg, 4);
    struct glm_spec_stats *st = calloc((size_t)nd * nm, sizeof(*st));
    int *same = calloc((size_t)nd * nm, sizeof(int));
    int rc = 0;
    if (tg < 2) {
        fprintf(stderr, "%s: --bench-spec: --bench-tg must be at least 2\n", prog);
        rc = 1;
        goto done;
    }
    if (!tps || !dev || !npass || !ratio || !ref || !out || !st || !same) {
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
                double v = 0, dv = 0, np = 0;
                int n = one(m, s, ids, depths[d] + SPEC_PROMPT, tg, k, p_min, &v, &dv, &np,
                            j ? out : ref + (size_t)d * tg, &st[d * nm + j]);
                if (n < 0) {
                    fprintf(stderr, "%s: --bench-spec: depth %d, k %d: %s\n", prog, depths[d], k,
                            tx_last_error());
                    rc = 1;
                    break;
                }
                tps[((size_t)d * nm + j) * reps + r] = v;
                dev[((size_t)d * nm + j) * reps + r] = dv;
                npass[((size_t)d * nm + j) * reps + r] = np;
                if (j && memcmp(out, ref + (size_t)d * tg, (size_t)n * 4))
                    same[d * nm + j] = 0;
            }
    if (rc)
        goto done;
    printf("| depth | k | tg t/s | vs k=0 | best vs best k=0 | device ms/token | device: k=0 / k | "
           "passes/token | acceptance | mean accepted length | tokens = k=0 |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|\n");
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
            double b0 = best(base, reps), bj = best(row, reps);
            /* the device's share alone: k = 0's busy time per token over
             * this mode's, the median of the rounds (host round trips and
             * building excluded: what the mode could gain at best) */
            const double *dbase = dev + (size_t)d * nm * reps;
            const double *drow = dev + ((size_t)d * nm + j) * reps;
            double dr[reps], dm[reps], pm[reps];
            for (int r = 0; r < reps; r++) {
                dr[r] = drow[r] > 0 ? dbase[r] / drow[r] : 0;
                dm[r] = drow[r];
                pm[r] = npass[((size_t)d * nm + j) * reps + r];
            }
            if (!j)
                printf("| %d | 0 | %.1f | 1.00 | 1.00 | %.3f | 1.00 | %.2f | - | - | - |\n",
                       depths[d], median(tmp, reps), median(dm, reps), median(pm, reps));
            else
                printf("| %d | %d | %.1f | %.2f | %.2f | %.3f | %.2f | %.2f | %.1f%% | %.2f | %s |\n",
                       depths[d], ks[j - 1], median(tmp, reps), med_ratio, b0 > 0 ? bj / b0 : 0.0,
                       median(dm, reps), median(dr, reps), median(pm, reps),
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
    free(dev);
    free(npass);
    free(ratio);
    free(ref);
    free(out);
    free(st);
    free(same);
    return rc;
}
