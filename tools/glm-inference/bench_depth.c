/* SPDX-License-Identifier: MIT */
/*
 * glm-inference --bench-depth 0,2048,8192: llama-bench -d style rows. At
 * each depth d a session is filled with d tokens (not timed), then
 *   pp N @ dD: one prefill of --bench-pp tokens after the d cached ones;
 *   tg N @ dD: --bench-tg single-token decode passes after the d cached
 *              ones (the pp tokens truncated away first).
 * Each row gives tokens/s, the ratio against depth 0, the KV-cache bytes
 * per token (this session's cache under the plan's cache types), the
 * bytes one decode step reads (weights + the KV rows it reads at the
 * row's mean context) and that as a fraction of the measured read
 * bandwidth. Docs: docs/glm-inference.md ("Depth benchmark").
 */
#include "bench_depth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int bench_list_parse(const char *opt, const char *what, const char *s, int lo, int hi, int *v,
                     int max, int *n, char *err, size_t errsz)
{
    *n = 0;
    const char *p = s;
    if (!s || !*s) {
        snprintf(err, errsz, "%s: empty list (e.g. %s)", opt, what);
        return -1;
    }
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < lo || x > hi || (*end && *end != ',')) {
            snprintf(err, errsz, "%s: '%s': expected %s separated by commas", opt, s, what);
            return -1;
        }
        if (*n == max) {
            snprintf(err, errsz, "%s: at most %d values", opt, max);
            return -1;
        }
        v[(*n)++] = (int)x;
        p = *end ? end + 1 : end;
        if (*end && !*p) {
            snprintf(err, errsz, "%s: '%s': trailing comma", opt, s);
            return -1;
        }
    }
    return 0;
}

int bench_depth_parse(const char *s, int *depths, int max, int *n, char *err, size_t errsz)
{
    return bench_list_parse("--bench-depth", "depths >= 0", s, 0, 1 << 24, depths, max, n, err,
                            errsz);
}

static void fill_ids(int32_t *ids, int n, int vocab, uint64_t *seed)
{
    for (int i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((*seed >> 33) % (uint64_t)vocab);
    }
}

/* one depth's session and its measurements over the rounds */
struct depth_row {
    int d, n_ctx;
    glm_session_t *s;
    double kvpt;              /* this session's KV-cache bytes per position */
    double pps[BENCH_REPS_MAX], tgs[BENCH_REPS_MAX];
    uint64_t pa_pp, pd_pp, pa_tg, pd_tg; /* attention pairs executed / dense */
    struct glm_decode_times dt;          /* the tg passes' times, summed */
};

/* the session of r->d cached tokens: warm-up (weight conversions for the
 * plan, and the device's scratch grown to a pass of pp tokens: else the pp
 * row pays for first-touch pages), then the context; 0 or 1 */
static int depth_open(glm_model_t *m, struct depth_row *r, const int32_t *ids, int pp, int span,
                      int n_batch, float *lg, const char *prog)
{
    const struct glm_config *c = glm_model_config(m);
    struct glm_session_options so = {.n_ctx = r->d + span + 8, .n_batch = n_batch};
    if (c->max_position_embeddings > 0 && so.n_ctx > c->max_position_embeddings)
        so.n_ctx = c->max_position_embeddings;
    struct glm_model_info m0, m1;
    glm_model_info(m, &m0);
    if (glm_session_create(m, &so, &r->s)) {
        fprintf(stderr, "%s: --bench-depth %d: session: %s\n", prog, r->d, tx_last_error());
        return 1;
    }
    glm_model_info(m, &m1);
    r->n_ctx = so.n_ctx;
    r->kvpt = (double)(m1.kv_bytes - m0.kv_bytes) / (double)so.n_ctx;
    if (glm_eval(r->s, ids, pp, 0, lg) || glm_session_reset(r->s) ||
        (r->d > 0 && glm_eval(r->s, ids, r->d, 0, lg))) {
        fprintf(stderr, "%s: --bench-depth %d: filling the context: %s\n", prog, r->d,
                tx_last_error());
        return 1;
    }
    return 0;
}

/* round k at depth r->d: pp tokens after the d cached ones, truncated
 * away; tg single-token decode passes, truncated away; 0 or 1 */
static int depth_round(glm_model_t *m, struct depth_row *r, int k, const int32_t *ids, int pp,
                       int tg, float *lg, const char *prog)
{
    struct glm_sampling greedy = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
    int d = r->d;
    uint64_t pa0 = 0, pd0 = 0, pa1 = 0, pd1 = 0, pa2 = 0, pd2 = 0;
    glm_session_attention_stats(r->s, &pa0, &pd0);
    double t0 = now_ms();
    if (glm_eval(r->s, ids + d, pp, 0, lg)) {
        fprintf(stderr, "%s: --bench-depth %d: pp: %s\n", prog, d, tx_last_error());
        return 1;
    }
    double pp_ms = now_ms() - t0;
    glm_session_attention_stats(r->s, &pa1, &pd1);
    if (glm_session_truncate(r->s, d)) {
        fprintf(stderr, "%s: --bench-depth %d: truncate: %s\n", prog, d, tx_last_error());
        return 1;
    }
    int32_t next = 0;
    struct glm_decode_times dt0, dt1;
    glm_model_decode_times(m, &dt0);
    t0 = now_ms();
    for (int j = 0; j < tg; j++)
        if (glm_decode_batch(&r->s, &ids[d + j], 1, NULL, &greedy, &next)) {
            fprintf(stderr, "%s: --bench-depth %d: tg: %s\n", prog, d, tx_last_error());
            return 1;
        }
    double tg_ms = now_ms() - t0;
    glm_model_decode_times(m, &dt1);
    glm_session_attention_stats(r->s, &pa2, &pd2);
    if (glm_session_truncate(r->s, d)) {
        fprintf(stderr, "%s: --bench-depth %d: truncate: %s\n", prog, d, tx_last_error());
        return 1;
    }
    r->pps[k] = pp * 1e3 / pp_ms;
    r->tgs[k] = tg * 1e3 / tg_ms;
    r->pa_pp += pa1 - pa0;
    r->pd_pp += pd1 - pd0;
    r->pa_tg += pa2 - pa1;
    r->pd_tg += pd2 - pd1;
    r->dt.passes += dt1.passes - dt0.passes;
    r->dt.jobs += dt1.jobs - dt0.jobs;
    r->dt.replays += dt1.replays - dt0.replays;
    r->dt.wall_ms += dt1.wall_ms - dt0.wall_ms;
    r->dt.device_ms += dt1.device_ms - dt0.device_ms;
    r->dt.build_ms += dt1.build_ms - dt0.build_ms;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the median of v[0 .. n) (sorted in place), its range in lo / hi */
static double median(double *v, int n, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    *lo = v[0];
    *hi = v[n - 1];
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* "0.88" (one round) or "0.88 [0.84-0.91]": the median of the rounds'
 * ratios row / depth 0 and their range */
static void ratio_cell(char *buf, size_t sz, const double *row, const double *base, int reps)
{
    double q[BENCH_REPS_MAX], lo, hi;
    for (int k = 0; k < reps; k++)
        q[k] = row[k] / base[k];
    double med = median(q, reps, &lo, &hi);
    if (reps == 1)
        snprintf(buf, sz, "%.2f", med);
    else
        snprintf(buf, sz, "%.2f [%.2f-%.2f]", med, lo, hi);
}

int bench_depth_run(glm_model_t *m, tx_device_t *dev, const int *depths, int nd, int pp, int tg,
                    int reps, int n_batch, int threads, const char *prog)
{
    const struct glm_config *c = glm_model_config(m);
    struct tx_device_info di;
    tx_device_info(dev, &di);
    struct glm_read_bandwidth rb;
    double bw = 0;
    if (!glm_probe_read_bandwidth(m, threads, 5, &rb) && !rb.refused[0])
        bw = rb.gbs;
    glm_precision_plan_t plan;
    glm_plan_get(dev, &plan);
    char planbuf[256];
    glm_plan_format(&plan, planbuf, sizeof(planbuf));
    if (reps < 1 || reps > BENCH_REPS_MAX)
        reps = 1;
    int maxd = 0;
    for (int i = 0; i < nd; i++)
        maxd = depths[i] > maxd ? depths[i] : maxd;
    int span = pp > tg ? pp : tg;
    if (c->max_position_embeddings > 0 && maxd + span + 1 > c->max_position_embeddings) {
        fprintf(stderr,
                "%s: --bench-depth: depth %d + %d tokens exceeds the model's "
                "max_position_embeddings %d\n",
                prog, maxd, span, c->max_position_embeddings);
        return 1;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(maxd + span + 1));
    float *lg = malloc(sizeof(float) * (size_t)c->vocab_size);
    struct depth_row *rows = calloc((size_t)nd, sizeof(*rows));
    if (!ids || !lg || !rows) {
        free(ids);
        free(lg);
        free(rows);
        fprintf(stderr, "%s: --bench-depth: out of memory\n", prog);
        return 1;
    }
    uint64_t seed = 12345;
    fill_ids(ids, maxd + span + 1, c->vocab_size, &seed);
    int rc = 0;
    for (int i = 0; i < nd; i++)
        rows[i].d = depths[i];
    if (reps == 1) {
        /* one depth at a time: one session alive */
        for (int i = 0; i < nd && !rc; i++) {
            rc = depth_open(m, &rows[i], ids, pp, span, n_batch, lg, prog) ||
                 depth_round(m, &rows[i], 0, ids, pp, tg, lg, prog);
            glm_session_free(rows[i].s);
            rows[i].s = NULL;
        }
    } else {
        /* every depth's session alive; each round runs every depth in
         * turn, so that a round's ratios see the same host load */
        for (int i = 0; i < nd && !rc; i++)
            rc = depth_open(m, &rows[i], ids, pp, span, n_batch, lg, prog);
        for (int k = 0; k < reps && !rc; k++)
            for (int i = 0; i < nd && !rc; i++)
                rc = depth_round(m, &rows[i], k, ids, pp, tg, lg, prog);
        for (int i = 0; i < nd; i++)
            glm_session_free(rows[i].s);
    }
    if (rc) {
        free(ids);
        free(lg);
        free(rows);
        return rc;
    }

    printf("plan: %s\n", planbuf);
    if (reps > 1)
        printf("%d rounds, each running every depth in turn: t/s the median of the rounds, vs d0 "
               "the median of the rounds' ratios [their range]\n",
               reps);
    printf("| model | backend | test | t/s | vs d0 | KV/token | attn MACs vs dense | "
           "weights+KV read/token | GB/s | %% of BW |\n");
    printf("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    const struct depth_row *r0 = NULL;
    for (int i = 0; i < nd; i++)
        if (rows[i].d == 0) {
            r0 = &rows[i];
            break;
        }
    struct glm_model_info mi;
    glm_model_info(m, &mi);
    for (int i = 0; i < nd; i++) {
        struct depth_row *r = &rows[i];
        int d = r->d;
        char r_pp[40] = "-", r_tg[40] = "-", pct[16] = "-", m_pp[16] = "-", m_tg[16] = "-";
        if (r0) {
            ratio_cell(r_pp, sizeof(r_pp), r->pps, r0->pps, reps);
            ratio_cell(r_tg, sizeof(r_tg), r->tgs, r0->tgs, reps);
        }
        double lo, hi, sorted[BENCH_REPS_MAX];
        memcpy(sorted, r->pps, sizeof(double) * (size_t)reps);
        double pps = median(sorted, reps, &lo, &hi);
        memcpy(sorted, r->tgs, sizeof(double) * (size_t)reps);
        double tgs = median(sorted, reps, &lo, &hi);
        /* a decode step at mean context d + tg/2 reads every cached row
         * once (an upper bound where DSA selects: attention then reads
         * index_topk latent rows, the indexer every key) */
        double kv_read = r->kvpt * (d + tg / 2.0);
        double bpt = (double)mi.decode_bytes_per_token + kv_read;
        if (bw > 0)
            snprintf(pct, sizeof(pct), "%.1f%%", 100.0 * bpt * tgs / 1e9 / bw);
        if (r->pd_pp)
            snprintf(m_pp, sizeof(m_pp), "%.1f%%", 100.0 * (double)r->pa_pp / (double)r->pd_pp);
        if (r->pd_tg)
            snprintf(m_tg, sizeof(m_tg), "%.1f%%", 100.0 * (double)r->pa_tg / (double)r->pd_tg);
        printf("| %s | TX8 %s | pp%d @ d%d | %.2f | %s | %.0f B | %s | - | - | - |\n",
               glm_model_name(m), di.backend, pp, d, pps, r_pp, r->kvpt, m_pp);
        printf("| %s | TX8 %s | tg%d @ d%d | %.2f | %s | %.0f B | %s | %.2f MB | %.2f | %s |\n",
               glm_model_name(m), di.backend, tg, d, tgs, r_tg, r->kvpt, m_tg, bpt / 1e6,
               bpt * tgs / 1e9, pct);
    }
    if (bw > 0)
        printf("\nread bandwidth %.2f GB/s; decode fraction = (weight bytes + KV bytes read) per "
               "token x tokens/s / read bandwidth\n",
               bw);
    else
        printf("\nread bandwidth not measured (%s): no decode fraction\n", rb.refused);
    printf("decode passes (glm_model_decode_times%s):\n", reps > 1 ? ", all rounds" : "");
    for (int i = 0; i < nd; i++) {
        const struct glm_decode_times *t = &rows[i].dt;
        if (!t->passes)
            continue;
        double np = (double)t->passes;
        printf("  tg%d @ d%d: %.2f ms/token wall, device %.2f, host %.2f (until the first "
               "submission %.2f), %.1f jobs/token, decode graph %llu of %llu passes\n",
               tg, rows[i].d, t->wall_ms / np, t->device_ms / np,
               (t->wall_ms - t->device_ms) / np, t->build_ms / np, (double)t->jobs / np,
               (unsigned long long)t->replays, (unsigned long long)t->passes);
    }
    fflush(stdout);
    free(ids);
    free(lg);
    free(rows);
    return 0;
}
