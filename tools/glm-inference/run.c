/* SPDX-License-Identifier: MIT */
/*
 * glm-inference's run: MPI under mpirun, the device(s), the precision
 * plan, the model with its KV cache types and MoE settings, and the
 * clean-up at the end (docs/glm-inference.md, docs/multi-device.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/device_list.h"
#include "glm_inference.h"

/* --ep-rebalance N: generate.c's on_token rebalances every N tokens */
extern glm_model_t *reb_model;
extern long long reb_every;

int gi_open(struct gi_run *g, struct opts *o, int *argc, char ***argv)
{
    memset(g, 0, sizeof(*g));
    /* under mpirun: MPI_Init, this rank's share of the --device list
     * (docs/multi-device.md, "Several hosts"); otherwise nothing */
    int mrc = glm_mpi_begin(&g->mr, prog, argc, argv, &o->device);
    if (mrc)
        return mrc;
    if (g->mr.on) {
        prog = g->mr.prog;
        if (o->bench_cache) {
            fprintf(stderr, "%s: --bench-cache runs on one process: not under mpirun\n", prog);
            glm_mpi_end(&g->mr);
            return 2;
        }
    }

    /* device(s) and plan: --device A,B,... puts one model on several
     * (expert parallelism, tools/lib/device_list.c); under mpirun, this rank's share */
    if (mdev_open(prog, o->device, g->devs, GLM_EP_MAX_DEVICES, &g->n_devs)) {
        if (g->mr.on)
            glm_mpi_devices_ok(&g->mr, 0); /* the others wait for this rank's verdict */
        glm_mpi_end(&g->mr);
        return 1;
    }
    g->dev = g->devs[0];
    return -1;
}

int gi_set_plan(struct gi_run *g, const struct opts *o)
{
    g->plan = o->plan; /* parsed by opts_parse */
    struct tx_device_info di;
    if (o->set_top_k && !(o->set_temp && o->temp == 0) && tx_device_info(g->dev, &di) == 0 &&
        di.max_topk && (unsigned)o->top_k > di.max_topk) {
        fprintf(stderr, "%s: --top-k %d: the device samples from at most %u candidates\n", prog,
                o->top_k, di.max_topk);
        return 2;
    }
    for (int i = 0; i < g->n_devs; i++)
        if (glm_plan_set(g->devs[i], &g->plan)) {
            log_err("precision");
            return 1;
        }
    if ((g->n_devs > 1 || g->mr.n_total > 1) && (o->bench_cache || o->stream || o->expert_cache)) {
        fprintf(stderr,
                "%s: several devices: --bench-cache, --stream and --expert-cache are for "
                "one device\n",
                prog);
        return 2;
    }
    return -1;
}

/* the MoE settings file: --moe-config, else config/expert_parallel.yaml
 * if present (not with --no-moe-config); NULL: none */
static const char *moe_config_path(const struct opts *o)
{
    if (o->moe_config)
        return o->moe_config;
    if (!o->no_moe_config && access("config/expert_parallel.yaml", R_OK) == 0)
        return "config/expert_parallel.yaml";
    return NULL;
}

static void load_options(const struct opts *o, struct glm_load_options *lo)
{
    memset(lo, 0, sizeof(*lo));
    lo->name = o->name;
    if (o->stream)
        lo->flags |= GLM_LOAD_STREAM;
    if (o->expert_cache) {
        lo->flags |= GLM_LOAD_EXPERT_CACHE;
        lo->expert_cache_bytes = o->expert_cache;
    }
    if (o->expert_lru)
        lo->flags |= GLM_LOAD_EXPERT_LRU;
    if (o->no_prefetch)
        lo->flags |= GLM_LOAD_EXPERT_NO_PREFETCH;
    if (o->no_verify)
        lo->flags |= GLM_LOAD_NO_VERIFY;
    if (o->batch_invariant)
        lo->flags |= GLM_LOAD_BATCH_INVARIANT;
    if ((o->spec_mtp && o->spec_mode == GLM_SPEC_MTP) || o->n_bench_spec)
        lo->flags |= GLM_LOAD_MTP; /* the MTP layer with the rest */
    lo->max_weight_bytes = o->max_weight_mem;
}

/* the model on this run's device(s): one, several (expert parallel), or
 * this rank's share under mpirun; 0 or 1 (said why) */
static int load_model(struct gi_run *g, const struct opts *o)
{
    struct glm_load_options lo;
    load_options(o, &lo);
    int ep_groups = 0; /* several devices: the groups of the MoE settings file */
    if (g->n_devs > 1 || g->mr.n_total > 1) {
        struct glm_moe_options pre;
        glm_moe_defaults(&pre);
        const char *pc = moe_config_path(o);
        if (pc && glm_moe_config_load(pc, &pre)) {
            log_err("moe config");
            return 1;
        }
        ep_groups = pc ? pre.expert_parallel : 0;
    }
    int lrc;
    if (g->mr.on) {
        /* every rank got here: the load is collective */
        g->mpi_agreed = 1;
        if (!glm_mpi_devices_ok(&g->mr, 1))
            return 1;
        struct glm_ep_options epo = {
            .transport = &g->mr.t,
            .n_devices_total = g->mr.n_total,
            .expert_parallel = ep_groups,
            .reserve_bytes = mdev_kv_reserve(o->checkpoint, 1, o->n_ctx, o->cache_k, o->cache_v)};
        lrc = glm_model_load_ep(g->devs, g->n_devs, o->checkpoint, &lo, &epo, &g->m);
    } else {
        /* device 0 keeps room for the session's KV cache */
        uint64_t kv_reserve =
            g->n_devs > 1 ? mdev_kv_reserve(o->checkpoint, 1, o->n_ctx, o->cache_k, o->cache_v) : 0;
        lrc = mdev_load(g->devs, g->n_devs, o->checkpoint, &lo, ep_groups, kv_reserve, &g->m);
    }
    if (lrc) {
        log_rc("load", lrc);
        return 1;
    }
    return 0;
}

/* stderr: what was loaded where, the plan and cache types, the expert
 * cache or streaming */
static void print_loaded(struct gi_run *g, const struct opts *o, double ms)
{
    const struct glm_config *c = glm_model_config(g->m);
    struct glm_model_info mi;
    glm_model_info(g->m, &mi);
    struct tx_device_info di;
    tx_device_info(g->dev, &di);
    char pb[200];
    fprintf(stderr,
            "%s: loaded %s (%s, %d layers, hidden %d, %d experts top-%d, vocab %d) on %s "
            "[%s] in %.0f ms (%.1f MiB at %.0f MiB/s)\n",
            prog, glm_model_name(g->m), glm_arch_name(c->arch), c->num_hidden_layers,
            c->hidden_size, c->n_routed_experts, c->num_experts_per_tok, c->vocab_size, di.name,
            di.backend, ms, mi.package_bytes / 1048576.0, mi.io_mib_s);
    fprintf(stderr, "%s: precision plan %s, KV cache K %s, V %s\n", prog,
            glm_plan_format(&g->plan, pb, sizeof(pb)),
            glm_cache_type_name((glm_cache_type_t)o->cache_k),
            glm_cache_type_name((glm_cache_type_t)o->cache_v));
    struct glm_expert_cache_stats xs;
    if (mi.streaming == 2 && !glm_model_expert_cache_stats(g->m, &xs))
        fprintf(stderr,
                "%s: expert cache: %.1f MiB resident, %llu of %llu routed experts in %.1f "
                "MiB of slots (%s, prefetch %s)\n",
                prog, (mi.weights_bytes - xs.cache_bytes) / 1048576.0, (unsigned long long)xs.slots,
                (unsigned long long)xs.experts, xs.cache_bytes / 1048576.0,
                xs.policy ? "LRU" : "LRFU", xs.prefetch ? "on" : "off");
    else if (mi.streaming)
        fprintf(stderr,
                "%s: parameter shard prefetch: %.1f MiB resident, layers streamed from the "
                "package\n",
                prog, mi.weights_bytes / 1048576.0);
}

/* the MoE settings: the file, then --load-balance and --lambda; -1 or the
 * exit status */
static int moe_settings(struct gi_run *g, const struct opts *o)
{
    const struct glm_config *c = glm_model_config(g->m);
    struct glm_moe_options mo;
    glm_moe_defaults(&mo);
    const char *mcfg = moe_config_path(o);
    if (mcfg) {
        if (glm_moe_config_load(mcfg, &mo)) {
            log_err("moe config");
            return 1;
        }
        if (verbose || o->expert_stats)
            fprintf(stderr,
                    "%s: %s: expert_parallel %d, capacity_factor %.2f, min_expert_util %.2f\n",
                    prog, mcfg, mo.expert_parallel, (double)mo.capacity_factor,
                    (double)mo.min_expert_util);
    }
    if (o->load_balance) /* on, off or auto: opts_parse checked */
        mo.balance = !strcmp(o->load_balance, "on")    ? GLM_BALANCE_ON
                     : !strcmp(o->load_balance, "off") ? GLM_BALANCE_OFF
                                                       : GLM_BALANCE_AUTO;
    if (o->lambda_set)
        mo.lambda = o->lambda;
    if (c->n_routed_experts > 0 && c->n_routed_experts % mo.expert_parallel) {
        fprintf(stderr, "%s: expert_parallel %d does not divide %d experts; using 1\n", prog,
                mo.expert_parallel, c->n_routed_experts);
        mo.expert_parallel = 1;
    }
    if (glm_model_set_moe(g->m, &mo)) {
        log_err("moe");
        return 1;
    }
    return -1;
}

int gi_load(struct gi_run *g, const struct opts *o)
{
    double t0 = now_ms();
    if (load_model(g, o))
        return 1;
    if (o->ep_rebalance > 0) {
        if (g->n_devs <= 1 && !(g->mr.on && g->mr.n_total > 1)) {
            fprintf(stderr, "%s: --ep-rebalance needs several devices (--device A,B,...)\n", prog);
            return 1;
        }
        if (!g->mr.on || g->mr.t.rank == 0) {
            reb_model = g->m;
            reb_every = o->ep_rebalance;
        }
    }
    if (g->mr.on) {
        struct glm_mpi_call_stats zero[4];
        glm_mpi_stats(zero, 1); /* the figures count the passes, not the load */
    }
    if (g->mr.on && g->mr.t.rank > 0) {
        /* a worker: serve rank 0's MoE layers until it frees its model */
        fprintf(stderr, "%s: serving the MoE layers of rank 0\n", prog);
        int wrc = glm_ep_worker_run(g->m);
        if (wrc) {
            /* rank 0 may be waiting for this rank's rows: end the job */
            log_rc("expert parallel worker", wrc);
            glm_mpi_abort(1);
            return 1;
        }
        return 0;
    }
    if ((o->cache_k || o->cache_v) && glm_model_set_cache_types(g->m, (glm_cache_type_t)o->cache_k,
                                                                (glm_cache_type_t)o->cache_v)) {
        log_err("--cache-type-k/-v");
        return 1;
    }
    print_loaded(g, o, now_ms() - t0);
    return moe_settings(g, o);
}

void gi_close(struct gi_run *g)
{
    if (g->mr.on && !g->mpi_agreed)
        glm_mpi_devices_ok(&g->mr, 0); /* the others wait for this rank's verdict */
    if (g->n_devs > 1 || (g->mr.on && g->mr.t.rank == 0 && g->mr.n_total > 1))
        mdev_print_stats(prog, g->m);
    if (g->mr.on && g->m)
        glm_mpi_report(&g->mr, g->m);
    glm_session_free(g->s);
    if (g->m && glm_model_free(g->m)) {
        log_err("free");
        if (g->mr.on && g->mr.t.rank == 0)
            glm_mpi_abort(1); /* the workers did not get the stop */
    }
    mdev_close(g->devs, g->n_devs);
    glm_mpi_end(&g->mr);
}
