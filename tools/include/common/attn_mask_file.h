/* SPDX-License-Identifier: MIT */
/*
 * glm-inference --attn-mask FILE: a custom attention mask written as JSON
 * (tools/lib/attn_mask_file.c), turned into the rows of ranges of struct
 * glm_attn_mask (tx/glm.h) for a prompt of n_tokens tokens. One of:
 *   {"spans": [[s, e], ...]}
 *       the tokens of span [s, e) see their own span and the tokens outside
 *       every span; a token outside the spans sees every earlier token
 *   {"table": {"cells": [{"span": [s, e], "row": r, "col": c}, ...]}}
 *       a cell's tokens see the cells of its row and of its column and the
 *       tokens outside every cell (the prefix, separators, the question);
 *       a token outside the cells sees every earlier token
 *   {"rows": [{"query": [s, e], "keys": [[a, b], ...]}, ...]}
 *       the tokens of [s, e) see only the key ranges listed; a token
 *       outside every query range sees every earlier token
 * Ranges are half-open token indices of the prompt (as glm-inference -v
 * lists them), sorted by start and not overlapping; the causal rule
 * always applies and a token always sees itself. An optional "n_tokens"
 * must equal the prompt's length. docs/glm-inference.md.
 */
#ifndef TXC_ATTN_MASK_FILE_H
#define TXC_ATTN_MASK_FILE_H

#include <stddef.h>
#include <stdint.h>

#include <tx/glm.h>

struct txc_attn_mask {
    struct glm_attn_mask m; /* points into the arrays below */
    int32_t *row_start, *ranges;
};

/* 0, or -1 with a message naming the file (what), the entry and the fault
 * in err; *out is then empty (free it anyway: harmless) */
int txc_attn_mask_parse(const char *json, const char *what, int n_tokens, struct txc_attn_mask *out,
                        char *err, size_t errsz);
int txc_attn_mask_load(const char *path, int n_tokens, struct txc_attn_mask *out, char *err,
                       size_t errsz);
void txc_attn_mask_free(struct txc_attn_mask *m);

#endif
