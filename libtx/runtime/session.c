/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: sessions (a sequence and its KV cache in device memory),
 * evaluation, batched decode, generation with on-device sampling, stop
 * tokens, the chat template.
 */
#include "runtime/rt_internal.h"

#include <tx-internal/tx_chat_format.h>

#include <tx-internal/tx_arch.h>
#include "profile/profile_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <json-c/json.h>

#include <tx/tx_dtype.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))
/* Most logits rows one pass produces (a vocabulary row is ~600 KB). */
#define RT_MAX_LOGIT_ROWS 32

/* Lay out and allocate a KV BO for the cache types (K, V, key selector);
 * fills offsets into the arrays. */
static int kv_alloc(glm_session_t *s, const uint16_t dt[3], tx_bo_t **bo, void **map,
                    uint64_t *size, uint64_t *k_off, uint64_t *v_off, uint64_t *ik_off)
{
    glm_model_t *m = s->m;
    const struct glm_config *c = &m->cfg;
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    uint64_t n = (uint64_t)s->n_ctx, off = 0;
    if (!arch)
        return tx_error(TX_EINVAL, "KV cache: unknown architecture %d", (int)c->arch);
    /* the geometry of each layer's caches: the architecture's (the MTP
     * layer L has the caches of a decoder layer) */
    for (int l = 0; l < rt_layers(m); l++) {
        struct tx_arch_kv kv;
        arch->kv_geometry(c, l, &kv);
        k_off[l] = off;
        off = ALIGN_UP(off + tx_dtype_row_bytes(dt[0], n * kv.k), 4096);
        v_off[l] = off;
        off = ALIGN_UP(off + tx_dtype_row_bytes(dt[1], n * kv.v), 4096);
        ik_off[l] = UINT64_MAX;
        if (kv.ik) {
            ik_off[l] = off;
            off = ALIGN_UP(off + tx_dtype_row_bytes(dt[2], n * kv.ik), 4096);
        }
    }
    int rc = tx_bo_alloc(m->dev, off ? off : 4096, 0, m->label_kv, bo);
    if (rc)
        return tx_error(rc, "KV cache of %d positions needs %llu bytes of device memory: %s",
                        s->n_ctx, (unsigned long long)off, tx_last_error());
    rc = tx_bo_map(*bo, map);
    if (rc) {
        tx_bo_free(*bo);
        *bo = NULL;
        return tx_error(rc, "KV cache: map: %s", tx_last_error());
    }
    *size = off ? off : 4096;
    return TX_OK;
}

static uint16_t cache_dtype(int t)
{
    switch (t) {
    case GLM_CACHE_F32:
        return TX8_DTYPE_F32;
    case GLM_CACHE_F16:
        return TX8_DTYPE_F16;
    case GLM_CACHE_BF16:
        return TX8_DTYPE_BF16;
    case GLM_CACHE_Q8_0:
        return TX8_DTYPE_Q8_0;
    case GLM_CACHE_Q4_0:
        return TX8_DTYPE_Q4_0;
    default:
        return UINT16_MAX;
    }
}

/* Whether the model's cache rows can take cache types k and v (a block
 * type needs every K/V run a multiple of TX8_KV_BLOCK and a 1.6 device). */
int rt_cache_types_check(const glm_model_t *m, int k, int v)
{
    const struct glm_config *c = &m->cfg;
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    if (k < 0 || k >= GLM_CACHE_TYPE_COUNT || v < 0 || v >= GLM_CACHE_TYPE_COUNT)
        return tx_error(TX_EINVAL, "cache type %d / %d: not a glm_cache_type", k, v);
    if (!arch)
        return tx_error(TX_EINVAL, "KV cache: unknown architecture %d", (int)c->arch);
    struct tx_arch_kv kv;
    arch->kv_geometry(c, 0, &kv);
    for (int i = 0; i < 2; i++) {
        int t = i ? v : k;
        if (i && !kv.v)
            continue; /* MLA: V is the latent, no cache of its own */
        if (t != GLM_CACHE_Q8_0 && t != GLM_CACHE_Q4_0)
            continue;
        if (kv.run % TX8_KV_BLOCK)
            return tx_error(TX_ENOTSUP,
                            "cache type %s (--cache-type-%c): the %s cache rows of this model "
                            "are made of runs of %llu elements, not a multiple of %d",
                            glm_cache_type_name((glm_cache_type_t)t), i ? 'v' : 'k',
                            i ? "V" : "K", (unsigned long long)kv.run, TX8_KV_BLOCK);
        if (!(m->dinfo.caps & TX8_CAP_KV_BLOCK) || TX8_IF_MINOR(m->dinfo.if_version) < 6)
            return tx_error(TX_ENOTSUP,
                            "cache type %s: the device has no KV-cache block types "
                            "(hardware interface 1.6)",
                            glm_cache_type_name((glm_cache_type_t)t));
    }
    return TX_OK;
}

/* The cache types session s uses under plan: dt[0] K, dt[1] V, dt[2] the
 * key selector's (Q8_0 when K is not F32 and its width allows) */
void rt_session_kv_types(const glm_session_t *s, const glm_precision_plan_t *plan, uint16_t dt[3])
{
    const glm_model_t *m = s->m;
    const struct glm_config *c = &m->cfg;
    int k = s->want_k ? s->want_k : m->cache_k, v = s->want_v ? s->want_v : m->cache_v;
    const struct tx_arch_ops *arch = tx_arch_get(c->arch);
    struct tx_arch_kv kv;
    memset(&kv, 0, sizeof(kv));
    if (arch)
        arch->kv_geometry(c, 0, &kv);
    uint16_t def = rt_kv_dtype(plan->precision[GLM_ATTENTION]);
    /* INT8_MIXED on a 1.7 device: an MLA latent cache in BF16, the operands
     * of BF16 products (blocks.c), which the one latent head shared by all
     * query heads makes twice as fast; a GQA cache stays F16 (its decode
     * gains nothing from them: docs/engine.md, "BF16 attention") */
    if (plan->precision[GLM_ATTENTION] == INT8_MIXED && m->attn_bf16 && !kv.v)
        def = TX8_DTYPE_BF16;
    dt[0] = k ? cache_dtype(k) : def;
    dt[1] = v ? cache_dtype(v) : def;
    if (!kv.v)
        dt[1] = dt[0]; /* MLA: the V type is the latent's */
    uint64_t ik = c->index_head_dim > 0 ? (uint64_t)c->index_head_dim : 0;
    dt[2] = dt[0] != TX8_DTYPE_F32 && ik && ik % TX8_KV_BLOCK == 0 &&
                    (m->dinfo.caps & TX8_CAP_KV_BLOCK) && TX8_IF_MINOR(m->dinfo.if_version) >= 6
                ? TX8_DTYPE_Q8_0
                : TX8_DTYPE_F32;
}

/* one cache region of `rows` rows x cols elements from (src, sdt) to
 * (dst, ddt) */
static int kv_convert_region(tx_cmdbuf_t *cb, tx_ref_t dst, uint16_t ddt, tx_ref_t src,
                             uint16_t sdt, uint32_t rows, uint32_t cols)
{
    if (!cols || !rows)
        return 0;
    if (ddt == sdt)
        return tx_cmd_copy(cb, dst, src, tx_dtype_row_bytes(sdt, (uint64_t)rows * cols));
    struct tx_convert_args a;
    memset(&a, 0, sizeof(a));
    a.dst = dst;
    a.src = src;
    a.rows = rows;
    a.cols = a.ld_dst = a.ld_src = cols;
    a.dst_dtype = ddt;
    a.src_dtype = sdt;
    return tx_cmd_convert(cb, &a);
}

/* Change the KV cache's types (the plan or the cache types changed): the
 * cached positions are converted on the device into a new buffer. */
int rt_session_kv_convert(glm_session_t *s, const uint16_t dt[3])
{
    glm_model_t *m = s->m;
    const struct glm_config *c = &m->cfg;
    int L = rt_layers(m);
    uint64_t *k = malloc(sizeof(uint64_t) * 3 * (size_t)L);
    if (!k)
        return tx_error(TX_ENOMEM, "out of memory");
    uint64_t *v = k + L, *ik = v + L;
    tx_bo_t *bo = NULL;
    void *map = NULL;
    uint64_t size = 0;
    /* free the old cache first when it holds nothing */
    if (s->pos == 0 && s->kv_bo) {
        tx_bo_free(s->kv_bo);
        s->kv_bo = NULL;
    }
    int rc = kv_alloc(s, dt, &bo, &map, &size, k, v, ik);
    if (rc) {
        free(k);
        return rc;
    }
    if (s->pos > 0 && s->kv_bo) {
        tx_cmdbuf_t *cb = NULL;
        const struct tx_arch_ops *arch = tx_arch_get(c->arch);
        rc = tx_cmdbuf_create(m->dev, &cb);
        for (int l = 0; l < L && !rc; l++) {
            struct tx_arch_kv kv;
            arch->kv_geometry(c, l, &kv);
            uint32_t n = (uint32_t)s->pos;
            rc = kv_convert_region(cb, tx_ref(bo, k[l]), dt[0], tx_ref(s->kv_bo, s->k_off[l]),
                                   s->kv_dtype, n, (uint32_t)kv.k);
            if (!rc)
                rc = kv_convert_region(cb, tx_ref(bo, v[l]), dt[1],
                                       tx_ref(s->kv_bo, s->v_off[l]), s->v_dtype, n,
                                       (uint32_t)kv.v);
            if (!rc && ik[l] != UINT64_MAX)
                rc = kv_convert_region(cb, tx_ref(bo, ik[l]), dt[2],
                                       tx_ref(s->kv_bo, s->ik_off[l]), s->ik_dtype, n,
                                       (uint32_t)kv.ik);
        }
        if (rc)
            rc = tx_error(rc, "KV cache conversion: %s", tx_last_error());
        else
            rc = rt_run(m, cb, "KV cache conversion", NULL);
        tx_cmdbuf_destroy(cb);
        if (rc) {
            tx_bo_free(bo);
            free(k);
            return rc;
        }
        rt_debug("KV cache of %d positions converted to K %s, V %s", s->pos,
                 tx_dtype_name(dt[0]), tx_dtype_name(dt[1]));
    }
    if (s->kv_bo)
        tx_bo_free(s->kv_bo);
    s->kv_bo = bo;
    s->kv_map = map;
    s->kv_size = size;
    s->kv_dtype = dt[0];
    s->v_dtype = dt[1];
    s->ik_dtype = dt[2];
    memcpy(s->k_off, k, sizeof(uint64_t) * (size_t)L);
    memcpy(s->v_off, v, sizeof(uint64_t) * (size_t)L);
    memcpy(s->ik_off, ik, sizeof(uint64_t) * (size_t)L);
    free(k);
    return TX_OK;
}

TX_API int glm_session_attention_stats(const glm_session_t *s, uint64_t *pairs,
                                       uint64_t *pairs_dense)
{
    if (!s)
        return tx_error(TX_EINVAL, "glm_session_attention_stats: session is NULL");
    pthread_mutex_lock(&s->m->lock);
    if (pairs)
        *pairs = s->attn_pairs;
    if (pairs_dense)
        *pairs_dense = s->attn_pairs_dense;
    pthread_mutex_unlock(&s->m->lock);
    return TX_OK;
}

TX_API int glm_cache_type_parse(const char *s)
{
    static const struct {
        const char *n;
        int t;
    } names[] = {{"default", GLM_CACHE_DEFAULT}, {"f32", GLM_CACHE_F32},
                 {"f16", GLM_CACHE_F16},         {"bf16", GLM_CACHE_BF16},
                 {"q8_0", GLM_CACHE_Q8_0},       {"int8", GLM_CACHE_Q8_0},
                 {"q4_0", GLM_CACHE_Q4_0},       {"int4", GLM_CACHE_Q4_0},
                 {"q4", GLM_CACHE_Q4_0}};
    if (!s)
        return TX_NONE;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcasecmp(s, names[i].n))
            return names[i].t;
    return TX_NONE;
}

TX_API const char *glm_cache_type_name(glm_cache_type_t t)
{
    static const char *const n[] = {"default", "f32", "f16", "bf16", "q8_0", "q4_0"};
    return (unsigned)t < GLM_CACHE_TYPE_COUNT ? n[t] : "?";
}

TX_API int glm_model_set_cache_types(glm_model_t *m, glm_cache_type_t k, glm_cache_type_t v)
{
    if (!m)
        return tx_error(TX_EINVAL, "glm_model_set_cache_types: model is NULL");
    int rc = rt_cache_types_check(m, (int)k, (int)v);
    if (rc)
        return rc;
    pthread_mutex_lock(&m->lock);
    m->cache_k = (int)k;
    m->cache_v = (int)v;
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}

TX_API int glm_session_create(glm_model_t *m, const struct glm_session_options *opt,
                              glm_session_t **out)
{
    if (!out)
        return tx_error(TX_EINVAL, "glm_session_create: out is NULL");
    *out = NULL;
    if (!m)
        return tx_error(TX_EINVAL, "glm_session_create: model is NULL");
    if (m->ep_worker)
        return tx_error(TX_EINVAL, "glm_session_create: the model of an expert-parallel rank > 0 "
                                   "only serves MoE layers (glm_ep_worker_run); rank 0 runs the "
                                   "sessions");
    const struct glm_config *c = &m->cfg;
    int n_ctx = opt ? opt->n_ctx : 0, n_batch = opt ? opt->n_batch : 0;
    if (n_ctx < 0 || n_batch < 0)
        return tx_error(TX_EINVAL, "glm_session_create: negative n_ctx or n_batch");
    if (!n_ctx)
        n_ctx = c->max_position_embeddings > 0 && c->max_position_embeddings < 4096
                    ? c->max_position_embeddings
                    : 4096;
    if (c->max_position_embeddings > 0 && n_ctx > c->max_position_embeddings)
        return tx_error(TX_EINVAL, "n_ctx %d exceeds the model's max_position_embeddings %d", n_ctx,
                        c->max_position_embeddings);
    if (!n_batch)
        n_batch = 512;
    if (n_batch > n_ctx)
        n_batch = n_ctx;

    glm_session_t *s = calloc(1, sizeof(*s));
    int L = rt_layers(m);
    if (s)
        s->k_off = calloc((size_t)L * 3, sizeof(uint64_t));
    if (s)
        s->toks = calloc((size_t)n_ctx, sizeof(int32_t));
    if (!s || !s->k_off || !s->toks) {
        if (s) {
            free(s->k_off);
            free(s->toks);
            free(s);
        }
        return tx_error(TX_ENOMEM, "glm_session_create: out of memory");
    }
    s->v_off = s->k_off + L;
    s->ik_off = s->v_off + L;
    s->m = m;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    s->want_k = opt ? opt->cache_type_k : 0;
    s->want_v = opt ? opt->cache_type_v : 0;
    int rc = rt_cache_types_check(m, s->want_k, s->want_v);
    if (rc) {
        free(s->k_off);
        free(s->toks);
        free(s);
        return tx_error(rc, "glm_session_create: %s", tx_last_error());
    }
    glm_precision_plan_t plan;
    rt_plan_of(m->dev, &plan, NULL);
    pthread_mutex_lock(&m->lock);
    uint16_t dt[3];
    rt_session_kv_types(s, &plan, dt);
    rc = rt_session_kv_convert(s, dt);
    if (!rc && m->n_sessions == m->cap_sessions) {
        int cap = m->cap_sessions ? m->cap_sessions * 2 : 8;
        void *p = realloc(m->sessions, sizeof(*m->sessions) * (size_t)cap);
        if (!p)
            rc = tx_error(TX_ENOMEM, "glm_session_create: out of memory");
        else {
            m->sessions = p;
            m->cap_sessions = cap;
        }
    }
    if (!rc)
        m->sessions[m->n_sessions++] = s;
    pthread_mutex_unlock(&m->lock);
    if (rc) {
        if (s->kv_bo)
            tx_bo_free(s->kv_bo);
        free(s->k_off);
        free(s->toks);
        free(s);
        return rc;
    }
    *out = s;
    return TX_OK;
}

TX_API void glm_session_free(glm_session_t *s)
{
    if (!s)
        return;
    glm_model_t *m = s->m;
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < m->n_sessions; i++)
        if (m->sessions[i] == s) {
            m->sessions[i] = m->sessions[--m->n_sessions];
            break;
        }
    pthread_mutex_unlock(&m->lock);
    if (s->kv_bo)
        tx_bo_free(s->kv_bo);
    free(s->k_off);
    free(s->toks);
    free(s->sp_h);
    free(s->allow);
    rt_attn_mask_drop(s);
    free(s);
}

TX_API int glm_session_reset(glm_session_t *s)
{
    if (!s)
        return tx_error(TX_EINVAL, "glm_session_reset: session is NULL");
    pthread_mutex_lock(&s->m->lock);
    s->pos = 0;
    rt_attn_mask_drop(s);
    pthread_mutex_unlock(&s->m->lock);
    return TX_OK;
}

TX_API int glm_session_truncate(glm_session_t *s, int pos)
{
    if (!s)
        return tx_error(TX_EINVAL, "glm_session_truncate: session is NULL");
    pthread_mutex_lock(&s->m->lock);
    int rc = TX_OK;
    if (pos < 0 || pos > s->pos)
        rc = tx_error(TX_EINVAL, "glm_session_truncate: position %d is outside [0, %d]", pos,
                      s->pos);
    else {
        s->pos = pos;
        rt_attn_mask_drop(s);
    }
    pthread_mutex_unlock(&s->m->lock);
    return rc;
}

TX_API int glm_session_pos(const glm_session_t *s)
{
    return s ? s->pos : 0;
}

TX_API int glm_session_n_ctx(const glm_session_t *s)
{
    return s ? s->n_ctx : 0;
}

TX_API glm_model_t *glm_session_model(const glm_session_t *s)
{
    return s ? s->m : NULL;
}

static int check_ids(const glm_model_t *m, const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return tx_error(TX_EINVAL,
                            "token %d (position %d of the input) is outside the "
                            "vocabulary [0, %d)",
                            ids[i], i, m->cfg.vocab_size);
    return TX_OK;
}

/* Evaluate n tokens of one session; the last chunk may sample. Model lock
 * held. */
static int eval_locked(glm_session_t *s, const int32_t *ids, int n, unsigned flags, float *logits,
                       const struct glm_sampling *sampling, int32_t *sampled, uint64_t *busy_ns,
                       uint64_t *macs, const int32_t *ban, int n_ban)
{
    glm_model_t *m = s->m;
    int V = m->cfg.vocab_size;
    if (n <= 0)
        return tx_error(TX_EINVAL, "glm_eval: no tokens");
    if (s->pos + n > s->n_ctx)
        return tx_error(TX_EINVAL, "glm_eval: %d tokens at position %d exceed the context of %d", n,
                        s->pos, s->n_ctx);
    int rc = check_ids(m, ids, n);
    if (rc)
        return rc;
    int all = (flags & GLM_EVAL_ALL_LOGITS) != 0 && logits;
    if (all && sampling)
        return tx_error(TX_EINVAL, "internal: sampling with all logits");
    int chunk = s->n_batch;
    if (all && chunk > RT_MAX_LOGIT_ROWS)
        chunk = RT_MAX_LOGIT_ROWS;
    for (int done = 0; done < n;) {
        int k = n - done < chunk ? n - done : chunk;
        int last = done + k == n;
        struct rt_seg seg = {s, s->pos, k, 0};
        struct rt_fwd f;
        memset(&f, 0, sizeof(f));
        f.n_seg = 1;
        f.seg = &seg;
        f.T = k;
        f.ids = ids + done;
        if (all && logits) {
            f.lrow0 = 0;
            f.lrows = k;
            f.logits = logits + (size_t)done * V;
        } else if (last && (logits || sampling)) {
            f.lrow0 = k - 1;
            f.lrows = 1;
            f.logits = logits;
        }
        if (last && sampling) { /* never with all logits (internal use) */
            f.sampling = sampling;
            f.n_sampling = 1;
            f.ban = ban;
            f.n_ban = n_ban;
            f.sampled = sampled;
        }
        /* the sequence's ids (repetition penalties read them) */
        memcpy(s->toks + s->pos, ids + done, (size_t)k * sizeof(int32_t));
        rc = rt_forward(m, &f);
        if (rc)
            return rc;
        if (busy_ns)
            *busy_ns += f.busy_ns;
        if (macs)
            *macs += f.macs;
        s->pos += k;
        done += k;
    }
    return TX_OK;
}

TX_API int glm_eval(glm_session_t *s, const int32_t *ids, int n, unsigned flags, float *logits)
{
    if (!s || (!ids && n))
        return tx_error(TX_EINVAL, "glm_eval: NULL argument");
    pthread_mutex_lock(&s->m->lock);
    int rc = eval_locked(s, ids, n, flags, logits, NULL, NULL, NULL, NULL, NULL, 0);
    pthread_mutex_unlock(&s->m->lock);
    return rc;
}

int rt_sample_vocab(const glm_model_t *m)
{
    int V = m->cfg.vocab_size;
    size_t tv = m->tok ? tx_tokenizer_vocab_size(m->tok) : 0;
    return tv > 0 && tv < (size_t)V ? (int)tv : V;
}

TX_API int glm_model_sample_vocab(const glm_model_t *m)
{
    return m ? rt_sample_vocab(m) : 0;
}

/* The penalties apply to greedy decoding too. */
static int penalty_check(const struct glm_sampling *s, const char *who)
{
    if (!isfinite(s->repeat_penalty) || s->repeat_penalty < 0.0f)
        return tx_error(TX_EINVAL, "%s: repeat_penalty %g is not a finite value >= 0 (1 = off)",
                        who, (double)s->repeat_penalty);
    if (!isfinite(s->presence_penalty) || !isfinite(s->frequency_penalty))
        return tx_error(TX_EINVAL, "%s: presence/frequency penalties must be finite", who);
    if (s->repeat_last_n < -1 || s->repeat_last_n > GLM_MAX_REPEAT_LAST_N)
        return tx_error(TX_EINVAL,
                        "%s: repeat_last_n %d is outside [-1, %d] (0 = no penalties, -1 = the "
                        "context up to %d)",
                        who, s->repeat_last_n, GLM_MAX_REPEAT_LAST_N, GLM_MAX_REPEAT_LAST_N);
    return TX_OK;
}

int rt_sampling_check(const glm_model_t *m, const struct glm_sampling *s, const char *who)
{
    if (isnan(s->temperature))
        return tx_error(TX_EINVAL, "%s: temperature is NaN", who);
    int prc = penalty_check(s, who);
    if (prc)
        return prc;
    if (!(s->temperature > 0.0f))
        return TX_OK; /* greedy: top-k and top-p play no part */
    if (s->top_k < 0)
        return tx_error(TX_EINVAL, "%s: top_k %d is negative (0 = all tokens)", who, s->top_k);
    uint32_t lim = m->dinfo.max_topk;
    if (lim && (uint32_t)s->top_k > lim)
        return tx_error(TX_EINVAL,
                        "%s: top_k %d exceeds the device's limit of %u (caps.max_topk); use 0 "
                        "(all tokens) or at most %u",
                        who, s->top_k, lim, lim);
    if (!(s->top_p > 0.0f && s->top_p <= 1.0f))
        return tx_error(TX_EINVAL, "%s: top_p %g is outside (0, 1] (1 = all tokens)", who,
                        (double)s->top_p);
    if (!(s->min_p >= 0.0f && s->min_p <= 1.0f))
        return tx_error(TX_EINVAL, "%s: min_p %g is outside [0, 1] (0 = off)", who,
                        (double)s->min_p);
    if (s->order != GLM_SAMPLER_ORDER_LLAMA && s->order != GLM_SAMPLER_ORDER_TEMP_FIRST)
        return tx_error(TX_EINVAL, "%s: sampler order %d is unknown", who, s->order);
    return TX_OK;
}

TX_API void glm_sampling_default(struct glm_sampling *s)
{
    if (!s)
        return;
    memset(s, 0, sizeof(*s));
    s->temperature = 0.8f;
    s->top_k = 40;
    s->top_p = 0.95f;
    s->seed = 0;
    s->min_p = 0.05f;
    s->repeat_penalty = 1.0f;
    s->repeat_last_n = 64;
    s->order = GLM_SAMPLER_ORDER_LLAMA;
}

static int decode_batch(const char *who, glm_session_t *const *sessions, const int32_t *ids, int n,
                        float *logits, const struct glm_sampling *sampling, int n_sampling,
                        int32_t *next, float *const *row_logits)
{
    if (!sessions || !ids || n <= 0)
        return tx_error(TX_EINVAL, "%s: no sessions", who);
    if (sampling && !next)
        return tx_error(TX_EINVAL, "%s: sampling needs next[]", who);
    glm_model_t *m = sessions[0] ? sessions[0]->m : NULL;
    if (!m)
        return tx_error(TX_EINVAL, "%s: session 0 is NULL", who);
    if (n > RT_MAX_LOGIT_ROWS)
        return tx_error(TX_EINVAL, "%s: at most %d sessions per pass", who, RT_MAX_LOGIT_ROWS);
    for (int i = 0; i < n; i++) {
        if (!sessions[i] || sessions[i]->m != m)
            return tx_error(TX_EINVAL, "%s: session %d is NULL or of another model", who, i);
        for (int j = 0; j < i; j++)
            if (sessions[j] == sessions[i])
                return tx_error(TX_EINVAL, "%s: session %d appears twice", who, i);
    }
    for (int i = 0; sampling && i < n_sampling; i++) {
        char w[96];
        if (n_sampling > 1)
            snprintf(w, sizeof(w), "%s: session %d", who, i);
        else
            snprintf(w, sizeof(w), "%s", who);
        int rc = rt_sampling_check(m, &sampling[i], w);
        if (rc)
            return rc;
    }
    struct rt_seg seg[RT_MAX_LOGIT_ROWS];
    pthread_mutex_lock(&m->lock);
    int rc = check_ids(m, ids, n);
    for (int i = 0; i < n && !rc; i++) {
        if (sessions[i]->pos + 1 > sessions[i]->n_ctx)
            rc = tx_error(TX_EINVAL, "%s: session %d's context is full", who, i);
        seg[i].s = sessions[i];
        seg[i].pos0 = sessions[i]->pos;
        seg[i].n = 1;
        seg[i].row0 = i;
    }
    if (!rc) {
        struct rt_fwd f;
        memset(&f, 0, sizeof(f));
        f.n_seg = n;
        f.seg = seg;
        f.T = n;
        f.ids = ids;
        f.lrow0 = 0;
        f.lrows = (logits || sampling || row_logits) ? n : 0;
        f.logits = logits;
        f.row_logits = row_logits;
        f.sampling = sampling;
        f.n_sampling = n_sampling;
        f.sampled = next;
        for (int i = 0; i < n; i++)
            sessions[i]->toks[sessions[i]->pos] = ids[i];
        rc = rt_forward(m, &f);
        if (!rc)
            for (int i = 0; i < n; i++)
                sessions[i]->pos++;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

TX_API int glm_decode_batch(glm_session_t *const *sessions, const int32_t *ids, int n,
                            float *logits, const struct glm_sampling *sampling, int32_t *next)
{
    return decode_batch("glm_decode_batch", sessions, ids, n, logits, sampling, 1, next, NULL);
}

TX_API int glm_decode_batch_each(glm_session_t *const *sessions, const int32_t *ids, int n,
                                 float *logits, const struct glm_sampling *sampling, int32_t *next)
{
    if (!sampling)
        return tx_error(TX_EINVAL, "glm_decode_batch_each: sampling[n] is NULL");
    return decode_batch("glm_decode_batch_each", sessions, ids, n, logits, sampling, n, next,
                        NULL);
}

TX_API int glm_session_set_label(glm_session_t *s, const char *label)
{
    if (!s || !label || !*label)
        return tx_error(TX_EINVAL, "glm_session_set_label: NULL session or empty label");
    if (strlen(label) >= TX8_LABEL_LEN)
        return tx_error(TX_EINVAL, "glm_session_set_label: '%s' is longer than %d bytes", label,
                        TX8_LABEL_LEN - 1);
    pthread_mutex_lock(&s->m->lock);
    int rc = s->kv_bo ? tx_bo_set_label(s->kv_bo, label) : TX_OK;
    pthread_mutex_unlock(&s->m->lock);
    return rc;
}

static int batch_prefill(const char *who, glm_session_t *const *sessions, const int32_t *ids,
                         int n, const struct glm_sampling *sampling, int32_t *next,
                         const struct glm_prefill_chunk *chunks, int n_chunks,
                         float *const *row_logits)
{
    if (n < 0 || n_chunks < 0 || (n_chunks > 0 && !chunks))
        return tx_error(TX_EINVAL, "%s: negative counts or NULL chunks", who);
    if (n_chunks == 0) {
        if (n == 0)
            return tx_error(TX_EINVAL, "%s: neither decode rows nor a prefill chunk", who);
        if (!sampling)
            return tx_error(TX_EINVAL, "%s: sampling[n] is NULL", who);
        return decode_batch(who, sessions, ids, n, NULL, sampling, n, next, row_logits);
    }
    if (n > 0 && (!sessions || !ids || !sampling || !next))
        return tx_error(TX_EINVAL, "%s: decode rows need sessions, ids, sampling and next", who);
    if (n > RT_MAX_LOGIT_ROWS || n_chunks > RT_MAX_LOGIT_ROWS)
        return tx_error(TX_EINVAL, "%s: at most %d decode sessions and %d chunks per pass", who,
                        RT_MAX_LOGIT_ROWS, RT_MAX_LOGIT_ROWS);
    glm_model_t *m = chunks[0].session ? chunks[0].session->m : NULL;
    if (!m)
        return tx_error(TX_EINVAL, "%s: chunk 0 has no session", who);
    int T = n;
    for (int j = 0; j < n_chunks; j++) {
        const struct glm_prefill_chunk *c = &chunks[j];
        if (!c->session || c->session->m != m || !c->ids || c->n <= 0)
            return tx_error(TX_EINVAL,
                            "%s: chunk %d: NULL session or ids, no tokens, or another model", who,
                            j);
        for (int k = 0; k < j; k++)
            if (chunks[k].session == c->session)
                return tx_error(TX_EINVAL, "%s: chunk %d's session appears twice", who, j);
        for (int i = 0; i < n; i++)
            if (sessions[i] == c->session)
                return tx_error(TX_EINVAL, "%s: session %d is also the prefill session of chunk %d",
                                who, i, j);
        if (c->n > INT32_MAX / 2 - T)
            return tx_error(TX_EINVAL, "%s: too many tokens", who);
        T += c->n;
    }
    for (int i = 0; i < n; i++) {
        if (!sessions[i] || sessions[i]->m != m)
            return tx_error(TX_EINVAL, "%s: session %d is NULL or of another model", who, i);
        for (int j = 0; j < i; j++)
            if (sessions[j] == sessions[i])
                return tx_error(TX_EINVAL, "%s: session %d appears twice", who, i);
        char w[96];
        snprintf(w, sizeof(w), "%s: session %d", who, i);
        int rc = rt_sampling_check(m, &sampling[i], w);
        if (rc)
            return rc;
    }
    int32_t *all = malloc((size_t)T * sizeof(*all));
    struct rt_seg *seg = malloc((size_t)(n + n_chunks) * sizeof(*seg));
    if (!all || !seg) {
        free(all);
        free(seg);
        return tx_error(TX_ENOMEM, "%s: out of host memory", who);
    }
    if (n)
        memcpy(all, ids, (size_t)n * sizeof(*all));
    for (int j = 0, row = n; j < n_chunks; row += chunks[j].n, j++)
        memcpy(all + row, chunks[j].ids, (size_t)chunks[j].n * sizeof(*all));
    pthread_mutex_lock(&m->lock);
    int rc = check_ids(m, all, T);
    for (int i = 0; i < n && !rc; i++) {
        if (sessions[i]->pos + 1 > sessions[i]->n_ctx)
            rc = tx_error(TX_EINVAL, "%s: session %d's context is full", who, i);
        seg[i] = (struct rt_seg){sessions[i], sessions[i]->pos, 1, i};
    }
    for (int j = 0, row = n; j < n_chunks && !rc; row += chunks[j].n, j++) {
        glm_session_t *cs = chunks[j].session;
        if (cs->pos + chunks[j].n > cs->n_ctx)
            rc = tx_error(TX_EINVAL,
                          "%s: chunk %d: %d tokens at position %d exceed the context of %d", who, j,
                          chunks[j].n, cs->pos, cs->n_ctx);
        seg[n + j] = (struct rt_seg){cs, cs->pos, chunks[j].n, row};
    }
    if (!rc) {
        struct rt_fwd f;
        memset(&f, 0, sizeof(f));
        f.n_seg = n + n_chunks;
        f.seg = seg;
        f.T = T;
        f.ids = all;
        f.lrow0 = 0;
        f.lrows = n; /* the decode rows only: the chunks give no logits */
        f.row_logits = n ? row_logits : NULL;
        if (n) {
            f.sampling = sampling;
            f.n_sampling = n;
            f.sampled = next;
        }
        for (int i = 0; i < n; i++)
            sessions[i]->toks[sessions[i]->pos] = ids[i];
        for (int j = 0; j < n_chunks; j++)
            memcpy(chunks[j].session->toks + chunks[j].session->pos, chunks[j].ids,
                   (size_t)chunks[j].n * sizeof(int32_t));
        rc = rt_forward(m, &f);
        if (!rc) {
            for (int i = 0; i < n; i++)
                sessions[i]->pos++;
            for (int j = 0; j < n_chunks; j++)
                chunks[j].session->pos += chunks[j].n;
        }
    }
    pthread_mutex_unlock(&m->lock);
    free(all);
    free(seg);
    return rc;
}

TX_API int glm_decode_batch_prefill(glm_session_t *const *sessions, const int32_t *ids, int n,
                                    const struct glm_sampling *sampling, int32_t *next,
                                    const struct glm_prefill_chunk *chunks, int n_chunks)
{
    return batch_prefill("glm_decode_batch_prefill", sessions, ids, n, sampling, next, chunks,
                         n_chunks, NULL);
}

TX_API int glm_decode_batch_prefill_logits(glm_session_t *const *sessions, const int32_t *ids,
                                           int n, const struct glm_sampling *sampling,
                                           int32_t *next, const struct glm_prefill_chunk *chunks,
                                           int n_chunks, float *const *row_logits)
{
    return batch_prefill("glm_decode_batch_prefill_logits", sessions, ids, n, sampling, next,
                         chunks, n_chunks, row_logits);
}

/* ------------------------------------------------------------------------ */
/* Stop tokens, chat, tokenizing                                             */
/* ------------------------------------------------------------------------ */

TX_API int glm_model_stop_tokens(const glm_model_t *m, int32_t *ids, int cap)
{
    if (!m)
        return 0;
    int32_t tmp[GLM_MAX_EOS + 8];
    int n = 0;
    for (int i = 0; i < m->cfg.n_eos && n < GLM_MAX_EOS; i++)
        if (m->cfg.eos_token_ids[i] >= 0)
            tmp[n++] = m->cfg.eos_token_ids[i];
    /* generation_config.json's eos_token_id (the same limit in all) */
    for (int i = 0; m->has_gen && i < m->gen.n_eos && n < GLM_MAX_EOS; i++) {
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= tmp[j] == m->gen.eos_token_ids[i];
        if (!dup)
            tmp[n++] = m->gen.eos_token_ids[i];
    }
    if (m->tok) {
        int32_t st[8];
        int k = tx_tokenizer_chat_stop_tokens(m->tok, st, 8);
        for (int i = 0; i < k && i < 8; i++) {
            int dup = 0;
            for (int j = 0; j < n; j++)
                dup |= tmp[j] == st[i];
            if (!dup)
                tmp[n++] = st[i];
        }
    }
    for (int i = 0; i < n && i < cap; i++)
        ids[i] = tmp[i];
    return n;
}

TX_API int glm_model_chat_format(const glm_model_t *m, char *why, size_t whysz)
{
    if (!m)
        return tx_error(TX_EINVAL, "glm_model_chat_format: model is NULL");
    char tmp[256];
    if (!why || !whysz) {
        why = tmp;
        whysz = sizeof(tmp);
    }
    if (m->chat_format_override) {
        snprintf(why, whysz, "%s (set by the caller)",
                 tx_chat_format_name(m->chat_format_override));
        return m->chat_format_override;
    }
    size_t len = 0;
    const char *tc = m->smd ? tx_smd_tokenizer_config_json(m->smd, &len) : NULL;
    struct json_object *o = tc ? json_tokener_parse(tc) : NULL, *v = NULL;
    const char *t = NULL;
    if (o && json_object_object_get_ex(o, "chat_template", &v) &&
        json_object_is_type(v, json_type_string))
        t = json_object_get_string(v);
    int f = -1;
    if (!t) {
        /* no template in the package: by architecture, said loudly */
        const struct tx_arch_ops *arch = tx_arch_get(m->cfg.arch);
        f = arch ? arch->chat_format : TX_CHAT_GLM45;
        snprintf(why, whysz,
                 "%s: the package has no chat_template (tokenizer_config.json), chosen by "
                 "the architecture %s; set the format if this model is another GLM",
                 tx_chat_format_name(f), glm_arch_name(m->cfg.arch));
    } else {
        const char *which = "";
        f = tx_chat_format_of_template(t, &which);
        if (f > 0)
            snprintf(why, whysz, "%s: the package's chat_template is the %s template",
                     tx_chat_format_name(f), which);
    }
    json_object_put(o);
    if (f < 0)
        return tx_error(TX_ENOTSUP,
                        "the package's chat_template is not a template this runtime renders "
                        "(GLM-4, GLM-4.5/4.6, GLM-4.7/5, Qwen3, DeepSeek-V3, DeepSeek-V3.1); "
                        "choose the format explicitly "
                        "(glm_model_set_chat_format, glm-inference --chat-template-format)");
    return f;
}

TX_API int glm_model_set_chat_format(glm_model_t *m, int fmt)
{
    if (!m)
        return tx_error(TX_EINVAL, "glm_model_set_chat_format: model is NULL");
    if (fmt != 0 && !tx_chat_format_valid(fmt))
        return tx_error(TX_EINVAL, "glm_model_set_chat_format: unknown format %d", fmt);
    m->chat_format_override = fmt;
    return TX_OK;
}

TX_API int glm_chat_encode(const glm_model_t *m, const struct tx_chat_message *msgs, size_t n_msgs,
                           unsigned flags, int32_t **ids, size_t *n_ids)
{
    return glm_chat_encode_tools(m, msgs, n_msgs, NULL, NULL, flags, ids, n_ids);
}

TX_API int glm_chat_encode_tools(const glm_model_t *m, const struct tx_chat_message *msgs,
                                 size_t n_msgs, const char *tools_json,
                                 const char *const *tool_calls_json, unsigned flags,
                                 int32_t **ids, size_t *n_ids)
{
    char err[TX_ERR_MAX];
    if (!m || !ids || !n_ids)
        return tx_error(TX_EINVAL, "glm_chat_encode: NULL argument");
    if (!m->tok)
        return tx_error(TX_ENOTSUP, "glm_chat_encode: the package has no tokenizer");
    int f = glm_model_chat_format(m, NULL, 0);
    if (f < 0)
        return f;
    enum tx_chat_format fmt = (enum tx_chat_format)f;
    int rc = tx_tokenizer_chat_encode_tools(m->tok, fmt, msgs, n_msgs, tools_json,
                                            tool_calls_json, flags | TX_CHAT_ADD_GENERATION_PROMPT,
                                            ids, n_ids, err, sizeof(err));
    if (rc)
        return tx_error(rc == TX_ENOTSUP ? TX_ENOTSUP : TX_EINVAL, "chat template: %s", err);
    return TX_OK;
}

TX_API int glm_tokenize(const glm_model_t *m, const char *text, int32_t **ids, size_t *n_ids)
{
    char err[TX_ERR_MAX];
    if (!m || !text || !ids || !n_ids)
        return tx_error(TX_EINVAL, "glm_tokenize: NULL argument");
    if (!m->tok)
        return tx_error(TX_ENOTSUP, "glm_tokenize: the package has no tokenizer");
    uint64_t t0 = txp_begin();
    int rc = tx_tokenizer_encode(m->tok, text, strlen(text), 0, ids, n_ids, err, sizeof(err));
    txp_end("tokenise", t0);
    if (rc)
        return tx_error(TX_EINVAL, "tokenizer: %s", err);
    return TX_OK;
}

/* ------------------------------------------------------------------------ */
/* Generation                                                                */
/* ------------------------------------------------------------------------ */

static int is_stop(const int32_t *stop, int n, int32_t t)
{
    for (int i = 0; i < n; i++)
        if (stop[i] == t)
            return 1;
    return 0;
}

TX_API int glm_generate(glm_session_t *s, const struct glm_generate_params *p, int32_t *out,
                        int cap, int *n_out, struct glm_timings *t)
{
    if (n_out)
        *n_out = 0;
    if (!s || !p)
        return tx_error(TX_EINVAL, "glm_generate: NULL argument");
    if (p->n_prompt <= 0 || !p->prompt)
        return tx_error(TX_EINVAL, "glm_generate: a prompt of at least one token is needed");
    glm_model_t *m = s->m;
    int vrc = rt_sampling_check(m, &p->sampling, "glm_generate");
    if (vrc)
        return vrc;
    struct glm_timings tm;
    memset(&tm, 0, sizeof(tm));
    tm.load_ms = m->load_ms;
    int32_t defstop[GLM_MAX_EOS + 8];
    const int32_t *stop = p->stop;
    int n_stop = p->n_stop;
    if (!stop && n_stop == 0) {
        n_stop = glm_model_stop_tokens(m, defstop, (int)(sizeof(defstop) / sizeof(defstop[0])));
        if (n_stop > (int)(sizeof(defstop) / sizeof(defstop[0])))
            n_stop = (int)(sizeof(defstop) / sizeof(defstop[0]));
        stop = defstop;
    } else if (n_stop < 0 || !stop) {
        n_stop = 0;
    }
    if (p->flags & ~GLM_GEN_IGNORE_EOS)
        return tx_error(TX_EINVAL, "glm_generate: unknown flags 0x%x",
                        p->flags & ~GLM_GEN_IGNORE_EOS);
    /* --ignore-eos: the stop tokens are banned (-inf) rather than hidden */
    const int32_t *ban = NULL;
    int n_ban = 0;
    if (p->flags & GLM_GEN_IGNORE_EOS) {
        ban = stop;
        n_ban = n_stop;
        n_stop = 0;
    }
    struct tx_tokenizer_stream *ts =
        m->tok
            ? tx_tokenizer_stream_new(m->tok, TX_TOKENIZER_SKIP_SPECIAL | TX_TOKENIZER_SKIP_UNKNOWN)
            : NULL;

    double t0 = rt_now_ms();
    int32_t tok = -1;
    uint64_t busy = 0, macs = 0;
    /* speculative decoding (spec.c): a step yields up to k + 1 tokens,
     * queued in q[qi..qn) */
    struct spec_state *sp = NULL;
    int32_t q[GLM_SPEC_MAX_DRAFT + 1];
    int qi = 0, qn = 0;
    int rc = p->spec_draft_max ? rt_spec_begin(s, p, &busy, &macs, ban, n_ban, &sp) : TX_OK;
    if (rc) {
        tx_tokenizer_stream_free(ts);
        return rc;
    }
    const int pos_start = s->pos;
    pthread_mutex_lock(&m->lock);
    if (sp)
        rc = p->n_prompt + s->pos > s->n_ctx
                 ? tx_error(TX_EINVAL, "glm_eval: %d tokens at position %d exceed the context of %d",
                            p->n_prompt, s->pos, s->n_ctx)
                 : rt_spec_prompt(sp, p->prompt, p->n_prompt, &tok);
    else
        rc = eval_locked(s, p->prompt, p->n_prompt, 0, NULL, &p->sampling, &tok, &busy, &macs, ban,
                         n_ban);
    pthread_mutex_unlock(&m->lock);
    double t1 = rt_now_ms();
    tm.prompt_ms = t1 - t0;
    tm.n_prompt = p->n_prompt;
    int n = 0;
    enum glm_stop_reason why = GLM_STOP_NONE;
    if (!rc && p->n_predict == 0)
        why = GLM_STOP_LENGTH; /* the prompt only: the token it sampled is not emitted */
    while (!rc && why == GLM_STOP_NONE) {
        if (is_stop(stop, n_stop, tok)) {
            why = GLM_STOP_TOKEN;
            break;
        }
        if (out && n < cap)
            out[n] = tok;
        n++;
        if (p->on_token) {
            const char *txt = "";
            size_t len = 0;
            if (ts && tx_tokenizer_stream_put(ts, tok, &txt, &len)) {
                txt = "";
                len = 0;
            }
            if (p->on_token(p->user, tok, txt, len)) {
                why = GLM_STOP_CALLBACK;
                break;
            }
        }
        if (p->n_predict >= 0 && n >= p->n_predict) {
            why = GLM_STOP_LENGTH;
            break;
        }
        tm.n_eval++;
        if (qi < qn) { /* a token a verify pass has produced (in the cache) */
            tok = q[qi++];
            continue;
        }
        if (s->pos >= s->n_ctx) {
            tm.n_eval--;
            why = GLM_STOP_CONTEXT;
            break;
        }
        int32_t in = tok;
        pthread_mutex_lock(&m->lock);
        if (sp) {
            /* drafts past n_predict would be wasted */
            int k = p->n_predict >= 0 && p->n_predict - n - 1 < p->spec_draft_max
                        ? p->n_predict - n - 1
                        : p->spec_draft_max;
            rc = rt_spec_step(sp, in, k, q, &qn);
            tok = q[0];
            qi = 1;
        } else {
            rc = eval_locked(s, &in, 1, 0, NULL, &p->sampling, &tok, &busy, &macs, ban, n_ban);
        }
        pthread_mutex_unlock(&m->lock);
    }
    if (sp) {
        /* the session holds what non-speculative decoding leaves: the
         * prompt and the tokens fed; verified tokens past a stop, the
         * length or a callback's stop are rolled back like rejected drafts */
        int keep = pos_start + p->n_prompt + tm.n_eval;
        pthread_mutex_lock(&m->lock);
        if (!rc && s->pos > keep)
            s->pos = keep;
        pthread_mutex_unlock(&m->lock);
    }
    rt_spec_end(sp);
    double t2 = rt_now_ms();
    /* monitors see the final expert counts of every generate call */
    pthread_mutex_lock(&m->lock);
    rt_telemetry_publish(m, 1);
    pthread_mutex_unlock(&m->lock);
    if (ts) {
        const char *txt;
        size_t len;
        if (!rc && p->on_token && !tx_tokenizer_stream_flush(ts, &txt, &len) && len)
            p->on_token(p->user, -1, txt, len);
        tx_tokenizer_stream_free(ts);
    }
    tm.eval_ms = t2 - t1;
    tm.total_ms = t2 - t0;
    tm.prompt_tps = tm.prompt_ms > 0 ? tm.n_prompt * 1e3 / tm.prompt_ms : 0;
    tm.eval_tps = tm.eval_ms > 0 && tm.n_eval ? tm.n_eval * 1e3 / tm.eval_ms : 0;
    tm.device_ms = (double)busy / 1e6;
    tm.macs = macs;
    tm.stop = why;
    if (n_out)
        *n_out = n;
    if (t)
        *t = tm;
    return rc;
}
