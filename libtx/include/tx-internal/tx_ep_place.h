/* SPDX-License-Identifier: MIT */
/*
 * Expert-parallel placement: which device holds each (MoE layer, expert).
 * One rule, used by libtx (runtime/expert_parallel.c: at load and by
 * glm_model_ep_rebalance) and by glm-analyze --devices (tools/lib/
 * analyze_ep.c), header-only so that both build it from the same text.
 * docs/multi-device.md "Placement" describes it:
 *
 * A MoE layer's experts form G equal groups (expert_parallel). Each device
 * d has a size C[d] (its usable memory), bytes R[d] already resident that
 * are not experts (device 0: the primary's weights, tables, activations and
 * the KV reserve) and a room F[d] (the bytes its experts may take).
 *
 *  - by memory (no load counters): the target of device d is the share
 *    q[d] = clamp(u * C[d] - R[d], 0, F[d]) of the expert bytes, with the
 *    level u chosen so that the shares sum to all the expert bytes (equal
 *    utilisation (R + experts) / C on every device that is not full); the
 *    groups, layer after layer, go to the device with the least
 *    (assigned bytes + group bytes) / q[d];
 *  - by load (live counters): per MoE layer, groups heaviest first (their
 *    selections) to the device with the least selections of the layer so
 *    far (greedy LPT);
 * both only among devices whose room still takes the group; ties go to the
 * device with the fewest groups of the layer, then the least expert bytes,
 * then the lowest index. No room anywhere: an error that names the device
 * with the most room and the shortfall.
 */
#ifndef TX_RT_EP_PLACE_H
#define TX_RT_EP_PLACE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_error.h>

struct ep_place_in {
    int n;                    /* devices */
    int E, G, nm;             /* experts per MoE layer, groups per layer, MoE layers */
    const uint64_t *bytes;    /* [nm][E] device bytes of each expert */
    const uint64_t *load;     /* [nm][E] selections, or NULL: place by memory */
    const uint64_t *size;     /* [n] usable memory, or NULL: all equal */
    const uint64_t *resident; /* [n] bytes resident besides experts, or NULL: none */
    const uint64_t *room;     /* [n] bytes the experts may take, or NULL: unlimited */
};

static inline double ep_place_mib(uint64_t b)
{
    return (double)b / 1048576.0;
}

/* owner[nm * E] <- device; mem[n] <- expert bytes placed, cnt[n] <- experts.
 * TX_OK, or TX_ENOSPC / TX_ENOMEM with a message in err. */
static inline int ep_place(const struct ep_place_in *in, int16_t *owner, uint64_t *mem,
                           uint32_t *cnt, char *err, size_t errsz)
{
    int n = in->n, E = in->E, G = in->G, nm = in->nm, gs = E / G;
    uint64_t total = 0, room_all = 0;
    int unlimited = !in->room;
    for (size_t i = 0; i < (size_t)nm * (size_t)E; i++)
        total += in->bytes[i];
    for (int d = 0; d < n; d++) {
        mem[d] = 0;
        cnt[d] = 0;
        if (in->room)
            room_all += in->room[d];
    }
    if (!unlimited && room_all < total) {
        int o = snprintf(err, errsz,
                         "the routed experts need %.1f MiB but the %d devices have room for "
                         "%.1f MiB in all (short by %.1f MiB):",
                         ep_place_mib(total), n, ep_place_mib(room_all),
                         ep_place_mib(total - room_all));
        for (int d = 0; d < n && o > 0 && (size_t)o < errsz; d++)
            o += snprintf(err + o, errsz - (size_t)o, "%s device %d %.1f MiB", d ? "," : "", d,
                          ep_place_mib(in->room[d]));
        return TX_ENOSPC;
    }
    double *q = calloc((size_t)n, sizeof(double));
    double *A = calloc((size_t)n, sizeof(double));
    double *wt = calloc((size_t)G, sizeof(double));
    uint64_t *gb = calloc((size_t)G, sizeof(uint64_t));
    int *ord = calloc((size_t)G, sizeof(int)), *lc = calloc((size_t)n, sizeof(int));
    int rc = TX_OK;
    if (!q || !A || !wt || !gb || !ord || !lc) {
        snprintf(err, errsz, "out of memory");
        rc = TX_ENOMEM;
        goto out;
    }
    /* by memory: the shares at equal utilisation (bisection on the level) */
    {
        double lo = 0, hi = 1;
        for (int d = 0; d < n; d++) {
            double c = in->size ? (double)in->size[d] : 1.0;
            double r = in->resident ? (double)in->resident[d] : 0.0;
            double need = c > 0 ? (r + (double)total) / c : 0;
            if (need > hi)
                hi = need;
        }
        hi *= 2;
        for (int it = 0; it < 200; it++) {
            double u = (lo + hi) / 2, s = 0;
            for (int d = 0; d < n; d++) {
                double c = in->size ? (double)in->size[d] : 1.0;
                double r = in->resident ? (double)in->resident[d] : 0.0;
                double x = u * c - r;
                if (x < 0)
                    x = 0;
                if (!unlimited && x > (double)in->room[d])
                    x = (double)in->room[d];
                s += x;
            }
            if (s < (double)total)
                lo = u;
            else
                hi = u;
        }
        for (int d = 0; d < n; d++) {
            double c = in->size ? (double)in->size[d] : 1.0;
            double r = in->resident ? (double)in->resident[d] : 0.0;
            double x = hi * c - r;
            if (x < 0)
                x = 0;
            if (!unlimited && x > (double)in->room[d])
                x = (double)in->room[d];
            q[d] = x;
        }
    }
    for (int mi = 0; mi < nm && !rc; mi++) {
        const uint64_t *b = in->bytes + (size_t)mi * E;
        const uint64_t *ld = in->load ? in->load + (size_t)mi * E : NULL;
        uint64_t lsum = 0;
        for (int e = 0; ld && e < E; e++)
            lsum += ld[e];
        int by_load = ld && lsum;
        for (int g = 0; g < G; g++) {
            gb[g] = 0;
            wt[g] = 0;
            for (int e = g * gs; e < (g + 1) * gs; e++) {
                gb[g] += b[e];
                wt[g] += by_load ? (double)ld[e] : (double)b[e];
            }
            ord[g] = g;
        }
        /* heaviest first (stable: lower group first at ties) */
        for (int i = 1; i < G; i++) {
            int v = ord[i], j = i;
            while (j > 0 && wt[ord[j - 1]] < wt[v]) {
                ord[j] = ord[j - 1];
                j--;
            }
            ord[j] = v;
        }
        for (int d = 0; d < n; d++) {
            lc[d] = 0;
            if (by_load || in->load)
                A[d] = 0; /* compute balance is per layer */
        }
        for (int i = 0; i < G; i++) {
            int g = ord[i], best = -1, most = 0;
            double bs = 0;
            for (int d = 0; d < n; d++) {
                uint64_t left = unlimited ? UINT64_MAX : in->room[d] - mem[d];
                if (!unlimited && in->room[d] - mem[d] > in->room[most] - mem[most])
                    most = d;
                if (left < gb[g])
                    continue;
                double s;
                if (in->load) {
                    s = A[d] + wt[g];
                } else {
                    if (q[d] <= 0)
                        continue;
                    s = (A[d] + (double)gb[g]) / q[d];
                }
                if (best < 0 || s < bs || (s == bs && lc[d] < lc[best]) ||
                    (s == bs && lc[d] == lc[best] && mem[d] < mem[best])) {
                    best = d;
                    bs = s;
                }
            }
            if (best < 0 && !in->load) /* shares rounded away: any device with room */
                for (int d = 0; d < n; d++)
                    if ((unlimited || in->room[d] - mem[d] >= gb[g]) &&
                        (best < 0 || mem[d] < mem[best]))
                        best = d;
            if (best < 0) {
                uint64_t left = in->room[most] - mem[most];
                snprintf(err, errsz,
                         "no device has room for expert group %d of MoE layer %d (%.1f MiB): "
                         "device %d has the most room left, %.1f MiB, short by %.1f MiB",
                         g, mi, ep_place_mib(gb[g]), most, ep_place_mib(left),
                         ep_place_mib(gb[g] - left));
                rc = TX_ENOSPC;
                break;
            }
            A[best] += in->load ? wt[g] : (double)gb[g];
            lc[best]++;
            mem[best] += gb[g];
            cnt[best] += (uint32_t)gs;
            for (int e = g * gs; e < (g + 1) * gs; e++)
                owner[(size_t)mi * E + e] = (int16_t)best;
        }
    }
out:
    free(q);
    free(A);
    free(wt);
    free(gb);
    free(ord);
    free(lc);
    return rc;
}

#endif
