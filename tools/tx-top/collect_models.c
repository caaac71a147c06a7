/* SPDX-License-Identifier: MIT */
/* tx-top: models from libtx's telemetry channel, matched with devices. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uapi/drm/tx8_accel.h>

#include "txtop.h"
#include "collect.h"

static int dev_matches(const struct tt_dev *d, const char *name)
{
    if (!*name)
        return 0;
    if (!strcmp(name, d->spec))
        return 1;
    if (!strcmp(d->backend, "emu"))
        return !strcmp(name, d->socket) ||
               (!strncmp(name, "emu:", 4) && !strcmp(name + 4, d->socket));
    if (!strncmp(name, "accel:", 6))
        name += 6;
    if (!strncmp(name, "/dev/accel/", 11))
        name += 11;
    return !strcmp(name, d->node);
}

int tt_collect_model(const struct tx_telemetry_model *m, void *arg)
{
    struct tt_state *s = arg;
    struct tt_model *mm, *nm;
    uint64_t rss;
    bool has_rss;
    char user[32];

    nm = realloc(s->models, (s->nmodels + 1) * sizeof(*nm));
    if (!nm)
        return 1;
    s->models = nm;
    mm = &s->models[s->nmodels];
    memset(mm, 0, sizeof(*mm));
    mm->pid = m->pid;
    snprintf(mm->model, sizeof(mm->model), "%s", m->model);
    snprintf(mm->device, sizeof(mm->device), "%s", m->device);
    mm->layers = m->layers;
    mm->experts = m->experts;
    mm->updated_ns = m->updated_ns;
    mm->updates = m->updates;
    mm->has_cache = m->has_cache;
    mm->cache = m->cache;
    mm->dev = -1;
    for (size_t i = 0; i < s->ndev; i++)
        if (dev_matches(&s->devs[i], m->device)) {
            mm->dev = (int)i;
            break;
        }
    if (tx_telemetry_model_stats(m, &mm->st) < 0)
        return 0;
    mm->agg = calloc(m->experts, sizeof(uint64_t));
    mm->hot = calloc(m->experts, sizeof(uint64_t));
    mm->layer_std = calloc(m->layers, sizeof(double));
    if (!mm->agg || !mm->hot || !mm->layer_std) {
        free(mm->agg);
        free(mm->hot);
        free(mm->layer_std);
        return 1;
    }
    for (uint32_t l = 0; l < m->layers; l++) {
        const uint64_t *c = m->counts + (size_t)l * m->experts;

        mm->layer_std[l] = m->layer_valid[l] ? tx_telemetry_util_std(c, m->experts) : NAN;
        if (!m->layer_valid[l])
            continue;
        for (uint32_t e = 0; e < m->experts; e++)
            mm->agg[e] += c[e];
        if ((int32_t)l == mm->st.max_layer)
            memcpy(mm->hot, c, m->experts * sizeof(uint64_t));
    }
    if (tt_proc_facts(s, m->pid, user, sizeof(user), mm->command, sizeof(mm->command), &rss,
                      &has_rss) < 0)
        mm->command[0] = 0;
    s->nmodels++;
    return 0;
}
