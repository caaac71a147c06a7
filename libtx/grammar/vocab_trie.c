/* SPDX-License-Identifier: MIT */
/*
 * The vocabulary as a trie of its tokens' bytes, built once per tokenizer,
 * and the allowed-token mask of a matcher state: a depth-first walk of the
 * trie that advances the matcher byte by byte and prunes a subtree as soon
 * as the grammar refuses its prefix (llama.cpp's candidate rejection, over
 * a trie so that shared prefixes are matched once). docs/grammar.md.
 */
#include <tx-internal/tx_errors.h>
#include "grammar/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

struct tnode {
    uint32_t child, sibling; /* first child, next sibling */
    int32_t tok;             /* first id whose bytes end here, -1: none */
    uint8_t byte;
};

struct txg_vocab {
    struct tnode *t;
    size_t n, cap;
    int32_t *tok_next; /* [n_ids] the next id with the same bytes, -1 */
    size_t n_ids;
};

static uint32_t add_node(struct txg_vocab *v, uint8_t byte)
{
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 4096;
        struct tnode *q = realloc(v->t, nc * sizeof(*q));
        if (!q)
            return NONE;
        v->t = q;
        v->cap = nc;
    }
    v->t[v->n] = (struct tnode){NONE, NONE, -1, byte};
    return (uint32_t)v->n++;
}

void txg_vocab_free(struct txg_vocab *v)
{
    if (!v)
        return;
    free(v->t);
    free(v->tok_next);
    free(v);
}

/* The nodes renumbered in depth-first order, the order of the mask's walk:
 * it then reads the array front to back instead of chasing pointers across
 * it (the walk is bound by memory; 0, or TX_ENOMEM). */
static int relayout(struct txg_vocab *v)
{
    uint32_t *order = malloc(v->n * sizeof(*order)), *stack = malloc(v->n * sizeof(*stack));
    uint32_t *newid = malloc(v->n * sizeof(*newid));
    struct tnode *t = malloc(v->n * sizeof(*t));
    if (!order || !stack || !newid || !t) {
        free(order);
        free(stack);
        free(newid);
        free(t);
        return TX_ENOMEM;
    }
    size_t n = 0, sp = 0;
    stack[sp++] = 0;
    while (sp) {
        uint32_t x = stack[--sp];
        newid[x] = (uint32_t)n;
        order[n++] = x;
        /* children pushed last-first so that the first child comes next */
        size_t first = sp;
        for (uint32_t c = v->t[x].child; c != NONE; c = v->t[c].sibling)
            stack[sp++] = c;
        for (size_t a = first, b = sp; b > a + 1; a++, b--) {
            uint32_t tmp = stack[a];
            stack[a] = stack[b - 1];
            stack[b - 1] = tmp;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct tnode o = v->t[order[i]];
        t[i] = (struct tnode){o.child == NONE ? NONE : newid[o.child],
                              o.sibling == NONE ? NONE : newid[o.sibling], o.tok, o.byte};
    }
    free(v->t);
    v->t = t;
    v->cap = v->n;
    free(order);
    free(stack);
    free(newid);
    return 0;
}

struct txg_vocab *txg_vocab_new(size_t n, const char *(*piece)(void *user, int32_t id,
                                                                size_t *len),
                                void *user)
{
    struct txg_vocab *v = calloc(1, sizeof(*v));
    if (!v)
        return NULL;
    v->n_ids = n;
    v->tok_next = malloc((n ? n : 1) * sizeof(*v->tok_next));
    if (!v->tok_next || add_node(v, 0) == NONE) {
        txg_vocab_free(v);
        return NULL;
    }
    for (size_t id = 0; id < n; id++) {
        v->tok_next[id] = -1;
        size_t len = 0;
        const char *p = piece(user, (int32_t)id, &len);
        if (!p || !len)
            continue;
        uint32_t at = 0;
        for (size_t i = 0; i < len; i++) {
            uint8_t b = (uint8_t)p[i];
            uint32_t c = v->t[at].child, prev = NONE;
            while (c != NONE && v->t[c].byte != b) {
                prev = c;
                c = v->t[c].sibling;
            }
            if (c == NONE) {
                c = add_node(v, b);
                if (c == NONE) {
                    txg_vocab_free(v);
                    return NULL;
                }
                if (prev == NONE)
                    v->t[at].child = c;
                else
                    v->t[prev].sibling = c;
            }
            at = c;
        }
        v->tok_next[id] = v->t[at].tok;
        v->t[at].tok = (int32_t)id;
    }
    if (relayout(v)) {
        txg_vocab_free(v);
        return NULL;
    }
    return v;
}

size_t txg_vocab_size(const struct txg_vocab *v)
{
    return v->n_ids;
}

static size_t walk(const struct txg_vocab *v, struct txg_matcher *m, uint32_t node,
                   const struct txg_state *st, uint32_t *mask)
{
    size_t count = 0;
    for (uint32_t c = v->t[node].child; c != NONE; c = v->t[c].sibling) {
        size_t n0, h0;
        txg_matcher_mark(m, &n0, &h0);
        struct txg_state nx;
        if (!txg_matcher_step(m, st, v->t[c].byte, &nx)) {
            for (int32_t id = v->t[c].tok; id >= 0; id = v->tok_next[id]) {
                mask[id / 32] |= 1u << (id % 32);
                count++;
            }
            if (v->t[c].child != NONE)
                count += walk(v, m, c, &nx, mask);
        }
        txg_matcher_release(m, n0, h0);
    }
    return count;
}

size_t txg_vocab_mask(const struct txg_vocab *v, struct txg_matcher *m, const int32_t *eos,
                      int n_eos, uint32_t *mask)
{
    memset(mask, 0, (v->n_ids + 31) / 32 * 4);
    if (txg_matcher_failed(m))
        return 0;
    struct txg_state st;
    txg_matcher_state(m, &st);
    size_t count = walk(v, m, 0, &st, mask);
    if (txg_matcher_done(m))
        for (int i = 0; i < n_eos; i++)
            if (eos[i] >= 0 && (size_t)eos[i] < v->n_ids &&
                !(mask[eos[i] / 32] >> (eos[i] % 32) & 1u)) {
                mask[eos[i] / 32] |= 1u << (eos[i] % 32);
                count++;
            }
    return count;
}
