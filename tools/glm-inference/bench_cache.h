/* SPDX-License-Identifier: MIT */
/* glm-inference --bench-cache (bench_cache.c): the expert cache side by side
 * with the resident model and with whole-layer streaming. */
#ifndef GLM_INFERENCE_BENCH_CACHE_H
#define GLM_INFERENCE_BENCH_CACHE_H

#include <tx/tx.h>

struct bench_cache_opts {
    const char *path;  /* the package */
    double frac;       /* cache size as a fraction of the routed experts (0.25) */
    int tg;            /* timed decode steps */
    int warmup;        /* decode steps before timing (statistics, cache) */
    int prompt;        /* prompt tokens before the decode */
    const char *modes; /* NULL: all; else a list of resident,layers,lru,lrfu */
    const char *text;  /* -f FILE's text: its tokens as the inputs (NULL: random ids) */
};

/* Prints the table to stdout; 0 or 1 (error printed). */
int bench_cache_run(tx_device_t *dev, const struct bench_cache_opts *o);

#endif
