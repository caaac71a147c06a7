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

int run_chat(glm_model_t *m, glm_session_t *s, const struct opts *o, struct glm_sampling *smp)
{
    int n_ctx = glm_session_n_ctx(s), rc = 0;
    unsigned flags = o->no_think ? TX_CHAT_NO_THINKING : 0;
    struct chat c = {NULL, NULL, 0, 0};
    int32_t *cache = malloc(sizeof(int32_t) * (size_t)n_ctx * 2), *out = cache + n_ctx;
    int n_cache = 0;
    char *line = NULL;
    size_t lcap = 0, first = o->system ? 1 : 0;
    struct glm_timings total;
    memset(&total, 0, sizeof(total));
    if (!cache) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    if (glm_session_pos(s) > 0) {
        /* the one-shot prompt before is not a turn of this conversation */
        glm_session_reset(s);
    }
    set_signals(on_chat_signal, 0); /* no SA_RESTART: getline returns EINTR */
    interrupted = 0;
    if (o->system && chat_push(&c, "system", (char *)o->system, 0))
        goto oom;
    for (;;) {
        char *msg = NULL;
        int r = read_message(&line, &lcap, &msg);
        if (r < 0) {
            rc = 130; /* Ctrl-C at the prompt, SIGTERM, SIGHUP */
            break;
        }
        if (r == 0)
            break; /* end of input */
        enum chat_cmd cmd = chat_cmd(msg);
        if (cmd == CHAT_EXIT || (cmd == CHAT_SAY && !*msg)) {
            free(msg);
            if (cmd == CHAT_EXIT)
                break;
            continue;
        }
        if (cmd == CHAT_CLEAR) {
            free(msg);
            while (c.n > first)
                chat_drop(&c, c.n - 1);
            n_cache = 0;
            glm_session_reset(s);
            fprintf(stderr, "[chat cleared]\n");
            continue;
        }
        if (cmd == CHAT_REGEN) {
            free(msg);
            if (c.n <= first || strcmp(c.msg[c.n - 1].role, "assistant")) {
                fprintf(stderr, "%s: /regen: no reply to regenerate\n", prog);
                continue;
            }
            chat_drop(&c, c.n - 1); /* the last user message is answered again */
        } else {
            if (chat_push(&c, "user", msg, 1)) {
                free(msg);
                goto oom;
            }
            int tl = too_long_alone(m, &c, flags, n_ctx, first);
            if (tl < 0) {
                rc = 1;
                break;
            }
            if (tl)
                continue;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        if (chat_render(m, &c, flags, n_ctx, first, &ids, &n)) {
            rc = 1;
            break;
        }
        if (!ids)
            continue;
        /* reuse the common prefix of the cache; evaluate at least one token */
        size_t k = 0;
        while (k < (size_t)n_cache && k < n && cache[k] == ids[k])
            k++;
        if (k == n)
            k--;
        glm_session_truncate(s, (int)k);
        fprintf(stderr, "[chat: %zu tokens, %zu reused from the cache]\n", n, k);
        struct glm_generate_params gp;
        memset(&gp, 0, sizeof(gp));
        gp.prompt = ids + k;
        gp.n_prompt = (int)(n - k);
        gp.n_predict = o->n_predict;
        gp.sampling = *smp;
        gp.on_token = on_token;
        struct glm_timings t;
        int n_out = 0;
        int grc = glm_generate(s, &gp, out, n_ctx, &n_out, &t);
        /* the cache holds the rendered ids, then what was generated */
        memcpy(cache, ids, n * sizeof(int32_t));
        int pos = glm_session_pos(s);
        for (int i = 0; i < n_out && (int)n + i < n_ctx; i++)
            cache[n + (size_t)i] = out[i];
        n_cache = pos;
        free(ids);
        if (grc) {
            log_rc("generate", grc);
            rc = 1;
            break;
        }
        add_timings(&total, &t);
        char *reply = NULL;
        size_t rl = 0;
        char err[256];
        if (tx_tokenizer_decode(glm_model_tokenizer(m), out,
                                (size_t)(n_out < n_ctx ? n_out : n_ctx), 0, &reply, &rl, err,
                                sizeof(err))) {
            fprintf(stderr, "%s: decode: %s\n", prog, err);
            rc = 1;
            break;
        }
        /* a reply cut by Ctrl-C stays in the conversation as it was shown */
        if (chat_push(&c, "assistant", reply, 1)) {
            free(reply);
            goto oom;
        }
        if (t.stop == GLM_STOP_CONTEXT)
            fprintf(stderr,
                    "\n%s: the context is full (%d positions): the reply was cut; the next turn "
                    "drops the oldest turns\n",
                    prog, n_ctx);
        smp->seed++;
        if (stdout_closed)
            break;
        fputc('\n', stdout); /* each reply on its own lines, as llama-cli */
        fflush(stdout);
        if (interrupted == SIGINT) {
            fprintf(stderr, "[reply stopped: Ctrl-C again at the prompt ends the chat]\n");
            interrupted = 0;
        } else if (interrupted) {
            rc = 130; /* SIGTERM, SIGHUP */
            break;
        }
    }
    fputc('\n', stderr);
    print_perf(&total);
    goto done;
oom:
    fprintf(stderr, "%s: out of memory\n", prog);
    rc = 1;
done:
    free(line);
    free(cache);
    chat_free(&c);
    return rc;
}
