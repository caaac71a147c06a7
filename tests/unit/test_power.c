/* SPDX-License-Identifier: MIT */
/*
 * The device power model (docs/hardware.md section 7) and its counters
 * (issue 41): per-command energies add up to the counter, an idle device
 * draws exactly its static power, INT8 costs less per MAC than FP16, the
 * energy counters never go backwards, and a power cap lowers the modelled
 * clock so that jobs take as long as the model says.
 */
#include <check.h>
#include <math.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx.h>

#include "engine/power.h"
#include "tx_test_emu.h"
#include "tx_test_main.h"

#define TX_OKAY(expr)                                                                              \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        ck_assert_msg(rc_ == TX_OK, "%s = %d (%s): %s", #expr, rc_, tx_strerror(rc_),              \
                      tx_last_error());                                                            \
    } while (0)

/* Static power of the test devices: not the default, so that the test
 * sees the command-line override work. */
#define STATIC_MW 2345

static struct tx_test_emu g_emu;
static char g_spec[300];

static void fixture_setup(void)
{
    if (tx_test_emu_start(&g_emu, "256M", "--cores", "2", "--power", "static-mw=2345", NULL))
        ck_abort_msg("cannot start tx8-emu");
    snprintf(g_spec, sizeof(g_spec), "%s", g_emu.spec);
}

static void fixture_teardown(void)
{
    tx_test_emu_stop(&g_emu);
}

static struct tx_device_counters read_counters(tx_device_t *dev)
{
    struct tx_device_counters c;

    TX_OKAY(tx_device_counters(dev, &c));
    return c;
}

/* The buffers of one matmul of N x K weights of dtype wdt, T tokens. */
struct mm {
    tx_bo_t *x, *w, *sc, *y, *prof;
    uint32_t T, K, N;
    uint16_t wdt, act;
};

static size_t dtype_size(uint16_t dt)
{
    return dt == TX8_DTYPE_F32 ? 4 : dt == TX8_DTYPE_I8 ? 1 : 2;
}

static void mm_init(tx_device_t *dev, struct mm *m, uint32_t T, uint32_t K, uint32_t N,
                    uint16_t wdt, uint16_t act)
{
    void *p;

    memset(m, 0, sizeof(*m));
    m->T = T, m->K = K, m->N = N, m->wdt = wdt, m->act = act;
    TX_OKAY(tx_bo_alloc(dev, (uint64_t)T * K * 4, 0, "pw-x", &m->x));
    TX_OKAY(tx_bo_alloc(dev, (uint64_t)N * K * dtype_size(wdt), 0, "pw-w", &m->w));
    TX_OKAY(tx_bo_alloc(dev, (uint64_t)N * 4, 0, "pw-scales", &m->sc));
    TX_OKAY(tx_bo_alloc(dev, (uint64_t)T * N * 4, 0, "pw-y", &m->y));
    TX_OKAY(tx_bo_alloc(dev, 1 << 16, 0, "pw-prof", &m->prof));
    TX_OKAY(tx_bo_map(m->x, &p));
    for (uint32_t i = 0; i < T * K; i++)
        ((float *)p)[i] = (float)((int)(i % 17) - 8) / 8.0f;
    TX_OKAY(tx_bo_map(m->sc, &p));
    for (uint32_t i = 0; i < N; i++)
        ((float *)p)[i] = 0.01f;
}

static void mm_free(struct mm *m)
{
    tx_bo_free(m->x);
    tx_bo_free(m->w);
    tx_bo_free(m->sc);
    tx_bo_free(m->y);
    tx_bo_free(m->prof);
}

/* Run `reps` matmuls as one profiled job; the profile header is returned
 * (records follow it), *res the completion. */
static const struct tx8_prof_header *mm_run(tx_device_t *dev, struct mm *m, int reps,
                                            struct tx_job_result *res)
{
    struct tx_matmul_args a;
    tx_cmdbuf_t *cb;
    tx_job_t job;
    void *map;

    memset(&a, 0, sizeof(a));
    a.y = tx_ref(m->y, 0);
    a.x = tx_ref(m->x, 0);
    a.w.data = tx_ref(m->w, 0);
    if (m->wdt == TX8_DTYPE_I8)
        a.w.scales = tx_ref(m->sc, 0);
    a.w.rows = m->N;
    a.w.cols = m->K;
    a.w.dtype = m->wdt;
    a.w.format = TX8_WFMT_DENSE;
    a.tokens = m->T;
    a.ld_x = m->K;
    a.ld_y = m->N;
    a.act_dtype = m->act;
    TX_OKAY(tx_cmdbuf_create(dev, &cb));
    for (int i = 0; i < reps; i++)
        TX_OKAY(tx_cmd_matmul(cb, &a));
    TX_OKAY(tx_cmdbuf_profile(cb, m->prof, 0, 1 << 16));
    TX_OKAY(tx_submit_ex(dev, cb, TX_SUBMIT_PROFILE, 0, &job));
    TX_OKAY(tx_wait(dev, job, -1, res));
    tx_cmdbuf_destroy(cb);
    TX_OKAY(tx_bo_map(m->prof, &map));
    ck_assert_uint_eq(((const struct tx8_prof_header *)map)->count, (unsigned)reps);
    return map;
}

static uint64_t records_energy(const struct tx8_prof_header *h)
{
    const struct tx8_prof_record *r = (const void *)(h + 1);
    uint64_t sum = 0;

    for (uint32_t i = 0; i < h->count; i++) {
        ck_assert_uint_gt(r[i].energy_pj, 0);
        sum += r[i].energy_pj;
    }
    ck_assert_uint_eq(sum, h->energy_pj);
    return sum;
}

/* The model's own figures: INT8 < BF16/FP16 < FP32 per MAC, sparse-skipped
 * work (not executed) costs nothing, a cap lowers the clock. */
START_TEST(model_orders_precisions)
{
    struct tx8_power_model m;
    struct tx8_power_cost i8, f16, f32, none, capped;
    char err[160];

    tx8_power_defaults(&m);
    tx8_power_command(&m, 1000000, TX8_DTYPE_I8, 0, 0, &i8);
    tx8_power_command(&m, 1000000, TX8_DTYPE_F16, 0, 0, &f16);
    tx8_power_command(&m, 1000000, TX8_DTYPE_F32, 0, 0, &f32);
    ck_assert(i8.dynamic_pj < f16.dynamic_pj && f16.dynamic_pj < f32.dynamic_pj);
    /* FP8 weights: their own energy per MAC (between INT8 and FP16), at
     * the INT8 datapath's rate */
    struct tx8_power_cost f8;
    tx8_power_command(&m, 1000000, TX8_DTYPE_F8_E4M3, 0, 0, &f8);
    ck_assert(fabs(f8.dynamic_pj - 1e6 * m.pj_per_mac_fp8) < 1e-6 * f8.dynamic_pj);
    ck_assert(i8.dynamic_pj < f8.dynamic_pj && f8.dynamic_pj < f16.dynamic_pj);
    ck_assert(f8.time_ns == i8.time_ns);
    tx8_power_command(&m, 0, TX8_DTYPE_I8, 0, 0, &none);
    ck_assert(none.energy_pj == 0 && none.time_ns == 0);
    ck_assert(f16.clock_scale == 1.0);
    m.cap_mw = m.static_mw + 1;
    tx8_power_command(&m, 1000000, TX8_DTYPE_F16, 0, 0, &capped);
    ck_assert(capped.clock_scale < 1.0);
    ck_assert(fabs(capped.time_ns - f16.time_ns / capped.clock_scale) < 1e-6 * capped.time_ns);
    ck_assert(capped.dynamic_pj == f16.dynamic_pj);
    /* overrides and their errors */
    ck_assert_int_eq(tx8_power_set(&m, "int8-pj-per-mac=0.5", err, sizeof(err)), 0);
    ck_assert(m.pj_per_mac[TX8_DTYPE_I8] == 0.5);
    ck_assert_int_eq(tx8_power_set(&m, "int8-pj-per-mac=-1", err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "int8-pj-per-mac"));
    ck_assert_int_eq(tx8_power_set(&m, "nonsense=1", err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "nonsense"));
    ck_assert_int_eq(tx8_power_set(&m, "static-mw", err, sizeof(err)), -1);
}
END_TEST

/* Per-command energies of a run, as the completion records carry them
 * (interface 1.9, tx_job_energy), add up to the counter delta (within 1%);
 * each record's is the sum of its profiled commands', and each of those is
 * what the model says for its MACs and bytes. */
START_TEST(commands_add_up_to_counter)
{
    tx_device_t *dev;
    struct tx_job_result res;
    struct mm m;
    struct tx8_power_model model;
    uint64_t sum = 0;

    TX_OKAY(tx_device_open(g_spec, &dev));
    mm_init(dev, &m, 16, 1024, 1024, TX8_DTYPE_F32, TX8_DTYPE_F32);
    struct tx_device_counters c0 = read_counters(dev);
    for (int j = 0; j < 5; j++) {
        const struct tx8_prof_header *h = mm_run(dev, &m, 4, &res);
        const struct tx8_prof_record *r = (const void *)(h + 1);
        uint64_t job_pj = 0;

        TX_OKAY(tx_job_energy(dev, res.job, &job_pj));
        ck_assert_uint_eq(job_pj, records_energy(h));
        sum += job_pj;
        /* the model's figure for the record's work (the first command also
         * carries the descriptor and the completion over the link) */
        tx8_power_defaults(&model);
        model.static_mw = STATIC_MW;
        for (uint32_t i = 1; i < h->count; i++) {
            struct tx8_power_cost cost;

            tx8_power_command(&model, r[i].macs, TX8_DTYPE_F32,
                              r[i].bytes_read + r[i].bytes_written,
                              sizeof(struct tx8_cmd_matmul), &cost);
            ck_assert_msg(fabs((double)r[i].energy_pj - cost.energy_pj) <= 1.0,
                          "record %u: %llu pJ, model %.1f pJ", i,
                          (unsigned long long)r[i].energy_pj, cost.energy_pj);
        }
    }
    uint64_t e;
    ck_assert_int_eq(tx_job_energy(dev, 0, &e), TX_EINVAL);
    ck_assert_int_eq(tx_job_energy(dev, res.job + 1000, &e), TX_ENOENT);
    ck_assert_int_eq(tx_job_energy(dev, res.job, NULL), TX_EINVAL);
    struct tx_device_counters c1 = read_counters(dev);
    double delta_pj = (double)(c1.dev.energy_active_uj - c0.dev.energy_active_uj) * 1e6;
    ck_assert_msg(fabs(delta_pj - (double)sum) <= 0.01 * (double)sum,
                  "completion records %llu pJ, counter delta %.0f pJ", (unsigned long long)sum,
                  delta_pj);
    ck_assert(sum > 100000000ull); /* > 100 uJ: the 1 uJ counter resolution is < 1% */
    /* the board counter includes the active energy's dynamic part; it is
     * sampled on the emulator's 10 ms power tick (emu/server/device.c), and
     * five small jobs can finish within one tick: read it after 5 ticks */
    struct timespec tick5 = {0, 50 * 1000 * 1000};
    nanosleep(&tick5, NULL);
    c1 = read_counters(dev);
    ck_assert_uint_ge(c1.dev.energy_uj - c0.dev.energy_uj,
                      (c1.dev.energy_active_uj - c0.dev.energy_active_uj) / 2);
    mm_free(&m);
    tx_device_close(dev);
}
END_TEST

/* INT8 work costs less energy per MAC than FP16, as the model says. */
START_TEST(int8_cheaper_than_fp16)
{
    tx_device_t *dev;
    struct tx_job_result res;
    struct mm a, b;
    double per_mac[2];

    TX_OKAY(tx_device_open(g_spec, &dev));
    mm_init(dev, &a, 8, 512, 512, TX8_DTYPE_I8, TX8_DTYPE_I8);
    mm_init(dev, &b, 8, 512, 512, TX8_DTYPE_F16, TX8_DTYPE_F16);
    struct mm *mms[2] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        const struct tx8_prof_header *h = mm_run(dev, mms[k], 2, &res);
        const struct tx8_prof_record *r = (const void *)(h + 1);

        ck_assert_uint_eq(r[1].macs, 8ull * 512 * 512);
        per_mac[k] = (double)r[1].energy_pj / (double)r[1].macs;
    }
    ck_assert_msg(per_mac[0] < per_mac[1], "INT8 %.4f pJ/MAC, FP16 %.4f pJ/MAC", per_mac[0],
                  per_mac[1]);
    mm_free(&a);
    mm_free(&b);
    tx_device_close(dev);
}
END_TEST

/* An idle device draws exactly its static power; its energy grows by it. */
START_TEST(idle_draws_static_power)
{
    tx_device_t *dev;

    TX_OKAY(tx_device_open(g_spec, &dev));
    tx_test_emu_sleep_ms(1200); /* a full 1 s average window without jobs */
    struct tx_device_counters c0 = read_counters(dev);
    tx_test_emu_sleep_ms(500);
    struct tx_device_counters c1 = read_counters(dev);
    ck_assert_uint_eq(c1.dev.power_mw, STATIC_MW);
    ck_assert_uint_eq(c1.dev.power_avg_mw, STATIC_MW);
    double dt_ns = (double)(c1.clock_ns - c0.clock_ns);
    double de_uj = (double)(c1.dev.energy_uj - c0.dev.energy_uj);
    ck_assert_msg(fabs(de_uj - STATIC_MW * dt_ns / 1e6) <= 0.01 * STATIC_MW * dt_ns / 1e6 + 2,
                  "%.0f uJ over %.0f ns", de_uj, dt_ns);
    tx_device_close(dev);
}
END_TEST

/* The energy counters never go backwards: across jobs, a queue reset, a
 * failed job and a client reconnecting. */
START_TEST(counters_monotonic)
{
    tx_device_t *dev;
    struct tx_job_result res;
    struct mm m;
    uint64_t last = 0, last_active = 0;

    TX_OKAY(tx_device_open(g_spec, &dev));
    mm_init(dev, &m, 4, 256, 256, TX8_DTYPE_F32, TX8_DTYPE_F32);
    for (int step = 0; step < 6; step++) {
        struct tx_device_counters c = read_counters(dev);

        ck_assert_uint_ge(c.dev.energy_uj, last);
        ck_assert_uint_ge(c.dev.energy_active_uj, last_active);
        last = c.dev.energy_uj;
        last_active = c.dev.energy_active_uj;
        switch (step % 3) {
        case 0:
            mm_run(dev, &m, 2, &res);
            break;
        case 1:
            TX_OKAY(tx_device_reset(dev));
            break;
        default:
            TX_OKAY(tx_device_inject_fault(dev, TX_FAULT_ERROR, 0, 1));
            {
                tx_cmdbuf_t *cb;
                tx_job_t job;

                TX_OKAY(tx_cmdbuf_create(dev, &cb));
                TX_OKAY(tx_cmd_fill(cb, tx_ref(m.y, 0), 64, 0));
                TX_OKAY(tx_submit(dev, cb, &job));
                ck_assert_int_eq(tx_wait(dev, job, -1, NULL), TX_EJOB);
                tx_cmdbuf_destroy(cb);
            }
            break;
        }
        tx_test_emu_sleep_ms(30);
    }
    mm_free(&m);
    tx_device_close(dev);
    TX_OKAY(tx_device_open(g_spec, &dev));
    struct tx_device_counters c = read_counters(dev);
    ck_assert_uint_ge(c.dev.energy_uj, last);
    ck_assert_uint_ge(c.dev.energy_active_uj, last_active);
    tx_device_close(dev);
}
END_TEST

/* A power cap lowers the modelled clock: the job takes (at least) the
 * model's throttled time, the counters show the cap and the clock. */
START_TEST(power_cap_throttles)
{
    struct tx_test_emu emu;
    tx_device_t *dev;
    struct tx_job_result res;
    struct mm m;
    struct tx8_power_model model;
    double model_ns = 0;

    /* the cap 1 mW above the static power: commands run at a small
     * fraction of the nominal clock */
    if (tx_test_emu_start(&emu, "64M", "--cores", "1", "--power", "static-mw=2345",
                          "--power-cap", "2346", NULL))
        ck_abort_msg("cannot start tx8-emu");
    TX_OKAY(tx_device_open(emu.spec, &dev));
    mm_init(dev, &m, 4, 512, 512, TX8_DTYPE_F32, TX8_DTYPE_F32);
    const struct tx8_prof_header *h = mm_run(dev, &m, 3, &res);
    const struct tx8_prof_record *r = (const void *)(h + 1);
    tx8_power_defaults(&model);
    model.static_mw = STATIC_MW;
    model.cap_mw = STATIC_MW + 1;
    for (uint32_t i = 0; i < h->count; i++) {
        struct tx8_power_cost cost;

        tx8_power_command(&model, r[i].macs, TX8_DTYPE_F32, r[i].bytes_read + r[i].bytes_written,
                          0, &cost);
        ck_assert(cost.clock_scale < 0.01);
        model_ns += cost.time_ns;
    }
    ck_assert_msg((double)(res.end_ns - res.start_ns) >= 0.99 * model_ns,
                  "job %llu ns, throttled model %.0f ns", (unsigned long long)(res.end_ns -
                                                                               res.start_ns),
                  model_ns);
    struct tx_device_counters c = read_counters(dev);
    ck_assert_uint_eq(c.dev.power_cap_mw, STATIC_MW + 1);
    ck_assert_uint_lt(c.dev.clock_permille, 10);
    mm_free(&m);
    tx_device_close(dev);
    tx_test_emu_stop(&emu);
}
END_TEST

/* A bad parameter on the command line is refused with a message. */
START_TEST(bad_parameter_refused)
{
    struct tx_test_emu emu;

    ck_assert_int_ne(tx_test_emu_start(&emu, "64M", "--power", "fp16-pj-per-mac=abc", NULL), 0);
    tx_test_emu_stop(&emu);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("power");
    TCase *tc = tcase_create("core");

    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, model_orders_precisions);
    tcase_add_test(tc, commands_add_up_to_counter);
    tcase_add_test(tc, int8_cheaper_than_fp16);
    tcase_add_test(tc, idle_draws_static_power);
    tcase_add_test(tc, counters_monotonic);
    tcase_add_test(tc, power_cap_throttles);
    tcase_add_test(tc, bad_parameter_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run_emu(suite());
}
