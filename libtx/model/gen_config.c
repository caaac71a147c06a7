/* SPDX-License-Identifier: MIT */
/*
 * generation_config.json (Hugging Face GenerationConfig): the fields the
 * runtime uses -- eos_token_id (stop tokens), do_sample, temperature,
 * top_p, top_k (default sampling) -- parsed, bounded and validated, and
 * written back as the normalised object glm-export keeps in the package
 * metadata (docs/smd-format.md, docs/libtx-glm.md).
 */
#include <tx-internal/tx_model_internal.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/glm.h>

/* Looks a field up; a JSON null counts as absent. */
static struct json_object *field(struct json_object *o, const char *k)
{
    struct json_object *v = NULL;
    if (!json_object_object_get_ex(o, k, &v) || json_object_is_type(v, json_type_null))
        return NULL;
    return v;
}

static int is_number(struct json_object *v)
{
    return json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int);
}

/* An integer field value (an int, or a double holding an integer). */
static int int_value(struct json_object *v, long long *out)
{
    if (json_object_is_type(v, json_type_int)) {
        errno = 0;
        *out = json_object_get_int64(v);
        return errno == 0;
    }
    if (json_object_is_type(v, json_type_double)) {
        double d = json_object_get_double(v);
        if (isfinite(d) && d == floor(d) && fabs(d) < 9e15) {
            *out = (long long)d;
            return 1;
        }
    }
    return 0;
}

int txm_gen_config_from_object(struct json_object *root, const char *what, int vocab_size,
                               struct glm_generation_config *g, char *err, size_t errsz)
{
    memset(g, 0, sizeof(*g));
    if (!json_object_is_type(root, json_type_object))
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: not a JSON object", what);
    struct json_object *v;
    long long x;
    if ((v = field(root, "eos_token_id"))) {
        if (json_object_is_type(v, json_type_array)) {
            size_t n = json_object_array_length(v);
            if (n == 0 || n > GLM_MAX_EOS)
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "%s: eos_token_id: a list of 1 to %d token ids expected, got %zu",
                                 what, GLM_MAX_EOS, n);
            for (size_t i = 0; i < n; i++) {
                struct json_object *e = json_object_array_get_idx(v, i);
                if (!e || !int_value(e, &x))
                    return tx_errbuf(err, errsz, TX_EINVAL,
                                     "%s: eos_token_id[%zu]: expected an integer token id", what,
                                     i);
                if (x < 0 || x >= (vocab_size > 0 ? vocab_size : GLM_MAX_VOCAB))
                    return tx_errbuf(err, errsz, TX_EINVAL,
                                     "%s: eos_token_id[%zu]: token id %lld outside [0, %d)", what,
                                     i, x, vocab_size > 0 ? vocab_size : GLM_MAX_VOCAB);
                g->eos_token_ids[g->n_eos++] = (int32_t)x;
            }
        } else if (int_value(v, &x)) {
            if (x < 0 || x >= (vocab_size > 0 ? vocab_size : GLM_MAX_VOCAB))
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "%s: eos_token_id: token id %lld outside [0, %d)", what, x,
                                 vocab_size > 0 ? vocab_size : GLM_MAX_VOCAB);
            g->eos_token_ids[g->n_eos++] = (int32_t)x;
        } else {
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: eos_token_id: expected an integer, a list of integers or null",
                             what);
        }
        g->has |= GLM_GEN_HAS_EOS;
    }
    if ((v = field(root, "do_sample"))) {
        if (!json_object_is_type(v, json_type_boolean))
            return tx_errbuf(err, errsz, TX_EINVAL, "%s: do_sample: expected true or false", what);
        g->do_sample = json_object_get_boolean(v) ? 1 : 0;
        g->has |= GLM_GEN_HAS_DO_SAMPLE;
    }
    if ((v = field(root, "temperature"))) {
        double d = is_number(v) ? json_object_get_double(v) : NAN;
        if (!(d >= 0 && d <= GLM_GEN_MAX_TEMPERATURE))
            return tx_errbuf(err, errsz, TX_EINVAL, "%s: temperature: expected a number in [0, %g]",
                             what, (double)GLM_GEN_MAX_TEMPERATURE);
        g->temperature = (float)d;
        g->has |= GLM_GEN_HAS_TEMPERATURE;
    }
    if ((v = field(root, "top_p"))) {
        double d = is_number(v) ? json_object_get_double(v) : NAN;
        if (!(d > 0 && d <= 1))
            return tx_errbuf(err, errsz, TX_EINVAL, "%s: top_p: expected a number in (0, 1]", what);
        g->top_p = (float)d;
        g->has |= GLM_GEN_HAS_TOP_P;
    }
    if ((v = field(root, "top_k"))) {
        if (!int_value(v, &x) || x < 0 || x > GLM_GEN_MAX_TOP_K)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: top_k: expected an integer in [0, %d] (0 = off)", what,
                             GLM_GEN_MAX_TOP_K);
        g->top_k = (int)x;
        g->has |= GLM_GEN_HAS_TOP_K;
    }
    return 0;
}

int txm_gen_config_parse(const char *txt, size_t len, const char *what, int vocab_size,
                         struct glm_generation_config *g, char *err, size_t errsz)
{
    memset(g, 0, sizeof(*g));
    if (len > TXM_GEN_CONFIG_MAX)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: %zu bytes, more than the limit of %u", what,
                         len, TXM_GEN_CONFIG_MAX);
    if (memchr(txt, 0, len) || !txm_json_object_ok(txt, len))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: not a valid JSON object (truncated, or not a "
                         "generation_config.json)",
                         what);
    struct json_object *root = json_tokener_parse(txt);
    if (!root)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: not a valid JSON object", what);
    int rc = txm_gen_config_from_object(root, what, vocab_size, g, err, errsz);
    json_object_put(root);
    return rc;
}

/* A float as the shortest decimal that reads back as it ("0.8", not
 * 0.800000011920929). */
static struct json_object *new_float(float f)
{
    char b[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(b, sizeof(b), "%.*g", prec, (double)f);
        if ((float)strtod(b, NULL) == f)
            break;
    }
    return json_object_new_double_s(strtod(b, NULL), b);
}

struct json_object *txm_gen_config_to_object(const struct glm_generation_config *g)
{
    struct json_object *o = json_object_new_object();
    if (g->has & GLM_GEN_HAS_EOS) {
        struct json_object *a = json_object_new_array();
        for (int i = 0; i < g->n_eos; i++)
            json_object_array_add(a, json_object_new_int(g->eos_token_ids[i]));
        json_object_object_add(o, "eos_token_id", a);
    }
    if (g->has & GLM_GEN_HAS_DO_SAMPLE)
        json_object_object_add(o, "do_sample", json_object_new_boolean(g->do_sample));
    if (g->has & GLM_GEN_HAS_TEMPERATURE)
        json_object_object_add(o, "temperature", new_float(g->temperature));
    if (g->has & GLM_GEN_HAS_TOP_P)
        json_object_object_add(o, "top_p", new_float(g->top_p));
    if (g->has & GLM_GEN_HAS_TOP_K)
        json_object_object_add(o, "top_k", json_object_new_int(g->top_k));
    return o;
}
