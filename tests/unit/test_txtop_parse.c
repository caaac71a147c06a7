// SPDX-License-Identifier: MIT
/*
 * tx-top's data sources: DRM fdinfo and /proc/tx_meminfo parsing on
 * recorded samples (tests/unit/data/txtop/, in the exact formats the DRM
 * core and the tx8 driver print), utilisation from busy-time counters
 * (drm-usage-stats.rst rules: counters that go backwards, resets, engine
 * capacity), client deduplication, the /proc and UNIX-socket scans, and the
 * telemetry shared-memory channel (publisher, reader, stale objects,
 * version mismatch, torn reads).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tx_test_tmp.h"

#include <tx/tx_device.h>
#include <tx/tx_telemetry.h>

#include "telemetry/monitor.h"
#include "telemetry/telemetry_shm.h"
#include "tx_test_main.h"

#define SEC 1000000000ull

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static const char *data_dir(void)
{
    static char dir[512];
    const char *env = getenv("TXTOP_TEST_DATA");
    const char *slash;

    if (env && *env)
        return env;
    if (!dir[0]) {
        /* next to this source file (the build runs from the top directory) */
        slash = strrchr(__FILE__, '/');
        snprintf(dir, sizeof(dir), "%.*s/data/txtop", slash ? (int)(slash - __FILE__) : 1,
                 slash ? __FILE__ : ".");
    }
    return dir;
}

static char *slurp(const char *rel, size_t *len)
{
    char path[1024];
    FILE *f;
    char *buf;
    long n;

    snprintf(path, sizeof(path), "%s/%s", data_dir(), rel);
    f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static int parse_fd(const char *name, struct txm_fdinfo *fi)
{
    size_t len;
    char path[256];
    char *t;
    int rc;

    snprintf(path, sizeof(path), "fdinfo/%s", name);
    t = slurp(path, &len);
    rc = txm_fdinfo_parse(t, len, "compute", "vram", fi);
    free(t);
    return rc;
}

static struct txm_fd_sample sample(int pid, int fd, int minor, const char *name)
{
    struct txm_fd_sample s;

    memset(&s, 0, sizeof(s));
    s.pid = pid;
    s.fd = fd;
    s.minor = minor;
    ck_assert_int_eq(parse_fd(name, &s.info), 0);
    return s;
}

static const struct txm_client *find_client(const struct txm_client *c, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (c[i].has_client_id && c[i].client_id == id)
            return &c[i];
    return NULL;
}

static char tmpdir[64];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/txtop-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    chmod(tmpdir, 0755);
    setenv("TX_TELEMETRY_DIR", tmpdir, 1);
}

static int count_files(const char *dir, const char *prefix)
{
    char cmd[600];
    FILE *p;
    int n = -1;

    snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep -c '^%s' 2>/dev/null", dir, prefix);
    p = popen(cmd, "r");
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* Units                                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(size_units)
{
    uint64_t v;

    ck_assert_int_eq(txm_parse_size("4096", &v), 0);
    ck_assert_uint_eq(v, 4096);
    ck_assert_int_eq(txm_parse_size(" 12288 KiB\n", &v), 0);
    ck_assert_uint_eq(v, 12288ull << 10);
    ck_assert_int_eq(txm_parse_size("16 MiB", &v), 0);
    ck_assert_uint_eq(v, 16ull << 20);
    ck_assert_int_eq(txm_parse_size("2 GiB", &v), 0);
    ck_assert_uint_eq(v, 2ull << 30);
    ck_assert_int_eq(txm_parse_size("7 B", &v), 0);
    ck_assert_uint_eq(v, 7);
    ck_assert_int_eq(txm_parse_size("12 XiB", &v), -1);
    ck_assert_int_eq(txm_parse_size("-5 KiB", &v), -1);
    ck_assert_int_eq(txm_parse_size("KiB", &v), -1);
    ck_assert_int_eq(txm_parse_size("", &v), -1);
    ck_assert_int_eq(txm_parse_size("5 KiBs", &v), -1);
    ck_assert_int_eq(txm_parse_size("18446744073709551615", &v), 0);
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert_int_eq(txm_parse_size("18446744073709551616", &v), -1);  /* overflow */
    ck_assert_int_eq(txm_parse_size("18014398509481984 KiB", &v), -1); /* 2^54 KiB */
    ck_assert_int_eq(txm_parse_ns("1523456789 ns", &v), 0);
    ck_assert_uint_eq(v, 1523456789ull);
    ck_assert_int_eq(txm_parse_ns("15", &v), 0);
    ck_assert_uint_eq(v, 15);
    ck_assert_int_eq(txm_parse_ns("15 us", &v), -1);
    ck_assert_int_eq(txm_parse_ns("abc ns", &v), -1);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* fdinfo                                                                    */
/* ------------------------------------------------------------------------ */

START_TEST(fdinfo_tx8)
{
    struct txm_fdinfo fi;

    ck_assert_int_eq(parse_fd("tx8-c7-t0", &fi), 0);
    ck_assert_str_eq(fi.driver, "tx8");
    ck_assert_str_eq(fi.pdev, "0000:00:04.0");
    ck_assert_uint_eq(
        fi.has & (TXM_FD_CLIENT_ID | TXM_FD_PDEV | TXM_FD_ENGINE | TXM_FD_TOTAL | TXM_FD_RESIDENT),
        TXM_FD_CLIENT_ID | TXM_FD_PDEV | TXM_FD_ENGINE | TXM_FD_TOTAL | TXM_FD_RESIDENT);
    ck_assert_uint_eq(fi.client_id, 7);
    ck_assert_uint_eq(fi.engine_ns, 1000000000ull);
    ck_assert_uint_eq(fi.total_bytes, 12ull << 20);
    ck_assert_uint_eq(fi.resident_bytes, 12ull << 20);
    ck_assert_uint_eq(fi.capacity, 1);
    ck_assert(!(fi.has & TXM_FD_CAPACITY));

    /* unit variants: MiB, plain bytes, GiB, client name */
    ck_assert_int_eq(parse_fd("tx8-c7-t1", &fi), 0);
    ck_assert_uint_eq(fi.total_bytes, 16ull << 20);
    ck_assert_int_eq(parse_fd("tx8-c8-t1", &fi), 0);
    ck_assert_uint_eq(fi.total_bytes, 8192);
    ck_assert_uint_eq(fi.engine_ns, 250000000ull);
    ck_assert_int_eq(parse_fd("tx8-gib-named", &fi), 0);
    ck_assert_uint_eq(fi.total_bytes, 2ull << 30);
    ck_assert_uint_eq(fi.resident_bytes, 1536ull << 20);
    ck_assert_str_eq(fi.client_name, "glm-inference");
    ck_assert_int_eq(parse_fd("tx8-capacity-t1", &fi), 0);
    ck_assert_uint_eq(fi.capacity, 4);
    ck_assert(fi.has & TXM_FD_CAPACITY);
}
END_TEST

START_TEST(fdinfo_missing_keys)
{
    struct txm_fdinfo fi;

    ck_assert_int_eq(parse_fd("tx8-nopdev", &fi), 0);
    ck_assert(!(fi.has & TXM_FD_PDEV));
    ck_assert_str_eq(fi.pdev, "");
    ck_assert_uint_eq(fi.client_id, 3);

    ck_assert_int_eq(parse_fd("tx8-noid", &fi), 0);
    ck_assert(!(fi.has & TXM_FD_CLIENT_ID));
    ck_assert(fi.has & TXM_FD_ENGINE);

    /* older kernels: drm-memory-<region>; drm-total wins when both exist */
    ck_assert_int_eq(parse_fd("tx8-legacy-memory", &fi), 0);
    ck_assert(fi.has & TXM_FD_TOTAL);
    ck_assert_uint_eq(fi.total_bytes, 8ull << 20);
    ck_assert(!(fi.has & TXM_FD_RESIDENT));
    ck_assert_int_eq(parse_fd("tx8-total-and-memory", &fi), 0);
    ck_assert_uint_eq(fi.total_bytes, 3ull << 20);

    /* not a DRM file at all */
    ck_assert_int_eq(parse_fd("regular-file", &fi), -1);
    /* another driver: parsed (the caller filters on drm-driver) */
    ck_assert_int_eq(parse_fd("other-driver", &fi), 0);
    ck_assert_str_eq(fi.driver, "ivpu");
    ck_assert(!(fi.has & TXM_FD_TOTAL)); /* its region is "system", not "vram" */
}
END_TEST

START_TEST(fdinfo_bad_values)
{
    struct txm_fdinfo fi;

    ck_assert_int_eq(parse_fd("tx8-bad-values", &fi), 0);
    ck_assert_uint_eq(fi.client_id, 11);
    ck_assert(!(fi.has & TXM_FD_ENGINE));   /* "abc ns"; "drm engine-compute" is no key */
    ck_assert(!(fi.has & TXM_FD_TOTAL));    /* "12 XiB" */
    ck_assert(!(fi.has & TXM_FD_RESIDENT)); /* "-5 KiB" */
    ck_assert(!(fi.has & TXM_FD_CAPACITY)); /* 0 is not allowed */
    ck_assert_uint_eq(fi.capacity, 1);
}
END_TEST

/* Every prefix of every sample, and garbage, parse without harm. */
START_TEST(fdinfo_truncated_and_garbage)
{
    static const char *names[] = {"tx8-c7-t0", "tx8-gib-named", "tx8-bad-values",
                                  "tx8-capacity-t1"};
    struct txm_fdinfo fi;
    char junk[700];
    uint64_t rng = 12345;

    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        char path[128];
        size_t len;
        char *t;

        snprintf(path, sizeof(path), "fdinfo/%s", names[k]);
        t = slurp(path, &len);
        for (size_t n = 0; n <= len; n++) {
            int rc = txm_fdinfo_parse(t, n, "compute", "vram", &fi);

            /* a cut value never yields a wrong figure: it is absent or a
             * prefix of the right digits */
            ck_assert(rc == 0 || rc == -1);
            ck_assert(fi.capacity >= 1);
        }
        free(t);
    }
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < sizeof(junk); i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            junk[i] = (char)(rng >> 56);
        }
        memcpy(junk, "drm-driver:\ttx8\ndrm-engine-compute: ", 36);
        txm_fdinfo_parse(junk, sizeof(junk), "compute", "vram", &fi);
    }
    /* an over-long line and an overflowing number */
    memset(junk, 'a', sizeof(junk));
    memcpy(junk, "drm-driver:\ttx8\ndrm-engine-compute:\t99999999999999999999999 ns\n", 63);
    ck_assert_int_eq(txm_fdinfo_parse(junk, sizeof(junk), "compute", "vram", &fi), 0);
    ck_assert(!(fi.has & TXM_FD_ENGINE));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Clients and utilisation                                                   */
/* ------------------------------------------------------------------------ */

START_TEST(clients_dedup)
{
    struct txm_fd_sample s[5];
    struct txm_client *c;
    const struct txm_client *c7, *c8;
    size_t n;

    /* process 101 holds client 7 (forked); 100 holds it on two fds (dup) */
    s[0] = sample(101, 4, 0, "tx8-c7-dup-t1");
    s[1] = sample(100, 5, 0, "tx8-c7-t1");
    s[2] = sample(100, 6, 0, "tx8-c8-t1");
    s[3] = sample(100, 9, 0, "tx8-c7-t1");
    s[4] = sample(100, 10, 0, "tx8-nopdev");
    ck_assert_int_eq(txm_clients_build(s, 5, &c, &n), 0);
    ck_assert_uint_eq(n, 3);
    c7 = find_client(c, n, 7);
    c8 = find_client(c, n, 8);
    ck_assert_ptr_nonnull(c7);
    ck_assert_ptr_nonnull(c8);
    ck_assert_int_eq(c7->pid, 100); /* counted once, at the lowest PID */
    ck_assert_int_eq(c7->npids, 2);
    ck_assert_int_eq(c7->nfds, 3);
    ck_assert_uint_eq(c7->total_bytes, 16ull << 20); /* not 48 MiB */
    ck_assert_int_eq(c8->pid, 100);
    ck_assert_int_eq(c8->nfds, 1);
    free(c);

    /* the same client id on two devices is two clients */
    s[0] = sample(100, 5, 0, "tx8-c7-t1");
    s[1] = sample(100, 6, 1, "tx8-c7-t1");
    strcpy(s[1].info.pdev, "0000:00:05.0");
    ck_assert_int_eq(txm_clients_build(s, 2, &c, &n), 0);
    ck_assert_uint_eq(n, 2);
    free(c);

    /* without drm-pdev the node minor tells devices apart */
    s[0] = sample(100, 5, 0, "tx8-nopdev");
    s[1] = sample(200, 6, 0, "tx8-nopdev");
    s[2] = sample(300, 7, 1, "tx8-nopdev");
    ck_assert_int_eq(txm_clients_build(s, 3, &c, &n), 0);
    ck_assert_uint_eq(n, 2);
    free(c);

    /* without drm-client-id nothing can be matched: one client per fd */
    s[0] = sample(100, 5, 0, "tx8-noid");
    s[1] = sample(100, 6, 0, "tx8-noid");
    ck_assert_int_eq(txm_clients_build(s, 2, &c, &n), 0);
    ck_assert_uint_eq(n, 2);
    free(c);

    ck_assert_int_eq(txm_clients_build(NULL, 0, &c, &n), 0);
    ck_assert_uint_eq(n, 0);
    free(c);
}
END_TEST

START_TEST(utilisation)
{
    struct txm_rates r;
    struct txm_fd_sample s[3];
    struct txm_client *c;
    size_t n;
    uint64_t t0 = 1000 * SEC;

    txm_rates_init(&r);
    s[0] = sample(100, 5, 0, "tx8-c7-t0");
    s[1] = sample(100, 6, 0, "tx8-c8-t0");
    s[2] = sample(101, 4, 0, "tx8-c7-t0");
    txm_rates_begin(&r);
    ck_assert_int_eq(txm_clients_build(s, 3, &c, &n), 0);
    txm_clients_rate(&r, c, n, t0);
    ck_assert(isnan(find_client(c, n, 7)->util)); /* first sample: unknown */
    ck_assert(isnan(find_client(c, n, 8)->util));
    txm_rates_end(&r);
    free(c);

    /* one second later: client 7 +0.5 s busy, client 8 +0.25 s */
    s[0] = sample(100, 5, 0, "tx8-c7-t1");
    s[1] = sample(100, 6, 0, "tx8-c8-t1");
    s[2] = sample(101, 4, 0, "tx8-c7-dup-t1");
    txm_rates_begin(&r);
    ck_assert_int_eq(txm_clients_build(s, 3, &c, &n), 0);
    txm_clients_rate(&r, c, n, t0 + SEC);
    ck_assert_double_eq_tol(find_client(c, n, 7)->util, 50.0, 1e-9);
    ck_assert_double_eq_tol(find_client(c, n, 8)->util, 25.0, 1e-9);
    txm_rates_end(&r);
    free(c);

    /* half a second later with no progress: 0 */
    txm_rates_begin(&r);
    ck_assert_int_eq(txm_clients_build(s, 3, &c, &n), 0);
    txm_clients_rate(&r, c, n, t0 + SEC + SEC / 2);
    ck_assert_double_eq_tol(find_client(c, n, 7)->util, 0.0, 1e-9);
    txm_rates_end(&r);
    free(c);

    /* engine capacity 4: 2 s busy in 1 s = 50% of the group */
    s[0] = sample(100, 5, 0, "tx8-capacity-t0");
    txm_rates_begin(&r);
    ck_assert_int_eq(txm_clients_build(s, 1, &c, &n), 0);
    txm_clients_rate(&r, c, n, t0 + 3 * SEC);
    free(c);
    txm_rates_end(&r);
    s[0] = sample(100, 5, 0, "tx8-capacity-t1");
    txm_rates_begin(&r);
    ck_assert_int_eq(txm_clients_build(s, 1, &c, &n), 0);
    txm_clients_rate(&r, c, n, t0 + 4 * SEC);
    ck_assert_double_eq_tol(c[0].util, 50.0, 1e-9);
    txm_rates_end(&r);
    free(c);
    /* the clients 7 and 8 were not sampled in the last rounds: forgotten */
    ck_assert_uint_eq(r.n, 1);
    txm_rates_free(&r);
}
END_TEST

/* drm-usage-stats: a value lower than before -> stay with the larger one
 * until it catches up. */
START_TEST(counter_backwards)
{
    static const char *seq[] = {"tx8-c9-s0", "tx8-c9-s1", "tx8-c9-s2", "tx8-c9-s3"};
    static const double want[] = {NAN, 0.0, 0.0, 50.0};
    struct txm_rates r;

    txm_rates_init(&r);
    for (int i = 0; i < 4; i++) {
        struct txm_fd_sample s = sample(100, 5, 0, seq[i]);
        struct txm_client *c;
        size_t n;

        txm_rates_begin(&r);
        ck_assert_int_eq(txm_clients_build(&s, 1, &c, &n), 0);
        txm_clients_rate(&r, c, n, (10 + (uint64_t)i) * SEC);
        if (isnan(want[i]))
            ck_assert(isnan(c[0].util));
        else
            ck_assert_msg(fabs(c[0].util - want[i]) < 1e-9, "sample %d: %f, want %f", i, c[0].util,
                          want[i]);
        txm_rates_end(&r);
        free(c);
    }
    txm_rates_free(&r);
}
END_TEST

/* A counter that stays below for TXM_REBASE_SAMPLES samples was reset: its
 * baseline restarts from the new values. */
START_TEST(counter_reset)
{
    static const char *seq[] = {"tx8-c10-s0", "tx8-c10-s1", "tx8-c10-s2", "tx8-c10-s3",
                                "tx8-c10-s4"};
    static const double want[] = {NAN, 0.0, 0.0, 0.0, 50.0};
    struct txm_rates r;

    ck_assert_int_eq(TXM_REBASE_SAMPLES, 3);
    txm_rates_init(&r);
    for (int i = 0; i < 5; i++) {
        struct txm_fd_sample s = sample(100, 5, 0, seq[i]);
        struct txm_client *c;
        size_t n;

        txm_rates_begin(&r);
        ck_assert_int_eq(txm_clients_build(&s, 1, &c, &n), 0);
        txm_clients_rate(&r, c, n, (10 + (uint64_t)i) * SEC);
        if (isnan(want[i]))
            ck_assert(isnan(c[0].util));
        else
            ck_assert_msg(fabs(c[0].util - want[i]) < 1e-9, "sample %d: %f, want %f", i, c[0].util,
                          want[i]);
        txm_rates_end(&r);
        free(c);
    }
    txm_rates_free(&r);
}
END_TEST

START_TEST(rate_edges)
{
    struct txm_rates r;

    txm_rates_init(&r);
    txm_rates_begin(&r);
    ck_assert(isnan(txm_rate(&r, "a", 0, SEC, 1)));
    txm_rates_end(&r);
    txm_rates_begin(&r);
    /* more busy time than wall time (sampling jitter): clamped */
    ck_assert_double_eq_tol(txm_rate(&r, "a", 3 * SEC, 2 * SEC, 1), 100.0, 1e-9);
    /* sampled twice at the same instant: the previous rate, no division */
    ck_assert_double_eq_tol(txm_rate(&r, "a", 4 * SEC, 2 * SEC, 1), 100.0, 1e-9);
    /* capacity 0 is treated as 1 */
    ck_assert(isnan(txm_rate(&r, "b", 0, 2 * SEC, 0)));
    txm_rates_end(&r);
    txm_rates_begin(&r);
    ck_assert_double_eq_tol(txm_rate(&r, "b", SEC / 4, 3 * SEC, 0), 25.0, 1e-9);
    txm_rates_end(&r);
    /* a counter not sampled in a round is forgotten: it starts over */
    txm_rates_begin(&r);
    txm_rates_end(&r);
    ck_assert_uint_eq(r.n, 0);
    txm_rates_begin(&r);
    ck_assert(isnan(txm_rate(&r, "a", 9 * SEC, 5 * SEC, 1)));
    txm_rates_end(&r);
    txm_rates_free(&r);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* /proc/tx_meminfo                                                          */
/* ------------------------------------------------------------------------ */

static const struct txm_label *label(const struct txm_label *l, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(l[i].name, name))
            return &l[i];
    return NULL;
}

START_TEST(meminfo_two_devices)
{
    const struct txm_meminfo_dev *d0, *d1;
    struct txm_meminfo m;
    size_t len;
    char *t = slurp("tx_meminfo", &len);
    const unsigned all =
        TXM_MI_TOTAL | TXM_MI_USED | TXM_MI_FREE | TXM_MI_FAULTS | TXM_MI_MISS | TXM_MI_RESETS;

    ck_assert_int_eq(txm_meminfo_parse(t, len, &m), 0);
    free(t);
    ck_assert_uint_eq(m.bad_lines, 0);
    ck_assert_uint_eq(m.has, all);
    ck_assert_uint_eq(m.total, (254ull + 1022) << 20);
    ck_assert_uint_eq(m.page_faults, 1536);
    ck_assert_uint_eq(m.cache_miss, 42);
    ck_assert_uint_eq(m.resets, 1);
    ck_assert_uint_eq(m.n_devs, 2);
    d0 = txm_meminfo_find(&m, 0);
    d1 = txm_meminfo_find(&m, 1);
    ck_assert_ptr_nonnull(d0);
    ck_assert_ptr_nonnull(d1);
    ck_assert_ptr_null(txm_meminfo_find(&m, 2));
    ck_assert_uint_eq(d0->has, all | TXM_MI_BUFFERS);
    ck_assert_uint_eq(d0->total, 254ull << 20);
    ck_assert_uint_eq(d0->used, (96ull + 24) * 1048576 + 4096);
    ck_assert_uint_eq(d0->free, d0->total - d0->used);
    ck_assert_uint_eq(d0->buffers, 3);
    ck_assert_uint_eq(d0->n_labels, 3);
    ck_assert_uint_eq(label(d0->labels, d0->n_labels, "GLM-5.1_Weights")->bytes, 96ull << 20);
    ck_assert_uint_eq(label(d0->labels, d0->n_labels, "GLM-5.1_KVCache")->bytes, 24ull << 20);
    ck_assert_uint_eq(label(d0->labels, d0->n_labels, "Unlabeled")->bytes, 4096);
    /* labels with a space and a colon; a label named like a fixed key; a
     * key longer than the padding */
    ck_assert_uint_eq(d1->n_labels, 3);
    ck_assert_uint_eq(d1->total, 1022ull << 20);
    ck_assert_uint_eq(label(d1->labels, d1->n_labels, "txtop test:v2")->bytes, 3ull << 20);
    ck_assert_uint_eq(label(d1->labels, d1->n_labels, "Total")->bytes, 8192);
    ck_assert_uint_eq(label(d1->labels, d1->n_labels, "a_very_long_label_name_31chars_")->bytes,
                      1000ull << 20);
    /* per label over all devices */
    ck_assert_uint_eq(m.n_labels, 6);
    ck_assert_uint_eq(label(m.labels, m.n_labels, "GLM-5.1_Weights")->bytes, 96ull << 20);
    ck_assert_uint_eq(label(m.labels, m.n_labels, "Total")->bytes, 8192);
    txm_meminfo_free(&m);
}
END_TEST

START_TEST(meminfo_old_and_junk)
{
    const struct txm_meminfo_dev *d0, *d2;
    struct txm_meminfo m;
    size_t len;
    char *t = slurp("tx_meminfo.old", &len);

    ck_assert_int_eq(txm_meminfo_parse(t, len, &m), 0);
    free(t);
    /* no CacheMiss / Resets lines: those figures are absent, not zero */
    ck_assert_uint_eq(m.has, TXM_MI_TOTAL | TXM_MI_USED | TXM_MI_FREE | TXM_MI_FAULTS);
    d0 = txm_meminfo_find(&m, 0);
    ck_assert_ptr_nonnull(d0);
    ck_assert(!(d0->has & TXM_MI_MISS));
    ck_assert_uint_eq(d0->used, 8ull << 20);
    ck_assert_uint_eq(label(d0->labels, d0->n_labels, "GLM-4.5_Weights")->bytes, 8ull << 20);
    /* a key too long for the padding runs into its value */
    d2 = txm_meminfo_find(&m, 2);
    ck_assert_ptr_nonnull(d2);
    ck_assert_uint_eq(label(d2->labels, d2->n_labels, "tight_label_no_space_at_all")->bytes,
                      123456789012ull << 10);
    /* the text line, "NoValue", ":  5 kB", the overflow and 2^54 kB */
    ck_assert_uint_eq(m.bad_lines, 5);
    txm_meminfo_free(&m);
}
END_TEST

START_TEST(meminfo_truncated)
{
    struct txm_meminfo m;
    size_t len;
    char *t = slurp("tx_meminfo", &len);

    for (size_t n = 0; n <= len; n += 7) {
        ck_assert_int_eq(txm_meminfo_parse(t, n, &m), 0);
        for (size_t i = 0; i < m.n_devs; i++)
            ck_assert(m.devs[i].index == 0 || m.devs[i].index == 1);
        txm_meminfo_free(&m);
    }
    ck_assert_int_eq(txm_meminfo_parse("", 0, &m), 0);
    ck_assert_uint_eq(m.n_devs, 0);
    ck_assert_uint_eq(m.has, 0);
    txm_meminfo_free(&m);
    free(t);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* /proc scans                                                               */
/* ------------------------------------------------------------------------ */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

/* A /proc-like tree: process 4242 has fd 3 on a character device (we use
 * /dev/null's major as the "accel" major) with DRM fdinfo, fd 4 on a
 * socket, fd 5 on a regular file; process 4343 holds the same socket. */
START_TEST(proc_scan_tree)
{
    struct txm_scan_opts o;
    struct txm_scan s;
    struct stat st;
    char p[512];
    uint64_t want[] = {555, 777};
    size_t len;
    char *fdi;

    make_tmpdir();
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    snprintf(p, sizeof(p),
             "mkdir -p %s/proc/4242/fd %s/proc/4242/fdinfo %s/proc/4343/fd "
             "%s/proc/self",
             tmpdir, tmpdir, tmpdir, tmpdir);
    ck_assert_int_eq(system(p), 0);
    snprintf(p, sizeof(p), "%s/proc/4242/fd/3", tmpdir);
    ck_assert_int_eq(symlink("/dev/null", p), 0);
    snprintf(p, sizeof(p), "%s/proc/4242/fd/4", tmpdir);
    ck_assert_int_eq(symlink("socket:[555]", p), 0);
    snprintf(p, sizeof(p), "%s/proc/4242/fd/5", tmpdir);
    ck_assert_int_eq(symlink("/etc/hostname", p), 0);
    snprintf(p, sizeof(p), "%s/proc/4343/fd/7", tmpdir);
    ck_assert_int_eq(symlink("socket:[555]", p), 0);
    snprintf(p, sizeof(p), "%s/proc/4343/fd/8", tmpdir);
    ck_assert_int_eq(symlink("socket:[556]", p), 0);
    fdi = slurp("fdinfo/tx8-c7-t0", &len);
    snprintf(p, sizeof(p), "%s/proc/4242/fdinfo/3", tmpdir);
    write_file(p, fdi);
    free(fdi);

    memset(&o, 0, sizeof(o));
    snprintf(p, sizeof(p), "%s/proc", tmpdir);
    o.proc_root = p;
    o.accel_major = major(st.st_rdev);
    o.sock_inodes = want;
    o.n_sock_inodes = 2;
    ck_assert_int_eq(txm_proc_scan(&o, &s), 0);
    ck_assert_uint_eq(s.procs, 2); /* "self" is not a PID */
    ck_assert_uint_eq(s.nfds, 1);
    ck_assert_int_eq(s.fds[0].pid, 4242);
    ck_assert_int_eq(s.fds[0].fd, 3);
    ck_assert_int_eq(s.fds[0].minor, (int)minor(st.st_rdev));
    ck_assert_uint_eq(s.fds[0].info.client_id, 7);
    ck_assert_uint_eq(s.nsocks, 2);
    ck_assert_uint_eq(s.socks[0].ino, 555);
    ck_assert_uint_eq(s.socks[1].ino, 555);
    ck_assert(s.socks[0].pid + s.socks[1].pid == 4242 + 4343);
    txm_scan_free(&s);

    /* the monitor skips itself; no accel major: no device lookups */
    o.skip_pid = 4242;
    o.accel_major = 0;
    ck_assert_int_eq(txm_proc_scan(&o, &s), 0);
    ck_assert_uint_eq(s.nfds, 0);
    ck_assert_uint_eq(s.nsocks, 1);
    ck_assert_int_eq(s.socks[0].pid, 4343);
    txm_scan_free(&s);

    /* a process whose fds cannot be read is counted, not fatal */
    snprintf(p, sizeof(p), "%s/proc/4343/fd", tmpdir);
    chmod(p, 0);
    if (geteuid() == 0) {
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            int ok;

            if (setgid(65534) < 0 || setuid(65534) < 0)
                _exit(3);
            snprintf(p, sizeof(p), "%s/proc", tmpdir);
            o.proc_root = p;
            ok = txm_proc_scan(&o, &s) == 0 && s.unreadable == 1 && s.procs == 1;
            _exit(ok ? 0 : 1);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    } else {
        snprintf(p, sizeof(p), "%s/proc", tmpdir);
        o.proc_root = p;
        ck_assert_int_eq(txm_proc_scan(&o, &s), 0);
        ck_assert_uint_eq(s.unreadable, 1);
        txm_scan_free(&s);
    }
    snprintf(p, sizeof(p), "%s/proc/4343/fd", tmpdir);
    chmod(p, 0755);

    /* no such tree */
    o.proc_root = "/nonexistent/proc";
    ck_assert_int_eq(txm_proc_scan(&o, &s), -1);
    tx_test_rmtree(tmpdir);
}
END_TEST

START_TEST(proc_info_self)
{
    struct txm_proc_info pi;
    uint64_t rss;

    ck_assert_int_eq(txm_proc_info(NULL, (int)getpid(), &pi), 0);
    ck_assert(pi.has_uid);
    ck_assert_uint_eq(pi.uid, getuid());
    ck_assert(pi.has_rss);
    ck_assert_uint_gt(pi.rss_bytes, 0);
    ck_assert_msg(strstr(pi.cmdline, "test_txtop_parse") != NULL, "cmdline '%s'", pi.cmdline);
    ck_assert_uint_gt(pi.start_time, 0);
    ck_assert_uint_eq(txm_proc_start_time(NULL, (int)getpid()), pi.start_time);
    ck_assert_int_eq(txm_proc_rss(NULL, (int)getpid(), &rss), 0);
    ck_assert_uint_gt(rss, 0);
    /* a kernel thread: no command line, [comm] instead, no RSS */
    if (txm_proc_info(NULL, 2, &pi) == 0 && pi.comm[0] == 'k') {
        ck_assert(pi.cmdline[0] == '[');
        ck_assert(!pi.has_rss);
    }
    ck_assert_int_eq(txm_proc_info(NULL, 0x7ffffff0, &pi), -1);
    ck_assert_uint_eq(txm_proc_start_time(NULL, 0x7ffffff0), 0);
}
END_TEST

/* Without root, other users' processes are "unreadable", never fatal. */
START_TEST(proc_scan_not_root)
{
    pid_t pid;
    int status;

    if (geteuid() != 0)
        return; /* already unprivileged: covered by the tree test */
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct txm_scan_opts o;
        struct txm_scan s;

        if (setgid(65534) < 0 || setuid(65534) < 0)
            _exit(3);
        memset(&o, 0, sizeof(o));
        o.accel_major = TXM_ACCEL_MAJOR;
        /* pid 1 (and this test's parent) belong to root */
        _exit(txm_proc_scan(&o, &s) == 0 && s.unreadable >= 1 ? 0 : 1);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
}
END_TEST

START_TEST(unix_socket_peers)
{
    struct sockaddr_un a;
    int lfd, c1, c2, s1, s2;
    struct stat st1, st2;
    uint64_t *peers;
    size_t n;
    char path[128];

    make_tmpdir();
    snprintf(path, sizeof(path), "%s/dev.sock", tmpdir);
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    strcpy(a.sun_path, path);
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(lfd, 4), 0);

    ck_assert_int_eq(txm_unix_peers(path, &peers, &n), 0);
    ck_assert_uint_eq(n, 0); /* nobody connected */
    free(peers);

    c1 = socket(AF_UNIX, SOCK_STREAM, 0);
    c2 = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(c1, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(connect(c2, (struct sockaddr *)&a, sizeof(a)), 0);
    s1 = accept(lfd, NULL, NULL);
    s2 = accept(lfd, NULL, NULL);
    ck_assert_int_ge(s1, 0);
    ck_assert_int_ge(s2, 0);
    fstat(c1, &st1);
    fstat(c2, &st2);
    ck_assert_int_eq(txm_unix_peers(path, &peers, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert((peers[0] == st1.st_ino && peers[1] == st2.st_ino) ||
              (peers[0] == st2.st_ino && peers[1] == st1.st_ino));
    free(peers);

    /* a client that left */
    close(c2);
    close(s2);
    ck_assert_int_eq(txm_unix_peers(path, &peers, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(peers[0], st1.st_ino);
    free(peers);

    /* not a socket / no such path */
    ck_assert_int_eq(txm_unix_peers("/etc/hostname", &peers, &n), -1);
    ck_assert_int_eq(txm_unix_peers("/nonexistent.sock", &peers, &n), -1);
    close(c1);
    close(s1);
    close(lfd);
    tx_test_rmtree(tmpdir);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Telemetry channel                                                         */
/* ------------------------------------------------------------------------ */

struct seen {
    int n;
    struct tx_telemetry_model m[4];
    uint64_t counts[4][64];
    uint8_t valid[4][16];
    struct tx_telemetry_stats st[4];
};

static int collect(const struct tx_telemetry_model *m, void *arg)
{
    struct seen *s = arg;

    if (s->n >= 4)
        return 1;
    s->m[s->n] = *m;
    ck_assert_uint_le((uint64_t)m->layers * m->experts, 64);
    memcpy(s->counts[s->n], m->counts, (size_t)m->layers * m->experts * sizeof(uint64_t));
    memcpy(s->valid[s->n], m->layer_valid, m->layers);
    ck_assert_int_eq(tx_telemetry_model_stats(m, &s->st[s->n]), TX_OK);
    s->n++;
    return 0;
}

START_TEST(telemetry_publish_read)
{
    tx_telemetry_pub_t *pub, *pub2;
    const uint64_t l1[4] = {3, 1, 2, 2}, l2[4] = {0, 0, 0, 8};
    struct seen s;
    char want[128];
    struct stat st;

    make_tmpdir();
    ck_assert_int_eq(tx_telemetry_open_publisher("GLM-5.1", "emu:/run/tx8/tx8-0.sock", 3, 4, &pub),
                     TX_OK);
    snprintf(want, sizeof(want), "%s/tx8-telemetry-%d", tmpdir, (int)getpid());
    ck_assert_str_eq(tx_telemetry_path(pub), want);
    ck_assert_int_eq(stat(want, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0644);

    /* nothing published yet: the model is listed, without layers */
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, NULL), 1);
    ck_assert_int_eq(s.m[0].pid, (int)getpid());
    ck_assert_str_eq(s.m[0].model, "GLM-5.1");
    ck_assert_str_eq(s.m[0].device, "emu:/run/tx8/tx8-0.sock");
    ck_assert_uint_eq(s.m[0].layers, 3);
    ck_assert_uint_eq(s.m[0].experts, 4);
    ck_assert_uint_eq(s.m[0].updated_ns, 0);
    ck_assert_uint_eq(s.st[0].moe_layers, 0);
    ck_assert_int_eq(s.st[0].max_layer, -1);

    /* layer 0 stays dense (never updated) */
    ck_assert_int_eq(tx_telemetry_update_experts(pub, 1, l1, 4), TX_OK);
    ck_assert_int_eq(tx_telemetry_update_experts(pub, 2, l2, 4), TX_OK);
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, NULL), 1);
    ck_assert_uint_eq(s.m[0].updates, 2);
    ck_assert_uint_gt(s.m[0].updated_ns, 0);
    ck_assert_int_eq(s.valid[0][0], 0);
    ck_assert_int_eq(s.valid[0][1], 1);
    ck_assert_int_eq(s.valid[0][2], 1);
    for (int e = 0; e < 4; e++) {
        ck_assert_uint_eq(s.counts[0][4 + e], l1[e]);
        ck_assert_uint_eq(s.counts[0][8 + e], l2[e]);
    }
    /* layer 1: mean 2, util 1.5 .5 1 1 -> std sqrt(.125) = 35.36%;
     * layer 2: util 0 0 0 4 -> std sqrt(3) = 173.2% */
    ck_assert_double_eq_tol(tx_telemetry_util_std(l1, 4), 100.0 * sqrt(0.125), 1e-9);
    ck_assert_double_eq_tol(tx_telemetry_util_std(l2, 4), 100.0 * sqrt(3.0), 1e-9);
    ck_assert_uint_eq(s.st[0].moe_layers, 2);
    ck_assert_uint_eq(s.st[0].total, 16);
    ck_assert_int_eq(s.st[0].max_layer, 2);
    ck_assert_double_eq_tol(s.st[0].max_layer_std, 100.0 * sqrt(3.0), 1e-9);
    ck_assert_double_eq_tol(s.st[0].overall_std, 100.0 * sqrt((0.5 + 12.0) / 8.0), 1e-9);
    ck_assert_double_eq_tol(s.st[0].mean_layer_std, (100.0 * sqrt(0.125) + 100.0 * sqrt(3.0)) / 2.0,
                            1e-9);
    ck_assert_double_eq_tol(s.st[0].max_share, 100.0, 1e-9);
    ck_assert_double_eq_tol(s.st[0].min_share, 0.0, 1e-9);

    /* a second publisher of this process gets its own object */
    ck_assert_int_eq(tx_telemetry_open_publisher("GLM-4.5", "", 1, 2, &pub2), TX_OK);
    snprintf(want, sizeof(want), "%s/tx8-telemetry-%d.1", tmpdir, (int)getpid());
    ck_assert_str_eq(tx_telemetry_path(pub2), want);
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, NULL), 2);
    ck_assert_str_eq(s.m[0].model, "GLM-5.1");
    ck_assert_str_eq(s.m[1].model, "GLM-4.5");

    /* partial update: n < experts */
    ck_assert_int_eq(tx_telemetry_update_experts(pub2, 0, l1, 1), TX_OK);

    /* bad calls */
    tx_telemetry_pub_t *bad;
    ck_assert_int_eq(tx_telemetry_update_experts(pub, 3, l1, 4), TX_EINVAL);
    ck_assert_int_eq(tx_telemetry_update_experts(pub, 0, l1, 5), TX_EINVAL);
    ck_assert_int_eq(tx_telemetry_update_experts(pub, 0, NULL, 4), TX_EINVAL);
    ck_assert_int_eq(tx_telemetry_update_experts(NULL, 0, l1, 4), TX_EINVAL);
    ck_assert_int_eq(tx_telemetry_open_publisher("x", "", 0, 4, &bad), TX_EINVAL);
    ck_assert_int_eq(tx_telemetry_open_publisher("x", "", 4, TX_TELEMETRY_MAX_EXPERTS + 1, &bad),
                     TX_EINVAL);
    ck_assert_int_eq(tx_telemetry_open_publisher("x", "", 4096, 4096, &bad), TX_EINVAL);
    ck_assert_int_eq(tx_telemetry_open_publisher("", "", 1, 1, &bad), TX_EINVAL);
    ck_assert_int_eq(tx_telemetry_open_publisher(NULL, "", 1, 1, &bad), TX_EINVAL);
    ck_assert_int_eq(tx_telemetry_open_publisher("x", "", 1, 1, NULL), TX_EINVAL);
    ck_assert(strlen(tx_last_error()) > 0);
    ck_assert_int_eq(tx_telemetry_scan(NULL, NULL, NULL), TX_EINVAL);

    /* close removes the objects */
    ck_assert_int_eq(tx_telemetry_close(pub), TX_OK);
    ck_assert_int_eq(tx_telemetry_close(NULL), TX_OK);
    ck_assert_int_eq(count_files(tmpdir, "tx8-telemetry-"), 1);
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, NULL), 1);
    ck_assert_str_eq(s.m[0].model, "GLM-4.5");
    ck_assert_uint_eq(s.counts[0][0], 3);
    ck_assert_uint_eq(s.counts[0][1], 0);
    ck_assert_int_eq(tx_telemetry_close(pub2), TX_OK);
    ck_assert_int_eq(count_files(tmpdir, "tx8-telemetry-"), 0);
    ck_assert_int_eq(count_files(tmpdir, ".tx8-telemetry-"), 0);
    tx_test_rmtree(tmpdir);
}
END_TEST

START_TEST(telemetry_no_directory)
{
    tx_telemetry_pub_t *pub;
    unsigned skipped = 9;

    setenv("TX_TELEMETRY_DIR", "/nonexistent/shm", 1);
    ck_assert_int_eq(tx_telemetry_open_publisher("m", "d", 1, 1, &pub), TX_ENOENT);
    ck_assert_ptr_null(pub);
    /* a reader finds nothing, without an error */
    ck_assert_int_eq(tx_telemetry_scan(collect, NULL, &skipped), 0);
    ck_assert_uint_eq(skipped, 0);
}
END_TEST

/* A publisher that died without closing: its object is ignored and
 * removed by the next reader. */
START_TEST(telemetry_stale_dead_pid)
{
    struct seen s;
    pid_t pid;
    int status;
    char path[128];

    make_tmpdir();
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        tx_telemetry_pub_t *pub;
        const uint64_t c[2] = {1, 2};

        if (tx_telemetry_open_publisher("dead", "", 1, 2, &pub) != TX_OK ||
            tx_telemetry_update_experts(pub, 0, c, 2) != TX_OK)
            _exit(1);
        _exit(0); /* no close: a crash */
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    snprintf(path, sizeof(path), "%s/tx8-telemetry-%d", tmpdir, (int)pid);
    ck_assert_int_eq(access(path, F_OK), 0);
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, NULL), 0);
    ck_assert_int_eq(access(path, F_OK), -1); /* cleaned */
    tx_test_rmtree(tmpdir);
}
END_TEST

/* Write a header by hand (what another program, or an old libtx, left). */
static void forge(const char *path, int pid, uint32_t version, uint64_t start_time,
                  int64_t size_delta)
{
    struct txt_shm_hdr h;
    size_t size = TXT_HDR_SIZE + 8 * 2 + 8 * 2 * 3;
    char *buf = calloc(1, size);
    int fd;

    memset(&h, 0, sizeof(h));
    h.magic = TXT_MAGIC;
    h.version = version;
    h.header_size = TXT_HDR_SIZE;
    h.total_size = size;
    h.pid = pid;
    h.layers = 2;
    h.experts = 3;
    h.start_time = start_time;
    h.layer_offset = TXT_HDR_SIZE;
    h.counts_offset = TXT_HDR_SIZE + 16;
    snprintf(h.model, sizeof(h.model), "forged");
    memcpy(buf, &h, sizeof(h));
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, buf, (size_t)((int64_t)size + size_delta)),
                     (ssize_t)((int64_t)size + size_delta));
    close(fd);
    free(buf);
}

START_TEST(telemetry_reused_pid_and_version)
{
    uint64_t me = txt_proc_start_time((int)getpid());
    unsigned skipped = 0;
    struct seen s;
    char path[128];

    make_tmpdir();
    ck_assert_uint_gt(me, 0);
    /* our PID, but another start time: a dead process had this PID */
    snprintf(path, sizeof(path), "%s/tx8-telemetry-%d.5", tmpdir, (int)getpid());
    forge(path, (int)getpid(), TX_TELEMETRY_VERSION, me + 1, 0);
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, &skipped), 0);
    ck_assert_int_eq(access(path, F_OK), -1);

    /* a live publisher with another layout version: rejected, kept */
    forge(path, (int)getpid(), TX_TELEMETRY_VERSION + 1, me, 0);
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, &skipped), 0);
    ck_assert_uint_eq(skipped, 1);
    ck_assert_int_eq(access(path, F_OK), 0);

    /* the right version, consistent: accepted */
    forge(path, (int)getpid(), TX_TELEMETRY_VERSION, me, 0);
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, &skipped), 1);
    ck_assert_str_eq(s.m[0].model, "forged");

    /* truncated object, or a size that disagrees with the header */
    forge(path, (int)getpid(), TX_TELEMETRY_VERSION, me, -8);
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, &skipped), 0);
    ck_assert_uint_eq(skipped, 1);
    /* a name whose PID differs from the header's */
    unlink(path);
    snprintf(path, sizeof(path), "%s/tx8-telemetry-1", tmpdir);
    forge(path, (int)getpid(), TX_TELEMETRY_VERSION, me, 0);
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, &skipped), 0);
    ck_assert_uint_eq(skipped, 1);
    unlink(path);
    /* names that are not objects are not even looked at */
    snprintf(path, sizeof(path), "%s/tx8-telemetry-12x", tmpdir);
    write_file(path, "junk");
    snprintf(path, sizeof(path), "%s/tx8-telemetry-0", tmpdir);
    write_file(path, "junk");
    snprintf(path, sizeof(path), "%s/.tx8-telemetry-99-0.tmp", tmpdir);
    write_file(path, "junk");
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, &skipped), 0);
    ck_assert_uint_eq(skipped, 0);
    /* a short garbage object with a valid name */
    snprintf(path, sizeof(path), "%s/tx8-telemetry-%d", tmpdir, (int)getpid());
    write_file(path, "garbage");
    ck_assert_int_eq(tx_telemetry_scan(collect, &s, &skipped), 0);
    ck_assert_uint_eq(skipped, 1);
    tx_test_rmtree(tmpdir);
}
END_TEST

/* The seqlock: a reader never sees a half-written layer. The publisher
 * writes the same value to every expert of a layer. */
struct writer {
    tx_telemetry_pub_t *pub;
    volatile int stop;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    uint64_t c[64];

    for (uint64_t k = 1; !w->stop; k++) {
        for (int e = 0; e < 64; e++)
            c[e] = k;
        tx_telemetry_update_experts(w->pub, (uint32_t)(k % 4), c, 64);
    }
    return NULL;
}

static int check_uniform(const struct tx_telemetry_model *m, void *arg)
{
    int *bad = arg;

    for (uint32_t l = 0; l < m->layers; l++)
        for (uint32_t e = 1; e < m->experts; e++)
            if (m->counts[l * m->experts + e] != m->counts[l * m->experts])
                (*bad)++;
    return 0;
}

START_TEST(telemetry_no_torn_reads)
{
    struct writer w;
    pthread_t t;
    int bad = 0, seen = 0;

    make_tmpdir();
    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(tx_telemetry_open_publisher("torn", "", 4, 64, &w.pub), TX_OK);
    ck_assert_int_eq(pthread_create(&t, NULL, writer_main, &w), 0);
    for (int i = 0; i < 2000; i++) {
        int r = tx_telemetry_scan(check_uniform, &bad, NULL);

        ck_assert_int_ge(r, 0);
        seen += r;
    }
    w.stop = 1;
    pthread_join(t, NULL);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_gt(seen, 0); /* most scans got a consistent copy */
    tx_telemetry_close(w.pub);
    tx_test_rmtree(tmpdir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("txtop_parse");
    TCase *tc = tcase_create("parse");

    tcase_add_test(tc, size_units);
    tcase_add_test(tc, fdinfo_tx8);
    tcase_add_test(tc, fdinfo_missing_keys);
    tcase_add_test(tc, fdinfo_bad_values);
    tcase_add_test(tc, fdinfo_truncated_and_garbage);
    tcase_add_test(tc, clients_dedup);
    tcase_add_test(tc, utilisation);
    tcase_add_test(tc, counter_backwards);
    tcase_add_test(tc, counter_reset);
    tcase_add_test(tc, rate_edges);
    tcase_add_test(tc, meminfo_two_devices);
    tcase_add_test(tc, meminfo_old_and_junk);
    tcase_add_test(tc, meminfo_truncated);
    suite_add_tcase(s, tc);

    tc = tcase_create("proc");
    tcase_add_test(tc, proc_scan_tree);
    tcase_add_test(tc, proc_info_self);
    tcase_add_test(tc, proc_scan_not_root);
    tcase_add_test(tc, unix_socket_peers);
    suite_add_tcase(s, tc);

    tc = tcase_create("telemetry");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, telemetry_publish_read);
    tcase_add_test(tc, telemetry_no_directory);
    tcase_add_test(tc, telemetry_stale_dead_pid);
    tcase_add_test(tc, telemetry_reused_pid_and_version);
    tcase_add_test(tc, telemetry_no_torn_reads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
