/* SPDX-License-Identifier: MIT */
/* tx-top: attaching to emulated devices (read-only libtx device handles, in the background). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uapi/drm/tx8_accel.h>

#include "txtop.h"
#include "collect.h"

/* ------------------------------------------------------------------------ */
/* emu attachment                                                            */
/* ------------------------------------------------------------------------ */

void tt_emu_detach(struct tt_dev *d, const char *why, uint64_t now)
{
    if (d->emu)
        tx_device_close(d->emu);
    d->emu = NULL;
    d->own_peer = -1;
    d->ok = false;
    snprintf(d->error, sizeof(d->error), "%s", why);
    d->retry_ns = now + 2000000000ull;
}

/*
 * Attaching (the ivshmem handshake) runs in a thread of its own: a wedged
 * emulator that never answers must not freeze the screen. The job is
 * shared by the thread and the device; whoever lets go last frees it (and
 * closes a handle nobody took).
 */
struct attach_job {
    int refs;
    bool finished;
    char spec[300];
    int rc;
    tx_device_t *dev;
    struct tx_device_info info;
    char err[160];
};

static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

void tt_job_release(struct attach_job *j)
{
    bool last;

    pthread_mutex_lock(&attach_lock);
    last = --j->refs == 0;
    pthread_mutex_unlock(&attach_lock);
    if (last) {
        if (j->dev)
            tx_device_close(j->dev);
        free(j);
    }
}

static void *attach_main(void *arg)
{
    struct attach_job *j = arg;
    tx_device_t *dev = NULL;
    int rc = tx_device_open(j->spec, &dev);

    if (rc == 0) {
        rc = tx_device_info(dev, &j->info);
        if (rc < 0) {
            snprintf(j->err, sizeof(j->err), "%s", tx_last_error());
            tx_device_close(dev);
            dev = NULL;
        }
    } else {
        snprintf(j->err, sizeof(j->err), "%s", tx_last_error());
    }
    j->rc = rc;
    j->dev = dev;
    pthread_mutex_lock(&attach_lock);
    j->finished = true;
    pthread_mutex_unlock(&attach_lock);
    tt_job_release(j);
    return NULL;
}

/* Start an attach (if due) or collect its result; never blocks. */
void tt_emu_attach(struct tt_dev *d, uint64_t now)
{
    struct attach_job *j = d->attach;
    pthread_attr_t attr;
    pthread_t t;
    bool finished;

    if (d->emu)
        return;
    if (j) {
        pthread_mutex_lock(&attach_lock);
        finished = j->finished;
        pthread_mutex_unlock(&attach_lock);
        if (!finished)
            return;
        d->attach = NULL;
        if (j->rc < 0 || !j->dev) {
            tt_emu_detach(d, j->err[0] ? j->err : "cannot attach", now);
            tt_job_release(j);
            return;
        }
        d->emu = j->dev;
        j->dev = NULL;
        j->info.name[sizeof(j->info.name) - 1] = 0;
        if (j->info.name[0])
            snprintf(d->name, sizeof(d->name), "%s", j->info.name);
        d->if_version = j->info.if_version;
        d->has_if = true;
        d->cores = j->info.num_cores;
        d->has_cores = true;
        d->boot_id = j->info.boot_id;
        d->own_peer = j->info.client_id;
        d->heartbeat = 0;
        d->heartbeat_ns = now;
        d->error[0] = 0;
        tt_job_release(j);
        return;
    }
    if (now < d->retry_ns)
        return;
    j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->refs = 2;
    tt_scopy(j->spec, sizeof(j->spec), d->spec);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, attach_main, j) != 0) {
        pthread_attr_destroy(&attr);
        free(j);
        tt_emu_detach(d, "cannot start a thread", now);
        return;
    }
    pthread_attr_destroy(&attr);
    d->attach = j;
    snprintf(d->error, sizeof(d->error), "attaching to the emulator...");
}

void tt_attach(struct tt_state *s, unsigned wait_ms)
{
    uint64_t now = tt_now_ns(), until = now + (uint64_t)wait_ms * 1000000ull;

    for (size_t i = 0; i < s->ndev; i++)
        if (!strcmp(s->devs[i].backend, "emu"))
            tt_emu_attach(&s->devs[i], now);
    for (;;) {
        bool pending = false;

        now = tt_now_ns();
        for (size_t i = 0; i < s->ndev; i++)
            if (s->devs[i].attach) {
                tt_emu_attach(&s->devs[i], now);
                pending |= s->devs[i].attach != NULL;
            }
        if (!pending || now >= until || tt_stop)
            return;
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}
