/* SPDX-License-Identifier: MIT */
/* ONNX initializers: reader and writer (protobuf-c, onnx/onnx.proto subset). */
#include <tx-internal/tx_model_internal.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <onnx.pb-c.h>

#include <tx-internal/tx_onnx.h>

/* Largest message protobuf implementations accept. */
#define ONNX_PROTO_MAX ((uint64_t)INT32_MAX)

int tx_onnx_type_of(enum tx_elem_type t)
{
    switch (t) {
    case TX_ELEM_F32:
        return TX_ONNX_FLOAT;
    case TX_ELEM_F16:
        return TX_ONNX_FLOAT16;
    case TX_ELEM_BF16:
        return TX_ONNX_BFLOAT16;
    case TX_ELEM_F64:
        return TX_ONNX_DOUBLE;
    case TX_ELEM_I64:
        return TX_ONNX_INT64;
    case TX_ELEM_I32:
        return TX_ONNX_INT32;
    case TX_ELEM_I16:
        return TX_ONNX_INT16;
    case TX_ELEM_I8:
        return TX_ONNX_INT8;
    case TX_ELEM_U64:
        return TX_ONNX_UINT64;
    case TX_ELEM_U32:
        return TX_ONNX_UINT32;
    case TX_ELEM_U16:
        return TX_ONNX_UINT16;
    case TX_ELEM_U8:
        return TX_ONNX_UINT8;
    case TX_ELEM_BOOL:
        return TX_ONNX_BOOL;
    case TX_ELEM_F8_E4M3:
        return TX_ONNX_FLOAT8E4M3FN;
    case TX_ELEM_F8_E5M2:
        return TX_ONNX_FLOAT8E5M2;
    default:
        return 0;
    }
}

static int elem_of_onnx(int dt)
{
    for (int t = 0; t < TX_ELEM_COUNT; t++)
        if (tx_onnx_type_of((enum tx_elem_type)t) == dt)
            return t;
    return TX_NONE;
}

/* ---- reader ------------------------------------------------------------- */

struct ext_file {
    char *location;
    struct txm_map map;
};

struct tx_onnx {
    char *path, *dir;
    struct txm_map map;
    Onnx__ModelProto *model;
    size_t n;
    struct tx_tensor *t;
    const struct tx_tensor **sorted;
    void **owned; /* converted data buffers, one per tensor (or NULL) */
    size_t next;
    struct ext_file *ext;
    size_t skipped;
};

const char *tx_onnx_path(const struct tx_onnx *m)
{
    return m->path;
}
size_t tx_onnx_count(const struct tx_onnx *m)
{
    return m->n;
}
const struct tx_tensor *tx_onnx_tensor(const struct tx_onnx *m, size_t i)
{
    return i < m->n ? &m->t[i] : NULL;
}
size_t tx_onnx_skipped(const struct tx_onnx *m)
{
    return m->skipped;
}
int64_t tx_onnx_ir_version(const struct tx_onnx *m)
{
    return m->model->has_ir_version ? m->model->ir_version : 0;
}
const char *tx_onnx_producer(const struct tx_onnx *m)
{
    return m->model->producer_name ? m->model->producer_name : "";
}
size_t tx_onnx_node_count(const struct tx_onnx *m)
{
    return m->model->graph ? m->model->graph->n_node : 0;
}

const char *tx_onnx_metadata(const struct tx_onnx *m, const char *key)
{
    for (size_t i = 0; i < m->model->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *e = m->model->metadata_props[i];
        if (e->key && e->value && strcmp(e->key, key) == 0)
            return e->value;
    }
    return NULL;
}

static int cmp_tname(const void *a, const void *b)
{
    return strcmp((*(const struct tx_tensor *const *)a)->name,
                  (*(const struct tx_tensor *const *)b)->name);
}

const struct tx_tensor *tx_onnx_find(const struct tx_onnx *m, const char *name)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->sorted[mid]->name, name);
        if (c == 0)
            return m->sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void tx_onnx_close(struct tx_onnx *m)
{
    if (!m)
        return;
    if (m->owned)
        for (size_t i = 0; i < m->n; i++)
            free(m->owned[i]);
    free(m->owned);
    free(m->t);
    free(m->sorted);
    if (m->ext)
        for (size_t i = 0; m->ext[i].location; i++) {
            free(m->ext[i].location);
            txm_unmap(&m->ext[i].map);
        }
    free(m->ext);
    if (m->model)
        onnx__model_proto__free_unpacked(m->model, NULL);
    txm_unmap(&m->map);
    free(m->path);
    free(m->dir);
    free(m);
}

/* Decimal string of an external_data entry. */
static int parse_dec(const char *s, uint64_t *v)
{
    if (!s || !*s)
        return 0;
    uint64_t x = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        if (!txm_mul(x, 10, &x) || !txm_add(x, (uint64_t)(*s - '0'), &x))
            return 0;
    }
    *v = x;
    return 1;
}

static int safe_location(const char *loc)
{
    if (!loc || !loc[0] || loc[0] == '/')
        return 0;
    /* refuse any ".." path component */
    const char *p = loc;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == 2 && p[0] == '.' && p[1] == '.')
            return 0;
        if (!e)
            break;
        p = e + 1;
    }
    return 1;
}

static int external_data(struct tx_onnx *m, const Onnx__TensorProto *tp, struct tx_tensor *t,
                         size_t nn, char *err, size_t errsz)
{
    const char *loc = NULL;
    uint64_t off = 0, len = 0;
    int has_len = 0;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key)
            continue;
        if (strcmp(e->key, "location") == 0)
            loc = e->value;
        else if (strcmp(e->key, "offset") == 0) {
            if (!parse_dec(e->value, &off))
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "%s: tensor %s: external_data offset \"%s\" is not a number",
                                 m->path, t->name, e->value ? e->value : "");
        } else if (strcmp(e->key, "length") == 0) {
            if (!parse_dec(e->value, &len))
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "%s: tensor %s: external_data length \"%s\" is not a number",
                                 m->path, t->name, e->value ? e->value : "");
            has_len = 1;
        }
    }
    if (!loc)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: external data without a location",
                         m->path, t->name);
    if (!safe_location(loc))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: external data location \"%s\" must be a relative path "
                         "without \"..\"",
                         m->path, t->name, loc);
    size_t k;
    for (k = 0; k < nn && m->ext[k].location; k++)
        if (strcmp(m->ext[k].location, loc) == 0)
            break;
    if (k == nn || !m->ext[k].location) {
        char *p = txm_path_join(m->dir, loc);
        if (!p)
            return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        int rc = txm_map_file(p, &m->ext[k].map, err, errsz);
        if (rc < 0) {
            char sub[TX_ERR_MAX];
            snprintf(sub, sizeof(sub), "%s", err ? err : "");
            tx_errbuf(err, errsz, rc, "%s: tensor %s: external data: %s", m->path, t->name, sub);
            free(p);
            return rc;
        }
        free(p);
        m->ext[k].location = strdup(loc);
        if (!m->ext[k].location)
            return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    }
    struct ext_file *ef = &m->ext[k];
    if (!has_len)
        len = t->nbytes;
    uint64_t end;
    if (len != t->nbytes)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: external data length %" PRIu64
                         " but the shape needs %" PRIu64 " bytes",
                         m->path, t->name, len, t->nbytes);
    if (!txm_add(off, len, &end) || end > ef->map.size)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: external data [%" PRIu64 ", +%" PRIu64
                         ") is outside %s (%" PRIu64 " bytes)",
                         m->path, t->name, off, len, loc, ef->map.size);
    t->data = len ? (const char *)ef->map.addr + off : "";
    t->flags = len ? TX_TENSOR_MAPPED : 0;
    t->file = m->ext[k].location;
    t->file_offset = off;
    return 0;
}

/* Packs n integers from int32_data/uint64_data into elements of size es. */
static void *pack_ints(const void *src, int is64, size_t n, size_t es)
{
    unsigned char *p = malloc(n * es + 1);
    if (!p)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        uint64_t v =
            is64 ? ((const uint64_t *)src)[i] : (uint64_t)(uint32_t)((const int32_t *)src)[i];
        memcpy(p + i * es, &v, es); /* little-endian: low bytes first */
    }
    return p;
}

static int load_tensor(struct tx_onnx *m, const Onnx__TensorProto *tp, size_t idx, size_t nn,
                       char *err, size_t errsz)
{
    struct tx_tensor *t = &m->t[m->n];
    memset(t, 0, sizeof(*t));
    const char *name = tp->name;
    if (!name || !name[0])
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: initializer %zu has no name", m->path, idx);
    if (strlen(name) > TX_ONNX_MAX_NAME)
        return tx_errbuf(
            err, errsz, TX_EINVAL,
            "%s: initializer %zu: name of %zu bytes (\"%.40s...\") exceeds the limit %u", m->path,
            idx, strlen(name), name, TX_ONNX_MAX_NAME);
    t->name = name;
    int dt = tp->has_data_type ? tp->data_type : 0;
    int et = elem_of_onnx(dt);
    if (et < 0) {
        /* STRING, COMPLEX64/128, FLOAT8 *FNUZ, UINT4/INT4, FLOAT4E2M1: kept
         * out of the tensor list (never GLM weights) */
        if (dt == TX_ONNX_STRING || dt == 14 || dt == 15 || dt == 18 || dt == 20 ||
            (dt >= 21 && dt <= 23)) {
            m->skipped++;
            return 1;
        }
        return tx_errbuf(err, errsz, TX_ENOTSUP, "%s: tensor %s: unsupported ONNX data_type %d",
                         m->path, name, dt);
    }
    if (tp->segment)
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                         "%s: tensor %s: segmented tensors are not supported", m->path, name);
    if (tp->n_dims > TX_TENSOR_MAX_DIMS)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: rank %zu exceeds %d", m->path, name,
                         tp->n_dims, TX_TENSOR_MAX_DIMS);
    t->type = (enum tx_elem_type)et;
    t->ndim = (int)tp->n_dims;
    uint64_t ne = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: tensor %s: dims[%zu] = %" PRId64 " is negative", m->path, name, i,
                             tp->dims[i]);
        t->shape[i] = (uint64_t)tp->dims[i];
        if (!txm_mul(ne, t->shape[i], &ne))
            return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: shape overflows", m->path,
                             name);
    }
    size_t es = tx_elem_size(t->type);
    if (!txm_mul(ne, es, &t->nbytes))
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: size overflows", m->path, name);
    t->nelem = ne;
    t->file = m->path;
    t->file_offset = 0;
    int ext =
        tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (ext)
        return external_data(m, tp, t, nn, err, errsz);
    char sb[96];
    if (tp->has_raw_data) {
        if (tp->raw_data.len != t->nbytes)
            return tx_errbuf(
                err, errsz, TX_EINVAL,
                "%s: tensor %s: raw_data has %zu bytes but shape %s x %s needs %" PRIu64, m->path,
                name, tp->raw_data.len, tx_shape_str(t->shape, t->ndim, sb, sizeof(sb)),
                tx_elem_name(t->type), t->nbytes);
        t->data = tp->raw_data.len ? (const void *)tp->raw_data.data : "";
        /* offset of the bytes inside the .onnx is not tracked: data is a copy */
        return 0;
    }
    size_t have;
    const void *src = NULL;
    int pack = 0, is64 = 0;
    switch (t->type) {
    case TX_ELEM_F32:
        have = tp->n_float_data, src = tp->float_data;
        break;
    case TX_ELEM_F64:
        have = tp->n_double_data, src = tp->double_data;
        break;
    case TX_ELEM_I64:
        have = tp->n_int64_data, src = tp->int64_data;
        break;
    case TX_ELEM_I32:
        have = tp->n_int32_data, src = tp->int32_data;
        break;
    case TX_ELEM_U64:
        have = tp->n_uint64_data, src = tp->uint64_data;
        break;
    case TX_ELEM_U32:
        have = tp->n_uint64_data, src = tp->uint64_data, pack = 1, is64 = 1;
        break;
    default: /* F16, BF16, I16, I8, U16, U8, BOOL, F8: int32_data */
        have = tp->n_int32_data, src = tp->int32_data, pack = 1;
        break;
    }
    if (ne == 0) {
        t->data = "";
        return 0;
    }
    if (have == 0)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: no data (no raw_data, typed data or "
                         "external data)",
                         m->path, name);
    if (have != ne)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: %zu data values but shape %s has %" PRIu64 " elements",
                         m->path, name, have, tx_shape_str(t->shape, t->ndim, sb, sizeof(sb)), ne);
    if (pack) {
        void *p = pack_ints(src, is64, (size_t)ne, es);
        if (!p)
            return tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", m->path);
        m->owned[m->n] = p;
        t->data = p;
    } else {
        t->data = src;
    }
    return 0;
}

int tx_onnx_open(const char *path, struct tx_onnx **out, char *err, size_t errsz)
{
    *out = NULL;
    struct tx_onnx *m = calloc(1, sizeof(*m));
    if (!m)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    m->map.fd = -1;
    int rc;
    m->path = strdup(path);
    m->dir = txm_dirname(path);
    if (!m->path || !m->dir) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto fail;
    }
    rc = txm_map_file(path, &m->map, err, errsz);
    if (rc < 0)
        goto fail;
    if (m->map.size == 0) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: empty file", path);
        goto fail;
    }
    if (m->map.size > ONNX_PROTO_MAX) {
        rc = tx_errbuf(err, errsz, TX_EINVAL,
                       "%s: %" PRIu64
                       " bytes: larger than protobuf's 2 GiB limit (use external data)",
                       path, m->map.size);
        goto fail;
    }
    m->model = onnx__model_proto__unpack(NULL, (size_t)m->map.size, m->map.addr);
    if (!m->model) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: not a valid ONNX model (protobuf parse failed)",
                       path);
        goto fail;
    }
    /* The mapping is no longer needed: protobuf-c copied what it kept. */
    txm_unmap(&m->map);
    const Onnx__GraphProto *g = m->model->graph;
    if (!g) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: ONNX model has no graph", path);
        goto fail;
    }
    size_t nn = g->n_initializer;
    if (nn > TX_ONNX_MAX_TENSORS) {
        rc = tx_errbuf(err, errsz, TX_EINVAL,
                       "%s: graph.initializer: %zu tensors exceeds the limit %u", path, nn,
                       TX_ONNX_MAX_TENSORS);
        goto fail;
    }
    m->t = calloc(nn + 1, sizeof(*m->t));
    m->sorted = calloc(nn + 1, sizeof(*m->sorted));
    m->owned = calloc(nn + 1, sizeof(*m->owned));
    m->ext = calloc(nn + 1, sizeof(*m->ext));
    if (!m->t || !m->sorted || !m->owned || !m->ext) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i <= nn; i++)
        m->ext[i].map.fd = -1;
    for (size_t i = 0; i < nn; i++) {
        rc = load_tensor(m, g->initializer[i], i, nn, err, errsz);
        if (rc < 0)
            goto fail;
        if (rc == 0)
            m->n++;
    }
    for (size_t i = 0; i < m->n; i++)
        m->sorted[i] = &m->t[i];
    qsort(m->sorted, m->n, sizeof(*m->sorted), cmp_tname);
    for (size_t i = 1; i < m->n; i++)
        if (strcmp(m->sorted[i - 1]->name, m->sorted[i]->name) == 0) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: initializer %s appears twice", path,
                           m->sorted[i]->name);
            goto fail;
        }
    *out = m;
    return 0;
fail:
    tx_onnx_close(m);
    return rc;
}

/* ---- writer ------------------------------------------------------------- */

struct tx_onnx_writer {
    char *path, *tmp;
    char *ext_name, *ext_path, *ext_tmp;
    int ext_fd;
    uint64_t ext_off; /* bytes written to the external file */
    uint64_t pending; /* bytes still expected by tx_onnx_writer_append */
    uint64_t inline_bytes;
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    /* everything allocated, freed at the end */
    void **allocs;
    size_t nallocs, capallocs;
    Onnx__TensorProto **inits;
    size_t ninits, capinits;
    Onnx__NodeProto **nodes;
    size_t nnodes, capnodes;
    Onnx__ValueInfoProto **vin, **vout;
    size_t nvin, nvout, capvin, capvout;
    Onnx__StringStringEntryProto **meta;
    size_t nmeta;
};

static void *wkeep(struct tx_onnx_writer *w, void *p)
{
    if (!p)
        return NULL;
    if (w->nallocs == w->capallocs) {
        size_t c = w->capallocs ? 2 * w->capallocs : 64;
        void **n = realloc(w->allocs, c * sizeof(void *));
        if (!n) {
            free(p);
            return NULL;
        }
        w->allocs = n;
        w->capallocs = c;
    }
    w->allocs[w->nallocs++] = p;
    return p;
}

static char *wstr(struct tx_onnx_writer *w, const char *s)
{
    return wkeep(w, strdup(s ? s : ""));
}

static int push(void ***v, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        void **nv = realloc(*v, c * sizeof(void *));
        if (!nv)
            return TX_ENOMEM;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = p;
    return 0;
}

static Onnx__StringStringEntryProto *kv(struct tx_onnx_writer *w, const char *k, const char *v)
{
    Onnx__StringStringEntryProto *e = wkeep(w, malloc(sizeof(*e)));
    if (!e)
        return NULL;
    onnx__string_string_entry_proto__init(e);
    e->key = wstr(w, k);
    e->value = wstr(w, v);
    return e->key && e->value ? e : NULL;
}

int tx_onnx_writer_open(const char *path, const char *external_data, const char *const *meta,
                        struct tx_onnx_writer **out, char *err, size_t errsz)
{
    *out = NULL;
    int bad = tx_file_check_target(path, err, errsz);
    if (bad < 0)
        return bad;
    struct tx_onnx_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    w->ext_fd = -1;
    int rc = TX_ENOMEM;
    w->path = strdup(path);
    w->tmp = txm_temp_name(path);
    if (!w->path || !w->tmp)
        goto fail_mem;
    if (external_data) {
        if (!external_data[0] || strchr(external_data, '/')) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: external data name \"%s\" must be a plain file "
                           "name",
                           path, external_data);
            goto fail;
        }
        char *dir = txm_dirname(path);
        w->ext_name = strdup(external_data);
        w->ext_path = dir ? txm_path_join(dir, external_data) : NULL;
        free(dir);
        w->ext_tmp = w->ext_path ? txm_temp_name(w->ext_path) : NULL;
        if (!w->ext_name || !w->ext_tmp)
            goto fail_mem;
        w->ext_fd = tx_file_open(w->ext_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (w->ext_fd < 0) {
            rc = w->ext_fd;
            w->ext_fd = -1;
            rc = tx_errbuf(err, errsz, tx_errno_code(rc), "%s: %s", w->ext_tmp, strerror(-rc));
            goto fail;
        }
    }
    onnx__model_proto__init(&w->model);
    onnx__graph_proto__init(&w->graph);
    onnx__operator_set_id_proto__init(&w->opset);
    w->opset.domain = "";
    w->opset.has_version = 1;
    w->opset.version = 17;
    w->opsets[0] = &w->opset;
    w->model.has_ir_version = 1;
    w->model.ir_version = 8;
    w->model.producer_name = "libtx";
    w->model.producer_version = "1.0";
    w->model.n_opset_import = 1;
    w->model.opset_import = w->opsets;
    w->model.graph = &w->graph;
    w->graph.name = "main";
    size_t nm = 0;
    while (meta && meta[nm] && meta[nm + 1])
        nm += 2;
    if (nm) {
        w->meta = wkeep(w, calloc(nm / 2, sizeof(*w->meta)));
        if (!w->meta)
            goto fail_mem;
        for (size_t i = 0; i < nm; i += 2) {
            w->meta[w->nmeta] = kv(w, meta[i], meta[i + 1]);
            if (!w->meta[w->nmeta])
                goto fail_mem;
            w->nmeta++;
        }
    }
    *out = w;
    return 0;
fail_mem:
    rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
fail:
    tx_onnx_writer_abort(w);
    return rc;
}

static Onnx__TensorProto *new_init(struct tx_onnx_writer *w, const struct tx_tensor_decl *d,
                                   uint64_t *nbytes, char *err, size_t errsz)
{
    int dt = tx_onnx_type_of(d->type);
    if (!dt || !d->name || !d->name[0] || d->ndim < 0 || d->ndim > TX_TENSOR_MAX_DIMS) {
        tx_errbuf(err, errsz, TX_EINVAL, "%s: invalid declaration of tensor %s", w->path,
                  d->name ? d->name : "(null)");
        return NULL;
    }
    if (w->pending) {
        tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s added before the previous one was complete",
                  w->path, d->name);
        return NULL;
    }
    Onnx__TensorProto *tp = wkeep(w, malloc(sizeof(*tp)));
    int64_t *dims = wkeep(w, calloc((size_t)d->ndim + 1, sizeof(int64_t)));
    if (!tp || !dims) {
        tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        return NULL;
    }
    onnx__tensor_proto__init(tp);
    uint64_t ne = 1;
    for (int i = 0; i < d->ndim; i++) {
        dims[i] = (int64_t)d->shape[i];
        ne *= d->shape[i];
    }
    tp->n_dims = (size_t)d->ndim;
    tp->dims = dims;
    tp->has_data_type = 1;
    tp->data_type = dt;
    tp->name = wstr(w, d->name);
    *nbytes = ne * tx_elem_size(d->type);
    if (!tp->name || push((void ***)&w->inits, &w->ninits, &w->capinits, tp) < 0) {
        tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        return NULL;
    }
    return tp;
}

int tx_onnx_writer_begin(struct tx_onnx_writer *w, const struct tx_tensor_decl *d, char *err,
                         size_t errsz)
{
    if (w->ext_fd < 0)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: streaming tensors needs external data",
                         w->path);
    uint64_t nb;
    Onnx__TensorProto *tp = new_init(w, d, &nb, err, errsz);
    if (!tp)
        return TX_EINVAL;
    uint64_t off = txm_align(w->ext_off, 4096);
    if (off > w->ext_off) {
        static const char zeros[4096];
        int rc = txm_write_all(w->ext_fd, zeros, (size_t)(off - w->ext_off));
        if (rc < 0)
            return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: write: %s", w->ext_tmp,
                             strerror(-rc));
        w->ext_off = off;
    }
    char so[32], sl[32];
    snprintf(so, sizeof(so), "%" PRIu64, off);
    snprintf(sl, sizeof(sl), "%" PRIu64, nb);
    Onnx__StringStringEntryProto **ed = wkeep(w, calloc(3, sizeof(*ed)));
    if (!ed)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    ed[0] = kv(w, "location", w->ext_name);
    ed[1] = kv(w, "offset", so);
    ed[2] = kv(w, "length", sl);
    if (!ed[0] || !ed[1] || !ed[2])
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    tp->n_external_data = 3;
    tp->external_data = ed;
    tp->has_data_location = 1;
    tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    w->pending = nb;
    return 0;
}

int tx_onnx_writer_append(struct tx_onnx_writer *w, const void *data, size_t len, char *err,
                          size_t errsz)
{
    if (len > w->pending)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: more data appended than the tensor holds",
                         w->path);
    int rc = txm_write_all(w->ext_fd, data, len);
    if (rc < 0)
        return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: write: %s", w->ext_tmp, strerror(-rc));
    w->pending -= len;
    w->ext_off += len;
    return 0;
}

int tx_onnx_writer_add(struct tx_onnx_writer *w, const struct tx_tensor_decl *d, const void *data,
                       char *err, size_t errsz)
{
    if (w->ext_fd >= 0) {
        int rc = tx_onnx_writer_begin(w, d, err, errsz);
        if (rc < 0)
            return rc;
        return tx_onnx_writer_append(w, data, (size_t)w->pending, err, errsz);
    }
    uint64_t nb;
    Onnx__TensorProto *tp = new_init(w, d, &nb, err, errsz);
    if (!tp)
        return TX_EINVAL;
    if (w->inline_bytes + nb > ONNX_PROTO_MAX - (64u << 20))
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                         "%s: inline initializers exceed protobuf's 2 GiB limit; use external data",
                         w->path);
    void *copy = wkeep(w, malloc(nb ? nb : 1));
    if (!copy)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    memcpy(copy, data, nb);
    tp->has_raw_data = 1;
    tp->raw_data.len = nb;
    tp->raw_data.data = copy;
    w->inline_bytes += nb;
    return 0;
}

int tx_onnx_writer_io(struct tx_onnx_writer *w, int is_output, const struct tx_onnx_value *v,
                      char *err, size_t errsz)
{
    if (!v->name || v->ndim < 0 || v->ndim > TX_TENSOR_MAX_DIMS || !tx_onnx_type_of(v->type))
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: invalid graph %s", w->path,
                         is_output ? "output" : "input");
    Onnx__ValueInfoProto *vi = wkeep(w, malloc(sizeof(*vi)));
    Onnx__TypeProto *ty = wkeep(w, malloc(sizeof(*ty)));
    Onnx__TypeProto__Tensor *tt = wkeep(w, malloc(sizeof(*tt)));
    Onnx__TensorShapeProto *sh = wkeep(w, malloc(sizeof(*sh)));
    Onnx__TensorShapeProto__Dimension **dims =
        wkeep(w, calloc((size_t)v->ndim + 1, sizeof(void *)));
    if (!vi || !ty || !tt || !sh || !dims)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(ty);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int i = 0; i < v->ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d = wkeep(w, malloc(sizeof(*d)));
        if (!d)
            return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        onnx__tensor_shape_proto__dimension__init(d);
        if (v->dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = v->dims[i];
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = wstr(w, v->params[i] ? v->params[i] : "N");
        }
        dims[i] = d;
    }
    sh->n_dim = (size_t)v->ndim;
    sh->dim = dims;
    tt->has_elem_type = 1;
    tt->elem_type = tx_onnx_type_of(v->type);
    tt->shape = sh;
    ty->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    ty->tensor_type = tt;
    vi->name = wstr(w, v->name);
    vi->type = ty;
    int rc = is_output ? push((void ***)&w->vout, &w->nvout, &w->capvout, vi)
                       : push((void ***)&w->vin, &w->nvin, &w->capvin, vi);
    if (rc < 0 || !vi->name)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    return 0;
}

int tx_onnx_writer_node(struct tx_onnx_writer *w, const char *op_type, const char *name,
                        const char *const *inputs, size_t nin, const char *const *outputs,
                        size_t nout, const char *attr_name, const int64_t *ints, size_t nints,
                        char *err, size_t errsz)
{
    Onnx__NodeProto *n = wkeep(w, malloc(sizeof(*n)));
    char **in = wkeep(w, calloc(nin + 1, sizeof(char *)));
    char **outp = wkeep(w, calloc(nout + 1, sizeof(char *)));
    if (!n || !in || !outp)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    onnx__node_proto__init(n);
    for (size_t i = 0; i < nin; i++)
        if (!(in[i] = wstr(w, inputs[i])))
            return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    for (size_t i = 0; i < nout; i++)
        if (!(outp[i] = wstr(w, outputs[i])))
            return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    n->n_input = nin;
    n->input = in;
    n->n_output = nout;
    n->output = outp;
    n->op_type = wstr(w, op_type);
    n->name = wstr(w, name ? name : op_type);
    if (attr_name) {
        Onnx__AttributeProto *a = wkeep(w, malloc(sizeof(*a)));
        Onnx__AttributeProto **al = wkeep(w, calloc(1, sizeof(void *)));
        int64_t *iv = wkeep(w, calloc(nints + 1, sizeof(int64_t)));
        if (!a || !al || !iv)
            return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        onnx__attribute_proto__init(a);
        a->name = wstr(w, attr_name);
        a->has_type = 1;
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        memcpy(iv, ints, nints * sizeof(int64_t));
        a->n_ints = nints;
        a->ints = iv;
        al[0] = a;
        n->n_attribute = 1;
        n->attribute = al;
    }
    if (push((void ***)&w->nodes, &w->nnodes, &w->capnodes, n) < 0)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    return 0;
}

struct fd_buffer {
    ProtobufCBuffer base;
    int fd;
    int err;
    uint64_t written;
};

static void fd_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    struct fd_buffer *fb = (struct fd_buffer *)b;
    if (fb->err)
        return;
    int rc = txm_write_all(fb->fd, data, len);
    if (rc < 0)
        fb->err = rc;
    fb->written += len;
}

int tx_onnx_writer_finish(struct tx_onnx_writer *w, char *err, size_t errsz)
{
    int rc = 0;
    if (w->pending) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: the last tensor is incomplete", w->path);
        goto fail;
    }
    w->graph.n_initializer = w->ninits;
    w->graph.initializer = w->inits;
    w->graph.n_node = w->nnodes;
    w->graph.node = w->nodes;
    w->graph.n_input = w->nvin;
    w->graph.input = w->vin;
    w->graph.n_output = w->nvout;
    w->graph.output = w->vout;
    w->model.n_metadata_props = w->nmeta;
    w->model.metadata_props = w->meta;
    size_t sz = onnx__model_proto__get_packed_size(&w->model);
    if (sz > ONNX_PROTO_MAX) {
        rc = tx_errbuf(err, errsz, TX_ENOTSUP, "%s: the model exceeds protobuf's 2 GiB limit",
                       w->path);
        goto fail;
    }
    int fd = tx_file_open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = fd;
        rc = tx_errbuf(err, errsz, tx_errno_code(rc), "%s: %s", w->tmp, strerror(-rc));
        goto fail;
    }
    struct fd_buffer fb = {.base = {fd_append}, .fd = fd};
    onnx__model_proto__pack_to_buffer(&w->model, &fb.base);
    rc = fb.err;
    int crc = tx_file_close(fd);
    if (rc == 0)
        rc = crc;
    if (rc == 0 && w->ext_fd >= 0) {
        rc = tx_file_close(w->ext_fd);
        w->ext_fd = -1;
        if (rc == 0 && tx_file_check_target(w->ext_path, NULL, 0) < 0)
            rc = -EEXIST; /* errno domain: the data file's path is a device or directory */
        if (rc == 0)
            rc = tx_file_rename(w->ext_tmp, w->ext_path);
    }
    rc = txm_commit_temp(&w->tmp, w->path, rc, err, errsz);
    if (rc < 0)
        goto fail;
    free(w->ext_tmp);
    w->ext_tmp = NULL;
    tx_onnx_writer_abort(w);
    return 0;
fail:
    tx_onnx_writer_abort(w);
    return rc;
}

void tx_onnx_writer_abort(struct tx_onnx_writer *w)
{
    if (!w)
        return;
    if (w->ext_fd >= 0)
        close(w->ext_fd);
    if (w->ext_tmp)
        unlink(w->ext_tmp);
    if (w->tmp)
        unlink(w->tmp);
    for (size_t i = 0; i < w->nallocs; i++)
        free(w->allocs[i]);
    free(w->allocs);
    free(w->inits);
    free(w->nodes);
    free(w->vin);
    free(w->vout);
    free(w->path);
    free(w->tmp);
    free(w->ext_name);
    free(w->ext_path);
    free(w->ext_tmp);
    free(w);
}
