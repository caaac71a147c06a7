/* SPDX-License-Identifier: MIT */
/*
 * Server-sent events in OpenAI's streaming format: every event is one line
 * "data: {chunk JSON}" and a blank line; the stream ends with
 * "data: [DONE]". Chat streams start with a chunk whose delta carries the
 * role, then one chunk per piece of text, then a chunk with an empty delta
 * and the finish_reason (and, with stream_options.include_usage, a chunk
 * with no choices and the usage). A request that fails or is stopped by a
 * shutdown ends with an event {"error": {...}} before [DONE]. With n > 1
 * (choices.c) every choice goes through these chunks, with its index, the
 * choices taking turns; the usage chunk and [DONE] come after the last
 * choice's finish chunk.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

enum { PH_HEAD, PH_BODY, PH_USAGE, PH_DONE, PH_END };

static int event(char *json, char **ev, size_t *evlen)
{
    if (!json)
        return -1;
    size_t n = strlen(json);
    char *e = malloc(n + 9);
    if (!e) {
        free(json);
        return -1;
    }
    memcpy(e, "data: ", 6);
    memcpy(e + 6, json, n);
    memcpy(e + 6 + n, "\n\n", 3);
    free(json);
    *ev = e;
    *evlen = n + 8;
    return 1;
}

/* Choice c's next event: 1 with *ev (*failed: an error event), 2 none yet,
 * 3 the choice has ended (its last chunk went out), -1 on failure or when
 * the client went away. */
static int choice_event(struct srv *S, struct request *c, char **ev, size_t *evlen, int *failed)
{
    struct sse_state *st = &c->sse;
    if (st->phase == PH_END)
        return 3;
    if (st->phase == PH_HEAD) {
        st->phase = PH_BODY;
        if (c->chat)
            return event(api_chunk_json(S, c, "", 0, 1, NULL, 0), ev, evlen);
    }
    if (c->parse_output) { /* reasoning, content, tool calls (chat_reply.c) */
        char *j = srv_chat_stream_delta(S, c, st, c->state == RQ_DONE && !c->err_status);
        st->sent = c->out_len;
        if (j)
            return event(j, ev, evlen);
    } else if (c->out_len > st->sent) {
        char *j = api_chunk_json(S, c, c->out + st->sent, c->out_len - st->sent, 0, NULL, 0);
        st->sent = c->out_len;
        return event(j, ev, evlen);
    }
    if (c->state == RQ_DONE) {
        char *j;
        if (c->err_status == 499)
            return -1; /* the client went away: nobody to tell */
        if (c->err_status)
            j = api_error_json(c->err_status, "%s", c->err);
        else
            j = api_chunk_json(S, c, NULL, 0, 0, srv_chat_stream_finish(c, st), 0);
        *failed = c->err_status != 0;
        st->phase = PH_END;
        return event(j, ev, evlen);
    }
    return 2;
}

int sse_next_event(struct srv *S, struct request *r, struct sse_state *st, char **ev,
                   size_t *evlen)
{
    *ev = NULL;
    *evlen = 0;
    switch (st->phase) {
    case PH_HEAD:
        st->phase = PH_BODY;
        /* fall through */
    case PH_BODY:
        break;
    case PH_USAGE:
        st->phase = PH_DONE;
        if (r->include_usage)
            return event(api_chunk_json(S, r, NULL, 0, 0, NULL, 1), ev, evlen);
        /* fall through */
    case PH_DONE:
        st->phase = PH_END;
        *ev = strdup("data: [DONE]\n\n");
        *evlen = 14;
        return *ev ? 1 : -1;
    default:
        return 0;
    }
    /* the choices in turn (n > 1), from the one after the last that spoke */
    int n = choices_count(r), ended = 0;
    for (int k = 0; k < n; k++) {
        int i = (int)((st->sent + (size_t)k) % (size_t)n), failed = 0;
        int rc = choice_event(S, choices_get(r, i), ev, evlen, &failed);
        if (rc == 3) {
            ended++;
            continue;
        }
        if (rc == 2)
            continue;
        st->sent = (size_t)(i + 1) % (size_t)n; /* the stream's: the next choice to ask */
        if (rc == 1 && failed)
            st->phase = PH_DONE; /* an error event: then [DONE] */
        return rc;
    }
    if (ended < n)
        return 2;
    st->phase = PH_USAGE;
    return sse_next_event(S, r, st, ev, evlen);
}
