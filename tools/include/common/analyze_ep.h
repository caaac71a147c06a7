/* SPDX-License-Identifier: MIT */
/*
 * glm-analyze --devices N: a placement of one model on N TX8 devices by
 * expert parallelism, as libtx's glm_model_load_multi makes it
 * (docs/multi-device.md): memory per device and dispatch bytes per token.
 */
#ifndef TX_TOOLS_ANALYZE_EP_H
#define TX_TOOLS_ANALYZE_EP_H

#include <stddef.h>
#include <stdint.h>

#include <tx-internal/tx_analyze.h>

#define TX_EP_PLAN_MAX 64

struct tx_ep_plan {
    int devices, groups, n_moe, experts, top_k, hidden;
    uint64_t resident_bytes;             /* device 0: everything but the routed experts (golden) */
    uint64_t kv_bytes;                   /* device 0: KV cache of ctx_len tokens */
    uint64_t expert_bytes_total;         /* all routed experts (golden) */
    uint64_t device_memory;              /* per device, as given */
    uint32_t experts_on[TX_EP_PLAN_MAX]; /* (MoE layer, expert) pairs */
    uint64_t expert_bytes[TX_EP_PLAN_MAX]; /* per device */
    uint64_t memory[TX_EP_PLAN_MAX];       /* per device: experts (+ resident + KV on 0) */
    int fits[TX_EP_PLAN_MAX];
    /* per generated token, all MoE layers, uniform routing: the rows
     * (id + f32 hidden row) sent to each device and the f32 outputs back */
    double dispatch_in[TX_EP_PLAN_MAX], dispatch_out[TX_EP_PLAN_MAX];
    double remote_bytes_per_token; /* to and from devices 1..N-1 */
    char note[512]; /* the experts do not fit: why (placed then without the limit) */
};

/* groups 0: every expert its own group. 0, or -1 with err. */
int tx_analyze_ep(const struct tx_analysis *a, const struct glm_config *c, int devices, int groups,
                  struct tx_ep_plan *p, char *err, size_t errsz);
/* The plan as a JSON object text (malloc'd) and a summary (malloc'd). */
char *tx_ep_plan_json(const struct tx_ep_plan *p);
char *tx_ep_plan_summary(const struct tx_ep_plan *p);

#endif
