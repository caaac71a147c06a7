/* SPDX-License-Identifier: MIT */
/*
 * glm-server's block prefix cache: vLLM's automatic prefix caching for
 * sessions that each own one contiguous KV cache.
 *
 * A prompt is cut into blocks of PS_BLOCK positions. Block j's key is a
 * 128-bit hash chain: H(key of block j - 1, the block's token ids), with
 * block 0's parent the format (ps_set_format: everything else that makes a
 * position's KV bits), so a key names a block's whole prefix. A stored
 * block also keeps its parent's key and its ids, compared on lookup.
 *
 * Blocks hold the KV rows of every layer for their positions, read from a
 * slot's session with glm_session_kv_read (the cache's own types: an MLA
 * latent, a DSA key selector, quantised blocks, bit for bit) and written
 * into another with glm_session_kv_write -- memcpy through the cache's
 * host mapping, no device job. They live in host memory, so that the
 * device's memory stays the slots' KV caches.
 *
 * Eviction: least recently used, whole blocks, when the budget would be
 * exceeded or malloc fails. A chain is touched from its last block to its
 * first, so a block is always more recent than its descendants and
 * eviction takes leaves first (a chain is never cut in the middle by it).
 *
 * The scheduler thread alone calls these (under srv.mu), between device
 * passes; ps_get_stats is read by /metrics under srv.mu.
 */
#include "prefix_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx.h>

struct ps_block {
    uint64_t key[2], parent[2];
    int32_t ids[PS_BLOCK];
    struct ps_block *hnext;       /* hash bucket */
    struct ps_block *prev, *next; /* LRU list: head the most recent */
    size_t bytes;                 /* of this allocation */
    unsigned char kv[];           /* the block's KV rows */
};

struct prefix_store {
    uint64_t budget, format;
    struct ps_block **bucket;
    size_t n_bucket;
    struct ps_block *head, *tail;
    struct ps_stats st;
};

/* ---- keys ---------------------------------------------------------------- */

static uint64_t fmix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* The key of the block ids[0, PS_BLOCK) after parent */
static void block_key(const uint64_t parent[2], const int32_t *ids, uint64_t key[2])
{
    uint64_t a = parent[0] ^ 0x9e3779b97f4a7c15ULL, b = parent[1] ^ 0x6a09e667f3bcc909ULL;
    for (int i = 0; i < PS_BLOCK; i++) {
        uint64_t v = (uint32_t)ids[i];
        a = fmix(a ^ (v + 0x100000001b3ULL * (uint64_t)(i + 1)));
        b = (b ^ v) * 0x100000001b3ULL;
        b ^= b >> 29;
    }
    key[0] = fmix(a ^ (b >> 1));
    key[1] = fmix(b + a);
}

/* ---- the table and the LRU list ------------------------------------------ */

struct prefix_store *ps_new(uint64_t budget)
{
    struct prefix_store *ps = calloc(1, sizeof(*ps));
    if (!ps)
        return NULL;
    ps->n_bucket = 1024;
    ps->bucket = calloc(ps->n_bucket, sizeof(*ps->bucket));
    if (!ps->bucket) {
        free(ps);
        return NULL;
    }
    ps->budget = ps->st.budget = budget;
    return ps;
}

static struct ps_block **slot_of(struct prefix_store *ps, const uint64_t key[2])
{
    return &ps->bucket[key[0] & (ps->n_bucket - 1)];
}

static struct ps_block *find(struct prefix_store *ps, const uint64_t key[2],
                             const uint64_t parent[2], const int32_t *ids)
{
    for (struct ps_block *b = *slot_of(ps, key); b; b = b->hnext)
        if (b->key[0] == key[0] && b->key[1] == key[1] && b->parent[0] == parent[0] &&
            b->parent[1] == parent[1] && !memcmp(b->ids, ids, sizeof(b->ids)))
            return b;
    return NULL;
}

static void lru_unlink(struct prefix_store *ps, struct ps_block *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        ps->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        ps->tail = b->prev;
    b->prev = b->next = NULL;
}

static void lru_push(struct prefix_store *ps, struct ps_block *b)
{
    b->next = ps->head;
    b->prev = NULL;
    if (ps->head)
        ps->head->prev = b;
    ps->head = b;
    if (!ps->tail)
        ps->tail = b;
}

static void touch(struct prefix_store *ps, struct ps_block *b)
{
    lru_unlink(ps, b);
    lru_push(ps, b);
}

static void drop(struct prefix_store *ps, struct ps_block *b)
{
    for (struct ps_block **pp = slot_of(ps, b->key); *pp; pp = &(*pp)->hnext)
        if (*pp == b) {
            *pp = b->hnext;
            break;
        }
    lru_unlink(ps, b);
    ps->st.blocks--;
    ps->st.bytes -= b->bytes;
    free(b);
}

/* The least recently used block goes; 0, or -1 when there is none */
static int evict_one(struct prefix_store *ps)
{
    if (!ps->tail)
        return -1;
    drop(ps, ps->tail);
    ps->st.evicted_blocks++;
    return 0;
}

void ps_clear(struct prefix_store *ps)
{
    if (!ps)
        return;
    while (ps->head)
        drop(ps, ps->head);
}

void ps_free(struct prefix_store *ps)
{
    if (!ps)
        return;
    ps_clear(ps);
    free(ps->bucket);
    free(ps);
}

void ps_set_format(struct prefix_store *ps, uint64_t format)
{
    if (ps && ps->format != format) {
        ps_clear(ps);
        ps->format = format;
    }
}

/* Twice the buckets when the blocks outnumber them (a failed grow keeps
 * the table as it is: longer chains) */
static void maybe_grow(struct prefix_store *ps)
{
    if (ps->st.blocks < ps->n_bucket)
        return;
    size_t n = ps->n_bucket * 2;
    struct ps_block **nb = calloc(n, sizeof(*nb));
    if (!nb)
        return;
    for (size_t i = 0; i < ps->n_bucket; i++)
        for (struct ps_block *b = ps->bucket[i], *nx; b; b = nx) {
            nx = b->hnext;
            b->hnext = nb[b->key[0] & (n - 1)];
            nb[b->key[0] & (n - 1)] = b;
        }
    free(ps->bucket);
    ps->bucket = nb;
    ps->n_bucket = n;
}

/* Touch chain[0, n) from its last block to its first */
static void touch_chain(struct prefix_store *ps, struct ps_block **chain, int n)
{
    for (int j = n - 1; j >= 0; j--)
        touch(ps, chain[j]);
}

/* ---- restore and publish ------------------------------------------------- */

int ps_restore(struct prefix_store *ps, glm_session_t *s, const int32_t *ids, int n, int have,
               char *err, size_t errlen)
{
    int nb = n / PS_BLOCK;
    if (!ps || !ps->budget || nb <= 0)
        return have;
    struct ps_block **chain = malloc((size_t)nb * sizeof(*chain));
    if (!chain)
        return have;
    uint64_t key[2], parent[2] = {ps->format, ~ps->format};
    int h = 0;
    for (; h < nb; h++) {
        block_key(parent, ids + (size_t)h * PS_BLOCK, key);
        chain[h] = find(ps, key, parent, ids + (size_t)h * PS_BLOCK);
        if (!chain[h])
            break;
        parent[0] = key[0];
        parent[1] = key[1];
    }
    ps->st.query_tokens += (uint64_t)nb * PS_BLOCK;
    ps->st.hit_tokens += (uint64_t)h * PS_BLOCK;
    touch_chain(ps, chain, h);
    int got = have;
    if (h * PS_BLOCK > have) {
        int j0 = have / PS_BLOCK;
        if (glm_session_truncate(s, j0 * PS_BLOCK)) {
            snprintf(err, errlen, "%s", tx_last_error());
            free(chain);
            return glm_session_pos(s) < have ? glm_session_pos(s) : have;
        }
        size_t bytes = (size_t)glm_session_kv_bytes(s, PS_BLOCK);
        int j = j0;
        for (; j < h; j++)
            if (glm_session_kv_write(s, j * PS_BLOCK, chain[j]->ids, PS_BLOCK, chain[j]->kv,
                                     bytes)) {
                snprintf(err, errlen, "%s", tx_last_error());
                break;
            }
        got = j * PS_BLOCK;
        if (got > have)
            ps->st.restored_tokens += (uint64_t)(got - have);
    }
    free(chain);
    return got;
}

int ps_publish(struct prefix_store *ps, glm_session_t *s, const int32_t *ids, int n, char *err,
               size_t errlen)
{
    int nb = n / PS_BLOCK;
    if (!ps || !ps->budget || nb <= 0)
        return 0;
    struct ps_block **chain = malloc((size_t)nb * sizeof(*chain));
    if (!chain)
        return 0; /* nothing stored: a later publish may */
    size_t kvb = (size_t)glm_session_kv_bytes(s, PS_BLOCK), need = sizeof(struct ps_block) + kvb;
    uint64_t key[2], parent[2] = {ps->format, ~ps->format}, held = 0;
    int j = 0, rc = 0;
    for (; j < nb; j++) {
        const int32_t *bi = ids + (size_t)j * PS_BLOCK;
        block_key(parent, bi, key);
        struct ps_block *b = find(ps, key, parent, bi);
        if (!b) {
            /* the chain so far stays: the budget must hold it and this block */
            if (held + need > ps->budget)
                break;
            /* the chain's blocks are the most recent (at the head): evicting
             * while others are held never takes one of them */
            while (ps->st.bytes + need > ps->budget && ps->st.bytes > held && evict_one(ps) == 0)
                ;
            while (!(b = malloc(need)) && ps->st.bytes > held && evict_one(ps) == 0)
                ; /* host memory pressure */
            if (!b)
                break;
            if (glm_session_kv_read(s, j * PS_BLOCK, PS_BLOCK, b->kv, kvb)) {
                snprintf(err, errlen, "%s", tx_last_error());
                free(b);
                rc = -1;
                break;
            }
            memcpy(b->key, key, sizeof(key));
            memcpy(b->parent, parent, sizeof(parent));
            memcpy(b->ids, bi, sizeof(b->ids));
            b->bytes = need;
            b->prev = b->next = NULL;
            struct ps_block **sl = slot_of(ps, key);
            b->hnext = *sl;
            *sl = b;
            lru_push(ps, b);
            ps->st.blocks++;
            ps->st.bytes += need;
            ps->st.stored_blocks++;
            maybe_grow(ps);
        } else {
            touch(ps, b); /* at the head: not evicted while the chain grows */
        }
        held += b->bytes;
        chain[j] = b;
        parent[0] = key[0];
        parent[1] = key[1];
    }
    touch_chain(ps, chain, j);
    free(chain);
    return rc;
}

void ps_get_stats(const struct prefix_store *ps, struct ps_stats *st)
{
    if (ps)
        *st = ps->st;
    else
        memset(st, 0, sizeof(*st));
}
