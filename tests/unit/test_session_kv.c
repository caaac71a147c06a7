/* SPDX-License-Identifier: MIT */
/*
 * glm_session_kv_bytes / _read / _write (include/tx/glm.h, libtx 2.9): KV
 * rows copied between sessions, in blocks, continue with the same logits
 * and greedy tokens, bit for bit, as the session they came from -- for
 * every cache type (the default, f32, f16, bf16, q8_0, q4_0) of the MLA
 * latent + DSA key-selector cache of GLM-5.1, the MLA cache of DeepSeek-V3
 * and the GQA cache of GLM-4.5 (the MLA models with 32-wide rope rows, so
 * that their latent rows take the block types); bad ranges, short buffers,
 * gaps and ids outside the vocabulary are refused and change nothing.
 *
 * Backend: $TX_DEVICE if set, else a tx8-emu started for this program.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm.h>
#include <tx/tx.h>

#include "test_runtime_synth.h"

enum { N_MODELS = 3, NP = 40, BLK = 16, K = 5 };
static char g_smd[N_MODELS][256];
static const char *g_name[N_MODELS] = {"GLM-5.1 (MLA + DSA)", "DeepSeek-V3 (MLA)", "GLM-4.5 (GQA)"};

static void fixture_setup(void)
{
    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    const char *d = rts_tmpdir();
    struct rts_mods kv32 = {.kv32 = 1, .seed = 7};
    enum glm_arch arch[N_MODELS] = {GLM_ARCH_GLM_MOE_DSA, GLM_ARCH_DEEPSEEK_V3, GLM_ARCH_GLM4_MOE};
    for (int i = 0; i < N_MODELS; i++) {
        char ck[300];
        snprintf(ck, sizeof(ck), "%s/ck%d", d, i);
        snprintf(g_smd[i], sizeof(g_smd[i]), "%s/m%d.smd", d, i);
        if (rts_write_checkpoint(ck, arch[i], &kv32) || rts_export(ck, g_smd[i], "none"))
            ck_abort_msg("cannot make model %d", i);
    }
}

static void fixture_teardown(void)
{
    rts_device_teardown();
    rts_cleanup();
}

static glm_session_t *session(glm_model_t *m, int t)
{
    struct glm_session_options o = {.n_ctx = 64, .cache_type_k = t, .cache_type_v = t};
    glm_session_t *s = NULL;
    OK(glm_session_create(m, &o, &s));
    return s;
}

/* k greedy steps of s from last: each step's logits into lg[k][V], its
 * tokens into tok[k] */
static void decode(glm_session_t *s, int32_t last, int V, float *lg, int32_t *tok)
{
    struct glm_sampling g = {.temperature = 0.0f, .top_p = 1.0f};
    for (int i = 0; i < K; i++) {
        OK(glm_decode_batch_each(&s, &last, 1, lg + (size_t)i * V, &g, &tok[i]));
        last = tok[i];
    }
}

/* The prompt's first 2 BLK positions copied block by block from a into b
 * (which held another sequence), the rest evaluated by b in the pass shape
 * a used; one session given all of a's rows at once: both decode as a. */
static void copy_case(glm_model_t *m, int which, int t)
{
    int SV = glm_model_sample_vocab(m), V = glm_model_config(m)->vocab_size;
    uint64_t seed = 91 + (uint64_t)which * 7 + (uint64_t)t;
    int32_t p[NP], q[BLK];
    for (int i = 0; i < NP; i++)
        p[i] = (int32_t)(rts_rand(&seed) % (uint64_t)SV);
    for (int i = 0; i < BLK; i++)
        q[i] = (int32_t)(rts_rand(&seed) % (uint64_t)SV);
    glm_session_t *a = session(m, t), *b = session(m, t), *c = session(m, t);
    uint64_t per = glm_session_kv_bytes(a, 1);
    ck_assert_uint_gt(per, 0);
    ck_assert_uint_eq(glm_session_kv_bytes(a, BLK), per * BLK);
    ck_assert_uint_eq(glm_session_kv_bytes(a, 0), 0);
    /* a: two blocks, then the rest (all but the last token) */
    OK(glm_eval(a, p, BLK, 0, NULL));
    OK(glm_eval(a, p + BLK, BLK, 0, NULL));
    OK(glm_eval(a, p + 2 * BLK, NP - 1 - 2 * BLK, 0, NULL));
    size_t blk = (size_t)glm_session_kv_bytes(a, BLK),
           all = (size_t)glm_session_kv_bytes(a, NP - 1);
    unsigned char *x = malloc(2 * blk), *y = malloc(2 * blk), *w = malloc(2 * blk),
                  *z = malloc(all);
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(w);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_nonnull(z);
    OK(glm_session_kv_read(a, 0, BLK, x, blk));
    OK(glm_session_kv_read(a, BLK, BLK, x + blk, blk));
    OK(glm_session_kv_read(a, 0, 2 * BLK, w, 2 * blk)); /* the two blocks as one range */
    OK(glm_session_kv_read(a, 0, NP - 1, z, all));

    /* b held another sequence: the blocks overwrite it from position 0 */
    OK(glm_eval(b, q, BLK, 0, NULL));
    OK(glm_session_kv_write(b, 0, p, BLK, x, blk));
    OK(glm_session_kv_write(b, BLK, p + BLK, BLK, x + blk, blk));
    ck_assert_int_eq(glm_session_pos(b), 2 * BLK);
    OK(glm_session_kv_read(b, 0, 2 * BLK, y, 2 * blk));
    ck_assert_msg(!memcmp(w, y, 2 * blk), "rows read back differ from the rows written");
    OK(glm_eval(b, p + 2 * BLK, NP - 1 - 2 * BLK, 0, NULL));
    /* c: every row of a at once */
    OK(glm_session_kv_write(c, 0, p, NP - 1, z, all));
    ck_assert_int_eq(glm_session_pos(c), NP - 1);

    float *la = malloc((size_t)K * V * sizeof(float)), *lb = malloc((size_t)K * V * sizeof(float)),
          *lc = malloc((size_t)K * V * sizeof(float));
    ck_assert_ptr_nonnull(la);
    ck_assert_ptr_nonnull(lb);
    ck_assert_ptr_nonnull(lc);
    int32_t ta[K], tb[K], tc[K];
    decode(a, p[NP - 1], V, la, ta);
    decode(b, p[NP - 1], V, lb, tb);
    decode(c, p[NP - 1], V, lc, tc);
    ck_assert_msg(!memcmp(la, lb, (size_t)K * V * sizeof(float)) && !memcmp(ta, tb, sizeof(ta)),
                  "%s %s: the session given two blocks decodes differently", g_name[which],
                  glm_cache_type_name(t));
    ck_assert_msg(!memcmp(la, lc, (size_t)K * V * sizeof(float)) && !memcmp(ta, tc, sizeof(ta)),
                  "%s %s: the session given every row decodes differently", g_name[which],
                  glm_cache_type_name(t));

    /* refusals change nothing */
    int pos = glm_session_pos(b);
    ck_assert_int_eq(glm_session_kv_read(b, pos - 1, 2, x, 2 * blk), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "outside"), "%s", tx_last_error());
    ck_assert_int_eq(glm_session_kv_read(b, 0, BLK, x, blk - 1), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "bytes"), "%s", tx_last_error());
    ck_assert_int_eq(glm_session_kv_write(b, pos + 1, p, BLK, x, blk), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "gap"), "%s", tx_last_error());
    ck_assert_int_lt(64 - pos + 1, NP); /* past the context: z holds enough rows */
    ck_assert_int_eq(glm_session_kv_write(b, pos, p, 64 - pos + 1, z, all), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "outside"), "%s", tx_last_error());
    int32_t bad[BLK];
    memcpy(bad, p, sizeof(bad));
    bad[3] = V;
    ck_assert_int_eq(glm_session_kv_write(b, 0, bad, BLK, x, blk), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "vocabulary"), "%s", tx_last_error());
    ck_assert_int_eq(glm_session_kv_write(b, 0, p, BLK, x, blk - 1), TX_EINVAL);
    ck_assert_int_eq(glm_session_kv_write(b, 0, NULL, BLK, x, blk), TX_EINVAL);
    ck_assert_int_eq(glm_session_pos(b), pos);
    printf("[session-kv] %s, cache %s: %llu bytes a position; rows copied in blocks of %d and "
           "at once: %d greedy steps with the source's logits bit for bit\n",
           g_name[which], glm_cache_type_name(t), (unsigned long long)per, BLK, K);
    free(la);
    free(lb);
    free(lc);
    free(x);
    free(y);
    free(w);
    free(z);
    glm_session_free(a);
    glm_session_free(b);
    glm_session_free(c);
}

static void every_type(int which)
{
    tx_device_t *dev = NULL;
    OK(tx_device_open(rts_spec, &dev));
    glm_model_t *m = NULL;
    OK(glm_model_load(dev, g_smd[which], NULL, &m));
    const int types[] = {GLM_CACHE_DEFAULT, GLM_CACHE_F32,  GLM_CACHE_F16,
                         GLM_CACHE_BF16,    GLM_CACHE_Q8_0, GLM_CACHE_Q4_0};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        copy_case(m, which, types[i]);
    OK(glm_model_free(m));
    tx_device_close(dev);
}

START_TEST(test_kv_glm5)
{
    every_type(0);
}
END_TEST

START_TEST(test_kv_deepseek3)
{
    every_type(1);
}
END_TEST

START_TEST(test_kv_glm4)
{
    every_type(2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("session_kv");
    TCase *tc = tcase_create("session_kv");
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_kv_glm5);
    tcase_add_test(tc, test_kv_deepseek3);
    tcase_add_test(tc, test_kv_glm4);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
