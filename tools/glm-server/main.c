/* SPDX-License-Identifier: MIT */
/*
 * glm-server: OpenAI-compatible serving of a GLM .smd package on a TX8 with
 * continuous batching. Options use llama-server's names where it has them.
 * docs/glm-server.md.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <tx/tx.h>

#include "common/cli.h"
#include "common/device_list.h"
#include "server.h"

static const char *prog = "glm-server";

double srv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void srv_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms % 1000 * 1000000L;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

uint64_t srv_random64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) { /* not expected on Linux >= 3.17 */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
            ((uint64_t)getpid() << 32);
        v *= 0x9E3779B97F4A7C15ull;
    }
    return v;
}

void srv_log(const struct srv *S, const char *fmt, ...)
{
    (void)S;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static struct srv g;

int main(int argc, char **argv)
{
    struct srv *S = &g;
    struct srv_opts *o = &S->o;
    int cache_k, cache_v, fmt;
    int rc = srv_parse_options(o, &cache_k, &cache_v, &fmt, argc, argv);
    if (rc >= 0)
        return rc;
    o->cache_k = cache_k;
    o->cache_v = cache_v;
    o->chat_fmt = fmt;
    o->plan = o->precision;

    /* signals: handled by sigwait in this thread only; every thread started
     * from here on inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1); /* the scheduler: device lost, --exit-on-device-loss */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* under mpirun (ranks.c): ranks > 0 compute in here until rank 0 quits */
    rc = ranks_begin(S, &argc, &argv);
    if (rc >= 0)
        return rc;
    srv_sigbus_install(); /* a device restart revokes its mappings (sigbus.c) */
    S->main_thread = pthread_self();
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->cv, NULL);
    pthread_rwlock_init(&S->model_lock, NULL);

    /* the package's own chat template (or --chat-template-file), read from
     * the file: it does not depend on the device, and outlives reloads */
    if (!fmt && srv_chat_template_load(S, prog))
        return ranks_end(1);
    double t0 = srv_now();
    if (dev_up(S, 1)) {
        txc_chat_template_free(S->ct);
        return ranks_end(1);
    }
    const struct glm_config *cfg = glm_model_config(S->m);
    S->mx.started_wall = (long long)time(NULL);
    rc = 1;
    if (sched_start(S))
        goto out;
    if (http_start(S)) {
        sched_stop(S);
        goto out;
    }
    {
        struct glm_model_info mi;
        glm_model_info(S->m, &mi);
        char pb[200];
        glm_precision_plan_t plan;
        glm_plan_golden(&plan);
        if (o->precision)
            glm_plan_parse(o->precision, &plan);
        fprintf(stderr,
                "%s: model %s (%s) loaded in %.0f ms; plan %s; %d slots x %d tokens of context "
                "(KV %.1f MiB); batch %d tokens per pass\n",
                prog, S->model_id, glm_arch_name(cfg->arch), (srv_now() - t0) * 1e3,
                glm_plan_format(&plan, pb, sizeof(pb)), o->parallel, o->ctx_size,
                mi.kv_bytes / 1048576.0, o->batch_size);
        fprintf(stderr, "%s: listening on http://%s:%d (pid %d)%s\n", prog, o->host, o->port,
                (int)getpid(), o->api_key ? ", API key required" : "");
    }
    int sig = 0;
    for (;;) {
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            fprintf(stderr, "%s: SIGHUP: reopening the device and reloading %s\n", prog,
                    o->checkpoint);
            pthread_mutex_lock(&S->mu);
            S->reload_requested = 1;
            pthread_cond_signal(&S->cv);
            pthread_mutex_unlock(&S->mu);
            continue;
        }
        break;
    }
    if (sig == SIGUSR1)
        fprintf(stderr, "%s: %s: exiting with status 3\n", prog,
                ranks_broken() ? "an MPI rank was lost" : "device lost (--exit-on-device-loss)");
    else
        fprintf(stderr,
                "%s: %s: no new connections; finishing the running requests (at most %d s)\n",
                prog, sig == SIGTERM ? "SIGTERM" : "SIGINT", o->shutdown_grace_ms / 1000);
    http_quiesce(S);
    sched_stop(S); /* every request done */
    http_stop(S);
    fprintf(stderr, "%s: %llu requests served (%llu tokens generated); device released\n", prog,
            (unsigned long long)S->mx.requests_ok, (unsigned long long)S->mx.completion_tokens);
    rc = sig == SIGUSR1 ? 3 : 0;
out:
    if (S->m)
        mdev_print_stats(prog, S->m);
    dev_down(S);
    txc_chat_template_free(S->ct);
    S->ct = NULL;
    return ranks_end(rc); /* under mpirun: the other ranks quit too */
}
