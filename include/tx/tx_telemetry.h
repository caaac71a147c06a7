/* SPDX-License-Identifier: MIT */
/*
 * libtx telemetry channel: a process that runs a model publishes live
 * figures about it (model name, device, per-layer per-expert selection
 * counts) for monitors such as tx-top. See docs/tx-top.md, "Telemetry
 * channel", for the exact shared-memory layout.
 *
 * Publisher (the process running the model):
 *
 *     tx_telemetry_pub_t *pub;
 *     tx_telemetry_open_publisher("GLM-5.1", "emu:/run/tx8/tx8-0.sock",
 *                                 n_layers, n_experts, &pub);
 *     ...  after a forward pass, for every MoE layer l:
 *     tx_telemetry_update_experts(pub, l, counts_of_layer_l, n_experts);
 *     ...
 *     tx_telemetry_close(pub);
 *
 * The figures live in a POSIX shared-memory object
 * /dev/shm/tx8-telemetry-<pid> (further publishers of the same process:
 * tx8-telemetry-<pid>.<n>), mode 0644, a versioned fixed-layout header
 * followed by the counts, updated in place under a sequence lock so that
 * readers never see a torn layer and never block the publisher. close()
 * removes the object; objects left behind by processes that died are
 * ignored and removed by readers (tx_telemetry_scan).
 *
 * $TX_TELEMETRY_DIR replaces /dev/shm (tests; it must be a directory on a
 * tmpfs or any file system both sides can mmap).
 *
 * Conventions of libtx: functions return TX_OK (0) or a negative TX_E* code
 * (tx/tx_error.h) with a message for tx_last_error(). Thread-safe.
 */
#ifndef TX_TELEMETRY_H
#define TX_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

#include <tx/tx_error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Layout version of the shared-memory object. Readers reject others. */
#define TX_TELEMETRY_VERSION 1
#define TX_TELEMETRY_MODEL_LEN 64   /* model name, NUL included */
#define TX_TELEMETRY_DEVICE_LEN 256 /* device spec or name, NUL included */
#define TX_TELEMETRY_MAX_LAYERS 4096
#define TX_TELEMETRY_MAX_EXPERTS 4096
#define TX_TELEMETRY_MAX_CELLS (1u << 22) /* layers * experts */

typedef struct tx_telemetry_pub tx_telemetry_pub_t;

/*
 * Create the shared-memory object and start publishing. model_name and
 * device_name are copied (truncated to fit); layers is the model's layer
 * count (layer indices 0..layers-1; layers that are never updated, e.g.
 * dense ones, are shown as having no expert data), experts the number of
 * routed experts per MoE layer. All counts start at zero.
 */
TX_API int tx_telemetry_open_publisher(const char *model_name, const char *device_name,
                                       uint32_t layers, uint32_t experts, tx_telemetry_pub_t **pub);

/*
 * Publish the selection counts of one layer: counts[e] for experts
 * 0..n-1 (n <= experts; experts >= n keep their values). Counts are
 * cumulative figures (selections since the model was loaded or its
 * counters were reset), not deltas.
 */
TX_API int tx_telemetry_update_experts(tx_telemetry_pub_t *pub, uint32_t layer,
                                       const uint64_t *counts, uint32_t n);

/*
 * Expert cache counters of a model (glm_model_expert_cache_stats, cumulative
 * since load): slots and routed experts, uses that hit / missed the cache,
 * experts prefetched and of those used, bytes read into the cache.
 */
struct tx_telemetry_cache {
    uint64_t slots, experts;
    uint64_t hits, misses;
    uint64_t prefetches, prefetch_useful;
    uint64_t bytes_read;
};
TX_API int tx_telemetry_update_cache(tx_telemetry_pub_t *pub, const struct tx_telemetry_cache *c);

/* Stop publishing: the object is removed and pub freed. NULL is accepted. */
TX_API int tx_telemetry_close(tx_telemetry_pub_t *pub);

/* Name of the publisher's object (e.g. "/dev/shm/tx8-telemetry-1234"). */
TX_API const char *tx_telemetry_path(const tx_telemetry_pub_t *pub);

/* One published model, as a reader sees it (a consistent copy). */
struct tx_telemetry_model {
    int32_t pid;                        /* publishing process */
    char model[TX_TELEMETRY_MODEL_LEN]; /* e.g. "GLM-5.1" */
    char device[TX_TELEMETRY_DEVICE_LEN];
    char path[288]; /* the shared-memory object */
    uint32_t layers;
    uint32_t experts;
    uint64_t created_ns;        /* CLOCK_REALTIME when the publisher opened */
    uint64_t updated_ns;        /* CLOCK_REALTIME of the last update (0: none yet) */
    uint64_t updates;           /* number of update calls so far */
    const uint8_t *layer_valid; /* [layers]: 1 once the layer was updated */
    const uint64_t *counts;     /* [layers * experts], row-major by layer */
    int has_cache;              /* 1: the model runs on an expert cache */
    struct tx_telemetry_cache cache;
};

/*
 * Visit every live published model (in PID order). The model and its
 * arrays are valid only during the callback. A callback returning non-zero
 * stops the scan. Objects of dead processes (or of a process whose PID was
 * reused) are removed when the caller may; objects with another layout
 * version, a bad header or a size that does not match are skipped
 * (*skipped counts them, may be NULL). A publisher that is writing while the
 * reader copies is retried a few times, then skipped for this scan (the
 * reader never waits for it). Returns the number of models visited or a
 * negative TX_E* code (the directory cannot be read).
 */
typedef int (*tx_telemetry_scan_cb)(const struct tx_telemetry_model *m, void *arg);
TX_API int tx_telemetry_scan(tx_telemetry_scan_cb cb, void *arg, unsigned *skipped);

/*
 * Expert utilisation statistics, as glm_model_expert_stats() defines them:
 * for one layer, util(e) = count(e) / mean count of the layer (1 = the
 * uniform share) and util_std is the population standard deviation of util
 * over the experts, in percent. Layers without selections are left out.
 */
struct tx_telemetry_stats {
    uint32_t moe_layers;   /* layers with data and at least one selection */
    uint64_t total;        /* selections over all layers */
    double overall_std;    /* util std over every (layer, expert) pair, percent */
    double mean_layer_std; /* mean of the per-layer util std, percent */
    double max_layer_std;  /* the most imbalanced layer's util std, percent */
    int32_t max_layer;     /* that layer's index, -1 if none */
    double max_share;      /* hottest expert's share of its layer's calls, percent */
    double min_share;      /* coldest expert's share of its layer's calls, percent */
};

/* util std (percent) of n counts; 0 when n == 0 or all counts are zero. */
TX_API double tx_telemetry_util_std(const uint64_t *counts, uint32_t n);

TX_API int tx_telemetry_model_stats(const struct tx_telemetry_model *m,
                                    struct tx_telemetry_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* TX_TELEMETRY_H */
