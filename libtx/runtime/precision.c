/* SPDX-License-Identifier: MIT */
/*
 * The article's precision API: per-device precision plans.
 *
 * set_layer_precision(device, cfg) takes only the device handle, so the plan
 * lives in a process-wide table keyed by the handle (handles are never
 * reused by libtx, so a closed device's entry can never be confused with a
 * new one). Models read their device's plan at the start of every forward
 * pass (rt_plan_of).
 */
#include "runtime/rt_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct plan_entry {
    tx_device_t *dev;
    glm_precision_plan_t plan;
    uint64_t generation; /* bumped at every change */
    struct plan_entry *next;
};

static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static struct plan_entry *plans;

static int check_device(tx_device_t *dev)
{
    struct tx_device_info info;
    if (!dev)
        return tx_error(TX_EINVAL, "set_layer_precision: device is NULL");
    int rc = tx_device_info(dev, &info);
    if (rc)
        return tx_error(rc, "set_layer_precision: not an open device (%s)", tx_last_error());
    return TX_OK;
}

/* Entry of dev, created with the golden plan if absent; plans_lock held. */
static struct plan_entry *entry_of(tx_device_t *dev, int create)
{
    for (struct plan_entry *e = plans; e; e = e->next)
        if (e->dev == dev)
            return e;
    if (!create)
        return NULL;
    struct plan_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->dev = dev;
    glm_plan_golden(&e->plan);
    e->generation = 1;
    e->next = plans;
    plans = e;
    return e;
}

TX_API int set_layer_precision(tx_device_t *device, glm_layer_config_t cfg)
{
    int rc = plan_check_entry(cfg.layer_type, cfg.precision);
    if (rc)
        return rc;
    rc = check_device(device);
    if (rc)
        return rc;
    pthread_mutex_lock(&plans_lock);
    struct plan_entry *e = entry_of(device, 1);
    if (e && e->plan.precision[cfg.layer_type] != cfg.precision) {
        e->plan.precision[cfg.layer_type] = cfg.precision;
        e->generation++;
    }
    pthread_mutex_unlock(&plans_lock);
    if (!e)
        return tx_error(TX_ENOMEM, "set_layer_precision: out of memory");
    rt_debug("precision: %s = %s", glm_layer_type_name(cfg.layer_type),
             glm_precision_name(cfg.precision));
    return TX_OK;
}

TX_API glm_precision_t get_layer_precision(tx_device_t *device, glm_layer_type_t type)
{
    glm_precision_plan_t p;
    if ((unsigned)type >= GLM_LAYER_TYPE_COUNT)
        return FP32;
    rt_plan_of(device, &p, NULL);
    return p.precision[type];
}

TX_API int glm_plan_set(tx_device_t *device, const glm_precision_plan_t *plan)
{
    if (!plan)
        return tx_error(TX_EINVAL, "glm_plan_set: plan is NULL");
    for (int i = 0; i < GLM_LAYER_TYPE_COUNT; i++) {
        int rc = plan_check_entry((glm_layer_type_t)i, plan->precision[i]);
        if (rc)
            return rc;
    }
    int rc = check_device(device);
    if (rc)
        return rc;
    pthread_mutex_lock(&plans_lock);
    struct plan_entry *e = entry_of(device, 1);
    if (e && memcmp(&e->plan, plan, sizeof(*plan))) {
        e->plan = *plan;
        e->generation++;
    }
    pthread_mutex_unlock(&plans_lock);
    if (!e)
        return tx_error(TX_ENOMEM, "glm_plan_set: out of memory");
    return TX_OK;
}

TX_API int glm_plan_get(tx_device_t *device, glm_precision_plan_t *plan)
{
    if (!plan)
        return tx_error(TX_EINVAL, "glm_plan_get: plan is NULL");
    rt_plan_of(device, plan, NULL);
    return TX_OK;
}

void rt_plan_of(tx_device_t *dev, glm_precision_plan_t *plan, uint64_t *generation)
{
    pthread_mutex_lock(&plans_lock);
    struct plan_entry *e = entry_of(dev, 0);
    if (e) {
        *plan = e->plan;
        if (generation)
            *generation = e->generation;
    } else {
        glm_plan_golden(plan);
        if (generation)
            *generation = 0;
    }
    pthread_mutex_unlock(&plans_lock);
}

