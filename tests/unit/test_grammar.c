/* SPDX-License-Identifier: MIT */
/*
 * tx-internal/tx_grammar.h: GBNF parsing and its errors (line, column, the rule
 * named), the matcher over UTF-8 bytes (partial characters too), the
 * vocabulary trie's allowed-token masks (the end ids only when the grammar
 * is complete), and JSON schemas: their errors name the keyword and place;
 * random walks through the grammar of random schemas give JSON that
 * json-c parses, with the required properties and the enum values; the
 * repository's Qwen3 vocabulary's mask inside a JSON string (and its time).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include <json-c/json.h>
#include <tx-internal/tx_grammar.h>
#include <tx/tx_tokenizer.h>

#include "common/grammar_vocab.h"

#include "tx_test_main.h"

static struct txg_grammar *parse_ok(const char *text)
{
    char err[256] = "";
    struct txg_grammar *g = txg_grammar_parse(text, err, sizeof(err));
    ck_assert_msg(g, "%s: %s", text, err);
    return g;
}

static int accepts(const struct txg_grammar *g, const char *s, int *done)
{
    struct txg_matcher *m = txg_matcher_new(g);
    ck_assert_ptr_nonnull(m);
    int rc = txg_matcher_accept(m, s, strlen(s));
    if (done)
        *done = txg_matcher_done(m);
    txg_matcher_free(m);
    return rc == 0;
}

/* the whole of s is a sentence */
static int sentence(const struct txg_grammar *g, const char *s)
{
    int done = 0;
    return accepts(g, s, &done) && done;
}

START_TEST(gbnf_match)
{
    struct txg_grammar *g = parse_ok("# a comment\n"
                                     "root ::= \"a\" digit+ ( \"x\" | \"yz\" )? tail\n"
                                     "digit ::= [0-9]\n"
                                     "tail ::= \"\" |\n"
                                     "   \"!\"{2,3}\n");
    ck_assert(sentence(g, "a1"));
    ck_assert(sentence(g, "a123x"));
    ck_assert(sentence(g, "a1yz!!"));
    ck_assert(sentence(g, "a1yz!!!"));
    ck_assert(!accepts(g, "a1yz!!!!", NULL));
    ck_assert(!sentence(g, "a1y"));
    ck_assert(accepts(g, "a1y", NULL)); /* a prefix */
    ck_assert(!sentence(g, "a1!"));
    ck_assert(!accepts(g, "b", NULL));
    ck_assert(!accepts(g, "ax", NULL));
    /* a refused byte leaves the matcher as it was */
    struct txg_matcher *m = txg_matcher_new(g);
    ck_assert_int_eq(txg_matcher_accept(m, "a1", 2), 0);
    ck_assert_int_eq(txg_matcher_accept(m, "q", 1), -1);
    ck_assert_int_eq(txg_matcher_accept(m, "x", 1), 0);
    ck_assert(txg_matcher_done(m));
    txg_matcher_free(m);
    txg_grammar_free(g);

    /* UTF-8 classes, negation, any character, escapes */
    g = parse_ok("root ::= [α-ω]+ [^a-z] . \"\\x41\\u00e9\\n\"\n");
    ck_assert(sentence(g, "αβZ€Aé\n"));
    ck_assert(!accepts(g, "αβzz", NULL)); /* β may be the [^a-z], z the ., not z again */
    txg_grammar_free(g);
    g = parse_ok("root ::= [α-ω]+ \"!\"\n");
    m = txg_matcher_new(g);
    ck_assert_int_eq(txg_matcher_accept(m, "\xce", 1), 0); /* half of α: may complete */
    ck_assert_int_eq(txg_matcher_accept(m, "\xb1", 1), 0);
    ck_assert_int_eq(txg_matcher_accept(m, "\xe2", 1), -1); /* no class of [α-ω] starts so */
    ck_assert_int_eq(txg_matcher_accept(m, "\xff", 1), -1); /* not UTF-8 */
    txg_matcher_free(m);
    txg_grammar_free(g);

    /* nullable right recursion and nested groups */
    g = parse_ok("root ::= item*\nitem ::= (\"(\" root \")\") | \"-\"\n");
    ck_assert(sentence(g, ""));
    ck_assert(sentence(g, "(()-(-))"));
    ck_assert(!sentence(g, "(()"));
    txg_grammar_free(g);
}
END_TEST

static void parse_err(const char *text, const char *want)
{
    char err[256] = "";
    struct txg_grammar *g = txg_grammar_parse(text, err, sizeof(err));
    ck_assert_msg(!g, "%s parsed", text);
    ck_assert_msg(strstr(err, want), "%s: '%s' lacks '%s'", text, err, want);
}

START_TEST(gbnf_errors)
{
    parse_err("root ::= foo\n", "line 1, column 10: rule 'foo' is not defined");
    parse_err("root ::= x\nx ::= x \"a\"\n", "rule 'x' is left-recursive");
    parse_err("root ::= y\ny ::= z? y \"a\"\nz ::= \"b\"\n", "left-recursive");
    parse_err("root ::= \"abc\n", "line 1, column 10: unterminated literal");
    parse_err("a ::= \"x\"\n", "no rule 'root'");
    parse_err("root ::= \"\\q\"\n", "unknown escape");
    parse_err("root ::= * \"a\"\n", "'*' follows nothing");
    parse_err("root ::= [z-a]\n", "backwards");
    parse_err("root ::= \"a\"{3,1}\n", "bad repetition");
    parse_err("root ::= (\"a\"\n", "expected ')'");
    parse_err("root \"a\"\n", "expected '::='");
    parse_err("root ::= \"a\"\nroot ::= \"b\"\n", "defined twice");
    parse_err("root ::= [abc\n", "unterminated character class");
}
END_TEST

static const char *vocab_piece(void *user, int32_t id, size_t *len)
{
    const char *const *v = user;
    if (!v[id])
        return NULL;
    *len = strlen(v[id]);
    return v[id];
}

static int bit(const uint32_t *mask, int id)
{
    return mask[id / 32] >> (id % 32) & 1;
}

START_TEST(vocab_masks)
{
    /* 0 "a", 1 "1", 2 "12", 3 "x", 4 "yz", 5 "b", 6 "a1", 7 NULL (EOS),
     * 8 "1x", 9 "\xce" (half a character), 10 "y", 11 "a1" again */
    const char *v[] = {"a", "1", "12", "x", "yz", "b", "a1", NULL, "1x", "\xce", "y", "a1"};
    struct txg_vocab *tv = txg_vocab_new(12, vocab_piece, (void *)v);
    ck_assert_ptr_nonnull(tv);
    struct txg_grammar *g = parse_ok("root ::= \"a\" [0-9]+ ( \"x\" | \"yz\" )?\n");
    struct txg_matcher *m = txg_matcher_new(g);
    uint32_t mask[1];
    int32_t eos = 7;
    size_t n = txg_vocab_mask(tv, m, &eos, 1, mask);
    ck_assert_uint_eq(n, 3);
    ck_assert(bit(mask, 0) && bit(mask, 6) && bit(mask, 11) && !bit(mask, 7) && !bit(mask, 1));
    ck_assert_int_eq(txg_matcher_accept(m, "a1", 2), 0);
    n = txg_vocab_mask(tv, m, &eos, 1, mask);
    /* digits, x, y, yz, 1x and the end */
    ck_assert(bit(mask, 1) && bit(mask, 2) && bit(mask, 3) && bit(mask, 4) && bit(mask, 8) &&
              bit(mask, 10) && bit(mask, 7));
    ck_assert(!bit(mask, 0) && !bit(mask, 5) && !bit(mask, 6) && !bit(mask, 9));
    ck_assert_uint_eq(n, 7);
    ck_assert_int_eq(txg_matcher_accept(m, "y", 1), 0);
    n = txg_vocab_mask(tv, m, &eos, 1, mask);
    ck_assert_uint_eq(n, 0); /* "z" is no token alone */
    txg_matcher_free(m);
    txg_grammar_free(g);
    txg_vocab_free(tv);
}
END_TEST

static void schema_err(const char *schema, const char *want)
{
    json_object *s = json_tokener_parse(schema);
    ck_assert_ptr_nonnull(s);
    char err[256] = "";
    char *gb = txg_json_schema_to_gbnf(s, err, sizeof(err));
    ck_assert_msg(!gb, "%s converted", schema);
    ck_assert_msg(strstr(err, want), "%s: '%s' lacks '%s'", schema, err, want);
    json_object_put(s);
}

START_TEST(schema_errors)
{
    schema_err("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"x\"}}}",
               "json_schema at '/properties/a': 'pattern' is not supported");
    schema_err("{\"type\":\"object\",\"properties\":{},\"required\":[\"q\"]}",
               "required property 'q' is not in 'properties'");
    schema_err("{\"$ref\":\"#/$defs/missing\"}", "$ref '#/$defs/missing' does not resolve");
    schema_err("{\"type\":\"strung\"}", "unknown type 'strung'");
    schema_err("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "maxItems 2 < minItems 3");
    schema_err("{\"enum\":[]}", "'enum' must be a non-empty array");
    schema_err("{\"type\":\"integer\",\"minimum\":3}", "'minimum' is not supported");
    schema_err("false", "accepts nothing");
}
END_TEST

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A random sentence of g: one byte at a time among those it allows (the
 * printable ASCII, the end when complete; ends are taken more often as the
 * text grows). NULL when the walk got stuck (never for a good grammar). */
static char *random_walk(const struct txg_grammar *g, struct txg_vocab *tv, uint64_t *rs)
{
    static const int32_t eos = 128;
    struct txg_matcher *m = txg_matcher_new(g);
    ck_assert_ptr_nonnull(m);
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    uint32_t mask[5];
    for (;;) {
        size_t k = txg_vocab_mask(tv, m, &eos, 1, mask);
        if (!k || n + 2 >= cap) {
            free(out);
            out = NULL;
            break;
        }
        if (bit(mask, eos) && (k == 1 || rng_next(rs) % 4 == 0))
            break;
        /* prefer closing characters once long */
        int pick = -1;
        if (n > 200) {
            static const char closers[] = "\"]}0";
            for (const char *q = closers; *q && pick < 0; q++)
                if (bit(mask, *q))
                    pick = *q;
        }
        if (pick < 0) {
            uint64_t r = rng_next(rs) % k;
            for (int id = 0; id < 129; id++)
                if (bit(mask, id) && id != eos && r-- == 0) {
                    pick = id;
                    break;
                }
            if (pick < 0)
                break; /* only the end was left */
        }
        char c = (char)pick;
        ck_assert_int_eq(txg_matcher_accept(m, &c, 1), 0);
        out[n++] = c;
    }
    if (out)
        out[n] = 0;
    txg_matcher_free(m);
    return out;
}

static const char *ascii_piece(void *user, int32_t id, size_t *len)
{
    static char bytes[128];
    (void)user;
    if (id >= 128 || (id < 32 && id != '\n'))
        return NULL;
    bytes[id] = (char)id;
    *len = 1;
    return &bytes[id];
}

START_TEST(schema_walks)
{
    const char *schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},"
        "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\","
        "\"b\",1,null]},\"minItems\":1,\"maxItems\":3},\"ok\":{\"type\":\"boolean\"}},"
        "\"required\":[\"name\",\"tags\"],\"additionalProperties\":false}",
        "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"number\"},"
        "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":"
        "[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}",
        "{\"type\":[\"string\",\"null\"],\"maxLength\":4}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"const\":\"x/y\"},\"b\":{\"type\":"
        "\"object\",\"additionalProperties\":{\"type\":\"integer\"}}},\"required\":[\"a\"]}",
    };
    struct txg_vocab *tv = txg_vocab_new(129, ascii_piece, NULL);
    ck_assert_ptr_nonnull(tv);
    uint64_t rs = 0x9e3779b97f4a7c15ull;
    for (size_t si = 0; si < sizeof(schemas) / sizeof(schemas[0]); si++) {
        json_object *s = json_tokener_parse(schemas[si]);
        ck_assert_ptr_nonnull(s);
        char err[256] = "";
        char *gb = txg_json_schema_to_gbnf(s, err, sizeof(err));
        ck_assert_msg(gb, "%s", err);
        struct txg_grammar *g = txg_grammar_parse(gb, err, sizeof(err));
        ck_assert_msg(g, "%s\n%s", err, gb);
        for (int k = 0; k < 30; k++) {
            char *t = random_walk(g, tv, &rs);
            ck_assert_msg(t, "schema %zu: the walk got stuck", si);
            enum json_tokener_error je;
            json_object *o = json_tokener_parse_verbose(t, &je);
            ck_assert_msg(je == json_tokener_success, "schema %zu: '%s' is not JSON", si, t);
            if (si == 0) {
                json_object *x;
                ck_assert(json_object_object_get_ex(o, "name", &x) &&
                          json_object_is_type(x, json_type_string) &&
                          json_object_get_string_len(x) <= 8);
                ck_assert(json_object_object_get_ex(o, "tags", &x) &&
                          json_object_array_length(x) >= 1 && json_object_array_length(x) <= 3);
                json_object_object_foreach(o, key, val)
                {
                    (void)val;
                    ck_assert(!strcmp(key, "name") || !strcmp(key, "age") ||
                              !strcmp(key, "tags") || !strcmp(key, "ok"));
                }
            } else if (si == 3) {
                json_object *x;
                ck_assert(json_object_object_get_ex(o, "a", &x) &&
                          !strcmp(json_object_get_string(x), "x/y"));
            }
            json_object_put(o);
            free(t);
        }
        txg_grammar_free(g);
        free(gb);
        json_object_put(s);
    }
    txg_vocab_free(tv);
}
END_TEST

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The repository's Qwen3 vocabulary (151,669 ids): inside a JSON string
 * nearly every token is allowed (the trie walk's worst case; its time is
 * printed), never one with a raw newline, and the end only after the
 * closing quote; the mask cache answers a state met again. */
START_TEST(qwen3_vocab_mask)
{
    struct tx_tokenizer *tok = NULL;
    char err[256];
    if (tx_tokenizer_load_file("data/tokenizers/qwen3/tokenizer.json", &tok, err, sizeof(err))) {
        printf("SKIP qwen3_vocab_mask: run from the source tree (%s)\n", err);
        return;
    }
    int V = (int)tx_tokenizer_vocab_size(tok);
    int32_t eos = tx_tokenizer_token_to_id(tok, "<|im_end|>", 10);
    ck_assert_int_ge(eos, 0);
    struct txg_vocab *tv = txc_grammar_vocab(tok, V, &eos, 1);
    struct txg_grammar *g = parse_ok("root ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]* \"\\\"\"\n");
    struct txg_matcher *m = txg_matcher_new(g);
    struct txg_mask_cache *c = txg_mask_cache_new((size_t)V, 4);
    uint32_t *mask = calloc((size_t)(V + 31) / 32, 4);
    ck_assert(tv && m && c && mask);
    ck_assert_int_eq(txg_matcher_accept(m, "\"", 1), 0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t k = txg_vocab_mask_cached(tv, c, m, &eos, 1, mask);
    double first = ms_since(&t0);
    int32_t quote = tx_tokenizer_token_to_id(tok, "\"", 1);
    int32_t nl = tx_tokenizer_token_to_id(tok, "\xc4\x8a", 2); /* "\n" in the byte alphabet */
    ck_assert(k > (size_t)V / 2);
    ck_assert(quote >= 0 && bit(mask, quote));
    ck_assert(nl >= 0 && !bit(mask, nl));
    ck_assert(!bit(mask, eos));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t k2 = txg_vocab_mask_cached(tv, c, m, &eos, 1, mask);
    double again = ms_since(&t0);
    ck_assert_uint_eq(k, k2);
    ck_assert_int_eq(txg_matcher_accept(m, "ab\"", 3), 0);
    ck_assert_uint_eq(txg_vocab_mask_cached(tv, c, m, &eos, 1, mask), 1);
    ck_assert(bit(mask, eos));
    printf("qwen3_vocab_mask: inside a JSON string %zu of %d ids allowed: trie walk %.1f ms, "
           "the same state again (cache) %.3f ms\n",
           k, V, first, again);
    free(mask);
    txg_mask_cache_free(c);
    txg_matcher_free(m);
    txg_grammar_free(g);
    txg_vocab_free(tv);
    tx_tokenizer_free(tok);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {gbnf_match, gbnf_errors, vocab_masks, schema_errors,
                                  schema_walks, qwen3_vocab_mask};
    return tx_test_main("grammar", tests, sizeof(tests) / sizeof(tests[0]));
}
