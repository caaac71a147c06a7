/* SPDX-License-Identifier: MIT */
/*
 * libtx/tokenizer internal: the parts of the tokenizer.json loader, one job
 * per file (see tok_load.c for the order of a load):
 *   tok_load.c          public entry points, the document, the top level,
 *                       json-c helpers
 *   tok_load_model.c    model: vocab, merges and BPE options (json-c)
 *   tok_load_fast.c     model.vocab / model.merges read straight from the
 *                       text (the fast path; falls back to json-c)
 *   tok_load_norm.c     normalizer (NFC) and tok_normalize
 *   tok_load_pipeline.c pre-tokenizer, post-processor, decoder
 *   tok_load_vocab.c    added tokens, the id table, decoded forms
 */
#ifndef TX_TOK_LOAD_H
#define TX_TOK_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <tx-internal/tx_errors.h>
#include "tok_internal.h"

struct ctx {
    struct tx_tokenizer *tok;
    char *err;
    size_t errsz;
    struct tok_buf tmp;
};

#define ERR(c, code, ...) tx_errbuf((c)->err, (c)->errsz, (code), __VA_ARGS__)

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

struct post {
    struct tok_ids pre, suf;
};

/* tok_load.c */
json_object *tokl_get(json_object *o, const char *key);
int tokl_opt_bool(struct ctx *c, json_object *o, const char *key, const char *where, bool def,
                  bool *out);
int tokl_opt_string(struct ctx *c, json_object *o, const char *key, const char *where,
                    const char **s, size_t *n);
/* o must be an object with a string "type" (errors name where) */
int tokl_req_type(struct ctx *c, json_object *o, const char *where, const char **type);
const char *tokl_type_name(json_object *o);

/* tok_load_model.c */
int tokl_add_merges(struct ctx *c, json_object *merges);
int tokl_add_vocab(struct ctx *c, json_object *vocab, int64_t *max_id);
int tokl_load_model_options(struct ctx *c, json_object *model);
int tokl_load_model_tail(struct ctx *c, json_object *model);
int tokl_merge_put(struct tx_tokenizer *tok, struct tok_buf *scratch, const char *a, size_t na,
                   const char *b, size_t nb, size_t rank);
bool tokl_split_merge(const char *s, size_t n, const char **a, size_t *na, const char **b,
                      size_t *nb);

/* tok_load_fast.c */
int tokl_fast_find(const char *s, size_t n, struct fast *fs);
int tokl_fast_merges(struct ctx *c, struct fspan sp);
int tokl_fast_vocab(struct ctx *c, struct fspan sp, int64_t *max_id);

/* tok_load_norm.c */
int tokl_load_normalizer(struct ctx *c, json_object *o, const char *where);

/* tok_load_pipeline.c */
int tokl_load_decoder(struct ctx *c, json_object *o, const char *where);
int tokl_load_post(struct ctx *c, json_object *o, const char *where, struct post *p);
int tokl_load_pretok(struct ctx *c, json_object *o, const char *where);

/* tok_load_vocab.c */
int tokl_build_added(struct ctx *c);
int tokl_build_decoded(struct ctx *c);
int tokl_build_ids(struct ctx *c, int64_t max_id);
int tokl_parse_added(struct ctx *c, json_object *list, int64_t *max_id);

#endif
