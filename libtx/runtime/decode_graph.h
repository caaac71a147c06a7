/* SPDX-License-Identifier: MIT */
/*
 * The decode graph (runtime/decode_graph.c): a decode pass recorded once
 * per (session set, plan) and patched per token.
 */
#ifndef TX_RT_DECODE_GRAPH_H
#define TX_RT_DECODE_GRAPH_H

#include "runtime/blocks.h"

/* rt_dgraph_mode_parse, rt_dgraph_drop: rt_internal.h */

/* Pass g is a decode pass the graph may run: when the model's graph was
 * recorded for it, patch it to the pass's positions and submit its jobs
 * (*replayed = 1). In verify mode only patch it and set g->dg_cmp: the
 * caller builds the pass (its flushes call rt_dgraph_compare), then calls
 * rt_dgraph_compare_end and rt_dgraph_submit. */
int rt_dgraph_replay(struct gctx *g, int *replayed);
int rt_dgraph_submit(struct gctx *g, int *replayed);
int rt_dgraph_compare(struct gctx *g);
int rt_dgraph_compare_end(const struct gctx *g);

/* Record the pass being built (g->dg); each flush hands its job to
 * rt_dgraph_job, which keeps it in device memory and submits it; at the
 * end rt_dgraph_end(g, ok) keeps the graph as the model's (ok and nothing
 * went wrong while recording) or frees it. */
int rt_dgraph_begin(struct gctx *g);
int rt_dgraph_job(struct gctx *g, tx_job_t *job);
void rt_dgraph_end(struct gctx *g, int ok);

/* While recording (no-ops otherwise). rt_dg_mark: the byte offset in the
 * current job of the next command. The command at `at` has a field at
 * byte `field` of `width` bytes that depends on segment sg's position:
 * rt_dg_field: value + coef per position; rt_dg_clamped: min(pos0 + add,
 * cap); rt_dg_cache_row: dst of a CONVERT/COPY into row pos0 of a cache
 * of `cols` values of `dtype` per row. rt_dg_threshold: the pass's
 * structure depends on whether pos0 + n > thr. rt_dg_pairs: the pass
 * counted attention pairs of sg (rt_count_pairs) with this selection. */
size_t rt_dg_mark(struct gctx *g);
void rt_dg_field(struct gctx *g, const struct rt_seg *sg, size_t at, size_t field, int width,
                 int64_t coef);
void rt_dg_clamped(struct gctx *g, const struct rt_seg *sg, size_t at, size_t field, int width,
                   int64_t add, uint64_t cap);
void rt_dg_cache_row(struct gctx *g, const struct rt_seg *sg, size_t at, uint16_t dtype,
                     uint64_t cols);
void rt_dg_threshold(struct gctx *g, const struct rt_seg *sg, int thr);
void rt_dg_pairs(struct gctx *g, const struct rt_seg *sg, int sel_k);
/* The pass being recorded has commands no patch can follow: no graph */
void rt_dg_unpatchable(struct gctx *g);

#endif
