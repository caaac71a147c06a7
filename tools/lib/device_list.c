/* SPDX-License-Identifier: MIT */
/*
 * The tools' device lists: one device, or one model on several devices
 * (docs/multi-device.md).
 */
#include "common/device_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx-internal/tx_analyze.h>
#include <tx/tx_error.h>

int mdev_open(const char *prog, const char *list, tx_device_t **devs, int max, int *n)
{
    *n = 0;
    if (!list)
        list = getenv("TX_DEVICE");
    if (!list || !strchr(list, ',')) {
        if (tx_device_open(list && *list ? list : NULL, &devs[0])) {
            fprintf(stderr, "%s: cannot open device %s: %s\n", prog,
                    list && *list ? list : "(default)", tx_last_error());
            return 1;
        }
        *n = 1;
        return 0;
    }
    char *copy = strdup(list);
    if (!copy) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    int rc = 0, i = 0;
    char *p = copy;
    for (;;) {
        char *c = strchr(p, ',');
        if (c)
            *c = 0;
        if (!*p) {
            fprintf(stderr, "%s: device list '%s': device %d is empty\n", prog, list, i);
            rc = 1;
            break;
        }
        if (*n == max) {
            fprintf(stderr, "%s: device list '%s': more than %d devices\n", prog, list, max);
            rc = 1;
            break;
        }
        if (tx_device_open(p, &devs[*n])) {
            fprintf(stderr, "%s: device list '%s': cannot open device %d (%s): %s\n", prog, list, i,
                    p, tx_last_error());
            rc = 1;
            break;
        }
        (*n)++;
        i++;
        if (!c)
            break;
        p = c + 1;
    }
    free(copy);
    if (rc) {
        mdev_close(devs, *n);
        *n = 0;
    }
    return rc;
}

/* GLM_CACHE_* -> the analysis' TX_KV_* (GLM_CACHE_DEFAULT: F32, the largest) */
static int kv_type_of(int cache)
{
    switch (cache) {
    case GLM_CACHE_F16:
        return TX_KV_F16;
    case GLM_CACHE_BF16:
        return TX_KV_BF16;
    case GLM_CACHE_Q8_0:
        return TX_KV_Q8_0;
    case GLM_CACHE_Q4_0:
        return TX_KV_Q4_0;
    default:
        return TX_KV_F32;
    }
}

uint64_t mdev_kv_reserve(const char *path, int sessions, int n_ctx, int cache_k, int cache_v)
{
    struct glm_config cfg;
    struct tx_analysis a;
    const char *fmt = NULL;
    char err[256];
    if (sessions < 1 || n_ctx < 0 || tx_analyze_load_config(path, &cfg, &fmt, err, sizeof(err)))
        return 0;
    if (!n_ctx) /* glm_session_create's default */
        n_ctx = cfg.max_position_embeddings > 0 && cfg.max_position_embeddings < 4096
                    ? cfg.max_position_embeddings
                    : 4096;
    if (tx_analyze_config(&cfg, 1, n_ctx, 0, &a, err, sizeof(err)))
        return 0;
    /* the larger type's bytes (a q4_0 K beside an f16 V counts f16) */
    uint64_t bk = a.kv_type_bytes_per_token[kv_type_of(cache_k)];
    uint64_t bv = a.kv_type_bytes_per_token[kv_type_of(cache_v)];
    uint64_t per = bk > bv ? bk : bv;
    if (!per) /* a block type the layout cannot take: count F32 */
        per = a.kv_type_bytes_per_token[TX_KV_F32];
    tx_analysis_free(&a);
    return per * (uint64_t)n_ctx * (uint64_t)sessions;
}

void mdev_close(tx_device_t **devs, int n)
{
    for (int i = 0; i < n; i++)
        tx_device_close(devs[i]);
}

int mdev_load(tx_device_t **devs, int n, const char *path, const struct glm_load_options *lo,
              int expert_parallel, uint64_t reserve_bytes, glm_model_t **m)
{
    if (n <= 1)
        return glm_model_load(devs[0], path, lo, m);
    struct glm_ep_options eo;
    memset(&eo, 0, sizeof(eo));
    eo.expert_parallel = expert_parallel;
    eo.reserve_bytes = reserve_bytes;
    return glm_model_load_ep(devs, n, path, lo, &eo, m);
}

void mdev_print_stats(const char *prog, glm_model_t *m)
{
    struct glm_ep_stats st;
    struct glm_ep_placement_stats ps;
    if (!m || glm_model_ep_stats(m, &st) || glm_model_ep_placement_stats(m, &ps))
        return;
    double tok = st.layers ? (double)st.tokens / (double)st.layers : 0;
    fprintf(stderr,
            "%s: expert parallel: %d devices, %d expert groups per MoE layer; %llu MoE layer "
            "passes of %.1f rows on average; per MoE layer pass: dispatch %.3f ms, wait %.3f ms, "
            "combine %.3f ms\n",
            prog, st.n_devices, st.expert_parallel, (unsigned long long)st.layers, tok,
            st.layers ? st.dispatch_ms / (double)st.layers : 0,
            st.layers ? st.wait_ms / (double)st.layers : 0,
            st.layers ? st.combine_ms / (double)st.layers : 0);
    for (int d = 0; d < st.n_devices; d++) {
        const struct glm_ep_device_stats *x = &st.dev[d];
        double per_tok = st.tokens ? 1.0 / (double)st.tokens : 0;
        fprintf(stderr,
                "%s: expert parallel: device %d (rank %d): %u experts, %.2f MiB; %llu pairs; "
                "%.0f B in + %.0f B out per row and MoE layer; compute %.3f ms per MoE layer "
                "pass\n",
                prog, d, x->rank, x->experts, (double)x->expert_bytes / 1048576.0,
                (unsigned long long)x->pairs, (double)x->bytes_in * per_tok,
                (double)x->bytes_out * per_tok, st.layers ? x->compute_ms / (double)st.layers : 0);
        fprintf(stderr,
                "%s: expert parallel: device %d memory: %.1f MiB, room for experts at load "
                "%.1f MiB, resident besides experts %.1f MiB; %llu selections (live counters)\n",
                prog, d, (double)ps.dev[d].mem_size / 1048576.0,
                (double)ps.dev[d].room_bytes / 1048576.0,
                (double)ps.dev[d].resident_bytes / 1048576.0,
                (unsigned long long)ps.dev[d].selections);
    }
    fprintf(stderr,
            "%s: expert parallel: %u rebalances, %llu experts moved, %.2f MiB moved (%.2f MiB "
            "over the transport); load imbalance (max/mean selections per device) %.3f now",
            prog, ps.rebalances, (unsigned long long)ps.experts_moved,
            (double)ps.bytes_moved / 1048576.0, (double)ps.bytes_moved_remote / 1048576.0,
            ps.imbalance);
    if (ps.rebalances)
        fprintf(stderr, ", %.3f before and %.3f after the last rebalance", ps.imbalance_before,
                ps.imbalance_after);
    fputc('\n', stderr);
}
