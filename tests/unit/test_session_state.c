/* SPDX-License-Identifier: MIT */
/*
 * glm_session_state_save / glm_session_state_load (include/tx/glm.h,
 * libtx 2.7): a session saved after a prompt and loaded into a fresh
 * session continues with the same logits, bit for bit, for the MLA latent
 * + DSA key-selector cache of GLM-5.1 and the GQA cache of GLM-4.5 (its
 * default type and Q8_0; the tiny GLM-5.1's latent rows are not a multiple
 * of 32, so it has no Q8_0 cache);
 * blobs of another model, other cache types, truncated or garbage are
 * refused with the reason and leave the session as it was.
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

static char g_smd[2][256];

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

static glm_session_t *session(glm_model_t *m, int t)
{
    struct glm_session_options o = {.n_ctx = 64, .cache_type_k = t, .cache_type_v = t};
    glm_session_t *s = NULL;
    OK(glm_session_create(m, &o, &s));
    return s;
}

/* k greedy steps of s from last: the logits of each step into lg[k][V] */
static void decode(glm_session_t *s, int32_t last, int k, int V, float *lg)
{
    struct glm_sampling g = {.temperature = 0.0f, .top_p = 1.0f};
    for (int i = 0; i < k; i++) {
        int32_t nx = -1;
        OK(glm_decode_batch_each(&s, &last, 1, lg + (size_t)i * V, &g, &nx));
        last = nx;
    }
}

static void round_trip(int which, int cache_type)
{
    tx_device_t *dev = NULL;
    OK(tx_device_open(rts_spec, &dev));
    glm_model_t *m = NULL;
    OK(glm_model_load(dev, g_smd[which], NULL, &m));
    int SV = glm_model_sample_vocab(m), V = glm_model_config(m)->vocab_size;
    uint64_t seed = 41 + (uint64_t)which;
    enum { NP = 11, K = 5 };
    int32_t p[NP];
    for (int i = 0; i < NP; i++)
        p[i] = (int32_t)(rts_rand(&seed) % (uint64_t)SV);
    glm_session_t *a = session(m, cache_type), *b = session(m, cache_type);
    OK(glm_eval(a, p, NP - 1, 0, NULL));
    void *blob = NULL;
    size_t size = 0;
    OK(glm_session_state_save(a, &blob, &size));
    OK(glm_session_state_load(b, blob, size));
    ck_assert_int_eq(glm_session_pos(b), NP - 1);
    float *la = malloc((size_t)K * V * sizeof(float)), *lb = malloc((size_t)K * V * sizeof(float));
    ck_assert_ptr_nonnull(la);
    ck_assert_ptr_nonnull(lb);
    decode(a, p[NP - 1], K, V, la);
    decode(b, p[NP - 1], K, V, lb);
    ck_assert_msg(!memcmp(la, lb, (size_t)K * V * sizeof(float)),
                  "the loaded session's logits differ from the saved one's");

    /* refusals leave b as it was */
    int pos = glm_session_pos(b);
    ck_assert_int_eq(glm_session_state_load(b, blob, size - 1), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "size is wrong"), "%s", tx_last_error());
    char junk[256];
    memset(junk, 'x', sizeof(junk));
    ck_assert_int_eq(glm_session_state_load(b, junk, sizeof(junk)), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "not a session state"), "%s", tx_last_error());
    ck_assert_int_eq(glm_session_state_load(b, blob, 8), TX_EINVAL);
    glm_session_t *c = session(m, GLM_CACHE_F32); /* the golden plan's default: 16-bit */
    ck_assert_int_eq(glm_session_state_load(c, blob, size), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "KV cache types"), "%s", tx_last_error());
    ck_assert_int_eq(glm_session_pos(c), 0);
    ck_assert_int_eq(glm_session_pos(b), pos);

    /* a state of the other model */
    glm_model_t *o = NULL;
    OK(glm_model_load(dev, g_smd[1 - which], NULL, &o));
    glm_session_t *x = session(o, 0);
    ck_assert_int_eq(glm_session_state_load(x, blob, size), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "another model"), "%s", tx_last_error());
    printf("[session-state] %s, cache %s: %zu bytes for %d positions; the loaded session's %d "
           "steps have the saved one's logits bit for bit; refusals named\n",
           which ? "GLM-4.5" : "GLM-5.1", glm_cache_type_name(cache_type), size, NP - 1, K);
    glm_session_free(x);
    OK(glm_model_free(o));
    free(blob);
    free(la);
    free(lb);
    glm_session_free(c);
    glm_session_free(a);
    glm_session_free(b);
    OK(glm_model_free(m));
    tx_device_close(dev);
}

START_TEST(test_state_glm5)
{
    round_trip(0, GLM_CACHE_DEFAULT);
}
END_TEST

START_TEST(test_state_glm4_q8)
{
    round_trip(1, GLM_CACHE_Q8_0);
}
END_TEST

START_TEST(test_state_glm4)
{
    round_trip(1, GLM_CACHE_DEFAULT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("session_state");
    TCase *tc = tcase_create("session_state");
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_state_glm5);
    tcase_add_test(tc, test_state_glm4_q8);
    tcase_add_test(tc, test_state_glm4);
    suite_add_tcase(s, tc);
    return tx_test_run(s);
}
