/* SPDX-License-Identifier: MIT */
/*
 * The package's chat template, rendered by libtx's Jinja renderer and
 * encoded as transformers' apply_chat_template(tokenize=True) does
 * (common/chat_template.h): glm-server's and glm-inference's default.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/tx_error.h>
#include <tx/tx_jinja.h>
#include <tx-internal/tx_smd.h>

#include "common/chat_template.h"
#include "common/cli.h"

struct txc_chat_template {
    struct tx_jinja *t;
    char *tokcfg; /* the special tokens' tokenizer_config.json, or NULL */
    char source[512];
};

static int slurp(const char *path, char **out, char *err, size_t errsz)
{
    size_t len = 0;
    int rc = txc_read_path(path, out, &len);
    if (rc) {
        snprintf(err, errsz, "%s: %s", path, tx_last_error());
        return rc;
    }
    if (strlen(*out) != len) {
        free(*out);
        *out = NULL;
        snprintf(err, errsz, "%s: contains a NUL byte", path);
        return TX_EINVAL;
    }
    return 0;
}

static int package_tokcfg(const char *pkg, char **out, char *err, size_t errsz)
{
    struct tx_smd *s = NULL;
    *out = NULL;
    int rc = tx_smd_open(pkg, 0, &s, err, errsz);
    if (rc)
        return rc;
    size_t len = 0;
    const char *tc = tx_smd_tokenizer_config_json(s, &len);
    if (tc && !(*out = strndup(tc, len)))
        rc = TX_ENOMEM;
    tx_smd_close(s);
    if (rc)
        snprintf(err, errsz, "out of memory");
    return rc;
}

int txc_chat_template_load(const char *pkg, const char *file, struct txc_chat_template **out,
                           char *err, size_t errsz)
{
    *out = NULL;
    struct txc_chat_template *ct = calloc(1, sizeof(*ct));
    char *tmpl = NULL, *text = NULL;
    int rc = 0;
    if (!ct)
        return TX_ENOMEM;
    size_t fl = file ? strlen(file) : 0;
    bool file_is_config = fl >= 5 && !strcmp(file + fl - 5, ".json");
    if (file && (rc = slurp(file, &text, err, errsz)))
        goto fail;
    if (file_is_config) {
        ct->tokcfg = text;
        text = NULL;
    } else if (pkg && (rc = package_tokcfg(pkg, &ct->tokcfg, err, errsz))) {
        goto fail;
    }
    if (file && !file_is_config) {
        tmpl = text;
        text = NULL;
        snprintf(ct->source, sizeof(ct->source), "%s", file);
    } else {
        if (!ct->tokcfg) {
            rc = TX_ENOENT;
            snprintf(err, errsz, "the package has no tokenizer_config.json");
            goto fail;
        }
        if ((rc = tx_chat_template_of_config(ct->tokcfg, &tmpl, err, errsz)))
            goto fail;
        snprintf(ct->source, sizeof(ct->source), "%s's chat_template", file ? file : "the package");
    }
    char sub[1024];
    if ((rc = tx_jinja_compile(tmpl, strlen(tmpl), &ct->t, sub, sizeof(sub)))) {
        snprintf(err, errsz, "%s: %s", ct->source, sub);
        goto fail;
    }
    free(tmpl);
    *out = ct;
    return 0;
fail:
    free(text);
    free(tmpl);
    txc_chat_template_free(ct);
    return rc;
}

const char *txc_chat_template_source(const struct txc_chat_template *ct)
{
    return ct->source;
}

void txc_chat_template_free(struct txc_chat_template *ct)
{
    if (!ct)
        return;
    tx_jinja_free(ct->t);
    free(ct->tokcfg);
    free(ct);
}

/* messages with every tool call's string arguments parsed into objects;
 * NULL when there is nothing to convert (or on a parse error: left as sent) */
static char *object_arguments(const char *messages_json)
{
    struct json_object *msgs = json_tokener_parse(messages_json);
    int changed = 0;
    if (!msgs || !json_object_is_type(msgs, json_type_array)) {
        json_object_put(msgs);
        return NULL;
    }
    for (size_t i = 0; i < json_object_array_length(msgs); i++) {
        struct json_object *m = json_object_array_get_idx(msgs, i), *calls;
        if (!json_object_is_type(m, json_type_object) ||
            !json_object_object_get_ex(m, "tool_calls", &calls) ||
            !json_object_is_type(calls, json_type_array))
            continue;
        for (size_t k = 0; k < json_object_array_length(calls); k++) {
            struct json_object *c = json_object_array_get_idx(calls, k), *f, *a;
            if (!json_object_is_type(c, json_type_object))
                continue;
            if (!json_object_object_get_ex(c, "function", &f) ||
                !json_object_is_type(f, json_type_object))
                f = c;
            if (!json_object_object_get_ex(f, "arguments", &a) ||
                !json_object_is_type(a, json_type_string))
                continue;
            struct json_object *obj = json_tokener_parse(json_object_get_string(a));
            if (!obj || !json_object_is_type(obj, json_type_object)) {
                json_object_put(obj);
                continue;
            }
            json_object_object_add(f, "arguments", obj);
            changed = 1;
        }
    }
    char *s = NULL;
    if (changed)
        s = strdup(json_object_to_json_string_ext(msgs, JSON_C_TO_STRING_PLAIN |
                                                            JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(msgs);
    return s;
}

static int render(const struct txc_chat_template *ct, const char *msgs, const char *tools,
                  const char *kwargs, int add_gen, char **text, size_t *tl, int *raised,
                  char *err, size_t errsz)
{
    char *vars = NULL;
    int rc = tx_chat_template_vars(ct->tokcfg, msgs, tools, add_gen, kwargs, &vars, err, errsz);
    if (rc)
        return rc;
    struct tx_jinja_opts o = {0};
    rc = tx_jinja_render(ct->t, vars, strlen(vars), &o, text, tl, err, errsz);
    *raised = o.raised;
    free(vars);
    return rc;
}

int txc_chat_template_encode(const struct txc_chat_template *ct, const struct tx_tokenizer *tok,
                             const char *messages_json, const char *tools_json,
                             const char *kwargs_json, int add_gen, int32_t **ids, size_t *n,
                             char **text_out, int *raised, char *err, size_t errsz)
{
    char *text = NULL;
    size_t tl = 0;
    *raised = 0;
    if (text_out)
        *text_out = NULL;
    char *as_objects = object_arguments(messages_json);
    int rc = render(ct, as_objects ? as_objects : messages_json, tools_json, kwargs_json, add_gen,
                    &text, &tl, raised, err, errsz);
    if (rc && as_objects && !*raised) /* a template that wants the strings as sent */
        rc = render(ct, messages_json, tools_json, kwargs_json, add_gen, &text, &tl, raised, err,
                    errsz);
    free(as_objects);
    if (rc)
        return rc;
    if (ids) {
        rc = tx_tokenizer_encode(tok, text, tl, 0, ids, n, err, errsz);
        if (rc) {
            free(text);
            return rc;
        }
    }
    if (text_out)
        *text_out = text;
    else
        free(text);
    return 0;
}
