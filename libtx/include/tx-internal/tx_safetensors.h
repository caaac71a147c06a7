/* SPDX-License-Identifier: MIT */
/*
 * Safetensors files (the Hugging Face weight format): reader, writer and
 * sharded sets (model.safetensors.index.json).
 *
 * File layout: u64 little-endian N, N bytes of JSON header, then the data
 * buffer. The header maps each tensor name to {"dtype", "shape",
 * "data_offsets": [begin, end]} (offsets relative to the data buffer) and
 * may hold "__metadata__" (string -> string).
 *
 * The reader maps the file read-only (files larger than memory are paged in
 * on demand) and validates the header completely before returning: header
 * length sane (<= 100 MB and inside the file), JSON well formed and an
 * object, every entry with a known dtype, a shape of at most
 * TX_TENSOR_MAX_DIMS non-negative dims, data_offsets inside the data buffer,
 * end - begin == product(shape) * dtype size, no two tensors overlapping.
 * Every message names the file and, when there is one, the tensor.
 * Unsupported (but known) dtypes are accepted by the reader; converting such
 * a tensor (tx_tensor_read_f32) or loading it as a model tensor
 * (tx_checkpoint) fails with a message naming it.
 */
#ifndef TX_SAFETENSORS_H
#define TX_SAFETENSORS_H

#include <tx-internal/tx_model.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TX_ST_MAX_HEADER (100u * 1000u * 1000u)
/* Limits (docs/tools-export.md, "Limits of the input formats") */
#define TX_ST_MAX_TENSORS 1048576 /* header entries / weight_map entries (DeepSeek-V3: ~92k) */
#define TX_ST_MAX_NAME 1024       /* bytes of a tensor name (real: < 100) */
#define TX_ST_MAX_SHARDS 4096     /* files named by the shard index (DeepSeek-V3: 163) */
/* shard files of a directory without an index are capped by TX_ST_MAX_SHARDS too */
#define TX_ST_MAX_SHARD_NAME 200 /* bytes of a shard file name (real: 32) */

struct tx_st_file;

TX_API int tx_st_open(const char *path, struct tx_st_file **out, char *err, size_t errsz);
TX_API void tx_st_close(struct tx_st_file *f);
TX_API const char *tx_st_path(const struct tx_st_file *f);
TX_API size_t tx_st_count(const struct tx_st_file *f);
/* Tensors in the order of their data offsets. */
TX_API const struct tx_tensor *tx_st_tensor(const struct tx_st_file *f, size_t i);
TX_API const struct tx_tensor *tx_st_find(const struct tx_st_file *f, const char *name);
/* A "__metadata__" value, or NULL. */
TX_API const char *tx_st_metadata(const struct tx_st_file *f, const char *key);

/* ---- writer ------------------------------------------------------------- */

struct tx_st_writer;

/*
 * Creates path (through a temporary file renamed by tx_st_writer_finish,
 * so a failed write never leaves a partial file under that name). The
 * tensors are declared up front; their data is then appended with
 * tx_st_writer_write in declaration order, in pieces of any size.
 * meta: NULL or a NULL-terminated list of key, value pairs for
 * "__metadata__". The header is padded with spaces to a multiple of 8 bytes.
 */
TX_API int tx_st_writer_open(const char *path, const struct tx_tensor_decl *decls, size_t n,
                             const char *const *meta, struct tx_st_writer **out, char *err,
                             size_t errsz);
TX_API int tx_st_writer_write(struct tx_st_writer *w, const void *data, size_t len, char *err,
                              size_t errsz);
/* Checks that every declared byte was written, then renames; frees w. */
TX_API int tx_st_writer_finish(struct tx_st_writer *w, char *err, size_t errsz);
/* Removes the temporary file; frees w. */
TX_API void tx_st_writer_abort(struct tx_st_writer *w);

/* ---- sets of files (one checkpoint) ------------------------------------- */

struct tx_st_set;

/*
 * Opens the safetensors files of a checkpoint directory:
 * model.safetensors.index.json if present (its "weight_map" names the file
 * of each tensor; every listed tensor must be in the file it names, every
 * listed file must exist), else model.safetensors, else every *.safetensors
 * file of the directory in name order. A tensor name present in two files
 * is an error naming both.
 */
TX_API int tx_st_set_open(const char *dir, struct tx_st_set **out, char *err, size_t errsz);
TX_API void tx_st_set_close(struct tx_st_set *s);
TX_API size_t tx_st_set_count(const struct tx_st_set *s);
TX_API const struct tx_tensor *tx_st_set_tensor(const struct tx_st_set *s, size_t i);
TX_API const struct tx_tensor *tx_st_set_find(const struct tx_st_set *s, const char *name);
TX_API size_t tx_st_set_nfiles(const struct tx_st_set *s);
TX_API const char *tx_st_set_file(const struct tx_st_set *s, size_t i);

/*
 * Writes model.safetensors.index.json: {"metadata": {"total_size": N},
 * "weight_map": {name: file}} with names[i] stored in files[i].
 */
TX_API int tx_st_write_index(const char *path, const char *const *names, const char *const *files,
                             size_t n, uint64_t total_size, char *err, size_t errsz);

#ifdef __cplusplus
}
#endif
#endif
