/* SPDX-License-Identifier: MIT */
/*
 * Grammar-constrained sampling (docs/grammar.md): GBNF grammars (llama.cpp's
 * format), JSON schemas converted to GBNF, and a matcher that gives the
 * tokens of a vocabulary the grammar allows next. The mask it computes is
 * what glm_session_set_token_mask hands to the device's SAMPLE.
 *
 *   grammar/gbnf_parse.c    GBNF text -> struct txg_grammar (compiled rules)
 *   grammar/json_schema.c   JSON schema -> GBNF text
 *   grammar/matcher.c       the pushdown automaton over UTF-8 bytes
 *   grammar/vocab_trie.c    the vocabulary's byte strings as a trie, the
 *                           allowed-token mask of a matcher state
 *
 * Private to libtx and the tools (libtx/include): no ABI promise.
 */
#ifndef TX_GRAMMAR_H
#define TX_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* ---- compiled grammar (gbnf_parse.c) ------------------------------------ */

enum txg_elem_type {
    TXG_END = 0,   /* end of an alternative */
    TXG_REF = 1,   /* a rule: a = rule index */
    TXG_CHARS = 2, /* one code point in ranges [a, a + b) of rng (pairs), neg: not in them */
};

struct txg_elem {
    uint8_t type;
    uint8_t neg;
    uint32_t a, b;
};

struct txg_rule {
    char *name;
    uint32_t first_alt, n_alts; /* alternatives alts[first_alt ..] */
};

struct txg_grammar {
    struct txg_elem *el;
    size_t n_el;
    uint32_t *rng; /* [lo, hi] code point pairs, inclusive */
    size_t n_rng;
    uint32_t *alts; /* element index where each alternative starts */
    size_t n_alts;
    struct txg_rule *rules;
    size_t n_rules;
    uint32_t root;
};

/* Parse GBNF text (rules `name ::= alternatives`, "literals", [classes],
 * [^negated], ., ( groups ), * + ? {m} {m,} {m,n}, # comments) with start
 * rule "root". NULL on error with err naming the problem, its line and
 * column (an undefined rule, left recursion, a bad escape, ...). */
struct txg_grammar *txg_grammar_parse(const char *text, char *err, size_t errsz);
void txg_grammar_free(struct txg_grammar *g);

/* ---- JSON schema (json_schema.c) ---------------------------------------- */

/* The GBNF of the JSON values schema allows (malloc'd, rule "root"), or
 * NULL with err naming the unsupported keyword or malformed part by its
 * JSON pointer. schema NULL: any JSON object (response_format json_object). */
char *txg_json_schema_to_gbnf(json_object *schema, char *err, size_t errsz);
/* The same without a root: the rules prefixed by `prefix`, the schema's
 * value rule named `prefix` "top" (to embed a schema in a larger grammar:
 * tool calls); the JSON helper rules (string, number, ws...) come with it,
 * prefixed too. */
char *txg_json_schema_rules(json_object *schema, const char *prefix, char *err, size_t errsz);

/* ---- matcher (matcher.c) ------------------------------------------------ */

struct txg_matcher;

/* A matcher at the start of g (g must outlive it). NULL: out of memory. */
struct txg_matcher *txg_matcher_new(const struct txg_grammar *g);
void txg_matcher_free(struct txg_matcher *m);
/* Advance by n bytes: 0, or TX_EINVAL (-1) when the grammar does not allow
 * them (the matcher is then unchanged). */
int txg_matcher_accept(struct txg_matcher *m, const char *bytes, size_t n);
/* Whether the text so far is a complete sentence of the grammar. */
int txg_matcher_done(const struct txg_matcher *m);
/* Whether nothing can follow (complete and no stack can take more). */
int txg_matcher_finished(const struct txg_matcher *m);
/* The matcher's state as words (its stacks' positions, the pending bytes):
 * two matchers of one grammar with the same key allow the same tokens.
 * Returns the key's length (written up to cap words). */
size_t txg_matcher_key(const struct txg_matcher *m, uint32_t *key, size_t cap);
/* Non-zero when the matcher overflowed its limits (a too ambiguous grammar):
 * it then allows nothing. */
int txg_matcher_failed(const struct txg_matcher *m);

/* ---- vocabulary (vocab_trie.c) ------------------------------------------ */

struct txg_vocab;

/* The trie of a vocabulary of n ids: piece(user, id, &len) gives id's bytes,
 * or NULL for an id the grammar never produces (special and stop tokens).
 * NULL: out of memory. */
struct txg_vocab *txg_vocab_new(size_t n, const char *(*piece)(void *user, int32_t id, size_t *len),
                                void *user);
void txg_vocab_free(struct txg_vocab *v);
size_t txg_vocab_size(const struct txg_vocab *v);
/* The allowed-token mask of m's state into mask[(n + 31) / 32] (bit i of
 * word i / 32 = id i): the ids whose bytes the grammar accepts next, plus
 * the end ids (eos, n_eos of them) when the grammar is complete. Returns
 * how many ids are allowed (0: none, the grammar is stuck). */
size_t txg_vocab_mask(const struct txg_vocab *v, struct txg_matcher *m, const int32_t *eos,
                      int n_eos, uint32_t *mask);

/* A cache of masks by matcher state (txg_matcher_key) for one grammar and
 * vocabulary: a state met again (inside a long string, the same object
 * shape) gets its mask without a trie walk. entries: how many masks it
 * keeps (least recently used out). */
struct txg_mask_cache;
struct txg_mask_cache *txg_mask_cache_new(size_t n_ids, int entries);
void txg_mask_cache_free(struct txg_mask_cache *c);
/* txg_vocab_mask through cache c */
size_t txg_vocab_mask_cached(const struct txg_vocab *v, struct txg_mask_cache *c,
                             struct txg_matcher *m, const int32_t *eos, int n_eos, uint32_t *mask);

#endif
