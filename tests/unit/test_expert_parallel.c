/* SPDX-License-Identifier: MIT */
/*
 * Expert parallelism (include/tx/glm.h, docs/multi-device.md): one model on
 * two tx8-emu devices against the same model on one, for synthetic GLM-5.1,
 * GLM-4.5 and Qwen3-MoE packages: logits of a prefill and of decode steps,
 * and greedy tokens, memcmp-identical with the FP32 plan; within tolerance
 * (and here identical too) with the golden plan. The same over two "ranks"
 * (threads) with an in-process loopback transport. Bad device lists and
 * placements give clear errors.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm.h>
#include <tx/tx.h>

#include "test_runtime_synth.h"
#include "tx_test_main.h"

enum { M5, M4, MQ3, MSKEW, N_MODELS };
static char g_smd[N_MODELS][256];
static struct tx_test_emu g_emu2;
static char g_spec[2][300];

static void fixture_setup(void)
{
    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    if (tx_test_emu_start(&g_emu2, "256M", "--cores", "2", NULL) != 0)
        ck_abort_msg("cannot start the second tx8-emu");
    snprintf(g_spec[0], sizeof(g_spec[0]), "%s", rts_spec);
    snprintf(g_spec[1], sizeof(g_spec[1]), "%s", g_emu2.spec);
    const char *d = rts_tmpdir();
    char ck[300];
    struct rts_mods q3 = {.experts = 16, .top_k = 4, .seed = 11};
    /* GLM-4.5 whose router always takes experts 0 and 1 (group 0 of 4) */
    struct rts_mods skew = {
        .experts = 16, .top_k = 4, .n_group = -1, .hot_n = 2, .hot_bias = 1.0f, .seed = 5};
    struct {
        enum glm_arch arch;
        const struct rts_mods *md;
    } spec[N_MODELS] = {
        {GLM_ARCH_GLM_MOE_DSA, NULL},
        {GLM_ARCH_GLM4_MOE, NULL},
        {GLM_ARCH_QWEN3_MOE, &q3},
        {GLM_ARCH_GLM4_MOE, &skew},
    };
    for (int i = 0; i < N_MODELS; i++) {
        snprintf(ck, sizeof(ck), "%s/ck%d", d, i);
        snprintf(g_smd[i], sizeof(g_smd[i]), "%s/m%d.smd", d, i);
        if (rts_write_checkpoint(ck, spec[i].arch, spec[i].md) || rts_export(ck, g_smd[i], "none"))
            ck_abort_msg("cannot make package %d", i);
    }
}

static void fixture_teardown(void)
{
    tx_test_emu_stop(&g_emu2);
    rts_device_teardown();
    rts_cleanup();
}

static tx_device_t *open_spec(const char *spec)
{
    tx_device_t *dev = NULL;
    OK(tx_device_open(spec, &dev));
    return dev;
}

static void set_plan(tx_device_t *dev, const char *plan)
{
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_parse(plan, &p));
    OK(glm_plan_set(dev, &p));
}

static glm_session_t *session(glm_model_t *m)
{
    struct glm_session_options o = {.n_ctx = 48};
    glm_session_t *s = NULL;
    OK(glm_session_create(m, &o, &s));
    return s;
}

static int argmax(const float *l, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b])
            b = i;
    return b;
}

/* Logits of a prefill of n random ids (all rows), then `steps` greedy
 * decode steps; tokens[] the greedy ids. */
static float *run(glm_model_t *m, int n, int steps, int32_t *tokens)
{
    int V = glm_model_config(m)->vocab_size;
    float *out = malloc(sizeof(float) * (size_t)(n + steps) * V);
    ck_assert_ptr_nonnull(out);
    int32_t ids[32];
    uint64_t seed = 99;
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(rts_rand(&seed) % (uint64_t)V);
    glm_session_t *s = session(m);
    OK(glm_eval(s, ids, n, GLM_EVAL_ALL_LOGITS, out));
    int32_t t = argmax(out + (size_t)(n - 1) * V, V);
    for (int i = 0; i < steps; i++) {
        tokens[i] = t;
        float *l = out + (size_t)(n + i) * V;
        OK(glm_eval(s, &t, 1, 0, l));
        t = argmax(l, V);
    }
    glm_session_free(s);
    return out;
}

static double max_rel(const float *a, const float *b, size_t n)
{
    double mx = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > mx)
            mx = d;
        if (fabs((double)b[i]) > ref)
            ref = fabs((double)b[i]);
    }
    return ref > 0 ? mx / ref : mx;
}

static void two_vs_one_on(const char *s0, const char *s1, int which, const char *plan, int exact)
{
    tx_device_t *d[2] = {open_spec(s0), open_spec(s1)};
    set_plan(d[0], plan);
    set_plan(d[1], plan);
    glm_model_t *one = NULL, *two = NULL;
    OK(glm_model_load(d[0], g_smd[which], NULL, &one));
    OK(glm_model_load_multi(d, 2, g_smd[which], NULL, &two));
    const struct glm_config *c = glm_model_config(one);
    const int n = 12, steps = 8;
    int V = c->vocab_size;
    int32_t t1[8], t2[8];
    float *a = run(one, n, steps, t1);
    float *b = run(two, n, steps, t2);
    size_t cnt = (size_t)(n + steps) * V;
    int same = !memcmp(a, b, cnt * sizeof(float));
    int same_tok = !memcmp(t1, t2, sizeof(t1));
    double e = max_rel(b, a, cnt);
    struct glm_ep_stats st;
    struct glm_ep_placement_stats ps;
    OK(glm_model_ep_stats(two, &st));
    OK(glm_model_ep_placement_stats(two, &ps));
    printf("[ep] %s %s, 2 devices (expert_parallel %d groups): "
           "logits %s (max rel %.3g), greedy tokens %s; %llu MoE layer passes, %llu rows; "
           "dispatch %.3f ms, wait %.3f ms, combine %.3f ms; device 0: %u experts, %llu pairs, "
           "%llu B in, %llu B out, %.3f ms compute; device 1: %u experts, %llu pairs, %llu B in, "
           "%llu B out, %.3f ms compute\n",
           glm_arch_name(c->arch), plan, st.expert_parallel,
           same ? "bit-identical" : "DIFFER", e, same_tok ? "identical" : "DIFFER",
           (unsigned long long)st.layers, (unsigned long long)st.tokens, st.dispatch_ms, st.wait_ms,
           st.combine_ms, st.dev[0].experts, (unsigned long long)st.dev[0].pairs,
           (unsigned long long)st.dev[0].bytes_in, (unsigned long long)st.dev[0].bytes_out,
           st.dev[0].compute_ms, st.dev[1].experts, (unsigned long long)st.dev[1].pairs,
           (unsigned long long)st.dev[1].bytes_in, (unsigned long long)st.dev[1].bytes_out,
           st.dev[1].compute_ms);
    fflush(stdout);
    ck_assert_int_eq(st.n_devices, 2);
    ck_assert_uint_gt(st.dev[1].pairs, 0);
    /* placement by memory: device 0's resident part counts, so it holds
     * fewer experts (these small packages: few or none) */
    ck_assert_uint_le(st.dev[0].experts, st.dev[1].experts);
    ck_assert_uint_gt(ps.dev[0].resident_bytes, 0);
    ck_assert_uint_eq(ps.dev[1].resident_bytes, 0);
    ck_assert_uint_eq((st.dev[0].experts + st.dev[1].experts) % (unsigned)c->n_routed_experts, 0);
    /* every pair of every MoE layer pass went to exactly one device */
    ck_assert_uint_eq(st.dev[0].pairs + st.dev[1].pairs, st.tokens * c->num_experts_per_tok);
    int E = c->n_routed_experts, n0 = 0;
    for (int e = 0; e < E; e++) {
        int o = glm_model_ep_owner(two, 0, e);
        ck_assert(o == 0 || o == 1);
        n0 += o == 0;
    }
    ck_assert_int_le(n0, E / 2);
    ck_assert_int_eq(glm_model_ep_owner(two, 0, E), -1);
    ck_assert_int_eq(glm_model_ep_owner(one, 0, 0), -1);
    if (exact) {
        ck_assert_msg(same, "2-device logits differ from 1 device (max rel %g)", e);
        ck_assert_msg(same_tok, "greedy tokens differ");
    } else {
        ck_assert_msg(e < 1e-3, "2-device logits: max relative error %g", e);
    }
    /* the one-device model's weights include the experts; the primary's not */
    struct glm_model_info i1, i2;
    OK(glm_model_info(one, &i1));
    OK(glm_model_info(two, &i2));
    ck_assert_uint_lt(i2.weights_bytes, i1.weights_bytes);
    free(a);
    free(b);
    OK(glm_model_free(one));
    OK(glm_model_free(two));
    tx_device_close(d[0]);
    tx_device_close(d[1]);
}

static void two_vs_one(int which, const char *plan, int exact)
{
    two_vs_one_on(g_spec[0], g_spec[1], which, plan, exact);
}

START_TEST(test_two_devices_fp32)
{
    two_vs_one(M5, "fp32", 1);
    two_vs_one(M4, "fp32", 1);
    two_vs_one(MQ3, "fp32", 1);
}
END_TEST

START_TEST(test_two_devices_golden)
{
    two_vs_one(M5, "golden", 0);
    two_vs_one(M4, "golden", 0);
}
END_TEST

/* Devices on the portable kernels: MOE_FFN's sum is one fma per term on
 * every kernel path (tx8_hw.h), so the host's combine matches them too. */
START_TEST(test_portable_kernels)
{
    struct tx_test_emu p[2];
    setenv("TX8_ENGINE_ISA", "portable", 1);
    int r0 = tx_test_emu_start(&p[0], "128M", "--cores", "2", NULL);
    int r1 = r0 ? -1 : tx_test_emu_start(&p[1], "128M", "--cores", "2", NULL);
    unsetenv("TX8_ENGINE_ISA");
    ck_assert_int_eq(r0, 0);
    ck_assert_int_eq(r1, 0);
    two_vs_one_on(p[0].spec, p[1].spec, M4, "fp32", 1);
    tx_test_emu_stop(&p[0]);
    tx_test_emu_stop(&p[1]);
}
END_TEST

/* Placement by the live load counters of a previous run
 * (glm_model_expert_stats): the two hottest experts of every MoE layer land
 * on different devices, and the output stays the same bits. */
START_TEST(test_placement_by_load)
{
    tx_device_t *d[2] = {open_spec(g_spec[0]), open_spec(g_spec[1])};
    set_plan(d[0], "fp32");
    set_plan(d[1], "fp32");
    glm_model_t *one = NULL, *two = NULL;
    OK(glm_model_load(d[0], g_smd[MQ3], NULL, &one));
    int32_t t1[8], t2[8];
    float *a = run(one, 12, 8, t1);
    struct glm_expert_stats *es = NULL;
    OK(glm_model_expert_stats(one, &es));
    int E = es->n_experts, nm = es->n_moe_layers;
    struct glm_ep_options o = {.expert_load = es->counts, .n_expert_load = (uint64_t)nm * E};
    OK(glm_model_load_ep(d, 2, g_smd[MQ3], NULL, &o, &two));
    for (int mi = 0; mi < nm; mi++) {
        const uint64_t *c = es->counts + (size_t)mi * E;
        int h1 = 0, h2 = -1;
        for (int e = 1; e < E; e++)
            if (c[e] > c[h1])
                h1 = e;
        for (int e = 0; e < E; e++)
            if (e != h1 && (h2 < 0 || c[e] > c[h2]))
                h2 = e;
        ck_assert_int_ne(glm_model_ep_owner(two, mi, h1), glm_model_ep_owner(two, mi, h2));
    }
    float *b = run(two, 12, 8, t2);
    int V = glm_model_config(one)->vocab_size;
    ck_assert_msg(!memcmp(a, b, sizeof(float) * 20 * (size_t)V), "placement by load: differs");
    o.n_expert_load = 3; /* wrong length */
    glm_model_t *m = NULL;
    ck_assert_int_eq(glm_model_load_ep(d, 2, g_smd[MQ3], NULL, &o, &m), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "expert_load"), "%s", tx_last_error());
    glm_expert_stats_free(es);
    free(a);
    free(b);
    OK(glm_model_free(one));
    OK(glm_model_free(two));
    tx_device_close(d[0]);
    tx_device_close(d[1]);
}
END_TEST

START_TEST(test_bad_lists)
{
    tx_device_t *a = open_spec(g_spec[0]), *a2 = open_spec(g_spec[0]), *b = open_spec(g_spec[1]);
    glm_model_t *m = (glm_model_t *)1;
    tx_device_t *dup[2] = {a, a};
    ck_assert_int_eq(glm_model_load_multi(dup, 2, g_smd[M5], NULL, &m), TX_EINVAL);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(tx_last_error(), "same device"), "%s", tx_last_error());
    tx_device_t *dup2[2] = {a, a2}; /* two handles of one emulator */
    ck_assert_int_eq(glm_model_load_multi(dup2, 2, g_smd[M5], NULL, &m), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "same device"), "%s", tx_last_error());
    tx_device_t *ab[2] = {a, b};
    /* one group of experts for two devices */
    struct glm_ep_options o = {.expert_parallel = 1};
    ck_assert_int_eq(glm_model_load_ep(ab, 2, g_smd[M5], NULL, &o, &m), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "at least one group"), "%s", tx_last_error());
    o.expert_parallel = 3; /* does not divide */
    ck_assert_int_eq(glm_model_load_ep(ab, 2, g_smd[M5], NULL, &o, &m), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "does not divide"), "%s", tx_last_error());
    tx_device_t *nul[2] = {a, NULL};
    ck_assert_int_eq(glm_model_load_multi(nul, 2, g_smd[M5], NULL, &m), TX_EINVAL);
    ck_assert_int_eq(glm_model_load_multi(ab, 0, g_smd[M5], NULL, &m), TX_EINVAL);
    ck_assert_int_eq(glm_model_load_multi(ab, 2, "/nonexistent.smd", NULL, &m) != TX_OK, 1);
    /* an unreachable device: the open names it */
    tx_device_t *x = NULL;
    ck_assert_int_ne(tx_device_open("emu:/nonexistent/tx8.sock", &x), TX_OK);
    ck_assert_ptr_null(x);
    /* a worker-only call on a one-process model */
    OK(glm_model_load_multi(ab, 2, g_smd[M5], NULL, &m));
    ck_assert_int_eq(glm_ep_worker_run(m), TX_EINVAL);
    /* expert_parallel groups: 2 groups of E/2 experts, each on one device */
    OK(glm_model_free(m));
    o.expert_parallel = 2;
    OK(glm_model_load_ep(ab, 2, g_smd[M5], NULL, &o, &m));
    int E = glm_model_config(m)->n_routed_experts;
    for (int e = 0; e < E; e++)
        ck_assert_int_eq(glm_model_ep_owner(m, 0, e),
                         glm_model_ep_owner(m, 0, e < E / 2 ? 0 : E - 1));
    OK(glm_model_free(m));
    int first = -1, cnt = -1;
    OK(glm_ep_share(5, 1, 2, &first, &cnt));
    ck_assert_int_eq(first, 2);
    ck_assert_int_eq(cnt, 3);
    ck_assert_int_eq(glm_ep_share(1, 0, 2, &first, &cnt), TX_EINVAL);
    tx_device_close(a);
    tx_device_close(a2);
    tx_device_close(b);
}
END_TEST

/* ---- two ranks in one process: a loopback transport ------------------------- */

struct loop {
    pthread_barrier_t bar;
    const void *sbuf[2];
    const size_t *sc[2], *sd[2];
    void *bbuf[2];
};
struct loop_rank {
    struct loop *l;
    int rank;
};

static int loop_a2a(void *ctx, const void *sbuf, const size_t *sc, const size_t *sd, void *rbuf,
                    const size_t *rc, const size_t *rd)
{
    struct loop_rank *r = ctx;
    struct loop *l = r->l;
    l->sbuf[r->rank] = sbuf;
    l->sc[r->rank] = sc;
    l->sd[r->rank] = sd;
    pthread_barrier_wait(&l->bar);
    for (int src = 0; src < 2; src++) {
        if (l->sc[src][r->rank] != rc[src])
            return -1;
        if (rc[src])
            memcpy((uint8_t *)rbuf + rd[src], (const uint8_t *)l->sbuf[src] + l->sd[src][r->rank],
                   rc[src]);
    }
    pthread_barrier_wait(&l->bar);
    return 0;
}

static int loop_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    struct loop_rank *r = ctx;
    struct loop *l = r->l;
    l->bbuf[r->rank] = buf;
    pthread_barrier_wait(&l->bar);
    if (r->rank != root)
        memcpy(buf, l->bbuf[root], bytes);
    pthread_barrier_wait(&l->bar);
    return 0;
}

struct worker_arg {
    struct loop_rank lr;
    tx_device_t *dev;
    const char *smd;
    int groups;
    int rc_load, rc_run;
};

static void *worker(void *p)
{
    struct worker_arg *w = p;
    struct glm_ep_transport tr = {
        .rank = 1, .size = 2, .ctx = &w->lr, .alltoallv = loop_a2a, .bcast = loop_bcast};
    struct glm_ep_options o = {
        .transport = &tr, .n_devices_total = 2, .expert_parallel = w->groups};
    glm_model_t *m = NULL;
    w->rc_load = glm_model_load_ep(&w->dev, 1, w->smd, NULL, &o, &m);
    if (w->rc_load)
        return NULL;
    w->rc_run = glm_ep_worker_run(m);
    glm_model_free(m);
    return NULL;
}

START_TEST(test_loopback_ranks)
{
    tx_device_t *a = open_spec(g_spec[0]), *b = open_spec(g_spec[1]);
    set_plan(a, "fp32");
    set_plan(b, "fp32");
    struct loop l;
    memset(&l, 0, sizeof(l));
    pthread_barrier_init(&l.bar, NULL, 2);
    struct worker_arg w = {.lr = {&l, 1}, .dev = b, .smd = g_smd[M5]};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, worker, &w), 0);
    struct loop_rank lr0 = {&l, 0};
    struct glm_ep_transport tr = {
        .rank = 0, .size = 2, .ctx = &lr0, .alltoallv = loop_a2a, .bcast = loop_bcast};
    struct glm_ep_options o = {.transport = &tr, .n_devices_total = 2};
    glm_model_t *two = NULL, *one = NULL;
    OK(glm_model_load_ep(&a, 1, g_smd[M5], NULL, &o, &two));
    int32_t t1[8], t2[8];
    float *y = run(two, 12, 8, t2);
    struct glm_ep_stats st;
    struct glm_ep_placement_stats ps;
    OK(glm_model_ep_stats(two, &st));
    OK(glm_model_ep_placement_stats(two, &ps));
    OK(glm_model_free(two)); /* stops the worker */
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc_load, TX_OK);
    ck_assert_int_eq(w.rc_run, TX_OK);
    OK(glm_model_load(a, g_smd[M5], NULL, &one));
    float *x = run(one, 12, 8, t1);
    int V = glm_model_config(one)->vocab_size;
    int same = !memcmp(x, y, sizeof(float) * 20 * (size_t)V) && !memcmp(t1, t2, sizeof(t1));
    printf("[ep] loopback transport, 2 ranks x 1 device: %s; device 1 (remote) %llu pairs, %llu B "
           "sent to it, %llu B back\n",
           same ? "bit-identical to 1 device" : "DIFFER", (unsigned long long)st.dev[1].pairs,
           (unsigned long long)st.dev[1].bytes_in, (unsigned long long)st.dev[1].bytes_out);
    ck_assert_int_eq(st.n_ranks, 2);
    ck_assert_int_eq(st.dev[1].local, 0);
    ck_assert_uint_gt(st.dev[1].bytes_in, 0);
    ck_assert_uint_gt(ps.dev[1].room_bytes, 0); /* sent by rank 1 at load */
    ck_assert_uint_gt(ps.dev[1].mem_size, 0);
    ck_assert_msg(same, "loopback 2-rank run differs from 1 device");
    free(x);
    free(y);
    OK(glm_model_free(one));
    pthread_barrier_destroy(&l.bar);
    tx_device_close(a);
    tx_device_close(b);
}
END_TEST

/* ---- rebalancing by the live load counters -------------------------------- */

/* A prefill of n random ids, `steps` greedy decode steps; after step `at`
 * (a multi-device model) glm_model_ep_rebalance. Logits of every row. */
static float *run_rebalance(glm_model_t *m, int n, int steps, int at, int32_t *tokens)
{
    int V = glm_model_config(m)->vocab_size;
    float *out = malloc(sizeof(float) * (size_t)(n + steps) * V);
    ck_assert_ptr_nonnull(out);
    int32_t ids[32];
    uint64_t seed = 77;
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(rts_rand(&seed) % (uint64_t)V);
    glm_session_t *s = session(m);
    OK(glm_eval(s, ids, n, GLM_EVAL_ALL_LOGITS, out));
    int32_t t = argmax(out + (size_t)(n - 1) * V, V);
    for (int i = 0; i < steps; i++) {
        if (i == at && at >= 0)
            OK(glm_model_ep_rebalance(m, 0));
        tokens[i] = t;
        float *l = out + (size_t)(n + i) * V;
        OK(glm_eval(s, &t, 1, 0, l));
        t = argmax(l, V);
    }
    glm_session_free(s);
    return out;
}

static void print_rebalance(const char *what, const struct glm_ep_stats *st,
                            const struct glm_ep_placement_stats *ps, int same)
{
    printf("[ep] rebalance, %s: %s; %u rebalance(s), %llu experts moved (%llu B, %llu B over the "
           "transport); imbalance (max/mean selections per device) %.3f -> %.3f, now %.3f; "
           "experts per device %u / %u, selections %llu / %llu\n",
           what, same ? "bit-identical to 1 device" : "DIFFER", ps->rebalances,
           (unsigned long long)ps->experts_moved, (unsigned long long)ps->bytes_moved,
           (unsigned long long)ps->bytes_moved_remote, ps->imbalance_before, ps->imbalance_after,
           ps->imbalance, st->dev[0].experts, st->dev[1].experts,
           (unsigned long long)ps->dev[0].selections, (unsigned long long)ps->dev[1].selections);
    fflush(stdout);
}

/* Skewed routing (experts 0..3 hot) in 4 groups of 4 on 2 devices: the
 * placement by memory puts groups 0 and 2 on device 0; the rebalance by the
 * live counters moves experts, lowers the imbalance, and the logits stay the
 * bits of one device before, across and after it. */
START_TEST(test_rebalance_skewed)
{
    tx_device_t *d[2] = {open_spec(g_spec[0]), open_spec(g_spec[1])};
    set_plan(d[0], "fp32");
    set_plan(d[1], "fp32");
    glm_model_t *one = NULL, *two = NULL;
    OK(glm_model_load(d[0], g_smd[MSKEW], NULL, &one));
    struct glm_ep_options o = {.expert_parallel = 4};
    OK(glm_model_load_ep(d, 2, g_smd[MSKEW], NULL, &o, &two));
    /* no counters yet: nothing to do */
    OK(glm_model_ep_rebalance(two, 0));
    struct glm_ep_stats st;
    struct glm_ep_placement_stats ps;
    OK(glm_model_ep_stats(two, &st));
    OK(glm_model_ep_placement_stats(two, &ps));
    ck_assert_uint_eq(ps.rebalances, 0);
    ck_assert_int_eq(glm_model_ep_rebalance(two, 1), TX_EINVAL);
    ck_assert_int_eq(glm_model_ep_rebalance(one, 0), TX_EINVAL);
    ck_assert_int_eq(glm_model_ep_rebalance(NULL, 0), TX_EINVAL);
    int32_t t1[8], t2[8];
    float *a = run_rebalance(one, 12, 8, -1, t1);
    float *b = run_rebalance(two, 12, 8, 3, t2);
    int V = glm_model_config(one)->vocab_size;
    int same = !memcmp(a, b, sizeof(float) * 20 * (size_t)V) && !memcmp(t1, t2, sizeof(t1));
    OK(glm_model_ep_stats(two, &st));
    OK(glm_model_ep_placement_stats(two, &ps));
    print_rebalance("2 devices, 1 process", &st, &ps, same);
    ck_assert_msg(same, "logits across the rebalance differ from 1 device");
    ck_assert_uint_eq(ps.rebalances, 1);
    ck_assert_uint_gt(ps.experts_moved, 0);
    ck_assert_uint_gt(ps.bytes_moved, 0);
    ck_assert_uint_eq(ps.bytes_moved_remote, 0);
    ck_assert_msg(ps.imbalance_after < ps.imbalance_before, "imbalance %.3f -> %.3f",
                  ps.imbalance_before, ps.imbalance_after);
    OK(glm_model_ep_rebalance(two, 0)); /* again, with the counters of the later steps */
    OK(glm_model_ep_stats(two, &st));
    OK(glm_model_ep_placement_stats(two, &ps));
    ck_assert_uint_eq(ps.rebalances, 2);
    /* and a whole run after it is still the same bits */
    float *c = run_rebalance(two, 12, 8, -1, t2);
    ck_assert_msg(!memcmp(a, c, sizeof(float) * 20 * (size_t)V), "after the rebalance: differs");
    free(a);
    free(b);
    free(c);
    OK(glm_model_free(one));
    OK(glm_model_free(two));
    tx_device_close(d[0]);
    tx_device_close(d[1]);
}
END_TEST

/* The same over two ranks (loopback transport): the experts that change
 * rank travel over the transport. */
START_TEST(test_rebalance_ranks)
{
    tx_device_t *a = open_spec(g_spec[0]), *b = open_spec(g_spec[1]);
    set_plan(a, "fp32");
    set_plan(b, "fp32");
    struct loop l;
    memset(&l, 0, sizeof(l));
    pthread_barrier_init(&l.bar, NULL, 2);
    struct worker_arg w = {.lr = {&l, 1}, .dev = b, .smd = g_smd[MSKEW], .groups = 4};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, worker, &w), 0);
    struct loop_rank lr0 = {&l, 0};
    struct glm_ep_transport tr = {
        .rank = 0, .size = 2, .ctx = &lr0, .alltoallv = loop_a2a, .bcast = loop_bcast};
    struct glm_ep_options o = {.transport = &tr, .n_devices_total = 2, .expert_parallel = 4};
    glm_model_t *two = NULL, *one = NULL;
    OK(glm_model_load_ep(&a, 1, g_smd[MSKEW], NULL, &o, &two));
    int32_t t1[8], t2[8];
    float *y = run_rebalance(two, 12, 8, 3, t2);
    struct glm_ep_stats st;
    struct glm_ep_placement_stats ps;
    OK(glm_model_ep_stats(two, &st));
    OK(glm_model_ep_placement_stats(two, &ps));
    float *y2 = run_rebalance(two, 12, 8, 2, t2); /* a second one, then a whole run */
    OK(glm_model_free(two)); /* stops the worker */
    pthread_join(th, NULL);
    ck_assert_int_eq(w.rc_load, TX_OK);
    ck_assert_int_eq(w.rc_run, TX_OK);
    OK(glm_model_load(a, g_smd[MSKEW], NULL, &one));
    float *x = run_rebalance(one, 12, 8, -1, t1);
    int V = glm_model_config(one)->vocab_size;
    int same = !memcmp(x, y, sizeof(float) * 20 * (size_t)V) &&
               !memcmp(x, y2, sizeof(float) * 20 * (size_t)V) && !memcmp(t1, t2, sizeof(t1));
    print_rebalance("loopback transport, 2 ranks x 1 device", &st, &ps, same);
    ck_assert_msg(same, "2-rank run across rebalances differs from 1 device");
    ck_assert_uint_eq(ps.rebalances, 1);
    ck_assert_uint_gt(ps.experts_moved, 0);
    ck_assert_uint_gt(ps.bytes_moved_remote, 0);
    ck_assert_msg(ps.imbalance_after < ps.imbalance_before, "imbalance %.3f -> %.3f",
                  ps.imbalance_before, ps.imbalance_after);
    free(x);
    free(y);
    free(y2);
    OK(glm_model_free(one));
    pthread_barrier_destroy(&l.bar);
    tx_device_close(a);
    tx_device_close(b);
}
END_TEST

/* ---- memory-aware placement ---------------------------------------------- */

static uint64_t used_of(tx_device_t *d)
{
    struct tx_device_info i;
    OK(tx_device_info(d, &i));
    return i.mem_used;
}

/* A 256 MiB and a 64 MiB device: the small one gets fewer experts, and the
 * output is the same bits; then a device 0 reserve that leaves no room for
 * the experts anywhere: a clear error, nothing left allocated. */
START_TEST(test_memory_aware)
{
    struct tx_test_emu small;
    ck_assert_int_eq(tx_test_emu_start(&small, "64M", "--cores", "2", NULL), 0);
    tx_device_t *d[2] = {open_spec(g_spec[0]), open_spec(small.spec)};
    set_plan(d[0], "fp32");
    set_plan(d[1], "fp32");
    glm_model_t *one = NULL, *two = NULL;
    OK(glm_model_load(d[0], g_smd[M5], NULL, &one));
    int32_t t1[8], t2[8];
    float *a = run(one, 12, 8, t1);
    OK(glm_model_free(one));
    OK(glm_model_load_multi(d, 2, g_smd[M5], NULL, &two));
    struct glm_ep_stats st;
    struct glm_ep_placement_stats ps;
    OK(glm_model_ep_stats(two, &st));
    OK(glm_model_ep_placement_stats(two, &ps));
    float *b = run(two, 12, 8, t2);
    int V = glm_model_config(two)->vocab_size;
    int same = !memcmp(a, b, sizeof(float) * 20 * (size_t)V);
    printf("[ep] memory-aware: device 0 %.0f MiB (%.1f MiB resident, room %.1f MiB): %u experts; "
           "device 1 %.0f MiB (room %.1f MiB): %u experts; %s\n",
           ps.dev[0].mem_size / 1048576.0, ps.dev[0].resident_bytes / 1048576.0,
           ps.dev[0].room_bytes / 1048576.0, st.dev[0].experts, ps.dev[1].mem_size / 1048576.0,
           ps.dev[1].room_bytes / 1048576.0, st.dev[1].experts,
           same ? "bit-identical to 1 device" : "DIFFER");
    fflush(stdout);
    ck_assert_uint_gt(ps.dev[0].mem_size, ps.dev[1].mem_size);
    ck_assert_uint_lt(st.dev[1].experts, st.dev[0].experts);
    ck_assert_uint_gt(st.dev[1].experts, 0);
    ck_assert_msg(same, "memory-aware placement: differs from 1 device");
    OK(glm_model_free(two));
    free(a);
    free(b);
    /* no room: device 0 keeps all its free memory (reserve), device 1 is
     * nearly full (another buffer takes all but 1 MiB of it) */
    struct tx_test_emu tiny;
    ck_assert_int_eq(tx_test_emu_start(&tiny, "16M", "--cores", "1", NULL), 0);
    tx_device_t *r[2] = {d[0], open_spec(tiny.spec)};
    set_plan(r[1], "fp32");
    struct tx_device_info ti;
    OK(tx_device_info(r[1], &ti));
    tx_bo_t *hog = NULL;
    OK(tx_bo_alloc(r[1], ti.heap_size - ti.mem_used - (1u << 20), 0, "hog", &hog));
    uint64_t u0 = used_of(r[0]), u1 = used_of(r[1]);
    struct glm_ep_options o = {.reserve_bytes = 1ull << 40};
    glm_model_t *m = (glm_model_t *)1;
    ck_assert_int_eq(glm_model_load_ep(r, 2, g_smd[M5], NULL, &o, &m), TX_ENOSPC);
    ck_assert_ptr_null(m);
    printf("[ep] cannot fit: %s\n", tx_last_error());
    fflush(stdout);
    ck_assert_msg(strstr(tx_last_error(), "short by") && strstr(tx_last_error(), "device 1"),
                  "%s", tx_last_error());
    ck_assert_uint_eq(used_of(r[0]), u0);
    ck_assert_uint_eq(used_of(r[1]), u1);
    tx_bo_free(hog);
    tx_device_close(r[1]);
    tx_test_emu_stop(&tiny);
    tx_device_close(d[0]);
    tx_device_close(d[1]);
    tx_test_emu_stop(&small);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("expert_parallel");
    TCase *tc = tcase_create("ep");
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_two_devices_fp32);
    tcase_add_test(tc, test_two_devices_golden);
    tcase_add_test(tc, test_portable_kernels);
    tcase_add_test(tc, test_placement_by_load);
    tcase_add_test(tc, test_bad_lists);
    tcase_add_test(tc, test_loopback_ranks);
    tcase_add_test(tc, test_rebalance_skewed);
    tcase_add_test(tc, test_rebalance_ranks);
    tcase_add_test(tc, test_memory_aware);
    suite_add_tcase(s, tc);
    return tx_test_run(s);
}
