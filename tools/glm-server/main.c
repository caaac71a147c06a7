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

    /* signals: handled by sigwait in this thread only; every thread started
     * from here on inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    rc = 1;
    if (mdev_open(prog, o->device, S->devs, GLM_EP_MAX_DEVICES, &S->n_devs))
        return 1;
    S->dev = S->devs[0];
    glm_precision_plan_t plan;
    glm_plan_golden(&plan);
    if (o->precision && glm_plan_parse(o->precision, &plan)) {
        fprintf(stderr, "%s: --precision: %s\n", prog, tx_last_error());
        mdev_close(S->devs, S->n_devs);
        return 2;
    }
    for (int i = 0; i < S->n_devs; i++)
        if (glm_plan_set(S->devs[i], &plan)) {
            fprintf(stderr, "%s: precision: %s\n", prog, tx_last_error());
            goto out;
        }
    double t0 = srv_now();
    struct glm_load_options lopt;
    memset(&lopt, 0, sizeof(lopt));
    if (o->batch_invariant)
        lopt.flags |= GLM_LOAD_BATCH_INVARIANT;
    /* several devices: every expert its own group, balanced by size */
    /* device 0 keeps room for every slot's KV cache (allocated after the load) */
    uint64_t kv_reserve =
        S->n_devs > 1 ? mdev_kv_reserve(o->checkpoint, o->parallel, o->ctx_size, cache_k, cache_v)
                      : 0;
    if (mdev_load(S->devs, S->n_devs, o->checkpoint, &lopt, 0, kv_reserve, &S->m)) {
        fprintf(stderr, "%s: cannot load %s: %s\n", prog, o->checkpoint, tx_last_error());
        goto out;
    }
    const struct glm_config *cfg = glm_model_config(S->m);
    S->tok = glm_model_tokenizer(S->m);
    if (!S->tok) {
        fprintf(stderr, "%s: %s has no usable tokenizer; the server needs one\n", prog,
                o->checkpoint);
        goto out;
    }
    if ((cache_k || cache_v) &&
        glm_model_set_cache_types(S->m, (glm_cache_type_t)cache_k, (glm_cache_type_t)cache_v)) {
        fprintf(stderr, "%s: --cache-type-k/-v: %s\n", prog, tx_last_error());
        rc = 2;
        goto out_model;
    }
    if (fmt)
        glm_model_set_chat_format(S->m, fmt);
    S->vocab = cfg->vocab_size;
    S->sample_vocab = glm_model_sample_vocab(S->m);
    S->n_stop_ids = glm_model_stop_tokens(S->m, S->stop_ids, 16);
    if (S->n_stop_ids > 16)
        S->n_stop_ids = 16;
    struct tx_device_info di;
    S->max_topk = tx_device_info(S->dev, &di) == 0 && di.max_topk ? (int)di.max_topk : 4096;
    int max_ctx = cfg->max_position_embeddings > 0 ? cfg->max_position_embeddings : 4096;
    if (!o->ctx_size)
        o->ctx_size = max_ctx < 4096 ? max_ctx : 4096;
    if (o->ctx_size > max_ctx) {
        fprintf(stderr, "%s: --ctx-size %d exceeds the model's max_position_embeddings %d\n", prog,
                o->ctx_size, max_ctx);
        rc = 2;
        goto out;
    }
    /* --alias a,b: the id is the first name; every one is accepted as "model" */
    if (o->alias)
        snprintf(S->model_id, sizeof(S->model_id), "%.*s", (int)strcspn(o->alias, ","), o->alias);
    else
        snprintf(S->model_id, sizeof(S->model_id), "%s", glm_model_name(S->m));
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->cv, NULL);
    S->mx.started_wall = (long long)time(NULL);
    if (sched_start(S))
        goto out_sessions;
    if (http_start(S)) {
        sched_stop(S);
        goto out_model;
    }
    {
        struct glm_model_info mi;
        glm_model_info(S->m, &mi);
        char pb[200];
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
    while (sigwait(&set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
        ;
    fprintf(stderr, "%s: %s: no new connections; finishing the running requests (at most %d s)\n",
            prog, sig == SIGTERM ? "SIGTERM" : "SIGINT", o->shutdown_grace_ms / 1000);
    http_quiesce(S);
    sched_stop(S); /* every request done, sessions freed */
    http_stop(S);
    fprintf(stderr, "%s: %llu requests served (%llu tokens generated); device released\n", prog,
            (unsigned long long)S->mx.requests_ok, (unsigned long long)S->mx.completion_tokens);
    rc = 0;
    goto out_model;
out_sessions:
    for (int i = 0; i < o->parallel; i++)
        if (S->slots[i].s)
            glm_session_free(S->slots[i].s);
out_model:
    mdev_print_stats(prog, S->m);
    glm_model_free(S->m);
    S->m = NULL;
out:
    if (S->m)
        glm_model_free(S->m);
    mdev_close(S->devs, S->n_devs);
    return rc;
}
