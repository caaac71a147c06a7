/* SPDX-License-Identifier: MIT */
/*
 * The parts of ATTENTION's AVX-512 query tile that do not depend on the
 * type of the dot products: the rows' key limits and selection masks, a
 * key block's key list, the online softmax of a block of scores and the
 * tile's output. Shared by the f32 tile (attn_avx512.c) and the BF16 tile
 * (attn_bf16_avx512.c); include only from *_avx512.c.
 *
 * A tile holds nr = nt tokens x nh heads rows, 16 per vector (RV vectors,
 * NP = 16 RV lanes). Scores of a key block are S^T[key][NP], the output
 * O^T[d][NP]; both f32.
 */
#ifndef TX8_ENGINE_ATTN_TILE_H
#define TX8_ENGINE_ATTN_TILE_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attn_internal.h"
#include "simd_avx512.h"

#define ATTN_AI __attribute__((always_inline)) static inline
#define FKC 48 /* keys per block (even, a multiple of every tile height: 6, 8, 12, 16) */

struct attn_tile {
    const struct attn_ctx *a;
    size_t t0, nt, h0, nh, nr, NP;
    unsigned RV;
    float *mx, *ls, *cr; /* [NP] running max, sum, this block's correction */
    int32_t *lim;        /* [NP] keys visible to each row (causal) */
    int32_t *keys;       /* [FKC] a selection's keys of the block */
    __mmask16 *lanem;    /* [nt][RV] a bitmap selection: each token's lanes */
    const int32_t *sl;   /* the tile's token's selection (one token), or NULL */
    const uint64_t *bm;  /* the tokens' selection bitmaps, or NULL */
};

/*
 * The rows j < m of c (c[j * NP ..]) by a register tile function
 * TILE(c, NP, JT, RV, ap, as, ai, bp, n, init) (always inlined, JT and RV
 * constants): JT-row tiles, then single rows; JT by the RV row vectors
 * (16 x 1, 12 x 2, 8 x 3, 6 x 4: at most 24 accumulators). For the f32 and
 * the BF16 tiles.
 */
#define ATTN_TILE_ROWS_OF(TILE, JT, RV, c, NP, ap, as, ai, bp, n, m, init)                         \
    do {                                                                                           \
        size_t j_ = 0;                                                                             \
        for (; j_ + (JT) <= (m); j_ += (JT))                                                       \
            TILE((c) + j_ * (NP), NP, JT, RV, (ap) + j_ * (as), as, ai, bp, n, init);              \
        for (; j_ < (m); j_++)                                                                     \
            TILE((c) + j_ * (NP), NP, 1, RV, (ap) + j_ * (as), as, ai, bp, n, init);               \
    } while (0)
#define ATTN_TILES(TILE, RV, c, NP, ap, as, ai, bp, n, m, init)                                    \
    do {                                                                                           \
        switch (RV) {                                                                              \
        case 1:                                                                                    \
            ATTN_TILE_ROWS_OF(TILE, 16, 1, c, NP, ap, as, ai, bp, n, m, init);                     \
            break;                                                                                 \
        case 2:                                                                                    \
            ATTN_TILE_ROWS_OF(TILE, 12, 2, c, NP, ap, as, ai, bp, n, m, init);                     \
            break;                                                                                 \
        case 3:                                                                                    \
            ATTN_TILE_ROWS_OF(TILE, 8, 3, c, NP, ap, as, ai, bp, n, m, init);                      \
            break;                                                                                 \
        default:                                                                                   \
            ATTN_TILE_ROWS_OF(TILE, 6, 4, c, NP, ap, as, ai, bp, n, m, init);                      \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* a register tile's JT x RV accumulators from c (init) or 0, and back */
ATTN_AI void attn_acc_load(__m512 acc[16][4], const float *c, size_t NP, const unsigned JT,
                           const unsigned RV, int init)
{
#pragma GCC unroll 16
    for (unsigned jj = 0; jj < JT; jj++)
#pragma GCC unroll 4
        for (unsigned rv = 0; rv < RV; rv++)
            acc[jj][rv] = init ? _mm512_loadu_ps(c + jj * NP + rv * 16) : _mm512_setzero_ps();
}

ATTN_AI void attn_acc_store(__m512 acc[16][4], float *c, size_t NP, const unsigned JT,
                            const unsigned RV)
{
#pragma GCC unroll 16
    for (unsigned jj = 0; jj < JT; jj++)
#pragma GCC unroll 4
        for (unsigned rv = 0; rv < RV; rv++)
            _mm512_storeu_ps(c + jj * NP + rv * 16, acc[jj][rv]);
}

/* the scratch floats of the tile state (after the caller's buffers) */
#define ATTN_TILE_STATE_BYTES (ATTN_TILE_ROWS * 4 * 4 + FKC * 4 + ATTN_TILE_ROWS * 4 * 2)

ATTN_AI __mmask16 attn_m16(size_t n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* set up the state in mem (ATTN_TILE_STATE_BYTES, 4-byte aligned) */
ATTN_AI void attn_tile_init(struct attn_tile *s, const struct attn_ctx *a, size_t t0, size_t nt,
                            size_t h0, size_t h1, void *mem)
{
    const struct tx8_cmd_attention *m = a->m;
    s->a = a;
    s->t0 = t0;
    s->nt = nt;
    s->h0 = h0;
    s->nh = h1 - h0;
    s->nr = nt * s->nh;
    s->RV = (unsigned)((s->nr + 15) / 16);
    s->NP = (size_t)s->RV * 16;
    s->mx = mem;
    s->ls = s->mx + s->NP;
    s->cr = s->ls + s->NP;
    s->lim = (int32_t *)(void *)(s->cr + s->NP);
    s->keys = s->lim + s->NP;
    s->lanem = (__mmask16 *)(void *)(s->keys + FKC);
    for (size_t r = 0; r < s->NP; r++) {
        int32_t lv = 0;
        if (r < s->nr) {
            uint64_t l = (uint64_t)m->q_pos0 + t0 + r / s->nh + 1;
            lv = a->sel && !a->bm ? INT32_MAX : (int32_t)(l < m->kv_len ? l : m->kv_len);
        }
        s->lim[r] = lv;
        s->mx[r] = -INFINITY;
        s->ls[r] = 0;
    }
    s->sl = a->sel && !a->bm ? a->sel + t0 * m->sel_k : NULL;
    s->bm = a->bm ? a->bm + t0 * a->bm_words : NULL;
    if (s->bm)
        for (size_t tr = 0; tr < nt; tr++)
            for (unsigned rv = 0; rv < s->RV; rv++) {
                unsigned mk = 0;
                for (unsigned i = 0; i < 16; i++) {
                    size_t r = rv * 16 + i;
                    if (r < s->nr && r / s->nh == tr)
                        mk |= 1u << i;
                }
                s->lanem[tr * s->RV + rv] = (__mmask16)mk;
            }
}

/* the block [c0, ce) of the key list: its key count; with a selection the
 * selected keys are in s->keys */
ATTN_AI size_t attn_tile_block(struct attn_tile *s, size_t c0, size_t ce)
{
    if (!s->sl)
        return ce - c0;
    size_t cn = 0;
    for (size_t j = c0; j < ce; j++)
        if (s->sl[j] >= 0)
            s->keys[cn++] = s->sl[j];
    return cn;
}

/* the cache row index of key j of the block starting at c0 */
ATTN_AI size_t attn_tile_key(const struct attn_tile *s, size_t c0, size_t j)
{
    return s->sl ? (size_t)s->keys[j] : c0 + j;
}

/*
 * The online softmax of the block's scores st [cn][NP] (keys c0.. of the
 * key list): masked keys to -inf, p = exp(s - max) written over st, the
 * running max and sum updated (the sum of the f32 p); s->cr holds each
 * row's correction factor. Returns the lanes whose factor is not 1 (the
 * output must be rescaled).
 */
ATTN_AI __mmask16 attn_tile_softmax(struct attn_tile *s, float *st, size_t c0, size_t cn)
{
    const struct attn_ctx *a = s->a;
    const __m512 ninf = _mm512_set1_ps(-INFINITY), one = _mm512_set1_ps(1.0f);
    size_t NP = s->NP;
    __mmask16 anycorr = 0;
    for (unsigned rv = 0; rv < s->RV; rv++) {
        __m512 mo = _mm512_loadu_ps(s->mx + rv * 16), cm = mo;
        __m512i lv = _mm512_loadu_si512(s->lim + rv * 16);
        for (size_t j = 0; j < cn; j++) {
            float *sp = st + j * NP + rv * 16;
            __m512 v = _mm512_loadu_ps(sp);
            if (s->bm) { /* selected: the key's bit in each row's token */
                size_t key = c0 + j;
                __mmask16 vis = 0;
                for (size_t tr = 0; tr < s->nt; tr++)
                    if ((s->bm[tr * a->bm_words + key / 64] >> (key % 64)) & 1)
                        vis |= s->lanem[tr * s->RV + rv];
                v = _mm512_mask_mov_ps(ninf, vis, v);
                _mm512_storeu_ps(sp, v);
            } else if (!s->sl) { /* causal: key c0 + j visible to rows with lim > it */
                __mmask16 vis = _mm512_cmpgt_epi32_mask(lv, _mm512_set1_epi32((int)(c0 + j)));
                v = _mm512_mask_mov_ps(ninf, vis, v);
                _mm512_storeu_ps(sp, v);
            }
            cm = _mm512_max_ps(cm, v);
        }
        __mmask16 ok = _mm512_cmp_ps_mask(cm, ninf, _CMP_NEQ_OQ);
        __m512 corr = _mm512_mask_mov_ps(one, ok, eng_exp512(_mm512_sub_ps(mo, cm)));
        __m512 sum = _mm512_setzero_ps();
        for (size_t j = 0; j < cn; j++) {
            float *sp = st + j * NP + rv * 16;
            __m512 p = _mm512_maskz_mov_ps(ok, eng_exp512(_mm512_sub_ps(_mm512_loadu_ps(sp), cm)));
            _mm512_storeu_ps(sp, p);
            sum = _mm512_add_ps(sum, p);
        }
        _mm512_storeu_ps(s->ls + rv * 16,
                         _mm512_fmadd_ps(_mm512_loadu_ps(s->ls + rv * 16), corr, sum));
        _mm512_storeu_ps(s->mx + rv * 16, _mm512_mask_mov_ps(mo, ok, cm));
        _mm512_storeu_ps(s->cr + rv * 16, corr);
        anycorr |= _mm512_cmp_ps_mask(corr, one, _CMP_NEQ_UQ);
    }
    return anycorr;
}

/* O^T [vd][NP] *= the block's correction, row by row */
ATTN_AI void attn_tile_rescale(const struct attn_tile *s, float *ot, size_t vd)
{
    for (size_t d = 0; d < vd; d++)
        for (unsigned rv = 0; rv < s->RV; rv++) {
            float *op = ot + d * s->NP + rv * 16;
            _mm512_storeu_ps(op,
                             _mm512_mul_ps(_mm512_loadu_ps(op), _mm512_loadu_ps(s->cr + rv * 16)));
        }
}

/* the tile's rows out: normalised into the output, or (part != NULL: the
 * group's heads of one token) (o, max, sum) for the merge */
ATTN_AI void attn_tile_finish(const struct attn_tile *s, const float *ot, size_t vd, float *part)
{
    const struct attn_ctx *a = s->a;
    const struct tx8_cmd_attention *m = a->m;
    size_t nr = s->nr, NP = s->NP;
    if (part) {
        for (size_t r = 0; r < nr; r++) {
            for (size_t d = 0; d < vd; d++)
                part[r * vd + d] = ot[d * NP + r];
            part[nr * vd + r] = s->mx[r];
            part[nr * vd + nr + r] = s->ls[r];
        }
        return;
    }
    size_t orow = (size_t)m->q_heads * m->ld_o_head;
    for (size_t r = 0; r < nr; r++) {
        size_t t = s->t0 + r / s->nh, h = s->h0 + r % s->nh;
        float *dst = a->out + t * orow + h * m->ld_o_head;
        float inv = s->ls[r] > 0 ? 1.0f / s->ls[r] : 0.0f;
        for (size_t d = 0; d < vd; d++)
            dst[d] = ot[d * NP + r] * inv;
    }
}

#endif
