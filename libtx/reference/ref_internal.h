/* SPDX-License-Identifier: MIT */
/* Internal helpers of the FP32 reference forward (libtx/reference/). */
#ifndef TX_REF_INTERNAL_H
#define TX_REF_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

/* A tiny persistent thread pool: txref_parallel_for() splits [0, total) into
 * one contiguous range per thread (the caller's thread takes the first). */
typedef void (*txref_range_fn)(void *ctx, int64_t begin, int64_t end);

struct txref_pool {
    pthread_t *threads;
    int n_workers; /* threads besides the caller */
    pthread_mutex_t mu;
    pthread_cond_t start;
    pthread_cond_t done;
    txref_range_fn fn;
    void *ctx;
    int64_t total;
    uint64_t generation;
    int pending;
    int quit;
};

int txref_pool_create(struct txref_pool **out, int n_threads);
void txref_pool_destroy(struct txref_pool *p);
/* pool may be NULL (runs inline) */
void txref_parallel_for(struct txref_pool *p, int64_t total, txref_range_fn fn, void *ctx);

/* y[t][o] = sum_i x[t][i] * w[o][i] + (b ? b[o] : 0), t < n, o < out */
void txref_linear(struct txref_pool *p, const float *x, int64_t n, int64_t in, const float *w,
                  const float *b, int64_t out, float *y);

float txref_dot(const float *a, const float *b, int64_t n);

#endif
