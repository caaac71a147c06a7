/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: publishing a loaded model's expert load through the libtx
 * telemetry channel (tx/tx_telemetry.h), so that monitors such as tx-top
 * show which model a process runs and how its router spreads tokens.
 *
 * The publisher is opened when a model has loaded (name, the device string
 * the process opened, all decoder layers, the routed experts) and closed
 * when the model is freed. Telemetry is optional: when the object cannot be
 * created (no /dev/shm, a read-only $TX_TELEMETRY_DIR, a model without
 * routed experts) the model works as before and TX_DEBUG says why.
 *
 * What is published are the device's cumulative per-(MoE layer, expert)
 * selection counters, the same figures glm_model_expert_stats() reads: after
 * forward passes at most every RT_TELEMETRY_PERIOD_MS, and always at the end
 * of glm_generate() and after glm_model_expert_stats_reset().
 */
#include "runtime/rt_internal.h"
#include "runtime/weight_store.h"

#include <stdio.h>
#include <string.h>

void rt_telemetry_open(glm_model_t *m)
{
    char device[TX_TELEMETRY_DEVICE_LEN];
    int E = m->cfg.n_routed_experts, L = rt_layers(m); /* with the MTP layer, when loaded */

    if (!m->n_moe_layers || E <= 0 || L <= 0) {
        rt_debug("telemetry: %s has no MoE layers, nothing to publish", m->name);
        return;
    }
    /* the string tx_device_open() accepts for this device, which monitors
     * match against their own devices */
    const char *pre = !strcmp(m->dinfo.backend, "emu") ? "emu:" : "";
    if (strlen(pre) + strnlen(m->dinfo.path, sizeof(m->dinfo.path)) >= sizeof(device)) {
        rt_debug("telemetry: the device path is too long to publish");
        return;
    }
    snprintf(device, sizeof(device), "%s%.*s", pre, (int)(sizeof(device) - 1 - strlen(pre)),
             m->dinfo.path);
    int rc = tx_telemetry_open_publisher(m->name, device, (uint32_t)L, (uint32_t)E, &m->telem);
    if (rc) {
        rt_debug("telemetry: not published (%s): %s", tx_strerror(rc), tx_last_error());
        m->telem = NULL;
        return;
    }
    rt_debug("telemetry: %s on %s published as %s", m->name, device, tx_telemetry_path(m->telem));
    m->telem_last_ms = 0;
    rt_telemetry_publish(m, 1); /* the counters are zero: every MoE layer has data */
}

/* Model lock held. */
void rt_telemetry_publish(glm_model_t *m, int force)
{
    int E = m->cfg.n_routed_experts;

    if (!m->telem || !m->meta_map)
        return;
    double now = rt_now_ms();
    if (!force && m->telem_last_ms > 0 && now - m->telem_last_ms < RT_TELEMETRY_PERIOD_MS) {
        m->telem_dirty = 1;
        return;
    }
    const uint64_t *cnt = (const uint64_t *)((const uint8_t *)m->meta_map + m->counts_off);
    for (int i = 0; i < m->n_moe_layers; i++) {
        int rc = tx_telemetry_update_experts(m->telem, (uint32_t)m->moe_layer[i],
                                             cnt + (size_t)i * (size_t)E, (uint32_t)E);
        if (rc) {
            rt_debug("telemetry: update of layer %d failed, publishing stopped: %s",
                     m->moe_layer[i], tx_last_error());
            tx_telemetry_close(m->telem);
            m->telem = NULL;
            return;
        }
    }
    struct tx_telemetry_cache tc;
    if (m->store->telemetry(m, &tc))
        tx_telemetry_update_cache(m->telem, &tc);
    m->telem_last_ms = now;
    m->telem_dirty = 0;
}

void rt_telemetry_close(glm_model_t *m)
{
    if (m->telem)
        tx_telemetry_close(m->telem);
    m->telem = NULL;
}
