/* SPDX-License-Identifier: MIT */
/* The grammar engine's vocabulary of a tokenizer (common/grammar_vocab.h). */
#include "common/grammar_vocab.h"

struct piece_ctx {
    const struct tx_tokenizer *tok;
    const int32_t *stop;
    int n_stop;
};

static const char *piece_of(void *user, int32_t id, size_t *len)
{
    const struct piece_ctx *c = user;
    for (int i = 0; i < c->n_stop; i++)
        if (c->stop[i] == id)
            return NULL;
    const char *b = NULL;
    int n = tx_tokenizer_token_bytes(c->tok, id, &b);
    if (n <= 0)
        return NULL;
    *len = (size_t)n;
    return b;
}

struct txg_vocab *txc_grammar_vocab(const struct tx_tokenizer *tok, int n_ids,
                                    const int32_t *stop, int n_stop)
{
    struct piece_ctx c = {tok, stop, n_stop};
    return txg_vocab_new(n_ids > 0 ? (size_t)n_ids : 0, piece_of, &c);
}
