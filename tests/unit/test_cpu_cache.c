// SPDX-License-Identifier: MIT
/*
 * The host cache topology reader (libtx/common/cpu_cache.c) on fake sysfs
 * trees made in a temporary directory: one shared L3, several LLC
 * instances (summed), shared_cpu_map instead of shared_cpu_list, missing and
 * malformed files, the size syntax, the overrides (--llc, TX_LLC_BYTES) and
 * the 4 x LLC working-set rule with its refusal messages.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tx_test_tmp.h"

#include <tx-internal/tx_cpu_cache.h>
#include "tx_test_main.h"

#define MIB (1ull << 20)

static char root[256];

static void setup(void)
{
    unsetenv(TX_LLC_ENV);
    snprintf(root, sizeof(root), "/tmp/tx-cpu-cache.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void)
{
    tx_test_rmtree(root);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f, "%s: %s", path, strerror(errno));
    fprintf(f, "%s\n", text);
    fclose(f);
}

/* ROOT/cpuC/cache/indexI with the given files; NULL: the file is absent */
static void cache(int cpu, int idx, const char *level, const char *type, const char *size,
                  const char *list)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/cpu%d", root, cpu);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/cpu%d/cache", root, cpu);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/cpu%d/cache/index%d", root, cpu, idx);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    char f[600];
    if (level) {
        snprintf(f, sizeof(f), "%s/level", p);
        put(f, level);
    }
    if (type) {
        snprintf(f, sizeof(f), "%s/type", p);
        put(f, type);
    }
    if (size) {
        snprintf(f, sizeof(f), "%s/size", p);
        put(f, size);
    }
    if (list) {
        snprintf(f, sizeof(f), "%s/shared_cpu_list", p);
        put(f, list);
    }
}

/* a CPU with private L1d/L1i/L2 and an L3 shared by l3_list */
static void cpu_std(int cpu, const char *l3_size, const char *l3_list)
{
    char own[16];
    snprintf(own, sizeof(own), "%d", cpu);
    cache(cpu, 0, "1", "Data", "32K", own);
    cache(cpu, 1, "1", "Instruction", "32K", own);
    cache(cpu, 2, "2", "Unified", "1024K", own);
    cache(cpu, 3, "3", "Unified", l3_size, l3_list);
}

START_TEST(size_syntax)
{
    uint64_t v;
    ck_assert_int_eq(tx_llc_parse_size("32768K", &v), 0);
    ck_assert_uint_eq(v, 32 * MIB);
    ck_assert_int_eq(tx_llc_parse_size("480M", &v), 0);
    ck_assert_uint_eq(v, 480 * MIB);
    ck_assert_int_eq(tx_llc_parse_size("480MiB", &v), 0);
    ck_assert_uint_eq(v, 480 * MIB);
    ck_assert_int_eq(tx_llc_parse_size("2g", &v), 0);
    ck_assert_uint_eq(v, 2048 * MIB);
    ck_assert_int_eq(tx_llc_parse_size("512kb", &v), 0);
    ck_assert_uint_eq(v, 512 * 1024);
    ck_assert_int_eq(tx_llc_parse_size("33554432", &v), 0);
    ck_assert_uint_eq(v, 32 * MIB);
    ck_assert_int_eq(tx_llc_parse_size("1T", &v), 0);
    ck_assert_uint_eq(v, TX_LLC_MAX);
    static const char *const bad[] = {"",
                                      "K",
                                      "-1",
                                      "1.5M",
                                      "12X",
                                      "12 M",
                                      "12MiBx",
                                      "2T",
                                      "99999999999999999999",
                                      "1099511627777"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 7;
        ck_assert_msg(tx_llc_parse_size(bad[i], &v) == -1, "'%s' accepted", bad[i]);
        ck_assert_uint_eq(v, 7);
    }
    ck_assert_int_eq(tx_llc_parse_size(NULL, &v), -1);
}
END_TEST

/* this machine's layout: 2 CPUs, one L3 shared by both */
START_TEST(one_shared_l3)
{
    cpu_std(0, "32768K", "0-1");
    cpu_std(1, "32768K", "0-1");
    /* directories that are not CPUs, and a CPU without cache information */
    char p[512];
    snprintf(p, sizeof(p), "%s/cpufreq", root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/cpu2", root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/online", root);
    put(p, "0-1");
    struct tx_llc l;
    ck_assert_int_eq(tx_llc_read_sysfs(root, &l), 0);
    ck_assert_uint_eq(l.bytes, 32 * MIB);
    ck_assert_uint_eq(l.instance_bytes, 32 * MIB);
    ck_assert_uint_eq(l.level, 3);
    ck_assert_uint_eq(l.instances, 1);
    ck_assert_str_eq(l.source, "sysfs");
    ck_assert_uint_eq(tx_llc_min_working_set(&l), 128 * MIB);
    char d[256];
    tx_llc_describe(&l, d, sizeof(d));
    ck_assert_str_eq(d, "32.0 MiB (L3, 1 instance of 32.0 MiB, sysfs)");
}
END_TEST

/* one L3 per CCX: the instances add up (a working set spread over the
 * cores is spread over all of them) */
START_TEST(several_llc_instances)
{
    for (int c = 0; c < 8; c++)
        cpu_std(c, "32768K", c < 4 ? "0-3" : "4-7");
    struct tx_llc l;
    ck_assert_int_eq(tx_llc_read_sysfs(root, &l), 0);
    ck_assert_uint_eq(l.bytes, 64 * MIB);
    ck_assert_uint_eq(l.instances, 2);
    ck_assert_uint_eq(l.instance_bytes, 32 * MIB);
    ck_assert_uint_eq(tx_llc_min_working_set(&l), 256 * MIB);
}
END_TEST

/* 15 instances of 32 MiB: the 480 MiB L3 of the machine kind */
START_TEST(llc_480_mib)
{
    for (int c = 0; c < 30; c++) {
        char list[32];
        snprintf(list, sizeof(list), "%d-%d", c / 2 * 2, c / 2 * 2 + 1);
        cpu_std(c, "32768K", list);
    }
    struct tx_llc l;
    ck_assert_int_eq(tx_llc_read_sysfs(root, &l), 0);
    ck_assert_uint_eq(l.bytes, 480 * MIB);
    ck_assert_uint_eq(l.instances, 15);
    ck_assert_uint_eq(tx_llc_min_working_set(&l), 1920 * MIB);
    char why[256];
    ck_assert_int_eq(tx_llc_check(&l, 256 * MIB, why, sizeof(why)), 0);
    ck_assert_str_eq(why, "working set 256.0 MiB < 4 x LLC (4 x 480.0 MiB = 1920.0 MiB): the "
                          "figure would include cache hits");
    ck_assert_int_eq(tx_llc_check(&l, 1920 * MIB, why, sizeof(why)), 1);
    ck_assert_str_eq(why, "");
}
END_TEST

/* a two-level machine: the L2 is the LLC; per-CPU caches count per CPU */
START_TEST(llc_is_highest_level)
{
    cache(0, 0, "1", "Data", "48K", "0");
    cache(0, 1, "1", "Instruction", "32K", "0");
    cache(0, 2, "2", "Unified", "2048K", "0");
    cache(1, 0, "1", "Data", "48K", "1");
    cache(1, 1, "1", "Instruction", "32K", "1");
    cache(1, 2, "2", "Unified", "2048K", "1");
    /* an instruction cache of a higher level does not count */
    cache(1, 3, "4", "Instruction", "64M", "0-1");
    struct tx_llc l;
    ck_assert_int_eq(tx_llc_read_sysfs(root, &l), 0);
    ck_assert_uint_eq(l.level, 2);
    ck_assert_uint_eq(l.bytes, 4 * MIB);
    ck_assert_uint_eq(l.instances, 2);
}
END_TEST

START_TEST(shared_cpu_map_fallback)
{
    for (int c = 0; c < 2; c++) {
        cache(c, 0, "1", "Data", "32K", NULL);
        cache(c, 3, "3", "Unified", "16M", NULL);
        char p[512];
        snprintf(p, sizeof(p), "%s/cpu%d/cache/index3/shared_cpu_map", root, c);
        put(p, "00000003");
    }
    struct tx_llc l;
    ck_assert_int_eq(tx_llc_read_sysfs(root, &l), 0);
    ck_assert_uint_eq(l.bytes, 16 * MIB);
    ck_assert_uint_eq(l.instances, 1);
}
END_TEST

static void expect_error(const char *part)
{
    struct tx_llc l;
    memset(&l, 0x55, sizeof(l));
    ck_assert_int_eq(tx_llc_read_sysfs(root, &l), -1);
    ck_assert_uint_eq(l.bytes, 0);
    ck_assert_msg(strstr(l.error, part), "error '%s' does not mention '%s'", l.error, part);
    /* and no bandwidth figure from it */
    char why[512];
    ck_assert_int_eq(tx_llc_check(&l, 1ull << 40, why, sizeof(why)), 0);
    ck_assert_msg(strstr(why, "LLC size unknown") && strstr(why, part), "%s", why);
    ck_assert_uint_eq(tx_llc_min_working_set(&l), 0);
}

START_TEST(missing_root)
{
    strcat(root, "/absent");
    expect_error("cannot read");
    root[strlen(root) - strlen("/absent")] = 0;
}
END_TEST

START_TEST(no_caches)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/cpu0", root);
    mkdir(p, 0755);
    expect_error("no CPU cache described");
}
END_TEST

START_TEST(missing_size)
{
    cpu_std(0, "32768K", "0-1");
    cache(1, 3, "3", "Unified", NULL, "0-1");
    expect_error("cpu1/cache/index3/size");
}
END_TEST

START_TEST(missing_level)
{
    cpu_std(0, "32768K", "0-1");
    cache(1, 3, NULL, "Unified", "32768K", "0-1");
    expect_error("cpu1/cache/index3/level");
}
END_TEST

START_TEST(missing_type)
{
    cache(0, 0, "1", NULL, "32K", "0");
    expect_error("cpu0/cache/index0/type");
}
END_TEST

START_TEST(bad_size)
{
    cache(0, 3, "3", "Unified", "lots", "0-1");
    expect_error("invalid cache size 'lots'");
}
END_TEST

START_TEST(bad_level)
{
    cache(0, 3, "L3", "Unified", "32M", "0-1");
    expect_error("invalid cache level 'L3'");
}
END_TEST

/* without the sharing information the instances cannot be counted: no
 * guess (private caches below the LLC may lack it) */
START_TEST(llc_without_sharing)
{
    cache(0, 0, "1", "Data", "32K", NULL);
    cache(0, 3, "3", "Unified", "32M", NULL);
    expect_error("neither shared_cpu_list nor shared_cpu_map");
}
END_TEST

START_TEST(rule_and_refusal)
{
    struct tx_llc l;
    memset(&l, 0, sizeof(l));
    l.bytes = l.instance_bytes = 32 * MIB;
    l.level = 3;
    l.instances = 1;
    strcpy(l.source, "sysfs");
    char why[256];
    ck_assert_int_eq(tx_llc_check(&l, 128 * MIB, why, sizeof(why)), 1);
    ck_assert_int_eq(tx_llc_check(&l, 256 * MIB, NULL, 0), 1);
    ck_assert_int_eq(tx_llc_check(&l, 128 * MIB - 1, why, sizeof(why)), 0);
    ck_assert_msg(strstr(why, "< 4 x LLC") && strstr(why, "cache hits"), "%s", why);
    ck_assert_int_eq(tx_llc_check(&l, 0, NULL, 0), 0);
    ck_assert_int_eq(tx_llc_check(NULL, 1ull << 40, why, sizeof(why)), 0);
    ck_assert_msg(strstr(why, "LLC size unknown"), "%s", why);
}
END_TEST

START_TEST(overrides)
{
    cpu_std(0, "32768K", "0-1");
    cpu_std(1, "32768K", "0-1");
    struct tx_llc l;
    int bad = -1;
    /* sysfs */
    ck_assert_int_eq(tx_llc_resolve(NULL, root, &l, &bad), 0);
    ck_assert_int_eq(bad, 0);
    ck_assert_uint_eq(l.bytes, 32 * MIB);
    /* the environment replaces sysfs */
    setenv(TX_LLC_ENV, "480M", 1);
    ck_assert_int_eq(tx_llc_resolve(NULL, root, &l, &bad), 0);
    ck_assert_uint_eq(l.bytes, 480 * MIB);
    ck_assert_str_eq(l.source, TX_LLC_ENV);
    ck_assert_uint_eq(l.level, 0);
    char d[256];
    tx_llc_describe(&l, d, sizeof(d));
    ck_assert_str_eq(d, "480.0 MiB (TX_LLC_BYTES)");
    /* an option replaces the environment */
    ck_assert_int_eq(tx_llc_resolve("1G", root, &l, &bad), 0);
    ck_assert_uint_eq(l.bytes, 1024 * MIB);
    ck_assert_str_eq(l.source, "--llc");
    /* an override also works where sysfs cannot be read */
    ck_assert_int_eq(tx_llc_resolve("8M", "/nonexistent/tx8", &l, &bad), 0);
    ck_assert_uint_eq(l.bytes, 8 * MIB);
    /* bad overrides are errors, never a silent fallback to sysfs */
    ck_assert_int_eq(tx_llc_resolve("0", root, &l, &bad), -1);
    ck_assert_int_eq(bad, 1);
    ck_assert_uint_eq(l.bytes, 0);
    ck_assert_msg(strstr(l.error, "--llc: invalid cache size '0'"), "%s", l.error);
    setenv(TX_LLC_ENV, "big", 1);
    ck_assert_int_eq(tx_llc_resolve(NULL, root, &l, &bad), -1);
    ck_assert_int_eq(bad, 1);
    ck_assert_msg(strstr(l.error, "TX_LLC_BYTES: invalid cache size 'big'"), "%s", l.error);
    /* an empty variable is unset */
    setenv(TX_LLC_ENV, "", 1);
    ck_assert_int_eq(tx_llc_resolve(NULL, root, &l, &bad), 0);
    ck_assert_uint_eq(l.bytes, 32 * MIB);
    /* sysfs failure: not a usage error */
    ck_assert_int_eq(tx_llc_resolve(NULL, "/nonexistent/tx8", &l, &bad), -1);
    ck_assert_int_eq(bad, 0);
    ck_assert_msg(strstr(l.error, "cannot read /nonexistent/tx8"), "%s", l.error);
    unsetenv(TX_LLC_ENV);
}
END_TEST

/* the real sysfs of the machine running the test: readable here, or a
 * clear error (containers may hide it); never a crash or a zero size with
 * success */
START_TEST(real_sysfs)
{
    struct tx_llc l;
    int rc = tx_llc_read_sysfs(NULL, &l);
    if (rc == 0) {
        ck_assert_uint_gt(l.bytes, 0);
        ck_assert_uint_gt(l.instances, 0);
    } else {
        ck_assert_uint_eq(l.bytes, 0);
        ck_assert_uint_gt(strlen(l.error), 0);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cpu_cache");
    TCase *tc = tcase_create("topology");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, size_syntax);
    tcase_add_test(tc, one_shared_l3);
    tcase_add_test(tc, several_llc_instances);
    tcase_add_test(tc, llc_480_mib);
    tcase_add_test(tc, llc_is_highest_level);
    tcase_add_test(tc, shared_cpu_map_fallback);
    tcase_add_test(tc, missing_root);
    tcase_add_test(tc, no_caches);
    tcase_add_test(tc, missing_size);
    tcase_add_test(tc, missing_level);
    tcase_add_test(tc, missing_type);
    tcase_add_test(tc, bad_size);
    tcase_add_test(tc, bad_level);
    tcase_add_test(tc, llc_without_sharing);
    tcase_add_test(tc, rule_and_refusal);
    tcase_add_test(tc, overrides);
    tcase_add_test(tc, real_sysfs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
