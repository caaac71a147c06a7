// SPDX-License-Identifier: GPL-2.0
/*
 * xmodify: a guest-side reproducer for cross-modifying code under QEMU TCG
 * (scripts/vm/cross-modify-test, docs/devbox.md). Not part of tx8.ko.
 *
 * A kthread bound to CPU 1 executes a static-branch site in a tight loop
 * while the loading thread flips the key, so the kernel rewrites the site
 * with text_poke_bp() (INT3 first, then the tail, then the first byte, with
 * an IPI sync between the steps) under the other CPU's feet. On real
 * hardware, and under single-threaded TCG, the runner either executes the
 * old or the new instruction, or traps on the INT3 while the patch is in
 * flight (which the kernel emulates). Under multi-threaded TCG a stale
 * translation of the INT3 can be executed after the patch is complete: the
 * kernel then dies with "Oops: int3" at xmodify_site+0x6.
 */
#include <linux/jump_label.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>

static int toggles = 200;
module_param(toggles, int, 0444);
MODULE_PARM_DESC(toggles, "how many times to enable and disable the key");

static DEFINE_STATIC_KEY_FALSE(xmodify_key);
static unsigned long xmodify_calls, xmodify_hits;

static noinline void xmodify_site(void)
{
	if (static_branch_unlikely(&xmodify_key))
		xmodify_hits++;
	xmodify_calls++;
}

static int xmodify_runner(void *unused)
{
	int i;

	while (!kthread_should_stop()) {
		for (i = 0; i < 1000; i++)
			xmodify_site();
		cond_resched();
	}
	return 0;
}

static int __init xmodify_init(void)
{
	struct task_struct *t;
	int i;

	if (num_online_cpus() < 2 || !cpu_online(1)) {
		pr_err("xmodify: needs CPU 1 online (QEMU -smp 2 or more)\n");
		return -ENODEV;
	}
	t = kthread_create(xmodify_runner, NULL, "xmodify");
	if (IS_ERR(t))
		return PTR_ERR(t);
	kthread_bind(t, 1);
	wake_up_process(t);
	for (i = 0; i < toggles; i++) {
		static_branch_enable(&xmodify_key);
		static_branch_disable(&xmodify_key);
		if (i % 50 == 0)
			pr_notice("xmodify: %d of %d toggles, site run %lu times\n",
				  i, toggles, READ_ONCE(xmodify_calls));
	}
	kthread_stop(t);
	pr_notice("xmodify: done: %d toggles, site run %lu times, %lu with the key on\n",
		  toggles, xmodify_calls, xmodify_hits);
	return 0;
}

static void __exit xmodify_exit(void)
{
}

module_init(xmodify_init);
module_exit(xmodify_exit);
MODULE_DESCRIPTION("cross-modifying code reproducer for QEMU TCG");
MODULE_LICENSE("GPL");
