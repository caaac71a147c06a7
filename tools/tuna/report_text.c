/* SPDX-License-Identifier: MIT */
/*
 * tuna report: the text report -- the run's times, the top command
 * groups, the layers, energy, utilisation, the caches, the experts.
 */
#include <stdio.h>

#include "trace.h"

void report_text(const struct trace *t, int top)
{
    printf("tuna report: %s\n", t->path);
    printf("%d commands in %d jobs: %.1f us of commands, %.1f us of jobs\n", t->ncmd, t->njob,
           t->total, t->job_time);
    printf("wall time %.1f ms (first to last event of the trace), of which %.1f ms jobs "
           "on the device and %.1f ms host time (loading weights, tokenisation, building "
           "passes, gaps between jobs)",
           t->wall / 1e3, t->job_time / 1e3, (t->wall - t->job_time) / 1e3);
    if (t->rt.have_gen)
        printf("; load %.1f ms, generation %.1f ms", (t->rt.gen0 - t->rt.t0) / 1e3,
               (t->rt.gen1 - t->rt.gen0) / 1e3);
    printf("\n");
    printf("peaks (%s): %.2f GB/s, %.2f GFLOP/s\n\n", t->peak_src, t->peak_bw, t->peak_fl);
    printf("%-44s %-7s %6s %10s %6s %8s %9s %10s  %s\n", "command", "phase", "count", "time us",
           "share", "GB/s", "GFLOP/s", "energy uJ", "class");
    for (int g = 0; g < t->ngr && g < top; g++)
        printf("%-44.44s %-7s %6ld %10.1f %5.1f%% %8.2f %9.2f %10.2f  %s\n", t->groups[g].name,
               t->groups[g].phase, t->groups[g].count, t->groups[g].time,
               100.0 * t->groups[g].time / t->total, t->groups[g].bytes / (t->groups[g].time * 1e3),
               t->groups[g].flops / (t->groups[g].time * 1e3), t->groups[g].energy / 1e6,
               t->groups[g].cls);
    if (t->nly) {
        printf("\n%-12s %10s %6s %8s %10s\n", "layer", "time us", "share", "commands", "energy uJ");
        for (int k = 0; k < t->nly; k++)
            printf("%-12s %10.1f %5.1f%% %8ld %10.2f\n", t->layers[k].name, t->layers[k].time,
                   100.0 * t->layers[k].time / t->total, t->layers[k].count,
                   t->layers[k].energy / 1e6);
    }
    if (t->energy > 0)
        printf("\nenergy of the commands: %.3f mJ (the device's power model, docs/hardware.md "
               "section 7)\n",
               t->energy / 1e9);
    printf("\ndevice busy %.1f%% of %.1f us (cores %.1f%% of %d); host gaps: %d, %.1f us "
           "(longest %.1f us)\n",
           t->util, t->span_us, t->core_util, t->cores, t->ngaps, t->gaps, t->max_gap);
    if (t->self_us >= 0 && t->pass_us > 0)
        printf("profiler's own host time: %.1f us, %.2f%% of the prefill + decode step time\n",
               t->self_us, 100.0 * t->self_us / t->pass_us);
    if (t->have_kv)
        printf("KV cache: peak %.2f MiB used of %.2f MiB allocated\n", t->kv_used / 1048576.0,
               t->kv_alloc / 1048576.0);
    if (t->have_ec) {
        printf("expert cache: %.0f hits, %.0f misses", t->ec_hits, t->ec_misses);
        if (t->ec_hits + t->ec_misses > 0)
            printf(" (hit rate %.1f%%)", 100.0 * t->ec_hits / (t->ec_hits + t->ec_misses));
        printf("\n");
    }
    experts_text(t->xm, t->nxm);
}
