/* SPDX-License-Identifier: MIT */
/*
 * glm-inference's reports: error lines, llama.cpp's timing lines, the
 * device memory view and the expert load histogram. Diagnostics go to
 * stderr; stdout carries the generated text only.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "glm_inference.h"

double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void log_err(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, tx_last_error());
}

/* A lost device's message says all there is to say, in one line
 * ("device emu:/x.sock: tx8-emu closed the connection ...: device lost"). */
void log_rc(const char *what, int rc)
{
    if (rc == TX_EDEVICE_LOST)
        fprintf(stderr, "%s: %s\n", prog, tx_last_error());
    else
        log_err(what);
}

void print_perf(const struct glm_timings *t)
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

/* The time to the first token (the prompt's passes, whose last job samples
 * it) and what bounds it: the device's compute against the host's share
 * (building the commands, the jobs' round trips, expert-cache reads).
 * a, b: glm_model_prefill_times before and after the prompt. */
void print_ttft(const struct glm_timings *t, const struct glm_decode_times *a,
                const struct glm_decode_times *b)
{
    double dev = b->device_ms - a->device_ms, wall = b->wall_ms - a->wall_ms;
    double host = t->prompt_ms - dev;
    fprintf(stderr,
            "glm_perf: time to first token = %.2f ms / %d prompt tokens: device %.2f ms, host "
            "%.2f ms (commands, job round trips, outside the passes %.2f), %llu jobs in %llu "
            "passes: %s-bound\n",
            t->prompt_ms, t->n_prompt, dev, host, t->prompt_ms - wall,
            (unsigned long long)(b->jobs - a->jobs), (unsigned long long)(b->passes - a->passes),
            dev >= host ? "compute" : "host");
}

/* --memory-view and --expert-stats are diagnostics: stderr, like the timings,
 * so that stdout carries the generated text only. */
void print_memory_view(tx_device_t *dev)
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

void print_expert_stats(glm_model_t *m)
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
