/* SPDX-License-Identifier: MIT */
/*
 * The grammar engine's vocabulary for a tokenizer (tools/lib/grammar_vocab.c):
 * every id below n_ids with its bytes, except the stop tokens, which are the
 * grammar's end rather than text it produces (tx-internal/tx_grammar.h). Shared by
 * glm-server and glm-inference.
 */
#ifndef TXC_GRAMMAR_VOCAB_H
#define TXC_GRAMMAR_VOCAB_H

#include <stdint.h>

#include <tx-internal/tx_grammar.h>
#include <tx/tx_tokenizer.h>

/* NULL: out of memory */
struct txg_vocab *txc_grammar_vocab(const struct tx_tokenizer *tok, int n_ids,
                                    const int32_t *stop, int n_stop);

#endif
