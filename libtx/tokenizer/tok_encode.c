/* SPDX-License-Identifier: MIT */
/*
 * Encoding pipeline, in HF tokenizers' order:
 *   1. split off added tokens that are not normalized (on the raw text);
 *   2. normalize the remaining pieces, split off normalized added tokens;
 *   3. run the pre-tokenizers on the remaining pieces;
 *   4. run the BPE model on every pre-token;
 *   5. (TX_TOKENIZER_ADD_SPECIAL) add the post-processor's tokens.
 * Pieces are (offset, length) views of one growing arena; a piece that is
 * already an added token carries its id.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

struct seg {
    size_t off, len;
    int32_t id; /* >= 0: an added token, no further processing */
};

struct segs {
    struct seg *v;
    size_t n, cap;
};

struct span {
    size_t start, end;
    bool match;
};

struct spans {
    struct span *v;
    size_t n, cap;
};

struct enc {
    const struct tx_tokenizer *tok;
    unsigned flags;
    const struct tok_range *literal;
    size_t n_literal;
    struct tok_buf arena;
    struct segs cur, next;
    struct spans sp;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    struct tok_bpe_scratch *bpe;
    struct tok_ids out;
    char *err;
    size_t errsz;
};

static int segs_push(struct segs *s, size_t off, size_t len, int32_t id)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct seg *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return TX_ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (struct seg){off, len, id};
    return 0;
}

static int spans_push(struct spans *s, size_t a, size_t b, bool m)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct span *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return TX_ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (struct span){a, b, m};
    return 0;
}

static void swap_segs(struct enc *e)
{
    struct segs t = e->cur;
    e->cur = e->next;
    e->next = t;
    e->next.n = 0;
}

static int oom(struct enc *e)
{
    return tx_errbuf(e->err, e->errsz, TX_ENOMEM, "out of memory");
}

/* Code point ending at s[end] (end > 0). */
static uint32_t cp_before(const char *s, size_t end, size_t *start)
{
    size_t i = end - 1;
    while (i > 0 && end - i < 4 && ((unsigned char)s[i] & 0xC0) == 0x80)
        i--;
    uint32_t cp;
    if (tok_utf8_decode((const unsigned char *)s + i, end - i, &cp) != end - i) {
        cp = (unsigned char)s[end - 1];
        i = end - 1;
    }
    *start = i;
    return cp;
}

static uint32_t cp_at(const char *s, size_t i, size_t n, size_t *len)
{
    uint32_t cp;
    size_t l = tok_utf8_decode((const unsigned char *)s + i, n - i, &cp);
    if (!l) {
        cp = (unsigned char)s[i];
        l = 1;
    }
    *len = l;
    return cp;
}

static bool overlaps_literal(const struct enc *e, size_t a, size_t b)
{
    for (size_t i = 0; i < e->n_literal; i++)
        if (a < e->literal[i].end && b > e->literal[i].start)
            return true;
    return false;
}

/* ------------------------------------------------------ added tokens */

/* HF AddedVocabulary::find_matches on one piece; pushes the resulting
 * pieces onto e->next. `raw` pieces have arena offsets equal to offsets in
 * the caller's text (for TX_CHAT_LITERAL_CONTENT ranges). */
static int split_added(struct enc *e, const struct tok_trie *t, const struct seg *sg, bool raw)
{
    const struct tx_tokenizer *tok = e->tok;
    size_t n = sg->len, start_offset = 0, i = 0;
    int rc;
    while (i < n) {
        const char *s = e->arena.p + sg->off;
        unsigned char c0 = (unsigned char)s[i];
        if (!(t->first_byte[c0 >> 3] & (1u << (c0 & 7)))) {
            i++;
            continue;
        }
        int32_t node = 0, best = -1;
        size_t best_end = 0;
        for (size_t j = i; j < n; j++) {
            int32_t ch = t->nodes[node].first_child;
            while (ch >= 0 && t->nodes[ch].byte != (unsigned char)s[j])
                ch = t->nodes[ch].next_sibling;
            if (ch < 0)
                break;
            node = ch;
            if (t->nodes[node].added >= 0) {
                best = t->nodes[node].added;
                best_end = j + 1;
            }
        }
        if (best < 0) {
            i++;
            continue;
        }
        const struct tok_added *a = &tok->added[best];
        size_t ms = i, me = best_end;
        i = best_end; /* matching resumes after this match, used or not */
        if (a->special && ((e->flags & TX_TOKENIZER_NO_SPECIAL) ||
                           (raw && overlaps_literal(e, sg->off + ms, sg->off + me))))
            continue;
        if (a->single_word) {
            size_t st, l;
            bool start_space = ms == 0 || !tok_is_word_char(cp_before(s, ms, &st));
            bool stop_space = me == n || !tok_is_word_char(cp_at(s, me, n, &l));
            if (!start_space || !stop_space)
                continue;
        }
        if (a->lstrip) {
            size_t ns = ms;
            while (ns > 0) {
                size_t st;
                if (!tok_is_white_space(cp_before(s, ns, &st)))
                    break;
                ns = st;
            }
            ms = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            while (me < n) {
                size_t l;
                if (!tok_is_white_space(cp_at(s, me, n, &l)))
                    break;
                me += l;
            }
            if (me > i)
                i = me;
        }
        if (start_offset < ms &&
            (rc = segs_push(&e->next, sg->off + start_offset, ms - start_offset, -1)))
            return rc;
        if ((rc = segs_push(&e->next, sg->off + ms, me - ms, a->id)))
            return rc;
        start_offset = me;
    }
    if (start_offset < n &&
        (rc = segs_push(&e->next, sg->off + start_offset, n - start_offset, -1)))
        return rc;
    return 0;
}

/* ------------------------------------------------------------ regex */

/* All non-overlapping matches of re in s[0..n) as covering spans (HF
 * Pattern::find_matches for a regex). */
static int regex_spans(struct enc *e, const pcre2_code *re, const char *s, size_t n)
{
    size_t pos = 0, prev = 0;
    size_t last_end = (size_t)-1;
    int rc;
    e->sp.n = 0;
    if (!e->md && !(e->md = pcre2_match_data_create(1, NULL)))
        return oom(e);
    while (pos <= n) {
        int r = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, e->md, e->mctx);
        if (r == PCRE2_ERROR_NOMATCH)
            break;
        if (r == PCRE2_ERROR_JIT_STACKLIMIT && !e->jstack) {
            e->mctx = pcre2_match_context_create(NULL);
            e->jstack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, NULL);
            if (!e->mctx || !e->jstack)
                return oom(e);
            pcre2_jit_stack_assign(e->mctx, NULL, e->jstack);
            continue;
        }
        if (r < 0) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(r, msg, sizeof(msg));
            return tx_errbuf(e->err, e->errsz, TX_EINVAL, "pre-tokenizer regex failed: %s",
                             (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t ms = ov[0], me = ov[1];
        if (ms < pos || me < ms || me > n)
            return tx_errbuf(e->err, e->errsz, TX_EINVAL,
                             "pre-tokenizer regex returned an unusable match (\\K?)");
        if (ms == me && me == last_end) {
            /* no empty match right after the previous match */
            if (me >= n)
                break;
            size_t l;
            cp_at(s, me, n, &l);
            pos = me + l;
            continue;
        }
        if (prev != ms && (rc = spans_push(&e->sp, prev, ms, false)))
            return oom(e);
        if ((rc = spans_push(&e->sp, ms, me, true)))
            return oom(e);
        prev = me;
        last_end = me;
        pos = me;
    }
    if (prev != n && spans_push(&e->sp, prev, n, false))
        return oom(e);
    return 0;
}

/* Spans for a per-character predicate (HF Pattern for Fn(char)). */
static int numeric_spans(struct enc *e, const char *s, size_t n)
{
    size_t last = 0, i = 0;
    e->sp.n = 0;
    while (i < n) {
        size_t l;
        uint32_t cp = cp_at(s, i, n, &l);
        if (tok_is_numeric(cp)) {
            if (last < i && spans_push(&e->sp, last, i, false))
                return oom(e);
            if (spans_push(&e->sp, i, i + l, true))
                return oom(e);
            last = i + l;
        }
        i += l;
    }
    if (last < n && spans_push(&e->sp, last, n, false))
        return oom(e);
    return 0;
}

/* HF NormalizedString::split: applies the delimiter behavior to e->sp and
 * pushes the non-empty pieces of segment sg. */
static int apply_behavior(struct enc *e, const struct seg *sg, enum tok_split_behavior b,
                          bool invert)
{
    struct span *v = e->sp.v;
    size_t n = e->sp.n, k = 0;
    if (invert)
        for (size_t i = 0; i < n; i++)
            v[i].match = !v[i].match;
    /* Rewrite in place into kept spans; `match` becomes "remove". */
    switch (b) {
    case TOK_SPLIT_ISOLATED:
        for (size_t i = 0; i < n; i++)
            v[i].match = false;
        k = n;
        break;
    case TOK_SPLIT_REMOVED:
        k = n;
        break;
    case TOK_SPLIT_CONTIGUOUS: {
        bool prev = false;
        for (size_t i = 0; i < n; i++) {
            bool m = v[i].match;
            if (m == prev && k > 0)
                v[k - 1].end = v[i].end;
            else
                v[k++] = (struct span){v[i].start, v[i].end, false};
            prev = m;
        }
        break;
    }
    case TOK_SPLIT_MERGED_PREV: {
        bool prev = false;
        for (size_t i = 0; i < n; i++) {
            bool m = v[i].match;
            if (m && !prev && k > 0)
                v[k - 1].end = v[i].end;
            else
                v[k++] = (struct span){v[i].start, v[i].end, false};
            prev = m;
        }
        break;
    }
    case TOK_SPLIT_MERGED_NEXT: {
        /* right to left, then the result is in reverse order */
        bool prev = false;
        size_t w = n;
        for (size_t i = n; i-- > 0;) {
            bool m = v[i].match;
            struct span cur = {v[i].start, v[i].end, false};
            if (m && !prev && w < n)
                v[w].start = cur.start;
            else
                v[--w] = cur;
            prev = m;
        }
        memmove(v, v + w, (n - w) * sizeof(*v));
        k = n - w;
        break;
    }
    }
    for (size_t i = 0; i < k; i++) {
        if (v[i].match || v[i].end == v[i].start)
            continue;
        if (segs_push(&e->next, sg->off + v[i].start, v[i].end - v[i].start, -1))
            return oom(e);
    }
    return 0;
}

/* ----------------------------------------------------- pre-tokenizers */

static int bytelevel_map(struct enc *e, size_t off, size_t len)
{
    /* worst case 2 bytes per input byte */
    if (tok_buf_reserve(&e->arena, 2 * len))
        return oom(e);
    const unsigned char *s = (const unsigned char *)e->arena.p + off;
    size_t start = e->arena.len;
    char *o = e->arena.p + start;
    size_t w = 0;
    for (size_t i = 0; i < len; i++)
        w += tok_utf8_encode(tok_byte_to_cp(s[i]), o + w);
    e->arena.len += w;
    return segs_push(&e->next, start, w, -1) ? oom(e) : 0;
}

static int run_pretok(struct enc *e, const struct tok_pretok *p)
{
    int rc;
    for (size_t i = 0; i < e->cur.n; i++) {
        struct seg sg = e->cur.v[i];
        if (sg.id >= 0) {
            if (segs_push(&e->next, sg.off, sg.len, sg.id))
                return oom(e);
            continue;
        }
        switch (p->type) {
        case TOK_PT_SPLIT:
            if (!p->re) { /* empty String pattern: nothing matches */
                e->sp.n = 0;
                if (spans_push(&e->sp, 0, sg.len, false))
                    return oom(e);
            } else if ((rc = regex_spans(e, p->re, e->arena.p + sg.off, sg.len))) {
                return rc;
            }
            if ((rc = apply_behavior(e, &sg, p->behavior, p->invert)))
                return rc;
            break;
        case TOK_PT_DIGITS:
            if ((rc = numeric_spans(e, e->arena.p + sg.off, sg.len)) ||
                (rc = apply_behavior(
                     e, &sg, p->individual_digits ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS,
                     false)))
                return rc;
            break;
        case TOK_PT_BYTELEVEL: {
            if (p->add_prefix_space && e->arena.p[sg.off] != ' ') {
                if (tok_buf_reserve(&e->arena, sg.len + 1))
                    return oom(e);
                size_t start = e->arena.len;
                e->arena.p[start] = ' ';
                memcpy(e->arena.p + start + 1, e->arena.p + sg.off, sg.len);
                e->arena.len += sg.len + 1;
                sg.off = start;
                sg.len++;
            }
            size_t first = e->next.n;
            if (p->use_regex) {
                if ((rc = regex_spans(e, e->tok->gpt2_re, e->arena.p + sg.off, sg.len)) ||
                    (rc = apply_behavior(e, &sg, TOK_SPLIT_ISOLATED, false)))
                    return rc;
            } else if (segs_push(&e->next, sg.off, sg.len, -1)) {
                return oom(e);
            }
            /* map each new piece to the byte-level alphabet */
            size_t last = e->next.n;
            for (size_t k = first; k < last; k++) {
                struct seg piece = e->next.v[k];
                if ((rc = bytelevel_map(e, piece.off, piece.len)))
                    return rc;
                e->next.v[k] = e->next.v[e->next.n - 1];
                e->next.n--;
            }
            break;
        }
        }
    }
    swap_segs(e);
    return 0;
}

/* --------------------------------------------------------------- top */

static int pipeline(struct enc *e, const char *text, size_t len)
{
    const struct tx_tokenizer *tok = e->tok;
    int rc;
    if (tok_buf_put(&e->arena, text, len) || segs_push(&e->cur, 0, len, -1))
        return oom(e);

    /* 1. non-normalized added tokens on the raw text */
    if (tok->trie_raw.n) {
        for (size_t i = 0; i < e->cur.n; i++)
            if ((rc = split_added(e, &tok->trie_raw, &e->cur.v[i], true)))
                return rc == TX_ENOMEM ? oom(e) : rc;
        swap_segs(e);
    }

    /* 2. normalize, then normalized added tokens */
    if (tok->n_nf || tok->trie_norm.n) {
        for (size_t i = 0; i < e->cur.n; i++) {
            struct seg sg = e->cur.v[i];
            if (sg.id < 0 && tok->n_nf) {
                char *nrm;
                size_t nl;
                rc = tok_normalize(tok, e->arena.p + sg.off, sg.len, &nrm, &nl);
                if (rc)
                    return tx_errbuf(e->err, e->errsz, rc, "normalization failed");
                sg.off = e->arena.len;
                sg.len = nl;
                rc = tok_buf_put(&e->arena, nrm, nl);
                free(nrm);
                if (rc)
                    return oom(e);
            }
            if (sg.id < 0 && !sg.len)
                continue;
            if (sg.id < 0 && tok->trie_norm.n)
                rc = split_added(e, &tok->trie_norm, &sg, false);
            else
                rc = segs_push(&e->next, sg.off, sg.len, sg.id);
            if (rc)
                return oom(e);
        }
        swap_segs(e);
    }

    /* 3. pre-tokenizers */
    for (size_t k = 0; k < tok->n_pt; k++)
        if ((rc = run_pretok(e, &tok->pt[k])))
            return rc;

    /* 4. model */
    for (size_t i = 0; i < e->cur.n; i++) {
        const struct seg *sg = &e->cur.v[i];
        if (sg->id >= 0)
            rc = tok_ids_push(&e->out, sg->id);
        else
            rc = tok_bpe_word(tok, e->bpe, e->arena.p + sg->off, sg->len, &e->out);
        if (rc)
            return oom(e);
    }
    return 0;
}

int tok_encode_ex(const struct tx_tokenizer *tok, const char *text, size_t len, unsigned flags,
                  const struct tok_range *literal, size_t n_literal, int32_t **ids, size_t *n_ids,
                  char *err, size_t errsz)
{
    if (err && errsz)
        err[0] = 0;
    if (!tok || !ids || !n_ids || (!text && len))
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    *ids = NULL;
    *n_ids = 0;
    size_t bad = tok_utf8_validate(text, len);
    if (bad != len)
        return tx_errbuf(err, errsz, TX_EINVAL, "input text is not valid UTF-8 (byte %zu: 0x%02x)",
                         bad, (unsigned char)text[bad]);

    struct enc e;
    memset(&e, 0, sizeof(e));
    e.tok = tok;
    e.flags = flags;
    e.literal = literal;
    e.n_literal = n_literal;
    e.err = err;
    e.errsz = errsz;
    int rc = 0;
    if (!(e.bpe = tok_bpe_scratch_new()))
        rc = oom(&e);
    if (!rc && (flags & TX_TOKENIZER_ADD_SPECIAL))
        for (size_t i = 0; i < tok->n_post_prefix && !rc; i++)
            rc = tok_ids_push(&e.out, tok->post_prefix[i]) ? oom(&e) : 0;
    if (!rc && len)
        rc = pipeline(&e, text, len);
    if (!rc && (flags & TX_TOKENIZER_ADD_SPECIAL))
        for (size_t i = 0; i < tok->n_post_suffix && !rc; i++)
            rc = tok_ids_push(&e.out, tok->post_suffix[i]) ? oom(&e) : 0;

    free(e.arena.p);
    free(e.cur.v);
    free(e.next.v);
    free(e.sp.v);
    pcre2_match_data_free(e.md);
    pcre2_match_context_free(e.mctx);
    pcre2_jit_stack_free(e.jstack);
    tok_bpe_scratch_free(e.bpe);
    if (rc) {
        free(e.out.v);
        return rc;
    }
    if (!e.out.n) {
        free(e.out.v);
        e.out.v = NULL;
    }
    *ids = e.out.v;
    *n_ids = e.out.n;
    return 0;
}

int tx_tokenizer_encode(const struct tx_tokenizer *tok, const char *text, size_t len,
                        unsigned flags, int32_t **ids, size_t *n_ids, char *err, size_t errsz)
{
    return tok_encode_ex(tok, text, len, flags, NULL, 0, ids, n_ids, err, errsz);
}
