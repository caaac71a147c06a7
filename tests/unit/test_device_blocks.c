// SPDX-License-Identifier: MIT
/*
 * The blocks of interface 1.4 on a device (through libtx's tx_cmd_* helpers)
 * against the FP32 reference ops the reference forward uses:
 *  - MOE_ROUTE with TX8_ROUTE_F_SOFTMAX vs txref_route_softmax (Qwen3-MoE);
 *  - ROPE with TX8_ROPE_F_ATTN_FACTOR and YaRN inv_freq
 *    (tx_rope_yarn_inv_freq, DeepSeek-V3's rope_scaling) vs txref_rope_scaled;
 *  - the helpers' argument errors for the new flags.
 * Backend: $TX_DEVICE if set, else a tx8-emu started for this program.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx-internal/glm_reference.h>
#include <tx/tx.h>

#include "model/rope_scaling.h"
#include "reference/ref_internal.h"
#include "tx_test_emu.h"
#include "tx_test_main.h"

static struct tx_test_emu g_emu;
static bool g_own_emu;
static char g_spec[300];

#define OKAY(expr)                                                                                 \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        ck_assert_msg(rc_ == TX_OK, "%s = %d (%s): %s", #expr, rc_, tx_strerror(rc_),              \
                      tx_last_error());                                                            \
    } while (0)

#define FAILS(expr, code, needle)                                                                  \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        ck_assert_msg(rc_ == (code), "%s = %d, expected %d; last error: %s", #expr, rc_, (code),   \
                      tx_last_error());                                                            \
        ck_assert_msg(strstr(tx_last_error(), (needle)), "%s: message \"%s\" lacks \"%s\"", #expr, \
                      tx_last_error(), (needle));                                                  \
    } while (0)

struct dev {
    tx_device_t *dev;
    tx_bo_t *bo;
    uint8_t *map;
    uint64_t size;
};

static void dev_open(struct dev *d, uint64_t size)
{
    memset(d, 0, sizeof(*d));
    OKAY(tx_device_open(g_spec, &d->dev));
    OKAY(tx_bo_alloc(d->dev, size, 0, "blocks", &d->bo));
    void *m = NULL;
    OKAY(tx_bo_map(d->bo, &m));
    d->map = m;
    d->size = size;
}

static void dev_close(struct dev *d)
{
    OKAY(tx_bo_free(d->bo));
    OKAY(tx_device_close(d->dev));
}

static void run(struct dev *d, tx_cmdbuf_t *cb)
{
    tx_job_t job = 0;
    struct tx_job_result r;
    OKAY(tx_submit(d->dev, cb, &job));
    OKAY(tx_wait(d->dev, job, 20000000000ll, &r));
    ck_assert_msg(r.status == TX_JOB_OK, "job status %u at command %u", r.status, r.fault_cmd);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static float rng_f(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(rng_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Qwen3-MoE-like routing: 128 experts, top 8, norm_topk_prob on and off,
 * with the live counts; ids exact, weights within 1e-6 relative. */
START_TEST(test_route_softmax_vs_ref)
{
    enum { T = 24, E = 128, K = 8 };
    struct dev d;
    dev_open(&d, 1 << 20);
    const uint64_t o_lg = 0, o_ids = T * E * 4, o_w = o_ids + T * K * 4, o_cnt = o_w + T * K * 4;
    float *lg = (float *)(d.map + o_lg), *w = (float *)(d.map + o_w);
    int32_t *ids = (int32_t *)(d.map + o_ids);
    uint64_t *cnt = (uint64_t *)(d.map + o_cnt);
    uint64_t s = 0x51ed270b27ull;
    for (int norm = 0; norm < 2; norm++) {
        for (int i = 0; i < T * E; i++)
            lg[i] = 3.0f * rng_f(&s);
        memset(cnt, 0, E * 8);
        tx_cmdbuf_t *cb = NULL;
        OKAY(tx_cmdbuf_create(d.dev, &cb));
        struct tx_moe_route_args a;
        memset(&a, 0, sizeof(a));
        a.out_ids = tx_ref(d.bo, o_ids);
        a.out_w = tx_ref(d.bo, o_w);
        a.logits = tx_ref(d.bo, o_lg);
        a.counts = tx_ref(d.bo, o_cnt);
        a.tokens = T;
        a.experts = E;
        a.top_k = K;
        a.scaling = 1.0f;
        a.flags = TX8_ROUTE_F_SOFTMAX | TX8_ROUTE_F_COUNT | (norm ? TX8_ROUTE_F_NORM_TOPK : 0);
        OKAY(tx_cmd_moe_route(cb, &a));
        run(&d, cb);
        OKAY(tx_cmdbuf_destroy(cb));
        uint64_t want_cnt[E] = {0};
        double maxrel = 0;
        for (int t = 0; t < T; t++) {
            int32_t rid[K];
            float rw[K];
            ck_assert_int_eq(txref_route_softmax(lg + t * E, E, K, norm, rid, rw), 0);
            for (int j = 0; j < K; j++) {
                ck_assert_msg(ids[t * K + j] == rid[j], "norm %d token %d rank %d: %d vs ref %d",
                              norm, t, j, ids[t * K + j], rid[j]);
                double rel = fabs((double)w[t * K + j] - rw[j]) / fabs((double)rw[j]);
                if (rel > maxrel)
                    maxrel = rel;
                want_cnt[rid[j]]++;
            }
        }
        fprintf(stderr, "route softmax norm_topk_prob=%d: ids equal, weights max rel. diff %.3g\n",
                norm, maxrel);
        ck_assert_msg(maxrel <= 1e-6, "norm %d: weights differ by %g relative", norm, maxrel);
        for (int e = 0; e < E; e++)
            ck_assert_uint_eq(cnt[e], want_cnt[e]);
    }
    dev_close(&d);
}
END_TEST

/* DeepSeek-V3's YaRN inv_freq (rotary dim 64) with an attention factor
 * != 1 (mscale 0.707 / mscale_all_dim 1) on NeoX and interleaved pairs. */
START_TEST(test_rope_yarn_vs_ref)
{
    enum { T = 12, H = 3, ROT = 64, OFF = 16, LDH = OFF + ROT, LDT = H * LDH };
    struct json_object *o = json_tokener_parse(
        "{\"type\": \"yarn\", \"factor\": 40, \"original_max_position_embeddings\": 4096,"
        " \"beta_fast\": 32, \"beta_slow\": 1, \"mscale\": 0.707, \"mscale_all_dim\": 1.0}");
    ck_assert_ptr_nonnull(o);
    struct tx_rope_yarn y;
    char err[256];
    ck_assert_msg(tx_rope_yarn_parse(o, &y, err, sizeof(err)) == 0, "%s", err);
    json_object_put(o);
    float af = (float)tx_rope_yarn_attention_factor(&y);
    ck_assert(af < 0.93f && af > 0.91f);

    struct dev d;
    dev_open(&d, 1 << 20);
    const uint64_t o_x = 0, o_pos = T * LDT * 4, o_fr = o_pos + T * 4;
    float *x = (float *)(d.map + o_x), *fr = (float *)(d.map + o_fr);
    int32_t *pos = (int32_t *)(d.map + o_pos);
    ck_assert_msg(tx_rope_yarn_inv_freq(&y, 10000.0, ROT, 163840, fr, err, sizeof(err)) == 0, "%s",
                  err);
    uint64_t s = 0xfeed5eedull;
    static float x0[T * LDT];
    for (unsigned mode = 0; mode < 2; mode++) {
        for (int i = 0; i < T * LDT; i++)
            x[i] = x0[i] = rng_f(&s);
        for (int t = 0; t < T; t++)
            pos[t] = 3 * t + (int)mode; /* small positions: see the tolerance */
        tx_cmdbuf_t *cb = NULL;
        OKAY(tx_cmdbuf_create(d.dev, &cb));
        struct tx_rope_args a;
        memset(&a, 0, sizeof(a));
        a.x = tx_ref(d.bo, o_x);
        a.pos = tx_ref(d.bo, o_pos);
        a.inv_freq = tx_ref(d.bo, o_fr);
        a.tokens = T;
        a.heads = H;
        a.ld_token = LDT;
        a.ld_head = LDH;
        a.offset = OFF;
        a.rot_dim = ROT;
        a.mode = mode;
        a.flags = TX8_ROPE_F_ATTN_FACTOR;
        a.attn_factor = af;
        OKAY(tx_cmd_rope(cb, &a));
        run(&d, cb);
        OKAY(tx_cmdbuf_destroy(cb));
        /* the reference rotates in f32 angles (transformers), the device in
         * double: at positions < 40 they differ by < 40 * 2^-24 rad */
        double maxabs = 0;
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                float *r = x0 + t * LDT + h * LDH;
                txref_rope_scaled(r + OFF, ROT, (int)mode, fr, pos[t], af);
                for (int i = 0; i < LDH; i++) {
                    double e = fabs((double)x[t * LDT + h * LDH + i] - r[i]);
                    if (e > maxabs)
                        maxabs = e;
                }
            }
        fprintf(stderr, "rope yarn mode %u attn_factor %.7g: max abs diff %.3g\n", mode, (double)af,
                maxabs);
        ck_assert_msg(maxabs <= 1e-5, "mode %u: device vs reference %g", mode, maxabs);
    }
    /* attn_factor 1 through the flag equals the 1.3 command and glm_ref_rope */
    for (int i = 0; i < T * LDT; i++)
        x[i] = x0[i] = rng_f(&s);
    float r1[ROT], r2[ROT];
    memcpy(r1, x0 + OFF, sizeof(r1));
    memcpy(r2, x0 + OFF, sizeof(r2));
    glm_ref_rope(r1, ROT, 0, fr, 5);
    txref_rope_scaled(r2, ROT, 0, fr, 5, 1.0f);
    ck_assert(!memcmp(r1, r2, sizeof(r1)));
    dev_close(&d);
}
END_TEST

START_TEST(test_arg_errors)
{
    struct dev d;
    dev_open(&d, 1 << 16);
    tx_cmdbuf_t *cb = NULL;
    OKAY(tx_cmdbuf_create(d.dev, &cb));
    struct tx_moe_route_args a;
    memset(&a, 0, sizeof(a));
    a.out_ids = a.out_w = a.logits = tx_ref(d.bo, 0);
    a.tokens = 1;
    a.experts = 8;
    a.top_k = 2;
    a.scaling = 1.0f;
    a.flags = TX8_ROUTE_F_SOFTMAX;
    a.bias = tx_ref(d.bo, 4096);
    FAILS(tx_cmd_moe_route(cb, &a), TX_EINVAL, "TX8_ROUTE_F_SOFTMAX takes no bias");
    a.bias = tx_ref(NULL, 0);
    a.n_group = 4;
    a.topk_group = 2;
    FAILS(tx_cmd_moe_route(cb, &a), TX_EINVAL, "no group limit (n_group 4");
    a.n_group = 1;
    OKAY(tx_cmd_moe_route(cb, &a));

    struct tx_rope_args r;
    memset(&r, 0, sizeof(r));
    r.x = r.pos = r.inv_freq = tx_ref(d.bo, 0);
    r.tokens = r.heads = 1;
    r.ld_token = r.ld_head = r.rot_dim = 8;
    r.flags = 2;
    FAILS(tx_cmd_rope(cb, &r), TX_EINVAL, "unknown flags 0x2");
    r.flags = 0;
    r.attn_factor = 1.0f;
    FAILS(tx_cmd_rope(cb, &r), TX_EINVAL, "without TX8_ROPE_F_ATTN_FACTOR");
    r.flags = TX8_ROPE_F_ATTN_FACTOR;
    r.attn_factor = NAN;
    FAILS(tx_cmd_rope(cb, &r), TX_EINVAL, "is not finite");
    r.attn_factor = 1.5f;
    OKAY(tx_cmd_rope(cb, &r));
    /* the command bytes: flag in hdr.flags, the factor in the last word */
    size_t bytes = 0;
    unsigned n = 0;
    OKAY(tx_cmdbuf_size(cb, &bytes, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(bytes, sizeof(struct tx8_cmd_moe_route) + sizeof(struct tx8_cmd_rope));
    OKAY(tx_cmdbuf_destroy(cb));
    dev_close(&d);
}
END_TEST

static void suite_setup(void)
{
    const char *env = getenv("TX_DEVICE");

    if (env && *env) {
        snprintf(g_spec, sizeof(g_spec), "%s", env);
        return;
    }
    if (tx_test_emu_start(&g_emu, "64M", "--cores", "2", NULL) != 0)
        ck_abort_msg("cannot start tx8-emu");
    g_own_emu = true;
    snprintf(g_spec, sizeof(g_spec), "%s", g_emu.spec);
}

static void suite_teardown(void)
{
    if (g_own_emu)
        tx_test_emu_stop(&g_emu);
    g_own_emu = false;
}

int main(void)
{
    Suite *s = suite_create("device_blocks");
    TCase *tc = tcase_create("blocks");
    tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_route_softmax_vs_ref);
    tcase_add_test(tc, test_rope_yarn_vs_ref);
    tcase_add_test(tc, test_arg_errors);
    suite_add_tcase(s, tc);
    return tx_test_run_emu(s);
}
