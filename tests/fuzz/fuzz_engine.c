// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the device's command decoder and checker
 * (emu/engine): one job per input, run on a small engine.
 *
 * Input: byte 0 = number of extra ranges n (byte % 9) and, in byte / 9,
 * job flags (bit 0 TX8_JOB_F_NO_IRQ, bit 1 the 1.6
 * TX8_JOB_F_BATCH_INVARIANT, bit 2 an unknown flag) and bit 3 "blob";
 * then n records of 12 bytes (u32 address, u32 size, u32 access,
 * little-endian; the address and size taken modulo a little more than the
 * device memory, so invalid ranges occur too; an access below 256 is taken
 * as is, so 0 and unknown bits occur, any other becomes a valid one); the
 * rest is the command buffer (cut to a multiple of 8, at most FE_CMD_MAX
 * bytes), placed at the start of the heap, except with "blob" the last
 * FE_BLOB bytes, which are written at FE_DATA (right after the command
 * buffer) as data: expert tables, sparse indexes, key selections, ids.
 * Range 0 of the job is always the command buffer, read-only.
 *
 * Properties (a violation calls abort()):
 *  - tx8_engine_run returns 0 and a status < TX8_STATUS_COUNT;
 *  - no byte outside the job's writable ranges changes (the control block
 *    below the heap included);
 *  - a reported ADDR_FAULT address lies outside every range granting both
 *    read and write;
 *  - the engine's verdict (status, failing command and fault address)
 *    equals the reference's, and a job failing its static checks changes
 *    no byte at all; a job passing them may fail only at a command with
 *    run-time checks (EMBED's ids, ATTENTION's key selection, a sparse
 *    MATMUL's index, MOE_FFN's table), and when that command is the first
 *    MOE_FFN the reference predicts those checks too.
 *
 * The reference is an independent implementation of the static operand
 * rules (docs/hardware.md 4.5, include/tx8/tx8_hw.h) of every opcode: NOP,
 * FILL, COPY, CONVERT (with the 1.6 KV block types Q8_0 / Q4_0), MATMUL
 * (dense and block-sparse weights), RMSNORM, LAYERNORM, ROPE (1.4 flags),
 * ATTENTION (1.6 block KV caches, TX8_ATTN_F_V_DTYPE, selections, 1.7
 * TX8_ATTN_F_BF16, the 1.10 key bitmap and the 1.9 form), SWIGLU,
 * ADD, EMBED, MOE_ROUTE (1.4 flags), MOE_FFN (and the run-time checks of
 * its expert table with the 1.6 expert-cache flags TX8_WEIGHT_F_XCACHE /
 * _XMISS), DSA_INDEX (1.6 TX8_DSA_F_KEY_Q8_0, 1.9 TX8_DSA_F_QUERY_Q8, the 1.10 key
 * bitmap and the 1.9 form) and SAMPLE (1.2 and 1.3
 * forms), plus the job descriptor rules (flags included), using byte
 * bitmaps of the ranges and exact 128-bit extents instead of the engine's
 * interval walk and overflow checks.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_dtype.h>
#include <tx8/tx8_hw.h>

#include "engine/tx8_engine.h"

#define FE_HEAP_OFF (64u << 10)
#define FE_MEM_SIZE (256u << 10)
#define FE_CMD_MAX 4096u
#define FE_MAX_RANGES 8u
#define FE_DATA (FE_HEAP_OFF + FE_CMD_MAX) /* the blob (byte 0 / 9, bit 3) */
#define FE_BLOB 1024u
#define R TX8_ACCESS_READ
#define W TX8_ACCESS_WRITE
#define RW (TX8_ACCESS_READ | TX8_ACCESS_WRITE)

static struct tx8_engine *fe_eng;
static uint8_t *fe_mem, *fe_before, *fe_pattern;
static uint8_t *fe_cov[2]; /* per byte: a range grants read / write */
static struct tx8_counters fe_ctr;
/* outcome of the last input (for the unit test's replay) */
static unsigned fe_last_status;
static int fe_last_ref;

#define FE_FAIL(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "fuzz_engine: " __VA_ARGS__);                                              \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fe_mem = aligned_alloc(4096, FE_MEM_SIZE);
    fe_before = malloc(FE_MEM_SIZE);
    fe_pattern = malloc(FE_MEM_SIZE);
    fe_cov[0] = malloc(FE_MEM_SIZE);
    fe_cov[1] = malloc(FE_MEM_SIZE);
    if (!fe_mem || !fe_before || !fe_pattern || !fe_cov[0] || !fe_cov[1])
        FE_FAIL("out of memory");
    /* small finite floats, some zeros, some int-like words */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < FE_MEM_SIZE / 4; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint32_t w;
        if (i % 7 == 0) {
            w = (uint32_t)(s % 16); /* small integers: ids, indexes */
        } else {
            float f = (float)((int64_t)(s % 2001) - 1000) / 500.0f;
            memcpy(&w, &f, 4);
        }
        memcpy(fe_pattern + 4 * i, &w, 4);
    }
    struct tx8_engine_config cfg = {1, -1, 0, TX8_ISA_AUTO, {0, 0, 0}};
    if (tx8_engine_create(&fe_eng, fe_mem, FE_MEM_SIZE, FE_HEAP_OFF, &cfg, &fe_ctr))
        FE_FAIL("tx8_engine_create failed");
    return 0;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ------------------------------------------------------------------------ */
/* Reference checker */

enum { REF_UNKNOWN = -1 };

struct ref {
    const struct tx8_job_desc *job;
    int status;     /* TX8_STATUS_* of the command being checked */
    uint64_t fault; /* its first uncovered byte */
    int immediate;  /* check each operand's range when it is listed (run-time checks) */
    int indirect;   /* the command has operands checked when it runs */
    unsigned nop;   /* operands listed for the range pass */
    struct {
        uint64_t addr;
        unsigned __int128 end; /* exclusive; may exceed 2^64 */
        unsigned access;
    } op[16];
};

static unsigned esize_of(unsigned dtype)
{
    switch (dtype) {
    case TX8_DTYPE_F32:
        return 4;
    case TX8_DTYPE_F16:
    case TX8_DTYPE_BF16:
        return 2;
    case TX8_DTYPE_I8:
        return 1;
    default:
        return 0;
    }
}

static int is_float(unsigned d)
{
    return d == TX8_DTYPE_F32 || d == TX8_DTYPE_F16 || d == TX8_DTYPE_BF16;
}

static void range_of(struct ref *r, unsigned i);

/* An operand of `bytes` (exact, 128-bit) bytes: empty ones are skipped,
 * misaligned ones are INVALID_CMD; one whose size exceeds 64 bits is
 * listed without an alignment rule (it faults anyway). */
static void operand(struct ref *r, uint64_t addr, unsigned __int128 bytes, unsigned access,
                    unsigned align)
{
    if (r->status)
        return;
    if (bytes == 0)
        return;
    int huge = bytes > (unsigned __int128)UINT64_MAX;
    if (!huge && align > 1 && addr % align) {
        r->status = TX8_STATUS_INVALID_CMD;
        return;
    }
    if (r->nop >= sizeof(r->op) / sizeof(r->op[0]))
        FE_FAIL("reference: too many operands");
    r->op[r->nop].addr = addr;
    r->op[r->nop].end =
        huge ? (unsigned __int128)UINT64_MAX + addr : (unsigned __int128)addr + bytes;
    r->op[r->nop].access = access;
    r->nop++;
    if (r->immediate)
        range_of(r, r->nop - 1);
}

static void matrix(struct ref *r, uint64_t addr, uint64_t rows, uint64_t cols, uint64_t ld,
                   unsigned es, unsigned access)
{
    if (r->status)
        return;
    if (rows == 0 || cols == 0)
        return;
    if (ld < cols) {
        r->status = TX8_STATUS_INVALID_CMD;
        return;
    }
    unsigned __int128 b = ((unsigned __int128)(rows - 1) * ld + cols) * es;
    operand(r, addr, b, access, es);
}

static void vector(struct ref *r, uint64_t addr, uint64_t n, unsigned es, unsigned access)
{
    operand(r, addr, (unsigned __int128)n * es, access, es);
}

static void bad(struct ref *r, int status)
{
    if (!r->status)
        r->status = status;
}

/* first byte of [addr, end) not granted `bit` (end clamped to 2^64 - 1) */
static uint64_t uncovered(uint64_t addr, unsigned __int128 end, unsigned bit)
{
    const uint8_t *cov = fe_cov[bit == W];
    uint64_t lim = end > FE_MEM_SIZE ? FE_MEM_SIZE : (uint64_t)end;
    for (uint64_t a = addr; a < lim; a++)
        if (!cov[a])
            return a;
    if (end <= FE_MEM_SIZE)
        return UINT64_MAX; /* all covered */
    return addr > FE_MEM_SIZE ? addr : FE_MEM_SIZE;
}

/* Range pass of one command: the first listed operand leaving the ranges.
 * An extent reaching 2^64 - 1 always faults (it cannot lie in memory). */
static void range_of(struct ref *r, unsigned i)
{
    if (!r->status) {
        uint64_t first = UINT64_MAX;
        int found = 0;
        for (unsigned bit = R; bit <= W; bit <<= 1) {
            if (!(r->op[i].access & bit))
                continue;
            uint64_t u = uncovered(r->op[i].addr, r->op[i].end, bit);
            if (u != UINT64_MAX && (!found || u < first)) {
                first = u;
                found = 1;
            }
        }
        if (found || r->op[i].end >= UINT64_MAX) {
            r->status = TX8_STATUS_ADDR_FAULT;
            r->fault = found ? first : UINT64_MAX;
        }
    }
}

static void ranges(struct ref *r)
{
    for (unsigned i = 0; i < r->nop && !r->status; i++)
        range_of(r, i);
}

/* 1.10: the key bitmap of ATTENTION / DSA_INDEX, u64 [tokens][ld_mask]
 * covering the keys the queries see; its fields 0 without one */
static void ref_key_mask(struct ref *r, uint64_t mask, uint32_t ld_mask, uint32_t rsvd,
                         uint64_t tokens, uint64_t keys)
{
    if (rsvd || !mask != !ld_mask || (mask && (uint64_t)ld_mask * 64 < keys))
        return bad(r, TX8_STATUS_INVALID_CMD);
    if (mask)
        matrix(r, mask, tokens, ld_mask, ld_mask, 8, R);
}

/* A weight's fields and ranges (dense and block-sparse; the sparse index's
 * contents are checked when the command runs). */
static void ref_weight(struct ref *r, const struct tx8_weight *w)
{
    if (w->rsvd)
        return bad(r, TX8_STATUS_INVALID_CMD);
    /* FP8 (1 byte) is a weight type only */
    unsigned es = w->dtype == TX8_DTYPE_F8_E4M3 ? 1 : esize_of(w->dtype);
    if (!es)
        return bad(r, TX8_STATUS_UNSUPPORTED_DTYPE);
    int sparse = w->format == TX8_WFMT_BLOCK_SPARSE;
    if (w->format != TX8_WFMT_DENSE && !sparse)
        return bad(r, TX8_STATUS_INVALID_CMD);
    int i8 = w->dtype == TX8_DTYPE_I8;
    int fp8 = w->dtype == TX8_DTYPE_F8_E4M3;
    if (fp8) {
        /* dense, f32 scales per 128 x 128 block, group_size 128 */
        if (sparse || !w->scales || w->group_size != TX8_FP8_BLOCK)
            return bad(r, TX8_STATUS_INVALID_CMD);
    } else if (i8) {
        if (!w->scales)
            return bad(r, TX8_STATUS_INVALID_CMD);
        if (w->group_size && w->cols % w->group_size)
            return bad(r, TX8_STATUS_INVALID_CMD);
        if (w->group_size && sparse && w->group_size % TX8_SPARSE_BLOCK)
            return bad(r, TX8_STATUS_INVALID_CMD);
    } else if (w->scales || w->group_size) {
        return bad(r, TX8_STATUS_INVALID_CMD);
    }
    unsigned __int128 data;
    if (sparse) {
        if (w->cols % TX8_SPARSE_BLOCK || !w->index)
            return bad(r, TX8_STATUS_INVALID_CMD);
        if ((unsigned __int128)w->nnz_blocks >
            (unsigned __int128)w->rows * (w->cols / TX8_SPARSE_BLOCK))
            return bad(r, TX8_STATUS_INVALID_CMD);
        data = (unsigned __int128)w->nnz_blocks * TX8_SPARSE_BLOCK * es;
        r->indirect = 1;
    } else {
        if (w->index || w->nnz_blocks)
            return bad(r, TX8_STATUS_INVALID_CMD);
        data = (unsigned __int128)w->rows * w->cols * es;
    }
    operand(r, w->data, data, R, es);
    if (sparse)
        operand(r, w->index,
                ((unsigned __int128)w->rows + 1) * 4 + (unsigned __int128)w->nnz_blocks * 2, R, 4);
    if (fp8 && w->rows && w->cols)
        operand(r, w->scales,
                (unsigned __int128)((w->rows + 127ull) / 128) * ((w->cols + 127ull) / 128) * 4, R,
                4);
    if (i8 && w->rows && w->cols) {
        uint64_t g = w->group_size ? w->cols / w->group_size : 1;
        operand(r, w->scales, (unsigned __int128)w->rows * g * 4, R, 4);
    }
}

/* A KV-cache type: f32 / f16 / bf16, or a 1.6 block type. */
static int is_kv(unsigned d)
{
    return is_float(d) || d == TX8_DTYPE_Q8_0 || d == TX8_DTYPE_Q4_0;
}

/* bytes of n elements (a multiple of the block for a block type) */
static unsigned __int128 kv_bytes(unsigned dt, unsigned __int128 n)
{
    if (dt == TX8_DTYPE_Q8_0)
        return n / TX8_KV_BLOCK * (2 + TX8_KV_BLOCK);
    if (dt == TX8_DTYPE_Q4_0)
        return n / TX8_KV_BLOCK * (2 + TX8_KV_BLOCK / 2);
    return n * esize_of(dt);
}

/* A [rows x cols] matrix with row stride ld (elements) of a KV type; a
 * block type needs cols and ld multiples of the block, even when empty,
 * and is aligned to its f16 scale. */
static void kv_matrix(struct ref *r, uint64_t addr, uint64_t rows, uint64_t cols, uint64_t ld,
                      unsigned dt, unsigned access)
{
    if (r->status)
        return;
    if (dt != TX8_DTYPE_Q8_0 && dt != TX8_DTYPE_Q4_0)
        return matrix(r, addr, rows, cols, ld, esize_of(dt), access);
    if (cols % TX8_KV_BLOCK || ld % TX8_KV_BLOCK)
        return bad(r, TX8_STATUS_INVALID_CMD);
    if (rows == 0 || cols == 0)
        return;
    if (ld < cols)
        return bad(r, TX8_STATUS_INVALID_CMD);
    operand(r, addr, kv_bytes(dt, (unsigned __int128)(rows - 1) * ld + cols), access, 2);
}

/* Elements of a [rows][heads][ld_head] tensor using dims [0, dim) of each. */
static unsigned __int128 heads_elems(uint64_t rows, uint64_t heads, uint64_t ld_head, uint64_t dim)
{
    if (!rows || !heads || !dim)
        return 0;
    return (unsigned __int128)(rows - 1) * heads * ld_head +
           (unsigned __int128)(heads - 1) * ld_head + dim;
}

static void heads(struct ref *r, uint64_t addr, uint64_t rows, uint64_t nh, uint64_t ld_head,
                  uint64_t dim, unsigned dt, unsigned access)
{
    unsigned __int128 n = heads_elems(rows, nh, ld_head, dim);
    if (dt == TX8_DTYPE_Q8_0 || dt == TX8_DTYPE_Q4_0)
        operand(r, addr, kv_bytes(dt, n), access, 2);
    else
        operand(r, addr, n * esize_of(dt), access, esize_of(dt));
}

/* Static verdict of one command (status 0 = passes). Returns REF_UNKNOWN
 * for a command the reference does not cover. */
static int ref_cmd(struct ref *r, const uint8_t *p)
{
    struct tx8_cmd_hdr h;
    memcpy(&h, p, sizeof(h));
    r->status = 0;
    r->nop = 0;
    union {
        struct tx8_cmd_fill fill;
        struct tx8_cmd_copy copy;
        struct tx8_cmd_convert cv;
        struct tx8_cmd_matmul mm;
        struct tx8_cmd_rmsnorm rn;
        struct tx8_cmd_add add;
        struct tx8_cmd_swiglu sw;
        struct tx8_cmd_embed em;
        struct tx8_cmd_rope rp;
        struct tx8_cmd_moe_route rt;
        struct tx8_cmd_layernorm ln;
        struct tx8_cmd_attention at;
        struct tx8_cmd_moe_ffn mf;
        struct tx8_cmd_dsa_index dsa;
        struct tx8_cmd_sample sm;
    } u;
    r->indirect = 0;
    memset(&u, 0, sizeof(u)); /* a shorter earlier form: the later fields are 0 */
    memcpy(&u, p, h.size < sizeof(u) ? h.size : sizeof(u));
    switch (h.opcode) {
    case TX8_OP_NOP:
        if (h.flags)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        break;
    case TX8_OP_FILL: {
        const struct tx8_cmd_fill *f = &u.fill;
        if (h.flags || f->rsvd || f->dst % 4 || f->bytes % 4)
            bad(r, TX8_STATUS_INVALID_CMD);
        operand(r, f->dst, f->bytes, W, 4);
        break;
    }
    case TX8_OP_COPY:
        if (h.flags)
            bad(r, TX8_STATUS_INVALID_CMD);
        operand(r, u.copy.src, u.copy.bytes, R, 1);
        operand(r, u.copy.dst, u.copy.bytes, W, 1);
        break;
    case TX8_OP_CONVERT: {
        const struct tx8_cmd_convert *f = &u.cv;
        if (h.flags || f->rsvd)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        unsigned sd = f->src_dtype, dd = f->dst_dtype;
        int q = sd == TX8_DTYPE_F32 && dd == TX8_DTYPE_I8;
        int dq = sd == TX8_DTYPE_I8 && dd == TX8_DTYPE_F32;
        if (!(is_kv(sd) && is_kv(dd)) && !q && !dq)
            return bad(r, TX8_STATUS_UNSUPPORTED_DTYPE), 0;
        if (!q && !dq && f->scales)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (q || dq) {
            matrix(r, f->src, f->rows, f->cols, f->ld_src, esize_of(sd), R);
            matrix(r, f->dst, f->rows, f->cols, f->ld_dst, esize_of(dd), W);
        } else {
            kv_matrix(r, f->src, f->rows, f->cols, f->ld_src, sd, R);
            kv_matrix(r, f->dst, f->rows, f->cols, f->ld_dst, dd, W);
        }
        if ((q || dq) && f->rows && f->cols)
            vector(r, f->scales, f->rows, 4, q ? W : R);
        break;
    }
    case TX8_OP_MATMUL: {
        const struct tx8_cmd_matmul *m = &u.mm;
        if ((h.flags & ~(TX8_MATMUL_F_ACCUMULATE | TX8_MATMUL_F_BIAS)) || m->rsvd)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (!is_float(m->act_dtype) && m->act_dtype != TX8_DTYPE_I8)
            return bad(r, TX8_STATUS_UNSUPPORTED_DTYPE), 0;
        ref_weight(r, &m->w);
        if (r->status)
            return 0;
        if (m->act_dtype == TX8_DTYPE_I8 && m->w.dtype != TX8_DTYPE_I8)
            return bad(r, TX8_STATUS_UNSUPPORTED_DTYPE), 0;
        uint64_t T = m->tokens, N = m->w.rows, K = m->w.cols;
        matrix(r, m->x, N ? T : 0, K, m->ld_x, 4, R);
        matrix(r, m->y, T, N, m->ld_y, 4, (h.flags & TX8_MATMUL_F_ACCUMULATE) ? RW : W);
        if ((h.flags & TX8_MATMUL_F_BIAS) && T)
            vector(r, m->bias, N, 4, R);
        break;
    }
    case TX8_OP_RMSNORM: {
        const struct tx8_cmd_rmsnorm *m = &u.rn;
        if (h.flags || m->rsvd || isnan(m->eps))
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        matrix(r, m->x, m->rows, m->dim, m->ld_x, 4, R);
        matrix(r, m->y, m->rows, m->dim, m->ld_y, 4, W);
        if (m->rows)
            vector(r, m->gamma, m->dim, 4, R);
        break;
    }
    case TX8_OP_ADD:
        if (h.flags)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        vector(r, u.add.a, u.add.n, 4, R);
        vector(r, u.add.b, u.add.n, 4, R);
        vector(r, u.add.y, u.add.n, 4, W);
        break;
    case TX8_OP_SWIGLU: {
        const struct tx8_cmd_swiglu *m = &u.sw;
        if (h.flags || m->rsvd)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        matrix(r, m->gate, m->rows, m->cols, m->ld_gate, 4, R);
        matrix(r, m->up, m->rows, m->cols, m->ld_up, 4, R);
        matrix(r, m->y, m->rows, m->cols, m->ld_y, 4, W);
        break;
    }
    case TX8_OP_EMBED: {
        const struct tx8_cmd_embed *m = &u.em;
        if (h.flags || m->rsvd0 || m->rsvd1)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (!is_float(m->dtype) && m->dtype != TX8_DTYPE_I8)
            return bad(r, TX8_STATUS_UNSUPPORTED_DTYPE), 0;
        int i8 = m->dtype == TX8_DTYPE_I8;
        if (i8 != (m->scales != 0))
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (!m->tokens)
            break;
        if (!m->vocab)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        vector(r, m->ids, m->tokens, 4, R);
        r->indirect = 1; /* the ids are checked when it runs */
        matrix(r, m->table, m->dim ? m->vocab : 0, m->dim, m->dim, esize_of(m->dtype), R);
        if (i8 && m->dim)
            vector(r, m->scales, m->vocab, 4, R);
        matrix(r, m->out, m->tokens, m->dim, m->ld_out, 4, W);
        break;
    }
    case TX8_OP_ROPE: {
        const struct tx8_cmd_rope *m = &u.rp;
        uint32_t afb;
        memcpy(&afb, &m->attn_factor, 4);
        if ((h.flags & ~TX8_ROPE_F_ATTN_FACTOR) || m->rot_dim % 2 || m->mode > TX8_ROPE_INTERLEAVED)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if ((h.flags & TX8_ROPE_F_ATTN_FACTOR) ? !isfinite(m->attn_factor) : afb != 0)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (!m->tokens || !m->heads || !m->rot_dim)
            break;
        /* elements of the rotated extent, exactly */
        unsigned __int128 last = (unsigned __int128)(m->tokens - 1) * m->ld_token +
                                 (unsigned __int128)(m->heads - 1) * m->ld_head + m->rot_dim;
        unsigned __int128 start = (unsigned __int128)m->x + (unsigned __int128)m->offset * 4;
        /* the engine's order: extent overflow, overlap, start / bytes overflow */
        if (last > UINT64_MAX) {
            operand(r, m->x, (unsigned __int128)UINT64_MAX + 1, RW, 1); /* faults */
            break;
        }
        if ((unsigned __int128)m->tokens * m->heads * m->rot_dim > last)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (start > UINT64_MAX || last * 4 > UINT64_MAX) {
            operand(r, m->x, (unsigned __int128)UINT64_MAX + 1, RW, 1);
            break;
        }
        operand(r, (uint64_t)start, last * 4, RW, 4);
        vector(r, m->pos, m->tokens, 4, R);
        vector(r, m->inv_freq, m->rot_dim / 2, 4, R);
        break;
    }
    case TX8_OP_MOE_ROUTE: {
        const struct tx8_cmd_moe_route *m = &u.rt;
        unsigned known = TX8_ROUTE_F_NORM_TOPK | TX8_ROUTE_F_LOAD_PENALTY | TX8_ROUTE_F_COUNT |
                         TX8_ROUTE_F_SOFTMAX;
        if ((h.flags & ~known) || m->rsvd || isnan(m->scaling) || isnan(m->lambda))
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if ((h.flags & TX8_ROUTE_F_SOFTMAX) && (m->bias || m->n_group > 1))
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (!m->tokens)
            break;
        if (!m->experts || !m->top_k || m->top_k > m->experts || m->top_k > 4096)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (m->n_group > 1 &&
            (m->experts % m->n_group || !m->topk_group || m->topk_group > m->n_group ||
             (uint64_t)m->top_k > (uint64_t)m->topk_group * (m->experts / m->n_group)))
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        unsigned __int128 n = (unsigned __int128)m->tokens * m->top_k;
        matrix(r, m->logits, m->tokens, m->experts, m->experts, 4, R);
        if (m->bias)
            vector(r, m->bias, m->experts, 4, R);
        unsigned acc = ((h.flags & TX8_ROUTE_F_LOAD_PENALTY) ? R : 0) |
                       ((h.flags & TX8_ROUTE_F_COUNT) ? RW : 0);
        if (m->counts && acc)
            vector(r, m->counts, m->experts, 8, acc);
        operand(r, m->out_ids, n * 4, W, 4);
        operand(r, m->out_w, n * 4, W, 4);
        break;
    }
    case TX8_OP_LAYERNORM: {
        const struct tx8_cmd_layernorm *m = &u.ln;
        if (h.flags || m->rsvd || isnan(m->eps))
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        matrix(r, m->x, m->rows, m->dim, m->ld_x, 4, R);
        matrix(r, m->y, m->rows, m->dim, m->ld_y, 4, W);
        if (m->rows) {
            vector(r, m->gamma, m->dim, 4, R);
            if (m->beta)
                vector(r, m->beta, m->dim, 4, R);
        }
        break;
    }
    case TX8_OP_ATTENTION: {
        const struct tx8_cmd_attention *m = &u.at;
        if ((h.flags & ~(TX8_ATTN_F_V_DTYPE | TX8_ATTN_F_BF16)) || isnan(m->scale))
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (!(h.flags & TX8_ATTN_F_V_DTYPE) && m->v_dtype)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        unsigned kdt = m->kv_dtype, vdt = (h.flags & TX8_ATTN_F_V_DTYPE) ? m->v_dtype : kdt;
        if (!is_kv(kdt) || !is_kv(vdt))
            return bad(r, TX8_STATUS_UNSUPPORTED_DTYPE), 0;
        if (!m->tokens || !m->q_heads)
            break;
        if (!m->kv_heads || m->q_heads % m->kv_heads || !m->qk_dim || !m->v_dim ||
            m->qk_dim > m->ld_q_head || m->qk_dim > m->ld_k_head || m->v_dim > m->ld_v_head ||
            m->v_dim > m->ld_o_head || !m->sel != !m->sel_k || m->sel_k > 4096u * 64)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if ((h.flags & TX8_ATTN_F_BF16) &&
            ((m->qk_dim | m->v_dim | m->ld_k_head | m->ld_v_head) & 1))
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        uint64_t keys = (uint64_t)m->q_pos0 + m->tokens;
        if (keys > m->kv_len)
            keys = m->kv_len;
        heads(r, m->q, m->tokens, m->q_heads, m->ld_q_head, m->qk_dim, TX8_DTYPE_F32, R);
        if (tx_dtype_is_block(kdt) && (m->qk_dim % TX8_KV_BLOCK || m->ld_k_head % TX8_KV_BLOCK))
            bad(r, TX8_STATUS_INVALID_CMD);
        heads(r, m->k, keys, m->kv_heads, m->ld_k_head, m->qk_dim, kdt, R);
        if (tx_dtype_is_block(vdt) && (m->v_dim % TX8_KV_BLOCK || m->ld_v_head % TX8_KV_BLOCK))
            bad(r, TX8_STATUS_INVALID_CMD);
        heads(r, m->v, keys, m->kv_heads, m->ld_v_head, m->v_dim, vdt, R);
        heads(r, m->out, m->tokens, m->q_heads, m->ld_o_head, m->v_dim, TX8_DTYPE_F32, W);
        if (m->sel) {
            vector(r, m->sel, (uint64_t)m->tokens * m->sel_k, 4, R);
            r->indirect = 1; /* the selected keys are checked when it runs */
        }
        ref_key_mask(r, m->mask, m->ld_mask, m->rsvd1, m->tokens, keys);
        break;
    }
    case TX8_OP_MOE_FFN: {
        const struct tx8_cmd_moe_ffn *m = &u.mf;
        if ((h.flags & ~TX8_MOE_FFN_F_ACCUMULATE) || m->rsvd0)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (!is_float(m->act_dtype) && m->act_dtype != TX8_DTYPE_I8)
            return bad(r, TX8_STATUS_UNSUPPORTED_DTYPE), 0;
        if (!m->tokens || !m->dim)
            break;
        uint64_t n = (uint64_t)m->tokens * m->top_k;
        if (n && (!m->num_experts || !m->ffn_dim))
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        matrix(r, m->y, m->tokens, m->dim, m->ld_y, 4,
               (h.flags & TX8_MOE_FFN_F_ACCUMULATE) ? RW : W);
        if (!n)
            break;
        matrix(r, m->x, m->tokens, m->dim, m->ld_x, 4, R);
        vector(r, m->ids, n, 4, R);
        vector(r, m->w, n, 4, R);
        operand(r, m->experts, (unsigned __int128)m->num_experts * 3 * sizeof(struct tx8_weight), R,
                8);
        r->indirect = 1; /* ids, the expert table and its weights: when it runs */
        break;
    }
    case TX8_OP_DSA_INDEX: {
        const struct tx8_cmd_dsa_index *m = &u.dsa;
        if (h.flags & ~(TX8_DSA_F_KEY_Q8_0 | TX8_DSA_F_QUERY_Q8))
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if ((h.flags & TX8_DSA_F_QUERY_Q8) && !(h.flags & TX8_DSA_F_KEY_Q8_0))
            return bad(r, TX8_STATUS_INVALID_CMD), 0; /* 1.9: 8-bit products need Q8_0 keys */
        if (!m->tokens)
            break;
        if (!m->top_k || m->top_k > 4096 || !m->heads || !m->dim || m->dim > m->ld_q_head ||
            m->dim > m->ld_k)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        vector(r, m->sel, (uint64_t)m->tokens * m->top_k, 4, W);
        uint64_t keys = (uint64_t)m->q_pos0 + m->tokens;
        if (keys > m->kv_len)
            keys = m->kv_len;
        ref_key_mask(r, m->mask, m->ld_mask, m->rsvd1, m->tokens, keys);
        if (!keys)
            break;
        heads(r, m->q, m->tokens, m->heads, m->ld_q_head, m->dim, TX8_DTYPE_F32, R);
        if (h.flags & TX8_DSA_F_KEY_Q8_0)
            kv_matrix(r, m->k, keys, m->dim, m->ld_k, TX8_DTYPE_Q8_0, R);
        else
            matrix(r, m->k, keys, m->dim, m->ld_k, 4, R);
        vector(r, m->w, (uint64_t)m->tokens * m->heads, 4, R);
        break;
    }
    case TX8_OP_SAMPLE: {
        const struct tx8_cmd_sample *m = &u.sm;
        if ((h.flags & ~TX8_SAMPLE_F_TEMP_LAST) || isnan(m->temperature) || !(m->top_p > 0.0f) ||
            m->rsvd)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (!(m->min_p >= 0.0f && m->min_p <= 1.0f) || !isfinite(m->repeat_penalty) ||
            m->repeat_penalty < 0.0f || !isfinite(m->presence_penalty) ||
            !isfinite(m->frequency_penalty) || m->n_history > TX8_SAMPLE_MAX_HISTORY || m->rsvd2)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        if (m->rows)
            vector(r, m->history, (uint64_t)m->rows * m->n_history, 4, R);
        if (!m->rows)
            break;
        if (!m->vocab || m->top_k > 4096)
            return bad(r, TX8_STATUS_INVALID_CMD), 0;
        matrix(r, m->logits, m->rows, m->vocab, m->ld_logits, 4, R);
        if (m->allow) { /* 1.9: the allowed-token mask */
            uint64_t words = ((uint64_t)m->vocab + 31) / 32;
            if (m->ld_allow < words)
                return bad(r, TX8_STATUS_INVALID_CMD), 0;
            matrix(r, m->allow, m->rows, words, m->ld_allow, 4, R);
        }
        vector(r, m->out, m->rows, 4, W);
        if (m->probs)
            vector(r, m->probs, m->rows, 4, W);
        break;
    }
    default:
        return REF_UNKNOWN; /* every opcode is covered: not reached */
    }
    ranges(r);
    return 0;
}

static const uint32_t cmd_sizes[TX8_OP_COUNT] = {
    [TX8_OP_NOP] = sizeof(struct tx8_cmd_hdr),
    [TX8_OP_FILL] = sizeof(struct tx8_cmd_fill),
    [TX8_OP_COPY] = sizeof(struct tx8_cmd_copy),
    [TX8_OP_CONVERT] = sizeof(struct tx8_cmd_convert),
    [TX8_OP_MATMUL] = sizeof(struct tx8_cmd_matmul),
    [TX8_OP_RMSNORM] = sizeof(struct tx8_cmd_rmsnorm),
    [TX8_OP_LAYERNORM] = sizeof(struct tx8_cmd_layernorm),
    [TX8_OP_ROPE] = sizeof(struct tx8_cmd_rope),
    [TX8_OP_ATTENTION] = sizeof(struct tx8_cmd_attention),
    [TX8_OP_SWIGLU] = sizeof(struct tx8_cmd_swiglu),
    [TX8_OP_ADD] = sizeof(struct tx8_cmd_add),
    [TX8_OP_EMBED] = sizeof(struct tx8_cmd_embed),
    [TX8_OP_MOE_ROUTE] = sizeof(struct tx8_cmd_moe_route),
    [TX8_OP_MOE_FFN] = sizeof(struct tx8_cmd_moe_ffn),
    [TX8_OP_DSA_INDEX] = sizeof(struct tx8_cmd_dsa_index),
    [TX8_OP_SAMPLE] = sizeof(struct tx8_cmd_sample),
};

/* Commands with operands checked when they run (EMBED's ids, the selected
 * keys of ATTENTION, a sparse MATMUL's index, MOE_FFN's table): bit i =
 * command i. */
static uint8_t ref_indirect[FE_CMD_MAX / 8 / 8 + 1];

static int is_indirect(unsigned i)
{
    return i < sizeof(ref_indirect) * 8 && (ref_indirect[i / 8] >> (i % 8) & 1);
}

/*
 * The run-time checks of a MOE_FFN that is the job's first command (so it
 * reads the memory as it was before the job): token ids below num_experts
 * (negative ones skipped), only the 1.6 expert-cache flags in the gate
 * entries' rsvd word (TX8_WEIGHT_F_XCACHE, _XMISS), then every weight of
 * the table (fields and ranges, checked at once in order) with the expert
 * shapes (gate, up [ffn_dim x dim], down [dim x ffn_dim]) and an I8
 * weight for I8 activations. Returns REF_UNKNOWN when an expert in use has
 * a block-sparse weight (its index is validated next), else the status
 * (r->fault for an ADDR_FAULT).
 */
static int ref_moe_ffn_run(struct ref *r, const uint8_t *p)
{
    struct tx8_cmd_moe_ffn m;
    memcpy(&m, p, sizeof(m));
    uint64_t n = (uint64_t)m.tokens * m.top_k, NE = m.num_experts;
    if (!m.tokens || !m.dim || !n)
        return 0;
    const uint8_t *mem = fe_before;
    for (uint64_t i = 0; i < n; i++) {
        int32_t id;
        memcpy(&id, mem + m.ids + 4 * i, 4);
        if (id >= 0 && (uint64_t)id >= NE)
            return TX8_STATUS_INVALID_CMD;
    }
    const uint8_t *tab = mem + m.experts;
    for (uint64_t x = 0; x < NE; x++) {
        struct tx8_weight w;
        memcpy(&w, tab + x * 3 * sizeof(w), sizeof(w));
        if (w.rsvd & ~(uint32_t)(TX8_WEIGHT_F_XCACHE | TX8_WEIGHT_F_XMISS))
            return TX8_STATUS_INVALID_CMD;
    }
    r->status = 0;
    r->nop = 0;
    r->immediate = 1;
    for (uint64_t x = 0; x < NE * 3; x++) {
        struct tx8_weight w;
        memcpy(&w, tab + x * sizeof(w), sizeof(w));
        if (x % 3 == 0)
            w.rsvd = 0; /* the flags, checked above */
        r->nop = 0;
        ref_weight(r, &w);
        if (r->status)
            break;
        uint32_t rows = x % 3 == 2 ? m.dim : m.ffn_dim, cols = x % 3 == 2 ? m.ffn_dim : m.dim;
        if (w.rows != rows || w.cols != cols) {
            r->status = TX8_STATUS_INVALID_CMD;
            break;
        }
        if (m.act_dtype == TX8_DTYPE_I8 && w.dtype != TX8_DTYPE_I8) {
            r->status = TX8_STATUS_UNSUPPORTED_DTYPE;
            break;
        }
    }
    r->immediate = 0;
    if (r->status)
        return r->status;
    for (uint64_t i = 0; i < n; i++) {
        int32_t id;
        memcpy(&id, mem + m.ids + 4 * i, 4);
        if (id < 0)
            continue;
        for (int j = 0; j < 3; j++) {
            struct tx8_weight w;
            memcpy(&w, tab + ((uint64_t)id * 3 + j) * sizeof(w), sizeof(w));
            if (w.format == TX8_WFMT_BLOCK_SPARSE)
                return REF_UNKNOWN;
        }
    }
    return 0;
}

/* Static verdict of the job. Returns REF_UNKNOWN if a command outside the
 * reference's set is reached before a verdict; marks the commands with
 * run-time checks in ref_indirect. *run is the verdict of the first
 * command's run-time checks when the reference knows it (a MOE_FFN), else
 * REF_UNKNOWN. */
static int ref_job(const struct tx8_job_desc *job, const uint8_t *cmd, unsigned *fcmd,
                   uint64_t *faddr, int *run, uint64_t *run_fault)
{
    memset(ref_indirect, 0, sizeof(ref_indirect));
    *run = REF_UNKNOWN;
    if (job->flags & ~(uint32_t)(TX8_JOB_F_NO_IRQ | TX8_JOB_F_PROFILE | TX8_JOB_F_BATCH_INVARIANT))
        return TX8_STATUS_INVALID_JOB;
    for (unsigned i = 0; i < job->num_ranges; i++) {
        const struct tx8_range *g = &job->ranges[i];
        if (!g->size || g->rsvd || !g->access || (g->access & ~(uint32_t)RW) ||
            g->addr < FE_HEAP_OFF || g->addr >= FE_MEM_SIZE || g->size > FE_MEM_SIZE - g->addr)
            return TX8_STATUS_INVALID_JOB;
    }
    memset(fe_cov[0], 0, FE_MEM_SIZE);
    memset(fe_cov[1], 0, FE_MEM_SIZE);
    for (unsigned i = 0; i < job->num_ranges; i++) {
        const struct tx8_range *g = &job->ranges[i];
        if (g->access & R)
            memset(fe_cov[0] + g->addr, 1, g->size);
        if (g->access & W)
            memset(fe_cov[1] + g->addr, 1, g->size);
    }
    struct ref r = {.job = job};
    size_t off = 0;
    unsigned n = 0;
    while (off < job->cmd_size) {
        struct tx8_cmd_hdr h;
        memcpy(&h, cmd + off, sizeof(h));
        *fcmd = n;
        *faddr = 0;
        if (h.opcode >= TX8_OP_COUNT ||
            (h.size != cmd_sizes[h.opcode] &&
             !(h.opcode == TX8_OP_SAMPLE &&
               (h.size == TX8_CMD_SAMPLE_SIZE_1_2 || h.size == TX8_CMD_SAMPLE_SIZE_1_3)) &&
             !(h.opcode == TX8_OP_ATTENTION && h.size == TX8_CMD_ATTENTION_SIZE_1_9) &&
             !(h.opcode == TX8_OP_DSA_INDEX && h.size == TX8_CMD_DSA_INDEX_SIZE_1_9)) ||
            h.size > job->cmd_size - off)
            return TX8_STATUS_INVALID_CMD;
        if (ref_cmd(&r, cmd + off) == REF_UNKNOWN)
            return REF_UNKNOWN;
        if (r.status) {
            *faddr = r.status == TX8_STATUS_ADDR_FAULT ? r.fault : 0;
            return r.status;
        }
        if (r.indirect)
            ref_indirect[n / 8] |= (uint8_t)(1u << (n % 8));
        off += h.size;
        n++;
    }
    if (n && ((const struct tx8_cmd_hdr *)(const void *)cmd)->opcode == TX8_OP_MOE_FFN) {
        *run = ref_moe_ffn_run(&r, cmd);
        *run_fault = *run == TX8_STATUS_ADDR_FAULT ? r.fault : 0;
    }
    return TX8_STATUS_OK;
}

/* ------------------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fe_eng)
        LLVMFuzzerInitialize(NULL, NULL);
    if (size < 1)
        return 0;
    unsigned nr = data[0] % (FE_MAX_RANGES + 1);
    /* byte 0 / 9: job flags (bit 0 NO_IRQ, bit 1 the 1.6 BATCH_INVARIANT,
     * bit 2 an unknown flag) and bit 3 the blob; 0 for bytes below 9 */
    unsigned fl = data[0] / (FE_MAX_RANGES + 1);
    size_t pos = 1;
    if (size < pos + 12 * (size_t)nr)
        return 0;
    static struct tx8_job_desc job;
    memset(&job, 0, sizeof(job));
    job.seqno = 1;
    job.cmd_addr = FE_HEAP_OFF;
    job.num_ranges = 1 + nr;
    job.flags = ((fl & 1) ? TX8_JOB_F_NO_IRQ : 0) | ((fl & 2) ? TX8_JOB_F_BATCH_INVARIANT : 0) |
                ((fl & 4) ? 1u << 5 : 0);
    job.ranges[0].addr = FE_HEAP_OFF;
    job.ranges[0].size = FE_CMD_MAX;
    job.ranges[0].access = R;
    for (unsigned i = 0; i < nr; i++, pos += 12) {
        struct tx8_range *g = &job.ranges[1 + i];
        g->addr = rd32(data + pos) % (FE_MEM_SIZE + 4096);
        g->size = rd32(data + pos + 4) % (FE_MEM_SIZE + 1);
        uint32_t a = rd32(data + pos + 8);
        /* a small value is taken as is (0 and unknown bits are invalid),
         * anything else becomes a valid access */
        g->access = a < 256 ? a : (a & RW) ? (a & RW) : RW;
    }
    /* fl bit 3: the last FE_BLOB bytes of the input are data at FE_DATA
     * (expert tables, sparse indexes, key selections, token ids) */
    size_t blob = 0;
    if ((fl & 8) && size - pos >= FE_BLOB)
        blob = FE_BLOB;
    size_t clen = size - pos - blob;
    if (clen > FE_CMD_MAX)
        clen = FE_CMD_MAX;
    clen &= ~(size_t)7;
    job.cmd_size = (uint32_t)clen;

    memcpy(fe_mem, fe_pattern, FE_MEM_SIZE);
    memset(fe_mem + FE_HEAP_OFF, 0, FE_CMD_MAX);
    memcpy(fe_mem + FE_HEAP_OFF, data + pos, clen);
    if (blob)
        memcpy(fe_mem + FE_DATA, data + size - blob, blob);
    memcpy(fe_before, fe_mem, FE_MEM_SIZE);

    struct tx8_completion done;
    memset(&done, 0xa5, sizeof(done));
    if (tx8_engine_run(fe_eng, &job, &done, NULL) != 0)
        FE_FAIL("tx8_engine_run failed");
    if (done.status >= TX8_STATUS_COUNT)
        FE_FAIL("status %u out of range", done.status);
    fe_last_status = done.status;
    fe_last_ref = -2;
    if (getenv("FUZZ_ENGINE_VERBOSE"))
        fprintf(stderr, "fuzz_engine: %u commands bytes, %u ranges: %s at command %u addr %#llx\n",
                job.cmd_size, job.num_ranges, tx8_engine_status_name(done.status), done.fault_cmd,
                (unsigned long long)done.fault_addr);

    /* writes only inside writable ranges (of a valid job) */
    static uint8_t wmask[FE_MEM_SIZE];
    memset(wmask, 0, sizeof(wmask));
    for (unsigned i = 0; i < job.num_ranges; i++) {
        const struct tx8_range *g = &job.ranges[i];
        if ((g->access & W) && g->addr < FE_MEM_SIZE) {
            uint64_t e = g->size > FE_MEM_SIZE - g->addr ? FE_MEM_SIZE : g->addr + g->size;
            memset(wmask + g->addr, 1, e - g->addr);
        }
    }
    for (size_t a = 0; a < FE_MEM_SIZE; a++)
        if (!wmask[a] && fe_mem[a] != fe_before[a])
            FE_FAIL("byte %#zx outside the writable ranges changed (status %s)", a,
                    tx8_engine_status_name(done.status));

    if (done.status == TX8_STATUS_ADDR_FAULT) {
        for (unsigned i = 0; i < job.num_ranges; i++) {
            const struct tx8_range *g = &job.ranges[i];
            if ((g->access & RW) == RW && done.fault_addr >= g->addr &&
                done.fault_addr - g->addr < g->size)
                FE_FAIL("fault address %#llx lies inside read-write range %u",
                        (unsigned long long)done.fault_addr, i);
        }
    }

    unsigned fcmd = 0;
    uint64_t faddr = 0, run_fault = 0;
    int run = REF_UNKNOWN;
    int want = ref_job(&job, fe_before + FE_HEAP_OFF, &fcmd, &faddr, &run, &run_fault);
    fe_last_ref = want;
    if (want == REF_UNKNOWN)
        return 0;
    if (want == TX8_STATUS_OK && run != REF_UNKNOWN && run != TX8_STATUS_OK) {
        /* the first command (a MOE_FFN) fails its run-time checks */
        fe_last_ref = run;
        if ((int)done.status != run || done.fault_cmd != 0 ||
            (run == TX8_STATUS_ADDR_FAULT && done.fault_addr != run_fault))
            FE_FAIL("reference: MOE_FFN's run-time checks give %s (addr %#llx); engine: %s at "
                    "command %u addr %#llx",
                    tx8_engine_status_name((unsigned)run), (unsigned long long)run_fault,
                    tx8_engine_status_name(done.status), done.fault_cmd,
                    (unsigned long long)done.fault_addr);
        return 0;
    }
    if (want == TX8_STATUS_OK) {
        /* a command with run-time checks may fail them (and the first one
         * does not when the reference knows its checks) */
        int may_fail =
            is_indirect(done.fault_cmd) && !(done.fault_cmd == 0 && run == TX8_STATUS_OK);
        if (done.status != TX8_STATUS_OK &&
            !(may_fail &&
              (done.status == TX8_STATUS_INVALID_CMD || done.status == TX8_STATUS_ADDR_FAULT ||
               done.status == TX8_STATUS_UNSUPPORTED_DTYPE)))
            FE_FAIL("reference: ok; engine: %s at command %u addr %#llx",
                    tx8_engine_status_name(done.status), done.fault_cmd,
                    (unsigned long long)done.fault_addr);
        return 0;
    }
    if ((int)done.status != want)
        FE_FAIL("reference: %s at command %u (addr %#llx); engine: %s at command %u addr %#llx",
                tx8_engine_status_name((unsigned)want), fcmd, (unsigned long long)faddr,
                tx8_engine_status_name(done.status), done.fault_cmd,
                (unsigned long long)done.fault_addr);
    if (want == TX8_STATUS_INVALID_JOB)
        return 0;
    if (done.fault_cmd != fcmd)
        FE_FAIL("reference: %s at command %u; engine: at command %u",
                tx8_engine_status_name((unsigned)want), fcmd, done.fault_cmd);
    if (want == TX8_STATUS_ADDR_FAULT && done.fault_addr != faddr)
        FE_FAIL("reference: fault at %#llx; engine: at %#llx (command %u)",
                (unsigned long long)faddr, (unsigned long long)done.fault_addr, fcmd);
    if (memcmp(fe_mem, fe_before, FE_MEM_SIZE))
        FE_FAIL("a job failing its static checks (%s) changed memory",
                tx8_engine_status_name(done.status));
    return 0;
}
