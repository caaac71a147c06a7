/* SPDX-License-Identifier: MIT */
/*
 * Test helper for the GLM runtime tests: small synthetic GLM checkpoints
 * (the glm-synth presets' configs and values, with a small vocabulary and
 * optional changes) written as a real Hugging Face checkpoint directory
 * (config.json, BF16 model.safetensors, a byte-level BPE tokenizer.json) and
 * exported to .smd with tx_export -- the same path real checkpoints take.
 */
#ifndef TEST_RUNTIME_SYNTH_H
#define TEST_RUNTIME_SYNTH_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tx_test_tmp.h"
#include <sys/stat.h>
#include <unistd.h>

#include <tx/glm.h>
#include <tx/glm_config.h>
#include <tx-internal/glm_reference.h>
#include <tx-internal/tx_smd.h>
#include <tx/tx_dtype.h>
#include <tx-internal/tx_export.h>
#include <tx-internal/tx_safetensors.h>
#include <tx-internal/tx_synth.h>

struct rts_mods {
    int vocab;   /* 0: 512 */
    int experts; /* 0: preset */
    int top_k;   /* 0: preset */
    int n_group; /* 0: preset; -1: 1 */
    int layers;  /* 0: preset */
    /* e_score_correction_bias of experts [0, hot_n) += hot_bias (skewed router) */
    int hot_n;
    float hot_bias;
    uint64_t seed;  /* 0: 42 */
    int dsa_shared; /* glm_moe_dsa: layer 1 reuses layer 0's DSA selection */
    int attn_bias;  /* attention_bias (glm_moe_dsa: q_a/kv_a/o biases) */
    /* YaRN configs (deepseek_v3): rope_scaling.mscale (0: preset); != its
     * mscale_all_dim makes attention_factor != 1 */
    double yarn_mscale;
    /* every KV-cache run a multiple of 32 elements (the Q8_0 / Q4_0 cache
     * types): glm_moe_dsa / deepseek_v3 qk_rope_head_dim 32 */
    int kv32;
};

struct rts_gen {
    const struct rts_mods *mods;
    struct tx_tensor_decl *decls;
    struct glm_tensor_info *infos;
    size_t n, cap;
};

static int rts_collect(void *ctx, const struct glm_tensor_info *t)
{
    struct rts_gen *g = ctx;
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 256;
        void *a = realloc(g->decls, cap * sizeof(*g->decls));
        if (!a)
            return -1;
        g->decls = a;
        void *b = realloc(g->infos, cap * sizeof(*g->infos));
        if (!b)
            return -1;
        g->infos = b;
        g->cap = cap;
    }
    g->infos[g->n] = *t;
    struct tx_tensor_decl *d = &g->decls[g->n];
    memset(d, 0, sizeof(*d));
    d->name = g->infos[g->n].name;
    d->type = t->keep_fp32 ? TX_ELEM_F32 : TX_ELEM_BF16;
    d->ndim = t->ndim;
    d->shape[0] = (uint64_t)t->shape[0];
    d->shape[1] = t->ndim == 2 ? (uint64_t)t->shape[1] : 0;
    g->n++;
    return 0;
}

/* OK(expr): expr returns TX_OK, else the test fails with the code, its name
 * and tx_last_error() (the one copy for the tests that include this file) */
#ifndef OK
#define OK(expr)                                                                                   \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        ck_assert_msg(rc_ == TX_OK, "%s = %d (%s): %s", #expr, rc_, tx_strerror(rc_),              \
                      tx_last_error());                                                            \
    } while (0)
#endif

/* UTF-8 of one code point into s; returns the length. */
static inline int rts_utf8(unsigned cp, char *s)
{
    if (cp < 0x80) {
        s[0] = (char)cp;
        return 1;
    }
    s[0] = (char)(0xc0 | (cp >> 6));
    s[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* A byte-level BPE tokenizer.json: the 256 byte tokens (ids 0..255, GPT-2
 * byte alphabet), no merges, and the GLM special tokens from id 256. */
static inline int rts_write_tokenizer(const char *path)
{
    static const char *const special[] = {
        "<|endoftext|>", "[MASK]",   "[gMASK]",       "[sMASK]",         "<sop>",   "<eop>",
        "<|system|>",    "<|user|>", "<|assistant|>", "<|observation|>", "<think>", "</think>",
    };
    unsigned cs[256];
    int n = 0;
    for (unsigned b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        cs[b] = keep ? b : 256u + (unsigned)n++;
    }
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[");
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        fprintf(f,
                "%s{\"id\":%zu,\"content\":\"%s\",\"single_word\":false,\"lstrip\":false,"
                "\"rstrip\":false,\"normalized\":false,\"special\":true}",
                i ? "," : "", 256 + i, special[i]);
    fprintf(f, "],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\","
               "\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":true},"
               "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":"
               "false,\"trim_offsets\":false,\"use_regex\":true},\"model\":{\"type\":\"BPE\","
               "\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,"
               "\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,"
               "\"vocab\":{");
    for (unsigned b = 0; b < 256; b++) {
        char u[4] = {0};
        int l = rts_utf8(cs[b], u);
        fputs(b ? ",\"" : "\"", f);
        if (l == 1 && (u[0] == '"' || u[0] == '\\'))
            fputc('\\', f);
        fwrite(u, 1, (size_t)l, f);
        fprintf(f, "\":%u", b);
    }
    fprintf(f, "},\"merges\":[]}}\n");
    return fclose(f);
}

/*
 * Writes a checkpoint directory `dir` for arch with the tiny preset and the
 * given changes. Returns 0, or -1 with a message on stderr.
 */
static inline int rts_write_checkpoint(const char *dir, enum glm_arch arch,
                                       const struct rts_mods *md)
{
    char err[512], path[512];
    struct rts_mods dm;
    memset(&dm, 0, sizeof(dm));
    if (!md)
        md = &dm;
    int vocab = md->vocab ? md->vocab : 512;
    char *cj = tx_synth_config_json(arch, TX_SYNTH_TINY, vocab);
    struct glm_config cfg;
    if (!cj || glm_config_from_json(cj, &cfg, err, sizeof(err))) {
        fprintf(stderr, "rts: config: %s\n", cj ? err : "NULL");
        free(cj);
        return -1;
    }
    free(cj);
    if (md->experts)
        cfg.n_routed_experts = md->experts;
    if (md->top_k)
        cfg.num_experts_per_tok = md->top_k;
    if (md->n_group) {
        cfg.n_group = md->n_group < 0 ? 1 : md->n_group;
        cfg.topk_group = cfg.n_group == 1 ? 1 : cfg.topk_group;
    }
    if (md->layers) {
        cfg.num_hidden_layers = md->layers;
        for (int l = 0; l < md->layers; l++) {
            cfg.mlp_layer_types[l] = l < cfg.first_k_dense_replace ? GLM_MLP_DENSE : GLM_MLP_SPARSE;
            cfg.indexer_types[l] = GLM_INDEXER_FULL;
        }
    }
    if (md->dsa_shared && cfg.arch == GLM_ARCH_GLM_MOE_DSA && cfg.num_hidden_layers > 1)
        cfg.indexer_types[1] = GLM_INDEXER_SHARED;
    if (md->attn_bias)
        cfg.attention_bias = 1;
    if (md->kv32 && cfg.kv_lora_rank > 0) {
        cfg.qk_rope_head_dim = 32;
        cfg.rotary_dim = 32;
        cfg.qk_head_dim = cfg.qk_nope_head_dim + 32;
        if (cfg.index_head_dim > 0 && cfg.index_head_dim < 32)
            cfg.index_head_dim = 32;
    }
    if (md->yarn_mscale != 0.0 && cfg.rope_type == GLM_ROPE_YARN)
        cfg.rope_yarn_mscale = md->yarn_mscale;
    cfg.eos_token_ids[0] = 256; /* <|endoftext|> of the test tokenizer */
    cfg.n_eos = 1;
    cfg.bos_token_id = -1;
    cfg.pad_token_id = 256;
    if (glm_config_validate(&cfg, err, sizeof(err))) {
        fprintf(stderr, "rts: config: %s\n", err);
        return -1;
    }
    mkdir(dir, 0755);
    char *js = glm_config_to_json(&cfg);
    snprintf(path, sizeof(path), "%s/config.json", dir);
    FILE *f = js ? fopen(path, "w") : NULL;
    if (!f || fputs(js, f) < 0 || fclose(f)) {
        fprintf(stderr, "rts: cannot write %s\n", path);
        free(js);
        return -1;
    }
    free(js);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    if (rts_write_tokenizer(path)) {
        fprintf(stderr, "rts: cannot write %s\n", path);
        return -1;
    }

    struct rts_gen g = {md, NULL, NULL, 0, 0};
    if (glm_config_tensor_list(&cfg, rts_collect, &g)) {
        fprintf(stderr, "rts: out of memory\n");
        free(g.decls);
        free(g.infos);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    struct tx_st_writer *w;
    if (tx_st_writer_open(path, g.decls, g.n, NULL, &w, err, sizeof(err))) {
        fprintf(stderr, "rts: %s\n", err);
        free(g.decls);
        free(g.infos);
        return -1;
    }
    uint64_t seed = md->seed ? md->seed : 42;
    int rc = 0;
    for (size_t i = 0; i < g.n && !rc; i++) {
        const struct glm_tensor_info *t = &g.infos[i];
        uint64_t ne = (uint64_t)t->shape[0] * (uint64_t)(t->ndim == 2 ? t->shape[1] : 1);
        size_t es = t->keep_fp32 ? 4 : 2;
        unsigned char *buf = malloc(ne * es);
        if (!buf) {
            rc = -1;
            break;
        }
        for (uint64_t k = 0; k < ne; k++) {
            float v = tx_synth_value(t, seed, 0, k);
            if (t->role == GLM_T_ROUTER_BIAS && (int64_t)k < md->hot_n)
                v += md->hot_bias;
            if (es == 4) {
                memcpy(buf + k * 4, &v, 4);
            } else {
                uint16_t h = tx_f32_to_bf16(v);
                memcpy(buf + k * 2, &h, 2);
            }
        }
        if (tx_st_writer_write(w, buf, ne * es, err, sizeof(err))) {
            fprintf(stderr, "rts: %s\n", err);
            rc = -1;
        }
        free(buf);
    }
    free(g.decls);
    free(g.infos);
    if (rc) {
        tx_st_writer_abort(w);
        return -1;
    }
    if (tx_st_writer_finish(w, err, sizeof(err))) {
        fprintf(stderr, "rts: %s\n", err);
        return -1;
    }
    return 0;
}

/* Export dir to out with --quant quant ("none", "fp16", "bf16", "int8"). */
static inline int rts_export(const char *dir, const char *out, const char *quant)
{
    char err[512];
    struct tx_export_opts o;
    tx_export_default_opts(&o);
    o.threads = 1;
    o.progress = 0;
    if (quant && tx_plan_apply_quant(o.plan, quant, err, sizeof(err)) < 0) {
        fprintf(stderr, "rts: %s\n", err);
        return -1;
    }
    o.quant = quant;
    if (tx_export(dir, out, &o, NULL, err, sizeof(err))) {
        fprintf(stderr, "rts: export: %s\n", err);
        return -1;
    }
    return 0;
}

/* A temporary directory for a test program (removed by rts_cleanup). */
static char rts_dir[64];

static inline const char *rts_tmpdir(void)
{
    if (!rts_dir[0]) {
        snprintf(rts_dir, sizeof(rts_dir), "/tmp/tx-rt-test-XXXXXX");
        if (!mkdtemp(rts_dir))
            rts_dir[0] = 0;
    }
    return rts_dir;
}

/* The tiny GLM-5.1 (smd[0]) and GLM-4.5 (smd[1]) packages, unquantised,
 * in rts_tmpdir(); 0 or -1 */
static inline int rts_two_models(char smd[2][256])
{
    const char *d = rts_tmpdir();
    enum glm_arch arch[2] = {GLM_ARCH_GLM_MOE_DSA, GLM_ARCH_GLM4_MOE};
    for (int i = 0; i < 2; i++) {
        char ck[300];
        snprintf(ck, sizeof(ck), "%s/ck%d", d, i);
        snprintf(smd[i], 256, "%s/m%d.smd", d, i);
        if (rts_write_checkpoint(ck, arch[i], NULL) || rts_export(ck, smd[i], "none"))
            return -1;
    }
    return 0;
}

static inline void rts_cleanup(void)
{
    tx_test_rmtree(rts_dir);
    rts_dir[0] = 0;
}

/* ---- device ------------------------------------------------------------ */

#include "tx_test_emu.h"

static struct tx_test_emu rts_emu;
static int rts_own_emu;
static char rts_spec[300];

/* $TX_DEVICE if set (the same tests then run on that backend, e.g. accel),
 * else a tx8-emu of `mem` started for this program. */
static inline int rts_device_setup(const char *mem)
{
    const char *env = getenv("TX_DEVICE");
    if (env && *env) {
        snprintf(rts_spec, sizeof(rts_spec), "%s", env);
        return 0;
    }
    if (tx_test_emu_start(&rts_emu, mem, "--cores", "2", NULL) != 0)
        return -1;
    rts_own_emu = 1;
    snprintf(rts_spec, sizeof(rts_spec), "%s", rts_emu.spec);
    return 0;
}

static inline void rts_device_teardown(void)
{
    if (rts_own_emu)
        tx_test_emu_stop(&rts_emu);
    rts_own_emu = 0;
}

/* ---- the FP32 reference on a package's stored weights ----------------- */

static inline int rts_ref_provider(void *ctx, const struct glm_tensor_info *t, float *dst,
                                   char *err, size_t errsz)
{
    struct tx_smd *s = ctx;
    const struct tx_smd_tensor *st = tx_smd_find(s, t->name);
    if (!st) {
        snprintf(err, errsz, "%s: missing", t->name);
        return -2;
    }
    void *buf = malloc(st->extent_size);
    if (!buf)
        return -12;
    int rc = tx_smd_read_extent(s, st, buf, st->extent_size, 1, err, errsz);
    if (!rc)
        rc = tx_smd_dequant(st, buf, dst, err, errsz);
    free(buf);
    return rc;
}

/* The reference model of a package (weights expanded to FP32). */
static inline int rts_ref_open(const char *smd, struct tx_smd **s, struct glm_ref_model **ref,
                               struct glm_config *cfg)
{
    char err[512];
    if (tx_smd_open(smd, 0, s, err, sizeof(err))) {
        fprintf(stderr, "rts: %s\n", err);
        return -1;
    }
    size_t len;
    const char *cj = tx_smd_config_json(*s, &len);
    if (glm_config_from_json(cj, cfg, err, sizeof(err))) {
        fprintf(stderr, "rts: %s\n", err);
        tx_smd_close(*s);
        return -1;
    }
    struct glm_ref_options ro = {0, 0, 0};
    if (glm_ref_model_create(cfg, rts_ref_provider, *s, &ro, ref, err, sizeof(err))) {
        fprintf(stderr, "rts: reference: %s\n", err);
        tx_smd_close(*s);
        return -1;
    }
    return 0;
}

/* logits [n x vocab] of ids at position 0 on the reference */
static inline int rts_ref_logits(struct glm_ref_model *ref, const int32_t *ids, int n, float *out)
{
    char err[512];
    struct glm_ref_session *rs;
    if (glm_ref_session_create(ref, n, &rs, err, sizeof(err)))
        return -1;
    int rc = glm_ref_forward(rs, ids, n, out, NULL, err, sizeof(err));
    if (rc)
        fprintf(stderr, "rts: reference forward: %s\n", err);
    glm_ref_session_destroy(rs);
    return rc;
}

/* max |a - b| / max |b| */
static inline double rts_rel_err(const float *a, const float *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > e)
            e = d;
        if (fabs(b[i]) > m)
            m = fabs(b[i]);
    }
    return m > 0 ? e / m : e;
}

static inline uint64_t rts_rand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

#endif
