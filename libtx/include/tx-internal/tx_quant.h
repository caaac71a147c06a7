/* SPDX-License-Identifier: MIT */
/* Internal: row-range quantisation shared by tx_quant_matrix and the
 * export pipeline. */
#ifndef TX_QUANT_INTERNAL_H
#define TX_QUANT_INTERNAL_H

#include <tx-internal/tx_model_internal.h>

#include <tx-internal/tx_smd.h>

struct txq_spec {
    uint32_t rows, cols;
    unsigned dtype, format;
    uint32_t group_size;  /* I8: 0 = per row */
    uint32_t keep_blocks; /* BLOCK_SPARSE: blocks kept in every row */
};

struct txq_scratch {
    float *row, *norm;
    uint32_t *order;
    unsigned char *keep;
};

struct txq_acc {
    uint64_t pruned;   /* elements dropped */
    uint64_t overflow; /* values beyond the F16 range */
    double sq_err, sq_ref;
};

TXM_HIDDEN int txq_check_spec(const struct txq_spec *sp, char *err, size_t errsz);
TXM_HIDDEN int txq_scratch_init(struct txq_scratch *s, uint32_t cols);
TXM_HIDDEN void txq_scratch_free(struct txq_scratch *s);

/*
 * Quantises rows [r0, r0 + nrows) of the matrix; w holds those rows
 * (nrows x cols floats). Outputs are indexed by row - base: data at
 * (r - base) * cols elements (dense) or (r - base) * keep_blocks *
 * TX8_SPARSE_BLOCK (sparse), scales at (r - base) * groups, colblk at
 * (r - base) * keep_blocks.
 */
TXM_HIDDEN int txq_rows(const struct txq_spec *sp, const float *w, uint64_t r0, uint64_t nrows,
                        uint64_t base, struct txq_scratch *s, void *data, float *scales,
                        uint16_t *colblk, struct txq_acc *acc);

#endif
