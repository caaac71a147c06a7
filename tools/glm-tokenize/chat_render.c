/* SPDX-License-Identifier: MIT */
/*
 * glm-tokenize --chat-render: libtx's rendering of a conversation given as
 * JSON, for the reference check of tools/chat-template-check (which renders
 * the package's own chat_template with Jinja2 and compares the bytes).
 *
 * Conversation file (UTF-8 JSON, at most 1 MiB):
 *   {"messages": [{"role": "system" | "user" | "assistant" | "tool",
 *                  "content": "..." (or null),
 *                  "reasoning_content": "..." (assistant, optional),
 *                  "tool_calls": [...] (assistant, optional: OpenAI's
 *                                 [{"type": "function", "function":
 *                                 {"name": ..., "arguments": {...} or "..."}}])},
 *                 ...],
 *    "tools": [...]                          (optional: tool definitions),
 *    "add_generation_prompt": true | false   (default true),
 *    "enable_thinking": true | false         (default: not passed -- the GLM
 *                                             and Qwen3 templates think, the
 *                                             DeepSeek-V3.1 one does not)}
 *
 * The format is --chat FORMAT, else the one glm_model_chat_format picks for
 * the package: recognised from its chat_template (tx_chat_format_of_template).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx-internal/tx_chat_format.h>
#include <tx/tx_error.h>
#include <tx-internal/tx_smd.h>
#include <tx/tx_tokenizer.h>

#include "chat_render.h"
#include "common/cli.h"

#define CONV_MAX (1u << 20)
#define MSG_MAX 256

static struct tx_smd *open_pkg(const char *prog, const char *pkg)
{
    char err[512];
    struct tx_smd *s = NULL;
    if (tx_smd_open(pkg, 0, &s, err, sizeof(err))) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return NULL;
    }
    return s;
}

int gt_print_tokenizer_config(const char *prog, const char *pkg)
{
    struct tx_smd *s = open_pkg(prog, pkg);
    if (!s)
        return 1;
    size_t len = 0;
    const char *tc = tx_smd_tokenizer_config_json(s, &len);
    int st = 0;
    if (!tc) {
        fprintf(stderr, "%s: %s: the package has no tokenizer_config.json\n", prog, pkg);
        st = 1;
    } else if (fwrite(tc, 1, len, stdout) != len) {
        st = 1;
    }
    tx_smd_close(s);
    return st;
}

/* The package's chat format, as glm_model_chat_format picks it from the
 * chat_template (a package without one: an error here, the runtime would
 * fall back to the architecture's). */
static int pkg_format(const char *prog, const char *pkg)
{
    struct tx_smd *s = open_pkg(prog, pkg);
    if (!s)
        return -1;
    size_t len = 0;
    const char *tc = tx_smd_tokenizer_config_json(s, &len);
    struct json_object *o = tc ? json_tokener_parse(tc) : NULL, *v = NULL;
    int f = -1;
    if (!o || !json_object_object_get_ex(o, "chat_template", &v) ||
        !json_object_is_type(v, json_type_string)) {
        fprintf(stderr,
                "%s: %s: the package has no chat_template (tokenizer_config.json); give "
                "--chat FORMAT\n",
                prog, pkg);
    } else {
        const char *which = "";
        f = tx_chat_format_of_template(json_object_get_string(v), &which);
        if (f < 0)
            fprintf(stderr,
                    "%s: %s: the package's chat_template is not a template libtx renders "
                    "(GLM-4, GLM-4.5/4.6, GLM-4.7/5, Qwen3, DeepSeek-V3, DeepSeek-V3.1); give --chat FORMAT\n",
                    prog, pkg);
        else
            fprintf(stderr, "%s: chat format %s (the package's chat_template is the %s template)\n",
                    prog, tx_chat_format_name(f), which);
    }
    json_object_put(o);
    tx_smd_close(s);
    return f;
}

/* The whole file at path (NUL-terminated, *len bytes), at most max bytes
 * (limit names it), or NULL with a message. */
static char *read_text(const char *prog, const char *path, size_t max, const char *limit,
                       size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s\n", prog, path);
        return NULL;
    }
    char *txt = NULL;
    int rc = txc_read_stream(f, &txt, len);
    fclose(f);
    if (rc || *len > max) {
        if (rc)
            fprintf(stderr, "%s: %s: %s\n", prog, path, tx_strerror(rc));
        else
            fprintf(stderr, "%s: %s: larger than the %s limit\n", prog, path, limit);
        free(txt);
        return NULL;
    }
    return txt;
}

int gt_recognise_template(const char *prog, const char *path)
{
    size_t len = 0;
    char *txt = read_text(prog, path, 16 * CONV_MAX, "16 MiB", &len);
    if (!txt)
        return 1;
    if (strlen(txt) != len) {
        fprintf(stderr, "%s: %s: contains a NUL byte\n", prog, path);
        free(txt);
        return 1;
    }
    struct json_object *o = NULL, *v = NULL;
    const char *t = txt;
    size_t n = strlen(path);
    if (n >= 5 && !strcmp(path + n - 5, ".json")) {
        o = json_tokener_parse(txt);
        if (!o || !json_object_object_get_ex(o, "chat_template", &v) ||
            !json_object_is_type(v, json_type_string)) {
            fprintf(stderr, "%s: %s: no chat_template string\n", prog, path);
            json_object_put(o);
            free(txt);
            return 1;
        }
        t = json_object_get_string(v);
    }
    const char *which = "";
    int fmt = tx_chat_format_of_template(t, &which);
    int st = 0;
    if (fmt < 0) {
        fprintf(stderr, "%s: %s: not a chat template libtx recognises\n", prog, path);
        st = 1;
    } else {
        printf("%s (%s)\n", tx_chat_format_name(fmt), which);
    }
    json_object_put(o);
    free(txt);
    return st;
}

static int opt_bool(struct json_object *root, const char *k, int def, int *out, const char *path,
                    const char *prog)
{
    struct json_object *v;
    *out = def;
    if (!json_object_object_get_ex(root, k, &v) || json_object_is_type(v, json_type_null))
        return 0;
    if (!json_object_is_type(v, json_type_boolean)) {
        fprintf(stderr, "%s: %s: %s: expected true or false\n", prog, path, k);
        return -1;
    }
    *out = json_object_get_boolean(v) ? 1 : 0;
    return 0;
}

/* A string field of message i (NULL if absent or null), -1 on a bad type. */
static int msg_str(struct json_object *m, const char *k, size_t i, const char **out,
                   const char *path, const char *prog)
{
    struct json_object *v;
    *out = NULL;
    if (!json_object_object_get_ex(m, k, &v) || json_object_is_type(v, json_type_null))
        return 0;
    if (!json_object_is_type(v, json_type_string)) {
        fprintf(stderr, "%s: %s: messages[%zu].%s: expected a string\n", prog, path, i, k);
        return -1;
    }
    *out = json_object_get_string(v);
    if (strlen(*out) != (size_t)json_object_get_string_len(v)) {
        fprintf(stderr, "%s: %s: messages[%zu].%s: contains a NUL character\n", prog, path, i, k);
        return -1;
    }
    return 0;
}

int gt_chat_render(const char *prog, const char *pkg, const char *conv, const char *fmt_name)
{
    int fmt;
    if (fmt_name) {
        if ((fmt = tx_chat_format_from_name(fmt_name)) < 0) {
            fprintf(stderr, "%s: %s\n", prog, tx_last_error());
            return 2;
        }
    } else if ((fmt = pkg_format(prog, pkg)) < 0) {
        return 1;
    }
    size_t len = 0;
    char *txt = read_text(prog, conv, CONV_MAX, "1 MiB", &len);
    if (!txt)
        return 1;
    struct json_tokener *tk = json_tokener_new();
    struct json_object *root = tk ? json_tokener_parse_ex(tk, txt, (int)len) : NULL;
    int complete = tk && json_tokener_get_error(tk) == json_tokener_success &&
                   json_tokener_get_parse_end(tk) == len;
    if (tk)
        json_tokener_free(tk);
    free(txt);
    struct json_object *msgs = NULL;
    int status = 1, gen = 1, think = 1;
    struct tx_chat_message m[MSG_MAX];
    const char *calls[MSG_MAX];
    char *tools = NULL;
    bool any_calls = false;
    size_t n = 0;
    memset(calls, 0, sizeof(calls));
    if (!root || !complete || !json_object_is_type(root, json_type_object)) {
        fprintf(stderr, "%s: %s: not a JSON object\n", prog, conv);
        goto out;
    }
    if (!json_object_object_get_ex(root, "messages", &msgs) ||
        !json_object_is_type(msgs, json_type_array)) {
        fprintf(stderr, "%s: %s: messages: expected a list of messages\n", prog, conv);
        goto out;
    }
    n = json_object_array_length(msgs);
    if (n > MSG_MAX) {
        fprintf(stderr, "%s: %s: messages: %zu messages, more than %d\n", prog, conv, n, MSG_MAX);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct json_object *e = json_object_array_get_idx(msgs, i);
        if (!json_object_is_type(e, json_type_object)) {
            fprintf(stderr, "%s: %s: messages[%zu]: expected an object\n", prog, conv, i);
            goto out;
        }
        if (msg_str(e, "role", i, &m[i].role, conv, prog) ||
            msg_str(e, "content", i, &m[i].content, conv, prog) ||
            msg_str(e, "reasoning_content", i, &m[i].reasoning, conv, prog))
            goto out;
        if (!m[i].role) {
            fprintf(stderr, "%s: %s: messages[%zu].role: missing\n", prog, conv, i);
            goto out;
        }
        struct json_object *tc;
        if (json_object_object_get_ex(e, "tool_calls", &tc) &&
            !json_object_is_type(tc, json_type_null)) {
            /* libtx parses the JSON text again (keys keep their order) */
            calls[i] = json_object_to_json_string_ext(tc, JSON_C_TO_STRING_PLAIN |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE);
            any_calls = true;
        }
    }
    struct json_object *tv;
    if (json_object_object_get_ex(root, "tools", &tv) && !json_object_is_type(tv, json_type_null)) {
        tools = strdup(json_object_to_json_string_ext(tv, JSON_C_TO_STRING_PLAIN |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE));
        if (!tools) {
            fprintf(stderr, "%s: out of memory\n", prog);
            goto out;
        }
    }
    if (opt_bool(root, "add_generation_prompt", 1, &gen, conv, prog) ||
        opt_bool(root, "enable_thinking", -1, &think, conv, prog))
        goto out;
    char *text = NULL, err[512];
    size_t tl = 0;
    /* enable_thinking absent: neither flag (as the template sees an
     * undefined variable); true: TX_CHAT_THINKING; false: NO_THINKING */
    unsigned fl = (gen ? TX_CHAT_ADD_GENERATION_PROMPT : 0) |
                  (think < 0 ? 0 : think ? TX_CHAT_THINKING : TX_CHAT_NO_THINKING);
    if (tx_tokenizer_chat_render_tools((enum tx_chat_format)fmt, m, n, tools,
                                       any_calls ? calls : NULL, fl, &text, &tl, err,
                                       sizeof(err))) {
        fprintf(stderr, "%s: %s: %s\n", prog, conv, err);
        goto out;
    }
    status = fwrite(text, 1, tl, stdout) == tl ? 0 : 1;
    free(text);
out:
    free(tools);
    json_object_put(root);
    return status;
}
