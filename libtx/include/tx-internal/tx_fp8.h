/* SPDX-License-Identifier: MIT */
/*
 * Internal: FP8 block-quantised checkpoints (Hugging Face quant_method
 * "fp8", the format of DeepSeek-V3's, GLM-4.5's, GLM-5's and Qwen3's FP8
 * releases; docs/tools-export.md, "FP8 checkpoints").
 *
 * config.json carries
 *   "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
 *     "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
 * and every quantised matrix W [N, K] is an F8_E4M3 tensor with an F32 (or
 * BF16) companion "<name>_scale_inv" [ceil(N/128), ceil(K/128)]: the real
 * weight is W[n][k] = e4m3(W[n][k]) * scale_inv[n / 128][k / 128]. The
 * last block row / column is narrower when N or K is not a multiple of 128.
 */
#ifndef TX_FP8_INTERNAL_H
#define TX_FP8_INTERNAL_H

#include <tx-internal/tx_model_internal.h>

#define TXM_FP8_BLOCK 128
#define TXM_FP8_MAX 448.0f /* largest finite E4M3 */
#define TXM_FP8_SCALE_SUFFIX "_scale_inv"

struct txm_quant_config {
    int fp8;                         /* 1: quant_method "fp8" (all checked) */
    uint32_t block_rows, block_cols; /* weight_block_size */
};

/*
 * config.json's quantization_config (the config text): absent gives
 * fp8 = 0; quant_method "fp8" with fmt "e4m3" (or absent),
 * activation_scheme "dynamic" (or absent) and weight_block_size [128, 128]
 * gives fp8 = 1; anything else is TX_ENOTSUP with a message "WHERE:
 * quantization_config.FIELD VALUE is not supported ..." naming the field.
 */
TXM_HIDDEN int txm_quant_config_parse(const char *config_json, const char *where,
                                      struct txm_quant_config *q, char *err, size_t errsz);

/* Scale-grid size of a [rows, cols] weight: ceil(rows / br), ceil(cols / bc). */
static inline uint64_t txm_fp8_grid(uint64_t n, uint32_t b)
{
    return (n + b - 1) / b;
}

/*
 * Checks that s is a valid scale tensor of the F8_E4M3 matrix w with
 * br x bc blocks: rank 2, F32 or BF16, shape [ceil(N/br), ceil(K/bc)],
 * every value finite and >= 0 (reads all of s, then drops its pages). The
 * message names the tensor, the file and, for a bad value, the block.
 */
TXM_HIDDEN int txm_fp8_check_scale(const struct tx_tensor *w, const struct tx_tensor *s,
                                   uint32_t br, uint32_t bc, char *err, size_t errsz);

/* out = w with the scales s bound (after txm_fp8_check_scale), for the
 * FP8 config q. */
TXM_HIDDEN int txm_fp8_bind(const struct tx_tensor *w, const struct tx_tensor *s,
                            const struct txm_quant_config *q, struct tx_tensor *out, char *err,
                            size_t errsz);

/* Elements [first, first + count) of an F8_E4M3 tensor with its scales
 * bound (t->scale_inv), dequantised: e4m3 * scale, rounded once to float.
 * Used by tx_tensor_read_f32. */
TXM_HIDDEN int txm_fp8_read_f32(const struct tx_tensor *t, uint64_t first, uint64_t count,
                                float *dst, char *err, size_t errsz);
/* The same elements exactly: e4m3 * scale in double (at most 4 + 24
 * significant bits, so no rounding). Used by txm_tensor_read_f64. */
TXM_HIDDEN int txm_fp8_read_f64(const struct tx_tensor *t, uint64_t first, uint64_t count,
                                double *dst, char *err, size_t errsz);

/* The value of one scale of s (F32 or BF16), index i. */
TXM_HIDDEN float txm_fp8_scale_at(const struct tx_tensor *s, uint64_t i);

/*
 * Quantises a band of nrows <= block_rows rows of cols floats (x, row
 * stride cols) the way Hugging Face's FineGrainedFP8 quantiser does, per
 * block of nrows x bc: amax = max |x| of the block; scale = 448 / amax;
 * q = e4m3(clamp(x * scale, -448, 448)); scale_inv = 1 / scale (all in
 * float; an all-zero block gets q = 0 and scale_inv = 0, a block with
 * amax below 448 / FLT_MAX scale FLT_MAX). Writes q (nrows
 * x cols codes, row stride cols) and scale_inv[ceil(cols / bc)]. x must
 * be finite.
 */
TXM_HIDDEN void txm_fp8_quantise_band(const float *x, uint32_t nrows, uint32_t cols, uint32_t bc,
                                      uint8_t *q, float *scale_inv);

#endif
