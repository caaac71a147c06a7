/* SPDX-License-Identifier: MIT */
/*
 * FP8 packages on the device (issue 38, items 2 and 3), for GLM-4.5,
 * GLM-5.1, DeepSeek-V3 and Qwen3-MoE: glm-synth --fp8 checkpoints exported
 * with --quant fp8 (weights stored bit for bit, scales exactly) run with
 * the "fp8" plan (FP8 weights, f32 activations) and match the float64
 * host reference on the exactly dequantised original (glm_validate picks
 * it for an FP8 original) to cosine >= 0.99999 (the FP32 plan's bar); the golden plan on the same
 * checkpoint reports its error against the dequantised original; the plan vocabulary refuses FP8
 * where the device has no FP8 form, and a stored FP8 tensor is never silently converted.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm.h>
#include <tx/tx.h>
#include <tx-internal/tx_synth.h>

#include "test_runtime_synth.h"
#include "tx_test_emu.h"
#include "tx_test_main.h"

enum { N_ARCH = 4 };
static const enum glm_arch archs[N_ARCH] = {GLM_ARCH_GLM4_MOE, GLM_ARCH_GLM_MOE_DSA,
                                            GLM_ARCH_DEEPSEEK_V3, GLM_ARCH_QWEN3_MOE};
static char g_ck[N_ARCH][300], g_fp8[N_ARCH][300], g_gold[N_ARCH][300];
static struct tx_test_emu g_emu2; /* the second device of the expert-parallel test */

static void fixture_setup(void)
{
    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    if (tx_test_emu_start(&g_emu2, "256M", "--cores", "2", NULL) != 0)
        ck_abort_msg("cannot start the second tx8-emu");
    const char *d = rts_tmpdir();
    for (int i = 0; i < N_ARCH; i++) {
        snprintf(g_ck[i], sizeof(g_ck[i]), "%s/ck%d", d, i);
        snprintf(g_fp8[i], sizeof(g_fp8[i]), "%s/fp8-%d.smd", d, i);
        snprintf(g_gold[i], sizeof(g_gold[i]), "%s/golden-%d.smd", d, i);
        struct tx_synth_opts o = {.arch = archs[i],
                                  .preset = TX_SYNTH_TINY,
                                  .seed = 38,
                                  .vocab_size = 256,
                                  .threads = 1,
                                  .fp8 = 1};
        char err[512], tp[400];
        if (tx_synth_write(g_ck[i], &o, err, sizeof(err)))
            ck_abort_msg("glm-synth --fp8: %s", err);
        snprintf(tp, sizeof(tp), "%s/tokenizer.json", g_ck[i]);
        if (rts_write_tokenizer(tp) || rts_export(g_ck[i], g_fp8[i], "fp8") ||
            rts_export(g_ck[i], g_gold[i], "int8"))
            ck_abort_msg("cannot make the packages of arch %d", i);
    }
}

static void fixture_teardown(void)
{
    tx_test_emu_stop(&g_emu2);
    rts_device_teardown();
    rts_cleanup();
}

static tx_device_t *open_with_plan(const char *spec, const char *plan)
{
    tx_device_t *dev;
    OK(tx_device_open(spec, &dev));
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_parse(plan, &p));
    OK(glm_plan_set(dev, &p));
    return dev;
}

/* glm_validate of a loaded model (freed, its devices closed; its expert
 * cache's figures then in *cs when not NULL) */
static struct glm_validate_report *validate_model(glm_model_t *m, tx_device_t **devs, int ndev,
                                                  struct glm_expert_cache_stats *cs)
{
    struct glm_validate_options vo;
    memset(&vo, 0, sizeof(vo));
    vo.n_inputs = 20;
    vo.n_tokens = 8;
    vo.seed = 38;
    struct glm_validate_report *r;
    OK(glm_validate(m, &vo, &r));
    if (cs)
        OK(glm_model_expert_cache_stats(m, cs));
    OK(glm_model_free(m));
    for (int i = 0; i < ndev; i++)
        tx_device_close(devs[i]);
    ck_assert_msg(r->original == 1, "original not used: %s", r->original_note);
    ck_assert_int_eq(r->n_nonfinite, 0);
    return r;
}

static struct glm_validate_report *validate(const char *smd, const char *plan)
{
    tx_device_t *dev = open_with_plan(rts_spec, plan);
    glm_model_t *m;
    OK(glm_model_load(dev, smd, NULL, &m));
    return validate_model(m, &dev, 1, NULL);
}

/* item 5: FP8 experts in the expert cache's slots (3 slots, fewer than a
 * layer's experts: misses and evictions), against the float64 reference */
START_TEST(test_fp8_expert_cache)
{
    tx_device_t *dev = open_with_plan(rts_spec, "fp8");
    struct glm_load_options lo = {.flags = GLM_LOAD_EXPERT_CACHE};
    glm_model_t *m;
    OK(glm_model_load(dev, g_fp8[_i], &lo, &m));
    struct glm_expert_cache_stats cs;
    OK(glm_model_expert_cache_stats(m, &cs));
    OK(glm_model_free(m));
    lo.expert_cache_bytes = 3 * cs.slot_bytes;
    OK(glm_model_load(dev, g_fp8[_i], &lo, &m));
    OK(glm_model_expert_cache_stats(m, &cs));
    ck_assert_uint_eq(cs.slots, 3);
    ck_assert_uint_lt(cs.slots, cs.experts);
    struct glm_validate_report *r = validate_model(m, &dev, 1, &cs);
    printf("[fp8] %-12s fp8 experts in 3 cache slots vs the float64 reference: cosine min %.7f, "
           "max relative error %.3g (%llu misses, %llu evictions)\n",
           glm_arch_name(archs[_i]), r->min_cosine, r->max_rel_err,
           (unsigned long long)cs.misses, (unsigned long long)cs.evictions);
    ck_assert_uint_gt(cs.misses, 0); /* the experts did go through the slots */
    ck_assert_uint_gt(cs.evictions, 0);
    ck_assert_int_eq(r->original_f64, 1);
    ck_assert_msg(r->min_cosine >= 0.99999, "min cosine %.7f", r->min_cosine);
    glm_validate_report_free(r);
}
END_TEST

/* item 5: one FP8 model on two devices (expert parallel), against the
 * float64 reference */
START_TEST(test_fp8_two_devices)
{
    tx_device_t *d[2] = {open_with_plan(rts_spec, "fp8"), open_with_plan(g_emu2.spec, "fp8")};
    glm_model_t *m;
    OK(glm_model_load_multi(d, 2, g_fp8[_i], NULL, &m));
    struct glm_ep_stats st;
    OK(glm_model_ep_stats(m, &st));
    ck_assert_int_eq(st.n_devices, 2);
    struct glm_validate_report *r = validate_model(m, d, 2, NULL);
    printf("[fp8] %-12s fp8 package on two devices vs the float64 reference: cosine min %.7f, "
           "max relative error %.3g\n",
           glm_arch_name(archs[_i]), r->min_cosine, r->max_rel_err);
    ck_assert_int_eq(r->original_f64, 1);
    ck_assert_msg(r->min_cosine >= 0.99999, "min cosine %.7f", r->min_cosine);
    glm_validate_report_free(r);
}
END_TEST

/* item 3: FP8 weights, f32 compute, against the float64 reference on the
 * exactly dequantised original */
START_TEST(test_fp8_exact)
{
    struct glm_validate_report *r = validate(g_fp8[_i], "fp8");
    ck_assert_msg(r->original_f64 == 1, "the original's reference is not float64: %s",
                  r->original_note ? r->original_note : "");
    ck_assert_msg(r->original_note && strstr(r->original_note, "float64"), "note: %s",
                  r->original_note ? r->original_note : "(none)");
    printf("[fp8] %-12s fp8 package (plan fp8) vs the float64 reference, 20 x 8 tokens: "
           "cosine min %.7f mean %.7f, max relative error %.3g; quantisation min %.7f\n",
           glm_arch_name(archs[_i]), r->min_cosine, r->mean_cosine, r->max_rel_err,
           r->quant_min_cosine);
    ck_assert_msg(r->min_cosine >= 0.99999, "min cosine %.7f", r->min_cosine);
    ck_assert_msg(r->max_rel_err < 1e-4, "max relative error %g", r->max_rel_err);
    /* no second rounding: the package's weights are the original's */
    ck_assert_msg(r->quant_min_cosine >= 0.9999999, "quantisation cosine %.8f",
                  r->quant_min_cosine);
    ck_assert(r->passed);
    glm_validate_report_free(r);
}
END_TEST

/* the golden plan applied to the FP8 checkpoint: its error is reported */
START_TEST(test_fp8_golden)
{
    struct glm_validate_report *r = validate(g_gold[_i], "golden");
    ck_assert_int_eq(r->original_f64, 1);
    printf("[fp8] %-12s golden package of the fp8 checkpoint vs the dequantised original: "
           "cosine min %.6f; quantisation min %.6f (blame %s)\n",
           glm_arch_name(archs[_i]), r->min_cosine, r->quant_min_cosine,
           r->quant_blame >= 0 ? glm_layer_type_name(r->quant_blame) : "-");
    ck_assert(r->quant_min_cosine < 0.999999); /* measured, not hidden */
    ck_assert_int_ge(r->quant_blame, 0);
    ck_assert_msg(r->passed && r->min_cosine >= 0.99, "min cosine %f", r->min_cosine);
    glm_validate_report_free(r);
}
END_TEST

START_TEST(test_fp8_plan_errors)
{
    tx_device_t *dev;
    OK(tx_device_open(rts_spec, &dev));
    glm_layer_config_t lc = {GLM_EXPERT, GLM_PRECISION_FP8};
    OK(set_layer_precision(dev, lc));
    ck_assert_int_eq(get_layer_precision(dev, GLM_EXPERT), GLM_PRECISION_FP8);
    lc = (glm_layer_config_t){GLM_NORM, GLM_PRECISION_FP8};
    ck_assert_int_eq(set_layer_precision(dev, lc), TX_ENOTSUP);
    lc = (glm_layer_config_t){GLM_EMBEDDING, GLM_PRECISION_FP8};
    ck_assert_int_eq(set_layer_precision(dev, lc), TX_ENOTSUP);
    ck_assert_msg(strstr(tx_last_error(), "embedding"), "%s", tx_last_error());
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_parse("experts=fp8", &p));
    ck_assert_int_eq(p.precision[GLM_EXPERT], GLM_PRECISION_FP8);
    ck_assert_int_eq(p.precision[GLM_MLP], GLM_PRECISION_INT8_MIXED);
    OK(glm_plan_parse("fp8", &p));
    ck_assert_int_eq(p.precision[GLM_ATTENTION], GLM_PRECISION_FP8);
    ck_assert_int_eq(p.precision[GLM_EMBEDDING], GLM_PRECISION_FP32);
    ck_assert_int_eq(p.precision[GLM_OUTPUT], GLM_PRECISION_FP32);
    ck_assert_str_eq(glm_precision_name(GLM_PRECISION_FP8), "FP8");
    tx_device_close(dev);
}
END_TEST

/* the FP8 package under other plans: its FP8 tensors are converted on the
 * host (dequantised exactly, then the device's CONVERT), so "fp8;golden"
 * can be compared on one package; and a BF16-stored package under the fp8
 * plan is quantised the Hugging Face way at load */
START_TEST(test_fp8_conversions)
{
    struct glm_validate_report *r = validate(g_fp8[_i], "golden");
    printf("[fp8] %-12s fp8 package under the golden plan (host conversion) vs the original: "
           "cosine min %.6f; quantisation min %.6f\n",
           glm_arch_name(archs[_i]), r->min_cosine, r->quant_min_cosine);
    ck_assert_msg(r->passed && r->min_cosine >= 0.99, "min cosine %f", r->min_cosine);
    glm_validate_report_free(r);
    r = validate(g_fp8[_i], "fp32");
    ck_assert_msg(r->min_cosine >= 0.99999, "fp32 copies of fp8: min cosine %.7f", r->min_cosine);
    glm_validate_report_free(r);
    /* the golden package (INT8 experts, FP16 attention) run as fp8: a
     * second quantisation, reported against the original */
    r = validate(g_gold[_i], "fp8");
    printf("[fp8] %-12s golden package under the fp8 plan (host FP8 quantisation): cosine min "
           "%.6f\n",
           glm_arch_name(archs[_i]), r->min_cosine);
    ck_assert_msg(r->passed && r->min_cosine >= 0.99, "min cosine %f", r->min_cosine);
    ck_assert(r->min_cosine < 0.999999);
    glm_validate_report_free(r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fp8_model");
    TCase *tc = tcase_create("device");
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_fp8_exact, 0, N_ARCH);
    tcase_add_loop_test(tc, test_fp8_golden, 0, N_ARCH);
    tcase_add_test(tc, test_fp8_plan_errors);
    tcase_add_loop_test(tc, test_fp8_expert_cache, 0, N_ARCH);
    tcase_add_loop_test(tc, test_fp8_two_devices, 0, N_ARCH);
    tcase_add_loop_test(tc, test_fp8_conversions, 0, N_ARCH);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
