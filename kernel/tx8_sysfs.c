// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator: sysfs, one value per file, in the "tx8" group of the
 * PCI device (/sys/class/accel/accelN/device/tx8/).
 */

#include <linux/capability.h>
#include <linux/device.h>
#include <linux/kstrtox.h>
#include <linux/sysfs.h>

#include <drm/drm_drv.h>

#include "tx8_drv.h"

enum tx8_attr {
	TX8_A_BUSY_NS,
	TX8_A_MEM_TOTAL,
	TX8_A_MEM_USED,
	TX8_A_JOBS,
	TX8_A_RESETS,
	TX8_A_TIMEOUTS,
	TX8_A_CORES,
	TX8_A_PAGE_FAULTS,
	TX8_A_CACHE_MISSES,
};

static ssize_t tx8_attr_show(struct device *dev, enum tx8_attr a, char *buf)
{
	struct tx8_device *tdev = pci_get_drvdata(to_pci_dev(dev));
	u64 v = 0;
	int idx;

	if (!tdev || !drm_dev_enter(&tdev->drm, &idx))
		return -ENODEV;
	switch (a) {
	case TX8_A_BUSY_NS:
		v = READ_ONCE(tdev->ctrl->counters.busy_ns);
		break;
	case TX8_A_MEM_TOTAL:
		v = tdev->lease_size;
		break;
	case TX8_A_MEM_USED:
		mutex_lock(&tdev->mm_lock);
		v = tdev->mem_used;
		mutex_unlock(&tdev->mm_lock);
		break;
	case TX8_A_JOBS:
		v = atomic64_read(&tdev->jobs);
		break;
	case TX8_A_RESETS:
		v = atomic64_read(&tdev->resets);
		break;
	case TX8_A_TIMEOUTS:
		v = atomic64_read(&tdev->timeouts);
		break;
	case TX8_A_CORES:
		v = tdev->caps.num_cores;
		break;
	case TX8_A_PAGE_FAULTS:
		v = atomic64_read(&tdev->page_faults);
		break;
	case TX8_A_CACHE_MISSES:
		v = READ_ONCE(tdev->ctrl->counters.expert_cache_misses);
		break;
	}
	drm_dev_exit(idx);
	return sysfs_emit(buf, "%llu\n", v);
}

#define TX8_ATTR(name, id)						\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	return tx8_attr_show(dev, id, buf);				\
}									\
static DEVICE_ATTR_RO(name)

TX8_ATTR(busy_ns, TX8_A_BUSY_NS);
TX8_ATTR(mem_total, TX8_A_MEM_TOTAL);
TX8_ATTR(mem_used, TX8_A_MEM_USED);
TX8_ATTR(jobs, TX8_A_JOBS);
TX8_ATTR(resets, TX8_A_RESETS);
TX8_ATTR(timeouts, TX8_A_TIMEOUTS);
TX8_ATTR(cores, TX8_A_CORES);
TX8_ATTR(page_faults, TX8_A_PAGE_FAULTS);
TX8_ATTR(cache_misses, TX8_A_CACHE_MISSES);

/*
 * reset (write only, CAP_SYS_ADMIN): a device-wide queue reset; the
 * running job fails with ABORTED, the others run again. A client resets
 * only its own jobs (DRM_IOCTL_TX8_RESET).
 */
static ssize_t reset_store(struct device *dev, struct device_attribute *attr,
			   const char *buf, size_t count)
{
	struct tx8_device *tdev = pci_get_drvdata(to_pci_dev(dev));
	bool yes;
	int ret, idx;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (kstrtobool(buf, &yes) || !yes)
		return -EINVAL;
	if (!tdev || !drm_dev_enter(&tdev->drm, &idx))
		return -ENODEV;
	ret = tx8_reset(tdev, "sysfs");
	drm_dev_exit(idx);
	return ret ? ret : count;
}
static DEVICE_ATTR_WO(reset);

static struct attribute *tx8_attrs[] = {
	&dev_attr_reset.attr,
	&dev_attr_busy_ns.attr,
	&dev_attr_mem_total.attr,
	&dev_attr_mem_used.attr,
	&dev_attr_jobs.attr,
	&dev_attr_resets.attr,
	&dev_attr_timeouts.attr,
	&dev_attr_cores.attr,
	&dev_attr_page_faults.attr,
	&dev_attr_cache_misses.attr,
	NULL,
};

const struct attribute_group tx8_sysfs_group = {
	.name = "tx8",
	.attrs = tx8_attrs,
};
