/* SPDX-License-Identifier: MIT */
/*
 * MTP speculative decoding (issue 39, docs/speculative-decoding.md) on the
 * trained models of data/models (GLM-4.5: GQA K/V cache; GLM-5.1: latent
 * MLA cache + DSA indexer cache), exported in BF16 with their MTP layer:
 *   - rollback per cache type: rows written past a position and rolled
 *     back (glm_session_truncate, what a rejected draft leaves) change
 *     nothing: the logits of the tokens written over them are bit-identical
 *     to a session that never saw them, for K caches f32, f16, bf16, q8_0,
 *     q4_0 (and GLM-5.1's q8_0 indexer keys), past the DSA top-k;
 *   - acceptance 100% (GLM_SPEC_PERFECT) and 0% (GLM_SPEC_WRONG), and the
 *     MTP drafts: greedy tokens equal to non-speculative decoding;
 *   - --draft-p-min (spec_p_min): fewer drafts, the same tokens;
 *   - the sampled distribution: 600 seeds, temperature 1, k = 2: the
 *     second generated token given the most frequent first one against
 *     the softmax of glm_eval's logits, chi-square at p = 0.001 (bins of
 *     expected count < 5 merged), and the total variation distance over
 *     those bins below sqrt(bins / n) / 2 + sqrt(ln(1000) / 2n) (mean
 *     bound + McDiarmid at 0.001).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm.h>
#include <tx/tx_device.h>
#include <tx/tx_error.h>

#include "tx_test_emu.h"
#include "tx_test_tmp.h"
#include "tx_test_main.h"

static struct tx_test_emu emu;
static char t_dir[64];
static const char *const models[] = {"glm45-kjv", "glm51-kjv"};
static char pkgs[2][256];
static tx_device_t *dev;

/* "And God said unto Moses, ..." in the models' ids: any fixed ids do */
static void prompt_ids(int32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(97 + (i * 37) % 300);
}

/* the device of this test (each test opens its own: CK_FORK runs it in a
 * child of the fixture's process) */
static glm_model_t *load_flags(int i, int mtp, unsigned flags)
{
    if (!dev)
        ck_assert_msg(tx_device_open(emu.spec, &dev) == TX_OK, "%s", tx_last_error());
    struct glm_load_options o;
    memset(&o, 0, sizeof(o));
    o.flags = (mtp ? GLM_LOAD_MTP : 0) | flags;
    glm_model_t *m = NULL;
    ck_assert_msg(glm_model_load(dev, pkgs[i], &o, &m) == TX_OK, "load %s: %s", pkgs[i],
                  tx_last_error());
    ck_assert_int_eq(glm_model_has_mtp(m), mtp);
    return m;
}

static glm_model_t *load(int i, int mtp)
{
    return load_flags(i, mtp, 0);
}

/* rows past the position rolled back leave nothing behind, per cache type */
START_TEST(rollback_each_cache_type)
{
    static const glm_cache_type_t types[] = {GLM_CACHE_F32, GLM_CACHE_F16, GLM_CACHE_BF16,
                                             GLM_CACHE_Q8_0, GLM_CACHE_Q4_0};
    glm_model_t *m = load(_i, 0);
    int V = glm_model_config(m)->vocab_size;
    enum { PRE = 100, JUNK = 5, N = 4 };
    int32_t ids[PRE + N], junk[JUNK];
    prompt_ids(ids, PRE + N);
    for (int j = 0; j < JUNK; j++)
        junk[j] = (int32_t)(1000 + 91 * j);
    float *la = malloc((size_t)N * V * 4), *lb = malloc((size_t)N * V * 4);
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        struct glm_session_options so;
        memset(&so, 0, sizeof(so));
        so.n_ctx = 256;
        so.cache_type_k = types[t];
        so.cache_type_v = types[t];
        glm_session_t *a = NULL, *b = NULL;
        ck_assert_msg(glm_session_create(m, &so, &a) == TX_OK, "%s %s: %s", models[_i],
                      glm_cache_type_name(types[t]), tx_last_error());
        ck_assert_int_eq(glm_session_create(m, &so, &b), TX_OK);
        /* a: prefix, rejected rows, rollback, the kept tokens */
        ck_assert_int_eq(glm_eval(a, ids, PRE, 0, NULL), TX_OK);
        ck_assert_int_eq(glm_eval(a, junk, JUNK, 0, NULL), TX_OK);
        ck_assert_int_eq(glm_session_truncate(a, PRE), TX_OK);
        ck_assert_int_eq(glm_eval(a, ids + PRE, N, GLM_EVAL_ALL_LOGITS, la), TX_OK);
        /* b: the same passes without the rejected rows */
        ck_assert_int_eq(glm_eval(b, ids, PRE, 0, NULL), TX_OK);
        ck_assert_int_eq(glm_eval(b, ids + PRE, N, GLM_EVAL_ALL_LOGITS, lb), TX_OK);
        ck_assert_msg(!memcmp(la, lb, (size_t)N * V * 4),
                      "%s, K cache %s: logits after a rollback differ", models[_i],
                      glm_cache_type_name(types[t]));
        glm_session_free(a);
        glm_session_free(b);
    }
    free(la);
    free(lb);
    glm_model_free(m);
}
END_TEST

static float g_p_min; /* glm_generate_params.spec_p_min of generate() */

static int generate(glm_session_t *s, int k, int mode, const struct glm_sampling *smp, int n,
                    int32_t *out, struct glm_spec_stats *st)
{
    int32_t ids[24];
    prompt_ids(ids, 24);
    glm_session_reset(s);
    struct glm_generate_params p;
    memset(&p, 0, sizeof(p));
    p.prompt = ids;
    p.n_prompt = 24;
    p.n_predict = n;
    p.sampling = *smp;
    p.flags = GLM_GEN_IGNORE_EOS;
    p.spec_draft_max = k;
    p.spec_mode = mode;
    p.spec_p_min = g_p_min;
    struct glm_spec_stats a;
    glm_session_spec_stats(s, &a);
    int got = 0;
    ck_assert_msg(glm_generate(s, &p, out, n, &got, NULL) == TX_OK, "generate: %s",
                  tx_last_error());
    ck_assert_int_eq(got, n);
    if (st) {
        glm_session_spec_stats(s, st);
        st->drafted -= a.drafted;
        st->accepted -= a.accepted;
        st->rounds -= a.rounds;
    }
    return got;
}

/* 4 tokens after a 4-token prompt with 2 drafts (the error checks) */
static void short_params(struct glm_generate_params *p, const int32_t *ids)
{
    memset(p, 0, sizeof(*p));
    p->prompt = ids;
    p->n_prompt = 4;
    p->n_predict = 4;
    p->spec_draft_max = 2;
}

/* acceptance 100% and 0% test modes, and the MTP drafts: greedy tokens as
 * non-speculative decoding */
START_TEST(acceptance_modes_greedy_exact)
{
    glm_model_t *m = load(_i, 1);
    glm_session_t *s = NULL;
    ck_assert_int_eq(glm_session_create(m, NULL, &s), TX_OK);
    struct glm_sampling g;
    memset(&g, 0, sizeof(g)); /* greedy */
    enum { N = 40 };
    int32_t ref[N], out[N];
    struct glm_spec_stats st;
    generate(s, 0, 0, &g, N, ref, NULL);
    /* the session afterwards holds what it holds without drafts */
    const int pos_ref = glm_session_pos(s);
    for (int k = 1; k <= 4; k++) {
        generate(s, k, GLM_SPEC_PERFECT | GLM_SPEC_NO_ADAPT, &g, N, out, &st);
        ck_assert(!memcmp(ref, out, sizeof(ref)));
        ck_assert_uint_gt(st.drafted, 0);
        ck_assert_uint_eq(st.accepted, st.drafted); /* 100% */
        generate(s, k, GLM_SPEC_WRONG | GLM_SPEC_NO_ADAPT, &g, N, out, &st);
        ck_assert(!memcmp(ref, out, sizeof(ref)));
        ck_assert_uint_gt(st.drafted, 0);
        ck_assert_uint_eq(st.accepted, 0); /* 0% */
        generate(s, k, GLM_SPEC_MTP, &g, N, out, &st);
        ck_assert_msg(!memcmp(ref, out, sizeof(ref)), "%s k=%d: MTP drafts changed the output",
                      models[_i], k);
        ck_assert_int_eq(glm_session_pos(s), pos_ref);
        fprintf(stderr, "[spec] %s k=%d: MTP acceptance %.1f%% over %llu drafts\n", models[_i], k,
                st.drafted ? 100.0 * (double)st.accepted / (double)st.drafted : 0.0,
                (unsigned long long)st.drafted);
    }
    /* no MTP layer loaded: a clear error */
    glm_session_free(s);
    glm_model_free(m);
    m = load(_i, 0);
    ck_assert_int_eq(glm_session_create(m, NULL, &s), TX_OK);
    int32_t ids[4] = {1, 2, 3, 4};
    struct glm_generate_params p;
    short_params(&p, ids);
    ck_assert_int_eq(glm_generate(s, &p, NULL, 0, NULL, NULL), TX_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(tx_last_error(), "GLM_LOAD_MTP"));
    p.spec_draft_max = GLM_SPEC_MAX_DRAFT + 1;
    ck_assert_int_eq(glm_generate(s, &p, NULL, 0, NULL, NULL), TX_EINVAL);
    glm_session_free(s);
    glm_model_free(m);
}
END_TEST

/* --draft-p-min (spec_p_min): drafts the MTP layer is less sure of than
 * p_min are dropped (p_min 1: all but certain ones, so fewer drafts than
 * with none dropped) and the output stays the non-speculative one; values
 * that are not probabilities are refused */
START_TEST(draft_p_min)
{
    glm_model_t *m = load(_i, 1);
    glm_session_t *s = NULL;
    ck_assert_int_eq(glm_session_create(m, NULL, &s), TX_OK);
    struct glm_sampling g;
    memset(&g, 0, sizeof(g));
    enum { N = 40 };
    int32_t ref[N], out[N];
    struct glm_spec_stats st;
    generate(s, 0, 0, &g, N, ref, NULL);
    static const float pm[] = {-1.0f, 0.0f, 0.5f, 1.0f};
    uint64_t drafted[4];
    for (int i = 0; i < 4; i++) {
        g_p_min = pm[i];
        generate(s, 3, GLM_SPEC_MTP, &g, N, out, &st);
        ck_assert_msg(!memcmp(ref, out, sizeof(ref)), "%s p_min %g: output changed", models[_i],
                      (double)pm[i]);
        ck_assert_uint_gt(st.rounds, 0);
        drafted[i] = st.drafted;
        fprintf(stderr, "[spec] %s k=3 p_min %g: %llu drafts in %llu rounds, %llu accepted\n",
                models[_i], (double)pm[i], (unsigned long long)st.drafted,
                (unsigned long long)st.rounds, (unsigned long long)st.accepted);
    }
    ck_assert_uint_lt(drafted[3], drafted[0]);
    ck_assert_uint_le(drafted[2], drafted[0]);
    int32_t ids[4] = {1, 2, 3, 4};
    struct glm_generate_params p;
    short_params(&p, ids);
    p.spec_p_min = 1.5f;
    ck_assert_int_eq(glm_generate(s, &p, NULL, 0, NULL, NULL), TX_EINVAL);
    ck_assert_ptr_nonnull(strstr(tx_last_error(), "spec_p_min"));
    p.spec_p_min = NAN;
    ck_assert_int_eq(glm_generate(s, &p, NULL, 0, NULL, NULL), TX_EINVAL);
    g_p_min = 0.0f;
    glm_session_free(s);
    glm_model_free(m);
}
END_TEST

/* continuous batching (glm_decode_batch_spec): two sessions decoding
 * together, the second one's prompt arriving as prefill chunks of the same
 * steps: each gets the tokens non-speculative decoding gives it alone
 * (batch-invariant kernels: bit-identical rows whatever the batch) */
START_TEST(batch_spec_exact)
{
    glm_model_t *m = load_flags(_i, 1, GLM_LOAD_BATCH_INVARIANT);
    enum { NP = 24, N = 40, K = 3, STEP = GLM_SPEC_MAX_DRAFT + 1 };
    int32_t pa[NP], pb[NP], ref[2][N], got[2][N + STEP];
    prompt_ids(pa, NP);
    for (int i = 0; i < NP; i++)
        pb[i] = (int32_t)(200 + (i * 53) % 700);
    glm_session_t *s[2];
    ck_assert_int_eq(glm_session_create(m, NULL, &s[0]), TX_OK);
    ck_assert_int_eq(glm_session_create(m, NULL, &s[1]), TX_OK);
    struct glm_sampling g;
    memset(&g, 0, sizeof(g));
    for (int i = 0; i < 2; i++) { /* the reference: alone, no drafts */
        struct glm_generate_params p;
        memset(&p, 0, sizeof(p));
        p.prompt = i ? pb : pa;
        p.n_prompt = NP;
        p.n_predict = N;
        p.n_stop = -1;
        int n = 0;
        ck_assert_int_eq(glm_generate(s[i], &p, ref[i], N, &n, NULL), TX_OK);
        ck_assert_int_eq(n, N);
        glm_session_reset(s[i]);
    }
    /* a: its prompt but the last token; b: in chunks of 7 while a decodes */
    ck_assert_int_eq(glm_eval(s[0], pa, NP - 1, 0, NULL), TX_OK);
    int have[2] = {0, 0}, fed_b = 0, steps = 0;
    int32_t cur[2] = {pa[NP - 1], pb[NP - 1]};
    struct glm_sampling smp[2] = {g, g};
    int32_t next[2 * STEP];
    int n_next[2];
    while (have[0] < N || have[1] < N) {
        glm_session_t *ds[2];
        int32_t di[2];
        int nd = 0, map[2];
        for (int i = 0; i < 2; i++)
            if (have[i] < N && (i == 0 || fed_b == NP - 1)) {
                ds[nd] = s[i];
                di[nd] = cur[i];
                map[nd++] = i;
            }
        struct glm_prefill_chunk ch = {s[1], pb + fed_b, NP - 1 - fed_b < 7 ? NP - 1 - fed_b : 7};
        int nc = fed_b < NP - 1;
        ck_assert_msg(glm_decode_batch_spec(ds, di, nd, smp, K, next, n_next, &ch, nc) == TX_OK,
                      "%s", tx_last_error());
        fed_b += nc ? ch.n : 0;
        for (int t = 0; t < nd; t++) {
            int i = map[t];
            ck_assert_int_ge(n_next[t], 1);
            ck_assert_int_le(n_next[t], K + 1);
            memcpy(got[i] + have[i], next + t * STEP, (size_t)n_next[t] * 4);
            have[i] += n_next[t];
            cur[i] = next[t * STEP + n_next[t] - 1];
        }
        steps++;
    }
    for (int i = 0; i < 2; i++)
        ck_assert_msg(!memcmp(got[i], ref[i], sizeof(ref[i])),
                      "%s: session %d's tokens differ from decoding alone", models[_i], i);
    struct glm_spec_stats st;
    glm_session_spec_stats(s[0], &st);
    fprintf(stderr, "[spec] %s batched: %d steps for 2 x %d tokens, session 0 acceptance %.1f%%\n",
            models[_i], steps, N,
            st.drafted ? 100.0 * (double)st.accepted / (double)st.drafted : 0.0);
    ck_assert_uint_gt(st.accepted, 0);
    glm_session_free(s[0]);
    glm_session_free(s[1]);
    glm_model_free(m);
}
END_TEST

/* chi-square critical value at p = 0.001 for df degrees of freedom
 * (Wilson-Hilferty) */
static double chi2_crit(int df)
{
    const double z = 3.0902; /* the 0.999 quantile of N(0, 1) */
    double a = 2.0 / (9.0 * df);
    double c = 1.0 - a + z * sqrt(a);
    return df * c * c * c;
}

/* the sampled output has the target distribution */
START_TEST(sampled_distribution)
{
    glm_model_t *m = load(1, 1);
    int V = glm_model_config(m)->vocab_size;
    glm_session_t *s = NULL;
    ck_assert_int_eq(glm_session_create(m, NULL, &s), TX_OK);
    struct glm_sampling smp;
    memset(&smp, 0, sizeof(smp));
    smp.temperature = 1.0f;
    smp.top_p = 1.0f;
    enum { DRAWS = 600 };
    int32_t (*draw)[2] = calloc(DRAWS, sizeof(*draw));
    int *cnt1 = calloc((size_t)V, sizeof(int));
    struct glm_spec_stats st, tot;
    memset(&tot, 0, sizeof(tot));
    for (int i = 0; i < DRAWS; i++) {
        smp.seed = 1000 + (uint64_t)i;
        int32_t out[3];
        generate(s, 2, GLM_SPEC_MTP | GLM_SPEC_NO_ADAPT, &smp, 3, out, &st);
        tot.drafted += st.drafted;
        tot.accepted += st.accepted;
        draw[i][0] = out[0];
        draw[i][1] = out[1];
        cnt1[out[0]]++;
    }
    int x1 = 0;
    for (int v = 1; v < V; v++)
        if (cnt1[v] > cnt1[x1])
            x1 = v;
    /* the target: softmax of the logits after prompt + x1 */
    int32_t ids[25];
    prompt_ids(ids, 24);
    ids[24] = x1;
    float *lg = malloc((size_t)25 * V * 4);
    glm_session_reset(s);
    ck_assert_int_eq(glm_eval(s, ids, 25, GLM_EVAL_ALL_LOGITS, lg), TX_OK);
    const float *row = lg + (size_t)24 * V;
    int Vs = glm_model_sample_vocab(m);
    double mx = -INFINITY, z = 0;
    for (int v = 0; v < Vs; v++)
        mx = row[v] > mx ? row[v] : mx;
    double *p = calloc((size_t)V, sizeof(double));
    for (int v = 0; v < Vs; v++)
        z += (p[v] = exp(row[v] - mx));
    int n = 0, *c2 = calloc((size_t)V, sizeof(int));
    for (int i = 0; i < DRAWS; i++)
        if (draw[i][0] == x1) {
            c2[draw[i][1]]++;
            n++;
        }
    ck_assert_int_ge(n, 60);
    double chi = 0, tv = 0, pe = 0;
    int df = -1, oe = 0;
    for (int v = 0; v < V; v++) {
        p[v] /= z;
        if (p[v] * n >= 5) {
            double e = p[v] * n;
            chi += (c2[v] - e) * (c2[v] - e) / e;
            tv += fabs(p[v] - (double)c2[v] / n);
            df++;
        } else {
            pe += p[v];
            oe += c2[v];
        }
    }
    if (pe * n > 0) { /* the merged bin */
        chi += (oe - pe * n) * (oe - pe * n) / (pe * n);
        tv += fabs(pe - (double)oe / n);
        df++;
    }
    tv /= 2;
    /* the TV over the df + 1 bins: its mean is at most sqrt(bins / n) / 2
     * (Cauchy-Schwarz) and it exceeds the mean by more than
     * sqrt(ln(1000) / (2 n)) with probability < 0.001 (McDiarmid) */
    double tv_bound = 0.5 * sqrt((df + 1.0) / n) + sqrt(log(1000.0) / (2.0 * n));
    fprintf(stderr,
            "[spec] sampled: %d of %d draws after token %d: chi-square %.2f (df %d, critical "
            "%.2f at p = 0.001), TV over the bins %.3f (bound %.3f); MTP acceptance %.1f%%\n",
            n, DRAWS, x1, chi, df, chi2_crit(df > 0 ? df : 1), tv, tv_bound,
            tot.drafted ? 100.0 * (double)tot.accepted / (double)tot.drafted : 0.0);
    ck_assert_int_ge(df, 1);
    ck_assert_msg(chi < chi2_crit(df), "chi-square %.2f >= %.2f (df %d)", chi, chi2_crit(df), df);
    ck_assert_msg(tv < tv_bound, "total variation %.3f >= %.3f", tv, tv_bound);
    free(p);
    free(c2);
    free(lg);
    free(cnt1);
    free(draw);
    glm_session_free(s);
    glm_model_free(m);
}
END_TEST

static void setup(void)
{
    snprintf(t_dir, sizeof(t_dir), "/tmp/tx-spec-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(t_dir));
    ck_assert_int_eq(tx_test_emu_start(&emu, "512M", "--cores", "2", NULL), 0);
    char bin[256];
    tx_test_bin("glm-export", bin, sizeof(bin));
    for (int i = 0; i < 2; i++) {
        snprintf(pkgs[i], sizeof(pkgs[i]), "%s/%s.smd", t_dir, models[i]);
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "%s --input data/models/%s --output '%s' --quant bf16 --quiet",
                 bin, models[i], pkgs[i]);
        ck_assert_int_eq(system(cmd), 0);
    }
}

static void teardown(void)
{
    tx_test_emu_stop(&emu);
    tx_test_rmtree(t_dir);
}

int main(void)
{
    Suite *s = suite_create("spec");
    TCase *tc = tcase_create("trained");
    tcase_set_timeout(tc, 900);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, rollback_each_cache_type, 0, 2);
    tcase_add_loop_test(tc, acceptance_modes_greedy_exact, 0, 2);
    tcase_add_test(tc, sampled_distribution);
    tcase_add_loop_test(tc, draft_p_min, 0, 2);
    tcase_add_loop_test(tc, batch_spec_exact, 0, 2);
    suite_add_tcase(s, tc);
    return tx_test_run(s);
}
