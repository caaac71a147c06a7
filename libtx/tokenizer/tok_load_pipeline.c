/* SPDX-License-Identifier: MIT */
/* tokenizer.json loading: pre-tokenizer, post-processor, decoder. (tok_load.h) */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <utf8proc.h>

#include <tx-internal/tx_errors.h>
#include "tok_internal.h"
#include "tok_load.h"

/* The GPT-2 pattern HF's ByteLevel pre-tokenizer uses with use_regex. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ----------------------------------------------------- pre-tokenizer */

static int push_pretok(struct ctx *c, const struct tok_pretok *p)
{
    struct tx_tokenizer *tok = c->tok;
    struct tok_pretok *a = realloc(tok->pt, (tok->n_pt + 1) * sizeof(*a));
    if (!a)
        return ERR(c, TX_ENOMEM, "out of memory");
    tok->pt = a;
    tok->pt[tok->n_pt++] = *p;
    return 0;
}

static int parse_behavior(struct ctx *c, json_object *o, const char *where,
                          enum tok_split_behavior *b)
{
    json_object *v = tokl_get(o, "behavior");
    if (!v || !json_object_is_type(v, json_type_string))
        return ERR(c, TX_EINVAL, "%s.behavior: expected a string", where);
    const char *s = json_object_get_string(v);
    static const struct {
        const char *name;
        enum tok_split_behavior b;
    } names[] = {
        {"Removed", TOK_SPLIT_REMOVED},
        {"Isolated", TOK_SPLIT_ISOLATED},
        {"MergedWithPrevious", TOK_SPLIT_MERGED_PREV},
        {"MergedWithNext", TOK_SPLIT_MERGED_NEXT},
        {"Contiguous", TOK_SPLIT_CONTIGUOUS},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(s, names[i].name)) {
            *b = names[i].b;
            return 0;
        }
    return ERR(c, TX_EINVAL, "%s.behavior: unknown split behavior \"%.64s\"", where, s);
}

int tokl_load_pretok(struct ctx *c, json_object *o, const char *where)
{
    struct tx_tokenizer *tok = c->tok;
    if (!o)
        return 0;
    const char *type;
    int rc;
    if ((rc = tokl_req_type(c, o, where, &type)))
        return rc;
    struct tok_pretok p;
    memset(&p, 0, sizeof(p));
    if (!strcmp(type, "Sequence")) {
        json_object *l = tokl_get(o, "pretokenizers");
        if (!l || !json_object_is_type(l, json_type_array))
            return ERR(c, TX_EINVAL, "%s.pretokenizers: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(l); i++)
            if ((rc = tokl_load_pretok(c, json_object_array_get_idx(l, i), where)))
                return rc;
        return 0;
    }
    if (!strcmp(type, "Split")) {
        p.type = TOK_PT_SPLIT;
        json_object *pat = tokl_get(o, "pattern");
        if (!pat || !json_object_is_type(pat, json_type_object))
            return ERR(c, TX_EINVAL,
                       "%s.pattern: expected an object {\"Regex\": ...} or "
                       "{\"String\": ...}",
                       where);
        json_object *re = tokl_get(pat, "Regex"), *str = tokl_get(pat, "String");
        json_object *sv = re ? re : str;
        if (!sv || !json_object_is_type(sv, json_type_string))
            return ERR(c, TX_EINVAL, "%s.pattern: expected a \"Regex\" or \"String\" string",
                       where);
        if ((rc = parse_behavior(c, o, where, &p.behavior)) ||
            (rc = tokl_opt_bool(c, o, "invert", where, false, &p.invert)))
            return rc;
        size_t n = (size_t)json_object_get_string_len(sv);
        if (n) {
            p.re = tok_regex_compile(json_object_get_string(sv), n, !re, c->err, c->errsz, &rc);
            if (!p.re)
                return rc;
        }
        if ((rc = push_pretok(c, &p))) {
            pcre2_code_free(p.re);
            return rc;
        }
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) {
        p.type = TOK_PT_BYTELEVEL;
        if ((rc = tokl_opt_bool(c, o, "add_prefix_space", where, true, &p.add_prefix_space)) ||
            (rc = tokl_opt_bool(c, o, "use_regex", where, true, &p.use_regex)))
            return rc;
        if (p.use_regex && !tok->gpt2_re) {
            tok->gpt2_re = tok_regex_compile(GPT2_PATTERN, sizeof(GPT2_PATTERN) - 1, false, c->err,
                                             c->errsz, &rc);
            if (!tok->gpt2_re)
                return rc;
        }
        return push_pretok(c, &p);
    }
    if (!strcmp(type, "Digits")) {
        p.type = TOK_PT_DIGITS;
        if ((rc = tokl_opt_bool(c, o, "individual_digits", where, false, &p.individual_digits)))
            return rc;
        return push_pretok(c, &p);
    }
    return ERR(c, TX_ENOTSUP,
               "%s: pre-tokenizer type \"%.64s\" is not supported (Split, ByteLevel, Digits, "
               "Sequence)",
               where, type);
}

/* ---------------------------------------------------- post-processor */

static int ids_append(struct tok_ids *d, const int32_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (tok_ids_push(d, v[i]))
            return TX_ENOMEM;
    return 0;
}

/* Wraps the current prefix/suffix with another processor's tokens. */
static int post_wrap(struct ctx *c, struct post *p, const struct tok_ids *pre,
                     const struct tok_ids *suf)
{
    struct tok_ids np = {0};
    if (ids_append(&np, pre->v, pre->n) || ids_append(&np, p->pre.v, p->pre.n) ||
        ids_append(&p->suf, suf->v, suf->n)) {
        free(np.v);
        return ERR(c, TX_ENOMEM, "out of memory");
    }
    free(p->pre.v);
    p->pre = np;
    return 0;
}

static int pair_token(struct ctx *c, json_object *o, const char *key, const char *where,
                      int32_t *id)
{
    json_object *v = tokl_get(o, key);
    if (!v || !json_object_is_type(v, json_type_array) || json_object_array_length(v) != 2 ||
        !json_object_is_type(json_object_array_get_idx(v, 1), json_type_int))
        return ERR(c, TX_EINVAL, "%s.%s: expected [token, id]", where, key);
    int64_t x = json_object_get_int64(json_object_array_get_idx(v, 1));
    if (x < 0 || x >= (int64_t)c->tok->n_ids || !(c->tok->id_flags[x] & TOK_ID_PRESENT))
        return ERR(c, TX_EINVAL, "%s.%s: id %lld is not in the vocabulary", where, key,
                   (long long)x);
    *id = (int32_t)x;
    return 0;
}

int tokl_load_post(struct ctx *c, json_object *o, const char *where, struct post *p)
{
    if (!o)
        return 0;
    const char *type;
    int rc;
    if ((rc = tokl_req_type(c, o, where, &type)))
        return rc;
    if (!strcmp(type, "ByteLevel"))
        return 0; /* only trims offsets */
    if (!strcmp(type, "Sequence")) {
        json_object *l = tokl_get(o, "processors");
        if (!l || !json_object_is_type(l, json_type_array))
            return ERR(c, TX_EINVAL, "%s.processors: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(l); i++)
            if ((rc = tokl_load_post(c, json_object_array_get_idx(l, i), where, p)))
                return rc;
        return 0;
    }
    if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) {
        int32_t cls, sep;
        if ((rc = pair_token(c, o, "cls", where, &cls)) ||
            (rc = pair_token(c, o, "sep", where, &sep)))
            return rc;
        struct tok_ids pre = {&cls, 1, 1}, suf = {&sep, 1, 1};
        return post_wrap(c, p, &pre, &suf);
    }
    if (!strcmp(type, "TemplateProcessing")) {
        json_object *single = tokl_get(o, "single"), *sp = tokl_get(o, "special_tokens");
        if (!single || !json_object_is_type(single, json_type_array))
            return ERR(c, TX_EINVAL, "%s.single: expected an array", where);
        if (sp && !json_object_is_type(sp, json_type_object))
            return ERR(c, TX_EINVAL, "%s.special_tokens: expected an object", where);
        struct tok_ids pre = {0}, suf = {0};
        bool seen_seq = false;
        rc = 0;
        for (size_t i = 0; i < json_object_array_length(single) && !rc; i++) {
            json_object *piece = json_object_array_get_idx(single, i), *st, *seq;
            if (piece && json_object_object_get_ex(piece, "Sequence", &seq)) {
                seen_seq = true;
                continue;
            }
            if (!piece || !json_object_object_get_ex(piece, "SpecialToken", &st) ||
                !json_object_is_type(st, json_type_object)) {
                rc = ERR(c, TX_EINVAL,
                         "%s.single[%zu]: expected {\"SpecialToken\": ...} or "
                         "{\"Sequence\": ...}",
                         where, i);
                break;
            }
            json_object *idv = tokl_get(st, "id"), *ent = NULL, *ids = NULL;
            if (!idv || !json_object_is_type(idv, json_type_string)) {
                rc = ERR(c, TX_EINVAL, "%s.single[%zu].SpecialToken.id: expected a string", where,
                         i);
                break;
            }
            const char *name = json_object_get_string(idv);
            if (!sp || !json_object_object_get_ex(sp, name, &ent) ||
                !json_object_is_type(ent, json_type_object) ||
                !json_object_object_get_ex(ent, "ids", &ids) ||
                !json_object_is_type(ids, json_type_array)) {
                rc = ERR(c, TX_EINVAL, "%s.special_tokens: no ids for \"%.64s\"", where, name);
                break;
            }
            for (size_t k = 0; k < json_object_array_length(ids); k++) {
                json_object *x = json_object_array_get_idx(ids, k);
                int64_t v = json_object_is_type(x, json_type_int) ? json_object_get_int64(x) : -1;
                if (v < 0 || v >= (int64_t)c->tok->n_ids ||
                    !(c->tok->id_flags[v] & TOK_ID_PRESENT)) {
                    rc = ERR(c, TX_EINVAL, "%s.special_tokens[\"%.64s\"].ids[%zu]: not a token id",
                             where, name, k);
                    break;
                }
                if (tok_ids_push(seen_seq ? &suf : &pre, (int32_t)v)) {
                    rc = ERR(c, TX_ENOMEM, "out of memory");
                    break;
                }
            }
        }
        if (!rc)
            rc = post_wrap(c, p, &pre, &suf);
        free(pre.v);
        free(suf.v);
        return rc;
    }
    return ERR(c, TX_ENOTSUP,
               "%s: post-processor type \"%.64s\" is not supported (ByteLevel, "
               "TemplateProcessing, RobertaProcessing, BertProcessing, Sequence)",
               where, type);
}

/* ----------------------------------------------------------- decoder */

int tokl_load_decoder(struct ctx *c, json_object *o, const char *where)
{
    if (!o)
        return 0;
    const char *type;
    int rc;
    if ((rc = tokl_req_type(c, o, where, &type)))
        return rc;
    if (!strcmp(type, "ByteLevel")) {
        c->tok->decoder = TOK_DEC_BYTELEVEL;
        return 0;
    }
    if (!strcmp(type, "Sequence")) {
        json_object *l = tokl_get(o, "decoders");
        if (!l || !json_object_is_type(l, json_type_array))
            return ERR(c, TX_EINVAL, "%s.decoders: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(l); i++)
            if ((rc = tokl_load_decoder(c, json_object_array_get_idx(l, i), where)))
                return rc;
        return 0;
    }
    return ERR(c, TX_ENOTSUP, "%s: decoder type \"%.64s\" is not supported (ByteLevel, Sequence)",
               where, type);
}
