/* SPDX-License-Identifier: MIT */
/*
 * A chat model's output split into reasoning, content and tool calls
 * (common/chat_output.h).
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/chat_output.h"

#define THINK "<think>"
#define UNTHINK "</think>"
#define TC_OPEN "<tool_call>"
#define TC_CLOSE "</tool_call>"
#define DS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"

static const char *find(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, needle, k))
            return s + i;
    return NULL;
}

/* the length of the longest suffix of s[0, n) that is a proper prefix of
 * marker (text that may become the marker) */
static size_t partial_suffix(const char *s, size_t n, const char *marker)
{
    size_t k = strlen(marker);
    for (size_t l = k - 1; l > 0; l--)
        if (l <= n && !memcmp(s + n - l, marker, l))
            return l;
    return 0;
}

static bool ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_ws(const char *s, size_t i, size_t n)
{
    while (i < n && ws(s[i]))
        i++;
    return i;
}

static size_t rtrim(const char *s, size_t b, size_t e)
{
    while (e > b && ws(s[e - 1]))
        e--;
    return e;
}

struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
};

static void put(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 64;
        while (c < b->n + n + 1)
            c *= 2;
        char *np = realloc(b->p, c);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = c;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* the JSON schema type of tool name's parameter key, or NULL */
static const char *param_type(json_object *tools, const char *name, const char *key)
{
    for (size_t i = 0; tools && i < json_object_array_length(tools); i++) {
        json_object *t = json_object_array_get_idx(tools, i), *f, *nm, *pa, *pr, *k, *ty;
        if (!json_object_object_get_ex(t, "function", &f) ||
            !json_object_object_get_ex(f, "name", &nm) ||
            strcmp(json_object_get_string(nm), name))
            continue;
        if (json_object_object_get_ex(f, "parameters", &pa) &&
            json_object_object_get_ex(pa, "properties", &pr) &&
            json_object_object_get_ex(pr, key, &k) && json_object_object_get_ex(k, "type", &ty) &&
            json_object_is_type(ty, json_type_string))
            return json_object_get_string(ty);
        return NULL;
    }
    return NULL;
}

/* the whole of s[0, n) as JSON, or NULL */
static json_object *json_exact(const char *s, size_t n)
{
    /* NUL-terminated, so that a number at the end is complete */
    char *buf = malloc(n + 1);
    struct json_tokener *tk = buf ? json_tokener_new() : NULL;
    if (!tk) {
        free(buf);
        return NULL;
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    json_object *o = json_tokener_parse_ex(tk, buf, (int)n + 1);
    bool ok = o && json_tokener_get_error(tk) == json_tokener_success;
    size_t end = ok ? json_tokener_get_parse_end(tk) : 0;
    json_tokener_free(tk);
    if (ok && (end > n || skip_ws(buf, end, n) != n))
        ok = false;
    free(buf);
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

void chat_call_id(char *buf, size_t sz, const char *id_prefix, size_t index)
{
    snprintf(buf, sz, "call_%s_%zu", id_prefix, index);
}

/* v as add_call writes it into the arguments text */
static const char *args_json(json_object *v)
{
    return json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
                                                 JSON_C_TO_STRING_NOSLASHESCAPE);
}

static int add_call(json_object *calls, const char *id_prefix, const char *name, size_t name_len,
                    json_object *args)
{
    json_object *c = json_object_new_object(), *f = json_object_new_object();
    char id[96];
    chat_call_id(id, sizeof(id), id_prefix, json_object_array_length(calls));
    json_object_object_add(c, "id", json_object_new_string(id));
    json_object_object_add(c, "type", json_object_new_string("function"));
    json_object_object_add(f, "name", json_object_new_string_len(name, (int)name_len));
    json_object_object_add(
        f, "arguments",
        json_object_new_string(args_json(args)));
    json_object_object_add(c, "function", f);
    json_object_array_add(calls, c);
    return 0;
}

/* <tool_call> body: Qwen3 / Hermes JSON, or GLM's XML arguments */
static int parse_tool_call(const struct chat_out_opts *o, const char *id_prefix, const char *s,
                           size_t n, json_object *calls)
{
    size_t b = skip_ws(s, 0, n), e = rtrim(s, b, n);
    if (b < e && s[b] == '{') {
        json_object *j = json_exact(s + b, e - b), *nm, *args = NULL;
        if (!j || !json_object_object_get_ex(j, "name", &nm) ||
            !json_object_is_type(nm, json_type_string) || !json_object_get_string_len(nm)) {
            json_object_put(j);
            return -1;
        }
        if (!json_object_object_get_ex(j, "arguments", &args))
            json_object_object_get_ex(j, "parameters", &args);
        json_object *a = NULL;
        if (args && json_object_is_type(args, json_type_string))
            a = json_exact(json_object_get_string(args), (size_t)json_object_get_string_len(args));
        else if (args && json_object_is_type(args, json_type_object))
            a = json_object_get(args);
        else if (!args)
            a = json_object_new_object();
        if (!a || !json_object_is_type(a, json_type_object)) {
            json_object_put(a);
            json_object_put(j);
            return -1;
        }
        add_call(calls, id_prefix, json_object_get_string(nm),
                 (size_t)json_object_get_string_len(nm), a);
        json_object_put(a);
        json_object_put(j);
        return 0;
    }
    /* GLM: NAME then <arg_key>K</arg_key><arg_value>V</arg_value>... */
    const char *k0 = find(s + b, e - b, "<arg_key>");
    size_t name_end = rtrim(s, b, k0 ? (size_t)(k0 - s) : e);
    if (name_end == b)
        return -1;
    for (size_t i = b; i < name_end; i++)
        if (s[i] == '<' || s[i] == '\n')
            return -1;
    char name[256];
    if (name_end - b >= sizeof(name))
        return -1;
    memcpy(name, s + b, name_end - b);
    name[name_end - b] = 0;
    json_object *args = json_object_new_object();
    size_t i = k0 ? (size_t)(k0 - s) : e;
    while (i < e) {
        i = skip_ws(s, i, e);
        if (i >= e)
            break;
        const char *kb = find(s + i, e - i, "<arg_key>");
        if (kb != s + i)
            goto bad;
        const char *ke = find(kb, (size_t)(s + e - kb), "</arg_key>");
        if (!ke)
            goto bad;
        size_t after_key = (size_t)(ke - s) + strlen("</arg_key>");
        size_t vb = skip_ws(s, after_key, e);
        if (vb + strlen("<arg_value>") > e || memcmp(s + vb, "<arg_value>", strlen("<arg_value>")))
            goto bad;
        vb += strlen("<arg_value>");
        const char *ve = find(s + vb, e - vb, "</arg_value>");
        if (!ve)
            goto bad;
        size_t kbeg = (size_t)(kb - s) + strlen("<arg_key>");
        char key[256];
        size_t kl = (size_t)(ke - s) - kbeg;
        if (kl >= sizeof(key))
            goto bad;
        memcpy(key, s + kbeg, kl);
        key[kl] = 0;
        size_t vl = (size_t)(ve - s) - vb;
        const char *type = param_type(o->tools, name, key);
        json_object *v = NULL;
        if (!type || strcmp(type, "string"))
            v = json_exact(s + vb, vl);
        if (!v)
            v = json_object_new_string_len(s + vb, (int)vl);
        json_object_object_add(args, key, v);
        i = (size_t)(ve - s) + strlen("</arg_value>");
    }
    add_call(calls, id_prefix, name, strlen(name), args);
    json_object_put(args);
    return 0;
bad:
    json_object_put(args);
    return -1;
}

/* DeepSeek-V3.1 (NAME<sep>ARGS) and DeepSeek-V3 (function<sep>NAME\n```json\nARGS\n```) */
static int parse_deepseek(const char *id_prefix, const char *s, size_t n, json_object *calls)
{
    size_t i = 0, found = 0;
    for (;;) {
        i = skip_ws(s, i, n);
        if (i >= n)
            break;
        const char *cb = find(s + i, n - i, DS_CALL);
        if (cb != s + i)
            return -1;
        size_t b = i + strlen(DS_CALL);
        const char *ce = find(s + b, n - b, DS_CALL_END);
        const char *sep = find(s + b, n - b, DS_SEP);
        if (!ce || !sep || sep > ce)
            return -1;
        const char *name = s + b;
        size_t name_len = (size_t)(sep - name);
        const char *a = sep + strlen(DS_SEP);
        size_t al = (size_t)(ce - a);
        if (name_len == 8 && !memcmp(name, "function", 8)) {
            const char *nl = memchr(a, '\n', al);
            const char *fence = find(a, al, "```json");
            if (!nl || !fence || fence < nl)
                return -1;
            name = a;
            name_len = (size_t)(nl - a);
            const char *jb = fence + 7;
            const char *je = find(jb, (size_t)(a + al - jb), "```");
            if (!je)
                return -1;
            a = jb;
            al = (size_t)(je - jb);
        }
        json_object *args = json_exact(a, al);
        if (!args || !json_object_is_type(args, json_type_object) || !name_len) {
            json_object_put(args);
            return -1;
        }
        add_call(calls, id_prefix, name, name_len, args);
        json_object_put(args);
        found++;
        i = (size_t)(ce - s) + strlen(DS_CALL_END);
    }
    return found ? 0 : -1;
}

/*
 * The call still being generated, body s[0, n) (after its opening marker):
 * its name once complete and, for GLM's XML, a prefix of the arguments text
 * the closed call will have -- "{" and the finished key/value pairs, then a
 * string value as far as it goes (the JSON formats' arguments come whole
 * when the call closes: their text is re-serialised).
 */
static void partial_call(const struct chat_out_opts *o, const char *s, size_t n, bool ds,
                         struct chat_parsed *p)
{
    size_t b = skip_ws(s, 0, n);
    p->partial = 1;
    if (ds) { /* DeepSeek: <call>NAME<sep> or <call>function<sep>NAME\n */
        const char *cb = find(s + b, n - b, DS_CALL);
        if (!cb)
            return;
        const char *nm = cb + strlen(DS_CALL);
        const char *sep = find(nm, (size_t)(s + n - nm), DS_SEP);
        if (!sep)
            return;
        if (sep - nm == 8 && !memcmp(nm, "function", 8)) {
            const char *a = sep + strlen(DS_SEP);
            const char *nl = memchr(a, '\n', (size_t)(s + n - a));
            if (nl)
                p->partial_name = strndup(a, (size_t)(nl - a));
        } else {
            p->partial_name = strndup(nm, (size_t)(sep - nm));
        }
        return;
    }
    if (b < n && s[b] == '{') { /* JSON: {"name": "NAME", ... */
        const char *k = find(s + b, n - b, "\"name\"");
        size_t i = k ? skip_ws(s, (size_t)(k - s) + 6, n) : n;
        if (i < n && s[i] == ':') {
            i = skip_ws(s, i + 1, n);
            size_t e = i + 1;
            while (i < n && s[i] == '"' && e < n && s[e] != '"')
                e += s[e] == '\\' ? 2 : 1;
            json_object *v = i < n && s[i] == '"' && e < n ? json_exact(s + i, e + 1 - i) : NULL;
            if (v && json_object_is_type(v, json_type_string))
                p->partial_name = strdup(json_object_get_string(v));
            json_object_put(v);
        }
        return;
    }
    /* GLM: NAME then <arg_key>K</arg_key><arg_value>V</arg_value>... */
    const char *k0 = find(s + b, n - b, "<arg_key>");
    const char *nl = memchr(s + b, '\n', n - b);
    const char *ne = k0 && (!nl || k0 < nl) ? k0 : nl;
    if (!ne)
        return;
    size_t name_end = rtrim(s, b, (size_t)(ne - s));
    if (name_end == b || memchr(s + b, '<', name_end - b))
        return;
    p->partial_name = strndup(s + b, name_end - b);
    if (!p->partial_name)
        return;
    struct sbuf a = {0};
    put(&a, "{", 1);
    size_t i = k0 ? (size_t)(k0 - s) : n, pairs = 0;
    while (i < n) {
        i = skip_ws(s, i, n);
        const char *kb = find(s + i, n - i, "<arg_key>");
        if (kb != s + i)
            break;
        const char *ke = find(kb, (size_t)(s + n - kb), "</arg_key>");
        if (!ke)
            break;
        size_t kbeg = (size_t)(kb - s) + strlen("<arg_key>");
        size_t vb = skip_ws(s, (size_t)(ke - s) + strlen("</arg_key>"), n);
        if (vb + strlen("<arg_value>") > n || memcmp(s + vb, "<arg_value>", strlen("<arg_value>")))
            break;
        vb += strlen("<arg_value>");
        char key[256];
        size_t kl = (size_t)(ke - s) - kbeg;
        if (kl >= sizeof(key))
            break;
        memcpy(key, s + kbeg, kl);
        key[kl] = 0;
        json_object *kj = json_object_new_string(key);
        const char *type = param_type(o->tools, p->partial_name, key);
        const char *ve = find(s + vb, n - vb, "</arg_value>");
        size_t vl = ve ? (size_t)(ve - s) - vb : 0;
        json_object *v = NULL;
        if (ve && (!type || strcmp(type, "string")))
            v = json_exact(s + vb, vl);
        if (ve && !v)
            v = json_object_new_string_len(s + vb, (int)vl);
        if (!ve && type && !strcmp(type, "string")) /* a string as far as it goes */
            v = json_object_new_string_len(
                s + vb, (int)(n - vb - partial_suffix(s + vb, n - vb, "</arg_value>")));
        if (v) {
            if (pairs++)
                put(&a, ",", 1);
            const char *kt = args_json(kj);
            put(&a, kt, strlen(kt));
            put(&a, ":", 1);
            const char *vt = args_json(v);
            /* an unfinished string: without its closing quote */
            put(&a, vt, strlen(vt) - (ve ? 0 : 1));
        }
        json_object_put(kj);
        json_object_put(v);
        if (!ve)
            break;
        i = (size_t)(ve - s) + strlen("</arg_value>");
    }
    if (a.oom) {
        free(a.p);
        return;
    }
    p->partial_args = a.p;
}

void chat_parsed_free(struct chat_parsed *p)
{
    free(p->partial_name);
    free(p->partial_args);
    free(p->content);
    json_object_put(p->calls);
    memset(p, 0, sizeof(*p));
}

int chat_prompt_think_open(const char *tail, size_t len)
{
    const char *open = NULL, *close = NULL, *q;
    for (q = tail; (q = find(q, len - (size_t)(q - tail), THINK)); q++)
        open = q;
    for (q = tail; (q = find(q, len - (size_t)(q - tail), UNTHINK)); q++)
        close = q;
    return open && (!close || close < open);
}

int chat_output_parse(const struct chat_out_opts *o, const char *id_prefix, const char *t,
                      size_t n, int final, struct chat_parsed *p)
{
    memset(p, 0, sizeof(*p));
    struct sbuf c = {0};
    p->calls = json_object_new_array();
    size_t pos = 0;
    if (o->reasoning) {
        size_t rs = 0;
        bool in = o->think_open;
        if (!in) {
            size_t b = skip_ws(t, 0, n);
            size_t k = strlen(THINK);
            if (n - b >= k && !memcmp(t + b, THINK, k)) {
                in = true;
                rs = b + k;
            } else if (!final && n - b < k && !memcmp(t + b, THINK, n - b)) {
                goto done; /* may become <think> */
            }
        }
        if (in) {
            p->has_reasoning = 1;
            const char *e = find(t + rs, n - rs, UNTHINK);
            p->reasoning = t + rs;
            if (!e) {
                p->reasoning_len = final ? n - rs : n - rs - partial_suffix(t + rs, n - rs, UNTHINK);
                goto done;
            }
            p->reasoning_len = (size_t)(e - (t + rs));
            pos = skip_ws(t, (size_t)(e - t) + strlen(UNTHINK), n);
            if (!final && pos == n)
                goto done;
        }
    }
    for (;;) {
        const char *a = o->tools ? find(t + pos, n - pos, TC_OPEN) : NULL;
        const char *d = o->tools ? find(t + pos, n - pos, DS_BEGIN) : NULL;
        const char *start = a && (!d || a < d) ? a : d;
        if (!start) {
            size_t e = n;
            if (!final && o->tools) {
                size_t h1 = partial_suffix(t + pos, n - pos, TC_OPEN);
                size_t h2 = partial_suffix(t + pos, n - pos, DS_BEGIN);
                e -= h1 > h2 ? h1 : h2;
                e = rtrim(t, pos, e);
            }
            put(&c, t + pos, e - pos);
            break;
        }
        bool ds = start == d;
        const char *close_m = ds ? DS_END : TC_CLOSE;
        size_t bb = (size_t)(start - t) + strlen(ds ? DS_BEGIN : TC_OPEN);
        const char *end = find(t + bb, n - bb, close_m);
        /* the text before the call is content, its trailing white space
         * dropped; a call that does not parse is content as written */
        size_t seg_end = rtrim(t, pos, (size_t)(start - t));
        if (!end) {
            if (final) { /* never closed: the rest is content */
                p->malformed = 1;
                put(&c, t + pos, n - pos);
            } else {
                put(&c, t + pos, seg_end - pos);
                partial_call(o, t + bb, n - bb, ds, p);
            }
            break;
        }
        size_t before = json_object_array_length(p->calls);
        int rc = ds ? parse_deepseek(id_prefix, t + bb, (size_t)(end - t) - bb, p->calls)
                    : parse_tool_call(o, id_prefix, t + bb, (size_t)(end - t) - bb, p->calls);
        size_t after_end = (size_t)(end - t) + strlen(close_m);
        if (rc) {
            /* drop what a failed DeepSeek block added, keep the raw text */
            while (json_object_array_length(p->calls) > before)
                json_object_array_del_idx(p->calls, json_object_array_length(p->calls) - 1, 1);
            p->malformed = 1;
            put(&c, t + pos, after_end - pos);
        } else {
            put(&c, t + pos, seg_end - pos);
        }
        pos = after_end;
    }
done:
    if (final && json_object_array_length(p->calls))
        c.n = c.p ? rtrim(c.p, 0, c.n) : 0;
    if (c.oom || !p->calls) {
        free(c.p);
        chat_parsed_free(p);
        return -1;
    }
    if (c.p)
        c.p[c.n] = 0;
    p->content = c.p ? c.p : strdup("");
    if (!p->content) {
        chat_parsed_free(p);
        return -1;
    }
    p->content_len = c.n;
    return 0;
}
