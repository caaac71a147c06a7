// SPDX-License-Identifier: MIT
/*
 * The .smd package: round trip of every dtype and format, checksums,
 * truncated and corrupted files, inconsistent tables (with valid checksums,
 * to reach the structural checks), writer errors.
 */
#include "test_model_util.h"

#include <math.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <tx/tx_error.h>
#include <tx/tx_dtype.h>
#include <tx-internal/tx_export.h>
#include <tx-internal/tx_smd.h>
#include "tx_test_main.h"

static char err[TX_ERR_MAX];

static const char CONFIG[] = "{\"model_type\": \"glm_moe_dsa\", \"hidden_size\": 64}";

struct spec {
    const char *name;
    unsigned dtype, format;
    uint32_t rows, cols, group, keep;
    int ndim;
};

/* every storage form the device has */
static const struct spec SPECS[] = {
    {"dense.f32", TX8_DTYPE_F32, TX8_WFMT_DENSE, 5, 7, 0, 0, 2},
    {"dense.f16", TX8_DTYPE_F16, TX8_WFMT_DENSE, 4, 64, 0, 0, 2},
    {"dense.bf16", TX8_DTYPE_BF16, TX8_WFMT_DENSE, 3, 96, 0, 0, 2},
    {"dense.i8.row", TX8_DTYPE_I8, TX8_WFMT_DENSE, 6, 64, 0, 0, 2},
    {"dense.i8.group", TX8_DTYPE_I8, TX8_WFMT_DENSE, 6, 128, 32, 0, 2},
    {"sparse.f32", TX8_DTYPE_F32, TX8_WFMT_BLOCK_SPARSE, 4, 128, 0, 2, 2},
    {"sparse.f16", TX8_DTYPE_F16, TX8_WFMT_BLOCK_SPARSE, 3, 96, 0, 1, 2},
    {"sparse.bf16", TX8_DTYPE_BF16, TX8_WFMT_BLOCK_SPARSE, 2, 64, 0, 2, 2},
    {"sparse.i8.row", TX8_DTYPE_I8, TX8_WFMT_BLOCK_SPARSE, 5, 128, 0, 3, 2},
    {"sparse.i8.group", TX8_DTYPE_I8, TX8_WFMT_BLOCK_SPARSE, 5, 256, 64, 4, 2},
    {"norm.weight", TX8_DTYPE_F32, TX8_WFMT_DENSE, 1, 33, 0, 0, 1},
};
#define NSPECS (sizeof(SPECS) / sizeof(SPECS[0]))

struct built {
    void *data;
    float *scales;
    void *index;
    size_t dlen, slen, ilen;
    uint32_t nnz;
    float *expect; /* dequantised */
};

static void build(const struct spec *sp, unsigned seed, struct built *b)
{
    size_t n = (size_t)sp->rows * sp->cols;
    float *w = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        w[i] = tm_rand(&seed);
    b->nnz = sp->format == TX8_WFMT_BLOCK_SPARSE ? sp->rows * sp->keep : 0;
    b->dlen = (size_t)tx_smd_data_size(sp->dtype, sp->format, sp->rows, sp->cols, b->nnz);
    b->slen = (size_t)tx_smd_scales_size(sp->dtype, sp->rows, sp->cols, sp->group);
    b->ilen = (size_t)tx_smd_index_size(sp->format, sp->rows, b->nnz);
    b->data = malloc(b->dlen + 1);
    b->scales = b->slen ? malloc(b->slen) : NULL;
    b->index = b->ilen ? malloc(b->ilen) : NULL;
    ck_assert_int_eq(tx_quant_matrix(w, sp->rows, sp->cols, sp->dtype, sp->format, sp->group,
                                     sp->keep, b->data, b->scales, b->index, NULL, err,
                                     sizeof(err)),
                     0);
    b->expect = malloc(n * sizeof(float));
    ck_assert_int_eq(tx_weight_dequant(sp->dtype, sp->format, sp->rows, sp->cols, sp->group, b->nnz,
                                       b->data, b->scales, b->index, b->expect, err, sizeof(err)),
                     0);
    free(w);
}

static void free_built(struct built *b)
{
    free(b->data);
    free(b->scales);
    free(b->index);
    free(b->expect);
}

static void plan_of(struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT])
{
    tx_plan_golden(plan);
    plan[TX_SMD_LAYER_EXPERT].flags = TX_SMD_PLANF_SPARSE;
    plan[TX_SMD_LAYER_EXPERT].group_size = 64;
}

/* Writes a package holding SPECS; returns the built tensors in b. */
static void write_pkg(const char *path, struct built b[NSPECS])
{
    struct tx_smd_writer *w;
    ck_assert_int_eq(tx_smd_writer_open(path, &w, err, sizeof(err)), 0);
    ck_assert_int_eq(
        tx_smd_writer_section(w, TX_SMD_SEC_CONFIG, CONFIG, strlen(CONFIG), err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_writer_section(w, TX_SMD_SEC_TOKENIZER, TM_TOKENIZER,
                                           strlen(TM_TOKENIZER), err, sizeof(err)),
                     0);
    struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT];
    plan_of(plan);
    ck_assert_int_eq(tx_smd_writer_plan(w, plan, err, sizeof(err)), 0);
    for (size_t i = 0; i < NSPECS; i++) {
        const struct spec *sp = &SPECS[i];
        build(sp, 100u + (unsigned)i, &b[i]);
        struct tx_smd_tensor_desc d = {
            .name = sp->name,
            .dtype = sp->dtype,
            .format = sp->format,
            .layer_type = sp->ndim == 1 ? TX_SMD_LAYER_NORM : TX_SMD_LAYER_EXPERT,
            .ndim = sp->ndim,
            .group_size = sp->group,
            .nnz_blocks = b[i].nnz,
            .layer = (int)i,
            .expert = -1,
            .src_dtype = TX8_DTYPE_BF16,
        };
        if (sp->ndim == 1) {
            d.shape[0] = sp->cols;
        } else {
            d.shape[0] = sp->rows;
            d.shape[1] = sp->cols;
        }
        ck_assert_int_eq(tx_smd_writer_begin(w, &d, err, sizeof(err)), 0);
        /* stream the data in two pieces */
        size_t half = b[i].dlen / 2;
        ck_assert_int_eq(tx_smd_writer_data(w, b[i].data, half, err, sizeof(err)), 0);
        ck_assert_int_eq(
            tx_smd_writer_data(w, (char *)b[i].data + half, b[i].dlen - half, err, sizeof(err)), 0);
        ck_assert_int_eq(
            tx_smd_writer_end(w, b[i].scales, b[i].slen, b[i].index, b[i].ilen, err, sizeof(err)),
            0);
    }
    /* a section given after the tensors goes to the end */
    const char *meta = "{\"producer\": \"test\"}";
    ck_assert_int_eq(
        tx_smd_writer_section(w, TX_SMD_SEC_METADATA, meta, strlen(meta), err, sizeof(err)), 0);
    ck_assert(!tm_exists(path));
    ck_assert_int_eq(tx_smd_writer_finish(w, err, sizeof(err)), 0);
    ck_assert(tm_exists(path));
}

START_TEST(roundtrip)
{
    const char *p = tm_path("m.smd");
    struct built b[NSPECS];
    write_pkg(p, b);
    ck_assert_int_eq(tm_count_files(), 1);
    struct tx_smd *s;
    ck_assert_int_eq(tx_smd_open(p, TX_SMD_OPEN_VERIFY, &s, err, sizeof(err)), 0);
    const struct tx_smd_header *h = tx_smd_header(s);
    ck_assert_uint_eq(h->version_major, TX_SMD_VERSION_MAJOR);
    ck_assert_uint_eq(h->tensor_count, NSPECS);
    ck_assert_uint_eq(h->flags, TX_SMD_F_QUANTIZED | TX_SMD_F_SPARSE);
    ck_assert_uint_eq(h->data_offset % TX_SMD_ALIGN, 0);
    size_t len;
    ck_assert_str_eq(tx_smd_config_json(s, &len), CONFIG);
    ck_assert_uint_eq(len, strlen(CONFIG));
    ck_assert_str_eq(tx_smd_tokenizer_json(s, NULL), TM_TOKENIZER);
    ck_assert_ptr_null(tx_smd_tokenizer_config_json(s, NULL));
    ck_assert_ptr_nonnull(strstr(tx_smd_metadata_json(s, NULL), "test"));
    ck_assert_uint_eq(tx_smd_plan(s, TX_SMD_LAYER_ATTENTION)->precision, TX_SMD_PREC_FP16);
    ck_assert_uint_eq(tx_smd_plan(s, TX_SMD_LAYER_EXPERT)->flags, TX_SMD_PLANF_SPARSE);
    ck_assert_uint_eq(tx_smd_plan(s, TX_SMD_LAYER_EXPERT)->group_size, 64);
    for (size_t i = 0; i < NSPECS; i++) {
        const struct spec *sp = &SPECS[i];
        const struct tx_smd_tensor *t = tx_smd_find(s, sp->name);
        ck_assert_ptr_nonnull(t);
        ck_assert_ptr_eq(t, tx_smd_tensor_at(s, i)); /* file order */
        ck_assert_str_eq(tx_smd_tensor_name(s, t), sp->name);
        ck_assert_uint_eq(t->dtype, sp->dtype);
        ck_assert_uint_eq(t->format, sp->format);
        ck_assert_uint_eq(t->rows, sp->rows);
        ck_assert_uint_eq(t->cols, sp->cols);
        ck_assert_uint_eq(t->ndim, (unsigned)sp->ndim);
        ck_assert_uint_eq(t->group_size, sp->group);
        ck_assert_uint_eq(t->nnz_blocks, b[i].nnz);
        ck_assert_int_eq(t->layer, (int)i);
        ck_assert_uint_eq(t->data_offset % TX_SMD_ALIGN, 0);
        ck_assert_uint_eq(t->extent_size % TX_SMD_ALIGN, 0);
        if (t->scales_size)
            ck_assert_uint_eq(t->scales_offset % TX_SMD_SUB_ALIGN, 0);
        if (t->index_size)
            ck_assert_uint_eq(t->index_offset % TX_SMD_SUB_ALIGN, 0);
        /* bytes are exactly the device layout */
        unsigned char *ext = malloc((size_t)t->extent_size);
        ck_assert_int_eq(tx_smd_read_extent(s, t, ext, (size_t)t->extent_size, 1, err, sizeof(err)),
                         0);
        ck_assert_mem_eq(ext, b[i].data, b[i].dlen);
        if (b[i].slen)
            ck_assert_mem_eq(ext + (t->scales_offset - t->data_offset), b[i].scales, b[i].slen);
        if (b[i].ilen)
            ck_assert_mem_eq(ext + (t->index_offset - t->data_offset), b[i].index, b[i].ilen);
        float *deq = malloc((size_t)sp->rows * sp->cols * sizeof(float));
        ck_assert_int_eq(tx_smd_dequant(t, ext, deq, err, sizeof(err)), 0);
        ck_assert_mem_eq(deq, b[i].expect, (size_t)sp->rows * sp->cols * sizeof(float));
        free(deq);
        free(ext);
        free_built(&b[i]);
    }
    ck_assert_ptr_null(tx_smd_find(s, "nope"));
    ck_assert_int_eq(tx_smd_verify_all(s, err, sizeof(err)), 0);
    tx_smd_close(s);
}
END_TEST

static unsigned char *load(const char *p, size_t *len)
{
    return tm_read(p, len);
}

static void store(const char *p, const unsigned char *b, size_t len)
{
    tm_write(p, b, len);
}

static struct tx_smd_section *find_sec(unsigned char *b, uint32_t kind)
{
    struct tx_smd_header h;
    memcpy(&h, b, sizeof(h));
    for (uint32_t i = 0; i < h.section_count; i++) {
        struct tx_smd_section *sc = (struct tx_smd_section *)(b + sizeof(h) + 32 * i);
        if (sc->kind == kind)
            return sc;
    }
    return NULL;
}

/* Recomputes every checksum the structure depends on: TENSORS section,
 * header. */
static void reseal(unsigned char *b)
{
    struct tx_smd_section *sc = find_sec(b, TX_SMD_SEC_TENSORS);
    sc->crc = tx_crc32c(0, b + sc->offset, (size_t)sc->size);
    struct tx_smd_header *h = (struct tx_smd_header *)b;
    h->header_crc = 0;
    h->header_crc = tx_crc32c(0, b, h->header_size);
}

static struct tx_smd_tensor *entry(unsigned char *b, size_t i)
{
    struct tx_smd_section *sc = find_sec(b, TX_SMD_SEC_TENSORS);
    return (struct tx_smd_tensor *)(b + sc->offset) + i;
}

static int reopen(const char *p, unsigned flags)
{
    struct tx_smd *s = (void *)1;
    int rc = tx_smd_open(p, flags, &s, err, sizeof(err));
    if (rc == 0)
        tx_smd_close(s);
    else
        ck_assert_ptr_null(s);
    return rc;
}

static const char *fresh(void)
{
    const char *p = tm_path("c.smd");
    struct built b[NSPECS];
    write_pkg(p, b);
    for (size_t i = 0; i < NSPECS; i++)
        free_built(&b[i]);
    return p;
}

START_TEST(data_corruption)
{
    const char *p = fresh();
    size_t len;
    unsigned char *b = load(p, &len);
    struct tx_smd_tensor *t = entry(b, 3); /* dense.i8.row */
    b[t->data_offset + 5] ^= 0x40;
    store(p, b, len);
    /* structure intact: opens; verification finds it */
    struct tx_smd *s;
    ck_assert_int_eq(tx_smd_open(p, 0, &s, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_verify_tensor(s, tx_smd_find(s, "dense.f32"), err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_verify_tensor(s, tx_smd_find(s, "dense.i8.row"), err, sizeof(err)),
                     TX_EINVAL);
    tm_err_has(err, p);
    tm_err_has(err, "dense.i8.row");
    tm_err_has(err, "data checksum");
    ck_assert_int_eq(tx_smd_verify_all(s, err, sizeof(err)), TX_EINVAL);
    tx_smd_close(s);
    ck_assert_int_eq(reopen(p, TX_SMD_OPEN_VERIFY), TX_EINVAL);
    tm_err_has(err, "dense.i8.row");
    /* scales of another tensor */
    b[t->data_offset + 5] ^= 0x40;
    t = entry(b, 4);
    b[t->scales_offset] ^= 1;
    store(p, b, len);
    ck_assert_int_eq(reopen(p, TX_SMD_OPEN_VERIFY), TX_EINVAL);
    tm_err_has(err, "dense.i8.group");
    tm_err_has(err, "scales checksum");
    free(b);
}
END_TEST

START_TEST(truncated)
{
    const char *p = fresh();
    size_t len;
    unsigned char *b = load(p, &len);
    store(p, b, len - 4096);
    ck_assert_int_eq(reopen(p, 0), TX_EINVAL);
    tm_err_has(err, "truncated");
    store(p, b, 100);
    ck_assert_int_eq(reopen(p, 0), TX_EINVAL);
    tm_err_has(err, "truncated");
    store(p, b, 10);
    ck_assert_int_eq(reopen(p, 0), TX_EINVAL);
    tm_err_has(err, "truncated");
    store(p, b, 0);
    ck_assert_int_eq(reopen(p, 0), TX_EINVAL);
    free(b);
}
END_TEST

START_TEST(header_corruption)
{
    const char *p = fresh();
    size_t len;
    unsigned char *b = load(p, &len);
    unsigned char *c = malloc(len);
    /* any flipped byte of the header area is caught */
    struct tx_smd_header h;
    memcpy(&h, b, sizeof(h));
    for (uint32_t off = 0; off < h.header_size; off += 7) {
        memcpy(c, b, len);
        c[off] ^= 0x10;
        store(p, c, len);
        ck_assert_int_lt(reopen(p, 0), 0);
    }
    /* bad magic */
    memcpy(c, b, len);
    c[0] = 'X';
    store(p, c, len);
    ck_assert_int_eq(reopen(p, 0), TX_EINVAL);
    tm_err_has(err, "magic");
    /* another major version, correctly sealed */
    memcpy(c, b, len);
    ((struct tx_smd_header *)c)->version_major = 2;
    reseal(c);
    store(p, c, len);
    ck_assert_int_eq(reopen(p, 0), TX_ENOTSUP);
    tm_err_has(err, "version 2");
    /* a newer minor version is fine */
    memcpy(c, b, len);
    ((struct tx_smd_header *)c)->version_minor = 7;
    reseal(c);
    store(p, c, len);
    ck_assert_int_eq(reopen(p, 0), 0);
    /* config section corrupted */
    memcpy(c, b, len);
    c[find_sec(c, TX_SMD_SEC_CONFIG)->offset + 2] ^= 1;
    store(p, c, len);
    ck_assert_int_eq(reopen(p, 0), TX_EINVAL);
    tm_err_has(err, "CONFIG");
    /* a config that is not JSON, correctly checksummed */
    memcpy(c, b, len);
    struct tx_smd_section *sc = find_sec(c, TX_SMD_SEC_CONFIG);
    c[sc->offset] = '[';
    sc->crc = tx_crc32c(0, c + sc->offset, (size_t)sc->size);
    reseal(c);
    store(p, c, len);
    ck_assert_int_eq(reopen(p, 0), TX_EINVAL);
    tm_err_has(err, "CONFIG");
    /* a section pointing outside the file */
    memcpy(c, b, len);
    find_sec(c, TX_SMD_SEC_TOKENIZER)->offset = len + 4096 * 4;
    reseal(c);
    store(p, c, len);
    ck_assert_int_eq(reopen(p, 0), TX_EINVAL);
    tm_err_has(err, "TOKENIZER");
    free(c);
    free(b);
}
END_TEST

/* Patches one field of tensor i with valid checksums and expects rc and a
 * message naming the tensor. */
#define PATCH(i, stmt, want_rc, what)                                                              \
    do {                                                                                           \
        memcpy(c, b, len);                                                                         \
        struct tx_smd_tensor *t = entry(c, (i));                                                   \
        stmt;                                                                                      \
        reseal(c);                                                                                 \
        store(p, c, len);                                                                          \
        ck_assert_int_eq(reopen(p, 0), (want_rc));                                                 \
        tm_err_has(err, what);                                                                     \
    } while (0)

START_TEST(table_validation)
{
    const char *p = fresh();
    size_t len;
    unsigned char *b = load(p, &len);
    unsigned char *c = malloc(len);
    PATCH(1, t->data_offset += 8, TX_EINVAL, "dense.f16"); /* misaligned */
    PATCH(1, t->data_offset = entry(c, 0)->data_offset, TX_EINVAL, "overlap");
    PATCH(2, t->data_size -= 2, TX_EINVAL, "dense.bf16"); /* size vs shape */
    PATCH(2, t->shape[1] = 97, TX_EINVAL, "dense.bf16");  /* shape vs cols */
    PATCH(3, t->dtype = 9, TX_EINVAL, "invalid dtype");
    PATCH(3, t->format = 5, TX_EINVAL, "invalid format");
    PATCH(3, t->scales_offset = 0, TX_EINVAL, "dense.i8.row");
    PATCH(4, t->group_size = 48, TX_EINVAL, "dense.i8.group");
    PATCH(5, t->nnz_blocks += 1, TX_EINVAL, "sparse.f32");
    PATCH(5, t->cols = 100; t->shape[1] = 100, TX_EINVAL, "sparse.f32"); /* cols % 32 */
    PATCH(6, t->index_offset = t->data_offset + t->extent_size, TX_EINVAL, "sparse.f16");
    PATCH(7, t->name_offset = 1u << 30, TX_EINVAL, "string table");
    PATCH(8, t->extent_size = 1ull << 40, TX_EINVAL, "sparse.i8.row");
    PATCH(9, t->layer_type = 42, TX_EINVAL, "layer type");
    PATCH(10, t->ndim = 0, TX_EINVAL, "rank");
    PATCH(10, t->rsvd3[3] = 1, TX_EINVAL, "reserved");
    PATCH(10, t->name_offset = entry(c, 0)->name_offset;
          t->name_len = entry(c, 0)->name_len, TX_EINVAL, "twice");
    free(c);
    free(b);
}
END_TEST

START_TEST(sparse_index_validation)
{
    const char *p = fresh();
    size_t len;
    unsigned char *b = load(p, &len);
    /* row_ptr going backwards in sparse.i8.row, all checksums recomputed */
    struct tx_smd_tensor *t = entry(b, 8);
    uint32_t *rp = (uint32_t *)(b + t->index_offset);
    uint32_t tmp = rp[1];
    rp[1] = rp[2];
    rp[2] = tmp;
    t->index_crc = tx_crc32c(0, b + t->index_offset, (size_t)t->index_size);
    reseal(b);
    store(p, b, len);
    struct tx_smd *s;
    ck_assert_int_eq(tx_smd_open(p, 0, &s, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_verify_tensor(s, tx_smd_find(s, "sparse.i8.row"), err, sizeof(err)),
                     TX_EINVAL);
    tm_err_has(err, "sparse.i8.row");
    tm_err_has(err, "sparse index");
    tx_smd_close(s);
    /* row_ptr[0] != 0 */
    rp[2] = rp[1];
    rp[1] = tmp;
    rp[0] = 1;
    t->index_crc = tx_crc32c(0, b + t->index_offset, (size_t)t->index_size);
    reseal(b);
    store(p, b, len);
    ck_assert_int_eq(reopen(p, TX_SMD_OPEN_VERIFY), TX_EINVAL);
    tm_err_has(err, "row_ptr[0]");
    /* column blocks not increasing */
    uint32_t nb = 4, rows = 5, keep = 3;
    unsigned char ix[(5 + 1) * 4 + 15 * 2];
    for (uint32_t r = 0; r <= rows; r++) {
        uint32_t v = r * keep;
        memcpy(ix + r * 4, &v, 4);
    }
    uint16_t *cb = (uint16_t *)(ix + (rows + 1) * 4);
    for (uint32_t k = 0; k < rows * keep; k++)
        cb[k] = (uint16_t)(k % keep);
    ck_assert_int_eq(
        tx_smd_check_sparse_index(ix, sizeof(ix), rows, nb * 32, rows * keep, err, sizeof(err)), 0);
    cb[4] = 0;
    ck_assert_int_eq(
        tx_smd_check_sparse_index(ix, sizeof(ix), rows, nb * 32, rows * keep, err, sizeof(err)),
        TX_EINVAL);
    tm_err_has(err, "row 1");
    cb[4] = 9;
    ck_assert_int_eq(
        tx_smd_check_sparse_index(ix, sizeof(ix), rows, nb * 32, rows * keep, err, sizeof(err)),
        TX_EINVAL);
    ck_assert_int_eq(
        tx_smd_check_sparse_index(ix, sizeof(ix) - 2, rows, nb * 32, rows * keep, err, sizeof(err)),
        TX_EINVAL);
    free(b);
}
END_TEST

START_TEST(writer_errors)
{
    const char *p = tm_path("w.smd");
    struct tx_smd_writer *w;
    ck_assert_int_eq(tx_smd_writer_open(p, &w, err, sizeof(err)), 0);
    /* missing config/tokenizer/plan */
    ck_assert_int_eq(tx_smd_writer_finish(w, err, sizeof(err)), TX_EINVAL);
    ck_assert_int_eq(tm_count_files(), 0);

    ck_assert_int_eq(tx_smd_writer_open(p, &w, err, sizeof(err)), 0);
    ck_assert_int_eq(
        tx_smd_writer_section(w, TX_SMD_SEC_CONFIG, CONFIG, strlen(CONFIG), err, sizeof(err)), 0);
    ck_assert_int_eq(
        tx_smd_writer_section(w, TX_SMD_SEC_CONFIG, CONFIG, strlen(CONFIG), err, sizeof(err)),
        TX_EINVAL);
    ck_assert_int_eq(tx_smd_writer_section(w, TX_SMD_SEC_TENSORS, "x", 1, err, sizeof(err)),
                     TX_EINVAL);
    struct tx_smd_tensor_desc d = {
        .name = "x", .dtype = TX8_DTYPE_F32, .ndim = 2, .shape = {2, 3}, .layer = -1, .expert = -1};
    ck_assert_int_eq(tx_smd_writer_begin(w, &d, err, sizeof(err)), 0);
    float v[6] = {0};
    ck_assert_int_eq(tx_smd_writer_data(w, v, sizeof(v) + 4, err, sizeof(err)), TX_EINVAL);
    ck_assert_int_eq(tx_smd_writer_data(w, v, 12, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_writer_end(w, NULL, 0, NULL, 0, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "12 of 24");
    ck_assert_int_eq(tx_smd_writer_data(w, v, 12, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_writer_end(w, v, 8, NULL, 0, err, sizeof(err)), TX_EINVAL);
    ck_assert_int_eq(tx_smd_writer_end(w, NULL, 0, NULL, 0, err, sizeof(err)), 0);
    /* inconsistent descriptions */
    struct tx_smd_tensor_desc bad = d;
    bad.name = "y";
    bad.format = TX8_WFMT_BLOCK_SPARSE; /* 3 columns */
    bad.nnz_blocks = 1;
    ck_assert_int_eq(tx_smd_writer_begin(w, &bad, err, sizeof(err)), TX_EINVAL);
    bad = d;
    bad.name = "y";
    bad.group_size = 32; /* F32 with a group */
    ck_assert_int_eq(tx_smd_writer_begin(w, &bad, err, sizeof(err)), TX_EINVAL);
    /* duplicate name is caught at finish; nothing is left behind */
    ck_assert_int_eq(tx_smd_writer_section(w, TX_SMD_SEC_TOKENIZER, TM_TOKENIZER,
                                           strlen(TM_TOKENIZER), err, sizeof(err)),
                     0);
    struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT];
    tx_plan_golden(plan);
    ck_assert_int_eq(tx_smd_writer_plan(w, plan, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_writer_begin(w, &d, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_writer_data(w, v, 24, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_writer_end(w, NULL, 0, NULL, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_smd_writer_finish(w, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "twice");
    ck_assert_int_eq(tm_count_files(), 0);
    ck_assert_int_eq(tx_smd_writer_open(tm_path("nodir/x.smd"), &w, err, sizeof(err)), TX_ENOENT);
    /* an output path that is a device, FIFO or directory is never replaced
     * (as root, `glm-export -o /dev/null` once turned /dev/null into a file);
     * a FIFO stands in for the device node here */
    const char *fifo = tm_path("a-fifo");
    struct stat st;
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(tx_smd_writer_open(fifo, &w, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "not a regular file");
    ck_assert_ptr_null(w);
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    unlink(fifo);
    ck_assert_int_eq(tm_count_files(), 0);
}
END_TEST

/* A NaN scale with consistent checksums (a broken exporter, or a package
 * rewritten with new CRCs) is still refused, naming the tensor. */
START_TEST(nan_scale)
{
    const char *p = fresh();
    size_t len;
    unsigned char *b = load(p, &len);
    struct tx_smd_tensor *t = entry(b, 4); /* dense.i8.group */
    float nan = NAN;
    memcpy(b + t->scales_offset + 8, &nan, 4);
    t->scales_crc = tx_crc32c(0, b + t->scales_offset, (size_t)t->scales_size);
    reseal(b);
    store(p, b, len);
    ck_assert_int_eq(reopen(p, TX_SMD_OPEN_VERIFY), TX_EINVAL);
    tm_err_has(err, "dense.i8.group");
    tm_err_has(err, "scale 2 is nan");
    /* a negative one too */
    float neg = -0.5f;
    memcpy(b + t->scales_offset + 8, &neg, 4);
    t->scales_crc = tx_crc32c(0, b + t->scales_offset, (size_t)t->scales_size);
    reseal(b);
    store(p, b, len);
    ck_assert_int_eq(reopen(p, TX_SMD_OPEN_VERIFY), TX_EINVAL);
    tm_err_has(err, "must be finite and >= 0");
    free(b);
}
END_TEST

/* The writer's file has no name until finish (O_TMPFILE): a writer killed
 * with SIGKILL leaves nothing; temporaries "OUT.tmp.PID.N" of processes that
 * no longer exist (the fallback without O_TMPFILE, or a kill between link
 * and rename) are removed by the next writer of OUT. */
START_TEST(writer_killed)
{
    const char *p = tm_path("k.smd");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct tx_smd_writer *w;
        if (tx_smd_writer_open(p, &w, err, sizeof(err)) ||
            tx_smd_writer_section(w, TX_SMD_SEC_CONFIG, CONFIG, strlen(CONFIG), err, sizeof(err)))
            _exit(1);
        /* nothing with a name while writing */
        if (tm_count_files() != 0)
            _exit(2);
        raise(SIGKILL);
        _exit(3);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child status %d", st);
    ck_assert_int_eq(tm_count_files(), 0);

    /* stale temporaries: a dead writer's is removed, a live one's kept */
    pid_t dead = fork();
    ck_assert_int_ge(dead, 0);
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, &st, 0), dead);
    char stale[600], live[600], other[600];
    snprintf(stale, sizeof(stale), "%s.tmp.%d.0", p, (int)dead);
    snprintf(live, sizeof(live), "%s.tmp.%d.7", p, (int)getppid());
    snprintf(other, sizeof(other), "%s.tmp.x.0", p);
    tm_write(stale, "x", 1);
    tm_write(live, "x", 1);
    tm_write(other, "x", 1);
    struct built b[NSPECS];
    write_pkg(p, b);
    for (size_t i = 0; i < NSPECS; i++)
        free_built(&b[i]);
    ck_assert(!tm_exists(stale));
    ck_assert(tm_exists(live));
    ck_assert(tm_exists(other));
    ck_assert(tm_exists(p));
    ck_assert_int_eq(reopen(p, TX_SMD_OPEN_VERIFY), 0);
}
END_TEST

START_TEST(names_and_plans)
{
    ck_assert_int_eq(tx_smd_precision_parse("int8"), TX_SMD_PREC_INT8_MIXED);
    ck_assert_int_eq(tx_smd_precision_parse("INT8_MIXED"), TX_SMD_PREC_INT8_MIXED);
    ck_assert_int_eq(tx_smd_precision_parse("FP16"), TX_SMD_PREC_FP16);
    ck_assert_int_eq(tx_smd_precision_parse("bf16"), TX_SMD_PREC_BF16);
    ck_assert_int_eq(tx_smd_precision_parse("fp8"), TX_SMD_PREC_FP8);
    ck_assert_str_eq(tx_smd_precision_name(TX_SMD_PREC_FP8), "FP8");
    ck_assert_uint_eq(tx_smd_precision_dtype(TX_SMD_PREC_FP8), TX8_DTYPE_F8_E4M3);
    ck_assert_int_eq(tx_smd_precision_parse("fp4"), -1);
    ck_assert_int_eq(tx_smd_layer_parse("GLM_MLP"), TX_SMD_LAYER_MLP);
    ck_assert_int_eq(tx_smd_layer_parse("experts"), TX_SMD_LAYER_EXPERT);
    ck_assert_int_eq(tx_smd_layer_parse("norms"), TX_SMD_LAYER_NORM);
    ck_assert_int_eq(tx_smd_layer_parse("conv"), -1);
    ck_assert_str_eq(tx_smd_layer_name(TX_SMD_LAYER_OUTPUT), "output");
    ck_assert_str_eq(tx_smd_precision_name(TX_SMD_PREC_INT8_MIXED), "INT8_MIXED");
    ck_assert_uint_eq(tx_smd_precision_dtype(TX_SMD_PREC_INT8_MIXED), TX8_DTYPE_I8);
    /* the reference CRC32C check value */
    ck_assert_uint_eq(tx_crc32c(0, "123456789", 9), 0xe3069283u);
    ck_assert_uint_eq(tx_crc32c(tx_crc32c(0, "1234", 4), "56789", 5), 0xe3069283u);
    ck_assert_uint_eq(offsetof(struct tx_smd_tensor, data_offset) % 8, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("smd");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tm_setup, tm_teardown);
    tcase_add_test(tc, roundtrip);
    tcase_add_test(tc, data_corruption);
    tcase_add_test(tc, truncated);
    tcase_add_test(tc, header_corruption);
    tcase_add_test(tc, table_validation);
    tcase_add_test(tc, sparse_index_validation);
    tcase_add_test(tc, writer_errors);
    tcase_add_test(tc, names_and_plans);
    tcase_add_test(tc, nan_scale);
    tcase_add_test(tc, writer_killed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
