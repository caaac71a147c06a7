/* SPDX-License-Identifier: MIT */
/*
 * glm-tokenize --chat-template-file FILE --chat-render CONV.json
 *     [--chat-kwargs JSON] [--tokenizer-config TOKENIZER_CONFIG.json]
 *
 * Renders the conversation with the chat template FILE (a
 * chat_template.jinja, or a tokenizer_config.json: its chat_template and
 * special tokens) by libtx's Jinja renderer (tx/tx_jinja.h), with the
 * variables transformers' apply_chat_template passes, and prints the text
 * exactly. CONV.json is {"messages": [...], "tools": [...],
 * "add_generation_prompt": true|false (default true), ...}: its other
 * members (enable_thinking, ...) are template kwargs, and --chat-kwargs'
 * members override them.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/tx_error.h>
#include <tx/tx_jinja.h>

#include "chat_render.h"
#include "common/cli.h"

#define FILE_MAX (16u << 20)

static char *slurp(const char *prog, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s\n", prog, path);
        return NULL;
    }
    char *txt = NULL;
    size_t len = 0;
    int rc = txc_read_stream(f, &txt, &len);
    fclose(f);
    if (rc || len > FILE_MAX || strlen(txt) != len) {
        fprintf(stderr, "%s: %s: %s\n", prog, path,
                rc ? tx_strerror(rc) : len > FILE_MAX ? "larger than 16 MiB" : "contains a NUL byte");
        free(txt);
        return NULL;
    }
    return txt;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

int gt_chat_render_jinja(const char *prog, const char *tmpl_path, const char *conv,
                         const char *kwargs, const char *tokcfg_path)
{
    int status = 1;
    char err[1024];
    char *tmpl_file = NULL, *tokcfg = NULL, *tmpl = NULL, *conv_txt = NULL, *vars = NULL,
         *text = NULL;
    struct json_object *root = NULL, *kw = NULL;
    struct tx_jinja *t = NULL;
    if (!(tmpl_file = slurp(prog, tmpl_path)))
        goto out;
    if (ends_with(tmpl_path, ".json")) {
        if (tx_chat_template_of_config(tmpl_file, &tmpl, err, sizeof(err))) {
            fprintf(stderr, "%s: %s: %s\n", prog, tmpl_path, err);
            goto out;
        }
        if (!tokcfg_path) {
            tokcfg = tmpl_file;
            tmpl_file = NULL;
        }
    } else {
        tmpl = tmpl_file;
        tmpl_file = NULL;
    }
    if (tokcfg_path && !(tokcfg = slurp(prog, tokcfg_path)))
        goto out;
    if (tx_jinja_compile(tmpl, strlen(tmpl), &t, err, sizeof(err))) {
        fprintf(stderr, "%s: %s: %s\n", prog, tmpl_path, err);
        goto out;
    }
    if (!(conv_txt = slurp(prog, conv)))
        goto out;
    root = json_tokener_parse(conv_txt);
    struct json_object *msgs = NULL, *tools = NULL, *gen = NULL;
    if (!root || !json_object_is_type(root, json_type_object) ||
        !json_object_object_get_ex(root, "messages", &msgs) ||
        !json_object_is_type(msgs, json_type_array)) {
        fprintf(stderr, "%s: %s: not a JSON object with a \"messages\" list\n", prog, conv);
        goto out;
    }
    json_object_object_get_ex(root, "tools", &tools);
    int add_gen = 1;
    if (json_object_object_get_ex(root, "add_generation_prompt", &gen) &&
        !json_object_is_type(gen, json_type_null)) {
        if (!json_object_is_type(gen, json_type_boolean)) {
            fprintf(stderr, "%s: %s: add_generation_prompt: expected true or false\n", prog, conv);
            goto out;
        }
        add_gen = json_object_get_boolean(gen);
    }
    /* the conversation's other members, then --chat-kwargs */
    kw = json_object_new_object();
    json_object_object_foreach(root, k, v)
    {
        if (strcmp(k, "messages") && strcmp(k, "tools") && strcmp(k, "add_generation_prompt"))
            json_object_object_add(kw, k, json_object_get(v));
    }
    if (kwargs) {
        struct json_object *extra = json_tokener_parse(kwargs);
        if (!extra || !json_object_is_type(extra, json_type_object)) {
            fprintf(stderr, "%s: --chat-kwargs: expected a JSON object\n", prog);
            json_object_put(extra);
            goto out;
        }
        json_object_object_foreach(extra, k2, v2)
        {
            json_object_object_add(kw, k2, json_object_get(v2));
        }
        json_object_put(extra);
    }
    const int plain = JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE;
    char *msgs_s = strdup(json_object_to_json_string_ext(msgs, plain));
    char *tools_s = tools && !json_object_is_type(tools, json_type_null)
                        ? strdup(json_object_to_json_string_ext(tools, plain))
                        : NULL;
    int rc = !msgs_s ? TX_ENOMEM
                     : tx_chat_template_vars(tokcfg, msgs_s, tools_s, add_gen,
                                             json_object_to_json_string_ext(kw, plain), &vars, err,
                                             sizeof(err));
    free(msgs_s);
    free(tools_s);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", prog, conv, rc == TX_ENOMEM ? "out of memory" : err);
        goto out;
    }
    struct tx_jinja_opts o = {0};
    size_t tl = 0;
    if (tx_jinja_render(t, vars, strlen(vars), &o, &text, &tl, err, sizeof(err))) {
        fprintf(stderr, "%s: %s: %s%s\n", prog, tmpl_path,
                o.raised ? "the template raised an exception: " : "", err);
        goto out;
    }
    status = fwrite(text, 1, tl, stdout) == tl ? 0 : 1;
out:
    free(text);
    free(vars);
    free(conv_txt);
    free(tmpl);
    free(tmpl_file);
    free(tokcfg);
    json_object_put(root);
    json_object_put(kw);
    tx_jinja_free(t);
    return status;
}
