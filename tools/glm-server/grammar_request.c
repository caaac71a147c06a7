/* SPDX-License-Identifier: MIT */
/*
 * glm-server: constrained output. A request's response_format
 * ({"type": "json_object"} or {"type": "json_schema", "json_schema":
 * {"schema": ...}}), llama-server's "grammar" (GBNF) and "json_schema", and
 * tool_choice "required" or a named function (chat) become a grammar
 * (libtx's grammar engine, tx-internal/tx_grammar.h); before every device pass the
 * scheduler gives the slot's session the mask of the tokens the grammar
 * allows next (glm_session_set_token_mask: the device's SAMPLE applies it),
 * and every sampled token advances the grammar. The stop tokens are
 * allowed only where the grammar is complete. docs/glm-server.md,
 * "Constrained output", and docs/grammar.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx-internal/tx_grammar.h>
#include <tx/tx_tokenizer.h>

#include "common/grammar_vocab.h"
#include "server.h"

#define DS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"

/* The vocabulary trie of the loaded tokenizer, shared by the requests
 * (reference counted: a reload builds a new one). */
struct srv_gvocab {
    struct txg_vocab *v;
    const struct tx_tokenizer *tok;
    int refs;
};

struct srv_grammar {
    char *text; /* the grammar's GBNF (srv_grammar_clone parses it again) */
    size_t vocab;
    struct txg_grammar *g;
    struct txg_matcher *m;
    struct srv_gvocab *gv;
    struct txg_mask_cache *cache;
    uint32_t *mask;
    int n_words;
    int stuck_logged;
};

static pthread_mutex_t gv_mu = PTHREAD_MUTEX_INITIALIZER;

static void gv_unref(struct srv_gvocab *gv)
{
    pthread_mutex_lock(&gv_mu);
    int last = gv && --gv->refs == 0;
    pthread_mutex_unlock(&gv_mu);
    if (last) {
        txg_vocab_free(gv->v);
        free(gv);
    }
}

/* S's trie, built on first use (model lock held by the caller) */
static struct srv_gvocab *gv_get(struct srv *S)
{
    pthread_mutex_lock(&gv_mu);
    struct srv_gvocab *gv = S->gvocab;
    if (gv && gv->tok != S->tok) { /* another model since */
        S->gvocab = NULL;
        pthread_mutex_unlock(&gv_mu);
        gv_unref(gv);
        pthread_mutex_lock(&gv_mu);
        gv = S->gvocab;
    }
    if (!gv) {
        gv = calloc(1, sizeof(*gv));
        if (gv)
            gv->v = txc_grammar_vocab(S->tok, S->sample_vocab, S->stop_ids, S->n_stop_ids);
        if (!gv || !gv->v) {
            free(gv);
            pthread_mutex_unlock(&gv_mu);
            return NULL;
        }
        gv->tok = S->tok;
        gv->refs = 1; /* S's */
        S->gvocab = gv;
    }
    gv->refs++;
    pthread_mutex_unlock(&gv_mu);
    return gv;
}

void srv_grammar_vocab_drop(struct srv *S)
{
    pthread_mutex_lock(&gv_mu);
    struct srv_gvocab *gv = S->gvocab;
    S->gvocab = NULL;
    pthread_mutex_unlock(&gv_mu);
    gv_unref(gv);
}

void srv_grammar_free(struct srv_grammar *gr)
{
    if (!gr)
        return;
    txg_matcher_free(gr->m);
    txg_grammar_free(gr->g);
    txg_mask_cache_free(gr->cache);
    gv_unref(gr->gv);
    free(gr->mask);
    free(gr->text);
    free(gr);
}

struct srv_grammar *srv_grammar_clone(const struct srv_grammar *gr)
{
    struct srv_grammar *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    char err[256];
    c->text = strdup(gr->text);
    c->vocab = gr->vocab;
    c->g = c->text ? txg_grammar_parse(c->text, err, sizeof(err)) : NULL;
    c->m = c->g ? txg_matcher_new(c->g) : NULL;
    c->n_words = gr->n_words;
    c->mask = calloc((size_t)c->n_words, sizeof(*c->mask));
    c->cache = txg_mask_cache_new(c->vocab, 32);
    pthread_mutex_lock(&gv_mu);
    c->gv = gr->gv;
    c->gv->refs++;
    pthread_mutex_unlock(&gv_mu);
    if (!c->m || !c->mask || !c->cache) {
        srv_grammar_free(c);
        return NULL;
    }
    return c;
}

/* ---- the tool-call formats ------------------------------------------------ */

enum tc_format { TC_NONE, TC_JSON, TC_GLM, TC_DS3, TC_DS31 };

/* The tool-call format of the chat template: a probe conversation with one
 * call rendered and looked at (the C formats by their name). *nl: GLM's
 * layout puts a newline before <arg_key>. */
static enum tc_format tool_format(struct srv *S, int *nl)
{
    *nl = 0;
    if (!S->ct) {
        switch (glm_model_chat_format(S->m, NULL, 0)) {
        case TX_CHAT_GLM45:
            *nl = 1;
            return TC_GLM;
        case TX_CHAT_GLM5:
            return TC_GLM;
        case TX_CHAT_QWEN3:
            return TC_JSON;
        case TX_CHAT_DEEPSEEK3:
            return TC_DS3;
        case TX_CHAT_DEEPSEEK31:
            return TC_DS31;
        default:
            return TC_NONE;
        }
    }
    static const char *msgs =
        "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"\","
        "\"tool_calls\":[{\"id\":\"c0\",\"type\":\"function\",\"function\":{\"name\":"
        "\"probe_fn\",\"arguments\":{\"probe_key\":\"probe_val\"}}}]}]";
    static const char *tools =
        "[{\"type\":\"function\",\"function\":{\"name\":\"probe_fn\",\"parameters\":{\"type\":"
        "\"object\",\"properties\":{\"probe_key\":{\"type\":\"string\"}}}}}]";
    int32_t *ids = NULL;
    size_t n = 0;
    char *text = NULL, err[256];
    int raised = 0;
    enum tc_format f = TC_NONE;
    if (!txc_chat_template_encode(S->ct, S->tok, msgs, tools, NULL, 0, &ids, &n, &text, &raised,
                                  err, sizeof(err)) &&
        text) {
        if (strstr(text, "<arg_key>")) {
            f = TC_GLM;
            *nl = strstr(text, "probe_fn\n<arg_key>") != NULL;
        } else if (strstr(text, DS_CALL)) {
            f = strstr(text, "function" DS_SEP "probe_fn") ? TC_DS3 : TC_DS31;
        } else if (strstr(text, "<tool_call>")) {
            f = TC_JSON;
        }
    }
    free(ids);
    free(text);
    return f;
}

static void put_literal(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20)
            fprintf(f, "\\x%02X", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* rules `prefix`top for a JSON schema (NULL: any object); -1 with err */
static int put_schema(FILE *f, json_object *schema, const char *prefix, char *err, size_t errsz)
{
    char *rules = txg_json_schema_rules(schema, prefix, err, errsz);
    if (!rules)
        return -1;
    fputs(rules, f);
    free(rules);
    return 0;
}

/* GLM's XML arguments of tool i: <arg_key>K</arg_key><arg_value>V</arg_value>
 * for the properties in order, required ones always; string values raw
 * (no '<'), the others JSON by their schema */
static int put_glm_args(FILE *f, json_object *params, int i, int nl, char *err, size_t errsz)
{
    json_object *props = NULL, *req = NULL;
    if (params && json_object_is_type(params, json_type_object)) {
        json_object_object_get_ex(params, "properties", &props);
        json_object_object_get_ex(params, "required", &req);
    }
    const char *NL = nl ? " \"\\n\"" : "";
    size_t np = props && json_object_is_type(props, json_type_object)
                    ? (size_t)json_object_object_length(props)
                    : 0;
    size_t k = 0;
    json_object_object_foreach(props, key, sub)
    {
        char pfx[48];
        snprintf(pfx, sizeof(pfx), "t%d-p%zu-", i, k);
        json_object *ty = NULL, *v;
        int raw = json_object_is_type(sub, json_type_object) &&
                  json_object_object_get_ex(sub, "type", &ty) &&
                  json_object_is_type(ty, json_type_string) &&
                  !strcmp(json_object_get_string(ty), "string");
        fprintf(f, "%sval ::= ", pfx);
        if (raw && json_object_object_get_ex(sub, "enum", &v) &&
            json_object_is_type(v, json_type_array) && json_object_array_length(v)) {
            for (size_t e = 0; e < json_object_array_length(v); e++) {
                json_object *x = json_object_array_get_idx(v, e);
                if (!json_object_is_type(x, json_type_string)) {
                    snprintf(err, errsz, "tools[%d]: parameter '%s': a string enum holds a %s", i,
                             key, json_type_to_name(json_object_get_type(x)));
                    return -1;
                }
                if (e)
                    fputs(" | ", f);
                put_literal(f, json_object_get_string(x));
            }
            fputc('\n', f);
        } else if (raw && json_object_object_get_ex(sub, "const", &v)) {
            put_literal(f, json_object_get_string(v));
            fputc('\n', f);
        } else if (raw) {
            json_object *mx = NULL, *mn = NULL;
            json_object_object_get_ex(sub, "maxLength", &mx);
            json_object_object_get_ex(sub, "minLength", &mn);
            long lo = mn ? (long)json_object_get_int64(mn) : 0;
            if (mx)
                fprintf(f, "[^<]{%ld,%ld}\n", lo, (long)json_object_get_int64(mx));
            else
                fprintf(f, "[^<]{%ld,}\n", lo);
        } else {
            fprintf(f, "%stop\n", pfx);
            if (put_schema(f, sub, pfx, err, errsz))
                return -1;
        }
        fprintf(f, "t%d-kv%zu ::=%s \"<arg_key>\" ", i, k, NL);
        put_literal(f, key);
        fprintf(f, " \"</arg_key>\"%s \"<arg_value>\" %sval \"</arg_value>\"\n", NL, pfx);
        k++;
    }
    /* t<i>-a<k>: the arguments from the k-th on */
    for (k = 0; k <= np; k++) {
        if (k == np) {
            fprintf(f, "t%d-a%zu ::= \n", i, k);
            break;
        }
        int required = 0;
        const char *name = NULL;
        size_t j = 0;
        json_object_object_foreach(props, key2, sub2)
        {
            (void)sub2;
            if (j++ == k)
                name = key2;
        }
        for (size_t q = 0; req && name && q < json_object_array_length(req); q++)
            if (!strcmp(json_object_get_string(json_object_array_get_idx(req, q)), name))
                required = 1;
        if (required)
            fprintf(f, "t%d-a%zu ::= t%d-kv%zu t%d-a%zu\n", i, k, i, k, i, k + 1);
        else
            fprintf(f, "t%d-a%zu ::= t%d-kv%zu t%d-a%zu | t%d-a%zu\n", i, k, i, k, i, k + 1, i,
                    k + 1);
    }
    return 0;
}

/* The grammar of one or more tool calls (only tool `only` when >= 0). */
static char *tool_grammar(json_object *tools, int only, int parallel, enum tc_format fmt, int nl,
                          char *err, size_t errsz)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        snprintf(err, errsz, "out of memory");
        return NULL;
    }
    int rc = 0;
    size_t nt = json_object_array_length(tools);
    fputs("call ::= ", f);
    int first = 1;
    for (size_t i = 0; i < nt; i++)
        if (only < 0 || (size_t)only == i) {
            fprintf(f, "%sc%zu", first ? "" : " | ", i);
            first = 0;
        }
    fputc('\n', f);
    /* one call, or several with parallel_tool_calls */
    const char *more = parallel ? " ( \"\\n\" call )*" : "";
    if (fmt == TC_DS3 || fmt == TC_DS31)
        fprintf(f, "root ::= \"" DS_BEGIN "\" call%s \"" DS_END "\"\n", more);
    else
        fprintf(f, "root ::= call%s\n", more);
    for (size_t i = 0; i < nt && !rc; i++) {
        if (only >= 0 && (size_t)only != i)
            continue;
        json_object *t = json_object_array_get_idx(tools, i), *fn = NULL, *nm = NULL,
                    *params = NULL;
        json_object_object_get_ex(t, "function", &fn);
        json_object_object_get_ex(fn, "name", &nm);
        json_object_object_get_ex(fn, "parameters", &params);
        const char *name = json_object_get_string(nm);
        char pfx[32];
        snprintf(pfx, sizeof(pfx), "t%zu-", i);
        switch (fmt) {
        case TC_JSON: {
            fprintf(f, "c%zu ::= \"<tool_call>\\n{\\\"name\\\": \\\"", i);
            /* the name inside a JSON string inside a GBNF literal */
            json_object *js = json_object_new_string(name);
            const char *q = json_object_to_json_string_ext(js, JSON_C_TO_STRING_PLAIN |
                                                                   JSON_C_TO_STRING_NOSLASHESCAPE);
            size_t ql = strlen(q);
            char *inner = strndup(q + 1, ql - 2);
            json_object_put(js);
            if (!inner) {
                rc = -1;
                snprintf(err, errsz, "out of memory");
                break;
            }
            /* put_literal quotes: write the inner part escaped for GBNF */
            for (const char *s = inner; *s; s++) {
                if (*s == '"' || *s == '\\')
                    fputc('\\', f);
                fputc(*s, f);
            }
            free(inner);
            fprintf(f, "\\\", \\\"arguments\\\": \" %stop \"}\\n</tool_call>\"\n", pfx);
            rc = put_schema(f, params, pfx, err, errsz);
            break;
        }
        case TC_DS31:
            fprintf(f, "c%zu ::= \"" DS_CALL "\" ", i);
            put_literal(f, name);
            fprintf(f, " \"" DS_SEP "\" %stop \"" DS_CALL_END "\"\n", pfx);
            rc = put_schema(f, params, pfx, err, errsz);
            break;
        case TC_DS3:
            fprintf(f, "c%zu ::= \"" DS_CALL "function" DS_SEP "\" ", i);
            put_literal(f, name);
            fprintf(f, " \"\\n```json\\n\" %stop \"\\n```" DS_CALL_END "\"\n", pfx);
            rc = put_schema(f, params, pfx, err, errsz);
            break;
        case TC_GLM:
            fprintf(f, "c%zu ::= \"<tool_call>\" ", i);
            put_literal(f, name);
            fprintf(f, " t%zu-a0%s \"</tool_call>\"\n", i, nl ? " \"\\n\"" : "");
            rc = put_glm_args(f, params, (int)i, nl, err, errsz);
            break;
        default:
            rc = -1;
        }
    }
    fclose(f);
    if (rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* tool_choice "required" / {"type": "function", "function": {"name": N}}:
 * *text the grammar (NULL: no constraint); 0 or 400 with *reply */
static int tool_choice_grammar(struct srv *S, json_object *o, char **text, char **reply)
{
    json_object *tc = NULL, *tools = NULL;
    *text = NULL;
    json_object_object_get_ex(o, "tool_choice", &tc);
    json_object_object_get_ex(o, "tools", &tools);
    int only = -1;
    if (!tc || json_object_is_type(tc, json_type_null))
        return 0;
    if (json_object_is_type(tc, json_type_string)) {
        if (strcmp(json_object_get_string(tc), "required"))
            return 0; /* auto, none (chat_template.c checked the value) */
    } else {
        json_object *fn = NULL, *nm = NULL;
        if (!json_object_object_get_ex(tc, "function", &fn) ||
            !json_object_object_get_ex(fn, "name", &nm) ||
            !json_object_is_type(nm, json_type_string))
            return srv_bad_request(reply, "tool_choice",
                                   "'tool_choice' names a function as {\"type\": \"function\", "
                                   "\"function\": {\"name\": ...}}");
        size_t nt = tools && json_object_is_type(tools, json_type_array)
                        ? json_object_array_length(tools)
                        : 0;
        for (size_t i = 0; i < nt && only < 0; i++) {
            json_object *f = NULL, *n = NULL;
            if (json_object_object_get_ex(json_object_array_get_idx(tools, i), "function", &f) &&
                json_object_object_get_ex(f, "name", &n) &&
                !strcmp(json_object_get_string(n), json_object_get_string(nm)))
                only = (int)i;
        }
        if (only < 0) {
            char msg[300];
            snprintf(msg, sizeof(msg), "tool_choice names '%.200s', which is not in 'tools'",
                     json_object_get_string(nm));
            return srv_bad_request(reply, "tool_choice", msg);
        }
    }
    if (!tools || !json_object_is_type(tools, json_type_array) || !json_object_array_length(tools))
        return srv_bad_request(reply, "tool_choice",
                               "tool_choice 'required' or a named function needs 'tools'");
    for (size_t i = 0; i < json_object_array_length(tools); i++) {
        json_object *f = NULL, *n = NULL;
        if (!json_object_object_get_ex(json_object_array_get_idx(tools, i), "function", &f) ||
            !json_object_object_get_ex(f, "name", &n) ||
            !json_object_is_type(n, json_type_string) || !json_object_get_string_len(n))
            return srv_bad_request(reply, "tools", "every tool needs function.name");
    }
    /* llama-server's default: one call unless parallel_tool_calls is true */
    json_object *pv = NULL;
    int parallel = json_object_object_get_ex(o, "parallel_tool_calls", &pv) &&
                   json_object_is_type(pv, json_type_boolean) && json_object_get_boolean(pv);
    int nl = 0;
    enum tc_format fmt = tool_format(S, &nl);
    if (fmt == TC_NONE)
        return srv_bad_request(reply, "tool_choice",
                               "the chat template's tool-call format is none glm-server can "
                               "constrain (GLM XML, Qwen3 JSON, DeepSeek-V3/V3.1)");
    char err[256] = "";
    *text = tool_grammar(tools, only, parallel, fmt, nl, err, sizeof(err));
    if (!*text) {
        char msg[300];
        snprintf(msg, sizeof(msg), "tools: %s", err);
        return srv_bad_request(reply, "tools", msg);
    }
    return 0;
}

/* response_format / json_schema / grammar: *text the grammar (NULL: none) */
static int format_grammar(json_object *o, char **text, char **reply)
{
    json_object *rf = NULL, *v = NULL;
    char err[256] = "";
    *text = NULL;
    if (json_object_object_get_ex(o, "grammar", &v) && v &&
        !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_string))
            return srv_bad_request(reply, "grammar", "'grammar' must be a GBNF string");
        *text = strdup(json_object_get_string(v));
        return 0;
    }
    json_object *schema = NULL;
    int want = 0;
    if (json_object_object_get_ex(o, "json_schema", &v) && v &&
        !json_object_is_type(v, json_type_null)) { /* llama-server's field */
        schema = v;
        want = 1;
    }
    if (json_object_object_get_ex(o, "response_format", &rf) && rf &&
        !json_object_is_type(rf, json_type_null)) {
        json_object *ty = NULL;
        if (!json_object_is_type(rf, json_type_object) ||
            !json_object_object_get_ex(rf, "type", &ty) ||
            !json_object_is_type(ty, json_type_string))
            return srv_bad_request(reply, "response_format",
                                   "'response_format' must be {\"type\": \"text\" | "
                                   "\"json_object\" | \"json_schema\", ...}");
        const char *t = json_object_get_string(ty);
        if (!strcmp(t, "json_object")) {
            want = 1;
            json_object_object_get_ex(rf, "schema", &schema); /* llama-server's extension */
        } else if (!strcmp(t, "json_schema")) {
            json_object *js = NULL;
            if (!json_object_object_get_ex(rf, "json_schema", &js) ||
                !json_object_is_type(js, json_type_object) ||
                !json_object_object_get_ex(js, "schema", &schema))
                return srv_bad_request(reply, "response_format",
                                       "response_format json_schema needs "
                                       "\"json_schema\": {\"name\": ..., \"schema\": {...}}");
            want = 1;
        } else if (strcmp(t, "text")) {
            char msg[200];
            snprintf(msg, sizeof(msg),
                     "response_format type '%.60s' is unknown (text, json_object, json_schema)", t);
            return srv_bad_request(reply, "response_format", msg);
        }
    }
    if (!want)
        return 0;
    char *rules = txg_json_schema_rules(schema, "j-", err, sizeof(err));
    if (!rules)
        return srv_bad_request(reply, "response_format", err);
    size_t n = strlen(rules) + 32;
    *text = malloc(n);
    if (*text)
        snprintf(*text, n, "root ::= j-top\n%s", rules);
    free(rules);
    return 0;
}

/* An open <think> at the prompt's end is closed (as enable_thinking=false
 * renders it): a constrained reply has no reasoning */
static int close_think(struct srv *S, struct request *r)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (!r->co.think_open)
        return 0;
    if (glm_tokenize(S->m, "</think>", &ids, &n) || !n)
        return -1;
    int32_t *p = realloc(r->prompt, (size_t)(r->n_prompt + (int)n) * sizeof(*p));
    if (!p) {
        free(ids);
        return -1;
    }
    memcpy(p + r->n_prompt, ids, n * sizeof(*ids));
    r->prompt = p;
    r->n_prompt += (int)n;
    r->co.think_open = 0;
    free(ids);
    return 0;
}

int srv_grammar_setup(struct srv *S, json_object *o, struct request *r, size_t *n_prompt,
                      char **reply)
{
    char *text = NULL;
    int st = r->chat ? tool_choice_grammar(S, o, &text, reply) : 0;
    if (!st && !text)
        st = format_grammar(o, &text, reply);
    if (st || !text)
        return st;
    struct tx_device_info di;
    if (!tx_device_info(S->dev, &di) && TX8_IF_MINOR(di.if_version) < 9) {
        free(text);
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "constrained output needs the SAMPLE token mask of TX8 interface 1.9; the "
                 "device has %u.%u",
                 (unsigned)TX8_IF_MAJOR(di.if_version), (unsigned)TX8_IF_MINOR(di.if_version));
        return srv_bad_request(reply, "response_format", msg);
    }
    char err[256] = "";
    struct srv_grammar *gr = calloc(1, sizeof(*gr));
    if (gr) {
        gr->g = txg_grammar_parse(text, err, sizeof(err));
        gr->text = text;
        gr->vocab = (size_t)S->sample_vocab;
    } else
        free(text);
    if (!gr || !gr->g) {
        srv_grammar_free(gr);
        return srv_bad_request(reply, "grammar", err[0] ? err : "out of memory");
    }
    gr->m = txg_matcher_new(gr->g);
    gr->gv = gv_get(S);
    gr->n_words = (S->sample_vocab + 31) / 32;
    gr->mask = calloc((size_t)gr->n_words, sizeof(*gr->mask));
    gr->cache = txg_mask_cache_new((size_t)S->sample_vocab, 32);
    r->n_prompt = (int)*n_prompt;
    if (!gr->m || !gr->gv || !gr->mask || !gr->cache || (r->chat && close_think(S, r))) {
        srv_grammar_free(gr);
        return srv_bad_request(reply, "grammar",
                               "the grammar cannot be matched (too ambiguous, or out of memory)");
    }
    *n_prompt = (size_t)r->n_prompt;
    r->gr = gr;
    return 0;
}

void srv_grammar_mask(struct srv *S, struct request *r, glm_session_t *s)
{
    struct srv_grammar *gr = r->gr;
    if (!gr) {
        glm_session_set_token_mask(s, NULL, 0);
        return;
    }
    size_t k = txg_vocab_mask_cached(gr->gv->v, gr->cache, gr->m, S->stop_ids, S->n_stop_ids,
                                     gr->mask);
    if (!k) {
        /* stuck (no token continues the text): end it */
        if (!gr->stuck_logged)
            srv_log(S, "%s: the grammar allows no token here; the reply ends", r->id);
        gr->stuck_logged = 1;
        for (int i = 0; i < S->n_stop_ids; i++)
            if (S->stop_ids[i] >= 0 && S->stop_ids[i] < S->sample_vocab)
                gr->mask[S->stop_ids[i] / 32] |= 1u << (S->stop_ids[i] % 32);
    }
    if (glm_session_set_token_mask(s, gr->mask, gr->n_words))
        srv_log(S, "%s: %s", r->id, tx_last_error());
}

void srv_grammar_accept(struct srv *S, struct request *r, int32_t tok)
{
    struct srv_grammar *gr = r->gr;
    if (!gr)
        return;
    const char *b = NULL;
    int n = tx_tokenizer_token_bytes(S->tok, tok, &b);
    if (n > 0 && txg_matcher_accept(gr->m, b, (size_t)n))
        srv_log(S, "%s: token %d is outside the grammar", r->id, (int)tok);
}
