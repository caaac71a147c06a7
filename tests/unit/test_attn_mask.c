/* SPDX-License-Identifier: MIT */
/*
 * Custom attention masks (glm_session_set_attn_mask, libtx 2.9; the
 * device's ATTENTION / DSA_INDEX key bitmap, interface 1.10; the JSON
 * file of glm-inference --attn-mask, tools/lib/attn_mask_file.c):
 *  - the logits of a masked prompt on the device equal the FP32 host
 *    reference with the same mask within the FP32 bar of test_runtime
 *    (max relative error 1e-4), for the tiny GLM-4.5 (GQA) and GLM-5.1
 *    (MLA + DSA: 24 tokens, index_topk 8, so the indexer selects), for a
 *    "spans" and a "table" mask, in one pass and in chunks of 5 tokens;
 *  - a spans mask changes the logits (the test can fail), a full causal
 *    mask gives the unmasked logits bit for bit;
 *  - decode after a masked prefill (the generated tokens see every earlier
 *    token) equals the reference;
 *  - malformed masks and mask files are refused with the reason, and the
 *    session still works.
 *
 * Backend: $TX_DEVICE if set, else a tx8-emu started for this program.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm.h>
#include <tx/tx.h>

#include "common/attn_mask_file.h"
#include "test_runtime_synth.h"

static char g_smd[2][256]; /* [0] GLM-5.1, [1] GLM-4.5 */

enum { N = 24, NDEC = 3 };

/* a prompt of 24 tokens: a prefix 0-3, a table of 2 x 3 cells (two tokens
 * each) 4-15 with the header row first, and a question 16-23 */
static const char k_spans[] = "{\"spans\": [[4, 10], [10, 16]], \"n_tokens\": 24}";
static const char k_table[] = "{\"table\": {\"cells\": ["
                              "{\"span\": [4, 6], \"row\": 0, \"col\": 0},"
                              "{\"span\": [6, 8], \"row\": 0, \"col\": 1},"
                              "{\"span\": [8, 10], \"row\": 0, \"col\": 2},"
                              "{\"span\": [10, 12], \"row\": 1, \"col\": 0},"
                              "{\"span\": [12, 14], \"row\": 1, \"col\": 1},"
                              "{\"span\": [14, 16], \"row\": 1, \"col\": 2}]}}";
static const char k_causal[] = "{\"rows\": [{\"query\": [0, 24], \"keys\": [[0, 24]]}]}";

static void fixture_setup(void)
{
    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    if (rts_two_models(g_smd))
        ck_abort_msg("cannot make the models");
}

static void fixture_teardown(void)
{
    rts_device_teardown();
    rts_cleanup();
}

struct run {
    tx_device_t *dev;
    glm_model_t *m;
    int V;
    int32_t ids[N + NDEC];
};

static void run_open(struct run *r, int which)
{
    OK(tx_device_open(rts_spec, &r->dev));
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_parse("fp32", &p));
    OK(glm_plan_set(r->dev, &p));
    OK(glm_model_load(r->dev, g_smd[which], NULL, &r->m));
    r->V = glm_model_config(r->m)->vocab_size;
    uint64_t seed = 77 + (uint64_t)which;
    int SV = glm_model_sample_vocab(r->m);
    for (int i = 0; i < N + NDEC; i++)
        r->ids[i] = (int32_t)(rts_rand(&seed) % (uint64_t)SV);
}

static void run_close(struct run *r)
{
    OK(glm_model_free(r->m));
    tx_device_close(r->dev);
}

static void parse(const char *json, struct txc_attn_mask *am)
{
    char err[256];
    ck_assert_msg(!txc_attn_mask_parse(json, "test", N, am, err, sizeof(err)), "%s", err);
}

/* device logits: the N prompt tokens (all rows) with mask json (NULL: none)
 * in chunks of n_batch, then NDEC single tokens (their rows after) */
static void device_logits(struct run *r, const char *json, int n_batch, float *out)
{
    struct glm_session_options o = {.n_ctx = 64, .n_batch = n_batch};
    glm_session_t *s = NULL;
    OK(glm_session_create(r->m, &o, &s));
    if (json) {
        struct txc_attn_mask am;
        parse(json, &am);
        OK(glm_session_set_attn_mask(s, &am.m));
        txc_attn_mask_free(&am);
    }
    OK(glm_eval(s, r->ids, N, GLM_EVAL_ALL_LOGITS, out));
    for (int i = 0; i < NDEC; i++)
        OK(glm_eval(s, r->ids + N + i, 1, 0, out + (size_t)(N + i) * r->V));
    ck_assert_int_eq(glm_session_pos(s), N + NDEC);
    glm_session_free(s);
}

/* the same on the FP32 host reference */
static void reference_logits(struct run *r, int which, const char *json, float *out)
{
    struct tx_smd *smd;
    struct glm_ref_model *ref;
    struct glm_config rc;
    char err[512];
    ck_assert_int_eq(rts_ref_open(g_smd[which], &smd, &ref, &rc), 0);
    struct glm_ref_session *rs;
    ck_assert_int_eq(glm_ref_session_create(ref, N + NDEC, &rs, err, sizeof(err)), 0);
    if (json) {
        struct txc_attn_mask am;
        parse(json, &am);
        ck_assert_msg(!glm_ref_session_set_attn_mask(rs, &am.m, err, sizeof(err)), "%s", err);
        txc_attn_mask_free(&am);
    }
    ck_assert_msg(!glm_ref_forward(rs, r->ids, N, out, NULL, err, sizeof(err)), "%s", err);
    for (int i = 0; i < NDEC; i++)
        ck_assert_msg(!glm_ref_forward(rs, r->ids + N + i, 1, out + (size_t)(N + i) * r->V, NULL,
                                       err, sizeof(err)),
                      "%s", err);
    glm_ref_session_destroy(rs);
    glm_ref_model_destroy(ref);
    tx_smd_close(smd);
}

static void masked_vs_reference(int which, const char *name)
{
    struct run r;
    run_open(&r, which);
    size_t nl = (size_t)(N + NDEC) * r.V;
    float *dev = malloc(nl * 4), *ref = malloc(nl * 4), *plain = malloc(nl * 4),
          *causal = malloc(nl * 4);
    ck_assert(dev && ref && plain && causal);
    device_logits(&r, NULL, 512, plain);
    const char *masks[2] = {k_spans, k_table}, *mname[2] = {"spans", "table"};
    for (int k = 0; k < 2; k++)
        for (int nb = 0; nb < 2; nb++) {
            int n_batch = nb ? 5 : 512;
            device_logits(&r, masks[k], n_batch, dev);
            reference_logits(&r, which, masks[k], ref);
            double e = rts_rel_err(dev, ref, nl);
            /* the prompt's rows the mask changes: the last spans' tokens */
            double d = rts_rel_err(dev, plain, nl);
            printf("[attn_mask] %s %s mask, n_batch %d: device vs FP32 reference max relative "
                   "error %.3e (prompt + %d decoded tokens); vs no mask %.3e\n",
                   name, mname[k], n_batch, e, NDEC, d);
            ck_assert_msg(e <= 1e-4, "%s %s n_batch %d: max relative error %g > 1e-4", name,
                          mname[k], n_batch, e);
            ck_assert_msg(d > 1e-3, "%s %s: the mask did not change the logits (%g)", name,
                          mname[k], d);
        }
    /* a full causal mask: the unmasked logits, bit for bit */
    device_logits(&r, k_causal, 512, causal);
    ck_assert_msg(!memcmp(causal, plain, nl * 4), "%s: a full causal mask changed the logits",
                  name);
    /* the reference without a mask agrees with the device without one */
    reference_logits(&r, which, NULL, ref);
    ck_assert(rts_rel_err(plain, ref, nl) <= 1e-4);
    free(dev);
    free(ref);
    free(plain);
    free(causal);
    run_close(&r);
}

START_TEST(test_mask_glm5)
{
    masked_vs_reference(0, "GLM-5.1 (glm_moe_dsa)");
}
END_TEST

START_TEST(test_mask_glm4)
{
    masked_vs_reference(1, "GLM-4.5 (glm4_moe)");
}
END_TEST

/* glm_session_set_attn_mask refuses a malformed mask naming the fault and
 * keeps the session usable */
START_TEST(test_mask_refused)
{
    struct run r;
    run_open(&r, 1);
    struct glm_session_options o = {.n_ctx = 32};
    glm_session_t *s = NULL;
    OK(glm_session_create(r.m, &o, &s));
    struct {
        int n;
        int32_t rs[5];
        int32_t rg[10];
        const char *want;
    } bad[] = {
        {4, {0, 1, 2, 3, 4}, {0, 1, 0, 2, 0, 5, 0, 4}, "outside the prompt"},
        {4, {0, 1, 2, 4, 5}, {0, 1, 0, 2, 2, 3, 0, 2, 0, 4}, "overlaps or precedes"},
        {4, {0, 1, 2, 3, 4}, {0, 1, 1, 1, 0, 3, 0, 4}, "empty"},
        {4, {1, 1, 2, 3, 4}, {0, 1, 0, 2, 0, 3, 0, 4}, "row_start[0]"},
        {4, {0, 2, 1, 3, 4}, {0, 1, 1, 2, 0, 3, 0, 4}, "is below"},
        {40, {0}, {0}, "positions left"},
        {0, {0}, {0}, "must be > 0"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct glm_attn_mask m = {bad[i].n, bad[i].rs, bad[i].rg};
        ck_assert_int_eq(glm_session_set_attn_mask(s, &m), TX_EINVAL);
        ck_assert_msg(strstr(tx_last_error(), bad[i].want), "case %zu: '%s' lacks '%s'", i,
                      tx_last_error(), bad[i].want);
    }
    ck_assert_int_eq(glm_session_set_attn_mask(NULL, NULL), TX_EINVAL);
    OK(glm_session_set_attn_mask(s, NULL));
    OK(glm_eval(s, r.ids, 8, 0, NULL));
    glm_session_free(s);
    run_close(&r);
}
END_TEST

/* the mask file: malformed JSON, unknown keys, ranges outside the prompt,
 * unsorted or overlapping ranges, a table cell without its row: refused
 * naming the entry; the forms compile to the documented rows */
START_TEST(test_mask_file)
{
    struct {
        const char *json, *want;
    } bad[] = {
        {"{\"spans\": [[0, 4]", "not JSON"},
        {"[1, 2]", "must be a JSON object"},
        {"{\"spans\": [[0, 4]], \"extra\": 1}", "unknown key \"extra\""},
        {"{}", "exactly one of"},
        {"{\"spans\": [[0, 4]], \"rows\": []}", "exactly one of"},
        {"{\"spans\": [[20, 30]]}", "spans[0]: [20, 30) ends past the prompt's 24 tokens"},
        {"{\"spans\": [[4, 2]]}", "spans[0]: [4, 2) is empty"},
        {"{\"spans\": [[4, 8], [6, 10]]}", "span 1 [6, 10) overlaps span 0 [4, 8)"},
        {"{\"spans\": [[8, 10], [4, 6]]}", "span 1 [4, 6) comes before span 0 [8, 10)"},
        {"{\"spans\": [[4, \"x\"]]}", "spans[0]: must be [start, end]"},
        {"{\"table\": {\"cells\": [{\"span\": [4, 6], \"col\": 0}]}}",
         "table.cells[0]: \"row\" must be an integer >= 0"},
        {"{\"table\": []}", "\"table\" must be an object with \"cells\""},
        {"{\"rows\": [{\"query\": [0, 4], \"keys\": [[2, 3], [0, 1]]}]}",
         "rows[0] key 1 [0, 1) comes before"},
        {"{\"rows\": [{\"query\": [0, 4]}]}", "rows[0]: \"keys\" must be an array"},
        {"{\"spans\": [[0, 4]], \"n_tokens\": 23}", "\"n_tokens\" is 23, the prompt has 24"},
    };
    char err[512];
    struct txc_attn_mask am;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(txc_attn_mask_parse(bad[i].json, "mask.json", N, &am, err, sizeof(err)),
                         -1);
        ck_assert_msg(strstr(err, bad[i].want) && !strncmp(err, "mask.json: ", 11),
                      "case %zu: '%s' lacks '%s'", i, err, bad[i].want);
        txc_attn_mask_free(&am);
    }
    ck_assert_int_eq(txc_attn_mask_load("/nonexistent/mask.json", N, &am, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "/nonexistent/mask.json: No such file"), "%s", err);
    /* spans: token 5 (span 0) sees the prefix, its span and the question;
     * token 12 (span 1) the prefix, its span, the question; token 20 all */
    parse(k_spans, &am);
    const int32_t *rs = am.row_start, *rg = am.ranges;
    ck_assert_int_eq(rs[6] - rs[5], 3);
    ck_assert(rg[2 * rs[5]] == 0 && rg[2 * rs[5] + 1] == 4 && rg[2 * rs[5] + 2] == 4 &&
              rg[2 * rs[5] + 3] == 10 && rg[2 * rs[5] + 4] == 16 && rg[2 * rs[5] + 5] == 24);
    ck_assert(rg[2 * rs[12] + 2] == 10 && rg[2 * rs[12] + 3] == 16);
    ck_assert(rs[21] - rs[20] == 1 && rg[2 * rs[20]] == 0 && rg[2 * rs[20] + 1] == 24);
    txc_attn_mask_free(&am);
    /* table: cell (1, 1) at 12-13 sees its row's cells (10, 12, 14), its
     * column's (6), the prefix and the question: not (0, 0) or (0, 2) */
    parse(k_table, &am);
    rs = am.row_start;
    rg = am.ranges;
    int vis[N] = {0};
    for (int32_t k = rs[13]; k < rs[14]; k++)
        for (int32_t j = rg[2 * k]; j < rg[2 * k + 1]; j++)
            vis[j] = 1;
    static const int want[N] = {1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1,
                                1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int j = 0; j < N; j++)
        ck_assert_msg(vis[j] == want[j], "table: token 13 sees %d: %d", j, vis[j]);
    txc_attn_mask_free(&am);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attn_mask");
    TCase *tc = tcase_create("attn_mask");
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_mask_file);
    tcase_add_test(tc, test_mask_refused);
    tcase_add_test(tc, test_mask_glm4);
    tcase_add_test(tc, test_mask_glm5);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
