/* SPDX-License-Identifier: MIT */
/*
 * The precision-plan vocabulary of the article's precision API: the names of
 * the layer types and precisions, the golden and uniform plans, the check of
 * one (layer type, precision) pair, and the plan's text form ("golden",
 * "int8", "experts=fp8,attention=fp16") parsed and printed.
 *
 * Pure functions of their arguments, shared by the runtime's per-device plan
 * table (runtime/precision.c) and the export (model/quant.c), so that the
 * model layer never calls into the runtime.
 */
#include "model/precision_plan.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <tx-internal/tx_errors.h>

static const char *const ltype_names[PLAN_NLTYPES] = {
    "embedding", "attention", "mlp", "expert", "norm", "output", "router",
};
static const char *const prec_names[GLM_PRECISION_COUNT] = {"FP32", "FP16", "BF16", "INT8_MIXED",
                                                            "FP8"};

TX_API const char *glm_layer_type_name(glm_layer_type_t t)
{
    if ((unsigned)t >= PLAN_NLTYPES)
        return "?";
    return ltype_names[t];
}

TX_API const char *glm_precision_name(glm_precision_t p)
{
    if ((unsigned)p >= GLM_PRECISION_COUNT)
        return "?";
    return prec_names[p];
}

TX_API void glm_plan_golden(glm_precision_plan_t *plan)
{
    if (!plan)
        return;
    plan->precision[GLM_EMBEDDING] = INT8_MIXED;
    plan->precision[GLM_ATTENTION] = FP16;
    plan->precision[GLM_MLP] = INT8_MIXED;
    plan->precision[GLM_EXPERT] = INT8_MIXED;
    plan->precision[GLM_NORM] = FP32;
    plan->precision[GLM_OUTPUT] = FP32;
}

TX_API void glm_plan_uniform(glm_precision_plan_t *plan, glm_precision_t p)
{
    if (!plan)
        return;
    for (int i = 0; i < GLM_LAYER_TYPE_COUNT; i++)
        plan->precision[i] = p;
    /* norms are computed in f32 and stored F32 by every export: a whole plan
     * ("fp16", "int8", ...) keeps them FP32, in glm-inference and glm-export
     * alike; norm=fp16 / norm=bf16 asks for the rounding explicitly */
    plan->precision[GLM_NORM] = FP32;
    /* "fp8": the projection matrices in FP8, as the FP8 checkpoints store
     * them; the embedding (EMBED has no FP8 table) and lm_head (kept
     * unquantised by those checkpoints) exact in FP32 */
    if (p == GLM_PRECISION_FP8) {
        plan->precision[GLM_EMBEDDING] = FP32;
        plan->precision[GLM_OUTPUT] = FP32;
    }
}

int plan_check_entry(glm_layer_type_t t, glm_precision_t p)
{
    if ((unsigned)t >= GLM_LAYER_TYPE_COUNT)
        return tx_error(TX_EINVAL, "set_layer_precision: layer_type %d is not a GLM layer type",
                        (int)t);
    if ((unsigned)p >= GLM_PRECISION_COUNT)
        return tx_error(TX_EINVAL,
                        "set_layer_precision: precision %d is not FP32, FP16, BF16, "
                        "INT8_MIXED or FP8",
                        (int)p);
    if (p == GLM_PRECISION_FP8 && (t == GLM_EMBEDDING || t == GLM_NORM))
        return tx_error(TX_ENOTSUP,
                        "set_layer_precision: %s cannot be FP8 (FP8 is a weight type of the "
                        "matrix products: attention, mlp, experts, output)",
                        t == GLM_NORM ? "norms" : "the embedding");
    if (t == GLM_NORM && p == INT8_MIXED)
        return tx_error(TX_ENOTSUP, "set_layer_precision: norms cannot run in INT8_MIXED "
                                    "(normalisation is computed in f32; FP16/BF16 round its "
                                    "output)");
    return TX_OK;
}

int plan_precision_parse(const char *s, size_t n)
{
    static const struct {
        const char *name;
        glm_precision_t p;
    } tab[] = {
        {"fp32", FP32},
        {"f32", FP32},
        {"fp16", FP16},
        {"f16", FP16},
        {"bf16", BF16},
        {"int8", INT8_MIXED},
        {"i8", INT8_MIXED},
        {"int8_mixed", INT8_MIXED},
        {"fp8", GLM_PRECISION_FP8},
        {"f8_e4m3", GLM_PRECISION_FP8},
    };
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strlen(tab[i].name) == n && !strncasecmp(s, tab[i].name, n))
            return tab[i].p;
    return TX_NONE;
}

static int ltype_parse(const char *s, size_t n)
{
    static const struct {
        const char *name;
        int t;
    } tab[] = {
        {"embedding", GLM_EMBEDDING},
        {"embed", GLM_EMBEDDING},
        {"attention", GLM_ATTENTION},
        {"attn", GLM_ATTENTION},
        {"mlp", GLM_MLP},
        {"ffn", GLM_MLP},
        {"expert", GLM_EXPERT},
        {"experts", GLM_EXPERT},
        {"norm", GLM_NORM},
        {"norms", GLM_NORM},
        {"output", GLM_OUTPUT},
        {"lm_head", GLM_OUTPUT},
        {"all", -2},
    };
    /* the enum spelling (GLM_MLP, GLM_EXPERT, ...) too */
    if (n > 4 && !strncasecmp(s, "GLM_", 4))
        s += 4, n -= 4;
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strlen(tab[i].name) == n && !strncasecmp(s, tab[i].name, n))
            return tab[i].t;
    return TX_NONE;
}

TX_API int glm_plan_parse(const char *text, glm_precision_plan_t *plan)
{
    if (!text || !plan)
        return tx_error(TX_EINVAL, "glm_plan_parse: NULL argument");
    glm_precision_plan_t p = *plan;
    const char *s = text;
    while (*s) {
        while (*s == ',' || isspace((unsigned char)*s))
            s++;
        if (!*s)
            break;
        const char *end = s;
        while (*end && *end != ',')
            end++;
        const char *eq = memchr(s, '=', (size_t)(end - s));
        size_t n = (size_t)(end - s);
        while (n && isspace((unsigned char)s[n - 1]))
            n--;
        if (!eq) {
            int pr = plan_precision_parse(s, n);
            if (n == 6 && !strncasecmp(s, "golden", 6))
                glm_plan_golden(&p);
            else if (pr >= 0)
                glm_plan_uniform(&p, (glm_precision_t)pr);
            else
                return tx_error(TX_EINVAL,
                                "precision plan: '%.*s' is not golden, fp32, fp16, bf16, int8, "
                                "fp8 or TYPE=PREC",
                                (int)n, s);
        } else {
            size_t kn = (size_t)(eq - s), vn = (size_t)(end - eq - 1);
            const char *v = eq + 1;
            while (kn && isspace((unsigned char)s[kn - 1]))
                kn--;
            while (vn && isspace((unsigned char)*v))
                v++, vn--;
            while (vn && isspace((unsigned char)v[vn - 1]))
                vn--;
            int t = ltype_parse(s, kn);
            int pr = plan_precision_parse(v, vn);
            if (t == -1)
                return tx_error(TX_EINVAL,
                                "precision plan: unknown layer type '%.*s' (embedding, "
                                "attention, mlp, expert, norm, output, all)",
                                (int)kn, s);
            if (pr < 0)
                return tx_error(TX_EINVAL,
                                "precision plan: unknown precision '%.*s' for %.*s (fp32, "
                                "fp16, bf16, int8, fp8)",
                                (int)vn, v, (int)kn, s);
            if (t == -2) {
                glm_plan_uniform(&p, (glm_precision_t)pr);
            } else {
                int rc = plan_check_entry((glm_layer_type_t)t, (glm_precision_t)pr);
                if (rc)
                    return rc;
                p.precision[t] = (glm_precision_t)pr;
            }
        }
        s = end;
    }
    *plan = p;
    return TX_OK;
}

TX_API char *glm_plan_format(const glm_precision_plan_t *plan, char *buf, size_t bufsz)
{
    if (!buf || !bufsz)
        return buf;
    buf[0] = 0;
    if (!plan)
        return buf;
    size_t o = 0;
    for (int i = 0; i < GLM_LAYER_TYPE_COUNT && o < bufsz; i++) {
        int w = snprintf(buf + o, bufsz - o, "%s%s=%s", i ? "," : "",
                         glm_layer_type_name((glm_layer_type_t)i),
                         glm_precision_name(plan->precision[i]));
        if (w < 0)
            break;
        o += (size_t)w;
    }
    return buf;
}

/* Short form used by reports: "golden", "fp32", or the full list. */
const char *plan_short(const glm_precision_plan_t *plan, char *buf, size_t bufsz)
{
    glm_precision_plan_t g;
    glm_plan_golden(&g);
    if (!memcmp(&g, plan, sizeof(g))) {
        snprintf(buf, bufsz, "golden");
        return buf;
    }
    for (int p = 0; p < GLM_PRECISION_COUNT; p++) {
        glm_plan_uniform(&g, (glm_precision_t)p);
        if (!memcmp(&g, plan, sizeof(g))) {
            snprintf(buf, bufsz, "%s",
                     p == INT8_MIXED ? "int8" : glm_precision_name(g.precision[0]));
            for (char *c = buf; *c; c++)
                *c = (char)tolower((unsigned char)*c);
            return buf;
        }
    }
    return glm_plan_format(plan, buf, bufsz);
}
