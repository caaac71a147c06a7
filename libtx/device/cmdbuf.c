/* SPDX-License-Identifier: MIT */
/*
 * libtx device layer: command-buffer builder and the typed command helpers.
 *
 * A builder holds the command bytes (struct tx8_cmd_*, absolute device
 * addresses) and the set of BOs (by handle) the job may touch with their
 * access. tx_submit() copies both into a job (device.c).
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_dtype.h>

#include <tx-internal/tx_errors.h>
#include "device/device_internal.h"

/* The largest command tx_cmdbuf_raw() accepts (every opcode's is < 256). */
#define MAX_RAW_CMD 4096

struct cb_use {
    uint64_t bo; /* handle */
    uint32_t access;
};

struct tx_cmdbuf {
    struct tx_obj obj;
    struct tx_device *dev; /* holds a reference */
    pthread_mutex_t lock;
    uint8_t *buf;
    size_t len, cap;
    unsigned ncmds;
    struct cb_use *uses;
    unsigned nuses, capuses;
    char **names; /* profiling: names[i] of command i (NULL: unnamed) */
    uint64_t prof_bo, prof_off, prof_size; /* tx_cmdbuf_profile (prof_bo 0: none) */
    unsigned capnames;
    bool dead;
    bool linked;                   /* in the device's list (d->lock) */
    struct tx_cmdbuf *prev, *next; /* the device's list */
};

static void names_clear(struct tx_cmdbuf *cb)
{
    for (unsigned i = 0; i < cb->capnames; i++) {
        free(cb->names[i]);
        cb->names[i] = NULL;
    }
}

static void cmdbuf_destroy(struct tx_obj *o)
{
    struct tx_cmdbuf *cb = (struct tx_cmdbuf *)o;
    struct tx_device *d = cb->dev;

    pthread_mutex_destroy(&cb->lock);
    free(cb->buf);
    free(cb->uses);
    names_clear(cb);
    free(cb->names);
    free(cb);
    tx_obj_put(&d->obj);
}

static void cb_unlink(struct tx_device *d, struct tx_cmdbuf *cb)
{
    if (!cb->linked)
        return;
    cb->linked = false;
    if (cb->prev)
        cb->prev->next = cb->next;
    else if (d->cmdbufs == cb)
        d->cmdbufs = cb->next;
    if (cb->next)
        cb->next->prev = cb->prev;
    cb->prev = cb->next = NULL;
}

void txd_cmdbuf_close_all(struct tx_device *d)
{
    struct tx_cmdbuf *all = NULL, *cb, *next;

    /* Lock order: d->lock, then a builder's lock (nothing takes them the
     * other way round). */
    pthread_mutex_lock(&d->lock);
    while ((cb = d->cmdbufs)) {
        cb_unlink(d, cb);
        pthread_mutex_lock(&cb->lock);
        cb->dead = true;
        pthread_mutex_unlock(&cb->lock);
        tx_obj_get(&cb->obj); /* a concurrent destroy must not free it here */
        cb->next = all;
        all = cb;
    }
    pthread_mutex_unlock(&d->lock);
    for (cb = all; cb; cb = next) {
        uint64_t h;

        next = cb->next;
        pthread_mutex_lock(&cb->lock);
        h = cb->obj.handle;
        pthread_mutex_unlock(&cb->lock);
        if (h)
            tx_handle_remove(h, TX_OBJ_CMDBUF);
        tx_obj_put(&cb->obj);
    }
}

/* The live builder of a handle, locked, with a reference. */
static struct tx_cmdbuf *cb_enter(tx_cmdbuf_t *h, const char *fn, int *rc)
{
    struct tx_cmdbuf *cb = (struct tx_cmdbuf *)tx_handle_get(TX_HANDLE(h), TX_OBJ_CMDBUF);

    if (!cb) {
        *rc = tx_error(TX_EINVAL, "%s: %s command buffer", fn,
                       h ? "invalid (destroyed, its device closed, or not a command buffer)"
                         : "NULL");
        return NULL;
    }
    pthread_mutex_lock(&cb->lock);
    if (cb->dead) {
        pthread_mutex_unlock(&cb->lock);
        tx_obj_put(&cb->obj);
        *rc = tx_error(TX_EINVAL, "%s: the command buffer's device was closed", fn);
        return NULL;
    }
    return cb;
}

static void cb_leave(struct tx_cmdbuf *cb)
{
    pthread_mutex_unlock(&cb->lock);
    tx_obj_put(&cb->obj);
}

TX_API int tx_cmdbuf_create(tx_device_t *h, tx_cmdbuf_t **out)
{
    struct tx_device *d;
    struct tx_cmdbuf *cb;
    uint64_t handle;
    int rc;

    if (!out)
        return tx_error(TX_EINVAL, "tx_cmdbuf_create: NULL result pointer");
    *out = NULL;
    rc = txd_enter(h, &d, "tx_cmdbuf_create");
    if (rc < 0)
        return rc;
    cb = calloc(1, sizeof(*cb));
    if (!cb) {
        txd_leave(d);
        return tx_error(TX_ENOMEM, "tx_cmdbuf_create: out of memory");
    }
    pthread_mutex_init(&cb->lock, NULL);
    cb->dev = d;
    tx_obj_get(&d->obj);
    handle = tx_handle_add(&cb->obj, TX_OBJ_CMDBUF, cmdbuf_destroy);
    if (!handle) {
        cmdbuf_destroy(&cb->obj);
        txd_leave(d);
        return tx_error(TX_ENOMEM, "tx_cmdbuf_create: out of memory");
    }
    pthread_mutex_lock(&d->lock);
    cb->next = d->cmdbufs;
    if (d->cmdbufs)
        d->cmdbufs->prev = cb;
    d->cmdbufs = cb;
    cb->linked = true;
    pthread_mutex_unlock(&d->lock);
    tx_obj_put(&cb->obj);
    txd_leave(d);
    *out = TX_PTR(tx_cmdbuf_t, handle);
    return TX_OK;
}

TX_API int tx_cmdbuf_destroy(tx_cmdbuf_t *h)
{
    struct tx_cmdbuf *cb;
    struct tx_device *d;
    int rc = TX_OK;

    cb = cb_enter(h, "tx_cmdbuf_destroy", &rc);
    if (!cb)
        return rc;
    d = cb->dev;
    cb->dead = true;
    pthread_mutex_unlock(&cb->lock);
    pthread_mutex_lock(&d->lock);
    cb_unlink(d, cb);
    pthread_mutex_unlock(&d->lock);
    tx_handle_remove(TX_HANDLE(h), TX_OBJ_CMDBUF);
    tx_obj_put(&cb->obj);
    return TX_OK;
}

TX_API int tx_cmdbuf_reset(tx_cmdbuf_t *h)
{
    struct tx_cmdbuf *cb;
    int rc = TX_OK;

    cb = cb_enter(h, "tx_cmdbuf_reset", &rc);
    if (!cb)
        return rc;
    cb->len = 0;
    cb->ncmds = 0;
    cb->nuses = 0;
    cb->prof_bo = 0;
    names_clear(cb);
    cb_leave(cb);
    return TX_OK;
}

TX_API int tx_cmdbuf_size(tx_cmdbuf_t *h, size_t *bytes, unsigned *commands)
{
    struct tx_cmdbuf *cb;
    int rc = TX_OK;

    cb = cb_enter(h, "tx_cmdbuf_size", &rc);
    if (!cb)
        return rc;
    if (bytes)
        *bytes = cb->len;
    if (commands)
        *commands = cb->ncmds;
    cb_leave(cb);
    return TX_OK;
}

int txd_cmdbuf_snapshot(tx_cmdbuf_t *h, struct tx_device *d, uint8_t **bytes, size_t *len,
                        uint64_t **bo_handles, uint32_t **access, unsigned *nuses)
{
    struct tx_cmdbuf *cb;
    int rc = TX_OK;

    cb = cb_enter(h, "tx_submit", &rc);
    if (!cb)
        return rc;
    if (cb->dev != d) {
        cb_leave(cb);
        return tx_error(TX_EINVAL, "tx_submit: the command buffer belongs to another device");
    }
    if (cb->len == 0) {
        cb_leave(cb);
        return tx_error(TX_EINVAL, "tx_submit: the command buffer is empty");
    }
    *bytes = malloc(cb->len);
    *bo_handles = calloc(cb->nuses + 1, sizeof(**bo_handles));
    *access = calloc(cb->nuses + 1, sizeof(**access));
    if (!*bytes || !*bo_handles || !*access) {
        free(*bytes);
        free(*bo_handles);
        free(*access);
        *bytes = NULL;
        *bo_handles = NULL;
        *access = NULL;
        cb_leave(cb);
        return tx_error(TX_ENOMEM, "tx_submit: out of memory");
    }
    memcpy(*bytes, cb->buf, cb->len);
    *len = cb->len;
    for (unsigned i = 0; i < cb->nuses; i++) {
        (*bo_handles)[i] = cb->uses[i].bo;
        (*access)[i] = cb->uses[i].access;
    }
    *nuses = cb->nuses;
    cb_leave(cb);
    return TX_OK;
}

int txd_cmdbuf_copy_out(tx_cmdbuf_t *h, void *dst, size_t cap, size_t *len, struct tx_bo_use **uses,
                        unsigned *nuses)
{
    struct tx_cmdbuf *cb;
    int rc = TX_OK;

    *uses = NULL;
    *nuses = 0;
    cb = cb_enter(h, "tx_cmdbuf_copy_out", &rc);
    if (!cb)
        return rc;
    if (cb->len > cap) {
        cb_leave(cb);
        return tx_error(TX_EINVAL, "tx_cmdbuf_copy_out: %zu bytes of commands, room for %zu",
                        cb->len, cap);
    }
    *uses = calloc(cb->nuses ? cb->nuses : 1, sizeof(**uses));
    if (!*uses) {
        cb_leave(cb);
        return tx_error(TX_ENOMEM, "tx_cmdbuf_copy_out: out of memory");
    }
    memcpy(dst, cb->buf, cb->len);
    *len = cb->len;
    for (unsigned i = 0; i < cb->nuses; i++) {
        (*uses)[i].bo = TX_PTR(tx_bo_t, cb->uses[i].bo);
        (*uses)[i].access = cb->uses[i].access;
    }
    *nuses = cb->nuses;
    cb_leave(cb);
    return TX_OK;
}

int txd_cmdbuf_name(tx_cmdbuf_t *h, const char *name)
{
    struct tx_cmdbuf *cb;
    int rc = TX_OK;

    cb = cb_enter(h, "tx_cmdbuf_name", &rc);
    if (!cb)
        return rc;
    if (cb->ncmds >= cb->capnames) {
        unsigned ncap = cb->capnames ? cb->capnames : 64;
        while (ncap <= cb->ncmds)
            ncap *= 2;
        char **n = realloc(cb->names, ncap * sizeof(*n));
        if (!n) {
            cb_leave(cb);
            return tx_error(TX_ENOMEM, "tx_cmdbuf_name: out of memory");
        }
        memset(n + cb->capnames, 0, (ncap - cb->capnames) * sizeof(*n));
        cb->names = n;
        cb->capnames = ncap;
    }
    free(cb->names[cb->ncmds]);
    cb->names[cb->ncmds] = strdup(name);
    cb_leave(cb);
    return TX_OK;
}

int txd_cmdbuf_take_names(tx_cmdbuf_t *h, char ***names, unsigned *n)
{
    struct tx_cmdbuf *cb;
    int rc = TX_OK;

    *names = NULL;
    *n = 0;
    cb = cb_enter(h, "tx_submit", &rc);
    if (!cb)
        return rc;
    unsigned k = cb->ncmds < cb->capnames ? cb->ncmds : cb->capnames;
    if (k) {
        *names = calloc(k, sizeof(**names));
        if (*names) {
            memcpy(*names, cb->names, k * sizeof(**names));
            memset(cb->names, 0, k * sizeof(**names));
            *n = k;
        }
    }
    cb_leave(cb);
    return TX_OK;
}

/* Record a use (cb locked). */
static int cb_add_use(struct tx_cmdbuf *cb, uint64_t bo, uint32_t access)
{
    for (unsigned i = 0; i < cb->nuses; i++)
        if (cb->uses[i].bo == bo) {
            cb->uses[i].access |= access;
            return 0;
        }
    if (cb->nuses == cb->capuses) {
        unsigned ncap = cb->capuses ? cb->capuses * 2 : 16;
        struct cb_use *n = realloc(cb->uses, ncap * sizeof(*n));

        if (!n)
            return TX_ENOMEM;
        cb->uses = n;
        cb->capuses = ncap;
    }
    cb->uses[cb->nuses].bo = bo;
    cb->uses[cb->nuses].access = access;
    cb->nuses++;
    return 0;
}

static int cb_append(struct tx_cmdbuf *cb, const void *cmd, size_t size)
{
    if (cb->len + size > cb->cap) {
        size_t ncap = cb->cap ? cb->cap : 1024;
        uint8_t *n;

        while (ncap < cb->len + size)
            ncap *= 2;
        n = realloc(cb->buf, ncap);
        if (!n)
            return TX_ENOMEM;
        cb->buf = n;
        cb->cap = ncap;
    }
    memcpy(cb->buf + cb->len, cmd, size);
    cb->len += size;
    cb->ncmds++;
    return 0;
}

TX_API int tx_cmdbuf_use(tx_cmdbuf_t *h, tx_bo_t *boh, uint32_t access)
{
    struct tx_cmdbuf *cb;
    struct tx_bo *bo;
    int rc = TX_OK;

    if (!access || (access & ~(uint32_t)TX_ACCESS_RW))
        return tx_error(TX_EINVAL, "tx_cmdbuf_use: bad access 0x%x (TX_ACCESS_READ/WRITE)", access);
    bo = txd_bo_get(boh, "tx_cmdbuf_use", "bo", &rc);
    if (!bo)
        return rc;
    cb = cb_enter(h, "tx_cmdbuf_use", &rc);
    if (cb) {
        if (bo->dev != cb->dev)
            rc = tx_error(TX_EINVAL, "tx_cmdbuf_use: the BO belongs to another device");
        else if (cb_add_use(cb, TX_HANDLE(boh), access) < 0)
            rc = tx_error(TX_ENOMEM, "tx_cmdbuf_use: out of memory");
        cb_leave(cb);
    }
    tx_obj_put(&bo->obj);
    return rc;
}

TX_API int tx_cmdbuf_profile(tx_cmdbuf_t *h, tx_bo_t *boh, uint64_t offset, uint64_t size)
{
    struct tx_cmdbuf *cb;
    struct tx_bo *bo;
    int rc = TX_OK;

    if (offset % 8 || size < sizeof(struct tx8_prof_header))
        return tx_error(TX_EINVAL,
                        "tx_cmdbuf_profile: offset %" PRIu64 " must be 8-aligned and size %" PRIu64
                        " at least %zu",
                        offset, size, sizeof(struct tx8_prof_header));
    bo = txd_bo_get(boh, "tx_cmdbuf_profile", "bo", &rc);
    if (!bo)
        return rc;
    if (offset > bo->b.size || size > bo->b.size - offset) {
        tx_obj_put(&bo->obj);
        return tx_error(TX_EINVAL,
                        "tx_cmdbuf_profile: [%" PRIu64 ", +%" PRIu64 ") is not inside the BO (%" PRIu64
                        " bytes)",
                        offset, size, bo->b.size);
    }
    cb = cb_enter(h, "tx_cmdbuf_profile", &rc);
    if (cb) {
        if (bo->dev != cb->dev)
            rc = tx_error(TX_EINVAL, "tx_cmdbuf_profile: the BO belongs to another device");
        else if (cb_add_use(cb, TX_HANDLE(boh), TX_ACCESS_WRITE) < 0)
            rc = tx_error(TX_ENOMEM, "tx_cmdbuf_profile: out of memory");
        else {
            cb->prof_bo = TX_HANDLE(boh);
            cb->prof_off = offset;
            cb->prof_size = size;
        }
        cb_leave(cb);
    }
    tx_obj_put(&bo->obj);
    return rc;
}

int txd_cmdbuf_prof(tx_cmdbuf_t *h, uint64_t *bo, uint64_t *off, uint64_t *size)
{
    struct tx_cmdbuf *cb;
    int rc = TX_OK;

    cb = cb_enter(h, "tx_submit", &rc);
    if (!cb)
        return rc;
    *bo = cb->prof_bo;
    *off = cb->prof_off;
    *size = cb->prof_size;
    cb_leave(cb);
    return TX_OK;
}

TX_API int tx_cmdbuf_raw(tx_cmdbuf_t *h, const void *cmd, size_t size)
{
    struct tx8_cmd_hdr hdr;
    struct tx_cmdbuf *cb;
    int rc = TX_OK;

    if (!cmd)
        return tx_error(TX_EINVAL, "tx_cmdbuf_raw: NULL command");
    if (size < sizeof(hdr) || size % 8 || size > MAX_RAW_CMD)
        return tx_error(TX_EINVAL, "tx_cmdbuf_raw: size %zu is not a command size", size);
    memcpy(&hdr, cmd, sizeof(hdr));
    if (hdr.size != size)
        return tx_error(TX_EINVAL, "tx_cmdbuf_raw: hdr.size %u differs from size %zu", hdr.size,
                        size);
    cb = cb_enter(h, "tx_cmdbuf_raw", &rc);
    if (!cb)
        return rc;
    if (cb_append(cb, cmd, size) < 0)
        rc = tx_error(TX_ENOMEM, "tx_cmdbuf_raw: out of memory");
    cb_leave(cb);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Operands                                                                  */
/* ------------------------------------------------------------------------ */

#define MAX_OPS 12

struct opnd {
    const char *name;
    tx_ref_t ref;
    uint32_t access;
    int optional;
    __u64 *field; /* where the device address goes */
};

struct opset {
    struct opnd op[MAX_OPS];
    unsigned n;
    /* a feature of a later interface minor the command uses (0: none) */
    unsigned min_minor;
    const char *feature;
};

static void op_add(struct opset *s, const char *name, tx_ref_t ref, uint32_t access, int optional,
                   __u64 *field)
{
    struct opnd *o = &s->op[s->n++];

    o->name = name;
    o->ref = ref;
    o->access = access;
    o->optional = optional;
    o->field = field;
}

static void op_weight(struct opset *s, const struct tx_weight_ref *w, struct tx8_weight *out)
{
    op_add(s, "w.data", w->data, TX_ACCESS_READ, 0, &out->data);
    op_add(s, "w.scales", w->scales, TX_ACCESS_READ, 1, &out->scales);
    op_add(s, "w.index", w->index, TX_ACCESS_READ, 1, &out->index);
    out->rows = w->rows;
    out->cols = w->cols;
    out->nnz_blocks = w->nnz_blocks;
    out->group_size = w->group_size;
    out->dtype = w->dtype;
    out->format = w->format;
}

/* Resolve one operand: its device address, the BO's handle (0: none). */
static int op_resolve(const char *fn, const struct opnd *o, struct tx_device *dev, uint64_t *addr,
                      uint64_t *handle)
{
    struct tx_bo *bo;
    int rc = TX_OK;

    *handle = 0;
    *addr = 0;
    if (!o->ref.bo) {
        if (o->optional && o->ref.offset == 0)
            return TX_OK;
        return tx_error(TX_EINVAL, "%s: operand %s has no buffer object", fn, o->name);
    }
    bo = txd_bo_get(o->ref.bo, fn, o->name, &rc);
    if (!bo)
        return rc;
    if (dev && bo->dev != dev)
        rc = tx_error(TX_EINVAL, "%s: operand %s: the BO belongs to another device", fn, o->name);
    else if (o->ref.offset >= bo->b.size)
        rc = tx_error(TX_EINVAL,
                      "%s: operand %s: offset %" PRIu64 " is outside its BO (%" PRIu64 " bytes)",
                      fn, o->name, o->ref.offset, bo->b.size);
    else
        *addr = bo->b.addr + o->ref.offset;
    *handle = TX_HANDLE(o->ref.bo);
    tx_obj_put(&bo->obj);
    return rc;
}

/*
 * Resolve all operands of a command, then append it and record its BOs
 * (all or nothing).
 */
static int emit(tx_cmdbuf_t *h, const char *fn, void *cmd, size_t size, uint16_t opcode,
                uint16_t flags, struct opset *s)
{
    struct tx8_cmd_hdr *hdr = cmd;
    uint64_t handles[MAX_OPS];
    struct tx_cmdbuf *cb;
    unsigned i, added = 0;
    int rc = TX_OK;

    cb = cb_enter(h, fn, &rc);
    if (!cb)
        return rc;
    if (s && s->min_minor && TX8_IF_MINOR(cb->dev->info.if_version) < s->min_minor) {
        rc = tx_error(TX_ENOTSUP, "%s: %s needs TX8 interface %u.%u, the device has %u.%u", fn,
                      s->feature, (unsigned)TX8_IF_VERSION_MAJOR, s->min_minor,
                      (unsigned)TX8_IF_MAJOR(cb->dev->info.if_version),
                      (unsigned)TX8_IF_MINOR(cb->dev->info.if_version));
        goto out;
    }
    for (i = 0; s && i < s->n; i++) {
        uint64_t addr;

        rc = op_resolve(fn, &s->op[i], cb->dev, &addr, &handles[i]);
        if (rc < 0)
            goto out;
        *s->op[i].field = addr;
    }
    hdr->opcode = opcode;
    hdr->flags = flags;
    hdr->size = (uint32_t)size;
    for (i = 0; s && i < s->n; i++) {
        if (!handles[i])
            continue;
        if (cb_add_use(cb, handles[i], s->op[i].access) < 0) {
            rc = tx_error(TX_ENOMEM, "%s: out of memory", fn);
            goto out;
        }
        added++;
    }
    if (cb_append(cb, cmd, size) < 0)
        rc = tx_error(TX_ENOMEM, "%s: out of memory", fn);
out:
    (void)added;
    cb_leave(cb);
    return rc;
}

TX_API int tx_weight_encode(const struct tx_weight_ref *w, struct tx8_weight *out)
{
    struct opset s;
    struct tx8_weight tmp;
    int rc;

    if (!w || !out)
        return tx_error(TX_EINVAL, "tx_weight_encode: NULL %s", !w ? "weight" : "result");
    memset(&tmp, 0, sizeof(tmp));
    s.n = 0;
    op_weight(&s, w, &tmp);
    for (unsigned i = 0; i < s.n; i++) {
        uint64_t addr, handle;

        rc = op_resolve("tx_weight_encode", &s.op[i], NULL, &addr, &handle);
        if (rc < 0)
            return rc;
        *s.op[i].field = addr;
    }
    *out = tmp;
    return TX_OK;
}

TX_API int tx_cmdbuf_use_weight(tx_cmdbuf_t *h, const struct tx_weight_ref *w)
{
    tx_bo_t *bos[3];
    int rc;

    if (!w)
        return tx_error(TX_EINVAL, "tx_cmdbuf_use_weight: NULL weight");
    if (!w->data.bo)
        return tx_error(TX_EINVAL, "tx_cmdbuf_use_weight: weight without data BO");
    bos[0] = w->data.bo;
    bos[1] = w->scales.bo;
    bos[2] = w->index.bo;
    for (int i = 0; i < 3; i++) {
        if (!bos[i])
            continue;
        rc = tx_cmdbuf_use(h, bos[i], TX_ACCESS_READ);
        if (rc < 0)
            return rc;
    }
    return TX_OK;
}

/* ------------------------------------------------------------------------ */
/* Typed helpers                                                             */
/* ------------------------------------------------------------------------ */

#define ARGS_CHECK(fn)                                                                             \
    do {                                                                                           \
        if (!a)                                                                                    \
            return tx_error(TX_EINVAL, fn ": NULL arguments");                                     \
    } while (0)

TX_API int tx_cmd_nop(tx_cmdbuf_t *cb)
{
    struct tx8_cmd_hdr c;

    memset(&c, 0, sizeof(c));
    return emit(cb, "tx_cmd_nop", &c, sizeof(c), TX8_OP_NOP, 0, NULL);
}

TX_API int tx_cmd_fill(tx_cmdbuf_t *cb, tx_ref_t dst, uint64_t bytes, uint32_t value)
{
    struct tx8_cmd_fill c;
    struct opset s = {.n = 0};

    memset(&c, 0, sizeof(c));
    c.bytes = bytes;
    c.value = value;
    op_add(&s, "dst", dst, TX_ACCESS_WRITE, 0, &c.dst);
    return emit(cb, "tx_cmd_fill", &c, sizeof(c), TX8_OP_FILL, 0, &s);
}

TX_API int tx_cmd_copy(tx_cmdbuf_t *cb, tx_ref_t dst, tx_ref_t src, uint64_t bytes)
{
    struct tx8_cmd_copy c;
    struct opset s = {.n = 0};

    memset(&c, 0, sizeof(c));
    c.bytes = bytes;
    op_add(&s, "dst", dst, TX_ACCESS_WRITE, 0, &c.dst);
    op_add(&s, "src", src, TX_ACCESS_READ, 0, &c.src);
    return emit(cb, "tx_cmd_copy", &c, sizeof(c), TX8_OP_COPY, 0, &s);
}

/*
 * The encoders of the commands with an argument struct are tables: which
 * fields copy into the command as they are (same name, size and kind in
 * both structs, checked at compile time) and which tx_ref_t operands
 * resolve into which address field, with their access. What is not a
 * plain copy -- validation, interface features, operands whose presence
 * or access depends on a type -- stays in the encoder's code, after the
 * table's part (the operands keep the hardware interface's order).
 */
struct enc_field {
    uint16_t a, c, size; /* offsets in the arguments and the command */
};

struct enc_opnd {
    const char *name;
    uint16_t a, c;    /* the tx_ref_t in the arguments, the __u64 in the command */
    uint32_t access;  /* TX_ACCESS_* */
    uint16_t rw_if;   /* a flag that makes the access TX_ACCESS_RW */
    uint16_t need_if; /* a flag without which the operand is optional (0: always needed) */
    int optional;     /* optional whatever the flags */
};

struct enc_desc {
    const char *fn;
    uint16_t opcode;
    uint16_t size; /* the command */
    const struct enc_field *f;
    unsigned nf;
    const struct enc_opnd *o;
    unsigned no;
};

/* clang-format off */
#define ENC_KIND(x) _Generic((x), float: 1, double: 2, default: 0)
#define ENC_AF(f) (((const struct ENC_A *)0)->f)
#define ENC_CF(f) (((const struct ENC_C *)0)->f)
/* a field copied as it is: the same size and kind (integer / float) */
#define F(f)                                                                                       \
    {offsetof(struct ENC_A, f), offsetof(struct ENC_C, f),                                         \
     sizeof(ENC_AF(f)) + 0 * sizeof(char[1 - 2 * (sizeof(ENC_AF(f)) != sizeof(ENC_CF(f)) ||       \
                                                  ENC_KIND(ENC_AF(f)) != ENC_KIND(ENC_CF(f)))])}
/* an operand: a tx_ref_t into an 8-byte address */
#define OP(f, acc, rw_if, need_if, opt)                                                            \
    {#f, offsetof(struct ENC_A, f) + 0 * _Generic(ENC_AF(f), tx_ref_t: 0),                         \
     offsetof(struct ENC_C, f) + 0 * sizeof(char[1 - 2 * (sizeof(ENC_CF(f)) != 8)]),               \
     acc, rw_if, need_if, opt}
/* clang-format on */
#define R(f) OP(f, TX_ACCESS_READ, 0, 0, 0)
#define W(f) OP(f, TX_ACCESS_WRITE, 0, 0, 0)
#define N(x) (sizeof(x) / sizeof((x)[0]))
#define DESC(name, fn, op)                                                                         \
    static const struct enc_desc name##_d = {                                                      \
        fn, op, sizeof(struct ENC_C), name##_f, N(name##_f), name##_o, N(name##_o)}

#define ENC_A tx_convert_args
#define ENC_C tx8_cmd_convert
static const struct enc_field convert_f[] = {F(rows),   F(cols),      F(ld_dst),
                                             F(ld_src), F(dst_dtype), F(src_dtype)};
static const struct enc_opnd convert_o[] = {W(dst), R(src)}; /* scales: by the types */
DESC(convert, "tx_cmd_convert", TX8_OP_CONVERT);
#undef ENC_A
#undef ENC_C

#define ENC_A tx_matmul_args
#define ENC_C tx8_cmd_matmul
static const struct enc_field matmul_f[] = {F(tokens), F(ld_x), F(ld_y), F(act_dtype)};
static const struct enc_opnd matmul_o[] = {
    OP(y, TX_ACCESS_WRITE, TX8_MATMUL_F_ACCUMULATE, 0, 0), R(x),
    OP(bias, TX_ACCESS_READ, 0, TX8_MATMUL_F_BIAS, 1)}; /* then the weight */
DESC(matmul, "tx_cmd_matmul", TX8_OP_MATMUL);
#undef ENC_A
#undef ENC_C

#define ENC_A tx_rmsnorm_args
#define ENC_C tx8_cmd_rmsnorm
static const struct enc_field rmsnorm_f[] = {F(rows), F(dim), F(ld_x), F(ld_y), F(eps)};
static const struct enc_opnd rmsnorm_o[] = {W(y), R(x), R(gamma)};
DESC(rmsnorm, "tx_cmd_rmsnorm", TX8_OP_RMSNORM);
#undef ENC_A
#undef ENC_C

#define ENC_A tx_layernorm_args
#define ENC_C tx8_cmd_layernorm
static const struct enc_field layernorm_f[] = {F(rows), F(dim), F(ld_x), F(ld_y), F(eps)};
static const struct enc_opnd layernorm_o[] = {W(y), R(x), R(gamma), R(beta)};
DESC(layernorm, "tx_cmd_layernorm", TX8_OP_LAYERNORM);
#undef ENC_A
#undef ENC_C

#define ENC_A tx_rope_args
#define ENC_C tx8_cmd_rope
static const struct enc_field rope_f[] = {F(tokens), F(heads),   F(ld_token), F(ld_head),
                                          F(offset), F(rot_dim), F(mode)};
static const struct enc_opnd rope_o[] = {OP(x, TX_ACCESS_RW, 0, 0, 0), R(pos), R(inv_freq)};
DESC(rope, "tx_cmd_rope", TX8_OP_ROPE);
#undef ENC_A
#undef ENC_C

#define ENC_A tx_attention_args
#define ENC_C tx8_cmd_attention
static const struct enc_field attention_f[] = {
    F(tokens), F(q_heads),   F(kv_heads),  F(qk_dim),    F(v_dim),     F(kv_len), F(q_pos0),
    F(sel_k),  F(ld_q_head), F(ld_k_head), F(ld_v_head), F(ld_o_head), F(scale),  F(kv_dtype)};
static const struct enc_opnd attention_o[] = {W(out), R(q), R(k), R(v),
                                              OP(sel, TX_ACCESS_READ, 0, 0, 1)};
DESC(attention, "tx_cmd_attention", TX8_OP_ATTENTION);
#undef ENC_A
#undef ENC_C

#define ENC_A tx_swiglu_args
#define ENC_C tx8_cmd_swiglu
static const struct enc_field swiglu_f[] = {F(rows), F(cols), F(ld_y), F(ld_gate), F(ld_up)};
static const struct enc_opnd swiglu_o[] = {W(y), R(gate), R(up)};
DESC(swiglu, "tx_cmd_swiglu", TX8_OP_SWIGLU);
#undef ENC_A
#undef ENC_C

#define ENC_A tx_embed_args
#define ENC_C tx8_cmd_embed
static const struct enc_field embed_f[] = {F(tokens), F(vocab), F(dim), F(ld_out), F(dtype)};
static const struct enc_opnd embed_o[] = {W(out), R(ids), R(table)}; /* scales: by the type */
DESC(embed, "tx_cmd_embed", TX8_OP_EMBED);
#undef ENC_A
#undef ENC_C

#define ENC_A tx_moe_route_args
#define ENC_C tx8_cmd_moe_route
static const struct enc_field moe_route_f[] = {F(tokens),     F(experts), F(top_k), F(n_group),
                                               F(topk_group), F(scaling), F(lambda)};
static const struct enc_opnd moe_route_o[] = {W(out_ids), W(out_w), R(logits),
                                              OP(bias, TX_ACCESS_READ, 0, 0, 1)};
DESC(moe_route, "tx_cmd_moe_route", TX8_OP_MOE_ROUTE); /* counts: by the flags */
#undef ENC_A
#undef ENC_C

#define ENC_A tx_moe_ffn_args
#define ENC_C tx8_cmd_moe_ffn
static const struct enc_field moe_ffn_f[] = {F(tokens),  F(top_k), F(num_experts), F(dim),
                                             F(ffn_dim), F(ld_x),  F(ld_y),        F(act_dtype)};
static const struct enc_opnd moe_ffn_o[] = {OP(y, TX_ACCESS_WRITE, TX8_MOE_FFN_F_ACCUMULATE, 0, 0),
                                            R(x), R(ids), R(w), R(experts)};
DESC(moe_ffn, "tx_cmd_moe_ffn", TX8_OP_MOE_FFN);
#undef ENC_A
#undef ENC_C

#define ENC_A tx_dsa_index_args
#define ENC_C tx8_cmd_dsa_index
static const struct enc_field dsa_index_f[] = {F(tokens), F(heads), F(dim),       F(kv_len),
                                               F(q_pos0), F(top_k), F(ld_q_head), F(ld_k)};
static const struct enc_opnd dsa_index_o[] = {W(sel), R(q), R(k), R(w)};
DESC(dsa_index, "tx_cmd_dsa_index", TX8_OP_DSA_INDEX);
#undef ENC_A
#undef ENC_C

#define ENC_A tx_sample_args
#define ENC_C tx8_cmd_sample
static const struct enc_field sample_f[] = {F(seed),
                                            F(counter),
                                            F(rows),
                                            F(vocab),
                                            F(ld_logits),
                                            F(top_k),
                                            F(temperature),
                                            F(top_p),
                                            F(min_p),
                                            F(repeat_penalty),
                                            F(presence_penalty),
                                            F(frequency_penalty),
                                            F(n_history)};
static const struct enc_opnd sample_o[] = {W(out), R(logits),
                                           OP(probs, TX_ACCESS_WRITE, 0, 0, 1)}; /* history */
DESC(sample, "tx_cmd_sample", TX8_OP_SAMPLE);
#undef ENC_A
#undef ENC_C

/* The table's part of command d from arguments a into c (zeroed first). */
static void encode(const struct enc_desc *d, const void *a, void *c, uint16_t flags,
                   struct opset *s)
{
    memset(c, 0, d->size);
    for (unsigned i = 0; i < d->nf; i++)
        memcpy((uint8_t *)c + d->f[i].c, (const uint8_t *)a + d->f[i].a, d->f[i].size);
    for (unsigned i = 0; i < d->no; i++) {
        const struct enc_opnd *o = &d->o[i];
        tx_ref_t ref;
        memcpy(&ref, (const uint8_t *)a + o->a, sizeof(ref));
        op_add(s, o->name, ref, (flags & o->rw_if) ? TX_ACCESS_RW : o->access,
               o->optional && !(flags & o->need_if), (__u64 *)((uint8_t *)c + o->c));
    }
}

/* A command that is its table: encode, emit. */
static int encode_emit(tx_cmdbuf_t *cb, const struct enc_desc *d, const void *a, void *c,
                       uint16_t flags)
{
    struct opset s = {.n = 0};

    if (!a)
        return tx_error(TX_EINVAL, "%s: NULL arguments", d->fn);
    encode(d, a, c, flags, &s);
    return emit(cb, d->fn, c, d->size, d->opcode, flags, &s);
}

TX_API int tx_cmd_convert(tx_cmdbuf_t *cb, const struct tx_convert_args *a)
{
    struct tx8_cmd_convert c;
    struct opset s = {.n = 0};

    ARGS_CHECK("tx_cmd_convert");
    int i8 = a->dst_dtype == TX8_DTYPE_I8 || a->src_dtype == TX8_DTYPE_I8;
    if (tx_dtype_is_block(a->dst_dtype) || tx_dtype_is_block(a->src_dtype)) {
        s.min_minor = 6;
        s.feature = "the KV-cache block types (Q8_0 / Q4_0)";
    }
    encode(&convert_d, a, &c, 0, &s);
    op_add(&s, "scales", a->scales, a->dst_dtype == TX8_DTYPE_I8 ? TX_ACCESS_WRITE : TX_ACCESS_READ,
           !i8, &c.scales);
    return emit(cb, convert_d.fn, &c, sizeof(c), convert_d.opcode, 0, &s);
}

TX_API int tx_cmd_matmul(tx_cmdbuf_t *cb, const struct tx_matmul_args *a)
{
    struct tx8_cmd_matmul c;
    struct opset s = {.n = 0};

    ARGS_CHECK("tx_cmd_matmul");
    encode(&matmul_d, a, &c, a->flags, &s);
    op_weight(&s, &a->w, &c.w);
    return emit(cb, matmul_d.fn, &c, sizeof(c), matmul_d.opcode, a->flags, &s);
}

TX_API int tx_cmd_rmsnorm(tx_cmdbuf_t *cb, const struct tx_rmsnorm_args *a)
{
    struct tx8_cmd_rmsnorm c;

    return encode_emit(cb, &rmsnorm_d, a, &c, 0);
}

TX_API int tx_cmd_layernorm(tx_cmdbuf_t *cb, const struct tx_layernorm_args *a)
{
    struct tx8_cmd_layernorm c;

    return encode_emit(cb, &layernorm_d, a, &c, 0);
}

TX_API int tx_cmd_rope(tx_cmdbuf_t *cb, const struct tx_rope_args *a)
{
    struct tx8_cmd_rope c;
    struct opset s = {.n = 0};

    ARGS_CHECK("tx_cmd_rope");
    if (a->flags & ~(uint32_t)TX8_ROPE_F_ATTN_FACTOR)
        return tx_error(TX_EINVAL, "tx_cmd_rope: unknown flags 0x%x (TX8_ROPE_F_ATTN_FACTOR)",
                        a->flags);
    if (a->flags ? !isfinite(a->attn_factor) : a->attn_factor != 0.0f)
        return tx_error(TX_EINVAL,
                        a->flags ? "tx_cmd_rope: attn_factor %g is not finite"
                                 : "tx_cmd_rope: attn_factor %g without TX8_ROPE_F_ATTN_FACTOR "
                                   "(0 unless the flag is set)",
                        (double)a->attn_factor);
    if (a->flags) {
        s.min_minor = 4;
        s.feature = "TX8_ROPE_F_ATTN_FACTOR";
    }
    encode(&rope_d, a, &c, 0, &s);
    if (a->flags)
        c.attn_factor = a->attn_factor;
    return emit(cb, rope_d.fn, &c, sizeof(c), rope_d.opcode, (uint16_t)a->flags, &s);
}

/* The key bitmap of interface 1.10 (custom attention masks) of ATTENTION or
 * DSA_INDEX: with ld_mask the operand, its stride and the command's full
 * size (feature: what an older device lacks), else the 1.9 size */
static size_t key_bitmap(struct opset *s, tx_ref_t mask, uint32_t ld_mask, __u64 *field,
                         __u32 *ld_field, size_t full, size_t size_1_9, const char *feature)
{
    if (!ld_mask)
        return size_1_9;
    op_add(s, "mask", mask, TX_ACCESS_READ, 0, field);
    *ld_field = ld_mask;
    s->min_minor = 10;
    s->feature = feature;
    return full;
}

TX_API int tx_cmd_attention(tx_cmdbuf_t *cb, const struct tx_attention_args *a)
{
    return tx_cmd_attention_ex(cb, a, a ? a->kv_dtype : 0);
}

TX_API int tx_cmd_attention_ex(tx_cmdbuf_t *cb, const struct tx_attention_args *a,
                               uint16_t v_dtype)
{
    return tx_cmd_attention_flags(cb, a, v_dtype, 0);
}

TX_API int tx_cmd_attention_flags(tx_cmdbuf_t *cb, const struct tx_attention_args *a,
                                  uint16_t v_dtype, uint16_t aflags)
{
    return txd_cmd_attention_mask(cb, a, v_dtype, aflags, (tx_ref_t){0}, 0);
}

int txd_cmd_attention_mask(tx_cmdbuf_t *cb, const struct tx_attention_args *a, uint16_t v_dtype,
                           uint16_t aflags, tx_ref_t mask, uint32_t ld_mask)
{
    struct tx8_cmd_attention c;
    struct opset s = {.n = 0};
    uint16_t flags = 0;

    ARGS_CHECK("tx_cmd_attention");
    if (aflags & ~TX8_ATTN_F_BF16)
        return tx_error(TX_EINVAL,
                        "tx_cmd_attention_flags: flags 0x%x: only TX8_ATTN_F_BF16 (0x%x) is "
                        "accepted (TX8_ATTN_F_V_DTYPE follows from v_dtype)",
                        (unsigned)aflags, (unsigned)TX8_ATTN_F_BF16);
    if ((aflags & TX8_ATTN_F_BF16) && ((a->qk_dim | a->v_dim | a->ld_k_head | a->ld_v_head) & 1))
        return tx_error(TX_EINVAL,
                        "tx_cmd_attention_flags: TX8_ATTN_F_BF16 takes pairs: qk_dim %u, v_dim "
                        "%u, ld_k_head %u and ld_v_head %u must be even",
                        a->qk_dim, a->v_dim, a->ld_k_head, a->ld_v_head);
    if (aflags & TX8_ATTN_F_BF16) {
        flags |= TX8_ATTN_F_BF16;
        s.min_minor = 7;
        s.feature = "TX8_ATTN_F_BF16";
    }
    if (v_dtype != a->kv_dtype) {
        flags |= TX8_ATTN_F_V_DTYPE;
        if (s.min_minor < 6) {
            s.min_minor = 6;
            s.feature = "TX8_ATTN_F_V_DTYPE";
        }
    }
    if ((tx_dtype_is_block(a->kv_dtype) || tx_dtype_is_block(v_dtype)) && s.min_minor < 6) {
        s.min_minor = 6;
        s.feature = "the KV-cache block types (Q8_0 / Q4_0)";
    }
    encode(&attention_d, a, &c, 0, &s);
    if (v_dtype != a->kv_dtype)
        c.v_dtype = v_dtype;
    size_t size = key_bitmap(&s, mask, ld_mask, &c.mask, &c.ld_mask, sizeof(c),
                             TX8_CMD_ATTENTION_SIZE_1_9, "the ATTENTION key bitmap");
    return emit(cb, attention_d.fn, &c, size, attention_d.opcode, flags, &s);
}

TX_API int tx_cmd_swiglu(tx_cmdbuf_t *cb, const struct tx_swiglu_args *a)
{
    struct tx8_cmd_swiglu c;

    return encode_emit(cb, &swiglu_d, a, &c, 0);
}

TX_API int tx_cmd_add(tx_cmdbuf_t *cb, tx_ref_t y, tx_ref_t a, tx_ref_t b, uint64_t n, float alpha,
                      float beta)
{
    struct tx8_cmd_add c;
    struct opset s = {.n = 0};

    memset(&c, 0, sizeof(c));
    c.n = n;
    c.alpha = alpha;
    c.beta = beta;
    op_add(&s, "y", y, TX_ACCESS_WRITE, 0, &c.y);
    op_add(&s, "a", a, TX_ACCESS_READ, 0, &c.a);
    op_add(&s, "b", b, TX_ACCESS_READ, 0, &c.b);
    return emit(cb, "tx_cmd_add", &c, sizeof(c), TX8_OP_ADD, 0, &s);
}

TX_API int tx_cmd_embed(tx_cmdbuf_t *cb, const struct tx_embed_args *a)
{
    struct tx8_cmd_embed c;
    struct opset s = {.n = 0};

    ARGS_CHECK("tx_cmd_embed");
    encode(&embed_d, a, &c, 0, &s);
    op_add(&s, "scales", a->scales, TX_ACCESS_READ, a->dtype != TX8_DTYPE_I8, &c.scales);
    return emit(cb, embed_d.fn, &c, sizeof(c), embed_d.opcode, 0, &s);
}

TX_API int tx_cmd_moe_route(tx_cmdbuf_t *cb, const struct tx_moe_route_args *a)
{
    struct tx8_cmd_moe_route c;
    struct opset s = {.n = 0};
    uint32_t cacc = 0;

    ARGS_CHECK("tx_cmd_moe_route");
    if (a->flags & TX8_ROUTE_F_SOFTMAX) {
        if (a->bias.bo || a->bias.offset)
            return tx_error(TX_EINVAL, "tx_cmd_moe_route: TX8_ROUTE_F_SOFTMAX takes no bias (the "
                                       "correction bias is defined for the sigmoid router)");
        if (a->n_group > 1)
            return tx_error(TX_EINVAL,
                            "tx_cmd_moe_route: TX8_ROUTE_F_SOFTMAX takes no group limit "
                            "(n_group %u, must be 0 or 1)",
                            a->n_group);
        s.min_minor = 4;
        s.feature = "TX8_ROUTE_F_SOFTMAX";
    }
    if (a->flags & TX8_ROUTE_F_LOAD_PENALTY)
        cacc |= TX_ACCESS_READ;
    if (a->flags & TX8_ROUTE_F_COUNT)
        cacc |= TX_ACCESS_RW;
    encode(&moe_route_d, a, &c, 0, &s);
    op_add(&s, "counts", a->counts, cacc ? cacc : TX_ACCESS_READ, 1, &c.counts);
    return emit(cb, moe_route_d.fn, &c, sizeof(c), moe_route_d.opcode, a->flags, &s);
}

TX_API int tx_cmd_moe_ffn(tx_cmdbuf_t *cb, const struct tx_moe_ffn_args *a)
{
    struct tx8_cmd_moe_ffn c;

    return encode_emit(cb, &moe_ffn_d, a, &c, a ? a->flags : 0);
}

TX_API int tx_cmd_dsa_index(tx_cmdbuf_t *cb, const struct tx_dsa_index_args *a)
{
    return tx_cmd_dsa_index_ex(cb, a, TX8_DTYPE_F32);
}

TX_API int tx_cmd_dsa_index_ex(tx_cmdbuf_t *cb, const struct tx_dsa_index_args *a,
                               uint16_t k_dtype)
{
    return txd_cmd_dsa_index_q8(cb, a, k_dtype, 0);
}

int txd_cmd_dsa_index_q8(tx_cmdbuf_t *cb, const struct tx_dsa_index_args *a, uint16_t k_dtype,
                         int query_q8)
{
    return txd_cmd_dsa_index_mask(cb, a, k_dtype, query_q8, (tx_ref_t){0}, 0);
}

int txd_cmd_dsa_index_mask(tx_cmdbuf_t *cb, const struct tx_dsa_index_args *a, uint16_t k_dtype,
                           int query_q8, tx_ref_t mask, uint32_t ld_mask)
{
    struct tx8_cmd_dsa_index c;
    struct opset s = {.n = 0};
    uint16_t flags = 0;

    ARGS_CHECK("tx_cmd_dsa_index");
    if (k_dtype != TX8_DTYPE_F32 && k_dtype != TX8_DTYPE_Q8_0)
        return tx_error(TX_EINVAL, "tx_cmd_dsa_index: key cache type %s (F32 or Q8_0)",
                        tx_dtype_name(k_dtype));
    if (query_q8 && k_dtype != TX8_DTYPE_Q8_0)
        return tx_error(TX_EINVAL, "tx_cmd_dsa_index: 8-bit products need the Q8_0 key cache");
    if (k_dtype == TX8_DTYPE_Q8_0) {
        flags = TX8_DSA_F_KEY_Q8_0;
        s.min_minor = 6;
        s.feature = "TX8_DSA_F_KEY_Q8_0";
    }
    if (query_q8) {
        flags |= TX8_DSA_F_QUERY_Q8;
        s.min_minor = 9;
        s.feature = "TX8_DSA_F_QUERY_Q8";
    }
    encode(&dsa_index_d, a, &c, 0, &s);
    size_t size = key_bitmap(&s, mask, ld_mask, &c.mask, &c.ld_mask, sizeof(c),
                             TX8_CMD_DSA_INDEX_SIZE_1_9, "the DSA_INDEX key bitmap");
    return emit(cb, dsa_index_d.fn, &c, size, dsa_index_d.opcode, flags, &s);
}

TX_API int tx_cmd_sample(tx_cmdbuf_t *cb, const struct tx_sample_args *a)
{
    return txd_cmd_sample_allow(cb, a, (tx_ref_t){0}, 0);
}

int txd_cmd_sample_allow(tx_cmdbuf_t *cb, const struct tx_sample_args *a, tx_ref_t allow,
                         uint32_t ld_allow)
{
    struct tx8_cmd_sample c;
    struct opset s = {.n = 0};

    ARGS_CHECK("tx_cmd_sample");
    encode(&sample_d, a, &c, 0, &s);
    if (a->n_history)
        op_add(&s, "history", a->history, TX_ACCESS_READ, 0, &c.history);
    /* the 1.2 form unless a 1.3 field is used, the 1.3 form unless the
     * allowed-token mask (1.9) is */
    size_t size = TX8_CMD_SAMPLE_SIZE_1_2;
    if (a->flags || a->n_history || a->min_p != 0.0f || a->repeat_penalty != 0.0f ||
        a->presence_penalty != 0.0f || a->frequency_penalty != 0.0f)
        size = TX8_CMD_SAMPLE_SIZE_1_3;
    if (ld_allow) {
        op_add(&s, "allow", allow, TX_ACCESS_READ, 0, &c.allow);
        c.ld_allow = ld_allow;
        size = sizeof(c);
        s.min_minor = 9;
        s.feature = "the SAMPLE allowed-token mask";
    }
    return emit(cb, sample_d.fn, &c, size, sample_d.opcode, (uint16_t)a->flags, &s);
}
