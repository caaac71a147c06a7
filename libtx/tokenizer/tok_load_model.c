/* SPDX-License-Identifier: MIT */
/* tokenizer.json loading: model (vocab, merges, BPE options) through json-c. (tok_load.h) */
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

/* ------------------------------------------------------------- model */

int tokl_add_vocab(struct ctx *c, json_object *vocab, int64_t *max_id)
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
                       key, tokl_type_name(val));
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
bool tokl_split_merge(const char *s, size_t n, const char **a, size_t *na, const char **b,
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

/* Outcomes of tokl_merge_put other than 0. */
enum { MERGE_NO_A = 1, MERGE_NO_B, MERGE_SHORT_B, MERGE_NO_NEW, MERGE_NOMEM };

/* Resolves the merge (a, b) against the vocabulary (the merged token is a
 * followed by b without continuing_subword_prefix, built in scratch) and
 * stores it with rank; 0, or which check failed. */
int tokl_merge_put(struct tx_tokenizer *tok, struct tok_buf *scratch, const char *a, size_t na,
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
        if (!tokl_split_merge(s, (size_t)json_object_get_string_len(m), a, na, b, nb))
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
               tokl_type_name(m));
}

int tokl_add_merges(struct ctx *c, json_object *merges)
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
        switch (tokl_merge_put(tok, &c->tmp, a, na, b, nb, rank)) {
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

int tokl_load_model_options(struct ctx *c, json_object *model)
{
    struct tx_tokenizer *tok = c->tok;
    json_object *d = tokl_get(model, "dropout");
    if (d) {
        if (!json_object_is_type(d, json_type_double) && !json_object_is_type(d, json_type_int))
            return ERR(c, TX_EINVAL, "model.dropout: expected a number, found %s",
                       tokl_type_name(d));
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
    if ((rc = tokl_opt_string(c, model, "continuing_subword_prefix", "model", &s, &n)))
        return rc;
    if (s && n) {
        int64_t off = tok_pool_add(&tok->pool, s, n);
        if (off < 0)
            return ERR(c, TX_ENOMEM, "out of memory");
        tok->prefix_off = off;
        tok->prefix_len = (uint32_t)n;
    }
    if ((rc = tokl_opt_string(c, model, "end_of_word_suffix", "model", &s, &n)))
        return rc;
    if (s && n) {
        int64_t off = tok_pool_add(&tok->pool, s, n);
        if (off < 0)
            return ERR(c, TX_ENOMEM, "out of memory");
        tok->suffix_off = off;
        tok->suffix_len = (uint32_t)n;
    }
    if ((rc = tokl_opt_bool(c, model, "fuse_unk", "model", false, &tok->fuse_unk)) ||
        (rc = tokl_opt_bool(c, model, "byte_fallback", "model", false, &tok->byte_fallback)) ||
        (rc = tokl_opt_bool(c, model, "ignore_merges", "model", false, &tok->ignore_merges)))
        return rc;
    return 0;
}

int tokl_load_model_tail(struct ctx *c, json_object *model)
{
    struct tx_tokenizer *tok = c->tok;
    const char *s;
    size_t n;
    int rc;
    tok->unk_id = -1;
    if ((rc = tokl_opt_string(c, model, "unk_token", "model", &s, &n)))
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
