/* SPDX-License-Identifier: MIT */
/*
 * libtx device layer: backend "accel", the tx8.ko kernel driver through
 * /dev/accel/accelN (UAPI: include/uapi/drm/tx8_accel.h, docs/uapi.md).
 *
 * Every op is one or two ioctls; the kernel does the ring, the fences and
 * the bookkeeping, so this backend keeps no job state of its own. Job ids
 * are the kernel's sequence numbers (increasing, never 0). BO mappings are
 * remembered so that close() can unmap what the generic layer still holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xf86drm.h>

#include <tx-internal/tx_errors.h>
#include "device/backend.h"
#include "uapi/drm/tx8_accel.h"

struct accel_map {
    void *addr;
    uint64_t size;
};

struct tx_backend {
    int fd;
    char path[TX_SPEC_MAX];
    struct drm_tx8_device_info info;

    pthread_mutex_t lock; /* maps */
    struct accel_map *maps;
    size_t nmaps, capmaps;
};

/* ioctl, restarted on EINTR/EAGAIN (drmIoctl); 0 or -errno. */
static int accel_ioctl(struct tx_backend *be, unsigned long req, void *arg)
{
    return drmIoctl(be->fd, req, arg) ? -errno : 0;
}

/* A failed ioctl as a TX_E* code with a message naming the device: the
 * driver's own meanings first (ENODEV/EIO: the device is gone; ENOMEM: out
 * of device memory), then libtx's one errno map (tx_errno_code). */
static int accel_fail(struct tx_backend *be, const char *what, int err)
{
    int code;

    switch (-err) {
    case ENODEV:
    case EIO:
        code = TX_EDEVICE_LOST;
        break;
    case ENOMEM:
        code = TX_ENOSPC;
        break;
    default:
        code = tx_errno_code(err);
        break;
    }
    if (code == TX_EDEVICE_LOST)
        return tx_error_final(code, "device %s: the device is gone (%s, in %s)", be->path,
                              strerror(-err), what);
    return tx_error(code, "%s: accel %s: %s", what, be->path, strerror(-err));
}

static int query(struct tx_backend *be, uint32_t type, void *data, uint32_t size)
{
    struct drm_tx8_query q;

    memset(&q, 0, sizeof(q));
    q.query = type;
    q.size = size;
    q.data = (uintptr_t)data;
    return accel_ioctl(be, DRM_IOCTL_TX8_QUERY, &q);
}

static void accel_close(struct tx_backend *be)
{
    if (!be)
        return;
    for (size_t i = 0; i < be->nmaps; i++)
        munmap(be->maps[i].addr, be->maps[i].size);
    free(be->maps);
    if (be->fd >= 0)
        close(be->fd); /* the kernel frees every BO and job record of the file */
    pthread_mutex_destroy(&be->lock);
    free(be);
}

static int accel_open(const char *path, struct tx_backend **out)
{
    struct tx_backend *be;
    drmVersionPtr ver;
    int rc;

    if (strlen(path) >= TX_SPEC_MAX)
        return tx_error(TX_EINVAL, "accel %s: path too long", path);
    be = calloc(1, sizeof(*be));
    if (!be)
        return tx_error(TX_ENOMEM, "accel %s: out of memory", path);
    be->fd = -1;
    pthread_mutex_init(&be->lock, NULL);
    snprintf(be->path, sizeof(be->path), "%s", path);

    be->fd = open(path, O_RDWR | O_CLOEXEC);
    if (be->fd < 0) {
        /* a node that cannot be opened is no device, unless permission is the reason */
        rc = tx_errno_code(errno) == TX_EPERM ? TX_EPERM : TX_ENODEV;
        rc = tx_error(rc, "accel %s: cannot open: %s", path, strerror(errno));
        goto err;
    }
    ver = drmGetVersion(be->fd);
    if (!ver || !ver->name || strcmp(ver->name, "tx8")) {
        rc = tx_error(TX_ENODEV, "accel %s: not a tx8 device (driver %s)", path,
                      ver && ver->name ? ver->name : "unknown");
        drmFreeVersion(ver);
        goto err;
    }
    drmFreeVersion(ver);
    rc = query(be, DRM_TX8_QUERY_DEVICE, &be->info, sizeof(be->info));
    if (rc) {
        rc = accel_fail(be, "tx_device_open", rc);
        goto err;
    }
    if (TX8_IF_MAJOR(be->info.if_version) != TX8_IF_VERSION_MAJOR) {
        rc = tx_error(TX_EPROTO, "accel %s: interface %u.%u, libtx needs %u.x", path,
                      TX8_IF_MAJOR(be->info.if_version), TX8_IF_MINOR(be->info.if_version),
                      TX8_IF_VERSION_MAJOR);
        goto err;
    }
    *out = be;
    return TX_OK;
err:
    accel_close(be);
    return rc;
}

static int accel_info(struct tx_backend *be, struct tx_device_info *info)
{
    struct drm_tx8_device_info d;
    int rc = query(be, DRM_TX8_QUERY_DEVICE, &d, sizeof(d));

    if (rc)
        return accel_fail(be, "tx_device_info", rc);
    memset(info, 0, sizeof(*info));
    snprintf(info->name, sizeof(info->name), "%.*s", (int)sizeof(d.name), d.name);
    snprintf(info->backend, sizeof(info->backend), "accel");
    snprintf(info->path, sizeof(info->path), "%s", be->path);
    info->if_version = d.if_version;
    info->num_cores = d.num_cores;
    info->mem_size = d.mem_size;
    info->mem_used = d.heap_used;
    info->heap_offset = d.heap_offset;
    info->heap_size = d.heap_size;
    info->dtypes = d.dtypes;
    info->caps = d.caps;
    info->max_ranges = d.max_bos; /* the command buffer included */
    info->max_cmd_size = d.max_cmd_size;
    info->max_topk = d.max_topk;
    info->sparse_block = d.sparse_block;
    info->sq_entries = d.sq_entries;
    info->numa_node = d.numa_node;
    info->core_clock_hz = d.core_clock_hz;
    info->boot_id = d.boot_id;
    info->client_id = (int32_t)d.client_id;
    return TX_OK;
}

static int accel_bo_alloc(struct tx_backend *be, struct tx_backend_bo *bo, uint32_t flags,
                          const char *label)
{
    struct drm_tx8_bo_create c;
    int rc;

    memset(&c, 0, sizeof(c));
    c.size = bo->size;
    c.flags = flags;
    snprintf(c.label, sizeof(c.label), "%s", label ? label : "");
    rc = accel_ioctl(be, DRM_IOCTL_TX8_BO_CREATE, &c);
    if (rc == -EINVAL && label && label[0])
        return tx_error(TX_EINVAL, "tx_bo_alloc: accel %s: refused (label '%s': printable ASCII)",
                        be->path, label);
    if (rc)
        return accel_fail(be, "tx_bo_alloc", rc);
    bo->addr = c.dev_addr;
    bo->handle = c.handle;
    bo->mmap_offset = c.mmap_offset;
    bo->size = c.size;
    return TX_OK;
}

static void forget_map(struct tx_backend *be, void *addr)
{
    pthread_mutex_lock(&be->lock);
    for (size_t i = 0; i < be->nmaps; i++) {
        if (be->maps[i].addr == addr) {
            munmap(addr, be->maps[i].size);
            be->maps[i] = be->maps[--be->nmaps];
            break;
        }
    }
    pthread_mutex_unlock(&be->lock);
}

static int accel_bo_free(struct tx_backend *be, struct tx_backend_bo *bo)
{
    struct drm_gem_close c;
    int rc;

    if (bo->map) {
        forget_map(be, bo->map);
        bo->map = NULL;
    }
    memset(&c, 0, sizeof(c));
    c.handle = (uint32_t)bo->handle;
    rc = accel_ioctl(be, DRM_IOCTL_GEM_CLOSE, &c);
    /* a removed device has let go of the memory already */
    if (rc && rc != -ENODEV)
        return accel_fail(be, "tx_bo_free", rc);
    return TX_OK;
}

static int accel_bo_map(struct tx_backend *be, struct tx_backend_bo *bo, void **ptr)
{
    void *p;

    pthread_mutex_lock(&be->lock);
    if (be->nmaps == be->capmaps) {
        size_t cap = be->capmaps ? be->capmaps * 2 : 64;
        struct accel_map *m = realloc(be->maps, cap * sizeof(*m));

        if (!m) {
            pthread_mutex_unlock(&be->lock);
            return tx_error(TX_ENOMEM, "tx_bo_map: out of memory");
        }
        be->maps = m;
        be->capmaps = cap;
    }
    p = mmap(NULL, bo->size, PROT_READ | PROT_WRITE, MAP_SHARED, be->fd, (off_t)bo->mmap_offset);
    if (p == MAP_FAILED) {
        int err = errno;

        pthread_mutex_unlock(&be->lock);
        return accel_fail(be, "tx_bo_map", -err);
    }
    be->maps[be->nmaps].addr = p;
    be->maps[be->nmaps].size = bo->size;
    be->nmaps++;
    pthread_mutex_unlock(&be->lock);
    *ptr = p;
    return TX_OK;
}

static int accel_bo_set_label(struct tx_backend *be, struct tx_backend_bo *bo, const char *label)
{
    struct drm_tx8_bo_set_label l;
    int rc;

    memset(&l, 0, sizeof(l));
    l.handle = (uint32_t)bo->handle;
    snprintf(l.label, sizeof(l.label), "%s", label ? label : "");
    rc = accel_ioctl(be, DRM_IOCTL_TX8_BO_SET_LABEL, &l);
    if (rc == -EINVAL)
        return tx_error(TX_EINVAL,
                        "tx_bo_set_label: accel %s: label '%s' refused (printable ASCII)", be->path,
                        label ? label : "");
    return rc ? accel_fail(be, "tx_bo_set_label", rc) : TX_OK;
}

/* CLOCK_MONOTONIC deadline -> the UAPI's absolute timeout. */
static int64_t uapi_deadline(uint64_t deadline_ns)
{
    if (deadline_ns >= (uint64_t)INT64_MAX)
        return INT64_MAX;
    return deadline_ns ? (int64_t)deadline_ns : 1; /* 0 means "now", not "never" */
}

static int accel_submit(struct tx_backend *be, const struct tx_backend_job *job,
                        uint64_t deadline_ns, uint64_t *out_job)
{
    struct drm_tx8_bo_ref stack_refs[32], *refs = stack_refs;
    struct drm_tx8_submit s;
    int rc;

    if (job->num_bos > be->info.max_bos)
        return tx_error(TX_EINVAL, "tx_submit: accel %s: %u buffer objects (at most %u)", be->path,
                        job->num_bos, be->info.max_bos);
    if (job->num_bos > sizeof(stack_refs) / sizeof(stack_refs[0])) {
        refs = calloc(job->num_bos, sizeof(*refs));
        if (!refs)
            return tx_error(TX_ENOMEM, "tx_submit: out of memory");
    }
    for (uint32_t i = 0; i < job->num_bos; i++) {
        refs[i].handle = (uint32_t)job->bos[i].bo->handle;
        refs[i].access = (job->bos[i].access & TX8_ACCESS_READ ? DRM_TX8_ACCESS_READ : 0) |
                         (job->bos[i].access & TX8_ACCESS_WRITE ? DRM_TX8_ACCESS_WRITE : 0);
    }
    memset(&s, 0, sizeof(s));
    s.cmd_handle = (uint32_t)job->cmd_bo->handle;
    s.cmd_offset = job->cmd_offset;
    s.cmd_size = job->cmd_size;
    s.bos = (uintptr_t)refs;
    s.bo_count = job->num_bos;
    s.bo_stride = sizeof(*refs);
    s.user_data = job->user_data;
    s.timeout_ns = uapi_deadline(deadline_ns);
    if (job->prof_size) {
        /* the profiling buffer is a range of one of the job's BOs: the
         * kernel takes it as that BO's handle and an offset in it */
        const struct tx_backend_bo *pb = NULL;

        for (uint32_t i = 0; i < job->num_bos && !pb; i++) {
            const struct tx_backend_bo *b = job->bos[i].bo;

            if (job->prof_addr >= b->addr && job->prof_addr - b->addr <= b->size &&
                job->prof_size <= b->size - (job->prof_addr - b->addr))
                pb = b;
        }
        if (!pb) {
            if (refs != stack_refs)
                free(refs);
            return tx_error(TX_EINVAL,
                            "tx_submit: accel %s: the profiling buffer at %#" PRIx64 " (+%" PRIu64
                            ") is in none of the job's buffer objects",
                            be->path, job->prof_addr, job->prof_size);
        }
        s.flags |= DRM_TX8_SUBMIT_PROFILE;
        s.prof_handle = (uint32_t)pb->handle;
        s.prof_offset = job->prof_addr - pb->addr;
        s.prof_size = job->prof_size;
    }
    if (job->flags & TX_SUBMIT_BATCH_INVARIANT)
        s.flags |= DRM_TX8_SUBMIT_BATCH_INVARIANT;
    /* the cmd BO is in bos[] already; the kernel would add it anyway */
    rc = accel_ioctl(be, DRM_IOCTL_TX8_SUBMIT, &s);
    if (refs != stack_refs)
        free(refs);
    if (rc == -EBUSY)
        return TX_EBUSY; /* the ring stayed full until the deadline: the caller retries */
    if (rc)
        return accel_fail(be, "tx_submit", rc);
    *out_job = s.seqno;
    return TX_OK;
}

/* DRM_IOCTL_TX8_WAIT for job until deadline_ns (0: poll) into *w. */
static int accel_wait_ioctl(struct tx_backend *be, uint64_t job, uint64_t deadline_ns,
                            struct drm_tx8_wait *w)
{
    int rc;

    memset(w, 0, sizeof(*w));
    w->seqno = job;
    w->timeout_ns = deadline_ns == 0 ? 0 : uapi_deadline(deadline_ns);
    rc = accel_ioctl(be, DRM_IOCTL_TX8_WAIT, w);
    if (rc == -ETIME)
        return TX_ETIMEDOUT;
    if (rc == -EINVAL)
        return tx_error(TX_ENOENT, "tx_wait: accel %s: job %" PRIu64 " was never submitted here",
                        be->path, job);
    if (rc == -ENOENT)
        return tx_error(TX_ENOENT,
                        "tx_wait: accel %s: the result of job %" PRIu64
                        " is no longer kept (only the last 1024 are)",
                        be->path, job);
    return rc ? accel_fail(be, "tx_wait", rc) : TX_OK;
}

/* tx8.ko 1.3 returns the energy of a job's completion record
 * (drm_tx8_wait.energy_pj), which a device of interface 1.9 fills. */
static int accel_job_energy(struct tx_backend *be, uint64_t job, uint64_t *energy_pj)
{
    struct drm_tx8_wait w;
    int rc;

    if (be->info.driver_version < ((1u << 16) | 3u) || TX8_IF_MINOR(be->info.if_version) < 9)
        return tx_error(TX_ENOTSUP,
                        "tx_job_energy: accel %s: needs tx8.ko >= 1.3 and a device of interface "
                        ">= 1.9",
                        be->path);
    rc = accel_wait_ioctl(be, job, 0, &w);
    if (rc == TX_OK)
        *energy_pj = w.energy_pj;
    return rc;
}

static int accel_wait(struct tx_backend *be, uint64_t job, uint64_t deadline_ns,
                      struct tx_job_result *res)
{
    struct drm_tx8_wait w;
    int rc = accel_wait_ioctl(be, job, deadline_ns, &w);

    if (rc != TX_OK)
        return rc;
    memset(res, 0, sizeof(*res));
    res->job = job;
    res->status = w.status;
    res->fault_cmd = w.fault_cmd;
    res->fault_addr = w.fault_addr;
    res->user_data = w.user_data;
    res->start_ns = w.start_ns;
    res->end_ns = w.end_ns;
    res->busy_ns = w.busy_ns;
    res->macs = w.macs;
    return TX_OK;
}

static int accel_counters(struct tx_backend *be, struct tx_device_counters *c)
{
    struct drm_tx8_counters k;
    int rc = query(be, DRM_TX8_QUERY_COUNTERS, &k, sizeof(k));

    if (rc)
        return accel_fail(be, "tx_device_counters", rc);
    memset(c, 0, sizeof(*c));
    c->dev.jobs_submitted = k.jobs_submitted;
    c->dev.jobs_completed = k.jobs_completed;
    c->dev.jobs_failed = k.jobs_failed;
    c->dev.commands = k.commands;
    c->dev.faults = k.faults;
    c->dev.resets = k.resets;
    c->dev.busy_ns = k.busy_ns;
    c->dev.bytes_read = k.bytes_read;
    c->dev.bytes_written = k.bytes_written;
    for (int i = 0; i < TX8_DTYPE_COUNT && i < DRM_TX8_MAX_DTYPES; i++)
        c->dev.macs[i] = k.macs[i];
    c->dev.macs_skipped = k.macs_skipped;
    c->dev.expert_cache_hits = k.expert_cache_hits;
    c->dev.expert_cache_misses = k.expert_cache_misses;
    for (uint32_t i = 0; i < k.num_cores && i < TX8_MAX_CORES && i < DRM_TX8_MAX_CORES; i++)
        c->dev.core_busy_ns[i] = k.core_busy_ns[i];
    c->clock_ns = k.clock_ns;
    c->heartbeat = k.heartbeat;
    c->state = k.state;
    /* The kernel drives one device queue for all its clients. */
    c->num_queues = 1;
    c->own_queue = 0;
    c->queues[0].owner = -1;
    c->queues[0].state = k.queue_state;
    c->queues[0].jobs_completed = k.queue_jobs_completed;
    c->queues[0].jobs_failed = k.queue_jobs_failed;
    c->queues[0].busy_ns = k.queue_busy_ns;
    c->queues[0].bytes_allocated = k.queue_bytes_leased;
    c->queues[0].completed_seqno = k.queue_completed_seqno;
    c->client.owner = -1;
    c->client.state = k.queue_state;
    c->client.jobs_completed = k.client_jobs_completed;
    c->client.jobs_failed = k.client_jobs_failed;
    c->client.busy_ns = k.client_busy_ns;
    c->client.bytes_allocated = k.client_mem;
    return TX_OK;
}

static int accel_reset(struct tx_backend *be)
{
    struct drm_tx8_reset r;
    int rc;

    memset(&r, 0, sizeof(r));
    rc = accel_ioctl(be, DRM_IOCTL_TX8_RESET, &r);
    return rc ? accel_fail(be, "tx_device_reset", rc) : TX_OK;
}

static int accel_inject_fault(struct tx_backend *be, uint32_t kind, uint32_t param, uint32_t count)
{
    struct drm_tx8_inject_fault f;
    int rc;

    memset(&f, 0, sizeof(f));
    f.kind = kind;
    f.param = kind == TX8_FAULT_SLOW ? param : 0;
    f.count = count;
    rc = accel_ioctl(be, DRM_IOCTL_TX8_INJECT_FAULT, &f);
    if (rc == -EPERM)
        return tx_error(TX_EPERM, "tx_device_inject_fault: accel %s: needs CAP_SYS_ADMIN",
                        be->path);
    return rc ? accel_fail(be, "tx_device_inject_fault", rc) : TX_OK;
}

/* tx8.ko passes a profiling buffer from driver version 1.1 on
 * (DRM_TX8_SUBMIT_PROFILE); the device needs interface 1.5 (checked by the
 * generic layer). */
static int accel_can_profile(struct tx_backend *be)
{
    return be->info.driver_version >= ((1u << 16) | 1u);
}

/* tx8.ko passes TX8_JOB_F_BATCH_INVARIANT from driver version 1.2 on
 * (DRM_TX8_SUBMIT_BATCH_INVARIANT); the device needs interface 1.6 (checked
 * by the generic layer). */
static int accel_can_batch_invariant(struct tx_backend *be)
{
    return be->info.driver_version >= ((1u << 16) | 2u);
}

const struct tx_backend_ops tx_backend_accel_ops = {
    .name = "accel",
    .open = accel_open,
    .close = accel_close,
    .info = accel_info,
    .bo_alloc = accel_bo_alloc,
    .bo_free = accel_bo_free,
    .bo_map = accel_bo_map,
    .bo_set_label = accel_bo_set_label,
    .submit = accel_submit,
    .wait = accel_wait,
    .job_energy = accel_job_energy,
    .counters = accel_counters,
    .memory_view = NULL,
    .reset = accel_reset,
    .inject_fault = accel_inject_fault,
    .can_profile = accel_can_profile,
    .can_batch_invariant = accel_can_batch_invariant,
};
