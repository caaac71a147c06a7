/* SPDX-License-Identifier: MIT */
/*
 * Model input/output formats: common definitions.
 *
 * The model-format part of libtx reads Hugging Face checkpoints
 * (tx_safetensors.h, tx_checkpoint.h), ONNX models (tx_onnx.h), writes and
 * reads the .smd deployment package (tx_smd.h), and converts between them
 * (tx_export.h). This header holds what they share: the description of one
 * tensor found in an input file, element conversions and the CRC32C used
 * for checksums.
 *
 * Errors: every function that can fail returns 0 on success or a negative
 * TX_E* code of tx/tx_error.h, never -errno (TX_EINVAL malformed input or a
 * checksum mismatch, TX_ENOENT missing file or tensor, TX_EIO read/write
 * failure, TX_EPERM, TX_ENOMEM, TX_ENOTSUP unsupported dtype or feature)
 * and, when `err` is not NULL, writes a one-line message naming the file and
 * the tensor into err[0..errsz-1] (always NUL-terminated). Nothing exits,
 * prints or aborts on bad input.
 */
#ifndef TX_MODEL_H
#define TX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef TX_API
#define TX_API __attribute__((visibility("default")))
#endif

/* A comfortable size for the err buffers of this API. */
#define TX_ERR_MAX 512

/* Largest rank of a tensor read from an input file. */
#define TX_TENSOR_MAX_DIMS 8

/*
 * Element types as named in input files. The first three are the ones the
 * stack computes with; the others are recognised (sizes are known, so files
 * holding them are validated) but a tensor of such a type cannot be
 * converted and is reported when it is needed.
 */
enum tx_elem_type {
    TX_ELEM_F32 = 0,
    TX_ELEM_F16 = 1,
    TX_ELEM_BF16 = 2,
    TX_ELEM_F64,
    TX_ELEM_I64,
    TX_ELEM_I32,
    TX_ELEM_I16,
    TX_ELEM_I8,
    TX_ELEM_U64,
    TX_ELEM_U32,
    TX_ELEM_U16,
    TX_ELEM_U8,
    TX_ELEM_BOOL,
    TX_ELEM_F8_E4M3,
    TX_ELEM_F8_E5M2,
    TX_ELEM_COUNT
};

/* "F32", "F16", "BF16", "F64", ... (safetensors spelling). */
TX_API const char *tx_elem_name(enum tx_elem_type t);
/* Bytes per element. */
TX_API size_t tx_elem_size(enum tx_elem_type t);
/* 1 for F32, F16 and BF16. */
TX_API int tx_elem_supported(enum tx_elem_type t);

/*
 * One tensor of an input file. `data` points into a read-only mapping of
 * the file (or into memory owned by the reader) and stays valid while the
 * reader is open; it is not necessarily aligned (use tx_tensor_read_f32).
 */
struct tx_tensor {
    const char *name;
    enum tx_elem_type type;
    int ndim;
    uint64_t shape[TX_TENSOR_MAX_DIMS];
    uint64_t nelem;  /* product of shape (1 for a scalar) */
    uint64_t nbytes; /* nelem * element size */
    const void *data;
    const char *file;     /* file that holds the data */
    uint64_t file_offset; /* offset of the data in that file */
    unsigned flags;       /* TX_TENSOR_* */
    /* F8_E4M3 weights of an FP8 block-quantised checkpoint (bound by
     * tx_ckpt_open): the per-block scales "<name>_scale_inv" [ceil(rows /
     * block_rows), ceil(cols / block_cols)] (F32 or BF16), so that
     * tx_tensor_read_f32 returns e4m3 x scale. NULL otherwise. */
    const struct tx_tensor *scale_inv;
    uint32_t block_rows, block_cols;
};

/* tx_tensor.flags */
#define TX_TENSOR_MAPPED (1u << 0) /* data points into a read-only file mapping */

/* Drops the pages of a mapped tensor's data from this process (they are
 * read again from the file if touched later): lets a converter stream a
 * model larger than memory without keeping it resident. No-op for data
 * held in memory. */
TX_API void tx_tensor_release(const struct tx_tensor *t);
/* The same for elements [first, first + count). */
TX_API void tx_tensor_release_range(const struct tx_tensor *t, uint64_t first, uint64_t count);

/* A tensor to be written: name, element type and shape. */
struct tx_tensor_decl {
    const char *name;
    enum tx_elem_type type;
    int ndim;
    uint64_t shape[TX_TENSOR_MAX_DIMS];
};

/* Rows of the row-major matrix view: product of all dims but the last
 * (1 for rank 0 and 1). */
TX_API uint64_t tx_tensor_rows(const struct tx_tensor *t);
/* Columns: the last dim (1 for rank 0). */
TX_API uint64_t tx_tensor_cols(const struct tx_tensor *t);

/* Converts elements [first, first + count) to float. TX_ENOTSUP (message
 * naming the tensor and its type) if the type is not F32/F16/BF16 or an
 * F8_E4M3 tensor with its block scales bound (scale_inv: dequantised, one
 * rounding), TX_EINVAL if the range is outside the tensor. */
TX_API int tx_tensor_read_f32(const struct tx_tensor *t, uint64_t first, uint64_t count, float *dst,
                              char *err, size_t errsz);

/* "[64, 128]" into buf (always terminated); returns buf. */
TX_API char *tx_shape_str(const uint64_t *shape, int ndim, char *buf, size_t bufsz);

/* CRC32C (Castagnoli, reflected, init/xorout 0xffffffff): start with
 * crc = 0 and feed the previous result to continue. Uses the SSE4.2 crc32
 * instruction when the CPU has it. tx_crc32c(0, "123456789", 9) ==
 * 0xe3069283. */
TX_API uint32_t tx_crc32c(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
