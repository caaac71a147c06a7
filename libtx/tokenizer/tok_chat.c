/* SPDX-License-Identifier: MIT */
/*
 * The GLM chat templates, rendered in C exactly as the Jinja templates
 * shipped with the models render them (HF apply_chat_template, which uses
 * trim_blocks and lstrip_blocks), with tool definitions and tool calls in
 * OpenAI's shapes (tx_tokenizer_chat_render_tools; docs/libtx-glm.md,
 * "Tools"):
 *   GLM-4:          llama.cpp's "chatglm4" template (glm-4-9b-chat)
 *   GLM-4.5 / 4.6:  chat_template.jinja of zai-org/GLM-4.5 and GLM-4.6
 *   GLM-4.7 / 5:    chat_template.jinja of zai-org/GLM-4.7 and GLM-5
 *   Qwen3:          the Qwen3 (and Qwen3-MoE) chat_template
 *   DeepSeek-V3:    DeepSeek-V3's tokenizer_config.json chat_template
 *   DeepSeek-V3.1:  DeepSeek-V3.1's chat_template
 * tests/chat-template/reference holds renderings of the real templates
 * that libtx must reproduce byte for byte (tests/chat-template/README.md).
 */
#include <ctype.h>
#include <sys/types.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>

#include <tx/tx_chat_format.h>

struct render {
    struct tok_buf b;
    struct tok_range *lit;
    size_t n_lit, cap_lit;
};

static int put(struct render *r, const char *s, size_t n)
{
    return tok_buf_put(&r->b, s, n);
}

static int puts_(struct render *r, const char *s)
{
    return put(r, s, strlen(s));
}

/* Message text: remembered as a literal range for TX_CHAT_LITERAL_CONTENT. */
static int put_content(struct render *r, const char *s, size_t n)
{
    if (!n)
        return 0;
    if (r->n_lit == r->cap_lit) {
        size_t cap = r->cap_lit ? r->cap_lit * 2 : 16;
        struct tok_range *v = realloc(r->lit, cap * sizeof(*v));
        if (!v)
            return TX_ENOMEM;
        r->lit = v;
        r->cap_lit = cap;
    }
    r->lit[r->n_lit++] = (struct tok_range){r->b.len, r->b.len + n};
    return put(r, s, n);
}

/* Python str.isspace() for the characters that matter here. */
static bool py_space(uint32_t cp)
{
    return tok_is_white_space(cp) || (cp >= 0x1C && cp <= 0x1F);
}

/* Python str.strip() on [*s, *s + *n). */
static void py_strip(const char **s, size_t *n)
{
    const char *p = *s;
    size_t len = *n;
    while (len) {
        uint32_t cp;
        size_t l = tok_utf8_decode((const unsigned char *)p, len, &cp);
        if (!l || !py_space(cp))
            break;
        p += l;
        len -= l;
    }
    while (len) {
        size_t i = len - 1;
        while (i > 0 && len - i < 4 && ((unsigned char)p[i] & 0xC0) == 0x80)
            i--;
        uint32_t cp;
        if (tok_utf8_decode((const unsigned char *)p + i, len - i, &cp) != len - i || !py_space(cp))
            break;
        len = i;
    }
    *s = p;
    *n = len;
}

static const char *memmem_(const char *h, size_t hn, const char *n, size_t nn)
{
    return memmem(h, hn, n, nn);
}

static const char *memmem_last(const char *h, size_t hn, const char *n, size_t nn)
{
    const char *last = NULL, *p = h;
    size_t left = hn;
    const char *f;
    while ((f = memmem_(p, left, n, nn))) {
        last = f;
        left -= (size_t)(f - p) + 1;
        p = f + 1;
    }
    return last;
}

/* ---- tools (OpenAI's shapes) ------------------------------------------------ */

static const char *role_of(const char *role);

/* Text rendered since offset a: a literal range for TX_CHAT_LITERAL_CONTENT
 * (tool definitions and calls are data, as message contents are). */
static int lit_since(struct render *r, size_t a)
{
    if (r->b.len == a)
        return 0;
    if (r->n_lit == r->cap_lit) {
        size_t cap = r->cap_lit ? r->cap_lit * 2 : 16;
        struct tok_range *v = realloc(r->lit, cap * sizeof(*v));
        if (!v)
            return TX_ENOMEM;
        r->lit = v;
        r->cap_lit = cap;
    }
    r->lit[r->n_lit++] = (struct tok_range){a, r->b.len};
    return 0;
}

/* put_py_json (below) as a literal range */
static int put_py_json(struct render *r, struct json_object *v, int depth);
static int put_json_lit(struct render *r, struct json_object *v)
{
    size_t a = r->b.len;
    return put_py_json(r, v, 0) || lit_since(r, a);
}

/* The tool definitions and each message's tool calls, parsed (json-c keeps
 * the keys of an object in their order, as Python's dict does). */
struct chat_tools {
    struct json_object *tools;  /* a non-empty array, or NULL: none */
    struct json_object **calls; /* [n_msgs]: a non-empty array or NULL */
    size_t n;
};

static void chat_tools_free(struct chat_tools *t)
{
    json_object_put(t->tools);
    for (size_t i = 0; t->calls && i < t->n; i++)
        json_object_put(t->calls[i]);
    free(t->calls);
    memset(t, 0, sizeof(*t));
}

/* Python's repr of a double, as json.dumps writes it: the shortest digits
 * that read back the same, fixed notation for 1e-4 <= |v| < 1e16, else
 * d.ddde+XX; non-finite values as Python writes them. */
static int put_py_double(struct render *r, double v)
{
    char e[40], out[64], dig[20];
    if (isnan(v))
        return puts_(r, "NaN");
    if (isinf(v))
        return puts_(r, v < 0 ? "-Infinity" : "Infinity");
    int p = 1;
    for (; p < 17; p++) {
        snprintf(e, sizeof(e), "%.*e", p - 1, v);
        if (strtod(e, NULL) == v)
            break;
    }
    snprintf(e, sizeof(e), "%.*e", p - 1, v);
    /* e: [-]d[.ddd]e[+-]XX */
    const char *c = e;
    bool neg = *c == '-';
    if (neg)
        c++;
    size_t nd = 0;
    for (; *c && *c != 'e'; c++)
        if (*c != '.' && nd < sizeof(dig) - 1)
            dig[nd++] = *c;
    dig[nd] = 0;
    int ex = *c == 'e' ? atoi(c + 1) : 0;
    while (nd > 1 && dig[nd - 1] == '0')
        dig[--nd] = 0;
    int decpt = ex + 1; /* digits before the point */
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            o += (size_t)snprintf(out + o, sizeof(out) - o, "0.");
            for (int i = 0; i < -decpt; i++)
                out[o++] = '0';
            o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", dig);
        } else if ((size_t)decpt >= nd) {
            o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", dig);
            for (size_t i = nd; i < (size_t)decpt; i++)
                out[o++] = '0';
            o += (size_t)snprintf(out + o, sizeof(out) - o, ".0");
        } else {
            o += (size_t)snprintf(out + o, sizeof(out) - o, "%.*s.%s", decpt, dig, dig + decpt);
        }
    } else {
        o += (size_t)snprintf(out + o, sizeof(out) - o, "%c%s%s", dig[0], nd > 1 ? "." : "",
                              dig + 1);
        o += (size_t)snprintf(out + o, sizeof(out) - o, "e%c%02d", ex < 0 ? '-' : '+',
                              ex < 0 ? -ex : ex);
    }
    return put(r, out, o);
}

/* A JSON string as json.dumps(ensure_ascii=False) writes it. */
static int put_py_str(struct render *r, const char *s, size_t n)
{
    int rc = puts_(r, "\"");
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        if (ch == '"')
            rc = puts_(r, "\\\"");
        else if (ch == '\\')
            rc = puts_(r, "\\\\");
        else if (ch == '\n')
            rc = puts_(r, "\\n");
        else if (ch == '\r')
            rc = puts_(r, "\\r");
        else if (ch == '\t')
            rc = puts_(r, "\\t");
        else if (ch == '\b')
            rc = puts_(r, "\\b");
        else if (ch == '\f')
            rc = puts_(r, "\\f");
        else if (ch < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", ch);
            rc = puts_(r, esc);
        } else {
            rc = put(r, s + i, 1);
        }
    }
    return rc || puts_(r, "\"");
}

/* v as the templates' tojson writes it (transformers: json.dumps with
 * ensure_ascii=False, the default separators ", " and ": ", keys in their
 * order). */
static int put_py_json(struct render *r, struct json_object *v, int depth)
{
    char num[32];
    if (depth > 64)
        return TX_EINVAL;
    switch (json_object_get_type(v)) {
    case json_type_null:
        return puts_(r, "null");
    case json_type_boolean:
        return puts_(r, json_object_get_boolean(v) ? "true" : "false");
    case json_type_int:
        if (json_object_get_int64(v) == INT64_MAX)
            snprintf(num, sizeof(num), "%llu", (unsigned long long)json_object_get_uint64(v));
        else
            snprintf(num, sizeof(num), "%lld", (long long)json_object_get_int64(v));
        return puts_(r, num);
    case json_type_double:
        return put_py_double(r, json_object_get_double(v));
    case json_type_string:
        return put_py_str(r, json_object_get_string(v), (size_t)json_object_get_string_len(v));
    case json_type_array: {
        int rc = puts_(r, "[");
        for (size_t i = 0; i < json_object_array_length(v) && !rc; i++)
            rc = (i && puts_(r, ", ")) ||
                 put_py_json(r, json_object_array_get_idx(v, i), depth + 1);
        return rc || puts_(r, "]");
    }
    case json_type_object: {
        int rc = puts_(r, "{");
        bool first = true;
        json_object_object_foreach(v, k, val)
        {
            if (rc)
                break;
            rc = (!first && puts_(r, ", ")) || put_py_str(r, k, strlen(k)) || puts_(r, ": ") ||
                 put_py_json(r, val, depth + 1);
            first = false;
        }
        return rc || puts_(r, "}");
    }
    }
    return TX_EINVAL;
}

/* Whether every string in v is valid UTF-8 without NUL (names, keys). */
static bool json_utf8_ok(struct json_object *v, int depth)
{
    if (depth > 64)
        return false;
    switch (json_object_get_type(v)) {
    case json_type_string: {
        size_t n = (size_t)json_object_get_string_len(v);
        return tok_utf8_validate(json_object_get_string(v), n) == n;
    }
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(v); i++)
            if (!json_utf8_ok(json_object_array_get_idx(v, i), depth + 1))
                return false;
        return true;
    case json_type_object: {
        json_object_object_foreach(v, k, val)
        {
            if (tok_utf8_validate(k, strlen(k)) != strlen(k) || !json_utf8_ok(val, depth + 1))
                return false;
        }
        return true;
    }
    default:
        return true;
    }
}

static struct json_object *parse_json(const char *text, const char *what, size_t i, char *err,
                                      size_t errsz, int *rc)
{
    struct json_tokener *tk = json_tokener_new_ex(64);
    size_t n = strlen(text);
    struct json_object *o = tk ? json_tokener_parse_ex(tk, text, (int)n) : NULL;
    bool ok = tk && n < (1u << 30) && json_tokener_get_error(tk) == json_tokener_success &&
              json_tokener_get_parse_end(tk) == n;
    if (tk)
        json_tokener_free(tk);
    *rc = 0;
    if (!ok) {
        json_object_put(o);
        if (i == (size_t)-1)
            *rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: not valid JSON", what);
        else
            *rc = tx_errbuf(err, errsz, TX_EINVAL, "message %zu: %s: not valid JSON", i, what);
        return NULL;
    }
    if (!json_utf8_ok(o, 0)) {
        json_object_put(o);
        *rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: not valid UTF-8 (or too deeply nested)", what);
        return NULL;
    }
    return o;
}

/* A tool call's function object: tc.function when present, else tc. */
static struct json_object *call_fn(struct json_object *tc)
{
    struct json_object *f;
    if (json_object_object_get_ex(tc, "function", &f) && json_object_is_type(f, json_type_object))
        return f;
    return tc;
}

static const char *call_name(struct json_object *tc)
{
    struct json_object *v;
    json_object_object_get_ex(call_fn(tc), "name", &v);
    return json_object_get_string(v);
}

/* The arguments: NULL (none), an object, or a string. */
static struct json_object *call_args(struct json_object *tc)
{
    struct json_object *v = NULL;
    json_object_object_get_ex(call_fn(tc), "arguments", &v);
    return json_object_is_type(v, json_type_null) ? NULL : v;
}

/*
 * Parse and check the tool definitions and calls. tools_json: a JSON array
 * of objects (an empty array is no tools); tool_calls_json[i]: NULL or a
 * JSON array of tool calls of assistant message i, each {"function":
 * {"name": "...", "arguments": {...} or "..."}} (or name / arguments at the
 * top level); for the GLM formats a string of arguments must hold a JSON
 * object (it is rendered key by key).
 */
static int chat_tools_parse(enum tx_chat_format fmt, const struct tx_chat_message *msgs, size_t n,
                            const char *tools_json, const char *const *tool_calls_json,
                            struct chat_tools *t, char *err, size_t errsz)
{
    int rc = 0;
    memset(t, 0, sizeof(*t));
    if (tools_json && *tools_json) {
        t->tools = parse_json(tools_json, "tools", (size_t)-1, err, errsz, &rc);
        if (rc)
            return rc;
        if (!json_object_is_type(t->tools, json_type_array)) {
            chat_tools_free(t);
            return tx_errbuf(err, errsz, TX_EINVAL, "tools: expected a JSON array of tools");
        }
        for (size_t k = 0; k < json_object_array_length(t->tools); k++)
            if (!json_object_is_type(json_object_array_get_idx(t->tools, k), json_type_object)) {
                chat_tools_free(t);
                return tx_errbuf(err, errsz, TX_EINVAL, "tools[%zu]: expected an object", k);
            }
        if (!json_object_array_length(t->tools)) {
            json_object_put(t->tools);
            t->tools = NULL;
        }
    }
    if (!tool_calls_json)
        return 0;
    t->calls = calloc(n ? n : 1, sizeof(*t->calls));
    if (!t->calls) {
        chat_tools_free(t);
        return TX_ENOMEM;
    }
    t->n = n;
    for (size_t i = 0; i < n; i++) {
        if (!tool_calls_json[i] || !*tool_calls_json[i])
            continue;
        const char *role = role_of(msgs[i].role);
        struct json_object *a = parse_json(tool_calls_json[i], "tool_calls", i, err, errsz, &rc);
        if (rc) {
            chat_tools_free(t);
            return rc;
        }
        t->calls[i] = a;
        if (!json_object_is_type(a, json_type_array)) {
            chat_tools_free(t);
            return tx_errbuf(err, errsz, TX_EINVAL, "message %zu: tool_calls: expected an array",
                             i);
        }
        if (!json_object_array_length(a)) {
            json_object_put(a);
            t->calls[i] = NULL;
            continue;
        }
        if (!role || strcmp(role, "assistant")) {
            chat_tools_free(t);
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "message %zu: tool_calls on a %s message (only assistant messages "
                             "make tool calls)",
                             i, role ? role : "(unknown)");
        }
        for (size_t k = 0; k < json_object_array_length(a); k++) {
            struct json_object *tc = json_object_array_get_idx(a, k), *nm, *ty;
            if (!json_object_is_type(tc, json_type_object)) {
                chat_tools_free(t);
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "message %zu: tool_calls[%zu]: expected an object", i, k);
            }
            if (!json_object_object_get_ex(call_fn(tc), "name", &nm) ||
                !json_object_is_type(nm, json_type_string) || !json_object_get_string_len(nm)) {
                chat_tools_free(t);
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "message %zu: tool_calls[%zu].function.name: expected a "
                                 "non-empty string",
                                 i, k);
            }
            if (json_object_object_get_ex(tc, "type", &ty) &&
                !json_object_is_type(ty, json_type_string)) {
                chat_tools_free(t);
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "message %zu: tool_calls[%zu].type: expected a string", i, k);
            }
            struct json_object *args = call_args(tc);
            if (args && !json_object_is_type(args, json_type_object) &&
                !json_object_is_type(args, json_type_string)) {
                chat_tools_free(t);
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "message %zu: tool_calls[%zu].function.arguments: expected an "
                                 "object or a JSON string",
                                 i, k);
            }
            if (args && json_object_is_type(args, json_type_string) &&
                (fmt == TX_CHAT_GLM45 || fmt == TX_CHAT_GLM5 || fmt == TX_CHAT_GLM4)) {
                /* GLM renders the arguments key by key: the string must
                 * hold an object; it replaces the string */
                struct json_object *o = parse_json(json_object_get_string(args),
                                                   "tool_calls[].function.arguments", i, err,
                                                   errsz, &rc);
                if (rc || !json_object_is_type(o, json_type_object)) {
                    json_object_put(o);
                    chat_tools_free(t);
                    return rc ? rc
                              : tx_errbuf(err, errsz, TX_EINVAL,
                                          "message %zu: tool_calls[%zu].function.arguments: "
                                          "not a JSON object",
                                          i, k);
                }
                json_object_object_add(call_fn(tc), "arguments", o);
            }
        }
    }
    return 0;
}

static const char TOOLS_HEAD[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";

/* GLM's tool definitions, after "[gMASK]<sop>": a system turn listing each
 * tool's JSON on its own line and the call format (GLM-4.5/4.6: the
 * arguments one per line; GLM-4.7/5: on one line). */
static int glm_tools_block(struct render *r, struct json_object *tools, bool nl)
{
    int rc = puts_(r, "<|system|>\n") || puts_(r, TOOLS_HEAD) || puts_(r, "\n");
    for (size_t k = 0; !rc && k < json_object_array_length(tools); k++)
        rc = put_json_lit(r, json_object_array_get_idx(tools, k)) || puts_(r, "\n");
    return rc || puts_(r, "</tools>\n\nFor each function call, output the function name and "
                          "arguments within the following XML format:\n") ||
           puts_(r, nl ? "<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n"
                         "<arg_value>{arg-value-1}</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n"
                         "<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>"
                       : "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
                         "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key>"
                         "<arg_value>{arg-value-2}</arg_value>...</tool_call>");
}

/* GLM's tool calls of an assistant turn: "<tool_call>NAME", then per
 * argument <arg_key>K</arg_key><arg_value>V</arg_value> (a string value
 * as it is, any other value as JSON), "</tool_call>"; GLM-4.5/4.6 put a
 * newline before the call and after the name and each value. */
static int glm_tool_calls(struct render *r, struct json_object *calls, bool nl)
{
    int rc = 0;
    for (size_t k = 0; !rc && k < json_object_array_length(calls); k++) {
        struct json_object *tc = json_object_array_get_idx(calls, k);
        struct json_object *args = call_args(tc);
        rc = puts_(r, nl ? "\n<tool_call>" : "<tool_call>") || put_content(r, call_name(tc),
                                                                              strlen(call_name(tc))) ||
             (nl && puts_(r, "\n"));
        if (args) {
            json_object_object_foreach(args, key, v)
            {
                if (rc)
                    break;
                rc = puts_(r, "<arg_key>") || put_content(r, key, strlen(key)) ||
                     puts_(r, nl ? "</arg_key>\n<arg_value>" : "</arg_key><arg_value>");
                if (!rc && json_object_is_type(v, json_type_string))
                    rc = put_content(r, json_object_get_string(v),
                                     (size_t)json_object_get_string_len(v));
                else if (!rc)
                    rc = put_json_lit(r, v);
                rc = rc || puts_(r, nl ? "</arg_value>\n" : "</arg_value>");
            }
        }
        rc = rc || puts_(r, "</tool_call>");
    }
    return rc;
}

/* Qwen3's tool definitions: one system turn (with the first system
 * message's content, which is then not rendered again), each tool's JSON
 * on its own line, the call format. */
static int qwen3_tools_block(struct render *r, struct json_object *tools,
                             const struct tx_chat_message *msgs, size_t n)
{
    int rc = puts_(r, "<|im_start|>system\n");
    if (!rc && n && !strcmp(role_of(msgs[0].role), "system")) {
        const char *c = msgs[0].content ? msgs[0].content : "";
        rc = put_content(r, c, strlen(c)) || puts_(r, "\n\n");
    }
    rc = rc || puts_(r, TOOLS_HEAD);
    for (size_t k = 0; !rc && k < json_object_array_length(tools); k++)
        rc = puts_(r, "\n") || put_json_lit(r, json_object_array_get_idx(tools, k));
    return rc || puts_(r, "\n</tools>\n\nFor each function call, return a json object with "
                          "function name and arguments within <tool_call></tool_call> XML "
                          "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                          "<args-json-object>}\n</tool_call><|im_end|>\n");
}

/* A call's arguments as Qwen3 and DeepSeek-V3 print them: a string as it
 * is, an object as JSON, none as {}. */
static int put_args_text(struct render *r, struct json_object *tc)
{
    struct json_object *a = call_args(tc);
    if (!a)
        return puts_(r, "{}");
    if (json_object_is_type(a, json_type_string))
        return put_content(r, json_object_get_string(a), (size_t)json_object_get_string_len(a));
    return put_json_lit(r, a);
}

/* Qwen3's tool calls: each "<tool_call>\n{"name": ..., "arguments": ...}\n
 * </tool_call>", separated by a newline (and after the content when there
 * is content). */
static int qwen3_tool_calls(struct render *r, struct json_object *calls, bool have_content)
{
    int rc = 0;
    for (size_t k = 0; !rc && k < json_object_array_length(calls); k++) {
        struct json_object *tc = json_object_array_get_idx(calls, k);
        const char *nm = call_name(tc);
        rc = ((k || have_content) && puts_(r, "\n")) || puts_(r, "<tool_call>\n{\"name\": \"") ||
             put_content(r, nm, strlen(nm)) || puts_(r, "\", \"arguments\": ") ||
             put_args_text(r, tc) || puts_(r, "}\n</tool_call>");
    }
    return rc;
}

/*
 * The templates' reasoning extraction from an assistant message without a
 * separate reasoning field:
 *   reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
 *   content   = content.split('</think>')[-1].lstrip('\n')
 */
static void split_reasoning(const char **c, size_t *cn, const char **r, size_t *rn)
{
    const char *s = *c;
    size_t n = *cn;
    const char *close = memmem_(s, n, "</think>", 8);
    if (!close)
        return;
    const char *before = s;
    size_t bn = (size_t)(close - s);
    while (bn && before[bn - 1] == '\n')
        bn--;
    const char *open = memmem_last(before, bn, "<think>", 7);
    if (open) {
        bn -= (size_t)(open + 7 - before);
        before = open + 7;
    }
    while (bn && *before == '\n') {
        before++;
        bn--;
    }
    *r = before;
    *rn = bn;
    const char *last_close = memmem_last(s, n, "</think>", 8);
    const char *after = last_close + 8;
    size_t an = n - (size_t)(after - s);
    while (an && *after == '\n') {
        after++;
        an--;
    }
    *c = after;
    *cn = an;
}

static const char *role_of(const char *role)
{
    if (!role)
        return NULL;
    if (!strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant"))
        return role;
    if (!strcmp(role, "tool") || !strcmp(role, "observation"))
        return "tool";
    return NULL;
}

/* Qwen3's last query: the last user message that is not a tool result
 * wrapped in <tool_response>...</tool_response>; n - 1 when there is none
 * (then no assistant turn is after it), as the template's reverse scan. */
static ssize_t qwen3_last_query(const struct tx_chat_message *msgs, size_t n)
{
    for (size_t k = n; k-- > 0;) {
        if (strcmp(role_of(msgs[k].role), "user"))
            continue;
        const char *c = msgs[k].content ? msgs[k].content : "";
        size_t cn = strlen(c);
        if (cn >= 15 + 16 && !memcmp(c, "<tool_response>", 15) &&
            !memcmp(c + cn - 16, "</tool_response>", 16))
            continue;
        return (ssize_t)k;
    }
    return (ssize_t)n - 1;
}

/* Qwen3 (ChatML), as Qwen3's chat_template renders messages: tool
 * definitions in the first system turn, tool calls after the content,
 * tool results grouped in one user turn. Assistant turns after the last
 * query keep a think block ("<think>\n" + reasoning.strip('\n') +
 * "\n</think>\n\n" + content.lstrip('\n')) when they have reasoning,
 * and the last message always does, an empty one included
 * ("<think>\n\n</think>\n\n"); the others are "assistant\n" + the content
 * as it is (without a separate reasoning field, the text after the last
 * </think>, lstrip('\n')). */
static int render_qwen3(struct render *r, const struct tx_chat_message *msgs, size_t n,
                        unsigned flags, const struct chat_tools *t, char *err, size_t errsz)
{
    ssize_t last_query = qwen3_last_query(msgs, n);
    if (t->tools && qwen3_tools_block(r, t->tools, msgs, n))
        return TX_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *role = role_of(msgs[i].role);
        const char *c = msgs[i].content ? msgs[i].content : "";
        size_t cn = strlen(c);
        if (tok_utf8_validate(c, cn) != cn)
            return tx_errbuf(err, errsz, TX_EINVAL, "message %zu: content is not valid UTF-8", i);
        int rc = 0;
        if (i == 0 && t->tools && !strcmp(role, "system")) {
            continue; /* in the tools' system turn */
        } else if (!strcmp(role, "system") || !strcmp(role, "user")) {
            rc = puts_(r, "<|im_start|>") || puts_(r, role) || puts_(r, "\n") ||
                 put_content(r, c, cn) || puts_(r, "<|im_end|>\n");
        } else if (!strcmp(role, "assistant")) {
            const char *rs = "";
            size_t rn = 0;
            if (msgs[i].reasoning) {
                rs = msgs[i].reasoning;
                rn = strlen(rs);
                if (tok_utf8_validate(rs, rn) != rn)
                    return tx_errbuf(err, errsz, TX_EINVAL,
                                     "message %zu: reasoning is not valid UTF-8", i);
            } else {
                /* content = after the last </think>, lstrip('\n') */
                split_reasoning(&c, &cn, &rs, &rn);
            }
            rc = puts_(r, "<|im_start|>assistant\n");
            if (!rc && (ssize_t)i > last_query && (i + 1 == n || rn)) {
                /* reasoning_content.strip('\n'), content.lstrip('\n') */
                const char *pc = c;
                size_t pn = cn;
                while (rn && *rs == '\n') {
                    rs++;
                    rn--;
                }
                while (rn && rs[rn - 1] == '\n')
                    rn--;
                while (pn && *pc == '\n') {
                    pc++;
                    pn--;
                }
                rc = puts_(r, "<think>\n") || put_content(r, rs, rn) ||
                     puts_(r, "\n</think>\n\n") || put_content(r, pc, pn);
            } else if (!rc) {
                rc = put_content(r, c, cn);
            }
            rc = rc || (t->calls && t->calls[i] && qwen3_tool_calls(r, t->calls[i], cn > 0)) ||
                 puts_(r, "<|im_end|>\n");
        } else { /* tool */
            bool first = i == 0 || strcmp(role_of(msgs[i - 1].role), "tool");
            bool last = i + 1 == n || strcmp(role_of(msgs[i + 1].role), "tool");
            rc = (first && puts_(r, "<|im_start|>user")) || puts_(r, "\n<tool_response>\n") ||
                 put_content(r, c, cn) || puts_(r, "\n</tool_response>") ||
                 (last && puts_(r, "<|im_end|>\n"));
        }
        if (rc)
            return TX_ENOMEM;
    }
    if (flags & TX_CHAT_ADD_GENERATION_PROMPT) {
        if (puts_(r, "<|im_start|>assistant\n") ||
            ((flags & TX_CHAT_NO_THINKING) && puts_(r, "<think>\n\n</think>\n\n")))
            return TX_ENOMEM;
    }
    return tok_buf_reserve(&r->b, 0) ? TX_ENOMEM : 0;
}

#define DS_BOS "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
#define DS_OUTS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81outputs\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_OUTS_END "<\xef\xbd\x9ctool\xe2\x96\x81outputs\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_OUT_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_OUT_END "<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALLS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>"

/* One DeepSeek-V3 tool call: TYPE<sep>NAME, the arguments in a ```json
 * block. */
static int ds_call(struct render *r, struct json_object *tc)
{
    struct json_object *ty;
    const char *type = "function", *nm = call_name(tc);
    if (json_object_object_get_ex(tc, "type", &ty) && json_object_is_type(ty, json_type_string))
        type = json_object_get_string(ty);
    return puts_(r, DS_CALL_BEGIN) || put_content(r, type, strlen(type)) || puts_(r, DS_SEP) ||
           put_content(r, nm, strlen(nm)) || puts_(r, "\n```json\n") || put_args_text(r, tc) ||
           puts_(r, "\n```" DS_CALL_END);
}

/* Both DeepSeek templates begin with BOS and every system message's
 * content, joined by a blank line, before the conversation; every content
 * is checked for valid UTF-8 here. 0, TX_ENOMEM or TX_EINVAL (err set). */
static int ds_prologue(struct render *r, const struct tx_chat_message *msgs, size_t n, char *err,
                       size_t errsz)
{
    bool first_sp = true;
    if (puts_(r, DS_BOS))
        return TX_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *c = msgs[i].content ? msgs[i].content : "";
        size_t cn = strlen(c);
        if (tok_utf8_validate(c, cn) != cn)
            return tx_errbuf(err, errsz, TX_EINVAL, "message %zu: content is not valid UTF-8", i);
        if (strcmp(role_of(msgs[i].role), "system"))
            continue;
        if ((!first_sp && puts_(r, "\n\n")) || put_content(r, c, cn))
            return TX_ENOMEM;
        first_sp = false;
    }
    return 0;
}

/* DeepSeek-V3, as its tokenizer_config.json chat_template renders messages
 * (tool calls too; it has no tool definitions): the system messages first
 * (joined by a blank line),
 * then the turns; after tool outputs the assistant's content follows
 * "tool outputs end" instead of a new Assistant marker. Reasoning is
 * dropped (content after the last "</think>", as R1's template does). */
static int render_deepseek3(struct render *r, const struct tx_chat_message *msgs, size_t n,
                            unsigned flags, const struct chat_tools *t, char *err, size_t errsz)
{
    /* is_first: set by the first tool call of the conversation and never
     * reset, as in DeepSeek-V3's template (later tool-calling turns start
     * with a newline, without the Assistant marker) */
    bool is_tool = false, output_first = true, is_first = false;
    int rc = ds_prologue(r, msgs, n, err, errsz);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        const char *role = role_of(msgs[i].role);
        const char *c = msgs[i].content ? msgs[i].content : "";
        size_t cn = strlen(c);
        if (!strcmp(role, "user")) {
            is_tool = false;
            rc = puts_(r, DS_USER) || put_content(r, c, cn);
        } else if (!strcmp(role, "assistant") && t->calls && t->calls[i]) {
            /* the content as it is (no reasoning split), then the calls */
            is_tool = false;
            for (size_t k = 0; !rc && k < json_object_array_length(t->calls[i]); k++) {
                struct json_object *tc = json_object_array_get_idx(t->calls[i], k);
                if (!is_first)
                    rc = puts_(r, DS_ASSISTANT) || put_content(r, c, cn) ||
                         puts_(r, DS_CALLS_BEGIN) || ds_call(r, tc);
                else
                    rc = puts_(r, "\n") || ds_call(r, tc);
                is_first = true;
            }
            rc = rc || puts_(r, DS_CALLS_END DS_EOS);
        } else if (!strcmp(role, "assistant")) {
            /* content.split('</think>')[-1], as it is (no lstrip); after
             * tool outputs the content is not split */
            const char *close = is_tool ? NULL : memmem_last(c, cn, "</think>", 8);
            if (close) {
                cn -= (size_t)(close + 8 - c);
                c = close + 8;
            }
            rc = puts_(r, is_tool ? DS_OUTS_END : DS_ASSISTANT) || put_content(r, c, cn) ||
                 puts_(r, DS_EOS);
            is_tool = false;
        } else if (!strcmp(role, "tool")) {
            is_tool = true;
            rc = puts_(r, output_first ? DS_OUTS_BEGIN DS_OUT_BEGIN : "\n" DS_OUT_BEGIN) ||
                 put_content(r, c, cn) || puts_(r, DS_OUT_END);
            output_first = false;
        }
    }
    if (!rc && is_tool)
        rc = puts_(r, DS_OUTS_END);
    if (!rc && (flags & TX_CHAT_ADD_GENERATION_PROMPT) && !is_tool)
        rc = puts_(r, DS_ASSISTANT);
    if (rc)
        return TX_ENOMEM;
    return tok_buf_reserve(&r->b, 0) ? TX_ENOMEM : 0;
}

/* DeepSeek-V3.1, as its chat_template renders messages (hybrid
 * thinking; reasoning_content is not rendered): the system messages first;
 * the Assistant marker (+ "</think>") only right after a user turn; tool
 * calls NAME<sep>ARGUMENTS without a type or a ```json block; tool
 * results without the outputs begin/end wrappers; an assistant turn
 * after tool results is its content and EOS. */
static int render_deepseek31(struct render *r, const struct tx_chat_message *msgs, size_t n,
                             unsigned flags, const struct chat_tools *t, char *err, size_t errsz)
{
    bool thinking = (flags & TX_CHAT_THINKING) && !(flags & TX_CHAT_NO_THINKING);
    bool is_tool = false, last_user = false;
    int rc = ds_prologue(r, msgs, n, err, errsz);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        const char *role = role_of(msgs[i].role);
        const char *c = msgs[i].content ? msgs[i].content : "";
        size_t cn = strlen(c);
        if (!strcmp(role, "user")) {
            is_tool = false;
            last_user = true;
            rc = puts_(r, DS_USER) || put_content(r, c, cn);
        } else if (!strcmp(role, "assistant") && t->calls && t->calls[i]) {
            rc = last_user && puts_(r, DS_ASSISTANT "</think>");
            last_user = is_tool = false;
            for (size_t k = 0; !rc && k < json_object_array_length(t->calls[i]); k++) {
                struct json_object *tc = json_object_array_get_idx(t->calls[i], k);
                const char *nm = call_name(tc);
                rc = (!k && (put_content(r, c, cn) || puts_(r, DS_CALLS_BEGIN))) ||
                     puts_(r, DS_CALL_BEGIN) || put_content(r, nm, strlen(nm)) ||
                     puts_(r, DS_SEP) || put_args_text(r, tc) || puts_(r, DS_CALL_END);
            }
            rc = rc || puts_(r, DS_CALLS_END DS_EOS);
        } else if (!strcmp(role, "assistant")) {
            rc = last_user && puts_(r, DS_ASSISTANT "</think>");
            last_user = false;
            if (!is_tool) {
                /* content.split('</think>', 1)[1] */
                const char *close = memmem_(c, cn, "</think>", 8);
                if (close) {
                    cn -= (size_t)(close + 8 - c);
                    c = close + 8;
                }
            }
            is_tool = false;
            rc = rc || put_content(r, c, cn) || puts_(r, DS_EOS);
        } else if (!strcmp(role, "tool")) {
            last_user = false;
            is_tool = true;
            rc = puts_(r, DS_OUT_BEGIN) || put_content(r, c, cn) || puts_(r, DS_OUT_END);
        }
    }
    if (!rc && (flags & TX_CHAT_ADD_GENERATION_PROMPT) && last_user && !is_tool)
        rc = puts_(r, thinking ? DS_ASSISTANT "<think>" : DS_ASSISTANT "</think>");
    if (rc)
        return TX_ENOMEM;
    return tok_buf_reserve(&r->b, 0) ? TX_ENOMEM : 0;
}

static int render(struct render *r, enum tx_chat_format fmt, const struct tx_chat_message *msgs,
                  size_t n, unsigned flags, const struct chat_tools *t, char *err, size_t errsz)
{
    bool think = !(flags & TX_CHAT_NO_THINKING);
    bool nl = fmt != TX_CHAT_GLM5; /* GLM-4.7/5 dropped the newlines */
    ssize_t last_user = -1;
    for (size_t i = 0; i < n; i++) {
        const char *role = role_of(msgs[i].role);
        if (!role)
            return tx_errbuf(err, errsz, TX_EINVAL, "message %zu: unknown role \"%.32s\"", i,
                             msgs[i].role ? msgs[i].role : "(null)");
        if (!strcmp(role, "user"))
            last_user = (ssize_t)i;
    }
    if (fmt == TX_CHAT_QWEN3)
        return render_qwen3(r, msgs, n, flags, t, err, errsz);
    if (fmt == TX_CHAT_DEEPSEEK3)
        return render_deepseek3(r, msgs, n, flags, t, err, errsz);
    if (fmt == TX_CHAT_DEEPSEEK31)
        return render_deepseek31(r, msgs, n, flags, t, err, errsz);
    if (puts_(r, "[gMASK]<sop>"))
        return TX_ENOMEM;
    if (t->tools && fmt != TX_CHAT_GLM4 && glm_tools_block(r, t->tools, nl))
        return TX_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *role = role_of(msgs[i].role);
        const char *c = msgs[i].content ? msgs[i].content : "";
        size_t cn = strlen(c);
        if (tok_utf8_validate(c, cn) != cn)
            return tx_errbuf(err, errsz, TX_EINVAL, "message %zu: content is not valid UTF-8", i);
        int rc = 0;
        if (fmt == TX_CHAT_GLM4) {
            const char *tag = !strcmp(role, "tool") ? "observation" : role;
            rc = puts_(r, "<|") || puts_(r, tag) || puts_(r, "|>\n") || put_content(r, c, cn);
        } else if (!strcmp(role, "system") || !strcmp(role, "user")) {
            rc = puts_(r, !strcmp(role, "user") ? "<|user|>" : "<|system|>") ||
                 (nl && puts_(r, "\n")) || put_content(r, c, cn);
            if (!rc && fmt == TX_CHAT_GLM45 && !think && !strcmp(role, "user") &&
                !(cn >= 8 && !memcmp(c + cn - 8, "/nothink", 8)))
                rc = puts_(r, "/nothink");
        } else if (!strcmp(role, "assistant")) {
            const char *rs = "";
            size_t rn = 0;
            if (msgs[i].reasoning) {
                rs = msgs[i].reasoning;
                rn = strlen(rs);
                if (tok_utf8_validate(rs, rn) != rn)
                    return tx_errbuf(err, errsz, TX_EINVAL,
                                     "message %zu: reasoning is not valid UTF-8", i);
            } else {
                split_reasoning(&c, &cn, &rs, &rn);
            }
            rc = puts_(r, "<|assistant|>");
            if (!rc && (ssize_t)i > last_user && rn) {
                py_strip(&rs, &rn);
                rc = puts_(r, nl ? "\n<think>" : "<think>") || put_content(r, rs, rn) ||
                     puts_(r, "</think>");
            } else if (!rc) {
                rc = puts_(r, nl ? "\n<think></think>" : "</think>");
            }
            py_strip(&c, &cn);
            if (!rc && cn)
                rc = (nl && puts_(r, "\n")) || put_content(r, c, cn);
            if (!rc && t->calls && t->calls[i])
                rc = glm_tool_calls(r, t->calls[i], nl);
        } else { /* tool */
            if (i == 0 || strcmp(role_of(msgs[i - 1].role), "tool"))
                rc = puts_(r, "<|observation|>");
            rc = rc || puts_(r, nl ? "\n<tool_response>\n" : "<tool_response>") ||
                 put_content(r, c, cn) || puts_(r, nl ? "\n</tool_response>" : "</tool_response>");
        }
        if (rc)
            return TX_ENOMEM;
    }
    if (flags & TX_CHAT_ADD_GENERATION_PROMPT) {
        int rc;
        if (fmt == TX_CHAT_GLM4)
            rc = puts_(r, "<|assistant|>\n");
        else if (fmt == TX_CHAT_GLM45)
            rc = puts_(r, "<|assistant|>") || (!think && puts_(r, "\n<think></think>"));
        else
            rc = puts_(r, think ? "<|assistant|><think>" : "<|assistant|></think>");
        if (rc)
            return TX_ENOMEM;
    }
    return tok_buf_reserve(&r->b, 0) ? TX_ENOMEM : 0;
}

static int check_args(enum tx_chat_format fmt, const struct tx_chat_message *msgs, size_t n,
                      char *err, size_t errsz)
{
    if (fmt != TX_CHAT_GLM4 && fmt != TX_CHAT_GLM45 && fmt != TX_CHAT_GLM5 && fmt != TX_CHAT_QWEN3 &&
        fmt != TX_CHAT_DEEPSEEK3 && fmt != TX_CHAT_DEEPSEEK31)
        return tx_errbuf(err, errsz, TX_EINVAL, "unknown chat format %d", (int)fmt);
    if (!msgs && n)
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    return 0;
}

/* check_args, then the tools parsed into t (GLM-4 renders none) */
static int prepare(enum tx_chat_format fmt, const struct tx_chat_message *msgs, size_t n,
                   const char *tools_json, const char *const *tool_calls_json,
                   struct chat_tools *t, char *err, size_t errsz)
{
    memset(t, 0, sizeof(*t));
    int rc = check_args(fmt, msgs, n, err, errsz);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (!role_of(msgs[i].role))
            return tx_errbuf(err, errsz, TX_EINVAL, "message %zu: unknown role \"%.32s\"", i,
                             msgs[i].role ? msgs[i].role : "(null)");
    rc = chat_tools_parse(fmt, msgs, n, tools_json, tool_calls_json, t, err, errsz);
    if (rc)
        return rc == TX_ENOMEM ? tx_errbuf(err, errsz, rc, "out of memory") : rc;
    bool any_call = false;
    for (size_t i = 0; t->calls && i < n; i++)
        any_call |= t->calls[i] != NULL;
    if (fmt == TX_CHAT_GLM4 && (t->tools || any_call)) {
        chat_tools_free(t);
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                         "the GLM-4 (glm-4-9b-chat) format does not render tools or tool calls");
    }
    return 0;
}

int tx_tokenizer_chat_render(enum tx_chat_format fmt, const struct tx_chat_message *msgs,
                             size_t n_msgs, unsigned flags, char **text, size_t *len, char *err,
                             size_t errsz)
{
    return tx_tokenizer_chat_render_tools(fmt, msgs, n_msgs, NULL, NULL, flags, text, len, err,
                                          errsz);
}

int tx_tokenizer_chat_render_tools(enum tx_chat_format fmt, const struct tx_chat_message *msgs,
                                   size_t n_msgs, const char *tools_json,
                                   const char *const *tool_calls_json, unsigned flags, char **text,
                                   size_t *len, char *err, size_t errsz)
{
    if (err && errsz)
        err[0] = 0;
    if (!text)
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    *text = NULL;
    struct chat_tools t;
    int rc = prepare(fmt, msgs, n_msgs, tools_json, tool_calls_json, &t, err, errsz);
    if (rc)
        return rc;
    struct render r = {{0}, NULL, 0, 0};
    rc = render(&r, fmt, msgs, n_msgs, flags, &t, err, errsz);
    chat_tools_free(&t);
    free(r.lit);
    if (rc) {
        free(r.b.p);
        return rc == TX_ENOMEM ? tx_errbuf(err, errsz, rc, "out of memory") : rc;
    }
    *text = r.b.p;
    if (len)
        *len = r.b.len;
    return 0;
}

int tx_tokenizer_chat_encode(const struct tx_tokenizer *tok, enum tx_chat_format fmt,
                             const struct tx_chat_message *msgs, size_t n_msgs, unsigned flags,
                             int32_t **ids, size_t *n_ids, char *err, size_t errsz)
{
    return tx_tokenizer_chat_encode_tools(tok, fmt, msgs, n_msgs, NULL, NULL, flags, ids, n_ids,
                                          err, errsz);
}

int tx_tokenizer_chat_encode_tools(const struct tx_tokenizer *tok, enum tx_chat_format fmt,
                                   const struct tx_chat_message *msgs, size_t n_msgs,
                                   const char *tools_json, const char *const *tool_calls_json,
                                   unsigned flags, int32_t **ids, size_t *n_ids, char *err,
                                   size_t errsz)
{
    if (err && errsz)
        err[0] = 0;
    if (!tok || !ids || !n_ids)
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    struct chat_tools t;
    int rc = prepare(fmt, msgs, n_msgs, tools_json, tool_calls_json, &t, err, errsz);
    if (rc)
        return rc;
    struct render r = {{0}, NULL, 0, 0};
    rc = render(&r, fmt, msgs, n_msgs, flags, &t, err, errsz);
    chat_tools_free(&t);
    if (!rc) {
        bool lit = flags & TX_CHAT_LITERAL_CONTENT;
        rc = tok_encode_ex(tok, r.b.p, r.b.len, 0, lit ? r.lit : NULL, lit ? r.n_lit : 0, ids,
                           n_ids, err, errsz);
    } else if (rc == TX_ENOMEM) {
        rc = tx_errbuf(err, errsz, rc, "out of memory");
    }
    free(r.lit);
    free(r.b.p);
    return rc;
}

int tx_tokenizer_chat_stop_tokens(const struct tx_tokenizer *tok, int32_t *ids, size_t cap)
{
    static const char *const names[] = {"<|endoftext|>", "<|user|>", "<|observation|>"};
    if (!tok || (!ids && cap))
        return tx_errbuf(NULL, 0, TX_EINVAL, "tx_tokenizer_chat_stop_tokens: NULL argument");
    int n = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        int32_t id = tok_lookup(tok, names[i], strlen(names[i]));
        if (id < 0)
            continue;
        if ((size_t)n < cap)
            ids[n] = id;
        n++;
    }
    return n;
}

int tx_chat_format_from_name(const char *name)
{
    if (!name)
        return tx_errbuf(NULL, 0, TX_EINVAL, "chat format: NULL name");
    char k[16];
    size_t j = 0;
    for (size_t i = 0; name[i]; i++) {
        char ch = (char)tolower((unsigned char)name[i]);
        if (ch == '-' || ch == '_' || ch == '.')
            continue;
        if (j + 1 >= sizeof(k))
            break;
        k[j++] = ch;
    }
    k[j] = 0;
    if (!strcmp(k, "glm4"))
        return TX_CHAT_GLM4;
    if (!strcmp(k, "glm45") || !strcmp(k, "glm46"))
        return TX_CHAT_GLM45;
    if (!strcmp(k, "glm47") || !strcmp(k, "glm5") || !strcmp(k, "glm51"))
        return TX_CHAT_GLM5;
    if (!strcmp(k, "qwen3") || !strcmp(k, "chatml"))
        return TX_CHAT_QWEN3;
    if (!strcmp(k, "deepseek3") || !strcmp(k, "deepseekv3"))
        return TX_CHAT_DEEPSEEK3;
    if (!strcmp(k, "deepseek31") || !strcmp(k, "deepseekv31"))
        return TX_CHAT_DEEPSEEK31;
    return tx_errbuf(NULL, 0, TX_EINVAL,
                     "unknown chat format \"%.32s\" (glm4, glm4.5, glm4.6, glm4.7, glm5, glm5.1, "
                     "qwen3, deepseek3, deepseek3.1)",
                     name);
}

/* ---- recognising a chat_template ------------------------------------------ */

/* What follows the first "<|user|>" of the template text: a newline (raw,
 * or the two characters \n of a Jinja string) in GLM-4 and GLM-4.5/4.6,
 * content directly in GLM-4.7 and GLM-5. */
static int user_newline(const char *t)
{
    const char *u = strstr(t, "<|user|>");
    if (!u)
        return TX_NONE;
    u += 8;
    return *u == '\n' || (u[0] == '\\' && u[1] == 'n');
}

int tx_chat_format_of_template(const char *t, const char **which)
{
    const char *dummy;
    if (!which)
        which = &dummy;
    *which = "";
    if (!t)
        return TX_NONE;
    /* Qwen3: ChatML turns; not the ChatML variants that render otherwise:
     * Qwen3-Coder's XML tool calls ("<function=NAME>") and the
     * thinking-only Qwen3-2507 templates, whose generation prompt forces
     * "<think>\n" (refused: choose the format explicitly) */
    if (strstr(t, "<|im_start|>") && strstr(t, "<|im_end|>") && !strstr(t, "[gMASK]<sop>")) {
        if (strstr(t, "<function=") || strstr(t, "assistant\\n<think>\\n'") ||
            strstr(t, "assistant\n<think>\n'"))
            return TX_NONE;
        *which = "Qwen3 (ChatML)";
        return TX_CHAT_QWEN3;
    }
    /* DeepSeek-V3: fullwidth-bar User / Assistant markers */
    if (strstr(t, "<\xef\xbd\x9cUser\xef\xbd\x9c>") &&
        strstr(t, "<\xef\xbd\x9c"
                  "Assistant\xef\xbd\x9c>")) {
        /* V3.1: an assistant turn opens "<｜Assistant｜></think>" */
        if (strstr(t, "<\xef\xbd\x9c"
                      "Assistant\xef\xbd\x9c></think>")) {
            *which = "DeepSeek-V3.1";
            return TX_CHAT_DEEPSEEK31;
        }
        *which = "DeepSeek-V3";
        return TX_CHAT_DEEPSEEK3;
    }
    if (!strstr(t, "[gMASK]<sop>") || !strstr(t, "<|assistant|>") || !strstr(t, "<|user|>"))
        return TX_NONE;
    int nl = user_newline(t);
    int think = strstr(t, "<think>") != NULL;
    if (nl == 1 && !think) {
        *which = "GLM-4 (glm-4-9b-chat)";
        return TX_CHAT_GLM4;
    }
    /* GLM-4.5/4.6: "<|user|>\n", "/nothink", generation prompt
     * "<|assistant|>" + "\n<think></think>" without thinking */
    if (nl == 1 && think && strstr(t, "/nothink")) {
        *which = "GLM-4.5/4.6";
        return TX_CHAT_GLM45;
    }
    /* GLM-4.7/5: "<|user|>" + content, generation prompt "<|assistant|><think>"
     * or "<|assistant|></think>" */
    if (nl == 0 && think && strstr(t, "</think>") && !strstr(t, "/nothink")) {
        *which = "GLM-4.7/GLM-5";
        return TX_CHAT_GLM5;
    }
    return TX_NONE;
}

const char *tx_chat_format_name(int f)
{
    return f == TX_CHAT_GLM4        ? "glm4"
           : f == TX_CHAT_GLM45     ? "glm4.5"
           : f == TX_CHAT_QWEN3     ? "qwen3"
           : f == TX_CHAT_DEEPSEEK3  ? "deepseek3"
           : f == TX_CHAT_DEEPSEEK31 ? "deepseek3.1"
                                     : "glm4.7";
}
