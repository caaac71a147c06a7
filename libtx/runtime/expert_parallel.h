/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime, internal: expert parallelism (runtime/expert_parallel.c).
 * The public contract is in include/tx/glm.h ("Expert parallelism") and
 * docs/multi-device.md.
 */
#ifndef TX_RT_EXPERT_PARALLEL_H
#define TX_RT_EXPERT_PARALLEL_H

#include "runtime/rt_internal.h"

/* The weight store "expert parallel" (rt_store_expert_parallel,
 * runtime/weight_store.h) is this file's. */

/* model.c: a load for expert parallelism */
#define RT_LOAD_NORMAL 0
#define RT_LOAD_EP_PRIMARY 1 /* everything but the routed experts */
#define RT_LOAD_EP_WORKER 2  /* package and tables only, no device memory */
int rt_model_load_mode(tx_device_t *dev, const char *path, const struct glm_load_options *opt,
                       int mode, glm_model_t **out);
void rt_model_free_now(glm_model_t *m);

#endif
