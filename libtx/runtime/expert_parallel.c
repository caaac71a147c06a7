/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: expert parallelism -- one model on several TX8 devices, in
 * one process or across processes through a caller-supplied transport
 * (include/tx/glm.h "Expert parallelism", docs/multi-device.md).
 */
#include "runtime/expert_parallel.h"

#include <stdlib.h>
#include <string.h>

TX_API int glm_ep_share(int n_total, int rank, int size, int *first, int *count)
{
    if (!first || !count)
        return tx_error(TX_EINVAL, "glm_ep_share: NULL argument");
    if (size < 1 || rank < 0 || rank >= size)
        return tx_error(TX_EINVAL, "glm_ep_share: rank %d of %d ranks", rank, size);
    if (n_total < size)
        return tx_error(TX_EINVAL,
                        "glm_ep_share: %d device(s) for %d ranks: every rank needs at least one "
                        "device of the list",
                        n_total, size);
    int a = (int)((long long)rank * n_total / size);
    int b = (int)((long long)(rank + 1) * n_total / size);
    *first = a;
    *count = b - a;
    return TX_OK;
}

TX_API int glm_model_load_ep(tx_device_t **devs, int n_local, const char *smd_path,
                             const struct glm_load_options *opt, const struct glm_ep_options *ep,
                             glm_model_t **out)
{
    (void)devs;
    (void)n_local;
    (void)smd_path;
    (void)opt;
    (void)ep;
    if (out)
        *out = NULL;
    return tx_error(TX_ENOTSUP, "glm_model_load_ep: not implemented yet");
}

TX_API int glm_model_load_multi(tx_device_t **devs, int n, const char *smd_path,
                                const struct glm_load_options *opt, glm_model_t **out)
{
    return glm_model_load_ep(devs, n, smd_path, opt, NULL, out);
}

TX_API int glm_ep_worker_run(glm_model_t *m)
{
    (void)m;
    return tx_error(TX_ENOTSUP, "glm_ep_worker_run: not implemented yet");
}

TX_API int glm_model_ep_stats(glm_model_t *m, struct glm_ep_stats *out)
{
    (void)m;
    if (out)
        memset(out, 0, sizeof(*out));
    return tx_error(TX_EINVAL, "glm_model_ep_stats: not a multi-device model");
}

TX_API int glm_model_ep_owner(const glm_model_t *m, int mi, int e)
{
    (void)m;
    (void)mi;
    (void)e;
    return -1;
}

void rt_ep_moe_ffn(struct gctx *g, int l, int mi)
{
    (void)g;
    (void)l;
    (void)mi;
}

void rt_ep_free(glm_model_t *m)
{
    (void)m;
}
