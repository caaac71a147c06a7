/* SPDX-License-Identifier: MIT */
/*
 * Static checks of every command: field validity and the byte ranges of all
 * direct operands (the job runner checks those against the job's ranges
 * before the command runs). Indirect operands (sparse indexes, expert
 * tables, token ids, key selections) are checked when the command runs,
 * since earlier commands of the same job may write them.
 *
 * Conventions (docs/engine.md): a strided matrix [rows x cols] with row
 * stride ld occupies [base, base + ((rows - 1) * ld + cols) * esize) and
 * needs ld >= cols; operands must be aligned to their element size.
 */
#include <math.h>
#include <string.h>

#include "engine_internal.h"

#define R TX8_ACCESS_READ
#define W TX8_ACCESS_WRITE
#define RW (TX8_ACCESS_READ | TX8_ACCESS_WRITE)

#define TRY(x)                                                                                     \
    do {                                                                                           \
        int st_ = (x);                                                                             \
        if (st_)                                                                                   \
            return st_;                                                                            \
    } while (0)

/* An operand whose extent overflows 64 bits: it certainly leaves the job's
 * ranges; the runner reports the first byte from addr on that is outside. */
static int ovf(struct eng_cmd *c, uint64_t addr, unsigned access)
{
    return eng_acc_add(c, addr, UINT64_MAX, access, 1);
}

static int mat(struct eng_cmd *c, uint64_t addr, uint64_t rows, uint64_t cols, uint64_t ld,
               unsigned esize, unsigned access)
{
    uint64_t b;
    if (rows && cols && ld < cols)
        return TX8_STATUS_INVALID_CMD;
    if (eng_mat_bytes(rows, cols, ld, esize, &b))
        return ovf(c, addr, access);
    return eng_acc_add(c, addr, b, access, esize);
}

static int vec(struct eng_cmd *c, uint64_t addr, uint64_t n, unsigned esize, unsigned access)
{
    uint64_t b;
    if (__builtin_mul_overflow(n, (uint64_t)esize, &b))
        return ovf(c, addr, access);
    return eng_acc_add(c, addr, b, access, esize);
}

static int is_float_dtype(unsigned d)
{
    return d == TX8_DTYPE_F32 || d == TX8_DTYPE_F16 || d == TX8_DTYPE_BF16;
}

/* a KV-cache type: F32/F16/BF16 or a 1.6 block type */
static int is_kv_dtype(unsigned d)
{
    return is_float_dtype(d) || tx_dtype_is_block(d);
}

#define KVB(x) ((x) % TX8_KV_BLOCK == 0)

/* Bytes of elems elements (a whole number of blocks) of a block type; -1
 * if they pass 2^64 (an element count below 2^64 can: 34 bytes per 32
 * elements), which the caller reports as an overflowing operand. */
static int kv_block_bytes(unsigned dt, uint64_t elems, uint64_t *out)
{
    return __builtin_mul_overflow(elems / TX8_KV_BLOCK, tx_dtype_row_bytes(dt, TX8_KV_BLOCK), out)
               ? -1
               : 0;
}

/* [rows x cols] with row stride ld of a block type: cols, ld multiples of
 * the block (so rows start on a block), extent in whole blocks */
static int mat_kv(struct eng_cmd *c, uint64_t addr, uint64_t rows, uint64_t cols, uint64_t ld,
                  unsigned dt, unsigned access)
{
    if (!tx_dtype_is_block(dt))
        return mat(c, addr, rows, cols, ld, (unsigned)tx_dtype_size(dt), access);
    if (!KVB(cols) || !KVB(ld))
        return TX8_STATUS_INVALID_CMD;
    uint64_t elems;
    if (rows && cols && ld < cols)
        return TX8_STATUS_INVALID_CMD;
    uint64_t b;
    if (eng_mat_bytes(rows, cols, ld, 1, &elems) || kv_block_bytes(dt, elems, &b))
        return ovf(c, addr, access);
    return eng_acc_add(c, addr, b, access, 2);
}

int eng_check_nop(struct eng_cmd *c)
{
    const struct tx8_cmd_hdr *h = c->cmd;
    return h->flags ? TX8_STATUS_INVALID_CMD : 0;
}

int eng_check_fill(struct eng_cmd *c)
{
    const struct tx8_cmd_fill *f = c->cmd;
    if (f->hdr.flags || f->rsvd || f->dst % 4 || f->bytes % 4)
        return TX8_STATUS_INVALID_CMD;
    return eng_acc_add(c, f->dst, f->bytes, W, 4);
}

int eng_check_copy(struct eng_cmd *c)
{
    const struct tx8_cmd_copy *f = c->cmd;
    if (f->hdr.flags)
        return TX8_STATUS_INVALID_CMD;
    TRY(eng_acc_add(c, f->src, f->bytes, R, 1));
    return eng_acc_add(c, f->dst, f->bytes, W, 1);
}

int eng_check_convert(struct eng_cmd *c)
{
    const struct tx8_cmd_convert *f = c->cmd;
    if (f->hdr.flags || f->rsvd)
        return TX8_STATUS_INVALID_CMD;
    unsigned sd = f->src_dtype, dd = f->dst_dtype;
    int quant = sd == TX8_DTYPE_F32 && dd == TX8_DTYPE_I8;
    int dequant = sd == TX8_DTYPE_I8 && dd == TX8_DTYPE_F32;
    if (!(is_kv_dtype(sd) && is_kv_dtype(dd)) && !quant && !dequant)
        return TX8_STATUS_UNSUPPORTED_DTYPE;
    if (!quant && !dequant && f->scales)
        return TX8_STATUS_INVALID_CMD;
    TRY(mat_kv(c, f->src, f->rows, f->cols, f->ld_src, sd, R));
    TRY(mat_kv(c, f->dst, f->rows, f->cols, f->ld_dst, dd, W));
    if ((quant || dequant) && f->rows && f->cols)
        TRY(vec(c, f->scales, f->rows, 4, quant ? W : R));
    return 0;
}

uint64_t eng_weight_bytes(const struct tx8_weight *w)
{
    uint64_t es = tx_dtype_size(w->dtype), b = 0;
    if (w->format == TX8_WFMT_DENSE) {
        b = (uint64_t)w->rows * w->cols * es;
    } else {
        b = (uint64_t)w->nnz_blocks * TX8_SPARSE_BLOCK * es;
        b += ((uint64_t)w->rows + 1) * 4 + (uint64_t)w->nnz_blocks * 2;
    }
    if (w->dtype == TX8_DTYPE_I8) {
        uint64_t g = w->group_size ? w->cols / w->group_size : 1;
        b += (uint64_t)w->rows * g * 4;
    }
    if (w->dtype == TX8_DTYPE_F8_E4M3)
        b += eng_fp8_scale_count(w->rows, w->cols) * 4;
    return b;
}

/*
 * Fields and ranges of a weight. direct: add the ranges to the command's
 * operand list (checked by the runner); else check them now.
 */
int eng_weight_check(struct eng_cmd *c, const struct tx8_weight *w, int direct)
{
    unsigned es = (unsigned)tx_dtype_size(w->dtype);
    if (w->rsvd)
        return TX8_STATUS_INVALID_CMD;
    if (w->dtype != TX8_DTYPE_F32 && w->dtype != TX8_DTYPE_F16 && w->dtype != TX8_DTYPE_BF16 &&
        w->dtype != TX8_DTYPE_I8 && w->dtype != TX8_DTYPE_F8_E4M3)
        return TX8_STATUS_UNSUPPORTED_DTYPE;
    if (w->format != TX8_WFMT_DENSE && w->format != TX8_WFMT_BLOCK_SPARSE)
        return TX8_STATUS_INVALID_CMD;
    int i8 = w->dtype == TX8_DTYPE_I8;
    int fp8 = w->dtype == TX8_DTYPE_F8_E4M3;
    int sparse = w->format == TX8_WFMT_BLOCK_SPARSE;
    if (fp8) {
        /* dense, f32 scales per 128 x 128 block */
        if (sparse || !w->scales || w->group_size != TX8_FP8_BLOCK)
            return TX8_STATUS_INVALID_CMD;
    } else if (i8) {
        if (!w->scales)
            return TX8_STATUS_INVALID_CMD;
        if (w->group_size) {
            if (w->cols % w->group_size)
                return TX8_STATUS_INVALID_CMD;
            if (sparse && w->group_size % TX8_SPARSE_BLOCK)
                return TX8_STATUS_INVALID_CMD;
        }
    } else if (w->scales || w->group_size) {
        return TX8_STATUS_INVALID_CMD;
    }
    uint64_t data_bytes, b;
    if (sparse) {
        if (w->cols % TX8_SPARSE_BLOCK || !w->index)
            return TX8_STATUS_INVALID_CMD;
        uint64_t nbc = w->cols / TX8_SPARSE_BLOCK;
        if ((uint64_t)w->nnz_blocks > (uint64_t)w->rows * nbc)
            return TX8_STATUS_INVALID_CMD;
        data_bytes = (uint64_t)w->nnz_blocks * TX8_SPARSE_BLOCK * es;
    } else {
        if (w->index || w->nnz_blocks)
            return TX8_STATUS_INVALID_CMD;
        if (eng_mul3(w->rows, w->cols, es, &data_bytes))
            data_bytes = UINT64_MAX; /* faults */
    }
    int (*add)(struct eng_cmd *, uint64_t, uint64_t, unsigned, unsigned) =
        direct ? eng_acc_add : eng_acc_check;
    TRY(add(c, w->data, data_bytes, R, data_bytes == UINT64_MAX ? 1 : es));
    if (sparse) {
        b = ((uint64_t)w->rows + 1) * 4 + (uint64_t)w->nnz_blocks * 2;
        TRY(add(c, w->index, b, R, 4));
    }
    if (fp8 && w->rows && w->cols)
        TRY(add(c, w->scales, eng_fp8_scale_count(w->rows, w->cols) * 4, R, 4));
    if (i8) {
        uint64_t g = w->group_size ? w->cols / w->group_size : 1;
        if (w->rows && w->cols) {
            if (eng_mul3(w->rows, g, 4, &b))
                return add(c, w->scales, UINT64_MAX, R, 1);
            TRY(add(c, w->scales, b, R, 4));
        }
    }
    return 0;
}

int eng_check_matmul(struct eng_cmd *c)
{
    const struct tx8_cmd_matmul *m = c->cmd;
    if (m->hdr.flags & ~(uint16_t)(TX8_MATMUL_F_ACCUMULATE | TX8_MATMUL_F_BIAS) || m->rsvd)
        return TX8_STATUS_INVALID_CMD;
    if (!is_float_dtype(m->act_dtype) && m->act_dtype != TX8_DTYPE_I8)
        return TX8_STATUS_UNSUPPORTED_DTYPE;
    TRY(eng_weight_check(c, &m->w, 1));
    if (m->act_dtype == TX8_DTYPE_I8 && m->w.dtype != TX8_DTYPE_I8)
        return TX8_STATUS_UNSUPPORTED_DTYPE;
    uint64_t T = m->tokens, N = m->w.rows, K = m->w.cols;
    TRY(mat(c, m->x, N ? T : 0, K, m->ld_x, 4, R));
    TRY(mat(c, m->y, T, N, m->ld_y, 4, (m->hdr.flags & TX8_MATMUL_F_ACCUMULATE) ? RW : W));
    if ((m->hdr.flags & TX8_MATMUL_F_BIAS) && T)
        TRY(vec(c, m->bias, N, 4, R));
    return 0;
}

int eng_check_rmsnorm(struct eng_cmd *c)
{
    const struct tx8_cmd_rmsnorm *m = c->cmd;
    if (m->hdr.flags || m->rsvd || isnan(m->eps))
        return TX8_STATUS_INVALID_CMD;
    TRY(mat(c, m->x, m->rows, m->dim, m->ld_x, 4, R));
    TRY(mat(c, m->y, m->rows, m->dim, m->ld_y, 4, W));
    if (m->rows)
        TRY(vec(c, m->gamma, m->dim, 4, R));
    return 0;
}

int eng_check_layernorm(struct eng_cmd *c)
{
    const struct tx8_cmd_layernorm *m = c->cmd;
    if (m->hdr.flags || m->rsvd || isnan(m->eps))
        return TX8_STATUS_INVALID_CMD;
    TRY(mat(c, m->x, m->rows, m->dim, m->ld_x, 4, R));
    TRY(mat(c, m->y, m->rows, m->dim, m->ld_y, 4, W));
    if (m->rows) {
        TRY(vec(c, m->gamma, m->dim, 4, R));
        if (m->beta)
            TRY(vec(c, m->beta, m->dim, 4, R));
    }
    return 0;
}

int eng_check_rope(struct eng_cmd *c)
{
    const struct tx8_cmd_rope *m = c->cmd;
    uint32_t af_bits;
    memcpy(&af_bits, &m->attn_factor, sizeof(af_bits));
    if ((m->hdr.flags & ~(uint16_t)TX8_ROPE_F_ATTN_FACTOR) || m->rot_dim % 2 ||
        (m->mode != TX8_ROPE_NEOX && m->mode != TX8_ROPE_INTERLEAVED))
        return TX8_STATUS_INVALID_CMD;
    /* 1.4: attn_factor (the former rsvd) is read only with its flag; without
     * it the word must stay zero, as rsvd had to be (any bit, -0.0 too). */
    if (m->hdr.flags & TX8_ROPE_F_ATTN_FACTOR ? !isfinite(m->attn_factor) : af_bits != 0)
        return TX8_STATUS_INVALID_CMD;
    if (!m->tokens || !m->heads || !m->rot_dim)
        return 0;
    /* elements [offset, (T-1)*ld_token + (H-1)*ld_head + offset + rot_dim) */
    uint64_t a, b, last;
    if (__builtin_mul_overflow((uint64_t)(m->tokens - 1), (uint64_t)m->ld_token, &a) ||
        __builtin_mul_overflow((uint64_t)(m->heads - 1), (uint64_t)m->ld_head, &b) ||
        __builtin_add_overflow(a, b, &last) || __builtin_add_overflow(last, m->rot_dim, &last))
        return ovf(c, m->x, RW);
    /* Rotating an element twice is never meant: the slices must fit in the
     * extent without overlap, which also bounds the work by the operand. */
    uint64_t work;
    if (eng_mul3(m->tokens, m->heads, m->rot_dim, &work) || work > last)
        return TX8_STATUS_INVALID_CMD;
    /* last * 4 is checked too: an extent that wrapped (e.g. 2^62 + 2
     * elements read as 8 bytes) would let the rotation run far outside the
     * checked range */
    uint64_t start, bytes;
    if (__builtin_add_overflow(m->x, (uint64_t)m->offset * 4, &start) ||
        __builtin_mul_overflow(last, (uint64_t)4, &bytes))
        return ovf(c, m->x, RW);
    TRY(eng_acc_add(c, start, bytes, RW, 4));
    TRY(vec(c, m->pos, m->tokens, 4, R));
    return vec(c, m->inv_freq, m->rot_dim / 2, 4, R);
}

/* Extent of a [rows][heads][ld_head] tensor using dims [0, dim) of each. */
static int heads_bytes(uint64_t rows, uint64_t heads, uint64_t ld_head, uint64_t dim,
                       unsigned esize, uint64_t *out)
{
    uint64_t row_ld;
    if (rows == 0 || heads == 0 || dim == 0) {
        *out = 0;
        return 0;
    }
    if (__builtin_mul_overflow(heads, ld_head, &row_ld))
        return -1;
    /* the last row's last head: (rows-1)*row_ld + (heads-1)*ld_head + dim */
    uint64_t a, b;
    if (__builtin_mul_overflow(rows - 1, row_ld, &a) ||
        __builtin_mul_overflow(heads - 1, ld_head, &b) || __builtin_add_overflow(a, b, &a) ||
        __builtin_add_overflow(a, dim, &a) || __builtin_mul_overflow(a, (uint64_t)esize, out))
        return -1;
    return 0;
}

static int heads_op(struct eng_cmd *c, uint64_t addr, uint64_t rows, uint64_t heads,
                    uint64_t ld_head, uint64_t dim, unsigned esize, unsigned access)
{
    uint64_t b;
    if (heads_bytes(rows, heads, ld_head, dim, esize, &b))
        return ovf(c, addr, access);
    return eng_acc_add(c, addr, b, access, esize);
}

/* Since 1.10: a command's key bitmap (custom attention masks), u64
 * [tokens][ld_mask] covering the keys the queries see; without one its
 * fields are 0 */
static int key_mask(struct eng_cmd *c, uint64_t mask, uint32_t ld_mask, uint32_t rsvd,
                    uint64_t tokens, uint64_t keys)
{
    if (rsvd || (!mask && ld_mask) || (mask && !ld_mask))
        return TX8_STATUS_INVALID_CMD;
    if (!mask)
        return 0;
    if ((uint64_t)ld_mask * 64 < keys)
        return TX8_STATUS_INVALID_CMD;
    return mat(c, mask, tokens, ld_mask, ld_mask, 8, R);
}

int eng_check_attention(struct eng_cmd *c)
{
    struct tx8_cmd_attention mm;
    const struct tx8_cmd_attention *m = &mm;
    eng_cmd_read(c, &mm, sizeof(mm));
    if ((m->hdr.flags & ~(TX8_ATTN_F_V_DTYPE | TX8_ATTN_F_BF16)) || isnan(m->scale))
        return TX8_STATUS_INVALID_CMD;
    if (!(m->hdr.flags & TX8_ATTN_F_V_DTYPE) && m->v_dtype)
        return TX8_STATUS_INVALID_CMD;
    unsigned vdt = (m->hdr.flags & TX8_ATTN_F_V_DTYPE) ? m->v_dtype : m->kv_dtype;
    if (!is_kv_dtype(m->kv_dtype) || !is_kv_dtype(vdt))
        return TX8_STATUS_UNSUPPORTED_DTYPE;
    if (!m->tokens || !m->q_heads)
        return 0;
    if (!m->kv_heads || m->q_heads % m->kv_heads || !m->qk_dim || !m->v_dim ||
        m->qk_dim > m->ld_q_head || m->qk_dim > m->ld_k_head || m->v_dim > m->ld_v_head ||
        m->v_dim > m->ld_o_head || (m->sel && !m->sel_k) || (!m->sel && m->sel_k) ||
        m->sel_k > TX8_ENGINE_MAX_TOPK * 64)
        return TX8_STATUS_INVALID_CMD;
    if ((m->hdr.flags & TX8_ATTN_F_BF16) &&
        ((m->qk_dim | m->v_dim | m->ld_k_head | m->ld_v_head) & 1))
        return TX8_STATUS_INVALID_CMD; /* BF16 pairs */
    uint64_t keys = (uint64_t)m->q_pos0 + m->tokens;
    if (keys > m->kv_len)
        keys = m->kv_len;
    TRY(heads_op(c, m->q, m->tokens, m->q_heads, m->ld_q_head, m->qk_dim, 4, R));
    if (tx_dtype_is_block(m->kv_dtype)) {
        uint64_t ek;
        if (!KVB(m->qk_dim) || !KVB(m->ld_k_head))
            return TX8_STATUS_INVALID_CMD;
        if (heads_bytes(keys, m->kv_heads, m->ld_k_head, m->qk_dim, 1, &ek) ||
            kv_block_bytes(m->kv_dtype, ek, &ek))
            TRY(ovf(c, m->k, R)); /* a fault, found with the others: go on */
        else
            TRY(eng_acc_add(c, m->k, ek, R, 2));
    } else {
        TRY(heads_op(c, m->k, keys, m->kv_heads, m->ld_k_head, m->qk_dim,
                     (unsigned)tx_dtype_size(m->kv_dtype), R));
    }
    if (tx_dtype_is_block(vdt)) {
        uint64_t ev;
        if (!KVB(m->v_dim) || !KVB(m->ld_v_head))
            return TX8_STATUS_INVALID_CMD;
        if (heads_bytes(keys, m->kv_heads, m->ld_v_head, m->v_dim, 1, &ev) ||
            kv_block_bytes(vdt, ev, &ev))
            TRY(ovf(c, m->v, R)); /* a fault, found with the others: go on */
        else
            TRY(eng_acc_add(c, m->v, ev, R, 2));
    } else {
        TRY(heads_op(c, m->v, keys, m->kv_heads, m->ld_v_head, m->v_dim,
                     (unsigned)tx_dtype_size(vdt), R));
    }
    TRY(heads_op(c, m->out, m->tokens, m->q_heads, m->ld_o_head, m->v_dim, 4, W));
    if (m->sel) {
        uint64_t n;
        if (__builtin_mul_overflow((uint64_t)m->tokens, (uint64_t)m->sel_k, &n))
            return ovf(c, m->sel, R);
        TRY(vec(c, m->sel, n, 4, R));
    }
    return key_mask(c, m->mask, m->ld_mask, m->rsvd1, m->tokens, keys);
}

int eng_check_swiglu(struct eng_cmd *c)
{
    const struct tx8_cmd_swiglu *m = c->cmd;
    if (m->hdr.flags || m->rsvd)
        return TX8_STATUS_INVALID_CMD;
    TRY(mat(c, m->gate, m->rows, m->cols, m->ld_gate, 4, R));
    TRY(mat(c, m->up, m->rows, m->cols, m->ld_up, 4, R));
    return mat(c, m->y, m->rows, m->cols, m->ld_y, 4, W);
}

int eng_check_add(struct eng_cmd *c)
{
    const struct tx8_cmd_add *m = c->cmd;
    if (m->hdr.flags)
        return TX8_STATUS_INVALID_CMD;
    TRY(vec(c, m->a, m->n, 4, R));
    TRY(vec(c, m->b, m->n, 4, R));
    return vec(c, m->y, m->n, 4, W);
}

int eng_check_embed(struct eng_cmd *c)
{
    const struct tx8_cmd_embed *m = c->cmd;
    if (m->hdr.flags || m->rsvd0 || m->rsvd1)
        return TX8_STATUS_INVALID_CMD;
    if (!is_float_dtype(m->dtype) && m->dtype != TX8_DTYPE_I8)
        return TX8_STATUS_UNSUPPORTED_DTYPE;
    int i8 = m->dtype == TX8_DTYPE_I8;
    if ((i8 && !m->scales) || (!i8 && m->scales))
        return TX8_STATUS_INVALID_CMD;
    if (!m->tokens)
        return 0;
    if (!m->vocab)
        return TX8_STATUS_INVALID_CMD; /* no id can be valid */
    unsigned es = (unsigned)tx_dtype_size(m->dtype);
    TRY(vec(c, m->ids, m->tokens, 4, R));
    TRY(mat(c, m->table, m->dim ? m->vocab : 0, m->dim, m->dim, es, R));
    if (i8 && m->dim)
        TRY(vec(c, m->scales, m->vocab, 4, R));
    return mat(c, m->out, m->tokens, m->dim, m->ld_out, 4, W);
}

int eng_check_moe_route(struct eng_cmd *c)
{
    const struct tx8_cmd_moe_route *m = c->cmd;
    const uint16_t known =
        TX8_ROUTE_F_NORM_TOPK | TX8_ROUTE_F_LOAD_PENALTY | TX8_ROUTE_F_COUNT | TX8_ROUTE_F_SOFTMAX;
    if ((m->hdr.flags & ~known) || m->rsvd || isnan(m->scaling) || isnan(m->lambda))
        return TX8_STATUS_INVALID_CMD;
    /* 1.4: the softmax router has no correction bias and no group limit
     * (the bias is defined on sigmoid scores; Qwen3-MoE has neither). */
    if ((m->hdr.flags & TX8_ROUTE_F_SOFTMAX) && (m->bias || m->n_group > 1))
        return TX8_STATUS_INVALID_CMD;
    if (!m->tokens)
        return 0;
    if (!m->experts || !m->top_k || m->top_k > m->experts || m->top_k > TX8_ENGINE_MAX_TOPK)
        return TX8_STATUS_INVALID_CMD;
    if (m->n_group > 1) {
        if (m->experts % m->n_group || !m->topk_group || m->topk_group > m->n_group ||
            (uint64_t)m->top_k > (uint64_t)m->topk_group * (m->experts / m->n_group))
            return TX8_STATUS_INVALID_CMD;
    }
    uint64_t n;
    if (__builtin_mul_overflow((uint64_t)m->tokens, (uint64_t)m->top_k, &n))
        return ovf(c, m->out_ids, W);
    TRY(mat(c, m->logits, m->tokens, m->experts, m->experts, 4, R));
    if (m->bias)
        TRY(vec(c, m->bias, m->experts, 4, R));
    if (m->counts) {
        unsigned acc = 0;
        if (m->hdr.flags & TX8_ROUTE_F_LOAD_PENALTY)
            acc |= R;
        if (m->hdr.flags & TX8_ROUTE_F_COUNT)
            acc |= RW;
        if (acc)
            TRY(vec(c, m->counts, m->experts, 8, acc));
    }
    TRY(vec(c, m->out_ids, n, 4, W));
    return vec(c, m->out_w, n, 4, W);
}

int eng_check_moe_ffn(struct eng_cmd *c)
{
    const struct tx8_cmd_moe_ffn *m = c->cmd;
    if ((m->hdr.flags & ~(uint16_t)TX8_MOE_FFN_F_ACCUMULATE) || m->rsvd0)
        return TX8_STATUS_INVALID_CMD;
    if (!is_float_dtype(m->act_dtype) && m->act_dtype != TX8_DTYPE_I8)
        return TX8_STATUS_UNSUPPORTED_DTYPE;
    if (!m->tokens || !m->dim)
        return 0;
    uint64_t n, tb;
    if (__builtin_mul_overflow((uint64_t)m->tokens, (uint64_t)m->top_k, &n))
        return ovf(c, m->ids, R);
    if (n && (!m->num_experts || !m->ffn_dim))
        return TX8_STATUS_INVALID_CMD;
    TRY(mat(c, m->y, m->tokens, m->dim, m->ld_y, 4,
            (m->hdr.flags & TX8_MOE_FFN_F_ACCUMULATE) ? RW : W));
    if (!n)
        return 0;
    TRY(mat(c, m->x, m->tokens, m->dim, m->ld_x, 4, R));
    TRY(vec(c, m->ids, n, 4, R));
    TRY(vec(c, m->w, n, 4, R));
    if (eng_mul3(m->num_experts, 3, sizeof(struct tx8_weight), &tb))
        return ovf(c, m->experts, R);
    return eng_acc_add(c, m->experts, tb, R, 8);
}

int eng_check_dsa_index(struct eng_cmd *c)
{
    struct tx8_cmd_dsa_index mm;
    const struct tx8_cmd_dsa_index *m = &mm;
    eng_cmd_read(c, &mm, sizeof(mm));
    if (m->hdr.flags & ~(TX8_DSA_F_KEY_Q8_0 | TX8_DSA_F_QUERY_Q8))
        return TX8_STATUS_INVALID_CMD;
    int kq8 = (m->hdr.flags & TX8_DSA_F_KEY_Q8_0) != 0;
    if ((m->hdr.flags & TX8_DSA_F_QUERY_Q8) && !kq8)
        return TX8_STATUS_INVALID_CMD; /* 8-bit products need the Q8_0 keys */
    if (!m->tokens)
        return 0;
    if (!m->top_k || m->top_k > TX8_ENGINE_MAX_TOPK || !m->heads || !m->dim ||
        m->dim > m->ld_q_head || m->dim > m->ld_k)
        return TX8_STATUS_INVALID_CMD;
    uint64_t n;
    if (__builtin_mul_overflow((uint64_t)m->tokens, (uint64_t)m->top_k, &n))
        return ovf(c, m->sel, W);
    TRY(vec(c, m->sel, n, 4, W));
    uint64_t keys = (uint64_t)m->q_pos0 + m->tokens;
    if (keys > m->kv_len)
        keys = m->kv_len;
    TRY(key_mask(c, m->mask, m->ld_mask, m->rsvd1, m->tokens, keys));
    if (!keys)
        return 0;
    TRY(heads_op(c, m->q, m->tokens, m->heads, m->ld_q_head, m->dim, 4, R));
    if (kq8)
        TRY(mat_kv(c, m->k, keys, m->dim, m->ld_k, TX8_DTYPE_Q8_0, R));
    else
        TRY(mat(c, m->k, m->dim ? keys : 0, m->dim, m->ld_k, 4, R));
    if (__builtin_mul_overflow((uint64_t)m->tokens, (uint64_t)m->heads, &n))
        return ovf(c, m->w, R);
    return vec(c, m->w, n, 4, R);
}

int eng_check_sample(struct eng_cmd *c)
{
    struct tx8_cmd_sample mm;
    const struct tx8_cmd_sample *m = &mm;
    eng_sample_cmd(c, &mm);
    if ((m->hdr.flags & ~(uint32_t)TX8_SAMPLE_F_TEMP_LAST) || isnan(m->temperature) ||
        isnan(m->top_p) || m->top_p <= 0.0f || m->rsvd || m->rsvd2)
        return TX8_STATUS_INVALID_CMD;
    /* 1.3: min-p in [0, 1], finite penalties, repeat_penalty >= 0 */
    if (!(m->min_p >= 0.0f && m->min_p <= 1.0f) || !isfinite(m->repeat_penalty) ||
        m->repeat_penalty < 0.0f || !isfinite(m->presence_penalty) ||
        !isfinite(m->frequency_penalty) || m->n_history > TX8_SAMPLE_MAX_HISTORY)
        return TX8_STATUS_INVALID_CMD;
    if (m->n_history && m->rows)
        TRY(vec(c, m->history, (uint64_t)m->rows * m->n_history, 4, R));
    if (!m->rows)
        return 0;
    if (!m->vocab || m->top_k > TX8_ENGINE_MAX_TOPK)
        return TX8_STATUS_INVALID_CMD;
    TRY(mat(c, m->logits, m->rows, m->vocab, m->ld_logits, 4, R));
    /* 1.9: the allowed-token mask, ld_allow words per row */
    if (m->allow) {
        uint64_t words = ((uint64_t)m->vocab + 31) / 32;
        if (m->ld_allow < words)
            return TX8_STATUS_INVALID_CMD;
        TRY(mat(c, m->allow, m->rows, words, m->ld_allow, 4, R));
    }
    TRY(vec(c, m->out, m->rows, 4, W));
    if (m->probs)
        TRY(vec(c, m->probs, m->rows, 4, W));
    return 0;
}
