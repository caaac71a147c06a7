// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator: debugfs, in /sys/kernel/debug/accel/<minor>/.
 *
 *   bos           every BO: device address, size, mapped pages, pid, label
 *   ring          queue, ring pointers, pending jobs, lease, state
 *   counters      the device's counters
 *   reset         write 1: reset the queue (the running job is aborted;
 *                 CAP_SYS_ADMIN, like sysfs tx8/reset)
 *   inject_fault  write "hang|slow MS|error|crash|none [COUNT]": ask the
 *                 device to misbehave on its next COUNT jobs
 *
 * Also the driver's test-only fault-injection delays (module parameters
 * fault_*_delay_us, off by default), used by the VM suite to widen race
 * windows.
 */

#include <linux/capability.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/moduleparam.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include <drm/drm_drv.h>

#include "tx8_drv.h"

/*
 * Fault injection for the history_race VM test (off by default): widens
 * the window of defect 5 (a WAIT taking a reference on a record that
 * SUBMIT trims at the same time) by spinning this long at both ends of it.
 * With records erased under tfile->lock the delays change only timing.
 */
static unsigned int tx8_fault_history_delay_us;

/* Setter of a fault-injection delay: 0..@max us. */
static int tx8_delay_set(const char *val, const struct kernel_param *kp,
			 unsigned int max)
{
	unsigned int v;
	int ret = kstrtouint(val, 0, &v);

	if (ret)
		return ret;
	if (v > max)
		return -EINVAL;
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

/* The spinning delays: 0..1000 us. */
static int tx8_fault_delay_set(const char *val, const struct kernel_param *kp)
{
	return tx8_delay_set(val, kp, 1000);
}

static const struct kernel_param_ops tx8_fault_delay_ops = {
	.set = tx8_fault_delay_set,
	.get = param_get_uint,
};

module_param_cb(fault_history_delay_us, &tx8_fault_delay_ops,
		&tx8_fault_history_delay_us, 0600);
MODULE_PARM_DESC(fault_history_delay_us,
		 "Test only: spin this long (us, 0..1000, default 0 = off) where a job record is trimmed and where WAIT looks one up");

void tx8_history_delay(void)
{
	unsigned int us = READ_ONCE(tx8_fault_history_delay_us);

	if (unlikely(us))
		udelay(us);
}

/*
 * Fault injection for the irq_lock_order VM test (off by default), issue
 * 9 defect 11: spin this long inside every tfile->lock critical section,
 * and harvest completion records in the completion vector's hard IRQ
 * handler (job_lock taken in hard IRQ context, as a driver that signals
 * its fences from its interrupt does; the thread retires the jobs). A
 * driver that took tfile->lock (IRQs enabled) inside job_lock deadlocks:
 * the interrupt arrives while the file lock is held and spins on it. With
 * tfile->lock a leaf never taken under job_lock, it changes only timing.
 */
static unsigned int tx8_fault_file_lock_delay_us;
module_param_cb(fault_file_lock_delay_us, &tx8_fault_delay_ops,
		&tx8_fault_file_lock_delay_us, 0600);
MODULE_PARM_DESC(fault_file_lock_delay_us,
		 "Test only: spin this long (us, 0..1000, default 0 = off) inside the file lock, and harvest completions in hard IRQ context");

/* Caller holds tfile->lock. */
void tx8_file_lock_delay(void)
{
	unsigned int us = READ_ONCE(tx8_fault_file_lock_delay_us);

	if (unlikely(us))
		udelay(us);
}

/* Completions harvested in hard IRQ context (fault_file_lock_delay_us). */
bool tx8_fault_irq_harvest(void)
{
	return READ_ONCE(tx8_fault_file_lock_delay_us) != 0;
}

/*
 * Fault injection for the fault_restart VM test (off by default), issue
 * 36: sleep this long in the BO fault handler between its check that the
 * device did not restart and the PTE insert (a sleep, so that the restart
 * runs meanwhile even on a guest whose CPUs take turns). A restart whose
 * zap is not ordered after that window leaves a PTE to memory that is no
 * longer ours; with the check and insert under restart_rwsem it changes
 * only timing.
 */
static unsigned int tx8_fault_restart_delay_us;

/* The sleeping delay of fault_restart_delay_us: 0..100000 us. */
static int tx8_fault_sleep_set(const char *val, const struct kernel_param *kp)
{
	return tx8_delay_set(val, kp, 100000);
}

static const struct kernel_param_ops tx8_fault_sleep_ops = {
	.set = tx8_fault_sleep_set,
	.get = param_get_uint,
};

module_param_cb(fault_restart_delay_us, &tx8_fault_sleep_ops,
		&tx8_fault_restart_delay_us, 0600);
MODULE_PARM_DESC(fault_restart_delay_us,
		 "Test only: sleep this long (us, 0..100000, default 0 = off) in the BO fault handler between its device-restart check and the PTE insert");

void tx8_fault_restart_delay(void)
{
	unsigned int us = READ_ONCE(tx8_fault_restart_delay_us);

	if (unlikely(us))
		fsleep(us);
}

static int tx8_bos_show(struct seq_file *m, void *v)
{
	struct tx8_device *tdev = m->private;
	struct tx8_bo *bo;

	seq_puts(m, "dev_addr           size        faults     pid label\n");
	mutex_lock(&tdev->mm_lock);
	list_for_each_entry(bo, &tdev->bos, dev_node)
		seq_printf(m, "%#018llx %-11zu %-10lld %5d %s\n",
			   bo->node.start, bo->base.size,
			   (long long)atomic64_read(&bo->faults), bo->owner_pid,
			   bo->label[0] ? bo->label : "-");
	seq_printf(m, "used %llu of %llu bytes\n", tdev->mem_used,
		   tdev->lease_size);
	mutex_unlock(&tdev->mm_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tx8_bos);

static int tx8_ring_show(struct seq_file *m, void *v)
{
	struct tx8_device *tdev = m->private;
	struct tx8_queue *q = tdev->q;
	struct tx8_job *job;
	unsigned long flags;
	int idx;

	if (!drm_dev_enter(&tdev->drm, &idx))
		return -ENODEV;
	seq_printf(m, "peer %d queue %u state %u\n", tdev->peer, tdev->qid,
		   READ_ONCE(q->state));
	seq_printf(m, "sq_head %u sq_tail %u cq_head %u cq_tail %u irq_cause %#x\n",
		   READ_ONCE(q->sq_head), READ_ONCE(q->sq_tail),
		   READ_ONCE(q->cq_head), READ_ONCE(q->cq_tail),
		   READ_ONCE(q->irq_cause));
	seq_printf(m, "completed_seqno %llu mbox req %u ack %u\n",
		   READ_ONCE(q->completed_seqno), READ_ONCE(q->mbox_req_seq),
		   READ_ONCE(q->mbox_ack_seq));
	seq_printf(m, "lease %#llx + %#llx\n", tdev->lease_base,
		   tdev->lease_size);
	spin_lock_irqsave(&tdev->job_lock, flags);
	seq_printf(m, "next_seqno %llu inflight %u resetting %d lost %d\n",
		   tdev->next_seqno, tdev->inflight, tdev->resetting,
		   tdev->lost);
	seq_puts(m, "pending:");
	list_for_each_entry(job, &tdev->pending, node)
		seq_printf(m, " %llu", job->fence.seqno);
	seq_puts(m, "\nwaiting:");
	list_for_each_entry(job, &tdev->waiting, node)
		seq_printf(m, " %llu", job->fence.seqno);
	seq_puts(m, "\n");
	spin_unlock_irqrestore(&tdev->job_lock, flags);
	drm_dev_exit(idx);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tx8_ring);

static int tx8_counters_show(struct seq_file *m, void *v)
{
	struct tx8_device *tdev = m->private;
	struct drm_tx8_counters c;
	unsigned int i;
	int idx;

	if (!drm_dev_enter(&tdev->drm, &idx))
		return -ENODEV;
	tx8_read_counters(tdev, &c);
	drm_dev_exit(idx);
	seq_printf(m, "clock_ns %llu\njobs_submitted %llu\njobs_completed %llu\n",
		   c.clock_ns, c.jobs_submitted, c.jobs_completed);
	seq_printf(m, "jobs_failed %llu\ncommands %llu\nfaults %llu\nresets %llu\n",
		   c.jobs_failed, c.commands, c.faults, c.resets);
	seq_printf(m, "busy_ns %llu\nbytes_read %llu\nbytes_written %llu\n",
		   c.busy_ns, c.bytes_read, c.bytes_written);
	for (i = 0; i < TX8_DTYPE_COUNT; i++)
		seq_printf(m, "macs_%u %llu\n", i, c.macs[i]);
	seq_printf(m, "macs_skipped %llu\nexpert_cache_hits %llu\nexpert_cache_misses %llu\n",
		   c.macs_skipped, c.expert_cache_hits, c.expert_cache_misses);
	seq_printf(m, "page_faults %llu\ndriver_resets %llu\ndriver_timeouts %llu\n",
		   c.page_faults, c.driver_resets, c.driver_timeouts);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tx8_counters);

static ssize_t tx8_reset_write(struct file *f, const char __user *ubuf,
			       size_t len, loff_t *pos)
{
	struct tx8_device *tdev = f->private_data;
	int ret, idx;

	/* a device-wide reset disturbs every client: admin only */
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (!drm_dev_enter(&tdev->drm, &idx))
		return -ENODEV;
	ret = tx8_reset(tdev, "debugfs");
	drm_dev_exit(idx);
	return ret ? ret : len;
}

static const struct file_operations tx8_reset_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = tx8_reset_write,
};

static ssize_t tx8_inject_write(struct file *f, const char __user *ubuf,
				size_t len, loff_t *pos)
{
	struct tx8_device *tdev = f->private_data;
	static const char * const kinds[] = {
		[TX8_FAULT_NONE] = "none",
		[TX8_FAULT_HANG] = "hang",
		[TX8_FAULT_SLOW] = "slow",
		[TX8_FAULT_CRASH] = "crash",
		[TX8_FAULT_ERROR] = "error",
		[TX8_FAULT_BAD_RECORD] = "bad_record",
		[TX8_FAULT_RESTART] = "restart",
		[TX8_FAULT_STOP] = "stop",
		[TX8_FAULT_BAD_CAPS] = "bad_caps",
		[TX8_FAULT_BAD_LEASE] = "bad_lease",
		[TX8_FAULT_TAKE_ON_RESET] = "take_on_reset",
	};
	char buf[64], *s, *word;
	u64 args[3] = { 0, 0, 0 };
	unsigned int i;
	int ret, idx;

	if (len >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = 0;
	s = strim(buf);
	word = strsep(&s, " \t");
	for (i = 0; i < ARRAY_SIZE(kinds); i++)
		if (!strcmp(word, kinds[i]))
			break;
	if (i == ARRAY_SIZE(kinds))
		return -EINVAL;
	args[0] = i;
	if (i == TX8_FAULT_SLOW || i == TX8_FAULT_STOP ||
	    i == TX8_FAULT_BAD_CAPS) {
		word = strsep(&s, " \t");
		if (!word || kstrtou64(word, 0, &args[1]))
			return -EINVAL;
	}
	word = strsep(&s, " \t");
	if (word && *word && kstrtou64(word, 0, &args[2]))
		return -EINVAL;

	if (!drm_dev_enter(&tdev->drm, &idx))
		return -ENODEV;
	ret = tx8_mbox(tdev, TX8_MBOX_INJECT_FAULT, args, 3, NULL, NULL);
	drm_dev_exit(idx);
	return ret ? ret : len;
}

static const struct file_operations tx8_inject_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = tx8_inject_write,
};

void tx8_debugfs_init(struct tx8_device *tdev)
{
	struct dentry *root = tdev->drm.debugfs_root;

	if (IS_ERR_OR_NULL(root))
		return;
	debugfs_create_file("bos", 0444, root, tdev, &tx8_bos_fops);
	debugfs_create_file("ring", 0444, root, tdev, &tx8_ring_fops);
	debugfs_create_file("counters", 0444, root, tdev, &tx8_counters_fops);
	debugfs_create_file("reset", 0200, root, tdev, &tx8_reset_fops);
	debugfs_create_file("inject_fault", 0200, root, tdev,
			    &tx8_inject_fops);
}
