/* SPDX-License-Identifier: MIT */
/*
 * glm_decode_batch_prefill (include/tx/glm.h, libtx 2.2): one device pass
 * that decodes a token for each of n sessions and appends a prefill chunk
 * of another session -- the step of glm-server's continuous batching; and
 * the sessions' token masks (glm_session_set_token_mask) in such passes.
 *
 * glm_decode_batch_prefill_logits (libtx 2.7) also copies chosen decode
 * rows' logits: they are the logits SAMPLE drew from (greedy: their argmax)
 * and those of the same sequence evaluated alone.
 *
 * Backend: $TX_DEVICE if set, else a tx8-emu started for this program;
 * the tiny synthetic GLM-5.1 and GLM-4.5 checkpoints of test_runtime.
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

static char g_smd[2][256];

static void fixture_setup(void)
{
    if (rts_device_setup("128M"))
        ck_abort_msg("cannot start tx8-emu");
    if (rts_two_models(g_smd))
        ck_abort_msg("cannot make the models");
}

static void fixture_teardown(void)
{
    rts_device_teardown();
    rts_cleanup();
}

static glm_session_t *session(glm_model_t *m, int n_ctx)
{
    struct glm_session_options o = {.n_ctx = n_ctx};
    glm_session_t *s = NULL;
    OK(glm_session_create(m, &o, &s));
    return s;
}

/* Model `which` on a device opened with the FP32 plan */
static glm_model_t *load_fp32(int which, tx_device_t **dev)
{
    OK(tx_device_open(rts_spec, dev));
    glm_precision_plan_t p;
    glm_plan_uniform(&p, GLM_PRECISION_FP32);
    OK(glm_plan_set(*dev, &p));
    glm_model_t *m = NULL;
    OK(glm_model_load(*dev, g_smd[which], NULL, &m));
    return m;
}

/* The next greedy token of s after ids (one decode pass of s alone). */
static int32_t greedy_next(glm_session_t *s, int32_t last)
{
    struct glm_sampling g = {.temperature = 0.0f, .top_p = 1.0f};
    int32_t nx = -1;
    OK(glm_decode_batch_each(&s, &last, 1, NULL, &g, &nx));
    return nx;
}

static void mixed_pass(int which)
{
    tx_device_t *dev = NULL;
    glm_model_t *m = load_fp32(which, &dev);
    int SV = glm_model_sample_vocab(m);
    uint64_t seed = 99 + (uint64_t)which;
    enum { NP = 6, NQ = 13 };
    int32_t pa[NP], q[NQ];
    for (int i = 0; i < NP; i++)
        pa[i] = (int32_t)(rts_rand(&seed) % (uint64_t)SV);
    for (int i = 0; i < NQ; i++)
        q[i] = (int32_t)(rts_rand(&seed) % (uint64_t)SV);

    /* two running sessions, one new one prefilled in chunks 5 + 5 + 2 beside them */
    glm_session_t *run[2] = {session(m, 64), session(m, 64)};
    glm_session_t *c = session(m, 64);
    for (int i = 0; i < 2; i++)
        OK(glm_eval(run[i], pa, NP - 1, 0, NULL));
    struct glm_sampling smp[2] = {{.temperature = 0.0f, .top_p = 1.0f},
                                  {.temperature = 0.9f, .top_p = 1.0f, .seed = 5}};
    int32_t cur[2] = {pa[NP - 1], pa[NP - 1]}, next[2];
    int32_t got[2][3];
    int chunks[3][2] = {{0, 5}, {5, 5}, {10, 2}};
    for (int k = 0; k < 3; k++) {
        struct glm_prefill_chunk ch = {c, q + chunks[k][0], chunks[k][1]};
        OK(glm_decode_batch_prefill(run, cur, 2, smp, next, &ch, 1));
        for (int i = 0; i < 2; i++) {
            ck_assert_int_ge(next[i], 0);
            ck_assert_int_lt(next[i], SV);
            got[i][k] = next[i];
            cur[i] = next[i];
        }
    }
    ck_assert_int_eq(glm_session_pos(c), NQ - 1);
    ck_assert_int_eq(glm_session_pos(run[0]), NP + 2);
    int32_t c_next = greedy_next(c, q[NQ - 1]);

    /* the same sequences without mixing: the chunked session gives the token
     * its one-pass prefill gives, the running ones what they give alone */
    glm_session_t *r = session(m, 64);
    OK(glm_eval(r, q, NQ - 1, 0, NULL));
    ck_assert_int_eq(greedy_next(r, q[NQ - 1]), c_next);
    for (int i = 0; i < 2; i++) {
        OK(glm_session_reset(r));
        OK(glm_eval(r, pa, NP - 1, 0, NULL));
        int32_t t = pa[NP - 1];
        for (int k = 0; k < 3; k++) {
            int32_t nx = -1;
            OK(glm_decode_batch_each(&r, &t, 1, NULL, &smp[i], &nx));
            ck_assert_msg(nx == got[i][k], "session %d step %d: %d mixed, %d alone", i, k,
                          got[i][k], nx);
            t = nx;
        }
    }

    /* chunks alone (n = 0), two at once, and refusals that leave every
     * position as it was */
    OK(glm_session_reset(c));
    OK(glm_session_reset(r));
    struct glm_prefill_chunk two[2] = {{c, q, 4}, {r, q, 7}};
    OK(glm_decode_batch_prefill(NULL, NULL, 0, NULL, NULL, two, 2));
    ck_assert_int_eq(glm_session_pos(c), 4);
    ck_assert_int_eq(glm_session_pos(r), 7);
    two[0] = (struct glm_prefill_chunk){c, q + 4, 8};
    two[1] = (struct glm_prefill_chunk){r, q + 7, 5};
    OK(glm_decode_batch_prefill(run, cur, 2, smp, next, two, 2));
    ck_assert_int_eq(greedy_next(c, q[NQ - 1]), c_next); /* 4 + 8 = 12 tokens, then q[12] */
    ck_assert_int_eq(greedy_next(r, q[NQ - 1]), c_next);
    OK(glm_session_reset(c));
    OK(glm_session_truncate(run[0], glm_session_pos(run[0])));
    int pos0 = glm_session_pos(run[0]);
    struct glm_prefill_chunk bad1 = {run[1], q, 2};
    ck_assert_int_eq(glm_decode_batch_prefill(run, cur, 2, smp, next, &bad1, 1), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "also the prefill session"), "%s", tx_last_error());
    struct glm_prefill_chunk dup[2] = {{c, q, 2}, {c, q, 2}};
    ck_assert_int_eq(glm_decode_batch_prefill(NULL, NULL, 0, NULL, NULL, dup, 2), TX_EINVAL);
    int32_t big[80] = {0};
    struct glm_prefill_chunk bad2 = {c, big, 65};
    ck_assert_int_eq(glm_decode_batch_prefill(run, cur, 2, smp, next, &bad2, 1), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "exceed the context"), "%s", tx_last_error());
    int32_t bad = SV + 100000;
    struct glm_prefill_chunk bad3 = {c, &bad, 1};
    ck_assert_int_eq(glm_decode_batch_prefill(run, cur, 2, smp, next, &bad3, 1), TX_EINVAL);
    ck_assert_int_eq(glm_decode_batch_prefill(NULL, NULL, 0, NULL, NULL, NULL, 0), TX_EINVAL);
    ck_assert_int_eq(glm_session_pos(c), 0);
    ck_assert_int_eq(glm_session_pos(run[0]), pos0);
    /* the KV cache label of a slot */
    OK(glm_session_set_label(c, "GLM_KV_slot0"));
    ck_assert_int_eq(glm_session_set_label(c, "a label that is longer than 31 bytes"), TX_EINVAL);
    ck_assert_int_eq(glm_session_set_label(c, ""), TX_EINVAL);
    printf("[batch-prefill] %s: a 12-token prompt in 3 chunks beside 2 decoding sessions, and "
           "two prompts chunked together: same tokens as unmixed\n",
           which ? "GLM-4.5" : "GLM-5.1");
    glm_session_free(r);
    glm_session_free(c);
    glm_session_free(run[0]);
    glm_session_free(run[1]);
    OK(glm_model_free(m));
    tx_device_close(dev);
}

/* glm_decode_batch_prefill_logits: row 0's logits (greedy) beside row 1
 * (sampled, no copy) and a chunk, then without chunks */
START_TEST(test_row_logits)
{
    tx_device_t *dev = NULL;
    glm_model_t *m = load_fp32(0, &dev);
    int SV = glm_model_sample_vocab(m), V = glm_model_config(m)->vocab_size;
    uint64_t seed = 7;
    enum { NP = 5 };
    int32_t pa[NP], q[8];
    for (int i = 0; i < NP; i++)
        pa[i] = (int32_t)(rts_rand(&seed) % (uint64_t)SV);
    for (int i = 0; i < 8; i++)
        q[i] = (int32_t)(rts_rand(&seed) % (uint64_t)SV);
    glm_session_t *run[2] = {session(m, 64), session(m, 64)};
    glm_session_t *c = session(m, 64), *alone = session(m, 64);
    for (int i = 0; i < 2; i++)
        OK(glm_eval(run[i], pa, NP - 1, 0, NULL));
    OK(glm_eval(alone, pa, NP, 0, NULL)); /* the same sequence alone: its last logits */
    float *ref = malloc((size_t)V * sizeof(float)), *row = malloc((size_t)V * sizeof(float));
    ck_assert_ptr_nonnull(ref);
    ck_assert_ptr_nonnull(row);
    OK(glm_session_truncate(alone, NP - 1));
    OK(glm_eval(alone, pa + NP - 1, 1, 0, ref));
    for (int i = 0; i < V; i++)
        row[i] = NAN;
    struct glm_sampling smp[2] = {{.temperature = 0.0f, .top_p = 1.0f},
                                  {.temperature = 0.9f, .top_p = 1.0f, .seed = 5}};
    int32_t cur[2] = {pa[NP - 1], pa[NP - 1]}, next[2] = {-1, -1};
    float *rows[2] = {row, NULL};
    struct glm_prefill_chunk ch = {c, q, 8};
    OK(glm_decode_batch_prefill_logits(run, cur, 2, smp, next, &ch, 1, rows));
    int best = 0;
    double maxabs = 0, maxerr = 0;
    for (int i = 0; i < V; i++) {
        ck_assert_msg(isfinite(row[i]), "logit %d not written", i);
        if (i < SV && row[i] > row[best])
            best = i;
        if (fabs(ref[i]) > maxabs)
            maxabs = fabs(ref[i]);
        if (fabs(row[i] - ref[i]) > maxerr)
            maxerr = fabs(row[i] - ref[i]);
    }
    ck_assert_int_eq(best, next[0]);
    ck_assert_msg(maxerr <= 1e-4 * maxabs, "row logits vs alone: max |diff| %g of %g", maxerr,
                  maxabs);
    /* no chunks: the decode-only pass copies as well */
    for (int i = 0; i < V; i++)
        row[i] = NAN;
    cur[0] = next[0];
    cur[1] = next[1];
    OK(glm_decode_batch_prefill_logits(run, cur, 2, smp, next, NULL, 0, rows));
    best = 0;
    for (int i = 0; i < SV; i++)
        if (row[i] > row[best])
            best = i;
    ck_assert_int_eq(best, next[0]);
    printf("[batch-prefill] row logits: greedy token = their argmax, max |diff| %.3g vs the "
           "sequence alone (largest |logit| %.3g)\n",
           maxerr, maxabs);
    free(ref);
    free(row);
    glm_session_free(alone);
    glm_session_free(c);
    glm_session_free(run[0]);
    glm_session_free(run[1]);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* glm_session_set_token_mask (libtx 2.8): each session's own mask holds
 * in a mixed decode + prefill pass (row r samples with its own session's
 * mask, counter and history), in glm_generate, greedy and sampled; bad
 * masks are refused; NULL lifts it. */
START_TEST(test_token_mask)
{
    tx_device_t *dev = NULL;
    OK(tx_device_open(rts_spec, &dev));
    glm_model_t *m = NULL;
    OK(glm_model_load(dev, g_smd[0], NULL, &m));
    int SV = glm_model_sample_vocab(m), W = (SV + 31) / 32;
    uint32_t *ma = calloc((size_t)W, 4), *mb = calloc((size_t)W, 4);
    ck_assert(ma && mb);
    const int32_t a0 = 7, a1 = SV - 1, b0 = 12345 % SV;
    ma[a0 / 32] |= 1u << (a0 % 32);
    ma[a1 / 32] |= 1u << (a1 % 32);
    mb[b0 / 32] |= 1u << (b0 % 32);
    glm_session_t *run[2] = {session(m, 64), session(m, 64)};
    glm_session_t *c = session(m, 64);
    int32_t p[5] = {1, 2, 3, 4, 5};
    OK(glm_eval(run[0], p, 4, 0, NULL));
    OK(glm_eval(run[1], p, 3, 0, NULL)); /* another position */
    OK(glm_session_set_token_mask(run[0], ma, W));
    OK(glm_session_set_token_mask(run[1], mb, W));
    struct glm_sampling smp[2] = {{.temperature = 1.5f, .top_p = 1.0f, .seed = 3},
                                  {.temperature = 0.0f, .top_p = 1.0f}};
    int32_t cur[2] = {p[4], p[3]}, next[2];
    int seen_a1 = 0;
    for (int k = 0; k < 8; k++) {
        struct glm_prefill_chunk ch = {c, p, 1 + k % 3};
        OK(glm_session_reset(c));
        OK(glm_decode_batch_prefill(run, cur, 2, smp, next, &ch, 1));
        ck_assert_msg(next[0] == a0 || next[0] == a1, "session 0 drew %d", next[0]);
        ck_assert_int_eq(next[1], b0);
        seen_a1 += next[0] == a1;
        cur[0] = next[0];
        cur[1] = next[1];
    }
    /* glm_generate: every token within the mask, greedy */
    OK(glm_session_set_token_mask(c, mb, W));
    OK(glm_session_reset(c));
    struct glm_generate_params gp;
    memset(&gp, 0, sizeof(gp));
    gp.prompt = p;
    gp.n_prompt = 5;
    gp.n_predict = 4;
    gp.n_stop = -1;
    gp.sampling.temperature = 0.0f;
    gp.sampling.top_p = 1.0f;
    int32_t out[4];
    int n_out = 0;
    OK(glm_generate(c, &gp, out, 4, &n_out, NULL));
    ck_assert_int_eq(n_out, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(out[i], b0);
    /* refusals; NULL lifts the mask */
    ck_assert_int_eq(glm_session_set_token_mask(c, mb, W + 1), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "words"), "%s", tx_last_error());
    memset(ma, 0, (size_t)W * 4);
    ck_assert_int_eq(glm_session_set_token_mask(c, ma, W), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "allows no token"), "%s", tx_last_error());
    OK(glm_session_set_token_mask(c, NULL, 0));
    OK(glm_session_reset(c));
    OK(glm_generate(c, &gp, out, 4, &n_out, NULL));
    glm_session_t *r = session(m, 64);
    int32_t free_out[4];
    int n_free = 0;
    OK(glm_generate(r, &gp, free_out, 4, &n_free, NULL));
    ck_assert_int_eq(n_out, n_free);
    ck_assert(!memcmp(out, free_out, (size_t)n_out * 4)); /* unmasked again */
    printf("[batch-prefill] token masks: 8 mixed passes (one session sampled within {%d, %d}: "
           "%d times %d; one greedy = %d), glm_generate within its mask, NULL lifts it\n",
           a0, a1, seen_a1, a1, b0);
    free(ma);
    free(mb);
    glm_session_free(r);
    glm_session_free(c);
    glm_session_free(run[0]);
    glm_session_free(run[1]);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

START_TEST(test_mixed_pass_glm5)
{
    mixed_pass(0);
}
END_TEST

START_TEST(test_mixed_pass_glm4)
{
    mixed_pass(1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("batch_prefill");
    TCase *tc = tcase_create("batch_prefill");
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_mixed_pass_glm5);
    tcase_add_test(tc, test_mixed_pass_glm4);
    tcase_add_test(tc, test_row_logits);
    tcase_add_test(tc, test_token_mask);
    suite_add_tcase(s, tc);
    return tx_test_run(s);
}
