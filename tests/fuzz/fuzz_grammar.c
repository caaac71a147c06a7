/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the grammar engine (tx-internal/tx_grammar.h, libtx/grammar/):
 * grammar text and JSON schemas come from HTTP requests. The input is
 * split at its first NUL byte: the part before is a GBNF grammar (and, if
 * it parses as JSON, a schema converted to GBNF first), the part after is
 * text fed to the matcher a few bytes at a time, with the allowed-token
 * mask of a small vocabulary computed at every step (cached and not).
 * Properties: parse and conversion return a result or an error message;
 * a refused chunk leaves the matcher unchanged (the next mask is the same
 * as before it); the cached mask equals the walked one; the end token is
 * allowed exactly when the matcher says the text is complete; never a
 * crash, a leak or an unbounded run (the engine's limits).
 *
 * Builds: make fuzz-grammar (clang -fsanitize=fuzzer, tests/fuzz/README.md);
 * -DTX_FUZZ_STANDALONE: a main() that replays the files named.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <tx-internal/tx_grammar.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ids 0..63: short strings over the characters grammars use; 64: the end */
static const char *const PIECES[] = {
    "{",  "}",    "[",   "]",   ",",   ":",    "\"",   "\\",  " ",   "\n",  "a",   "b",   "0",
    "1",  "9",    "-",   ".",   "e",   "true", "null", "fal", "se",  "\"a", "\":", "{\"", "\"}",
    "ab", "αβ",   "\xce", "\xb1", "€",   "\xe2\x82", "\xac", "x",   "yz",  "<",   ">",   "/",
    "t",  "ru",   "ue",  "nu",  "ll",  "12",  "\\n", "\\u", "00e9", "\t", "  ", "\"\"", "[]",
    "{}", "],",   "},",  "\",", "0.5", "1e2", "-1",  "#",   "(",   ")",   "|",   "*",   "+"};
#define NV 65
#define END_ID 64

static const char *piece(void *user, int32_t id, size_t *len)
{
    (void)user;
    if (id >= END_ID)
        return NULL;
    *len = strlen(PIECES[id]);
    return PIECES[id];
}

static struct txg_vocab *vocab(void)
{
    static struct txg_vocab *v;
    if (!v)
        v = txg_vocab_new(NV, piece, NULL);
    return v;
}

static void masks(struct txg_matcher *m, struct txg_mask_cache *c, uint32_t *a, uint32_t *b)
{
    static const int32_t end = END_ID;
    size_t na = txg_vocab_mask(vocab(), m, &end, 1, a);
    size_t nb = txg_vocab_mask_cached(vocab(), c, m, &end, 1, b);
    if (na != nb || memcmp(a, b, sizeof(uint32_t) * ((NV + 31) / 32)))
        abort(); /* the cache answered differently */
    if (((a[END_ID / 32] >> (END_ID % 32)) & 1u) != (unsigned)txg_matcher_done(m))
        abort(); /* the end token must follow completeness */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    char *text = malloc(glen + 1);
    if (!text)
        return 0;
    memcpy(text, data, glen);
    text[glen] = 0;
    char err[256] = "";
    json_object *schema = json_tokener_parse(text);
    char *gb = NULL;
    if (schema) {
        gb = txg_json_schema_to_gbnf(schema, err, sizeof(err));
        if (!gb && !err[0])
            abort(); /* an error without a message */
        json_object_put(schema);
    }
    err[0] = 0;
    struct txg_grammar *g = txg_grammar_parse(gb ? gb : text, err, sizeof(err));
    free(gb);
    free(text);
    if (!g) {
        if (!err[0])
            abort();
        return 0;
    }
    struct txg_matcher *m = txg_matcher_new(g);
    struct txg_mask_cache *c = txg_mask_cache_new(NV, 3);
    uint32_t a[(NV + 31) / 32], b[(NV + 31) / 32], before[(NV + 31) / 32];
    if (m && c) {
        const uint8_t *in = nul ? nul + 1 : data + size;
        size_t n = nul ? size - glen - 1 : 0;
        for (size_t i = 0; i < n && !txg_matcher_failed(m);) {
            size_t k = 1 + in[i] % 3;
            if (k > n - i)
                k = n - i;
            masks(m, c, before, b);
            if (txg_matcher_accept(m, (const char *)in + i, k) && !txg_matcher_failed(m)) {
                masks(m, c, a, b); /* refused: unchanged */
                if (memcmp(a, before, sizeof(a)))
                    abort();
            }
            i += k;
        }
        masks(m, c, a, b);
    }
    txg_mask_cache_free(c);
    txg_matcher_free(m);
    txg_grammar_free(g);
    return 0;
}

#ifdef TX_FUZZ_STANDALONE
#define FUZZ_NAME "fuzz_grammar"
#include "fuzz_model_replay.h"
#endif
