// SPDX-License-Identifier: MIT
/*
 * Replays the committed fuzz corpora of the model parsers
 * (tests/fuzz/corpus/{safetensors,smd,onnx}/) through the fuzz targets
 * themselves (their properties abort on violation), and checks that the
 * valid seeds do open, so the corpus exercises the deep paths.
 */
#include "test_model_util.h"

#include <dirent.h>

#include <tx/tx_onnx.h>
#include <tx/tx_safetensors.h>
#include <tx/tx_smd.h>

#define LLVMFuzzerTestOneInput fuzz_safetensors_one
#include "../fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_smd_one
#include "../fuzz/fuzz_smd.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_onnx_one
#include "../fuzz/fuzz_onnx.c"
#undef LLVMFuzzerTestOneInput

static char err[TX_ERR_MAX];

/* tests/fuzz/corpus/NAME, found from this source file's path */
static void corpus_dir(const char *name, char *out, size_t n)
{
    const char *src = __FILE__; /* tests/unit/test_model_fuzz.c */
    const char *s = strstr(src, "tests/unit/");
    size_t pre = s ? (size_t)(s - src) : 0;
    snprintf(out, n, "%.*stests/fuzz/corpus/%s", (int)pre, src, name);
}

static int replay(const char *name, int (*fn)(const uint8_t *, size_t))
{
    char dir[1024];
    corpus_dir(name, dir, sizeof(dir));
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "%s: corpus missing", dir);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[2048];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        size_t len;
        uint8_t *b = tm_read(p, &len);
        fn(b, len);
        free(b);
        count++;
    }
    closedir(d);
    return count;
}

START_TEST(replay_safetensors)
{
    ck_assert_int_ge(replay("safetensors", fuzz_safetensors_one), 5);
    char p[1100];
    corpus_dir("safetensors/valid.safetensors", p, sizeof(p));
    struct tx_st_file *f;
    ck_assert_int_eq(tx_st_open(p, &f, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_st_count(f), 3);
    tx_st_close(f);
}
END_TEST

START_TEST(replay_smd)
{
    ck_assert_int_ge(replay("smd", fuzz_smd_one), 4);
    /* the valid seed (after its mode byte) is a package that verifies */
    char p[1100];
    corpus_dir("smd/valid_verify", p, sizeof(p));
    size_t len;
    uint8_t *b = tm_read(p, &len);
    tm_write(tm_path("v.smd"), b + 1, len - 1);
    free(b);
    struct tx_smd *s;
    ck_assert_int_eq(tx_smd_open(tm_path("v.smd"), TX_SMD_OPEN_VERIFY, &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_smd_tensor_count(s), 3);
    ck_assert_uint_eq(tx_smd_find(s, "e.weight")->format, TX8_WFMT_BLOCK_SPARSE);
    tx_smd_close(s);
}
END_TEST

START_TEST(replay_onnx)
{
    /* the target's scratch directory goes inside this test's directory,
     * which the fixture removes (forked test processes skip atexit) */
    setenv("TMPDIR", tm_dir, 1);
    ck_assert_int_ge(replay("onnx", fuzz_onnx_one), 3);
    char p[1100];
    corpus_dir("onnx/inline.onnx", p, sizeof(p));
    struct tx_onnx *m;
    ck_assert_int_eq(tx_onnx_open(p, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_onnx_count(m), 2);
    tx_onnx_close(m);
    /* the external-data seed opens next to its data file, as the fuzz target
     * runs it */
    corpus_dir("onnx/typed_external.onnx", p, sizeof(p));
    size_t len;
    uint8_t *b = tm_read(p, &len);
    tm_write(tm_path("model.onnx"), b, len);
    free(b);
    char zeros[4096] = {0};
    tm_write(tm_path("fuzz.data"), zeros, sizeof(zeros));
    ck_assert_int_eq(tx_onnx_open(tm_path("model.onnx"), &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_onnx_count(m), 3);
    tx_onnx_close(m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("model_fuzz");
    TCase *tc = tcase_create("corpus");
    tcase_add_checked_fixture(tc, tm_setup, tm_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, replay_safetensors);
    tcase_add_test(tc, replay_smd);
    tcase_add_test(tc, replay_onnx);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
