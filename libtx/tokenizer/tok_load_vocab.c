/* SPDX-License-Identifier: MIT */
/* tokenizer.json loading: added tokens, the id table, decoded forms. (tok_load.h) */
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

/* ------------------------------------------------------ added tokens */

int tokl_parse_added(struct ctx *c, json_object *list, int64_t *max_id)
{
    struct tx_tokenizer *tok = c->tok;
    if (!list)
        return 0;
    if (!json_object_is_type(list, json_type_array))
        return ERR(c, TX_EINVAL, "added_tokens: expected an array, found %s", tokl_type_name(list));
    size_t n = json_object_array_length(list);
    tok->added = calloc(n ? n : 1, sizeof(*tok->added));
    if (!tok->added)
        return ERR(c, TX_ENOMEM, "out of memory");
    int rc;
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(list, i);
        char where[48];
        snprintf(where, sizeof(where), "added_tokens[%zu]", i);
        if (!o || !json_object_is_type(o, json_type_object))
            return ERR(c, TX_EINVAL, "%s: expected an object, found %s", where, tokl_type_name(o));
        json_object *idv = tokl_get(o, "id");
        if (!idv || !json_object_is_type(idv, json_type_int))
            return ERR(c, TX_EINVAL, "%s.id: expected an integer, found %s", where,
                       tokl_type_name(idv));
        int64_t id = json_object_get_int64(idv);
        if (id < 0 || id >= (int64_t)TOK_MAX_ID)
            return ERR(c, TX_EINVAL, "%s.id: %lld is out of range [0, %u)", where, (long long)id,
                       TOK_MAX_ID);
        const char *s;
        size_t sl;
        if ((rc = tokl_opt_string(c, o, "content", where, &s, &sl)))
            return rc;
        if (!s)
            return ERR(c, TX_EINVAL, "%s: missing \"content\"", where);
        struct tok_added *a = &tok->added[tok->n_added];
        if ((rc = tokl_opt_bool(c, o, "special", where, false, &a->special)) ||
            (rc = tokl_opt_bool(c, o, "single_word", where, false, &a->single_word)) ||
            (rc = tokl_opt_bool(c, o, "lstrip", where, false, &a->lstrip)) ||
            (rc = tokl_opt_bool(c, o, "rstrip", where, false, &a->rstrip)) ||
            (rc = tokl_opt_bool(c, o, "normalized", where, !a->special, &a->normalized)))
            return rc;
        if (!sl)
            continue; /* HF ignores tokens with empty content */
        if (tok_utf8_validate(s, sl) != sl)
            return ERR(c, TX_EINVAL, "%s.content: not valid UTF-8", where);
        int64_t off = tok_pool_add(&tok->pool, s, sl);
        if (off < 0)
            return ERR(c, TX_ENOMEM, "out of memory");
        a->id = (int32_t)id;
        a->off = a->match_off = (uint32_t)off;
        a->len = a->match_len = (uint32_t)sl;
        tok->n_added++;
        if (id > *max_id)
            *max_id = id;
    }
    return 0;
}

int tokl_build_added(struct ctx *c)
{
    struct tx_tokenizer *tok = c->tok;
    int rc = tok_strmap_init(&tok->added_map, &tok->pool, tok->n_added);
    if (rc)
        return ERR(c, rc, "out of memory");
    /* Specials go into the tries before the others, as in HF. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < tok->n_added; i++) {
            struct tok_added *a = &tok->added[i];
            if (a->special != (pass == 0))
                continue;
            if (a->normalized && tok->n_nf) {
                char *nrm;
                size_t nl;
                rc = tok_normalize(tok, tok->pool.p + a->off, a->len, &nrm, &nl);
                if (rc)
                    return ERR(c, rc, "added token %d: cannot normalize its content", a->id);
                int64_t off = tok_pool_add(&tok->pool, nrm, nl);
                free(nrm);
                if (off < 0)
                    return ERR(c, TX_ENOMEM, "out of memory");
                a->match_off = (uint32_t)off;
                a->match_len = (uint32_t)nl;
            }
            rc = tok_trie_add(a->normalized ? &tok->trie_norm : &tok->trie_raw,
                              tok->pool.p + a->match_off, a->match_len, (int32_t)i);
            if (rc)
                return ERR(c, rc, "out of memory");
        }
    }
    for (size_t i = 0; i < tok->n_added; i++) {
        struct tok_added *a = &tok->added[i];
        if (tok_strmap_get(&tok->added_map, tok->pool.p + a->off, a->len) < 0 &&
            (rc = tok_strmap_put(&tok->added_map, a->off, a->len, a->id)))
            return ERR(c, rc, "out of memory");
    }
    return 0;
}

/* ---------------------------------------------------------- id table */

int tokl_build_ids(struct ctx *c, int64_t max_id)
{
    struct tx_tokenizer *tok = c->tok;
    size_t n = (size_t)(max_id + 1);
    tok->n_ids = (uint32_t)n;
    tok->tok_off = calloc(n ? n : 1, sizeof(uint32_t));
    tok->tok_len = malloc((n ? n : 1) * sizeof(uint32_t));
    tok->dec_off = calloc(n ? n : 1, sizeof(uint32_t));
    tok->dec_len = calloc(n ? n : 1, sizeof(uint32_t));
    tok->id_flags = calloc(n ? n : 1, 1);
    if (!tok->tok_off || !tok->tok_len || !tok->dec_off || !tok->dec_len || !tok->id_flags)
        return ERR(c, TX_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        tok->tok_len[i] = UINT32_MAX;
    for (size_t e = 0; e < tok->vocab.n; e++) {
        int32_t id = tok->vocab.val[e];
        tok->tok_off[id] = tok->vocab.key_off[e];
        tok->tok_len[id] = tok->vocab.key_len[e];
        tok->id_flags[id] |= TOK_ID_PRESENT;
    }
    for (size_t i = 0; i < tok->n_added; i++) {
        struct tok_added *a = &tok->added[i];
        tok->tok_off[a->id] = a->off;
        tok->tok_len[a->id] = a->len;
        tok->id_flags[a->id] |= TOK_ID_PRESENT | TOK_ID_ADDED;
        if (a->special)
            tok->id_flags[a->id] |= TOK_ID_SPECIAL;
        else
            tok->id_flags[a->id] &= (uint8_t)~TOK_ID_SPECIAL;
    }
    return 0;
}

/* Precomputes what each token decodes to. */
int tokl_build_decoded(struct ctx *c)
{
    struct tx_tokenizer *tok = c->tok;
    for (uint32_t id = 0; id < tok->n_ids; id++) {
        if (tok->tok_len[id] == UINT32_MAX)
            continue;
        uint32_t off = tok->tok_off[id], len = tok->tok_len[id];
        if (tok->decoder != TOK_DEC_BYTELEVEL) {
            tok->dec_off[id] = off;
            tok->dec_len[id] = len;
            continue;
        }
        /* ByteLevel: every char back to its byte; a token with a char
         * outside the alphabet decodes to its own UTF-8 bytes (HF). */
        c->tmp.len = 0;
        const unsigned char *s = (const unsigned char *)tok->pool.p + off;
        bool all = true;
        for (size_t i = 0; i < len;) {
            uint32_t cp;
            size_t l = tok_utf8_decode(s + i, len - i, &cp);
            int b = l ? tok_cp_to_byte(cp) : -1;
            if (b < 0) {
                all = false;
                break;
            }
            char ch = (char)b;
            if (tok_buf_put(&c->tmp, &ch, 1))
                return ERR(c, TX_ENOMEM, "out of memory");
            i += l;
        }
        if (!all || (c->tmp.len == len && !memcmp(c->tmp.p, s, len))) {
            tok->dec_off[id] = off; /* same bytes: share the token string */
            tok->dec_len[id] = len;
            continue;
        }
        int64_t o = tok_pool_add(&tok->pool, c->tmp.p, c->tmp.len);
        if (o < 0)
            return ERR(c, TX_ENOMEM, "out of memory");
        tok->dec_off[id] = (uint32_t)o;
        tok->dec_len[id] = (uint32_t)c->tmp.len;
    }
    return 0;
}
