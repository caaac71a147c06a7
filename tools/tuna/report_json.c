/* SPDX-License-Identifier: MIT */
/*
 * tuna report --json: the report as one JSON object (docs/tuna.md lists
 * its fields).
 */
#include <stdio.h>

#include "trace.h"

void report_json(const struct trace *t)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "trace", json_object_new_string(t->path));
    json_object_object_add(o, "commands", json_object_new_int(t->ncmd));
    json_object_object_add(o, "jobs", json_object_new_int(t->njob));
    json_object_object_add(o, "command_time_us", json_object_new_double(t->total));
    json_object_object_add(o, "job_time_us", json_object_new_double(t->job_time));
    json_object_object_add(o, "wall_time_us", json_object_new_double(t->wall));
    json_object_object_add(o, "host_time_us", json_object_new_double(t->wall - t->job_time));
    if (t->rt.have_gen) {
        json_object_object_add(o, "load_time_us", json_object_new_double(t->rt.gen0 - t->rt.t0));
        json_object_object_add(o, "generation_time_us",
                               json_object_new_double(t->rt.gen1 - t->rt.gen0));
    }
    json_object_object_add(o, "command_energy_uj", json_object_new_double(t->energy / 1e6));
    json_object_object_add(o, "peak_gbps", json_object_new_double(t->peak_bw));
    json_object_object_add(o, "peak_gflops", json_object_new_double(t->peak_fl));
    json_object_object_add(o, "peak_source", json_object_new_string(t->peak_src));
    json_object_object_add(o, "device_busy_pct", json_object_new_double(t->util));
    json_object_object_add(o, "core_utilisation_pct", json_object_new_double(t->core_util));
    json_object_object_add(o, "host_gap_us", json_object_new_double(t->gaps));
    json_object_object_add(o, "host_gaps", json_object_new_int(t->ngaps));
    json_object_object_add(o, "max_host_gap_us", json_object_new_double(t->max_gap));
    if (t->self_us >= 0) {
        json_object_object_add(o, "profiler_host_us", json_object_new_double(t->self_us));
        json_object_object_add(
            o, "profiler_host_pct",
            t->pass_us > 0 ? json_object_new_double(100.0 * t->self_us / t->pass_us) : NULL);
    }
    if (t->have_kv) {
        json_object_object_add(o, "kv_cache_peak_used_bytes", json_object_new_double(t->kv_used));
        json_object_object_add(o, "kv_cache_peak_allocated_bytes",
                               json_object_new_double(t->kv_alloc));
    }
    if (t->have_ec) {
        json_object_object_add(o, "expert_cache_hits", json_object_new_double(t->ec_hits));
        json_object_object_add(o, "expert_cache_misses", json_object_new_double(t->ec_misses));
        json_object_object_add(
            o, "expert_cache_hit_pct",
            t->ec_hits + t->ec_misses > 0
                ? json_object_new_double(100.0 * t->ec_hits / (t->ec_hits + t->ec_misses))
                : NULL);
    }
    json_object *ga = json_object_new_array();
    for (int g = 0; g < t->ngr; g++) {
        json_object *x = json_object_new_object();
        json_object_object_add(x, "name", json_object_new_string(t->groups[g].name));
        json_object_object_add(x, "op", json_object_new_string(t->groups[g].op));
        json_object_object_add(x, "phase", json_object_new_string(t->groups[g].phase));
        json_object_object_add(x, "count", json_object_new_int64(t->groups[g].count));
        json_object_object_add(x, "time_us", json_object_new_double(t->groups[g].time));
        json_object_object_add(x, "share_pct",
                               json_object_new_double(100.0 * t->groups[g].time / t->total));
        json_object_object_add(
            x, "gbps", json_object_new_double(t->groups[g].bytes / (t->groups[g].time * 1e3)));
        json_object_object_add(
            x, "gflops", json_object_new_double(t->groups[g].flops / (t->groups[g].time * 1e3)));
        json_object_object_add(x, "energy_uj", json_object_new_double(t->groups[g].energy / 1e6));
        json_object_object_add(x, "class", json_object_new_string(t->groups[g].cls));
        json_object_object_add(x, "roof", json_object_new_string(t->groups[g].roof));
        json_object_array_add(ga, x);
    }
    json_object_object_add(o, "groups", ga);
    json_object *la = json_object_new_array();
    for (int k = 0; k < t->nly; k++) {
        json_object *x = json_object_new_object();
        json_object_object_add(x, "layer", json_object_new_string(t->layers[k].name));
        json_object_object_add(x, "time_us", json_object_new_double(t->layers[k].time));
        json_object_object_add(x, "commands", json_object_new_int64(t->layers[k].count));
        json_object_object_add(x, "energy_uj", json_object_new_double(t->layers[k].energy / 1e6));
        json_object_array_add(la, x);
    }
    json_object_object_add(o, "layers", la);
    if (t->nxm)
        json_object_object_add(o, "experts", experts_json(t->xm, t->nxm));
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
    json_object_put(o);
}
