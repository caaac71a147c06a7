/* SPDX-License-Identifier: MIT */
/* Quantisation to the device's weight formats (struct tx8_weight), block
 * pruning, dequantisation and precision plans. */
#include <tx-internal/tx_quant.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <tx/tx_dtype.h>
#include <tx/glm.h>
#include <tx-internal/tx_export.h>

uint32_t tx_sparse_keep_blocks(uint32_t cols, double sparsity)
{
    uint32_t nb = cols / TX8_SPARSE_BLOCK;
    if (nb == 0)
        return 0;
    if (!(sparsity > 0))
        return nb;
    double drop = floor(nb * sparsity + 0.5);
    if (drop >= nb)
        drop = nb - 1;
    return nb - (uint32_t)drop;
}

int txq_scratch_init(struct txq_scratch *s, uint32_t cols)
{
    s->row = malloc((size_t)cols * sizeof(float));
    s->norm = malloc(((size_t)cols / TX8_SPARSE_BLOCK + 1) * sizeof(float));
    s->order = malloc(((size_t)cols / TX8_SPARSE_BLOCK + 1) * sizeof(uint32_t));
    s->keep = malloc(((size_t)cols / TX8_SPARSE_BLOCK + 1));
    if (!s->row || !s->norm || !s->order || !s->keep) {
        txq_scratch_free(s);
        return TX_ENOMEM;
    }
    return 0;
}

void txq_scratch_free(struct txq_scratch *s)
{
    free(s->row);
    free(s->norm);
    free(s->order);
    free(s->keep);
    memset(s, 0, sizeof(*s));
}

static void store_elem(unsigned dtype, void *data, uint64_t i, float v)
{
    if (dtype == TX8_DTYPE_F32) {
        memcpy((char *)data + i * 4, &v, 4);
    } else if (dtype == TX8_DTYPE_F16) {
        uint16_t h = tx_f32_to_f16(v);
        memcpy((char *)data + i * 2, &h, 2);
    } else {
        uint16_t h = tx_f32_to_bf16(v);
        memcpy((char *)data + i * 2, &h, 2);
    }
}

static float stored_value(unsigned dtype, float v)
{
    if (dtype == TX8_DTYPE_F16)
        return tx_f16_to_f32(tx_f32_to_f16(v));
    if (dtype == TX8_DTYPE_BF16)
        return tx_bf16_to_f32(tx_f32_to_bf16(v));
    return v;
}

/* Sort block indices by norm (descending), ties by index (ascending). */
static void order_blocks(const float *norm, uint32_t *order, uint32_t nb)
{
    for (uint32_t i = 0; i < nb; i++)
        order[i] = i;
    /* insertion sort: nb is cols / 32 (a few hundred at most) */
    for (uint32_t i = 1; i < nb; i++) {
        uint32_t x = order[i];
        uint32_t j = i;
        while (j > 0 && (norm[order[j - 1]] < norm[x] ||
                         (norm[order[j - 1]] == norm[x] && order[j - 1] > x))) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = x;
    }
}

int txq_rows(const struct txq_spec *sp, const float *w, uint64_t r0, uint64_t nrows, uint64_t base,
             struct txq_scratch *s, void *data, float *scales, uint16_t *colblk,
             struct txq_acc *acc)
{
    const uint32_t C = sp->cols, G = sp->group_size ? sp->group_size : C;
    const uint32_t ng = C / G, nb = C / TX8_SPARSE_BLOCK;
    const int sparse = sp->format == TX8_WFMT_BLOCK_SPARSE, i8 = sp->dtype == TX8_DTYPE_I8;
    const uint32_t keep = sp->keep_blocks;
    for (uint64_t rr = 0; rr < nrows; rr++) {
        const float *src = w + rr * C;
        uint64_t r = r0 + rr - base; /* output row */
        float *p = s->row;
        memcpy(p, src, (size_t)C * sizeof(float));
        if (sparse) {
            for (uint32_t b = 0; b < nb; b++) {
                double n2 = 0;
                for (uint32_t e = 0; e < TX8_SPARSE_BLOCK; e++) {
                    double v = p[b * TX8_SPARSE_BLOCK + e];
                    n2 += v * v;
                }
                s->norm[b] = (float)n2;
            }
            order_blocks(s->norm, s->order, nb);
            memset(s->keep, 0, nb);
            for (uint32_t k = 0; k < keep; k++)
                s->keep[s->order[k]] = 1;
            for (uint32_t b = 0; b < nb; b++)
                if (!s->keep[b]) {
                    memset(p + b * TX8_SPARSE_BLOCK, 0, TX8_SPARSE_BLOCK * sizeof(float));
                    acc->pruned += TX8_SPARSE_BLOCK;
                }
        }
        float *rs = i8 ? scales + r * ng : NULL;
        if (i8)
            for (uint32_t g = 0; g < ng; g++) {
                float amax = 0;
                for (uint32_t c = g * G; c < (g + 1) * G; c++)
                    if (fabsf(p[c]) > amax)
                        amax = fabsf(p[c]);
                rs[g] = amax / 127.0f;
            }
        /* store the kept values, in column order */
        uint64_t out = sparse ? r * (uint64_t)keep * TX8_SPARSE_BLOCK : r * (uint64_t)C;
        uint32_t kb = 0;
        for (uint32_t c = 0; c < C; c++) {
            if (sparse) {
                uint32_t b = c / TX8_SPARSE_BLOCK;
                if (!s->keep[b]) {
                    c += TX8_SPARSE_BLOCK - 1;
                    continue;
                }
                if (c % TX8_SPARSE_BLOCK == 0)
                    colblk[r * keep + kb++] = (uint16_t)b;
            }
            float v = p[c], deq;
            if (i8) {
                float sc = rs[c / G];
                float q = sc > 0 ? nearbyintf(v / sc) : 0.0f;
                if (q > 127)
                    q = 127;
                if (q < -127)
                    q = -127;
                ((int8_t *)data)[out] = (int8_t)q;
                deq = q * sc;
            } else {
                if (sp->dtype == TX8_DTYPE_F16 && fabsf(v) >= 65520.0f)
                    acc->overflow++;
                store_elem(sp->dtype, data, out, v);
                deq = stored_value(sp->dtype, v);
            }
            p[c] = deq;
            out++;
        }
        /* error of the stored weight against the input (pruning included) */
        for (uint32_t c = 0; c < C; c++) {
            double d = (double)src[c] - p[c];
            acc->sq_err += d * d;
            acc->sq_ref += (double)src[c] * src[c];
        }
    }
    return 0;
}

int tx_quant_matrix(const float *w, uint32_t rows, uint32_t cols, unsigned dtype, unsigned format,
                    uint32_t group_size, uint32_t keep_blocks, void *data, float *scales,
                    void *index, uint64_t *pruned, char *err, size_t errsz)
{
    struct txq_spec sp = {rows, cols, dtype, format, group_size, keep_blocks};
    int rc = txq_check_spec(&sp, err, errsz);
    if (rc < 0)
        return rc;
    struct txq_scratch s;
    if (txq_scratch_init(&s, cols) < 0)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    uint16_t *cb = NULL;
    if (format == TX8_WFMT_BLOCK_SPARSE) {
        unsigned char *ix = index;
        for (uint64_t r = 0; r <= rows; r++) {
            uint32_t v = (uint32_t)(r * keep_blocks);
            memcpy(ix + r * 4, &v, 4);
        }
        cb = malloc(((size_t)rows * keep_blocks + 1) * sizeof(uint16_t));
        if (!cb) {
            txq_scratch_free(&s);
            return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        }
    }
    struct txq_acc acc = {0};
    txq_rows(&sp, w, 0, rows, 0, &s, data, scales, cb, &acc);
    if (cb) {
        memcpy((unsigned char *)index + ((size_t)rows + 1) * 4, cb,
               (size_t)rows * keep_blocks * sizeof(uint16_t));
        free(cb);
    }
    txq_scratch_free(&s);
    if (pruned)
        *pruned = acc.pruned;
    if (acc.overflow)
        return tx_errbuf(err, errsz, TX_EINVAL, "%" PRIu64 " values overflow FP16 (|w| >= 65520)",
                         acc.overflow);
    return 0;
}

int txq_check_spec(const struct txq_spec *sp, char *err, size_t errsz)
{
    if (sp->rows == 0 || sp->cols == 0)
        return tx_errbuf(err, errsz, TX_EINVAL, "empty matrix");
    if (sp->dtype != TX8_DTYPE_F32 && sp->dtype != TX8_DTYPE_F16 && sp->dtype != TX8_DTYPE_BF16 &&
        sp->dtype != TX8_DTYPE_I8)
        return tx_errbuf(err, errsz, TX_EINVAL, "dtype %u is not a weight type", sp->dtype);
    if (sp->group_size && (sp->dtype != TX8_DTYPE_I8 || sp->cols % sp->group_size))
        return tx_errbuf(err, errsz, TX_EINVAL, "group size %u needs I8 and divides the %u columns",
                         sp->group_size, sp->cols);
    if (sp->format == TX8_WFMT_BLOCK_SPARSE) {
        uint32_t nb = sp->cols / TX8_SPARSE_BLOCK;
        if (sp->cols % TX8_SPARSE_BLOCK || sp->keep_blocks > nb || nb > 65536)
            return tx_errbuf(err, errsz, TX_EINVAL, "sparse: %u columns / %u kept blocks invalid",
                             sp->cols, sp->keep_blocks);
        if (sp->group_size % TX8_SPARSE_BLOCK)
            return tx_errbuf(err, errsz, TX_EINVAL, "sparse: group size %u is not a multiple of %u",
                             sp->group_size, TX8_SPARSE_BLOCK);
        if ((uint64_t)sp->rows * sp->keep_blocks > UINT32_MAX)
            return tx_errbuf(err, errsz, TX_EINVAL, "sparse: too many blocks");
    } else if (sp->format != TX8_WFMT_DENSE) {
        return tx_errbuf(err, errsz, TX_EINVAL, "format %u unknown", sp->format);
    }
    return 0;
}

static float load_f(const void *p, uint64_t i)
{
    float f;
    memcpy(&f, (const char *)p + i * 4, 4);
    return f;
}

static float elem(unsigned dtype, const void *p, uint64_t i)
{
    uint16_t h;
    switch (dtype) {
    case TX8_DTYPE_F32:
        return load_f(p, i);
    case TX8_DTYPE_F16:
        memcpy(&h, (const char *)p + i * 2, 2);
        return tx_f16_to_f32(h);
    case TX8_DTYPE_BF16:
        memcpy(&h, (const char *)p + i * 2, 2);
        return tx_bf16_to_f32(h);
    default:
        return (float)((const int8_t *)p)[i];
    }
}

int tx_weight_dequant(unsigned dtype, unsigned format, uint32_t rows, uint32_t cols,
                      uint32_t group_size, uint32_t nnz_blocks, const void *data,
                      const float *scales, const void *index, float *dst, char *err, size_t errsz)
{
    if (dtype == TX8_DTYPE_F8_E4M3) { /* dense, scales per 128 x 128 block */
        if (!scales || format != TX8_WFMT_DENSE || group_size != TX8_FP8_BLOCK)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "FP8 weight: dense with 128 x 128 block scales expected");
        const uint64_t sc = ((uint64_t)cols + TX8_FP8_BLOCK - 1) / TX8_FP8_BLOCK;
        const uint8_t *q = data;
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t c = 0; c < cols; c++)
                dst[r * cols + c] = tx_e4m3_to_f32(q[r * cols + c]) *
                                    load_f(scales, (r / TX8_FP8_BLOCK) * sc + c / TX8_FP8_BLOCK);
        return 0;
    }
    if (dtype == TX8_DTYPE_I8 && !scales)
        return tx_errbuf(err, errsz, TX_EINVAL, "I8 weight without scales");
    if (group_size && cols % group_size)
        return tx_errbuf(err, errsz, TX_EINVAL, "group size does not divide the columns");
    const uint64_t ng = group_size ? cols / group_size : 1;
    const int i8 = dtype == TX8_DTYPE_I8;
    if (format == TX8_WFMT_DENSE) {
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t c = 0; c < cols; c++) {
                float v = elem(dtype, data, r * cols + c);
                if (i8)
                    v *= load_f(scales, r * ng + (group_size ? c / group_size : 0));
                dst[r * cols + c] = v;
            }
        return 0;
    }
    if (format != TX8_WFMT_BLOCK_SPARSE)
        return tx_errbuf(err, errsz, TX_EINVAL, "format %u unknown", format);
    int rc = tx_smd_check_sparse_index(index, tx_smd_index_size(format, rows, nnz_blocks), rows,
                                       cols, nnz_blocks, err, errsz);
    if (rc < 0)
        return rc;
    const unsigned char *ix = index, *cb = ix + ((uint64_t)rows + 1) * 4;
    memset(dst, 0, (size_t)rows * cols * sizeof(float));
    for (uint64_t r = 0; r < rows; r++) {
        uint32_t k0, k1;
        memcpy(&k0, ix + r * 4, 4);
        memcpy(&k1, ix + (r + 1) * 4, 4);
        for (uint32_t k = k0; k < k1; k++) {
            uint16_t b;
            memcpy(&b, cb + (uint64_t)k * 2, 2);
            for (uint32_t e = 0; e < TX8_SPARSE_BLOCK; e++) {
                uint64_t c = (uint64_t)b * TX8_SPARSE_BLOCK + e;
                float v = elem(dtype, data, (uint64_t)k * TX8_SPARSE_BLOCK + e);
                if (i8)
                    v *= load_f(scales, r * ng + (group_size ? c / group_size : 0));
                dst[r * cols + c] = v;
            }
        }
    }
    return 0;
}

/* ---- plans -------------------------------------------------------------- */

void tx_plan_golden(struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT])
{
    static const enum tx_smd_precision golden[TX_SMD_LAYER_COUNT] = {
        [TX_SMD_LAYER_EMBEDDING] = TX_SMD_PREC_INT8_MIXED,
        [TX_SMD_LAYER_ATTENTION] = TX_SMD_PREC_FP16,
        [TX_SMD_LAYER_MLP] = TX_SMD_PREC_INT8_MIXED,
        [TX_SMD_LAYER_EXPERT] = TX_SMD_PREC_INT8_MIXED,
        [TX_SMD_LAYER_NORM] = TX_SMD_PREC_FP32,
        [TX_SMD_LAYER_OUTPUT] = TX_SMD_PREC_FP32,
        [TX_SMD_LAYER_ROUTER] = TX_SMD_PREC_FP32,
    };
    for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++)
        plan[l] = (struct tx_smd_plan_entry){l, golden[l], 0, 0};
}

/*
 * One precision syntax (docs/precision.md): glm-export's --quant and
 * --precision go through glm_plan_parse, the parser of glm-inference
 * --precision, so "fp16" is the same plan in both tools. The package plan's
 * router entry is not a runtime layer type: it stays FP32.
 */
static int apply_words(struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT], const char *words,
                       const char *opt, char *err, size_t errsz)
{
    glm_precision_plan_t p;
    for (int l = 0; l < GLM_LAYER_TYPE_COUNT; l++)
        p.precision[l] =
            plan[l].precision < TX_SMD_PREC_COUNT ? (glm_precision_t)plan[l].precision : FP32;
    if (glm_plan_parse(words, &p) != TX_OK)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: %s", opt, tx_last_error());
    /* enum glm_layer_type and enum tx_smd_layer agree on 0..5, the
     * precisions on 0..4 */
    for (int l = 0; l < GLM_LAYER_TYPE_COUNT; l++)
        plan[l].precision = (uint32_t)p.precision[l];
    plan[TX_SMD_LAYER_ROUTER].precision = TX_SMD_PREC_FP32;
    return 0;
}

int tx_plan_apply_quant(struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT], const char *quant,
                        char *err, size_t errsz)
{
    /* --quant WORD is --precision with a whole plan: none = fp32, int8 =
     * golden (the article's INT8 deployment plan) */
    static const struct {
        const char *quant, *plan;
    } tab[] = {{"none", "fp32"},   {"fp32", "fp32"},     {"fp16", "fp16"}, {"bf16", "bf16"},
               {"int8", "golden"}, {"golden", "golden"}, {"fp8", "fp8"}};
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (!strcasecmp(quant, tab[i].quant))
            return apply_words(plan, tab[i].plan, "--quant", err, errsz);
    return tx_errbuf(err, errsz, TX_EINVAL, "--quant %s: expected none, fp16, bf16, int8 or fp8",
                     quant);
}

int tx_plan_apply_spec(struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT], const char *spec,
                       char *err, size_t errsz)
{
    return apply_words(plan, spec, "--precision", err, errsz);
}

char *tx_plan_format(const struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT], char *buf,
                     size_t bufsz)
{
    size_t o = 0;
    if (bufsz)
        buf[0] = 0;
    for (unsigned l = 0; l < TX_SMD_LAYER_COUNT && o < bufsz; l++)
        o += (size_t)snprintf(buf + o, bufsz - o, "%s%s=%s", l ? "," : "", tx_smd_layer_name(l),
                              tx_smd_precision_name(plan[l].precision));
    return buf;
}
