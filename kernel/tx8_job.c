// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator: jobs of a file. SUBMIT and WAIT, the file's job
 * records, open and close.
 *
 * SUBMIT never waits for a job's in-syncobjs: it gives the job to its
 * entity (tx8_sched.c) with the dependencies (in-fences, implicit dma_resv
 * fences) for prepare_job, and places the scheduler's finished fence in
 * the out-syncobj.
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
long tx8_left(unsigned long deadline)
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
	tx8_fence_init(job, ++tdev->next_seqno);
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
			args->energy_pj = 0;
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
		args->energy_pj = job->energy_pj;
		spin_unlock_irqrestore(&tdev->job_lock, flags);
		ret = 0;
	}
	dma_fence_put(&job->fence);
	return ret;
}
