/* SPDX-License-Identifier: MIT */
/*
 * tx_jinja_compile / tx_jinja_render (include/tx/tx_jinja.h): the source's
 * newlines normalised as Jinja2 does, the lexer and the parser into the
 * template's own arena; a render's variables from JSON (json-c, object
 * keys in their order) into a render arena bounded by the memory limit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include <tx/tx_jinja.h>

#include <tx-internal/tx_errors.h>
#include "jinja.h"

struct tx_jinja {
    struct jarena arena;
    const struct jnode *root;
};

TX_API int tx_jinja_compile(const char *src, size_t len, struct tx_jinja **out, char *err,
                            size_t errsz)
{
    char msg[512];
    if (!out || (!src && len))
        return tx_errbuf(err, errsz, TX_EINVAL, "tx_jinja_compile: invalid argument");
    *out = NULL;
    if (len > TX_JINJA_MAX_SOURCE)
        return tx_errbuf(err, errsz, TX_EINVAL, "chat template: %zu bytes, more than the %u limit",
                         len, TX_JINJA_MAX_SOURCE);
    if (memchr(src, 0, len))
        return tx_errbuf(err, errsz, TX_EINVAL, "chat template: contains a NUL byte");
    struct tx_jinja *t = calloc(1, sizeof(*t));
    if (!t)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    t->arena.limit = 64u * len + (16u << 20);
    /* newlines: \r\n and \r become \n; one trailing newline goes
     * (keep_trailing_newline=False) */
    char *s = jarena_alloc(&t->arena, len + 1);
    size_t n = 0;
    if (!s) {
        free(t);
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n')
        n--;
    s[n] = 0;
    struct jtoken *toks = NULL;
    size_t nt = 0;
    msg[0] = 0;
    if (jinja_lex(&t->arena, s, n, &toks, &nt, msg, sizeof(msg)) ||
        !(t->root = jinja_parse(&t->arena, toks, nt, msg, sizeof(msg)))) {
        jarena_free(&t->arena);
        free(t);
        return tx_errbuf(err, errsz, strstr(msg, "unsupported") ? TX_ENOTSUP : TX_EINVAL,
                         "chat template: %s", msg);
    }
    *out = t;
    return 0;
}

TX_API void tx_jinja_free(struct tx_jinja *t)
{
    if (!t)
        return;
    jarena_free(&t->arena);
    free(t);
}

static struct jv from_json(struct jrender *r, struct json_object *o, int depth)
{
    if (depth > 200)
        jr_fail(r, NULL, TX_EINVAL, "variables: JSON nested more than 200 deep");
    switch (json_object_get_type(o)) {
    case json_type_null:
        return jv_none();
    case json_type_boolean:
        return jv_bool(json_object_get_boolean(o));
    case json_type_int:
        return jv_int(json_object_get_int64(o));
    case json_type_double:
        return jv_float(json_object_get_double(o));
    case json_type_string:
        return jv_str(r, json_object_get_string(o), (size_t)json_object_get_string_len(o));
    case json_type_array: {
        size_t n = json_object_array_length(o);
        struct jv l = jv_list_new(r, n);
        for (size_t i = 0; i < n; i++)
            jv_list_push(r, l, from_json(r, json_object_array_get_idx(o, i), depth + 1));
        return l;
    }
    case json_type_object: {
        struct jv d = jv_dict_new(r, (size_t)json_object_object_length(o));
        json_object_object_foreach(o, k, v)
        {
            jv_dict_set(r, d.u.d, jv_str(r, k, strlen(k)), from_json(r, v, depth + 1));
        }
        return d;
    }
    }
    return jv_none();
}

TX_API int tx_jinja_render(const struct tx_jinja *t, const char *vars_json, size_t vars_len,
                           struct tx_jinja_opts *opts, char **out, size_t *out_len, char *err,
                           size_t errsz)
{
    if (!t || !out || !out_len || (!vars_json && vars_len))
        return tx_errbuf(err, errsz, TX_EINVAL, "tx_jinja_render: invalid argument");
    *out = NULL;
    *out_len = 0;
    if (opts)
        opts->raised = 0;
    struct json_tokener *tk = json_tokener_new_ex(256);
    if (!tk)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    struct json_object *vars =
        vars_len ? json_tokener_parse_ex(tk, vars_json, (int)vars_len) : json_object_new_object();
    bool ok = vars && json_object_is_type(vars, json_type_object) &&
              (!vars_len || (json_tokener_get_error(tk) == json_tokener_success &&
                             json_tokener_get_parse_end(tk) == vars_len));
    json_tokener_free(tk);
    if (!ok) {
        json_object_put(vars);
        return tx_errbuf(err, errsz, TX_EINVAL, "chat template variables: not a JSON object");
    }
    struct jarena arena = {.limit = opts && opts->max_memory ? opts->max_memory
                                                              : TX_JINJA_DEFAULT_MEMORY};
    char msg[1024];
    msg[0] = 0;
    struct jrender *r = calloc(1, sizeof(*r));
    if (!r) {
        json_object_put(vars);
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    }
    r->arena = &arena;
    r->err = msg;
    r->errsz = sizeof(msg);
    r->max_steps = opts && opts->max_steps ? opts->max_steps : TX_JINJA_DEFAULT_STEPS;
    r->out_max = opts && opts->max_output ? opts->max_output : TX_JINJA_DEFAULT_OUTPUT;
    r->max_depth = 20; /* macro calls: with MAX_NEST, a bound on the C stack */
    r->now = opts && opts->now ? opts->now : (long long)time(NULL);
    int rc;
    struct jframe *globals = NULL;
    if (setjmp(r->fail)) {
        rc = r->status ? r->status : TX_EINVAL;
    } else {
        globals = jr_alloc(r, sizeof(*globals));
        memset(globals, 0, sizeof(*globals));
        struct jv v = from_json(r, vars, 0);
        globals->vars = *v.u.d;
        rc = jinja_run(r, t->root, globals);
    }
    json_object_put(vars);
    if (!rc) {
        char *o = malloc(r->out_n + 1);
        if (!o) {
            rc = TX_ENOMEM;
            snprintf(msg, sizeof(msg), "out of memory");
        } else {
            if (r->out_n)
                memcpy(o, r->out, r->out_n);
            o[r->out_n] = 0;
            *out = o;
            *out_len = r->out_n;
        }
    }
    int raised = r->raised;
    jarena_free(&arena);
    free(r);
    if (rc) {
        if (opts)
            opts->raised = raised;
        if (raised)
            return tx_errbuf(err, errsz, rc, "%s", msg);
        return tx_errbuf(err, errsz, rc, "chat template: %s", msg);
    }
    return 0;
}
