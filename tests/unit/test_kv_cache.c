/* SPDX-License-Identifier: MIT */
/*
 * Issue 11: the absorbed-MLA latent cache and the KV-cache types (f32, f16,
 * bf16, q8_0, q4_0; the DSA indexer's q8_0 key cache) on tx8-emu, against
 * the FP32 reference (expanded MLA): the FP32 plan with an f32 cache stays
 * within 1e-4 (glm_moe_dsa with the indexer selecting, deepseek_v3,
 * glm4_moe), the compressed caches within their bounds; decoding after a
 * prefill equals one prefill with a compressed cache; KV bytes shrink;
 * bad cache types are refused with a message naming the cause.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm.h>
#include <tx/tx.h>

#include "test_runtime_synth.h"
#include "tx_test_main.h"

enum { K5, K4, KD3, K5_TINY, N_MODELS };
static char g_smd[N_MODELS][256];

static void fixture_setup(void)
{
    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    const char *d = rts_tmpdir();
    struct rts_mods kv32 = {.kv32 = 1, .seed = 5};
    const struct {
        enum glm_arch arch;
        const struct rts_mods *md;
    } spec[N_MODELS] = {{GLM_ARCH_GLM_MOE_DSA, &kv32},
                        {GLM_ARCH_GLM4_MOE, &kv32},
                        {GLM_ARCH_DEEPSEEK_V3, &kv32},
                        {GLM_ARCH_GLM_MOE_DSA, NULL}};
    for (int i = 0; i < N_MODELS; i++) {
        char ck[300];
        snprintf(ck, sizeof(ck), "%s/ck%d", d, i);
        snprintf(g_smd[i], sizeof(g_smd[i]), "%s/m%d.smd", d, i);
        if (rts_write_checkpoint(ck, spec[i].arch, spec[i].md) || rts_export(ck, g_smd[i], "none"))
            ck_abort_msg("cannot make model %d", i);
    }
}

static void fixture_teardown(void)
{
    rts_device_teardown();
    rts_cleanup();
}

static glm_model_t *load(tx_device_t **dev, int which, const char *plan)
{
    OK(tx_device_open(rts_spec, dev));
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_parse(plan, &p));
    OK(glm_plan_set(*dev, &p));
    glm_model_t *m = NULL;
    OK(glm_model_load(*dev, g_smd[which], NULL, &m));
    return m;
}

static double cosine(const float *a, const float *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb + 1e-300);
}

static const char *const mname[N_MODELS] = {"glm_moe_dsa", "glm4_moe", "deepseek_v3",
                                            "glm_moe_dsa tiny"};

/* the FP32 plan with cache type t vs the FP32 reference: 24 tokens (more
 * than index_topk 8: the indexer selects) */
static void vs_reference(int which, glm_cache_type_t t, double max_rel, double min_cos)
{
    tx_device_t *dev;
    glm_model_t *m = load(&dev, which, "fp32");
    const struct glm_config *c = glm_model_config(m);
    const int n = 24;
    int V = c->vocab_size;
    int32_t ids[24];
    uint64_t seed = 77 + (uint64_t)which;
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(rts_rand(&seed) % (uint64_t)V);
    float *dl = malloc(sizeof(float) * (size_t)n * V), *rl = malloc(sizeof(float) * (size_t)n * V);
    ck_assert(dl && rl);
    struct glm_session_options o = {.n_ctx = 64, .n_batch = 7, .cache_type_k = t, .cache_type_v = t};
    glm_session_t *s = NULL;
    OK(glm_session_create(m, &o, &s));
    OK(glm_eval(s, ids, n, GLM_EVAL_ALL_LOGITS, dl));
    struct tx_smd *smd;
    struct glm_ref_model *ref;
    struct glm_config rc;
    ck_assert_int_eq(rts_ref_open(g_smd[which], &smd, &ref, &rc), 0);
    ck_assert_int_eq(rts_ref_logits(ref, ids, n, rl), 0);
    double e = rts_rel_err(dl, rl, (size_t)n * V), cs = cosine(dl, rl, (size_t)n * V);
    printf("[kv_cache] %s FP32 plan, cache %s, passes of 7 vs the FP32 reference: max relative "
           "error %.3e, cosine %.6f\n",
           mname[which], glm_cache_type_name(t), e, cs);
    ck_assert_msg(e <= max_rel, "%s %s: max relative error %g > %g", mname[which],
                  glm_cache_type_name(t), e, max_rel);
    ck_assert_msg(cs >= min_cos, "%s %s: cosine %g < %g", mname[which], glm_cache_type_name(t), cs,
                  min_cos);
    glm_ref_model_destroy(ref);
    tx_smd_close(smd);
    glm_session_free(s);
    OK(glm_model_free(m));
    free(dl);
    free(rl);
    tx_device_close(dev);
}

/* both MLA forms (TX_MLA_FORM): the first pass of 7 runs expanded by
 * default, the later ones absorbed; here every pass in one form */
START_TEST(test_mla_forms_vs_reference)
{
    static const char *const form[2] = {"absorbed", "expanded"};
    for (int f = 0; f < 2; f++) {
        setenv("TX_MLA_FORM", form[f], 1);
        printf("[kv_cache] TX_MLA_FORM=%s\n", form[f]);
        for (int w = K5; w <= KD3; w += 2) { /* glm_moe_dsa (selecting), deepseek_v3 */
            vs_reference(w, GLM_CACHE_F32, 1e-4, 0.999999);
            vs_reference(w, GLM_CACHE_Q8_0, 5e-2, 0.999);
        }
    }
    unsetenv("TX_MLA_FORM");
}
END_TEST

START_TEST(test_cache_types_vs_reference)
{
    for (int w = K5; w <= KD3; w++) {
        vs_reference(w, GLM_CACHE_F32, 1e-4, 0.999999);
        vs_reference(w, GLM_CACHE_F16, 2e-2, 0.9999);
        vs_reference(w, GLM_CACHE_BF16, 5e-2, 0.999);
        vs_reference(w, GLM_CACHE_Q8_0, 5e-2, 0.999);
        vs_reference(w, GLM_CACHE_Q4_0, 0.5, 0.98);
    }
}
END_TEST

/* decoding after a 5-token prefill == one 20-token prefill, compressed cache */
START_TEST(test_decode_equals_prefill_q4)
{
    for (int w = K5; w <= K4; w++) {
        tx_device_t *dev;
        glm_model_t *m = load(&dev, w, "fp32");
        int V = glm_model_config(m)->vocab_size;
        const int n = 20, k = 5;
        int32_t ids[20];
        uint64_t seed = 3;
        for (int i = 0; i < n; i++)
            ids[i] = (int32_t)(rts_rand(&seed) % (uint64_t)V);
        OK(glm_model_set_cache_types(m, GLM_CACHE_Q4_0, GLM_CACHE_Q8_0));
        float *a = malloc(sizeof(float) * (size_t)n * V), *b = malloc(sizeof(float) * (size_t)V);
        struct glm_session_options o = {.n_ctx = 32};
        glm_session_t *s = NULL;
        OK(glm_session_create(m, &o, &s));
        OK(glm_eval(s, ids, n, GLM_EVAL_ALL_LOGITS, a));
        OK(glm_session_reset(s));
        OK(glm_eval(s, ids, k, 0, b));
        double worst = 0;
        for (int i = k; i < n; i++) {
            OK(glm_eval(s, &ids[i], 1, 0, b));
            double e = rts_rel_err(b, a + (size_t)i * V, (size_t)V);
            worst = e > worst ? e : worst;
        }
        printf("[kv_cache] %s q4_0 K / q8_0 V cache: decode after a %d-token prefill vs one "
               "%d-token prefill: max relative error %.3e\n",
               mname[w], k, n, worst);
        ck_assert(worst <= 1e-4);
        glm_session_free(s);
        OK(glm_model_free(m));
        free(a);
        free(b);
        tx_device_close(dev);
    }
}
END_TEST

static uint64_t kv_bytes(glm_model_t *m, glm_cache_type_t t, int n_ctx)
{
    struct glm_session_options o = {.n_ctx = n_ctx, .cache_type_k = t, .cache_type_v = t};
    glm_session_t *s = NULL;
    OK(glm_session_create(m, &o, &s));
    struct glm_model_info mi;
    OK(glm_model_info(m, &mi));
    glm_session_free(s);
    return mi.kv_bytes;
}

START_TEST(test_kv_bytes_shrink)
{
    for (int w = K5; w <= K4; w++) {
        tx_device_t *dev;
        glm_model_t *m = load(&dev, w, "golden");
        uint64_t f32 = kv_bytes(m, GLM_CACHE_F32, 1024), f16 = kv_bytes(m, GLM_CACHE_F16, 1024),
                 q8 = kv_bytes(m, GLM_CACHE_Q8_0, 1024), q4 = kv_bytes(m, GLM_CACHE_Q4_0, 1024);
        printf("[kv_cache] %s KV cache of 1024 positions: f32 %llu, f16 %llu, q8_0 %llu, q4_0 "
               "%llu bytes\n",
               mname[w], (unsigned long long)f32, (unsigned long long)f16,
               (unsigned long long)q8, (unsigned long long)q4);
        ck_assert(f16 < f32 && q8 < f16 && q4 < q8);
        ck_assert(q4 * 2 < f16); /* the q8_0 indexer keys stay */
        OK(glm_model_free(m));
        tx_device_close(dev);
    }
}
END_TEST

START_TEST(test_bad_cache_types)
{
    tx_device_t *dev;
    glm_model_t *m = load(&dev, K5_TINY, "golden");
    /* the tiny GLM-5 latent is 32 + 16: no 32-element blocks */
    struct glm_session_options o = {.n_ctx = 32, .cache_type_k = GLM_CACHE_Q4_0};
    glm_session_t *s = NULL;
    int rc = glm_session_create(m, &o, &s);
    printf("[kv_cache] q4_0 on a latent of 48: %s\n", tx_last_error());
    ck_assert_int_eq(rc, TX_ENOTSUP);
    ck_assert(strstr(tx_last_error(), "multiple of 32"));
    ck_assert_int_eq(glm_model_set_cache_types(m, GLM_CACHE_Q8_0, 0), TX_ENOTSUP);
    o.cache_type_k = 99;
    ck_assert_int_eq(glm_session_create(m, &o, &s), TX_EINVAL);
    ck_assert_int_eq(glm_model_set_cache_types(m, (glm_cache_type_t)-1, 0), TX_EINVAL);
    /* f16 / bf16 / f32 are fine there */
    o.cache_type_k = GLM_CACHE_BF16;
    OK(glm_session_create(m, &o, &s));
    glm_session_free(s);
    OK(glm_model_free(m));
    tx_device_close(dev);

    ck_assert_int_eq(glm_cache_type_parse("q8_0"), GLM_CACHE_Q8_0);
    ck_assert_int_eq(glm_cache_type_parse("INT8"), GLM_CACHE_Q8_0);
    ck_assert_int_eq(glm_cache_type_parse("q4_0"), GLM_CACHE_Q4_0);
    ck_assert_int_eq(glm_cache_type_parse("f16"), GLM_CACHE_F16);
    ck_assert_int_eq(glm_cache_type_parse("q5_1"), -1);
    ck_assert_int_eq(glm_cache_type_parse(NULL), -1);
    ck_assert_str_eq(glm_cache_type_name(GLM_CACHE_Q4_0), "q4_0");
    ck_assert_str_eq(glm_cache_type_name((glm_cache_type_t)42), "?");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("kv_cache");
    TCase *tc = tcase_create("kv_cache");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_add_test(tc, test_cache_types_vs_reference);
    tcase_add_test(tc, test_mla_forms_vs_reference);
    tcase_add_test(tc, test_decode_equals_prefill_q4);
    tcase_add_test(tc, test_kv_bytes_shrink);
    tcase_add_test(tc, test_bad_cache_types);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
