/* SPDX-License-Identifier: MIT */
/*
 * The GLM runtime (include/tx/glm.h) on a TX8: the device graph against the
 * FP32 host reference for both architectures, KV cache, batched decode,
 * sampling, stop tokens, expert load balancing, the expert parallel YAML,
 * device memory labels, malformed packages.
 *
 * Backend: $TX_DEVICE if set, else a tx8-emu started for this program.
 * Models: tiny synthetic GLM-4.5 / GLM-5.1 checkpoints (glm-synth's tiny
 * preset values, vocabulary 512) exported with tx_export, made once in the
 * runner.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm.h>
#include <tx/tx.h>

#include "test_runtime_synth.h"
#include "tx_test_main.h"

enum { M5_F32, M4_F32, M5_SHARED, M4_SKEW, M4_INT8, MQ3_F32, MQ3_SKEW, MD3_F32, MD3_AF, N_MODELS };
static char g_smd[N_MODELS][256];

static void fixture_setup(void)
{
    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    const char *d = rts_tmpdir();
    char ck[300];
    struct rts_mods shared = {.dsa_shared = 1, .attn_bias = 1, .seed = 7};
    struct rts_mods skew = {.hot_n = 2, .hot_bias = 0.1f, .n_group = -1};
    /* Qwen3-MoE with 16 experts, top 4, 4 layers (decoder_sparse_step 1,
     * layer 1 dense from mlp_only_layers) */
    struct rts_mods q3 = {.experts = 16, .top_k = 4, .seed = 11};
    /* DeepSeek-V3 with YaRN attention_factor != 1 (mscale 1.5, mscale_all_dim 1) */
    struct rts_mods yarn_af = {.yarn_mscale = 1.5, .seed = 11};
    struct {
        enum glm_arch arch;
        const struct rts_mods *md;
        const char *quant;
    } spec[N_MODELS] = {
        {GLM_ARCH_GLM_MOE_DSA, NULL, "none"},     {GLM_ARCH_GLM4_MOE, NULL, "none"},
        {GLM_ARCH_GLM_MOE_DSA, &shared, "none"},  {GLM_ARCH_GLM4_MOE, &skew, "none"},
        {GLM_ARCH_GLM4_MOE, NULL, "int8"},        {GLM_ARCH_QWEN3_MOE, NULL, "none"},
        {GLM_ARCH_QWEN3_MOE, &q3, "none"},        {GLM_ARCH_DEEPSEEK_V3, NULL, "none"},
        {GLM_ARCH_DEEPSEEK_V3, &yarn_af, "none"},
    };
    for (int i = 0; i < N_MODELS; i++) {
        /* the INT8 package is the FP32 GLM-4.5 checkpoint exported --quant int8 */
        snprintf(ck, sizeof(ck), "%s/ck%d", d, i == M4_INT8 ? M4_F32 : i);
        snprintf(g_smd[i], sizeof(g_smd[i]), "%s/m%d.smd", d, i);
        if (i != M4_INT8 && rts_write_checkpoint(ck, spec[i].arch, spec[i].md))
            ck_abort_msg("cannot write checkpoint %d", i);
        if (rts_export(ck, g_smd[i], spec[i].quant))
            ck_abort_msg("cannot export checkpoint %d", i);
    }
}

static void fixture_teardown(void)
{
    rts_device_teardown();
    rts_cleanup();
}

static tx_device_t *open_dev(void)
{
    tx_device_t *dev = NULL;
    OK(tx_device_open(rts_spec, &dev));
    return dev;
}

static glm_model_t *load_flags(tx_device_t *dev, int which, const char *plan, unsigned flags)
{
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_parse(plan, &p));
    OK(glm_plan_set(dev, &p));
    glm_model_t *m = NULL;
    struct glm_load_options o = {.flags = flags};
    OK(glm_model_load(dev, g_smd[which], &o, &m));
    return m;
}

static glm_model_t *load(tx_device_t *dev, int which, const char *plan)
{
    return load_flags(dev, which, plan, 0);
}

static glm_session_t *session(glm_model_t *m, int n_ctx, int n_batch)
{
    struct glm_session_options o = {.n_ctx = n_ctx, .n_batch = n_batch};
    glm_session_t *s = NULL;
    OK(glm_session_create(m, &o, &s));
    return s;
}

static void random_ids(int32_t *ids, int n, int vocab, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(rts_rand(&seed) % (uint64_t)vocab);
}

/* ---- device FP32 vs the reference ---------------------------------------- */

static void fp32_vs_reference(int which, const char *name, int n_batch)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, which, "fp32");
    const struct glm_config *c = glm_model_config(m);
    const int n = 24; /* longer than index_topk (8): the DSA indexer selects */
    int V = c->vocab_size;
    int32_t ids[24];
    random_ids(ids, n, V, 1234 + (uint64_t)which);
    float *dev_l = malloc(sizeof(float) * (size_t)n * V);
    float *ref_l = malloc(sizeof(float) * (size_t)n * V);
    ck_assert(dev_l && ref_l);
    glm_session_t *s = session(m, 64, n_batch);
    OK(glm_eval(s, ids, n, GLM_EVAL_ALL_LOGITS, dev_l));
    ck_assert_int_eq(glm_session_pos(s), n);

    struct tx_smd *smd;
    struct glm_ref_model *ref;
    struct glm_config rc;
    ck_assert_int_eq(rts_ref_open(g_smd[which], &smd, &ref, &rc), 0);
    ck_assert_int_eq(rts_ref_logits(ref, ids, n, ref_l), 0);
    double e = rts_rel_err(dev_l, ref_l, (size_t)n * V);
    printf("[runtime] %s FP32 plan vs FP32 reference: %d tokens (index_topk %d), n_batch %d, "
           "max relative error %.3e\n",
           name, n, c->index_topk, n_batch, e);
    ck_assert_msg(e <= 1e-4, "%s: max relative error %g > 1e-4", name, e);
    glm_ref_model_destroy(ref);
    tx_smd_close(smd);
    glm_session_free(s);
    OK(glm_model_free(m));
    free(dev_l);
    free(ref_l);
    tx_device_close(dev);
}

START_TEST(test_fp32_glm5)
{
    fp32_vs_reference(M5_F32, "GLM-5.1 (glm_moe_dsa)", 512);
}
END_TEST

START_TEST(test_fp32_glm4)
{
    fp32_vs_reference(M4_F32, "GLM-4.5 (glm4_moe)", 512);
}
END_TEST

START_TEST(test_fp32_qwen3_moe)
{
    /* softmax router (MOE_ROUTE TX8_ROUTE_F_SOFTMAX) with norm_topk_prob,
     * per-head q/k RMSNorm, full NeoX RoPE, a dense layer */
    fp32_vs_reference(MQ3_F32, "Qwen3-MoE (qwen3_moe)", 512);
    fp32_vs_reference(MQ3_SKEW, "Qwen3-MoE 16 experts top-4", 512);
    /* prefill in passes of 5 */
    fp32_vs_reference(MQ3_F32, "Qwen3-MoE chunked", 5);
}
END_TEST

START_TEST(test_fp32_glm5_shared_bias_chunked)
{
    /* shared indexer layer, attention biases, prefill in passes of 5 */
    fp32_vs_reference(M5_SHARED, "GLM-5.1 shared-indexer+bias", 5);
}
END_TEST

/* DeepSeek-V3: MLA without the indexer, YaRN RoPE (factor 40, the softmax
 * scale times mscale^2), group-limited routing (n_group 4, topk_group 2) */
START_TEST(test_fp32_dsv3)
{
    fp32_vs_reference(MD3_F32, "DeepSeek-V3 (deepseek_v3)", 512);
}
END_TEST

/* the same with attention_factor != 1 (the device ROPE's multiplier), in
 * passes of 7 */
START_TEST(test_fp32_dsv3_attn_factor_chunked)
{
    fp32_vs_reference(MD3_AF, "DeepSeek-V3 YaRN attention_factor 1.13", 7);
}
END_TEST

/* ---- KV cache: decoding one token at a time == prefill ---------------------- */

static void decode_equals_prefill(int which)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, which, "fp32");
    int V = glm_model_config(m)->vocab_size;
    const int n = 20, k = 5;
    int32_t ids[20];
    random_ids(ids, n, V, 99);
    float *a = malloc(sizeof(float) * (size_t)n * V), *b = malloc(sizeof(float) * (size_t)V);
    ck_assert(a && b);
    glm_session_t *s = session(m, 32, 0);
    OK(glm_eval(s, ids, n, GLM_EVAL_ALL_LOGITS, a));
    OK(glm_session_reset(s));
    OK(glm_eval(s, ids, k, 0, b));
    double worst = rts_rel_err(b, a + (size_t)(k - 1) * V, (size_t)V);
    for (int i = k; i < n; i++) {
        OK(glm_eval(s, &ids[i], 1, 0, b));
        double e = rts_rel_err(b, a + (size_t)i * V, (size_t)V);
        if (e > worst)
            worst = e;
    }
    printf("[runtime] %s: decode after a %d-token prefill vs one %d-token prefill: max relative "
           "error %.3e\n",
           glm_arch_name(glm_model_config(m)->arch), k, n, worst);
    ck_assert_msg(worst <= 1e-5, "decode differs from prefill: %g", worst);
    glm_session_free(s);
    OK(glm_model_free(m));
    free(a);
    free(b);
    tx_device_close(dev);
}

START_TEST(test_decode_equals_prefill_glm5)
{
    decode_equals_prefill(M5_F32);
}
END_TEST

START_TEST(test_decode_equals_prefill_glm4)
{
    decode_equals_prefill(M4_F32);
}
END_TEST

START_TEST(test_decode_equals_prefill_dsv3)
{
    decode_equals_prefill(MD3_F32);
}
END_TEST

/* ---- batched decode == single-session decode -------------------------------- */

START_TEST(test_batched_decode)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M5_F32, "fp32");
    int V = glm_model_config(m)->vocab_size;
    enum { B = 3 };
    glm_session_t *bs[B], *ss[B];
    int32_t ids[B][16], next[B], first[B];
    float *bl = malloc(sizeof(float) * B * (size_t)V), *sl = malloc(sizeof(float) * (size_t)V);
    ck_assert(bl && sl);
    for (int i = 0; i < B; i++) {
        int len = 6 + 4 * i; /* different positions; the last crosses index_topk */
        random_ids(ids[i], len, V, 500 + (uint64_t)i);
        bs[i] = session(m, 32, 0);
        ss[i] = session(m, 32, 0);
        OK(glm_eval(bs[i], ids[i], len, 0, NULL));
        OK(glm_eval(ss[i], ids[i], len, 0, NULL));
        first[i] = (int32_t)(i * 37 + 11) % V;
    }
    struct glm_sampling g = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
    OK(glm_decode_batch(bs, first, B, bl, &g, next));
    double worst = 0;
    for (int i = 0; i < B; i++) {
        OK(glm_eval(ss[i], &first[i], 1, 0, sl));
        double e = rts_rel_err(bl + (size_t)i * V, sl, (size_t)V);
        if (e > worst)
            worst = e;
        int am = 0; /* argmax over the ids the sampler may choose */
        for (int v = 1; v < glm_model_sample_vocab(m); v++)
            if (sl[v] > sl[am])
                am = v;
        ck_assert_int_eq(next[i], am);
        ck_assert_int_eq(glm_session_pos(bs[i]), glm_session_pos(ss[i]));
    }
    printf("[runtime] batched decode of %d sessions vs single decodes: max relative error "
           "%.3e, greedy tokens equal\n",
           B, worst);
    ck_assert_msg(worst <= 1e-5, "batched decode differs: %g", worst);
    /* the same session twice is refused */
    glm_session_t *dup[2] = {bs[0], bs[0]};
    ck_assert_int_eq(glm_decode_batch(dup, first, 2, NULL, NULL, NULL), TX_EINVAL);
    for (int i = 0; i < B; i++) {
        glm_session_free(bs[i]);
        glm_session_free(ss[i]);
    }
    OK(glm_model_free(m));
    free(bl);
    free(sl);
    tx_device_close(dev);
}
END_TEST

/*
 * The guarantee of batched decode (issue 17 item 7, docs/libtx-glm.md): the
 * matmul kernels tile the rows of a pass, so a row's reduction order depends
 * on how many rows the pass has and batched logits are NOT bit-identical to
 * single-session ones. What holds: per row, max |batched - single| <=
 * 1e-5 * max |single logit| (FP32 and golden plans); greedy tokens are equal
 * whenever the single-session top-2 margin exceeds twice that bound. Four
 * sessions at different positions, 20 steps, for each plan.
 */
static void batch_guarantee(const char *plan, double *worst_out, int *ties_out)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M5_F32, plan);
    int V = glm_model_config(m)->vocab_size, SV = glm_model_sample_vocab(m);
    enum { B = 4, STEPS = 20 };
    glm_session_t *bs[B], *ss[B];
    int32_t cur[B], next[B];
    float *bl = malloc(sizeof(float) * B * (size_t)V), *sl = malloc(sizeof(float) * (size_t)V);
    ck_assert(bl && sl);
    for (int i = 0; i < B; i++) {
        int32_t ids[16];
        int len = 3 + 4 * i;
        random_ids(ids, len, SV, 700 + (uint64_t)i);
        bs[i] = session(m, 64, 0);
        ss[i] = session(m, 64, 0);
        OK(glm_eval(bs[i], ids, len, 0, NULL));
        OK(glm_eval(ss[i], ids, len, 0, NULL));
        cur[i] = ids[len - 1];
    }
    struct glm_sampling g = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
    double worst = 0;
    int differ = 0, near = 0, bits_equal = 1;
    for (int step = 0; step < STEPS; step++) {
        OK(glm_decode_batch(bs, cur, B, bl, &g, next));
        for (int i = 0; i < B; i++) {
            int32_t sn;
            OK(glm_decode_batch(&ss[i], &cur[i], 1, sl, &g, &sn));
            const float *b = bl + (size_t)i * V;
            bits_equal &= memcmp(b, sl, sizeof(float) * (size_t)V) == 0;
            double e = rts_rel_err(b, sl, (size_t)V), mx = 0;
            for (int v = 0; v < V; v++)
                mx = fabs(sl[v]) > mx ? fabs(sl[v]) : mx;
            if (e > worst)
                worst = e;
            /* the single-session top-2 margin over the sampled ids */
            int a1 = 0;
            for (int v = 1; v < SV; v++)
                if (sl[v] > sl[a1])
                    a1 = v;
            double second = -INFINITY;
            for (int v = 0; v < SV; v++)
                if (v != a1 && sl[v] > second)
                    second = sl[v];
            int tie = sl[a1] - second <= 2 * 1e-5 * mx;
            near += tie;
            if (sn != next[i]) {
                differ++;
                ck_assert_msg(tie, "%s: step %d session %d: tokens %d vs %d with margin %g", plan,
                              step, i, next[i], sn, sl[a1] - second);
            }
            cur[i] = next[i]; /* both sessions are fed the batched token */
        }
    }
    printf("[runtime] batched vs single decode, %s plan, %d sessions x %d steps: logits "
           "bit-identical %s, max |diff| / max |logit| %.3e (bound 1e-5), greedy tokens differ "
           "%d times (%d near-ties within the bound)\n",
           plan, B, STEPS, bits_equal ? "yes" : "no", worst, differ, near);
    ck_assert_msg(worst <= 1e-5, "%s: batched decode differs by %g", plan, worst);
    *worst_out = worst;
    *ties_out = near;
    for (int i = 0; i < B; i++) {
        glm_session_free(bs[i]);
        glm_session_free(ss[i]);
    }
    free(bl);
    free(sl);
    OK(glm_model_free(m));
    tx_device_close(dev);
}

START_TEST(test_batched_decode_guarantee)
{
    double w32, wg;
    int t32, tg;
    batch_guarantee("fp32", &w32, &t32);
    batch_guarantee("golden", &wg, &tg);
}
END_TEST

/*
 * The guarantee of batched decode with GLM_LOAD_BATCH_INVARIANT (issue 17
 * item 7, docs/libtx-glm.md): batched logits are bit-identical (memcmp) to
 * single-session ones, because every row of a MATMUL / MOE_FFN pass of a
 * TX8_JOB_F_BATCH_INVARIANT job has a reduction order that does not depend
 * on the other rows (docs/engine.md, "Batch invariance"). The fp32 and bf16
 * plans load with the flag, golden and fp16 with TX_BATCH_INVARIANT=1. Six
 * sessions at different positions (one of them crossing index_topk), 20
 * steps, greedy, for each plan; the batch shrinks on the way (a session
 * leaves at step 10) and the single-session side decodes with
 * glm_decode_batch of one.
 */
static void batch_bit_identical(const char *plan, int use_env)
{
    tx_device_t *dev = open_dev();
    if (use_env)
        setenv("TX_BATCH_INVARIANT", "1", 1);
    glm_model_t *m = load_flags(dev, M5_F32, plan, use_env ? 0 : GLM_LOAD_BATCH_INVARIANT);
    unsetenv("TX_BATCH_INVARIANT");
    int V = glm_model_config(m)->vocab_size, SV = glm_model_sample_vocab(m);
    enum { B = 6, STEPS = 20 };
    glm_session_t *bs[B], *ss[B];
    int32_t cur[B], next[B];
    float *bl = malloc(sizeof(float) * B * (size_t)V), *sl = malloc(sizeof(float) * (size_t)V);
    ck_assert(bl && sl);
    for (int i = 0; i < B; i++) {
        int32_t ids[24];
        int len = 3 + 4 * i;
        random_ids(ids, len, SV, 700 + (uint64_t)i);
        bs[i] = session(m, 64, 0);
        ss[i] = session(m, 64, 0);
        OK(glm_eval(bs[i], ids, len, 0, NULL));
        OK(glm_eval(ss[i], ids, len, 0, NULL));
        cur[i] = ids[len - 1];
    }
    struct glm_sampling g = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
    int compared = 0;
    for (int step = 0; step < STEPS; step++) {
        int nb = step < STEPS / 2 ? B : B - 1;
        OK(glm_decode_batch(bs, cur, nb, bl, &g, next));
        for (int i = 0; i < nb; i++) {
            int32_t sn;
            OK(glm_decode_batch(&ss[i], &cur[i], 1, sl, &g, &sn));
            const float *b = bl + (size_t)i * V;
            ck_assert_msg(memcmp(b, sl, sizeof(float) * (size_t)V) == 0,
                          "%s plan: step %d session %d of %d: batched logits are not "
                          "bit-identical to the session's alone (max relative error %.3e)",
                          plan, step, i, nb, rts_rel_err(b, sl, (size_t)V));
            ck_assert_int_eq(sn, next[i]);
            compared++;
            cur[i] = next[i];
        }
    }
    struct tx_device_info bdi;
    OK(tx_device_info(dev, &bdi));
    printf("[runtime] %s: batched vs single decode, %s plan, %d sessions x %d steps: %d logit rows "
           "bit-identical (memcmp), greedy tokens equal\n",
           bdi.backend, plan, B, STEPS, compared);
    for (int i = 0; i < B; i++) {
        glm_session_free(bs[i]);
        glm_session_free(ss[i]);
    }
    free(bl);
    free(sl);
    OK(glm_model_free(m));
    tx_device_close(dev);
}

START_TEST(test_batched_decode_bit_identical)
{
    /* on /dev/accel (tx8.ko >= 1.2 passes DRM_TX8_SUBMIT_BATCH_INVARIANT)
     * as on the emu socket; in the VM suite (TCG) two plans, the flag and
     * the environment variable, to keep within the test's time limit */
    tx_device_t *d0 = open_dev();
    struct tx_device_info di;
    OK(tx_device_info(d0, &di));
    tx_device_close(d0);
    batch_bit_identical("fp32", 0);
    batch_bit_identical("golden", 1);
    if (!strcmp(di.backend, "emu")) {
        batch_bit_identical("bf16", 0);
        batch_bit_identical("fp16", 1);
    }
    /* a bad TX_BATCH_INVARIANT fails the load, naming it */
    tx_device_t *dev = open_dev();
    glm_model_t *m = NULL;
    setenv("TX_BATCH_INVARIANT", "yes", 1);
    ck_assert_int_eq(glm_model_load(dev, g_smd[M5_F32], NULL, &m), TX_EINVAL);
    unsetenv("TX_BATCH_INVARIANT");
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(tx_last_error(), "TX_BATCH_INVARIANT=yes"));
    tx_device_close(dev);
}
END_TEST

/* ---- per-session sampling in one batch (issue 17 item 8) --------------------- */

START_TEST(test_batch_sampling_each)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M5_F32, "golden");
    int V = glm_model_config(m)->vocab_size, SV = glm_model_sample_vocab(m);
    enum { B = 6 };
    int32_t prompt[6], first[B], next[B], shared[B];
    random_ids(prompt, 6, SV, 21);
    glm_session_t *bs[B];
    struct glm_sampling smp[B];
    for (int i = 0; i < B; i++) {
        bs[i] = session(m, 32, 0);
        OK(glm_eval(bs[i], prompt, 6, 0, NULL));
        first[i] = prompt[5];
        smp[i] = (struct glm_sampling){.temperature = 2.0f,
                                       .top_k = i == 2 ? 5 : 0,
                                       .top_p = i == 3 ? 0.9f : 1.0f,
                                       .seed = 100 + (uint64_t)i};
    }
    smp[0].temperature = 0.0f; /* session 0 greedy among sampling ones */
    smp[0].top_p = 0.0f;       /* ignored when greedy */
    float *bl = malloc(sizeof(float) * B * (size_t)V), *sl = malloc(sizeof(float) * (size_t)V);
    ck_assert(bl && sl);
    OK(glm_decode_batch_each(bs, first, B, bl, smp, next));
    int am = 0;
    for (int v = 1; v < SV; v++)
        if (bl[v] > bl[am])
            am = v;
    ck_assert_int_eq(next[0], am);
    /* every session draws what it draws alone with its own parameters */
    for (int i = 0; i < B; i++) {
        glm_session_t *s1 = session(m, 32, 0);
        OK(glm_eval(s1, prompt, 6, 0, NULL));
        int32_t nx = -1;
        OK(glm_decode_batch_each(&s1, &first[i], 1, sl, &smp[i], &nx));
        ck_assert_int_eq(nx, next[i]);
        glm_session_free(s1);
    }
    int distinct = 0;
    for (int i = 1; i < B; i++) {
        int seen = 0;
        for (int j = 1; j < i; j++)
            seen |= next[j] == next[i];
        distinct += !seen;
    }
    /* one glm_sampling for all: same prompt, same position, same draw */
    for (int i = 0; i < B; i++)
        OK(glm_session_truncate(bs[i], 6));
    OK(glm_decode_batch(bs, first, B, NULL, &smp[1], shared));
    for (int i = 1; i < B; i++)
        ck_assert_int_eq(shared[i], shared[0]);
    printf("[runtime] one batch, %d sessions with the same prompt and their own seeds: %d "
           "distinct tokens among the %d sampling ones (shared sampling: all equal)\n",
           B, distinct, B - 1);
    ck_assert_int_ge(distinct, 2);
    for (int i = 0; i < B; i++)
        glm_session_free(bs[i]);
    free(bl);
    free(sl);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* ---- no silent rewrites of sampling parameters (issue 17 item 10) ----------- */

START_TEST(test_sampling_refused)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M4_F32, "golden");
    int32_t prompt[3] = {1, 2, 3}, next;
    glm_session_t *s = session(m, 32, 0);
    struct {
        struct glm_sampling smp;
        const char *what;
    } bad[] = {
        {{.temperature = 0.8f, .top_k = 4097, .top_p = 0.95f, .seed = 0},
         "top_k 4097 exceeds the device's limit of 4096"},
        {{.temperature = 0.8f, .top_k = -1, .top_p = 0.95f, .seed = 0}, "top_k -1 is negative"},
        {{.temperature = 0.8f, .top_k = 40, .top_p = 0.0f, .seed = 0}, "top_p 0 is outside (0, 1]"},
        {{.temperature = 0.8f, .top_k = 40, .top_p = -0.5f, .seed = 0},
         "top_p -0.5 is outside (0, 1]"},
        {{.temperature = 0.8f, .top_k = 40, .top_p = 1.5f, .seed = 0},
         "top_p 1.5 is outside (0, 1]"},
        {{.temperature = 0.8f, .top_k = 40, .top_p = NAN, .seed = 0},
         "top_p nan is outside (0, 1]"},
        {{.temperature = NAN, .top_k = 40, .top_p = 0.9f, .seed = 0}, "temperature is NaN"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct glm_generate_params p;
        memset(&p, 0, sizeof(p));
        p.prompt = prompt;
        p.n_prompt = 3;
        p.n_predict = 2;
        p.sampling = bad[i].smp;
        ck_assert_int_eq(glm_generate(s, &p, NULL, 0, NULL, NULL), TX_EINVAL);
        ck_assert_msg(strstr(tx_last_error(), bad[i].what), "%zu: '%s' lacks '%s'", i,
                      tx_last_error(), bad[i].what);
        ck_assert_int_eq(glm_session_pos(s), 0); /* nothing was evaluated */
        ck_assert_int_eq(glm_decode_batch(&s, prompt, 1, NULL, &bad[i].smp, &next), TX_EINVAL);
        ck_assert_int_eq(glm_decode_batch_each(&s, prompt, 1, NULL, &bad[i].smp, &next), TX_EINVAL);
        ck_assert_int_eq(glm_session_pos(s), 0);
    }
    printf("[runtime] sampling parameters the device cannot honour are refused: %s\n",
           tx_last_error());
    /* the limits themselves and greedy with any top-k/top-p are accepted */
    struct glm_sampling ok[] = {{.temperature = 0.8f, .top_k = 4096, .top_p = 1.0f},
                                {.temperature = 0.8f, .top_k = 0, .top_p = 1e-6f},
                                {.temperature = 0.0f, .top_k = -3, .top_p = 0.0f},
                                {.temperature = 0.0f, .top_k = 99999, .top_p = 7.0f}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        OK(glm_decode_batch(&s, prompt, 1, NULL, &ok[i], &next));
        ck_assert_int_lt(next, glm_model_sample_vocab(m));
    }
    ck_assert_int_eq(glm_session_truncate(s, glm_session_pos(s) + 1), TX_EINVAL);
    ck_assert_int_eq(glm_session_truncate(s, -1), TX_EINVAL);
    OK(glm_session_truncate(s, 1));
    ck_assert_int_eq(glm_session_pos(s), 1);
    glm_session_free(s);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* ---- sampling on the device ------------------------------------------------- */

struct collect {
    int n;
    int32_t t[64];
};

static int collect_cb(void *user, int32_t tok, const char *piece, size_t len)
{
    (void)piece;
    (void)len;
    struct collect *c = user;
    if (tok >= 0 && c->n < 64)
        c->t[c->n++] = tok;
    return 0;
}

static int gen(glm_model_t *m, const int32_t *prompt, int np, int n_predict,
               struct glm_sampling smp, const int32_t *stop, int n_stop, int32_t *out,
               struct glm_timings *t)
{
    glm_session_t *s = session(m, 64, 0);
    struct glm_generate_params p;
    memset(&p, 0, sizeof(p));
    p.prompt = prompt;
    p.n_prompt = np;
    p.n_predict = n_predict;
    p.sampling = smp;
    p.stop = stop;
    p.n_stop = n_stop;
    struct collect col = {0, {0}};
    p.on_token = collect_cb;
    p.user = &col;
    int n = 0;
    OK(glm_generate(s, &p, out, 64, &n, t));
    ck_assert_int_eq(col.n, n);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(col.t[i], out[i]);
    glm_session_free(s);
    return n;
}

START_TEST(test_sampling)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M5_F32, "golden");
    int V = glm_model_config(m)->vocab_size;
    int32_t prompt[6], a[64], b[64], c[64];
    random_ids(prompt, 6, V, 3);
    struct glm_sampling smp = {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .seed = 7};
    struct glm_timings t;
    int na = gen(m, prompt, 6, 16, smp, NULL, -1, a, &t);
    int nb = gen(m, prompt, 6, 16, smp, NULL, -1, b, NULL);
    ck_assert_int_eq(na, 16);
    ck_assert_int_eq(nb, 16);
    ck_assert_mem_eq(a, b, sizeof(int32_t) * 16);
    ck_assert_int_eq(t.stop, GLM_STOP_LENGTH);
    ck_assert_int_eq(t.n_prompt, 6);
    ck_assert_int_eq(t.n_eval, 15);
    ck_assert(t.prompt_ms > 0 && t.eval_ms > 0 && t.eval_tps > 0);
    smp.seed = 8;
    int nc = gen(m, prompt, 6, 16, smp, NULL, -1, c, NULL);
    ck_assert_int_eq(nc, 16);
    int diff = memcmp(a, c, sizeof(int32_t) * 16) != 0;
    printf("[runtime] on-device sampling: seed 7 twice identical, seed 8 %s; %.1f tokens/s\n",
           diff ? "differs" : "equal", t.eval_tps);
    ck_assert_msg(diff, "seeds 7 and 8 gave the same 16 tokens at temperature 0.9");

    /* n_predict 0: the prompt is evaluated, nothing is generated (item 4) */
    struct glm_timings t0;
    int n0 = gen(m, prompt, 6, 0, smp, NULL, -1, c, &t0);
    ck_assert_int_eq(n0, 0);
    ck_assert_int_eq(t0.stop, GLM_STOP_LENGTH);
    ck_assert_int_eq(t0.n_eval, 0);
    ck_assert_int_eq(t0.n_prompt, 6);

    /* greedy = argmax of the logits */
    struct glm_sampling greedy = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
    int ng = gen(m, prompt, 6, 1, greedy, NULL, -1, c, NULL);
    ck_assert_int_eq(ng, 1);
    float *l = malloc(sizeof(float) * (size_t)V);
    glm_session_t *s = session(m, 64, 0);
    OK(glm_eval(s, prompt, 6, 0, l));
    int am = 0;
    for (int v = 1; v < glm_model_sample_vocab(m); v++)
        if (l[v] > l[am])
            am = v;
    ck_assert_int_eq(c[0], am);
    glm_session_free(s);
    free(l);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* The lm_head rows past the tokenizer's ids (padding: 268..511 here) are
 * never sampled (issue 17 item 2). */
START_TEST(test_padding_never_sampled)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M4_F32, "golden");
    int V = glm_model_config(m)->vocab_size;
    int SV = glm_model_sample_vocab(m);
    ck_assert_int_eq(V, 512);
    ck_assert_int_eq(SV, 268); /* 256 bytes + 12 special tokens */
    ck_assert_int_eq(glm_model_sample_vocab(NULL), 0);
    int32_t prompt[4], out[64];
    int pad = 0, total = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        random_ids(prompt, 4, SV, 40 + seed);
        struct glm_sampling hot = {.temperature = 3.0f, .top_k = 0, .top_p = 1.0f, .seed = seed};
        int n = gen(m, prompt, 4, 40, hot, NULL, -1, out, NULL);
        ck_assert_int_eq(n, 40);
        for (int i = 0; i < n; i++) {
            pad += out[i] >= SV;
            total++;
        }
    }
    /* greedy: the argmax over the real ids even where a padding row is
     * larger */
    float *l = malloc(sizeof(float) * (size_t)V);
    ck_assert(l);
    int greedy_pad_larger = 0;
    for (uint64_t k = 0; k < 8; k++) {
        random_ids(prompt, 4, SV, 90 + k);
        glm_session_t *s = session(m, 64, 0);
        OK(glm_eval(s, prompt, 4, 0, l));
        glm_session_free(s);
        int am = 0, amv = 0;
        for (int v = 1; v < V; v++)
            if (l[v] > l[amv])
                amv = v;
        for (int v = 1; v < SV; v++)
            if (l[v] > l[am])
                am = v;
        greedy_pad_larger += amv >= SV;
        struct glm_sampling g = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
        ck_assert_int_eq(gen(m, prompt, 4, 1, g, NULL, -1, out, NULL), 1);
        ck_assert_int_eq(out[0], am);
    }
    free(l);
    printf("[runtime] padding ids [%d, %d): %d of %d draws at temperature 3 (must be 0); "
           "greedy over the real ids where %d of 8 prompts' argmax is a padding row\n",
           SV, V, pad, total, greedy_pad_larger);
    ck_assert_int_eq(pad, 0);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

START_TEST(test_stop_tokens)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M4_F32, "golden");
    int V = glm_model_config(m)->vocab_size;
    int32_t prompt[5], a[64], b[64];
    random_ids(prompt, 5, V, 11);
    struct glm_sampling greedy = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
    int na = gen(m, prompt, 5, 12, greedy, NULL, -1, a, NULL);
    ck_assert_int_eq(na, 12);
    /* the first generated token that did not occur before it */
    int k = -1;
    for (int i = 1; i < na && k < 0; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= a[j] == a[i];
        if (!seen)
            k = i;
    }
    ck_assert_msg(k > 0, "greedy output repeats one token");
    struct glm_timings t;
    int32_t stop[2] = {V - 1 == a[k] ? V - 2 : V - 1, a[k]};
    int nb = gen(m, prompt, 5, 12, greedy, stop, 2, b, &t);
    ck_assert_int_eq(nb, k);
    ck_assert_mem_eq(a, b, sizeof(int32_t) * (size_t)k);
    ck_assert_int_eq(t.stop, GLM_STOP_TOKEN);
    printf("[runtime] stop token %d ends generation after %d tokens (not emitted)\n", a[k], k);

    /* the model's own stop tokens: eos of the config and the chat ones */
    int32_t st[16];
    int ns = glm_model_stop_tokens(m, st, 16);
    ck_assert_int_ge(ns, 1);
    ck_assert_int_eq(st[0], 256);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* ---- sampler order, min-p and penalties on the device (issue 17 item 9) ----- */

START_TEST(test_sampler_order_penalties)
{
    struct glm_sampling d;
    glm_sampling_default(&d);
    ck_assert(d.temperature == 0.8f && d.top_k == 40 && d.top_p == 0.95f && d.min_p == 0.05f);
    ck_assert(d.repeat_penalty == 1.0f && d.presence_penalty == 0.0f &&
              d.frequency_penalty == 0.0f && d.repeat_last_n == 64);
    ck_assert_int_eq(d.order, GLM_SAMPLER_ORDER_LLAMA);
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M4_F32, "golden");
    int SV = glm_model_sample_vocab(m);
    int32_t prompt[6], a[64], b[64];
    random_ids(prompt, 6, SV, 13);
    /* greedy repeats itself; a presence penalty over the whole context
     * forbids every id seen (prompt included) */
    struct glm_sampling g = {.temperature = 0.0f, .top_p = 1.0f};
    int n = gen(m, prompt, 6, 24, g, NULL, -1, a, NULL);
    ck_assert_int_eq(n, 24);
    int rep0 = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            rep0 += a[j] == a[i];
    g.presence_penalty = 1000.0f;
    g.repeat_last_n = -1;
    n = gen(m, prompt, 6, 24, g, NULL, -1, b, NULL);
    int rep1 = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            rep1 += b[j] == b[i];
        for (int j = 0; j < 6; j++)
            rep1 += prompt[j] == b[i];
    }
    /* repeat_last_n 0: no penalties even with the values set */
    g.repeat_last_n = 0;
    int32_t c[64];
    n = gen(m, prompt, 6, 24, g, NULL, -1, c, NULL);
    ck_assert_mem_eq(a, c, sizeof(int32_t) * 24);
    /* the two orders differ at a temperature != 1 with top-p */
    struct glm_sampling o1 = {.temperature = 0.5f, .top_p = 0.6f, .seed = 5};
    struct glm_sampling o2 = o1;
    o2.order = GLM_SAMPLER_ORDER_TEMP_FIRST;
    int d12 = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        o1.seed = o2.seed = seed;
        int n1 = gen(m, prompt, 6, 16, o1, NULL, -1, a, NULL);
        int n2 = gen(m, prompt, 6, 16, o2, NULL, -1, b, NULL);
        ck_assert_int_eq(n1, n2);
        d12 += memcmp(a, b, sizeof(int32_t) * 16) != 0;
    }
    printf("[runtime] greedy repeats %d pairs, with presence_penalty 1000 over the context %d; "
           "llama vs temperature-first order: %d of 4 seeds differ\n",
           rep0, rep1, d12);
    ck_assert_int_gt(rep0, 0);
    ck_assert_int_eq(rep1, 0);
    ck_assert_int_gt(d12, 0);
    /* refused */
    glm_session_t *s = session(m, 32, 0);
    int32_t next;
    struct glm_sampling bad[4];
    for (int i = 0; i < 4; i++)
        glm_sampling_default(&bad[i]);
    bad[0].min_p = 1.5f;
    bad[1].order = 7;
    bad[2].repeat_penalty = -1.0f;
    bad[3].repeat_last_n = GLM_MAX_REPEAT_LAST_N + 1;
    const char *what[4] = {"min_p 1.5", "order 7", "repeat_penalty -1", "repeat_last_n 4097"};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(glm_decode_batch(&s, prompt, 1, NULL, &bad[i], &next), TX_EINVAL);
        ck_assert_msg(strstr(tx_last_error(), what[i]), "'%s' lacks '%s'", tx_last_error(),
                      what[i]);
    }
    glm_session_free(s);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* GLM_GEN_IGNORE_EOS (--ignore-eos): stop tokens get a -inf logit bias and
 * are never sampled, rather than sampled and hidden (issue 17 item 5). */
static int gen_flags(glm_model_t *m, const int32_t *prompt, int np, int n_predict,
                     struct glm_sampling smp, const int32_t *stop, int n_stop, unsigned flags,
                     int32_t *out, struct glm_timings *t)
{
    glm_session_t *s = session(m, 64, 0);
    struct glm_generate_params p;
    memset(&p, 0, sizeof(p));
    p.prompt = prompt;
    p.n_prompt = np;
    p.n_predict = n_predict;
    p.sampling = smp;
    p.stop = stop;
    p.n_stop = n_stop;
    p.flags = flags;
    int n = 0;
    OK(glm_generate(s, &p, out, 64, &n, t));
    glm_session_free(s);
    return n;
}

START_TEST(test_ignore_eos)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M4_F32, "golden");
    int SV = glm_model_sample_vocab(m);
    int32_t prompt[4], out[64], ban[80];
    for (int i = 0; i < 80; i++)
        ban[i] = i; /* ids 0..79 as "stop tokens": ~30% of the sampled ids */
    int hidden = 0, banned = 0, tot = 0;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        random_ids(prompt, 4, SV, 60 + seed);
        struct glm_sampling hot = {.temperature = 3.0f, .top_k = 0, .top_p = 1.0f, .seed = seed};
        struct glm_timings t;
        /* no stop tokens at all: ids < 80 are drawn */
        int n = gen_flags(m, prompt, 4, 40, hot, NULL, -1, 0, out, &t);
        for (int i = 0; i < n; i++)
            hidden += out[i] < 80;
        /* ignore-eos: never drawn, generation runs to n_predict */
        n = gen_flags(m, prompt, 4, 40, hot, ban, 80, GLM_GEN_IGNORE_EOS, out, &t);
        ck_assert_int_eq(n, 40);
        ck_assert_int_eq(t.stop, GLM_STOP_LENGTH);
        for (int i = 0; i < n; i++)
            banned += out[i] < 80;
        tot += n;
        /* the model's stop tokens (stop NULL, n_stop 0) */
        n = gen_flags(m, prompt, 4, 40, hot, NULL, 0, GLM_GEN_IGNORE_EOS, out, &t);
        ck_assert_int_eq(n, 40);
        int32_t st[16];
        int ns = glm_model_stop_tokens(m, st, 16);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < ns; j++)
                ck_assert_int_ne(out[i], st[j]);
    }
    printf("[runtime] ignore-eos: %d of %d draws are banned ids with the -inf bias (without "
           "it: %d)\n",
           banned, tot, hidden);
    ck_assert_int_gt(hidden, 0);
    ck_assert_int_eq(banned, 0);
    /* unknown flags are refused */
    struct glm_sampling g = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seed = 0};
    glm_session_t *s = session(m, 64, 0);
    struct glm_generate_params p;
    memset(&p, 0, sizeof(p));
    p.prompt = prompt;
    p.n_prompt = 4;
    p.n_predict = 1;
    p.sampling = g;
    p.flags = 0x80;
    ck_assert_int_eq(glm_generate(s, &p, NULL, 0, NULL, NULL), TX_EINVAL);
    glm_session_free(s);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

START_TEST(test_chat_template)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M5_F32, "golden");
    struct tx_chat_message msg = {"user", "hi", NULL};
    int32_t *ids = NULL;
    size_t n = 0;
    OK(glm_chat_encode(m, &msg, 1, 0, &ids, &n));
    /* [gMASK]=258 <sop>=260 <|user|>=263 'h' 'i' <|assistant|>=264 ... */
    ck_assert_uint_ge(n, 6);
    ck_assert_int_eq(ids[0], 258);
    ck_assert_int_eq(ids[1], 260);
    ck_assert_int_eq(ids[2], 263);
    int has_asst = 0;
    for (size_t i = 3; i < n; i++)
        has_asst |= ids[i] == 264;
    ck_assert(has_asst);
    free(ids);
    OK(glm_tokenize(m, "hi", &ids, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 'h');
    free(ids);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* ---- the chat format comes from the packaged chat_template (issue 17 item 1) - */

/* Templates with the markers of the zai-org ones (abridged). */
static const char tmpl_glm47[] =
    "[gMASK]<sop>{%- for m in messages -%}{%- if m.role == 'system' -%}<|system|>{{ m.content "
    "}}{%- elif m.role == 'user' -%}<|user|>{{ m.content }}{%- elif m.role == 'assistant' "
    "-%}<|assistant|></think>{{ m.content }}{%- endif -%}{%- endfor -%}{%- if "
    "add_generation_prompt -%}<|assistant|>{{- '</think>' if (enable_thinking is defined and "
    "not enable_thinking) else '<think>' -}}{%- endif -%}";
static const char tmpl_glm45[] =
    "[gMASK]<sop>\n{%- for m in messages -%}{%- if m.role == 'user' -%}<|user|>\n{{ m.content "
    "}}{{- '/nothink' if (enable_thinking is defined and not enable_thinking and not "
    "m.content.endswith(\"/nothink\")) else '' -}}{%- elif m.role == 'assistant' "
    "-%}<|assistant|>\n<think></think>\n{{ m.content }}{%- endif -%}{%- endfor -%}{%- if "
    "add_generation_prompt -%}<|assistant|>{{- '\\n<think></think>' if (enable_thinking is "
    "defined and not enable_thinking) else '' -}}{%- endif -%}";
static const char tmpl_chatml[] = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content "
                                  "}}<|im_end|>\n{% endfor %}<|im_start|>assistant\n";

static const char tmpl_llama3[] = "{% for m in messages %}<|start_header_id|>{{ m.role }}"
                                  "<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% endfor %}";

static glm_model_t *load_with_template(tx_device_t *dev, int k, const char *tmpl)
{
    char ck[300], smd[300], path[340];
    snprintf(ck, sizeof(ck), "%s/tmpl%d", rts_tmpdir(), k);
    snprintf(smd, sizeof(smd), "%s/tmpl%d.smd", rts_tmpdir(), k);
    ck_assert_int_eq(rts_write_checkpoint(ck, GLM_ARCH_GLM4_MOE, NULL), 0);
    if (tmpl) {
        snprintf(path, sizeof(path), "%s/tokenizer_config.json", ck);
        FILE *f = fopen(path, "w");
        ck_assert(f);
        fputs("{\"chat_template\": \"", f);
        for (const char *c = tmpl; *c; c++) {
            if (*c == '"' || *c == '\\')
                fputc('\\', f);
            if (*c == '\n')
                fputs("\\n", f);
            else
                fputc(*c, f);
        }
        fputs("\"}\n", f);
        ck_assert_int_eq(fclose(f), 0);
    }
    ck_assert_int_eq(rts_export(ck, smd, "none"), 0);
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_set(dev, &p));
    glm_model_t *m = NULL;
    OK(glm_model_load(dev, smd, NULL, &m));
    return m;
}

static void expect_chat(glm_model_t *m, unsigned flags, const char *want)
{
    struct tx_chat_message msg = {"user", "hi", NULL};
    int32_t *ids = NULL, *w = NULL;
    size_t n = 0, nw = 0;
    OK(glm_chat_encode(m, &msg, 1, flags, &ids, &n));
    OK(glm_tokenize(m, want, &w, &nw));
    ck_assert_msg(n == nw && !memcmp(ids, w, n * sizeof(int32_t)),
                  "rendered %zu ids, \"%s\" is %zu", n, want, nw);
    free(ids);
    free(w);
}

START_TEST(test_chat_format_from_template)
{
    tx_device_t *dev = open_dev();
    char why[256];
    /* GLM-4.7 is glm4_moe, but renders like GLM-5 */
    glm_model_t *m = load_with_template(dev, 0, tmpl_glm47);
    ck_assert_int_eq(glm_model_chat_format(m, why, sizeof(why)), TX_CHAT_GLM5);
    printf("[runtime] glm4_moe with the GLM-4.7 template: %s\n", why);
    expect_chat(m, 0, "[gMASK]<sop><|user|>hi<|assistant|><think>");
    expect_chat(m, TX_CHAT_NO_THINKING, "[gMASK]<sop><|user|>hi<|assistant|></think>");
    /* the override */
    OK(glm_model_set_chat_format(m, TX_CHAT_GLM45));
    ck_assert_int_eq(glm_model_chat_format(m, why, sizeof(why)), TX_CHAT_GLM45);
    expect_chat(m, 0, "[gMASK]<sop><|user|>\nhi<|assistant|>");
    ck_assert_int_eq(glm_model_set_chat_format(m, 9), TX_EINVAL);
    OK(glm_model_set_chat_format(m, 0));
    ck_assert_int_eq(glm_model_chat_format(m, NULL, 0), TX_CHAT_GLM5);
    OK(glm_model_free(m));
    /* GLM-4.5/4.6 */
    m = load_with_template(dev, 1, tmpl_glm45);
    ck_assert_int_eq(glm_model_chat_format(m, why, sizeof(why)), TX_CHAT_GLM45);
    printf("[runtime] glm4_moe with the GLM-4.5 template: %s\n", why);
    expect_chat(m, 0, "[gMASK]<sop><|user|>\nhi<|assistant|>");
    OK(glm_model_free(m));
    /* a ChatML template: Qwen3 */
    m = load_with_template(dev, 2, tmpl_chatml);
    ck_assert_int_eq(glm_model_chat_format(m, why, sizeof(why)), TX_CHAT_QWEN3);
    printf("[runtime] a ChatML template: %s\n", why);
    expect_chat(m, 0, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    OK(glm_model_free(m));
    /* an unknown template is refused, not rendered as GLM */
    m = load_with_template(dev, 4, tmpl_llama3);
    ck_assert_int_eq(glm_model_chat_format(m, why, sizeof(why)), TX_ENOTSUP);
    struct tx_chat_message msg = {"user", "hi", NULL};
    int32_t *ids = NULL;
    size_t n = 0;
    ck_assert_int_eq(glm_chat_encode(m, &msg, 1, 0, &ids, &n), TX_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(tx_last_error(), "--chat-template-format"));
    printf("[runtime] unknown template: %s\n", tx_last_error());
    OK(glm_model_set_chat_format(m, TX_CHAT_GLM5)); /* the caller decides */
    expect_chat(m, 0, "[gMASK]<sop><|user|>hi<|assistant|><think>");
    OK(glm_model_free(m));
    /* no template: the architecture, said so */
    m = load_with_template(dev, 3, NULL);
    ck_assert_int_eq(glm_model_chat_format(m, why, sizeof(why)), TX_CHAT_GLM45);
    ck_assert_ptr_nonnull(strstr(why, "no chat_template"));
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* ---- expert load balancing -------------------------------------------------- */

static double run_skewed(glm_model_t *m, enum glm_balance_mode mode, double *hot)
{
    struct glm_moe_options o;
    glm_moe_defaults(&o);
    o.balance = mode;
    o.lambda = 0.2f;
    OK(glm_model_set_moe(m, &o));
    OK(glm_model_expert_stats_reset(m));
    int V = glm_model_config(m)->vocab_size;
    glm_session_t *s = session(m, 256, 16);
    int32_t ids[192];
    random_ids(ids, 192, V, 77);
    OK(glm_eval(s, ids, 192, 0, NULL));
    glm_session_free(s);
    struct glm_expert_stats *st;
    OK(glm_model_expert_stats(m, &st));
    ck_assert_int_gt(st->n_moe_layers, 0);
    ck_assert_uint_eq(st->total, (uint64_t)192 * st->n_moe_layers * st->top_k);
    double sd = st->mean_layer_std;
    *hot = st->max_share[0];
    glm_expert_stats_free(st);
    return sd;
}

START_TEST(test_load_balance)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M4_SKEW, "fp32");
    double hot0, hot1;
    double before = run_skewed(m, GLM_BALANCE_OFF, &hot0);
    double after = run_skewed(m, GLM_BALANCE_ON, &hot1);
    printf("[runtime] skewed router (experts 0,1 biased +0.1), 192 tokens in passes of 16: "
           "expert utilisation std %.1f%% -> %.1f%% with the load penalty (lambda 0.2); "
           "hottest expert %.1f%% -> %.1f%% of calls\n",
           before, after, hot0, hot1);
    ck_assert_msg(after < before, "load balancing did not lower the std (%g -> %g)", before, after);
    ck_assert_msg(hot1 < hot0, "the hottest expert did not cool down");
    /* auto: engages because the skewed layers have cold experts */
    double hot2;
    double autom = run_skewed(m, GLM_BALANCE_AUTO, &hot2);
    printf("[runtime] load balance auto (min_expert_util 0.3): std %.1f%%\n", autom);
    ck_assert(autom < before);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* With load balancing on, routing depends on the model-wide expert counts of
 * every earlier pass, so greedy decoding of one prompt differs after
 * glm_session_reset; glm_model_expert_stats_reset makes it repeat
 * (issue 17 item 11, docs/libtx-glm.md). */
START_TEST(test_balance_reset_determinism)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M4_SKEW, "fp32");
    struct glm_moe_options o;
    glm_moe_defaults(&o);
    o.balance = GLM_BALANCE_ON;
    o.lambda = 2.0f;
    OK(glm_model_set_moe(m, &o));
    int SV = glm_model_sample_vocab(m);
    int32_t prompt[8], a[64], b[64], c[64];
    random_ids(prompt, 8, SV, 404);
    struct glm_sampling g = {.temperature = 0.0f, .top_p = 1.0f};
    OK(glm_model_expert_stats_reset(m));
    int na = gen(m, prompt, 8, 40, g, NULL, -1, a, NULL);
    int nb = gen(m, prompt, 8, 40, g, NULL, -1, b, NULL); /* counts carried over */
    OK(glm_model_expert_stats_reset(m));
    int nc = gen(m, prompt, 8, 40, g, NULL, -1, c, NULL);
    ck_assert_int_eq(na, 40);
    ck_assert_int_eq(nb, 40);
    ck_assert_int_eq(nc, 40);
    int diff = 0;
    for (int i = 0; i < 40; i++)
        diff += a[i] != b[i];
    printf("[runtime] load balance on: greedy after a session reset differs in %d of 40 "
           "tokens; after glm_model_expert_stats_reset it repeats exactly\n",
           diff);
    ck_assert_msg(diff > 0, "the counts carried over should change the routing (lambda 2)");
    ck_assert_mem_eq(a, c, sizeof(int32_t) * 40);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

START_TEST(test_moe_yaml)
{
    struct glm_moe_options o;
    glm_moe_defaults(&o);
    const char *d = rts_tmpdir();
    char p[300];
    const char *cfg = "config/expert_parallel.yaml"; /* the repository's file */
    if (access(cfg, R_OK) != 0) {
        /* not run from the source tree (e.g. in the VM): the article's text */
        snprintf(p, sizeof(p), "%s/expert_parallel.yaml", d);
        FILE *f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fputs("moe:\n  expert_parallel: 4      # suggested: number of experts / 2\n"
              "  capacity_factor: 1.2\n  min_expert_util: 0.3\n",
              f);
        fclose(f);
        cfg = p;
    }
    OK(glm_moe_config_load(cfg, &o));
    ck_assert_int_eq(o.expert_parallel, 4);
    ck_assert(fabsf(o.capacity_factor - 1.2f) < 1e-6f);
    ck_assert(fabsf(o.min_expert_util - 0.3f) < 1e-6f);

    snprintf(p, sizeof(p), "%s/bad.yaml", d);
    static const char *bad[] = {
        "moe:\n  expert_parallel: 0\n",
        "moe:\n  capacity_factor: -1\n",
        "moe:\n  min_expert_util: 2\n",
        "moe:\n  expert_paralel: 4\n",
        "moe: [1, 2]\n",
        "other: 1\n",
        "moe:\n  expert_parallel: 4.5\n",
        "moe:\n  expert_parallel: [\n",
        "moe:\n  load_balance: maybe\n",
        "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        FILE *f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fputs(bad[i], f);
        fclose(f);
        struct glm_moe_options x = o;
        int rc = glm_moe_config_load(p, &x);
        ck_assert_msg(rc == TX_EINVAL, "'%s' accepted", bad[i]);
        ck_assert(tx_last_error()[0]);
        ck_assert_mem_eq(&x, &o, sizeof(o));
    }
    ck_assert_int_eq(glm_moe_config_load("/nonexistent/x.yaml", &o), TX_ENOENT);

    /* expert_parallel must divide the experts; capacity overflow is counted */
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M4_SKEW, "fp32");
    struct glm_moe_options mo;
    glm_moe_defaults(&mo);
    mo.expert_parallel = 3;
    ck_assert_int_eq(glm_model_set_moe(m, &mo), TX_EINVAL);
    mo.expert_parallel = 4;
    mo.capacity_factor = 1.2f;
    OK(glm_model_set_moe(m, &mo));
    OK(glm_model_expert_stats_reset(m));
    int V = glm_model_config(m)->vocab_size;
    int32_t ids[64];
    random_ids(ids, 64, V, 5);
    glm_session_t *s = session(m, 64, 64);
    OK(glm_eval(s, ids, 64, 0, NULL));
    struct glm_expert_stats *st;
    OK(glm_model_expert_stats(m, &st));
    ck_assert_int_eq(st->expert_parallel, 4);
    uint64_t ov = 0;
    for (int i = 0; i < st->n_moe_layers; i++) {
        ov += st->overflow[i];
        ck_assert(st->group_imbalance[i] >= 1.0);
        /* the two biased experts of group 0 make it the busiest group */
        ck_assert(st->group_imbalance[i] > 1.2);
    }
    printf("[runtime] capacity_factor 1.2, 64 tokens: %llu selections over capacity; group "
           "imbalance layer %d: %.2f\n",
           (unsigned long long)ov, st->layer[0], st->group_imbalance[0]);
    ck_assert(ov > 0);
    glm_expert_stats_free(st);
    glm_session_free(s);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* ---- device memory labels ---------------------------------------------------- */

START_TEST(test_memory_labels)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M5_F32, "golden");
    glm_session_t *s = session(m, 16, 0);
    int32_t ids[3] = {1, 2, 3};
    OK(glm_eval(s, ids, 3, 0, NULL));
    size_t n = 0;
    int rc = tx_device_memory_view(dev, NULL, 0, &n);
    if (rc == TX_ENOTSUP) {
        /* the kernel driver: the labels are keys of /proc/tx_meminfo */
        FILE *f = fopen("/proc/tx_meminfo", "r");
        char line[256];
        int w = 0, kv = 0, act = 0;
        ck_assert_msg(f != NULL, "no memory view and no /proc/tx_meminfo");
        while (fgets(line, sizeof(line), f)) {
            w |= !strncmp(line, "GLM-5.1_Weights:", 16);
            kv |= !strncmp(line, "GLM-5.1_KVCache:", 16);
            act |= !strncmp(line, "GLM-5.1_Activations:", 20);
        }
        fclose(f);
        printf("[runtime] labels checked in /proc/tx_meminfo\n");
        ck_assert_msg(w && kv && act, "labels missing from /proc/tx_meminfo");
    } else {
        OK(rc);
        struct tx_mem_region *r = calloc(n, sizeof(*r));
        OK(tx_device_memory_view(dev, r, n, &n));
        int w = 0, kv = 0, act = 0;
        for (size_t i = 0; i < n; i++) {
            w |= !strcmp(r[i].label, "GLM-5.1_Weights");
            kv |= !strcmp(r[i].label, "GLM-5.1_KVCache");
            act |= !strcmp(r[i].label, "GLM-5.1_Activations");
        }
        ck_assert_msg(w && kv && act, "labels missing from the memory view");
        free(r);
    }
    struct glm_model_info info;
    OK(glm_model_info(m, &info));
    ck_assert(info.weights_bytes > 0 && info.kv_bytes > 0 && info.activation_bytes > 0);
    ck_assert(info.converted_bytes > 0); /* the FP32 package under the golden plan */
    ck_assert_uint_eq(info.n_sessions, 1);
    glm_session_free(s);
    OK(glm_model_free(m));
    /* a named model */
    struct glm_load_options lo = {.name = "Test"};
    OK(glm_model_load(dev, g_smd[M4_F32], &lo, &m));
    ck_assert_str_eq(glm_model_name(m), "Test");
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------ */

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

START_TEST(test_malformed_packages)
{
    tx_device_t *dev = open_dev();
    const char *d = rts_tmpdir();
    char p[300];
    snprintf(p, sizeof(p), "%s/bad.smd", d);
    FILE *f = fopen(g_smd[M4_F32], "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    size_t sz = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *good = malloc(sz), *bad = malloc(sz);
    ck_assert_uint_eq(fread(good, 1, sz, f), sz);
    fclose(f);
    glm_model_t *m = NULL;
    struct {
        const char *what;
        size_t len;
        size_t flip; /* byte to corrupt, or SIZE_MAX */
    } cases[] = {
        {"empty", 0, SIZE_MAX},
        {"truncated header", 100, SIZE_MAX},
        {"truncated data", sz / 2, SIZE_MAX},
        {"magic", sz, 0},
        {"header checksum", sz, 40},
        {"section table", sz, 130},
        {"one byte short", sz - 1, SIZE_MAX},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memcpy(bad, good, sz);
        if (cases[i].flip != SIZE_MAX)
            bad[cases[i].flip] ^= 0x5a;
        write_bytes(p, bad, cases[i].len);
        int rc = glm_model_load(dev, p, NULL, &m);
        ck_assert_msg(rc != TX_OK, "%s: accepted", cases[i].what);
        ck_assert_ptr_null(m);
        ck_assert(tx_last_error()[0]);
        printf("[runtime] malformed package (%s): %s\n", cases[i].what, tx_last_error());
    }
    /* random garbage */
    uint64_t seed = 1;
    for (size_t i = 0; i < 65536 && i < sz; i++)
        bad[i] = (unsigned char)rts_rand(&seed);
    write_bytes(p, bad, 65536 < sz ? 65536 : sz);
    ck_assert_int_ne(glm_model_load(dev, p, NULL, &m), TX_OK);
    /* a tensor's data changed: checksums catch it with GLM_LOAD_VERIFY */
    memcpy(bad, good, sz);
    {
        struct tx_smd *smd;
        char e[512];
        ck_assert_int_eq(tx_smd_open(g_smd[M4_F32], 0, &smd, e, sizeof(e)), 0);
        const struct tx_smd_tensor *t =
            tx_smd_find(smd, "model.layers.1.mlp.experts.3.up_proj.weight");
        ck_assert_ptr_nonnull(t);
        bad[t->data_offset + t->data_size / 2] ^= 0x01;
        tx_smd_close(smd);
    }
    write_bytes(p, bad, sz);
    struct glm_load_options lo = {.flags = GLM_LOAD_VERIFY};
    ck_assert_int_ne(glm_model_load(dev, p, &lo, &m), TX_OK);
    printf("[runtime] corrupted tensor data with GLM_LOAD_VERIFY: %s\n", tx_last_error());
    ck_assert_int_ne(glm_model_load(dev, "/nonexistent/model.smd", NULL, &m), TX_OK);

    /* well-formed packages that are not a valid model: wrong shape, unknown
     * tensor, missing tensors */
    {
        struct tx_smd *smd;
        char e[512];
        ck_assert_int_eq(tx_smd_open(g_smd[M4_F32], 0, &smd, e, sizeof(e)), 0);
        size_t cl, tl;
        const char *cj = tx_smd_config_json(smd, &cl), *tj = tx_smd_tokenizer_json(smd, &tl);
        struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT];
        for (int l = 0; l < TX_SMD_LAYER_COUNT; l++)
            plan[l] = *tx_smd_plan(smd, (enum tx_smd_layer)l);
        static const struct {
            const char *name;
            uint64_t r, c;
            const char *expect;
        } tc[] = {
            {"model.embed_tokens.weight", 512, 63, "shape"},
            {"model.layers.0.self_attn.foo.weight", 4, 4, "not part"},
            {"model.embed_tokens.weight", 512, 64, "missing"},
        };
        for (size_t i = 0; i < sizeof(tc) / sizeof(tc[0]); i++) {
            struct tx_smd_writer *w;
            ck_assert_int_eq(tx_smd_writer_open(p, &w, e, sizeof(e)), 0);
            ck_assert_int_eq(tx_smd_writer_section(w, TX_SMD_SEC_CONFIG, cj, cl, e, sizeof(e)), 0);
            ck_assert_int_eq(tx_smd_writer_section(w, TX_SMD_SEC_TOKENIZER, tj, tl, e, sizeof(e)),
                             0);
            ck_assert_int_eq(tx_smd_writer_plan(w, plan, e, sizeof(e)), 0);
            struct tx_smd_tensor_desc dsc;
            memset(&dsc, 0, sizeof(dsc));
            dsc.name = tc[i].name;
            dsc.dtype = TX8_DTYPE_F32;
            dsc.format = TX8_WFMT_DENSE;
            dsc.layer_type = TX_SMD_LAYER_EMBEDDING;
            dsc.ndim = 2;
            dsc.shape[0] = tc[i].r;
            dsc.shape[1] = tc[i].c;
            dsc.layer = dsc.expert = -1;
            ck_assert_msg(tx_smd_writer_begin(w, &dsc, e, sizeof(e)) == 0, "%s", e);
            size_t nb = (size_t)(tc[i].r * tc[i].c * 4);
            float *z = calloc(1, nb);
            ck_assert_int_eq(tx_smd_writer_data(w, z, nb, e, sizeof(e)), 0);
            free(z);
            ck_assert_int_eq(tx_smd_writer_end(w, NULL, 0, NULL, 0, e, sizeof(e)), 0);
            ck_assert_int_eq(tx_smd_writer_finish(w, e, sizeof(e)), 0);
            int rc = glm_model_load(dev, p, NULL, &m);
            ck_assert_int_eq(rc, TX_EINVAL);
            ck_assert_msg(strstr(tx_last_error(), tc[i].expect), "'%s' lacks '%s'", tx_last_error(),
                          tc[i].expect);
            printf("[runtime] invalid model package: %s\n", tx_last_error());
        }
        tx_smd_close(smd);
    }
    ck_assert_int_eq(glm_model_load(NULL, g_smd[M4_F32], NULL, &m), TX_EINVAL);
    /* a missing package is "not found", named in the message (not "invalid argument") */
    ck_assert_int_eq(glm_model_load(dev, "/nonexistent/none.smd", NULL, &m), TX_ENOENT);
    ck_assert_msg(strstr(tx_last_error(), "/nonexistent/none.smd"), "%s", tx_last_error());

    /* the device still works after all that */
    m = load(dev, M4_F32, "golden");
    glm_session_t *s = session(m, 16, 0);
    int32_t ids[2] = {1, 600};
    ck_assert_int_eq(glm_eval(s, ids, 2, 0, NULL), TX_EINVAL); /* id outside the vocabulary */
    ids[1] = 2;
    OK(glm_eval(s, ids, 2, 0, NULL));
    int32_t many[20] = {0};
    ck_assert_int_eq(glm_eval(s, many, 20, 0, NULL), TX_EINVAL); /* beyond n_ctx */
    ck_assert_int_eq(glm_model_free(m), TX_EBUSY);               /* session alive */
    glm_session_free(s);
    OK(glm_model_free(m));
    free(good);
    free(bad);
    tx_device_close(dev);
}
END_TEST

/* ---- parameter shard streaming ------------------------------------------------- */

static void streaming(int which, const char *plan)
{
    tx_device_t *dev = open_dev();
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_parse(plan, &p));
    OK(glm_plan_set(dev, &p));
    glm_model_t *res, *str;
    OK(glm_model_load(dev, g_smd[which], NULL, &res));
    struct glm_load_options lo = {.flags = GLM_LOAD_STREAM};
    OK(glm_model_load(dev, g_smd[which], &lo, &str));
    int V = glm_model_config(res)->vocab_size;
    const int n = 12, steps = 6;
    int32_t ids[12];
    random_ids(ids, n, V, 31);
    float *a = malloc(sizeof(float) * (size_t)n * V), *b = malloc(sizeof(float) * (size_t)n * V);
    glm_session_t *sa = session(res, 32, 0), *sb = session(str, 32, 0);
    OK(glm_eval(sa, ids, n, GLM_EVAL_ALL_LOGITS, a));
    OK(glm_eval(sb, ids, n, GLM_EVAL_ALL_LOGITS, b));
    double e = rts_rel_err(b, a, (size_t)n * V);
    for (int i = 0; i < steps; i++) { /* decode passes: steady-state prefetch */
        int32_t t = ids[i];
        OK(glm_eval(sa, &t, 1, 0, a));
        OK(glm_eval(sb, &t, 1, 0, b));
        double x = rts_rel_err(b, a, (size_t)V);
        if (x > e)
            e = x;
    }
    struct glm_model_info ia, ib;
    OK(glm_model_info(res, &ia));
    OK(glm_model_info(str, &ib));
    printf("[runtime] %s %s streaming the layers through 2 slots: resident weights %llu -> %llu "
           "bytes, prefetch hits %llu misses %llu, logits vs resident: max relative error "
           "%.3e\n",
           glm_arch_name(glm_model_config(res)->arch), plan, (unsigned long long)ia.weights_bytes,
           (unsigned long long)ib.weights_bytes, (unsigned long long)ib.prefetch_hits,
           (unsigned long long)ib.prefetch_misses, e);
    ck_assert_int_eq(ia.streaming, 0);
    ck_assert_int_eq(ib.streaming, 1);
    ck_assert(ib.weights_bytes < ia.weights_bytes);
    fflush(stdout);
    /* every layer of every pass (1 + steps) went through a slot */
    ck_assert_uint_eq(ib.prefetch_hits + ib.prefetch_misses,
                      (uint64_t)(1 + steps) * glm_model_config(res)->num_hidden_layers);
    /* A prefetch whose reads are still in flight when its layer starts is
     * counted as a miss: how many hit is a matter of speed (printed above,
     * never asserted); correctness must not depend on it. */
    ck_assert_msg(e <= 1e-6, "streamed model differs: %g", e);
    glm_session_free(sa);
    glm_session_free(sb);
    OK(glm_model_free(res));
    OK(glm_model_free(str));
    free(a);
    free(b);
    tx_device_close(dev);
}

START_TEST(test_streaming_glm5)
{
    streaming(M5_F32, "fp32");
    streaming(M5_F32, "golden"); /* streamed layers converted in their jobs */
}
END_TEST

START_TEST(test_streaming_glm4_int8)
{
    streaming(M4_INT8, "golden");
    streaming(M4_INT8, "fp16,expert=bf16");
}
END_TEST

START_TEST(test_streaming_when_too_big)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m;
    struct glm_load_options lo = {.max_weight_bytes = 64 << 10};
    OK(glm_model_load(dev, g_smd[M5_F32], &lo, &m));
    struct glm_model_info info;
    OK(glm_model_info(m, &info));
    ck_assert_int_eq(info.streaming, 1);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

/* ---- expert cache ----------------------------------------------------------------- */

/* The expert cache with `slots` slots (0: the default size) against the
 * resident model: the logits of a prefill and of decode steps must be the
 * same bits. */
static void expert_cache(int which, const char *plan, int slots, unsigned flags, int n)
{
    tx_device_t *dev = open_dev();
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_parse(plan, &p));
    OK(glm_plan_set(dev, &p));
    glm_model_t *res, *xm;
    OK(glm_model_load(dev, g_smd[which], NULL, &res));
    struct glm_load_options lo = {.flags = GLM_LOAD_EXPERT_CACHE | flags};
    OK(glm_model_load(dev, g_smd[which], &lo, &xm));
    struct glm_expert_cache_stats cs;
    OK(glm_model_expert_cache_stats(xm, &cs));
    if (slots) { /* reload with that many slots */
        OK(glm_model_free(xm));
        lo.expert_cache_bytes = (uint64_t)slots * cs.slot_bytes;
        OK(glm_model_load(dev, g_smd[which], &lo, &xm));
        OK(glm_model_expert_cache_stats(xm, &cs));
        ck_assert_uint_eq(cs.slots, (uint64_t)slots);
    }
    const struct glm_config *c = glm_model_config(res);
    int V = c->vocab_size;
    const int steps = 8;
    int32_t ids[16];
    random_ids(ids, n, V, 33);
    float *a = malloc(sizeof(float) * (size_t)n * V), *b = malloc(sizeof(float) * (size_t)n * V);
    glm_session_t *sa = session(res, 32, 0), *sb = session(xm, 32, 0);
    struct tx_device_counters d0, d1;
    struct glm_expert_cache_stats c0;
    OK(tx_device_counters(dev, &d0));
    OK(glm_model_expert_cache_stats(xm, &c0));
    OK(glm_eval(sa, ids, n, GLM_EVAL_ALL_LOGITS, a));
    OK(glm_eval(sb, ids, n, GLM_EVAL_ALL_LOGITS, b));
    int same = !memcmp(a, b, sizeof(float) * (size_t)n * V);
    for (int i = 0; i < steps; i++) {
        int32_t t = ids[i % n];
        OK(glm_eval(sa, &t, 1, 0, a));
        OK(glm_eval(sb, &t, 1, 0, b));
        same &= !memcmp(a, b, sizeof(float) * (size_t)V);
    }
    struct glm_model_info ia, ib;
    OK(glm_model_info(res, &ia));
    OK(glm_model_info(xm, &ib));
    OK(glm_model_expert_cache_stats(xm, &cs));
    OK(tx_device_counters(dev, &d1));
    /* the device counts the cache's uses from the table flags (1.6): the
     * resident model's MOE_FFN counts nothing */
    ck_assert_uint_eq(d1.dev.expert_cache_misses - d0.dev.expert_cache_misses,
                      cs.misses - c0.misses);
    ck_assert_uint_eq(d1.dev.expert_cache_hits - d0.dev.expert_cache_hits, cs.hits - c0.hits);
    printf("[runtime] %s %s expert cache %llu of %llu experts (%s%s): resident weights %llu -> "
           "%llu bytes; hits %llu misses %llu prefetches %llu (useful %llu) evictions %llu, "
           "%llu bytes read; logits %s\n",
           glm_arch_name(c->arch), plan, (unsigned long long)cs.slots,
           (unsigned long long)cs.experts, cs.policy ? "LRU" : "LRFU",
           cs.prefetch ? ", prefetch" : "", (unsigned long long)ia.weights_bytes,
           (unsigned long long)ib.weights_bytes, (unsigned long long)cs.hits,
           (unsigned long long)cs.misses, (unsigned long long)cs.prefetches,
           (unsigned long long)cs.prefetch_useful, (unsigned long long)cs.evictions,
           (unsigned long long)cs.bytes_read, same ? "bit-identical" : "DIFFER");
    fflush(stdout);
    ck_assert_int_eq(ia.streaming, 0);
    ck_assert_int_eq(ib.streaming, 2);
    ck_assert_msg(same, "expert cache output differs from the resident model");
    if (slots && (uint64_t)slots < cs.experts) {
        ck_assert(ib.weights_bytes < ia.weights_bytes);
        ck_assert_uint_gt(cs.misses, 0);
        ck_assert_uint_gt(cs.evictions, 0);
    }
    ck_assert_uint_eq(cs.decode_tokens, (uint64_t)steps);
    ck_assert_uint_le(cs.prefetch_useful, cs.prefetches);
    glm_session_free(sa);
    glm_session_free(sb);
    OK(glm_model_free(res));
    OK(glm_model_free(xm));
    free(a);
    free(b);
    tx_device_close(dev);
}

START_TEST(test_expert_cache_glm5)
{
    const struct glm_config *c;
    tx_device_t *dev = open_dev();
    glm_model_t *m;
    OK(glm_model_load(dev, g_smd[M5_F32], NULL, &m));
    c = glm_model_config(m);
    int K = c->num_experts_per_tok;
    OK(glm_model_free(m));
    tx_device_close(dev);
    expert_cache(M5_F32, "fp32", 0, 0, 12);       /* default size: every expert fits */
    expert_cache(M5_F32, "fp32", K + 1, 0, 12);   /* prefill in groups, misses, evictions */
    expert_cache(M5_F32, "golden", K + 2, 0, 12); /* converted copies in the slots */
    expert_cache(M5_F32, "fp32", K, GLM_LOAD_EXPERT_LRU | GLM_LOAD_EXPERT_NO_PREFETCH, 12);
}
END_TEST

/* Plan changes on a loaded expert cache: golden (INT8 copies of the FP32
 * experts in the slots) -> fp32 (stored only: laid out again, more slots)
 * -> golden again; each time bit-identical to the resident model. */
START_TEST(test_expert_cache_plan_change)
{
    tx_device_t *dev = open_dev();
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_set(dev, &p));
    glm_model_t *res, *xm;
    OK(glm_model_load(dev, g_smd[M5_F32], NULL, &res));
    struct glm_load_options lo = {.flags = GLM_LOAD_EXPERT_CACHE};
    OK(glm_model_load(dev, g_smd[M5_F32], &lo, &xm));
    struct glm_expert_cache_stats cs;
    OK(glm_model_expert_cache_stats(xm, &cs));
    uint64_t golden_slot = cs.slot_bytes;
    OK(glm_model_free(xm));
    lo.expert_cache_bytes = 3 * golden_slot;
    OK(glm_model_load(dev, g_smd[M5_F32], &lo, &xm));
    int V = glm_model_config(res)->vocab_size;
    int32_t ids[6];
    random_ids(ids, 6, V, 35);
    float *a = malloc(sizeof(float) * 6 * (size_t)V), *b = malloc(sizeof(float) * 6 * (size_t)V);
    const char *plans[3] = {"golden", "fp32", "golden"};
    uint64_t slots[3];
    for (int i = 0; i < 3; i++) {
        glm_plan_golden(&p);
        OK(glm_plan_parse(plans[i], &p));
        OK(glm_plan_set(dev, &p));
        glm_session_t *sa = session(res, 16, 0), *sb = session(xm, 16, 0);
        OK(glm_eval(sa, ids, 6, GLM_EVAL_ALL_LOGITS, a));
        OK(glm_eval(sb, ids, 6, GLM_EVAL_ALL_LOGITS, b));
        ck_assert_msg(!memcmp(a, b, sizeof(float) * 6 * (size_t)V), "plan %s differs", plans[i]);
        glm_session_free(sa);
        glm_session_free(sb);
        OK(glm_model_expert_cache_stats(xm, &cs));
        slots[i] = cs.slots;
    }
    printf("[runtime] expert cache across plan changes golden/fp32/golden: %llu/%llu/%llu slots, "
           "logits bit-identical\n",
           (unsigned long long)slots[0], (unsigned long long)slots[1],
           (unsigned long long)slots[2]);
    ck_assert_uint_eq(slots[0], 3);
    ck_assert_uint_gt(slots[1], slots[0]); /* FP32 stored: no copies, smaller slots */
    ck_assert_uint_eq(slots[2], 3);
    free(a);
    free(b);
    OK(glm_model_free(res));
    OK(glm_model_free(xm));
    tx_device_close(dev);
}
END_TEST

START_TEST(test_expert_cache_int8)
{
    expert_cache(M4_INT8, "golden", 3, 0, 6);
    expert_cache(M4_INT8, "fp16,expert=bf16", 4, 0, 6);
    expert_cache(MQ3_SKEW, "fp32", 6, 0, 8);
}
END_TEST

START_TEST(test_expert_cache_when_too_big)
{
    /* the non-expert part fits the bound: expert cache; it does not: layers */
    tx_device_t *dev = open_dev();
    glm_model_t *m;
    OK(glm_model_load(dev, g_smd[M5_F32], NULL, &m));
    struct glm_model_info info;
    OK(glm_model_info(m, &info));
    OK(glm_model_free(m));
    struct glm_load_options lo = {.max_weight_bytes = info.weights_bytes * 3 / 4};
    OK(glm_model_load(dev, g_smd[M5_F32], &lo, &m));
    OK(glm_model_info(m, &info));
    ck_assert_int_eq(info.streaming, 2);
    struct glm_expert_cache_stats cs;
    OK(glm_model_expert_cache_stats(m, &cs));
    ck_assert_uint_lt(cs.slots, cs.experts);
    OK(glm_model_free(m));
    lo.flags = GLM_LOAD_STREAM; /* asked for: whole layers */
    OK(glm_model_load(dev, g_smd[M5_F32], &lo, &m));
    OK(glm_model_info(m, &info));
    ck_assert_int_eq(info.streaming, 1);
    OK(glm_model_free(m));
    /* a cache smaller than top_k experts is refused, naming the minimum */
    struct glm_load_options lo2 = {.flags = GLM_LOAD_EXPERT_CACHE, .expert_cache_bytes = 4096};
    ck_assert_int_eq(glm_model_load(dev, g_smd[M5_F32], &lo2, &m), TX_ENOSPC);
    ck_assert_msg(strstr(tx_last_error(), "num_experts_per_tok"), "%s", tx_last_error());
    printf("[runtime] too small an expert cache: %s\n", tx_last_error());
    tx_device_close(dev);
}
END_TEST

/* ---- INT8 package: stored INT8 weights used in place ---------------------------- */

START_TEST(test_int8_package)
{
    tx_device_t *dev = open_dev();
    glm_model_t *m = load(dev, M4_INT8, "golden");
    glm_session_t *s = session(m, 16, 0);
    int32_t ids[4] = {5, 6, 7, 8};
    OK(glm_eval(s, ids, 4, 0, NULL));
    struct glm_model_info info;
    OK(glm_model_info(m, &info));
    /* exported with the golden plan: the stored types are those the plan
     * executes, nothing is converted */
    ck_assert_uint_eq(info.converted_bytes, 0);
    ck_assert_int_eq(info.stored.precision[GLM_MLP], INT8_MIXED);
    ck_assert_int_eq(info.stored.precision[GLM_ATTENTION], FP16);
    glm_session_free(s);
    OK(glm_model_free(m));
    tx_device_close(dev);
}
END_TEST

static Suite *runtime_suite(void)
{
    Suite *s = suite_create("runtime");
    TCase *tc = tcase_create("glm");
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fp32_glm5);
    tcase_add_test(tc, test_fp32_glm4);
    tcase_add_test(tc, test_fp32_qwen3_moe);
    tcase_add_test(tc, test_fp32_glm5_shared_bias_chunked);
    tcase_add_test(tc, test_fp32_dsv3);
    tcase_add_test(tc, test_fp32_dsv3_attn_factor_chunked);
    tcase_add_test(tc, test_decode_equals_prefill_glm5);
    tcase_add_test(tc, test_decode_equals_prefill_glm4);
    tcase_add_test(tc, test_decode_equals_prefill_dsv3);
    tcase_add_test(tc, test_batched_decode);
    tcase_add_test(tc, test_sampling);
    tcase_add_test(tc, test_padding_never_sampled);
    tcase_add_test(tc, test_batched_decode_guarantee);
    tcase_add_test(tc, test_batched_decode_bit_identical);
    tcase_add_test(tc, test_batch_sampling_each);
    tcase_add_test(tc, test_sampling_refused);
    tcase_add_test(tc, test_sampler_order_penalties);
    tcase_add_test(tc, test_stop_tokens);
    tcase_add_test(tc, test_ignore_eos);
    tcase_add_test(tc, test_chat_template);
    tcase_add_test(tc, test_chat_format_from_template);
    tcase_add_test(tc, test_load_balance);
    tcase_add_test(tc, test_balance_reset_determinism);
    tcase_add_test(tc, test_moe_yaml);
    tcase_add_test(tc, test_memory_labels);
    tcase_add_test(tc, test_malformed_packages);
    tcase_add_test(tc, test_int8_package);
    tcase_add_test(tc, test_streaming_glm5);
    tcase_add_test(tc, test_streaming_glm4_int8);
    tcase_add_test(tc, test_streaming_when_too_big);
    tcase_add_test(tc, test_expert_cache_glm5);
    tcase_add_test(tc, test_expert_cache_int8);
    tcase_add_test(tc, test_expert_cache_plan_change);
    tcase_add_test(tc, test_expert_cache_when_too_big);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(runtime_suite());
}
