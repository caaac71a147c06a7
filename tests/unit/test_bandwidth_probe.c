/* SPDX-License-Identifier: MIT */
/*
 * The read-bandwidth probe of the GLM runtime (glm_probe_read_bandwidth,
 * glm-inference --bench): its working set is at least 4 x the host's
 * last-level cache (TX_LLC_BYTES here, so the test does not depend on the
 * machine): the model's weights when they are large enough, else a scratch
 * buffer of device memory, freed again; when the device has no room for it,
 * or the cache size is unknown, no figure and a reason. Not timed: figures
 * are only checked to be positive.
 *
 * Backend: $TX_DEVICE if set, else a 64 MiB tx8-emu started for this
 * program; the model is the tiny synthetic GLM-5.1 checkpoint.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm.h>
#include <tx/tx.h>

#include "test_runtime_synth.h"
#include "tx_test_main.h"

#define MIB (1ull << 20)

static char g_smd[256];
static tx_device_t *dev;
static glm_model_t *model;
static uint64_t weights;

static void fixture_setup(void)
{
    if (rts_device_setup("64M"))
        ck_abort_msg("cannot start tx8-emu");
    const char *d = rts_tmpdir();
    char ck[300];
    snprintf(ck, sizeof(ck), "%s/ck", d);
    snprintf(g_smd, sizeof(g_smd), "%s/m.smd", d);
    if (rts_write_checkpoint(ck, GLM_ARCH_GLM_MOE_DSA, NULL) || rts_export(ck, g_smd, "none"))
        ck_abort_msg("cannot make the model");
}

static void fixture_teardown(void)
{
    rts_device_teardown();
    rts_cleanup();
}

/* per test (in its own process): the device and the model */
static void open_model(void)
{
    OK(tx_device_open(rts_spec, &dev));
    OK(glm_model_load(dev, g_smd, NULL, &model));
    struct glm_model_info mi;
    OK(glm_model_info(model, &mi));
    weights = mi.weights_bytes;
    ck_assert_uint_gt(weights, 16 * 1024);
    ck_assert_uint_lt(weights, 8 * MIB);
}

static void close_model(void)
{
    glm_model_free(model);
    tx_device_close(dev);
    unsetenv("TX_LLC_BYTES");
}

static uint64_t mem_used(void)
{
    struct tx_device_info di;
    OK(tx_device_info(dev, &di));
    return di.mem_used;
}

/* a tiny LLC: the weights are >= 4 x LLC and are read themselves */
START_TEST(reads_the_weights)
{
    setenv("TX_LLC_BYTES", "4K", 1);
    struct glm_read_bandwidth r;
    OK(glm_probe_read_bandwidth(model, 2, 2, &r));
    ck_assert_msg(r.refused[0] == 0, "%s", r.refused);
    ck_assert_int_eq(r.scratch, 0);
    ck_assert_uint_eq(r.llc_bytes, 4096);
    ck_assert_uint_eq(r.min_working_set, 16384);
    ck_assert_uint_ge(r.working_set, r.min_working_set);
    ck_assert_uint_le(r.working_set, weights);
    ck_assert_str_eq(r.llc_source, "TX_LLC_BYTES");
    ck_assert_int_eq(r.threads, 2);
    ck_assert(r.gbs > 0);
}
END_TEST

/* weights smaller than 4 x LLC: a scratch buffer of exactly 4 x LLC,
 * freed by the call */
START_TEST(scratch_buffer)
{
    setenv("TX_LLC_BYTES", "4M", 1);
    uint64_t before = mem_used();
    struct glm_read_bandwidth r;
    OK(glm_probe_read_bandwidth(model, 0, 2, &r));
    ck_assert_msg(r.refused[0] == 0, "%s", r.refused);
    ck_assert_int_eq(r.scratch, 1);
    ck_assert_uint_eq(r.working_set, 16 * MIB);
    ck_assert_uint_eq(r.llc_level, 0);
    ck_assert_int_gt(r.threads, 0);
    ck_assert(r.gbs > 0);
    ck_assert_uint_eq(mem_used(), before);
    /* the one-figure form, with a larger request than 4 x LLC */
    double g = 0;
    OK(glm_measure_read_bandwidth(model, 1, 20 * MIB, 1, &g));
    ck_assert(g > 0);
    ck_assert_uint_eq(mem_used(), before);
}
END_TEST

/* 4 x LLC does not fit in the 64 MiB device: no figure, a reason */
START_TEST(device_too_small)
{
    if (!rts_own_emu)
        return; /* another backend's memory size is not known here */
    setenv("TX_LLC_BYTES", "32M", 1);
    uint64_t before = mem_used();
    struct glm_read_bandwidth r;
    OK(glm_probe_read_bandwidth(model, 0, 1, &r));
    ck_assert(r.gbs == 0);
    ck_assert_msg(strstr(r.refused, "device memory too small") &&
                      strstr(r.refused, "needs 128.0 MiB") && strstr(r.refused, "--memory"),
                  "%s", r.refused);
    ck_assert_uint_eq(r.llc_bytes, 32 * MIB);
    ck_assert_uint_eq(mem_used(), before);
    double g = 1;
    ck_assert_int_eq(glm_measure_read_bandwidth(model, 0, 0, 1, &g), TX_ENOTSUP);
    ck_assert(g == 1);
    ck_assert_msg(strstr(tx_last_error(), "device memory too small"), "%s", tx_last_error());
}
END_TEST

/* an unusable cache size: no figure, a reason naming the variable */
START_TEST(bad_llc_override)
{
    setenv("TX_LLC_BYTES", "lots", 1);
    struct glm_read_bandwidth r;
    OK(glm_probe_read_bandwidth(model, 0, 1, &r));
    ck_assert(r.gbs == 0);
    ck_assert_uint_eq(r.llc_bytes, 0);
    ck_assert_msg(strstr(r.refused, "last-level cache size unknown") &&
                      strstr(r.refused, "TX_LLC_BYTES: invalid cache size 'lots'"),
                  "%s", r.refused);
    double g = 0;
    ck_assert_int_eq(glm_measure_read_bandwidth(model, 0, 0, 1, &g), TX_ENOTSUP);
}
END_TEST

START_TEST(null_arguments)
{
    struct glm_read_bandwidth r;
    double g;
    ck_assert_int_eq(glm_probe_read_bandwidth(NULL, 0, 1, &r), TX_EINVAL);
    ck_assert_int_eq(glm_probe_read_bandwidth(model, 0, 1, NULL), TX_EINVAL);
    ck_assert_int_eq(glm_measure_read_bandwidth(NULL, 0, 0, 1, &g), TX_EINVAL);
    ck_assert_int_eq(glm_measure_read_bandwidth(model, 0, 0, 1, NULL), TX_EINVAL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bandwidth_probe");
    TCase *tc = tcase_create("probe");
    tcase_set_timeout(tc, 60);
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_add_checked_fixture(tc, open_model, close_model);
    tcase_add_test(tc, reads_the_weights);
    tcase_add_test(tc, scratch_buffer);
    tcase_add_test(tc, device_too_small);
    tcase_add_test(tc, bad_llc_override);
    tcase_add_test(tc, null_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run_emu(suite());
}
