/* SPDX-License-Identifier: MIT */
/*
 * Tuna (docs/tuna.md): `tuna record` of glm-inference on a tiny synthetic
 * GLM-4 MoE model on tx8-emu writes a Trace Event JSON with the expected
 * tracks and command names, whose command times add up to the job times;
 * `tuna report --json` classes the decode expert matmuls memory-bound and
 * the prefill GEMMs compute-bound; bad input gets a clear error.
 */
#include <check.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include <tx/tx.h>

#include "test_runtime_synth.h"
#include "tx_test_main.h"

static char g_smd[300], g_ck[300], g_trace[300];
static int g_record_rc = -1;

static const char *bin(const char *name)
{
    static char b[4][300];
    static int k;
    return tx_test_bin(name, b[k++ & 3], sizeof(b[0]));
}

/* Runs argv with stdout to out (may be NULL: /dev/null); exit status. */
static int run_to(const char *const *argv, const char *out)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int o = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open("/dev/null", O_WRONLY);
        if (o < 0 || e < 0)
            _exit(126);
        dup2(o, 1);
        if (!getenv("TUNA_TEST_VERBOSE"))
            dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void fixture_setup(void)
{
    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    snprintf(g_ck, sizeof(g_ck), "%s/ck", rts_tmpdir());
    snprintf(g_smd, sizeof(g_smd), "%s/m.smd", rts_tmpdir());
    snprintf(g_trace, sizeof(g_trace), "%s/trace.json", rts_tmpdir());
    if (rts_write_checkpoint(g_ck, GLM_ARCH_GLM4_MOE, NULL) || rts_export(g_ck, g_smd, "none"))
        ck_abort_msg("cannot make the test package");
    /* a 48-token prompt (prefill GEMMs of 48 rows), then 6 decode steps; the
     * FP32 plan (decode matmuls read 4 bytes per MAC) */
    char toks[400] = "";
    for (int i = 0; i < 48; i++)
        snprintf(toks + strlen(toks), sizeof(toks) - strlen(toks), "%s%d", i ? "," : "",
                 10 + i * 7);
    /* routed experts in a 256 KiB expert cache (the tiny model's experts do
     * not all fit: hits and misses, counted by the device) */
#define TUNA_XCACHE "256K"
    const char *argv[] = {bin("tuna"),        "record",    "-o",      g_trace,   "--",
                          bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                          "--no-moe-config", "--precision", "fp32", "--tokens", toks,
                          "-n",            "6",         "--expert-cache", TUNA_XCACHE, NULL};
    g_record_rc = run_to(argv, NULL);
}

static void fixture_teardown(void)
{
    rts_device_teardown();
    rts_cleanup();
}

static const char *jstr(json_object *o, const char *k)
{
    json_object *v;
    return o && json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

static double jnum(json_object *o, const char *k)
{
    json_object *v;
    return o && json_object_object_get_ex(o, k, &v) ? json_object_get_double(v) : 0;
}

/* tuna report --html of trace into html; the page's text (static) */
static const char *html_report(const char *trace, const char *html)
{
    const char *ah[] = {bin("tuna"), "report", "--html", html, trace, NULL};
    ck_assert_int_eq(run_to(ah, NULL), 0);
    FILE *f = fopen(html, "r");
    ck_assert_ptr_nonnull(f);
    static char page[1 << 22];
    size_t len = fread(page, 1, sizeof(page) - 1, f);
    fclose(f);
    page[len] = 0;
    return page;
}

START_TEST(trace_tracks_and_names)
{
    ck_assert_int_eq(g_record_rc, 0);
    json_object *root = json_object_from_file(g_trace);
    ck_assert_msg(root != NULL, "the trace is not JSON");
    json_object *evs;
    ck_assert(json_object_object_get_ex(root, "traceEvents", &evs));
    size_t n = json_object_array_length(evs);
    int host_proc = 0, dev_proc = 0, core0 = 0, core1 = 0, cmds_track = 0, jobs_track = 0;
    int q_proj = 0, experts = 0, prefill = 0, decode = 0, load = 0, busy = 0, mem = 0;
    /* counters: the KV cache per pass, the expert cache per job */
    enum { MAXS = 256 };
    static double kv_used[MAXS], kv_alloc[MAXS];
    int nkv = 0, nkva = 0, ndecode = 0, nec = 0;
    double ec_hits = 0, ec_misses = 0;
    /* per job: command time vs job time */
    enum { MAXJ = 4096 };
    static double jt[MAXJ], ct[MAXJ], je[MAXJ], ce[MAXJ];
    memset(jt, 0, sizeof(jt));
    memset(ct, 0, sizeof(ct));
    memset(je, 0, sizeof(je));
    memset(ce, 0, sizeof(ce));
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(evs, i), *a = NULL;
        const char *ph = jstr(e, "ph"), *name = jstr(e, "name"), *cat = jstr(e, "cat");
        ck_assert_ptr_nonnull(ph);
        ck_assert_ptr_nonnull(name);
        json_object_object_get_ex(e, "args", &a);
        if (!strcmp(ph, "M")) {
            const char *v = jstr(a, "name");
            ck_assert_ptr_nonnull(v);
            host_proc |= !strcmp(name, "process_name") && !strcmp(v, "host");
            dev_proc |= !strcmp(name, "process_name") && !strncmp(v, "device emu:", 11);
            core0 |= !strcmp(name, "thread_name") && !strcmp(v, "core 0");
            core1 |= !strcmp(name, "thread_name") && !strcmp(v, "core 1");
            cmds_track |= !strcmp(name, "thread_name") && !strcmp(v, "commands");
            jobs_track |= !strcmp(name, "thread_name") && !strcmp(v, "jobs");
        } else if (!strcmp(ph, "X")) {
            ck_assert_ptr_nonnull(cat);
            ck_assert(jnum(e, "dur") >= 0);
            int job = (int)jnum(a, "job");
            if (!strcmp(cat, "cmd")) {
                q_proj |= !strcmp(name, "MATMUL layers.0.self_attn.q_proj");
                experts |= !strcmp(name, "MOE_FFN layers.1.mlp.experts");
                ck_assert(job > 0 && job < MAXJ);
                ct[job] += jnum(e, "dur");
                ce[job] += jnum(a, "energy_pj");
            } else if (!strcmp(cat, "setup")) {
                /* the device's validation of the job before its first command */
                ck_assert(job > 0 && job < MAXJ);
                ct[job] += jnum(e, "dur");
            } else if (!strcmp(cat, "job")) {
                ck_assert(job > 0 && job < MAXJ);
                jt[job] += jnum(e, "dur");
                /* the job's energy from its completion record (1.9) */
                ck_assert_msg(jnum(a, "energy_pj") > 0, "job %d: no energy_pj", job);
                je[job] += jnum(a, "energy_pj");
            } else if (!strcmp(cat, "host")) {
                prefill |= !strcmp(name, "prefill");
                decode |= !strcmp(name, "decode step");
                ndecode += !strcmp(name, "decode step");
                load |= !strcmp(name, "load");
            }
        } else if (!strcmp(ph, "C")) {
            busy |= !strcmp(name, "busy %");
            mem |= !strcmp(name, "device memory") && jnum(a, "value") > 0;
            double v = jnum(a, "value");
            if (!strcmp(name, "KV cache used") && nkv < MAXS)
                kv_used[nkv++] = v;
            if (!strcmp(name, "KV cache allocated") && nkva < MAXS)
                kv_alloc[nkva++] = v;
            if (!strcmp(name, "expert cache hits") || !strcmp(name, "expert cache misses")) {
                ck_assert_msg(v >= 0 && v == (double)(uint64_t)v, "%s: %g", name, v);
                *(!strcmp(name, "expert cache hits") ? &ec_hits : &ec_misses) += v;
                nec++;
            }
        }
    }
    ck_assert(host_proc && dev_proc && core0 && core1 && cmds_track && jobs_track);
    ck_assert_msg(q_proj && experts, "commands not named with layer and tensor");
    ck_assert(prefill && decode && load);
    ck_assert(busy && mem);
    double tj = 0, tc = 0;
    int njobs = 0;
    for (int j = 0; j < MAXJ; j++) {
        if (!jt[j])
            continue;
        njobs++;
        tj += jt[j];
        tc += ct[j];
        ck_assert_msg(ct[j] <= jt[j] * 1.0001 + 1, "job %d: commands %.1f us > job %.1f us", j,
                      ct[j], jt[j]);
        /* the completion record's energy is its commands' energies */
        ck_assert_msg(je[j] == ce[j], "job %d: record %.0f pJ, commands %.0f pJ", j, je[j], ce[j]);
    }
    ck_assert_msg(njobs >= 6, "%d jobs", njobs); /* prefill + decode steps */
    ck_assert_msg(tc >= 0.98 * tj, "commands %.1f us, jobs %.1f us: more than 2%% apart", tc, tj);

    /* KV cache: one sample per pass; one session of 48 prompt positions
     * and one more per decode step, each position the same bytes */
    ck_assert_msg(nkv >= 2 && nkv == nkva, "KV counters: %d used, %d allocated", nkv, nkva);
    ck_assert_int_gt(ndecode, 0);
    double bpp = kv_used[nkv - 1] - kv_used[nkv - 2]; /* a decode step: one position */
    ck_assert_msg(bpp > 0, "KV cache used does not grow in decode");
    for (int i = 0; i < nkv; i++) {
        ck_assert_msg(kv_used[i] > 0 && kv_used[i] <= kv_alloc[i], "KV %g used of %g", kv_used[i],
                      kv_alloc[i]);
        ck_assert(i == 0 || kv_used[i] >= kv_used[i - 1]);
        double k = kv_used[i] / bpp;
        ck_assert_msg(k == (double)(long)k,
                      "KV cache used %g is not a whole number of %g-byte "
                      "positions",
                      kv_used[i], bpp);
    }
    ck_assert_msg(kv_used[nkv - 1] == (48 + ndecode) * bpp, "KV cache used %g, expected %d x %g",
                  kv_used[nkv - 1], 48 + ndecode, bpp);

    /* the expert table (otherData.experts, the report's heatmap): every row
     * of every pass routed to top_k experts in each MoE layer; the runtime
     * cache's hits and misses per (layer, expert) are the uses the device
     * counted (the per-job counters below) */
    json_object *other, *xa;
    ck_assert(json_object_object_get_ex(root, "otherData", &other));
    ck_assert_msg(json_object_object_get_ex(other, "experts", &xa) &&
                      json_object_array_length(xa) == 1,
                  "no expert table in otherData");
    json_object *xt = json_object_array_get_idx(xa, 0), *xl, *xs, *xh, *xm;
    int top_k = (int)jnum(xt, "top_k"), n_exp = (int)jnum(xt, "experts");
    ck_assert(top_k > 0 && n_exp >= top_k);
    ck_assert(json_object_object_get_ex(xt, "layers", &xl) &&
              json_object_object_get_ex(xt, "selections", &xs) &&
              json_object_object_get_ex(xt, "cache_hits", &xh) &&
              json_object_object_get_ex(xt, "cache_misses", &xm));
    size_t nml = json_object_array_length(xl);
    ck_assert(nml > 0 && json_object_array_length(xs) == nml &&
              json_object_array_length(xh) == nml && json_object_array_length(xm) == nml);
    double xhits = 0, xmisses = 0;
    for (size_t l = 0; l < nml; l++) {
        json_object *rs = json_object_array_get_idx(xs, l), *rh = json_object_array_get_idx(xh, l),
                    *rm = json_object_array_get_idx(xm, l);
        ck_assert((int)json_object_array_length(rs) == n_exp);
        double sel = 0;
        for (int e = 0; e < n_exp; e++) {
            sel += json_object_get_double(json_object_array_get_idx(rs, (size_t)e));
            xhits += json_object_get_double(json_object_array_get_idx(rh, (size_t)e));
            xmisses += json_object_get_double(json_object_array_get_idx(rm, (size_t)e));
        }
        ck_assert_msg(sel == (double)(48 + ndecode) * top_k,
                      "MoE layer %zu: %g selections, expected (48 + %d rows) x top-%d", l, sel,
                      ndecode, top_k);
    }
    ck_assert_msg(xhits == ec_hits && xmisses == ec_misses,
                  "expert table: %g hits %g misses; per-job counters: %g hits %g misses", xhits,
                  xmisses, ec_hits, ec_misses);

    /* expert cache: per-job changes of the device's counters; this device
     * ran only the recorded program (every job of it profiled), so they add
     * up to the device's totals */
    ck_assert_msg(nec > 0, "no expert cache counters");
    ck_assert_msg(ec_hits + ec_misses > 0, "the MoE layers used no expert weights");
    if (!rts_own_emu) { /* $TX_DEVICE: other programs may have used it */
        json_object_put(root);
        return;
    }
    tx_device_t *dev = NULL;
    ck_assert_int_eq(tx_device_open(rts_spec, &dev), TX_OK);
    struct tx_device_counters c;
    ck_assert_int_eq(tx_device_counters(dev, &c), TX_OK);
    tx_device_close(dev);
    ck_assert_msg(ec_hits == (double)c.dev.expert_cache_hits &&
                      ec_misses == (double)c.dev.expert_cache_misses,
                  "trace: %g hits %g misses; device: %llu hits %llu misses", ec_hits, ec_misses,
                  (unsigned long long)c.dev.expert_cache_hits,
                  (unsigned long long)c.dev.expert_cache_misses);
    json_object_put(root);
}
END_TEST

START_TEST(report_roofline)
{
    ck_assert_int_eq(g_record_rc, 0);
    char out[400];
    snprintf(out, sizeof(out), "%s/report.json", rts_tmpdir());
    const char *argv[] = {bin("tuna"), "report", "--json", g_trace, NULL};
    ck_assert_int_eq(run_to(argv, out), 0);
    json_object *r = json_object_from_file(out);
    ck_assert_msg(r != NULL, "tuna report --json is not JSON");
    json_object *groups;
    ck_assert(json_object_object_get_ex(r, "groups", &groups));
    /* The roof a group meets is its arithmetic intensity against the ridge
     * point (peak compute / peak bandwidth). With the peaks measured from the
     * trace (the best command of each kind) the ridge moves with whatever
     * else the host ran (a slow bandwidth command and a fast GEMM put it
     * above 7), so the roofs are asserted against given peaks with a ridge
     * of 2 flop/byte, the emulated FP32 device's own on a quiet host: the
     * FP32 prefill projections of 48 rows do 7.4-11.3 flops per byte (the
     * activations count too), the decode ones 2 flops per 4-byte weight
     * (0.5), decode attention about 1. */
    char out_given[400];
    snprintf(out_given, sizeof(out_given), "%s/report-given.json", rts_tmpdir());
    const char *argv_given[] = {bin("tuna"), "report", "--json", "--peak-gbps", "32",
                                "--peak-gflops", "64", g_trace, NULL};
    ck_assert_int_eq(run_to(argv_given, out_given), 0);
    json_object *rg = json_object_from_file(out_given), *groups_given;
    ck_assert_msg(rg != NULL, "tuna report --json --peak-gbps ... is not JSON");
    ck_assert(json_object_object_get_ex(rg, "groups", &groups_given));
    ck_assert_int_eq(json_object_array_length(groups_given), json_object_array_length(groups));
    ck_assert_str_eq(jstr(rg, "peak_source"), "given");
    /* The roof (arithmetic intensity against the peaks) is asserted strictly.
     * The class also depends on the achieved speed: on a host shared with
     * other work a command can run 20x below its roof and is then, rightly,
     * overhead-bound; so the class is the roof's or overhead-bound, and at
     * least one of the groups checked reaches its roof's class. */
    int dec_exp = 0, pre_gemm = 0, at_roof = 0;
    for (size_t i = 0; i < json_object_array_length(groups); i++) {
        json_object *g = json_object_array_get_idx(groups, i);
        const char *name = jstr(g, "name"), *phase = jstr(g, "phase"), *cls = jstr(g, "class");
        ck_assert(name && phase && cls);
        json_object *gg = NULL;
        for (size_t j = 0; j < json_object_array_length(groups_given) && !gg; j++) {
            json_object *c = json_object_array_get_idx(groups_given, j);
            if (jstr(c, "name") && !strcmp(jstr(c, "name"), name) && jstr(c, "phase") &&
                !strcmp(jstr(c, "phase"), phase))
                gg = c;
        }
        ck_assert_msg(gg != NULL, "%s (%s) missing with the given peaks", name, phase);
        /* roof: against the given ridge; class: against this report's own
         * (measured) roof, or overhead-bound */
        const char *roof = jstr(gg, "roof"), *own = jstr(g, "roof");
        ck_assert(roof && own);
        char own_cls[32];
        snprintf(own_cls, sizeof(own_cls), "%s-bound", own);
        if (!strcmp(phase, "decode") && strstr(name, "MOE_FFN") && strstr(name, "mlp.experts")) {
            ck_assert_msg(!strcmp(roof, "memory"), "%s (decode) meets the %s roof", name, roof);
            ck_assert_msg(!strcmp(cls, own_cls) || !strcmp(cls, "overhead-bound"),
                          "%s (decode) is %s under the %s roof", name, cls, own);
            at_roof += !strcmp(cls, own_cls);
            dec_exp++;
        }
        if (!strcmp(phase, "prefill") && !strncmp(name, "MATMUL layers.", 14) &&
            strstr(name, "_proj")) {
            ck_assert_msg(!strcmp(roof, "compute"), "%s (prefill) meets the %s roof", name, roof);
            ck_assert_msg(!strcmp(cls, own_cls) || !strcmp(cls, "overhead-bound"),
                          "%s (prefill) is %s under the %s roof", name, cls, own);
            at_roof += !strcmp(cls, own_cls);
            pre_gemm++;
        }
        /* every group that computes or moves bytes costs energy (issue 41) */
        ck_assert_msg(jnum(g, "energy_uj") > 0, "%s (%s): no energy", name, phase);
    }
    /* the groups' energies add up to the commands' */
    double esum = 0;
    for (size_t i = 0; i < json_object_array_length(groups); i++)
        esum += jnum(json_object_array_get_idx(groups, i), "energy_uj");
    ck_assert(fabs(esum - jnum(r, "command_energy_uj")) <= 1e-6 * esum + 1e-3);
    ck_assert_msg(at_roof > 0, "every decode expert and prefill GEMM group is overhead-bound");
    ck_assert(dec_exp > 0 && pre_gemm > 0);
    json_object *layers;
    ck_assert(json_object_object_get_ex(r, "layers", &layers));
    ck_assert(json_object_array_length(layers) > 0);
    ck_assert(jnum(json_object_array_get_idx(layers, 0), "energy_uj") > 0);
    ck_assert(jnum(r, "device_busy_pct") > 0 && jnum(r, "device_busy_pct") <= 100.0001);
    /* the profiler's own host time: some, and less than the passes took */
    ck_assert(jnum(r, "profiler_host_us") > 0);
    ck_assert(jnum(r, "profiler_host_pct") > 0 && jnum(r, "profiler_host_pct") < 100);
    ck_assert(jnum(r, "kv_cache_peak_used_bytes") > 0);
    ck_assert(jnum(r, "kv_cache_peak_used_bytes") <= jnum(r, "kv_cache_peak_allocated_bytes"));
    ck_assert(jnum(r, "expert_cache_hits") + jnum(r, "expert_cache_misses") > 0);
    ck_assert(jnum(r, "expert_cache_hit_pct") >= 0 && jnum(r, "expert_cache_hit_pct") <= 100);
    double cmd_us = jnum(r, "command_time_us"), job_us = jnum(r, "job_time_us");
    /* wall = load + generation + what precedes / follows them; host = wall - jobs */
    double wall_us = jnum(r, "wall_time_us");
    ck_assert(wall_us >= job_us && jnum(r, "generation_time_us") > 0 &&
              jnum(r, "load_time_us") + jnum(r, "generation_time_us") <= wall_us * 1.000001);
    ck_assert(fabs(jnum(r, "host_time_us") - (wall_us - job_us)) < 1e-3);
    json_object *rx;
    ck_assert(json_object_object_get_ex(r, "experts", &rx) && json_object_array_length(rx) == 1);
    json_object_put(rg);
    json_object_put(r);

    /* --html: one self-contained page with the three SVG charts */
    char html[400];
    snprintf(html, sizeof(html), "%s/report.html", rts_tmpdir());
    const char *page = html_report(g_trace, html);
    ck_assert_ptr_nonnull(strstr(page, "<svg id=\"timeline\""));
    ck_assert_ptr_nonnull(strstr(page, "<svg id=\"roofline\""));
    ck_assert_ptr_nonnull(strstr(page, "id=\"curves\""));
    ck_assert_ptr_nonnull(strstr(page, "<svg id=\"curve-memory\""));
    /* issue 41: the readable report's parts */
    ck_assert_ptr_nonnull(strstr(page, "<div id=\"timeline-controls\">"));
    ck_assert_ptr_nonnull(strstr(page, "<rect class=\"cmd\" data-t=\""));
    ck_assert_ptr_nonnull(strstr(page, "<svg id=\"expert-heatmap\""));
    ck_assert_ptr_nonnull(strstr(page, "<svg id=\"expert-cache-heatmap\""));
    ck_assert_ptr_nonnull(strstr(page, "class=\"phase-load\""));
    ck_assert_ptr_nonnull(strstr(page, "class=\"phase-generation\""));
    ck_assert_ptr_nonnull(strstr(page, "<g class=\"time-axis\">"));
    ck_assert(strstr(page, " us</text>") || strstr(page, " ms</text>") ||
              strstr(page, " s</text>")); /* tick labels with their unit */
    ck_assert_ptr_nonnull(strstr(page, "arithmetic intensity (FLOP/byte, log)"));
    ck_assert_ptr_nonnull(strstr(page, "GFLOP/s (log)"));
    ck_assert_ptr_nonnull(strstr(page, "compute ceiling"));
    ck_assert_ptr_nonnull(strstr(page, "memory ceiling"));
    ck_assert_ptr_nonnull(strstr(page, "<g class=\"legend\">"));
    ck_assert_ptr_nonnull(strstr(page, "<table id=\"commands\""));
    ck_assert_ptr_nonnull(strstr(page, ">p99 us</th>"));
    ck_assert_ptr_nonnull(strstr(page, ">energy uJ</th>"));
    ck_assert_ptr_nonnull(strstr(page, "<table id=\"layers\""));
    ck_assert_ptr_nonnull(strstr(page, "id=\"header-times\""));
    /* the header's device times are tuna report's */
    char want[128];
    snprintf(want, sizeof(want), "(%.1f us of commands, %.1f us of jobs)", cmd_us, job_us);
    ck_assert_msg(strstr(page, want) != NULL, "the header does not say %s", want);
    snprintf(want, sizeof(want), "<b>wall time %.1f ms</b>", wall_us / 1e3);
    ck_assert_msg(strstr(page, want) != NULL, "the header does not say %s", want);
    ck_assert_ptr_nonnull(strstr(page, "MOE_FFN layers.1.mlp.experts"));
    ck_assert_ptr_nonnull(strstr(page, "</html>"));
    /* self-contained: the one script is inline, nothing is loaded */
    ck_assert_ptr_nonnull(strstr(page, "<script>\n"));
    ck_assert_ptr_null(strstr(strstr(page, "<script>\n") + 1, "<script"));
    ck_assert_ptr_null(strstr(page, "src="));
    ck_assert_ptr_null(strstr(page, "href="));
}
END_TEST

START_TEST(bad_input)
{
    char p[400];
    snprintf(p, sizeof(p), "%s/not-json.json", rts_tmpdir());
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"traceEvents\": [", f);
    fclose(f);
    const char *a1[] = {bin("tuna"), "report", p, NULL};
    ck_assert_int_eq(run_to(a1, NULL), 1);
    const char *a2[] = {bin("tuna"), "report", "/nonexistent/trace.json", NULL};
    ck_assert_int_eq(run_to(a2, NULL), 1);
    const char *a3[] = {bin("tuna"), "record", "--", "/bin/true", NULL};
    ck_assert_int_eq(run_to(a3, NULL), 2);
    snprintf(p, sizeof(p), "%s/none.json", rts_tmpdir());
    const char *a4[] = {bin("tuna"), "record", "-o", p, "--", "/bin/true", NULL};
    ck_assert_int_ne(run_to(a4, NULL), 0); /* not a libtx program: no trace */
    ck_assert_int_ne(access(p, F_OK), 0);
    const char *a5[] = {bin("tuna"), "frobnicate", NULL};
    ck_assert_int_eq(run_to(a5, NULL), 2);
    const char *a6[] = {bin("tuna"), "overhead", "-r", "1", "--", "/bin/true", NULL};
    ck_assert_int_eq(run_to(a6, NULL), 1); /* no decode tokens/s line */
    const char *a7[] = {bin("tuna"), "overhead", "-r", "0", "--", "/bin/true", NULL};
    ck_assert_int_eq(run_to(a7, NULL), 2);
    /* a malformed expert table (a row short of the experts): refused, no page */
    snprintf(p, sizeof(p), "%s/bad-experts.json", rts_tmpdir());
    f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cmd\", \"name\": \"FILL\", "
          "\"ts\": 1, \"dur\": 2, \"args\": {\"op\": \"FILL\"}}], \"otherData\": "
          "{\"experts\": [{\"model\": \"m\", \"experts\": 4, \"top_k\": 2, \"layers\": [1], "
          "\"selections\": [[1, 2, 3]]}]}}",
          f);
    fclose(f);
    char page[400];
    snprintf(page, sizeof(page), "%s/bad-experts.html", rts_tmpdir());
    const char *a8[] = {bin("tuna"), "report", "--html", page, p, NULL};
    ck_assert_int_eq(run_to(a8, NULL), 1);
    ck_assert_int_ne(access(page, F_OK), 0);
}
END_TEST

/* The explicit API: TX_SUBMIT_PROFILE with a buffer of the caller's BO. */
START_TEST(explicit_profile_buffer)
{
    tx_device_t *dev;
    ck_assert_int_eq(tx_device_open(rts_spec, &dev), TX_OK);
    tx_bo_t *data, *prof;
    ck_assert_int_eq(tx_bo_alloc(dev, 1 << 16, 0, "data", &data), TX_OK);
    ck_assert_int_eq(tx_bo_alloc(dev, 1 << 16, 0, "prof", &prof), TX_OK);
    tx_cmdbuf_t *cb;
    ck_assert_int_eq(tx_cmdbuf_create(dev, &cb), TX_OK);
    ck_assert_int_eq(tx_cmdbuf_use(cb, data, TX_ACCESS_RW), TX_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(tx_cmd_fill(cb, tx_ref(data, 0), 1 << 16, 1), TX_OK);
    tx_job_t job;
    /* the flag without a buffer; bad buffers */
    ck_assert_int_eq(tx_submit_ex(dev, cb, TX_SUBMIT_PROFILE, 0, &job), TX_EINVAL);
    ck_assert_int_eq(tx_cmdbuf_profile(cb, prof, 4, 4096), TX_EINVAL);
    ck_assert_int_eq(tx_cmdbuf_profile(cb, prof, 0, 16), TX_EINVAL);
    ck_assert_int_eq(tx_cmdbuf_profile(cb, prof, 4096, 1 << 16), TX_EINVAL);
    ck_assert_int_eq(tx_cmdbuf_profile(cb, prof, 4096, 8192), TX_OK);
    ck_assert_int_eq(tx_submit_ex(dev, cb, TX_SUBMIT_PROFILE, 0, &job), TX_OK);
    ck_assert_int_eq(tx_wait(dev, job, -1, NULL), TX_OK);
    void *map;
    ck_assert_int_eq(tx_bo_map(prof, &map), TX_OK);
    const struct tx8_prof_header *h = (const void *)((uint8_t *)map + 4096);
    const struct tx8_prof_record *r = (const void *)(h + 1);
    ck_assert_uint_eq(h->magic, TX8_PROF_MAGIC);
    ck_assert_uint_eq(h->count, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(r[i].opcode, TX8_OP_FILL);
        ck_assert_uint_eq(r[i].bytes_written, 1 << 16);
        ck_assert(r[i].end_ns >= r[i].start_ns && r[i].start_ns >= h->start_ns);
    }
    tx_cmdbuf_destroy(cb);
    tx_bo_free(data);
    tx_bo_free(prof);
    tx_device_close(dev);
}
END_TEST

/* issue 38: an FP8 package under the fp8 plan: its matrix products and
 * expert FFNs carry w=fp8 in the trace's detail, tuna report groups them
 * as "<name> [fp8]" with their FLOPs and roof, and the HTML roofline's
 * points name them */
START_TEST(fp8_commands_named)
{
    char smd[400], trace[400], out[400], html[400];
    snprintf(smd, sizeof(smd), "%s/fp8.smd", rts_tmpdir());
    snprintf(trace, sizeof(trace), "%s/fp8-trace.json", rts_tmpdir());
    snprintf(out, sizeof(out), "%s/fp8-report.json", rts_tmpdir());
    snprintf(html, sizeof(html), "%s/fp8-report.html", rts_tmpdir());
    ck_assert_int_eq(rts_export(g_ck, smd, "fp8"), 0);
    const char *argv[] = {bin("tuna"),       "record",      "-o",         trace,
                          "--",             bin("glm-inference"), "--device", rts_spec,
                          "--checkpoint",   smd,           "--no-moe-config", "--precision",
                          "fp8",            "--tokens",    "11,12,13,14,15,16,17,18", "-n",
                          "3",              NULL};
    ck_assert_int_eq(run_to(argv, NULL), 0);
    json_object *root = json_object_from_file(trace), *evs;
    ck_assert_ptr_nonnull(root);
    ck_assert(json_object_object_get_ex(root, "traceEvents", &evs));
    int mm = 0, moe = 0;
    for (size_t i = 0; i < json_object_array_length(evs); i++) {
        json_object *e = json_object_array_get_idx(evs, i), *a;
        const char *cat = jstr(e, "cat"), *name = jstr(e, "name");
        if (!cat || strcmp(cat, "cmd") || !json_object_object_get_ex(e, "args", &a))
            continue;
        const char *det = jstr(a, "detail");
        if (det && strstr(det, " w=fp8 ")) {
            mm += !strncmp(name, "MATMUL ", 7);
            moe += !strncmp(name, "MOE_FFN ", 8);
        }
    }
    json_object_put(root);
    ck_assert_msg(mm > 0 && moe > 0, "w=fp8 in %d MATMUL and %d MOE_FFN commands", mm, moe);
    const char *ar[] = {bin("tuna"), "report", "--json", trace, NULL};
    ck_assert_int_eq(run_to(ar, out), 0);
    json_object *r = json_object_from_file(out), *groups;
    ck_assert_ptr_nonnull(r);
    ck_assert(json_object_object_get_ex(r, "groups", &groups));
    int gmm = 0, gmoe = 0;
    for (size_t i = 0; i < json_object_array_length(groups); i++) {
        json_object *g = json_object_array_get_idx(groups, i);
        const char *name = jstr(g, "name");
        if (!name || !strstr(name, " [fp8]"))
            continue;
        ck_assert_msg(jnum(g, "gflops") > 0 && jstr(g, "roof"), "%s: no FLOPs or roof", name);
        gmm += !strncmp(name, "MATMUL ", 7);
        gmoe += !strncmp(name, "MOE_FFN ", 8);
    }
    json_object_put(r);
    ck_assert_msg(gmm > 0 && gmoe > 0, "[fp8] groups: %d MATMUL, %d MOE_FFN", gmm, gmoe);
    const char *page = html_report(trace, html);
    const char *roof = strstr(page, "<svg id=\"roofline\"");
    ck_assert_ptr_nonnull(roof);
    const char *end = strstr(roof, "</svg>"), *pt = strstr(roof, "mlp.experts [fp8] (");
    ck_assert_msg(pt && end && pt < end, "no FP8 expert point in the roofline");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tuna");
    TCase *tc = tcase_create("core");
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, trace_tracks_and_names);
    tcase_add_test(tc, report_roofline);
    tcase_add_test(tc, fp8_commands_named);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, explicit_profile_buffer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run_emu(suite());
}
