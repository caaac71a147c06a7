/* SPDX-License-Identifier: MIT */
/*
 * tx-bench: throughput of the TX8 compute engine (the emulated device's
 * silicon) next to the machine's own read bandwidth.
 *
 * It measures the read bandwidth itself (all threads streaming a buffer
 * of at least 4 x the last-level cache), then runs GEMV (T = 1) and GEMM
 * (T = 64, 512, ...) jobs through the engine on weight matrices of --size
 * MiB of stored weights per data type (f32, f16, bf16, int8, int8
 * block-sparse) and prints a llama-bench-like Markdown table, or JSON with
 * --json. The last-level cache comes from sysfs (or --llc / TX_LLC_BYTES);
 * a bandwidth ratio whose working set is not at least 4 x the LLC is not
 * reported (see libtx/include/tx-internal/tx_cpu_cache.h).
 *
 * See docs/engine.md.
 */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <tx-internal/tx_cpu_cache.h>
#include <tx/tx_dtype.h>
#include <tx8/tx8_hw.h>

#include "bench.h"
#include "common/cli.h"
#include "engine/tx8_engine.h"

#define MIB (1ull << 20)

struct opts {
    unsigned threads;
    unsigned reps;
    uint64_t size; /* stored bytes of weights per matrix */
    int size_given;
    const char *llc; /* --llc SIZE, or NULL */
    unsigned K;
    int json;
    unsigned tokens[16];
    unsigned ntok;
    unsigned isa;
    unsigned dtype_mask; /* bit per bench dtype */
    unsigned density;    /* percent of blocks kept by the sparse matrix */
    unsigned batch;      /* GEMV commands per job */
    int act_weight;      /* f16/bf16 activations enter as the weights' dtype */
    const char *device;  /* --device SPEC: round-trip rows, or NULL */
    int moe;             /* --moe: MOE_FFN rows only */
    int attn;            /* --attn: ATTENTION / DSA_INDEX rows only */
    int cpu_time;        /* --cpu-time: MATMUL rows timed in process CPU time */
    int batch_inv;       /* --batch-invariant: MATMUL jobs with TX8_JOB_F_BATCH_INVARIANT */
    int small_pages;     /* --small-pages: no MADV_HUGEPAGE (as tx8-emu's memfd memory) */
    unsigned vs_isa;     /* --vs NAME: the MATMUL rows also on this path, alternating */
    int vs;
};

enum { B_F32, B_F16, B_BF16, B_I8, B_I8S, B_F8, B_COUNT };
static const char *const bdt_name[B_COUNT] = {"f32", "f16", "bf16", "int8", "int8-sparse", "fp8"};
/* the rows of int8 weights and int8 activations (fp8 weights take f32 ones) */
#define B_IS_I8(b) ((b) == B_I8 || (b) == B_I8S)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of all the process's threads (tx-bench --cpu-time): on a host
 * shared with other jobs, time spent descheduled does not count. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static int g_cpu_time;
static int g_batch_inv; /* --batch-invariant */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- read bandwidth ----------------------------------------------------- */

struct bw_thread {
    const uint8_t *buf;
    size_t bytes;
    int cpu;
    int simd;
    int prefetch;
    unsigned passes;
    pthread_barrier_t *bar;
    double t0, t1;
    uint64_t sink;
};

static uint64_t read_portable(const void *buf, size_t bytes)
{
    const uint64_t *p = buf;
    size_t n = bytes / 8;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) {
        a0 ^= p[i];
        a1 ^= p[i + 1];
        a2 ^= p[i + 2];
        a3 ^= p[i + 3];
    }
    return a0 ^ a1 ^ a2 ^ a3;
}

static void *bw_main(void *arg)
{
    struct bw_thread *t = arg;
    if (t->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(t->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    pthread_barrier_wait(t->bar);
    t->t0 = now_s();
    for (unsigned i = 0; i < t->passes; i++)
        t->sink ^= t->simd ? txb_read_avx512(t->buf, t->bytes, t->prefetch)
                           : read_portable(t->buf, t->bytes);
    t->t1 = now_s();
    return NULL;
}

static int cpu_list(int *cpus, int max)
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof(set), &set))
        return 0;
    for (int i = 0; i < CPU_SETSIZE && n < max; i++)
        if (CPU_ISSET(i, &set))
            cpus[n++] = i;
    return n;
}

/* GB/s of one run: `threads` pinned threads each stream 1/threads of buf,
 * `passes` times (as long as a GEMV job of `passes` commands: short bursts
 * read faster than the sustained rate). */
static double bw_run(const uint8_t *buf, size_t bytes, unsigned threads, unsigned passes, int simd,
                     int prefetch)
{
    int cpus[TX8_MAX_CORES];
    int ncpu = cpu_list(cpus, TX8_MAX_CORES);
    struct bw_thread th[TX8_MAX_CORES];
    pthread_t tid[TX8_MAX_CORES];
    size_t part = (bytes / threads) & ~(size_t)4095;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, threads);
    for (unsigned i = 0; i < threads; i++) {
        th[i] = (struct bw_thread){0};
        th[i].buf = buf + i * part;
        th[i].bytes = part;
        th[i].cpu = ncpu ? cpus[i % (unsigned)ncpu] : -1;
        th[i].simd = simd;
        th[i].prefetch = prefetch;
        th[i].passes = passes;
        th[i].bar = &bar;
        pthread_create(&tid[i], NULL, bw_main, &th[i]);
    }
    double t0 = 1e300, t1 = 0;
    uint64_t sink = 0;
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        t0 = fmin(t0, th[i].t0);
        t1 = fmax(t1, th[i].t1);
        sink ^= th[i].sink;
    }
    pthread_barrier_destroy(&bar);
    if (sink == 0x5555)
        fprintf(stderr, " ");
    return (double)part * threads * passes / (t1 - t0) / 1e9;
}

/* The machine's read bandwidth now: plain 512-bit loads and loads with the
 * engine's software prefetch, the better of the two. */
struct bwref {
    const uint8_t *buf;
    size_t bytes;
    unsigned threads, passes;
    int simd;
};

static double bw_sample(const struct bwref *b)
{
    double bw = bw_run(b->buf, b->bytes, b->threads, b->passes, b->simd, 0);
    if (b->simd) {
        double p = bw_run(b->buf, b->bytes, b->threads, b->passes, b->simd, 1);
        bw = p > bw ? p : bw;
    }
    return bw;
}

/* bytes bw_run reads per pass: threads shares of whole pages */
static uint64_t bw_bytes(uint64_t bytes, unsigned threads)
{
    return ((bytes / threads) & ~(uint64_t)4095) * threads;
}

/* ---- device memory and weights ------------------------------------------ */

struct dev {
    uint8_t *mem;
    uint64_t size;
    uint64_t brk;
    struct tx8_engine *e;
    struct tx8_engine *e_vs; /* --vs: the other path's engine, or NULL */
    uint64_t cmd;
};

static uint64_t dev_alloc(struct dev *d, uint64_t bytes)
{
    uint64_t a = (d->brk + 4095) & ~4095ull;
    if (a + bytes > d->size) {
        fprintf(stderr, "tx-bench: internal error: device memory exhausted\n");
        exit(1);
    }
    d->brk = a + bytes;
    return a;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline float rndf(void)
{
    return (float)((double)(rnd() >> 40) / 16777216.0 * 2.0 - 1.0);
}

/* Dense shape of a matrix storing about `bytes` bytes: the sparse one keeps
 * `density` percent of its blocks, so it gets 100 / density times the rows
 * (every matrix then streams about the same bytes per GEMV). */
static uint64_t matrix_rows(unsigned bdt, uint64_t bytes, unsigned K, unsigned density)
{
    size_t es = bdt == B_F32 ? 4 : bdt == B_F16 || bdt == B_BF16 ? 2 : 1;
    if (bdt == B_I8S)
        bytes = bytes * 100 / density;
    return bytes / ((uint64_t)K * es);
}

/* Upper bound of the device memory one matrix needs with its activations
 * and outputs for maxT tokens (see make_weight and main). */
static uint64_t matrix_mem(unsigned bdt, uint64_t bytes, unsigned K, unsigned density,
                           unsigned maxT)
{
    size_t es = bdt == B_F32 ? 4 : bdt == B_F16 || bdt == B_BF16 ? 2 : 1;
    uint64_t N = matrix_rows(bdt, bytes, K, density), m = N * K * es + 4 * 4096;
    if (bdt >= B_I8)
        m += N * 4;
    if (bdt == B_I8S)
        m += (N + 1) * 4 + N * (K / TX8_SPARSE_BLOCK) * 2;
    return m + (uint64_t)maxT * K * 4 + (uint64_t)maxT * N * 4;
}

struct matrix {
    struct tx8_weight w;
    uint64_t stored; /* bytes the engine streams: data + scales + index */
    uint64_t macs_per_token;
};

/* A weight of about `bytes` stored data bytes (see matrix_rows), K columns,
 * in device memory. */
static void make_weight(struct dev *d, struct matrix *m, unsigned bdt, uint64_t bytes, unsigned K,
                        unsigned density)
{
    unsigned dtype = bdt == B_F32    ? TX8_DTYPE_F32
                     : bdt == B_F16  ? TX8_DTYPE_F16
                     : bdt == B_BF16 ? TX8_DTYPE_BF16
                     : bdt == B_F8   ? TX8_DTYPE_F8_E4M3
                                     : TX8_DTYPE_I8;
    size_t es = tx_dtype_size(dtype);
    uint64_t N = matrix_rows(bdt, bytes, K, density);
    memset(m, 0, sizeof(*m));
    m->w.rows = (uint32_t)N;
    m->w.cols = K;
    m->w.dtype = (uint16_t)dtype;
    uint64_t nel = N * K;
    if (bdt == B_I8S) {
        unsigned nbc = K / TX8_SPARSE_BLOCK;
        uint64_t ib = (N + 1) * 4 + N * nbc * 2;
        m->w.index = dev_alloc(d, ib);
        uint32_t *rp = (uint32_t *)(void *)(d->mem + m->w.index);
        uint16_t *cb = (uint16_t *)(rp + N + 1);
        uint32_t nnz = 0;
        for (uint64_t r = 0; r < N; r++) {
            rp[r] = nnz;
            for (unsigned b = 0; b < nbc; b++)
                if (rnd() % 100 < density)
                    cb[nnz++] = (uint16_t)b;
        }
        rp[N] = nnz;
        m->w.format = TX8_WFMT_BLOCK_SPARSE;
        m->w.nnz_blocks = nnz;
        nel = (uint64_t)nnz * TX8_SPARSE_BLOCK;
        m->stored += (N + 1) * 4 + (uint64_t)nnz * 2;
    }
    m->w.data = dev_alloc(d, nel * es);
    uint8_t *p = d->mem + m->w.data;
    for (uint64_t i = 0; i < nel; i++) {
        float v = rndf();
        switch (dtype) {
        case TX8_DTYPE_F32:
            memcpy(p + i * 4, &v, 4);
            break;
        case TX8_DTYPE_F16: {
            uint16_t h = tx_f32_to_f16(v);
            memcpy(p + i * 2, &h, 2);
            break;
        }
        case TX8_DTYPE_BF16: {
            uint16_t h = tx_f32_to_bf16(v);
            memcpy(p + i * 2, &h, 2);
            break;
        }
        case TX8_DTYPE_F8_E4M3:
            p[i] = tx_f32_to_e4m3(v * 448.0f);
            break;
        default:
            p[i] = (uint8_t)(int8_t)(v * 127.0f);
        }
    }
    m->stored += nel * es;
    if (dtype == TX8_DTYPE_F8_E4M3) { /* f32 scales per 128 x 128 block */
        uint64_t ns =
            (N + TX8_FP8_BLOCK - 1) / TX8_FP8_BLOCK * ((K + TX8_FP8_BLOCK - 1) / TX8_FP8_BLOCK);
        m->w.scales = dev_alloc(d, ns * 4);
        m->w.group_size = TX8_FP8_BLOCK;
        float *s = (float *)(void *)(d->mem + m->w.scales);
        for (uint64_t i = 0; i < ns; i++)
            s[i] = 1.0f / 448.0f;
        m->stored += ns * 4;
    }
    if (dtype == TX8_DTYPE_I8) {
        m->w.scales = dev_alloc(d, N * 4);
        float *s = (float *)(void *)(d->mem + m->w.scales);
        for (uint64_t r = 0; r < N; r++)
            s[r] = 1.0f / 127.0f;
        m->stored += N * 4;
    }
    m->macs_per_token = nel;
}

/* ---- one measurement ---------------------------------------------------- */

struct result {
    const char *op, *dtype;
    char shape[64];
    unsigned tokens;
    double ms, ms_min, ms_max, gbs, gflops, ratio;
    double bw; /* read bandwidth measured alongside (GEMV), else 0 */
    uint64_t bytes, flops;
    int failed;
    int ratio_ok;      /* the ratio may be reported (working set >= 4 x LLC) */
    double peak;       /* GEMM: expected peak GFLOP/s (GOP/s) of the path, or 0 */
    double ms_vs;      /* --vs: the other path's median, alternating with this one */
    char refused[320]; /* else why not */
};

/*
 * Time a MATMUL: one warm-up job, then `reps` timed jobs of `batch`
 * commands. With bw, a read-bandwidth sample is taken before each timed job
 * (GEMV): the ratio then compares figures measured side by side, which
 * matters on a host whose bandwidth varies over time. With --vs, each job
 * (warm-up included) is followed by the same job on the other path's
 * engine, over the same memory: the speed-up compares runs a few
 * milliseconds apart.
 */
/* Run one job on e, its seconds (wall, or process CPU with --cpu-time) in
 * *s; -1 after saying it failed (`where`: which engine) */
static int time_job(struct tx8_engine *e, const struct tx8_job_desc *job, const char *where,
                    double *s)
{
    struct tx8_completion done;
    double t0 = g_cpu_time ? cpu_s() : now_s();
    tx8_engine_run(e, job, &done, NULL);
    *s = (g_cpu_time ? cpu_s() : now_s()) - t0;
    if (done.status == TX8_STATUS_OK)
        return 0;
    fprintf(stderr, "tx-bench: job failed%s: %s\n", where, tx8_engine_status_name(done.status));
    return -1;
}

static int run_matmul(struct dev *d, const struct matrix *m, unsigned T, uint64_t x, uint64_t y,
                      unsigned act, unsigned reps, unsigned batch, const struct bwref *bw,
                      struct result *res)
{
    struct tx8_cmd_matmul c;
    memset(&c, 0, sizeof(c));
    c.hdr.opcode = TX8_OP_MATMUL;
    c.hdr.size = sizeof(c);
    c.y = y;
    c.x = x;
    c.w = m->w;
    c.tokens = T;
    c.ld_x = m->w.cols;
    c.ld_y = m->w.rows;
    c.act_dtype = (uint16_t)act;
    /* `batch` identical commands per job: the engine's per-job start-up
     * (waking its threads) is paid once, as in a real command stream */
    for (unsigned i = 0; i < batch; i++)
        memcpy(d->mem + d->cmd + i * sizeof(c), &c, sizeof(c));
    struct tx8_job_desc job;
    memset(&job, 0, sizeof(job));
    job.cmd_addr = d->cmd;
    job.cmd_size = (uint32_t)(sizeof(c) * batch);
    job.flags = g_batch_inv ? TX8_JOB_F_BATCH_INVARIANT : 0;
    job.num_ranges = 1;
    job.ranges[0].addr = TX8_CTRL_SIZE;
    job.ranges[0].size = d->size - TX8_CTRL_SIZE;
    job.ranges[0].access = TX8_ACCESS_READ | TX8_ACCESS_WRITE;
    double *t = calloc(reps, sizeof(double)), *bws = calloc(reps, sizeof(double));
    double *tv = calloc(reps, sizeof(double));
    for (unsigned r = 0; r <= reps; r++) {
        job.seqno = r + 1;
        if (bw && r > 0)
            bws[r - 1] = bw_sample(bw);
        double s, sv = 0;
        if (time_job(d->e, &job, "", &s) ||
            (d->e_vs && time_job(d->e_vs, &job, " on the --vs path", &sv))) {
            free(t);
            free(tv);
            free(bws);
            res->failed = 1;
            return -1;
        }
        if (r > 0) { /* the first run warms up */
            t[r - 1] = s / batch;
            tv[r - 1] = sv / batch;
        }
    }
    double mn = t[0], mx = t[0];
    for (unsigned r = 1; r < reps; r++) {
        mn = fmin(mn, t[r]);
        mx = fmax(mx, t[r]);
    }
    double med = median(t, reps);
    res->bw = bw ? median(bws, reps) : 0;
    res->ms_vs = d->e_vs ? median(tv, reps) * 1e3 : 0;
    free(tv);
    free(t);
    free(bws);
    res->tokens = T;
    res->ms = med * 1e3;
    res->ms_min = mn * 1e3;
    res->ms_max = mx * 1e3;
    res->bytes = m->stored + (uint64_t)T * m->w.cols * 4 + (uint64_t)T * m->w.rows * 4;
    res->flops = 2ull * T * m->macs_per_token;
    res->gbs = (double)res->bytes / med / 1e9;
    res->gflops = (double)res->flops / med / 1e9;
    return 0;
}

/* ---- output ------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tx-bench [options]\n"
            "  -t, --threads N     compute cores (engine worker threads); default: all CPUs\n"
            "  -r, --repetitions N timed runs per test (after one warm-up); default 5\n"
            "  -s, --size MIB      stored weight bytes per matrix; default: 256 or\n"
            "                      4 x LLC + 1/16, whichever is larger\n"
            "  -p, --tokens LIST   token counts, comma separated; default 1,64,512\n"
            "  -d, --dtypes LIST   f32,f16,bf16,int8,int8-sparse,fp8 (default: all)\n"
            "  -k, --cols K        matrix columns (inputs); default 4096\n"
            "  -b, --batch N       GEMV commands per job (T <= 4); default 8\n"
            "      --density PCT   blocks kept by the sparse matrix; default 50\n"
            "      --isa NAME      portable, avx2, avx512, amx (default: best; amx where the CPU\n"
            "                      has AMX and the kernel grants the tile state)\n"
            "      --vs NAME       the MATMUL rows also on path NAME, each run followed by\n"
            "                      the same job there: adds its GFLOP/s and the speed-up\n"
            "                      (e.g. --isa amx --vs avx512)\n"
            "      --act MODE      f32 (default): f16/bf16 rows take f32 activations;\n"
            "                      weight: as the weights' dtype (glm-inference's f16/bf16)\n"
            "      --llc SIZE      last-level cache size (e.g. 32M, 480M) instead of sysfs;\n"
            "                      also TX_LLC_BYTES. Ratios need working sets >= 4 x LLC\n"
            "      --device SPEC   instead: round trip (submit to completion) of an empty\n"
            "                      and of one-command jobs on a device (e.g. emu:SOCKET);\n"
            "                      -r below 100 means 2000 jobs per row\n"
            "      --moe           instead: MOE_FFN jobs, fused vs per-expert path, alternating\n"
            "                      (-r below 5 means 20 runs per row)\n"
            "      --attn          instead: ATTENTION / DSA_INDEX jobs at issue 11's shapes, tile\n"
            "                      vs per-token path, alternating (-r below 5 means 11 runs)\n"
            "      --cpu-time      time the MATMUL rows in process CPU time (all threads)\n"
            "                      instead of wall time: steadier on a shared host; with\n"
            "                      -t 1 it is the work itself (GB/s, ratio: per CPU-second)\n"
            "      --batch-invariant  the MATMUL jobs with TX8_JOB_F_BATCH_INVARIANT (the\n"
            "                      batch-invariant kernels, docs/engine.md)\n"
            "      --json          machine-readable output\n"
            "      --small-pages   the MATMUL rows' memory without transparent huge pages\n"
            "                      (MADV_HUGEPAGE), as tx8-emu's device memory (shared\n"
            "                      memfd pages): streaming as glm-server's passes see it\n"
            "  -h, --help\n");
}

/* An integer option in [lo, hi]: else one line naming the option and its
 * range (common/cli.c), as every tool of the project prints it. */
/* an ISA path name for opt (--isa, --vs), usable on this CPU; -1 after
 * saying what is wrong */
static int isa_opt(const char *opt, const char *s, unsigned *isa)
{
    if (tx8_engine_isa_parse(s, isa) || *isa == TX8_ISA_AUTO) {
        fprintf(stderr, "tx-bench: %s: '%s' is not one of portable, avx2, avx512, amx\n", opt, s);
        return -1;
    }
    if (tx8_engine_isa_why(*isa)) {
        fprintf(stderr, "tx-bench: %s %s: not usable here: %s\n", opt, s,
                tx8_engine_isa_why(*isa));
        return -1;
    }
    return 0;
}

static int uopt(const char *opt, const char *s, long long lo, long long hi, const char *note,
                unsigned long long *out)
{
    long long x;
    if (txc_opt_long("tx-bench", opt, s, lo, hi, note, &x) < 0)
        return -1;
    *out = (unsigned long long)x;
    return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {
        {"threads", required_argument, 0, 't'},
        {"repetitions", required_argument, 0, 'r'},
        {"size", required_argument, 0, 's'},
        {"tokens", required_argument, 0, 'p'},
        {"dtypes", required_argument, 0, 'd'},
        {"cols", required_argument, 0, 'k'},
        {"density", required_argument, 0, 1},
        {"isa", required_argument, 0, 2},
        {"json", no_argument, 0, 3},
        {"help", no_argument, 0, 'h'},
        {"batch", required_argument, 0, 'b'},
        {"llc", required_argument, 0, 4},
        {"act", required_argument, 0, 5},
        {"device", required_argument, 0, 6},
        {"moe", no_argument, 0, 7},
        {"cpu-time", no_argument, 0, 8},
        {"batch-invariant", no_argument, 0, 9},
        {"attn", no_argument, 0, 10},
        {"small-pages", no_argument, 0, 11},
        {"vs", required_argument, 0, 12},
        {"version", no_argument, 0, 13},
        {0, 0, 0, 0},
    };
    int c;
    unsigned long long v;
    while ((c = getopt_long(argc, argv, "t:r:s:p:d:k:b:h", lo, NULL)) != -1) {
        switch (c) {
        case 't':
            if (uopt("-t", optarg, 1, TX8_MAX_CORES, NULL, &v))
                goto bad;
            o->threads = (unsigned)v;
            break;
        case 'r':
            if (uopt("-r", optarg, 1, 1000, NULL, &v))
                goto bad;
            o->reps = (unsigned)v;
            break;
        case 's':
            if (uopt("-s", optarg, 1, 16384, "MiB", &v))
                goto bad;
            o->size = v * MIB;
            o->size_given = 1;
            break;
        case 'b':
            if (uopt("-b", optarg, 1, 64, NULL, &v))
                goto bad;
            o->batch = (unsigned)v;
            break;
        case 'k':
            if (uopt("-k", optarg, 64, 1 << 20, "a multiple of 64", &v))
                goto bad;
            if (v % 64) {
                fprintf(stderr, "tx-bench: -k: '%s' is not a multiple of 64\n", optarg);
                goto bad;
            }
            o->K = (unsigned)v;
            break;
        case 'p': {
            o->ntok = 0;
            char *s = strdup(optarg), *save = NULL;
            for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (o->ntok == 16) {
                    fprintf(stderr, "tx-bench: -p: at most 16 token counts\n");
                    free(s);
                    goto bad;
                }
                if (uopt("-p", tok, 1, 65536, "a comma-separated list", &v)) {
                    free(s);
                    goto bad;
                }
                o->tokens[o->ntok++] = (unsigned)v;
            }
            free(s);
            if (!o->ntok) {
                fprintf(stderr, "tx-bench: -p: '%s' names no token count\n", optarg);
                goto bad;
            }
            break;
        }
        case 'd': {
            o->dtype_mask = 0;
            char *s = strdup(optarg), *save = NULL;
            for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int found = 0;
                for (unsigned i = 0; i < B_COUNT; i++)
                    if (!strcmp(tok, bdt_name[i])) {
                        o->dtype_mask |= 1u << i;
                        found = 1;
                    }
                if (!found) {
                    fprintf(stderr, "tx-bench: unknown data type '%s'\n", tok);
                    free(s);
                    return -1;
                }
            }
            free(s);
            break;
        }
        case 1:
            if (uopt("--density", optarg, 1, 100, "percent", &v))
                goto bad;
            o->density = (unsigned)v;
            break;
        case 2:
            if (isa_opt("--isa", optarg, &o->isa))
                goto bad;
            break;
        case 5:
            if (!strcmp(optarg, "f32"))
                o->act_weight = 0;
            else if (!strcmp(optarg, "weight"))
                o->act_weight = 1;
            else {
                fprintf(stderr, "tx-bench: --act: '%s' is not one of f32, weight\n", optarg);
                goto bad;
            }
            break;
        case 6:
            o->device = optarg;
            break;
        case 7:
            o->moe = 1;
            break;
        case 10:
            o->attn = 1;
            break;
        case 3:
            o->json = 1;
            break;
        case 4:
            o->llc = optarg;
            break;
        case 8:
            o->cpu_time = 1;
            break;
        case 9:
            o->batch_inv = 1;
            break;
        case 11:
            o->small_pages = 1;
            break;
        case 12:
            if (isa_opt("--vs", optarg, &o->vs_isa))
                goto bad;
            o->vs = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 13:
            txc_print_version("tx-bench");
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tx-bench: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
bad: /* the message named the option and what it accepts */
    return -1;
}

static void add_str_or_null(json_object *o, const char *key, const char *s)
{
    json_object_object_add(o, key, s && s[0] ? json_object_new_string(s) : NULL);
}

struct run {
    const struct opts *o;
    const char *isa;
    const char *isa_vs; /* --vs: the other path's name */
    struct tx_llc llc;
    uint64_t min_ws;   /* 4 x LLC, 0 when unknown */
    uint64_t ref_ws;   /* bytes the read reference streams per pass */
    int ref_ok;        /* the read reference may be reported */
    char ref_why[256]; /* else why not */
    double bw;         /* the read reference, GB/s (0 when refused) */
    double ghz;        /* measured core clock */
    struct txb_peak pk[TXB_FAMILIES];
    struct result res[64];
    unsigned nres;
};

/*
 * FP8 against INT8 (issue 38): the fp8 and int8 rows of one token count,
 * measured in this run, hold the same bytes per weight. Returns the number
 * of pairs; for pair n, *f and *i the rows, *ratio fp8 / int8 GFLOP/s and
 * *bound the compute bound of the ratio, fp8's expected peak (f32 FMA,
 * 16 MACs per instruction) / int8's (vpdpbusd, 64), or 0 (GEMV: no peak).
 */
static unsigned fp8_pair(const struct run *R, unsigned n, const struct result **f,
                         const struct result **i, double *ratio, double *bound)
{
    unsigned found = 0;
    for (unsigned a = 0; a < R->nres; a++) {
        if (strcmp(R->res[a].dtype, "fp8"))
            continue;
        for (unsigned b = 0; b < R->nres; b++) {
            if (strcmp(R->res[b].dtype, "int8") || R->res[b].tokens != R->res[a].tokens ||
                R->res[b].gflops <= 0)
                continue;
            if (found++ == n) {
                *f = &R->res[a];
                *i = &R->res[b];
                *ratio = R->res[a].gflops / R->res[b].gflops;
                *bound = R->res[a].peak > 0 && R->res[b].peak > 0
                             ? R->res[a].peak / R->res[b].peak
                             : 0;
                return found;
            }
            break;
        }
    }
    return found;
}

static void print_json(const struct run *R)
{
    const struct opts *o = R->o;
    json_object *root = json_object_new_object();
    json_object_object_add(root, "isa", json_object_new_string(R->isa));
    add_str_or_null(root, "vs_isa", o->vs ? R->isa_vs : NULL);
    json_object_object_add(root, "threads", json_object_new_int((int)o->threads));
    json_object_object_add(root, "repetitions", json_object_new_int((int)o->reps));
    json_object_object_add(root, "gemv_batch", json_object_new_int((int)o->batch));
    json_object_object_add(root, "weight_bytes", json_object_new_int64((int64_t)o->size));
    json_object_object_add(root, "llc_bytes",
                           R->llc.bytes ? json_object_new_int64((int64_t)R->llc.bytes) : NULL);
    json_object_object_add(root, "llc_level",
                           R->llc.level ? json_object_new_int((int)R->llc.level) : NULL);
    json_object_object_add(root, "llc_instances",
                           R->llc.bytes ? json_object_new_int((int)R->llc.instances) : NULL);
    add_str_or_null(root, "llc_source", R->llc.bytes ? R->llc.source : NULL);
    add_str_or_null(root, "llc_error", R->llc.bytes ? NULL : R->llc.error);
    json_object_object_add(root, "min_working_set_bytes",
                           R->min_ws ? json_object_new_int64((int64_t)R->min_ws) : NULL);
    json_object_object_add(root, "read_working_set_bytes",
                           json_object_new_int64((int64_t)R->ref_ws));
    json_object_object_add(root, "read_bandwidth_gbs",
                           R->ref_ok ? json_object_new_double(R->bw) : NULL);
    add_str_or_null(root, "read_bandwidth_refused", R->ref_ok ? NULL : R->ref_why);
    json_object *arr = json_object_new_array();
    for (unsigned i = 0; i < R->nres; i++) {
        const struct result *r = &R->res[i];
        json_object *e = json_object_new_object();
        json_object_object_add(e, "op", json_object_new_string(r->op));
        json_object_object_add(e, "dtype", json_object_new_string(r->dtype));
        json_object_object_add(e, "shape", json_object_new_string(r->shape));
        json_object_object_add(e, "tokens", json_object_new_int((int)r->tokens));
        json_object_object_add(e, "ms", json_object_new_double(r->ms));
        json_object_object_add(e, "ms_min", json_object_new_double(r->ms_min));
        json_object_object_add(e, "ms_max", json_object_new_double(r->ms_max));
        json_object_object_add(e, "bytes", json_object_new_int64((int64_t)r->bytes));
        json_object_object_add(e, "working_set_bytes", json_object_new_int64((int64_t)r->bytes));
        json_object_object_add(e, "flops", json_object_new_int64((int64_t)r->flops));
        json_object_object_add(e, "gbs", json_object_new_double(r->gbs));
        json_object_object_add(e, "gflops", json_object_new_double(r->gflops));
        json_object_object_add(e, "ratio", r->ratio_ok ? json_object_new_double(r->ratio) : NULL);
        add_str_or_null(e, "ratio_refused", r->ratio_ok ? NULL : r->refused);
        json_object_object_add(e, "peak_gflops",
                               r->peak > 0 ? json_object_new_double(r->peak) : NULL);
        json_object_object_add(e, "of_peak",
                               r->peak > 0 ? json_object_new_double(r->gflops / r->peak) : NULL);
        json_object_object_add(e, "read_bandwidth_gbs",
                               r->bw > 0 ? json_object_new_double(r->bw) : NULL);
        if (o->vs) {
            json_object_object_add(e, "vs_ms", json_object_new_double(r->ms_vs));
            json_object_object_add(e, "vs_gflops",
                                   json_object_new_double((double)r->flops / r->ms_vs / 1e6));
            json_object_object_add(e, "speedup", json_object_new_double(r->ms_vs / r->ms));
        }
        json_object_array_add(arr, e);
    }
    json_object_object_add(root, "results", arr);
    json_object *pairs = json_object_new_array();
    const struct result *f, *i8;
    double ratio, bound;
    for (unsigned n = 0; fp8_pair(R, n, &f, &i8, &ratio, &bound) > n; n++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "op", json_object_new_string(f->op));
        json_object_object_add(e, "tokens", json_object_new_int((int)f->tokens));
        json_object_object_add(e, "ratio", json_object_new_double(ratio));
        json_object_object_add(e, "compute_bound",
                               bound > 0 ? json_object_new_double(bound) : NULL);
        json_object_array_add(pairs, e);
    }
    json_object_object_add(root, "fp8_vs_int8", pairs);
    printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                                            JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(root);
}

static void print_table(const struct run *R)
{
    const struct opts *o = R->o;
    char llc[400];
    tx_llc_describe(&R->llc, llc, sizeof(llc));
    printf("tx-bench: engine %s, %u threads, weights %llu MiB per matrix, %u runs, "
           "%u GEMV commands per job%s%s\n",
           R->isa, o->threads, (unsigned long long)(o->size / MIB), o->reps, o->batch,
           o->cpu_time ? "; ms = process CPU time (--cpu-time)" : "",
           o->batch_inv ? "; batch-invariant jobs" : "");
    if (o->isa == TX8_ISA_AUTO && !tx8_engine_setting_env("TX8_ENGINE_ISA"))
        printf("default path: %s\n", tx8_engine_isa_default_why());
    if (R->min_ws)
        printf("last-level cache: %s; minimum working set %u x LLC = %.1f MiB\n", llc,
               TX_LLC_FACTOR, (double)R->min_ws / MIB);
    else
        printf("last-level cache: %s\n", llc);
    if (R->ref_ok)
        printf("measured read bandwidth: %.2f GB/s (%u threads, working set %.1f MiB)\n\n", R->bw,
               o->threads, (double)R->ref_ws / MIB);
    else
        printf("read bandwidth: not reported: %s\n\n", R->ref_why);
    static const char *const fam[] = {"",        "scalar",  "FMA256",  "FMA512",
                                      "VNNI512", "BF16",    "AMX-INT8", "AMX-BF16"};
    if (R->ghz > 0) {
        printf("expected peak (measured clock %.2f GHz x instructions per cycle x MACs per "
               "instruction x 2 x %u threads):",
               R->ghz, o->threads);
        for (unsigned f = TXB_SCALAR; f < TXB_FAMILIES; f++)
            if (R->pk[f].ipc > 0)
                printf(f >= TXB_AMX_I8 ? " %s %.4f/cycle x %u = %.1f GFLOP/s;"
                                       : " %s %.2f/cycle x %u = %.1f GFLOP/s;",
                       fam[f], R->pk[f].ipc,
                       R->pk[f].macs_per_insn,
                       R->ghz * R->pk[f].ipc * R->pk[f].macs_per_insn * 2 * o->threads);
        printf("\n\n");
    }
    printf("| op   | dtype       | shape (TxNxK)          |        ms |    GB/s |  GFLOP/s | "
           "read GB/s | ratio | of peak |%s\n",
           o->vs ? " vs GFLOP/s | speed-up |" : "");
    printf("| ---- | ----------- | ---------------------- | --------: | ------: | -------: | "
           "--------: | ----: | ------: |%s\n",
           o->vs ? " ---------: | -------: |" : "");
    for (unsigned i = 0; i < R->nres; i++) {
        const struct result *r = &R->res[i];
        char bw[16] = "-", ratio[16] = "-", pk[16] = "-";
        if (r->bw > 0)
            snprintf(bw, sizeof(bw), "%.2f", r->bw);
        if (r->ratio_ok)
            snprintf(ratio, sizeof(ratio), "%.2f", r->ratio);
        if (r->peak > 0)
            snprintf(pk, sizeof(pk), "%.2f", r->gflops / r->peak);
        printf("| %-4s | %-11s | %-22s | %9.3f | %7.2f | %8.1f | %9s | %5s | %7s |", r->op,
               r->dtype, r->shape, r->ms, r->gbs, r->gflops, bw, ratio, pk);
        if (o->vs)
            printf(" %10.1f | %7.2fx |", (double)r->flops / r->ms_vs / 1e6, r->ms_vs / r->ms);
        printf("\n");
    }
    const struct result *f, *i8;
    double fr, bound;
    for (unsigned n = 0; fp8_pair(R, n, &f, &i8, &fr, &bound) > n; n++) {
        if (n == 0)
            printf("\nFP8 / INT8, the same bytes per weight (fp8: f32 activations and FMA, "
                   "int8: int8 activations and vpdpbusd):\n");
        printf("  %s T=%u: %.2f (%.1f / %.1f GFLOP/s)", f->op, f->tokens, fr, f->gflops,
               i8->gflops);
        if (bound > 0)
            printf("; compute bound %.2f = FP8 peak %.1f / INT8 peak %.1f GFLOP/s "
                   "(%.2f of it reached)",
                   bound, f->peak, i8->peak, fr / bound);
        printf("\n");
    }
    printf("\nratio = GB/s / read GB/s: the machine's read bandwidth, for gemv sampled\n"
           "between the timed runs (the host's bandwidth varies), else the figure above;\n"
           "only for working sets >= %u x the last-level cache. of peak = GFLOP/s / the\n"
           "expected peak of the instruction family the path's gemm kernel uses\n",
           TX_LLC_FACTOR);
    if (o->vs)
        printf("vs = the same jobs on the %s path, each run right after this path's (one\n"
               "engine per path over the same memory); speed-up = its median ms / this path's\n",
               R->isa_vs);
    /* each distinct reason once */
    for (unsigned i = 0; i < R->nres; i++) {
        const struct result *r = &R->res[i];
        if (r->ratio_ok)
            continue;
        int seen = 0;
        for (unsigned j = 0; j < i && !seen; j++)
            seen = !R->res[j].ratio_ok && !strcmp(R->res[j].refused, r->refused);
        if (!seen)
            printf("ratio not reported (%s %s): %s\n", r->dtype, r->shape, r->refused);
    }
}

/* "avx512+avx512bf16" and the like: the engine's path and BF16 feature */
static const char *engine_name(const struct tx8_engine *e, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s", tx8_engine_isa_name(tx8_engine_isa(e)),
             (tx8_engine_features(e) & TX8_FEAT_AVX512BF16) ? "+avx512bf16" : "");
    return buf;
}

int main(int argc, char **argv)
{
    struct opts o = {.threads = 0,
                     .reps = 5,
                     .size = 256 * MIB,
                     .K = 4096,
                     .tokens = {1, 64, 512},
                     .ntok = 3,
                     .isa = TX8_ISA_AUTO,
                     .dtype_mask = (1u << B_COUNT) - 1,
                     .density = 50,
                     .batch = 8};
    if (parse_opts(argc, argv, &o))
        return 2;
    g_cpu_time = o.cpu_time;
    g_batch_inv = o.batch_inv;
    if (o.device) /* the round trip only (see roundtrip.c) */
        return txb_roundtrip(o.device, o.reps < 100 ? 2000 : o.reps, o.json);
    if (o.moe) { /* MOE_FFN rows only (see moe.c) */
        int nc[TX8_MAX_CORES];
        int n = cpu_list(nc, TX8_MAX_CORES);
        return txb_moe(o.threads ? o.threads : (n > 0 ? (unsigned)n : 1), o.reps < 5 ? 20 : o.reps);
    }
    if (o.attn) { /* ATTENTION / DSA_INDEX rows only (see attn.c) */
        int nc[TX8_MAX_CORES];
        int n = cpu_list(nc, TX8_MAX_CORES);
        return txb_attn(o.threads ? o.threads : (n > 0 ? (unsigned)n : 1),
                        o.reps < 5 ? 11 : o.reps);
    }
    static struct run R;
    R.o = &o;
    int bad_llc = 0;
    if (tx_llc_resolve(o.llc, NULL, &R.llc, &bad_llc)) {
        if (bad_llc) {
            fprintf(stderr, "tx-bench: %s\n", R.llc.error);
            usage(stderr);
            return 2;
        }
        fprintf(stderr,
                "tx-bench: last-level cache size unknown (%s): bandwidth ratios will not be "
                "reported; give --llc SIZE or TX_LLC_BYTES\n",
                R.llc.error);
    }
    R.min_ws = tx_llc_min_working_set(&R.llc);
    int cpus[TX8_MAX_CORES];
    int ncpu = cpu_list(cpus, TX8_MAX_CORES);
    if (!o.threads)
        o.threads = ncpu > 0 ? (unsigned)ncpu : 1;
    if (!o.size_given && R.min_ws) {
        /* 4 x LLC with 1/16 headroom: the sparse matrix's stored bytes
         * vary a little with its random block pattern */
        uint64_t want = (R.min_ws + R.min_ws / 16 + MIB - 1) / MIB * MIB;
        if (want > o.size)
            o.size = want;
    }
    if (o.size < (uint64_t)o.K * 4 * 4) {
        fprintf(stderr, "tx-bench: --size too small for %u columns\n", o.K);
        return 2;
    }
    unsigned maxT = 0;
    for (unsigned i = 0; i < o.ntok; i++)
        maxT = o.tokens[i] > maxT ? o.tokens[i] : maxT;

    /* the read reference's buffer: --size bytes (as long as a GEMV's
     * stream), at least 4 x LLC */
    uint64_t rbytes = o.size;
    if (R.min_ws) {
        uint64_t need = (R.min_ws + (uint64_t)o.threads * 4096 + MIB - 1) / MIB * MIB;
        if (need > rbytes)
            rbytes = need;
    }
    R.ref_ws = bw_bytes(rbytes, o.threads);
    R.ref_ok = tx_llc_check(&R.llc, R.ref_ws, R.ref_why, sizeof(R.ref_why));

    /* device memory: control block, command buffer, the read reference's
     * buffer, the largest matrix with its scales, sparse index,
     * activations and outputs */
    uint64_t mmax = 0;
    for (unsigned b = 0; b < B_COUNT; b++)
        if (o.dtype_mask & (1u << b)) {
            uint64_t m = matrix_mem(b, o.size, o.K, o.density, maxT);
            mmax = m > mmax ? m : mmax;
        }
    struct dev d = {0};
    d.size = TX8_CTRL_SIZE + MIB + rbytes + mmax + 16 * MIB;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t phys = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
    if (phys && d.size > phys / 4 * 3) {
        fprintf(stderr,
                "tx-bench: needs %.2f GiB of memory (read reference %llu MiB, weights %llu MiB "
                "per matrix, activations and outputs of %u tokens), more than 3/4 of the "
                "machine's %.2f GiB; the working sets are sized from the last-level cache "
                "(%u x %.1f MiB): use fewer tokens (-p), a smaller --size, or --llc\n",
                (double)d.size / (1 << 30), (unsigned long long)(rbytes / MIB),
                (unsigned long long)(o.size / MIB), maxT, (double)phys / (1 << 30), TX_LLC_FACTOR,
                (double)R.llc.bytes / MIB);
        return 1;
    }
    d.mem = mmap(NULL, d.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (d.mem == MAP_FAILED) {
        fprintf(stderr, "tx-bench: cannot map %llu MiB: %s\n", (unsigned long long)(d.size / MIB),
                strerror(errno));
        return 1;
    }
    if (!o.small_pages)
        madvise(d.mem, d.size, MADV_HUGEPAGE);
    struct tx8_engine_config cfg = {o.threads, -1, 0, o.isa, {0, 0, 0}};
    int rc = tx8_engine_create(&d.e, d.mem, d.size, TX8_CTRL_SIZE, &cfg, NULL);
    if (rc) {
        fprintf(stderr, "tx-bench: cannot create the engine: %s\n", strerror(-rc));
        munmap(d.mem, d.size);
        return 1;
    }
    if (o.vs) {
        struct tx8_engine_config vcfg = {o.threads, -1, 0, o.vs_isa, {0, 0, 0}};
        rc = tx8_engine_create(&d.e_vs, d.mem, d.size, TX8_CTRL_SIZE, &vcfg, NULL);
        if (rc) {
            fprintf(stderr, "tx-bench: cannot create the --vs engine: %s\n", strerror(-rc));
            tx8_engine_destroy(d.e);
            munmap(d.mem, d.size);
            return 1;
        }
    }
    d.brk = TX8_CTRL_SIZE;
    d.cmd = dev_alloc(&d, 65536);

    /* the families the path's gemm kernels use, and their measured peaks */
    unsigned eisa = tx8_engine_isa(d.e), feat = tx8_engine_features(d.e);
    R.ghz = txb_clock_ghz();
    enum txb_family fam_f = eisa == TX8_ISA_AVX512 || eisa == TX8_ISA_AMX ? TXB_FMA512
                            : eisa == TX8_ISA_AVX2 ? TXB_FMA256
                                                   : TXB_SCALAR;
    enum txb_family fam_i8 = eisa == TX8_ISA_AVX512 || eisa == TX8_ISA_AMX ? TXB_VNNI512
                             : eisa == TX8_ISA_PORTABLE ? TXB_SCALAR
                                                        : TXB_NONE; /* avx2: not modelled */
    enum txb_family fam_bf = (feat & TX8_FEAT_AVX512BF16) && o.act_weight ? TXB_BF16 : fam_f;
    /* amx: T >= 16 int8 and BF16 x BF16 blocks run on the tiles */
    enum txb_family fam_ai8 = eisa == TX8_ISA_AMX ? TXB_AMX_I8 : TXB_NONE;
    enum txb_family fam_abf = eisa == TX8_ISA_AMX && fam_bf == TXB_BF16 ? TXB_AMX_BF16 : TXB_NONE;
    enum txb_family fams[5] = {fam_f, fam_i8, fam_bf, fam_ai8, fam_abf};
    for (unsigned i = 0; i < 5; i++)
        if (fams[i] != TXB_NONE && R.pk[fams[i]].ipc == 0)
            txb_peak(fams[i], R.ghz, &R.pk[fams[i]]);

    /* the machine's read bandwidth over a buffer of its own: median of
     * reps samples after a warm-up (and again alongside every GEMV run,
     * see run_matmul); not measured when it could not be reported */
    uint64_t bwbuf = dev_alloc(&d, rbytes);
    struct bwref ref = {d.mem + bwbuf, rbytes, o.threads, o.batch,
                        tx8_engine_isa_supported(TX8_ISA_AVX512)};
    uint64_t mark = d.brk;
    if (R.ref_ok) {
        memset(d.mem + bwbuf, 1, rbytes);
        double *bws = calloc(o.reps, sizeof(double));
        bw_sample(&ref);
        for (unsigned r = 0; r < o.reps; r++)
            bws[r] = bw_sample(&ref);
        R.bw = median(bws, o.reps);
        free(bws);
    }

    for (unsigned b = 0; b < B_COUNT; b++) {
        if (!(o.dtype_mask & (1u << b)))
            continue;
        d.brk = mark;
        struct matrix m;
        make_weight(&d, &m, b, o.size, o.K, o.density);
        uint64_t x = dev_alloc(&d, (uint64_t)maxT * o.K * 4);
        uint64_t y = dev_alloc(&d, (uint64_t)maxT * m.w.rows * 4);
        float *xp = (float *)(void *)(d.mem + x);
        for (uint64_t i = 0; i < (uint64_t)maxT * o.K; i++)
            xp[i] = rndf();
        memset(d.mem + y, 0, (uint64_t)maxT * m.w.rows * 4);
        unsigned act = B_IS_I8(b)                    ? TX8_DTYPE_I8
                       : o.act_weight && b == B_F16  ? TX8_DTYPE_F16
                       : o.act_weight && b == B_BF16 ? TX8_DTYPE_BF16
                                                     : TX8_DTYPE_F32;
        for (unsigned i = 0; i < o.ntok && R.nres < 64; i++) {
            struct result *r = &R.res[R.nres];
            memset(r, 0, sizeof(*r));
            unsigned T = o.tokens[i];
            r->op = T == 1 ? "gemv" : "gemm";
            r->dtype = bdt_name[b];
            if (b == B_I8S)
                snprintf(r->shape, sizeof(r->shape), "%ux%ux%u@%u%%", T, m.w.rows, m.w.cols,
                         (unsigned)((uint64_t)m.w.nnz_blocks * 100 /
                                    ((uint64_t)m.w.rows * (m.w.cols / TX8_SPARSE_BLOCK))));
            else
                snprintf(r->shape, sizeof(r->shape), "%ux%ux%u", T, m.w.rows, m.w.cols);
            /* GEMV jobs are short: several per job (see --batch) */
            unsigned batch = T <= 4 ? o.batch : 1;
            const struct bwref *sample = T <= 4 && R.ref_ok ? &ref : NULL;
            if (run_matmul(&d, &m, T, x, y, act, o.reps, batch, sample, r) == 0) {
                if (!r->bw)
                    r->bw = R.bw;
                /* the job's working set: weights (data, scales, index),
                 * activations and outputs */
                if (!R.ref_ok)
                    snprintf(r->refused, sizeof(r->refused), "no read bandwidth: %s", R.ref_why);
                else
                    r->ratio_ok = tx_llc_check(&R.llc, r->bytes, r->refused, sizeof(r->refused));
                r->ratio = r->ratio_ok && r->bw > 0 ? r->gbs / r->bw : 0;
                enum txb_family fm = B_IS_I8(b) ? fam_i8 : b == B_BF16 ? fam_bf : fam_f;
                if (T >= 16 && b == B_I8 && fam_ai8 != TXB_NONE)
                    fm = fam_ai8;
                else if (T >= 16 && b == B_BF16 && fam_abf != TXB_NONE)
                    fm = fam_abf;
                if (T > 4 && fm != TXB_NONE && R.pk[fm].ipc > 0)
                    r->peak = R.ghz * R.pk[fm].ipc * R.pk[fm].macs_per_insn * 2 * o.threads;
                R.nres++;
            }
        }
    }

    static char isa_buf[64], vs_buf[64];
    R.isa = engine_name(d.e, isa_buf, sizeof(isa_buf));
    if (d.e_vs)
        R.isa_vs = engine_name(d.e_vs, vs_buf, sizeof(vs_buf));
    if (o.json)
        print_json(&R);
    else
        print_table(&R);
    tx8_engine_destroy(d.e);
    if (d.e_vs)
        tx8_engine_destroy(d.e_vs);
    munmap(d.mem, d.size);
    return 0;
}
