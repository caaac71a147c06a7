/* SPDX-License-Identifier: MIT */
/*
 * glm-server's endpoints: OpenAI's /v1/completions, /v1/chat/completions,
 * /v1/models, and llama-server's /health, /tokenize, /detokenize.
 *
 * Requests are checked field by field before anything reaches the
 * scheduler: a wrong type or value is a 400 naming the field, fields this
 * server does not know are ignored (as OpenAI does), a prompt longer than
 * the context of a slot is a 400. Errors use OpenAI's shape,
 * {"error": {"message", "type", "param", "code"}}.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tx-internal/tx_chat_format.h>

#include "server.h"

#define JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

static const char *error_type(int status)
{
    switch (status) {
    case 401:
        return "authentication_error";
    case 404:
        return "not_found_error";
    case 503:
        return "unavailable_error";
    case 500:
        return "server_error";
    default:
        return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

static char *error_vjson(int status, const char *param, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    json_object *e = json_object_new_object(), *o = json_object_new_object();
    json_object_object_add(e, "message", json_object_new_string(msg));
    json_object_object_add(e, "type", json_object_new_string(error_type(status)));
    json_object_object_add(e, "param", param ? json_object_new_string(param) : NULL);
    json_object_object_add(e, "code", json_object_new_int(status));
    json_object_object_add(o, "error", e);
    char *s = strdup(json_object_to_json_string_ext(o, JSON_FLAGS));
    json_object_put(o);
    return s;
}

char *api_error_json(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = error_vjson(status, NULL, fmt, ap);
    va_end(ap);
    return s;
}

char *api_error_json_param(int status, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = error_vjson(status, param, fmt, ap);
    va_end(ap);
    return s;
}

/* A 400 naming the field: sets *reply, returns 400. */
__attribute__((format(printf, 3, 4))) static int bad(char **reply, const char *param,
                                                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    *reply = error_vjson(400, param, fmt, ap);
    va_end(ap);
    return 400;
}

int srv_bad_request(char **reply, const char *param, const char *msg)
{
    return bad(reply, param, "%s", msg);
}

static char *to_text(json_object *o)
{
    char *s = strdup(json_object_to_json_string_ext(o, JSON_FLAGS));
    json_object_put(o);
    return s;
}

/* The body as a JSON object, or a 400. */
static int parse_body(const char *body, size_t len, json_object **out, char **reply)
{
    *out = NULL;
    if (!body || !len)
        return bad(reply, NULL, "the request body is empty; expected a JSON object");
    if (len > INT_MAX)
        return bad(reply, NULL, "the request body is too large");
    json_tokener *tk = json_tokener_new();
    if (!tk)
        return bad(reply, NULL, "out of memory");
    json_object *o = json_tokener_parse_ex(tk, body, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tk);
    size_t end = json_tokener_get_parse_end(tk);
    json_tokener_free(tk);
    if (!o || je != json_tokener_success) {
        json_object_put(o);
        return bad(reply, NULL, "malformed JSON in the request body (at byte %zu): %s", end,
                   je == json_tokener_continue || je == json_tokener_success
                       ? "the body ends inside a value"
                       : json_tokener_error_desc(je));
    }
    for (size_t i = end; i < len; i++)
        if (body[i] != ' ' && body[i] != '\n' && body[i] != '\r' && body[i] != '\t') {
            json_object_put(o);
            return bad(reply, NULL, "malformed JSON: text after the object at byte %zu", i);
        }
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return bad(reply, NULL, "the request body must be a JSON object");
    }
    *out = o;
    return 0;
}

/* A field that is absent or null is "not given" (0); 1 with *v set. */
static int field(json_object *o, const char *k, json_object **v)
{
    *v = NULL;
    return json_object_object_get_ex(o, k, v) && *v;
}

static int get_num(json_object *o, const char *k, double lo, double hi, double *out, char **reply)
{
    json_object *v;
    if (!field(o, k, &v))
        return 0;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        return bad(reply, k, "'%s' must be a number in [%g, %g]", k, lo, hi);
    double d = json_object_get_double(v);
    if (!isfinite(d) || d < lo || d > hi)
        return bad(reply, k, "'%s' must be a number in [%g, %g]; got %g", k, lo, hi, d);
    *out = d;
    return 0;
}

static int get_int(json_object *o, const char *k, long long lo, long long hi, long long *out,
                   char **reply)
{
    json_object *v;
    if (!field(o, k, &v))
        return 0;
    long long x;
    if (json_object_is_type(v, json_type_int)) {
        x = json_object_get_int64(v);
    } else if (json_object_is_type(v, json_type_double)) {
        double d = json_object_get_double(v);
        if (!(d == floor(d)) || d < (double)lo || d > (double)hi)
            return bad(reply, k, "'%s' must be an integer in [%lld, %lld]", k, lo, hi);
        x = (long long)d;
    } else {
        return bad(reply, k, "'%s' must be an integer in [%lld, %lld]", k, lo, hi);
    }
    if (x < lo || x > hi)
        return bad(reply, k, "'%s' must be an integer in [%lld, %lld]; got %lld", k, lo, hi, x);
    *out = x;
    return 0;
}

static int get_bool(json_object *o, const char *k, int *out, char **reply)
{
    json_object *v;
    if (!field(o, k, &v))
        return 0;
    if (!json_object_is_type(v, json_type_boolean))
        return bad(reply, k, "'%s' must be true or false", k);
    *out = json_object_get_boolean(v);
    return 0;
}

/* ---- completions ---------------------------------------------------------- */

static int parse_stop(json_object *o, struct request *r, char **reply)
{
    json_object *v;
    if (!field(o, "stop", &v))
        return 0;
    json_object *one[1] = {v};
    json_object **items = one;
    size_t n = 1;
    int arr = json_object_is_type(v, json_type_array);
    if (arr)
        n = json_object_array_length(v);
    else if (!json_object_is_type(v, json_type_string))
        return bad(reply, "stop", "'stop' must be a string or an array of strings");
    if (n > SRV_MAX_STOP)
        return bad(reply, "stop", "'stop' has %zu strings; at most %d", n, SRV_MAX_STOP);
    for (size_t i = 0; i < n; i++) {
        json_object *s = arr ? json_object_array_get_idx(v, i) : items[0];
        if (!json_object_is_type(s, json_type_string))
            return bad(reply, "stop", "'stop' must be a string or an array of strings");
        size_t l = (size_t)json_object_get_string_len(s);
        if (l == 0 || l > 256)
            return bad(reply, "stop", "'stop' strings must have 1 to 256 bytes");
        r->stop[r->n_stop] = strdup(json_object_get_string(s));
        if (!r->stop[r->n_stop])
            return bad(reply, "stop", "out of memory");
        r->n_stop++;
    }
    return 0;
}

static int tokens_of_array(struct srv *S, json_object *a, const char *param, int32_t **ids,
                           size_t *n, char **reply)
{
    size_t k = json_object_array_length(a);
    *ids = malloc((k ? k : 1) * sizeof(int32_t));
    if (!*ids)
        return bad(reply, param, "out of memory");
    for (size_t i = 0; i < k; i++) {
        json_object *e = json_object_array_get_idx(a, i);
        if (!json_object_is_type(e, json_type_int))
            return bad(reply, param, "'%s' must be a string or an array of token ids", param);
        int64_t t = json_object_get_int64(e);
        if (t < 0 || t >= S->vocab)
            return bad(reply, param,
                       "'%s': token %lld (index %zu) is outside the vocabulary [0, %d)", param,
                       (long long)t, i, S->vocab);
        (*ids)[i] = (int32_t)t;
    }
    *n = k;
    return 0;
}

static int prompt_of(struct srv *S, json_object *o, int32_t **ids, size_t *n, char **reply)
{
    json_object *v;
    if (!field(o, "prompt", &v))
        return bad(reply, "prompt", "'prompt' is required");
    if (json_object_is_type(v, json_type_array) && json_object_array_length(v) == 1) {
        json_object *e = json_object_array_get_idx(v, 0);
        if (json_object_is_type(e, json_type_string) || json_object_is_type(e, json_type_array))
            v = e; /* ["text"] or [[ids]]: one prompt */
    }
    if (json_object_is_type(v, json_type_string)) {
        if (glm_tokenize(S->m, json_object_get_string(v), ids, n))
            return bad(reply, "prompt", "cannot tokenize 'prompt': %s", tx_last_error());
        return 0;
    }
    if (json_object_is_type(v, json_type_array)) {
        json_object *e0 = json_object_array_length(v) ? json_object_array_get_idx(v, 0) : NULL;
        if (e0 && !json_object_is_type(e0, json_type_int))
            return bad(reply, "prompt",
                       "'prompt': one prompt per request (a string or an array "
                       "of token ids); this server has no batch prompts");
        return tokens_of_array(S, v, "prompt", ids, n, reply);
    }
    return bad(reply, "prompt", "'prompt' must be a string or an array of token ids");
}

static int content_of(json_object *c, int i, char **out, char **reply)
{
    *out = NULL;
    if (!c)
        return 0;
    if (json_object_is_type(c, json_type_string)) {
        *out = strdup(json_object_get_string(c));
        return 0;
    }
    if (!json_object_is_type(c, json_type_array))
        return bad(reply, "messages",
                   "messages[%d].content must be a string or an array of text parts", i);
    size_t len = 0, n = json_object_array_length(c);
    char *s = calloc(1, 1);
    for (size_t k = 0; s && k < n; k++) {
        json_object *p = json_object_array_get_idx(c, k), *t, *tx;
        if (!json_object_is_type(p, json_type_object) || !field(p, "type", &t) ||
            !json_object_is_type(t, json_type_string) ||
            strcmp(json_object_get_string(t), "text") || !field(p, "text", &tx) ||
            !json_object_is_type(tx, json_type_string)) {
            free(s);
            return bad(reply, "messages",
                       "messages[%d].content[%zu]: only {\"type\": \"text\", \"text\": ...} parts "
                       "are supported",
                       i, k);
        }
        size_t l = (size_t)json_object_get_string_len(tx);
        char *ns = realloc(s, len + l + 1);
        if (!ns) {
            free(s);
            s = NULL;
            break;
        }
        s = ns;
        memcpy(s + len, json_object_get_string(tx), l + 1);
        len += l;
    }
    if (!s)
        return bad(reply, "messages", "out of memory");
    *out = s;
    return 0;
}

int srv_content_text(json_object *c, int i, char **out, char **reply)
{
    return content_of(c, i, out, reply);
}

static int chat_prompt_of(struct srv *S, json_object *o, int32_t **ids, size_t *n, char **reply)
{
    if (S->ct) /* the package's Jinja chat template (chat_template.c) */
        return srv_chat_prompt_template(S, o, ids, n, reply);
    json_object *v;
    if (!field(o, "messages", &v) || !json_object_is_type(v, json_type_array) ||
        json_object_array_length(v) == 0)
        return bad(reply, "messages", "'messages' must be a non-empty array of messages");
    size_t nm = json_object_array_length(v);
    struct tx_chat_message *msgs = calloc(nm, sizeof(*msgs));
    char **keep = calloc(2 * nm, sizeof(char *));
    /* tool use (OpenAI's "tools" and messages[].tool_calls): JSON text for
     * libtx, which renders them as the model family's template does */
    const char **calls = calloc(nm, sizeof(*calls));
    const char *tools = NULL;
    int any_calls = 0;
    int st = 0;
    if (!msgs || !keep || !calls)
        st = bad(reply, "messages", "out of memory");
    for (size_t i = 0; !st && i < nm; i++) {
        json_object *m = json_object_array_get_idx(v, i), *role, *c = NULL, *rs = NULL;
        if (!json_object_is_type(m, json_type_object)) {
            st = bad(reply, "messages", "messages[%zu] must be an object", i);
            break;
        }
        if (!field(m, "role", &role) || !json_object_is_type(role, json_type_string)) {
            st = bad(reply, "messages", "messages[%zu].role must be a string", i);
            break;
        }
        const char *rn = json_object_get_string(role);
        if (strcmp(rn, "system") && strcmp(rn, "user") && strcmp(rn, "assistant") &&
            strcmp(rn, "tool") && strcmp(rn, "observation") && strcmp(rn, "developer")) {
            st = bad(reply, "messages",
                     "messages[%zu].role '%s' is not one of system, developer, user, assistant, "
                     "tool",
                     i, rn);
            break;
        }
        msgs[i].role = strcmp(rn, "developer") ? rn : "system";
        field(m, "content", &c);
        st = content_of(c, (int)i, &keep[2 * i], reply);
        if (st)
            break;
        msgs[i].content = keep[2 * i];
        if (field(m, "reasoning_content", &rs)) {
            if (!json_object_is_type(rs, json_type_string)) {
                st = bad(reply, "messages", "messages[%zu].reasoning_content must be a string", i);
                break;
            }
            keep[2 * i + 1] = strdup(json_object_get_string(rs));
            msgs[i].reasoning = keep[2 * i + 1];
        }
        json_object *tc;
        if (field(m, "tool_calls", &tc)) {
            if (!json_object_is_type(tc, json_type_array)) {
                st = bad(reply, "messages", "messages[%zu].tool_calls must be an array", i);
                break;
            }
            if (strcmp(msgs[i].role, "assistant")) {
                st = bad(reply, "messages",
                         "messages[%zu].tool_calls: only assistant messages make tool calls", i);
                break;
            }
            calls[i] = json_object_to_json_string_ext(tc, JSON_C_TO_STRING_PLAIN |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE);
            any_calls = 1;
        }
    }
    json_object *tv;
    if (!st && field(o, "tools", &tv)) {
        if (!json_object_is_type(tv, json_type_array))
            st = bad(reply, "tools", "'tools' must be an array of tool definitions");
        else
            tools = json_object_to_json_string_ext(tv, JSON_C_TO_STRING_PLAIN |
                                                           JSON_C_TO_STRING_NOSLASHESCAPE);
    }
    unsigned flags = TX_CHAT_ADD_GENERATION_PROMPT | TX_CHAT_LITERAL_CONTENT;
    json_object *kw, *et;
    if (!st && field(o, "chat_template_kwargs", &kw)) {
        if (!json_object_is_type(kw, json_type_object))
            st = bad(reply, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
        else if (field(kw, "enable_thinking", &et)) {
            if (!json_object_is_type(et, json_type_boolean))
                st = bad(reply, "chat_template_kwargs",
                         "'chat_template_kwargs.enable_thinking' must be true or false");
            else /* true: TX_CHAT_THINKING (DeepSeek-V3.1 thinks only when asked) */
                flags |= json_object_get_boolean(et) ? TX_CHAT_THINKING : TX_CHAT_NO_THINKING;
        }
    }
    if (!st && glm_chat_encode_tools(S->m, msgs, nm, tools, any_calls ? calls : NULL, flags, ids, n))
        st = bad(reply, tools || any_calls ? "tools" : "messages",
                 "cannot apply the chat template: %s", tx_last_error());
    for (size_t i = 0; keep && i < 2 * nm; i++)
        free(keep[i]);
    free(keep);
    free(calls);
    free(msgs);
    return st;
}

static int parse_sampling(struct srv *S, json_object *o, int chat, struct request *r, char **reply)
{
    int st;
    double d;
    long long x;
    glm_sampling_default(&r->smp);
    r->smp.repeat_last_n = 64;
    d = r->smp.temperature;
    if ((st = get_num(o, "temperature", 0, 100, &d, reply)))
        return st;
    r->smp.temperature = (float)d;
    d = r->smp.top_p;
    if ((st = get_num(o, "top_p", 0, 1, &d, reply)))
        return st;
    if (!(d > 0))
        return bad(reply, "top_p", "'top_p' must be in (0, 1]");
    r->smp.top_p = (float)d;
    x = r->smp.top_k;
    if ((st = get_int(o, "top_k", 0, S->max_topk, &x, reply)))
        return st;
    r->smp.top_k = (int)x;
    d = r->smp.min_p;
    if ((st = get_num(o, "min_p", 0, 1, &d, reply)))
        return st;
    r->smp.min_p = (float)d;
    d = 0;
    if ((st = get_num(o, "presence_penalty", -2, 2, &d, reply)))
        return st;
    r->smp.presence_penalty = (float)d;
    d = 0;
    if ((st = get_num(o, "frequency_penalty", -2, 2, &d, reply)))
        return st;
    r->smp.frequency_penalty = (float)d;
    d = 1;
    if ((st = get_num(o, "repeat_penalty", 0, 10, &d, reply)))
        return st;
    r->smp.repeat_penalty = (float)d;
    x = (long long)(srv_random64() & LLONG_MAX); /* no "seed": one from the OS */
    if ((st = get_int(o, "seed", LLONG_MIN, LLONG_MAX, &x, reply)))
        return st;
    r->smp.seed = (uint64_t)x;
    x = -1;
    if ((st = get_int(o, "max_tokens", 1, INT_MAX, &x, reply)))
        return st;
    if (chat && (st = get_int(o, "max_completion_tokens", 1, INT_MAX, &x, reply)))
        return st;
    r->max_tokens = (int)x;
    if ((st = choices_parse(S, o, r, reply)) || (st = lp_parse(o, chat, r, reply)))
        return st; /* n (choices.c), logprobs / top_logprobs (logprobs.c) */
    if (r->logprobs && S->o.spec_mtp)
        return bad(reply, "logprobs",
                   "'logprobs' is not supported with --spec-type mtp (the verify pass "
                   "keeps no logits rows)");
    int echo = 0;
    if ((st = get_bool(o, "echo", &echo, reply)))
        return st;
    if (echo)
        return bad(reply, "echo", "'echo' is not supported by glm-server");
    if ((st = get_bool(o, "stream", &r->stream, reply)))
        return st;
    r->cache_prompt = 1;
    if ((st = get_bool(o, "cache_prompt", &r->cache_prompt, reply)))
        return st;
    json_object *so, *iu;
    if (field(o, "stream_options", &so)) {
        if (!json_object_is_type(so, json_type_object))
            return bad(reply, "stream_options", "'stream_options' must be an object");
        if (field(so, "include_usage", &iu)) {
            if (!json_object_is_type(iu, json_type_boolean))
                return bad(reply, "stream_options",
                           "'stream_options.include_usage' must be true or false");
            r->include_usage = json_object_get_boolean(iu);
        }
    }
    return parse_stop(o, r, reply);
}

static json_object *usage_json(struct request *r)
{
    json_object *u = json_object_new_object();
    json_object_object_add(u, "prompt_tokens", json_object_new_int(r->n_prompt));
    int nc = choices_completion_tokens(r); /* every choice's (n > 1) */
    json_object_object_add(u, "completion_tokens", json_object_new_int(nc));
    json_object_object_add(u, "total_tokens", json_object_new_int(r->n_prompt + nc));
    if (r->n_cached) { /* OpenAI's prompt_tokens_details, as vLLM reports prefix-cache hits */
        json_object *d = json_object_new_object();
        json_object_object_add(d, "cached_tokens", json_object_new_int(r->n_cached));
        json_object_object_add(u, "prompt_tokens_details", d);
    }
    return u;
}

/* One choice of a finished non-streaming reply */
static json_object *choice_json(struct srv *S, struct request *r)
{
    json_object *c = json_object_new_object();
    json_object_object_add(c, "index", json_object_new_int(r->index));
    const char *finish = r->finish;
    if (r->chat) /* content, reasoning_content, tool_calls (chat_reply.c) */
        json_object_object_add(c, "message", srv_chat_message(S, r, &finish));
    else
        json_object_object_add(
            c, "text", json_object_new_string_len(r->out ? r->out : "", (int)r->out_len));
    json_object_object_add(c, "logprobs", lp_json(S, r, 0));
    json_object_object_add(c, "finish_reason", json_object_new_string(finish));
    return c;
}

/* The reply of a finished non-streaming request (srv.mu held). */
static char *final_json_locked(struct srv *S, struct request *r, int *status)
{
    for (int i = 0; i < choices_count(r); i++) {
        struct request *e = choices_get(r, i);
        if (e->err_status) {
            *status = e->err_status == 499 ? 500 : e->err_status;
            return api_error_json(*status, "%s", e->err);
        }
    }
    *status = 200;
    json_object *o = json_object_new_object(), *ch = json_object_new_array();
    json_object_object_add(o, "id", json_object_new_string(r->id));
    json_object_object_add(o, "object",
                           json_object_new_string(r->chat ? "chat.completion" : "text_completion"));
    json_object_object_add(o, "created", json_object_new_int64(r->created));
    json_object_object_add(o, "model", json_object_new_string(S->model_id));
    for (int i = 0; i < choices_count(r); i++) /* n > 1: choices.c */
        json_object_array_add(ch, choice_json(S, choices_get(r, i)));
    json_object_object_add(o, "choices", ch);
    json_object_object_add(o, "usage", usage_json(r));
    json_object *tm = json_object_new_object();
    json_object_object_add(tm, "prompt_n", json_object_new_int(r->n_prompt));
    json_object_object_add(tm, "predicted_n", json_object_new_int(r->n_completion));
    json_object_object_add(
        tm, "ttft_ms", json_object_new_double(r->t_first ? (r->t_first - r->t_arrive) * 1e3 : 0));
    json_object_object_add(tm, "total_ms", json_object_new_double((r->t_done - r->t_arrive) * 1e3));
    json_object_object_add(o, "timings", tm);
    return to_text(o);
}

char *api_final_json(struct srv *S, struct request *r, int *status)
{
    return final_json_locked(S, r, status);
}

/* a stream chunk's envelope: id, object, created, model */
static json_object *chunk_envelope(struct srv *S, struct request *r)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(r->id));
    json_object_object_add(
        o, "object", json_object_new_string(r->chat ? "chat.completion.chunk" : "text_completion"));
    json_object_object_add(o, "created", json_object_new_int64(r->created));
    json_object_object_add(o, "model", json_object_new_string(S->model_id));
    return o;
}

char *api_chunk_delta_json(struct srv *S, struct request *r, json_object *delta,
                           const char *finish)
{
    json_object *o = chunk_envelope(S, r), *ch = json_object_new_array(),
                *c = json_object_new_object();
    json_object_object_add(c, "index", json_object_new_int(r->index));
    json_object_object_add(c, "delta", delta);
    json_object_object_add(c, "logprobs", lp_json(S, r, 1));
    json_object_object_add(c, "finish_reason", finish ? json_object_new_string(finish) : NULL);
    json_object_array_add(ch, c);
    json_object_object_add(o, "choices", ch);
    return to_text(o);
}

/* JSON chunk of a stream (sse.c): delta text, or the final one. */
char *api_chunk_json(struct srv *S, struct request *r, const char *text, size_t len, int first,
                     const char *finish, int usage_only)
{
    json_object *o = chunk_envelope(S, r), *ch = json_object_new_array();
    if (!usage_only) {
        json_object *c = json_object_new_object();
        json_object_object_add(c, "index", json_object_new_int(r->index));
        json_object *t = json_object_new_string_len(text ? text : "", (int)len);
        if (r->chat) {
            json_object *d = json_object_new_object();
            if (first)
                json_object_object_add(d, "role", json_object_new_string("assistant"));
            if (!finish)
                json_object_object_add(d, "content", t);
            else
                json_object_put(t);
            json_object_object_add(c, "delta", d);
        } else {
            json_object_object_add(c, "text", t);
        }
        json_object_object_add(c, "logprobs", lp_json(S, r, 1));
        json_object_object_add(c, "finish_reason", finish ? json_object_new_string(finish) : NULL);
        json_object_array_add(ch, c);
    }
    json_object_object_add(o, "choices", ch);
    if (usage_only)
        json_object_object_add(o, "usage", usage_json(r));
    return to_text(o);
}

/* "a,b,c" holds name (a whole item) */
static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, name, n))
            return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

/* The request's "model": absent or null is this server's model (as
 * llama-server); else it must be the served id, one of --alias's names or
 * the package's model name; anything else is a 404, as vLLM answers. */
static int check_model(struct srv *S, json_object *o, char **reply)
{
    json_object *v;
    if (!field(o, "model", &v))
        return 0;
    if (!json_object_is_type(v, json_type_string))
        return bad(reply, "model", "'model' must be a string: the id GET /v1/models lists");
    const char *name = json_object_get_string(v);
    if (!strcmp(name, S->model_id) || in_list(S->o.alias, name) ||
        !strcmp(name, S->model_name))
        return 0;
    char msg[160];
    snprintf(msg, sizeof(msg), "%.120s", name);
    *reply = api_error_json_param(404, "model",
                                  "the model '%s' does not exist; this server serves '%s' "
                                  "(GET /v1/models)",
                                  msg, S->model_id);
    return 404;
}

int api_completions(struct srv *S, const char *body, size_t len, int chat, char **reply,
                    struct request **req)
{
    *req = NULL;
    json_object *o;
    int st = parse_body(body, len, &o, reply);
    if (st)
        return st;
    struct request *r = req_new();
    if (!r) {
        json_object_put(o);
        *reply = api_error_json(500, "out of memory");
        return 500;
    }
    r->chat = chat;
    r->t_arrive = srv_now();
    r->created = (long long)time(NULL);
    st = check_model(S, o, reply);
    if (!st)
        st = parse_sampling(S, o, chat, r, reply);
    size_t n = 0;
    if (!st && !dev_model_get(S)) {
        *reply = api_error_json(503, "the model is being reloaded; retry later");
        st = 503;
    } else if (!st) {
        st = chat ? chat_prompt_of(S, o, &r->prompt, &n, reply)
                  : prompt_of(S, o, &r->prompt, &n, reply);
        if (!st && chat) {
            r->n_prompt = (int)n;
            srv_chat_output_setup(S, o, r);
        }
        if (!st) /* response_format, grammar, tool_choice required (grammar_request.c) */
            st = srv_grammar_setup(S, o, r, &n, reply);
        if (!st && r->gr && S->o.spec_mtp) /* one mask per pass: drafts would escape it */
            st = bad(reply, "response_format",
                     "constrained output (response_format, grammar, json_schema, tool_choice "
                     "required or named) is not supported with --spec-type mtp");
        dev_model_put(S);
    }
    json_object_put(o);
    if (!st && n == 0)
        st = bad(reply, chat ? "messages" : "prompt", "the prompt is empty (0 tokens)");
    if (!st && n > (size_t)S->o.ctx_size)
        st = bad(reply, chat ? "messages" : "prompt",
                 "the prompt has %zu tokens; the context of a slot (--ctx-size) holds %d", n,
                 S->o.ctx_size);
    if (st) {
        pthread_mutex_lock(&S->mu);
        S->mx.rejected_bad_request++;
        r->refs = 1;
        pthread_mutex_unlock(&S->mu);
        sched_release(S, r);
        return st;
    }
    r->n_prompt = (int)n;
    /* max_tokens beyond the slot's context: clamped to what fits (the
     * reply ends with finish_reason "length"), as without max_tokens
     * (docs/glm-server.md) */
    if (r->max_tokens < 0 || r->max_tokens > S->o.ctx_size - r->n_prompt)
        r->max_tokens = S->o.ctx_size - r->n_prompt;
    /* ids unique across requests and restarts, as OpenAI's: 96 random bits */
    uint64_t a = srv_random64(), b = srv_random64();
    snprintf(r->id, sizeof(r->id), "%s-%016llx%08x", chat ? "chatcmpl" : "cmpl",
             (unsigned long long)a, (unsigned)b);
    if (choices_make(r)) { /* n > 1: the other choices */
        sched_release(S, r);
        *reply = api_error_json(500, "out of memory");
        return 500;
    }
    st = sched_submit(S, r);
    if (st) {
        sched_release(S, r);
        pthread_mutex_lock(&S->mu);
        if (S->stopping)
            *reply = api_error_json(503, "the server is shutting down");
        else if (S->dev_lost)
            *reply = api_error_json(503, "device lost: %s; the server is reopening it",
                                    S->dev_lost_why);
        else
            *reply = api_error_json(503, "too many requests: the queue is full; retry later");
        pthread_mutex_unlock(&S->mu);
        return 503;
    }
    *req = r; /* http.c answers when the scheduler wakes it */
    return 200;
}

/* ---- the other endpoints ---------------------------------------------------- */

int api_models(struct srv *S, char **reply)
{
    const struct glm_config *c = glm_model_config(S->m);
    struct glm_model_info mi;
    glm_model_info(S->m, &mi);
    json_object *o = json_object_new_object(), *d = json_object_new_array(),
                *m = json_object_new_object(), *meta = json_object_new_object();
    json_object_object_add(o, "object", json_object_new_string("list"));
    json_object_object_add(m, "id", json_object_new_string(S->model_id));
    json_object_object_add(m, "object", json_object_new_string("model"));
    json_object_object_add(m, "created", json_object_new_int64((int64_t)S->mx.started_wall));
    json_object_object_add(m, "owned_by", json_object_new_string("tx8"));
    json_object_object_add(meta, "architecture", json_object_new_string(glm_arch_name(c->arch)));
    json_object_object_add(meta, "n_vocab", json_object_new_int(c->vocab_size));
    /* the ids the sampler draws from, over which logprobs are normalised */
    json_object_object_add(meta, "n_vocab_sample", json_object_new_int(S->sample_vocab));
    json_object_object_add(meta, "n_ctx_train", json_object_new_int(c->max_position_embeddings));
    json_object_object_add(meta, "n_ctx", json_object_new_int(S->o.ctx_size));
    json_object_object_add(meta, "n_parallel", json_object_new_int(S->o.parallel));
    json_object_object_add(meta, "n_params", json_object_new_int64((int64_t)mi.n_params));
    json_object_object_add(m, "meta", meta);
    json_object_array_add(d, m);
    json_object_object_add(o, "data", d);
    *reply = to_text(o);
    return 200;
}

/* llama-server's GET /props: what a client needs to know before it asks. */
int api_props(struct srv *S, char **reply)
{
    char why[8] = "";
    json_object *o = json_object_new_object(), *g = json_object_new_object(),
                *p = json_object_new_object();
    json_object_object_add(g, "n_ctx", json_object_new_int(S->o.ctx_size));
    json_object_object_add(p, "temperature", json_object_new_double(1.0));
    json_object_object_add(p, "top_k", json_object_new_int(0));
    json_object_object_add(p, "top_p", json_object_new_double(1.0));
    json_object_object_add(p, "min_p", json_object_new_double(0.0));
    json_object_object_add(p, "n_predict", json_object_new_int(-1));
    json_object_object_add(p, "seed", json_object_new_int(-1));
    json_object_object_add(g, "params", p);
    json_object_object_add(o, "default_generation_settings", g);
    json_object_object_add(o, "total_slots", json_object_new_int(S->o.parallel));
    json_object_object_add(o, "model_alias", json_object_new_string(S->model_id));
    json_object_object_add(o, "model_path", json_object_new_string(S->o.checkpoint));
    json_object_object_add(o, "n_ctx_per_slot", json_object_new_int(S->o.ctx_size));
    json_object_object_add(o, "max_connections", json_object_new_int(S->o.max_connections));
    int fmt = glm_model_chat_format(S->m, why, sizeof(why));
    json_object_object_add(o, "chat_format",
                           fmt > 0 ? json_object_new_string(tx_chat_format_name(fmt)) : NULL);
    json_object *mod = json_object_new_object();
    json_object_object_add(mod, "vision", json_object_new_boolean(0));
    json_object_object_add(mod, "audio", json_object_new_boolean(0));
    json_object_object_add(o, "modalities", mod);
    *reply = to_text(o);
    return 200;
}

int api_health(struct srv *S, char **reply)
{
    pthread_mutex_lock(&S->mu);
    int stopping = S->stopping, lost = S->dev_lost;
    int idle = S->o.parallel - S->n_active, q = S->q_len;
    char why[sizeof(S->dev_lost_why)];
    memcpy(why, S->dev_lost_why, sizeof(why));
    pthread_mutex_unlock(&S->mu);
    if (stopping) {
        *reply = api_error_json(503, "the server is shutting down");
        return 503;
    }
    if (lost) {
        *reply = api_error_json(503, "device lost: %s", why);
        return 503;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "status", json_object_new_string("ok"));
    json_object_object_add(o, "slots_idle", json_object_new_int(idle));
    json_object_object_add(o, "slots_processing", json_object_new_int(S->o.parallel - idle));
    json_object_object_add(o, "queue", json_object_new_int(q));
    *reply = to_text(o);
    return 200;
}

int api_tokenize(struct srv *S, const char *body, size_t len, char **reply)
{
    json_object *o, *v;
    int st = parse_body(body, len, &o, reply);
    if (st)
        return st;
    if (!field(o, "content", &v) || !json_object_is_type(v, json_type_string)) {
        json_object_put(o);
        return bad(reply, "content", "'content' must be a string");
    }
    int pieces = 0;
    if ((st = get_bool(o, "with_pieces", &pieces, reply))) {
        json_object_put(o);
        return st;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (glm_tokenize(S->m, json_object_get_string(v), &ids, &n)) {
        json_object_put(o);
        return bad(reply, "content", "cannot tokenize 'content': %s", tx_last_error());
    }
    json_object_put(o);
    json_object *r = json_object_new_object(), *a = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
        if (!pieces) {
            json_object_array_add(a, json_object_new_int(ids[i]));
            continue;
        }
        const char *b = NULL;
        int bl = tx_tokenizer_token_bytes(S->tok, ids[i], &b);
        json_object *t = json_object_new_object();
        json_object_object_add(t, "id", json_object_new_int(ids[i]));
        json_object_object_add(t, "piece",
                               json_object_new_string_len(bl > 0 ? b : "", bl > 0 ? bl : 0));
        json_object_array_add(a, t);
    }
    free(ids);
    json_object_object_add(r, "tokens", a);
    *reply = to_text(r);
    return 200;
}

int api_detokenize(struct srv *S, const char *body, size_t len, char **reply)
{
    json_object *o, *v;
    int st = parse_body(body, len, &o, reply);
    if (st)
        return st;
    if (!field(o, "tokens", &v) || !json_object_is_type(v, json_type_array)) {
        json_object_put(o);
        return bad(reply, "tokens", "'tokens' must be an array of token ids");
    }
    int32_t *ids = NULL;
    size_t n = 0;
    st = tokens_of_array(S, v, "tokens", &ids, &n, reply);
    json_object_put(o);
    if (st) {
        free(ids);
        return st;
    }
    char *text = NULL, err[256] = "";
    size_t tl = 0;
    if (tx_tokenizer_decode(S->tok, ids, n, 0, &text, &tl, err, sizeof(err))) {
        free(ids);
        return bad(reply, "tokens", "cannot decode 'tokens': %s", err);
    }
    free(ids);
    json_object *r = json_object_new_object();
    json_object_object_add(r, "content", json_object_new_string_len(text, (int)tl));
    free(text);
    *reply = to_text(r);
    return 200;
}
