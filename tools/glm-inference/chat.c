/* SPDX-License-Identifier: MIT */
/* glm-inference -i: the interactive chat (docs/glm-inference.md, "Chat"). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "glm_inference.h"

/*
 * The chat loop, as llama-cli's conversation mode (-i, -cnv). Every turn
 * renders the whole conversation through the model's chat template
 * (glm_chat_encode: earlier reasoning dropped, contents stripped, as the
 * template does), keeps the common prefix of the KV cache and evaluates
 * only the rest. When the conversation no longer fits the context, the
 * oldest turns are dropped (said on stderr) and the conversation is
 * rendered again; a single message that cannot fit is refused and the chat
 * goes on.
 *
 * Input: one message per line from stdin, a terminal or a pipe (a
 * here-doc scripts a conversation); a line ending in '\' continues on the
 * next. /exit ends the chat, /regen replaces the last reply with a new
 * one, /clear forgets the conversation (the system message kept). Ctrl-C
 * during a reply stops it and returns to the prompt; Ctrl-C at the prompt
 * (or SIGTERM, SIGHUP) ends the chat with the timings, exit 130. End of
 * input and /exit print the timings too, exit 0.
 */
struct chat {
    struct tx_chat_message *msg;
    char **own; /* strings owned, per message (NULL: not owned) */
    size_t n, cap;
};

static int chat_push(struct chat *c, const char *role, char *text, int owned)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        void *a = realloc(c->msg, cap * sizeof(*c->msg)), *b = NULL;
        if (a)
            c->msg = a;
        b = a ? realloc(c->own, cap * sizeof(*c->own)) : NULL;
        if (!a || !b)
            return -1;
        c->own = b;
        c->cap = cap;
    }
    c->msg[c->n] = (struct tx_chat_message){role, text, NULL};
    c->own[c->n] = owned ? text : NULL;
    c->n++;
    return 0;
}

static void chat_drop(struct chat *c, size_t i)
{
    free(c->own[i]);
    memmove(c->msg + i, c->msg + i + 1, (c->n - i - 1) * sizeof(*c->msg));
    memmove(c->own + i, c->own + i + 1, (c->n - i - 1) * sizeof(*c->own));
    c->n--;
}

static void chat_free(struct chat *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->own[i]);
    free(c->msg);
    free(c->own);
}

/* the chat's signals: a flag only (no SA_RESTART, so that a read at the
 * prompt returns EINTR), the handler kept for the next Ctrl-C */
static void on_chat_signal(int sig)
{
    interrupted = sig;
}

/* One message: a line, or lines joined while they end in '\'. 1: *msg
 * (malloc'd, without the newline), 0: end of input, -1: a signal. */
static int read_message(char **line, size_t *lcap, char **msg)
{
    char *m = NULL;
    size_t mlen = 0;
    for (;;) {
        fprintf(stderr, m ? "... " : "\n> ");
        if (interrupted) { /* a signal since the reply ended */
            free(m);
            return -1;
        }
        errno = 0;
        ssize_t L = getline(line, lcap, stdin);
        if (L < 0) {
            int eintr = errno == EINTR || interrupted;
            clearerr(stdin);
            if (eintr || !m) {
                free(m);
                return eintr ? -1 : 0;
            }
            break; /* the last line ended in '\': what came so far */
        }
        while (L && ((*line)[L - 1] == '\n' || (*line)[L - 1] == '\r'))
            (*line)[--L] = 0;
        int more = L && (*line)[L - 1] == '\\';
        if (more)
            (*line)[--L] = 0;
        char *n = realloc(m, mlen + (size_t)L + 2);
        if (!n) {
            free(m);
            return -1;
        }
        m = n;
        if (mlen)
            m[mlen++] = '\n';
        memcpy(m + mlen, *line, (size_t)L);
        mlen += (size_t)L;
        m[mlen] = 0;
        if (!more)
            break;
    }
    *msg = m;
    return 1;
}

/* the whole chat's timing lines: the turns' figures added up */
static void add_timings(struct glm_timings *sum, const struct glm_timings *t)
{
    sum->load_ms = t->load_ms;
    sum->prompt_ms += t->prompt_ms;
    sum->n_prompt += t->n_prompt;
    sum->eval_ms += t->eval_ms;
    sum->n_eval += t->n_eval;
    sum->total_ms += t->total_ms;
    sum->device_ms += t->device_ms;
    sum->macs += t->macs;
    sum->prompt_tps = sum->prompt_ms > 0 ? sum->n_prompt * 1e3 / sum->prompt_ms : 0;
    sum->eval_tps = sum->eval_ms > 0 ? sum->n_eval * 1e3 / sum->eval_ms : 0;
}

/* The conversation rendered so that it fits the context (the oldest turns
 * dropped); *ids NULL when the newest message cannot fit even alone (it is
 * dropped, said on stderr). 0, or -1 (error printed). */
static int chat_render(glm_model_t *m, struct chat *c, unsigned flags, int n_ctx, size_t first,
                       int32_t **ids, size_t *n)
{
    *ids = NULL;
    for (;;) {
        if (gi_chat_encode(m, c->msg, c->n, flags, ids, n)) {
            log_err("chat");
            return -1;
        }
        if (*n < (size_t)n_ctx)
            return 0; /* fits, with room for at least one generated token */
        free(*ids);
        *ids = NULL;
        if (c->n - first <= 1) { /* the new message alone */
            fprintf(stderr,
                    "%s: this message renders to %zu tokens and the context has %d "
                    "positions (-c): not sent\n",
                    prog, *n, n_ctx);
            chat_drop(c, c->n - 1);
            return 0;
        }
        /* context shift by turns: drop the oldest turn and render again */
        fprintf(stderr, "%s: context full (%zu of %d positions): dropping the oldest turn\n", prog,
                *n, n_ctx);
        chat_drop(c, first);
        while (c->n > first + 1 && strcmp(c->msg[first].role, "user"))
            chat_drop(c, first);
    }
}

/* the newest user message alone (with the system message) does not fit:
 * it is refused, the history kept. 1: refused, 0: fits, -1: error */
static int too_long_alone(glm_model_t *m, struct chat *c, unsigned flags, int n_ctx, size_t first)
{
    struct tx_chat_message alone[2];
    size_t na = 0, n = 0;
    int32_t *ids = NULL;
    if (first)
        alone[na++] = c->msg[0];
    alone[na++] = c->msg[c->n - 1];
    if (gi_chat_encode(m, alone, na, flags, &ids, &n)) {
        log_err("chat");
        return -1;
    }
    free(ids);
    if (n < (size_t)n_ctx)
        return 0;
    fprintf(stderr,
            "%s: this message renders to %zu tokens and the context has %d positions (-c): not "
            "sent\n",
            prog, n, n_ctx);
    chat_drop(c, c->n - 1);
    return 1;
}

/* what a line asks for */
enum chat_cmd { CHAT_SAY, CHAT_EXIT, CHAT_REGEN, CHAT_CLEAR };

static enum chat_cmd chat_cmd(const char *msg)
{
    if (!strcmp(msg, "/exit"))
        return CHAT_EXIT;
    if (!strcmp(msg, "/regen"))
        return CHAT_REGEN;
    if (!strcmp(msg, "/clear"))
        return CHAT_CLEAR;
    return CHAT_SAY;
}

/* one chat: the conversation, the token ids the KV cache holds, the
 * turns' timings added up */
struct chat_run {
    glm_model_t *m;
    glm_session_t *s;
    const struct opts *o;
    struct glm_sampling *smp;
    struct chat c;
    int n_ctx, n_cache;
    unsigned flags;
    size_t first;         /* 1 with a system message */
    int32_t *cache, *out; /* n_ctx ids each */
    struct glm_timings total;
};

/* The reply to the conversation as it stands: rendered to fit, the common
 * prefix of the cache reused, generated (streamed to stdout) and added to
 * the conversation. 2: replied, 0: nothing could be sent (said why), 1: an
 * error (said), -1: out of memory */
static int chat_reply(struct chat_run *cr)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (chat_render(cr->m, &cr->c, cr->flags, cr->n_ctx, cr->first, &ids, &n))
        return 1;
    if (!ids)
        return 0;
    /* reuse the common prefix of the cache; evaluate at least one token */
    size_t k = 0;
    while (k < (size_t)cr->n_cache && k < n && cr->cache[k] == ids[k])
        k++;
    if (k == n)
        k--;
    glm_session_truncate(cr->s, (int)k);
    fprintf(stderr, "[chat: %zu tokens, %zu reused from the cache]\n", n, k);
    struct glm_generate_params gp;
    memset(&gp, 0, sizeof(gp));
    gp.prompt = ids + k;
    gp.n_prompt = (int)(n - k);
    gp.n_predict = cr->o->n_predict;
    gp.sampling = *cr->smp;
    gp.on_token = on_token;
    if (cr->o->spec_mtp) { /* --spec-type mtp: each reply drafts too */
        gp.spec_draft_max = cr->o->draft_max ? cr->o->draft_max : 3;
        gp.spec_mode = cr->o->spec_mode;
        gp.spec_p_min = cr->o->draft_p_min;
    }
    struct glm_timings t;
    int n_out = 0;
    int grc = glm_generate(cr->s, &gp, cr->out, cr->n_ctx, &n_out, &t);
    /* the cache holds the rendered ids, then what was generated */
    memcpy(cr->cache, ids, n * sizeof(int32_t));
    int pos = glm_session_pos(cr->s);
    for (int i = 0; i < n_out && (int)n + i < cr->n_ctx; i++)
        cr->cache[n + (size_t)i] = cr->out[i];
    cr->n_cache = pos;
    free(ids);
    if (grc) {
        log_rc("generate", grc);
        return 1;
    }
    add_timings(&cr->total, &t);
    char *reply = NULL;
    size_t rl = 0;
    char err[256];
    if (tx_tokenizer_decode(glm_model_tokenizer(cr->m), cr->out,
                            (size_t)(n_out < cr->n_ctx ? n_out : cr->n_ctx), 0, &reply, &rl, err,
                            sizeof(err))) {
        fprintf(stderr, "%s: decode: %s\n", prog, err);
        return 1;
    }
    /* a reply cut by Ctrl-C stays in the conversation as it was shown */
    if (chat_push(&cr->c, "assistant", reply, 1)) {
        free(reply);
        return -1;
    }
    if (t.stop == GLM_STOP_CONTEXT)
        fprintf(stderr,
                "\n%s: the context is full (%d positions): the reply was cut; the next turn "
                "drops the oldest turns\n",
                prog, cr->n_ctx);
    cr->smp->seed++;
    return 2;
}

/* A line typed: a message, or /clear, /regen (/exit and empty lines are
 * the loop's). 1: a reply is due, 0: nothing to say, -1: out of memory,
 * -2: an error (said). msg is taken. */
static int chat_line(struct chat_run *cr, char *msg)
{
    enum chat_cmd cmd = chat_cmd(msg);
    if (cmd == CHAT_CLEAR) {
        free(msg);
        while (cr->c.n > cr->first)
            chat_drop(&cr->c, cr->c.n - 1);
        cr->n_cache = 0;
        glm_session_reset(cr->s);
        fprintf(stderr, "[chat cleared]\n");
        return 0;
    }
    if (cmd == CHAT_REGEN) {
        free(msg);
        if (cr->c.n <= cr->first || strcmp(cr->c.msg[cr->c.n - 1].role, "assistant")) {
            fprintf(stderr, "%s: /regen: no reply to regenerate\n", prog);
            return 0;
        }
        chat_drop(&cr->c, cr->c.n - 1); /* the last user message is answered again */
        return 1;
    }
    if (chat_push(&cr->c, "user", msg, 1)) {
        free(msg);
        return -1;
    }
    int tl = too_long_alone(cr->m, &cr->c, cr->flags, cr->n_ctx, cr->first);
    return tl < 0 ? -2 : !tl;
}

int run_chat(glm_model_t *m, glm_session_t *s, const struct opts *o, struct glm_sampling *smp)
{
    struct chat_run cr = {.m = m, .s = s, .o = o, .smp = smp, .n_ctx = glm_session_n_ctx(s)};
    cr.flags = o->no_think ? TX_CHAT_NO_THINKING : 0;
    cr.first = o->system ? 1 : 0;
    cr.cache = malloc(sizeof(int32_t) * (size_t)cr.n_ctx * 2);
    cr.out = cr.cache + cr.n_ctx;
    char *line = NULL;
    size_t lcap = 0;
    int rc = 0;
    if (!cr.cache) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    if (glm_session_pos(s) > 0) {
        /* the one-shot prompt before is not a turn of this conversation */
        glm_session_reset(s);
    }
    set_signals(on_chat_signal, 0); /* no SA_RESTART: getline returns EINTR */
    interrupted = 0;
    if (o->system && chat_push(&cr.c, "system", (char *)o->system, 0))
        rc = -1;
    while (!rc) {
        char *msg = NULL;
        int r = read_message(&line, &lcap, &msg);
        if (r <= 0) {
            rc = r < 0 ? 130 : 0; /* Ctrl-C at the prompt, SIGTERM, SIGHUP; end of input */
            break;
        }
        if (chat_cmd(msg) == CHAT_EXIT || !*msg) {
            int done = chat_cmd(msg) == CHAT_EXIT;
            free(msg);
            if (done)
                break;
            continue;
        }
        r = chat_line(&cr, msg);
        if (r == 1)
            r = chat_reply(&cr);
        else if (r == -2)
            r = 1;
        if (r == 0)
            continue; /* nothing was sent */
        if (r != 2) {
            rc = r; /* 1: said; -1: out of memory */
            break;
        }
        if (stdout_closed)
            break;
        fputc('\n', stdout); /* each reply on its own lines, as llama-cli */
        fflush(stdout);
        if (interrupted == SIGINT) {
            fprintf(stderr, "[reply stopped: Ctrl-C again at the prompt ends the chat]\n");
            interrupted = 0;
        } else if (interrupted) {
            rc = 130; /* SIGTERM, SIGHUP */
        }
    }
    if (rc == -1) {
        fprintf(stderr, "%s: out of memory\n", prog);
        rc = 1;
    } else {
        fputc('\n', stderr);
        print_perf(&cr.total);
    }
    free(line);
    free(cr.cache);
    chat_free(&cr.c);
    return rc;
}
