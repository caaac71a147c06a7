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
 *
 * model_load runs the phases in order (docs/architecture.md): the options
 * with the environment's settings (load_options.c), load_begin,
 * load_package, the tables, place_weights (the weight store chosen once:
 * weight_store.h), read_weights, load_finish.
 */
#include "runtime/rt_internal.h"
#include "runtime/expert_cache.h"
#include "runtime/expert_parallel.h"
#include "runtime/weight_store.h"
#include "device/device_internal.h"

#include <tx-internal/tx_model_internal.h>

#include <tx-internal/tx_arch.h>
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
    if (role < 0 || role >= GLM_T_ROLE_COUNT || layer < -1 || layer >= rt_layers(m))
        return RT_NONE;
    return m->role_mat[role * (m->cfg.num_hidden_layers + 2) + layer + 1];
}

int rt_vec_of(const glm_model_t *m, int role, int layer)
{
    if (role < 0 || role >= GLM_T_ROLE_COUNT || layer < -1 || layer >= rt_layers(m))
        return RT_NONE;
    return m->role_vec[role * (m->cfg.num_hidden_layers + 2) + layer + 1];
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
    double t0;         /* when the reads started */
    int uring;         /* io_uring in use (else pread) */
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
        return io->error;
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
            return io->error;
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
            return io->error;
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
        return io->error;
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
            return io->error;
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
            return io->error;
        if (io_submit_more(io))
            return io->error;
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
            return io->error;
        }
        if (io_complete(io, cqe))
            return io->error;
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
    if (m->store)
        m->store->free(m); /* first: expert parallelism's rank 0 tells the workers to stop */
    rt_telemetry_close(m);
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

/* ---- the phases of a load --------------------------------------------------- */

/* The model object on dev, with the settings of o that shape it. */
static int load_begin(tx_device_t *dev, const struct glm_load_options *o, glm_model_t **out)
{
    glm_model_t *m = calloc(1, sizeof(*m));
    if (!m)
        return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
    *out = m;
    pthread_mutex_init(&m->lock, NULL);
    m->dev = dev;
    glm_moe_defaults(&m->moe);
    int rc = tx_device_info(dev, &m->dinfo);
    if (rc)
        return tx_error(rc, "glm_model_load: %s", tx_last_error());
    m->attn_bf16 =
        TX8_IF_MINOR(m->dinfo.if_version) >= 7 && !(o->flags & GLM_LOAD_NO_ATTENTION_BF16);
    m->dsa_q8 = TX8_IF_MINOR(m->dinfo.if_version) >= 9 && !(o->flags & GLM_LOAD_NO_DSA_QUERY_Q8);
    m->mla_form = (o->flags & GLM_LOAD_MLA_ABSORBED)   ? -1
                  : (o->flags & GLM_LOAD_MLA_EXPANDED) ? 1
                                                       : 0;
    m->dg_mode = (o->flags & GLM_LOAD_NO_DECODE_GRAPH)       ? RT_DG_OFF
                 : (o->flags & GLM_LOAD_DECODE_GRAPH_VERIFY) ? RT_DG_VERIFY
                                                             : RT_DG_ON;
    /* the MTP layer: asked for, and not with whole-layer streaming
     * (rt_build_tables drops it when the package lacks it) */
    m->mtp = (o->flags & GLM_LOAD_MTP) && !(o->flags & GLM_LOAD_STREAM);
    if (o->flags & GLM_LOAD_BATCH_INVARIANT) {
        if (!txd_can_batch_invariant(dev))
            return tx_error(TX_ENOTSUP,
                            "glm_model_load: batch-invariant decode (GLM_LOAD_BATCH_INVARIANT or "
                            "TX_BATCH_INVARIANT=1) needs a device of interface >= 1.6 (emu, or "
                            "/dev/accel with tx8.ko >= 1.2) (%s, interface %u.%u)",
                            m->dinfo.backend, TX8_IF_MAJOR(m->dinfo.if_version),
                            TX8_IF_MINOR(m->dinfo.if_version));
        m->submit_flags = TX_SUBMIT_BATCH_INVARIANT;
    }
    return TX_OK;
}

/* The package: its config, generation config, stored plan; the names. */
static int load_package(glm_model_t *m, const struct glm_load_options *o, const char *path)
{
    char err[TX_ERR_MAX];
    int rc;
    double tph = rt_now_ms();
    if ((rc = tx_smd_open(path, 0, &m->smd, err, sizeof(err))))
        return tx_error(rc, "glm_model_load: %s", err);
    size_t len = 0;
    const char *cj = tx_smd_config_json(m->smd, &len);
    if (!cj || (rc = glm_config_from_json(cj, &m->cfg, err, sizeof(err))))
        return tx_error(cj ? rc : TX_EINVAL, "%s: config: %s", path, cj ? err : "missing");
    if ((rc = load_gen_config(m, path)))
        return rc;
    for (int l = 0; l < TX_SMD_LAYER_COUNT && l < RT_NLTYPES; l++) {
        const struct tx_smd_plan_entry *pe = tx_smd_plan(m->smd, (enum tx_smd_layer)l);
        if (!pe)
            continue;
        if (l < GLM_LAYER_TYPE_COUNT)
            m->stored_plan.precision[l] = (glm_precision_t)pe->precision;
        m->plan_group[l] = pe->group_size;
    }
    if (o->name && *o->name)
        snprintf(m->name, sizeof(m->name), "%.16s", o->name);
    else
        default_name(m, m->name, sizeof(m->name));
    snprintf(m->label_w, sizeof(m->label_w), "%.16s_Weights", m->name);
    snprintf(m->label_kv, sizeof(m->label_kv), "%.16s_KVCache", m->name);
    snprintf(m->label_act, sizeof(m->label_act), "%.16s_Activations", m->name);
    rt_debug("load: package opened and validated in %.1f ms", rt_now_ms() - tph);
    return TX_OK;
}

/* The weight stores to try, in order (n returned); TX_ENOSPC of all but
 * the last makes the next one try (*fall: the last that may). Everything
 * resident if it fits (and the caller allows it); else the routed experts
 * in an expert cache, the rest resident -- unless even the rest does not
 * fit, or the caller asked for whole-layer streaming (GLM_LOAD_STREAM). */
static int store_order(const glm_model_t *m, const struct glm_load_options *o, int ep_mode,
                       const struct rt_store_ops *try[3], int *fall)
{
    int has_xc = m->n_moe_layers && rt_xc_expert_bytes(m);
    int too_big = o->max_weight_bytes && m->w_size > o->max_weight_bytes;
    int n = 0;
    *fall = -1;
    if (ep_mode == RT_LOAD_EP_PRIMARY) {
        try[n++] = &rt_store_expert_parallel;
    } else if (o->flags & GLM_LOAD_STREAM) {
        try[n++] = &rt_store_streamed;
    } else if (o->flags & GLM_LOAD_EXPERT_CACHE) {
        try[n++] = has_xc    ? &rt_store_expert_cache
                   : too_big ? &rt_store_streamed
                             : &rt_store_resident;
    } else {
        if (!too_big)
            try[n++] = &rt_store_resident;
        if (has_xc)
            try[n++] = &rt_store_expert_cache;
        try[n++] = &rt_store_streamed;
        /* the expert cache gives way only to its default size */
        *fall = has_xc && o->expert_cache_bytes ? n - 3 : n - 2;
    }
    return n;
}

/* Choose the weight store and place the weights; w_bo mapped. */
static int place_weights(glm_model_t *m, const struct glm_load_options *o, const char *path,
                         int ep_mode)
{
    const struct rt_store_ops *try[3];
    int fall;
    int n = store_order(m, o, ep_mode, try, &fall);
    struct rt_place p = {o, path, 0, m->w_size, 0};
    p.avail = m->dinfo.heap_size > m->dinfo.mem_used ? m->dinfo.heap_size - m->dinfo.mem_used : 0;
    int rc = TX_ENOSPC;
    for (int i = 0; i < n && rc == TX_ENOSPC; i++) {
        m->store = try[i];
        p.may_fall = i <= fall;
        rc = m->store->place(m, &p);
        if (rc && (rc != TX_ENOSPC || !p.may_fall))
            return rc;
    }
    rt_debug("load: weights %s", m->store->name);
    rc = tx_bo_map(m->w_bo, &m->w_map);
    if (rc)
        return tx_error(rc, "glm_model_load: cannot map the weights: %s", tx_last_error());
    return TX_OK;
}

/* Start the extents' reads (io_uring in the background, or none: the
 * pread path in io_finish). */
static int io_start(struct io_state *io, glm_model_t *m, const struct glm_load_options *o,
                    const char *path)
{
    memset(io, 0, sizeof(*io));
    io->m = m;
    io->fd_direct = -1;
    io->fd_buf = tx_smd_fd(m->smd);
    io->depth = o->io_depth ? o->io_depth : 32;
    /* per-tensor CRC32C by default (GLM_LOAD_NO_VERIFY turns it off) */
    io->verify = !(o->flags & GLM_LOAD_NO_VERIFY) || (o->flags & GLM_LOAD_VERIFY);
    io->landed = calloc((size_t)(m->n_tensors ? m->n_tensors : 1), sizeof(*io->landed));
    io->verified = calloc((size_t)(m->n_tensors ? m->n_tensors : 1), 1);
    if (!io->landed || !io->verified)
        return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
    io->t0 = rt_now_ms();
    io->uring = !(o->flags & GLM_LOAD_NO_URING);
    if (!io->uring)
        return TX_OK;
    int r = io_uring_queue_init(io->depth * 2, &io->ring, 0);
    if (r < 0) {
        rt_debug("load: io_uring unavailable (%s), using pread", strerror(-r));
        io->uring = 0;
        return TX_OK;
    }
    io->ring_ok = 1;
    if (o->flags & GLM_LOAD_DIRECT) {
        io->fd_direct = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        io->direct = io->fd_direct >= 0;
    }
    if (io_pump(io, 0))
        return tx_error(io->error, "%s: %s", path, io->msg);
    return TX_OK;
}

/* The host side while the reads are in flight: the tokenizer, the MoE
 * counters' host copies. */
static int load_host_side(glm_model_t *m, struct io_state *io, const char *path)
{
    char err[TX_ERR_MAX];
    size_t len = 0;
    double ttok = rt_now_ms();
    const char *tj = tx_smd_tokenizer_json(m->smd, &len);
    int rc;
    if (tj && (rc = tx_tokenizer_load_buffer(tj, len, &m->tok, err, sizeof(err))))
        return tx_error(rc, "%s: tokenizer: %s", path, err);
    rt_debug("load: tokenizer parsed in %.1f ms (reads in flight: %llu bytes done)",
             rt_now_ms() - ttok, (unsigned long long)io->done_bytes);
    if (io->uring && io_pump(io, 0))
        return tx_error(io->error, "%s: %s", path, io->msg);
    int E = m->cfg.n_routed_experts;
    size_t nm = (size_t)(m->n_moe_layers ? m->n_moe_layers : 1);
    m->counts_prev = calloc(nm * (size_t)(E ? E : 1), sizeof(uint64_t));
    m->overflow = calloc(nm, sizeof(uint64_t));
    m->cold_layer = calloc(nm, sizeof(int));
    if (!m->counts_prev || !m->overflow || !m->cold_layer)
        return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
    return TX_OK;
}

/* Every read done (the io_uring ones drained, or all by pread). */
static int io_finish(struct io_state *io, glm_model_t *m, const char *path)
{
    if (!io->uring) {
        double tio = rt_now_ms();
        int rc = read_pread(m);
        if (rc)
            return rc;
        m->io_ms = rt_now_ms() - tio;
    } else {
        int r = io_pump(io, 1);
        uint64_t done = io->done_bytes;
        int direct = io->direct;
        m->io_ms = (io->t_last > 0 ? io->t_last : rt_now_ms()) - io->t0;
        io_cleanup(io);
        if (r)
            return tx_error(io->error, "%s: %s", path, io->msg);
        rt_debug("load: %llu bytes read with io_uring%s", (unsigned long long)done,
                 direct ? " (O_DIRECT)" : "");
    }
    m->io_mib_s = m->io_ms > 0 ? (double)m->package_bytes / (1 << 20) / (m->io_ms / 1e3) : 0;
    return TX_OK;
}

/* The checksums io_landed has not checked yet (the pread path); streamed
 * layers are read again from the file only with GLM_LOAD_VERIFY. Without
 * checksums the sparse indices still are: the device would refuse them
 * anyway, but with a less helpful message. */
static int verify_extents(glm_model_t *m, const struct io_state *io, unsigned flags,
                          const char *path)
{
    char err[TX_ERR_MAX];
    int rc;
    double tv = rt_now_ms();
    for (int i = 0; i < m->n_tensors; i++) {
        const struct rt_tensor *t = &m->tensors[i];
        if (!io->verify) {
            const struct tx_smd_tensor *st = t->smd;
            if (st->format != TX8_WFMT_BLOCK_SPARSE || t->streamed)
                continue;
            const uint8_t *b = (const uint8_t *)m->w_map + t->off;
            if (tx_smd_check_sparse_index(b + (st->index_offset - st->data_offset), st->index_size,
                                          st->rows, st->cols, st->nnz_blocks, err, sizeof(err)))
                return tx_error(TX_EINVAL, "%s: tensor '%s': %s", path,
                                tx_smd_tensor_name(m->smd, st), err);
        } else if (t->streamed) {
            if ((flags & GLM_LOAD_VERIFY) &&
                (rc = tx_smd_verify_tensor(m->smd, t->smd, err, sizeof(err))))
                return tx_error(rc, "%s", err);
        } else if (!io->verified[i] &&
                   (rc = tx_smd_check_extent(m->smd, t->smd, (const uint8_t *)m->w_map + t->off,
                                             err, sizeof(err)))) {
            return tx_error(rc, "%s", err);
        }
    }
    if (io->verify)
        rt_debug("load: checksums: %.1f ms while the reads were in flight, %.1f ms after them",
                 io->verify_ms, rt_now_ms() - tv);
    return TX_OK;
}

/* The extents into the weights BO, the tokenizer parsed meanwhile, then
 * checked. */
static int read_weights(glm_model_t *m, const struct glm_load_options *o, const char *path)
{
    struct io_state io;
    int rc = io_start(&io, m, o, path);
    if (!rc)
        rc = load_host_side(m, &io, path);
    if (!rc)
        rc = io_finish(&io, m, path);
    if (!rc)
        rc = verify_extents(m, &io, o->flags, path);
    io_cleanup(&io);
    free(io.landed);
    free(io.verified);
    return rc;
}

/* The meta BO, the store's last step, the telemetry channel. */
static int load_finish(glm_model_t *m, double t0)
{
    int rc = rt_build_meta(m);
    if (!rc)
        rc = m->store->ready(m);
    if (rc)
        return rc;
    m->load_ms = rt_now_ms() - t0;
    rt_debug("loaded %s (%s, %d layers, %llu params) in %.1f ms; tensor reads done %.1f ms after "
             "submission = %.0f MiB/s",
             m->name, glm_arch_name(m->cfg.arch), m->cfg.num_hidden_layers,
             (unsigned long long)m->n_params, m->load_ms, m->io_ms, m->io_mib_s);
    /* optional: a model that cannot be published still works */
    pthread_mutex_lock(&m->lock);
    rt_telemetry_open(m);
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}

/* A rank > 0 of expert parallelism keeps the package and the tables only
 * (its experts go to its devices' expert buffers, expert_parallel.c); the
 * primary everything but the routed experts. */
static int load_ep_role(glm_model_t *m, int ep_mode, const char *path)
{
    if (!m->n_moe_layers || !rt_xc_expert_bytes(m))
        return tx_error(TX_EINVAL,
                        "%s: a model on several devices partitions its routed experts; this %s "
                        "package has none",
                        path, glm_arch_name(m->cfg.arch));
    rt_xc_mark(m);
    if (ep_mode == RT_LOAD_EP_WORKER)
        m->store = &rt_store_expert_parallel;
    return TX_OK;
}

static int model_load(tx_device_t *dev, const char *path, const struct glm_load_options *opt,
                      int ep_mode, glm_model_t **out)
{
    if (!out)
        return tx_error(TX_EINVAL, "glm_model_load: out is NULL");
    *out = NULL;
    if (!dev || !path)
        return tx_error(TX_EINVAL, "glm_model_load: device or path is NULL");
    struct glm_load_options o;
    int rc = rt_load_options(opt, &o);
    if (rc)
        return rc;
    double t0 = rt_now_ms();
    glm_model_t *m = NULL;
    rc = load_begin(dev, &o, &m);
    if (!rc)
        rc = load_package(m, &o, path);
    if (!rc)
        rc = rt_build_tables(m);
    if (!rc && ep_mode != RT_LOAD_NORMAL)
        rc = load_ep_role(m, ep_mode, path);
    if (!rc && ep_mode == RT_LOAD_EP_WORKER) {
        m->load_ms = rt_now_ms() - t0;
        *out = m;
        return TX_OK;
    }
    if (!rc)
        rc = place_weights(m, &o, path, ep_mode);
    if (!rc)
        rc = read_weights(m, &o, path);
    if (!rc)
        rc = load_finish(m, t0);
    if (rc) {
        free_model(m);
        return rc;
    }
    *out = m;
    return TX_OK;
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
    m->store->info(m, info); /* its buffers, its prefetch figures */
    info->n_sessions = m->n_sessions;
    info->forwards = m->forwards;
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}
