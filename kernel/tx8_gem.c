// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator: buffer objects. A BO is a page-aligned range of the
 * leased device memory, allocated with drm_mm. Mapping it into a process
 * maps the BAR2 pages themselves (one page per fault, counted): the
 * process reads and writes device memory with no copy in between.
 */

#include <linux/ctype.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/string.h>

#include <drm/drm_drv.h>
#include <drm/drm_print.h>
#include <drm/drm_vma_manager.h>

#include "tx8_drv.h"

static void tx8_gem_free(struct drm_gem_object *obj)
{
	struct tx8_bo *bo = to_tx8_bo(obj);
	struct tx8_device *tdev = to_tx8(obj->dev);

	mutex_lock(&tdev->mm_lock);
	if (drm_mm_node_allocated(&bo->node)) {
		drm_mm_remove_node(&bo->node);
		tdev->mem_used -= obj->size;
	}
	list_del(&bo->dev_node);
	mutex_unlock(&tdev->mm_lock);

	/* jobs hold their BOs: a BO being freed has no job running */
	if (bo->last_job)
		dma_fence_put(&bo->last_job->fence);
	drm_gem_object_release(obj);
	kfree(bo);
}

static vm_fault_t tx8_gem_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct drm_gem_object *obj = vma->vm_private_data;
	struct tx8_bo *bo = to_tx8_bo(obj);
	struct tx8_device *tdev = to_tx8(obj->dev);
	unsigned long pgoff;
	vm_fault_t ret;
	int idx;

	/*
	 * The page of the BO: vmf->pgoff counts from the fake offset of the
	 * BO (vm_pgoff moves with the start of a mapping split by munmap or
	 * mprotect), not from where this VMA happens to start.
	 */
	pgoff = vmf->pgoff - drm_vma_node_start(&obj->vma_node);
	if (!drm_dev_enter(obj->dev, &idx))
		return VM_FAULT_SIGBUS;
	/*
	 * A restarted device's memory is no longer ours. The check and the
	 * insert are one read section of restart_rwsem: the restart's zap
	 * comes after any PTE inserted on a stale check.
	 */
	down_read(&tdev->restart_rwsem);
	if (vmf->pgoff < drm_vma_node_start(&obj->vma_node) ||
	    pgoff >= obj->size >> PAGE_SHIFT || !tdev->mem ||
	    READ_ONCE(tdev->restarted)) {
		ret = VM_FAULT_SIGBUS;
		goto out;
	}
	tx8_fault_restart_delay();
	ret = vmf_insert_pfn(vma, vmf->address,
			     ((u64)tdev->mem_phys + bo->node.start) /
			     PAGE_SIZE + pgoff);
	if (ret == VM_FAULT_NOPAGE) {
		atomic64_inc(&tdev->page_faults);
		atomic64_inc(&bo->faults);
	}
out:
	up_read(&tdev->restart_rwsem);
	drm_dev_exit(idx);
	return ret;
}

static const struct vm_operations_struct tx8_gem_vm_ops = {
	.fault = tx8_gem_fault,
	.open = drm_gem_vm_open,
	.close = drm_gem_vm_close,
};

static int tx8_gem_mmap(struct drm_gem_object *obj, struct vm_area_struct *vma)
{
	/*
	 * The BAR pages have no struct page: a copy-on-write (MAP_PRIVATE)
	 * mapping of them is impossible (vmf_insert_pfn() would BUG).
	 */
	if (is_cow_mapping(vma->vm_flags))
		return -EINVAL;
	/* never copied on fork */
	vm_flags_set(vma, VM_PFNMAP | VM_IO | VM_DONTEXPAND | VM_DONTDUMP |
		     VM_DONTCOPY);
	vma->vm_page_prot = vm_get_page_prot(vma->vm_flags);
	return 0;
}

static enum drm_gem_object_status tx8_gem_status(struct drm_gem_object *obj)
{
	return DRM_GEM_OBJECT_RESIDENT;
}

static struct dma_buf *tx8_gem_export(struct drm_gem_object *obj, int flags)
{
	/* Sharing device memory between processes is not supported. */
	return ERR_PTR(-EOPNOTSUPP);
}

struct drm_gem_object *tx8_gem_prime_import(struct drm_device *drm,
					    struct dma_buf *buf)
{
	return ERR_PTR(-EOPNOTSUPP);
}

/*
 * A handle of the BO in a file: only in the file that created it. BOs are
 * not shareable (docs/uapi.md): DRM core's GEM_FLINK gives a BO a global
 * name that any client of the device could GEM_OPEN, bypassing the label
 * and isolation rules; that GEM_OPEN ends here with -EACCES.
 */
static int tx8_gem_open(struct drm_gem_object *obj, struct drm_file *file)
{
	struct tx8_bo *bo = to_tx8_bo(obj);

	/* the first handle is the creator's (BO_CREATE) */
	if (!bo->owner_client) {
		bo->owner_client = file->client_id;
		return 0;
	}
	return bo->owner_client == file->client_id ? 0 : -EACCES;
}

static const struct drm_gem_object_funcs tx8_gem_funcs = {
	.free = tx8_gem_free,
	.open = tx8_gem_open,
	.mmap = tx8_gem_mmap,
	.export = tx8_gem_export,
	.status = tx8_gem_status,
	.vm_ops = &tx8_gem_vm_ops,
};

/* Labels: printable ASCII, NUL terminated, zero padded. */
static int tx8_check_label(const char *label)
{
	unsigned int i;

	for (i = 0; i < DRM_TX8_LABEL_LEN; i++) {
		if (!label[i])
			break;
		if (label[i] < ' ' || label[i] > '~')
			return -EINVAL;
	}
	if (i == DRM_TX8_LABEL_LEN)
		return -EINVAL;
	for (; i < DRM_TX8_LABEL_LEN; i++)
		if (label[i])
			return -EINVAL;
	return 0;
}

int tx8_bo_create_ioctl(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	struct tx8_device *tdev = to_tx8(drm);
	struct drm_tx8_bo_create *args = data;
	struct tx8_bo *bo;
	u64 size, off;
	int ret, idx;

	if (args->flags & ~DRM_TX8_BO_FLAGS_MASK)
		return -EINVAL;
	if (tx8_check_label(args->label))
		return -EINVAL;
	if (!args->size || args->size > tdev->lease_size)
		return args->size ? -ENOMEM : -EINVAL;
	size = PAGE_ALIGN(args->size);

	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	/*
	 * A lost device may still write memory it was given: nothing of the
	 * lease is handed out again (quarantined until unbind).
	 */
	if (READ_ONCE(tdev->lost)) {
		ret = -EIO;
		goto out;
	}

	bo = kzalloc(sizeof(*bo), GFP_KERNEL_ACCOUNT);
	if (!bo) {
		ret = -ENOMEM;
		goto out;
	}
	bo->base.funcs = &tx8_gem_funcs;
	memcpy(bo->label, args->label, sizeof(bo->label));
	bo->owner_pid = task_tgid_nr(current);
	bo->owner_uid = current_euid();
	INIT_LIST_HEAD(&bo->dev_node);
	drm_gem_private_object_init(drm, &bo->base, size);

	mutex_lock(&tdev->mm_lock);
	ret = drm_mm_insert_node_generic(&tdev->mm, &bo->node, size,
					 size >= SZ_2M ? SZ_2M : PAGE_SIZE, 0,
					 DRM_MM_INSERT_BEST);
	if (ret == -ENOSPC && size >= SZ_2M)
		ret = drm_mm_insert_node_generic(&tdev->mm, &bo->node, size,
						 PAGE_SIZE, 0,
						 DRM_MM_INSERT_BEST);
	if (!ret) {
		tdev->mem_used += size;
		list_add_tail(&bo->dev_node, &tdev->bos);
	}
	mutex_unlock(&tdev->mm_lock);
	if (ret) {
		ret = ret == -ENOSPC ? -ENOMEM : ret;
		drm_gem_object_put(&bo->base);
		goto out;
	}

	/*
	 * Never hand out what an earlier owner left in device memory; in
	 * steps, so that a huge BO does not hog the CPU.
	 */
	for (off = 0; off < size; off += SZ_2M) {
		memset(tdev->mem + bo->node.start + off, 0,
		       min_t(u64, SZ_2M, size - off));
		cond_resched();
	}

	ret = drm_gem_create_mmap_offset(&bo->base);
	if (ret) {
		drm_gem_object_put(&bo->base);
		goto out;
	}
	ret = drm_gem_handle_create(file, &bo->base, &args->handle);
	if (!ret) {
		args->size = size;
		args->dev_addr = bo->node.start;
		args->mmap_offset = drm_vma_node_offset_addr(&bo->base.vma_node);
	}
	/* the handle holds the reference now (or creation failed) */
	drm_gem_object_put(&bo->base);
out:
	drm_dev_exit(idx);
	return ret;
}

int tx8_bo_info_ioctl(struct drm_device *drm, void *data,
		      struct drm_file *file)
{
	struct drm_tx8_bo_info *args = data;
	struct drm_gem_object *obj;
	struct tx8_bo *bo;

	if (args->flags)
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	bo = to_tx8_bo(obj);
	args->size = obj->size;
	args->dev_addr = bo->node.start;
	args->mmap_offset = drm_vma_node_offset_addr(&obj->vma_node);
	memcpy(args->label, bo->label, sizeof(args->label));
	drm_gem_object_put(obj);
	return 0;
}

int tx8_bo_set_label_ioctl(struct drm_device *drm, void *data,
			   struct drm_file *file)
{
	struct drm_tx8_bo_set_label *args = data;
	struct tx8_device *tdev = to_tx8(drm);
	struct drm_gem_object *obj;

	if (args->flags || tx8_check_label(args->label))
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	mutex_lock(&tdev->mm_lock);
	memcpy(to_tx8_bo(obj)->label, args->label, DRM_TX8_LABEL_LEN);
	mutex_unlock(&tdev->mm_lock);
	drm_gem_object_put(obj);
	return 0;
}

/* At remove: no process may keep touching the BAR pages. */
void tx8_gem_unmap_all(struct tx8_device *tdev)
{
	if (tdev->drm.anon_inode)
		unmap_mapping_range(tdev->drm.anon_inode->i_mapping, 0, 0, 1);
}
