/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * TX8 accelerator: user-space API of the tx8 DRM accel driver
 * (/dev/accel/accelN). Documented in docs/uapi.md.
 *
 * Rules of this interface:
 * - Ioctl numbers are append-only; a number, once used, is never reused.
 * - Pointers are passed as __u64.
 * - Every field named rsvd or pad, and every flag bit not defined here,
 *   must be zero; otherwise the ioctl fails with -EINVAL.
 * - Structures grow only at their end. The DRM core zero-fills the tail of
 *   a structure that user space passes shorter than the kernel's, so an
 *   older program keeps working; a newer, longer structure is accepted
 *   and its unknown tail is ignored. Arrays of structures carry their
 *   element size (a "stride") so their elements can grow the same way.
 */
#ifndef _TX8_ACCEL_H_
#define _TX8_ACCEL_H_

#include <drm/drm.h>

#if defined(__cplusplus)
extern "C" {
#endif

#define DRM_TX8_QUERY		0x00
#define DRM_TX8_BO_CREATE	0x01
#define DRM_TX8_BO_INFO		0x02
#define DRM_TX8_SUBMIT		0x03
#define DRM_TX8_WAIT		0x04
#define DRM_TX8_BO_SET_LABEL	0x05
#define DRM_TX8_RESET		0x06
#define DRM_TX8_INJECT_FAULT	0x07

/** DRM_TX8_LABEL_LEN - bytes of a buffer label, including its NUL */
#define DRM_TX8_LABEL_LEN	32

/**
 * enum drm_tx8_query_type - what &struct drm_tx8_query returns
 * @DRM_TX8_QUERY_DEVICE: &struct drm_tx8_device_info
 * @DRM_TX8_QUERY_COUNTERS: &struct drm_tx8_counters
 */
enum drm_tx8_query_type {
	DRM_TX8_QUERY_DEVICE = 0,
	DRM_TX8_QUERY_COUNTERS = 1,
};

/**
 * struct drm_tx8_query - read device information (DRM_IOCTL_TX8_QUERY)
 *
 * The kernel copies min(@size, its own size of the answer) bytes to @data
 * and zero-fills the rest of the @size bytes, then sets @size to its own
 * size of the answer. With @size == 0 nothing is copied: the call only
 * reports the size.
 */
struct drm_tx8_query {
	/** @query: enum drm_tx8_query_type */
	__u32 query;
	/** @size: in: bytes at @data; out: the kernel's size of the answer */
	__u32 size;
	/** @data: user pointer to the answer buffer */
	__u64 data;
	/** @flags: must be zero */
	__u32 flags;
	/** @pad: must be zero */
	__u32 pad;
};

/**
 * struct drm_tx8_device_info - answer of DRM_TX8_QUERY_DEVICE
 */
struct drm_tx8_device_info {
	/** @if_version: hardware interface version, major << 16 | minor */
	__u32 if_version;
	/** @driver_version: driver UAPI version, major << 16 | minor */
	__u32 driver_version;
	/** @mem_size: bytes of device memory (PCI BAR2) */
	__u64 mem_size;
	/** @heap_offset: device address of the memory BOs are allocated from */
	__u64 heap_offset;
	/** @heap_size: bytes of device memory this driver allocates BOs from */
	__u64 heap_size;
	/** @heap_used: bytes of @heap_size in BOs now, all clients together */
	__u64 heap_used;
	/** @num_cores: compute cores */
	__u32 num_cores;
	/** @dtypes: supported data types, bit (1 << enum tx8_dtype) */
	__u32 dtypes;
	/** @caps: TX8_CAP_* flags of the device (include/tx8/tx8_hw.h) */
	__u32 caps;
	/**
	 * @max_bos: most distinct BOs one job may use, the command buffer
	 * included
	 */
	__u32 max_bos;
	/** @max_cmd_size: largest command buffer of one job, bytes */
	__u32 max_cmd_size;
	/** @sparse_block: elements per block of block-sparse weights */
	__u32 sparse_block;
	/** @max_topk: largest k of TOPK-style commands */
	__u32 max_topk;
	/** @numa_node: host NUMA node of the device memory */
	__u32 numa_node;
	/** @core_clock_hz: nominal core clock; device times are in ns */
	__u64 core_clock_hz;
	/** @boot_id: changes whenever the device restarts */
	__u64 boot_id;
	/** @job_timeout_ms: a job running longer is failed and reset */
	__u32 job_timeout_ms;
	/** @sq_entries: jobs the device's submission ring holds */
	__u32 sq_entries;
	/** @client_id: DRM client id of this file (as in fdinfo) */
	__u64 client_id;
	/** @name: device name, NUL terminated */
	char name[32];
};

/** DRM_TX8_MAX_DTYPES - entries of &drm_tx8_counters.macs */
#define DRM_TX8_MAX_DTYPES	8
/** DRM_TX8_MAX_CORES - entries of &drm_tx8_counters.core_busy_ns */
#define DRM_TX8_MAX_CORES	64

/**
 * struct drm_tx8_counters - answer of DRM_TX8_QUERY_COUNTERS
 *
 * Device counters count since the device started (see
 * &drm_tx8_device_info.boot_id) and cover every user of the device;
 * driver counters count since the driver bound the device.
 */
struct drm_tx8_counters {
	/** @clock_ns: device time */
	__u64 clock_ns;
	/** @jobs_submitted: jobs the device took from its rings */
	__u64 jobs_submitted;
	/** @jobs_completed: jobs finished with status OK */
	__u64 jobs_completed;
	/** @jobs_failed: jobs finished with any other status */
	__u64 jobs_failed;
	/** @commands: commands executed */
	__u64 commands;
	/** @faults: address faults (operands outside a job's BOs) */
	__u64 faults;
	/** @resets: queue or device resets seen by the device */
	__u64 resets;
	/** @busy_ns: device time with at least one job running */
	__u64 busy_ns;
	/** @bytes_read: operand bytes read by commands */
	__u64 bytes_read;
	/** @bytes_written: operand bytes written by commands */
	__u64 bytes_written;
	/** @macs: multiply-accumulates executed, by weight enum tx8_dtype */
	__u64 macs[DRM_TX8_MAX_DTYPES];
	/** @macs_skipped: multiply-accumulates skipped by the sparse engine */
	__u64 macs_skipped;
	/** @expert_cache_hits: experts MOE_FFN used from the host's expert cache (1.6) */
	__u64 expert_cache_hits;
	/** @expert_cache_misses: of those, loaded into the cache for the pass */
	__u64 expert_cache_misses;
	/** @page_faults: driver: CPU page faults on BO mappings (pages mapped) */
	__u64 page_faults;
	/** @driver_resets: driver: resets this driver performed */
	__u64 driver_resets;
	/** @driver_timeouts: driver: jobs failed with DRM_TX8_STATUS_TIMEOUT */
	__u64 driver_timeouts;
	/** @num_cores: valid entries of @core_busy_ns */
	__u32 num_cores;
	/** @pad: zero */
	__u32 pad;
	/** @core_busy_ns: busy time of each compute core */
	__u64 core_busy_ns[DRM_TX8_MAX_CORES];
	/** @heartbeat: advances every 10 ms while the device lives */
	__u64 heartbeat;
	/** @state: device state (enum tx8_dev_state) */
	__u32 state;
	/** @queue_state: state of the driver's queue (enum tx8_queue_state) */
	__u32 queue_state;
	/** @queue_jobs_completed: device: OK jobs of the driver's queue */
	__u64 queue_jobs_completed;
	/** @queue_jobs_failed: device: failed jobs of the driver's queue */
	__u64 queue_jobs_failed;
	/** @queue_busy_ns: device: busy time of the driver's queue */
	__u64 queue_busy_ns;
	/** @queue_bytes_leased: device: memory leased by the driver */
	__u64 queue_bytes_leased;
	/** @queue_completed_seqno: device: last finished job of the queue */
	__u64 queue_completed_seqno;
	/** @client_jobs_completed: this file: jobs finished with status OK */
	__u64 client_jobs_completed;
	/** @client_jobs_failed: this file: jobs finished otherwise */
	__u64 client_jobs_failed;
	/** @client_busy_ns: this file: device time of its finished jobs */
	__u64 client_busy_ns;
	/** @client_mem: this file: bytes in its BOs */
	__u64 client_mem;
};

/** DRM_TX8_BO_FLAGS_MASK - BO creation flags defined so far (none) */
#define DRM_TX8_BO_FLAGS_MASK	0

/**
 * struct drm_tx8_bo_create - make a buffer object (DRM_IOCTL_TX8_BO_CREATE)
 *
 * The buffer lives in device memory and is zero-filled. It is freed by
 * DRM_IOCTL_GEM_CLOSE on its handle (and the end of any mapping and of
 * any job using it), or when the file is closed.
 */
struct drm_tx8_bo_create {
	/** @size: in: bytes (> 0); out: bytes allocated (page multiple) */
	__u64 size;
	/** @flags: must be zero (no flags yet) */
	__u32 flags;
	/** @handle: out: GEM handle */
	__u32 handle;
	/**
	 * @label: NUL-terminated name of the owner or use, e.g.
	 * "GLM-5.1_Weights", shown by /proc/tx_meminfo (where spaces and ':'
	 * become '_'); printable ASCII (' ' to '~'), zero after the NUL; ""
	 * for none.
	 */
	char label[DRM_TX8_LABEL_LEN];
	/** @dev_addr: out: device address of the buffer */
	__u64 dev_addr;
	/** @mmap_offset: out: offset to pass to mmap() on the device file */
	__u64 mmap_offset;
};

/**
 * struct drm_tx8_bo_info - describe a buffer object (DRM_IOCTL_TX8_BO_INFO)
 */
struct drm_tx8_bo_info {
	/** @handle: in: GEM handle */
	__u32 handle;
	/** @flags: must be zero */
	__u32 flags;
	/** @size: out: bytes */
	__u64 size;
	/** @dev_addr: out: device address */
	__u64 dev_addr;
	/** @mmap_offset: out: offset to pass to mmap() */
	__u64 mmap_offset;
	/** @label: out: the label given at creation */
	char label[DRM_TX8_LABEL_LEN];
};

/* Access of a job to a buffer (&struct drm_tx8_bo_ref.access) */
#define DRM_TX8_ACCESS_READ	(1u << 0)
#define DRM_TX8_ACCESS_WRITE	(1u << 1)
#define DRM_TX8_ACCESS_RW	(DRM_TX8_ACCESS_READ | DRM_TX8_ACCESS_WRITE)

/**
 * struct drm_tx8_bo_ref - one buffer a job may use
 */
struct drm_tx8_bo_ref {
	/** @handle: GEM handle */
	__u32 handle;
	/** @access: DRM_TX8_ACCESS_READ and/or DRM_TX8_ACCESS_WRITE */
	__u32 access;
};

/**
 * DRM_TX8_SUBMIT_PRIORITY_LOW - run the job after ready jobs of normal and
 * high priority (batch work)
 */
#define DRM_TX8_SUBMIT_PRIORITY_LOW	(1u << 0)
/**
 * DRM_TX8_SUBMIT_PRIORITY_HIGH - run the job before ready jobs of normal
 * and low priority; needs CAP_SYS_NICE (-EPERM otherwise)
 */
#define DRM_TX8_SUBMIT_PRIORITY_HIGH	(1u << 1)
/**
 * DRM_TX8_SUBMIT_PROFILE - the device records the time, cores, bytes and
 * MACs of each command of the job into the profiling buffer
 * &drm_tx8_submit.prof_handle (driver 1.1, hardware interface 1.5;
 * -EOPNOTSUPP on an older device). docs/hardware.md 2.3.1 has the format.
 */
#define DRM_TX8_SUBMIT_PROFILE		(1u << 2)
/**
 * DRM_TX8_SUBMIT_BATCH_INVARIANT - the job's MATMUL and MOE_FFN compute
 * every row with the same sequence of floating-point operations whatever
 * the number of rows and cores (TX8_JOB_F_BATCH_INVARIANT of the job
 * descriptor): batched decode bit-identical to single-session decode.
 * Driver 1.2, hardware interface 1.6 (-EOPNOTSUPP on an older device).
 */
#define DRM_TX8_SUBMIT_BATCH_INVARIANT	(1u << 3)
/** DRM_TX8_SUBMIT_FLAGS_MASK - SUBMIT flags defined so far */
#define DRM_TX8_SUBMIT_FLAGS_MASK \
	(DRM_TX8_SUBMIT_PRIORITY_LOW | DRM_TX8_SUBMIT_PRIORITY_HIGH | \
	 DRM_TX8_SUBMIT_PROFILE | DRM_TX8_SUBMIT_BATCH_INVARIANT)

/**
 * struct drm_tx8_submit - queue a job (DRM_IOCTL_TX8_SUBMIT)
 *
 * A job runs the command buffer at @cmd_offset of BO @cmd_handle. Its
 * commands may touch only the buffers listed in @bos, with the access
 * given there (the command buffer is readable in addition); the device
 * checks every operand and fails the job with DRM_TX8_STATUS_ADDR_FAULT
 * otherwise. The kernel does not parse the commands.
 *
 * The call does not wait for @in_syncobjs: it places the job's fence in
 * @out_syncobj and returns; the job is handed to the device once the
 * fences of all @in_syncobjs have signalled (a syncobj without a fence is
 * waited on until one is attached). Jobs of one file run in submission
 * order (of one priority). A job whose in-fence fails does not run; it
 * ends with DRM_TX8_STATUS_ABORTED.
 *
 * Jobs are scheduled by the kernel's GPU scheduler: each open file has a
 * queue per priority; ready jobs of queues of one priority are taken
 * oldest first (clients progress fairly), a higher priority before a
 * lower one.
 */
struct drm_tx8_submit {
	/** @cmd_handle: BO holding the command buffer */
	__u32 cmd_handle;
	/**
	 * @flags: DRM_TX8_SUBMIT_* (at most one priority); other bits must be
	 * zero
	 */
	__u32 flags;
	/** @cmd_offset: byte offset of the commands in the BO, multiple of 8 */
	__u64 cmd_offset;
	/** @cmd_size: bytes of commands, multiple of 8, 8..max_cmd_size */
	__u64 cmd_size;
	/** @bos: user pointer to @bo_count elements of @bo_stride bytes */
	__u64 bos;
	/**
	 * @bo_count: elements at @bos, 0..max_bos; duplicates are merged; with
	 * the command buffer at most max_bos distinct BOs
	 */
	__u32 bo_count;
	/**
	 * @bo_stride: bytes per element at @bos, at least
	 * sizeof(struct drm_tx8_bo_ref); bytes past the known structure must
	 * be zero
	 */
	__u32 bo_stride;
	/** @in_syncobjs: user pointer to @in_syncobj_count __u32 handles */
	__u64 in_syncobjs;
	/** @in_syncobj_count: handles at @in_syncobjs, at most 64 */
	__u32 in_syncobj_count;
	/** @out_syncobj: syncobj that receives the job's fence, 0 for none */
	__u32 out_syncobj;
	/** @user_data: any value; returned by DRM_IOCTL_TX8_WAIT */
	__u64 user_data;
	/**
	 * @timeout_ns: absolute CLOCK_MONOTONIC deadline for the waits of
	 * the call (room on the waiting list, a fence for an in-syncobj), as
	 * for DRM_IOCTL_TX8_WAIT: a deadline in the past (e.g. 0) only polls,
	 * INT64_MAX waits without limit. When it passes the call fails with
	 * -EBUSY (no room) or -ETIME (no fence), queueing nothing.
	 */
	__s64 timeout_ns;
	/** @seqno: out: sequence number of the job, for DRM_IOCTL_TX8_WAIT */
	__u64 seqno;
	/*
	 * Driver 1.1: the profiling buffer of DRM_TX8_SUBMIT_PROFILE. Without
	 * the flag these fields must be zero.
	 */
	/**
	 * @prof_handle: BO of this file that receives the job's profile (a
	 * struct tx8_prof_header, then one struct tx8_prof_record per command
	 * that ran). The job may write it: it is added to the job's BOs with
	 * DRM_TX8_ACCESS_WRITE (and waits for, and is waited for by, other
	 * jobs using it as any written BO).
	 */
	__u32 prof_handle;
	/** @prof_pad: must be zero */
	__u32 prof_pad;
	/** @prof_offset: byte offset of the buffer in the BO, multiple of 8 */
	__u64 prof_offset;
	/**
	 * @prof_size: bytes of the buffer, at least 64 (the header), inside
	 * the BO; records that do not fit are counted as dropped
	 */
	__u64 prof_size;
};

/* Job status (&struct drm_tx8_wait.status); equal to enum tx8_status */
#define DRM_TX8_STATUS_OK		0
#define DRM_TX8_STATUS_INVALID_CMD	1
#define DRM_TX8_STATUS_ADDR_FAULT	2
#define DRM_TX8_STATUS_UNSUPPORTED	3
#define DRM_TX8_STATUS_ABORTED		4
#define DRM_TX8_STATUS_TIMEOUT		5
#define DRM_TX8_STATUS_DEVICE_ERROR	6
#define DRM_TX8_STATUS_INVALID_JOB	7

/**
 * struct drm_tx8_wait - wait for a job (DRM_IOCTL_TX8_WAIT)
 *
 * Waits for job @seqno of this file, or, if @handle is non-zero, for every
 * job using BO @handle, until @timeout_ns. Returns 0 when done (the job's
 * outcome is in @status), -ETIME on timeout, -EINVAL for a sequence number
 * this file never got, -ENOENT for a job so old its record was dropped
 * (the last 1024 jobs of a file are kept).
 */
struct drm_tx8_wait {
	/** @seqno: in: job to wait for, used when @handle is 0 */
	__u64 seqno;
	/** @handle: in: BO whose jobs to wait for, or 0 */
	__u32 handle;
	/** @flags: must be zero */
	__u32 flags;
	/**
	 * @timeout_ns: in: absolute CLOCK_MONOTONIC deadline; a deadline in
	 * the past (e.g. 0) only polls
	 */
	__s64 timeout_ns;
	/** @status: out: DRM_TX8_STATUS_* of the job (for a BO: its last job) */
	__u32 status;
	/** @fault_cmd: out: index of the failing command, if any */
	__u32 fault_cmd;
	/** @fault_addr: out: faulting device address (ADDR_FAULT) */
	__u64 fault_addr;
	/** @user_data: out: the job's &drm_tx8_submit.user_data */
	__u64 user_data;
	/** @start_ns: out: device time the job started (0 if it never ran) */
	__u64 start_ns;
	/** @end_ns: out: device time the job ended */
	__u64 end_ns;
	/** @busy_ns: out: summed busy time of the cores that ran it */
	__u64 busy_ns;
	/** @macs: out: multiply-accumulates the job executed */
	__u64 macs;
	/**
	 * @energy_pj: out: the job's energy in pJ, from its completion record
	 * (driver 1.3 with a device of interface >= 1.9; 0 otherwise)
	 */
	__u64 energy_pj;
};

/**
 * struct drm_tx8_bo_set_label - relabel a BO (DRM_IOCTL_TX8_BO_SET_LABEL)
 */
struct drm_tx8_bo_set_label {
	/** @handle: GEM handle */
	__u32 handle;
	/** @flags: must be zero */
	__u32 flags;
	/** @label: new label, rules as &drm_tx8_bo_create.label */
	char label[DRM_TX8_LABEL_LEN];
};

/**
 * struct drm_tx8_reset - abort this file's jobs (DRM_IOCTL_TX8_RESET)
 *
 * Affects only this file's jobs: every unfinished job of this file ends
 * with DRM_TX8_STATUS_ABORTED. If some are in the device ring, the queue
 * is reset (once this file's job is the one running); the jobs of other
 * files are queued again and run as if nothing happened, and the reset is
 * counted (sysfs resets, /proc/tx_meminfo Resets) and announced by uevent.
 * A device-wide reset needs CAP_SYS_ADMIN (sysfs tx8/reset, debugfs).
 */
struct drm_tx8_reset {
	/** @flags: must be zero */
	__u32 flags;
	/** @pad: must be zero */
	__u32 pad;
	/** @aborted: out: jobs of this file that were aborted */
	__u64 aborted;
};

/* Fault kinds (&struct drm_tx8_inject_fault.kind); equal to enum tx8_fault */
#define DRM_TX8_FAULT_NONE	0
#define DRM_TX8_FAULT_HANG	1
#define DRM_TX8_FAULT_SLOW	2
#define DRM_TX8_FAULT_CRASH	3
#define DRM_TX8_FAULT_ERROR	4
/* A misbehaving device (interface 1.2), for robustness tests: */
#define DRM_TX8_FAULT_BAD_RECORD	5	/* a wrong completion record */
#define DRM_TX8_FAULT_RESTART	6	/* the device restarts (boot_id) */
#define DRM_TX8_FAULT_STOP	7	/* silent for param ms */
#define DRM_TX8_FAULT_BAD_CAPS	8	/* capabilities garbage for param ms */
#define DRM_TX8_FAULT_BAD_LEASE	9	/* next lease answer out of range */
#define DRM_TX8_FAULT_TAKE_ON_RESET	10	/* takes a job at the next reset */

/**
 * struct drm_tx8_inject_fault - make the device misbehave
 * (DRM_IOCTL_TX8_INJECT_FAULT)
 *
 * For tests of error handling; needs CAP_SYS_ADMIN (-EPERM otherwise). The
 * fault hits the next @count jobs the device takes from the driver's queue,
 * whichever file submitted them.
 */
struct drm_tx8_inject_fault {
	/** @kind: DRM_TX8_FAULT_* (NONE cancels pending injections) */
	__u32 kind;
	/**
	 * @param: for SLOW: extra milliseconds per job; for STOP and BAD_CAPS:
	 * milliseconds the fault lasts; else zero
	 */
	__u32 param;
	/** @count: jobs to affect, 0 meaning 1 */
	__u32 count;
	/** @flags: must be zero */
	__u32 flags;
};

#define DRM_IOCTL_TX8_QUERY \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TX8_QUERY, struct drm_tx8_query)
#define DRM_IOCTL_TX8_BO_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TX8_BO_CREATE, struct drm_tx8_bo_create)
#define DRM_IOCTL_TX8_BO_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TX8_BO_INFO, struct drm_tx8_bo_info)
#define DRM_IOCTL_TX8_SUBMIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TX8_SUBMIT, struct drm_tx8_submit)
#define DRM_IOCTL_TX8_WAIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TX8_WAIT, struct drm_tx8_wait)
#define DRM_IOCTL_TX8_BO_SET_LABEL \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TX8_BO_SET_LABEL, \
		 struct drm_tx8_bo_set_label)
#define DRM_IOCTL_TX8_RESET \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TX8_RESET, struct drm_tx8_reset)
#define DRM_IOCTL_TX8_INJECT_FAULT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_TX8_INJECT_FAULT, \
		 struct drm_tx8_inject_fault)

#if defined(__cplusplus)
}
#endif

#endif /* _TX8_ACCEL_H_ */
