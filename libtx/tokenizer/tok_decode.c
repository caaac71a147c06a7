/* SPDX-License-Identifier: MIT */
/* Decoding, streaming decoding and vocabulary queries. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

static inline bool id_present(const struct tx_tokenizer *tok, int32_t id)
{
    return id >= 0 && (uint32_t)id < tok->n_ids && (tok->id_flags[id] & TOK_ID_PRESENT);
}

int tx_tokenizer_decode(const struct tx_tokenizer *tok, const int32_t *ids, size_t n_ids,
                        unsigned flags, char **text, size_t *len, char *err, size_t errsz)
{
    if (err && errsz)
        err[0] = 0;
    if (!tok || !text || (!ids && n_ids))
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    *text = NULL;
    if (len)
        *len = 0;
    struct tok_buf raw = {0}, out = {0};
    bool first = true;
    int rc = 0;
    for (size_t i = 0; i < n_ids && !rc; i++) {
        int32_t id = ids[i];
        if (!id_present(tok, id)) {
            if (flags & TX_TOKENIZER_SKIP_UNKNOWN)
                continue;
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "token id %d (position %zu) is not in the vocabulary (%u ids)", id, i,
                           tok->n_ids);
            break;
        }
        if ((flags & TX_TOKENIZER_SKIP_SPECIAL) && (tok->id_flags[id] & TOK_ID_SPECIAL))
            continue;
        if (tok->decoder == TOK_DEC_NONE && !first && tok_buf_put(&raw, " ", 1))
            rc = TX_ENOMEM;
        if (!rc && tok_buf_put(&raw, tok->pool.p + tok->dec_off[id], tok->dec_len[id]))
            rc = TX_ENOMEM;
        first = false;
    }
    if (!rc && (tok_buf_reserve(&out, raw.len) ||
                tok_buf_put_lossy(&out, raw.p ? raw.p : "", raw.len, false, NULL)))
        rc = TX_ENOMEM;
    free(raw.p);
    if (rc) {
        free(out.p);
        return rc == TX_ENOMEM ? tx_errbuf(err, errsz, rc, "out of memory") : rc;
    }
    *text = out.p;
    if (len)
        *len = out.len;
    return 0;
}

int tx_tokenizer_token_bytes(const struct tx_tokenizer *tok, int32_t id, const char **bytes)
{
    if (!tok || !bytes)
        return tx_errbuf(NULL, 0, TX_EINVAL, "tx_tokenizer_token_bytes: NULL argument");
    if (!id_present(tok, id))
        return tx_errbuf(NULL, 0, TX_EINVAL, "token id %d is not in the vocabulary (%u ids)", id,
                         tok->n_ids);
    *bytes = tok->pool.p + tok->dec_off[id];
    return (int)tok->dec_len[id];
}

/* ------------------------------------------------------------ stream */

struct tx_tokenizer_stream {
    const struct tx_tokenizer *tok;
    unsigned flags;
    bool first;
    struct tok_buf pending, out;
};

struct tx_tokenizer_stream *tx_tokenizer_stream_new(const struct tx_tokenizer *tok,
                                                    unsigned decode_flags)
{
    if (!tok)
        return NULL;
    struct tx_tokenizer_stream *st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    st->tok = tok;
    st->flags = decode_flags;
    st->first = true;
    if (tok_buf_reserve(&st->out, 16) || tok_buf_reserve(&st->pending, 16)) {
        tx_tokenizer_stream_free(st);
        return NULL;
    }
    return st;
}

int tx_tokenizer_stream_put(struct tx_tokenizer_stream *st, int32_t id, const char **text,
                            size_t *len)
{
    if (!st || !text || !len)
        return tx_errbuf(NULL, 0, TX_EINVAL, "tx_tokenizer_stream_put: NULL argument");
    const struct tx_tokenizer *tok = st->tok;
    st->out.len = 0;
    st->out.p[0] = 0;
    *text = st->out.p;
    *len = 0;
    if (!id_present(tok, id))
        return (st->flags & TX_TOKENIZER_SKIP_UNKNOWN)
                   ? 0
                   : tx_errbuf(NULL, 0, TX_EINVAL, "token id %d is not in the vocabulary (%u ids)",
                               id, tok->n_ids);
    if ((st->flags & TX_TOKENIZER_SKIP_SPECIAL) && (tok->id_flags[id] & TOK_ID_SPECIAL))
        return 0;
    size_t used;
    if ((tok->decoder == TOK_DEC_NONE && !st->first && tok_buf_put(&st->pending, " ", 1)) ||
        tok_buf_put(&st->pending, tok->pool.p + tok->dec_off[id], tok->dec_len[id]) ||
        tok_buf_put_lossy(&st->out, st->pending.p, st->pending.len, true, &used))
        return tx_errbuf(NULL, 0, TX_ENOMEM, "out of memory");
    st->first = false;
    memmove(st->pending.p, st->pending.p + used, st->pending.len - used);
    st->pending.len -= used;
    *text = st->out.p;
    *len = st->out.len;
    return 0;
}

int tx_tokenizer_stream_flush(struct tx_tokenizer_stream *st, const char **text, size_t *len)
{
    if (!st || !text || !len)
        return tx_errbuf(NULL, 0, TX_EINVAL, "tx_tokenizer_stream_flush: NULL argument");
    st->out.len = 0;
    st->out.p[0] = 0;
    int rc = tok_buf_put_lossy(&st->out, st->pending.p, st->pending.len, false, NULL);
    st->pending.len = 0;
    st->first = true;
    *text = st->out.p;
    *len = st->out.len;
    return rc ? tx_errbuf(NULL, 0, TX_ENOMEM, "out of memory") : 0;
}

void tx_tokenizer_stream_free(struct tx_tokenizer_stream *st)
{
    if (!st)
        return;
    free(st->pending.p);
    free(st->out.p);
    free(st);
}

/* -------------------------------------------------------- vocabulary */

size_t tx_tokenizer_vocab_size(const struct tx_tokenizer *tok)
{
    return tok ? tok->n_ids : 0;
}

int32_t tok_lookup(const struct tx_tokenizer *tok, const char *token, size_t len)
{
    int32_t id = tok_strmap_get(&tok->added_map, token, len);
    return id < 0 ? tok_strmap_get(&tok->vocab, token, len) : id;
}

int32_t tx_tokenizer_token_to_id(const struct tx_tokenizer *tok, const char *token, size_t len)
{
    if (!tok || (!token && len))
        return tx_errbuf(NULL, 0, TX_EINVAL, "tx_tokenizer_token_to_id: NULL argument");
    int32_t id = tok_lookup(tok, token, len);
    return id < 0 ? tx_errbuf(NULL, 0, TX_ENOENT, "no token \"%.*s\"", (int)(len > 64 ? 64 : len),
                              token)
                  : id;
}

const char *tx_tokenizer_id_to_token(const struct tx_tokenizer *tok, int32_t id)
{
    if (!tok || !id_present(tok, id))
        return NULL;
    return tok->pool.p + tok->tok_off[id];
}

int tx_tokenizer_is_special(const struct tx_tokenizer *tok, int32_t id)
{
    return tok && id_present(tok, id) && (tok->id_flags[id] & TOK_ID_SPECIAL) ? 1 : 0;
}

size_t tx_tokenizer_added_count(const struct tx_tokenizer *tok)
{
    return tok ? tok->n_added : 0;
}

int tx_tokenizer_added_get(const struct tx_tokenizer *tok, size_t i,
                           struct tx_tokenizer_added_token *out)
{
    if (!tok || !out)
        return tx_errbuf(NULL, 0, TX_EINVAL, "tx_tokenizer_added_get: NULL argument");
    if (i >= tok->n_added)
        return tx_errbuf(NULL, 0, TX_EINVAL, "added token %zu does not exist (%zu)", i,
                         tok->n_added);
    const struct tok_added *a = &tok->added[i];
    out->id = a->id;
    out->content = tok->pool.p + a->off;
    out->content_len = a->len;
    out->special = a->special;
    out->single_word = a->single_word;
    out->lstrip = a->lstrip;
    out->rstrip = a->rstrip;
    out->normalized = a->normalized;
    return 0;
}
