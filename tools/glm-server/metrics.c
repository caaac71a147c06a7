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

#include "prefix_store.h"
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

/* upper bounds (s), as vLLM's time_to_first_token / inter_token_latency */
static const double ttft_le[SRV_HIST_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                  0.5,   1,    2.5,   5,    10,  30};
static const double itl_le[SRV_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04,
                                                 0.06,  0.1,    0.25,  0.5,  1,    2.5};

static void observe(uint64_t *bucket, const double *le, double v)
{
    int i = 0;
    while (i < SRV_HIST_BUCKETS && v > le[i])
        i++;
    bucket[i]++;
}

void metrics_observe_ttft(struct srv *S, double s)
{
    observe(S->mx.ttft_bucket, ttft_le, s);
    S->mx.ttft_sum += s;
    S->mx.ttft_count++;
}

void metrics_observe_itl(struct srv *S, double s)
{
    observe(S->mx.itl_bucket, itl_le, s);
    S->mx.itl_sum += s;
    S->mx.itl_count++;
}

static void histogram(struct out *o, const char *name, const char *help, const uint64_t *bucket,
                      const double *le, double sum, uint64_t count)
{
    put(o, "# HELP glm_server_%s %s\n# TYPE glm_server_%s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < SRV_HIST_BUCKETS; i++) {
        cum += bucket[i];
        put(o, "glm_server_%s_bucket{le=\"%g\"} %llu\n", name, le[i], (unsigned long long)cum);
    }
    cum += bucket[SRV_HIST_BUCKETS];
    put(o, "glm_server_%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    put(o, "glm_server_%s_sum %.17g\nglm_server_%s_count %llu\n", name, sum, name,
        (unsigned long long)count);
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
    int lost = S->dev_lost;
    struct ps_stats pc;
    ps_get_stats(S->ps, &pc);
    pthread_mutex_unlock(&S->mu);
    /* the connection counters are written by MHD's threads (atomics) */
    x.conn_accepted = __atomic_load_n(&S->mx.conn_accepted, __ATOMIC_RELAXED);
    x.conn_refused = __atomic_load_n(&S->mx.conn_refused, __ATOMIC_RELAXED);
    x.conn_evicted = __atomic_load_n(&S->mx.conn_evicted, __ATOMIC_RELAXED);
    x.conn_timed_out = __atomic_load_n(&S->mx.conn_timed_out, __ATOMIC_RELAXED);
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
    metric(&o, "prompt_tokens_cached_total", "counter",
           "Prompt tokens not evaluated again: found in a slot's cache or copied from the "
           "prefix cache's KV blocks.",
           (double)x.prompt_tokens_cached);
    metric(&o, "prefix_cache_hit_ratio", "gauge",
           "prompt_tokens_cached_total / prompt_tokens_total.",
           x.prompt_tokens ? (double)x.prompt_tokens_cached / (double)x.prompt_tokens : 0);
    metric(&o, "prefix_cache_queries_total", "counter",
           "Prompt tokens (whole blocks of 64) looked up in the prefix cache's KV blocks.",
           (double)pc.query_tokens);
    metric(&o, "prefix_cache_hits_total", "counter",
           "Of prefix_cache_queries_total, the tokens whose block was stored.",
           (double)pc.hit_tokens);
    metric(&o, "prefix_cache_block_hit_ratio", "gauge",
           "prefix_cache_hits_total / prefix_cache_queries_total.",
           pc.query_tokens ? (double)pc.hit_tokens / (double)pc.query_tokens : 0);
    metric(&o, "prefix_cache_restored_tokens_total", "counter",
           "Prompt tokens whose KV was copied from a stored block into a slot.",
           (double)pc.restored_tokens);
    metric(&o, "prefix_cache_stored_blocks_total", "counter", "KV blocks stored.",
           (double)pc.stored_blocks);
    metric(&o, "prefix_cache_evicted_blocks_total", "counter",
           "KV blocks evicted, least recently used first (--cache-ram, out of host memory).",
           (double)pc.evicted_blocks);
    metric(&o, "prefix_cache_blocks", "gauge", "KV blocks held.", (double)pc.blocks);
    metric(&o, "prefix_cache_bytes", "gauge", "Host memory of the KV blocks held.",
           (double)pc.bytes);
    metric(&o, "prefix_cache_budget_bytes", "gauge", "--cache-ram in bytes (0: no block store).",
           (double)pc.budget);
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
    metric(&o, "spec_decode_num_draft_tokens_total", "counter",
           "Tokens drafted by the MTP layer and verified (--spec-type mtp).",
           (double)x.spec_drafted);
    metric(&o, "spec_decode_num_accepted_tokens_total", "counter",
           "Drafted tokens the verification accepted (--spec-type mtp).", (double)x.spec_accepted);
    metric(&o, "device_busy_seconds_total", "counter",
           "Wall time the scheduler spent in device passes.", x.busy_s);
    metric(&o, "device_utilisation_ratio", "gauge",
           "Fraction of wall time with a device pass in flight, last window.", x.busy_ratio);
    metric(&o, "expert_utilisation_std_percent", "gauge",
           "Standard deviation of routed-expert utilisation over all (layer, expert) pairs, in "
           "percent of the uniform share (-1: no MoE layers or no routing yet).",
           x.expert_std);
    metric(&o, "connections_open", "gauge", "HTTP connections open now.", conn_open_count());
    metric(&o, "connections_accepted_total", "counter", "HTTP connections accepted.",
           (double)x.conn_accepted);
    metric(&o, "connections_refused_total", "counter",
           "Connections closed at once: --max-connections open, all being answered.",
           (double)x.conn_refused);
    metric(&o, "connections_evicted_total", "counter",
           "Idle or slow connections closed to make room for a new one.",
           (double)x.conn_evicted);
    metric(&o, "connections_timed_out_total", "counter",
           "Connections closed by --idle-timeout, --header-timeout or --body-timeout.",
           (double)x.conn_timed_out);
    metric(&o, "device_up", "gauge", "1 while the device serves; 0 while it is lost.", !lost);
    metric(&o, "device_lost_total", "counter", "Times the device was lost (or hung).",
           (double)x.device_lost_total);
    metric(&o, "device_reloads_total", "counter",
           "Times the device was reopened and the model reloaded (after a loss or SIGHUP).",
           (double)x.device_reloads);
    histogram(&o, "time_to_first_token_seconds",
              "Time from a request's arrival to its first generated token.", x.ttft_bucket,
              ttft_le, x.ttft_sum, x.ttft_count);
    histogram(&o, "inter_token_latency_seconds",
              "Time between two consecutive tokens of a request.", x.itl_bucket, itl_le,
              x.itl_sum, x.itl_count);
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
