/* SPDX-License-Identifier: MIT */
/*
 * The article's precision API: per-device precision plans.
 *
 * set_layer_precision(device, cfg) takes only the device handle, so the plan
 * lives in a process-wide table keyed by the handle (handles are never
 * reused by libtx, so a closed device's entry can never be confused with a
 * new one). Models read their device's plan at the start of every forward
 * pass (rt_plan_of).
 */
#include "runtime/rt_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct plan_entry {
    tx_device_t *dev;
    glm_precision_plan_t plan;
    uint64_t generation; /* bumped at every change */
    struct plan_entry *next;
};

static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static struct plan_entry *plans;

static const char *const ltype_names[RT_NLTYPES] = {
    "embedding", "attention", "mlp", "expert", "norm", "output", "router",
};
static const char *const prec_names[GLM_PRECISION_COUNT] = {"FP32", "FP16", "BF16", "INT8_MIXED",
                                                            "FP8"};

TX_API const char *glm_layer_type_name(glm_layer_type_t t)
{
    if ((unsigned)t >= RT_NLTYPES)
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

static int check_entry(glm_layer_type_t t, glm_precision_t p)
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

static int check_device(tx_device_t *dev)
{
    struct tx_device_info info;
    if (!dev)
        return tx_error(TX_EINVAL, "set_layer_precision: device is NULL");
    int rc = tx_device_info(dev, &info);
    if (rc)
        return tx_error(rc, "set_layer_precision: not an open device (%s)", tx_last_error());
    return TX_OK;
}

/* Entry of dev, created with the golden plan if absent; plans_lock held. */
static struct plan_entry *entry_of(tx_device_t *dev, int create)
{
    for (struct plan_entry *e = plans; e; e = e->next)
        if (e->dev == dev)
            return e;
    if (!create)
        return NULL;
    struct plan_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->dev = dev;
    glm_plan_golden(&e->plan);
    e->generation = 1;
    e->next = plans;
    plans = e;
    return e;
}

TX_API int set_layer_precision(tx_device_t *device, glm_layer_config_t cfg)
{
    int rc = check_entry(cfg.layer_type, cfg.precision);
    if (rc)
        return rc;
    rc = check_device(device);
    if (rc)
        return rc;
    pthread_mutex_lock(&plans_lock);
    struct plan_entry *e = entry_of(device, 1);
    if (e && e->plan.precision[cfg.layer_type] != cfg.precision) {
        e->plan.precision[cfg.layer_type] = cfg.precision;
        e->generation++;
    }
    pthread_mutex_unlock(&plans_lock);
    if (!e)
        return tx_error(TX_ENOMEM, "set_layer_precision: out of memory");
    rt_debug("precision: %s = %s", glm_layer_type_name(cfg.layer_type),
             glm_precision_name(cfg.precision));
    return TX_OK;
}

TX_API glm_precision_t get_layer_precision(tx_device_t *device, glm_layer_type_t type)
{
    glm_precision_plan_t p;
    if ((unsigned)type >= GLM_LAYER_TYPE_COUNT)
        return FP32;
    rt_plan_of(device, &p, NULL);
    return p.precision[type];
}

TX_API int glm_plan_set(tx_device_t *device, const glm_precision_plan_t *plan)
{
    if (!plan)
        return tx_error(TX_EINVAL, "glm_plan_set: plan is NULL");
    for (int i = 0; i < GLM_LAYER_TYPE_COUNT; i++) {
        int rc = check_entry((glm_layer_type_t)i, plan->precision[i]);
        if (rc)
            return rc;
    }
    int rc = check_device(device);
    if (rc)
        return rc;
    pthread_mutex_lock(&plans_lock);
    struct plan_entry *e = entry_of(device, 1);
    if (e && memcmp(&e->plan, plan, sizeof(*plan))) {
        e->plan = *plan;
        e->generation++;
    }
    pthread_mutex_unlock(&plans_lock);
    if (!e)
        return tx_error(TX_ENOMEM, "glm_plan_set: out of memory");
    return TX_OK;
}

TX_API int glm_plan_get(tx_device_t *device, glm_precision_plan_t *plan)
{
    if (!plan)
        return tx_error(TX_EINVAL, "glm_plan_get: plan is NULL");
    rt_plan_of(device, plan, NULL);
    return TX_OK;
}

void rt_plan_of(tx_device_t *dev, glm_precision_plan_t *plan, uint64_t *generation)
{
    pthread_mutex_lock(&plans_lock);
    struct plan_entry *e = entry_of(dev, 0);
    if (e) {
        *plan = e->plan;
        if (generation)
            *generation = e->generation;
    } else {
        glm_plan_golden(plan);
        if (generation)
            *generation = 0;
    }
    pthread_mutex_unlock(&plans_lock);
}

int rt_precision_parse(const char *s, size_t n)
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
            int pr = rt_precision_parse(s, n);
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
            int pr = rt_precision_parse(v, vn);
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
                int rc = check_entry((glm_layer_type_t)t, (glm_precision_t)pr);
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
const char *rt_plan_short(const glm_precision_plan_t *plan, char *buf, size_t bufsz)
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
