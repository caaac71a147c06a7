/* SPDX-License-Identifier: MIT */
/*
 * libtx device layer: TX8 devices, buffer objects, command buffers, jobs.
 *
 * One API over two backends: "accel" (the tx8.ko kernel driver,
 * /dev/accel/accelN) and "emu" (a tx8-emu device model reached over its UNIX
 * socket, no kernel involved). See docs/libtx-device.md.
 *
 * Conventions
 * - Every function returns TX_OK (0) or a negative enum tx_status code. On
 *   failure, tx_last_error() returns a message (per thread) naming what went
 *   wrong; tx_strerror(code) names the code. Success leaves the message as it
 *   was. No function exits or aborts the process on bad input.
 * - Devices, buffer objects and command buffers are opaque handles. A handle
 *   that was freed or closed is detected and refused with TX_EINVAL (it is
 *   never dereferenced), also after its memory would have been reused.
 * - All functions are thread-safe. Objects of one device may be used from
 *   several threads at once.
 * - Sizes are in bytes; device addresses are byte offsets in device memory
 *   (BAR2); times are in nanoseconds.
 */
#ifndef TX_DEVICE_H
#define TX_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <tx/tx_error.h>
#include <tx8/tx8_hw.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Errors: enum tx_status, tx_strerror(), tx_last_error() are in tx/tx_error.h. */

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct tx_device tx_device_t;

/* Default emulator socket (used when no accel device exists). */
#define TX_DEFAULT_EMU_SOCKET "/run/tx8/tx8-0.sock"

#define TX_SPEC_MAX 256

struct tx_device_desc {
    char spec[TX_SPEC_MAX]; /* to pass to tx_device_open() */
    char backend[16];       /* "accel" or "emu" */
};

/*
 * Devices this process could open: TX8 accel nodes (/dev/accel/accelN bound
 * to tx8), the emulator named by $TX_DEVICE, and emulator sockets
 * /run/tx8/\*.sock. *count receives how many exist (possibly more than max;
 * list gets the first max). list may be NULL when max is 0.
 */
TX_API int tx_device_enumerate(struct tx_device_desc *list, size_t max, size_t *count);
TX_API int tx_device_count(unsigned *count);

/*
 * Open a device. spec:
 *   NULL or ""           $TX_DEVICE if set, else the first TX8 accel node,
 *                        else "emu:" TX_DEFAULT_EMU_SOCKET
 *   "emu:/path/x.sock"   a tx8-emu device model (backend emu)
 *   "/dev/accel/accelN"  a tx8.ko device (backend accel); "accel:/dev/..."
 *                        is accepted too
 *   "/path/x.sock"       a path naming a UNIX socket is taken as emu
 */
TX_API int tx_device_open(const char *spec, tx_device_t **dev);

/* Close: every buffer object and command buffer of the device is freed and
 * its handles become invalid; unfinished jobs are abandoned. */
TX_API int tx_device_close(tx_device_t *dev);

struct tx_device_info {
    char name[64];          /* e.g. "TX8 (tx8-emu)" */
    char backend[16];       /* "emu" or "accel" */
    char path[TX_SPEC_MAX]; /* socket path or device node */
    uint32_t if_version;    /* TX8_IF_VERSION of the device */
    uint32_t num_cores;     /* compute cores */
    uint64_t mem_size;      /* device memory, bytes */
    uint64_t mem_used;      /* bytes allocated on the device (all clients) */
    uint64_t heap_offset;   /* first allocatable device address */
    uint64_t heap_size;     /* allocatable bytes */
    uint32_t dtypes;        /* TX8_DTYPE_BIT() mask */
    uint32_t caps;          /* TX8_CAP_* */
    uint32_t max_ranges;    /* most buffer objects per job (incl. the command buffer) */
    uint32_t max_cmd_size;  /* largest command buffer, bytes */
    uint32_t max_topk;
    uint32_t sparse_block;
    uint32_t sq_entries; /* submission ring entries */
    uint32_t numa_node;  /* UINT32_MAX: not bound / unknown */
    uint64_t core_clock_hz;
    uint64_t boot_id;  /* changes whenever the device restarts */
    int32_t client_id; /* emu: own ivshmem peer id; accel: DRM client id or -1 */
    uint32_t rsvd[7];
};

TX_API int tx_device_info(tx_device_t *dev, struct tx_device_info *info);

/* Per-queue (per-client) figures. */
struct tx_queue_stats {
    int32_t owner;  /* emu: ivshmem peer id owning the queue, -1 free */
    uint32_t state; /* enum tx8_queue_state */
    uint64_t jobs_completed;
    uint64_t jobs_failed;
    uint64_t busy_ns;
    uint64_t bytes_allocated;
    uint64_t completed_seqno;
    /* emu: the process owning the queue, as tx8-emu saw it connect
     * (SO_PEERCRED; a QEMU guest is its QEMU process); 0 when unknown: a
     * free queue, a device older than interface 1.1, or the accel backend. */
    int32_t owner_pid;
    uint32_t rsvd;
};

struct tx_device_counters {
    struct tx8_counters dev; /* device-wide counters, as the device reports them */
    uint64_t clock_ns;       /* device time */
    uint64_t heartbeat;      /* advances every 10 ms while the device lives */
    uint32_t state;          /* enum tx8_dev_state */
    uint32_t num_queues;     /* valid entries of queues[] (0: backend cannot tell) */
    int32_t own_queue;       /* index of this client's queue in queues[], or -1 */
    uint32_t rsvd0;
    struct tx_queue_stats queues[TX8_MAX_QUEUES];
    struct tx_queue_stats client; /* this client (the opened device handle) */
};

TX_API int tx_device_counters(tx_device_t *dev, struct tx_device_counters *c);

/* One allocation in device memory, for tools showing the memory view. */
#define TX_MEM_OWN (1u << 0) /* allocated by this client */
struct tx_mem_region {
    uint64_t addr;
    uint64_t size;
    int32_t owner;  /* emu: ivshmem peer id; accel: -1 */
    uint32_t flags; /* TX_MEM_* */
    char label[TX8_LABEL_LEN];
};

/*
 * The device's allocations in address order (emu: every client's leases;
 * accel: what the driver exposes to this client, or TX_ENOTSUP). *count
 * receives the number of regions (may exceed max; regions gets the first
 * max). regions may be NULL when max is 0.
 */
TX_API int tx_device_memory_view(tx_device_t *dev, struct tx_mem_region *regions, size_t max,
                                 size_t *count);

/*
 * Reset this client's part of the device: every unfinished job of this
 * device handle ends with TX_JOB_ABORTED (or TX_JOB_TIMEOUT when the kernel
 * driver reports it so), the rings are emptied, buffer objects stay.
 */
TX_API int tx_device_reset(tx_device_t *dev);

/* Fault injection (tests and tools). */
enum tx_fault {
    TX_FAULT_NONE = TX8_FAULT_NONE,   /* cancel pending injections */
    TX_FAULT_HANG = TX8_FAULT_HANG,   /* the next job never finishes until reset */
    TX_FAULT_SLOW = TX8_FAULT_SLOW,   /* the next job takes param ms longer */
    TX_FAULT_CRASH = TX8_FAULT_CRASH, /* the device dies (emulator exits) */
    TX_FAULT_ERROR = TX8_FAULT_ERROR, /* the next job fails with TX_JOB_DEVICE_ERROR */
};

/* Inject a fault into the next `count` (0 = 1) jobs of this client. */
TX_API int tx_device_inject_fault(tx_device_t *dev, enum tx_fault kind, uint32_t param,
                                  uint32_t count);

/* ------------------------------------------------------------------------ */
/* Buffer objects (device memory)                                            */
/* ------------------------------------------------------------------------ */

typedef struct tx_bo tx_bo_t;

/* No allocation flags are defined yet; pass 0. */
#define TX_BO_FLAGS_MASK 0u

/*
 * Allocate size bytes of device memory (rounded up to 4 KiB pages, zero
 * filled on the emulator). label names the owner in memory views and
 * /proc/tx_meminfo (e.g. "GLM-5.1_Weights"; at most 31 bytes kept; NULL =
 * none).
 */
TX_API int tx_bo_alloc(tx_device_t *dev, uint64_t size, uint32_t flags, const char *label,
                       tx_bo_t **bo);

/* Free. Jobs still using the BO keep it alive until they finish. */
TX_API int tx_bo_free(tx_bo_t *bo);

/* CPU pointer to the BO's device memory (zero copy: no staging buffer).
 * Valid until the BO is freed or its device closed. */
TX_API int tx_bo_map(tx_bo_t *bo, void **ptr);

TX_API int tx_bo_addr(tx_bo_t *bo, uint64_t *addr); /* device address */
TX_API int tx_bo_size(tx_bo_t *bo, uint64_t *size); /* bytes (page multiple) */
TX_API int tx_bo_set_label(tx_bo_t *bo, const char *label);

struct tx_bo_info {
    uint64_t addr;
    uint64_t size;
    uint32_t flags;
    uint32_t rsvd;
    char label[TX8_LABEL_LEN];
};
TX_API int tx_bo_info(tx_bo_t *bo, struct tx_bo_info *info);

/* ------------------------------------------------------------------------ */
/* Command buffers                                                           */
/* ------------------------------------------------------------------------ */

typedef struct tx_cmdbuf tx_cmdbuf_t;

/* An operand: a BO and a byte offset in it. {NULL, 0} = "none" where the
 * command allows it (bias, scales, sel, probs, ...). */
typedef struct tx_ref {
    tx_bo_t *bo;
    uint64_t offset;
} tx_ref_t;

static inline tx_ref_t tx_ref(tx_bo_t *bo, uint64_t offset)
{
    tx_ref_t r;
    r.bo = bo;
    r.offset = offset;
    return r;
}

/* Access of a BO by a job (same bits as the hardware's). */
#define TX_ACCESS_READ TX8_ACCESS_READ
#define TX_ACCESS_WRITE TX8_ACCESS_WRITE
#define TX_ACCESS_RW (TX8_ACCESS_READ | TX8_ACCESS_WRITE)

/* A builder for one job: commands (operands are BO + offset) and the set of
 * BOs the job may touch, each with its access. */
TX_API int tx_cmdbuf_create(tx_device_t *dev, tx_cmdbuf_t **cb);
TX_API int tx_cmdbuf_destroy(tx_cmdbuf_t *cb);
/* Drop all commands and BOs (keeps the memory for reuse). */
TX_API int tx_cmdbuf_reset(tx_cmdbuf_t *cb);
/* Bytes and commands recorded so far. Either pointer may be NULL. */
TX_API int tx_cmdbuf_size(tx_cmdbuf_t *cb, size_t *bytes, unsigned *commands);

/* Let the job access bo (for operands a command reaches indirectly, e.g.
 * the expert weights named by a MOE_FFN expert table). Accesses add up. */
TX_API int tx_cmdbuf_use(tx_cmdbuf_t *cb, tx_bo_t *bo, uint32_t access);

/* Append a complete command (struct tx8_cmd_* with absolute device
 * addresses; hdr.size must equal size). Declare its BOs with
 * tx_cmdbuf_use(); the device checks every operand against them. */
TX_API int tx_cmdbuf_raw(tx_cmdbuf_t *cb, const void *cmd, size_t size);

/* A weight matrix operand (see struct tx8_weight for the formats). */
struct tx_weight_ref {
    tx_ref_t data;
    tx_ref_t scales; /* I8 only */
    tx_ref_t index;  /* TX8_WFMT_BLOCK_SPARSE only */
    uint32_t rows;   /* N (outputs) */
    uint32_t cols;   /* K (inputs) */
    uint32_t nnz_blocks;
    uint32_t group_size;
    uint16_t dtype;  /* enum tx8_dtype */
    uint16_t format; /* enum tx8_wfmt */
};

/* Fill a struct tx8_weight with device addresses (e.g. for MOE_FFN expert
 * tables written through a mapping). Does not record any BO use. */
TX_API int tx_weight_encode(const struct tx_weight_ref *w, struct tx8_weight *out);
/* Record READ use of a weight's data/scales/index BOs. */
TX_API int tx_cmdbuf_use_weight(tx_cmdbuf_t *cb, const struct tx_weight_ref *w);

/*
 * Typed helpers, one per opcode. Each resolves its operands to device
 * addresses, checks that every operand starts inside its BO and records the
 * BO with the access the command needs. The device checks the full extent
 * of every operand when the job runs. Semantics: include/tx8/tx8_hw.h.
 */
TX_API int tx_cmd_nop(tx_cmdbuf_t *cb);
TX_API int tx_cmd_fill(tx_cmdbuf_t *cb, tx_ref_t dst, uint64_t bytes, uint32_t value);
TX_API int tx_cmd_copy(tx_cmdbuf_t *cb, tx_ref_t dst, tx_ref_t src, uint64_t bytes);

struct tx_convert_args {
    tx_ref_t dst, src, scales;
    uint32_t rows, cols, ld_dst, ld_src;
    uint16_t dst_dtype, src_dtype;
};
TX_API int tx_cmd_convert(tx_cmdbuf_t *cb, const struct tx_convert_args *a);

struct tx_matmul_args {
    tx_ref_t y, x, bias;
    struct tx_weight_ref w;
    uint32_t tokens, ld_x, ld_y;
    uint16_t act_dtype;
    uint16_t flags; /* TX8_MATMUL_F_* */
};
TX_API int tx_cmd_matmul(tx_cmdbuf_t *cb, const struct tx_matmul_args *a);

struct tx_rmsnorm_args {
    tx_ref_t y, x, gamma;
    uint32_t rows, dim, ld_x, ld_y;
    float eps;
};
TX_API int tx_cmd_rmsnorm(tx_cmdbuf_t *cb, const struct tx_rmsnorm_args *a);

struct tx_layernorm_args {
    tx_ref_t y, x, gamma, beta;
    uint32_t rows, dim, ld_x, ld_y;
    float eps;
};
TX_API int tx_cmd_layernorm(tx_cmdbuf_t *cb, const struct tx_layernorm_args *a);

struct tx_rope_args {
    tx_ref_t x, pos, inv_freq;
    uint32_t tokens, heads, ld_token, ld_head, offset, rot_dim;
    uint32_t mode; /* enum tx8_rope_mode */
    /* interface 1.4: cos and sin times attn_factor (YaRN's attention_factor)
     * when flags has TX8_ROPE_F_ATTN_FACTOR; flags 0 sends the 1.3 command
     * (attn_factor must then be 0), which any device takes. A flag needs a
     * device of interface >= 1.4 (else TX_ENOTSUP). */
    uint32_t flags; /* TX8_ROPE_F_* */
    float attn_factor;
};
TX_API int tx_cmd_rope(tx_cmdbuf_t *cb, const struct tx_rope_args *a);

struct tx_attention_args {
    tx_ref_t out, q, k, v, sel;
    uint32_t tokens, q_heads, kv_heads, qk_dim, v_dim, kv_len, q_pos0, sel_k;
    uint32_t ld_q_head, ld_k_head, ld_v_head, ld_o_head;
    float scale;
    uint16_t kv_dtype;
};
TX_API int tx_cmd_attention(tx_cmdbuf_t *cb, const struct tx_attention_args *a);
/* The same with the V cache of its own type v_dtype (v_dtype == kv_dtype:
 * tx_cmd_attention). kv_dtype / v_dtype may be the interface-1.6 KV-cache
 * block types TX8_DTYPE_Q8_0 / TX8_DTYPE_Q4_0; either (and a v_dtype of
 * its own) needs a device of interface >= 1.6 (else TX_ENOTSUP). */
TX_API int tx_cmd_attention_ex(tx_cmdbuf_t *cb, const struct tx_attention_args *a,
                               uint16_t v_dtype);
/* The same with flags: TX8_ATTN_F_BF16 (interface 1.7, else TX_ENOTSUP):
 * the dot products in BF16 with f32 accumulation (include/tx8/tx8_hw.h;
 * qk_dim, v_dim, ld_k_head and ld_v_head even, else TX_EINVAL). Other bits:
 * TX_EINVAL (TX8_ATTN_F_V_DTYPE follows from v_dtype). libtx 2.5. */
TX_API int tx_cmd_attention_flags(tx_cmdbuf_t *cb, const struct tx_attention_args *a,
                                  uint16_t v_dtype, uint16_t flags);

struct tx_swiglu_args {
    tx_ref_t y, gate, up;
    uint32_t rows, cols, ld_y, ld_gate, ld_up;
};
TX_API int tx_cmd_swiglu(tx_cmdbuf_t *cb, const struct tx_swiglu_args *a);

/* y[i] = alpha * a[i] + beta * b[i], i < n (f32) */
TX_API int tx_cmd_add(tx_cmdbuf_t *cb, tx_ref_t y, tx_ref_t a, tx_ref_t b, uint64_t n, float alpha,
                      float beta);

struct tx_embed_args {
    tx_ref_t out, ids, table, scales;
    uint32_t tokens, vocab, dim, ld_out;
    uint16_t dtype;
};
TX_API int tx_cmd_embed(tx_cmdbuf_t *cb, const struct tx_embed_args *a);

struct tx_moe_route_args {
    tx_ref_t out_ids, out_w, logits, bias, counts;
    uint32_t tokens, experts, top_k, n_group, topk_group;
    float scaling, lambda;
    /* TX8_ROUTE_F_*; TX8_ROUTE_F_SOFTMAX (interface 1.4: the Qwen3-MoE
     * softmax router) takes no bias and n_group <= 1 (else TX_EINVAL) and
     * needs a device of interface >= 1.4 (else TX_ENOTSUP) */
    uint16_t flags;
};
TX_API int tx_cmd_moe_route(tx_cmdbuf_t *cb, const struct tx_moe_route_args *a);

/* The expert weights the table names must be declared with
 * tx_cmdbuf_use_weight() / tx_cmdbuf_use(). */
struct tx_moe_ffn_args {
    tx_ref_t y, x, ids, w, experts;
    uint32_t tokens, top_k, num_experts, dim, ffn_dim, ld_x, ld_y;
    uint16_t act_dtype;
    uint16_t flags; /* TX8_MOE_FFN_F_* */
};
TX_API int tx_cmd_moe_ffn(tx_cmdbuf_t *cb, const struct tx_moe_ffn_args *a);

struct tx_dsa_index_args {
    tx_ref_t sel, q, k, w;
    uint32_t tokens, heads, dim, kv_len, q_pos0, top_k, ld_q_head, ld_k;
};
TX_API int tx_cmd_dsa_index(tx_cmdbuf_t *cb, const struct tx_dsa_index_args *a);
/* The same over a key cache of k_dtype: TX8_DTYPE_F32 (tx_cmd_dsa_index)
 * or TX8_DTYPE_Q8_0 (interface 1.6, TX8_DSA_F_KEY_Q8_0; else TX_ENOTSUP) */
TX_API int tx_cmd_dsa_index_ex(tx_cmdbuf_t *cb, const struct tx_dsa_index_args *a,
                               uint16_t k_dtype);

struct tx_sample_args {
    tx_ref_t out, logits, probs;
    uint64_t seed, counter;
    uint32_t rows, vocab, ld_logits, top_k;
    float temperature, top_p;
    /* interface 1.3 (all 0: the 1.2 command is sent, any device takes it) */
    float min_p, repeat_penalty, presence_penalty, frequency_penalty;
    tx_ref_t history;   /* i32 [rows][n_history] ids to penalise (< 0: none) */
    uint32_t n_history;
    uint32_t flags; /* TX8_SAMPLE_F_TEMP_LAST: llama.cpp's order */
};
TX_API int tx_cmd_sample(tx_cmdbuf_t *cb, const struct tx_sample_args *a);

/* ------------------------------------------------------------------------ */
/* Jobs                                                                      */
/* ------------------------------------------------------------------------ */

typedef uint64_t tx_job_t; /* per device handle, increasing, never 0 */

/* Job statuses (the device's TX8_STATUS_*, plus PENDING). */
enum tx_job_status {
    TX_JOB_OK = TX8_STATUS_OK,
    TX_JOB_INVALID_CMD = TX8_STATUS_INVALID_CMD,
    TX_JOB_ADDR_FAULT = TX8_STATUS_ADDR_FAULT,
    TX_JOB_UNSUPPORTED_DTYPE = TX8_STATUS_UNSUPPORTED_DTYPE,
    TX_JOB_ABORTED = TX8_STATUS_ABORTED,
    TX_JOB_TIMEOUT = TX8_STATUS_TIMEOUT,
    TX_JOB_DEVICE_ERROR = TX8_STATUS_DEVICE_ERROR,
    TX_JOB_INVALID_JOB = TX8_STATUS_INVALID_JOB,
    TX_JOB_PENDING = 0x100, /* not finished yet */
};

/* "ok", "address fault", "pending", ... Never NULL. */
TX_API const char *tx_job_status_str(uint32_t status);

struct tx_job_result {
    tx_job_t job;
    uint32_t status;     /* enum tx_job_status */
    uint32_t fault_cmd;  /* index of the failing command (UINT32_MAX: the job itself) */
    uint64_t fault_addr; /* the faulting device address (ADDR_FAULT, INVALID_JOB) */
    uint64_t user_data;
    uint64_t start_ns; /* device time */
    uint64_t end_ns;
    uint64_t busy_ns; /* summed busy time of the cores */
    uint64_t macs;    /* multiply-accumulates executed */
};

/* Submit flags */
#define TX_SUBMIT_NO_IRQ (1u << 0) /* do not interrupt (waiters poll) */
/* Record per-command timing (struct tx8_prof_header + tx8_prof_record[],
 * include/tx8/tx8_hw.h) into the buffer named by tx_cmdbuf_profile(); read
 * it through the BO's mapping after tx_wait. Needs a device of interface
 * >= 1.5 on the emu backend (else TX_ENOTSUP; /dev/accel does not pass it
 * yet). See docs/tuna.md. */
#define TX_SUBMIT_PROFILE (1u << 1)
/* Batch-invariant MATMUL / MOE_FFN (TX8_JOB_F_BATCH_INVARIANT): a row of
 * a command is bit-identical whatever the number of rows it is computed
 * with, at a cost in single-token speed (docs/engine.md). Needs a device of
 * interface >= 1.6, on the emu backend or on /dev/accel with tx8.ko >= 1.2
 * (DRM_TX8_SUBMIT_BATCH_INVARIANT); else TX_ENOTSUP. */
#define TX_SUBMIT_BATCH_INVARIANT (1u << 2)

/* Name [offset, offset + size) of bo (offset 8-aligned, size >= 64) as the
 * profiling buffer of the jobs submitted from cb with TX_SUBMIT_PROFILE
 * (until tx_cmdbuf_reset); the BO is added with TX_ACCESS_WRITE. */
TX_API int tx_cmdbuf_profile(tx_cmdbuf_t *cb, tx_bo_t *bo, uint64_t offset, uint64_t size);

/*
 * Submit the command buffer as one job. The commands are copied into device
 * memory, so the builder may be reset and reused at once. Blocks while the
 * device's submission ring is full (at most $TX_SUBMIT_TIMEOUT_MS, default
 * 10000, then TX_EBUSY).
 */
TX_API int tx_submit(tx_device_t *dev, tx_cmdbuf_t *cb, tx_job_t *job);
TX_API int tx_submit_ex(tx_device_t *dev, tx_cmdbuf_t *cb, uint32_t flags, uint64_t user_data,
                        tx_job_t *job);

/* A BO of a raw job and its access. */
struct tx_bo_use {
    tx_bo_t *bo;
    uint32_t access; /* TX_ACCESS_* */
};

/* A job whose command buffer already lives in device memory (prepared once,
 * submitted many times: no copy). The command BO is added with READ. */
struct tx_raw_job {
    tx_bo_t *cmd_bo;
    uint64_t cmd_offset;
    uint32_t cmd_size;
    uint32_t num_bos;
    const struct tx_bo_use *bos;
    uint32_t flags; /* TX_SUBMIT_NO_IRQ, TX_SUBMIT_BATCH_INVARIANT (libtx 2.6) */
    uint64_t user_data;
};
TX_API int tx_submit_raw(tx_device_t *dev, const struct tx_raw_job *rj, tx_job_t *job);

/*
 * Wait until the job finished or timeout_ns passed (0: just look; negative:
 * no limit). Returns TX_OK (finished with TX_JOB_OK), TX_EJOB (finished with
 * another status; see res and tx_last_error()), TX_ETIMEDOUT (still
 * running), TX_EDEVICE_LOST, TX_ENOENT, TX_EINVAL. res may be NULL.
 */
TX_API int tx_wait(tx_device_t *dev, tx_job_t job, int64_t timeout_ns, struct tx_job_result *res);

/*
 * The energy of a finished job in pJ, from its completion record: the sum
 * of its commands' energies as the device's power model charged them
 * (docs/hardware.md section 7), profiled or not. Never blocks. TX_OK;
 * TX_ETIMEDOUT when the job has not finished; TX_ENOENT for a job never
 * submitted or whose result is no longer kept; TX_ENOTSUP for a device of
 * interface < 1.9 (through /dev/accel: or tx8.ko < 1.3). Since libtx 2.8.
 */
TX_API int tx_job_energy(tx_device_t *dev, tx_job_t job, uint64_t *energy_pj);

/* Without waiting: TX_OK with res->status (TX_JOB_PENDING if running). */
TX_API int tx_job_status(tx_device_t *dev, tx_job_t job, struct tx_job_result *res);

#ifdef __cplusplus
}
#endif

#endif /* TX_DEVICE_H */
