// SPDX-License-Identifier: MIT
/*
 * Export: INT8 per-channel and per-group accuracy bounds, block-sparse
 * correctness (the dequantised sparse matrix equals the independently
 * pruned dense one), precision plans, and the whole checkpoint -> .smd
 * pipeline (storage types per plan, exactness of --quant none, pruned
 * fraction and MAC reduction, errors leaving no file behind).
 */
#include "test_model_util.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>

#include <tx/tx_error.h>
#include <tx/glm.h>
#include <tx-internal/tx_checkpoint.h>
#include <tx/tx_dtype.h>
#include <tx-internal/tx_export.h>
#include <tx-internal/tx_safetensors.h>
#include <tx-internal/tx_synth.h>
#include "tx_test_main.h"

static char err[TX_ERR_MAX];

/* rows x cols with a different magnitude per row and per 32-column block */
static float *matrix(uint32_t rows, uint32_t cols, unsigned seed)
{
    float *w = malloc((size_t)rows * cols * sizeof(float));
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            float m = (1.0f + (float)(r % 5)) * (c / 32 % 3 == 0 ? 1.0f : 0.05f);
            w[(size_t)r * cols + c] = m * tm_rand(&seed);
        }
    return w;
}

static double rel_err(const float *a, const float *b, size_t n)
{
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)a[i] * a[i];
    }
    return sqrt(e / r);
}

/* dequantised INT8 matrix; returns the relative error, checks the
 * per-element bound |w - q * s| <= s / 2 */
static double int8_case(const float *w, uint32_t R, uint32_t C, uint32_t group)
{
    uint32_t ng = group ? C / group : 1;
    int8_t *q = malloc((size_t)R * C);
    float *s = malloc((size_t)R * ng * sizeof(float));
    float *d = malloc((size_t)R * C * sizeof(float));
    ck_assert_int_eq(tx_quant_matrix(w, R, C, TX8_DTYPE_I8, TX8_WFMT_DENSE, group, 0, q, s, NULL,
                                     NULL, err, sizeof(err)),
                     0);
    ck_assert_int_eq(tx_weight_dequant(TX8_DTYPE_I8, TX8_WFMT_DENSE, R, C, group, 0, q, s, NULL, d,
                                       err, sizeof(err)),
                     0);
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t c = 0; c < C; c++) {
            float sc = s[r * ng + (group ? c / group : 0)];
            size_t i = (size_t)r * C + c;
            ck_assert(fabsf(w[i] - d[i]) <= sc * 0.5f * 1.0001f + 1e-9f);
            ck_assert(q[i] >= -127 && q[i] <= 127);
        }
    /* the scale is max|w| / 127 over its row/group */
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t g = 0; g < ng; g++) {
            uint32_t c0 = group ? g * group : 0, c1 = group ? c0 + group : C;
            float amax = 0;
            for (uint32_t c = c0; c < c1; c++)
                amax = fmaxf(amax, fabsf(w[(size_t)r * C + c]));
            ck_assert_float_eq_tol(s[r * ng + g], amax / 127.0f, 1e-9f);
        }
    double e = rel_err(w, d, (size_t)R * C);
    free(q);
    free(s);
    free(d);
    return e;
}

START_TEST(int8_accuracy)
{
    const uint32_t R = 48, C = 256;
    float *w = matrix(R, C, 5);
    double per_channel = int8_case(w, R, C, 0);
    double per_group = int8_case(w, R, C, 32);
    double per_group128 = int8_case(w, R, C, 128);
    /* uniform data: ~ 1/(127 * 2) relative in the large blocks */
    ck_assert_msg(per_channel < 0.01, "per-channel error %g", per_channel);
    ck_assert_msg(per_group < 0.005, "per-group error %g", per_group);
    /* groups follow the magnitude changes better */
    ck_assert(per_group < per_channel);
    ck_assert(per_group <= per_group128 * 1.0001);
    /* an all-zero row gets scale 0 and dequantises to zeros */
    memset(w, 0, C * sizeof(float));
    int8_t q[256];
    float sc = -1, d[256];
    ck_assert_int_eq(tx_quant_matrix(w, 1, C, TX8_DTYPE_I8, TX8_WFMT_DENSE, 0, 0, q, &sc, NULL,
                                     NULL, err, sizeof(err)),
                     0);
    ck_assert_float_eq(sc, 0.0f);
    ck_assert_int_eq(tx_weight_dequant(TX8_DTYPE_I8, TX8_WFMT_DENSE, 1, C, 0, 0, q, &sc, NULL, d,
                                       err, sizeof(err)),
                     0);
    for (uint32_t i = 0; i < C; i++)
        ck_assert(q[i] == 0 && d[i] == 0.0f);
    free(w);
}
END_TEST

START_TEST(fp16_bf16)
{
    const uint32_t R = 4, C = 64;
    float *w = matrix(R, C, 9);
    uint16_t h[256];
    float d[256];
    ck_assert_int_eq(tx_quant_matrix(w, R, C, TX8_DTYPE_F16, TX8_WFMT_DENSE, 0, 0, h, NULL, NULL,
                                     NULL, err, sizeof(err)),
                     0);
    ck_assert_int_eq(tx_weight_dequant(TX8_DTYPE_F16, TX8_WFMT_DENSE, R, C, 0, 0, h, NULL, NULL, d,
                                       err, sizeof(err)),
                     0);
    for (int i = 0; i < 256; i++)
        ck_assert_float_eq(d[i], tx_f16_to_f32(tx_f32_to_f16(w[i])));
    ck_assert_int_eq(tx_quant_matrix(w, R, C, TX8_DTYPE_BF16, TX8_WFMT_DENSE, 0, 0, h, NULL, NULL,
                                     NULL, err, sizeof(err)),
                     0);
    for (int i = 0; i < 256; i++)
        ck_assert_uint_eq(h[i], tx_f32_to_bf16(w[i]));
    w[7] = 1e6f;
    ck_assert_int_eq(tx_quant_matrix(w, R, C, TX8_DTYPE_F16, TX8_WFMT_DENSE, 0, 0, h, NULL, NULL,
                                     NULL, err, sizeof(err)),
                     TX_EINVAL);
    tm_err_has(err, "FP16");
    /* invalid specs */
    ck_assert_int_eq(tx_quant_matrix(w, R, C, TX8_DTYPE_F16, TX8_WFMT_DENSE, 32, 0, h, NULL, NULL,
                                     NULL, err, sizeof(err)),
                     TX_EINVAL);
    ck_assert_int_eq(tx_quant_matrix(w, R, 48, TX8_DTYPE_I8, TX8_WFMT_BLOCK_SPARSE, 0, 1, h, NULL,
                                     NULL, NULL, err, sizeof(err)),
                     TX_EINVAL);
    free(w);
}
END_TEST

/* independent pruning: keep the `keep` blocks of largest L2 norm per row
 * (ties: lower index) */
static void prune_ref(float *w, uint32_t R, uint32_t C, uint32_t keep)
{
    uint32_t nb = C / 32;
    for (uint32_t r = 0; r < R; r++) {
        float *row = w + (size_t)r * C;
        double norm[64];
        int kept[64] = {0};
        for (uint32_t b = 0; b < nb; b++) {
            norm[b] = 0;
            for (int e = 0; e < 32; e++)
                norm[b] += (double)row[b * 32 + e] * row[b * 32 + e];
        }
        for (uint32_t k = 0; k < keep; k++) {
            int best = -1;
            for (uint32_t b = 0; b < nb; b++)
                if (!kept[b] && (best < 0 || (float)norm[b] > (float)norm[best]))
                    best = (int)b;
            kept[best] = 1;
        }
        for (uint32_t b = 0; b < nb; b++)
            if (!kept[b])
                memset(row + b * 32, 0, 32 * sizeof(float));
    }
}

static void sparse_case(unsigned dtype, uint32_t group)
{
    const uint32_t R = 20, C = 256, keep = tx_sparse_keep_blocks(C, 0.5);
    ck_assert_uint_eq(keep, 4);
    float *w = matrix(R, C, 77);
    uint32_t nnz = R * keep;
    size_t es = dtype == TX8_DTYPE_F32 ? 4 : dtype == TX8_DTYPE_I8 ? 1 : 2;
    void *data = malloc((size_t)nnz * 32 * es);
    uint32_t ng = group ? C / group : 1;
    float *s = malloc((size_t)R * ng * sizeof(float));
    size_t ilen = (size_t)tx_smd_index_size(TX8_WFMT_BLOCK_SPARSE, R, nnz);
    void *ix = malloc(ilen);
    uint64_t pruned = 0;
    ck_assert_int_eq(tx_quant_matrix(w, R, C, dtype, TX8_WFMT_BLOCK_SPARSE, group, keep, data, s,
                                     ix, &pruned, err, sizeof(err)),
                     0);
    ck_assert_uint_eq(pruned, (uint64_t)R * (C / 32 - keep) * 32);
    ck_assert_int_eq(tx_smd_check_sparse_index(ix, ilen, R, C, nnz, err, sizeof(err)), 0);
    float *d = malloc((size_t)R * C * sizeof(float));
    ck_assert_int_eq(tx_weight_dequant(dtype, TX8_WFMT_BLOCK_SPARSE, R, C, group, nnz, data, s, ix,
                                       d, err, sizeof(err)),
                     0);
    /* the same numbers from the pruned dense matrix stored densely */
    float *p = malloc((size_t)R * C * sizeof(float));
    memcpy(p, w, (size_t)R * C * sizeof(float));
    prune_ref(p, R, C, keep);
    void *ddata = malloc((size_t)R * C * es);
    float *ds = malloc((size_t)R * ng * sizeof(float));
    float *dd = malloc((size_t)R * C * sizeof(float));
    ck_assert_int_eq(tx_quant_matrix(p, R, C, dtype, TX8_WFMT_DENSE, group, 0, ddata, ds, NULL,
                                     NULL, err, sizeof(err)),
                     0);
    ck_assert_int_eq(tx_weight_dequant(dtype, TX8_WFMT_DENSE, R, C, group, 0, ddata, ds, NULL, dd,
                                       err, sizeof(err)),
                     0);
    ck_assert_mem_eq(d, dd, (size_t)R * C * sizeof(float));
    if (dtype == TX8_DTYPE_F32)
        ck_assert_mem_eq(d, p, (size_t)R * C * sizeof(float));
    /* the matrix has 1 strong block in 3: pruning half keeps most energy */
    ck_assert(rel_err(w, d, (size_t)R * C) < 0.2);
    free(w);
    free(data);
    free(s);
    free(ix);
    free(d);
    free(p);
    free(ddata);
    free(ds);
    free(dd);
}

START_TEST(sparse_f32)
{
    sparse_case(TX8_DTYPE_F32, 0);
}
END_TEST

START_TEST(sparse_int8)
{
    sparse_case(TX8_DTYPE_I8, 0);
    sparse_case(TX8_DTYPE_I8, 64);
    sparse_case(TX8_DTYPE_BF16, 0);
}
END_TEST

START_TEST(keep_blocks)
{
    ck_assert_uint_eq(tx_sparse_keep_blocks(128, 0.5), 2);
    ck_assert_uint_eq(tx_sparse_keep_blocks(96, 0.5), 1);
    ck_assert_uint_eq(tx_sparse_keep_blocks(64, 0.0), 2);
    ck_assert_uint_eq(tx_sparse_keep_blocks(32, 0.5), 1);
    ck_assert_uint_eq(tx_sparse_keep_blocks(256, 0.75), 2);
    ck_assert_uint_eq(tx_sparse_keep_blocks(256, 0.99), 1);
}
END_TEST

START_TEST(plans)
{
    struct tx_smd_plan_entry p[TX_SMD_LAYER_COUNT];
    tx_plan_golden(p);
    ck_assert_uint_eq(p[TX_SMD_LAYER_EMBEDDING].precision, TX_SMD_PREC_INT8_MIXED);
    ck_assert_uint_eq(p[TX_SMD_LAYER_ATTENTION].precision, TX_SMD_PREC_FP16);
    ck_assert_uint_eq(p[TX_SMD_LAYER_MLP].precision, TX_SMD_PREC_INT8_MIXED);
    ck_assert_uint_eq(p[TX_SMD_LAYER_EXPERT].precision, TX_SMD_PREC_INT8_MIXED);
    ck_assert_uint_eq(p[TX_SMD_LAYER_NORM].precision, TX_SMD_PREC_FP32);
    ck_assert_uint_eq(p[TX_SMD_LAYER_OUTPUT].precision, TX_SMD_PREC_FP32);
    ck_assert_int_eq(tx_plan_apply_quant(p, "fp16", err, sizeof(err)), 0);
    for (int l = 0; l < TX_SMD_LAYER_COUNT; l++)
        ck_assert_uint_eq(p[l].precision, l == TX_SMD_LAYER_NORM || l == TX_SMD_LAYER_ROUTER
                                              ? TX_SMD_PREC_FP32
                                              : TX_SMD_PREC_FP16);
    ck_assert_int_eq(tx_plan_apply_quant(p, "none", err, sizeof(err)), 0);
    for (int l = 0; l < TX_SMD_LAYER_COUNT; l++)
        ck_assert_uint_eq(p[l].precision, TX_SMD_PREC_FP32);
    ck_assert_int_eq(tx_plan_apply_quant(p, "int8", err, sizeof(err)), 0);
    ck_assert_uint_eq(p[TX_SMD_LAYER_ATTENTION].precision, TX_SMD_PREC_FP16);
    ck_assert_int_eq(tx_plan_apply_quant(p, "q4_k", err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "q4_k");
    ck_assert_int_eq(
        tx_plan_apply_spec(p, "attention=int8,GLM_MLP=bf16,output=FP16", err, sizeof(err)), 0);
    ck_assert_uint_eq(p[TX_SMD_LAYER_ATTENTION].precision, TX_SMD_PREC_INT8_MIXED);
    ck_assert_uint_eq(p[TX_SMD_LAYER_MLP].precision, TX_SMD_PREC_BF16);
    ck_assert_uint_eq(p[TX_SMD_LAYER_OUTPUT].precision, TX_SMD_PREC_FP16);
    ck_assert_int_eq(tx_plan_apply_spec(p, "norm=int8", err, sizeof(err)), TX_EINVAL);
    ck_assert_int_eq(tx_plan_apply_spec(p, "conv=fp16", err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "conv");
    ck_assert_int_eq(tx_plan_apply_spec(p, "attention", err, sizeof(err)), TX_EINVAL);
    /* fp8 is a precision since issue 38; fp4 is not */
    ck_assert_int_eq(tx_plan_apply_spec(p, "mlp=fp4", err, sizeof(err)), TX_EINVAL);
    ck_assert_int_eq(tx_plan_apply_spec(p, "mlp=fp8", err, sizeof(err)), 0);
    ck_assert_uint_eq(p[TX_SMD_LAYER_MLP].precision, TX_SMD_PREC_FP8);
    ck_assert_int_eq(tx_plan_apply_spec(p, "norm=fp8", err, sizeof(err)), TX_EINVAL);
    char buf[256];
    tx_plan_golden(p);
    ck_assert_str_eq(tx_plan_format(p, buf, sizeof(buf)),
                     "embedding=INT8_MIXED,attention=FP16,mlp=INT8_MIXED,experts=INT8_MIXED,"
                     "norm=FP32,output=FP32,router=FP32");
}
END_TEST

/* ---- the pipeline ------------------------------------------------------- */

static const char *make_ckpt(enum glm_arch arch)
{
    const char *d = tm_path("ckpt");
    struct tx_synth_opts o = {
        .arch = arch, .preset = TX_SYNTH_TINY, .seed = 5, .vocab_size = 256, .threads = 2};
    ck_assert_int_eq(tx_synth_write(d, &o, err, sizeof(err)), 0);
    char p[600];
    snprintf(p, sizeof(p), "%s/tokenizer.json", d);
    tm_write(p, TM_TOKENIZER, strlen(TM_TOKENIZER));
    return d;
}

/* Reads tensor `name` of the package as floats. */
static float *smd_values(struct tx_smd *s, const char *name, const struct tx_smd_tensor **tp)
{
    const struct tx_smd_tensor *t = tx_smd_find(s, name);
    ck_assert_ptr_nonnull(t);
    void *ext = malloc((size_t)t->extent_size);
    ck_assert_int_eq(tx_smd_read_extent(s, t, ext, (size_t)t->extent_size, 1, err, sizeof(err)), 0);
    float *v = malloc((size_t)t->rows * t->cols * sizeof(float));
    ck_assert_int_eq(tx_smd_dequant(t, ext, v, err, sizeof(err)), 0);
    free(ext);
    if (tp)
        *tp = t;
    return v;
}

static float *ckpt_values(struct tx_ckpt *c, const char *name)
{
    const struct tx_ckpt_tensor *ct = tx_ckpt_find(c, name);
    ck_assert_ptr_nonnull(ct);
    float *v = malloc(ct->t->nelem * sizeof(float));
    ck_assert_int_eq(tx_tensor_read_f32(ct->t, 0, ct->t->nelem, v, err, sizeof(err)), 0);
    return v;
}

static int n_mtp, n_unknown;
static void count_ignored(void *ctx, const char *name, int is_mtp)
{
    ck_assert_ptr_eq(ctx, &n_mtp);
    ck_assert_ptr_nonnull(strstr(name, "model.layers.3."));
    *(is_mtp ? &n_mtp : &n_unknown) += 1;
}

/* DeepSeek-V3 (synthetic, the real tensor names): every tensor exported,
 * the MLA projections without any DSA indexer tensor */
START_TEST(export_dsv3)
{
    const char *in = make_ckpt(GLM_ARCH_DEEPSEEK_V3);
    const char *out = tm_path("d3.smd");
    struct tx_export_opts o;
    tx_export_default_opts(&o);
    o.threads = 2;
    struct tx_export_stats st;
    ck_assert_msg(tx_export(in, out, &o, &st, err, sizeof(err)) == 0, "%s", err);
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(st.tensors, tx_ckpt_count(c));
    ck_assert_uint_eq(st.ignored, 4); /* the MTP layer (num_nextn_predict_layers 1), as GLM's */
    struct tx_smd *s;
    ck_assert_int_eq(tx_smd_open(out, TX_SMD_OPEN_VERIFY, &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_smd_tensor_count(s), tx_ckpt_count(c));
    ck_assert_ptr_nonnull(strstr(tx_smd_metadata_json(s, NULL), "\"model_name\": \"DeepSeek-V3\""));
    ck_assert_ptr_nonnull(tx_smd_find(s, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight"));
    ck_assert_ptr_nonnull(tx_smd_find(s, "model.layers.2.mlp.gate.e_score_correction_bias"));
    ck_assert_ptr_nonnull(tx_smd_find(s, "model.layers.1.mlp.shared_experts.down_proj.weight"));
    ck_assert_ptr_null(tx_smd_find(s, "model.layers.0.self_attn.indexer.wk.weight"));
    tx_smd_close(s);
    tx_ckpt_close(c);
}
END_TEST

/* DeepSeek-V3's FP8 release layout (quantization_config fp8, F8_E4M3
 * weights and F32 <weight>_scale_inv block scales) converts (issue 38;
 * tests/unit/test_fp8.c has the loader's own tests); a scale-less F8_E4M3
 * weight is refused naming the tensor, and nothing is written */
START_TEST(export_dsv3_fp8)
{
    const char *in = tm_path("ckpt8");
    struct tx_synth_opts so = {.arch = GLM_ARCH_DEEPSEEK_V3,
                               .preset = TX_SYNTH_TINY,
                               .seed = 5,
                               .vocab_size = 256,
                               .threads = 2,
                               .fp8 = 1};
    ck_assert_int_eq(tx_synth_write(in, &so, err, sizeof(err)), 0);
    char p[600], q[600];
    snprintf(p, sizeof(p), "%s/tokenizer.json", in);
    tm_write(p, TM_TOKENIZER, strlen(TM_TOKENIZER));
    const char *out = tm_path("fp8.smd");
    struct tx_export_opts eo;
    tx_export_default_opts(&eo);
    eo.threads = 2;
    struct tx_export_stats st;
    ck_assert_msg(tx_export(in, out, &eo, &st, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(access(out, F_OK), 0);
    ck_assert_int_eq(unlink(out), 0);
    /* drop q_a_proj's scales */
    const char *w8 = "model.layers.0.self_attn.q_a_proj.weight_scale_inv";
    snprintf(p, sizeof(p), "%s/model.safetensors", in);
    snprintf(q, sizeof(q), "%s/fp8.safetensors", in);
    struct tx_st_file *f;
    ck_assert_int_eq(tx_st_open(p, &f, err, sizeof(err)), 0);
    size_t n = tx_st_count(f), nd = 0;
    struct tx_tensor_decl *d = calloc(n + 1, sizeof(*d));
    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < n; i++) {
        const struct tx_tensor *t = tx_st_tensor(f, i);
        if (strcmp(t->name, w8) == 0)
            continue;
        d[nd].name = t->name;
        d[nd].type = t->type;
        d[nd].ndim = t->ndim;
        memcpy(d[nd].shape, t->shape, sizeof(d[nd].shape));
        nd++;
    }
    struct tx_st_writer *wr;
    ck_assert_int_eq(tx_st_writer_open(q, d, nd, NULL, &wr, err, sizeof(err)), 0);
    for (size_t i = 0; i < n; i++) {
        const struct tx_tensor *t = tx_st_tensor(f, i);
        if (strcmp(t->name, w8))
            ck_assert_int_eq(tx_st_writer_write(wr, t->data, (size_t)t->nbytes, err, sizeof(err)),
                             0);
    }
    ck_assert_int_eq(tx_st_writer_finish(wr, err, sizeof(err)), 0);
    tx_st_close(f);
    free(d);
    ck_assert_int_eq(rename(q, p), 0);
    ck_assert_int_lt(tx_export(in, out, &eo, &st, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, w8) && strstr(err, "F8_E4M3") && strstr(err, "missing"), "%s", err);
    ck_assert_int_ne(access(out, F_OK), 0);
}
END_TEST

START_TEST(export_golden)
{
    const char *in = make_ckpt(GLM_ARCH_GLM_MOE_DSA);
    const char *out = tm_path("g.smd");
    struct tx_export_opts o;
    tx_export_default_opts(&o);
    o.threads = 2;
    o.on_ignored = count_ignored;
    o.ctx = &n_mtp;
    struct tx_export_stats st;
    ck_assert_int_eq(tx_export(in, out, &o, &st, err, sizeof(err)), 0);
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(st.tensors, tx_ckpt_count(c));
    ck_assert_uint_eq(st.ignored, 4);
    ck_assert_int_eq(n_mtp, 4); /* the MTP layer of the 3-layer tiny preset */
    ck_assert_int_eq(n_unknown, 0);
    ck_assert_uint_eq(st.input_bytes, tx_ckpt_bytes(c));
    ck_assert_uint_eq(st.pruned_elems, 0);
    struct tx_smd *s;
    ck_assert_int_eq(tx_smd_open(out, TX_SMD_OPEN_VERIFY, &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_smd_tensor_count(s), tx_ckpt_count(c));
    ck_assert_ptr_nonnull(strstr(tx_smd_metadata_json(s, NULL), "\"model_name\": \"GLM-5.1\""));
    /* the source is recorded: absolute path and the content hash */
    {
        uint32_t h;
        ck_assert_int_eq(tx_ckpt_source_hash(c, &h, err, sizeof(err)), 0);
        ck_assert_uint_eq(h, st.source_hash);
        char want[PATH_MAX + 64], abs[PATH_MAX];
        ck_assert_ptr_nonnull(realpath(in, abs));
        snprintf(want, sizeof(want), "\"source_hash\": \"crc32c:%08x\"", h);
        ck_assert_ptr_nonnull(strstr(tx_smd_metadata_json(s, NULL), want));
        snprintf(want, sizeof(want), "\"source_path\": \"%s\"", abs);
        ck_assert_msg(strstr(tx_smd_metadata_json(s, NULL), want), "%s",
                      tx_smd_metadata_json(s, NULL));
        uint32_t h2;
        ck_assert_int_eq(tx_ckpt_source_hash(c, &h2, err, sizeof(err)), 0);
        ck_assert_uint_eq(h, h2);
    }
    size_t cl;
    ck_assert_str_eq(tx_smd_config_json(s, NULL), tx_ckpt_config_json(c, &cl));
    ck_assert_str_eq(tx_smd_tokenizer_json(s, NULL), TM_TOKENIZER);
    /* storage type of every tensor follows the plan */
    for (size_t i = 0; i < tx_ckpt_count(c); i++) {
        const struct tx_ckpt_tensor *ct = tx_ckpt_tensor(c, i);
        const struct tx_smd_tensor *t = tx_smd_find(s, ct->info.name);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->layer, ct->info.layer);
        ck_assert_int_eq(t->expert, ct->info.expert);
        unsigned want = TX8_DTYPE_F32;
        if (ct->info.ndim == 2)
            switch (ct->info.cls) {
            case GLM_TC_EMBEDDING:
            case GLM_TC_MLP:
            case GLM_TC_EXPERT:
                want = TX8_DTYPE_I8;
                break;
            case GLM_TC_ATTENTION:
                want = TX8_DTYPE_F16;
                break;
            default:
                break;
            }
        ck_assert_msg(t->dtype == want, "%s stored as %u", ct->info.name, t->dtype);
        ck_assert_uint_eq(t->format, TX8_WFMT_DENSE);
        ck_assert_uint_eq(t->group_size, 0);
    }
    /* INT8 error of the experts is small */
    double e = sqrt(st.sq_err[TX_SMD_LAYER_EXPERT] / st.sq_ref[TX_SMD_LAYER_EXPERT]);
    ck_assert_msg(e > 0 && e < 0.02, "expert error %g", e);
    ck_assert(st.sq_err[TX_SMD_LAYER_NORM] == 0);
    tx_smd_close(s);
    tx_ckpt_close(c);
    ck_assert_int_eq(tm_count_files(), 2); /* ckpt dir and the package */
}
END_TEST

static void none_exact(enum glm_arch arch)
{
    const char *in = make_ckpt(arch);
    const char *out = tm_path("n.smd");
    struct tx_export_opts o;
    tx_export_default_opts(&o);
    ck_assert_int_eq(tx_plan_apply_quant(o.plan, "none", err, sizeof(err)), 0);
    struct tx_export_stats st;
    ck_assert_int_eq(tx_export(in, out, &o, &st, err, sizeof(err)), 0);
    struct tx_ckpt *c;
    struct tx_smd *s;
    ck_assert_int_eq(tx_ckpt_open(in, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_open(out, 0, &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_smd_header(s)->flags, 0);
    for (size_t i = 0; i < tx_ckpt_count(c); i++) {
        const char *n = tx_ckpt_tensor(c, i)->info.name;
        const struct tx_smd_tensor *t;
        float *a = ckpt_values(c, n), *b = smd_values(s, n, &t);
        ck_assert_uint_eq(t->dtype, TX8_DTYPE_F32);
        ck_assert_mem_eq(a, b, tx_ckpt_tensor(c, i)->t->nelem * sizeof(float));
        free(a);
        free(b);
    }
    tx_smd_close(s);
    tx_ckpt_close(c);
}

START_TEST(export_none_exact)
{
    none_exact(GLM_ARCH_GLM4_MOE);
}
END_TEST

/* Qwen3-MoE: the real tensor names (no router bias, no shared expert, q/k
 * norms, a dense layer from mlp_only_layers) exported exactly, then under
 * the golden plan */
START_TEST(export_qwen3_moe)
{
    none_exact(GLM_ARCH_QWEN3_MOE);
    const char *in = tm_path("ckpt");
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(in, &c, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(tx_ckpt_find(c, "model.layers.0.self_attn.q_norm.weight"));
    ck_assert_ptr_nonnull(tx_ckpt_find(c, "model.layers.0.mlp.gate.weight"));
    ck_assert_ptr_nonnull(tx_ckpt_find(c, "model.layers.1.mlp.gate_proj.weight"));
    ck_assert_ptr_null(tx_ckpt_find(c, "model.layers.0.mlp.gate.e_score_correction_bias"));
    ck_assert_ptr_null(tx_ckpt_find(c, "model.layers.0.self_attn.q_proj.bias"));
    size_t n = tx_ckpt_count(c);
    tx_ckpt_close(c);
    const char *out = tm_path("q3g.smd");
    struct tx_export_opts o;
    tx_export_default_opts(&o);
    struct tx_export_stats st;
    ck_assert_msg(tx_export(in, out, &o, &st, err, sizeof(err)) == 0, "%s", err);
    struct tx_smd *s;
    ck_assert_int_eq(tx_smd_open(out, 0, &s, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(tx_smd_find(s, "model.layers.2.mlp.experts.7.down_proj.weight"));
    ck_assert_ptr_nonnull(tx_smd_find(s, "model.layers.2.self_attn.k_norm.weight"));
    ck_assert_uint_eq(tx_smd_header(s)->tensor_count, n);
    tx_smd_close(s);
}
END_TEST

START_TEST(export_sparse)
{
    const char *in = make_ckpt(GLM_ARCH_GLM4_MOE);
    const char *out = tm_path("s.smd");
    struct tx_export_opts o;
    tx_export_default_opts(&o);
    o.plan[TX_SMD_LAYER_MLP].flags |= TX_SMD_PLANF_SPARSE;
    o.plan[TX_SMD_LAYER_EXPERT].flags |= TX_SMD_PLANF_SPARSE;
    o.plan[TX_SMD_LAYER_EXPERT].group_size = 32;
    o.threads = 2;
    struct tx_export_stats st;
    ck_assert_int_eq(tx_export(in, out, &o, &st, err, sizeof(err)), 0);
    /* tiny: every FFN matrix has an even number of blocks */
    ck_assert(st.sparse_tensors > 0);
    ck_assert_double_eq(st.pruned_fraction, 0.5);
    ck_assert_double_eq_tol(st.ffn_mac_reduction, 0.5, 1e-12);
    ck_assert(st.model_mac_reduction > 0 && st.model_mac_reduction < 0.5);
    struct tx_ckpt *c;
    struct tx_smd *s;
    ck_assert_int_eq(tx_ckpt_open(in, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_open(out, TX_SMD_OPEN_VERIFY, &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_smd_header(s)->flags, TX_SMD_F_QUANTIZED | TX_SMD_F_SPARSE);
    ck_assert_uint_eq(tx_smd_plan(s, TX_SMD_LAYER_EXPERT)->flags, TX_SMD_PLANF_SPARSE);
    /* an expert matrix: sparse, grouped, equal to the independently pruned
     * and quantised source */
    const char *n = "model.layers.2.mlp.experts.5.down_proj.weight";
    const struct tx_smd_tensor *t;
    float *src = ckpt_values(c, n), *got = smd_values(s, n, &t);
    ck_assert_uint_eq(t->format, TX8_WFMT_BLOCK_SPARSE);
    ck_assert_uint_eq(t->dtype, TX8_DTYPE_I8);
    ck_assert_uint_eq(t->group_size, 32);
    ck_assert_uint_eq(t->nnz_blocks, t->rows * (t->cols / 32) / 2);
    prune_ref(src, t->rows, t->cols, t->cols / 64);
    int8_t *q = malloc((size_t)t->rows * t->cols);
    float *sc = malloc((size_t)t->rows * t->cols / 32 * sizeof(float));
    float *want = malloc((size_t)t->rows * t->cols * sizeof(float));
    ck_assert_int_eq(tx_quant_matrix(src, t->rows, t->cols, TX8_DTYPE_I8, TX8_WFMT_DENSE, 32, 0, q,
                                     sc, NULL, NULL, err, sizeof(err)),
                     0);
    ck_assert_int_eq(tx_weight_dequant(TX8_DTYPE_I8, TX8_WFMT_DENSE, t->rows, t->cols, 32, 0, q, sc,
                                       NULL, want, err, sizeof(err)),
                     0);
    ck_assert_mem_eq(got, want, (size_t)t->rows * t->cols * sizeof(float));
    /* the synthetic block structure makes pruning cheap */
    double e = sqrt(st.sq_err[TX_SMD_LAYER_EXPERT] / st.sq_ref[TX_SMD_LAYER_EXPERT]);
    ck_assert_msg(e < 0.1, "sparse expert error %g", e);
    /* attention is not pruned */
    ck_assert_uint_eq(tx_smd_find(s, "model.layers.2.self_attn.q_proj.weight")->format,
                      TX8_WFMT_DENSE);
    free(src);
    free(got);
    free(q);
    free(sc);
    free(want);
    tx_smd_close(s);
    tx_ckpt_close(c);
}
END_TEST

START_TEST(export_errors)
{
    struct tx_export_opts o;
    tx_export_default_opts(&o);
    const char *out = tm_path("e.smd");
    ck_assert_int_eq(tx_export(tm_path("none"), out, &o, NULL, err, sizeof(err)), TX_ENOENT);
    ck_assert_int_eq(tm_count_files(), 0);
    const char *in = make_ckpt(GLM_ARCH_GLM_MOE_DSA);
    /* no tokenizer */
    char tp[600];
    snprintf(tp, sizeof(tp), "%s/tokenizer.json", in);
    remove(tp);
    ck_assert_int_eq(tx_export(in, out, &o, NULL, err, sizeof(err)), TX_ENOENT);
    tm_err_has(err, "tokenizer");
    o.tokenizer = tm_path("tok.json");
    tm_write(o.tokenizer, TM_TOKENIZER, strlen(TM_TOKENIZER));
    /* a value out of the FP16 range in an attention matrix */
    const char *victim = "model.layers.1.self_attn.q_b_proj.weight";
    char sp[600];
    snprintf(sp, sizeof(sp), "%s/model.safetensors", in);
    struct tx_st_file *f;
    ck_assert_int_eq(tx_st_open(sp, &f, err, sizeof(err)), 0);
    uint64_t off = tx_st_find(f, victim)->file_offset;
    tx_st_close(f);
    size_t len;
    unsigned char *b = tm_read(sp, &len);
    uint16_t big = tx_f32_to_bf16(1e6f);
    memcpy(b + off + 6, &big, 2);
    tm_write(sp, b, len);
    free(b);
    int before = tm_count_files();
    ck_assert_int_eq(tx_export(in, out, &o, NULL, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, victim);
    tm_err_has(err, "FP16");
    ck_assert_int_eq(tm_count_files(), before); /* no output, no temporary file */
    /* BF16 attention takes it */
    ck_assert_int_eq(tx_plan_apply_spec(o.plan, "attention=bf16", err, sizeof(err)), 0);
    ck_assert_int_eq(tx_export(in, out, &o, NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(tm_count_files(), before + 1);
    remove(out);
    /* cancellation */
    volatile int cancel = 1;
    o.cancel = &cancel;
    ck_assert_int_eq(tx_export(in, out, &o, NULL, err, sizeof(err)), TX_ECANCELED);
    ck_assert_int_eq(tm_count_files(), before);
    o.cancel = NULL;
    /* bad options */
    o.sparsity = 1.0;
    ck_assert_int_eq(tx_export(in, out, &o, NULL, err, sizeof(err)), TX_EINVAL);
    o.sparsity = 0.5;
    o.plan[TX_SMD_LAYER_MLP].group_size = 48;
    ck_assert_int_eq(tx_export(in, out, &o, NULL, err, sizeof(err)), TX_EINVAL);
    ck_assert_int_eq(tm_count_files(), before);
}
END_TEST

/* Bad input never makes a package: every section is checked before the
 * output is committed, non-finite weights are refused naming the tensor,
 * and nothing is left behind. */
START_TEST(export_bad_input)
{
    struct tx_export_opts o;
    tx_export_default_opts(&o);
    o.threads = 2;
    const char *out = tm_path("b.smd");
    const char *in = make_ckpt(GLM_ARCH_GLM4_MOE);
    int before = tm_count_files();
    /* a truncated tokenizer.json */
    size_t n = strlen(TM_TOKENIZER);
    o.tokenizer = tm_path("truncated.json");
    tm_write(o.tokenizer, TM_TOKENIZER, n / 2);
    ck_assert_int_eq(tx_export(in, out, &o, NULL, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "truncated.json");
    tm_err_has(err, "nothing written");
    ck_assert_int_eq(tm_count_files(), before + 1);
    /* a JSON object that is not a tokenizer the loader takes */
    tm_write(o.tokenizer, "{\"model\": 7}", 12);
    ck_assert_int_eq(tx_export(in, out, &o, NULL, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "not a tokenizer glm-inference can load");
    ck_assert_int_eq(tm_count_files(), before + 1);
    o.tokenizer = NULL;
    /* a truncated tokenizer_config.json */
    o.tokenizer_config = tm_path("tc.json");
    tm_write(o.tokenizer_config, "{\"chat_template\": \"x", 20);
    ck_assert_int_eq(tx_export(in, out, &o, NULL, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "tc.json");
    ck_assert_int_eq(tm_count_files(), before + 2);
    o.tokenizer_config = NULL;
    /* a NaN and an infinity in the weights, for every storage type */
    static const char *const quants[] = {"none", "fp16", "bf16", "int8", "fp8"};
    const char *victim = "model.layers.1.mlp.experts.2.up_proj.weight";
    char sp[600];
    snprintf(sp, sizeof(sp), "%s/model.safetensors", in);
    struct tx_st_file *f;
    ck_assert_int_eq(tx_st_open(sp, &f, err, sizeof(err)), 0);
    const struct tx_tensor *vt = tx_st_find(f, victim);
    ck_assert_ptr_nonnull(vt);
    uint64_t off = vt->file_offset;
    size_t es = tx_elem_size(vt->type);
    tx_st_close(f);
    size_t len;
    unsigned char *b = tm_read(sp, &len);
    for (int k = 0; k < 2; k++) {
        float bad = k ? INFINITY : NAN;
        if (es == 2) {
            uint16_t h = tx_f32_to_bf16(bad);
            memcpy(b + off + 2 * 13, &h, 2);
        } else {
            memcpy(b + off + 4 * 13, &bad, 4);
        }
        tm_write(sp, b, len);
        for (int q = 0; q < 5; q++) {
            ck_assert_int_eq(tx_plan_apply_quant(o.plan, quants[q], err, sizeof(err)), 0);
            ck_assert_int_eq(tx_export(in, out, &o, NULL, err, sizeof(err)), TX_EINVAL);
            tm_err_has(err, victim);
            tm_err_has(err, "non-finite");
            tm_err_has(err, "[0, 13]");
            ck_assert_int_eq(tm_count_files(), before + 2);
        }
    }
    free(b);
}
END_TEST

/* One precision syntax: glm-export --precision / --quant and glm-inference
 * --precision parse the same words into the same plan. */
START_TEST(precision_words)
{
    static const char *const words[] = {"golden",         "fp32",
                                        "fp16",           "bf16",
                                        "int8",           "golden,output=fp16",
                                        "all=bf16",       "mlp=int8,attention=fp16",
                                        "fp16,norm=fp16", "GLM_MLP=bf16"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        struct tx_smd_plan_entry p[TX_SMD_LAYER_COUNT];
        tx_plan_golden(p);
        glm_precision_plan_t g;
        glm_plan_golden(&g);
        ck_assert_msg(tx_plan_apply_spec(p, words[i], err, sizeof(err)) == 0, "%s: %s", words[i],
                      err);
        ck_assert_int_eq(glm_plan_parse(words[i], &g), TX_OK);
        for (int l = 0; l < GLM_LAYER_TYPE_COUNT; l++)
            ck_assert_msg(p[l].precision == (uint32_t)g.precision[l], "%s: layer %d: %u vs %d",
                          words[i], l, p[l].precision, (int)g.precision[l]);
        ck_assert_uint_eq(p[TX_SMD_LAYER_ROUTER].precision, TX_SMD_PREC_FP32);
    }
    /* fp16: every matrix type FP16, norms FP32, in both */
    glm_precision_plan_t g;
    ck_assert_int_eq(glm_plan_parse("fp16", &g), TX_OK);
    ck_assert_int_eq(g.precision[GLM_NORM], GLM_PRECISION_FP32);
    ck_assert_int_eq(g.precision[GLM_ATTENTION], GLM_PRECISION_FP16);
    /* --quant is --precision with a whole plan (int8 = golden) */
    static const char *const q[][2] = {
        {"none", "fp32"}, {"fp16", "fp16"}, {"bf16", "bf16"}, {"int8", "golden"}};
    for (size_t i = 0; i < 4; i++) {
        struct tx_smd_plan_entry a[TX_SMD_LAYER_COUNT], b[TX_SMD_LAYER_COUNT];
        tx_plan_golden(a);
        tx_plan_golden(b);
        ck_assert_int_eq(tx_plan_apply_quant(a, q[i][0], err, sizeof(err)), 0);
        ck_assert_int_eq(tx_plan_apply_spec(b, q[i][1], err, sizeof(err)), 0);
        ck_assert_mem_eq(a, b, sizeof(a));
    }
    /* errors name the option and the word */
    struct tx_smd_plan_entry p[TX_SMD_LAYER_COUNT];
    tx_plan_golden(p);
    ck_assert_int_eq(tx_plan_apply_spec(p, "fp4", err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "--precision");
    tm_err_has(err, "fp4");
    /* the prefixed precision names are the article's */
    ck_assert_int_eq(GLM_PRECISION_FP32, FP32);
    ck_assert_int_eq(GLM_PRECISION_FP16, FP16);
    ck_assert_int_eq(GLM_PRECISION_BF16, BF16);
    ck_assert_int_eq(GLM_PRECISION_INT8_MIXED, INT8_MIXED);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("export");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tm_setup, tm_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, int8_accuracy);
    tcase_add_test(tc, fp16_bf16);
    tcase_add_test(tc, sparse_f32);
    tcase_add_test(tc, sparse_int8);
    tcase_add_test(tc, keep_blocks);
    tcase_add_test(tc, plans);
    tcase_add_test(tc, export_golden);
    tcase_add_test(tc, export_dsv3);
    tcase_add_test(tc, export_dsv3_fp8);
    tcase_add_test(tc, export_none_exact);
    tcase_add_test(tc, export_qwen3_moe);
    tcase_add_test(tc, export_sparse);
    tcase_add_test(tc, export_errors);
    tcase_add_test(tc, export_bad_input);
    tcase_add_test(tc, precision_words);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
