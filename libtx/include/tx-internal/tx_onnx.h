/* SPDX-License-Identifier: MIT */
/*
 * ONNX models as weight containers (reader and writer), through protobuf-c
 * and a subset of onnx.proto with the real field numbers
 * (libtx/model/onnx/onnx.proto).
 *
 * Only the graph's initializers are read: a GLM model's architecture is
 * known from its config (see tx_checkpoint.h), so graph nodes are never
 * executed or interpreted. Initializer data may be
 *   - inline: raw_data (little-endian), float_data (FLOAT), int32_data
 *     (FLOAT16/BFLOAT16 bit patterns and small integer types),
 *     int64_data, double_data, uint64_data;
 *   - external (data_location = EXTERNAL): external_data entries
 *     "location" (a relative path inside the model's directory; absolute
 *     paths and ".." are refused), "offset" and "length" (decimal strings).
 *     External files are mapped read-only, so they may be larger than
 *     memory.
 * Initializers of types with no fixed-size representation (STRING,
 * COMPLEX64/128, FLOAT8 *FNUZ, 4-bit types) are skipped and counted
 * (tx_onnx_skipped). A "segment" (chunked tensor) is refused. Subgraphs
 * (If/Loop bodies in node attributes) are skipped unparsed, which bounds
 * the parser's nesting depth on hostile input.
 */
#ifndef TX_ONNX_H
#define TX_ONNX_H

#include <tx-internal/tx_model.h>

/* Limits (docs/tools-export.md, "Limits of the input formats") */
#define TX_ONNX_MAX_TENSORS 1048576 /* graph initializers (DeepSeek-V3: ~92k) */
#define TX_ONNX_MAX_NAME 1024       /* bytes of an initializer name (real: < 100) */

#ifdef __cplusplus
extern "C" {
#endif

/* ONNX TensorProto.DataType values used here. */
enum {
    TX_ONNX_FLOAT = 1,
    TX_ONNX_UINT8 = 2,
    TX_ONNX_INT8 = 3,
    TX_ONNX_UINT16 = 4,
    TX_ONNX_INT16 = 5,
    TX_ONNX_INT32 = 6,
    TX_ONNX_INT64 = 7,
    TX_ONNX_STRING = 8,
    TX_ONNX_BOOL = 9,
    TX_ONNX_FLOAT16 = 10,
    TX_ONNX_DOUBLE = 11,
    TX_ONNX_UINT32 = 12,
    TX_ONNX_UINT64 = 13,
    TX_ONNX_BFLOAT16 = 16,
    TX_ONNX_FLOAT8E4M3FN = 17,
    TX_ONNX_FLOAT8E5M2 = 19,
};

/* ONNX data_type of an element type, or 0 if ONNX has none. */
TX_API int tx_onnx_type_of(enum tx_elem_type t);

struct tx_onnx;

/* Reads and validates path; the message names the file and the tensor. */
TX_API int tx_onnx_open(const char *path, struct tx_onnx **out, char *err, size_t errsz);
TX_API void tx_onnx_close(struct tx_onnx *m);
TX_API const char *tx_onnx_path(const struct tx_onnx *m);
TX_API size_t tx_onnx_count(const struct tx_onnx *m);
/* Initializers in file order. */
TX_API const struct tx_tensor *tx_onnx_tensor(const struct tx_onnx *m, size_t i);
TX_API const struct tx_tensor *tx_onnx_find(const struct tx_onnx *m, const char *name);
/* ModelProto.metadata_props value, or NULL. */
TX_API const char *tx_onnx_metadata(const struct tx_onnx *m, const char *key);
TX_API const char *tx_onnx_producer(const struct tx_onnx *m);
TX_API int64_t tx_onnx_ir_version(const struct tx_onnx *m);
TX_API size_t tx_onnx_node_count(const struct tx_onnx *m);
TX_API size_t tx_onnx_skipped(const struct tx_onnx *m);

/* ---- writer ------------------------------------------------------------- */

struct tx_onnx_writer;

/*
 * Starts a model written to path on tx_onnx_writer_finish (through a
 * temporary name). external_data: NULL to store every initializer inline
 * (raw_data; the data is copied and held until finish, and the whole model
 * must stay under protobuf's 2 GiB), or a file name (no '/') in the same
 * directory that receives the data of every initializer, each at a
 * 4096-aligned offset, as it is added (streaming). meta: NULL or a
 * NULL-terminated list of key, value pairs for metadata_props.
 */
TX_API int tx_onnx_writer_open(const char *path, const char *external_data, const char *const *meta,
                               struct tx_onnx_writer **out, char *err, size_t errsz);
/* Adds an initializer; data holds its nelem * size bytes (little-endian). */
TX_API int tx_onnx_writer_add(struct tx_onnx_writer *w, const struct tx_tensor_decl *d,
                              const void *data, char *err, size_t errsz);
/* External data only: adds an initializer whose data is then appended in
 * pieces with tx_onnx_writer_append (exactly nbytes in total). */
TX_API int tx_onnx_writer_begin(struct tx_onnx_writer *w, const struct tx_tensor_decl *d, char *err,
                                size_t errsz);
TX_API int tx_onnx_writer_append(struct tx_onnx_writer *w, const void *data, size_t len, char *err,
                                 size_t errsz);

/* A graph input or output: dims[i] >= 0 fixed, < 0 symbolic named params[i]. */
struct tx_onnx_value {
    const char *name;
    enum tx_elem_type type;
    int ndim;
    int64_t dims[TX_TENSOR_MAX_DIMS];
    const char *params[TX_TENSOR_MAX_DIMS];
};
TX_API int tx_onnx_writer_io(struct tx_onnx_writer *w, int is_output, const struct tx_onnx_value *v,
                             char *err, size_t errsz);
/* A node (default domain); attr_name/ints: one optional INTS attribute. */
TX_API int tx_onnx_writer_node(struct tx_onnx_writer *w, const char *op_type, const char *name,
                               const char *const *inputs, size_t nin, const char *const *outputs,
                               size_t nout, const char *attr_name, const int64_t *ints,
                               size_t nints, char *err, size_t errsz);
/* Writes the model (ir_version 8, opset 17, producer "libtx") and renames;
 * frees w. */
TX_API int tx_onnx_writer_finish(struct tx_onnx_writer *w, char *err, size_t errsz);
TX_API void tx_onnx_writer_abort(struct tx_onnx_writer *w);

#ifdef __cplusplus
}
#endif
#endif
