// SPDX-License-Identifier: MIT
/*
 * FP8 block-quantised checkpoints (issue 38): the E4M3 conversions (every
 * code, NaN, subnormals, rounding), the quantization_config check, the
 * Hugging Face block quantiser with edge blocks, glm-synth --fp8 for the
 * four architectures, the loader's binding of the <name>_scale_inv
 * companions and its errors, and export from FP8 (no partial output).
 */
#include "test_model_util.h"

#include <math.h>
#include <inttypes.h>
#include <stdint.h>

#include <json-c/json.h>

#include <tx-internal/tx_analyze.h>
#include <tx-internal/tx_checkpoint.h>
#include <tx/tx_dtype.h>
#include <tx/tx_error.h>
#include <tx-internal/tx_export.h>
#include <tx-internal/tx_safetensors.h>
#include <tx-internal/tx_synth.h>

#include <tx-internal/tx_fp8.h>
#include <tx-internal/tx_model_internal.h>
#include "tx_test_main.h"

static char err[TX_ERR_MAX];

/* E4M3FN from its definition, in double: (-1)^s 2^(e-7) (1 + m/8), e > 0;
 * (-1)^s 2^-6 (m/8), e = 0; S.1111.111 NaN */
static double e4m3_ref(unsigned b)
{
    unsigned s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7)
        return NAN;
    double v = e ? ldexp(1.0 + m / 8.0, (int)e - 7) : ldexp(m / 8.0, -6);
    return s ? -v : v;
}

START_TEST(e4m3_every_code)
{
    int nan = 0, sub = 0;
    for (unsigned b = 0; b < 256; b++) {
        float f = tx_e4m3_to_f32((uint8_t)b);
        double r = e4m3_ref(b);
        if (isnan(r)) {
            ck_assert_msg(isnan(f), "code 0x%02x", b);
            ck_assert(b == 0x7f || b == 0xff);
            nan++;
            continue;
        }
        ck_assert_msg((double)f == r, "code 0x%02x: %.9g vs %.9g", b, (double)f, r);
        ck_assert_int_eq(signbit(f) != 0, (b & 0x80) != 0); /* -0 too */
        if (((b >> 3) & 15) == 0 && (b & 7))
            sub++;
        /* every finite code survives the round trip */
        ck_assert_msg(tx_f32_to_e4m3(f) == b, "round trip of 0x%02x gives 0x%02x", b,
                      tx_f32_to_e4m3(f));
    }
    ck_assert_int_eq(nan, 2);
    ck_assert_int_eq(sub, 14);
    ck_assert(tx_e4m3_to_f32(0x7e) == 448.0f);
    ck_assert(tx_e4m3_to_f32(0xfe) == -448.0f);
    ck_assert(tx_e4m3_to_f32(0x01) == 0x1p-9f); /* smallest subnormal */
    ck_assert(tx_e4m3_to_f32(0x07) == 0x7p-9f); /* largest subnormal */
    ck_assert(tx_e4m3_to_f32(0x08) == 0x1p-6f); /* smallest normal */
    ck_assert(tx_e4m3_to_f32(0x78) == 256.0f);  /* no infinity at exponent 15 */
}
END_TEST

/* The nearest finite code by search, ties to the even code; NaN beyond
 * 464 (PyTorch's float8_e4m3fn conversion). */
static unsigned e4m3_nearest(float x)
{
    if (isnan(x) || fabsf(x) > 464.0f)
        return signbit(x) ? 0xff : 0x7f;
    unsigned sign = signbit(x) ? 0x80 : 0;
    double a = fabs((double)x), best = INFINITY;
    unsigned bc = 0;
    for (unsigned m = 0; m <= 0x7e; m++) {
        double d = fabs(e4m3_ref(m) - a);
        if (d < best || (d == best && !(m & 1))) {
            best = d;
            bc = m;
        }
    }
    return sign | bc;
}

START_TEST(e4m3_rounding)
{
    /* every midpoint between neighbouring codes and points either side */
    for (unsigned m = 0; m < 0x7e; m++) {
        double lo = e4m3_ref(m), hi = e4m3_ref(m + 1);
        float mid = (float)((lo + hi) / 2);
        float pts[] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), (float)lo, (float)hi};
        for (size_t k = 0; k < sizeof(pts) / sizeof(pts[0]); k++)
            for (int s = 0; s < 2; s++) {
                float x = s ? -pts[k] : pts[k];
                ck_assert_msg(tx_f32_to_e4m3(x) == e4m3_nearest(x), "%.9g: 0x%02x vs 0x%02x",
                              (double)x, tx_f32_to_e4m3(x), e4m3_nearest(x));
            }
    }
    unsigned seed = 7;
    for (int i = 0; i < 200000; i++) {
        float x = ldexpf(tm_rand(&seed), (int)(seed % 26) - 16);
        ck_assert_msg(tx_f32_to_e4m3(x) == e4m3_nearest(x), "%.9g", (double)x);
    }
    ck_assert_uint_eq(tx_f32_to_e4m3(464.0f), 0x7e);
    ck_assert_uint_eq(tx_f32_to_e4m3(nextafterf(464.0f, 1000)), 0x7f);
    ck_assert_uint_eq(tx_f32_to_e4m3(-500.0f), 0xff);
    ck_assert_uint_eq(tx_f32_to_e4m3(INFINITY), 0x7f);
    ck_assert_uint_eq(tx_f32_to_e4m3(NAN), 0x7f);
    ck_assert_uint_eq(tx_f32_to_e4m3(0x1p-10f), 0x00); /* tie to even: 0 */
    ck_assert_uint_eq(tx_f32_to_e4m3(0x3p-10f), 0x02); /* tie to even: 2^-8 */
    ck_assert_uint_eq(tx_f32_to_e4m3(1e-30f), 0x00);
    ck_assert_uint_eq(tx_f32_to_e4m3(-0.0f), 0x80);
}
END_TEST

static int quant_refused(const char *qc, const char *field, const char *value)
{
    char cj[512];
    snprintf(cj, sizeof(cj), "{\"hidden_size\": 8, \"quantization_config\": %s}", qc);
    struct txm_quant_config q;
    int rc = txm_quant_config_parse(cj, "cfg.json", &q, err, sizeof(err));
    ck_assert_msg(rc == TX_ENOTSUP, "%s: rc %d (%s)", qc, rc, err);
    ck_assert_msg(strstr(err, "cfg.json") && strstr(err, field) && strstr(err, value), "%s: %s", qc,
                  err);
    return 1;
}

START_TEST(quant_config)
{
    struct txm_quant_config q;
    ck_assert_int_eq(txm_quant_config_parse("{\"hidden_size\": 8}", "c", &q, err, sizeof(err)), 0);
    ck_assert_int_eq(q.fp8, 0);
    const char *ok = "{\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": "
                     "\"e4m3\", \"quant_method\": \"fp8\", \"weight_block_size\": [128, 128], "
                     "\"modules_to_not_convert\": [\"lm_head\"]}}";
    ck_assert_int_eq(txm_quant_config_parse(ok, "c", &q, err, sizeof(err)), 0);
    ck_assert_int_eq(q.fp8, 1);
    ck_assert_uint_eq(q.block_rows, 128);
    ck_assert_uint_eq(q.block_cols, 128);
    /* Qwen3's FP8 config has no activation_scheme default issue: absent is dynamic */
    ck_assert_int_eq(txm_quant_config_parse("{\"quantization_config\": {\"quant_method\": "
                                            "\"fp8\", \"weight_block_size\": [128, 128]}}",
                                            "c", &q, err, sizeof(err)),
                     0);
    ck_assert_int_eq(q.fp8, 1);
    quant_refused("{\"quant_method\": \"gptq\", \"bits\": 4}", "quant_method", "\"gptq\"");
    quant_refused("{\"quant_method\": \"awq\"}", "quant_method", "\"awq\"");
    quant_refused("{\"quant_method\": \"compressed-tensors\"}", "quant_method",
                  "\"compressed-tensors\"");
    quant_refused("{\"bits\": 4}", "quant_method", "(missing)");
    quant_refused("{\"quant_method\": \"fp8\", \"fmt\": \"e5m2\", \"weight_block_size\": [128, "
                  "128]}",
                  "fmt", "\"e5m2\"");
    quant_refused("{\"quant_method\": \"fp8\", \"activation_scheme\": \"static\", "
                  "\"weight_block_size\": [128, 128]}",
                  "activation_scheme", "\"static\"");
    quant_refused("{\"quant_method\": \"fp8\", \"weight_block_size\": [64, 64]}",
                  "weight_block_size", "[64,64]");
    quant_refused("{\"quant_method\": \"fp8\", \"weight_block_size\": [128]}", "weight_block_size",
                  "[128]");
    quant_refused("{\"quant_method\": \"fp8\"}", "weight_block_size", "per-tensor");
    ck_assert_int_eq(
        txm_quant_config_parse("{\"quantization_config\": 3}", "c", &q, err, sizeof(err)),
        TX_EINVAL);
}
END_TEST

/* the Hugging Face quantiser on 200 x 300: blocks of 128 and edge blocks of
 * 72 rows / 44 columns */
START_TEST(quantise_blocks)
{
    const uint32_t R = 200, C = 300, BR = 128, BC = 128;
    float *x = malloc((size_t)R * C * sizeof(float));
    uint8_t *q = malloc((size_t)R * C);
    float sc[2][3];
    unsigned seed = 3;
    for (uint32_t i = 0; i < R * C; i++)
        x[i] = tm_rand(&seed) * (1.0f + (float)((i % C) / BC) * 10.0f);
    memset(x + 130 * C + 256, 0, 44 * sizeof(float)); /* a row of the edge block: zeros */
    for (uint32_t r0 = 0, b = 0; r0 < R; r0 += BR, b++) {
        uint32_t nr = R - r0 < BR ? R - r0 : BR;
        txm_fp8_quantise_band(x + (size_t)r0 * C, nr, C, BC, q + (size_t)r0 * C, sc[b]);
    }
    for (uint32_t br = 0; br < 2; br++)
        for (uint32_t bc = 0; bc < 3; bc++) {
            uint32_t r1 = br ? R : BR, c1 = bc == 2 ? C : (bc + 1) * BC;
            float amax = 0;
            for (uint32_t r = br * BR; r < r1; r++)
                for (uint32_t c = bc * BC; c < c1; c++)
                    amax = fmaxf(amax, fabsf(x[(size_t)r * C + c]));
            float s = 448.0f / amax;
            ck_assert(sc[br][bc] == 1.0f / s);
            int hit = 0;
            for (uint32_t r = br * BR; r < r1; r++)
                for (uint32_t c = bc * BC; c < c1; c++) {
                    size_t i = (size_t)r * C + c;
                    ck_assert_uint_eq(q[i],
                                      tx_f32_to_e4m3(fmaxf(-448.0f, fminf(448.0f, x[i] * s))));
                    float d = tx_e4m3_to_f32(q[i]) * sc[br][bc];
                    /* half an E4M3 step: 2^-4 relative, 2^-10 x scale for subnormals */
                    ck_assert(fabsf(d - x[i]) <=
                              fmaxf(fabsf(x[i]) * 0x1p-4f, 0x1p-10f * sc[br][bc]) * 1.0001f);
                    hit |= fabsf(tx_e4m3_to_f32(q[i])) == 448.0f;
                }
            ck_assert(hit); /* the block's largest element maps to +-448 */
        }
    /* an all-zero block */
    float z[4] = {0}, zs[1];
    uint8_t zq[4];
    txm_fp8_quantise_band(z, 2, 2, BC, zq, zs);
    ck_assert(zs[0] == 0.0f && !zq[0] && !zq[3]);
    free(x);
    free(q);
}
END_TEST

static const char *synth(const char *name, enum glm_arch arch, const char *set, uint64_t shard)
{
    const char *d = tm_path(name);
    struct tx_synth_opts o = {.arch = arch,
                              .preset = TX_SYNTH_TINY,
                              .seed = 11,
                              .vocab_size = 256,
                              .threads = 2,
                              .fp8 = 1,
                              .config_set = set,
                              .shard_bytes = shard};
    ck_assert_msg(tx_synth_write(d, &o, err, sizeof(err)) == 0, "%s", err);
    char p[600];
    snprintf(p, sizeof(p), "%s/tokenizer.json", d);
    tm_write(p, TM_TOKENIZER, strlen(TM_TOKENIZER));
    return d;
}

/* every F8_E4M3 weight: bound, its values e4m3 x block scale from the raw
 * bytes, and within half an E4M3 step of the synthetic value */
static void check_ckpt(const char *dir, enum glm_arch arch, int want_edges)
{
    struct tx_ckpt *c;
    ck_assert_msg(tx_ckpt_open(dir, &c, err, sizeof(err)) == 0, "%s", err);
    const struct tx_ckpt_storage *st = tx_ckpt_storage(c);
    ck_assert_uint_gt(st->tensors[TX_ELEM_F8_E4M3], 0);
    ck_assert_uint_eq(st->scale_tensors, st->tensors[TX_ELEM_F8_E4M3]);
    ck_assert_uint_gt(st->tensors[TX_ELEM_BF16], 0); /* embedding, norms, router, lm_head */
    int edges = 0;
    uint64_t inexact = 0; /* FP8 values FP32 cannot hold exactly */
    for (size_t i = 0; i < tx_ckpt_count(c); i++) {
        const struct tx_ckpt_tensor *ct = tx_ckpt_tensor(c, i);
        const struct tx_tensor *t = ct->t;
        if (t->type != TX_ELEM_F8_E4M3) {
            ck_assert_ptr_null(t->scale_inv);
            ck_assert(ct->info.ndim != 2 || ct->info.cls == GLM_TC_EMBEDDING ||
                      ct->info.cls == GLM_TC_OUTPUT || ct->info.cls == GLM_TC_ROUTER ||
                      ct->info.keep_fp32);
            continue;
        }
        ck_assert_ptr_nonnull(t->scale_inv);
        uint64_t R = t->shape[0], C = t->shape[1], SC = (C + 127) / 128;
        ck_assert_uint_eq(t->scale_inv->shape[0], (R + 127) / 128);
        ck_assert_uint_eq(t->scale_inv->shape[1], SC);
        edges += (R > 128 && R % 128) || (C > 128 && C % 128);
        float *v = malloc(t->nelem * sizeof(float));
        /* in two pieces across a row boundary, as a streaming reader does */
        uint64_t half = t->nelem / 2 + 3 < t->nelem ? t->nelem / 2 + 3 : t->nelem;
        ck_assert_int_eq(tx_tensor_read_f32(t, 0, half, v, err, sizeof(err)), 0);
        ck_assert_int_eq(tx_tensor_read_f32(t, half, t->nelem - half, v + half, err, sizeof(err)),
                         0);
        /* the float64 reference's reader: exact, in two pieces too */
        double *d = malloc(t->nelem * sizeof(double));
        ck_assert_int_eq(txm_tensor_read_f64(t, 0, half, d, err, sizeof(err)), 0);
        ck_assert_int_eq(txm_tensor_read_f64(t, half, t->nelem - half, d + half, err, sizeof(err)),
                         0);
        ck_assert_int_eq(txm_tensor_read_f64(t, t->nelem, 1, d, err, sizeof(err)), TX_EINVAL);
        const uint8_t *raw = t->data;
        const float *sc = t->scale_inv->data;
        for (uint64_t k = 0; k < t->nelem; k++) {
            uint64_t r = k / C, col = k % C;
            float s;
            memcpy(&s, sc + (r / 128) * SC + col / 128, 4);
            ck_assert(v[k] == tx_e4m3_to_f32(raw[k]) * s);
            ck_assert(d[k] == (double)tx_e4m3_to_f32(raw[k]) * (double)s);
            ck_assert(v[k] == (float)d[k]); /* FP32: that value rounded once */
            inexact += d[k] != (double)v[k];
            float x = tx_synth_value(&ct->info, 11, 0, k);
            ck_assert_msg(fabsf(v[k] - x) <= fmaxf(fabsf(x) * 0x1p-4f, 0x1p-10f * s) * 1.001f,
                          "%s[%" PRIu64 "]: %g vs %g", t->name, k, (double)v[k], (double)x);
        }
        free(v);
        free(d);
    }
    ck_assert_int_eq(edges > 0, want_edges);
    ck_assert_uint_gt(inexact, 0);
    /* the scales are in the source hash */
    uint32_t h1;
    ck_assert_int_eq(tx_ckpt_source_hash(c, &h1, err, sizeof(err)), 0);
    (void)arch;
    tx_ckpt_close(c);
}

START_TEST(synth_four_archs)
{
    static const enum glm_arch archs[] = {GLM_ARCH_GLM4_MOE, GLM_ARCH_GLM_MOE_DSA,
                                          GLM_ARCH_DEEPSEEK_V3, GLM_ARCH_QWEN3_MOE};
    char name[32];
    snprintf(name, sizeof(name), "fp8-%d", _i);
    const char *d = synth(name, archs[_i], NULL, 0);
    check_ckpt(d, archs[_i], 0);
    /* glm-analyze's "stored" report */
    struct glm_config cfg;
    const char *fmt;
    struct tx_ckpt_storage st;
    ck_assert_int_eq(tx_analyze_load_config_storage(d, &cfg, &fmt, &st, err, sizeof(err)), 1);
    ck_assert_int_eq(st.quant_fp8, 1);
    char *sum = tx_storage_summary(&st), *js = tx_storage_json(&st);
    ck_assert_msg(strstr(sum, "FP8 block-quantised") && strstr(sum, "F8_E4M3") &&
                      strstr(sum, "_scale_inv"),
                  "%s", sum);
    ck_assert_msg(strstr(js, "\"scale_bytes\"") && strstr(js, "\"F8_E4M3\""), "%s", js);
    free(sum);
    free(js);
}
END_TEST

/* N and K not multiples of 128 (and above it): edge blocks; sharded with
 * an index */
START_TEST(synth_edges_sharded)
{
    const char *d =
        synth("fp8-edge", GLM_ARCH_QWEN3_MOE, "hidden_size=264,moe_intermediate_size=136", 1 << 20);
    char p[600];
    snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
    ck_assert(tm_exists(p));
    check_ckpt(d, GLM_ARCH_QWEN3_MOE, 1);
}
END_TEST

/* Rewrites DIR/model.safetensors: tensor `name` dropped (shape NULL), or
 * with a new shape and dtype (data: zeros, then `val` as element 0). */
static void rewrite(const char *dir, const char *name, const uint64_t *shape,
                    enum tx_elem_type type, float val)
{
    char p[600], q[600];
    snprintf(p, sizeof(p), "%s/model.safetensors", dir);
    snprintf(q, sizeof(q), "%s/new.safetensors", dir);
    struct tx_st_file *f;
    ck_assert_int_eq(tx_st_open(p, &f, err, sizeof(err)), 0);
    size_t n = tx_st_count(f), nd = 0;
    struct tx_tensor_decl *d = calloc(n + 1, sizeof(*d));
    for (size_t i = 0; i < n; i++) {
        const struct tx_tensor *t = tx_st_tensor(f, i);
        if (!strcmp(t->name, name) && !shape)
            continue;
        d[nd].name = t->name;
        d[nd].type = strcmp(t->name, name) ? t->type : type;
        d[nd].ndim = t->ndim;
        memcpy(d[nd].shape, t->shape, sizeof(d[nd].shape));
        if (!strcmp(t->name, name)) {
            d[nd].ndim = 2;
            d[nd].shape[0] = shape[0];
            d[nd].shape[1] = shape[1];
        }
        nd++;
    }
    int added = 0;
    if (shape && !tx_st_find(f, name)) { /* a new tensor at the end */
        d[nd] = (struct tx_tensor_decl){name, type, 2, {shape[0], shape[1]}};
        nd++;
        added = 1;
    }
    struct tx_st_writer *w;
    ck_assert_int_eq(tx_st_writer_open(q, d, nd, NULL, &w, err, sizeof(err)), 0);
    for (size_t i = 0; i <= n; i++) {
        const struct tx_tensor *t = i < n ? tx_st_tensor(f, i) : NULL;
        if (t && strcmp(t->name, name)) {
            ck_assert_int_eq(tx_st_writer_write(w, t->data, (size_t)t->nbytes, err, sizeof(err)),
                             0);
        } else if (shape && (t || added)) {
            size_t es = tx_elem_size(type), len = (size_t)(shape[0] * shape[1] * es);
            unsigned char *z = calloc(1, len + 4);
            if (type == TX_ELEM_F32)
                memcpy(z, &val, 4);
            else if (type == TX_ELEM_BF16) {
                uint16_t h = tx_f32_to_bf16(val);
                memcpy(z, &h, 2);
            }
            ck_assert_int_eq(tx_st_writer_write(w, z, len, err, sizeof(err)), 0);
            free(z);
        }
    }
    ck_assert_int_eq(tx_st_writer_finish(w, err, sizeof(err)), 0);
    tx_st_close(f);
    free(d);
    ck_assert_int_eq(rename(q, p), 0);
}

#define W0 "model.layers.0.mlp.experts.1.up_proj.weight"
#define S0 W0 "_scale_inv"

/* open fails with all the pieces in the message, and export writes nothing */
static void refused(const char *dir, int code, const char *a, const char *b)
{
    struct tx_ckpt *c = NULL;
    ck_assert_int_eq(tx_ckpt_open(dir, &c, err, sizeof(err)), code);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err, a) && (!b || strstr(err, b)), "%s", err);
    const char *out = tm_path("bad.smd");
    struct tx_export_opts eo;
    tx_export_default_opts(&eo);
    eo.threads = 2;
    ck_assert_int_lt(tx_export(dir, out, &eo, NULL, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, a), "%s", err);
    ck_assert_int_ne(access(out, F_OK), 0);
}

START_TEST(loader_errors)
{
    const uint64_t good[2] = {1, 1}, bad[2] = {2, 1};
    const char *d = synth("e1", GLM_ARCH_QWEN3_MOE, NULL, 0);
    rewrite(d, S0, NULL, TX_ELEM_F32, 0);
    refused(d, TX_ENOENT, S0, "is missing");
    d = synth("e2", GLM_ARCH_QWEN3_MOE, NULL, 0);
    rewrite(d, S0, bad, TX_ELEM_F32, 1);
    refused(d, TX_EINVAL, S0, "[2, 1]");
    d = synth("e3", GLM_ARCH_QWEN3_MOE, NULL, 0);
    rewrite(d, S0, good, TX_ELEM_F32, NAN);
    refused(d, TX_EINVAL, S0, "nan");
    d = synth("e4", GLM_ARCH_QWEN3_MOE, NULL, 0);
    rewrite(d, S0, good, TX_ELEM_F32, -INFINITY);
    refused(d, TX_EINVAL, S0, "-inf");
    d = synth("e4b", GLM_ARCH_QWEN3_MOE, NULL, 0);
    rewrite(d, S0, good, TX_ELEM_F32, INFINITY);
    refused(d, TX_EINVAL, S0, "inf");
    d = synth("e5", GLM_ARCH_QWEN3_MOE, NULL, 0);
    rewrite(d, S0, good, TX_ELEM_I32, 0);
    refused(d, TX_EINVAL, S0, "I32");
    /* scales of a weight stored in BF16 */
    d = synth("e6", GLM_ARCH_QWEN3_MOE, NULL, 0);
    rewrite(d, "model.embed_tokens.weight_scale_inv", good, TX_ELEM_F32, 1);
    refused(d, TX_EINVAL, "model.embed_tokens.weight_scale_inv", "BF16");
    /* the FP8 tensors without the quantization_config */
    d = synth("e7", GLM_ARCH_QWEN3_MOE, NULL, 0);
    char p[600];
    snprintf(p, sizeof(p), "%s/config.json", d);
    size_t n;
    char *cj = tm_read(p, &n);
    char *qc = strstr(cj, "\"quantization_config\"");
    ck_assert_ptr_nonnull(qc);
    memcpy(qc, "\"quantization_confiX\"", 21);
    tm_write(p, cj, n);
    free(cj);
    refused(d, TX_ENOTSUP, "F8_E4M3", "no quantization_config");
    /* BF16 scales are accepted (exact in float) */
    d = synth("e8", GLM_ARCH_QWEN3_MOE, NULL, 0);
    rewrite(d, S0, good, TX_ELEM_BF16, 0.5f);
    struct tx_ckpt *c;
    ck_assert_msg(tx_ckpt_open(d, &c, err, sizeof(err)) == 0, "%s", err);
    const struct tx_tensor *t = tx_ckpt_find(c, W0)->t;
    float v;
    ck_assert_int_eq(tx_tensor_read_f32(t, 5, 1, &v, err, sizeof(err)), 0);
    ck_assert(v == tx_e4m3_to_f32(((const uint8_t *)t->data)[5]) * 0.5f);
    tx_ckpt_close(c);
}
END_TEST

/* a shard index that leaves a scale tensor out */
START_TEST(index_names)
{
    const char *d = synth("ix", GLM_ARCH_QWEN3_MOE, NULL, 1 << 16);
    char p[600];
    snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
    size_t n;
    char *ix = tm_read(p, &n);
    char *s = strstr(ix, "\"" S0 "\"");
    ck_assert_ptr_nonnull(s);
    s[1] = 'X'; /* a name no shard holds */
    tm_write(p, ix, n);
    char want[200];
    snprintf(want, sizeof(want), "X%s", S0 + 1);
    refused(d, TX_ENOENT, want, "index.json");
    /* the scale tensor left out of the weight_map */
    memcpy(s, "\"" S0, strlen(S0) + 1);
    struct json_object *o = json_tokener_parse(ix), *wm;
    ck_assert(json_object_object_get_ex(o, "weight_map", &wm));
    json_object_object_del(wm, S0);
    const char *txt = json_object_to_json_string(o);
    tm_write(p, txt, strlen(txt));
    json_object_put(o);
    free(ix);
    refused(d, TX_EINVAL, S0, "not in the weight_map");
}
END_TEST

START_TEST(export_from_fp8)
{
    const char *d = synth("ex", GLM_ARCH_DEEPSEEK_V3, NULL, 0);
    static const char *const quants[] = {"bf16", "int8"};
    for (int k = 0; k < 2; k++) {
        char out[64];
        snprintf(out, sizeof(out), "ex-%s.smd", quants[k]);
        struct tx_export_opts eo;
        tx_export_default_opts(&eo);
        eo.threads = 2;
        ck_assert_int_eq(tx_plan_apply_quant(eo.plan, quants[k], err, sizeof(err)), 0);
        eo.quant = quants[k];
        struct tx_export_stats st;
        ck_assert_msg(tx_export(d, tm_path(out), &eo, &st, err, sizeof(err)) == 0, "%s", err);
        /* the error is reported against the dequantised FP8 weights */
        ck_assert(st.sq_ref[TX_SMD_LAYER_EXPERT] > 0);
        double e = sqrt(st.sq_err[TX_SMD_LAYER_EXPERT] / st.sq_ref[TX_SMD_LAYER_EXPERT]);
        ck_assert_msg(k ? e > 1e-4 && e < 2e-2 : e < 4e-3, "%s: %g", quants[k], e);
        struct tx_ckpt *c;
        ck_assert_int_eq(tx_ckpt_open(d, &c, err, sizeof(err)), 0);
        uint32_t h;
        ck_assert_int_eq(tx_ckpt_source_hash(c, &h, err, sizeof(err)), 0);
        ck_assert_uint_eq(h, st.source_hash); /* streamed hash == the checkpoint's */
        tx_ckpt_close(c);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fp8");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tm_setup, tm_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, e4m3_every_code);
    tcase_add_test(tc, e4m3_rounding);
    tcase_add_test(tc, quant_config);
    tcase_add_test(tc, quantise_blocks);
    tcase_add_loop_test(tc, synth_four_archs, 0, 4);
    tcase_add_test(tc, synth_edges_sharded);
    tcase_add_test(tc, loader_errors);
    tcase_add_test(tc, index_names);
    tcase_add_test(tc, export_from_fp8);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
