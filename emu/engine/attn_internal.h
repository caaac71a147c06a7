/* SPDX-License-Identifier: MIT */
/*
 * ATTENTION's work context, shared by ops_attn.c (every ISA) and the
 * AVX-512 query-tile kernel (attn_avx512.c).
 */
#ifndef TX8_ENGINE_ATTN_INTERNAL_H
#define TX8_ENGINE_ATTN_INTERNAL_H

#include <string.h>

#include "engine_internal.h"

struct attn_ctx {
    struct tx8_engine *e;
    const struct tx8_cmd_attention *m;
    const float *q;
    const uint8_t *k, *v;
    float *out;
    const int32_t *sel; /* private, validated copy or NULL */
    size_t grp;         /* q heads per kv head */
    size_t nsplit;      /* sub-groups of q heads per work item */
    size_t hsub;        /* q heads per sub-group */
    size_t nks;         /* key ranges per (token, kv head) (flash-decoding split) */
    size_t tq;          /* tokens per query tile (the AVX-512 tile path) */
    size_t ntiles;      /* query tiles */
    int fast;           /* the AVX-512 query-tile path */
    float *part;        /* nks > 1: [token][kv head][range][grp][v_dim + 2] partials */
    int block;          /* kv_dtype is a 1.6 block type (Q8_0 / Q4_0) */
    unsigned vdt;       /* the v cache's type (TX8_ATTN_F_V_DTYPE, else kv_dtype) */
    int shared;         /* v is the k cache read as its first v_dim dims (absorbed MLA) */
    /* a selection that keeps most causal keys, as a bitmap [token][bm_words]
     * of the selected keys: the tile path then runs the causal keys in
     * query tiles and masks the others, instead of one token at a time */
    const uint64_t *bm;
    size_t bm_words;
    /* bm is the command's key bitmap (1.10 mask, no selection), clipped to
     * the causal keys: every path applies it (never dropped) */
    int umask;
    int bf;    /* TX8_ATTN_F_BF16: BF16 dot products */
    int bf_dp; /* ... by vdpbf16ps (the BF16 tile), else by the f32 tile on rounded operands */
    int dec;   /* one token's rows off the tile path: the AVX-512 decode kernel */
};

/* byte address of element e of a KV cache of type dt (block types too) */
static inline const uint8_t *kv_at(unsigned dt, const uint8_t *base, size_t e)
{
    return base + tx_dtype_row_bytes(dt, e);
}

/* a float rounded to BF16 (nearest even, denormals to zero, NaN quiet),
 * as vcvtneps2bf16: the BF16 bits */
static inline uint16_t eng_bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    /* branch-free (selects), so that loops of it vectorise */
    uint32_t rne = u + 0x7fffu + ((u >> 16) & 1);
    uint32_t r = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) /* NaN: quiet */
                 : (u & 0x7f800000u)             ? rne
                                                 : (u & 0x80000000u); /* zero, denormal */
    return (uint16_t)(r >> 16);
}

/* the same as a float */
static inline float eng_bf16_round(float f)
{
    uint32_t u = (uint32_t)eng_bf16_bits(f) << 16;
    memcpy(&f, &u, 4);
    return f;
}

/* rows (tokens x heads) of one query tile at most */
#define ATTN_TILE_ROWS 64

/*
 * AVX-512 query tile: tokens [t0, t0 + nt) x q heads [h0, h1) of kv head g
 * (nt * (h1 - h0) <= ATTN_TILE_ROWS; nt == 1 with a selection), over keys
 * [j0, j1) of the query's key list. Each key block is converted once for
 * every row of the tile. part == NULL: the normalised rows are written,
 * else (o, max, sum) of the grp heads (nt == 1, the whole group) go to part.
 */
void eng_attn_tile_avx512(const struct attn_ctx *a, size_t t0, size_t nt, size_t h0, size_t h1,
                          size_t g, size_t j0, size_t j1, float *part, struct eng_worker *w);

/* the same with BF16 dot products (TX8_ATTN_F_BF16; attn_bf16_avx512.c,
 * only on an engine with TX8_FEAT_AVX512BF16) */
void eng_attn_tile_bf16(const struct attn_ctx *a, size_t t0, size_t nt, size_t h0, size_t h1,
                        size_t g, size_t j0, size_t j1, float *part, struct eng_worker *w);
/* its scratch bytes before the tile state */
size_t eng_attn_tile_bf16_bytes(const struct tx8_cmd_attention *m);

/*
 * AVX-512 decode kernel (attn_decode_avx512.c): token t, q heads [h0, h1)
 * of kv head g, keys [j0, j1) of its causal keys (a selection as a->bm),
 * an F32/F16/BF16/Q8_0/Q4_0 K and V cache (V may be K's first v_dim
 * elements: absorbed MLA), BF16 products over a BF16 cache (by vdpbf16ps
 * where a->bf_dp and the dims are multiples of 32), qk_dim and v_dim
 * multiples of 16. part == NULL: the normalised rows are written, else
 * (o, max, sum) of the h1 - h0 rows go to part, as the per-token path's.
 */
void eng_attn_decode_avx512(const struct attn_ctx *a, size_t t, size_t h0, size_t h1, size_t g,
                            size_t j0, size_t j1, float *part, struct eng_worker *w);
/* the scratch bytes it takes from W_TMP for h rows */
size_t eng_attn_decode_scratch(const struct tx8_cmd_attention *m, size_t h);

/* one KV-cache row (F32/F16/BF16/Q8_0/Q4_0) to f32 with AVX-512, bit-exact
 * with eng_kv_to_f32 */
void eng_kv_row_f32_avx512(float *dst, const void *src, unsigned dt, size_t n);

/* x[0..n) rounded to BF16 in place (as eng_bf16_round), AVX-512F */
void eng_bf16_round_avx512(float *x, size_t n);

/* the scratch bytes eng_attn_tile_avx512 takes from W_TMP */
size_t eng_attn_tile_scratch(const struct tx8_cmd_attention *m);

/* DSA_INDEX scoring in tiles (attn_avx512.c) */
struct eng_dsa_tile {
    const float *q;    /* [tokens][heads][ld_q_head] */
    const float *w;    /* [tokens][heads] */
    const float *k;    /* f32 keys [kv_len][ld_k], or NULL */
    const uint8_t *kq; /* Q8_0 keys [kv_len][ld_k], or NULL */
    /* TX8_DSA_F_QUERY_Q8: the quantised queries [tokens][heads][dim] and
     * their block scales [tokens][heads][dim / 32] (eng_dsa_tile_q8_avx512) */
    const int8_t *q8;
    const float *q8d;
    size_t heads, dim, ld_q_head, ld_k;
    float *scores; /* [token - t0][nkeys] */
    size_t t0, nkeys;
};

/* scores of tokens [t0, t0 + nt) (absolute; nt * heads <= ATTN_TILE_ROWS)
 * for keys [s0, s1) */
void eng_dsa_tile_avx512(const struct eng_dsa_tile *d, size_t t0, size_t nt, size_t s0, size_t s1,
                         struct eng_worker *w);
size_t eng_dsa_tile_scratch(size_t dim);
/* the same with TX8_DSA_F_QUERY_Q8: vpdpbusd over the Q8_0 keys, the sums
 * of tx8_hw.h's definition (bit-exact with the per-token path) */
void eng_dsa_tile_q8_avx512(const struct eng_dsa_tile *d, size_t t0, size_t nt, size_t s0,
                            size_t s1, struct eng_worker *w);

#endif
