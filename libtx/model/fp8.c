/* SPDX-License-Identifier: MIT */
/* FP8 block-quantised checkpoints: the quantization_config check, the
 * scale companions, dequantisation and the Hugging Face quantiser
 * (tx-internal/tx_fp8.h). */
#include <tx-internal/tx_fp8.h>

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/tx_dtype.h>

#define FP8_SUPPORTED                                                                              \
    "only quant_method \"fp8\" with fmt \"e4m3\", activation_scheme \"dynamic\" and "              \
    "weight_block_size [128, 128] is supported"

/* The JSON text of v, shortened for a message. */
static const char *jtext(struct json_object *v)
{
    const char *s = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
    return s ? s : "?";
}

static int refuse(char *err, size_t errsz, const char *where, const char *field,
                  struct json_object *v, const char *why)
{
    return tx_errbuf(err, errsz, TX_ENOTSUP,
                     "%s: quantization_config.%s %.80s is not supported%s%s", where, field,
                     v ? jtext(v) : "(missing)", why ? why : "; ", why ? "" : FP8_SUPPORTED);
}

/* field: absent is allowed (the default `want`), else a string equal to want */
static int check_str(struct json_object *qc, const char *field, const char *want, const char *where,
                     char *err, size_t errsz)
{
    struct json_object *v;
    if (!json_object_object_get_ex(qc, field, &v) || !v)
        return 0;
    if (json_object_is_type(v, json_type_string) && strcmp(json_object_get_string(v), want) == 0)
        return 0;
    return refuse(err, errsz, where, field, v, NULL);
}

int txm_quant_config_parse(const char *config_json, const char *where, struct txm_quant_config *q,
                           char *err, size_t errsz)
{
    memset(q, 0, sizeof(*q));
    struct json_object *root = json_tokener_parse(config_json);
    if (!root || !json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: not a JSON object", where);
    }
    struct json_object *qc, *v;
    int rc = 0;
    if (!json_object_object_get_ex(root, "quantization_config", &qc) || !qc)
        goto out;
    if (!json_object_is_type(qc, json_type_object)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: quantization_config: expected an object", where);
        goto out;
    }
    /* quant_method: "fp8" (GPTQ, AWQ, compressed-tensors, bitsandbytes,
     * fbgemm_fp8... are other formats) */
    if (!json_object_object_get_ex(qc, "quant_method", &v) ||
        !json_object_is_type(v, json_type_string) ||
        strcmp(json_object_get_string(v), "fp8") != 0) {
        rc = refuse(err, errsz, where, "quant_method", v, NULL);
        goto out;
    }
    rc = check_str(qc, "fmt", "e4m3", where, err, errsz);
    if (rc == 0)
        rc = check_str(qc, "activation_scheme", "dynamic", where, err, errsz);
    if (rc < 0)
        goto out;
    /* absent: per-tensor FP8 (one "weight_scale" per matrix), another layout */
    if (!json_object_object_get_ex(qc, "weight_block_size", &v) || !v) {
        rc = refuse(err, errsz, where, "weight_block_size", NULL,
                    " (per-tensor FP8 scales); " FP8_SUPPORTED);
        goto out;
    }
    int ok = json_object_is_type(v, json_type_array) && json_object_array_length(v) == 2;
    for (size_t i = 0; ok && i < 2; i++) {
        struct json_object *e = json_object_array_get_idx(v, i);
        ok = json_object_is_type(e, json_type_int) && json_object_get_int64(e) == TXM_FP8_BLOCK;
    }
    if (!ok) {
        rc = refuse(err, errsz, where, "weight_block_size", v, NULL);
        goto out;
    }
    q->fp8 = 1;
    q->block_rows = q->block_cols = TXM_FP8_BLOCK;
out:
    json_object_put(root);
    return rc;
}

float txm_fp8_scale_at(const struct tx_tensor *s, uint64_t i)
{
    const unsigned char *p = s->data;
    if (s->type == TX_ELEM_BF16) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return tx_bf16_to_f32(h);
    }
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
}

int txm_fp8_check_scale(const struct tx_tensor *w, const struct tx_tensor *s, uint32_t br,
                        uint32_t bc, char *err, size_t errsz)
{
    char s1[96], s2[96], s3[96];
    if (w->ndim != 2)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: F8_E4M3 with block scales must be a matrix, not rank %d",
                         w->file, w->name, w->ndim);
    uint64_t want[2] = {txm_fp8_grid(w->shape[0], br), txm_fp8_grid(w->shape[1], bc)};
    if (s->type != TX_ELEM_F32 && s->type != TX_ELEM_BF16)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: scale tensor of %s has dtype %s (F32 or BF16 expected)",
                         s->file, s->name, w->name, tx_elem_name(s->type));
    if (s->ndim != 2 || s->shape[0] != want[0] || s->shape[1] != want[1])
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s has shape %s but %s %s in %ux%u blocks needs %s", s->file,
                         s->name, tx_shape_str(s->shape, s->ndim, s1, sizeof(s1)), w->name,
                         tx_shape_str(w->shape, w->ndim, s2, sizeof(s2)), br, bc,
                         tx_shape_str(want, 2, s3, sizeof(s3)));
    for (uint64_t i = 0; i < s->nelem; i++) {
        float v = txm_fp8_scale_at(s, i);
        if (!isfinite(v) || v < 0) {
            tx_tensor_release(s);
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: tensor %s: the scale of block [%" PRIu64 ", %" PRIu64
                             "] of %s is %g (must be finite and >= 0)",
                             s->file, s->name, i / want[1], i % want[1], w->name, (double)v);
        }
    }
    tx_tensor_release(s);
    return 0;
}

/* elements [first, first + count) dequantised into f32 (one rounding) or
 * f64 (exact): whichever of the two is not NULL */
static int fp8_read(const struct tx_tensor *t, uint64_t first, uint64_t count, float *f32,
                    double *f64, char *err, size_t errsz)
{
    const struct tx_tensor *s = t->scale_inv;
    if (!s || t->ndim != 2 || !t->block_rows || !t->block_cols)
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                         "%s: tensor %s has dtype F8_E4M3 without its block scales (%s%s)",
                         t->file ? t->file : "?", t->name, t->name, TXM_FP8_SCALE_SUFFIX);
    const uint8_t *src = t->data;
    uint64_t cols = t->shape[1], sc = txm_fp8_grid(cols, t->block_cols);
    uint64_t i = first, end = first + count;
    while (i < end) {
        uint64_t r = i / cols, c = i % cols;
        uint64_t srow = (r / t->block_rows) * sc;
        /* one scale block of this row at a time */
        while (c < cols && i < end) {
            uint64_t cb = c / t->block_cols;
            uint64_t stop = (cb + 1) * t->block_cols;
            if (stop > cols)
                stop = cols;
            if (stop - c > end - i)
                stop = c + (end - i);
            float scale = txm_fp8_scale_at(s, srow + cb);
            for (; c < stop; c++, i++) {
                if (f32)
                    f32[i - first] = tx_e4m3_to_f32(src[i]) * scale;
                else
                    f64[i - first] = (double)tx_e4m3_to_f32(src[i]) * (double)scale;
            }
        }
    }
    return 0;
}

int txm_fp8_read_f32(const struct tx_tensor *t, uint64_t first, uint64_t count, float *dst,
                     char *err, size_t errsz)
{
    return fp8_read(t, first, count, dst, NULL, err, errsz);
}

int txm_fp8_read_f64(const struct tx_tensor *t, uint64_t first, uint64_t count, double *dst,
                     char *err, size_t errsz)
{
    return fp8_read(t, first, count, NULL, dst, err, errsz);
}

void txm_fp8_quantise_band(const float *x, uint32_t nrows, uint32_t cols, uint32_t bc, uint8_t *q,
                           float *scale_inv)
{
    for (uint32_t c0 = 0, b = 0; c0 < cols; c0 += bc, b++) {
        uint32_t c1 = cols - c0 < bc ? cols : c0 + bc;
        float amax = 0.0f;
        for (uint32_t r = 0; r < nrows; r++)
            for (uint32_t c = c0; c < c1; c++) {
                float a = fabsf(x[(size_t)r * cols + c]);
                amax = a > amax ? a : amax;
            }
        if (amax == 0.0f) {
            for (uint32_t r = 0; r < nrows; r++)
                memset(q + (size_t)r * cols + c0, 0, c1 - c0);
            scale_inv[b] = 0.0f;
            continue;
        }
        float scale = TXM_FP8_MAX / amax;
        if (!isfinite(scale)) /* amax below 448 / FLT_MAX */
            scale = FLT_MAX;
        for (uint32_t r = 0; r < nrows; r++)
            for (uint32_t c = c0; c < c1; c++) {
                float v = x[(size_t)r * cols + c] * scale;
                v = v > TXM_FP8_MAX ? TXM_FP8_MAX : v < -TXM_FP8_MAX ? -TXM_FP8_MAX : v;
                q[(size_t)r * cols + c] = tx_f32_to_e4m3(v);
            }
        scale_inv[b] = 1.0f / scale;
    }
}

int txm_fp8_bind(const struct tx_tensor *w, const struct tx_tensor *s,
                 const struct txm_quant_config *q, struct tx_tensor *out, char *err, size_t errsz)
{
    if (!q->fp8 || w->type != TX_ELEM_F8_E4M3)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: block scales %s for a %s tensor without an FP8 "
                         "quantization_config",
                         s->file, w->name, s->name, tx_elem_name(w->type));
    int rc = txm_fp8_check_scale(w, s, q->block_rows, q->block_cols, err, errsz);
    if (rc < 0)
        return rc;
    *out = *w;
    out->scale_inv = s;
    out->block_rows = q->block_rows;
    out->block_cols = q->block_cols;
    return 0;
}
