/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * TX8 accelerator DRM accel driver: shared declarations.
 */
#ifndef TX8_DRV_H
#define TX8_DRV_H

#include <linux/dma-fence.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/ratelimit.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include <drm/drm_device.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_mm.h>
#include <drm/gpu_scheduler.h>

#include <tx8/tx8_hw.h>
#include <uapi/drm/tx8_accel.h>

#define TX8_DRIVER_NAME		"tx8"
#define TX8_DRIVER_DESC		"TX8 AI accelerator"
#define TX8_DRIVER_MAJOR	1
#define TX8_DRIVER_MINOR	3	/* 1.1: DRM_TX8_SUBMIT_PROFILE;
					 * 1.2: DRM_TX8_SUBMIT_BATCH_INVARIANT;
					 * 1.3: drm_tx8_wait.energy_pj
					 */
#define TX8_LEASE_LABEL		"tx8.ko"
#define TX8_FILE_JOB_HISTORY	1024
#define TX8_MAX_IN_SYNCOBJS	64
#define TX8_MAX_WAITING		256	/* per file, jobs not yet in the ring */
#define TX8_MAX_DEV_WAITING	4096	/* per device, jobs not yet in the ring */
#define TX8_WAIT_FOR_SUBMIT_MS	1000	/* an in-syncobj without a fence yet */
#define TX8_MBOX_TIMEOUT_MS	5000
#define TX8_HEALTH_PERIOD_MS	250	/* heartbeat / boot_id check */
#define TX8_HEARTBEAT_TIMEOUT_MS 3000	/* heartbeat stalled: device lost */

extern unsigned int tx8_job_timeout_ms;

/* scheduler entities of a file: one per SUBMIT priority */
#define TX8_NUM_PRIOS		3

struct tx8_file;

/* One bound PCI function. */
struct tx8_device {
	struct drm_device drm;
	struct pci_dev *pdev;
	struct list_head node;		/* tx8_devices, under tx8_devices_lock */

	void __iomem *regs;		/* BAR0: ivshmem registers */
	void *mem;			/* BAR2: device memory, write-back */
	resource_size_t mem_phys;
	resource_size_t mem_len;
	struct tx8_ctrl *ctrl;
	struct tx8_queue *q;
	struct tx8_job_desc *sq;	/* slots are TX8_SQ_ENTRY_SIZE apart */
	struct tx8_completion *cq;
	/* the records' second halves (interface >= 1.9, else NULL) */
	struct tx8_completion_ext *cqx;
	int peer;			/* our ivshmem peer id */
	/*
	 * The device's capabilities, copied out of shared memory once at
	 * probe and validated (against the BAR length, overflow-checked):
	 * the driver never reads the device's copy again.
	 */
	struct tx8_caps caps;
	u32 max_ranges;			/* = caps.max_ranges */
	u32 max_cmd_size;		/* = caps.max_cmd_size */
	u32 if_version;			/* at probe */
	u64 boot_id;			/* at probe; another one: a restart */
	unsigned int qid;		/* our queue index */
	int irqs[TX8_NUM_VECTORS];
	unsigned int num_irqs;

	/* mailbox */
	struct mutex mbox_lock;
	wait_queue_head_t mbox_wq;

	/* device memory: one lease, sub-allocated with drm_mm */
	u64 lease_base;
	u64 lease_size;
	struct mutex mm_lock;		/* mm, bos, mem_used */
	struct drm_mm mm;
	struct list_head bos;
	u64 mem_used;

	/* jobs */
	spinlock_t job_lock;		/* everything below (not the fences) */
	struct list_head pending;	/* jobs in the ring, in ring order */
	struct list_head irq_done;	/* finished in hard IRQ, to retire */
	unsigned int inflight;
	unsigned int nr_waiting;	/* counted jobs (tx8_job.counted) */
	u64 next_seqno;			/* job (fence, WAIT) numbers */
	u64 next_hw_seqno;		/* ring descriptor numbers */
	u32 sq_tail;			/* shadow of q->sq_tail */
	u32 cq_head;			/* shadow of q->cq_head */
	bool resetting;
	bool lost;			/* device stopped answering */
	bool gone;			/* PCI function removed */
	bool stopping;			/* remove began: no timeout work */
	wait_queue_head_t ring_wq;
	u64 watch_seqno;		/* head job the timeout watches */
	unsigned long watch_start;	/* jiffies it became head */
	u64 watch_start_ns;		/* the same, ktime_get_ns() */
	/*
	 * The job timeout, measured from when the head job became head (it
	 * started on the device): armed whenever the head changes. Not
	 * drm_sched's own timeout, which 6.12 restarts whenever a job enters
	 * the ring or one finishes, so that a job could run for several
	 * job_timeout_ms.
	 */
	struct delayed_work timeout_work;
	struct ratelimit_state reset_rs; /* reset warnings and uevents */
	struct mutex reset_lock;	/* one reset at a time */

	/*
	 * The GPU scheduler of our one hardware queue (allocated apart: the
	 * scheduler's fences point at it and may outlive the device, so it is
	 * freed only at module unload). Jobs submitted but not yet handed to
	 * the ring (run_job) are on ->waiting, under job_lock.
	 */
	struct drm_gpu_scheduler *sched;
	struct list_head waiting;
	struct mutex files_lock;	/* files, tx8_file.entities_live */
	struct list_head files;		/* open files (their entities) */

	/* device health: heartbeat and boot_id monitoring, device loss */
	struct delayed_work health_work;
	struct work_struct lost_work;	/* fails everything once lost */
	const char *lost_reason;
	bool restarted;			/* boot_id changed: memory not ours */
	/*
	 * The fault handler checks ->restarted and inserts its PTE under the
	 * read side; the restart sets ->restarted under the write side, then
	 * zaps: no PTE inserted after the zap.
	 */
	struct rw_semaphore restart_rwsem;

	/* statistics */
	atomic64_t page_faults;
	atomic64_t resets;
	atomic64_t timeouts;
	atomic64_t jobs;
	u64 heartbeat_seen;
	unsigned long heartbeat_jiffies;
};

static inline struct tx8_device *to_tx8(struct drm_device *drm)
{
	return container_of(drm, struct tx8_device, drm);
}

/* A buffer object in device memory. */
struct tx8_bo {
	struct drm_gem_object base;
	struct drm_mm_node node;	/* device address range */
	struct list_head dev_node;	/* tx8_device.bos */
	char label[DRM_TX8_LABEL_LEN];
	struct tx8_job *last_job;	/* under tdev->job_lock */
	atomic64_t faults;
	pid_t owner_pid;
	kuid_t owner_uid;		/* who may see its label */
	u64 owner_client;		/* drm_file.client_id of its creator */
};

static inline struct tx8_bo *to_tx8_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct tx8_bo, base);
}

/*
 * Per open file. lock is a leaf lock (never held while taking another,
 * never taken under tdev->job_lock); the counters are atomic because jobs
 * finish under job_lock.
 */
struct tx8_file {
	struct kref ref;
	struct tx8_device *tdev;
	spinlock_t lock;		/* jobs, history, first/last_seqno */
	struct xarray jobs;		/* seqno -> tx8_job (referenced) */
	struct list_head history;	/* the same jobs, oldest first */
	unsigned int nr_history;
	u64 first_seqno;		/* first job of this file, 0 if none */
	u64 last_seqno;
	u64 trimmed_seqno;		/* newest record trimmed, 0 if none */
	atomic64_t busy_ns;		/* device time of its finished jobs */
	atomic64_t energy_pj;		/* their energy (interface >= 1.9) */
	u64 client_id;			/* drm_file.client_id (fdinfo) */
	kuid_t uid;			/* euid of its opener (/proc/tx_meminfo) */
	atomic64_t jobs_ok;
	atomic64_t jobs_failed;
	/* its jobs the scheduler holds, not yet in the ring (job_lock) */
	unsigned int nr_waiting;
	/* of these, jobs cancelled (RESET, close, loss) not yet freed */
	unsigned int nr_cancelled;
	/* scheduler entities, one per priority (LOW, NORMAL, HIGH) */
	struct drm_sched_entity entity[TX8_NUM_PRIOS];
	bool entities_live;		/* under tdev->files_lock */
	struct list_head dev_node;	/* tdev->files, under files_lock */
	struct mutex submit_lock;	/* job arm + push order */
};

/*
 * One job; freed when its fence's last reference goes. The fence has its
 * own lock, inside the job, so that a fence that outlives the device (a
 * sync_file, another driver's syncobj) never touches freed device memory;
 * every live fence holds a reference on the module (its ops).
 */
struct tx8_job {
	/* first: dma_fence_free() frees the fence's address */
	struct dma_fence fence;		/* the hardware fence (run_job) */
	struct drm_sched_job base;	/* its scheduler job */
	spinlock_t fence_lock;		/* the lock of fence, nothing else */
	struct tx8_device *tdev;
	struct tx8_file *tfile;		/* referenced */
	struct list_head node;		/* tdev->waiting, then ->pending */
	struct list_head file_node;	/* tfile->history */
	struct drm_gem_object **bos;	/* referenced until completion */
	unsigned int nr_bos;
	u64 cmd_addr;
	u32 cmd_size;
	u32 desc_flags;			/* TX8_JOB_F_* of its descriptor */
	u64 prof_addr;			/* TX8_JOB_F_PROFILE: the buffer */
	u64 prof_size;
	u64 hw_seqno;			/* descriptor seqno, 0 until queued */
	u32 ring_idx;			/* sq index it was last written at */
	u32 nr_ranges;
	struct tx8_range *ranges;
	u64 user_data;
	u32 status;
	u32 fault_cmd;
	u64 fault_addr;
	u64 start_ns;
	u64 end_ns;
	u64 busy_ns;			/* device wall time, end - start */
	u64 core_busy_ns;		/* summed over its cores */
	u64 macs;
	u64 energy_pj;			/* interface >= 1.9: from its record */
	bool done;
	bool queued;			/* entered the ring (counts in inflight) */
	/*
	 * It counts against the waiting caps (job_lock): from SUBMIT until
	 * run_job took it from the scheduler, or free_job freed it unrun.
	 */
	bool counted;
	/* SUBMIT is done with it: RESET and device loss may cancel it */
	bool armed;
	bool cancelled;			/* counted in tfile->nr_cancelled */
	/*
	 * Its dependencies (also given to the scheduler), referenced: the
	 * scheduler's prepare_job and run_job look at them to wait for jobs
	 * of the same file fully and to fail a job whose dependency failed.
	 */
	struct dma_fence **deps;
	unsigned int nr_deps;
	unsigned int dep_next;		/* deps before it have signalled */
	int dep_error;			/* error of a failed in-fence */
	bool in_sched;			/* drm_sched_job_init done */
};

static inline struct tx8_job *to_tx8_job(struct dma_fence *f)
{
	return container_of(f, struct tx8_job, fence);
}

/* tx8_drv.c */
extern struct list_head tx8_devices;
extern struct mutex tx8_devices_lock;

/* tx8_hw.c */
int tx8_hw_init(struct tx8_device *tdev);
void tx8_hw_fini(struct tx8_device *tdev);
int tx8_mbox(struct tx8_device *tdev, u32 cmd, const u64 *args,
	     unsigned int nargs, const char *label, u64 *ret0);
void tx8_ring_doorbell(struct tx8_device *tdev, u32 vector);
void tx8_read_counters(struct tx8_device *tdev, struct drm_tx8_counters *c);

/* tx8_gem.c */
int tx8_bo_create_ioctl(struct drm_device *drm, void *data,
			struct drm_file *file);
int tx8_bo_info_ioctl(struct drm_device *drm, void *data,
		      struct drm_file *file);
int tx8_bo_set_label_ioctl(struct drm_device *drm, void *data,
			   struct drm_file *file);
struct drm_gem_object *tx8_gem_prime_import(struct drm_device *drm,
					    struct dma_buf *buf);
void tx8_gem_unmap_all(struct tx8_device *tdev);

/* tx8_job.c, tx8_sched.c, tx8_reset.c */
int tx8_submit_ioctl(struct drm_device *drm, void *data,
		     struct drm_file *file);
int tx8_wait_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
void tx8_process_completions(struct tx8_device *tdev);
void tx8_process_completions_hardirq(struct tx8_device *tdev);
int tx8_jobs_init(struct tx8_device *tdev);
void tx8_jobs_fini(struct tx8_device *tdev);
int tx8_reset(struct tx8_device *tdev, const char *reason);
void tx8_device_lost(struct tx8_device *tdev, const char *reason);
void tx8_health_start(struct tx8_device *tdev);
void tx8_health_stop(struct tx8_device *tdev);
u64 tx8_file_busy_ns(struct tx8_file *tfile);
int tx8_reset_ioctl(struct drm_device *drm, void *data, struct drm_file *file);
int tx8_file_init(struct tx8_file *tfile);
void tx8_sched_exit(void);
void tx8_sched_release(struct tx8_device *tdev);
int tx8_inject_fault_ioctl(struct drm_device *drm, void *data,
			   struct drm_file *file);
void tx8_file_put(struct tx8_file *tfile);
void tx8_file_release_jobs(struct tx8_file *tfile);

/* tx8_proc.c, tx8_sysfs.c, tx8_debugfs.c */
void tx8_history_delay(void);
void tx8_file_lock_delay(void);
bool tx8_fault_irq_harvest(void);
void tx8_fault_restart_delay(void);
int tx8_proc_init(void);
void tx8_proc_fini(void);
extern const struct attribute_group tx8_sysfs_group;
void tx8_debugfs_init(struct tx8_device *tdev);

/* tx8_hwmon.c */
int tx8_hwmon_init(struct tx8_device *tdev);
u64 tx8_file_energy_uj(struct tx8_file *tfile, u64 client_busy_ns);

#endif /* TX8_DRV_H */
