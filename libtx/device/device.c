/* SPDX-License-Identifier: MIT */
/*
 * libtx device layer, generic part: devices, buffer objects, submit, wait.
 * See include/tx/tx_device.h (API) and backend.h (the seam).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tx-internal/tx_errors.h>
#include "common/settings.h"
#include "device/device_internal.h"
#include "profile/profile_internal.h"

/* ---- profiling ($TX_PROFILE, docs/tuna.md) --------------------------------- */

struct txd_prof {
    struct tx_backend_bo b;
    uint64_t job, submit_ns;
    char **names;
    unsigned nnames;
    struct txd_prof *next;
};

static void prof_names_free(struct txd_prof *p)
{
    for (unsigned i = 0; i < p->nnames; i++)
        free(p->names[i]);
    free(p->names);
    p->names = NULL;
    p->nnames = 0;
}

/* The device records profiles (TX8_JOB_F_PROFILE): interface >= 1.5 and a
 * backend that passes the buffer (emu; accel with tx8.ko >= 1.1). */
static int dev_can_profile(struct tx_device *d)
{
    return TX8_IF_MINOR(d->info.if_version) >= 5 && d->ops->can_profile &&
           d->ops->can_profile(d->be);
}

/* Batch-invariant jobs (TX8_JOB_F_BATCH_INVARIANT): interface >= 1.6 and a
 * backend that passes the flag (emu; accel with tx8.ko >= 1.2). */
static int dev_can_batch_invariant(struct tx_device *d)
{
    return TX8_IF_MINOR(d->info.if_version) >= 6 && d->ops->can_batch_invariant &&
           d->ops->can_batch_invariant(d->be);
}

/* TX_SUBMIT_BATCH_INVARIANT in flags on a device without it: TX_ENOTSUP */
static int check_batch_invariant(struct tx_device *d, uint32_t flags, const char *fn)
{
    if (!(flags & TX_SUBMIT_BATCH_INVARIANT) || dev_can_batch_invariant(d))
        return TX_OK;
    return tx_error(TX_ENOTSUP,
                    "%s: batch-invariant jobs need a device of interface >= 1.6 (emu, or "
                    "/dev/accel with tx8.ko >= 1.2) (%s, interface %u.%u)",
                    fn, d->ops->name, TX8_IF_MAJOR(d->info.if_version),
                    TX8_IF_MINOR(d->info.if_version));
}

int txd_can_batch_invariant(tx_device_t *h)
{
    struct tx_device *d;
    int ok;

    if (txd_enter(h, &d, "tx_device") < 0)
        return 0;
    ok = dev_can_batch_invariant(d);
    txd_leave(d);
    return ok;
}

/* A profiling buffer for the next job, or NULL (profiling off, a device
 * without it, out of memory: the job then runs unprofiled). Oplock held. */
static struct txd_prof *prof_get(struct tx_device *d)
{
    if (!tx_profile_enabled() || !dev_can_profile(d))
        return NULL;
    pthread_mutex_lock(&d->lock);
    struct txd_prof *p = d->prof_free;
    if (p)
        d->prof_free = p->next;
    bool base = !d->prof_base;
    d->prof_base = true;
    pthread_mutex_unlock(&d->lock);
    if (base) { /* the expert-cache counters before the first profiled job */
        struct tx_device_counters c;
        if (d->ops->counters && d->ops->counters(d->be, &c) == TX_OK)
            txp_device_base(d->spec, c.dev.expert_cache_hits, c.dev.expert_cache_misses);
    }
    if (p)
        return p;
    p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->b.size = TXP_BUFFER_SIZE;
    if (d->ops->bo_alloc(d->be, &p->b, 0, "tx-profile") != TX_OK) {
        free(p);
        return NULL;
    }
    if (d->ops->bo_map(d->be, &p->b, &p->b.map) != TX_OK) {
        d->ops->bo_free(d->be, &p->b);
        free(p);
        return NULL;
    }
    return p;
}

static void prof_put(struct tx_device *d, struct txd_prof *p, uint64_t job)
{
    pthread_mutex_lock(&d->lock);
    if (job) {
        p->job = job;
        p->next = d->prof_busy;
        d->prof_busy = p;
    } else {
        prof_names_free(p);
        p->next = d->prof_free;
        d->prof_free = p;
    }
    pthread_mutex_unlock(&d->lock);
}

/* Job finished: hand its records to the profiler, recycle the buffer. */
static void prof_harvest(struct tx_device *d, uint64_t job)
{
    if (!tx_profile_enabled())
        return;
    pthread_mutex_lock(&d->lock);
    struct txd_prof **pp = &d->prof_busy, *p;
    while ((p = *pp) && p->job != job)
        pp = &p->next;
    if (p)
        *pp = p->next;
    pthread_mutex_unlock(&d->lock);
    if (!p)
        return;
    uint64_t done = tx_now_ns(); /* also the start of the profiler's own time */
    const struct tx8_prof_header *h = p->b.map;
    if (h->magic == TX8_PROF_MAGIC && h->version == TX8_PROF_VERSION) {
        unsigned cap = (unsigned)((p->b.size - sizeof(*h)) / sizeof(struct tx8_prof_record));
        unsigned n = h->count < cap ? h->count : cap;
        struct tx_device_info info;
        struct txp_job_counters jc = {0};
        if (d->ops->info(d->be, &info) == TX_OK)
            jc.mem_used = info.mem_used;
        struct tx_device_counters c;
        if (d->ops->counters && d->ops->counters(d->be, &c) == TX_OK) {
            jc.have_ec = 1;
            jc.ec_hits = c.dev.expert_cache_hits;
            jc.ec_misses = c.dev.expert_cache_misses;
        }
        if (d->ops->job_energy && d->ops->job_energy(d->be, job, &jc.energy_pj) == TX_OK)
            jc.have_energy = 1;
        txp_device_job(d->spec, h, (const struct tx8_prof_record *)(h + 1), n, p->names, p->nnames,
                       job, p->submit_ns, done, &jc);
    }
    prof_put(d, p, 0);
    txp_self_since(done);
}

static void prof_close(struct tx_device *d)
{
    struct txd_prof *lists[2] = {d->prof_busy, d->prof_free};
    for (int i = 0; i < 2; i++)
        while (lists[i]) {
            struct txd_prof *p = lists[i];
            lists[i] = p->next;
            prof_names_free(p);
            free(p); /* the backend's close releases the memory */
        }
    d->prof_busy = d->prof_free = NULL;
}

#define PAGE 4096ull
#define ARENA_SIZE (1ull << 20)
#define ARENA_ALIGN 64ull
/* Longest a blocking backend call runs before the generic layer looks
 * whether the device is being closed. */
#define WAIT_SLICE_NS 100000000ull

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

uint64_t tx_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tx_deadline(int64_t timeout_ns)
{
    uint64_t now;

    if (timeout_ns < 0)
        return UINT64_MAX;
    if (timeout_ns == 0)
        return 0;
    now = tx_now_ns();
    return (uint64_t)timeout_ns > UINT64_MAX - 1 - now ? UINT64_MAX - 1
                                                       : now + (uint64_t)timeout_ns;
}

/* The end of one slice of a blocking backend call that must end by
 * deadline (0: do not block). */
static uint64_t slice_end(uint64_t deadline)
{
    uint64_t slice;

    if (deadline == 0)
        return 0;
    slice = tx_now_ns() + WAIT_SLICE_NS;
    return slice < deadline ? slice : deadline;
}

void txd_label(char dst[TX8_LABEL_LEN], const char *src)
{
    memset(dst, 0, TX8_LABEL_LEN);
    if (src)
        strncpy(dst, src, TX8_LABEL_LEN - 1);
}

static void device_destroy(struct tx_obj *o)
{
    struct tx_device *d = (struct tx_device *)o;

    pthread_rwlock_destroy(&d->oplock);
    pthread_mutex_destroy(&d->lock);
    free(d->arena.q);
    free(d);
}

static void bo_destroy(struct tx_obj *o)
{
    struct tx_bo *bo = (struct tx_bo *)o;
    struct tx_device *d = bo->dev;

    free(bo);
    tx_obj_put(&d->obj);
}

int txd_enter(tx_device_t *h, struct tx_device **out, const char *fn)
{
    struct tx_device *d = (struct tx_device *)tx_handle_get(TX_HANDLE(h), TX_OBJ_DEVICE);

    if (!d)
        return tx_error(TX_EINVAL, "%s: %s device handle", fn,
                        h ? "invalid (closed or not a device)" : "NULL");
    pthread_rwlock_rdlock(&d->oplock);
    if (d->closed) {
        pthread_rwlock_unlock(&d->oplock);
        tx_obj_put(&d->obj);
        return tx_error(TX_EINVAL, "%s: the device was closed", fn);
    }
    *out = d;
    return TX_OK;
}

void txd_leave(struct tx_device *d)
{
    pthread_rwlock_unlock(&d->oplock);
    tx_obj_put(&d->obj);
}

struct tx_bo *txd_bo_get(tx_bo_t *h, const char *fn, const char *what, int *rc)
{
    struct tx_bo *bo = (struct tx_bo *)tx_handle_get(TX_HANDLE(h), TX_OBJ_BO);

    if (!bo)
        *rc = tx_error(TX_EINVAL, "%s: %s: %s buffer object", fn, what,
                       h ? "invalid (freed, its device closed, or not a BO)" : "NULL");
    return bo;
}

/* Enter a BO call: BO reference + its device entered. */
static int bo_enter(tx_bo_t *h, struct tx_bo **out, const char *fn)
{
    struct tx_device *d;
    struct tx_bo *bo;
    int rc = TX_OK;

    bo = txd_bo_get(h, fn, "bo", &rc);
    if (!bo)
        return rc;
    rc = txd_enter((tx_device_t *)(uintptr_t)bo->dev->obj.handle, &d, fn);
    if (rc < 0 || d != bo->dev) {
        if (rc == 0)
            txd_leave(d);
        tx_obj_put(&bo->obj);
        return rc < 0 ? rc : tx_error(TX_EINVAL, "%s: the BO's device was closed", fn);
    }
    *out = bo;
    return TX_OK;
}

static void bo_leave(struct tx_bo *bo)
{
    struct tx_device *d = bo->dev;

    tx_obj_put(&bo->obj);
    txd_leave(d);
}

static bool job_done(struct tx_device *d, uint64_t job)
{
    struct tx_job_result r;

    if (job == 0)
        return true;
    return d->ops->wait(d->be, job, 0, &r) != TX_ETIMEDOUT;
}

static void list_unlink(struct tx_bo **head, struct tx_bo *bo)
{
    if (bo->prev)
        bo->prev->next = bo->next;
    else if (*head == bo)
        *head = bo->next;
    if (bo->next)
        bo->next->prev = bo->prev;
    bo->prev = bo->next = NULL;
}

static void list_push(struct tx_bo **head, struct tx_bo *bo)
{
    bo->prev = NULL;
    bo->next = *head;
    if (*head)
        (*head)->prev = bo;
    *head = bo;
}

/* Free the backend memory of zombies whose jobs have finished. */
static void reap_zombies(struct tx_device *d)
{
    struct tx_bo *done = NULL, *bo, *next;

    pthread_mutex_lock(&d->lock);
    for (bo = d->zombies; bo; bo = next) {
        next = bo->next;
        if (bo->inflight == 0 && job_done(d, bo->last_job)) {
            list_unlink(&d->zombies, bo);
            list_push(&done, bo);
        }
    }
    pthread_mutex_unlock(&d->lock);
    for (bo = done; bo; bo = next) {
        next = bo->next;
        d->ops->bo_free(d->be, &bo->b);
        tx_obj_put(&bo->obj);
    }
}

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

static const struct tx_setting device_settings[] = {
    [TXD_SETTING_SUBMIT_TIMEOUT] = {"TX_SUBMIT_TIMEOUT_MS", TX_SETTING_UINT, "1..86399999", 1,
                                    86399999, "10000", 0, NULL,
                                    "how long a submission waits for room in a full device queue "
                                    "before TX_ETIMEDOUT, in ms"},
    [TXD_SETTING_DEVICE] = {"TX_DEVICE", TX_SETTING_TEXT,
                            "a device spec (emu:SOCKET, /dev/accel/"
                            "accelN)",
                            0, 0, "the first /dev/accel device, else emu:" TX_DEFAULT_EMU_SOCKET, 0,
                            NULL,
                            "the device a program opens when it names none (tx_device_open "
                            "with NULL or \"\"); also listed by tx_device_enumerate"},
};

const struct tx_setting_table tx_settings_device = {
    "device", "at every tx_device_open (and device lookup)", device_settings,
    sizeof(device_settings) / sizeof(device_settings[0])};

TX_API int tx_device_open(const char *spec, tx_device_t **out)
{
    const struct tx_backend_ops *ops;
    char path[TX_SPEC_MAX];
    struct tx_device *d;
    pthread_rwlockattr_t ra;
    struct tx_setting_val dset[TXD_SETTING_COUNT];
    uint64_t h;
    int rc;

    if (!out)
        return tx_error(TX_EINVAL, "tx_device_open: NULL result pointer");
    *out = NULL;
    rc = tx_backend_resolve(spec, &ops, path, sizeof(path));
    if (rc < 0)
        return rc;
    d = calloc(1, sizeof(*d));
    if (!d)
        return tx_error(TX_ENOMEM, "tx_device_open: out of memory");
    d->ops = ops;
    if ((size_t)snprintf(d->spec, sizeof(d->spec), "%s:%.*s", ops->name, (int)(sizeof(d->spec) - 8),
                         path) >= sizeof(d->spec))
        d->spec[sizeof(d->spec) - 1] = 0;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&d->oplock, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&d->lock, NULL);
    d->submit_timeout_ns = 10000000000ull;
    tx_settings_read(&tx_settings_device, "tx_device_open", dset);
    if (dset[TXD_SETTING_SUBMIT_TIMEOUT].set)
        d->submit_timeout_ns = dset[TXD_SETTING_SUBMIT_TIMEOUT].num * 1000000ull;

    rc = ops->open(path, &d->be);
    if (rc < 0) {
        device_destroy(&d->obj);
        return rc;
    }
    rc = ops->info(d->be, &d->info);
    if (rc < 0) {
        ops->close(d->be);
        device_destroy(&d->obj);
        return rc;
    }
    h = tx_handle_add(&d->obj, TX_OBJ_DEVICE, device_destroy);
    if (!h) {
        ops->close(d->be);
        device_destroy(&d->obj);
        return tx_error(TX_ENOMEM, "tx_device_open: out of memory");
    }
    tx_obj_put(&d->obj); /* the table keeps it */
    tx_debug("opened %s: %s, %" PRIu64 " MiB, %u cores", d->spec, d->info.name,
             d->info.mem_size >> 20, d->info.num_cores);
    *out = TX_PTR(tx_device_t, h);
    return TX_OK;
}

TX_API int tx_device_close(tx_device_t *h)
{
    struct tx_device *d = (struct tx_device *)tx_handle_get(TX_HANDLE(h), TX_OBJ_DEVICE);
    struct tx_bo *bo, *next, *all = NULL;

    if (!d)
        return tx_error(TX_EINVAL, "tx_device_close: %s device handle",
                        h ? "invalid (already closed or not a device)" : "NULL");
    if (tx_handle_remove(TX_HANDLE(h), TX_OBJ_DEVICE) < 0) {
        tx_obj_put(&d->obj);
        return tx_error(TX_EINVAL, "tx_device_close: the device is already being closed");
    }
    /* Wait for calls in progress (blocking ones give up within a slice). */
    __atomic_store_n(&d->closing, 1, __ATOMIC_RELEASE);
    pthread_rwlock_wrlock(&d->oplock);
    d->closed = true;
    pthread_mutex_lock(&d->lock);
    for (bo = d->bos; bo; bo = next) {
        next = bo->next;
        bo->dead = true;
        list_unlink(&d->bos, bo);
        list_push(&all, bo);
    }
    pthread_mutex_unlock(&d->lock);
    txd_cmdbuf_close_all(d);
    for (bo = all; bo; bo = next) {
        next = bo->next;
        tx_handle_remove(bo->obj.handle, TX_OBJ_BO);
    }
    for (bo = d->zombies; bo; bo = next) {
        next = bo->next;
        list_unlink(&d->zombies, bo);
        tx_obj_put(&bo->obj);
    }
    prof_close(d);
    /* The backend releases all device memory (BOs, arena) itself. */
    d->ops->close(d->be);
    d->be = NULL;
    while (d->arena.dedicated) {
        struct cmd_dedicated *x = d->arena.dedicated;

        d->arena.dedicated = x->next;
        free(x);
    }
    pthread_rwlock_unlock(&d->oplock);
    tx_obj_put(&d->obj);
    return TX_OK;
}

TX_API int tx_device_info(tx_device_t *h, struct tx_device_info *info)
{
    struct tx_device *d;
    int rc;

    if (!info)
        return tx_error(TX_EINVAL, "tx_device_info: NULL info");
    rc = txd_enter(h, &d, "tx_device_info");
    if (rc < 0)
        return rc;
    rc = d->ops->info(d->be, info);
    txd_leave(d);
    return rc;
}

TX_API int tx_device_counters(tx_device_t *h, struct tx_device_counters *c)
{
    struct tx_device *d;
    int rc;

    if (!c)
        return tx_error(TX_EINVAL, "tx_device_counters: NULL counters");
    rc = txd_enter(h, &d, "tx_device_counters");
    if (rc < 0)
        return rc;
    memset(c, 0, sizeof(*c));
    c->own_queue = -1;
    rc = d->ops->counters(d->be, c);
    txd_leave(d);
    return rc;
}

TX_API int tx_device_memory_view(tx_device_t *h, struct tx_mem_region *r, size_t max, size_t *count)
{
    struct tx_device *d;
    int rc;

    if (!count || (max && !r))
        return tx_error(TX_EINVAL, "tx_device_memory_view: %s",
                        !count ? "NULL count" : "NULL regions with max > 0");
    rc = txd_enter(h, &d, "tx_device_memory_view");
    if (rc < 0)
        return rc;
    *count = 0;
    if (!d->ops->memory_view)
        rc = tx_error(TX_ENOTSUP, "tx_device_memory_view: the %s backend has no memory view",
                      d->ops->name);
    else
        rc = d->ops->memory_view(d->be, r, max, count);
    txd_leave(d);
    return rc;
}

TX_API int tx_device_reset(tx_device_t *h)
{
    struct tx_device *d;
    int rc;

    rc = txd_enter(h, &d, "tx_device_reset");
    if (rc < 0)
        return rc;
    rc = d->ops->reset(d->be);
    if (rc == 0)
        reap_zombies(d);
    txd_leave(d);
    return rc;
}

TX_API int tx_device_inject_fault(tx_device_t *h, enum tx_fault kind, uint32_t param,
                                  uint32_t count)
{
    struct tx_device *d;
    int rc;

    if ((unsigned)kind > TX_FAULT_ERROR)
        return tx_error(TX_EINVAL, "tx_device_inject_fault: unknown fault kind %u", (unsigned)kind);
    if (kind == TX_FAULT_SLOW && param == 0)
        return tx_error(TX_EINVAL, "tx_device_inject_fault: SLOW needs a delay in ms");
    rc = txd_enter(h, &d, "tx_device_inject_fault");
    if (rc < 0)
        return rc;
    if (!d->ops->inject_fault)
        rc = tx_error(TX_ENOTSUP, "tx_device_inject_fault: the %s backend cannot inject faults",
                      d->ops->name);
    else
        rc = d->ops->inject_fault(d->be, (uint32_t)kind, param, count);
    txd_leave(d);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Buffer objects                                                            */
/* ------------------------------------------------------------------------ */

TX_API int tx_bo_alloc(tx_device_t *h, uint64_t size, uint32_t flags, const char *label,
                       tx_bo_t **out)
{
    struct tx_device *d;
    struct tx_bo *bo;
    uint64_t handle;
    int rc;

    if (!out)
        return tx_error(TX_EINVAL, "tx_bo_alloc: NULL result pointer");
    *out = NULL;
    if (size == 0)
        return tx_error(TX_EINVAL, "tx_bo_alloc: size 0");
    if (flags & ~TX_BO_FLAGS_MASK)
        return tx_error(TX_EINVAL, "tx_bo_alloc: unknown flags 0x%x", flags);
    rc = txd_enter(h, &d, "tx_bo_alloc");
    if (rc < 0)
        return rc;
    if (size > d->info.heap_size) {
        rc = tx_error(TX_ENOSPC,
                      "tx_bo_alloc: %" PRIu64 " bytes is more than the device's %" PRIu64
                      " bytes of allocatable memory",
                      size, d->info.heap_size);
        goto out;
    }
    reap_zombies(d);
    bo = calloc(1, sizeof(*bo));
    if (!bo) {
        rc = tx_error(TX_ENOMEM, "tx_bo_alloc: out of memory");
        goto out;
    }
    bo->b.size = (size + PAGE - 1) & ~(PAGE - 1);
    bo->flags = flags;
    txd_label(bo->label, label);
    rc = d->ops->bo_alloc(d->be, &bo->b, flags, bo->label);
    if (rc < 0) {
        free(bo);
        goto out;
    }
    bo->dev = d;
    tx_obj_get(&d->obj);
    handle = tx_handle_add(&bo->obj, TX_OBJ_BO, bo_destroy);
    if (!handle) {
        d->ops->bo_free(d->be, &bo->b);
        bo_destroy(&bo->obj);
        rc = tx_error(TX_ENOMEM, "tx_bo_alloc: out of memory");
        goto out;
    }
    pthread_mutex_lock(&d->lock);
    list_push(&d->bos, bo);
    pthread_mutex_unlock(&d->lock);
    tx_obj_put(&bo->obj);
    *out = TX_PTR(tx_bo_t, handle);
out:
    txd_leave(d);
    return rc;
}

TX_API int tx_bo_free(tx_bo_t *h)
{
    struct tx_device *d;
    struct tx_bo *bo;
    bool busy;
    int rc;

    rc = bo_enter(h, &bo, "tx_bo_free");
    if (rc < 0)
        return rc;
    d = bo->dev;
    pthread_mutex_lock(&d->lock);
    if (bo->dead || tx_handle_remove(TX_HANDLE(h), TX_OBJ_BO) < 0) {
        pthread_mutex_unlock(&d->lock);
        bo_leave(bo);
        return tx_error(TX_EINVAL, "tx_bo_free: the BO was already freed");
    }
    bo->dead = true;
    list_unlink(&d->bos, bo);
    busy = bo->inflight > 0 || !job_done(d, bo->last_job);
    if (busy) {
        tx_obj_get(&bo->obj); /* the zombie list's reference */
        list_push(&d->zombies, bo);
    }
    pthread_mutex_unlock(&d->lock);
    if (!busy) {
        rc = d->ops->bo_free(d->be, &bo->b);
        if (rc == TX_EDEVICE_LOST)
            rc = TX_OK; /* nothing to give back to a dead device */
    }
    bo_leave(bo);
    return rc;
}

TX_API int tx_bo_map(tx_bo_t *h, void **ptr)
{
    struct tx_bo *bo;
    int rc;

    if (!ptr)
        return tx_error(TX_EINVAL, "tx_bo_map: NULL result pointer");
    *ptr = NULL;
    rc = bo_enter(h, &bo, "tx_bo_map");
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&bo->dev->lock);
    if (!bo->mapped) {
        rc = bo->dev->ops->bo_map(bo->dev->be, &bo->b, &bo->b.map);
        bo->mapped = rc == 0;
    }
    if (bo->mapped)
        *ptr = bo->b.map;
    pthread_mutex_unlock(&bo->dev->lock);
    bo_leave(bo);
    return rc;
}

TX_API int tx_bo_addr(tx_bo_t *h, uint64_t *addr)
{
    struct tx_bo *bo;
    int rc;

    if (!addr)
        return tx_error(TX_EINVAL, "tx_bo_addr: NULL result pointer");
    rc = bo_enter(h, &bo, "tx_bo_addr");
    if (rc < 0)
        return rc;
    *addr = bo->b.addr;
    bo_leave(bo);
    return TX_OK;
}

TX_API int tx_bo_size(tx_bo_t *h, uint64_t *size)
{
    struct tx_bo *bo;
    int rc;

    if (!size)
        return tx_error(TX_EINVAL, "tx_bo_size: NULL result pointer");
    rc = bo_enter(h, &bo, "tx_bo_size");
    if (rc < 0)
        return rc;
    *size = bo->b.size;
    bo_leave(bo);
    return TX_OK;
}

TX_API int tx_bo_set_label(tx_bo_t *h, const char *label)
{
    char l[TX8_LABEL_LEN];
    struct tx_bo *bo;
    int rc;

    rc = bo_enter(h, &bo, "tx_bo_set_label");
    if (rc < 0)
        return rc;
    txd_label(l, label);
    rc = bo->dev->ops->bo_set_label(bo->dev->be, &bo->b, l);
    if (rc == 0) {
        pthread_mutex_lock(&bo->dev->lock);
        memcpy(bo->label, l, sizeof(l));
        pthread_mutex_unlock(&bo->dev->lock);
    }
    bo_leave(bo);
    return rc;
}

TX_API int tx_bo_info(tx_bo_t *h, struct tx_bo_info *info)
{
    struct tx_bo *bo;
    int rc;

    if (!info)
        return tx_error(TX_EINVAL, "tx_bo_info: NULL info");
    rc = bo_enter(h, &bo, "tx_bo_info");
    if (rc < 0)
        return rc;
    memset(info, 0, sizeof(*info));
    info->addr = bo->b.addr;
    info->size = bo->b.size;
    info->flags = bo->flags;
    pthread_mutex_lock(&bo->dev->lock);
    memcpy(info->label, bo->label, TX8_LABEL_LEN);
    pthread_mutex_unlock(&bo->dev->lock);
    bo_leave(bo);
    return TX_OK;
}

/* ------------------------------------------------------------------------ */
/* Command arena: device memory for the commands of tx_submit()              */
/* ------------------------------------------------------------------------ */

static struct arena_chunk *arena_front(struct cmd_arena *a)
{
    return a->qlen ? &a->q[a->qhead] : NULL;
}

/* Drop finished chunks from the front, free finished dedicated BOs.
 * d->lock held (the backend calls made here do not block). */
static void arena_reclaim(struct tx_device *d)
{
    struct cmd_arena *a = &d->arena;
    struct cmd_dedicated **pp = &a->dedicated, *x;
    struct arena_chunk *c;

    while ((c = arena_front(a)) && (c->failed || (c->job && job_done(d, c->job)))) {
        a->qhead = (a->qhead + 1) % a->qcap;
        a->qlen--;
    }
    if (!a->qlen)
        a->head = 0;
    while ((x = *pp)) {
        if (x->failed || (x->job && job_done(d, x->job))) {
            *pp = x->next;
            d->ops->bo_free(d->be, &x->bo);
            free(x);
        } else {
            pp = &x->next;
        }
    }
}

/* Where len bytes fit in the ring, or UINT64_MAX. d->lock held. */
static uint64_t arena_place(struct cmd_arena *a, uint64_t len)
{
    struct arena_chunk *front = arena_front(a);
    uint64_t size = a->bo.size;

    if (!front)
        return len <= size ? 0 : UINT64_MAX;
    if (a->head > front->off) {
        /* live: [front, head); free: [head, size) and [0, front) */
        if (a->head + len <= size)
            return a->head;
        return len <= front->off ? 0 : UINT64_MAX;
    }
    /* wrapped, live: [front, size) and [0, head); head == front: full */
    if (a->head < front->off && a->head + len <= front->off)
        return a->head;
    return UINT64_MAX;
}

static int arena_push(struct cmd_arena *a, const struct arena_chunk *c)
{
    if (a->qlen == a->qcap) {
        unsigned ncap = a->qcap ? a->qcap * 2 : 64;
        struct arena_chunk *n = malloc(ncap * sizeof(*n));

        if (!n)
            return TX_ENOMEM;
        for (unsigned i = 0; i < a->qlen; i++)
            n[i] = a->q[(a->qhead + i) % a->qcap];
        free(a->q);
        a->q = n;
        a->qcap = ncap;
        a->qhead = 0;
    }
    a->q[(a->qhead + a->qlen) % a->qcap] = *c;
    a->qlen++;
    return 0;
}

static int arena_setup(struct tx_device *d)
{
    struct cmd_arena *a = &d->arena;
    int rc;

    if (a->have)
        return TX_OK;
    a->bo.size = ARENA_SIZE;
    rc = d->ops->bo_alloc(d->be, &a->bo, 0, "libtx-cmd");
    if (rc < 0)
        return rc;
    rc = d->ops->bo_map(d->be, &a->bo, &a->bo.map);
    if (rc < 0) {
        d->ops->bo_free(d->be, &a->bo);
        return rc;
    }
    a->map = a->bo.map;
    a->have = true;
    return TX_OK;
}

/* A BO of its own for a big command buffer. d->lock held. */
static int arena_dedicated(struct tx_device *d, const uint8_t *cmds, uint64_t len,
                           struct tx_backend_bo **cmd_bo)
{
    struct cmd_dedicated *x = calloc(1, sizeof(*x));
    void *map;
    int rc;

    if (!x)
        return tx_error(TX_ENOMEM, "tx_submit: out of memory");
    x->bo.size = (len + PAGE - 1) & ~(PAGE - 1);
    rc = d->ops->bo_alloc(d->be, &x->bo, 0, "libtx-cmd");
    if (rc < 0) {
        free(x);
        return rc;
    }
    rc = d->ops->bo_map(d->be, &x->bo, &map);
    if (rc < 0) {
        d->ops->bo_free(d->be, &x->bo);
        free(x);
        return rc;
    }
    memcpy(map, cmds, len);
    x->next = d->arena.dedicated;
    d->arena.dedicated = x;
    *cmd_bo = &x->bo;
    return TX_OK;
}

/*
 * Copy len bytes of commands into device memory: the arena (waiting for old
 * jobs when it is full, until deadline) or a dedicated BO. *cmd_bo and *cmd_off
 * say where; arena_commit() records the job that uses them.
 */
static int arena_alloc(struct tx_device *d, const uint8_t *cmds, uint64_t len, uint64_t deadline,
                       struct tx_backend_bo **cmd_bo, uint64_t *cmd_off)
{
    struct cmd_arena *a = &d->arena;
    struct arena_chunk c;
    int rc;

    memset(&c, 0, sizeof(c));
    c.len = (len + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
    *cmd_off = 0;

    pthread_mutex_lock(&d->lock);
    rc = arena_setup(d);
    if (rc == 0 && c.len > ARENA_SIZE / 4)
        rc = arena_dedicated(d, cmds, len, cmd_bo);
    if (rc < 0 || c.len > ARENA_SIZE / 4) {
        pthread_mutex_unlock(&d->lock);
        return rc;
    }
    for (;;) {
        struct arena_chunk *front;
        struct tx_job_result r;
        uint64_t off, wait_job;

        arena_reclaim(d);
        off = arena_place(a, c.len);
        if (off != UINT64_MAX) {
            c.off = off;
            if (arena_push(a, &c) < 0) {
                pthread_mutex_unlock(&d->lock);
                return tx_error(TX_ENOMEM, "tx_submit: out of memory");
            }
            a->head = off + c.len;
            memcpy(a->map + off, cmds, len);
            *cmd_bo = &a->bo;
            *cmd_off = off;
            pthread_mutex_unlock(&d->lock);
            return TX_OK;
        }
        /* Full: wait for the oldest job still holding space. */
        front = arena_front(a);
        wait_job = front ? front->job : 0;
        pthread_mutex_unlock(&d->lock);
        if (wait_job) {
            rc = d->ops->wait(d->be, wait_job, slice_end(deadline), &r);
            if (rc < 0 && rc != TX_ETIMEDOUT && rc != TX_ENOENT)
                return rc;
        } else {
            struct timespec ts = {0, 1000000};

            nanosleep(&ts, NULL); /* another thread's submit is in progress */
        }
        if (tx_now_ns() >= deadline || __atomic_load_n(&d->closing, __ATOMIC_ACQUIRE))
            return tx_error(TX_EBUSY, "tx_submit: no room for the commands: earlier jobs do not "
                                      "finish");
        pthread_mutex_lock(&d->lock);
    }
}

/* Record the outcome of the submit that used [cmd_bo, off] (job 0: failed). */
static void arena_commit(struct tx_device *d, struct tx_backend_bo *cmd_bo, uint64_t off,
                         uint64_t job)
{
    struct cmd_arena *a = &d->arena;

    pthread_mutex_lock(&d->lock);
    if (cmd_bo == &a->bo) {
        for (unsigned i = 0; i < a->qlen; i++) {
            struct arena_chunk *c = &a->q[(a->qhead + i) % a->qcap];

            if (c->job == 0 && !c->failed && c->off == off) {
                c->job = job;
                c->failed = job == 0;
                break;
            }
        }
    } else {
        for (struct cmd_dedicated *x = a->dedicated; x; x = x->next)
            if (&x->bo == cmd_bo) {
                x->job = job;
                x->failed = job == 0;
                break;
            }
    }
    arena_reclaim(d);
    pthread_mutex_unlock(&d->lock);
}

/* ------------------------------------------------------------------------ */
/* Submit and wait                                                           */
/* ------------------------------------------------------------------------ */

struct use_set {
    struct tx_bo **bos;
    struct tx_backend_bo_use *uses;
    unsigned n;
};

static void use_set_release(struct tx_device *d, struct use_set *s, uint64_t job)
{
    pthread_mutex_lock(&d->lock);
    for (unsigned i = 0; i < s->n; i++) {
        s->bos[i]->inflight--;
        if (job && job > s->bos[i]->last_job)
            s->bos[i]->last_job = job;
    }
    pthread_mutex_unlock(&d->lock);
    for (unsigned i = 0; i < s->n; i++)
        tx_obj_put(&s->bos[i]->obj);
    free(s->uses); /* s->bos lives in the same block */
    s->bos = NULL;
    s->uses = NULL;
    s->n = 0;
}

/*
 * Resolve BO handles into a use set (each BO once, accesses merged), taking
 * a reference and an in-flight mark on each. extra = room to leave for the
 * command BO in the device's range limit.
 */
static int use_set_build(struct tx_device *d, const char *fn, const uint64_t *handles,
                         const uint32_t *access, unsigned n, unsigned extra, struct use_set *s)
{
    unsigned limit = d->info.max_ranges ? d->info.max_ranges : TX8_JOB_MAX_RANGES;
    int rc = TX_OK;

    memset(s, 0, sizeof(*s));
    if (n + extra > limit)
        return tx_error(TX_EINVAL, "%s: the job uses %u buffer objects, the device allows %u", fn,
                        n + extra, limit);
    /* One block: uses[n + max(extra, 1)] (room for the command BO and the
     * profiling buffer), then bos[n]. */
    s->uses = calloc(1, (n + (extra ? extra : 1)) * sizeof(*s->uses) + n * sizeof(*s->bos));
    if (!s->uses)
        return tx_error(TX_ENOMEM, "%s: out of memory", fn);
    s->bos = (struct tx_bo **)(s->uses + n + (extra ? extra : 1));
    for (unsigned i = 0; i < n; i++) {
        struct tx_bo *bo;
        unsigned j;

        if (!access[i] || (access[i] & ~(uint32_t)TX_ACCESS_RW)) {
            rc = tx_error(TX_EINVAL, "%s: BO #%u: bad access 0x%x", fn, i, access[i]);
            break;
        }
        for (j = 0; j < s->n; j++)
            if (s->bos[j]->obj.handle == handles[i])
                break;
        if (j < s->n) {
            s->uses[j].access |= access[i];
            continue;
        }
        bo = (struct tx_bo *)tx_handle_get(handles[i], TX_OBJ_BO);
        if (!bo) {
            rc = tx_error(TX_EINVAL, "%s: BO #%u of the job is invalid (freed?)", fn, i);
            break;
        }
        if (bo->dev != d) {
            tx_obj_put(&bo->obj);
            rc = tx_error(TX_EINVAL, "%s: BO #%u belongs to another device", fn, i);
            break;
        }
        pthread_mutex_lock(&d->lock);
        if (bo->dead) {
            pthread_mutex_unlock(&d->lock);
            tx_obj_put(&bo->obj);
            rc = tx_error(TX_EINVAL, "%s: BO #%u of the job was freed", fn, i);
            break;
        }
        bo->inflight++;
        pthread_mutex_unlock(&d->lock);
        s->bos[s->n] = bo;
        s->uses[s->n].bo = &bo->b;
        s->uses[s->n].access = access[i];
        s->n++;
    }
    if (rc < 0)
        use_set_release(d, s, 0);
    return rc;
}

static int do_submit(struct tx_device *d, const char *fn, struct tx_backend_bo *cmd_bo,
                     uint64_t cmd_off, uint32_t cmd_size, struct use_set *s, unsigned nuses,
                     uint32_t flags, uint64_t user_data, uint64_t deadline, uint64_t *job,
                     struct tx_backend_bo *prof_use, uint64_t prof_addr, uint64_t prof_size)
{
    struct tx_backend_job j;
    int rc;

    memset(&j, 0, sizeof(j));
    j.cmd_bo = cmd_bo;
    j.cmd_offset = cmd_off;
    j.cmd_size = cmd_size;
    j.num_bos = nuses;
    j.bos = s->uses;
    j.flags = flags;
    j.user_data = user_data;
    /* the profiling buffer: in a BO of the job, or prof_use (added here) */
    if (prof_use) {
        s->uses[nuses].bo = prof_use;
        s->uses[nuses].access = TX_ACCESS_WRITE;
        j.num_bos = nuses + 1;
    }
    j.prof_addr = prof_addr;
    j.prof_size = prof_size;
    for (;;) {
        rc = d->ops->submit(d->be, &j, slice_end(deadline), job);
        if (rc != TX_EBUSY || tx_now_ns() >= deadline ||
            __atomic_load_n(&d->closing, __ATOMIC_ACQUIRE))
            break;
    }
    if (rc == TX_EBUSY)
        rc = tx_error(TX_EBUSY, "%s: the device's submission ring stayed full", fn);
    return rc;
}

TX_API int tx_submit_ex(tx_device_t *h, tx_cmdbuf_t *cb, uint32_t flags, uint64_t user_data,
                        tx_job_t *job)
{
    struct tx_device *d;
    struct use_set s;
    struct tx_backend_bo *cmd_bo = NULL;
    uint8_t *bytes = NULL;
    uint64_t *handles = NULL, cmd_off = 0, deadline, id = 0;
    uint32_t *access = NULL;
    unsigned nuses = 0;
    size_t len = 0;
    struct txd_prof *prof = NULL;
    uint64_t user_prof_bo = 0, user_prof_off = 0, user_prof_size = 0;
    int rc;

    if (!job)
        return tx_error(TX_EINVAL, "tx_submit: NULL job pointer");
    *job = 0;
    if (flags & ~(TX_SUBMIT_NO_IRQ | TX_SUBMIT_PROFILE | TX_SUBMIT_BATCH_INVARIANT))
        return tx_error(TX_EINVAL, "tx_submit: unknown flags 0x%x", flags);
    rc = txd_enter(h, &d, "tx_submit");
    if (rc < 0)
        return rc;
    rc = check_batch_invariant(d, flags, "tx_submit");
    if (rc)
        goto out;
    if (flags & TX_SUBMIT_PROFILE) {
        if (!dev_can_profile(d)) {
            rc = tx_error(TX_ENOTSUP,
                          "tx_submit: profiling needs a device of interface >= 1.5 (emu, or "
                          "accel with tx8.ko >= 1.1) (%s, interface %u.%u)",
                          d->ops->name, TX8_IF_MAJOR(d->info.if_version),
                          TX8_IF_MINOR(d->info.if_version));
            goto out;
        }
        rc = txd_cmdbuf_prof(cb, &user_prof_bo, &user_prof_off, &user_prof_size);
        if (rc < 0)
            goto out;
        if (!user_prof_bo) {
            rc = tx_error(TX_EINVAL,
                          "tx_submit: TX_SUBMIT_PROFILE without a buffer (tx_cmdbuf_profile)");
            goto out;
        }
    }
    rc = txd_cmdbuf_snapshot(cb, d, &bytes, &len, &handles, &access, &nuses);
    if (rc < 0)
        goto out;
    if (len > d->info.max_cmd_size) {
        rc = tx_error(TX_EINVAL, "tx_submit: %zu bytes of commands, the device takes at most %u",
                      len, d->info.max_cmd_size);
        goto out;
    }
    /* $TX_PROFILE's buffer is one more BO of the job: a job that already
     * uses as many as the device allows runs unprofiled (not in the trace) */
    unsigned max_bos = d->info.max_ranges ? d->info.max_ranges : TX8_JOB_MAX_RANGES;
    int auto_prof = !user_prof_bo && (uint64_t)nuses + 2 <= max_bos;
    uint64_t pt0 = auto_prof ? txp_begin() : 0;
    prof = auto_prof ? prof_get(d) : NULL;
    if (pt0)
        txp_self_since(pt0);
    rc = use_set_build(d, "tx_submit", handles, access, nuses, prof ? 2 : 1, &s);
    if (rc < 0)
        goto out;
    uint64_t prof_addr = 0, prof_size = 0;
    if (user_prof_bo) {
        for (unsigned i = 0; i < s.n; i++)
            if (s.bos[i]->obj.handle == user_prof_bo) {
                prof_addr = s.bos[i]->b.addr + user_prof_off;
                prof_size = user_prof_size;
                break;
            }
    } else if (prof) {
        memset(prof->b.map, 0, sizeof(struct tx8_prof_header)); /* no stale records */
        prof_addr = prof->b.addr;
        prof_size = prof->b.size;
        prof->submit_ns = tx_now_ns();
    }
    if (prof) {
        uint64_t t = tx_profile_now();
        txd_cmdbuf_take_names(cb, &prof->names, &prof->nnames);
        txp_self_since(t);
    }
    reap_zombies(d);
    deadline = tx_now_ns() + d->submit_timeout_ns;
    rc = arena_alloc(d, bytes, len, deadline, &cmd_bo, &cmd_off);
    if (rc == 0) {
        s.uses[s.n].bo = cmd_bo;
        s.uses[s.n].access = TX_ACCESS_READ;
        rc = do_submit(d, "tx_submit", cmd_bo, cmd_off, (uint32_t)len, &s, s.n + 1,
                       flags & ~TX_SUBMIT_PROFILE, user_data, deadline, &id,
                       prof ? &prof->b : NULL, prof_addr, prof_size);
        arena_commit(d, cmd_bo, cmd_off, rc == 0 ? id : 0);
    }
    use_set_release(d, &s, rc == 0 ? id : 0);
    if (rc == 0)
        *job = id;
    if (prof)
        prof_put(d, prof, rc == 0 ? id : 0);
    prof = NULL;
out:
    if (prof)
        prof_put(d, prof, 0);
    free(bytes);
    free(handles);
    free(access);
    txd_leave(d);
    return rc;
}

TX_API int tx_submit(tx_device_t *h, tx_cmdbuf_t *cb, tx_job_t *job)
{
    return tx_submit_ex(h, cb, 0, 0, job);
}

TX_API int tx_submit_raw(tx_device_t *h, const struct tx_raw_job *rj, tx_job_t *job)
{
    struct tx_device *d;
    struct tx_bo *cbo = NULL;
    struct use_set s;
    uint64_t *handles = NULL, id = 0;
    uint32_t *access = NULL;
    unsigned n, i, ci;
    int rc;

    if (!job || !rj)
        return tx_error(TX_EINVAL, "tx_submit_raw: NULL %s", !job ? "job pointer" : "job");
    *job = 0;
    if (rj->flags & ~(TX_SUBMIT_NO_IRQ | TX_SUBMIT_BATCH_INVARIANT))
        return tx_error(TX_EINVAL, "tx_submit_raw: unknown flags 0x%x", rj->flags);
    if (rj->num_bos && !rj->bos)
        return tx_error(TX_EINVAL, "tx_submit_raw: NULL bos with num_bos %u", rj->num_bos);
    if (rj->cmd_size == 0 || rj->cmd_size % 8)
        return tx_error(TX_EINVAL, "tx_submit_raw: cmd_size %u is not a non-zero multiple of 8",
                        rj->cmd_size);
    if (rj->num_bos > TX8_JOB_MAX_RANGES)
        return tx_error(TX_EINVAL, "tx_submit_raw: %u buffer objects, at most %u", rj->num_bos,
                        TX8_JOB_MAX_RANGES);
    rc = txd_enter(h, &d, "tx_submit_raw");
    if (rc < 0)
        return rc;
    rc = check_batch_invariant(d, rj->flags, "tx_submit_raw");
    if (rc)
        goto out;
    cbo = txd_bo_get(rj->cmd_bo, "tx_submit_raw", "cmd_bo", &rc);
    if (!cbo)
        goto out;
    if (cbo->dev != d || rj->cmd_offset > cbo->b.size ||
        rj->cmd_size > cbo->b.size - rj->cmd_offset || rj->cmd_offset % 8) {
        rc = tx_error(TX_EINVAL,
                      "tx_submit_raw: commands [%" PRIu64 ", +%u) are not inside the command BO "
                      "(%" PRIu64 " bytes, 8-byte aligned, same device)",
                      rj->cmd_offset, rj->cmd_size, cbo->b.size);
        goto out;
    }
    n = rj->num_bos + 1;
    handles = calloc(n, sizeof(*handles));
    access = calloc(n, sizeof(*access));
    if (!handles || !access) {
        rc = tx_error(TX_ENOMEM, "tx_submit_raw: out of memory");
        goto out;
    }
    for (i = 0; i < rj->num_bos; i++) {
        handles[i] = TX_HANDLE(rj->bos[i].bo);
        access[i] = rj->bos[i].access;
    }
    ci = rj->num_bos;
    handles[ci] = TX_HANDLE(rj->cmd_bo);
    access[ci] = TX_ACCESS_READ;
    rc = use_set_build(d, "tx_submit_raw", handles, access, n, 0, &s);
    if (rc < 0)
        goto out;
    reap_zombies(d);
    rc = do_submit(d, "tx_submit_raw", &cbo->b, rj->cmd_offset, rj->cmd_size, &s, s.n, rj->flags,
                   rj->user_data, tx_now_ns() + d->submit_timeout_ns, &id, NULL, 0, 0);
    use_set_release(d, &s, rc == 0 ? id : 0);
    if (rc == 0)
        *job = id;
out:
    if (cbo)
        tx_obj_put(&cbo->obj);
    free(handles);
    free(access);
    txd_leave(d);
    return rc;
}

TX_API const char *tx_job_status_str(uint32_t status)
{
    switch (status) {
    case TX_JOB_OK:
        return "ok";
    case TX_JOB_INVALID_CMD:
        return "invalid command";
    case TX_JOB_ADDR_FAULT:
        return "address fault";
    case TX_JOB_UNSUPPORTED_DTYPE:
        return "unsupported data type";
    case TX_JOB_ABORTED:
        return "aborted by reset";
    case TX_JOB_TIMEOUT:
        return "timed out";
    case TX_JOB_DEVICE_ERROR:
        return "device error";
    case TX_JOB_INVALID_JOB:
        return "invalid job";
    case TX_JOB_PENDING:
        return "pending";
    default:
        return "unknown status";
    }
}

TX_API int tx_wait(tx_device_t *h, tx_job_t job, int64_t timeout_ns, struct tx_job_result *res)
{
    struct tx_job_result r;
    struct tx_device *d;
    uint64_t deadline = tx_deadline(timeout_ns);
    int rc;

    if (job == 0)
        return tx_error(TX_EINVAL, "tx_wait: job 0 does not exist");
    memset(&r, 0, sizeof(r));
    r.job = job;
    r.status = TX_JOB_PENDING;
    for (;;) {
        uint64_t slice;

        rc = txd_enter(h, &d, "tx_wait");
        if (rc < 0)
            break;
        slice = slice_end(deadline);
        rc = d->ops->wait(d->be, job, slice, &r);
        if (rc == TX_OK) {
            reap_zombies(d);
            prof_harvest(d, job);
        }
        txd_leave(d);
        if (rc != TX_ETIMEDOUT || slice >= deadline)
            break;
    }
    if (rc == TX_OK) {
        r.job = job;
        if (r.status != TX_JOB_OK) {
            if (r.status == TX_JOB_ADDR_FAULT || r.status == TX_JOB_INVALID_JOB)
                rc = tx_error(TX_EJOB,
                              "job %" PRIu64 " failed: %s (command %d, address 0x%" PRIx64 ")", job,
                              tx_job_status_str(r.status), (int)r.fault_cmd, r.fault_addr);
            else if (r.status == TX_JOB_INVALID_CMD || r.status == TX_JOB_UNSUPPORTED_DTYPE)
                rc = tx_error(TX_EJOB, "job %" PRIu64 " failed: %s (command %d)", job,
                              tx_job_status_str(r.status), (int)r.fault_cmd);
            else
                rc = tx_error(TX_EJOB, "job %" PRIu64 " failed: %s", job,
                              tx_job_status_str(r.status));
        }
    } else if (rc == TX_ETIMEDOUT) {
        rc = tx_error(TX_ETIMEDOUT, "tx_wait: job %" PRIu64 " has not finished after %lld ns", job,
                      (long long)(timeout_ns < 0 ? 0 : timeout_ns));
    }
    if (res)
        *res = r;
    return rc;
}

TX_API int tx_job_energy(tx_device_t *h, tx_job_t job, uint64_t *energy_pj)
{
    struct tx_device *d;
    int rc;

    if (!energy_pj)
        return tx_error(TX_EINVAL, "tx_job_energy: NULL energy_pj");
    if (job == 0)
        return tx_error(TX_EINVAL, "tx_job_energy: job 0 does not exist");
    rc = txd_enter(h, &d, "tx_job_energy");
    if (rc < 0)
        return rc;
    if (!d->ops->job_energy)
        rc = tx_error(TX_ENOTSUP, "tx_job_energy: the %s backend does not report job energy",
                      d->ops->name);
    else
        rc = d->ops->job_energy(d->be, job, energy_pj);
    txd_leave(d);
    if (rc == TX_ETIMEDOUT)
        rc = tx_error(TX_ETIMEDOUT, "tx_job_energy: job %" PRIu64 " has not finished", job);
    return rc;
}

TX_API int tx_job_status(tx_device_t *h, tx_job_t job, struct tx_job_result *res)
{
    struct tx_job_result r;
    struct tx_device *d;
    int rc;

    if (!res)
        return tx_error(TX_EINVAL, "tx_job_status: NULL result");
    if (job == 0)
        return tx_error(TX_EINVAL, "tx_job_status: job 0 does not exist");
    rc = txd_enter(h, &d, "tx_job_status");
    if (rc < 0)
        return rc;
    memset(&r, 0, sizeof(r));
    rc = d->ops->wait(d->be, job, 0, &r);
    if (rc == TX_OK)
        prof_harvest(d, job);
    txd_leave(d);
    if (rc == TX_ETIMEDOUT) {
        memset(&r, 0, sizeof(r));
        r.status = TX_JOB_PENDING;
        rc = TX_OK;
    }
    r.job = job;
    if (rc == TX_OK)
        *res = r;
    return rc;
}
