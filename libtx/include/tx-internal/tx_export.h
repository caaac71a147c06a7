/* SPDX-License-Identifier: MIT */
/*
 * Model export (the library behind glm-export): a Hugging Face checkpoint
 * or ONNX model to an .smd package, with the precision plan's storage
 * types, INT8 quantisation and block-sparse pruning; plus the quantisation
 * primitives themselves, usable on any matrix.
 *
 * Storage rules (docs/tools-export.md):
 *   - 1-D tensors (norm weights, biases) and the MoE router (gate weight,
 *     e_score_correction_bias) are stored F32: the device takes them as f32.
 *   - A matrix of layer type L is stored in the type of plan[L].precision:
 *     FP32 -> F32, FP16 -> F16, BF16 -> BF16, INT8_MIXED -> I8 with f32
 *     symmetric scales (scale = max|w| / 127 over the row, or over each group
 *     of plan[L].group_size columns; q = round(w / scale) in [-127, 127]; an
 *     all-zero row/group has scale 0). The embedding always uses one scale
 *     per row (the device's EMBED takes scales[vocab]).
 *   - With plan[L].flags & TX_SMD_PLANF_SPARSE (MLP and experts only), a
 *     matrix whose columns are a multiple of TX8_SPARSE_BLOCK is pruned: in
 *     every row, the blocks of TX8_SPARSE_BLOCK columns with the lowest L2
 *     norm are dropped so that round(nblocks * sparsity) of them go (at
 *     least one block stays), the rest is stored TX8_WFMT_BLOCK_SPARSE;
 *     INT8 scales are computed from the kept values.
 */
#ifndef TX_EXPORT_H
#define TX_EXPORT_H

#include <tx-internal/tx_model.h>
#include <tx-internal/tx_smd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- quantisation primitives ------------------------------------------ */

/*
 * Converts a dense row-major float matrix w[rows x cols] to a device weight
 * (struct tx8_weight layout):
 *   dtype F32/F16/BF16/I8, format DENSE or BLOCK_SPARSE (keep_blocks blocks
 *   kept per row, chosen by largest L2 norm, ties to the lower column),
 *   group_size for I8 (0 = per row).
 * data receives tx_smd_data_size() bytes, scales (I8) rows * groups floats,
 * index (sparse) tx_smd_index_size() bytes. If pruned is not NULL it
 * receives the number of elements dropped.
 */
TX_API int tx_quant_matrix(const float *w, uint32_t rows, uint32_t cols, unsigned dtype,
                           unsigned format, uint32_t group_size, uint32_t keep_blocks, void *data,
                           float *scales, void *index, uint64_t *pruned, char *err, size_t errsz);

/* Blocks kept per row for a sparsity fraction: nblocks - round(nblocks *
 * sparsity), at least 1. */
TX_API uint32_t tx_sparse_keep_blocks(uint32_t cols, double sparsity);

/* The dense float matrix a device weight stands for (absent blocks zero,
 * I8 values times their scale). */
TX_API int tx_weight_dequant(unsigned dtype, unsigned format, uint32_t rows, uint32_t cols,
                             uint32_t group_size, uint32_t nnz_blocks, const void *data,
                             const float *scales, const void *index, float *dst, char *err,
                             size_t errsz);

/* ---- plans -------------------------------------------------------------- */

/* The article's golden configuration: embedding INT8, attention FP16,
 * MLP/experts INT8, norms FP32, output FP32 (router FP32), per-row scales,
 * no sparsity. */
TX_API void tx_plan_golden(struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT]);
/* --quant: "none" (all FP32), "fp16"/"bf16" (every matrix type in that
 * precision), "int8" (the golden plan). Keeps group sizes and flags. */
TX_API int tx_plan_apply_quant(struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT], const char *quant,
                               char *err, size_t errsz);
/* --precision "TYPE=PREC,...": TYPE embedding, attention, mlp, experts,
 * norm, output (or GLM_MLP, ...); PREC fp32, fp16, bf16, int8. Norms accept
 * only FP32/FP16/BF16 (they are stored F32 in every case). */
TX_API int tx_plan_apply_spec(struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT], const char *spec,
                              char *err, size_t errsz);
/* "embedding=INT8_MIXED,attention=FP16,..." */
TX_API char *tx_plan_format(const struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT], char *buf,
                            size_t bufsz);

/* ---- export ------------------------------------------------------------- */

struct tx_export_opts {
    struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT];
    double sparsity;              /* fraction of blocks pruned (with PLANF_SPARSE) */
    int threads;                  /* 0: all CPUs */
    int progress;                 /* 1: progress on stderr */
    const char *tokenizer;        /* tokenizer.json override (NULL: next to the input) */
    const char *tokenizer_config; /* tokenizer_config.json override */
    const char *quant;            /* recorded in the metadata ("int8", ...) */
    const char *model_name;       /* recorded in the metadata (NULL: from the config) */
    /* if not NULL and non-zero (e.g. set by a signal handler), the export
     * stops between chunks with TX_ECANCELED and removes its temporary file */
    const volatile int *cancel;
    /* if not NULL, called once per input tensor that is not exported: an
     * MTP-layer tensor (is_mtp = 1) or one the architecture does not know */
    void (*on_ignored)(void *ctx, const char *name, int is_mtp);
    void *ctx;
    /* 1: leave the MTP (NextN) layer out (glm-export --no-mtp); by default
     * a checkpoint's complete MTP layer (tx_ckpt_mtp_count) is exported
     * under its real names (libtx 2.8) */
    int no_mtp;
};

struct tx_export_stats {
    uint64_t tensors;
    uint64_t params;       /* elements exported */
    uint64_t input_bytes;  /* tensor bytes read */
    uint64_t output_bytes; /* size of the package */
    uint64_t ignored;      /* MTP / unknown tensors skipped */
    /* per layer type: elements, stored bytes, squared error and squared
     * values of the stored (dequantised) weights against the input */
    uint64_t elems[TX_SMD_LAYER_COUNT];
    uint64_t bytes[TX_SMD_LAYER_COUNT];
    double sq_err[TX_SMD_LAYER_COUNT];
    double sq_ref[TX_SMD_LAYER_COUNT];
    /* sparsity */
    uint64_t sparse_tensors;
    uint64_t sparse_elems;  /* elements of the pruned matrices */
    uint64_t pruned_elems;  /* of which dropped */
    double pruned_fraction; /* pruned_elems / sparse_elems */
    /* multiply-accumulates per token of the weight matrices (routed experts
     * weighted by num_experts_per_tok / n_routed_experts), before and after
     * pruning */
    double ffn_macs_dense, ffn_macs_sparse;
    double model_macs_dense, model_macs_sparse;
    double ffn_mac_reduction;   /* 1 - sparse / dense, FFN and experts */
    double model_mac_reduction; /* same over every weight matrix */
    double seconds;
    /* content hash of the source tensors (tx_ckpt_source_hash), recorded
     * in the metadata as "source_hash" with "source_path" */
    uint32_t source_hash;
    /* tensors of the MTP layer exported (in tensors; not in source_hash nor
     * the MAC counts) */
    uint64_t mtp_tensors;
};

/* golden plan, sparsity 0.5, all CPUs, no progress */
TX_API void tx_export_default_opts(struct tx_export_opts *o);

/* input: HF checkpoint directory or .onnx; output: the .smd path (written
 * through a temporary file renamed at the end: an error never leaves a
 * partial output under that name). */
TX_API int tx_export(const char *input, const char *output, const struct tx_export_opts *o,
                     struct tx_export_stats *st, char *err, size_t errsz);

#ifdef __cplusplus
}
#endif
#endif
