// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator: jobs. Submission ring, completion records, dma_fences,
 * the job timeout and the queue reset.
 *
 * All jobs of the device go through the one queue the device assigned to
 * this ivshmem peer. SUBMIT never waits for a job's in-syncobjs: it gives
 * the job its fence (placed in the out-syncobj at once) and puts it on the
 * device's waiting list; the dependency pass (tx8_deps_run) moves a job to
 * the ring once all its in-fences have signalled, jobs of one file in
 * submission order, and fails it without running it if one signalled
 * with an error. Jobs of different files may thus enter the ring in
 * another order than their job numbers, so every job fence gets its own
 * fence context; the ring descriptors carry a separate, strictly
 * increasing hw_seqno. The device completes jobs in ring order.
 * Everything about the ring is guarded by tdev->job_lock; every fence has
 * its own lock (tx8_job.fence_lock), taken inside job_lock when a job
 * finishes. In-syncobjs are resolved to fences at SUBMIT (a syncobj
 * without a fence is waited for, bounded), so no job can wait for itself
 * or for a fence yet to be made. Lock order: docs/kernel.md.
 */

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

unsigned int tx8_job_timeout_ms = 5000;

/* 100 ms .. 10 min: 0 (no timeout) would let a job hang for ever */
static int tx8_timeout_set(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret = kstrtouint(val, 0, &v);

	if (ret)
		return ret;
	if (v < 100 || v > 600000)
		return -EINVAL;
	WRITE_ONCE(tx8_job_timeout_ms, v);
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

/*
 * At close: jobs still waiting for in-fences fail with ABORTED without
 * running; drop the file's records of its jobs (running ones go on).
 */
void tx8_file_release_jobs(struct tx8_file *tfile)
{
	struct tx8_job *job, *tmp;
	LIST_HEAD(list);

	tx8_deps_cancel(tfile->tdev, tfile, TX8_STATUS_ABORTED);
	spin_lock(&tfile->lock);
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

static bool tx8_can_push(struct tx8_device *tdev)
{
	return tdev->lost || tdev->gone ||
	       (!tdev->resetting && tdev->inflight < TX8_SQ_ENTRIES);
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
	desc->flags = 0;
	desc->rsvd0 = 0;
	desc->user_data = job->user_data;
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

static void tx8_watch_head(struct tx8_device *tdev)
{
	struct tx8_job *head;

	head = list_first_entry_or_null(&tdev->pending, struct tx8_job, node);
	if (!head || head->hw_seqno == tdev->watch_seqno)
		return;
	tdev->watch_seqno = head->hw_seqno;
	tdev->watch_start = jiffies;
	tdev->watch_start_ns = ktime_get_ns();
	/* at remove the timeout work is cancelled once and for all */
	if (!tdev->stopping)
		mod_delayed_work(system_wq, &tdev->timeout_work,
				 msecs_to_jiffies(tx8_job_timeout_ms));
}

/*
 * Finish a job, in the ring or (not queued) on the waiting list. Caller
 * holds job_lock (and dep_lock for a waiting job); the job moves to @done.
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
	if (job->queued) {
		tdev->inflight--;
	} else {
		job->tfile->nr_waiting--;
		tdev->nr_waiting--;
	}
	dma_fence_signal(&job->fence);
	list_add_tail(&job->node, done);
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
		/* no dep_cb is armed any more: finished jobs left the list */
		for (i = 0; i < job->nr_deps; i++)
			dma_fence_put(job->deps[i]);
		job->nr_deps = 0;
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

/* Read completion records; signal their fences. */
void tx8_process_completions(struct tx8_device *tdev)
{
	struct tx8_completion rec;
	unsigned long flags;
	LIST_HEAD(done);
	bool kick;
	u32 tail;

	spin_lock_irqsave(&tdev->job_lock, flags);
	if (tdev->gone || !tdev->q) {
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		return;
	}
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
			       TX8_STATUS_DEVICE_ERROR, &done);
	}
	WRITE_ONCE(tdev->q->cq_head, tdev->cq_head);
	tx8_watch_head(tdev);
	kick = !list_empty(&done) && !list_empty(&tdev->waiting);
	spin_unlock_irqrestore(&tdev->job_lock, flags);

	if (!list_empty(&done)) {
		/* ring slots came free for ready waiting jobs */
		if (kick)
			mod_delayed_work(system_wq, &tdev->dep_work, 0);
		wake_up_all(&tdev->ring_wq);
		tx8_retire(&done);
	}
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
 * Afterwards: with @hung_status not OK, the job at the head fails with
 * @hung_status (the job that timed out); any other job the device had
 * already taken fails with ABORTED (it may have run in part); every job of
 * @victim fails with ABORTED (counted in *@nr_victim); all other jobs,
 * never started, are queued again.
 */
static int tx8_do_reset(struct tx8_device *tdev, u32 hung_status,
			struct tx8_file *victim, u64 *nr_victim,
			const char *reason)
{
	struct tx8_job *job, *tmp, *head;
	unsigned long flags;
	u64 aborted = 0, hung_seqno = 0;
	LIST_HEAD(done);
	bool requeued = false, have_taken_seqno;
	u64 taken_seqno = 0;
	u32 taken;
	int ret;

	/* the victim's jobs that wait for in-fences never run */
	if (victim) {
		u64 n = tx8_deps_cancel(tdev, victim, TX8_STATUS_ABORTED);

		if (nr_victim)
			*nr_victim += n;
	}
	mutex_lock(&tdev->reset_lock);
	spin_lock_irqsave(&tdev->job_lock, flags);
	if (tdev->gone || tdev->stopping || tdev->lost) {
		ret = tdev->lost ? -EIO : -ENODEV;
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		mutex_unlock(&tdev->reset_lock);
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

	spin_lock_irqsave(&tdev->job_lock, flags);
	if (ret) {
		/* tx8_mbox declared the device lost (tx8_lost_work) */
		tdev->lost = true;
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
			} else if (victim && job->tfile == victim) {
				tx8_job_finish(tdev, job, NULL,
					       TX8_STATUS_ABORTED, &done);
				if (nr_victim)
					(*nr_victim)++;
			} else if (started) {
				tx8_job_finish(tdev, job, NULL,
					       TX8_STATUS_ABORTED, &done);
			}
		}
		tdev->sq_tail = 0;
		tdev->cq_head = 0;
		WRITE_ONCE(tdev->q->cq_head, 0);
		list_for_each_entry(job, &tdev->pending, node) {
			tx8_write_desc(tdev, job);
			requeued = true;
		}
		tx8_publish_tail(tdev);
		tdev->watch_seqno = 0;
		tx8_watch_head(tdev);
	}
	tdev->resetting = false;
	spin_unlock_irqrestore(&tdev->job_lock, flags);

	if (requeued)
		tx8_ring_doorbell(tdev, TX8_DEV_VEC_SUBMIT);
	/* ready waiting jobs were held back while resetting */
	mod_delayed_work(system_wq, &tdev->dep_work, 0);
	wake_up_all(&tdev->ring_wq);
	tx8_retire(&done);
	if (ret) {
		drm_err(&tdev->drm, "reset (%s) failed: %d; device lost\n",
			reason, ret);
		tx8_send_uevent(tdev, reason, hung_seqno);
	} else if (__ratelimit(&tdev->reset_rs)) {
		/* a client can cause resets: neither log nor uevents flood */
		drm_warn(&tdev->drm,
			 "queue reset (%s): failed job %llu, %llu job(s) stopped by the device\n",
			 reason, hung_seqno, aborted);
		tx8_send_uevent(tdev, reason, hung_seqno);
	}
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

int tx8_reset(struct tx8_device *tdev, const char *reason)
{
	return tx8_do_reset(tdev, TX8_STATUS_ABORTED, NULL, NULL, reason);
}

/*
 * The ring state the client reset waits on: 0 when @tfile has no job in
 * the ring (nothing to reset), 1 when its job is at the head (reset now),
 * else the head's hw_seqno + 2 (another client's job runs: let it end).
 */
static u64 tx8_reset_state(struct tx8_device *tdev, struct tx8_file *tfile)
{
	struct tx8_job *job, *head;
	unsigned long flags;
	u64 state = 0;

	spin_lock_irqsave(&tdev->job_lock, flags);
	head = list_first_entry_or_null(&tdev->pending, struct tx8_job, node);
	list_for_each_entry(job, &tdev->pending, node) {
		if (job->tfile == tfile) {
			state = job == head ? 1 : head->hw_seqno + 2;
			break;
		}
	}
	if (tdev->gone || tdev->stopping || tdev->lost)
		state = 0;
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	return state;
}

/*
 * RESET of one client: it affects only the caller's jobs. Its jobs that
 * wait for in-fences fail unrun; its jobs in the ring fail with ABORTED.
 * The device queue is reset only if the client has jobs in the ring, and
 * only once its own job is the one running (the head); another client's
 * running job is left to finish first (bounded by the job timeout, whose
 * handler resets the queue for a hung job anyway). Other clients' jobs
 * that never started are queued again.
 */
int tx8_reset_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct tx8_device *tdev = to_tx8(drm);
	struct tx8_file *tfile = file->driver_priv;
	struct drm_tx8_reset *args = data;
	unsigned long deadline;
	u64 state;
	int ret = 0, idx;

	if (args->flags || args->pad)
		return -EINVAL;
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	drm_dev_exit(idx);
	args->aborted = tx8_deps_cancel(tdev, tfile, TX8_STATUS_ABORTED);
	/* waits outside drm_dev_enter: an unplug must not wait for us */
	deadline = jiffies + msecs_to_jiffies(tx8_job_timeout_ms) + HZ;
	while ((state = tx8_reset_state(tdev, tfile)) > 1 &&
	       time_before(jiffies, deadline)) {
		long left;

		left = wait_event_interruptible_timeout(tdev->ring_wq,
							tx8_reset_state(tdev, tfile) != state,
							deadline - jiffies);
		if (left < 0)
			return left;
	}
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	if (state)
		ret = tx8_do_reset(tdev, TX8_STATUS_OK, tfile, &args->aborted,
				   "client");
	else if (READ_ONCE(tdev->lost))
		ret = -EIO;
	drm_dev_exit(idx);
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
/* Dependencies                                                              */

/*
 * An in-fence signalled. Runs under that fence's lock (for one of ours
 * inside tdev->job_lock), so it only queues the dependency pass. The
 * job is alive: it stays on the waiting list until tx8_deps_run or
 * tx8_deps_cancel took the callback off (or saw it run, under the same
 * fence lock) with dma_fence_remove_callback.
 */
static void tx8_dep_cb(struct dma_fence *f, struct dma_fence_cb *cb)
{
	struct tx8_job *job = container_of(cb, struct tx8_job, dep_cb);

	mod_delayed_work(system_wq, &job->tdev->dep_work, 0);
}

/* Take the callback off the fence; afterwards it neither runs nor will. */
static void tx8_dep_disarm(struct tx8_job *job)
{
	if (job->cb_fence) {
		dma_fence_remove_callback(job->cb_fence, &job->dep_cb);
		job->cb_fence = NULL;
	}
}

/*
 * Look at the job's in-fences, from the first not known signalled.
 * Returns 0 when all signalled without error, the error of one that
 * failed, or -EAGAIN with a callback armed. dep_lock held, job_lock not.
 */
static int tx8_deps_check(struct tx8_job *job)
{
	while (job->dep_next < job->nr_deps) {
		struct dma_fence *fence = job->deps[job->dep_next];
		int status;

		if (job->cb_fence) {
			if (!dma_fence_is_signaled(job->cb_fence))
				return -EAGAIN;
			tx8_dep_disarm(job);
		}
		if (!dma_fence_is_signaled(fence) &&
		    !dma_fence_add_callback(fence, &job->dep_cb, tx8_dep_cb)) {
			job->cb_fence = fence;
			return -EAGAIN;
		}
		status = dma_fence_get_status(fence);
		if (status < 0)
			return status;
		job->dep_next++;
	}
	return 0;
}

/*
 * The dependency pass: move every waiting job whose in-fences all
 * signalled to the ring, in submission order, skipping the jobs of a file
 * with an older job still waiting (a file's jobs stay in order). A job
 * whose in-fence failed finishes with ABORTED and that error, unrun; a
 * job waiting longer than its dep_deadline for another driver's fence
 * finishes with TIMEOUT (no job waits for ever). Stops at a full ring or
 * a reset; completions and resets run it again. Caller holds dep_lock.
 */
static void tx8_deps_run(struct tx8_device *tdev)
{
	struct tx8_job *job, *tmp;
	bool pushed = false, moved = false;
	unsigned long flags, next = 0;
	LIST_HEAD(done);
	u32 status;
	int ret;

	lockdep_assert_held(&tdev->dep_lock);
	tdev->dep_gen++;
	list_for_each_entry_safe(job, tmp, &tdev->waiting, node) {
		if (job->tfile->dep_gen == tdev->dep_gen)
			continue;
		ret = tx8_deps_check(job);
		if (ret == -EAGAIN && job->dep_deadline &&
		    time_after_eq(jiffies, job->dep_deadline)) {
			tx8_dep_disarm(job);
			ret = -ETIMEDOUT;
		}
		if (ret == -EAGAIN) {
			if (job->dep_deadline &&
			    (!next || time_before(job->dep_deadline, next)))
				next = job->dep_deadline;
			job->tfile->dep_gen = tdev->dep_gen;
			continue;
		}
		spin_lock_irqsave(&tdev->job_lock, flags);
		if (!ret && !tdev->gone && !tdev->lost && !tx8_can_push(tdev)) {
			spin_unlock_irqrestore(&tdev->job_lock, flags);
			break;
		}
		/* tx8_deps_check left no callback armed */
		moved = true;
		if (ret || tdev->gone || tdev->lost) {
			job->dep_error = ret;
			status = ret == -ETIMEDOUT ? TX8_STATUS_TIMEOUT :
				 ret || tdev->gone ? TX8_STATUS_ABORTED :
				 TX8_STATUS_DEVICE_ERROR;
			tx8_job_finish(tdev, job, NULL, status, &done);
		} else {
			job->hw_seqno = ++tdev->next_hw_seqno;
			tx8_write_desc(tdev, job);
			tx8_publish_tail(tdev);
			list_move_tail(&job->node, &tdev->pending);
			job->tfile->nr_waiting--;
			tdev->nr_waiting--;
			job->queued = true;
			tdev->inflight++;
			tx8_watch_head(tdev);
			pushed = true;
		}
		spin_unlock_irqrestore(&tdev->job_lock, flags);
	}
	if (pushed)
		tx8_ring_doorbell(tdev, TX8_DEV_VEC_SUBMIT);
	if (moved)
		wake_up_all(&tdev->ring_wq);
	tx8_retire(&done);
	/* a fence of another driver bounds its wait: look again then */
	if (next && !READ_ONCE(tdev->gone))
		queue_delayed_work(system_wq, &tdev->dep_work,
				   time_after(next, jiffies) ? next - jiffies : 0);
}

static void tx8_dep_work(struct work_struct *work)
{
	struct tx8_device *tdev = container_of(to_delayed_work(work),
					       struct tx8_device, dep_work);

	mutex_lock(&tdev->dep_lock);
	tx8_deps_run(tdev);
	mutex_unlock(&tdev->dep_lock);
}

/*
 * Fail the waiting jobs of @tfile (all with NULL) with @status, unrun;
 * returns how many. Their callbacks are removed first, so none runs on a
 * job after it is freed.
 */
static u64 tx8_deps_cancel(struct tx8_device *tdev, struct tx8_file *tfile,
			   u32 status)
{
	struct tx8_job *job, *tmp;
	unsigned long flags;
	LIST_HEAD(done);
	u64 n = 0;

	mutex_lock(&tdev->dep_lock);
	list_for_each_entry_safe(job, tmp, &tdev->waiting, node) {
		if (tfile && job->tfile != tfile)
			continue;
		tx8_dep_disarm(job);
		spin_lock_irqsave(&tdev->job_lock, flags);
		tx8_job_finish(tdev, job, NULL, status, &done);
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		n++;
	}
	mutex_unlock(&tdev->dep_lock);
	if (n)
		wake_up_all(&tdev->ring_wq);
	tx8_retire(&done);
	return n;
}

static void tx8_timeout_work(struct work_struct *work)
{
	struct tx8_device *tdev = container_of(to_delayed_work(work),
					       struct tx8_device, timeout_work);
	unsigned long flags, timeout = msecs_to_jiffies(tx8_job_timeout_ms);
	struct tx8_job *head;
	u64 seqno;

	/* an interrupt may have been missed: look at the ring first */
	tx8_process_completions(tdev);

	spin_lock_irqsave(&tdev->job_lock, flags);
	head = list_first_entry_or_null(&tdev->pending, struct tx8_job, node);
	if (!head || tdev->resetting || tdev->lost || tdev->gone ||
	    tdev->stopping) {
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		return;
	}
	if (head->hw_seqno != tdev->watch_seqno) {
		tdev->watch_seqno = 0;
		tx8_watch_head(tdev);
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		return;
	}
	if (time_before(jiffies, tdev->watch_start + timeout)) {
		/* ->stopping is clear: tx8_jobs_fini has not cancelled us yet */
		mod_delayed_work(system_wq, &tdev->timeout_work,
				 tdev->watch_start + timeout - jiffies);
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		return;
	}
	seqno = head->fence.seqno;
	spin_unlock_irqrestore(&tdev->job_lock, flags);

	dev_warn_ratelimited(tdev->drm.dev, "job %llu timed out after %u ms\n",
			     seqno, tx8_job_timeout_ms);
	tx8_do_reset(tdev, TX8_STATUS_TIMEOUT, NULL, NULL, "timeout");
}

void tx8_jobs_init(struct tx8_device *tdev)
{
	spin_lock_init(&tdev->job_lock);
	INIT_LIST_HEAD(&tdev->pending);
	init_waitqueue_head(&tdev->ring_wq);
	INIT_DELAYED_WORK(&tdev->timeout_work, tx8_timeout_work);
	mutex_init(&tdev->reset_lock);
	INIT_LIST_HEAD(&tdev->waiting);
	mutex_init(&tdev->dep_lock);
	INIT_DELAYED_WORK(&tdev->dep_work, tx8_dep_work);
	INIT_WORK(&tdev->lost_work, tx8_lost_work);
	ratelimit_state_init(&tdev->reset_rs, 5 * HZ, 5);
	ratelimit_set_flags(&tdev->reset_rs, RATELIMIT_MSG_ON_RELEASE);
}

/* At remove: stop the queue and fail every job still pending. */
void tx8_jobs_fini(struct tx8_device *tdev)
{
	unsigned long flags;
	LIST_HEAD(done);

	/*
	 * The timeout work takes reset_lock: cancel it before taking that
	 * lock, with ->stopping set so that nothing queues it again and no
	 * new reset starts. A reset already under way finishes first.
	 */
	spin_lock_irqsave(&tdev->job_lock, flags);
	tdev->stopping = true;
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	cancel_delayed_work_sync(&tdev->timeout_work);
	mutex_lock(&tdev->reset_lock);
	spin_lock_irqsave(&tdev->job_lock, flags);
	tdev->resetting = true;
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	tx8_process_completions(tdev);
	if (!tdev->lost)
		tx8_mbox(tdev, TX8_MBOX_RESET_QUEUE, NULL, 0, NULL, NULL);
	spin_lock_irqsave(&tdev->job_lock, flags);
	tdev->gone = true;
	tx8_fail_all_locked(tdev, TX8_STATUS_ABORTED, &done);
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	mutex_unlock(&tdev->reset_lock);
	wake_up_all(&tdev->ring_wq);
	tx8_retire(&done);
	/*
	 * Jobs still waiting for in-fences fail too, their fence callbacks
	 * removed. With gone set nothing arms a callback or queues dep_work
	 * again (tx8_deps_run, completions and resets check it, SUBMIT is
	 * fenced off by drm_dev_unplug), so after the cancel below no
	 * callback or work can touch tdev or a job any more.
	 */
	tx8_deps_cancel(tdev, NULL, TX8_STATUS_ABORTED);
	cancel_work_sync(&tdev->lost_work);
	cancel_delayed_work_sync(&tdev->dep_work);
	cancel_delayed_work_sync(&tdev->timeout_work);
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
	unsigned long timeout = msecs_to_jiffies(tx8_job_timeout_ms);
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
		/*
		 * Our fences are bounded by the job timeout; one of another
		 * driver (a chain, a sync_file) gets a bound of its own.
		 */
		if (fence->ops != &tx8_fence_ops && !job->dep_deadline)
			job->dep_deadline = jiffies + 1 +
				TX8_FOREIGN_DEP_FACTOR * timeout;
	}
	return 0;
}

/*
 * Implicit sync (BO reservations locked): reserve a slot for the job's
 * fence in each BO's dma_resv, and make the job depend on the fences it
 * must wait for there (the writers for a read, all for a write) that do
 * not order before it anyway: fences of other files or other drivers. A
 * file's own jobs run in submission order already.
 */
static int tx8_resv_prepare(struct tx8_job *job, struct tx8_file *tfile)
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
			    (fence->ops == &tx8_fence_ops &&
			     to_tx8_job(fence)->tfile == tfile))
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

/* The job's fence into each BO's dma_resv: write or read usage. */
static void tx8_resv_add(struct tx8_job *job)
{
	unsigned int i;

	for (i = 0; i < job->nr_bos; i++)
		dma_resv_add_fence(job->bos[i]->resv, &job->fence,
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
 * reference under the same lock, never sees a record being dropped.
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
	list_add_tail(&job->file_node, &tfile->history);
	tfile->nr_history++;
	if (!tfile->first_seqno)
		tfile->first_seqno = job->fence.seqno;
	tfile->last_seqno = job->fence.seqno;
	while (tfile->nr_history > TX8_FILE_JOB_HISTORY) {
		old = list_first_entry(&tfile->history, struct tx8_job,
				       file_node);
		if (!READ_ONCE(old->done))
			break;
		list_move_tail(&old->file_node, &drop);
		tfile->nr_history--;
		xa_erase(&tfile->jobs, old->fence.seqno);
	}
	spin_unlock(&tfile->lock);
	list_for_each_entry_safe(old, tmp, &drop, file_node) {
		list_del_init(&old->file_node);
		dma_fence_put(&old->fence);
	}
}

static void tx8_job_free_unsubmitted(struct tx8_job *job)
{
	unsigned int i;

	for (i = 0; i < job->nr_bos; i++)
		drm_gem_object_put(job->bos[i]);
	for (i = 0; i < job->nr_deps; i++)
		dma_fence_put(job->deps[i]);
	kfree(job->deps);
	kfree(job->bos);
	kfree(job->ranges);
	kfree(job);
}

/*
 * SUBMIT. Everything that may sleep for long (waiting for an in-syncobj's
 * fence, for room on the waiting list) happens outside drm_dev_enter, so
 * that an unplug never waits for a client: the device is entered only to
 * queue the job, under the locks.
 */
int tx8_submit_ioctl(struct drm_device *drm, void *data, struct drm_file *file)
{
	struct tx8_device *tdev = to_tx8(drm);
	struct tx8_file *tfile = file->driver_priv;
	struct drm_tx8_submit *args = data;
	struct drm_syncobj *out_sync = NULL;
	struct ww_acquire_ctx ticket;
	unsigned long flags, deadline;
	struct drm_gem_object *cmd;
	struct tx8_job *job;
	unsigned int i;
	int ret, idx;

	if (args->flags)
		return -EINVAL;
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
	deadline = tx8_submit_deadline(args);

	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	drm_dev_exit(idx);

	cmd = drm_gem_object_lookup(file, args->cmd_handle);
	if (!cmd)
		return -ENOENT;
	if (args->cmd_offset > cmd->size ||
	    args->cmd_size > cmd->size - args->cmd_offset) {
		drm_gem_object_put(cmd);
		return -EINVAL;
	}

	job = kzalloc(sizeof(*job), GFP_KERNEL_ACCOUNT);
	if (!job) {
		drm_gem_object_put(cmd);
		return -ENOMEM;
	}
	job->tdev = tdev;
	spin_lock_init(&job->fence_lock);
	INIT_LIST_HEAD(&job->node);
	INIT_LIST_HEAD(&job->file_node);
	job->bos = kcalloc(args->bo_count + 1, sizeof(*job->bos),
			   GFP_KERNEL_ACCOUNT);
	job->ranges = kcalloc(args->bo_count + 1, sizeof(*job->ranges),
			      GFP_KERNEL_ACCOUNT);
	if (!job->bos || !job->ranges) {
		drm_gem_object_put(cmd);
		ret = -ENOMEM;
		goto err_job;
	}
	job->user_data = args->user_data;
	job->cmd_addr = to_tx8_bo(cmd)->node.start + args->cmd_offset;
	job->cmd_size = args->cmd_size;
	ret = tx8_get_bos(job, file, args);
	/* the command buffer is readable by its job */
	tx8_add_bo(job, cmd, TX8_ACCESS_READ);
	if (!ret && job->nr_bos > tdev->max_ranges)
		ret = -EINVAL;
	if (ret)
		goto err_job;

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
		/* lock order: BO reservations, dep_lock, job_lock */
		ret = drm_gem_lock_reservations(job->bos, job->nr_bos, &ticket);
		if (ret) {
			drm_dev_exit(idx);
			goto err_job;
		}
		ret = tx8_resv_prepare(job, tfile);
		if (ret) {
			drm_gem_unlock_reservations(job->bos, job->nr_bos,
						    &ticket);
			drm_dev_exit(idx);
			goto err_job;
		}
		mutex_lock(&tdev->dep_lock);
		spin_lock_irqsave(&tdev->job_lock, flags);
		if (tdev->gone || tdev->stopping || tdev->lost) {
			ret = tdev->lost ? -EIO : -ENODEV;
			spin_unlock_irqrestore(&tdev->job_lock, flags);
			mutex_unlock(&tdev->dep_lock);
			drm_gem_unlock_reservations(job->bos, job->nr_bos,
						    &ticket);
			drm_dev_exit(idx);
			goto err_job;
		}
		if (tfile->nr_waiting < TX8_MAX_WAITING &&
		    tdev->nr_waiting < TX8_MAX_DEV_WAITING)
			break;
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		mutex_unlock(&tdev->dep_lock);
		drm_gem_unlock_reservations(job->bos, job->nr_bos, &ticket);
		drm_dev_exit(idx);
	}
	/*
	 * dep_lock and job_lock held: the job gets its number and fence and
	 * joins the waiting list, which owns the initial reference; it
	 * cannot leave the list before dep_lock is dropped below.
	 */
	kref_get(&tfile->ref);
	job->tfile = tfile;
	/* dropped by tx8_fence_release: fences outlive files and devices */
	__module_get(THIS_MODULE);
	dma_fence_init(&job->fence, &tx8_fence_ops, &job->fence_lock,
		       dma_fence_context_alloc(1), ++tdev->next_seqno);
	list_add_tail(&job->node, &tdev->waiting);
	tfile->nr_waiting++;
	tdev->nr_waiting++;
	for (i = 0; i < job->nr_bos; i++) {
		struct tx8_bo *bo = to_tx8_bo(job->bos[i]);

		/* an older job's fence: never the last reference here */
		if (bo->last_job)
			dma_fence_put(&bo->last_job->fence);
		bo->last_job = to_tx8_job(dma_fence_get(&job->fence));
	}
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	tx8_resv_add(job);
	drm_gem_unlock_reservations(job->bos, job->nr_bos, &ticket);
	atomic64_inc(&tdev->jobs);

	args->seqno = job->fence.seqno;
	if (out_sync) {
		drm_syncobj_replace_fence(out_sync, &job->fence);
		drm_syncobj_put(out_sync);
	}
	tx8_file_record(tfile, job);
	/* a job that is ready enters the ring before SUBMIT returns */
	tx8_deps_run(tdev);
	mutex_unlock(&tdev->dep_lock);
	drm_dev_exit(idx);
	return 0;

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
		job = xa_load(&tfile->jobs, args->seqno);
		if (job) {
			dma_fence_get(&job->fence);
		} else if (args->seqno && args->seqno >= tfile->first_seqno &&
			   args->seqno <= tfile->last_seqno &&
			   !list_empty(&tfile->history) &&
			   args->seqno < list_first_entry(&tfile->history,
							  struct tx8_job,
							  file_node)->fence.seqno) {
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
