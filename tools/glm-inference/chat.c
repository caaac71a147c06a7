/* SPDX-License-Identifier: MIT */
/* glm-inference -i: the interactive chat (docs/glm-inference.md, "Chat"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glm_inference.h"

/*
 * The chat loop. Every turn renders the whole conversation through the
 * model's chat template (earlier reasoning dropped, contents stripped, as
 * the template does), keeps the common prefix of the KV cache and
 * evaluates only the rest. When the conversation no longer fits the
 * context, the oldest turns are dropped (said on stderr) and the
 * conversation is rendered again; a single message that cannot fit is
 * refused and the chat goes on. Lines are read whole (getline).
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

int run_chat(glm_model_t *m, glm_session_t *s, const struct opts *o, struct glm_sampling *smp)
{
    int n_ctx = glm_session_n_ctx(s), rc = 0;
    unsigned flags = o->no_think ? TX_CHAT_NO_THINKING : 0;
    struct chat c = {NULL, NULL, 0, 0};
    int32_t *cache = malloc(sizeof(int32_t) * (size_t)n_ctx * 2), *out = cache + n_ctx;
    int n_cache = 0;
    char *line = NULL;
    size_t lcap = 0;
    if (!cache) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    if (glm_session_pos(s) > 0) {
        /* the one-shot prompt before is not a turn of this conversation */
        glm_session_reset(s);
    }
    if (o->system && chat_push(&c, "system", (char *)o->system, 0))
        goto oom;
    for (;;) {
        fprintf(stderr, "\n> ");
        ssize_t L = getline(&line, &lcap, stdin);
        if (L < 0)
            break;
        while (L && (line[L - 1] == '\n' || line[L - 1] == '\r'))
            line[--L] = 0;
        if (!L)
            continue;
        char *u = strdup(line);
        if (!u || chat_push(&c, "user", u, 1)) {
            free(u);
            goto oom;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        /* a message that cannot fit even alone is refused, the history kept */
        {
            size_t first = o->system ? 1 : 0;
            struct tx_chat_message alone[2];
            size_t na = 0;
            if (first)
                alone[na++] = c.msg[0];
            alone[na++] = c.msg[c.n - 1];
            if (glm_chat_encode(m, alone, na, flags, &ids, &n)) {
                log_err("chat");
                rc = 1;
                goto done;
            }
            free(ids);
            ids = NULL;
            if (n >= (size_t)n_ctx) {
                fprintf(stderr,
                        "%s: this message renders to %zu tokens and the context has %d "
                        "positions (-c): not sent\n",
                        prog, n, n_ctx);
                chat_drop(&c, c.n - 1);
                continue;
            }
        }
        for (;;) {
            if (glm_chat_encode(m, c.msg, c.n, flags, &ids, &n)) {
                log_err("chat");
                rc = 1;
                goto done;
            }
            if (n < (size_t)n_ctx)
                break; /* fits, with room for at least one generated token */
            free(ids);
            ids = NULL;
            size_t first = o->system ? 1 : 0;
            if (c.n - first <= 1) { /* the new message alone */
                fprintf(stderr,
                        "%s: this message renders to %zu tokens and the context has %d "
                        "positions (-c): not sent\n",
                        prog, n, n_ctx);
                chat_drop(&c, c.n - 1);
                break;
            }
            /* context shift by turns: drop the oldest turn and render again */
            fprintf(stderr, "%s: context full (%zu of %d positions): dropping the oldest turn\n",
                    prog, n, n_ctx);
            chat_drop(&c, first);
            while (c.n > first + 1 && strcmp(c.msg[first].role, "user"))
                chat_drop(&c, first);
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
            goto done;
        }
        char *reply = NULL;
        size_t rl = 0;
        char err[256];
        if (tx_tokenizer_decode(glm_model_tokenizer(m), out,
                                (size_t)(n_out < n_ctx ? n_out : n_ctx), 0, &reply, &rl, err,
                                sizeof(err))) {
            fprintf(stderr, "%s: decode: %s\n", prog, err);
            rc = 1;
            goto done;
        }
        if (chat_push(&c, "assistant", reply, 1)) {
            free(reply);
            goto oom;
        }
        if (t.stop == GLM_STOP_CONTEXT)
            fprintf(stderr,
                    "\n%s: the context is full (%d positions): the reply was cut; the next turn "
                    "drops the oldest turns\n",
                    prog, n_ctx);
        if (interrupted) {
            fputc('\n', stdout);
            fflush(stdout);
            print_perf(&t);
            rc = 130;
            goto done;
        }
        smp->seed++;
    }
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
