/* SPDX-License-Identifier: MIT */
/*
 * The compute engine's isolation: every operand of every command is checked
 * against the job's ranges before anything is touched. Crafted commands
 * point outside their ranges (each operand of each op, shifted past either
 * end, or with the wrong access), overflow their sizes, carry bad reserved
 * fields, bad sparse indexes or bad expert tables; they must fail with the
 * right status and leave the whole heap unchanged (checksummed). Also: job
 * descriptor validation, the abort flag, and a fuzz run of mutated commands.
 */
#include <errno.h>
#include <numa.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "test_engine_common.h"
#include "tx_test_main.h"

#define R TX8_ACCESS_READ
#define W TX8_ACCESS_WRITE
#define RW (TX8_ACCESS_READ | TX8_ACCESS_WRITE)

struct opnd {
    __u64 *field; /* the address field (in the command or device memory) */
    uint64_t addr, size;
    unsigned access, align;
    const char *name;
};

struct ocase {
    const char *name;
    union {
        struct tx8_cmd_hdr hdr;
        uint8_t bytes[256];
    } cmd;
    struct opnd op[40];
    unsigned nop;
};

/* A buffer with a 128-byte unlisted guard gap after it. */
static uint64_t buf(struct te *t, uint64_t size)
{
    uint64_t a = te_alloc(t, size);
    te_alloc(t, 128);
    return a;
}

static void add_op(struct ocase *c, __u64 *field, uint64_t size, unsigned access, unsigned align,
                   const char *name)
{
    struct opnd *o = &c->op[c->nop++];
    o->field = field;
    o->addr = *field;
    o->size = size;
    o->access = access;
    o->align = align;
    o->name = name;
}

static void fill_rand(struct te *t, uint64_t addr, uint64_t n_f32, uint64_t *rng)
{
    te_fill_f32(rng, te_ptr(t, addr), n_f32, 1.0f);
}

/* Job: the command buffer (read) and each operand's exact range. */
static void job_for(struct te *t, const struct ocase *c)
{
    te_cmd_begin(t);
    te_cmd(t, &c->cmd);
    te_job_default(t);
    t->job.num_ranges = 1 + c->nop;
    t->job.ranges[0].addr = t->cmd_addr;
    t->job.ranges[0].size = t->cmd_len;
    t->job.ranges[0].access = R;
    for (unsigned i = 0; i < c->nop; i++) {
        t->job.ranges[1 + i].addr = c->op[i].addr;
        t->job.ranges[1 + i].size = c->op[i].size;
        t->job.ranges[1 + i].access = c->op[i].access;
    }
}

/* Every case: valid first, then each operand shifted / with wrong access. */
static void exercise(struct te *t, struct ocase *c)
{
    job_for(t, c);
    unsigned st = te_run_job(t, NULL);
    ck_assert_msg(st == TX8_STATUS_OK, "%s: valid command failed: %s (cmd %u addr %#llx)", c->name,
                  tx8_engine_status_name(st), t->done.fault_cmd,
                  (unsigned long long)t->done.fault_addr);
    for (unsigned i = 0; i < c->nop; i++) {
        struct opnd *o = &c->op[i];
        for (int m = 0; m < 3; m++) {
            uint64_t want_fault;
            unsigned saved_access = o->access;
            if (m == 0) { /* shifted past the end */
                *o->field = o->addr + o->align;
                want_fault = o->addr + o->size;
            } else if (m == 1) { /* shifted before the start */
                *o->field = o->addr - o->align;
                want_fault = o->addr - o->align;
            } else { /* the range lacks an access the operand needs */
                o->access = (o->access & W) ? R : W;
                want_fault = o->addr;
            }
            job_for(t, c);
            o->access = saved_access;
            uint64_t sum = te_heap_sum(t);
            uint64_t faults = t->ctr.faults;
            st = te_run_job(t, NULL);
            ck_assert_msg(st == TX8_STATUS_ADDR_FAULT, "%s/%s mode %d: status %s", c->name, o->name,
                          m, tx8_engine_status_name(st));
            ck_assert_uint_eq(t->done.fault_cmd, 0);
            ck_assert_msg(t->done.fault_addr == want_fault,
                          "%s/%s mode %d: fault at %#llx, not %#llx", c->name, o->name, m,
                          (unsigned long long)t->done.fault_addr, (unsigned long long)want_fault);
            ck_assert_msg(te_heap_sum(t) == sum, "%s/%s mode %d: memory modified", c->name, o->name,
                          m);
            ck_assert_uint_eq(t->ctr.faults, faults + 1);
            *o->field = o->addr;
        }
    }
    /* unchanged command still runs */
    job_for(t, c);
    ck_assert_uint_eq(te_run_job(t, NULL), TX8_STATUS_OK);
}

#define CMD(c, type) ((type *)(void *)(c)->cmd.bytes)

static void case_fill(struct te *t, struct ocase *c)
{
    struct tx8_cmd_fill *f = CMD(c, struct tx8_cmd_fill);
    f->hdr = TE_HDR(TX8_OP_FILL, struct tx8_cmd_fill);
    f->bytes = 1000;
    f->dst = buf(t, 1000);
    f->value = 7;
    add_op(c, &f->dst, 1000, W, 4, "dst");
}

static void case_copy(struct te *t, struct ocase *c)
{
    struct tx8_cmd_copy *f = CMD(c, struct tx8_cmd_copy);
    f->hdr = TE_HDR(TX8_OP_COPY, struct tx8_cmd_copy);
    f->bytes = 999;
    f->src = buf(t, 999);
    f->dst = buf(t, 999);
    add_op(c, &f->src, 999, R, 1, "src");
    add_op(c, &f->dst, 999, W, 1, "dst");
}

static void case_convert(struct te *t, struct ocase *c, int quant, uint64_t *rng)
{
    struct tx8_cmd_convert *f = CMD(c, struct tx8_cmd_convert);
    f->hdr = TE_HDR(TX8_OP_CONVERT, struct tx8_cmd_convert);
    f->rows = 5;
    f->cols = 33;
    f->ld_src = 40;
    f->ld_dst = 35;
    f->src_dtype = TX8_DTYPE_F32;
    f->dst_dtype = quant ? TX8_DTYPE_I8 : TX8_DTYPE_BF16;
    uint64_t sb = (4 * 40 + 33) * 4, db = (4 * 35 + 33) * (quant ? 1 : 2);
    f->src = buf(t, sb);
    fill_rand(t, f->src, sb / 4, rng);
    f->dst = buf(t, db);
    add_op(c, &f->src, sb, R, 4, "src");
    add_op(c, &f->dst, db, W, quant ? 1 : 2, "dst");
    if (quant) {
        f->scales = buf(t, 20);
        add_op(c, &f->scales, 20, W, 4, "scales");
    }
}

static void case_matmul(struct te *t, struct ocase *c, unsigned dtype, int sparse, int flags,
                        uint64_t *rng)
{
    struct tx8_cmd_matmul *m = CMD(c, struct tx8_cmd_matmul);
    unsigned T = 3, N = 10, K = 64;
    m->hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    m->hdr.flags = (uint16_t)flags;
    m->tokens = T;
    m->ld_x = K;
    m->ld_y = N;
    m->act_dtype = dtype == TX8_DTYPE_I8 ? TX8_DTYPE_I8 : TX8_DTYPE_F32;
    m->w.rows = N;
    m->w.cols = K;
    m->w.dtype = (uint16_t)dtype;
    size_t es = tx_dtype_size(dtype);
    m->x = buf(t, T * K * 4);
    fill_rand(t, m->x, T * K, rng);
    m->y = buf(t, T * N * 4);
    add_op(c, &m->x, T * K * 4, R, 4, "x");
    add_op(c, &m->y, T * N * 4, (flags & TX8_MATMUL_F_ACCUMULATE) ? RW : W, 4, "y");
    if (flags & TX8_MATMUL_F_BIAS) {
        m->bias = buf(t, N * 4);
        add_op(c, &m->bias, N * 4, R, 4, "bias");
    }
    uint64_t nel = (uint64_t)N * K;
    if (sparse) {
        /* every row keeps block 1 of 2 */
        m->w.format = TX8_WFMT_BLOCK_SPARSE;
        m->w.nnz_blocks = N;
        nel = (uint64_t)N * 32;
        uint64_t ib = (N + 1) * 4 + N * 2;
        m->w.index = buf(t, ib);
        uint32_t *rp = te_ptr(t, m->w.index);
        uint16_t *cb = (uint16_t *)(rp + N + 1);
        for (unsigned r = 0; r <= N; r++)
            rp[r] = r;
        for (unsigned r = 0; r < N; r++)
            cb[r] = 1;
        add_op(c, &m->w.index, ib, R, 4, "w.index");
    }
    m->w.data = buf(t, nel * es);
    if (dtype == TX8_DTYPE_F32)
        fill_rand(t, m->w.data, nel, rng);
    add_op(c, &m->w.data, nel * es, R, (unsigned)es, "w.data");
    if (dtype == TX8_DTYPE_I8) {
        m->w.group_size = 32;
        m->w.scales = buf(t, N * 2 * 4);
        add_op(c, &m->w.scales, N * 2 * 4, R, 4, "w.scales");
    }
}

static void case_norm(struct te *t, struct ocase *c, int layer, uint64_t *rng)
{
    unsigned rows = 3, dim = 50;
    uint64_t x = buf(t, rows * dim * 4), y = buf(t, rows * dim * 4), g = buf(t, dim * 4);
    fill_rand(t, x, rows * dim, rng);
    if (layer) {
        struct tx8_cmd_layernorm *m = CMD(c, struct tx8_cmd_layernorm);
        m->hdr = TE_HDR(TX8_OP_LAYERNORM, struct tx8_cmd_layernorm);
        m->x = x;
        m->y = y;
        m->gamma = g;
        m->beta = buf(t, dim * 4);
        m->rows = rows;
        m->dim = m->ld_x = m->ld_y = dim;
        m->eps = 1e-5f;
        add_op(c, &m->x, rows * dim * 4, R, 4, "x");
        add_op(c, &m->y, rows * dim * 4, W, 4, "y");
        add_op(c, &m->gamma, dim * 4, R, 4, "gamma");
        add_op(c, &m->beta, dim * 4, R, 4, "beta");
    } else {
        struct tx8_cmd_rmsnorm *m = CMD(c, struct tx8_cmd_rmsnorm);
        m->hdr = TE_HDR(TX8_OP_RMSNORM, struct tx8_cmd_rmsnorm);
        m->x = x;
        m->y = y;
        m->gamma = g;
        m->rows = rows;
        m->dim = m->ld_x = m->ld_y = dim;
        m->eps = 1e-5f;
        add_op(c, &m->x, rows * dim * 4, R, 4, "x");
        add_op(c, &m->y, rows * dim * 4, W, 4, "y");
        add_op(c, &m->gamma, dim * 4, R, 4, "gamma");
    }
}

static void case_rope(struct te *t, struct ocase *c)
{
    struct tx8_cmd_rope *m = CMD(c, struct tx8_cmd_rope);
    m->hdr = TE_HDR(TX8_OP_ROPE, struct tx8_cmd_rope);
    m->tokens = 3;
    m->heads = 2;
    m->rot_dim = 16;
    m->ld_head = 24;
    m->ld_token = 48;
    /* elements [0, 2*48 + 24 + 16) */
    uint64_t xb = (2 * 48 + 24 + 16) * 4;
    m->x = buf(t, xb);
    m->pos = buf(t, 12);
    m->inv_freq = buf(t, 32);
    m->mode = TX8_ROPE_INTERLEAVED;
    add_op(c, &m->x, xb, RW, 4, "x");
    add_op(c, &m->pos, 12, R, 4, "pos");
    add_op(c, &m->inv_freq, 32, R, 4, "inv_freq");
}

static void case_attention(struct te *t, struct ocase *c, int sel, uint64_t *rng)
{
    struct tx8_cmd_attention *m = CMD(c, struct tx8_cmd_attention);
    unsigned T = 2, qh = 4, kvh = 2, qk = 8, vd = 6, q0 = 5;
    unsigned keys = q0 + T;
    m->hdr = TE_HDR(TX8_OP_ATTENTION, struct tx8_cmd_attention);
    m->tokens = T;
    m->q_heads = qh;
    m->kv_heads = kvh;
    m->qk_dim = m->ld_q_head = m->ld_k_head = qk;
    m->v_dim = m->ld_v_head = m->ld_o_head = vd;
    m->kv_len = keys;
    m->q_pos0 = q0;
    m->scale = 0.3f;
    m->kv_dtype = TX8_DTYPE_F16;
    m->q = buf(t, T * qh * qk * 4);
    fill_rand(t, m->q, T * qh * qk, rng);
    m->k = buf(t, keys * kvh * qk * 2);
    m->v = buf(t, keys * kvh * vd * 2);
    m->out = buf(t, T * qh * vd * 4);
    add_op(c, &m->q, T * qh * qk * 4, R, 4, "q");
    add_op(c, &m->k, keys * kvh * qk * 2, R, 2, "k");
    add_op(c, &m->v, keys * kvh * vd * 2, R, 2, "v");
    add_op(c, &m->out, T * qh * vd * 4, W, 4, "out");
    if (sel & 1) {
        m->sel_k = 3;
        m->sel = buf(t, T * 3 * 4);
        int32_t *s = te_ptr(t, m->sel);
        for (unsigned i = 0; i < T * 3; i++)
            s[i] = (int32_t)i % 5;
        add_op(c, &m->sel, T * 3 * 4, R, 4, "sel");
    }
    if (sel & 2) { /* the 1.10 key bitmap: one word covers the 7 keys */
        m->ld_mask = 1;
        m->mask = buf(t, T * 8);
        uint64_t *b = te_ptr(t, m->mask);
        for (unsigned i = 0; i < T; i++)
            b[i] = 0x55u | ((uint64_t)1 << (q0 + i));
        add_op(c, &m->mask, T * 8, R, 8, "mask");
    }
}

static void case_swiglu(struct te *t, struct ocase *c)
{
    struct tx8_cmd_swiglu *m = CMD(c, struct tx8_cmd_swiglu);
    m->hdr = TE_HDR(TX8_OP_SWIGLU, struct tx8_cmd_swiglu);
    m->rows = 4;
    m->cols = m->ld_y = m->ld_gate = m->ld_up = 30;
    m->y = buf(t, 480);
    m->gate = buf(t, 480);
    m->up = buf(t, 480);
    add_op(c, &m->y, 480, W, 4, "y");
    add_op(c, &m->gate, 480, R, 4, "gate");
    add_op(c, &m->up, 480, R, 4, "up");
}

static void case_add(struct te *t, struct ocase *c)
{
    struct tx8_cmd_add *m = CMD(c, struct tx8_cmd_add);
    m->hdr = TE_HDR(TX8_OP_ADD, struct tx8_cmd_add);
    m->n = 77;
    m->y = buf(t, 308);
    m->a = buf(t, 308);
    m->b = buf(t, 308);
    m->alpha = m->beta = 1;
    add_op(c, &m->a, 308, R, 4, "a");
    add_op(c, &m->b, 308, R, 4, "b");
    add_op(c, &m->y, 308, W, 4, "y");
}

static void case_embed(struct te *t, struct ocase *c)
{
    struct tx8_cmd_embed *m = CMD(c, struct tx8_cmd_embed);
    m->hdr = TE_HDR(TX8_OP_EMBED, struct tx8_cmd_embed);
    m->tokens = 3;
    m->vocab = 20;
    m->dim = m->ld_out = 16;
    m->dtype = TX8_DTYPE_I8;
    m->ids = buf(t, 12);
    ((int32_t *)te_ptr(t, m->ids))[1] = 19;
    m->table = buf(t, 320);
    m->scales = buf(t, 80);
    m->out = buf(t, 3 * 16 * 4);
    add_op(c, &m->ids, 12, R, 4, "ids");
    add_op(c, &m->table, 320, R, 1, "table");
    add_op(c, &m->scales, 80, R, 4, "scales");
    add_op(c, &m->out, 192, W, 4, "out");
}

static void case_route(struct te *t, struct ocase *c, uint64_t *rng)
{
    struct tx8_cmd_moe_route *m = CMD(c, struct tx8_cmd_moe_route);
    unsigned T = 3, E = 16, K = 4;
    m->hdr = TE_HDR(TX8_OP_MOE_ROUTE, struct tx8_cmd_moe_route);
    m->hdr.flags = TX8_ROUTE_F_NORM_TOPK | TX8_ROUTE_F_LOAD_PENALTY | TX8_ROUTE_F_COUNT;
    m->tokens = T;
    m->experts = E;
    m->top_k = K;
    m->n_group = 4;
    m->topk_group = 2;
    m->scaling = 2.5f;
    m->lambda = 0.2f;
    m->logits = buf(t, T * E * 4);
    fill_rand(t, m->logits, T * E, rng);
    m->bias = buf(t, E * 4);
    m->counts = buf(t, E * 8);
    m->out_ids = buf(t, T * K * 4);
    m->out_w = buf(t, T * K * 4);
    add_op(c, &m->logits, T * E * 4, R, 4, "logits");
    add_op(c, &m->bias, E * 4, R, 4, "bias");
    add_op(c, &m->counts, E * 8, RW, 8, "counts");
    add_op(c, &m->out_ids, T * K * 4, W, 4, "out_ids");
    add_op(c, &m->out_w, T * K * 4, W, 4, "out_w");
}

/* Expert weights get their own buffers; their address fields live in the
 * table (device memory) and are operands too. */
static void case_moe_ffn(struct te *t, struct ocase *c, unsigned dtype, uint64_t *rng)
{
    struct tx8_cmd_moe_ffn *m = CMD(c, struct tx8_cmd_moe_ffn);
    unsigned T = 2, K = 2, NE = 3, D = 32, F = 64;
    m->hdr = TE_HDR(TX8_OP_MOE_FFN, struct tx8_cmd_moe_ffn);
    m->tokens = T;
    m->top_k = K;
    m->num_experts = NE;
    m->dim = m->ld_x = m->ld_y = D;
    m->ffn_dim = F;
    m->act_dtype = TX8_DTYPE_F32;
    m->x = buf(t, T * D * 4);
    fill_rand(t, m->x, T * D, rng);
    m->y = buf(t, T * D * 4);
    m->ids = buf(t, T * K * 4);
    int32_t *ids = te_ptr(t, m->ids);
    ids[0] = 0;
    ids[1] = 2;
    ids[2] = -1;
    ids[3] = 2;
    m->w = buf(t, T * K * 4);
    m->experts = buf(t, NE * 3 * sizeof(struct tx8_weight));
    add_op(c, &m->x, T * D * 4, R, 4, "x");
    add_op(c, &m->y, T * D * 4, W, 4, "y");
    add_op(c, &m->ids, T * K * 4, R, 4, "ids");
    add_op(c, &m->w, T * K * 4, R, 4, "w");
    add_op(c, &m->experts, NE * 3 * sizeof(struct tx8_weight), R, 8, "experts");
    struct tx8_weight *tab = te_ptr(t, m->experts);
    size_t es = tx_dtype_size(dtype);
    for (unsigned i = 0; i < NE * 3; i++) {
        struct tx8_weight *w = &tab[i];
        w->rows = i % 3 == 2 ? D : F;
        w->cols = i % 3 == 2 ? F : D;
        w->dtype = (uint16_t)dtype;
        w->data = buf(t, (uint64_t)D * F * es);
        add_op(c, &w->data, (uint64_t)D * F * es, R, (unsigned)es, "expert.data");
        if (dtype == TX8_DTYPE_I8) {
            w->scales = buf(t, w->rows * 4);
            add_op(c, &w->scales, w->rows * 4, R, 4, "expert.scales");
        }
    }
}

static void case_dsa(struct te *t, struct ocase *c, int mask, uint64_t *rng)
{
    struct tx8_cmd_dsa_index *m = CMD(c, struct tx8_cmd_dsa_index);
    unsigned T = 2, H = 3, D = 8, q0 = 10, K = 4;
    m->hdr = TE_HDR(TX8_OP_DSA_INDEX, struct tx8_cmd_dsa_index);
    m->tokens = T;
    m->heads = H;
    m->dim = m->ld_q_head = m->ld_k = D;
    m->kv_len = q0 + T;
    m->q_pos0 = q0;
    m->top_k = K;
    m->sel = buf(t, T * K * 4);
    m->q = buf(t, T * H * D * 4);
    fill_rand(t, m->q, T * H * D, rng);
    m->k = buf(t, (q0 + T) * D * 4);
    m->w = buf(t, T * H * 4);
    add_op(c, &m->sel, T * K * 4, W, 4, "sel");
    add_op(c, &m->q, T * H * D * 4, R, 4, "q");
    add_op(c, &m->k, (q0 + T) * D * 4, R, 4, "k");
    add_op(c, &m->w, T * H * 4, R, 4, "w");
    if (mask) { /* the 1.10 key bitmap */
        m->ld_mask = 1;
        m->mask = buf(t, T * 8);
        uint64_t *b = te_ptr(t, m->mask);
        for (unsigned i = 0; i < T; i++)
            b[i] = 0x333u;
        add_op(c, &m->mask, T * 8, R, 8, "mask");
    }
}

static void case_sample(struct te *t, struct ocase *c, uint64_t *rng)
{
    struct tx8_cmd_sample *m = CMD(c, struct tx8_cmd_sample);
    m->hdr = TE_HDR(TX8_OP_SAMPLE, struct tx8_cmd_sample);
    m->rows = 2;
    m->vocab = m->ld_logits = 100;
    m->temperature = 0.8f;
    m->top_p = 0.9f;
    m->top_k = 10;
    m->logits = buf(t, 800);
    fill_rand(t, m->logits, 200, rng);
    m->out = buf(t, 8);
    m->probs = buf(t, 8);
    m->allow = buf(t, 32); /* 1.9: 4 words per row, every id allowed */
    m->ld_allow = 4;
    memset(t->mem + m->allow, 0xff, 32);
    add_op(c, &m->logits, 800, R, 4, "logits");
    add_op(c, &m->out, 8, W, 4, "out");
    add_op(c, &m->probs, 8, W, 4, "probs");
    add_op(c, &m->allow, 32, R, 4, "allow");
}

START_TEST(test_operand_ranges)
{
    struct te *t =
        te_new(TX8_ISA_PORTABLE + (tx8_engine_isa_supported(TX8_ISA_AVX2) ? 1 : 0), 2, 0);
    uint64_t rng = 77;
    static struct ocase c; /* large; keep off the stack */
    int n = 0;
    for (int k = 0;; k++) {
        memset(&c, 0, sizeof(c));
        uint64_t mark = t->brk;
        switch (k) {
        case 0:
            c.name = "fill";
            case_fill(t, &c);
            break;
        case 1:
            c.name = "copy";
            case_copy(t, &c);
            break;
        case 2:
            c.name = "convert";
            case_convert(t, &c, 0, &rng);
            break;
        case 3:
            c.name = "quantise";
            case_convert(t, &c, 1, &rng);
            break;
        case 4:
            c.name = "matmul f32";
            case_matmul(t, &c, TX8_DTYPE_F32, 0, TX8_MATMUL_F_BIAS | TX8_MATMUL_F_ACCUMULATE, &rng);
            break;
        case 5:
            c.name = "matmul f16 sparse";
            case_matmul(t, &c, TX8_DTYPE_F16, 1, TX8_MATMUL_F_BIAS, &rng);
            break;
        case 6:
            c.name = "matmul i8";
            case_matmul(t, &c, TX8_DTYPE_I8, 0, 0, &rng);
            break;
        case 7:
            c.name = "matmul i8 sparse";
            case_matmul(t, &c, TX8_DTYPE_I8, 1, TX8_MATMUL_F_ACCUMULATE, &rng);
            break;
        case 8:
            c.name = "rmsnorm";
            case_norm(t, &c, 0, &rng);
            break;
        case 9:
            c.name = "layernorm";
            case_norm(t, &c, 1, &rng);
            break;
        case 10:
            c.name = "rope";
            case_rope(t, &c);
            break;
        case 11:
            c.name = "attention";
            case_attention(t, &c, 0, &rng);
            break;
        case 12:
            c.name = "attention sel";
            case_attention(t, &c, 1, &rng);
            break;
        case 13:
            c.name = "swiglu";
            case_swiglu(t, &c);
            break;
        case 14:
            c.name = "add";
            case_add(t, &c);
            break;
        case 15:
            c.name = "embed";
            case_embed(t, &c);
            break;
        case 16:
            c.name = "moe_route";
            case_route(t, &c, &rng);
            break;
        case 17:
            c.name = "moe_ffn bf16";
            case_moe_ffn(t, &c, TX8_DTYPE_BF16, &rng);
            break;
        case 18:
            c.name = "moe_ffn i8";
            case_moe_ffn(t, &c, TX8_DTYPE_I8, &rng);
            break;
        case 19:
            c.name = "dsa_index";
            case_dsa(t, &c, 0, &rng);
            break;
        case 20:
            c.name = "sample";
            case_sample(t, &c, &rng);
            break;
        case 21:
            c.name = "attention mask";
            case_attention(t, &c, 2, &rng);
            break;
        case 22:
            c.name = "attention sel mask";
            case_attention(t, &c, 3, &rng);
            break;
        case 23:
            c.name = "dsa_index mask";
            case_dsa(t, &c, 1, &rng);
            break;
        default:
            goto done;
        }
        exercise(t, &c);
        n++;
        te_reset(t, mark);
    }
done:
    ck_assert_int_eq(n, 24);
    te_free(t);
}
END_TEST

/* Sizes that overflow 64 bits or leave memory: address fault, nothing touched. */
START_TEST(test_overflow)
{
    struct te *t = te_new(TX8_ISA_PORTABLE, 2, 0);
    uint64_t a = te_alloc(t, 4096);
    uint64_t sum = te_heap_sum(t);
    struct {
        const char *name;
        union {
            struct tx8_cmd_hdr hdr;
            struct tx8_cmd_fill fill;
            struct tx8_cmd_copy copy;
            struct tx8_cmd_matmul mm;
            struct tx8_cmd_rope rope;
            struct tx8_cmd_attention at;
            struct tx8_cmd_add add;
            struct tx8_cmd_convert cv;
            struct tx8_cmd_moe_route rt;
        } u;
    } cs[12];
    memset(cs, 0, sizeof(cs));
    int n = 0;
    cs[n].name = "fill huge";
    cs[n].u.fill = (struct tx8_cmd_fill){TE_HDR(TX8_OP_FILL, struct tx8_cmd_fill), a,
                                         0xfffffffffffffff0ull, 1, 0};
    n++;
    cs[n].name = "copy wraps";
    cs[n].u.copy = (struct tx8_cmd_copy){TE_HDR(TX8_OP_COPY, struct tx8_cmd_copy), a,
                                         0xffffffffffffff00ull, 0x200};
    n++;
    cs[n].name = "add n*4 overflows";
    cs[n].u.add = (struct tx8_cmd_add){
        TE_HDR(TX8_OP_ADD, struct tx8_cmd_add), a, a, a, 0x4000000000000001ull, 1, 1};
    n++;
    cs[n].name = "matmul 2^32 x 2^32";
    cs[n].u.mm.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    cs[n].u.mm.x = cs[n].u.mm.y = cs[n].u.mm.w.data = a;
    cs[n].u.mm.w.rows = cs[n].u.mm.w.cols = 0xffffffffu;
    cs[n].u.mm.w.dtype = TX8_DTYPE_F32;
    cs[n].u.mm.tokens = 0xffffffffu;
    cs[n].u.mm.ld_x = cs[n].u.mm.ld_y = 0xffffffffu;
    n++;
    cs[n].name = "matmul i8 scales overflow";
    cs[n].u.mm.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    cs[n].u.mm.x = cs[n].u.mm.y = cs[n].u.mm.w.data = cs[n].u.mm.w.scales = a;
    cs[n].u.mm.w.rows = cs[n].u.mm.w.cols = 0xffffffffu;
    cs[n].u.mm.w.group_size = 1;
    cs[n].u.mm.w.dtype = TX8_DTYPE_I8;
    cs[n].u.mm.act_dtype = TX8_DTYPE_I8;
    cs[n].u.mm.tokens = 1;
    cs[n].u.mm.ld_x = cs[n].u.mm.ld_y = 0xffffffffu;
    n++;
    cs[n].name = "rope strides";
    cs[n].u.rope = (struct tx8_cmd_rope){TE_HDR(TX8_OP_ROPE, struct tx8_cmd_rope),
                                         a,
                                         a,
                                         a,
                                         0xffffffffu,
                                         0xffffffffu,
                                         0xffffffffu,
                                         0xffffffffu,
                                         0xffffffffu,
                                         2,
                                         0,
                                         0};
    n++;
    cs[n].name = "attention heads";
    cs[n].u.at.hdr = TE_HDR(TX8_OP_ATTENTION, struct tx8_cmd_attention);
    cs[n].u.at.out = cs[n].u.at.q = cs[n].u.at.k = cs[n].u.at.v = a;
    cs[n].u.at.tokens = cs[n].u.at.q_heads = cs[n].u.at.kv_heads = 0xffffffffu;
    cs[n].u.at.qk_dim = cs[n].u.at.v_dim = 0xffffffffu;
    cs[n].u.at.ld_q_head = cs[n].u.at.ld_k_head = 0xffffffffu;
    cs[n].u.at.ld_v_head = cs[n].u.at.ld_o_head = 0xffffffffu;
    cs[n].u.at.kv_len = 0xffffffffu;
    cs[n].u.at.q_pos0 = 0xffffffffu;
    n++;
    cs[n].name = "convert rows";
    cs[n].u.cv = (struct tx8_cmd_convert){TE_HDR(TX8_OP_CONVERT, struct tx8_cmd_convert),
                                          a,
                                          a,
                                          0,
                                          0xffffffffu,
                                          0xffffffffu,
                                          0xffffffffu,
                                          0xffffffffu,
                                          TX8_DTYPE_F16,
                                          TX8_DTYPE_F32,
                                          0};
    n++;
    cs[n].name = "route tokens*top_k";
    cs[n].u.rt = (struct tx8_cmd_moe_route){TE_HDR(TX8_OP_MOE_ROUTE, struct tx8_cmd_moe_route),
                                            a,
                                            a,
                                            a,
                                            0,
                                            0,
                                            0xffffffffu,
                                            4096,
                                            4096,
                                            1,
                                            1,
                                            1,
                                            0,
                                            0};
    n++;
    cs[n].name = "fill past memory end";
    cs[n].u.fill =
        (struct tx8_cmd_fill){TE_HDR(TX8_OP_FILL, struct tx8_cmd_fill), t->mem_size - 8, 16, 1, 0};
    n++;
    for (int i = 0; i < n; i++) {
        te_cmd_begin(t);
        te_cmd(t, &cs[i].u);
        unsigned st = te_run(t);
        ck_assert_msg(st == TX8_STATUS_ADDR_FAULT, "%s: %s", cs[i].name,
                      tx8_engine_status_name(st));
        ck_assert_msg(t->done.fault_addr >= t->mem_size || t->done.fault_addr < TX8_CTRL_SIZE,
                      "%s: fault at %#llx", cs[i].name, (unsigned long long)t->done.fault_addr);
        ck_assert_uint_eq(te_heap_sum(t), sum);
    }
    te_free(t);
}
END_TEST

START_TEST(test_cmd_buffer_and_desc)
{
    struct te *t = te_new(TX8_ISA_PORTABLE, 1, 0);
    uint64_t a = te_alloc(t, 4096);
    struct tx8_cmd_fill f = {TE_HDR(TX8_OP_FILL, struct tx8_cmd_fill), a, 64, 1, 0};
    te_cmd_begin(t);
    te_cmd(t, &f);
    uint64_t sum = te_heap_sum(t);

    /* command buffer not readable: only the fill target is listed */
    te_job_default(t);
    t->job.ranges[0].addr = a;
    t->job.ranges[0].size = 4096;
    ck_assert_uint_eq(te_run_job(t, NULL), TX8_STATUS_INVALID_JOB);
    ck_assert_uint_eq(t->done.fault_addr, t->cmd_addr);
    /* command buffer write-only */
    te_job_default(t);
    t->job.num_ranges = 2;
    t->job.ranges[0].addr = t->cmd_addr;
    t->job.ranges[0].size = t->cmd_len;
    t->job.ranges[0].access = W;
    t->job.ranges[1].addr = a;
    t->job.ranges[1].size = 4096;
    t->job.ranges[1].access = RW;
    ck_assert_uint_eq(te_run_job(t, NULL), TX8_STATUS_INVALID_JOB);
    /* half of the buffer readable */
    t->job.ranges[0].access = R;
    t->job.ranges[0].size = 16;
    ck_assert_uint_eq(te_run_job(t, NULL), TX8_STATUS_INVALID_JOB);
    ck_assert_uint_eq(t->done.fault_addr, t->cmd_addr + 16);
    ck_assert_uint_eq(te_heap_sum(t), sum);

    /* descriptors */
    struct {
        const char *name;
        void (*mut)(struct tx8_job_desc *j, struct te *t);
    } * d, muts[] = {
               {"no ranges", NULL},
           };
    (void)d;
    (void)muts;
    struct tx8_job_desc good;
    te_job_default(t);
    good = t->job;
    ck_assert_uint_eq(te_run_job(t, NULL), TX8_STATUS_OK);
    sum = te_heap_sum(t);
    for (int k = 0; k < 16; k++) {
        t->job = good;
        struct tx8_job_desc *j = &t->job;
        switch (k) {
        case 0:
            j->num_ranges = 0;
            break;
        case 1:
            j->num_ranges = TX8_JOB_MAX_RANGES + 1;
            break;
        case 2:
            j->ranges[0].size = 0;
            break;
        case 3:
            j->ranges[0].access = 0;
            break;
        case 4:
            j->ranges[0].access = 4;
            break;
        case 5:
            j->ranges[0].rsvd = 1;
            break;
        case 6: /* overlaps the control block */
            j->ranges[0].addr = TX8_CTRL_SIZE - 4096;
            break;
        case 7: /* past the end of memory */
            j->ranges[0].size += 1;
            break;
        case 8: /* wraps */
            j->ranges[0].size = UINT64_MAX - 100;
            break;
        case 9:
            j->cmd_size = 12; /* not a multiple of 8 */
            break;
        case 10:
            j->rsvd0 = 1;
            break;
        case 11:
            j->rsvd[1] = 1;
            break;
        case 12:
            j->flags = 1u << 3; /* the first bit past TX8_JOB_F_BATCH_INVARIANT */
            break;
        case 13:
            j->cmd_size = TX8_ENGINE_MAX_CMD_SIZE + 8;
            break;
        case 14:
            j->ranges[0].addr = 0;
            break;
        case 15:
            j->num_ranges = 2; /* ranges[1] is all zero */
            break;
        }
        unsigned st = te_run_job(t, NULL);
        ck_assert_msg(st == TX8_STATUS_INVALID_JOB, "descriptor case %d: %s", k,
                      tx8_engine_status_name(st));
        ck_assert_uint_eq(te_heap_sum(t), sum);
    }
    /* NULL arguments */
    ck_assert_int_lt(tx8_engine_run(NULL, &good, &t->done, NULL), 0);
    ck_assert_int_lt(tx8_engine_run(t->e, NULL, &t->done, NULL), 0);
    ck_assert_int_lt(tx8_engine_run(t->e, &good, NULL, NULL), 0);
    te_free(t);
}
END_TEST

/* Bad fields: INVALID_CMD / UNSUPPORTED_DTYPE, nothing touched; and a fault
 * in a later command stops the job before its first command runs. */
START_TEST(test_bad_fields)
{
    struct te *t = te_new(TX8_ISA_PORTABLE, 2, 0);
    uint64_t a = te_alloc(t, 1 << 16), b = te_alloc(t, 1 << 16);
    uint64_t sum = te_heap_sum(t);
    struct tx8_cmd_matmul mm;
    memset(&mm, 0, sizeof(mm));
    mm.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    mm.x = a;
    mm.y = b;
    mm.w.data = a;
    mm.w.rows = 4;
    mm.w.cols = 8;
    mm.w.dtype = TX8_DTYPE_F32;
    mm.tokens = 2;
    mm.ld_x = 8;
    mm.ld_y = 4;
    ck_assert_uint_eq(te_run1(t, &mm), TX8_STATUS_OK);
    sum = te_heap_sum(t);
    for (int k = 0; k < 22; k++) {
        union {
            struct tx8_cmd_matmul m;
            uint8_t bytes[512];
        } u;
        memset(&u, 0, sizeof(u));
        u.m = mm;
        struct tx8_cmd_matmul m = mm;
        unsigned want = TX8_STATUS_INVALID_CMD;
        switch (k) {
        case 0:
            m.rsvd = 1;
            break;
        case 1:
            m.w.rsvd = 1;
            break;
        case 2:
            m.hdr.flags = 0x10;
            break;
        case 3:
            m.hdr.size += 8;
            break;
        case 4:
            m.hdr.size = 0;
            break;
        case 5:
            m.hdr.opcode = TX8_OP_COUNT;
            break;
        case 6:
            m.hdr.opcode = 0xffff;
            break;
        case 7:
            m.w.dtype = TX8_DTYPE_I32;
            want = TX8_STATUS_UNSUPPORTED_DTYPE;
            break;
        case 8:
            m.w.dtype = 77;
            want = TX8_STATUS_UNSUPPORTED_DTYPE;
            break;
        case 9:
            m.act_dtype = TX8_DTYPE_I8; /* needs an I8 weight */
            want = TX8_STATUS_UNSUPPORTED_DTYPE;
            break;
        case 10:
            m.w.format = 7;
            break;
        case 11:
            m.w.scales = a; /* only for I8 */
            break;
        case 12:
            m.w.index = a; /* only for sparse */
            break;
        case 13:
            m.w.dtype = TX8_DTYPE_I8; /* without scales */
            break;
        case 14:
            m.w.dtype = TX8_DTYPE_I8;
            m.w.scales = a;
            m.w.group_size = 3; /* does not divide cols */
            break;
        case 15:
            m.w.format = TX8_WFMT_BLOCK_SPARSE; /* cols not a multiple of 32 */
            m.w.index = a;
            break;
        case 16:
            m.ld_x = 7; /* < K */
            break;
        case 17:
            m.ld_y = 3; /* < N */
            break;
        case 18:
            m.x = a + 2; /* misaligned */
            break;
        case 19:
            m.w.nnz_blocks = 1;
            break;
        case 20:
            m.act_dtype = 9;
            want = TX8_STATUS_UNSUPPORTED_DTYPE;
            break;
        case 21:
            m.w.group_size = 4; /* only for I8 */
            break;
        }
        /* a valid FILL first: it must not run either */
        struct tx8_cmd_fill f = {TE_HDR(TX8_OP_FILL, struct tx8_cmd_fill), a, 64, 9, 0};
        te_cmd_begin(t);
        te_cmd(t, &f);
        u.m = m;
        if (k == 4) { /* size 0: copy the struct by hand */
            memcpy(t->mem + t->cmd_addr + t->cmd_len, &m, sizeof(m));
            t->cmd_len += sizeof(m);
            t->ncmd++;
        } else {
            te_cmd(t, &u);
        }
        if (k == 3 || k == 4) /* the size field itself: keep the buffer length */
            t->cmd_len = sizeof(f) + sizeof(m);
        unsigned st = te_run(t);
        ck_assert_msg(st == want, "field case %d: %s", k, tx8_engine_status_name(st));
        ck_assert_uint_eq(t->done.fault_cmd, 1);
        ck_assert_msg(te_heap_sum(t) == sum, "field case %d modified memory", k);
    }
    /* trailing bytes that are not a whole command */
    struct tx8_cmd_hdr nop = TE_HDR(TX8_OP_NOP, struct tx8_cmd_hdr);
    te_cmd_begin(t);
    te_cmd(t, &nop);
    t->cmd_len += 8; /* garbage (zero) header: opcode 0 size 0 */
    ck_assert_uint_eq(te_run(t), TX8_STATUS_INVALID_CMD);
    ck_assert_uint_eq(t->done.fault_cmd, 1);
    nop.flags = 1;
    ck_assert_uint_eq(te_run1(t, &nop), TX8_STATUS_INVALID_CMD);

    /* other ops' reserved fields and dtypes */
    struct tx8_cmd_rope rp = {
        TE_HDR(TX8_OP_ROPE, struct tx8_cmd_rope), a, a, a, 1, 1, 8, 8, 0, 3 /* odd */, 0, 0};
    ck_assert_uint_eq(te_run1(t, &rp), TX8_STATUS_INVALID_CMD);
    rp.rot_dim = 4;
    rp.mode = 2;
    ck_assert_uint_eq(te_run1(t, &rp), TX8_STATUS_INVALID_CMD);
    struct tx8_cmd_attention at;
    memset(&at, 0, sizeof(at));
    at.hdr = TE_HDR(TX8_OP_ATTENTION, struct tx8_cmd_attention);
    at.out = at.q = at.k = at.v = a;
    at.tokens = 1;
    at.q_heads = 3;
    at.kv_heads = 2; /* 3 % 2 != 0 */
    at.qk_dim = at.v_dim = at.ld_q_head = at.ld_k_head = at.ld_v_head = at.ld_o_head = 4;
    at.kv_len = 1;
    ck_assert_uint_eq(te_run1(t, &at), TX8_STATUS_INVALID_CMD);
    at.kv_heads = 1;
    at.kv_dtype = TX8_DTYPE_I8;
    ck_assert_uint_eq(te_run1(t, &at), TX8_STATUS_UNSUPPORTED_DTYPE);
    /* the 1.10 key bitmap's fields: ld_mask covering the keys, both or
     * neither set, rsvd1 0; the 1.9 form (no bitmap) still accepted */
    at.kv_dtype = TX8_DTYPE_F32;
    ck_assert_uint_eq(te_run1(t, &at), TX8_STATUS_OK);
    at.mask = b;
    ck_assert_uint_eq(te_run1(t, &at), TX8_STATUS_INVALID_CMD); /* no ld_mask */
    at.ld_mask = 1;
    ck_assert_uint_eq(te_run1(t, &at), TX8_STATUS_OK);
    at.rsvd1 = 1;
    ck_assert_uint_eq(te_run1(t, &at), TX8_STATUS_INVALID_CMD);
    at.rsvd1 = 0;
    at.mask = 0;
    ck_assert_uint_eq(te_run1(t, &at), TX8_STATUS_INVALID_CMD); /* ld_mask without it */
    at.mask = b;
    at.kv_len = 65;
    at.q_pos0 = 64; /* 65 keys: one word is short */
    ck_assert_uint_eq(te_run1(t, &at), TX8_STATUS_INVALID_CMD);
    at.kv_len = 1;
    at.q_pos0 = 0;
    at.mask = at.ld_mask = 0;
    at.hdr.size = TX8_CMD_ATTENTION_SIZE_1_9;
    ck_assert_uint_eq(te_run1(t, &at), TX8_STATUS_OK);
    at.hdr.size = TX8_CMD_ATTENTION_SIZE_1_9 + 8; /* neither form */
    ck_assert_uint_eq(te_run1(t, &at), TX8_STATUS_INVALID_CMD);
    sum = te_heap_sum(t); /* the passing ones wrote their output */
    struct tx8_cmd_convert cv = {TE_HDR(TX8_OP_CONVERT, struct tx8_cmd_convert),
                                 a,
                                 b,
                                 0,
                                 1,
                                 4,
                                 4,
                                 4,
                                 TX8_DTYPE_I8,
                                 TX8_DTYPE_F16,
                                 0};
    ck_assert_uint_eq(te_run1(t, &cv), TX8_STATUS_UNSUPPORTED_DTYPE);
    struct tx8_cmd_sample sp = {TE_HDR(TX8_OP_SAMPLE, struct tx8_cmd_sample),
                                a,
                                b,
                                0,
                                1,
                                0,
                                1,
                                16,
                                16,
                                TX8_ENGINE_MAX_TOPK + 1,
                                1.0f,
                                1.0f,
                                0.0f,
                                0.0f,
                                0.0f,
                                0.0f,
                                0,
                                0,
                                0, 0, 0, 0};
    ck_assert_uint_eq(te_run1(t, &sp), TX8_STATUS_INVALID_CMD);
    sp.top_k = 0;
    sp.top_p = 0.0f;
    ck_assert_uint_eq(te_run1(t, &sp), TX8_STATUS_INVALID_CMD);
    struct tx8_cmd_moe_route rt = {TE_HDR(TX8_OP_MOE_ROUTE, struct tx8_cmd_moe_route),
                                   a,
                                   b,
                                   a,
                                   0,
                                   0,
                                   1,
                                   8,
                                   9 /* > experts */,
                                   1,
                                   1,
                                   1,
                                   0,
                                   0};
    ck_assert_uint_eq(te_run1(t, &rt), TX8_STATUS_INVALID_CMD);
    rt.top_k = 4;
    rt.n_group = 3; /* does not divide 8 */
    ck_assert_uint_eq(te_run1(t, &rt), TX8_STATUS_INVALID_CMD);
    ck_assert_uint_eq(te_heap_sum(t), sum);
    /* failing commands leave memory alone; passing ones may write */
#define BAD14(cmd)                                                                                 \
    do {                                                                                           \
        ck_assert_uint_eq(te_run1(t, (cmd)), TX8_STATUS_INVALID_CMD);                              \
        ck_assert_uint_eq(te_heap_sum(t), sum);                                                    \
    } while (0)
#define OK14(cmd)                                                                                  \
    do {                                                                                           \
        ck_assert_uint_eq(te_run1(t, (cmd)), TX8_STATUS_OK);                                       \
        sum = te_heap_sum(t);                                                                      \
    } while (0)
    /* 1.4 softmax router: no bias, no group limit; an unknown flag bit */
    rt.n_group = 1;
    rt.hdr.flags = TX8_ROUTE_F_SOFTMAX;
    rt.bias = a;
    BAD14(&rt);
    rt.tokens = 0; /* a static rule: even with nothing to route */
    BAD14(&rt);
    rt.tokens = 1;
    rt.bias = 0;
    rt.n_group = 2;
    rt.topk_group = 2;
    BAD14(&rt);
    rt.hdr.flags = 0; /* the same groups are fine for the sigmoid router */
    OK14(&rt);
    rt.hdr.flags = TX8_ROUTE_F_SOFTMAX << 1;
    rt.n_group = 1;
    BAD14(&rt);
    rt.hdr.flags = TX8_ROUTE_F_SOFTMAX | TX8_ROUTE_F_NORM_TOPK;
    OK14(&rt);
    /* 1.4 ROPE attn_factor: only with its flag, finite; unknown flags */
    rp.mode = TX8_ROPE_NEOX;
    OK14(&rp);
    rp.attn_factor = 1.0f; /* the former rsvd, without the flag */
    BAD14(&rp);
    rp.attn_factor = -0.0f; /* any non-zero bit */
    BAD14(&rp);
    rp.hdr.flags = TX8_ROPE_F_ATTN_FACTOR;
    rp.attn_factor = INFINITY;
    BAD14(&rp);
    rp.attn_factor = NAN;
    BAD14(&rp);
    rp.attn_factor = 1.25f;
    OK14(&rp);
    rp.hdr.flags = TX8_ROPE_F_ATTN_FACTOR << 1;
    BAD14(&rp);
#undef BAD14
#undef OK14
    /* an extent of 2^62 + 2 elements (heads 2^31 + 1 at a stride of 2^31,
     * rot_dim 2: 2^32 + 2 rotated elements fit) is 2^64 + 8 bytes: an
     * address fault, not an 8-byte range and a rotation across the host's
     * memory */
    struct tx8_cmd_rope big = {
        TE_HDR(TX8_OP_ROPE, struct tx8_cmd_rope), a, a, a, 1, (1u << 31) + 1, 0, 1u << 31, 0, 2, 0,
        0};
    ck_assert_uint_eq(te_run1(t, &big), TX8_STATUS_ADDR_FAULT);
    ck_assert_uint_eq(te_heap_sum(t), sum);

    te_free(t);
}
END_TEST

/* A malformed sparse index fails with INVALID_CMD and touches nothing. */
START_TEST(test_bad_sparse_index)
{
    struct te *t = te_new(TX8_ISA_PORTABLE, 2, 0);
    unsigned N = 4, K = 96, nnz = 6;
    uint64_t x = te_alloc(t, K * 4), y = te_alloc(t, N * 4), data = te_alloc(t, nnz * 32 * 4),
             idx = te_alloc(t, (N + 1) * 4 + nnz * 2);
    const uint32_t rp0[5] = {0, 2, 3, 5, 6};
    const uint16_t cb0[6] = {0, 2, 1, 0, 1, 2};
    struct tx8_cmd_matmul m;
    memset(&m, 0, sizeof(m));
    m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    m.x = x;
    m.y = y;
    m.w = (struct tx8_weight){data, 0, idx, N, K, nnz, 0, TX8_DTYPE_F32, TX8_WFMT_BLOCK_SPARSE, 0};
    m.tokens = 1;
    m.ld_x = K;
    m.ld_y = N;
    uint32_t *rp = te_ptr(t, idx);
    uint16_t *cb = (uint16_t *)(rp + N + 1);
    memcpy(rp, rp0, sizeof(rp0));
    memcpy(cb, cb0, sizeof(cb0));
    ck_assert_uint_eq(te_run1(t, &m), TX8_STATUS_OK);
    ck_assert_uint_eq(t->ctr.macs_skipped, (uint64_t)N * K - nnz * 32);
    for (int k = 0; k < 7; k++) {
        memcpy(rp, rp0, sizeof(rp0));
        memcpy(cb, cb0, sizeof(cb0));
        switch (k) {
        case 0:
            rp[2] = 1; /* decreasing */
            break;
        case 1:
            rp[4] = 5; /* last != nnz */
            break;
        case 2:
            rp[0] = 1;
            break;
        case 3:
            cb[1] = 3; /* past K / 32 */
            break;
        case 4:
            cb[1] = 0; /* not strictly increasing */
            break;
        case 5:
            cb[4] = 0xffff;
            break;
        case 6:
            rp[3] = 100; /* beyond nnz */
            break;
        }
        uint64_t sum = te_heap_sum(t);
        unsigned st = te_run1(t, &m);
        ck_assert_msg(st == TX8_STATUS_INVALID_CMD, "sparse case %d: %s", k,
                      tx8_engine_status_name(st));
        ck_assert_uint_eq(te_heap_sum(t), sum);
    }
    te_free(t);
}
END_TEST

/* A larger index (the vectorised scan): errors anywhere are found. */
START_TEST(test_bad_sparse_index_large)
{
    struct te *t = te_new(te_isas[_i], 2, 0);
    if (!t)
        return;
    unsigned N = 64, nbc = 40, K = nbc * 32;
    uint64_t rng = 11;
    /* every row keeps a random increasing subset of its blocks */
    uint32_t *rp0 = malloc((N + 1) * 4);
    uint16_t *cb0 = malloc(N * nbc * 2);
    uint32_t nnz = 0;
    for (unsigned r = 0; r < N; r++) {
        rp0[r] = nnz;
        for (unsigned b = 0; b < nbc; b++)
            if (te_rand(&rng, 0, 2) || r == 7) /* row 7 full, some rows dense */
                cb0[nnz++] = (uint16_t)b;
    }
    rp0[N] = nnz;
    uint64_t x = te_alloc(t, K * 4), y = te_alloc(t, N * 4), data = te_alloc(t, nnz * 32 * 4),
             idx = te_alloc(t, (N + 1) * 4 + nnz * 2);
    struct tx8_cmd_matmul m;
    memset(&m, 0, sizeof(m));
    m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    m.x = x;
    m.y = y;
    m.w = (struct tx8_weight){data, 0, idx, N, K, nnz, 0, TX8_DTYPE_F32, TX8_WFMT_BLOCK_SPARSE, 0};
    m.tokens = 1;
    m.ld_x = K;
    m.ld_y = N;
    uint32_t *rp = te_ptr(t, idx);
    uint16_t *cb = (uint16_t *)(rp + N + 1);
    memcpy(rp, rp0, (N + 1) * 4);
    memcpy(cb, cb0, nnz * 2);
    ck_assert_uint_eq(te_run1(t, &m), TX8_STATUS_OK);
    for (int k = 0; k < 40; k++) {
        memcpy(rp, rp0, (N + 1) * 4);
        memcpy(cb, cb0, nnz * 2);
        unsigned p = te_rand(&rng, 1, nnz - 2);
        switch (k % 4) {
        case 0: /* out of range */
            cb[p] = (uint16_t)(nbc + te_rand(&rng, 0, 100));
            break;
        case 1: /* equal to the previous block of the same row (row 7 is full) */
            p = rp0[7] + te_rand(&rng, 1, nbc - 1);
            cb[p] = cb[p - 1];
            break;
        case 2: /* decreasing inside row 7 */
            p = rp0[7] + te_rand(&rng, 1, nbc - 1);
            cb[p] = (uint16_t)(cb[p - 1] - 1);
            break;
        case 3: /* row_ptr decreasing */
            p = te_rand(&rng, 1, N - 1);
            rp[p] = rp[p - 1] > 0 ? rp[p - 1] - 1 : nnz;
            break;
        }
        uint64_t sum = te_heap_sum(t);
        unsigned st = te_run1(t, &m);
        ck_assert_msg(st == TX8_STATUS_INVALID_CMD, "large sparse case %d: %s", k,
                      tx8_engine_status_name(st));
        ck_assert_uint_eq(te_heap_sum(t), sum);
    }
    free(rp0);
    free(cb0);
    te_free(t);
}
END_TEST

/* Expert tables: bad shapes, bad ids, bad sparse indexes of experts. */
START_TEST(test_bad_expert_table)
{
    struct te *t = te_new(TX8_ISA_PORTABLE, 2, 0);
    uint64_t rng = 3;
    static struct ocase c;
    memset(&c, 0, sizeof(c));
    case_moe_ffn(t, &c, TX8_DTYPE_F32, &rng);
    struct tx8_cmd_moe_ffn *m = CMD(&c, struct tx8_cmd_moe_ffn);
    struct tx8_weight *tab = te_ptr(t, m->experts);
    struct tx8_weight saved[9];
    memcpy(saved, tab, sizeof(saved));
    int32_t *ids = te_ptr(t, m->ids);
    ck_assert_uint_eq(te_run1(t, &c.cmd), TX8_STATUS_OK);
    for (int k = 0; k < 8; k++) {
        unsigned want = TX8_STATUS_INVALID_CMD;
        memcpy(tab, saved, sizeof(saved));
        int32_t id0 = ids[0];
        switch (k) {
        case 0:
            tab[4].rows = 65; /* up of expert 1 (unused): wrong shape */
            break;
        case 1:
            tab[8].cols = 32; /* down: cols must be ffn_dim */
            break;
        case 2:
            ids[0] = 3; /* >= num_experts */
            break;
        case 3:
            tab[1].dtype = TX8_DTYPE_I32;
            want = TX8_STATUS_UNSUPPORTED_DTYPE;
            break;
        case 4: /* sparse, malformed index, expert 2 (used) */
            tab[6].format = TX8_WFMT_BLOCK_SPARSE;
            tab[6].nnz_blocks = 1;
            tab[6].index = m->x; /* x holds random floats: not a valid CSR */
            break;
        case 5:
            tab[2].rsvd = 1;
            break;
        case 6: /* an unused expert's weight outside the ranges: still a fault */
            tab[3].data = 8;
            want = TX8_STATUS_ADDR_FAULT;
            break;
        case 7:
            tab[0].data = t->mem_size - 16;
            want = TX8_STATUS_ADDR_FAULT;
            break;
        }
        uint64_t sum = te_heap_sum(t);
        unsigned st = te_run1(t, &c.cmd);
        ck_assert_msg(st == want, "expert table case %d: %s", k, tx8_engine_status_name(st));
        ck_assert_msg(te_heap_sum(t) == sum, "expert case %d modified memory", k);
        ids[0] = id0;
    }
    memcpy(tab, saved, sizeof(saved));
    te_free(t);
}
END_TEST

/* ---- abort -------------------------------------------------------------- */

struct abort_arg {
    volatile int *flag;
    unsigned delay_us;
};

static void *aborter(void *p)
{
    struct abort_arg *a = p;
    usleep(a->delay_us);
    *a->flag = 1;
    return NULL;
}

START_TEST(test_abort)
{
    struct te *t = te_new(TX8_ISA_PORTABLE, 2, 0);
    /* a long job: many large f32 matmuls with the portable kernels */
    unsigned T = 64, N = 512, K = 1024;
    uint64_t x = te_alloc(t, (uint64_t)T * K * 4), y = te_alloc(t, (uint64_t)T * N * 4),
             w = te_alloc(t, (uint64_t)N * K * 4);
    struct tx8_cmd_matmul m;
    memset(&m, 0, sizeof(m));
    m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    m.x = x;
    m.y = y;
    m.w.data = w;
    m.w.rows = N;
    m.w.cols = K;
    m.w.dtype = TX8_DTYPE_F32;
    m.tokens = T;
    m.ld_x = K;
    m.ld_y = N;
    te_cmd_begin(t);
    for (int i = 0; i < 200; i++)
        te_cmd(t, &m);
    te_job_default(t);

    /* already set: nothing runs */
    volatile int flag = 1;
    uint64_t c0 = t->ctr.commands;
    ck_assert_uint_eq(te_run_job(t, &flag), TX8_STATUS_ABORTED);
    ck_assert_uint_eq(t->ctr.commands, c0);
    ck_assert_uint_eq(t->done.fault_cmd, 0);

    /* set during the job: it ends early with ABORTED */
    flag = 0;
    struct abort_arg aa = {&flag, 20000};
    pthread_t th;
    pthread_create(&th, NULL, aborter, &aa);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned st = te_run_job(t, &flag);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(th, NULL);
    ck_assert_uint_eq(st, TX8_STATUS_ABORTED);
    ck_assert_uint_lt(t->done.fault_cmd, 200);
    ck_assert_uint_lt(t->ctr.commands - c0, 200);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    ck_assert_msg(secs < 5.0, "abort took %.2f s", secs);

    /* the engine works normally afterwards */
    flag = 0;
    struct tx8_cmd_fill f = {TE_HDR(TX8_OP_FILL, struct tx8_cmd_fill), x, 64, 5, 0};
    te_cmd_begin(t);
    te_cmd(t, &f);
    te_job_default(t);
    ck_assert_uint_eq(te_run_job(t, &flag), TX8_STATUS_OK);
    ck_assert_uint_eq(*(uint32_t *)te_ptr(t, x), 5);
    te_free(t);
}
END_TEST

/* ---- counters ----------------------------------------------------------- */

START_TEST(test_counters)
{
    struct te *t = te_new(TX8_ISA_PORTABLE, 2, 0);
    uint64_t rng = 1;
    unsigned T = 8, N = 256, K = 512;
    uint64_t x = te_alloc(t, T * K * 4), y = te_alloc(t, T * N * 4), w = te_alloc(t, N * K * 2);
    te_fill_f32(&rng, te_ptr(t, x), T * K, 1);
    struct tx8_cmd_matmul m;
    memset(&m, 0, sizeof(m));
    m.hdr = TE_HDR(TX8_OP_MATMUL, struct tx8_cmd_matmul);
    m.x = x;
    m.y = y;
    m.w.data = w;
    m.w.rows = N;
    m.w.cols = K;
    m.w.dtype = TX8_DTYPE_F16;
    m.tokens = T;
    m.ld_x = K;
    m.ld_y = N;
    te_cmd_begin(t);
    for (int i = 0; i < 10; i++)
        te_cmd(t, &m);
    ck_assert_uint_eq(te_run(t), TX8_STATUS_OK);
    ck_assert_uint_eq(t->ctr.commands, 10);
    ck_assert_uint_eq(t->ctr.macs[TX8_DTYPE_F16], 10ull * T * N * K);
    ck_assert_uint_eq(t->done.macs, 10ull * T * N * K);
    ck_assert_uint_eq(t->ctr.bytes_read, 10ull * (T * K * 4 + N * K * 2));
    ck_assert_uint_eq(t->ctr.bytes_written, 10ull * T * N * 4);
    uint64_t busy = 0;
    for (unsigned i = 0; i < TX8_MAX_CORES; i++)
        busy += t->ctr.core_busy_ns[i];
    ck_assert_uint_gt(t->ctr.core_busy_ns[0], 0);
    ck_assert_uint_eq(busy, t->done.busy_ns);
    ck_assert_ptr_eq(tx8_engine_counters(t->e), &t->ctr);
    ck_assert_uint_eq(tx8_engine_cores(t->e), 2);
    te_free(t);
}
END_TEST

/* ---- ISA selection and creation errors ----------------------------------- */

START_TEST(test_isa_select)
{
    static uint8_t mem[TX8_CTRL_SIZE + 65536] __attribute__((aligned(4096)));
    struct tx8_engine *e = NULL;
    struct tx8_engine_config cfg = {1, -1, 0, TX8_ISA_AUTO, {0, 0, 0}};
    setenv("TX8_ENGINE_ISA", "portable", 1);
    ck_assert_int_eq(tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), 0);
    ck_assert_uint_eq(tx8_engine_isa(e), TX8_ISA_PORTABLE);
    ck_assert_str_eq(tx8_engine_isa_name(tx8_engine_isa(e)), "portable");
    tx8_engine_destroy(e);
    setenv("TX8_ENGINE_ISA", "bogus", 1);
    ck_assert_int_eq(tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), -EINVAL);
    ck_assert_ptr_null(e);
    unsetenv("TX8_ENGINE_ISA");
    ck_assert_int_eq(tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), 0);
    unsigned best = tx8_engine_isa(e);
    ck_assert(tx8_engine_isa_supported(best));
    for (unsigned i = best + 1; i <= TX8_ISA_AVX512; i++)
        ck_assert(!tx8_engine_isa_supported(i));
    tx8_engine_destroy(e);
    for (unsigned i = TX8_ISA_PORTABLE; i <= TX8_ISA_AVX512; i++) {
        cfg.isa = i;
        int rc = tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL);
        ck_assert_int_eq(rc, tx8_engine_isa_supported(i) ? 0 : -ENOTSUP);
        tx8_engine_destroy(e);
        e = NULL;
    }
    /* bad arguments */
    cfg.isa = 9;
    ck_assert_int_eq(tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), -EINVAL);
    cfg.isa = TX8_ISA_PORTABLE;
    cfg.rsvd[1] = 1;
    ck_assert_int_eq(tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), -EINVAL);
    cfg.rsvd[1] = 0;
    cfg.cores = TX8_MAX_CORES + 1;
    ck_assert_int_eq(tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), -EINVAL);
    cfg.cores = 1;
    ck_assert_int_eq(tx8_engine_create(&e, NULL, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), -EINVAL);
    ck_assert_int_eq(tx8_engine_create(&e, mem, 4096, TX8_CTRL_SIZE, &cfg, NULL), -EINVAL);
    ck_assert_int_eq(tx8_engine_create(NULL, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), -EINVAL);
    cfg.numa_node = 1000;
    ck_assert_int_eq(tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), -EINVAL);
    if (numa_available() >= 0) {
        /* on node 0: workers bound to it, scratch from numa_alloc_onnode */
        cfg.numa_node = 0;
        cfg.cores = 2;
        ck_assert_int_eq(tx8_engine_create(&e, mem, sizeof(mem), TX8_CTRL_SIZE, &cfg, NULL), 0);
        struct tx8_cmd_embed em = {TE_HDR(TX8_OP_EMBED, struct tx8_cmd_embed),
                                   TX8_CTRL_SIZE + 4096,
                                   TX8_CTRL_SIZE + 8192,
                                   TX8_CTRL_SIZE + 12288,
                                   0,
                                   4,
                                   2,
                                   8,
                                   8,
                                   TX8_DTYPE_F32,
                                   0,
                                   0};
        memcpy(mem + TX8_CTRL_SIZE, &em, sizeof(em));
        struct tx8_job_desc job;
        memset(&job, 0, sizeof(job));
        job.cmd_addr = TX8_CTRL_SIZE;
        job.cmd_size = sizeof(em);
        job.num_ranges = 1;
        job.ranges[0].addr = TX8_CTRL_SIZE;
        job.ranges[0].size = 65536;
        job.ranges[0].access = R | W;
        struct tx8_completion done;
        ck_assert_int_eq(tx8_engine_run(e, &job, &done, NULL), 0);
        ck_assert_uint_eq(done.status, TX8_STATUS_OK);
        tx8_engine_destroy(e);
        e = NULL;
    }
    tx8_engine_destroy(NULL);
    ck_assert_str_eq(tx8_engine_status_name(TX8_STATUS_ADDR_FAULT), "address fault");
    ck_assert_str_eq(tx8_engine_status_name(99), "unknown status");
}
END_TEST

/* ---- fuzz --------------------------------------------------------------- */

/*
 * Random mutations of valid commands (every field, random values and
 * boundary values) under a job whose ranges cover two buffers only. Whatever
 * the status, nothing outside the writable range changes, and the engine
 * never crashes (run under ASan/UBSan by make check).
 */
START_TEST(test_fuzz)
{
    struct te *t = te_new(te_isas[_i], 2, 0);
    if (!t)
        return;
    uint64_t rng = 4242 + _i;
    static struct ocase c;
    unsigned counts[TX8_STATUS_COUNT] = {0};
    for (int it = 0; it < 1500; it++) {
        memset(&c, 0, sizeof(c));
        uint64_t mark = t->brk;
        int k = (int)te_rand(&rng, 0, 13);
        switch (k) {
        case 0:
            case_matmul(t, &c, TX8_DTYPE_I8, 1, 1, &rng);
            break;
        case 1:
            case_matmul(t, &c, TX8_DTYPE_BF16, 0, 3, &rng);
            break;
        case 2:
            case_attention(t, &c, (int)te_rand(&rng, 0, 3), &rng);
            break;
        case 3:
            case_moe_ffn(t, &c, TX8_DTYPE_I8, &rng);
            break;
        case 4:
            case_route(t, &c, &rng);
            break;
        case 5:
            case_dsa(t, &c, 0, &rng);
            break;
        case 6:
            case_sample(t, &c, &rng);
            break;
        case 7:
            case_embed(t, &c);
            break;
        case 8:
            case_rope(t, &c);
            break;
        case 9:
            case_convert(t, &c, 1, &rng);
            break;
        case 10:
            case_norm(t, &c, 1, &rng);
            break;
        case 11:
            case_copy(t, &c);
            break;
        case 12:
            case_moe_ffn(t, &c, TX8_DTYPE_F16, &rng);
            break;
        default:
            case_matmul(t, &c, TX8_DTYPE_F32, 1, 0, &rng);
            break;
        }
        /* mutate 1-3 random 32-bit words of the command (not the header
         * size, else it is just an invalid command), or of the device data */
        unsigned size = c.cmd.hdr.size;
        int nm = (int)te_rand(&rng, 1, 3);
        for (int q = 0; q < nm; q++) {
            uint32_t v;
            switch (te_rand(&rng, 0, 5)) {
            case 0:
                v = 0;
                break;
            case 1:
                v = 0xffffffffu;
                break;
            case 2:
                v = 0x80000000u;
                break;
            case 3:
                v = te_rand(&rng, 0, 70);
                break;
            default:
                v = (uint32_t)te_rand_u64(&rng);
                break;
            }
            unsigned off = 4 * te_rand(&rng, 1, size / 4 - 1);
            if (off == 4)
                continue; /* hdr.size */
            if (te_rand(&rng, 0, 9) == 0 && c.nop) {
                /* a byte of an operand (indexes, ids, tables) */
                struct opnd *o = &c.op[te_rand(&rng, 0, c.nop - 1)];
                uint64_t pos = o->addr + te_rand(&rng, 0, (unsigned)(o->size - 1));
                ((uint8_t *)te_ptr(t, pos))[0] = (uint8_t)v;
            } else {
                memcpy(c.cmd.bytes + off, &v, 4);
            }
        }
        /* the job may touch [lo, hi) = the buffers of this case only */
        te_cmd_begin(t);
        te_cmd(t, &c.cmd);
        te_job_default(t);
        uint64_t lo = mark, hi = t->brk;
        t->job.num_ranges = 2;
        t->job.ranges[0].addr = t->cmd_addr;
        t->job.ranges[0].size = t->cmd_len;
        t->job.ranges[0].access = R;
        t->job.ranges[1].addr = lo;
        t->job.ranges[1].size = hi - lo;
        t->job.ranges[1].access = RW;
        /* checksum of everything outside [lo, hi) */
        uint64_t before = 0, after = 0;
        for (uint64_t p = TX8_CTRL_SIZE; p < lo; p += 8)
            before = before * 31 + *(uint64_t *)te_ptr(t, p);
        for (uint64_t p = hi; p < hi + (1 << 16) && p < t->mem_size; p += 8)
            before = before * 31 + *(uint64_t *)te_ptr(t, p);
        unsigned st = te_run_job(t, NULL);
        ck_assert_uint_lt(st, TX8_STATUS_COUNT);
        counts[st]++;
        for (uint64_t p = TX8_CTRL_SIZE; p < lo; p += 8)
            after = after * 31 + *(uint64_t *)te_ptr(t, p);
        for (uint64_t p = hi; p < hi + (1 << 16) && p < t->mem_size; p += 8)
            after = after * 31 + *(uint64_t *)te_ptr(t, p);
        ck_assert_msg(before == after, "fuzz %d (case %d): memory outside the job changed", it, k);
        te_reset(t, mark);
    }
    /* the mutations produce a mix of outcomes */
    ck_assert_uint_gt(counts[TX8_STATUS_OK], 50);
    ck_assert_uint_gt(counts[TX8_STATUS_ADDR_FAULT], 50);
    ck_assert_uint_gt(counts[TX8_STATUS_INVALID_CMD], 50);
    te_free(t);
}
END_TEST

/* Interface 1.5 profiling: one record per command in the job's buffer, the
 * times inside the job's, the bytes of a FILL; nothing written without the
 * flag; a buffer outside the WRITE ranges, misaligned or too small fails the
 * job as INVALID_JOB. */
START_TEST(test_profile)
{
    struct te *t = te_new(TX8_ISA_PORTABLE, 2, 0);
    ck_assert_ptr_nonnull(t);
    uint64_t dst = te_alloc(t, 4096), pb = te_alloc(t, 4096);
    struct tx8_cmd_fill f;
    memset(&f, 0, sizeof(f));
    f.hdr = TE_HDR(TX8_OP_FILL, struct tx8_cmd_fill);
    f.dst = dst;
    f.bytes = 4096;
    f.value = 3;
    te_cmd_begin(t);
    for (int i = 0; i < 3; i++)
        te_cmd(t, &f);
    /* flag off: prof fields ignored, nothing written */
    te_job_default(t);
    t->job.prof_addr = pb;
    t->job.prof_size = 4096;
    memset(te_ptr(t, pb), 0x5a, 4096);
    ck_assert_uint_eq(te_run_job(t, NULL), TX8_STATUS_OK);
    ck_assert_uint_eq(((uint8_t *)te_ptr(t, pb))[0], 0x5a);
    /* flag on */
    t->job.flags = TX8_JOB_F_PROFILE;
    ck_assert_uint_eq(te_run_job(t, NULL), TX8_STATUS_OK);
    const struct tx8_prof_header *h = te_ptr(t, pb);
    const struct tx8_prof_record *r = (const void *)(h + 1);
    ck_assert_uint_eq(h->magic, TX8_PROF_MAGIC);
    ck_assert_uint_eq(h->version, TX8_PROF_VERSION);
    ck_assert_uint_eq(h->capacity, (4096 - sizeof(*h)) / sizeof(*r));
    ck_assert_uint_eq(h->count, 3);
    ck_assert_uint_eq(h->dropped, 0);
    ck_assert_uint_eq(h->cores, 2);
    ck_assert(h->end_ns >= h->start_ns);
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_uint_eq(r[i].index, i);
        ck_assert_uint_eq(r[i].opcode, TX8_OP_FILL);
        ck_assert(r[i].start_ns >= h->start_ns + h->setup_ns && r[i].end_ns >= r[i].start_ns &&
                  r[i].end_ns <= h->end_ns);
        ck_assert(r[i].ncores >= 1 && r[i].core_mask != 0);
        ck_assert_uint_eq(r[i].bytes_written, 4096);
        ck_assert_uint_eq(r[i].macs, 0);
    }
    /* capacity: 2 records fit, the third is counted as dropped */
    t->job.prof_size = sizeof(*h) + 2 * sizeof(*r);
    ck_assert_uint_eq(te_run_job(t, NULL), TX8_STATUS_OK);
    ck_assert_uint_eq(h->count, 2);
    ck_assert_uint_eq(h->dropped, 1);
    /* bad buffers */
    t->job.prof_size = 4096;
    t->job.prof_addr = pb + 4;
    ck_assert_uint_eq(te_run_job(t, NULL), TX8_STATUS_INVALID_JOB);
    t->job.prof_addr = pb;
    t->job.prof_size = 8;
    ck_assert_uint_eq(te_run_job(t, NULL), TX8_STATUS_INVALID_JOB);
    t->job.prof_size = 4096;
    t->job.ranges[0].access = TX8_ACCESS_READ; /* FILLs would fault too: first the buffer */
    ck_assert_uint_eq(te_run_job(t, NULL), TX8_STATUS_INVALID_JOB);
    ck_assert_uint_eq(t->done.fault_addr, pb);
    te_free(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_checks");
    TCase *tc = tcase_create("checks");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_operand_ranges);
    tcase_add_test(tc, test_overflow);
    tcase_add_test(tc, test_cmd_buffer_and_desc);
    tcase_add_test(tc, test_profile);
    tcase_add_test(tc, test_bad_fields);
    tcase_add_test(tc, test_bad_sparse_index);
    tcase_add_loop_test(tc, test_bad_sparse_index_large, 0, 3);
    tcase_add_test(tc, test_bad_expert_table);
    tcase_add_test(tc, test_abort);
    tcase_add_test(tc, test_counters);
    tcase_add_test(tc, test_isa_select);
    tcase_add_loop_test(tc, test_fuzz, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
