/* SPDX-License-Identifier: MIT */
/* Internal helpers of the model-format code (libtx/model/). */
#ifndef TX_MODEL_INTERNAL_H
#define TX_MODEL_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <tx-internal/tx_model.h>

#include <tx-internal/tx_errors.h>
#include <tx-internal/tx_file.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the model formats are little-endian; a big-endian port needs byte swaps"
#endif

#define TXM_HIDDEN __attribute__((visibility("hidden")))

/* The old name of tx_errbuf (tx-internal/tx_errors.h). Nothing in libtx/model or
 * tools/lib calls it any more; it stays only for the architecture modules
 * being written against it (issue 10) and goes once they are in. */
#define txm_err tx_errbuf

/* Overflow-checked arithmetic: return 0 on overflow. */
static inline int txm_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline int txm_add(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
static inline uint64_t txm_align(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* A read-only mapping of a whole file. */
struct txm_map {
    int fd;
    void *addr; /* NULL for an empty file */
    uint64_t size;
};

/* Opens and maps path; message names the file. */
TXM_HIDDEN int txm_map_file(const char *path, struct txm_map *m, char *err, size_t errsz);
TXM_HIDDEN void txm_unmap(struct txm_map *m);

/* Reads a whole (small) file into a malloc'd NUL-terminated buffer; refuses
 * files over max bytes. */
TXM_HIDDEN int txm_read_file(const char *path, uint64_t max, char **out, size_t *len, char *err,
                             size_t errsz);

/*
 * 1 if s[0..n) is one JSON object (RFC 8259 syntax, well-formed UTF-8, at
 * most 16 levels deep), surrounded by nothing but JSON white space; 0
 * otherwise. Allocation-free and fast (a syntax check, no tree): the .smd
 * reader runs it on its JSON sections and leaves the documents it does not
 * accept to json-c. Everything it accepts, json-c's parser accepts too (the
 * config fuzz target checks this); it accepts less (no escaped surrogates,
 * no raw control characters, no long numbers, nothing deeper).
 */
TXM_HIDDEN int txm_json_object_ok(const char *s, size_t n);

/* The check tx_smd_open makes of a JSON section (enum tx_smd_section_kind):
 * a NUL-free, valid JSON object; the message names path and the section.
 * glm-export runs it before committing a package. */
TXM_HIDDEN int txm_smd_check_json(const char *path, int kind, const char *txt, size_t len,
                                  char *err, size_t errsz);

/* generation_config.json (gen_config.c): at most TXM_GEN_CONFIG_MAX bytes;
 * what names the source in messages ("PATH", "PKG: metadata
 * generation_config"); token ids must be < vocab_size (<= 0: the
 * GLM_MAX_VOCAB limit). Unknown fields are ignored, null is absent. */
#define TXM_GEN_CONFIG_MAX (1u << 20)
struct glm_generation_config;
struct json_object;
TXM_HIDDEN int txm_gen_config_parse(const char *txt, size_t len, const char *what, int vocab_size,
                                    struct glm_generation_config *g, char *err, size_t errsz);
TXM_HIDDEN int txm_gen_config_from_object(struct json_object *root, const char *what,
                                          int vocab_size, struct glm_generation_config *g,
                                          char *err, size_t errsz);
/* The normalised object glm-export stores (new reference). */
TXM_HIDDEN struct json_object *txm_gen_config_to_object(const struct glm_generation_config *g);

/* malloc'd "dir/name". */
/* tx_tensor_read_f32 into doubles: an F8_E4M3 tensor with its scales
 * dequantised exactly (txm_fp8_read_f64), the other types widened from
 * their float values. For the float64 reference (runtime/validate.c). */
TXM_HIDDEN int txm_tensor_read_f64(const struct tx_tensor *t, uint64_t first, uint64_t count,
                                   double *dst, char *err, size_t errsz);

TXM_HIDDEN char *txm_path_join(const char *dir, const char *name);
/* malloc'd directory part of path ("." if none). */
TXM_HIDDEN char *txm_dirname(const char *path);
/* 1 if path is a directory. */
TXM_HIDDEN int txm_is_dir(const char *path);
TXM_HIDDEN int txm_file_exists(const char *path);

/* Whole-buffer I/O and all-or-nothing files: libtx/include/tx-internal/tx_file.h (the
 * txm_* names stay until phase 2 of issue 10 renames their callers). */
#define txm_write_all tx_file_write_all
#define txm_pwrite_all tx_file_pwrite_all
#define txm_pread_all tx_file_pread_all
#define txm_temp_name tx_file_temp_name
#define txm_commit_temp tx_file_commit_temp
#define txm_write_text tx_file_write_text

/* Element type from a safetensors dtype string; -1 if unknown. */
TXM_HIDDEN int txm_elem_from_name(const char *s);

/* Growable byte buffer. */
struct txm_buf {
    char *p;
    size_t len, cap;
};
TXM_HIDDEN int txm_buf_put(struct txm_buf *b, const void *p, size_t n);
TXM_HIDDEN void txm_buf_free(struct txm_buf *b);

/* Runs fn(ctx, i) for i in [0, ntasks) on up to nthreads threads (tasks are
 * taken in order from a shared counter); returns the first non-zero value
 * fn returned (the remaining tasks are skipped), else 0. */
typedef int (*txm_task_fn)(void *ctx, uint64_t i);
TXM_HIDDEN int txm_parallel(int nthreads, uint64_t ntasks, txm_task_fn fn, void *ctx);
/* Number of online CPUs (>= 1). */
TXM_HIDDEN int txm_ncpus(void);

/* tensors.c: the MTP (NextN) layer's tensors, model.layers.{num_hidden_layers}
 * (eh_proj, enorm, hnorm, its decoder layer with MoE, shared_head.norm;
 * the optional shared_head.head and embed_tokens are not listed); nothing
 * when num_nextn_predict_layers is 0. As glm_config_tensor_list. */
struct glm_config;
struct glm_tensor_info;
int txm_mtp_tensor_list(const struct glm_config *c,
                        int (*cb)(void *ctx, const struct glm_tensor_info *t), void *ctx);

#endif
