/* SPDX-License-Identifier: MIT */
/* Architecture analysis (glm-analyze). */
#include <tx-internal/tx_model_internal.h>

#include <tx-internal/tx_arch.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx-internal/tx_analyze.h>
#include <tx-internal/tx_checkpoint.h>
#include <tx-internal/tx_smd.h>
#include <tx8/tx8_hw.h>

#include "common/arch_tools.h"

const char *tx_module_kind_name(enum tx_module_kind k)
{
    static const char *const n[TX_MOD_COUNT] = {"embedding",      "attention",      "dense_mlp",
                                                "routed_experts", "shared_experts", "router",
                                                "norms",          "output"};
    return (unsigned)k < TX_MOD_COUNT ? n[k] : "?";
}

int64_t tx_parse_size(const char *s)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || v < 0)
        return -1;
    double m = 1;
    switch (toupper((unsigned char)*end)) {
    case 0:
        break;
    case 'K':
        m = 1024.0;
        break;
    case 'M':
        m = 1024.0 * 1024;
        break;
    case 'G':
        m = 1024.0 * 1024 * 1024;
        break;
    case 'T':
        m = 1024.0 * 1024 * 1024 * 1024;
        break;
    default:
        return -1;
    }
    if (*end) {
        end++;
        if (toupper((unsigned char)*end) == 'I')
            end++;
        if (toupper((unsigned char)*end) == 'B')
            end++;
        if (*end)
            return -1;
    }
    v *= m;
    if (v > 9.0e18)
        return -1;
    return (int64_t)v;
}

static enum tx_module_kind kind_of(const struct glm_tensor_info *t)
{
    switch (t->role) {
    case GLM_T_EMBED:
        return TX_MOD_EMBEDDING;
    case GLM_T_LM_HEAD:
        return TX_MOD_OUTPUT;
    case GLM_T_MLP_GATE:
    case GLM_T_MLP_UP:
    case GLM_T_MLP_DOWN:
        return TX_MOD_DENSE_MLP;
    case GLM_T_EXP_GATE:
    case GLM_T_EXP_UP:
    case GLM_T_EXP_DOWN:
        return TX_MOD_ROUTED_EXPERTS;
    case GLM_T_SHEXP_GATE:
    case GLM_T_SHEXP_UP:
    case GLM_T_SHEXP_DOWN:
        return TX_MOD_SHARED_EXPERTS;
    case GLM_T_ROUTER:
    case GLM_T_ROUTER_BIAS:
        return TX_MOD_ROUTER;
    default:
        return t->cls == GLM_TC_NORM ? TX_MOD_NORMS : TX_MOD_ATTENTION;
    }
}

/* Stored bytes of a tensor at a precision (0 FP32, 1 FP16/BF16, 2 INT8
 * with per-row scales); 1-D tensors and the router are always F32. */
static uint64_t stored_bytes(const struct glm_tensor_info *t, int prec)
{
    uint64_t n = (uint64_t)t->shape[0] * (t->ndim == 2 ? (uint64_t)t->shape[1] : 1);
    if (t->ndim != 2 || t->cls == GLM_TC_ROUTER || t->cls == GLM_TC_NORM || prec == 0)
        return n * 4;
    if (prec == 1)
        return n * 2;
    return n + (uint64_t)t->shape[0] * 4;
}

/* golden: embedding INT8, attention FP16, MLP/experts INT8, output FP32 */
static int golden_prec(const struct glm_tensor_info *t)
{
    switch (t->cls) {
    case GLM_TC_EMBEDDING:
    case GLM_TC_MLP:
    case GLM_TC_EXPERT:
        return 2;
    case GLM_TC_ATTENTION:
        return 1;
    default:
        return 0;
    }
}

struct acc {
    struct tx_analysis *a;
    const struct glm_config *c;
    /* per layer: attention matrix MACs, attention+norm golden bytes, FFN
     * golden bytes (dense MLP / shared / one routed expert / router) */
    double *attn_macs, *attn_bytes, *mlp_bytes, *shared_bytes, *expert_bytes, *router_bytes;
    double *ffn_macs_dense, *shared_macs;
    double embed_row_bytes, final_bytes, lm_macs;
};

static int acc_cb(void *ctx, const struct glm_tensor_info *t)
{
    struct acc *x = ctx;
    struct tx_analysis *a = x->a;
    uint64_t n = (uint64_t)t->shape[0] * (t->ndim == 2 ? (uint64_t)t->shape[1] : 1);
    enum tx_module_kind k = kind_of(t);
    a->params[k] += n;
    a->total_params += n;
    a->bytes_fp32 += stored_bytes(t, 0);
    a->bytes_fp16 += stored_bytes(t, 1);
    a->bytes_int8 += stored_bytes(t, 2);
    uint64_t gb = stored_bytes(t, golden_prec(t));
    a->bytes_golden += gb;
    int l = t->layer;
    if (l < 0) {
        if (k == TX_MOD_EMBEDDING)
            x->embed_row_bytes = (double)gb / (double)t->shape[0];
        else
            x->final_bytes += (double)gb;
        if (k == TX_MOD_OUTPUT)
            x->lm_macs += (double)n;
        return 0;
    }
    int mat = t->ndim == 2;
    switch (k) {
    case TX_MOD_ATTENTION:
        if (mat)
            x->attn_macs[l] += (double)n;
        x->attn_bytes[l] += (double)gb;
        break;
    case TX_MOD_NORMS:
        x->attn_bytes[l] += (double)gb;
        break;
    case TX_MOD_DENSE_MLP:
        x->ffn_macs_dense[l] += (double)n;
        x->mlp_bytes[l] += (double)gb;
        break;
    case TX_MOD_SHARED_EXPERTS:
        x->shared_macs[l] += (double)n;
        x->shared_bytes[l] += (double)gb;
        break;
    case TX_MOD_ROUTED_EXPERTS:
        if (t->expert == 0)
            x->expert_bytes[l] += (double)gb; /* one expert's three matrices */
        break;
    case TX_MOD_ROUTER:
        x->router_bytes[l] += (double)gb;
        break;
    default:
        break;
    }
    return 0;
}

void tx_analysis_free(struct tx_analysis *a)
{
    free(a->layers);
    a->layers = NULL;
}

int tx_analyze_config(const struct glm_config *c, int seq_len, int ctx_len, uint64_t device_memory,
                      struct tx_analysis *a, char *err, size_t errsz)
{
    memset(a, 0, sizeof(*a));
    if (seq_len < 1 || ctx_len < 1)
        return tx_errbuf(err, errsz, TX_EINVAL, "sequence and context lengths must be positive");
    const int L = c->num_hidden_layers;
    a->arch = c->arch;
    a->seq_len = seq_len;
    a->ctx_len = ctx_len;
    a->device_memory = device_memory;
    a->nlayers = L;
    a->layers = calloc((size_t)L + 1, sizeof(*a->layers));
    double *buf = calloc(8 * ((size_t)L + 1), sizeof(double));
    if (!a->layers || !buf) {
        free(buf);
        tx_analysis_free(a);
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    }
    struct acc x = {.a = a, .c = c};
    x.attn_macs = buf;
    x.attn_bytes = buf + (L + 1);
    x.mlp_bytes = buf + 2 * (L + 1);
    x.shared_bytes = buf + 3 * (L + 1);
    x.expert_bytes = buf + 4 * (L + 1);
    x.router_bytes = buf + 5 * (L + 1);
    x.ffn_macs_dense = buf + 6 * (L + 1);
    x.shared_macs = buf + 7 * (L + 1);
    int rc = glm_config_tensor_list(c, acc_cb, &x);
    if (rc < 0) {
        free(buf);
        tx_analysis_free(a);
        return tx_errbuf(err, errsz, rc, "cannot list the tensors of the config");
    }
    a->bytes_bf16 = a->bytes_fp16;
    const double E = c->n_routed_experts, K = c->num_experts_per_tok, H = c->hidden_size;
    a->active_params = a->total_params - a->params[TX_MOD_ROUTED_EXPERTS] +
                       (E > 0 ? (uint64_t)llround(a->params[TX_MOD_ROUTED_EXPERTS] * K / E) : 0);
    a->expert_parallel = c->n_routed_experts / 2 > 0 ? c->n_routed_experts / 2 : 1;
    /* the attention's KV cache and per-pair cost: the architecture's */
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    struct tx_arch_cost ac;
    memset(&ac, 0, sizeof(ac));
    const struct tx_arch_tools *tools = tx_arch_tools_get(c->arch);
    if (tools)
        tools->cost(c, &ac);
    /* KV cache per token and layer, bytes */
    const double kv_layer = ac.kv_layer, kv_latent = ac.kv_latent;
    a->kv_bytes_per_token = (uint64_t)(kv_layer * L);
    a->kv_latent_bytes_per_token = (uint64_t)(kv_latent * L);
    a->kv_expanded_bytes_per_token = (uint64_t)(ac.kv_expanded * L);
    {
        /* per cache type: bytes per element of K/V; the selector keys are
         * f32 beside an f32 cache, q8_0 otherwise (when 32 | width) */
        static const double bpe[TX_KV_TYPE_COUNT] = {4, 2, 2, 34.0 / 32, 18.0 / 32};
        int nsel = 0;
        for (int l = 0; l < L; l++)
            nsel += arch && arch->layer_selects(c, l);
        double ikq = (int)ac.ik_elems % 32 == 0 ? ac.ik_elems / 32.0 * 34.0 : ac.ik_elems * 4.0;
        for (int t = 0; t < TX_KV_TYPE_COUNT; t++) {
            int block = t >= TX_KV_Q8_0;
            if (block && ac.kv_run % 32) {
                a->kv_type_bytes_per_token[t] = 0;
                a->kv_type_bytes_per_token_layer[t] = 0;
                a->kv_type_max_ctx[t] = 0;
                continue;
            }
            double ik = t == TX_KV_F32 ? ac.ik_elems * 4.0 : ikq;
            double tok = ac.kv_elems * bpe[t] * L + ik * nsel;
            a->kv_type_bytes_per_token[t] = (uint64_t)llround(tok);
            a->kv_type_bytes_per_token_layer[t] = L > 0 ? tok / L : 0;
            a->kv_type_max_ctx[t] = 0; /* set once the golden weight bytes are known */
        }
    }
    const double S = seq_len;
    const double pair_macs = ac.pair_macs;
    const double idx_pair_macs = ac.sel_pair_macs;
    double causal = S * (S + 1) / 2, attended = causal;
    if (ac.select_k > 0 && ac.select_k < seq_len) {
        double k = ac.select_k;
        attended = k * (k + 1) / 2 + (S - k) * k;
    }
    double dec_keys = S + 1;
    double dec_att = ac.select_k > 0 && ac.select_k < dec_keys ? ac.select_k : dec_keys;
    for (int l = 0; l < L; l++) {
        struct tx_layer_cost *lc = &a->layers[l];
        lc->layer = l;
        lc->moe = c->mlp_layer_types[l] == GLM_MLP_SPARSE;
        int full_idx = arch && arch->layer_selects(c, l);
        double ap = x.attn_macs[l];
        lc->attn_prefill_flops =
            2 * (S * ap + attended * pair_macs + (full_idx ? causal * idx_pair_macs : 0));
        lc->attn_decode_flops =
            2 * (ap + dec_att * pair_macs + (full_idx ? dec_keys * idx_pair_macs : 0));
        double ffn_tok, ffn_pre_bytes, ffn_dec_bytes;
        if (lc->moe) {
            double em = 3.0 * H * c->moe_intermediate_size;
            ffn_tok = E * H + K * em + x.shared_macs[l];
            double touched = E > 0 ? E * (1 - pow(1 - K / E, S)) : 0;
            ffn_pre_bytes = x.router_bytes[l] + touched * x.expert_bytes[l] + x.shared_bytes[l];
            ffn_dec_bytes = x.router_bytes[l] + K * x.expert_bytes[l] + x.shared_bytes[l];
        } else {
            ffn_tok = x.ffn_macs_dense[l];
            ffn_pre_bytes = ffn_dec_bytes = x.mlp_bytes[l];
        }
        lc->ffn_prefill_flops = 2 * S * ffn_tok;
        lc->ffn_decode_flops = 2 * ffn_tok;
        lc->prefill_flops = lc->attn_prefill_flops + lc->ffn_prefill_flops;
        lc->decode_flops = lc->attn_decode_flops + lc->ffn_decode_flops;
        /* KV: prefill writes S entries and reads them back; decode reads S
         * cached entries and writes one */
        lc->prefill_bytes = x.attn_bytes[l] + ffn_pre_bytes + 2 * S * kv_layer;
        lc->decode_bytes = x.attn_bytes[l] + ffn_dec_bytes + dec_keys * kv_layer;
        a->prefill_flops += lc->prefill_flops;
        a->decode_flops += lc->decode_flops;
        a->prefill_bytes += lc->prefill_bytes;
        a->decode_bytes += lc->decode_bytes;
    }
    /* embedding rows, final norm and lm_head (last position only) */
    a->prefill_flops += 2 * x.lm_macs;
    a->decode_flops += 2 * x.lm_macs;
    a->prefill_bytes += S * x.embed_row_bytes + x.final_bytes;
    a->decode_bytes += x.embed_row_bytes + x.final_bytes;
    /* the longest context beside the golden weights, per cache type */
    uint64_t usable = device_memory > TX8_CTRL_SIZE ? device_memory - TX8_CTRL_SIZE : 0;
    for (int t = 0; t < TX_KV_TYPE_COUNT; t++)
        a->kv_type_max_ctx[t] =
            a->kv_type_bytes_per_token[t] && usable > a->bytes_golden
                ? (usable - a->bytes_golden) / a->kv_type_bytes_per_token[t]
                : 0;
    free(buf);
    return 0;
}

/* ---- report ------------------------------------------------------------- */

static void jnum(struct json_object *o, const char *k, double v)
{
    json_object_object_add(o, k, json_object_new_double(v));
}
static void jint(struct json_object *o, const char *k, int64_t v)
{
    json_object_object_add(o, k, json_object_new_int64(v));
}
static void jstr(struct json_object *o, const char *k, const char *v)
{
    json_object_object_add(o, k, json_object_new_string(v));
}
static void jbool(struct json_object *o, const char *k, int v)
{
    json_object_object_add(o, k, json_object_new_boolean(v));
}

static uint64_t need_bytes(const struct tx_analysis *a, uint64_t weights)
{
    /* weights + KV cache for ctx_len tokens (batch 1) */
    return weights + a->kv_bytes_per_token * (uint64_t)a->ctx_len;
}

static int fits(const struct tx_analysis *a, uint64_t weights)
{
    uint64_t usable = a->device_memory > TX8_CTRL_SIZE ? a->device_memory - TX8_CTRL_SIZE : 0;
    return need_bytes(a, weights) <= usable;
}

/* the MTP (NextN) layer's tensors and parameters, from the catalogue */
struct mtp_count {
    int64_t tensors, params;
};

static int mtp_count_cb(void *ctx, const struct glm_tensor_info *t)
{
    struct mtp_count *n = ctx;
    n->tensors++;
    n->params += t->shape[0] * (t->ndim == 2 ? t->shape[1] : 1);
    return 0;
}

static struct mtp_count mtp_of(const struct glm_config *c)
{
    struct mtp_count n = {0, 0};
    txm_mtp_tensor_list(c, mtp_count_cb, &n);
    return n;
}

char *tx_analysis_json(const struct tx_analysis *a, const struct glm_config *c,
                       const char *model_path, const char *source_format)
{
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    struct json_object *r = json_object_new_object();
    jstr(r, "model", model_path ? model_path : "");
    jstr(r, "format", source_format ? source_format : "");

    struct json_object *ar = json_object_new_object();
    jstr(ar, "architecture", c->architecture);
    jstr(ar, "model_type", c->model_type);
    jstr(ar, "attention", arch ? arch->attn_short : "unknown");
    jint(ar, "num_hidden_layers", c->num_hidden_layers);
    int dense = 0;
    for (int l = 0; l < c->num_hidden_layers; l++)
        dense += c->mlp_layer_types[l] == GLM_MLP_DENSE;
    jint(ar, "dense_layers", dense);
    struct mtp_count mc = mtp_of(c);
    jint(ar, "mtp_layers", mc.tensors ? c->num_nextn_predict_layers : 0);
    jint(ar, "mtp_tensors", mc.tensors);
    jint(ar, "mtp_params", mc.params);
    jint(ar, "moe_layers", c->num_hidden_layers - dense);
    jint(ar, "hidden_size", c->hidden_size);
    jint(ar, "vocab_size", c->vocab_size);
    jint(ar, "num_attention_heads", c->num_attention_heads);
    jint(ar, "num_key_value_heads", c->num_key_value_heads);
    const struct tx_arch_tools *tools = tx_arch_tools_get(c->arch);
    if (tools)
        tools->analyze_json(c, ar); /* the attention's own dimensions */
    jint(ar, "intermediate_size", c->intermediate_size);
    jint(ar, "moe_intermediate_size", c->moe_intermediate_size);
    jint(ar, "n_routed_experts", c->n_routed_experts);
    jint(ar, "num_experts_per_tok", c->num_experts_per_tok);
    jint(ar, "n_shared_experts", c->n_shared_experts);
    jint(ar, "n_group", c->n_group);
    jint(ar, "topk_group", c->topk_group);
    jnum(ar, "routed_scaling_factor", c->routed_scaling_factor);
    jint(ar, "max_position_embeddings", c->max_position_embeddings);
    json_object_object_add(r, "architecture", ar);

    struct json_object *p = json_object_new_object();
    for (int k = 0; k < TX_MOD_COUNT; k++)
        jint(p, tx_module_kind_name((enum tx_module_kind)k), (int64_t)a->params[k]);
    jint(p, "total", (int64_t)a->total_params);
    jint(p, "active_per_token", (int64_t)a->active_params);
    jnum(p, "active_fraction", a->total_params ? (double)a->active_params / a->total_params : 0);
    json_object_object_add(r, "parameters", p);

    struct json_object *cost = json_object_new_object();
    jint(cost, "seq_len", a->seq_len);
    jnum(cost, "prefill_flops", a->prefill_flops);
    jnum(cost, "prefill_flops_per_token", a->prefill_flops / a->seq_len);
    jnum(cost, "decode_flops_per_token", a->decode_flops);
    jnum(cost, "prefill_bytes", a->prefill_bytes);
    jnum(cost, "decode_bytes_per_token", a->decode_bytes);
    jnum(cost, "decode_arithmetic_intensity",
         a->decode_bytes > 0 ? a->decode_flops / a->decode_bytes : 0);
    jnum(cost, "prefill_arithmetic_intensity",
         a->prefill_bytes > 0 ? a->prefill_flops / a->prefill_bytes : 0);
    json_object_object_add(r, "compute", cost);

    struct json_object *ls = json_object_new_array();
    for (int l = 0; l < a->nlayers; l++) {
        const struct tx_layer_cost *lc = &a->layers[l];
        struct json_object *e = json_object_new_object();
        jint(e, "layer", l);
        jstr(e, "mlp", lc->moe ? "moe" : "dense");
        jnum(e, "prefill_flops", lc->prefill_flops);
        jnum(e, "decode_flops", lc->decode_flops);
        jnum(e, "prefill_bytes", lc->prefill_bytes);
        jnum(e, "decode_bytes", lc->decode_bytes);
        jnum(e, "attention_prefill_flops", lc->attn_prefill_flops);
        jnum(e, "attention_decode_flops", lc->attn_decode_flops);
        jnum(e, "ffn_prefill_flops", lc->ffn_prefill_flops);
        jnum(e, "ffn_decode_flops", lc->ffn_decode_flops);
        json_object_array_add(ls, e);
    }
    json_object_object_add(r, "layers", ls);

    struct json_object *m = json_object_new_object(), *w = json_object_new_object(),
                       *f = json_object_new_object();
    jint(w, "fp32", (int64_t)a->bytes_fp32);
    jint(w, "fp16", (int64_t)a->bytes_fp16);
    jint(w, "bf16", (int64_t)a->bytes_bf16);
    jint(w, "int8", (int64_t)a->bytes_int8);
    jint(w, "golden", (int64_t)a->bytes_golden);
    json_object_object_add(m, "weights_bytes", w);
    jint(m, "kv_cache_bytes_per_token", (int64_t)a->kv_bytes_per_token);
    jint(m, "kv_cache_latent_bytes_per_token", (int64_t)a->kv_latent_bytes_per_token);
    jint(m, "kv_cache_expanded_bytes_per_token", (int64_t)a->kv_expanded_bytes_per_token);
    {
        static const char *const tn[TX_KV_TYPE_COUNT] = {"f32", "f16", "bf16", "q8_0", "q4_0"};
        struct json_object *kt = json_object_new_object();
        for (int t = 0; t < TX_KV_TYPE_COUNT; t++) {
            struct json_object *e = json_object_new_object();
            int ok = a->kv_type_bytes_per_token[t] != 0;
            jbool(e, "supported", ok);
            jint(e, "bytes_per_token", (int64_t)a->kv_type_bytes_per_token[t]);
            jnum(e, "bytes_per_token_per_layer", a->kv_type_bytes_per_token_layer[t]);
            jnum(e, "vs_expanded_f16",
                 ok ? (double)a->kv_expanded_bytes_per_token / a->kv_type_bytes_per_token[t] : 0);
            jint(e, "max_context_golden", (int64_t)a->kv_type_max_ctx[t]);
            json_object_object_add(kt, tn[t], e);
        }
        json_object_object_add(m, "kv_cache_types", kt);
    }
    jint(m, "ctx_len", a->ctx_len);
    jint(m, "kv_cache_bytes", (int64_t)(a->kv_bytes_per_token * (uint64_t)a->ctx_len));
    jint(m, "device_memory_bytes", (int64_t)a->device_memory);
    jbool(f, "fp32", fits(a, a->bytes_fp32));
    jbool(f, "fp16", fits(a, a->bytes_fp16));
    jbool(f, "bf16", fits(a, a->bytes_bf16));
    jbool(f, "int8", fits(a, a->bytes_int8));
    jbool(f, "golden", fits(a, a->bytes_golden));
    json_object_object_add(m, "fits", f);
    jint(m, "required_bytes_golden", (int64_t)need_bytes(a, a->bytes_golden));
    json_object_object_add(r, "memory", m);

    struct json_object *rp = json_object_new_object(), *prec = json_object_new_object();
    jstr(prec, "embedding", "INT8_MIXED");
    jstr(prec, "attention", "FP16");
    jstr(prec, "mlp", "INT8_MIXED");
    jstr(prec, "experts", "INT8_MIXED");
    jstr(prec, "norm", "FP32");
    jstr(prec, "output", "FP32");
    json_object_object_add(rp, "precision", prec);
    struct json_object *par = json_object_new_array();
    static const struct {
        const char *mod, *par, *prec;
        int b0, b1;
    } golden[] = {{"attention", "head_parallel", "FP16", 4, 8},
                  {"experts", "expert_parallel", "INT8", 16, 32},
                  {"norm", "data_parallel", "FP32", 0, 0}};
    for (size_t i = 0; i < 3; i++) {
        struct json_object *e = json_object_new_object(), *bs;
        jstr(e, "module", golden[i].mod);
        jstr(e, "parallelism", golden[i].par);
        jstr(e, "precision", golden[i].prec);
        if (golden[i].b1) {
            bs = json_object_new_array();
            json_object_array_add(bs, json_object_new_int(golden[i].b0));
            json_object_array_add(bs, json_object_new_int(golden[i].b1));
        } else {
            bs = json_object_new_string("auto");
        }
        json_object_object_add(e, "batch_size", bs);
        json_object_array_add(par, e);
    }
    json_object_object_add(rp, "parallelism", par);
    struct json_object *moe = json_object_new_object();
    jint(moe, "expert_parallel", a->expert_parallel);
    jnum(moe, "capacity_factor", 1.2);
    jnum(moe, "min_expert_util", 0.3);
    json_object_object_add(rp, "moe", moe);
    jbool(rp, "weights_fit_device", fits(a, a->bytes_golden));
    jstr(rp, "note",
         fits(a, a->bytes_golden)
             ? "the golden configuration fits the device"
             : "the golden configuration does not fit: the runtime streams layers through a "
               "device-side cache (parameter shard prefetch)");
    jstr(rp, "export",
         "glm-export --input MODEL --quant int8 --optimize sparse --output MODEL.smd");
    json_object_object_add(r, "recommended_plan", rp);

    const char *s = json_object_to_json_string_ext(
        r, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = strlen(s);
    char *out = malloc(n + 2);
    if (out) {
        memcpy(out, s, n);
        out[n] = '\n';
        out[n + 1] = 0;
    }
    json_object_put(r);
    return out;
}

static const char *human(double v, char *buf, size_t n)
{
    static const char *const u[] = {"", "K", "M", "G", "T", "P"};
    int i = 0;
    while (v >= 1000 && i < 5) {
        v /= 1000;
        i++;
    }
    snprintf(buf, n, "%.2f%s", v, u[i]);
    return buf;
}

static const char *human_bytes(double v, char *buf, size_t n)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(buf, n, "%.1f %s", v, u[i]);
    return buf;
}

char *tx_analysis_summary(const struct tx_analysis *a, const struct glm_config *c)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    struct txm_buf o = {0};
    char line[512];
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    int dense = 0;
    for (int l = 0; l < c->num_hidden_layers; l++)
        dense += c->mlp_layer_types[l] == GLM_MLP_DENSE;
    snprintf(line, sizeof(line),
             "%s (%s): %d layers (%d dense, %d MoE), hidden %d, %d routed experts (top %d) + %d "
             "shared, %s\n",
             c->architecture, c->model_type, c->num_hidden_layers, dense,
             c->num_hidden_layers - dense, c->hidden_size, c->n_routed_experts,
             c->num_experts_per_tok, c->n_shared_experts,
             arch ? arch->attn_long : "unknown attention");
    txm_buf_put(&o, line, strlen(line));
    struct mtp_count mc = mtp_of(c);
    if (mc.tensors) {
        snprintf(line, sizeof(line),
                 "MTP layer: model.layers.%d (eh_proj, enorm, hnorm, attention, MoE, "
                 "shared_head.norm): %lld tensors, %s parameters, not counted below; "
                 "glm-export keeps it (--no-mtp: not), --spec-type mtp drafts with it\n",
                 c->num_hidden_layers, (long long)mc.tensors,
                 human((double)mc.params, b1, sizeof(b1)));
        txm_buf_put(&o, line, strlen(line));
    }
    snprintf(line, sizeof(line), "parameters: %s total, %s active per token (%.1f%%)\n",
             human((double)a->total_params, b1, sizeof(b1)),
             human((double)a->active_params, b2, sizeof(b2)),
             a->total_params ? 100.0 * a->active_params / a->total_params : 0);
    txm_buf_put(&o, line, strlen(line));
    snprintf(line, sizeof(line), "weights: fp32 %s, fp16 %s, int8 %s, golden plan %s\n",
             human_bytes((double)a->bytes_fp32, b1, sizeof(b1)),
             human_bytes((double)a->bytes_fp16, b2, sizeof(b2)),
             human_bytes((double)a->bytes_int8, b3, sizeof(b3)),
             human_bytes((double)a->bytes_golden, b4, sizeof(b4)));
    txm_buf_put(&o, line, strlen(line));
    snprintf(line, sizeof(line),
             "compute: prefill %d tokens %sFLOP, decode %sFLOP/token reading %s/token\n",
             a->seq_len, human(a->prefill_flops, b1, sizeof(b1)),
             human(a->decode_flops, b2, sizeof(b2)), human_bytes(a->decode_bytes, b3, sizeof(b3)));
    txm_buf_put(&o, line, strlen(line));
    snprintf(line, sizeof(line), "device memory %s: golden plan + KV(%d) needs %s -> %s\n",
             human_bytes((double)a->device_memory, b4, sizeof(b4)), a->ctx_len,
             human_bytes((double)need_bytes(a, a->bytes_golden), b5, sizeof(b5)),
             fits(a, a->bytes_golden) ? "fits" : "does NOT fit (layers will be streamed)");
    txm_buf_put(&o, line, strlen(line));
    {
        static const char *const tn[TX_KV_TYPE_COUNT] = {"f32", "f16", "bf16", "q8_0", "q4_0"};
        snprintf(line, sizeof(line),
                 "KV cache per token (expanded f16 before issue 11: %s):", 
                 human_bytes((double)a->kv_expanded_bytes_per_token, b1, sizeof(b1)));
        txm_buf_put(&o, line, strlen(line));
        for (int t = 0; t < TX_KV_TYPE_COUNT; t++) {
            if (!a->kv_type_bytes_per_token[t])
                snprintf(line, sizeof(line), " %s n/a;", tn[t]);
            else
                snprintf(line, sizeof(line), " %s %s (%.0f B/layer, longest context %llu);",
                         tn[t], human_bytes((double)a->kv_type_bytes_per_token[t], b1, sizeof(b1)),
                         a->kv_type_bytes_per_token_layer[t],
                         (unsigned long long)a->kv_type_max_ctx[t]);
            txm_buf_put(&o, line, strlen(line));
        }
        txm_buf_put(&o, "\n", 1);
    }
    snprintf(line, sizeof(line),
             "recommended: attention head-parallel FP16 batch 4-8, experts expert-parallel INT8 "
             "batch 16-32 (expert_parallel %d), norms data-parallel FP32\n",
             a->expert_parallel);
    txm_buf_put(&o, line, strlen(line));
    return o.p;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

int tx_analyze_load_config(const char *path, struct glm_config *cfg, const char **format, char *err,
                           size_t errsz)
{
    int rc = tx_analyze_load_config_storage(path, cfg, format, NULL, err, errsz);
    return rc > 0 ? 0 : rc;
}

int tx_analyze_load_config_storage(const char *path, struct glm_config *cfg, const char **format,
                                   struct tx_ckpt_storage *storage, char *err, size_t errsz)
{
    if (storage)
        memset(storage, 0, sizeof(*storage));
    if (txm_is_dir(path) || ends_with(path, ".onnx") || ends_with(path, ".ONNX")) {
        struct tx_ckpt *c;
        int rc = tx_ckpt_open(path, &c, err, errsz);
        if (rc < 0)
            return rc;
        *cfg = *tx_ckpt_config(c);
        *format = tx_ckpt_format(c) == TX_CKPT_ONNX ? "onnx" : "hf";
        if (storage)
            *storage = *tx_ckpt_storage(c);
        tx_ckpt_close(c);
        return 1;
    }
    if (ends_with(path, ".smd")) {
        struct tx_smd *s;
        int rc = tx_smd_open(path, 0, &s, err, errsz);
        if (rc < 0)
            return rc;
        char sub[TX_ERR_MAX];
        rc = glm_config_from_json(tx_smd_config_json(s, NULL), cfg, sub, sizeof(sub));
        if (rc < 0)
            tx_errbuf(err, errsz, rc, "%s: config: %s", path, sub);
        tx_smd_close(s);
        *format = "smd";
        return rc;
    }
    *format = "config";
    return glm_config_load(path, cfg, err, errsz);
}

/* ---- how a checkpoint is stored ----------------------------------------- */

static uint64_t storage_total(const struct tx_ckpt_storage *s)
{
    uint64_t b = s->scale_bytes;
    for (int t = 0; t < TX_ELEM_COUNT; t++)
        b += s->bytes[t];
    return b;
}

char *tx_storage_json(const struct tx_ckpt_storage *s)
{
    struct json_object *o = json_object_new_object(), *by = json_object_new_object();
    char q[64] = "none";
    if (s->quant_fp8)
        snprintf(q, sizeof(q), "fp8 e4m3, %ux%u block scales", s->block_rows, s->block_cols);
    json_object_object_add(o, "quantization", json_object_new_string(q));
    json_object_object_add(o, "bytes", json_object_new_int64((int64_t)storage_total(s)));
    for (int t = 0; t < TX_ELEM_COUNT; t++) {
        if (!s->tensors[t])
            continue;
        struct json_object *e = json_object_new_object();
        json_object_object_add(e, "tensors", json_object_new_int64((int64_t)s->tensors[t]));
        json_object_object_add(e, "bytes", json_object_new_int64((int64_t)s->bytes[t]));
        json_object_object_add(by, tx_elem_name((enum tx_elem_type)t), e);
    }
    json_object_object_add(o, "by_dtype", by);
    if (s->quant_fp8) {
        json_object_object_add(o, "scale_tensors",
                               json_object_new_int64((int64_t)s->scale_tensors));
        json_object_object_add(o, "scale_bytes", json_object_new_int64((int64_t)s->scale_bytes));
    }
    const char *t = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    char *r = t ? strdup(t) : NULL;
    json_object_put(o);
    return r;
}

char *tx_storage_summary(const struct tx_ckpt_storage *s)
{
    struct txm_buf o = {0};
    char line[256], b1[32];
    snprintf(line, sizeof(line), "stored: %s, %s:",
             s->quant_fp8 ? "FP8 block-quantised (E4M3, 128x128 block scales)" : "not quantised",
             human_bytes((double)storage_total(s), b1, sizeof(b1)));
    txm_buf_put(&o, line, strlen(line));
    for (int t = 0; t < TX_ELEM_COUNT; t++) {
        if (!s->tensors[t])
            continue;
        snprintf(line, sizeof(line), " %s %s (%" PRIu64 " tensors);",
                 tx_elem_name((enum tx_elem_type)t),
                 human_bytes((double)s->bytes[t], b1, sizeof(b1)), s->tensors[t]);
        txm_buf_put(&o, line, strlen(line));
    }
    if (s->quant_fp8) {
        snprintf(line, sizeof(line), " scales %s (%" PRIu64 " _scale_inv tensors)",
                 human_bytes((double)s->scale_bytes, b1, sizeof(b1)), s->scale_tensors);
        txm_buf_put(&o, line, strlen(line));
    }
    txm_buf_put(&o, "\n", 1);
    return o.p;
}
