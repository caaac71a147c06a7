/* SPDX-License-Identifier: MIT */
/*
 * Allowed-token masks kept by matcher state: the trie walk is the costly
 * part of grammar sampling (every token inside a JSON string is allowed,
 * so the whole trie is walked), and a long string or a repeated object
 * shape meets the same state again. docs/grammar.md.
 */
#include <tx-internal/tx_grammar.h>

#include <stdlib.h>
#include <string.h>

#define KEY_CAP 4096 /* words: a state with a longer key is not cached */

struct entry {
    uint32_t *key;
    size_t key_len;
    uint32_t *mask;
    size_t count;
    uint64_t used;
};

struct txg_mask_cache {
    struct entry *e;
    int n, cap;
    size_t words;
    uint64_t clock;
    uint32_t key[KEY_CAP];
};

struct txg_mask_cache *txg_mask_cache_new(size_t n_ids, int entries)
{
    struct txg_mask_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->e = calloc((size_t)(entries > 0 ? entries : 1), sizeof(*c->e));
    if (!c->e) {
        free(c);
        return NULL;
    }
    c->cap = entries > 0 ? entries : 1;
    c->words = (n_ids + 31) / 32;
    return c;
}

void txg_mask_cache_free(struct txg_mask_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].key);
        free(c->e[i].mask);
    }
    free(c->e);
    free(c);
}

size_t txg_vocab_mask_cached(const struct txg_vocab *v, struct txg_mask_cache *c,
                             struct txg_matcher *m, const int32_t *eos, int n_eos,
                             uint32_t *mask)
{
    size_t kl = c ? txg_matcher_key(m, c->key, KEY_CAP) : 0;
    if (!c || kl > KEY_CAP || txg_matcher_failed(m))
        return txg_vocab_mask(v, m, eos, n_eos, mask);
    for (int i = 0; i < c->n; i++) {
        struct entry *e = &c->e[i];
        if (e->key_len == kl && !memcmp(e->key, c->key, kl * 4)) {
            memcpy(mask, e->mask, c->words * 4);
            e->used = ++c->clock;
            return e->count;
        }
    }
    size_t count = txg_vocab_mask(v, m, eos, n_eos, mask);
    struct entry *e;
    if (c->n < c->cap) {
        e = &c->e[c->n];
        memset(e, 0, sizeof(*e));
        e->mask = malloc(c->words * 4);
        if (!e->mask)
            return count;
        c->n++;
    } else {
        e = &c->e[0];
        for (int i = 1; i < c->n; i++)
            if (c->e[i].used < e->used)
                e = &c->e[i];
    }
    uint32_t *k = realloc(e->key, kl * 4);
    if (!k)
        return count;
    memcpy(k, c->key, kl * 4);
    e->key = k;
    e->key_len = kl;
    memcpy(e->mask, mask, c->words * 4);
    e->count = count;
    e->used = ++c->clock;
    return count;
}
