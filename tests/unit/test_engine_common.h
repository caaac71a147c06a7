/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the engine's unit tests (test_engine_*.c): an engine
 * over a malloc'd "device memory", a bump allocator in its heap, command
 * buffers and jobs.
 */
#ifndef TEST_ENGINE_COMMON_H
#define TEST_ENGINE_COMMON_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <tx/tx_dtype.h>
#include <tx8/tx8_hw.h>

#include "engine/tx8_engine.h"

#define TE_MEM_SIZE (32ull << 20)

struct te {
    struct tx8_engine *e;
    uint8_t *mem;
    uint64_t mem_size;
    uint64_t brk; /* bump allocator */
    struct tx8_counters ctr;
    struct tx8_job_desc job;
    struct tx8_completion done;
    uint64_t cmd_addr, cmd_cap, cmd_len;
    unsigned ncmd;
};

static const unsigned te_isas[3] = {TX8_ISA_PORTABLE, TX8_ISA_AVX2, TX8_ISA_AVX512};

/* Create a test engine (NULL if the ISA is not supported here). */
static inline struct te *te_new(unsigned isa, unsigned cores, uint64_t mem_size)
{
    if (!tx8_engine_isa_supported(isa))
        return NULL;
    struct te *t = calloc(1, sizeof(*t));
    ck_assert_ptr_nonnull(t);
    t->mem_size = mem_size ? mem_size : TE_MEM_SIZE;
    t->mem = mmap(NULL, t->mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(t->mem, MAP_FAILED);
    struct tx8_engine_config cfg = {cores, -1, 0, isa, {0, 0, 0}};
    int rc = tx8_engine_create(&t->e, t->mem, t->mem_size, TX8_CTRL_SIZE, &cfg, &t->ctr);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(tx8_engine_isa(t->e), isa);
    t->brk = TX8_CTRL_SIZE;
    /* command buffer: 64 KiB at the start of the heap */
    t->cmd_cap = 1u << 16;
    t->cmd_addr = t->brk;
    t->brk += t->cmd_cap;
    return t;
}

static inline void te_free(struct te *t)
{
    if (!t)
        return;
    tx8_engine_destroy(t->e);
    munmap(t->mem, t->mem_size);
    free(t);
}

/* Allocate device memory (64-byte aligned, zeroed). */
static inline uint64_t te_alloc(struct te *t, uint64_t bytes)
{
    uint64_t a = (t->brk + 63) & ~63ull;
    ck_assert_msg(a + bytes <= t->mem_size, "test device memory exhausted");
    t->brk = a + bytes;
    memset(t->mem + a, 0, bytes);
    return a;
}

static inline void *te_ptr(struct te *t, uint64_t addr)
{
    return t->mem + addr;
}

/* Release everything allocated after `mark` (a previous t->brk). */
static inline void te_reset(struct te *t, uint64_t mark)
{
    t->brk = mark;
}

static inline void te_cmd_begin(struct te *t)
{
    t->cmd_len = 0;
    t->ncmd = 0;
}

static inline void te_cmd(struct te *t, const void *cmd)
{
    const struct tx8_cmd_hdr *h = cmd;
    ck_assert(t->cmd_len + h->size <= t->cmd_cap);
    memcpy(t->mem + t->cmd_addr + t->cmd_len, cmd, h->size);
    t->cmd_len += h->size;
    t->ncmd++;
}

/* Job over the whole heap (read/write) */
static inline void te_job_default(struct te *t)
{
    memset(&t->job, 0, sizeof(t->job));
    t->job.seqno = 1;
    t->job.cmd_addr = t->cmd_addr;
    t->job.cmd_size = (uint32_t)t->cmd_len;
    t->job.num_ranges = 1;
    t->job.ranges[0].addr = TX8_CTRL_SIZE;
    t->job.ranges[0].size = t->mem_size - TX8_CTRL_SIZE;
    t->job.ranges[0].access = TX8_ACCESS_READ | TX8_ACCESS_WRITE;
}

static inline unsigned te_run_job(struct te *t, const volatile int *abort_flag)
{
    memset(&t->done, 0xa5, sizeof(t->done));
    ck_assert_int_eq(tx8_engine_run(t->e, &t->job, &t->done, abort_flag), 0);
    return t->done.status;
}

/* Run the commands added since te_cmd_begin with a whole-heap job. */
static inline unsigned te_run(struct te *t)
{
    te_job_default(t);
    return te_run_job(t, NULL);
}

/* Run one command. */
static inline unsigned te_run1(struct te *t, const void *cmd)
{
    te_cmd_begin(t);
    te_cmd(t, cmd);
    return te_run(t);
}

/* Deterministic random numbers for tests */
static inline uint64_t te_rand_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline unsigned te_rand(uint64_t *s, unsigned lo, unsigned hi) /* [lo, hi] */
{
    return lo + (unsigned)(te_rand_u64(s) % (uint64_t)(hi - lo + 1));
}

static inline float te_randf(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(te_rand_u64(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline void te_fill_f32(uint64_t *s, float *p, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        p[i] = te_randf(s) * scale;
}

/* FNV-1a over the whole heap but the command buffer (which tests rewrite
 * between runs) */
static inline uint64_t te_heap_sum(struct te *t)
{
    uint64_t h = 1469598103934665603ull;
    uint64_t start = t->cmd_addr + t->cmd_cap;
    const uint64_t *p = (const uint64_t *)(const void *)(t->mem + start);
    size_t n = (t->mem_size - start) / 8;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Check only on failure: passing ck_asserts write to Check's pipe, which is
 * slow inside element loops. */
#define TE_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_assert_msg(cond, __VA_ARGS__);                                                      \
    } while (0)
#define TE_EQ(a, b)                                                                                \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_)                                                                              \
            ck_assert_msg(0, "%s == %s: %lld vs %lld", #a, #b, a_, b_);                            \
    } while (0)
#define TE_FEQ(a, b)                                                                               \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!(a_ == b_))                                                                           \
            ck_assert_msg(0, "%s == %s: %.9g vs %.9g", #a, #b, a_, b_);                            \
    } while (0)

#define TE_HDR(op, type) ((struct tx8_cmd_hdr){(op), 0, (uint32_t)sizeof(type)})

#endif /* TEST_ENGINE_COMMON_H */
