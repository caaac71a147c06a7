/* SPDX-License-Identifier: MIT */
/* Safetensors reader, writer and sharded sets. */
#include <tx-internal/tx_model_internal.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include <tx-internal/tx_safetensors.h>

struct tx_st_file {
    char *path;
    struct txm_map map;
    size_t n;
    struct tx_tensor *t;             /* in offset order */
    const struct tx_tensor **sorted; /* by name */
    size_t nmeta;
    char **meta; /* key, value pairs */
};

const char *tx_st_path(const struct tx_st_file *f)
{
    return f->path;
}

size_t tx_st_count(const struct tx_st_file *f)
{
    return f->n;
}

const struct tx_tensor *tx_st_tensor(const struct tx_st_file *f, size_t i)
{
    return i < f->n ? &f->t[i] : NULL;
}

static const struct tx_tensor *find_sorted(const struct tx_tensor *const *v, size_t n,
                                           const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v[mid]->name, name);
        if (c == 0)
            return v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const struct tx_tensor *tx_st_find(const struct tx_st_file *f, const char *name)
{
    return find_sorted(f->sorted, f->n, name);
}

const char *tx_st_metadata(const struct tx_st_file *f, const char *key)
{
    for (size_t i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[2 * i], key) == 0)
            return f->meta[2 * i + 1];
    return NULL;
}

void tx_st_close(struct tx_st_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        free((char *)f->t[i].name);
    for (size_t i = 0; i < 2 * f->nmeta; i++)
        free(f->meta[i]);
    free(f->meta);
    free(f->t);
    free(f->sorted);
    txm_unmap(&f->map);
    free(f->path);
    free(f);
}

static int cmp_offset(const void *a, const void *b)
{
    const struct tx_tensor *x = a, *y = b;
    if (x->file_offset != y->file_offset)
        return x->file_offset < y->file_offset ? -1 : 1;
    if (x->nbytes != y->nbytes)
        return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    const struct tx_tensor *x = *(const struct tx_tensor *const *)a;
    const struct tx_tensor *y = *(const struct tx_tensor *const *)b;
    return strcmp(x->name, y->name);
}

/* A non-negative JSON integer. */
static int get_u64(struct json_object *o, uint64_t *v)
{
    if (!o || json_object_get_type(o) != json_type_int)
        return 0;
    int64_t x = json_object_get_int64(o);
    if (x < 0)
        return 0;
    *v = (uint64_t)x;
    return 1;
}

static int parse_entry(struct tx_st_file *f, const char *name, struct json_object *v,
                       uint64_t bufsize, uint64_t data_base, struct tx_tensor *t, char *err,
                       size_t errsz)
{
    const char *p = f->path;
    struct json_object *dt, *sh, *off;
    if (!json_object_is_type(v, json_type_object))
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: header entry is not a JSON object",
                         p, name);
    if (!json_object_object_get_ex(v, "dtype", &dt) || !json_object_is_type(dt, json_type_string))
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: missing or non-string \"dtype\"", p,
                         name);
    if (!json_object_object_get_ex(v, "shape", &sh) || !json_object_is_type(sh, json_type_array))
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: missing or non-array \"shape\"", p,
                         name);
    if (!json_object_object_get_ex(v, "data_offsets", &off) ||
        !json_object_is_type(off, json_type_array) || json_object_array_length(off) != 2)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: \"data_offsets\" must be an array [begin, end]", p, name);
    int et = txm_elem_from_name(json_object_get_string(dt));
    if (et < 0)
        return tx_errbuf(err, errsz, TX_ENOTSUP, "%s: tensor %s: unknown dtype \"%s\"", p, name,
                         json_object_get_string(dt));
    size_t nd = json_object_array_length(sh);
    if (nd > TX_TENSOR_MAX_DIMS)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: rank %zu exceeds %d", p, name, nd,
                         TX_TENSOR_MAX_DIMS);
    memset(t, 0, sizeof(*t));
    t->type = (enum tx_elem_type)et;
    t->ndim = (int)nd;
    uint64_t ne = 1;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        if (!get_u64(json_object_array_get_idx(sh, i), &d))
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: tensor %s: shape[%zu] is not a non-negative integer", p, name, i);
        t->shape[i] = d;
        if (!txm_mul(ne, d, &ne))
            return tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: shape overflows", p, name);
    }
    uint64_t begin, end, nbytes;
    if (!get_u64(json_object_array_get_idx(off, 0), &begin) ||
        !get_u64(json_object_array_get_idx(off, 1), &end))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: data_offsets are not non-negative integers", p, name);
    if (end < begin)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 "] end before begin",
                         p, name, begin, end);
    if (end > bufsize)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64
                         "] out of bounds (data buffer is %" PRIu64 " bytes)",
                         p, name, begin, end, bufsize);
    if (!txm_mul(ne, tx_elem_size(t->type), &nbytes) || nbytes != end - begin) {
        char sb[128];
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: tensor %s: %" PRIu64
                         " data bytes but shape %s x %s (%zu bytes) needs "
                         "%" PRIu64,
                         p, name, end - begin, tx_shape_str(t->shape, t->ndim, sb, sizeof(sb)),
                         tx_elem_name(t->type), tx_elem_size(t->type), nbytes);
    }
    t->nelem = ne;
    t->nbytes = nbytes;
    t->file = f->path;
    t->file_offset = data_base + begin;
    t->data = (const char *)f->map.addr + data_base + begin;
    t->flags = TX_TENSOR_MAPPED;
    t->name = strdup(name);
    if (!t->name)
        return tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", p);
    return 0;
}

int tx_st_open(const char *path, struct tx_st_file **out, char *err, size_t errsz)
{
    *out = NULL;
    struct tx_st_file *f = calloc(1, sizeof(*f));
    if (!f)
        return tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
    f->map.fd = -1;
    f->path = strdup(path);
    struct json_tokener *tok = NULL;
    struct json_object *root = NULL;
    int rc;
    if (!f->path) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    rc = txm_map_file(path, &f->map, err, errsz);
    if (rc < 0)
        goto fail;
    if (f->map.size < 8) {
        rc = tx_errbuf(err, errsz, TX_EINVAL,
                       "%s: truncated: %" PRIu64 " bytes, too short for the 8-byte header length",
                       path, f->map.size);
        goto fail;
    }
    uint64_t hlen;
    memcpy(&hlen, f->map.addr, 8);
    if (hlen < 2 || hlen > TX_ST_MAX_HEADER) {
        rc = tx_errbuf(err, errsz, TX_EINVAL,
                       "%s: header length %" PRIu64 " is not sane (2 .. %u bytes); not a "
                       "safetensors file?",
                       path, hlen, TX_ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > f->map.size - 8) {
        rc = tx_errbuf(err, errsz, TX_EINVAL,
                       "%s: truncated: header length %" PRIu64 " but only %" PRIu64
                       " bytes follow it",
                       path, hlen, f->map.size - 8);
        goto fail;
    }
    const char *hdr = (const char *)f->map.addr + 8;
    if (hdr[0] != '{') {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: header does not start with '{'", path);
        goto fail;
    }
    if (memchr(hdr, 0, (size_t)hlen)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: header contains a NUL byte", path);
        goto fail;
    }
    tok = json_tokener_new_ex(64);
    if (!tok) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    root = json_tokener_parse_ex(tok, hdr, (int)hlen);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    if (!root || jerr != json_tokener_success) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: header is not valid JSON: %s", path,
                       jerr == json_tokener_continue ? "unexpected end of header"
                                                     : json_tokener_error_desc(jerr));
        goto fail;
    }
    for (size_t i = json_tokener_get_parse_end(tok); i < hlen; i++)
        if (hdr[i] != ' ' && hdr[i] != '\t' && hdr[i] != '\n' && hdr[i] != '\r') {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: garbage after the header JSON at byte %zu",
                           path, 8 + i);
            goto fail;
        }
    if (!json_object_is_type(root, json_type_object)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: header JSON is not an object", path);
        goto fail;
    }
    size_t nkeys = (size_t)json_object_object_length(root);
    if (nkeys > TX_ST_MAX_TENSORS + 1) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: header: %zu entries exceeds the limit %u", path,
                       nkeys, TX_ST_MAX_TENSORS);
        goto fail;
    }
    f->t = calloc(nkeys ? nkeys : 1, sizeof(*f->t));
    f->sorted = calloc(nkeys ? nkeys : 1, sizeof(*f->sorted));
    if (!f->t || !f->sorted) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    uint64_t data_base = 8 + hlen, bufsize = f->map.size - data_base;
    json_object_object_foreach(root, key, val)
    {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_object_is_type(val, json_type_object)) {
                rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: __metadata__ is not an object", path);
                goto fail;
            }
            size_t nm = (size_t)json_object_object_length(val);
            f->meta = calloc(2 * nm + 1, sizeof(char *));
            if (!f->meta) {
                rc = tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
                goto fail;
            }
            json_object_object_foreach(val, mk, mv)
            {
                if (!json_object_is_type(mv, json_type_string)) {
                    rc = tx_errbuf(err, errsz, TX_EINVAL,
                                   "%s: __metadata__ value of \"%s\" is not a string", path, mk);
                    goto fail;
                }
                f->meta[2 * f->nmeta] = strdup(mk);
                f->meta[2 * f->nmeta + 1] = strdup(json_object_get_string(mv));
                f->nmeta++;
                if (!f->meta[2 * f->nmeta - 2] || !f->meta[2 * f->nmeta - 1]) {
                    rc = tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
                    goto fail;
                }
            }
            continue;
        }
        if (!key[0]) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: a tensor has an empty name", path);
            goto fail;
        }
        if (strlen(key) > TX_ST_MAX_NAME) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: tensor name of %zu bytes (\"%.40s...\") exceeds the limit %u", path,
                           strlen(key), key, TX_ST_MAX_NAME);
            goto fail;
        }
        rc = parse_entry(f, key, val, bufsize, data_base, &f->t[f->n], err, errsz);
        if (rc < 0)
            goto fail;
        f->n++;
    }
    qsort(f->t, f->n, sizeof(*f->t), cmp_offset);
    for (size_t i = 1; i < f->n; i++) {
        const struct tx_tensor *a = &f->t[i - 1], *b = &f->t[i];
        if (a->nbytes && b->nbytes && b->file_offset < a->file_offset + a->nbytes) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: tensors %s [%" PRIu64 ", %" PRIu64 ") and %s [%" PRIu64 ", %" PRIu64
                           ") overlap",
                           path, a->name, a->file_offset - data_base,
                           a->file_offset - data_base + a->nbytes, b->name,
                           b->file_offset - data_base, b->file_offset - data_base + b->nbytes);
            goto fail;
        }
    }
    for (size_t i = 0; i < f->n; i++)
        f->sorted[i] = &f->t[i];
    qsort(f->sorted, f->n, sizeof(*f->sorted), cmp_tensor_name);
    for (size_t i = 1; i < f->n; i++)
        if (strcmp(f->sorted[i - 1]->name, f->sorted[i]->name) == 0) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s appears twice", path,
                           f->sorted[i]->name);
            goto fail;
        }
    json_object_put(root);
    json_tokener_free(tok);
    *out = f;
    return 0;
fail:
    if (root)
        json_object_put(root);
    if (tok)
        json_tokener_free(tok);
    tx_st_close(f);
    return rc;
}

/* ---- writer ------------------------------------------------------------- */

struct tx_st_writer {
    char *path, *tmp;
    int fd;
    uint64_t total, written;
};

int tx_st_writer_open(const char *path, const struct tx_tensor_decl *decls, size_t n,
                      const char *const *meta, struct tx_st_writer **out, char *err, size_t errsz)
{
    *out = NULL;
    struct json_object *root = json_object_new_object();
    if (!root)
        return tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
    int rc = 0;
    if (meta && meta[0]) {
        struct json_object *m = json_object_new_object();
        for (size_t i = 0; meta[i] && meta[i + 1]; i += 2)
            json_object_object_add(m, meta[i], json_object_new_string(meta[i + 1]));
        json_object_object_add(root, "__metadata__", m);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tx_tensor_decl *d = &decls[i];
        if (!d->name || !d->name[0] || (unsigned)d->type >= TX_ELEM_COUNT || d->ndim < 0 ||
            d->ndim > TX_TENSOR_MAX_DIMS || strcmp(d->name, "__metadata__") == 0) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: invalid declaration of tensor %zu (%s)",
                           path, i, d->name ? d->name : "(null)");
            goto out;
        }
        if (json_object_object_get_ex(root, d->name, NULL)) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s declared twice", path, d->name);
            goto out;
        }
        uint64_t ne = 1, nb, end;
        for (int k = 0; k < d->ndim; k++)
            if (!txm_mul(ne, d->shape[k], &ne))
                ne = UINT64_MAX;
        if (ne == UINT64_MAX || !txm_mul(ne, tx_elem_size(d->type), &nb) ||
            !txm_add(off, nb, &end) || end > (uint64_t)INT64_MAX) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: tensor %s: size overflows", path, d->name);
            goto out;
        }
        struct json_object *e = json_object_new_object(), *sh = json_object_new_array(),
                           *of = json_object_new_array();
        for (int k = 0; k < d->ndim; k++)
            json_object_array_add(sh, json_object_new_int64((int64_t)d->shape[k]));
        json_object_array_add(of, json_object_new_int64((int64_t)off));
        json_object_array_add(of, json_object_new_int64((int64_t)(off + nb)));
        json_object_object_add(e, "dtype", json_object_new_string(tx_elem_name(d->type)));
        json_object_object_add(e, "shape", sh);
        json_object_object_add(e, "data_offsets", of);
        json_object_object_add(root, d->name, e);
        off += nb;
    }
    const char *js = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
    size_t jl = strlen(js);
    uint64_t hlen = txm_align(jl, 8);
    rc = tx_file_check_target(path, err, errsz);
    if (rc < 0)
        goto out;
    struct tx_st_writer *w = calloc(1, sizeof(*w));
    if (!w) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    w->path = strdup(path);
    w->tmp = txm_temp_name(path);
    w->fd = -1;
    w->total = off;
    if (!w->path || !w->tmp) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    w->fd = tx_file_open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        rc = w->fd;
        w->fd = -1;
        rc = tx_errbuf(err, errsz, tx_errno_code(rc), "%s: %s", w->tmp, strerror(-rc));
        goto fail;
    }
    char *hb = malloc(8 + hlen);
    if (!hb) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    memcpy(hb, &hlen, 8);
    memcpy(hb + 8, js, jl);
    memset(hb + 8 + jl, ' ', hlen - jl);
    rc = txm_write_all(w->fd, hb, 8 + hlen);
    free(hb);
    if (rc < 0) {
        rc = tx_errbuf(err, errsz, tx_errno_code(rc), "%s: write: %s", w->tmp, strerror(-rc));
        goto fail;
    }
    *out = w;
    goto out;
fail:
    tx_st_writer_abort(w);
out:
    json_object_put(root);
    return rc;
}

int tx_st_writer_write(struct tx_st_writer *w, const void *data, size_t len, char *err,
                       size_t errsz)
{
    if (len > w->total - w->written)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: more data written than declared", w->path);
    int rc = txm_write_all(w->fd, data, len);
    if (rc < 0)
        return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: write: %s", w->tmp, strerror(-rc));
    w->written += len;
    return 0;
}

int tx_st_writer_finish(struct tx_st_writer *w, char *err, size_t errsz)
{
    int rc = 0;
    if (w->written != w->total)
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: %" PRIu64 " of %" PRIu64 " data bytes written",
                       w->path, w->written, w->total);
    else if ((rc = tx_file_close(w->fd)) < 0) {
        w->fd = -1;
        rc = tx_errbuf(err, errsz, tx_errno_code(rc), "%s: close: %s", w->tmp, strerror(-rc));
    } else {
        w->fd = -1;
        rc = tx_file_check_target(w->path, err, errsz);
        if (rc == 0 && (rc = tx_file_rename(w->tmp, w->path)) < 0) {
            rc = tx_errbuf(err, errsz, tx_errno_code(rc), "%s: rename: %s", w->path, strerror(-rc));
        }
    }
    if (rc < 0) {
        tx_st_writer_abort(w);
        return rc;
    }
    free(w->path);
    free(w->tmp);
    free(w);
    return 0;
}

void tx_st_writer_abort(struct tx_st_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp)
        unlink(w->tmp);
    free(w->path);
    free(w->tmp);
    free(w);
}

/* ---- sets --------------------------------------------------------------- */

struct tx_st_set {
    size_t nfiles;
    struct tx_st_file **files;
    size_t n;
    const struct tx_tensor **t;      /* file order, then offset order */
    const struct tx_tensor **sorted; /* by name */
};

size_t tx_st_set_count(const struct tx_st_set *s)
{
    return s->n;
}

const struct tx_tensor *tx_st_set_tensor(const struct tx_st_set *s, size_t i)
{
    return i < s->n ? s->t[i] : NULL;
}

const struct tx_tensor *tx_st_set_find(const struct tx_st_set *s, const char *name)
{
    return find_sorted(s->sorted, s->n, name);
}

size_t tx_st_set_nfiles(const struct tx_st_set *s)
{
    return s->nfiles;
}

const char *tx_st_set_file(const struct tx_st_set *s, size_t i)
{
    return i < s->nfiles ? tx_st_path(s->files[i]) : NULL;
}

void tx_st_set_close(struct tx_st_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nfiles; i++)
        tx_st_close(s->files[i]);
    free(s->files);
    free(s->t);
    free(s->sorted);
    free(s);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int valid_shard_name(const char *s)
{
    return s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
           strlen(s) <= TX_ST_MAX_SHARD_NAME;
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* File names the checkpoint consists of (malloc'd list of malloc'd names). */
static int list_files(const char *dir, struct json_object **index_out, char ***names,
                      size_t *nnames, char *err, size_t errsz)
{
    *names = NULL;
    *nnames = 0;
    *index_out = NULL;
    char *ip = txm_path_join(dir, "model.safetensors.index.json");
    if (!ip)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    if (txm_file_exists(ip)) {
        char *txt;
        size_t len;
        int rc = txm_read_file(ip, 256u << 20, &txt, &len, err, errsz);
        if (rc < 0) {
            free(ip);
            return rc;
        }
        struct json_tokener *tok = json_tokener_new();
        struct json_object *root = tok ? json_tokener_parse_ex(tok, txt, (int)len) : NULL;
        enum json_tokener_error je = tok ? json_tokener_get_error(tok) : json_tokener_error_depth;
        if (tok)
            json_tokener_free(tok);
        free(txt);
        struct json_object *wm;
        if (!root || je != json_tokener_success) {
            if (root)
                json_object_put(root);
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: not valid JSON: %s", ip,
                           json_tokener_error_desc(je));
            free(ip);
            return rc;
        }
        if (!json_object_is_type(root, json_type_object) ||
            !json_object_object_get_ex(root, "weight_map", &wm) ||
            !json_object_is_type(wm, json_type_object)) {
            json_object_put(root);
            rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: no \"weight_map\" object", ip);
            free(ip);
            return rc;
        }
        size_t cap = (size_t)json_object_object_length(wm) + 1;
        if (cap > TX_ST_MAX_TENSORS + 1) {
            rc =
                tx_errbuf(err, errsz, TX_EINVAL, "%s: weight_map: %zu entries exceeds the limit %u",
                          ip, cap - 1, TX_ST_MAX_TENSORS);
            json_object_put(root);
            free(ip);
            return rc;
        }
        char **v = calloc(cap, sizeof(char *));
        size_t n = 0;
        if (!v) {
            json_object_put(root);
            free(ip);
            return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        }
        json_object_object_foreach(wm, k, fv)
        {
            if (!json_object_is_type(fv, json_type_string) ||
                !valid_shard_name(json_object_get_string(fv))) {
                rc = tx_errbuf(err, errsz, TX_EINVAL,
                               "%s: weight_map entry of tensor %.200s is not a file name in the "
                               "checkpoint directory (at most %u bytes, no '/')",
                               ip, k, TX_ST_MAX_SHARD_NAME);
                for (size_t i = 0; i < n; i++)
                    free(v[i]);
                free(v);
                json_object_put(root);
                free(ip);
                return rc;
            }
            const char *fn = json_object_get_string(fv);
            size_t j;
            for (j = 0; j < n; j++)
                if (strcmp(v[j], fn) == 0)
                    break;
            if (j == n && n == TX_ST_MAX_SHARDS) {
                /* also keeps this search linear in the entries */
                rc = tx_errbuf(err, errsz, TX_EINVAL,
                               "%s: weight_map names more than %u shard files (the limit)", ip,
                               TX_ST_MAX_SHARDS);
                for (size_t i = 0; i < n; i++)
                    free(v[i]);
                free(v);
                json_object_put(root);
                free(ip);
                return rc;
            }
            if (j == n && !(v[n++] = strdup(fn))) {
                free_names(v, n);
                json_object_put(root);
                free(ip);
                return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            }
        }
        qsort(v, n, sizeof(char *), cmp_str);
        *names = v;
        *nnames = n;
        *index_out = root;
        free(ip);
        return 0;
    }
    free(ip);
    char *single = txm_path_join(dir, "model.safetensors");
    if (single && txm_file_exists(single)) {
        free(single);
        char **v = calloc(1, sizeof(char *));
        if (!v)
            return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        v[0] = strdup("model.safetensors");
        *names = v;
        *nnames = 1;
        return 0;
    }
    free(single);
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        return tx_errbuf(err, errsz, tx_errno_code(e), "%s: %s", dir, strerror(e));
    }
    /* bounded like the index: at most TX_ST_MAX_SHARDS files of names of
     * at most TX_ST_MAX_SHARD_NAME bytes, so the listing stays small */
    size_t n = 0, cap = 16;
    char **v = calloc(cap, sizeof(char *));
    struct dirent *de;
    int rc = v ? 0 : tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    while (!rc && (de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l <= 12 || strcmp(de->d_name + l - 12, ".safetensors") != 0)
            continue;
        if (l > TX_ST_MAX_SHARD_NAME) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: shard file name %.40s... is %zu bytes, more than the limit %u", dir,
                           de->d_name, l, TX_ST_MAX_SHARD_NAME);
            break;
        }
        if (n == TX_ST_MAX_SHARDS) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: more than %u *.safetensors shard files (the limit)", dir,
                           TX_ST_MAX_SHARDS);
            break;
        }
        if (n + 1 >= cap) {
            char **nv = realloc(v, 2 * cap * sizeof(char *));
            if (!nv) {
                rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
                break;
            }
            v = nv;
            cap *= 2;
        }
        if (!(v[n] = strdup(de->d_name))) {
            rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            break;
        }
        n++;
    }
    closedir(d);
    if (rc < 0) {
        if (v)
            free_names(v, n);
        return rc;
    }
    if (n == 0) {
        free(v);
        return tx_errbuf(err, errsz, TX_ENOENT,
                         "%s: no model.safetensors.index.json, model.safetensors or *.safetensors",
                         dir);
    }
    qsort(v, n, sizeof(char *), cmp_str);
    *names = v;
    *nnames = n;
    return 0;
}

int tx_st_set_open(const char *dir, struct tx_st_set **out, char *err, size_t errsz)
{
    *out = NULL;
    struct json_object *index = NULL;
    char **names = NULL;
    size_t nn = 0;
    int rc = list_files(dir, &index, &names, &nn, err, errsz);
    if (rc < 0)
        return rc;
    struct tx_st_set *s = calloc(1, sizeof(*s));
    if (!s || !(s->files = calloc(nn, sizeof(*s->files)))) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto fail;
    }
    size_t total = 0;
    for (size_t i = 0; i < nn; i++) {
        char *p = txm_path_join(dir, names[i]);
        if (!p) {
            rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            goto fail;
        }
        if (index && !txm_file_exists(p)) {
            rc = tx_errbuf(err, errsz, TX_ENOENT,
                           "%s: listed in model.safetensors.index.json but missing", p);
            free(p);
            goto fail;
        }
        rc = tx_st_open(p, &s->files[s->nfiles], err, errsz);
        free(p);
        if (rc < 0)
            goto fail;
        total += tx_st_count(s->files[s->nfiles]);
        s->nfiles++;
        if (total > TX_ST_MAX_TENSORS) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "%s: the safetensors files hold more than %u tensors (the limit)", dir,
                           TX_ST_MAX_TENSORS);
            goto fail;
        }
    }
    s->t = calloc(total ? total : 1, sizeof(*s->t));
    s->sorted = calloc(total ? total : 1, sizeof(*s->sorted));
    if (!s->t || !s->sorted) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < s->nfiles; i++)
        for (size_t k = 0; k < tx_st_count(s->files[i]); k++)
            s->t[s->n++] = tx_st_tensor(s->files[i], k);
    memcpy(s->sorted, s->t, s->n * sizeof(*s->t));
    qsort(s->sorted, s->n, sizeof(*s->sorted), cmp_tensor_name);
    for (size_t i = 1; i < s->n; i++)
        if (strcmp(s->sorted[i - 1]->name, s->sorted[i]->name) == 0) {
            rc = tx_errbuf(err, errsz, TX_EINVAL, "tensor %s is in both %s and %s",
                           s->sorted[i]->name, s->sorted[i - 1]->file, s->sorted[i]->file);
            goto fail;
        }
    if (index) {
        struct json_object *wm;
        json_object_object_get_ex(index, "weight_map", &wm);
        json_object_object_foreach(wm, k, fv)
        {
            const struct tx_tensor *t = tx_st_set_find(s, k);
            const char *fn = json_object_get_string(fv);
            size_t fl = strlen(fn);
            size_t tl = t ? strlen(t->file) : 0;
            if (!t || tl < fl || strcmp(t->file + tl - fl, fn) != 0 ||
                (tl > fl && t->file[tl - fl - 1] != '/')) {
                rc = tx_errbuf(err, errsz, TX_ENOENT,
                               "%s/model.safetensors.index.json: tensor %s is mapped to %s but is "
                               "not in that file",
                               dir, k, fn);
                goto fail;
            }
        }
        /* and the other way: a tensor the index does not map is one that
         * transformers would not load (e.g. a weight's _scale_inv
         * companion left out of a re-sharded FP8 checkpoint) */
        for (size_t i = 0; i < s->n; i++)
            if (!json_object_object_get_ex(wm, s->sorted[i]->name, NULL)) {
                rc = tx_errbuf(err, errsz, TX_EINVAL,
                               "%s/model.safetensors.index.json: tensor %s of %s is not in the "
                               "weight_map",
                               dir, s->sorted[i]->name, s->sorted[i]->file);
                goto fail;
            }
    }
    for (size_t i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    if (index)
        json_object_put(index);
    *out = s;
    return 0;
fail:
    for (size_t i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    if (index)
        json_object_put(index);
    tx_st_set_close(s);
    return rc;
}

int tx_st_write_index(const char *path, const char *const *names, const char *const *files,
                      size_t n, uint64_t total_size, char *err, size_t errsz)
{
    struct json_object *root = json_object_new_object(), *md = json_object_new_object(),
                       *wm = json_object_new_object();
    json_object_object_add(md, "total_size", json_object_new_int64((int64_t)total_size));
    json_object_object_add(root, "metadata", md);
    for (size_t i = 0; i < n; i++)
        json_object_object_add(wm, names[i], json_object_new_string(files[i]));
    json_object_object_add(root, "weight_map", wm);
    const char *js = json_object_to_json_string_ext(
        root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    int rc = txm_write_text(path, js, "\n", err, errsz);
    json_object_put(root);
    return rc;
}
