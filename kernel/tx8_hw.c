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
	u32 seq;
	s32 status;
	unsigned int i;
	int ret = 0;

	mutex_lock(&tdev->mbox_lock);
	if (tdev->lost) {
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
			tdev->lost = true;
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
	return ret;
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
	cores = min_t(u32, READ_ONCE(tdev->ctrl->caps.num_cores),
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
			ret = request_threaded_irq(irq, NULL,
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

static int tx8_check_ctrl(struct tx8_device *tdev)
{
	const struct tx8_ctrl *c = tdev->ctrl;
	const struct tx8_caps *caps = &c->caps;
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
	if (READ_ONCE(c->ctrl_size) != TX8_CTRL_SIZE ||
	    caps->mem_size > tdev->mem_len ||
	    caps->heap_offset < TX8_CTRL_SIZE ||
	    caps->heap_offset + caps->heap_size > caps->mem_size ||
	    caps->heap_offset + caps->heap_size < caps->heap_offset ||
	    !caps->max_queues || caps->max_queues > TX8_MAX_QUEUES ||
	    caps->sq_entries != TX8_SQ_ENTRIES ||
	    caps->cq_entries != TX8_CQ_ENTRIES ||
	    !caps->max_ranges || caps->max_ranges > TX8_JOB_MAX_RANGES) {
		dev_err(&tdev->pdev->dev, "TX8 control block inconsistent\n");
		return -ENODEV;
	}
	tdev->max_ranges = caps->max_ranges;
	tdev->max_cmd_size = caps->max_cmd_size;
	return 0;
}

static int tx8_find_queue(struct tx8_device *tdev)
{
	unsigned long deadline = jiffies + 2 * HZ;
	unsigned int i, n = tdev->ctrl->caps.max_queues;

	do {
		for (i = 0; i < n; i++) {
			struct tx8_queue *q = tdev->mem + TX8_QUEUE_OFFSET(i);

			if (READ_ONCE(q->owner_peer) == tdev->peer &&
			    READ_ONCE(q->state) != TX8_QUEUE_FREE) {
				if (q->sq_offset != TX8_SQ_OFFSET(i) ||
				    q->cq_offset != TX8_CQ_OFFSET(i)) {
					drm_err(&tdev->drm, "queue %u: bad ring offsets\n", i);
					return -ENODEV;
				}
				tdev->qid = i;
				tdev->q = q;
				tdev->sq = tdev->mem + TX8_SQ_OFFSET(i);
				tdev->cq = tdev->mem + TX8_CQ_OFFSET(i);
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
	const struct tx8_caps *caps = &tdev->ctrl->caps;
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
	if (base < caps->heap_offset || base + size > caps->mem_size ||
	    base % TX8_PAGE_SIZE) {
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
		 tdev->ctrl->caps.name, TX8_IF_MAJOR(tdev->ctrl->if_version),
		 TX8_IF_MINOR(tdev->ctrl->if_version),
		 tdev->ctrl->caps.mem_size >> 20, tdev->lease_size >> 20,
		 tdev->lease_base, tdev->ctrl->caps.num_cores, tdev->peer,
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
