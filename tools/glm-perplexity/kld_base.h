/* SPDX-License-Identifier: MIT */
/*
 * The --kl-divergence-base file of glm-perplexity: the FP32 logits of the
 * scored positions of a base package over a text, and the tokens they were
 * computed from, so that a run of another package over the same text can be
 * compared position by position (docs/perplexity.md gives the layout).
 */
#ifndef GLM_KLD_BASE_H
#define GLM_KLD_BASE_H

#include <stdint.h>
#include <stdio.h>

struct kld_base {
    FILE *f;
    char *path, *tmp; /* writing: the temporary name renamed over path at the end */
    uint32_t n_vocab, n_ctx, n_chunk, first;
    uint64_t n_tok;
    int32_t *tok; /* reading: the base's tokens */
};

/* Creates PATH's temporary file and writes the header and tokens.
 * 0, or -1 with msg set. */
int kld_base_create(struct kld_base *b, const char *path, uint32_t n_vocab, uint32_t n_ctx,
                    uint32_t n_chunk, uint32_t first, const int32_t *tok, char *msg, size_t msgsz);
/* one scored position's logits (n_vocab floats) */
int kld_base_write_row(struct kld_base *b, const float *logits, char *msg, size_t msgsz);
/* closes and renames the temporary file over the path (commit) or removes it */
int kld_base_finish(struct kld_base *b, int commit, char *msg, size_t msgsz);

/* Opens a base file and checks it against this run: the vocabulary, the
 * context and the text's tokens must be those of the base. n_chunk: the
 * chunks this run wants (0: the base's). 0 or -1 with msg naming what
 * differs. */
int kld_base_open(struct kld_base *b, const char *path, uint32_t n_vocab, const int32_t *tok,
                  uint64_t n_tok, uint32_t n_ctx, char *msg, size_t msgsz);
int kld_base_read_row(struct kld_base *b, float *logits, char *msg, size_t msgsz);
void kld_base_close(struct kld_base *b);

#endif
