/* SPDX-License-Identifier: MIT */
/*
 * The article's precision API on a TX8: set_layer_precision() semantics,
 * plans, the device's MAC counters following the plan, precision changes
 * in the middle of a session (weights and KV cache converted on the
 * device), and the numerical acceptance rule: 100 random inputs, cosine of
 * the logits against the FP32 reference >= 0.99 for the golden plan, both
 * architectures (INT8 MLP alone and FP16 alone are reported).
 *
 * Models: glm-synth's tiny preset (3 layers, 8 routed experts, top-2,
 * index_topk 8) with a 512-token vocabulary, BF16 as checkpoints ship, so
 * every plan's precisions are made on the device. The report also gives
 * the rate at which the device's discrete decisions (routed experts, DSA
 * key selection) differ from the reference's.
 *
 * Backend: $TX_DEVICE if set, else a tx8-emu started for this program.
 */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm.h>
#include <tx/tx.h>

#include "test_runtime_synth.h"
#include "tx_test_main.h"

enum { T5, T4, TD3, N_MODELS };
static char g_smd[N_MODELS][256];
static bool g_ready;

/* Once for both test cases (the emulator and the packages); main() ends
 * them after the run. */
static void fixture_setup(void)
{
    if (g_ready)
        return;
    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    const char *d = rts_tmpdir();
    enum glm_arch arch[N_MODELS] = {GLM_ARCH_GLM_MOE_DSA, GLM_ARCH_GLM4_MOE, GLM_ARCH_DEEPSEEK_V3};
    for (int i = 0; i < N_MODELS; i++) {
        char ck[300];
        snprintf(ck, sizeof(ck), "%s/ck%d", d, i);
        snprintf(g_smd[i], sizeof(g_smd[i]), "%s/m%d.smd", d, i);
        /* BF16 as the checkpoints ship: the plan's precisions are made on
         * the device */
        if (rts_write_checkpoint(ck, arch[i], NULL) || rts_export(ck, g_smd[i], "bf16"))
            ck_abort_msg("cannot make package %d", i);
    }
    g_ready = true;
}

static tx_device_t *open_dev(void)
{
    tx_device_t *dev = NULL;
    OK(tx_device_open(rts_spec, &dev));
    return dev;
}

/* ---- the API -------------------------------------------------------------- */

START_TEST(test_api)
{
    tx_device_t *dev = open_dev();
    /* the default plan is the golden configuration */
    ck_assert_int_eq(get_layer_precision(dev, GLM_EMBEDDING), INT8_MIXED);
    ck_assert_int_eq(get_layer_precision(dev, GLM_ATTENTION), FP16);
    ck_assert_int_eq(get_layer_precision(dev, GLM_MLP), INT8_MIXED);
    ck_assert_int_eq(get_layer_precision(dev, GLM_EXPERT), INT8_MIXED);
    ck_assert_int_eq(get_layer_precision(dev, GLM_NORM), FP32);
    ck_assert_int_eq(get_layer_precision(dev, GLM_OUTPUT), FP32);

    /* the article's snippet */
    glm_layer_config_t cfg;
    cfg.layer_type = GLM_MLP;
    cfg.precision = INT8_MIXED;
    OK(set_layer_precision(dev, cfg));
    cfg.layer_type = GLM_ATTENTION;
    cfg.precision = BF16;
    OK(set_layer_precision(dev, cfg));
    ck_assert_int_eq(get_layer_precision(dev, GLM_ATTENTION), BF16);

    /* bad input */
    cfg.layer_type = (glm_layer_type_t)6;
    ck_assert_int_eq(set_layer_precision(dev, cfg), TX_EINVAL);
    cfg.layer_type = (glm_layer_type_t)-1;
    ck_assert_int_eq(set_layer_precision(dev, cfg), TX_EINVAL);
    cfg.layer_type = GLM_MLP;
    cfg.precision = (glm_precision_t)GLM_PRECISION_COUNT; /* 4 is FP8 since issue 38 */
    ck_assert_int_eq(set_layer_precision(dev, cfg), TX_EINVAL);
    cfg.layer_type = GLM_NORM;
    cfg.precision = INT8_MIXED;
    ck_assert_int_eq(set_layer_precision(dev, cfg), TX_ENOTSUP);
    ck_assert(tx_last_error()[0]);
    cfg.precision = FP16;
    ck_assert_int_eq(set_layer_precision(NULL, cfg), TX_EINVAL);
    ck_assert_int_eq(get_layer_precision(dev, GLM_NORM), FP32);

    /* plans belong to the device handle */
    tx_device_t *dev2 = open_dev();
    ck_assert_int_eq(get_layer_precision(dev2, GLM_ATTENTION), FP16);
    tx_device_close(dev2);
    tx_device_close(dev);
    ck_assert_int_eq(set_layer_precision(dev, cfg), TX_EINVAL); /* closed handle */
}
END_TEST

START_TEST(test_plan_parse)
{
    glm_precision_plan_t p, g;
    glm_plan_golden(&g);
    p = g;
    OK(glm_plan_parse("mlp=fp16, attention = BF16", &p));
    ck_assert_int_eq(p.precision[GLM_MLP], FP16);
    ck_assert_int_eq(p.precision[GLM_ATTENTION], BF16);
    ck_assert_int_eq(p.precision[GLM_EXPERT], INT8_MIXED);
    OK(glm_plan_parse("fp32", &p));
    for (int i = 0; i < GLM_LAYER_TYPE_COUNT; i++)
        ck_assert_int_eq(p.precision[i], FP32);
    OK(glm_plan_parse("int8", &p));
    ck_assert_int_eq(p.precision[GLM_NORM], FP32);
    ck_assert_int_eq(p.precision[GLM_OUTPUT], INT8_MIXED);
    OK(glm_plan_parse("golden,output=fp16,experts=INT8_MIXED", &p));
    ck_assert_int_eq(p.precision[GLM_OUTPUT], FP16);
    glm_precision_plan_t before = p;
    ck_assert_int_eq(glm_plan_parse("mlp=fp4", &p), TX_EINVAL);
    ck_assert_int_eq(glm_plan_parse("gpu=fp16", &p), TX_EINVAL);
    ck_assert_int_eq(glm_plan_parse("norm=int8", &p), TX_ENOTSUP);
    ck_assert_int_eq(glm_plan_parse("bogus", &p), TX_EINVAL);
    ck_assert_mem_eq(&p, &before, sizeof(p));
    char buf[200];
    glm_plan_format(&g, buf, sizeof(buf));
    ck_assert_str_eq(buf, "embedding=INT8_MIXED,attention=FP16,mlp=INT8_MIXED,expert=INT8_MIXED,"
                          "norm=FP32,output=FP32");
    glm_precision_plan_t q;
    glm_plan_uniform(&q, FP32);
    OK(glm_plan_parse(buf, &q));
    ck_assert_mem_eq(&q, &g, sizeof(q));
}
END_TEST

/* ---- the plan decides what the device executes ----------------------------- */

static void macs(tx_device_t *dev, uint64_t out[TX8_DTYPE_COUNT])
{
    struct tx_device_counters c;
    OK(tx_device_counters(dev, &c));
    memcpy(out, c.dev.macs, sizeof(c.dev.macs));
}

static void pass(glm_model_t *m, uint64_t delta[TX8_DTYPE_COUNT])
{
    uint64_t a[TX8_DTYPE_COUNT], b[TX8_DTYPE_COUNT];
    struct glm_session_options o = {.n_ctx = 16};
    glm_session_t *s;
    OK(glm_session_create(m, &o, &s));
    int32_t ids[4] = {3, 1, 4, 1};
    float *l = malloc(sizeof(float) * (size_t)glm_model_config(m)->vocab_size);
    OK(glm_eval(s, ids, 1, 0, l)); /* conversions happen here, outside the window */
    OK(glm_session_reset(s));
    macs(glm_model_device(m), a);
    OK(glm_eval(s, ids, 4, 0, l)); /* with the lm_head (logits of the last token) */
    macs(glm_model_device(m), b);
    free(l);
    for (int i = 0; i < TX8_DTYPE_COUNT; i++)
        delta[i] = b[i] - a[i];
    glm_session_free(s);
}

START_TEST(test_counters_follow_plan)
{
    tx_device_t *dev = open_dev();
    glm_precision_plan_t p;
    glm_plan_uniform(&p, FP32);
    OK(glm_plan_set(dev, &p));
    glm_model_t *m;
    OK(glm_model_load(dev, g_smd[T5], NULL, &m));
    uint64_t d[5][TX8_DTYPE_COUNT];
    pass(m, d[0]);
    /* MLP and experts to INT8: their MACs move to the I8 counter */
    glm_layer_config_t cfg = {GLM_MLP, INT8_MIXED};
    OK(set_layer_precision(dev, cfg));
    cfg.layer_type = GLM_EXPERT;
    OK(set_layer_precision(dev, cfg));
    pass(m, d[1]);
    /* attention to FP16 */
    cfg.layer_type = GLM_ATTENTION;
    cfg.precision = FP16;
    OK(set_layer_precision(dev, cfg));
    pass(m, d[2]);
    /* output to BF16 */
    cfg.layer_type = GLM_OUTPUT;
    cfg.precision = BF16;
    OK(set_layer_precision(dev, cfg));
    pass(m, d[3]);
    /* and back to FP32 everywhere */
    OK(glm_plan_set(dev, &p));
    pass(m, d[4]);
    static const char *step[] = {"FP32", "+MLP/experts INT8", "+attention FP16", "+output BF16",
                                 "FP32 again"};
    for (int i = 0; i < 5; i++)
        printf("[precision] %-18s MACs f32 %9llu f16 %9llu bf16 %9llu i8 %9llu\n", step[i],
               (unsigned long long)d[i][TX8_DTYPE_F32], (unsigned long long)d[i][TX8_DTYPE_F16],
               (unsigned long long)d[i][TX8_DTYPE_BF16], (unsigned long long)d[i][TX8_DTYPE_I8]);
    uint64_t tot0 = 0, tot1 = 0;
    for (int k = 0; k < TX8_DTYPE_COUNT; k++) {
        tot0 += d[0][k];
        tot1 += d[1][k];
    }
    ck_assert(d[0][TX8_DTYPE_I8] == 0 && d[0][TX8_DTYPE_F16] == 0 && d[0][TX8_DTYPE_BF16] == 0);
    ck_assert(d[1][TX8_DTYPE_I8] > 0);
    ck_assert(d[1][TX8_DTYPE_F32] < d[0][TX8_DTYPE_F32]);
    ck_assert_uint_eq(tot0, tot1); /* the same work, another datapath */
    ck_assert(d[2][TX8_DTYPE_F16] > 0 && d[2][TX8_DTYPE_F32] < d[1][TX8_DTYPE_F32]);
    ck_assert(d[3][TX8_DTYPE_BF16] > 0 && d[3][TX8_DTYPE_F32] < d[2][TX8_DTYPE_F32]);
    ck_assert_mem_eq(d[4], d[0], sizeof(d[0]));
    struct glm_model_info info;
    OK(glm_model_info(m, &info));
    printf("[precision] per-precision weight copies held: %llu bytes (stored %llu)\n",
           (unsigned long long)info.converted_bytes, (unsigned long long)info.weights_bytes);
    OK(glm_model_trim(m));
    OK(glm_model_info(m, &info));
    printf("[precision] after glm_model_trim under the FP32 plan: %llu bytes\n",
           (unsigned long long)info.converted_bytes);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* ---- changing precision in the middle of a session ------------------------ */

START_TEST(test_switch_mid_session)
{
    tx_device_t *dev = open_dev();
    glm_precision_plan_t p32, p16;
    glm_plan_uniform(&p32, FP32);
    glm_plan_uniform(&p16, FP32);
    p16.precision[GLM_ATTENTION] = FP16;
    OK(glm_plan_set(dev, &p32));
    glm_model_t *m;
    OK(glm_model_load(dev, g_smd[T5], NULL, &m));
    int V = glm_model_config(m)->vocab_size;
    int32_t ids[14];
    uint64_t seed = 5;
    for (int i = 0; i < 14; i++)
        ids[i] = (int32_t)(rts_rand(&seed) % (uint64_t)V);
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    struct glm_session_options o = {.n_ctx = 32};
    glm_session_t *s;
    OK(glm_session_create(m, &o, &s));
    /* 10 tokens in FP32 (KV cache F32), then attention FP16: the cache is
     * converted to F16 on the device and decoding continues */
    OK(glm_eval(s, ids, 10, 0, NULL));
    OK(glm_plan_set(dev, &p16));
    OK(glm_eval(s, ids + 10, 4, 0, a));
    /* the same, FP16 attention from the start */
    OK(glm_session_reset(s));
    OK(glm_eval(s, ids, 14, 0, b));
    double e = rts_rel_err(a, b, (size_t)V);
    printf("[precision] attention FP32 -> FP16 after 10 tokens vs FP16 throughout: max relative "
           "error %.3e\n",
           e);
    ck_assert_msg(e < 5e-3, "switching precision mid-session: %g", e);
    glm_session_free(s);
    OK(glm_model_free(m));
    free(a);
    free(b);
    tx_device_close(dev);
}
END_TEST

/* ---- acceptance: cosine against the FP32 reference ------------------------ */

static struct glm_validate_report *validate(int which, const char *plan, int n_inputs, int n_tokens,
                                            const char *what)
{
    tx_device_t *dev = open_dev();
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_parse(plan, &p));
    OK(glm_plan_set(dev, &p));
    glm_model_t *m;
    OK(glm_model_load(dev, g_smd[which], NULL, &m));
    struct glm_validate_options vo;
    memset(&vo, 0, sizeof(vo));
    vo.n_inputs = n_inputs;
    vo.n_tokens = n_tokens;
    vo.seed = 2024;
    /* the device's arithmetic against the package's own weights (the
     * original-model check is tests/unit/test_validate.c) */
    vo.use_original = GLM_VALIDATE_ORIGINAL_NONE;
    struct glm_validate_report *r;
    OK(glm_validate(m, &vo, &r));
    const struct glm_config *c = glm_model_config(m);
    double rm = 0, dm = 0;
    for (int l = 0; l < r->n_layers; l++) {
        if (r->layers[l].route_mismatch > rm)
            rm = r->layers[l].route_mismatch;
        if (r->layers[l].dsa_mismatch > dm)
            dm = r->layers[l].dsa_mismatch;
    }
    printf("[precision] %-8s %-22s %s top-%d/%d: %d inputs x %d tokens: logits cosine min %.6f "
           "mean %.6f; worst layer route mismatch %.2f%%, DSA mismatch %.2f%%\n",
           glm_arch_name(c->arch), plan, what, c->num_experts_per_tok, c->n_routed_experts,
           r->n_inputs, r->n_tokens, r->min_cosine, r->mean_cosine, 100 * rm, 100 * dm);
    OK(glm_model_free(m));
    tx_device_close(dev);
    return r;
}

static void golden(int which)
{
    /* 8 tokens (= index_topk: the selection is every key) */
    struct glm_validate_report *r = validate(which, "golden", 100, 8, "golden");
    ck_assert_int_eq(r->n_inputs, 100);
    ck_assert_msg(r->passed && r->min_cosine >= 0.99, "golden plan: min cosine %f < 0.99",
                  r->min_cosine);
    glm_validate_report_free(r);
    /* 12 tokens: the DSA indexer selects 8 of up to 12 keys */
    r = validate(which, "golden", 100, 12, "golden");
    ck_assert_msg(r->min_cosine >= 0.99, "golden plan, 12 tokens: min cosine %f < 0.99",
                  r->min_cosine);
    glm_validate_report_free(r);
    /* INT8 MLP alone, FP16 alone, BF16: reported */
    r = validate(which, "fp32,mlp=int8,expert=int8", 100, 8, "INT8 MLP");
    glm_validate_report_free(r);
    r = validate(which, "fp16", 100, 8, "FP16");
    ck_assert_msg(r->min_cosine >= 0.99, "FP16 plan: min cosine %f", r->min_cosine);
    glm_validate_report_free(r);
    r = validate(which, "bf16", 100, 8, "BF16");
    glm_validate_report_free(r);
    /* FP32: the reference itself */
    r = validate(which, "fp32", 20, 12, "FP32");
    ck_assert(r->min_cosine > 0.99999);
    ck_assert(r->max_rel_err < 1e-4);
    glm_validate_report_free(r);
}

START_TEST(test_golden_glm5)
{
    golden(T5);
}
END_TEST

START_TEST(test_golden_glm4)
{
    golden(T4);
}
END_TEST

/* DeepSeek-V3 (MLA, YaRN, group-limited routing): the same thresholds */
START_TEST(test_golden_dsv3)
{
    golden(TD3);
}
END_TEST

static Suite *precision_suite(void)
{
    Suite *s = suite_create("precision");
    TCase *tc = tcase_create("plan");
    tcase_add_unchecked_fixture(tc, fixture_setup, NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_api);
    tcase_add_test(tc, test_plan_parse);
    tcase_add_test(tc, test_counters_follow_plan);
    tcase_add_test(tc, test_switch_mid_session);
    suite_add_tcase(s, tc);
    /* The acceptance rule is the device's arithmetic (tx8-emu's) against
     * the reference: 520 validation inputs per architecture, which the
     * VM suite leaves to this program's own emulator (CK_RUN_CASE=plan
     * there; docs/devbox.md says why). */
    TCase *acc = tcase_create("acceptance");
    tcase_add_unchecked_fixture(acc, fixture_setup, NULL);
    tcase_set_timeout(acc, 120);
    tcase_add_test(acc, test_golden_glm5);
    tcase_add_test(acc, test_golden_glm4);
    tcase_add_test(acc, test_golden_dsv3);
    suite_add_tcase(s, acc);
    return s;
}

int main(void)
{
    int rc = tx_test_run(precision_suite());
    rts_device_teardown();
    rts_cleanup();
    return rc;
}
