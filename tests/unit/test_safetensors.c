// SPDX-License-Identifier: MIT
/*
 * Safetensors: writer/reader round trip, every malformed header case (the
 * error must name the file and the tensor), sharded sets.
 */
#include "test_model_util.h"

#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include <tx/tx_error.h>
#include <tx/tx_dtype.h>
#include <tx-internal/tx_safetensors.h>
#include "tx_test_main.h"

static char err[TX_ERR_MAX];

/* Writes a safetensors file from a literal header and a data size. */
static void write_raw(const char *path, const char *hdr, size_t datalen)
{
    uint64_t n = strlen(hdr);
    size_t total = 8 + n + datalen;
    char *b = calloc(1, total);
    memcpy(b, &n, 8);
    memcpy(b + 8, hdr, n);
    for (size_t i = 0; i < datalen; i++)
        b[8 + n + i] = (char)i;
    tm_write(path, b, total);
    free(b);
}

/* Opens a raw file that must fail; returns the error code. */
static int open_bad(const char *hdr, size_t datalen)
{
    const char *p = tm_path("bad.safetensors");
    write_raw(p, hdr, datalen);
    struct tx_st_file *f = (void *)1;
    int rc = tx_st_open(p, &f, err, sizeof(err));
    ck_assert_int_lt(rc, 0);
    ck_assert_ptr_null(f);
    tm_err_has(err, p);
    return rc;
}

START_TEST(roundtrip)
{
    const char *p = tm_path("model.safetensors");
    struct tx_tensor_decl d[3] = {
        {"a.weight", TX_ELEM_F32, 2, {3, 4}},
        {"b.bias", TX_ELEM_BF16, 1, {5}},
        {"c.weight", TX_ELEM_F16, 3, {2, 1, 3}},
    };
    const char *meta[] = {"format", "pt", "note", "x", NULL};
    struct tx_st_writer *w;
    ck_assert_int_eq(tx_st_writer_open(p, d, 3, meta, &w, err, sizeof(err)), 0);
    /* the final name only appears at finish */
    ck_assert(!tm_exists(p));
    float a[12];
    for (int i = 0; i < 12; i++)
        a[i] = (float)i * 0.5f - 2.0f;
    uint16_t b[5], c[6];
    for (int i = 0; i < 5; i++)
        b[i] = tx_f32_to_bf16((float)i + 0.25f);
    for (int i = 0; i < 6; i++)
        c[i] = tx_f32_to_f16(-(float)i / 8.0f);
    /* pieces of any size */
    ck_assert_int_eq(tx_st_writer_write(w, a, 20, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_st_writer_write(w, (char *)a + 20, sizeof(a) - 20, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_st_writer_write(w, b, sizeof(b), err, sizeof(err)), 0);
    ck_assert_int_eq(tx_st_writer_write(w, c, sizeof(c), err, sizeof(err)), 0);
    ck_assert_int_eq(tx_st_writer_finish(w, err, sizeof(err)), 0);
    ck_assert(tm_exists(p));
    ck_assert_int_eq(tm_count_files(), 1);

    struct tx_st_file *f;
    ck_assert_int_eq(tx_st_open(p, &f, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_st_count(f), 3);
    ck_assert_str_eq(tx_st_metadata(f, "format"), "pt");
    ck_assert_str_eq(tx_st_metadata(f, "note"), "x");
    ck_assert_ptr_null(tx_st_metadata(f, "none"));
    const struct tx_tensor *t = tx_st_find(f, "a.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->type, TX_ELEM_F32);
    ck_assert_int_eq(t->ndim, 2);
    ck_assert_uint_eq(t->shape[0], 3);
    ck_assert_uint_eq(t->shape[1], 4);
    ck_assert_uint_eq(t->nbytes, 48);
    ck_assert_uint_eq(tx_tensor_rows(t), 3);
    ck_assert_uint_eq(tx_tensor_cols(t), 4);
    float out[12];
    ck_assert_int_eq(tx_tensor_read_f32(t, 0, 12, out, err, sizeof(err)), 0);
    ck_assert_mem_eq(out, a, sizeof(a));
    t = tx_st_find(f, "b.bias");
    ck_assert_int_eq(t->type, TX_ELEM_BF16);
    ck_assert_int_eq(tx_tensor_read_f32(t, 1, 4, out, err, sizeof(err)), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(out[i], (float)(i + 1) + 0.25f);
    t = tx_st_find(f, "c.weight");
    ck_assert_int_eq(t->type, TX_ELEM_F16);
    ck_assert_uint_eq(tx_tensor_rows(t), 2);
    ck_assert_uint_eq(tx_tensor_cols(t), 3);
    ck_assert_int_eq(tx_tensor_read_f32(t, 0, 6, out, err, sizeof(err)), 0);
    for (int i = 0; i < 6; i++)
        ck_assert_float_eq(out[i], -(float)i / 8.0f);
    /* out-of-range conversion */
    ck_assert_int_eq(tx_tensor_read_f32(t, 4, 3, out, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "c.weight");
    /* header is 8-byte aligned and the data follows it */
    uint64_t hl;
    size_t len;
    char *raw = tm_read(p, &len);
    memcpy(&hl, raw, 8);
    ck_assert_uint_eq(hl % 8, 0);
    ck_assert_uint_eq(len, 8 + hl + 48 + 10 + 12);
    free(raw);
    tx_st_close(f);
}
END_TEST

START_TEST(writer_errors)
{
    const char *p = tm_path("w.safetensors");
    struct tx_tensor_decl d[2] = {{"x", TX_ELEM_F32, 1, {4}}, {"x", TX_ELEM_F32, 1, {4}}};
    struct tx_st_writer *w;
    ck_assert_int_eq(tx_st_writer_open(p, d, 2, NULL, &w, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "declared twice");
    ck_assert_int_eq(tx_st_writer_open(p, d, 1, NULL, &w, err, sizeof(err)), 0);
    float v[8] = {0};
    ck_assert_int_eq(tx_st_writer_write(w, v, sizeof(v), err, sizeof(err)), TX_EINVAL);
    ck_assert_int_eq(tx_st_writer_write(w, v, 8, err, sizeof(err)), 0);
    /* incomplete: finish fails and leaves nothing behind */
    ck_assert_int_eq(tx_st_writer_finish(w, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "8 of 16");
    ck_assert(!tm_exists(p));
    ck_assert_int_eq(tm_count_files(), 0);
    ck_assert_int_eq(tx_st_writer_open(p, d, 1, NULL, &w, err, sizeof(err)), 0);
    tx_st_writer_abort(w);
    ck_assert_int_eq(tm_count_files(), 0);
}
END_TEST

START_TEST(truncated)
{
    const char *p = tm_path("t.safetensors");
    tm_write(p, "\x10\x00\x00", 3);
    struct tx_st_file *f;
    ck_assert_int_eq(tx_st_open(p, &f, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, p);
    tm_err_has(err, "truncated");
    /* header length larger than the file */
    char b[8 + 10];
    uint64_t n = 100;
    memcpy(b, &n, 8);
    memcpy(b + 8, "{\"a\":{}}  ", 10);
    tm_write(p, b, sizeof(b));
    ck_assert_int_eq(tx_st_open(p, &f, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "truncated");
    /* data shorter than the header says: out of bounds */
    open_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 12);
    tm_err_has(err, "w");
    tm_err_has(err, "out of bounds");
}
END_TEST

START_TEST(insane_header_length)
{
    const char *p = tm_path("h.safetensors");
    char b[16];
    uint64_t n = 1ull << 40;
    memcpy(b, &n, 8);
    memcpy(b + 8, "{}      ", 8);
    tm_write(p, b, sizeof(b));
    struct tx_st_file *f;
    ck_assert_int_eq(tx_st_open(p, &f, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "not sane");
    ck_assert_int_eq(tx_st_open(tm_path("missing.safetensors"), &f, err, sizeof(err)), TX_ENOENT);
    tm_err_has(err, "missing.safetensors");
}
END_TEST

START_TEST(bad_json)
{
    open_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],", 0);
    tm_err_has(err, "not valid JSON");
    open_bad("[1, 2, 3]", 0);
    tm_err_has(err, "'{'");
    open_bad("{\"w\": 5}", 0);
    tm_err_has(err, "tensor w");
    open_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} xx", 4);
    tm_err_has(err, "garbage");
    open_bad("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    tm_err_has(err, "\"dtype\"");
    open_bad("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4);
    tm_err_has(err, "\"shape\"");
    open_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4);
    tm_err_has(err, "data_offsets");
    open_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4);
    tm_err_has(err, "shape[0]");
    open_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8);
    tm_err_has(err, "end before begin");
    open_bad("{\"__metadata__\":{\"a\":1}}", 0);
    tm_err_has(err, "__metadata__");
}
END_TEST

START_TEST(overlap)
{
    open_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
             24);
    tm_err_has(err, "overlap");
    tm_err_has(err, "a ");
    tm_err_has(err, "b ");
}
END_TEST

START_TEST(wrong_size)
{
    open_bad("{\"w\":{\"dtype\":\"BF16\",\"shape\":[3,4],\"data_offsets\":[0,20]}}", 20);
    tm_err_has(err, "tensor w");
    tm_err_has(err, "[3, 4]");
    tm_err_has(err, "needs 24");
}
END_TEST

START_TEST(unsupported_dtype)
{
    open_bad("{\"w\":{\"dtype\":\"Q4_K\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4);
    tm_err_has(err, "tensor w");
    tm_err_has(err, "Q4_K");
    /* a known but unsupported type is readable, not convertible */
    const char *p = tm_path("f64.safetensors");
    write_raw(p, "{\"d\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16);
    struct tx_st_file *f;
    ck_assert_int_eq(tx_st_open(p, &f, err, sizeof(err)), 0);
    const struct tx_tensor *t = tx_st_find(f, "d");
    ck_assert_int_eq(t->type, TX_ELEM_F64);
    float out[2];
    ck_assert_int_eq(tx_tensor_read_f32(t, 0, 2, out, err, sizeof(err)), TX_ENOTSUP);
    tm_err_has(err, p);
    tm_err_has(err, "tensor d");
    tm_err_has(err, "F64");
    tx_st_close(f);
}
END_TEST

/* Two shards plus an index, as transformers writes them. */
static void write_shards(int bad)
{
    struct tx_tensor_decl d1[2] = {{"x.weight", TX_ELEM_F32, 2, {2, 2}},
                                   {"y.weight", TX_ELEM_BF16, 1, {4}}};
    struct tx_tensor_decl d2[1] = {{"z.weight", TX_ELEM_F16, 1, {2}}};
    char zero[32] = {0};
    struct tx_st_writer *w;
    ck_assert_int_eq(tx_st_writer_open(tm_path("model-00001-of-00002.safetensors"), d1, 2, NULL, &w,
                                       err, sizeof(err)),
                     0);
    ck_assert_int_eq(tx_st_writer_write(w, zero, 24, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_st_writer_finish(w, err, sizeof(err)), 0);
    if (bad != 2) {
        ck_assert_int_eq(tx_st_writer_open(tm_path("model-00002-of-00002.safetensors"), d2, 1, NULL,
                                           &w, err, sizeof(err)),
                         0);
        ck_assert_int_eq(tx_st_writer_write(w, zero, 4, err, sizeof(err)), 0);
        ck_assert_int_eq(tx_st_writer_finish(w, err, sizeof(err)), 0);
    }
    const char *names[] = {"x.weight", "y.weight", "z.weight"};
    const char *files[] = {"model-00001-of-00002.safetensors", "model-00001-of-00002.safetensors",
                           bad == 1 ? "model-00001-of-00002.safetensors"
                                    : "model-00002-of-00002.safetensors"};
    ck_assert_int_eq(tx_st_write_index(tm_path("model.safetensors.index.json"), names, files, 3, 48,
                                       err, sizeof(err)),
                     0);
}

START_TEST(sharded)
{
    write_shards(0);
    struct tx_st_set *s;
    ck_assert_int_eq(tx_st_set_open(tm_dir, &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_st_set_count(s), 3);
    ck_assert_uint_eq(tx_st_set_nfiles(s), 2);
    const struct tx_tensor *t = tx_st_set_find(s, "z.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(strstr(t->file, "model-00002-of-00002.safetensors"));
    ck_assert_ptr_nonnull(tx_st_set_find(s, "x.weight"));
    ck_assert_ptr_null(tx_st_set_find(s, "w.weight"));
    tx_st_set_close(s);
}
END_TEST

START_TEST(sharded_wrong_file)
{
    write_shards(1);
    struct tx_st_set *s;
    ck_assert_int_eq(tx_st_set_open(tm_dir, &s, err, sizeof(err)), TX_ENOENT);
    tm_err_has(err, "model.safetensors.index.json");
    tm_err_has(err, "z.weight");
}
END_TEST

START_TEST(sharded_missing_file)
{
    write_shards(2);
    struct tx_st_set *s;
    ck_assert_int_eq(tx_st_set_open(tm_dir, &s, err, sizeof(err)), TX_ENOENT);
    tm_err_has(err, "model-00002-of-00002.safetensors");
    tm_err_has(err, "missing");
}
END_TEST

START_TEST(sharded_bad_index)
{
    tm_write(tm_path("model.safetensors.index.json"), "{\"weight_map\": 3}", 17);
    struct tx_st_set *s;
    ck_assert_int_eq(tx_st_set_open(tm_dir, &s, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "weight_map");
    tm_write(tm_path("model.safetensors.index.json"),
             "{\"weight_map\": {\"a\": \"../etc/passwd\"}}", 38);
    ck_assert_int_eq(tx_st_set_open(tm_dir, &s, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "tensor a");
}
END_TEST

START_TEST(duplicate_across_files)
{
    struct tx_tensor_decl d[1] = {{"x", TX_ELEM_F32, 1, {1}}};
    float v = 1;
    struct tx_st_writer *w;
    const char *names[2] = {"a.safetensors", "b.safetensors"};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(tx_st_writer_open(tm_path(names[i]), d, 1, NULL, &w, err, sizeof(err)), 0);
        ck_assert_int_eq(tx_st_writer_write(w, &v, 4, err, sizeof(err)), 0);
        ck_assert_int_eq(tx_st_writer_finish(w, err, sizeof(err)), 0);
    }
    struct tx_st_set *s;
    ck_assert_int_eq(tx_st_set_open(tm_dir, &s, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "tensor x");
    tm_err_has(err, "a.safetensors");
    tm_err_has(err, "b.safetensors");
    /* an empty directory */
    remove(tm_path("a.safetensors"));
    remove(tm_path("b.safetensors"));
    ck_assert_int_eq(tx_st_set_open(tm_dir, &s, err, sizeof(err)), TX_ENOENT);
}
END_TEST

/* A directory without an index: at most TX_ST_MAX_SHARDS *.safetensors files
 * of at most TX_ST_MAX_SHARD_NAME bytes, checked before any file is opened
 * (the files here are empty: opening one would fail differently). The
 * index's file names have the same length limit. */
START_TEST(shard_listing_caps)
{
    char name[TX_ST_MAX_SHARD_NAME + 2];
    memset(name, 'a', sizeof(name));
    strcpy(name + TX_ST_MAX_SHARD_NAME + 1 - 12, ".safetensors");
    ck_assert_uint_eq(strlen(name), TX_ST_MAX_SHARD_NAME + 1);
    tm_write(tm_path(name), "", 0);
    struct tx_st_set *s = (void *)1;
    ck_assert_int_eq(tx_st_set_open(tm_dir, &s, err, sizeof(err)), TX_EINVAL);
    ck_assert_ptr_null(s);
    tm_err_has(err, "shard file name");
    tm_err_has(err, "201 bytes");
    tm_err_has(err, "limit 200");
    remove(tm_path(name));

    char fn[64];
    for (int i = 0; i <= TX_ST_MAX_SHARDS; i++) {
        snprintf(fn, sizeof(fn), "s%05d.safetensors", i);
        int fd = open(tm_path(fn), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
    }
    ck_assert_int_eq(tx_st_set_open(tm_dir, &s, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "more than 4096 *.safetensors shard files");
    tm_err_has(err, tm_dir);

    /* the index: a 201-byte file name */
    char idx[512];
    name[TX_ST_MAX_SHARD_NAME + 1] = 0;
    int l = snprintf(idx, sizeof(idx), "{\"weight_map\": {\"t\": \"%s\"}}", name);
    tm_write(tm_path("model.safetensors.index.json"), idx, (size_t)l);
    ck_assert_int_eq(tx_st_set_open(tm_dir, &s, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "tensor t");
    tm_err_has(err, "at most 200 bytes");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tm_setup, tm_teardown);
    tcase_set_timeout(tc, 60); /* shard_listing_caps makes 4097 files */
    tcase_add_test(tc, roundtrip);
    tcase_add_test(tc, writer_errors);
    tcase_add_test(tc, truncated);
    tcase_add_test(tc, insane_header_length);
    tcase_add_test(tc, bad_json);
    tcase_add_test(tc, overlap);
    tcase_add_test(tc, wrong_size);
    tcase_add_test(tc, unsupported_dtype);
    tcase_add_test(tc, sharded);
    tcase_add_test(tc, sharded_wrong_file);
    tcase_add_test(tc, sharded_missing_file);
    tcase_add_test(tc, sharded_bad_index);
    tcase_add_test(tc, duplicate_across_files);
    tcase_add_test(tc, shard_listing_caps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
