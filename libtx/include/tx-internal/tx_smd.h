/* SPDX-License-Identifier: MIT */
/*
 * The .smd deployment package: one versioned, self-describing,
 * little-endian file holding a model's config, tokenizer, precision plan
 * and tensors in exactly the device's weight formats (struct tx8_weight in
 * include/tx8/tx8_hw.h), so a loader copies bytes into device memory with
 * no transformation. The format is specified in docs/smd-format.md; the
 * structures below are its on-disk records.
 *
 * Layout:
 *   0       struct tx_smd_header (128 bytes), then header.section_count
 *           struct tx_smd_section (32 bytes each); the whole header area is
 *           header.header_size bytes (<= 4096) and is covered by
 *           header.header_crc.
 *   4096..  sections and tensor extents, every one starting at a multiple
 *           of 4096 (header.alignment).
 *
 * A tensor extent holds, in this order, the tensor's data, its scales (I8
 * only) and its sparse index (BLOCK_SPARSE only); data starts 4096-aligned,
 * scales and index 64-aligned, and extent_size (a multiple of 4096) covers
 * all three, so a loader may read the extent with one O_DIRECT read into a
 * device buffer B and use tx8_weight {data = B, scales = B + (scales_offset
 * - data_offset), index = B + (index_offset - data_offset)}.
 */
#ifndef TX_SMD_H
#define TX_SMD_H

#include <stddef.h>
#include <stdint.h>

#include <tx-internal/tx_model.h>
#include <tx8/tx8_hw.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TX_SMD_MAGIC "TX8SMD\r\n"
#define TX_SMD_VERSION_MAJOR 1
#define TX_SMD_VERSION_MINOR 0
#define TX_SMD_ALIGN 4096u
#define TX_SMD_SUB_ALIGN 64u
#define TX_SMD_MAX_DIMS 4

/* header.flags */
#define TX_SMD_F_QUANTIZED (1u << 0) /* at least one I8 or FP8 tensor */
#define TX_SMD_F_SPARSE (1u << 1)    /* at least one BLOCK_SPARSE tensor */

struct tx_smd_header {
    char magic[8];          /* TX_SMD_MAGIC */
    uint16_t version_major; /* readers refuse another major */
    uint16_t version_minor; /* readers accept any minor */
    uint32_t header_size;   /* 128 + 32 * section_count, <= 4096 */
    uint32_t flags;         /* TX_SMD_F_* */
    uint32_t alignment;     /* TX_SMD_ALIGN */
    uint32_t section_count;
    uint32_t tensor_count;
    uint64_t file_size;      /* exact size of the file */
    uint64_t data_offset;    /* first tensor extent (aligned) */
    uint64_t data_size;      /* bytes from data_offset to the end of the last extent */
    uint32_t tx8_if_version; /* TX8_IF_VERSION whose weight formats are used */
    uint32_t sparse_block;   /* TX8_SPARSE_BLOCK */
    uint8_t rsvd[60];        /* zero */
    uint32_t header_crc;     /* CRC32C of the header area with this field zero */
};

/* Section kinds */
enum tx_smd_section_kind {
    TX_SMD_SEC_CONFIG = 1,           /* config.json (UTF-8 JSON object), required */
    TX_SMD_SEC_TOKENIZER = 2,        /* tokenizer.json, required */
    TX_SMD_SEC_TOKENIZER_CONFIG = 3, /* tokenizer_config.json, optional */
    TX_SMD_SEC_PLAN = 4,             /* precision plan, required */
    TX_SMD_SEC_TENSORS = 5,          /* tensor table, required */
    TX_SMD_SEC_STRINGS = 6,          /* tensor names, required */
    TX_SMD_SEC_METADATA = 7,         /* export metadata (JSON object), optional */
};

/* section.flags */
#define TX_SMD_SECF_OPTIONAL (1u << 0) /* readers not knowing the kind skip it */

struct tx_smd_section {
    uint32_t kind;
    uint32_t flags;
    uint64_t offset; /* aligned to TX_SMD_ALIGN */
    uint64_t size;
    uint32_t crc; /* CRC32C of the section's bytes */
    uint32_t rsvd;
};

/* Layer types of the precision plan (the article's glm_layer_config_t
 * layer types, in this order). */
enum tx_smd_layer {
    TX_SMD_LAYER_EMBEDDING = 0,
    TX_SMD_LAYER_ATTENTION = 1,
    TX_SMD_LAYER_MLP = 2,    /* dense MLP and shared experts */
    TX_SMD_LAYER_EXPERT = 3, /* routed experts */
    TX_SMD_LAYER_NORM = 4,
    TX_SMD_LAYER_OUTPUT = 5,
    TX_SMD_LAYER_ROUTER = 6, /* router gate and correction bias (always F32) */
    TX_SMD_LAYER_COUNT = 7,
};

/* Precisions (the article's FP32, FP16, BF16, INT8_MIXED). */
enum tx_smd_precision {
    TX_SMD_PREC_FP32 = 0,
    TX_SMD_PREC_FP16 = 1,
    TX_SMD_PREC_BF16 = 2,
    TX_SMD_PREC_INT8_MIXED = 3,
    TX_SMD_PREC_FP8 = 4, /* F8_E4M3 with f32 scales per 128 x 128 block (issue 38) */
    TX_SMD_PREC_COUNT = 5,
};

/* One plan entry; the PLAN section is u32 count (== TX_SMD_LAYER_COUNT),
 * u32 zero, then count entries, one per layer type in enum order. */
#define TX_SMD_PLANF_SPARSE (1u << 0) /* FFN weights stored BLOCK_SPARSE */
struct tx_smd_plan_entry {
    uint32_t layer;      /* enum tx_smd_layer */
    uint32_t precision;  /* enum tx_smd_precision */
    uint32_t group_size; /* INT8 scale group (0 = per output channel) */
    uint32_t flags;      /* TX_SMD_PLANF_* */
};

/* The tensor table: tensor_count entries of 192 bytes, sorted by
 * data_offset (the order of the extents in the file). */
struct tx_smd_tensor {
    uint32_t name_offset;            /* into STRINGS; name_len bytes then a NUL */
    uint32_t name_len;               /* 1 .. 255 */
    uint16_t dtype;                  /* enum tx8_dtype: F32, F16, BF16 or I8 */
    uint16_t format;                 /* enum tx8_wfmt */
    uint16_t layer_type;             /* enum tx_smd_layer */
    uint16_t ndim;                   /* 1 .. TX_SMD_MAX_DIMS */
    uint64_t shape[TX_SMD_MAX_DIMS]; /* logical shape; unused dims 0 */
    uint32_t rows;                   /* product of all dims but the last (1 for 1-D) */
    uint32_t cols;                   /* last dim */
    uint32_t group_size;             /* I8: 0 = one scale per row, else per group */
    uint32_t nnz_blocks;             /* BLOCK_SPARSE: stored blocks */
    int32_t layer;                   /* decoder layer, -1 for model-level tensors */
    int32_t expert;                  /* routed expert, -1 otherwise */
    uint16_t src_dtype;              /* enum tx8_dtype of the source checkpoint */
    uint16_t rsvd0;
    uint32_t rsvd1;
    uint64_t data_offset; /* aligned to TX_SMD_ALIGN */
    uint64_t data_size;
    uint64_t scales_offset; /* 0 if none, else aligned to TX_SMD_SUB_ALIGN */
    uint64_t scales_size;
    uint64_t index_offset; /* 0 if none, else aligned to TX_SMD_SUB_ALIGN */
    uint64_t index_size;
    uint64_t extent_size; /* multiple of TX_SMD_ALIGN covering the three */
    uint32_t data_crc;    /* CRC32C of each region */
    uint32_t scales_crc;
    uint32_t index_crc;
    uint32_t rsvd2;
    uint8_t rsvd3[40];
};

_Static_assert(sizeof(struct tx_smd_header) == 128, "smd header");
_Static_assert(sizeof(struct tx_smd_section) == 32, "smd section");
_Static_assert(sizeof(struct tx_smd_plan_entry) == 16, "smd plan");
_Static_assert(sizeof(struct tx_smd_tensor) == 192, "smd tensor");

TX_API const char *tx_smd_layer_name(enum tx_smd_layer l);         /* "embedding", ... */
TX_API const char *tx_smd_precision_name(enum tx_smd_precision p); /* "FP32", ... */
/* Case-insensitive; accepts "fp32", "FP16", "bf16", "int8", "INT8_MIXED". -1 if unknown. */
TX_API int tx_smd_precision_parse(const char *s);
/* "embedding", "attention", "mlp", "experts"/"expert", "norm"/"norms", "output". -1 if unknown. */
TX_API int tx_smd_layer_parse(const char *s);
/* Storage dtype for a matrix of that precision (FP32 -> F32, ..., INT8_MIXED -> I8). */
TX_API unsigned tx_smd_precision_dtype(enum tx_smd_precision p);

/* Size of the scales / index regions implied by a tensor's fields (0 if none);
 * UINT64_MAX if the fields are inconsistent. */
TX_API uint64_t tx_smd_scales_size(unsigned dtype, uint32_t rows, uint32_t cols,
                                   uint32_t group_size);
TX_API uint64_t tx_smd_index_size(unsigned format, uint32_t rows, uint32_t nnz_blocks);
TX_API uint64_t tx_smd_data_size(unsigned dtype, unsigned format, uint32_t rows, uint32_t cols,
                                 uint32_t nnz_blocks);

/*
 * Checks a BLOCK_SPARSE index (u32 row_ptr[rows + 1], u16 col_block[nnz]):
 * row_ptr[0] == 0, non-decreasing, row_ptr[rows] == nnz, every row's
 * col_block strictly increasing and < cols / TX8_SPARSE_BLOCK.
 */
TX_API int tx_smd_check_sparse_index(const void *index, uint64_t size, uint32_t rows, uint32_t cols,
                                     uint32_t nnz_blocks, char *err, size_t errsz);

/* ---- reader ------------------------------------------------------------- */

struct tx_smd;

#define TX_SMD_OPEN_VERIFY (1u << 0) /* verify every checksum while opening */

/*
 * Opens and validates a package: magic, versions, header checksum, file
 * size, every section (bounds, alignment, overlaps, checksums of the
 * metadata sections, JSON well-formedness, plan values) and every tensor
 * entry (name, dtype/format/shape consistency, region sizes, alignment,
 * bounds, overlaps). Tensor data checksums are verified only with
 * TX_SMD_OPEN_VERIFY or tx_smd_verify_tensor. The file is never trusted;
 * every error names the file and, where there is one, the tensor.
 */
TX_API int tx_smd_open(const char *path, unsigned flags, struct tx_smd **out, char *err,
                       size_t errsz);
TX_API void tx_smd_close(struct tx_smd *s);

TX_API const char *tx_smd_path(const struct tx_smd *s);
TX_API const struct tx_smd_header *tx_smd_header(const struct tx_smd *s);
/* NUL-terminated section contents (NULL/0 if absent). */
TX_API const char *tx_smd_config_json(const struct tx_smd *s, size_t *len);
TX_API const char *tx_smd_tokenizer_json(const struct tx_smd *s, size_t *len);
TX_API const char *tx_smd_tokenizer_config_json(const struct tx_smd *s, size_t *len);
TX_API const char *tx_smd_metadata_json(const struct tx_smd *s, size_t *len);
/* Plan entry of a layer type (always present after a successful open). */
TX_API const struct tx_smd_plan_entry *tx_smd_plan(const struct tx_smd *s, enum tx_smd_layer l);

TX_API size_t tx_smd_tensor_count(const struct tx_smd *s);
TX_API const struct tx_smd_tensor *tx_smd_tensor_at(const struct tx_smd *s, size_t i);
TX_API const char *tx_smd_tensor_name(const struct tx_smd *s, const struct tx_smd_tensor *t);
TX_API const struct tx_smd_tensor *tx_smd_find(const struct tx_smd *s, const char *name);

/* Reads the tensor's whole extent (extent_size bytes) into dst (dstsz >=
 * extent_size) with pread, verifying the checksums if verify != 0. */
TX_API int tx_smd_read_extent(const struct tx_smd *s, const struct tx_smd_tensor *t, void *dst,
                              size_t dstsz, int verify, char *err, size_t errsz);
/* Checks the checksums (and the sparse index) of a tensor whose extent is
 * at buf (e.g. already in device memory). */
TX_API int tx_smd_check_extent(const struct tx_smd *s, const struct tx_smd_tensor *t,
                               const void *buf, char *err, size_t errsz);
/* Reads and checks one tensor / all tensors from the file. */
TX_API int tx_smd_verify_tensor(const struct tx_smd *s, const struct tx_smd_tensor *t, char *err,
                                size_t errsz);
TX_API int tx_smd_verify_all(const struct tx_smd *s, char *err, size_t errsz);

/* Dequantises/expands a tensor whose extent is at buf to a dense row-major
 * float matrix dst[rows * cols] (reference semantics of the device
 * formats: absent sparse blocks are zero, I8 * scale). */
TX_API int tx_smd_dequant(const struct tx_smd_tensor *t, const void *buf, float *dst, char *err,
                          size_t errsz);

/* The file descriptor of the open package (read-only). */
TX_API int tx_smd_fd(const struct tx_smd *s);

/* ---- writer ------------------------------------------------------------- */

struct tx_smd_writer;

/* Creates a package written to a temporary name next to path; only a
 * successful tx_smd_writer_finish renames it to path. */
TX_API int tx_smd_writer_open(const char *path, struct tx_smd_writer **out, char *err,
                              size_t errsz);
/* Sections; each may be set once, before or between tensors. */
TX_API int tx_smd_writer_section(struct tx_smd_writer *w, enum tx_smd_section_kind kind,
                                 const void *data, size_t len, char *err, size_t errsz);
TX_API int tx_smd_writer_plan(struct tx_smd_writer *w,
                              const struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT], char *err,
                              size_t errsz);

/* Describes a tensor for tx_smd_writer_begin: the offsets, sizes and
 * checksums are filled in by the writer. */
struct tx_smd_tensor_desc {
    const char *name;
    unsigned dtype, format;
    enum tx_smd_layer layer_type;
    int ndim;
    uint64_t shape[TX_SMD_MAX_DIMS];
    uint32_t group_size;
    uint32_t nnz_blocks; /* BLOCK_SPARSE */
    int layer, expert;
    unsigned src_dtype;
};

/*
 * Streams one tensor: begin, then its data in pieces (tx_smd_writer_data,
 * exactly data_size bytes in total), then end with its scales and index
 * (whole, as the device wants them). Only the data pieces pass through the
 * writer, so a tensor never needs to be in memory at once.
 */
TX_API int tx_smd_writer_begin(struct tx_smd_writer *w, const struct tx_smd_tensor_desc *d,
                               char *err, size_t errsz);
TX_API int tx_smd_writer_data(struct tx_smd_writer *w, const void *data, size_t len, char *err,
                              size_t errsz);
TX_API int tx_smd_writer_end(struct tx_smd_writer *w, const void *scales, size_t scales_len,
                             const void *index, size_t index_len, char *err, size_t errsz);
/* Writes the table, the header, fsyncs and renames; frees w. */
TX_API int tx_smd_writer_finish(struct tx_smd_writer *w, char *err, size_t errsz);
/* Removes the temporary file; frees w. */
TX_API void tx_smd_writer_abort(struct tx_smd_writer *w);
/* Temporary file name (for a signal handler that must unlink it); NULL
 * while the package is an unnamed O_TMPFILE file (the usual case: nothing
 * to unlink, a killed writer leaves nothing behind). */
TX_API const char *tx_smd_writer_temp_path(const struct tx_smd_writer *w);

#ifdef __cplusplus
}
#endif
#endif
