// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator: the hardware side. BAR mapping, identity checks, the
 * queue the device assigned to this ivshmem peer, the mailbox, interrupts
 * and the device-memory lease. See include/tx8/tx8_hw.h.
 *
 * BAR2 of QEMU's ivshmem device is ordinary host RAM shared with the
 * device process (tx8-emu), cache coherent with the guest CPUs, so it is
 * mapped write-back; ordering against the device uses CPU barriers.
 */

#include <linux/delay.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/string.h>

#include <drm/drm_print.h>

#include "tx8_drv.h"

static unsigned int tx8_mem_mb;
module_param_named(mem_mb, tx8_mem_mb, uint, 0444);
MODULE_PARM_DESC(mem_mb,
		 "MiB of device memory to lease at probe (0 = all that is free)");

void tx8_ring_doorbell(struct tx8_device *tdev, u32 vector)
{
	iowrite32((TX8_DEVICE_PEER << 16) | vector,
		  tdev->regs + TX8_BAR0_DOORBELL);
}

int tx8_mbox(struct tx8_device *tdev, u32 cmd, const u64 *args,
	     unsigned int nargs, const char *label, u64 *ret0)
{
	struct tx8_queue *q = tdev->q;
	unsigned long deadline;
	bool timed_out = false;
	u32 seq;
	s32 status;
	unsigned int i;
	int ret = 0;

	mutex_lock(&tdev->mbox_lock);
	if (READ_ONCE(tdev->lost)) {
		ret = -EIO;
		goto out;
	}
	WRITE_ONCE(q->mbox_cmd, cmd);
	for (i = 0; i < ARRAY_SIZE(q->mbox_arg); i++)
		WRITE_ONCE(q->mbox_arg[i], i < nargs ? args[i] : 0);
	memset(q->mbox_label, 0, sizeof(q->mbox_label));
	if (label)
		strscpy(q->mbox_label, label, sizeof(q->mbox_label));
	seq = READ_ONCE(q->mbox_req_seq) + 1;
	/* arguments before the request */
	wmb();
	WRITE_ONCE(q->mbox_req_seq, seq);
	tx8_ring_doorbell(tdev, TX8_DEV_VEC_MBOX);

	/*
	 * The device rings TX8_HOST_VEC_MBOX when it answers; poll as well so
	 * that a lost interrupt costs only a few milliseconds.
	 */
	deadline = jiffies + msecs_to_jiffies(TX8_MBOX_TIMEOUT_MS);
	while (READ_ONCE(q->mbox_ack_seq) != seq) {
		if (time_after(jiffies, deadline)) {
			drm_err(&tdev->drm,
				"mailbox command %u: no answer in %u ms, device lost\n",
				cmd, TX8_MBOX_TIMEOUT_MS);
			timed_out = true;
			ret = -EIO;
			goto out;
		}
		wait_event_timeout(tdev->mbox_wq,
				   READ_ONCE(q->mbox_ack_seq) == seq,
				   msecs_to_jiffies(10));
	}
	/* read the answer only after seeing the ack */
	rmb();
	status = READ_ONCE(q->mbox_status);
	if (ret0)
		*ret0 = READ_ONCE(q->mbox_ret[0]);
	if (status > 0 || status < -MAX_ERRNO)
		ret = -EIO;
	else
		ret = status;
out:
	mutex_unlock(&tdev->mbox_lock);
	if (timed_out)
		tx8_device_lost(tdev, "mailbox timeout");
	return ret;
}

/*
 * Device health, every TX8_HEALTH_PERIOD_MS: a changed boot_id (or a lost
 * signature) means the device restarted: its queues and leases are gone,
 * so our memory may be another peer's now; the device is lost and every
 * mapping of its memory zapped. A heartbeat that stops for
 * TX8_HEARTBEAT_TIMEOUT_MS means the device died or hangs: lost.
 */
static void tx8_health_work(struct work_struct *work)
{
	struct tx8_device *tdev = container_of(to_delayed_work(work),
					       struct tx8_device, health_work);
	u64 hb = READ_ONCE(tdev->ctrl->heartbeat);
	u64 boot_id = READ_ONCE(tdev->ctrl->boot_id);
	u32 sig = READ_ONCE(tdev->ctrl->signature);

	if (sig != TX8_SIGNATURE || boot_id != tdev->boot_id) {
		drm_err(&tdev->drm,
			"device restarted (boot_id %#llx, was %#llx): its memory is no longer ours\n",
			boot_id, tdev->boot_id);
		/* a fault that saw ->restarted clear has inserted its PTE */
		down_write(&tdev->restart_rwsem);
		WRITE_ONCE(tdev->restarted, true);
		up_write(&tdev->restart_rwsem);
		tx8_gem_unmap_all(tdev);
		tx8_device_lost(tdev, "device restarted");
		return;
	}
	if (hb != tdev->heartbeat_seen) {
		tdev->heartbeat_seen = hb;
		tdev->heartbeat_jiffies = jiffies;
	} else if (!READ_ONCE(tdev->lost) &&
		   time_after(jiffies, tdev->heartbeat_jiffies +
			      msecs_to_jiffies(TX8_HEARTBEAT_TIMEOUT_MS))) {
		drm_err(&tdev->drm, "device heartbeat stopped for %u ms\n",
			TX8_HEARTBEAT_TIMEOUT_MS);
		tx8_device_lost(tdev, "heartbeat stopped");
	}
	queue_delayed_work(system_wq, &tdev->health_work,
			   msecs_to_jiffies(TX8_HEALTH_PERIOD_MS));
}

void tx8_health_start(struct tx8_device *tdev)
{
	tdev->heartbeat_seen = READ_ONCE(tdev->ctrl->heartbeat);
	tdev->heartbeat_jiffies = jiffies;
	queue_delayed_work(system_wq, &tdev->health_work,
			   msecs_to_jiffies(TX8_HEALTH_PERIOD_MS));
}

/* Before the BAR is unmapped; the work does not queue itself again after. */
void tx8_health_stop(struct tx8_device *tdev)
{
	disable_delayed_work_sync(&tdev->health_work);
}

void tx8_read_counters(struct tx8_device *tdev, struct drm_tx8_counters *c)
{
	const struct tx8_counters *d = &tdev->ctrl->counters;
	unsigned int i, cores;

	memset(c, 0, sizeof(*c));
	c->clock_ns = READ_ONCE(tdev->ctrl->clock_ns);
	c->jobs_submitted = READ_ONCE(d->jobs_submitted);
	c->jobs_completed = READ_ONCE(d->jobs_completed);
	c->jobs_failed = READ_ONCE(d->jobs_failed);
	c->commands = READ_ONCE(d->commands);
	c->faults = READ_ONCE(d->faults);
	c->resets = READ_ONCE(d->resets);
	c->busy_ns = READ_ONCE(d->busy_ns);
	c->bytes_read = READ_ONCE(d->bytes_read);
	c->bytes_written = READ_ONCE(d->bytes_written);
	for (i = 0; i < TX8_DTYPE_COUNT && i < DRM_TX8_MAX_DTYPES; i++)
		c->macs[i] = READ_ONCE(d->macs[i]);
	c->macs_skipped = READ_ONCE(d->macs_skipped);
	c->expert_cache_hits = READ_ONCE(d->expert_cache_hits);
	c->expert_cache_misses = READ_ONCE(d->expert_cache_misses);
	c->page_faults = atomic64_read(&tdev->page_faults);
	c->driver_resets = atomic64_read(&tdev->resets);
	c->driver_timeouts = atomic64_read(&tdev->timeouts);
	cores = min_t(u32, tdev->caps.num_cores,
		      min(TX8_MAX_CORES, DRM_TX8_MAX_CORES));
	c->num_cores = cores;
	for (i = 0; i < cores; i++)
		c->core_busy_ns[i] = READ_ONCE(d->core_busy_ns[i]);
	c->heartbeat = READ_ONCE(tdev->ctrl->heartbeat);
	c->state = READ_ONCE(tdev->ctrl->state);
	c->queue_state = READ_ONCE(tdev->q->state);
	c->queue_jobs_completed = READ_ONCE(tdev->q->jobs_completed);
	c->queue_jobs_failed = READ_ONCE(tdev->q->jobs_failed);
	c->queue_busy_ns = READ_ONCE(tdev->q->busy_ns);
	c->queue_bytes_leased = READ_ONCE(tdev->q->bytes_leased);
	c->queue_completed_seqno = READ_ONCE(tdev->q->completed_seqno);
}

/* ------------------------------------------------------------------------ */
/* Interrupts                                                               */

/*
 * Hard IRQ half of the completion vector: normally only wakes the thread;
 * with the test knob fault_file_lock_delay_us it harvests the records.
 */
static irqreturn_t tx8_irq_completion_hard(int irq, void *arg)
{
	struct tx8_device *tdev = arg;

	tx8_process_completions_hardirq(tdev);
	return IRQ_WAKE_THREAD;
}

static irqreturn_t tx8_irq_completion(int irq, void *arg)
{
	struct tx8_device *tdev = arg;

	tx8_process_completions(tdev);
	return IRQ_HANDLED;
}

static irqreturn_t tx8_irq_mbox(int irq, void *arg)
{
	struct tx8_device *tdev = arg;

	wake_up_all(&tdev->mbox_wq);
	return IRQ_HANDLED;
}

static irqreturn_t tx8_irq_event(int irq, void *arg)
{
	struct tx8_device *tdev = arg;
	u32 state = READ_ONCE(tdev->q->state);

	if (state != TX8_QUEUE_ACTIVE)
		dev_warn_ratelimited(tdev->drm.dev, "device event: queue %u state %u\n",
				     tdev->qid, state);
	tx8_process_completions(tdev);
	wake_up_all(&tdev->mbox_wq);
	return IRQ_HANDLED;
}

static int tx8_irq_init(struct tx8_device *tdev)
{
	struct pci_dev *pdev = tdev->pdev;
	int nvec, ret, i;

	nvec = pci_alloc_irq_vectors(pdev, TX8_HOST_VEC_EVENT + 1,
				     TX8_NUM_VECTORS, PCI_IRQ_MSIX);
	if (nvec < 0) {
		drm_err(&tdev->drm,
			"MSI-X with %u vectors needed (vectors=4): %d\n",
			TX8_NUM_VECTORS, nvec);
		return nvec;
	}
	tdev->num_irqs = 0;
	for (i = 0; i <= TX8_HOST_VEC_EVENT; i++) {
		int irq = pci_irq_vector(pdev, i);

		if (i == TX8_HOST_VEC_MBOX)
			ret = request_irq(irq, tx8_irq_mbox, 0, "tx8-mbox", tdev);
		else
			ret = request_threaded_irq(irq,
						   i == TX8_HOST_VEC_COMPLETION ?
						   tx8_irq_completion_hard : NULL,
						   i == TX8_HOST_VEC_COMPLETION ?
						   tx8_irq_completion :
						   tx8_irq_event,
						   IRQF_ONESHOT,
						   i == TX8_HOST_VEC_COMPLETION ?
						   "tx8-completion" : "tx8-event",
						   tdev);
		if (ret) {
			drm_err(&tdev->drm, "irq %d: %d\n", irq, ret);
			goto err;
		}
		tdev->irqs[i] = irq;
		tdev->num_irqs = i + 1;
	}
	return 0;
err:
	while (tdev->num_irqs)
		free_irq(tdev->irqs[--tdev->num_irqs], tdev);
	pci_free_irq_vectors(pdev);
	return ret;
}

static void tx8_irq_fini(struct tx8_device *tdev)
{
	while (tdev->num_irqs)
		free_irq(tdev->irqs[--tdev->num_irqs], tdev);
	pci_free_irq_vectors(tdev->pdev);
}

/* ------------------------------------------------------------------------ */
/* Identity, queue and memory                                               */

/* Largest command buffer the driver accepts, whatever the device says. */
#define TX8_MAX_CMD_SIZE_LIMIT	(64u << 20)

/*
 * Copy the capabilities out of shared memory (the device may change them
 * at any time) and check the copy: every size and offset against the BAR
 * length the PCI core reports, with overflow-checked sums.
 */
static int tx8_check_caps(struct tx8_device *tdev)
{
	struct tx8_caps *caps = &tdev->caps;
	u64 heap_end;

	memcpy(caps, (const void *)&tdev->ctrl->caps, sizeof(*caps));
	caps->name[sizeof(caps->name) - 1] = 0;
	if (caps->mem_size > tdev->mem_len ||
	    caps->mem_size < TX8_CTRL_SIZE + TX8_PAGE_SIZE ||
	    caps->heap_offset < TX8_CTRL_SIZE ||
	    caps->heap_offset % TX8_PAGE_SIZE ||
	    check_add_overflow(caps->heap_offset, caps->heap_size, &heap_end) ||
	    heap_end > caps->mem_size || caps->heap_size < TX8_PAGE_SIZE)
		return -EINVAL;
	if (!caps->max_queues || caps->max_queues > TX8_MAX_QUEUES ||
	    caps->sq_entries != TX8_SQ_ENTRIES ||
	    caps->cq_entries != TX8_CQ_ENTRIES ||
	    !caps->max_ranges || caps->max_ranges > TX8_JOB_MAX_RANGES ||
	    !caps->num_cores || caps->num_cores > TX8_MAX_CORES)
		return -EINVAL;
	/* the descriptor's cmd_size is 32 bits; and keep it sane */
	if (caps->max_cmd_size < 8 || caps->max_cmd_size % 8 ||
	    caps->max_cmd_size > TX8_MAX_CMD_SIZE_LIMIT)
		return -EINVAL;
	return 0;
}

static int tx8_check_ctrl(struct tx8_device *tdev)
{
	const struct tx8_ctrl *c = tdev->ctrl;
	u32 sig = READ_ONCE(c->signature);
	u32 ver = READ_ONCE(c->if_version);

	if (sig != TX8_SIGNATURE) {
		dev_info(&tdev->pdev->dev,
			 "ivshmem device without TX8 signature (%#x), not ours\n",
			 sig);
		return -ENODEV;
	}
	if (TX8_IF_MAJOR(ver) != TX8_IF_VERSION_MAJOR) {
		dev_info(&tdev->pdev->dev,
			 "TX8 interface %u.%u not supported (need %u.x)\n",
			 TX8_IF_MAJOR(ver), TX8_IF_MINOR(ver),
			 TX8_IF_VERSION_MAJOR);
		return -ENODEV;
	}
	if (READ_ONCE(c->ctrl_size) != TX8_CTRL_SIZE || tx8_check_caps(tdev)) {
		dev_err(&tdev->pdev->dev,
			"TX8 control block inconsistent (capabilities out of range for a %llu MiB BAR), not used\n",
			(u64)tdev->mem_len >> 20);
		return -ENODEV;
	}
	tdev->max_ranges = tdev->caps.max_ranges;
	tdev->max_cmd_size = tdev->caps.max_cmd_size;
	tdev->if_version = ver;
	tdev->boot_id = READ_ONCE(c->boot_id);
	return 0;
}

static int tx8_find_queue(struct tx8_device *tdev)
{
	unsigned long deadline = jiffies + 2 * HZ;
	unsigned int i, n = tdev->caps.max_queues;	/* validated copy */

	do {
		for (i = 0; i < n; i++) {
			struct tx8_queue *q = tdev->mem + TX8_QUEUE_OFFSET(i);

			if (READ_ONCE(q->owner_peer) == tdev->peer &&
			    READ_ONCE(q->state) != TX8_QUEUE_FREE) {
				if (READ_ONCE(q->sq_offset) != TX8_SQ_OFFSET(i) ||
				    READ_ONCE(q->cq_offset) != TX8_CQ_OFFSET(i)) {
					drm_err(&tdev->drm, "queue %u: bad ring offsets\n", i);
					return -ENODEV;
				}
				tdev->qid = i;
				tdev->q = q;
				tdev->sq = tdev->mem + TX8_SQ_OFFSET(i);
				tdev->cq = tdev->mem + TX8_CQ_OFFSET(i);
				if (TX8_IF_MINOR(tdev->if_version) >= 9)
					tdev->cqx = tdev->mem +
						    TX8_CQX_OFFSET(i);
				return 0;
			}
		}
		msleep(20);
	} while (time_before(jiffies, deadline));
	drm_err(&tdev->drm, "the device assigned no queue to peer %d\n",
		tdev->peer);
	return -ENODEV;
}

static void tx8_release_stale_leases(struct tx8_device *tdev)
{
	struct tx8_lease *table = tdev->mem + TX8_LEASE_TABLE_OFFSET;
	unsigned int i;

	for (i = 0; i < TX8_MAX_LEASES; i++) {
		u64 base = READ_ONCE(table[i].base);

		if (!base || READ_ONCE(table[i].owner_peer) != tdev->peer)
			continue;
		drm_info(&tdev->drm, "releasing stale lease at %#llx\n", base);
		tx8_mbox(tdev, TX8_MBOX_RELEASE, &base, 1, NULL, NULL);
	}
}

static int tx8_lease_memory(struct tx8_device *tdev)
{
	const struct tx8_caps *caps = &tdev->caps;
	u64 end;
	u64 free = caps->heap_size - min(caps->heap_size,
					 READ_ONCE(tdev->ctrl->heap_used));
	u64 size = free, args[2], base = 0;
	int ret = -ENOMEM;

	if (tx8_mem_mb)
		size = min_t(u64, size, (u64)tx8_mem_mb << 20);
	size = round_down(size, TX8_PAGE_SIZE);
	while (size >= (1ull << 20)) {
		args[0] = size;
		args[1] = 0;
		ret = tx8_mbox(tdev, TX8_MBOX_LEASE, args, 2, TX8_LEASE_LABEL,
			       &base);
		if (!ret)
			break;
		if (ret == -EIO)
			return ret;
		/* fragmented or taken meanwhile: ask for less */
		size = round_down(size / 2, TX8_PAGE_SIZE);
	}
	if (ret) {
		drm_err(&tdev->drm, "no device memory could be leased: %d\n", ret);
		return ret;
	}
	/* the device's answer: inside the heap and the BAR, no wrap */
	if (base < caps->heap_offset || base % TX8_PAGE_SIZE ||
	    check_add_overflow(base, size, &end) ||
	    end > caps->heap_offset + caps->heap_size || end > tdev->mem_len) {
		drm_err(&tdev->drm, "device leased a bad range %#llx+%#llx\n",
			base, size);
		return -EIO;
	}
	tdev->lease_base = base;
	tdev->lease_size = size;
	return 0;
}

int tx8_hw_init(struct tx8_device *tdev)
{
	struct pci_dev *pdev = tdev->pdev;
	u64 aborted;
	int ret;

	ret = pci_enable_device(pdev);
	if (ret)
		return ret;
	/* MSI-X messages are bus-master writes: without this none arrive */
	pci_set_master(pdev);
	ret = pci_request_regions(pdev, TX8_DRIVER_NAME);
	if (ret)
		goto err_disable;
	tdev->regs = pci_iomap(pdev, 0, 0);
	if (!tdev->regs) {
		ret = -ENOMEM;
		goto err_regions;
	}
	tdev->mem_phys = pci_resource_start(pdev, 2);
	tdev->mem_len = pci_resource_len(pdev, 2);
	if (tdev->mem_len < TX8_CTRL_SIZE + TX8_PAGE_SIZE) {
		ret = -ENODEV;
		goto err_unmap_regs;
	}
	tdev->mem = memremap(tdev->mem_phys, tdev->mem_len, MEMREMAP_WB);
	if (!tdev->mem) {
		ret = -ENOMEM;
		goto err_unmap_regs;
	}
	tdev->ctrl = tdev->mem;
	INIT_DELAYED_WORK(&tdev->health_work, tx8_health_work);
	ret = tx8_check_ctrl(tdev);
	if (ret)
		goto err_unmap_mem;

	tdev->peer = ioread32(tdev->regs + TX8_BAR0_IV_POSITION);
	ret = tx8_find_queue(tdev);
	if (ret)
		goto err_unmap_mem;
	ret = tx8_irq_init(tdev);
	if (ret)
		goto err_unmap_mem;

	/* A clean queue, whatever an earlier driver instance left behind. */
	ret = tx8_mbox(tdev, TX8_MBOX_RESET_QUEUE, NULL, 0, NULL, &aborted);
	if (ret) {
		drm_err(&tdev->drm, "queue reset failed: %d\n", ret);
		goto err_irq;
	}
	tdev->sq_tail = 0;
	tdev->cq_head = 0;
	WRITE_ONCE(tdev->q->sq_tail, 0);
	WRITE_ONCE(tdev->q->cq_head, 0);
	tx8_release_stale_leases(tdev);
	ret = tx8_lease_memory(tdev);
	if (ret)
		goto err_irq;
	drm_mm_init(&tdev->mm, tdev->lease_base, tdev->lease_size);

	drm_info(&tdev->drm,
		 "%.32s: interface %u.%u, %llu MiB memory (%llu MiB leased at %#llx), %u cores, peer %d, queue %u\n",
		 tdev->caps.name, TX8_IF_MAJOR(tdev->if_version),
		 TX8_IF_MINOR(tdev->if_version),
		 tdev->caps.mem_size >> 20, tdev->lease_size >> 20,
		 tdev->lease_base, tdev->caps.num_cores, tdev->peer,
		 tdev->qid);
	return 0;

err_irq:
	tx8_irq_fini(tdev);
err_unmap_mem:
	memunmap(tdev->mem);
	tdev->mem = NULL;
err_unmap_regs:
	pci_iounmap(pdev, tdev->regs);
	tdev->regs = NULL;
err_regions:
	pci_release_regions(pdev);
err_disable:
	pci_clear_master(pdev);
	pci_disable_device(pdev);
	return ret;
}

/*
 * Called at remove, after the jobs were stopped: give the memory back and
 * let go of the PCI function. The drm_mm stays (BOs of open files are
 * still in it) and is taken down when the drm device is released.
 */
void tx8_hw_fini(struct tx8_device *tdev)
{
	struct pci_dev *pdev = tdev->pdev;
	u64 base = tdev->lease_base;

	if (base && !tdev->lost)
		tx8_mbox(tdev, TX8_MBOX_RELEASE, &base, 1, NULL, NULL);
	tx8_irq_fini(tdev);
	memunmap(tdev->mem);
	tdev->mem = NULL;
	pci_iounmap(pdev, tdev->regs);
	tdev->regs = NULL;
	pci_release_regions(pdev);
	pci_clear_master(pdev);
	pci_disable_device(pdev);
}
