/* SPDX-License-Identifier: MIT */
/*
 * glm-inference --bench-cache: decode with the routed experts in an expert
 * cache, side by side in one run with the fully resident model and with
 * whole-layer streaming (--stream), under the same plan and inputs:
 *
 *   resident         everything in device memory
 *   layers           GLM_LOAD_STREAM: whole decoder layers through 2 slots
 *   cache LRU        expert cache of frac x the routed experts, plain LRU,
 *                    no prefetch
 *   cache LRFU+pf    the same cache, frequency + recency replacement and
 *                    the transition-graph prefetch (the defaults)
 *
 * Each mode loads the package, runs a prompt of `prompt` random ids (or the
 * first tokens of -f FILE's text: routing on real text), then `warmup`
 * decode steps (caches and statistics settle), then `tg` timed decode
 * steps of the next ids with greedy on-device sampling. The counters
 * are the deltas over the timed steps (glm_model_expert_cache_stats).
 */
#include "bench_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct row {
    const char *name;
    double tgs;
    struct glm_expert_cache_stats d; /* deltas over the timed steps */
    int cache;
    uint64_t resident_bytes;
};

static double ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void diff(struct glm_expert_cache_stats *d, const struct glm_expert_cache_stats *a,
                 const struct glm_expert_cache_stats *b)
{
    *d = *b;
    d->hits = b->hits - a->hits;
    d->misses = b->misses - a->misses;
    d->prefetches = b->prefetches - a->prefetches;
    d->prefetch_useful = b->prefetch_useful - a->prefetch_useful;
    d->evictions = b->evictions - a->evictions;
    d->bytes_read = b->bytes_read - a->bytes_read;
    d->decode_tokens = b->decode_tokens - a->decode_tokens;
    d->decode_misses = b->decode_misses - a->decode_misses;
    d->decode_bytes_read = b->decode_bytes_read - a->decode_bytes_read;
    d->decode_bytes_needed = b->decode_bytes_needed - a->decode_bytes_needed;
}

static int run_mode(tx_device_t *dev, const struct bench_cache_opts *o, unsigned flags,
                    uint64_t cache_bytes, struct row *r)
{
    struct glm_load_options lo = {.flags = flags, .expert_cache_bytes = cache_bytes};
    glm_model_t *m = NULL;
    if (glm_model_load(dev, o->path, &lo, &m)) {
        fprintf(stderr, "glm-inference: bench-cache: %s: load: %s\n", r->name, tx_last_error());
        return 1;
    }
    const struct glm_config *c = glm_model_config(m);
    int n_ctx = o->prompt + o->warmup + o->tg + 8;
    struct glm_session_options so = {.n_ctx = n_ctx, .n_batch = o->prompt > 0 ? o->prompt : 1};
    glm_session_t *s = NULL;
    int rc = 1;
    int n = o->prompt > o->warmup + o->tg ? o->prompt : o->warmup + o->tg;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (!ids || glm_session_create(m, &so, &s)) {
        fprintf(stderr, "glm-inference: bench-cache: session: %s\n", tx_last_error());
        goto out;
    }
    int32_t *dec = ids; /* the decode steps' ids (random: the prompt's ids again) */
    if (o->text) {      /* the text's tokens: trained routers on real text */
        int32_t *tids = NULL;
        size_t tn = 0, need = (size_t)(o->prompt + o->warmup + o->tg);
        if (glm_tokenize(m, o->text, &tids, &tn) || tn < need) {
            fprintf(stderr,
                    "glm-inference: bench-cache: -f: the text has %zu tokens; %zu are needed "
                    "(--bench-pp + 32 + --bench-tg)\n",
                    tn, need);
            free(tids);
            goto out;
        }
        free(ids);
        ids = tids;            /* the prompt: the text's first ids */
        dec = ids + o->prompt; /* the decode steps: the ids after it */
    } else {
        uint64_t seed = 4242;
        for (int i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int32_t)((seed >> 33) % (uint64_t)c->vocab_size);
        }
    }
    struct glm_sampling greedy = {.temperature = 0.0f, .top_p = 1.0f};
    int32_t next;
    if (o->prompt > 0 && glm_eval(s, ids, o->prompt, 0, NULL))
        goto fail;
    for (int i = 0; i < o->warmup; i++)
        if (glm_decode_batch(&s, &dec[i], 1, NULL, &greedy, &next))
            goto fail;
    struct glm_expert_cache_stats a, b;
    glm_model_expert_cache_stats(m, &a);
    double t0 = ms();
    for (int i = 0; i < o->tg; i++)
        if (glm_decode_batch(&s, &dec[o->warmup + i], 1, NULL, &greedy, &next))
            goto fail;
    double t = ms() - t0;
    glm_model_expert_cache_stats(m, &b);
    diff(&r->d, &a, &b);
    r->tgs = o->tg * 1e3 / t;
    r->cache = b.slots > 0;
    struct glm_model_info mi;
    glm_model_info(m, &mi);
    r->resident_bytes = mi.weights_bytes;
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "glm-inference: bench-cache: %s: decode: %s\n", r->name, tx_last_error());
out:
    free(ids);
    if (s)
        glm_session_free(s);
    glm_model_free(m);
    return rc;
}

int bench_cache_run(tx_device_t *dev, const struct bench_cache_opts *o)
{
    /* the cache's slot size and expert count, from a default expert cache */
    struct glm_load_options lo = {.flags = GLM_LOAD_EXPERT_CACHE};
    glm_model_t *m = NULL;
    if (glm_model_load(dev, o->path, &lo, &m)) {
        fprintf(stderr, "glm-inference: bench-cache: %s\n", tx_last_error());
        return 1;
    }
    struct glm_expert_cache_stats cs;
    glm_model_expert_cache_stats(m, &cs);
    struct glm_model_info mi;
    glm_model_info(m, &mi);
    const struct glm_config *c = glm_model_config(m);
    uint64_t xbytes = 0;
    {
        /* share of the routed experts in the package: expert bytes are the
         * package less what stays resident */
        uint64_t res = mi.weights_bytes - cs.cache_bytes;
        xbytes = mi.package_bytes > res ? mi.package_bytes - res : 0;
    }
    uint64_t slots = (uint64_t)(o->frac * (double)cs.experts + 0.5);
    if (slots < (uint64_t)c->num_experts_per_tok)
        slots = (uint64_t)c->num_experts_per_tok;
    uint64_t cbytes = slots * cs.slot_bytes;
    fprintf(stderr,
            "glm-inference: bench-cache: %s: routed experts %.1f%% of %.1f MiB; cache %llu of "
            "%llu experts (%.0f%%, %.1f MiB); prompt %d, warm-up %d, timed %d decode steps\n",
            glm_model_name(m), mi.package_bytes ? 100.0 * (double)xbytes / mi.package_bytes : 0,
            mi.package_bytes / 1048576.0, (unsigned long long)slots, (unsigned long long)cs.experts,
            100.0 * (double)slots / (double)cs.experts, cbytes / 1048576.0, o->prompt, o->warmup,
            o->tg);
    glm_model_free(m);

    struct row rows[4] = {{.name = "resident"},
                          {.name = "layers (--stream)"},
                          {.name = "cache LRU, no prefetch"},
                          {.name = "cache LRFU + prefetch"}};
    unsigned fl[4] = {0, GLM_LOAD_STREAM,
                      GLM_LOAD_EXPERT_CACHE | GLM_LOAD_EXPERT_LRU | GLM_LOAD_EXPERT_NO_PREFETCH,
                      GLM_LOAD_EXPERT_CACHE};
    static const char *const key[4] = {"resident", "layers", "lru", "lrfu"};
    int on[4];
    for (int i = 0; i < 4; i++) {
        on[i] = !o->modes || strstr(o->modes, key[i]) != NULL;
        if (on[i] && run_mode(dev, o, fl[i], i >= 2 ? cbytes : 0, &rows[i]))
            return 1;
    }

    printf("| mode | device weights | tg t/s | vs resident | misses/token | prefetches/token "
           "| useful | read/token | needed/token | read/needed |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < 4; i++) {
        struct row *r = &rows[i];
        if (!on[i])
            continue;
        double tk = r->d.decode_tokens ? (double)r->d.decode_tokens : 1;
        printf("| %s | %.1f MiB | %.2f |", r->name, r->resident_bytes / 1048576.0, r->tgs);
        if (on[0])
            printf(" %.2f |", r->tgs / rows[0].tgs);
        else
            printf(" - |");
        if (r->cache)
            printf(" %.2f | %.2f | %.0f%% | %.2f MiB | %.2f MiB | %.2f |\n",
                   (double)r->d.decode_misses / tk, (double)r->d.prefetches / tk,
                   r->d.prefetches ? 100.0 * (double)r->d.prefetch_useful / r->d.prefetches : 0,
                   (double)r->d.decode_bytes_read / tk / 1048576.0,
                   (double)r->d.decode_bytes_needed / tk / 1048576.0,
                   r->d.decode_bytes_needed
                       ? (double)r->d.decode_bytes_read / (double)r->d.decode_bytes_needed
                       : 0);
        else
            printf(" - | - | - | - | - | - |\n");
    }
    /* the ratios of the modes that ran ("-" otherwise) */
    char r1[16] = "-", r2[16] = "-", r3[16] = "-", r4[16] = "-";
    if (on[0] && on[3])
        snprintf(r1, sizeof(r1), "%.2f", rows[3].tgs / rows[0].tgs);
    if (on[2] && on[3] && rows[2].d.decode_misses)
        snprintf(r2, sizeof(r2), "%.2f",
                 (double)rows[3].d.decode_misses / (double)rows[2].d.decode_misses);
    if (on[3] && rows[3].d.decode_bytes_needed)
        snprintf(r3, sizeof(r3), "%.2f",
                 (double)rows[3].d.decode_bytes_read / (double)rows[3].d.decode_bytes_needed);
    if (on[1] && on[3])
        snprintf(r4, sizeof(r4), "%.2f", rows[3].tgs / rows[1].tgs);
    printf("\ntargets: decode t/s cache/resident %s (>= 0.5); misses/token LRFU+prefetch / "
           "LRU %s (<= 0.6); bytes read / needed %s (<= 1.5); cache vs layer streaming "
           "t/s %s (>= 1)\n",
           r1, r2, r3, r4);
    return 0;
}
