/* SPDX-License-Identifier: MIT */
/* tokenizer.json loading and validation. */
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

#include "common/error.h"
#include "tok_internal.h"

/* The GPT-2 pattern HF's ByteLevel pre-tokenizer uses with use_regex. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct ctx {
    struct tx_tokenizer *tok;
    char *err;
    size_t errsz;
    struct tok_buf tmp;
};

#define ERR(c, code, ...) tx_errbuf((c)->err, (c)->errsz, (code), __VA_ARGS__)

static const char *type_name(json_object *o)
{
    return o ? json_type_to_name(json_object_get_type(o)) : "null";
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v))
        return NULL;
    return v; /* NULL also for an explicit null */
}

static int opt_bool(struct ctx *c, json_object *o, const char *key, const char *where, bool def,
                    bool *out)
{
    json_object *v = get(o, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_object_is_type(v, json_type_boolean))
        return ERR(c, TX_EINVAL, "%s.%s: expected a boolean, found %s", where, key, type_name(v));
    *out = json_object_get_boolean(v);
    return 0;
}

/* *s = NULL when absent or null. */
static int opt_string(struct ctx *c, json_object *o, const char *key, const char *where,
                      const char **s, size_t *n)
{
    json_object *v = get(o, key);
    *s = NULL;
    *n = 0;
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_string))
        return ERR(c, TX_EINVAL, "%s.%s: expected a string, found %s", where, key, type_name(v));
    *s = json_object_get_string(v);
    *n = (size_t)json_object_get_string_len(v);
    return 0;
}

static int req_type(struct ctx *c, json_object *o, const char *where, const char **type)
{
    json_object *t = get(o, "type");
    if (!t)
        return ERR(c, TX_EINVAL, "%s: missing \"type\"", where);
    if (!json_object_is_type(t, json_type_string))
        return ERR(c, TX_EINVAL, "%s.type: expected a string, found %s", where, type_name(t));
    *type = json_object_get_string(t);
    return 0;
}

/* ------------------------------------------------------------- model */

static int add_vocab(struct ctx *c, json_object *vocab, int64_t *max_id)
{
    struct tx_tokenizer *tok = c->tok;
    size_t n = (size_t)json_object_object_length(vocab);
    int rc = tok_strmap_init(&tok->vocab, &tok->pool, n);
    if (rc)
        return ERR(c, rc, "out of memory");
    json_object_object_foreach(vocab, key, val)
    {
        if (!json_object_is_type(val, json_type_int))
            return ERR(c, TX_EINVAL, "model.vocab: id of token \"%.64s\" is not an integer (%s)",
                       key, type_name(val));
        int64_t id = json_object_get_int64(val);
        if (id < 0 || id >= (int64_t)TOK_MAX_ID)
            return ERR(c, TX_EINVAL,
                       "model.vocab: id %lld of token \"%.64s\" is out of range [0, %u)",
                       (long long)id, key, TOK_MAX_ID);
        size_t klen = strlen(key);
        int64_t off = tok_pool_add(&tok->pool, key, klen);
        if (off < 0)
            return ERR(c, TX_ENOMEM, "out of memory");
        if ((rc = tok_strmap_put(&tok->vocab, (uint32_t)off, (uint32_t)klen, (int32_t)id)))
            return ERR(c, rc, "out of memory");
        if (id > *max_id)
            *max_id = id;
    }
    return 0;
}

/* Splits the merge "a b" (exactly one space) into its two tokens; false if
 * s[0..n) is not of that form. */
static bool split_merge(const char *s, size_t n, const char **a, size_t *na, const char **b,
                        size_t *nb)
{
    const char *sp = memchr(s, ' ', n);
    if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)))
        return false;
    *a = s;
    *na = (size_t)(sp - s);
    *b = sp + 1;
    *nb = n - *na - 1;
    return true;
}

/* Outcomes of merge_put other than 0. */
enum { MERGE_NO_A = 1, MERGE_NO_B, MERGE_SHORT_B, MERGE_NO_NEW, MERGE_NOMEM };

/* Resolves the merge (a, b) against the vocabulary (the merged token is a
 * followed by b without continuing_subword_prefix, built in scratch) and
 * stores it with rank; 0, or which check failed. */
static int merge_put(struct tx_tokenizer *tok, struct tok_buf *scratch, const char *a, size_t na,
                     const char *b, size_t nb, size_t rank)
{
    int32_t ia = tok_strmap_get(&tok->vocab, a, na);
    if (ia < 0)
        return MERGE_NO_A;
    int32_t ib = tok_strmap_get(&tok->vocab, b, nb);
    if (ib < 0)
        return MERGE_NO_B;
    if (nb < tok->prefix_len)
        return MERGE_SHORT_B;
    scratch->len = 0;
    if (tok_buf_put(scratch, a, na) ||
        tok_buf_put(scratch, b + tok->prefix_len, nb - tok->prefix_len))
        return MERGE_NOMEM;
    int32_t inew = tok_strmap_get(&tok->vocab, scratch->p, scratch->len);
    if (inew < 0)
        return MERGE_NO_NEW;
    tok_pairmap_put(&tok->merges, (uint32_t)ia, (uint32_t)ib, (uint32_t)rank, (uint32_t)inew);
    return 0;
}

static int parse_merge(struct ctx *c, json_object *m, size_t i, const char **a, size_t *na,
                       const char **b, size_t *nb)
{
    if (json_object_is_type(m, json_type_string)) {
        const char *s = json_object_get_string(m);
        if (!split_merge(s, (size_t)json_object_get_string_len(m), a, na, b, nb))
            return ERR(c, TX_EINVAL,
                       "model.merges[%zu]: \"%.64s\" is not two tokens separated by one space", i,
                       s);
        return 0;
    }
    if (json_object_is_type(m, json_type_array)) {
        if (json_object_array_length(m) != 2)
            return ERR(c, TX_EINVAL, "model.merges[%zu]: expected a pair, found %zu elements", i,
                       json_object_array_length(m));
        json_object *x = json_object_array_get_idx(m, 0), *y = json_object_array_get_idx(m, 1);
        if (!json_object_is_type(x, json_type_string) || !json_object_is_type(y, json_type_string))
            return ERR(c, TX_EINVAL, "model.merges[%zu]: pair elements must be strings", i);
        *a = json_object_get_string(x);
        *na = (size_t)json_object_get_string_len(x);
        *b = json_object_get_string(y);
        *nb = (size_t)json_object_get_string_len(y);
        return 0;
    }
    return ERR(c, TX_EINVAL, "model.merges[%zu]: expected a string or a pair, found %s", i,
               type_name(m));
}

static int add_merges(struct ctx *c, json_object *merges)
{
    struct tx_tokenizer *tok = c->tok;
    size_t n = json_object_array_length(merges);
    if (n >= UINT32_MAX)
        return ERR(c, TX_EINVAL, "model.merges: too many merges");
    int rc = tok_pairmap_init(&tok->merges, n);
    if (rc)
        return ERR(c, rc, "out of memory");
    size_t rank = 0;
    for (size_t i = 0; i < n; i++) {
        const char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        json_object *m = json_object_array_get_idx(merges, i);
        if (json_object_is_type(m, json_type_string) &&
            !strncmp(json_object_get_string(m), "#version", 8))
            continue; /* merges.txt header carried over (HF skips it) */
        if ((rc = parse_merge(c, m, i, &a, &na, &b, &nb)))
            return rc;
        switch (merge_put(tok, &c->tmp, a, na, b, nb, rank)) {
        case 0:
            break;
        case MERGE_NO_A:
            return ERR(c, TX_EINVAL, "model.merges[%zu]: token \"%.*s\" is not in the vocabulary",
                       i, (int)(na > 64 ? 64 : na), a);
        case MERGE_NO_B:
            return ERR(c, TX_EINVAL, "model.merges[%zu]: token \"%.*s\" is not in the vocabulary",
                       i, (int)(nb > 64 ? 64 : nb), b);
        case MERGE_SHORT_B:
            return ERR(c, TX_EINVAL,
                       "model.merges[%zu]: token \"%.*s\" is shorter than "
                       "continuing_subword_prefix",
                       i, (int)(nb > 64 ? 64 : nb), b);
        case MERGE_NO_NEW:
            return ERR(c, TX_EINVAL,
                       "model.merges[%zu]: merged token \"%.*s\" is not in the vocabulary", i,
                       (int)(c->tmp.len > 64 ? 64 : c->tmp.len), c->tmp.p);
        default:
            return ERR(c, TX_ENOMEM, "out of memory");
        }
        rank++;
    }
    return 0;
}

static int load_model_options(struct ctx *c, json_object *model)
{
    struct tx_tokenizer *tok = c->tok;
    json_object *d = get(model, "dropout");
    if (d) {
        if (!json_object_is_type(d, json_type_double) && !json_object_is_type(d, json_type_int))
            return ERR(c, TX_EINVAL, "model.dropout: expected a number, found %s", type_name(d));
        double p = json_object_get_double(d);
        if (p != 0.0)
            return ERR(c, TX_ENOTSUP,
                       "model.dropout: BPE dropout (%g) is a training feature and is not "
                       "supported",
                       p);
    }
    const char *s;
    size_t n;
    int rc;
    if ((rc = opt_string(c, model, "continuing_subword_prefix", "model", &s, &n)))
        return rc;
    if (s && n) {
        int64_t off = tok_pool_add(&tok->pool, s, n);
        if (off < 0)
            return ERR(c, TX_ENOMEM, "out of memory");
        tok->prefix_off = off;
        tok->prefix_len = (uint32_t)n;
    }
    if ((rc = opt_string(c, model, "end_of_word_suffix", "model", &s, &n)))
        return rc;
    if (s && n) {
        int64_t off = tok_pool_add(&tok->pool, s, n);
        if (off < 0)
            return ERR(c, TX_ENOMEM, "out of memory");
        tok->suffix_off = off;
        tok->suffix_len = (uint32_t)n;
    }
    if ((rc = opt_bool(c, model, "fuse_unk", "model", false, &tok->fuse_unk)) ||
        (rc = opt_bool(c, model, "byte_fallback", "model", false, &tok->byte_fallback)) ||
        (rc = opt_bool(c, model, "ignore_merges", "model", false, &tok->ignore_merges)))
        return rc;
    return 0;
}

static int load_model_tail(struct ctx *c, json_object *model)
{
    struct tx_tokenizer *tok = c->tok;
    const char *s;
    size_t n;
    int rc;
    tok->unk_id = -1;
    if ((rc = opt_string(c, model, "unk_token", "model", &s, &n)))
        return rc;
    if (s) {
        tok->unk_id = tok_strmap_get(&tok->vocab, s, n);
        if (tok->unk_id < 0)
            return ERR(c, TX_EINVAL, "model.unk_token \"%.64s\" is not in the vocabulary", s);
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof(name), "<0x%02X>", b);
        tok->byte_fallback_id[b] = tok_strmap_get(&tok->vocab, name, 6);
    }
    for (uint32_t cp = 0; cp < 512; cp++) {
        char u[4];
        size_t l = tok_utf8_encode(cp, u);
        tok->char_id[cp] = tok_strmap_get(&tok->vocab, u, l);
    }
    return 0;
}

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

#define TOK_FALLBACK 1 /* > 0: not an error code, "use the json-c path" */

struct fspan {
    const char *p;
    size_t n;
};

struct fast {
    struct fspan vocab, merges; /* the values, '{'..'}' and '['..']' */
    char *rest;                 /* the document with them replaced */
    size_t rest_len;
};

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
static int fast_find(const char *s, size_t n, struct fast *fs)
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
    return -1;
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
static int fast_vocab(struct ctx *c, struct fspan sp, int64_t *max_id)
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

/* model.merges: ["a b", ...] or [["a", "b"], ...], as add_merges. */
static int fast_merges(struct ctx *c, struct fspan sp)
{
    struct tx_tokenizer *tok = c->tok;
    const char *s = sp.p;
    size_t n = sp.n, i = fws(s, n, 1);
    /* the element count (add_merges sizes the map by it): top-level commas */
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
            if (!split_merge(m, mn, &a, &na, &b, &nb))
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
        if (merge_put(tok, &merged, a, na, b, nb, rank))
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

/* -------------------------------------------------------- normalizer */

static int load_normalizer(struct ctx *c, json_object *o, const char *where)
{
    struct tx_tokenizer *tok = c->tok;
    if (!o)
        return 0;
    if (!json_object_is_type(o, json_type_object))
        return ERR(c, TX_EINVAL, "%s: expected an object, found %s", where, type_name(o));
    const char *type;
    int rc;
    if ((rc = req_type(c, o, where, &type)))
        return rc;
    if (!strcmp(type, "Sequence")) {
        json_object *l = get(o, "normalizers");
        if (!l || !json_object_is_type(l, json_type_array))
            return ERR(c, TX_EINVAL, "%s.normalizers: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(l); i++)
            if ((rc = load_normalizer(c, json_object_array_get_idx(l, i), where)))
                return rc;
        return 0;
    }
    enum tok_nf nf;
    if (!strcmp(type, "NFC"))
        nf = TOK_NF_NFC;
    else if (!strcmp(type, "NFD"))
        nf = TOK_NF_NFD;
    else if (!strcmp(type, "NFKC"))
        nf = TOK_NF_NFKC;
    else if (!strcmp(type, "NFKD"))
        nf = TOK_NF_NFKD;
    else
        return ERR(c, TX_ENOTSUP,
                   "%s: normalizer type \"%.64s\" is not supported (NFC, NFD, NFKC, NFKD, "
                   "Sequence)",
                   where, type);
    enum tok_nf *a = realloc(tok->nf, (tok->n_nf + 1) * sizeof(*a));
    if (!a)
        return ERR(c, TX_ENOMEM, "out of memory");
    tok->nf = a;
    tok->nf[tok->n_nf++] = nf;
    return 0;
}

/*
 * Code points that are NFC_Quick_Check=Yes, combining class 0 and never
 * the second half of a composition: below U+0300, CJK unified ideographs,
 * Hangul syllables. A run of them is already in NFC.
 */
static bool nfc_inert(uint32_t cp)
{
    return cp < 0x300 || (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3);
}

static int nfc_map(const char *s, size_t n, struct tok_buf *out)
{
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (r < 0)
        return r == UTF8PROC_ERROR_NOMEM ? TX_ENOMEM : TX_EINVAL;
    int rc = tok_buf_put(out, dst, (size_t)r);
    free(dst);
    return rc;
}

/*
 * NFC without calling utf8proc on text that is already normalized: the
 * text is cut before every ASCII character (NFC_QC=Yes, ccc=0, composes
 * with nothing before it, so NFC(a + b) = NFC(a) + NFC(b) there) and only
 * chunks holding a character outside nfc_inert() go through utf8proc.
 */
static int nfc_fast(const char *s, size_t n, char **out, size_t *out_len)
{
    struct tok_buf b = {0};
    int rc = tok_buf_reserve(&b, n);
    size_t i = 0, copy_from = 0;
    while (!rc && i < n) {
        size_t start = i;
        bool inert = true;
        do { /* one chunk: one character, then any non-ASCII ones */
            uint32_t cp = (unsigned char)s[i];
            size_t l = 1;
            if (cp >= 0x80 && !(l = tok_utf8_decode((const unsigned char *)s + i, n - i, &cp))) {
                free(b.p);
                return TX_EINVAL;
            }
            if (!nfc_inert(cp))
                inert = false;
            i += l;
        } while (i < n && (unsigned char)s[i] >= 0x80);
        if (!inert) {
            rc = tok_buf_put(&b, s + copy_from, start - copy_from);
            if (!rc)
                rc = nfc_map(s + start, i - start, &b);
            copy_from = i;
        }
    }
    if (!rc)
        rc = tok_buf_put(&b, s + copy_from, n - copy_from);
    if (rc) {
        free(b.p);
        return rc;
    }
    *out = b.p;
    *out_len = b.len;
    return 0;
}

int tok_normalize(const struct tx_tokenizer *tok, const char *s, size_t n, char **out,
                  size_t *out_len)
{
    if (tok->n_nf == 1 && tok->nf[0] == TOK_NF_NFC)
        return nfc_fast(s, n, out, out_len);

    char *cur = malloc(n + 1);
    if (!cur)
        return TX_ENOMEM;
    memcpy(cur, s, n);
    cur[n] = 0;
    size_t len = n;
    bool ascii = true;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) {
            ascii = false;
            break;
        }
    for (size_t k = 0; k < tok->n_nf && !ascii; k++) {
        utf8proc_option_t opt = UTF8PROC_STABLE;
        switch (tok->nf[k]) {
        case TOK_NF_NFC:
            opt |= UTF8PROC_COMPOSE;
            break;
        case TOK_NF_NFD:
            opt |= UTF8PROC_DECOMPOSE;
            break;
        case TOK_NF_NFKC:
            opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
            break;
        case TOK_NF_NFKD:
            opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
            break;
        }
        utf8proc_uint8_t *dst = NULL;
        utf8proc_ssize_t r =
            utf8proc_map((const utf8proc_uint8_t *)cur, (utf8proc_ssize_t)len, &dst, opt);
        if (r < 0) {
            free(cur);
            return r == UTF8PROC_ERROR_NOMEM ? TX_ENOMEM : TX_EINVAL;
        }
        free(cur);
        cur = (char *)dst;
        len = (size_t)r;
    }
    *out = cur;
    *out_len = len;
    return 0;
}

/* ----------------------------------------------------- pre-tokenizer */

static int push_pretok(struct ctx *c, const struct tok_pretok *p)
{
    struct tx_tokenizer *tok = c->tok;
    struct tok_pretok *a = realloc(tok->pt, (tok->n_pt + 1) * sizeof(*a));
    if (!a)
        return ERR(c, TX_ENOMEM, "out of memory");
    tok->pt = a;
    tok->pt[tok->n_pt++] = *p;
    return 0;
}

static int parse_behavior(struct ctx *c, json_object *o, const char *where,
                          enum tok_split_behavior *b)
{
    json_object *v = get(o, "behavior");
    if (!v || !json_object_is_type(v, json_type_string))
        return ERR(c, TX_EINVAL, "%s.behavior: expected a string", where);
    const char *s = json_object_get_string(v);
    static const struct {
        const char *name;
        enum tok_split_behavior b;
    } names[] = {
        {"Removed", TOK_SPLIT_REMOVED},
        {"Isolated", TOK_SPLIT_ISOLATED},
        {"MergedWithPrevious", TOK_SPLIT_MERGED_PREV},
        {"MergedWithNext", TOK_SPLIT_MERGED_NEXT},
        {"Contiguous", TOK_SPLIT_CONTIGUOUS},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(s, names[i].name)) {
            *b = names[i].b;
            return 0;
        }
    return ERR(c, TX_EINVAL, "%s.behavior: unknown split behavior \"%.64s\"", where, s);
}

static int load_pretok(struct ctx *c, json_object *o, const char *where)
{
    struct tx_tokenizer *tok = c->tok;
    if (!o)
        return 0;
    if (!json_object_is_type(o, json_type_object))
        return ERR(c, TX_EINVAL, "%s: expected an object, found %s", where, type_name(o));
    const char *type;
    int rc;
    if ((rc = req_type(c, o, where, &type)))
        return rc;
    struct tok_pretok p;
    memset(&p, 0, sizeof(p));
    if (!strcmp(type, "Sequence")) {
        json_object *l = get(o, "pretokenizers");
        if (!l || !json_object_is_type(l, json_type_array))
            return ERR(c, TX_EINVAL, "%s.pretokenizers: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(l); i++)
            if ((rc = load_pretok(c, json_object_array_get_idx(l, i), where)))
                return rc;
        return 0;
    }
    if (!strcmp(type, "Split")) {
        p.type = TOK_PT_SPLIT;
        json_object *pat = get(o, "pattern");
        if (!pat || !json_object_is_type(pat, json_type_object))
            return ERR(c, TX_EINVAL,
                       "%s.pattern: expected an object {\"Regex\": ...} or "
                       "{\"String\": ...}",
                       where);
        json_object *re = get(pat, "Regex"), *str = get(pat, "String");
        json_object *sv = re ? re : str;
        if (!sv || !json_object_is_type(sv, json_type_string))
            return ERR(c, TX_EINVAL, "%s.pattern: expected a \"Regex\" or \"String\" string",
                       where);
        if ((rc = parse_behavior(c, o, where, &p.behavior)) ||
            (rc = opt_bool(c, o, "invert", where, false, &p.invert)))
            return rc;
        size_t n = (size_t)json_object_get_string_len(sv);
        if (n) {
            p.re = tok_regex_compile(json_object_get_string(sv), n, !re, c->err, c->errsz, &rc);
            if (!p.re)
                return rc;
        }
        if ((rc = push_pretok(c, &p))) {
            pcre2_code_free(p.re);
            return rc;
        }
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) {
        p.type = TOK_PT_BYTELEVEL;
        if ((rc = opt_bool(c, o, "add_prefix_space", where, true, &p.add_prefix_space)) ||
            (rc = opt_bool(c, o, "use_regex", where, true, &p.use_regex)))
            return rc;
        if (p.use_regex && !tok->gpt2_re) {
            tok->gpt2_re = tok_regex_compile(GPT2_PATTERN, sizeof(GPT2_PATTERN) - 1, false, c->err,
                                             c->errsz, &rc);
            if (!tok->gpt2_re)
                return rc;
        }
        return push_pretok(c, &p);
    }
    if (!strcmp(type, "Digits")) {
        p.type = TOK_PT_DIGITS;
        if ((rc = opt_bool(c, o, "individual_digits", where, false, &p.individual_digits)))
            return rc;
        return push_pretok(c, &p);
    }
    return ERR(c, TX_ENOTSUP,
               "%s: pre-tokenizer type \"%.64s\" is not supported (Split, ByteLevel, Digits, "
               "Sequence)",
               where, type);
}

/* ---------------------------------------------------- post-processor */

struct post {
    struct tok_ids pre, suf;
};

static int ids_append(struct tok_ids *d, const int32_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (tok_ids_push(d, v[i]))
            return TX_ENOMEM;
    return 0;
}

/* Wraps the current prefix/suffix with another processor's tokens. */
static int post_wrap(struct ctx *c, struct post *p, const struct tok_ids *pre,
                     const struct tok_ids *suf)
{
    struct tok_ids np = {0};
    if (ids_append(&np, pre->v, pre->n) || ids_append(&np, p->pre.v, p->pre.n) ||
        ids_append(&p->suf, suf->v, suf->n)) {
        free(np.v);
        return ERR(c, TX_ENOMEM, "out of memory");
    }
    free(p->pre.v);
    p->pre = np;
    return 0;
}

static int pair_token(struct ctx *c, json_object *o, const char *key, const char *where,
                      int32_t *id)
{
    json_object *v = get(o, key);
    if (!v || !json_object_is_type(v, json_type_array) || json_object_array_length(v) != 2 ||
        !json_object_is_type(json_object_array_get_idx(v, 1), json_type_int))
        return ERR(c, TX_EINVAL, "%s.%s: expected [token, id]", where, key);
    int64_t x = json_object_get_int64(json_object_array_get_idx(v, 1));
    if (x < 0 || x >= (int64_t)c->tok->n_ids || !(c->tok->id_flags[x] & TOK_ID_PRESENT))
        return ERR(c, TX_EINVAL, "%s.%s: id %lld is not in the vocabulary", where, key,
                   (long long)x);
    *id = (int32_t)x;
    return 0;
}

static int load_post(struct ctx *c, json_object *o, const char *where, struct post *p)
{
    if (!o)
        return 0;
    if (!json_object_is_type(o, json_type_object))
        return ERR(c, TX_EINVAL, "%s: expected an object, found %s", where, type_name(o));
    const char *type;
    int rc;
    if ((rc = req_type(c, o, where, &type)))
        return rc;
    if (!strcmp(type, "ByteLevel"))
        return 0; /* only trims offsets */
    if (!strcmp(type, "Sequence")) {
        json_object *l = get(o, "processors");
        if (!l || !json_object_is_type(l, json_type_array))
            return ERR(c, TX_EINVAL, "%s.processors: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(l); i++)
            if ((rc = load_post(c, json_object_array_get_idx(l, i), where, p)))
                return rc;
        return 0;
    }
    if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) {
        int32_t cls, sep;
        if ((rc = pair_token(c, o, "cls", where, &cls)) ||
            (rc = pair_token(c, o, "sep", where, &sep)))
            return rc;
        struct tok_ids pre = {&cls, 1, 1}, suf = {&sep, 1, 1};
        return post_wrap(c, p, &pre, &suf);
    }
    if (!strcmp(type, "TemplateProcessing")) {
        json_object *single = get(o, "single"), *sp = get(o, "special_tokens");
        if (!single || !json_object_is_type(single, json_type_array))
            return ERR(c, TX_EINVAL, "%s.single: expected an array", where);
        if (sp && !json_object_is_type(sp, json_type_object))
            return ERR(c, TX_EINVAL, "%s.special_tokens: expected an object", where);
        struct tok_ids pre = {0}, suf = {0};
        bool seen_seq = false;
        rc = 0;
        for (size_t i = 0; i < json_object_array_length(single) && !rc; i++) {
            json_object *piece = json_object_array_get_idx(single, i), *st, *seq;
            if (piece && json_object_object_get_ex(piece, "Sequence", &seq)) {
                seen_seq = true;
                continue;
            }
            if (!piece || !json_object_object_get_ex(piece, "SpecialToken", &st) ||
                !json_object_is_type(st, json_type_object)) {
                rc = ERR(c, TX_EINVAL,
                         "%s.single[%zu]: expected {\"SpecialToken\": ...} or "
                         "{\"Sequence\": ...}",
                         where, i);
                break;
            }
            json_object *idv = get(st, "id"), *ent = NULL, *ids = NULL;
            if (!idv || !json_object_is_type(idv, json_type_string)) {
                rc = ERR(c, TX_EINVAL, "%s.single[%zu].SpecialToken.id: expected a string", where,
                         i);
                break;
            }
            const char *name = json_object_get_string(idv);
            if (!sp || !json_object_object_get_ex(sp, name, &ent) ||
                !json_object_is_type(ent, json_type_object) ||
                !json_object_object_get_ex(ent, "ids", &ids) ||
                !json_object_is_type(ids, json_type_array)) {
                rc = ERR(c, TX_EINVAL, "%s.special_tokens: no ids for \"%.64s\"", where, name);
                break;
            }
            for (size_t k = 0; k < json_object_array_length(ids); k++) {
                json_object *x = json_object_array_get_idx(ids, k);
                int64_t v = json_object_is_type(x, json_type_int) ? json_object_get_int64(x) : -1;
                if (v < 0 || v >= (int64_t)c->tok->n_ids ||
                    !(c->tok->id_flags[v] & TOK_ID_PRESENT)) {
                    rc = ERR(c, TX_EINVAL, "%s.special_tokens[\"%.64s\"].ids[%zu]: not a token id",
                             where, name, k);
                    break;
                }
                if (tok_ids_push(seen_seq ? &suf : &pre, (int32_t)v)) {
                    rc = ERR(c, TX_ENOMEM, "out of memory");
                    break;
                }
            }
        }
        if (!rc)
            rc = post_wrap(c, p, &pre, &suf);
        free(pre.v);
        free(suf.v);
        return rc;
    }
    return ERR(c, TX_ENOTSUP,
               "%s: post-processor type \"%.64s\" is not supported (ByteLevel, "
               "TemplateProcessing, RobertaProcessing, BertProcessing, Sequence)",
               where, type);
}

/* ----------------------------------------------------------- decoder */

static int load_decoder(struct ctx *c, json_object *o, const char *where)
{
    if (!o)
        return 0;
    if (!json_object_is_type(o, json_type_object))
        return ERR(c, TX_EINVAL, "%s: expected an object, found %s", where, type_name(o));
    const char *type;
    int rc;
    if ((rc = req_type(c, o, where, &type)))
        return rc;
    if (!strcmp(type, "ByteLevel")) {
        c->tok->decoder = TOK_DEC_BYTELEVEL;
        return 0;
    }
    if (!strcmp(type, "Sequence")) {
        json_object *l = get(o, "decoders");
        if (!l || !json_object_is_type(l, json_type_array))
            return ERR(c, TX_EINVAL, "%s.decoders: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(l); i++)
            if ((rc = load_decoder(c, json_object_array_get_idx(l, i), where)))
                return rc;
        return 0;
    }
    return ERR(c, TX_ENOTSUP, "%s: decoder type \"%.64s\" is not supported (ByteLevel, Sequence)",
               where, type);
}

/* ------------------------------------------------------ added tokens */

static int parse_added(struct ctx *c, json_object *list, int64_t *max_id)
{
    struct tx_tokenizer *tok = c->tok;
    if (!list)
        return 0;
    if (!json_object_is_type(list, json_type_array))
        return ERR(c, TX_EINVAL, "added_tokens: expected an array, found %s", type_name(list));
    size_t n = json_object_array_length(list);
    tok->added = calloc(n ? n : 1, sizeof(*tok->added));
    if (!tok->added)
        return ERR(c, TX_ENOMEM, "out of memory");
    int rc;
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(list, i);
        char where[48];
        snprintf(where, sizeof(where), "added_tokens[%zu]", i);
        if (!o || !json_object_is_type(o, json_type_object))
            return ERR(c, TX_EINVAL, "%s: expected an object, found %s", where, type_name(o));
        json_object *idv = get(o, "id");
        if (!idv || !json_object_is_type(idv, json_type_int))
            return ERR(c, TX_EINVAL, "%s.id: expected an integer, found %s", where, type_name(idv));
        int64_t id = json_object_get_int64(idv);
        if (id < 0 || id >= (int64_t)TOK_MAX_ID)
            return ERR(c, TX_EINVAL, "%s.id: %lld is out of range [0, %u)", where, (long long)id,
                       TOK_MAX_ID);
        const char *s;
        size_t sl;
        if ((rc = opt_string(c, o, "content", where, &s, &sl)))
            return rc;
        if (!s)
            return ERR(c, TX_EINVAL, "%s: missing \"content\"", where);
        struct tok_added *a = &tok->added[tok->n_added];
        if ((rc = opt_bool(c, o, "special", where, false, &a->special)) ||
            (rc = opt_bool(c, o, "single_word", where, false, &a->single_word)) ||
            (rc = opt_bool(c, o, "lstrip", where, false, &a->lstrip)) ||
            (rc = opt_bool(c, o, "rstrip", where, false, &a->rstrip)) ||
            (rc = opt_bool(c, o, "normalized", where, !a->special, &a->normalized)))
            return rc;
        if (!sl)
            continue; /* HF ignores tokens with empty content */
        if (tok_utf8_validate(s, sl) != sl)
            return ERR(c, TX_EINVAL, "%s.content: not valid UTF-8", where);
        int64_t off = tok_pool_add(&tok->pool, s, sl);
        if (off < 0)
            return ERR(c, TX_ENOMEM, "out of memory");
        a->id = (int32_t)id;
        a->off = a->match_off = (uint32_t)off;
        a->len = a->match_len = (uint32_t)sl;
        tok->n_added++;
        if (id > *max_id)
            *max_id = id;
    }
    return 0;
}

static int build_added(struct ctx *c)
{
    struct tx_tokenizer *tok = c->tok;
    int rc = tok_strmap_init(&tok->added_map, &tok->pool, tok->n_added);
    if (rc)
        return ERR(c, rc, "out of memory");
    /* Specials go into the tries before the others, as in HF. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < tok->n_added; i++) {
            struct tok_added *a = &tok->added[i];
            if (a->special != (pass == 0))
                continue;
            if (a->normalized && tok->n_nf) {
                char *nrm;
                size_t nl;
                rc = tok_normalize(tok, tok->pool.p + a->off, a->len, &nrm, &nl);
                if (rc)
                    return ERR(c, rc, "added token %d: cannot normalize its content", a->id);
                int64_t off = tok_pool_add(&tok->pool, nrm, nl);
                free(nrm);
                if (off < 0)
                    return ERR(c, TX_ENOMEM, "out of memory");
                a->match_off = (uint32_t)off;
                a->match_len = (uint32_t)nl;
            }
            rc = tok_trie_add(a->normalized ? &tok->trie_norm : &tok->trie_raw,
                              tok->pool.p + a->match_off, a->match_len, (int32_t)i);
            if (rc)
                return ERR(c, rc, "out of memory");
        }
    }
    for (size_t i = 0; i < tok->n_added; i++) {
        struct tok_added *a = &tok->added[i];
        if (tok_strmap_get(&tok->added_map, tok->pool.p + a->off, a->len) < 0 &&
            (rc = tok_strmap_put(&tok->added_map, a->off, a->len, a->id)))
            return ERR(c, rc, "out of memory");
    }
    return 0;
}

/* ---------------------------------------------------------- id table */

static int build_ids(struct ctx *c, int64_t max_id)
{
    struct tx_tokenizer *tok = c->tok;
    size_t n = (size_t)(max_id + 1);
    tok->n_ids = (uint32_t)n;
    tok->tok_off = calloc(n ? n : 1, sizeof(uint32_t));
    tok->tok_len = malloc((n ? n : 1) * sizeof(uint32_t));
    tok->dec_off = calloc(n ? n : 1, sizeof(uint32_t));
    tok->dec_len = calloc(n ? n : 1, sizeof(uint32_t));
    tok->id_flags = calloc(n ? n : 1, 1);
    if (!tok->tok_off || !tok->tok_len || !tok->dec_off || !tok->dec_len || !tok->id_flags)
        return ERR(c, TX_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        tok->tok_len[i] = UINT32_MAX;
    for (size_t e = 0; e < tok->vocab.n; e++) {
        int32_t id = tok->vocab.val[e];
        tok->tok_off[id] = tok->vocab.key_off[e];
        tok->tok_len[id] = tok->vocab.key_len[e];
        tok->id_flags[id] |= TOK_ID_PRESENT;
    }
    for (size_t i = 0; i < tok->n_added; i++) {
        struct tok_added *a = &tok->added[i];
        tok->tok_off[a->id] = a->off;
        tok->tok_len[a->id] = a->len;
        tok->id_flags[a->id] |= TOK_ID_PRESENT | TOK_ID_ADDED;
        if (a->special)
            tok->id_flags[a->id] |= TOK_ID_SPECIAL;
        else
            tok->id_flags[a->id] &= (uint8_t)~TOK_ID_SPECIAL;
    }
    return 0;
}

/* Precomputes what each token decodes to. */
static int build_decoded(struct ctx *c)
{
    struct tx_tokenizer *tok = c->tok;
    for (uint32_t id = 0; id < tok->n_ids; id++) {
        if (tok->tok_len[id] == UINT32_MAX)
            continue;
        uint32_t off = tok->tok_off[id], len = tok->tok_len[id];
        if (tok->decoder != TOK_DEC_BYTELEVEL) {
            tok->dec_off[id] = off;
            tok->dec_len[id] = len;
            continue;
        }
        /* ByteLevel: every char back to its byte; a token with a char
         * outside the alphabet decodes to its own UTF-8 bytes (HF). */
        c->tmp.len = 0;
        const unsigned char *s = (const unsigned char *)tok->pool.p + off;
        bool all = true;
        for (size_t i = 0; i < len;) {
            uint32_t cp;
            size_t l = tok_utf8_decode(s + i, len - i, &cp);
            int b = l ? tok_cp_to_byte(cp) : -1;
            if (b < 0) {
                all = false;
                break;
            }
            char ch = (char)b;
            if (tok_buf_put(&c->tmp, &ch, 1))
                return ERR(c, TX_ENOMEM, "out of memory");
            i += l;
        }
        if (!all || (c->tmp.len == len && !memcmp(c->tmp.p, s, len))) {
            tok->dec_off[id] = off; /* same bytes: share the token string */
            tok->dec_len[id] = len;
            continue;
        }
        int64_t o = tok_pool_add(&tok->pool, c->tmp.p, c->tmp.len);
        if (o < 0)
            return ERR(c, TX_ENOMEM, "out of memory");
        tok->dec_off[id] = (uint32_t)o;
        tok->dec_len[id] = (uint32_t)c->tmp.len;
    }
    return 0;
}

/* --------------------------------------------------------------- top */

static int load_root(struct ctx *c, json_object *root, const struct fast *fs)
{
    struct tx_tokenizer *tok = c->tok;
    int rc;
    if (!json_object_is_type(root, json_type_object))
        return ERR(c, TX_EINVAL, "top level is %s, expected an object", type_name(root));
    json_object *model = get(root, "model");
    if (!model)
        return ERR(c, TX_EINVAL, "missing \"model\"");
    if (!json_object_is_type(model, json_type_object))
        return ERR(c, TX_EINVAL, "model: expected an object, found %s", type_name(model));
    json_object *t = get(model, "type");
    if (t && !json_object_is_type(t, json_type_string))
        return ERR(c, TX_EINVAL, "model.type: expected a string, found %s", type_name(t));
    if (t && strcmp(json_object_get_string(t), "BPE"))
        return ERR(c, TX_ENOTSUP, "model.type \"%.64s\" is not supported (only BPE)",
                   json_object_get_string(t));
    json_object *vocab = get(model, "vocab"), *merges = get(model, "merges");
    if (!vocab)
        return ERR(c, TX_EINVAL, "model: missing \"vocab\"");
    if (!json_object_is_type(vocab, json_type_object))
        return ERR(c, TX_EINVAL, "model.vocab: expected an object, found %s", type_name(vocab));
    if (!merges)
        return ERR(c, TX_EINVAL, "model: missing \"merges\"");
    if (!json_object_is_type(merges, json_type_array))
        return ERR(c, TX_EINVAL, "model.merges: expected an array, found %s", type_name(merges));

    int64_t max_id = -1;
    if ((rc = load_model_options(c, model)))
        return rc;
    if (fs) { /* the placeholders must be where the fast scan put them */
        if (json_object_object_length(vocab) || json_object_array_length(merges))
            return TOK_FALLBACK;
        rc = fast_vocab(c, fs->vocab, &max_id);
        if (!rc)
            rc = fast_merges(c, fs->merges);
    } else {
        rc = add_vocab(c, vocab, &max_id);
        if (!rc)
            rc = add_merges(c, merges);
    }
    if (rc || (rc = load_model_tail(c, model)))
        return rc;
    if ((rc = parse_added(c, get(root, "added_tokens"), &max_id)))
        return rc;
    if (max_id < 0)
        return ERR(c, TX_EINVAL, "model.vocab: empty vocabulary");
    /* The id tables are sized by the largest id: keep them linear in the
     * input. Real vocabularies are dense (ids 0..N-1 plus added tokens just
     * above), so a largest id far beyond the number of tokens is refused. */
    size_t ntok = tok->vocab.n + tok->n_added;
    if ((uint64_t)max_id >= 2 * (uint64_t)ntok + TOK_ID_SLACK)
        return ERR(c, TX_EINVAL,
                   "model.vocab: largest token id %lld with only %zu tokens exceeds the limit "
                   "%llu (2 x tokens + %u: ids must be nearly dense)",
                   (long long)max_id, ntok, (unsigned long long)(2 * (uint64_t)ntok + TOK_ID_SLACK),
                   TOK_ID_SLACK);
    if ((rc = build_ids(c, max_id)))
        return rc;
    if ((rc = load_normalizer(c, get(root, "normalizer"), "normalizer")))
        return rc;
    if ((rc = build_added(c)))
        return rc;
    if ((rc = load_pretok(c, get(root, "pre_tokenizer"), "pre_tokenizer")))
        return rc;
    struct post p = {{0}, {0}};
    rc = load_post(c, get(root, "post_processor"), "post_processor", &p);
    tok->post_prefix = p.pre.v;
    tok->n_post_prefix = p.pre.n;
    tok->post_suffix = p.suf.v;
    tok->n_post_suffix = p.suf.n;
    if (rc)
        return rc;
    if ((rc = load_decoder(c, get(root, "decoder"), "decoder")))
        return rc;
    return build_decoded(c);
}

/* Parses a document (fs: the fast form, fs->rest) into a tokenizer. */
static int load_doc(const char *json, size_t len, const struct fast *fs, struct tx_tokenizer **out,
                    char *err, size_t errsz)
{
    if (fs) {
        json = fs->rest;
        len = fs->rest_len;
    }
    json_tokener *jt = json_tokener_new_ex(64);
    if (!jt)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    json_tokener_set_flags(jt, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS |
                                   JSON_TOKENER_VALIDATE_UTF8);
    json_object *root = json_tokener_parse_ex(jt, json, (int)len);
    enum json_tokener_error je = json_tokener_get_error(jt);
    size_t end = json_tokener_get_parse_end(jt);
    json_tokener_free(jt);
    if (!root || je != json_tokener_success) {
        json_object_put(root);
        if (fs)
            return TOK_FALLBACK;
        if (je == json_tokener_continue)
            return tx_errbuf(err, errsz, TX_EINVAL, "truncated JSON (input ends after %zu bytes)",
                             len);
        return tx_errbuf(err, errsz, TX_EINVAL, "JSON syntax error near byte %zu: %s", end,
                         json_tokener_error_desc(je));
    }
    for (size_t i = end; i < len; i++) {
        char ch = json[i];
        if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') {
            json_object_put(root);
            if (fs)
                return TOK_FALLBACK;
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "trailing data after the JSON document at byte %zu", i);
        }
    }

    struct tx_tokenizer *tok = calloc(1, sizeof(*tok));
    if (!tok) {
        json_object_put(root);
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    }
    tok->unk_id = -1;
    struct ctx c = {tok, err, errsz, {0}};
    int rc = tok_cache_init(&tok->cache);
    if (rc)
        rc = tx_errbuf(err, errsz, rc, "out of memory");
    else
        rc = load_root(&c, root, fs);
    free(c.tmp.p);
    json_object_put(root);
    if (rc) {
        tx_tokenizer_free(tok);
        return fs ? TOK_FALLBACK : rc;
    }
    *out = tok;
    return 0;
}

int tok_load_buffer_ex(const void *json, size_t len, unsigned flags, struct tx_tokenizer **out,
                       char *err, size_t errsz)
{
    if (err && errsz)
        err[0] = 0;
    if (!out || (!json && len))
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    *out = NULL;
    if (len > INT_MAX)
        return tx_errbuf(err, errsz, TX_EINVAL, "tokenizer file too large (%zu bytes)", len);
    if (len == 0)
        return tx_errbuf(err, errsz, TX_EINVAL, "empty tokenizer file");
    if (!(flags & TOK_LOAD_NO_FAST)) {
        struct fast fs;
        int rc = fast_find(json, len, &fs);
        if (!rc) {
            rc = load_doc(json, len, &fs, out, err, errsz);
            free(fs.rest);
            if (!rc)
                return 0;
        }
        if (flags & TOK_LOAD_FAST_ONLY)
            return TOK_FALLBACK;
        if (err && errsz)
            err[0] = 0;
    }
    return load_doc(json, len, NULL, out, err, errsz);
}

int tx_tokenizer_load_buffer(const void *json, size_t len, struct tx_tokenizer **out, char *err,
                             size_t errsz)
{
    return tok_load_buffer_ex(json, len, 0, out, err, errsz);
}

int tx_tokenizer_load_file(const char *path, struct tx_tokenizer **out, char *err, size_t errsz)
{
    if (!path || !out)
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return tx_errbuf(err, errsz, tx_errno_code(e), "%s: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: not a regular file", path);
    }
    if (st.st_size > INT_MAX) {
        close(fd);
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: file too large", path);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            close(fd);
            free(buf);
            return tx_errbuf(err, errsz, TX_EIO, "%s: read error: %s", path, strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
    char msg[400];
    int rc = tx_tokenizer_load_buffer(buf, n, out, msg, sizeof(msg));
    free(buf);
    if (rc)
        return tx_errbuf(err, errsz, rc, "%s: %s", path, msg);
    return 0;
}

void tx_tokenizer_free(struct tx_tokenizer *tok)
{
    if (!tok)
        return;
    free(tok->pool.p);
    free(tok->tok_off);
    free(tok->tok_len);
    free(tok->dec_off);
    free(tok->dec_len);
    free(tok->id_flags);
    tok_strmap_free(&tok->vocab);
    tok_pairmap_free(&tok->merges);
    free(tok->added);
    tok_strmap_free(&tok->added_map);
    tok_trie_free(&tok->trie_raw);
    tok_trie_free(&tok->trie_norm);
    free(tok->nf);
    for (size_t i = 0; i < tok->n_pt; i++)
        pcre2_code_free(tok->pt[i].re);
    free(tok->pt);
    pcre2_code_free(tok->gpt2_re);
    free(tok->post_prefix);
    free(tok->post_suffix);
    tok_cache_free(&tok->cache);
    free(tok);
}
