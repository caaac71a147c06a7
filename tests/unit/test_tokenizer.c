/* SPDX-License-Identifier: MIT */
/*
 * Tokenizer tests: the Qwen3 reference encodings (exact ids and decoded
 * text for every line), hand-written tokenizers for GLM's \p{N}{1,3} split,
 * NFC, added-token flags, merges in both forms, every split behavior, the
 * post-processor, the chat templates, streaming decode, concurrency,
 * malformed files, and a replay of the fuzz corpus.
 *
 * The tokenizer data is the repository's own data/tokenizers/qwen3/ (the
 * root is found from the working directory or the executable). Missing
 * data is a test failure, not a skip.
 */
#include <check.h>
#include <errno.h>
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include <tx-internal/tx_chat_format.h>
#include <tx/tx_tokenizer.h>

/* The fuzz target, replayed over its corpus below. */
#include "../fuzz/fuzz_tokenizer.c"
#include "tx_test_main.h"

/* ------------------------------------------------------------ helpers */

static char repo_root[PATH_MAX];
static char data_dir[PATH_MAX + 64];
static struct tx_tokenizer *qwen;
static char qwen_err[1024];

static int is_repo_root(const char *d)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/include/tx/tx_tokenizer.h", d);
    if (access(p, R_OK))
        return 0;
    snprintf(p, sizeof(p), "%s/Makefile", d);
    return access(p, R_OK) == 0;
}

/* Walks up from `start` looking for the repository root. */
static int find_root_from(const char *start)
{
    char d[PATH_MAX];
    if (!realpath(start, d))
        return 0;
    for (;;) {
        if (is_repo_root(d)) {
            snprintf(repo_root, sizeof(repo_root), "%s", d);
            return 1;
        }
        char *slash = strrchr(d, '/');
        if (!slash || slash == d)
            return 0;
        *slash = 0;
    }
}

static void locate_dirs(void)
{
    if (!find_root_from(".")) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n > 0) {
            exe[n] = 0;
            char *slash = strrchr(exe, '/');
            if (slash)
                *slash = 0;
            find_root_from(exe);
        }
    }
    if (repo_root[0])
        snprintf(data_dir, sizeof(data_dir), "%s", repo_root);
}

static void setup_qwen(void)
{
    locate_dirs();
    if (!data_dir[0]) {
        snprintf(qwen_err, sizeof(qwen_err),
                 "cannot find the repository root (run from inside the tree)");
        return;
    }
    char path[PATH_MAX + 160];
    snprintf(path, sizeof(path), "%s/data/tokenizers/qwen3/tokenizer.json", data_dir);
    char err[512];
    if (tx_tokenizer_load_file(path, &qwen, err, sizeof(err)))
        snprintf(qwen_err, sizeof(qwen_err),
                 "the repository's tokenizer data is missing or unreadable: %s",
                 err);
}

static void teardown_qwen(void)
{
    tx_tokenizer_free(qwen);
    qwen = NULL;
}

#define NEED_QWEN() ck_assert_msg(qwen != NULL, "%s", qwen_err)

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0, r;
    char *b = malloc(cap + 1);
    while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (b) {
        b[n] = 0;
        *len = n;
    }
    return b;
}

/* Encodes and compares with the expected ids. */
static void expect_ids(const struct tx_tokenizer *tok, const char *text, unsigned flags,
                       const int32_t *want, size_t n_want)
{
    int32_t *ids = NULL;
    size_t n = 0;
    char err[512];
    int rc = tx_tokenizer_encode(tok, text, strlen(text), flags, &ids, &n, err, sizeof(err));
    ck_assert_msg(rc == 0, "encode \"%s\": %s", text, err);
    char got[1024] = "", exp[1024] = "";
    for (size_t i = 0; i < n && strlen(got) < 1000; i++)
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%d", i ? "," : "", ids[i]);
    for (size_t i = 0; i < n_want && strlen(exp) < 1000; i++)
        snprintf(exp + strlen(exp), sizeof(exp) - strlen(exp), "%s%d", i ? "," : "", want[i]);
    ck_assert_msg(n == n_want && (n == 0 || !memcmp(ids, want, n * sizeof(*ids))),
                  "encode \"%s\" (flags %u): got [%s], expected [%s]", text, flags, got, exp);
    free(ids);
}

#define EXPECT(tok, text, flags, ...)                                                              \
    do {                                                                                           \
        static const int32_t want_[] = {__VA_ARGS__};                                              \
        expect_ids(tok, text, flags, want_, sizeof(want_) / sizeof(want_[0]));                     \
    } while (0)

static char *decode_str(const struct tx_tokenizer *tok, const int32_t *ids, size_t n,
                        unsigned flags)
{
    char *text = NULL;
    size_t len;
    char err[512];
    int rc = tx_tokenizer_decode(tok, ids, n, flags, &text, &len, err, sizeof(err));
    ck_assert_msg(rc == 0, "decode: %s", err);
    ck_assert_uint_eq(strlen(text), len);
    return text;
}

static void expect_roundtrip(const struct tx_tokenizer *tok, const char *text)
{
    int32_t *ids = NULL;
    size_t n = 0;
    char err[512];
    ck_assert_msg(tx_tokenizer_encode(tok, text, strlen(text), 0, &ids, &n, err, sizeof(err)) == 0,
                  "%s", err);
    char *back = decode_str(tok, ids, n, 0);
    ck_assert_str_eq(back, text);
    free(back);
    free(ids);
}

static struct tx_tokenizer *load_str(const char *json)
{
    struct tx_tokenizer *tok = NULL;
    char err[512];
    int rc = tx_tokenizer_load_buffer(json, strlen(json), &tok, err, sizeof(err));
    ck_assert_msg(rc == 0, "fixture does not load: %s", err);
    return tok;
}

/* ---------------------------------------------- Qwen3 reference file */

START_TEST(test_reference_encodings)
{
    NEED_QWEN();
    char path[PATH_MAX + 160];
    snprintf(path, sizeof(path), "%s/data/tokenizers/qwen3/reference-encodings.jsonl", data_dir);
    size_t len;
    char *data = read_file(path, &len);
    ck_assert_msg(data != NULL, "cannot read %s", path);
    size_t lines = 0, matched = 0;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!*line)
            continue;
        lines++;
        json_object *o = json_tokener_parse(line);
        ck_assert_msg(o != NULL, "reference line %zu is not JSON", lines);
        json_object *jt, *ji, *jd;
        ck_assert(json_object_object_get_ex(o, "text", &jt));
        ck_assert(json_object_object_get_ex(o, "ids", &ji));
        ck_assert(json_object_object_get_ex(o, "decoded", &jd));
        const char *text = json_object_get_string(jt);
        size_t tl = (size_t)json_object_get_string_len(jt);
        size_t nw = json_object_array_length(ji);

        int32_t *ids = NULL;
        size_t n = 0;
        char err[512];
        ck_assert_msg(tx_tokenizer_encode(qwen, text, tl, 0, &ids, &n, err, sizeof(err)) == 0,
                      "line %zu: %s", lines, err);
        int ok = n == nw;
        for (size_t i = 0; ok && i < n; i++)
            ok = ids[i] == json_object_get_int(json_object_array_get_idx(ji, i));
        ck_assert_msg(ok, "line %zu (\"%.60s\"): ids differ (%zu tokens, expected %zu)", lines,
                      text, n, nw);

        int32_t *want = malloc((nw ? nw : 1) * sizeof(*want));
        for (size_t i = 0; i < nw; i++)
            want[i] = json_object_get_int(json_object_array_get_idx(ji, i));
        char *back = decode_str(qwen, want, nw, 0);
        ck_assert_msg(strlen(back) == (size_t)json_object_get_string_len(jd) &&
                          !strcmp(back, json_object_get_string(jd)),
                      "line %zu: decoded text differs: \"%s\"", lines, back);
        free(back);
        free(want);
        free(ids);
        json_object_put(o);
        matched++;
    }
    free(data);
    ck_assert_msg(lines >= 15, "only %zu reference lines found", lines);
    ck_assert_uint_eq(matched, lines);
    printf("tokenizer: %zu of %zu reference lines match (ids and decoded text)\n", matched, lines);
}
END_TEST

START_TEST(test_qwen_vocab_and_specials)
{
    NEED_QWEN();
    ck_assert_uint_eq(tx_tokenizer_vocab_size(qwen), 151669);
    ck_assert_int_eq(tx_tokenizer_token_to_id(qwen, "<|im_start|>", 12), 151644);
    ck_assert_int_eq(tx_tokenizer_token_to_id(qwen, "Hello", 5), 9707);
    ck_assert_int_eq(tx_tokenizer_token_to_id(qwen, "no-such-token-xyz", 17), TX_ENOENT);
    ck_assert_str_eq(tx_tokenizer_id_to_token(qwen, 9707), "Hello");
    ck_assert_str_eq(tx_tokenizer_id_to_token(qwen, 151645), "<|im_end|>");
    ck_assert_ptr_null(tx_tokenizer_id_to_token(qwen, 1 << 30));
    ck_assert_ptr_null(tx_tokenizer_id_to_token(qwen, -1));
    ck_assert_int_eq(tx_tokenizer_is_special(qwen, 151644), 1);
    ck_assert_int_eq(tx_tokenizer_is_special(qwen, 151657), 0); /* <tool_call> */
    ck_assert_int_eq(tx_tokenizer_is_special(qwen, 9707), 0);
    ck_assert_uint_eq(tx_tokenizer_added_count(qwen), 26);
    struct tx_tokenizer_added_token at;
    ck_assert_int_eq(tx_tokenizer_added_get(qwen, 0, &at), 0);
    ck_assert_int_eq(at.id, 151643);
    ck_assert_str_eq(at.content, "<|endoftext|>");
    ck_assert(at.special && !at.normalized);
    ck_assert_int_eq(tx_tokenizer_added_get(qwen, 26, &at), TX_EINVAL);

    /* special tokens parsed, or not */
    EXPECT(qwen, "<|im_start|>user\nhi<|im_end|>", 0, 151644, 872, 198, 6023, 151645);
    int32_t *ids;
    size_t n;
    char err[512];
    const char *t = "<|im_start|>user\nhi<|im_end|>";
    ck_assert_int_eq(
        tx_tokenizer_encode(qwen, t, strlen(t), TX_TOKENIZER_NO_SPECIAL, &ids, &n, err, 512), 0);
    ck_assert_uint_gt(n, 5);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_lt(ids[i], 151643);
    char *back = decode_str(qwen, ids, n, 0);
    ck_assert_str_eq(back, t);
    free(back);
    free(ids);
    /* skip_special */
    static const int32_t sp[] = {151644, 872, 198, 6023, 151645};
    back = decode_str(qwen, sp, 5, TX_TOKENIZER_SKIP_SPECIAL);
    ck_assert_str_eq(back, "user\nhi");
    free(back);
    /* Qwen's post-processor (ByteLevel) adds nothing */
    EXPECT(qwen, "Hello, world!", TX_TOKENIZER_ADD_SPECIAL, 9707, 11, 1879, 0);
}
END_TEST

START_TEST(test_qwen_roundtrips)
{
    NEED_QWEN();
    static const char *texts[] = {
        "The quick brown fox jumps over the lazy dog.",
        "GLM-5.1 on TX8: 12345678901234567890 tokens\r\n\r\n\t\ttabs",
        "\xE6\xB7\xB7\xE5\x90\x88\xE7\xB2\xBE\xE5\xBA\xA6 \xF0\x9F\x98\x80\xF0\x9F\x9A\x80 "
        "\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
        "    indented\n        more\n",
        "a\xC2\xA0\xE3\x80\x80"
        "b\xE2\x80\xA8"
        "c", /* NBSP, ideographic space, LS */
        "x\0y"};
    for (size_t i = 0; i + 1 < sizeof(texts) / sizeof(texts[0]); i++)
        expect_roundtrip(qwen, texts[i]);
    /* embedded NUL: length-based API */
    int32_t *ids;
    size_t n;
    char err[512];
    ck_assert_int_eq(tx_tokenizer_encode(qwen, "x\0y", 3, 0, &ids, &n, err, 512), 0);
    char *back;
    size_t bl;
    ck_assert_int_eq(tx_tokenizer_decode(qwen, ids, n, 0, &back, &bl, err, 512), 0);
    ck_assert_uint_eq(bl, 3);
    ck_assert(!memcmp(back, "x\0y", 3));
    free(back);
    free(ids);
    /* empty input: no ids */
    ck_assert_int_eq(tx_tokenizer_encode(qwen, "", 0, 0, &ids, &n, err, 512), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(ids);
}
END_TEST

START_TEST(test_qwen_errors_and_lossy)
{
    NEED_QWEN();
    int32_t *ids = (int32_t *)1;
    size_t n = 7;
    char err[512];
    /* invalid UTF-8 input */
    static const char *bad[] = {"abc\xFF", "\xC0\x80", "\xED\xA0\x80", "ok\xE4\xB8",
                                "\xF4\x90\x80\x80"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        ck_assert_int_eq(tx_tokenizer_encode(qwen, bad[i], strlen(bad[i]), 0, &ids, &n, err, 512),
                         TX_EINVAL);
        ck_assert_msg(strstr(err, "UTF-8") != NULL, "message: %s", err);
        ck_assert_ptr_null(ids);
        ck_assert_uint_eq(n, 0);
    }
    ck_assert_int_eq(tx_tokenizer_encode(NULL, "a", 1, 0, &ids, &n, err, 512), TX_EINVAL);
    ck_assert_int_eq(tx_tokenizer_encode(qwen, NULL, 1, 0, &ids, &n, err, 512), TX_EINVAL);
    /* unknown ids */
    int32_t unk[] = {9707, 999999, 11};
    char *text = NULL;
    size_t len;
    ck_assert_int_eq(tx_tokenizer_decode(qwen, unk, 3, 0, &text, &len, err, 512), TX_EINVAL);
    ck_assert_ptr_null(text);
    ck_assert_msg(strstr(err, "999999") != NULL, "message: %s", err);
    /* the same message through libtx's per-thread error, also without err */
    ck_assert_int_eq(tx_tokenizer_decode(qwen, unk, 3, 0, &text, &len, NULL, 0), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "999999") != NULL, "%s", tx_last_error());
    unk[1] = -5;
    ck_assert_int_eq(tx_tokenizer_decode(qwen, unk, 3, 0, &text, &len, err, 512), TX_EINVAL);
    text = decode_str(qwen, unk, 3, TX_TOKENIZER_SKIP_UNKNOWN);
    ck_assert_str_eq(text, "Hello,");
    free(text);
    /* half of a CJK character decodes to U+FFFD (from_utf8_lossy) */
    const char *cjk = "\xE5\x9B\xBD"; /* one char, several byte-level tokens? */
    ck_assert_int_eq(tx_tokenizer_encode(qwen, cjk, 3, 0, &ids, &n, err, 512), 0);
    const char *bytes;
    int nb = tx_tokenizer_token_bytes(qwen, 16, &bytes); /* "1" */
    ck_assert_int_eq(nb, 1);
    ck_assert_int_eq(bytes[0], '1');
    ck_assert_int_eq(tx_tokenizer_token_bytes(qwen, -1, &bytes), TX_EINVAL);
    /* A byte-level token for the lone byte 0xE5 */
    int32_t e5 = tx_tokenizer_token_to_id(qwen, "\xC3\xA5", 2);
    ck_assert_int_ge(e5, 0);
    int32_t lone[] = {e5, 9707};
    text = decode_str(qwen, lone, 2, 0);
    ck_assert_str_eq(text, "\xEF\xBF\xBDHello");
    free(text);
    free(ids);
}
END_TEST

START_TEST(test_qwen_stream)
{
    NEED_QWEN();
    const char *t =
        "\xE5\x9B\xBD\xE4\xBA\xA7\xE8\x8A\xAF\xE7\x89\x87 \xF0\x9F\x98\x80\xF0\x9F\x9A\x80"
        " caf\xC3\xA9 <|im_end|> end";
    int32_t *ids;
    size_t n;
    char err[512];
    ck_assert_int_eq(tx_tokenizer_encode(qwen, t, strlen(t), 0, &ids, &n, err, 512), 0);
    struct tx_tokenizer_stream *st = tx_tokenizer_stream_new(qwen, 0);
    ck_assert_ptr_nonnull(st);
    char acc[512] = "";
    for (size_t i = 0; i < n; i++) {
        const char *piece;
        size_t pl;
        ck_assert_int_eq(tx_tokenizer_stream_put(st, ids[i], &piece, &pl), 0);
        ck_assert_uint_eq(strlen(piece), pl);
        ck_assert_msg(!strstr(piece, "\xEF\xBF\xBD"), "stream emitted U+FFFD at token %zu", i);
        strcat(acc, piece);
    }
    const char *tail;
    size_t tl;
    ck_assert_int_eq(tx_tokenizer_stream_flush(st, &tail, &tl), 0);
    ck_assert_uint_eq(tl, 0);
    ck_assert_str_eq(acc, t);
    /* an incomplete character at the end is flushed as U+FFFD */
    int32_t e5 = tx_tokenizer_token_to_id(qwen, "\xC3\xA5", 2);
    const char *piece;
    size_t pl;
    ck_assert_int_eq(tx_tokenizer_stream_put(st, e5, &piece, &pl), 0);
    ck_assert_uint_eq(pl, 0);
    ck_assert_int_eq(tx_tokenizer_stream_flush(st, &tail, &tl), 0);
    ck_assert_str_eq(tail, "\xEF\xBF\xBD");
    ck_assert_int_eq(tx_tokenizer_stream_put(st, 1 << 29, &piece, &pl), TX_EINVAL);
    tx_tokenizer_stream_free(st);
    /* skip special in the stream */
    st = tx_tokenizer_stream_new(qwen, TX_TOKENIZER_SKIP_SPECIAL);
    acc[0] = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(tx_tokenizer_stream_put(st, ids[i], &piece, &pl), 0);
        strcat(acc, piece);
    }
    ck_assert_ptr_null(strstr(acc, "<|im_end|>"));
    tx_tokenizer_stream_free(st);
    free(ids);
}
END_TEST

struct thr {
    const char *const *texts;
    size_t n_texts;
    int32_t **expect;
    size_t *n_expect;
    int bad;
};

static void *thr_main(void *arg)
{
    struct thr *t = arg;
    for (int rep = 0; rep < 20; rep++)
        for (size_t i = 0; i < t->n_texts; i++) {
            int32_t *ids;
            size_t n;
            char err[512];
            if (tx_tokenizer_encode(qwen, t->texts[i], strlen(t->texts[i]), 0, &ids, &n, err,
                                    sizeof(err)) ||
                n != t->n_expect[i] || memcmp(ids, t->expect[i], n * sizeof(*ids)))
                t->bad++;
            free(ids);
        }
    return NULL;
}

START_TEST(test_qwen_threads)
{
    NEED_QWEN();
    /* distinct words so that threads fill the shared cache concurrently */
    static char buf[8][256];
    const char *texts[8];
    int32_t *expect[8];
    size_t n_expect[8];
    for (int i = 0; i < 8; i++) {
        snprintf(buf[i], sizeof(buf[i]),
                 "thread%d alpha%d beta%d gamma%d \xE5\x9B\xBD%d delta 12345%d epsilon%dzeta", i,
                 i * 7, i * 11, i * 13, i, i * 17, i * 19);
        texts[i] = buf[i];
    }
    /* expected results from a separate, fresh tokenizer (cold cache) */
    char path[PATH_MAX + 160], err[512];
    snprintf(path, sizeof(path), "%s/data/tokenizers/qwen3/tokenizer.json", data_dir);
    struct tx_tokenizer *fresh;
    ck_assert_int_eq(tx_tokenizer_load_file(path, &fresh, err, sizeof(err)), 0);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(tx_tokenizer_encode(fresh, texts[i], strlen(texts[i]), 0, &expect[i],
                                             &n_expect[i], err, sizeof(err)),
                         0);
    tx_tokenizer_free(fresh);
    pthread_t th[4];
    struct thr t[4];
    for (int k = 0; k < 4; k++) {
        t[k] = (struct thr){texts, 8, expect, n_expect, 0};
        ck_assert_int_eq(pthread_create(&th[k], NULL, thr_main, &t[k]), 0);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        ck_assert_int_eq(t[k].bad, 0);
    }
    for (int i = 0; i < 8; i++)
        free(expect[i]);
}
END_TEST

/* Runs a shell command line, returns its output (stdout + stderr). */
static char *run(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    static char out[8192];
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = 0;
    pclose(p);
    return out;
}

START_TEST(test_glm_tokenize_tool)
{
    NEED_QWEN();
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    ck_assert_int_gt(n, 0);
    exe[n] = 0;
    *strrchr(exe, '/') = 0; /* BUILD/tests */
    char bin[PATH_MAX + 64], tokp[PATH_MAX + 160], cmd[3 * PATH_MAX];
    snprintf(bin, sizeof(bin), "%s/../bin/glm-tokenize", exe);
    ck_assert_msg(access(bin, X_OK) == 0, "%s is missing (make all)", bin);
    snprintf(tokp, sizeof(tokp), "%s/data/tokenizers/qwen3/tokenizer.json", data_dir);

    snprintf(cmd, sizeof(cmd), "printf 'Hello, world!' | '%s' --tokenizer '%s'; echo rc=$?", bin,
             tokp);
    ck_assert_str_eq(run(cmd), "9707,11,1879,0\nrc=0\n");
    snprintf(cmd, sizeof(cmd), "printf '9707, 11 1879\\n0' | '%s' --tokenizer '%s' --decode; echo",
             bin, tokp);
    ck_assert_str_eq(run(cmd), "Hello, world!\n");
    snprintf(cmd, sizeof(cmd),
             "printf '<|im_start|>hi' | '%s' --tokenizer '%s' --no-special; echo rc=$?", bin, tokp);
    ck_assert_ptr_null(strstr(run(cmd), "151644"));
    snprintf(cmd, sizeof(cmd),
             "printf '151644,6023' | '%s' --tokenizer '%s' --decode --skip-special", bin, tokp);
    ck_assert_str_eq(run(cmd), "hi");
    /* errors: non-zero exit and a message */
    snprintf(cmd, sizeof(cmd), "printf 'a\\377' | '%s' --tokenizer '%s' 2>&1; echo rc=$?", bin,
             tokp);
    char *o = run(cmd);
    ck_assert_msg(strstr(o, "not valid UTF-8") && strstr(o, "rc=1"), "%s", o);
    snprintf(cmd, sizeof(cmd), "printf '1,x' | '%s' --tokenizer '%s' --decode 2>&1; echo rc=$?",
             bin, tokp);
    o = run(cmd);
    ck_assert_msg(strstr(o, "invalid character") && strstr(o, "rc=1"), "%s", o);
    snprintf(cmd, sizeof(cmd),
             "printf '99999999' | '%s' --tokenizer '%s' --decode 2>&1; echo rc=$?", bin, tokp);
    o = run(cmd);
    ck_assert_msg(strstr(o, "99999999") && strstr(o, "rc=1"), "%s", o);
    snprintf(cmd, sizeof(cmd), "'%s' --tokenizer /nonexistent/t.json </dev/null 2>&1; echo rc=$?",
             bin);
    o = run(cmd);
    ck_assert_msg(strstr(o, "/nonexistent/t.json") && strstr(o, "rc=1"), "%s", o);
    snprintf(cmd, sizeof(cmd), "'%s' </dev/null 2>&1; echo rc=$?", bin);
    o = run(cmd);
    ck_assert_msg(strstr(o, "--tokenizer") && strstr(o, "rc=2"), "%s", o);
}
END_TEST

START_TEST(test_missing_data_dir_fails)
{
    /* A missing tokenizer file makes loading fail loudly, with the path. */
    struct tx_tokenizer *tok = (struct tx_tokenizer *)1;
    char err[512];
    ck_assert_int_eq(tx_tokenizer_load_file("/nonexistent-dir/tokenizer.json", &tok, err, 512),
                     TX_ENOENT);
    ck_assert_ptr_null(tok);
    ck_assert_msg(strstr(err, "/nonexistent-dir/tokenizer.json") != NULL, "%s", err);
    ck_assert_int_eq(tx_tokenizer_load_file("/", &tok, err, 512), TX_EINVAL);
}
END_TEST

/* ------------------------------------------ hand-written GLM tokenizer */

/*
 * Byte-level alphabet with id == byte value, plus:
 *   256 "12"  257 "123"  258 "45"  259 "456"  260 "Ġt"  261 "he"  262 "Ġthe"
 *   263 "Ã©" (é)
 * merges in array form. GLM's split regex (\p{N}{1,3}) or Qwen's (\p{N}),
 * NFC, and added tokens.
 */
static const char GLM_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";
static const char QWEN_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";

static char *bytelevel_vocab(void)
{
    static char v[4096];
    size_t n = 0;
    for (unsigned b = 0; b < 256; b++) {
        unsigned cp;
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
            cp = b;
        else if (b <= 32)
            cp = 256 + b;
        else if (b <= 160)
            cp = 256 + 33 + (b - 127);
        else
            cp = 323;
        if (cp == '"' || cp == '\\')
            n += (size_t)snprintf(v + n, sizeof(v) - n, "\"\\%c\":%u,", (char)cp, b);
        else if (cp < 0x80)
            n += (size_t)snprintf(v + n, sizeof(v) - n, "\"%c\":%u,", (char)cp, b);
        else
            n += (size_t)snprintf(v + n, sizeof(v) - n, "\"%c%c\":%u,", (char)(0xC0 | (cp >> 6)),
                                  (char)(0x80 | (cp & 0x3F)), b);
    }
    return v;
}

static char *glm_json(const char *regex, const char *pretok_override)
{
    char *j = malloc(16384);
    char pt[2048];
    if (pretok_override)
        snprintf(pt, sizeof(pt), "%s", pretok_override);
    else
        snprintf(pt, sizeof(pt),
                 "{\"type\":\"Sequence\",\"pretokenizers\":["
                 "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"%s\"},\"behavior\":\"Isolated\","
                 "\"invert\":false},"
                 "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,"
                 "\"use_regex\":false}]}",
                 regex);
    snprintf(
        j, 16384,
        "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,"
        "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
        "\"continuing_subword_prefix\":\"\",\"end_of_word_suffix\":\"\",\"fuse_unk\":false,"
        "\"byte_fallback\":false,\"ignore_merges\":false,\"vocab\":{%s"
        "\"12\":256,\"123\":257,\"45\":258,\"456\":259,\"\xC4\xA0t\":260,\"he\":261,"
        "\"\xC4\xA0the\":262,\"\xC3\x83\xC2\xA9\":263},"
        "\"merges\":[[\"1\",\"2\"],[\"12\",\"3\"],[\"4\",\"5\"],[\"45\",\"6\"],[\"\xC4\xA0\",\"t\"]"
        ","
        "[\"h\",\"e\"],[\"\xC4\xA0t\",\"he\"],[\"\xC3\x83\",\"\xC2\xA9\"]]},"
        "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"}]},"
        "\"pre_tokenizer\":%s,"
        "\"added_tokens\":["
        "{\"id\":300,\"content\":\"[gMASK]\",\"single_word\":false,\"lstrip\":false,"
        "\"rstrip\":false,\"normalized\":false,\"special\":true},"
        "{\"id\":301,\"content\":\"<sop>\",\"normalized\":false,\"special\":true},"
        "{\"id\":302,\"content\":\"<|user|>\",\"normalized\":false,\"special\":true},"
        "{\"id\":303,\"content\":\"<|assistant|>\",\"normalized\":false,\"special\":true},"
        "{\"id\":304,\"content\":\"<|system|>\",\"normalized\":false,\"special\":true},"
        "{\"id\":305,\"content\":\"<|endoftext|>\",\"normalized\":false,\"special\":true},"
        "{\"id\":306,\"content\":\"<|observation|>\",\"normalized\":false,\"special\":true},"
        "{\"id\":307,\"content\":\"<mask>\",\"lstrip\":true,\"rstrip\":true,"
        "\"normalized\":false,\"special\":false},"
        "{\"id\":308,\"content\":\"<sw>\",\"single_word\":true,\"normalized\":false,"
        "\"special\":false},"
        "{\"id\":309,\"content\":\"<think>\",\"normalized\":false,\"special\":false},"
        "{\"id\":310,\"content\":\"</think>\",\"normalized\":false,\"special\":false},"
        "{\"id\":311,\"content\":\"\xC3\x85\",\"normalized\":true,\"special\":false},"
        "{\"id\":312,\"content\":\"<nostrip>\",\"normalized\":false,\"special\":false}],"
        "\"post_processor\":{\"type\":\"Sequence\",\"processors\":["
        "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,"
        "\"use_regex\":false},"
        "{\"type\":\"TemplateProcessing\",\"single\":["
        "{\"SpecialToken\":{\"id\":\"[gMASK]\",\"type_id\":0}},"
        "{\"SpecialToken\":{\"id\":\"<sop>\",\"type_id\":0}},"
        "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
        "\"pair\":[],\"special_tokens\":{"
        "\"[gMASK]\":{\"id\":\"[gMASK]\",\"ids\":[300],\"tokens\":[\"[gMASK]\"]},"
        "\"<sop>\":{\"id\":\"<sop>\",\"ids\":[301],\"tokens\":[\"<sop>\"]}}}]},"
        "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,"
        "\"use_regex\":false}}",
        bytelevel_vocab(), pt);
    return j;
}

static struct tx_tokenizer *glm_tok(void)
{
    char *j = glm_json(GLM_RE, NULL);
    struct tx_tokenizer *t = load_str(j);
    free(j);
    return t;
}

START_TEST(test_glm_digits)
{
    struct tx_tokenizer *glm = glm_tok();
    EXPECT(glm, "12345", 0, 257, 258);
    EXPECT(glm, "1234567", 0, 257, 259, '7');
    EXPECT(glm, "x=99", 0, 'x', '=', '9', '9');
    EXPECT(glm, "12 456", 0, 256, 32, 259);
    /* other scripts' digits are \p{N} too: Arabic-Indic ٠١٢٣ in groups */
    expect_roundtrip(glm, "\xD9\xA0\xD9\xA1\xD9\xA2\xD9\xA3");
    expect_roundtrip(glm, "1234567890 and 3.14159");
    tx_tokenizer_free(glm);
    /* the same file with Qwen's \p{N}: one digit per pre-token */
    char *j = glm_json(QWEN_RE, NULL);
    struct tx_tokenizer *qw = load_str(j);
    free(j);
    EXPECT(qw, "12345", 0, '1', '2', '3', '4', '5');
    tx_tokenizer_free(qw);
}
END_TEST

START_TEST(test_glm_nfc)
{
    struct tx_tokenizer *glm = glm_tok();
    EXPECT(glm, "\xC3\xA9", 0, 263);  /* é composed */
    EXPECT(glm, "e\xCC\x81", 0, 263); /* e + U+0301 */
    /* normalized added token Å: composed, decomposed and U+212B ANGSTROM SIGN */
    EXPECT(glm, "\xC3\x85", 0, 311);
    EXPECT(glm, "A\xCC\x8A", 0, 311);
    EXPECT(glm, "\xE2\x84\xAB", 0, 311);
    /* decoding gives the normalized text */
    int32_t e = 263;
    char *t = decode_str(glm, &e, 1, 0);
    ck_assert_str_eq(t, "\xC3\xA9");
    free(t);
    tx_tokenizer_free(glm);
}
END_TEST

START_TEST(test_glm_added_tokens)
{
    struct tx_tokenizer *glm = glm_tok();
    /* lstrip + rstrip swallow the spaces around <mask> */
    EXPECT(glm, "a <mask> b", 0, 'a', 307, 'b');
    EXPECT(glm, "a\t\n <mask>\t b", 0, 'a', 307, 'b');
    /* without the flags the spaces stay */
    EXPECT(glm, "a <nostrip> b", 0, 'a', 32, 312, 32, 'b');
    /* single_word: only between non-word characters */
    EXPECT(glm, "x <sw> y", 0, 'x', 32, 308, 32, 'y');
    EXPECT(glm, "<sw>", 0, 308);
    EXPECT(glm, "x<sw>", 0, 'x', '<', 's', 'w', '>');
    EXPECT(glm, "<sw>y", 0, '<', 's', 'w', '>', 'y');
    /* special tokens, parsed or not */
    EXPECT(glm, "[gMASK]<sop>the", 0, 300, 301, 't', 261);
    EXPECT(glm, "[gMASK]", TX_TOKENIZER_NO_SPECIAL, '[', 'g', 'M', 'A', 'S', 'K', ']');
    /* NO_SPECIAL keeps matching non-special added tokens */
    EXPECT(glm, "<think>", TX_TOKENIZER_NO_SPECIAL, 309);
    /* leftmost-longest */
    EXPECT(glm, "</think><think>", 0, 310, 309);
    /* post-processor: TemplateProcessing [gMASK] <sop> $A */
    EXPECT(glm, " the", TX_TOKENIZER_ADD_SPECIAL, 300, 301, 262);
    EXPECT(glm, " the", 0, 262);
    /* decode keeps or skips the specials */
    static const int32_t ids[] = {300, 301, 262, 309, 305};
    char *t = decode_str(glm, ids, 5, 0);
    ck_assert_str_eq(t, "[gMASK]<sop> the<think><|endoftext|>");
    free(t);
    t = decode_str(glm, ids, 5, TX_TOKENIZER_SKIP_SPECIAL);
    ck_assert_str_eq(t, " the<think>");
    free(t);
    ck_assert_int_eq(tx_tokenizer_token_to_id(glm, "<|user|>", 8), 302);
    ck_assert_int_eq(tx_tokenizer_is_special(glm, 302), 1);
    ck_assert_int_eq(tx_tokenizer_is_special(glm, 309), 0);
    ck_assert_uint_eq(tx_tokenizer_vocab_size(glm), 313);
    tx_tokenizer_free(glm);
}
END_TEST

START_TEST(test_lossy_decode)
{
    /* byte tokens (id == byte) decode like Rust's from_utf8_lossy: one
     * U+FFFD per maximal ill-formed subpart */
    struct tx_tokenizer *glm = glm_tok();
    static const struct {
        int32_t ids[4];
        size_t n;
        const char *want;
    } cases[] = {
        {{0xED, 0xA0, 0x80}, 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* surrogate */
        {{0xF0, 0x90, 0x80}, 3, "\xEF\xBF\xBD"},                         /* truncated */
        {{0xE5, 'A'},
         2,
         "\xEF\xBF\xBD"
         "A"},
        {{0xC0, 0x80}, 2, "\xEF\xBF\xBD\xEF\xBF\xBD"}, /* overlong */
        {{0xF4, 0x90, 0x80, 0x80}, 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {{0xE5, 0x9B, 0xBD}, 3, "\xE5\x9B\xBD"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *t = decode_str(glm, cases[i].ids, cases[i].n, 0);
        ck_assert_msg(!strcmp(t, cases[i].want), "case %zu", i);
        free(t);
        /* the stream gives the same text */
        struct tx_tokenizer_stream *st = tx_tokenizer_stream_new(glm, 0);
        char acc[64] = "";
        const char *piece;
        size_t pl;
        for (size_t k = 0; k < cases[i].n; k++) {
            ck_assert_int_eq(tx_tokenizer_stream_put(st, cases[i].ids[k], &piece, &pl), 0);
            strcat(acc, piece);
        }
        ck_assert_int_eq(tx_tokenizer_stream_flush(st, &piece, &pl), 0);
        strcat(acc, piece);
        ck_assert_msg(!strcmp(acc, cases[i].want), "stream case %zu", i);
        tx_tokenizer_stream_free(st);
    }
    tx_tokenizer_free(glm);
}
END_TEST

START_TEST(test_bytelevel_regex_and_digits)
{
    /* HF's own ByteLevel split (use_regex) and add_prefix_space */
    char *j = glm_json(NULL, "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                             "\"trim_offsets\":true,\"use_regex\":true}");
    struct tx_tokenizer *t = load_str(j);
    free(j);
    EXPECT(t, "the", 0, 262);
    EXPECT(t, "the the", 0, 262, 262);
    EXPECT(t, "12345", 0, 32, 257, 258);
    EXPECT(t, "it's", 0, 32, 'i', 't', '\'', 's');
    tx_tokenizer_free(t);
    /* Digits pre-tokenizer */
    j = glm_json(NULL, "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\","
                       "\"individual_digits\":true},{\"type\":\"ByteLevel\","
                       "\"add_prefix_space\":false,\"use_regex\":false}]}");
    t = load_str(j);
    free(j);
    EXPECT(t, "a123", 0, 'a', '1', '2', '3');
    tx_tokenizer_free(t);
    j = glm_json(NULL, "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\","
                       "\"individual_digits\":false},{\"type\":\"ByteLevel\","
                       "\"add_prefix_space\":false,\"use_regex\":false}]}");
    t = load_str(j);
    free(j);
    EXPECT(t, "a123b", 0, 'a', 257, 'b');
    tx_tokenizer_free(t);
    /* no pre-tokenizer at all: one word */
    j = glm_json(NULL, "null");
    t = load_str(j);
    free(j);
    EXPECT(t, "a123", 0, 'a', 257);
    tx_tokenizer_free(t);
}
END_TEST

/* --------------------------------- split behaviors, string-form merges */

static char *split_json(const char *pattern_kind, const char *pattern, const char *behavior,
                        const char *invert)
{
    char *j = malloc(8192);
    snprintf(
        j, 8192,
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"t\":0,\"h\":1,\"e\":2,\"-\":3,\"f\":4,"
        "\"i\":5,\"n\":6,\"a\":7,\"l\":8,\"c\":9,\"o\":10,\"u\":11,\"d\":12,\"w\":13,"
        "\"th\":14,\"the\":15,\"fi\":16,\"fin\":17,\"fina\":18,\"final\":19,\"co\":20,"
        "\"cou\":21,\"coun\":22,\"count\":23,\"countd\":24,\"countdo\":25,\"countdow\":26,"
        "\"countdown\":27,\"the-\":28,\"final-\":29,\"-final\":30,\"-countdown\":31,\"--\":32},"
        "\"merges\":[\"t h\",\"th e\",\"f i\",\"fi n\",\"fin a\",\"fina l\",\"c o\",\"co u\","
        "\"cou n\",\"coun t\",\"count d\",\"countd o\",\"countdo w\",\"countdow n\","
        "\"the -\",\"final -\",\"- final\",\"- countdown\",\"- -\"]},"
        "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"%s\":\"%s\"},"
        "\"behavior\":\"%s\",\"invert\":%s}}",
        pattern_kind, pattern, behavior, invert);
    return j;
}

START_TEST(test_split_behaviors)
{
    static const struct {
        const char *behavior;
        int32_t want[8];
        size_t n;
    } cases[] = {
        {"Removed", {15, 19, 27}, 3},
        {"Isolated", {15, 3, 19, 3, 3, 27}, 6},
        {"MergedWithPrevious", {28, 29, 3, 27}, 4},
        {"MergedWithNext", {15, 30, 3, 31}, 4},
        {"Contiguous", {15, 3, 19, 32, 27}, 5},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *j = split_json("String", "-", cases[i].behavior, "false");
        struct tx_tokenizer *t = load_str(j);
        free(j);
        expect_ids(t, "the-final--countdown", 0, cases[i].want, cases[i].n);
        tx_tokenizer_free(t);
    }
    /* inverted regex: what the regex does not match is the delimiter */
    char *j = split_json("Regex", "[a-z]+", "Removed", "true");
    struct tx_tokenizer *t = load_str(j);
    free(j);
    EXPECT(t, "the-final--countdown", 0, 15, 19, 27);
    /* decoder null: HF joins the tokens with spaces */
    static const int32_t ids[] = {15, 3, 19};
    char *s = decode_str(t, ids, 3, 0);
    ck_assert_str_eq(s, "the - final");
    free(s);
    tx_tokenizer_free(t);
    /* an empty String pattern splits nothing */
    j = split_json("String", "", "Removed", "false");
    t = load_str(j);
    free(j);
    EXPECT(t, "the-", 0, 28);
    tx_tokenizer_free(t);
}
END_TEST

START_TEST(test_unk_fallback_ignore_merges)
{
    const char *base = "{\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":%s,"
                       "\"byte_fallback\":true,\"ignore_merges\":%s,\"vocab\":{\"a\":0,\"<unk>\":1,"
                       "\"<0xC3>\":2,\"<0xA9>\":3,\"x\":4,\"y\":5,\"z\":6,\"xy\":7,\"xyz\":8},"
                       "\"merges\":[\"x y\"]}}";
    char j[1024];
    snprintf(j, sizeof(j), base, "true", "false");
    struct tx_tokenizer *t = load_str(j);
    EXPECT(t, "a\xC3\xA9", 0, 0, 2, 3);      /* é: byte fallback */
    EXPECT(t, "a\xC3\xBC\xC3\xBC", 0, 0, 1); /* üü: <0xBC> missing, fused unk */
    EXPECT(t, "xyz", 0, 7, 6);               /* merges, not the whole word */
    tx_tokenizer_free(t);
    snprintf(j, sizeof(j), base, "false", "true");
    t = load_str(j);
    EXPECT(t, "a\xC3\xBC\xC3\xBC", 0, 0, 1, 1);
    EXPECT(t, "xyz", 0, 8); /* ignore_merges: whole word in the vocabulary */
    tx_tokenizer_free(t);
    /* continuing_subword_prefix / end_of_word_suffix */
    const char *wp = "{\"model\":{\"type\":\"BPE\",\"continuing_subword_prefix\":\"##\","
                     "\"end_of_word_suffix\":\"</w>\",\"vocab\":{\"a\":0,\"##b\":1,"
                     "\"##c</w>\":2,\"ab\":3,\"abc</w>\":4,\"b</w>\":5},"
                     "\"merges\":[\"a ##b\",\"ab ##c</w>\"]}}";
    t = load_str(wp);
    EXPECT(t, "abc", 0, 4);
    EXPECT(t, "b", 0, 5);
    tx_tokenizer_free(t);
}
END_TEST

/* -------------------------------------------------------- chat */

START_TEST(test_chat_render)
{
    struct tx_chat_message conv[] = {
        {"system", "You are helpful.", NULL},
        {"user", "Hi", NULL},
        {"assistant", "<think>\nplan\n</think>\n\n  Hello!  ", NULL},
        {"user", "2+2?", NULL},
    };
    char *text;
    size_t len;
    char err[512];
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_GLM45, conv, 4, TX_CHAT_ADD_GENERATION_PROMPT,
                                              &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "[gMASK]<sop><|system|>\nYou are helpful.<|user|>\nHi<|assistant|>\n"
                           "<think></think>\nHello!<|user|>\n2+2?<|assistant|>");
    ck_assert_uint_eq(strlen(text), len);
    free(text);
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_GLM45, conv, 4,
                                              TX_CHAT_ADD_GENERATION_PROMPT | TX_CHAT_NO_THINKING,
                                              &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "[gMASK]<sop><|system|>\nYou are helpful.<|user|>\nHi/nothink"
                           "<|assistant|>\n<think></think>\nHello!<|user|>\n2+2?/nothink"
                           "<|assistant|>\n<think></think>");
    free(text);
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_GLM5, conv, 4, TX_CHAT_ADD_GENERATION_PROMPT,
                                              &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "[gMASK]<sop><|system|>You are helpful.<|user|>Hi<|assistant|>"
                           "</think>Hello!<|user|>2+2?<|assistant|><think>");
    free(text);
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_GLM5, conv, 2,
                                              TX_CHAT_ADD_GENERATION_PROMPT | TX_CHAT_NO_THINKING,
                                              &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "[gMASK]<sop><|system|>You are helpful.<|user|>Hi<|assistant|></think>");
    free(text);
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_GLM4, conv, 2, TX_CHAT_ADD_GENERATION_PROMPT,
                                              &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "[gMASK]<sop><|system|>\nYou are helpful.<|user|>\nHi<|assistant|>\n");
    free(text);
    /* the table of docs/tokenizer.md */
    struct tx_chat_message doc[] = {
        {"system", "You are helpful.", NULL},
        {"user", "Hi", NULL},
        {"assistant", "Hello!", NULL},
        {"user", "2+2?", NULL},
    };
    static const struct {
        enum tx_chat_format fmt;
        const char *want;
    } table[] = {
        {TX_CHAT_GLM4, "[gMASK]<sop><|system|>\nYou are helpful.<|user|>\nHi<|assistant|>\nHello!"
                       "<|user|>\n2+2?<|assistant|>\n"},
        {TX_CHAT_GLM45, "[gMASK]<sop><|system|>\nYou are helpful.<|user|>\nHi<|assistant|>\n"
                        "<think></think>\nHello!<|user|>\n2+2?<|assistant|>"},
        {TX_CHAT_GLM5, "[gMASK]<sop><|system|>You are helpful.<|user|>Hi<|assistant|></think>"
                       "Hello!<|user|>2+2?<|assistant|><think>"},
    };
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(tx_tokenizer_chat_render(table[i].fmt, doc, 4,
                                                  TX_CHAT_ADD_GENERATION_PROMPT, &text, &len, err,
                                                  512),
                         0);
        ck_assert_str_eq(text, table[i].want);
        free(text);
    }
    /* reasoning after the last user turn is kept; tool results */
    struct tx_chat_message agent[] = {
        {"user", "weather?", NULL},
        {"assistant", "calling", " look it up "},
        {"tool", "{\"t\":20}", NULL},
        {"tool", "{\"h\":5}", NULL},
    };
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_GLM45, agent, 4, 0, &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "[gMASK]<sop><|user|>\nweather?<|assistant|>\n<think>look it up"
                           "</think>\ncalling<|observation|>\n<tool_response>\n{\"t\":20}\n"
                           "</tool_response>\n<tool_response>\n{\"h\":5}\n</tool_response>");
    free(text);
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_GLM5, agent, 4, 0, &text, &len, err, 512), 0);
    ck_assert_str_eq(text, "[gMASK]<sop><|user|>weather?<|assistant|><think>look it up</think>"
                           "calling<|observation|><tool_response>{\"t\":20}</tool_response>"
                           "<tool_response>{\"h\":5}</tool_response>");
    free(text);
    /* Qwen3 (ChatML) */
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_QWEN3, doc, 4, TX_CHAT_ADD_GENERATION_PROMPT,
                                              &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi"
                           "<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n"
                           "2+2?<|im_end|>\n<|im_start|>assistant\n");
    free(text);
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_QWEN3, agent, 4, 0, &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "<|im_start|>user\nweather?<|im_end|>\n<|im_start|>assistant\n<think>\n"
                           " look it up \n</think>\n\ncalling<|im_end|>\n<|im_start|>user\n"
                           "<tool_response>\n{\"t\":20}\n</tool_response>\n<tool_response>\n"
                           "{\"h\":5}\n</tool_response><|im_end|>\n");
    free(text);
    struct tx_chat_message q3[] = {
        {"user", "a", NULL},
        {"assistant", "<think>\nold\n</think>\n\nb", NULL},
        {"user", "c", NULL},
    };
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_QWEN3, q3, 3,
                                              TX_CHAT_ADD_GENERATION_PROMPT | TX_CHAT_NO_THINKING,
                                              &text, &len, err, 512),
                     0);
    /* reasoning before the last user turn dropped; thinking off */
    ck_assert_str_eq(text, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n"
                           "<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
                           "</think>\n\n");
    free(text);
    ck_assert_int_eq(tx_chat_format_from_name("qwen3"), TX_CHAT_QWEN3);
    ck_assert_int_eq(tx_chat_format_from_name("ChatML"), TX_CHAT_QWEN3);
    /* DeepSeek-V3 (its tokenizer_config.json chat_template) */
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_DEEPSEEK3, doc, 4,
                                              TX_CHAT_ADD_GENERATION_PROMPT, &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!"
                           "<｜end▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜>");
    free(text);
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_DEEPSEEK3, agent, 4, 0, &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "<｜begin▁of▁sentence｜><｜User｜>weather?<｜Assistant｜>calling"
                           "<｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>"
                           "{\"t\":20}<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>{\"h\":5}"
                           "<｜tool▁output▁end｜><｜tool▁outputs▁end｜>");
    free(text);
    /* reasoning in the content is dropped; after tool outputs the answer
     * follows "tool outputs end" */
    struct tx_chat_message ds[] = {
        {"system", "s1", NULL},
        {"user", "a", NULL},
        {"assistant", "<think>old</think>b", NULL},
        {"system", "s2", NULL},
        {"tool", "r", NULL},
        {"assistant", "c", NULL},
    };
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_DEEPSEEK3, ds, 6,
                                              TX_CHAT_ADD_GENERATION_PROMPT, &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "<｜begin▁of▁sentence｜>s1\n\ns2<｜User｜>a<｜Assistant｜>b"
                           "<｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>r"
                           "<｜tool▁output▁end｜><｜tool▁outputs▁end｜>c<｜end▁of▁sentence｜>"
                           "<｜Assistant｜>");
    free(text);
    ck_assert_int_eq(tx_chat_format_from_name("deepseek-v3"), TX_CHAT_DEEPSEEK3);
    ck_assert_int_eq(tx_chat_format_from_name("DeepSeek3"), TX_CHAT_DEEPSEEK3);
    /* errors */
    struct tx_chat_message bad[] = {{"wizard", "x", NULL}};
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_GLM5, bad, 1, 0, &text, &len, err, 512),
                     TX_EINVAL);
    ck_assert_msg(strstr(err, "wizard") != NULL, "%s", err);
    struct tx_chat_message badutf[] = {{"user", "\xFF", NULL}};
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_GLM5, badutf, 1, 0, &text, &len, err, 512),
                     TX_EINVAL);
    ck_assert_int_eq(
        tx_tokenizer_chat_render((enum tx_chat_format)9, conv, 1, 0, &text, &len, err, 512),
        TX_EINVAL);
    ck_assert_int_eq(tx_chat_format_from_name("GLM-5.1"), TX_CHAT_GLM5);
    ck_assert_int_eq(tx_chat_format_from_name("glm4.5"), TX_CHAT_GLM45);
    ck_assert_int_eq(tx_chat_format_from_name("glm4"), TX_CHAT_GLM4);
    ck_assert_int_eq(tx_chat_format_from_name("llama3"), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "llama3") != NULL, "%s", tx_last_error());
}
END_TEST

/* Tools (issue 17): the tool definitions and calls of each family as its
 * template renders them, Python's json.dumps number and string forms,
 * OpenAI's JSON-string arguments, and the errors. The byte-for-byte
 * comparison with Jinja2 is tools/chat-template-check (make check). */
static char *render_tools(enum tx_chat_format f, const struct tx_chat_message *m, size_t n,
                          const char *tools, const char *const *calls, unsigned flags)
{
    char *text = NULL, err[512];
    size_t len;
    int rc = tx_tokenizer_chat_render_tools(f, m, n, tools, calls, flags, &text, &len, err, 512);
    ck_assert_msg(rc == 0, "render: %s", err);
    ck_assert_uint_eq(strlen(text), len);
    return text;
}

START_TEST(test_chat_tools)
{
    const char *tools = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"d\": "
                        "[1e16, 1e-05, 0.0001, 100.0, -0.0, 2.5, 12345678901234567, true, null, "
                        "\"a\\\"b\\\\c\\n\\u0001\\u00e9/\"]}}]";
    const char *json_py = "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"d\": "
                          "[1e+16, 1e-05, 0.0001, 100.0, -0.0, 2.5, 12345678901234567, true, "
                          "null, \"a\\\"b\\\\c\\n\\u0001\xc3\xa9/\"]}}";
    struct tx_chat_message m[] = {{"user", "hi", NULL}, {"assistant", "", NULL}, {"tool", "7", NULL}};
    const char *calls[] = {NULL,
                           "[{\"type\": \"function\", \"function\": {\"name\": \"f\", "
                           "\"arguments\": {\"x\": \"s\", \"n\": [1, 2.0]}}}]",
                           NULL};
    const char *scalls[] = {NULL,
                            "[{\"function\": {\"name\": \"f\", \"arguments\": "
                            "\"{\\\"x\\\":\\\"s\\\"}\"}}]",
                            NULL};
    char want[4096], *t;

    /* GLM-4.5: tools turn, "\n<tool_call>f\n<arg_key>..." */
    t = render_tools(TX_CHAT_GLM45, m, 3, tools, calls, TX_CHAT_ADD_GENERATION_PROMPT);
    snprintf(want, sizeof(want), "%s%s%s", "[gMASK]<sop><|system|>\n# Tools\n\n", "", "");
    ck_assert_msg(!strncmp(t, want, strlen(want)), "%s", t);
    ck_assert_msg(strstr(t, json_py) != NULL, "tool JSON not as json.dumps writes it: %s", t);
    ck_assert_msg(strstr(t, "</tool_call><|user|>\nhi<|assistant|>\n<think></think>\n<tool_call>f\n"
                            "<arg_key>x</arg_key>\n<arg_value>s</arg_value>\n<arg_key>n</arg_key>\n"
                            "<arg_value>[1, 2.0]</arg_value>\n</tool_call><|observation|>\n"
                            "<tool_response>\n7\n</tool_response><|assistant|>") != NULL,
                  "%s", t);
    free(t);
    /* GLM-4.7/5: everything on one line; a JSON-string argument is parsed */
    t = render_tools(TX_CHAT_GLM5, m, 3, NULL, scalls, 0);
    ck_assert_str_eq(t, "[gMASK]<sop><|user|>hi<|assistant|></think><tool_call>f<arg_key>x"
                        "</arg_key><arg_value>s</arg_value></tool_call><|observation|>"
                        "<tool_response>7</tool_response>");
    free(t);
    /* Qwen3: a string argument is printed as it is, an object as JSON */
    t = render_tools(TX_CHAT_QWEN3, m, 3, NULL, scalls, 0);
    ck_assert_str_eq(t, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<tool_call>\n"
                        "{\"name\": \"f\", \"arguments\": {\"x\":\"s\"}}\n</tool_call><|im_end|>\n"
                        "<|im_start|>user\n<tool_response>\n7\n</tool_response><|im_end|>\n");
    free(t);
    t = render_tools(TX_CHAT_QWEN3, m, 2, NULL, calls, 0);
    ck_assert_msg(strstr(t, "{\"name\": \"f\", \"arguments\": {\"x\": \"s\", \"n\": [1, 2.0]}}") !=
                      NULL,
                  "%s", t);
    free(t);
    /* DeepSeek-V3: no tool definitions; the call in a ```json block */
    t = render_tools(TX_CHAT_DEEPSEEK3, m, 3, tools, scalls, TX_CHAT_ADD_GENERATION_PROMPT);
    ck_assert_str_eq(t, "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
                        "<\xef\xbd\x9cUser\xef\xbd\x9c>hi<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
                        "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
                        "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
                        "function<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>f\n```json\n"
                        "{\"x\":\"s\"}\n```<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81"
                        "end\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81"
                        "end\xef\xbd\x9c><\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81"
                        "sentence\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81outputs\xe2\x96\x81"
                        "begin\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81"
                        "begin\xef\xbd\x9c>7<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81"
                        "end\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81outputs\xe2\x96\x81"
                        "end\xef\xbd\x9c>");
    free(t);
    /* an empty tools list is no tools (as Jinja's `if tools`) */
    t = render_tools(TX_CHAT_GLM5, m, 1, "[]", NULL, 0);
    ck_assert_str_eq(t, "[gMASK]<sop><|user|>hi");
    free(t);

    /* errors name what is wrong and leave nothing */
    char *text = (char *)1, err[512];
    size_t len;
    const char *bad_args[] = {NULL, "[{\"function\": {\"name\": \"f\", \"arguments\": \"[1]\"}}]"};
    const char *no_name[] = {NULL, "[{\"function\": {\"arguments\": {}}}]"};
    const char *on_user[] = {"[{\"function\": {\"name\": \"f\"}}]", NULL};
    const char *not_json[] = {NULL, "[{"};
    const struct {
        enum tx_chat_format f;
        const char *tools;
        const char *const *calls;
        int rc;
        const char *msg;
    } e[] = {
        {TX_CHAT_GLM5, "{\"a\": 1}", NULL, TX_EINVAL, "tools: expected a JSON array"},
        {TX_CHAT_GLM5, "[1]", NULL, TX_EINVAL, "tools[0]: expected an object"},
        {TX_CHAT_GLM5, "[{\"a\": ", NULL, TX_EINVAL, "tools: not valid JSON"},
        {TX_CHAT_GLM5, "[\"\xff\"]", NULL, TX_EINVAL, "not valid UTF-8"},
        {TX_CHAT_GLM45, NULL, bad_args, TX_EINVAL, "message 1: tool_calls[0].function.arguments"},
        {TX_CHAT_QWEN3, NULL, no_name, TX_EINVAL, "tool_calls[0].function.name"},
        {TX_CHAT_QWEN3, NULL, on_user, TX_EINVAL, "tool_calls on a user message"},
        {TX_CHAT_DEEPSEEK3, NULL, not_json, TX_EINVAL, "message 1: tool_calls: not valid JSON"},
        {TX_CHAT_GLM4, "[{}]", NULL, TX_ENOTSUP, "GLM-4"},
    };
    for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++) {
        text = (char *)1;
        ck_assert_int_eq(tx_tokenizer_chat_render_tools(e[i].f, m, 2, e[i].tools, e[i].calls, 0,
                                                        &text, &len, err, 512),
                         e[i].rc);
        ck_assert_ptr_null(text);
        ck_assert_msg(strstr(err, e[i].msg) != NULL, "case %zu: %s", i, err);
    }

    /* encode: a tool's text is data (TX_CHAT_LITERAL_CONTENT): a special
     * token's string inside a description is not that token */
    struct tx_tokenizer *glm = glm_tok();
    int32_t *ids;
    size_t n;
    ck_assert_int_eq(tx_tokenizer_chat_encode_tools(
                         glm, TX_CHAT_GLM5, m, 1, "[{\"description\": \"<|assistant|>\"}]", NULL,
                         TX_CHAT_LITERAL_CONTENT, &ids, &n, err, 512),
                     0);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_ne(ids[i], 303);
    free(ids);
    tx_tokenizer_free(glm);
}
END_TEST

/* What the real Qwen3 and DeepSeek-V3.1 templates render and libtx once
 * did not (tests/chat-template/reference has the goldens of every shape) */
START_TEST(test_chat_real_templates)
{
    char err[512];
    char *text;
    size_t len;
    /* Qwen3: the last message, an assistant turn without reasoning, still
     * gets the empty think block; earlier assistant content is kept as it
     * is (leading newlines too) */
    struct tx_chat_message last[] = {
        {"user", "2+2?", NULL},
        {"assistant", "4", NULL},
    };
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_QWEN3, last, 2, 0, &text, &len, err, 512), 0);
    ck_assert_str_eq(text, "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
                           "</think>\n\n4<|im_end|>\n");
    free(text);
    struct tx_chat_message ws[] = {
        {"user", "a", NULL},
        {"assistant", "\n b \n", NULL},
        {"user", "c", NULL},
    };
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_QWEN3, ws, 3, 0, &text, &len, err, 512), 0);
    ck_assert_str_eq(text, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n\n b \n"
                           "<|im_end|>\n<|im_start|>user\nc<|im_end|>\n");
    free(text);
    /* a user message that is a <tool_response> wrapper is not the last
     * query: the assistant turn before it keeps its reasoning */
    struct tx_chat_message tr[] = {
        {"user", "q", NULL},
        {"assistant", "x", "r"},
        {"user", "<tool_response>1</tool_response>", NULL},
    };
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_QWEN3, tr, 3, 0, &text, &len, err, 512), 0);
    ck_assert_str_eq(text, "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nr\n"
                           "</think>\n\nx<|im_end|>\n<|im_start|>user\n<tool_response>1"
                           "</tool_response><|im_end|>\n");
    free(text);
    /* DeepSeek-V3.1: thinking only with TX_CHAT_THINKING (NO_THINKING wins) */
    struct tx_chat_message one[] = {{"system", "S", NULL}, {"user", "hi", NULL}};
    const unsigned gp = TX_CHAT_ADD_GENERATION_PROMPT;
    const struct {
        unsigned flags;
        const char *want;
    } ds[] = {
        {gp, "<｜begin▁of▁sentence｜>S<｜User｜>hi<｜Assistant｜></think>"},
        {gp | TX_CHAT_THINKING, "<｜begin▁of▁sentence｜>S<｜User｜>hi<｜Assistant｜><think>"},
        {gp | TX_CHAT_NO_THINKING, "<｜begin▁of▁sentence｜>S<｜User｜>hi<｜Assistant｜></think>"},
        {gp | TX_CHAT_THINKING | TX_CHAT_NO_THINKING,
         "<｜begin▁of▁sentence｜>S<｜User｜>hi<｜Assistant｜></think>"},
    };
    for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]); i++) {
        ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_DEEPSEEK31, one, 2, ds[i].flags, &text,
                                                  &len, err, 512),
                         0);
        ck_assert_str_eq(text, ds[i].want);
        free(text);
    }
    /* the other formats ignore TX_CHAT_THINKING */
    ck_assert_int_eq(tx_tokenizer_chat_render(TX_CHAT_GLM5, one, 2, gp | TX_CHAT_THINKING, &text,
                                              &len, err, 512),
                     0);
    ck_assert_str_eq(text, "[gMASK]<sop><|system|>S<|user|>hi<|assistant|><think>");
    free(text);
    /* reasoning dropped (text after the first </think>), tool calls and
     * results without V3's wrappers, the answer after results without a
     * marker, no generation prompt after a tool result */
    struct tx_chat_message calls[] = {
        {"user", "w?", NULL},
        {"assistant", "<think>a</think>b</think>c", NULL},
        {"user", "again", NULL},
        {"assistant", "", NULL},
        {"tool", "21", NULL},
        {"assistant", "done", NULL},
        {"tool", "x", NULL},
    };
    const char *tc[7] = {
        NULL, NULL, NULL,
        "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": "
        "\"{\\\"k\\\": 1}\"}}, {\"function\": {\"name\": \"g\", \"arguments\": {\"a\": true}}}]",
        NULL, NULL, NULL,
    };
    ck_assert_int_eq(tx_tokenizer_chat_render_tools(TX_CHAT_DEEPSEEK31, calls, 7, NULL, tc, gp,
                                                    &text, &len, err, 512),
                     0);
    ck_assert_str_eq(text, "<｜begin▁of▁sentence｜><｜User｜>w?<｜Assistant｜></think>b</think>c"
                           "<｜end▁of▁sentence｜><｜User｜>again<｜Assistant｜></think>"
                           "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"k\": 1}"
                           "<｜tool▁call▁end｜><｜tool▁call▁begin｜>g<｜tool▁sep｜>{\"a\": true}"
                           "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>"
                           "<｜tool▁output▁begin｜>21<｜tool▁output▁end｜>done<｜end▁of▁sentence｜>"
                           "<｜tool▁output▁begin｜>x<｜tool▁output▁end｜>");
    free(text);
    ck_assert_int_eq(tx_chat_format_from_name("deepseek-v3.1"), TX_CHAT_DEEPSEEK31);
    ck_assert_int_eq(tx_chat_format_from_name("DeepSeek3.1"), TX_CHAT_DEEPSEEK31);
    /* recognition: V3.1's "<｜Assistant｜></think>" marks it */
    const char *which = NULL;
    ck_assert_int_eq(tx_chat_format_of_template("{{ bos_token }}{{'<｜User｜>' + m}}"
                                                "{{'<｜Assistant｜></think>'}}",
                                                &which),
                     TX_CHAT_DEEPSEEK31);
    ck_assert_str_eq(which, "DeepSeek-V3.1");
    ck_assert_str_eq(tx_chat_format_name(TX_CHAT_DEEPSEEK31), "deepseek3.1");
    ck_assert_int_eq(tx_chat_format_of_template("{{'<｜User｜>' + m}}{{'<｜Assistant｜>'}}", &which),
                     TX_CHAT_DEEPSEEK3);
    /* ChatML variants that render otherwise are refused, not taken for Qwen3 */
    ck_assert_int_eq(tx_chat_format_of_template("<|im_start|>{{ m }}<|im_end|>{{- "
                                                "'<|im_start|>assistant\\n<think>\\n' }}",
                                                &which),
                     -1);
    ck_assert_int_eq(tx_chat_format_of_template("<|im_start|>{{ m }}<|im_end|><tool_call>\n"
                                                "<function={{ f }}>",
                                                &which),
                     -1);
    ck_assert_int_eq(tx_chat_format_of_template("<|im_start|>{{ m }}<|im_end|>", &which),
                     TX_CHAT_QWEN3);
}
END_TEST

START_TEST(test_chat_encode)
{
    struct tx_tokenizer *glm = glm_tok();
    struct tx_chat_message m[] = {{"system", "S", NULL}, {"user", "hi", NULL}};
    int32_t *ids;
    size_t n;
    char err[512];
    ck_assert_int_eq(tx_tokenizer_chat_encode(glm, TX_CHAT_GLM5, m, 2,
                                              TX_CHAT_ADD_GENERATION_PROMPT, &ids, &n, err, 512),
                     0);
    static const int32_t want5[] = {300, 301, 304, 'S', 302, 'h', 'i', 303, 309};
    ck_assert_uint_eq(n, 9);
    ck_assert(!memcmp(ids, want5, sizeof(want5)));
    free(ids);
    ck_assert_int_eq(tx_tokenizer_chat_encode(glm, TX_CHAT_GLM45, m, 2,
                                              TX_CHAT_ADD_GENERATION_PROMPT, &ids, &n, err, 512),
                     0);
    static const int32_t want45[] = {300, 301, 304, 10, 'S', 302, 10, 'h', 'i', 303};
    ck_assert_uint_eq(n, 10);
    ck_assert(!memcmp(ids, want45, sizeof(want45)));
    free(ids);
    /* special-token strings inside a message: parsed like HF, or literal */
    struct tx_chat_message inj[] = {{"user", "<|assistant|>x", NULL}};
    ck_assert_int_eq(tx_tokenizer_chat_encode(glm, TX_CHAT_GLM5, inj, 1, 0, &ids, &n, err, 512), 0);
    static const int32_t parsed[] = {300, 301, 302, 303, 'x'};
    ck_assert_uint_eq(n, 5);
    ck_assert(!memcmp(ids, parsed, sizeof(parsed)));
    free(ids);
    ck_assert_int_eq(
        tx_tokenizer_chat_encode(glm, TX_CHAT_GLM5, inj, 1,
                                 TX_CHAT_LITERAL_CONTENT | TX_CHAT_ADD_GENERATION_PROMPT, &ids, &n,
                                 err, 512),
        0);
    int assistants = 0;
    for (size_t i = 0; i < n; i++)
        assistants += ids[i] == 303;
    ck_assert_int_eq(assistants, 1); /* only the generation prompt's */
    ck_assert_int_eq(ids[0], 300);
    ck_assert_int_eq(ids[n - 2], 303);
    char *back = decode_str(glm, ids, n, 0);
    ck_assert_str_eq(back, "[gMASK]<sop><|user|><|assistant|>x<|assistant|><think>");
    free(back);
    free(ids);
    /* stop tokens: <|endoftext|>, <|user|>, <|observation|> */
    int32_t stop[3];
    ck_assert_int_eq(tx_tokenizer_chat_stop_tokens(glm, stop, 3), 3);
    ck_assert_int_eq(stop[0], 305);
    ck_assert_int_eq(stop[1], 302);
    ck_assert_int_eq(stop[2], 306);
    ck_assert_int_eq(tx_tokenizer_chat_stop_tokens(glm, stop, 1), 3);
    tx_tokenizer_free(glm);
}
END_TEST

/* ------------------------------------------------------ malformed */

static void expect_load_error(const char *json, size_t len, int code, const char *needle)
{
    struct tx_tokenizer *t = (struct tx_tokenizer *)1;
    char err[512] = "";
    int rc = tx_tokenizer_load_buffer(json, len, &t, err, sizeof(err));
    ck_assert_msg(rc == code, "load of %.80s: got %d (%s), expected %d", json, rc, err, code);
    ck_assert_ptr_null(t);
    ck_assert_msg(err[0] != 0, "no message for %.80s", json);
    ck_assert_str_eq(tx_last_error(), err);
    if (needle)
        ck_assert_msg(strstr(err, needle) != NULL, "message \"%s\" lacks \"%s\"", err, needle);
}

#define BAD(json, code, needle) expect_load_error(json, strlen(json), code, needle)

START_TEST(test_malformed)
{
    BAD("", TX_EINVAL, "empty");
    BAD("{", TX_EINVAL, "truncated");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merg", TX_EINVAL, "truncated");
    BAD("[1, 2]", TX_EINVAL, "top level");
    BAD("{}", TX_EINVAL, "missing \"model\"");
    BAD("{\"model\": 5}", TX_EINVAL, "model: expected an object");
    BAD("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", TX_ENOTSUP, "Unigram");
    BAD("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", TX_ENOTSUP, "only BPE");
    BAD("{\"model\": {\"type\": 3}}", TX_EINVAL, "model.type");
    BAD("{\"model\": {\"type\": \"BPE\", \"merges\": []}}", TX_EINVAL, "missing \"vocab\"");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}", TX_EINVAL, "missing \"merges\"");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": [], \"merges\": []}}", TX_EINVAL,
        "model.vocab");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}", TX_EINVAL, "empty");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"0\"}, \"merges\": []}}", TX_EINVAL,
        "not an integer");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}}", TX_EINVAL,
        "out of range");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999999}, \"merges\": []}}",
        TX_EINVAL, "out of range");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": {}}}", TX_EINVAL,
        "model.merges");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a\"]}}", TX_EINVAL,
        "merges[0]");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a a a\"]}}",
        TX_EINVAL, "merges[0]");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}", TX_EINVAL,
        "\"b\" is not in the vocabulary");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}",
        TX_EINVAL, "merged token \"ab\"");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[\"a\"]]}}", TX_EINVAL,
        "pair");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[1, 2]]}}", TX_EINVAL,
        "strings");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [7]}}", TX_EINVAL,
        "merges[0]");
    BAD("{\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, \"vocab\": {\"a\": 0}, \"merges\": []}}",
        TX_ENOTSUP, "dropout");
    BAD("{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"vocab\": {\"a\": 0}, "
        "\"merges\": []}}",
        TX_EINVAL, "unk_token");
    BAD("{\"model\": {\"type\": \"BPE\", \"fuse_unk\": 1, \"vocab\": {\"a\": 0}, \"merges\": []}}",
        TX_EINVAL, "fuse_unk");
#define M "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}"
    BAD("{" M ", \"normalizer\": []}", TX_EINVAL, "normalizer: expected an object");
    BAD("{" M ", \"normalizer\": {\"type\": \"Lowercase\"}}", TX_ENOTSUP, "Lowercase");
    BAD("{" M ", \"normalizer\": {\"typ\": \"NFC\"}}", TX_EINVAL, "missing \"type\"");
    BAD("{" M ", \"pre_tokenizer\": {\"type\": \"Whitespace\"}}", TX_ENOTSUP, "Whitespace");
    BAD("{" M ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, "
        "\"behavior\": \"Isolated\"}}",
        TX_EINVAL, "regex");
    BAD("{" M ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, "
        "\"behavior\": \"Sideways\"}}",
        TX_EINVAL, "Sideways");
    BAD("{" M ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": \"a\", "
        "\"behavior\": \"Isolated\"}}",
        TX_EINVAL, "pattern");
    BAD("{" M ", \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": 3}}", TX_EINVAL,
        "pretokenizers");
    BAD("{" M ", \"added_tokens\": {}}", TX_EINVAL, "added_tokens");
    BAD("{" M ", \"added_tokens\": [{\"id\": \"x\", \"content\": \"a\"}]}", TX_EINVAL,
        "added_tokens[0].id");
    BAD("{" M ", \"added_tokens\": [{\"id\": 5}]}", TX_EINVAL, "content");
    BAD("{" M ", \"added_tokens\": [{\"id\": 5, \"content\": \"x\", \"special\": \"yes\"}]}",
        TX_EINVAL, "special");
    BAD("{" M ", \"decoder\": {\"type\": \"WordPiece\"}}", TX_ENOTSUP, "WordPiece");
    BAD("{" M ", \"post_processor\": {\"type\": \"Custom\"}}", TX_ENOTSUP, "Custom");
    BAD("{" M ", \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": "
        "[{\"SpecialToken\": {\"id\": \"X\", \"type_id\": 0}}]}}",
        TX_EINVAL, "\"X\"");
    BAD("{" M ", \"post_processor\": {\"type\": \"RobertaProcessing\", \"cls\": [\"<s>\", 7], "
        "\"sep\": [\"</s>\", 0]}}",
        TX_EINVAL, "cls");
    BAD("{" M "} trailing", TX_EINVAL, "trailing");
    BAD("{" M ", \"x\": 'single quotes'}", TX_EINVAL, "JSON");
    BAD("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"\xFF\": 0}, \"merges\": []}}", TX_EINVAL,
        NULL);
#undef M
    /* deep nesting does not overflow the stack */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 1);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = 0;
    expect_load_error(deep, 2 * depth, TX_EINVAL, NULL);
    free(deep);
    /* NULL arguments */
    struct tx_tokenizer *t;
    ck_assert_int_eq(tx_tokenizer_load_buffer(NULL, 5, &t, NULL, 0), TX_EINVAL);
    ck_assert_int_eq(tx_tokenizer_load_buffer("{}", 2, NULL, NULL, 0), TX_EINVAL);
    tx_tokenizer_free(NULL);
}
END_TEST

START_TEST(test_truncated_everywhere)
{
    /* every proper prefix of a valid file is rejected cleanly */
    char *j = glm_json(GLM_RE, NULL);
    size_t len = strlen(j);
    for (size_t cut = 0; cut < len; cut++) {
        struct tx_tokenizer *t = (struct tx_tokenizer *)1;
        char err[512] = "";
        int rc = tx_tokenizer_load_buffer(j, cut, &t, err, sizeof(err));
        ck_assert_msg(rc == TX_EINVAL, "prefix of %zu bytes: rc %d (%s)", cut, rc, err);
        ck_assert_ptr_null(t);
        ck_assert(err[0] != 0);
    }
    struct tx_tokenizer *t = load_str(j);
    tx_tokenizer_free(t);
    free(j);
}
END_TEST

/* The loader's fast path (model.vocab / model.merges read from the text)
 * applies to the real Qwen3 file and builds exactly what the json-c path
 * builds. */
START_TEST(test_load_paths_agree)
{
    NEED_QWEN();
    char path[PATH_MAX + 128];
    snprintf(path, sizeof(path), "%s/data/tokenizers/qwen3/tokenizer.json", data_dir);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    struct tx_tokenizer *fast = NULL, *slow = NULL;
    char err[512];
    ck_assert_int_eq(
        tok_load_buffer_ex(buf, (size_t)n, TOK_LOAD_FAST_ONLY, &fast, err, sizeof(err)), 0);
    ck_assert_int_eq(tok_load_buffer_ex(buf, (size_t)n, TOK_LOAD_NO_FAST, &slow, err, sizeof(err)),
                     0);
    free(buf);
    ck_assert_uint_eq(tx_tokenizer_vocab_size(fast), tx_tokenizer_vocab_size(slow));
    ck_assert_uint_eq(fast->pool.len, slow->pool.len);
    ck_assert(!memcmp(fast->pool.p, slow->pool.p, fast->pool.len));
    ck_assert_uint_eq(fast->vocab.n, 151643);
    ck_assert_uint_eq(fast->merges.n, slow->merges.n);
    ck_assert_uint_eq(fast->merges.mask, slow->merges.mask);
    for (size_t i = 0; i <= fast->merges.mask; i++) {
        ck_assert_uint_eq(fast->merges.keys[i], slow->merges.keys[i]);
        if (fast->merges.keys[i])
            ck_assert(fast->merges.rank[i] == slow->merges.rank[i] &&
                      fast->merges.new_id[i] == slow->merges.new_id[i]);
    }
    for (int32_t id = 0; id < (int32_t)tx_tokenizer_vocab_size(fast); id++) {
        const char *a = tx_tokenizer_id_to_token(fast, id), *b = tx_tokenizer_id_to_token(slow, id);
        ck_assert(a && b && !strcmp(a, b));
    }
    tx_tokenizer_free(fast);
    tx_tokenizer_free(slow);
}
END_TEST

START_TEST(test_fuzz_corpus_replay)
{
    ck_assert_msg(repo_root[0] != 0, "cannot find the repository root");
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/tokenizer", repo_root);
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "fuzz corpus %s is missing", dir);
    struct dirent *de;
    int files = 0, modes[3] = {0, 0, 0};
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[PATH_MAX * 2];
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        size_t len;
        char *data = read_file(p, &len);
        ck_assert_msg(data != NULL, "cannot read %s", p);
        if (len)
            modes[(unsigned char)data[0] % 3]++;
        LLVMFuzzerTestOneInput((const uint8_t *)data, len);
        free(data);
        files++;
    }
    closedir(d);
    ck_assert_msg(files >= 10, "fuzz corpus has only %d files", files);
    ck_assert_msg(modes[0] && modes[1] && modes[2], "fuzz corpus lacks a mode");
}
END_TEST

static Suite *tokenizer_suite(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *ref = tcase_create("qwen3");
    tcase_add_unchecked_fixture(ref, setup_qwen, teardown_qwen);
    tcase_set_timeout(ref, 120);
    tcase_add_test(ref, test_reference_encodings);
    tcase_add_test(ref, test_qwen_vocab_and_specials);
    tcase_add_test(ref, test_qwen_roundtrips);
    tcase_add_test(ref, test_qwen_errors_and_lossy);
    tcase_add_test(ref, test_qwen_stream);
    tcase_add_test(ref, test_qwen_threads);
    tcase_add_test(ref, test_glm_tokenize_tool);
    tcase_add_test(ref, test_missing_data_dir_fails);
    tcase_add_test(ref, test_load_paths_agree);
    suite_add_tcase(s, ref);

    TCase *glm = tcase_create("handwritten");
    tcase_set_timeout(glm, 60);
    tcase_add_test(glm, test_glm_digits);
    tcase_add_test(glm, test_glm_nfc);
    tcase_add_test(glm, test_glm_added_tokens);
    tcase_add_test(glm, test_lossy_decode);
    tcase_add_test(glm, test_bytelevel_regex_and_digits);
    tcase_add_test(glm, test_split_behaviors);
    tcase_add_test(glm, test_unk_fallback_ignore_merges);
    tcase_add_test(glm, test_chat_render);
    tcase_add_test(glm, test_chat_encode);
    tcase_add_test(glm, test_chat_tools);
    tcase_add_test(glm, test_chat_real_templates);
    suite_add_tcase(s, glm);

    TCase *bad = tcase_create("malformed");
    tcase_add_unchecked_fixture(bad, locate_dirs, NULL);
    tcase_set_timeout(bad, 120);
    tcase_add_test(bad, test_malformed);
    tcase_add_test(bad, test_truncated_everywhere);
    tcase_add_test(bad, test_fuzz_corpus_replay);
    suite_add_tcase(s, bad);
    return s;
}

int main(void)
{
    return tx_test_run(tokenizer_suite());
}
