// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 accelerator: /proc/tx_meminfo, in the style of /proc/meminfo.
 *
 *   totals over all TX8 devices   DeviceTotal, DeviceUsed, DeviceFree (kB),
 *                                 PageFaults, CacheMiss, Resets
 *   then per device (accelN_)     Total, Used, Free, PageFaults, CacheMiss,
 *                                 Resets, Buffers, one line per label, and
 *                                 one per client (ClientID_Energy, uJ: the
 *                                 energy of its jobs, as in its fdinfo)
 *   then per label, all devices   <label>: kB
 *
 * CacheMiss is the device's expert_cache_misses counter (docs/kernel.md).
 * Label lines are unambiguous: a label that would read as one of the fixed
 * keys (Total, DeviceUsed, accel7_Total, ...) is shown as Label_<label>,
 * and labels beyond the 256th are summed in OtherLabels. They show only
 * the reader's own BOs (created with its effective uid), all of them to
 * an admin (CAP_SYS_ADMIN); the totals are for everyone. Client lines
 * likewise: the reader's own clients (opened with its effective uid), all of
 * them to an admin.
 *
 * A read costs O(BOs): each BO's label is found in a hash of the labels
 * seen so far, and the walk over a device's BOs yields the CPU every
 * TX8_PROC_BATCH BOs (mm_lock is a mutex).
 */

#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/ctype.h>
#include <linux/hash.h>
#include <linux/stringhash.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>

#include "tx8_drv.h"

#define TX8_PROC_MAX_LABELS	256
#define TX8_PROC_HASH_BITS	8
#define TX8_PROC_BATCH		1024	/* BOs between two cond_resched() */

struct tx8_label_sum {
	struct hlist_node hnode;	/* tx8_label_table.hash */
	char label[DRM_TX8_LABEL_LEN];
	u64 bytes;
};

/* Labels in the order first seen, found by a hash of their text. */
struct tx8_label_table {
	unsigned int n;
	u64 other;			/* labels beyond the table */
	struct hlist_head hash[1 << TX8_PROC_HASH_BITS];
	struct tx8_label_sum e[TX8_PROC_MAX_LABELS];
};

static void tx8_label_clear(struct tx8_label_table *t)
{
	t->n = 0;
	t->other = 0;
	memset(t->hash, 0, sizeof(t->hash));
}

/* Fixed keys; "Label_" and "OtherLabels" are reserved too. */
static const char * const tx8_fixed_keys[] = {
	"DeviceTotal", "DeviceUsed", "DeviceFree", "PageFaults", "CacheMiss",
	"Resets", "Total", "Used", "Free", "Buffers", "OtherLabels",
};

/* Whether a label, as a key, could be mistaken for a fixed key. */
static bool tx8_label_reserved(const char *label)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(tx8_fixed_keys); i++)
		if (!strcmp(label, tx8_fixed_keys[i]))
			return true;
	return !strncmp(label, "Label_", 6) ||
	       (!strncmp(label, "accel", 5) && isdigit(label[5])) ||
	       (!strncmp(label, "Client", 6) && isdigit(label[6]));
}

static void tx8_label_add(struct tx8_label_table *t, const char *label,
			  u64 bytes)
{
	struct hlist_head *head;
	struct tx8_label_sum *e;
	size_t len;

	if (!label[0])
		label = "Unlabeled";
	len = strnlen(label, DRM_TX8_LABEL_LEN);
	head = &t->hash[hash_32(full_name_hash(NULL, label, len),
				TX8_PROC_HASH_BITS)];
	hlist_for_each_entry(e, head, hnode) {
		if (!strncmp(e->label, label, DRM_TX8_LABEL_LEN)) {
			e->bytes += bytes;
			return;
		}
	}
	if (t->n == TX8_PROC_MAX_LABELS) {
		/* no label is renamed: the rest is summed apart */
		t->other += bytes;
		return;
	}
	e = &t->e[t->n++];
	strscpy(e->label, label, DRM_TX8_LABEL_LEN);
	e->bytes = bytes;
	hlist_add_head(&e->hnode, head);
}

/* "prefixkey:" with spaces and colons of a label made '_' (one token) */
static void tx8_key(char *k, size_t size, const char *prefix, const char *key)
{
	char *c;

	snprintf(k, size, "%s%s", prefix, key);
	for (c = k; *c; c++)
		if (*c == ' ' || *c == ':')
			*c = '_';
	strlcat(k, ":", size);
}

static void tx8_kb(struct seq_file *m, const char *prefix, const char *key,
		   u64 bytes)
{
	char k[64];

	tx8_key(k, sizeof(k), prefix, key);
	seq_printf(m, "%-28s%12llu kB\n", k, bytes >> 10);
}

/* A label line: Label_ in front of one that could pass for a fixed key. */
static void tx8_label_kb(struct seq_file *m, const char *prefix,
			 const char *label, u64 bytes)
{
	char k[DRM_TX8_LABEL_LEN + 8], *c;

	strscpy(k, label, sizeof(k));
	for (c = k; *c; c++)
		if (*c == ' ' || *c == ':')
			*c = '_';
	if (tx8_label_reserved(k)) {
		snprintf(k, sizeof(k), "Label_%s", label);
		for (c = k; *c; c++)
			if (*c == ' ' || *c == ':')
				*c = '_';
	}
	tx8_kb(m, prefix, k, bytes);
}

static void tx8_num(struct seq_file *m, const char *prefix, const char *key,
		    u64 n)
{
	char k[64];

	tx8_key(k, sizeof(k), prefix, key);
	seq_printf(m, "%-28s%12llu\n", k, n);
}

/* One line per client of the device the reader may see: its energy. */
static void tx8_client_lines(struct seq_file *m, const char *prefix,
			     struct tx8_device *tdev,
			     const struct cred *reader, bool admin)
{
	struct tx8_file *tfile;
	char k[64];

	mutex_lock(&tdev->files_lock);
	list_for_each_entry(tfile, &tdev->files, dev_node) {
		if (!admin && !uid_eq(tfile->uid, reader->euid))
			continue;
		snprintf(k, sizeof(k), "%sClient%llu_Energy:", prefix,
			 tfile->client_id);
		seq_printf(m, "%-28s%12llu uJ\n", k,
			   tx8_file_energy_uj(tfile, tx8_file_busy_ns(tfile)));
	}
	mutex_unlock(&tdev->files_lock);
}

struct tx8_dev_sums {
	u64 total, used, faults, misses, resets, buffers;
};

static void tx8_dev_sums(struct tx8_device *tdev, struct tx8_dev_sums *s,
			 struct tx8_label_table *dev_labels,
			 struct tx8_label_table *all_labels,
			 const struct cred *reader, bool admin)
{
	unsigned int batch = 0;
	struct tx8_bo *bo;
	int idx;

	memset(s, 0, sizeof(*s));
	tx8_label_clear(dev_labels);
	s->total = tdev->lease_size;
	s->faults = atomic64_read(&tdev->page_faults);
	s->resets = atomic64_read(&tdev->resets);
	if (drm_dev_enter(&tdev->drm, &idx)) {
		s->misses = READ_ONCE(tdev->ctrl->counters.expert_cache_misses);
		drm_dev_exit(idx);
	}
	mutex_lock(&tdev->mm_lock);
	s->used = tdev->mem_used;
	list_for_each_entry(bo, &tdev->bos, dev_node) {
		/* the list cannot change: BOs come and go under mm_lock */
		if (++batch == TX8_PROC_BATCH) {
			batch = 0;
			cond_resched();
		}
		s->buffers++;
		/* labels say what a process does: its own, or an admin */
		if (!admin && !uid_eq(bo->owner_uid, reader->euid))
			continue;
		tx8_label_add(dev_labels, bo->label, bo->base.size);
		tx8_label_add(all_labels, bo->label, bo->base.size);
	}
	mutex_unlock(&tdev->mm_lock);
}

static int tx8_meminfo_show(struct seq_file *m, void *v)
{
	struct tx8_label_table *dev_labels, *all_labels;
	const struct cred *reader = m->file->f_cred;
	bool admin = file_ns_capable(m->file, &init_user_ns, CAP_SYS_ADMIN);
	struct tx8_dev_sums s, sum = {};
	struct tx8_device *tdev;
	unsigned int i;

	dev_labels = kvzalloc(sizeof(*dev_labels), GFP_KERNEL);
	all_labels = kvzalloc(sizeof(*all_labels), GFP_KERNEL);
	if (!dev_labels || !all_labels) {
		kvfree(dev_labels);
		kvfree(all_labels);
		return -ENOMEM;
	}
	tx8_label_clear(all_labels);

	mutex_lock(&tx8_devices_lock);
	/* totals first: one pass to sum, one to print per device */
	list_for_each_entry(tdev, &tx8_devices, node) {
		tx8_dev_sums(tdev, &s, dev_labels, all_labels, reader, admin);
		sum.total += s.total;
		sum.used += s.used;
		sum.faults += s.faults;
		sum.misses += s.misses;
		sum.resets += s.resets;
	}
	tx8_kb(m, "", "DeviceTotal", sum.total);
	tx8_kb(m, "", "DeviceUsed", sum.used);
	tx8_kb(m, "", "DeviceFree", sum.total - min(sum.total, sum.used));
	tx8_num(m, "", "PageFaults", sum.faults);
	tx8_num(m, "", "CacheMiss", sum.misses);
	tx8_num(m, "", "Resets", sum.resets);

	tx8_label_clear(all_labels);
	list_for_each_entry(tdev, &tx8_devices, node) {
		char prefix[24];

		snprintf(prefix, sizeof(prefix), "accel%d_",
			 tdev->drm.accel ? tdev->drm.accel->index : 0);
		tx8_dev_sums(tdev, &s, dev_labels, all_labels, reader, admin);
		tx8_kb(m, prefix, "Total", s.total);
		tx8_kb(m, prefix, "Used", s.used);
		tx8_kb(m, prefix, "Free", s.total - min(s.total, s.used));
		tx8_num(m, prefix, "PageFaults", s.faults);
		tx8_num(m, prefix, "CacheMiss", s.misses);
		tx8_num(m, prefix, "Resets", s.resets);
		tx8_num(m, prefix, "Buffers", s.buffers);
		for (i = 0; i < dev_labels->n; i++)
			tx8_label_kb(m, prefix, dev_labels->e[i].label,
				     dev_labels->e[i].bytes);
		if (dev_labels->other)
			tx8_kb(m, prefix, "OtherLabels", dev_labels->other);
		tx8_client_lines(m, prefix, tdev, reader, admin);
	}
	mutex_unlock(&tx8_devices_lock);

	for (i = 0; i < all_labels->n; i++)
		tx8_label_kb(m, "", all_labels->e[i].label,
			     all_labels->e[i].bytes);
	if (all_labels->other)
		tx8_kb(m, "", "OtherLabels", all_labels->other);
	kvfree(dev_labels);
	kvfree(all_labels);
	return 0;
}

int tx8_proc_init(void)
{
	if (!proc_create_single("tx_meminfo", 0444, NULL, tx8_meminfo_show))
		return -ENOMEM;
	return 0;
}

void tx8_proc_fini(void)
{
	remove_proc_entry("tx_meminfo", NULL);
}
