/* SPDX-License-Identifier: MIT */
/*
 * glm-server under mpirun (docs/glm-server.md, "Several hosts"): one model's
 * routed experts spread over the devices of every rank, as glm-inference
 * does (docs/multi-device.md), over the tools' MPI transport
 * (common/mpi_transport.h; libtx never links MPI). Rank 0 is the server:
 * HTTP, the scheduler, the slots' sessions, tokenising and sampling, the
 * dense layers; each rank > 0 only computes the experts placed on its
 * devices, inside glm_ep_worker_run, and never reaches the server part of
 * main.
 *
 * Between two models rank 0 sends the workers one word (a transport bcast
 * from rank 0 of an int32):
 *   LOAD  every rank opens its share of --device and sets the plan, they
 *         agree (one rank's failure is every rank's), and load the package
 *         together (glm_model_load_ep); a worker then serves the MoE layers
 *         until rank 0 frees its model (SIGTERM, a device loss, SIGHUP),
 *         frees its own, closes its devices and waits for the next word
 *   QUIT  MPI_Finalize, exit 0
 * So the reload after a device loss or SIGHUP (device.c, dev_recover)
 * reloads every rank, and a device lost on any rank (its MoE layer fails
 * with that status) is recovered the same way.
 *
 * A rank lost (it died; its host or its network went away; it hangs): the
 * transport fails on rank 0 (an MPI error, or a call of a loaded model
 * waiting longer than --rank-timeout: glm_mpi_broken), the scheduler marks
 * the device lost (every request 503) and main exits with status 3 through
 * MPI_Abort, which ends every rank. Open MPI's mpirun also ends the whole
 * job by itself as soon as one rank dies.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tx/tx.h>

#include "common/device_list.h"
#include "common/mpi_transport.h"
#include "server.h"

enum { RANKS_LOAD = 1, RANKS_QUIT = 2 };

static struct glm_mpi_run g_run;

static int distributed(void)
{
    return g_run.on && g_run.t.size > 1;
}

const char *ranks_prog(void)
{
    return g_run.on && g_run.t.rank > 0 ? g_run.prog : "glm-server";
}

int ranks_broken(void)
{
    return g_run.on && glm_mpi_broken();
}

int ranks_devices(const struct srv *S)
{
    return distributed() ? g_run.n_total : S->n_devs;
}

void ranks_serving(const struct srv *S, int on)
{
    if (distributed() && g_run.t.rank == 0)
        glm_mpi_set_timeout(on ? S->o.rank_timeout_s : 0);
}

int ranks_agree(int ok, int verbose)
{
    if (!verbose) /* a reload tried again every second: the failing rank says why */
        return g_run.on ? glm_mpi_all_ok(&g_run.t, ok) : ok;
    return glm_mpi_devices_ok(&g_run, ok);
}

/* rank 0 -> every worker: the next word; 0 or -1 (the transport failed) */
static int tell(int32_t word)
{
    if (!distributed())
        return 0;
    return g_run.t.bcast(g_run.t.ctx, &word, sizeof(word), 0) ? -1 : 0;
}

int ranks_tell_load(void)
{
    return tell(RANKS_LOAD);
}

int ranks_load(struct srv *S, const struct glm_load_options *lo, uint64_t kv_reserve,
               glm_model_t **out)
{
    if (!distributed())
        return mdev_load(S->devs, S->n_devs, S->o.checkpoint, lo, 0, kv_reserve, out);
    struct glm_ep_options epo = {
        .transport = &g_run.t, .n_devices_total = g_run.n_total, .reserve_bytes = kv_reserve};
    return glm_model_load_ep(S->devs, S->n_devs, S->o.checkpoint, lo, &epo, out);
}

/* A rank > 0: load when told, serve the MoE layers, until QUIT. The exit
 * status. */
static int worker(struct srv *S)
{
    const char *prog = g_run.prog;
    srv_sigbus_install(); /* a restarted device: its next job fails instead */
    /* SIGTERM and SIGINT end a worker (mpirun forwards them when it is
     * stopped or a rank died); the server is stopped by SIGTERM to rank 0 */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    fprintf(stderr, "%s: pid %d: computing the experts of its devices for rank 0\n", prog,
            (int)getpid());
    int rc = 0, loads = 0;
    for (;;) {
        int32_t word = 0;
        if (g_run.t.bcast(g_run.t.ctx, &word, sizeof(word), 0)) {
            fprintf(stderr, "%s: rank 0 is gone (the transport failed)\n", prog);
            rc = 1;
            break;
        }
        if (word == RANKS_QUIT)
            break;
        if (word != RANKS_LOAD) {
            fprintf(stderr, "%s: rank 0 sent the word %d, neither LOAD nor QUIT\n", prog,
                    (int)word);
            rc = 1;
            break;
        }
        glm_model_t *m = NULL;
        if (dev_load(S, loads == 0, &m))
            continue; /* every rank failed; rank 0 retries or quits */
        loads++;
        struct glm_mpi_call_stats zero[4];
        glm_mpi_stats(zero, 1); /* the figures count the passes, not the load */
        fprintf(stderr, "%s: serving the MoE layers of rank 0\n", prog);
        int wrc = glm_ep_worker_run(m);
        if (wrc)
            fprintf(stderr, "%s: expert parallel worker: %s\n", prog, tx_last_error());
        glm_mpi_report(&g_run, m);
        glm_model_free(m);
        mdev_close(S->devs, S->n_devs);
        S->n_devs = 0;
        S->dev = NULL;
        if (wrc) {
            rc = 1;
            break;
        }
    }
    if (rc && !glm_mpi_broken())
        glm_mpi_abort(1); /* rank 0 may be waiting for this rank */
    glm_mpi_end(&g_run);
    return rc;
}

int ranks_begin(struct srv *S, int *argc, char ***argv)
{
    int rc = glm_mpi_begin(&g_run, "glm-server", argc, argv, &S->o.device);
    if (rc)
        return rc; /* every rank said why */
    if (!g_run.on)
        return -1;
    if (g_run.t.rank == 0) {
        fprintf(stderr, "%s: pid %d: serves HTTP; the experts over %d rank%s\n", g_run.prog,
                (int)getpid(), g_run.t.size, g_run.t.size == 1 ? "" : "s");
        return -1;
    }
    return worker(S);
}

int ranks_end(int rc)
{
    if (!g_run.on)
        return rc;
    if (glm_mpi_broken()) {
        fprintf(stderr, "%s: the MPI job lost a rank: ending every rank (status %d)\n", g_run.prog,
                rc ? rc : 3);
        glm_mpi_abort(rc ? rc : 3);
    }
    glm_mpi_report(&g_run, NULL); /* the transport's figures (the model is freed) */
    /* the workers are waiting for a word: no model is up */
    if (tell(RANKS_QUIT))
        glm_mpi_abort(rc ? rc : 1);
    glm_mpi_end(&g_run);
    return rc;
}
