/* SPDX-License-Identifier: MIT */
/*
 * The decode graph (libtx/runtime/decode_graph.c): a decode pass recorded
 * once per session set and plan, patched per token and submitted from
 * device memory.
 *
 * The same decode sequence runs on a model loaded with TX_DECODE_GRAPH=off
 * (every pass built), =verify (every pass built as well and compared byte
 * for byte with the patched graph before it is submitted: a wrong or
 * missing patch fails the pass) and the default (on). The logits and
 * tokens must be the same bytes in all three, and the graph must have run
 * most passes. The sequence covers two sessions at different positions
 * with their own sampling (penalties whose history length saturates), the
 * DSA threshold (index_topk 8 of the tiny preset: the pass's structure
 * changes, so the graph is recorded again), a single-session pass between
 * batched ones, and a session reset (positions going back).
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
#include "tx_test_main.h"

enum { NARCH = 3, STEPS = 14, AFTER = 4 };
static const enum glm_arch g_arch[NARCH] = {GLM_ARCH_GLM_MOE_DSA, GLM_ARCH_GLM4_MOE,
                                            GLM_ARCH_DEEPSEEK_V3};
static const char *g_name[NARCH] = {"glm_moe_dsa", "glm4_moe", "deepseek_v3"};
static char g_smd[NARCH][256];

static void fixture_setup(void)
{
    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    const char *d = rts_tmpdir();
    for (int i = 0; i < NARCH; i++) {
        char ck[300];
        snprintf(ck, sizeof(ck), "%s/ck%d", d, i);
        snprintf(g_smd[i], sizeof(g_smd[i]), "%s/m%d.smd", d, i);
        if (rts_write_checkpoint(ck, g_arch[i], NULL) || rts_export(ck, g_smd[i], "int8"))
            ck_abort_msg("cannot make model %d", i);
    }
}

static void fixture_teardown(void)
{
    rts_device_teardown();
    rts_cleanup();
}

/* What one run of the sequence gave */
struct run {
    float *logits; /* every pass's logits, in order */
    size_t n;      /* floats written */
    int32_t toks[64];
    int ntoks;
    struct glm_decode_times dt;
    struct glm_decode_times pt; /* glm_model_prefill_times */
};

static void keep(struct run *r, const float *l, size_t n, const int32_t *t, int nt)
{
    memcpy(r->logits + r->n, l, n * sizeof(float));
    r->n += n;
    for (int i = 0; i < nt; i++)
        r->toks[r->ntoks++] = t[i];
}

static void sequence(int a, const char *mode, const char *plan, struct run *r)
{
    ck_assert_int_eq(setenv("TX_DECODE_GRAPH", mode, 1), 0);
    tx_device_t *dev = NULL;
    OK(tx_device_open(rts_spec, &dev));
    glm_precision_plan_t p;
    OK(glm_plan_parse(plan, &p));
    OK(glm_plan_set(dev, &p));
    glm_model_t *m = NULL;
    OK(glm_model_load(dev, g_smd[a], NULL, &m));
    unsetenv("TX_DECODE_GRAPH");
    int V = glm_model_config(m)->vocab_size, SV = glm_model_sample_vocab(m);
    r->logits = malloc((size_t)(2 * STEPS + 2 * AFTER + 8) * (size_t)V * sizeof(float));
    ck_assert_ptr_nonnull(r->logits);
    r->n = 0;
    r->ntoks = 0;

    struct glm_session_options o = {.n_ctx = 64};
    glm_session_t *s[2] = {NULL, NULL};
    OK(glm_session_create(m, &o, &s[0]));
    OK(glm_session_create(m, &o, &s[1]));
    uint64_t seed = 17 + (uint64_t)a;
    int32_t pa[5];
    for (int i = 0; i < 5; i++)
        pa[i] = (int32_t)(rts_rand(&seed) % (uint64_t)SV);
    OK(glm_eval(s[0], pa, 2, 0, NULL));
    OK(glm_eval(s[1], pa, 4, 0, NULL));
    /* session 0 greedy with penalties over the last 4 ids (the history
     * length grows, then stays at 4), session 1 sampled */
    struct glm_sampling smp[2] = {
        {.temperature = 0.0f, .top_p = 1.0f, .repeat_penalty = 1.3f, .repeat_last_n = 4},
        {.temperature = 0.9f, .top_k = 20, .top_p = 0.9f, .seed = 5}};
    int32_t cur[2] = {pa[2], pa[4]}, next[2];
    float *l = malloc((size_t)2 * (size_t)V * sizeof(float));
    ck_assert_ptr_nonnull(l);
    /* positions 2.. and 4..: session 1 crosses index_topk 8 first */
    for (int k = 0; k < STEPS; k++) {
        OK(glm_decode_batch_each(s, cur, 2, l, smp, next));
        keep(r, l, (size_t)2 * V, next, 2);
        cur[0] = next[0];
        cur[1] = next[1];
    }
    /* one session alone: another graph */
    OK(glm_decode_batch_each(s, cur, 1, l, smp, next));
    keep(r, l, (size_t)V, next, 1);
    cur[0] = next[0];
    /* session 0 back to position 1: its positions go back below the
     * threshold, and the two sessions' graph is recorded again */
    OK(glm_session_reset(s[0]));
    OK(glm_eval(s[0], pa, 1, 0, NULL));
    cur[0] = pa[1];
    for (int k = 0; k < AFTER; k++) {
        OK(glm_decode_batch_each(s, cur, 2, l, smp, next));
        keep(r, l, (size_t)2 * V, next, 2);
        cur[0] = next[0];
        cur[1] = next[1];
    }
    OK(glm_model_decode_times(m, &r->dt));
    OK(glm_model_prefill_times(m, &r->pt));
    free(l);
    glm_session_free(s[0]);
    glm_session_free(s[1]);
    glm_model_free(m);
    tx_device_close(dev);
}

static void check_arch(int a, const char *plan)
{
    struct run off, ver, on;
    sequence(a, "off", plan, &off);
    sequence(a, "verify", plan, &ver);
    sequence(a, "on", plan, &on);
    ck_assert_uint_eq(off.n, on.n);
    ck_assert_uint_eq(off.n, ver.n);
    ck_assert_msg(!memcmp(off.logits, on.logits, off.n * sizeof(float)),
                  "%s %s: logits with the decode graph differ from the built passes'", g_name[a],
                  plan);
    ck_assert_msg(!memcmp(off.logits, ver.logits, off.n * sizeof(float)),
                  "%s %s: logits of the verified graph differ", g_name[a], plan);
    ck_assert_int_eq(off.ntoks, on.ntoks);
    ck_assert_msg(!memcmp(off.toks, on.toks, (size_t)off.ntoks * sizeof(int32_t)),
                  "%s %s: tokens differ", g_name[a], plan);
    ck_assert_uint_eq(off.dt.replays, 0);
    /* the prefill passes: the two multi-token glm_evals only (the one-token
     * glm_eval after the reset is a decode pass), each at least one job */
    ck_assert_uint_eq(on.pt.passes, 2);
    ck_assert_uint_ge(on.pt.jobs, 2);
    ck_assert_uint_eq(on.pt.replays, 0);
    ck_assert(on.pt.device_ms > 0 && on.pt.wall_ms >= on.pt.build_ms);
    uint64_t passes = off.dt.passes;
    ck_assert_uint_eq(on.dt.passes, passes);
    /* built: the first batched pass, the single session's pass, the
     * one-token glm_eval after the reset (no sampling: another key); DSA:
     * also where session 1, then session 0, passes index_topk. The model
     * keeps several graphs (speculative decoding's passes take turns), so
     * the first batched pass after the reset replays the one recorded for
     * the same sides of the threshold (DSA: session 1's crossing) */
    uint64_t built = a == 0 ? 5 : 3;
    ck_assert_msg(on.dt.replays + built == passes, "%s %s: decode graph ran %llu of %llu passes",
                  g_name[a], plan, (unsigned long long)on.dt.replays, (unsigned long long)passes);
    ck_assert_uint_eq(ver.dt.replays, on.dt.replays);
    printf("[decode-graph] %s %s: %llu of %llu decode passes from the graph, logits and tokens "
           "bit-identical to built passes; verify mode: every patched job equal to a fresh "
           "build\n",
           g_name[a], plan, (unsigned long long)on.dt.replays, (unsigned long long)passes);
    free(off.logits);
    free(ver.logits);
    free(on.logits);
}

START_TEST(test_graph_equals_build)
{
    check_arch(_i, "int8");
}
END_TEST

START_TEST(test_graph_equals_build_fp32)
{
    check_arch(_i, "fp32");
}
END_TEST

START_TEST(test_graph_mode_refused)
{
    tx_device_t *dev = NULL;
    OK(tx_device_open(rts_spec, &dev));
    ck_assert_int_eq(setenv("TX_DECODE_GRAPH", "sometimes", 1), 0);
    glm_model_t *m = NULL;
    int rc = glm_model_load(dev, g_smd[1], NULL, &m);
    unsetenv("TX_DECODE_GRAPH");
    ck_assert_int_eq(rc, TX_EINVAL);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(tx_last_error(), "TX_DECODE_GRAPH=sometimes"), "message: %s",
                  tx_last_error());
    printf("[decode-graph] bad mode: %s\n", tx_last_error());
    tx_device_close(dev);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("decode_graph");
    TCase *tc = tcase_create("graph");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_add_loop_test(tc, test_graph_equals_build, 0, NARCH);
    tcase_add_loop_test(tc, test_graph_equals_build_fp32, 0, NARCH);
    tcase_add_test(tc, test_graph_mode_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
