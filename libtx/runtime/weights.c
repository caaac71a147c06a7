/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: the weights in their execution precisions. The graph asks
 * for a matrix in the precision of its layer type (rt_weight_ref). If the
 * stored tensor already has that type it is used in place; otherwise a
 * converted copy is made once (CONVERT commands on the device; on the host
 * only for sparse INT8 cases the CONVERT command cannot express) into a BO
 * per (layer type, precision), and kept for later passes until
 * glm_model_trim().
 */
#include "runtime/rt_internal.h"
#include "runtime/weight_store.h"
#include "runtime/expert_cache.h"
#include <tx-internal/tx_fp8.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_dtype.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

/* ------------------------------------------------------------------------ */
/* Execution precisions                                                      */
/* ------------------------------------------------------------------------ */

/* Whether the stored tensor can serve precision p of class ltype as is. */
int rt_stored_fits(const glm_model_t *m, const struct rt_mat *x, glm_precision_t p)
{
    const struct tx_smd_tensor *st = m->tensors[x->t].smd;
    uint16_t want = x->ltype == RT_ROUTER ? TX8_DTYPE_F32 : rt_prec_dtype(p);
    if (st->dtype != want)
        return 0;
    if (x->ltype == GLM_EMBEDDING && st->dtype == TX8_DTYPE_I8 && st->group_size)
        return 0; /* EMBED takes one scale per row */
    return 1;
}

static glm_precision_t eff_prec(const struct rt_mat *x, glm_precision_t p)
{
    return x->ltype == RT_ROUTER ? FP32 : p;
}

/* INT8 group size of a converted copy. */
uint32_t rt_copy_group(const glm_model_t *m, const struct rt_mat *x)
{
    const struct tx_smd_tensor *st = m->tensors[x->t].smd;
    if (x->ltype == GLM_EMBEDDING || x->ltype == GLM_OUTPUT || x->ltype == RT_ROUTER)
        return 0;
    uint32_t g = m->plan_group[x->ltype];
    if (!g || st->cols % g)
        return 0;
    if (st->format == TX8_WFMT_BLOCK_SPARSE)
        return 0; /* sparse copies are quantised per row (host path) */
    return g;
}

uint64_t rt_copy_data_bytes(const glm_model_t *m, const struct rt_mat *x, uint16_t dtype)
{
    const struct tx_smd_tensor *st = m->tensors[x->t].smd;
    uint64_t n = st->format == TX8_WFMT_BLOCK_SPARSE ? (uint64_t)st->nnz_blocks * TX8_SPARSE_BLOCK
                                                     : (uint64_t)st->rows * st->cols;
    return n * tx_dtype_size(dtype);
}

uint64_t rt_copy_scales_bytes(const glm_model_t *m, const struct rt_mat *x, uint16_t dtype,
                              uint32_t g)
{
    const struct tx_smd_tensor *st = m->tensors[x->t].smd;
    if (dtype == TX8_DTYPE_F8_E4M3) /* per 128 x 128 block */
        return txm_fp8_grid(st->rows, TX8_FP8_BLOCK) * txm_fp8_grid(st->cols, TX8_FP8_BLOCK) * 4;
    if (dtype != TX8_DTYPE_I8)
        return 0;
    return (uint64_t)st->rows * (g ? st->cols / g : 1) * 4;
}

static void fill_stored_copy(glm_model_t *m, struct rt_mat *x, glm_precision_t p)
{
    const struct rt_tensor *t = &m->tensors[x->t];
    struct rt_copy *c = &x->copy[p];
    c->bo = m->w_bo;
    c->data = t->off;
    c->scales = t->smd->scales_offset ? t->off + (t->smd->scales_offset - t->smd->data_offset) : 0;
    c->dtype = t->smd->dtype;
    c->group = t->smd->group_size;
}

int rt_weight_ref(glm_model_t *m, int mi, glm_precision_t p, struct tx_weight_ref *w)
{
    struct rt_mat *x = &m->mats[mi];
    const struct rt_tensor *t = &m->tensors[x->t];
    p = eff_prec(x, p);
    if (t->streamed)
        return rt_stream_weight_ref(m, mi, p, w);
    struct rt_copy *c = &x->copy[p];
    if (!c->bo)
        return tx_error(TX_EINVAL, "internal: %s has no %s copy", t->info.name,
                        glm_precision_name(p));
    memset(w, 0, sizeof(*w));
    w->data = tx_ref(c->bo, c->data);
    if (rt_dtype_scaled(c->dtype))
        w->scales = tx_ref(c->bo, c->scales);
    w->rows = t->smd->rows;
    w->cols = t->smd->cols;
    w->dtype = c->dtype;
    w->format = t->smd->format;
    w->group_size = rt_dtype_scaled(c->dtype) ? c->group : 0;
    if (t->smd->format == TX8_WFMT_BLOCK_SPARSE) {
        w->nnz_blocks = t->smd->nnz_blocks;
        w->index = tx_ref(m->w_bo, t->off + (t->smd->index_offset - t->smd->data_offset));
    }
    return TX_OK;
}

/* Host conversion for sparse tensors involving INT8 (CONVERT cannot place
 * per-row scales of a block list). Reads the stored extent through the
 * mapping, writes the copy through the copy's mapping. */
void rt_host_convert_sparse(const struct tx_smd_tensor *st, const uint8_t *base,
                            const struct rt_copy *c, void *cmap)
{
    const uint32_t *row_ptr = (const uint32_t *)(base + (st->index_offset - st->data_offset));
    const uint16_t *colb = (const uint16_t *)(row_ptr + st->rows + 1);
    const float *sc = st->dtype == TX8_DTYPE_I8
                          ? (const float *)(base + (st->scales_offset - st->data_offset))
                          : NULL;
    uint32_t gpr = st->group_size ? st->cols / st->group_size : 1;
    uint8_t *dst = (uint8_t *)cmap + c->data;
    float *dsc = c->dtype == TX8_DTYPE_I8 ? (float *)((uint8_t *)cmap + c->scales) : NULL;
    float blk[TX8_SPARSE_BLOCK];
    for (uint32_t r = 0; r < st->rows; r++) {
        float amax = 0.0f;
        /* pass 1 (I8 output): row maximum */
        for (int pass = dsc ? 0 : 1; pass < 2; pass++) {
            float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
            for (uint32_t b = row_ptr[r]; b < row_ptr[r + 1]; b++) {
                for (int i = 0; i < TX8_SPARSE_BLOCK; i++) {
                    uint64_t k = (uint64_t)b * TX8_SPARSE_BLOCK + (uint64_t)i;
                    float v;
                    switch (st->dtype) {
                    case TX8_DTYPE_F32:
                        memcpy(&v, base + k * 4, 4);
                        break;
                    case TX8_DTYPE_F16: {
                        uint16_t h;
                        memcpy(&h, base + k * 2, 2);
                        v = tx_f16_to_f32(h);
                        break;
                    }
                    case TX8_DTYPE_BF16: {
                        uint16_t h;
                        memcpy(&h, base + k * 2, 2);
                        v = tx_bf16_to_f32(h);
                        break;
                    }
                    default: {
                        uint32_t col = (uint32_t)colb[b] * TX8_SPARSE_BLOCK + (uint32_t)i;
                        uint32_t gi = st->group_size ? col / st->group_size : 0;
                        v = (float)(int8_t)base[k] * sc[(uint64_t)r * gpr + gi];
                    }
                    }
                    blk[i] = v;
                }
                for (int i = 0; i < TX8_SPARSE_BLOCK; i++) {
                    uint64_t k = (uint64_t)b * TX8_SPARSE_BLOCK + (uint64_t)i;
                    float v = blk[i];
                    if (pass == 0) {
                        if (fabsf(v) > amax)
                            amax = fabsf(v);
                        continue;
                    }
                    switch (c->dtype) {
                    case TX8_DTYPE_F32:
                        memcpy(dst + k * 4, &v, 4);
                        break;
                    case TX8_DTYPE_F16: {
                        uint16_t h = tx_f32_to_f16(v);
                        memcpy(dst + k * 2, &h, 2);
                        break;
                    }
                    case TX8_DTYPE_BF16: {
                        uint16_t h = tx_f32_to_bf16(v);
                        memcpy(dst + k * 2, &h, 2);
                        break;
                    }
                    default: {
                        float q = nearbyintf(v * inv);
                        if (q > 127.0f)
                            q = 127.0f;
                        if (q < -127.0f)
                            q = -127.0f;
                        dst[k] = (uint8_t)(int8_t)q;
                    }
                    }
                }
            }
            if (pass == 1 && dsc)
                dsc[r] = amax / 127.0f;
        }
    }
}

/*
 * CONVERT commands making copy c (in dst_bo) of stored tensor st, whose
 * extent is at src_bo + src_off: F32/F16/BF16 directly; through f32 in tmp
 * for INT8 from F16/BF16 and for F16/BF16 from INT8; INT8 groups as
 * [rows * cols / g x g] matrices. Sparse tensors convert their data array
 * ([nnz_blocks x 32]) and keep the stored index (not for INT8: host path).
 */
int rt_emit_convert(tx_cmdbuf_t *cmd, const struct tx_smd_tensor *st, tx_bo_t *src_bo,
                    uint64_t src_off, tx_bo_t *dst_bo, const struct rt_copy *c, tx_bo_t *tmp)
{
    uint16_t dtype = c->dtype;
    uint32_t g = c->group;
    int s_i8 = st->dtype == TX8_DTYPE_I8, d_i8 = dtype == TX8_DTYPE_I8;
    int rc;
    tx_ref_t src = tx_ref(src_bo, src_off);
    tx_ref_t ssc =
        s_i8 ? tx_ref(src_bo, src_off + (st->scales_offset - st->data_offset)) : tx_ref(NULL, 0);
    uint32_t rows = st->rows, cols = st->cols;
    if (st->format == TX8_WFMT_BLOCK_SPARSE) {
        rows = st->nnz_blocks;
        cols = TX8_SPARSE_BLOCK;
    }
    struct tx_convert_args a;
    /* step 1: anything not directly convertible goes through f32 in tmp */
    uint16_t cur = st->dtype;
    if (s_i8) {
        uint32_t gs = st->group_size;
        memset(&a, 0, sizeof(a));
        a.dst = (dtype == TX8_DTYPE_F32) ? tx_ref(dst_bo, c->data) : tx_ref(tmp, 0);
        a.src = src;
        a.scales = ssc;
        a.rows = gs ? (uint32_t)((uint64_t)rows * cols / gs) : rows;
        a.cols = gs ? gs : cols;
        a.ld_dst = a.ld_src = a.cols;
        a.dst_dtype = TX8_DTYPE_F32;
        a.src_dtype = TX8_DTYPE_I8;
        if ((rc = tx_cmd_convert(cmd, &a)))
            return tx_error(rc, "weight conversion: %s", tx_last_error());
        if (dtype == TX8_DTYPE_F32)
            return TX_OK;
        src = tx_ref(tmp, 0);
        cur = TX8_DTYPE_F32;
    } else if (d_i8 && st->dtype != TX8_DTYPE_F32) {
        memset(&a, 0, sizeof(a));
        a.dst = tx_ref(tmp, 0);
        a.src = src;
        a.rows = rows;
        a.cols = cols;
        a.ld_dst = a.ld_src = cols;
        a.dst_dtype = TX8_DTYPE_F32;
        a.src_dtype = st->dtype;
        if ((rc = tx_cmd_convert(cmd, &a)))
            return tx_error(rc, "weight conversion: %s", tx_last_error());
        src = tx_ref(tmp, 0);
        cur = TX8_DTYPE_F32;
    }
    /* step 2: to the target */
    memset(&a, 0, sizeof(a));
    a.dst = tx_ref(dst_bo, c->data);
    a.src = src;
    if (d_i8) {
        a.scales = tx_ref(dst_bo, c->scales);
        a.rows = g ? (uint32_t)((uint64_t)rows * cols / g) : rows;
        a.cols = g ? g : cols;
    } else {
        a.rows = rows;
        a.cols = cols;
    }
    a.ld_dst = a.ld_src = a.cols;
    a.dst_dtype = dtype;
    a.src_dtype = cur;
    if ((rc = tx_cmd_convert(cmd, &a)))
        return tx_error(rc, "weight conversion: %s", tx_last_error());
    return TX_OK;
}

/*
 * A conversion from or to FP8 (issue 38), through the host: the stored
 * extent dequantised (tx_smd_dequant, exact for FP8: e4m3 x scale); to FP8
 * quantised per 128 x 128 block the Hugging Face way into the copy; from
 * FP8, the f32 values into the scratch buffer tmp and one CONVERT to the
 * copy's type (the device's own rounding / INT8 quantisation, as for the
 * other conversions), run at once.
 */
static int fp8_host_convert(glm_model_t *m, const struct rt_tensor *t, const struct rt_copy *c,
                            void *cmap, tx_bo_t *tmp, tx_cmdbuf_t *cmd, tx_bo_t *dst_bo)
{
    const struct tx_smd_tensor *st = t->smd;
    const uint64_t R = st->rows, C = st->cols, n = R * C;
    void *tmap = NULL;
    float *f = NULL;
    char err[TX_ERR_MAX];
    int rc = TX_OK;
    if (c->dtype != TX8_DTYPE_F8_E4M3) {
        if (!tmp || tx_bo_map(tmp, &tmap))
            return tx_error(TX_ENOMEM, "%s: no scratch buffer for the FP8 conversion",
                            t->info.name);
        f = tmap;
    } else if (!(f = malloc(n * sizeof(float) + 1))) {
        return tx_error(TX_ENOMEM, "%s: out of memory", t->info.name);
    }
    if (tx_smd_dequant(st, (const uint8_t *)m->w_map + t->off, f, err, sizeof(err)) < 0) {
        rc = tx_error(TX_EINVAL, "%s: %s", t->info.name, err);
        goto out;
    }
    if (c->dtype == TX8_DTYPE_F8_E4M3) {
        uint8_t *q = (uint8_t *)cmap + c->data;
        float *sc = (float *)(void *)((uint8_t *)cmap + c->scales);
        uint64_t ns = txm_fp8_grid(C, TX8_FP8_BLOCK);
        for (uint64_t r0 = 0; r0 < R; r0 += TX8_FP8_BLOCK) {
            uint64_t nr = R - r0 < TX8_FP8_BLOCK ? R - r0 : TX8_FP8_BLOCK;
            txm_fp8_quantise_band(f + r0 * C, (uint32_t)nr, (uint32_t)C, TX8_FP8_BLOCK, q + r0 * C,
                                  sc + r0 / TX8_FP8_BLOCK * ns);
        }
        goto out;
    }
    struct tx_smd_tensor f32 = *st; /* the f32 values in tmp, dense */
    f32.dtype = TX8_DTYPE_F32;
    f32.format = TX8_WFMT_DENSE;
    f32.group_size = 0;
    f32.scales_offset = 0;
    rc = rt_emit_convert(cmd, &f32, tmp, 0, dst_bo, c, tmp);
    if (rc == TX_OK)
        rc = rt_run(m, cmd, "weight conversion", NULL);
    tx_cmdbuf_reset(cmd);
out:
    if (c->dtype == TX8_DTYPE_F8_E4M3)
        free(f);
    return rc;
}

/*
 * Make every matrix of the classes whose precision differs available in the
 * plan's precision. Conversions of one class share a BO and run as one or
 * more device jobs; a temporary f32 BO holds intermediate results.
 */
static void trim_keep(glm_model_t *m, const glm_precision_plan_t *keep);

static int prepare_class(glm_model_t *m, int ltype, glm_precision_t p,
                         const glm_precision_plan_t *target)
{
    struct rt_conv_bo *cb = &m->conv[ltype][p];
    uint16_t dtype = rt_prec_dtype(p);
    uint64_t need = 0, tmp_need = 0;
    int n_conv = 0;

    for (int i = 0; i < m->n_mats; i++) {
        struct rt_mat *x = &m->mats[i];
        if (x->ltype != ltype || x->copy[p].bo || m->tensors[x->t].streamed)
            continue;
        if (rt_stored_fits(m, x, p)) {
            fill_stored_copy(m, x, p);
            continue;
        }
        if ((dtype == TX8_DTYPE_F8_E4M3 || m->tensors[x->t].smd->dtype == TX8_DTYPE_F8_E4M3) &&
            m->tensors[x->t].smd->format != TX8_WFMT_DENSE)
            return tx_error(TX_ENOTSUP, "%s: a block-sparse tensor cannot run as FP8",
                            m->tensors[x->t].info.name);
        uint32_t g = dtype == TX8_DTYPE_I8        ? rt_copy_group(m, x)
                     : dtype == TX8_DTYPE_F8_E4M3 ? TX8_FP8_BLOCK
                                                  : 0;
        need = ALIGN_UP(need, 256) + rt_copy_data_bytes(m, x, dtype);
        need = ALIGN_UP(need, 64) + rt_copy_scales_bytes(m, x, dtype, g);
        const struct tx_smd_tensor *st = m->tensors[x->t].smd;
        uint64_t f32b = (uint64_t)st->rows * st->cols * 4;
        if (st->format == TX8_WFMT_DENSE && f32b > tmp_need)
            tmp_need = f32b;
        n_conv++;
    }
    if (!n_conv)
        return TX_OK;
    if (cb->bo)
        return tx_error(TX_EINVAL, "internal: conversion BO of %s/%s already exists",
                        glm_layer_type_name((glm_layer_type_t)ltype), glm_precision_name(p));
    double t0 = rt_now_ms();
    int rc = tx_bo_alloc(m->dev, need ? need : 64, 0, m->label_w, &cb->bo);
    if (rc == TX_ENOSPC) {
        trim_keep(m, target);
        rc = tx_bo_alloc(m->dev, need ? need : 64, 0, m->label_w, &cb->bo);
    }
    if (rc)
        return tx_error(rc,
                        "precision %s for %s weights needs %llu more bytes of device memory "
                        "for converted copies: %s",
                        glm_precision_name(p), glm_layer_type_name((glm_layer_type_t)ltype),
                        (unsigned long long)need, tx_last_error());
    cb->size = need ? need : 64;
    rc = tx_bo_map(cb->bo, &cb->map);
    if (rc)
        goto fail;

    tx_bo_t *tmp = NULL;
    if (tmp_need) {
        rc = tx_bo_alloc(m->dev, tmp_need, 0, m->label_w, &tmp);
        if (rc) {
            rc = tx_error(rc, "conversion to %s needs a %llu byte scratch buffer: %s",
                          glm_precision_name(p), (unsigned long long)tmp_need, tx_last_error());
            goto fail;
        }
    }
    tx_cmdbuf_t *cmd = NULL;
    rc = tx_cmdbuf_create(m->dev, &cmd);
    if (rc)
        goto fail_tmp;

    uint64_t off = 0;
    size_t max_cmd = m->dinfo.max_cmd_size ? m->dinfo.max_cmd_size : (1u << 20);
    for (int i = 0; i < m->n_mats; i++) {
        struct rt_mat *x = &m->mats[i];
        if (x->ltype != ltype || x->copy[p].bo || m->tensors[x->t].streamed)
            continue;
        const struct rt_tensor *t = &m->tensors[x->t];
        const struct tx_smd_tensor *st = t->smd;
        struct rt_copy *c = &x->copy[p];
        uint32_t g = dtype == TX8_DTYPE_I8        ? rt_copy_group(m, x)
                     : dtype == TX8_DTYPE_F8_E4M3 ? TX8_FP8_BLOCK
                                                  : 0;
        off = ALIGN_UP(off, 256);
        c->data = off;
        off += rt_copy_data_bytes(m, x, dtype);
        off = ALIGN_UP(off, 64);
        c->scales = off;
        off += rt_copy_scales_bytes(m, x, dtype, g);
        c->dtype = dtype;
        c->group = g;
        int s_i8 = st->dtype == TX8_DTYPE_I8, d_i8 = dtype == TX8_DTYPE_I8;

        if (st->format == TX8_WFMT_BLOCK_SPARSE && (s_i8 || d_i8)) {
            rt_host_convert_sparse(st, (const uint8_t *)m->w_map + t->off, c, cb->map);
            c->bo = cb->bo;
            continue;
        }
        if (st->dtype == TX8_DTYPE_F8_E4M3 || dtype == TX8_DTYPE_F8_E4M3) {
            /* through the host (CONVERT has no FP8): the pending commands
             * first, as the scratch buffer is reused */
            rc = rt_run(m, cmd, "weight conversion", NULL);
            if (rc)
                goto fail_cmd;
            tx_cmdbuf_reset(cmd);
            rc = fp8_host_convert(m, t, c, cb->map, tmp, cmd, cb->bo);
            if (rc)
                goto fail_cmd;
            c->bo = cb->bo;
            continue;
        }
        rc = rt_emit_convert(cmd, st, m->w_bo, t->off, cb->bo, c, tmp);
        if (rc)
            goto fail_cmd;
        c->bo = cb->bo;
        size_t bytes = 0;
        tx_cmdbuf_size(cmd, &bytes, NULL);
        if (bytes + 4 * sizeof(struct tx8_cmd_convert) > max_cmd) {
            rc = rt_run(m, cmd, "weight conversion", NULL);
            if (rc)
                goto fail_cmd;
            tx_cmdbuf_reset(cmd);
        }
    }
    rc = rt_run(m, cmd, "weight conversion", NULL);
    if (rc)
        goto fail_cmd;
    tx_cmdbuf_destroy(cmd);
    if (tmp)
        tx_bo_free(tmp);
    rt_debug("converted %d %s tensors to %s (%llu bytes) in %.1f ms", n_conv,
             glm_layer_type_name((glm_layer_type_t)ltype), glm_precision_name(p),
             (unsigned long long)need, rt_now_ms() - t0);
    return TX_OK;

fail_cmd:
    tx_cmdbuf_destroy(cmd);
fail_tmp:
    if (tmp)
        tx_bo_free(tmp);
fail:
    for (int i = 0; i < m->n_mats; i++)
        if (m->mats[i].ltype == ltype && m->mats[i].copy[p].bo == cb->bo)
            memset(&m->mats[i].copy[p], 0, sizeof(m->mats[i].copy[p]));
    tx_bo_free(cb->bo);
    memset(cb, 0, sizeof(*cb));
    return rc;
}

int rt_prepare_plan(glm_model_t *m, const glm_precision_plan_t *plan)
{
    if (m->active_valid && !memcmp(&m->active, plan, sizeof(*plan)))
        return TX_OK;
    rt_dgraph_drop(m); /* it names the old plan's conversions and tables */
    for (int lt = 0; lt < RT_NLTYPES; lt++) {
        if (lt == GLM_NORM)
            continue; /* norms are f32 vectors */
        glm_precision_t p = lt == RT_ROUTER ? FP32 : plan->precision[lt];
        int rc = prepare_class(m, lt, p, plan);
        if (rc)
            return rc;
    }
    int arc = rt_absorb_prepare(m, plan->precision[GLM_ATTENTION]);
    if (arc)
        return arc;
    int rc = m->store->plan(m, plan); /* the routed experts' tables or slots */
    if (rc)
        return rc;
    if (rt_debug_on()) {
        char buf[160];
        rt_debug("plan in force: %s", glm_plan_format(plan, buf, sizeof(buf)));
    }
    m->active = *plan;
    m->active_valid = 1;
    return TX_OK;
}

/* Free the conversion BOs that neither `keep` (may be NULL) nor the active
 * plan uses. */
static void trim_keep(glm_model_t *m, const glm_precision_plan_t *keep)
{
    for (int lt = 0; lt < RT_NLTYPES; lt++)
        for (int p = 0; p < GLM_PRECISION_COUNT; p++) {
            struct rt_conv_bo *cb = &m->conv[lt][p];
            if (!cb->bo)
                continue;
            if (lt == RT_ROUTER && p == FP32)
                continue;
            if (lt < GLM_LAYER_TYPE_COUNT) {
                if (m->active_valid && (int)m->active.precision[lt] == p)
                    continue;
                if (keep && (int)keep->precision[lt] == p)
                    continue;
            }
            for (int i = 0; i < m->n_mats; i++)
                if (m->mats[i].copy[p].bo == cb->bo)
                    memset(&m->mats[i].copy[p], 0, sizeof(m->mats[i].copy[p]));
            if (lt == GLM_EXPERT && m->tables_prec == p)
                m->tables_prec = -1; /* the tables named the freed copies */
            rt_dgraph_drop(m);
            tx_bo_free(cb->bo);
            memset(cb, 0, sizeof(*cb));
        }
}

TX_API int glm_model_trim(glm_model_t *m)
{
    if (!m)
        return tx_error(TX_EINVAL, "glm_model_trim: model is NULL");
    pthread_mutex_lock(&m->lock);
    trim_keep(m, NULL);
    pthread_mutex_unlock(&m->lock);
    return TX_OK;
}

/* Bytes of weights one decode step reads under plan p (experts: top-k of
 * them per MoE layer; the embedding: one row). */
uint64_t rt_decode_bytes(const glm_model_t *m, const glm_precision_plan_t *plan)
{
    double total = 0;
    int E = m->cfg.n_routed_experts, k = m->cfg.num_experts_per_tok;
    for (int i = 0; i < m->n_mats; i++) {
        const struct rt_mat *x = &m->mats[i];
        const struct rt_tensor *t = &m->tensors[x->t];
        glm_precision_t p = x->ltype == RT_ROUTER ? FP32 : plan->precision[x->ltype];
        uint16_t dt = x->ltype == RT_ROUTER ? TX8_DTYPE_F32 : rt_prec_dtype(p);
        double elems = t->smd->format == TX8_WFMT_BLOCK_SPARSE
                           ? (double)t->smd->nnz_blocks * TX8_SPARSE_BLOCK
                           : (double)t->smd->rows * t->smd->cols;
        double b = elems * (double)tx_dtype_size(dt);
        if (dt == TX8_DTYPE_I8)
            b += (double)t->smd->rows * 4;
        if (x->ltype == GLM_EMBEDDING)
            b = (double)t->smd->cols * (double)tx_dtype_size(dt) + 4; /* one row */
        if (t->info.expert >= 0)
            b *= E ? (double)k / E : 0;
        total += b;
    }
    for (int i = 0; i < m->n_vecs; i++)
        total += (double)m->vecs[i].n * 4;
    return (uint64_t)total;
}
