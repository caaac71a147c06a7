/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: loading an .smd package onto a device, the weights in their
 * execution precisions, device memory of a model.
 *
 * Loading is zero copy: the package's tensor extents (data, scales and
 * sparse index, laid out exactly as the device wants them) are read by
 * io_uring straight into the mapped weights BO, O_DIRECT when the mapping
 * allows it, while the host parses the tokenizer and builds the tensor
 * tables (I/O overlaps set-up).
 *
 * Precision switching: the graph asks for a matrix in the precision of its
 * layer type (rt_weight_ref). If the stored tensor already has that type
 * it is used in place; otherwise a converted copy is made once (CONVERT
 * commands on the device; on the host only for sparse INT8 cases the
 * CONVERT command cannot express) into a BO per (layer type, precision),
 * and kept for later passes until glm_model_trim().
 */
#include "runtime/rt_internal.h"

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
    default:
        return TX8_DTYPE_F32;
    }
}

uint16_t rt_kv_dtype(glm_precision_t attention)
{
    switch (attention) {
    case FP32:
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
    int rc = tx_submit(m->dev, cb, &job);
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
/* Tables of tensors, matrices and vectors                                   */
/* ------------------------------------------------------------------------ */

static int add_mat(glm_model_t *m, int t, int ltype)
{
    if (m->n_mats == m->cap_mats) {
        int cap = m->cap_mats ? m->cap_mats * 2 : 256;
        void *p = realloc(m->mats, (size_t)cap * sizeof(*m->mats));
        if (!p)
            return -1;
        m->mats = p;
        m->cap_mats = cap;
    }
    struct rt_mat *x = &m->mats[m->n_mats];
    memset(x, 0, sizeof(*x));
    x->t = t;
    x->ltype = ltype;
    x->rows = m->tensors[t].smd->rows;
    x->cols = m->tensors[t].smd->cols;
    return m->n_mats++;
}

static int add_vec(glm_model_t *m, int t)
{
    if (m->n_vecs == m->cap_vecs) {
        int cap = m->cap_vecs ? m->cap_vecs * 2 : 256;
        void *p = realloc(m->vecs, (size_t)cap * sizeof(*m->vecs));
        if (!p)
            return -1;
        m->vecs = p;
        m->cap_vecs = cap;
    }
    struct rt_vec *v = &m->vecs[m->n_vecs];
    v->t = t;
    v->off = 0;
    v->n = (uint32_t)(m->tensors[t].smd->rows * m->tensors[t].smd->cols);
    return m->n_vecs++;
}

struct expect_ctx {
    glm_model_t *m;
    int missing;
    char name[GLM_TENSOR_NAME_MAX];
};

static int expect_cb(void *ctx, const struct glm_tensor_info *t)
{
    struct expect_ctx *c = ctx;
    if (!tx_smd_find(c->m->smd, t->name)) {
        c->missing = 1;
        snprintf(c->name, sizeof(c->name), "%s", t->name);
        return 1;
    }
    return 0;
}

static int build_tables(glm_model_t *m)
{
    const struct glm_config *cfg = &m->cfg;
    int L = cfg->num_hidden_layers, E = cfg->n_routed_experts;
    size_t nt = tx_smd_tensor_count(m->smd);
    char err[TX_ERR_MAX];
    const char *path = tx_smd_path(m->smd);

    m->tensors = calloc(nt ? nt : 1, sizeof(*m->tensors));
    m->n_role_slots = GLM_T_ROLE_COUNT * (L + 1);
    m->role_mat = malloc((size_t)m->n_role_slots * sizeof(int));
    m->role_vec = malloc((size_t)m->n_role_slots * sizeof(int));
    m->exp_mat = malloc((size_t)L * (size_t)(E > 0 ? E : 1) * 3 * sizeof(int));
    m->moe_index = malloc((size_t)L * sizeof(int));
    m->moe_layer = malloc((size_t)L * sizeof(int));
    if (!m->tensors || !m->role_mat || !m->role_vec || !m->exp_mat || !m->moe_index ||
        !m->moe_layer)
        return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
    for (int i = 0; i < m->n_role_slots; i++)
        m->role_mat[i] = m->role_vec[i] = RT_NONE;
    for (size_t i = 0; i < (size_t)L * (size_t)(E > 0 ? E : 1) * 3; i++)
        m->exp_mat[i] = RT_NONE;

    uint64_t off = 0;
    for (size_t i = 0; i < nt; i++) {
        const struct tx_smd_tensor *st = tx_smd_tensor_at(m->smd, i);
        const char *name = tx_smd_tensor_name(m->smd, st);
        struct glm_tensor_info info;
        int rc = glm_config_tensor_lookup(cfg, name, &info, err, sizeof(err));
        if (rc == 1)
            continue; /* MTP layer: ignored */
        if (rc)
            return tx_error(TX_EINVAL, "%s: tensor '%s' is not part of a %s model: %s", path, name,
                            glm_arch_name(cfg->arch), err);
        /* shape must match the architecture */
        int ok = st->ndim == info.ndim && st->shape[0] == (uint64_t)info.shape[0] &&
                 (info.ndim == 1 || st->shape[1] == (uint64_t)info.shape[1]);
        if (!ok)
            return tx_error(TX_EINVAL,
                            "%s: tensor '%s' has shape [%llu%s%llu] (ndim %u), the config "
                            "implies [%lld%s%lld]",
                            path, name, (unsigned long long)st->shape[0], st->ndim > 1 ? ", " : "",
                            st->ndim > 1 ? (unsigned long long)st->shape[1] : 0ull, st->ndim,
                            (long long)info.shape[0], info.ndim > 1 ? ", " : "",
                            info.ndim > 1 ? (long long)info.shape[1] : 0ll);
        if (info.ndim == 1 && st->format != TX8_WFMT_DENSE)
            return tx_error(TX_EINVAL, "%s: vector tensor '%s' is stored sparse", path, name);
        if (info.role == GLM_T_EMBED && st->format != TX8_WFMT_DENSE)
            return tx_error(TX_EINVAL,
                            "%s: embedding '%s' is stored sparse (EMBED needs a dense "
                            "table)",
                            path, name);
        int t = m->n_tensors++;
        struct rt_tensor *rt = &m->tensors[t];
        rt->smd = st;
        rt->info = info;
        rt->off = off;
        rt->ltype = (int)info.cls;
        off += st->extent_size;
        m->package_bytes += st->extent_size;
        uint64_t nel = (uint64_t)info.shape[0] * (uint64_t)(info.ndim == 2 ? info.shape[1] : 1);
        m->n_params += nel;
        if (info.role == GLM_T_EXP_GATE || info.role == GLM_T_EXP_UP || info.role == GLM_T_EXP_DOWN)
            m->n_params_active += E ? nel * (uint64_t)cfg->num_experts_per_tok / (uint64_t)E : 0;
        else
            m->n_params_active += nel;

        int slot = (int)info.role * (L + 1) + info.layer + 1;
        if (info.ndim == 1) {
            int v = add_vec(m, t);
            if (v < 0)
                return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
            m->role_vec[slot] = v;
        } else if (info.expert >= 0) {
            int k = info.role == GLM_T_EXP_GATE ? 0 : info.role == GLM_T_EXP_UP ? 1 : 2;
            int x = add_mat(m, t, rt->ltype);
            if (x < 0)
                return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
            m->exp_mat[((size_t)info.layer * (size_t)E + (size_t)info.expert) * 3 + (size_t)k] = x;
        } else {
            int x = add_mat(m, t, rt->ltype);
            if (x < 0)
                return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
            m->role_mat[slot] = x;
        }
    }
    m->w_size = off;

    /* every tensor of the architecture must be present */
    struct expect_ctx ec = {m, 0, ""};
    glm_config_tensor_list(cfg, expect_cb, &ec);
    if (ec.missing)
        return tx_error(TX_EINVAL, "%s: tensor '%s' is missing from the package", path, ec.name);

    /* tied lm_head: the embedding in the OUTPUT class */
    if (rt_mat_of(m, GLM_T_LM_HEAD, -1) == RT_NONE) {
        int e = rt_mat_of(m, GLM_T_EMBED, -1);
        if (e == RT_NONE)
            return tx_error(TX_EINVAL, "%s: no lm_head and no embedding", path);
        int x = add_mat(m, m->mats[e].t, GLM_OUTPUT);
        if (x < 0)
            return tx_error(TX_ENOMEM, "glm_model_load: out of memory");
        m->role_mat[GLM_T_LM_HEAD * (L + 1)] = x;
    }

    /* MoE layers */
    m->n_moe_layers = 0;
    for (int l = 0; l < L; l++) {
        m->moe_index[l] = -1;
        if (cfg->mlp_layer_types[l] == GLM_MLP_SPARSE) {
            m->moe_index[l] = m->n_moe_layers;
            m->moe_layer[m->n_moe_layers++] = l;
        }
    }
    /* DSA: a shared indexer layer needs an earlier full one */
    if (cfg->arch == GLM_ARCH_GLM_MOE_DSA) {
        int seen_full = 0;
        for (int l = 0; l < L; l++) {
            if (cfg->indexer_types[l] == GLM_INDEXER_FULL)
                seen_full = 1;
            else if (!seen_full)
                return tx_error(TX_EINVAL,
                                "%s: layer %d shares the DSA indexer selection but no earlier "
                                "layer runs the indexer",
                                path, l);
        }
    }
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
        io->error = TX_EINVAL;
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
            io->error = TX_EIO;
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
        io->error = TX_EIO;
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
            io->error = TX_EIO;
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
                return tx_error(TX_EIO, "%s: read of '%s' failed: %s", tx_smd_path(m->smd),
                                tx_smd_tensor_name(m->smd, t->smd), strerror(errno));
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
/* Meta BO: vectors, RoPE frequencies, expert tables, counters               */
/* ------------------------------------------------------------------------ */

static int tensor_to_f32(glm_model_t *m, int t, float *dst)
{
    char err[TX_ERR_MAX];
    const struct rt_tensor *rt = &m->tensors[t];
    int rc = tx_smd_dequant(rt->smd, (const uint8_t *)m->w_map + rt->off, dst, err, sizeof(err));
    if (rc)
        return tx_error(TX_EINVAL, "%s: %s", tx_smd_path(m->smd), err);
    return TX_OK;
}

static int build_meta(glm_model_t *m)
{
    const struct glm_config *cfg = &m->cfg;
    int E = cfg->n_routed_experts;
    uint64_t off = 0;
    for (int i = 0; i < m->n_vecs; i++) {
        m->vecs[i].off = off;
        off = ALIGN_UP(off + (uint64_t)m->vecs[i].n * 4, 64);
    }
    m->n_inv_freq = cfg->rotary_dim / 2;
    m->inv_freq_off = off;
    off = ALIGN_UP(off + (uint64_t)(m->n_inv_freq > 0 ? m->n_inv_freq : 1) * 4, 64);
    m->table_off = off;
    m->st.table_off = off;
    off = ALIGN_UP(off + (uint64_t)(m->st.on ? RT_SLOTS : m->n_moe_layers) * (uint64_t)E * 3 *
                             sizeof(struct tx8_weight),
                   64);
    m->counts_off = off;
    off = ALIGN_UP(off + (uint64_t)m->n_moe_layers * (uint64_t)E * 8, 64);
    m->meta_size = off ? off : 64;

    int rc = tx_bo_alloc(m->dev, m->meta_size, 0, m->label_w, &m->meta_bo);
    if (rc)
        return tx_error(rc,
                        "glm_model_load: cannot allocate %llu bytes of device memory for "
                        "norm weights and expert tables: %s",
                        (unsigned long long)m->meta_size, tx_last_error());
    rc = tx_bo_map(m->meta_bo, &m->meta_map);
    if (rc)
        return tx_error(rc, "glm_model_load: cannot map the meta buffer: %s", tx_last_error());
    for (int i = 0; i < m->n_vecs; i++) {
        rc = tensor_to_f32(m, m->vecs[i].t, (float *)((uint8_t *)m->meta_map + m->vecs[i].off));
        if (rc)
            return rc;
    }
    if (m->n_inv_freq > 0) {
        float *f = (float *)((uint8_t *)m->meta_map + m->inv_freq_off);
        if (glm_config_rope_inv_freq(cfg, f, m->n_inv_freq))
            return tx_error(TX_EINVAL, "glm_model_load: cannot compute the RoPE frequencies");
    }
    memset((uint8_t *)m->meta_map + m->counts_off, 0, (size_t)m->n_moe_layers * (size_t)E * 8);
    m->tables_prec = -1;
    return TX_OK;
}

/* ------------------------------------------------------------------------ */
/* Execution precisions                                                      */
/* ------------------------------------------------------------------------ */

/* Whether the stored tensor can serve precision p of class ltype as is. */
int rt_stored_fits(const glm_model_t *m, const struct rt_mat *x, glm_precision_t p)
{
    const struct tx_smd_tensor *st = m->tensors[x->t].smd;
    uint16_t want = x->ltype == RT_ROUTER ? TX8_DTYPE_F32 : rt_prec_dtype(p);
    if (st->dtype != want)
        return 0;
    if (x->ltype == GLM_EMBEDDING && st->dtype == TX8_DTYPE_I8 && st->group_size)
        return 0; /* EMBED takes one scale per row */
    return 1;
}

static glm_precision_t eff_prec(const struct rt_mat *x, glm_precision_t p)
{
    return x->ltype == RT_ROUTER ? FP32 : p;
}

/* INT8 group size of a converted copy. */
uint32_t rt_copy_group(const glm_model_t *m, const struct rt_mat *x)
{
    const struct tx_smd_tensor *st = m->tensors[x->t].smd;
    if (x->ltype == GLM_EMBEDDING || x->ltype == GLM_OUTPUT || x->ltype == RT_ROUTER)
        return 0;
    uint32_t g = m->plan_group[x->ltype];
    if (!g || st->cols % g)
        return 0;
    if (st->format == TX8_WFMT_BLOCK_SPARSE)
        return 0; /* sparse copies are quantised per row (host path) */
    return g;
}

uint64_t rt_copy_data_bytes(const glm_model_t *m, const struct rt_mat *x, uint16_t dtype)
{
    const struct tx_smd_tensor *st = m->tensors[x->t].smd;
    uint64_t n = st->format == TX8_WFMT_BLOCK_SPARSE ? (uint64_t)st->nnz_blocks * TX8_SPARSE_BLOCK
                                                     : (uint64_t)st->rows * st->cols;
    return n * tx_dtype_size(dtype);
}

uint64_t rt_copy_scales_bytes(const glm_model_t *m, const struct rt_mat *x, uint16_t dtype,
                              uint32_t g)
{
    const struct tx_smd_tensor *st = m->tensors[x->t].smd;
    if (dtype != TX8_DTYPE_I8)
        return 0;
    return (uint64_t)st->rows * (g ? st->cols / g : 1) * 4;
}

static void fill_stored_copy(glm_model_t *m, struct rt_mat *x, glm_precision_t p)
{
    const struct rt_tensor *t = &m->tensors[x->t];
    struct rt_copy *c = &x->copy[p];
    c->bo = m->w_bo;
    c->data = t->off;
    c->scales = t->smd->scales_offset ? t->off + (t->smd->scales_offset - t->smd->data_offset) : 0;
    c->dtype = t->smd->dtype;
    c->group = t->smd->group_size;
}

int rt_weight_ref(glm_model_t *m, int mi, glm_precision_t p, struct tx_weight_ref *w)
{
    struct rt_mat *x = &m->mats[mi];
    const struct rt_tensor *t = &m->tensors[x->t];
    p = eff_prec(x, p);
    if (t->streamed)
        return rt_stream_weight_ref(m, mi, p, w);
    struct rt_copy *c = &x->copy[p];
    if (!c->bo)
        return tx_error(TX_EINVAL, "internal: %s has no %s copy", t->info.name,
                        glm_precision_name(p));
    memset(w, 0, sizeof(*w));
    w->data = tx_ref(c->bo, c->data);
    if (c->dtype == TX8_DTYPE_I8)
        w->scales = tx_ref(c->bo, c->scales);
    w->rows = t->smd->rows;
    w->cols = t->smd->cols;
    w->dtype = c->dtype;
    w->format = t->smd->format;
    w->group_size = c->dtype == TX8_DTYPE_I8 ? c->group : 0;
    if (t->smd->format == TX8_WFMT_BLOCK_SPARSE) {
        w->nnz_blocks = t->smd->nnz_blocks;
        w->index = tx_ref(m->w_bo, t->off + (t->smd->index_offset - t->smd->data_offset));
    }
    return TX_OK;
}

/* Host conversion for sparse tensors involving INT8 (CONVERT cannot place
 * per-row scales of a block list). Reads the stored extent through the
 * mapping, writes the copy through the copy's mapping. */
void rt_host_convert_sparse(const struct tx_smd_tensor *st, const uint8_t *base,
                            const struct rt_copy *c, void *cmap)
{
    const uint32_t *row_ptr = (const uint32_t *)(base + (st->index_offset - st->data_offset));
    const uint16_t *colb = (const uint16_t *)(row_ptr + st->rows + 1);
    const float *sc = st->dtype == TX8_DTYPE_I8
                          ? (const float *)(base + (st->scales_offset - st->data_offset))
                          : NULL;
    uint32_t gpr = st->group_size ? st->cols / st->group_size : 1;
    uint8_t *dst = (uint8_t *)cmap + c->data;
    float *dsc = c->dtype == TX8_DTYPE_I8 ? (float *)((uint8_t *)cmap + c->scales) : NULL;
    float blk[TX8_SPARSE_BLOCK];
    for (uint32_t r = 0; r < st->rows; r++) {
        float amax = 0.0f;
        /* pass 1 (I8 output): row maximum */
        for (int pass = dsc ? 0 : 1; pass < 2; pass++) {
            float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
            for (uint32_t b = row_ptr[r]; b < row_ptr[r + 1]; b++) {
                for (int i = 0; i < TX8_SPARSE_BLOCK; i++) {
                    uint64_t k = (uint64_t)b * TX8_SPARSE_BLOCK + (uint64_t)i;
                    float v;
                    switch (st->dtype) {
                    case TX8_DTYPE_F32:
                        memcpy(&v, base + k * 4, 4);
                        break;
                    case TX8_DTYPE_F16: {
                        uint16_t h;
                        memcpy(&h, base + k * 2, 2);
                        v = tx_f16_to_f32(h);
                        break;
                    }
                    case TX8_DTYPE_BF16: {
                        uint16_t h;
                        memcpy(&h, base + k * 2, 2);
                        v = tx_bf16_to_f32(h);
                        break;
                    }
                    default: {
                        uint32_t col = (uint32_t)colb[b] * TX8_SPARSE_BLOCK + (uint32_t)i;
                        uint32_t gi = st->group_size ? col / st->group_size : 0;
                        v = (float)(int8_t)base[k] * sc[(uint64_t)r * gpr + gi];
                    }
                    }
                    blk[i] = v;
                }
                for (int i = 0; i < TX8_SPARSE_BLOCK; i++) {
                    uint64_t k = (uint64_t)b * TX8_SPARSE_BLOCK + (uint64_t)i;
                    float v = blk[i];
                    if (pass == 0) {
                        if (fabsf(v) > amax)
                            amax = fabsf(v);
                        continue;
                    }
                    switch (c->dtype) {
                    case TX8_DTYPE_F32:
                        memcpy(dst + k * 4, &v, 4);
                        break;
                    case TX8_DTYPE_F16: {
                        uint16_t h = tx_f32_to_f16(v);
                        memcpy(dst + k * 2, &h, 2);
                        break;
                    }
                    case TX8_DTYPE_BF16: {
                        uint16_t h = tx_f32_to_bf16(v);
                        memcpy(dst + k * 2, &h, 2);
                        break;
                    }
                    default: {
                        float q = nearbyintf(v * inv);
                        if (q > 127.0f)
                            q = 127.0f;
                        if (q < -127.0f)
                            q = -127.0f;
                        dst[k] = (uint8_t)(int8_t)q;
                    }
                    }
                }
            }
            if (pass == 1 && dsc)
                dsc[r] = amax / 127.0f;
        }
    }
}

/*
 * CONVERT commands making copy c (in dst_bo) of stored tensor st, whose
 * extent is at src_bo + src_off: F32/F16/BF16 directly; through f32 in tmp
 * for INT8 from F16/BF16 and for F16/BF16 from INT8; INT8 groups as
 * [rows * cols / g x g] matrices. Sparse tensors convert their data array
 * ([nnz_blocks x 32]) and keep the stored index (not for INT8: host path).
 */
int rt_emit_convert(tx_cmdbuf_t *cmd, const struct tx_smd_tensor *st, tx_bo_t *src_bo,
                    uint64_t src_off, tx_bo_t *dst_bo, const struct rt_copy *c, tx_bo_t *tmp)
{
    uint16_t dtype = c->dtype;
    uint32_t g = c->group;
    int s_i8 = st->dtype == TX8_DTYPE_I8, d_i8 = dtype == TX8_DTYPE_I8;
    int rc;
    tx_ref_t src = tx_ref(src_bo, src_off);
    tx_ref_t ssc =
        s_i8 ? tx_ref(src_bo, src_off + (st->scales_offset - st->data_offset)) : tx_ref(NULL, 0);
    uint32_t rows = st->rows, cols = st->cols;
    if (st->format == TX8_WFMT_BLOCK_SPARSE) {
        rows = st->nnz_blocks;
        cols = TX8_SPARSE_BLOCK;
    }
    struct tx_convert_args a;
    /* step 1: anything not directly convertible goes through f32 in tmp */
    uint16_t cur = st->dtype;
    if (s_i8) {
        uint32_t gs = st->group_size;
        memset(&a, 0, sizeof(a));
        a.dst = (dtype == TX8_DTYPE_F32) ? tx_ref(dst_bo, c->data) : tx_ref(tmp, 0);
        a.src = src;
        a.scales = ssc;
        a.rows = gs ? (uint32_t)((uint64_t)rows * cols / gs) : rows;
        a.cols = gs ? gs : cols;
        a.ld_dst = a.ld_src = a.cols;
        a.dst_dtype = TX8_DTYPE_F32;
        a.src_dtype = TX8_DTYPE_I8;
        if ((rc = tx_cmd_convert(cmd, &a)))
            return tx_error(rc, "weight conversion: %s", tx_last_error());
        if (dtype == TX8_DTYPE_F32)
            return TX_OK;
        src = tx_ref(tmp, 0);
        cur = TX8_DTYPE_F32;
    } else if (d_i8 && st->dtype != TX8_DTYPE_F32) {
        memset(&a, 0, sizeof(a));
        a.dst = tx_ref(tmp, 0);
        a.src = src;
        a.rows = rows;
        a.cols = cols;
        a.ld_dst = a.ld_src = cols;
        a.dst_dtype = TX8_DTYPE_F32;
        a.src_dtype = st->dtype;
        if ((rc = tx_cmd_convert(cmd, &a)))
            return tx_error(rc, "weight conversion: %s", tx_last_error());
        src = tx_ref(tmp, 0);
        cur = TX8_DTYPE_F32;
    }
    /* step 2: to the target */
    memset(&a, 0, sizeof(a));
    a.dst = tx_ref(dst_bo, c->data);
    a.src = src;
    if (d_i8) {
        a.scales = tx_ref(dst_bo, c->scales);
        a.rows = g ? (uint32_t)((uint64_t)rows * cols / g) : rows;
        a.cols = g ? g : cols;
    } else {
        a.rows = rows;
        a.cols = cols;
    }
    a.ld_dst = a.ld_src = a.cols;
    a.dst_dtype = dtype;
    a.src_dtype = cur;
    if ((rc = tx_cmd_convert(cmd, &a)))
        return tx_error(rc, "weight conversion: %s", tx_last_error());
    return TX_OK;
}

/*
 * Make every matrix of the classes whose precision differs available in the
 * plan's precision. Conversions of one class share a BO and run as one or
 * more device jobs; a temporary f32 BO holds intermediate results.
 */
static void trim_keep(glm_model_t *m, const glm_precision_plan_t *keep);

static int prepare_class(glm_model_t *m, int ltype, glm_precision_t p,
                         const glm_precision_plan_t *target)
{
    struct rt_conv_bo *cb = &m->conv[ltype][p];
    uint16_t dtype = rt_prec_dtype(p);
    uint64_t need = 0, tmp_need = 0;
    int n_conv = 0;

    for (int i = 0; i < m->n_mats; i++) {
        struct rt_mat *x = &m->mats[i];
        if (x->ltype != ltype || x->copy[p].bo || m->tensors[x->t].streamed)
            continue;
        if (rt_stored_fits(m, x, p)) {
            fill_stored_copy(m, x, p);
            continue;
        }
        uint32_t g = dtype == TX8_DTYPE_I8 ? rt_copy_group(m, x) : 0;
        need = ALIGN_UP(need, 256) + rt_copy_data_bytes(m, x, dtype);
        need = ALIGN_UP(need, 64) + rt_copy_scales_bytes(m, x, dtype, g);
        const struct tx_smd_tensor *st = m->tensors[x->t].smd;
        uint64_t f32b = (uint64_t)st->rows * st->cols * 4;
        if (st->format == TX8_WFMT_DENSE && f32b > tmp_need)
            tmp_need = f32b;
        n_conv++;
    }
    if (!n_conv)
        return TX_OK;
    if (cb->bo)
        return tx_error(TX_EINVAL, "internal: conversion BO of %s/%s already exists",
                        glm_layer_type_name((glm_layer_type_t)ltype), glm_precision_name(p));
    double t0 = rt_now_ms();
    int rc = tx_bo_alloc(m->dev, need ? need : 64, 0, m->label_w, &cb->bo);
    if (rc == TX_ENOSPC) {
        trim_keep(m, target);
        rc = tx_bo_alloc(m->dev, need ? need : 64, 0, m->label_w, &cb->bo);
    }
    if (rc)
        return tx_error(rc,
                        "precision %s for %s weights needs %llu more bytes of device memory "
                        "for converted copies: %s",
                        glm_precision_name(p), glm_layer_type_name((glm_layer_type_t)ltype),
                        (unsigned long long)need, tx_last_error());
    cb->size = need ? need : 64;
    rc = tx_bo_map(cb->bo, &cb->map);
    if (rc)
        goto fail;

    tx_bo_t *tmp = NULL;
    if (tmp_need) {
        rc = tx_bo_alloc(m->dev, tmp_need, 0, m->label_w, &tmp);
        if (rc) {
            rc = tx_error(rc, "conversion to %s needs a %llu byte scratch buffer: %s",
                          glm_precision_name(p), (unsigned long long)tmp_need, tx_last_error());
            goto fail;
        }
    }
    tx_cmdbuf_t *cmd = NULL;
    rc = tx_cmdbuf_create(m->dev, &cmd);
    if (rc)
        goto fail_tmp;

    uint64_t off = 0;
    size_t max_cmd = m->dinfo.max_cmd_size ? m->dinfo.max_cmd_size : (1u << 20);
    for (int i = 0; i < m->n_mats; i++) {
        struct rt_mat *x = &m->mats[i];
        if (x->ltype != ltype || x->copy[p].bo || m->tensors[x->t].streamed)
            continue;
        const struct rt_tensor *t = &m->tensors[x->t];
        const struct tx_smd_tensor *st = t->smd;
        struct rt_copy *c = &x->copy[p];
        uint32_t g = dtype == TX8_DTYPE_I8 ? rt_copy_group(m, x) : 0;
        off = ALIGN_UP(off, 256);
        c->data = off;
        off += rt_copy_data_bytes(m, x, dtype);
        off = ALIGN_UP(off, 64);
        c->scales = off;
        off += rt_copy_scales_bytes(m, x, dtype, g);
        c->dtype = dtype;
        c->group = g;
        int s_i8 = st->dtype == TX8_DTYPE_I8, d_i8 = dtype == TX8_DTYPE_I8;

        if (st->format == TX8_WFMT_BLOCK_SPARSE && (s_i8 || d_i8)) {
            rt_host_convert_sparse(st, (const uint8_t *)m->w_map + t->off, c, cb->map);
            c->bo = cb->bo;
            continue;
        }
        rc = rt_emit_convert(cmd, st, m->w_bo, t->off, cb->bo, c, tmp);
        if (rc)
            goto fail_cmd;
        c->bo = cb->bo;
        size_t bytes = 0;
        tx_cmdbuf_size(cmd, &bytes, NULL);
        if (bytes + 4 * sizeof(struct tx8_cmd_convert) > max_cmd) {
            rc = rt_run(m, cmd, "weight conversion", NULL);
            if (rc)
                goto fail_cmd;
            tx_cmdbuf_reset(cmd);
        }
    }
    rc = rt_run(m, cmd, "weight conversion", NULL);
    if (rc)
        goto fail_cmd;
    tx_cmdbuf_destroy(cmd);
    if (tmp)
        tx_bo_free(tmp);
    rt_debug("converted %d %s tensors to %s (%llu bytes) in %.1f ms", n_conv,
             glm_layer_type_name((glm_layer_type_t)ltype), glm_precision_name(p),
             (unsigned long long)need, rt_now_ms() - t0);
    return TX_OK;

fail_cmd:
    tx_cmdbuf_destroy(cmd);
fail_tmp:
    if (tmp)
        tx_bo_free(tmp);
fail:
    for (int i = 0; i < m->n_mats; i++)
        if (m->mats[i].ltype == ltype && m->mats[i].copy[p].bo == cb->bo)
            memset(&m->mats[i].copy[p], 0, sizeof(m->mats[i].copy[p]));
    tx_bo_free(cb->bo);
    memset(cb, 0, sizeof(*cb));
    return rc;
}

static int write_expert_tables(glm_model_t *m, glm_precision_t p)
{
    int E = m->cfg.n_routed_experts;
    struct tx8_weight *tab = (struct tx8_weight *)((uint8_t *)m->meta_map + m->table_off);
    for (int i = 0; i < m->n_moe_layers; i++) {
        int l = m->moe_layer[i];
        for (int e = 0; e < E; e++)
            for (int k = 0; k < 3; k++) {
                int mi = m->exp_mat[((size_t)l * (size_t)E + (size_t)e) * 3 + (size_t)k];
                struct tx_weight_ref w;
                if (mi == RT_NONE)
                    return tx_error(TX_EINVAL, "layer %d expert %d: weight missing", l, e);
                int rc = rt_weight_ref(m, mi, p, &w);
                if (rc)
                    return rc;
                rc =
                    tx_weight_encode(&w, &tab[((size_t)i * (size_t)E + (size_t)e) * 3 + (size_t)k]);
                if (rc)
                    return tx_error(rc, "expert table: %s", tx_last_error());
            }
    }
    m->tables_prec = (int)p;
    return TX_OK;
}

int rt_prepare_plan(glm_model_t *m, const glm_precision_plan_t *plan)
{
    if (m->active_valid && !memcmp(&m->active, plan, sizeof(*plan)))
        return TX_OK;
    for (int lt = 0; lt < RT_NLTYPES; lt++) {
        if (lt == GLM_NORM)
            continue; /* norms are f32 vectors */
        glm_precision_t p = lt == RT_ROUTER ? FP32 : plan->precision[lt];
        int rc = prepare_class(m, lt, p, plan);
        if (rc)
            return rc;
    }
    if (m->st.on) {
        int rc = rt_stream_prepare_plan(m, plan);
        if (rc)
            return rc;
    } else if (m->n_moe_layers && m->tables_prec != (int)plan->precision[GLM_EXPERT]) {
        int rc = write_expert_tables(m, plan->precision[GLM_EXPERT]);
        if (rc)
            return rc;
    }
    if (rt_debug_on()) {
        char buf[160];
        rt_debug("plan in force: %s", glm_plan_format(plan, buf, sizeof(buf)));
    }
    m->active = *plan;
    m->active_valid = 1;
    return TX_OK;
}

/* Free the conversion BOs that neither `keep` (may be NULL) nor the active
 * plan uses. */
static void trim_keep(glm_model_t *m, const glm_precision_plan_t *keep)
{
    for (int lt = 0; lt < RT_NLTYPES; lt++)
        for (int p = 0; p < GLM_PRECISION_COUNT; p++) {
            struct rt_conv_bo *cb = &m->conv[lt][p];
            if (!cb->bo)
                continue;
            if (lt == RT_ROUTER && p == FP32)
                continue;
            if (lt < GLM_LAYER_TYPE_COUNT) {
                if (m->active_valid && (int)m->active.precision[lt] == p)
                    continue;
                if (keep && (int)keep->precision[lt] == p)
                    continue;
            }
            for (int i = 0; i < m->n_mats; i++)
                if (m->mats[i].copy[p].bo == cb->bo)
                    memset(&m->mats[i].copy[p], 0, sizeof(m->mats[i].copy[p]));
            if (lt == GLM_EXPERT && m->tables_prec == p)
                m->tables_prec = -1; /* the tables named the freed copies */
            tx_bo_free(cb->bo);
            memset(cb, 0, sizeof(*cb));
        }
}

TX_API int glm_model_trim(glm_model_t *m)
{
    if (!m)
        return tx_error(TX_EINVAL, "glm_model_trim: model is NULL");
    pthread_mutex_lock(&m->lock);
    trim_keep(m, NULL);
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}

/* Bytes of weights one decode step reads under plan p (experts: top-k of
 * them per MoE layer; the embedding: one row). */
uint64_t rt_decode_bytes(const glm_model_t *m, const glm_precision_plan_t *plan)
{
    double total = 0;
    int E = m->cfg.n_routed_experts, k = m->cfg.num_experts_per_tok;
    for (int i = 0; i < m->n_mats; i++) {
        const struct rt_mat *x = &m->mats[i];
        const struct rt_tensor *t = &m->tensors[x->t];
        glm_precision_t p = x->ltype == RT_ROUTER ? FP32 : plan->precision[x->ltype];
        uint16_t dt = x->ltype == RT_ROUTER ? TX8_DTYPE_F32 : rt_prec_dtype(p);
        double elems = t->smd->format == TX8_WFMT_BLOCK_SPARSE
                           ? (double)t->smd->nnz_blocks * TX8_SPARSE_BLOCK
                           : (double)t->smd->rows * t->smd->cols;
        double b = elems * (double)tx_dtype_size(dt);
        if (dt == TX8_DTYPE_I8)
            b += (double)t->smd->rows * 4;
        if (x->ltype == GLM_EMBEDDING)
            b = (double)t->smd->cols * (double)tx_dtype_size(dt) + 4; /* one row */
        if (t->info.expert >= 0)
            b *= E ? (double)k / E : 0;
        total += b;
    }
    for (int i = 0; i < m->n_vecs; i++)
        total += (double)m->vecs[i].n * 4;
    return (uint64_t)total;
}

/* ------------------------------------------------------------------------ */
/* Activations                                                               */
/* ------------------------------------------------------------------------ */

int rt_ensure_act(glm_model_t *m, uint64_t bytes)
{
    if (m->act_bo && m->act_size >= bytes)
        return TX_OK;
    uint64_t sz = ALIGN_UP(bytes, 1u << 20);
    if (m->act_bo) {
        tx_bo_free(m->act_bo);
        m->act_bo = NULL;
        m->act_map = NULL;
        m->act_size = 0;
    }
    int rc = tx_bo_alloc(m->dev, sz, 0, m->label_act, &m->act_bo);
    if (rc)
        return tx_error(rc, "cannot allocate %llu bytes of device memory for activations: %s",
                        (unsigned long long)sz, tx_last_error());
    rc = tx_bo_map(m->act_bo, &m->act_map);
    if (rc) {
        tx_bo_free(m->act_bo);
        m->act_bo = NULL;
        return tx_error(rc, "cannot map the activation buffer: %s", tx_last_error());
    }
    m->act_size = sz;
    return TX_OK;
}

/* ------------------------------------------------------------------------ */
/* Load / free                                                               */
/* ------------------------------------------------------------------------ */

/* The package metadata's model_name (printable, no blanks, <= 16 bytes),
 * else the architecture's family name. */
static void default_name(const glm_model_t *m, char *out, size_t outsz)
{
    snprintf(out, outsz, "%s", m->cfg.arch == GLM_ARCH_GLM_MOE_DSA ? "GLM-5.1" : "GLM-4.5");
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

static void free_model(glm_model_t *m)
{
    if (!m)
        return;
    rt_telemetry_close(m);
    rt_stream_free(m);
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

TX_API int glm_model_load(tx_device_t *dev, const char *path, const struct glm_load_options *opt,
                          glm_model_t **out)
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

    double tph = rt_now_ms();
    if (tx_smd_open(path, 0, &m->smd, err, sizeof(err))) {
        rc = tx_error(TX_EINVAL, "glm_model_load: %s", err);
        goto fail;
    }
    size_t len = 0;
    const char *cj = tx_smd_config_json(m->smd, &len);
    if (!cj || glm_config_from_json(cj, &m->cfg, err, sizeof(err))) {
        rc = tx_error(TX_EINVAL, "%s: config: %s", path, cj ? err : "missing");
        goto fail;
    }
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
    rc = build_tables(m);
    if (rc)
        goto fail;

    uint64_t avail =
        m->dinfo.heap_size > m->dinfo.mem_used ? m->dinfo.heap_size - m->dinfo.mem_used : 0;
    /* Everything resident if it fits (and the caller allows it), else the
     * decoder layers stream through device-side slots. */
    uint64_t total_w = m->w_size;
    int stream =
        (o.flags & GLM_LOAD_STREAM) || (o.max_weight_bytes && m->w_size > o.max_weight_bytes);
    if (!stream) {
        rc = tx_bo_alloc(dev, m->w_size ? m->w_size : 4096, 0, m->label_w, &m->w_bo);
        if (rc == TX_ENOSPC) {
            rt_debug("load: %llu bytes of weights do not fit (%llu free): streaming the layers",
                     (unsigned long long)m->w_size, (unsigned long long)avail);
            stream = 1;
        } else if (rc) {
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
    if (tj && tx_tokenizer_load_buffer(tj, len, &m->tok, err, sizeof(err))) {
        if (use_uring)
            io_cleanup(&io);
        rc = tx_error(TX_EINVAL, "%s: tokenizer: %s", path, err);
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
                    tx_smd_verify_tensor(m->smd, m->tensors[i].smd, err, sizeof(err))) {
                    rc = tx_error(TX_EINVAL, "%s", err);
                    goto fail;
                }
                continue;
            }
            if (verified[i])
                continue;
            if (tx_smd_check_extent(m->smd, m->tensors[i].smd,
                                    (const uint8_t *)m->w_map + m->tensors[i].off, err,
                                    sizeof(err))) {
                rc = tx_error(TX_EINVAL, "%s", err);
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

    rc = build_meta(m);
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
    for (int lt = 0; lt < RT_NLTYPES; lt++)
        for (int p = 0; p < GLM_PRECISION_COUNT; p++)
            info->converted_bytes += m->conv[lt][p].size;
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
    info->prefetch_hits = m->st.hits;
    info->prefetch_misses = m->st.misses;
    info->n_sessions = m->n_sessions;
    info->forwards = m->forwards;
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}
