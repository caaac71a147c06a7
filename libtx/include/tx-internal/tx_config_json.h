/* SPDX-License-Identifier: MIT */
/*
 * config.json field readers and writers (libtx/model/config_json.c), shared
 * by the common config code and the architecture modules. Readers return 1
 * if the field is present (and valid), 0 if absent (or null), <0 (TX_EINVAL,
 * message in err naming the field) if it has the wrong type.
 */
#ifndef TX_CONFIG_JSON_H
#define TX_CONFIG_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <tx-internal/tx_model_internal.h>

struct json_object;

TXM_HIDDEN struct json_object *cj_field(struct json_object *o, const char *key);
TXM_HIDDEN int cj_i64(struct json_object *o, const char *key, const char *ctx, int64_t *out,
                      char *err, size_t errsz);
TXM_HIDDEN int cj_int(struct json_object *o, const char *key, int *out, char *err, size_t errsz);
TXM_HIDDEN int cj_num(struct json_object *o, const char *key, const char *ctx, double *out,
                      char *err, size_t errsz);
TXM_HIDDEN int cj_bool(struct json_object *o, const char *key, int *out, char *err, size_t errsz);
TXM_HIDDEN int cj_str(struct json_object *o, const char *key, const char *ctx, const char **out,
                      char *err, size_t errsz);
/* token id: an int, or an explicit null -> -1; absent keeps the default */
TXM_HIDDEN int cj_token(struct json_object *o, const char *key, int *out, char *err, size_t errsz);
/* a per-layer list of two names (a -> 0, b -> 1) of exactly n entries */
TXM_HIDDEN int cj_layer_list(struct json_object *root, const char *key, const char *a,
                             const char *b, uint8_t *out, int n, int *present, char *err,
                             size_t errsz);

/* writers: cj_add returns TX_ENOMEM if v is NULL (an allocation failed) */
TXM_HIDDEN int cj_add(struct json_object *o, const char *k, struct json_object *v);
TXM_HIDDEN struct json_object *cj_double(double d); /* shortest round-trip float */
TXM_HIDDEN struct json_object *cj_layer_list_json(const uint8_t *v, int n, const char *a,
                                                  const char *b);
TXM_HIDDEN struct json_object *cj_token_or_null(int id);
/* plain setters (synthetic config.json files) */
TXM_HIDDEN void cj_put_i(struct json_object *o, const char *k, int64_t v);
TXM_HIDDEN void cj_put_d(struct json_object *o, const char *k, double v);
TXM_HIDDEN void cj_put_b(struct json_object *o, const char *k, int v);
TXM_HIDDEN void cj_put_s(struct json_object *o, const char *k, const char *v);

/* In a parser with `root`, `err`, `errsz` in scope: read an optional field
 * (CJ_GET) or a required one (CJ_REQ); both return the error code from the
 * enclosing function. */
#define CJ_GET(kind, key, dst)                                                                     \
    do {                                                                                           \
        int r_ = kind(root, key, dst, err, errsz);                                                 \
        if (r_ < 0)                                                                                \
            return r_;                                                                             \
    } while (0)

/*
 * Required fields: every field that decides a tensor's shape or the layer
 * structure. transformers' configuration classes give them defaults too
 * (Glm4MoeConfig hidden_size 4096, GlmMoeDsaConfig 6144, ...), but those
 * describe one particular model: a checkpoint whose config.json lacks
 * hidden_size is broken, not a 6144-wide model. The optional fields keep
 * the transformers defaults (the module's defaults(); docs/glm-config.md
 * lists both).
 */
#define CJ_REQ(kind, key, dst)                                                                     \
    do {                                                                                           \
        int r_ = kind(root, key, dst, err, errsz);                                                 \
        if (r_ < 0)                                                                                \
            return r_;                                                                             \
        if (r_ == 0)                                                                               \
            return tx_errbuf(err, errsz, TX_EINVAL,                                                \
                             "config.json: %s: required field is missing (it decides the shape "   \
                             "of the model's tensors; transformers' default describes another "    \
                             "model)",                                                             \
                             key);                                                                 \
    } while (0)

#define CJ_POS(fieldname)                                                                          \
    do {                                                                                           \
        if (c->fieldname <= 0)                                                                     \
            return tx_errbuf(err, errsz, TX_EINVAL,                                                \
                             "config.json: " #fieldname ": must be > 0 (got %d)", c->fieldname);   \
    } while (0)

#endif
