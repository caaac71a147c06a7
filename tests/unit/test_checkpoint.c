// SPDX-License-Identifier: MIT
/*
 * Hugging Face checkpoint directories: synthetic checkpoints of both
 * architectures load (single file and sharded), and every defect is
 * reported with the file and the tensor: missing tensor, wrong shape
 * against config.json, unsupported dtype, missing config, MTP tensors and
 * known buffers (reported and ignored), any other tensor (an error).
 */
#include "test_model_util.h"

#include <libgen.h>
#include <math.h>
#include <stdint.h>

#include <tx/tx_error.h>
#include <tx-internal/tx_checkpoint.h>
#include <tx/tx_dtype.h>
#include <tx-internal/tx_safetensors.h>
#include <tx-internal/tx_synth.h>
#include <tx/tx_tokenizer.h>
#include "tx_test_main.h"

static char err[TX_ERR_MAX];

/* ---- a checkpoint written tensor by tensor, with one defect ------------- */

enum defect { NONE, MISSING, TRANSPOSED, F64, EXTRA, F32_AND_F16, UNKNOWN, BEYOND, FEWER_LAYERS };

struct collect {
    struct tx_tensor_decl d[512];
    char names[512][GLM_TENSOR_NAME_MAX];
    size_t n;
};

static int collect_cb(void *ctx, const struct glm_tensor_info *t)
{
    struct collect *c = ctx;
    ck_assert_uint_lt(c->n, 512);
    snprintf(c->names[c->n], GLM_TENSOR_NAME_MAX, "%s", t->name);
    c->d[c->n].name = c->names[c->n];
    c->d[c->n].type = TX_ELEM_BF16;
    c->d[c->n].ndim = t->ndim;
    c->d[c->n].shape[0] = (uint64_t)t->shape[0];
    c->d[c->n].shape[1] = (uint64_t)t->shape[1];
    c->n++;
    return 0;
}

static const char *victim = "model.layers.1.self_attn.kv_a_proj_with_mqa.weight";

static void write_ckpt(const char *dir, enum defect def)
{
    mkdir(dir, 0755);
    char *cj = tx_synth_config_json(GLM_ARCH_GLM_MOE_DSA, TX_SYNTH_TINY, 256);
    ck_assert_ptr_nonnull(cj);
    char p[600];
    snprintf(p, sizeof(p), "%s/config.json", dir);
    struct glm_config cfg;
    ck_assert_int_eq(glm_config_from_json(cj, &cfg, err, sizeof(err)), 0);
    if (def == FEWER_LAYERS) {
        /* config.json says 2 layers; the tensors are those of 3 */
        struct glm_config fewer = cfg;
        fewer.num_hidden_layers = 2;
        char *fj = glm_config_to_json(&fewer);
        ck_assert_ptr_nonnull(fj);
        tm_write(p, fj, strlen(fj));
        free(fj);
    } else {
        tm_write(p, cj, strlen(cj));
    }
    free(cj);
    static struct collect c;
    memset(&c, 0, sizeof(c));
    ck_assert_int_eq(glm_config_tensor_list(&cfg, collect_cb, &c), 0);
    for (size_t i = 0; i < c.n; i++) {
        if (strcmp(c.names[i], victim))
            continue;
        if (def == MISSING) {
            memmove(&c.d[i], &c.d[i + 1], (c.n - i - 1) * sizeof(c.d[0]));
            c.n--;
        } else if (def == TRANSPOSED) {
            uint64_t t = c.d[i].shape[0];
            c.d[i].shape[0] = c.d[i].shape[1];
            c.d[i].shape[1] = t;
        } else if (def == F64) {
            c.d[i].type = TX_ELEM_F64;
        } else if (def == F32_AND_F16) {
            c.d[i].type = TX_ELEM_F32;
            c.d[i - 1].type = TX_ELEM_F16;
        }
        break;
    }
    if (def == UNKNOWN)
        c.d[c.n++] = (struct tx_tensor_decl){
            "model.layers.0.self_attn.q_a_proj.lora_A.weight", TX_ELEM_BF16, 2, {8, 64}};
    if (def == BEYOND) /* layers 0..2, the MTP layer 3: layer 5 is nothing */
        c.d[c.n++] =
            (struct tx_tensor_decl){"model.layers.5.eh_proj.weight", TX_ELEM_BF16, 2, {64, 128}};
    if (def == EXTRA) {
        c.d[c.n++] = (struct tx_tensor_decl){
            "model.layers.0.self_attn.rotary_emb.inv_freq", TX_ELEM_F32, 1, {8}};
        c.d[c.n++] =
            (struct tx_tensor_decl){"model.layers.3.eh_proj.weight", TX_ELEM_BF16, 2, {64, 128}};
    }
    snprintf(p, sizeof(p), "%s/model.safetensors", dir);
    struct tx_st_writer *w;
    ck_assert_int_eq(tx_st_writer_open(p, c.d, c.n, NULL, &w, err, sizeof(err)), 0);
    static unsigned char zero[1 << 16];
    for (size_t i = 0; i < c.n; i++) {
        uint64_t nb =
            c.d[i].shape[0] * (c.d[i].ndim == 2 ? c.d[i].shape[1] : 1) * tx_elem_size(c.d[i].type);
        while (nb) {
            size_t k = nb < sizeof(zero) ? (size_t)nb : sizeof(zero);
            ck_assert_int_eq(tx_st_writer_write(w, zero, k, err, sizeof(err)), 0);
            nb -= k;
        }
    }
    ck_assert_int_eq(tx_st_writer_finish(w, err, sizeof(err)), 0);
}

START_TEST(valid)
{
    write_ckpt(tm_path("ok"), NONE);
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(tm_path("ok"), &c, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_ckpt_format(c), TX_CKPT_HF);
    ck_assert_uint_eq(tx_ckpt_n_ignored(c), 0);
    ck_assert_ptr_null(tx_ckpt_tokenizer_path(c));
    const struct tx_ckpt_tensor *t = tx_ckpt_find(c, victim);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->info.layer, 1);
    ck_assert_int_eq(t->info.cls, GLM_TC_ATTENTION);
    ck_assert_ptr_eq(tx_ckpt_tensor(c, 0), tx_ckpt_find(c, "model.embed_tokens.weight"));
    tx_ckpt_close(c);
}
END_TEST

START_TEST(missing_tensor)
{
    write_ckpt(tm_path("m"), MISSING);
    struct tx_ckpt *c = (void *)1;
    ck_assert_int_eq(tx_ckpt_open(tm_path("m"), &c, err, sizeof(err)), TX_ENOENT);
    ck_assert_ptr_null(c);
    tm_err_has(err, tm_path("m"));
    tm_err_has(err, victim);
    tm_err_has(err, "missing");
    tm_err_has(err, "[48, 64]");
}
END_TEST

START_TEST(wrong_shape)
{
    write_ckpt(tm_path("s"), TRANSPOSED);
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(tm_path("s"), &c, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "model.safetensors");
    tm_err_has(err, victim);
    tm_err_has(err, "[64, 48]");
    tm_err_has(err, "config.json");
    tm_err_has(err, "expects [48, 64]");
}
END_TEST

START_TEST(unsupported_dtype)
{
    write_ckpt(tm_path("d"), F64);
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(tm_path("d"), &c, err, sizeof(err)), TX_ENOTSUP);
    tm_err_has(err, "model.safetensors");
    tm_err_has(err, victim);
    tm_err_has(err, "F64");
}
END_TEST

START_TEST(mixed_dtypes)
{
    /* BF16, F16 and F32 may be mixed freely */
    write_ckpt(tm_path("x"), F32_AND_F16);
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(tm_path("x"), &c, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_ckpt_find(c, victim)->t->type, TX_ELEM_F32);
    tx_ckpt_close(c);
}
END_TEST

START_TEST(extra_tensors)
{
    write_ckpt(tm_path("e"), EXTRA);
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(tm_path("e"), &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(tx_ckpt_n_ignored(c), 2);
    int mtp = -1, seen_mtp = 0, seen_unknown = 0;
    for (size_t i = 0; i < 2; i++) {
        const char *n = tx_ckpt_ignored(c, i, &mtp);
        if (strstr(n, "eh_proj")) {
            ck_assert_int_eq(mtp, 1);
            seen_mtp = 1;
        } else {
            ck_assert_str_eq(n, "model.layers.0.self_attn.rotary_emb.inv_freq");
            ck_assert_int_eq(mtp, 0);
            seen_unknown = 1;
        }
    }
    ck_assert(seen_mtp && seen_unknown);
    tx_ckpt_close(c);
}
END_TEST

/* Only the MTP layers' tensors and known buffers are ignored: an unknown
 * tensor, a layer beyond num_hidden_layers + num_nextn_predict_layers, or a
 * real decoder layer past a lowered num_hidden_layers is an error naming
 * the tensor (never "N tensors of the MTP layer ignored"). */
START_TEST(unexpected_tensors)
{
    struct tx_ckpt *c;
    write_ckpt(tm_path("u"), UNKNOWN);
    ck_assert_int_eq(tx_ckpt_open(tm_path("u"), &c, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "model.layers.0.self_attn.q_a_proj.lora_A.weight");
    tm_err_has(err, "model.safetensors");
    write_ckpt(tm_path("b"), BEYOND);
    ck_assert_int_eq(tx_ckpt_open(tm_path("b"), &c, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "model.layers.5.eh_proj.weight");
    tm_err_has(err, "does not exist");
    write_ckpt(tm_path("f"), FEWER_LAYERS);
    ck_assert_int_eq(tx_ckpt_open(tm_path("f"), &c, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "model.layers.2.");
    tm_err_has(err, "has no eh_proj");
}
END_TEST

START_TEST(bad_config)
{
    const char *d = tm_path("c");
    write_ckpt(d, NONE);
    char p[600];
    snprintf(p, sizeof(p), "%s/config.json", d);
    remove(p);
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(d, &c, err, sizeof(err)), TX_ENOENT);
    tm_err_has(err, "config.json");
    tm_write(p, "{\"model_type\": \"llama\"}", 23);
    ck_assert_int_lt(tx_ckpt_open(d, &c, err, sizeof(err)), 0);
    tm_err_has(err, "config.json");
    ck_assert_int_eq(tx_ckpt_open(tm_path("nothing"), &c, err, sizeof(err)), TX_ENOENT);
    tm_write(tm_path("x.smd"), "x", 1);
    ck_assert_int_eq(tx_ckpt_open(tm_path("x.smd"), &c, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "x.smd");
}
END_TEST

/* ---- glm-synth output, both architectures -------------------------------- */

static void synth_check(enum glm_arch arch, uint64_t shard)
{
    struct tx_synth_opts o = {.arch = arch,
                              .preset = TX_SYNTH_TINY,
                              .seed = 7,
                              .format = TX_SYNTH_HF,
                              .vocab_size = 256,
                              .shard_bytes = shard};
    const char *d = tm_path("synth");
    ck_assert_int_eq(tx_synth_write(d, &o, err, sizeof(err)), 0);
    char p[600];
    snprintf(p, sizeof(p), "%s/model.safetensors.index.json", d);
    ck_assert_int_eq(tm_exists(p), shard != 0);
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(d, &c, err, sizeof(err)), 0);
    const struct glm_config *cfg = tx_ckpt_config(c);
    ck_assert_int_eq(cfg->arch, arch);
    ck_assert_int_eq((int64_t)tx_ckpt_count(c), glm_config_tensor_count(cfg));
    ck_assert_uint_eq(tx_ckpt_n_ignored(c), 4);
    /* every feature of the architecture is present in the tiny preset */
    int dense = 0, moe = 0;
    for (int l = 0; l < cfg->num_hidden_layers; l++)
        *(cfg->mlp_layer_types[l] == GLM_MLP_SPARSE ? &moe : &dense) += 1;
    ck_assert_int_ge(dense, 1);
    ck_assert_int_ge(moe, 2);
    ck_assert_int_ge(cfg->n_shared_experts, 1);
    ck_assert_ptr_nonnull(tx_ckpt_find(c, "model.layers.1.mlp.shared_experts.down_proj.weight"));
    ck_assert_ptr_nonnull(tx_ckpt_find(c, "model.layers.2.mlp.gate.e_score_correction_bias"));
    /* e_score_correction_bias is F32 as in the real checkpoints, the rest BF16 */
    ck_assert_int_eq(tx_ckpt_find(c, "model.layers.2.mlp.gate.e_score_correction_bias")->t->type,
                     TX_ELEM_F32);
    ck_assert_int_eq(tx_ckpt_find(c, "model.layers.2.mlp.gate.weight")->t->type, TX_ELEM_BF16);
    if (arch == GLM_ARCH_GLM4_MOE) {
        ck_assert(cfg->use_qk_norm && cfg->attention_bias);
        ck_assert_ptr_nonnull(tx_ckpt_find(c, "model.layers.0.self_attn.q_norm.weight"));
        ck_assert_ptr_nonnull(tx_ckpt_find(c, "model.layers.0.self_attn.k_proj.bias"));
        ck_assert_int_gt(cfg->n_group, 1); /* group-limited routing exercised */
    } else {
        ck_assert_ptr_nonnull(tx_ckpt_find(c, "model.layers.0.self_attn.kv_b_proj.weight"));
        ck_assert_ptr_nonnull(tx_ckpt_find(c, "model.layers.2.self_attn.indexer.wq_b.weight"));
        ck_assert_ptr_nonnull(tx_ckpt_find(c, "model.layers.2.self_attn.indexer.k_norm.bias"));
        ck_assert_int_le(cfg->index_topk, 8); /* shorter than a test prompt */
    }
    /* values: deterministic, of the documented scale */
    const struct tx_ckpt_tensor *ct = tx_ckpt_find(c, "model.layers.0.mlp.up_proj.weight");
    uint64_t n = ct->t->nelem;
    float *v = malloc(n * sizeof(float));
    ck_assert_int_eq(tx_tensor_read_f32(ct->t, 0, n, v, err, sizeof(err)), 0);
    double s2 = 0;
    for (uint64_t i = 0; i < n; i++) {
        s2 += (double)v[i] * v[i];
        ck_assert_float_eq(v[i],
                           tx_bf16_to_f32(tx_f32_to_bf16(tx_synth_value(&ct->info, 7, 0, i))));
    }
    double sd = sqrt(s2 / (double)n), want = 1.0 / sqrt((double)ct->info.shape[1]);
    ck_assert_msg(sd > 0.85 * want && sd < 1.15 * want, "std %g, expected ~%g", sd, want);
    free(v);
    ct = tx_ckpt_find(c, "model.norm.weight");
    float nw[64];
    ck_assert_int_eq(tx_tensor_read_f32(ct->t, 0, 64, nw, err, sizeof(err)), 0);
    for (int i = 0; i < 64; i++)
        ck_assert(nw[i] > 0.7f && nw[i] < 1.3f);
    tx_ckpt_close(c);
}

/* --routing skewed: router rows of consecutive MoE layers correlate through
 * a permutation, the correction bias is S * 0.2 * exp(-6 k / E) over the
 * base rows k; --experts sets the expert count. */
static double router_match(struct tx_ckpt *c, int E, int D)
{
    float *w1 = malloc(sizeof(float) * (size_t)E * D), *w2 = malloc(sizeof(float) * (size_t)E * D);
    const struct tx_ckpt_tensor *t1 = tx_ckpt_find(c, "model.layers.1.mlp.gate.weight");
    const struct tx_ckpt_tensor *t2 = tx_ckpt_find(c, "model.layers.2.mlp.gate.weight");
    ck_assert(t1 && t2 && w1 && w2);
    ck_assert_int_eq(tx_tensor_read_f32(t1->t, 0, (uint64_t)E * D, w1, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_tensor_read_f32(t2->t, 0, (uint64_t)E * D, w2, err, sizeof(err)), 0);
    double sum = 0;
    for (int a = 0; a < E; a++) {
        double best = -1;
        for (int b = 0; b < E; b++) {
            double d = 0, na = 0, nb = 0;
            for (int j = 0; j < D; j++) {
                d += (double)w1[a * D + j] * w2[b * D + j];
                na += (double)w1[a * D + j] * w1[a * D + j];
                nb += (double)w2[b * D + j] * w2[b * D + j];
            }
            double cs = d / sqrt(na * nb);
            if (cs > best)
                best = cs;
        }
        sum += best;
    }
    free(w1);
    free(w2);
    return sum / E; /* mean best cosine of a layer-1 row with the layer-2 rows */
}

START_TEST(synth_routing_skewed)
{
    struct tx_synth_opts o = {.arch = GLM_ARCH_GLM_MOE_DSA,
                              .preset = TX_SYNTH_TINY,
                              .seed = 7,
                              .format = TX_SYNTH_HF,
                              .vocab_size = 256,
                              .n_experts = 32,
                              .routing = TX_SYNTH_ROUTING_SKEWED,
                              .routing_skew = 1.0f,
                              .routing_corr = 0.9f};
    const char *d = tm_path("skewed");
    ck_assert_int_eq(tx_synth_write(d, &o, err, sizeof(err)), 0);
    struct tx_ckpt *c;
    ck_assert_int_eq(tx_ckpt_open(d, &c, err, sizeof(err)), 0);
    const struct glm_config *cfg = tx_ckpt_config(c);
    int E = cfg->n_routed_experts, D = cfg->hidden_size;
    ck_assert_int_eq(E, 32);
    float b[32];
    const struct tx_ckpt_tensor *bt =
        tx_ckpt_find(c, "model.layers.1.mlp.gate.e_score_correction_bias");
    ck_assert_ptr_nonnull(bt);
    ck_assert_int_eq(tx_tensor_read_f32(bt->t, 0, 32, b, err, sizeof(err)), 0);
    float mx = b[0], mn = b[0];
    for (int e = 1; e < E; e++) {
        mx = b[e] > mx ? b[e] : mx;
        mn = b[e] < mn ? b[e] : mn;
    }
    ck_assert_float_eq_tol(mx, 0.2f, 1e-6f);                         /* k = 0 */
    ck_assert_float_eq_tol(mn, 0.2f * expf(-6.0f * 31 / 32), 1e-6f); /* k = E - 1 */
    double skewed = router_match(c, E, D);
    tx_ckpt_close(c);
    o.routing = TX_SYNTH_ROUTING_UNIFORM;
    d = tm_path("uniform");
    ck_assert_int_eq(tx_synth_write(d, &o, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_ckpt_open(d, &c, err, sizeof(err)), 0);
    double uniform = router_match(c, E, tx_ckpt_config(c)->hidden_size);
    tx_ckpt_close(c);
    printf("[checkpoint] routers of MoE layers 1 and 2: mean best row cosine %.3f skewed "
           "(corr 0.9), %.3f uniform\n",
           skewed, uniform);
    ck_assert_msg(skewed > 0.8 && uniform < 0.6, "skewed %g uniform %g", skewed, uniform);
    o.routing = TX_SYNTH_ROUTING_SKEWED;
    o.routing_corr = 1.5f;
    ck_assert_int_eq(tx_synth_write(tm_path("bad"), &o, err, sizeof(err)), TX_EINVAL);
    tm_err_has(err, "correlation");
    ck_assert_int_eq(tm_exists(tm_path("bad")), 0); /* nothing written */
}
END_TEST

START_TEST(synth_glm4)
{
    synth_check(GLM_ARCH_GLM4_MOE, 0);
}
END_TEST

START_TEST(synth_glm5_sharded)
{
    synth_check(GLM_ARCH_GLM_MOE_DSA, 64 << 10);
}
END_TEST

START_TEST(synth_deterministic)
{
    struct tx_synth_opts o = {.arch = GLM_ARCH_GLM4_MOE,
                              .preset = TX_SYNTH_TINY,
                              .seed = 11,
                              .vocab_size = 128,
                              .threads = 1};
    ck_assert_int_eq(tx_synth_write(tm_path("a"), &o, err, sizeof(err)), 0);
    o.threads = 2;
    ck_assert_int_eq(tx_synth_write(tm_path("b"), &o, err, sizeof(err)), 0);
    o.seed = 12;
    ck_assert_int_eq(tx_synth_write(tm_path("c"), &o, err, sizeof(err)), 0);
    size_t la, lb, lc;
    char pa[600], pb[600], pc[600];
    snprintf(pa, sizeof(pa), "%s/model.safetensors", tm_path("a"));
    snprintf(pb, sizeof(pb), "%s/model.safetensors", tm_path("b"));
    snprintf(pc, sizeof(pc), "%s/model.safetensors", tm_path("c"));
    char *a = tm_read(pa, &la), *b = tm_read(pb, &lb), *c = tm_read(pc, &lc);
    ck_assert_uint_eq(la, lb);
    ck_assert_mem_eq(a, b, la);
    ck_assert_uint_eq(la, lc);
    ck_assert(memcmp(a, c, la) != 0);
    free(a);
    free(b);
    free(c);
    /* a vocabulary that does not cover the tokenizer is refused */
    const char *tdir = tm_path("tok");
    mkdir(tdir, 0755);
    char tp[600];
    snprintf(tp, sizeof(tp), "%s/tokenizer.json", tdir);
    tm_write(tp, TM_TOKENIZER, strlen(TM_TOKENIZER));
    int v;
    ck_assert_int_eq(tx_synth_vocab_for_tokenizer(tp, &v, err, sizeof(err)), 0);
    ck_assert_int_eq(v, 128);
    o.tokenizer_dir = tdir;
    o.vocab_size = 0;
    ck_assert_int_eq(tx_synth_write(tm_path("d"), &o, err, sizeof(err)), 0);
    snprintf(tp, sizeof(tp), "%s/tokenizer.json", tm_path("d"));
    ck_assert(tm_exists(tp));
}
END_TEST

/* config.json's eos_token_id list and pad_token_id */
static void config_tokens(const char *dir, int32_t *eos, int *n_eos, int32_t *pad)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/config.json", dir);
    struct glm_config cfg;
    ck_assert_int_eq(glm_config_load(p, &cfg, err, sizeof(err)), 0);
    *n_eos = cfg.n_eos;
    for (int i = 0; i < cfg.n_eos; i++)
        eos[i] = cfg.eos_token_ids[i];
    *pad = cfg.pad_token_id;
}

/* glm-synth adds GLM's special tokens to the tokenizer it copies */
START_TEST(synth_glm_special_tokens)
{
    const char *tdir = tm_path("tok");
    mkdir(tdir, 0755);
    char tp[600];
    snprintf(tp, sizeof(tp), "%s/tokenizer.json", tdir);
    static const char tj[] =
        "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 3, \"content\": \"<think>\", "
        "\"special\": false}], \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
        "\"add_prefix_space\": false, \"use_regex\": true}, \"decoder\": {\"type\": "
        "\"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"h\": 0, \"i\": 1, "
        "\"hi\": 2}, \"merges\": [\"h i\"]}}";
    tm_write(tp, tj, strlen(tj));
    snprintf(tp, sizeof(tp), "%s/tokenizer_config.json", tdir);
    static const char tc[] = "{\"eos_token\": \"<|im_end|>\", \"chat_template\": \"qwen\"}";
    tm_write(tp, tc, strlen(tc));

    struct tx_synth_tokenizer tk;
    ck_assert_int_eq(tx_synth_glm_tokenizer(tdir, GLM_ARCH_GLM_MOE_DSA, &tk, err, sizeof(err)), 0);
    /* 35 of the 36 are new (<think> exists): ids 4..38 in GLM's order */
    ck_assert_int_eq(tk.n_added, 35);
    ck_assert_int_eq(tk.first_added, 4);
    ck_assert_int_eq(tk.vocab_size, 128);
    ck_assert_int_eq(tk.eos[0], 4);     /* <|endoftext|> */
    ck_assert_int_eq(tk.eos[1], 4 + 7); /* <|user|> */
    ck_assert_int_eq(tk.eos[2], 4 + 9); /* <|observation|> */
    ck_assert_int_eq(tk.pad, 4);
    ck_assert_ptr_nonnull(strstr(tk.tokenizer_config_json, "\"eos_token\": \"<|endoftext|>\""));
    ck_assert_ptr_nonnull(strstr(tk.tokenizer_config_json, "[gMASK]<sop>"));
    tx_synth_tokenizer_free(&tk);

    struct tx_synth_opts o = {.arch = GLM_ARCH_GLM_MOE_DSA,
                              .preset = TX_SYNTH_TINY,
                              .seed = 3,
                              .tokenizer_dir = tdir,
                              .threads = 1};
    ck_assert_int_eq(tx_synth_write(tm_path("out"), &o, err, sizeof(err)), 0);
    int32_t eos[8], pad;
    int n_eos;
    config_tokens(tm_path("out"), eos, &n_eos, &pad);
    ck_assert_int_eq(n_eos, 3);
    ck_assert_int_eq(eos[0], 4);
    ck_assert_int_eq(eos[1], 11);
    ck_assert_int_eq(eos[2], 13);
    ck_assert_int_eq(pad, 4);

    snprintf(tp, sizeof(tp), "%s/tokenizer.json", tm_path("out"));
    struct tx_tokenizer *tok;
    ck_assert_int_eq(tx_tokenizer_load_file(tp, &tok, err, sizeof(err)), 0);
    ck_assert_int_eq(tx_tokenizer_token_to_id(tok, "[gMASK]", 7), 6);
    ck_assert_int_eq(tx_tokenizer_token_to_id(tok, "<think>", 7), 3); /* kept */
    ck_assert(tx_tokenizer_is_special(tok, 6));
    ck_assert(!tx_tokenizer_is_special(tok, 3));
    /* the chat template's markers are single special tokens */
    struct tx_chat_message m = {"user", "hi", NULL};
    int32_t *ids;
    size_t n;
    ck_assert_int_eq(tx_tokenizer_chat_encode(tok, TX_CHAT_GLM5, &m, 1,
                                              TX_CHAT_ADD_GENERATION_PROMPT, &ids, &n, err,
                                              sizeof(err)),
                     0);
    /* [gMASK] <sop> <|user|> hi <|assistant|> <think> */
    static const int32_t want[] = {6, 8, 11, 2, 12, 3};
    ck_assert_uint_eq(n, 6);
    ck_assert_mem_eq(ids, want, sizeof(want));
    free(ids);
    int32_t st[4];
    ck_assert_int_eq(tx_tokenizer_chat_stop_tokens(tok, st, 4), 3);
    ck_assert_mem_eq(st, eos, 3 * sizeof(int32_t));
    tx_tokenizer_free(tok);
}
END_TEST

/* The same with the Qwen3 tokenizer the repository ships: the documented ids */
START_TEST(synth_glm_special_tokens_qwen3)
{
    char dir[1024];
    /* the repository root: the working directory (make runs the tests
     * there), else two levels above this program (BUILD/tests/) */
    char tp[1100];
    snprintf(dir, sizeof(dir), "data/tokenizers/qwen3");
    snprintf(tp, sizeof(tp), "%s/tokenizer.json", dir);
    char exe[512];
    ssize_t xl = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (!tm_exists(tp) && xl > 0) {
        exe[xl] = 0;
        snprintf(dir, sizeof(dir), "%s/../../data/tokenizers/qwen3", dirname(exe));
        snprintf(tp, sizeof(tp), "%s/tokenizer.json", dir);
    }
    ck_assert_msg(tm_exists(tp), "%s missing (the repository's data/)", tp);
    struct tx_synth_tokenizer tk;
    ck_assert_int_eq(tx_synth_glm_tokenizer(dir, GLM_ARCH_GLM4_MOE, &tk, err, sizeof(err)), 0);
    ck_assert_int_eq(tk.n_added, 29);
    ck_assert_int_eq(tk.first_added, 151669);
    ck_assert_int_eq(tk.vocab_size, TX_SYNTH_QWEN3_GLM_VOCAB);
    ck_assert_int_eq(tk.eos[0], TX_SYNTH_QWEN3_GLM_ENDOFTEXT);
    ck_assert_int_eq(tk.eos[1], TX_SYNTH_QWEN3_GLM_USER);
    ck_assert_int_eq(tk.eos[2], TX_SYNTH_QWEN3_GLM_OBSERVATION);
    struct tx_tokenizer *tok;
    ck_assert_int_eq(tx_tokenizer_load_buffer(tk.tokenizer_json, strlen(tk.tokenizer_json), &tok,
                                              err, sizeof(err)),
                     0);
    ck_assert_uint_eq(tx_tokenizer_vocab_size(tok), 151698);
    for (int i = 0; i < TX_SYNTH_GLM_SPECIAL_COUNT; i++) {
        const char *t = tx_synth_glm_special_token(i);
        ck_assert_msg(tx_tokenizer_token_to_id(tok, t, strlen(t)) >= 151643, "%s", t);
    }
    struct tx_chat_message m[2] = {{"system", "be brief", NULL}, {"user", "hi", NULL}};
    int32_t *ids;
    size_t n;
    ck_assert_int_eq(tx_tokenizer_chat_encode(tok, TX_CHAT_GLM45, m, 2,
                                              TX_CHAT_ADD_GENERATION_PROMPT, &ids, &n, err,
                                              sizeof(err)),
                     0);
    /* [gMASK] <sop> <|system|> \n be brief <|user|> \n hi <|assistant|> */
    ck_assert_uint_ge(n, 8);
    ck_assert_int_eq(ids[0], TX_SYNTH_QWEN3_GLM_GMASK);
    ck_assert_int_eq(ids[1], TX_SYNTH_QWEN3_GLM_SOP);
    ck_assert_int_eq(ids[2], TX_SYNTH_QWEN3_GLM_SYSTEM);
    ck_assert_int_eq(ids[n - 1], TX_SYNTH_QWEN3_GLM_ASSISTANT);
    int users = 0;
    for (size_t i = 0; i < n; i++)
        users += ids[i] == TX_SYNTH_QWEN3_GLM_USER;
    ck_assert_int_eq(users, 1);
    free(ids);
    tx_tokenizer_free(tok);
    tx_synth_tokenizer_free(&tk);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, tm_setup, tm_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, valid);
    tcase_add_test(tc, missing_tensor);
    tcase_add_test(tc, wrong_shape);
    tcase_add_test(tc, unsupported_dtype);
    tcase_add_test(tc, mixed_dtypes);
    tcase_add_test(tc, extra_tensors);
    tcase_add_test(tc, unexpected_tensors);
    tcase_add_test(tc, bad_config);
    tcase_add_test(tc, synth_glm4);
    tcase_add_test(tc, synth_glm5_sharded);
    tcase_add_test(tc, synth_routing_skewed);
    tcase_add_test(tc, synth_deterministic);
    tcase_add_test(tc, synth_glm_special_tokens);
    tcase_add_test(tc, synth_glm_special_tokens_qwen3);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
