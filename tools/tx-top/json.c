/* SPDX-License-Identifier: MIT */
/*
 * tx-top: the JSON snapshot (--json) and the device list (-L).
 * Numbers are JSON numbers in base units (bytes, percent, seconds) with the
 * unit in a separate key; a figure tx-top cannot read is null. Schema in
 * docs/tx-top.md.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "txtop.h"

/* A number with a fixed count of decimals: printed as such (json-c would
 * print 0.3 as 0.29999999999999999). NULL (JSON null) for NaN. */
static json_object *jdec(double v, int decimals)
{
    char buf[64];
    size_t n;

    if (isnan(v) || isinf(v))
        return NULL;
    snprintf(buf, sizeof(buf), "%.*f", decimals, v);
    /* trim trailing zeros, keep one decimal: 12.50 -> 12.5, 3.00 -> 3.0 */
    n = strlen(buf);
    if (strchr(buf, '.'))
        while (n > 2 && buf[n - 1] == '0' && buf[n - 2] != '.')
            buf[--n] = 0;
    if (!strcmp(buf, "-0.0"))
        snprintf(buf, sizeof(buf), "0.0");
    return json_object_new_double_s(strtod(buf, NULL), buf);
}

/* Percentages with two decimals. */
static json_object *jpct(double v)
{
    return jdec(v, 2);
}

static json_object *ju64(uint64_t v)
{
    return json_object_new_uint64(v);
}

static json_object *jstr_or_null(const char *s)
{
    return s && *s ? json_object_new_string(s) : NULL;
}

static void add(json_object *o, const char *k, json_object *v)
{
    json_object_object_add(o, k, v);
}

static json_object *jcounter(const struct tt_dev *d, unsigned bit, uint64_t v)
{
    return (d->has & bit) ? ju64(v) : NULL;
}

static json_object *device_json(const struct tt_state *s, size_t i)
{
    const struct tt_dev *d = &s->devs[i];
    json_object *o = json_object_new_object(), *mem, *cores = NULL, *labels, *procs;
    bool emu = !strcmp(d->backend, "emu");

    add(o, "index", json_object_new_int((int)i));
    add(o, "backend", json_object_new_string(d->backend));
    add(o, "spec", json_object_new_string(d->spec));
    add(o, "name", jstr_or_null(d->name));
    add(o, "node", emu ? NULL : jstr_or_null(d->node));
    add(o, "pci_address", emu ? NULL : jstr_or_null(d->pci));
    add(o, "socket", emu ? jstr_or_null(d->socket) : NULL);
    add(o, "interface_version_major",
        d->has_if ? json_object_new_int((int)TX8_IF_MAJOR(d->if_version)) : NULL);
    add(o, "interface_version_minor",
        d->has_if ? json_object_new_int((int)TX8_IF_MINOR(d->if_version)) : NULL);
    add(o, "cores", d->has_cores ? json_object_new_int((int)d->cores) : NULL);
    add(o, "status", json_object_new_string(d->ok ? "ok" : "unavailable"));
    add(o, "error", d->ok ? NULL : jstr_or_null(d->error[0] ? d->error : "not sampled"));
    add(o, "state", jstr_or_null(d->state));
    add(o, "utilization", jpct(d->util));
    add(o, "utilization_unit", json_object_new_string("%"));
    if (d->ncores) {
        cores = json_object_new_array();
        for (unsigned c = 0; c < d->ncores; c++)
            json_object_array_add(cores, jpct(d->core_util[c]));
    }
    add(o, "core_utilization", cores);

    mem = json_object_new_object();
    add(mem, "unit", json_object_new_string("B"));
    add(mem, "total", d->has_mem ? ju64(d->mem_total) : NULL);
    add(mem, "used", d->has_mem ? ju64(d->mem_used) : NULL);
    add(mem, "free",
        d->has_mem ? ju64(d->mem_total > d->mem_used ? d->mem_total - d->mem_used : 0) : NULL);
    add(mem, "used_percent",
        d->has_mem && d->mem_total ? jpct(100.0 * (double)d->mem_used / (double)d->mem_total)
                                   : NULL);
    add(mem, "unattributed", !emu && s->unreadable && d->ok ? ju64(d->unattributed) : NULL);
    labels = json_object_new_array();
    for (size_t l = 0; l < d->nlabels; l++) {
        json_object *lo = json_object_new_object();

        add(lo, "label", json_object_new_string(d->labels[l].name));
        add(lo, "size", ju64(d->labels[l].bytes));
        add(lo, "unit", json_object_new_string("B"));
        json_object_array_add(labels, lo);
    }
    add(mem, "labels", labels);
    add(o, "memory", mem);

    /* the device's power model (interface >= 1.8; null before) */
    add(o, "power_draw_w", d->ok && d->has_power ? jdec(d->power_w, 3) : NULL);
    add(o, "power_average_w", d->ok && d->has_power ? jdec(d->power_avg_w, 3) : NULL);
    add(o, "power_limit_w",
        d->ok && d->has_power && d->power_cap_w > 0 ? jdec(d->power_cap_w, 3) : NULL);
    add(o, "energy_j", d->ok && d->has_power ? jdec(d->energy_j, 6) : NULL);

    add(o, "jobs", jcounter(d, TT_HAS_JOBS, d->jobs));
    add(o, "jobs_per_second", d->ok ? jdec(d->jobs_rate, 1) : NULL);
    add(o, "jobs_failed", jcounter(d, TT_HAS_FAILED, d->jobs_failed));
    add(o, "resets", jcounter(d, TT_HAS_RESETS, d->resets));
    add(o, "timeouts", jcounter(d, TT_HAS_TIMEOUTS, d->timeouts));
    add(o, "address_faults", jcounter(d, TT_HAS_ADDR_FAULTS, d->addr_faults));
    add(o, "page_faults", jcounter(d, TT_HAS_PAGE_FAULTS, d->page_faults));
    add(o, "cache_misses", jcounter(d, TT_HAS_CACHE_MISSES, d->cache_misses));

    procs = json_object_new_array();
    for (size_t k = 0; k < s->nproc; k++) {
        const struct tt_proc *p = &s->procs[k];
        json_object *po;

        if (p->dev != (int)i)
            continue;
        po = json_object_new_object();
        add(po, "pid", p->pid > 0 ? json_object_new_int(p->pid) : NULL);
        add(po, "user", jstr_or_null(p->user));
        add(po, "command", jstr_or_null(p->command));
        add(po, "peer", p->peer >= 0 ? json_object_new_int(p->peer) : NULL);
        add(po, "clients", p->unreadable ? NULL : json_object_new_int(p->clients));
        add(po, "readable", json_object_new_boolean(!p->unreadable));
        add(po, "utilization", jpct(p->util));
        add(po, "utilization_unit", json_object_new_string("%"));
        add(po, "device_memory", p->has_vram ? ju64(p->vram) : NULL);
        add(po, "host_memory", p->has_rss ? ju64(p->rss) : NULL);
        add(po, "memory_unit", json_object_new_string("B"));
        {
            json_object *pl = json_object_new_array();

            for (size_t l = 0; l < p->nlabels; l++) {
                json_object *lo = json_object_new_object();

                add(lo, "label", json_object_new_string(p->labels[l].name));
                add(lo, "size", ju64(p->labels[l].bytes));
                json_object_array_add(pl, lo);
            }
            add(po, "memory_labels", pl);
        }
        json_object_array_add(procs, po);
    }
    add(o, "processes", procs);
    return o;
}

static json_object *model_json(const struct tt_state *s, const struct tt_model *m)
{
    json_object *o = json_object_new_object(), *load, *lstd, *hot;
    double age = m->updated_ns ? s->wall - (double)m->updated_ns / 1e9 : NAN;

    add(o, "pid", json_object_new_int(m->pid));
    add(o, "model", json_object_new_string(m->model));
    add(o, "device", jstr_or_null(m->device));
    add(o, "device_index", m->dev >= 0 ? json_object_new_int(m->dev) : NULL);
    add(o, "command", jstr_or_null(m->command));
    add(o, "layers", json_object_new_int((int)m->layers));
    add(o, "experts", json_object_new_int((int)m->experts));
    add(o, "moe_layers", json_object_new_int((int)m->st.moe_layers));
    add(o, "updates", ju64(m->updates));
    add(o, "updated", m->updated_ns ? jdec((double)m->updated_ns / 1e9, 3) : NULL);
    add(o, "age", isnan(age) ? NULL : jdec(age < 0 ? 0 : age, 3));
    add(o, "time_unit", json_object_new_string("s"));
    add(o, "selections", ju64(m->st.total));
    add(o, "expert_util_std", m->st.moe_layers ? jpct(m->st.overall_std) : NULL);
    add(o, "mean_layer_util_std", m->st.moe_layers ? jpct(m->st.mean_layer_std) : NULL);
    add(o, "max_layer_util_std", m->st.moe_layers ? jpct(m->st.max_layer_std) : NULL);
    add(o, "max_layer", m->st.max_layer >= 0 ? json_object_new_int(m->st.max_layer) : NULL);
    add(o, "max_expert_share", m->st.moe_layers ? jpct(m->st.max_share) : NULL);
    add(o, "min_expert_share", m->st.moe_layers ? jpct(m->st.min_share) : NULL);
    add(o, "percent_unit", json_object_new_string("%"));
    if (m->has_cache) {
        struct json_object *xc = json_object_new_object();
        uint64_t uses = m->cache.hits + m->cache.misses;
        add(xc, "slots", ju64(m->cache.slots));
        add(xc, "experts", ju64(m->cache.experts));
        add(xc, "hits", ju64(m->cache.hits));
        add(xc, "misses", ju64(m->cache.misses));
        add(xc, "hit_rate", uses ? jpct(100.0 * (double)m->cache.hits / (double)uses) : NULL);
        add(xc, "prefetches", ju64(m->cache.prefetches));
        add(xc, "prefetch_useful", ju64(m->cache.prefetch_useful));
        add(xc, "bytes_read", ju64(m->cache.bytes_read));
        add(o, "expert_cache", xc);
    } else {
        add(o, "expert_cache", NULL);
    }
    load = json_object_new_array();
    hot = json_object_new_array();
    for (uint32_t e = 0; e < m->experts && m->agg; e++) {
        json_object_array_add(load, ju64(m->agg[e]));
        json_object_array_add(hot, ju64(m->hot[e]));
    }
    add(o, "expert_load", load);
    add(o, "max_layer_expert_load", hot);
    lstd = json_object_new_array();
    for (uint32_t l = 0; l < m->layers && m->layer_std; l++)
        json_object_array_add(lstd, jpct(m->layer_std[l]));
    add(o, "layer_util_std", lstd);
    return o;
}

char *tt_json(const struct tt_state *s, bool one_line)
{
    json_object *root = json_object_new_object(), *devs, *models;
    char *out;

    if (!root)
        return NULL;
    add(root, "schema", json_object_new_string("tx-top/1"));
    add(root, "timestamp", jdec(s->wall, 3));
    add(root, "interval", jdec(s->interval, 1));
    add(root, "time_unit", json_object_new_string("s"));
    devs = json_object_new_array();
    for (size_t i = 0; i < s->ndev; i++)
        json_object_array_add(devs, device_json(s, i));
    add(root, "devices", devs);
    add(root, "processes_unreadable", json_object_new_int((int)s->unreadable));
    models = json_object_new_array();
    for (size_t i = 0; i < s->nmodels; i++)
        json_object_array_add(models, model_json(s, &s->models[i]));
    add(root, "models", models);
    add(root, "models_skipped", json_object_new_int((int)s->models_skipped));
    out = strdup(json_object_to_json_string_ext(
        root, JSON_C_TO_STRING_NOSLASHESCAPE |
                  (one_line ? JSON_C_TO_STRING_PLAIN
                            : JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED)));
    json_object_put(root);
    return out;
}

void tt_list(const struct tt_state *s)
{
    for (size_t i = 0; i < s->ndev; i++) {
        const struct tt_dev *d = &s->devs[i];
        char mem[32], ver[16];
        bool emu = !strcmp(d->backend, "emu");

        printf("Device %zu: %s (%s%s%s", i, d->name[0] ? d->name : "TX8", emu ? d->spec : d->node,
               emu || !d->pci[0] ? "" : ", PCI ", emu ? "" : d->pci);
        if (d->has_cores)
            printf(", %u cores", d->cores);
        if (d->has_mem)
            printf(", %s", tt_bytes(d->mem_total, mem, sizeof(mem)));
        if (d->has_if)
            printf(", interface %s", tt_ifver(d->if_version, ver, sizeof(ver)));
        printf(")");
        if (!d->ok)
            printf(" unavailable: %s", d->error[0] ? d->error : "not sampled");
        printf("\n");
    }
}
