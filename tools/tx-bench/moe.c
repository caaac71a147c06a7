/* SPDX-License-Identifier: MIT */
/*
 * tx-bench --moe: MOE_FFN jobs (INT8 experts, act_dtype I8, GLM-4.5-like
 * dims: dim 4096, ffn_dim 1536, 32 experts, top-8, about 600 MiB of expert
 * weights, > 4 x a 32 MiB LLC) on two engines over the same device memory,
 * one with the fused path and one with the per-expert path
 * (TX8_ENGINE_MOE_UNFUSED=1), alternating job by job, so that both see the
 * same host load. Decode (1 token) and a 32-token batch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <tx8/tx8_hw.h>

#include "bench.h"
#include "engine/tx8_engine.h"

#define MOE_D 4096u
#define MOE_F 1536u
#define MOE_NE 32u
#define MOE_K 8u
#define MOE_TMAX 32u

static double mo_now(void)
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

static uint64_t mo_rng = 0x2545f4914f6cdd1dull;
static uint64_t mo_rnd(void)
{
    mo_rng ^= mo_rng << 13;
    mo_rng ^= mo_rng >> 7;
    mo_rng ^= mo_rng << 17;
    return mo_rng;
}

int txb_moe(unsigned threads, unsigned reps)
{
    uint64_t wbytes = (uint64_t)MOE_NE * 3 * MOE_D * MOE_F;
    uint64_t size = TX8_CTRL_SIZE + wbytes + (64ull << 20);
    uint8_t *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        fprintf(stderr, "tx-bench: --moe: cannot map %llu MiB\n", (unsigned long long)(size >> 20));
        return 1;
    }
    madvise(mem, size, MADV_HUGEPAGE);
    uint64_t brk = TX8_CTRL_SIZE;
#define ALLOC(n) (brk = (brk + 4095) & ~4095ull, brk += (n), brk - (n))
    uint64_t cmd = ALLOC(4096), tab = ALLOC(MOE_NE * 3 * sizeof(struct tx8_weight));
    uint64_t x = ALLOC((uint64_t)MOE_TMAX * MOE_D * 4), y = ALLOC((uint64_t)MOE_TMAX * MOE_D * 4);
    uint64_t ids = ALLOC(MOE_TMAX * MOE_K * 4), wts = ALLOC(MOE_TMAX * MOE_K * 4);
    struct tx8_weight *tw = (struct tx8_weight *)(void *)(mem + tab);
    for (unsigned e = 0; e < MOE_NE; e++)
        for (unsigned j = 0; j < 3; j++) {
            struct tx8_weight *w = &tw[e * 3 + j];
            memset(w, 0, sizeof(*w));
            w->rows = j == 2 ? MOE_D : MOE_F;
            w->cols = j == 2 ? MOE_F : MOE_D;
            w->dtype = TX8_DTYPE_I8;
            uint64_t n = (uint64_t)w->rows * w->cols;
            w->data = ALLOC(n);
            w->scales = ALLOC((uint64_t)w->rows * 4);
            for (uint64_t i = 0; i < n; i += 8) {
                uint64_t r = mo_rnd();
                memcpy(mem + w->data + i, &r, 8);
            }
            float *s = (float *)(void *)(mem + w->scales);
            for (unsigned r = 0; r < w->rows; r++)
                s[r] = 1.0f / 4096.0f;
        }
    float *xp = (float *)(void *)(mem + x);
    for (unsigned i = 0; i < MOE_TMAX * MOE_D; i++)
        xp[i] = (float)((double)(mo_rnd() >> 11) / 9007199254740992.0 - 0.5);

    struct tx8_engine *eng[2] = {NULL, NULL};
    struct tx8_engine_config cfg = {threads, -1, 0, TX8_ISA_AUTO, {0, 0, 0}};
    for (int u = 0; u < 2; u++) {
        setenv("TX8_ENGINE_MOE_UNFUSED", u ? "1" : "0", 1);
        int rc = tx8_engine_create(&eng[u], mem, size, TX8_CTRL_SIZE, &cfg, NULL);
        if (rc) {
            fprintf(stderr, "tx-bench: --moe: cannot create the engine: %s\n", strerror(-rc));
            if (eng[0])
                tx8_engine_destroy(eng[0]);
            munmap(mem, size);
            return 1;
        }
    }
    unsetenv("TX8_ENGINE_MOE_UNFUSED");

    static const unsigned Ts[2] = {1, MOE_TMAX};
    printf("tx-bench: MOE_FFN int8 (act I8), dim %u, ffn_dim %u, %u experts, top-%u, %.0f MiB "
           "of expert weights, %u threads, %u alternating runs per row\n\n",
           MOE_D, MOE_F, MOE_NE, MOE_K, (double)wbytes / (1 << 20), threads, reps);
    printf("| op      | tokens | per-expert ms | fused ms | speed-up |\n");
    printf("| ------- | -----: | ------------: | -------: | -------: |\n");
    double *t[2] = {calloc(reps, sizeof(double)), calloc(reps, sizeof(double))};
    int fail = 0;
    for (unsigned ti = 0; ti < 2 && !fail; ti++) {
        unsigned T = Ts[ti];
        struct tx8_cmd_moe_ffn c;
        memset(&c, 0, sizeof(c));
        c.hdr = (struct tx8_cmd_hdr){TX8_OP_MOE_FFN, 0, sizeof(c)};
        c.y = y;
        c.x = x;
        c.ids = ids;
        c.w = wts;
        c.experts = tab;
        c.tokens = T;
        c.top_k = MOE_K;
        c.num_experts = MOE_NE;
        c.dim = MOE_D;
        c.ffn_dim = MOE_F;
        c.ld_x = MOE_D;
        c.ld_y = MOE_D;
        c.act_dtype = TX8_DTYPE_I8;
        memcpy(mem + cmd, &c, sizeof(c));
        struct tx8_job_desc job;
        memset(&job, 0, sizeof(job));
        job.cmd_addr = cmd;
        job.cmd_size = sizeof(c);
        job.num_ranges = 1;
        job.ranges[0].addr = TX8_CTRL_SIZE;
        job.ranges[0].size = size - TX8_CTRL_SIZE;
        job.ranges[0].access = TX8_ACCESS_READ | TX8_ACCESS_WRITE;
        for (unsigned r = 0; r <= reps && !fail; r++) {
            /* new routing each run: top-k distinct experts per token */
            int32_t *id = (int32_t *)(void *)(mem + ids);
            float *wt = (float *)(void *)(mem + wts);
            for (unsigned tk = 0; tk < T; tk++) {
                unsigned used = 0;
                for (unsigned k = 0; k < MOE_K;) {
                    unsigned ex = (unsigned)(mo_rnd() % MOE_NE);
                    if (used & (1u << ex))
                        continue;
                    used |= 1u << ex;
                    id[tk * MOE_K + k] = (int32_t)ex;
                    wt[tk * MOE_K + k] = 1.0f / MOE_K;
                    k++;
                }
            }
            for (int u = 0; u < 2; u++) {
                struct tx8_completion done;
                job.seqno = r * 2 + (unsigned)u + 1;
                double t0 = mo_now();
                tx8_engine_run(eng[u], &job, &done, NULL);
                double dt = mo_now() - t0;
                if (done.status != TX8_STATUS_OK) {
                    fprintf(stderr, "tx-bench: --moe: job failed: %s\n",
                            tx8_engine_status_name(done.status));
                    fail = 1;
                    break;
                }
                if (r > 0)
                    t[u][r - 1] = dt;
            }
        }
        if (fail)
            break;
        qsort(t[0], reps, sizeof(double), cmp_d);
        qsort(t[1], reps, sizeof(double), cmp_d);
        double f = t[0][reps / 2] * 1e3, p = t[1][reps / 2] * 1e3;
        printf("| moe_ffn | %6u | %13.3f | %8.3f | %7.2fx |\n", T, p, f, p / f);
    }
    free(t[0]);
    free(t[1]);
    tx8_engine_destroy(eng[0]);
    tx8_engine_destroy(eng[1]);
    munmap(mem, size);
    return fail;
}
