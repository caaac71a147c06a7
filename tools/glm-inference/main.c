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
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tx/glm.h>
#include <tx/tx_analyze.h>
#include <tx/tx_device.h>

#include "bench_depth.h"
#include "energy.h"
#include "common/cli.h"
#include "mpi_transport.h"

static const char *prog = "glm-inference";

#include "bench_cache.h"
#include "common/device_list.h"
static int verbose;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s --checkpoint MODEL.smd [options]\n"
            "\n"
            "Generation (llama.cpp-style):\n"
            "  -p, --prompt TEXT        prompt text\n"
            "  -f, --file FILE          read the prompt from FILE\n"
            "      --tokens 1,2,3       prompt as raw token ids\n"
            "  -n, --n-predict N        tokens to generate (default 128, -1 = until a stop "
            "token)\n"
            "  -c, --ctx-size N         context size (default 4096 or the model's maximum)\n"
            "  -b, --batch-size N       most tokens per device pass (default 512)\n"
            "  -s, --seed N             sampling seed (default -1 = from the clock)\n"
            "      --temp T             temperature (default 0.8 or the package's\n"
            "                           generation_config.json; 0 = greedy)\n"
            "      --top-k N            top-k (default 40 or generation_config.json's, 0 = off)\n"
            "      --top-p P            top-p (default 0.95 or generation_config.json's, 1 = off)\n"
            "      --min-p P            min-p (default 0.05, 0 = off)\n"
            "      --repeat-penalty R   repetition penalty (default 1.0 = off)\n"
            "      --presence-penalty P presence penalty (default 0.0 = off)\n"
            "      --frequency-penalty F frequency penalty (default 0.0 = off)\n"
            "      --repeat-last-n N    ids the penalties look back (default 64; 0 = off,\n"
            "                           -1 = the context up to 4096)\n"
            "      --samplers LIST      sampler order, llama.cpp's names separated by ';':\n"
            "                           top_k;top_p;min_p;temperature (default, llama.cpp) or\n"
            "                           temperature;top_k;top_p;min_p (transformers);\n"
            "                           penalties always come first\n"
            "      --sampler-order NAME llama (default) or temp-first, the same two orders\n"
            "      --chat               apply the GLM chat template to the prompt (a user "
            "turn)\n"
            "      --system TEXT        with --chat: a system message\n"
            "      --chat-template-format NAME  (or --chat-template NAME) the chat format:\n"
            "                           glm4, glm4.5 (= glm4.6), glm4.7 (= glm5, glm5.1),\n"
            "                           qwen3 (= chatml), deepseek3, deepseek3.1;\n"
            "                           default: recognised from the package's chat_template\n"
            "      --no-think           with --chat: thinking disabled\n"
            "      --ignore-eos         never sample the stop tokens (-inf logit bias)\n"
            "      --no-display-prompt  do not echo the prompt\n"
            "  -i, --interactive        chat on a terminal (only if stdin is a TTY)\n"
            "  -t, --threads N          host threads (reference, bandwidth probe)\n"
            "\n"
            "Device and precision:\n"
            "      --device SPEC        device (emu:/path.sock, /dev/accel/accelN; default "
            "$TX_DEVICE)\n"
            "                           SPEC,SPEC,...: one model on several devices, the routed\n"
            "                           experts split across them (docs/multi-device.md)\n"
            "      --ep-rebalance N     several devices: place the experts again by the live\n"
            "                           load counters every N generated tokens (0: off)\n"
            "      --precision PLAN     e.g. golden, fp32, mlp=int8,attention=fp16 (default "
            "golden)\n"
            "      --moe-config FILE    expert parallel YAML (default "
            "config/expert_parallel.yaml if present)\n"
            "      --no-moe-config      do not read the default YAML\n"
            "      --load-balance MODE  off, on or auto (expert load penalty)\n"
            "      --lambda X           load penalty factor (default 0.2)\n"
            "      --name NAME          model name for device memory labels\n"
            "      --stream             stream the layers through device-side slots with "
            "prefetch\n"
            "      --max-weight-mem SIZE  stream the layers when the weights exceed SIZE "
            "(e.g. 512M)\n"
            "      --no-verify          skip the per-tensor CRC32C checks at load\n"
            "      --expert-cache SIZE  routed experts in an expert cache of SIZE (default when\n"
            "                           the model does not fit: free memory less a reserve)\n"
            "      --expert-policy P    lrfu (frequency + recency, default) or lru\n"
            "      --no-prefetch        no predicted expert prefetch\n"
            "      --bench-cache        expert cache vs resident vs --stream decode (tg rows)\n"
            "      --bench-cache-frac F cache size as a fraction of the routed experts (0.25)\n"
            "                           ($TX_BENCH_CACHE_MODES: a subset of resident,layers,lru,lrfu)\n"
            "      --batch-invariant    batch-invariant device jobs: a session's logits are\n"
            "                           bit-identical whatever the batch (slower single-token\n"
            "                           decode; also TX_BATCH_INVARIANT=1)\n"
            "\n"
            "Outputs and checks:\n"
            "      --verify             check every checksum of the package and exit (no "
            "device)\n"
            "      --logits FILE        write the prompt's logits (float32 LE [T x vocab])\n"
            "      --validate           100 random inputs vs the original model (FP32 reference)\n"
            "      --validate-inputs N  inputs (default 100)\n"
            "      --validate-tokens N  tokens per input (default 8)\n"
            "      --validate-seed N    input seed\n"
            "      --original DIR|FILE  the original checkpoint to validate against (default:\n"
            "                           the source the package records, if its hash matches)\n"
            "      --no-original        measure the device arithmetic only\n"
            "      --bench              llama-bench rows: pp512, tg128 per precision plan\n"
            "      --bench-plans LIST   plans separated by ';' (default golden;fp32;fp16;int8)\n"
            "      --bench-pp N         prompt tokens (default 512)\n"
            "      --bench-tg N         generated tokens (default 128)\n"
            "      --bench-depth LIST   pp/tg rows after LIST cached tokens, e.g. 0,2048,8192\n"
            "                           (llama-bench -d), under --precision; KV bytes/token\n"
            "      --bench-reps N       --bench-depth rounds (llama-bench -r; default 1): each\n"
            "                           runs every depth in turn; medians, ratio ranges\n"
            "      --cache-type-k T     (--ctk) KV cache K type: f32, f16, bf16, q8_0 (int8),\n"
            "                           q4_0 (4-bit); default from the plan; MLA: the latent\n"
            "      --cache-type-v T     (--ctv) V type (GQA; MLA has no V cache: ignored)\n"
            "      --expert-stats       per-expert load histogram and utilisation std\n"
            "      --memory-view        print the device's memory view while loaded\n"
            "  -v, --verbose            more logs\n"
            "  -h, --help\n"
            "\n"
            "TX_DEBUG=1 prints every device command and per-layer statistics to stderr.\n",
            prog);
    fprintf(f, "\nArchitectures (config.json architectures[0], model_type):\n%s",
            glm_arch_supported());
}

struct opts {
    const char *checkpoint, *prompt, *file, *tokens, *device, *precision, *moe_config;
    const char *logits, *system, *name, *bench_plans, *load_balance;
    int n_predict, n_predict_set, n_ctx, n_batch, threads;
    long long seed;
    float temp, top_p, lambda;
    int top_k;
    int set_temp, set_top_k, set_top_p; /* given on the command line */
    float min_p, repeat_penalty, presence_penalty, frequency_penalty;
    int repeat_last_n, sampler_order;
    int chat_format;
    int chat, no_think, ignore_eos, no_display, interactive, no_moe_config, lambda_set;
    long long ep_rebalance;
    int validate, v_inputs, v_tokens;
    unsigned long long v_seed;
    const char *original;
    int no_original;
    int bench, bench_pp, bench_tg;
    int bench_depth[BENCH_DEPTH_MAX], n_bench_depth; /* --bench-depth (bench_depth.c) */
    int bench_reps;                                  /* --bench-reps */
    int cache_k, cache_v; /* --cache-type-k / -v (enum glm_cache_type) */
    int expert_stats, memory_view, stream;
    int verify, no_verify, batch_invariant;
    unsigned long long max_weight_mem;
    unsigned long long expert_cache; /* --expert-cache */
    int expert_lru, no_prefetch, bench_cache;
    double bench_cache_frac;
};

static int parse_ids(const char *s, int32_t **ids, size_t *n)
{
    size_t cap = 64, k = 0;
    int32_t *v = malloc(cap * sizeof(*v));
    if (!v)
        return TX_ENOMEM;
    while (*s) {
        while (*s == ',' || *s == ' ' || *s == '\n' || *s == '\t')
            s++;
        if (!*s)
            break;
        char *end;
        errno = 0;
        long x = strtol(s, &end, 10);
        if (end == s || errno || x < 0 || x > 0x7fffffff) {
            free(v);
            return TX_EINVAL;
        }
        if (k == cap) {
            int32_t *y = realloc(v, cap * 2 * sizeof(*v));
            if (!y) {
                free(v);
                return TX_ENOMEM;
            }
            v = y;
            cap *= 2;
        }
        v[k++] = (int32_t)x;
        s = end;
    }
    *ids = v;
    *n = k;
    return 0;
}

static void log_err(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, tx_last_error());
}

/* A lost device's message says all there is to say, in one line
 * ("device emu:/x.sock: tx8-emu closed the connection ...: device lost"). */
static void log_rc(const char *what, int rc)
{
    if (rc == TX_EDEVICE_LOST)
        fprintf(stderr, "%s: %s\n", prog, tx_last_error());
    else
        log_err(what);
}

/* Ctrl-C (SIGINT), SIGTERM, SIGHUP during generation: stop after the current
 * token, print the timings as llama.cpp does and exit 130 through the normal
 * clean-up (the model's telemetry file in /dev/shm is removed). A second
 * signal terminates at once. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
    signal(sig, SIG_DFL);
}

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* --ep-rebalance N: the model, N, tokens so far */
static glm_model_t *reb_model;
static long long reb_every, reb_tokens;

static int on_token(void *user, int32_t tok, const char *piece, size_t len)
{
    (void)user;
    (void)tok;
    if (len)
        fwrite(piece, 1, len, stdout);
    fflush(stdout);
    if (reb_model && reb_every > 0 && ++reb_tokens % reb_every == 0 &&
        glm_model_ep_rebalance(reb_model, 0)) {
        fprintf(stderr, "\nglm-inference: --ep-rebalance: %s\n", tx_last_error());
        return 1;
    }
    return interrupted != 0;
}

static void print_perf(const struct glm_timings *t)
{
    fprintf(stderr, "llama_perf_sampler_print:    sampling time = on device (SAMPLE), included "
                    "in the eval time\n");
    fprintf(stderr, "llama_perf_context_print:        load time = %10.2f ms\n", t->load_ms);
    fprintf(stderr,
            "llama_perf_context_print: prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per "
            "token, %8.2f tokens per second)\n",
            t->prompt_ms, t->n_prompt, t->n_prompt ? t->prompt_ms / t->n_prompt : 0.0,
            t->prompt_tps);
    fprintf(stderr,
            "llama_perf_context_print:        eval time = %10.2f ms / %5d runs   (%8.2f ms per "
            "token, %8.2f tokens per second)\n",
            t->eval_ms, t->n_eval, t->n_eval ? t->eval_ms / t->n_eval : 0.0, t->eval_tps);
    fprintf(stderr, "llama_perf_context_print:       total time = %10.2f ms / %5d tokens\n",
            t->total_ms, t->n_prompt + t->n_eval);
    fprintf(stderr, "glm_perf: device busy = %.2f ms, %llu multiply-accumulates\n", t->device_ms,
            (unsigned long long)t->macs);
}

/* --memory-view and --expert-stats are diagnostics: stderr, like the timings,
 * so that stdout carries the generated text only. */
static void print_memory_view(tx_device_t *dev)
{
    size_t n = 0;
    int rc = tx_device_memory_view(dev, NULL, 0, &n);
    if (rc) {
        fprintf(stderr, "%s: memory view: %s\n", prog, tx_last_error());
        return;
    }
    struct tx_mem_region *r = calloc(n ? n : 1, sizeof(*r));
    if (!r)
        return;
    size_t got = n;
    if (tx_device_memory_view(dev, r, n, &got) == 0) {
        struct tx_device_info info;
        tx_device_info(dev, &info);
        fprintf(stderr, "TX8 device memory view (%s, %llu MiB, %llu MiB used)\n", info.name,
                (unsigned long long)(info.mem_size >> 20),
                (unsigned long long)(info.mem_used >> 20));
        fprintf(stderr, "%-18s %12s  %5s  %s\n", "address", "size kB", "owner", "label");
        for (size_t i = 0; i < got && i < n; i++)
            fprintf(stderr, "0x%016llx %12llu  %5d  %s%s\n", (unsigned long long)r[i].addr,
                    (unsigned long long)(r[i].size >> 10), r[i].owner, r[i].label,
                    (r[i].flags & TX_MEM_OWN) ? " (this process)" : "");
        /* totals per label */
        fprintf(stderr, "%-32s %12s\n", "label", "total kB");
        for (size_t i = 0; i < got && i < n; i++) {
            int seen = 0;
            for (size_t j = 0; j < i; j++)
                seen |= !strcmp(r[j].label, r[i].label);
            if (seen)
                continue;
            unsigned long long tot = 0;
            for (size_t j = i; j < got && j < n; j++)
                if (!strcmp(r[j].label, r[i].label))
                    tot += r[j].size;
            fprintf(stderr, "%-32s %12llu\n", r[i].label[0] ? r[i].label : "(unlabelled)",
                    tot >> 10);
        }
    }
    free(r);
}

static void print_expert_stats(glm_model_t *m)
{
    struct glm_expert_stats *st;
    if (glm_model_expert_stats(m, &st)) {
        log_err("expert stats");
        return;
    }
    if (!st->n_moe_layers) {
        fprintf(stderr, "expert stats: the model has no MoE layers\n");
        glm_expert_stats_free(st);
        return;
    }
    struct glm_moe_options mo;
    glm_model_get_moe(m, &mo);
    fprintf(stderr,
            "expert utilisation (count / mean count; std in %% of the mean), load balance %s, "
            "lambda %.2f, expert_parallel %d\n",
            mo.balance == GLM_BALANCE_ON     ? "on"
            : mo.balance == GLM_BALANCE_AUTO ? "auto"
                                             : "off",
            (double)mo.lambda, st->expert_parallel);
    for (int i = 0; i < st->n_moe_layers; i++) {
        const uint64_t *c = st->counts + (size_t)i * st->n_experts;
        uint64_t mx = 1;
        for (int e = 0; e < st->n_experts; e++)
            if (c[e] > mx)
                mx = c[e];
        fprintf(stderr,
                "layer %3d: std %6.2f%%  hottest %5.1f%%  coldest %5.1f%%  cold %d  group "
                "imbalance %.2f  overflow %llu\n",
                st->layer[i], st->util_std[i], st->max_share[i], st->min_share[i], st->cold[i],
                st->group_imbalance[i], (unsigned long long)st->overflow[i]);
        for (int e = 0; e < st->n_experts; e++) {
            int bar = (int)(40.0 * (double)c[e] / (double)mx + 0.5);
            fprintf(stderr, "  expert %4d %8llu |", e, (unsigned long long)c[e]);
            for (int b = 0; b < bar; b++)
                fputc('#', stderr);
            fputc('\n', stderr);
        }
    }
    fprintf(stderr,
            "expert utilisation std: overall %.2f%%, mean over layers %.2f%% (%llu selections)\n",
            st->overall_std, st->mean_layer_std, (unsigned long long)st->total);
    glm_expert_stats_free(st);
}

static void v_progress(void *user, int done, int total, double cs)
{
    (void)user;
    printf("input %3d/%d  cosine %.6f%s\n", done, total, cs, isfinite(cs) ? "" : "  NON-FINITE");
    fflush(stdout);
}

static const char *type_label(int t)
{
    return t >= 0 && t < GLM_LAYER_TYPE_COUNT ? glm_layer_type_name((glm_layer_type_t)t) : "-";
}

/* what a decoder layer holds, for the per-layer tables */
static const char *layer_kind(const struct glm_config *c, int l)
{
    if (l == c->num_hidden_layers)
        return "norm";
    return c->n_routed_experts > 0 && l >= c->first_k_dense_replace ? "attn+experts" : "attn+mlp";
}

static void print_layers(const struct glm_config *c, const struct glm_layer_stats *ls, int nl,
                         const char *title, const char *a, const char *b)
{
    printf("\n%s\n", title);
    printf("%5s %-12s %12s %11s %11s %12s %11s %11s %10s %10s %8s %8s\n", "layer", "holds", a,
           "std", "max|x|", b, "std", "max|err|", "cos min", "cos mean", "route!=", "dsa!=");
    for (int l = 0; l < nl; l++) {
        const struct glm_layer_stats *s = &ls[l];
        char name[16];
        if (l == c->num_hidden_layers)
            snprintf(name, sizeof(name), "norm");
        else
            snprintf(name, sizeof(name), "%d", l);
        char ra[16] = "-", da[16] = "-";
        if (s->route_mismatch >= 0)
            snprintf(ra, sizeof(ra), "%.2f%%", 100 * s->route_mismatch);
        if (s->dsa_mismatch >= 0)
            snprintf(da, sizeof(da), "%.2f%%", 100 * s->dsa_mismatch);
        printf("%5s %-12s %+12.6f %11.6f %11.5f %+12.6f %11.6f %11.6f %10.6f %10.6f %8s %8s\n",
               name, layer_kind(c, l), s->mean, s->std, s->max_abs, s->ref_mean, s->ref_std,
               s->max_abs_err, s->cosine_min, s->cosine_mean, ra, da);
    }
}

/* the layer whose minimum cosine drops most below the previous one's */
static int worst_drop(const struct glm_layer_stats *ls, int nl, double *cs)
{
    int w = 0;
    double best = -1, prev = 1;
    for (int l = 0; l < nl; l++) {
        double c = ls[l].cosine_min;
        if (isnan(c)) {
            *cs = c;
            return l;
        }
        if (prev - c > best) {
            best = prev - c;
            w = l;
        }
        prev = c;
    }
    *cs = ls[w].cosine_min;
    return w;
}

static void print_alone(const char *what, const double *alone, int blame)
{
    printf("%s", what);
    int any = 0;
    for (int t = 0; t < GLM_LAYER_TYPE_COUNT; t++)
        if (alone[t] >= -1 || isnan(alone[t])) {
            printf("%s %s %.6f", any ? "," : "", type_label(t), alone[t]);
            any = 1;
        }
    if (!any)
        printf(" nothing to measure\n");
    else
        printf("  -> %s\n", type_label(blame));
}

static int run_validate(glm_model_t *m, const struct opts *o)
{
    struct glm_validate_options vo;
    memset(&vo, 0, sizeof(vo));
    vo.n_inputs = o->v_inputs;
    vo.n_tokens = o->v_tokens;
    vo.seed = o->v_seed;
    vo.ref_threads = o->threads;
    vo.progress = v_progress;
    vo.original = o->original;
    vo.use_original = o->no_original ? GLM_VALIDATE_ORIGINAL_NONE : GLM_VALIDATE_ORIGINAL_AUTO;
    struct glm_validate_report *r;
    char plan[200];
    glm_precision_plan_t p;
    glm_plan_get(glm_model_device(m), &p);
    fprintf(stderr,
            "%s: validating %s (plan %s) against the FP32 reference on the %s; the per-input "
            "figure is device vs %s\n",
            prog, glm_model_name(m), glm_plan_format(&p, plan, sizeof(plan)),
            o->no_original ? "package's own weights" : "original model's weights if found",
            o->no_original ? "package" : "original (if found)");
    int vrc = glm_validate(m, &vo, &r);
    if (vrc) {
        log_rc("validate", vrc);
        return 1;
    }
    const struct glm_config *c = glm_model_config(m);
    if (r->original)
        printf("\noriginal model: %s (%s)\n", r->original_path,
               r->source_hash[0] ? r->source_hash : "hash not recorded");
    if (r->original_note)
        printf("%s%s\n", r->original ? "note: " : "\nno original model: ", r->original_note);
    if (!r->original)
        printf("measuring the device arithmetic only (device vs the package's own weights in "
               "FP32): the quantisation error of the export is NOT included\n");
    print_layers(c, r->layers, r->n_layers,
                 "per-layer statistics, device arithmetic (residual stream after each layer, "
                 "device vs package reference)",
                 "mean", "pkg mean");
    if (r->quant_layers)
        print_layers(c, r->quant_layers, r->n_layers,
                     "per-layer statistics, quantisation (package reference vs original "
                     "reference)",
                     "pkg mean", "orig mean");
    double dcs, qcs = 1;
    int dl = worst_drop(r->layers, r->n_layers, &dcs), ql = -1;
    if (r->quant_layers)
        ql = worst_drop(r->quant_layers, r->n_layers, &qcs);
    printf("\nlogits, cosine per input over all %d positions, %d inputs:\n", r->n_tokens,
           r->n_inputs);
    printf("  device arithmetic (device vs package reference): min %.6f, mean %.6f\n",
           r->device_min_cosine, r->device_mean_cosine);
    if (r->original)
        printf("  quantisation      (package vs original reference): min %.6f, mean %.6f\n",
               r->quant_min_cosine, r->quant_mean_cosine);
    printf("  %s: min %.6f (input %d), mean %.6f, max relative error %.3e\n",
           r->original ? "device vs original" : "device vs package ", r->min_cosine, r->worst_input,
           r->mean_cosine, r->max_rel_err);
    printf("  worst single position: cosine %.6f (input %d, position %d)\n", r->min_position_cosine,
           r->worst_position_input, r->worst_position);
    if (r->n_nonfinite)
        printf("  NON-FINITE outputs in %d of %d inputs\n", r->n_nonfinite, r->n_inputs);
    printf("\nwhere the error comes from (worst input %d):\n", r->worst_input);
    printf("  device arithmetic: largest drop at layer %d (%s), cosine %.6f\n", dl,
           layer_kind(c, dl), dcs);
    print_alone("    only this type at its plan precision, rest FP32:", r->device_alone,
                r->device_blame);
    if (r->original) {
        printf("  quantisation: largest drop at layer %d (%s), cosine %.6f\n", ql,
               layer_kind(c, ql), qcs);
        print_alone("    only this type's weights quantised, rest original:", r->quant_alone,
                    r->quant_blame);
    }
    if (r->n_nonfinite)
        printf("validation FAILED: non-finite output in %d of %d inputs (first: input %d)\n",
               r->n_nonfinite, r->n_inputs, r->worst_input);
    else
        printf("validation %s: min cosine %.6f %s %.2f against the %s (device %.0f ms, "
               "reference %.0f ms)\n",
               r->passed ? "PASSED" : "FAILED", r->min_cosine, r->passed ? ">=" : "<", r->threshold,
               r->original ? "original model" : "package (device arithmetic only)", r->device_ms,
               r->reference_ms);
    int ok = r->passed;
    glm_validate_report_free(r);
    return ok ? 0 : 1;
}

/* ---- bench ---------------------------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The "mJ/token | tokens/J" cells of a bench row ("- | -" without figures). */
static void bench_energy_cells(const struct gi_energy *a, const struct gi_energy *b, int tokens,
                               char *buf, size_t size)
{
    double mjt, tpj;
    if (gi_energy_per_token(a, b, tokens, &mjt, &tpj))
        snprintf(buf, size, "%.4f | %.1f", mjt, tpj);
    else
        snprintf(buf, size, "- | -");
}

static int run_bench(glm_model_t *m, tx_device_t *dev, const struct opts *o)
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
           "%% of BW | mJ/token | tokens/J |\n");
    printf("| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
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
        struct gi_energy pe0, pe1, te0, te1;
        gi_energy_read(dev, &pe0);
        double t0 = now_ms();
        if (!rc && glm_eval(s, ids, pp, 0, lg)) {
            log_err("pp");
            rc = 1;
        }
        double pp_ms = now_ms() - t0;
        gi_energy_read(dev, &pe1);
        glm_session_reset(s);
        /* tg: single-token passes from an empty context, each with the
         * lm_head and on-device sampling (only the token id comes back) */
        glm_model_decode_times(m, &dt0);
        gi_energy_read(dev, &te0);
        t0 = now_ms();
        for (int i = 0; i < tg && !rc; i++)
            if (glm_decode_batch(&s, &ids[i], 1, NULL, &greedy, &next)) {
                log_err("tg");
                rc = 1;
            }
        double tg_ms = now_ms() - t0;
        gi_energy_read(dev, &te1);
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
        char pe[48], te[48];
        bench_energy_cells(&pe0, &pe1, pp, pe, sizeof(pe));
        bench_energy_cells(&te0, &te1, tg, te, sizeof(te));
        printf("| %s | %.2f GiB | %.3f B | TX8 %s | %s | pp%d | %.2f | %.1f MB | %.2f | - | %s |\n",
               glm_model_name(m), size_gib, params_b, di.backend, short_plan, pp, pps, bpt / 1e6,
               bpt * pps / 1e9, pe);
        char pct[16] = "-";
        if (bw > 0)
            snprintf(pct, sizeof(pct), "%.1f%%", 100.0 * bpt * tgs / 1e9 / bw);
        printf("| %s | %.2f GiB | %.3f B | TX8 %s | %s | tg%d | %.2f | %.1f MB | %.2f | %s | %s |\n",
               glm_model_name(m), size_gib, params_b, di.backend, short_plan, tg, tgs, bpt / 1e6,
               bpt * tgs / 1e9, pct, te);
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

/* ---- interactive ---------------------------------------------------------- */

/*
 * The chat loop. Every turn renders the whole conversation through the
 * model's chat template (earlier reasoning dropped, contents stripped, as
 * the template does), keeps the common prefix of the KV cache and
 * evaluates only the rest. When the conversation no longer fits the
 * context, the oldest turns are dropped (said on stderr) and the
 * conversation is rendered again; a single message that cannot fit is
 * refused and the chat goes on. Lines are read whole (getline).
 */
struct chat {
    struct tx_chat_message *msg;
    char **own; /* strings owned, per message (NULL: not owned) */
    size_t n, cap;
};

static int chat_push(struct chat *c, const char *role, char *text, int owned)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        void *a = realloc(c->msg, cap * sizeof(*c->msg)), *b = NULL;
        if (a)
            c->msg = a;
        b = a ? realloc(c->own, cap * sizeof(*c->own)) : NULL;
        if (!a || !b)
            return -1;
        c->own = b;
        c->cap = cap;
    }
    c->msg[c->n] = (struct tx_chat_message){role, text, NULL};
    c->own[c->n] = owned ? text : NULL;
    c->n++;
    return 0;
}

static void chat_drop(struct chat *c, size_t i)
{
    free(c->own[i]);
    memmove(c->msg + i, c->msg + i + 1, (c->n - i - 1) * sizeof(*c->msg));
    memmove(c->own + i, c->own + i + 1, (c->n - i - 1) * sizeof(*c->own));
    c->n--;
}

static void chat_free(struct chat *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->own[i]);
    free(c->msg);
    free(c->own);
}

static int interactive(glm_model_t *m, glm_session_t *s, const struct opts *o,
                       struct glm_sampling *smp)
{
    int n_ctx = glm_session_n_ctx(s), rc = 0;
    unsigned flags = o->no_think ? TX_CHAT_NO_THINKING : 0;
    struct chat c = {NULL, NULL, 0, 0};
    int32_t *cache = malloc(sizeof(int32_t) * (size_t)n_ctx * 2), *out = cache + n_ctx;
    int n_cache = 0;
    char *line = NULL;
    size_t lcap = 0;
    if (!cache) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    if (glm_session_pos(s) > 0) {
        /* the one-shot prompt before is not a turn of this conversation */
        glm_session_reset(s);
    }
    if (o->system && chat_push(&c, "system", (char *)o->system, 0))
        goto oom;
    for (;;) {
        fprintf(stderr, "\n> ");
        ssize_t L = getline(&line, &lcap, stdin);
        if (L < 0)
            break;
        while (L && (line[L - 1] == '\n' || line[L - 1] == '\r'))
            line[--L] = 0;
        if (!L)
            continue;
        char *u = strdup(line);
        if (!u || chat_push(&c, "user", u, 1)) {
            free(u);
            goto oom;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        /* a message that cannot fit even alone is refused, the history kept */
        {
            size_t first = o->system ? 1 : 0;
            struct tx_chat_message alone[2];
            size_t na = 0;
            if (first)
                alone[na++] = c.msg[0];
            alone[na++] = c.msg[c.n - 1];
            if (glm_chat_encode(m, alone, na, flags, &ids, &n)) {
                log_err("chat");
                rc = 1;
                goto done;
            }
            free(ids);
            ids = NULL;
            if (n >= (size_t)n_ctx) {
                fprintf(stderr,
                        "%s: this message renders to %zu tokens and the context has %d "
                        "positions (-c): not sent\n",
                        prog, n, n_ctx);
                chat_drop(&c, c.n - 1);
                continue;
            }
        }
        for (;;) {
            if (glm_chat_encode(m, c.msg, c.n, flags, &ids, &n)) {
                log_err("chat");
                rc = 1;
                goto done;
            }
            if (n < (size_t)n_ctx)
                break; /* fits, with room for at least one generated token */
            free(ids);
            ids = NULL;
            size_t first = o->system ? 1 : 0;
            if (c.n - first <= 1) { /* the new message alone */
                fprintf(stderr,
                        "%s: this message renders to %zu tokens and the context has %d "
                        "positions (-c): not sent\n",
                        prog, n, n_ctx);
                chat_drop(&c, c.n - 1);
                break;
            }
            /* context shift by turns: drop the oldest turn and render again */
            fprintf(stderr, "%s: context full (%zu of %d positions): dropping the oldest turn\n",
                    prog, n, n_ctx);
            chat_drop(&c, first);
            while (c.n > first + 1 && strcmp(c.msg[first].role, "user"))
                chat_drop(&c, first);
        }
        if (!ids)
            continue;
        /* reuse the common prefix of the cache; evaluate at least one token */
        size_t k = 0;
        while (k < (size_t)n_cache && k < n && cache[k] == ids[k])
            k++;
        if (k == n)
            k--;
        glm_session_truncate(s, (int)k);
        fprintf(stderr, "[chat: %zu tokens, %zu reused from the cache]\n", n, k);
        struct glm_generate_params gp;
        memset(&gp, 0, sizeof(gp));
        gp.prompt = ids + k;
        gp.n_prompt = (int)(n - k);
        gp.n_predict = o->n_predict;
        gp.sampling = *smp;
        gp.on_token = on_token;
        struct glm_timings t;
        int n_out = 0;
        int grc = glm_generate(s, &gp, out, n_ctx, &n_out, &t);
        /* the cache holds the rendered ids, then what was generated */
        memcpy(cache, ids, n * sizeof(int32_t));
        int pos = glm_session_pos(s);
        for (int i = 0; i < n_out && (int)n + i < n_ctx; i++)
            cache[n + (size_t)i] = out[i];
        n_cache = pos;
        free(ids);
        if (grc) {
            log_rc("generate", grc);
            rc = 1;
            goto done;
        }
        char *reply = NULL;
        size_t rl = 0;
        char err[256];
        if (tx_tokenizer_decode(glm_model_tokenizer(m), out,
                                (size_t)(n_out < n_ctx ? n_out : n_ctx), 0, &reply, &rl, err,
                                sizeof(err))) {
            fprintf(stderr, "%s: decode: %s\n", prog, err);
            rc = 1;
            goto done;
        }
        if (chat_push(&c, "assistant", reply, 1)) {
            free(reply);
            goto oom;
        }
        if (t.stop == GLM_STOP_CONTEXT)
            fprintf(stderr,
                    "\n%s: the context is full (%d positions): the reply was cut; the next turn "
                    "drops the oldest turns\n",
                    prog, n_ctx);
        if (interrupted) {
            fputc('\n', stdout);
            fflush(stdout);
            print_perf(&t);
            rc = 130;
            goto done;
        }
        smp->seed++;
    }
    goto done;
oom:
    fprintf(stderr, "%s: out of memory\n", prog);
    rc = 1;
done:
    free(line);
    free(cache);
    chat_free(&c);
    return rc;
}

/*
 * The package's generation_config.json (glm_model_generation_config) gives
 * the defaults of --temp, --top-k and --top-p that the command line leaves
 * unset: do_sample false means greedy (temperature 0), else its
 * temperature / top_k / top_p where present. Says where the values came
 * from on stderr.
 */
static void sampling_defaults(const glm_model_t *m, struct opts *o)
{
    struct glm_generation_config g;
    if (glm_model_generation_config(m, &g) != 1) {
        fprintf(stderr,
                "%s: sampling defaults: glm-inference's own (the package has no "
                "generation_config.json)\n",
                prog);
        return;
    }
    char used[160] = "", *p = used;
    size_t left = sizeof(used);
#define USED(...)                                                                                  \
    do {                                                                                           \
        int k_ = snprintf(p, left, __VA_ARGS__);                                                   \
        if (k_ > 0 && (size_t)k_ < left) {                                                         \
            p += k_;                                                                               \
            left -= (size_t)k_;                                                                    \
        }                                                                                          \
    } while (0)
    if ((g.has & GLM_GEN_HAS_DO_SAMPLE) && !g.do_sample) {
        if (!o->set_temp) {
            o->temp = 0.0f;
            USED("%sdo_sample false (greedy)", *used ? ", " : "");
        }
    } else if ((g.has & GLM_GEN_HAS_TEMPERATURE) && !o->set_temp) {
        o->temp = g.temperature;
        USED("%stemperature %.2f", *used ? ", " : "", (double)g.temperature);
    }
    if ((g.has & GLM_GEN_HAS_TOP_K) && !o->set_top_k) {
        o->top_k = g.top_k;
        USED("%stop_k %d", *used ? ", " : "", g.top_k);
    }
    if ((g.has & GLM_GEN_HAS_TOP_P) && !o->set_top_p) {
        o->top_p = g.top_p;
        USED("%stop_p %.2f", *used ? ", " : "", (double)g.top_p);
    }
#undef USED
    if (*used)
        fprintf(stderr,
                "%s: sampling defaults from the package's generation_config.json: %s (the rest: "
                "glm-inference's own; the command line overrides)\n",
                prog, used);
    else
        fprintf(stderr,
                "%s: sampling defaults: glm-inference's own (the package's "
                "generation_config.json sets none that the command line leaves open)\n",
                prog);
}

int main(int argc, char **argv)
{
    struct opts o;
    memset(&o, 0, sizeof(o));
    o.n_predict = 128;
    o.seed = -1;
    o.temp = 0.8f;
    o.top_k = 40;
    o.top_p = 0.95f;
    o.min_p = 0.05f;
    o.repeat_penalty = 1.0f;
    o.repeat_last_n = 64;
    o.sampler_order = GLM_SAMPLER_ORDER_LLAMA;
    o.lambda = 0.2f;
    o.v_inputs = 100;
    o.v_tokens = 8;
    o.bench_pp = 512;
    o.bench_tg = 128;
    o.bench_reps = 1;
    enum {
        O_TOKENS = 1000,
        O_TEMP,
        O_TOPK,
        O_TOPP,
        O_CHAT,
        O_SYSTEM,
        O_NOTHINK,
        O_IGNEOS,
        O_NODISP,
        O_DEVICE,
        O_PREC,
        O_MOECFG,
        O_NOMOECFG,
        O_LB,
        O_LAMBDA,
        O_NAME,
        O_LOGITS,
        O_VALIDATE,
        O_VIN,
        O_VTOK,
        O_VSEED,
        O_ORIGINAL,
        O_NOORIGINAL,
        O_BENCH,
        O_BPLANS,
        O_BPP,
        O_BTG,
        O_BDEPTH,
        O_BREPS,
        O_CTK,
        O_CTV,
        O_ESTATS,
        O_MEMVIEW,
        O_CKPT,
        O_STREAM,
        O_MAXW,
        O_XCACHE,
        O_XPOLICY,
        O_NOPF,
        O_BCACHE,
        O_BCFRAC,
        O_VERIFY,
        O_NOVERIFY,
        O_BATCH_INVARIANT,
        O_MINP,
        O_REPPEN,
        O_PRESPEN,
        O_FREQPEN,
        O_REPLASTN,
        O_SAMPLERS,
        O_SORDER,
        O_CHATFMT,
        O_EPREB,
    };
    static const struct option lo[] = {
        {"ep-rebalance", required_argument, NULL, O_EPREB},
        {"checkpoint", required_argument, NULL, O_CKPT},
        {"model", required_argument, NULL, 'm'},
        {"prompt", required_argument, NULL, 'p'},
        {"file", required_argument, NULL, 'f'},
        {"tokens", required_argument, NULL, O_TOKENS},
        {"n-predict", required_argument, NULL, 'n'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"batch-size", required_argument, NULL, 'b'},
        {"seed", required_argument, NULL, 's'},
        {"threads", required_argument, NULL, 't'},
        {"temp", required_argument, NULL, O_TEMP},
        {"top-k", required_argument, NULL, O_TOPK},
        {"top-p", required_argument, NULL, O_TOPP},
        {"min-p", required_argument, NULL, O_MINP},
        {"repeat-penalty", required_argument, NULL, O_REPPEN},
        {"presence-penalty", required_argument, NULL, O_PRESPEN},
        {"frequency-penalty", required_argument, NULL, O_FREQPEN},
        {"repeat-last-n", required_argument, NULL, O_REPLASTN},
        {"samplers", required_argument, NULL, O_SAMPLERS},
        {"sampler-order", required_argument, NULL, O_SORDER},
        {"chat", no_argument, NULL, O_CHAT},
        {"chat-template-format", required_argument, NULL, O_CHATFMT},
        {"chat-template", required_argument, NULL, O_CHATFMT},
        {"system", required_argument, NULL, O_SYSTEM},
        {"no-think", no_argument, NULL, O_NOTHINK},
        {"ignore-eos", no_argument, NULL, O_IGNEOS},
        {"no-display-prompt", no_argument, NULL, O_NODISP},
        {"interactive", no_argument, NULL, 'i'},
        {"device", required_argument, NULL, O_DEVICE},
        {"precision", required_argument, NULL, O_PREC},
        {"moe-config", required_argument, NULL, O_MOECFG},
        {"no-moe-config", no_argument, NULL, O_NOMOECFG},
        {"load-balance", required_argument, NULL, O_LB},
        {"lambda", required_argument, NULL, O_LAMBDA},
        {"name", required_argument, NULL, O_NAME},
        {"logits", required_argument, NULL, O_LOGITS},
        {"validate", no_argument, NULL, O_VALIDATE},
        {"validate-inputs", required_argument, NULL, O_VIN},
        {"validate-tokens", required_argument, NULL, O_VTOK},
        {"validate-seed", required_argument, NULL, O_VSEED},
        {"original", required_argument, NULL, O_ORIGINAL},
        {"no-original", no_argument, NULL, O_NOORIGINAL},
        {"bench", no_argument, NULL, O_BENCH},
        {"bench-plans", required_argument, NULL, O_BPLANS},
        {"bench-pp", required_argument, NULL, O_BPP},
        {"bench-tg", required_argument, NULL, O_BTG},
        {"bench-depth", required_argument, NULL, O_BDEPTH},
        {"bench-reps", required_argument, NULL, O_BREPS},
        {"cache-type-k", required_argument, NULL, O_CTK},
        {"ctk", required_argument, NULL, O_CTK},
        {"cache-type-v", required_argument, NULL, O_CTV},
        {"ctv", required_argument, NULL, O_CTV},
        {"expert-stats", no_argument, NULL, O_ESTATS},
        {"memory-view", no_argument, NULL, O_MEMVIEW},
        {"stream", no_argument, NULL, O_STREAM},
        {"expert-cache", required_argument, NULL, O_XCACHE},
        {"expert-policy", required_argument, NULL, O_XPOLICY},
        {"no-prefetch", no_argument, NULL, O_NOPF},
        {"bench-cache", no_argument, NULL, O_BCACHE},
        {"bench-cache-frac", required_argument, NULL, O_BCFRAC},
        {"max-weight-mem", required_argument, NULL, O_MAXW},
        {"verify", no_argument, NULL, O_VERIFY},
        {"no-verify", no_argument, NULL, O_NOVERIFY},
        {"batch-invariant", no_argument, NULL, O_BATCH_INVARIANT},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    /* every numeric option: its name and accepted range on error (common/cli.h) */
#define OPT(call)                                                                                  \
    do {                                                                                           \
        if ((call) < 0)                                                                            \
            return 2;                                                                              \
    } while (0)
    while ((ch = getopt_long(argc, argv, "m:p:f:n:c:b:s:t:ivh", lo, NULL)) != -1) {
        switch (ch) {
        case O_CKPT:
        case 'm':
            o.checkpoint = optarg;
            break;
        case 'p':
            o.prompt = optarg;
            break;
        case 'f':
            o.file = optarg;
            break;
        case O_TOKENS:
            o.tokens = optarg;
            break;
        case 'n':
            OPT(txc_opt_int(prog, "-n", optarg, -1, INT_MAX,
                            "-1 = until a stop token or the context is full", &o.n_predict));
            o.n_predict_set = 1;
            break;
        case 'c':
            OPT(txc_opt_int(prog, "-c", optarg, 0, INT_MAX, "0 = the default", &o.n_ctx));
            break;
        case 'b':
            OPT(txc_opt_int(prog, "-b", optarg, 0, INT_MAX, "0 = the default", &o.n_batch));
            break;
        case 's':
            OPT(txc_opt_long(prog, "-s", optarg, -1, LLONG_MAX, "-1 = from the clock", &o.seed));
            break;
        case 't':
            OPT(txc_opt_int(prog, "-t", optarg, 0, 4096, "0 = all cores", &o.threads));
            break;
        case O_TEMP:
            OPT(txc_opt_float(prog, "--temp", optarg, 0, 100, 0, &o.temp));
            o.set_temp = 1;
            break;
        case O_TOPK:
            OPT(txc_opt_int(prog, "--top-k", optarg, 0, INT_MAX, "0 = off", &o.top_k));
            o.set_top_k = 1;
            break;
        case O_TOPP:
            OPT(txc_opt_float(prog, "--top-p", optarg, 0, 1, TXC_LO_OPEN, &o.top_p));
            o.set_top_p = 1;
            break;
        case O_MINP:
            OPT(txc_opt_float(prog, "--min-p", optarg, 0, 1, 0, &o.min_p));
            break;
        case O_REPPEN:
            OPT(txc_opt_float(prog, "--repeat-penalty", optarg, 0, 100, 0, &o.repeat_penalty));
            break;
        case O_PRESPEN:
            OPT(txc_opt_float(prog, "--presence-penalty", optarg, -100, 100, 0,
                              &o.presence_penalty));
            break;
        case O_FREQPEN:
            OPT(txc_opt_float(prog, "--frequency-penalty", optarg, -100, 100, 0,
                              &o.frequency_penalty));
            break;
        case O_REPLASTN:
            OPT(txc_opt_int(prog, "--repeat-last-n", optarg, -1, GLM_MAX_REPEAT_LAST_N,
                            "-1 = the context", &o.repeat_last_n));
            break;
        case O_SAMPLERS: {
            /* llama.cpp's names; the device has two orders */
            char norm[256];
            size_t k = 0;
            for (const char *q = optarg; *q && k + 1 < sizeof(norm); q++)
                norm[k++] = *q == ',' ? ';' : *q;
            norm[k] = 0;
            const char *body = norm;
            if (!strncmp(body, "penalties;", 10))
                body += 10;
            if (!strcmp(body, "top_k;top_p;min_p;temperature")) {
                o.sampler_order = GLM_SAMPLER_ORDER_LLAMA;
            } else if (!strcmp(body, "temperature;top_k;top_p;min_p")) {
                o.sampler_order = GLM_SAMPLER_ORDER_TEMP_FIRST;
            } else {
                fprintf(stderr,
                        "%s: --samplers: '%s' is not an order the device has; use "
                        "top_k;top_p;min_p;temperature (llama.cpp) or "
                        "temperature;top_k;top_p;min_p (transformers), optionally after "
                        "penalties;\n",
                        prog, optarg);
                return 2;
            }
            break;
        }
        case O_SORDER:
            if (!strcmp(optarg, "llama")) {
                o.sampler_order = GLM_SAMPLER_ORDER_LLAMA;
            } else if (!strcmp(optarg, "temp-first")) {
                o.sampler_order = GLM_SAMPLER_ORDER_TEMP_FIRST;
            } else {
                fprintf(stderr, "%s: --sampler-order: '%s' is not llama or temp-first\n", prog,
                        optarg);
                return 2;
            }
            break;
        case O_CHAT:
            o.chat = 1;
            break;
        case O_CHATFMT: {
            int f = tx_chat_format_from_name(optarg);
            if (f < 0) {
                fprintf(stderr, "%s: --chat-template-format: %s\n", prog, tx_last_error());
                return 2;
            }
            o.chat_format = f;
            break;
        }
        case O_SYSTEM:
            o.system = optarg;
            break;
        case O_NOTHINK:
            o.no_think = 1;
            break;
        case O_IGNEOS:
            o.ignore_eos = 1;
            break;
        case O_NODISP:
            o.no_display = 1;
            break;
        case 'i':
            o.interactive = 1;
            break;
        case O_DEVICE:
            o.device = optarg;
            break;
        case O_PREC:
            o.precision = optarg;
            break;
        case O_MOECFG:
            o.moe_config = optarg;
            break;
        case O_EPREB:
            OPT(txc_opt_long(prog, "--ep-rebalance", optarg, 0, INT32_MAX, NULL, &o.ep_rebalance));
            break;
        case O_NOMOECFG:
            o.no_moe_config = 1;
            break;
        case O_LB:
            o.load_balance = optarg;
            break;
        case O_LAMBDA:
            OPT(txc_opt_float(prog, "--lambda", optarg, 0, 100, 0, &o.lambda));
            o.lambda_set = 1;
            break;
        case O_NAME:
            o.name = optarg;
            break;
        case O_LOGITS:
            o.logits = optarg;
            break;
        case O_VALIDATE:
            o.validate = 1;
            break;
        case O_VIN:
            OPT(txc_opt_int(prog, "--validate-inputs", optarg, 1, 1000000, NULL, &o.v_inputs));
            break;
        case O_VTOK:
            OPT(txc_opt_int(prog, "--validate-tokens", optarg, 1, 1 << 20, NULL, &o.v_tokens));
            break;
        case O_VSEED:
            OPT(txc_opt_u64(prog, "--validate-seed", optarg, &o.v_seed));
            break;
        case O_ORIGINAL:
            o.original = optarg;
            break;
        case O_NOORIGINAL:
            o.no_original = 1;
            break;
        case O_BENCH:
            o.bench = 1;
            break;
        case O_BPLANS:
            o.bench_plans = optarg;
            break;
        case O_BPP:
            OPT(txc_opt_int(prog, "--bench-pp", optarg, 1, 1 << 20, NULL, &o.bench_pp));
            break;
        case O_BTG:
            OPT(txc_opt_int(prog, "--bench-tg", optarg, 1, 1 << 20, NULL, &o.bench_tg));
            break;
        case O_BREPS:
            OPT(txc_opt_int(prog, "--bench-reps", optarg, 1, BENCH_REPS_MAX, NULL, &o.bench_reps));
            break;
        case O_CTK:
        case O_CTV: {
            int t = glm_cache_type_parse(optarg);
            if (t < 0) {
                fprintf(stderr, "%s: --cache-type-%c %s: expected f32, f16, bf16, q8_0 (int8) or "
                                "q4_0 (int4)\n",
                        prog, ch == O_CTK ? 'k' : 'v', optarg);
                return 2;
            }
            *(ch == O_CTK ? &o.cache_k : &o.cache_v) = t;
            break;
        }
        case O_BDEPTH: {
            char e[160];
            if (bench_depth_parse(optarg, o.bench_depth, BENCH_DEPTH_MAX, &o.n_bench_depth, e,
                                  sizeof(e)) < 0) {
                fprintf(stderr, "%s: %s\n", prog, e);
                return 2;
            }
            break;
        }
        case O_ESTATS:
            o.expert_stats = 1;
            break;
        case O_MEMVIEW:
            o.memory_view = 1;
            break;
        case O_STREAM:
            o.stream = 1;
            break;
        case O_XCACHE: {
            int64_t v = tx_parse_size(optarg);
            if (v <= 0) {
                fprintf(stderr,
                        "%s: --expert-cache: '%s' is not a size > 0 (bytes, or with K, M, G)\n",
                        prog, optarg);
                return 2;
            }
            o.expert_cache = (unsigned long long)v;
            break;
        }
        case O_XPOLICY:
            if (strcmp(optarg, "lru") && strcmp(optarg, "lrfu")) {
                fprintf(stderr, "%s: --expert-policy: '%s' is not lrfu or lru\n", prog, optarg);
                return 2;
            }
            o.expert_lru = !strcmp(optarg, "lru");
            break;
        case O_NOPF:
            o.no_prefetch = 1;
            break;
        case O_BCACHE:
            o.bench_cache = 1;
            break;
        case O_BCFRAC: {
            char *e2;
            o.bench_cache_frac = strtod(optarg, &e2);
            if (e2 == optarg || *e2 || !(o.bench_cache_frac > 0 && o.bench_cache_frac <= 1)) {
                fprintf(stderr, "%s: --bench-cache-frac: '%s' is not a number in (0, 1]\n", prog,
                        optarg);
                return 2;
            }
            break;
        }
        case O_MAXW: {
            int64_t v = tx_parse_size(optarg);
            if (v <= 0) {
                fprintf(stderr,
                        "%s: --max-weight-mem: '%s' is not a size > 0 (bytes, or with K, M, G)\n",
                        prog, optarg);
                return 2;
            }
            o.max_weight_mem = (unsigned long long)v;
            break;
        }
        case O_VERIFY:
            o.verify = 1;
            break;
        case O_BATCH_INVARIANT:
            o.batch_invariant = 1;
            break;
        case O_NOVERIFY:
            o.no_verify = 1;
            break;
        case 'v':
            verbose = 1;
            break;
        default: /* --help, or an option getopt_long has reported */
            return txc_help_or_usage(ch, usage);
        }
    }
    if (optind < argc)
        return txc_usage_error(prog, usage, "unexpected argument '%s'", argv[optind]);
    if (!o.checkpoint)
        return txc_usage_error(prog, usage, "--checkpoint MODEL.smd is required");
    if (o.verify)
        return txc_verify_package(prog, o.checkpoint);
    int n_sources = !!o.prompt + !!o.file + !!o.tokens;
    if (n_sources > 1) {
        fprintf(stderr, "%s: give only one of -p, -f and --tokens\n", prog);
        return 2;
    }
    if ((o.original || o.no_original) && !o.validate)
        return txc_usage_error(prog, usage, "--original and --no-original need --validate");
    if (o.original && o.no_original)
        return txc_usage_error(prog, usage, "give only one of --original and --no-original");
    if (o.interactive && !isatty(STDIN_FILENO)) {
        fprintf(stderr, "%s: -i needs a terminal on stdin; not interactive\n", prog);
        o.interactive = 0;
    }

    /* under mpirun: MPI_Init, this rank's share of the --device list
     * (docs/multi-device.md, "Several hosts"); otherwise nothing */
    struct glm_mpi_run mr;
    int mrc = glm_mpi_begin(&mr, prog, &argc, &argv, &o.device);
    if (mrc)
        return mrc;
    int mpi_agreed = 0;
    if (mr.on) {
        prog = mr.prog;
        if (o.bench_cache) {
            fprintf(stderr, "%s: --bench-cache runs on one process: not under mpirun\n", prog);
            glm_mpi_end(&mr);
            return 2;
        }
    }

    /* device(s) and plan: --device A,B,... puts one model on several
     * (expert parallelism, tools/lib/device_list.c); under mpirun, this rank's share */
    tx_device_t *devs[GLM_EP_MAX_DEVICES] = {NULL};
    int n_devs = 0;
    if (mdev_open(prog, o.device, devs, GLM_EP_MAX_DEVICES, &n_devs)) {
        if (mr.on)
            glm_mpi_devices_ok(&mr, 0); /* the others wait for this rank's verdict */
        glm_mpi_end(&mr);
        return 1;
    }
    tx_device_t *dev = devs[0];
    int rc = 1;
    glm_model_t *m = NULL;
    glm_session_t *s = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    char *text = NULL;
    glm_precision_plan_t plan;
    glm_plan_golden(&plan);
    if (o.precision && glm_plan_parse(o.precision, &plan)) {
        log_err("--precision");
        rc = 2;
        goto out;
    }
    for (int i = 0; i < n_devs; i++)
        if (glm_plan_set(devs[i], &plan)) {
            log_err("precision");
            goto out;
        }
    if ((n_devs > 1 || mr.n_total > 1) && (o.bench_cache || o.stream || o.expert_cache)) {
        fprintf(stderr, "%s: several devices: --bench-cache, --stream and --expert-cache are for "
                        "one device\n", prog);
        rc = 2;
        goto out;
    }

    if (o.bench_cache) {
        struct bench_cache_opts bo = {o.checkpoint, o.bench_cache_frac > 0 ? o.bench_cache_frac
                                                                           : 0.25,
                                      o.bench_tg, 32, o.bench_pp, getenv("TX_BENCH_CACHE_MODES")};
        rc = bench_cache_run(dev, &bo);
        goto out;
    }
    struct glm_load_options lo_ = {.name = o.name};
    if (o.stream)
        lo_.flags |= GLM_LOAD_STREAM;
    if (o.expert_cache) {
        lo_.flags |= GLM_LOAD_EXPERT_CACHE;
        lo_.expert_cache_bytes = o.expert_cache;
    }
    if (o.expert_lru)
        lo_.flags |= GLM_LOAD_EXPERT_LRU;
    if (o.no_prefetch)
        lo_.flags |= GLM_LOAD_EXPERT_NO_PREFETCH;
    if (o.no_verify)
        lo_.flags |= GLM_LOAD_NO_VERIFY;
    if (o.batch_invariant)
        lo_.flags |= GLM_LOAD_BATCH_INVARIANT;
    lo_.max_weight_bytes = o.max_weight_mem;
    double t0 = now_ms();
    int ep_groups = 0; /* several devices: the groups of the MoE settings file */
    if (n_devs > 1 || mr.n_total > 1) {
        struct glm_moe_options pre;
        glm_moe_defaults(&pre);
        const char *pc = o.moe_config;
        if (!pc && !o.no_moe_config && access("config/expert_parallel.yaml", R_OK) == 0)
            pc = "config/expert_parallel.yaml";
        if (pc && glm_moe_config_load(pc, &pre)) {
            log_err("moe config");
            goto out;
        }
        ep_groups = pc ? pre.expert_parallel : 0;
    }
    int lrc;
    if (mr.on) {
        /* every rank got here: the load is collective */
        mpi_agreed = 1;
        if (!glm_mpi_devices_ok(&mr, 1))
            goto out;
        struct glm_ep_options epo = {
            .transport = &mr.t,
            .n_devices_total = mr.n_total,
            .expert_parallel = ep_groups,
            .reserve_bytes = mdev_kv_reserve(o.checkpoint, 1, o.n_ctx, o.cache_k, o.cache_v)};
        lrc = glm_model_load_ep(devs, n_devs, o.checkpoint, &lo_, &epo, &m);
    } else {
        /* device 0 keeps room for the session's KV cache */
        uint64_t kv_reserve =
            n_devs > 1 ? mdev_kv_reserve(o.checkpoint, 1, o.n_ctx, o.cache_k, o.cache_v) : 0;
        lrc = mdev_load(devs, n_devs, o.checkpoint, &lo_, ep_groups, kv_reserve, &m);
    }
    if (lrc) {
        log_rc("load", lrc);
        goto out;
    }
    if (o.ep_rebalance > 0) {
        if (n_devs <= 1 && !(mr.on && mr.n_total > 1)) {
            fprintf(stderr, "%s: --ep-rebalance needs several devices (--device A,B,...)\n", prog);
            goto out;
        }
        if (!mr.on || mr.t.rank == 0) {
            reb_model = m;
            reb_every = o.ep_rebalance;
        }
    }
    if (mr.on) {
        struct glm_mpi_call_stats zero[4];
        glm_mpi_stats(zero, 1); /* the figures count the passes, not the load */
    }
    if (mr.on && mr.t.rank > 0) {
        /* a worker: serve rank 0's MoE layers until it frees its model */
        fprintf(stderr, "%s: serving the MoE layers of rank 0\n", prog);
        int wrc = glm_ep_worker_run(m);
        if (wrc) {
            /* rank 0 may be waiting for this rank's rows: end the job */
            log_rc("expert parallel worker", wrc);
            glm_mpi_abort(1);
            goto out;
        }
        rc = 0;
        goto out;
    }
    const struct glm_config *c = glm_model_config(m);
    if ((o.cache_k || o.cache_v) &&
        glm_model_set_cache_types(m, (glm_cache_type_t)o.cache_k, (glm_cache_type_t)o.cache_v)) {
        log_err("--cache-type-k/-v");
        goto out;
    }
    struct glm_model_info mi;
    glm_model_info(m, &mi);
    {
        struct tx_device_info di;
        tx_device_info(dev, &di);
        char pb[200];
        fprintf(stderr,
                "%s: loaded %s (%s, %d layers, hidden %d, %d experts top-%d, vocab %d) on %s "
                "[%s] in %.0f ms (%.1f MiB at %.0f MiB/s)\n",
                prog, glm_model_name(m), glm_arch_name(c->arch), c->num_hidden_layers,
                c->hidden_size, c->n_routed_experts, c->num_experts_per_tok, c->vocab_size, di.name,
                di.backend, now_ms() - t0, mi.package_bytes / 1048576.0, mi.io_mib_s);
        fprintf(stderr, "%s: precision plan %s, KV cache K %s, V %s\n", prog,
                glm_plan_format(&plan, pb, sizeof(pb)),
                glm_cache_type_name((glm_cache_type_t)o.cache_k),
                glm_cache_type_name((glm_cache_type_t)o.cache_v));
        struct glm_expert_cache_stats xs;
        if (mi.streaming == 2 && !glm_model_expert_cache_stats(m, &xs))
            fprintf(stderr,
                    "%s: expert cache: %.1f MiB resident, %llu of %llu routed experts in %.1f "
                    "MiB of slots (%s, prefetch %s)\n",
                    prog, (mi.weights_bytes - xs.cache_bytes) / 1048576.0,
                    (unsigned long long)xs.slots, (unsigned long long)xs.experts,
                    xs.cache_bytes / 1048576.0, xs.policy ? "LRU" : "LRFU",
                    xs.prefetch ? "on" : "off");
        else if (mi.streaming)
            fprintf(stderr,
                    "%s: parameter shard prefetch: %.1f MiB resident, layers streamed from the "
                    "package\n",
                    prog, mi.weights_bytes / 1048576.0);
    }

    /* MoE settings */
    struct glm_moe_options mo;
    glm_moe_defaults(&mo);
    const char *mcfg = o.moe_config;
    if (!mcfg && !o.no_moe_config && access("config/expert_parallel.yaml", R_OK) == 0)
        mcfg = "config/expert_parallel.yaml";
    if (mcfg) {
        if (glm_moe_config_load(mcfg, &mo)) {
            log_err("moe config");
            goto out;
        }
        if (verbose || o.expert_stats)
            fprintf(stderr,
                    "%s: %s: expert_parallel %d, capacity_factor %.2f, min_expert_util %.2f\n",
                    prog, mcfg, mo.expert_parallel, (double)mo.capacity_factor,
                    (double)mo.min_expert_util);
    }
    if (o.load_balance) {
        if (!strcmp(o.load_balance, "on"))
            mo.balance = GLM_BALANCE_ON;
        else if (!strcmp(o.load_balance, "off"))
            mo.balance = GLM_BALANCE_OFF;
        else if (!strcmp(o.load_balance, "auto"))
            mo.balance = GLM_BALANCE_AUTO;
        else {
            fprintf(stderr, "%s: --load-balance: expected on, off or auto\n", prog);
            rc = 2;
            goto out;
        }
    }
    if (o.lambda_set)
        mo.lambda = o.lambda;
    if (c->n_routed_experts > 0 && c->n_routed_experts % mo.expert_parallel) {
        fprintf(stderr, "%s: expert_parallel %d does not divide %d experts; using 1\n", prog,
                mo.expert_parallel, c->n_routed_experts);
        mo.expert_parallel = 1;
    }
    if (glm_model_set_moe(m, &mo)) {
        log_err("moe");
        goto out;
    }

    if (o.validate) {
        rc = run_validate(m, &o);
        if (o.memory_view)
            print_memory_view(dev);
        goto out;
    }
    if (o.n_bench_depth) {
        rc = bench_depth_run(m, dev, o.bench_depth, o.n_bench_depth, o.bench_pp, o.bench_tg,
                             o.bench_reps, o.n_batch, o.threads, prog);
        goto out;
    }
    if (o.bench) {
        rc = run_bench(m, dev, &o) ? 1 : 0;
        if (o.expert_stats)
            print_expert_stats(m);
        goto out;
    }

    /* the chat format: the option, else the package's chat_template */
    if (o.chat || o.interactive) {
        char why[256];
        if (o.chat_format)
            glm_model_set_chat_format(m, o.chat_format);
        int f = glm_model_chat_format(m, why, sizeof(why));
        if (f < 0) {
            log_err("chat format");
            goto out;
        }
        fprintf(stderr, "%s: chat format %s\n", prog, why);
    }

    /* the prompt */
    if (o.tokens) {
        if (parse_ids(o.tokens, &ids, &n_ids) || !n_ids) {
            fprintf(stderr, "%s: --tokens: expected comma-separated token ids\n", prog);
            rc = 2;
            goto out;
        }
    } else {
        if (o.file) {
            int r = txc_read_path(o.file, &text, NULL);
            if (r) {
                fprintf(stderr, "%s: %s\n", prog, tx_last_error());
                goto out;
            }
        } else if (o.prompt) {
            text = strdup(o.prompt);
        } else if (!isatty(STDIN_FILENO)) {
            int r = txc_read_stream(stdin, &text, NULL);
            if (r) {
                fprintf(stderr, "%s: stdin: %s\n", prog, tx_strerror(r));
                goto out;
            }
        } else if (!o.interactive) {
            fprintf(stderr, "%s: no prompt (-p, -f, --tokens, stdin or -i on a terminal)\n", prog);
            rc = 2;
            goto out;
        }
        if (text) {
            int r;
            if (o.chat) {
                struct tx_chat_message msgs[2];
                size_t nm = 0;
                if (o.system)
                    msgs[nm++] = (struct tx_chat_message){"system", o.system, NULL};
                msgs[nm++] = (struct tx_chat_message){"user", text, NULL};
                r = glm_chat_encode(m, msgs, nm, o.no_think ? TX_CHAT_NO_THINKING : 0, &ids,
                                    &n_ids);
            } else {
                r = glm_tokenize(m, text, &ids, &n_ids);
            }
            if (r) {
                log_err("prompt");
                goto out;
            }
            if (!n_ids) {
                fprintf(stderr, "%s: the prompt is empty\n", prog);
                rc = 2;
                goto out;
            }
        }
    }
    if (verbose && ids) {
        fprintf(stderr, "%s: prompt tokens (%zu):", prog, n_ids);
        for (size_t i = 0; i < n_ids; i++)
            fprintf(stderr, "%s%d", i ? "," : " ", ids[i]);
        fputc('\n', stderr);
    }

    struct glm_session_options so = {.n_ctx = o.n_ctx, .n_batch = o.n_batch};
    if (glm_session_create(m, &so, &s)) {
        log_err("session");
        goto out;
    }
    if (ids && (int)n_ids >= glm_session_n_ctx(s)) {
        fprintf(stderr, "%s: the prompt (%zu tokens) does not fit the context of %d\n", prog, n_ids,
                glm_session_n_ctx(s));
        goto out;
    }

    if (o.logits && ids) {
        float *lg = malloc(sizeof(float) * n_ids * (size_t)c->vocab_size);
        if (!lg) {
            fprintf(stderr, "%s: out of memory for the logits\n", prog);
            goto out;
        }
        double a = now_ms();
        int erc = glm_eval(s, ids, (int)n_ids, GLM_EVAL_ALL_LOGITS, lg);
        if (erc) {
            log_rc("eval", erc);
            free(lg);
            goto out;
        }
        double b = now_ms();
        FILE *f = fopen(o.logits, "wb");
        int bad = !f;
        if (f) {
            /* little-endian float32: the host order on every supported host */
            bad = fwrite(lg, sizeof(float), n_ids * (size_t)c->vocab_size, f) !=
                  n_ids * (size_t)c->vocab_size;
            bad |= fclose(f) != 0;
        }
        free(lg);
        if (bad) {
            fprintf(stderr, "%s: %s: %s\n", prog, o.logits, strerror(errno));
            goto out;
        }
        fprintf(stderr, "%s: wrote logits [%zu x %d] to %s (prompt eval %.2f ms)\n", prog, n_ids,
                c->vocab_size, o.logits, b - a);
        if (!o.n_predict_set) {
            rc = 0;
            if (o.expert_stats)
                print_expert_stats(m);
            if (o.memory_view)
                print_memory_view(dev);
            goto out;
        }
        glm_session_reset(s);
    }

    sampling_defaults(m, &o);
    struct glm_sampling smp;
    glm_sampling_default(&smp);
    smp.temperature = o.temp;
    smp.top_k = o.top_k;
    smp.top_p = o.top_p;
    smp.min_p = o.min_p;
    smp.repeat_penalty = o.repeat_penalty;
    smp.presence_penalty = o.presence_penalty;
    smp.frequency_penalty = o.frequency_penalty;
    smp.repeat_last_n = o.repeat_last_n;
    smp.order = o.sampler_order;
    smp.seed = o.seed < 0 ? (uint64_t)time(NULL) : (uint64_t)o.seed;
    fprintf(stderr,
            "%s: sampling on the device: %s; temp %.2f, top-k %d, top-p %.2f, min-p %.2f, "
            "repeat-penalty %.2f, presence %.2f, frequency %.2f, last-n %d, seed %llu\n",
            prog,
            smp.order == GLM_SAMPLER_ORDER_LLAMA ? "penalties;top_k;top_p;min_p;temperature"
                                                 : "penalties;temperature;top_k;top_p;min_p",
            (double)smp.temperature, smp.top_k, (double)smp.top_p, (double)smp.min_p,
            (double)smp.repeat_penalty, (double)smp.presence_penalty, (double)smp.frequency_penalty,
            smp.repeat_last_n, (unsigned long long)smp.seed);

    catch_signals();
    if (!ids && o.interactive) {
        rc = interactive(m, s, &o, &smp);
        goto out;
    }

    if (!o.no_display && text && !o.chat) {
        fputs(text, stdout);
        fflush(stdout);
    }
    struct glm_generate_params gp;
    memset(&gp, 0, sizeof(gp));
    gp.prompt = ids;
    gp.n_prompt = (int)n_ids;
    gp.n_predict = o.n_predict;
    gp.sampling = smp;
    gp.on_token = on_token;
    if (o.ignore_eos)
        gp.flags |= GLM_GEN_IGNORE_EOS; /* -inf bias on the stop tokens */
    struct glm_timings t;
    int n_out = 0;
    struct gi_energy e0, e1;
    gi_energy_read(dev, &e0);
    int grc = glm_generate(s, &gp, NULL, 0, &n_out, &t);
    gi_energy_read(dev, &e1);
    if (grc) {
        putchar('\n');
        fflush(stdout);
        log_rc("generate", grc);
        goto out;
    }
    putchar('\n');
    fflush(stdout);
    static const char *why[] = {"", "stop token", "length", "context full", "callback"};
    fprintf(stderr, "%s: generated %d tokens (%s)\n", prog, n_out,
            interrupted            ? "interrupted"
            : (unsigned)t.stop < 5 ? why[t.stop]
                                   : "?");
    print_perf(&t);
    gi_energy_print(stderr, &e0, &e1, t.n_prompt, t.n_eval);
    if (interrupted) {
        rc = 130;
        goto out;
    }
    if (o.expert_stats)
        print_expert_stats(m);
    if (o.memory_view)
        print_memory_view(dev);
    rc = o.interactive ? interactive(m, s, &o, &smp) : 0;
out:
    if (mr.on && !mpi_agreed)
        glm_mpi_devices_ok(&mr, 0); /* the others wait for this rank's verdict */
    if (n_devs > 1 || (mr.on && mr.t.rank == 0 && mr.n_total > 1))
        mdev_print_stats(prog, m);
    if (mr.on && m)
        glm_mpi_report(&mr, m);
    glm_session_free(s);
    if (m && glm_model_free(m)) {
        log_err("free");
        if (mr.on && mr.t.rank == 0)
            glm_mpi_abort(1); /* the workers did not get the stop */
    }
    free(ids);
    free(text);
    mdev_close(devs, n_devs);
    glm_mpi_end(&mr);
    return rc;
}
