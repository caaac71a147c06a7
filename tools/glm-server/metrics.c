/* SPDX-License-Identifier: MIT */
/*
 * GET /metrics: Prometheus text exposition format 0.0.4. The names and
 * their meaning are listed in docs/glm-server.md. Counters come from the
 * scheduler (srv.mx, under srv.mu); the windowed rates (tokens/s, device
 * busy ratio) and the device-side figures (KV bytes, expert utilisation)
 * are refreshed by the scheduler about once a second, so this handler
 * never touches the device.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

struct out {
    char *b;
    size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = o->cap - o->len;
        int n = vsnprintf(o->b ? o->b + o->len : NULL, o->b ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (o->b && (size_t)n < room) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap ? o->cap * 2 : 4096;
        while (cap < o->len + (size_t)n + 1)
            cap *= 2;
        char *nb = realloc(o->b, cap);
        if (!nb)
            return;
        o->b = nb;
        o->cap = cap;
    }
}

static void metric(struct out *o, const char *name, const char *type, const char *help, double v)
{
    put(o, "# HELP glm_server_%s %s\n# TYPE glm_server_%s %s\nglm_server_%s %.17g\n", name, help,
        name, type, name, v);
}

char *metrics_text(struct srv *S)
{
    struct out o = {0};
    pthread_mutex_lock(&S->mu);
    struct srv_metrics x = S->mx;
    int q = S->q_len, active = S->n_active, used = 0, prefill = 0;
    for (int i = 0; i < S->o.parallel; i++)
        if (S->slots[i].r) { /* the session's position, from the scheduler's counts (the
                              * session itself is the scheduler's, mid-pass) */
            const struct request *r = S->slots[i].r;
            used += r->state == RQ_PREFILL ? r->n_fed : r->n_prompt - 1 + r->n_completion;
            prefill += r->state == RQ_PREFILL;
        }
    pthread_mutex_unlock(&S->mu);
    double up = srv_now() - x.started;
    int total_cells = S->o.parallel * S->o.ctx_size;
    metric(&o, "requests_total", "counter", "Completion requests admitted to the queue.",
           (double)x.requests_total);
    metric(&o, "requests_success_total", "counter",
           "Completion requests finished (finish_reason stop or length).", (double)x.requests_ok);
    metric(&o, "requests_cancelled_total", "counter",
           "Completion requests cancelled (client went away, shutdown).",
           (double)x.requests_cancelled);
    metric(&o, "requests_failed_total", "counter", "Completion requests failed by the device.",
           (double)x.requests_failed);
    metric(&o, "requests_rejected_queue_full_total", "counter",
           "Completion requests refused with 503 because the queue was full.",
           (double)x.rejected_queue_full);
    metric(&o, "requests_rejected_invalid_total", "counter",
           "Completion requests refused with 400 (bad fields, prompt too long).",
           (double)x.rejected_bad_request);
    metric(&o, "http_requests_total", "counter", "HTTP requests answered (all endpoints).",
           (double)x.http_requests);
    metric(&o, "prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
           (double)x.prompt_tokens);
    metric(&o, "completion_tokens_total", "counter", "Tokens generated.",
           (double)x.completion_tokens);
    metric(&o, "tokens_per_second", "gauge",
           "Generated tokens per second, all slots, over the last window of about 1 s.",
           x.tokens_per_s);
    metric(&o, "completion_tokens_per_second_avg", "gauge",
           "Generated tokens per second since start.", up > 0 ? x.completion_tokens / up : 0);
    metric(&o, "queue_depth", "gauge", "Requests waiting for a slot.", q);
    metric(&o, "slots_total", "gauge", "Slots (--parallel).", S->o.parallel);
    metric(&o, "slots_active", "gauge", "Slots with a request (prefilling or decoding).", active);
    metric(&o, "slots_prefilling", "gauge", "Slots evaluating their prompt.", prefill);
    metric(&o, "kv_cache_cells_total", "gauge", "KV cache positions of all slots.", total_cells);
    metric(&o, "kv_cache_cells_used", "gauge", "KV cache positions holding a sequence.", used);
    metric(&o, "kv_cache_usage_ratio", "gauge", "kv_cache_cells_used / kv_cache_cells_total.",
           total_cells ? (double)used / total_cells : 0);
    metric(&o, "kv_cache_bytes", "gauge", "Device memory of the slots' KV caches.",
           (double)x.kv_bytes);
    metric(&o, "device_passes_total", "counter", "Device passes (forward passes) run.",
           (double)x.passes);
    metric(&o, "device_pass_rows_total", "counter",
           "Token rows of all device passes (decode rows + prefill chunk tokens).",
           (double)x.pass_rows);
    metric(&o, "device_busy_seconds_total", "counter",
           "Wall time the scheduler spent in device passes.", x.busy_s);
    metric(&o, "device_utilisation_ratio", "gauge",
           "Fraction of wall time with a device pass in flight, last window.", x.busy_ratio);
    metric(&o, "expert_utilisation_std_percent", "gauge",
           "Standard deviation of routed-expert utilisation over all (layer, expert) pairs, in "
           "percent of the uniform share (-1: no MoE layers or no routing yet).",
           x.expert_std);
    if (x.has_energy) { /* docs/hardware.md section 7 */
        metric(&o, "device_energy_joules_total", "counter",
               "Board energy of the device (static power x time + commands), power model.",
               (double)x.energy_uj / 1e6);
        metric(&o, "device_command_energy_joules_total", "counter",
               "Energy of the device's commands (power model, at the modelled clock).",
               (double)x.energy_active_uj / 1e6);
        metric(&o, "device_power_watts", "gauge", "Board power over the last 100 ms.",
               (double)x.power_mw / 1e3);
        metric(&o, "device_power_average_watts", "gauge", "Board power over the last 1 s.",
               (double)x.power_avg_mw / 1e3);
    }
    metric(&o, "uptime_seconds", "gauge", "Seconds since the server started.", up);
    return o.b;
}
