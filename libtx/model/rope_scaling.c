// SPDX-License-Identifier: MIT
/*
 * YaRN RoPE scaling: parsing of `rope_scaling`, inv_freq, attention factor
 * and DeepSeek-V3's softmax-scale multiplier (see rope_scaling.h). The
 * formulas follow transformers' modeling_rope_utils._compute_yarn_parameters
 * and DeepseekV3Attention; docs/model-blocks.md ties each step to them.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#include <tx-internal/tx_model_internal.h>
#include "model/rope_scaling.h"

#define CTX "rope_scaling."

void tx_rope_yarn_init(struct tx_rope_yarn *y)
{
    memset(y, 0, sizeof(*y));
    y->factor = 1.0;
    y->beta_fast = 32.0;
    y->beta_slow = 1.0;
    y->truncate = 1;
}

/* A number field: 0 absent or null (*out untouched), 1 read, < 0 error. */
static int num_field(struct json_object *v, const char *key, double *out, char *err, size_t errsz)
{
    enum json_type t = json_object_get_type(v);
    if (t == json_type_null)
        return 0;
    if (t != json_type_int && t != json_type_double)
        return tx_errbuf(err, errsz, TX_EINVAL, CTX "%s: expected a number, got %s", key,
                         json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    double d = t == json_type_int ? (double)json_object_get_int64(v) : json_object_get_double(v);
    if (!isfinite(d))
        return tx_errbuf(err, errsz, TX_EINVAL, CTX "%s: not a finite number", key);
    *out = d;
    return 1;
}

int tx_rope_yarn_parse(const struct json_object *rs, struct tx_rope_yarn *out, char *err,
                       size_t errsz)
{
    struct tx_rope_yarn y;
    int have_type = 0, have_factor = 0, rc;

    if (!out)
        return tx_errbuf(err, errsz, TX_EINVAL, "rope_scaling: NULL result");
    tx_rope_yarn_init(out);
    if (!rs || json_object_get_type(rs) != json_type_object)
        return tx_errbuf(
            err, errsz, TX_EINVAL, "rope_scaling: expected an object, got %s",
            rs ? json_object_to_json_string_ext((struct json_object *)rs, JSON_C_TO_STRING_PLAIN)
               : "nothing");
    tx_rope_yarn_init(&y);
    json_object_object_foreach((struct json_object *)rs, key, v)
    {
        double d;
        if (!strcmp(key, "type") || !strcmp(key, "rope_type")) {
            const char *s =
                json_object_get_type(v) == json_type_string ? json_object_get_string(v) : NULL;
            if (!s || strcmp(s, "yarn"))
                return tx_errbuf(err, errsz, TX_EINVAL, CTX "%s: expected \"yarn\", got %s", key,
                                 json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
            have_type = 1;
        } else if (!strcmp(key, "factor")) {
            rc = num_field(v, key, &y.factor, err, errsz);
            if (rc < 0)
                return rc;
            if (!(y.factor >= 1.0))
                return tx_errbuf(err, errsz, TX_EINVAL, CTX "factor: must be >= 1 (got %g)",
                                 y.factor);
            have_factor = rc;
        } else if (!strcmp(key, "original_max_position_embeddings")) {
            d = 0;
            rc = num_field(v, key, &d, err, errsz);
            if (rc < 0)
                return rc;
            if (rc && (d != floor(d) || d < 1 || d > INT32_MAX))
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 CTX "%s: must be a positive integer (got %s)", key,
                                 json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
            y.original_max_pos = (int)d;
        } else if (!strcmp(key, "beta_fast") || !strcmp(key, "beta_slow")) {
            d = 0;
            rc = num_field(v, key, &d, err, errsz);
            if (rc < 0)
                return rc;
            if (d < 0)
                return tx_errbuf(err, errsz, TX_EINVAL, CTX "%s: must be > 0 (got %g)", key, d);
            if (d > 0) /* transformers: `get(...) or default`: 0 and null default */
                *(key[5] == 'f' ? &y.beta_fast : &y.beta_slow) = d;
        } else if (!strcmp(key, "mscale") || !strcmp(key, "mscale_all_dim")) {
            rc = num_field(v, key, key[6] ? &y.mscale_all_dim : &y.mscale, err, errsz);
            if (rc < 0)
                return rc;
        } else if (!strcmp(key, "attention_factor")) {
            rc = num_field(v, key, &y.attention_factor, err, errsz);
            if (rc < 0)
                return rc;
            if (rc && !(y.attention_factor > 0.0))
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 CTX "attention_factor: must be > 0 (got %g)", y.attention_factor);
            y.has_attention_factor = rc;
        } else if (!strcmp(key, "truncate")) {
            if (json_object_get_type(v) != json_type_boolean)
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 CTX "truncate: expected true or false, got %s",
                                 json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
            y.truncate = json_object_get_boolean(v) ? 1 : 0;
        } else if (!strcmp(key, "rope_theta") || !strcmp(key, "partial_rotary_factor")) {
            /* v5's rope_parameters carries these: the config parser's */
        } else {
            return tx_errbuf(err, errsz, TX_EINVAL,
                             CTX "%s: unknown key (YaRN takes type, factor, "
                                 "original_max_position_embeddings, beta_fast, beta_slow, mscale, "
                                 "mscale_all_dim, attention_factor, truncate)",
                             key);
        }
    }
    if (!have_type)
        return tx_errbuf(err, errsz, TX_EINVAL, CTX "type: missing (expected \"yarn\")");
    if (!have_factor)
        return tx_errbuf(err, errsz, TX_EINVAL, CTX "factor: missing (required for YaRN)");
    if (y.beta_fast < y.beta_slow)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         CTX "beta_fast: %g is below beta_slow %g (the fast boundary rotates more)",
                         y.beta_fast, y.beta_slow);
    *out = y;
    return 0;
}

double tx_rope_yarn_get_mscale(double scale, double mscale)
{
    if (scale <= 1.0)
        return 1.0;
    return 0.1 * mscale * log(scale) + 1.0;
}

/* transformers' find_correction_dim: the dimension index whose wavelength
 * makes num_rotations turns over max_pos positions. */
static double correction_dim(double num_rotations, int dim, double base, double max_pos)
{
    return (dim * log(max_pos / (num_rotations * 2.0 * M_PI))) / (2.0 * log(base));
}

int tx_rope_yarn_inv_freq(const struct tx_rope_yarn *y, double rope_theta, int rotary_dim,
                          int max_pos, float *inv_freq, char *err, size_t errsz)
{
    if (!y || !inv_freq)
        return tx_errbuf(err, errsz, TX_EINVAL, "yarn inv_freq: NULL argument");
    if (rotary_dim <= 0 || rotary_dim % 2)
        return tx_errbuf(err, errsz, TX_EINVAL, "yarn inv_freq: rotary dim %d must be even and > 0",
                         rotary_dim);
    if (!(rope_theta > 1.0) || !isfinite(rope_theta))
        return tx_errbuf(err, errsz, TX_EINVAL, "yarn inv_freq: rope_theta %g must be > 1",
                         rope_theta);
    if (!(y->factor >= 1.0) || !isfinite(y->factor) || !(y->beta_fast > 0) || !(y->beta_slow > 0))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "yarn inv_freq: factor %g (>= 1) or betas %g, %g (> 0) out of range",
                         y->factor, y->beta_fast, y->beta_slow);
    int orig = y->original_max_pos ? y->original_max_pos : max_pos;
    if (orig <= 0)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "yarn inv_freq: no original_max_position_embeddings and "
                         "max_position_embeddings %d",
                         max_pos);
    const int d = rotary_dim, half = d / 2;
    double low = correction_dim(y->beta_fast, d, rope_theta, orig);
    double high = correction_dim(y->beta_slow, d, rope_theta, orig);
    if (y->truncate) {
        low = floor(low);
        high = ceil(high);
    }
    /* clamped to [0, dim - 1] although the ramp spans dim / 2 indexes:
     * transformers' bounds, kept */
    if (low < 0)
        low = 0;
    if (high > d - 1)
        high = d - 1;
    if (low == high)
        high += 0.001; /* transformers: prevent the singularity */
    for (int i = 0; i < half; i++) {
        double pos_freq = pow(rope_theta, (double)(2 * i) / (double)d);
        double extra = 1.0 / pos_freq;               /* inv_freq_extrapolation */
        double inter = 1.0 / (y->factor * pos_freq); /* inv_freq_interpolation */
        double ramp = ((double)i - low) / (high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        double ext_factor = 1.0 - ramp; /* inv_freq_extrapolation_factor */
        inv_freq[i] = (float)(inter * (1.0 - ext_factor) + extra * ext_factor);
    }
    return 0;
}

double tx_rope_yarn_attention_factor(const struct tx_rope_yarn *y)
{
    if (y->has_attention_factor)
        return y->attention_factor;
    if (y->mscale != 0.0 && y->mscale_all_dim != 0.0)
        return tx_rope_yarn_get_mscale(y->factor, y->mscale) /
               tx_rope_yarn_get_mscale(y->factor, y->mscale_all_dim);
    return tx_rope_yarn_get_mscale(y->factor, 1.0);
}

double tx_rope_yarn_softmax_scale_mult(const struct tx_rope_yarn *y)
{
    if (y->mscale_all_dim == 0.0)
        return 1.0;
    double m = tx_rope_yarn_get_mscale(y->factor, y->mscale_all_dim);
    return m * m;
}
