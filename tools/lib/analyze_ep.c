/* SPDX-License-Identifier: MIT */
/*
 * glm-analyze --devices N (docs/multi-device.md): the placement libtx's
 * expert parallelism makes for N devices of --device-memory each -- device
 * 0 holds everything but the routed experts, the expert_parallel groups go
 * by libtx's own rule (libtx/include/tx-internal/tx_ep_place.h: equal memory utilisation,
 * device 0's resident part and KV cache included) -- with golden-plan
 * bytes, and the dispatch bytes per generated token under uniform routing:
 * each of the top_k pairs of a row and MoE layer goes to the device owning
 * its expert, 4 + 4 * hidden bytes in (id and f32 row), 4 * hidden bytes
 * out.
 */
#include "common/analyze_ep.h"

#include <tx-internal/tx_errors.h>
#include <tx-internal/tx_ep_place.h>

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx8/tx8_hw.h>

struct ep_acc {
    const struct glm_config *c;
    double *ebytes; /* [L][E] golden bytes */
    uint64_t other;
};

static uint64_t golden_bytes(const struct glm_tensor_info *t)
{
    uint64_t n = (uint64_t)t->shape[0] * (t->ndim == 2 ? (uint64_t)t->shape[1] : 1);
    if (t->ndim != 2 || t->cls == GLM_TC_ROUTER || t->cls == GLM_TC_NORM)
        return n * 4;
    switch (t->cls) {
    case GLM_TC_EMBEDDING:
    case GLM_TC_MLP:
    case GLM_TC_EXPERT:
        return n + (uint64_t)t->shape[0] * 4; /* INT8, per-row scales */
    case GLM_TC_ATTENTION:
        return n * 2;
    default:
        return n * 4;
    }
}

static int ep_cb(void *ctx, const struct glm_tensor_info *t)
{
    struct ep_acc *x = ctx;
    uint64_t b = golden_bytes(t);
    if (t->expert >= 0 && t->ndim == 2 && t->layer >= 0)
        x->ebytes[(size_t)t->layer * x->c->n_routed_experts + t->expert] += (double)b;
    else
        x->other += b;
    return 0;
}

int tx_analyze_ep(const struct tx_analysis *a, const struct glm_config *c, int devices, int groups,
                  struct tx_ep_plan *p, char *err, size_t errsz)
{
    memset(p, 0, sizeof(*p));
    int E = c->n_routed_experts, L = c->num_hidden_layers;
    if (devices < 1 || devices > TX_EP_PLAN_MAX)
        return tx_errbuf(err, errsz, TX_EINVAL, "--devices %d: 1..%d", devices, TX_EP_PLAN_MAX);
    if (E < 1)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "--devices: the model has no routed experts to place on several devices");
    int G = groups ? groups : E;
    if (G < 1 || E % G)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "--ep-groups %d does not divide the model's %d routed experts", G, E);
    if (G < devices)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%d devices but %d expert groups per MoE layer: every device needs at "
                         "least one group",
                         devices, G);
    struct ep_acc x = {c, calloc((size_t)L * (size_t)E, sizeof(double)), 0};
    uint64_t *xb = calloc((size_t)L * (size_t)E + 1, sizeof(uint64_t));
    int16_t *own = calloc((size_t)L * (size_t)E + 1, sizeof(int16_t));
    if (!x.ebytes || !xb || !own) {
        free(x.ebytes);
        free(xb);
        free(own);
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    }
    int rc = glm_config_tensor_list(c, ep_cb, &x);
    if (rc < 0) {
        free(x.ebytes);
        free(xb);
        free(own);
        return tx_errbuf(err, errsz, rc, "cannot list the tensors of the config");
    }
    p->devices = devices;
    p->groups = G;
    p->experts = E;
    p->top_k = c->num_experts_per_tok;
    p->hidden = c->hidden_size;
    p->device_memory = a->device_memory;
    p->resident_bytes = x.other;
    p->kv_bytes = a->kv_bytes_per_token * (uint64_t)a->ctx_len;
    /* the MoE layers' experts, in order (layers without experts skipped) */
    for (int l = 0; l < L; l++) {
        double lb = 0;
        for (int e = 0; e < E; e++)
            lb += x.ebytes[(size_t)l * E + e];
        if (lb <= 0)
            continue;
        for (int e = 0; e < E; e++)
            xb[(size_t)p->n_moe * E + e] = (uint64_t)x.ebytes[(size_t)l * E + e];
        p->n_moe++;
    }
    /* libtx's rule (libtx/include/tx-internal/tx_ep_place.h): equal utilisation of every
     * device's memory, device 0's resident part and KV cache included */
    uint64_t usable = a->device_memory > TX8_CTRL_SIZE ? a->device_memory - TX8_CTRL_SIZE : 0;
    uint64_t size[TX_EP_PLAN_MAX], res[TX_EP_PLAN_MAX], room[TX_EP_PLAN_MAX];
    for (int d = 0; d < devices; d++) {
        size[d] = usable;
        res[d] = d == 0 ? p->resident_bytes + p->kv_bytes : 0;
        room[d] = usable > res[d] ? usable - res[d] : 0;
    }
    struct ep_place_in in = {.n = devices,
                             .E = E,
                             .G = G,
                             .nm = p->n_moe,
                             .bytes = xb,
                             .size = size,
                             .resident = res,
                             .room = room};
    rc = ep_place(&in, own, p->expert_bytes, p->experts_on, p->note, sizeof(p->note));
    if (rc == TX_ENOSPC) { /* does not fit: the same rule without the rooms, marked */
        in.room = NULL;
        rc = ep_place(&in, own, p->expert_bytes, p->experts_on, err, errsz);
    } else {
        p->note[0] = 0;
    }
    if (rc) {
        free(x.ebytes);
        free(xb);
        free(own);
        return tx_errbuf(err, errsz, rc, "placement: out of memory");
    }
    for (int d = 0; d < devices; d++)
        p->expert_bytes_total += p->expert_bytes[d];
    double per_pair_in = 4.0 + 4.0 * c->hidden_size, per_pair_out = 4.0 * c->hidden_size;
    for (int d = 0; d < devices; d++) {
        p->memory[d] = p->expert_bytes[d] + res[d];
        p->fits[d] = p->memory[d] <= usable;
        double share = p->n_moe ? (double)p->experts_on[d] / ((double)p->n_moe * E) : 0;
        double pairs = (double)p->n_moe * p->top_k * share;
        p->dispatch_in[d] = pairs * per_pair_in;
        p->dispatch_out[d] = pairs * per_pair_out;
        if (d)
            p->remote_bytes_per_token += p->dispatch_in[d] + p->dispatch_out[d];
    }
    free(x.ebytes);
    free(xb);
    free(own);
    return 0;
}

char *tx_ep_plan_json(const struct tx_ep_plan *p)
{
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "devices", json_object_new_int(p->devices));
    json_object_object_add(o, "expert_groups", json_object_new_int(p->groups));
    json_object_object_add(o, "moe_layers", json_object_new_int(p->n_moe));
    json_object_object_add(o, "device0_resident_bytes",
                           json_object_new_int64((int64_t)p->resident_bytes));
    json_object_object_add(o, "device0_kv_bytes", json_object_new_int64((int64_t)p->kv_bytes));
    json_object_object_add(o, "routed_expert_bytes",
                           json_object_new_int64((int64_t)p->expert_bytes_total));
    json_object_object_add(o, "placement_error",
                           p->note[0] ? json_object_new_string(p->note) : NULL);
    json_object_object_add(o, "remote_dispatch_bytes_per_token",
                           json_object_new_double(p->remote_bytes_per_token));
    struct json_object *arr = json_object_new_array();
    for (int d = 0; d < p->devices; d++) {
        struct json_object *e = json_object_new_object();
        json_object_object_add(e, "device", json_object_new_int(d));
        json_object_object_add(e, "experts", json_object_new_int((int)p->experts_on[d]));
        json_object_object_add(e, "expert_bytes",
                               json_object_new_int64((int64_t)p->expert_bytes[d]));
        json_object_object_add(e, "memory_bytes", json_object_new_int64((int64_t)p->memory[d]));
        json_object_object_add(e, "fits", json_object_new_boolean(p->fits[d]));
        json_object_object_add(e, "dispatch_in_bytes_per_token",
                               json_object_new_double(p->dispatch_in[d]));
        json_object_object_add(e, "dispatch_out_bytes_per_token",
                               json_object_new_double(p->dispatch_out[d]));
        json_object_array_add(arr, e);
    }
    json_object_object_add(o, "per_device", arr);
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    char *out = s ? strdup(s) : NULL;
    json_object_put(o);
    return out;
}

char *tx_ep_plan_summary(const struct tx_ep_plan *p)
{
    size_t cap = 1024 + sizeof(p->note) + (size_t)p->devices * 200;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t n = (size_t)snprintf(
        s, cap,
        "expert parallel on %d devices (%d groups per MoE layer, %d MoE "
        "layers): device 0 holds %.1f MiB besides its experts (+ %.1f MiB "
        "KV cache); %.1f KiB per generated token to and from devices 1..%d\n",
        p->devices, p->groups, p->n_moe, p->resident_bytes / 1048576.0, p->kv_bytes / 1048576.0,
        p->remote_bytes_per_token / 1024.0, p->devices - 1);
    for (int d = 0; d < p->devices && n < cap; d++)
        n += (size_t)snprintf(s + n, cap - n,
                              "  device %d: %u experts, %.1f MiB, %.1f MiB in all (%s); dispatch "
                              "%.1f KiB in + %.1f KiB out per token\n",
                              d, p->experts_on[d], p->expert_bytes[d] / 1048576.0,
                              p->memory[d] / 1048576.0, p->fits[d] ? "fits" : "does NOT fit",
                              p->dispatch_in[d] / 1024.0, p->dispatch_out[d] / 1024.0);
    if (p->note[0] && n < cap)
        snprintf(s + n, cap - n, "  does not fit: %s\n", p->note);
    return s;
}
