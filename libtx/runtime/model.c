/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: loading an .smd package onto a device (the tensor tables:
 * tables.c; execution precisions: weights.c; activations: activations.c).
 *
 * Loading is zero copy: the package's tensor extents (data, scales and
 * sparse index, laid out exactly as the device wants them) are read by
 * io_uring straight into the mapped weights BO, O_DIRECT when the mapping
 * allows it, while the host parses the tokenizer and builds the tensor
 * tables (I/O overlaps set-up).
 */
#include "runtime/rt_internal.h"
#include "runtime/expert_cache.h"
#include "runtime/expert_parallel.h"
#include "device/device_internal.h"

#include "model/model_internal.h"

#include "arch/arch.h"
#include "profile/profile_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <tx/tx_dtype.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

double rt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int rt_debug_on(void)
{
    return tx_debug_enabled();
}

void rt_debug(const char *fmt, ...)
{
    va_list ap;
    if (!tx_debug_enabled())
        return;
    va_start(ap, fmt);
    fputs("glm: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

uint16_t rt_prec_dtype(glm_precision_t p)
{
    switch (p) {
    case FP16:
        return TX8_DTYPE_F16;
    case BF16:
        return TX8_DTYPE_BF16;
    case INT8_MIXED:
        return TX8_DTYPE_I8;
    case GLM_PRECISION_FP8:
        return TX8_DTYPE_F8_E4M3;
    default:
        return TX8_DTYPE_F32;
    }
}

/* How activations enter a product at precision p: FP8 weights take f32
 * activations (the FP8 checkpoints' dynamic activation scheme, computed
 * exactly here); the others their own type. */
uint16_t rt_prec_act_dtype(glm_precision_t p)
{
    return p == GLM_PRECISION_FP8 ? TX8_DTYPE_F32 : rt_prec_dtype(p);
}

uint16_t rt_kv_dtype(glm_precision_t attention)
{
    switch (attention) {
    case FP32:
    case GLM_PRECISION_FP8: /* f32 compute around FP8 weights */
        return TX8_DTYPE_F32;
    case BF16:
        return TX8_DTYPE_BF16;
    default:
        return TX8_DTYPE_F16;
    }
}

int rt_mat_of(const glm_model_t *m, int role, int layer)
{
    if (role < 0 || role >= GLM_T_ROLE_COUNT || layer < -1 || layer >= m->cfg.num_hidden_layers)
        return RT_NONE;
    return m->role_mat[role * (m->cfg.num_hidden_layers + 1) + layer + 1];
}

int rt_vec_of(const glm_model_t *m, int role, int layer)
{
    if (role < 0 || role >= GLM_T_ROLE_COUNT || layer < -1 || layer >= m->cfg.num_hidden_layers)
        return RT_NONE;
    return m->role_vec[role * (m->cfg.num_hidden_layers + 1) + layer + 1];
}

/* ------------------------------------------------------------------------ */
/* Jobs                                                                      */
/* ------------------------------------------------------------------------ */

int rt_run(glm_model_t *m, tx_cmdbuf_t *cb, const char *what, struct tx_job_result *res)
{
    struct tx_job_result r;
    tx_job_t job;
    unsigned ncmd = 0;
    size_t bytes = 0;
    tx_cmdbuf_size(cb, &bytes, &ncmd);
    if (!ncmd) {
        if (res)
            memset(res, 0, sizeof(*res));
        return TX_OK;
    }
    int rc = tx_submit_ex(m->dev, cb, m->submit_flags, 0, &job);
    if (rc)
        return tx_error(rc, "%s: submit failed: %s", what, tx_last_error());
    rc = tx_wait(m->dev, job, -1, &r);
    if (res)
        *res = r;
    if (rc == TX_EJOB)
        return tx_error(
            TX_EJOB, "%s: device job failed: %s at command %u of %u (fault address 0x%llx)", what,
            tx_job_status_str(r.status), r.fault_cmd, ncmd, (unsigned long long)r.fault_addr);
    if (rc)
        return tx_error(rc, "%s: wait failed: %s", what, tx_last_error());
    return TX_OK;
}

/* ------------------------------------------------------------------------ */
/* Reading the package into device memory                                    */
/* ------------------------------------------------------------------------ */

#define IO_CHUNK (8u << 20)

struct io_state {
    struct io_uring ring;
    int ring_ok;
    int fd_direct, fd_buf;
    int direct; /* O_DIRECT in use */
    glm_model_t *m;
    int next_tensor;
    uint64_t next_off; /* within the tensor's extent */
    int inflight;
    unsigned depth;
    uint64_t done_bytes;
    double t_last; /* when the last read completed */
    int error;
    char msg[TX_ERR_MAX];
    /* checksums as the extents land (overlapped with the reads in flight) */
    int verify;
    uint64_t *landed;  /* bytes of each tensor's extent read so far */
    uint8_t *verified; /* tensor checked */
    double verify_ms;  /* time spent checking */
};

/* A tensor's extent has landed in device memory: check its CRC32C (and
 * scales) while the other reads are still in flight. */
static int io_landed(struct io_state *io, int t, uint32_t len)
{
    glm_model_t *m = io->m;
    if (!io->verify || !io->landed)
        return 0;
    io->landed[t] += len;
    const struct rt_tensor *rt = &m->tensors[t];
    if (io->landed[t] < rt->smd->extent_size)
        return 0;
    char err[TX_ERR_MAX];
    double t0 = rt_now_ms();
    int bad =
        tx_smd_check_extent(m->smd, rt->smd, (const uint8_t *)m->w_map + rt->off, err, sizeof(err));
    io->verify_ms += rt_now_ms() - t0;
    if (bad) {
        /* "PATH: tensor ...": the caller adds the path */
        const char *p = tx_smd_path(m->smd);
        size_t n = strlen(p);
        const char *msg = !strncmp(err, p, n) && !strncmp(err + n, ": ", 2) ? err + n + 2 : err;
        snprintf(io->msg, sizeof(io->msg), "%s", msg);
        io->error = bad;
        return -1;
    }
    io->verified[t] = 1;
    return 0;
}

struct io_req {
    uint8_t *dst;
    uint64_t foff;
    uint32_t len;
    uint32_t got;
    int tensor;
    int direct;
};

static int io_submit_more(struct io_state *io)
{
    glm_model_t *m = io->m;
    int queued = 0;
    while (io->inflight < (int)io->depth && io->next_tensor < m->n_tensors) {
        struct rt_tensor *t = &m->tensors[io->next_tensor];
        uint64_t ext = t->streamed ? 0 : t->smd->extent_size;
        if (io->next_off >= ext) {
            io->next_tensor++;
            io->next_off = 0;
            continue;
        }
        struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
        if (!sqe)
            break;
        struct io_req *r = malloc(sizeof(*r));
        if (!r) {
            io->error = TX_ENOMEM;
            snprintf(io->msg, sizeof(io->msg), "out of memory");
            return -1;
        }
        uint64_t len = ext - io->next_off;
        if (len > IO_CHUNK)
            len = IO_CHUNK;
        /* the file ends with the last extent; keep O_DIRECT lengths whole
         * pages (the kernel stops at EOF) */
        r->dst = (uint8_t *)m->w_map + t->off + io->next_off;
        r->foff = t->smd->data_offset + io->next_off;
        r->len = (uint32_t)len;
        r->got = 0;
        r->tensor = io->next_tensor;
        r->direct = io->direct;
        io_uring_prep_read(sqe, io->direct ? io->fd_direct : io->fd_buf, r->dst, r->len, r->foff);
        io_uring_sqe_set_data(sqe, r);
        io->next_off += len;
        io->inflight++;
        queued++;
    }
    if (queued) {
        int rc = io_uring_submit(&io->ring);
        if (rc < 0) {
            io->error = tx_errno_code(rc);
            snprintf(io->msg, sizeof(io->msg), "io_uring_submit: %s", strerror(-rc));
            return -1;
        }
    }
    return 0;
}

/* Handle one completion; resubmits short reads. */
static int io_complete(struct io_state *io, struct io_uring_cqe *cqe)
{
    struct io_req *r = io_uring_cqe_get_data(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(&io->ring, cqe);
    io->inflight--;
    if (res < 0 && r->direct && (res == -EINVAL || res == -EFAULT || res == -EOPNOTSUPP)) {
        /* this mapping or file system does not take O_DIRECT: buffered from now on */
        io->direct = 0;
        r->direct = 0;
        res = 0;
        rt_debug("load: O_DIRECT refused (%s), using buffered reads", strerror(EINVAL));
    } else if (res < 0) {
        io->error = tx_errno_code(res);
        snprintf(io->msg, sizeof(io->msg), "read of '%s' failed: %s",
                 tx_smd_tensor_name(io->m->smd, io->m->tensors[r->tensor].smd), strerror(-res));
        free(r);
        return -1;
    }
    r->got += (uint32_t)res;
    io->done_bytes += (uint64_t)res;
    io->t_last = rt_now_ms();
    if (r->got < r->len) {
        if (res == 0 && r->direct == io->direct && r->got) {
            /* EOF before the extent ended: the rest must be past the file's end */
            uint64_t fsz = tx_smd_header(io->m->smd)->file_size;
            if (r->foff + r->got >= fsz) {
                memset(r->dst + r->got, 0, r->len - r->got);
                int t = r->tensor;
                uint32_t n = r->len;
                free(r);
                return io_landed(io, t, n);
            }
        }
        struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
        if (!sqe) {
            io_uring_submit(&io->ring);
            sqe = io_uring_get_sqe(&io->ring);
        }
        if (!sqe) {
            io->error = TX_EIO;
            snprintf(io->msg, sizeof(io->msg), "io_uring: no submission entry");
            free(r);
            return -1;
        }
        /* O_DIRECT continuation must stay aligned; fall back to buffered */
        if (r->direct && (r->got % 4096)) {
            r->direct = 0;
        }
        io_uring_prep_read(sqe, r->direct ? io->fd_direct : io->fd_buf, r->dst + r->got,
                           r->len - r->got, r->foff + r->got);
        io_uring_sqe_set_data(sqe, r);
        io->inflight++;
        io_uring_submit(&io->ring);
        return 0;
    }
    int t = r->tensor;
    uint32_t n = r->len;
    free(r);
    return io_landed(io, t, n);
}

/* Reap what is ready (wait = 0) or everything (wait = 1). */
static int io_pump(struct io_state *io, int wait)
{
    for (;;) {
        if (io->error)
            return -1;
        if (io_submit_more(io))
            return -1;
        if (!io->inflight)
            return 0;
        struct io_uring_cqe *cqe;
        int rc = wait ? io_uring_wait_cqe(&io->ring, &cqe) : io_uring_peek_cqe(&io->ring, &cqe);
        if (rc == -EAGAIN && !wait)
            return 0;
        if (rc == -EINTR)
            continue;
        if (rc < 0) {
            io->error = tx_errno_code(rc);
            snprintf(io->msg, sizeof(io->msg), "io_uring wait: %s", strerror(-rc));
            return -1;
        }
        if (io_complete(io, cqe))
            return -1;
    }
}

static void io_cleanup(struct io_state *io)
{
    if (io->ring_ok) {
        /* drain anything still in flight before the memory goes away */
        while (io->inflight > 0) {
            struct io_uring_cqe *cqe;
            if (io_uring_wait_cqe(&io->ring, &cqe) < 0)
                break;
            free(io_uring_cqe_get_data(cqe));
            io_uring_cqe_seen(&io->ring, cqe);
            io->inflight--;
        }
        io_uring_queue_exit(&io->ring);
        io->ring_ok = 0;
    }
    if (io->fd_direct >= 0)
        close(io->fd_direct);
    io->fd_direct = -1;
}

/* Plain pread() path (GLM_LOAD_NO_URING or no io_uring in this kernel). */
static int read_pread(glm_model_t *m)
{
    int fd = tx_smd_fd(m->smd);
    for (int i = 0; i < m->n_tensors; i++) {
        struct rt_tensor *t = &m->tensors[i];
        if (t->streamed)
            continue;
        uint64_t ext = t->smd->extent_size, done = 0;
        uint64_t fsz = tx_smd_header(m->smd)->file_size;
        while (done < ext) {
            ssize_t r = pread(fd, (uint8_t *)m->w_map + t->off + done, ext - done,
                              (off_t)(t->smd->data_offset + done));
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return tx_error(tx_errno_code(errno), "%s: read of '%s' failed: %s",
                                tx_smd_path(m->smd), tx_smd_tensor_name(m->smd, t->smd),
                                strerror(errno));
            if (r == 0) {
                if (t->smd->data_offset + done >= fsz)
                    break; /* tail of the last extent lies past EOF: zero */
                return tx_error(TX_EIO, "%s: short read of '%s'", tx_smd_path(m->smd),
                                tx_smd_tensor_name(m->smd, t->smd));
            }
            done += (uint64_t)r;
        }
    }
    return TX_OK;
}

/* ------------------------------------------------------------------------ */
/* Load / free                                                               */
/* ------------------------------------------------------------------------ */

/* The package metadata's model_name (printable, no blanks, <= 16 bytes),
 * else the architecture's family name. */
static void default_name(const glm_model_t *m, char *out, size_t outsz)
{
    snprintf(out, outsz, "%s", glm_arch_family(m->cfg.arch));
    size_t len = 0;
    const char *mj = tx_smd_metadata_json(m->smd, &len);
    if (!mj)
        return;
    struct json_object *o = json_tokener_parse(mj), *v;
    if (o && json_object_object_get_ex(o, "model_name", &v) &&
        json_object_is_type(v, json_type_string)) {
        const char *n = json_object_get_string(v);
        size_t k = strlen(n);
        int ok = k > 0 && k <= 16;
        for (size_t i = 0; i < k && ok; i++)
            ok = n[i] > ' ' && n[i] < 127;
        if (ok)
            snprintf(out, outsz, "%s", n);
    }
    json_object_put(o);
}

/* The package metadata's generation_config (glm-export's normalised copy
 * of the checkpoint's generation_config.json), validated again: the file is
 * not trusted. 0 when absent. */
static int load_gen_config(glm_model_t *m, const char *path)
{
    size_t len = 0;
    const char *mj = tx_smd_metadata_json(m->smd, &len);
    if (!mj)
        return 0;
    struct json_object *o = json_tokener_parse(mj), *v;
    int rc = 0;
    if (o && json_object_object_get_ex(o, "generation_config", &v) &&
        !json_object_is_type(v, json_type_null)) {
        char err[TX_ERR_MAX], what[64];
        snprintf(what, sizeof(what), "metadata generation_config");
        rc = txm_gen_config_from_object(v, what, 0, &m->gen, err, sizeof(err));
        if (rc)
            rc = tx_error(rc, "%s: %s", path, err);
        else
            m->has_gen = 1;
    }
    json_object_put(o);
    return rc;
}

TX_API int glm_model_generation_config(const glm_model_t *m, struct glm_generation_config *out)
{
    if (!m || !out)
        return tx_error(TX_EINVAL, "glm_model_generation_config: NULL argument");
    if (!m->has_gen) {
        memset(out, 0, sizeof(*out));
        return 0;
    }
    *out = m->gen;
    return 1;
}

static void free_model(glm_model_t *m)
{
    if (!m)
        return;
    rt_ep_free(m); /* first: rank 0 tells the workers to stop */
    rt_telemetry_close(m);
    rt_stream_free(m);
    rt_xc_free(m);
    rt_absorb_free(m);
    rt_dgraph_drop(m);
    for (int lt = 0; lt < RT_NLTYPES; lt++)
        for (int p = 0; p < GLM_PRECISION_COUNT; p++)
            if (m->conv[lt][p].bo)
                tx_bo_free(m->conv[lt][p].bo);
    if (m->act_bo)
        tx_bo_free(m->act_bo);
    if (m->meta_bo)
        tx_bo_free(m->meta_bo);
    if (m->w_bo)
        tx_bo_free(m->w_bo);
    if (m->tok)
        tx_tokenizer_free(m->tok);
    if (m->smd)
        tx_smd_close(m->smd);
    free(m->tensors);
    free(m->mats);
    free(m->vecs);
    free(m->role_mat);
    free(m->role_vec);
    free(m->exp_mat);
    free(m->moe_index);
    free(m->moe_layer);
    free(m->counts_prev);
    free(m->overflow);
    free(m->cold_layer);
    free(m->sessions);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static int model_load(tx_device_t *dev, const char *path, const struct glm_load_options *opt,
                      int ep_mode, glm_model_t **out);

/* The expert cache: resident part (everything but the routed experts) in
 * the weights BO, the experts in slots. TX_ENOSPC (state undone) when the
 * resident part or top_k slots do not fit. */
static int load_expert_cache(glm_model_t *m, const struct glm_load_options *o, const char *path)
{
    uint64_t total_w = m->w_size;
    rt_xc_mark(m);
    glm_precision_plan_t plan;
    rt_plan_of(m->dev, &plan, NULL);
    uint64_t res = m->w_size, slot = rt_xc_slot_bytes(m, (int)plan.precision[GLM_EXPERT]);
    uint64_t xb = rt_xc_expert_bytes(m);
    int K = m->cfg.num_experts_per_tok;
    uint64_t all = slot * (uint64_t)m->n_moe_layers * (uint64_t)m->cfg.n_routed_experts;
    int rc;
    if (o->max_weight_bytes && res + slot * (uint64_t)K > o->max_weight_bytes) {
        rc = tx_error(TX_ENOSPC,
                      "%s: without its routed experts the model still needs %llu bytes, over "
                      "max_weight_bytes %llu less %d expert slots",
                      path, (unsigned long long)res, (unsigned long long)o->max_weight_bytes, K);
        goto undo;
    }
    rc = tx_bo_alloc(m->dev, res ? res : 4096, 0, m->label_w, &m->w_bo);
    if (rc) {
        rc = tx_error(rc,
                      "%s: the resident part without routed experts (%llu of %llu bytes) does "
                      "not fit: %s",
                      path, (unsigned long long)res, (unsigned long long)total_w, tx_last_error());
        goto undo;
    }
    uint64_t bytes = o->expert_cache_bytes;
    if (!bytes && o->max_weight_bytes) {
        bytes = o->max_weight_bytes - res;
    } else if (!bytes) {
        /* what is free now, less a reserve for the meta buffer, activations
         * and KV caches of the sessions to come: a quarter, >= 16 MiB */
        struct tx_device_info di;
        uint64_t fr = 0;
        if (tx_device_info(m->dev, &di) == TX_OK && di.heap_size > di.mem_used)
            fr = di.heap_size - di.mem_used;
        uint64_t rsv = fr / 4 > (16u << 20) ? fr / 4 : (16u << 20);
        bytes = fr > rsv ? fr - rsv : 0;
        if (bytes > all)
            bytes = all;
    }
    rc = rt_xc_setup(m, bytes, o->flags);
    if (rc)
        goto undo;
    rt_debug("load: expert cache: %llu bytes resident, %llu bytes of routed experts in %d slots "
             "(%llu bytes)",
             (unsigned long long)res, (unsigned long long)xb, m->xc->n_slots,
             (unsigned long long)((uint64_t)m->xc->n_slots * m->xc->slot_size));
    return TX_OK;
undo:
    rt_xc_free(m);
    if (m->w_bo)
        tx_bo_free(m->w_bo);
    m->w_bo = NULL;
    m->streaming = 0;
    rt_xc_unmark(m);
    return rc;
}

TX_API int glm_model_load(tx_device_t *dev, const char *path, const struct glm_load_options *opt,
                          glm_model_t **out)
{
    uint64_t t0 = txp_begin();
    int rc = model_load(dev, path, opt, RT_LOAD_NORMAL, out);
    txp_end("load", t0);
    return rc;
}

int rt_model_load_mode(tx_device_t *dev, const char *path, const struct glm_load_options *opt,
                       int mode, glm_model_t **out)
{
    return model_load(dev, path, opt, mode, out);
}

void rt_model_free_now(glm_model_t *m)
{
    free_model(m);
}

static int model_load(tx_device_t *dev, const char *path, const struct glm_load_options *opt,
                      int ep_mode, glm_model_t **out)
{
    struct glm_load_options o;
    char err[TX_ERR_MAX];
    int rc;
    uint64_t *landed = NULL; /* io_state's, freed here */
    uint8_t *verified = NULL;

    if (!out)
        return tx_error(TX_EINVAL, "glm_model_load: out is NULL");
    *out = NULL;
    if (!dev || !path)
        return tx_error(TX_EINVAL, "glm_model_load: device or path is NULL");
    memset(&o, 0, sizeof(o));
    if (opt)
        o = *opt;
    double t0 = rt_now_ms();

    glm_model_t *m = calloc(1, sizeof(*m));
    if (!m)
        return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
    pthread_mutex_init(&m->lock, NULL);
    m->dev = dev;
    glm_moe_defaults(&m->moe);
    rc = tx_device_info(dev, &m->dinfo);
    if (rc) {
        rc = tx_error(rc, "glm_model_load: %s", tx_last_error());
        goto fail;
    }
    const char *ab = getenv("TX_ATTENTION_BF16");
    if (ab && *ab && strcmp(ab, "0") && strcmp(ab, "1")) {
        rc = tx_error(TX_EINVAL, "glm_model_load: TX_ATTENTION_BF16=%s: expected 0 or 1", ab);
        goto fail;
    }
    m->attn_bf16 = TX8_IF_MINOR(m->dinfo.if_version) >= 7 && !(ab && !strcmp(ab, "0"));
    const char *mf = getenv("TX_MLA_FORM");
    if (mf && *mf && strcmp(mf, "absorbed") && strcmp(mf, "expanded") && strcmp(mf, "auto")) {
        rc = tx_error(TX_EINVAL,
                      "glm_model_load: TX_MLA_FORM=%s: expected absorbed, expanded or auto", mf);
        goto fail;
    }
    m->mla_form = !mf ? 0 : !strcmp(mf, "absorbed") ? -1 : !strcmp(mf, "expanded") ? 1 : 0;
    rc = rt_dgraph_mode_parse(getenv("TX_DECODE_GRAPH"), &m->dg_mode);
    if (rc) {
        rc = tx_error(rc, "glm_model_load: %s", tx_last_error());
        goto fail;
    }
    const char *bi = getenv("TX_BATCH_INVARIANT");
    if (bi && *bi && strcmp(bi, "0") && strcmp(bi, "1")) {
        rc = tx_error(TX_EINVAL, "glm_model_load: TX_BATCH_INVARIANT=%s: expected 0 or 1", bi);
        goto fail;
    }
    if (bi && !strcmp(bi, "1"))
        o.flags |= GLM_LOAD_BATCH_INVARIANT;
    if (o.flags & GLM_LOAD_BATCH_INVARIANT) {
        if (!txd_can_batch_invariant(dev)) {
            rc = tx_error(TX_ENOTSUP,
                          "glm_model_load: batch-invariant decode (GLM_LOAD_BATCH_INVARIANT or "
                          "TX_BATCH_INVARIANT=1) needs a device of interface >= 1.6 (emu, or "
                          "/dev/accel with tx8.ko >= 1.2) (%s, interface %u.%u)",
                          m->dinfo.backend, TX8_IF_MAJOR(m->dinfo.if_version),
                          TX8_IF_MINOR(m->dinfo.if_version));
            goto fail;
        }
        m->submit_flags = TX_SUBMIT_BATCH_INVARIANT;
    }

    double tph = rt_now_ms();
    if ((rc = tx_smd_open(path, 0, &m->smd, err, sizeof(err)))) {
        rc = tx_error(rc, "glm_model_load: %s", err);
        goto fail;
    }
    size_t len = 0;
    const char *cj = tx_smd_config_json(m->smd, &len);
    if (!cj || (rc = glm_config_from_json(cj, &m->cfg, err, sizeof(err)))) {
        rc = tx_error(cj ? rc : TX_EINVAL, "%s: config: %s", path, cj ? err : "missing");
        goto fail;
    }
    if ((rc = load_gen_config(m, path)))
        goto fail;
    for (int l = 0; l < TX_SMD_LAYER_COUNT && l < RT_NLTYPES; l++) {
        const struct tx_smd_plan_entry *pe = tx_smd_plan(m->smd, (enum tx_smd_layer)l);
        if (!pe)
            continue;
        if (l < GLM_LAYER_TYPE_COUNT)
            m->stored_plan.precision[l] = (glm_precision_t)pe->precision;
        m->plan_group[l] = pe->group_size;
    }

    if (o.name && *o.name)
        snprintf(m->name, sizeof(m->name), "%.16s", o.name);
    else
        default_name(m, m->name, sizeof(m->name));
    snprintf(m->label_w, sizeof(m->label_w), "%.16s_Weights", m->name);
    snprintf(m->label_kv, sizeof(m->label_kv), "%.16s_KVCache", m->name);
    snprintf(m->label_act, sizeof(m->label_act), "%.16s_Activations", m->name);

    rt_debug("load: package opened and validated in %.1f ms", rt_now_ms() - tph);
    tph = rt_now_ms();
    rc = rt_build_tables(m);
    if (rc)
        goto fail;
    if (ep_mode != RT_LOAD_NORMAL && (!m->n_moe_layers || !rt_xc_expert_bytes(m))) {
        rc = tx_error(TX_EINVAL,
                      "%s: a model on several devices partitions its routed experts; this %s "
                      "package has none",
                      path, glm_arch_name(m->cfg.arch));
        goto fail;
    }
    if (ep_mode == RT_LOAD_EP_WORKER) {
        /* a rank > 0 of expert parallelism: the tables only (its experts
         * go to its devices' expert buffers, expert_parallel.c) */
        rt_xc_mark(m);
        m->load_ms = rt_now_ms() - t0;
        *out = m;
        return TX_OK;
    }
    if (ep_mode == RT_LOAD_EP_PRIMARY) {
        /* the primary of expert parallelism: everything but the routed
         * experts, which live in the devices' expert buffers */
        rt_xc_mark(m);
        o.flags &= ~(unsigned)(GLM_LOAD_STREAM | GLM_LOAD_EXPERT_CACHE);
        o.max_weight_bytes = 0;
    }

    uint64_t avail =
        m->dinfo.heap_size > m->dinfo.mem_used ? m->dinfo.heap_size - m->dinfo.mem_used : 0;
    /* Everything resident if it fits (and the caller allows it), else the
     * decoder layers stream through device-side slots. */
    uint64_t total_w = m->w_size;
    int too_big = o.max_weight_bytes && m->w_size > o.max_weight_bytes;
    int stream = (o.flags & GLM_LOAD_STREAM) || too_big;
    int want_xc = (o.flags & GLM_LOAD_EXPERT_CACHE) && !(o.flags & GLM_LOAD_STREAM);
    if (!stream && !want_xc) {
        rc = tx_bo_alloc(dev, m->w_size ? m->w_size : 4096, 0, m->label_w, &m->w_bo);
        if (rc == TX_ENOSPC && ep_mode == RT_LOAD_NORMAL) {
            rt_debug("load: %llu bytes of weights do not fit (%llu free)",
                     (unsigned long long)m->w_size, (unsigned long long)avail);
            stream = 1;
            too_big = 1;
        } else if (rc) {
            rc = tx_error(rc, "%s: cannot allocate the weights: %s", path, tx_last_error());
            goto fail;
        }
    }
    /* Too big (or asked for): the routed experts in an expert cache, the
     * rest resident -- unless even the rest does not fit, or the caller
     * asked for whole-layer streaming (GLM_LOAD_STREAM). */
    if ((want_xc || (too_big && !(o.flags & GLM_LOAD_STREAM))) && m->n_moe_layers &&
        rt_xc_expert_bytes(m)) {
        rc = load_expert_cache(m, &o, path);
        if (rc == TX_OK) {
            stream = 0;
        } else if (rc == TX_ENOSPC && !want_xc && !o.expert_cache_bytes) {
            rt_debug("load: no room for the expert cache (%s): streaming the layers",
                     tx_last_error());
            rc = TX_OK;
        } else {
            goto fail;
        }
    }
    if (!stream && !m->w_bo) {
        rc = tx_bo_alloc(dev, m->w_size ? m->w_size : 4096, 0, m->label_w, &m->w_bo);
        if (rc) {
            rc = tx_error(rc, "%s: cannot allocate the weights: %s", path, tx_last_error());
            goto fail;
        }
    }
    if (stream) {
        rc = rt_stream_setup(m);
        if (!rc)
            rc = tx_bo_alloc(dev, m->w_size ? m->w_size : 4096, 0, m->label_w, &m->w_bo);
        if (rc) {
            rc = tx_error(rc,
                          "%s: the weights need %llu bytes (%llu resident when streaming the "
                          "layers through 2 slots of %llu bytes); about %llu of %llu bytes of "
                          "device memory are free: %s",
                          path, (unsigned long long)total_w, (unsigned long long)m->w_size,
                          (unsigned long long)m->st.slot_size, (unsigned long long)avail,
                          (unsigned long long)m->dinfo.heap_size, tx_last_error());
            goto fail;
        }
    }
    rc = tx_bo_map(m->w_bo, &m->w_map);
    if (rc) {
        rc = tx_error(rc, "glm_model_load: cannot map the weights: %s", tx_last_error());
        goto fail;
    }

    /* Read the extents: io_uring in the background while the tokenizer is
     * parsed, then drain. */
    double tio = rt_now_ms();
    struct io_state io;
    memset(&io, 0, sizeof(io));
    io.m = m;
    io.fd_direct = -1;
    io.fd_buf = tx_smd_fd(m->smd);
    io.depth = o.io_depth ? o.io_depth : 32;
    /* per-tensor CRC32C by default (GLM_LOAD_NO_VERIFY turns it off) */
    io.verify = !(o.flags & GLM_LOAD_NO_VERIFY) || (o.flags & GLM_LOAD_VERIFY);
    io.landed = landed = calloc((size_t)(m->n_tensors ? m->n_tensors : 1), sizeof(*landed));
    io.verified = verified = calloc((size_t)(m->n_tensors ? m->n_tensors : 1), 1);
    if (!landed || !verified) {
        rc = tx_error(TX_ENOMEM, "glm_model_load: out of memory");
        goto fail;
    }
    const char *iov = getenv("TX_GLM_LOAD_IO"); /* debugging: pread | buffered | direct */
    if (iov && !strcmp(iov, "pread"))
        o.flags |= GLM_LOAD_NO_URING;
    else if (iov && !strcmp(iov, "direct"))
        o.flags |= GLM_LOAD_DIRECT;
    else if (iov && !strcmp(iov, "buffered"))
        o.flags &= ~GLM_LOAD_DIRECT;
    int use_uring = !(o.flags & GLM_LOAD_NO_URING);
    if (use_uring) {
        int r = io_uring_queue_init(io.depth * 2, &io.ring, 0);
        if (r < 0) {
            rt_debug("load: io_uring unavailable (%s), using pread", strerror(-r));
            use_uring = 0;
        } else {
            io.ring_ok = 1;
            if (o.flags & GLM_LOAD_DIRECT) {
                io.fd_direct = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
                io.direct = io.fd_direct >= 0;
            }
            if (io_pump(&io, 0)) {
                rc = tx_error(io.error, "%s: %s", path, io.msg);
                io_cleanup(&io);
                goto fail;
            }
        }
    }

    /* set-up overlapping the reads */
    double ttok = rt_now_ms();
    const char *tj = tx_smd_tokenizer_json(m->smd, &len);
    if (tj && (rc = tx_tokenizer_load_buffer(tj, len, &m->tok, err, sizeof(err)))) {
        if (use_uring)
            io_cleanup(&io);
        rc = tx_error(rc, "%s: tokenizer: %s", path, err);
        goto fail;
    }
    rt_debug("load: tokenizer parsed in %.1f ms (reads in flight: %llu bytes done)",
             rt_now_ms() - ttok, (unsigned long long)io.done_bytes);
    if (use_uring && io_pump(&io, 0)) {
        rc = tx_error(io.error, "%s: %s", path, io.msg);
        io_cleanup(&io);
        goto fail;
    }
    int E = m->cfg.n_routed_experts;
    m->counts_prev = calloc((size_t)(m->n_moe_layers ? m->n_moe_layers : 1) * (size_t)(E ? E : 1),
                            sizeof(uint64_t));
    m->overflow = calloc((size_t)(m->n_moe_layers ? m->n_moe_layers : 1), sizeof(uint64_t));
    m->cold_layer = calloc((size_t)(m->n_moe_layers ? m->n_moe_layers : 1), sizeof(int));
    if (!m->counts_prev || !m->overflow || !m->cold_layer) {
        if (use_uring)
            io_cleanup(&io);
        rc = tx_error(TX_ENOMEM, "glm_model_load: out of memory");
        goto fail;
    }

    if (use_uring) {
        int r = io_pump(&io, 1);
        uint64_t done = io.done_bytes;
        int direct = io.direct;
        m->io_ms = (io.t_last > 0 ? io.t_last : rt_now_ms()) - tio;
        io_cleanup(&io);
        if (r) {
            rc = tx_error(io.error, "%s: %s", path, io.msg);
            goto fail;
        }
        rt_debug("load: %llu bytes read with io_uring%s", (unsigned long long)done,
                 direct ? " (O_DIRECT)" : "");
    } else {
        tio = rt_now_ms();
        rc = read_pread(m);
        if (rc)
            goto fail;
        m->io_ms = rt_now_ms() - tio;
    }
    m->io_mib_s = m->io_ms > 0 ? (double)m->package_bytes / (1 << 20) / (m->io_ms / 1e3) : 0;

    double tv = rt_now_ms();
    if (io.verify) {
        /* what io_landed has not checked yet (the pread path); streamed
         * layers are read again from the file only with GLM_LOAD_VERIFY */
        for (int i = 0; i < m->n_tensors; i++) {
            if (m->tensors[i].streamed) {
                if ((o.flags & GLM_LOAD_VERIFY) &&
                    (rc = tx_smd_verify_tensor(m->smd, m->tensors[i].smd, err, sizeof(err)))) {
                    rc = tx_error(rc, "%s", err);
                    goto fail;
                }
                continue;
            }
            if (verified[i])
                continue;
            if ((rc = tx_smd_check_extent(m->smd, m->tensors[i].smd,
                                          (const uint8_t *)m->w_map + m->tensors[i].off, err,
                                          sizeof(err)))) {
                rc = tx_error(rc, "%s", err);
                goto fail;
            }
        }
        rt_debug("load: checksums: %.1f ms while the reads were in flight, %.1f ms after them",
                 io.verify_ms, rt_now_ms() - tv);
    } else {
        /* sparse indices are always checked: the device would refuse them
         * anyway, but with a less helpful message */
        for (int i = 0; i < m->n_tensors; i++) {
            const struct tx_smd_tensor *st = m->tensors[i].smd;
            if (st->format != TX8_WFMT_BLOCK_SPARSE || m->tensors[i].streamed)
                continue;
            const uint8_t *b = (const uint8_t *)m->w_map + m->tensors[i].off;
            if (tx_smd_check_sparse_index(b + (st->index_offset - st->data_offset), st->index_size,
                                          st->rows, st->cols, st->nnz_blocks, err, sizeof(err))) {
                rc = tx_error(TX_EINVAL, "%s: tensor '%s': %s", path,
                              tx_smd_tensor_name(m->smd, st), err);
                goto fail;
            }
        }
    }

    rc = rt_build_meta(m);
    if (rc)
        goto fail;
    if (m->st.on) {
        rc = rt_stream_load(m, 0, 0); /* the first pass finds layer 0 ready */
        if (rc)
            goto fail;
    }

    m->load_ms = rt_now_ms() - t0;
    rt_debug("loaded %s (%s, %d layers, %llu params) in %.1f ms; tensor reads done %.1f ms after "
             "submission = %.0f MiB/s",
             m->name, glm_arch_name(m->cfg.arch), m->cfg.num_hidden_layers,
             (unsigned long long)m->n_params, m->load_ms, m->io_ms, m->io_mib_s);
    /* optional: a model that cannot be published still works */
    pthread_mutex_lock(&m->lock);
    rt_telemetry_open(m);
    pthread_mutex_unlock(&m->lock);
    free(landed);
    free(verified);
    *out = m;
    return TX_OK;

fail:
    free(landed);
    free(verified);
    free_model(m);
    return rc;
}

TX_API int glm_model_free(glm_model_t *m)
{
    if (!m)
        return TX_OK;
    pthread_mutex_lock(&m->lock);
    int n = m->n_sessions;
    pthread_mutex_unlock(&m->lock);
    if (n)
        return tx_error(TX_EBUSY, "glm_model_free: %d session(s) still use the model", n);
    free_model(m);
    return TX_OK;
}

TX_API const struct glm_config *glm_model_config(const glm_model_t *m)
{
    return m ? &m->cfg : NULL;
}

TX_API const char *glm_model_name(const glm_model_t *m)
{
    return m ? m->name : "";
}

TX_API tx_device_t *glm_model_device(const glm_model_t *m)
{
    return m ? m->dev : NULL;
}

TX_API const struct tx_tokenizer *glm_model_tokenizer(const glm_model_t *m)
{
    return m ? m->tok : NULL;
}

TX_API int glm_model_info(glm_model_t *m, struct glm_model_info *info)
{
    if (!m || !info)
        return tx_error(TX_EINVAL, "glm_model_info: NULL argument");
    memset(info, 0, sizeof(*info));
    pthread_mutex_lock(&m->lock);
    info->n_params = m->n_params;
    info->n_params_active = m->n_params_active;
    info->package_bytes = m->package_bytes;
    info->weights_bytes = m->w_size + m->meta_size;
    if (m->xc)
        info->weights_bytes += (uint64_t)m->xc->n_slots * m->xc->slot_size;
    for (int lt = 0; lt < RT_NLTYPES; lt++)
        for (int p = 0; p < GLM_PRECISION_COUNT; p++)
            info->converted_bytes += m->conv[lt][p].size;
    info->converted_bytes += m->ab.size;
    for (int i = 0; i < m->n_sessions; i++)
        info->kv_bytes += m->sessions[i]->kv_size;
    info->activation_bytes = m->act_size;
    glm_precision_plan_t plan;
    if (m->active_valid)
        plan = m->active;
    else
        rt_plan_of(m->dev, &plan, NULL);
    info->plan = plan;
    info->stored = m->stored_plan;
    info->decode_bytes_per_token = rt_decode_bytes(m, &plan);
    info->load_ms = m->load_ms;
    info->io_ms = m->io_ms;
    info->io_mib_s = m->io_mib_s;
    info->streaming = m->streaming;
    info->prefetch_hits = m->xc ? m->xc->hits : m->st.hits;
    info->prefetch_misses = m->xc ? m->xc->misses : m->st.misses;
    info->n_sessions = m->n_sessions;
    info->forwards = m->forwards;
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}
