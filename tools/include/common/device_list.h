/* SPDX-License-Identifier: MIT */
/*
 * The tools' device lists (glm-inference, glm-server): --device A,B,... or
 * TX_DEVICE=A,B,...: one model split across them by expert parallelism (docs/multi-device.md).
 */
#ifndef TX_TOOLS_DEVICE_LIST_H
#define TX_TOOLS_DEVICE_LIST_H

#include <tx/glm.h>
#include <tx/tx_device.h>

/* Opens the devices of a comma-separated list (NULL: $TX_DEVICE, else the
 * default device). 0, or 1 with a message naming the entry on stderr. */
int mdev_open(const char *prog, const char *list, tx_device_t **devs, int max, int *n);
void mdev_close(tx_device_t **devs, int n);
/* glm_model_load, or the multi-device load for n > 1 (expert_parallel:
 * groups, 0 = every expert its own group; reserve_bytes: device 0's room
 * kept free for what is allocated after the load, e.g. mdev_kv_reserve). */
int mdev_load(tx_device_t **devs, int n, const char *path, const struct glm_load_options *lo,
              int expert_parallel, uint64_t reserve_bytes, glm_model_t **m);
/* Bytes of the KV caches of `sessions` sessions of n_ctx tokens each of the
 * package at path, for the cache type (GLM_CACHE_*: K's type; the larger of
 * K's and V's for GQA models; GLM_CACHE_DEFAULT counts F32, the largest),
 * from the package's config (tx_analyze_config; n_ctx 0: the session
 * default, min(4096, max_position_embeddings)). 0 if it cannot be read
 * (the load then reports the package's error). */
uint64_t mdev_kv_reserve(const char *path, int sessions, int n_ctx, int cache_k, int cache_v);
/* The figures of a multi-device model (nothing for one device). */
void mdev_print_stats(const char *prog, glm_model_t *m);

#endif
