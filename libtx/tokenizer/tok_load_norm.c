/* SPDX-License-Identifier: MIT */
/* tokenizer.json loading: the normalizer (NFC) and tok_normalize. (tok_load.h) */
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

/* -------------------------------------------------------- normalizer */

int tokl_load_normalizer(struct ctx *c, json_object *o, const char *where)
{
    struct tx_tokenizer *tok = c->tok;
    if (!o)
        return 0;
    const char *type;
    int rc;
    if ((rc = tokl_req_type(c, o, where, &type)))
        return rc;
    if (!strcmp(type, "Sequence")) {
        json_object *l = tokl_get(o, "normalizers");
        if (!l || !json_object_is_type(l, json_type_array))
            return ERR(c, TX_EINVAL, "%s.normalizers: expected an array", where);
        for (size_t i = 0; i < json_object_array_length(l); i++)
            if ((rc = tokl_load_normalizer(c, json_object_array_get_idx(l, i), where)))
                return rc;
        return 0;
    }
    enum tok_nf nf;
    if (!strcmp(type, "NFC"))
        nf = TOK_NF_NFC;
    else if (!strcmp(type, "NFD"))
        nf = TOK_NF_NFD;
    else if (!strcmp(type, "NFKC"))
        nf = TOK_NF_NFKC;
    else if (!strcmp(type, "NFKD"))
        nf = TOK_NF_NFKD;
    else
        return ERR(c, TX_ENOTSUP,
                   "%s: normalizer type \"%.64s\" is not supported (NFC, NFD, NFKC, NFKD, "
                   "Sequence)",
                   where, type);
    enum tok_nf *a = realloc(tok->nf, (tok->n_nf + 1) * sizeof(*a));
    if (!a)
        return ERR(c, TX_ENOMEM, "out of memory");
    tok->nf = a;
    tok->nf[tok->n_nf++] = nf;
    return 0;
}

/*
 * Code points that are NFC_Quick_Check=Yes, combining class 0 and never
 * the second half of a composition: below U+0300, CJK unified ideographs,
 * Hangul syllables. A run of them is already in NFC.
 */
static bool nfc_inert(uint32_t cp)
{
    return cp < 0x300 || (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3);
}

static int nfc_map(const char *s, size_t n, struct tok_buf *out)
{
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (r < 0)
        return r == UTF8PROC_ERROR_NOMEM ? TX_ENOMEM : TX_EINVAL;
    int rc = tok_buf_put(out, dst, (size_t)r);
    free(dst);
    return rc;
}

/*
 * NFC without calling utf8proc on text that is already normalized: the
 * text is cut before every ASCII character (NFC_QC=Yes, ccc=0, composes
 * with nothing before it, so NFC(a + b) = NFC(a) + NFC(b) there) and only
 * chunks holding a character outside nfc_inert() go through utf8proc.
 */
static int nfc_fast(const char *s, size_t n, char **out, size_t *out_len)
{
    struct tok_buf b = {0};
    int rc = tok_buf_reserve(&b, n);
    size_t i = 0, copy_from = 0;
    while (!rc && i < n) {
        size_t start = i;
        bool inert = true;
        do { /* one chunk: one character, then any non-ASCII ones */
            uint32_t cp = (unsigned char)s[i];
            size_t l = 1;
            if (cp >= 0x80 && !(l = tok_utf8_decode((const unsigned char *)s + i, n - i, &cp))) {
                free(b.p);
                return TX_EINVAL;
            }
            if (!nfc_inert(cp))
                inert = false;
            i += l;
        } while (i < n && (unsigned char)s[i] >= 0x80);
        if (!inert) {
            rc = tok_buf_put(&b, s + copy_from, start - copy_from);
            if (!rc)
                rc = nfc_map(s + start, i - start, &b);
            copy_from = i;
        }
    }
    if (!rc)
        rc = tok_buf_put(&b, s + copy_from, n - copy_from);
    if (rc) {
        free(b.p);
        return rc;
    }
    *out = b.p;
    *out_len = b.len;
    return 0;
}

int tok_normalize(const struct tx_tokenizer *tok, const char *s, size_t n, char **out,
                  size_t *out_len)
{
    if (tok->n_nf == 1 && tok->nf[0] == TOK_NF_NFC)
        return nfc_fast(s, n, out, out_len);

    char *cur = malloc(n + 1);
    if (!cur)
        return TX_ENOMEM;
    memcpy(cur, s, n);
    cur[n] = 0;
    size_t len = n;
    bool ascii = true;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) {
            ascii = false;
            break;
        }
    for (size_t k = 0; k < tok->n_nf && !ascii; k++) {
        utf8proc_option_t opt = UTF8PROC_STABLE;
        switch (tok->nf[k]) {
        case TOK_NF_NFC:
            opt |= UTF8PROC_COMPOSE;
            break;
        case TOK_NF_NFD:
            opt |= UTF8PROC_DECOMPOSE;
            break;
        case TOK_NF_NFKC:
            opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
            break;
        case TOK_NF_NFKD:
            opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
            break;
        }
        utf8proc_uint8_t *dst = NULL;
        utf8proc_ssize_t r =
            utf8proc_map((const utf8proc_uint8_t *)cur, (utf8proc_ssize_t)len, &dst, opt);
        if (r < 0) {
            free(cur);
            return r == UTF8PROC_ERROR_NOMEM ? TX_ENOMEM : TX_EINVAL;
        }
        free(cur);
        cur = (char *)dst;
        len = (size_t)r;
    }
    *out = cur;
    *out_len = len;
    return 0;
}
