// SPDX-License-Identifier: MIT
/*
 * config.json reading and writing helpers shared by the common config
 * parser (glm_config.c), its serialisation (config_serialise.c) and the
 * architecture modules (libtx/arch/). A JSON null counts as "absent" (HF
 * writes e.g. "rope_scaling": null, "pad_token_id": null).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx-internal/tx_config_json.h>
#include <tx-internal/tx_model_internal.h>

struct json_object *cj_field(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    if (!o || !json_object_object_get_ex(o, key, &v))
        return NULL;
    if (json_object_get_type(v) == json_type_null)
        return NULL;
    return v;
}

/* Reads an integer; returns 1 if present, 0 if absent, <0 on error. */
int cj_i64(struct json_object *o, const char *key, const char *ctx, int64_t *out, char *err,
           size_t errsz)
{
    struct json_object *v = cj_field(o, key);
    if (!v)
        return 0;
    if (json_object_get_type(v) == json_type_int) {
        errno = 0;
        int64_t x = json_object_get_int64(v);
        if (errno == ERANGE)
            return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %s%s: integer out of range", ctx,
                             key);
        *out = x;
        return 1;
    }
    if (json_object_get_type(v) == json_type_double) {
        double d = json_object_get_double(v);
        if (isfinite(d) && d == floor(d) && fabs(d) < 9.0e15) {
            *out = (int64_t)d;
            return 1;
        }
    }
    return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %s%s: expected an integer, got %s", ctx,
                     key, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
}

int cj_int(struct json_object *o, const char *key, int *out, char *err, size_t errsz)
{
    int64_t x = 0;
    int rc = cj_i64(o, key, "", &x, err, errsz);
    if (rc <= 0)
        return rc;
    if (x < -2147483647LL || x > 2147483647LL)
        return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %s: %lld does not fit in 32 bits",
                         key, (long long)x);
    *out = (int)x;
    return 1;
}

int cj_num(struct json_object *o, const char *key, const char *ctx, double *out, char *err,
           size_t errsz)
{
    struct json_object *v = cj_field(o, key);
    if (!v)
        return 0;
    enum json_type t = json_object_get_type(v);
    if (t != json_type_int && t != json_type_double)
        return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %s%s: expected a number, got %s", ctx,
                         key, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    double d = t == json_type_int ? (double)json_object_get_int64(v) : json_object_get_double(v);
    if (!isfinite(d))
        return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %s%s: not a finite number", ctx, key);
    *out = d;
    return 1;
}

int cj_bool(struct json_object *o, const char *key, int *out, char *err, size_t errsz)
{
    struct json_object *v = cj_field(o, key);
    if (!v)
        return 0;
    if (json_object_get_type(v) != json_type_boolean)
        return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %s: expected true or false, got %s",
                         key, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    *out = json_object_get_boolean(v) ? 1 : 0;
    return 1;
}

int cj_str(struct json_object *o, const char *key, const char *ctx, const char **out, char *err,
           size_t errsz)
{
    struct json_object *v = cj_field(o, key);
    if (!v)
        return 0;
    if (json_object_get_type(v) != json_type_string)
        return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %s%s: expected a string, got %s", ctx,
                         key, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    *out = json_object_get_string(v);
    return 1;
}

/* token id: an int, or an explicit null -> -1; absent keeps the default */
int cj_token(struct json_object *o, const char *key, int *out, char *err, size_t errsz)
{
    struct json_object *v = NULL;
    if (o && json_object_object_get_ex(o, key, &v) && json_object_get_type(v) == json_type_null) {
        *out = -1;
        return 1;
    }
    int rc = cj_int(o, key, out, err, errsz);
    if (rc < 0)
        return rc;
    if (rc == 1 && *out < 0)
        return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %s: negative token id %d", key, *out);
    return rc;
}

int cj_layer_list(struct json_object *root, const char *key, const char *a, const char *b,
                  uint8_t *out, int n, int *present, char *err, size_t errsz)
{
    struct json_object *v = cj_field(root, key);
    *present = 0;
    if (!v)
        return 0;
    if (json_object_get_type(v) != json_type_array)
        return tx_errbuf(err, errsz, TX_EINVAL, "config.json: %s: expected a list of strings", key);
    size_t len = json_object_array_length(v);
    if (len != (size_t)n)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "config.json: %s: has %zu entries, num_hidden_layers is %d", key, len, n);
    for (size_t i = 0; i < len; i++) {
        struct json_object *e = json_object_array_get_idx(v, i);
        const char *s =
            json_object_get_type(e) == json_type_string ? json_object_get_string(e) : NULL;
        if (s && !strcmp(s, a))
            out[i] = 0;
        else if (s && !strcmp(s, b))
            out[i] = 1;
        else
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "config.json: %s[%zu]: expected \"%s\" or \"%s\", got %s", key, i, a,
                             b, json_object_to_json_string_ext(e, JSON_C_TO_STRING_PLAIN));
    }
    *present = 1;
    return 0;
}

int cj_add(struct json_object *o, const char *k, struct json_object *v)
{
    if (!v)
        return TX_ENOMEM;
    return json_object_object_add(o, k, v);
}

struct json_object *cj_double(double d)
{
    char buf[40];
    /* shortest representation that reads back to the same double */
    for (int p = 6; p <= 17; p++) {
        snprintf(buf, sizeof(buf), "%.*g", p, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    if (!strpbrk(buf, ".eEni")) /* keep it a JSON float */
        strncat(buf, ".0", sizeof(buf) - strlen(buf) - 1);
    return json_object_new_double_s(d, buf);
}

struct json_object *cj_layer_list_json(const uint8_t *v, int n, const char *a, const char *b)
{
    struct json_object *arr = json_object_new_array();
    if (!arr)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (json_object_array_add(arr, json_object_new_string(v[i] ? b : a)) < 0) {
            json_object_put(arr);
            return NULL;
        }
    }
    return arr;
}

struct json_object *cj_token_or_null(int id)
{
    return id < 0 ? NULL : json_object_new_int(id);
}

void cj_put_i(struct json_object *o, const char *k, int64_t v)
{
    json_object_object_add(o, k, json_object_new_int64(v));
}

void cj_put_d(struct json_object *o, const char *k, double v)
{
    json_object_object_add(o, k, json_object_new_double(v));
}

void cj_put_b(struct json_object *o, const char *k, int v)
{
    json_object_object_add(o, k, json_object_new_boolean(v));
}

void cj_put_s(struct json_object *o, const char *k, const char *v)
{
    json_object_object_add(o, k, json_object_new_string(v));
}
