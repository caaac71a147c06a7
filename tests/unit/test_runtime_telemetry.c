/* SPDX-License-Identifier: MIT */
/*
 * The GLM runtime publishes a loaded model's expert load through the libtx
 * telemetry channel (tx/tx_telemetry.h): what a monitor reads with
 * tx_telemetry_scan() must be the runtime's own expert statistics
 * (glm_model_expert_stats), layer by layer, after generate calls, after
 * rate-limited forward passes and after a reset; the object goes away with
 * the model; a model that cannot be published still works.
 *
 * Backend: $TX_DEVICE if set, else a tx8-emu started for this program.
 * Model: a tiny synthetic GLM-5.1 checkpoint (glm-synth's tiny preset, a
 * skewed router) exported with tx_export. The telemetry directory is a
 * temporary one ($TX_TELEMETRY_DIR), never /dev/shm.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx.h>

#include "test_runtime_synth.h"

static char g_smd[300];
static char g_shm[64];

static void fixture_setup(void)
{
    struct rts_mods skew = {.hot_n = 2, .hot_bias = 0.1f, .n_group = -1};
    char ck[300];

    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    snprintf(ck, sizeof(ck), "%s/ck", rts_tmpdir());
    snprintf(g_smd, sizeof(g_smd), "%s/m.smd", rts_tmpdir());
    if (rts_write_checkpoint(ck, GLM_ARCH_GLM_MOE_DSA, &skew) || rts_export(ck, g_smd, "none"))
        ck_abort_msg("cannot make the test package");
}

static void fixture_teardown(void)
{
    rts_device_teardown();
    rts_cleanup();
}

/* The published models of this process. */
struct found {
    int n;
    struct tx_telemetry_model m; /* the last one, arrays copied below */
    char path[2][288];
    uint8_t valid[64];
    uint64_t counts[64 * 64];
};

static int collect(const struct tx_telemetry_model *m, void *arg)
{
    struct found *f = arg;

    if (m->pid != (int32_t)getpid())
        return 0;
    if (f->n < 2)
        snprintf(f->path[f->n], sizeof(f->path[0]), "%s", m->path);
    f->n++;
    f->m = *m;
    ck_assert_uint_le(m->layers, 64);
    ck_assert_uint_le((uint64_t)m->layers * m->experts, 64 * 64);
    memcpy(f->valid, m->layer_valid, m->layers);
    memcpy(f->counts, m->counts, (size_t)m->layers * m->experts * sizeof(uint64_t));
    f->m.layer_valid = f->valid;
    f->m.counts = f->counts;
    return 0;
}

static void scan(struct found *f)
{
    unsigned skipped = 0;

    memset(f, 0, sizeof(*f));
    ck_assert_int_ge(tx_telemetry_scan(collect, f, &skipped), 0);
    ck_assert_uint_eq(skipped, 0);
}

/* The published counts are exactly the runtime's statistics. */
static void check_matches_stats(glm_model_t *m, const struct found *f, int want_selections)
{
    const struct glm_config *c = glm_model_config(m);
    struct glm_expert_stats *st = NULL;
    struct tx_telemetry_stats ts;

    ck_assert_int_eq(f->n, 1);
    OK(glm_model_expert_stats(m, &st));
    ck_assert_str_eq(f->m.model, glm_model_name(m));
    ck_assert_uint_eq(f->m.layers, (uint32_t)c->num_hidden_layers);
    ck_assert_uint_eq(f->m.experts, (uint32_t)c->n_routed_experts);
    ck_assert_int_eq(st->n_experts, c->n_routed_experts);
    ck_assert_int_gt(st->n_moe_layers, 0);
    for (int l = 0, i = 0; l < c->num_hidden_layers; l++) {
        int moe = i < st->n_moe_layers && st->layer[i] == l;

        /* dense layers are never published */
        ck_assert_msg(f->valid[l] == (moe ? 1 : 0), "layer %d valid %d (MoE %d)", l, f->valid[l],
                      moe);
        if (!moe)
            continue;
        for (int e = 0; e < st->n_experts; e++)
            ck_assert_msg(f->counts[(size_t)l * f->m.experts + e] ==
                              st->counts[(size_t)i * st->n_experts + e],
                          "layer %d expert %d: published %llu, runtime %llu", l, e,
                          (unsigned long long)f->counts[(size_t)l * f->m.experts + e],
                          (unsigned long long)st->counts[(size_t)i * st->n_experts + e]);
        i++;
    }
    OK(tx_telemetry_model_stats(&f->m, &ts));
    ck_assert_uint_eq(ts.total, st->total);
    if (want_selections) {
        ck_assert_uint_gt(st->total, 0);
        ck_assert_uint_eq((uint64_t)ts.moe_layers, (uint64_t)st->n_moe_layers);
        /* the std a monitor shows is the runtime's */
        ck_assert_double_eq_tol(ts.overall_std, st->overall_std, 1e-6);
        ck_assert_double_eq_tol(ts.mean_layer_std, st->mean_layer_std, 1e-6);
        ck_assert(st->overall_std > 1.0); /* the router is skewed on purpose */
    }
    glm_expert_stats_free(st);
}

static int generate(glm_session_t *s, int n_predict)
{
    int32_t prompt[6] = {3, 17, 42, 99, 7, 250};
    struct glm_generate_params gp;
    int n = 0;

    memset(&gp, 0, sizeof(gp));
    gp.prompt = prompt;
    gp.n_prompt = 6;
    gp.n_predict = n_predict;
    gp.n_stop = -1;
    glm_sampling_default(&gp.sampling);
    gp.sampling.seed = 5;
    OK(glm_generate(s, &gp, NULL, 0, &n, NULL));
    ck_assert_int_eq(n, n_predict);
    return n;
}

static const char *expected_device(char *buf, size_t size)
{
    const char *spec = rts_spec;

    if (!strncmp(spec, "accel:", 6))
        spec += 6;
    snprintf(buf, size, "%s", spec);
    return buf;
}

START_TEST(test_published_counts)
{
    struct glm_session_options so = {.n_ctx = 64};
    tx_device_t *dev = NULL;
    glm_model_t *m = NULL;
    glm_session_t *s = NULL;
    struct found f;
    char want[300];
    uint64_t updates;

    OK(tx_device_open(rts_spec, &dev));
    OK(glm_model_load(dev, g_smd, NULL, &m));

    /* published at load: name, device, shape, zero counts in MoE layers */
    scan(&f);
    ck_assert_int_eq(f.n, 1);
    ck_assert_str_eq(f.m.device, expected_device(want, sizeof(want)));
    ck_assert_msg(!strncmp(f.m.path, g_shm, strlen(g_shm)), "published at %s, not in %s", f.m.path,
                  g_shm);
    check_matches_stats(m, &f, 0);
    ck_assert_uint_ge(f.m.updates, 1);
    updates = f.m.updates;

    /* after a generate call: the final counts */
    OK(glm_session_create(m, &so, &s));
    generate(s, 8);
    scan(&f);
    check_matches_stats(m, &f, 1);
    ck_assert_uint_gt(f.m.updates, updates);
    ck_assert_uint_ge(f.m.updated_ns, f.m.created_ns);

    /* a forward pass more than the rate-limit period after the last update
     * is published at once (glm_eval: no generate call) */
    tx_test_emu_sleep_ms(150);
    {
        int32_t tok = 11;

        OK(glm_eval(s, &tok, 1, 0, NULL));
    }
    scan(&f);
    check_matches_stats(m, &f, 1);

    /* a reset is published at once: every count zero again */
    updates = f.m.updates;
    OK(glm_model_expert_stats_reset(m));
    scan(&f);
    ck_assert_uint_gt(f.m.updates, updates);
    check_matches_stats(m, &f, 0);
    for (uint32_t i = 0; i < f.m.layers * f.m.experts; i++)
        ck_assert_uint_eq(f.counts[i], 0);

    glm_session_free(s);
    OK(glm_model_free(m));
    /* the object goes with the model */
    scan(&f);
    ck_assert_int_eq(f.n, 0);
    OK(tx_device_close(dev));
}
END_TEST

/* Two models in one process are two objects; each goes with its model. */
START_TEST(test_two_models)
{
    tx_device_t *dev = NULL;
    glm_model_t *a = NULL, *b = NULL;
    struct glm_load_options lo = {.name = "second"};
    struct found f;

    OK(tx_device_open(rts_spec, &dev));
    OK(glm_model_load(dev, g_smd, NULL, &a));
    OK(glm_model_load(dev, g_smd, &lo, &b));
    scan(&f);
    ck_assert_int_eq(f.n, 2);
    ck_assert_str_ne(f.path[0], f.path[1]);
    OK(glm_model_free(a));
    scan(&f);
    ck_assert_int_eq(f.n, 1);
    ck_assert_str_eq(f.m.model, "second");
    OK(glm_model_free(b));
    scan(&f);
    ck_assert_int_eq(f.n, 0);
    OK(tx_device_close(dev));
}
END_TEST

/* Telemetry is optional: without a usable directory the model loads and
 * generates, and nothing is published. */
START_TEST(test_unpublished_still_works)
{
    struct glm_session_options so = {.n_ctx = 64};
    tx_device_t *dev = NULL;
    glm_model_t *m = NULL;
    glm_session_t *s = NULL;
    struct glm_expert_stats *st = NULL;
    struct found f;

    setenv("TX_TELEMETRY_DIR", "/nonexistent/tx-telemetry", 1); /* this test process only */
    OK(tx_device_open(rts_spec, &dev));
    OK(glm_model_load(dev, g_smd, NULL, &m));
    OK(glm_session_create(m, &so, &s));
    generate(s, 4);
    OK(glm_model_expert_stats(m, &st));
    ck_assert_uint_gt(st->total, 0);
    glm_expert_stats_free(st);
    setenv("TX_TELEMETRY_DIR", g_shm, 1);
    scan(&f);
    ck_assert_int_eq(f.n, 0);
    glm_session_free(s);
    OK(glm_model_free(m));
    OK(tx_device_close(dev));
}
END_TEST

static void rm_shm(void)
{
    DIR *d = opendir(g_shm);
    struct dirent *e;
    char p[400];

    if (d) {
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof(p), "%s/%s", g_shm, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(g_shm);
}

int main(void)
{
    Suite *su = suite_create("runtime_telemetry");
    TCase *tc = tcase_create("telemetry");
    SRunner *sr;
    int failed;

    snprintf(g_shm, sizeof(g_shm), "/tmp/tx-rt-telemetry-XXXXXX");
    if (!mkdtemp(g_shm)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("TX_TELEMETRY_DIR", g_shm, 1);
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_published_counts);
    tcase_add_test(tc, test_two_models);
    tcase_add_test(tc, test_unpublished_still_works);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    rm_shm();
    return failed || tx_test_emu_problems ? EXIT_FAILURE : EXIT_SUCCESS;
}
