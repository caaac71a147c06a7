/* SPDX-License-Identifier: MIT */
/* Internal structures of the tokenizer (libtx/tokenizer/). */
#ifndef TX_TOK_INTERNAL_H
#define TX_TOK_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <tx/tx_tokenizer.h>

#include <tx-internal/tx_errors.h>

/* Largest token id accepted in a file (keeps a hostile file from making us
 * allocate gigabytes for the id table). */
#define TOK_MAX_ID (1u << 24)
/* the largest id is below 2 x (vocab + added tokens) + this (tok_load.c) */
#define TOK_ID_SLACK 65536u
/* Words longer than this are not cached (as HF's BPE cache). */
#define TOK_CACHE_MAX_WORD 256
/* Cache slots (power of two) and the entry count at which inserting stops. */
#define TOK_CACHE_SLOTS (1u << 16)
#define TOK_CACHE_MAX_ENTRIES (1u << 15)

/* ---------------------------------------------------------------- errors */

/* Messages: tx_errbuf (tx-internal/tx_errors.h) formats into err[0..errsz-1] (if
 * err), records the message for tx_last_error() and returns the TX_E* code. */

/* ------------------------------------------------------------- loading */

/*
 * tx_tokenizer_load_buffer with options (tests and the fuzz target compare
 * the two load paths of tok_load.c):
 *   TOK_LOAD_NO_FAST    only the json-c path (the whole document as one
 *                       json-c tree)
 *   TOK_LOAD_FAST_ONLY  only the fast path (model.vocab and model.merges
 *                       read from the text); returns 1 when that path does
 *                       not apply or fails, instead of trying the other
 * Without flags: the fast path, then the json-c path when it did not give
 * a tokenizer (errors always come from the json-c path).
 */
#define TOK_LOAD_NO_FAST 1u
#define TOK_LOAD_FAST_ONLY 2u
int tok_load_buffer_ex(const void *json, size_t len, unsigned flags, struct tx_tokenizer **out,
                       char *err, size_t errsz);

/* ---------------------------------------------------------------- utf-8 */

/* Length of the well-formed UTF-8 sequence at s (n bytes available), or 0
 * if ill-formed. *cp receives the code point. */
size_t tok_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
size_t tok_utf8_encode(uint32_t cp, char *out);
/* Offset of the first ill-formed byte, or n if the text is valid. */
size_t tok_utf8_validate(const char *s, size_t n);
bool tok_is_white_space(uint32_t cp); /* Unicode White_Space */
bool tok_is_word_char(uint32_t cp);   /* regex \w (Unicode) */
bool tok_is_numeric(uint32_t cp);     /* Rust char::is_numeric (N*) */

/* --------------------------------------------------------- growable buf */

struct tok_buf {
    char *p;
    size_t len, cap;
};
int tok_buf_reserve(struct tok_buf *b, size_t extra);
int tok_buf_put(struct tok_buf *b, const void *d, size_t n);
/* Appends s with ill-formed sequences replaced by U+FFFD; returns the
 * number of bytes consumed (all of them unless `keep_tail`, in which case a
 * trailing sequence that could still be completed is left unconsumed). */
int tok_buf_put_lossy(struct tok_buf *b, const char *s, size_t n, bool keep_tail, size_t *consumed);

/* ------------------------------------------------------------ hash maps */

uint64_t tok_hash_bytes(const void *p, size_t n);

/* string -> int32 map; keys live in the tokenizer's string pool. */
struct tok_strmap {
    uint64_t *slots; /* hash tag << 32 | (entry index + 1), 0 = empty */
    size_t mask;
    uint32_t *key_off, *key_len;
    int32_t *val;
    size_t n, cap;
    const struct tok_pool *pool;
};

struct tok_pool {
    char *p;
    size_t len, cap;
};
/* Adds n bytes (plus a NUL) to the pool; returns the offset, or TX_EINVAL
 * (the pool would pass 2^32 bytes) or TX_ENOMEM. */
int64_t tok_pool_add(struct tok_pool *pool, const void *d, size_t n);

int tok_strmap_init(struct tok_strmap *m, const struct tok_pool *pool, size_t expect);
void tok_strmap_free(struct tok_strmap *m);
/* Inserts or overwrites. The key must already be in the pool. */
int tok_strmap_put(struct tok_strmap *m, uint32_t key_off, uint32_t key_len, int32_t val);
/* Returns the value or -1. */
int32_t tok_strmap_get(const struct tok_strmap *m, const char *key, size_t len);

/* (a, b) -> (rank, new id) map for merges. */
struct tok_pairmap {
    uint64_t *keys; /* (a << 32 | b) + 1, 0 = empty */
    uint32_t *rank, *new_id;
    size_t mask, n;
};
int tok_pairmap_init(struct tok_pairmap *m, size_t expect);
void tok_pairmap_free(struct tok_pairmap *m);
void tok_pairmap_put(struct tok_pairmap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t new_id);
/* Returns true and fills rank/new_id if the pair merges. */
static inline bool tok_pairmap_get(const struct tok_pairmap *m, uint32_t a, uint32_t b,
                                   uint32_t *rank, uint32_t *new_id)
{
    uint64_t key = (((uint64_t)a << 32) | b) + 1;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 20) & m->mask;
    for (;;) {
        uint64_t k = m->keys[i];
        if (k == key) {
            *rank = m->rank[i];
            *new_id = m->new_id[i];
            return true;
        }
        if (k == 0)
            return false;
        i = (i + 1) & m->mask;
    }
}

/* ------------------------------------------------------ added tokens */

struct tok_added {
    int32_t id;
    uint32_t off, len;             /* content in the pool */
    uint32_t match_off, match_len; /* normalized content for normalized tokens */
    bool special, single_word, lstrip, rstrip, normalized;
};

/* Byte trie over added-token contents, leftmost-longest matching. */
struct tok_trie_node {
    int32_t first_child, next_sibling;
    int32_t added; /* index into tok->added or -1 */
    unsigned char byte;
};
struct tok_trie {
    struct tok_trie_node *nodes;
    size_t n, cap;
    uint8_t first_byte[32]; /* bitset of bytes that start a token */
};

/* ------------------------------------------------------ pipeline parts */

enum tok_nf { TOK_NF_NFC, TOK_NF_NFD, TOK_NF_NFKC, TOK_NF_NFKD };

enum tok_split_behavior {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS,
};

enum tok_pt_type { TOK_PT_SPLIT, TOK_PT_BYTELEVEL, TOK_PT_DIGITS };

struct tok_pretok {
    enum tok_pt_type type;
    /* Split */
    pcre2_code *re; /* NULL: empty String pattern (never matches) */
    enum tok_split_behavior behavior;
    bool invert;
    /* ByteLevel */
    bool add_prefix_space, use_regex;
    /* Digits */
    bool individual_digits;
};

enum tok_decoder { TOK_DEC_NONE, TOK_DEC_BYTELEVEL };

/* ------------------------------------------------------------- cache */

struct tok_cache_entry {
    uint64_t hash;
    uint32_t key_len, n_ids;
    /* followed by int32_t ids[n_ids], then the key bytes */
};

struct tok_cache {
    pthread_rwlock_t lock;
    struct tok_cache_entry **slots;
    size_t n;
    bool ok;
};

/* --------------------------------------------------------- tokenizer */

struct tx_tokenizer {
    struct tok_pool pool;

    /* id table */
    uint32_t n_ids;    /* max id + 1 */
    uint32_t *tok_off; /* token string per id (pool offset) */
    uint32_t *tok_len; /* UINT32_MAX: no token with this id */
    uint32_t *dec_off; /* decoded bytes per id */
    uint32_t *dec_len;
    uint8_t *id_flags; /* TOK_ID_* */

    /* model */
    struct tok_strmap vocab;
    struct tok_pairmap merges;
    int32_t char_id[512];           /* single-code-point tokens below U+0200 */
    int64_t prefix_off, suffix_off; /* continuing_subword_prefix / end_of_word_suffix */
    uint32_t prefix_len, suffix_len;
    int32_t unk_id; /* -1: none */
    bool fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_fallback_id[256];

    /* added tokens */
    struct tok_added *added;
    size_t n_added;
    struct tok_strmap added_map;
    struct tok_trie trie_raw, trie_norm;

    /* normalizer */
    enum tok_nf *nf;
    size_t n_nf;

    /* pre-tokenizers, flattened */
    struct tok_pretok *pt;
    size_t n_pt;
    pcre2_code *gpt2_re; /* ByteLevel use_regex */

    /* post-processor (single sequence) */
    int32_t *post_prefix, *post_suffix;
    size_t n_post_prefix, n_post_suffix;

    enum tok_decoder decoder;

    struct tok_cache cache;
};

#define TOK_ID_PRESENT 1u
#define TOK_ID_ADDED 2u
#define TOK_ID_SPECIAL 4u

/* Byte-level alphabet (GPT-2): printable Latin-1 bytes stand for
 * themselves, the 68 others (controls, space, DEL, NBSP, soft hyphen) are
 * moved, in byte order, to U+0100..U+0143. */
static inline uint32_t tok_byte_to_cp(unsigned b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
        return b;
    if (b <= 32)
        return 256 + b;
    if (b <= 160)
        return 256 + 33 + (b - 127);
    return 256 + 33 + 34; /* 173 */
}

/* -1 if cp is not in the alphabet. */
static inline int tok_cp_to_byte(uint32_t cp)
{
    if (cp < 256)
        return ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || cp >= 174) ? (int)cp : -1;
    if (cp <= 288)
        return (int)(cp - 256);
    if (cp <= 322)
        return (int)(cp - 289 + 127);
    if (cp == 323)
        return 173;
    return TX_NONE;
}

/* Added tokens first, then the model vocabulary; -1 if absent. */
int32_t tok_lookup(const struct tx_tokenizer *tok, const char *token, size_t len);

/* Applies the normalizers to s; *out is malloc()ed (NUL-terminated).
 * TX_EINVAL if s is not valid UTF-8. */
int tok_normalize(const struct tx_tokenizer *tok, const char *s, size_t n, char **out,
                  size_t *out_len);

/* load helpers */
int tok_trie_add(struct tok_trie *t, const char *s, size_t n, int32_t added_idx);
void tok_trie_free(struct tok_trie *t);
pcre2_code *tok_regex_compile(const char *pattern, size_t len, bool literal, char *err,
                              size_t errsz, int *rc);

/* encode internals */
struct tok_range {
    size_t start, end;
};
int tok_encode_ex(const struct tx_tokenizer *tok, const char *text, size_t len, unsigned flags,
                  const struct tok_range *literal, size_t n_literal, int32_t **ids, size_t *n_ids,
                  char *err, size_t errsz);

/* BPE on one pre-token (in the model's alphabet). Appends ids to *out. */
struct tok_ids {
    int32_t *v;
    size_t n, cap;
};
int tok_ids_push(struct tok_ids *ids, int32_t id);
struct tok_bpe_scratch;
struct tok_bpe_scratch *tok_bpe_scratch_new(void);
void tok_bpe_scratch_free(struct tok_bpe_scratch *s);
int tok_bpe_word(const struct tx_tokenizer *tok, struct tok_bpe_scratch *s, const char *w, size_t n,
                 struct tok_ids *out);

int tok_cache_init(struct tok_cache *c);
void tok_cache_free(struct tok_cache *c);

#endif
