/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * TX8 hardware interface: everything that crosses the PCIe boundary.
 *
 * Compiled by the kernel driver (kernel/), the device model (emu/) and the
 * user-space SDK (libtx/). Documented in docs/hardware.md; that document and
 * this header must agree.
 *
 * All multi-byte fields are little-endian. All device addresses are byte
 * offsets into BAR2 (device memory). Structures have explicit padding and
 * fixed sizes (checked by TX8_STATIC_ASSERTs at the end).
 */
#ifndef TX8_HW_H
#define TX8_HW_H

#include <linux/types.h>

/*
 * IEEE-754 binary32 operand fields. The kernel never interprets them (it
 * does not parse command streams), so it sees them as raw bits.
 */
#ifdef __KERNEL__
typedef __u32 tx8_f32;
#else
typedef float tx8_f32;
#endif

/* ------------------------------------------------------------------------ */
/* Transport: QEMU ivshmem-doorbell                                          */
/* ------------------------------------------------------------------------ */

#define TX8_PCI_VENDOR_ID		0x1af4	/* ivshmem (Red Hat) */
#define TX8_PCI_DEVICE_ID		0x1110	/* ivshmem */

/* BAR0 registers of ivshmem-doorbell */
#define TX8_BAR0_INTR_MASK		0x00
#define TX8_BAR0_INTR_STATUS		0x04
#define TX8_BAR0_IV_POSITION		0x08	/* this peer's id */
#define TX8_BAR0_DOORBELL		0x0c	/* write (peer << 16) | vector */

/* The device is always ivshmem peer 0; hosts are peers 1.. */
#define TX8_DEVICE_PEER			0

/* Vectors of the device (rung by a host through the doorbell). */
#define TX8_DEV_VEC_SUBMIT		0	/* new ring entries */
#define TX8_DEV_VEC_MBOX		1	/* new mailbox request */

/* Vectors of a host (rung by the device; MSI-X vector N in a guest). */
#define TX8_HOST_VEC_COMPLETION		0	/* completion record(s) written */
#define TX8_HOST_VEC_MBOX		1	/* mailbox reply written */
#define TX8_HOST_VEC_EVENT		2	/* error, reset or health event */

#define TX8_NUM_VECTORS			4	/* ivshmem-doorbell vectors=4 */

/* ------------------------------------------------------------------------ */
/* Identity and version                                                      */
/* ------------------------------------------------------------------------ */

#define TX8_SIGNATURE			0x30385854u	/* "TX80" in memory */
#define TX8_IF_VERSION_MAJOR		1
#define TX8_IF_VERSION_MINOR		10
#define TX8_IF_VERSION \
	((TX8_IF_VERSION_MAJOR << 16) | TX8_IF_VERSION_MINOR)
#define TX8_IF_MAJOR(v)			((v) >> 16)
#define TX8_IF_MINOR(v)			((v) & 0xffff)

/* ------------------------------------------------------------------------ */
/* Memory map of BAR2                                                        */
/* ------------------------------------------------------------------------ */

#define TX8_PAGE_SIZE			4096u

#define TX8_MAX_QUEUES			8
#define TX8_SQ_ENTRIES			16	/* power of two */
#define TX8_CQ_ENTRIES			64	/* power of two */
#define TX8_JOB_MAX_RANGES		128
#define TX8_MAX_CORES			64
#define TX8_MAX_LEASES			256
#define TX8_LABEL_LEN			32

#define TX8_CTRL_HEADER_OFFSET		0x000000u	/* struct tx8_ctrl */
#define TX8_QUEUE_OFFSET(q)		(0x010000u + (q) * 0x1000u)
#define TX8_LEASE_TABLE_OFFSET		0x020000u	/* tx8_lease[] */
#define TX8_SQ_OFFSET(q)		(0x100000u + (q) * 0x20000u)
#define TX8_SQ_ENTRY_SIZE		0x1000u
/* Device address of SQ slot i of queue q: slots are TX8_SQ_ENTRY_SIZE apart,
 * larger than struct tx8_job_desc, so never index them as an array of it.
 */
#define TX8_SQ_SLOT_OFFSET(q, i) \
	(TX8_SQ_OFFSET(q) + ((i) & (TX8_SQ_ENTRIES - 1)) * TX8_SQ_ENTRY_SIZE)
#define TX8_CQ_OFFSET(q)		(TX8_SQ_OFFSET(q) + 0x10000u)
/* Since interface 1.9: the completion record's second half, slot i of
 * queue q (struct tx8_completion_ext), right after the CQ.
 */
#define TX8_CQX_OFFSET(q)		(TX8_CQ_OFFSET(q) + 0x1000u)
/* Size of the control block; device memory for buffers starts here. */
#define TX8_CTRL_SIZE			0x200000u	/* 2 MiB */

#define TX8_MIN_MEMORY			(16ull << 20)
#define TX8_MAX_MEMORY			(64ull << 30)

/* ------------------------------------------------------------------------ */
/* Data types                                                                */
/* ------------------------------------------------------------------------ */

enum tx8_dtype {
	TX8_DTYPE_F32	= 0,
	TX8_DTYPE_F16	= 1,
	TX8_DTYPE_BF16	= 2,
	TX8_DTYPE_I8	= 3,	/* signed int8, with f32 scales */
	TX8_DTYPE_I32	= 4,
	TX8_DTYPE_COUNT	= 5,
};

/*
 * KV-cache block types (interface 1.6). Not members of enum tx8_dtype (not
 * in caps.dtypes, counters or weights): valid only as CONVERT src_dtype /
 * dst_dtype, ATTENTION kv_dtype, and the DSA_INDEX key cache
 * (TX8_DSA_F_KEY_Q8_0). Elements come in blocks of TX8_KV_BLOCK along a
 * row; every element count (cols, ld, dims) of such an operand must be a
 * multiple of TX8_KV_BLOCK, and n elements take n / 32 blocks:
 *   Q8_0: f16 scale d, then 32 x int8 q      (34 bytes); x = q * d
 *   Q4_0: f16 scale d, then 16 bytes, element 2i in the low nibble of
 *         byte i and 2i + 1 in the high one, q = nibble - 8 in [-8, 7]
 *         (18 bytes); x = q * d
 * Quantisation (CONVERT f32 -> Q8_0 / Q4_0) per block: amax = max |x|,
 * d = f16(amax / 127) resp. f16(amax / 7), q = clamp(round(x / d)).
 * caps.flags TX8_CAP_KV_BLOCK says a device has them.
 */
#define TX8_DTYPE_Q8_0			16
#define TX8_DTYPE_Q4_0			17
#define TX8_KV_BLOCK			32

/*
 * FP8 weights (caps.flags TX8_CAP_FP8). Not a member of enum tx8_dtype
 * (not in caps.dtypes; its MACs count in counters.macs_fp8): valid only as
 * the dtype of a DENSE struct tx8_weight of MATMUL and MOE_FFN, with float
 * activations (act_dtype F32, F16 or BF16). data holds rows x cols E4M3
 * codes (OCP FP8 E4M3 "FN", PyTorch's float8_e4m3fn: 1 sign, 4 exponent
 * bits of bias 7, 3 mantissa bits; no infinities, S.1111.111 is NaN,
 * largest 448, subnormals m * 2^-9), row-major; scales holds f32
 * [ceil(rows / 128)][ceil(cols / 128)], one per block of 128 x 128 (the
 * last block row / column narrower), and group_size must be
 * TX8_FP8_BLOCK. Dequantised W[r][c] = e4m3(data[r][c]) x
 * scales[r / 128][c / 128], rounded once to f32; the products with the
 * activations are then those of an F32 weight holding these values (the
 * Hugging Face FP8 checkpoints' layout, stored bit for bit).
 */
#define TX8_DTYPE_F8_E4M3		18
#define TX8_FP8_BLOCK			128

/* caps.dtypes bitmask: bit (1 << enum tx8_dtype) */
#define TX8_DTYPE_BIT(t)		(1u << (t))

/* ------------------------------------------------------------------------ */
/* Capabilities and device-wide state (at TX8_CTRL_HEADER_OFFSET)            */
/* ------------------------------------------------------------------------ */

/* Capability flags (tx8_caps.flags) */
#define TX8_CAP_SPARSE			(1u << 0)	/* TX8_WFMT_BLOCK_SPARSE */
#define TX8_CAP_INT8_DOT		(1u << 1)	/* native int8 dot products */
#define TX8_CAP_RESET			(1u << 2)	/* mailbox reset */
#define TX8_CAP_FAULT_INJECT		(1u << 3)	/* mailbox fault injection */
#define TX8_CAP_KV_BLOCK		(1u << 4)	/* 1.6: Q8_0 / Q4_0 KV-cache types */
#define TX8_CAP_ABORT_JOB		(1u << 5)	/* mailbox ABORT_JOB (one job) */
#define TX8_CAP_FP8			(1u << 6)	/* 1.8: TX8_DTYPE_F8_E4M3 weights */

struct tx8_caps {
	__u64 mem_size;		/* bytes of BAR2, power of two */
	__u64 heap_offset;	/* first allocatable byte (TX8_CTRL_SIZE) */
	__u64 heap_size;	/* mem_size - heap_offset */
	__u32 num_cores;	/* compute cores (worker threads) */
	__u32 dtypes;		/* TX8_DTYPE_BIT mask */
	__u32 flags;		/* TX8_CAP_* */
	__u32 max_queues;	/* TX8_MAX_QUEUES */
	__u32 sq_entries;	/* TX8_SQ_ENTRIES */
	__u32 cq_entries;	/* TX8_CQ_ENTRIES */
	__u32 max_ranges;	/* TX8_JOB_MAX_RANGES */
	__u32 max_cmd_size;	/* largest command buffer, bytes */
	__u32 sparse_block;	/* TX8_SPARSE_BLOCK */
	__u32 max_topk;		/* largest k of TOPK/MOE_ROUTE/SAMPLE */
	__u64 core_clock_hz;	/* nominal; device time is in ns */
	char  name[32];		/* e.g. "TX8 (tx8-emu)", NUL padded */
	__u32 numa_node;	/* host NUMA node of the device memory */
	__u32 rsvd[5];
};

/* Device states (tx8_ctrl.state) */
enum tx8_dev_state {
	TX8_STATE_OFF		= 0,	/* not yet initialised */
	TX8_STATE_READY		= 1,
	TX8_STATE_RESETTING	= 2,
	TX8_STATE_ERROR		= 3,	/* needs a reset */
};

/* Operation counters, indexed by enum tx8_dtype of the weights. */
struct tx8_counters {
	__u64 jobs_submitted;	/* descriptors taken from the rings */
	__u64 jobs_completed;	/* completion records with TX8_STATUS_OK */
	__u64 jobs_failed;	/* completion records with any other status */
	__u64 commands;		/* commands executed */
	__u64 faults;		/* address faults */
	__u64 resets;		/* device or queue resets */
	__u64 busy_ns;		/* wall time with a job running */
	__u64 bytes_read;	/* operand bytes read by commands */
	__u64 bytes_written;	/* operand bytes written by commands */
	__u64 macs[TX8_DTYPE_COUNT];	/* multiply-accumulates executed */
	__u64 macs_skipped;	/* MACs skipped by the sparse engine */
	__u64 expert_cache_hits;	/* docs/hardware.md section 6 (1.6: host cache flags) */
	__u64 expert_cache_misses;
	__u64 core_busy_ns[TX8_MAX_CORES];	/* per compute core */
	/*
	 * Since interface 1.8 (zero before): the device's power model
	 * (docs/hardware.md section 7). Energy counters never decrease, not
	 * across queue resets nor device restarts of one tx8-emu process.
	 */
	__u64 energy_uj;	/* board energy: static power x time + dynamic */
	__u64 energy_active_uj;	/* sum of the commands' energies
				 * (tx8_prof_record.energy_pj)
				 */
	__u64 power_mw;		/* board power over the last 100 ms */
	__u64 power_avg_mw;	/* board power over the last 1 s */
	__u64 power_cap_mw;	/* board power limit in force, 0 = none */
	__u64 clock_permille;	/* modelled clock of the last command over
				 * the nominal one (1000 = not throttled)
				 */
	__u64 link_bytes;	/* host-link bytes charged: descriptors,
				 * command buffers, completion records
				 */
	__u64 macs_fp8;		/* MACs with TX8_DTYPE_F8_E4M3 weights */
};

struct tx8_ctrl {
	__u32 signature;	/* TX8_SIGNATURE */
	__u32 if_version;	/* TX8_IF_VERSION */
	__u32 ctrl_size;	/* TX8_CTRL_SIZE */
	__u32 state;		/* enum tx8_dev_state */
	__u64 clock_ns;		/* device time, updated every 10 ms */
	__u64 heartbeat;	/* incremented every 10 ms while alive */
	__u64 boot_id;		/* random, changes at every device start */
	__u64 heap_used;	/* bytes leased (see tx8_lease) */
	__u32 num_leases;	/* valid entries in the lease table */
	__u32 rsvd0;
	struct tx8_caps caps;
	struct tx8_counters counters;
};

/* ------------------------------------------------------------------------ */
/* Memory leases (device-managed allocation), table at                       */
/* TX8_LEASE_TABLE_OFFSET, TX8_MAX_LEASES entries, written by the device.    */
/* ------------------------------------------------------------------------ */

struct tx8_lease {
	__u64 base;		/* device address, page aligned; 0 = unused */
	__u64 size;		/* bytes, page multiple */
	__s32 owner_peer;	/* ivshmem peer id */
	__u32 rsvd;
	char  label[TX8_LABEL_LEN];	/* NUL padded */
};

/* ------------------------------------------------------------------------ */
/* Queues (one per host peer), at TX8_QUEUE_OFFSET(q)                        */
/* ------------------------------------------------------------------------ */

/* Queue states (tx8_queue.state) */
enum tx8_queue_state {
	TX8_QUEUE_FREE		= 0,
	TX8_QUEUE_ACTIVE	= 1,	/* owned by owner_peer */
	TX8_QUEUE_STOPPED	= 2,	/* faulted or resetting; mailbox only */
};

/* Interrupt cause bits (tx8_queue.irq_cause), set by the device. */
#define TX8_IRQ_COMPLETION		(1u << 0)
#define TX8_IRQ_MBOX			(1u << 1)
#define TX8_IRQ_ERROR			(1u << 2)
#define TX8_IRQ_RESET_DONE		(1u << 3)

/* Mailbox commands (tx8_queue.mbox_cmd) */
enum tx8_mbox_cmd {
	TX8_MBOX_NOP		= 0,
	/* arg0 = size, arg1 = alignment (0 = page); label = owner label.
	 * ret0 = base, ret1 = size (rounded up to pages). The memory reads
	 * as zeros. -ENOMEM: no room; -ENOSPC: lease table full.
	 */
	TX8_MBOX_LEASE		= 1,
	/* arg0 = base of a lease of this peer. */
	TX8_MBOX_RELEASE	= 2,
	/* Abort this queue's jobs (status TX8_STATUS_ABORTED), empty both
	 * rings (heads = tails = 0), state ACTIVE. ret0 = jobs aborted.
	 * ret1 = highest seqno aborted (completed_seqno is raised to it).
	 * No completion records are written for the aborted jobs.
	 */
	TX8_MBOX_RESET_QUEUE	= 3,
	/* arg0 = enum tx8_fault, arg1 = parameter (ms for SLOW), arg2 =
	 * number of jobs to affect (0 = 1).
	 */
	TX8_MBOX_INJECT_FAULT	= 4,
	/* arg0 = base of a lease of this peer; label = new label. */
	TX8_MBOX_SET_LABEL	= 5,
	/* Since caps.flags TX8_CAP_ABORT_JOB: abort one job of this queue,
	 * arg0 = its descriptor seqno; no other job is touched. A running
	 * (or hung) job stops, its completion record says
	 * TX8_STATUS_ABORTED. A job still in the ring, not taken yet, is
	 * marked: when the device takes it, it completes at once with
	 * TX8_STATUS_ABORTED, unrun (start_ns = end_ns). ret0 =
	 * TX8_ABORT_RUNNING, TX8_ABORT_QUEUED, or TX8_ABORT_NONE (no such
	 * unfinished job: its record is written or on its way). -ENOSPC: more
	 * than TX8_SQ_ENTRIES marked jobs. RESET_QUEUE forgets the marks.
	 * Stopping a running job counts in tx8_counters.resets.
	 */
	TX8_MBOX_ABORT_JOB	= 6,
	/* Since 1.8: arg0 = the board power limit in mW (0 = none), for the
	 * whole device (docs/hardware.md section 7); -EINVAL above 10^9.
	 * Numbered apart from the queue commands.
	 */
	TX8_MBOX_SET_POWER_CAP	= 16,
};

/* TX8_MBOX_ABORT_JOB ret0 */
#define TX8_ABORT_NONE			0
#define TX8_ABORT_RUNNING		1
#define TX8_ABORT_QUEUED		2

/* Fault injection kinds (TX8_MBOX_INJECT_FAULT arg0) */
enum tx8_fault {
	TX8_FAULT_NONE		= 0,
	TX8_FAULT_HANG		= 1,	/* next job never finishes until reset */
	TX8_FAULT_SLOW		= 2,	/* next job takes arg1 ms longer */
	TX8_FAULT_CRASH		= 3,	/* the device process exits at once */
	TX8_FAULT_ERROR		= 4,	/* next job fails with DEVICE_ERROR */
	/* Since 1.2: a misbehaving device, for host robustness tests. */
	TX8_FAULT_BAD_RECORD	= 5,	/* next job: a record with a wrong
					 * seqno instead of its own, then
					 * cq_tail jumps 1000 records ahead
					 */
	TX8_FAULT_RESTART	= 6,	/* the device restarts: new boot_id,
					 * the queue's jobs aborted unreported
					 */
	TX8_FAULT_STOP		= 7,	/* no heartbeat, mailbox or jobs for
					 * arg1 ms
					 */
	TX8_FAULT_BAD_CAPS	= 8,	/* caps corrupted for arg1 ms */
	TX8_FAULT_BAD_LEASE	= 9,	/* next LEASE answers a base outside
					 * the memory
					 */
	TX8_FAULT_TAKE_ON_RESET	= 10,	/* next RESET_QUEUE first takes and
					 * runs one more descriptor
					 */
	TX8_FAULT_COUNT		= 11,
};

struct tx8_queue {
	__s32 owner_peer;	/* device: ivshmem peer id, -1 when free */
	__u32 state;		/* device: enum tx8_queue_state */
	__u32 sq_tail;		/* host: next slot to fill (free running) */
	__u32 sq_head;		/* device: next slot to consume (free running) */
	__u32 cq_tail;		/* device: next record to write (free running) */
	__u32 cq_head;		/* host: next record to read (free running) */
	__u32 irq_cause;	/* device sets, host clears (atomic and) */
	__u32 rsvd0;
	__u64 completed_seqno;	/* device: seqno of the last finished job */
	__u64 sq_offset;	/* device: TX8_SQ_OFFSET(q) */
	__u64 cq_offset;	/* device: TX8_CQ_OFFSET(q) */

	/* Mailbox: host fills cmd/args/label, then increments req_seq and
	 * rings TX8_DEV_VEC_MBOX; device answers, sets ack_seq = req_seq and
	 * rings TX8_HOST_VEC_MBOX.
	 */
	__u32 mbox_req_seq;	/* host */
	__u32 mbox_ack_seq;	/* device */
	__u32 mbox_cmd;		/* host: enum tx8_mbox_cmd */
	__s32 mbox_status;	/* device: 0 or a negative errno value */
	__u64 mbox_arg[4];	/* host */
	__u64 mbox_ret[2];	/* device */
	char  mbox_label[TX8_LABEL_LEN];	/* host */

	/* Per-queue counters, device-written. */
	__u64 jobs_completed;
	__u64 jobs_failed;
	__u64 busy_ns;
	__u64 bytes_leased;

	/* Since interface 1.1 (zero before): the process id of the host peer
	 * owning the queue, as the device's transport sees it (tx8-emu: the
	 * SO_PEERCRED pid of the peer's connection, in tx8-emu's PID
	 * namespace; a QEMU guest is its QEMU process). 0 when unknown or the
	 * queue is free. Device-written, informational only.
	 */
	__s32 owner_pid;
	__u32 rsvd1;
	/* Since interface 1.2 (zero before): the seqno of the last
	 * descriptor the device took from the ring (written when it takes
	 * it, before running it). Not cleared by RESET_QUEUE: after the reset
	 * answer, every job up to it had started, every later one had not.
	 */
	__u64 taken_seqno;
	/* Since interface 1.8 (zero before): energy of this queue's jobs
	 * (their commands' energies), the owner's share of energy_active_uj.
	 */
	__u64 energy_uj;
	__u64 rsvd[5];
};

/* ------------------------------------------------------------------------ */
/* Jobs: submission ring entries (TX8_SQ_ENTRY_SIZE bytes each)              */
/* ------------------------------------------------------------------------ */

/* tx8_range.access */
#define TX8_ACCESS_READ			(1u << 0)
#define TX8_ACCESS_WRITE		(1u << 1)

/*
 * A job's ranges must each lie inside one lease of the queue's owner
 * (tx8-emu fails the job with TX8_STATUS_INVALID_JOB otherwise, fault_addr
 * = the range's address, fault_cmd = 0xffffffff).
 */
struct tx8_range {
	__u64 addr;		/* device address */
	__u64 size;		/* bytes, non-zero */
	__u32 access;		/* TX8_ACCESS_* */
	__u32 rsvd;		/* zero */
};

/* tx8_job_desc.flags */
#define TX8_JOB_F_NO_IRQ		(1u << 0)	/* do not interrupt */
/* Since interface 1.5: record per-command timing into the profiling buffer
 * [prof_addr, prof_addr + prof_size) (struct tx8_prof_header followed by
 * struct tx8_prof_record[]), which must lie inside a WRITE range of the job
 * (TX8_STATUS_INVALID_JOB otherwise). Without the flag the device ignores
 * prof_addr and prof_size and records nothing.
 */
#define TX8_JOB_F_PROFILE		(1u << 1)
/* Since interface 1.6: batch-invariant MATMUL and MOE_FFN. Each output row
 * (token) is computed with the same sequence of floating-point operations
 * whatever the number of rows of the command and the split over the cores,
 * so batched decode is bit-identical to single-session decode; single-token
 * MATMUL is slower (docs/engine.md). Without the flag a row is within
 * rounding of the same row computed alone. A 1.5 device refuses the flag
 * (TX8_STATUS_INVALID_JOB, unknown flags).
 */
#define TX8_JOB_F_BATCH_INVARIANT	(1u << 2)

struct tx8_job_desc {
	__u64 seqno;		/* host-chosen, strictly increasing per queue */
	__u64 cmd_addr;		/* device address of the command buffer */
	__u32 cmd_size;		/* bytes, multiple of 8 */
	__u32 num_ranges;	/* 1..TX8_JOB_MAX_RANGES */
	__u32 flags;		/* TX8_JOB_F_* */
	__u32 rsvd0;
	__u64 user_data;	/* echoed in the completion record */
	/* Since interface 1.5 (rsvd before): read only with TX8_JOB_F_PROFILE */
	__u64 prof_addr;	/* device address, 8-byte aligned */
	__u64 prof_size;	/* bytes, >= sizeof(struct tx8_prof_header) */
	__u64 rsvd[2];
	struct tx8_range ranges[TX8_JOB_MAX_RANGES];
};

/*
 * Profiling buffer (since interface 1.5), written by the device when the job
 * ends (whatever its status). Times are the device's clock: nanoseconds of a
 * monotonic clock of the device (tx8-emu: CLOCK_MONOTONIC of its host), the
 * same clock as tx8_completion.start_ns/end_ns. A host maps it to its own
 * CLOCK_MONOTONIC with an offset (docs/hardware.md, "Profiling").
 */
#define TX8_PROF_MAGIC			0x46505854u	/* "TXPF" in memory */
#define TX8_PROF_VERSION		1

struct tx8_prof_header {
	__u32 magic;		/* TX8_PROF_MAGIC */
	__u32 version;		/* TX8_PROF_VERSION */
	__u32 capacity;		/* records that fit in prof_size */
	__u32 count;		/* records written, <= capacity */
	__u32 dropped;		/* commands run beyond capacity */
	__u32 cores;		/* compute cores of the device */
	__u64 start_ns;		/* job start, device clock */
	__u64 end_ns;		/* job end, device clock */
	__u64 setup_ns;		/* start to the first command: validation, copy */
	__u64 energy_pj;	/* 1.8: the job's energy, sum of the records' */
	__u64 rsvd;
};

struct tx8_prof_record {
	__u32 index;		/* command index in the job */
	__u16 opcode;		/* enum tx8_opcode */
	__u16 ncores;		/* cores that worked on it */
	__u64 start_ns;		/* device clock */
	__u64 end_ns;
	__u64 core_mask;	/* bit i: core i worked on it (cores < 64) */
	__u64 bytes_read;
	__u64 bytes_written;
	__u64 macs;		/* multiply-accumulates */
	__u64 energy_pj;	/* 1.8: the command's energy (power model) */
};

/* Job status (tx8_completion.status) */
enum tx8_status {
	TX8_STATUS_OK			= 0,
	TX8_STATUS_INVALID_CMD		= 1,	/* bad opcode, size or field */
	TX8_STATUS_ADDR_FAULT		= 2,	/* operand outside the ranges */
	TX8_STATUS_UNSUPPORTED_DTYPE	= 3,
	TX8_STATUS_ABORTED		= 4,	/* aborted by reset */
	TX8_STATUS_TIMEOUT		= 5,	/* set by the host driver */
	TX8_STATUS_DEVICE_ERROR		= 6,
	TX8_STATUS_INVALID_JOB		= 7,	/* bad descriptor or ranges */
	TX8_STATUS_COUNT		= 8,
};

struct tx8_completion {
	__u64 seqno;
	__u32 status;		/* enum tx8_status */
	__u32 fault_cmd;	/* index of the failing command */
	__u64 fault_addr;	/* faulting device address, if ADDR_FAULT */
	__u64 user_data;
	__u64 start_ns;		/* device time */
	__u64 end_ns;
	__u64 busy_ns;		/* summed core busy time of the job */
	__u64 macs;		/* multiply-accumulates executed */
};

/*
 * Since interface 1.9: the completion record's appended half. The record of
 * CQ slot i is struct tx8_completion at TX8_CQ_OFFSET(q) + 64 i followed by
 * this at TX8_CQX_OFFSET(q) + 64 i (the 64-byte record had no reserved word
 * left, so the ring keeps its layout and the new words live in a parallel
 * array). The device writes both halves before it publishes cq_tail. A 1.8
 * device leaves this zero.
 */
struct tx8_completion_ext {
	__u64 energy_pj;	/* the job's energy, the sum of its commands'
				 * (tx8_prof_record.energy_pj) as the power
				 * model charged them
				 */
	__u64 rsvd[7];
};

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */
/*
 * A command buffer is a sequence of commands, each starting with
 * struct tx8_cmd_hdr. hdr.size is the whole command in bytes (a multiple
 * of 8, equal to the size of the opcode's structure). Commands run in order;
 * each sees the results of the previous ones. Every operand range is
 * checked against the job's ranges before the command touches memory.
 *
 * Unless a command says otherwise: activations are row-major f32 with a
 * row stride (ld*) in elements; "T" is the number of tokens (rows).
 */

enum tx8_opcode {
	TX8_OP_NOP		= 0,
	TX8_OP_FILL		= 1,
	TX8_OP_COPY		= 2,
	TX8_OP_CONVERT		= 3,
	TX8_OP_MATMUL		= 4,
	TX8_OP_RMSNORM		= 5,
	TX8_OP_LAYERNORM	= 6,
	TX8_OP_ROPE		= 7,
	TX8_OP_ATTENTION	= 8,
	TX8_OP_SWIGLU		= 9,
	TX8_OP_ADD		= 10,
	TX8_OP_EMBED		= 11,
	TX8_OP_MOE_ROUTE	= 12,
	TX8_OP_MOE_FFN		= 13,
	TX8_OP_DSA_INDEX	= 14,
	TX8_OP_SAMPLE		= 15,
	TX8_OP_COUNT		= 16,
};

struct tx8_cmd_hdr {
	__u16 opcode;		/* enum tx8_opcode */
	__u16 flags;		/* per opcode, unknown bits must be zero */
	__u32 size;		/* bytes of the whole command */
};

/* FILL: write a 32-bit pattern. dst must be 4-byte aligned, size % 4 == 0 */
struct tx8_cmd_fill {
	struct tx8_cmd_hdr hdr;
	__u64 dst;
	__u64 bytes;
	__u32 value;
	__u32 rsvd;
};

/* COPY: memmove of bytes (ranges may overlap). */
struct tx8_cmd_copy {
	struct tx8_cmd_hdr hdr;
	__u64 dst;
	__u64 src;
	__u64 bytes;
};

/*
 * CONVERT: a [rows x cols] matrix from src_dtype to dst_dtype with row
 * strides in elements. Supported pairs: any of F32/F16/BF16 to any of them;
 * F32 -> I8 (quantise: per-row symmetric scale written to scales[row],
 * scale = max|x| / 127); I8 -> F32 (dequantise with scales[row]).
 */
struct tx8_cmd_convert {
	struct tx8_cmd_hdr hdr;
	__u64 dst;
	__u64 src;
	__u64 scales;		/* f32 [rows], only for I8 */
	__u32 rows;
	__u32 cols;
	__u32 ld_dst;
	__u32 ld_src;
	__u16 dst_dtype;
	__u16 src_dtype;
	__u32 rsvd;
};

/* Weight formats */
enum tx8_wfmt {
	TX8_WFMT_DENSE		= 0,	/* [rows x cols] row-major */
	TX8_WFMT_BLOCK_SPARSE	= 1,	/* see below */
};

#define TX8_SPARSE_BLOCK		32	/* elements along cols */

/*
 * A weight matrix W [rows = N outputs x cols = K inputs].
 *
 * DENSE: data holds rows*cols elements of dtype, row-major.
 *
 * BLOCK_SPARSE: each row is split into cols/TX8_SPARSE_BLOCK blocks of
 * TX8_SPARSE_BLOCK consecutive elements (cols must be a multiple of it).
 * Only non-zero blocks are stored, CSR style: index points to
 * u32 row_ptr[rows + 1] followed by u16 col_block[nnz_blocks]; row r's
 * blocks are col_block[row_ptr[r] .. row_ptr[r+1]), strictly increasing;
 * data holds nnz_blocks * TX8_SPARSE_BLOCK elements of dtype in that order.
 * The device skips absent blocks (no MACs are executed for them).
 *
 * Scales (dtype I8 only): f32. group_size == 0: one scale per row
 * (scales[rows]); otherwise cols % group_size == 0, group_size is a multiple
 * of TX8_SPARSE_BLOCK for sparse weights, and scales[rows][cols/group_size].
 * Dequantised W[r][c] = data[r][c] * scale.
 */
struct tx8_weight {
	__u64 data;
	__u64 scales;		/* I8 only, else 0 */
	__u64 index;		/* BLOCK_SPARSE only, else 0 */
	__u32 rows;
	__u32 cols;
	__u32 nnz_blocks;	/* BLOCK_SPARSE only */
	__u32 group_size;
	__u16 dtype;		/* F32, F16, BF16 or I8 */
	__u16 format;		/* enum tx8_wfmt */
	__u32 rsvd;		/* 0; MOE_FFN expert tables (1.6): TX8_WEIGHT_F_* */
};

/*
 * Flags in the rsvd word of the gate entry (j = 0) of a MOE_FFN expert
 * table (interface 1.6; every other weight, and the up/down entries, keep
 * rsvd = 0). The host's expert cache (docs/glm-inference.md) sets XCACHE
 * on an expert it serves from a cache slot and XMISS on one it had to
 * load for this pass; each expert a MOE_FFN uses with XCACHE counts one
 * expert_cache_hits, or one expert_cache_misses with XMISS too. Entries
 * without flags (resident experts, 1.5 tables) count nothing.
 */
#define TX8_WEIGHT_F_XCACHE		(1u << 0)
#define TX8_WEIGHT_F_XMISS		(1u << 1)

/* MATMUL flags */
#define TX8_MATMUL_F_ACCUMULATE		(1u << 0)	/* y += x W^T */
#define TX8_MATMUL_F_BIAS		(1u << 1)	/* + bias[n] */

/*
 * MATMUL: y[T x N] = x[T x K] . W^T (+ bias) (+ y if ACCUMULATE).
 * x, y, bias f32. act_dtype says how x enters the multiply: F32 as is;
 * F16/BF16: rounded to that type; I8: quantised per row on the fly
 * (symmetric, scale = max|x_row| / 127), int8 x int8 products accumulated
 * in int32, then scaled to f32 (requires an I8 weight). With an F16/BF16
 * weight and act F32 the products are computed in f32.
 */
struct tx8_cmd_matmul {
	struct tx8_cmd_hdr hdr;
	__u64 y;
	__u64 x;
	__u64 bias;
	struct tx8_weight w;
	__u32 tokens;		/* T */
	__u32 ld_x;		/* >= K */
	__u32 ld_y;		/* >= N */
	__u16 act_dtype;	/* F32, F16, BF16 or I8 */
	__u16 rsvd;
};

/*
 * RMSNORM: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * gamma, for rows
 * r < rows of dim elements. gamma f32 [dim]. y may equal x.
 */
struct tx8_cmd_rmsnorm {
	struct tx8_cmd_hdr hdr;
	__u64 y;
	__u64 x;
	__u64 gamma;
	__u32 rows;
	__u32 dim;
	__u32 ld_x;
	__u32 ld_y;
	tx8_f32 eps;
	__u32 rsvd;
};

/* LAYERNORM: y = (x - mean) / sqrt(var + eps) * gamma + beta. */
struct tx8_cmd_layernorm {
	struct tx8_cmd_hdr hdr;
	__u64 y;
	__u64 x;
	__u64 gamma;
	__u64 beta;
	__u32 rows;
	__u32 dim;
	__u32 ld_x;
	__u32 ld_y;
	tx8_f32 eps;
	__u32 rsvd;
};

/* ROPE modes */
enum tx8_rope_mode {
	TX8_ROPE_NEOX		= 0,	/* pairs (i, i + rot_dim/2) */
	TX8_ROPE_INTERLEAVED	= 1,	/* pairs (2i, 2i + 1) */
};

/* ROPE flags (since interface 1.4) */
#define TX8_ROPE_F_ATTN_FACTOR		(1u << 0)	/* cos, sin *= attn_factor */

/*
 * ROPE, in place on x: for token t < tokens and head h < heads, the slice
 * x[t * ld_token + h * ld_head + offset .. + rot_dim) is rotated by angles
 * pos[t] * inv_freq[i], i < rot_dim / 2. pos i32 [tokens], inv_freq f32
 * [rot_dim / 2] (computed by the host, so any scaling rule fits).
 * NEOX: (x[i], x[i + rot_dim/2]); INTERLEAVED: (x[2i], x[2i + 1]).
 * With TX8_ROPE_F_ATTN_FACTOR (1.4): c = f32(cos(angle)) * attn_factor and
 * s = f32(sin(angle)) * attn_factor (YaRN's attention_factor, "mscale");
 * attn_factor must be finite. Without the flag attn_factor must be 0 (it
 * was rsvd before 1.4) and c, s are the plain cos, sin.
 */
struct tx8_cmd_rope {
	struct tx8_cmd_hdr hdr;
	__u64 x;
	__u64 pos;
	__u64 inv_freq;
	__u32 tokens;
	__u32 heads;
	__u32 ld_token;
	__u32 ld_head;
	__u32 offset;
	__u32 rot_dim;		/* even */
	__u32 mode;		/* enum tx8_rope_mode */
	tx8_f32 attn_factor;	/* 1.4, with TX8_ROPE_F_ATTN_FACTOR; else 0 */
};

/*
 * ATTENTION with GQA over a KV cache.
 * q f32 [tokens][q_heads][ld_q_head], using dims [0, qk_dim).
 * k cache [kv_len][kv_heads][ld_k_head] of kv_dtype (F32/F16/BF16; since
 * 1.6 also Q8_0 / Q4_0: then qk_dim, v_dim, ld_k_head, ld_v_head are
 * multiples of TX8_KV_BLOCK). k and v may be the same cache with
 * v_dim < qk_dim (absorbed MLA: the latent serves as key and value),
 * v cache [kv_len][kv_heads][ld_v_head] of kv_dtype, dims [0, v_dim).
 * out f32 [tokens][q_heads][ld_o_head], dims [0, v_dim).
 * Query t sits at absolute position q_pos0 + t and attends to keys
 * s <= q_pos0 + t (causal), s < kv_len. Head h uses kv head
 * h / (q_heads / kv_heads). Scores are scaled by scale, softmax in f32.
 * With TX8_ATTN_F_V_DTYPE (1.6) the v cache has its own type v_dtype
 * (a KV-cache type as kv_dtype); without it v_dtype must be 0.
 * If sel != 0: i32 [tokens][sel_k]; query t attends only to the keys
 * listed (entries < 0 are ignored, others must be causal-valid) -- the
 * DSA indexer's selection.
 * With TX8_ATTN_F_BF16 (1.7) the dot products take BF16 operands with f32
 * accumulation, as a matrix unit's BF16 mode (FlashAttention's): each query
 * row is multiplied by scale and rounded to BF16, the K and V elements are
 * rounded to BF16 (exact for a BF16 cache), and the probabilities p are
 * rounded to BF16 for the P V product while the softmax sums the f32 p.
 * Rounding is to nearest even with denormals as zero. qk_dim, v_dim,
 * ld_k_head and ld_v_head must then be even. Results differ from the f32
 * form by BF16 rounding (docs/hardware.md, "ATTENTION in BF16").
 * Since 1.10, if mask != 0: a key bitmap u64 [tokens][ld_mask] (custom
 * attention masks): query t attends key s only if bit s % 64 of word
 * mask[t][s / 64] is set, as well as the causal rule and the selection
 * (if any); ld_mask covers the keys any query sees
 * (ld_mask * 64 >= min(kv_len, q_pos0 + tokens)). A query with no visible
 * key gets zeros. A command of TX8_CMD_ATTENTION_SIZE_1_9 bytes (the 1.9
 * form) has mask 0; ld_mask and rsvd1 are 0 when mask is 0.
 */
struct tx8_cmd_attention {
	struct tx8_cmd_hdr hdr;
	__u64 out;
	__u64 q;
	__u64 k;
	__u64 v;
	__u64 sel;
	__u32 tokens;
	__u32 q_heads;
	__u32 kv_heads;
	__u32 qk_dim;
	__u32 v_dim;
	__u32 kv_len;		/* keys present in the cache */
	__u32 q_pos0;
	__u32 sel_k;
	__u32 ld_q_head;	/* elements between heads; token stride is */
	__u32 ld_k_head;	/* heads * ld_*_head */
	__u32 ld_v_head;
	__u32 ld_o_head;
	tx8_f32 scale;
	__u16 kv_dtype;
	__u16 v_dtype;		/* 1.6, with TX8_ATTN_F_V_DTYPE; else 0 (rsvd) */
	/* Since 1.10: the key bitmap, or 0 */
	__u64 mask;
	__u32 ld_mask;		/* u64 words per token of the bitmap */
	__u32 rsvd1;
};

#define TX8_CMD_ATTENTION_SIZE_1_9	__builtin_offsetof(struct tx8_cmd_attention, mask)

/* ATTENTION flags (since interface 1.6) */
#define TX8_ATTN_F_V_DTYPE		(1u << 0)	/* v cache of v_dtype, not kv_dtype */
#define TX8_ATTN_F_BF16			(1u << 1)	/* 1.7: BF16 dot products */

/* SWIGLU: y[r][c] = silu(gate[r][c]) * up[r][c], rows x cols. */
struct tx8_cmd_swiglu {
	struct tx8_cmd_hdr hdr;
	__u64 y;
	__u64 gate;
	__u64 up;
	__u32 rows;
	__u32 cols;
	__u32 ld_y;
	__u32 ld_gate;
	__u32 ld_up;
	__u32 rsvd;
};

/* ADD: y[i] = alpha * a[i] + beta * b[i], i < n, f32. y may alias a or b. */
struct tx8_cmd_add {
	struct tx8_cmd_hdr hdr;
	__u64 y;
	__u64 a;
	__u64 b;
	__u64 n;
	tx8_f32 alpha;
	tx8_f32 beta;
};

/*
 * EMBED: out[t] = dequant(table[ids[t]]) as f32, t < tokens.
 * table: vocab x dim of dtype (F32/F16/BF16/I8; I8 with f32 scales[vocab]).
 * ids i32 [tokens]; an id outside [0, vocab) fails with INVALID_CMD.
 */
struct tx8_cmd_embed {
	struct tx8_cmd_hdr hdr;
	__u64 out;
	__u64 ids;
	__u64 table;
	__u64 scales;
	__u32 tokens;
	__u32 vocab;
	__u32 dim;
	__u32 ld_out;
	__u16 dtype;
	__u16 rsvd0;
	__u32 rsvd1;
};

/* MOE_ROUTE flags */
#define TX8_ROUTE_F_NORM_TOPK		(1u << 0)	/* renormalise */
#define TX8_ROUTE_F_LOAD_PENALTY	(1u << 1)	/* use lambda * load */
#define TX8_ROUTE_F_COUNT		(1u << 2)	/* update counts */
#define TX8_ROUTE_F_SOFTMAX		(1u << 3)	/* 1.4: softmax scores */

/*
 * MOE_ROUTE (GLM / DeepSeek-V3 style router; Qwen3-MoE with SOFTMAX).
 * logits f32 [tokens][experts] (from a MATMUL with the gate weight).
 *   s = sigmoid(logits), or with SOFTMAX (1.4) s = softmax(logits) over the
 *   token's experts in f32 (max subtracted, sum in double; Qwen3-MoE's
 *   softmax(router_logits, dtype=float32); NaN and -inf logits get 0, +inf
 *   logits alone share 1, a row with nothing above -inf gives all 0).
 *   SOFTMAX requires bias == 0 and n_group <= 1 (else INVALID_CMD); lambda,
 *   LOAD_PENALTY, NORM_TOPK, COUNT and scaling act as below.
 *   choice = s + bias (bias f32 [experts], the e_score_correction_bias)
 *   if LOAD_PENALTY: choice -= lambda * load[e], where
 *     load[e] = counts[e] / max(1, sum(counts))
 *   group limit: experts are split in n_group groups; a group's score is
 *   the sum of its two best choice values; only the topk_group best groups
 *   are eligible (n_group <= 1: all eligible).
 *   pick the top_k eligible experts by choice (ties: lower index).
 *   weight = s[e] (unbiased); if NORM_TOPK: weight /= sum of the k weights
 *   (+1e-20); weight *= scaling.
 * out_ids i32 [tokens][top_k], out_w f32 [tokens][top_k], ordered by choice.
 * counts u64 [experts]: read for LOAD_PENALTY; if COUNT, incremented by one
 * per selection after all tokens are routed.
 */
struct tx8_cmd_moe_route {
	struct tx8_cmd_hdr hdr;
	__u64 out_ids;
	__u64 out_w;
	__u64 logits;
	__u64 bias;		/* 0 = none */
	__u64 counts;		/* 0 = none (then no penalty, no count) */
	__u32 tokens;
	__u32 experts;
	__u32 top_k;
	__u32 n_group;
	__u32 topk_group;
	tx8_f32 scaling;
	tx8_f32 lambda;
	__u32 rsvd;
};

/*
 * MOE_FFN: grouped expert SwiGLU FFN.
 * experts: table of experts x 3 struct tx8_weight (gate [F x D], up [F x D],
 * down [D x F]) in device memory; every weight it names is range-checked
 * before any work. For token t and j < top_k with e = ids[t][j] (skipped if
 * e < 0):  y[t] += w[t][j] * down_e(silu(gate_e x[t]) * up_e x[t]).
 * If !(flags & ACCUMULATE) y is zeroed first. act_dtype as for MATMUL.
 * Order and rounding of the sum are defined: y[t] takes its terms expert by
 * expert in increasing expert id, each as one fused multiply-add per
 * element, y = fma(w[t][j], o[c], y) (one rounding), on every kernel path,
 * so a host or another device can split or continue the sum bit for bit
 * (expert parallelism, docs/multi-device.md).
 * The device's expert cache (see docs) counts hits and misses per expert
 * weight use.
 */
struct tx8_cmd_moe_ffn {
	struct tx8_cmd_hdr hdr;
	__u64 y;
	__u64 x;
	__u64 ids;
	__u64 w;
	__u64 experts;
	__u32 tokens;
	__u32 top_k;
	__u32 num_experts;
	__u32 dim;		/* D */
	__u32 ffn_dim;		/* F */
	__u32 ld_x;
	__u32 ld_y;
	__u16 act_dtype;
	__u16 rsvd0;
};

#define TX8_MOE_FFN_F_ACCUMULATE	(1u << 0)

/*
 * DSA_INDEX: the GLM-5 / DeepSeek-V3.2 lightning indexer's scoring and
 * selection. For query t (position q_pos0 + t) and key s <= q_pos0 + t,
 * s < kv_len:
 *   score[t][s] = sum_h w[t][h] * relu(q[t][h] . k[s])
 * q f32 [tokens][heads][ld_q_head] (dims [0, dim)), k f32 [kv_len][ld_k],
 * w f32 [tokens][heads] (already including any scaling).
 * With TX8_DSA_F_KEY_Q8_0 (1.6) k is Q8_0 [kv_len][ld_k] (dim, ld_k
 * multiples of TX8_KV_BLOCK), dequantised to f32 before the dot products.
 * With TX8_DSA_F_QUERY_Q8 as well (1.9; only with TX8_DSA_F_KEY_Q8_0) the
 * products are 8-bit, as DeepSeek-V3.2's FP8 indexer: each 32-element
 * block b of q[t][h] is quantised once, dq = amax / 127 and
 * qi = round-to-nearest-even(q * (127 / amax)) clamped to [-127, 127]
 * (amax 0, or a NaN element: 0); with dk the key block's f16 scale and
 * n_b the exact integer sum of qi * ki over the block,
 *   q[t][h] . k[s] = fma(n_b, dq * dk, .) over the blocks in order, from 0
 *   score[t][s] = sum over h in order, from 0, of (dot > 0 ? dot : 0) * w
 * (each product and sum rounded to f32, no other contraction).
 * sel i32 [tokens][top_k] receives the indices of the top_k highest scores
 * (ties: lower index), in increasing score rank order; -1 pads when fewer
 * than top_k keys are visible.
 * Since 1.10, if mask != 0: a key bitmap as ATTENTION's (u64 [tokens]
 * [ld_mask], ld_mask * 64 >= min(kv_len, q_pos0 + tokens)); a key whose bit
 * is clear is not visible to the query: it scores -inf before the top-k
 * and is never in the selection (its entry is -1). A command of
 * TX8_CMD_DSA_INDEX_SIZE_1_9 bytes (the 1.9 form) has mask 0.
 */
#define TX8_DSA_F_KEY_Q8_0		(1u << 0)	/* 1.6: Q8_0 key cache */
#define TX8_DSA_F_QUERY_Q8		(1u << 1)	/* 1.9: 8-bit products */

struct tx8_cmd_dsa_index {
	struct tx8_cmd_hdr hdr;
	__u64 sel;
	__u64 q;
	__u64 k;
	__u64 w;
	__u32 tokens;
	__u32 heads;
	__u32 dim;
	__u32 kv_len;
	__u32 q_pos0;
	__u32 top_k;
	__u32 ld_q_head;
	__u32 ld_k;
	/* Since 1.10: the key bitmap, or 0 */
	__u64 mask;
	__u32 ld_mask;		/* u64 words per token of the bitmap */
	__u32 rsvd1;
};

#define TX8_CMD_DSA_INDEX_SIZE_1_9	__builtin_offsetof(struct tx8_cmd_dsa_index, mask)

/*
 * SAMPLE: for each of the `rows` rows of logits f32 [rows][ld_logits] (vocab
 * entries used), choose a token into out i32 [rows].
 * temperature <= 0: argmax (ties: lower id). Otherwise: (logits - max) /
 * temperature (in double precision: 1 / temperature never overflows, so a
 * tiny temperature keeps only the maximum and exact ties with it),
 * keep the top_k (0 = all, at most caps.max_topk when non-zero), softmax,
 * keep the smallest set with cumulative probability >= top_p (1 = all),
 * renormalise and draw with a counter-based generator keyed by
 * (seed, counter + row) -- the same inputs give the same token.
 * If probs != 0 the chosen token's probability is written there (f32[rows]).
 * Non-finite logits (since interface 1.3): NaN is never chosen (it counts
 * as -inf); if a row has +inf logits they alone share the probability
 * (greedy: the lowest such id); a row with no logit above -inf gives its
 * lowest non-NaN id (0 if all are NaN) with probability 0.
 */
struct tx8_cmd_sample {
	struct tx8_cmd_hdr hdr;
	__u64 out;
	__u64 logits;
	__u64 probs;
	__u64 seed;
	__u64 counter;
	__u32 rows;
	__u32 vocab;
	__u32 ld_logits;
	__u32 top_k;
	tx8_f32 temperature;
	tx8_f32 top_p;
	/*
	 * Since 1.3. A command of TX8_CMD_SAMPLE_SIZE_1_2 bytes (the 1.2 form)
	 * has all of them 0 and no flags.
	 * Penalties first (llama.cpp): for every id occurring c > 0 times in
	 * the row's history, logit = logit > 0 ? logit / repeat_penalty :
	 * logit * repeat_penalty (0 or 1: off), then
	 * logit -= c * frequency_penalty + presence_penalty. They apply to
	 * greedy too. Then, with temperature > 0, the filters: top-k, top-p,
	 * then min-p (keep p >= min_p * p_max; 0 = off). Without
	 * TX8_SAMPLE_F_TEMP_LAST the probabilities the filters see are those
	 * at the temperature (transformers' order: temperature first); with it
	 * they are those at temperature 1 and the temperature applies to the
	 * kept tokens only (llama.cpp's order). The draw uses the kept tokens'
	 * probabilities at the temperature.
	 */
	tx8_f32 min_p;
	tx8_f32 repeat_penalty;
	tx8_f32 presence_penalty;
	tx8_f32 frequency_penalty;
	__u64 history;		/* i32 [rows][n_history] ids (< 0: none), or 0 */
	__u32 n_history;	/* ids per row (at most TX8_SAMPLE_MAX_HISTORY) */
	__u32 rsvd;
	/*
	 * Since 1.9 (a command of TX8_CMD_SAMPLE_SIZE_1_3 bytes has allow 0).
	 * The allowed-token mask of grammar-constrained sampling: if allow is
	 * not 0, u32 [rows][ld_allow] words (ld_allow >= (vocab + 31) / 32);
	 * id i of a row may be chosen only if bit i % 32 of word i / 32 is
	 * set. A masked-out id counts as a NaN logit (never chosen, greedy
	 * included, and no probability mass). A row that allows no id with a
	 * non-NaN logit follows the all-NaN rule (id 0, probability 0).
	 */
	__u64 allow;
	__u32 ld_allow;
	__u32 rsvd2;
};

#define TX8_SAMPLE_F_TEMP_LAST	(1u << 0)	/* hdr.flags: llama.cpp order */
#define TX8_SAMPLE_MAX_HISTORY	65536
#define TX8_CMD_SAMPLE_SIZE_1_2	__builtin_offsetof(struct tx8_cmd_sample, min_p)
#define TX8_CMD_SAMPLE_SIZE_1_3	__builtin_offsetof(struct tx8_cmd_sample, allow)

/* ------------------------------------------------------------------------ */
/* Size checks                                                               */
/* ------------------------------------------------------------------------ */

#ifdef __KERNEL__
#include <linux/build_bug.h>
#define TX8_STATIC_ASSERT(e, m)	static_assert(e, m)
#elif defined(__cplusplus)
#define TX8_STATIC_ASSERT(e, m)	static_assert(e, m)
#else
#define TX8_STATIC_ASSERT(e, m)	_Static_assert(e, m)
#endif

TX8_STATIC_ASSERT(sizeof(struct tx8_caps) == 128, "tx8_caps");
TX8_STATIC_ASSERT(sizeof(struct tx8_lease) == 56, "tx8_lease");
TX8_STATIC_ASSERT(sizeof(struct tx8_queue) == 248, "tx8_queue");
TX8_STATIC_ASSERT(__builtin_offsetof(struct tx8_queue, bytes_leased) == 176,
		  "tx8_queue.bytes_leased");
TX8_STATIC_ASSERT(__builtin_offsetof(struct tx8_queue, owner_pid) == 184,
		  "tx8_queue.owner_pid");
TX8_STATIC_ASSERT(sizeof(struct tx8_ctrl) <= 0x10000, "tx8_ctrl");
TX8_STATIC_ASSERT(sizeof(struct tx8_job_desc) <= TX8_SQ_ENTRY_SIZE,
		  "tx8_job_desc");
TX8_STATIC_ASSERT(sizeof(struct tx8_completion) == 64, "tx8_completion");
TX8_STATIC_ASSERT(sizeof(struct tx8_prof_header) == 64, "tx8_prof_header");
TX8_STATIC_ASSERT(sizeof(struct tx8_prof_record) == 64, "tx8_prof_record");
TX8_STATIC_ASSERT(TX8_CQ_ENTRIES * sizeof(struct tx8_completion) <= 0x1000,
		  "cq");
TX8_STATIC_ASSERT(sizeof(struct tx8_completion_ext) == 64,
		  "tx8_completion_ext");
TX8_STATIC_ASSERT(0x1000 + TX8_CQ_ENTRIES * sizeof(struct tx8_completion_ext) <=
		  0x10000, "cqx");
TX8_STATIC_ASSERT(TX8_SQ_ENTRIES * TX8_SQ_ENTRY_SIZE <= 0x10000, "sq");
TX8_STATIC_ASSERT(TX8_QUEUE_OFFSET(TX8_MAX_QUEUES) <= TX8_LEASE_TABLE_OFFSET,
		  "queues");
TX8_STATIC_ASSERT(TX8_LEASE_TABLE_OFFSET +
		  TX8_MAX_LEASES * sizeof(struct tx8_lease) <= 0x100000,
		  "leases");
TX8_STATIC_ASSERT(TX8_SQ_OFFSET(TX8_MAX_QUEUES) <= TX8_CTRL_SIZE, "rings");
TX8_STATIC_ASSERT(sizeof(struct tx8_weight) == 48, "tx8_weight");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_matmul) % 8 == 0, "matmul");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_attention) % 8 == 0, "attention");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_moe_route) % 8 == 0, "route");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_moe_ffn) % 8 == 0, "moe_ffn");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_dsa_index) % 8 == 0, "dsa");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_sample) % 8 == 0, "sample");
TX8_STATIC_ASSERT(TX8_CMD_SAMPLE_SIZE_1_2 % 8 == 0, "sample 1.2");
TX8_STATIC_ASSERT(TX8_CMD_SAMPLE_SIZE_1_3 % 8 == 0, "sample 1.3");
TX8_STATIC_ASSERT(TX8_CMD_ATTENTION_SIZE_1_9 % 8 == 0, "attention 1.9");
TX8_STATIC_ASSERT(TX8_CMD_DSA_INDEX_SIZE_1_9 % 8 == 0, "dsa 1.9");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_embed) % 8 == 0, "embed");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_convert) % 8 == 0, "convert");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_rope) % 8 == 0, "rope");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_rmsnorm) % 8 == 0, "rmsnorm");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_layernorm) % 8 == 0, "layernorm");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_swiglu) % 8 == 0, "swiglu");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_add) % 8 == 0, "add");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_fill) % 8 == 0, "fill");
TX8_STATIC_ASSERT(sizeof(struct tx8_cmd_copy) % 8 == 0, "copy");

#endif /* TX8_HW_H */
