/* SPDX-License-Identifier: MIT */
/*
 * Matrix multiply: MATMUL and the grouped expert FFN (MOE_FFN).
 *
 * Work is split across the cores by output columns (weight rows) in chunks
 * of up to 64 rows. Within a chunk (default):
 *   - T = 1 (decode, GEMV): one pass over the chunk's weight rows (the
 *     kernels read the rows one after the other, a single sequential
 *     stream); the weights stream from memory once.
 *   - T = 2..32 (batched decode, small prefill chunks), with f32
 *     activations and a kernel set with mm_small_f32 (T <= its
 *     small_max: AVX-512 8, AVX2 32): see mm_small below.
 *     Otherwise: for each tile of 4 weight rows, K in blocks of 4096 bytes
 *     of a row (the tile's 16 KiB stay in L1; int8 with scale groups:
 *     whole groups), and for each K
 *     block every token tile (4 or 6 tokens) runs against it: each weight
 *     byte comes from memory once and feeds all T rows from L1, so a pass
 *     of 8 rows costs little more than one where the kernels are not
 *     compute-bound (docs/engine.md, "Small-batch GEMM").
 *   - T > 32 (prefill, GEMM): tokens in blocks of 256, K in blocks of 1024
 *     elements (2048 for int8); for each K block, every token tile (4 or 6
 *     tokens) runs against every 4-row tile, so a weight tile is reused by
 *     all the tokens of the block from L1/L2 while the token tile stays in
 *     L1.
 * A row's result is then within rounding of the same row computed alone
 * (the reduction order over K depends on T), not bit-identical.
 *
 * Jobs with TX8_JOB_F_BATCH_INVARIANT (e->batch_inv): for each weight row
 * and token, the sum over K runs in blocks of 1024 elements (2048 for int8
 * activations) whatever T: each block's sum comes from one kernel call and
 * is added to the row's partial sum in block order, and every kernel
 * computes one (row, token) dot product the same way whatever the number
 * of tokens and rows of its tile (engine_internal.h, "Batch invariance"),
 * so a row's result depends only on its own activations and weights: not
 * on the other rows of the pass, nor on how the rows are split over the
 * cores.
 *   - one token tile (T <= 4, int8; T <= gemm_tokens, f32): for each tile
 *     of weight rows, its K blocks one after the other (the weight rows
 *     stream from memory once, in order);
 *   - more: as the default's GEMM.
 * The cost is on single-token decode (docs/engine.md, "Batch invariance").
 * Partial sums go to a per-worker f32 tile and are written to y at the end
 * (activation scale, bias, accumulate).
 */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "engine_internal.h"

#define MM_TB 256 /* tokens per block (GEMM) */
/* a GEMV of fewer MACs runs on the calling core alone: a parallel region
 * costs more than it saves, and on a loaded host a helper that joins late
 * holds the command up (decode profiles: absorbed-MLA per-head GEMVs of 64K
 * MACs took 5.4 us median on one core, 39 us when a second core joined).
 * Rows are split in whole tiles either way: results are the same. */
#define MM_GEMV_SERIAL (256u * 1024u)
/* small batches (2..MM_SMALL tokens, not batch-invariant): weight rows
 * outer, K blocks of MM_SMALL_KB bytes of a row, token tiles inner */
#define MM_SMALL 32
#define MM_SMALL_KB 4096
/* the scales of weight row r in mm_chunk / mm_small (sc, sc0 there) */
#define ROW_SCALES(r) (sc ? sc + ((r)-sc0) * w->ngroups : NULL)

uint64_t eng_mm_macs(const struct mm_w *w, size_t T, uint64_t *skipped)
{
    uint64_t dense = (uint64_t)T * w->N * w->K;
    if (!w->sparse) {
        *skipped = 0;
        return dense;
    }
    uint64_t done = (uint64_t)T * w->nnz * TX8_SPARSE_BLOCK;
    *skipped = dense - done;
    return done;
}

int eng_mm_weight(struct tx8_engine *e, const struct tx8_weight *tw, unsigned slot, struct mm_w *w)
{
    memset(w, 0, sizeof(*w));
    w->data = eng_ptr(e, tw->data);
    w->dtype = tw->dtype;
    w->N = tw->rows;
    w->K = tw->cols;
    w->es = tx_dtype_size(tw->dtype);
    w->kes = tw->dtype == TX8_DTYPE_F8_E4M3 ? 4 : w->es;
    w->group = w->K ? w->K : 1;
    w->ngroups = 1;
    if (tw->dtype == TX8_DTYPE_F8_E4M3) {
        w->scales = eng_ptr(e, tw->scales);
        w->group = TX8_FP8_BLOCK;
        w->ngroups = (w->K + TX8_FP8_BLOCK - 1) / TX8_FP8_BLOCK;
    }
    if (tw->dtype == TX8_DTYPE_I8) {
        w->scales = eng_ptr(e, tw->scales);
        if (tw->group_size) {
            w->group = tw->group_size;
            w->ngroups = w->K / tw->group_size;
        }
    }
    if (tw->format != TX8_WFMT_BLOCK_SPARSE)
        return 0;

    /* private copy of the index, then validation */
    size_t N = tw->rows, nnz = tw->nnz_blocks, nbc = tw->cols / TX8_SPARSE_BLOCK;
    size_t bytes = (N + 1) * 4 + nnz * 2;
    uint8_t *idx = eng_jscratch(e, slot, bytes);
    if (!idx)
        return TX8_STATUS_DEVICE_ERROR;
    memcpy(idx, eng_ptr(e, tw->index), bytes);
    const uint32_t *rp = (const uint32_t *)(const void *)idx;
    const uint16_t *cb = (const uint16_t *)(const void *)(idx + (N + 1) * 4);
    /*
     * Branch-free passes (this runs for every sparse MATMUL): row_ptr starts
     * at 0, never decreases and ends at nnz; every col_block is < nbc; and
     * the descents (col_block[b] <= col_block[b - 1]) are exactly at the
     * starts of non-empty rows, so blocks increase strictly within a row.
     */
    if (rp[0] != 0 || rp[N] != nnz)
        return TX8_STATUS_INVALID_CMD;
    uint32_t dec = 0;
    for (size_t r = 0; r < N; r++)
        dec |= (uint32_t)(rp[r + 1] < rp[r]);
    if (dec)
        return TX8_STATUS_INVALID_CMD;
    unsigned cmax;
    size_t descents = e->k->cols_scan(cb, nnz, &cmax), starts = 0;
    if (nnz && cmax >= nbc)
        return TX8_STATUS_INVALID_CMD;
    for (size_t r = 0; r < N; r++) {
        size_t b = rp[r];
        if (b > 0 && b < rp[r + 1])
            starts += cb[b] <= cb[b - 1];
    }
    if (descents != starts)
        return TX8_STATUS_INVALID_CMD;
    w->sparse = 1;
    w->row_ptr = rp;
    w->cols = cb;
    w->nnz = nnz;
    return 0;
}

/* ---- activations -------------------------------------------------------- */

struct act_ctx {
    struct tx8_engine *e;
    const float *x;
    size_t ld, K;
    unsigned dtype;
    void *dst;
    size_t dst_stride;
    float *xscale;
    uint16_t *xb; /* BF16: the rounded rows also packed, or NULL */
};

static void act_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct act_ctx *a = p;
    (void)w;
    for (size_t t = b; t < end; t++) {
        const float *x = a->x + t * a->ld;
        if (a->dtype == TX8_DTYPE_I8) {
            int8_t *q = (int8_t *)a->dst + t * a->dst_stride;
            a->xscale[t] = a->e->k->quant_row(x, a->K, q, a->e->k->act_u8);
        } else {
            /* round to f16/bf16 and back, 256 elements at a time */
            float *d = (float *)a->dst + t * a->dst_stride;
            uint16_t tmp[256];
            for (size_t k = 0; k < a->K; k += 256) {
                size_t n = a->K - k < 256 ? a->K - k : 256;
                uint16_t *h = a->xb ? a->xb + t * a->dst_stride + k : tmp;
                a->e->k->from_f32(h, x + k, a->dtype, n);
                a->e->k->to_f32(d + k, h, a->dtype, n);
            }
        }
    }
}

int eng_mm_act(struct tx8_engine *e, const float *x, size_t ld, size_t T, size_t K,
               unsigned act_dtype, struct mm_act *a)
{
    memset(a, 0, sizeof(*a));
    a->T = T;
    if (act_dtype == TX8_DTYPE_F32 || T == 0 || K == 0) {
        a->p = x;
        a->stride = ld;
        if (act_dtype == TX8_DTYPE_I8) {
            /* K == 0: nothing to multiply; keep the int8 layout anyway */
            float *xs = eng_jscratch(e, J_XSCALE, T * 4 + 4);
            if (!xs)
                return TX8_STATUS_DEVICE_ERROR;
            memset(xs, 0, T * 4);
            a->i8 = 1;
            a->xscale = xs;
        }
        return 0;
    }
    struct act_ctx c = {e, x, ld, K, act_dtype, NULL, 0, NULL, NULL};
    if (act_dtype == TX8_DTYPE_I8) {
        /* rows 64-byte aligned, and not a multiple of 1 KiB apart: the
         * int8 GEMM panel reads 6 rows at the same k next to 4 weight rows,
         * which at K = 4096 all fell in one L1 set (8 ways) */
        c.dst_stride = (K + 63) & ~(size_t)63;
        if (T > 1 && c.dst_stride % 1024 == 0)
            c.dst_stride += 64;
        c.dst = eng_jscratch(e, J_ACT, T * c.dst_stride);
        c.xscale = eng_jscratch(e, J_XSCALE, T * 4);
        a->i8 = 1;
    } else {
        c.dst_stride = (K + 31) & ~(size_t)31;
        int xb = act_dtype == TX8_DTYPE_BF16 && e->k->mm_tile_bf16;
        /* the f32 rows, then (BF16 with a BF16 kernel) the packed rows */
        c.dst = eng_jscratch(e, J_ACT, T * c.dst_stride * (xb ? 6 : 4));
        if (xb && c.dst)
            c.xb = (uint16_t *)((float *)c.dst + T * c.dst_stride);
    }
    if (!c.dst || (act_dtype == TX8_DTYPE_I8 && !c.xscale))
        return TX8_STATUS_DEVICE_ERROR;
    size_t chunk = 65536 / (K ? K : 1);
    eng_parallel(e, T, chunk ? chunk : 1, act_fn, &c);
    a->p = c.dst;
    a->stride = c.dst_stride;
    a->xscale = c.xscale;
    a->xb = c.xb;
    a->xb_stride = c.dst_stride;
    return 0;
}

/* ---- interleaved int8 activations for the sparse GEMM ------------------- */

struct il_ctx {
    const struct mm_act *a;
    size_t nbc;
    uint8_t *dst;
    uint8_t pad;
};

static void il_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct il_ctx *c = p;
    (void)w;
    for (size_t tile = b; tile < end; tile++) {
        uint8_t *d = c->dst + tile * c->nbc * 256;
        for (size_t cb = 0; cb < c->nbc; cb++)
            for (size_t t = 0; t < 8; t++) {
                size_t tok = tile * 8 + t;
                uint8_t *o = d + cb * 256 + t * 32;
                if (tok < c->a->T)
                    memcpy(o, (const uint8_t *)c->a->p + tok * c->a->stride + cb * 32, 32);
                else
                    memset(o, c->pad, 32);
            }
    }
}

/* Activations of 8-token tiles, block by block ([K/32][8][32] bytes per
 * tile), so that one 512-bit load feeds two tokens. NULL if not useful. */
static const uint8_t *interleave(struct tx8_engine *e, const struct mm_act *a, size_t K)
{
    if (!e->k->sparse_il || !a->i8 || a->T < 8 || K % TX8_SPARSE_BLOCK || !K)
        return NULL;
    size_t tiles = (a->T + 7) / 8, nbc = K / TX8_SPARSE_BLOCK;
    uint8_t *dst = eng_jscratch(e, J_XIL, tiles * nbc * 256);
    if (!dst)
        return NULL;
    struct il_ctx c = {a, nbc, dst, (uint8_t)(e->k->act_u8 ? 128 : 0)};
    eng_parallel(e, tiles, 1, il_fn, &c);
    return dst;
}

/* ---- the parallel multiply ---------------------------------------------- */

struct mm_ctx {
    struct tx8_engine *e;
    const struct mm_w *w;
    const struct mm_act *a;
    const struct mm_out *o;
};

/* y = C (x the token's activation scale) (+ bias) (+ y): per element
 * v = c * xs, v += bias, y = y + v or v, in that order, as four loops the
 * compiler vectorises (xs = 1 for float activations: c * 1 is c) */
__attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic"))) static void
finish_row(float *restrict y, const float *restrict c, const float *restrict bias,
                       float xs, size_t nr, int acc)
{
    if (bias && acc)
        for (size_t r = 0; r < nr; r++)
            y[r] = y[r] + (c[r] * xs + bias[r]);
    else if (bias)
        for (size_t r = 0; r < nr; r++)
            y[r] = c[r] * xs + bias[r];
    else if (acc)
        for (size_t r = 0; r < nr; r++)
            y[r] = y[r] + c[r] * xs;
    else
        for (size_t r = 0; r < nr; r++)
            y[r] = c[r] * xs;
}

static void mm_finish(const struct mm_ctx *m, const float *C, size_t nr, size_t n0, size_t t0,
                      size_t nt)
{
    const struct mm_out *o = m->o;
    for (size_t t = 0; t < nt; t++)
        finish_row(o->y + (t0 + t) * o->ld + n0, C + t * nr, o->bias ? o->bias + n0 : NULL,
                   m->a->i8 ? m->a->xscale[t0 + t] : 1.0f, nr, o->accumulate);
}

static inline void mm_tile_call(const struct eng_kernels *k, const struct mm_tile *t, int i8,
                                int bf)
{
    if (i8)
        k->mm_tile_i8(t);
    else if (bf)
        k->mm_tile_bf16(t);
    else
        k->mm_tile_f32(t);
}

/* ---- activations packed for the AMX tiles ------------------------------- */

/* Whether an AMX engine's tiles take products of w with a (mm_amx_block
 * below then decides per chunk: >= ENG_AMX_MIN_T tokens). */
static int mm_amx_takes(const struct tx8_engine *e, const struct mm_w *w, const struct mm_act *a)
{
    if (!e->k->mm_amx || w->sparse || !w->K)
        return 0;
    return (a->i8 && w->dtype == TX8_DTYPE_I8) ||
           (a->xb && w->dtype == TX8_DTYPE_BF16 && !e->batch_inv);
}

struct amx_group {
    const uint8_t *x; /* the group's first row */
    size_t stride;    /* bytes */
    size_t rows;      /* 16, or fewer in the last group (padded with zeros) */
    uint8_t *dst;
};

struct amx_pctx {
    const struct eng_kernels *k;
    const struct amx_group *g;
    size_t K;
    int i8;
    uint8_t flip;
};

static void amx_pack_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    const struct amx_pctx *c = p;
    (void)w;
    for (size_t i = b; i < end; i++)
        c->k->amx_pack(c->g[i].dst, c->g[i].x, c->g[i].stride, c->g[i].rows, c->K, c->i8,
                       c->flip);
}

/*
 * The 16-token groups of n activations (K wide; the i-th at byte
 * offset i * step from a), packed for the AMX tiles into job scratch
 * `slot` in one parallel region, once per command: every chunk of every
 * weight that multiplies them loads them from there (struct mm_amx xp).
 * Without room the activations stay unpacked (the tiles' calls pack their
 * own).
 */
static void mm_amx_prep(struct tx8_engine *e, struct mm_act *a, size_t n, size_t step, size_t K,
                        unsigned slot)
{
    const int i8 = a->i8;
    const size_t es = i8 ? 1 : 2, steps = (K * es + 63) / 64;
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        const struct mm_act *ai = (const void *)((const uint8_t *)a + i * step);
        if ((i8 || ai->xb) && ai->T >= ENG_AMX_MIN_T)
            ng += (ai->T + 15) / 16;
    }
    if (!ng)
        return;
    size_t head = (ng * sizeof(struct amx_group) + 63) & ~(size_t)63;
    uint8_t *buf = eng_jscratch(e, slot, head + ng * steps * ENG_AMX_TILE);
    if (!buf)
        return;
    struct amx_group *g = (struct amx_group *)(void *)buf;
    uint8_t *dst = buf + head;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        struct mm_act *ai = (void *)((uint8_t *)a + i * step);
        if ((!i8 && !ai->xb) || ai->T < ENG_AMX_MIN_T)
            continue;
        const uint8_t *x = i8 ? (const uint8_t *)ai->p : (const uint8_t *)ai->xb;
        size_t stride = i8 ? ai->stride : ai->xb_stride * 2;
        ai->amx = dst + j * steps * ENG_AMX_TILE;
        ai->amx_steps = steps;
        for (size_t t = 0; t < ai->T; t += 16, j++)
            g[j] = (struct amx_group){x + t * stride, stride, ai->T - t < 16 ? ai->T - t : 16,
                                      dst + j * steps * ENG_AMX_TILE};
    }
    struct amx_pctx c = {e->k, g, K, i8, (uint8_t)(i8 && e->k->act_u8 ? 0x80 : 0)};
    size_t chunk = ng / ((size_t)e->cores * 4);
    eng_parallel(e, ng, chunk ? chunk : 1, amx_pack_fn, &c);
}

/* Whether an int8 GEMM chunk of more than MM_SMALL tokens (a command of
 * more than MM_SMALL tokens: not decode) runs on the kernels' int8 panel:
 * per-row scales (one group per row), not batch-invariant. */
static int mm_panel_takes(const struct tx8_engine *e, const struct mm_w *w,
                          const struct mm_act *a)
{
    return a->i8 && !e->batch_inv && e->k->mm_panel_i8 && a->T > MM_SMALL && w->group >= w->K;
}

/* TX8_ISA_AMX (docs/engine.md, "AMX"): the chunk's tokens on the tile
 * unit when there are >= ENG_AMX_MIN_T (int8; BF16 outside batch-invariant
 * jobs), in
 * the K blocks the loops of mm_chunk below use for that many tokens, so
 * that int8 results are bit-identical to theirs. 1 if done. */
static int mm_amx_block(const struct mm_ctx *m, const struct mm_tile *t, size_t n0, size_t nr,
                        size_t t0, size_t nt, size_t kc, int bf, struct eng_worker *wk)
{
    const struct mm_w *w = m->w;
    const struct mm_act *a = m->a;
    const int bi = m->e->batch_inv;
    if (nt < ENG_AMX_MIN_T || !mm_amx_takes(m->e, w, a))
        return 0;
    size_t kb = kc;
    if (!bi && nt <= MM_SMALL) {
        kb = w->K; /* the small-batch loop's K blocks */
        if (w->K * w->kes > MM_SMALL_KB) {
            kb = MM_SMALL_KB / w->kes;
            if (a->i8 && w->group < w->K)
                kb = (kb + w->group - 1) / w->group * w->group;
        }
    } else if (!bi && mm_panel_takes(m->e, w, a))
        kb = m->e->panel_k; /* the int8 GEMM panel's K blocks */
    struct mm_amx x = {m->e->k, *t, nr, nt, w->K, kb, a->i8, NULL, 0};
    if (a->amx) {
        x.xp = a->amx + t0 / 16 * a->amx_steps * ENG_AMX_TILE;
        x.xsteps = a->amx_steps;
    }
    x.t.w = w->data + n0 * t->w_stride;
    x.t.scales = w->scales ? w->scales + n0 * w->ngroups : NULL;
    x.t.x = (const uint8_t *)a->p + t0 * a->stride * (a->i8 ? 1 : 4);
    x.t.xb = bf ? a->xb + t0 * a->xb_stride : NULL;
    x.t.out = t->out;
    return m->e->k->mm_amx(&x, wk) == 0;
}

/*
 * Small batches with f32 activations and a small-batch kernel
 * (mm_small_f32): token tiles of equal size (at most small_tokens), tiles
 * of small_rows[that size] weight rows, each weight vector loaded once per
 * k step for all the tile's tokens. K in blocks of MM_SMALL_KB bytes of a
 * row (f32: 1024 elements, so that 8 tokens' activations of a block stay
 * in L1), outermost; within a block, token tiles, then the chunk's row
 * tiles: each weight byte comes from memory once (for the other token
 * tiles of T > small_tokens, the chunk's block of rows, <= 256 KiB, comes
 * from L2). The kernel prefetches the next row tile into L2.
 */
static void mm_small(const struct eng_kernels *k, struct mm_tile *t, const struct mm_w *w,
                     const struct mm_act *a, float *C, size_t nr, size_t n0, size_t n1, size_t t0,
                     size_t nt, const float *sc, size_t sc0)
{
    size_t ntl = (nt + k->small_tokens - 1) / k->small_tokens;
    size_t tsz = (nt + ntl - 1) / ntl, rs = k->small_rows[tsz];
    size_t ke = w->K * w->kes > MM_SMALL_KB ? MM_SMALL_KB / w->kes : w->K;
    for (size_t k0 = 0; k0 < w->K; k0 += ke) {
        t->k0 = k0;
        t->k1 = w->K - k0 < ke ? w->K : k0 + ke;
        for (size_t tt = 0; tt < nt; tt += tsz) {
            t->T = nt - tt < tsz ? (unsigned)(nt - tt) : (unsigned)tsz;
            t->x = (const float *)a->p + (t0 + tt) * a->stride;
            t->xb = NULL;
            for (size_t r = n0; r < n1; r += rs) {
                t->R = n1 - r < rs ? (unsigned)(n1 - r) : (unsigned)rs;
                t->w = w->data + r * t->w_stride;
                t->scales = ROW_SCALES(r);
                t->out = C + tt * nr + (r - n0);
                k->mm_small_f32(t);
            }
        }
    }
}

/*
 * An FP8 chunk's scales as the kernels take I8 ones: one row of ngroups
 * per weight row r in [n0, n1) (the scales of its row of 128 x 128
 * blocks), in worker scratch. Returns the table (row r at r - n0), or NULL.
 */
static const float *fp8_row_scales(const struct mm_w *w, size_t n0, size_t n1,
                                   struct eng_worker *wk)
{
    float *S = eng_wscratch(wk, W_FP8S, (n1 - n0) * w->ngroups * sizeof(float) + 64);
    if (!S)
        return NULL;
    for (size_t r = n0; r < n1; r++)
        memcpy(S + (r - n0) * w->ngroups, w->scales + (r / TX8_FP8_BLOCK) * w->ngroups,
               w->ngroups * sizeof(float));
    return S;
}

static void mm_chunk(void *p, size_t n0, size_t n1, struct eng_worker *wk)
{
    const struct mm_ctx *m = p;
    const struct mm_w *w = m->w;
    const struct mm_act *a = m->a;
    const struct eng_kernels *k = m->e->k;
    size_t nr = n1 - n0, T = a->T;
    size_t tb = T < MM_TB ? T : MM_TB;
    float *C = eng_wscratch(wk, W_C, tb * nr * sizeof(float) + 64);
    if (!C)
        return;
    /* the scales of weight row r: ROW_SCALES(r) (I8: its own; FP8: its
     * block row's, copied per row) */
    const float *sc = w->scales;
    size_t sc0 = 0;
    if (w->dtype == TX8_DTYPE_F8_E4M3 && w->K) {
        sc = fp8_row_scales(w, n0, n1, wk);
        sc0 = n0;
        if (!sc)
            return; /* eng_wscratch failed the job */
    }
    size_t act_es = a->i8 ? 1 : 4;
    const int bi = m->e->batch_inv;
    /* the K block: fixed whatever T in batch-invariant jobs */
    size_t kc = a->i8 ? 2048 : 1024;
    if (!bi && T <= 4)
        kc = w->K ? w->K : 1; /* GEMV: one pass */
    size_t ts = a->i8 ? 4 : k->gemm_tokens;

    for (size_t t0 = 0; t0 < T; t0 += tb) {
        size_t nt = T - t0 < tb ? T - t0 : tb;
        memset(C, 0, nt * nr * sizeof(float));
        if (eng_aborted(m->e))
            return;
        if (w->sparse) {
            struct mm_sparse s;
            s.dtype = w->dtype;
            s.group = w->group;
            s.out_stride = nr;
            s.x_stride = a->stride;
            for (size_t tt = 0; tt < nt; tt += ENG_SPARSE_T) {
                s.T = nt - tt < ENG_SPARSE_T ? (unsigned)(nt - tt) : ENG_SPARSE_T;
                s.x = (const uint8_t *)a->p + (t0 + tt) * a->stride * act_es;
                s.x_il = a->x_il && s.T == 8
                             ? a->x_il + (t0 + tt) / 8 * (w->K / TX8_SPARSE_BLOCK) * 256
                             : NULL;
                for (size_t r = n0; r < n1; r++) {
                    uint32_t b0 = w->row_ptr[r];
                    s.w = w->data + (size_t)b0 * TX8_SPARSE_BLOCK * w->es;
                    s.cols = w->cols + b0;
                    s.nblk = w->row_ptr[r + 1] - b0;
                    s.scales = ROW_SCALES(r);
                    s.out = C + tt * nr + (r - n0);
                    if (s.nblk) {
                        if (a->i8)
                            k->mm_sparse_i8(&s);
                        else
                            k->mm_sparse_f32(&s);
                    }
                }
            }
        } else if (w->K) {
            struct mm_tile t;
            t.dtype = w->dtype;
            t.w_stride = w->K * w->es;
            t.group = w->group;
            t.scale_stride = w->ngroups;
            t.x_stride = a->stride;
            t.out_stride = nr;
            t.xb_stride = a->xb_stride;
            int bf = a->xb && w->dtype == TX8_DTYPE_BF16;
            t.bi = bi;
            t.out = C;
            if (k->mm_amx && mm_amx_block(m, &t, n0, nr, t0, nt, kc, bf, wk)) {
                /* AMX: done */
            } else if (!bi && nt > 1 && nt <= MM_SMALL) {
                /* small batch: each tile of weight rows streams from memory
                 * once, in K blocks that stay in L1 while every token tile
                 * runs against them */
                size_t kb = w->K;
                if (w->K * w->kes > MM_SMALL_KB) {
                    kb = MM_SMALL_KB / w->kes;
                    if (a->i8 && w->group < w->K)
                        kb = (kb + w->group - 1) / w->group * w->group;
                }
                if (!a->i8 && !bf && k->mm_small_f32 && nt <= k->small_max) {
                    mm_small(k, &t, w, a, C, nr, n0, n1, t0, nt, sc, sc0);
                } else {
                    for (size_t r = n0; r < n1; r += 4) {
                        t.R = n1 - r < 4 ? (unsigned)(n1 - r) : 4;
                        t.w = w->data + r * t.w_stride;
                        t.scales = ROW_SCALES(r);
                        for (size_t k0 = 0; k0 < w->K; k0 += kb) {
                            t.k0 = k0;
                            t.k1 = w->K - k0 < kb ? w->K : k0 + kb;
                            for (size_t tt = 0; tt < nt; tt += ts) {
                                t.T = nt - tt < ts ? (unsigned)(nt - tt) : (unsigned)ts;
                                t.x = (const uint8_t *)a->p + (t0 + tt) * a->stride * act_es;
                                t.xb = bf ? a->xb + (t0 + tt) * a->xb_stride : NULL;
                                t.out = C + tt * nr + (r - n0);
                                mm_tile_call(k, &t, a->i8, bf);
                            }
                        }
                    }
                }
            } else if (bi && nt <= ts) {
                /* one token tile: rows outer, K blocks inner */
                t.T = (unsigned)nt;
                t.x = (const uint8_t *)a->p + t0 * a->stride * act_es;
                t.xb = bf ? a->xb + t0 * a->xb_stride : NULL;
                unsigned rs = t.T > 1 ? 4 : a->i8 ? k->gemv_rows_i8_bi : k->gemv_rows_bi;
                for (size_t r = n0; r < n1; r += rs) {
                    t.R = n1 - r < rs ? (unsigned)(n1 - r) : rs;
                    t.w = w->data + r * t.w_stride;
                    t.scales = ROW_SCALES(r);
                    t.out = C + (r - n0);
                    for (size_t k0 = 0; k0 < w->K; k0 += kc) {
                        t.k0 = k0;
                        t.k1 = w->K - k0 < kc ? w->K : k0 + kc;
                        mm_tile_call(k, &t, a->i8, bf);
                    }
                }
            } else if (mm_panel_takes(m->e, w, a)) {
                /* int8 GEMM: per K block, each panel of weight rows (in L1)
                 * against all the block's tokens (from L2) */
                const size_t pr = k->panel_rows, kp = m->e->panel_k;
                const size_t tp = m->e->panel_tokens;
                t.xb = NULL;
                for (size_t k0 = 0; k0 < w->K; k0 += kp) {
                    t.k0 = k0;
                    t.k1 = w->K - k0 < kp ? w->K : k0 + kp;
                    for (size_t tt = 0; tt < nt; tt += tp) {
                        t.T = nt - tt < tp ? (unsigned)(nt - tt) : (unsigned)tp;
                        t.x = (const uint8_t *)a->p + (t0 + tt) * a->stride;
                        for (size_t r = n0; r < n1; r += pr) {
                            t.R = n1 - r < pr ? (unsigned)(n1 - r) : (unsigned)pr;
                            t.w = w->data + r * t.w_stride;
                            t.scales = w->scales + r * w->ngroups;
                            t.out = C + tt * nr + (r - n0);
                            k->mm_panel_i8(&t);
                        }
                    }
                }
            } else {
                for (size_t k0 = 0; k0 < w->K; k0 += kc) {
                    t.k0 = k0;
                    t.k1 = w->K - k0 < kc ? w->K : k0 + kc;
                    for (size_t tt = 0; tt < nt; tt += ts) {
                        t.T = nt - tt < ts ? (unsigned)(nt - tt) : (unsigned)ts;
                        t.x = (const uint8_t *)a->p + (t0 + tt) * a->stride * act_es;
                        t.xb = bf ? a->xb + (t0 + tt) * a->xb_stride : NULL;
                        unsigned rs = t.T > 1 ? 4 : bi ? k->gemv_rows_bi : k->gemv_rows;
                        for (size_t r = n0; r < n1; r += rs) {
                            t.R = n1 - r < rs ? (unsigned)(n1 - r) : rs;
                            t.w = w->data + r * t.w_stride;
                            t.scales = ROW_SCALES(r);
                            t.out = C + tt * nr + (r - n0);
                            mm_tile_call(k, &t, a->i8, bf);
                        }
                    }
                }
            }
        }
        mm_finish(m, C, nr, n0, t0, nt);
    }
}

/*
 * The int8 GEMM panel's blocking. The panel's weight rows (panel_rows x
 * panel_k bytes) take half the L1d, so the activations streaming past them
 * do not evict them: 4 x 4096 bytes with a 32 KiB L1d. The activations of
 * panel_tokens tokens (panel_tokens x panel_k bytes) take half the L2, so
 * every panel of the chunk finds them there: 128 tokens with 1 MiB. A
 * longer K block means fewer horizontal sums per multiply (each (row,
 * token) pair's sum and its scaling come once per block): at K = 4096 and
 * 2048-byte blocks they cost a quarter of the panel's time (tx-bench -t 1
 * --cpu-time -d int8 -p 512: 297 GOP/s with 2048, 348 with 4096). The sums
 * stay within int32 up to 65536 columns.
 */
void eng_panel_blocking(struct tx8_engine *e)
{
    long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    size_t L1 = l1 >= 16384 ? (size_t)l1 : 32768, L2 = l2 >= 131072 ? (size_t)l2 : 1048576;
    const size_t rows = e->k->panel_rows ? e->k->panel_rows : 4;
    size_t kp = L1 / 2 / rows & ~(size_t)63;
    kp = kp < 1024 ? 1024 : kp > 65536 ? 65536 : kp;
    size_t tp = L2 / 2 / kp / 6 * 6;
    e->panel_k = kp;
    e->panel_tokens = tp < 24 ? 24 : tp;
}

void eng_mm_run(struct tx8_engine *e, const struct mm_w *w, const struct mm_act *a,
                const struct mm_out *o)
{
    struct mm_act al = *a;
    struct mm_ctx m = {e, w, &al, o};
    if (!w->N || !a->T)
        return;
    if (w->sparse && a->T > 4)
        al.x_il = interleave(e, a, w->K);
    if (!al.amx && al.T >= ENG_AMX_MIN_T && mm_amx_takes(e, w, &al))
        mm_amx_prep(e, &al, 1, 0, w->K, J_AMX);
    /* rows per chunk: a multiple of 4, at most 64, several chunks per core */
    size_t per = w->N / ((size_t)e->cores * 4);
    size_t nb = (per + 3) & ~(size_t)3;
    if (nb < 4)
        nb = 4;
    /* GEMV (T = 1): chunks of up to 1 MiB of weights (64..1024 rows), so
     * that each is one long sequential stream (a new stream every 64 rows
     * of 1 KiB left the prefetchers ramping up: tx-bench -p 1 -k 1024
     * -s 2048 --small-pages, int8 0.77 -> 0.98 of the read bandwidth, f16
     * 0.84 -> 0.99; rows of 16 KiB keep 64) */
    size_t cap = 64;
    if (a->T == 1 && !w->sparse && w->K) {
        size_t rows = ((size_t)1 << 20) / (w->K * w->es) & ~(size_t)3;
        cap = rows < 64 ? 64 : rows > 1024 ? 1024 : rows;
    }
    if (nb > cap)
        nb = cap;
    if (al.amx) {
        /* the tile unit: the chunk's rows share each block of activations
         * it loads (L2-resident, from L3 once per chunk): up to 256 rows,
         * still several chunks per core */
        size_t na = (per / 4 + 15) & ~(size_t)15;
        nb = na > 256 ? 256 : na > nb ? na : nb;
    }
    uint64_t work = (uint64_t)w->N * (w->K ? w->K : 1) * a->T;
    if (work < 16384 || (a->T == 1 && work < MM_GEMV_SERIAL))
        nb = w->N; /* too small to split */
    eng_parallel(e, w->N, nb, mm_chunk, &m);
}

/* ---- MATMUL ------------------------------------------------------------- */

int eng_exec_matmul(struct eng_cmd *c)
{
    const struct tx8_cmd_matmul *m = c->cmd;
    struct tx8_engine *e = c->e;
    struct mm_w w;
    struct mm_act a;
    int st = eng_mm_weight(e, &m->w, J_IDX0, &w);
    if (st)
        return st;
    if (!m->tokens || !w.N)
        return 0;
    st = eng_mm_act(e, eng_ptr(e, m->x), m->ld_x, m->tokens, w.K, m->act_dtype, &a);
    if (st)
        return st;
    struct mm_out o = {eng_ptr(e, m->y), m->ld_y,
                       (m->hdr.flags & TX8_MATMUL_F_BIAS) ? eng_ptr(e, m->bias) : NULL,
                       !!(m->hdr.flags & TX8_MATMUL_F_ACCUMULATE)};
    eng_mm_run(e, &w, &a, &o);
    c->macs = eng_mm_macs(&w, m->tokens, &c->macs_skipped);
    c->mac_dtype = w.dtype;
    return 0;
}

/* ---- MOE_FFN ------------------------------------------------------------ */

#define MOE_CHUNK 256 /* token rows per expert pass */

struct gather_ctx {
    const float *x;
    size_t ld_x, D;
    const uint32_t *rows; /* token of each pair */
    float *dst;
};

static void gather_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct gather_ctx *g = p;
    (void)w;
    for (size_t i = b; i < end; i++)
        memcpy(g->dst + i * g->D, g->x + (size_t)g->rows[i] * g->ld_x, g->D * 4);
}

struct silu_ctx {
    const struct tx8_engine *e;
    float *h1;
    const float *h2;
};

static void silu_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct silu_ctx *s = p;
    (void)w;
    eng_silu_mul(s->e, s->h1 + b, s->h2 + b, end - b);
}

struct scatter_ctx {
    const struct tx8_engine *e;
    float *y;
    size_t ld_y;
    const float *out; /* [n][D] */
    size_t D, n;
    const uint32_t *rows;
    const float *wt;
};

/* y[rows[i]][cols] += wt[i] * out[i][cols], columns split across workers */
static void scatter_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct scatter_ctx *s = p;
    (void)w;
    for (size_t i = 0; i < s->n; i++)
        eng_axpy_f32(s->e, s->y + (size_t)s->rows[i] * s->ld_y + b, s->wt[i],
                     s->out + i * s->D + b, end - b);
}

static int moe_weight_ok(const struct tx8_weight *w, size_t rows, size_t cols, unsigned act)
{
    if (w->rows != rows || w->cols != cols)
        return TX8_STATUS_INVALID_CMD;
    if (act == TX8_DTYPE_I8 && w->dtype != TX8_DTYPE_I8)
        return TX8_STATUS_UNSUPPORTED_DTYPE;
    return 0;
}

/*
 * The fused expert FFN: all the experts in use at once, in two parallel
 * regions (one over (expert, rows of ffn_dim) for gate and up with SiLU
 * fused, one over rows of dim for down with the weighted scatter), instead
 * of five regions per expert. Each token's activation is prepared
 * (quantised or rounded) once and copied to the pairs that use it; the
 * hidden rows of all the pairs are prepared once between the regions.
 * Results equal the per-expert path's: the same kernels on the same rows,
 * and the scatter adds the experts' contributions to y in the same order.
 */
struct moe_x {
    struct mm_w w[3];
    struct mm_act a1, a2;
    struct mm_out o1, o2, o3;
    size_t p0, np; /* the expert's pairs [p0, p0 + np) in pair order */
};

struct moe_fctx {
    struct tx8_engine *e;
    struct moe_x *x;
    size_t nx;
    size_t F, D, rbF, ipeF, rbD;
    float *H1, *H2, *OUT;
    float *y;
    size_t ld_y;
    const uint32_t *rows;
    const float *rwt;
};

static void moe_up_fn(void *p, size_t b, size_t end, struct eng_worker *wk)
{
    struct moe_fctx *f = p;
    for (size_t it = b; it < end; it++) {
        struct moe_x *x = &f->x[it / f->ipeF];
        size_t n0 = (it % f->ipeF) * f->rbF, n1 = n0 + f->rbF < f->F ? n0 + f->rbF : f->F;
        struct mm_ctx g = {f->e, &x->w[0], &x->a1, &x->o1};
        struct mm_ctx u = {f->e, &x->w[1], &x->a1, &x->o2};
        mm_chunk(&g, n0, n1, wk);
        mm_chunk(&u, n0, n1, wk);
        for (size_t i = 0; i < x->np; i++)
            eng_silu_mul(f->e, f->H1 + (x->p0 + i) * f->F + n0,
                         f->H2 + (x->p0 + i) * f->F + n0, n1 - n0);
    }
}

static void moe_down_fn(void *p, size_t b, size_t end, struct eng_worker *wk)
{
    struct moe_fctx *f = p;
    for (size_t it = b; it < end; it++) {
        size_t n0 = it * f->rbD, n1 = n0 + f->rbD < f->D ? n0 + f->rbD : f->D;
        for (size_t e = 0; e < f->nx; e++) {
            struct moe_x *x = &f->x[e];
            struct mm_ctx d = {f->e, &x->w[2], &x->a2, &x->o3};
            mm_chunk(&d, n0, n1, wk);
            for (size_t i = 0; i < x->np; i++) {
                size_t q = x->p0 + i;
                eng_axpy_f32(f->e, f->y + (size_t)f->rows[q] * f->ld_y + n0, f->rwt[q],
                                  f->OUT + q * f->D + n0, n1 - n0);
            }
        }
    }
}

/* Rows per work item: a multiple of 8, 8..64 (decode, one token: 8..512,
 * longer weight streams as eng_mm_run's GEMV chunks), about 4 items per
 * core. */
static size_t moe_rows(const struct tx8_engine *e, size_t N, size_t groups, int decode)
{
    size_t per = N * groups / ((size_t)e->cores * 4), cap = decode ? 512 : 64;
    per = (per + 7) & ~(size_t)7;
    return per < 8 ? 8 : per > cap ? cap : per;
}

/* Returns 0, a status, or -1 when the fused path does not apply. */
/* Interface 1.6: the host's expert cache marks the gate entry of an expert
 * it serves from a cache slot (TX8_WEIGHT_F_XCACHE), and of one it loaded
 * for this pass (TX8_WEIGHT_F_XMISS too); each expert a MOE_FFN uses counts
 * one hit or one miss. Unmarked experts (resident, 1.5 tables) count
 * nothing. */
static void moe_count(struct tx8_engine *e, uint32_t fl)
{
    if (!(fl & TX8_WEIGHT_F_XCACHE))
        return;
    if (fl & TX8_WEIGHT_F_XMISS)
        __atomic_fetch_add(&e->ctr->expert_cache_misses, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&e->ctr->expert_cache_hits, 1, __ATOMIC_RELAXED);
}

static int moe_fused(struct eng_cmd *c, const struct tx8_weight *tab, const uint32_t *cnt,
                     const uint32_t *order, const float *wts, const uint32_t *xflags)
{
    const struct tx8_cmd_moe_ffn *m = c->cmd;
    struct tx8_engine *e = c->e;
    size_t T = m->tokens, K = m->top_k, D = m->dim, F = m->ffn_dim, NE = m->num_experts;
    size_t np = cnt[NE], nx = 0;
    int st;

    /* bounded scratch (H1, H2, OUT and the gathered rows of every pair);
     * sparse experts (private index copies per weight) and batches past
     * that take the per-expert path */
    if ((uint64_t)np * (2 * F + 2 * D) * 4 > (256u << 20))
        return -1;
    for (size_t x = 0; x < NE; x++) {
        if (cnt[x + 1] == cnt[x])
            continue;
        nx++;
        for (int j = 0; j < 3; j++)
            if (tab[x * 3 + j].format == TX8_WFMT_BLOCK_SPARSE)
                return -1;
    }
    struct moe_x *X = eng_jscratch(e, J_MOE, nx * sizeof(*X));
    uint32_t *rows = eng_jscratch(e, J_ROWS, np * 8 + 8);
    float *H1 = eng_jscratch(e, J_H1, np * F * 4);
    float *H2 = eng_jscratch(e, J_H2, np * F * 4);
    float *OUT = eng_jscratch(e, J_OUT, np * D * 4);
    if (!X || !rows || !H1 || !H2 || !OUT)
        return TX8_STATUS_DEVICE_ERROR;
    float *rwt = (float *)(rows + np);
    for (size_t i = 0; i < np; i++) {
        rows[i] = order[i] / (uint32_t)K;
        rwt[i] = wts[order[i]];
    }

    /* the tokens' activations, prepared once, then one row per pair */
    struct mm_act ax;
    if ((st = eng_mm_act(e, eng_ptr(e, m->x), m->ld_x, T, D, m->act_dtype, &ax)))
        return st;
    size_t es = ax.i8 ? 1 : 4, gs = ax.i8 ? (D + 63) & ~(size_t)63 : (D + 31) & ~(size_t)31;
    uint8_t *G = eng_jscratch(e, J_GATHER, np * gs * es + np * 4);
    uint16_t *GB = ax.xb ? eng_jscratch(e, J_GXB, np * gs * 2) : NULL;
    if (!G || (ax.xb && !GB))
        return TX8_STATUS_DEVICE_ERROR;
    float *GS = (float *)(void *)(G + np * gs * es);
    for (size_t i = 0; i < np; i++) {
        memcpy(G + i * gs * es, (const uint8_t *)ax.p + rows[i] * ax.stride * es, D * es);
        if (ax.i8)
            GS[i] = ax.xscale[rows[i]];
        if (GB)
            memcpy(GB + i * gs, ax.xb + rows[i] * ax.xb_stride, D * 2);
    }

    uint64_t macs = 0, skipped = 0, sk;
    size_t xi = 0;
    for (size_t ex = 0; ex < NE; ex++) {
        size_t b = cnt[ex], end = cnt[ex + 1];
        if (b == end)
            continue;
        struct moe_x *x = &X[xi++];
        for (int j = 0; j < 3; j++) {
            const struct tx8_weight *tw = &tab[ex * 3 + j];
            if ((st = eng_mm_weight(e, tw, J_IDX0, &x->w[j])))
                return st;
            uint64_t wb = eng_weight_bytes(tw);
            c->bytes_read += wb;
            macs += eng_mm_macs(&x->w[j], end - b, &sk);
            skipped += sk;
        }
        moe_count(e, xflags[ex]);
        x->p0 = b;
        x->np = end - b;
        memset(&x->a1, 0, sizeof(x->a1));
        x->a1.p = G + b * gs * es;
        x->a1.stride = gs;
        x->a1.i8 = ax.i8;
        x->a1.xscale = ax.i8 ? GS + b : NULL;
        x->a1.T = end - b;
        x->a1.xb = GB ? GB + b * gs : NULL;
        x->a1.xb_stride = gs;
        x->o1 = (struct mm_out){H1 + b * F, F, NULL, 0};
        x->o2 = (struct mm_out){H2 + b * F, F, NULL, 0};
        x->o3 = (struct mm_out){OUT + b * D, D, NULL, 0};
        c->mac_dtype = x->w[0].dtype;
    }

    struct moe_fctx f = {e,       X,
                         nx,      F,
                         D,       moe_rows(e, F, nx, T == 1),
                         0,       moe_rows(e, D, 1, T == 1),
                         H1,      H2,
                         OUT,     eng_ptr(e, m->y),
                         m->ld_y, rows,
                         rwt};
    f.ipeF = (F + f.rbF - 1) / f.rbF;
    if (nx && mm_amx_takes(e, &X[0].w[0], &X[0].a1))
        mm_amx_prep(e, &X[0].a1, nx, sizeof(*X), D, J_AMX);
    if (!(m->hdr.flags & TX8_MOE_FFN_F_ACCUMULATE))
        for (size_t t = 0; t < T; t++)
            memset(f.y + t * m->ld_y, 0, D * 4);
    eng_parallel(e, nx * f.ipeF, 1, moe_up_fn, &f);
    if (eng_aborted(e))
        return TX8_STATUS_ABORTED;

    /* the hidden rows of every pair, prepared once */
    struct mm_act ah;
    if ((st = eng_mm_act(e, H1, F, np, F, m->act_dtype, &ah)))
        return st;
    for (size_t i = 0; i < nx; i++) {
        struct moe_x *x = &X[i];
        size_t hes = ah.i8 ? 1 : 4;
        x->a2 = ah;
        x->a2.p = (const uint8_t *)ah.p + x->p0 * ah.stride * hes;
        x->a2.xscale = ah.i8 ? ah.xscale + x->p0 : NULL;
        x->a2.xb = ah.xb ? ah.xb + x->p0 * ah.xb_stride : NULL;
        x->a2.T = x->np;
    }
    if (nx && mm_amx_takes(e, &X[0].w[2], &X[0].a2))
        mm_amx_prep(e, &X[0].a2, nx, sizeof(*X), F, J_AMX2);
    eng_parallel(e, (D + f.rbD - 1) / f.rbD, 1, moe_down_fn, &f);
    c->macs = macs;
    c->macs_skipped = skipped;
    return 0;
}

int eng_exec_moe_ffn(struct eng_cmd *c)
{
    const struct tx8_cmd_moe_ffn *m = c->cmd;
    struct tx8_engine *e = c->e;
    size_t T = m->tokens, K = m->top_k, D = m->dim, F = m->ffn_dim, NE = m->num_experts;
    size_t n = T * K;
    float *y = eng_ptr(e, m->y);
    int st;

    if (!T || !D)
        return 0;
    if (n == 0) {
        if (!(m->hdr.flags & TX8_MOE_FFN_F_ACCUMULATE))
            for (size_t t = 0; t < T; t++)
                memset(y + t * m->ld_y, 0, D * 4);
        return 0;
    }

    /* Private copies of the routing and of the expert table, then checks of
     * every weight the table names, before any work. */
    int32_t *ids = eng_jscratch(e, J_IDS, n * 4);
    float *wts = eng_jscratch(e, J_WTS, n * 4);
    struct tx8_weight *tab = eng_jscratch(e, J_TABLE, NE * 3 * sizeof(*tab));
    uint32_t *cnt = eng_jscratch(e, J_ORDER, (NE + 1) * 4 + n * 4);
    uint32_t *cur = eng_jscratch(e, J_MISC, NE * 8);
    if (!ids || !wts || !tab || !cnt || !cur)
        return TX8_STATUS_DEVICE_ERROR;
    uint32_t *xflags = cur + NE; /* the gate entries' TX8_WEIGHT_F_* */
    memcpy(ids, eng_ptr(e, m->ids), n * 4);
    memcpy(wts, eng_ptr(e, m->w), n * 4);
    memcpy(tab, eng_ptr(e, m->experts), NE * 3 * sizeof(*tab));
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0 && (size_t)ids[i] >= NE)
            return TX8_STATUS_INVALID_CMD;
    for (size_t x = 0; x < NE; x++) {
        uint32_t fl = tab[x * 3].rsvd;
        if (fl & ~(uint32_t)(TX8_WEIGHT_F_XCACHE | TX8_WEIGHT_F_XMISS))
            return TX8_STATUS_INVALID_CMD;
        xflags[x] = fl;
        tab[x * 3].rsvd = 0;
    }
    for (size_t x = 0; x < NE * 3; x++) {
        const struct tx8_weight *tw = &tab[x];
        int j = (int)(x % 3);
        if ((st = eng_weight_check(c, tw, 0)) ||
            (st = moe_weight_ok(tw, j == 2 ? D : F, j == 2 ? F : D, m->act_dtype)))
            return st;
    }

    /* (token, slot) pairs grouped by expert: a counting sort */
    uint32_t *order = cnt + NE + 1;
    memset(cnt, 0, (NE + 1) * 4);
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0)
            cnt[ids[i] + 1]++;
    for (size_t x = 0; x < NE; x++)
        cnt[x + 1] += cnt[x];
    memcpy(cur, cnt, NE * 4);
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 0)
            order[cur[ids[i]]++] = (uint32_t)i;

    /* the sparse indexes of the experts in use are validated up front */
    for (size_t x = 0; x < NE; x++) {
        if (cnt[x + 1] == cnt[x])
            continue;
        for (int j = 0; j < 3; j++) {
            struct mm_w tmp;
            if (tab[x * 3 + j].format == TX8_WFMT_BLOCK_SPARSE &&
                (st = eng_mm_weight(e, &tab[x * 3 + j], J_IDX0, &tmp)))
                return st;
        }
    }

    if (!e->moe_unfused) {
        st = moe_fused(c, tab, cnt, order, wts, xflags);
        if (st >= 0)
            return st;
    }

    size_t chunk = n < MOE_CHUNK ? n : MOE_CHUNK;
    uint32_t *rows = eng_jscratch(e, J_ROWS, chunk * 8);
    float *G = eng_jscratch(e, J_GATHER, chunk * D * 4);
    float *H1 = eng_jscratch(e, J_H1, chunk * F * 4);
    float *H2 = eng_jscratch(e, J_H2, chunk * F * 4);
    float *OUT = eng_jscratch(e, J_OUT, chunk * D * 4);
    if (!rows || !G || !H1 || !H2 || !OUT)
        return TX8_STATUS_DEVICE_ERROR;
    float *rwt = (float *)(rows + chunk);

    if (!(m->hdr.flags & TX8_MOE_FFN_F_ACCUMULATE))
        for (size_t t = 0; t < T; t++)
            memset(y + t * m->ld_y, 0, D * 4);

    const float *x = eng_ptr(e, m->x);
    uint64_t macs = 0, skipped = 0, sk;
    for (size_t ex = 0; ex < NE; ex++) {
        size_t b = cnt[ex], end = cnt[ex + 1];
        if (b == end)
            continue;
        struct mm_w wg, wu, wd;
        if ((st = eng_mm_weight(e, &tab[ex * 3 + 0], J_IDX0, &wg)) ||
            (st = eng_mm_weight(e, &tab[ex * 3 + 1], J_IDX1, &wu)) ||
            (st = eng_mm_weight(e, &tab[ex * 3 + 2], J_IDX2, &wd)))
            return st;
        for (int j = 0; j < 3; j++)
            c->bytes_read += eng_weight_bytes(&tab[ex * 3 + j]);
        moe_count(e, xflags[ex]);
        for (size_t p0 = b; p0 < end; p0 += chunk) {
            size_t nr = end - p0 < chunk ? end - p0 : chunk;
            if (eng_aborted(e))
                return TX8_STATUS_ABORTED;
            for (size_t i = 0; i < nr; i++) {
                rows[i] = order[p0 + i] / (uint32_t)K;
                rwt[i] = wts[order[p0 + i]];
            }
            struct gather_ctx gc = {x, m->ld_x, D, rows, G};
            eng_parallel(e, nr, nr * D < 65536 ? nr : 16, gather_fn, &gc);

            struct mm_act a;
            if ((st = eng_mm_act(e, G, D, nr, D, m->act_dtype, &a)))
                return st;
            struct mm_out o1 = {H1, F, NULL, 0}, o2 = {H2, F, NULL, 0};
            eng_mm_run(e, &wg, &a, &o1);
            eng_mm_run(e, &wu, &a, &o2);
            struct silu_ctx sc = {e, H1, H2};
            eng_parallel(e, nr * F, nr * F < 65536 ? nr * F : 32768, silu_fn, &sc);
            if ((st = eng_mm_act(e, H1, F, nr, F, m->act_dtype, &a)))
                return st;
            struct mm_out o3 = {OUT, D, NULL, 0};
            eng_mm_run(e, &wd, &a, &o3);
            struct scatter_ctx sg = {e, y, m->ld_y, OUT, D, nr, rows, rwt};
            eng_parallel(e, D, nr * D < 65536 ? D : 1024, scatter_fn, &sg);

            macs += eng_mm_macs(&wg, nr, &sk);
            skipped += sk;
            macs += eng_mm_macs(&wu, nr, &sk);
            skipped += sk;
            macs += eng_mm_macs(&wd, nr, &sk);
            skipped += sk;
        }
        c->mac_dtype = wg.dtype;
    }
    c->macs = macs;
    c->macs_skipped = skipped;
    return 0;
}
