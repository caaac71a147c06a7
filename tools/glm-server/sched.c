/* SPDX-License-Identifier: MIT */
/*
 * glm-server's scheduler: the one thread that drives the device.
 *
 * Slots: --parallel sessions, each with a KV cache of --ctx-size positions,
 * created at start-up (the KV memory is reserved once; a request that finds
 * no free slot waits in the queue and never disturbs the running ones).
 *
 * Each step is ONE device pass (glm_decode_batch_prefill): a decode row for
 * every slot that is generating (each with its own sampling parameters and
 * seed) plus, for requests being prefilled (oldest first), the next chunks
 * of their prompts -- at most --batch-size tokens in all. A long prompt therefore
 * delays the running streams by one chunk per step, never by its whole
 * prefill. The prompt's last token is fed as the request's first decode
 * row, so the first generated token is sampled on the device like every
 * other one.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prefix_store.h"
#include "server.h"

struct request *req_new(void)
{
    struct request *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->slot = -1;
    r->refs = 1; /* the HTTP side; the scheduler takes its own on submit */
    return r;
}

static void req_unref(struct request *r);

static void req_free(struct request *r)
{
    for (int i = 1; i < choices_count(r); i++) /* n > 1: choice 0's references */
        if (r->choice[i])
            req_unref(r->choice[i]);
    free(r->choice);
    free(r->lp);
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->out);
    free(r->text);
    json_object_put(r->co.tools);
    srv_grammar_free(r->gr);
    if (r->ts)
        tx_tokenizer_stream_free(r->ts);
    free(r);
}

/* srv.mu held */
static void req_unref(struct request *r)
{
    if (--r->refs == 0)
        req_free(r);
}

void sched_release(struct srv *S, struct request *r)
{
    pthread_mutex_lock(&S->mu);
    for (int i = 0; i < choices_count(r); i++) {
        struct request *c = choices_get(r, i);
        if (c->state != RQ_DONE && c->refs > 1) { /* submitted (the scheduler's reference) */
            c->cancelled = 1;
            pthread_cond_signal(&S->cv);
        }
    }
    req_unref(r);
    pthread_mutex_unlock(&S->mu);
}

int sched_submit(struct srv *S, struct request *r)
{
    pthread_mutex_lock(&S->mu);
    int room = S->o.queue_limit + (S->o.parallel - S->n_active), n = choices_count(r);
    if (S->stopping || S->dev_lost || S->q_len + n > room) {
        if (!S->stopping && !S->dev_lost)
            S->mx.rejected_queue_full++;
        pthread_mutex_unlock(&S->mu);
        return 503;
    }
    for (int i = 0; i < n; i++) { /* every choice (n > 1: choices.c) */
        struct request *c = choices_get(r, i);
        c->refs++;
        c->state = RQ_QUEUED;
        c->next = NULL;
        if (S->q_tail)
            S->q_tail->next = c;
        else
            S->q_head = c;
        S->q_tail = c;
        S->q_len++;
        S->mx.requests_total++;
        S->mx.prompt_tokens += (uint64_t)c->n_prompt;
    }
    pthread_cond_signal(&S->cv);
    pthread_mutex_unlock(&S->mu);
    return 0;
}

/* ---- output text --------------------------------------------------------- */

static int buf_append(char **b, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1)
            c *= 2;
        char *nb = realloc(*b, c);
        if (!nb)
            return -1;
        *b = nb;
        *cap = c;
    }
    memcpy(*b + *len, s, n);
    *len += n;
    (*b)[*len] = 0;
    return 0;
}

/* Publish r->text[0, n) as the confirmed output (n only grows). */
static void publish(struct srv *S, struct request *r, size_t n)
{
    if (n > r->out_len) {
        if (buf_append(&r->out, &r->out_len, &r->out_cap, r->text + r->out_len, n - r->out_len) ==
            0 && r->stream)
            http_wake(S, r);
    }
}

/* Bytes at the end of the text that may be the start of a stop string:
 * held back from the client until decided. */
static size_t stop_held(const struct request *r)
{
    size_t held = 0;
    for (int i = 0; i < r->n_stop; i++) {
        size_t sl = strlen(r->stop[i]);
        for (size_t k = sl - 1; k > held; k--)
            if (k <= r->text_len && !memcmp(r->text + r->text_len - k, r->stop[i], k)) {
                held = k;
                break;
            }
    }
    return held;
}

/* The first stop string in the text at or after byte from; its offset. */
static long stop_find(const struct request *r, size_t from)
{
    long best = -1;
    for (int i = 0; i < r->n_stop; i++) {
        const char *p =
            r->text_len ? memmem(r->text + from, r->text_len - from, r->stop[i], strlen(r->stop[i]))
                        : NULL;
        if (p && (best < 0 || p - r->text < best))
            best = p - r->text;
    }
    return best;
}

/* ---- finishing ----------------------------------------------------------- */

/* The slot's cache is forgotten (a failed pass may have left any KV). */
static void slot_forget(struct slot *sl)
{
    glm_session_reset(sl->s);
    sl->n_hist = 0;
}

static void slot_publish(struct srv *S, struct slot *sl);

/* srv.mu held. The request leaves its slot; a finished or cancelled one's
 * KV stays for the prefix cache (and its whole blocks go to the block
 * store), a failed one's is forgotten. */
static void slot_free(struct srv *S, struct request *r, int status)
{
    if (r->slot >= 0) {
        struct slot *sl = &S->slots[r->slot];
        if ((status != 0 && status != 499) || S->o.no_prefix_cache)
            slot_forget(sl);
        else if (r->cache_prompt)
            slot_publish(S, sl);
        sl->r = NULL;
        sl->last_used = srv_now();
        r->slot = -1;
        S->n_active--;
    }
}

/* The slot's session evaluated ids[0, n) at its end: its cache grows. */
static void slot_fed(struct slot *sl, const int32_t *ids, int n)
{
    if (sl->n_hist < 0)
        return;
    if (sl->n_hist + n > sl->cap_hist) {
        int cap = sl->cap_hist ? sl->cap_hist : 256;
        while (cap < sl->n_hist + n)
            cap *= 2;
        int32_t *h = realloc(sl->hist, (size_t)cap * sizeof(*h));
        if (!h) { /* no record: the cache cannot be trusted, and is dropped */
            sl->n_hist = -1;
            return;
        }
        sl->hist = h;
        sl->cap_hist = cap;
    }
    memcpy(sl->hist + sl->n_hist, ids, (size_t)n * sizeof(*ids));
    sl->n_hist += n;
}

/* ---- the block store (prefix_store.c) ------------------------------------ */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* What makes a position's KV bits besides its tokens: the package, the
 * plan, the cache types, batch invariance, the session's row bytes */
static uint64_t kv_format(const struct srv *S, glm_session_t *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    const char *str[3] = {S->o.checkpoint, S->o.plan ? S->o.plan : "golden", S->model_name};
    for (int i = 0; i < 3; i++)
        h = fnv(h, str[i] ? str[i] : "", str[i] ? strlen(str[i]) + 1 : 1);
    uint64_t v[4] = {(uint64_t)S->o.cache_k, (uint64_t)S->o.cache_v, (uint64_t)S->o.batch_invariant,
                     glm_session_kv_bytes(s, 1)};
    return fnv(h, v, sizeof(v));
}

/* srv.mu held, no pass running: the slot's whole blocks into the store
 * (not after a device loss: its memory may be gone) */
static void slot_publish(struct srv *S, struct slot *sl)
{
    if (!S->ps || S->o.no_prefix_cache || S->dev_lost || srv_sigbus_seen() || sl->n_hist <= 0)
        return;
    int n = sl->n_hist < glm_session_pos(sl->s) ? sl->n_hist : glm_session_pos(sl->s);
    char err[256] = "";
    ps_set_format(S->ps, kv_format(S, sl->s));
    if (ps_publish(S->ps, sl->s, sl->hist, n, err, sizeof(err)))
        srv_log(S, "prefix cache: storing a slot's blocks: %s", err);
}

/* srv.mu held, admitting r to sl, which holds r's first `common` prompt
 * tokens: the stored blocks beyond them are copied in; the tokens sl now
 * holds */
static int slot_restore(struct srv *S, struct slot *sl, const struct request *r, int common)
{
    if (!S->ps || S->o.no_prefix_cache || !r->cache_prompt)
        return common;
    char err[256] = "";
    ps_set_format(S->ps, kv_format(S, sl->s));
    int got = ps_restore(S->ps, sl->s, r->prompt, r->n_prompt - 1, common, err, sizeof(err));
    if (err[0])
        srv_log(S, "prefix cache: copying blocks into a slot: %s", err);
    if (got != common) {
        sl->n_hist = 0;
        slot_fed(sl, r->prompt, got);
        if (sl->n_hist != got) { /* no record of them: start afresh */
            slot_forget(sl);
            got = 0;
        }
    }
    return got;
}

/* srv.mu not held (dev_down) */
void sched_forget_slots(struct srv *S)
{
    pthread_mutex_lock(&S->mu); /* /metrics reads the store's figures */
    ps_clear(S->ps);            /* the model is reloaded: its KV may differ */
    pthread_mutex_unlock(&S->mu);
    for (int i = 0; i < SRV_MAX_PARALLEL; i++) {
        free(S->slots[i].hist);
        S->slots[i].hist = NULL;
        S->slots[i].n_hist = S->slots[i].cap_hist = 0;
    }
}

/* The free slot for r: the one whose cache shares the longest prefix with
 * r's prompt (but its last token, which is r's first decode row), else the
 * least recently used, so that other conversations keep theirs (-1: none
 * free). *common: the shared tokens. */
static int slot_for(struct srv *S, const struct request *r, int *common)
{
    int best = -1, best_len = -1;
    for (int i = 0; i < S->o.parallel; i++) {
        const struct slot *sl = &S->slots[i];
        if (sl->r || sl->action) /* running, or a /slots action has it (slots.c) */
            continue;
        int l = 0;
        if (r->cache_prompt && !S->o.no_prefix_cache && sl->n_hist > 0) {
            int max = sl->n_hist < r->n_prompt - 1 ? sl->n_hist : r->n_prompt - 1;
            while (l < max && sl->hist[l] == r->prompt[l])
                l++;
        }
        if (l > best_len || (l == best_len && sl->last_used < S->slots[best].last_used)) {
            best = i;
            best_len = l;
        }
    }
    *common = best_len < 0 ? 0 : best_len;
    return best;
}

/* srv.mu held. finish: "stop"/"length"; or status != 0 with a message. */
static void finish(struct srv *S, struct request *r, const char *why, int status, const char *msg)
{
    if (r->state == RQ_DONE)
        return;
    if (why && r->ts) { /* what the stream decoder still holds */
        const char *t = NULL;
        size_t n = 0;
        if (tx_tokenizer_stream_flush(r->ts, &t, &n) == 0 && n)
            buf_append(&r->text, &r->text_len, &r->text_cap, t, n);
        long at = stop_find(r, r->out_len);
        if (at >= 0) {
            r->text_len = (size_t)at;
            why = "stop";
        }
        publish(S, r, r->text_len);
    }
    r->finish = why;
    r->err_status = status;
    if (msg)
        snprintf(r->err, sizeof(r->err), "%s", msg);
    r->state = RQ_DONE;
    r->t_done = srv_now();
    if (status == 0)
        S->mx.requests_ok++;
    else if (r->cancelled)
        S->mx.requests_cancelled++;
    else
        S->mx.requests_failed++;
    slot_free(S, r, status);
    if (r->ts) { /* done: the decoder (it refers to the model's tokenizer) goes now */
        tx_tokenizer_stream_free(r->ts);
        r->ts = NULL;
    }
    http_wake(S, r);
    req_unref(r); /* the scheduler's reference */
}

void sched_fail_all(struct srv *S, int status, const char *msg)
{
    while (S->q_head) {
        struct request *r = S->q_head;
        S->q_head = r->next;
        r->next = NULL;
        finish(S, r, NULL, status, msg);
    }
    S->q_tail = NULL;
    S->q_len = 0;
    for (int i = 0; i < S->o.parallel; i++)
        if (S->slots[i].r)
            finish(S, S->slots[i].r, NULL, status, msg);
}

static int is_stop_id(const struct srv *S, int32_t t)
{
    for (int i = 0; i < S->n_stop_ids; i++)
        if (S->stop_ids[i] == t)
            return 1;
    return 0;
}

/* A token drawn for r by the last pass (srv.mu held); logits: its row
 * when r asked for logprobs */
static void on_token(struct srv *S, struct request *r, int32_t tok, const float *logits,
                     double now)
{
    if (!r->t_first) {
        r->t_first = now;
        metrics_observe_ttft(S, now - r->t_arrive);
    } else {
        metrics_observe_itl(S, now - r->t_last);
    }
    r->t_last = now;
    if (is_stop_id(S, tok)) {
        finish(S, r, "stop", 0, NULL);
        return;
    }
    if (logits && lp_record(S, r, logits, tok)) {
        finish(S, r, NULL, 500, "out of host memory");
        return;
    }
    srv_grammar_accept(S, r, tok);
    r->n_completion++;
    S->mx.completion_tokens++;
    S->mx.win_tokens++;
    const char *t = NULL;
    size_t n = 0;
    if (tx_tokenizer_stream_put(r->ts, tok, &t, &n) == 0 && n) {
        size_t before = r->text_len;
        if (buf_append(&r->text, &r->text_len, &r->text_cap, t, n)) {
            finish(S, r, NULL, 500, "out of host memory");
            return;
        }
        if (r->n_stop) {
            size_t maxl = 0;
            for (int i = 0; i < r->n_stop; i++)
                if (strlen(r->stop[i]) > maxl)
                    maxl = strlen(r->stop[i]);
            size_t from = before > maxl ? before - maxl : 0;
            if (from < r->out_len)
                from = r->out_len;
            long at = stop_find(r, from);
            if (at >= 0) {
                r->text_len = (size_t)at;
                publish(S, r, r->text_len);
                r->finish = NULL;
                /* the stream decoder's held bytes are after the stop string */
                tx_tokenizer_stream_free(r->ts);
                r->ts = NULL;
                finish(S, r, "stop", 0, NULL);
                return;
            }
        }
        publish(S, r, r->text_len - stop_held(r));
    }
    struct slot *sl = &S->slots[r->slot];
    if (r->max_tokens >= 0 && r->n_completion >= r->max_tokens)
        finish(S, r, "length", 0, NULL);
    else if (glm_session_pos(sl->s) + 1 > glm_session_n_ctx(sl->s))
        finish(S, r, "length", 0, NULL);
    else
        r->cur = tok;
}

/* ---- the loop ------------------------------------------------------------ */

static void refresh_metrics(struct srv *S, double now)
{
    struct srv_metrics *x = &S->mx;
    double dt = now - x->win_t0;
    if (dt < 1.0)
        return;
    x->tokens_per_s = (double)x->win_tokens / dt;
    x->busy_ratio = x->win_busy / dt;
    x->win_t0 = now;
    x->win_tokens = 0;
    x->win_busy = 0;
    struct glm_model_info mi;
    if (glm_model_info(S->m, &mi) == 0)
        x->kv_bytes = mi.kv_bytes;
    struct glm_expert_stats *st = NULL;
    x->expert_std = -1;
    if (glm_model_expert_stats(S->m, &st) == 0 && st) {
        if (st->n_moe_layers > 0 && st->total > 0)
            x->expert_std = st->overall_std;
        glm_expert_stats_free(st);
    }
    struct tx_device_info di;
    struct tx_device_counters dc;
    x->has_energy = tx_device_info(S->dev, &di) == 0 && TX8_IF_MINOR(di.if_version) >= 8 &&
                    tx_device_counters(S->dev, &dc) == 0;
    if (x->has_energy) {
        x->energy_uj = dc.dev.energy_uj;
        x->energy_active_uj = dc.dev.energy_active_uj;
        x->power_mw = dc.dev.power_mw;
        x->power_avg_mw = dc.dev.power_avg_mw;
    }
    x->last_refresh = now;
}

static void admit(struct srv *S)
{
    while (S->q_head) {
        int common = 0;
        int free_slot = slot_for(S, S->q_head, &common);
        if (free_slot < 0)
            return;
        struct request *r = S->q_head;
        S->q_head = r->next;
        if (!S->q_head)
            S->q_tail = NULL;
        S->q_len--;
        r->next = NULL;
        r->ts = tx_tokenizer_stream_new(S->tok, 0);
        if (!r->ts) {
            finish(S, r, NULL, 500, "cannot create the token stream decoder");
            continue;
        }
        struct slot *sl = &S->slots[free_slot];
        sl->r = r;
        r->slot = free_slot;
        S->n_active++;
        if (common != sl->n_hist && glm_session_truncate(sl->s, common)) {
            srv_log(S, "slot %d: %s; its cache is dropped", free_slot, tx_last_error());
            common = 0;
            slot_forget(sl);
        }
        sl->n_hist = common;
        common = slot_restore(S, sl, r, common);
        r->n_fed = r->n_cached = common;
        S->mx.prompt_tokens_cached += (uint64_t)common;
        if (r->n_fed >= r->n_prompt - 1) {
            r->state = RQ_DECODE;
            r->cur = r->prompt[r->n_prompt - 1];
        } else {
            r->state = RQ_PREFILL;
        }
    }
}

/* Cancelled requests leave their slot (or the queue) now. */
static void reap_cancelled(struct srv *S)
{
    for (struct request **pp = &S->q_head; *pp;) {
        struct request *r = *pp;
        int drop = r->cancelled || S->stopping;
        if (!drop) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        S->q_len--;
        r->next = NULL;
        if (S->stopping && !r->cancelled)
            finish(S, r, NULL, 503, "the server is shutting down");
        else
            finish(S, r, NULL, 499, "the client went away");
    }
    S->q_tail = NULL;
    for (struct request *r = S->q_head; r; r = r->next)
        S->q_tail = r;
    int past = S->stopping && srv_now() > S->stop_deadline;
    for (int i = 0; i < S->o.parallel; i++) {
        struct request *r = S->slots[i].r;
        if (r && r->cancelled)
            finish(S, r, NULL, 499, "the client went away");
        else if (r && past)
            finish(S, r, NULL, 503, "the server is shutting down; generation stopped");
    }
}

static void *sched_main(void *arg)
{
    struct srv *S = arg;
    glm_session_t *dec_s[SRV_MAX_PARALLEL];
    struct request *dec_r[SRV_MAX_PARALLEL];
    int32_t dec_ids[SRV_MAX_PARALLEL], next[SRV_MAX_PARALLEL];
    int32_t spec_next[SRV_MAX_PARALLEL][GLM_SPEC_MAX_DRAFT + 1];
    int n_next[SRV_MAX_PARALLEL];
    struct glm_sampling smp[SRV_MAX_PARALLEL];
    struct glm_prefill_chunk chunks[SRV_MAX_PARALLEL];
    struct request *chunk_r[SRV_MAX_PARALLEL];
    float *lrow[SRV_MAX_PARALLEL];       /* the rows whose logits come back (logprobs) */
    float *lbuf[SRV_MAX_PARALLEL] = {0}; /* per slot, made on first use */
    pthread_mutex_lock(&S->mu);
    S->mx.win_t0 = srv_now();
    while (!S->sched_exit) {
        http_reap_gone(S);
        reap_cancelled(S);
        if (!S->stopping)
            admit(S);
        int nd = 0, np = 0;
        struct request *pre[SRV_MAX_PARALLEL];
        for (int i = 0; i < S->o.parallel; i++) {
            struct request *r = S->slots[i].r;
            if (!r)
                continue;
            if (r->state == RQ_DECODE) {
                dec_s[nd] = S->slots[i].s;
                dec_r[nd] = r;
                dec_ids[nd] = r->cur;
                smp[nd] = r->smp;
                lrow[nd] = NULL;
                if (r->logprobs && !lbuf[i])
                    lbuf[i] = malloc((size_t)S->vocab * sizeof(float));
                if (r->logprobs)
                    lrow[nd] = lbuf[i]; /* NULL (no memory): the request fails below */
                nd++;
            } else if (r->state == RQ_PREFILL) {
                pre[np++] = r;
            }
        }
        double now = srv_now();
        if (!nd && !np) {
            if (S->stopping && !S->q_head)
                break;
            if (S->dev_lost || S->reload_requested) {
                if (!S->stopping && dev_recover(S) == 0)
                    continue;
            } else if (dev_heartbeat(S, now) == 0) {
                refresh_metrics(S, now);
            }
            if (S->n_wake) { /* answer them before sleeping */
                pthread_mutex_unlock(&S->mu);
                http_wake_flush(S);
                pthread_mutex_lock(&S->mu);
                continue;
            }
            srv_cond_wait_ms(&S->cv, &S->mu, 200);
            continue;
        }
        /* prefill chunks, oldest request first, within the pass's token budget */
        for (int i = 1; i < np; i++)
            for (int j = i; j > 0 && pre[j]->t_arrive < pre[j - 1]->t_arrive; j--) {
                struct request *t = pre[j];
                pre[j] = pre[j - 1];
                pre[j - 1] = t;
            }
        int budget = S->o.batch_size - nd, nc = 0, rows = nd;
        if (budget < 1)
            budget = 1; /* the oldest prompt always advances */
        for (int i = 0; i < np && budget > 0; i++) {
            struct request *r = pre[i];
            int left = r->n_prompt - 1 - r->n_fed;
            int k = left < budget ? left : budget;
            chunks[nc] = (struct glm_prefill_chunk){S->slots[r->slot].s, r->prompt + r->n_fed, k};
            chunk_r[nc++] = r;
            r->refs++;
            budget -= k;
            rows += k;
        }
        for (int i = 0; i < nd; i++)
            dec_r[i]->refs++;
        pthread_mutex_unlock(&S->mu);
        http_wake_flush(S); /* the last pass's tokens go out during this one */
        for (int i = 0; i < nd; i++) /* constrained output: the allowed tokens */
            srv_grammar_mask(S, dec_r[i], dec_s[i]);

        double t0 = srv_now();
        /* --spec-type mtp: each decode slot drafts, one pass verifies; its
         * tokens in spec_next[i][0 .. n_next[i]) */
        int spec = S->o.spec_mtp && nd > 0;
        struct glm_spec_stats sp0[SRV_MAX_PARALLEL];
        for (int i = 0; spec && i < nd; i++)
            glm_session_spec_stats(dec_s[i], &sp0[i]);
        int rc = spec ? glm_decode_batch_spec(dec_s, dec_ids, nd, smp,
                                              S->o.draft_max ? S->o.draft_max : 3, spec_next[0],
                                              n_next, chunks, nc)
                      : glm_decode_batch_prefill_logits(dec_s, dec_ids, nd, smp, next, chunks,
                                                        nc, lrow);
        char msg[256] = "";
        if (rc)
            snprintf(msg, sizeof(msg), "device pass failed: %s", tx_last_error());
        double t1 = srv_now();
        /* sigbus.c; under mpirun, a lost rank (ranks.c) */
        int lost = rc == TX_EDEVICE_LOST || srv_sigbus_seen() || ranks_broken();
        if (lost && !rc)
            snprintf(msg, sizeof(msg), "the device's memory mappings were revoked (it restarted)");

        /* --ep-rebalance N: between two passes, by the live load counters */
        if (!rc && S->o.ep_rebalance > 0 && ranks_devices(S) > 1 &&
            (S->mx.passes + 1) % (uint64_t)S->o.ep_rebalance == 0 &&
            glm_model_ep_rebalance(S->m, 0))
            srv_log(S, "--ep-rebalance: %s", tx_last_error());
        pthread_mutex_lock(&S->mu);
        S->mx.passes++;
        S->mx.pass_rows += (uint64_t)rows;
        S->mx.busy_s += t1 - t0;
        S->mx.win_busy += t1 - t0;
        if (rc)
            srv_log(S, "%s", msg);
        if (!rc) { /* what each slot's session evaluated: its cache */
            for (int i = 0; i < nd; i++) {
                if (dec_r[i]->slot < 0)
                    continue;
                slot_fed(&S->slots[dec_r[i]->slot], &dec_ids[i], 1);
                if (spec) /* and the drafts it accepted */
                    slot_fed(&S->slots[dec_r[i]->slot], spec_next[i], n_next[i] - 1);
            }
            for (int i = 0; spec && i < nd; i++) {
                struct glm_spec_stats sp1;
                glm_session_spec_stats(dec_s[i], &sp1);
                S->mx.spec_drafted += sp1.drafted - sp0[i].drafted;
                S->mx.spec_accepted += sp1.accepted - sp0[i].accepted;
            }
            for (int j = 0; j < nc; j++)
                if (chunk_r[j]->slot >= 0)
                    slot_fed(&S->slots[chunk_r[j]->slot], chunks[j].ids, chunks[j].n);
        }
        if (lost)
            dev_mark_lost(S, msg); /* every request ends with 503 */
        for (int i = 0; i < nd; i++) {
            struct request *r = dec_r[i];
            if (r->state != RQ_DONE) {
                if (rc)
                    finish(S, r, NULL, 500, msg);
                else if (!spec && r->logprobs && !lrow[i])
                    finish(S, r, NULL, 500, "out of host memory for the logprobs");
                else if (!r->cancelled && !spec)
                    on_token(S, r, next[i], lrow[i], t1);
                /* logprobs are refused with --spec-type mtp (api.c) */
                for (int t = 0; spec && !rc && !r->cancelled && t < n_next[i]; t++)
                    if (r->state != RQ_DONE) /* it may finish within the step */
                        on_token(S, r, spec_next[i][t], NULL, t1);
            }
            req_unref(r);
        }
        for (int j = 0; j < nc; j++) {
            struct request *r = chunk_r[j];
            if (r->state != RQ_DONE) {
                if (rc) {
                    finish(S, r, NULL, 500, msg);
                } else {
                    r->n_fed += chunks[j].n;
                    if (r->n_fed >= r->n_prompt - 1) {
                        r->state = RQ_DECODE;
                        r->cur = r->prompt[r->n_prompt - 1];
                        if (r->cache_prompt) /* its prompt's blocks, for other slots now */
                            slot_publish(S, &S->slots[r->slot]);
                    }
                }
            }
            req_unref(r);
        }
        refresh_metrics(S, t1);
    }
    /* leaving: nothing may stay in a slot */
    for (int i = 0; i < S->o.parallel; i++)
        if (S->slots[i].r)
            finish(S, S->slots[i].r, NULL, 503, "the server is shutting down");
    S->sched_exit = 1;
    pthread_mutex_unlock(&S->mu);
    http_wake_flush(S);
    for (int i = 0; i < SRV_MAX_PARALLEL; i++)
        free(lbuf[i]);
    return NULL;
}

/* The device, the model and the slots' sessions are up (dev_up). */
int sched_start(struct srv *S)
{
    S->mx.started = srv_now();
    S->mx.expert_std = -1;
    if (!S->o.no_prefix_cache && S->o.cache_ram_mib != 0) {
        S->ps = ps_new(S->o.cache_ram_mib < 0 ? UINT64_MAX : (uint64_t)S->o.cache_ram_mib << 20);
        if (!S->ps) {
            fprintf(stderr, "glm-server: out of memory for the prefix cache\n");
            return -1;
        }
    }
    if (pthread_create(&S->sched_thread, NULL, sched_main, S)) {
        fprintf(stderr, "glm-server: cannot start the scheduler thread\n");
        return -1;
    }
    return 0;
}

/* After SIGTERM: the scheduler finishes the running requests (until the
 * grace deadline, then stops them) and exits (dev_down frees the rest). */
void sched_stop(struct srv *S)
{
    pthread_mutex_lock(&S->mu);
    S->stopping = 1;
    S->stop_deadline = srv_now() + S->o.shutdown_grace_ms / 1000.0;
    pthread_cond_signal(&S->cv);
    pthread_mutex_unlock(&S->mu);
    pthread_join(S->sched_thread, NULL);
    pthread_mutex_lock(&S->mu); /* /metrics may still read it */
    struct prefix_store *ps = S->ps;
    S->ps = NULL;
    pthread_mutex_unlock(&S->mu);
    ps_free(ps);
}
