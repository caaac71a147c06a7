// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator: the GPU scheduler (drm_sched) on the device's ring.
 *
 * The device gives this ivshmem peer one queue (ring); the driver runs one
 * drm_gpu_scheduler on it, and every open file has one scheduler entity
 * per SUBMIT priority. Once a job's dependencies signalled (prepare_job),
 * the scheduler picks the ready entity with the oldest job (fair between
 * clients, higher priority first) and calls run_job, which writes the job
 * into the ring with a strictly increasing hw_seqno; the job's own fence
 * (tx8_job.fence, the scheduler's hardware fence) is signalled from the
 * completion interrupt. The job timeout (job_timeout_ms, measured from
 * when a job became the ring's head) resets the queue (tx8_reset.c): the
 * hung job fails with TIMEOUT, every other job that had not started is
 * given to the ring again (drm_sched_resubmit_jobs). Everything about the
 * ring is guarded by tdev->job_lock; every fence has its own lock. Lock
 * order: docs/kernel.md.
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

void tx8_file_entities_fini(struct tx8_file *tfile)
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
int tx8_file_entities_start(struct tx8_file *tfile)
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

void tx8_publish_tail(struct tx8_device *tdev)
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
void tx8_watch_head(struct tx8_device *tdev)
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
void tx8_job_finish(struct tx8_device *tdev, struct tx8_job *job,
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
	atomic64_add(job->energy_pj, &job->tfile->energy_pj);
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
void tx8_retire(struct list_head *done)
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
		/*
		 * A tail the ring cannot hold: the device broke the protocol.
		 * No slot can be trusted then, not even one whose seqno matches
		 * a pending job (a stale record of an earlier run of the queue
		 * would): all are skipped, and their jobs end by the timeout
		 * handler.
		 */
		drm_err_ratelimited(&tdev->drm,
				    "completion ring overrun (head %u tail %u): records skipped\n",
				    tdev->cq_head, tail);
		tdev->cq_head = tail;
	}
	/* the records after the tail that announces them */
	rmb();
	while (tdev->cq_head != tail) {
		u32 slot = tdev->cq_head++ % TX8_CQ_ENTRIES;
		struct tx8_job *job;

		memcpy(&rec, &tdev->cq[slot], sizeof(rec));
		job = tx8_find_pending(tdev, rec.seqno);
		if (!job)
			continue;	/* a record from before a reset */
		/* its second half, same slot (interface >= 1.9) */
		if (tdev->cqx)
			job->energy_pj = READ_ONCE(tdev->cqx[slot].energy_pj);
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

/*
 * The scheduler entities of @tfile killed and made anew: the jobs queued
 * on them leave the scheduler at once, unrun (free_job), without waiting
 * for their dependencies. The scheduler's work is paused meanwhile (see
 * tx8_file_release_jobs). Caller holds tfile->submit_lock: no SUBMIT of
 * the file is between drm_sched_job_init and push_job.
 */
int tx8_file_entities_renew(struct tx8_file *tfile)
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
