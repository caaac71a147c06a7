/* SPDX-License-Identifier: MIT */
/*
 * glm-server: chat requests rendered with the package's own chat template
 * (or --chat-template-file) by libtx's Jinja renderer, as vLLM and
 * llama-server (--jinja) render them: the request's messages as given, its
 * tools (none when tool_choice is "none"), chat_template_kwargs and
 * reasoning_effort as template variables. A package without a
 * chat_template keeps libtx's C format (api.c). docs/glm-server.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_error.h>

#include "server.h"

int srv_chat_template_load(struct srv *S, const char *prog)
{
    char err[1024];
    int rc = txc_chat_template_load(S->o.checkpoint, S->o.chat_template_file, &S->ct, err,
                                    sizeof(err));
    if (rc == TX_ENOENT && !S->o.chat_template_file) {
        fprintf(stderr, "%s: the package has no chat_template: libtx's C chat format\n", prog);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "%s: chat template: %s\n", prog, err);
        return -1;
    }
    fprintf(stderr, "%s: chat template: %s (Jinja)\n", prog, txc_chat_template_source(S->ct));
    return 0;
}

static const char *json_text(json_object *v)
{
    return json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
                                                 JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* tool_choice: "auto", "none", "required" or {"type": "function",
 * "function": {"name": ...}}; 1 when the tools go into the prompt */
static int tools_wanted(json_object *tc, char **reply, int *st)
{
    *st = 0;
    if (!tc || json_object_is_type(tc, json_type_null))
        return 1;
    if (json_object_is_type(tc, json_type_string)) {
        const char *s = json_object_get_string(tc);
        if (!strcmp(s, "none"))
            return 0;
        if (!strcmp(s, "auto") || !strcmp(s, "required"))
            return 1;
    } else if (json_object_is_type(tc, json_type_object)) {
        json_object *f, *nm;
        if (json_object_object_get_ex(tc, "function", &f) &&
            json_object_object_get_ex(f, "name", &nm) && json_object_is_type(nm, json_type_string))
            return 1;
    }
    *st = srv_bad_request(reply, "tool_choice",
                          "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                          "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    return 0;
}

static int valid_tool_calls(json_object *calls, size_t i, char **reply)
{
    char msg[160];
    if (!json_object_is_type(calls, json_type_array)) {
        snprintf(msg, sizeof(msg), "messages[%zu].tool_calls must be an array", i);
        return srv_bad_request(reply, "messages", msg);
    }
    for (size_t k = 0; k < json_object_array_length(calls); k++) {
        json_object *c = json_object_array_get_idx(calls, k), *f = NULL, *nm, *a;
        if (!json_object_is_type(c, json_type_object) ||
            !json_object_object_get_ex(c, "function", &f) ||
            !json_object_is_type(f, json_type_object)) {
            snprintf(msg, sizeof(msg), "messages[%zu].tool_calls[%zu]: expected {\"function\": {...}}",
                     i, k);
            return srv_bad_request(reply, "messages", msg);
        }
        if (!json_object_object_get_ex(f, "name", &nm) ||
            !json_object_is_type(nm, json_type_string)) {
            snprintf(msg, sizeof(msg), "messages[%zu].tool_calls[%zu].function.name: missing", i, k);
            return srv_bad_request(reply, "messages", msg);
        }
        if (json_object_object_get_ex(f, "arguments", &a) && a &&
            !json_object_is_type(a, json_type_object)) {
            json_object *p = json_object_is_type(a, json_type_string)
                                 ? json_tokener_parse(json_object_get_string(a))
                                 : NULL;
            int is_obj = p && json_object_is_type(p, json_type_object);
            json_object_put(p);
            if (!is_obj) {
                snprintf(msg, sizeof(msg),
                         "messages[%zu].tool_calls[%zu].function.arguments must be a JSON object "
                         "(or its text)",
                         i, k);
                return srv_bad_request(reply, "messages", msg);
            }
        }
    }
    return 0;
}

/* The request's messages checked as api.c checks them for the C formats
 * (roles, content, reasoning_content, tool_calls) and copied with a content
 * of text parts joined into one string (vLLM's "string" content format) and
 * "developer" as "system"; *out is the copy. */
static int normalise_messages(json_object *msgs, json_object **out, char **reply)
{
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool",
                                        "observation", NULL};
    char msg[200];
    json_object *copy = NULL;
    *out = NULL;
    if (json_object_deep_copy(msgs, &copy, NULL) || !copy)
        return srv_bad_request(reply, NULL, "out of memory");
    for (size_t i = 0; i < json_object_array_length(copy); i++) {
        json_object *m = json_object_array_get_idx(copy, i), *role, *c, *rs, *calls;
        int st = 0;
        if (!json_object_is_type(m, json_type_object)) {
            snprintf(msg, sizeof(msg), "messages[%zu] must be an object", i);
            st = srv_bad_request(reply, "messages", msg);
        } else if (!json_object_object_get_ex(m, "role", &role) ||
                   !json_object_is_type(role, json_type_string)) {
            snprintf(msg, sizeof(msg), "messages[%zu].role must be a string", i);
            st = srv_bad_request(reply, "messages", msg);
        } else {
            const char *rn = json_object_get_string(role);
            size_t r = 0;
            while (roles[r] && strcmp(roles[r], rn))
                r++;
            if (!roles[r]) {
                snprintf(msg, sizeof(msg),
                         "messages[%zu].role '%.40s' is not one of system, developer, user, "
                         "assistant, tool",
                         i, rn);
                st = srv_bad_request(reply, "messages", msg);
            } else if (!strcmp(rn, "developer")) {
                json_object_object_add(m, "role", json_object_new_string("system"));
            }
        }
        if (!st && json_object_object_get_ex(m, "content", &c) && c &&
            json_object_is_type(c, json_type_array)) {
            char *text = NULL;
            st = srv_content_text(c, (int)i, &text, reply);
            if (!st)
                json_object_object_add(m, "content", json_object_new_string(text ? text : ""));
            free(text);
        } else if (!st && c && !json_object_is_type(c, json_type_string)) {
            snprintf(msg, sizeof(msg),
                     "messages[%zu].content must be a string or an array of text parts", i);
            st = srv_bad_request(reply, "messages", msg);
        }
        if (!st && json_object_object_get_ex(m, "reasoning_content", &rs) && rs &&
            !json_object_is_type(rs, json_type_string)) {
            snprintf(msg, sizeof(msg), "messages[%zu].reasoning_content must be a string", i);
            st = srv_bad_request(reply, "messages", msg);
        }
        if (!st && json_object_object_get_ex(m, "tool_calls", &calls) && calls)
            st = valid_tool_calls(calls, i, reply);
        if (st) {
            json_object_put(copy);
            return st;
        }
    }
    *out = copy;
    return 0;
}

int srv_chat_prompt_template(struct srv *S, json_object *o, int32_t **ids, size_t *n,
                             char **reply)
{
    json_object *msgs, *tools = NULL, *tc = NULL, *kw = NULL, *effort = NULL;
    if (!json_object_object_get_ex(o, "messages", &msgs) ||
        !json_object_is_type(msgs, json_type_array) || !json_object_array_length(msgs))
        return srv_bad_request(reply, "messages",
                               "'messages' must be a non-empty array of messages");
    json_object *norm = NULL;
    int st = normalise_messages(msgs, &norm, reply);
    if (st)
        return st;
    msgs = norm;
    json_object_object_get_ex(o, "tools", &tools);
    if (tools && !json_object_is_type(tools, json_type_null) &&
        !json_object_is_type(tools, json_type_array)) {
        json_object_put(norm);
        return srv_bad_request(reply, "tools", "'tools' must be an array of tool definitions");
    }
    json_object_object_get_ex(o, "tool_choice", &tc);
    if (!tools_wanted(tc, reply, &st))
        tools = NULL;
    if (st) {
        json_object_put(norm);
        return st;
    }
    json_object_object_get_ex(o, "chat_template_kwargs", &kw);
    json_object_object_get_ex(o, "reasoning_effort", &effort);
    if (kw && !json_object_is_type(kw, json_type_null) &&
        !json_object_is_type(kw, json_type_object))
        st = srv_bad_request(reply, "chat_template_kwargs",
                             "'chat_template_kwargs' must be an object");
    else if (effort && !json_object_is_type(effort, json_type_null) &&
             !json_object_is_type(effort, json_type_string))
        st = srv_bad_request(reply, "reasoning_effort",
                             "'reasoning_effort' must be a string (low, medium, high)");
    /* the template kwargs: chat_template_kwargs, and reasoning_effort */
    json_object *vars = st ? NULL : json_object_new_object();
    if (!vars) {
        json_object_put(norm);
        return st ? st : srv_bad_request(reply, NULL, "out of memory");
    }
    if (kw && json_object_is_type(kw, json_type_object)) {
        json_object_object_foreach(kw, k, v)
        {
            json_object_object_add(vars, k, json_object_get(v));
        }
    }
    if (effort && json_object_is_type(effort, json_type_string) &&
        !json_object_object_get_ex(vars, "reasoning_effort", NULL))
        json_object_object_add(vars, "reasoning_effort", json_object_get(effort));
    char *msgs_s = strdup(json_text(msgs));
    char *tools_s =
        tools && json_object_is_type(tools, json_type_array) ? strdup(json_text(tools)) : NULL;
    char *kw_s = strdup(json_text(vars));
    json_object_put(vars);
    json_object_put(norm);
    char err[1024];
    int raised = 0, rc;
    if (!msgs_s || !kw_s || (tools && json_object_is_type(tools, json_type_array) && !tools_s))
        rc = TX_ENOMEM;
    else
        rc = txc_chat_template_encode(S->ct, S->tok, msgs_s, tools_s, kw_s, 1, ids, n, NULL,
                                      &raised, err, sizeof(err));
    free(msgs_s);
    free(tools_s);
    free(kw_s);
    if (rc == TX_ENOMEM)
        return srv_bad_request(reply, NULL, "out of memory");
    if (rc && raised) /* the template's own message, as vLLM returns it */
        return srv_bad_request(reply, "messages", err);
    if (rc) {
        char msg[1100];
        snprintf(msg, sizeof(msg), "cannot apply the chat template: %s", err);
        srv_log(S, "chat template: %s", err);
        return srv_bad_request(reply, "messages", msg);
    }
    return 0;
}
