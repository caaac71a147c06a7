/* SPDX-License-Identifier: MIT */
/*
 * The tools' MPI glue (tools/lib/mpi_transport.c, mpi_report.c): an Open
 * MPI implementation of libtx's struct glm_ep_transport (<tx/glm.h>), so
 * that one model's routed experts are spread over the ranks of an `mpirun`
 * job (docs/multi-device.md, "Several hosts"; glm-inference and glm-server,
 * docs/glm-server.md "Several hosts"). libtx itself never links MPI.
 *
 * Only this file and mpi_transport.c know about MPI. mpi_transport.c is
 * compiled with MPI only when the build found mpicc (mk/mpi.mk defines
 * GLM_HAVE_MPI; a tool that uses it links $(MPI_LIBS)); without it the
 * functions below still exist: glm_mpi_available() is 0 and glm_mpi_init()
 * fails with a message naming what to install.
 *
 * The same binary runs with and without mpirun: MPI_Init is called only
 * when the environment says an MPI launcher started the process
 * (glm_mpi_launched()).
 */
#ifndef TXC_MPI_TRANSPORT_H
#define TXC_MPI_TRANSPORT_H

#include <stddef.h>

#include <tx/glm.h>

/* 1 when built with MPI (mpicc was found at build time). */
int glm_mpi_available(void);

/* 1 when an MPI launcher started this process (OMPI_COMM_WORLD_SIZE, or
 * PMIX_RANK / PMI_SIZE of another launcher, is set), else 0. */
int glm_mpi_launched(void);

/* MPI_Init_thread (MPI_THREAD_SERIALIZED), errors returned instead of
 * aborting, and *t filled: rank, size, ctx and the two collectives over
 * MPI_COMM_WORLD. On a rank > 0, stdout is redirected to /dev/null (only
 * rank 0 prints the generated text). 0 or a TX_E* code with a message in
 * err. Call once; glm_mpi_finalize() at the end. Call it with the signals
 * the tool handles blocked: MPI's threads inherit the mask. */
int glm_mpi_init(int *argc, char ***argv, struct glm_ep_transport *t, char *err, size_t errlen);

/* Every rank's local status, combined: 1 when every rank passed ok != 0,
 * 0 when one did not (or the reduction failed). Collective: every rank
 * must call it at the same point. Used after the local checks and the
 * load so that one rank's failure stops all ranks cleanly, not in a hang. */
int glm_mpi_all_ok(const struct glm_ep_transport *t, int ok);

/* 1 once an MPI call of this process failed (a rank died, its host or
 * network went away; the message is on stderr): from then on the
 * collectives fail at once (TX_EIO, glm_mpi_all_ok 0) instead of waiting
 * for the lost rank, and the job can only end by glm_mpi_abort. */
int glm_mpi_broken(void);

/* The longest this process waits inside one transport call (seconds; 0,
 * the default: as long as it takes). A call still waiting then fails with
 * a message naming the wait and glm_mpi_broken() becomes 1 (MPI cannot
 * cancel a collective: the job can only be aborted). For the rank that
 * drives the passes, once loaded: its waits are one MoE layer's work. */
void glm_mpi_set_timeout(double seconds);

/* MPI_Finalize (nothing if glm_mpi_init did not succeed). */
void glm_mpi_finalize(void);

/* MPI_Abort(MPI_COMM_WORLD, code): ends every rank of the job. For a
 * failure after the ranks have started exchanging rows, where the others
 * may be waiting in a collective. Returns only without MPI. */
void glm_mpi_abort(int code);

/* The share of a device list rank `rank` of `size` drives: the list
 * "A,B,C,D" names the devices of all ranks in rank order, each rank takes
 * n/size consecutive entries. Writes the comma-separated share into out
 * (NUL-terminated) and the number of entries into *n_share. 0, or
 * TX_EINVAL with a message in err when the list is empty or has an empty
 * entry, or when size does not divide the number of entries (every rank
 * computes the same answer, so every rank reports it). */
int glm_mpi_device_share(const char *list, int rank, int size, char *out, size_t outlen,
                         int *n_share, char *err, size_t errlen);

/* Figures of the transport calls of this rank: [0] bcasts, [1] the first
 * alltoallv after each bcast (a MoE layer's dispatch, rank 0 -> the
 * others), [2] the second (its combine, the outputs back), [3] any other
 * alltoallv (the load's agreement). Bytes to and from other ranks only;
 * wall time inside the calls (a rank waiting for a slower one included).
 * reset: zero them after the copy. */
struct glm_mpi_call_stats {
    unsigned long long calls, bytes_sent, bytes_received;
    double us;
};
void glm_mpi_stats(struct glm_mpi_call_stats out[4], int reset);

/* Tests only: the largest byte count of one MPI call (default INT_MAX);
 * larger counts are split into pieces of at most this many bytes. */
void glm_mpi_set_max_count(size_t bytes);

/* ---- a tool's run under mpirun (glm-inference's run.c, glm-server's ranks.c) */

struct glm_mpi_run {
    int on; /* started by mpirun and MPI initialised */
    struct glm_ep_transport t;
    int n_total;      /* entries of the whole --device list */
    int n_share;      /* of which this rank drives */
    char prog[64];    /* "PROG: rank R of N" (messages) */
    char share[4096]; /* this rank's part of the list */
};

/* After the options are parsed, before any device is opened. When an MPI
 * launcher started the process: MPI_Init, this rank's share of the device
 * list (*device, or TX_DEVICE when *device is NULL) into run->share and
 * *device pointed at it, and one line "PROG: rank R of N: drives SHARE" on
 * stderr. Not under MPI: run->on = 0 and nothing changes. Returns 0 to go
 * on, or the exit status after printing why (every rank prints it: the
 * checks depend on the command line only). */
int glm_mpi_begin(struct glm_mpi_run *run, const char *prog, int *argc, char ***argv,
                  const char **device);

/* After this rank opened its devices (ok: it did): 1 when every rank did.
 * A rank whose devices all opened prints that another rank failed. Not
 * under MPI: ok. */
int glm_mpi_devices_ok(struct glm_mpi_run *run, int ok);

/* On stderr: this rank's transport figures (glm_mpi_stats) and, from
 * glm_model_ep_stats, its devices' (rank 0: every device's, with the
 * bytes per row and MoE layer through its link; m NULL: the transport's
 * only). Not under MPI: nothing. */
void glm_mpi_report(struct glm_mpi_run *run, glm_model_t *m);

/* At exit: MPI_Finalize (nothing when not under MPI); after a transport
 * failure (glm_mpi_broken) MPI_Abort(1) instead, which ends every rank. */
void glm_mpi_end(struct glm_mpi_run *run);

#endif /* TXC_MPI_TRANSPORT_H */
