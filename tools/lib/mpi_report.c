/* SPDX-License-Identifier: MIT */
/*
 * A tool under mpirun (glm-inference, glm-server): the figures each rank
 * prints at the end (common/mpi_transport.h, glm_mpi_report). Apart from
 * mpi_transport.c so that the transport self-test
 * (tests/mpi/transport_test.c) links without libtx.
 */
#include "common/mpi_transport.h"

#include <stdio.h>

void glm_mpi_report(struct glm_mpi_run *run, glm_model_t *m)
{
    if (!run->on)
        return;
    struct glm_mpi_call_stats st[4];
    glm_mpi_stats(st, 0);
    const char *nm[3] = {"bcast", "dispatch alltoallv", "combine alltoallv"};
    for (int i = 0; i < 3; i++)
        fprintf(stderr,
                "%s: transport: %s: %llu calls, %llu B sent, %llu B received, %.3f ms "
                "(%.1f us per call)\n",
                run->prog, nm[i], st[i].calls, st[i].bytes_sent, st[i].bytes_received,
                st[i].us / 1e3, st[i].calls ? st[i].us / (double)st[i].calls : 0.0);
    struct glm_ep_stats es;
    if (!m || glm_model_ep_stats(m, &es))
        return;
    for (int d = 0; d < es.n_devices && d < GLM_EP_MAX_DEVICES; d++) {
        const struct glm_ep_device_stats *v = &es.dev[d];
        if (!v->local || run->t.rank == 0)
            continue; /* rank 0: mdev_print_stats (tools/lib/device_list.c) has every device */
        fprintf(stderr, "%s: expert parallel: device %d (rank %d%s): %u experts", run->prog, d,
                v->rank, v->local ? "" : ", remote", v->experts);
        if (v->local)
            fprintf(stderr, " in %.1f MiB", v->expert_bytes / 1048576.0);
        fprintf(stderr, ", %llu pairs, %llu B in, %llu B out", (unsigned long long)v->pairs,
                (unsigned long long)v->bytes_in, (unsigned long long)v->bytes_out);
        if (v->local)
            fprintf(stderr, ", compute %.3f ms", v->compute_ms);
        fputc('\n', stderr);
    }
}
