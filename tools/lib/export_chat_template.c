/* SPDX-License-Identifier: MIT */
/*
 * glm-export: a checkpoint's chat_template.jinja and special_tokens_map.json
 * into the package. Newer checkpoints (transformers >= 4.43 saves it so)
 * keep the chat template in chat_template.jinja next to
 * tokenizer_config.json, and transformers prefers that file; the special
 * tokens a template uses (bos_token, eos_token...) may be only in
 * special_tokens_map.json. The package keeps one tokenizer_config.json
 * section (docs/smd-format.md): the file's text becomes its
 * "chat_template", and the special tokens it lacks are added from the map,
 * so a package reader needs nothing new (the change is additive).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include <tx/tx_error.h>

#include <tx-internal/tx_errors.h>
#include "export_chat_template.h"
#include <tx-internal/tx_model_internal.h>

#define TEMPLATE_MAX (4u << 20)

/* the file name in the checkpoint's directory (ckpt itself, or the
 * directory of a file), malloc'd */
static char *ckpt_file(const char *ckpt, const char *name)
{
    struct stat st;
    const char *dir = ckpt;
    size_t dn = strlen(ckpt);
    if (stat(ckpt, &st) != 0 || !S_ISDIR(st.st_mode)) {
        const char *slash = strrchr(ckpt, '/');
        dir = slash ? ckpt : ".";
        dn = slash ? (size_t)(slash - ckpt) : 1;
    }
    char *path = malloc(dn + strlen(name) + 2);
    if (path) {
        memcpy(path, dir, dn);
        path[dn] = '/';
        strcpy(path + dn + 1, name);
    }
    return path;
}

static int serialise(struct json_object *o, char **tokcfg, size_t *len, char *err, size_t errsz)
{
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                          JSON_C_TO_STRING_NOSLASHESCAPE);
    char *copy = s ? strdup(s) : NULL;
    if (!copy)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    free(*tokcfg);
    *tokcfg = copy;
    *len = strlen(copy);
    return 0;
}

int txe_merge_special_tokens(const char *ckpt, char **tokcfg, size_t *len, char *err,
                             size_t errsz)
{
    static const char *const KEYS[] = {"bos_token", "eos_token",  "unk_token",
                                       "pad_token", "sep_token",  "cls_token",
                                       "mask_token", "additional_special_tokens", NULL};
    char *path = ckpt_file(ckpt, "special_tokens_map.json");
    if (!path)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    char *txt = NULL;
    size_t tl = 0;
    int rc = txm_read_file(path, 16u << 20, &txt, &tl, err, errsz);
    if (rc == TX_ENOENT || (rc == 0 && !*tokcfg)) {
        /* no map; or no tokenizer_config.json: nothing to complete */
        free(txt);
        free(path);
        return 0;
    }
    if (rc < 0) {
        free(path);
        return rc;
    }
    struct json_object *map = json_tokener_parse(txt), *o = json_tokener_parse(*tokcfg);
    int added = 0;
    if (!map || !json_object_is_type(map, json_type_object) || !o ||
        !json_object_is_type(o, json_type_object)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: %s", path,
                       map ? "tokenizer_config.json is not a JSON object" : "not a JSON object");
    } else {
        for (size_t i = 0; KEYS[i]; i++) {
            struct json_object *v;
            if (!json_object_object_get_ex(o, KEYS[i], NULL) &&
                json_object_object_get_ex(map, KEYS[i], &v)) {
                json_object_object_add(o, KEYS[i], json_object_get(v));
                added = 1;
            }
        }
        if (added)
            rc = serialise(o, tokcfg, len, err, errsz);
    }
    json_object_put(map);
    json_object_put(o);
    free(txt);
    free(path);
    return rc;
}

int txe_merge_chat_template(const char *ckpt, char **tokcfg, size_t *len, char *err, size_t errsz)
{
    char *path = ckpt_file(ckpt, "chat_template.jinja");
    if (!path)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
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
    rc = serialise(o, tokcfg, len, err, errsz);
out:
    json_object_put(o);
    free(tmpl);
    free(path);
    return rc;
}
