/* SPDX-License-Identifier: MIT */
/*
 * GLM runtime: the absorbed-MLA weights (issue 11). Absorbed MLA keeps the
 * latent cache (kv_lora_rank + qk_rope_head_dim per position and layer) and
 * never expands it per head: kv_b_proj = [W_UK_h ; W_UV_h] per head is
 * split into
 *   W_UK_h^T  [kv_lora_rank][qk_nope_head_dim]  q_lat_h = q_nope_h W_UK_h
 *   W_UV_h    [v_head_dim][kv_lora_rank]        o_h = W_UV_h o_lat_h
 * so that q_nope_h . (W_UK_h c) = (W_UK_h^T q_nope_h) . c and
 * sum_s p_s W_UV_h c_s = W_UV_h (sum_s p_s c_s) (DeepSeek-V2 section 2.1.2,
 * as FlashMLA, vLLM and llama.cpp compute it). Both are made on the host
 * from the stored kv_b_proj (any dtype, dense or sparse, resident or
 * streamed) into one BO per model in the attention layer type's precision
 * (F32 for FP32, F16 / BF16, I8 with one scale per row for INT8_MIXED),
 * remade when the attention precision changes. The graph (blocks.c) runs
 * one MATMUL per head with them.
 */
#include "runtime/rt_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_dtype.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

int rt_absorb_enabled(const glm_model_t *m)
{
    return m->cfg.kv_lora_rank > 0 && m->cfg.qk_nope_head_dim > 0 &&
           rt_mat_of(m, GLM_T_KV_B_PROJ, 0) != RT_NONE;
}

void rt_absorb_free(glm_model_t *m)
{
    if (m->ab.bo)
        tx_bo_free(m->ab.bo);
    free(m->ab.off);
    memset(&m->ab, 0, sizeof(m->ab));
    m->ab.prec = -1;
}

/* one matrix (rows x cols f32) into the copy's dtype at d (+ scales at sc) */
static void store(const float *src, uint32_t rows, uint32_t cols, uint16_t dt, uint8_t *d,
                  float *sc)
{
    for (uint32_t r = 0; r < rows; r++) {
        const float *x = src + (size_t)r * cols;
        switch (dt) {
        case TX8_DTYPE_F32:
            memcpy(d + (size_t)r * cols * 4, x, (size_t)cols * 4);
            break;
        case TX8_DTYPE_F16:
        case TX8_DTYPE_BF16:
            for (uint32_t i = 0; i < cols; i++) {
                uint16_t h = dt == TX8_DTYPE_F16 ? tx_f32_to_f16(x[i]) : tx_f32_to_bf16(x[i]);
                memcpy(d + ((size_t)r * cols + i) * 2, &h, 2);
            }
            break;
        default: { /* I8, symmetric per row */
            float amax = 0;
            for (uint32_t i = 0; i < cols; i++)
                amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
            float s = amax > 0 ? amax / 127.0f : 0.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
            sc[r] = s;
            int8_t *q = (int8_t *)d + (size_t)r * cols;
            for (uint32_t i = 0; i < cols; i++) {
                float v = nearbyintf(x[i] * inv);
                q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
            }
        }
        }
    }
}

/* kv_b_proj of layer l as f32 [H * (nope + vd)][lora] into w */
static int kvb_f32(glm_model_t *m, int l, float *w)
{
    char err[TX_ERR_MAX];
    int mi = rt_mat_of(m, GLM_T_KV_B_PROJ, l);
    if (mi == RT_NONE)
        return tx_error(TX_EINVAL, "absorbed MLA: layer %d has no kv_b_proj", l);
    const struct rt_tensor *t = &m->tensors[m->mats[mi].t];
    const uint8_t *ext = NULL;
    void *buf = NULL;
    if (t->streamed) {
        buf = malloc(t->smd->extent_size);
        if (!buf)
            return tx_error(TX_ENOMEM, "absorbed MLA: out of memory");
        if (tx_smd_read_extent(m->smd, t->smd, buf, t->smd->extent_size, 0, err, sizeof(err))) {
            free(buf);
            return tx_error(TX_EIO, "%s: %s", tx_smd_path(m->smd), err);
        }
        ext = buf;
    } else {
        ext = (const uint8_t *)m->w_map + t->off;
    }
    int rc = tx_smd_dequant(t->smd, ext, w, err, sizeof(err));
    free(buf);
    if (rc)
        return tx_error(rc, "%s: %s", tx_smd_path(m->smd), err);
    return TX_OK;
}

int rt_absorb_prepare(glm_model_t *m, glm_precision_t p)
{
    if (!rt_absorb_enabled(m))
        return TX_OK;
    if (m->ab.bo && m->ab.prec == (int)p)
        return TX_OK;
    const struct glm_config *c = &m->cfg;
    int L = rt_layers(m), H = c->num_attention_heads, nope = c->qk_nope_head_dim,
        vd = c->v_head_dim, lora = c->kv_lora_rank;
    /* FP8 attention: the absorbed products exact in f32 (no second rounding) */
    uint16_t dt = rt_prec_dtype(p) == TX8_DTYPE_F8_E4M3 ? TX8_DTYPE_F32 : rt_prec_dtype(p);
    uint64_t es = tx_dtype_size(dt);
    rt_absorb_free(m);
    m->ab.off = calloc((size_t)L * 4, sizeof(uint64_t));
    if (!m->ab.off)
        return tx_error(TX_ENOMEM, "absorbed MLA: out of memory");
    /* per layer: W_UK^T data, W_UV data, then their per-row scales (I8) */
    uint64_t off = 0, uk = (uint64_t)H * lora * nope, uv = (uint64_t)H * vd * lora;
    for (int l = 0; l < L; l++) {
        m->ab.off[l * 4 + 0] = off;
        off = ALIGN_UP(off + uk * es, 256);
        m->ab.off[l * 4 + 1] = off;
        off = ALIGN_UP(off + uv * es, 256);
        m->ab.off[l * 4 + 2] = off;
        off = ALIGN_UP(off + (dt == TX8_DTYPE_I8 ? (uint64_t)H * lora * 4 : 0), 256);
        m->ab.off[l * 4 + 3] = off;
        off = ALIGN_UP(off + (dt == TX8_DTYPE_I8 ? (uint64_t)H * vd * 4 : 0), 256);
    }
    int rc = tx_bo_alloc(m->dev, off, 0, m->label_w, &m->ab.bo);
    if (rc) {
        rc = tx_error(rc, "absorbed MLA: %llu bytes of device memory for W_UK^T / W_UV: %s",
                      (unsigned long long)off, tx_last_error());
        rt_absorb_free(m);
        return rc;
    }
    void *map = NULL;
    if ((rc = tx_bo_map(m->ab.bo, &map))) {
        rc = tx_error(rc, "absorbed MLA: map: %s", tx_last_error());
        rt_absorb_free(m);
        return rc;
    }
    m->ab.size = off;
    size_t rows = (size_t)H * (nope + vd);
    float *w = malloc(sizeof(float) * rows * (size_t)lora);
    float *tmp = malloc(sizeof(float) * (size_t)lora * (size_t)(nope > vd ? nope : vd));
    if (!w || !tmp) {
        free(w);
        free(tmp);
        rt_absorb_free(m);
        return tx_error(TX_ENOMEM, "absorbed MLA: out of memory");
    }
    uint8_t *base = map;
    for (int l = 0; l < L && !rc; l++) {
        rc = kvb_f32(m, l, w);
        for (int h = 0; h < H && !rc; h++) {
            const float *wh = w + (size_t)h * (nope + vd) * lora;
            /* W_UK_h^T: [lora][nope] */
            for (int j = 0; j < lora; j++)
                for (int d = 0; d < nope; d++)
                    tmp[(size_t)j * nope + d] = wh[(size_t)d * lora + j];
            store(tmp, (uint32_t)lora, (uint32_t)nope, dt,
                  base + m->ab.off[l * 4 + 0] + (uint64_t)h * lora * nope * es,
                  (float *)(void *)(base + m->ab.off[l * 4 + 2]) + (size_t)h * lora);
            /* W_UV_h: the V rows as stored, [vd][lora] */
            store(wh + (size_t)nope * lora, (uint32_t)vd, (uint32_t)lora, dt,
                  base + m->ab.off[l * 4 + 1] + (uint64_t)h * vd * lora * es,
                  (float *)(void *)(base + m->ab.off[l * 4 + 3]) + (size_t)h * vd);
        }
    }
    free(w);
    free(tmp);
    if (rc) {
        rt_absorb_free(m);
        return rc;
    }
    m->ab.prec = (int)p;
    m->ab.dtype = dt;
    rt_debug("absorbed MLA: W_UK^T / W_UV of %d layers in %s (%llu bytes)", L,
             tx_dtype_name(dt), (unsigned long long)off);
    return TX_OK;
}

/* which 0: W_UK_h^T [lora][nope]; 1: W_UV_h [vd][lora] */
int rt_absorb_ref(const glm_model_t *m, int l, int h, int which, struct tx_weight_ref *w)
{
    const struct glm_config *c = &m->cfg;
    if (!m->ab.bo)
        return tx_error(TX_EINVAL, "internal: absorbed MLA weights not prepared");
    uint32_t rows = which ? (uint32_t)c->v_head_dim : (uint32_t)c->kv_lora_rank;
    uint32_t cols = which ? (uint32_t)c->kv_lora_rank : (uint32_t)c->qk_nope_head_dim;
    uint64_t es = tx_dtype_size(m->ab.dtype);
    memset(w, 0, sizeof(*w));
    w->data = tx_ref(m->ab.bo, m->ab.off[l * 4 + which] + (uint64_t)h * rows * cols * es);
    if (m->ab.dtype == TX8_DTYPE_I8)
        w->scales = tx_ref(m->ab.bo, m->ab.off[l * 4 + 2 + which] + (uint64_t)h * rows * 4);
    w->rows = rows;
    w->cols = cols;
    w->dtype = m->ab.dtype;
    w->format = TX8_WFMT_DENSE;
    return TX_OK;
}
