/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime, internal: the expert cache (runtime/expert_cache.c).
 *
 * Routed experts are not resident: their three matrices (gate, up, down)
 * stay in the package and are read, in their stored precision, by io_uring
 * straight into a slot of one device buffer of n_slots equal slots. The
 * MoE expert table of a layer (meta BO, tx8_weight [n_moe][E][3]) names the
 * slot of every expert a pass routes to; MOE_FFN runs unchanged.
 */
#ifndef TX_RT_EXPERT_CACHE_H
#define TX_RT_EXPERT_CACHE_H

#include "runtime/rt_internal.h"

struct gctx;
struct tx_moe_ffn_args;

struct rt_xslot {
    int32_t mi, e;  /* MoE layer index and expert held (or being read); -1: free */
    int inflight;   /* reads outstanding */
    int err;        /* first read error (negative errno) */
    uint64_t pin;   /* == xc->stamp: the current layer needs it (not evictable) */
    int prefetched; /* read by a prefetch, not used since */
    int conv_prec;  /* precision of the converted copies in the slot, -1: none */
    uint64_t last;  /* clock of the last use (LRU key) */
};

struct rt_xcache {
    int on;
    int lru;      /* 1: plain LRU, 0: frequency + recency (LRFU) */
    int prefetch; /* 1: predicted prefetch */
    int n_moe, E, K;
    int n_slots;
    uint64_t slot_size; /* stored extents, then the converted copies */
    int slot_prec;      /* expert precision the slot size was made for */
    uint64_t budget;    /* bytes given to the cache */
    uint64_t bytes_all; /* stored bytes of every routed expert */
    tx_bo_t *bo;        /* n_slots * slot_size */
    void *map;
    tx_bo_t *scratch; /* f32 scratch of the conversions */
    uint64_t scratch_size;
    struct rt_xslot *slot;
    int32_t *where;  /* [n_moe][E] -> slot, -1 */
    double *freq;    /* [n_moe][E] decayed selection counts */
    uint32_t *trans; /* [n_moe][E][E] co-selections (layer mi, e) -> (mi + 1, e') */
    uint32_t *trow;  /* [n_moe][E] row sums of trans */
    int32_t *prev;   /* routed ids of the previous MoE layer of this pass [T][K] */
    int prev_mi, prev_T;
    size_t prev_cap;
    int32_t *ids; /* host copy of the current layer's routing */
    size_t ids_cap;
    struct io_uring ring;
    int ring_ok;
    int fd, fd_direct, direct;
    int inflight;
    uint64_t clock; /* MoE layer visits */
    uint64_t stamp; /* pin stamp */
    int dev_flags;  /* the device counts hits / misses from table flags (1.6) */
    /* counters (glm_expert_cache_stats) */
    uint64_t hits, misses, prefetches, prefetch_useful, evictions, bytes_read;
    uint64_t dec_tokens, dec_misses, dec_bytes_read, dec_bytes_needed;
    int in_decode; /* the current pass is all decode rows */
    /* profiling only (else NULL): this pass's hits / misses per (MoE layer,
     * expert), handed to the trace's expert table after the pass (moe.c) */
    uint64_t *p_hit, *p_miss;
};

/* Bytes of the routed experts' stored extents (0: no MoE layers). */
uint64_t rt_xc_expert_bytes(const glm_model_t *m);
/* Marks the routed experts non-resident (packs the rest into w_size). */
void rt_xc_mark(glm_model_t *m);
void rt_xc_unmark(glm_model_t *m);
/* Slot size: the largest expert, stored + converted copies for expert
 * precision prec (-1: stored only). */
uint64_t rt_xc_slot_bytes(const glm_model_t *m, int prec);
/* The cache of `bytes` (>= top_k slots) once the resident part is placed. */
int rt_xc_setup(glm_model_t *m, uint64_t bytes, unsigned load_flags);
void rt_xc_free(glm_model_t *m);
/* A plan whose expert precision needs another slot size lays the cache
 * out again (TX_ENOSPC when its bytes then hold fewer than top_k). */
int rt_xc_plan_changed(glm_model_t *m, const glm_precision_plan_t *plan);
/* Declares the cache BOs to the current job. */
int rt_xc_declare(glm_model_t *m, tx_cmdbuf_t *cb);
/* Start of a pass: T rows, all decode steps or not. */
void rt_xc_pass_begin(glm_model_t *m, int T, int decode);
/* MoE layer l (index mi) after MOE_ROUTE was emitted: waits for the
 * routing, makes the routed experts present, writes the layer's table and
 * emits MOE_FFN (x: its arguments, experts already pointing at the table).
 * Also prefetches the experts predicted for the next MoE layer. */
void rt_xc_moe_ffn(struct gctx *g, int l, int mi, struct tx_moe_ffn_args *x);
/* Reads the experts of want[n_moe][E] into free slots now and waits. */
int rt_xc_preload(glm_model_t *m, const uint8_t *want);

#endif
