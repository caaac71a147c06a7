/* SPDX-License-Identifier: MIT */
/*
 * glm-server's device and model: opening the device(s), loading the
 * package, the slots' sessions and the warm-up pass (dev_up); noticing a
 * lost or hung device (dev_heartbeat: an empty job every 250 ms while
 * idle, within a 2 s deadline, so that /health turns 503 within a second
 * of a loss); and serving again when the device comes back (dev_recover:
 * every second after a loss, or at once on SIGHUP), or exiting non-zero
 * with --exit-on-device-loss for a supervisor (systemd's
 * Restart=on-failure, config/glm-server.service).
 *
 * Only the scheduler thread opens, loads and frees. The HTTP threads use
 * the model (tokenising, chat templates) between dev_model_get and
 * dev_model_put: a read lock, which the reload takes for writing before it
 * frees the old model.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <common/device_list.h>

#include "server.h"

#define HEARTBEAT_EVERY_S 0.25
#define HEARTBEAT_TIMEOUT_NS 2000000000ll
#define RECOVER_EVERY_S 1.0

static tx_cmdbuf_t *g_nop;    /* the heartbeat's empty job */
static double g_next_beat;    /* monotonic seconds */
static double g_next_recover; /* after a loss */

/* At start-up (verbose) every failure is printed; while recovering, only
 * with --verbose (one attempt a second). */
static void log_err(struct srv *S, int verbose, const char *what)
{
    if (verbose)
        fprintf(stderr, "%s: %s: %s\n", ranks_prog(), what, tx_last_error());
    else
        srv_log(S, "%s: %s", what, tx_last_error());
}

static int sessions_up(struct srv *S, int verbose)
{
    for (int i = 0; i < S->o.parallel; i++) {
        struct glm_session_options so = {.n_ctx = S->o.ctx_size, .n_batch = S->o.batch_size};
        if (glm_session_create(S->m, &so, &S->slots[i].s)) {
            char what[96];
            snprintf(what, sizeof(what), "slot %d: cannot create a session of %d positions", i,
                     S->o.ctx_size);
            log_err(S, verbose, what);
            return -1;
        }
        char label[48];
        snprintf(label, sizeof(label), "%.16s_KV_slot%d", glm_model_name(S->m), i);
        glm_session_set_label(S->slots[i].s, label);
    }
    /* warm-up: the first pass converts the weights the plan needs (CONVERT)
     * and sizes the activations; do it now, not in the first request */
    glm_session_t *w = S->slots[0].s;
    int32_t ids[2] = {0, 0}, nx = -1;
    struct glm_sampling g = {.temperature = 0.0f, .top_p = 1.0f};
    struct glm_prefill_chunk ch = {w, ids, 1};
    if (glm_decode_batch_prefill(NULL, NULL, 0, NULL, NULL, &ch, 1) ||
        glm_decode_batch_prefill(&w, ids, 1, &g, &nx, NULL, 0)) {
        log_err(S, verbose, "warm-up pass failed");
        return -1;
    }
    glm_session_reset(w);
    glm_model_expert_stats_reset(S->m);
    return 0;
}

/* What the server keeps of the model: tokenizer, vocabulary, stop tokens,
 * the context of a slot (--ctx-size, checked against the model's). */
static int model_facts(struct srv *S)
{
    struct srv_opts *o = &S->o;
    const struct glm_config *cfg = glm_model_config(S->m);
    S->tok = glm_model_tokenizer(S->m);
    if (!S->tok) {
        fprintf(stderr, "glm-server: %s has no usable tokenizer; the server needs one\n",
                o->checkpoint);
        return -1;
    }
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
        fprintf(stderr, "glm-server: --ctx-size %d exceeds the model's max_position_embeddings %d\n",
                o->ctx_size, max_ctx);
        return -1;
    }
    snprintf(S->model_name, sizeof(S->model_name), "%s", glm_model_name(S->m));
    /* --alias a,b: the id is the first name; every one is accepted as "model" */
    if (o->alias)
        snprintf(S->model_id, sizeof(S->model_id), "%.*s", (int)strcspn(o->alias, ","), o->alias);
    else
        snprintf(S->model_id, sizeof(S->model_id), "%s", glm_model_name(S->m));
    return 0;
}

static int device_answers(const char *spec)
{
    tx_device_t *d = NULL;
    if (tx_device_open(spec, &d))
        return 0;
    /* a device that opens may still refuse work (tx8.ko keeps a restarted
     * device wedged until it is rebound): an empty job decides, and the
     * file is closed at once, so that the driver can be rebound */
    tx_cmdbuf_t *cb = NULL;
    tx_job_t job;
    struct tx_job_result res;
    int ok = !tx_cmdbuf_create(d, &cb) && !tx_cmd_nop(cb) && !tx_submit(d, cb, &job) &&
             !tx_wait(d, job, HEARTBEAT_TIMEOUT_NS, &res);
    if (cb)
        tx_cmdbuf_destroy(cb);
    tx_device_close(d);
    return ok;
}

/* Every device of --device (or the default one) answers; quietly: tried
 * once a second. */
static int devices_answer(const char *list)
{
    if (!list)
        return device_answers(NULL);
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", list);
    char *save = NULL;
    for (char *spec = strtok_r(buf, ",", &save); spec; spec = strtok_r(NULL, ",", &save))
        if (!device_answers(spec))
            return 0;
    return 1;
}

/* The device(s) of --device opened with the precision plan and the
 * package loaded onto them: S->devs, S->n_devs, *out. Under mpirun every
 * rank does this together (ranks.c): rank 0's model, or a worker's share
 * of the experts. 0, or -1 (said why) with the devices closed. */
int dev_load(struct srv *S, int verbose, glm_model_t **out)
{
    struct srv_opts *o = &S->o;
    *out = NULL;
    int ok = !mdev_open(ranks_prog(), o->device, S->devs, GLM_EP_MAX_DEVICES, &S->n_devs);
    glm_precision_plan_t plan;
    glm_plan_golden(&plan);
    if (ok && o->plan && glm_plan_parse(o->plan, &plan)) {
        log_err(S, verbose, "--precision");
        ok = 0;
    }
    for (int i = 0; ok && i < S->n_devs; i++)
        if (glm_plan_set(S->devs[i], &plan)) {
            log_err(S, verbose, "precision");
            ok = 0;
        }
    if (!ranks_agree(ok, verbose)) /* every rank's devices, or none: the load is collective */
        goto fail;
    S->dev = S->devs[0];
    struct glm_load_options lopt;
    memset(&lopt, 0, sizeof(lopt));
    if (o->batch_invariant)
        lopt.flags |= GLM_LOAD_BATCH_INVARIANT;
    if (o->spec_mtp)
        lopt.flags |= GLM_LOAD_MTP; /* --spec-type mtp: the MTP layer too */
    /* several devices: device 0 keeps room for every slot's KV cache */
    uint64_t kv_reserve =
        ranks_devices(S) > 1
            ? mdev_kv_reserve(o->checkpoint, o->parallel, o->ctx_size, o->cache_k, o->cache_v)
            : 0;
    if (ranks_load(S, &lopt, kv_reserve, out)) {
        char what[300];
        snprintf(what, sizeof(what), "cannot load %s", o->checkpoint);
        log_err(S, verbose, what);
        goto fail;
    }
    return 0;
fail:
    mdev_close(S->devs, S->n_devs);
    S->n_devs = 0;
    S->dev = NULL;
    return -1;
}

int dev_up(struct srv *S, int verbose)
{
    struct srv_opts *o = &S->o;
    glm_model_t *m = NULL;
    if (ranks_tell_load() || dev_load(S, verbose, &m)) /* under mpirun: every rank loads */
        return -1;
    if ((o->cache_k || o->cache_v) &&
        glm_model_set_cache_types(m, (glm_cache_type_t)o->cache_k, (glm_cache_type_t)o->cache_v)) {
        log_err(S, verbose, "--cache-type-k/-v");
        glm_model_free(m);
        goto fail;
    }
    if (o->chat_fmt)
        glm_model_set_chat_format(m, o->chat_fmt);
    S->m = m;
    if (model_facts(S))
        goto fail;
    if (tx_cmdbuf_create(S->dev, &g_nop) || tx_cmd_nop(g_nop)) {
        log_err(S, verbose, "heartbeat command buffer");
        goto fail;
    }
    if (sessions_up(S, verbose))
        goto fail;
    ranks_serving(S, 1); /* under mpirun: --rank-timeout from now on */
    return 0;
fail:
    dev_down(S);
    return -1;
}

void dev_down(struct srv *S)
{
    ranks_serving(S, 0);
    sched_forget_slots(S);
    for (int i = 0; i < SRV_MAX_PARALLEL; i++)
        if (S->slots[i].s) {
            glm_session_free(S->slots[i].s);
            S->slots[i].s = NULL;
        }
    if (g_nop)
        tx_cmdbuf_destroy(g_nop);
    g_nop = NULL;
    if (S->m)
        glm_model_free(S->m);
    S->m = NULL;
    S->tok = NULL;
    srv_grammar_vocab_drop(S);
    mdev_close(S->devs, S->n_devs);
    S->n_devs = 0;
    S->dev = NULL;
}

void dev_mark_lost(struct srv *S, const char *why)
{
    if (!S->dev_lost) {
        S->dev_lost = 1;
        snprintf(S->dev_lost_why, sizeof(S->dev_lost_why), "%s%s",
                 ranks_broken() ? "an MPI rank was lost: " : "", why);
        S->mx.device_lost_total++;
        g_next_recover = srv_now() + RECOVER_EVERY_S;
        fprintf(stderr, "glm-server: device lost: %s\n", S->dev_lost_why);
        /* a lost MPI rank (ranks.c) cannot come back: exit as for
         * --exit-on-device-loss */
        if (S->o.exit_on_device_loss || ranks_broken())
            pthread_kill(S->main_thread, SIGUSR1); /* main() exits non-zero */
    }
    sched_fail_all(S, 503, S->dev_lost_why);
}

int dev_heartbeat(struct srv *S, double now)
{
    if (S->dev_lost || !g_nop || now < g_next_beat)
        return S->dev_lost ? -1 : 0;
    g_next_beat = now + HEARTBEAT_EVERY_S;
    /* the scheduler is the device's only user: no lock needed for it, and
     * none held while the job runs */
    pthread_mutex_unlock(&S->mu);
    tx_job_t job;
    struct tx_job_result res;
    int rc = tx_submit(S->dev, g_nop, &job);
    if (!rc)
        rc = tx_wait(S->dev, job, HEARTBEAT_TIMEOUT_NS, &res);
    pthread_mutex_lock(&S->mu);
    if (rc == TX_OK && !srv_sigbus_seen())
        return 0;
    char why[256];
    if (srv_sigbus_seen())
        snprintf(why, sizeof(why), "the device's memory mappings were revoked (it restarted)");
    else if (rc == TX_ETIMEDOUT)
        snprintf(why, sizeof(why), "the device did not finish an empty job within %lld ms",
                 HEARTBEAT_TIMEOUT_NS / 1000000);
    else
        snprintf(why, sizeof(why), "%s", tx_last_error());
    dev_mark_lost(S, why);
    return -1;
}

/* srv.mu held on entry and exit; dropped while the device is reopened. */
int dev_recover(struct srv *S)
{
    double now = srv_now();
    if (!S->reload_requested && now < g_next_recover)
        return -1;
    int sighup = S->reload_requested;
    S->reload_requested = 0;
    if (!S->dev_lost)
        dev_mark_lost(S, "reloading the device and the model (SIGHUP)");
    pthread_mutex_unlock(&S->mu);

    /* nothing of the old device is in use: every request has ended and
     * the HTTP side takes the model under the read lock */
    pthread_rwlock_wrlock(&S->model_lock);
    dev_down(S);
    int rc = devices_answer(S->o.device) ? dev_up(S, 0) : -1;
    pthread_rwlock_unlock(&S->model_lock);

    pthread_mutex_lock(&S->mu);
    g_next_recover = srv_now() + RECOVER_EVERY_S;
    if (rc) {
        if (sighup)
            srv_log(S, "SIGHUP: the device is still not usable");
        return -1;
    }
    S->dev_lost = 0;
    S->dev_lost_why[0] = 0;
    srv_sigbus_clear(); /* the old mappings are gone with the old device */
    S->mx.device_reloads++;
    g_next_beat = 0;
    fprintf(stderr, "glm-server: device back: %s reloaded; serving again\n", S->o.checkpoint);
    return 0;
}

glm_model_t *dev_model_get(struct srv *S)
{
    pthread_rwlock_rdlock(&S->model_lock);
    if (!S->m) {
        pthread_rwlock_unlock(&S->model_lock);
        return NULL;
    }
    return S->m;
}

void dev_model_put(struct srv *S)
{
    pthread_rwlock_unlock(&S->model_lock);
}
