/* SPDX-License-Identifier: MIT */
/*
 * tx-bench --attn: ATTENTION and DSA_INDEX jobs at issue 11's shapes (the
 * GLM-5.1-architecture model: absorbed MLA, 16 heads over a 512 + 64
 * latent, f16 cache; its indexer, 16 heads x 128 over a Q8_0 key cache,
 * top 2048; the GLM-4.5-architecture model: 16 q heads, 4 kv heads of 128,
 * f16, bf16, q8_0 and q4_0 caches), the engine's AVX-512 tile path against its
 * per-token path (TX8_ATTN_TILE=0, TX8_DSA_TILE=0), and for ATTENTION the
 * tile with BF16 products (TX8_ATTN_F_BF16, interface 1.7: the vdpbf16ps
 * tile where the CPU has AVX512-BF16), alternating job by job on one
 * engine so that all see the same host load. Median of the runs.
 * $TX_BENCH_ATTN_ONLY=TEXT runs only the rows whose name contains TEXT.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <tx/tx_dtype.h>
#include <tx8/tx8_hw.h>

#include "bench.h"
#include "engine/tx8_engine.h"

static double at_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t at_rng = 0x9e3779b97f4a7c15ull;
static float at_rnd(void)
{
    at_rng ^= at_rng << 13;
    at_rng ^= at_rng >> 7;
    at_rng ^= at_rng << 17;
    return (float)((double)(at_rng >> 11) / 9007199254740992.0 - 0.5);
}

struct at_row {
    const char *name;
    int dsa;          /* DSA_INDEX instead of ATTENTION */
    unsigned T, q0;   /* tokens after q0 cached ones */
    unsigned qh, kvh; /* heads */
    unsigned qk, vd;  /* dims */
    unsigned dt;      /* cache type */
    int shared, sel;  /* MLA latent (k == v); the indexer's selection (top 2048) */
};

#define AT_TOPK 2048u

int txb_attn(unsigned threads, unsigned reps)
{
    static const struct at_row rows[] = {
        {"GLM-5.1 MLA tg @ d2048", 0, 1, 2048, 16, 1, 576, 512, TX8_DTYPE_F16, 1, 1},
        {"GLM-5.1 MLA tg @ d2048 bf16", 0, 1, 2048, 16, 1, 576, 512, TX8_DTYPE_BF16, 1, 1},
        {"GLM-5.1 MLA pp256 @ d0", 0, 256, 0, 16, 1, 576, 512, TX8_DTYPE_F16, 1, 0},
        {"GLM-5.1 MLA pp256 @ d2048", 0, 256, 2048, 16, 1, 576, 512, TX8_DTYPE_F16, 1, 1},
        {"GLM-5.1 MLA pp256 @ d2048 bf16", 0, 256, 2048, 16, 1, 576, 512, TX8_DTYPE_BF16, 1, 1},
        {"GLM-5.1 MLA pp512 @ d1536", 0, 512, 1536, 16, 1, 576, 512, TX8_DTYPE_F16, 1, 0},
        {"GLM-5.1 expanded pp256 @ d0 f32", 0, 256, 0, 16, 16, 192, 128, TX8_DTYPE_F32, 0, 0},
        {"GLM-5.1 expanded pp256 @ d0 bf16", 0, 256, 0, 16, 16, 192, 128, TX8_DTYPE_BF16, 0, 0},
        {"GLM-5.1 MLA pp256 @ d0 bf16", 0, 256, 0, 16, 1, 576, 512, TX8_DTYPE_BF16, 1, 0},
        {"GLM-5.1 DSA_INDEX tg @ d2048", 1, 1, 2048, 16, 1, 128, 0, TX8_DTYPE_Q8_0, 0, 0},
        {"GLM-5.1 DSA_INDEX pp256 @ d2048", 1, 256, 2048, 16, 1, 128, 0, TX8_DTYPE_Q8_0, 0, 0},
        {"GLM-5.1 DSA_INDEX tg @ d16384", 1, 1, 16384, 16, 1, 128, 0, TX8_DTYPE_Q8_0, 0, 0},
        {"GLM-5.1 MLA tg @ d16384 bf16 (2048 selected)", 0, 1, 16384, 16, 1, 576, 512,
         TX8_DTYPE_BF16, 1, 1},
        {"GLM-4.5 GQA tg @ d2048 f16", 0, 1, 2048, 16, 4, 128, 128, TX8_DTYPE_F16, 0, 0},
        {"GLM-4.5 GQA pp256 @ d2048 f16", 0, 256, 2048, 16, 4, 128, 128, TX8_DTYPE_F16, 0, 0},
        {"GLM-4.5 GQA tg @ d2048 bf16", 0, 1, 2048, 16, 4, 128, 128, TX8_DTYPE_BF16, 0, 0},
        {"GLM-4.5 GQA pp256 @ d2048 bf16", 0, 256, 2048, 16, 4, 128, 128, TX8_DTYPE_BF16, 0, 0},
        {"GLM-4.5 GQA tg @ d2048 q8_0", 0, 1, 2048, 16, 4, 128, 128, TX8_DTYPE_Q8_0, 0, 0},
        {"GLM-4.5 GQA tg @ d2048 q4_0", 0, 1, 2048, 16, 4, 128, 128, TX8_DTYPE_Q4_0, 0, 0},
        {"GLM-4.5 GQA pp256 @ d2048 q4_0", 0, 256, 2048, 16, 4, 128, 128, TX8_DTYPE_Q4_0, 0, 0},
    };
    const unsigned TMAX = 512, KVMAX = 16384 + 64, QMAX = 16 * 576;
    uint64_t size = TX8_CTRL_SIZE + (384ull << 20);
    uint8_t *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        fprintf(stderr, "tx-bench: --attn: cannot map %llu MiB\n",
                (unsigned long long)(size >> 20));
        return 1;
    }
    uint64_t brk = TX8_CTRL_SIZE;
#define ALLOC(n) (brk = (brk + 4095) & ~4095ull, brk += (n), brk - (n))
    uint64_t cmd = ALLOC(4096);
    uint64_t src = ALLOC((uint64_t)KVMAX * 576 * 4), kc = ALLOC((uint64_t)KVMAX * 576 * 4),
             vc = ALLOC((uint64_t)KVMAX * 576 * 4), q = ALLOC((uint64_t)TMAX * QMAX * 4),
             o = ALLOC((uint64_t)TMAX * 16 * 512 * 4), w = ALLOC((uint64_t)TMAX * 16 * 4),
             sel = ALLOC((uint64_t)TMAX * AT_TOPK * 4);
    float *sp = (float *)(void *)(mem + src);
    for (uint64_t i = 0; i < (uint64_t)KVMAX * 576; i++)
        sp[i] = at_rnd();
    float *qp = (float *)(void *)(mem + q);
    for (uint64_t i = 0; i < (uint64_t)TMAX * QMAX; i++)
        qp[i] = at_rnd();
    float *wp = (float *)(void *)(mem + w);
    for (uint64_t i = 0; i < (uint64_t)TMAX * 16; i++)
        wp[i] = at_rnd();

    struct tx8_engine *eng = NULL;
    struct tx8_engine_config cfg = {threads, -1, 0, TX8_ISA_AUTO, {0, 0, 0}};
    int rc = tx8_engine_create(&eng, mem, size, TX8_CTRL_SIZE, &cfg, NULL);
    if (rc) {
        fprintf(stderr, "tx-bench: --attn: cannot create the engine: %s\n", strerror(-rc));
        munmap(mem, size);
        return 1;
    }
    printf("tx-bench: ATTENTION / DSA_INDEX, engine ISA %s, %u threads, %u alternating runs per "
           "row (per-token path: TX8_ATTN_TILE=0 / TX8_DSA_TILE=0)\n\n",
           tx8_engine_isa_name(tx8_engine_isa(eng)), threads, reps);
    /* the AMX engine's attention is the AVX-512 set's (AMX takes matmuls) */
    int avx512 = tx8_engine_isa(eng) == TX8_ISA_AVX512 || tx8_engine_isa(eng) == TX8_ISA_AMX,
        hw = tx8_engine_features(eng) & TX8_FEAT_AVX512BF16;
    printf("BF16 products (TX8_ATTN_F_BF16): %s\n\n",
           !avx512 ? "the per-token path on rounded operands"
           : tx8_engine_attn_bf16_dot(eng)
               ? "the vdpbf16ps tile (AVX512-BF16; TX8_ATTN_BF16_DOT=f32: the f32 tile)"
           : hw ? "the f32 tile on rounded operands (TX8_ATTN_BF16_DOT=vdpbf16ps: the "
                  "vdpbf16ps tile)"
                : "the f32 tile on rounded operands (no AVX512-BF16 here)");
    printf("DSA_INDEX rows: the last two columns are 8-bit products (TX8_DSA_F_QUERY_Q8: "
           "vpdpbusd over the Q8_0 keys) and their speed-up over the f32 tile\n\n");
    printf(
        "| shape | per-token path ms | tile path ms | speed-up | BF16 products ms | BF16 vs tile "
        "|\n");
    printf("| ----- | ----------------: | -----------: | -------: | ---------------: | "
           "-----------: |\n");
    double *t[3] = {calloc(reps, sizeof(double)), calloc(reps, sizeof(double)),
                    calloc(reps, sizeof(double))};
    struct tx8_job_desc job;
    memset(&job, 0, sizeof(job));
    job.cmd_addr = cmd;
    job.num_ranges = 1;
    job.ranges[0].addr = TX8_CTRL_SIZE;
    job.ranges[0].size = size - TX8_CTRL_SIZE;
    job.ranges[0].access = TX8_ACCESS_READ | TX8_ACCESS_WRITE;
    int fail = 0;
    uint64_t seq = 1;
    for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]) && !fail; ri++) {
        const struct at_row *r = &rows[ri];
        const char *only = getenv("TX_BENCH_ATTN_ONLY"); /* rows whose name has it */
        if (only && *only && !strstr(r->name, only))
            continue;
        unsigned kvlen = r->q0 + r->T, krow = r->kvh * r->qk, vrow = r->kvh * r->vd;
        /* the caches, written by CONVERT from the f32 source */
        struct tx8_cmd_convert cv;
        memset(&cv, 0, sizeof(cv));
        cv.hdr = (struct tx8_cmd_hdr){TX8_OP_CONVERT, 0, sizeof(cv)};
        cv.dst = kc;
        cv.src = src;
        cv.rows = kvlen;
        cv.cols = cv.ld_dst = cv.ld_src = krow;
        cv.dst_dtype = (uint16_t)r->dt;
        cv.src_dtype = TX8_DTYPE_F32;
        memcpy(mem + cmd, &cv, sizeof(cv));
        job.cmd_size = sizeof(cv);
        job.seqno = seq++;
        struct tx8_completion done;
        tx8_engine_run(eng, &job, &done, NULL);
        if (!r->shared && r->vd) {
            cv.dst = vc;
            cv.cols = cv.ld_dst = cv.ld_src = vrow;
            memcpy(mem + cmd, &cv, sizeof(cv));
            job.seqno = seq++;
            tx8_engine_run(eng, &job, &done, NULL);
        }
        /* the indexer's selection: the top 2048 of each token's causal keys
         * by a fixed pseudo-score (the newest ones here), in score order as
         * DSA_INDEX writes it (a scramble of the positions) */
        int32_t *sl = (int32_t *)(void *)(mem + sel);
        for (unsigned tk = 0; tk < r->T && r->sel; tk++) {
            unsigned lim = r->q0 + tk + 1, n = lim < AT_TOPK ? lim : AT_TOPK;
            int32_t *row = sl + (size_t)tk * AT_TOPK;
            for (unsigned j = 0; j < AT_TOPK; j++)
                row[j] = j < n ? (int32_t)(lim - 1 - j) : -1;
            for (unsigned j = n; j > 1; j--) { /* Fisher-Yates */
                unsigned x = (unsigned)((at_rnd() + 0.5f) * (float)j) % j;
                int32_t t = row[j - 1];
                row[j - 1] = row[x];
                row[x] = t;
            }
        }
        if (r->dsa) {
            struct tx8_cmd_dsa_index c;
            memset(&c, 0, sizeof(c));
            c.hdr = (struct tx8_cmd_hdr){TX8_OP_DSA_INDEX, TX8_DSA_F_KEY_Q8_0, sizeof(c)};
            c.sel = sel;
            c.q = q;
            c.k = kc;
            c.w = w;
            c.tokens = r->T;
            c.heads = r->qh;
            c.dim = r->qk;
            c.kv_len = kvlen;
            c.q_pos0 = r->q0;
            c.top_k = AT_TOPK;
            c.ld_q_head = r->qk;
            c.ld_k = r->qk;
            memcpy(mem + cmd, &c, sizeof(c));
            job.cmd_size = sizeof(c);
        } else {
            struct tx8_cmd_attention c;
            memset(&c, 0, sizeof(c));
            c.hdr = (struct tx8_cmd_hdr){TX8_OP_ATTENTION, 0, sizeof(c)};
            c.out = o;
            c.q = q;
            c.k = kc;
            c.v = r->shared ? kc : vc;
            c.sel = r->sel ? sel : 0;
            c.sel_k = r->sel ? AT_TOPK : 0;
            c.tokens = r->T;
            c.q_heads = r->qh;
            c.kv_heads = r->kvh;
            c.qk_dim = r->qk;
            c.v_dim = r->vd;
            c.kv_len = kvlen;
            c.q_pos0 = r->q0;
            c.ld_q_head = r->qk;
            c.ld_k_head = r->qk;
            c.ld_v_head = r->shared ? r->qk : r->vd;
            c.ld_o_head = r->vd;
            c.scale = 1.0f / sqrtf(192.0f);
            c.kv_dtype = (uint16_t)r->dt;
            memcpy(mem + cmd, &c, sizeof(c));
            job.cmd_size = sizeof(c);
        }
        int nv = 3;
        for (unsigned rep = 0; rep <= reps && !fail; rep++)
            for (int u = 0; u < nv; u++) {
                tx8_engine_setting(eng, "TX8_ATTN_TILE", u ? "1" : "0");
                tx8_engine_setting(eng, "TX8_DSA_TILE", u ? "1" : "0");
                struct tx8_cmd_hdr *h = (struct tx8_cmd_hdr *)(void *)(mem + cmd);
                if (!r->dsa)
                    h->flags = u == 2 ? TX8_ATTN_F_BF16 : 0;
                else /* the third column: 8-bit products (interface 1.9) */
                    h->flags = TX8_DSA_F_KEY_Q8_0 | (u == 2 ? TX8_DSA_F_QUERY_Q8 : 0);
                job.seqno = seq++;
                double t0 = at_now();
                tx8_engine_run(eng, &job, &done, NULL);
                double dt = at_now() - t0;
                if (done.status != TX8_STATUS_OK) {
                    fprintf(stderr, "tx-bench: --attn: %s: job failed: %s\n", r->name,
                            tx8_engine_status_name(done.status));
                    fail = 1;
                    break;
                }
                if (rep > 0)
                    t[u][rep - 1] = dt;
            }
        if (fail)
            break;
        for (int u = 0; u < nv; u++)
            qsort(t[u], reps, sizeof(double), cmp_d);
        double a = t[0][reps / 2] * 1e3, b = t[1][reps / 2] * 1e3;
        if (nv == 3) {
            double c = t[2][reps / 2] * 1e3;
            printf("| %s | %.3f | %.3f | %.2fx | %.3f | %.2fx |\n", r->name, a, b, a / b, c, b / c);
        } else {
            printf("| %s | %.3f | %.3f | %.2fx | - | - |\n", r->name, a, b, a / b);
        }
        fflush(stdout);
    }
    free(t[0]);
    free(t[1]);
    free(t[2]);
    tx8_engine_destroy(eng);
    munmap(mem, size);
    return fail;
}
