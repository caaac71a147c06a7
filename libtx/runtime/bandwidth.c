/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: the streaming-read bandwidth of device memory as the
 * device's cores see it (glm-inference --bench's "% of BW" reference).
 *
 * The working set is at least TX_LLC_FACTOR x the host's last-level cache
 * (libtx/include/tx-internal/tx_cpu_cache.h: sysfs, or TX_LLC_BYTES), so the figure is
 * memory bandwidth, not cache bandwidth: the model's weights when they are
 * that large, else a scratch buffer of device memory of that size. When
 * neither is possible (the LLC size is unknown, the device has no room for
 * the scratch buffer) no figure is measured and the reason is reported.
 */
#include "runtime/rt_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <tx-internal/tx_cpu_cache.h>

#define MIB_F (1024.0 * 1024.0)
#define BW_MAX_THREADS 64

struct bw_arg {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
};

static void *bw_thread(void *a)
{
    struct bw_arg *b = a;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= b->n; i += 4) {
        s0 += b->p[i];
        s1 += b->p[i + 1];
        s2 += b->p[i + 2];
        s3 += b->p[i + 3];
    }
    for (; i < b->n; i++)
        s0 += b->p[i];
    b->sum = s0 + s1 + s2 + s3;
    return NULL;
}

/* best of reps: threads threads each sum their share of buf */
static double stream(const void *buf, uint64_t bytes, int threads, int reps)
{
    size_t words = (size_t)(bytes / 8);
    pthread_t th[BW_MAX_THREADS];
    struct bw_arg args[BW_MAX_THREADS];
    double best = 0;
    volatile uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = rt_now_ms();
        size_t per = words / (size_t)threads;
        int created[BW_MAX_THREADS] = {0};
        for (int i = 0; i < threads; i++) {
            args[i].p = (const uint64_t *)buf + (size_t)i * per;
            args[i].n = i == threads - 1 ? words - (size_t)i * per : per;
            args[i].sum = 0;
            if (i > 0)
                created[i] = !pthread_create(&th[i], NULL, bw_thread, &args[i]);
        }
        bw_thread(&args[0]);
        for (int i = 1; i < threads; i++) {
            if (created[i])
                pthread_join(th[i], NULL);
            else
                bw_thread(&args[i]);
        }
        double ms = rt_now_ms() - t0;
        for (int i = 0; i < threads; i++)
            sink += args[i].sum;
        double g = ms > 0 ? (double)bytes / (ms / 1e3) / 1e9 : 0;
        if (g > best)
            best = g;
    }
    (void)sink;
    return best;
}

/* bytes: at least this many (0: all the weights when they are large
 * enough, else 4 x LLC) */
static int probe(glm_model_t *m, int threads, uint64_t bytes, int reps,
                 struct glm_read_bandwidth *out)
{
    memset(out, 0, sizeof(*out));
    if (threads <= 0)
        threads = m->dinfo.num_cores ? (int)m->dinfo.num_cores : 1;
    if (threads > BW_MAX_THREADS)
        threads = BW_MAX_THREADS;
    if (reps <= 0)
        reps = 3;
    out->threads = threads;

    struct tx_llc llc;
    int rc = tx_llc_resolve(NULL, NULL, &llc, NULL);
    if (rc) {
        snprintf(out->refused, sizeof(out->refused),
                 "host last-level cache size unknown (%.250s); set " TX_LLC_ENV " to its size",
                 llc.error);
        return TX_OK;
    }
    out->llc_bytes = llc.bytes;
    out->llc_level = llc.level;
    out->llc_instances = llc.instances;
    snprintf(out->llc_source, sizeof(out->llc_source), "%.31s", llc.source);
    uint64_t min = tx_llc_min_working_set(&llc);
    out->min_working_set = min;
    uint64_t need = bytes > min ? bytes : min;
    need = (need + 63) & ~(uint64_t)63;

    /* the weights, when they are large enough */
    uint64_t wbytes = m->w_size & ~(uint64_t)63;
    if (m->w_map && wbytes >= need) {
        uint64_t ws = bytes ? need : wbytes;
        out->working_set = ws;
        out->gbs = stream(m->w_map, ws, threads, reps);
        return TX_OK;
    }

    /* else a scratch buffer of device memory */
    tx_bo_t *bo = NULL;
    void *p = NULL;
    rc = tx_bo_alloc(m->dev, need, 0, "bandwidth_probe", &bo);
    if (rc == TX_ENOSPC || rc == TX_ENOMEM) {
        struct tx_device_info di;
        double free_mib = 0, total_mib = 0;
        if (tx_device_info(m->dev, &di) == TX_OK) {
            free_mib =
                (double)(di.heap_size > di.mem_used ? di.heap_size - di.mem_used : 0) / MIB_F;
            total_mib = (double)di.mem_size / MIB_F;
        }
        snprintf(out->refused, sizeof(out->refused),
                 "device memory too small for the read probe: it needs %.1f MiB (%u x the "
                 "host's %.1f MiB last-level cache; the weights are %.1f MiB), the device has "
                 "%.1f MiB free of %.1f MiB; give the device more memory (tx8-emu --memory)",
                 (double)need / MIB_F, TX_LLC_FACTOR, (double)llc.bytes / MIB_F,
                 (double)m->w_size / MIB_F, free_mib, total_mib);
        return TX_OK;
    }
    if (rc)
        return rc;
    rc = tx_bo_map(bo, &p);
    if (rc) {
        tx_bo_free(bo);
        return rc;
    }
    /* written once: every page present and not the shared zero page */
    memset(p, 0x5a, need);
    out->scratch = 1;
    out->working_set = need;
    out->gbs = stream(p, need, threads, reps);
    tx_bo_free(bo);
    return TX_OK;
}

TX_API int glm_probe_read_bandwidth(glm_model_t *m, int threads, int reps,
                                    struct glm_read_bandwidth *out)
{
    if (!m || !out)
        return tx_error(TX_EINVAL, "glm_probe_read_bandwidth: NULL argument");
    return probe(m, threads, 0, reps, out);
}

TX_API int glm_measure_read_bandwidth(glm_model_t *m, int threads, uint64_t bytes, int reps,
                                      double *gbs)
{
    if (!m || !gbs)
        return tx_error(TX_EINVAL, "glm_measure_read_bandwidth: NULL argument");
    struct glm_read_bandwidth r;
    int rc = probe(m, threads, bytes, reps, &r);
    if (rc)
        return rc;
    if (r.refused[0])
        return tx_error(TX_ENOTSUP, "glm_measure_read_bandwidth: %s", r.refused);
    *gbs = r.gbs;
    return TX_OK;
}
