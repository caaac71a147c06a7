// SPDX-License-Identifier: MIT
/*
 * YaRN RoPE scaling (libtx/model/rope_scaling.c): parsing of rope_scaling as
 * DeepSeek-V3 / Kimi-K2 checkpoints ship it, with good and bad inputs, and
 * inv_freq / attention factor / softmax-scale multiplier against values
 * derived independently by tests/unit/data/yarn_expected.py.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/tx_error.h>

#include "model/rope_scaling.h"
#include "tx_test_main.h"

/* deepseek-ai/DeepSeek-V3 config.json, rope_scaling as shipped */
static const char *DSV3 = "{\"beta_fast\": 32, \"beta_slow\": 1, \"factor\": 40, \"mscale\": 1.0,"
                          " \"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096,"
                          " \"type\": \"yarn\"}";
/* moonshotai/Kimi-K2-Instruct config.json */
static const char *KIMI =
    "{\"beta_fast\": 1.0, \"beta_slow\": 1.0, \"factor\": 32.0, \"mscale\": 1.0,"
    " \"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096,"
    " \"type\": \"yarn\"}";

static int parse(const char *js, struct tx_rope_yarn *y, char *err, size_t errsz)
{
    struct json_object *o = json_tokener_parse(js);
    ck_assert_msg(o != NULL, "test JSON does not parse: %s", js);
    int rc = tx_rope_yarn_parse(o, y, err, errsz);
    json_object_put(o);
    return rc;
}

/* python3 tests/unit/data/yarn_expected.py: "deepseek_v3" (low 10 high 23) */
static const float DSV3_INV_FREQ[32] = {
    0x1p+0f,         0x1.7ff222p-1f,  0x1.1feb34p-1f,  0x1.afd136p-2f,  0x1.43d136p-2f,
    0x1.e5a848p-3f,  0x1.6c310ep-3f,  0x1.111aeep-3f,  0x1.99999ap-4f,  0x1.33281cp-4f,
    0x1.ccab86p-5f,  0x1.3f8b74p-5f,  0x1.b86436p-6f,  0x1.2d1b88p-6f,  0x1.97e506p-7f,
    0x1.111aeep-7f,  0x1.6872bp-8f,   0x1.d2e0cep-9f,  0x1.26d42cp-9f,  0x1.67459cp-10f,
    0x1.9e7c6ep-11f, 0x1.b32624p-12f, 0x1.74eea6p-13f, 0x1.17a8e4p-15f, 0x1.a36e2ep-16f,
    0x1.3a8748p-16f, 0x1.d7b9e2p-17f, 0x1.61bea2p-17f, 0x1.094566p-17f, 0x1.8dd9bap-18f,
    0x1.2a5884p-18f, 0x1.bf749ep-19f,
};

/* python3 tests/unit/data/yarn_expected.py: "untruncated" */
static const float UNTRUNC_INV_FREQ[8] = {
    0x1p+0f,         0x1.08ce7ap-2f, 0x1.f6509ep-5f,  0x1.61bd38p-7f,
    0x1.84b18ap-10f, 0x1.2f2b1p-12f, 0x1.3998eep-14f, 0x1.4462a2p-16f,
};

START_TEST(test_deepseek_v3)
{
    struct tx_rope_yarn y;
    char err[256] = "";
    ck_assert_msg(parse(DSV3, &y, err, sizeof(err)) == 0, "%s", err);
    ck_assert(y.factor == 40.0);
    ck_assert_int_eq(y.original_max_pos, 4096);
    ck_assert(y.beta_fast == 32.0 && y.beta_slow == 1.0);
    ck_assert(y.mscale == 1.0 && y.mscale_all_dim == 1.0);
    ck_assert_int_eq(y.has_attention_factor, 0);
    ck_assert_int_eq(y.truncate, 1);
    float f[32];
    /* max_position_embeddings 163840 is unused: the original is given */
    ck_assert_msg(tx_rope_yarn_inv_freq(&y, 10000.0, 64, 163840, f, err, sizeof(err)) == 0, "%s",
                  err);
    for (int i = 0; i < 32; i++)
        ck_assert_msg(f[i] == DSV3_INV_FREQ[i], "inv_freq[%d] = %a, want %a", i, (double)f[i],
                      (double)DSV3_INV_FREQ[i]);
    /* mscale == mscale_all_dim: cos/sin unscaled; the softmax scale gets
     * (0.1 ln 40 + 1)^2 (yarn_expected.py: 0x1.dfb4e8c8ef51dp+0) */
    ck_assert(tx_rope_yarn_attention_factor(&y) == 1.0);
    ck_assert_msg(fabs(tx_rope_yarn_softmax_scale_mult(&y) - 0x1.dfb4e8c8ef51dp+0) <= 1e-15,
                  "softmax mult %.17g", tx_rope_yarn_softmax_scale_mult(&y));
}
END_TEST

START_TEST(test_kimi_k2)
{
    /* beta_fast == beta_slow == 1: a ramp of width 1 still works */
    struct tx_rope_yarn y;
    char err[256] = "";
    ck_assert_msg(parse(KIMI, &y, err, sizeof(err)) == 0, "%s", err);
    float f[32];
    ck_assert_msg(tx_rope_yarn_inv_freq(&y, 50000.0, 64, 131072, f, err, sizeof(err)) == 0, "%s",
                  err);
    for (int i = 0; i < 32; i++) {
        double base = 1.0 / pow(50000.0, 2.0 * i / 64.0);
        /* every frequency between its interpolated and extrapolated value */
        ck_assert(f[i] <= (float)base * 1.0000001f && f[i] >= (float)(base / 32.0) * 0.9999999f);
        if (i > 0)
            ck_assert(f[i] < f[i - 1]);
    }
    ck_assert(tx_rope_yarn_attention_factor(&y) == 1.0);
}
END_TEST

START_TEST(test_untruncated_defaults)
{
    /* transformers v5 form (rope_parameters, rope_type, rope_theta inside),
     * betas null = defaults, no mscale: attention_factor = get_mscale(4) */
    struct tx_rope_yarn y;
    char err[256] = "";
    ck_assert_msg(parse("{\"rope_type\": \"yarn\", \"rope_theta\": 50000, \"factor\": 4,"
                        " \"original_max_position_embeddings\": 2048, \"beta_fast\": null,"
                        " \"beta_slow\": 0, \"truncate\": false, \"partial_rotary_factor\": 1}",
                        &y, err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert(y.beta_fast == 32.0 && y.beta_slow == 1.0);
    ck_assert_int_eq(y.truncate, 0);
    float f[8];
    ck_assert_msg(tx_rope_yarn_inv_freq(&y, 50000.0, 16, 0, f, err, sizeof(err)) == 0, "%s", err);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(f[i] == UNTRUNC_INV_FREQ[i], "inv_freq[%d] = %a, want %a", i, (double)f[i],
                      (double)UNTRUNC_INV_FREQ[i]);
    /* yarn_expected.py: 0x1.237d37fe5d298p+0 */
    ck_assert(fabs(tx_rope_yarn_attention_factor(&y) - 0x1.237d37fe5d298p+0) <= 1e-15);
    ck_assert(tx_rope_yarn_softmax_scale_mult(&y) == 1.0);
}
END_TEST

START_TEST(test_attention_factor_rules)
{
    struct tx_rope_yarn y;
    char err[256] = "";
    /* mscale != mscale_all_dim: the ratio (yarn_expected.py "mscale_0.707") */
    ck_assert(parse("{\"type\": \"yarn\", \"factor\": 40, \"mscale\": 0.707,"
                    " \"mscale_all_dim\": 1}",
                    &y, err, sizeof(err)) == 0);
    ck_assert(fabs(tx_rope_yarn_attention_factor(&y) - 0x1.d792dd14a1051p-1) <= 1e-15);
    /* an explicit attention_factor wins */
    ck_assert(parse("{\"type\": \"yarn\", \"factor\": 40, \"attention_factor\": 1.25,"
                    " \"mscale\": 0.707, \"mscale_all_dim\": 1}",
                    &y, err, sizeof(err)) == 0);
    ck_assert(tx_rope_yarn_attention_factor(&y) == 1.25);
    /* only mscale_all_dim: attention factor get_mscale(factor) (transformers'
     * `if mscale and mscale_all_dim`), softmax multiplier from mscale_all_dim */
    ck_assert(parse("{\"type\": \"yarn\", \"factor\": 40, \"mscale_all_dim\": 0.5}", &y, err,
                    sizeof(err)) == 0);
    ck_assert(fabs(tx_rope_yarn_attention_factor(&y) - (0.1 * log(40.0) + 1.0)) <= 1e-15);
    double m = 0.05 * log(40.0) + 1.0;
    ck_assert(fabs(tx_rope_yarn_softmax_scale_mult(&y) - m * m) <= 1e-15);
    /* factor 1: every mscale is 1, inv_freq is the plain RoPE */
    ck_assert(parse("{\"type\": \"yarn\", \"factor\": 1}", &y, err, sizeof(err)) == 0);
    ck_assert(tx_rope_yarn_attention_factor(&y) == 1.0);
    ck_assert(tx_rope_yarn_get_mscale(1.0, 3.0) == 1.0);
    ck_assert(tx_rope_yarn_get_mscale(0.5, 3.0) == 1.0);
    float f[16];
    ck_assert(tx_rope_yarn_inv_freq(&y, 10000.0, 32, 4096, f, err, sizeof(err)) == 0);
    for (int i = 0; i < 16; i++)
        ck_assert(f[i] == (float)(1.0 / pow(10000.0, 2.0 * i / 32.0)));
}
END_TEST

/* bad rope_scaling objects and the field the message must name */
static const struct {
    const char *json, *needle;
} bads[] = {
    {"[]", "expected an object"},
    {"{\"factor\": 40}", "rope_scaling.type: missing"},
    {"{\"type\": \"linear\", \"factor\": 40}", "rope_scaling.type: expected \"yarn\""},
    {"{\"rope_type\": 3, \"factor\": 40}", "rope_scaling.rope_type"},
    {"{\"type\": \"yarn\"}", "rope_scaling.factor: missing"},
    {"{\"type\": \"yarn\", \"factor\": null}", "rope_scaling.factor: missing"},
    {"{\"type\": \"yarn\", \"factor\": \"40\"}", "rope_scaling.factor: expected a number"},
    {"{\"type\": \"yarn\", \"factor\": 0.5}", "rope_scaling.factor: must be >= 1"},
    {"{\"type\": \"yarn\", \"factor\": 40, \"original_max_position_embeddings\": 4096.5}",
     "rope_scaling.original_max_position_embeddings: must be a positive integer"},
    {"{\"type\": \"yarn\", \"factor\": 40, \"original_max_position_embeddings\": 0}",
     "rope_scaling.original_max_position_embeddings"},
    {"{\"type\": \"yarn\", \"factor\": 40, \"original_max_position_embeddings\": 1e12}",
     "rope_scaling.original_max_position_embeddings"},
    {"{\"type\": \"yarn\", \"factor\": 40, \"beta_fast\": -1}",
     "rope_scaling.beta_fast: must be > 0"},
    {"{\"type\": \"yarn\", \"factor\": 40, \"beta_slow\": true}",
     "rope_scaling.beta_slow: expected a number"},
    {"{\"type\": \"yarn\", \"factor\": 40, \"beta_fast\": 1, \"beta_slow\": 32}",
     "rope_scaling.beta_fast: 1 is below beta_slow 32"},
    {"{\"type\": \"yarn\", \"factor\": 40, \"mscale\": \"1\"}",
     "rope_scaling.mscale: expected a number"},
    {"{\"type\": \"yarn\", \"factor\": 40, \"mscale_all_dim\": []}",
     "rope_scaling.mscale_all_dim: expected a number"},
    {"{\"type\": \"yarn\", \"factor\": 40, \"attention_factor\": 0}",
     "rope_scaling.attention_factor: must be > 0"},
    {"{\"type\": \"yarn\", \"factor\": 40, \"truncate\": 1}",
     "rope_scaling.truncate: expected true or false"},
    {"{\"type\": \"yarn\", \"factor\": 40, \"low_freq_factor\": 1}",
     "rope_scaling.low_freq_factor: unknown key"},
};

START_TEST(test_bad)
{
    struct tx_rope_yarn y;
    char err[256] = "";
    int rc = parse(bads[_i].json, &y, err, sizeof(err));
    ck_assert_msg(rc == TX_EINVAL, "%s: rc %d", bads[_i].json, rc);
    ck_assert_msg(strstr(err, bads[_i].needle), "%s: message \"%s\" lacks \"%s\"", bads[_i].json,
                  err, bads[_i].needle);
    /* the result is left at the defaults, never half-parsed */
    ck_assert(y.factor == 1.0 && y.original_max_pos == 0 && y.truncate == 1);
}
END_TEST

START_TEST(test_bad_calls)
{
    struct tx_rope_yarn y;
    char err[256] = "";
    ck_assert_int_eq(tx_rope_yarn_parse(NULL, &y, err, sizeof(err)), TX_EINVAL);
    ck_assert(strstr(err, "rope_scaling: expected an object"));
    ck_assert_int_eq(tx_rope_yarn_parse(NULL, NULL, NULL, 0), TX_EINVAL);
    ck_assert(parse(DSV3, &y, err, sizeof(err)) == 0);
    float f[32];
    ck_assert_int_eq(tx_rope_yarn_inv_freq(&y, 10000.0, 63, 0, f, err, sizeof(err)), TX_EINVAL);
    ck_assert(strstr(err, "rotary dim 63"));
    ck_assert_int_eq(tx_rope_yarn_inv_freq(&y, 1.0, 64, 0, f, err, sizeof(err)), TX_EINVAL);
    ck_assert(strstr(err, "rope_theta"));
    ck_assert_int_eq(tx_rope_yarn_inv_freq(&y, 10000.0, 64, 0, NULL, err, sizeof(err)), TX_EINVAL);
    y.original_max_pos = 0;
    ck_assert_int_eq(tx_rope_yarn_inv_freq(&y, 10000.0, 64, 0, f, err, sizeof(err)), TX_EINVAL);
    ck_assert(strstr(err, "original_max_position_embeddings"));
    /* the original falls back to max_position_embeddings */
    ck_assert_int_eq(tx_rope_yarn_inv_freq(&y, 10000.0, 64, 4096, f, err, sizeof(err)), 0);
    ck_assert(f[31] == DSV3_INV_FREQ[31]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rope_scaling");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60); /* Check's 4 s default is short on a loaded machine under ASan */
    tcase_add_test(tc, test_deepseek_v3);
    tcase_add_test(tc, test_kimi_k2);
    tcase_add_test(tc, test_untruncated_defaults);
    tcase_add_test(tc, test_attention_factor_rules);
    tcase_add_loop_test(tc, test_bad, 0, (int)(sizeof(bads) / sizeof(bads[0])));
    tcase_add_test(tc, test_bad_calls);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
