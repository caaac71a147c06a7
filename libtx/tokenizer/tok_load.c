/* SPDX-License-Identifier: MIT */
/* tokenizer.json loading: entry points, the document, the top level. (tok_load.h) */
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

const char *tokl_type_name(json_object *o)
{
    return o ? json_type_to_name(json_object_get_type(o)) : "null";
}

json_object *tokl_get(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v))
        return NULL;
    return v; /* NULL also for an explicit null */
}

int tokl_opt_bool(struct ctx *c, json_object *o, const char *key, const char *where, bool def,
                  bool *out)
{
    json_object *v = tokl_get(o, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_object_is_type(v, json_type_boolean))
        return ERR(c, TX_EINVAL, "%s.%s: expected a boolean, found %s", where, key,
                   tokl_type_name(v));
    *out = json_object_get_boolean(v);
    return 0;
}

/* *s = NULL when absent or null. */
int tokl_opt_string(struct ctx *c, json_object *o, const char *key, const char *where,
                    const char **s, size_t *n)
{
    json_object *v = tokl_get(o, key);
    *s = NULL;
    *n = 0;
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_string))
        return ERR(c, TX_EINVAL, "%s.%s: expected a string, found %s", where, key,
                   tokl_type_name(v));
    *s = json_object_get_string(v);
    *n = (size_t)json_object_get_string_len(v);
    return 0;
}

int tokl_req_type(struct ctx *c, json_object *o, const char *where, const char **type)
{
    if (!json_object_is_type(o, json_type_object))
        return ERR(c, TX_EINVAL, "%s: expected an object, found %s", where, tokl_type_name(o));
    json_object *t = tokl_get(o, "type");
    if (!t)
        return ERR(c, TX_EINVAL, "%s: missing \"type\"", where);
    if (!json_object_is_type(t, json_type_string))
        return ERR(c, TX_EINVAL, "%s.type: expected a string, found %s", where, tokl_type_name(t));
    *type = json_object_get_string(t);
    return 0;
}

/* --------------------------------------------------------------- top */

static int load_root(struct ctx *c, json_object *root, const struct fast *fs)
{
    struct tx_tokenizer *tok = c->tok;
    int rc;
    if (!json_object_is_type(root, json_type_object))
        return ERR(c, TX_EINVAL, "top level is %s, expected an object", tokl_type_name(root));
    json_object *model = tokl_get(root, "model");
    if (!model)
        return ERR(c, TX_EINVAL, "missing \"model\"");
    if (!json_object_is_type(model, json_type_object))
        return ERR(c, TX_EINVAL, "model: expected an object, found %s", tokl_type_name(model));
    json_object *t = tokl_get(model, "type");
    if (t && !json_object_is_type(t, json_type_string))
        return ERR(c, TX_EINVAL, "model.type: expected a string, found %s", tokl_type_name(t));
    if (t && strcmp(json_object_get_string(t), "BPE"))
        return ERR(c, TX_ENOTSUP, "model.type \"%.64s\" is not supported (only BPE)",
                   json_object_get_string(t));
    json_object *vocab = tokl_get(model, "vocab"), *merges = tokl_get(model, "merges");
    if (!vocab)
        return ERR(c, TX_EINVAL, "model: missing \"vocab\"");
    if (!json_object_is_type(vocab, json_type_object))
        return ERR(c, TX_EINVAL, "model.vocab: expected an object, found %s",
                   tokl_type_name(vocab));
    if (!merges)
        return ERR(c, TX_EINVAL, "model: missing \"merges\"");
    if (!json_object_is_type(merges, json_type_array))
        return ERR(c, TX_EINVAL, "model.merges: expected an array, found %s",
                   tokl_type_name(merges));

    int64_t max_id = -1;
    if ((rc = tokl_load_model_options(c, model)))
        return rc;
    if (fs) { /* the placeholders must be where the fast scan put them */
        if (json_object_object_length(vocab) || json_object_array_length(merges))
            return TOK_FALLBACK;
        rc = tokl_fast_vocab(c, fs->vocab, &max_id);
        if (!rc)
            rc = tokl_fast_merges(c, fs->merges);
    } else {
        rc = tokl_add_vocab(c, vocab, &max_id);
        if (!rc)
            rc = tokl_add_merges(c, merges);
    }
    if (rc || (rc = tokl_load_model_tail(c, model)))
        return rc;
    if ((rc = tokl_parse_added(c, tokl_get(root, "added_tokens"), &max_id)))
        return rc;
    if (max_id < 0)
        return ERR(c, TX_EINVAL, "model.vocab: empty vocabulary");
    /* The id tables are sized by the largest id: keep them linear in the
     * input. Real vocabularies are dense (ids 0..N-1 plus added tokens just
     * above), so a largest id far beyond the number of tokens is refused. */
    size_t ntok = tok->vocab.n + tok->n_added;
    if ((uint64_t)max_id >= 2 * (uint64_t)ntok + TOK_ID_SLACK)
        return ERR(c, TX_EINVAL,
                   "model.vocab: largest token id %lld with only %zu tokens exceeds the limit "
                   "%llu (2 x tokens + %u: ids must be nearly dense)",
                   (long long)max_id, ntok, (unsigned long long)(2 * (uint64_t)ntok + TOK_ID_SLACK),
                   TOK_ID_SLACK);
    if ((rc = tokl_build_ids(c, max_id)))
        return rc;
    if ((rc = tokl_load_normalizer(c, tokl_get(root, "normalizer"), "normalizer")))
        return rc;
    if ((rc = tokl_build_added(c)))
        return rc;
    if ((rc = tokl_load_pretok(c, tokl_get(root, "pre_tokenizer"), "pre_tokenizer")))
        return rc;
    struct post p = {{0}, {0}};
    rc = tokl_load_post(c, tokl_get(root, "post_processor"), "post_processor", &p);
    tok->post_prefix = p.pre.v;
    tok->n_post_prefix = p.pre.n;
    tok->post_suffix = p.suf.v;
    tok->n_post_suffix = p.suf.n;
    if (rc)
        return rc;
    if ((rc = tokl_load_decoder(c, tokl_get(root, "decoder"), "decoder")))
        return rc;
    return tokl_build_decoded(c);
}

/* Parses a document (fs: the fast form, fs->rest) into a tokenizer. */
static int load_doc(const char *json, size_t len, const struct fast *fs, struct tx_tokenizer **out,
                    char *err, size_t errsz)
{
    if (fs) {
        json = fs->rest;
        len = fs->rest_len;
    }
    json_tokener *jt = json_tokener_new_ex(64);
    if (!jt)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    json_tokener_set_flags(jt, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS |
                                   JSON_TOKENER_VALIDATE_UTF8);
    json_object *root = json_tokener_parse_ex(jt, json, (int)len);
    enum json_tokener_error je = json_tokener_get_error(jt);
    size_t end = json_tokener_get_parse_end(jt);
    json_tokener_free(jt);
    if (!root || je != json_tokener_success) {
        json_object_put(root);
        if (fs)
            return TOK_FALLBACK;
        if (je == json_tokener_continue)
            return tx_errbuf(err, errsz, TX_EINVAL, "truncated JSON (input ends after %zu bytes)",
                             len);
        return tx_errbuf(err, errsz, TX_EINVAL, "JSON syntax error near byte %zu: %s", end,
                         json_tokener_error_desc(je));
    }
    for (size_t i = end; i < len; i++) {
        char ch = json[i];
        if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') {
            json_object_put(root);
            if (fs)
                return TOK_FALLBACK;
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "trailing data after the JSON document at byte %zu", i);
        }
    }

    struct tx_tokenizer *tok = calloc(1, sizeof(*tok));
    if (!tok) {
        json_object_put(root);
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    }
    tok->unk_id = -1;
    struct ctx c = {tok, err, errsz, {0}};
    int rc = tok_cache_init(&tok->cache);
    if (rc)
        rc = tx_errbuf(err, errsz, rc, "out of memory");
    else
        rc = load_root(&c, root, fs);
    free(c.tmp.p);
    json_object_put(root);
    if (rc) {
        tx_tokenizer_free(tok);
        return fs ? TOK_FALLBACK : rc;
    }
    *out = tok;
    return 0;
}

int tok_load_buffer_ex(const void *json, size_t len, unsigned flags, struct tx_tokenizer **out,
                       char *err, size_t errsz)
{
    if (err && errsz)
        err[0] = 0;
    if (!out || (!json && len))
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    *out = NULL;
    if (len > INT_MAX)
        return tx_errbuf(err, errsz, TX_EINVAL, "tokenizer file too large (%zu bytes)", len);
    if (len == 0)
        return tx_errbuf(err, errsz, TX_EINVAL, "empty tokenizer file");
    if (!(flags & TOK_LOAD_NO_FAST)) {
        struct fast fs;
        int rc = tokl_fast_find(json, len, &fs);
        if (!rc) {
            rc = load_doc(json, len, &fs, out, err, errsz);
            free(fs.rest);
            if (!rc)
                return 0;
        }
        if (flags & TOK_LOAD_FAST_ONLY)
            return TOK_FALLBACK;
        if (err && errsz)
            err[0] = 0;
    }
    return load_doc(json, len, NULL, out, err, errsz);
}

int tx_tokenizer_load_buffer(const void *json, size_t len, struct tx_tokenizer **out, char *err,
                             size_t errsz)
{
    return tok_load_buffer_ex(json, len, 0, out, err, errsz);
}

int tx_tokenizer_load_file(const char *path, struct tx_tokenizer **out, char *err, size_t errsz)
{
    if (!path || !out)
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return tx_errbuf(err, errsz, tx_errno_code(e), "%s: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: not a regular file", path);
    }
    if (st.st_size > INT_MAX) {
        close(fd);
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: file too large", path);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            close(fd);
            free(buf);
            return tx_errbuf(err, errsz, TX_EIO, "%s: read error: %s", path, strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
    char msg[400];
    int rc = tx_tokenizer_load_buffer(buf, n, out, msg, sizeof(msg));
    free(buf);
    if (rc)
        return tx_errbuf(err, errsz, rc, "%s: %s", path, msg);
    return 0;
}

void tx_tokenizer_free(struct tx_tokenizer *tok)
{
    if (!tok)
        return;
    free(tok->pool.p);
    free(tok->tok_off);
    free(tok->tok_len);
    free(tok->dec_off);
    free(tok->dec_len);
    free(tok->id_flags);
    tok_strmap_free(&tok->vocab);
    tok_pairmap_free(&tok->merges);
    free(tok->added);
    tok_strmap_free(&tok->added_map);
    tok_trie_free(&tok->trie_raw);
    tok_trie_free(&tok->trie_norm);
    free(tok->nf);
    for (size_t i = 0; i < tok->n_pt; i++)
        pcre2_code_free(tok->pt[i].re);
    free(tok->pt);
    pcre2_code_free(tok->gpt2_re);
    free(tok->post_prefix);
    free(tok->post_suffix);
    tok_cache_free(&tok->cache);
    free(tok);
}
