/* SPDX-License-Identifier: MIT */
/*
 * The grammar matcher: a pushdown automaton over UTF-8 bytes. Its state is
 * a set of stacks of grammar positions (llama.cpp's grammar stacks); each
 * stack's top is a code-point class to match next, or the stack is empty
 * (the sentence may end here). Stacks are linked lists in a node pool that
 * shares tails; a byte that completes a UTF-8 character advances every
 * stack whose class takes it, a byte that does not yet is kept pending and
 * checked against the classes' ranges. docs/grammar.md.
 */
#include <tx-internal/tx_errors.h>
#include "grammar/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX
#define ACCEPT (UINT32_MAX - 1) /* a head: the empty stack */
#define MAX_STACKS 512          /* per state: more is a too ambiguous grammar */
#define MAX_EXPAND_DEPTH 4096
#define MAX_NODES (1u << 22) /* 32 MiB of nodes */

struct node {
    uint32_t pos, parent;
};

struct txg_matcher {
    const struct txg_grammar *g;
    struct node *nodes;
    size_t n_nodes, cap_nodes;
    uint32_t *heads;
    size_t n_heads, cap_heads;
    struct txg_state cur;
    int failed;
};

int txg_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q)
        return TX_ENOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

static uint32_t new_node(struct txg_matcher *m, uint32_t pos, uint32_t parent)
{
    if (m->n_nodes >= MAX_NODES ||
        txg_grow((void **)&m->nodes, &m->cap_nodes, m->n_nodes + 1, sizeof(*m->nodes))) {
        m->failed = 1;
        return NIL;
    }
    m->nodes[m->n_nodes] = (struct node){pos, parent};
    return (uint32_t)m->n_nodes++;
}

static int same_stack(const struct txg_matcher *m, uint32_t a, uint32_t b)
{
    while (a != b) {
        if (a == NIL || b == NIL || a == ACCEPT || b == ACCEPT)
            return 0;
        if (m->nodes[a].pos != m->nodes[b].pos)
            return 0;
        a = m->nodes[a].parent;
        b = m->nodes[b].parent;
    }
    return 1;
}

/* add head h to the state being built from index out0 (duplicates dropped) */
static void add_head(struct txg_matcher *m, size_t out0, uint32_t h)
{
    for (size_t i = out0; i < m->n_heads; i++)
        if (same_stack(m, m->heads[i], h))
            return;
    if (m->n_heads - out0 >= MAX_STACKS ||
        txg_grow((void **)&m->heads, &m->cap_heads, m->n_heads + 1, sizeof(*m->heads))) {
        m->failed = 1;
        return;
    }
    m->heads[m->n_heads++] = h;
}

static void expand(struct txg_matcher *m, size_t out0, uint32_t pos, uint32_t parent, uint32_t self,
                   int depth);

/* pop: continue with the parent's position */
static void pop_to(struct txg_matcher *m, size_t out0, uint32_t parent, int depth)
{
    if (parent == NIL)
        add_head(m, out0, ACCEPT);
    else
        expand(m, out0, m->nodes[parent].pos, m->nodes[parent].parent, parent, depth + 1);
}

/* The stacks whose tops are classes reached from position pos over parent
 * (self: an existing node for (pos, parent), or NIL). */
static void expand(struct txg_matcher *m, size_t out0, uint32_t pos, uint32_t parent, uint32_t self,
                   int depth)
{
    if (m->failed)
        return;
    if (depth > MAX_EXPAND_DEPTH) {
        m->failed = 1;
        return;
    }
    const struct txg_grammar *g = m->g;
    const struct txg_elem *e = &g->el[pos];
    switch (e->type) {
    case TXG_END:
        pop_to(m, out0, parent, depth);
        break;
    case TXG_CHARS: {
        uint32_t n = self != NIL ? self : new_node(m, pos, parent);
        if (n != NIL)
            add_head(m, out0, n);
        break;
    }
    case TXG_REF: {
        uint32_t cont = g->el[pos + 1].type == TXG_END ? parent : new_node(m, pos + 1, parent);
        if (m->failed)
            return;
        const struct txg_rule *r = &g->rules[e->a];
        for (uint32_t a = 0; a < r->n_alts && !m->failed; a++) {
            uint32_t at = g->alts[r->first_alt + a];
            if (g->el[at].type == TXG_END)
                pop_to(m, out0, cont, depth);
            else
                expand(m, out0, at, cont, NIL, depth + 1);
        }
        break;
    }
    default:
        m->failed = 1;
    }
}

static int class_has(const struct txg_grammar *g, const struct txg_elem *e, uint32_t cp)
{
    const uint32_t *r = e->b ? g->rng + e->a : NULL; /* "." has no ranges */
    int in = 0;
    for (uint32_t i = 0; i < e->b && !in; i++)
        in = cp >= r[2 * i] && cp <= r[2 * i + 1];
    return in != e->neg;
}

/* whether class e may take a code point in [lo, hi] */
static int class_meets(const struct txg_grammar *g, const struct txg_elem *e, uint32_t lo,
                       uint32_t hi)
{
    const uint32_t *r = e->b ? g->rng + e->a : NULL; /* "." has no ranges */
    for (uint32_t i = 0; i < e->b; i++) {
        if (e->neg && r[2 * i] <= lo && r[2 * i + 1] >= hi)
            return 0; /* all of them excluded */
        if (!e->neg && r[2 * i] <= hi && r[2 * i + 1] >= lo)
            return 1;
    }
    return e->neg;
}

/* advance the heads [in->h0, in->h1) by code point cp into *out */
static int advance(struct txg_matcher *m, const struct txg_state *in, uint32_t cp,
                   struct txg_state *out)
{
    const struct txg_grammar *g = m->g;
    size_t out0 = m->n_heads;
    for (size_t i = in->h0; i < in->h1 && !m->failed; i++) {
        uint32_t h = m->heads[i];
        if (h == ACCEPT)
            continue;
        const struct node *n = &m->nodes[h];
        if (!class_has(g, &g->el[n->pos], cp))
            continue;
        uint32_t parent = n->parent;
        if (g->el[n->pos + 1].type == TXG_END)
            pop_to(m, out0, parent, 0);
        else
            expand(m, out0, n->pos + 1, parent, NIL, 0);
    }
    memset(out, 0, sizeof(*out));
    out->h0 = out0;
    out->h1 = m->n_heads;
    if (m->failed) {
        out->h1 = out0;
        return TX_EINVAL;
    }
    return out->h1 > out->h0 ? 0 : -1;
}

static int utf8_len(uint8_t b)
{
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        return 2;
    if (b >= 0xE0 && b <= 0xEF)
        return 3;
    if (b >= 0xF0 && b <= 0xF4)
        return 4;
    return 0; /* a continuation byte, C0/C1 or F5.. */
}

static uint32_t decode(const uint8_t *p, int n)
{
    uint32_t cp = n == 1 ? p[0] : n == 2 ? p[0] & 0x1Fu : n == 3 ? p[0] & 0x0Fu : p[0] & 0x07u;
    for (int i = 1; i < n; i++)
        cp = cp << 6 | (p[i] & 0x3Fu);
    return cp;
}

int txg_matcher_step(struct txg_matcher *m, const struct txg_state *in, uint8_t b,
                     struct txg_state *out)
{
    if (m->failed)
        return TX_EINVAL;
    uint8_t buf[4];
    int n_have = in->n_pend, need;
    if (!n_have) {
        need = utf8_len(b);
        if (!need)
            return TX_EINVAL;
    } else {
        need = in->need;
        if ((b & 0xC0) != 0x80)
            return TX_EINVAL;
    }
    memcpy(buf, in->pend, (size_t)n_have);
    buf[n_have++] = b;
    if (n_have == need) {
        uint32_t cp = decode(buf, need);
        /* overlong forms, surrogates and beyond U+10FFFF are not UTF-8 */
        if ((need == 3 && cp < 0x800) || (need == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return TX_EINVAL;
        return advance(m, in, cp, out);
    }
    /* incomplete: some class must take a character starting so */
    uint8_t lo[4], hi[4];
    memcpy(lo, buf, (size_t)n_have);
    memcpy(hi, buf, (size_t)n_have);
    for (int i = n_have; i < need; i++) {
        lo[i] = 0x80;
        hi[i] = 0xBF;
    }
    uint32_t clo = decode(lo, need), chi = decode(hi, need);
    /* the shortest forms only: E0 and F0 begin no character below these */
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (clo < min_cp[need])
        clo = min_cp[need];
    if (chi > 0x10FFFF)
        chi = 0x10FFFF;
    if (clo > chi)
        return TX_EINVAL;
    const struct txg_grammar *g = m->g;
    int any = 0;
    for (size_t i = in->h0; i < in->h1 && !any; i++) {
        uint32_t h = m->heads[i];
        any = h != ACCEPT && class_meets(g, &g->el[m->nodes[h].pos], clo, chi);
    }
    if (!any)
        return TX_EINVAL;
    *out = *in;
    memcpy(out->pend, buf, (size_t)n_have);
    out->n_pend = (uint8_t)n_have;
    out->need = (uint8_t)need;
    return 0;
}

void txg_matcher_state(const struct txg_matcher *m, struct txg_state *st)
{
    *st = m->cur;
}

void txg_matcher_mark(const struct txg_matcher *m, size_t *nodes, size_t *heads)
{
    *nodes = m->n_nodes;
    *heads = m->n_heads;
}

void txg_matcher_release(struct txg_matcher *m, size_t nodes, size_t heads)
{
    m->n_nodes = nodes;
    m->n_heads = heads;
}

int txg_matcher_state_done(const struct txg_matcher *m, const struct txg_state *st)
{
    if (st->n_pend)
        return 0;
    for (size_t i = st->h0; i < st->h1; i++)
        if (m->heads[i] == ACCEPT)
            return 1;
    return 0;
}

/* copy the stack h into the pools of t (no sharing: stacks are short) */
static uint32_t copy_stack(struct txg_matcher *t, const struct txg_matcher *m, uint32_t h)
{
    if (h == NIL || h == ACCEPT)
        return h;
    uint32_t parent = copy_stack(t, m, m->nodes[h].parent);
    if (t->failed)
        return NIL;
    return new_node(t, m->nodes[h].pos, parent);
}

/* make state st the current one, dropping every other node and head */
static int compact(struct txg_matcher *m, const struct txg_state *st)
{
    struct txg_matcher t;
    memset(&t, 0, sizeof(t));
    t.g = m->g;
    for (size_t i = st->h0; i < st->h1 && !t.failed; i++) {
        uint32_t h = copy_stack(&t, m, m->heads[i]);
        if (!t.failed &&
            txg_grow((void **)&t.heads, &t.cap_heads, t.n_heads + 1, sizeof(*t.heads)))
            t.failed = 1;
        if (!t.failed)
            t.heads[t.n_heads++] = h;
    }
    if (t.failed) {
        free(t.nodes);
        free(t.heads);
        return TX_EINVAL;
    }
    free(m->nodes);
    free(m->heads);
    m->nodes = t.nodes;
    m->n_nodes = t.n_nodes;
    m->cap_nodes = t.cap_nodes;
    m->heads = t.heads;
    m->n_heads = t.n_heads;
    m->cap_heads = t.cap_heads;
    m->cur = *st;
    m->cur.h0 = 0;
    m->cur.h1 = t.n_heads;
    return 0;
}

struct txg_matcher *txg_matcher_new(const struct txg_grammar *g)
{
    struct txg_matcher *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->g = g;
    const struct txg_rule *r = &g->rules[g->root];
    for (uint32_t a = 0; a < r->n_alts && !m->failed; a++)
        expand(m, 0, g->alts[r->first_alt + a], NIL, NIL, 0);
    m->cur.h0 = 0;
    m->cur.h1 = m->n_heads;
    if (m->failed) {
        txg_matcher_free(m);
        return NULL;
    }
    return m;
}

void txg_matcher_free(struct txg_matcher *m)
{
    if (!m)
        return;
    free(m->nodes);
    free(m->heads);
    free(m);
}

int txg_matcher_accept(struct txg_matcher *m, const char *bytes, size_t n)
{
    if (m->failed)
        return TX_EINVAL;
    size_t n0, h0;
    txg_matcher_mark(m, &n0, &h0);
    struct txg_state st = m->cur, nx;
    for (size_t i = 0; i < n; i++) {
        if (txg_matcher_step(m, &st, (uint8_t)bytes[i], &nx)) {
            int ovf = m->failed;
            txg_matcher_release(m, n0, h0);
            m->failed = ovf;
            return TX_EINVAL;
        }
        st = nx;
    }
    if (compact(m, &st)) {
        txg_matcher_release(m, n0, h0);
        return TX_EINVAL;
    }
    return 0;
}

int txg_matcher_done(const struct txg_matcher *m)
{
    return !m->failed && txg_matcher_state_done(m, &m->cur);
}

int txg_matcher_finished(const struct txg_matcher *m)
{
    if (!txg_matcher_done(m))
        return 0;
    for (size_t i = m->cur.h0; i < m->cur.h1; i++)
        if (m->heads[i] != ACCEPT)
            return 0;
    return 1;
}

int txg_matcher_failed(const struct txg_matcher *m)
{
    return m->failed;
}

size_t txg_matcher_key(const struct txg_matcher *m, uint32_t *key, size_t cap)
{
    size_t n = 0;
    const struct txg_state *st = &m->cur;
    if (n < cap)
        key[n] = (uint32_t)st->n_pend << 24 | (uint32_t)st->need << 16;
    n++;
    for (int i = 0; i < st->n_pend; i++, n++)
        if (n < cap)
            key[n] = st->pend[i];
    for (size_t i = st->h0; i < st->h1; i++) {
        for (uint32_t h = m->heads[i]; h != NIL && h != ACCEPT; h = m->nodes[h].parent, n++)
            if (n < cap)
                key[n] = m->nodes[h].pos;
        if (n < cap)
            key[n] = m->heads[i] == ACCEPT ? ACCEPT : NIL; /* the stack's end */
        n++;
    }
    return n;
}
