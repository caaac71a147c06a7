/* SPDX-License-Identifier: MIT */
/*
 * The variables of a chat template render, as transformers'
 * apply_chat_template passes them (special tokens, messages, tools,
 * documents, add_generation_prompt, the caller's kwargs), and the
 * chat_template of a tokenizer_config.json (tx/tx_jinja.h).
 */
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/tx_jinja.h>

#include <tx-internal/tx_errors.h>

static struct json_object *parse_json(const char *text, const char *what, char *err, size_t errsz,
                                      int *rc)
{
    struct json_tokener *tk = json_tokener_new_ex(256);
    if (!tk) {
        *rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        return NULL;
    }
    size_t n = strlen(text);
    struct json_object *o = json_tokener_parse_ex(tk, text, (int)n);
    if (!o || json_tokener_get_error(tk) != json_tokener_success ||
        json_tokener_get_parse_end(tk) != n) {
        *rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: not valid JSON (%s)", what,
                        json_tokener_error_desc(json_tokener_get_error(tk)));
        json_object_put(o);
        o = NULL;
    }
    json_tokener_free(tk);
    return o;
}

static const char *const SPECIAL[] = {"bos_token", "eos_token",  "unk_token",
                                      "pad_token", "sep_token",  "cls_token",
                                      "mask_token", "additional_special_tokens", NULL};

/* a special token's text: a string, or {"content": "..."} */
static struct json_object *token_text(struct json_object *v)
{
    struct json_object *c;
    if (json_object_is_type(v, json_type_string))
        return json_object_get(v);
    if (json_object_is_type(v, json_type_object) && json_object_object_get_ex(v, "content", &c) &&
        json_object_is_type(c, json_type_string))
        return json_object_get(c);
    return NULL;
}

TX_API int tx_chat_template_vars(const char *tokenizer_config_json, const char *messages_json,
                                 const char *tools_json, int add_generation_prompt,
                                 const char *kwargs_json, char **out, char *err, size_t errsz)
{
    int rc = 0;
    if (!messages_json || !out)
        return tx_errbuf(err, errsz, TX_EINVAL, "tx_chat_template_vars: invalid argument");
    *out = NULL;
    struct json_object *vars = json_object_new_object(), *tc = NULL, *msgs = NULL, *tools = NULL,
                       *kw = NULL;
    if (!vars)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    if (tokenizer_config_json &&
        !(tc = parse_json(tokenizer_config_json, "tokenizer_config.json", err, errsz, &rc)))
        goto out;
    if (!(msgs = parse_json(messages_json, "messages", err, errsz, &rc)))
        goto out;
    if (tools_json && !(tools = parse_json(tools_json, "tools", err, errsz, &rc)))
        goto out;
    if (kwargs_json && !(kw = parse_json(kwargs_json, "chat template kwargs", err, errsz, &rc)))
        goto out;
    if (!json_object_is_type(msgs, json_type_array)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "messages: expected a JSON array");
        goto out;
    }
    if (kw && !json_object_is_type(kw, json_type_object)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "chat template kwargs: expected a JSON object");
        goto out;
    }
    if (tc && json_object_is_type(tc, json_type_object)) {
        for (size_t i = 0; SPECIAL[i]; i++) {
            struct json_object *v;
            if (!json_object_object_get_ex(tc, SPECIAL[i], &v))
                continue;
            if (json_object_is_type(v, json_type_array)) {
                struct json_object *l = json_object_new_array();
                for (size_t k = 0; k < json_object_array_length(v); k++) {
                    struct json_object *t = token_text(json_object_array_get_idx(v, k));
                    if (t)
                        json_object_array_add(l, t);
                }
                json_object_object_add(vars, SPECIAL[i], l);
            } else {
                struct json_object *t = token_text(v);
                if (t)
                    json_object_object_add(vars, SPECIAL[i], t);
            }
        }
    }
    json_object_object_add(vars, "messages", json_object_get(msgs));
    json_object_object_add(vars, "tools", tools ? json_object_get(tools) : NULL);
    json_object_object_add(vars, "documents", NULL);
    json_object_object_add(vars, "add_generation_prompt",
                           json_object_new_boolean(add_generation_prompt != 0));
    if (kw) {
        json_object_object_foreach(kw, k, v)
        {
            json_object_object_add(vars, k, json_object_get(v));
        }
    }
    const char *s = json_object_to_json_string_ext(vars, JSON_C_TO_STRING_PLAIN |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!s || !(*out = strdup(s)))
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
out:
    json_object_put(vars);
    json_object_put(tc);
    json_object_put(msgs);
    json_object_put(tools);
    json_object_put(kw);
    return rc;
}

TX_API int tx_chat_template_of_config(const char *tokenizer_config_json, char **out, char *err,
                                      size_t errsz)
{
    int rc = 0;
    if (!tokenizer_config_json || !out)
        return tx_errbuf(err, errsz, TX_EINVAL, "tx_chat_template_of_config: invalid argument");
    *out = NULL;
    struct json_object *tc =
        parse_json(tokenizer_config_json, "tokenizer_config.json", err, errsz, &rc);
    if (!tc)
        return rc;
    struct json_object *t = NULL;
    if (json_object_is_type(tc, json_type_object))
        json_object_object_get_ex(tc, "chat_template", &t);
    if (t && json_object_is_type(t, json_type_array)) {
        struct json_object *found = NULL;
        for (size_t i = 0; i < json_object_array_length(t); i++) {
            struct json_object *e = json_object_array_get_idx(t, i), *nm, *tx;
            if (json_object_object_get_ex(e, "name", &nm) &&
                json_object_object_get_ex(e, "template", &tx) &&
                json_object_is_type(nm, json_type_string) &&
                !strcmp(json_object_get_string(nm), "default"))
                found = tx;
        }
        t = found;
    }
    if (!t || !json_object_is_type(t, json_type_string)) {
        rc = tx_errbuf(err, errsz, TX_ENOENT,
                       "tokenizer_config.json has no chat_template (nor a \"default\" one)");
    } else if (!(*out = strdup(json_object_get_string(t)))) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    } else if (strlen(*out) != (size_t)json_object_get_string_len(t)) {
        free(*out);
        *out = NULL;
        rc = tx_errbuf(err, errsz, TX_EINVAL, "tokenizer_config.json: chat_template contains NUL");
    }
    json_object_put(tc);
    return rc;
}
