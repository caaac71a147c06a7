/* SPDX-License-Identifier: MIT */
/*
 * TX8 compute engine: engine life cycle, worker pool, job runner and
 * address checking.
 */
#include <errno.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <limits.h>
#include <math.h>
#include <linux/futex.h>
#include <numa.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine_internal.h"

uint64_t eng_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* How long an idle helper spins before sleeping, and a joiner before it
 * sleeps: short, the host's cores are shared. */
#define SPIN_NS 30000u

/* ------------------------------------------------------------------------ */
/* Status names, ISA                                                         */
/* ------------------------------------------------------------------------ */

const char *tx8_engine_status_name(unsigned status)
{
    static const char *const names[TX8_STATUS_COUNT] = {
        "ok",      "invalid command", "address fault", "unsupported data type",
        "aborted", "timeout",         "device error",  "invalid job",
    };
    return status < TX8_STATUS_COUNT ? names[status] : "unknown status";
}

const char *tx8_engine_isa_name(unsigned isa)
{
    switch (isa) {
    case TX8_ISA_PORTABLE:
        return "portable";
    case TX8_ISA_AVX2:
        return "avx2";
    case TX8_ISA_AVX512:
        return "avx512";
    case TX8_ISA_AMX:
        return "amx";
    case TX8_ISA_AUTO:
        return "auto";
    default:
        return "?";
    }
}

#if defined(__x86_64__)
/*
 * Instruction families, each checked with CPUID before any kernel that uses
 * it can be picked (the kernels are compiled with the families' flags, so a
 * CPU without one would fault on its first instruction):
 *   F16C         leaf 1 ECX bit 29 (not every compiler's
 *                __builtin_cpu_supports knows it: clang 14 does not)
 *   AVX512-BF16  leaf 7 subleaf 1 EAX bit 5 (vdpbf16ps, vcvtne2ps2bf16)
 *   AMX-TILE/INT8/BF16  leaf 7 EDX bits 24, 25, 22, and the kernel's grant
 *                of the tile data state (amx_usable: arch_prctl
 *                ARCH_REQ_XCOMP_PERM, once per process)
 * AVX and AVX-512 state must also be enabled by the OS (XCR0), which
 * __builtin_cpu_supports checks for the AVX2/AVX-512 features.
 */
static int cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static int cpu_leaf7(unsigned sub, unsigned *a, unsigned *b, unsigned *c, unsigned *d)
{
    unsigned max = __get_cpuid_max(0, NULL);
    if (max < 7)
        return 0;
    __cpuid_count(7, sub, *a, *b, *c, *d);
    return 1;
}

static int cpu_has_avx512bf16(void)
{
    unsigned a, b, c, d;
    if (!cpu_leaf7(0, &a, &b, &c, &d) || a < 1)
        return 0; /* subleaf 1 not reported */
    return cpu_leaf7(1, &a, &b, &c, &d) && (a & (1u << 5));
}

/* CPUID's vendor string is "AuthenticAMD" */
static int cpu_is_amd(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return 0;
    return b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
}

/*
 * How the AVX-512 tile and decode kernel compute ATTENTION's BF16
 * products (TX8_ATTN_F_BF16) where the CPU has vdpbf16ps: with it (1), or
 * as f32 FMAs of the BF16-rounded operands (0; the same products, exact in
 * f32, summed in another order). TX8_ATTN_BF16_DOT=vdpbf16ps|f32 chooses;
 * by default vdpbf16ps on AMD (Zen 4, one zmm vdpbf16ps or FMA per cycle:
 * 1.2-1.7x the f32 tile, the decode kernel 1.3-1.75x, in tx-bench --attn)
 * and the f32 forms elsewhere (an Intel Xeon with AVX512-BF16: vdpbf16ps
 * 0.57-0.93x the f32 tile), docs/engine.md. Fixed per process, so a
 * machine's results do not change from run to run.
 */
static int attn_bf16_dot(const struct eng_settings *s)
{
    if (s->attn_bf16_dot == 1) /* vdpbf16ps */
        return 1;
    if (s->attn_bf16_dot == 0) /* f32 */
        return 0;
    return cpu_is_amd();
}

static int cpu_has_amx(void)
{
    unsigned a, b, c, d;
    return cpu_leaf7(0, &a, &b, &c, &d) && (d & (1u << 24)) && (d & (1u << 25)) &&
           (d & (1u << 22));
}

/*
 * Linux (5.16+) gives a process the AMX tile data state (XTILEDATA, XSAVE
 * feature 18) only on request: arch_prctl(ARCH_REQ_XCOMP_PERM, 18), once
 * per process (it then covers every thread); without it the first tile
 * instruction kills the process. Asked once, the first time an AMX engine
 * is considered, and only where CPUID reports AMX.
 */
#define ENG_ARCH_GET_XCOMP_PERM 0x1022
#define ENG_ARCH_REQ_XCOMP_PERM 0x1023
#define ENG_XFEATURE_XTILEDATA 18

static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_perm; /* 1 granted, else -errno */
static char amx_why[160];

static void amx_request(void)
{
    if (syscall(SYS_arch_prctl, ENG_ARCH_REQ_XCOMP_PERM, ENG_XFEATURE_XTILEDATA)) {
        amx_perm = -errno;
    } else {
        unsigned long bits = 0;
        amx_perm = syscall(SYS_arch_prctl, ENG_ARCH_GET_XCOMP_PERM, &bits) ? -errno
                   : (bits & (1ul << ENG_XFEATURE_XTILEDATA)) ? 1
                                                               : -EPERM;
    }
    /* EINVAL: a kernel before 5.16; ENOSPC: a thread's sigaltstack is too
     * small for the tile state */
    if (amx_perm != 1)
        snprintf(amx_why, sizeof(amx_why),
                 "the kernel refused the AMX tile data state (arch_prctl "
                 "ARCH_REQ_XCOMP_PERM: %s; Linux >= 5.16 needed)",
                 strerror(-amx_perm));
}

static int amx_usable(void)
{
    if (!cpu_has_amx())
        return 0;
    pthread_once(&amx_once, amx_request);
    return amx_perm == 1;
}
#endif

int tx8_engine_isa_supported(unsigned isa)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    switch (isa) {
    case TX8_ISA_PORTABLE:
        return 1;
    case TX8_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case TX8_ISA_AVX512:
        return tx8_engine_isa_supported(TX8_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
    case TX8_ISA_AMX:
        /* the AVX-512 table plus the tile unit (tests: its emulation) */
        return tx8_engine_isa_supported(TX8_ISA_AVX512) && (eng_amx_emulate || amx_usable());
    default:
        return 0;
    }
#else
    return isa == TX8_ISA_PORTABLE;
#endif
}

int tx8_engine_has_feature(unsigned feature)
{
#if defined(__x86_64__)
    switch (feature) {
    case TX8_FEAT_AVX512BF16:
        return tx8_engine_isa_supported(TX8_ISA_AVX512) && cpu_has_avx512bf16();
    case TX8_FEAT_AMX:
        return cpu_has_amx();
    default:
        return 0;
    }
#else
    (void)feature;
    return 0;
#endif
}

const char *tx8_engine_isa_why(unsigned isa)
{
    switch (isa) {
    case TX8_ISA_AUTO:
    case TX8_ISA_PORTABLE:
        return NULL;
    case TX8_ISA_AVX2:
        return tx8_engine_isa_supported(isa) ? NULL : "the CPU lacks AVX2, FMA or F16C";
    case TX8_ISA_AVX512:
        return tx8_engine_isa_supported(isa)
                   ? NULL
                   : "the CPU lacks one of AVX-512 F/BW/VL/DQ/VNNI (or AVX2/FMA/F16C)";
    case TX8_ISA_AMX:
        if (tx8_engine_isa_supported(isa))
            return NULL;
        if (!tx8_engine_isa_supported(TX8_ISA_AVX512))
            return "the CPU lacks AVX-512 F/BW/VL/DQ/VNNI (the AMX path's tails and GEMV)";
        if (!tx8_engine_has_feature(TX8_FEAT_AMX))
            return "the CPU lacks AMX-TILE/AMX-INT8/AMX-BF16";
#if defined(__x86_64__)
        pthread_once(&amx_once, amx_request);
        if (amx_why[0])
            return amx_why;
#endif
        return "the kernel refused the AMX tile data state (arch_prctl ARCH_REQ_XCOMP_PERM)";
    default:
        return "unknown ISA";
    }
}

static const struct eng_kernels *kernels_for(unsigned isa)
{
    switch (isa) {
    case TX8_ISA_AVX512:
    case TX8_ISA_AMX: /* plus mm_amx, set in tx8_engine_create */
        return &eng_kernels_avx512;
    case TX8_ISA_AVX2:
        return &eng_kernels_avx2;
    default:
        return &eng_kernels_portable;
    }
}

int tx8_engine_isa_parse(const char *name, unsigned *isa)
{
    static const struct {
        const char *name;
        unsigned isa;
    } names[] = {{"auto", TX8_ISA_AUTO},     {"portable", TX8_ISA_PORTABLE},
                 {"avx2", TX8_ISA_AVX2},     {"avx512", TX8_ISA_AVX512},
                 {"amx", TX8_ISA_AMX}};
    for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(name, names[i].name)) {
            *isa = names[i].isa;
            return 0;
        }
    return -EINVAL;
}

/*
 * The default path (TX8_ISA_AUTO) by CPU family, not by ISA rank alone:
 * the first path of the family's list that the CPU supports (AMX only
 * where the kernel grants the tile state). Each list is the order
 * measured on that family with tx-bench --vs, side by side in one run
 * (docs/engine.md, "Which path by default"). A CPU of no listed family
 * takes the rank order. The choice is a fixed function of CPUID, so the
 * same machine always runs the same kernels (a probe timed at start-up
 * on a shared host would pick differently from run to run, and the paths'
 * sums differ in their last bits).
 */
int eng_gemv_prefetch = 1;

struct isa_pref {
    int amd;         /* vendor AuthenticAMD (else any other) */
    unsigned family; /* CPUID family (base + extended), 0: any */
    unsigned order[4];
    /* the AVX-512 float/FP8 GEMV's software prefetch (eng_gemv_prefetch) */
    int gemv_prefetch;
    const char *why;
};

static const struct isa_pref isa_prefs[] = {
    {1, 0x19, {TX8_ISA_AVX512, TX8_ISA_AVX2, TX8_ISA_PORTABLE, TX8_ISA_PORTABLE}, 0,
     "AMD family 19h (Zen 3/4): avx512 where present, else avx2; float GEMV without software "
     "prefetch (Zen 4: f16 GEMV 13.5 -> 22 GB/s per CPU-second without it)"},
    {0, 0, {TX8_ISA_AMX, TX8_ISA_AVX512, TX8_ISA_AVX2, TX8_ISA_PORTABLE}, 1,
     "rank order: amx, avx512, avx2, portable"},
};

static unsigned cpu_family(void)
{
    unsigned a = 0, b, c, d;
#if defined(__x86_64__)
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
#endif
    unsigned f = (a >> 8) & 0xf;
    return f == 0xf ? f + ((a >> 20) & 0xff) : f;
}

static const struct isa_pref *isa_pref_of_cpu(void)
{
    int amd = 0;
#if defined(__x86_64__)
    amd = cpu_is_amd();
#endif
    unsigned fam = cpu_family();
    for (size_t i = 0; i < sizeof(isa_prefs) / sizeof(isa_prefs[0]); i++)
        if (!isa_prefs[i].family || (isa_prefs[i].amd == amd && isa_prefs[i].family == fam))
            return &isa_prefs[i];
    return &isa_prefs[sizeof(isa_prefs) / sizeof(isa_prefs[0]) - 1];
}

static unsigned default_isa(void)
{
    const struct isa_pref *p = isa_pref_of_cpu();
    for (unsigned i = 0; i < 4; i++) {
        unsigned isa = p->order[i];
#if defined(__x86_64__)
        if (isa == TX8_ISA_AMX && !amx_usable())
            continue;
#endif
        if (tx8_engine_isa_supported(isa))
            return isa;
    }
    return TX8_ISA_PORTABLE;
}

/* TX8_GEMV_PREFETCH=0|1 overrides the family's choice (comparisons) */
static int gemv_prefetch(const struct eng_settings *s)
{
    if (s->gemv_prefetch >= 0)
        return s->gemv_prefetch;
    return isa_pref_of_cpu()->gemv_prefetch;
}

const char *tx8_engine_isa_default_why(void)
{
    return isa_pref_of_cpu()->why;
}

static int pick_isa(unsigned want, const struct eng_settings *s, unsigned *out)
{
    if (want == TX8_ISA_AUTO) { /* TX8_ENGINE_ISA: -2 not a name, -1 unset */
        if (s->isa == -2)
            return -EINVAL;
        if (s->isa >= 0)
            want = (unsigned)s->isa;
    }
    if (want == TX8_ISA_AUTO)
        want = default_isa();
    if (want > TX8_ISA_AMX)
        return -EINVAL;
    if (!tx8_engine_isa_supported(want))
        return -ENOTSUP;
    *out = want;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */
/* ------------------------------------------------------------------------ */

static size_t round_alloc(size_t bytes)
{
    return (bytes + 4095) & ~(size_t)4095;
}

void *eng_alloc(struct tx8_engine *e, size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    if (bytes > SIZE_MAX / 2)
        return NULL;
    bytes = round_alloc(bytes);
    if (e->use_numa)
        return numa_alloc_onnode(bytes, e->numa_node);
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes))
        return NULL;
    return p;
}

void eng_free(struct tx8_engine *e, void *p, size_t bytes)
{
    if (!p)
        return;
    if (e->use_numa)
        numa_free(p, round_alloc(bytes ? bytes : 1));
    else
        free(p);
}

static void *grow(struct tx8_engine *e, void **slot, size_t *size, size_t bytes)
{
    if (*slot && *size >= bytes)
        return *slot;
    eng_free(e, *slot, *size);
    *slot = NULL;
    *size = 0;
    /* grow geometrically to avoid repeated reallocations */
    size_t want = bytes < (SIZE_MAX / 4) ? bytes + bytes / 4 : bytes;
    void *p = eng_alloc(e, want);
    if (!p) {
        atomic_store(&e->failed, 1);
        return NULL;
    }
    *slot = p;
    *size = want;
    return p;
}

void *eng_wscratch(struct eng_worker *w, unsigned slot, size_t bytes)
{
    return grow(w->e, &w->scr[slot], &w->scr_size[slot], bytes);
}

void *eng_jscratch(struct tx8_engine *e, unsigned slot, size_t bytes)
{
    return grow(e, &e->jscr[slot], &e->jscr_size[slot], bytes);
}

/* ------------------------------------------------------------------------ */
/* Worker pool                                                               */
/* ------------------------------------------------------------------------ */

static void run_chunks(struct tx8_engine *e, struct eng_worker *w)
{
    size_t n = e->par_n, chunk = e->par_chunk;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&e->next, chunk, memory_order_relaxed);
        if (i >= n)
            break;
        if (eng_aborted(e) || atomic_load_explicit(&e->failed, memory_order_relaxed))
            break;
        size_t end = n - i < chunk ? n : i + chunk;
        e->par_fn(e->par_ctx, i, end, w);
    }
}

#define RS_CLOSED (1ull << 31)
#define RS_ACTIVE 0x7fffffffull

/*
 * Fork-join. Worker 0 opens a region (a new generation in rstate), works on
 * the chunks itself, then closes the region and waits only for helpers that
 * registered in it (they are running chunks). A helper that wakes up late
 * finds the region closed and skips it, so worker 0 never waits for a
 * sleeping thread to be scheduled. Region parameters are written before the
 * region opens and are not touched until every registered helper left.
 */
void eng_parallel(struct tx8_engine *e, size_t n, size_t chunk, eng_par_fn fn, void *ctx)
{
    struct eng_worker *w0 = &e->w[0];
    if (n == 0)
        return;
    if (chunk == 0)
        chunk = 1;
    if (e->cores == 1 || n <= chunk) {
        if (!eng_aborted(e))
            fn(ctx, 0, n, w0);
        return;
    }
    e->par_n = n;
    e->par_chunk = chunk;
    e->par_fn = fn;
    e->par_ctx = ctx;
    atomic_store(&e->next, 0);
    uint32_t g = ++e->cur_gen;
    atomic_store(&e->rstate, (uint64_t)g << 32);
    atomic_store(&e->gen, g);
    if (atomic_load(&e->sleepers))
        futex_wake(&e->gen);

    run_chunks(e, w0);

    /* close, then wait for the registered helpers */
    uint64_t t0 = eng_now_ns();
    uint64_t st = atomic_fetch_or(&e->rstate, RS_CLOSED) | RS_CLOSED;
    unsigned spins = 0;
    while (st & RS_ACTIVE) {
        if (++spins < 64 || eng_now_ns() - t0 < SPIN_NS)
            cpu_relax();
        else
            sched_yield();
        st = atomic_load(&e->rstate);
    }
    e->join_wait_ns += eng_now_ns() - t0;
}

static void helper_loop(struct eng_worker *w)
{
    struct tx8_engine *e = w->e;
    /* gen was 0 when the workers were created; a region may already have
     * begun before this thread got here */
    uint32_t my_gen = 0;
    for (;;) {
        uint64_t t0 = eng_now_ns();
        unsigned spins = 0;
        while (atomic_load(&e->gen) == my_gen) {
            if (++spins < 256 || eng_now_ns() - t0 < SPIN_NS) {
                cpu_relax();
                continue;
            }
            atomic_fetch_add(&e->sleepers, 1);
            if (atomic_load(&e->gen) == my_gen)
                futex_wait(&e->gen, my_gen);
            atomic_fetch_sub(&e->sleepers, 1);
        }
        if (e->stop)
            return;
        uint64_t st = atomic_load(&e->rstate);
        my_gen = (uint32_t)(st >> 32);
        int joined = 0;
        while (!(st & RS_CLOSED)) {
            if (atomic_compare_exchange_weak(&e->rstate, &st, st + 1)) {
                joined = 1;
                break;
            }
            if ((uint32_t)(st >> 32) != my_gen)
                break;
        }
        if (!joined)
            continue;
        uint64_t s = eng_now_ns();
        run_chunks(e, w);
        w->busy_ns += eng_now_ns() - s;
        atomic_fetch_sub(&e->rstate, 1);
    }
}

static void exec_job(struct tx8_engine *e);

static void pin_self(struct eng_worker *w)
{
    struct tx8_engine *e = w->e;
    if (e->use_numa)
        numa_run_on_node(e->numa_node);
    if (w->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
}

static void *worker_main(void *arg)
{
    struct eng_worker *w = arg;
    pin_self(w);
    helper_loop(w);
    return NULL;
}

/* CPUs the workers are pinned to: those of the NUMA node, or the process's. */
static int list_cpus(int node, int *cpus, int max)
{
    int n = 0;
    if (node >= 0 && numa_available() >= 0) {
        struct bitmask *bm = numa_allocate_cpumask();
        if (bm && numa_node_to_cpus(node, bm) == 0) {
            for (unsigned i = 0; i < bm->size && n < max; i++)
                if (numa_bitmask_isbitset(bm, i))
                    cpus[n++] = (int)i;
        }
        if (bm)
            numa_free_cpumask(bm);
        if (n)
            return n;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int i = 0; i < CPU_SETSIZE && n < max; i++)
            if (CPU_ISSET(i, &set))
                cpus[n++] = i;
    }
    return n;
}

static void stop_workers(struct tx8_engine *e)
{
    e->stop = 1;
    atomic_store(&e->rstate, ((uint64_t)(e->cur_gen + 1) << 32) | RS_CLOSED);
    atomic_store(&e->gen, e->cur_gen + 1);
    futex_wake(&e->gen);
    for (unsigned i = 0; i < e->cores; i++)
        if (e->w[i].started)
            pthread_join(e->w[i].th, NULL);
}

int tx8_engine_create(struct tx8_engine **out, void *mem, uint64_t mem_size, uint64_t heap_offset,
                      const struct tx8_engine_config *cfg, struct tx8_counters *counters)
{
    struct tx8_engine_config def = {0, -1, 0, TX8_ISA_AUTO, {0, 0, 0}};
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!cfg)
        cfg = &def;
    if (!mem || mem_size == 0 || heap_offset > mem_size || cfg->rsvd[0] || cfg->rsvd[1] ||
        cfg->rsvd[2] || cfg->cores > TX8_MAX_CORES || cfg->numa_node < -1)
        return -EINVAL;
    unsigned isa;
    struct eng_settings set;
    eng_settings_read(&set);
    int rc = pick_isa(cfg->isa, &set, &isa);
    if (rc)
        return rc;

    struct tx8_engine *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->set = set;
    e->mem = mem;
    e->mem_size = mem_size;
    e->heap_offset = heap_offset;
    e->isa = isa;
    e->kern = *kernels_for(isa);
    e->kern.mm_tile_bf16 = NULL;
#if defined(__x86_64__)
    {
        if ((isa == TX8_ISA_AVX512 || isa == TX8_ISA_AMX) &&
            tx8_engine_has_feature(TX8_FEAT_AVX512BF16) && e->set.avx512bf16 != 0) {
            e->kern.mm_tile_bf16 = eng_avx512bf16_tile;
            e->features |= TX8_FEAT_AVX512BF16;
            e->attn_bf16_dp = attn_bf16_dot(&e->set);
        }
        if (isa == TX8_ISA_AMX) {
            /* the tile unit, or (tests) its emulation on a CPU without it */
            e->kern.mm_amx = eng_amx_emulate ? eng_amx_mm_emu : eng_amx_mm_hw;
            e->kern.amx_pack = eng_amx_emulate ? eng_amx_pack_emu : eng_amx_pack_hw;
            e->features |= TX8_FEAT_AMX;
        }
    }
#endif
    e->k = &e->kern;
    eng_gemv_prefetch = gemv_prefetch(&e->set);
    eng_panel_blocking(e);
    e->moe_unfused = e->set.moe_unfused == 1;
    e->numa_node = cfg->numa_node;
    e->use_numa = cfg->numa_node >= 0 && numa_available() >= 0 && cfg->numa_node <= numa_max_node();
    if (cfg->numa_node >= 0 && !e->use_numa) {
        free(e);
        return -EINVAL;
    }
    e->ctr = counters ? counters : &e->own_ctr;
    tx8_power_defaults(&e->power);
    e->ctr->clock_permille = 1000;

    int cpus[TX8_MAX_CORES];
    int ncpu = list_cpus(cfg->numa_node, cpus, TX8_MAX_CORES);
    e->cores = cfg->cores ? cfg->cores : (ncpu > 0 ? (unsigned)ncpu : 1);

    pthread_mutex_init(&e->run_mu, NULL);
    e->cmd_cap = TX8_ENGINE_MAX_CMD_SIZE;
    e->cmdbuf = malloc(e->cmd_cap);
    e->cmd_off = malloc(sizeof(uint32_t) * (e->cmd_cap / 8 + 1));
    e->w = aligned_alloc(64, sizeof(struct eng_worker) * e->cores);
    rc = -ENOMEM;
    if (!e->cmdbuf || !e->cmd_off || !e->w)
        goto fail;
    memset(e->w, 0, sizeof(struct eng_worker) * e->cores);

    for (unsigned i = 0; i < e->cores; i++) {
        struct eng_worker *w = &e->w[i];
        w->e = e;
        w->id = i;
        w->cpu = ncpu > 0 ? cpus[i % (unsigned)ncpu] : -1;
        if (i == 0)
            continue; /* worker 0 is the thread calling tx8_engine_run */
        if (pthread_create(&w->th, NULL, worker_main, w)) {
            rc = -EAGAIN;
            goto fail;
        }
        w->started = 1;
    }
    *out = e;
    return 0;

fail:
    tx8_engine_destroy(e);
    return rc;
}

void tx8_engine_destroy(struct tx8_engine *e)
{
    if (!e)
        return;
    if (e->w) {
        stop_workers(e);
        for (unsigned i = 0; i < e->cores; i++)
            for (unsigned s = 0; s < ENG_SCRATCH_SLOTS; s++)
                eng_free(e, e->w[i].scr[s], e->w[i].scr_size[s]);
        free(e->w);
    }
    for (unsigned s = 0; s < ENG_SCRATCH_SLOTS; s++)
        eng_free(e, e->jscr[s], e->jscr_size[s]);
    free(e->cmdbuf);
    free(e->cmd_off);
    pthread_mutex_destroy(&e->run_mu);
    free(e);
}

unsigned tx8_engine_cores(const struct tx8_engine *e)
{
    return e ? e->cores : 0;
}

unsigned tx8_engine_isa(const struct tx8_engine *e)
{
    return e ? e->isa : 0;
}

int tx8_engine_attn_bf16_dot(const struct tx8_engine *e)
{
    return e->attn_bf16_dp;
}

int tx8_engine_setting(struct tx8_engine *e, const char *name, const char *value)
{
    return e ? eng_settings_set(&e->set, name, value, 1) : -EINVAL;
}

unsigned tx8_engine_features(const struct tx8_engine *e)
{
    return e ? e->features : 0;
}

struct tx8_counters *tx8_engine_counters(struct tx8_engine *e)
{
    return e ? e->ctr : NULL;
}

void tx8_engine_set_clock_base(struct tx8_engine *e, uint64_t base_ns)
{
    if (e)
        e->clock_base = base_ns;
}

void tx8_engine_set_power(struct tx8_engine *e, const struct tx8_power_model *m)
{
    if (!e || !m)
        return;
    e->power = *m;
    tx8_engine_set_power_cap(e, m->cap_mw > 0 ? (uint64_t)m->cap_mw : 0);
}

void tx8_engine_set_power_cap(struct tx8_engine *e, uint64_t cap_mw)
{
    if (!e)
        return;
    __atomic_store_n(&e->power_cap_mw, cap_mw, __ATOMIC_RELAXED);
    __atomic_store_n(&e->ctr->power_cap_mw, cap_mw, __ATOMIC_RELAXED);
}

void tx8_engine_energy(struct tx8_engine *e, struct tx8_engine_energy *out)
{
    memset(out, 0, sizeof(*out));
    if (!e)
        return;
    out->active_pj = __atomic_load_n(&e->energy_active_pj, __ATOMIC_RELAXED);
    out->dynamic_pj = __atomic_load_n(&e->energy_dynamic_pj, __ATOMIC_RELAXED);
    out->last_job_model_ns = e->job_model_ns;
}

/* Charge one command's energy (power.h) to the engine and the counters;
 * returns its energy in pJ, *model_ns += its modelled time. */
static uint64_t charge_energy(struct tx8_engine *e, uint64_t macs, unsigned dtype, uint64_t bytes,
                              uint64_t link_bytes, double *model_ns)
{
    struct tx8_power_model m = e->power;
    struct tx8_power_cost cost;
    uint64_t pj, dyn, active;

    m.cap_mw = (double)__atomic_load_n(&e->power_cap_mw, __ATOMIC_RELAXED);
    tx8_power_command(&m, macs, dtype, bytes, link_bytes, &cost);
    pj = (uint64_t)llround(cost.energy_pj);
    dyn = (uint64_t)llround(cost.dynamic_pj);
    *model_ns += cost.time_ns;
    active = __atomic_add_fetch(&e->energy_active_pj, pj, __ATOMIC_RELAXED);
    __atomic_add_fetch(&e->energy_dynamic_pj, dyn, __ATOMIC_RELAXED);
    __atomic_store_n(&e->ctr->energy_active_uj, active / 1000000u, __ATOMIC_RELAXED);
    __atomic_store_n(&e->ctr->clock_permille, (uint64_t)llround(cost.clock_scale * 1000.0),
                     __ATOMIC_RELAXED);
    if (link_bytes)
        __atomic_fetch_add(&e->ctr->link_bytes, link_bytes, __ATOMIC_RELAXED);
    return pj;
}

/* Interface 1.6: the expert cache is the host's (the counters come from the
 * MOE_FFN table flags); nothing is modelled, nothing to reset. */
void tx8_engine_reset_cache(struct tx8_engine *e)
{
    (void)e;
}

int tx8_engine_run(struct tx8_engine *e, const struct tx8_job_desc *job,
                   struct tx8_completion *done, const volatile int *abort_flag)
{
    if (!e || !job || !done)
        return -EINVAL;
    done->status = TX8_STATUS_OK;
    done->fault_cmd = 0;
    done->fault_addr = 0;
    done->busy_ns = 0;
    done->macs = 0;
    /* One job at a time. The caller's thread is worker 0: it runs the job
     * itself (no hand-off to a sleeping thread and back), the helpers join
     * its parallel regions. */
    pthread_mutex_lock(&e->run_mu);
    e->job = job;
    e->done = done;
    e->abort_flag = abort_flag;
    exec_job(e);
    e->job = NULL;
    e->done = NULL;
    e->abort_flag = NULL;
    pthread_mutex_unlock(&e->run_mu);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Address checking                                                          */
/* ------------------------------------------------------------------------ */

int eng_mul3(uint64_t a, uint64_t b, uint64_t c, uint64_t *out)
{
    uint64_t t;
    if (__builtin_mul_overflow(a, b, &t) || __builtin_mul_overflow(t, c, out))
        return -1;
    return 0;
}

int eng_mat_bytes(uint64_t rows, uint64_t cols, uint64_t ld, uint64_t esize, uint64_t *out)
{
    uint64_t t;
    if (rows == 0 || cols == 0) {
        *out = 0;
        return 0;
    }
    if (ld < cols)
        return -1;
    if (__builtin_mul_overflow(rows - 1, ld, &t) || __builtin_add_overflow(t, cols, &t) ||
        __builtin_mul_overflow(t, esize, out))
        return -1;
    return 0;
}

/* First byte of [addr, end) not covered by ranges granting `bit`, or end. */
static uint64_t first_uncovered(const struct tx8_job_desc *job, uint64_t addr, uint64_t end,
                                unsigned bit)
{
    uint64_t cur = addr;
    while (cur < end) {
        uint64_t best = cur;
        for (unsigned i = 0; i < job->num_ranges; i++) {
            const struct tx8_range *r = &job->ranges[i];
            if (!(r->access & bit))
                continue;
            uint64_t rend = r->addr + r->size; /* validated: no overflow */
            if (r->addr <= cur && cur < rend && rend > best)
                best = rend;
        }
        if (best == cur)
            return cur;
        cur = best;
    }
    return end;
}

int eng_check_range(const struct tx8_job_desc *job, uint64_t addr, uint64_t size, unsigned access,
                    uint64_t *bad)
{
    if (size == 0)
        return 0;
    uint64_t end = size > UINT64_MAX - addr ? UINT64_MAX : addr + size;
    uint64_t first = end;
    for (unsigned bit = TX8_ACCESS_READ; bit <= TX8_ACCESS_WRITE; bit <<= 1) {
        if (!(access & bit))
            continue;
        uint64_t u = first_uncovered(job, addr, end, bit);
        if (u < first)
            first = u;
    }
    if (first < end || end == UINT64_MAX) {
        *bad = first < end ? first : end;
        return TX8_STATUS_ADDR_FAULT;
    }
    return 0;
}

int eng_acc_add(struct eng_cmd *c, uint64_t addr, uint64_t bytes, unsigned access, unsigned align)
{
    if (bytes == 0)
        return 0;
    if (align > 1 && addr % align)
        return TX8_STATUS_INVALID_CMD;
    if (c->nacc >= ENG_MAX_ACCESS)
        return TX8_STATUS_DEVICE_ERROR; /* engine bug */
    c->acc[c->nacc].addr = addr;
    c->acc[c->nacc].size = bytes;
    c->acc[c->nacc].access = access;
    c->nacc++;
    return 0;
}

void eng_cmd_read(const struct eng_cmd *c, void *out, size_t size)
{
    struct tx8_cmd_hdr h;
    memcpy(&h, c->cmd, sizeof(h));
    memset(out, 0, size);
    memcpy(out, c->cmd, h.size < size ? h.size : size);
}

int eng_acc_check(struct eng_cmd *c, uint64_t addr, uint64_t bytes, unsigned access, unsigned align)
{
    if (bytes == 0)
        return 0;
    if (align > 1 && addr % align)
        return TX8_STATUS_INVALID_CMD;
    return eng_check_range(c->e->job, addr, bytes, access, &c->fault_addr);
}

/* ------------------------------------------------------------------------ */
/* Job runner                                                                */
/* ------------------------------------------------------------------------ */

const struct eng_op eng_ops[TX8_OP_COUNT] = {
    [TX8_OP_NOP] = {sizeof(struct tx8_cmd_hdr), 0, eng_check_nop, eng_exec_nop},
    [TX8_OP_FILL] = {sizeof(struct tx8_cmd_fill), 0, eng_check_fill, eng_exec_fill},
    [TX8_OP_COPY] = {sizeof(struct tx8_cmd_copy), 0, eng_check_copy, eng_exec_copy},
    [TX8_OP_CONVERT] = {sizeof(struct tx8_cmd_convert), 0, eng_check_convert, eng_exec_convert},
    [TX8_OP_MATMUL] = {sizeof(struct tx8_cmd_matmul), 0, eng_check_matmul, eng_exec_matmul},
    [TX8_OP_RMSNORM] = {sizeof(struct tx8_cmd_rmsnorm), 0, eng_check_rmsnorm, eng_exec_rmsnorm},
    [TX8_OP_LAYERNORM] = {sizeof(struct tx8_cmd_layernorm), 0, eng_check_layernorm,
                          eng_exec_layernorm},
    [TX8_OP_ROPE] = {sizeof(struct tx8_cmd_rope), 0, eng_check_rope, eng_exec_rope},
    [TX8_OP_ATTENTION] = {sizeof(struct tx8_cmd_attention), TX8_CMD_ATTENTION_SIZE_1_9,
                          eng_check_attention, eng_exec_attention},
    [TX8_OP_SWIGLU] = {sizeof(struct tx8_cmd_swiglu), 0, eng_check_swiglu, eng_exec_swiglu},
    [TX8_OP_ADD] = {sizeof(struct tx8_cmd_add), 0, eng_check_add, eng_exec_add},
    [TX8_OP_EMBED] = {sizeof(struct tx8_cmd_embed), 0, eng_check_embed, eng_exec_embed},
    [TX8_OP_MOE_ROUTE] = {sizeof(struct tx8_cmd_moe_route), 0, eng_check_moe_route,
                          eng_exec_moe_route},
    [TX8_OP_MOE_FFN] = {sizeof(struct tx8_cmd_moe_ffn), 0, eng_check_moe_ffn, eng_exec_moe_ffn},
    [TX8_OP_DSA_INDEX] = {sizeof(struct tx8_cmd_dsa_index), TX8_CMD_DSA_INDEX_SIZE_1_9,
                          eng_check_dsa_index, eng_exec_dsa_index},
    [TX8_OP_SAMPLE] = {sizeof(struct tx8_cmd_sample), TX8_CMD_SAMPLE_SIZE_1_2, eng_check_sample,
                       eng_exec_sample, TX8_CMD_SAMPLE_SIZE_1_3},
};

static int validate_desc(const struct tx8_engine *e, const struct tx8_job_desc *job)
{
    if (job->num_ranges < 1 || job->num_ranges > TX8_JOB_MAX_RANGES)
        return TX8_STATUS_INVALID_JOB;
    if (job->flags &
        ~(uint32_t)(TX8_JOB_F_NO_IRQ | TX8_JOB_F_PROFILE | TX8_JOB_F_BATCH_INVARIANT))
        return TX8_STATUS_INVALID_JOB;
    if (job->rsvd0 || job->rsvd[0] || job->rsvd[1])
        return TX8_STATUS_INVALID_JOB;
    if (job->cmd_size % 8 || job->cmd_size > TX8_ENGINE_MAX_CMD_SIZE)
        return TX8_STATUS_INVALID_JOB;
    for (unsigned i = 0; i < job->num_ranges; i++) {
        const struct tx8_range *r = &job->ranges[i];
        if (r->size == 0 || r->rsvd || r->access == 0 ||
            (r->access & ~(uint32_t)(TX8_ACCESS_READ | TX8_ACCESS_WRITE)))
            return TX8_STATUS_INVALID_JOB;
        if (r->addr < e->heap_offset || r->addr >= e->mem_size || r->size > e->mem_size - r->addr)
            return TX8_STATUS_INVALID_JOB;
    }
    return 0;
}

/* Add the workers' busy time to the job's and the counters; returns the mask
 * of the cores that worked since the last flush. */
static uint64_t flush_busy(struct tx8_engine *e, uint64_t *job_busy)
{
    uint64_t mask = 0;
    for (unsigned i = 0; i < e->cores; i++) {
        uint64_t b = e->w[i].busy_ns;
        if (!b)
            continue;
        e->w[i].busy_ns = 0;
        *job_busy += b;
        if (i < 64)
            mask |= 1ull << i;
        if (i < TX8_MAX_CORES)
            __atomic_fetch_add(&e->ctr->core_busy_ns[i], b, __ATOMIC_RELAXED);
    }
    return mask;
}

/* The job's profiling buffer (TX8_JOB_F_PROFILE), or NULL. A buffer outside
 * the job's WRITE ranges, misaligned or too small fails the job. */
static int prof_buffer(struct tx8_engine *e, const struct tx8_job_desc *job,
                       struct tx8_prof_header **out, uint64_t *bad)
{
    *out = NULL;
    if (!(job->flags & TX8_JOB_F_PROFILE))
        return 0;
    if (job->prof_addr % 8 || job->prof_size < sizeof(struct tx8_prof_header)) {
        *bad = job->prof_addr;
        return TX8_STATUS_INVALID_JOB;
    }
    if (eng_check_range(job, job->prof_addr, job->prof_size, TX8_ACCESS_WRITE, bad))
        return TX8_STATUS_INVALID_JOB;
    struct tx8_prof_header *h = (struct tx8_prof_header *)(e->mem + job->prof_addr);
    uint64_t cap = (job->prof_size - sizeof(*h)) / sizeof(struct tx8_prof_record);
    memset(h, 0, sizeof(*h));
    h->magic = TX8_PROF_MAGIC;
    h->version = TX8_PROF_VERSION;
    h->capacity = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
    h->cores = e->cores;
    *out = h;
    return 0;
}

static unsigned popcount64(uint64_t v)
{
    return (unsigned)__builtin_popcountll(v);
}

static void ctr_add(__u64 *p, uint64_t v)
{
    if (v)
        __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

static void exec_job(struct tx8_engine *e)
{
    const struct tx8_job_desc *job = e->job;
    struct tx8_completion *done = e->done;
    struct tx8_counters *ctr = e->ctr;
    uint64_t job_busy = 0, job_macs = 0, job_energy = 0;
    double job_model_ns = 0;
    unsigned ncmd = 0;
    int st;
    struct tx8_prof_header *prof = NULL;

    atomic_store(&e->aborted, 0);
    atomic_store(&e->failed, 0);
    uint64_t t_start = eng_now_ns();
    e->join_wait_ns = 0;

    e->batch_inv = 0;
    st = validate_desc(e, job);
    if (st)
        goto out;
    e->batch_inv = !!(job->flags & TX8_JOB_F_BATCH_INVARIANT);
    uint64_t pbad = 0;
    st = prof_buffer(e, job, &prof, &pbad);
    if (st) {
        done->fault_addr = pbad;
        goto out;
    }
    if (prof)
        prof->start_ns = t_start - e->clock_base;

    /* The command buffer must be readable by the job (a descriptor error;
     * fault_addr still tells the first unreadable byte). */
    uint64_t bad;
    if (eng_check_range(job, job->cmd_addr, job->cmd_size, TX8_ACCESS_READ, &bad)) {
        st = TX8_STATUS_INVALID_JOB;
        done->fault_addr = bad;
        goto out;
    }
    /* Private copy: user space may rewrite the buffer while we run. */
    if (job->cmd_size)
        memcpy(e->cmdbuf, e->mem + job->cmd_addr, job->cmd_size);

    /* Pass 1: every command's fields and direct operands, before any work. */
    struct eng_cmd c;
    size_t off = 0;
    while (off < job->cmd_size) {
        struct tx8_cmd_hdr h;
        memcpy(&h, e->cmdbuf + off, sizeof(h));
        memset(&c, 0, sizeof(c));
        c.e = e;
        c.index = ncmd;
        c.cmd = e->cmdbuf + off;
        if (h.opcode >= TX8_OP_COUNT ||
            (h.size != eng_ops[h.opcode].size &&
             (!eng_ops[h.opcode].size_old || h.size != eng_ops[h.opcode].size_old) &&
             (!eng_ops[h.opcode].size_old2 || h.size != eng_ops[h.opcode].size_old2)) ||
            h.size > job->cmd_size - off) {
            st = TX8_STATUS_INVALID_CMD;
            goto fail_cmd;
        }
        st = eng_ops[h.opcode].check(&c);
        if (!st) {
            for (unsigned i = 0; i < c.nacc && !st; i++)
                st = eng_check_range(job, c.acc[i].addr, c.acc[i].size, c.acc[i].access,
                                     &c.fault_addr);
        }
        if (st)
            goto fail_cmd;
        e->cmd_off[ncmd++] = (uint32_t)off;
        off += h.size;
    }

    /* Pass 2: execute in order. */
    if (prof)
        prof->setup_ns = eng_now_ns() - e->clock_base - prof->start_ns;
    for (unsigned i = 0; i < ncmd; i++) {
        if (eng_aborted(e)) {
            st = TX8_STATUS_ABORTED;
            done->fault_cmd = i;
            goto out;
        }
        uint64_t t0 = eng_now_ns();
        e->join_wait_ns = 0;
        const uint8_t *p = e->cmdbuf + e->cmd_off[i];
        struct tx8_cmd_hdr h;
        memcpy(&h, p, sizeof(h));
        memset(&c, 0, sizeof(c));
        c.e = e;
        c.index = i;
        c.cmd = p;
        st = eng_ops[h.opcode].check(&c); /* recompute the operand list */
        if (!st)
            st = eng_ops[h.opcode].exec(&c);
        if (!st && atomic_load(&e->failed))
            st = TX8_STATUS_DEVICE_ERROR;
        if (!st && atomic_load(&e->aborted))
            st = TX8_STATUS_ABORTED;
        /* what the command moved, and its energy: the device's accounting,
         * inside the command's time (not a gap between commands) */
        uint64_t rd = c.bytes_read, wr = c.bytes_written, epj = 0;
        for (unsigned a = 0; a < c.nacc && !c.bytes_exact; a++) {
            if (c.acc[a].access & TX8_ACCESS_READ)
                rd += c.acc[a].size;
            if (c.acc[a].access & TX8_ACCESS_WRITE)
                wr += c.acc[a].size;
        }
        if (!st) {
            /* the host wrote the command over the link; the first command
             * also carries the descriptor and the completion record */
            uint64_t link = h.size;
            if (i == 0)
                link += offsetof(struct tx8_job_desc, ranges) +
                        (uint64_t)job->num_ranges * sizeof(struct tx8_range) +
                        sizeof(struct tx8_completion);
            epj = charge_energy(e, c.macs, c.mac_dtype, rd + wr, link, &job_model_ns);
        }
        uint64_t t1 = eng_now_ns();
        uint64_t serial = t1 - t0 > e->join_wait_ns ? t1 - t0 - e->join_wait_ns : 0;
        e->w[0].busy_ns += serial;
        uint64_t cores = flush_busy(e, &job_busy);
        if (st) {
            done->fault_cmd = i;
            done->fault_addr = st == TX8_STATUS_ADDR_FAULT ? c.fault_addr : 0;
            if (st == TX8_STATUS_ADDR_FAULT)
                ctr_add(&ctr->faults, 1);
            goto out;
        }
        /* counters (rd, wr and the energy: above, inside the command's time) */
        ctr_add(&ctr->commands, 1);
        ctr_add(&ctr->bytes_read, rd);
        ctr_add(&ctr->bytes_written, wr);
        if (c.macs && c.mac_dtype < TX8_DTYPE_COUNT)
            ctr_add(&ctr->macs[c.mac_dtype], c.macs);
        else if (c.macs && c.mac_dtype == TX8_DTYPE_F8_E4M3)
            ctr_add(&ctr->macs_fp8, c.macs);
        ctr_add(&ctr->macs_skipped, c.macs_skipped);
        job_macs += c.macs;
        job_energy += epj;
        if (prof) {
            if (prof->count < prof->capacity) {
                struct tx8_prof_record *pr =
                    (struct tx8_prof_record *)(prof + 1) + prof->count++;
                memset(pr, 0, sizeof(*pr));
                pr->index = i;
                pr->opcode = h.opcode;
                pr->ncores = (uint16_t)(cores ? popcount64(cores) : 1);
                pr->start_ns = t0 - e->clock_base;
                pr->end_ns = t1 - e->clock_base;
                pr->core_mask = cores ? cores : 1;
                pr->bytes_read = rd;
                pr->bytes_written = wr;
                pr->macs = c.macs;
                pr->energy_pj = epj;
            } else {
                prof->dropped++;
            }
        }
    }
    goto out;

fail_cmd:
    done->fault_cmd = ncmd;
    done->fault_addr = st == TX8_STATUS_ADDR_FAULT ? c.fault_addr : 0;
    if (st == TX8_STATUS_ADDR_FAULT)
        ctr_add(&ctr->faults, 1);
out:
    if (st != TX8_STATUS_ABORTED && atomic_load(&e->aborted) && st == TX8_STATUS_OK)
        st = TX8_STATUS_ABORTED;
    flush_busy(e, &job_busy);
    if (prof) {
        prof->end_ns = eng_now_ns() - e->clock_base;
        prof->energy_pj = job_energy;
    }
    e->job_model_ns = job_model_ns;
    done->status = (uint32_t)st;
    done->busy_ns = job_busy;
    done->macs = job_macs;
}
