/* SPDX-License-Identifier: MIT */
/* libtx: process-wide handle table (see handle.h). */
#include "common/handle.h"

#include <tx-internal/tx_errors.h>

#include <pthread.h>
#include <stdlib.h>

/* handle = generation << 32 | slot << 4 | type; generation >= 1 */
#define TYPE_BITS 4
#define MAX_SLOTS (1u << 27)

struct slot {
    struct tx_obj *obj; /* NULL when free */
    uint32_t gen;
    uint32_t next_free;
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;
static uint32_t nslots, cap;
static uint32_t free_head = UINT32_MAX;

static uint64_t encode(uint32_t gen, uint32_t idx, uint32_t type)
{
    return ((uint64_t)gen << 32) | ((uint64_t)idx << TYPE_BITS) | type;
}

uint64_t tx_handle_add(struct tx_obj *o, uint32_t type, void (*destroy)(struct tx_obj *))
{
    uint32_t idx;
    uint64_t h;

    o->type = type;
    o->refs = 2; /* the caller's and the table's */
    o->destroy = destroy;
    pthread_mutex_lock(&table_lock);
    if (free_head != UINT32_MAX) {
        idx = free_head;
        free_head = slots[idx].next_free;
    } else {
        if (nslots == cap) {
            uint32_t ncap = cap ? cap * 2 : 64;
            struct slot *n;

            if (ncap > MAX_SLOTS || !(n = realloc(slots, ncap * sizeof(*n)))) {
                pthread_mutex_unlock(&table_lock);
                o->refs = 1;
                o->handle = 0;
                return 0;
            }
            slots = n;
            cap = ncap;
        }
        idx = nslots++;
        slots[idx].gen = 0;
    }
    slots[idx].gen++;
    if (slots[idx].gen == 0)
        slots[idx].gen = 1;
    slots[idx].obj = o;
    h = encode(slots[idx].gen, idx, type);
    o->handle = h;
    pthread_mutex_unlock(&table_lock);
    return h;
}

static struct slot *lookup(uint64_t h, uint32_t type)
{
    uint32_t idx = (uint32_t)((h & 0xffffffffu) >> TYPE_BITS);

    if (h == 0 || (h & ((1u << TYPE_BITS) - 1)) != type || idx >= nslots)
        return NULL;
    if (!slots[idx].obj || slots[idx].gen != (uint32_t)(h >> 32))
        return NULL;
    return &slots[idx];
}

struct tx_obj *tx_handle_get(uint64_t h, uint32_t type)
{
    struct tx_obj *o = NULL;
    struct slot *s;

    pthread_mutex_lock(&table_lock);
    s = lookup(h, type);
    if (s) {
        o = s->obj;
        o->refs++;
    }
    pthread_mutex_unlock(&table_lock);
    return o;
}

int tx_handle_remove(uint64_t h, uint32_t type)
{
    struct tx_obj *o;
    struct slot *s;

    pthread_mutex_lock(&table_lock);
    s = lookup(h, type);
    if (!s) {
        pthread_mutex_unlock(&table_lock);
        return TX_ENOENT;
    }
    o = s->obj;
    o->handle = 0;
    s->obj = NULL;
    s->next_free = free_head;
    free_head = (uint32_t)(s - slots);
    pthread_mutex_unlock(&table_lock);
    tx_obj_put(o);
    return 0;
}

void tx_obj_get(struct tx_obj *o)
{
    pthread_mutex_lock(&table_lock);
    o->refs++;
    pthread_mutex_unlock(&table_lock);
}

void tx_obj_put(struct tx_obj *o)
{
    uint32_t left;

    if (!o)
        return;
    pthread_mutex_lock(&table_lock);
    left = --o->refs;
    pthread_mutex_unlock(&table_lock);
    if (left == 0 && o->destroy)
        o->destroy(o);
}
