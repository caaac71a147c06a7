/* SPDX-License-Identifier: MIT */
/*
 * tx8-emu: the device front end (see device.h and docs/tx8-emu.md).
 *
 * Locking: one mutex (d->lock) guards all private device state. The main
 * thread takes it for mailbox requests, peers coming and going and
 * doorbells; the executor thread takes it to pick and complete jobs and
 * drops it while the engine runs a job.
 */
#include "device.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "engine/tx8_engine.h"
#include "lease.h"
#include "log.h"

/* Exit status of a device crash (fault injection). */
#define EMU_CRASH_EXIT 3
/* Longest SLOW delay a mailbox request may ask for, ms. */
#define EMU_MAX_SLOW_MS 600000u
/* Most jobs one INJECT_FAULT request may affect. */
#define EMU_MAX_FAULT_COUNT 1000000u

struct emu_queue {
    int32_t owner;     /* peer id, -1 when free */
    int32_t owner_pid; /* the peer's process (SO_PEERCRED), 0 unknown */
    uint32_t state;
    int irq_fd[TX8_NUM_VECTORS];
    uint32_t sq_head;
    uint32_t cq_tail;
    uint64_t completed_seqno;
    uint64_t last_seqno;
    bool have_last;
    uint32_t mbox_ack;

    bool running;       /* a job of this queue is in the engine */
    bool closing;       /* owner left; tear down when the job stops */
    bool reset_pending; /* RESET_QUEUE waits for the running job to stop */
    uint32_t reset_req;
    bool hung; /* a job hangs (fault injection) until reset */
    uint64_t hung_seqno;
    bool has_pending; /* a completion waits for room in the CQ */
    bool pending_irq;
    struct tx8_completion pending;
    uint64_t pending_energy_pj; /* its second half (tx8_completion_ext) */

    /* faults injected through the mailbox */
    unsigned f_hang, f_error, f_slow_count, f_slow_ms;
    /* a misbehaving device (interface 1.2, host robustness tests) */
    unsigned f_bad_record, f_bad_lease, f_take_on_reset;

    /* TX8_MBOX_ABORT_JOB: seqnos of jobs in the ring to complete unrun */
    uint64_t abort_seq[TX8_SQ_ENTRIES];
    unsigned n_abort;

    volatile int abort;
    uint64_t acct_ns; /* running job: busy time counted up to here (now_ns) */

    uint64_t jobs_completed, jobs_failed, busy_ns;
    uint64_t energy_pj; /* this owner's jobs' energy (tx8_queue.energy_uj) */
};

/* Board power over a window: energy samples of the last POWER_SAMPLES
 * ticks (10 ms apart). */
#define POWER_SAMPLES 101
#define POWER_NOW_TICKS 10   /* power_mw: the last 100 ms */
#define POWER_AVG_TICKS 100  /* power_avg_mw: the last 1 s */

struct emu_power {
    double static_mw;
    uint64_t cap_mw;             /* initial power limit (--power-cap) */
    uint64_t t[POWER_SAMPLES];   /* now_ns of the sample */
    double pj[POWER_SAMPLES];    /* board energy then */
    unsigned n, head;            /* samples held, next slot */
};

struct emu_dev {
    uint8_t *mem;
    uint64_t mem_size;
    int mem_fd;
    struct tx8_ctrl *ctrl;
    struct tx8_engine *engine;
    uint64_t t0;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t executor;
    bool executor_started;
    bool stop;
    bool kick;
    unsigned rr;

    struct emu_faults faults;
    uint64_t jobs_taken;
    uint64_t stop_until;      /* TX8_FAULT_STOP: silent until (now_ns) */
    uint64_t caps_restore_at; /* TX8_FAULT_BAD_CAPS: restore at (now_ns) */
    struct tx8_caps caps_saved;
    bool mbox_runs_job; /* TX8_FAULT_TAKE_ON_RESET: a job runs in handle_mbox */

    struct emu_queue q[TX8_MAX_QUEUES];
    struct emu_heap heap;
    struct emu_power power;

    /* private copy of the running job's descriptor */
    struct tx8_job_desc desc;
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t dev_time(const struct emu_dev *d)
{
    return now_ns() - d->t0;
}

static struct tx8_queue *qshm(struct emu_dev *d, int i)
{
    return (struct tx8_queue *)(d->mem + TX8_QUEUE_OFFSET(i));
}

static void cnt_add(__u64 *c, uint64_t v)
{
    __atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static void ring(struct emu_queue *q, unsigned vector)
{
    uint64_t one = 1;

    if (vector < TX8_NUM_VECTORS && q->irq_fd[vector] >= 0) {
        ssize_t r = write(q->irq_fd[vector], &one, sizeof(one));
        (void)r; /* a full eventfd counter still interrupts */
    }
}

static void raise_irq(struct emu_dev *d, int qi, uint32_t cause, unsigned vector)
{
    __atomic_fetch_or(&qshm(d, qi)->irq_cause, cause, __ATOMIC_ACQ_REL);
    ring(&d->q[qi], vector);
}

static void publish_queue_counters(struct emu_dev *d, int qi)
{
    struct emu_queue *q = &d->q[qi];
    struct tx8_queue *s = qshm(d, qi);

    __atomic_store_n(&s->jobs_completed, q->jobs_completed, __ATOMIC_RELAXED);
    __atomic_store_n(&s->jobs_failed, q->jobs_failed, __ATOMIC_RELAXED);
    __atomic_store_n(&s->busy_ns, q->busy_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&s->bytes_leased, heap_owner_bytes(&d->heap, q->owner), __ATOMIC_RELAXED);
    __atomic_store_n(&s->energy_uj, q->energy_pj / 1000000u, __ATOMIC_RELAXED);
}

/* Board energy at now: static power over the device's life plus every
 * command's dynamic energy (so that an idle board draws static_mw exactly). */
static double board_energy_pj(struct emu_dev *d, uint64_t now)
{
    struct tx8_engine_energy en;

    tx8_engine_energy(d->engine, &en);
    return d->power.static_mw * (double)(now - d->t0) + (double)en.dynamic_pj;
}

/* Power over the samples of the last `ticks` ticks, mW (pJ / ns). */
static uint64_t power_over(const struct emu_power *p, unsigned ticks)
{
    unsigned last = (p->head + POWER_SAMPLES - 1) % POWER_SAMPLES;
    unsigned back = ticks < p->n - 1 ? ticks : p->n - 1;
    unsigned first = (last + POWER_SAMPLES - back) % POWER_SAMPLES;

    if (back == 0 || p->t[last] <= p->t[first])
        return (uint64_t)llround(p->static_mw);
    return (uint64_t)llround((p->pj[last] - p->pj[first]) / (double)(p->t[last] - p->t[first]));
}

/* Sample the board energy and publish energy and power (10 ms tick). */
static void power_tick(struct emu_dev *d, uint64_t now)
{
    struct emu_power *p = &d->power;
    double pj = board_energy_pj(d, now);
    struct tx8_counters *c = &d->ctrl->counters;
    uint64_t uj = (uint64_t)(pj / 1e6);

    p->t[p->head] = now;
    p->pj[p->head] = pj;
    p->head = (p->head + 1) % POWER_SAMPLES;
    if (p->n < POWER_SAMPLES)
        p->n++;
    /* never backwards (hwmon's rule for energy*_input) */
    if (uj > __atomic_load_n(&c->energy_uj, __ATOMIC_RELAXED))
        __atomic_store_n(&c->energy_uj, uj, __ATOMIC_RELAXED);
    __atomic_store_n(&c->power_mw, power_over(p, POWER_NOW_TICKS), __ATOMIC_RELAXED);
    __atomic_store_n(&c->power_avg_mw, power_over(p, POWER_AVG_TICKS), __ATOMIC_RELAXED);
}

/* Write the device's view of queue qi into the control block. */
static void publish_queue(struct emu_dev *d, int qi)
{
    struct emu_queue *q = &d->q[qi];
    struct tx8_queue *s = qshm(d, qi);

    __atomic_store_n(&s->owner_peer, q->owner, __ATOMIC_RELAXED);
    __atomic_store_n(&s->owner_pid, q->owner >= 0 ? q->owner_pid : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->sq_offset, (uint64_t)TX8_SQ_OFFSET(qi), __ATOMIC_RELAXED);
    __atomic_store_n(&s->cq_offset, (uint64_t)TX8_CQ_OFFSET(qi), __ATOMIC_RELAXED);
    __atomic_store_n(&s->sq_head, q->sq_head, __ATOMIC_RELAXED);
    __atomic_store_n(&s->cq_tail, q->cq_tail, __ATOMIC_RELAXED);
    __atomic_store_n(&s->completed_seqno, q->completed_seqno, __ATOMIC_RELAXED);
    publish_queue_counters(d, qi);
    __atomic_store_n(&s->state, q->state, __ATOMIC_RELEASE);
}

static void queue_clear(struct emu_queue *q)
{
    memset(q, 0, sizeof(*q));
    q->owner = -1;
    q->state = TX8_QUEUE_FREE;
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        q->irq_fd[v] = -1;
}

/* Zero the queue block and its rings in device memory. */
static void queue_wipe_shm(struct emu_dev *d, int qi)
{
    memset(qshm(d, qi), 0, sizeof(struct tx8_queue));
    memset(d->mem + TX8_SQ_OFFSET(qi), 0, TX8_SQ_ENTRIES * TX8_SQ_ENTRY_SIZE);
    memset(d->mem + TX8_CQ_OFFSET(qi), 0, TX8_CQ_ENTRIES * sizeof(struct tx8_completion));
    memset(d->mem + TX8_CQX_OFFSET(qi), 0, TX8_CQ_ENTRIES * sizeof(struct tx8_completion_ext));
}

/*
 * Give released device memory back to the host and make it read as zeros
 * for its next owner: punch the range out of the memfd (no page is
 * touched); memset if the file system cannot.
 */
static void scrub(struct emu_dev *d, uint64_t base, uint64_t size)
{
    if (fallocate(d->mem_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)base,
                  (off_t)size) != 0)
        memset(d->mem + base, 0, size);
}

/* Free queue qi and everything its owner held. Lock held, job not running. */
static void queue_teardown(struct emu_dev *d, int qi)
{
    struct emu_queue *q = &d->q[qi];
    uint64_t bytes = 0;
    unsigned n;

    for (unsigned i = 0; i < d->heap.n; i++)
        if (d->heap.l[i].owner == q->owner)
            scrub(d, d->heap.l[i].base, d->heap.l[i].size);
    n = heap_release_owner(&d->heap, q->owner, &bytes);

    if (n)
        heap_publish(&d->heap, d->mem);
    emu_debug("queue %d: freed (peer %d left, %u leases / %llu bytes released)", qi, q->owner, n,
              (unsigned long long)bytes);
    queue_clear(q);
    queue_wipe_shm(d, qi);
    publish_queue(d, qi);
}

static void mbox_reply(struct emu_dev *d, int qi, uint32_t req, int32_t status, uint64_t ret0,
                       uint64_t ret1)
{
    struct tx8_queue *s = qshm(d, qi);

    __atomic_store_n(&s->mbox_status, status, __ATOMIC_RELAXED);
    __atomic_store_n(&s->mbox_ret[0], ret0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->mbox_ret[1], ret1, __ATOMIC_RELAXED);
    __atomic_store_n(&s->mbox_ack_seq, req, __ATOMIC_RELEASE);
    d->q[qi].mbox_ack = req;
    raise_irq(d, qi, TX8_IRQ_MBOX, TX8_HOST_VEC_MBOX);
}

/*
 * Reset queue qi: every unfinished job is aborted, both rings are emptied.
 * running_aborted: the executor just stopped a job (seqno running_seqno).
 * Returns the number of jobs aborted, *max_seqno the highest of their seqnos.
 */
static uint64_t queue_reset(struct emu_dev *d, int qi, bool running_aborted, uint64_t running_seqno,
                            uint64_t *max_seqno)
{
    struct emu_queue *q = &d->q[qi];
    struct tx8_queue *s = qshm(d, qi);
    uint64_t count = 0, maxs = 0, no_record = 0;
    uint32_t tail = __atomic_load_n(&s->sq_tail, __ATOMIC_ACQUIRE);
    uint32_t pend = tail - q->sq_head;

    if (running_aborted) {
        count++;
        no_record++;
        maxs = running_seqno;
    }
    if (q->hung) {
        count++;
        no_record++;
        if (q->hung_seqno > maxs)
            maxs = q->hung_seqno;
    }
    if (q->has_pending) { /* finished, but its record never reached the CQ */
        count++;
        if (q->pending.seqno > maxs)
            maxs = q->pending.seqno;
    }
    if (pend <= TX8_SQ_ENTRIES) {
        for (uint32_t i = 0; i < pend; i++) {
            uint32_t slot = (q->sq_head + i) % TX8_SQ_ENTRIES;
            const struct tx8_job_desc *e =
                (const void *)(d->mem + TX8_SQ_OFFSET(qi) + (uint64_t)slot * TX8_SQ_ENTRY_SIZE);
            uint64_t seq = __atomic_load_n(&e->seqno, __ATOMIC_RELAXED);

            if (seq > maxs)
                maxs = seq;
            count++;
            no_record++;
        }
    }

    q->jobs_failed += no_record;
    cnt_add(&d->ctrl->counters.jobs_failed, no_record);
    cnt_add(&d->ctrl->counters.resets, 1);
    if (maxs > q->completed_seqno)
        q->completed_seqno = maxs;

    q->sq_head = 0;
    q->cq_tail = 0;
    q->have_last = false;
    q->hung = false;
    q->has_pending = false;
    q->reset_pending = false;
    q->f_hang = q->f_error = q->f_slow_count = q->f_slow_ms = 0;
    /* f_bad_lease survives: it is for the LEASE of the next probe */
    q->f_bad_record = q->f_take_on_reset = 0;
    q->n_abort = 0;
    q->state = TX8_QUEUE_ACTIVE;
    __atomic_store_n(&s->sq_tail, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&s->cq_head, 0u, __ATOMIC_RELAXED);
    publish_queue(d, qi);
    __atomic_fetch_or(&s->irq_cause, TX8_IRQ_RESET_DONE, __ATOMIC_ACQ_REL);
    emu_log("queue %d (peer %d): reset, %llu job(s) aborted", qi, q->owner,
            (unsigned long long)count);
    *max_seqno = maxs;
    return count;
}

/* ------------------------------------------------------------------------ */
/* Completions                                                               */
/* ------------------------------------------------------------------------ */

/* Try to write q's pending completion into its CQ. Lock held. */
static bool post_pending(struct emu_dev *d, int qi)
{
    struct emu_queue *q = &d->q[qi];
    struct tx8_queue *s = qshm(d, qi);
    uint32_t head = __atomic_load_n(&s->cq_head, __ATOMIC_ACQUIRE);
    struct tx8_completion *cq = (struct tx8_completion *)(d->mem + TX8_CQ_OFFSET(qi));

    /* A head the host moved past the tail is as good as a full ring: the
     * queue waits until a reset. */
    if ((uint32_t)(q->cq_tail - head) >= TX8_CQ_ENTRIES)
        return false;
    struct tx8_completion_ext *cqx = (struct tx8_completion_ext *)(d->mem + TX8_CQX_OFFSET(qi));
    struct tx8_completion_ext ext = {.energy_pj = q->pending_energy_pj};

    memcpy(&cq[q->cq_tail % TX8_CQ_ENTRIES], &q->pending, sizeof(q->pending));
    memcpy(&cqx[q->cq_tail % TX8_CQ_ENTRIES], &ext, sizeof(ext)); /* since 1.9 */
    q->cq_tail++;
    if (q->pending.seqno > q->completed_seqno)
        q->completed_seqno = q->pending.seqno;
    q->has_pending = false;
    __atomic_store_n(&s->completed_seqno, q->completed_seqno, __ATOMIC_RELAXED);
    __atomic_store_n(&s->cq_tail, q->cq_tail, __ATOMIC_RELEASE);
    publish_queue_counters(d, qi);
    if (q->pending_irq)
        raise_irq(d, qi, TX8_IRQ_COMPLETION, TX8_HOST_VEC_COMPLETION);
    else
        __atomic_fetch_or(&s->irq_cause, TX8_IRQ_COMPLETION, __ATOMIC_ACQ_REL);
    return true;
}

/* A job of queue qi finished with *c, having cost energy_pj. Lock held. */
static void complete_job(struct emu_dev *d, int qi, const struct tx8_completion *c, uint32_t flags,
                         uint64_t energy_pj)
{
    struct emu_queue *q = &d->q[qi];

    if (c->status == TX8_STATUS_OK) {
        q->jobs_completed++;
        cnt_add(&d->ctrl->counters.jobs_completed, 1);
    } else {
        q->jobs_failed++;
        cnt_add(&d->ctrl->counters.jobs_failed, 1);
        emu_debug("queue %d: job %llu failed: %s (command %u, address 0x%llx)", qi,
                  (unsigned long long)c->seqno, tx8_engine_status_name(c->status), c->fault_cmd,
                  (unsigned long long)c->fault_addr);
    }
    q->pending = *c;
    q->pending_energy_pj = energy_pj;
    q->pending_irq = !(flags & TX8_JOB_F_NO_IRQ);
    q->has_pending = true;
    if (q->f_bad_record) {
        /* a record no job has, then a tail far past the records */
        q->f_bad_record--;
        emu_log("fault injection: queue %d job %llu: bad completion record", qi,
                (unsigned long long)c->seqno);
        q->pending.seqno = c->seqno + (1ull << 40);
        q->pending.status = 0xdead;
        post_pending(d, qi);
        q->cq_tail += 1000;
        __atomic_store_n(&qshm(d, qi)->cq_tail, q->cq_tail, __ATOMIC_RELEASE);
        return;
    }
    post_pending(d, qi);
}

/* ------------------------------------------------------------------------ */
/* Executor                                                                  */
/* ------------------------------------------------------------------------ */

static void stop_queue(struct emu_dev *d, int qi, const char *why)
{
    struct emu_queue *q = &d->q[qi];

    emu_log("queue %d (peer %d): stopped: %s; waiting for RESET_QUEUE", qi, q->owner, why);
    q->state = TX8_QUEUE_STOPPED;
    publish_queue(d, qi);
    raise_irq(d, qi, TX8_IRQ_ERROR, TX8_HOST_VEC_EVENT);
}

/* Check the descriptor's ranges against the owner's leases. The engine
 * checks everything else. Returns the first range not inside a lease of
 * the owner, or -1. */
static int foreign_range(const struct emu_dev *d, int32_t owner, const struct tx8_job_desc *j)
{
    if (j->num_ranges == 0 || j->num_ranges > TX8_JOB_MAX_RANGES)
        return -1; /* the engine fails it with INVALID_JOB */
    for (uint32_t i = 0; i < j->num_ranges; i++)
        if (j->ranges[i].size &&
            !heap_owner_covers(&d->heap, owner, j->ranges[i].addr, j->ranges[i].size))
            return (int)i;
    return -1;
}

/* Sleep up to ns nanoseconds; false if aborted meanwhile. Lock not held. */
static bool slow_delay_ns(struct emu_queue *q, uint64_t ns)
{
    uint64_t end = now_ns() + ns;

    while (!q->abort) {
        uint64_t t = now_ns();
        struct timespec ts = {0, 1000000};

        if (t >= end)
            return true;
        if (end - t < 1000000ull)
            ts.tv_nsec = (long)(end - t);
        nanosleep(&ts, NULL);
    }
    return false;
}

/* Sleep up to ms milliseconds; false if aborted meanwhile. Lock not held. */
static bool slow_delay(struct emu_queue *q, unsigned ms)
{
    return slow_delay_ns(q, (uint64_t)ms * 1000000ull);
}

static void handle_mbox(struct emu_dev *d, int qi);

static bool any_running(const struct emu_dev *d)
{
    for (int qi = 0; qi < TX8_MAX_QUEUES; qi++)
        if (d->q[qi].running)
            return true;
    return false;
}

/* Whether seqno is marked by ABORT_JOB; the mark is dropped. Lock held. */
static bool take_abort_mark(struct emu_queue *q, uint64_t seqno)
{
    for (unsigned i = 0; i < q->n_abort; i++) {
        if (q->abort_seq[i] == seqno) {
            q->abort_seq[i] = q->abort_seq[--q->n_abort];
            return true;
        }
    }
    return false;
}

/*
 * TX8_MBOX_ABORT_JOB: abort job seqno of queue qi and nothing else. Lock
 * held. Returns 0 or -ENOSPC; *how is a TX8_ABORT_* value.
 */
static int abort_job(struct emu_dev *d, int qi, uint64_t seqno, uint64_t *how)
{
    struct emu_queue *q = &d->q[qi];
    struct tx8_queue *s = qshm(d, qi);
    uint32_t tail = __atomic_load_n(&s->sq_tail, __ATOMIC_ACQUIRE);
    uint32_t pend = tail - q->sq_head;

    *how = TX8_ABORT_NONE;
    if (q->running && !d->mbox_runs_job && d->desc.seqno == seqno) {
        /* the executor writes its record, ABORTED, once it stopped */
        q->abort = 1;
        cnt_add(&d->ctrl->counters.resets, 1);
        *how = TX8_ABORT_RUNNING;
        return 0;
    }
    if (q->hung && q->hung_seqno == seqno) {
        struct tx8_completion c;

        memset(&c, 0, sizeof(c));
        c.seqno = seqno;
        c.status = TX8_STATUS_ABORTED;
        c.start_ns = c.end_ns = dev_time(d);
        q->hung = false;
        cnt_add(&d->ctrl->counters.resets, 1);
        complete_job(d, qi, &c, 0, 0);
        *how = TX8_ABORT_RUNNING;
        return 0;
    }
    if (pend > TX8_SQ_ENTRIES)
        return 0;
    for (uint32_t i = 0; i < pend; i++) {
        uint32_t slot = (q->sq_head + i) % TX8_SQ_ENTRIES;
        const struct tx8_job_desc *e =
            (const void *)(d->mem + TX8_SQ_OFFSET(qi) + (uint64_t)slot * TX8_SQ_ENTRY_SIZE);

        if (__atomic_load_n(&e->seqno, __ATOMIC_RELAXED) != seqno)
            continue;
        for (unsigned k = 0; k < q->n_abort; k++)
            if (q->abort_seq[k] == seqno) {
                *how = TX8_ABORT_QUEUED;
                return 0;
            }
        if (q->n_abort == TX8_SQ_ENTRIES)
            return -ENOSPC;
        q->abort_seq[q->n_abort++] = seqno;
        *how = TX8_ABORT_QUEUED;
        return 0;
    }
    return 0;
}

static void run_job(struct emu_dev *d, int qi)
{
    struct emu_queue *q = &d->q[qi];
    struct tx8_queue *s = qshm(d, qi);
    struct tx8_job_desc *j = &d->desc;
    struct tx8_completion c;
    uint32_t slot = q->sq_head % TX8_SQ_ENTRIES;
    bool hang = false, error = false, ok;
    unsigned slow = 0;
    uint64_t start, end;
    struct tx8_engine_energy en0, en1;
    int bad;

    memcpy(j, d->mem + TX8_SQ_OFFSET(qi) + (uint64_t)slot * TX8_SQ_ENTRY_SIZE, sizeof(*j));
    q->sq_head++;
    /* since 1.2: the last job taken, kept across RESET_QUEUE */
    __atomic_store_n(&s->taken_seqno, j->seqno, __ATOMIC_RELEASE);
    __atomic_store_n(&s->sq_head, q->sq_head, __ATOMIC_RELEASE);
    cnt_add(&d->ctrl->counters.jobs_submitted, 1);
    d->jobs_taken++;
    if (d->faults.crash_after >= 0 && d->jobs_taken > (uint64_t)d->faults.crash_after) {
        emu_log("fault injection: crashing while taking job %llu", (unsigned long long)j->seqno);
        _exit(EMU_CRASH_EXIT);
    }

    memset(&c, 0, sizeof(c));
    c.seqno = j->seqno;
    c.user_data = j->user_data;
    c.start_ns = c.end_ns = dev_time(d);

    if (q->have_last && j->seqno <= q->last_seqno) {
        c.status = TX8_STATUS_INVALID_JOB;
        c.fault_cmd = UINT32_MAX;
        emu_debug("queue %d: job seqno %llu not above %llu", qi, (unsigned long long)j->seqno,
                  (unsigned long long)q->last_seqno);
        complete_job(d, qi, &c, j->flags, 0);
        return;
    }
    q->last_seqno = j->seqno;
    q->have_last = true;

    if (take_abort_mark(q, j->seqno)) {
        emu_debug("queue %d: job %llu aborted before it ran", qi, (unsigned long long)j->seqno);
        c.status = TX8_STATUS_ABORTED;
        complete_job(d, qi, &c, j->flags, 0);
        return;
    }

    bad = foreign_range(d, q->owner, j);
    if (bad >= 0) {
        c.status = TX8_STATUS_INVALID_JOB;
        c.fault_cmd = UINT32_MAX;
        c.fault_addr = j->ranges[bad].addr;
        complete_job(d, qi, &c, j->flags, 0);
        return;
    }

    /* Injected faults apply to jobs that passed the device's checks. */
    if (q->f_hang) {
        q->f_hang--;
        hang = true;
    } else if (d->faults.hang) {
        d->faults.hang--;
        hang = true;
    } else if (q->f_error) {
        q->f_error--;
        error = true;
    } else if (d->faults.error) {
        d->faults.error--;
        error = true;
    }
    if (q->f_slow_count) {
        q->f_slow_count--;
        slow = q->f_slow_ms;
    } else {
        slow = d->faults.slow_ms;
    }
    if (hang) {
        emu_log("fault injection: queue %d job %llu hangs until reset", qi,
                (unsigned long long)j->seqno);
        q->hung = true;
        q->hung_seqno = j->seqno;
        return;
    }
    if (error) {
        emu_log("fault injection: queue %d job %llu fails with a device error", qi,
                (unsigned long long)j->seqno);
        c.status = TX8_STATUS_DEVICE_ERROR;
        complete_job(d, qi, &c, j->flags, 0);
        return;
    }

    start = now_ns();
    q->running = true;
    q->abort = 0;
    q->acct_ns = start;
    pthread_mutex_unlock(&d->lock);

    c.start_ns = start - d->t0;
    ok = slow == 0 || slow_delay(q, slow);
    tx8_engine_energy(d->engine, &en0);
    if (ok && tx8_engine_run(d->engine, j, &c, &q->abort) != 0) {
        c.status = TX8_STATUS_DEVICE_ERROR;
        c.fault_cmd = UINT32_MAX;
    }
    tx8_engine_energy(d->engine, &en1);
    /* the device never finishes a job before its modelled time (a power
     * cap lowers the modelled clock: docs/hardware.md section 7) */
    end = now_ns();
    if (ok && en1.last_job_model_ns > (double)(end - start)) {
        uint64_t wait_ns = (uint64_t)en1.last_job_model_ns - (end - start);

        ok = slow_delay_ns(q, wait_ns);
        end = now_ns();
    }

    pthread_mutex_lock(&d->lock);
    q->running = false;
    q->energy_pj += en1.active_pj - en0.active_pj;
    c.seqno = j->seqno;
    c.user_data = j->user_data;
    c.end_ns = end - d->t0;
    if (!ok || q->abort)
        c.status = TX8_STATUS_ABORTED;
    /* busy time not yet counted by dev_tick() */
    if (end > q->acct_ns) {
        q->busy_ns += end - q->acct_ns;
        cnt_add(&d->ctrl->counters.busy_ns, end - q->acct_ns);
    }

    if (q->closing) {
        queue_teardown(d, qi);
        return;
    }
    if (q->reset_pending) {
        uint64_t maxs;
        uint32_t req = q->reset_req;
        uint64_t n = queue_reset(d, qi, true, j->seqno, &maxs);

        mbox_reply(d, qi, req, 0, n, maxs);
        handle_mbox(d, qi); /* a request that came while resetting */
        return;
    }
    complete_job(d, qi, &c, j->flags, en1.active_pj - en0.active_pj);
}

/* Do one unit of work. Lock held. Returns whether anything happened. */
static bool exec_step(struct emu_dev *d)
{
    if (d->stop_until || d->mbox_runs_job)
        return false; /* TX8_FAULT_STOP, TX8_FAULT_TAKE_ON_RESET */
    for (int qi = 0; qi < TX8_MAX_QUEUES; qi++)
        if (d->q[qi].has_pending && !d->q[qi].closing)
            post_pending(d, qi);

    for (int i = 0; i < TX8_MAX_QUEUES; i++) {
        int qi = (int)((d->rr + 1 + (unsigned)i) % TX8_MAX_QUEUES);
        struct emu_queue *q = &d->q[qi];
        uint32_t tail, pend;

        if (q->state != TX8_QUEUE_ACTIVE || q->running || q->closing || q->reset_pending ||
            q->hung || q->has_pending)
            continue;
        tail = __atomic_load_n(&qshm(d, qi)->sq_tail, __ATOMIC_ACQUIRE);
        pend = tail - q->sq_head;
        if (pend == 0)
            continue;
        if (pend > TX8_SQ_ENTRIES) {
            char why[96];

            snprintf(why, sizeof(why), "sq_tail %u is more than %u ahead of sq_head %u", tail,
                     TX8_SQ_ENTRIES, q->sq_head);
            stop_queue(d, qi, why);
            continue;
        }
        d->rr = (unsigned)qi;
        run_job(d, qi);
        return true;
    }
    return false;
}

static bool any_pending(const struct emu_dev *d)
{
    for (int qi = 0; qi < TX8_MAX_QUEUES; qi++)
        if (d->q[qi].has_pending)
            return true;
    return false;
}

/* How long the executor watches the submission rings after a job before it
 * sleeps: a host that submits its next job within this is served without
 * the main thread having to wake the executor (a thread hand-off). */
#define EXEC_SPIN_NS 20000ull

/* Unlock, watch the rings of the active queues for a new job (or the
 * device's stop) for up to EXEC_SPIN_NS, lock again. Lock held. */
static void spin_for_work(struct emu_dev *d)
{
    uint32_t head[TX8_MAX_QUEUES];
    bool watch[TX8_MAX_QUEUES];
    uint64_t end = now_ns() + EXEC_SPIN_NS;

    for (int qi = 0; qi < TX8_MAX_QUEUES; qi++) {
        const struct emu_queue *q = &d->q[qi];

        watch[qi] = q->owner >= 0 && q->state == TX8_QUEUE_ACTIVE && !q->closing;
        head[qi] = q->sq_head;
    }
    pthread_mutex_unlock(&d->lock);
    for (unsigned i = 0;; i++) {
        bool found = false;

        for (int qi = 0; qi < TX8_MAX_QUEUES && !found; qi++)
            found =
                watch[qi] && __atomic_load_n(&qshm(d, qi)->sq_tail, __ATOMIC_ACQUIRE) != head[qi];
        if (found || ((i & 15) == 15 && now_ns() >= end))
            break;
        /* on a busy host, let a runnable thread (the one we wait for) go */
        if (i >= 64)
            sched_yield();
#if defined(__x86_64__) || defined(__i386__)
        else
            __builtin_ia32_pause();
#endif
    }
    pthread_mutex_lock(&d->lock);
}

static void *executor_main(void *arg)
{
    struct emu_dev *d = arg;
    bool spin = false;

    pthread_mutex_lock(&d->lock);
    while (!d->stop) {
        d->kick = false;
        if (exec_step(d)) {
            spin = true;
            continue;
        }
        if (d->kick || d->stop)
            continue;
        if (spin) {
            /* once per idle period; whatever came meanwhile (kick) is
             * looked at by the next exec_step */
            spin = false;
            spin_for_work(d);
            continue;
        }
        if (any_pending(d)) {
            struct timespec ts;

            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 2000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&d->cond, &d->lock, &ts);
        } else {
            pthread_cond_wait(&d->cond, &d->lock);
        }
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Mailbox                                                                   */
/* ------------------------------------------------------------------------ */

/* Whether the running job of queue qi may use [base, base + size). */
static bool lease_in_use(const struct emu_dev *d, int qi, uint64_t base, uint64_t size)
{
    const struct tx8_job_desc *j = &d->desc;

    if (!d->q[qi].running || j->num_ranges > TX8_JOB_MAX_RANGES)
        return false;
    for (uint32_t i = 0; i < j->num_ranges; i++) {
        uint64_t a = j->ranges[i].addr, e = a + j->ranges[i].size;

        if (a < base + size && e > base)
            return true;
    }
    return false;
}

static const char *mbox_name(uint32_t cmd)
{
    static const char *const names[] = {"NOP",         "LEASE",        "RELEASE",
                                        "RESET_QUEUE", "INJECT_FAULT", "SET_LABEL",
                                        "ABORT_JOB"};

    if (cmd == TX8_MBOX_SET_POWER_CAP)
        return "SET_POWER_CAP";
    return cmd < sizeof(names) / sizeof(names[0]) ? names[cmd] : "?";
}

static void handle_mbox(struct emu_dev *d, int qi)
{
    struct emu_queue *q = &d->q[qi];
    struct tx8_queue *s = qshm(d, qi);
    uint32_t req = __atomic_load_n(&s->mbox_req_seq, __ATOMIC_ACQUIRE);
    uint64_t arg[4], ret0 = 0, ret1 = 0;
    char label[TX8_LABEL_LEN];
    uint32_t cmd;
    int32_t st = 0;

    if (req == q->mbox_ack || q->reset_pending || d->stop_until)
        return;
    cmd = __atomic_load_n(&s->mbox_cmd, __ATOMIC_RELAXED);
    memcpy(arg, (const void *)s->mbox_arg, sizeof(arg));
    memcpy(label, (const void *)s->mbox_label, sizeof(label));
    label[TX8_LABEL_LEN - 1] = 0;

    switch (cmd) {
    case TX8_MBOX_NOP:
        break;
    case TX8_MBOX_LEASE:
        st = heap_lease(&d->heap, arg[0], arg[1], q->owner, label, &ret0);
        if (st == 0) {
            heap_publish(&d->heap, d->mem);
            ret1 = d->heap.l[heap_find(&d->heap, ret0)].size;
            if (q->f_bad_lease) {
                /* the lease is made, the answer lies: base + size wraps */
                q->f_bad_lease--;
                emu_log("fault injection: queue %d: LEASE answers a bad base", qi);
                ret0 = UINT64_MAX - TX8_PAGE_SIZE + 1;
            }
        }
        break;
    case TX8_MBOX_RELEASE: {
        int i = heap_find(&d->heap, arg[0]);
        uint64_t size = i >= 0 ? d->heap.l[i].size : 0;

        if (i >= 0 && d->heap.l[i].owner == q->owner && lease_in_use(d, qi, arg[0], size)) {
            st = -EBUSY;
            break;
        }
        st = heap_release(&d->heap, arg[0], q->owner);
        if (st == 0) {
            scrub(d, arg[0], size);
            heap_publish(&d->heap, d->mem);
        }
        break;
    }
    case TX8_MBOX_SET_LABEL:
        st = heap_set_label(&d->heap, arg[0], q->owner, label);
        if (st == 0)
            heap_publish(&d->heap, d->mem);
        break;
    case TX8_MBOX_ABORT_JOB:
        st = abort_job(d, qi, arg[0], &ret0);
        break;
    case TX8_MBOX_RESET_QUEUE:
        if (q->running) {
            /* The executor answers once the job has stopped. */
            q->abort = 1;
            q->reset_pending = true;
            q->reset_req = req;
            q->state = TX8_QUEUE_STOPPED;
            __atomic_store_n(&s->state, q->state, __ATOMIC_RELEASE);
            emu_debug("queue %d: RESET_QUEUE: aborting the running job", qi);
            return;
        }
        if (q->f_take_on_reset && !q->has_pending && q->state == TX8_QUEUE_ACTIVE &&
            !any_running(d) &&
            __atomic_load_n(&s->sq_tail, __ATOMIC_ACQUIRE) - q->sq_head - 1 < TX8_SQ_ENTRIES) {
            /* take one more job before resetting; run_job answers */
            q->f_take_on_reset--;
            emu_log("fault injection: queue %d: taking a job on RESET_QUEUE", qi);
            q->reset_pending = true;
            q->reset_req = req;
            d->mbox_runs_job = true; /* the executor keeps off d->desc */
            run_job(d, qi);
            d->mbox_runs_job = false;
            if (!q->reset_pending)
                return; /* answered by run_job */
            ret0 = queue_reset(d, qi, false, 0, &ret1);
            break;
        }
        ret0 = queue_reset(d, qi, false, 0, &ret1);
        break;
    case TX8_MBOX_SET_POWER_CAP: /* device-wide (docs/hardware.md section 7) */
        if (arg[0] > 1000000000ull) {
            st = -EINVAL;
            break;
        }
        tx8_engine_set_power_cap(d->engine, arg[0]);
        emu_log("queue %d (peer %d): power cap %llu mW", qi, q->owner,
                (unsigned long long)arg[0]);
        break;
    case TX8_MBOX_INJECT_FAULT: {
        uint64_t count = arg[2] ? arg[2] : 1;

        if (count > EMU_MAX_FAULT_COUNT) {
            st = -EINVAL;
            break;
        }
        switch (arg[0]) {
        case TX8_FAULT_NONE:
            q->f_hang = q->f_error = q->f_slow_count = q->f_slow_ms = 0;
            q->f_bad_record = q->f_bad_lease = q->f_take_on_reset = 0;
            break;
        case TX8_FAULT_HANG:
            q->f_hang = (unsigned)count;
            break;
        case TX8_FAULT_SLOW:
            if (arg[1] == 0 || arg[1] > EMU_MAX_SLOW_MS) {
                st = -EINVAL;
                break;
            }
            q->f_slow_ms = (unsigned)arg[1];
            q->f_slow_count = (unsigned)count;
            break;
        case TX8_FAULT_ERROR:
            q->f_error = (unsigned)count;
            break;
        case TX8_FAULT_CRASH:
            emu_log("fault injection: crash requested by peer %d", q->owner);
            _exit(EMU_CRASH_EXIT);
        case TX8_FAULT_BAD_RECORD:
            q->f_bad_record = (unsigned)count;
            break;
        case TX8_FAULT_BAD_LEASE:
            q->f_bad_lease = (unsigned)count;
            break;
        case TX8_FAULT_TAKE_ON_RESET:
            q->f_take_on_reset = (unsigned)count;
            break;
        case TX8_FAULT_RESTART: {
            uint64_t boot_id = d->ctrl->boot_id;

            /* a new device: new boot_id, the queue's jobs gone unreported */
            while (boot_id == d->ctrl->boot_id)
                if (getrandom(&boot_id, sizeof(boot_id), 0) != sizeof(boot_id))
                    boot_id = now_ns();
            __atomic_store_n(&d->ctrl->boot_id, boot_id, __ATOMIC_RELEASE);
            if (!q->running)
                queue_reset(d, qi, false, 0, &ret1);
            ret1 = 0;
            break;
        }
        case TX8_FAULT_STOP:
        case TX8_FAULT_BAD_CAPS:
            if (arg[1] == 0 || arg[1] > EMU_MAX_SLOW_MS) {
                st = -EINVAL;
                break;
            }
            if (arg[0] == TX8_FAULT_STOP) {
                d->stop_until = now_ns() + arg[1] * 1000000ull;
                break;
            }
            if (!d->caps_restore_at)
                d->caps_saved = d->ctrl->caps;
            d->caps_restore_at = now_ns() + arg[1] * 1000000ull;
            /* sizes past the memory, sums that wrap, counts out of range */
            d->ctrl->caps.mem_size = 1ull << 62;
            d->ctrl->caps.heap_size = UINT64_MAX - TX8_PAGE_SIZE;
            d->ctrl->caps.max_queues = 1000;
            d->ctrl->caps.max_ranges = 100000;
            d->ctrl->caps.num_cores = 0;
            d->ctrl->caps.max_cmd_size = 3;
            break;
        default:
            st = -EINVAL;
            break;
        }
        if (st == 0)
            emu_log("queue %d (peer %d): fault injected: kind %llu param %llu count %llu", qi,
                    q->owner, (unsigned long long)arg[0], (unsigned long long)arg[1],
                    (unsigned long long)count);
        break;
    }
    default:
        st = -EINVAL;
        break;
    }
    emu_debug("queue %d (peer %d): mailbox %s(%u) 0x%llx 0x%llx -> %d 0x%llx", qi, q->owner,
              mbox_name(cmd), cmd, (unsigned long long)arg[0], (unsigned long long)arg[1], st,
              (unsigned long long)ret0);
    publish_queue_counters(d, qi);
    mbox_reply(d, qi, req, st, ret0, ret1);
}

/* ------------------------------------------------------------------------ */
/* Interface to the transport                                                */
/* ------------------------------------------------------------------------ */

void dev_doorbell(struct emu_dev *d, unsigned vector)
{
    pthread_mutex_lock(&d->lock);
    if (vector == TX8_DEV_VEC_MBOX) {
        for (int qi = 0; qi < TX8_MAX_QUEUES; qi++)
            if (d->q[qi].owner >= 0 && !d->q[qi].closing)
                handle_mbox(d, qi);
    }
    /* Any vector makes the executor look at the rings. */
    d->kick = true;
    pthread_cond_signal(&d->cond);
    pthread_mutex_unlock(&d->lock);
}

int dev_attach_peer(struct emu_dev *d, int32_t peer, int32_t pid, const int efd[TX8_NUM_VECTORS])
{
    int qi, found = -EBUSY;

    pthread_mutex_lock(&d->lock);
    for (qi = 0; qi < TX8_MAX_QUEUES; qi++) {
        struct emu_queue *q = &d->q[qi];

        if (q->owner >= 0)
            continue;
        queue_clear(q);
        queue_wipe_shm(d, qi);
        q->owner = peer;
        q->owner_pid = pid > 0 ? pid : 0;
        for (int v = 0; v < TX8_NUM_VECTORS; v++)
            q->irq_fd[v] = efd[v];
        q->state = TX8_QUEUE_ACTIVE;
        publish_queue(d, qi);
        found = qi;
        break;
    }
    pthread_mutex_unlock(&d->lock);
    return found;
}

void dev_detach_peer(struct emu_dev *d, int qi)
{
    struct emu_queue *q;

    if (qi < 0 || qi >= TX8_MAX_QUEUES)
        return;
    pthread_mutex_lock(&d->lock);
    q = &d->q[qi];
    for (int v = 0; v < TX8_NUM_VECTORS; v++)
        q->irq_fd[v] = -1;
    q->closing = true;
    if (q->running) {
        q->abort = 1; /* the executor tears the queue down */
        q->state = TX8_QUEUE_STOPPED;
        __atomic_store_n(&qshm(d, qi)->state, q->state, __ATOMIC_RELEASE);
    } else {
        queue_teardown(d, qi);
    }
    pthread_mutex_unlock(&d->lock);
}

void dev_tick(struct emu_dev *d)
{
    uint64_t now = now_ns();

    /* Busy time of a running job counts as it passes, so that utilisation
     * read over short intervals is right also for long jobs. */
    pthread_mutex_lock(&d->lock);
    if (d->caps_restore_at && now >= d->caps_restore_at) {
        d->ctrl->caps = d->caps_saved;
        d->caps_restore_at = 0;
        emu_log("fault injection: capabilities restored");
    }
    if (d->stop_until) {
        if (now < d->stop_until) {
            pthread_mutex_unlock(&d->lock); /* silent: no clock, no heartbeat */
            return;
        }
        d->stop_until = 0;
        emu_log("fault injection: the device answers again");
        for (int qi = 0; qi < TX8_MAX_QUEUES; qi++)
            if (d->q[qi].owner >= 0 && !d->q[qi].closing)
                handle_mbox(d, qi);
        d->kick = true;
        pthread_cond_signal(&d->cond);
    }
    for (int qi = 0; qi < TX8_MAX_QUEUES; qi++) {
        struct emu_queue *q = &d->q[qi];

        if (!q->running || now <= q->acct_ns)
            continue;
        q->busy_ns += now - q->acct_ns;
        cnt_add(&d->ctrl->counters.busy_ns, now - q->acct_ns);
        q->acct_ns = now;
        __atomic_store_n(&qshm(d, qi)->busy_ns, q->busy_ns, __ATOMIC_RELAXED);
    }
    power_tick(d, now);
    pthread_mutex_unlock(&d->lock);
    __atomic_store_n(&d->ctrl->clock_ns, now - d->t0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&d->ctrl->heartbeat, 1, __ATOMIC_RELEASE);
}

unsigned dev_cores(const struct emu_dev *d)
{
    return tx8_engine_cores(d->engine);
}

static void init_ctrl(struct emu_dev *d, const struct emu_dev_config *cfg)
{
    struct tx8_ctrl *c = d->ctrl;
    struct tx8_caps *caps = &c->caps;
    uint64_t boot_id = 0;

    memset(d->mem, 0, TX8_CTRL_SIZE);
    c->counters.clock_permille = 1000;
    tx8_engine_set_power_cap(d->engine, d->power.cap_mw);
    if (getrandom(&boot_id, sizeof(boot_id), 0) != sizeof(boot_id))
        boot_id = now_ns() ^ ((uint64_t)getpid() << 32);

    caps->mem_size = d->mem_size;
    caps->heap_offset = TX8_CTRL_SIZE;
    caps->heap_size = d->mem_size - TX8_CTRL_SIZE;
    caps->num_cores = tx8_engine_cores(d->engine);
    caps->dtypes = TX8_DTYPE_BIT(TX8_DTYPE_F32) | TX8_DTYPE_BIT(TX8_DTYPE_F16) |
                   TX8_DTYPE_BIT(TX8_DTYPE_BF16) | TX8_DTYPE_BIT(TX8_DTYPE_I8) |
                   TX8_DTYPE_BIT(TX8_DTYPE_I32);
    caps->flags = TX8_CAP_SPARSE | TX8_CAP_RESET | TX8_CAP_FAULT_INJECT | TX8_CAP_KV_BLOCK |
                  TX8_CAP_ABORT_JOB | TX8_CAP_FP8;
    if (tx8_engine_isa(d->engine) == TX8_ISA_AVX512 || tx8_engine_isa(d->engine) == TX8_ISA_AMX)
        caps->flags |= TX8_CAP_INT8_DOT;
    caps->max_queues = TX8_MAX_QUEUES;
    caps->sq_entries = TX8_SQ_ENTRIES;
    caps->cq_entries = TX8_CQ_ENTRIES;
    caps->max_ranges = TX8_JOB_MAX_RANGES;
    caps->max_cmd_size = TX8_ENGINE_MAX_CMD_SIZE;
    caps->sparse_block = TX8_SPARSE_BLOCK;
    caps->max_topk = TX8_ENGINE_MAX_TOPK;
    caps->core_clock_hz = 1000000000ull;
    snprintf(caps->name, sizeof(caps->name), "TX8 (tx8-emu)");
    caps->numa_node = cfg->numa_node >= 0 ? (uint32_t)cfg->numa_node : UINT32_MAX;

    c->ctrl_size = TX8_CTRL_SIZE;
    c->boot_id = boot_id;
    for (int qi = 0; qi < TX8_MAX_QUEUES; qi++)
        publish_queue(d, qi);
    heap_publish(&d->heap, d->mem);
    dev_tick(d);
    __atomic_store_n(&c->if_version, (uint32_t)TX8_IF_VERSION, __ATOMIC_RELAXED);
    __atomic_store_n(&c->signature, TX8_SIGNATURE, __ATOMIC_RELEASE);
    __atomic_store_n(&c->state, (uint32_t)TX8_STATE_READY, __ATOMIC_RELEASE);
}

int dev_create(struct emu_dev **out, const struct emu_dev_config *cfg)
{
    struct tx8_engine_config ecfg;
    struct emu_dev *d;
    int rc;

    if (!cfg || !cfg->mem || cfg->mem_size < TX8_MIN_MEMORY)
        return -EINVAL;
    d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    pthread_mutex_init(&d->lock, NULL);
    {
        pthread_condattr_t ca;

        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&d->cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    d->mem = cfg->mem;
    d->mem_size = cfg->mem_size;
    d->mem_fd = cfg->mem_fd;
    d->ctrl = (struct tx8_ctrl *)d->mem;
    d->faults = cfg->faults;
    d->t0 = now_ns();
    for (int qi = 0; qi < TX8_MAX_QUEUES; qi++)
        queue_clear(&d->q[qi]);
    heap_init(&d->heap, TX8_CTRL_SIZE, d->mem_size);

    memset(&ecfg, 0, sizeof(ecfg));
    ecfg.cores = cfg->cores;
    ecfg.numa_node = cfg->numa_node;
    ecfg.expert_cache_bytes = cfg->expert_cache_bytes;
    ecfg.isa = TX8_ISA_AUTO;
    rc = tx8_engine_create(&d->engine, d->mem, d->mem_size, TX8_CTRL_SIZE, &ecfg,
                           &d->ctrl->counters);
    if (rc < 0) {
        pthread_cond_destroy(&d->cond);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return rc;
    }
    /* profiling records share the completions' clock (ns since d->t0) */
    tx8_engine_set_clock_base(d->engine, d->t0);
    {
        struct tx8_power_model pm;

        if (cfg->power.clock_mhz > 0)
            pm = cfg->power;
        else
            tx8_power_defaults(&pm); /* a config without a model */
        tx8_engine_set_power(d->engine, &pm);
        d->power.static_mw = pm.static_mw;
        d->power.cap_mw = (uint64_t)pm.cap_mw;
    }
    init_ctrl(d, cfg);
    rc = pthread_create(&d->executor, NULL, executor_main, d);
    if (rc) {
        dev_destroy(d);
        return -rc;
    }
    d->executor_started = true;
    *out = d;
    return 0;
}

void dev_destroy(struct emu_dev *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->lock);
    d->stop = true;
    for (int qi = 0; qi < TX8_MAX_QUEUES; qi++) {
        d->q[qi].abort = 1;
        for (int v = 0; v < TX8_NUM_VECTORS; v++)
            d->q[qi].irq_fd[v] = -1;
    }
    pthread_cond_broadcast(&d->cond);
    pthread_mutex_unlock(&d->lock);
    if (d->executor_started)
        pthread_join(d->executor, NULL);
    __atomic_store_n(&d->ctrl->state, (uint32_t)TX8_STATE_OFF, __ATOMIC_RELEASE);
    tx8_engine_destroy(d->engine);
    pthread_cond_destroy(&d->cond);
    pthread_mutex_destroy(&d->lock);
    free(d);
}
