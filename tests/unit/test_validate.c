/* SPDX-License-Identifier: MIT */
/*
 * glm_validate / glm-inference --validate against the ORIGINAL model: the
 * article's deployment check (100 random inputs, cosine of the output
 * against the original BF16 checkpoint >= 0.99) for the golden plan on
 * glm-export --quant int8 packages of both architectures; the package's
 * record of its source (path and content hash) and the --original
 * override; validation without the original says it measures the device
 * arithmetic only; a non-finite output always fails.
 *
 * Models: glm-synth's tiny preset with a 512-token vocabulary (the helper
 * of test_runtime / test_precision), BF16 checkpoints as they ship.
 *
 * Backend: $TX_DEVICE if set, else a tx8-emu started for this program.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <tx/glm.h>
#include <tx/tx.h>
#include <tx-internal/tx_checkpoint.h>

#include "test_runtime_synth.h"
#include "tx_test_emu.h"
#include "tx_test_main.h"

enum { T5, T4, TQ3, N_MODELS };
static char g_ck[N_MODELS][300], g_smd[N_MODELS][300];
static char g_other[300]; /* a different checkpoint (other seed) */
static char g_nan[300];   /* g_smd[T5] with a NaN in lm_head */
static char g_stale[300]; /* package whose recorded source was changed */
static char g_gone[300];  /* package whose recorded source was removed */

/* Copies a package, setting element 0 of tensor `name` (F32) to NaN:
 * through the writer, so every checksum is right. */
static int copy_with_nan(const char *src, const char *dst, const char *name)
{
    char err[512];
    struct tx_smd *s = NULL;
    struct tx_smd_writer *w = NULL;
    void *buf = NULL;
    int rc = -1;
    if (tx_smd_open(src, 0, &s, err, sizeof(err)) || tx_smd_writer_open(dst, &w, err, sizeof(err)))
        goto out;
    size_t len;
    const char *txt;
    if ((txt = tx_smd_config_json(s, &len)) &&
        tx_smd_writer_section(w, TX_SMD_SEC_CONFIG, txt, len, err, sizeof(err)))
        goto out;
    if ((txt = tx_smd_tokenizer_json(s, &len)) &&
        tx_smd_writer_section(w, TX_SMD_SEC_TOKENIZER, txt, len, err, sizeof(err)))
        goto out;
    if ((txt = tx_smd_tokenizer_config_json(s, &len)) &&
        tx_smd_writer_section(w, TX_SMD_SEC_TOKENIZER_CONFIG, txt, len, err, sizeof(err)))
        goto out;
    if ((txt = tx_smd_metadata_json(s, &len)) &&
        tx_smd_writer_section(w, TX_SMD_SEC_METADATA, txt, len, err, sizeof(err)))
        goto out;
    struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT];
    for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++)
        plan[l] = *tx_smd_plan(s, (enum tx_smd_layer)l);
    if (tx_smd_writer_plan(w, plan, err, sizeof(err)))
        goto out;
    int hit = 0;
    for (size_t i = 0; i < tx_smd_tensor_count(s); i++) {
        const struct tx_smd_tensor *t = tx_smd_tensor_at(s, i);
        struct tx_smd_tensor_desc d = {
            .name = tx_smd_tensor_name(s, t),
            .dtype = t->dtype,
            .format = t->format,
            .layer_type = (enum tx_smd_layer)t->layer_type,
            .ndim = t->ndim,
            .group_size = t->group_size,
            .nnz_blocks = t->nnz_blocks,
            .layer = t->layer,
            .expert = t->expert,
            .src_dtype = t->src_dtype,
        };
        for (int k = 0; k < t->ndim; k++)
            d.shape[k] = t->shape[k];
        free(buf);
        buf = malloc(t->extent_size);
        if (!buf || tx_smd_read_extent(s, t, buf, t->extent_size, 1, err, sizeof(err)))
            goto out;
        if (!strcmp(d.name, name)) {
            if (t->dtype != TX8_DTYPE_F32)
                goto out;
            float nan = NAN;
            memcpy(buf, &nan, sizeof(nan));
            hit = 1;
        }
        const char *b = buf;
        if (tx_smd_writer_begin(w, &d, err, sizeof(err)) ||
            tx_smd_writer_data(w, b, t->data_size, err, sizeof(err)) ||
            tx_smd_writer_end(w, t->scales_size ? b + (t->scales_offset - t->data_offset) : NULL,
                              t->scales_size,
                              t->index_size ? b + (t->index_offset - t->data_offset) : NULL,
                              t->index_size, err, sizeof(err)))
            goto out;
    }
    if (!hit)
        goto out;
    rc = tx_smd_writer_finish(w, err, sizeof(err));
    w = NULL;
out:
    if (rc)
        fprintf(stderr, "copy_with_nan: %s\n", err);
    if (w)
        tx_smd_writer_abort(w);
    tx_smd_close(s);
    free(buf);
    return rc;
}

static void fixture_setup(void)
{
    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    const char *d = rts_tmpdir();
    enum glm_arch arch[N_MODELS] = {GLM_ARCH_GLM_MOE_DSA, GLM_ARCH_GLM4_MOE, GLM_ARCH_QWEN3_MOE};
    for (int i = 0; i < N_MODELS; i++) {
        snprintf(g_ck[i], sizeof(g_ck[i]), "%s/ck%d", d, i);
        snprintf(g_smd[i], sizeof(g_smd[i]), "%s/m%d.smd", d, i);
        /* BF16 as checkpoints ship, exported as glm-export --quant int8 does */
        if (rts_write_checkpoint(g_ck[i], arch[i], NULL) || rts_export(g_ck[i], g_smd[i], "int8"))
            ck_abort_msg("cannot make package %d", i);
    }
    struct rts_mods md = {.seed = 43};
    snprintf(g_other, sizeof(g_other), "%s/other", d);
    if (rts_write_checkpoint(g_other, GLM_ARCH_GLM_MOE_DSA, &md))
        ck_abort_msg("cannot make the other checkpoint");
    snprintf(g_nan, sizeof(g_nan), "%s/nan.smd", d);
    if (copy_with_nan(g_smd[T5], g_nan, "lm_head.weight"))
        ck_abort_msg("cannot make the NaN package");
    /* a package whose source directory then holds another model */
    char ck[320];
    snprintf(ck, sizeof(ck), "%s/stale-ck", d);
    snprintf(g_stale, sizeof(g_stale), "%s/stale.smd", d);
    if (rts_write_checkpoint(ck, GLM_ARCH_GLM_MOE_DSA, NULL) || rts_export(ck, g_stale, "int8"))
        ck_abort_msg("cannot make the stale package");
    tx_test_rmtree(ck);
    if (rts_write_checkpoint(ck, GLM_ARCH_GLM_MOE_DSA, &md))
        ck_abort_msg("cannot rewrite the stale checkpoint");
    /* a package whose source is gone */
    snprintf(ck, sizeof(ck), "%s/gone-ck", d);
    snprintf(g_gone, sizeof(g_gone), "%s/gone.smd", d);
    if (rts_write_checkpoint(ck, GLM_ARCH_GLM4_MOE, NULL) || rts_export(ck, g_gone, "int8"))
        ck_abort_msg("cannot make the gone package");
    tx_test_rmtree(ck);
}

static void fixture_teardown(void)
{
    rts_device_teardown();
    rts_cleanup();
}

static glm_model_t *load(const char *smd, tx_device_t **dev)
{
    OK(tx_device_open(rts_spec, dev));
    glm_precision_plan_t p;
    glm_plan_golden(&p);
    OK(glm_plan_set(*dev, &p));
    glm_model_t *m;
    OK(glm_model_load(*dev, smd, NULL, &m));
    return m;
}

static void unload(glm_model_t *m, tx_device_t *dev)
{
    OK(glm_model_free(m));
    tx_device_close(dev);
}

static int run(const char *smd, const struct glm_validate_options *vo,
               struct glm_validate_report **r)
{
    tx_device_t *dev;
    glm_model_t *m = load(smd, &dev);
    int rc = glm_validate(m, vo, r);
    unload(m, dev);
    return rc;
}

/* Runs glm-inference with args; returns its exit status, output in out. */
static int cli(const char *args, char *out, size_t outsz)
{
    char bin[256], cmd[2048];
    tx_test_bin("glm-inference", bin, sizeof(bin));
    snprintf(cmd, sizeof(cmd), "%s --device '%s' %s 2>&1", bin, rts_spec, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, outsz - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* ---- the article's check against the original ----------------------------- */

static void golden_vs_original(int which, int n_tokens)
{
    struct glm_validate_options vo;
    memset(&vo, 0, sizeof(vo));
    vo.n_inputs = 100;
    vo.n_tokens = n_tokens;
    vo.seed = 2024;
    struct glm_validate_report *r;
    OK(run(g_smd[which], &vo, &r));
    char abs[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(g_ck[which], abs));
    ck_assert_msg(r->original == 1, "original not used: %s", r->original_note);
    ck_assert_str_eq(r->original_path, abs);
    ck_assert(!strncmp(r->source_hash, "crc32c:", 7));
    ck_assert_int_eq(r->n_inputs, 100);
    ck_assert_int_eq(r->n_nonfinite, 0);
    ck_assert_ptr_nonnull(r->quant_layers);
    printf("[validate] %s golden int8 package vs original, 100 x %d tokens: cosine min %.6f mean "
           "%.6f, worst position %.6f; device arithmetic min %.6f; quantisation min %.6f; blame "
           "device %s, quantisation %s\n",
           which == T5   ? "glm5"
           : which == T4 ? "glm4"
                         : "qwen3_moe",
           n_tokens, r->min_cosine, r->mean_cosine, r->min_position_cosine, r->device_min_cosine,
           r->quant_min_cosine, r->device_blame >= 0 ? glm_layer_type_name(r->device_blame) : "-",
           r->quant_blame >= 0 ? glm_layer_type_name(r->quant_blame) : "-");
    /* the quantisation is measured, not hidden */
    ck_assert(r->quant_min_cosine < 0.999999);
    ck_assert(r->quant_alone[GLM_EXPERT] >= -1 && r->quant_alone[GLM_EMBEDDING] >= -1);
    ck_assert_int_ge(r->quant_blame, 0);
    ck_assert(r->min_position_cosine <= r->min_cosine + 1e-9);
    ck_assert_msg(r->passed && r->min_cosine >= 0.99, "golden vs original: min cosine %f",
                  r->min_cosine);
    glm_validate_report_free(r);
}

START_TEST(test_golden_original_glm5)
{
    golden_vs_original(T5, 8);
    /* 12 tokens: the DSA indexer selects 8 of up to 12 keys */
    golden_vs_original(T5, 12);
}
END_TEST

START_TEST(test_golden_original_glm4)
{
    golden_vs_original(T4, 8);
    golden_vs_original(T4, 12);
}
END_TEST

START_TEST(test_golden_original_qwen3_moe)
{
    /* softmax router, a dense layer from mlp_only_layers */
    golden_vs_original(TQ3, 8);
    golden_vs_original(TQ3, 12);
}
END_TEST

/* ---- without the original ------------------------------------------------- */

START_TEST(test_device_only)
{
    struct glm_validate_options vo;
    memset(&vo, 0, sizeof(vo));
    vo.n_inputs = 4;
    vo.use_original = GLM_VALIDATE_ORIGINAL_NONE;
    struct glm_validate_report *r;
    OK(run(g_smd[T5], &vo, &r));
    ck_assert_int_eq(r->original, 0);
    ck_assert_ptr_null(r->quant_layers);
    ck_assert(r->quant_min_cosine == 1);
    ck_assert(r->min_cosine == r->device_min_cosine);
    glm_validate_report_free(r);

    /* the recorded source is gone: a note, device arithmetic only */
    vo.use_original = GLM_VALIDATE_ORIGINAL_AUTO;
    OK(run(g_gone, &vo, &r));
    ck_assert_int_eq(r->original, 0);
    ck_assert_ptr_nonnull(r->original_note);
    ck_assert_msg(strstr(r->original_note, "cannot be opened"), "%s", r->original_note);
    glm_validate_report_free(r);
    /* ... and required: an error */
    vo.use_original = GLM_VALIDATE_ORIGINAL_REQUIRE;
    tx_device_t *dev;
    glm_model_t *m = load(g_gone, &dev);
    ck_assert_int_eq(glm_validate(m, &vo, &r), TX_ENOENT); /* the original is gone: "not found" */
    unload(m, dev);

    char out[65536], args[1024];
    snprintf(args, sizeof(args), "--checkpoint %s --validate --validate-inputs 3", g_gone);
    int st = cli(args, out, sizeof(out));
    ck_assert_msg(st == 0, "exit %d: %s", st, out);
    ck_assert_msg(strstr(out, "device arithmetic only"), "%s", out);
    ck_assert_msg(strstr(out, "cannot be opened"), "%s", out);
    ck_assert_msg(strstr(out, "validation PASSED"), "%s", out);
    snprintf(args, sizeof(args), "--checkpoint %s --validate --validate-inputs 3 --no-original",
             g_smd[T4]);
    st = cli(args, out, sizeof(out));
    ck_assert_msg(st == 0, "exit %d: %s", st, out);
    ck_assert_msg(strstr(out, "device arithmetic only"), "%s", out);
    ck_assert_msg(!strstr(out, "\noriginal model: "), "%s", out);
}
END_TEST

/* ---- a non-finite output fails, always ------------------------------------ */

START_TEST(test_nan_fails)
{
    struct glm_validate_options vo;
    memset(&vo, 0, sizeof(vo));
    vo.n_inputs = 5;
    struct glm_validate_report *r;
    OK(run(g_nan, &vo, &r));
    ck_assert_int_eq(r->passed, 0);
    ck_assert_int_eq(r->n_nonfinite, 5);
    ck_assert(isnan(r->min_cosine));
    ck_assert(isnan(r->cosine[0]));
    glm_validate_report_free(r);
    /* also when only the device arithmetic is measured */
    vo.use_original = GLM_VALIDATE_ORIGINAL_NONE;
    OK(run(g_nan, &vo, &r));
    ck_assert_int_eq(r->passed, 0);
    ck_assert_int_eq(r->n_nonfinite, 5);
    glm_validate_report_free(r);

    char out[65536], args[1024];
    snprintf(args, sizeof(args), "--checkpoint %s --validate --validate-inputs 3", g_nan);
    int st = cli(args, out, sizeof(out));
    ck_assert_msg(st != 0, "exit 0 on a NaN: %s", out);
    ck_assert_msg(strstr(out, "validation FAILED"), "%s", out);
    ck_assert_msg(!strstr(out, "PASSED"), "%s", out);
    ck_assert_msg(strstr(out, "non-finite"), "%s", out);
}
END_TEST

/* ---- --original and the source hash -------------------------------------- */

START_TEST(test_original_override)
{
    char d2[320];
    snprintf(d2, sizeof(d2), "%s/moved", rts_tmpdir());
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", g_ck[T4], d2);
    ck_assert_int_eq(system(cmd), 0);

    /* the hash the package records is the checkpoint's */
    char err[512];
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(d2, &c, err, sizeof(err)), 0);
    uint32_t h;
    ck_assert_int_eq(tx_ckpt_source_hash(c, &h, err, sizeof(err)), 0);
    tx_ckpt_close(c);
    char hs[32];
    snprintf(hs, sizeof(hs), "crc32c:%08x", h);

    struct glm_validate_options vo;
    memset(&vo, 0, sizeof(vo));
    vo.n_inputs = 3;
    vo.original = d2;
    struct glm_validate_report *r;
    OK(run(g_smd[T4], &vo, &r));
    ck_assert_int_eq(r->original, 1);
    ck_assert_str_eq(r->original_path, d2);
    ck_assert_str_eq(r->source_hash, hs);
    ck_assert(r->passed);
    glm_validate_report_free(r);

    /* another model: an explicit --original is an error */
    vo.original = g_other;
    tx_device_t *dev;
    glm_model_t *m = load(g_smd[T5], &dev);
    ck_assert_int_eq(glm_validate(m, &vo, &r), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "not the model this package was made from"), "%s",
                  tx_last_error());
    unload(m, dev);
    /* the recorded path holds another model: a note, device only */
    vo.original = NULL;
    OK(run(g_stale, &vo, &r));
    ck_assert_int_eq(r->original, 0);
    ck_assert_msg(r->original_note && strstr(r->original_note, "not the model"), "%s",
                  r->original_note ? r->original_note : "(null)");
    glm_validate_report_free(r);

    char out[65536], args[1024];
    snprintf(args, sizeof(args), "--checkpoint %s --validate --validate-inputs 3 --original %s",
             g_smd[T5], g_other);
    int st = cli(args, out, sizeof(out));
    ck_assert_msg(st != 0, "exit 0 with a mismatching original: %s", out);
    ck_assert_msg(strstr(out, "not the model this package was made from"), "%s", out);
    snprintf(args, sizeof(args), "--checkpoint %s --validate --validate-inputs 3 --original %s",
             g_smd[T4], d2);
    st = cli(args, out, sizeof(out));
    ck_assert_msg(st == 0, "exit %d: %s", st, out);
    ck_assert_msg(strstr(out, "original model: "), "%s", out);
    ck_assert_msg(strstr(out, "against the original model"), "%s", out);
    ck_assert_msg(strstr(out, "quantisation"), "%s", out);
    tx_test_rmtree(d2);
}
END_TEST

/* ---- on given tokens (held-out text) -------------------------------------- */

START_TEST(test_validate_tokens)
{
    tx_device_t *dev;
    glm_model_t *m = load(g_smd[T5], &dev);
    int V = glm_model_config(m)->vocab_size;
    enum { N_IN = 3, N_TOK = 8 };
    int32_t text[N_IN * N_TOK + 5];
    for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++)
        text[i] = (int32_t)((i * 7919u + 13u) % (unsigned)V);
    struct glm_validate_options vo;
    memset(&vo, 0, sizeof(vo));
    vo.n_inputs = N_IN;
    vo.n_tokens = N_TOK;
    struct glm_validate_report *r, *r2;
    OK(glm_validate_tokens(m, &vo, text, sizeof(text) / sizeof(text[0]), &r));
    ck_assert_int_eq(r->n_inputs, N_IN);
    ck_assert_int_eq(r->n_nonfinite, 0);
    ck_assert_msg(r->passed, "min cosine %f", r->min_cosine);
    /* the inputs are the text's windows: the same text, the same figures;
     * another text (one token changed in the second window), others */
    OK(glm_validate_tokens(m, &vo, text, N_IN * N_TOK, &r2));
    for (int i = 0; i < N_IN; i++)
        ck_assert(r->cosine[i] == r2->cosine[i]);
    glm_validate_report_free(r2);
    text[N_TOK + 3] = (text[N_TOK + 3] + 1) % V;
    OK(glm_validate_tokens(m, &vo, text, N_IN * N_TOK, &r2));
    ck_assert(r->cosine[0] == r2->cosine[0]);
    ck_assert_msg(r->cosine[1] != r2->cosine[1], "input 2 did not change with its text");
    glm_validate_report_free(r2);
    glm_validate_report_free(r);
    /* too few tokens for the inputs, an id outside the vocabulary */
    ck_assert_int_eq(glm_validate_tokens(m, &vo, text, N_IN * N_TOK - 1, &r), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "hold 2 inputs"), "%s", tx_last_error());
    text[5] = V;
    ck_assert_int_eq(glm_validate_tokens(m, &vo, text, N_IN * N_TOK, &r), TX_EINVAL);
    ck_assert_msg(strstr(tx_last_error(), "outside the vocabulary"), "%s", tx_last_error());
    ck_assert_int_eq(glm_validate_tokens(m, &vo, NULL, 0, &r), TX_EINVAL);
    unload(m, dev);
}
END_TEST

static Suite *validate_suite(void)
{
    Suite *s = suite_create("validate");
    TCase *tc = tcase_create("original");
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_golden_original_glm5);
    tcase_add_test(tc, test_golden_original_glm4);
    tcase_add_test(tc, test_golden_original_qwen3_moe);
    tcase_add_test(tc, test_device_only);
    tcase_add_test(tc, test_nan_fails);
    tcase_add_test(tc, test_original_override);
    tcase_add_test(tc, test_validate_tokens);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(validate_suite());
}
