/* SPDX-License-Identifier: MIT */
/*
 * tx-bench's working-set rule on small runs (16 MiB int8 matrix, 1 run):
 * with a last-level cache small enough (--llc 1M) the ratios are reported;
 * with one the matrix is not 4 x larger than (--llc 32M) the ratio is null
 * with a reason in --json and "-" in the table, while the read reference
 * is still sized to 4 x LLC; a bad --llc / TX_LLC_BYTES is a usage error.
 * Not timed: figures are only checked to be positive or absent.
 */
#include <check.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tx_test_emu.h"
#include "tx_test_main.h"

#define MIB (1ull << 20)
#define SMALL "-s 16 -k 1024 -d int8 -p 1 -r 1 -b 1 -t 1"

/* runs tx-bench ARGS (stderr to the test's stderr), returns its exit status
 * and stdout in *out (malloc'd) */
static int run(const char *env, const char *args, char **out)
{
    char bin[256], cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s %s %s", env ? env : "",
             tx_test_bin("tx-bench", bin, sizeof(bin)), args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    size_t r;
    while ((r = fread(buf + n, 1, cap - 1 - n, p)) > 0) {
        n += r;
        if (n + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
    }
    buf[n] = 0;
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    ck_assert_msg(json_object_object_get_ex(o, key, &v), "no key %s", key);
    return v;
}

START_TEST(ratio_reported_above_4x_llc)
{
    char *out;
    ck_assert_int_eq(run(NULL, SMALL " --llc 1M --json", &out), 0);
    json_object *j = json_tokener_parse(out);
    ck_assert_msg(j, "not JSON: %s", out);
    ck_assert_int_eq(json_object_get_int64(get(j, "llc_bytes")), (int64_t)MIB);
    ck_assert_str_eq(json_object_get_string(get(j, "llc_source")), "--llc");
    ck_assert_int_eq(json_object_get_int64(get(j, "min_working_set_bytes")), (int64_t)(4 * MIB));
    ck_assert_int_eq(json_object_get_int64(get(j, "weight_bytes")), (int64_t)(16 * MIB));
    ck_assert_int_ge(json_object_get_int64(get(j, "read_working_set_bytes")), (int64_t)(16 * MIB));
    ck_assert(json_object_get_double(get(j, "read_bandwidth_gbs")) > 0);
    ck_assert_ptr_null(get(j, "read_bandwidth_refused"));
    json_object *res = get(j, "results");
    ck_assert_int_eq((int)json_object_array_length(res), 1);
    json_object *r0 = json_object_array_get_idx(res, 0);
    ck_assert_str_eq(json_object_get_string(get(r0, "op")), "gemv");
    ck_assert_int_ge(json_object_get_int64(get(r0, "working_set_bytes")), (int64_t)(16 * MIB));
    ck_assert(json_object_get_double(get(r0, "ratio")) > 0);
    ck_assert_ptr_null(get(r0, "ratio_refused"));
    json_object_put(j);
    free(out);
}
END_TEST

START_TEST(ratio_refused_below_4x_llc)
{
    char *out;
    ck_assert_int_eq(run("TX_LLC_BYTES=32M", SMALL " --json", &out), 0);
    json_object *j = json_tokener_parse(out);
    ck_assert_msg(j, "not JSON: %s", out);
    ck_assert_str_eq(json_object_get_string(get(j, "llc_source")), "TX_LLC_BYTES");
    /* the read reference is sized to 4 x LLC, not to --size */
    ck_assert_int_ge(json_object_get_int64(get(j, "read_working_set_bytes")), (int64_t)(128 * MIB));
    ck_assert(json_object_get_double(get(j, "read_bandwidth_gbs")) > 0);
    json_object *r0 = json_object_array_get_idx(get(j, "results"), 0);
    ck_assert(json_object_get_double(get(r0, "gbs")) > 0);
    ck_assert_ptr_null(get(r0, "ratio"));
    const char *why = json_object_get_string(get(r0, "ratio_refused"));
    ck_assert_msg(why && strstr(why, "< 4 x LLC (4 x 32.0 MiB = 128.0 MiB)"), "%s", why);
    json_object_put(j);
    free(out);

    /* the table: "-" and the reason */
    ck_assert_int_eq(run(NULL, SMALL " --llc 32M", &out), 0);
    ck_assert_msg(strstr(out, "last-level cache: 32.0 MiB (--llc)"), "%s", out);
    ck_assert_msg(strstr(out, "|     - |"), "%s", out);
    ck_assert_msg(strstr(out, "ratio not reported (int8 1x16384x1024): working set"), "%s", out);
    free(out);
}
END_TEST

START_TEST(bad_llc)
{
    char *out;
    ck_assert_int_eq(run(NULL, SMALL " --llc 0 2>/dev/null", &out), 2);
    ck_assert_str_eq(out, "");
    free(out);
    ck_assert_int_eq(run("TX_LLC_BYTES=huge", SMALL " 2>/dev/null", &out), 2);
    ck_assert_str_eq(out, "");
    free(out);
    /* 4 x an absurd cache cannot fit in memory: a clear refusal */
    ck_assert_int_eq(run(NULL, SMALL " --llc 1T 2>&1", &out), 1);
    ck_assert_msg(strstr(out, "tx-bench: needs") && strstr(out, "last-level cache"), "%s", out);
    free(out);
}
END_TEST

/* every option error names the option and what it accepts (one line),
 * exit status 2, nothing on stdout: no wrap-around, no silent default */
START_TEST(bad_options)
{
    static const struct {
        const char *args, *want;
    } c[] = {
        {"-t 0", "tx-bench: -t: '0' is not an integer in [1, 64]"},
        {"-t 4294967297", "tx-bench: -t: '4294967297' is not an integer in [1, 64]"},
        {"-r nan", "tx-bench: -r: 'nan' is not an integer in [1, 1000]"},
        {"-s 1x", "tx-bench: -s: '1x' is not an integer in [1, 16384] (MiB)"},
        {"-k 100", "tx-bench: -k: '100' is not a multiple of 64"},
        {"-p 1,0", "tx-bench: -p: '0' is not an integer in [1, 65536]"},
        {"--density 101", "tx-bench: --density: '101' is not an integer in [1, 100]"},
        {"--isa sse9", "tx-bench: --isa: 'sse9' is not one of portable, avx2, avx512"},
        {"--vs sse9", "tx-bench: --vs: 'sse9' is not one of portable, avx2, avx512"},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        char args[128], *out;
        snprintf(args, sizeof(args), "%s 2>&1", c[i].args);
        ck_assert_int_eq(run(NULL, args, &out), 2);
        ck_assert_msg(strstr(out, c[i].want) == out, "%s: %s", c[i].args, out);
        free(out);
    }
}
END_TEST

/* --vs: the same MATMUL jobs on a second path, alternating: its time, its
 * GFLOP/s and the speed-up (its ms / this path's) per row, in the JSON and
 * as two more table columns */
START_TEST(vs_second_path)
{
    char *out;
    ck_assert_int_eq(run(NULL, "-s 4 -k 1024 -d int8,f32 -p 1,16 -r 2 -b 1 --llc 1M --vs portable "
                               "--json",
                         &out),
                     0);
    json_object *j = json_tokener_parse(out);
    ck_assert_msg(j, "not JSON: %s", out);
    ck_assert_str_eq(json_object_get_string(get(j, "vs_isa")), "portable");
    json_object *res = get(j, "results");
    ck_assert_int_eq((int)json_object_array_length(res), 4);
    for (size_t i = 0; i < 4; i++) {
        json_object *r = json_object_array_get_idx(res, i);
        double ms = json_object_get_double(get(r, "ms"));
        double vms = json_object_get_double(get(r, "vs_ms"));
        double sp = json_object_get_double(get(r, "speedup"));
        double fl = (double)json_object_get_int64(get(r, "flops"));
        ck_assert(ms > 0 && vms > 0);
        ck_assert_msg(fabs(sp - vms / ms) <= 1e-9 * sp, "speedup %g, vs_ms / ms %g", sp, vms / ms);
        ck_assert_msg(fabs(json_object_get_double(get(r, "vs_gflops")) - fl / vms / 1e6) <=
                          1e-6 * fl / vms / 1e6,
                      "vs_gflops");
    }
    json_object_put(j);
    free(out);
    /* without --vs: no such keys */
    ck_assert_int_eq(run(NULL, SMALL " --llc 1M --json", &out), 0);
    j = json_tokener_parse(out);
    ck_assert_ptr_nonnull(j);
    json_object *r0 = json_object_array_get_idx(get(j, "results"), 0), *v = NULL;
    ck_assert(!json_object_object_get_ex(r0, "speedup", &v));
    json_object_put(j);
    free(out);
    ck_assert_int_eq(run(NULL, "-s 4 -k 1024 -d int8 -p 16 -r 1 -b 1 --llc 1M --vs portable", &out),
                     0);
    ck_assert_msg(strstr(out, "| vs GFLOP/s | speed-up |") && strstr(out, "x |") &&
                      strstr(out, "the same jobs on the portable path"),
                  "%s", out);
    free(out);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tx_bench");
    TCase *tc = tcase_create("working_set");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, ratio_reported_above_4x_llc);
    tcase_add_test(tc, ratio_refused_below_4x_llc);
    tcase_add_test(tc, bad_llc);
    tcase_add_test(tc, bad_options);
    tcase_add_test(tc, vs_second_path);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
