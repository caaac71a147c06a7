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

int bench_depth_parse(const char *s, int *depths, int max, int *n, char *err, size_t errsz)
{
    *n = 0;
    const char *p = s;
    if (!s || !*s) {
        snprintf(err, errsz, "--bench-depth: empty list (e.g. 0,2048,8192)");
        return -1;
    }
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > (1 << 24) || (*end && *end != ',')) {
            snprintf(err, errsz, "--bench-depth: '%s': expected depths >= 0 separated by commas",
                     s);
            return -1;
        }
        if (*n == max) {
            snprintf(err, errsz, "--bench-depth: at most %d depths", max);
            return -1;
        }
        depths[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
        if (*end && !*p) {
            snprintf(err, errsz, "--bench-depth: '%s': trailing comma", s);
            return -1;
        }
    }
    return 0;
}

static void fill_ids(int32_t *ids, int n, int vocab, uint64_t *seed)
{
    for (int i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((*seed >> 33) % (uint64_t)vocab);
    }
}

int bench_depth_run(glm_model_t *m, tx_device_t *dev, const int *depths, int nd, int pp, int tg,
                    int n_batch, int threads, const char *prog)
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
    if (!ids || !lg) {
        free(ids);
        free(lg);
        fprintf(stderr, "%s: --bench-depth: out of memory\n", prog);
        return 1;
    }
    uint64_t seed = 12345;
    fill_ids(ids, maxd + span + 1, c->vocab_size, &seed);
    printf("plan: %s\n", planbuf);
    printf("| model | backend | test | t/s | vs d0 | KV/token | attn MACs vs dense | "
           "weights+KV read/token | GB/s | %% of BW |\n");
    printf("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    double pp0 = 0, tg0 = 0;
    int rc = 0;
    char host_lines[16][256];
    int n_host = 0;
    struct glm_sampling greedy = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
    for (int i = 0; i < nd && !rc; i++) {
        int d = depths[i];
        struct glm_session_options so = {.n_ctx = d + span + 8, .n_batch = n_batch};
        if (c->max_position_embeddings > 0 && so.n_ctx > c->max_position_embeddings)
            so.n_ctx = c->max_position_embeddings;
        glm_session_t *s = NULL;
        if (glm_session_create(m, &so, &s)) {
            fprintf(stderr, "%s: --bench-depth %d: session: %s\n", prog, d, tx_last_error());
            rc = 1;
            break;
        }
        /* warm-up (weight conversions for the plan, and the device's
         * scratch grown to a pass of pp tokens: else the pp row pays for
         * first-touch pages), then the context */
        if (glm_eval(s, ids, pp, 0, lg) || glm_session_reset(s) ||
            (d > 0 && glm_eval(s, ids, d, 0, lg))) {
            fprintf(stderr, "%s: --bench-depth %d: filling the context: %s\n", prog, d,
                    tx_last_error());
            glm_session_free(s);
            rc = 1;
            break;
        }
        uint64_t pa0 = 0, pd0 = 0, pa1 = 0, pd1 = 0, pa2 = 0, pd2 = 0;
        glm_session_attention_stats(s, &pa0, &pd0);
        double t0 = now_ms();
        if (glm_eval(s, ids + d, pp, 0, lg)) {
            fprintf(stderr, "%s: --bench-depth %d: pp: %s\n", prog, d, tx_last_error());
            rc = 1;
        }
        double pp_ms = now_ms() - t0;
        glm_session_attention_stats(s, &pa1, &pd1);
        if (!rc && glm_session_truncate(s, d)) {
            fprintf(stderr, "%s: --bench-depth %d: truncate: %s\n", prog, d, tx_last_error());
            rc = 1;
        }
        int32_t next = 0;
        struct glm_decode_times dt0, dt1;
        glm_model_decode_times(m, &dt0);
        t0 = now_ms();
        for (int j = 0; j < tg && !rc; j++)
            if (glm_decode_batch(&s, &ids[d + j], 1, NULL, &greedy, &next)) {
                fprintf(stderr, "%s: --bench-depth %d: tg: %s\n", prog, d, tx_last_error());
                rc = 1;
            }
        double tg_ms = now_ms() - t0;
        glm_model_decode_times(m, &dt1);
        glm_session_attention_stats(s, &pa2, &pd2);
        struct glm_model_info mi;
        glm_model_info(m, &mi);
        glm_session_free(s);
        if (rc)
            break;
        /* the KV cache of this session (the only one) per position */
        double kvpt = (double)mi.kv_bytes / (double)so.n_ctx;
        double pps = pp * 1e3 / pp_ms, tgs = tg * 1e3 / tg_ms;
        if (d == 0 && pp0 == 0) {
            pp0 = pps;
            tg0 = tgs;
        }
        /* a decode step at mean context d + tg/2 reads every cached row
         * once (an upper bound where DSA selects: attention then reads
         * index_topk latent rows, the indexer every key) */
        double kv_read = kvpt * (d + tg / 2.0);
        double bpt = (double)mi.decode_bytes_per_token + kv_read;
        char r_pp[16] = "-", r_tg[16] = "-", pct[16] = "-";
        if (pp0 > 0)
            snprintf(r_pp, sizeof(r_pp), "%.2f", pps / pp0);
        if (tg0 > 0)
            snprintf(r_tg, sizeof(r_tg), "%.2f", tgs / tg0);
        if (bw > 0)
            snprintf(pct, sizeof(pct), "%.1f%%", 100.0 * bpt * tgs / 1e9 / bw);
        char m_pp[16] = "-", m_tg[16] = "-";
        if (pd1 > pd0)
            snprintf(m_pp, sizeof(m_pp), "%.1f%%", 100.0 * (pa1 - pa0) / (double)(pd1 - pd0));
        if (pd2 > pd1)
            snprintf(m_tg, sizeof(m_tg), "%.1f%%", 100.0 * (pa2 - pa1) / (double)(pd2 - pd1));
        printf("| %s | TX8 %s | pp%d @ d%d | %.2f | %s | %.0f B | %s | - | - | - |\n",
               glm_model_name(m), di.backend, pp, d, pps, r_pp, kvpt, m_pp);
        printf("| %s | TX8 %s | tg%d @ d%d | %.2f | %s | %.0f B | %s | %.2f MB | %.2f | %s |\n",
               glm_model_name(m), di.backend, tg, d, tgs, r_tg, kvpt, m_tg, bpt / 1e6,
               bpt * tgs / 1e9, pct);
        fflush(stdout);
        uint64_t np = dt1.passes - dt0.passes;
        if (np && n_host < 16)
            snprintf(host_lines[n_host++], sizeof(host_lines[0]),
                     "tg%d @ d%d: %.2f ms/token wall, device %.2f, host %.2f (until the first "
                     "submission %.2f), %.1f jobs/token, decode graph %llu of %llu passes",
                     tg, d, (dt1.wall_ms - dt0.wall_ms) / np, (dt1.device_ms - dt0.device_ms) / np,
                     (dt1.wall_ms - dt0.wall_ms - dt1.device_ms + dt0.device_ms) / np,
                     (dt1.build_ms - dt0.build_ms) / np, (double)(dt1.jobs - dt0.jobs) / np,
                     (unsigned long long)(dt1.replays - dt0.replays), (unsigned long long)np);
    }
    if (bw > 0)
        printf("\nread bandwidth %.2f GB/s; decode fraction = (weight bytes + KV bytes read) per "
               "token x tokens/s / read bandwidth\n",
               bw);
    else
        printf("\nread bandwidth not measured (%s): no decode fraction\n", rb.refused);
    if (n_host)
        printf("decode passes (glm_model_decode_times):\n");
    for (int i = 0; i < n_host; i++)
        printf("  %s\n", host_lines[i]);
    free(ids);
    free(lg);
    return rc;
}
