/* SPDX-License-Identifier: MIT */
/*
 * Element-wise and row-wise commands: NOP, FILL, COPY, CONVERT, RMSNORM,
 * LAYERNORM, ROPE, SWIGLU, ADD, EMBED.
 */
#include <math.h>
#include <string.h>

#include "engine_internal.h"

/* Rows per parallel chunk so that a chunk has about `target` elements. */
static size_t row_chunk(size_t cols, size_t target)
{
    if (cols == 0)
        return 1;
    size_t c = target / cols;
    return c ? c : 1;
}

/* Run over rows in parallel if there is enough work, else on worker 0. */
static void par_rows(struct tx8_engine *e, size_t rows, size_t cols, eng_par_fn fn, void *ctx)
{
    uint64_t work = (uint64_t)rows * (cols ? cols : 1);
    if (work < 32768)
        eng_parallel(e, rows, rows, fn, ctx);
    else
        eng_parallel(e, rows, row_chunk(cols, 16384), fn, ctx);
}

int eng_exec_nop(struct eng_cmd *c)
{
    (void)c;
    return 0;
}

/* ---- FILL --------------------------------------------------------------- */

struct fill_ctx {
    uint32_t *dst;
    uint32_t value;
};

static void fill_fn(void *p, size_t b, size_t e, struct eng_worker *w)
{
    struct fill_ctx *f = p;
    (void)w;
    for (size_t i = b; i < e; i++)
        f->dst[i] = f->value;
}

int eng_exec_fill(struct eng_cmd *c)
{
    const struct tx8_cmd_fill *m = c->cmd;
    struct fill_ctx f = {eng_ptr(c->e, m->dst), m->value};
    eng_parallel(c->e, m->bytes / 4, 1u << 18, fill_fn, &f);
    return 0;
}

/* ---- COPY --------------------------------------------------------------- */

struct copy_ctx {
    uint8_t *dst;
    const uint8_t *src;
};

static void copy_fn(void *p, size_t b, size_t e, struct eng_worker *w)
{
    struct copy_ctx *f = p;
    (void)w;
    memcpy(f->dst + b, f->src + b, e - b);
}

int eng_exec_copy(struct eng_cmd *c)
{
    const struct tx8_cmd_copy *m = c->cmd;
    struct copy_ctx f = {eng_ptr(c->e, m->dst), eng_ptr(c->e, m->src)};
    if (!m->bytes || m->dst == m->src)
        return 0;
    int overlap = m->dst < m->src + m->bytes && m->src < m->dst + m->bytes;
    if (overlap)
        memmove(f.dst, f.src, m->bytes);
    else
        eng_parallel(c->e, m->bytes, 1u << 20, copy_fn, &f);
    return 0;
}

/* ---- CONVERT ------------------------------------------------------------ */

struct convert_ctx {
    struct tx8_engine *e;
    const struct tx8_cmd_convert *m;
};

static void convert_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct convert_ctx *x = p;
    const struct tx8_cmd_convert *m = x->m;
    const struct eng_kernels *k = x->e->k;
    unsigned sd = m->src_dtype, dd = m->dst_dtype;
    float *tmp = eng_wscratch(w, 0, (size_t)m->cols * 4 + 64);
    if (!tmp)
        return;
    const uint8_t *src = eng_ptr(x->e, m->src);
    uint8_t *dst = eng_ptr(x->e, m->dst);
    for (size_t r = b; r < end; r++) {
        const uint8_t *s = src + tx_dtype_row_bytes(sd, r * m->ld_src);
        uint8_t *d = dst + tx_dtype_row_bytes(dd, r * m->ld_dst);
        if (m->src_dtype == TX8_DTYPE_I8) {
            const float *scales = eng_ptr(x->e, m->scales);
            float sc = scales[r];
            for (size_t i = 0; i < m->cols; i++)
                tmp[i] = (float)(int8_t)s[i] * sc;
        } else {
            eng_kv_to_f32(k, tmp, s, sd, m->cols);
        }
        if (m->dst_dtype == TX8_DTYPE_I8) {
            float *scales = eng_ptr(x->e, m->scales);
            scales[r] = k->quant_row(tmp, m->cols, (int8_t *)d, 0);
        } else {
            eng_kv_from_f32(k, d, tmp, dd, m->cols);
        }
    }
}

int eng_exec_convert(struct eng_cmd *c)
{
    const struct tx8_cmd_convert *m = c->cmd;
    struct convert_ctx x = {c->e, m};
    if (!m->rows || !m->cols)
        return 0;
    par_rows(c->e, m->rows, m->cols, convert_fn, &x);
    return 0;
}

/* ---- RMSNORM / LAYERNORM ------------------------------------------------ */

struct norm_ctx {
    struct tx8_engine *e;
    const float *x, *gamma, *beta;
    float *y;
    size_t dim, ld_x, ld_y;
    float eps;
    int layer;
};

static void norm_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct norm_ctx *n = p;
    (void)w;
    for (size_t r = b; r < end; r++) {
        const float *x = n->x + r * n->ld_x;
        float *y = n->y + r * n->ld_y;
        if (!n->layer) {
            double ss = 0;
            for (size_t i = 0; i < n->dim; i++)
                ss += (double)x[i] * x[i];
            float inv = (float)(1.0 / sqrt(ss / (double)n->dim + n->eps));
            for (size_t i = 0; i < n->dim; i++)
                y[i] = x[i] * inv * n->gamma[i];
        } else {
            double s = 0, ss = 0;
            for (size_t i = 0; i < n->dim; i++)
                s += x[i];
            double mean = s / (double)n->dim;
            for (size_t i = 0; i < n->dim; i++) {
                double d = x[i] - mean;
                ss += d * d;
            }
            float inv = (float)(1.0 / sqrt(ss / (double)n->dim + n->eps));
            float fm = (float)mean;
            for (size_t i = 0; i < n->dim; i++) {
                float v = (x[i] - fm) * inv * n->gamma[i];
                y[i] = n->beta ? v + n->beta[i] : v;
            }
        }
    }
}

int eng_exec_rmsnorm(struct eng_cmd *c)
{
    const struct tx8_cmd_rmsnorm *m = c->cmd;
    if (!m->rows || !m->dim)
        return 0;
    struct norm_ctx n = {c->e,
                         eng_ptr(c->e, m->x),
                         eng_ptr(c->e, m->gamma),
                         NULL,
                         eng_ptr(c->e, m->y),
                         m->dim,
                         m->ld_x,
                         m->ld_y,
                         m->eps,
                         0};
    par_rows(c->e, m->rows, m->dim, norm_fn, &n);
    return 0;
}

int eng_exec_layernorm(struct eng_cmd *c)
{
    const struct tx8_cmd_layernorm *m = c->cmd;
    if (!m->rows || !m->dim)
        return 0;
    struct norm_ctx n = {c->e,
                         eng_ptr(c->e, m->x),
                         eng_ptr(c->e, m->gamma),
                         m->beta ? eng_ptr(c->e, m->beta) : NULL,
                         eng_ptr(c->e, m->y),
                         m->dim,
                         m->ld_x,
                         m->ld_y,
                         m->eps,
                         1};
    par_rows(c->e, m->rows, m->dim, norm_fn, &n);
    return 0;
}

/* ---- ROPE --------------------------------------------------------------- */

struct rope_ctx {
    struct tx8_engine *e;
    const struct tx8_cmd_rope *m;
    float *x;
    const int32_t *pos;
    const float *inv_freq;
};

static void rope_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct rope_ctx *r = p;
    const struct tx8_cmd_rope *m = r->m;
    size_t half = m->rot_dim / 2;
    int scaled = (m->hdr.flags & TX8_ROPE_F_ATTN_FACTOR) != 0;
    float af = m->attn_factor;
    float *cs = eng_wscratch(w, 0, half * 2 * sizeof(float) + 64);
    if (!cs)
        return;
    for (size_t t = b; t < end; t++) {
        double pos = (double)r->pos[t];
        for (size_t i = 0; i < half; i++) {
            double a = pos * (double)r->inv_freq[i];
            cs[2 * i] = (float)cos(a);
            cs[2 * i + 1] = (float)sin(a);
            if (scaled) { /* 1.4: YaRN's attention_factor, rounded like the cache */
                cs[2 * i] *= af;
                cs[2 * i + 1] *= af;
            }
        }
        for (size_t h = 0; h < m->heads; h++) {
            float *x = r->x + t * (size_t)m->ld_token + h * (size_t)m->ld_head + m->offset;
            if (m->mode == TX8_ROPE_NEOX) {
                for (size_t i = 0; i < half; i++) {
                    float x0 = x[i], x1 = x[i + half], co = cs[2 * i], si = cs[2 * i + 1];
                    x[i] = x0 * co - x1 * si;
                    x[i + half] = x0 * si + x1 * co;
                }
            } else {
                for (size_t i = 0; i < half; i++) {
                    float x0 = x[2 * i], x1 = x[2 * i + 1], co = cs[2 * i], si = cs[2 * i + 1];
                    x[2 * i] = x0 * co - x1 * si;
                    x[2 * i + 1] = x0 * si + x1 * co;
                }
            }
        }
    }
}

int eng_exec_rope(struct eng_cmd *c)
{
    const struct tx8_cmd_rope *m = c->cmd;
    if (!m->tokens || !m->heads || !m->rot_dim)
        return 0;
    struct rope_ctx r = {c->e, m, eng_ptr(c->e, m->x), eng_ptr(c->e, m->pos),
                         eng_ptr(c->e, m->inv_freq)};
    /* Tokens whose slices overlap are rotated on one worker, in order. */
    uint64_t span = (uint64_t)(m->heads - 1) * m->ld_head + m->offset + m->rot_dim;
    int overlap = m->tokens > 1 && (uint64_t)m->ld_token < span;
    uint64_t work = (uint64_t)m->tokens * m->heads * m->rot_dim;
    if (overlap || work < 32768)
        eng_parallel(c->e, m->tokens, m->tokens, rope_fn, &r);
    else
        eng_parallel(c->e, m->tokens, row_chunk((size_t)m->heads * m->rot_dim, 16384), rope_fn, &r);
    return 0;
}

/* ---- SWIGLU ------------------------------------------------------------- */

struct swiglu_ctx {
    const struct tx8_cmd_swiglu *m;
    float *y;
    const float *g, *u;
};

static void swiglu_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct swiglu_ctx *s = p;
    const struct tx8_cmd_swiglu *m = s->m;
    (void)w;
    for (size_t r = b; r < end; r++) {
        const float *g = s->g + r * m->ld_gate, *u = s->u + r * m->ld_up;
        float *y = s->y + r * m->ld_y;
        for (size_t i = 0; i < m->cols; i++)
            y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}

int eng_exec_swiglu(struct eng_cmd *c)
{
    const struct tx8_cmd_swiglu *m = c->cmd;
    if (!m->rows || !m->cols)
        return 0;
    struct swiglu_ctx s = {m, eng_ptr(c->e, m->y), eng_ptr(c->e, m->gate), eng_ptr(c->e, m->up)};
    par_rows(c->e, m->rows, m->cols, swiglu_fn, &s);
    return 0;
}

/* ---- ADD ---------------------------------------------------------------- */

struct add_ctx {
    float *y;
    const float *a, *b;
    float alpha, beta;
};

static void add_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct add_ctx *s = p;
    (void)w;
    for (size_t i = b; i < end; i++)
        s->y[i] = s->alpha * s->a[i] + s->beta * s->b[i];
}

int eng_exec_add(struct eng_cmd *c)
{
    const struct tx8_cmd_add *m = c->cmd;
    struct add_ctx s = {eng_ptr(c->e, m->y), eng_ptr(c->e, m->a), eng_ptr(c->e, m->b), m->alpha,
                        m->beta};
    if (!m->n)
        return 0;
    eng_parallel(c->e, m->n, m->n < 65536 ? m->n : 32768, add_fn, &s);
    return 0;
}

/* ---- EMBED -------------------------------------------------------------- */

struct embed_ctx {
    struct tx8_engine *e;
    const struct tx8_cmd_embed *m;
    const int32_t *ids; /* private copy */
};

static void embed_fn(void *p, size_t b, size_t end, struct eng_worker *w)
{
    struct embed_ctx *x = p;
    const struct tx8_cmd_embed *m = x->m;
    size_t es = tx_dtype_size(m->dtype);
    const uint8_t *table = eng_ptr(x->e, m->table);
    float *out = eng_ptr(x->e, m->out);
    (void)w;
    for (size_t t = b; t < end; t++) {
        size_t id = (size_t)x->ids[t];
        const uint8_t *row = table + id * m->dim * es;
        float *o = out + t * m->ld_out;
        if (m->dtype == TX8_DTYPE_I8) {
            float sc = ((const float *)eng_ptr(x->e, m->scales))[id];
            for (size_t i = 0; i < m->dim; i++)
                o[i] = (float)(int8_t)row[i] * sc;
        } else {
            x->e->k->to_f32(o, row, m->dtype, m->dim);
        }
    }
}

int eng_exec_embed(struct eng_cmd *c)
{
    const struct tx8_cmd_embed *m = c->cmd;
    if (!m->tokens)
        return 0;
    int32_t *ids = eng_jscratch(c->e, 0, (size_t)m->tokens * 4);
    if (!ids)
        return TX8_STATUS_DEVICE_ERROR;
    memcpy(ids, eng_ptr(c->e, m->ids), (size_t)m->tokens * 4);
    for (size_t t = 0; t < m->tokens; t++)
        if (ids[t] < 0 || (uint32_t)ids[t] >= m->vocab)
            return TX8_STATUS_INVALID_CMD;
    size_t es = tx_dtype_size(m->dtype);
    c->bytes_exact = 1;
    c->bytes_read = (uint64_t)m->tokens * 4 + (uint64_t)m->tokens * m->dim * es;
    if (m->dtype == TX8_DTYPE_I8)
        c->bytes_read += (uint64_t)m->tokens * 4;
    c->bytes_written = (uint64_t)m->tokens * m->dim * 4;
    if (!m->dim)
        return 0;
    struct embed_ctx x = {c->e, m, ids};
    par_rows(c->e, m->tokens, m->dim, embed_fn, &x);
    return 0;
}
