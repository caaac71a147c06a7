/* SPDX-License-Identifier: MIT */
/*
 * The BPE model: a word (one pre-token, in the model's alphabet) becomes
 * one symbol per character, then the pair with the lowest merge rank
 * (leftmost first on ties) is merged until no pair merges, exactly as HF's
 * Word::merge_all. A binary heap keeps this O(n log n). Results for words
 * up to TOK_CACHE_MAX_WORD bytes go into a shared cache.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

int tok_ids_push(struct tok_ids *ids, int32_t id)
{
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        int32_t *v = realloc(ids->v, cap * sizeof(*v));
        if (!v)
            return TX_ENOMEM;
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return 0;
}

struct heap_item {
    uint32_t rank, pos, new_id;
};

struct tok_bpe_scratch {
    int32_t *id, *prev, *next;
    uint32_t *len; /* bytes covered; 0 = merged away */
    size_t cap;
    struct heap_item *heap;
    size_t heap_n, heap_cap;
    struct tok_buf key;
    int32_t unk_pending;
    uint32_t unk_len;
};

struct tok_bpe_scratch *tok_bpe_scratch_new(void)
{
    return calloc(1, sizeof(struct tok_bpe_scratch));
}

void tok_bpe_scratch_free(struct tok_bpe_scratch *s)
{
    if (!s)
        return;
    free(s->id);
    free(s->prev);
    free(s->next);
    free(s->len);
    free(s->heap);
    free(s->key.p);
    free(s);
}

static int scratch_reserve(struct tok_bpe_scratch *s, size_t n)
{
    if (n <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n)
        cap *= 2;
    int32_t *a = realloc(s->id, cap * sizeof(int32_t));
    if (!a)
        return TX_ENOMEM;
    s->id = a;
    if (!(a = realloc(s->prev, cap * sizeof(int32_t))))
        return TX_ENOMEM;
    s->prev = a;
    if (!(a = realloc(s->next, cap * sizeof(int32_t))))
        return TX_ENOMEM;
    s->next = a;
    uint32_t *l = realloc(s->len, cap * sizeof(uint32_t));
    if (!l)
        return TX_ENOMEM;
    s->len = l;
    s->cap = cap;
    return 0;
}

static inline bool item_less(const struct heap_item *a, const struct heap_item *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(struct tok_bpe_scratch *s, uint32_t rank, uint32_t pos, uint32_t new_id)
{
    if (s->heap_n == s->heap_cap) {
        size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
        struct heap_item *h = realloc(s->heap, cap * sizeof(*h));
        if (!h)
            return TX_ENOMEM;
        s->heap = h;
        s->heap_cap = cap;
    }
    size_t i = s->heap_n++;
    struct heap_item it = {rank, pos, new_id};
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!item_less(&it, &s->heap[p]))
            break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = it;
    return 0;
}

static struct heap_item heap_pop(struct tok_bpe_scratch *s)
{
    struct heap_item top = s->heap[0];
    struct heap_item last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n)
            break;
        size_t m = (l + 1 < n && item_less(&s->heap[l + 1], &s->heap[l])) ? l + 1 : l;
        if (!item_less(&s->heap[m], &last))
            break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (n)
        s->heap[i] = last;
    return top;
}

/* ------------------------------------------------------------ cache */

int tok_cache_init(struct tok_cache *c)
{
    c->slots = calloc(TOK_CACHE_SLOTS, sizeof(*c->slots));
    if (!c->slots)
        return TX_ENOMEM;
    if (pthread_rwlock_init(&c->lock, NULL)) {
        free(c->slots);
        c->slots = NULL;
        return TX_ENOMEM;
    }
    c->ok = true;
    return 0;
}

void tok_cache_free(struct tok_cache *c)
{
    if (!c->ok)
        return;
    for (size_t i = 0; i < TOK_CACHE_SLOTS; i++)
        free(c->slots[i]);
    free(c->slots);
    pthread_rwlock_destroy(&c->lock);
    c->ok = false;
}

static inline const int32_t *entry_ids(const struct tok_cache_entry *e)
{
    return (const int32_t *)(e + 1);
}

static inline const char *entry_key(const struct tok_cache_entry *e)
{
    return (const char *)(entry_ids(e) + e->n_ids);
}

static bool cache_get(struct tok_cache *c, uint64_t h, const char *w, size_t n, struct tok_ids *out,
                      int *rc)
{
    bool hit = false;
    pthread_rwlock_rdlock(&c->lock);
    for (size_t i = (size_t)h & (TOK_CACHE_SLOTS - 1);; i = (i + 1) & (TOK_CACHE_SLOTS - 1)) {
        const struct tok_cache_entry *e = c->slots[i];
        if (!e)
            break;
        if (e->hash == h && e->key_len == n && !memcmp(entry_key(e), w, n)) {
            const int32_t *ids = entry_ids(e);
            for (uint32_t k = 0; k < e->n_ids && !*rc; k++)
                *rc = tok_ids_push(out, ids[k]);
            hit = true;
            break;
        }
    }
    pthread_rwlock_unlock(&c->lock);
    return hit;
}

static void cache_put(struct tok_cache *c, uint64_t h, const char *w, size_t n, const int32_t *ids,
                      size_t n_ids)
{
    if (c->n >= TOK_CACHE_MAX_ENTRIES) /* racy peek; re-checked below */
        return;
    struct tok_cache_entry *e = malloc(sizeof(*e) + n_ids * sizeof(int32_t) + n);
    if (!e)
        return; /* the cache is an optimisation only */
    e->hash = h;
    e->key_len = (uint32_t)n;
    e->n_ids = (uint32_t)n_ids;
    if (n_ids)
        memcpy((int32_t *)(e + 1), ids, n_ids * sizeof(int32_t));
    memcpy((char *)((int32_t *)(e + 1) + n_ids), w, n);
    pthread_rwlock_wrlock(&c->lock);
    if (c->n < TOK_CACHE_MAX_ENTRIES) {
        for (size_t i = (size_t)h & (TOK_CACHE_SLOTS - 1);; i = (i + 1) & (TOK_CACHE_SLOTS - 1)) {
            struct tok_cache_entry *o = c->slots[i];
            if (!o) {
                c->slots[i] = e;
                c->n++;
                e = NULL;
                break;
            }
            if (o->hash == h && o->key_len == n && !memcmp(entry_key(o), w, n))
                break; /* another thread was first */
        }
    }
    pthread_rwlock_unlock(&c->lock);
    free(e);
}

/* -------------------------------------------------------------- BPE */

static int32_t lookup_char(const struct tx_tokenizer *tok, struct tok_bpe_scratch *s, const char *w,
                           size_t i, size_t l, bool first, bool last, const char **str,
                           size_t *str_len, int *rc)
{
    bool pre = tok->prefix_len && !first, suf = tok->suffix_len && last;
    if (!pre && !suf) {
        *str = w + i;
        *str_len = l;
        if (l <= 2) {
            uint32_t cp;
            if (tok_utf8_decode((const unsigned char *)w + i, l, &cp) == l && cp < 512)
                return tok->char_id[cp];
        }
        return tok_strmap_get(&tok->vocab, w + i, l);
    }
    s->key.len = 0;
    if ((pre && tok_buf_put(&s->key, tok->pool.p + tok->prefix_off, tok->prefix_len)) ||
        tok_buf_put(&s->key, w + i, l) ||
        (suf && tok_buf_put(&s->key, tok->pool.p + tok->suffix_off, tok->suffix_len))) {
        *rc = TX_ENOMEM;
        return TX_NONE;
    }
    *str = s->key.p;
    *str_len = s->key.len;
    return tok_strmap_get(&tok->vocab, s->key.p, s->key.len);
}

static int add_symbol(struct tok_bpe_scratch *s, size_t *n, int32_t id, uint32_t len)
{
    int rc = scratch_reserve(s, *n + 1);
    if (rc)
        return rc;
    s->id[*n] = id;
    s->len[*n] = len;
    (*n)++;
    return 0;
}

static int flush_unk(struct tok_bpe_scratch *s, size_t *n)
{
    int rc = 0;
    if (s->unk_pending >= 0)
        rc = add_symbol(s, n, s->unk_pending, s->unk_len);
    s->unk_pending = -1;
    return rc;
}

/* Splits the word into initial symbols (HF BPE::merge_word). */
static int word_symbols(const struct tx_tokenizer *tok, struct tok_bpe_scratch *s, const char *w,
                        size_t n, size_t *count)
{
    size_t ns = 0;
    int rc = 0;
    s->unk_pending = -1;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = tok_utf8_decode((const unsigned char *)w + i, n - i, &cp);
        if (!l)
            l = 1; /* cannot happen for validated text; be safe */
        const char *str;
        size_t str_len;
        int32_t id = lookup_char(tok, s, w, i, l, i == 0, i + l == n, &str, &str_len, &rc);
        if (rc)
            return rc;
        if (id >= 0) {
            if ((rc = flush_unk(s, &ns)) || (rc = add_symbol(s, &ns, id, (uint32_t)l)))
                return rc;
            i += l;
            continue;
        }
        if (tok->byte_fallback) {
            bool all = true;
            for (size_t k = 0; k < str_len; k++)
                if (tok->byte_fallback_id[(unsigned char)str[k]] < 0)
                    all = false;
            if (all) {
                for (size_t k = 0; k < str_len; k++)
                    if ((rc = add_symbol(s, &ns, tok->byte_fallback_id[(unsigned char)str[k]], 1)))
                        return rc;
                i += l;
                continue;
            }
        }
        if (tok->unk_id >= 0) {
            if (s->unk_pending >= 0 && tok->fuse_unk) {
                s->unk_len += (uint32_t)l;
            } else {
                if ((rc = flush_unk(s, &ns)))
                    return rc;
                s->unk_pending = tok->unk_id;
                s->unk_len = (uint32_t)l;
            }
        }
        /* no unk token: the character is dropped, as in HF */
        i += l;
    }
    if ((rc = flush_unk(s, &ns)))
        return rc;
    *count = ns;
    return 0;
}

static int merge_all(const struct tx_tokenizer *tok, struct tok_bpe_scratch *s, size_t n)
{
    int rc;
    for (size_t i = 0; i < n; i++) {
        s->prev[i] = (int32_t)i - 1;
        s->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    s->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t rank, nid;
        if (tok_pairmap_get(&tok->merges, (uint32_t)s->id[i], (uint32_t)s->id[i + 1], &rank,
                            &nid) &&
            (rc = heap_push(s, rank, (uint32_t)i, nid)))
            return rc;
    }
    while (s->heap_n) {
        struct heap_item top = heap_pop(s);
        uint32_t pos = top.pos;
        if (!s->len[pos] || s->next[pos] < 0)
            continue;
        int32_t nx = s->next[pos];
        uint32_t rank, nid;
        if (!tok_pairmap_get(&tok->merges, (uint32_t)s->id[pos], (uint32_t)s->id[nx], &rank,
                             &nid) ||
            nid != top.new_id)
            continue; /* stale entry */
        s->id[pos] = (int32_t)top.new_id;
        s->len[pos] += s->len[nx];
        s->len[nx] = 0;
        s->next[pos] = s->next[nx];
        if (s->next[nx] >= 0)
            s->prev[s->next[nx]] = (int32_t)pos;
        int32_t pv = s->prev[pos];
        if (pv >= 0 &&
            tok_pairmap_get(&tok->merges, (uint32_t)s->id[pv], (uint32_t)s->id[pos], &rank, &nid) &&
            (rc = heap_push(s, rank, (uint32_t)pv, nid)))
            return rc;
        int32_t nn = s->next[pos];
        if (nn >= 0 &&
            tok_pairmap_get(&tok->merges, (uint32_t)s->id[pos], (uint32_t)s->id[nn], &rank, &nid) &&
            (rc = heap_push(s, rank, pos, nid)))
            return rc;
    }
    return 0;
}

int tok_bpe_word(const struct tx_tokenizer *tok, struct tok_bpe_scratch *s, const char *w, size_t n,
                 struct tok_ids *out)
{
    int rc = 0;
    if (!n)
        return 0;
    if (tok->ignore_merges) {
        int32_t id = tok_strmap_get(&tok->vocab, w, n);
        if (id >= 0)
            return tok_ids_push(out, id);
    }
    struct tok_cache *cache = (struct tok_cache *)&tok->cache; /* internally locked */
    uint64_t h = 0;
    bool cacheable = n < TOK_CACHE_MAX_WORD;
    if (cacheable) {
        h = tok_hash_bytes(w, n);
        if (cache_get(cache, h, w, n, out, &rc))
            return rc;
    }
    size_t ns;
    if ((rc = word_symbols(tok, s, w, n, &ns)))
        return rc;
    if (ns > 1 && (rc = merge_all(tok, s, ns)))
        return rc;
    size_t start = out->n;
    for (int32_t i = ns ? 0 : -1; i >= 0; i = s->next[i]) {
        if ((rc = tok_ids_push(out, s->id[i])))
            return rc;
        if (ns == 1)
            break;
    }
    if (cacheable)
        cache_put(cache, h, w, n, out->v ? out->v + start : NULL, out->n - start);
    return 0;
}
