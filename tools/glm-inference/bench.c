/* SPDX-License-Identifier: MIT */
/*
 * glm-inference --bench: llama-bench on a TX8 (docs/glm-inference.md,
 * "--bench"). The tests are llama-bench's: for each precision plan and
 * each depth (-d), a prefill of each -p size (pp N), N single-token decode
 * passes for each -n size (tg N) and each -pg pair (pp N+tg M), each
 * repeated -r times after one warm-up; rows with the mean ± sd of the
 * samples' tokens/s, in the -o format (bench_output.c). Beside them: the
 * weight bytes per token and the fraction of the host's read bandwidth.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_output.h"
#include "common/cli.h"
#include "energy.h"
#include "glm_inference.h"

/* the tests of one depth, in llama-bench's order: pp, tg, pg */
struct bench_test {
    int pp, tg;
};

static int bench_tests(const struct opts *o, struct bench_test *t, int max)
{
    int n = 0;
    for (int i = 0; i < o->n_bench_p && n < max; i++)
        if (o->bench_p[i])
            t[n++] = (struct bench_test){o->bench_p[i], 0};
    for (int i = 0; i < o->n_bench_n && n < max; i++)
        if (o->bench_n[i])
            t[n++] = (struct bench_test){0, o->bench_n[i]};
    for (int i = 0; i < o->n_bench_pg && n < max; i++)
        t[n++] = (struct bench_test){o->bench_pg[i][0], o->bench_pg[i][1]};
    return n;
}

static void fill_ids(int32_t *ids, int n, int vocab)
{
    uint64_t seed = 12345;
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((seed >> 33) % (uint64_t)vocab);
    }
}

static void cpu_model(char *buf, size_t sz)
{
    snprintf(buf, sz, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            const char *v = strchr(line, ':') + 1;
            while (*v == ' ')
                v++;
            snprintf(buf, sz, "%.*s", (int)strcspn(v, "\n"), v);
            break;
        }
    if (f)
        fclose(f);
}

/* one sample of test t at depth d: the context filled (not timed), then
 * the timed prefill and decode passes; *ns its wall time; 0 or libtx's
 * error code */
static int sample(glm_session_t **s, const int32_t *ids, int d, struct bench_test t, float *lg,
                  double *ns, tx_device_t *dev, struct gi_energy *e)
{
    struct glm_sampling greedy = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
    int rc = glm_session_reset(*s);
    if (!rc && d > 0)
        rc = glm_eval(*s, ids, d, 0, lg);
    struct gi_energy e0, e1;
    gi_energy_read(dev, &e0);
    double t0 = now_ms();
    if (!rc && t.pp)
        rc = glm_eval(*s, ids + d, t.pp, 0, lg);
    int32_t next = 0;
    for (int j = 0; j < t.tg && !rc; j++)
        rc = glm_decode_batch(s, &ids[d + t.pp + j], 1, NULL, &greedy, &next);
    *ns = (now_ms() - t0) * 1e6;
    gi_energy_read(dev, &e1);
    /* the timed passes' energy, summed over the samples */
    e->have = e0.have && e1.have;
    e->active_uj += e1.active_uj - e0.active_uj;
    e->board_uj += e1.board_uj - e0.board_uj;
    return rc;
}

/* stderr: where a tg row's time went (glm_model_decode_times) */
static void print_decode_times(const char *plan, const struct bench_row *r,
                               const struct glm_decode_times *a, const struct glm_decode_times *b)
{
    uint64_t np = b->passes - a->passes;
    if (!np)
        return;
    fprintf(stderr,
            "%s: %.60s tg%d @ d%d: %.2f ms/token wall, device %.2f, host %.2f (until the first "
            "submission %.2f), %.1f jobs/token, decode graph %llu of %llu passes\n",
            prog, plan, r->n_gen, r->n_depth, (b->wall_ms - a->wall_ms) / np,
            (b->device_ms - a->device_ms) / np,
            (b->wall_ms - a->wall_ms - b->device_ms + a->device_ms) / np,
            (b->build_ms - a->build_ms) / np, (double)(b->jobs - a->jobs) / np,
            (unsigned long long)(b->replays - a->replays), (unsigned long long)np);
}

/* every depth and test under the device's current plan */
static int bench_plan(glm_model_t *m, tx_device_t *dev, const struct opts *o, const char *plan,
                      int n_ctx, int n_batch, const struct bench_run_info *ri, double bw,
                      int *first)
{
    const struct glm_config *c = glm_model_config(m);
    struct bench_test tests[3 * BENCH_LIST_MAX];
    int nt = bench_tests(o, tests, 3 * BENCH_LIST_MAX);
    glm_model_trim(m);
    struct glm_session_options so = {.n_ctx = n_ctx, .n_batch = n_batch};
    glm_session_t *s;
    if (glm_session_create(m, &so, &s)) {
        log_err("session");
        return 1;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n_ctx);
    float *lg = malloc(sizeof(float) * (size_t)c->vocab_size);
    int rc = !ids || !lg;
    if (rc)
        fprintf(stderr, "%s: --bench: out of memory\n", prog);
    else
        fill_ids(ids, n_ctx, c->vocab_size);
    /* warm-up: this plan's weight conversions, and the device's scratch
     * grown to the largest prefill (else the first timed one pays for
     * first-touch pages) */
    int max_pp = 1;
    for (int i = 0; i < nt; i++)
        max_pp = tests[i].pp > max_pp ? tests[i].pp : max_pp;
    double ns;
    struct gi_energy ew = {0};
    int src = rc ? 0 : sample(&s, ids, 0, (struct bench_test){max_pp, 1}, lg, &ns, dev, &ew);
    if (src) {
        log_rc("warm-up", src);
        rc = 1;
    }
    int depths0[1] = {0};
    const int *depths = o->n_bench_depth ? o->bench_depth : depths0;
    int nd = o->n_bench_depth ? o->n_bench_depth : 1;
    for (int di = 0; di < nd && !rc; di++)
        for (int ti = 0; ti < nt && !rc; ti++) {
            struct bench_row r;
            memset(&r, 0, sizeof(r));
            r.plan = plan;
            r.type_k = glm_cache_type_name((glm_cache_type_t)o->cache_k);
            r.type_v = glm_cache_type_name((glm_cache_type_t)o->cache_v);
            r.n_prompt = tests[ti].pp;
            r.n_gen = tests[ti].tg;
            r.n_depth = depths[di];
            r.reps = o->bench_reps;
            r.read_gbs = bw;
            time_t now = time(NULL);
            struct tm tm;
            gmtime_r(&now, &tm);
            strftime(r.test_time, sizeof(r.test_time), "%Y-%m-%dT%H:%M:%SZ", &tm);
            struct glm_decode_times dt0, dt1;
            glm_model_decode_times(m, &dt0);
            struct gi_energy e = {0}, zero = {0};
            for (int k = 0; k < r.reps && !rc; k++)
                if ((src = sample(&s, ids, r.n_depth, tests[ti], lg, &r.ns[k], dev, &e))) {
                    log_rc("bench", src);
                    rc = 1;
                } else if (interrupted) {
                    fprintf(stderr, "%s: --bench interrupted\n", prog);
                    rc = 130; /* the rows so far stand; this one is dropped */
                }
            if (rc)
                break;
            glm_model_decode_times(m, &dt1);
            zero.have = e.have;
            r.have_energy = gi_energy_per_token(&zero, &e, r.reps * (r.n_prompt + r.n_gen),
                                                &r.mj_per_token, &r.tokens_per_j);
            struct glm_model_info mi;
            glm_model_info(m, &mi);
            r.bytes_per_token = (double)mi.decode_bytes_per_token;
            bench_print_row(o->bench_output, ri, &r, *first);
            *first = 0;
            if (!r.n_prompt)
                print_decode_times(plan, &r, &dt0, &dt1);
        }
    glm_session_free(s);
    free(ids);
    free(lg);
    return rc;
}

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
    double bw = rb.refused[0] ? 0 : rb.gbs;
    if (rb.refused[0])
        fprintf(stderr, "%s: no read bandwidth, %% of BW not reported: %s\n", prog, rb.refused);
    else
        fprintf(stderr,
                "%s: read probe working set %.1f MiB (%s), >= 4 x the last-level cache %.1f MiB "
                "(%s); streaming read bandwidth of device memory: %.2f GB/s (%d threads)\n",
                prog, (double)rb.working_set / (1 << 20),
                rb.scratch ? "a scratch buffer" : "the weights", (double)rb.llc_bytes / (1 << 20),
                rb.llc_source, bw, rb.threads);
    /* one session per plan, as long as the largest test after the deepest
     * context (opts_parse checked it against the model) */
    int span = bench_span(o);
    int n_ctx = span + 8;
    if (c->max_position_embeddings > 0 && n_ctx > c->max_position_embeddings)
        n_ctx = c->max_position_embeddings;
    int max_pp = 1;
    for (int i = 0; i < o->n_bench_p; i++)
        max_pp = o->bench_p[i] > max_pp ? o->bench_p[i] : max_pp;
    for (int i = 0; i < o->n_bench_pg; i++)
        max_pp = o->bench_pg[i][0] > max_pp ? o->bench_pg[i][0] : max_pp;
    int n_batch = o->n_batch ? o->n_batch : max_pp;

    struct bench_run_info ri;
    memset(&ri, 0, sizeof(ri));
    ri.build_commit = txc_git_commit();
    cpu_model(ri.cpu_info, sizeof(ri.cpu_info));
    ri.gpu_info = di.name;
    ri.backend = di.backend;
    ri.model_filename = o->checkpoint;
    ri.model_type = glm_model_name(m);
    ri.model_size = mi.package_bytes;
    ri.model_n_params = mi.n_params;
    ri.n_batch = n_batch;
    ri.n_threads = o->threads;

    char *plans = strdup(o->bench_plans ? o->bench_plans : "golden;fp32;fp16;int8");
    if (!plans)
        return 1;
    glm_precision_plan_t saved;
    glm_plan_get(dev, &saved);
    bench_print_begin(o->bench_output);
    int rc = 0, first = 1;
    char *save = NULL;
    for (char *pl = strtok_r(plans, ";", &save); pl && !rc; pl = strtok_r(NULL, ";", &save)) {
        glm_precision_plan_t p;
        glm_plan_golden(&p);
        if (glm_plan_parse(pl, &p) || glm_plan_set(dev, &p)) {
            log_err(pl);
            rc = 1;
            break;
        }
        rc = bench_plan(m, dev, o, pl, n_ctx, n_batch, &ri, bw, &first);
    }
    bench_print_end(o->bench_output);
    if (o->bench_output == BENCH_MD) {
        if (bw > 0)
            printf("\nread bandwidth %.2f GB/s (working set %.1f MiB, >= 4 x LLC %.1f MiB); "
                   "decode fraction = weight bytes per token x tokens/s / read bandwidth\n",
                   bw, (double)rb.working_set / (1 << 20), (double)rb.llc_bytes / (1 << 20));
        else
            printf("\nread bandwidth not measured (%s): no decode fraction\n", rb.refused);
    }
    glm_plan_set(dev, &saved);
    free(plans);
    return rc;
}
