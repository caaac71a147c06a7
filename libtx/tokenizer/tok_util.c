/* SPDX-License-Identifier: MIT */
/* Tokenizer helpers: errors, UTF-8, buffers, hash maps, trie. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include <tx-internal/tx_errors.h>
#include "tok_internal.h"

/* ------------------------------------------------------------------ UTF-8 */

size_t tok_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        v = c & 0x0F;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        v = c & 0x07;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < need + 1)
        return 0;
    for (size_t i = 1; i <= need; i++) {
        unsigned b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            return 0;
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    return need + 1;
}

size_t tok_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t tok_utf8_validate(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t l = tok_utf8_decode(p + i, n - i, &cp);
        if (!l)
            return i;
        i += l;
    }
    return n;
}

bool tok_is_white_space(uint32_t cp)
{
    if (cp <= 0x20)
        return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85)
        return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool tok_is_word_char(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
               cp == '_';
    if (cp == 0x200C || cp == 0x200D)
        return true;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

bool tok_is_numeric(uint32_t cp)
{
    if (cp < 0x80)
        return cp >= '0' && cp <= '9';
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return true;
    default:
        return false;
    }
}

/* ------------------------------------------------------------ buffers */

int tok_buf_reserve(struct tok_buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->len)
        return TX_ENOMEM;
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return TX_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int tok_buf_put(struct tok_buf *b, const void *d, size_t n)
{
    int rc = tok_buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

/*
 * Length of the longest prefix of s that is the beginning of some
 * well-formed sequence (Unicode "maximal subpart"), at least 1.
 */
static size_t maximal_subpart(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 1;
    size_t i = 1;
    for (; i <= need && i < n; i++) {
        unsigned b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            break;
    }
    return i;
}

int tok_buf_put_lossy(struct tok_buf *b, const char *s, size_t n, bool keep_tail, size_t *consumed)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, run = 0;
    int rc;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t l = tok_utf8_decode(p + i, n - i, &cp);
        if (l) {
            i += l;
            continue;
        }
        size_t sub = maximal_subpart(p + i, n - i);
        if (keep_tail && i + sub == n) {
            /* An incomplete but so far valid sequence at the very end. */
            unsigned c = p[i];
            size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            if (c >= 0xC2 && c <= 0xF4 && sub < need)
                break;
        }
        if ((rc = tok_buf_put(b, s + run, i - run)))
            return rc;
        if ((rc = tok_buf_put(b, "\xEF\xBF\xBD", 3)))
            return rc;
        i += sub;
        run = i;
    }
    if ((rc = tok_buf_put(b, s + run, i - run)))
        return rc;
    if (consumed)
        *consumed = i;
    return 0;
}

/* ---------------------------------------------------------------- hash */

uint64_t tok_hash_bytes(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    if (n)
        memcpy(&w, p, n);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 29;
    return h;
}

int64_t tok_pool_add(struct tok_pool *pool, const void *d, size_t n)
{
    if (n > UINT32_MAX / 2 || pool->len + n + 1 > UINT32_MAX)
        return TX_EINVAL;
    if (pool->len + n + 1 > pool->cap) {
        size_t cap = pool->cap ? pool->cap : 4096;
        while (cap < pool->len + n + 1)
            cap *= 2;
        char *p = realloc(pool->p, cap);
        if (!p)
            return TX_EINVAL;
        pool->p = p;
        pool->cap = cap;
    }
    int64_t off = (int64_t)pool->len;
    if (n)
        memcpy(pool->p + pool->len, d, n);
    pool->p[pool->len + n] = 0;
    pool->len += n + 1;
    return off;
}

/* ------------------------------------------------------------- strmap */

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c *= 2;
    return c;
}

int tok_strmap_init(struct tok_strmap *m, const struct tok_pool *pool, size_t expect)
{
    memset(m, 0, sizeof(*m));
    m->pool = pool;
    size_t slots = pow2_at_least(expect * 2 + 1);
    m->slots = calloc(slots, sizeof(*m->slots));
    m->cap = expect ? expect : 16;
    m->key_off = malloc(m->cap * sizeof(uint32_t));
    m->key_len = malloc(m->cap * sizeof(uint32_t));
    m->val = malloc(m->cap * sizeof(int32_t));
    if (!m->slots || !m->key_off || !m->key_len || !m->val) {
        tok_strmap_free(m);
        return TX_ENOMEM;
    }
    m->mask = slots - 1;
    return 0;
}

void tok_strmap_free(struct tok_strmap *m)
{
    free(m->slots);
    free(m->key_off);
    free(m->key_len);
    free(m->val);
    memset(m, 0, sizeof(*m));
}

/* A slot: the high 32 bits of the key's hash (a tag that rules out almost
 * every other key without touching its bytes) and the entry index + 1. */
static inline uint64_t strmap_slot(uint64_t h, size_t e)
{
    return (h & 0xFFFFFFFF00000000ull) | (uint64_t)(e + 1);
}

static int strmap_grow_slots(struct tok_strmap *m)
{
    size_t slots = (m->mask + 1) * 2;
    uint64_t *s = calloc(slots, sizeof(*s));
    if (!s)
        return TX_ENOMEM;
    for (size_t e = 0; e < m->n; e++) {
        uint64_t h = tok_hash_bytes(m->pool->p + m->key_off[e], m->key_len[e]);
        size_t i = (size_t)h & (slots - 1);
        while (s[i])
            i = (i + 1) & (slots - 1);
        s[i] = strmap_slot(h, e);
    }
    free(m->slots);
    m->slots = s;
    m->mask = slots - 1;
    return 0;
}

int tok_strmap_put(struct tok_strmap *m, uint32_t key_off, uint32_t key_len, int32_t val)
{
    const char *key = m->pool->p + key_off;
    uint64_t h = tok_hash_bytes(key, key_len);
    size_t i = (size_t)h & m->mask;
    for (;;) {
        uint64_t sl = m->slots[i];
        if (!sl)
            break;
        uint32_t e = (uint32_t)sl - 1;
        if ((sl >> 32) == (h >> 32) && m->key_len[e] == key_len &&
            !memcmp(m->pool->p + m->key_off[e], key, key_len)) {
            m->val[e] = val;
            return 0;
        }
        i = (i + 1) & m->mask;
    }
    if (m->n == m->cap) {
        size_t cap = m->cap * 2;
        uint32_t *a = realloc(m->key_off, cap * sizeof(uint32_t));
        if (!a)
            return TX_ENOMEM;
        m->key_off = a;
        a = realloc(m->key_len, cap * sizeof(uint32_t));
        if (!a)
            return TX_ENOMEM;
        m->key_len = a;
        int32_t *v = realloc(m->val, cap * sizeof(int32_t));
        if (!v)
            return TX_ENOMEM;
        m->val = v;
        m->cap = cap;
    }
    m->key_off[m->n] = key_off;
    m->key_len[m->n] = key_len;
    m->val[m->n] = val;
    m->slots[i] = strmap_slot(h, m->n);
    m->n++;
    if (m->n * 2 > m->mask + 1)
        return strmap_grow_slots(m);
    return 0;
}

int32_t tok_strmap_get(const struct tok_strmap *m, const char *key, size_t len)
{
    if (!m->slots)
        return TX_NONE;
    uint64_t h = tok_hash_bytes(key, len);
    size_t i = (size_t)h & m->mask;
    for (;;) {
        uint64_t sl = m->slots[i];
        if (!sl)
            return TX_NONE;
        uint32_t e = (uint32_t)sl - 1;
        if ((sl >> 32) == (h >> 32) && m->key_len[e] == len &&
            !memcmp(m->pool->p + m->key_off[e], key, len))
            return m->val[e];
        i = (i + 1) & m->mask;
    }
}

/* ------------------------------------------------------------ pairmap */

int tok_pairmap_init(struct tok_pairmap *m, size_t expect)
{
    memset(m, 0, sizeof(*m));
    size_t slots = pow2_at_least(expect * 2 + 1);
    m->keys = calloc(slots, sizeof(*m->keys));
    m->rank = malloc(slots * sizeof(uint32_t));
    m->new_id = malloc(slots * sizeof(uint32_t));
    if (!m->keys || !m->rank || !m->new_id) {
        tok_pairmap_free(m);
        return TX_ENOMEM;
    }
    m->mask = slots - 1;
    return 0;
}

void tok_pairmap_free(struct tok_pairmap *m)
{
    free(m->keys);
    free(m->rank);
    free(m->new_id);
    memset(m, 0, sizeof(*m));
}

/* The map is sized for all merges up front, so it never fills. */
void tok_pairmap_put(struct tok_pairmap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t new_id)
{
    uint64_t key = (((uint64_t)a << 32) | b) + 1;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 20) & m->mask;
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & m->mask;
    if (!m->keys[i])
        m->n++;
    m->keys[i] = key;
    m->rank[i] = rank;
    m->new_id[i] = new_id;
}

/* --------------------------------------------------------------- trie */

static int32_t trie_new_node(struct tok_trie *t, unsigned char byte)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        struct tok_trie_node *n = realloc(t->nodes, cap * sizeof(*n));
        if (!n)
            return TX_ENOMEM;
        t->nodes = n;
        t->cap = cap;
    }
    struct tok_trie_node *nd = &t->nodes[t->n];
    nd->first_child = -1;
    nd->next_sibling = -1;
    nd->added = -1;
    nd->byte = byte;
    return (int32_t)t->n++;
}

int tok_trie_add(struct tok_trie *t, const char *s, size_t n, int32_t added_idx)
{
    if (!n)
        return 0;
    if (!t->n && trie_new_node(t, 0) < 0)
        return TX_ENOMEM;
    int32_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int32_t ch = t->nodes[cur].first_child;
        while (ch >= 0 && t->nodes[ch].byte != c)
            ch = t->nodes[ch].next_sibling;
        if (ch < 0) {
            ch = trie_new_node(t, c);
            if (ch < 0)
                return TX_ENOMEM;
            t->nodes[ch].next_sibling = t->nodes[cur].first_child;
            t->nodes[cur].first_child = ch;
        }
        cur = ch;
    }
    /* First token with this content wins (HF's Aho-Corasick reports the
     * first pattern among identical ones). */
    if (t->nodes[cur].added < 0)
        t->nodes[cur].added = added_idx;
    t->first_byte[(unsigned char)s[0] >> 3] |= (uint8_t)(1u << ((unsigned char)s[0] & 7));
    return 0;
}

void tok_trie_free(struct tok_trie *t)
{
    free(t->nodes);
    memset(t, 0, sizeof(*t));
}

/* -------------------------------------------------------------- regex */

/*
 * Oniguruma (what HF tokenizers compiles these patterns with) gives \s and
 * \w their Unicode meanings (White_Space; Alphabetic/M/Nd/Pc/Join_Control)
 * where PCRE2's UCP classes differ slightly (U+180E is \s in PCRE2; marks
 * are not \w in PCRE2 10.42). Rewrite them to explicit properties; the rest
 * of the syntax these files use (\p{..}, (?i:..), (?!..), {m,n}) means the
 * same in both.
 */
static char *translate_pattern(const char *p, size_t n, size_t *out_len)
{
    struct tok_buf b = {0};
    int depth = 0; /* inside a character class */
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            const char *rep = NULL;
            if (d == 's')
                rep = "\\p{White_Space}";
            else if (d == 'S')
                rep = "\\P{White_Space}";
            else if (d == 'w')
                rep = depth ? "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}"
                            : "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
            else if (d == 'W' && !depth)
                rep = "[^\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
            if (rep) {
                if (tok_buf_put(&b, rep, strlen(rep)))
                    goto fail;
            } else if (tok_buf_put(&b, p + i, 2)) {
                goto fail;
            }
            i++;
            continue;
        }
        if (c == '[' && !depth) {
            depth = 1;
            if (tok_buf_put(&b, p + i, 1))
                goto fail;
            /* A ']' right after '[' or '[^' is a literal. */
            if (i + 1 < n && p[i + 1] == '^') {
                if (tok_buf_put(&b, "^", 1))
                    goto fail;
                i++;
            }
            if (i + 1 < n && p[i + 1] == ']') {
                if (tok_buf_put(&b, "]", 1))
                    goto fail;
                i++;
            }
            continue;
        }
        if (c == ']' && depth)
            depth = 0;
        if (tok_buf_put(&b, p + i, 1))
            goto fail;
    }
    if (tok_buf_reserve(&b, 0))
        goto fail;
    b.p[b.len] = 0;
    *out_len = b.len;
    return b.p;
fail:
    free(b.p);
    return NULL;
}

pcre2_code *tok_regex_compile(const char *pattern, size_t len, bool literal, char *err,
                              size_t errsz, int *rc)
{
    int ecode;
    PCRE2_SIZE eoff;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
    char *pat = NULL;
    size_t plen = len;
    if (literal) {
        opts = PCRE2_UTF | PCRE2_NO_UTF_CHECK | PCRE2_LITERAL;
    } else {
        pat = translate_pattern(pattern, len, &plen);
        if (!pat) {
            *rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            return NULL;
        }
    }
    if (tok_utf8_validate(pattern, len) != len) {
        free(pat);
        *rc = tx_errbuf(err, errsz, TX_EINVAL, "regex is not valid UTF-8");
        return NULL;
    }
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)(pat ? pat : pattern), plen, opts, &ecode, &eoff, NULL);
    free(pat);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ecode, msg, sizeof(msg));
        *rc = tx_errbuf(err, errsz, TX_EINVAL, "cannot compile regex /%.*s/: %s",
                        (int)(len > 200 ? 200 : len), pattern, (const char *)msg);
        return NULL;
    }
    /* JIT where the platform has it; the interpreter otherwise. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    *rc = 0;
    return re;
}
