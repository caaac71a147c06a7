/* SPDX-License-Identifier: MIT */
/* tokenizer.json loading: model.vocab and model.merges straight from the text. (tok_load.h) */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <utf8proc.h>

#include <tx-internal/tx_errors.h>
#include "tok_internal.h"
#include "tok_load.h"

/* ------------------------------------------------ fast vocab/merges */

/*
 * model.vocab and model.merges are ~99% of a real tokenizer.json (11 MB
 * for Qwen3 / GLM): building json-c objects for their ~300k strings and
 * freeing them again took most of the load time. When the file has the
 * usual shape, those two members are read straight from the text by the
 * strict scanners below, and json-c parses the rest (the document with
 * them replaced by {} and []). Anything unusual -- a syntax error, an
 * escaped or repeated key on the way, a duplicate vocabulary entry, a
 * number that is not a small non-negative integer, an escaped surrogate or
 * NUL, a failed check anywhere -- makes the loader start again with the
 * whole document through json-c (tok_load_slow), so the result, every
 * error code and every message are exactly those of that path. The fuzz
 * target (fuzz_tokenizer.c, mode 0) checks that both paths agree.
 */

static size_t fws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t'))
        i++;
    return i;
}

/* Skips a string starting at s[i] == '"'; returns the index after it, 0 if
 * unterminated. *esc is set when it holds a backslash. */
static size_t fskip_string(const char *s, size_t n, size_t i, bool *esc)
{
    *esc = false;
    for (i++; i < n; i++) {
        if (s[i] == '\\') {
            *esc = true;
            i++;
        } else if (s[i] == '"') {
            return i + 1;
        }
    }
    return 0;
}

/* Skips any value starting at s[i] (no validation: json-c checks what is
 * skipped); returns the index after it, 0 on a structural problem. */
static size_t fskip_value(const char *s, size_t n, size_t i)
{
    bool esc;
    if (i >= n)
        return 0;
    if (s[i] == '"')
        return fskip_string(s, n, i, &esc);
    if (s[i] == '{' || s[i] == '[') {
        size_t depth = 0;
        for (; i < n; i++) {
            char ch = s[i];
            if (ch == '"') {
                size_t e = fskip_string(s, n, i, &esc);
                if (!e)
                    return 0;
                i = e - 1;
            } else if (ch == '{' || ch == '[') {
                depth++;
            } else if (ch == '}' || ch == ']') {
                if (--depth == 0)
                    return i + 1;
            }
        }
        return 0;
    }
    size_t j = i;
    while (j < n && !strchr(",}] \n\r\t", s[j]))
        j++;
    return j > i ? j : 0;
}

/* Walks the members of the object at s[i] == '{': for each, calls
 * fn(ctx, key, key_len, key_escaped, value_start), which returns the index
 * after the value (0: give up). Returns the index after the object, 0 if
 * the walk gave up. */
typedef size_t (*fmember_fn)(void *ctx, const char *key, size_t klen, bool esc, size_t v);

static size_t fwalk_object(const char *s, size_t n, size_t i, fmember_fn fn, void *ctx)
{
    if (i >= n || s[i] != '{')
        return 0;
    i = fws(s, n, i + 1);
    if (i < n && s[i] == '}')
        return i + 1;
    for (;;) {
        bool esc;
        if (i >= n || s[i] != '"')
            return 0;
        size_t ke = fskip_string(s, n, i, &esc);
        if (!ke)
            return 0;
        size_t v = fws(s, n, ke);
        if (v >= n || s[v] != ':')
            return 0;
        v = fws(s, n, v + 1);
        size_t e = fn(ctx, s + i + 1, ke - i - 2, esc, v);
        if (!e)
            return 0;
        i = fws(s, n, e);
        if (i < n && s[i] == ',') {
            i = fws(s, n, i + 1);
            continue;
        }
        return i < n && s[i] == '}' ? i + 1 : 0;
    }
}

struct fscan {
    const char *s;
    size_t n;
    int n_model, n_vocab, n_merges;
    size_t vocab, vocab_end, merges, merges_end;
};

static size_t fscan_model_member(void *ctx, const char *key, size_t klen, bool esc, size_t v)
{
    struct fscan *f = ctx;
    size_t e = esc ? 0 : fskip_value(f->s, f->n, v);
    if (e && klen == 5 && !memcmp(key, "vocab", 5)) {
        f->n_vocab++;
        f->vocab = v;
        f->vocab_end = e;
    } else if (e && klen == 6 && !memcmp(key, "merges", 6)) {
        f->n_merges++;
        f->merges = v;
        f->merges_end = e;
    }
    return e;
}

static size_t fscan_root_member(void *ctx, const char *key, size_t klen, bool esc, size_t v)
{
    struct fscan *f = ctx;
    if (esc)
        return 0;
    if (klen == 5 && !memcmp(key, "model", 5)) {
        if (f->n_model++ || v >= f->n || f->s[v] != '{')
            return 0;
        return fwalk_object(f->s, f->n, v, fscan_model_member, f);
    }
    return fskip_value(f->s, f->n, v);
}

/* Finds the two members and builds the rest of the document. */
int tokl_fast_find(const char *s, size_t n, struct fast *fs)
{
    struct fscan f;
    memset(&f, 0, sizeof(f));
    f.s = s;
    f.n = n;
    memset(fs, 0, sizeof(*fs));
    if (!fwalk_object(s, n, fws(s, n, 0), fscan_root_member, &f) || f.n_model != 1 ||
        f.n_vocab != 1 || f.n_merges != 1 || s[f.vocab] != '{' || s[f.merges] != '[')
        return TOK_FALLBACK;
    size_t ve = f.vocab_end, me = f.merges_end;
    fs->vocab = (struct fspan){s + f.vocab, ve - f.vocab};
    fs->merges = (struct fspan){s + f.merges, me - f.merges};
    /* the rest, in document order */
    size_t a0 = f.vocab, a1 = ve, b0 = f.merges, b1 = me;
    const char *pa = "{}", *pb = "[]";
    if (b0 < a0) {
        size_t t0 = a0, t1 = a1;
        a0 = b0;
        a1 = b1;
        b0 = t0;
        b1 = t1;
        pa = "[]";
        pb = "{}";
    }
    size_t len = a0 + 2 + (b0 - a1) + 2 + (n - b1);
    char *r = malloc(len + 1);
    if (!r)
        return TOK_FALLBACK;
    size_t o = 0;
    memcpy(r + o, s, a0);
    o += a0;
    memcpy(r + o, pa, 2);
    o += 2;
    memcpy(r + o, s + a1, b0 - a1);
    o += b0 - a1;
    memcpy(r + o, pb, 2);
    o += 2;
    memcpy(r + o, s + b1, n - b1);
    o += n - b1;
    r[o] = 0;
    fs->rest = r;
    fs->rest_len = o;
    return 0;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return TX_NONE;
}

/*
 * A strict JSON string at s[*i] == '"' (RFC 8259, well-formed UTF-8, no
 * control characters). Without escapes *out points into s; with escapes the
 * unescaped text is built in buf. Escaped surrogates and \u0000 (which
 * json-c would turn into a NUL inside a C-string key) are TOK_FALLBACK.
 */
static int fstring(const char *s, size_t n, size_t *i, struct tok_buf *buf, const char **out,
                   size_t *out_len)
{
    size_t j = *i;
    if (j >= n || s[j] != '"')
        return TOK_FALLBACK;
    j++;
    size_t start = j;
    bool esc = false;
    for (;;) {
        if (j >= n)
            return TOK_FALLBACK;
        unsigned char ch = (unsigned char)s[j];
        if (ch == '"')
            break;
        if (ch < 0x20)
            return TOK_FALLBACK;
        if (ch == '\\') {
            esc = true;
            j += 2;
            continue;
        }
        if (ch < 0x80) {
            j++;
            continue;
        }
        uint32_t cp;
        size_t l = tok_utf8_decode((const unsigned char *)s + j, n - j, &cp);
        if (!l)
            return TOK_FALLBACK;
        j += l;
    }
    *i = j + 1;
    if (!esc) {
        *out = s + start;
        *out_len = j - start;
        return 0;
    }
    buf->len = 0;
    for (size_t k = start; k < j;) {
        if (s[k] != '\\') {
            size_t r = k;
            while (r < j && s[r] != '\\')
                r++;
            if (tok_buf_put(buf, s + k, r - k))
                return TOK_FALLBACK;
            k = r;
            continue;
        }
        char e = s[k + 1], c;
        k += 2;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            c = e;
            break;
        case 'b':
            c = '\b';
            break;
        case 'f':
            c = '\f';
            break;
        case 'n':
            c = '\n';
            break;
        case 'r':
            c = '\r';
            break;
        case 't':
            c = '\t';
            break;
        case 'u': {
            if (k + 4 > j)
                return TOK_FALLBACK;
            uint32_t cp = 0;
            for (int d = 0; d < 4; d++) {
                int h = hexval(s[k + (size_t)d]);
                if (h < 0)
                    return TOK_FALLBACK;
                cp = cp << 4 | (uint32_t)h;
            }
            k += 4;
            if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF))
                return TOK_FALLBACK;
            char u[4];
            if (tok_buf_put(buf, u, tok_utf8_encode(cp, u)))
                return TOK_FALLBACK;
            continue;
        }
        default:
            return TOK_FALLBACK;
        }
        if (tok_buf_put(buf, &c, 1))
            return TOK_FALLBACK;
    }
    *out = buf->p;
    *out_len = buf->len;
    return 0;
}

/* model.vocab: {"token": id, ...} with ids 0 <= id < TOK_MAX_ID written
 * as plain integers, every token once. */
int tokl_fast_vocab(struct ctx *c, struct fspan sp, int64_t *max_id)
{
    struct tx_tokenizer *tok = c->tok;
    const char *s = sp.p;
    size_t n = sp.n, i = fws(s, n, 1), count = 0;
    /* entries: one ':' each outside strings; an estimate is enough */
    for (size_t k = 0; k < n; k++)
        count += s[k] == ':';
    if (tok_strmap_init(&tok->vocab, &tok->pool, count))
        return TOK_FALLBACK;
    if (i < n && s[i] == '}')
        return fws(s, n, i + 1) == n ? 0 : TOK_FALLBACK;
    for (;;) {
        const char *key;
        size_t klen;
        if (fstring(s, n, &i, &c->tmp, &key, &klen))
            return TOK_FALLBACK;
        i = fws(s, n, i);
        if (i >= n || s[i] != ':')
            return TOK_FALLBACK;
        i = fws(s, n, i + 1);
        int64_t id = 0;
        size_t d0 = i;
        while (i < n && s[i] >= '0' && s[i] <= '9' && i - d0 < 10)
            id = id * 10 + (s[i++] - '0');
        if (i == d0 || (s[d0] == '0' && i - d0 > 1) || id >= (int64_t)TOK_MAX_ID ||
            (i < n && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == 'e' || s[i] == 'E')))
            return TOK_FALLBACK;
        int64_t off = tok_pool_add(&tok->pool, key, klen);
        if (off < 0)
            return TOK_FALLBACK;
        size_t before = tok->vocab.n;
        if (tok_strmap_put(&tok->vocab, (uint32_t)off, (uint32_t)klen, (int32_t)id) ||
            tok->vocab.n == before) /* a repeated token: json-c keeps the last one */
            return TOK_FALLBACK;
        if (id > *max_id)
            *max_id = id;
        i = fws(s, n, i);
        if (i < n && s[i] == ',') {
            i = fws(s, n, i + 1);
            continue;
        }
        if (i < n && s[i] == '}')
            return i + 1 == n ? 0 : TOK_FALLBACK;
        return TOK_FALLBACK;
    }
}

/* model.merges: ["a b", ...] or [["a", "b"], ...], as tokl_add_merges. */
int tokl_fast_merges(struct ctx *c, struct fspan sp)
{
    struct tx_tokenizer *tok = c->tok;
    const char *s = sp.p;
    size_t n = sp.n, i = fws(s, n, 1);
    /* the element count (tokl_add_merges sizes the map by it): top-level commas */
    size_t elems = 0, depth = 0;
    bool nonempty = false;
    for (size_t k = 1; k + 1 < n; k++) {
        char ch = s[k];
        if (ch == '"') {
            bool esc;
            size_t e = fskip_string(s, n, k, &esc);
            if (!e)
                return TOK_FALLBACK;
            k = e - 1;
            nonempty = true;
        } else if (ch == '[') {
            depth++;
            nonempty = true;
        } else if (ch == ']') {
            if (!depth--)
                return TOK_FALLBACK;
        } else if (ch == ',' && depth == 0) {
            elems++;
        } else if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t' && ch != ',') {
            nonempty = true;
        }
    }
    elems += nonempty;
    if (elems >= UINT32_MAX || tok_pairmap_init(&tok->merges, elems))
        return TOK_FALLBACK;
    if (i < n && s[i] == ']')
        return i + 1 == n && !nonempty ? 0 : TOK_FALLBACK;
    /* c->tmp: unescaping scratch; first: a saved from it; merged: a + b */
    struct tok_buf first = {0}, merged = {0};
    int rc = TOK_FALLBACK;
    size_t rank = 0, seen = 0;
    for (;;) {
        const char *a, *b;
        size_t na, nb;
        seen++;
        if (i < n && s[i] == '"') {
            const char *m;
            size_t mn;
            if (fstring(s, n, &i, &c->tmp, &m, &mn))
                goto out;
            if (mn >= 8 && !memcmp(m, "#version", 8))
                goto next; /* merges.txt header carried over (HF skips it) */
            if (!tokl_split_merge(m, mn, &a, &na, &b, &nb))
                goto out;
        } else if (i < n && s[i] == '[') {
            i = fws(s, n, i + 1);
            if (fstring(s, n, &i, &c->tmp, &a, &na))
                goto out;
            if (a == c->tmp.p) {
                first.len = 0;
                if (tok_buf_put(&first, a, na))
                    goto out;
                a = first.p;
            }
            i = fws(s, n, i);
            if (i >= n || s[i] != ',')
                goto out;
            i = fws(s, n, i + 1);
            if (fstring(s, n, &i, &c->tmp, &b, &nb))
                goto out;
            i = fws(s, n, i);
            if (i >= n || s[i] != ']')
                goto out;
            i++;
        } else {
            goto out;
        }
        if (tokl_merge_put(tok, &merged, a, na, b, nb, rank))
            goto out; /* the json-c path names the problem */
        rank++;
    next:
        i = fws(s, n, i);
        if (i < n && s[i] == ',') {
            i = fws(s, n, i + 1);
            continue;
        }
        if (i < n && s[i] == ']' && i + 1 == n && seen == elems)
            rc = 0;
        goto out;
    }
out:
    free(first.p);
    free(merged.p);
    return rc;
}
