/* SPDX-License-Identifier: MIT */
/* libtx's profiler, internal side (public side: include/tx/tx_profile.h). */
#ifndef TX_PROFILE_INTERNAL_H
#define TX_PROFILE_INTERNAL_H

#include <stdint.h>

#include <tx/tx_profile.h>
#include <tx8/tx8_hw.h>

/* Bytes of the profiling buffer libtx gives each job (records that fit:
 * (size - header) / 64). */
#define TXP_BUFFER_SIZE (256u << 10)

/* The device's state when a profiled job was seen done: bytes of device
 * memory in use, and (have_ec) the device's cumulative expert-cache
 * counters (struct tx8_counters expert_cache_hits / _misses). */
struct txp_job_counters {
    uint64_t mem_used;
    int have_ec;
    uint64_t ec_hits, ec_misses;
    int have_energy;    /* the job's completion record carries its energy (1.9) */
    uint64_t energy_pj; /* then: the job event's "energy_pj" */
};

/* One finished, profiled job of device `dev` (its spec, e.g. "emu:/run/x"):
 * the device's header and records, the command names (names[i] for command
 * i, may be NULL or shorter), the host times around it (CLOCK_MONOTONIC),
 * the device's counters after it (the expert-cache counters become the
 * per-job counters "expert cache hits" / "expert cache misses": the change
 * since the previous job or the baseline). */
void txp_device_job(const char *dev, const struct tx8_prof_header *h,
                    const struct tx8_prof_record *rec, unsigned n, char *const *names,
                    unsigned nnames, uint64_t job, uint64_t host_submit_ns, uint64_t host_done_ns,
                    const struct txp_job_counters *jc);

/* The expert-cache counters of device `dev` before its first profiled job. */
void txp_device_base(const char *dev, uint64_t ec_hits, uint64_t ec_misses);

/* One pass of a MoE model (key: the model, name: its label) to the trace's
 * expert table (otherData.experts): per (MoE layer l, expert e), at index
 * l * n_experts + e, the rows routed to e (sel) and, with the runtime's
 * expert cache (hit and miss not NULL), the uses found in the cache and
 * read into it. layer[l] is MoE layer l's model layer. Added up over the
 * passes; no-op when profiling is off (profile/experts.c). */
void txp_experts_add(const void *key, const char *name, int n_layers, const int *layer,
                     int n_experts, int top_k, const uint64_t *sel, const uint64_t *hit,
                     const uint64_t *miss);

/* The expert table as a JSON array, NULL when no MoE pass was recorded. */
struct json_object *txp_experts_json(void);

/* The profiler's own host time: callers time the work they do only for
 * the profiler (naming commands, collecting records, counters) and add it
 * here; the trace's otherData.profiler_host_ns is the sum. */
void txp_self_add(uint64_t ns);

static inline void txp_self_since(uint64_t t0)
{
    txp_self_add(tx_profile_now() - t0);
}

/* RAII-less span helper: t = txp_begin(); ... txp_end("name", t). */
static inline uint64_t txp_begin(void)
{
    return tx_profile_enabled() ? tx_profile_now() : 0;
}

static inline void txp_end(const char *name, uint64_t t0)
{
    if (t0)
        tx_profile_span(name, t0, tx_profile_now());
}

#endif
