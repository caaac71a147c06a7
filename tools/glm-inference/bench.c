/* SPDX-License-Identifier: MIT */
/*
 * glm-inference --bench: llama-bench's pp / tg rows per precision plan,
 * with the weight bytes per token and the fraction of the host's read
 * bandwidth (docs/glm-inference.md, "Benchmark").
 */
#include <stdlib.h>
#include <string.h>

#include "glm_inference.h"

int run_bench(glm_model_t *m, tx_device_t *dev, const struct opts *o)
{
    const struct glm_config *c = glm_model_config(m);
    struct glm_model_info mi;
    glm_model_info(m, &mi);
    struct tx_device_info di;
    tx_device_info(dev, &di);
    /* read probe: a working set of >= 4 x the host's LLC, or no figure */
    struct glm_read_bandwidth rb;
    if (glm_probe_read_bandwidth(m, o->threads, 5, &rb)) {
        log_err("bandwidth");
        return 1;
    }
    double bw = rb.gbs;
    if (rb.refused[0]) {
        fprintf(stderr, "%s: no read bandwidth, %% of BW not reported: %s\n", prog, rb.refused);
    } else {
        fprintf(stderr,
                "%s: read probe working set %.1f MiB (%s), >= 4 x the last-level cache "
                "%.1f MiB (%s)\n",
                prog, (double)rb.working_set / (1 << 20),
                rb.scratch ? "a scratch buffer" : "the weights", (double)rb.llc_bytes / (1 << 20),
                rb.llc_source);
        fprintf(stderr, "%s: streaming read bandwidth of device memory: %.2f GB/s (%d threads)\n",
                prog, bw, rb.threads);
    }
    int pp = o->bench_pp, tg = o->bench_tg;
    int n_ctx = pp + tg + 8;
    if (c->max_position_embeddings > 0 && n_ctx > c->max_position_embeddings)
        n_ctx = c->max_position_embeddings;
    char *plans = strdup(o->bench_plans ? o->bench_plans : "golden;fp32;fp16;int8");
    if (!plans)
        return 1;
    printf("| model | size | params | backend | plan | test | t/s | weights/token | GB/s | "
           "%% of BW |\n");
    printf("| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    glm_precision_plan_t saved;
    glm_plan_get(dev, &saved);
    int rc = 0;
    uint64_t seed = 12345;
    char *save = NULL;
    char host_lines[8][256];
    int n_host = 0;
    for (char *pl = strtok_r(plans, ";", &save); pl && !rc; pl = strtok_r(NULL, ";", &save)) {
        glm_precision_plan_t p;
        glm_plan_golden(&p);
        if (glm_plan_parse(pl, &p) || glm_plan_set(dev, &p)) {
            log_err(pl);
            rc = 1;
            break;
        }
        glm_model_trim(m);
        struct glm_session_options so = {.n_ctx = n_ctx, .n_batch = pp};
        glm_session_t *s;
        if (glm_session_create(m, &so, &s)) {
            log_err("session");
            rc = 1;
            break;
        }
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)(pp > tg ? pp : tg));
        for (int i = 0; i < (pp > tg ? pp : tg); i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int32_t)((seed >> 33) % (uint64_t)c->vocab_size);
        }
        float *lg = malloc(sizeof(float) * (size_t)c->vocab_size);
        struct glm_sampling greedy = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
        int32_t next = 0;
        struct glm_decode_times dt0, dt1;
        /* warm-up: weight conversions for this plan happen here, and a
         * prefill of pp tokens grows the device's scratch to its size
         * (else the timed prefill pays for first-touch pages) */
        if (!lg || glm_eval(s, ids, pp, 0, lg)) {
            log_err("warm-up");
            rc = 1;
        }
        glm_session_reset(s);
        /* pp: one prefill with the last position's logits (as generation) */
        double t0 = now_ms();
        if (!rc && glm_eval(s, ids, pp, 0, lg)) {
            log_err("pp");
            rc = 1;
        }
        double pp_ms = now_ms() - t0;
        glm_session_reset(s);
        /* tg: single-token passes from an empty context, each with the
         * lm_head and on-device sampling (only the token id comes back) */
        glm_model_decode_times(m, &dt0);
        t0 = now_ms();
        for (int i = 0; i < tg && !rc; i++)
            if (glm_decode_batch(&s, &ids[i], 1, NULL, &greedy, &next)) {
                log_err("tg");
                rc = 1;
            }
        double tg_ms = now_ms() - t0;
        glm_model_decode_times(m, &dt1);
        glm_session_free(s);
        free(ids);
        free(lg);
        if (rc)
            break;
        glm_model_info(m, &mi);
        char short_plan[200];
        snprintf(short_plan, sizeof(short_plan), "%s", pl);
        double size_gib = (double)mi.package_bytes / (1 << 30);
        double params_b = (double)mi.n_params / 1e9;
        double pps = pp * 1e3 / pp_ms, tgs = tg * 1e3 / tg_ms;
        double bpt = (double)mi.decode_bytes_per_token;
        printf("| %s | %.2f GiB | %.3f B | TX8 %s | %s | pp%d | %.2f | %.1f MB | %.2f | - |\n",
               glm_model_name(m), size_gib, params_b, di.backend, short_plan, pp, pps, bpt / 1e6,
               bpt * pps / 1e9);
        char pct[16] = "-";
        if (bw > 0)
            snprintf(pct, sizeof(pct), "%.1f%%", 100.0 * bpt * tgs / 1e9 / bw);
        printf("| %s | %.2f GiB | %.3f B | TX8 %s | %s | tg%d | %.2f | %.1f MB | %.2f | %s |\n",
               glm_model_name(m), size_gib, params_b, di.backend, short_plan, tg, tgs, bpt / 1e6,
               bpt * tgs / 1e9, pct);
        fflush(stdout);
        uint64_t np = dt1.passes - dt0.passes;
        if (np && n_host < 8)
            snprintf(host_lines[n_host++], sizeof(host_lines[0]),
                     "%.60s tg%d: %.2f ms/token wall, device %.2f, host %.2f (until the first "
                     "submission %.2f), %.1f jobs/token, decode graph %llu of %llu passes",
                     short_plan, tg, (dt1.wall_ms - dt0.wall_ms) / np,
                     (dt1.device_ms - dt0.device_ms) / np,
                     (dt1.wall_ms - dt0.wall_ms - dt1.device_ms + dt0.device_ms) / np,
                     (dt1.build_ms - dt0.build_ms) / np, (double)(dt1.jobs - dt0.jobs) / np,
                     (unsigned long long)(dt1.replays - dt0.replays), (unsigned long long)np);
    }
    if (bw > 0)
        printf("\nread bandwidth %.2f GB/s (working set %.1f MiB, >= 4 x LLC %.1f MiB); decode "
               "fraction = weight bytes per token x tokens/s / read bandwidth\n",
               bw, (double)rb.working_set / (1 << 20), (double)rb.llc_bytes / (1 << 20));
    else
        printf("\nread bandwidth not measured (%s): no decode fraction\n", rb.refused);
    if (n_host)
        printf("decode passes (glm_model_decode_times):\n");
    for (int i = 0; i < n_host; i++)
        printf("  %s\n", host_lines[i]);
    glm_plan_set(dev, &saved);
    free(plans);
    return rc;
}
