/* SPDX-License-Identifier: MIT */
/*
 * The tools' MPI transport (tools/lib/mpi_transport.c: glm-inference and
 * glm-server under mpirun) between the ranks of an mpirun job, without a
 * device: every call goes through the struct glm_ep_transport function
 * pointers, as libtx makes them.
 *
 *   mpirun -np 2 transport-test            the self-test; rank 0 prints
 *                                          "transport: N passed, N failed"
 *   mpirun -np 2 transport-test --bench BYTES [ITERS]
 *       times an alltoallv in which every rank sends BYTES to every other
 *       rank (and BYTES to itself), ITERS times after 10 warm-up calls;
 *       rank 0 prints one line:
 *       "alltoallv: ranks R, bytes per peer B, median U us, mean U us"
 *
 * Exit status: 0 all passed, 1 a check failed, 2 usage / not under mpirun.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/mpi_transport.h"

static struct glm_ep_transport T;
static int n_pass, n_fail;

static void check(int ok, const char *what)
{
    /* every rank's verdict: a check passes when it passed on every rank */
    int all = glm_mpi_all_ok(&T, ok);
    if (all)
        n_pass++;
    else
        n_fail++;
    if (T.rank == 0)
        fprintf(stderr, "%s %s\n", all ? "ok  " : "FAIL", what);
    if (!ok)
        fprintf(stderr, "  (rank %d: %s failed here)\n", T.rank, what);
}

static unsigned char pat(int from, int to, size_t k)
{
    return (unsigned char)(from * 7 + to * 13 + k * 31 + (k >> 8));
}

/* size_t counts: rank r sends cnt(r, j) bytes to rank j; the send blocks
 * are packed in rank order with a gap of `gap` bytes, the receive blocks
 * in reverse rank order; all multiples of `unit` when unit > 1. */
static size_t cnt(int from, int to, size_t unit, int zero_diag)
{
    if (zero_diag && from == to)
        return 0;
    size_t c = (size_t)(from + 1) * (size_t)(to + 2) * 24 + (size_t)to;
    return unit > 1 ? (c + 1) * unit : c;
}

static int exchange(size_t unit, int zero_diag, size_t gap)
{
    int n = T.size, r = T.rank;
    size_t *sc = calloc(4 * (size_t)n, sizeof(size_t));
    if (!sc)
        return 0;
    size_t *sd = sc + n, *rc = sd + n, *rd = rc + n;
    size_t stot = 0, rtot = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = cnt(r, j, unit, zero_diag);
        sd[j] = stot;
        stot += sc[j] + gap;
    }
    for (int j = n - 1; j >= 0; j--) {
        rc[j] = cnt(j, r, unit, zero_diag);
        rd[j] = rtot;
        rtot += rc[j] + gap;
    }
    unsigned char *sb = malloc(stot + 1), *rb = malloc(rtot + 1);
    int ok = sb && rb;
    if (ok) {
        memset(sb, 0xee, stot + 1);
        memset(rb, 0xdd, rtot + 1);
        for (int j = 0; j < n; j++)
            for (size_t k = 0; k < sc[j]; k++)
                sb[sd[j] + k] = pat(r, j, k);
        ok = T.alltoallv(T.ctx, sb, sc, sd, rb, rc, rd) == 0;
        for (int j = 0; ok && j < n; j++) {
            for (size_t k = 0; ok && k < rc[j]; k++)
                ok = rb[rd[j] + k] == pat(j, r, k);
            for (size_t k = 0; ok && gap && k < gap; k++)
                ok = rb[rd[j] + rc[j] + k] == 0xdd; /* the gaps are untouched */
        }
    }
    free(sb);
    free(rb);
    free(sc);
    return ok;
}

static int bcast_check(int root, size_t bytes)
{
    unsigned char *b = malloc(bytes);
    if (!b)
        return 0;
    for (size_t k = 0; k < bytes; k++)
        b[k] = T.rank == root ? pat(root, 0, k) : 0;
    int ok = T.bcast(T.ctx, b, bytes, root) == 0;
    for (size_t k = 0; ok && k < bytes; k++)
        ok = b[k] == pat(root, 0, k);
    free(b);
    return ok;
}

static int share_is(const char *list, int rank, int size, const char *want, int want_n)
{
    char out[256], err[256];
    int n = -1;
    if (glm_mpi_device_share(list, rank, size, out, sizeof(out), &n, err, sizeof(err)))
        return 0;
    return strcmp(out, want) == 0 && n == want_n;
}

static int share_fails(const char *list, int rank, int size, const char *needle)
{
    char out[256], err[256] = "";
    int n = -1;
    if (!glm_mpi_device_share(list, rank, size, out, sizeof(out), &n, err, sizeof(err)))
        return 0;
    return strstr(err, needle) != NULL;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int bench(size_t bytes, int iters)
{
    int n = T.size;
    size_t *sc = calloc(4 * (size_t)n, sizeof(size_t));
    unsigned char *sb = malloc(bytes * (size_t)n + 1), *rb = malloc(bytes * (size_t)n + 1);
    double *t = calloc((size_t)iters, sizeof(double));
    if (!sc || !sb || !rb || !t) {
        fprintf(stderr, "transport-test: out of memory\n");
        return 1;
    }
    size_t *sd = sc + n, *rc = sd + n, *rd = rc + n;
    for (int j = 0; j < n; j++) {
        sc[j] = rc[j] = bytes;
        sd[j] = rd[j] = bytes * (size_t)j;
    }
    memset(sb, T.rank, bytes * (size_t)n + 1);
    int rc_ = 0;
    for (int i = 0; i < 10 + iters && !rc_; i++) {
        glm_mpi_all_ok(&T, 1); /* start together */
        double t0 = now_us();
        rc_ = T.alltoallv(T.ctx, sb, sc, sd, rb, rc, rd);
        if (i >= 10)
            t[i - 10] = now_us() - t0;
    }
    if (!rc_) {
        /* the slowest rank's time is the layer's */
        double *all = calloc((size_t)iters, sizeof(double));
        if (!all)
            return 1;
        for (int i = 0; i < iters; i++) {
            double v = t[i];
            for (int root = 0; root < n; root++) {
                double w = v;
                T.bcast(T.ctx, &w, sizeof(w), root);
                if (w > all[i])
                    all[i] = w;
            }
        }
        double sum = 0;
        for (int i = 0; i < iters; i++)
            sum += all[i];
        qsort(all, (size_t)iters, sizeof(double), cmp_d);
        if (T.rank == 0)
            printf("alltoallv: ranks %d, bytes per peer %zu, median %.1f us, mean %.1f us\n", n,
                   bytes, all[iters / 2], sum / iters);
        free(all);
    }
    free(t);
    free(sb);
    free(rb);
    free(sc);
    return rc_ ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (!glm_mpi_available()) {
        fprintf(stderr, "transport-test: built without MPI\n");
        return 2;
    }
    if (!glm_mpi_launched()) {
        fprintf(stderr, "transport-test: run me under mpirun (mpirun -np 2 %s)\n", argv[0]);
        return 2;
    }
    char err[256];
    if (glm_mpi_init(&argc, &argv, &T, err, sizeof(err))) {
        fprintf(stderr, "transport-test: %s\n", err);
        glm_mpi_finalize();
        return 2;
    }
    int ret;
    if (argc >= 3 && strcmp(argv[1], "--bench") == 0) {
        char *e;
        size_t bytes = strtoull(argv[2], &e, 10);
        int iters = argc >= 4 ? atoi(argv[3]) : 50;
        if (*e || bytes == 0 || iters < 1 || iters > 100000) {
            if (T.rank == 0)
                fprintf(stderr, "transport-test: --bench BYTES [ITERS]: bad number\n");
            glm_mpi_finalize();
            return 2;
        }
        ret = bench(bytes, iters);
        glm_mpi_finalize();
        return ret;
    }

    char what[128];
    snprintf(what, sizeof(what), "transport: %d ranks, rank/size in the struct", T.size);
    int ok = T.size >= 1 && T.rank >= 0 && T.rank < T.size && T.ctx && T.alltoallv && T.bcast;
    check(ok, what);
    check(exchange(1, 0, 0),
          "alltoallv: uneven byte counts, packed blocks, receive in reverse order");
    check(exchange(1, 1, 5), "alltoallv: nothing to self, gaps between blocks left untouched");
    /* the large-count path: counts beyond one MPI call's int, sent in the
     * common divisor's unit (made reachable with a small limit) */
    glm_mpi_set_max_count(1000);
    check(exchange(64, 0, 0), "alltoallv: counts above the int limit go in a larger unit (64 B)");
    /* no unit fits: every rank fails alike, no rank hangs */
    int r = -1;
    {
        int n = T.size;
        size_t *sc = calloc(4 * (size_t)n, sizeof(size_t));
        unsigned char *sb = malloc(2002 * (size_t)n), *rb = malloc(2002 * (size_t)n);
        if (sc && sb && rb) {
            size_t *sd = sc + n, *rc = sd + n, *rd = rc + n;
            /* send 2001 + j bytes to rank j: with 2 ranks no unit > 1
             * divides both 2001 and 2002, on every rank */
            for (int j = 0; j < n; j++) {
                sc[j] = 2001 + (size_t)j;
                sd[j] = 2002 * (size_t)j;
                rc[j] = 2001 + (size_t)T.rank;
                rd[j] = 2002 * (size_t)j;
            }
            fprintf(stderr, "(rank %d: the next message is expected)\n", T.rank);
            r = T.alltoallv(T.ctx, sb, sc, sd, rb, rc, rd);
        }
        free(sc);
        free(sb);
        free(rb);
    }
    check(T.size == 1 || r != 0,
          "alltoallv: counts no unit makes fit fail on every rank (no hang)");
    check(bcast_check(0, 4096), "bcast: 4096 bytes from rank 0");
    check(bcast_check(T.size - 1, 2500), "bcast: 2500 bytes in pieces of 1000 from the last rank");
    glm_mpi_set_max_count(0); /* back to INT_MAX */
    check(bcast_check(0, 1), "bcast: 1 byte");
    int mine = T.rank != T.size - 1; /* the last rank says no */
    check(glm_mpi_all_ok(&T, mine) == 0, "all_ok: one rank's failure is every rank's answer");
    check(glm_mpi_all_ok(&T, 1) == 1, "all_ok: all succeed");

    /* the --device share (no communication) */
    check(share_is("A,B", 0, 2, "A", 1) && share_is("A,B", 1, 2, "B", 1),
          "device share: A,B over 2 ranks");
    check(share_is("a,b,c,d", 1, 2, "c,d", 2) && share_is("a,b,c,d", 0, 2, "a,b", 2) &&
              share_is("a,b,c,d", 0, 1, "a,b,c,d", 4),
          "device share: 4 devices over 2 ranks, over 1");
    check(share_fails("A,B,C", 0, 2, "rank count must divide") &&
              share_fails("A", 1, 2, "lists 1 device for 2 MPI ranks"),
          "device share: 3 over 2, 1 over 2 -> a message naming the counts");
    check(share_fails("A,,B", 0, 2, "entry 2 is empty") && share_fails("", 0, 2, "rank order") &&
              share_fails("A,B,", 0, 3, "entry 3 is empty"),
          "device share: empty entries, empty list");

    ret = n_fail ? 1 : 0;
    if (T.rank == 0)
        printf("transport: %d passed, %d failed\n", n_pass, n_fail);
    glm_mpi_finalize();
    return ret;
}
