/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the tokenizer (libFuzzer entry point
 * LLVMFuzzerTestOneInput). The first input byte selects what is fuzzed:
 *   0  the rest is a tokenizer.json: load it; if it loads, encode and decode
 *      a few fixed strings with it; the loader's two paths (model.vocab and
 *      model.merges read from the text, or everything through json-c) give
 *      the same result: the same error or the same tokenizer;
 *   1  the rest is text: encode it with a built-in GLM-style tokenizer
 *      (GLM split regex, ByteLevel, added tokens with every flag); valid
 *      UTF-8 must decode back to exactly the same bytes;
 *   2  the rest is little-endian int32 ids: decode them, and stream-decode
 *      them; both must give the same text.
 * A violated property calls abort(), so the fuzzer reports it.
 *
 * Builds:
 *   make fuzz-tokenizer   (clang -fsanitize=fuzzer, see
 *                                           tests/fuzz/README.md)
 *   -DTX_FUZZ_STANDALONE                   a main() that replays the files
 *                                           named on the command line
 * tests/unit/test_tokenizer.c includes this file and replays
 * tests/fuzz/corpus/tokenizer/ through it on every unit-test run.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_tokenizer.h>

#include "tokenizer/tok_internal.h" /* tok_load_buffer_ex: both load paths */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* GLM-style fixture: byte-level alphabet (id = byte), a few merges, the
 * GLM split regex, NFC, added tokens with every flag. */
static char *fz_fixture_json(void)
{
    size_t cap = 16384, n = 0;
    char *j = malloc(cap);
    if (!j)
        return NULL;
    n += (size_t)snprintf(j + n, cap - n, "{\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (unsigned b = 0; b < 256; b++) {
        unsigned cp;
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
            cp = b;
        else if (b <= 32)
            cp = 256 + b;
        else if (b <= 160)
            cp = 256 + 33 + (b - 127);
        else
            cp = 256 + 67;
        char u[8];
        if (cp == '"' || cp == '\\')
            snprintf(u, sizeof(u), "\\%c", (char)cp);
        else if (cp < 0x80)
            snprintf(u, sizeof(u), "%c", (char)cp);
        else
            snprintf(u, sizeof(u), "%c%c", (char)(0xC0 | (cp >> 6)), (char)(0x80 | (cp & 0x3F)));
        n += (size_t)snprintf(j + n, cap - n, "\"%s\":%u,", u, b);
    }
    n += (size_t)snprintf(
        j + n, cap - n,
        "\"12\":256,\"123\":257,\"45\":258,\"456\":259,\"\xC4\xA0t\":260,\"he\":261,"
        "\"\xC4\xA0the\":262,\"\xC3\x83\xC2\xA9\":263},"
        "\"merges\":[[\"1\",\"2\"],[\"12\",\"3\"],[\"4\",\"5\"],[\"45\",\"6\"],"
        "\"\xC4\xA0 t\",\"h e\",[\"\xC4\xA0t\",\"he\"],[\"\xC3\x83\",\"\xC2\xA9\"]]},"
        "\"normalizer\":{\"type\":\"NFC\"},"
        "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
        "{\"type\":\"Split\",\"pattern\":{\"Regex\":"
        "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
        "\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|"
        "\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
        "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]},"
        "\"added_tokens\":["
        "{\"id\":300,\"content\":\"[gMASK]\",\"special\":true,\"normalized\":false},"
        "{\"id\":301,\"content\":\"<sop>\",\"special\":true,\"normalized\":false},"
        "{\"id\":302,\"content\":\"<|user|>\",\"special\":true,\"normalized\":false},"
        "{\"id\":303,\"content\":\"<mask>\",\"lstrip\":true,\"rstrip\":true,"
        "\"normalized\":false},"
        "{\"id\":304,\"content\":\"<sw>\",\"single_word\":true,\"normalized\":false},"
        "{\"id\":305,\"content\":\"\xC3\x85\",\"normalized\":true}],"
        "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":["
        "{\"SpecialToken\":{\"id\":\"[gMASK]\",\"type_id\":0}},"
        "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
        "\"special_tokens\":{\"[gMASK]\":{\"id\":\"[gMASK]\",\"ids\":[300],"
        "\"tokens\":[\"[gMASK]\"]}}},"
        "\"decoder\":{\"type\":\"ByteLevel\"}}");
    return j;
}

static struct tx_tokenizer *fz_fixture;

static struct tx_tokenizer *fz_get_fixture(void)
{
    if (!fz_fixture) {
        char *j = fz_fixture_json();
        char err[512];
        if (!j || tx_tokenizer_load_buffer(j, strlen(j), &fz_fixture, err, sizeof(err))) {
            fprintf(stderr, "fuzz fixture does not load: %s\n", j ? err : "out of memory");
            abort();
        }
        free(j);
    }
    return fz_fixture;
}

static void fz_check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz property violated: %s\n", what);
        abort();
    }
}

static void fz_roundtrip(const struct tx_tokenizer *tok, const char *text, size_t len,
                         unsigned flags, int expect_identity)
{
    int32_t *ids = NULL;
    size_t n = 0;
    char err[512];
    int rc = tx_tokenizer_encode(tok, text, len, flags, &ids, &n, err, sizeof(err));
    fz_check(rc <= 0, "encode returns 0 or a negative errno");
    fz_check(err[0] || !rc, "an error comes with a message");
    if (rc)
        return;
    size_t vs = tx_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < n; i++)
        fz_check(ids[i] >= 0 && (size_t)ids[i] < vs, "ids are inside the vocabulary");
    char *out = NULL;
    size_t out_len = 0;
    rc = tx_tokenizer_decode(tok, ids, n, 0, &out, &out_len, err, sizeof(err));
    fz_check(rc == 0, "decoding an encoding succeeds");
    fz_check(strlen(out) <= out_len, "decoded text is terminated");
    if (expect_identity)
        fz_check(out_len == len && !memcmp(out, text, len), "decode(encode(text)) == text");
    free(out);
    free(ids);
}

/* Text whose round trip must be exact with the fixture: no NFC change
 * (ASCII only or already composed is hard to tell; ASCII is exact), no
 * <mask> (its stripped spaces are not restored), no Å-like characters. */
static int fz_ascii_without_mask(const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (d[i] >= 0x80)
            return 0;
    for (size_t i = 0; i + 6 <= n; i++)
        if (!memcmp(d + i, "<mask>", 6))
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0] % 3;
    data++;
    size--;
    if (mode == 0) {
        struct tx_tokenizer *tok = NULL;
        char err[512];
        int rc = tx_tokenizer_load_buffer(data, size, &tok, err, sizeof(err));
        fz_check(rc <= 0, "load returns 0 or a negative errno");
        fz_check((rc == 0) == (tok != NULL), "a tokenizer exactly on success");
        fz_check(rc == 0 || err[0], "a load error comes with a message");
        /* the json-c-only path agrees */
        struct tx_tokenizer *slow = NULL;
        char err2[512];
        int rc2 = tok_load_buffer_ex(data, size, TOK_LOAD_NO_FAST, &slow, err2, sizeof(err2));
        fz_check(rc2 == rc, "both load paths return the same code");
        fz_check(rc || (slow && tx_tokenizer_vocab_size(slow) == tx_tokenizer_vocab_size(tok) &&
                        slow->pool.len == tok->pool.len &&
                        !memcmp(slow->pool.p, tok->pool.p, tok->pool.len) &&
                        slow->vocab.n == tok->vocab.n && slow->merges.n == tok->merges.n &&
                        slow->merges.mask == tok->merges.mask &&
                        !memcmp(slow->merges.keys, tok->merges.keys,
                                (slow->merges.mask + 1) * sizeof(*slow->merges.keys))),
                 "both load paths build the same tokenizer");
        for (size_t i = 0; !rc && i <= tok->merges.mask; i++)
            fz_check(!tok->merges.keys[i] || (tok->merges.rank[i] == slow->merges.rank[i] &&
                                              tok->merges.new_id[i] == slow->merges.new_id[i]),
                     "same merges");
        fz_check(!rc || !strcmp(err, err2), "both load paths give the same message");
        for (size_t id = 0; !rc && id < tx_tokenizer_vocab_size(tok); id++) {
            const char *x = tx_tokenizer_id_to_token(tok, (int32_t)id);
            const char *y = tx_tokenizer_id_to_token(slow, (int32_t)id);
            fz_check((!x && !y) || (x && y && !strcmp(x, y)), "same token per id");
        }
        tx_tokenizer_free(slow);
        if (tok) {
            static const char *samples[] = {"Hello, world! 12345", "  \n\t x", "[gMASK]<sop>",
                                            "\xE5\x9B\xBD\xE4\xBA\xA7 \xF0\x9F\x98\x80", ""};
            for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
                fz_roundtrip(tok, samples[i], strlen(samples[i]), 0, 0);
                fz_roundtrip(tok, samples[i], strlen(samples[i]),
                             TX_TOKENIZER_NO_SPECIAL | TX_TOKENIZER_ADD_SPECIAL, 0);
            }
            tx_tokenizer_free(tok);
        }
        return 0;
    }
    const struct tx_tokenizer *tok = fz_get_fixture();
    if (mode == 1) {
        int exact = fz_ascii_without_mask(data, size);
        fz_roundtrip(tok, (const char *)data, size, 0, exact);
        fz_roundtrip(tok, (const char *)data, size, TX_TOKENIZER_NO_SPECIAL, exact);
        return 0;
    }
    /* mode 2: ids */
    size_t n = size / 4;
    int32_t *ids = malloc((n ? n : 1) * sizeof(*ids));
    if (!ids)
        return 0;
    for (size_t i = 0; i < n; i++)
        ids[i] = (int32_t)((uint32_t)data[4 * i] | (uint32_t)data[4 * i + 1] << 8 |
                           (uint32_t)data[4 * i + 2] << 16 | (uint32_t)data[4 * i + 3] << 24);
    char err[512];
    for (unsigned flags = 0; flags < 4; flags++) {
        char *text = NULL;
        size_t len = 0;
        int rc = tx_tokenizer_decode(tok, ids, n, flags, &text, &len, err, sizeof(err));
        fz_check(rc == 0 || rc == TX_EINVAL, "decode fails only on unknown ids");
        struct tx_tokenizer_stream *st = tx_tokenizer_stream_new(tok, flags);
        fz_check(st != NULL, "stream allocation");
        char *acc = malloc(1);
        size_t acc_len = 0;
        int srt = 0;
        for (size_t i = 0; i < n && acc; i++) {
            const char *piece;
            size_t pl;
            int r = tx_tokenizer_stream_put(st, ids[i], &piece, &pl);
            if (r) {
                srt = r;
                continue;
            }
            char *a = realloc(acc, acc_len + pl + 1);
            if (!a) {
                free(acc);
                acc = NULL;
                break;
            }
            acc = a;
            memcpy(acc + acc_len, piece, pl);
            acc_len += pl;
        }
        const char *tail;
        size_t tl;
        if (acc && tx_tokenizer_stream_flush(st, &tail, &tl) == 0) {
            char *a = realloc(acc, acc_len + tl + 1);
            if (a) {
                acc = a;
                memcpy(acc + acc_len, tail, tl);
                acc_len += tl;
                if (rc == 0 && srt == 0)
                    fz_check(acc_len == len && !memcmp(acc, text, len),
                             "streamed text == decoded text");
            }
        }
        fz_check((rc == 0) == (srt == 0), "stream and decode agree on unknown ids");
        free(acc);
        tx_tokenizer_stream_free(st);
        free(text);
    }
    free(ids);
    return 0;
}

#ifdef TX_FUZZ_STANDALONE
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            return 1;
        }
        size_t cap = 1 << 16, n = 0;
        uint8_t *buf = malloc(cap);
        size_t r;
        while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
            n += r;
            if (n == cap) {
                uint8_t *b = realloc(buf, cap * 2);
                if (!b)
                    break;
                buf = b;
                cap *= 2;
            }
        }
        fclose(f);
        if (!buf)
            return 1;
        LLVMFuzzerTestOneInput(buf, n);
        free(buf);
        printf("%s: ok\n", argv[i]);
    }
    tx_tokenizer_free(fz_fixture);
    return 0;
}
#endif
