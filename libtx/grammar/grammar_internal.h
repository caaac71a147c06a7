/* SPDX-License-Identifier: MIT */
/*
 * The grammar engine's internals: the matcher's state as vocab_trie.c
 * walks it (a set of stacks -- heads into the node pool -- and the bytes
 * of an incomplete UTF-8 character), and the array growth they share.
 */
#ifndef TXG_GRAMMAR_INTERNAL_H
#define TXG_GRAMMAR_INTERNAL_H

#include <tx-internal/tx_grammar.h>

/* *p (of *cap elements of elem bytes) grown to hold need: 0, or TX_ENOMEM
 * (*p unchanged). */
int txg_grow(void **p, size_t *cap, size_t need, size_t elem);

struct txg_state {
    size_t h0, h1;   /* heads[h0, h1) */
    uint8_t pend[4]; /* bytes of an incomplete character */
    uint8_t n_pend, need;
};

/* The current state of m. */
void txg_matcher_state(const struct txg_matcher *m, struct txg_state *st);
/* in advanced by byte b into *out (new heads and nodes are appended to m's
 * pools); 0, or TX_EINVAL when the grammar does not allow b there. */
int txg_matcher_step(struct txg_matcher *m, const struct txg_state *in, uint8_t b,
                     struct txg_state *out);
/* The pools' sizes, and truncation back to them (what steps appended). */
void txg_matcher_mark(const struct txg_matcher *m, size_t *nodes, size_t *heads);
void txg_matcher_release(struct txg_matcher *m, size_t nodes, size_t heads);
/* Whether state st is a complete sentence. */
int txg_matcher_state_done(const struct txg_matcher *m, const struct txg_state *st);

#endif
