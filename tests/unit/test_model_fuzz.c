// SPDX-License-Identifier: MIT
/*
 * Replays the committed fuzz corpora of the model parsers
 * (tests/fuzz/corpus/{safetensors,smd,onnx,config,moe_yaml}/) through the fuzz targets
 * themselves (their properties abort on violation), and checks that the
 * valid seeds do open, so the corpus exercises the deep paths.
 */
#include "test_model_util.h"
#include "tx_test_corpus.h"

#include <dirent.h>

#include <tx-internal/tx_onnx.h>
#include <tx-internal/tx_safetensors.h>
#include <tx-internal/tx_smd.h>

#define LLVMFuzzerTestOneInput fuzz_safetensors_one
#include "../fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_smd_one
#include "../fuzz/fuzz_smd.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_onnx_one
#include "../fuzz/fuzz_onnx.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_config_one
#include "../fuzz/fuzz_config.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_moe_yaml_one
#include "../fuzz/fuzz_moe_yaml.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_fp8_one
#include "../fuzz/fuzz_fp8.c"
#include "tx_test_main.h"
#undef LLVMFuzzerTestOneInput

static char err[TX_ERR_MAX];

/* tests/fuzz/corpus/NAME, found from this source file's path */

static int replay(const char *name, int (*fn)(const uint8_t *, size_t))
{
    char dir[1024];
    tx_test_corpus_dir(name, dir, sizeof(dir));
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
    tx_test_corpus_dir("safetensors/valid.safetensors", p, sizeof(p));
    struct tx_st_file *f;
    ck_assert_int_eq(tx_st_open(p, &f, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_st_count(f), 3);
    tx_st_close(f);
}
END_TEST

/* a seed of corpus/fp8: its config's verdict, and what binding w.weight gives */
static int fp8_seed_bind(const char *name, struct txm_quant_config *q)
{
    char p[1100];
    tx_test_corpus_dir(name, p, sizeof(p));
    size_t len;
    uint8_t *b = tm_read(p, &len);
    size_t L = (size_t)b[0] | (size_t)b[1] << 8;
    char *cfg = strndup((const char *)b + 2, L);
    int rc = txm_quant_config_parse(cfg, "config.json", q, err, sizeof(err));
    free(cfg);
    if (rc == 0) {
        tm_write(tm_path("s.safetensors"), b + 2 + L, len - 2 - L);
        struct tx_st_file *f;
        ck_assert_int_eq(tx_st_open(tm_path("s.safetensors"), &f, err, sizeof(err)), 0);
        struct tx_tensor t;
        rc = txm_fp8_bind(tx_st_find(f, "w.weight"), tx_st_find(f, "w.weight_scale_inv"), q, &t,
                          err, sizeof(err));
        tx_st_close(f);
    }
    free(b);
    return rc;
}

START_TEST(replay_fp8)
{
    ck_assert_int_ge(replay("fp8", fuzz_fp8_one), 10);
    struct txm_quant_config q;
    ck_assert_int_eq(fp8_seed_bind("fp8/valid_edges", &q), 0);
    ck_assert_int_eq(fp8_seed_bind("fp8/valid_bf16_scale", &q), 0);
    ck_assert_int_eq(fp8_seed_bind("fp8/nan_scale", &q), TX_EINVAL);
    tm_err_has(err, "nan");
    ck_assert_int_eq(fp8_seed_bind("fp8/misshapen_scale", &q), TX_EINVAL);
    tm_err_has(err, "[2, 1]");
    ck_assert_int_eq(fp8_seed_bind("fp8/scale_of_bf16", &q), TX_EINVAL);
    ck_assert_int_eq(fp8_seed_bind("fp8/gptq", &q), TX_ENOTSUP);
    tm_err_has(err, "quantization_config.quant_method \"gptq\"");
}
END_TEST

START_TEST(replay_smd)
{
    ck_assert_int_ge(replay("smd", fuzz_smd_one), 4);
    /* the valid seed (after its mode byte) is a package that verifies */
    char p[1100];
    tx_test_corpus_dir("smd/valid_verify", p, sizeof(p));
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
    tx_test_corpus_dir("onnx/inline.onnx", p, sizeof(p));
    struct tx_onnx *m;
    ck_assert_int_eq(tx_onnx_open(p, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_onnx_count(m), 2);
    tx_onnx_close(m);
    /* the external-data seed opens next to its data file, as the fuzz target
     * runs it */
    tx_test_corpus_dir("onnx/typed_external.onnx", p, sizeof(p));
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

/* glm_config_from_json's verdict on a corpus file */
static int config_ok(const char *name)
{
    char p[1100];
    tx_test_corpus_dir(name, p, sizeof(p));
    char *t = tm_read(p, NULL);
    struct glm_config cfg;
    int rc = glm_config_from_json(t, &cfg, err, sizeof(err));
    free(t);
    return rc;
}

/* a corpus file as a generation_config.json */
static int gen_config_ok(const char *name)
{
    char p[1100];
    tx_test_corpus_dir(name, p, sizeof(p));
    size_t len;
    char *t = tm_read(p, &len);
    struct glm_generation_config g;
    int rc = txm_gen_config_parse(t, len, name, 0, &g, err, sizeof(err));
    free(t);
    return rc;
}

/* a corpus file's first line as a --config-set list over the tiny GLM-4.5 config */
static int config_set_ok(const char *name)
{
    char p[1100];
    tx_test_corpus_dir(name, p, sizeof(p));
    char *t = tm_read(p, NULL);
    t[strcspn(t, "\n")] = 0;
    char *base = tx_synth_config_json(GLM_ARCH_GLM4_MOE, TX_SYNTH_TINY, 256);
    char *out = NULL;
    int rc = tx_synth_apply_config_set(base, t, &out, err, sizeof(err));
    if (rc == 0) {
        struct glm_config cfg;
        ck_assert_int_eq(glm_config_from_json(out, &cfg, err, sizeof(err)), 0);
        ck_assert_int_eq(cfg.num_hidden_layers, 3);
        ck_assert_int_eq(cfg.hidden_size, 64);
    }
    free(out);
    free(base);
    free(t);
    return rc;
}

/* the fast JSON check's verdict on a corpus file */
static int fast_json_ok(const char *name)
{
    char p[1100];
    tx_test_corpus_dir(name, p, sizeof(p));
    size_t len;
    char *t = tm_read(p, &len);
    int ok = txm_json_object_ok(t, len);
    free(t);
    return ok;
}

START_TEST(replay_config)
{
    ck_assert_int_ge(replay("config", fuzz_config_one), 8);
    ck_assert_int_eq(config_ok("config/glm4_synth.json"), 0);
    ck_assert_int_eq(config_ok("config/glm5_synth.json"), 0);
    ck_assert_int_eq(config_ok("config/glm5_rope_parameters.json"), 0);
    ck_assert_int_lt(config_ok("config/glm4_wrong_type.json"), 0);
    ck_assert_ptr_nonnull(strstr(err, "hidden_size"));
    ck_assert_int_lt(config_ok("config/glm4_zero_layers.json"), 0);
    ck_assert_int_lt(config_ok("config/truncated.json"), 0);
    ck_assert_int_lt(config_ok("config/not_object.json"), 0);
    /* the fast syntax check: real configs pass, the unusual is left to
     * json-c (the fuzz target checks that it never accepts more) */
    ck_assert(fast_json_ok("config/glm4_synth.json"));
    ck_assert(fast_json_ok("config/glm5_rope_parameters.json"));
    ck_assert(fast_json_ok("config/glm4_wrong_type.json"));
    ck_assert(!fast_json_ok("config/truncated.json"));
    ck_assert(!fast_json_ok("config/not_object.json"));
    ck_assert(!fast_json_ok("config/trailing.json"));
    ck_assert(!fast_json_ok("config/deep.json"));
    ck_assert(!fast_json_ok("config/escapes.json"));
    /* the same corpus as generation_config.json, --config-set, chat_template */
    ck_assert_int_eq(gen_config_ok("config/gen_glm45.json"), 0);
    ck_assert_int_eq(gen_config_ok("config/gen_single_eos.json"), 0);
    ck_assert_int_eq(gen_config_ok("config/gen_bad_ranges.json"), TX_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "eos_token_id"));
    ck_assert_int_eq(config_set_ok("config/set_fields.txt"), 0);
    ck_assert_int_eq(config_set_ok("config/set_bad.txt"), TX_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "rope_theta: 'nan' is not a finite number"));
    {
        char p[1100];
        tx_test_corpus_dir("config/tmpl_glm45.txt", p, sizeof(p));
        char *t = tm_read(p, NULL);
        ck_assert_int_eq(tx_chat_format_of_template(t, NULL), TX_CHAT_GLM45);
        free(t);
    }
    static const char *const bad[] = {"{\"a\":01}",
                                      "{\"a\":1,}",
                                      "{\"a\" 1}",
                                      "{'a':1}",
                                      "{\"a\":tru}",
                                      "{\"a\":\"\x01\"}",
                                      "{\"a\":\"\xC0\xAF\"}",
                                      "{\"a\":[1 2]}",
                                      "{\"a\":-}",
                                      "{\"a\":1.}",
                                      "{} {}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!txm_json_object_ok(bad[i], strlen(bad[i])), "accepted %s", bad[i]);
    static const char *const good[] = {"{}", " {\"a\":[]} \n",
                                       "{\"a\":[1,-2.5e+3,true,false,null]}",
                                       "{\"\\u00e9\\n\":{\"b\":\"\xC3\xA9\"}}"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ck_assert_msg(txm_json_object_ok(good[i], strlen(good[i])), "rejected %s", good[i]);
}
END_TEST

START_TEST(replay_moe_yaml)
{
    ck_assert_int_ge(replay("moe_yaml", fuzz_moe_yaml_one), 10);
    char p[1100];
    struct glm_moe_options o;
    tx_test_corpus_dir("moe_yaml/article.yaml", p, sizeof(p));
    glm_moe_defaults(&o);
    ck_assert_int_eq(glm_moe_config_load(p, &o), 0);
    ck_assert_int_eq(o.expert_parallel, 4);
    ck_assert_float_eq_tol(o.capacity_factor, 1.2f, 1e-6f);
    ck_assert_float_eq_tol(o.min_expert_util, 0.3f, 1e-6f);
    tx_test_corpus_dir("moe_yaml/alias.yaml", p, sizeof(p));
    ck_assert_int_eq(glm_moe_config_load(p, &o), 0);
    ck_assert_int_eq(o.expert_parallel, 2);
    ck_assert_float_eq_tol(o.capacity_factor, 1.5f, 1e-6f);
    tx_test_corpus_dir("moe_yaml/all_keys.yaml", p, sizeof(p));
    ck_assert_int_eq(glm_moe_config_load(p, &o), 0);
    ck_assert_int_eq(o.balance, GLM_BALANCE_AUTO);
    ck_assert_float_eq_tol(o.lambda, 0.25f, 1e-6f);
    static const char *const bad[] = {"not_integer",  "out_of_range", "unknown_key", "not_mapping",
                                      "nested_value", "bad_indent",   "empty",       "nan",
                                      "bad_balance",  "no_moe"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char name[64];
        snprintf(name, sizeof(name), "moe_yaml/%s.yaml", bad[i]);
        tx_test_corpus_dir(name, p, sizeof(p));
        ck_assert_msg(glm_moe_config_load(p, &o) < 0, "%s accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(tx_last_error(), p));
    }
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
    tcase_add_test(tc, replay_config);
    tcase_add_test(tc, replay_moe_yaml);
    tcase_add_test(tc, replay_fp8);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
