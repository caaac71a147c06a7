/* SPDX-License-Identifier: MIT */
/*
 * glm-server: a chat reply's reasoning_content, content and tool_calls
 * (common/chat_output.h does the parsing), non-streamed and as stream
 * deltas, as vLLM (--reasoning-parser glm45, its tool parsers) and
 * llama-server return them. docs/glm-server.md, "Reasoning and tool calls".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_tokenizer.h>

#include "server.h"

#define PROMPT_TAIL 16 /* prompt tokens decoded to see whether <think> is open */

void srv_chat_output_setup(struct srv *S, json_object *o, struct request *r)
{
    json_object *v, *tc = NULL;
    r->parse_output = 1;
    r->co.reasoning = 1;
    /* llama-server's reasoning_format "none": the thoughts stay in content */
    if (json_object_object_get_ex(o, "reasoning_format", &v) &&
        json_object_is_type(v, json_type_string) && !strcmp(json_object_get_string(v), "none"))
        r->co.reasoning = 0;
    json_object_object_get_ex(o, "tool_choice", &tc);
    int none = tc && json_object_is_type(tc, json_type_string) &&
               !strcmp(json_object_get_string(tc), "none");
    if (!none && json_object_object_get_ex(o, "tools", &v) &&
        json_object_is_type(v, json_type_array) && json_object_array_length(v))
        r->co.tools = json_object_get(v);
    if (r->n_prompt > 0) {
        int k = r->n_prompt < PROMPT_TAIL ? r->n_prompt : PROMPT_TAIL;
        char *tail = NULL, err[128];
        size_t tl = 0;
        if (!tx_tokenizer_decode(S->tok, r->prompt + r->n_prompt - k, (size_t)k, 0, &tail, &tl,
                                 err, sizeof(err)))
            r->co.think_open = chat_prompt_think_open(tail, tl);
        free(tail);
    }
}

static const char *finish_of(const struct request *r, size_t calls)
{
    return calls && r->finish && !strcmp(r->finish, "stop") ? "tool_calls" : r->finish;
}

static void log_malformed(struct srv *S, const struct request *r, const struct chat_parsed *p)
{
    if (p->malformed)
        srv_log(S, "%s: the model's tool call did not parse: returned as content", r->id);
}

json_object *srv_chat_message(struct srv *S, struct request *r, const char **finish)
{
    json_object *msg = json_object_new_object();
    json_object_object_add(msg, "role", json_object_new_string("assistant"));
    struct chat_parsed p;
    *finish = r->finish;
    if (!r->parse_output ||
        chat_output_parse(&r->co, r->id, r->out ? r->out : "", r->out_len, 1, &p)) {
        json_object_object_add(msg, "content",
                               json_object_new_string_len(r->out ? r->out : "", (int)r->out_len));
        return msg;
    }
    log_malformed(S, r, &p);
    size_t nc = json_object_array_length(p.calls);
    json_object_object_add(msg, "content",
                           nc && !p.content_len
                               ? NULL
                               : json_object_new_string_len(p.content, (int)p.content_len));
    if (p.has_reasoning)
        json_object_object_add(msg, "reasoning_content",
                               json_object_new_string_len(p.reasoning, (int)p.reasoning_len));
    if (nc)
        json_object_object_add(msg, "tool_calls", json_object_get(p.calls));
    *finish = finish_of(r, nc);
    chat_parsed_free(&p);
    return msg;
}

/* A call's first delta: index, id, type and name; arguments "" when the
 * call is still open (name given), else the closed call's c whole. */
static json_object *call_head(const struct request *r, size_t i, json_object *c,
                              const char *name)
{
    if (c) {
        c = json_object_get(c);
        json_object_object_add(c, "index", json_object_new_int((int)i));
        return c;
    }
    char id[96];
    chat_call_id(id, sizeof(id), r->id, i);
    json_object *h = json_object_new_object(), *f = json_object_new_object();
    json_object_object_add(h, "index", json_object_new_int((int)i));
    json_object_object_add(h, "id", json_object_new_string(id));
    json_object_object_add(h, "type", json_object_new_string("function"));
    json_object_object_add(f, "name", json_object_new_string(name));
    json_object_object_add(f, "arguments", json_object_new_string(""));
    json_object_object_add(h, "function", f);
    return h;
}

/* The rest of closed call c's arguments after the sent bytes. */
static json_object *args_delta(json_object *c, size_t i, size_t sent)
{
    json_object *fn = NULL, *args = NULL;
    json_object_object_get_ex(c, "function", &fn);
    json_object_object_get_ex(fn, "arguments", &args);
    const char *t = args ? json_object_get_string(args) : "";
    size_t n = strlen(t);
    json_object *d = json_object_new_object(), *f = json_object_new_object();
    json_object_object_add(d, "index", json_object_new_int((int)i));
    json_object_object_add(f, "arguments", json_object_new_string(sent < n ? t + sent : ""));
    json_object_object_add(d, "function", f);
    return d;
}

char *srv_chat_stream_delta(struct srv *S, struct request *r, struct sse_state *st, int final)
{
    struct chat_parsed p;
    if (chat_output_parse(&r->co, r->id, r->out ? r->out : "", r->out_len, final, &p))
        return NULL;
    json_object *d = json_object_new_object();
    int any = 0;
    if (p.reasoning_len > st->r_sent) {
        json_object_object_add(d, "reasoning_content",
                               json_object_new_string_len(p.reasoning + st->r_sent,
                                                          (int)(p.reasoning_len - st->r_sent)));
        st->r_sent = p.reasoning_len;
        any = 1;
    }
    if (p.content_len > st->c_sent) {
        json_object_object_add(d, "content",
                               json_object_new_string_len(p.content + st->c_sent,
                                                          (int)(p.content_len - st->c_sent)));
        st->c_sent = p.content_len;
        any = 1;
    }
    size_t nc = json_object_array_length(p.calls);
    json_object *a = json_object_new_array();
    if (nc > st->calls_sent) {
        /* vLLM's tool-call deltas: a call whose head went out gets the rest
         * of its arguments; a call not announced yet comes whole (index, id,
         * type, name, arguments) */
        for (size_t i = st->calls_sent; i < nc; i++) {
            json_object *c = json_object_array_get_idx(p.calls, i);
            if (st->open_call == i + 1)
                json_object_array_add(a, args_delta(c, i, st->args_sent));
            else
                json_object_array_add(a, call_head(r, i, c, NULL));
        }
        st->calls_sent = nc;
        st->open_call = 0;
        st->args_sent = 0;
    } else if (p.partial && p.partial_name) {
        /* the call being generated: its head with empty arguments first
         * (alone), then its arguments as they grow */
        if (st->open_call != nc + 1) {
            if (!any) {
                json_object_array_add(a, call_head(r, nc, NULL, p.partial_name));
                st->open_call = nc + 1;
                st->args_sent = 0;
            }
        } else if (p.partial_args && strlen(p.partial_args) > st->args_sent) {
            json_object *c = json_object_new_object(), *f = json_object_new_object();
            json_object_object_add(c, "index", json_object_new_int((int)nc));
            json_object_object_add(f, "arguments",
                                   json_object_new_string(p.partial_args + st->args_sent));
            json_object_object_add(c, "function", f);
            json_object_array_add(a, c);
            st->args_sent = strlen(p.partial_args);
        }
    }
    if (json_object_array_length(a)) {
        json_object_object_add(d, "tool_calls", a);
        any = 1;
    } else {
        json_object_put(a);
    }
    if (final)
        log_malformed(S, r, &p);
    chat_parsed_free(&p);
    if (!any) {
        json_object_put(d);
        return NULL;
    }
    return api_chunk_delta_json(S, r, d, NULL);
}

const char *srv_chat_stream_finish(const struct request *r, const struct sse_state *st)
{
    return r->parse_output ? finish_of(r, st->calls_sent) : r->finish;
}
