// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator: jobs. The GPU scheduler (drm_sched), the submission
 * ring, completion records, dma_fences, the job timeout and the reset.
 *
 * The device gives this ivshmem peer one queue (ring); the driver runs one
 * drm_gpu_scheduler on it, and every open file has one scheduler entity
 * per SUBMIT priority. SUBMIT never waits for a job's in-syncobjs: it
 * gives the job to its entity with the dependencies (in-fences, implicit
 * dma_resv fences) and places the scheduler's finished fence in the
 * out-syncobj. Once the dependencies signalled, the scheduler picks the
 * ready entity with the oldest job (fair between clients, higher priority
 * first) and calls run_job, which writes the job into the ring with a
 * strictly increasing hw_seqno; the job's own fence (tx8_job.fence, the
 * scheduler's hardware fence) is signalled from the completion interrupt.
 * The scheduler's timeout (job_timeout_ms) calls timedout_job, which
 * resets the queue: the hung job fails with TIMEOUT, every other job that
 * had not started is given to the ring again (drm_sched_resubmit_jobs).
 * Everything about the ring is guarded by tdev->job_lock; every fence has
 * its own lock. Lock order: docs/kernel.md.
 */

#include <linux/delay.h>
#include <linux/dma-resv.h>
#include <linux/jiffies.h>
#include <linux/kobject.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_drv.h>
#include <drm/drm_print.h>
#include <drm/drm_syncobj.h>
#include <drm/drm_utils.h>

#include "tx8_drv.h"

/* A scheduler lives apart from its device: its fences point at it. */
struct tx8_sched {
	struct drm_gpu_scheduler sched;
	struct list_head node;		/* tx8_sched_graveyard */
	char name[32];
};

static LIST_HEAD(tx8_sched_graveyard);
static DEFINE_MUTEX(tx8_sched_graveyard_lock);

static inline struct tx8_job *to_tx8_sjob(struct drm_sched_job *sj)
{
	return container_of(sj, struct tx8_job, base);
}

unsigned int tx8_job_timeout_ms = 5000;

/* 100 ms .. 10 min: 0 (no timeout) would let a job hang for ever */
static int tx8_timeout_set(const char *val, const struct kernel_param *kp)
{
	struct tx8_device *tdev;
	unsigned int v;
	int ret = kstrtouint(val, 0, &v);

	if (ret)
		return ret;
	if (v < 100 || v > 600000)
		return -EINVAL;
	WRITE_ONCE(tx8_job_timeout_ms, v);
	/* the running jobs' timeouts are measured against the new value */
	mutex_lock(&tx8_devices_lock);
	list_for_each_entry(tdev, &tx8_devices, node) {
		unsigned long flags;

		spin_lock_irqsave(&tdev->job_lock, flags);
		if (tdev->watch_seqno && !tdev->stopping && !tdev->gone)
			mod_delayed_work(system_wq, &tdev->timeout_work, 0);
		spin_unlock_irqrestore(&tdev->job_lock, flags);
	}
	mutex_unlock(&tx8_devices_lock);
	return 0;
}

static const struct kernel_param_ops tx8_timeout_ops = {
	.set = tx8_timeout_set,
	.get = param_get_uint,
};
module_param_cb(job_timeout_ms, &tx8_timeout_ops, &tx8_job_timeout_ms, 0644);
MODULE_PARM_DESC(job_timeout_ms,
		 "A job running longer fails with TIMEOUT and resets the queue (ms, 100..600000, default 5000)");

static const char *tx8_fence_driver_name(struct dma_fence *f)
{
	return TX8_DRIVER_NAME;
}

static const char *tx8_fence_timeline_name(struct dma_fence *f)
{
	return "tx8-queue";
}

static void tx8_fence_release(struct dma_fence *f)
{
	struct tx8_job *job = to_tx8_job(f);

	kfree(job->ranges);
	kfree(job->bos);
	kfree(job->deps);
	if (job->tfile)
		tx8_file_put(job->tfile);
	dma_fence_free(f);
	/* taken at dma_fence_init: the ops of a live fence are module text */
	module_put(THIS_MODULE);
}

static const struct dma_fence_ops tx8_fence_ops = {
	.get_driver_name = tx8_fence_driver_name,
	.get_timeline_name = tx8_fence_timeline_name,
	.release = tx8_fence_release,
};

static void tx8_file_free(struct kref *ref)
{
	struct tx8_file *tfile = container_of(ref, struct tx8_file, ref);

	xa_destroy(&tfile->jobs);
	kfree(tfile);
}

void tx8_file_put(struct tx8_file *tfile)
{
	kref_put(&tfile->ref, tx8_file_free);
}

static u64 tx8_deps_cancel(struct tx8_device *tdev, struct tx8_file *tfile,
			   u32 status);
static long tx8_left(unsigned long deadline);

static void tx8_file_entities_fini(struct tx8_file *tfile)
{
	unsigned int i;

	lockdep_assert_held(&tfile->tdev->files_lock);
	if (!tfile->entities_live)
		return;
	/* jobs still queued are killed: free_job after their dependencies */
	for (i = 0; i < TX8_NUM_PRIOS; i++)
		drm_sched_entity_fini(&tfile->entity[i]);
	WRITE_ONCE(tfile->entities_live, false);
	list_del_init(&tfile->dev_node);
}

/*
 * The file's scheduler entities, one per priority, on the device's list.
 * Caller holds files_lock.
 */
static int tx8_file_entities_start(struct tx8_file *tfile)
{
	static const enum drm_sched_priority prio[TX8_NUM_PRIOS] = {
		DRM_SCHED_PRIORITY_LOW, DRM_SCHED_PRIORITY_NORMAL,
		DRM_SCHED_PRIORITY_HIGH,
	};
	struct tx8_device *tdev = tfile->tdev;
	unsigned int i;
	int ret = 0;

	lockdep_assert_held(&tdev->files_lock);
	for (i = 0; i < TX8_NUM_PRIOS; i++) {
		ret = drm_sched_entity_init(&tfile->entity[i], prio[i],
					    &tdev->sched, 1, NULL);
		if (ret)
			break;
	}
	if (ret) {
		while (i--)
			drm_sched_entity_fini(&tfile->entity[i]);
		return ret;
	}
	WRITE_ONCE(tfile->entities_live, true);
	list_add_tail(&tfile->dev_node, &tdev->files);
	return 0;
}

/* At open: the file's scheduler entities. */
int tx8_file_init(struct tx8_file *tfile)
{
	struct tx8_device *tdev = tfile->tdev;
	int ret;

	mutex_init(&tfile->submit_lock);
	INIT_LIST_HEAD(&tfile->dev_node);
	mutex_lock(&tdev->files_lock);
	if (!tdev->sched || READ_ONCE(tdev->gone))
		ret = -ENODEV;
	else
		ret = tx8_file_entities_start(tfile);
	mutex_unlock(&tdev->files_lock);
	return ret;
}

/*
 * At close: jobs not yet handed to the ring fail with ABORTED without
 * running; drop the file's records of its jobs (running ones go on).
 */
void tx8_file_release_jobs(struct tx8_file *tfile)
{
	struct tx8_device *tdev = tfile->tdev;
	struct tx8_job *job, *tmp;
	LIST_HEAD(list);
	bool pause;

	tx8_deps_cancel(tdev, tfile, TX8_STATUS_ABORTED);
	/*
	 * The scheduler's work is paused while the entities go: a run-job
	 * work that picked one of them before the kill puts it back in the
	 * run queue's FIFO tree when it pops a job (6.12's
	 * drm_sched_entity_pop_job() does not look at entity->stopped), and
	 * the tree would then hold a node of a freed file. reset_lock keeps a
	 * reset's drm_sched_stop()/start() and unbind (->gone, which stops
	 * the work itself) out of the way.
	 */
	mutex_lock(&tdev->reset_lock);
	mutex_lock(&tdev->files_lock);
	pause = tfile->entities_live && !READ_ONCE(tdev->gone);
	if (pause)
		drm_sched_wqueue_stop(tdev->sched);
	tx8_file_entities_fini(tfile);
	if (pause)
		drm_sched_wqueue_start(tdev->sched);
	mutex_unlock(&tdev->files_lock);
	mutex_unlock(&tdev->reset_lock);
	spin_lock(&tfile->lock);
	tx8_file_lock_delay();
	list_splice_init(&tfile->history, &list);
	tfile->nr_history = 0;
	spin_unlock(&tfile->lock);
	list_for_each_entry_safe(job, tmp, &list, file_node) {
		xa_erase(&tfile->jobs, job->fence.seqno);
		list_del_init(&job->file_node);
		dma_fence_put(&job->fence);
	}
}

/* ------------------------------------------------------------------------ */
/* Ring                                                                      */

u64 tx8_file_busy_ns(struct tx8_file *tfile)
{
	struct tx8_device *tdev = tfile->tdev;
	struct tx8_job *head;
	unsigned long flags;
	u64 busy = atomic64_read(&tfile->busy_ns), now = ktime_get_ns();

	/* the job running now counts too, so the figure does not jump */
	spin_lock_irqsave(&tdev->job_lock, flags);
	head = list_first_entry_or_null(&tdev->pending, struct tx8_job, node);
	if (head && head->tfile == tfile && tdev->watch_seqno == head->hw_seqno &&
	    now > tdev->watch_start_ns)
		busy += now - tdev->watch_start_ns;
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	return busy;
}

/* Write the job into the next ring slot. Caller holds job_lock. */
static void tx8_write_desc(struct tx8_device *tdev, struct tx8_job *job)
{
	struct tx8_job_desc *desc = (void *)tdev->sq +
		(tdev->sq_tail % TX8_SQ_ENTRIES) * TX8_SQ_ENTRY_SIZE;

	job->ring_idx = tdev->sq_tail;
	desc->seqno = job->hw_seqno;
	desc->cmd_addr = job->cmd_addr;
	desc->cmd_size = job->cmd_size;
	desc->num_ranges = job->nr_ranges;
	desc->flags = job->desc_flags;
	desc->rsvd0 = 0;
	desc->user_data = job->user_data;
	desc->prof_addr = job->prof_addr;
	desc->prof_size = job->prof_size;
	memset(desc->rsvd, 0, sizeof(desc->rsvd));
	memcpy(desc->ranges, job->ranges,
	       job->nr_ranges * sizeof(struct tx8_range));
	tdev->sq_tail++;
}

static void tx8_publish_tail(struct tx8_device *tdev)
{
	/* descriptors before the tail that announces them */
	wmb();
	WRITE_ONCE(tdev->q->sq_tail, tdev->sq_tail);
}

/* Jiffies until the watched head job has run for job_timeout_ms (0: it has). */
static unsigned long tx8_watch_left(struct tx8_device *tdev)
{
	unsigned long end = tdev->watch_start +
		msecs_to_jiffies(READ_ONCE(tx8_job_timeout_ms));

	return time_before(jiffies, end) ? end - jiffies : 0;
}

/*
 * The job at the head of the ring is the one the device runs: when the
 * head changes, its time starts and the timeout is armed for it. Caller
 * holds job_lock.
 */
static void tx8_watch_head(struct tx8_device *tdev)
{
	struct tx8_job *head;

	head = list_first_entry_or_null(&tdev->pending, struct tx8_job, node);
	if (!head) {
		tdev->watch_seqno = 0;
		cancel_delayed_work(&tdev->timeout_work);
		return;
	}
	if (head->hw_seqno == tdev->watch_seqno)
		return;
	tdev->watch_seqno = head->hw_seqno;
	tdev->watch_start = jiffies;
	tdev->watch_start_ns = ktime_get_ns();
	/* after tx8_jobs_fini began (stopping) the work is not queued again */
	if (!tdev->stopping && !tdev->gone)
		mod_delayed_work(system_wq, &tdev->timeout_work,
				 tx8_watch_left(tdev) + 1);
}

/*
 * Finish a job, in the ring or (not queued) on the waiting list. Caller
 * holds job_lock; the job moves to @done.
 */
static void tx8_job_finish(struct tx8_device *tdev, struct tx8_job *job,
			   const struct tx8_completion *rec, u32 status,
			   struct list_head *done)
{
	job->status = status;
	if (rec) {
		job->fault_cmd = rec->fault_cmd;
		job->fault_addr = rec->fault_addr;
		job->start_ns = rec->start_ns;
		job->end_ns = rec->end_ns;
		if (rec->end_ns > rec->start_ns)
			job->busy_ns = rec->end_ns - rec->start_ns;
		job->core_busy_ns = rec->busy_ns;
		job->macs = rec->macs;
	}
	if (job->dep_error)
		dma_fence_set_error(&job->fence, job->dep_error);
	else if (status != TX8_STATUS_OK)
		dma_fence_set_error(&job->fence,
				    status == TX8_STATUS_TIMEOUT ? -ETIMEDOUT :
				    status == TX8_STATUS_ABORTED ? -ECANCELED :
				    -EIO);
	/* no tfile->lock here: it is not IRQ-safe and never nests in ours */
	atomic64_add(job->busy_ns, &job->tfile->busy_ns);
	if (status == TX8_STATUS_OK)
		atomic64_inc(&job->tfile->jobs_ok);
	else
		atomic64_inc(&job->tfile->jobs_failed);
	WRITE_ONCE(job->done, true);
	list_del(&job->node);
	/* a job not in the ring counts until the scheduler lets it go */
	if (job->queued)
		tdev->inflight--;
	dma_fence_signal(&job->fence);
	list_add_tail(&job->node, done);
}

/*
 * The job no longer counts against the waiting caps: run_job took it from
 * the scheduler, or free_job frees it unrun. Caller holds job_lock.
 */
static void tx8_job_uncount(struct tx8_device *tdev, struct tx8_job *job)
{
	lockdep_assert_held(&tdev->job_lock);
	if (!job->counted)
		return;
	job->counted = false;
	job->tfile->nr_waiting--;
	tdev->nr_waiting--;
	if (job->cancelled) {
		job->cancelled = false;
		job->tfile->nr_cancelled--;
	}
}

/* Drop what finished jobs held; process context, no locks held. */
static void tx8_retire(struct list_head *done)
{
	struct tx8_job *job, *tmp;
	unsigned int i;

	list_for_each_entry_safe(job, tmp, done, node) {
		list_del_init(&job->node);
		for (i = 0; i < job->nr_bos; i++)
			drm_gem_object_put(job->bos[i]);
		job->nr_bos = 0;
		dma_fence_put(&job->fence);
	}
}

static struct tx8_job *tx8_find_pending(struct tx8_device *tdev, u64 seqno)
{
	struct tx8_job *job;

	list_for_each_entry(job, &tdev->pending, node)
		if (job->hw_seqno == seqno)
			return job;
	return NULL;
}

/* Read completion records; signal their fences. Caller holds job_lock. */
static void tx8_harvest_locked(struct tx8_device *tdev, struct list_head *done)
{
	struct tx8_completion rec;
	u32 tail;

	lockdep_assert_held(&tdev->job_lock);
	if (tdev->gone || !tdev->q)
		return;
	tail = READ_ONCE(tdev->q->cq_tail);
	if (tail - tdev->cq_head > TX8_CQ_ENTRIES) {
		drm_err_ratelimited(&tdev->drm,
				    "completion ring overrun (head %u tail %u)\n",
				    tdev->cq_head, tail);
		tdev->cq_head = tail - TX8_CQ_ENTRIES;
	}
	/* the records after the tail that announces them */
	rmb();
	while (tdev->cq_head != tail) {
		struct tx8_job *job;

		memcpy(&rec, &tdev->cq[tdev->cq_head % TX8_CQ_ENTRIES],
		       sizeof(rec));
		tdev->cq_head++;
		job = tx8_find_pending(tdev, rec.seqno);
		if (!job)
			continue;	/* a record from before a reset */
		tx8_job_finish(tdev, job, &rec,
			       rec.status < TX8_STATUS_COUNT ? rec.status :
			       TX8_STATUS_DEVICE_ERROR, done);
	}
	WRITE_ONCE(tdev->q->cq_head, tdev->cq_head);
	tx8_watch_head(tdev);
}

/* Read completion records; signal their fences; retire the jobs. */
void tx8_process_completions(struct tx8_device *tdev)
{
	unsigned long flags;
	LIST_HEAD(done);

	spin_lock_irqsave(&tdev->job_lock, flags);
	/* jobs the hard IRQ handler finished (fault_file_lock_delay_us) */
	list_splice_init(&tdev->irq_done, &done);
	tx8_harvest_locked(tdev, &done);
	spin_unlock_irqrestore(&tdev->job_lock, flags);

	if (!list_empty(&done)) {
		wake_up_all(&tdev->ring_wq);
		tx8_retire(&done);
	}
}

/*
 * The completion vector's hard IRQ handler: with the test knob
 * fault_file_lock_delay_us set, harvest the records here (fences signalled
 * in hard IRQ context); the thread, woken after it, retires the jobs.
 */
void tx8_process_completions_hardirq(struct tx8_device *tdev)
{
	unsigned long flags;

	if (likely(!tx8_fault_irq_harvest()))
		return;
	spin_lock_irqsave(&tdev->job_lock, flags);
	tx8_harvest_locked(tdev, &tdev->irq_done);
	spin_unlock_irqrestore(&tdev->job_lock, flags);
}

/* ------------------------------------------------------------------------ */
/* Reset                                                                     */

static void tx8_fail_all_locked(struct tx8_device *tdev, u32 status,
				struct list_head *done)
{
	struct tx8_job *job, *tmp;

	list_for_each_entry_safe(job, tmp, &tdev->pending, node)
		tx8_job_finish(tdev, job, NULL, status, done);
}

static void tx8_send_uevent(struct tx8_device *tdev, const char *reason,
			    u64 seqno)
{
	char ev_reason[48], ev_seqno[48], ev_count[48];
	struct device *kdev = tdev->drm.accel ? tdev->drm.accel->kdev : NULL;
	char *envp[5];

	snprintf(ev_reason, sizeof(ev_reason), "TX8_REASON=%s", reason);
	snprintf(ev_seqno, sizeof(ev_seqno), "TX8_SEQNO=%llu", seqno);
	snprintf(ev_count, sizeof(ev_count), "TX8_RESETS=%lld",
		 (long long)atomic64_read(&tdev->resets));
	envp[0] = "TX8_RESET=1";
	envp[1] = ev_reason;
	envp[2] = ev_seqno;
	envp[3] = ev_count;
	envp[4] = NULL;
	kobject_uevent_env(kdev ? &kdev->kobj : &tdev->pdev->dev.kobj,
			   KOBJ_CHANGE, envp);
}

/*
 * Reset the queue: the device aborts its jobs and empties both rings.
 * Caller holds reset_lock and has stopped the scheduler (drm_sched_stop:
 * no run_job meanwhile). Afterwards: with @hung_status not OK, the job at
 * the head fails with @hung_status (the job that timed out); any other job
 * the device had already taken fails with ABORTED (it may have run in
 * part); all other jobs, never started, leave the ring: the caller gives
 * them to it again (drm_sched_resubmit_jobs calls run_job for each, in
 * order). Only the timeout and the admin reset the queue.
 */
static int tx8_hw_reset_locked(struct tx8_device *tdev, u32 hung_status,
			       const char *reason)
{
	struct tx8_job *job, *tmp, *head;
	unsigned long flags;
	u64 aborted = 0, hung_seqno = 0;
	LIST_HEAD(done);
	bool have_taken_seqno;
	u64 taken_seqno = 0;
	u32 taken;
	int ret;

	lockdep_assert_held(&tdev->reset_lock);
	spin_lock_irqsave(&tdev->job_lock, flags);
	if (tdev->gone || tdev->stopping || tdev->lost) {
		ret = tdev->lost ? -EIO : -ENODEV;
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		return ret;
	}
	tdev->resetting = true;
	spin_unlock_irqrestore(&tdev->job_lock, flags);

	/* Harvest what did finish, then stop the device's queue. */
	tx8_process_completions(tdev);
	/*
	 * Which jobs had the device taken? Interface 1.2 says so after the
	 * reset (taken_seqno, the device is stopped then); with 1.1 only
	 * sq_head read before the reset tells, and a job taken between that
	 * read and the reset would wrongly count as never started.
	 */
	taken = READ_ONCE(tdev->q->sq_head);
	ret = tx8_mbox(tdev, TX8_MBOX_RESET_QUEUE, NULL, 0, NULL, &aborted);
	have_taken_seqno = TX8_IF_MINOR(tdev->if_version) >= 2;
	if (have_taken_seqno)
		taken_seqno = READ_ONCE(tdev->q->taken_seqno);
	/* counted before any waiter of a failed job wakes up */
	if (!ret)
		atomic64_inc(&tdev->resets);
	else
		/*
		 * No answer, or an error answer: the device is lost, announced
		 * (uevent) by tx8_lost_work, which fails the jobs not in the
		 * ring; those in it fail here.
		 */
		tx8_device_lost(tdev, "queue reset failed");

	spin_lock_irqsave(&tdev->job_lock, flags);
	if (ret) {
		tx8_fail_all_locked(tdev, TX8_STATUS_DEVICE_ERROR, &done);
	} else {
		head = list_first_entry_or_null(&tdev->pending,
						struct tx8_job, node);
		list_for_each_entry_safe(job, tmp, &tdev->pending, node) {
			/* a bogus taken_seqno only aborts more: never runs twice */
			bool started = have_taken_seqno ?
				job->hw_seqno <= taken_seqno :
				(s32)(taken - job->ring_idx) > 0;

			if (job == head && hung_status != TX8_STATUS_OK) {
				hung_seqno = job->fence.seqno;
				if (hung_status == TX8_STATUS_TIMEOUT)
					atomic64_inc(&tdev->timeouts);
				tx8_job_finish(tdev, job, NULL, hung_status,
					       &done);
			} else if (started) {
				tx8_job_finish(tdev, job, NULL,
					       TX8_STATUS_ABORTED, &done);
			} else {
				/* never started: run_job queues it again */
				list_move_tail(&job->node, &tdev->waiting);
				job->queued = false;
				tdev->inflight--;
				job->counted = true;
				job->tfile->nr_waiting++;
				tdev->nr_waiting++;
			}
		}
		tdev->sq_tail = 0;
		tdev->cq_head = 0;
		WRITE_ONCE(tdev->q->cq_head, 0);
		tx8_publish_tail(tdev);
		tx8_watch_head(tdev);	/* none: the timeout is off */
	}
	tdev->resetting = false;
	spin_unlock_irqrestore(&tdev->job_lock, flags);

	wake_up_all(&tdev->ring_wq);
	tx8_retire(&done);
	if (ret) {
		drm_err(&tdev->drm, "reset (%s) failed: %d; device lost\n",
			reason, ret);
	} else if (__ratelimit(&tdev->reset_rs)) {
		/* a client can cause resets: neither log nor uevents flood */
		drm_warn(&tdev->drm,
			 "queue reset (%s): failed job %llu, %llu job(s) stopped by the device\n",
			 reason, hung_seqno, aborted);
		tx8_send_uevent(tdev, reason, hung_seqno);
	}
	return ret;
}

/*
 * The admin's device reset (sysfs, debugfs; CAP_SYS_ADMIN): stop the
 * scheduler, reset the queue (whatever runs is aborted), hand the jobs
 * that never started to the ring again, restart it.
 */
int tx8_reset(struct tx8_device *tdev, const char *reason)
{
	unsigned long flags;
	bool dead;
	int ret;

	mutex_lock(&tdev->reset_lock);
	spin_lock_irqsave(&tdev->job_lock, flags);
	dead = tdev->gone || tdev->stopping || tdev->lost;
	ret = tdev->lost ? -EIO : -ENODEV;
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	if (dead) {
		mutex_unlock(&tdev->reset_lock);
		return ret;
	}
	drm_sched_stop(tdev->sched, NULL);
	ret = tx8_hw_reset_locked(tdev, TX8_STATUS_ABORTED, reason);
	drm_sched_resubmit_jobs(tdev->sched);
	drm_sched_start(tdev->sched);
	mutex_unlock(&tdev->reset_lock);
	return ret;
}

/*
 * The device is lost (no mailbox answer, heartbeat stopped, restarted):
 * every job fails with DEVICE_ERROR, new work is refused with -EIO and
 * user space is told by a uevent (WEDGED=rebind, as DRM's wedged event).
 */
static void tx8_lost_work(struct work_struct *work)
{
	struct tx8_device *tdev = container_of(work, struct tx8_device,
					       lost_work);
	struct device *kdev = tdev->drm.accel ? tdev->drm.accel->kdev : NULL;
	char ev_reason[48];
	char *envp[4] = { "WEDGED=rebind", "TX8_LOST=1", ev_reason, NULL };
	unsigned long flags;
	LIST_HEAD(done);

	drm_err(&tdev->drm,
		"device lost (%s): its jobs fail, new work is refused, its memory is quarantined; unbind and bind it to recover\n",
		tdev->lost_reason);
	spin_lock_irqsave(&tdev->job_lock, flags);
	if (!tdev->gone)
		tx8_fail_all_locked(tdev, TX8_STATUS_DEVICE_ERROR, &done);
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	tx8_retire(&done);
	tx8_deps_cancel(tdev, NULL, TX8_STATUS_DEVICE_ERROR);
	wake_up_all(&tdev->ring_wq);
	snprintf(ev_reason, sizeof(ev_reason), "TX8_REASON=%s",
		 tdev->lost_reason);
	kobject_uevent_env(kdev ? &kdev->kobj : &tdev->pdev->dev.kobj,
			   KOBJ_CHANGE, envp);
}

void tx8_device_lost(struct tx8_device *tdev, const char *reason)
{
	unsigned long flags;
	bool first;

	spin_lock_irqsave(&tdev->job_lock, flags);
	first = !tdev->lost;
	if (first) {
		tdev->lost = true;
		tdev->lost_reason = reason;
	}
	/* after tx8_jobs_fini (gone) nothing may be queued on tdev */
	if (first && !tdev->gone)
		queue_work(system_wq, &tdev->lost_work);
	spin_unlock_irqrestore(&tdev->job_lock, flags);
}

/*
 * The scheduler entities of @tfile killed and made anew: the jobs queued
 * on them leave the scheduler at once, unrun (free_job), without waiting
 * for their dependencies. The scheduler's work is paused meanwhile (see
 * tx8_file_release_jobs). Caller holds tfile->submit_lock: no SUBMIT of
 * the file is between drm_sched_job_init and push_job.
 */
static int tx8_file_entities_renew(struct tx8_file *tfile)
{
	struct tx8_device *tdev = tfile->tdev;
	int ret;

	lockdep_assert_held(&tfile->submit_lock);
	mutex_lock(&tdev->reset_lock);
	mutex_lock(&tdev->files_lock);
	if (!tfile->entities_live || READ_ONCE(tdev->gone)) {
		ret = -ENODEV;
		goto out;
	}
	drm_sched_wqueue_stop(tdev->sched);
	tx8_file_entities_fini(tfile);
	ret = tx8_file_entities_start(tfile);
	drm_sched_wqueue_start(tdev->sched);
out:
	mutex_unlock(&tdev->files_lock);
	mutex_unlock(&tdev->reset_lock);
	return ret;
}

/* The most jobs of one file RESET looks at in the ring: all it holds. */
#define TX8_RESET_RING_JOBS	TX8_SQ_ENTRIES

/*
 * The caller's jobs in the ring (referenced), at most TX8_RESET_RING_JOBS
 * (the ring holds no more), with their descriptor numbers.
 */
static unsigned int tx8_file_ring_jobs(struct tx8_file *tfile,
				       struct tx8_job **jobs, u64 *hw_seqno)
{
	struct tx8_device *tdev = tfile->tdev;
	struct tx8_job *job;
	unsigned long flags;
	unsigned int n = 0;

	spin_lock_irqsave(&tdev->job_lock, flags);
	list_for_each_entry(job, &tdev->pending, node) {
		if (job->tfile != tfile || job->done)
			continue;
		if (n == TX8_RESET_RING_JOBS)
			break;
		hw_seqno[n] = job->hw_seqno;
		jobs[n++] = to_tx8_job(dma_fence_get(&job->fence));
	}
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	return n;
}

/*
 * Stop one job of the caller in the ring through the device
 * (TX8_MBOX_ABORT_JOB): no other job is touched. Returns a TX8_ABORT_*
 * value; TX8_ABORT_NONE also when the device cannot (no
 * TX8_CAP_ABORT_JOB, too many marks): the job then ends on its own,
 * bounded by the job timeout.
 */
static u64 tx8_abort_job(struct tx8_device *tdev, u64 hw_seqno)
{
	u64 how = TX8_ABORT_NONE;

	if (!(tdev->caps.flags & TX8_CAP_ABORT_JOB))
		return TX8_ABORT_NONE;
	if (tx8_mbox(tdev, TX8_MBOX_ABORT_JOB, &hw_seqno, 1, NULL, &how))
		return TX8_ABORT_NONE;
	return how <= TX8_ABORT_QUEUED ? how : TX8_ABORT_NONE;
}

/* Whether the scheduler still holds cancelled jobs of @tfile. */
static bool tx8_file_has_cancelled(struct tx8_file *tfile)
{
	return READ_ONCE(tfile->nr_cancelled) != 0;
}

/*
 * RESET of one client recovers its own context and nothing else, as the
 * drm_sched drivers' context reset does:
 * - its jobs not yet in the ring are cancelled (ABORTED, unrun): its
 *   scheduler entities are killed and made anew, so these jobs leave the
 *   scheduler at once and their fences signal with an error;
 * - each of its jobs in the ring is aborted by the device alone
 *   (TX8_MBOX_ABORT_JOB): the running one stops, a queued one ends
 *   ABORTED unrun when the device reaches it;
 * - it waits, at most job_timeout_ms + 1 s, for its running job to stop
 *   and its cancelled jobs to leave the scheduler.
 * Another client's job is never touched, and the device queue is never
 * reset: a hung job of another client is the job timeout's business, a
 * device-wide reset the admin's (sysfs, debugfs).
 */
int tx8_reset_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct tx8_job *jobs[TX8_RESET_RING_JOBS];
	u64 hw_seqno[TX8_RESET_RING_JOBS], how[TX8_RESET_RING_JOBS];
	struct tx8_device *tdev = to_tx8(drm);
	struct tx8_file *tfile = file->driver_priv;
	struct drm_tx8_reset *args = data;
	unsigned long deadline;
	unsigned int i, n;
	u64 aborted;
	long left;
	int ret = 0, idx;

	if (args->flags || args->pad)
		return -EINVAL;
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	deadline = jiffies + msecs_to_jiffies(READ_ONCE(tx8_job_timeout_ms)) + HZ;
	/* no SUBMIT of this file is under way: every job of it is armed */
	mutex_lock(&tfile->submit_lock);
	aborted = tx8_deps_cancel(tdev, tfile, TX8_STATUS_ABORTED);
	tx8_file_entities_renew(tfile);
	n = tx8_file_ring_jobs(tfile, jobs, hw_seqno);
	mutex_unlock(&tfile->submit_lock);
	drm_dev_exit(idx);

	/*
	 * Newest first: a queued job is marked before the one ahead of it
	 * stops, or the device could take and run it in between.
	 */
	for (i = n; i-- > 0;) {
		how[i] = TX8_ABORT_NONE;
		if (drm_dev_enter(drm, &idx)) {
			how[i] = tx8_abort_job(tdev, hw_seqno[i]);
			drm_dev_exit(idx);
		}
		if (how[i] != TX8_ABORT_NONE)
			aborted++;
	}
	/*
	 * A queued job it marked never runs; the others end within the job
	 * timeout. Waits outside drm_dev_enter: an unplug must not wait for
	 * us.
	 */
	for (i = 0; i < n && !ret; i++) {
		if (how[i] == TX8_ABORT_QUEUED)
			continue;
		left = dma_fence_wait_timeout(&jobs[i]->fence, true,
					      tx8_left(deadline));
		if (left < 0)
			ret = left;
	}
	for (i = 0; i < n; i++)
		dma_fence_put(&jobs[i]->fence);
	if (!ret) {
		left = wait_event_interruptible_timeout(tdev->ring_wq,
							!tx8_file_has_cancelled(tfile),
							tx8_left(deadline));
		if (left < 0)
			ret = left;
	}
	args->aborted = aborted;
	if (!ret && READ_ONCE(tdev->lost))
		ret = -EIO;
	return ret;
}

int tx8_inject_fault_ioctl(struct drm_device *drm, void *data,
			   struct drm_file *file)
{
	struct drm_tx8_inject_fault *args = data;
	u64 mbox[3];
	int ret, idx;

	if (args->flags || args->kind > DRM_TX8_FAULT_TAKE_ON_RESET ||
	    (args->kind != DRM_TX8_FAULT_SLOW &&
	     args->kind != DRM_TX8_FAULT_STOP &&
	     args->kind != DRM_TX8_FAULT_BAD_CAPS && args->param))
		return -EINVAL;
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	mbox[0] = args->kind;
	mbox[1] = args->param;
	mbox[2] = args->count;
	ret = tx8_mbox(to_tx8(drm), TX8_MBOX_INJECT_FAULT, mbox, 3, NULL, NULL);
	drm_dev_exit(idx);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* Scheduler                                                                 */

/*
 * The fence to look at for a dependency: for a finished fence of our own
 * scheduler whose job was handed to the ring, that job's hardware fence.
 * The scheduler ignores fences of the job's own entity (its jobs enter the
 * ring in order), but a job must not run before an in-fence of its own
 * file signalled, nor at all when it failed.
 */
static struct dma_fence *tx8_dep_fence(struct tx8_device *tdev,
				       struct dma_fence *f)
{
	struct drm_sched_fence *s = to_drm_sched_fence(f);
	struct dma_fence *parent;

	if (!s || f != &s->finished || s->sched != tdev->sched)
		return f;
	/* pairs with the scheduler's smp_store_release() of the parent */
	parent = smp_load_acquire(&s->parent);
	return parent ? parent : f;
}

/*
 * Called by the scheduler after the job's dependencies it tracks itself
 * signalled: returns the next one it must still wait for (referenced), or
 * NULL when all did. The run work is the only caller (no lock needed).
 */
static struct dma_fence *tx8_prepare_job(struct drm_sched_job *sj,
					 struct drm_sched_entity *entity)
{
	struct tx8_job *job = to_tx8_sjob(sj);

	while (job->dep_next < job->nr_deps) {
		struct dma_fence *f = tx8_dep_fence(job->tdev,
						    job->deps[job->dep_next]);

		if (!dma_fence_is_signaled(f))
			return dma_fence_get(f);
		job->dep_next++;
	}
	return NULL;
}

/*
 * Hand a job to the ring: all its dependencies signalled. A job whose
 * dependency failed, or that the scheduler cancelled, finishes with
 * ABORTED unrun; one finished already (cancelled by RESET, device lost)
 * or still in the ring (resubmission without a reset) just returns its
 * fence.
 */
static struct dma_fence *tx8_run_job(struct drm_sched_job *sj)
{
	struct tx8_job *job = to_tx8_sjob(sj);
	struct tx8_device *tdev = job->tdev;
	unsigned long flags;
	bool pushed = false;
	LIST_HEAD(done);
	unsigned int i;
	int err = 0;

	for (i = 0; i < job->nr_deps && !err; i++) {
		int st = dma_fence_get_status(tx8_dep_fence(tdev,
							    job->deps[i]));

		if (st < 0)
			err = st;
	}
	if (!err && sj->s_fence)
		err = sj->s_fence->finished.error;

	spin_lock_irqsave(&tdev->job_lock, flags);
	/* out of the scheduler's queue: it no longer waits */
	tx8_job_uncount(tdev, job);
	if (!job->done && !job->queued) {
		if (err || tdev->gone || tdev->lost) {
			job->dep_error = err;
			tx8_job_finish(tdev, job, NULL,
				       err || tdev->gone ? TX8_STATUS_ABORTED :
				       TX8_STATUS_DEVICE_ERROR, &done);
		} else {
			job->hw_seqno = ++tdev->next_hw_seqno;
			tx8_write_desc(tdev, job);
			tx8_publish_tail(tdev);
			list_move_tail(&job->node, &tdev->pending);
			job->queued = true;
			tdev->inflight++;
			tx8_watch_head(tdev);
			pushed = true;
		}
	}
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	if (pushed)
		tx8_ring_doorbell(tdev, TX8_DEV_VEC_SUBMIT);
	/* room on the waiting list for a blocked SUBMIT */
	wake_up_all(&tdev->ring_wq);
	tx8_retire(&done);
	return dma_fence_get(&job->fence);
}

/*
 * The job timeout (timeout_work, armed by tx8_watch_head): the head job of
 * the ring has run for job_timeout_ms since it became head, i.e. since it
 * started on the device. The scheduler is stopped around the reset and the
 * jobs that never started are handed to the ring again; only the hung job
 * fails (TIMEOUT), other clients' jobs see a delay. A head that has not
 * run that long (it changed, the timeout was raised) re-arms the work for
 * the time it has left.
 */
static bool tx8_head_hung(struct tx8_device *tdev, u64 *seqno)
{
	struct tx8_job *head;
	unsigned long flags;
	bool hung = false;

	spin_lock_irqsave(&tdev->job_lock, flags);
	head = list_first_entry_or_null(&tdev->pending, struct tx8_job, node);
	if (head && !tdev->lost && !tdev->gone && !tdev->stopping) {
		if (head->hw_seqno != tdev->watch_seqno)
			tx8_watch_head(tdev);	/* re-arms for the new head */
		else if (!tx8_watch_left(tdev))
			hung = true;
		else
			mod_delayed_work(system_wq, &tdev->timeout_work,
					 tx8_watch_left(tdev) + 1);
		if (hung)
			*seqno = head->fence.seqno;
	}
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	return hung;
}

static void tx8_timeout_work(struct work_struct *work)
{
	struct tx8_device *tdev = container_of(to_delayed_work(work),
					       struct tx8_device, timeout_work);
	u64 seqno = 0;

	/* an interrupt may have been missed: look at the ring first */
	tx8_process_completions(tdev);
	if (!tx8_head_hung(tdev, &seqno))
		return;
	mutex_lock(&tdev->reset_lock);
	drm_sched_stop(tdev->sched, NULL);
	/* again, now that nothing enters the ring */
	if (tx8_head_hung(tdev, &seqno)) {
		dev_warn_ratelimited(tdev->drm.dev,
				     "job %llu timed out after %u ms\n",
				     seqno, READ_ONCE(tx8_job_timeout_ms));
		tx8_hw_reset_locked(tdev, TX8_STATUS_TIMEOUT, "timeout");
	}
	drm_sched_resubmit_jobs(tdev->sched);
	drm_sched_start(tdev->sched);
	mutex_unlock(&tdev->reset_lock);
}

/*
 * drm_sched's own timeout is off (MAX_SCHEDULE_TIMEOUT, tx8_timeout_work
 * does the job); should it fire anyway, it only looks at the ring.
 */
static enum drm_gpu_sched_stat tx8_timedout_job(struct drm_sched_job *sj)
{
	struct tx8_device *tdev = to_tx8_sjob(sj)->tdev;
	unsigned long flags;

	spin_lock_irqsave(&tdev->job_lock, flags);
	if (!tdev->stopping && !tdev->gone)
		mod_delayed_work(system_wq, &tdev->timeout_work, 0);
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	return DRM_GPU_SCHED_STAT_NOMINAL;
}

/*
 * The scheduler is done with a job (its finished fence signalled). A job
 * it never ran (its entity was killed at close or unbind) finishes here.
 */
static void tx8_free_job(struct drm_sched_job *sj)
{
	struct tx8_job *job = to_tx8_sjob(sj);
	struct tx8_device *tdev = job->tdev;
	unsigned long flags;
	LIST_HEAD(done);
	unsigned int i;

	spin_lock_irqsave(&tdev->job_lock, flags);
	if (!job->done && !job->queued)
		tx8_job_finish(tdev, job, NULL, TX8_STATUS_ABORTED, &done);
	tx8_job_uncount(tdev, job);
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	tx8_retire(&done);
	wake_up_all(&tdev->ring_wq);
	/*
	 * The scheduler's finished fence (the out-fence) names our scheduler
	 * (its timeline name), whose memory lives until module unload. Once
	 * run_job ran, the finished fence holds our hardware fence (its
	 * parent), which holds the module. A job the scheduler never ran
	 * (entity killed at close or unbind) has no parent: give it ours, so
	 * that its finished fence, e.g. in a sync_file, keeps the module, and
	 * the scheduler's memory, as long as it lives. The scheduler puts the
	 * parent when it frees the finished fence.
	 */
	if (sj->s_fence && !smp_load_acquire(&sj->s_fence->parent))
		/* as drm_sched_fence_set_parent(): readers load-acquire it */
		smp_store_release(&sj->s_fence->parent,
				  dma_fence_get(&job->fence));
	drm_sched_job_cleanup(sj);
	for (i = 0; i < job->nr_deps; i++)
		dma_fence_put(job->deps[i]);
	job->nr_deps = 0;
	dma_fence_put(&job->fence);
	/* taken at SUBMIT: the job may be the last user of the device */
	drm_dev_put(&tdev->drm);
}

static const struct drm_sched_backend_ops tx8_sched_ops = {
	.prepare_job = tx8_prepare_job,
	.run_job = tx8_run_job,
	.timedout_job = tx8_timedout_job,
	.free_job = tx8_free_job,
};

/*
 * Fail the jobs of @tfile (all with NULL) not yet handed to the ring with
 * @status, unrun; returns how many. The scheduler still holds them: when
 * it gets to them, run_job finds them finished.
 */
static u64 tx8_deps_cancel(struct tx8_device *tdev, struct tx8_file *tfile,
			   u32 status)
{
	struct tx8_job *job, *tmp;
	unsigned long flags;
	LIST_HEAD(done);
	u64 n = 0;

	spin_lock_irqsave(&tdev->job_lock, flags);
	list_for_each_entry_safe(job, tmp, &tdev->waiting, node) {
		/* SUBMIT still uses it: run_job or free_job finishes it */
		if ((tfile && job->tfile != tfile) || !job->armed)
			continue;
		tx8_job_finish(tdev, job, NULL, status, &done);
		if (job->counted && !job->cancelled) {
			job->cancelled = true;
			job->tfile->nr_cancelled++;
		}
		n++;
	}
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	if (n)
		wake_up_all(&tdev->ring_wq);
	tx8_retire(&done);
	return n;
}

int tx8_jobs_init(struct tx8_device *tdev)
{
	struct tx8_sched *ts;
	int ret;

	spin_lock_init(&tdev->job_lock);
	INIT_LIST_HEAD(&tdev->irq_done);
	INIT_LIST_HEAD(&tdev->pending);
	init_waitqueue_head(&tdev->ring_wq);
	mutex_init(&tdev->reset_lock);
	INIT_LIST_HEAD(&tdev->waiting);
	mutex_init(&tdev->files_lock);
	INIT_LIST_HEAD(&tdev->files);
	INIT_WORK(&tdev->lost_work, tx8_lost_work);
	INIT_DELAYED_WORK(&tdev->timeout_work, tx8_timeout_work);
	ratelimit_state_init(&tdev->reset_rs, 5 * HZ, 5);
	ratelimit_set_flags(&tdev->reset_rs, RATELIMIT_MSG_ON_RELEASE);

	ts = kzalloc(sizeof(*ts), GFP_KERNEL);
	if (!ts)
		return -ENOMEM;
	snprintf(ts->name, sizeof(ts->name), "tx8-%s", pci_name(tdev->pdev));
	/* one scheduler for our one queue; the ring holds 16 jobs */
	ret = drm_sched_init(&ts->sched, &tx8_sched_ops, NULL,
			     DRM_SCHED_PRIORITY_COUNT, TX8_SQ_ENTRIES, 0,
			     MAX_SCHEDULE_TIMEOUT, NULL, NULL,
			     ts->name, tdev->drm.dev);
	if (ret) {
		kfree(ts);
		return ret;
	}
	tdev->sched = &ts->sched;
	return 0;
}

/* At module unload: no fence of a scheduler can be left (module refs). */
void tx8_sched_exit(void)
{
	struct tx8_sched *ts, *tmp;

	mutex_lock(&tx8_sched_graveyard_lock);
	list_for_each_entry_safe(ts, tmp, &tx8_sched_graveyard, node) {
		list_del(&ts->node);
		kfree(ts);
	}
	mutex_unlock(&tx8_sched_graveyard_lock);
}

/* The scheduler stops; its memory is kept: its fences name it. */
void tx8_sched_release(struct tx8_device *tdev)
{
	struct tx8_sched *ts = container_of(tdev->sched, struct tx8_sched,
					    sched);

	mutex_lock(&tdev->files_lock);
	tdev->gone = true;
	mutex_unlock(&tdev->files_lock);
	drm_sched_fini(tdev->sched);
	mutex_lock(&tx8_sched_graveyard_lock);
	list_add_tail(&ts->node, &tx8_sched_graveyard);
	mutex_unlock(&tx8_sched_graveyard_lock);
}

/* At remove: stop the queue and fail every job still pending. */
void tx8_jobs_fini(struct tx8_device *tdev)
{
	struct tx8_file *tfile, *tmp;
	unsigned long flags;
	LIST_HEAD(done);
	int i;
	/*
	 * No new reset starts (->stopping); one under way finishes first.
	 * The scheduler's timeout handler takes reset_lock: drm_sched_fini,
	 * which waits for that handler, runs after reset_lock is dropped.
	 */
	spin_lock_irqsave(&tdev->job_lock, flags);
	tdev->stopping = true;
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	/*
	 * The timeout work takes reset_lock: wait for it before taking that
	 * lock. With ->stopping set nothing queues it again.
	 */
	cancel_delayed_work_sync(&tdev->timeout_work);
	mutex_lock(&tdev->reset_lock);
	drm_sched_wqueue_stop(tdev->sched);
	spin_lock_irqsave(&tdev->job_lock, flags);
	tdev->resetting = true;
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	tx8_process_completions(tdev);
	if (!tdev->lost)
		tx8_mbox(tdev, TX8_MBOX_RESET_QUEUE, NULL, 0, NULL, NULL);
	spin_lock_irqsave(&tdev->job_lock, flags);
	WRITE_ONCE(tdev->gone, true);
	tx8_fail_all_locked(tdev, TX8_STATUS_ABORTED, &done);
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	mutex_unlock(&tdev->reset_lock);
	wake_up_all(&tdev->ring_wq);
	tx8_retire(&done);
	/* jobs not in the ring fail too; the entities of open files go */
	tx8_deps_cancel(tdev, NULL, TX8_STATUS_ABORTED);
	mutex_lock(&tdev->files_lock);
	list_for_each_entry_safe(tfile, tmp, &tdev->files, dev_node)
		tx8_file_entities_fini(tfile);
	mutex_unlock(&tdev->files_lock);
	/* let the scheduler free the jobs it still holds (all finished) */
	drm_sched_wqueue_start(tdev->sched);
	for (i = 0; i < 250; i++) {
		bool empty;

		spin_lock(&tdev->sched->job_list_lock);
		empty = list_empty(&tdev->sched->pending_list);
		spin_unlock(&tdev->sched->job_list_lock);
		if (empty)
			break;
		msleep(20);
	}
	cancel_work_sync(&tdev->lost_work);
	tx8_sched_release(tdev);
}

/* ------------------------------------------------------------------------ */
/* SUBMIT                                                                    */

static int tx8_add_bo(struct tx8_job *job, struct drm_gem_object *obj,
		      u32 access)
{
	unsigned int i;

	for (i = 0; i < job->nr_bos; i++) {
		if (job->bos[i] == obj) {
			job->ranges[i].access |= access;
			drm_gem_object_put(obj);
			return 0;
		}
	}
	job->bos[i] = obj;
	job->ranges[i].addr = to_tx8_bo(obj)->node.start;
	job->ranges[i].size = obj->size;
	job->ranges[i].access = access;
	job->ranges[i].rsvd = 0;
	job->nr_bos = i + 1;
	job->nr_ranges = job->nr_bos;
	return 0;
}

static int tx8_get_bos(struct tx8_job *job, struct drm_file *file,
		       const struct drm_tx8_submit *args)
{
	u8 __user *ptr = u64_to_user_ptr(args->bos);
	struct drm_tx8_bo_ref ref;
	unsigned int i;
	int ret;

	for (i = 0; i < args->bo_count; i++, ptr += args->bo_stride) {
		struct drm_gem_object *obj;

		if (copy_from_user(&ref, ptr, sizeof(ref)))
			return -EFAULT;
		if (args->bo_stride > sizeof(ref)) {
			ret = check_zeroed_user(ptr + sizeof(ref),
						args->bo_stride - sizeof(ref));
			if (ret < 0)
				return ret;
			if (!ret)
				return -EINVAL;
		}
		if (!ref.access || ref.access & ~DRM_TX8_ACCESS_RW)
			return -EINVAL;
		obj = drm_gem_object_lookup(file, ref.handle);
		if (!obj)
			return -ENOENT;
		tx8_add_bo(job, obj, ref.access == DRM_TX8_ACCESS_READ ?
			   TX8_ACCESS_READ : ref.access == DRM_TX8_ACCESS_WRITE ?
			   TX8_ACCESS_WRITE : TX8_ACCESS_READ | TX8_ACCESS_WRITE);
	}
	return 0;
}

/*
 * The profiling buffer of DRM_TX8_SUBMIT_PROFILE: a BO of the file, like
 * any other BO of the job (added with WRITE access), the range inside it.
 * Without the flag its fields must be zero.
 */
static int tx8_get_prof(struct tx8_job *job, struct drm_file *file,
			const struct drm_tx8_submit *args)
{
	struct tx8_device *tdev = job->tdev;
	struct drm_gem_object *obj;

	if (!(args->flags & DRM_TX8_SUBMIT_PROFILE))
		return args->prof_handle || args->prof_pad ||
		       args->prof_offset || args->prof_size ? -EINVAL : 0;
	if (TX8_IF_MINOR(tdev->if_version) < 5)
		return -EOPNOTSUPP;
	if (!args->prof_handle || args->prof_pad || args->prof_offset % 8 ||
	    args->prof_size < sizeof(struct tx8_prof_header))
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->prof_handle);
	if (!obj)
		return -ENOENT;
	if (args->prof_offset > obj->size ||
	    args->prof_size > obj->size - args->prof_offset) {
		drm_gem_object_put(obj);
		return -EINVAL;
	}
	job->desc_flags |= TX8_JOB_F_PROFILE;
	job->prof_addr = to_tx8_bo(obj)->node.start + args->prof_offset;
	job->prof_size = args->prof_size;
	/* takes over the reference (merged if the job lists it already) */
	return tx8_add_bo(job, obj, TX8_ACCESS_WRITE);
}

/*
 * The SUBMIT deadline in jiffies; 0 for none. As for WAIT, timeout_ns is
 * an absolute CLOCK_MONOTONIC time: one in the past (0) polls, one too far
 * to count in jiffies (e.g. INT64_MAX) means no limit.
 */
static unsigned long tx8_submit_deadline(const struct drm_tx8_submit *args)
{
	long t = drm_timeout_abs_to_jiffies(args->timeout_ns);

	if (t == MAX_SCHEDULE_TIMEOUT)
		return 0;
	return (jiffies + t) | 1;
}

/* Jiffies left until @deadline (0 = none); 0 when it passed. */
static long tx8_left(unsigned long deadline)
{
	if (!deadline)
		return MAX_SCHEDULE_TIMEOUT;
	return time_after(deadline, jiffies) ? deadline - jiffies : 0;
}

/*
 * The fence of an in-syncobj. One without a fence yet is waited for
 * (DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT semantics) for at most
 * TX8_WAIT_FOR_SUBMIT_MS and the SUBMIT's own deadline: a job never waits
 * for a fence that does not exist yet, which could be never. -ETIME when
 * none came.
 */
static int tx8_in_fence(struct drm_syncobj *syncobj, unsigned long deadline,
			struct dma_fence **fence)
{
	unsigned long end = jiffies + msecs_to_jiffies(TX8_WAIT_FOR_SUBMIT_MS);

	if (deadline && time_before(deadline, end))
		end = deadline;
	for (;;) {
		*fence = drm_syncobj_fence_get(syncobj);
		if (*fence)
			return 0;
		if (!time_before(jiffies, end))
			return -ETIME;
		if (schedule_timeout_interruptible(1) && signal_pending(current))
			return -ERESTARTSYS;
	}
}

/*
 * Take the in-syncobjs' fences, before the job exists: its fence cannot
 * be among them. The out-syncobj cannot be an in-syncobj too.
 */
static int tx8_get_in_fences(struct tx8_job *job, struct drm_file *file,
			     const struct drm_tx8_submit *args,
			     unsigned long deadline)
{
	u32 __user *handles = u64_to_user_ptr(args->in_syncobjs);
	unsigned int i;
	int ret;

	if (!args->in_syncobj_count)
		return 0;
	job->deps = kcalloc(args->in_syncobj_count, sizeof(*job->deps),
			    GFP_KERNEL_ACCOUNT);
	if (!job->deps)
		return -ENOMEM;
	for (i = 0; i < args->in_syncobj_count; i++) {
		struct drm_syncobj *syncobj;
		struct dma_fence *fence;
		u32 h;

		if (get_user(h, handles + i))
			return -EFAULT;
		if (args->out_syncobj && h == args->out_syncobj)
			return -EINVAL;
		syncobj = drm_syncobj_find(file, h);
		if (!syncobj)
			return -ENOENT;
		ret = tx8_in_fence(syncobj, deadline, &fence);
		drm_syncobj_put(syncobj);
		if (ret)
			return ret;
		job->deps[job->nr_deps++] = fence;
	}
	return 0;
}

/*
 * Implicit sync (BO reservations locked): reserve a slot for the job's
 * fence in each BO's dma_resv, and make the job depend on the fences it
 * must wait for there (the writers for a read, all for a write) that do
 * not order before it anyway: fences of other entities or other drivers.
 * The jobs of one entity run in submission order already.
 */
static int tx8_resv_prepare(struct tx8_job *job, struct drm_sched_entity *e)
{
	struct dma_resv_iter cursor;
	struct dma_fence *fence;
	unsigned int i, j;
	int ret;

	for (i = 0; i < job->nr_bos; i++) {
		struct dma_resv *resv = job->bos[i]->resv;
		bool write = job->ranges[i].access & TX8_ACCESS_WRITE;

		ret = dma_resv_reserve_fences(resv, 1);
		if (ret)
			return ret;
		dma_resv_for_each_fence(&cursor, resv, dma_resv_usage_rw(write),
					fence) {
			struct dma_fence **deps;

			if (dma_fence_is_signaled(fence) ||
			    fence->context == e->fence_context ||
			    fence->context == e->fence_context + 1)
				continue;
			for (j = 0; j < job->nr_deps; j++)
				if (job->deps[j] == fence)
					break;
			if (j < job->nr_deps)
				continue;
			deps = krealloc_array(job->deps, job->nr_deps + 1,
					      sizeof(*deps), GFP_KERNEL_ACCOUNT);
			if (!deps)
				return -ENOMEM;
			job->deps = deps;
			job->deps[job->nr_deps++] = dma_fence_get(fence);
		}
	}
	return 0;
}

/* The job's finished fence into each BO's dma_resv: write or read usage. */
static void tx8_resv_add(struct tx8_job *job)
{
	unsigned int i;

	for (i = 0; i < job->nr_bos; i++)
		dma_resv_add_fence(job->bos[i]->resv,
				   &job->base.s_fence->finished,
				   job->ranges[i].access & TX8_ACCESS_WRITE ?
				   DMA_RESV_USAGE_WRITE : DMA_RESV_USAGE_READ);
}

static bool tx8_can_wait(struct tx8_device *tdev, struct tx8_file *tfile)
{
	return READ_ONCE(tdev->gone) || READ_ONCE(tdev->lost) ||
	       (READ_ONCE(tfile->nr_waiting) < TX8_MAX_WAITING &&
		READ_ONCE(tdev->nr_waiting) < TX8_MAX_DEV_WAITING);
}

/*
 * Keep the job for WAIT by number. Old finished records are dropped under
 * tfile->lock, erased before the lock is released: WAIT, which takes its
 * reference under the same lock, never sees a record being dropped. The
 * oldest finished records go first, past any that is not done: a job that
 * waits long keeps its own record only, so the history holds at most
 * TX8_FILE_JOB_HISTORY records plus the file's unfinished jobs (bounded by
 * TX8_MAX_WAITING and the ring).
 */
static void tx8_file_record(struct tx8_file *tfile, struct tx8_job *job)
{
	struct tx8_job *old, *tmp;
	LIST_HEAD(drop);

	dma_fence_get(&job->fence);
	if (xa_err(xa_store(&tfile->jobs, job->fence.seqno, job,
			    GFP_KERNEL_ACCOUNT))) {
		dma_fence_put(&job->fence);
		return;
	}
	spin_lock(&tfile->lock);
	tx8_file_lock_delay();
	list_add_tail(&job->file_node, &tfile->history);
	tfile->nr_history++;
	if (!tfile->first_seqno)
		tfile->first_seqno = job->fence.seqno;
	tfile->last_seqno = job->fence.seqno;
	list_for_each_entry_safe(old, tmp, &tfile->history, file_node) {
		if (tfile->nr_history <= TX8_FILE_JOB_HISTORY)
			break;
		if (!READ_ONCE(old->done))
			continue;
		list_move_tail(&old->file_node, &drop);
		tfile->nr_history--;
		xa_erase(&tfile->jobs, old->fence.seqno);
		tfile->trimmed_seqno = max(tfile->trimmed_seqno,
					   old->fence.seqno);
	}
	spin_unlock(&tfile->lock);
	if (!list_empty(&drop))
		tx8_history_delay();
	list_for_each_entry_safe(old, tmp, &drop, file_node) {
		list_del_init(&old->file_node);
		dma_fence_put(&old->fence);
	}
}

static void tx8_job_free_unsubmitted(struct tx8_job *job)
{
	unsigned int i;

	if (job->in_sched)
		drm_sched_job_cleanup(&job->base);
	for (i = 0; i < job->nr_bos; i++)
		drm_gem_object_put(job->bos[i]);
	for (i = 0; i < job->nr_deps; i++)
		dma_fence_put(job->deps[i]);
	kfree(job->deps);
	kfree(job->bos);
	kfree(job->ranges);
	kfree(job);
}

/* The argument checks of SUBMIT that need no lookup. */
static int tx8_submit_check(struct tx8_device *tdev,
			    const struct drm_tx8_submit *args)
{
	if (args->flags & ~DRM_TX8_SUBMIT_FLAGS_MASK)
		return -EINVAL;
	if ((args->flags & DRM_TX8_SUBMIT_PRIORITY_LOW) &&
	    (args->flags & DRM_TX8_SUBMIT_PRIORITY_HIGH))
		return -EINVAL;
	/* a high priority can starve the others: not for everyone */
	if ((args->flags & DRM_TX8_SUBMIT_PRIORITY_HIGH) &&
	    !capable(CAP_SYS_NICE))
		return -EPERM;
	/* the job flag exists since hardware interface 1.6 */
	if ((args->flags & DRM_TX8_SUBMIT_BATCH_INVARIANT) &&
	    TX8_IF_MINOR(tdev->if_version) < 6)
		return -EOPNOTSUPP;
	if (args->bo_count > tdev->max_ranges)
		return -EINVAL;
	if (args->bo_count && (args->bo_stride < sizeof(struct drm_tx8_bo_ref) ||
			       args->bo_stride > PAGE_SIZE || args->bo_stride % 4))
		return -EINVAL;
	if (args->in_syncobj_count > TX8_MAX_IN_SYNCOBJS)
		return -EINVAL;
	if (!args->cmd_size || args->cmd_size % 8 || args->cmd_offset % 8 ||
	    args->cmd_size > tdev->max_cmd_size)
		return -EINVAL;
	return 0;
}

/* A new job of SUBMIT: its command buffer, BOs and profiling buffer. */
static struct tx8_job *tx8_job_new(struct tx8_device *tdev,
				   struct drm_file *file,
				   const struct drm_tx8_submit *args)
{
	struct drm_gem_object *cmd;
	struct tx8_job *job;
	int ret;

	cmd = drm_gem_object_lookup(file, args->cmd_handle);
	if (!cmd)
		return ERR_PTR(-ENOENT);
	if (args->cmd_offset > cmd->size ||
	    args->cmd_size > cmd->size - args->cmd_offset) {
		drm_gem_object_put(cmd);
		return ERR_PTR(-EINVAL);
	}
	job = kzalloc(sizeof(*job), GFP_KERNEL_ACCOUNT);
	if (!job) {
		drm_gem_object_put(cmd);
		return ERR_PTR(-ENOMEM);
	}
	job->tdev = tdev;
	spin_lock_init(&job->fence_lock);
	INIT_LIST_HEAD(&job->node);
	INIT_LIST_HEAD(&job->file_node);
	/* the BOs given, the command buffer, the profiling buffer */
	job->bos = kcalloc(args->bo_count + 2, sizeof(*job->bos),
			   GFP_KERNEL_ACCOUNT);
	job->ranges = kcalloc(args->bo_count + 2, sizeof(*job->ranges),
			      GFP_KERNEL_ACCOUNT);
	if (!job->bos || !job->ranges) {
		drm_gem_object_put(cmd);
		ret = -ENOMEM;
		goto err;
	}
	job->user_data = args->user_data;
	if (args->flags & DRM_TX8_SUBMIT_BATCH_INVARIANT)
		job->desc_flags |= TX8_JOB_F_BATCH_INVARIANT;
	job->cmd_addr = to_tx8_bo(cmd)->node.start + args->cmd_offset;
	job->cmd_size = args->cmd_size;
	ret = tx8_get_bos(job, file, args);
	/* the command buffer is readable by its job */
	tx8_add_bo(job, cmd, TX8_ACCESS_READ);
	if (!ret)
		ret = tx8_get_prof(job, file, args);
	if (!ret && job->nr_bos > tdev->max_ranges)
		ret = -EINVAL;
	if (!ret)
		return job;
err:
	tx8_job_free_unsubmitted(job);
	return ERR_PTR(ret);
}

/*
 * Under submit_lock: the scheduler job (once), the BO reservations locked,
 * the implicit dependencies. The entity is taken here, not before: RESET
 * makes the file's entities anew under submit_lock.
 */
static int tx8_job_lock(struct tx8_job *job, struct tx8_file *tfile,
			struct drm_sched_entity *entity,
			struct ww_acquire_ctx *ticket)
{
	int ret;

	lockdep_assert_held(&tfile->submit_lock);
	if (!READ_ONCE(tfile->entities_live))
		return -ENODEV;
	if (!job->in_sched) {
		ret = drm_sched_job_init(&job->base, entity, 1, tfile);
		if (ret)
			return ret;
		job->in_sched = true;
	}
	ret = drm_gem_lock_reservations(job->bos, job->nr_bos, ticket);
	if (ret)
		return ret;
	ret = tx8_resv_prepare(job, entity);
	if (ret)
		drm_gem_unlock_reservations(job->bos, job->nr_bos, ticket);
	return ret;
}

/*
 * job_lock held, room checked: the job gets its number and hardware fence
 * and joins the waiting list, which owns the initial reference. SUBMIT
 * takes one of its own (it uses the job until it is armed) and one for
 * the scheduler (free_job).
 */
static void tx8_job_enqueue_locked(struct tx8_device *tdev,
				   struct tx8_file *tfile, struct tx8_job *job)
{
	unsigned int i;

	lockdep_assert_held(&tdev->job_lock);
	kref_get(&tfile->ref);
	job->tfile = tfile;
	/* dropped by tx8_fence_release: fences outlive files and devices */
	__module_get(THIS_MODULE);
	dma_fence_init(&job->fence, &tx8_fence_ops, &job->fence_lock,
		       dma_fence_context_alloc(1), ++tdev->next_seqno);
	list_add_tail(&job->node, &tdev->waiting);
	job->counted = true;
	tfile->nr_waiting++;
	tdev->nr_waiting++;
	dma_fence_get(&job->fence);	/* SUBMIT's */
	dma_fence_get(&job->fence);	/* the scheduler's */
	for (i = 0; i < job->nr_bos; i++) {
		struct tx8_bo *bo = to_tx8_bo(job->bos[i]);

		/* an older job's fence: never the last reference here */
		if (bo->last_job)
			dma_fence_put(&bo->last_job->fence);
		bo->last_job = to_tx8_job(dma_fence_get(&job->fence));
	}
}

/*
 * SUBMIT. Everything that may sleep for long (waiting for an in-syncobj's
 * fence, for room on the waiting list) happens outside drm_dev_enter, so
 * that an unplug never waits for a client: the device is entered only to
 * queue the job, under the locks. The job's dependencies are the
 * scheduler's prepare_job's alone (none in the scheduler's own array):
 * a job cancelled by RESET or close leaves the scheduler at once, without
 * waiting for them.
 */
int tx8_submit_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct tx8_device *tdev = to_tx8(drm);
	struct tx8_file *tfile = file->driver_priv;
	struct drm_tx8_submit *args = data;
	struct drm_syncobj *out_sync = NULL;
	struct drm_sched_entity *entity;
	struct ww_acquire_ctx ticket;
	unsigned long flags, deadline;
	struct tx8_job *job;
	int ret, idx;

	ret = tx8_submit_check(tdev, args);
	if (ret)
		return ret;
	entity = &tfile->entity[args->flags & DRM_TX8_SUBMIT_PRIORITY_LOW ? 0 :
				args->flags & DRM_TX8_SUBMIT_PRIORITY_HIGH ? 2 : 1];
	deadline = tx8_submit_deadline(args);

	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	drm_dev_exit(idx);

	job = tx8_job_new(tdev, file, args);
	if (IS_ERR(job))
		return PTR_ERR(job);
	if (args->out_syncobj) {
		out_sync = drm_syncobj_find(file, args->out_syncobj);
		if (!out_sync) {
			ret = -ENOENT;
			goto err_job;
		}
	}
	ret = tx8_get_in_fences(job, file, args, deadline);
	if (ret)
		goto err_job;

	/* bounded: a file, and the device, have few jobs not in the ring */
	for (;;) {
		long left;

		left = wait_event_interruptible_timeout(tdev->ring_wq,
							tx8_can_wait(tdev, tfile),
							tx8_left(deadline));
		if (left < 0 || !left) {
			ret = left ? left : -EBUSY;
			goto err_job;
		}
		if (!drm_dev_enter(drm, &idx)) {
			ret = -ENODEV;
			goto err_job;
		}
		/* lock order: submit_lock, BO reservations, job_lock */
		mutex_lock(&tfile->submit_lock);
		ret = tx8_job_lock(job, tfile, entity, &ticket);
		if (ret)
			goto err_unlock;
		spin_lock_irqsave(&tdev->job_lock, flags);
		if (tdev->gone || tdev->stopping || tdev->lost) {
			ret = tdev->lost ? -EIO : -ENODEV;
			spin_unlock_irqrestore(&tdev->job_lock, flags);
			drm_gem_unlock_reservations(job->bos, job->nr_bos,
						    &ticket);
			goto err_unlock;
		}
		if (tfile->nr_waiting < TX8_MAX_WAITING &&
		    tdev->nr_waiting < TX8_MAX_DEV_WAITING)
			break;
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		drm_gem_unlock_reservations(job->bos, job->nr_bos, &ticket);
		mutex_unlock(&tfile->submit_lock);
		drm_dev_exit(idx);
	}
	tx8_job_enqueue_locked(tdev, tfile, job);
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	drm_sched_job_arm(&job->base);
	/* a job waiting for another entity's waits for it to finish */
	set_bit(DRM_SCHED_FENCE_DONT_PIPELINE,
		&job->base.s_fence->finished.flags);
	tx8_resv_add(job);
	drm_gem_unlock_reservations(job->bos, job->nr_bos, &ticket);
	atomic64_inc(&tdev->jobs);

	args->seqno = job->fence.seqno;
	if (out_sync) {
		/* the out-fence is the scheduler's finished fence */
		drm_syncobj_replace_fence(out_sync,
					  &job->base.s_fence->finished);
		drm_syncobj_put(out_sync);
	}
	tx8_file_record(tfile, job);
	drm_dev_get(drm);
	drm_sched_entity_push_job(&job->base);
	/* done with it: from now on it may be cancelled */
	spin_lock_irqsave(&tdev->job_lock, flags);
	job->armed = true;
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	mutex_unlock(&tfile->submit_lock);
	drm_dev_exit(idx);
	dma_fence_put(&job->fence);
	return 0;

err_unlock:
	mutex_unlock(&tfile->submit_lock);
	drm_dev_exit(idx);
err_job:
	if (out_sync)
		drm_syncobj_put(out_sync);
	tx8_job_free_unsubmitted(job);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* WAIT                                                                      */

int tx8_wait_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct tx8_device *tdev = to_tx8(drm);
	struct tx8_file *tfile = file->driver_priv;
	struct drm_tx8_wait *args = data;
	struct tx8_job *job = NULL;
	unsigned long flags;
	long timeout, ret;

	if (args->flags)
		return -EINVAL;

	if (args->handle) {
		struct drm_gem_object *obj;
		struct tx8_bo *bo;

		obj = drm_gem_object_lookup(file, args->handle);
		if (!obj)
			return -ENOENT;
		/* every job using the BO, readers and writers (dma_resv) */
		ret = dma_resv_wait_timeout(obj->resv, DMA_RESV_USAGE_READ, true,
					    drm_timeout_abs_to_jiffies(args->timeout_ns));
		if (ret <= 0) {
			drm_gem_object_put(obj);
			return ret ? ret : -ETIME;
		}
		/* its status: the last job that used it */
		bo = to_tx8_bo(obj);
		spin_lock_irqsave(&tdev->job_lock, flags);
		if (bo->last_job)
			job = to_tx8_job(dma_fence_get(&bo->last_job->fence));
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		drm_gem_object_put(obj);
		if (!job) {
			args->status = TX8_STATUS_OK;
			args->fault_cmd = 0;
			args->fault_addr = 0;
			args->user_data = 0;
			args->start_ns = 0;
			args->end_ns = 0;
			args->busy_ns = 0;
			args->macs = 0;
			return 0;
		}
	} else {
		spin_lock(&tfile->lock);
		tx8_file_lock_delay();
		job = xa_load(&tfile->jobs, args->seqno);
		if (job) {
			tx8_history_delay();
			dma_fence_get(&job->fence);
		} else if (args->seqno && args->seqno >= tfile->first_seqno &&
			   args->seqno <= tfile->trimmed_seqno) {
			/* not kept, as old as a trimmed record */
			spin_unlock(&tfile->lock);
			return -ENOENT;
		}
		spin_unlock(&tfile->lock);
		if (!job)
			return -EINVAL;
	}

	timeout = drm_timeout_abs_to_jiffies(args->timeout_ns);
	ret = dma_fence_wait_timeout(&job->fence, true, timeout);
	if (ret == 0) {
		ret = -ETIME;
	} else if (ret > 0) {
		spin_lock_irqsave(&tdev->job_lock, flags);
		args->status = job->status;
		args->fault_cmd = job->fault_cmd;
		args->fault_addr = job->fault_addr;
		args->user_data = job->user_data;
		args->start_ns = job->start_ns;
		args->end_ns = job->end_ns;
		args->busy_ns = job->core_busy_ns;
		args->macs = job->macs;
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		ret = 0;
	}
	dma_fence_put(&job->fence);
	return ret;
}
