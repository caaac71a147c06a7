// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator DRM accel driver: PCI binding, the DRM device, QUERY,
 * file open/close and fdinfo.
 *
 * The TX8 sits behind QEMU's ivshmem-doorbell PCI function (1af4:1110);
 * only functions whose BAR2 starts with the TX8 signature and a supported
 * interface version are taken. Design: docs/kernel.md; UAPI: docs/uapi.md.
 */

#include <linux/cred.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <drm/drm_accel.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include "tx8_drv.h"

/* every bound TX8, for /proc/tx_meminfo */
LIST_HEAD(tx8_devices);
DEFINE_MUTEX(tx8_devices_lock);	/* guards tx8_devices */

static int tx8_query_ioctl(struct drm_device *drm, void *data,
			   struct drm_file *file)
{
	struct tx8_device *tdev = to_tx8(drm);
	struct drm_tx8_query *args = data;
	union {
		struct drm_tx8_device_info info;
		struct drm_tx8_counters counters;
	} *ans;
	const struct tx8_caps *caps;
	u32 ksize, n;
	int ret = 0, idx;

	if (args->flags || args->pad)
		return -EINVAL;
	switch (args->query) {
	case DRM_TX8_QUERY_DEVICE:
		ksize = sizeof(struct drm_tx8_device_info);
		break;
	case DRM_TX8_QUERY_COUNTERS:
		ksize = sizeof(struct drm_tx8_counters);
		break;
	default:
		return -EINVAL;
	}
	if (!args->size) {
		args->size = ksize;
		return 0;
	}
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	ans = kzalloc(sizeof(*ans), GFP_KERNEL);
	if (!ans) {
		ret = -ENOMEM;
		goto out;
	}
	caps = &tdev->caps;	/* the validated snapshot */
	if (args->query == DRM_TX8_QUERY_DEVICE) {
		struct drm_tx8_device_info *i = &ans->info;

		i->if_version = tdev->if_version;
		i->driver_version = TX8_DRIVER_MAJOR << 16 | TX8_DRIVER_MINOR;
		i->mem_size = caps->mem_size;
		i->heap_offset = tdev->lease_base;
		i->heap_size = tdev->lease_size;
		mutex_lock(&tdev->mm_lock);
		i->heap_used = tdev->mem_used;
		mutex_unlock(&tdev->mm_lock);
		i->num_cores = caps->num_cores;
		i->dtypes = caps->dtypes;
		i->caps = caps->flags;
		i->max_bos = tdev->max_ranges;
		i->max_cmd_size = tdev->max_cmd_size;
		i->sparse_block = caps->sparse_block;
		i->max_topk = caps->max_topk;
		i->numa_node = caps->numa_node;
		i->core_clock_hz = caps->core_clock_hz;
		i->boot_id = READ_ONCE(tdev->ctrl->boot_id);
		i->job_timeout_ms = tx8_job_timeout_ms;
		i->sq_entries = TX8_SQ_ENTRIES;
		i->client_id = file->client_id;
		memcpy(i->name, caps->name, sizeof(i->name));
		i->name[sizeof(i->name) - 1] = 0;
	} else {
		struct drm_tx8_counters *c = &ans->counters;
		struct tx8_file *tfile = file->driver_priv;
		struct drm_gem_object *obj;
		int id;

		tx8_read_counters(tdev, c);
		c->client_jobs_completed = atomic64_read(&tfile->jobs_ok);
		c->client_jobs_failed = atomic64_read(&tfile->jobs_failed);
		c->client_busy_ns = tx8_file_busy_ns(tfile);
		spin_lock(&file->table_lock);
		idr_for_each_entry(&file->object_idr, obj, id)
			c->client_mem += obj->size;
		spin_unlock(&file->table_lock);
	}
	n = min(args->size, ksize);
	if (copy_to_user(u64_to_user_ptr(args->data), ans, n))
		ret = -EFAULT;
	else if (args->size > ksize &&
		 clear_user(u64_to_user_ptr(args->data + ksize),
			    args->size - ksize))
		ret = -EFAULT;
	args->size = ksize;
	kfree(ans);
out:
	drm_dev_exit(idx);
	return ret;
}

static const struct drm_ioctl_desc tx8_ioctls[] = {
	DRM_IOCTL_DEF_DRV(TX8_QUERY, tx8_query_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TX8_BO_CREATE, tx8_bo_create_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TX8_BO_INFO, tx8_bo_info_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TX8_SUBMIT, tx8_submit_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TX8_WAIT, tx8_wait_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TX8_BO_SET_LABEL, tx8_bo_set_label_ioctl,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TX8_RESET, tx8_reset_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(TX8_INJECT_FAULT, tx8_inject_fault_ioctl,
			  DRM_RENDER_ALLOW),
};

static int tx8_open(struct drm_device *drm, struct drm_file *file)
{
	struct tx8_file *tfile;
	int ret;

	tfile = kzalloc(sizeof(*tfile), GFP_KERNEL);
	if (!tfile)
		return -ENOMEM;
	kref_init(&tfile->ref);
	tfile->tdev = to_tx8(drm);
	tfile->client_id = file->client_id;
	tfile->uid = current_euid();
	spin_lock_init(&tfile->lock);
	xa_init(&tfile->jobs);
	INIT_LIST_HEAD(&tfile->history);
	ret = tx8_file_init(tfile);
	if (ret) {
		xa_destroy(&tfile->jobs);
		kfree(tfile);
		return ret;
	}
	file->driver_priv = tfile;
	return 0;
}

static void tx8_postclose(struct drm_device *drm, struct drm_file *file)
{
	struct tx8_file *tfile = file->driver_priv;

	tx8_file_release_jobs(tfile);
	file->driver_priv = NULL;
	tx8_file_put(tfile);
}

static void tx8_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	struct tx8_file *tfile = file->driver_priv;
	struct drm_gem_object *obj;
	u64 total = 0, busy;
	int id;

	/* finished jobs and the one running now */
	busy = tx8_file_busy_ns(tfile);

	spin_lock(&file->table_lock);
	idr_for_each_entry(&file->object_idr, obj, id)
		total += obj->size;
	spin_unlock(&file->table_lock);

	drm_printf(p, "drm-engine-compute:\t%llu ns\n", busy);
	/* device memory BOs are always resident */
	drm_printf(p, "drm-total-vram:\t%llu KiB\n", total >> 10);
	drm_printf(p, "drm-resident-vram:\t%llu KiB\n", total >> 10);
	/* driver-specific key (docs/kernel.md): the client's energy */
	drm_printf(p, "drm-energy-compute:\t%llu uJ\n",
		   tx8_file_energy_uj(tfile, busy));
}

static const struct file_operations tx8_fops = {
	.owner = THIS_MODULE,
	DRM_ACCEL_FOPS,
	.show_fdinfo = drm_show_fdinfo,
};

static const struct drm_driver tx8_drm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_COMPUTE_ACCEL | DRIVER_SYNCOBJ,
	.open = tx8_open,
	.postclose = tx8_postclose,
	.show_fdinfo = tx8_show_fdinfo,
	.gem_prime_import = tx8_gem_prime_import,
	.ioctls = tx8_ioctls,
	.num_ioctls = ARRAY_SIZE(tx8_ioctls),
	.fops = &tx8_fops,
	.name = TX8_DRIVER_NAME,
	.desc = TX8_DRIVER_DESC,
#ifdef TX8_HAVE_DRM_DRIVER_DATE
	.date = "20250101",
#endif
	.major = TX8_DRIVER_MAJOR,
	.minor = TX8_DRIVER_MINOR,
};

static void tx8_drm_release(struct drm_device *drm, void *arg)
{
	struct tx8_device *tdev = to_tx8(drm);

	/* all BOs are gone: the last file closed */
	if (drm_mm_initialized(&tdev->mm))
		drm_mm_takedown(&tdev->mm);
}

static int tx8_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct tx8_device *tdev;
	int ret;

	tdev = devm_drm_dev_alloc(&pdev->dev, &tx8_drm_driver,
				  struct tx8_device, drm);
	if (IS_ERR(tdev))
		return PTR_ERR(tdev);
	tdev->pdev = pdev;
	pci_set_drvdata(pdev, tdev);
	mutex_init(&tdev->mbox_lock);
	init_waitqueue_head(&tdev->mbox_wq);
	mutex_init(&tdev->mm_lock);
	init_rwsem(&tdev->restart_rwsem);
	INIT_LIST_HEAD(&tdev->bos);
	INIT_LIST_HEAD(&tdev->node);
	ret = tx8_jobs_init(tdev);
	if (ret)
		return ret;
	ret = drmm_add_action(&tdev->drm, tx8_drm_release, NULL);
	if (ret) {
		tx8_sched_release(tdev);
		return ret;
	}

	ret = tx8_hw_init(tdev);
	if (ret) {
		tx8_sched_release(tdev);
		return ret;
	}

	ret = drm_dev_register(&tdev->drm, 0);
	if (ret)
		goto err_hw;
	ret = devm_device_add_group(&pdev->dev, &tx8_sysfs_group);
	if (ret)
		goto err_unregister;
	ret = tx8_hwmon_init(tdev);
	if (ret)
		goto err_unregister;
	tx8_debugfs_init(tdev);
	tx8_health_start(tdev);

	mutex_lock(&tx8_devices_lock);
	list_add_tail(&tdev->node, &tx8_devices);
	mutex_unlock(&tx8_devices_lock);
	return 0;

err_unregister:
	drm_dev_unregister(&tdev->drm);
err_hw:
	tx8_jobs_fini(tdev);
	tx8_hw_fini(tdev);
	return ret;
}

static void tx8_remove(struct pci_dev *pdev)
{
	struct tx8_device *tdev = pci_get_drvdata(pdev);

	mutex_lock(&tx8_devices_lock);
	list_del_init(&tdev->node);
	mutex_unlock(&tx8_devices_lock);

	/* From here on every call of an open file fails with -ENODEV. */
	drm_dev_unplug(&tdev->drm);
	tx8_health_stop(tdev);
	tx8_gem_unmap_all(tdev);
	tx8_jobs_fini(tdev);
	tx8_hw_fini(tdev);
}

static const struct pci_device_id tx8_pci_ids[] = {
	{ PCI_DEVICE(TX8_PCI_VENDOR_ID, TX8_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, tx8_pci_ids);

static struct pci_driver tx8_pci_driver = {
	.name = TX8_DRIVER_NAME,
	.id_table = tx8_pci_ids,
	.probe = tx8_probe,
	.remove = tx8_remove,
};

static int __init tx8_init(void)
{
	int ret;

	ret = tx8_proc_init();
	if (ret)
		return ret;
	ret = pci_register_driver(&tx8_pci_driver);
	if (ret)
		tx8_proc_fini();
	return ret;
}

static void __exit tx8_exit(void)
{
	pci_unregister_driver(&tx8_pci_driver);
	tx8_proc_fini();
	tx8_sched_exit();
}

module_init(tx8_init);
module_exit(tx8_exit);

MODULE_AUTHOR("TX8 project");
MODULE_DESCRIPTION(TX8_DRIVER_DESC);
MODULE_LICENSE("GPL");
MODULE_VERSION("1.0");
