/* SPDX-License-Identifier: MIT */
/*
 * glm-perplexity and the trained models (issue 34, docs/trained-models.md):
 *   - the perplexity / KLD arithmetic against values computed by hand;
 *   - fidelity: each model of data/models exported with --quant none and
 *     run by glm-inference in FP32 reproduces the logits its training
 *     script stored (reference-logits.bin), cosine >= 0.99999 per position;
 *   - glm-perplexity's PPL over the first held-out chunk equals the PPL of
 *     the trainer's own logits;
 *   - the golden plan's mean KLD against FP32 on a short text is <= 0.01;
 *   - a base file of another text or vocabulary is refused;
 *   - an FP8 checkpoint (glm-synth --fp8, GLM-5.1): its golden package's
 *     KLD and logit cosine against the dequantised original (the FP8
 *     package under the fp8 plan, exact: test_fp8_model) are reported
 *     (issue 38 item 3);
 *   - the models' tokenizer.json gives the ids and decoded text that
 *     transformers.js's tokenizers give (data/models/tokenizer-reference-
 *     encodings.jsonl, made by scripts/train/hf_reference_encodings.mjs).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/tx_tokenizer.h>

#include "common/ppl_stats.h"
#include "test_model_util.h"
#include "tx_test_emu.h"
#include "tx_test_main.h"

static struct tx_test_emu emu;
static char t_dir[64];

static const char *tpath(const char *name)
{
    static char b[16][400];
    static int k;
    char *p = b[k++ & 15];
    snprintf(p, 400, "%s/%s", t_dir, name);
    return p;
}

/* runs "BIN ARGS > out 2> err" (BIN a tool of the build tree); its exit status */
static int tool(const char *name, const char *args, const char *out)
{
    char bin[256];
    tx_test_bin(name, bin, sizeof(bin));
    char *cmd = NULL;
    ck_assert_int_gt(asprintf(&cmd, "%s %s > '%s' 2> '%s.err'", bin, args, out, out), 0);
    int rc = system(cmd);
    free(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* ---- the arithmetic, by hand ---------------------------------------------- */

START_TEST(ppl_hand_computed)
{
    /* two scored positions: uniform over 3 (token 1: nll ln 3), then
     * p = 1/8, 3/8, 4/8 (token 2: nll ln 2): PPL = exp((ln 3 + ln 2) / 2) =
     * sqrt(6); the +/- is PPL * sqrt(var / (n - 1)) = sqrt(6) ln(1.5) / 2 */
    const float rows[2][3] = {{0.0f, 0.0f, 0.0f}, {0.0f, logf(3.0f), logf(4.0f)}};
    const int next[2] = {1, 2};
    struct ppl_acc a = {0};
    double lp[3];
    for (int i = 0; i < 2; i++) {
        ppl_log_softmax(rows[i], 3, lp);
        ppl_acc_add(&a, -lp[next[i]]);
    }
    ck_assert_double_eq_tol(ppl_acc_ppl(&a), sqrt(6.0), 1e-6);
    ck_assert_double_eq_tol(ppl_acc_ppl_err(&a), sqrt(6.0) * log(1.5) / 2.0, 1e-6);
}
END_TEST

START_TEST(kld_hand_computed)
{
    /* base p = (1/2, 1/2), this q = (1/4, 3/4), next token 1:
     * KLD = 1/2 ln(2) + 1/2 ln(2/3) = ln(4/3) / 2; top tokens 0 vs 1;
     * dp = 3/4 - 1/2 */
    const double lb[2] = {log(0.5), log(0.5)}, lq[2] = {log(0.25), log(0.75)};
    struct kld_sample s;
    kld_sample_of(lb, lq, 2, 1, &s);
    ck_assert_double_eq_tol(s.kld, log(4.0 / 3.0) / 2.0, 1e-12);
    ck_assert_int_eq(s.same_top, 0);
    ck_assert_double_eq_tol(s.dp, 0.25, 1e-12);
    /* the same distribution twice: KLD 0, same top */
    struct kld_stats st = {0};
    ck_assert_int_eq(kld_stats_add(&st, &s), 0);
    kld_sample_of(lq, lq, 2, 0, &s);
    ck_assert_double_eq_tol(s.kld, 0.0, 1e-15);
    ck_assert_int_eq(s.same_top, 1);
    ck_assert_int_eq(kld_stats_add(&st, &s), 0);
    struct kld_summary sum;
    ck_assert_int_eq(kld_stats_summary(&st, &sum), 0);
    ck_assert_double_eq_tol(sum.kld_mean, log(4.0 / 3.0) / 4.0, 1e-12);
    ck_assert_double_eq_tol(sum.kld_max, log(4.0 / 3.0) / 2.0, 1e-12);
    ck_assert_double_eq_tol(sum.same_top, 0.5, 1e-12);
    ck_assert_double_eq_tol(sum.dp_rms, sqrt(0.25 * 0.25 / 2.0), 1e-12);
    kld_stats_free(&st);
}
END_TEST

/* ---- the trained models --------------------------------------------------- */

static const char *const models[] = {"glm45-kjv", "glm51-kjv"};

/* the reference tokens the trainer stored, comma-separated; their count */
static char *ref_tokens(const char *model, int *n)
{
    char p[256];
    snprintf(p, sizeof(p), "data/models/%s/reference-tokens.txt", model);
    char *s = tm_read(p, NULL);
    char *nl = strchr(s, '\n');
    if (nl)
        *nl = 0;
    *n = 1;
    for (char *c = s; *c; c++)
        *n += *c == ',';
    return s;
}

static float *ref_logits(const char *model, int n, int *vocab)
{
    char p[256];
    size_t len;
    snprintf(p, sizeof(p), "data/models/%s/reference-logits.bin", model);
    float *l = (float *)tm_read(p, &len);
    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(len % ((size_t)n * 4), 0);
    *vocab = (int)(len / ((size_t)n * 4));
    return l;
}

/* ---- the tokenizer, against transformers.js --------------------------------- */

START_TEST(tokenizer_matches_hf)
{
    char path[256];
    snprintf(path, sizeof(path), "data/models/%s/tokenizer.json", models[_i]);
    struct tx_tokenizer *tok = NULL;
    char err[512];
    ck_assert_msg(tx_tokenizer_load_file(path, &tok, err, sizeof(err)) == 0, "%s: %s", path, err);
    char *data = tm_read("data/models/tokenizer-reference-encodings.jsonl", NULL);
    ck_assert_ptr_nonnull(data);
    int lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_object *o = json_tokener_parse(line), *jt, *ji, *jd;
        ck_assert_ptr_nonnull(o);
        ck_assert(json_object_object_get_ex(o, "text", &jt));
        ck_assert(json_object_object_get_ex(o, "ids", &ji));
        ck_assert(json_object_object_get_ex(o, "decoded", &jd));
        int32_t *ids = NULL;
        size_t n = 0;
        ck_assert_msg(tx_tokenizer_encode(tok, json_object_get_string(jt),
                                          (size_t)json_object_get_string_len(jt), 0, &ids, &n, err,
                                          sizeof(err)) == 0,
                      "%s", err);
        size_t nw = json_object_array_length(ji);
        int same = n == nw;
        for (size_t i = 0; same && i < n; i++)
            same = ids[i] == json_object_get_int(json_object_array_get_idx(ji, i));
        ck_assert_msg(same, "line %d (\"%.60s\"): %zu ids, transformers.js %zu, or others",
                      lines + 1, json_object_get_string(jt), n, nw);
        char *text = NULL;
        size_t len;
        ck_assert_int_eq(tx_tokenizer_decode(tok, ids, n, 0, &text, &len, err, sizeof(err)), 0);
        ck_assert_str_eq(text, json_object_get_string(jd));
        free(text);
        free(ids);
        json_object_put(o);
        lines++;
    }
    ck_assert_int_ge(lines, 40);
    free(data);
    tx_tokenizer_free(tok);
}
END_TEST

/* glm-export --quant Q of the model into the test directory */
static const char *export_model(const char *model, const char *quant)
{
    char *args = NULL;
    const char *out = tpath(quant);
    char pkg[400];
    snprintf(pkg, sizeof(pkg), "%s-%s.smd", out, model);
    ck_assert_int_gt(asprintf(&args, "--input data/models/%s --quant %s --output '%s' --quiet",
                              model, quant, pkg),
                     0);
    int rc = tool("glm-export", args, tpath("export.log"));
    free(args);
    ck_assert_int_eq(rc, 0);
    return strdup(pkg);
}

START_TEST(fidelity_fp32)
{
    const char *model = models[_i];
    int n, vocab;
    char *toks = ref_tokens(model, &n);
    float *ref = ref_logits(model, n, &vocab);
    char *pkg = (char *)export_model(model, "none");
    char *args = NULL;
    ck_assert_int_gt(asprintf(&args,
                              "--checkpoint '%s' --device %s --precision fp32 --tokens %s -n 0 "
                              "--logits '%s'",
                              pkg, emu.spec, toks, tpath("logits")),
                     0);
    int rc = tool("glm-inference", args, tpath("inference.log"));
    free(args);
    ck_assert_msg(rc == 0, "glm-inference failed: %s",
                  (char *)tm_read(tpath("inference.log.err"), NULL));
    size_t len;
    float *got = (float *)tm_read(tpath("logits"), &len);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(len, (size_t)n * vocab * 4);
    double worst = 2.0;
    for (int t = 0; t < n; t++) {
        double d = 0, a = 0, b = 0;
        for (int v = 0; v < vocab; v++) {
            double x = got[(size_t)t * vocab + v], y = ref[(size_t)t * vocab + v];
            d += x * y;
            a += x * x;
            b += y * y;
        }
        double c = d / sqrt(a * b);
        if (c < worst)
            worst = c;
    }
    printf("%s: FP32 logits vs the trainer's over %d positions: min cosine %.8f\n", model, n,
           worst);
    ck_assert_msg(worst >= 0.99999, "%s: min cosine %.8f < 0.99999", model, worst);
    free(got);
    free(ref);
    free(toks);
    free(pkg);
}
END_TEST

/* "Final estimate: PPL = X +/- Y" of a glm-perplexity output */
static double final_ppl(const char *out)
{
    char *s = tm_read(out, NULL);
    ck_assert_ptr_nonnull(s);
    const char *p = strstr(s, "Final estimate: PPL = ");
    ck_assert_msg(p != NULL, "no final estimate in %s", s);
    double v = strtod(p + strlen("Final estimate: PPL = "), NULL);
    free(s);
    return v;
}

START_TEST(ppl_matches_trainer)
{
    /* one chunk of the n reference tokens (the first n of the held-out
     * text): glm-perplexity scores positions n/2 .. n-2; the trainer's
     * logits give the same PPL */
    const char *model = models[_i];
    int n, vocab;
    char *toks = ref_tokens(model, &n);
    float *ref = ref_logits(model, n, &vocab);
    int *tok = calloc((size_t)n, sizeof(int));
    char *p = toks;
    for (int i = 0; i < n; i++) {
        tok[i] = (int)strtol(p, &p, 10);
        if (*p == ',')
            p++;
    }
    double nll = 0;
    int cnt = 0;
    for (int j = n / 2; j < n - 1; j++) {
        const float *r = ref + (size_t)j * vocab;
        double mx = r[0], sum = 0;
        for (int v = 1; v < vocab; v++)
            mx = r[v] > mx ? r[v] : mx;
        for (int v = 0; v < vocab; v++)
            sum += exp(r[v] - mx);
        nll += mx + log(sum) - r[tok[j + 1]];
        cnt++;
    }
    double want = exp(nll / cnt);
    char *pkg = (char *)export_model(model, "none");
    char *args = NULL;
    ck_assert_int_gt(asprintf(&args,
                              "-m '%s' --device %s --precision fp32 -f data/corpus/test.txt -c %d "
                              "--chunks 1",
                              pkg, emu.spec, n),
                     0);
    int rc = tool("glm-perplexity", args, tpath("ppl.out"));
    free(args);
    ck_assert_msg(rc == 0, "glm-perplexity failed: %s",
                  (char *)tm_read(tpath("ppl.out.err"), NULL));
    double got = final_ppl(tpath("ppl.out"));
    printf("%s: PPL of the first %d held-out tokens: glm-perplexity %.4f, trainer %.4f\n", model, n,
           got, want);
    ck_assert_double_eq_tol(got, want, want * 1e-3);
    free(tok);
    free(ref);
    free(toks);
    free(pkg);
}
END_TEST

START_TEST(golden_kld_bound)
{
    /* GLM-5.1 (the demo model): 4 chunks of 128 held-out tokens */
    const char *model = models[1];
    char *f32 = (char *)export_model(model, "none");
    char *golden = (char *)export_model(model, "int8");
    char *args = NULL;
    ck_assert_int_gt(asprintf(&args,
                              "-m '%s' --device %s --precision fp32 -f data/corpus/test.txt -c 128 "
                              "--chunks 4 --kl-divergence-base '%s'",
                              f32, emu.spec, tpath("base.kld")),
                     0);
    ck_assert_int_eq(tool("glm-perplexity", args, tpath("base.out")), 0);
    free(args);
    ck_assert_int_gt(asprintf(&args,
                              "-m '%s' --device %s -f data/corpus/test.txt -c 128 "
                              "--kl-divergence-base '%s' --kl-divergence",
                              golden, emu.spec, tpath("base.kld")),
                     0);
    int rc = tool("glm-perplexity", args, tpath("kld.out"));
    free(args);
    char *out = tm_read(tpath("kld.out"), NULL);
    ck_assert_msg(rc == 0, "glm-perplexity --kl-divergence failed: %s",
                  (char *)tm_read(tpath("kld.out.err"), NULL));
    const char *p = strstr(out, "Mean    KLD: ");
    ck_assert_ptr_nonnull(p);
    double kld = strtod(p + strlen("Mean    KLD: "), NULL);
    p = strstr(out, "Same top p: ");
    ck_assert_ptr_nonnull(p);
    double same = strtod(p + strlen("Same top p: "), NULL);
    printf("%s golden plan vs FP32, 4 x 128 tokens: mean KLD %.6f, same top %.2f%%\n", model, kld,
           same);
    ck_assert_msg(kld <= 0.01, "mean KLD %.6f > 0.01", kld);
    /* another text against the same base: refused, naming the token */
    FILE *f = fopen(tpath("other.txt"), "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 200; i++)
        fputs("In the beginning was the Word, and the Word was with God. ", f);
    fclose(f);
    ck_assert_int_gt(asprintf(&args,
                              "-m '%s' --device %s -f '%s' -c 128 --kl-divergence-base '%s' "
                              "--kl-divergence",
                              golden, emu.spec, tpath("other.txt"), tpath("base.kld")),
                     0);
    ck_assert_int_eq(tool("glm-perplexity", args, tpath("other.out")), 1);
    free(args);
    char *err = tm_read(tpath("other.out.err"), NULL);
    ck_assert_msg(strstr(err, "another text") != NULL, "unclear error: %s", err);
    free(err);
    /* another context size: refused */
    ck_assert_int_gt(asprintf(&args,
                              "-m '%s' --device %s -f data/corpus/test.txt -c 64 "
                              "--kl-divergence-base '%s' --kl-divergence",
                              golden, emu.spec, tpath("base.kld")),
                     0);
    ck_assert_int_eq(tool("glm-perplexity", args, tpath("ctx.out")), 1);
    free(args);
    err = tm_read(tpath("ctx.out.err"), NULL);
    ck_assert_msg(strstr(err, "-c 128") != NULL, "unclear error: %s", err);
    free(err);
    free(out);
    free(f32);
    free(golden);
}
END_TEST

/* a value after `key` in the text at path */
static double value_after(const char *path, const char *key)
{
    char *s = tm_read(path, NULL);
    ck_assert_ptr_nonnull(s);
    const char *p = strstr(s, key);
    ck_assert_msg(p != NULL, "no '%s' in %s", key, s);
    double v = strtod(p + strlen(key), NULL);
    free(s);
    return v;
}

START_TEST(fp8_golden_error)
{
    char *args = NULL;
    ck_assert_int_gt(asprintf(&args, "--arch glm5 --preset tiny --fp8 --seed 38 --output '%s' "
                                     "--quiet",
                              tpath("fp8-ck")),
                     0);
    ck_assert_int_eq(tool("glm-synth", args, tpath("synth.log")), 0);
    free(args);
    /* the FP8 package (weights bit for bit) and the golden one */
    const char *pk[2] = {tpath("fp8.smd"), tpath("fp8-golden.smd")};
    const char *q[2] = {"fp8", "int8"};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_gt(asprintf(&args, "--input '%s' --quant %s --output '%s' --quiet",
                                  tpath("fp8-ck"), q[i], pk[i]),
                         0);
        ck_assert_int_eq(tool("glm-export", args, tpath("export.log")), 0);
        free(args);
    }
    /* the base: the dequantised original, FP8 weights with f32 compute */
    ck_assert_int_gt(asprintf(&args,
                              "-m '%s' --device %s --precision fp8 -f data/corpus/test.txt -c 64 "
                              "--chunks 2 --kl-divergence-base '%s'",
                              pk[0], emu.spec, tpath("fp8.kld")),
                     0);
    ck_assert_int_eq(tool("glm-perplexity", args, tpath("fp8-base.out")), 0);
    free(args);
    /* the golden package, and the FP8 package under the golden plan (its
     * FP8 tensors converted on the host), against it */
    const char *what[2] = {"golden package", "fp8 package, golden plan"};
    const char *pkg[2] = {pk[1], pk[0]};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_gt(asprintf(&args,
                                  "-m '%s' --device %s --precision golden -f data/corpus/test.txt "
                                  "-c 64 --kl-divergence-base '%s' --kl-divergence",
                                  pkg[i], emu.spec, tpath("fp8.kld")),
                         0);
        int rc = tool("glm-perplexity", args, tpath("fp8-kld.out"));
        free(args);
        ck_assert_msg(rc == 0, "glm-perplexity --kl-divergence failed: %s",
                      (char *)tm_read(tpath("fp8-kld.out.err"), NULL));
        double kld = value_after(tpath("fp8-kld.out"), "Mean    KLD: ");
        double cmin = value_after(tpath("fp8-kld.out"), "Min cosine : ");
        printf("glm5 tiny fp8 checkpoint, %s vs the dequantised original, 2 x 64 tokens: mean "
               "KLD %.6f, min logit cosine %.6f\n",
               what[i], kld, cmin);
        ck_assert_msg(kld > 0 && kld <= 0.01, "mean KLD %.6f", kld); /* measured, small */
        ck_assert_msg(cmin >= 0.99 && cmin < 0.999999, "min cosine %.6f", cmin);
    }
}
END_TEST

static void setup(void)
{
    snprintf(t_dir, sizeof(t_dir), "/tmp/tx-ppl-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(t_dir));
    ck_assert_int_eq(tx_test_emu_start(&emu, "512M", "--cores", "2", NULL), 0);
}

static void teardown(void)
{
    tx_test_emu_stop(&emu);
    tx_test_rmtree(t_dir);
}

static Suite *suite(void)
{
    Suite *s = suite_create("perplexity");
    TCase *tc = tcase_create("arithmetic");
    tcase_add_test(tc, ppl_hand_computed);
    tcase_add_test(tc, kld_hand_computed);
    tcase_add_loop_test(tc, tokenizer_matches_hf, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("trained");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, fidelity_fp32, 0, 2);
    tcase_add_loop_test(tc, ppl_matches_trainer, 0, 2);
    tcase_add_test(tc, golden_kld_bound);
    tcase_add_test(tc, fp8_golden_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run_emu(suite());
}
