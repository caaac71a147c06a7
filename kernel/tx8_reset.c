// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator: recovery. The RESET ioctl (the caller's own context:
 * its jobs cancelled or aborted by the device one by one, never another
 * client's), the queue reset of the job timeout and of the admin, device
 * loss, their uevents, and fault injection.
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
#include "tx8_job.h"

void tx8_fail_all_locked(struct tx8_device *tdev, u32 status,
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
int tx8_hw_reset_locked(struct tx8_device *tdev, u32 hung_status,
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
void tx8_lost_work(struct work_struct *work)
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

/*
 * Fail the jobs of @tfile (all with NULL) not yet handed to the ring with
 * @status, unrun; returns how many. The scheduler still holds them: when
 * it gets to them, run_job finds them finished.
 */
u64 tx8_deps_cancel(struct tx8_device *tdev, struct tx8_file *tfile,
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
