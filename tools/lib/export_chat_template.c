/* SPDX-License-Identifier: MIT */
/*
 * glm-export: a checkpoint's chat_template.jinja into the package. Newer
 * checkpoints (transformers >= 4.43 saves it so) keep the chat template in
 * chat_template.jinja next to tokenizer_config.json, and transformers
 * prefers that file. The package keeps one tokenizer_config.json section
 * (docs/smd-format.md): the file's text becomes its "chat_template", so a
 * package reader needs nothing new (the change is additive).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include <tx/tx_error.h>

#include "common/error.h"
#include "export_chat_template.h"
#include "model/model_internal.h"

#define TEMPLATE_MAX (4u << 20)

int txe_merge_chat_template(const char *ckpt, char **tokcfg, size_t *len, char *err, size_t errsz)
{
    /* the checkpoint's directory: ckpt itself, or the directory of a file */
    struct stat st;
    const char *dir = ckpt;
    size_t dn = strlen(ckpt);
    if (stat(ckpt, &st) != 0 || !S_ISDIR(st.st_mode)) {
        const char *slash = strrchr(ckpt, '/');
        dir = slash ? ckpt : ".";
        dn = slash ? (size_t)(slash - ckpt) : 1;
    }
    char *path = malloc(dn + sizeof("/chat_template.jinja"));
    if (!path)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    memcpy(path, dir, dn);
    strcpy(path + dn, "/chat_template.jinja");
    char *tmpl = NULL;
    size_t tl = 0;
    int rc = txm_read_file(path, TEMPLATE_MAX, &tmpl, &tl, err, errsz);
    if (rc == TX_ENOENT) {
        free(path);
        return 0; /* no file: tokenizer_config.json's chat_template, if any */
    }
    if (rc < 0) {
        free(path);
        return rc;
    }
    struct json_object *o = *tokcfg ? json_tokener_parse(*tokcfg) : json_object_new_object();
    if (!o || !json_object_is_type(o, json_type_object) || memchr(tmpl, 0, tl)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: %s", path,
                       memchr(tmpl, 0, tl) ? "contains a NUL byte"
                                           : "tokenizer_config.json is not a JSON object");
        goto out;
    }
    json_object_object_add(o, "chat_template", json_object_new_string_len(tmpl, (int)tl));
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                          JSON_C_TO_STRING_NOSLASHESCAPE);
    char *copy = s ? strdup(s) : NULL;
    if (!copy) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto out;
    }
    free(*tokcfg);
    *tokcfg = copy;
    *len = strlen(copy);
    rc = 0;
out:
    json_object_put(o);
    free(tmpl);
    free(path);
    return rc;
}
