/* SPDX-License-Identifier: MIT */
/*
 * libtx telemetry: busy-time counters into utilisation, and DRM clients
 * deduplicated across file descriptors and processes.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "telemetry/monitor.h"

struct txm_rate_entry {
    char *key;
    uint64_t base;    /* largest value seen (the baseline) */
    uint64_t last_ns; /* time of the previous sample */
    uint64_t gen;     /* round of the last sample */
    unsigned backwards;
    double last_rate;
};

void txm_rates_init(struct txm_rates *r)
{
    memset(r, 0, sizeof(*r));
}

void txm_rates_free(struct txm_rates *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->e[i].key);
    free(r->e);
    memset(r, 0, sizeof(*r));
}

void txm_rates_begin(struct txm_rates *r)
{
    r->gen++;
}

void txm_rates_end(struct txm_rates *r)
{
    size_t k = 0;

    for (size_t i = 0; i < r->n; i++) {
        if (r->e[i].gen == r->gen)
            r->e[k++] = r->e[i];
        else
            free(r->e[i].key);
    }
    r->n = k;
}

static struct txm_rate_entry *find(struct txm_rates *r, const char *key)
{
    /* a few hundred counters at most: a linear search is cheaper than it
     * looks next to the /proc reads of the same refresh */
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->e[i].key, key))
            return &r->e[i];
    return NULL;
}

double txm_rate(struct txm_rates *r, const char *key, uint64_t value, uint64_t now_ns,
                uint64_t capacity)
{
    struct txm_rate_entry *e = find(r, key);
    double rate;

    if (capacity == 0)
        capacity = 1;
    if (!e) {
        if (r->n == r->cap) {
            size_t ncap = r->cap ? r->cap * 2 : 32;
            struct txm_rate_entry *ne = realloc(r->e, ncap * sizeof(*ne));

            if (!ne)
                return NAN;
            r->e = ne;
            r->cap = ncap;
        }
        e = &r->e[r->n];
        memset(e, 0, sizeof(*e));
        e->key = strdup(key);
        if (!e->key)
            return NAN;
        r->n++;
        e->base = value;
        e->last_ns = now_ns;
        e->gen = r->gen;
        e->last_rate = NAN;
        return NAN;
    }
    e->gen = r->gen;
    if (now_ns <= e->last_ns)
        return e->last_rate; /* sampled twice in one instant */
    if (value >= e->base) {
        rate = (double)(value - e->base) / (double)(now_ns - e->last_ns) / (double)capacity * 100.0;
        e->base = value;
        e->backwards = 0;
    } else {
        /* went backwards: stay with the larger previous value ... */
        rate = 0;
        if (++e->backwards >= TXM_REBASE_SAMPLES) {
            /* ... unless it never catches up: it was reset */
            e->base = value;
            e->backwards = 0;
        }
    }
    if (rate > 100.0)
        rate = 100.0;
    e->last_ns = now_ns;
    e->last_rate = rate;
    return rate;
}

/* ------------------------------------------------------------------------ */
/* Clients                                                                   */
/* ------------------------------------------------------------------------ */

static int same_client(const struct txm_client *c, const struct txm_fd_sample *s)
{
    const struct txm_fdinfo *f = &s->info;

    if (!c->has_client_id || !(f->has & TXM_FD_CLIENT_ID) || c->client_id != f->client_id)
        return 0;
    if ((c->has & TXM_FD_PDEV) && (f->has & TXM_FD_PDEV))
        return strcmp(c->pdev, f->pdev) == 0;
    if (!(c->has & TXM_FD_PDEV) && !(f->has & TXM_FD_PDEV))
        return c->minor == s->minor;
    /* one with and one without drm-pdev: the same device node? */
    return c->minor == s->minor;
}

int txm_clients_build(const struct txm_fd_sample *s, size_t n, struct txm_client **out,
                      size_t *nout)
{
    struct txm_client *c = NULL;
    size_t k = 0;

    *out = NULL;
    *nout = 0;
    if (n) {
        c = calloc(n, sizeof(*c));
        if (!c)
            return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const struct txm_fdinfo *f = &s[i].info;
        struct txm_client *x = NULL;
        int new_pid = 1;

        for (size_t j = 0; j < k; j++)
            if (same_client(&c[j], &s[i])) {
                x = &c[j];
                break;
            }
        if (!x) {
            x = &c[k++];
            snprintf(x->pdev, sizeof(x->pdev), "%s", f->pdev);
            x->minor = s[i].minor;
            x->client_id = f->client_id;
            x->has_client_id = (f->has & TXM_FD_CLIENT_ID) != 0;
            x->pid = s[i].pid;
            x->has = f->has;
            x->engine_ns = f->engine_ns;
            x->capacity = f->capacity;
            x->total_bytes = f->total_bytes;
            x->resident_bytes = f->resident_bytes;
            x->util = NAN;
            x->nfds = 1;
            x->npids = 1;
            continue;
        }
        /* Another fd of a known client: the figures are the same drm_file's
         * (read a moment later): keep the largest. */
        x->nfds++;
        for (size_t j = 0; j < i; j++)
            if (s[j].pid == s[i].pid && same_client(x, &s[j])) {
                new_pid = 0;
                break;
            }
        x->npids += new_pid;
        if (s[i].pid < x->pid)
            x->pid = s[i].pid;
        if ((f->has & TXM_FD_PDEV) && !(x->has & TXM_FD_PDEV))
            snprintf(x->pdev, sizeof(x->pdev), "%s", f->pdev);
        if ((f->has & TXM_FD_ENGINE) && (!(x->has & TXM_FD_ENGINE) || f->engine_ns > x->engine_ns))
            x->engine_ns = f->engine_ns;
        if ((f->has & TXM_FD_CAPACITY) && !(x->has & TXM_FD_CAPACITY))
            x->capacity = f->capacity;
        if ((f->has & TXM_FD_TOTAL) &&
            (!(x->has & TXM_FD_TOTAL) || f->total_bytes > x->total_bytes))
            x->total_bytes = f->total_bytes;
        if ((f->has & TXM_FD_RESIDENT) &&
            (!(x->has & TXM_FD_RESIDENT) || f->resident_bytes > x->resident_bytes))
            x->resident_bytes = f->resident_bytes;
        x->has |= f->has;
    }
    *out = c;
    *nout = k;
    return 0;
}

void txm_clients_rate(struct txm_rates *r, struct txm_client *c, size_t n, uint64_t now_ns)
{
    for (size_t i = 0; i < n; i++) {
        char key[96];

        c[i].util = NAN;
        if (!(c[i].has & TXM_FD_ENGINE) || !c[i].has_client_id)
            continue;
        if (c[i].has & TXM_FD_PDEV)
            snprintf(key, sizeof(key), "drm:%s:%" PRIu64, c[i].pdev, c[i].client_id);
        else
            snprintf(key, sizeof(key), "drm:minor%d:%" PRIu64, c[i].minor, c[i].client_id);
        c[i].util = txm_rate(r, key, c[i].engine_ns, now_ns, c[i].capacity);
    }
}
