/* SPDX-License-Identifier: MIT */
/*
 * JSON schema -> GBNF: the grammar of the JSON texts a schema accepts, for
 * response_format json_schema and tool-call arguments (docs/grammar.md).
 * What OpenAI's structured outputs take: object (properties, required,
 * additionalProperties), array (items, minItems, maxItems), string (enum,
 * const, minLength, maxLength), number, integer, boolean, null, type
 * lists, anyOf / oneOf, $defs / definitions with $ref (recursion too),
 * nesting. Properties are emitted in the schema's order, required ones
 * always, the others optionally; an object without properties takes any
 * members (typed by additionalProperties when it is a schema). A keyword
 * that would constrain the value in a way the grammar does not express
 * (pattern, format, minimum, ...) is an error naming it and its place, so
 * that an output never silently fails the schema. White space between
 * tokens is bounded (a model cannot loop on it).
 */
#include <tx-internal/tx_grammar.h>

#include <tx-internal/tx_errors.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64
#define MAX_LEN 10000 /* minLength / maxLength / minItems / maxItems */

struct sb {
    char *p;
    size_t n, cap;
    int oom;
};

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sb *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = b->cap ? b->cap * 2 : 1024;
        while (nc < b->n + (size_t)k + 1)
            nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
}

/* s as a GBNF literal (quoted) */
static void sb_literal(struct sb *b, const char *s, size_t n)
{
    sb_printf(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            sb_printf(b, "\\%c", c);
        else if (c == '\n')
            sb_printf(b, "\\n");
        else if (c < 0x20)
            sb_printf(b, "\\x%02X", c);
        else
            sb_printf(b, "%c", c);
    }
    sb_printf(b, "\"");
}

struct refmemo {
    char *ref;
    char name[48];
};

struct conv {
    json_object *root;
    const char *prefix;
    struct sb out;
    int next;
    struct refmemo *refs;
    size_t n_refs;
    char *err;
    size_t errsz;
    int failed;
};

__attribute__((format(printf, 3, 4))) static void cfail(struct conv *c, const char *path,
                                                        const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = 1;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errsz, "json_schema at '%s': %s", *path ? path : "#", msg);
}

static void new_name(struct conv *c, char *name, size_t sz)
{
    snprintf(name, sz, "%sr%d", c->prefix, c->next++);
}

static void gen(struct conv *c, json_object *s, const char *path, int depth, char *name,
                size_t namesz);

static const char *const annotations[] = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "strict",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", NULL};

static int known_key(const char *k, const char *const *extra)
{
    for (int i = 0; annotations[i]; i++)
        if (!strcmp(k, annotations[i]))
            return 1;
    for (int i = 0; extra[i]; i++)
        if (!strcmp(k, extra[i]))
            return 1;
    return 0;
}

static int get_count(struct conv *c, json_object *s, const char *key, const char *path, long dflt,
                     long *out)
{
    json_object *v;
    *out = dflt;
    if (!json_object_object_get_ex(s, key, &v))
        return 0;
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
        json_object_get_int64(v) > MAX_LEN) {
        cfail(c, path, "'%s' must be an integer in [0, %d]", key, MAX_LEN);
        return TX_EINVAL;
    }
    *out = (long)json_object_get_int64(v);
    return 0;
}

/* the JSON text of value v as a literal alternative */
static void literal_of(struct conv *c, json_object *v)
{
    const char *t = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
                                                          JSON_C_TO_STRING_NOSLASHESCAPE);
    sb_literal(&c->out, t, strlen(t));
}

static void gen_object(struct conv *c, json_object *s, const char *path, int depth,
                       const char *name)
{
    json_object *props = NULL, *req = NULL, *addl = NULL;
    json_object_object_get_ex(s, "properties", &props);
    json_object_object_get_ex(s, "required", &req);
    json_object_object_get_ex(s, "additionalProperties", &addl);
    const char *P = c->prefix;
    if (props && !json_object_is_type(props, json_type_object)) {
        cfail(c, path, "'properties' must be an object");
        return;
    }
    if (req && !json_object_is_type(req, json_type_array)) {
        cfail(c, path, "'required' must be an array of names");
        return;
    }
    for (size_t i = 0; req && i < json_object_array_length(req); i++) {
        json_object *k = json_object_array_get_idx(req, i), *x;
        if (!json_object_is_type(k, json_type_string)) {
            cfail(c, path, "'required' must be an array of names");
            return;
        }
        if (!props || !json_object_object_get_ex(props, json_object_get_string(k), &x)) {
            cfail(c, path, "required property '%s' is not in 'properties'",
                  json_object_get_string(k));
            return;
        }
    }
    size_t np = props ? (size_t)json_object_object_length(props) : 0;
    if (!np) {
        if (addl && json_object_is_type(addl, json_type_boolean) && !json_object_get_boolean(addl)) {
            sb_printf(&c->out, "%s ::= \"{\" %sws \"}\"\n", name, P);
            return;
        }
        char vname[64];
        snprintf(vname, sizeof(vname), "%svalue", P);
        if (addl && json_object_is_type(addl, json_type_object)) {
            char sub[512];
            snprintf(sub, sizeof(sub), "%s/additionalProperties", path);
            gen(c, addl, sub, depth + 1, vname, sizeof(vname));
        }
        sb_printf(&c->out,
                  "%s ::= \"{\" %sws ( %sstring %sws \":\" %sws %s ( %sws \",\" %sws %sstring "
                  "%sws \":\" %sws %s )* )? %sws \"}\"\n",
                  name, P, P, P, P, vname, P, P, P, P, P, vname, P);
        return;
    }
    /* kv_i and the chains A_i (nothing before) / B_i (a comma first) */
    char **kv = calloc(np, sizeof(*kv));
    int *required = calloc(np, sizeof(*required));
    if (!kv || !required) {
        free(kv);
        free(required);
        cfail(c, path, "out of memory");
        return;
    }
    size_t i = 0;
    json_object_object_foreach(props, key, sub)
    {
        if (c->failed)
            break;
        char vname[64], sp[512];
        snprintf(sp, sizeof(sp), "%s/properties/%s", path, key);
        gen(c, sub, sp, depth + 1, vname, sizeof(vname));
        for (size_t k = 0; req && k < json_object_array_length(req); k++)
            if (!strcmp(json_object_get_string(json_object_array_get_idx(req, k)), key))
                required[i] = 1;
        kv[i] = malloc(64);
        if (!kv[i]) {
            cfail(c, path, "out of memory");
            break;
        }
        new_name(c, kv[i], 64);
        json_object *ks = json_object_new_string(key);
        const char *kj = json_object_to_json_string_ext(ks, JSON_C_TO_STRING_PLAIN |
                                                                JSON_C_TO_STRING_NOSLASHESCAPE);
        sb_printf(&c->out, "%s ::= ", kv[i]);
        sb_literal(&c->out, kj, strlen(kj));
        sb_printf(&c->out, " %sws \":\" %sws %s\n", P, P, vname);
        json_object_put(ks);
        i++;
    }
    if (!c->failed) {
        int base = c->next;
        c->next += 2 * (int)np + 2;
        /* A_i = base + 2i, B_i = base + 2i + 1; i == np: empty */
        for (size_t k = 0; k <= np; k++) {
            int a = base + 2 * (int)k, bb = a + 1;
            if (k == np) {
                sb_printf(&c->out, "%sr%d ::= \n%sr%d ::= \n", P, a, P, bb);
                continue;
            }
            int na = a + 2, nb = bb + 2;
            if (required[k]) {
                sb_printf(&c->out, "%sr%d ::= %s %sr%d\n", P, a, kv[k], P, nb);
                sb_printf(&c->out, "%sr%d ::= %sws \",\" %sws %s %sr%d\n", P, bb, P, P, kv[k], P,
                          nb);
            } else {
                sb_printf(&c->out, "%sr%d ::= %s %sr%d | %sr%d\n", P, a, kv[k], P, nb, P, na);
                sb_printf(&c->out, "%sr%d ::= %sws \",\" %sws %s %sr%d | %sr%d\n", P, bb, P, P,
                          kv[k], P, nb, P, nb);
            }
        }
        sb_printf(&c->out, "%s ::= \"{\" %sws %sr%d %sws \"}\"\n", name, P, P, base, P);
    }
    for (size_t k = 0; k < np; k++)
        free(kv[k]);
    free(kv);
    free(required);
}

static void gen_array(struct conv *c, json_object *s, const char *path, int depth,
                      const char *name)
{
    json_object *items = NULL;
    const char *P = c->prefix;
    long mn, mx;
    if (get_count(c, s, "minItems", path, 0, &mn) || get_count(c, s, "maxItems", path, -1, &mx))
        return;
    if (mx >= 0 && mx < mn) {
        cfail(c, path, "maxItems %ld < minItems %ld", mx, mn);
        return;
    }
    char iname[64];
    snprintf(iname, sizeof(iname), "%svalue", P);
    if (json_object_object_get_ex(s, "items", &items) && items &&
        !(json_object_is_type(items, json_type_boolean) && json_object_get_boolean(items))) {
        if (json_object_is_type(items, json_type_boolean)) { /* items: false */
            mx = 0;
            if (mn > 0) {
                cfail(c, path, "'items': false with minItems > 0 accepts nothing");
                return;
            }
        } else {
            char sp[512];
            snprintf(sp, sizeof(sp), "%s/items", path);
            gen(c, items, sp, depth + 1, iname, sizeof(iname));
        }
    }
    if (c->failed)
        return;
    if (mx == 0) {
        sb_printf(&c->out, "%s ::= \"[\" %sws \"]\"\n", name, P);
        return;
    }
    long rmin = mn > 0 ? mn - 1 : 0;
    char rep[64];
    if (mx < 0)
        snprintf(rep, sizeof(rep), "{%ld,}", rmin);
    else
        snprintf(rep, sizeof(rep), "{%ld,%ld}", rmin, mx - 1);
    sb_printf(&c->out, "%s ::= \"[\" %sws ( %s ( %sws \",\" %sws %s )%s )%s %sws \"]\"\n", name, P,
              iname, P, P, iname, rep, mn > 0 ? "" : "?", P);
}

static void gen_string(struct conv *c, json_object *s, const char *path, const char *name)
{
    long mn, mx;
    if (get_count(c, s, "minLength", path, 0, &mn) || get_count(c, s, "maxLength", path, -1, &mx))
        return;
    if (mx >= 0 && mx < mn) {
        cfail(c, path, "maxLength %ld < minLength %ld", mx, mn);
        return;
    }
    if (!mn && mx < 0)
        sb_printf(&c->out, "%s ::= %sstring\n", name, c->prefix);
    else if (mx < 0)
        sb_printf(&c->out, "%s ::= \"\\\"\" %schar{%ld,} \"\\\"\"\n", name, c->prefix, mn);
    else
        sb_printf(&c->out, "%s ::= \"\\\"\" %schar{%ld,%ld} \"\\\"\"\n", name, c->prefix, mn, mx);
}

/* one "type" name into rule name */
static void gen_type(struct conv *c, json_object *s, const char *t, const char *path, int depth,
                     const char *name)
{
    const char *P = c->prefix;
    if (!strcmp(t, "object"))
        gen_object(c, s, path, depth, name);
    else if (!strcmp(t, "array"))
        gen_array(c, s, path, depth, name);
    else if (!strcmp(t, "string"))
        gen_string(c, s, path, name);
    else if (!strcmp(t, "number") || !strcmp(t, "integer") || !strcmp(t, "boolean") ||
             !strcmp(t, "null"))
        sb_printf(&c->out, "%s ::= %s%s\n", name, P, t);
    else
        cfail(c, path, "unknown type '%s'", t);
}

static json_object *resolve(struct conv *c, const char *ref, const char *path)
{
    if (strncmp(ref, "#", 1)) {
        cfail(c, path, "$ref '%s': only references into this schema (#/...) are supported", ref);
        return NULL;
    }
    json_object *cur = c->root;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') {
            cfail(c, path, "$ref '%s' is not a JSON pointer", ref);
            return NULL;
        }
        p++;
        char tok[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof(tok)) {
            if (p[0] == '~' && p[1] == '1') {
                tok[n++] = '/';
                p += 2;
            } else if (p[0] == '~' && p[1] == '0') {
                tok[n++] = '~';
                p += 2;
            } else {
                tok[n++] = *p++;
            }
        }
        tok[n] = 0;
        json_object *nx = NULL;
        if (!json_object_is_type(cur, json_type_object) ||
            !json_object_object_get_ex(cur, tok, &nx) || !nx) {
            cfail(c, path, "$ref '%s' does not resolve", ref);
            return NULL;
        }
        cur = nx;
    }
    return cur;
}

/* The rule for schema s: its name into name (a new rule, or a shared one
 * for $ref targets and the generic value). */
static void gen(struct conv *c, json_object *s, const char *path, int depth, char *name,
                size_t namesz)
{
    const char *P = c->prefix;
    if (c->failed)
        return;
    if (depth > MAX_DEPTH) {
        cfail(c, path, "nested deeper than %d", MAX_DEPTH);
        return;
    }
    if (!s || (json_object_is_type(s, json_type_boolean) && json_object_get_boolean(s))) {
        snprintf(name, namesz, "%svalue", P);
        return;
    }
    if (json_object_is_type(s, json_type_boolean)) {
        cfail(c, path, "schema 'false' accepts nothing");
        return;
    }
    if (!json_object_is_type(s, json_type_object)) {
        cfail(c, path, "a schema must be an object or a boolean");
        return;
    }
    json_object *v;
    if (json_object_object_get_ex(s, "$ref", &v)) {
        if (!json_object_is_type(v, json_type_string)) {
            cfail(c, path, "'$ref' must be a string");
            return;
        }
        const char *ref = json_object_get_string(v);
        for (size_t i = 0; i < c->n_refs; i++)
            if (!strcmp(c->refs[i].ref, ref)) {
                snprintf(name, namesz, "%s", c->refs[i].name);
                return;
            }
        json_object *t = resolve(c, ref, path);
        if (!t)
            return;
        struct refmemo *q = realloc(c->refs, (c->n_refs + 1) * sizeof(*q));
        if (!q) {
            cfail(c, path, "out of memory");
            return;
        }
        c->refs = q;
        struct refmemo *r = &c->refs[c->n_refs++];
        r->ref = strdup(ref);
        new_name(c, r->name, sizeof(r->name));
        snprintf(name, namesz, "%s", r->name);
        char target[64], tname[48];
        snprintf(tname, sizeof(tname), "%s", r->name);
        gen(c, t, ref, depth + 1, target, sizeof(target));
        if (!c->failed)
            sb_printf(&c->out, "%s ::= %s\n", tname, target);
        return;
    }
    static const char *const supported[] = {
        "type", "properties", "required", "additionalProperties", "items", "minItems",
        "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "minLength", "maxLength", NULL};
    json_object_object_foreach(s, key, val)
    {
        (void)val;
        if (!known_key(key, supported)) {
            cfail(c, path, "'%s' is not supported", key);
            return;
        }
    }
    new_name(c, name, namesz);
    if (json_object_object_get_ex(s, "const", &v)) {
        sb_printf(&c->out, "%s ::= ", name);
        literal_of(c, v);
        sb_printf(&c->out, "\n");
        return;
    }
    if (json_object_object_get_ex(s, "enum", &v)) {
        if (!json_object_is_type(v, json_type_array) || !json_object_array_length(v)) {
            cfail(c, path, "'enum' must be a non-empty array");
            return;
        }
        sb_printf(&c->out, "%s ::= ", name);
        for (size_t i = 0; i < json_object_array_length(v); i++) {
            if (i)
                sb_printf(&c->out, " | ");
            literal_of(c, json_object_array_get_idx(v, i));
        }
        sb_printf(&c->out, "\n");
        return;
    }
    const char *alt_kw = json_object_object_get_ex(s, "anyOf", &v)   ? "anyOf"
                         : json_object_object_get_ex(s, "oneOf", &v) ? "oneOf"
                         : json_object_object_get_ex(s, "allOf", &v) ? "allOf"
                                                                     : NULL;
    if (alt_kw) {
        if (!json_object_is_type(v, json_type_array) || !json_object_array_length(v)) {
            cfail(c, path, "'%s' must be a non-empty array", alt_kw);
            return;
        }
        if (!strcmp(alt_kw, "allOf") && json_object_array_length(v) != 1) {
            cfail(c, path, "'allOf' with more than one schema is not supported");
            return;
        }
        size_t n = json_object_array_length(v);
        char(*subs)[64] = calloc(n, sizeof(*subs));
        if (!subs) {
            cfail(c, path, "out of memory");
            return;
        }
        for (size_t i = 0; i < n && !c->failed; i++) {
            char sp[512];
            snprintf(sp, sizeof(sp), "%s/%s/%zu", path, alt_kw, i);
            gen(c, json_object_array_get_idx(v, i), sp, depth + 1, subs[i], sizeof(subs[i]));
        }
        if (!c->failed) {
            sb_printf(&c->out, "%s ::= ", name);
            for (size_t i = 0; i < n; i++)
                sb_printf(&c->out, "%s%s", i ? " | " : "", subs[i]);
            sb_printf(&c->out, "\n");
        }
        free(subs);
        return;
    }
    json_object *ty = NULL;
    json_object_object_get_ex(s, "type", &ty);
    if (!ty) {
        json_object *x;
        if (json_object_object_get_ex(s, "properties", &x) ||
            json_object_object_get_ex(s, "additionalProperties", &x) ||
            json_object_object_get_ex(s, "required", &x))
            gen_object(c, s, path, depth, name);
        else if (json_object_object_get_ex(s, "items", &x))
            gen_array(c, s, path, depth, name);
        else
            sb_printf(&c->out, "%s ::= %svalue\n", name, P);
        return;
    }
    if (json_object_is_type(ty, json_type_string)) {
        gen_type(c, s, json_object_get_string(ty), path, depth, name);
        return;
    }
    if (!json_object_is_type(ty, json_type_array) || !json_object_array_length(ty)) {
        cfail(c, path, "'type' must be a type name or a non-empty array of them");
        return;
    }
    size_t n = json_object_array_length(ty);
    sb_printf(&c->out, "%s ::= ", name);
    int base = c->next;
    c->next += (int)n;
    for (size_t i = 0; i < n; i++)
        sb_printf(&c->out, "%s%sr%d", i ? " | " : "", P, base + (int)i);
    sb_printf(&c->out, "\n");
    for (size_t i = 0; i < n && !c->failed; i++) {
        json_object *t = json_object_array_get_idx(ty, i);
        if (!json_object_is_type(t, json_type_string)) {
            cfail(c, path, "'type' must be a type name or a non-empty array of them");
            return;
        }
        char tn[64];
        snprintf(tn, sizeof(tn), "%sr%d", P, base + (int)i);
        gen_type(c, s, json_object_get_string(t), path, depth, tn);
    }
}

/* the shared JSON rules, prefixed */
static void helpers(struct conv *c)
{
    const char *P = c->prefix;
    struct sb *b = &c->out;
    sb_printf(b, "%sws ::= \" \"? | \"\\n\" [ \\t]{0,8}\n", P);
    sb_printf(b, "%schar ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" "
                 "[0-9a-fA-F]{4} )\n",
              P);
    sb_printf(b, "%sstring ::= \"\\\"\" %schar* \"\\\"\"\n", P, P);
    sb_printf(b, "%sinteger ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n", P);
    sb_printf(b,
              "%snumber ::= %sinteger ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?\n",
              P, P);
    sb_printf(b, "%sboolean ::= \"true\" | \"false\"\n", P);
    sb_printf(b, "%snull ::= \"null\"\n", P);
    sb_printf(b,
              "%svalue ::= %sobject | %sarray | %sstring | %snumber | %sboolean | %snull\n",
              P, P, P, P, P, P, P);
    sb_printf(b,
              "%sobject ::= \"{\" %sws ( %sstring %sws \":\" %sws %svalue ( %sws \",\" %sws "
              "%sstring %sws \":\" %sws %svalue )* )? %sws \"}\"\n",
              P, P, P, P, P, P, P, P, P, P, P, P, P);
    sb_printf(b,
              "%sarray ::= \"[\" %sws ( %svalue ( %sws \",\" %sws %svalue )* )? %sws \"]\"\n",
              P, P, P, P, P, P, P);
}

static char *convert(json_object *schema, const char *prefix, int with_root, char *err,
                     size_t errsz)
{
    struct conv c;
    memset(&c, 0, sizeof(c));
    char dummy[8];
    c.err = err && errsz ? err : dummy;
    c.errsz = err && errsz ? errsz : sizeof(dummy);
    c.root = schema;
    c.prefix = prefix;
    helpers(&c);
    char top[64];
    if (!schema) {
        snprintf(top, sizeof(top), "%sobject", prefix);
    } else {
        gen(&c, schema, "", 0, top, sizeof(top));
    }
    /* the value rule a caller embeds: <prefix>top */
    if (!c.failed) {
        if (with_root)
            sb_printf(&c.out, "root ::= %s\n", top);
        else
            sb_printf(&c.out, "%stop ::= %s\n", prefix, top);
    }
    for (size_t i = 0; i < c.n_refs; i++)
        free(c.refs[i].ref);
    free(c.refs);
    if (!c.failed && c.out.oom)
        snprintf(c.err, c.errsz, "json_schema: out of memory");
    if (c.failed || c.out.oom) {
        free(c.out.p);
        return NULL;
    }
    return c.out.p;
}

char *txg_json_schema_to_gbnf(json_object *schema, char *err, size_t errsz)
{
    return convert(schema, "j-", 1, err, errsz);
}

char *txg_json_schema_rules(json_object *schema, const char *prefix, char *err, size_t errsz)
{
    return convert(schema, prefix, 0, err, errsz);
}
