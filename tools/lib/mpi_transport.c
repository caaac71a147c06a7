/* SPDX-License-Identifier: MIT */
/*
 * The tools' MPI transport (common/mpi_transport.h), used by glm-inference
 * and glm-server under mpirun: struct glm_ep_transport over MPI_COMM_WORLD
 * with MPI_Alltoallv (the token rows of each MoE layer, dispatch and
 * combine) and MPI_Bcast. Compiled against Open MPI when mk/mpi.mk found
 * mpicc (GLM_HAVE_MPI); otherwise only the MPI-free parts
 * (glm_mpi_launched, glm_mpi_device_share) do anything. Messages start
 * with the program's name (program_invocation_short_name).
 *
 * Counts are bytes (size_t); MPI's are int. A call whose counts or
 * displacements do not fit an int is sent in a larger unit: a contiguous
 * datatype of U bytes, U the greatest common divisor of this rank's counts
 * and displacements on that side (rows of floats: a multiple of the row
 * size). Each rank chooses its send and receive units alone -- MPI matches
 * type signatures, and c elements of U bytes match U * c bytes -- so no
 * extra collective is needed to agree. A call that no unit makes fit fails
 * with a message. Broadcasts larger than an int are sent in pieces (the
 * size is the same on every rank).
 */
#include "common/mpi_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tx/tx_error.h>

#ifdef GLM_HAVE_MPI
#include <mpi.h>
#endif

int glm_mpi_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return 1;
    }
    return 0;
}

int glm_mpi_device_share(const char *list, int rank, int size, char *out, size_t outlen,
                         int *n_share, char *err, size_t errlen)
{
    if (!list || !*list) {
        snprintf(err, errlen,
                 "under mpirun, --device (or TX_DEVICE) must list the devices of all %d ranks "
                 "in rank order, e.g. --device A,B",
                 size);
        return TX_EINVAL;
    }
    if (size < 1 || rank < 0 || rank >= size) {
        snprintf(err, errlen, "rank %d of %d: not a valid rank", rank, size);
        return TX_EINVAL;
    }
    int n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    /* an empty entry (",A", "A,,B", "A,") names no device */
    const char *s = list;
    for (int i = 0; i < n; i++) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 0) {
            snprintf(err, errlen, "--device '%s': entry %d is empty", list, i + 1);
            return TX_EINVAL;
        }
        s = e ? e + 1 : s + len;
    }
    if (n % size != 0) {
        char divs[160] = "";
        size_t o = 0;
        int nd = 0;
        for (int d = 1; d <= n; d++)
            nd += n % d == 0;
        for (int d = 1, k = 0; d <= n && o + 16 < sizeof(divs); d++)
            if (n % d == 0) {
                k++;
                o += (size_t)snprintf(divs + o, sizeof(divs) - o, "%s%d",
                                      k == 1    ? ""
                                      : k == nd ? " or "
                                                : ", ",
                                      d);
            }
        snprintf(err, errlen,
                 "--device lists %d device%s for %d MPI ranks: each rank drives the same number "
                 "of devices, so the rank count must divide the device count (%d device%s: "
                 "mpirun -np %s; %d ranks: %d, %d, ... devices)",
                 n, n == 1 ? "" : "s", size, n, n == 1 ? "" : "s", divs, size, size, 2 * size);
        return TX_EINVAL;
    }
    int per = n / size, first = rank * per;
    s = list;
    for (int i = 0; i < first; i++)
        s = strchr(s, ',') + 1;
    const char *end = s;
    for (int i = 0; i < per; i++) {
        const char *e = strchr(end, ',');
        end = e ? (i + 1 < per ? e + 1 : e) : end + strlen(end);
    }
    size_t len = (size_t)(end - s);
    if (len + 1 > outlen) {
        snprintf(err, errlen, "--device: the share of rank %d is longer than %zu bytes", rank,
                 outlen - 1);
        return TX_EINVAL;
    }
    memcpy(out, s, len);
    out[len] = '\0';
    *n_share = per;
    return 0;
}

/* ---- a tool's run under mpirun (glm-inference, glm-server) ----------------- */

int glm_mpi_begin(struct glm_mpi_run *run, const char *prog, int *argc, char ***argv,
                  const char **device)
{
    memset(run, 0, sizeof(*run));
    snprintf(run->prog, sizeof(run->prog), "%s", prog);
    if (!glm_mpi_launched())
        return 0;
    char err[512];
    if (glm_mpi_init(argc, argv, &run->t, err, sizeof(err))) {
        fprintf(stderr, "%s: %s\n", prog, err);
        glm_mpi_finalize();
        return 1;
    }
    run->on = 1;
    snprintf(run->prog, sizeof(run->prog), "%s: rank %d of %d", prog, run->t.rank, run->t.size);
    const char *list = *device ? *device : getenv("TX_DEVICE");
    if (run->t.size == 1 && (!list || !*list)) {
        run->n_total = run->n_share = 1; /* the default device */
        fprintf(stderr, "%s: drives the default device\n", run->prog);
        return 0;
    }
    if (glm_mpi_device_share(list, run->t.rank, run->t.size, run->share, sizeof(run->share),
                             &run->n_share, err, sizeof(err))) {
        fprintf(stderr, "%s: %s\n", run->prog, err);
        glm_mpi_end(run);
        return 2;
    }
    run->n_total = run->n_share * run->t.size;
    *device = run->share;
    fprintf(stderr, "%s: drives %s (device%s %d..%d of %d)\n", run->prog, run->share,
            run->n_share == 1 ? "" : "s", run->t.rank * run->n_share,
            (run->t.rank + 1) * run->n_share - 1, run->n_total);
    return 0;
}

int glm_mpi_devices_ok(struct glm_mpi_run *run, int ok)
{
    if (!run->on)
        return ok;
    int all = glm_mpi_all_ok(&run->t, ok);
    if (ok && !all)
        fprintf(stderr, "%s: another rank failed before the load (see its message); stopping\n",
                run->prog);
    return all;
}

void glm_mpi_end(struct glm_mpi_run *run)
{
    if (run->on && glm_mpi_broken()) {
        /* MPI_Finalize would wait for the lost rank: end the job */
        fprintf(stderr, "%s: the MPI job lost a rank: ending every rank\n", run->prog);
        glm_mpi_abort(1);
    }
    if (run->on)
        glm_mpi_finalize();
    run->on = 0;
}

#ifndef GLM_HAVE_MPI

int glm_mpi_available(void)
{
    return 0;
}

int glm_mpi_init(int *argc, char ***argv, struct glm_ep_transport *t, char *err, size_t errlen)
{
    (void)argc;
    (void)argv;
    (void)t;
    snprintf(err, errlen,
             "started by an MPI launcher, but this %s was built without MPI "
             "(install Open MPI: scripts/install-deps, or apt-get install openmpi-bin "
             "libopenmpi-dev; then rebuild)",
             program_invocation_short_name);
    return TX_ENOTSUP;
}

int glm_mpi_all_ok(const struct glm_ep_transport *t, int ok)
{
    (void)t;
    return ok != 0;
}

int glm_mpi_broken(void)
{
    return 0;
}

void glm_mpi_finalize(void) {}

void glm_mpi_abort(int code)
{
    (void)code;
}

void glm_mpi_set_max_count(size_t bytes)
{
    (void)bytes;
}

void glm_mpi_set_timeout(double seconds)
{
    (void)seconds;
}

void glm_mpi_stats(struct glm_mpi_call_stats out[4], int reset)
{
    (void)reset;
    memset(out, 0, 4 * sizeof(*out));
}

#else /* GLM_HAVE_MPI */

struct mpi_ctx {
    int rank, size;
    int *sc, *sd, *rc, *rd; /* per-peer int counts/displacements, 4 * size */
    /* figures: [0] bcasts, [1] the first alltoallv after a bcast (a MoE
     * layer's dispatch), [2] the second (its combine), [3] any other */
    int phase;
    struct glm_mpi_call_stats st[4];
};

static struct mpi_ctx g_ctx;
static int g_inited;
static int g_broken; /* an MPI call failed: the job has lost a rank (or its network) */
static size_t g_max = INT_MAX;

void glm_mpi_set_max_count(size_t bytes)
{
    g_max = bytes >= 1 && bytes <= INT_MAX ? bytes : INT_MAX;
}

int glm_mpi_available(void)
{
    return 1;
}

static double g_timeout_us;
/* wait_for's answer after the timeout: not an MPI error code (those are >= 0) */
#define WAIT_TIMED_OUT (-1)

void glm_mpi_set_timeout(double seconds)
{
    g_timeout_us = seconds > 0 ? seconds * 1e6 : 0;
}

static void mpi_fail(const struct mpi_ctx *c, const char *what, int rc)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (rc == WAIT_TIMED_OUT)
        snprintf(s, sizeof(s),
                 "no answer from every rank within %.0f s (a rank is hung, or its host or "
                 "network is gone)",
                 g_timeout_us / 1e6);
    else if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof(s), "MPI error %d", rc);
    fprintf(stderr, "%s: rank %d of %d: %s failed: %s\n", program_invocation_short_name, c->rank,
            c->size, what, s);
    g_broken = 1;
}

int glm_mpi_broken(void)
{
    return g_broken;
}

static size_t gcd(size_t a, size_t b)
{
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The unit (bytes) that makes every count and displacement of one side
 * fit an int, 0 if none does. */
static size_t side_unit(int n, const size_t *counts, const size_t *displs)
{
    size_t max = 0, g = 0;
    for (int i = 0; i < n; i++) {
        if (counts[i] > max)
            max = counts[i];
        if (displs[i] > max)
            max = displs[i];
        g = gcd(g, counts[i]);
        g = gcd(g, displs[i]);
    }
    if (max <= g_max)
        return 1;
    if (g == 0 || g > (size_t)INT_MAX || max / g > g_max)
        return 0;
    return g;
}

static int to_int(int n, const size_t *v, size_t unit, int *out)
{
    for (int i = 0; i < n; i++)
        out[i] = (int)(v[i] / unit);
    return 0;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void account(struct glm_mpi_call_stats *st, double t0, size_t sent, size_t recvd)
{
    st->calls++;
    st->bytes_sent += sent;
    st->bytes_received += recvd;
    st->us += now_us() - t0;
}

static int mpi_alltoallv_raw(struct mpi_ctx *c, const void *sbuf, const size_t *scounts,
                             const size_t *sdispls, void *rbuf, const size_t *rcounts,
                             const size_t *rdispls);

/* How a rank waits for a collective. Open MPI's blocking calls poll the
 * network without pause; a rank > 0 spends most of its time waiting for
 * rank 0's next layer, and with ranks and devices sharing cores (one host,
 * emulators) that polling takes the CPU from the devices. So the calls
 * are the non-blocking forms, tested without pause for 50 us plus 1 us
 * per KB this rank moves (MPI progresses a transfer only inside its calls:
 * at 1 GB/s the data is through), then between sleeps of 10 us doubling up
 * to 200 us: a longer wait, the other rank still busy, ends at most ~200
 * us late. TX8_MPI_WAIT=spin: MPI_Wait (poll without pause, the lowest
 * latency when every rank has a core of its own; MPI_Test without pause
 * under a timeout). glm_mpi_set_timeout: a call not done after that long
 * fails (WAIT_TIMED_OUT). */
static int g_spin = -1;

static int wait_for(int rc, MPI_Request *req, size_t bytes)
{
    if (rc != MPI_SUCCESS)
        return rc;
    if (g_spin < 0) {
        const char *e = getenv("TX8_MPI_WAIT");
        g_spin = e && strcmp(e, "spin") == 0;
    }
    if (g_spin && g_timeout_us <= 0)
        return MPI_Wait(req, MPI_STATUS_IGNORE);
    double t0 = now_us(), spin_us = 50 + (double)bytes / 1000;
    long ns = 10000;
    for (;;) {
        int done = 0;
        rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done)
            return rc;
        double waited = now_us() - t0;
        if (g_timeout_us > 0 && waited > g_timeout_us)
            return WAIT_TIMED_OUT; /* the request stays pending: the job must end */
        if (g_spin || waited < spin_us)
            continue;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        ns = ns < 100000 ? 2 * ns : 200000;
    }
}

static int mpi_alltoallv(void *ctx, const void *sbuf, const size_t *scounts, const size_t *sdispls,
                         void *rbuf, const size_t *rcounts, const size_t *rdispls)
{
    struct mpi_ctx *c = ctx;
    if (g_broken)
        return TX_EIO; /* a peer is gone: MPI would wait for it */
    double t0 = now_us();
    int rc = mpi_alltoallv_raw(c, sbuf, scounts, sdispls, rbuf, rcounts, rdispls);
    size_t sent = 0, recvd = 0;
    for (int i = 0; i < c->size; i++)
        if (i != c->rank) {
            sent += scounts[i];
            recvd += rcounts[i];
        }
    c->phase = c->phase < 2 ? c->phase + 1 : 3;
    account(&c->st[c->phase], t0, sent, recvd);
    return rc;
}

static int mpi_alltoallv_raw(struct mpi_ctx *c, const void *sbuf, const size_t *scounts,
                             const size_t *sdispls, void *rbuf, const size_t *rcounts,
                             const size_t *rdispls)
{
    size_t su = side_unit(c->size, scounts, sdispls);
    size_t ru = side_unit(c->size, rcounts, rdispls);
    if (!su || !ru) {
        fprintf(stderr,
                "%s: rank %d of %d: alltoallv: the %s counts exceed what one MPI "
                "call can describe (more than %zu units of their common divisor): use a "
                "smaller batch (-b)\n",
                program_invocation_short_name, c->rank, c->size, !su ? "send" : "receive", g_max);
        return TX_ENOTSUP;
    }
    to_int(c->size, scounts, su, c->sc);
    to_int(c->size, sdispls, su, c->sd);
    to_int(c->size, rcounts, ru, c->rc);
    to_int(c->size, rdispls, ru, c->rd);
    MPI_Datatype st = MPI_BYTE, rt = MPI_BYTE;
    MPI_Request req = MPI_REQUEST_NULL;
    size_t moved = 0;
    for (int i = 0; i < c->size; i++)
        moved += i == c->rank ? 0 : scounts[i] + rcounts[i];
    int rc = MPI_SUCCESS;
    if (su > 1)
        rc = MPI_Type_contiguous((int)su, MPI_BYTE, &st);
    if (rc == MPI_SUCCESS && su > 1)
        rc = MPI_Type_commit(&st);
    if (rc == MPI_SUCCESS && ru > 1)
        rc = MPI_Type_contiguous((int)ru, MPI_BYTE, &rt);
    if (rc == MPI_SUCCESS && ru > 1)
        rc = MPI_Type_commit(&rt);
    if (rc == MPI_SUCCESS)
        rc = wait_for(
            MPI_Ialltoallv(sbuf, c->sc, c->sd, st, rbuf, c->rc, c->rd, rt, MPI_COMM_WORLD, &req),
            &req, moved);
    if (st != MPI_BYTE)
        MPI_Type_free(&st);
    if (rt != MPI_BYTE)
        MPI_Type_free(&rt);
    if (rc != MPI_SUCCESS) {
        mpi_fail(c, "MPI_Alltoallv", rc);
        return TX_EIO;
    }
    return 0;
}

static int mpi_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    struct mpi_ctx *c = ctx;
    if (g_broken)
        return TX_EIO;
    if (root < 0 || root >= c->size) {
        fprintf(stderr, "%s: rank %d of %d: bcast from rank %d: no such rank\n",
                program_invocation_short_name, c->rank, c->size, root);
        return TX_EINVAL;
    }
    double t0 = now_us();
    size_t total = bytes;
    unsigned char *p = buf;
    do {
        size_t n = bytes < g_max ? bytes : g_max;
        MPI_Request req = MPI_REQUEST_NULL;
        int rc = wait_for(MPI_Ibcast(p, (int)n, MPI_BYTE, root, MPI_COMM_WORLD, &req), &req,
                          c->rank == root ? n * (size_t)(c->size - 1) : n);
        if (rc != MPI_SUCCESS) {
            mpi_fail(c, "MPI_Bcast", rc);
            return TX_EIO;
        }
        p += n;
        bytes -= n;
    } while (bytes);
    account(&c->st[0], t0, c->rank == root ? total * (size_t)(c->size - 1) : 0,
            c->rank == root ? 0 : total);
    c->phase = 0;
    return 0;
}

void glm_mpi_stats(struct glm_mpi_call_stats out[4], int reset)
{
    memcpy(out, g_ctx.st, sizeof(g_ctx.st));
    if (reset)
        memset(g_ctx.st, 0, sizeof(g_ctx.st));
}

int glm_mpi_init(int *argc, char ***argv, struct glm_ep_transport *t, char *err, size_t errlen)
{
    if (g_inited) {
        snprintf(err, errlen, "MPI is already initialised");
        return TX_EINVAL;
    }
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Init_thread failed (error %d)", rc);
        return TX_EIO;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_ctx.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_ctx.size);
    g_inited = 1;
    if (provided < MPI_THREAD_SERIALIZED) {
        snprintf(err, errlen, "this MPI library gives thread level %d, below MPI_THREAD_SERIALIZED",
                 provided);
        return TX_ENOTSUP;
    }
    g_ctx.sc = calloc(4 * (size_t)g_ctx.size, sizeof(int));
    if (!g_ctx.sc) {
        snprintf(err, errlen, "out of memory");
        return TX_ENOMEM;
    }
    g_ctx.sd = g_ctx.sc + g_ctx.size;
    g_ctx.rc = g_ctx.sd + g_ctx.size;
    g_ctx.rd = g_ctx.rc + g_ctx.size;
    if (g_ctx.rank > 0) {
        /* only rank 0 prints the generated text */
        fflush(stdout);
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) {
            snprintf(err, errlen, "rank %d: cannot redirect stdout to /dev/null: %s", g_ctx.rank,
                     strerror(errno));
            if (fd >= 0)
                close(fd);
            return TX_EIO;
        }
        close(fd);
    }
    memset(t, 0, sizeof(*t));
    t->rank = g_ctx.rank;
    t->size = g_ctx.size;
    t->ctx = &g_ctx;
    t->alltoallv = mpi_alltoallv;
    t->bcast = mpi_bcast;
    return 0;
}

int glm_mpi_all_ok(const struct glm_ep_transport *t, int ok)
{
    (void)t;
    if (!g_inited)
        return ok != 0;
    if (g_broken)
        return 0;
    int in = ok != 0, all = 0;
    int rc = MPI_Allreduce(&in, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        mpi_fail(&g_ctx, "MPI_Allreduce", rc);
        return 0;
    }
    return all;
}

void glm_mpi_finalize(void)
{
    if (!g_inited)
        return;
    MPI_Finalize();
    free(g_ctx.sc);
    memset(&g_ctx, 0, sizeof(g_ctx));
    g_inited = 0;
}

void glm_mpi_abort(int code)
{
    if (g_inited)
        MPI_Abort(MPI_COMM_WORLD, code);
}

#endif /* GLM_HAVE_MPI */
