/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: expert load balancing (article 5.1) and the expert parallel
 * settings of config/expert_parallel.yaml (article 7).
 *
 * The device keeps one u64 counter per (MoE layer, expert) in the model's
 * meta buffer; every MOE_ROUTE adds one per selection (TX8_ROUTE_F_COUNT).
 * With balancing on, MOE_ROUTE subtracts lambda * load[e] from the selection
 * score (TX8_ROUTE_F_LOAD_PENALTY) -- the article's `score -= 0.2 * load` --
 * with load = the expert's utilisation (count / mean count); the device's
 * load is the share count / sum, so the graph passes lambda * experts. The
 * gate weights stay the unbiased sigmoid scores, as for the correction bias.
 *
 * Meaning of the YAML keys on one device (docs/libtx-glm.md):
 *   expert_parallel  experts are split into this many contiguous groups (the
 *                    units an expert-parallel deployment places on separate
 *                    devices); the runtime reports each MoE layer's group
 *                    imbalance = max group load / mean group load. Must
 *                    divide n_routed_experts.
 *   capacity_factor  capacity of one expert in one forward pass =
 *                    ceil(capacity_factor * tokens * top_k / experts);
 *                    selections beyond it are counted as overflow per layer
 *                    (not dropped: dropping would change the model's output).
 *                    0 = unlimited.
 *   min_expert_util  an expert whose utilisation (count / mean count of its
 *                    layer) is below this is "cold"; cold experts are
 *                    counted per layer and, with load_balance: auto, switch
 *                    the load penalty on in that layer.
 */
#include "runtime/rt_internal.h"
#include "runtime/expert_cache.h"

#include "profile/profile_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#define GLM_MOE_YAML_MAX (1 << 20) /* bytes of config/expert_parallel.yaml */

TX_API void glm_moe_defaults(struct glm_moe_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof(*o));
    o->balance = GLM_BALANCE_OFF;
    o->lambda = 0.2f;
    o->expert_parallel = 1;
    o->capacity_factor = 0.0f;
    o->min_expert_util = 0.3f;
}

static int check_opts(const struct glm_moe_options *o, const char *where)
{
    if ((unsigned)o->balance > GLM_BALANCE_AUTO)
        return tx_error(TX_EINVAL, "%s: load_balance must be off, on or auto", where);
    if (!(o->lambda >= 0.0f) || !isfinite(o->lambda))
        return tx_error(TX_EINVAL, "%s: lambda must be a finite number >= 0", where);
    if (o->expert_parallel < 1)
        return tx_error(TX_EINVAL, "%s: expert_parallel must be >= 1", where);
    if (!(o->capacity_factor >= 0.0f) || !isfinite(o->capacity_factor))
        return tx_error(TX_EINVAL, "%s: capacity_factor must be >= 0 (0 = unlimited)", where);
    if (!(o->min_expert_util >= 0.0f && o->min_expert_util <= 1.0f))
        return tx_error(TX_EINVAL, "%s: min_expert_util must be in [0, 1]", where);
    return TX_OK;
}

static int parse_num(const char *path, const char *key, const char *v, double lo, double hi,
                     int integer, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(d))
        return tx_error(TX_EINVAL, "%s: moe.%s: '%s' is not a number", path, key, v);
    if (integer && d != floor(d))
        return tx_error(TX_EINVAL, "%s: moe.%s: '%s' is not an integer", path, key, v);
    if (d < lo || d > hi)
        return tx_error(TX_EINVAL, "%s: moe.%s: %s is outside [%g, %g]", path, key, v, lo, hi);
    *out = d;
    return TX_OK;
}

TX_API int glm_moe_config_load(const char *path, struct glm_moe_options *o)
{
    if (!path || !o)
        return tx_error(TX_EINVAL, "glm_moe_config_load: NULL argument");
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return tx_error(tx_errno_code(errno), "%s: %s", path, strerror(errno));
    /* the file is a few lines: a limit keeps libyaml's work (linear in the
     * size: it keeps explicit stacks, no recursion) small */
    struct stat st;
    if (fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > GLM_MOE_YAML_MAX) {
        fclose(fp);
        return tx_error(TX_EINVAL, "%s: %lld bytes exceeds the limit %d for this file", path,
                        (long long)st.st_size, GLM_MOE_YAML_MAX);
    }
    yaml_parser_t p;
    yaml_document_t doc;
    int rc = TX_OK;
    if (!yaml_parser_initialize(&p)) {
        fclose(fp);
        return tx_error(TX_ENOMEM, "%s: libyaml: out of memory", path);
    }
    yaml_parser_set_input_file(&p, fp);
    if (!yaml_parser_load(&p, &doc)) {
        rc = tx_error(TX_EINVAL, "%s:%zu:%zu: YAML error: %s", path, p.problem_mark.line + 1,
                      p.problem_mark.column + 1, p.problem ? p.problem : "malformed");
        yaml_parser_delete(&p);
        fclose(fp);
        return rc;
    }
    struct glm_moe_options n = *o;
    int found = 0;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        rc = tx_error(TX_EINVAL, "%s: empty YAML document (expected a 'moe:' mapping)", path);
        goto out;
    }
    if (root->type != YAML_MAPPING_NODE) {
        rc = tx_error(TX_EINVAL, "%s: the document is not a mapping (expected 'moe:')", path);
        goto out;
    }
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start;
         pr < root->data.mapping.pairs.top && !rc; pr++) {
        yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
        if (!k || k->type != YAML_SCALAR_NODE || strcmp((char *)k->data.scalar.value, "moe"))
            continue;
        found = 1;
        if (!v || v->type != YAML_MAPPING_NODE) {
            rc = tx_error(TX_EINVAL, "%s: 'moe' must be a mapping", path);
            break;
        }
        for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top;
             q++) {
            yaml_node_t *kk = yaml_document_get_node(&doc, q->key);
            yaml_node_t *vv = yaml_document_get_node(&doc, q->value);
            if (!kk || kk->type != YAML_SCALAR_NODE) {
                rc = tx_error(TX_EINVAL, "%s: a key under 'moe' is not a scalar", path);
                break;
            }
            const char *key = (const char *)kk->data.scalar.value;
            if (!vv || vv->type != YAML_SCALAR_NODE) {
                rc = tx_error(TX_EINVAL, "%s: moe.%s must be a scalar value", path, key);
                break;
            }
            const char *val = (const char *)vv->data.scalar.value;
            double d = 0;
            if (!strcmp(key, "expert_parallel")) {
                rc = parse_num(path, key, val, 1, 65536, 1, &d);
                n.expert_parallel = (int)d;
            } else if (!strcmp(key, "capacity_factor")) {
                rc = parse_num(path, key, val, 0, 1e6, 0, &d);
                n.capacity_factor = (float)d;
            } else if (!strcmp(key, "min_expert_util")) {
                rc = parse_num(path, key, val, 0, 1, 0, &d);
                n.min_expert_util = (float)d;
            } else if (!strcmp(key, "lambda") || !strcmp(key, "load_balance_lambda")) {
                rc = parse_num(path, key, val, 0, 1e6, 0, &d);
                n.lambda = (float)d;
            } else if (!strcmp(key, "load_balance")) {
                if (!strcasecmp(val, "on") || !strcasecmp(val, "true") || !strcasecmp(val, "yes") ||
                    !strcmp(val, "1"))
                    n.balance = GLM_BALANCE_ON;
                else if (!strcasecmp(val, "off") || !strcasecmp(val, "false") ||
                         !strcasecmp(val, "no") || !strcmp(val, "0"))
                    n.balance = GLM_BALANCE_OFF;
                else if (!strcasecmp(val, "auto"))
                    n.balance = GLM_BALANCE_AUTO;
                else
                    rc = tx_error(TX_EINVAL, "%s: moe.load_balance: '%s' is not on, off or auto",
                                  path, val);
            } else {
                rc = tx_error(TX_EINVAL,
                              "%s: unknown key moe.%s (expert_parallel, capacity_factor, "
                              "min_expert_util, load_balance, lambda)",
                              path, key);
            }
            if (rc)
                break;
        }
    }
    if (!rc && !found)
        rc = tx_error(TX_EINVAL, "%s: no 'moe:' mapping", path);
    if (!rc)
        rc = check_opts(&n, path);
    if (!rc)
        *o = n;
out:
    yaml_document_delete(&doc);
    yaml_parser_delete(&p);
    fclose(fp);
    return rc;
}

TX_API int glm_model_set_moe(glm_model_t *m, const struct glm_moe_options *o)
{
    if (!m || !o)
        return tx_error(TX_EINVAL, "glm_model_set_moe: NULL argument");
    int rc = check_opts(o, "glm_model_set_moe");
    if (rc)
        return rc;
    int E = m->cfg.n_routed_experts;
    if (m->n_moe_layers && E % o->expert_parallel)
        return tx_error(TX_EINVAL,
                        "expert_parallel %d does not divide the model's %d routed experts",
                        o->expert_parallel, E);
    pthread_mutex_lock(&m->lock);
    m->moe = *o;
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}

TX_API int glm_model_get_moe(const glm_model_t *m, struct glm_moe_options *o)
{
    if (!m || !o)
        return tx_error(TX_EINVAL, "glm_model_get_moe: NULL argument");
    *o = m->moe;
    return TX_OK;
}

static const uint64_t *dev_counts(const glm_model_t *m)
{
    return (const uint64_t *)((const uint8_t *)m->meta_map + m->counts_off);
}

/* After a pass of T rows (model lock held): per-pass overflow against the
 * capacity, cold-expert detection for AUTO balancing. */
void rt_moe_after_pass(glm_model_t *m, int T)
{
    int E = m->cfg.n_routed_experts, K = m->cfg.num_experts_per_tok;
    if (!m->n_moe_layers || E <= 0)
        return;
    const uint64_t *cnt = dev_counts(m);
    uint64_t cap = 0;
    if (m->moe.capacity_factor > 0)
        cap = (uint64_t)ceil((double)m->moe.capacity_factor * T * K / E);
    /* the profiler's expert table: this pass's selections (profiling only) */
    uint64_t *sel = tx_profile_enabled() ? malloc((size_t)m->n_moe_layers * E * sizeof(*sel))
                                         : NULL;
    for (int i = 0; i < m->n_moe_layers; i++) {
        const uint64_t *c = cnt + (size_t)i * E;
        uint64_t *prev = m->counts_prev + (size_t)i * E;
        uint64_t total = 0;
        for (int e = 0; e < E; e++) {
            uint64_t d = c[e] - prev[e];
            if (sel)
                sel[(size_t)i * E + e] = d;
            if (cap && d > cap)
                m->overflow[i] += d - cap;
            prev[e] = c[e];
            total += c[e];
        }
        int cold = 0;
        if (total) {
            double mean = (double)total / E;
            for (int e = 0; e < E; e++)
                if ((double)c[e] / mean < m->moe.min_expert_util)
                    cold = 1;
        }
        m->cold_layer[i] = cold;
    }
    if (sel) {
        struct rt_xcache *xc = m->xc;
        txp_experts_add(m, m->name, m->n_moe_layers, m->moe_layer, E, K, sel,
                        xc ? xc->p_hit : NULL, xc ? xc->p_miss : NULL);
        if (xc && xc->p_hit) {
            memset(xc->p_hit, 0, (size_t)m->n_moe_layers * E * sizeof(uint64_t));
            memset(xc->p_miss, 0, (size_t)m->n_moe_layers * E * sizeof(uint64_t));
        }
        free(sel);
    }
    rt_telemetry_publish(m, 0);
}

TX_API int glm_model_expert_stats(glm_model_t *m, struct glm_expert_stats **out)
{
    if (!m || !out)
        return tx_error(TX_EINVAL, "glm_model_expert_stats: NULL argument");
    *out = NULL;
    int n = m->n_moe_layers, E = m->cfg.n_routed_experts;
    struct glm_expert_stats *st = calloc(1, sizeof(*st));
    if (!st)
        return tx_error(TX_ENOMEM, "out of memory");
    size_t nn = (size_t)(n ? n : 1), ne = (size_t)(E > 0 ? E : 1);
    st->layer = calloc(nn, sizeof(int));
    st->counts = calloc(nn * ne, sizeof(uint64_t));
    st->util_std = calloc(nn, sizeof(double));
    st->max_share = calloc(nn, sizeof(double));
    st->min_share = calloc(nn, sizeof(double));
    st->cold = calloc(nn, sizeof(int));
    st->group_imbalance = calloc(nn, sizeof(double));
    st->overflow = calloc(nn, sizeof(uint64_t));
    if (!st->layer || !st->counts || !st->util_std || !st->max_share || !st->min_share ||
        !st->cold || !st->group_imbalance || !st->overflow) {
        glm_expert_stats_free(st);
        return tx_error(TX_ENOMEM, "out of memory");
    }
    pthread_mutex_lock(&m->lock);
    st->n_moe_layers = n;
    st->n_experts = E;
    st->top_k = m->cfg.num_experts_per_tok;
    st->expert_parallel = m->moe.expert_parallel;
    int P =
        m->moe.expert_parallel > 0 && E % m->moe.expert_parallel == 0 ? m->moe.expert_parallel : 1;
    if (n && E > 0)
        memcpy(st->counts, dev_counts(m), (size_t)n * (size_t)E * sizeof(uint64_t));
    for (int i = 0; i < n; i++)
        st->overflow[i] = m->overflow[i];
    float cold_t = m->moe.min_expert_util;
    pthread_mutex_unlock(&m->lock);

    double all_s = 0, all_s2 = 0;
    uint64_t all_n = 0;
    double sum_std = 0;
    for (int i = 0; i < n; i++) {
        st->layer[i] = m->moe_layer[i];
        const uint64_t *c = st->counts + (size_t)i * E;
        uint64_t tot = 0, mx = 0, mn = UINT64_MAX;
        for (int e = 0; e < E; e++) {
            tot += c[e];
            if (c[e] > mx)
                mx = c[e];
            if (c[e] < mn)
                mn = c[e];
        }
        st->total += tot;
        if (!tot)
            continue;
        double mean = (double)tot / E, s2 = 0;
        for (int e = 0; e < E; e++) {
            double u = (double)c[e] / mean;
            s2 += (u - 1.0) * (u - 1.0);
            all_s += u;
            all_s2 += u * u;
            all_n++;
            if (u < cold_t)
                st->cold[i]++;
        }
        st->util_std[i] = sqrt(s2 / E) * 100.0;
        sum_std += st->util_std[i];
        st->max_share[i] = 100.0 * (double)mx / (double)tot;
        st->min_share[i] = 100.0 * (double)mn / (double)tot;
        double gmax = 0, gsum = 0;
        for (int gi = 0; gi < P; gi++) {
            double gl = 0;
            for (int e = gi * (E / P); e < (gi + 1) * (E / P); e++)
                gl += (double)c[e];
            gsum += gl;
            if (gl > gmax)
                gmax = gl;
        }
        st->group_imbalance[i] = gsum > 0 ? gmax / (gsum / P) : 0;
    }
    if (all_n) {
        double mean = all_s / (double)all_n;
        double var = all_s2 / (double)all_n - mean * mean;
        st->overall_std = var > 0 ? sqrt(var) * 100.0 : 0;
    }
    st->mean_layer_std = n ? sum_std / n : 0;
    *out = st;
    return TX_OK;
}

TX_API void glm_expert_stats_free(struct glm_expert_stats *st)
{
    if (!st)
        return;
    free(st->layer);
    free(st->counts);
    free(st->util_std);
    free(st->max_share);
    free(st->min_share);
    free(st->cold);
    free(st->group_imbalance);
    free(st->overflow);
    free(st);
}

TX_API int glm_model_expert_stats_reset(glm_model_t *m)
{
    if (!m)
        return tx_error(TX_EINVAL, "glm_model_expert_stats_reset: model is NULL");
    int E = m->cfg.n_routed_experts;
    pthread_mutex_lock(&m->lock);
    if (m->n_moe_layers && E > 0) {
        memset((uint8_t *)m->meta_map + m->counts_off, 0, (size_t)m->n_moe_layers * (size_t)E * 8);
        memset(m->counts_prev, 0, (size_t)m->n_moe_layers * (size_t)E * 8);
        memset(m->overflow, 0, (size_t)m->n_moe_layers * 8);
        memset(m->cold_layer, 0, (size_t)m->n_moe_layers * sizeof(int));
        rt_telemetry_publish(m, 1);
    }
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}
