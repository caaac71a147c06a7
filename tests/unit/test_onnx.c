// SPDX-License-Identifier: MIT
/*
 * ONNX: writer/reader round trip with inline and external data, the typed
 * data fields (float_data, int32_data for FLOAT16/BFLOAT16), malformed
 * models, and GLM checkpoints given as ONNX (config from metadata_props or
 * config.json next to the model).
 */
#include "test_model_util.h"

#include <stdint.h>

#include <onnx.pb-c.h>

#include <tx/tx_error.h>
#include <tx-internal/tx_checkpoint.h>
#include <tx/tx_dtype.h>
#include <tx-internal/tx_onnx.h>
#include <tx-internal/tx_synth.h>
#include "tx_test_main.h"

static char err[TX_ERR_MAX];

static void write_model(const char *path, const char *ext)
{
    const char *meta[] = {"config", "{\"x\": 1}", "producer", "test", NULL};
    struct tx_onnx_writer *w;
    ck_assert_int_eq(tx_onnx_writer_open(path, ext, meta, &w, err, sizeof(err)), 0);
    float a[6] = {1, -2, 3.5f, 4, 0, -0.25f};
    uint16_t h[4], bf[3];
    for (int i = 0; i < 4; i++)
        h[i] = tx_f32_to_f16((float)i / 4.0f);
    for (int i = 0; i < 3; i++)
        bf[i] = tx_f32_to_bf16((float)i * 3.0f);
    struct tx_tensor_decl da = {"model.a.weight", TX_ELEM_F32, 2, {2, 3}};
    struct tx_tensor_decl dh = {"model.h.weight", TX_ELEM_F16, 2, {2, 2}};
    struct tx_tensor_decl db = {"model.b.bias", TX_ELEM_BF16, 1, {3}};
    ck_assert_int_eq(tx_onnx_writer_add(w, &da, a, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_onnx_writer_add(w, &dh, h, err, sizeof(err)), 0);
    if (ext) {
        /* streamed in pieces */
        ck_assert_int_eq(tx_onnx_writer_begin(w, &db, err, sizeof(err)), 0);
        ck_assert_int_eq(tx_onnx_writer_append(w, bf, 2, err, sizeof(err)), 0);
        ck_assert_int_eq(tx_onnx_writer_append(w, (char *)bf + 2, 4, err, sizeof(err)), 0);
    } else {
        ck_assert_int_eq(tx_onnx_writer_begin(w, &db, err, sizeof(err)), TX_EINVAL);
        ck_assert_int_eq(tx_onnx_writer_add(w, &db, bf, err, sizeof(err)), 0);
    }
    struct tx_onnx_value in = {"input_ids", TX_ELEM_I64, 2, {-1, 7}, {"batch", NULL}};
    ck_assert_int_eq(tx_onnx_writer_io(w, 0, &in, err, sizeof(err)), 0);
    const char *gi[] = {"model.a.weight", "input_ids"}, *go[] = {"y"};
    const int64_t perm[] = {1, 0};
    ck_assert_int_eq(
        tx_onnx_writer_node(w, "Gather", NULL, gi, 2, go, 1, "perm", perm, 2, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_onnx_writer_finish(w, err, sizeof(err)), 0);
}

static void check_model(const char *path, int external)
{
    struct tx_onnx *m;
    ck_assert_int_eq(tx_onnx_open(path, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_onnx_count(m), 3);
    ck_assert_str_eq(tx_onnx_metadata(m, "config"), "{\"x\": 1}");
    ck_assert_str_eq(tx_onnx_producer(m), "libtx");
    ck_assert_int_eq(tx_onnx_ir_version(m), 8);
    ck_assert_uint_eq(tx_onnx_node_count(m), 1);
    const struct tx_tensor *t = tx_onnx_find(m, "model.a.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->type, TX_ELEM_F32);
    ck_assert_uint_eq(t->shape[0], 2);
    ck_assert_uint_eq(t->shape[1], 3);
    float out[6];
    ck_assert_int_eq(tx_tensor_read_f32(t, 0, 6, out, err, sizeof(err)), 0);
    ck_assert_float_eq(out[2], 3.5f);
    ck_assert_float_eq(out[5], -0.25f);
    if (external) {
        ck_assert_str_eq(t->file, "model.onnx.data");
        ck_assert_uint_eq(t->file_offset % 4096, 0);
    }
    t = tx_onnx_find(m, "model.h.weight");
    ck_assert_int_eq(t->type, TX_ELEM_F16);
    ck_assert_int_eq(tx_tensor_read_f32(t, 0, 4, out, err, sizeof(err)), 0);
    ck_assert_float_eq(out[3], 0.75f);
    t = tx_onnx_find(m, "model.b.bias");
    ck_assert_int_eq(t->type, TX_ELEM_BF16);
    ck_assert_int_eq(tx_tensor_read_f32(t, 0, 3, out, err, sizeof(err)), 0);
    ck_assert_float_eq(out[2], 6.0f);
    if (external)
        ck_assert_uint_eq(t->file_offset % 4096, 0);
    tx_onnx_close(m);
}

START_TEST(roundtrip_inline)
{
    write_model(tm_path("model.onnx"), NULL);
    ck_assert_int_eq(tm_count_files(), 1);
    check_model(tm_path("model.onnx"), 0);
}
END_TEST

START_TEST(roundtrip_external)
{
    write_model(tm_path("model.onnx"), "model.onnx.data");
    ck_assert(tm_exists(tm_path("model.onnx.data")));
    ck_assert_int_eq(tm_count_files(), 2);
    check_model(tm_path("model.onnx"), 1);
}
END_TEST

/* Packs a hand-built model. */
static void pack(const char *path, Onnx__ModelProto *mp)
{
    size_t n = onnx__model_proto__get_packed_size(mp);
    uint8_t *b = malloc(n + 1);
    onnx__model_proto__pack(mp, b);
    tm_write(path, b, n);
    free(b);
}

/* One initializer in an otherwise minimal model. */
static void one_tensor(const char *path, Onnx__TensorProto *tp)
{
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__TensorProto *inits[1] = {tp};
    g.n_initializer = 1;
    g.initializer = inits;
    mp.graph = &g;
    mp.has_ir_version = 1;
    mp.ir_version = 7;
    pack(path, &mp);
}

START_TEST(typed_fields)
{
    const char *p = tm_path("typed.onnx");
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__TensorProto t1 = ONNX__TENSOR_PROTO__INIT, t2 = ONNX__TENSOR_PROTO__INIT,
                      t3 = ONNX__TENSOR_PROTO__INIT, t4 = ONNX__TENSOR_PROTO__INIT;
    int64_t d1[2] = {2, 2}, d2[1] = {3};
    float fd[4] = {0.5f, 1.5f, -2, 8};
    int32_t hd[3] = {tx_f32_to_f16(1.0f), tx_f32_to_f16(-0.5f), tx_f32_to_f16(2.0f)};
    int32_t bd[3] = {tx_f32_to_bf16(3.0f), tx_f32_to_bf16(-4.0f), tx_f32_to_bf16(0.125f)};
    t1.name = "f";
    t1.n_dims = 2;
    t1.dims = d1;
    t1.has_data_type = 1;
    t1.data_type = TX_ONNX_FLOAT;
    t1.n_float_data = 4;
    t1.float_data = fd;
    t2.name = "h";
    t2.n_dims = 1;
    t2.dims = d2;
    t2.has_data_type = 1;
    t2.data_type = TX_ONNX_FLOAT16;
    t2.n_int32_data = 3;
    t2.int32_data = hd;
    t3 = t2;
    t3.name = "b";
    t3.data_type = TX_ONNX_BFLOAT16;
    t3.int32_data = bd;
    /* a string initializer is skipped, not an error */
    ProtobufCBinaryData sd = {1, (uint8_t *)"s"};
    t4.name = "str";
    t4.has_data_type = 1;
    t4.data_type = TX_ONNX_STRING;
    t4.n_string_data = 1;
    t4.string_data = &sd;
    Onnx__TensorProto *inits[4] = {&t1, &t2, &t3, &t4};
    g.n_initializer = 4;
    g.initializer = inits;
    mp.graph = &g;
    pack(p, &mp);
    struct tx_onnx *m;
    ck_assert_int_eq(tx_onnx_open(p, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_onnx_count(m), 3);
    ck_assert_uint_eq(tx_onnx_skipped(m), 1);
    float out[4];
    ck_assert_int_eq(tx_tensor_read_f32(tx_onnx_find(m, "f"), 0, 4, out, err, sizeof(err)), 0);
    ck_assert_float_eq(out[3], 8.0f);
    ck_assert_int_eq(tx_tensor_read_f32(tx_onnx_find(m, "h"), 0, 3, out, err, sizeof(err)), 0);
    ck_assert_float_eq(out[1], -0.5f);
    ck_assert_int_eq(tx_tensor_read_f32(tx_onnx_find(m, "b"), 0, 3, out, err, sizeof(err)), 0);
    ck_assert_float_eq(out[2], 0.125f);
    tx_onnx_close(m);
}
END_TEST

static int open_bad(const char *p)
{
    struct tx_onnx *m = (void *)1;
    int rc = tx_onnx_open(p, &m, err, sizeof(err));
    ck_assert_int_lt(rc, 0);
    ck_assert_ptr_null(m);
    tm_err_has(err, p);
    return rc;
}

START_TEST(malformed)
{
    const char *p = tm_path("bad.onnx");
    tm_write(p, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
    open_bad(p);
    tm_err_has(err, "not a valid ONNX model");
    tm_write(p, "", 0);
    open_bad(p);
    /* no graph */
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    mp.has_ir_version = 1;
    mp.ir_version = 8;
    pack(p, &mp);
    open_bad(p);
    tm_err_has(err, "no graph");

    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[2] = {2, 3};
    uint8_t raw[24] = {0};
    tp.name = "w";
    tp.n_dims = 2;
    tp.dims = dims;
    tp.has_data_type = 1;
    tp.data_type = TX_ONNX_FLOAT;
    tp.has_raw_data = 1;
    tp.raw_data.len = 20; /* 24 needed */
    tp.raw_data.data = raw;
    one_tensor(p, &tp);
    open_bad(p);
    tm_err_has(err, "tensor w");
    tm_err_has(err, "raw_data");
    tp.raw_data.len = 24;
    dims[1] = -3;
    one_tensor(p, &tp);
    open_bad(p);
    tm_err_has(err, "negative");
    dims[1] = 3;
    tp.has_raw_data = 0;
    one_tensor(p, &tp);
    open_bad(p);
    tm_err_has(err, "no data");
    tp.has_raw_data = 1;
    tp.data_type = 12345;
    one_tensor(p, &tp);
    open_bad(p);
    tm_err_has(err, "data_type");
    tp.data_type = TX_ONNX_FLOAT;
    tp.name = "";
    one_tensor(p, &tp);
    open_bad(p);
    tm_err_has(err, "no name");
}
END_TEST

static void external(const char *p, const char *loc, const char *off, const char *len)
{
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[1] = {4};
    tp.name = "e";
    tp.n_dims = 1;
    tp.dims = dims;
    tp.has_data_type = 1;
    tp.data_type = TX_ONNX_FLOAT;
    tp.has_data_location = 1;
    tp.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    Onnx__StringStringEntryProto e[3] = {ONNX__STRING_STRING_ENTRY_PROTO__INIT,
                                         ONNX__STRING_STRING_ENTRY_PROTO__INIT,
                                         ONNX__STRING_STRING_ENTRY_PROTO__INIT};
    Onnx__StringStringEntryProto *ep[3] = {&e[0], &e[1], &e[2]};
    size_t n = 0;
    if (loc) {
        e[n].key = "location";
        e[n++].value = (char *)loc;
    }
    if (off) {
        e[n].key = "offset";
        e[n++].value = (char *)off;
    }
    if (len) {
        e[n].key = "length";
        e[n++].value = (char *)len;
    }
    tp.n_external_data = n;
    tp.external_data = ep;
    one_tensor(p, &tp);
}

START_TEST(external_malformed)
{
    const char *p = tm_path("ext.onnx");
    char data[4096 + 16] = {0};
    tm_write(tm_path("w.bin"), data, sizeof(data));
    external(p, "w.bin", "4096", "16");
    struct tx_onnx *m;
    ck_assert_int_eq(tx_onnx_open(p, &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_onnx_find(m, "e")->file_offset, 4096);
    tx_onnx_close(m);
    external(p, "w.bin", "4096", NULL); /* length from the shape */
    ck_assert_int_eq(tx_onnx_open(p, &m, err, sizeof(err)), 0);
    tx_onnx_close(m);
    external(p, "w.bin", "4100", "16");
    open_bad(p);
    tm_err_has(err, "tensor e");
    tm_err_has(err, "outside");
    external(p, "w.bin", "0", "12");
    open_bad(p);
    tm_err_has(err, "length 12");
    external(p, "../w.bin", "0", "16");
    open_bad(p);
    tm_err_has(err, "relative path");
    external(p, "/etc/passwd", "0", "16");
    open_bad(p);
    tm_err_has(err, "relative path");
    external(p, "sub/../../w.bin", "0", "16");
    open_bad(p);
    external(p, "missing.bin", "0", "16");
    open_bad(p);
    tm_err_has(err, "missing.bin");
    external(p, NULL, "0", "16");
    open_bad(p);
    tm_err_has(err, "location");
    external(p, "w.bin", "-5", "16");
    open_bad(p);
    tm_err_has(err, "offset");
    external(p, "w.bin", "99999999999999999999999", "16");
    open_bad(p);
}
END_TEST

static size_t put_varint(uint8_t *b, uint64_t v)
{
    size_t n = 0;
    do {
        b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

/* Prepends a length-delimited field header for the *pos..cap bytes of buf
 * (the message grows backwards from the end of the buffer). */
static void wrap(uint8_t *buf, size_t cap, size_t *pos, unsigned num)
{
    uint8_t hdr[20];
    size_t h = put_varint(hdr, (uint64_t)num << 3 | 2);
    h += put_varint(hdr + h, cap - *pos);
    *pos -= h;
    memcpy(buf + *pos, hdr, h);
}

START_TEST(deep_nesting)
{
    /* graph -> node -> attribute.g -> graph -> ... 100000 levels deep: must
     * neither overflow the stack nor fail (subgraphs are skipped) */
    size_t cap = 8u << 20, pos = cap;
    uint8_t *b = malloc(cap);
    for (int i = 0; i < 100000 && pos > 64; i++) {
        wrap(b, cap, &pos, 6); /* AttributeProto.g */
        wrap(b, cap, &pos, 5); /* NodeProto.attribute */
        wrap(b, cap, &pos, 1); /* GraphProto.node */
    }
    wrap(b, cap, &pos, 7); /* ModelProto.graph */
    tm_write(tm_path("deep.onnx"), b + pos, cap - pos);
    free(b);
    struct tx_onnx *m;
    ck_assert_int_eq(tx_onnx_open(tm_path("deep.onnx"), &m, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_onnx_count(m), 0);
    ck_assert_uint_eq(tx_onnx_node_count(m), 1);
    tx_onnx_close(m);
}
END_TEST

START_TEST(checkpoint_from_onnx)
{
    /* inline, config in metadata_props */
    struct tx_synth_opts o = {.arch = GLM_ARCH_GLM_MOE_DSA,
                              .preset = TX_SYNTH_TINY,
                              .seed = 3,
                              .format = TX_SYNTH_ONNX,
                              .vocab_size = 512,
                              .onnx_external = 0,
                              .threads = 2};
    const char *d1 = tm_path("inline");
    ck_assert_int_eq(tx_synth_write(d1, &o, err, sizeof(err)), 0);
    char mp[600];
    snprintf(mp, sizeof(mp), "%s/model.onnx", d1);
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(mp, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_ckpt_format(c), TX_CKPT_ONNX);
    ck_assert_int_eq(tx_ckpt_config(c)->arch, GLM_ARCH_GLM_MOE_DSA);
    ck_assert_int_eq((int64_t)tx_ckpt_count(c), glm_config_tensor_count(tx_ckpt_config(c)));
    ck_assert_uint_eq(tx_ckpt_n_ignored(c), 4); /* the MTP layer's tensors */
    ck_assert_ptr_null(tx_ckpt_tokenizer_path(c));
    /* the values are the synthetic ones */
    const struct tx_ckpt_tensor *ct = tx_ckpt_find(c, "model.layers.1.self_attn.q_b_proj.weight");
    float v[4];
    ck_assert_int_eq(tx_tensor_read_f32(ct->t, 5, 4, v, err, sizeof(err)), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(
            v[i], tx_bf16_to_f32(tx_f32_to_bf16(tx_synth_value(&ct->info, 3, 0, 5 + (uint64_t)i))));
    tx_ckpt_close(c);

    /* external data, config.json next to the model instead of metadata */
    o.onnx_external = 1;
    o.arch = GLM_ARCH_GLM4_MOE;
    const char *d2 = tm_path("ext");
    ck_assert_int_eq(tx_synth_write(d2, &o, err, sizeof(err)), 0);
    snprintf(mp, sizeof(mp), "%s/model.onnx.data", d2);
    ck_assert(tm_exists(mp));
    snprintf(mp, sizeof(mp), "%s/model.onnx", d2);
    ck_assert_int_eq(tx_ckpt_open(mp, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_ckpt_config(c)->arch, GLM_ARCH_GLM4_MOE);
    tx_ckpt_close(c);
    /* strip the metadata: the config then comes from config.json, and is
     * required */
    struct tx_onnx *m;
    ck_assert_int_eq(tx_onnx_open(mp, &m, err, sizeof(err)), 0);
    char *cfg = strdup(tx_onnx_metadata(m, "config"));
    tx_onnx_close(m);
    size_t len;
    uint8_t *b = tm_read(mp, &len);
    Onnx__ModelProto *pm = onnx__model_proto__unpack(NULL, len, b);
    ck_assert_ptr_nonnull(pm);
    size_t nmeta = pm->n_metadata_props;
    pm->n_metadata_props = 0;
    pack(mp, pm);
    pm->n_metadata_props = nmeta;
    onnx__model_proto__free_unpacked(pm, NULL);
    free(b);
    ck_assert_int_eq(tx_ckpt_open(mp, &c, err, sizeof(err)), TX_ENOENT);
    tm_err_has(err, "config.json");
    tm_err_has(err, "metadata_props");
    char cp[600];
    snprintf(cp, sizeof(cp), "%s/config.json", d2);
    tm_write(cp, cfg, strlen(cfg));
    ck_assert_int_eq(tx_ckpt_open(mp, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_ckpt_config(c)->arch, GLM_ARCH_GLM4_MOE);
    tx_ckpt_close(c);
    free(cfg);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("onnx");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tm_setup, tm_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, roundtrip_inline);
    tcase_add_test(tc, roundtrip_external);
    tcase_add_test(tc, typed_fields);
    tcase_add_test(tc, malformed);
    tcase_add_test(tc, external_malformed);
    tcase_add_test(tc, deep_nesting);
    tcase_add_test(tc, checkpoint_from_onnx);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
