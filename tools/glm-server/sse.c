/* SPDX-License-Identifier: MIT */
/*
 * Server-sent events in OpenAI's streaming format: every event is one line
 * "data: {chunk JSON}" and a blank line; the stream ends with
 * "data: [DONE]". Chat streams start with a chunk whose delta carries the
 * role, then one chunk per piece of text, then a chunk with an empty delta
 * and the finish_reason (and, with stream_options.include_usage, a chunk
 * with no choices and the usage). A request that fails or is stopped by a
 * shutdown ends with an event {"error": {...}} before [DONE].
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

int sse_next_event(struct srv *S, struct request *r, struct sse_state *st, char **ev,
                   size_t *evlen)
{
    *ev = NULL;
    *evlen = 0;
    switch (st->phase) {
    case PH_HEAD:
        st->phase = PH_BODY;
        if (r->chat)
            return event(api_chunk_json(S, r, "", 0, 1, NULL, 0), ev, evlen);
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
    if (r->parse_output) { /* reasoning, content, tool calls (chat_reply.c) */
        char *j = srv_chat_stream_delta(S, r, st, r->state == RQ_DONE && !r->err_status);
        st->sent = r->out_len;
        if (j)
            return event(j, ev, evlen);
    } else if (r->out_len > st->sent) {
        char *j = api_chunk_json(S, r, r->out + st->sent, r->out_len - st->sent, 0, NULL, 0);
        st->sent = r->out_len;
        return event(j, ev, evlen);
    }
    if (r->state == RQ_DONE) {
        char *j;
        if (r->err_status == 499)
            return -1; /* the client went away: nobody to tell */
        if (r->err_status)
            j = api_error_json(r->err_status, "%s", r->err);
        else
            j = api_chunk_json(S, r, NULL, 0, 0, srv_chat_stream_finish(r, st), 0);
        st->phase = r->err_status ? PH_DONE : PH_USAGE;
        return event(j, ev, evlen);
    }
    return 2;
}
