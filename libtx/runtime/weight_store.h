/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime, internal: the weight store -- where a model's weights live
 * on the device and how a pass reaches them. One table of operations per
 * placement mode, chosen once at load (model.c, place_weights) and kept in
 * m->store; the loader, the pass (graph.c), the blocks (blocks.c), the
 * precision plan (weights.c) and the reports (model.c, telemetry.c) call
 * it and never test the mode.
 *
 *   mode             file                 weights on the device
 *   resident         store_resident.c     all of them, one BO
 *   streamed         stream.c             model-level tensors; the decoder
 *                                         layers pass through 2 slots
 *   expert cache     expert_cache.c       all but the routed experts; those
 *                                         in a cache of expert slots
 *   expert parallel  expert_parallel.c    all but the routed experts; those
 *                                         on the devices of the placement
 *
 * docs/architecture.md has the table with what each operation does per
 * mode.
 */
#ifndef TX_RT_WEIGHT_STORE_H
#define TX_RT_WEIGHT_STORE_H

#include "runtime/rt_internal.h"

struct gctx;
struct tx_moe_ffn_args;
struct tx_telemetry_cache;

/* What a store's place() gets from the loader. */
struct rt_place {
    const struct glm_load_options *o;
    const char *path;
    uint64_t avail;   /* device memory free before the weights */
    uint64_t total_w; /* bytes of every tensor extent */
    /* TX_ENOSPC is not final: the loader tries the next store, so place()
     * leaves no state behind and only notes the miss (rt_debug) */
    int may_fall;
};

struct rt_store_ops {
    const char *name;
    /* properties of the mode */
    int layer_jobs;   /* one device job per decoder layer (layer_leave prefetches) */
    int decode_graph; /* decode passes may be recorded and replayed */

    /* load: the device memory of the weights (w_bo and the mode's own),
     * after the tensor tables; TX_ENOSPC when they do not fit */
    int (*place)(glm_model_t *m, const struct rt_place *p);
    /* load: after the extents were read and the meta BO built */
    int (*ready)(glm_model_t *m);
    /* the mode's state (also after a failed place) */
    void (*free)(glm_model_t *m);
    /* expert tables (tx8_weight [E][3]) the meta BO holds */
    int (*n_expert_tables)(const glm_model_t *m);

    /* a new precision plan, after the conversions were made */
    int (*plan)(glm_model_t *m, const glm_precision_plan_t *plan);

    /* a pass: start (T rows, all one-token decode steps or not) */
    void (*pass_begin)(glm_model_t *m, int T, int decode);
    /* declare the mode's BOs to a job of the pass */
    int (*declare)(glm_model_t *m, tx_cmdbuf_t *cb);
    /* before decoder layer l's commands are built / after its job was
     * submitted (layer_jobs) or built, `next` the layer to come (-1: none) */
    int (*layer_enter)(struct gctx *g, int l);
    int (*layer_leave)(struct gctx *g, int l, int next);
    /* MoE layer l (index mi) after MOE_ROUTE: h += the routed experts.
     * x holds MOE_FFN's arguments but the expert table */
    void (*moe_ffn)(struct gctx *g, int l, int mi, struct tx_moe_ffn_args *x);

    /* reports: the mode's share of glm_model_info (weights_bytes added,
     * prefetch_hits / _misses set) and of the telemetry (1: *tc filled) */
    void (*info)(const glm_model_t *m, struct glm_model_info *info);
    int (*telemetry)(const glm_model_t *m, struct tx_telemetry_cache *tc);
};

extern const struct rt_store_ops rt_store_resident;
extern const struct rt_store_ops rt_store_streamed;
extern const struct rt_store_ops rt_store_expert_cache;
extern const struct rt_store_ops rt_store_expert_parallel;

/* store_resident.c: the pieces the other modes share */
/* w_bo of m->w_size bytes (what is resident in this mode) */
int rt_store_place_resident(glm_model_t *m, const struct rt_place *p);
/* MoE layer mi's table in the meta BO (the resident layout) */
uint64_t rt_store_layer_table(const glm_model_t *m, int mi);
/* emit MOE_FFN x (its table set) for layer l */
void rt_store_emit_moe_ffn(struct gctx *g, int l, struct tx_moe_ffn_args *x);
int rt_store_nop_layer(struct gctx *g, int l, int next);
int rt_store_nop_enter(struct gctx *g, int l);
int rt_store_nop_ready(glm_model_t *m);
int rt_store_nop_declare(glm_model_t *m, tx_cmdbuf_t *cb);
void rt_store_nop_pass_begin(glm_model_t *m, int T, int decode);
void rt_store_nop_info(const glm_model_t *m, struct glm_model_info *info);
int rt_store_nop_telemetry(const glm_model_t *m, struct tx_telemetry_cache *tc);
int rt_store_per_layer_tables(const glm_model_t *m);

#endif
