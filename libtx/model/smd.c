/* SPDX-License-Identifier: MIT */
/* The .smd deployment package: reader and streaming writer
 * (docs/smd-format.md). */
#include <tx-internal/tx_model_internal.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <math.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include <tx/tx_dtype.h>
#include <tx-internal/tx_export.h>
#include <tx-internal/tx_smd.h>

/* Sanity limits of the reader (well above anything real). */
#define SMD_MAX_TENSORS (1u << 20) /* docs/tools-export.md, "Limits of the input formats" */
#define SMD_MAX_JSON (512ull << 20)
#define SMD_MAX_STRINGS (1ull << 30)
#define SMD_MAX_NAME 255u

static const char *const layer_names[TX_SMD_LAYER_COUNT] = {
    "embedding", "attention", "mlp", "experts", "norm", "output", "router"};
static const char *const prec_names[TX_SMD_PREC_COUNT] = {"FP32", "FP16", "BF16", "INT8_MIXED",
                                                          "FP8"};

const char *tx_smd_layer_name(enum tx_smd_layer l)
{
    return (unsigned)l < TX_SMD_LAYER_COUNT ? layer_names[l] : "?";
}

const char *tx_smd_precision_name(enum tx_smd_precision p)
{
    return (unsigned)p < TX_SMD_PREC_COUNT ? prec_names[p] : "?";
}

int tx_smd_precision_parse(const char *s)
{
    if (!strcasecmp(s, "fp32") || !strcasecmp(s, "f32") || !strcasecmp(s, "none"))
        return TX_SMD_PREC_FP32;
    if (!strcasecmp(s, "fp16") || !strcasecmp(s, "f16"))
        return TX_SMD_PREC_FP16;
    if (!strcasecmp(s, "bf16"))
        return TX_SMD_PREC_BF16;
    if (!strcasecmp(s, "int8") || !strcasecmp(s, "int8_mixed") || !strcasecmp(s, "i8"))
        return TX_SMD_PREC_INT8_MIXED;
    if (!strcasecmp(s, "fp8") || !strcasecmp(s, "f8_e4m3") || !strcasecmp(s, "e4m3"))
        return TX_SMD_PREC_FP8;
    return TX_NONE;
}

int tx_smd_layer_parse(const char *s)
{
    static const struct {
        const char *n;
        int l;
    } m[] = {{"embedding", TX_SMD_LAYER_EMBEDDING},
             {"embed", TX_SMD_LAYER_EMBEDDING},
             {"attention", TX_SMD_LAYER_ATTENTION},
             {"attn", TX_SMD_LAYER_ATTENTION},
             {"mlp", TX_SMD_LAYER_MLP},
             {"ffn", TX_SMD_LAYER_MLP},
             {"experts", TX_SMD_LAYER_EXPERT},
             {"expert", TX_SMD_LAYER_EXPERT},
             {"norm", TX_SMD_LAYER_NORM},
             {"norms", TX_SMD_LAYER_NORM},
             {"output", TX_SMD_LAYER_OUTPUT},
             {"lm_head", TX_SMD_LAYER_OUTPUT}};
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
        if (!strcasecmp(s, m[i].n))
            return m[i].l;
    /* the article's spelling: GLM_MLP, GLM_EXPERT, ... */
    if (!strncasecmp(s, "GLM_", 4))
        return tx_smd_layer_parse(s + 4);
    return TX_NONE;
}

unsigned tx_smd_precision_dtype(enum tx_smd_precision p)
{
    switch (p) {
    case TX_SMD_PREC_FP16:
        return TX8_DTYPE_F16;
    case TX_SMD_PREC_BF16:
        return TX8_DTYPE_BF16;
    case TX_SMD_PREC_INT8_MIXED:
        return TX8_DTYPE_I8;
    case TX_SMD_PREC_FP8:
        return TX8_DTYPE_F8_E4M3;
    default:
        return TX8_DTYPE_F32;
    }
}

uint64_t tx_smd_scales_size(unsigned dtype, uint32_t rows, uint32_t cols, uint32_t group_size)
{
    if (dtype == TX8_DTYPE_F8_E4M3) /* per 128 x 128 block, group_size 128 */
        return group_size == TX8_FP8_BLOCK
                   ? ((uint64_t)rows + TX8_FP8_BLOCK - 1) / TX8_FP8_BLOCK *
                         (((uint64_t)cols + TX8_FP8_BLOCK - 1) / TX8_FP8_BLOCK) * 4
                   : UINT64_MAX;
    if (dtype != TX8_DTYPE_I8)
        return group_size ? UINT64_MAX : 0;
    if (group_size == 0)
        return (uint64_t)rows * 4;
    if (cols % group_size)
        return UINT64_MAX;
    return (uint64_t)rows * (cols / group_size) * 4;
}

uint64_t tx_smd_index_size(unsigned format, uint32_t rows, uint32_t nnz_blocks)
{
    if (format != TX8_WFMT_BLOCK_SPARSE)
        return nnz_blocks ? UINT64_MAX : 0;
    return ((uint64_t)rows + 1) * 4 + (uint64_t)nnz_blocks * 2;
}

uint64_t tx_smd_data_size(unsigned dtype, unsigned format, uint32_t rows, uint32_t cols,
                          uint32_t nnz_blocks)
{
    size_t es = tx_dtype_size(dtype);
    if (!es || dtype == TX8_DTYPE_I32)
        return UINT64_MAX;
    if (format == TX8_WFMT_DENSE)
        return (uint64_t)rows * cols * es;
    if (format == TX8_WFMT_BLOCK_SPARSE) {
        if (cols % TX8_SPARSE_BLOCK)
            return UINT64_MAX;
        if ((uint64_t)nnz_blocks > (uint64_t)rows * (cols / TX8_SPARSE_BLOCK))
            return UINT64_MAX;
        return (uint64_t)nnz_blocks * TX8_SPARSE_BLOCK * es;
    }
    return UINT64_MAX;
}

int tx_smd_check_sparse_index(const void *index, uint64_t size, uint32_t rows, uint32_t cols,
                              uint32_t nnz_blocks, char *err, size_t errsz)
{
    if (size != tx_smd_index_size(TX8_WFMT_BLOCK_SPARSE, rows, nnz_blocks))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "sparse index has %" PRIu64 " bytes, expected %" PRIu64, size,
                         tx_smd_index_size(TX8_WFMT_BLOCK_SPARSE, rows, nnz_blocks));
    const unsigned char *p = index;
    const unsigned char *cb = p + ((uint64_t)rows + 1) * 4;
    uint32_t nb = cols / TX8_SPARSE_BLOCK, prev = 0;
    for (uint64_t r = 0; r <= rows; r++) {
        uint32_t v;
        memcpy(&v, p + r * 4, 4);
        if ((r == 0 && v != 0) || v < prev || v > nnz_blocks)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "sparse index: row_ptr[%" PRIu64 "] = %u invalid", r, v);
        if (r > 0) {
            for (uint32_t k = prev; k < v; k++) {
                uint16_t c;
                memcpy(&c, cb + (uint64_t)k * 2, 2);
                uint16_t c0 = 0;
                if (k > prev)
                    memcpy(&c0, cb + (uint64_t)(k - 1) * 2, 2);
                if (c >= nb || (k > prev && c <= c0))
                    return tx_errbuf(err, errsz, TX_EINVAL,
                                     "sparse index: row %" PRIu64 " block %u: column block %u "
                                     "invalid (must increase, < %u)",
                                     r - 1, k - prev, c, nb);
            }
        }
        prev = v;
    }
    if (prev != nnz_blocks)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "sparse index: row_ptr[rows] = %u but nnz_blocks = %u", prev, nnz_blocks);
    return 0;
}

/* ---- reader ------------------------------------------------------------- */

struct tx_smd {
    char *path;
    int fd;
    struct tx_smd_header hdr;
    struct tx_smd_section sec[64];
    char *json[8]; /* by section kind */
    size_t json_len[8];
    struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT];
    struct tx_smd_tensor *t;
    char *strings;
    uint64_t strings_len;
    const struct tx_smd_tensor **sorted;
};

const char *tx_smd_path(const struct tx_smd *s)
{
    return s->path;
}
const struct tx_smd_header *tx_smd_header(const struct tx_smd *s)
{
    return &s->hdr;
}
int tx_smd_fd(const struct tx_smd *s)
{
    return s->fd;
}
size_t tx_smd_tensor_count(const struct tx_smd *s)
{
    return s->hdr.tensor_count;
}
const struct tx_smd_tensor *tx_smd_tensor_at(const struct tx_smd *s, size_t i)
{
    return i < s->hdr.tensor_count ? &s->t[i] : NULL;
}
const char *tx_smd_tensor_name(const struct tx_smd *s, const struct tx_smd_tensor *t)
{
    return s->strings + t->name_offset;
}

static const char *sec_json(const struct tx_smd *s, int kind, size_t *len)
{
    if (len)
        *len = s->json_len[kind];
    return s->json[kind];
}
const char *tx_smd_config_json(const struct tx_smd *s, size_t *len)
{
    return sec_json(s, TX_SMD_SEC_CONFIG, len);
}
const char *tx_smd_tokenizer_json(const struct tx_smd *s, size_t *len)
{
    return sec_json(s, TX_SMD_SEC_TOKENIZER, len);
}
const char *tx_smd_tokenizer_config_json(const struct tx_smd *s, size_t *len)
{
    return sec_json(s, TX_SMD_SEC_TOKENIZER_CONFIG, len);
}
const char *tx_smd_metadata_json(const struct tx_smd *s, size_t *len)
{
    return sec_json(s, TX_SMD_SEC_METADATA, len);
}
const struct tx_smd_plan_entry *tx_smd_plan(const struct tx_smd *s, enum tx_smd_layer l)
{
    return (unsigned)l < TX_SMD_LAYER_COUNT ? &s->plan[l] : NULL;
}

const struct tx_smd_tensor *tx_smd_find(const struct tx_smd *s, const char *name)
{
    size_t lo = 0, hi = s->hdr.tensor_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->strings + s->sorted[mid]->name_offset, name);
        if (c == 0)
            return s->sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void tx_smd_close(struct tx_smd *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    for (int i = 0; i < 8; i++)
        free(s->json[i]);
    free(s->t);
    free(s->strings);
    free(s->sorted);
    free(s->path);
    free(s);
}

static const char *sec_name(uint32_t kind)
{
    static const char *const n[] = {"?",    "CONFIG",  "TOKENIZER", "TOKENIZER_CONFIG",
                                    "PLAN", "TENSORS", "STRINGS",   "METADATA"};
    return kind < 8 ? n[kind] : "unknown";
}

static int all_zero(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i])
            return 0;
    return 1;
}

/* Reads a section into a malloc'd NUL-terminated buffer and checks its CRC. */
static int read_section(struct tx_smd *s, const struct tx_smd_section *sc, uint64_t max, char **out,
                        char *err, size_t errsz)
{
    *out = NULL;
    if (sc->size > max)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: section %s: %" PRIu64 " bytes exceeds %" PRIu64, s->path,
                         sec_name(sc->kind), sc->size, max);
    char *b = malloc((size_t)sc->size + 1);
    if (!b)
        return tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", s->path);
    int rc = txm_pread_all(s->fd, b, (size_t)sc->size, sc->offset);
    if (rc < 0) {
        free(b);
        return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: section %s: read: %s", s->path,
                         sec_name(sc->kind), strerror(-rc));
    }
    b[sc->size] = 0;
    uint32_t crc = tx_crc32c(0, b, (size_t)sc->size);
    if (crc != sc->crc) {
        free(b);
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: section %s: checksum mismatch (stored %08x, computed %08x)", s->path,
                         sec_name(sc->kind), sc->crc, crc);
    }
    *out = b;
    return 0;
}

static int check_json_object(const struct tx_smd *s, int kind, const char *txt, size_t len,
                             char *err, size_t errsz)
{
    return txm_smd_check_json(s->path, kind, txt, len, err, errsz);
}

int txm_smd_check_json(const char *path, int kind, const char *txt, size_t len, char *err,
                       size_t errsz)
{
    if (memchr(txt, 0, len))
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: section %s contains a NUL byte", path,
                         sec_name((uint32_t)kind));
    /* The syntax check decides for every well-formed section (json-c's
     * parser accepts whatever it accepts) without building a tree of the
     * 11 MB tokenizer; json-c decides the rest. */
    if (txm_json_object_ok(txt, len))
        return 0;
    struct json_tokener *tok = json_tokener_new_ex(JSON_TOKENER_DEFAULT_DEPTH);
    if (!tok)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    struct json_object *o = len <= INT32_MAX ? json_tokener_parse_ex(tok, txt, (int)len) : NULL;
    enum json_tokener_error je = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    int ok = o && je == json_tokener_success && json_object_is_type(o, json_type_object);
    if (o)
        json_object_put(o);
    for (size_t i = end; ok && i < len; i++)
        if (!isspace((unsigned char)txt[i]))
            ok = 0;
    if (!ok)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: section %s is not a valid JSON object", path,
                         sec_name((uint32_t)kind));
    return 0;
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
    const char *str = ctx;
    return strcmp(str + (*(const struct tx_smd_tensor *const *)a)->name_offset,
                  str + (*(const struct tx_smd_tensor *const *)b)->name_offset);
}

struct span {
    uint64_t a, b;
    int kind; /* 0 section, 1 extent */
    uint32_t idx;
};
static int cmp_span(const void *x, const void *y)
{
    const struct span *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a ? 1 : 0;
}

static int check_tensor(struct tx_smd *s, uint32_t i, char *err, size_t errsz)
{
    const struct tx_smd_tensor *t = &s->t[i];
    const char *P = s->path;
    if (t->name_len < 1 || t->name_len > SMD_MAX_NAME || t->name_offset >= s->strings_len ||
        t->name_len >= s->strings_len - t->name_offset ||
        s->strings[t->name_offset + t->name_len] != 0 ||
        strlen(s->strings + t->name_offset) != t->name_len)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor #%u: name outside the string table or "
                         "not terminated",
                         P, i);
    const char *N = s->strings + t->name_offset;
    for (const char *c = N; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor #%u: name has a control character",
                             P, i);
    if (t->rsvd0 || t->rsvd1 || t->rsvd2 || !all_zero(t->rsvd3, sizeof(t->rsvd3)))
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: reserved fields not zero", P, N);
    if (t->dtype != TX8_DTYPE_F32 && t->dtype != TX8_DTYPE_F16 && t->dtype != TX8_DTYPE_BF16 &&
        t->dtype != TX8_DTYPE_I8 && t->dtype != TX8_DTYPE_F8_E4M3)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: invalid dtype %u", P, N, t->dtype);
    if (t->dtype == TX8_DTYPE_F8_E4M3 && t->format != TX8_WFMT_DENSE)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: FP8 tensors are dense", P, N);
    if (t->format != TX8_WFMT_DENSE && t->format != TX8_WFMT_BLOCK_SPARSE)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: invalid format %u", P, N,
                         t->format);
    if (t->layer_type >= TX_SMD_LAYER_COUNT)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: invalid layer type %u", P, N,
                         t->layer_type);
    if (t->ndim < 1 || t->ndim > TX_SMD_MAX_DIMS)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: invalid rank %u", P, N, t->ndim);
    uint64_t rows = 1;
    for (unsigned d = 0; d < TX_SMD_MAX_DIMS; d++) {
        if (d >= t->ndim) {
            if (t->shape[d])
                return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: unused dim %u not zero", P,
                                 N, d);
            continue;
        }
        if (t->shape[d] == 0 || t->shape[d] > UINT32_MAX)
            return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: dim %u = %" PRIu64 " invalid",
                             P, N, d, t->shape[d]);
        if (d + 1 < t->ndim && !txm_mul(rows, t->shape[d], &rows))
            return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: shape overflows", P, N);
    }
    if (rows != t->rows || t->shape[t->ndim - 1] != t->cols)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: rows x cols %u x %u does not match "
                         "the shape",
                         P, N, t->rows, t->cols);
    if (t->format == TX8_WFMT_BLOCK_SPARSE) {
        if (t->cols % TX8_SPARSE_BLOCK)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: tensor %s: sparse with %u columns, not a multiple of %u", P, N,
                             t->cols, TX8_SPARSE_BLOCK);
        if (t->group_size && t->group_size % TX8_SPARSE_BLOCK)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: tensor %s: sparse group size %u not a multiple of %u", P, N,
                             t->group_size, TX8_SPARSE_BLOCK);
    } else if (t->nnz_blocks) {
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: dense tensor with nnz_blocks", P,
                         N);
    }
    if (t->dtype == TX8_DTYPE_F8_E4M3 && t->group_size != TX8_FP8_BLOCK)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: FP8 group size %u (must be %u)", P,
                         N, t->group_size, TX8_FP8_BLOCK);
    if (t->dtype == TX8_DTYPE_I8 && t->group_size && t->cols % t->group_size)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: %u columns not a multiple of group "
                         "size %u",
                         P, N, t->cols, t->group_size);
    uint64_t ds = tx_smd_data_size(t->dtype, t->format, t->rows, t->cols, t->nnz_blocks);
    uint64_t ss = tx_smd_scales_size(t->dtype, t->rows, t->cols, t->group_size);
    uint64_t is = tx_smd_index_size(t->format, t->rows, t->nnz_blocks);
    if (ds == UINT64_MAX || ss == UINT64_MAX || is == UINT64_MAX)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: inconsistent dtype/format/group/nnz", P, N);
    if (t->data_size != ds || t->scales_size != ss || t->index_size != is)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: region sizes (data %" PRIu64 ", scales %" PRIu64
                         ", index %" PRIu64 ") differ from what the shape and format need (%" PRIu64
                         ", %" PRIu64 ", %" PRIu64 ")",
                         P, N, t->data_size, t->scales_size, t->index_size, ds, ss, is);
    if (t->data_offset % TX_SMD_ALIGN || t->extent_size % TX_SMD_ALIGN || t->extent_size == 0)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: extent not aligned to %u", P, N,
                         TX_SMD_ALIGN);
    uint64_t ext_end;
    if (!txm_add(t->data_offset, t->extent_size, &ext_end) || t->data_offset < s->hdr.data_offset ||
        ext_end > s->hdr.data_offset + s->hdr.data_size)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: extent [%" PRIu64 ", +%" PRIu64 ") outside the data area",
                         P, N, t->data_offset, t->extent_size);
    /* regions in order data, scales, index, inside the extent */
    uint64_t pos = t->data_offset + t->data_size;
    if (t->data_size > t->extent_size)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: data larger than its extent", P, N);
    const struct {
        uint64_t off, size;
        const char *what;
    } r[2] = {{t->scales_offset, t->scales_size, "scales"},
              {t->index_offset, t->index_size, "index"}};
    for (int k = 0; k < 2; k++) {
        if (r[k].size == 0) {
            if (r[k].off)
                return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: %s offset without %s", P, N,
                                 r[k].what, r[k].what);
            continue;
        }
        uint64_t e;
        if (r[k].off % TX_SMD_SUB_ALIGN || r[k].off < pos || !txm_add(r[k].off, r[k].size, &e) ||
            e > ext_end)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: tensor %s: %s region [%" PRIu64 ", +%" PRIu64
                             ") misplaced (must follow the data, 64-aligned, inside the extent)",
                             P, N, r[k].what, r[k].off, r[k].size);
        pos = e;
    }
    if (t->src_dtype >= TX8_DTYPE_COUNT && t->src_dtype != TX8_DTYPE_F8_E4M3)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: invalid source dtype", P, N);
    if (t->layer < -1 || t->expert < -1)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: invalid layer/expert index", P, N);
    return 0;
}

int tx_smd_open(const char *path, unsigned flags, struct tx_smd **out, char *err, size_t errsz)
{
    *out = NULL;
    struct tx_smd *s = calloc(1, sizeof(*s));
    if (!s)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    s->fd = -1;
    int rc;
    struct span *spans = NULL;
    s->path = strdup(path);
    if (!s->path) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto fail;
    }
    s->fd = tx_file_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (s->fd < 0) {
        rc = s->fd;
        s->fd = -1;
        rc = tx_errbuf(err, errsz, tx_errno_code(rc), "%s: %s", path, strerror(-rc));
        goto fail;
    }
    struct stat st;
    if (fstat(s->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: not a regular file", path);
        goto fail;
    }
    uint64_t fsize = (uint64_t)st.st_size;
    unsigned char area[TX_SMD_ALIGN];
    if (fsize < sizeof(struct tx_smd_header)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: truncated: %" PRIu64 " bytes, no .smd header",
                       path, fsize);
        goto fail;
    }
    size_t an = fsize < TX_SMD_ALIGN ? (size_t)fsize : TX_SMD_ALIGN;
    rc = txm_pread_all(s->fd, area, an, 0);
    if (rc < 0) {
        rc = tx_errbuf(err, errsz, tx_errno_code(rc), "%s: read: %s", path, strerror(-rc));
        goto fail;
    }
    memcpy(&s->hdr, area, sizeof(s->hdr));
    struct tx_smd_header *h = &s->hdr;
    if (memcmp(h->magic, TX_SMD_MAGIC, 8) != 0) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: not an .smd package (bad magic)", path);
        goto fail;
    }
    if (h->version_major != TX_SMD_VERSION_MAJOR) {
        rc = tx_errbuf(err, errsz, TX_ENOTSUP,
                       "%s: .smd version %u.%u is not supported (this reader: %u.x)", path,
                       h->version_major, h->version_minor, TX_SMD_VERSION_MAJOR);
        goto fail;
    }
    if (h->section_count > 64 || h->header_size != sizeof(*h) + 32u * h->section_count ||
        h->header_size > an) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: header size %u / section count %u invalid%s",
                       path, h->header_size, h->section_count,
                       h->header_size > an ? " (file truncated)" : "");
        goto fail;
    }
    {
        uint32_t stored = h->header_crc;
        memset(area + offsetof(struct tx_smd_header, header_crc), 0, 4);
        uint32_t crc = tx_crc32c(0, area, h->header_size);
        if (crc != stored) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: header checksum mismatch (stored %08x, computed %08x)", path,
                           stored, crc);
            goto fail;
        }
    }
    if (h->alignment != TX_SMD_ALIGN || !all_zero(h->rsvd, sizeof(h->rsvd))) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: alignment %u or reserved fields invalid", path,
                       h->alignment);
        goto fail;
    }
    if (h->file_size != fsize) {
        rc = tx_errbuf(err, errsz, TX_EINVAL,
                       "%s: file is %" PRIu64 " bytes but the header says %" PRIu64 "%s", path,
                       fsize, h->file_size, fsize < h->file_size ? " (truncated)" : "");
        goto fail;
    }
    if (h->sparse_block != TX8_SPARSE_BLOCK ||
        TX8_IF_MAJOR(h->tx8_if_version) != TX8_IF_VERSION_MAJOR) {
        rc = tx_errbuf(err, errsz, TX_ENOTSUP,
                       "%s: made for TX8 interface %u.%u with sparse block %u; this stack has "
                       "%u.%u with %u",
                       path, TX8_IF_MAJOR(h->tx8_if_version), TX8_IF_MINOR(h->tx8_if_version),
                       h->sparse_block, TX8_IF_VERSION_MAJOR, TX8_IF_VERSION_MINOR,
                       TX8_SPARSE_BLOCK);
        goto fail;
    }
    uint64_t dend;
    if (h->data_offset % TX_SMD_ALIGN || h->data_offset < TX_SMD_ALIGN ||
        !txm_add(h->data_offset, h->data_size, &dend) || dend > fsize ||
        (h->tensor_count && h->data_size == 0)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: data area [%" PRIu64 ", +%" PRIu64 ") invalid",
                       path, h->data_offset, h->data_size);
        goto fail;
    }
    if (h->tensor_count > SMD_MAX_TENSORS) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: header: tensor_count %u exceeds the limit %u",
                       path, h->tensor_count, SMD_MAX_TENSORS);
        goto fail;
    }
    /* the tensor table is in the file: nothing is sized by a count the
     * file cannot hold */
    if ((uint64_t)h->tensor_count * sizeof(struct tx_smd_tensor) > fsize) {
        rc = tx_errbuf(err, errsz, TX_EINVAL,
                       "%s: header: tensor_count %u needs a %" PRIu64
                       "-byte tensor table but the file is %" PRIu64 " bytes",
                       path, h->tensor_count,
                       (uint64_t)h->tensor_count * sizeof(struct tx_smd_tensor), fsize);
        goto fail;
    }
    memcpy(s->sec, area + sizeof(*h), 32u * h->section_count);
    spans = calloc(h->section_count + h->tensor_count + 2, sizeof(*spans));
    if (!spans) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto fail;
    }
    size_t nspans = 0;
    int seen[8] = {0};
    for (uint32_t i = 0; i < h->section_count; i++) {
        const struct tx_smd_section *sc = &s->sec[i];
        uint64_t e;
        if (sc->offset % TX_SMD_ALIGN || sc->offset < TX_SMD_ALIGN ||
            !txm_add(sc->offset, sc->size, &e) || e > fsize || sc->rsvd ||
            (sc->flags & ~TX_SMD_SECF_OPTIONAL)) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: section %s [%" PRIu64 ", +%" PRIu64 ") out of bounds or misaligned",
                           path, sec_name(sc->kind), sc->offset, sc->size);
            goto fail;
        }
        if (sc->kind >= 1 && sc->kind <= 7) {
            if (seen[sc->kind]++) {
                rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: section %s appears twice", path,
                               sec_name(sc->kind));
                goto fail;
            }
        } else if (!(sc->flags & TX_SMD_SECF_OPTIONAL)) {
            rc = tx_errbuf(err, errsz, TX_ENOTSUP, "%s: required section of unknown kind %u", path,
                           sc->kind);
            goto fail;
        }
        if (sc->size)
            spans[nspans++] = (struct span){sc->offset, e, 0, i};
    }
    static const int required[] = {TX_SMD_SEC_CONFIG, TX_SMD_SEC_TOKENIZER, TX_SMD_SEC_PLAN,
                                   TX_SMD_SEC_TENSORS, TX_SMD_SEC_STRINGS};
    for (size_t k = 0; k < sizeof(required) / sizeof(required[0]); k++)
        if (!seen[required[k]]) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: required section %s missing", path,
                           sec_name((uint32_t)required[k]));
            goto fail;
        }
    if (h->data_size)
        spans[nspans++] = (struct span){h->data_offset, dend, 1, 0};
    qsort(spans, nspans, sizeof(*spans), cmp_span);
    for (size_t i = 1; i < nspans; i++)
        if (spans[i].a < spans[i - 1].b) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: sections/data area overlap at offset %" PRIu64, path, spans[i].a);
            goto fail;
        }
    for (uint32_t i = 0; i < h->section_count; i++) {
        const struct tx_smd_section *sc = &s->sec[i];
        char *buf = NULL;
        switch (sc->kind) {
        case TX_SMD_SEC_CONFIG:
        case TX_SMD_SEC_TOKENIZER:
        case TX_SMD_SEC_TOKENIZER_CONFIG:
        case TX_SMD_SEC_METADATA:
            rc = read_section(s, sc, SMD_MAX_JSON, &buf, err, errsz);
            if (rc < 0)
                goto fail;
            s->json[sc->kind] = buf;
            s->json_len[sc->kind] = (size_t)sc->size;
            rc = check_json_object(s, (int)sc->kind, buf, (size_t)sc->size, err, errsz);
            if (rc < 0)
                goto fail;
            break;
        case TX_SMD_SEC_PLAN: {
            if (sc->size != 8 + sizeof(s->plan)) {
                rc = tx_errbuf(err, errsz, TX_EINVAL,
                               "%s: section PLAN has %" PRIu64 " bytes, "
                               "expected %zu",
                               path, sc->size, 8 + sizeof(s->plan));
                goto fail;
            }
            rc = read_section(s, sc, 4096, &buf, err, errsz);
            if (rc < 0)
                goto fail;
            uint32_t cnt, z;
            memcpy(&cnt, buf, 4);
            memcpy(&z, buf + 4, 4);
            memcpy(s->plan, buf + 8, sizeof(s->plan));
            free(buf);
            if (cnt != TX_SMD_LAYER_COUNT || z) {
                rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: plan count %u invalid", path, cnt);
                goto fail;
            }
            for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++) {
                const struct tx_smd_plan_entry *pe = &s->plan[l];
                if (pe->layer != l || pe->precision >= TX_SMD_PREC_COUNT ||
                    (pe->flags & ~TX_SMD_PLANF_SPARSE) ||
                    (pe->group_size && pe->group_size % TX8_SPARSE_BLOCK)) {
                    rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: plan entry %u (%s) invalid", path, l,
                                   tx_smd_layer_name(l));
                    goto fail;
                }
            }
            break;
        }
        case TX_SMD_SEC_TENSORS:
            if (sc->size != (uint64_t)h->tensor_count * sizeof(struct tx_smd_tensor)) {
                rc = tx_errbuf(err, errsz, TX_EINVAL,
                               "%s: section TENSORS has %" PRIu64 " bytes for %u tensors", path,
                               sc->size, h->tensor_count);
                goto fail;
            }
            rc = read_section(s, sc, sc->size, &buf, err, errsz);
            if (rc < 0)
                goto fail;
            s->t = (struct tx_smd_tensor *)buf; /* malloc'd: suitably aligned */
            break;
        case TX_SMD_SEC_STRINGS:
            rc = read_section(s, sc, SMD_MAX_STRINGS, &buf, err, errsz);
            if (rc < 0)
                goto fail;
            s->strings = buf;
            s->strings_len = sc->size;
            break;
        default:
            break; /* optional unknown section: skipped */
        }
    }
    nspans = 0;
    uint32_t flags_seen = 0;
    for (uint32_t i = 0; i < h->tensor_count; i++) {
        rc = check_tensor(s, i, err, errsz);
        if (rc < 0)
            goto fail;
        if (s->t[i].dtype == TX8_DTYPE_I8 || s->t[i].dtype == TX8_DTYPE_F8_E4M3)
            flags_seen |= TX_SMD_F_QUANTIZED;
        if (s->t[i].format == TX8_WFMT_BLOCK_SPARSE)
            flags_seen |= TX_SMD_F_SPARSE;
        spans[nspans++] =
            (struct span){s->t[i].data_offset, s->t[i].data_offset + s->t[i].extent_size, 1, i};
    }
    if ((h->flags & ~(TX_SMD_F_QUANTIZED | TX_SMD_F_SPARSE)) || h->flags != flags_seen) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: header flags %#x do not match the tensors (%#x)",
                       path, h->flags, flags_seen);
        goto fail;
    }
    qsort(spans, nspans, sizeof(*spans), cmp_span);
    for (size_t i = 1; i < nspans; i++)
        if (spans[i].a < spans[i - 1].b) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: tensors %s and %s overlap", path,
                           s->strings + s->t[spans[i - 1].idx].name_offset,
                           s->strings + s->t[spans[i].idx].name_offset);
            goto fail;
        }
    s->sorted = calloc(h->tensor_count + 1, sizeof(*s->sorted));
    if (!s->sorted) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < h->tensor_count; i++)
        s->sorted[i] = &s->t[i];
    qsort_r(s->sorted, h->tensor_count, sizeof(*s->sorted), cmp_name, s->strings);
    for (uint32_t i = 1; i < h->tensor_count; i++)
        if (strcmp(s->strings + s->sorted[i - 1]->name_offset,
                   s->strings + s->sorted[i]->name_offset) == 0) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s appears twice", path,
                           s->strings + s->sorted[i]->name_offset);
            goto fail;
        }
    free(spans);
    spans = NULL;
    if (flags & TX_SMD_OPEN_VERIFY) {
        rc = tx_smd_verify_all(s, err, errsz);
        if (rc < 0)
            goto fail;
    }
    *out = s;
    return 0;
fail:
    free(spans);
    tx_smd_close(s);
    return rc;
}

int tx_smd_check_extent(const struct tx_smd *s, const struct tx_smd_tensor *t, const void *buf,
                        char *err, size_t errsz)
{
    const char *N = tx_smd_tensor_name(s, t);
    const unsigned char *b = buf;
    uint32_t c = tx_crc32c(0, b, (size_t)t->data_size);
    if (c != t->data_crc)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: data checksum mismatch (stored %08x, computed %08x)",
                         s->path, N, t->data_crc, c);
    if (t->scales_size) {
        const unsigned char *sc = b + (t->scales_offset - t->data_offset);
        c = tx_crc32c(0, sc, (size_t)t->scales_size);
        if (c != t->scales_crc)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: tensor %s: scales checksum mismatch (stored %08x, computed %08x)",
                             s->path, N, t->scales_crc, c);
        /* a consistent checksum over a NaN scale (a broken exporter, or a
         * package rewritten with new checksums) would still give garbage:
         * scales are finite and >= 0 (0 only for an all-zero group) */
        for (uint64_t i = 0; i < t->scales_size / 4; i++) {
            float f;
            memcpy(&f, sc + i * 4, 4);
            if (!isfinite(f) || f < 0)
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "%s: tensor %s: scale %" PRIu64 " is %g (scales must be finite "
                                 "and >= 0)",
                                 s->path, N, i, (double)f);
        }
    }
    if (t->index_size) {
        const unsigned char *ix = b + (t->index_offset - t->data_offset);
        c = tx_crc32c(0, ix, (size_t)t->index_size);
        if (c != t->index_crc)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: tensor %s: index checksum mismatch (stored %08x, computed %08x)",
                             s->path, N, t->index_crc, c);
        char sub[TX_ERR_MAX];
        int rc = tx_smd_check_sparse_index(ix, t->index_size, t->rows, t->cols, t->nnz_blocks, sub,
                                           sizeof(sub));
        if (rc < 0)
            return tx_errbuf(err, errsz, rc, "%s: tensor %s: %s", s->path, N, sub);
    }
    return 0;
}

int tx_smd_read_extent(const struct tx_smd *s, const struct tx_smd_tensor *t, void *dst,
                       size_t dstsz, int verify, char *err, size_t errsz)
{
    const char *N = tx_smd_tensor_name(s, t);
    if (dstsz < t->extent_size)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: buffer of %zu bytes < extent %" PRIu64, s->path, N, dstsz,
                         t->extent_size);
    int rc = txm_pread_all(s->fd, dst, (size_t)t->extent_size, t->data_offset);
    if (rc < 0)
        return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: tensor %s: read: %s", s->path, N,
                         strerror(-rc));
    return verify ? tx_smd_check_extent(s, t, dst, err, errsz) : 0;
}

int tx_smd_verify_tensor(const struct tx_smd *s, const struct tx_smd_tensor *t, char *err,
                         size_t errsz)
{
    void *buf = malloc((size_t)t->extent_size);
    if (!buf)
        return tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", s->path);
    int rc = tx_smd_read_extent(s, t, buf, (size_t)t->extent_size, 1, err, errsz);
    free(buf);
    return rc;
}

int tx_smd_verify_all(const struct tx_smd *s, char *err, size_t errsz)
{
    for (size_t i = 0; i < s->hdr.tensor_count; i++) {
        int rc = tx_smd_verify_tensor(s, &s->t[i], err, errsz);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int tx_smd_dequant(const struct tx_smd_tensor *t, const void *buf, float *dst, char *err,
                   size_t errsz)
{
    const unsigned char *b = buf;
    const void *sc = t->scales_size ? b + (t->scales_offset - t->data_offset) : NULL;
    const void *ix = t->index_size ? b + (t->index_offset - t->data_offset) : NULL;
    return tx_weight_dequant(t->dtype, t->format, t->rows, t->cols, t->group_size, t->nnz_blocks, b,
                             sc, ix, dst, err, errsz);
}

/* ---- writer ------------------------------------------------------------- */

struct pending_sec {
    uint32_t kind;
    char *data;
    size_t len;
};

struct tx_smd_writer {
    char *path, *tmp;
    int fd;
    uint64_t pos; /* end of what has been written */
    struct tx_smd_section sec[16];
    uint32_t nsec;
    struct pending_sec pend[16];
    uint32_t npend;
    int have_plan;
    struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT];
    struct tx_smd_tensor *t;
    size_t nt, capt;
    struct txm_buf strings;
    uint64_t data_start, data_end;
    int in_tensor;
    uint64_t data_written;
    uint32_t crc;
    uint32_t flags;
    int failed;
    uint64_t wb_prev, wb_start; /* write-behind: the window being written back, the next */
};

const char *tx_smd_writer_temp_path(const struct tx_smd_writer *w)
{
    return w->tmp;
}

static int wpad(struct tx_smd_writer *w, uint64_t align)
{
    static const char zeros[TX_SMD_ALIGN];
    uint64_t to = txm_align(w->pos, align);
    if (to == w->pos)
        return 0;
    int rc = txm_write_all(w->fd, zeros, (size_t)(to - w->pos));
    if (rc == 0)
        w->pos = to;
    return rc;
}

/*
 * Write-behind: a package is written once, front to back, and may be larger
 * than the memory at hand (tests/export-memory.sh), so its pages must not
 * pile up dirty in the page cache. Every TX_SMD_WB_WINDOW bytes the window
 * just written is handed to writeback, and the one before it, written back
 * by then, is waited for and dropped from the cache: the writer keeps about
 * two windows of the file in memory whatever its size. Advisory: an error
 * here shows again at the final fsync.
 */
#define TX_SMD_WB_WINDOW (8u << 20)

static void write_behind(struct tx_smd_writer *w)
{
    if (w->pos - w->wb_start < TX_SMD_WB_WINDOW)
        return;
    (void)sync_file_range(w->fd, (off_t)w->wb_start, (off_t)(w->pos - w->wb_start),
                          SYNC_FILE_RANGE_WRITE);
    if (w->wb_prev < w->wb_start) {
        off_t off = (off_t)w->wb_prev, len = (off_t)(w->wb_start - w->wb_prev);
        (void)sync_file_range(w->fd, off, len,
                              SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                  SYNC_FILE_RANGE_WAIT_AFTER);
        (void)posix_fadvise(w->fd, off, len, POSIX_FADV_DONTNEED);
    }
    w->wb_prev = w->wb_start;
    w->wb_start = w->pos;
}

static int wput(struct tx_smd_writer *w, const void *p, size_t n)
{
    int rc = txm_write_all(w->fd, p, n);
    if (rc == 0) {
        w->pos += n;
        write_behind(w);
    }
    return rc;
}

/*
 * The package is written to a file without a name (O_TMPFILE in the output's
 * directory) and linked in by finish: a writer killed by SIGKILL leaves
 * nothing behind. Where the file system has no O_TMPFILE, a named temporary
 * "OUT.tmp.PID.N" is used, and temporaries of OUT left by processes that no
 * longer exist are removed when the next writer of OUT opens.
 */
/* The directory of path, malloc'd: "." without a slash, "/" for "/x". */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = 0;
    }
    return d;
}

static void remove_stale_temps(const char *path)
{
    char *dir = dir_of(path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    DIR *d = dir ? opendir(dir) : NULL;
    size_t bl = strlen(base);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        /* base ".tmp." PID "." N */
        if (strncmp(e->d_name, base, bl) || strncmp(e->d_name + bl, ".tmp.", 5))
            continue;
        char *end;
        long pid = strtol(e->d_name + bl + 5, &end, 10);
        if (pid <= 0 || *end != '.' || !end[1] || strspn(end + 1, "0123456789") != strlen(end + 1))
            continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* its writer may still be running */
        unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d)
        closedir(d);
    free(dir);
}

/* A file without a name in path's directory: its descriptor, or -errno */
static int open_unnamed(const char *path)
{
    char *dir = dir_of(path);
    int fd = dir ? tx_file_open_unnamed(dir) : -ENOMEM;
    free(dir);
    return fd;
}

int tx_smd_writer_open(const char *path, struct tx_smd_writer **out, char *err, size_t errsz)
{
    *out = NULL;
    struct tx_smd_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    w->fd = -1;
    w->path = strdup(path);
    if (!w->path) {
        tx_smd_writer_abort(w);
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    }
    int bad = tx_file_check_target(path, err, errsz);
    if (bad < 0) {
        tx_smd_writer_abort(w);
        return bad;
    }
    remove_stale_temps(path);
    w->fd = open_unnamed(path);
    if (w->fd < 0) {
        w->tmp = txm_temp_name(path);
        if (!w->tmp) {
            tx_smd_writer_abort(w);
            return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        }
        w->fd = tx_file_open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (w->fd < 0) {
        int e = -w->fd;
        w->fd = -1;
        int rc = tx_errbuf(err, errsz, tx_errno_code(e), "%s: cannot create (temporary %s): %s",
                           path, w->tmp, strerror(e));
        tx_smd_writer_abort(w);
        return rc;
    }
    /* the header page, rewritten by finish */
    static const char zeros[TX_SMD_ALIGN];
    int rc = wput(w, zeros, sizeof(zeros));
    if (rc < 0) {
        rc = tx_errbuf(err, errsz, tx_errno_code(rc), "%s: write: %s", w->tmp, strerror(-rc));
        tx_smd_writer_abort(w);
        return rc;
    }
    *out = w;
    return 0;
}

static int write_section(struct tx_smd_writer *w, uint32_t kind, uint32_t flags, const void *data,
                         size_t len, char *err, size_t errsz)
{
    if (w->nsec >= 16)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: too many sections", w->path);
    int rc = wpad(w, TX_SMD_ALIGN);
    struct tx_smd_section *sc = &w->sec[w->nsec];
    sc->kind = kind;
    sc->flags = flags;
    sc->offset = w->pos;
    sc->size = len;
    sc->crc = tx_crc32c(0, data, len);
    sc->rsvd = 0;
    if (rc == 0)
        rc = wput(w, data, len);
    if (rc < 0)
        return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: write: %s", w->tmp, strerror(-rc));
    w->nsec++;
    return 0;
}

static int have_section(const struct tx_smd_writer *w, uint32_t kind)
{
    for (uint32_t i = 0; i < w->nsec; i++)
        if (w->sec[i].kind == kind)
            return 1;
    for (uint32_t i = 0; i < w->npend; i++)
        if (w->pend[i].kind == kind)
            return 1;
    return 0;
}

int tx_smd_writer_section(struct tx_smd_writer *w, enum tx_smd_section_kind kind, const void *data,
                          size_t len, char *err, size_t errsz)
{
    if (kind != TX_SMD_SEC_CONFIG && kind != TX_SMD_SEC_TOKENIZER &&
        kind != TX_SMD_SEC_TOKENIZER_CONFIG && kind != TX_SMD_SEC_METADATA)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: section %s is written by the writer itself",
                         w->path, sec_name((uint32_t)kind));
    if (have_section(w, (uint32_t)kind))
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: section %s set twice", w->path,
                         sec_name((uint32_t)kind));
    if (w->in_tensor)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: section set inside a tensor", w->path);
    if (w->nt == 0)
        return write_section(w, (uint32_t)kind,
                             kind == TX_SMD_SEC_TOKENIZER_CONFIG || kind == TX_SMD_SEC_METADATA
                                 ? TX_SMD_SECF_OPTIONAL
                                 : 0,
                             data, len, err, errsz);
    /* after the data area has begun: keep it for finish */
    if (w->npend >= 16)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: too many sections", w->path);
    char *copy = malloc(len ? len : 1);
    if (!copy)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    memcpy(copy, data, len);
    w->pend[w->npend++] = (struct pending_sec){(uint32_t)kind, copy, len};
    return 0;
}

int tx_smd_writer_plan(struct tx_smd_writer *w,
                       const struct tx_smd_plan_entry plan[TX_SMD_LAYER_COUNT], char *err,
                       size_t errsz)
{
    for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++)
        if (plan[l].layer != l || plan[l].precision >= TX_SMD_PREC_COUNT ||
            (plan[l].flags & ~TX_SMD_PLANF_SPARSE) ||
            (plan[l].group_size && plan[l].group_size % TX8_SPARSE_BLOCK))
            return tx_errbuf(err, errsz, TX_EINVAL, "%s: plan entry %u invalid", w->path, l);
    memcpy(w->plan, plan, sizeof(w->plan));
    w->have_plan = 1;
    return 0;
}

int tx_smd_writer_begin(struct tx_smd_writer *w, const struct tx_smd_tensor_desc *d, char *err,
                        size_t errsz)
{
    if (w->failed)
        return tx_errbuf(err, errsz, TX_EIO, "%s: writer failed earlier", w->path);
    if (w->in_tensor)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s begun inside another", w->path,
                         d->name);
    size_t nl = d->name ? strlen(d->name) : 0;
    if (nl < 1 || nl > SMD_MAX_NAME)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor name empty or longer than %u", w->path,
                         SMD_MAX_NAME);
    if (d->ndim < 1 || d->ndim > TX_SMD_MAX_DIMS)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: rank %d unsupported", w->path,
                         d->name, d->ndim);
    if (w->nt == w->capt) {
        size_t c = w->capt ? 2 * w->capt : 256;
        struct tx_smd_tensor *n = realloc(w->t, c * sizeof(*n));
        if (!n)
            return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        w->t = n;
        w->capt = c;
    }
    struct tx_smd_tensor *t = &w->t[w->nt];
    memset(t, 0, sizeof(*t));
    uint64_t rows = 1;
    for (int i = 0; i < d->ndim; i++) {
        if (d->shape[i] == 0 || d->shape[i] > UINT32_MAX)
            return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: dim %d invalid", w->path,
                             d->name, i);
        t->shape[i] = d->shape[i];
        if (i + 1 < d->ndim)
            rows *= d->shape[i];
    }
    if (rows > UINT32_MAX)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: more than 2^32 rows", w->path,
                         d->name);
    t->ndim = (uint16_t)d->ndim;
    t->rows = (uint32_t)rows;
    t->cols = (uint32_t)d->shape[d->ndim - 1];
    t->dtype = (uint16_t)d->dtype;
    t->format = (uint16_t)d->format;
    t->layer_type = (uint16_t)d->layer_type;
    t->group_size = d->group_size;
    t->nnz_blocks = d->nnz_blocks;
    t->layer = d->layer;
    t->expert = d->expert;
    t->src_dtype = (uint16_t)d->src_dtype;
    uint64_t ds = tx_smd_data_size(t->dtype, t->format, t->rows, t->cols, t->nnz_blocks);
    uint64_t ss = tx_smd_scales_size(t->dtype, t->rows, t->cols, t->group_size);
    uint64_t is = tx_smd_index_size(t->format, t->rows, t->nnz_blocks);
    if (ds == UINT64_MAX || ss == UINT64_MAX || is == UINT64_MAX ||
        (t->dtype != TX8_DTYPE_F32 && t->dtype != TX8_DTYPE_F16 && t->dtype != TX8_DTYPE_BF16 &&
         t->dtype != TX8_DTYPE_I8 && t->dtype != TX8_DTYPE_F8_E4M3) ||
        (t->dtype == TX8_DTYPE_F8_E4M3 && t->format != TX8_WFMT_DENSE) ||
        t->layer_type >= TX_SMD_LAYER_COUNT ||
        (t->src_dtype >= TX8_DTYPE_COUNT && t->src_dtype != TX8_DTYPE_F8_E4M3) ||
        (t->format == TX8_WFMT_BLOCK_SPARSE && t->group_size % TX8_SPARSE_BLOCK))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: inconsistent dtype %u / format %u / group %u / nnz %u",
                         w->path, d->name, d->dtype, d->format, d->group_size, d->nnz_blocks);
    t->data_size = ds;
    t->scales_size = ss;
    t->index_size = is;
    t->name_offset = (uint32_t)w->strings.len;
    t->name_len = (uint32_t)nl;
    if (txm_buf_put(&w->strings, d->name, nl + 1) < 0)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    int rc = wpad(w, TX_SMD_ALIGN);
    if (rc < 0) {
        w->failed = 1;
        return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: write: %s", w->tmp, strerror(-rc));
    }
    if (w->nt == 0)
        w->data_start = w->pos;
    t->data_offset = w->pos;
    w->in_tensor = 1;
    w->data_written = 0;
    w->crc = 0;
    if (t->dtype == TX8_DTYPE_I8 || t->dtype == TX8_DTYPE_F8_E4M3)
        w->flags |= TX_SMD_F_QUANTIZED;
    if (t->format == TX8_WFMT_BLOCK_SPARSE)
        w->flags |= TX_SMD_F_SPARSE;
    return 0;
}

int tx_smd_writer_data(struct tx_smd_writer *w, const void *data, size_t len, char *err,
                       size_t errsz)
{
    if (!w->in_tensor)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: data outside a tensor", w->path);
    struct tx_smd_tensor *t = &w->t[w->nt];
    if (len > t->data_size - w->data_written)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: more data than its %" PRIu64 " bytes", w->path,
                         w->strings.p + t->name_offset, t->data_size);
    int rc = wput(w, data, len);
    if (rc < 0) {
        w->failed = 1;
        return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: write: %s", w->tmp, strerror(-rc));
    }
    w->crc = tx_crc32c(w->crc, data, len);
    w->data_written += len;
    return 0;
}

int tx_smd_writer_end(struct tx_smd_writer *w, const void *scales, size_t scales_len,
                      const void *index, size_t index_len, char *err, size_t errsz)
{
    if (!w->in_tensor)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: end outside a tensor", w->path);
    struct tx_smd_tensor *t = &w->t[w->nt];
    const char *N = w->strings.p + t->name_offset;
    if (w->data_written != t->data_size)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: %" PRIu64 " of %" PRIu64 " data bytes written", w->path, N,
                         w->data_written, t->data_size);
    if (scales_len != t->scales_size || index_len != t->index_size)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: scales/index of %zu/%zu bytes, expected %" PRIu64
                         "/%" PRIu64,
                         w->path, N, scales_len, index_len, t->scales_size, t->index_size);
    if (index_len) {
        char sub[TX_ERR_MAX];
        int rc = tx_smd_check_sparse_index(index, index_len, t->rows, t->cols, t->nnz_blocks, sub,
                                           sizeof(sub));
        if (rc < 0)
            return tx_errbuf(err, errsz, rc, "%s: tensor %s: %s", w->path, N, sub);
    }
    t->data_crc = w->crc;
    int rc = 0;
    if (scales_len) {
        rc = wpad(w, TX_SMD_SUB_ALIGN);
        t->scales_offset = w->pos;
        t->scales_crc = tx_crc32c(0, scales, scales_len);
        if (rc == 0)
            rc = wput(w, scales, scales_len);
    }
    if (rc == 0 && index_len) {
        rc = wpad(w, TX_SMD_SUB_ALIGN);
        t->index_offset = w->pos;
        t->index_crc = tx_crc32c(0, index, index_len);
        if (rc == 0)
            rc = wput(w, index, index_len);
    }
    if (rc == 0)
        rc = wpad(w, TX_SMD_ALIGN);
    if (rc < 0) {
        w->failed = 1;
        return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: write: %s", w->tmp, strerror(-rc));
    }
    t->extent_size = w->pos - t->data_offset;
    w->data_end = w->pos;
    w->in_tensor = 0;
    w->nt++;
    return 0;
}

static int cmp_wname(const void *a, const void *b, void *ctx)
{
    const char *s = ctx;
    return strcmp(s + ((const struct tx_smd_tensor *)a)->name_offset,
                  s + ((const struct tx_smd_tensor *)b)->name_offset);
}

int tx_smd_writer_finish(struct tx_smd_writer *w, char *err, size_t errsz)
{
    int rc;
    if (w->failed || w->in_tensor) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: %s", w->path,
                       w->failed ? "writer failed earlier" : "last tensor not ended");
        goto fail;
    }
    if (!w->have_plan || !have_section(w, TX_SMD_SEC_CONFIG) ||
        !have_section(w, TX_SMD_SEC_TOKENIZER)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: config, tokenizer and plan are required",
                       w->path);
        goto fail;
    }
    /* duplicate names */
    if (w->nt > 1) {
        struct tx_smd_tensor *copy = malloc(w->nt * sizeof(*copy));
        if (!copy) {
            rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            goto fail;
        }
        memcpy(copy, w->t, w->nt * sizeof(*copy));
        qsort_r(copy, w->nt, sizeof(*copy), cmp_wname, w->strings.p);
        for (size_t i = 1; i < w->nt; i++)
            if (strcmp(w->strings.p + copy[i - 1].name_offset,
                       w->strings.p + copy[i].name_offset) == 0) {
                rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s written twice", w->path,
                               w->strings.p + copy[i].name_offset);
                free(copy);
                goto fail;
            }
        free(copy);
    }
    for (uint32_t i = 0; i < w->npend; i++) {
        rc = write_section(w, w->pend[i].kind,
                           w->pend[i].kind == TX_SMD_SEC_TOKENIZER_CONFIG ||
                                   w->pend[i].kind == TX_SMD_SEC_METADATA
                               ? TX_SMD_SECF_OPTIONAL
                               : 0,
                           w->pend[i].data, w->pend[i].len, err, errsz);
        if (rc < 0)
            goto fail;
    }
    unsigned char planbuf[8 + sizeof(w->plan)];
    uint32_t cnt = TX_SMD_LAYER_COUNT, z = 0;
    memcpy(planbuf, &cnt, 4);
    memcpy(planbuf + 4, &z, 4);
    memcpy(planbuf + 8, w->plan, sizeof(w->plan));
    rc = write_section(w, TX_SMD_SEC_PLAN, 0, planbuf, sizeof(planbuf), err, errsz);
    if (rc == 0)
        rc = write_section(w, TX_SMD_SEC_TENSORS, 0, w->t ? (const void *)w->t : "",
                           w->nt * sizeof(*w->t), err, errsz);
    if (rc == 0)
        rc = write_section(w, TX_SMD_SEC_STRINGS, 0, w->strings.p ? w->strings.p : "",
                           w->strings.len, err, errsz);
    if (rc < 0)
        goto fail;
    unsigned char area[TX_SMD_ALIGN];
    memset(area, 0, sizeof(area));
    struct tx_smd_header h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, TX_SMD_MAGIC, 8);
    h.version_major = TX_SMD_VERSION_MAJOR;
    h.version_minor = TX_SMD_VERSION_MINOR;
    h.section_count = w->nsec;
    h.header_size = (uint32_t)(sizeof(h) + 32u * w->nsec);
    h.flags = w->flags;
    h.alignment = TX_SMD_ALIGN;
    h.tensor_count = (uint32_t)w->nt;
    h.file_size = w->pos;
    h.data_offset = w->nt ? w->data_start : TX_SMD_ALIGN;
    h.data_size = w->nt ? w->data_end - w->data_start : 0;
    h.tx8_if_version = TX8_IF_VERSION;
    h.sparse_block = TX8_SPARSE_BLOCK;
    memcpy(area, &h, sizeof(h));
    memcpy(area + sizeof(h), w->sec, 32u * w->nsec);
    h.header_crc = tx_crc32c(0, area, h.header_size);
    memcpy(area, &h, sizeof(h));
    rc = txm_pwrite_all(w->fd, area, sizeof(area), 0);
    if (rc == 0)
        rc = tx_file_fsync(w->fd);
    if (rc == 0 && !w->tmp) {
        /* the unnamed file gets a temporary name, then the rename below
         * replaces path atomically (linkat cannot replace a file) */
        w->tmp = txm_temp_name(w->path);
        if (!w->tmp)
            rc = -ENOMEM; /* errno domain until the tx_errbuf below */
        else
            rc = tx_file_link(w->fd, w->tmp);
        if (rc < 0) {
            rc = tx_errbuf(err, errsz, tx_errno_code(rc), "%s: cannot link the new package: %s",
                           w->path, strerror(-rc));
            free(w->tmp);
            w->tmp = NULL;
            goto fail;
        }
    }
    if (rc == 0) {
        int fd = w->fd;
        w->fd = -1;
        rc = tx_file_close(fd);
    }
    rc = txm_commit_temp(&w->tmp, w->path, rc, err, errsz);
    if (rc < 0)
        goto fail;
    tx_smd_writer_abort(w);
    return 0;
fail:
    tx_smd_writer_abort(w);
    return rc;
}

void tx_smd_writer_abort(struct tx_smd_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp)
        unlink(w->tmp);
    for (uint32_t i = 0; i < w->npend; i++)
        free(w->pend[i].data);
    free(w->t);
    txm_buf_free(&w->strings);
    free(w->path);
    free(w->tmp);
    free(w);
}
