/* SPDX-License-Identifier: MIT */
/*
 * libtx device layer: the backend seam.
 *
 * The generic layer (device.c, cmdbuf.c) implements the public API of
 * include/tx/tx_device.h: handles, argument checks, command building, the
 * command-buffer arena, deferred frees. A backend moves bytes to and from a
 * device: it allocates device memory, maps it, submits jobs and reports
 * their completion. Two backends exist:
 *
 *   emu    (backend_emu.c)   tx8-emu over its ivshmem socket (no kernel)
 *   accel  (backend_accel.c) tx8.ko through /dev/accel/accelN and libdrm
 *
 * A backend is a `const struct tx_backend_ops` with external linkage named
 * tx_backend_<name>_ops. registry.c lists them (the accel backend is compiled
 * in when libtx/device/backend_accel.c exists).
 *
 * Contract for every op:
 * - Return TX_OK or a negative TX_E* code and, on failure, record a message
 *   with tx_error() (libtx/include/tx-internal/tx_errors.h) that names the device.
 * - Be thread-safe: the generic layer calls ops of one backend instance from
 *   several threads at once, without holding any lock of its own (wait and
 *   submit may block for long).
 * - Arguments are already checked by the generic layer (non-NULL, sizes
 *   rounded to pages, labels NUL-terminated and < TX8_LABEL_LEN, BO lists
 *   deduplicated and not longer than info.max_ranges).
 * - Once the device is gone, return TX_EDEVICE_LOST quickly (never block,
 *   never crash, never raise SIGPIPE); bo_free and close still succeed.
 */
#ifndef TX_DEVICE_BACKEND_H
#define TX_DEVICE_BACKEND_H

#include <stdint.h>

#include <tx/tx_device.h>

struct tx_backend; /* a backend's device instance, opaque to the generic layer */

/*
 * A buffer object as the backend sees it. The generic layer embeds one in
 * each tx_bo_t and passes the same pointer to every op for that BO.
 */
struct tx_backend_bo {
    uint64_t size;        /* bytes, page multiple (set by the generic layer) */
    uint64_t addr;        /* device address (set by bo_alloc) */
    uint64_t handle;      /* backend's name for it: emu lease base, GEM handle */
    uint64_t mmap_offset; /* accel: GEM fake offset for mmap(); emu: unused */
    void *map;            /* CPU mapping, set by bo_map (the generic layer caches
                           * it and calls bo_map at most once per BO) */
    void *priv;           /* backend-private */
};

/* One BO a job may touch. */
struct tx_backend_bo_use {
    struct tx_backend_bo *bo;
    uint32_t access; /* TX8_ACCESS_* (non-zero) */
};

/*
 * A job: commands at cmd_bo + cmd_offset, cmd_size bytes (multiple of 8,
 * inside cmd_bo), and the BOs it may touch. bos[] contains cmd_bo (READ)
 * and no BO twice. The backend turns bos[] into the job's allowed ranges
 * (emu: descriptor ranges; accel: the submit ioctl's BO handle list).
 */
struct tx_backend_job {
    struct tx_backend_bo *cmd_bo;
    uint64_t cmd_offset;
    uint32_t cmd_size;
    uint32_t num_bos;
    const struct tx_backend_bo_use *bos;
    uint32_t flags; /* TX_SUBMIT_* */
    uint64_t user_data;
    /* Profiling buffer (interface >= 1.5, can_profile): a device range
     * inside one of bos with WRITE access, or prof_size 0 (no profiling). */
    uint64_t prof_addr, prof_size;
};

struct tx_backend_ops {
    const char *name; /* "emu", "accel" */

    /* Open the device at path (the spec without "emu:"/"accel:"). */
    int (*open)(const char *path, struct tx_backend **out);
    /* Release everything, including the device memory of BOs still
     * allocated (bo_free is not called for them) and per-BO priv data. */
    void (*close)(struct tx_backend *be);

    /* Fill info (all fields, current mem_used). */
    int (*info)(struct tx_backend *be, struct tx_device_info *info);

    /* Allocate bo->size bytes; set bo->addr and bo->handle (and
     * mmap_offset/priv as needed). label: NUL-terminated, may be "". */
    int (*bo_alloc)(struct tx_backend *be, struct tx_backend_bo *bo, uint32_t flags,
                    const char *label);
    /* Free it. Called only when no job that used it is unfinished. */
    int (*bo_free)(struct tx_backend *be, struct tx_backend_bo *bo);
    /* Map it into the process: *ptr = CPU address of byte 0 of the BO. */
    int (*bo_map)(struct tx_backend *be, struct tx_backend_bo *bo, void **ptr);
    int (*bo_set_label)(struct tx_backend *be, struct tx_backend_bo *bo, const char *label);

    /*
     * Queue the job; *job receives its id: non-zero, increasing per backend
     * instance. May block while the device's ring is full, at most until
     * deadline_ns (CLOCK_MONOTONIC), then TX_EBUSY.
     */
    int (*submit)(struct tx_backend *be, const struct tx_backend_job *job, uint64_t deadline_ns,
                  uint64_t *out_job);

    /*
     * Wait until job finished or CLOCK_MONOTONIC reaches deadline_ns
     * (0: do not block; UINT64_MAX: no limit). Returns TX_OK when it
     * finished, whatever its status (res filled, res->status != PENDING),
     * TX_ETIMEDOUT when not, TX_ENOENT for an id never returned by submit or
     * whose result is no longer kept (at least the last 1024 results must be
     * kept), TX_EDEVICE_LOST. May be called any number of times per job.
     */
    int (*wait)(struct tx_backend *be, uint64_t job, uint64_t deadline_ns,
                struct tx_job_result *res);

    /*
     * The energy (pJ) of a finished job, from its completion record
     * (interface >= 1.9): TX_OK, TX_ETIMEDOUT when it has not finished,
     * TX_ENOENT as wait, TX_ENOTSUP when the device (or driver) does not
     * carry it. Never blocks. NULL op = TX_ENOTSUP.
     */
    int (*job_energy)(struct tx_backend *be, uint64_t job, uint64_t *energy_pj);

    /* Counters (fill what the backend knows; zero the rest). */
    int (*counters)(struct tx_backend *be, struct tx_device_counters *c);
    /* Allocations in address order; *count = total (may exceed max).
     * NULL op = TX_ENOTSUP. */
    int (*memory_view)(struct tx_backend *be, struct tx_mem_region *r, size_t max, size_t *count);
    /* Abort every unfinished job of this instance (their results become
     * ABORTED or TIMEOUT) and make the instance usable again. */
    int (*reset)(struct tx_backend *be);
    /* enum tx_fault; NULL op = TX_ENOTSUP. */
    int (*inject_fault)(struct tx_backend *be, uint32_t kind, uint32_t param, uint32_t count);
    /* Non-zero when submit passes tx_backend_job.prof_* to the device
     * (TX8_JOB_F_PROFILE; the generic layer also needs interface >= 1.5).
     * NULL op = no profiling. */
    int (*can_profile)(struct tx_backend *be);
    /* Non-zero when submit passes TX_SUBMIT_BATCH_INVARIANT to the device
     * (TX8_JOB_F_BATCH_INVARIANT; the generic layer also needs interface
     * >= 1.6). NULL op = not passed. */
    int (*can_batch_invariant)(struct tx_backend *be);
};

extern const struct tx_backend_ops tx_backend_emu_ops;
extern const struct tx_backend_ops tx_backend_accel_ops;

/* registry.c: the backend for a spec, and the path to pass to its open. */
int tx_backend_resolve(const char *spec, const struct tx_backend_ops **ops, char *path,
                       size_t path_size);

/* CLOCK_MONOTONIC in ns, and "now + timeout" with the public timeout
 * convention (negative = infinite -> UINT64_MAX). */
uint64_t tx_now_ns(void);
uint64_t tx_deadline(int64_t timeout_ns);

#endif /* TX_DEVICE_BACKEND_H */
