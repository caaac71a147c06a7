/* SPDX-License-Identifier: MIT */
/*
 * glm-inference --grammar / --grammar-file / --json-schema (llama-cli's
 * options): the generated text follows a GBNF grammar or a JSON schema.
 * The session's allowed-token mask (glm_session_set_token_mask, applied by
 * the device's SAMPLE) is set before the prompt's pass and after every
 * generated token (on_token, generate.c); the stop tokens are allowed only
 * where the grammar is complete. docs/grammar.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <tx-internal/tx_grammar.h>

#include "common/grammar_vocab.h"
#include "glm_inference.h"

static struct {
    struct txg_grammar *g;
    struct txg_matcher *m;
    struct txg_vocab *v;
    struct txg_mask_cache *cache;
    glm_session_t *s;
    const struct tx_tokenizer *tok;
    uint32_t *mask;
    int n_words, n_stop;
    int32_t stop[16];
} gs;

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0, k;
    char chunk[4096];
    while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (n + k + 1 > cap) {
            cap = (n + k + 1) * 2;
            char *q = realloc(buf, cap);
            if (!q) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = q;
        }
        memcpy(buf + n, chunk, k);
        n += k;
    }
    fclose(f);
    if (!buf)
        buf = calloc(1, 1);
    else
        buf[n] = 0;
    return buf;
}

/* the mask of the matcher's state onto the session */
static int apply_mask(void)
{
    size_t k = txg_vocab_mask_cached(gs.v, gs.cache, gs.m, gs.stop, gs.n_stop, gs.mask);
    if (!k) { /* stuck: only the end */
        for (int i = 0; i < gs.n_stop; i++)
            if (gs.stop[i] >= 0 && gs.stop[i] / 32 < gs.n_words)
                gs.mask[gs.stop[i] / 32] |= 1u << (gs.stop[i] % 32);
    }
    return glm_session_set_token_mask(gs.s, gs.mask, gs.n_words);
}

int gi_grammar_start(const struct opts *o, glm_model_t *m, glm_session_t *s)
{
    if (!o->grammar && !o->grammar_file && !o->json_schema && !o->json_schema_file)
        return 0;
    char err[256] = "";
    char *text = NULL;
    const char *file = o->grammar ? NULL : o->grammar_file ? o->grammar_file : o->json_schema_file;
    char *from_file = file ? read_all(file) : NULL;
    if (file && !from_file) {
        fprintf(stderr, "%s: %s: cannot read it\n", prog, file);
        return -1;
    }
    if (o->grammar) {
        text = strdup(o->grammar);
    } else if (o->grammar_file) {
        text = from_file;
        from_file = NULL;
    } else {
        enum json_tokener_error je;
        json_object *schema =
            json_tokener_parse_verbose(from_file ? from_file : o->json_schema, &je);
        free(from_file);
        if (!schema) {
            fprintf(stderr, "%s: %s: not JSON (%s)\n", prog,
                    o->json_schema_file ? o->json_schema_file : "--json-schema",
                    json_tokener_error_desc(je));
            return -1;
        }
        text = txg_json_schema_to_gbnf(schema, err, sizeof(err));
        json_object_put(schema);
        if (!text) {
            fprintf(stderr, "%s: --json-schema: %s\n", prog, err);
            return -1;
        }
    }
    gs.g = text ? txg_grammar_parse(text, err, sizeof(err)) : NULL;
    free(text);
    if (!gs.g) {
        fprintf(stderr, "%s: %s: %s\n", prog,
                o->grammar ? "--grammar" : file ? file : "--json-schema",
                err[0] ? err : "out of memory");
        return -1;
    }
    int V = glm_model_sample_vocab(m);
    gs.tok = glm_model_tokenizer(m);
    gs.n_stop = glm_model_stop_tokens(m, gs.stop, 16);
    if (gs.n_stop > 16)
        gs.n_stop = 16;
    gs.s = s;
    gs.n_words = (V + 31) / 32;
    gs.m = txg_matcher_new(gs.g);
    gs.v = gs.tok ? txc_grammar_vocab(gs.tok, V, gs.stop, gs.n_stop) : NULL;
    gs.cache = txg_mask_cache_new((size_t)V, 32);
    gs.mask = calloc((size_t)gs.n_words, sizeof(*gs.mask));
    if (!gs.m || !gs.v || !gs.cache || !gs.mask) {
        fprintf(stderr, "%s: the grammar: %s\n", prog,
                gs.tok ? "out of memory" : "the package has no tokenizer");
        gi_grammar_end();
        return -1;
    }
    if (apply_mask()) {
        fprintf(stderr, "%s: the grammar: %s\n", prog, tx_last_error());
        gi_grammar_end();
        return -1;
    }
    return 0;
}

int gi_grammar_token(int32_t tok)
{
    if (!gs.m)
        return 0;
    const char *b = NULL;
    int n = tx_tokenizer_token_bytes(gs.tok, tok, &b);
    if (n > 0 && txg_matcher_accept(gs.m, b, (size_t)n))
        fprintf(stderr, "\n%s: token %d is outside the grammar\n", prog, (int)tok);
    if (apply_mask()) {
        fprintf(stderr, "\n%s: the grammar: %s\n", prog, tx_last_error());
        return -1;
    }
    return 0;
}

void gi_grammar_end(void)
{
    if (gs.s)
        glm_session_set_token_mask(gs.s, NULL, 0);
    txg_matcher_free(gs.m);
    txg_grammar_free(gs.g);
    txg_vocab_free(gs.v);
    txg_mask_cache_free(gs.cache);
    free(gs.mask);
    memset(&gs, 0, sizeof(gs));
}
