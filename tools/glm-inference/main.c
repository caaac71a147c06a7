/* SPDX-License-Identifier: MIT */
/*
 * glm-inference: run a GLM model package (.smd) on a TX8.
 *
 *   glm-inference --checkpoint MODEL.smd -p "prompt" [-n N] [--temp T] ...
 *   glm-inference --checkpoint MODEL.smd --validate
 *   glm-inference --checkpoint MODEL.smd --bench
 *
 * Generated text goes to stdout; logs, timings (llama.cpp's
 * llama_perf_context_print lines), validation and benchmark tables go to
 * stderr/stdout as documented in docs/glm-inference.md. Never interactive
 * unless stdin is a terminal and -i is given.
 *
 * Exit status: 0 success, 1 error (or validation below the threshold),
 * 2 usage error.
 *
 * The options are parsed in options.c, the devices and the model are
 * opened in run.c, and each mode has its file: generate.c (with chat.c for
 * -i), validate.c, bench.c, bench_depth.c, bench_cache.c.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_cache.h"
#include "bench_spec.h"
#include "glm_inference.h"

const char *prog = "glm-inference";
int verbose;

/* the mode the options ask for, on the loaded model */
static int run_mode(struct gi_run *g, struct opts *o)
{
    int rc;
    if (o->validate) {
        rc = run_validate(g->m, o);
        if (o->memory_view)
            print_memory_view(g->dev);
        return rc;
    }
    if (o->bench) { /* llama-bench: -p, -n, -pg, -d, -r, -o */
        rc = run_bench(g->m, g->dev, o); /* 0, 1 or 130 */
        if (o->expert_stats)
            print_expert_stats(g->m);
        return rc;
    }
    if (o->n_bench_spec) {
        static const int d0[] = {0, 2048};
        return bench_spec_run(g->m, o->file_text ? o->file_text : o->prompt, o->bench_spec,
                              o->n_bench_spec, o->n_bench_depth ? o->bench_depth : d0,
                              o->n_bench_depth ? o->n_bench_depth : 2, o->bench_tg,
                              o->bench_reps_set ? o->bench_reps : 3, o->draft_p_min, prog);
    }
    if (o->n_bench_depth)
        return bench_depth_run(g->m, g->dev, o->bench_depth, o->n_bench_depth, o->bench_pp,
                               o->bench_tg, o->bench_reps, o->n_batch, o->threads, prog);
    return run_generate(g, o);
}

/* the devices, the model and the mode */
static int run(struct opts *o, int *argc, char ***argv)
{
    /* Ctrl-C, SIGTERM, SIGHUP while loading, generating or benchmarking:
     * stop at the next token or sample, leave through the clean-up (the
     * telemetry object removed), exit 130; a second signal ends at once.
     * (--validate, --bench-depth and --bench-cache run to the end or die.) */
    if (o->bench || !(o->validate || o->n_bench_depth || o->bench_cache))
        catch_signals();
    struct gi_run g;
    int rc = gi_open(&g, o, argc, argv);
    if (rc >= 0)
        return rc;
    rc = gi_set_plan(&g, o);
    if (rc < 0 && o->bench_cache) {
        /* --bench-cache loads the package itself, once per mode */
        struct bench_cache_opts bo = {
            o->checkpoint, o->bench_cache_frac > 0 ? o->bench_cache_frac : 0.25,
            o->bench_tg,   32,
            o->bench_pp,   getenv("TX_BENCH_CACHE_MODES"), o->file_text};
        rc = bench_cache_run(g.dev, &bo);
    }
    if (rc < 0)
        rc = gi_load(&g, o);
    if (rc < 0 && interrupted && !o->interactive) {
        fprintf(stderr, "%s: interrupted while loading\n", prog);
        rc = 130;
    }
    if (rc < 0)
        rc = run_mode(&g, o);
    gi_close(&g);
    return rc;
}

int main(int argc, char **argv)
{
    /* a closed stdout (| head -1) is EPIPE, handled where the text is
     * written: the process leaves through its clean-up (the telemetry
     * object in /dev/shm removed) instead of dying of SIGPIPE */
    signal(SIGPIPE, SIG_IGN);
    struct opts o;
    int rc = opts_parse(&o, &argc, argv);
    if (rc < 0)
        rc = run(&o, &argc, &argv);
    free(o.file_text);
    return rc;
}
