/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * TX8 accelerator: what the job files (tx8_job.c, tx8_fence.c,
 * tx8_sched.c, tx8_reset.c) share among themselves.
 */
#ifndef TX8_JOB_H
#define TX8_JOB_H

#include "tx8_drv.h"

/* tx8_fence.c */
void tx8_fence_init(struct tx8_job *job, u64 seqno);

/* tx8_sched.c */
void tx8_file_entities_fini(struct tx8_file *tfile);
int tx8_file_entities_start(struct tx8_file *tfile);
int tx8_file_entities_renew(struct tx8_file *tfile);
void tx8_publish_tail(struct tx8_device *tdev);
void tx8_watch_head(struct tx8_device *tdev);
void tx8_job_finish(struct tx8_device *tdev, struct tx8_job *job,
		    const struct tx8_completion *rec, u32 status,
		    struct list_head *done);
void tx8_retire(struct list_head *done);

/* tx8_reset.c */
void tx8_fail_all_locked(struct tx8_device *tdev, u32 status,
			 struct list_head *done);
int tx8_hw_reset_locked(struct tx8_device *tdev, u32 hung_status,
			const char *reason);
void tx8_lost_work(struct work_struct *work);
u64 tx8_deps_cancel(struct tx8_device *tdev, struct tx8_file *tfile,
		    u32 status);

/* tx8_job.c */
long tx8_left(unsigned long deadline);

#endif /* TX8_JOB_H */
