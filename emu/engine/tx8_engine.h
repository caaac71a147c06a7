/* SPDX-License-Identifier: MIT */
/*
 * The TX8 compute engine: the "silicon" of the emulated device.
 *
 * The engine executes jobs (struct tx8_job_desc, include/tx8/tx8_hw.h) on a
 * region of memory that plays the device memory (BAR2). It owns a pool of
 * worker threads, one per compute core, pinned to host CPUs, and SIMD kernels
 * chosen at run time. It checks every operand of every command against the
 * job's address ranges before touching memory.
 *
 * Thread safety: an engine runs one job at a time; concurrent calls of
 * tx8_engine_run on the same engine are serialised. Counters are updated
 * with atomic adds, so other processes may read them at any time.
 *
 * Counters the engine maintains in struct tx8_counters: commands, faults
 * (address faults), bytes_read, bytes_written, macs[], macs_skipped,
 * expert_cache_hits, expert_cache_misses, core_busy_ns[]. The caller (the
 * device's command processor) maintains jobs_submitted, jobs_completed,
 * jobs_failed, resets and busy_ns.
 *
 * See docs/engine.md.
 */
#ifndef TX8_ENGINE_H
#define TX8_ENGINE_H

#include <stdint.h>

#include <tx8/tx8_hw.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest command buffer a job may carry (fill caps.max_cmd_size with it). */
#define TX8_ENGINE_MAX_CMD_SIZE (4u << 20)
/* Largest k of MOE_ROUTE / SAMPLE / DSA_INDEX (fill caps.max_topk with it). */
#define TX8_ENGINE_MAX_TOPK 4096u
/* Former default capacity of the modelled expert cache (interface <= 1.5;
 * unused: expert_cache_hits / misses now count the host's expert cache). */
#define TX8_ENGINE_EXPERT_CACHE_DEFAULT (32ull << 20)

/* Instruction-set levels of the SIMD kernels. */
enum tx8_engine_isa {
    TX8_ISA_AUTO = 0, /* best the CPU supports (or $TX8_ENGINE_ISA) */
    TX8_ISA_PORTABLE = 1,
    TX8_ISA_AVX2 = 2,   /* AVX2 + FMA + F16C */
    TX8_ISA_AVX512 = 3, /* AVX-512 F/BW/VL/DQ + VNNI (+BF16 if present) */
    /* The AVX-512 level with the int8 / BF16 GEMM tiles of T >= 16 tokens
     * on AMX (TDPBSSD, TDPBF16PS): needs AVX-512, AMX-TILE/INT8/BF16 and
     * the kernel's grant of the tile state (arch_prctl); auto picks it
     * where all are present (docs/engine.md, "AMX"). */
    TX8_ISA_AMX = 4,
};

/* Instruction families used within an ISA level when the CPU has them. */
enum tx8_engine_feature {
    TX8_FEAT_AVX512BF16 = 1u << 0, /* vdpbf16ps: BF16 x BF16 matmul tiles */
    TX8_FEAT_AMX = 1u << 1,        /* AMX-TILE/INT8/BF16 (used by TX8_ISA_AMX) */
};

struct tx8_engine_config {
    unsigned cores;              /* worker threads; 0 = one per online CPU of the node */
    int numa_node;               /* -1: any */
    uint64_t expert_cache_bytes; /* ignored (the modelled cache is gone, 1.6) */
    /* TX8_ISA_AUTO: the best supported, unless the environment variable
     * TX8_ENGINE_ISA=portable|avx2|avx512|amx asks for another one. Asking
     * for an ISA the CPU (or, for amx, the OS) lacks makes tx8_engine_create fail with
     * -ENOTSUP (tx8_engine_isa_why says why); an unknown name, -EINVAL.
     * TX8_ENGINE_AVX512BF16=0 keeps the avx512 level off AVX512-BF16. */
    unsigned isa;
    unsigned rsvd[3]; /* zero */
};

struct tx8_engine;

/*
 * Create an engine over device memory [mem, mem + mem_size). Only
 * [heap_offset, mem_size) may be named by job ranges (below it lies the
 * control block). counters: the device-wide counters (in the control block)
 * or NULL for engine-internal ones. cfg may be NULL (defaults).
 * Returns 0 or a negative errno value (-EINVAL, -ENOMEM, -ENOTSUP).
 */
int tx8_engine_create(struct tx8_engine **out, void *mem, uint64_t mem_size, uint64_t heap_offset,
                      const struct tx8_engine_config *cfg, struct tx8_counters *counters);

/* Stop the workers and free everything. NULL is accepted. */
void tx8_engine_destroy(struct tx8_engine *e);

/*
 * Execute one job. `job` is a private (host-side) copy of the descriptor.
 * Fills done->status, fault_cmd, fault_addr, busy_ns and macs; the caller
 * fills seqno, user_data, start_ns and end_ns. Calls are serialised.
 * abort_flag (may be NULL) is
 * polled between commands and inside long operations; when it becomes
 * non-zero the job ends with TX8_STATUS_ABORTED. Returns 0 (the outcome is
 * in done->status), or -EINVAL if e, job or done is NULL.
 */
int tx8_engine_run(struct tx8_engine *e, const struct tx8_job_desc *job,
                   struct tx8_completion *done, const volatile int *abort_flag);

/* Number of worker threads (compute cores). */
unsigned tx8_engine_cores(const struct tx8_engine *e);

/* ISA the engine's kernels use (enum tx8_engine_isa, never AUTO). */
unsigned tx8_engine_isa(const struct tx8_engine *e);

/* "portable", "avx2", "avx512", "amx" */
const char *tx8_engine_isa_name(unsigned isa);

/* Name ("auto", "portable", "avx2", "avx512", "amx") -> ISA: 0 or -EINVAL. */
int tx8_engine_isa_parse(const char *name, unsigned *isa);

/* Whether this CPU can run the kernels of `isa`. */
int tx8_engine_isa_supported(unsigned isa);

/* NULL if `isa` can be used here, else why not (a sentence fragment). */
const char *tx8_engine_isa_why(unsigned isa);
/* Why TX8_ISA_AUTO picks the path it does on this CPU (its family's entry
 * in the engine's table, docs/engine.md "Which path by default"). */
const char *tx8_engine_isa_default_why(void);

/* Whether the CPU has an instruction family (enum tx8_engine_feature). */
int tx8_engine_has_feature(unsigned feature);

/* Families the engine's kernels use (a mask of enum tx8_engine_feature). */
unsigned tx8_engine_features(const struct tx8_engine *e);

/* How the AVX-512 tile computes ATTENTION's BF16 products: 1 with
 * vdpbf16ps, 0 as f32 FMAs of the rounded operands (TX8_ATTN_BF16_DOT) */
int tx8_engine_attn_bf16_dot(const struct tx8_engine *e);

/*
 * The engine's settings (docs/settings.md, "engine"): read from the
 * environment once, by tx8_engine_create. tx8_engine_setting changes one of
 * a created engine's per-command settings (TX8_ATTN_TILE, TX8_ATTN_DECODE,
 * TX8_DSA_TILE) between jobs to what value (NULL: unset) would have given
 * it: A/B comparisons of a path on one engine. 0, or -EINVAL for another
 * name. tx8_engine_setting_env: the text the environment gives the engine
 * setting name (NULL: unset, or not one of its settings), for messages.
 */
int tx8_engine_setting(struct tx8_engine *e, const char *name, const char *value);
const char *tx8_engine_setting_env(const char *name);

/* The counters the engine writes (the caller's, or its internal ones). */
struct tx8_counters *tx8_engine_counters(struct tx8_engine *e);

/* Device time 0 as CLOCK_MONOTONIC ns: profiling records (TX8_JOB_F_PROFILE)
 * carry CLOCK_MONOTONIC - base_ns (default 0), the clock of the caller's
 * completion records. Set it before running jobs. */
void tx8_engine_set_clock_base(struct tx8_engine *e, uint64_t base_ns);

/* The power model (power.h, docs/hardware.md section 7). An engine starts
 * with tx8_power_defaults(); set another model before running jobs. The
 * cap of m is the initial power limit. */
struct tx8_power_model;
void tx8_engine_set_power(struct tx8_engine *e, const struct tx8_power_model *m);

/* Change the board power limit (mW, 0 = none) at any time; it applies
 * from the next command on. */
void tx8_engine_set_power_cap(struct tx8_engine *e, uint64_t cap_mw);

/* Energy the engine has charged since it was created. */
struct tx8_engine_energy {
    uint64_t active_pj;  /* sum of the commands' energies */
    uint64_t dynamic_pj; /* their dynamic parts (without static x time) */
    double last_job_model_ns; /* modelled device time of the last job */
};
void tx8_engine_energy(struct tx8_engine *e, struct tx8_engine_energy *out);

/* No-op since interface 1.6 (there is no modelled expert cache any more). */
void tx8_engine_reset_cache(struct tx8_engine *e);

/* Human-readable name of a status ("ok", "address fault", ...). */
const char *tx8_engine_status_name(unsigned status);

#ifdef __cplusplus
}
#endif

#endif /* TX8_ENGINE_H */
