// SPDX-License-Identifier: MIT
/*
 * glm-analyze: parameter counts of the tiny presets against a hand
 * computation from the config values, FLOPs of a layer, memory fit, the
 * JSON report, and the inputs it accepts.
 */
#include "test_model_util.h"

#include <json-c/json.h>

#include <tx/tx_error.h>
#include <tx-internal/tx_analyze.h>
#include <tx-internal/tx_export.h>
#include <tx-internal/tx_synth.h>
#include "tx_test_main.h"

static char err[TX_ERR_MAX];

static void load(enum glm_arch arch, struct glm_config *c)
{
    char *j = tx_synth_config_json(arch, TX_SYNTH_TINY, 256);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(glm_config_from_json(j, c, err, sizeof(err)), 0);
    free(j);
}

START_TEST(glm4_counts)
{
    struct glm_config c;
    load(GLM_ARCH_GLM4_MOE, &c);
    /* the tiny preset: 3 layers (1 dense), H 64, 4 heads of 32, 2 KV heads,
     * I 128, 8 experts of 64, top 2, 1 shared, q/k/v biases, qk norm */
    const uint64_t H = 64, V = 256, nh = 4, kv = 2, hd = 32, I = 128, Im = 64, E = 8, L = 3, Ld = 1,
                   Lm = 2;
    ck_assert_int_eq(c.hidden_size, (int)H);
    ck_assert_int_eq(c.num_hidden_layers, (int)L);
    ck_assert_int_eq(c.head_dim, (int)hd);
    uint64_t attn = L * (H * nh * hd + nh * hd + 2 * (H * kv * hd + kv * hd) + nh * hd * H);
    uint64_t norms = L * (2 * H + 2 * hd) + H;
    uint64_t dense = Ld * 3 * H * I;
    uint64_t routed = Lm * E * 3 * H * Im;
    uint64_t shared = Lm * 3 * H * Im;
    uint64_t router = Lm * (E * H + E);
    uint64_t total = 2 * V * H + attn + norms + dense + routed + shared + router;
    struct tx_analysis a;
    ck_assert_int_eq(tx_analyze_config(&c, 16, 64, 8ull << 30, &a, err, sizeof(err)), 0);
    ck_assert_uint_eq(a.params[TX_MOD_EMBEDDING], V * H);
    ck_assert_uint_eq(a.params[TX_MOD_OUTPUT], V * H);
    ck_assert_uint_eq(a.params[TX_MOD_ATTENTION], attn);
    ck_assert_uint_eq(a.params[TX_MOD_NORMS], norms);
    ck_assert_uint_eq(a.params[TX_MOD_DENSE_MLP], dense);
    ck_assert_uint_eq(a.params[TX_MOD_ROUTED_EXPERTS], routed);
    ck_assert_uint_eq(a.params[TX_MOD_SHARED_EXPERTS], shared);
    ck_assert_uint_eq(a.params[TX_MOD_ROUTER], router);
    ck_assert_uint_eq(a.total_params, total);
    ck_assert_uint_eq(a.active_params, total - routed + routed * 2 / E);
    ck_assert_int_eq(a.expert_parallel, 4);
    /* decode FLOPs of the dense layer 0 at context 16: projections, 17 keys
     * of QK and PV over 4 heads of 32, the SwiGLU MLP */
    double proj = (double)(H * nh * hd + 2 * H * kv * hd + nh * hd * H);
    double want = 2 * (proj + 17.0 * nh * 2 * hd + 3.0 * H * I);
    ck_assert_double_eq_tol(a.layers[0].decode_flops, want, 1e-6);
    ck_assert_int_eq(a.layers[0].moe, 0);
    ck_assert_int_eq(a.layers[1].moe, 1);
    /* prefill of 16 tokens: 136 causal pairs */
    double pre = 2 * (16 * proj + 136.0 * nh * 2 * hd + 16 * 3.0 * H * I);
    ck_assert_double_eq_tol(a.layers[0].prefill_flops, pre, 1e-6);
    /* KV cache: K and V of 2 heads x 32, FP16, 3 layers */
    ck_assert_uint_eq(a.kv_bytes_per_token, L * 2 * kv * hd * 2);
    /* memory: f32 everywhere, and the golden plan */
    ck_assert_uint_eq(a.bytes_fp32, 4 * total);
    ck_assert(a.bytes_golden < a.bytes_fp32 && a.bytes_int8 < a.bytes_fp16);
    tx_analysis_free(&a);
}
END_TEST

START_TEST(qwen3_counts)
{
    struct glm_config c;
    load(GLM_ARCH_QWEN3_MOE, &c);
    /* the tiny preset: 3 layers (layer 1 dense: mlp_only_layers [1]), H 64,
     * 4 heads of 32, 2 KV heads, I 128, 8 experts of 64, top 2, no shared
     * expert, no biases, no router correction bias, q/k norms */
    const uint64_t H = 64, V = 256, nh = 4, kv = 2, hd = 32, I = 128, Im = 64, E = 8, L = 3, Ld = 1,
                   Lm = 2;
    uint64_t attn = L * (H * nh * hd + 2 * H * kv * hd + nh * hd * H);
    uint64_t norms = L * (2 * H + 2 * hd) + H;
    uint64_t dense = Ld * 3 * H * I;
    uint64_t routed = Lm * E * 3 * H * Im;
    uint64_t router = Lm * E * H;
    uint64_t total = 2 * V * H + attn + norms + dense + routed + router;
    struct tx_analysis a;
    ck_assert_int_eq(tx_analyze_config(&c, 16, 64, 8ull << 30, &a, err, sizeof(err)), 0);
    ck_assert_uint_eq(a.params[TX_MOD_ATTENTION], attn);
    ck_assert_uint_eq(a.params[TX_MOD_NORMS], norms);
    ck_assert_uint_eq(a.params[TX_MOD_DENSE_MLP], dense);
    ck_assert_uint_eq(a.params[TX_MOD_ROUTED_EXPERTS], routed);
    ck_assert_uint_eq(a.params[TX_MOD_SHARED_EXPERTS], 0);
    ck_assert_uint_eq(a.params[TX_MOD_ROUTER], router);
    ck_assert_uint_eq(a.total_params, total);
    ck_assert_uint_eq(a.active_params, total - routed + routed * 2 / E);
    ck_assert_int_eq(a.layers[0].moe, 1);
    ck_assert_int_eq(a.layers[1].moe, 0);
    ck_assert_int_eq(a.layers[2].moe, 1);
    ck_assert_uint_eq(a.kv_bytes_per_token, L * 2 * kv * hd * 2);
    char *txt = tx_analysis_json(&a, &c, "qwen3", "config");
    ck_assert_ptr_nonnull(txt);
    ck_assert_msg(strstr(txt, "Qwen3MoeForCausalLM") && strstr(txt, "softmax"), "%s", txt);
    free(txt);
    tx_analysis_free(&a);
}
END_TEST

START_TEST(glm5_counts)
{
    struct glm_config c;
    load(GLM_ARCH_GLM_MOE_DSA, &c);
    const uint64_t H = 64, V = 256, nh = 4, ql = 32, kl = 32, nope = 16, rope = 16, vd = 16, ih = 4,
                   id = 32, I = 128, Im = 64, E = 8, L = 3, Lm = 2;
    ck_assert_int_eq(c.q_lora_rank, (int)ql);
    ck_assert_int_eq(c.index_head_dim, (int)id);
    uint64_t attn_layer = ql * H + nh * (nope + rope) * ql + (kl + rope) * H +
                          nh * (nope + vd) * kl + H * nh * vd + ih * id * ql + id * H + ih * H;
    uint64_t norms = L * (2 * H + ql + kl + 2 * id) + H;
    uint64_t total = 2 * V * H + L * attn_layer + norms + 3 * H * I + Lm * E * 3 * H * Im +
                     Lm * 3 * H * Im + Lm * (E * H + E);
    struct tx_analysis a;
    ck_assert_int_eq(tx_analyze_config(&c, 32, 64, 8ull << 30, &a, err, sizeof(err)), 0);
    ck_assert_uint_eq(a.params[TX_MOD_ATTENTION], L * attn_layer);
    ck_assert_uint_eq(a.params[TX_MOD_NORMS], norms);
    ck_assert_uint_eq(a.total_params, total);
    ck_assert_uint_eq(a.active_params, total - Lm * E * 3 * H * Im + Lm * 2 * 3 * H * Im);
    /* decode at context 32: the indexer scores 33 keys, attention keeps
     * index_topk = 8 */
    double mat = (double)(attn_layer);
    /* absorbed MLA: a pair costs the latent + rope scores and the latent PV per head */
    double want = 2 * (mat + 8.0 * nh * (2 * kl + rope) + 33.0 * ih * (id + 1) + 3.0 * H * I);
    ck_assert_double_eq_tol(a.layers[0].decode_flops, want, 1e-6);
    /* the absorbed latent cache (F16) plus the indexer key (q8_0: 32 | id),
     * and the expanded per-head K/V (FP16) + F32 indexer key of before */
    ck_assert_uint_eq(id % 32, 0);
    ck_assert_uint_eq(a.kv_bytes_per_token, L * ((kl + rope) * 2 + id / 32 * 34));
    ck_assert_uint_eq(a.kv_latent_bytes_per_token, a.kv_bytes_per_token);
    ck_assert_uint_eq(a.kv_expanded_bytes_per_token, L * (nh * (nope + rope + vd) * 2 + id * 4));
    /* the tiny latent (32 + 16) takes no 32-element blocks */
    ck_assert_uint_eq(a.kv_type_bytes_per_token[TX_KV_Q4_0], 0);
    ck_assert_uint_eq(a.kv_type_bytes_per_token[TX_KV_F32], L * ((kl + rope) * 4 + id * 4));
    ck_assert_uint_eq(a.kv_type_bytes_per_token[TX_KV_F16], a.kv_bytes_per_token);
    ck_assert(a.kv_type_max_ctx[TX_KV_F16] > a.kv_type_max_ctx[TX_KV_F32]);
    tx_analysis_free(&a);
}
END_TEST

/* DeepSeek-V3's tiny preset: MLA without the indexer, dense attention */
START_TEST(dsv3_counts)
{
    struct glm_config c;
    load(GLM_ARCH_DEEPSEEK_V3, &c);
    const uint64_t H = 64, V = 256, nh = 4, ql = 32, kl = 32, nope = 16, rope = 16, vd = 16,
                   I = 128, Im = 64, E = 8, L = 3, Lm = 2;
    ck_assert_int_eq(c.q_lora_rank, (int)ql);
    ck_assert_int_eq(c.n_group, 4);
    ck_assert_int_eq(c.topk_group, 2);
    uint64_t attn_layer =
        ql * H + nh * (nope + rope) * ql + (kl + rope) * H + nh * (nope + vd) * kl + H * nh * vd;
    uint64_t norms = L * (2 * H + ql + kl) + H;
    uint64_t total = 2 * V * H + L * attn_layer + norms + 3 * H * I + Lm * E * 3 * H * Im +
                     Lm * 3 * H * Im + Lm * (E * H + E);
    struct tx_analysis a;
    ck_assert_int_eq(tx_analyze_config(&c, 32, 64, 8ull << 30, &a, err, sizeof(err)), 0);
    ck_assert_uint_eq(a.params[TX_MOD_ATTENTION], L * attn_layer);
    ck_assert_uint_eq(a.params[TX_MOD_NORMS], norms);
    ck_assert_uint_eq(a.total_params, total);
    ck_assert_uint_eq(a.active_params, total - Lm * E * 3 * H * Im + Lm * 2 * 3 * H * Im);
    /* decode at context 32: every one of the 33 keys */
    double want = 2 * ((double)attn_layer + 33.0 * nh * (2 * kl + rope) + 3.0 * H * I);
    ck_assert_double_eq_tol(a.layers[0].decode_flops, want, 1e-6);
    ck_assert_uint_eq(a.kv_bytes_per_token, L * ((kl + rope) * 2));
    ck_assert_uint_eq(a.kv_latent_bytes_per_token, L * ((kl + rope) * 2));
    ck_assert_uint_eq(a.kv_expanded_bytes_per_token, L * (nh * (nope + rope + vd) * 2));
    char *j = tx_analysis_json(&a, &c, "m", "config");
    ck_assert_ptr_nonnull(j);
    ck_assert_ptr_nonnull(strstr(j, "\"deepseek_v3\""));
    ck_assert_ptr_nonnull(strstr(j, "\"rope_scaling\": \"yarn\""));
    free(j);
    tx_analysis_free(&a);
}
END_TEST

START_TEST(fits_and_json)
{
    struct glm_config c;
    load(GLM_ARCH_GLM_MOE_DSA, &c);
    struct tx_analysis a;
    ck_assert_int_eq(tx_analyze_config(&c, 512, 4096, 1ull << 20, &a, err, sizeof(err)), 0);
    char *j = tx_analysis_json(&a, &c, "m", "config");
    struct json_object *o = json_tokener_parse(j), *v, *w;
    ck_assert_ptr_nonnull(o);
    ck_assert(json_object_object_get_ex(o, "parameters", &v));
    ck_assert(json_object_object_get_ex(v, "total", &w));
    ck_assert(json_object_is_type(w, json_type_int));
    ck_assert_uint_eq((uint64_t)json_object_get_int64(w), a.total_params);
    ck_assert(json_object_object_get_ex(o, "layers", &v));
    ck_assert_uint_eq(json_object_array_length(v), 3);
    ck_assert(json_object_object_get_ex(o, "memory", &v));
    ck_assert(json_object_object_get_ex(v, "fits", &w));
    ck_assert(json_object_object_get_ex(w, "golden", &w));
    ck_assert(!json_object_get_boolean(w)); /* 1 MiB is below the control block */
    ck_assert(json_object_object_get_ex(o, "recommended_plan", &v));
    ck_assert(json_object_object_get_ex(v, "moe", &w));
    ck_assert(json_object_object_get_ex(w, "expert_parallel", &w));
    ck_assert_int_eq(json_object_get_int(w), 4);
    ck_assert(json_object_object_get_ex(v, "parallelism", &w));
    ck_assert_uint_eq(json_object_array_length(w), 3);
    struct json_object *e0 = json_object_array_get_idx(w, 0), *x;
    ck_assert(json_object_object_get_ex(e0, "parallelism", &x));
    ck_assert_str_eq(json_object_get_string(x), "head_parallel");
    ck_assert(json_object_object_get_ex(e0, "precision", &x));
    ck_assert_str_eq(json_object_get_string(x), "FP16");
    json_object_put(o);
    free(j);
    char *sum = tx_analysis_summary(&a, &c);
    ck_assert_ptr_nonnull(strstr(sum, "does NOT fit"));
    free(sum);
    tx_analysis_free(&a);
    ck_assert_int_eq(tx_analyze_config(&c, 512, 4096, 8ull << 30, &a, err, sizeof(err)), 0);
    sum = tx_analysis_summary(&a, &c);
    ck_assert_ptr_nonnull(strstr(sum, "-> fits"));
    free(sum);
    tx_analysis_free(&a);
    ck_assert_int_eq(tx_analyze_config(&c, 0, 4096, 1, &a, err, sizeof(err)), TX_EINVAL);
}
END_TEST

START_TEST(inputs)
{
    /* checkpoint directory, .smd package and config.json give the same */
    const char *d = tm_path("ck");
    struct tx_synth_opts o = {
        .arch = GLM_ARCH_GLM4_MOE, .preset = TX_SYNTH_TINY, .seed = 1, .vocab_size = 256};
    ck_assert_int_eq(tx_synth_write(d, &o, err, sizeof(err)), 0);
    char p[600];
    snprintf(p, sizeof(p), "%s/tokenizer.json", d);
    tm_write(p, TM_TOKENIZER, strlen(TM_TOKENIZER));
    struct tx_export_opts eo;
    tx_export_default_opts(&eo);
    ck_assert_int_eq(tx_export(d, tm_path("m.smd"), &eo, NULL, err, sizeof(err)), 0);
    struct glm_config c1, c2, c3;
    const char *f;
    ck_assert_int_eq(tx_analyze_load_config(d, &c1, &f, err, sizeof(err)), 0);
    ck_assert_str_eq(f, "hf");
    ck_assert_int_eq(tx_analyze_load_config(tm_path("m.smd"), &c2, &f, err, sizeof(err)), 0);
    ck_assert_str_eq(f, "smd");
    snprintf(p, sizeof(p), "%s/config.json", d);
    ck_assert_int_eq(tx_analyze_load_config(p, &c3, &f, err, sizeof(err)), 0);
    ck_assert_str_eq(f, "config");
    ck_assert_mem_eq(&c1, &c2, sizeof(c1));
    ck_assert_mem_eq(&c1, &c3, sizeof(c1));
    ck_assert_int_lt(tx_analyze_load_config(tm_path("none.onnx"), &c1, &f, err, sizeof(err)), 0);
    ck_assert_int_lt(tx_analyze_load_config(tm_path("none.json"), &c1, &f, err, sizeof(err)), 0);
}
END_TEST

START_TEST(sizes)
{
    ck_assert_int_eq(tx_parse_size("512"), 512);
    ck_assert_int_eq(tx_parse_size("4K"), 4096);
    ck_assert_int_eq(tx_parse_size("256M"), 256ll << 20);
    ck_assert_int_eq(tx_parse_size("8G"), 8ll << 30);
    ck_assert_int_eq(tx_parse_size("8GiB"), 8ll << 30);
    ck_assert_int_eq(tx_parse_size("1.5G"), 3ll << 29);
    ck_assert_int_eq(tx_parse_size("8X"), -1);
    ck_assert_int_eq(tx_parse_size("-1"), -1);
    ck_assert_int_eq(tx_parse_size(""), -1);
    ck_assert_str_eq(tx_module_kind_name(TX_MOD_ROUTED_EXPERTS), "routed_experts");
}
END_TEST


/* issue 16: a checkpoint whose config.json claims 500 layers of 851643
 * experts (or, inside every limit, far more tensors than the files hold)
 * fails at once with a clear error instead of growing until the OOM killer */
static void set_config(const char *dir, const char *key, const char *value, const char *key2,
                       const char *value2)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/config.json", dir);
    struct json_object *o = json_object_from_file(p);
    ck_assert_ptr_nonnull(o);
    json_object_object_add(o, key, json_tokener_parse(value));
    json_object_object_add(o, key2, json_tokener_parse(value2));
    json_object_object_add(o, "n_group", json_object_new_int(1));
    const char *s = json_object_to_json_string(o);
    tm_write(p, s, strlen(s));
    json_object_put(o);
}

START_TEST(oversized_config)
{
    const char *d = tm_path("big");
    struct tx_synth_opts o = {
        .arch = GLM_ARCH_GLM4_MOE, .preset = TX_SYNTH_TINY, .seed = 1, .vocab_size = 256};
    ck_assert_int_eq(tx_synth_write(d, &o, err, sizeof(err)), 0);
    struct glm_config c;
    const char *f;
    set_config(d, "num_hidden_layers", "500", "n_routed_experts", "851643");
    ck_assert_int_eq(tx_analyze_load_config(d, &c, &f, err, sizeof(err)), TX_EINVAL);
    ck_assert_msg(strstr(err, "config.json: n_routed_experts: 851643 exceeds the limit 4096"),
                  "got \"%s\"", err);
    /* every field inside its limit: the count is compared with the files */
    set_config(d, "num_hidden_layers", "20", "n_routed_experts", "4096");
    ck_assert_int_eq(tx_analyze_load_config(d, &c, &f, err, sizeof(err)), TX_ENOENT);
    ck_assert_msg(strstr(err, "is missing") && strstr(err, "it expects 233793 tensors"),
                  "got \"%s\"", err);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("analyze");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tm_setup, tm_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, glm4_counts);
    tcase_add_test(tc, glm5_counts);
    tcase_add_test(tc, qwen3_counts);
    tcase_add_test(tc, dsv3_counts);
    tcase_add_test(tc, fits_and_json);
    tcase_add_test(tc, inputs);
    tcase_add_test(tc, sizes);
    tcase_add_test(tc, oversized_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
