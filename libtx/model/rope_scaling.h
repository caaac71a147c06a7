/* SPDX-License-Identifier: MIT */
/*
 * YaRN RoPE scaling (private to libtx and its tests): the `rope_scaling`
 * object DeepSeek-V3 / Kimi-K2 checkpoints ship, e.g.
 *
 *   "rope_scaling": {"type": "yarn", "factor": 40,
 *                    "original_max_position_embeddings": 4096,
 *                    "beta_fast": 32, "beta_slow": 1,
 *                    "mscale": 1.0, "mscale_all_dim": 1.0}
 *
 * and the three numbers a forward needs from it, mirroring transformers:
 *  - inv_freq[rotary_dim / 2]  (modeling_rope_utils._compute_yarn_parameters)
 *  - attention_factor, the multiplier of cos and sin (same function, with
 *    its get_mscale(); the device applies it with TX8_ROPE_F_ATTN_FACTOR)
 *  - the softmax-scale multiplier of DeepseekV3Attention:
 *    get_mscale(factor, mscale_all_dim)^2 when mscale_all_dim is non-zero.
 * Formulas and the choices made: docs/model-blocks.md, section 2.
 */
#ifndef TX_ROPE_SCALING_H
#define TX_ROPE_SCALING_H

#include <stddef.h>

struct json_object;

/* Parsed YaRN parameters. Absent optional fields hold their defaults, as
 * transformers reads them (`x.get(...) or default` for the betas). */
struct tx_rope_yarn {
    double factor;           /* required, >= 1 */
    int original_max_pos;    /* original_max_position_embeddings; 0 = absent
                              * (then the model's max_position_embeddings) */
    double beta_fast;        /* default 32 (also when 0 or null) */
    double beta_slow;        /* default 1 (also when 0 or null) */
    double mscale;           /* 0 = absent */
    double mscale_all_dim;   /* 0 = absent */
    double attention_factor; /* explicit value; valid if has_attention_factor */
    int has_attention_factor;
    int truncate; /* default 1: floor/ceil the correction range */
};

/*
 * Parse the json-c object of `rope_scaling` (or v5's `rope_parameters`).
 * Requires "type" or "rope_type" == "yarn" and "factor"; accepts the fields
 * above (null = absent for the optional ones) and ignores "rope_theta" and
 * "partial_rotary_factor" (the config's, read by its parser); any other key
 * is an error. Returns 0, or TX_EINVAL with a
 * message naming the field in err ("rope_scaling.factor: ...").
 */
int tx_rope_yarn_parse(const struct json_object *rs, struct tx_rope_yarn *out, char *err,
                       size_t errsz);

/* The defaults: factor 1, betas 32 / 1, truncate on, nothing else. */
void tx_rope_yarn_init(struct tx_rope_yarn *y);

/* transformers' get_mscale(scale, mscale): 1 if scale <= 1, else
 * 0.1 * mscale * ln(scale) + 1. */
double tx_rope_yarn_get_mscale(double scale, double mscale);

/*
 * inv_freq[0 .. rotary_dim / 2) of YaRN: the blend of extrapolated
 * (1 / base^(2i/d)) and interpolated (that / factor) frequencies through
 * transformers' linear ramp over the correction range of beta_fast,
 * beta_slow at original_max_position_embeddings (max_pos if absent).
 * Computed in double, rounded to float once. rotary_dim even > 0,
 * rope_theta > 1, max_pos > 0 when the original is absent.
 * Returns 0 or TX_EINVAL (message in err).
 */
int tx_rope_yarn_inv_freq(const struct tx_rope_yarn *y, double rope_theta, int rotary_dim,
                          int max_pos, float *inv_freq, char *err, size_t errsz);

/* The cos/sin multiplier: the explicit attention_factor, else
 * get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when both
 * are non-zero, else get_mscale(factor, 1). (DeepSeek-V3's config: 1.0.) */
double tx_rope_yarn_attention_factor(const struct tx_rope_yarn *y);

/* DeepseekV3Attention's multiplier of the softmax scale qk_head_dim^-0.5:
 * get_mscale(factor, mscale_all_dim)^2 if mscale_all_dim != 0, else 1.
 * (DeepSeek-V3's config: (0.1 ln 40 + 1)^2 = 1.87398...) */
double tx_rope_yarn_softmax_scale_mult(const struct tx_rope_yarn *y);

#endif
