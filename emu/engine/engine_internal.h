/* SPDX-License-Identifier: MIT */
/*
 * Internal interfaces of the TX8 compute engine (not installed).
 */
#ifndef TX8_ENGINE_INTERNAL_H
#define TX8_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <tx8/tx8_dtype.h>
#include <tx8/tx8_hw.h>

#include "power.h"
#include "settings.h"

#include "tx8_engine.h"

#define ENG_ALIGN 64
#define ENG_SCRATCH_SLOTS 20

/* Job scratch slots (eng_jscratch) */
enum {
    J_IDS = 0,
    J_ACT,
    J_XSCALE,
    J_IDX0,
    J_IDX1,
    J_IDX2,
    J_GATHER,
    J_H1,
    J_H2,
    J_OUT,
    J_WTS,
    J_TABLE,
    J_ORDER,
    J_ROWS,
    J_MISC,
    J_XIL,
    J_MOE, /* MOE_FFN's per-expert descriptors (fused path) */
    J_GXB, /* MOE_FFN: gathered packed BF16 activations */
    J_AMX,  /* activations packed for the AMX tiles (MATMUL, MOE_FFN up) */
    J_AMX2, /* MOE_FFN: the hidden rows packed for the AMX tiles */
};
/* Worker scratch slots (eng_wscratch) */
enum {
    W_C = 0,
    W_TMP,
    W_TMP2,
    W_TMP3,
    W_FP8S, /* matmul.c: an FP8 chunk's block scales, one row per weight row */
};
/* Worker scratch of the AMX blocks (kern_amx.inc): packed A and B tiles */
enum {
    W_AMXA = 16,
    W_AMXB = 17,
};
#define ENG_MAX_ACCESS 24 /* direct operands of one command */

/* ------------------------------------------------------------------------ */
/* SIMD kernels                                                              */
/* ------------------------------------------------------------------------ */

/*
 * A dense matmul tile: out[t * out_stride + r] += sum over k in [k0, k1) of
 * act[t][k] * W[r][k], for r < R (<= 4; with T == 1: <= gemv_rows)
 * weight rows and t < T (<= 4; f32 kernels: <= gemm_tokens) tokens.
 *
 * f32 kernels: act is f32 (x, x_stride elements between rows); W is dtype
 * F32/F16/BF16/I8, and for I8 each element is multiplied by its scale
 * scales[r * scale_stride + k / group] (group > 0 always; per-row scales are
 * passed as group = K, scale_stride = 1).
 *
 * i8 kernels: act is int8 (signed, or q + 128 as unsigned bytes when the
 * kernel set's act_u8 is set), W is I8; the sum is computed per group in
 * int32, and out += scales[r][g] * int_dot_g (without the activation scale,
 * applied by the caller). k0 and k1 are multiples of group (or K).
 *
 * Batch invariance (only for jobs with TX8_JOB_F_BATCH_INVARIANT, t->bi):
 * every tile kernel computes out[t][r] for one (row,
 * token) pair with the same sequence of floating-point operations whatever
 * T, R and the pair's place in the tile (each pair has its own accumulator
 * chain(s), of a fixed layout per ISA and dtype; int8 sums are exact per
 * scale group). Together with matmul.c's fixed K blocks, a row of a MATMUL
 * or MOE_FFN does not depend on the other rows of the pass (batched decode
 * is bit-identical to single-session decode, docs/engine.md). A kernel
 * that specialises on T or R must keep this (tests/unit/test_engine_ops.c,
 * batch_invariance, checks every ISA and dtype).
 */
struct mm_tile {
    const uint8_t *w;
    size_t w_stride; /* bytes between weight rows */
    const float *scales;
    size_t scale_stride; /* floats between rows' scales */
    size_t group;
    unsigned dtype;
    unsigned R, T;
    const void *x;
    size_t x_stride;    /* elements (f32) or bytes (i8) between act rows */
    const uint16_t *xb; /* mm_tile_bf16: the activations as packed BF16 */
    size_t xb_stride;   /* elements between xb rows */
    size_t k0, k1;
    float *out;
    size_t out_stride;
    /* the job's TX8_JOB_F_BATCH_INVARIANT: T == 1 uses the tile's (row,
     * token) chains instead of the faster per-row GEMV kernels */
    int bi;
};

#define ENG_SPARSE_T 8 /* tokens per sparse-row kernel call */

/*
 * One block-sparse weight row against T (<= ENG_SPARSE_T) tokens:
 * out[t * out_stride] += sum over the row's blocks b of
 * act[t][cols[b] * 32 + i] * data[b * 32 + i] (with scales as above;
 * groups are multiples of the block, so a block lies in one group).
 */
struct mm_sparse {
    const uint8_t *w; /* the row's first block */
    const uint16_t *cols;
    unsigned nblk;
    unsigned dtype;
    const float *scales; /* the row's scales */
    size_t group;
    unsigned T;
    const void *x;
    size_t x_stride;
    /* i8, T == 8, kernels with sparse_il: the 8 tokens' activations
     * interleaved per block, [K / 32][8][32] bytes (else NULL) */
    const uint8_t *x_il;
    float *out;
    size_t out_stride;
};

struct mm_amx;
struct eng_worker;

struct eng_kernels {
    unsigned isa;
    int act_u8;         /* i8 activations are stored as q + 128 (VNNI) */
    unsigned gemv_rows; /* weight rows per tile when T == 1 (4 or 8) */
    /* batch-invariant jobs: the same (4), and with int8 activations in the
     * one-token-tile path (1 where the kernel reads one row at a time,
     * AVX-512, so that a row's K blocks stream in order) */
    unsigned gemv_rows_bi, gemv_rows_i8_bi;
    unsigned gemm_tokens; /* tokens per f32 tile (4 or 6) */
    int sparse_il;        /* mm_sparse_i8 uses x_il for 8-token tiles */
    void (*mm_tile_f32)(const struct mm_tile *t);
    void (*mm_tile_i8)(const struct mm_tile *t);
    /* int8 GEMM (T > 32, not batch-invariant) whose [k0, k1) lies in one
     * scale group and spans at most 65536 columns: panel_rows (or fewer,
     * t->R) weight rows against all t->T tokens, bit-identical to
     * mm_tile_i8 on the same range; NULL: mm_tile_i8 tiles */
    void (*mm_panel_i8)(const struct mm_tile *t);
    unsigned panel_rows;
    /* BF16 weights x BF16-exact f32 activations (mm_tile with x_bf16), or
     * NULL: set per engine when the CPU has AVX512-BF16 */
    void (*mm_tile_bf16)(const struct mm_tile *t);
    void (*mm_sparse_f32)(const struct mm_sparse *s);
    void (*mm_sparse_i8)(const struct mm_sparse *s);
    float (*dot_f32)(const float *a, const float *b, size_t n);
    /* y[i] += a * x[i] */
    void (*axpy_f32)(float *y, float a, const float *x, size_t n);
    /* y[i] *= a */
    void (*scale_f32)(float *y, float a, size_t n);
    /* sparse index scan: max of c[0, n) into *max; returns the number of
     * b in [1, n) with c[b] <= c[b - 1] */
    size_t (*cols_scan)(const uint16_t *c, size_t n, unsigned *max);
    /* h[i] = silu(h[i]) * u[i], silu(g) = g / (1 + exp(-g)) (MOE_FFN) */
    void (*silu_mul)(float *h, const float *u, size_t n);
    /* activation quantisation with eng_quant_row's exact results (the same
     * bytes and scale): eng_quant_row itself, or a vectorised copy */
    float (*quant_row)(const float *x, size_t n, int8_t *q, int u8);
    /* batch-invariant jobs: axpy_f32 / silu_mul whose element values do not
     * depend on where the caller's range ends (a scalar tail computed as a
     * vector lane); NULL where axpy_f32 / silu_mul already are */
    void (*axpy_f32_bi)(float *y, float a, const float *x, size_t n);
    void (*silu_mul_bi)(float *h, const float *u, size_t n);
    /* s[i] = exp(s[i] - max), returns the sum (f32, ~1 ulp) */
    float (*exp_sum)(float *s, size_t n, float max);
    /* SAMPLE's passes over a vocabulary row, bit-identical to the scalar
     * code in ops_route.c they replace (NULL: that code runs).
     * argmax_f32: the lowest index among the largest non-NaN x (0 if all
     * are NaN), *max that value (NaN if none), *n_max how many equal it.
     * first_gt_f32: the first i < n with x[i] > thr (ordered: NaN never),
     * or n. sample_z_f32: z[i] = (float)(((double)l[i] - max) * sel), -inf
     * where l[i] is NaN or -inf (max finite). */
    size_t (*argmax_f32)(const float *x, size_t n, float *max, size_t *n_max);
    size_t (*first_gt_f32)(const float *x, size_t n, float thr);
    void (*sample_z_f32)(float *z, const float *l, size_t n, float max, double sel);
    /* o[h][d] += sum_j p[h][j] * v[j][d], h < nh, j < n, d < vd (attention) */
    void (*pv_f32)(float *o, size_t ldo, const float *p, size_t ldp, size_t nh, const float *v,
                   size_t ldv, size_t n, size_t vd);
    /* dtype F32/F16/BF16 <-> f32, bit-exact with tx_dtype.h */
    void (*to_f32)(float *dst, const void *src, unsigned dtype, size_t n);
    void (*from_f32)(void *dst, const float *src, unsigned dtype, size_t n);
    /* KV block rows (Q8_0 / Q4_0, n a multiple of 32) to f32, bit-exact
     * with eng_kv_to_f32's scalar decode, or NULL (the scalar decode) */
    void (*kv_block_to_f32)(float *dst, const void *src, unsigned dtype, size_t n);
    /* TX8_ISA_AMX: T >= 16 int8 / BF16 blocks of a matmul chunk on the
     * tile unit (struct mm_amx below), or NULL */
    int (*mm_amx)(const struct mm_amx *m, struct eng_worker *w);
    /* its activation packer (eng_amx_pack_*), set with mm_amx */
    void (*amx_pack)(uint8_t *dst, const uint8_t *x, size_t x_stride, size_t rows, size_t K,
                     int i8, uint8_t flip);
    /* small batches (matmul.c, T = 2..32, not batch-invariant) with f32
     * activations: a tile kernel (struct mm_tile) taking up to small_tokens
     * tokens and, for a tile of t tokens, up to small_rows[t] weight rows
     * (small_rows[t] does not grow with t), register-blocked so that each
     * weight load feeds every token of the tile; NULL: mm_tile_f32 in tiles
     * of 4 rows x gemm_tokens */
    void (*mm_small_f32)(const struct mm_tile *t);
    unsigned small_max; /* the largest T that uses it (others: mm_tile_f32) */
    unsigned small_tokens;
    unsigned char small_rows[9];
};

/* Whether the AVX-512 float and FP8 GEMV (row_dot1) prefetch their weight
 * stream in software: set at engine creation from the CPU family's entry
 * (engine.c isa_prefs; TX8_GEMV_PREFETCH overrides). It changes no result. */
extern int eng_gemv_prefetch;

extern const struct eng_kernels eng_kernels_portable;
extern const struct eng_kernels eng_kernels_avx2;
extern const struct eng_kernels eng_kernels_avx512;
/* AVX512-BF16 tile (kern_avx512.c); call only where the CPU has it */
void eng_avx512bf16_tile(const struct mm_tile *t);

/*
 * AMX (kern_amx.inc, docs/engine.md "AMX"): rows [0, R) x tokens [0, T) of
 * one matmul chunk, the sum over K in blocks [0, kb), [kb, 2 kb), ... (the
 * K blocks of the AVX-512 path for that T), added to t.out. t is a
 * template tile: w, w_stride, scales, scale_stride, group, dtype, x,
 * x_stride (int8, in the VNNI path's q + 128 storage if k->act_u8), xb,
 * xb_stride (BF16), out, out_stride. i8: int8 x int8 (bit-identical to
 * the AVX-512 tiles), else BF16 weights x packed BF16 activations. Tiles
 * that are not full (16 x 16) run k's AVX-512 tiles. Returns 0, or -1 if
 * nothing was done (the caller then runs its own loop).
 */
struct mm_amx {
    const struct eng_kernels *k;
    struct mm_tile t;
    size_t R, T, K, kb;
    int i8;
    /* the activations of the ceil(T / 16) token tiles (the last one padded
     * with zero tokens) as eng_amx_pack lays them out (tile j at
     * xp + j * xsteps * ENG_AMX_TILE), or NULL: packed by the call */
    const uint8_t *xp;
    size_t xsteps;
};
int eng_amx_mm_hw(const struct mm_amx *m, struct eng_worker *w);  /* the tile unit */
int eng_amx_mm_emu(const struct mm_amx *m, struct eng_worker *w); /* emulated */
/* `rows` <= 16 rows of activations (int8, x_stride bytes apart, xor flip:
 * 0x80 turns the VNNI path's q + 128 back into q; or bf16 with flip 0) x K
 * elements -> ceil(K * size / 64) B tiles of 1 KiB in AMX's VNNI layout
 * (kern_amx.inc), zero past K and for the tokens from `rows` to 16. The
 * _emu one honours eng_amx_break_layout. */
void eng_amx_pack_hw(uint8_t *dst, const uint8_t *x, size_t x_stride, size_t rows, size_t K,
                     int i8, uint8_t flip);
void eng_amx_pack_emu(uint8_t *dst, const uint8_t *x, size_t x_stride, size_t rows, size_t K,
                      int i8, uint8_t flip);
/* The fewest tokens the tile path takes (a token tile of fewer is padded
 * with zero tokens) */
#define ENG_AMX_MIN_T 8
#define ENG_AMX_TILE 1024 /* bytes of one packed tile: 16 rows x 64 */
/* Tests only: engines created while eng_amx_emulate is set take
 * TX8_ISA_AMX on any AVX-512 CPU and run the emulated tile unit;
 * eng_amx_break_layout makes the emulated path pack B without the VNNI
 * interleave (a deliberately wrong layout the tests must catch). */
extern int eng_amx_emulate;
extern int eng_amx_break_layout;
/* dot-product instructions the emulated tile unit executed (tests) */
extern _Atomic uint64_t eng_amx_emu_tdp;

/* ------------------------------------------------------------------------ */
/* Engine, workers, jobs                                                     */
/* ------------------------------------------------------------------------ */

struct tx8_engine;

struct eng_worker {
    struct tx8_engine *e;
    unsigned id;
    int cpu;
    pthread_t th;
    int started;
    uint64_t busy_ns; /* not yet flushed to the counters */
    void *scr[ENG_SCRATCH_SLOTS];
    size_t scr_size[ENG_SCRATCH_SLOTS];
} __attribute__((aligned(64)));

typedef void (*eng_par_fn)(void *ctx, size_t begin, size_t end, struct eng_worker *w);

/* State of the command being executed (worker 0 only). */
struct eng_cmd {
    struct tx8_engine *e;
    const void *cmd; /* private copy */
    unsigned index;
    /* direct operands, from the check pass */
    struct {
        uint64_t addr, size;
        unsigned access;
    } acc[ENG_MAX_ACCESS];
    unsigned nacc;
    uint64_t fault_addr;
    uint64_t macs;
    unsigned mac_dtype;
    uint64_t macs_skipped;
    /* bytes read/written: the direct operands' sizes plus these, or only
     * these if bytes_exact */
    uint64_t bytes_read, bytes_written;
    int bytes_exact;
};

struct tx8_engine {
    uint8_t *mem;
    uint64_t clock_base; /* CLOCK_MONOTONIC ns of device time 0 (profiling) */
    uint64_t mem_size, heap_offset;
    unsigned cores;
    unsigned isa;
    int numa_node;
    int use_numa;
    const struct eng_kernels *k; /* &kern */
    struct eng_kernels kern;     /* the ISA's table plus the families present */
    unsigned features;           /* enum tx8_engine_feature in use */
    int moe_unfused;             /* TX8_ENGINE_MOE_UNFUSED=1: MOE_FFN per expert */
    struct eng_settings set;     /* the environment's, read at creation (settings.h) */
    /* ATTENTION with TX8_ATTN_F_BF16 on the AVX-512 tile: 1 = vdpbf16ps
     * (the BF16 tile; set only with TX8_FEAT_AVX512BF16), 0 = the f32 tile
     * on BF16-rounded operands (the faster of the two differs by CPU:
     * TX8_ATTN_BF16_DOT, engine.c) */
    int attn_bf16_dp;
    /* the int8 GEMM panel's blocking (matmul.c, eng_panel_blocking): K
     * block panel_k (the panel's weight rows stay in L1d) and token block
     * panel_tokens (their activations stay in L2), from the CPU's cache
     * sizes at engine creation */
    size_t panel_k, panel_tokens;
    struct tx8_counters *ctr;
    struct tx8_counters own_ctr;
    /* the power model (power.h); cap_mw may change between commands */
    struct tx8_power_model power;
    uint64_t power_cap_mw;     /* atomic: tx8_engine_set_power_cap */
    uint64_t energy_active_pj; /* atomic: sum of the commands' energies */
    uint64_t energy_dynamic_pj; /* atomic: their dynamic parts */
    double job_model_ns;       /* modelled time of the last job */

    /* workers; worker 0 is the thread in tx8_engine_run (it runs the job),
     * the others are threads that help in parallel regions */
    struct eng_worker *w;

    /* run_mu serialises callers; the caller is worker 0 */
    pthread_mutex_t run_mu;
    int stop;
    const struct tx8_job_desc *job;
    struct tx8_completion *done;
    const volatile int *abort_flag;
    atomic_int aborted;
    atomic_int failed; /* a worker hit an error (e.g. out of memory) */

    /* parallel region */
    /* region state: generation << 32 | closed << 31 | helpers inside */
    _Atomic uint64_t rstate;
    _Atomic uint32_t gen; /* futex word: the generation, for idle helpers */
    _Atomic uint32_t sleepers;
    uint32_t cur_gen;
    _Atomic size_t next;
    size_t par_n, par_chunk;
    eng_par_fn par_fn;
    void *par_ctx;
    uint64_t join_wait_ns;

    /* private copy of the command buffer */
    uint8_t *cmdbuf;
    uint32_t *cmd_off;
    size_t cmd_cap;

    /* the running job's TX8_JOB_F_BATCH_INVARIANT (docs/engine.md) */
    int batch_inv;

    /* job-level scratch, allocated by worker 0 */
    void *jscr[ENG_SCRATCH_SLOTS];
    size_t jscr_size[ENG_SCRATCH_SLOTS];
};

/* Time */
uint64_t eng_now_ns(void);

/* Whether the job is being aborted (polls the abort flag). */
static inline int eng_aborted(struct tx8_engine *e)
{
    if (atomic_load_explicit(&e->aborted, memory_order_relaxed))
        return 1;
    if (e->abort_flag && *e->abort_flag) {
        atomic_store(&e->aborted, 1);
        return 1;
    }
    return 0;
}

/* silu_mul / axpy_f32 of the job: the batch-invariant forms in jobs with
 * TX8_JOB_F_BATCH_INVARIANT (where the ISA has them) */
static inline void eng_silu_mul(const struct tx8_engine *e, float *h, const float *u, size_t n)
{
    if (e->batch_inv && e->k->silu_mul_bi)
        e->k->silu_mul_bi(h, u, n);
    else
        e->k->silu_mul(h, u, n);
}

static inline void eng_axpy_f32(const struct tx8_engine *e, float *y, float a, const float *x,
                                size_t n)
{
    if (e->batch_inv && e->k->axpy_f32_bi)
        e->k->axpy_f32_bi(y, a, x, n);
    else
        e->k->axpy_f32(y, a, x, n);
}

/* Run fn over [0, n) in chunks of `chunk` on all workers (worker 0 only). */
void eng_parallel(struct tx8_engine *e, size_t n, size_t chunk, eng_par_fn fn, void *ctx);

/* Scratch memory (64-byte aligned, contents undefined). NULL on failure. */
void *eng_wscratch(struct eng_worker *w, unsigned slot, size_t bytes);
void *eng_jscratch(struct tx8_engine *e, unsigned slot, size_t bytes);
void *eng_alloc(struct tx8_engine *e, size_t bytes);
void eng_free(struct tx8_engine *e, void *p, size_t bytes);

/* Address check of one operand against the job's ranges: 0 or ADDR_FAULT. */
int eng_check_range(const struct tx8_job_desc *job, uint64_t addr, uint64_t size, unsigned access,
                    uint64_t *bad);

/* Device memory pointer of a checked address. Operands that are not
 * accessed (empty, or unused by the flags) may hold any value: they map to
 * the base so that no out-of-object pointer is ever formed. */
static inline void *eng_ptr(struct tx8_engine *e, uint64_t addr)
{
    return e->mem + (addr <= e->mem_size ? addr : 0);
}

/* Operand size helpers: 0 on success, -1 on overflow or bad stride. */
int eng_mat_bytes(uint64_t rows, uint64_t cols, uint64_t ld, uint64_t esize, uint64_t *out);
int eng_mul3(uint64_t a, uint64_t b, uint64_t c, uint64_t *out);

/* Add a direct operand to a command's list: 0, or a TX8_STATUS_* on a
 * misaligned or overflowing operand. bytes == 0 adds nothing. */
int eng_acc_add(struct eng_cmd *c, uint64_t addr, uint64_t bytes, unsigned access, unsigned align);
/* Check an indirect operand now: 0 or TX8_STATUS_ADDR_FAULT (c->fault_addr). */
int eng_acc_check(struct eng_cmd *c, uint64_t addr, uint64_t bytes, unsigned access,
                  unsigned align);

/* Opcode table */
struct eng_op {
    uint32_t size;
    uint32_t size_old; /* an earlier minor's (shorter) form, or 0 */
    int (*check)(struct eng_cmd *c);
    int (*exec)(struct eng_cmd *c);
    uint32_t size_old2; /* a second earlier form (SAMPLE's 1.3), or 0 */
};
extern const struct eng_op eng_ops[TX8_OP_COUNT];

/* Per-op check/exec functions */
#define ENG_DECL_OP(name)                                                                          \
    int eng_check_##name(struct eng_cmd *c);                                                       \
    int eng_exec_##name(struct eng_cmd *c)
ENG_DECL_OP(nop);
ENG_DECL_OP(fill);
ENG_DECL_OP(copy);
ENG_DECL_OP(convert);
ENG_DECL_OP(matmul);
ENG_DECL_OP(rmsnorm);
ENG_DECL_OP(layernorm);
ENG_DECL_OP(rope);
ENG_DECL_OP(attention);
ENG_DECL_OP(swiglu);
ENG_DECL_OP(add);
ENG_DECL_OP(embed);
ENG_DECL_OP(moe_route);
ENG_DECL_OP(moe_ffn);
ENG_DECL_OP(dsa_index);
ENG_DECL_OP(sample);
/* The SAMPLE command of c in its 1.9 form (a 1.2 or 1.3 command zero-extended). */
void eng_sample_cmd(const struct eng_cmd *c, struct tx8_cmd_sample *out);
/* the command as its full struct of size bytes: an earlier minor's shorter
 * form (the job runner accepted its size) has the later fields 0 */
void eng_cmd_read(const struct eng_cmd *c, void *out, size_t size);

/* Scales of an FP8 weight [rows x cols]: ceil(rows / 128) x ceil(cols / 128)
 * (rows and cols are u32: no overflow) */
static inline uint64_t eng_fp8_scale_count(uint64_t rows, uint64_t cols)
{
    return ((rows + TX8_FP8_BLOCK - 1) / TX8_FP8_BLOCK) *
           ((cols + TX8_FP8_BLOCK - 1) / TX8_FP8_BLOCK);
}

/* Weights: static check of a tx8_weight's fields and direct ranges. */
int eng_weight_check(struct eng_cmd *c, const struct tx8_weight *w, int direct);
/* Bytes of a weight's data, scales and index (valid after the check). */
uint64_t eng_weight_bytes(const struct tx8_weight *w);

/* Matrix multiply machinery (matmul.c), shared by MATMUL and MOE_FFN. */
struct mm_w {
    const uint8_t *data;
    unsigned dtype;
    size_t N, K, es;
    /* bytes per element the K blocks are counted in: es, but 4 for FP8
     * (the f32 weights it dequantises to: the same blocks, so the same
     * sums as an F32 weight holding the dequantised values) */
    size_t kes;
    const float *scales; /* I8: per row; FP8: per 128 x 128 block */
    size_t group;        /* I8: elements per scale (K for per-row); FP8 128; else K */
    size_t ngroups;      /* scales per row (FP8: per row of blocks) */
    int sparse;
    const uint32_t *row_ptr; /* sparse: private, validated copy */
    const uint16_t *cols;
    size_t nnz;
};

struct mm_act {
    const void *p; /* f32 rows, or int8 rows (i8) */
    size_t stride; /* elements (f32) or bytes (i8) */
    int i8;
    const float *xscale; /* i8: per token */
    size_t T;
    const uint8_t *x_il; /* see struct mm_sparse, tiles of 8 tokens */
    /* act_dtype BF16 with a mm_tile_bf16 kernel: the rows also as packed
     * BF16 (else NULL) */
    const uint16_t *xb;
    size_t xb_stride;
    /* an AMX engine: the full 16-token groups packed for the tiles
     * (mm_amx_prep; struct mm_amx xp), or NULL */
    const uint8_t *amx;
    size_t amx_steps;
};

struct mm_out {
    float *y;
    size_t ld;
    const float *bias; /* or NULL */
    int accumulate;
};

/* Make a weight runnable; sparse indexes are copied to job scratch slot
 * `slot` and validated (INVALID_CMD if malformed). */
int eng_mm_weight(struct tx8_engine *e, const struct tx8_weight *tw, unsigned slot, struct mm_w *w);
/* Prepare T rows of f32 activations as act_dtype (rounded or quantised
 * into job scratch when needed). Returns 0 or DEVICE_ERROR. */
int eng_mm_act(struct tx8_engine *e, const float *x, size_t ld, size_t T, size_t K,
               unsigned act_dtype, struct mm_act *a);
/* y = act . W^T (+ bias) (+ y), in parallel. */
/* Sets e->panel_k / panel_tokens from the L1d and L2 sizes (sysconf, i.e.
 * CPUID; defaults 32 KiB / 1 MiB where unknown). */
void eng_panel_blocking(struct tx8_engine *e);
void eng_mm_run(struct tx8_engine *e, const struct mm_w *w, const struct mm_act *a,
                const struct mm_out *o);
/* MACs of act . W^T for T tokens; *skipped gets the MACs sparse skipped */
uint64_t eng_mm_macs(const struct mm_w *w, size_t T, uint64_t *skipped);

/* Top-k selection: candidates ranked by higher score, then lower index. */
struct eng_cand {
    float s;
    int32_t i;
};
/* The best min(k, n) of scores[0, n) (NaN ranks as -inf), best first, in
 * heap[] (room for k). Returns how many. kn (or NULL): its first_gt_f32
 * kernel, if any, skips the scores that cannot enter a full heap (the
 * same result). */
size_t eng_topk(const struct eng_kernels *kn, const float *scores, size_t n, size_t k,
                struct eng_cand *heap);

/* Expert cache model */
/* Returns 1 on a hit, 0 on a miss (the range is then inserted). */

/* Quantisation shared by every ISA (so all give identical results). */
float eng_quant_row(const float *x, size_t n, int8_t *q, int u8);
/* n elements of a KV-cache row of dt (F32/F16/BF16 via the kernels, or the
 * 1.6 block types Q8_0 / Q4_0, n a multiple of TX8_KV_BLOCK) to / from f32 */
void eng_kv_to_f32(const struct eng_kernels *k, float *dst, const void *src, unsigned dt, size_t n);
void eng_kv_from_f32(const struct eng_kernels *k, void *dst, const float *src, unsigned dt,
                     size_t n);

/* Counter-based random numbers: uniform in [0, 1). */
double eng_rand_uniform(uint64_t seed, uint64_t counter);

#endif /* TX8_ENGINE_INTERNAL_H */
