// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator: the hardware fence of a job (tx8_job.fence). Signalled
 * from the completion interrupt (tx8_sched.c) or when a job is cancelled
 * (tx8_reset.c); it has its own lock, inside the job, and holds the
 * module: a fence outlives files and devices (sync_files, syncobjs of
 * other drivers), and freeing it frees the job.
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

/*
 * The job's fence, numbered @seqno; it holds the module until released
 * (its ops are module text).
 */
void tx8_fence_init(struct tx8_job *job, u64 seqno)
{
	__module_get(THIS_MODULE);
	dma_fence_init(&job->fence, &tx8_fence_ops, &job->fence_lock,
		       dma_fence_context_alloc(1), seqno);
}
