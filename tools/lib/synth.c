/* SPDX-License-Identifier: MIT */
/* Synthetic GLM checkpoints in the real formats (glm-synth). */
#include <tx-internal/tx_fp8.h>

#include <tx-internal/tx_arch.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include <tx/tx_dtype.h>
#include <tx-internal/tx_onnx.h>
#include <tx-internal/tx_safetensors.h>
#include <tx-internal/tx_synth.h>

#include "common/arch_tools.h"
#include "common/config_set.h"

int tx_synth_preset_parse(const char *s)
{
    if (!strcmp(s, "tiny"))
        return TX_SYNTH_TINY;
    if (!strcmp(s, "small"))
        return TX_SYNTH_SMALL;
    if (!strcmp(s, "bench"))
        return TX_SYNTH_BENCH;
    return -1;
}

const char *tx_synth_preset_name(enum tx_synth_preset p)
{
    static const char *const n[] = {"tiny", "small", "bench"};
    return (unsigned)p < 3 ? n[p] : "?";
}

/* ---- presets ------------------------------------------------------------ */

static void add_i(struct json_object *o, const char *k, int64_t v)
{
    json_object_object_add(o, k, json_object_new_int64(v));
}
static void add_b(struct json_object *o, const char *k, int v)
{
    json_object_object_add(o, k, json_object_new_boolean(v));
}
static void add_s(struct json_object *o, const char *k, const char *v)
{
    json_object_object_add(o, k, json_object_new_string(v));
}

char *tx_synth_config_json(enum glm_arch arch, enum tx_synth_preset preset, int vocab_size)
{
    static const int32_t eos[] = {TX_SYNTH_QWEN3_GLM_ENDOFTEXT, TX_SYNTH_QWEN3_GLM_USER,
                                  TX_SYNTH_QWEN3_GLM_OBSERVATION};
    return tx_synth_config_json_ex(arch, preset, vocab_size, eos, 3, TX_SYNTH_QWEN3_GLM_ENDOFTEXT);
}

char *tx_synth_config_json_ex(enum glm_arch arch, enum tx_synth_preset preset, int vocab_size,
                              const int32_t *eos_ids, int n_eos, int32_t pad)
{
    const struct tx_arch_tools *ops = tx_arch_tools_get(arch);
    if ((unsigned)preset > TX_SYNTH_BENCH || !ops || !ops->synth_config || !eos_ids || n_eos < 1 ||
        n_eos > 8)
        return NULL;
    struct json_object *o = ops->synth_config(preset, vocab_size, eos_ids, n_eos, pad);
    if (!o)
        return NULL;
    const char *s = json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = strlen(s);
    char *r = malloc(n + 2);
    if (r) {
        memcpy(r, s, n);
        r[n] = '\n';
        r[n + 1] = 0;
    }
    json_object_put(o);
    return r;
}

int tx_synth_vocab_for_tokenizer(const char *path, int *vocab_size, char *err, size_t errsz)
{
    char *txt;
    size_t len;
    int rc = txm_read_file(path, 512u << 20, &txt, &len, err, errsz);
    if (rc < 0)
        return rc;
    struct json_tokener *tok = json_tokener_new();
    struct json_object *root = tok ? json_tokener_parse_ex(tok, txt, (int)len) : NULL;
    int ok = tok && json_tokener_get_error(tok) == json_tokener_success && root &&
             json_object_is_type(root, json_type_object);
    if (tok)
        json_tokener_free(tok);
    free(txt);
    if (!ok) {
        if (root)
            json_object_put(root);
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: not a JSON object", path);
    }
    int64_t maxid = -1;
    struct json_object *model, *vocab, *added;
    if (json_object_object_get_ex(root, "model", &model) &&
        json_object_object_get_ex(model, "vocab", &vocab) &&
        json_object_is_type(vocab, json_type_object)) {
        json_object_object_foreach(vocab, k, v)
        {
            (void)k;
            if (json_object_is_type(v, json_type_int) && json_object_get_int64(v) > maxid)
                maxid = json_object_get_int64(v);
        }
    }
    if (json_object_object_get_ex(root, "added_tokens", &added) &&
        json_object_is_type(added, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(added); i++) {
            struct json_object *id;
            if (json_object_object_get_ex(json_object_array_get_idx(added, i), "id", &id) &&
                json_object_is_type(id, json_type_int) && json_object_get_int64(id) > maxid)
                maxid = json_object_get_int64(id);
        }
    }
    json_object_put(root);
    if (maxid < 0 || maxid > (1 << 24))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: no usable vocabulary (model.vocab, added_tokens)", path);
    *vocab_size = (int)txm_align((uint64_t)maxid + 1, 128);
    return 0;
}

/* ---- the GLM tokenizer -------------------------------------------------- */

static const char *const glm_specials[TX_SYNTH_GLM_SPECIAL_COUNT] = {
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|begin_of_audio|>",
    "<|end_of_audio|>",
    "<|begin_of_transcription|>",
    "<|end_of_transcription|>",
    "<|code_prefix|>",
    "<|code_middle|>",
    "<|code_suffix|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "/nothink",
    "<|begin_of_box|>",
    "<|end_of_box|>",
    "<|image|>",
    "<|video|>",
};

const char *tx_synth_glm_special_token(int i)
{
    return i >= 0 && i < TX_SYNTH_GLM_SPECIAL_COUNT ? glm_specials[i] : NULL;
}

void tx_synth_tokenizer_free(struct tx_synth_tokenizer *t)
{
    if (!t)
        return;
    free(t->tokenizer_json);
    free(t->tokenizer_config_json);
    memset(t, 0, sizeof(*t));
}

static struct json_object *parse_json_file(const char *path, char *err, size_t errsz, int *rc)
{
    char *txt;
    size_t len;
    *rc = txm_read_file(path, 512u << 20, &txt, &len, err, errsz);
    if (*rc < 0)
        return NULL;
    struct json_tokener *jt = json_tokener_new();
    struct json_object *root =
        jt && len <= INT32_MAX ? json_tokener_parse_ex(jt, txt, (int)len) : NULL;
    int ok = jt && json_tokener_get_error(jt) == json_tokener_success && root &&
             json_object_is_type(root, json_type_object);
    if (jt)
        json_tokener_free(jt);
    free(txt);
    if (!ok) {
        json_object_put(root);
        *rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: not a JSON object", path);
        return NULL;
    }
    *rc = 0;
    return root;
}

static char *json_text(struct json_object *o)
{
    const char *s = json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = s ? strlen(s) : 0;
    char *r = s ? malloc(n + 2) : NULL;
    if (r) {
        memcpy(r, s, n);
        r[n] = '\n';
        r[n + 1] = 0;
    }
    return r;
}

/* The id of a token by content: an added token's, else the model vocab's;
 * -1 if none. */
static int64_t token_id(struct json_object *added, struct json_object *vocab, const char *content)
{
    size_t n = added ? json_object_array_length(added) : 0;
    for (size_t i = 0; i < n; i++) {
        struct json_object *a = json_object_array_get_idx(added, i), *c, *id;
        if (json_object_object_get_ex(a, "content", &c) &&
            json_object_is_type(c, json_type_string) &&
            !strcmp(json_object_get_string(c), content) &&
            json_object_object_get_ex(a, "id", &id) && json_object_is_type(id, json_type_int))
            return json_object_get_int64(id);
    }
    struct json_object *v;
    if (vocab && json_object_object_get_ex(vocab, content, &v) &&
        json_object_is_type(v, json_type_int))
        return json_object_get_int64(v);
    return -1;
}

static struct json_object *added_entry(int64_t id, const char *content, int with_id)
{
    struct json_object *e = json_object_new_object();
    if (with_id)
        add_i(e, "id", id);
    add_s(e, "content", content);
    add_b(e, "single_word", 0);
    add_b(e, "lstrip", 0);
    add_b(e, "rstrip", 0);
    add_b(e, "normalized", 0);
    add_b(e, "special", 1);
    return e;
}

/*
 * generation_config.json as transformers writes it: the config's eos and pad
 * ids, and default sampling. The sampling values are glm-inference's own
 * defaults (temperature 0.8, top-k 40, top-p 0.95), so that a synthetic
 * package samples as before; tests that need other values rewrite the file.
 */
static int write_generation_config(const char *dir, const struct glm_config *c, char *err,
                                   size_t errsz)
{
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "_from_model_config", json_object_new_boolean(1));
    json_object_object_add(o, "do_sample", json_object_new_boolean(1));
    struct json_object *e = json_object_new_array();
    for (int i = 0; i < c->n_eos; i++)
        json_object_array_add(e, json_object_new_int(c->eos_token_ids[i]));
    json_object_object_add(o, "eos_token_id", e);
    if (c->pad_token_id >= 0)
        json_object_object_add(o, "pad_token_id", json_object_new_int(c->pad_token_id));
    json_object_object_add(o, "temperature", json_object_new_double_s(0.8, "0.8"));
    json_object_object_add(o, "top_k", json_object_new_int(40));
    json_object_object_add(o, "top_p", json_object_new_double_s(0.95, "0.95"));
    json_object_object_add(o, "transformers_version", json_object_new_string("4.57.1"));
    const char *txt = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                            JSON_C_TO_STRING_SPACED |
                                                            JSON_C_TO_STRING_NOSLASHESCAPE);
    char *p = txm_path_join(dir, "generation_config.json");
    int rc = p ? txm_write_text(p, txt, NULL, err, errsz)
               : tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    free(p);
    json_object_put(o);
    return rc;
}

/* tokenizer_config.json: the added tokens, the GLM eos/pad and template. */
static int glm_tokenizer_config(const char *path, enum glm_arch arch, const int64_t *ids,
                                const int *is_new, char **out, char *err, size_t errsz)
{
    int rc;
    struct json_object *root = parse_json_file(path, err, errsz, &rc);
    if (!root)
        return rc;
    struct json_object *dec, *extra;
    if (!json_object_object_get_ex(root, "added_tokens_decoder", &dec) ||
        !json_object_is_type(dec, json_type_object)) {
        dec = json_object_new_object();
        json_object_object_add(root, "added_tokens_decoder", dec);
    }
    if (!json_object_object_get_ex(root, "additional_special_tokens", &extra) ||
        !json_object_is_type(extra, json_type_array)) {
        extra = json_object_new_array();
        json_object_object_add(root, "additional_special_tokens", extra);
    }
    for (int i = 0; i < TX_SYNTH_GLM_SPECIAL_COUNT; i++) {
        if (!is_new[i])
            continue;
        char key[24];
        snprintf(key, sizeof(key), "%" PRId64, ids[i]);
        struct json_object *e = added_entry(ids[i], glm_specials[i], 0);
        /* key order of the HF files: content, lstrip, normalized, rstrip,
         * single_word, special (json-c keeps insertion order) */
        struct json_object *o = json_object_new_object();
        const char *const keys[] = {"content", "lstrip",      "normalized",
                                    "rstrip",  "single_word", "special"};
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
            struct json_object *v;
            json_object_object_get_ex(e, keys[k], &v);
            json_object_object_add(o, keys[k], json_object_get(v));
        }
        json_object_put(e);
        json_object_object_add(dec, key, o);
        json_object_array_add(extra, json_object_new_string(glm_specials[i]));
    }
    add_s(root, "eos_token", "<|endoftext|>");
    add_s(root, "pad_token", "<|endoftext|>");
    const struct tx_arch_tools *ops = tx_arch_tools_get(arch);
    add_s(root, "chat_template", ops && ops->chat_template ? ops->chat_template : "");
    *out = json_text(root);
    json_object_put(root);
    return *out ? 0 : tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
}

int tx_synth_glm_tokenizer(const char *dir, enum glm_arch arch, struct tx_synth_tokenizer *out,
                           char *err, size_t errsz)
{
    memset(out, 0, sizeof(*out));
    out->first_added = -1;
    char *tp = txm_path_join(dir, "tokenizer.json");
    char *cp = txm_path_join(dir, "tokenizer_config.json");
    int rc = 0;
    struct json_object *root = NULL;
    if (!tp || !cp) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto out;
    }
    root = parse_json_file(tp, err, errsz, &rc);
    if (!root)
        goto out;
    struct json_object *model = NULL, *vocab = NULL, *added = NULL;
    if (json_object_object_get_ex(root, "model", &model) &&
        json_object_is_type(model, json_type_object))
        json_object_object_get_ex(model, "vocab", &vocab);
    if (vocab && !json_object_is_type(vocab, json_type_object))
        vocab = NULL;
    if (!json_object_object_get_ex(root, "added_tokens", &added) || !added) {
        added = json_object_new_array();
        json_object_object_add(root, "added_tokens", added);
    } else if (!json_object_is_type(added, json_type_array)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL, "%s: added_tokens is not an array", tp);
        goto out;
    }
    /* the largest id in use */
    int64_t maxid = -1;
    if (vocab) {
        json_object_object_foreach(vocab, k, v)
        {
            (void)k;
            if (json_object_is_type(v, json_type_int) && json_object_get_int64(v) > maxid)
                maxid = json_object_get_int64(v);
        }
    }
    for (size_t i = 0; i < json_object_array_length(added); i++) {
        struct json_object *id;
        if (json_object_object_get_ex(json_object_array_get_idx(added, i), "id", &id) &&
            json_object_is_type(id, json_type_int) && json_object_get_int64(id) > maxid)
            maxid = json_object_get_int64(id);
    }
    if (maxid < 0 || maxid > (1 << 24)) {
        rc = tx_errbuf(err, errsz, TX_EINVAL,
                       "%s: no usable vocabulary (model.vocab, added_tokens)", tp);
        goto out;
    }
    int64_t ids[TX_SYNTH_GLM_SPECIAL_COUNT];
    int is_new[TX_SYNTH_GLM_SPECIAL_COUNT];
    for (int i = 0; i < TX_SYNTH_GLM_SPECIAL_COUNT; i++) {
        ids[i] = token_id(added, vocab, glm_specials[i]);
        is_new[i] = ids[i] < 0;
        if (is_new[i]) {
            ids[i] = ++maxid;
            json_object_array_add(added, added_entry(ids[i], glm_specials[i], 1));
            if (out->first_added < 0)
                out->first_added = (int32_t)ids[i];
            out->n_added++;
        }
    }
    out->vocab_size = (int)txm_align((uint64_t)maxid + 1, 128);
    out->eos[0] = (int32_t)ids[0]; /* <|endoftext|> */
    out->eos[1] = (int32_t)ids[7]; /* <|user|> */
    out->eos[2] = (int32_t)ids[9]; /* <|observation|> */
    out->pad = (int32_t)ids[0];
    out->tokenizer_json = json_text(root);
    if (!out->tokenizer_json) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto out;
    }
    if (txm_file_exists(cp))
        rc = glm_tokenizer_config(cp, arch, ids, is_new, &out->tokenizer_config_json, err, errsz);
out:
    json_object_put(root);
    free(tp);
    free(cp);
    if (rc < 0)
        tx_synth_tokenizer_free(out);
    return rc;
}

/* ---- values ------------------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_key(const char *name, uint64_t seed)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return mix64(h ^ mix64(seed));
}

struct gen {
    char name[GLM_TENSOR_NAME_MAX];
    uint64_t key;
    float mean, std;
    enum tx_elem_type type;
    int ndim;
    uint64_t shape[2];
    uint64_t nelem;
    uint32_t block_cols; /* FFN block structure: row length, 0 = none */
    float weak;          /* scale of the weak blocks */
    /* --routing skewed: 1 router weight [E x D], 2 router bias [E] */
    int rkind;
    uint64_t rbase;      /* key of the base rows shared by all layers */
    uint64_t ra, rb, rE; /* layer's permutation expert e -> base row (ra * e + rb) % E */
    float rcorr, rskew;
    /* --fp8: 1 for the block scales (<weight>_scale_inv, F32) of the
     * F8_E4M3 weight just before this entry in the list */
    int fp8_scales;
};

/* FFN and expert matrices get block-structured magnitudes: in each row,
 * one block of 32 columns of every pair of blocks (2j, 2j + 1) is "weak"
 * (x SYNTH_WEAK), so pruning the weakest half of the blocks (glm-export
 * --optimize sparse) removes about SYNTH_WEAK^2 of their energy, as after
 * sparsity-aware training. The overall standard deviation is unchanged. */
#define SYNTH_BLOCK 32

/* Scales (see tx_synth.h): embedding rows N(0, 1); the matrices that write
 * into the residual stream (o_proj, down_proj of the MLP and of every
 * expert) get SYNTH_RESIDUAL_GAIN / sqrt(fan_in), so that each layer adds
 * a correction of ~10-20% of the residual's size, as in a trained deep
 * model; the other matrices 1 / sqrt(fan_in) (unit-scale outputs, router
 * logits of unit spread). */
#define SYNTH_EMBED_STD 1.0f
#define SYNTH_RESIDUAL_GAIN 0.1f
#define SYNTH_WEAK 0.05f

/* Two standard normal values of pair p (Box-Muller on a counter hash). */
static inline void normal_pair(uint64_t key, uint64_t p, float *z0, float *z1)
{
    uint64_t h = mix64(key ^ (p * 0xd1b54a32d192ed03ull));
    float u1 = ((float)(h >> 40) + 1.0f) * (1.0f / 16777216.0f); /* (0, 1] */
    float u2 = (float)((h >> 16) & 0xffffff) * (1.0f / 16777216.0f);
    float r = sqrtf(-2.0f * logf(u1));
    float a = 6.28318530718f * u2;
    *z0 = r * cosf(a);
    *z1 = r * sinf(a);
}

static void gen_init(struct gen *g, const struct glm_tensor_info *t, uint64_t seed, int blocks)
{
    memset(g, 0, sizeof(*g));
    snprintf(g->name, sizeof(g->name), "%s", t->name);
    g->key = name_key(t->name, seed);
    g->ndim = t->ndim;
    g->shape[0] = (uint64_t)t->shape[0];
    g->shape[1] = t->ndim > 1 ? (uint64_t)t->shape[1] : 0;
    g->nelem = g->shape[0] * (t->ndim > 1 ? g->shape[1] : 1);
    g->type = t->keep_fp32 ? TX_ELEM_F32 : TX_ELEM_BF16;
    g->mean = 0.0f;
    switch (t->role) {
    case GLM_T_EMBED:
        g->std = SYNTH_EMBED_STD;
        break;
    case GLM_T_O_PROJ:
    case GLM_T_MLP_DOWN:
    case GLM_T_EXP_DOWN:
    case GLM_T_SHEXP_DOWN:
        g->std = SYNTH_RESIDUAL_GAIN / sqrtf((float)t->shape[1]);
        break;
    case GLM_T_ROUTER_BIAS:
        g->std = 0.02f;
        break;
    case GLM_T_IDX_K_NORM_BIAS:
    case GLM_T_Q_BIAS:
    case GLM_T_K_BIAS:
    case GLM_T_V_BIAS:
    case GLM_T_O_BIAS:
    case GLM_T_Q_A_BIAS:
    case GLM_T_KV_A_BIAS:
        g->std = 0.02f;
        break;
    default:
        if (t->cls == GLM_TC_NORM) {
            g->mean = 1.0f;
            g->std = 0.05f;
        } else {
            g->std = t->ndim == 2 ? 1.0f / sqrtf((float)t->shape[1]) : 0.02f;
        }
        break;
    }
    if ((t->cls == GLM_TC_MLP || t->cls == GLM_TC_EXPERT) && t->ndim == 2 &&
        t->shape[1] % SYNTH_BLOCK == 0 && blocks) {
        g->block_cols = (uint32_t)t->shape[1];
        g->weak = SYNTH_WEAK;
        g->std *= sqrtf(2.0f / (1.0f + SYNTH_WEAK * SYNTH_WEAK));
    }
}

/*
 * Routing with structure (TX_SYNTH_ROUTING_SKEWED, docs/glm-inference.md):
 * every MoE layer's router row of expert e is a mix of a base row shared by
 * all layers and of the layer's own noise,
 *   W_l[e] = std * (sqrt(corr) * B[pi_l(e)] + sqrt(1 - corr) * Z_l[e]),
 * pi_l a per-layer permutation (an affine map mod E), so that a token that
 * picks e at layer l tends to pick pi_{l+1}^-1(pi_l(e)) at l + 1 (the
 * residual stream changes little between layers): cross-layer correlation
 * `corr` in [0, 1]. The router bias (e_score_correction_bias, which only
 * steers the selection) makes base rows of low index hot:
 *   bias_l[e] = skew * SYNTH_SKEW_SCALE * exp(-SYNTH_SKEW_DECAY * pi_l(e) / E).
 * Routers without a bias (Qwen3-MoE's softmax router) get the correlation
 * only.
 */
#define SYNTH_SKEW_SCALE 0.2f
#define SYNTH_SKEW_DECAY 6.0f

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static void routing_init(struct gen *g, const struct glm_tensor_info *t, uint64_t seed,
                         const struct tx_synth_opts *o, int E)
{
    if (!o || o->routing != TX_SYNTH_ROUTING_SKEWED || E < 2 || t->layer < 0)
        return;
    if (t->role == GLM_T_ROUTER && t->ndim == 2)
        g->rkind = 1;
    else if (t->role == GLM_T_ROUTER_BIAS)
        g->rkind = 2;
    else
        return;
    g->rbase = name_key("synth.router.base", seed);
    uint64_t h = mix64(seed ^ (0x7f4a7c15ull * (uint64_t)(t->layer + 1)));
    g->rE = (uint64_t)E;
    g->ra = (h % g->rE) | 1;
    while (gcd64(g->ra, g->rE) != 1)
        g->ra = (g->ra + 2) % g->rE;
    g->rb = (h >> 32) % g->rE;
    g->rcorr = o->routing_corr;
    g->rskew = o->routing_skew;
}

static inline float normal_at(uint64_t key, uint64_t i)
{
    float z0, z1;
    normal_pair(key, i / 2, &z0, &z1);
    return (i & 1) ? z1 : z0;
}

static float routing_value(const struct gen *g, uint64_t i)
{
    if (g->rkind == 2) {
        uint64_t k = (g->ra * (i % g->rE) + g->rb) % g->rE;
        return g->rskew * SYNTH_SKEW_SCALE * expf(-SYNTH_SKEW_DECAY * (float)k / (float)g->rE);
    }
    uint64_t D = g->shape[1], e = i / D, j = i % D;
    uint64_t k = (g->ra * e + g->rb) % g->rE;
    return g->std * (sqrtf(g->rcorr) * normal_at(g->rbase, k * D + j) +
                     sqrtf(1.0f - g->rcorr) * normal_at(g->key, i));
}

static inline float block_scale(const struct gen *g, uint64_t i)
{
    if (!g->block_cols)
        return 1.0f;
    uint64_t r = i / g->block_cols, b = (i % g->block_cols) / SYNTH_BLOCK;
    uint64_t nb = g->block_cols / SYNTH_BLOCK;
    if ((nb & 1) && b == nb - 1)
        return 1.0f; /* the unpaired last block */
    /* exactly one block of each pair (2j, 2j + 1) is weak */
    uint64_t h = mix64(g->key + 0x5bd1e995u + r * 0x9e3779b97f4a7c15ull + (b >> 1));
    return (h & 1) == (b & 1) ? g->weak : 1.0f;
}

float tx_synth_value(const struct glm_tensor_info *t, uint64_t seed, int dense_ffn, uint64_t i)
{
    struct gen g;
    gen_init(&g, t, seed, !dense_ffn);
    float z0, z1;
    normal_pair(g.key, i / 2, &z0, &z1);
    return g.mean + g.std * block_scale(&g, i) * ((i & 1) ? z1 : z0);
}

/* Fills out[0, n) (n even or the tensor's end) with elements [first, +n)
 * converted to g->type. */
static void gen_fill(const struct gen *g, uint64_t first, uint64_t n, void *out)
{
    for (uint64_t k = 0; k < n;) {
        uint64_t i = first + k;
        float z[2];
        normal_pair(g->key, i / 2, &z[0], &z[1]);
        for (int j = (int)(i & 1); j < 2 && k < n; j++, k++) {
            float v = g->rkind
                          ? routing_value(g, i + (uint64_t)j - (i & 1))
                          : g->mean + g->std * block_scale(g, i + (uint64_t)j - (i & 1)) * z[j];
            if (g->type == TX_ELEM_F32)
                memcpy((char *)out + k * 4, &v, 4);
            else {
                uint16_t h = tx_f32_to_bf16(v);
                memcpy((char *)out + k * 2, &h, 2);
            }
        }
    }
}

/* ---- the tensor list ---------------------------------------------------- */

struct glist {
    struct gen *g;
    size_t n, cap;
    uint64_t seed;
    int blocks;
    const struct tx_synth_opts *o;
    int E;
};

static int glist_add(struct glist *l, const struct gen *g)
{
    if (l->n == l->cap) {
        size_t c = l->cap ? 2 * l->cap : 256;
        struct gen *n = realloc(l->g, c * sizeof(*n));
        if (!n)
            return TX_ENOMEM;
        l->g = n;
        l->cap = c;
    }
    l->g[l->n++] = *g;
    return 0;
}

/* What the FP8 releases quantise: the projection matrices of attention,
 * the dense MLP and the experts (not the embedding, lm_head, routers,
 * norms, biases or F32 tensors). */
static int fp8_quantised(const struct glm_tensor_info *t)
{
    return t->ndim == 2 && !t->keep_fp32 &&
           (t->cls == GLM_TC_ATTENTION || t->cls == GLM_TC_MLP || t->cls == GLM_TC_EXPERT);
}

static int glist_cb(void *ctx, const struct glm_tensor_info *t)
{
    struct glist *l = ctx;
    struct gen g;
    gen_init(&g, t, l->seed, l->blocks);
    routing_init(&g, t, l->seed, l->o, l->E);
    int q = l->o && l->o->fp8 && fp8_quantised(t);
    if (q)
        g.type = TX_ELEM_F8_E4M3;
    int rc = glist_add(l, &g);
    if (rc || !q)
        return rc;
    /* its companion, right after it as in the real shards */
    struct gen sg;
    memset(&sg, 0, sizeof(sg));
    snprintf(sg.name, sizeof(sg.name), "%.*s%s",
             (int)(sizeof(sg.name) - sizeof(TXM_FP8_SCALE_SUFFIX)), t->name, TXM_FP8_SCALE_SUFFIX);
    sg.type = TX_ELEM_F32;
    sg.ndim = 2;
    sg.shape[0] = txm_fp8_grid(g.shape[0], TXM_FP8_BLOCK);
    sg.shape[1] = txm_fp8_grid(g.shape[1], TXM_FP8_BLOCK);
    sg.nelem = sg.shape[0] * sg.shape[1];
    sg.fp8_scales = 1;
    return glist_add(l, &sg);
}

/* The MTP (next-n) layer's own tensors, as the real checkpoints carry them
 * after the decoder layers (model.layers.L.*); loaders ignore them. */
static int add_mtp(struct glist *l, const struct glm_config *c)
{
    static const char *const norms[] = {"enorm.weight", "hnorm.weight", "shared_head.norm.weight"};
    struct glm_tensor_info t;
    for (size_t i = 0; i < 4; i++) {
        memset(&t, 0, sizeof(t));
        t.layer = c->num_hidden_layers;
        t.expert = -1;
        if (i < 3) {
            snprintf(t.name, sizeof(t.name), "model.layers.%d.%s", c->num_hidden_layers, norms[i]);
            t.ndim = 1;
            t.shape[0] = c->hidden_size;
            t.cls = GLM_TC_NORM;
            t.role = GLM_T_INPUT_NORM;
        } else {
            snprintf(t.name, sizeof(t.name), "model.layers.%d.eh_proj.weight",
                     c->num_hidden_layers);
            t.ndim = 2;
            t.shape[0] = c->hidden_size;
            t.shape[1] = 2 * (int64_t)c->hidden_size;
            t.cls = GLM_TC_ATTENTION;
            t.role = GLM_T_O_PROJ;
        }
        int rc = glist_cb(l, &t);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- writing ------------------------------------------------------------ */
/* (an FP8 weight's scale entry follows it: see glist_cb) */

struct fill_job {
    const struct gen *g;
    uint64_t first, n;
    unsigned char *buf;
    size_t es;
};

#define FILL_TASK (1u << 16) /* elements per parallel task (even) */

static int fill_task(void *ctx, uint64_t i)
{
    struct fill_job *j = ctx;
    uint64_t a = i * FILL_TASK, n = j->n - a < FILL_TASK ? j->n - a : FILL_TASK;
    gen_fill(j->g, j->first + a, n, j->buf + a * j->es);
    return 0;
}

#define CHUNK_ELEMS (4u << 20)

typedef int (*sink_fn)(void *sink, const void *data, size_t len, char *err, size_t errsz);

/*
 * --fp8: an F8_E4M3 weight (scales = NULL) or its scale tensor (the
 * weight's gen w), band by band of 128 rows: the values generated in float
 * (as tx_synth_value), quantised the Hugging Face way
 * (txm_fp8_quantise_band).
 */
static int emit_fp8(const struct gen *w, int want_scales, int threads, sink_fn sink, void *sctx,
                    char *err, size_t errsz)
{
    uint64_t rows = w->shape[0], cols = w->shape[1];
    uint64_t band = (uint64_t)TXM_FP8_BLOCK * cols, sc = txm_fp8_grid(cols, TXM_FP8_BLOCK);
    float *x = malloc(band * sizeof(float) + sc * sizeof(float));
    uint8_t *q = malloc(band);
    if (!x || !q) {
        free(x);
        free(q);
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    }
    float *scales = x + band;
    struct gen g32 = *w;
    g32.type = TX_ELEM_F32;
    int rc = 0;
    for (uint64_t r0 = 0; r0 < rows && rc == 0; r0 += TXM_FP8_BLOCK) {
        uint64_t nr = rows - r0 < TXM_FP8_BLOCK ? rows - r0 : TXM_FP8_BLOCK;
        uint64_t n = nr * cols;
        struct fill_job j = {&g32, r0 * cols, n, (unsigned char *)x, 4};
        txm_parallel(n > FILL_TASK ? threads : 1, (n + FILL_TASK - 1) / FILL_TASK, fill_task, &j);
        txm_fp8_quantise_band(x, (uint32_t)nr, (uint32_t)cols, TXM_FP8_BLOCK, q, scales);
        rc = want_scales ? sink(sctx, scales, (size_t)(sc * sizeof(float)), err, errsz)
                         : sink(sctx, q, (size_t)n, err, errsz);
    }
    free(x);
    free(q);
    return rc;
}

static int emit_tensor(const struct gen *g, unsigned char *buf, int threads, sink_fn sink,
                       void *sctx, char *err, size_t errsz)
{
    if (g->type == TX_ELEM_F8_E4M3)
        return emit_fp8(g, 0, threads, sink, sctx, err, errsz);
    if (g->fp8_scales)
        return emit_fp8(g - 1, 1, threads, sink, sctx, err, errsz);
    size_t es = tx_elem_size(g->type);
    for (uint64_t first = 0; first < g->nelem; first += CHUNK_ELEMS) {
        uint64_t n = g->nelem - first < CHUNK_ELEMS ? g->nelem - first : CHUNK_ELEMS;
        struct fill_job j = {g, first, n, buf, es};
        txm_parallel(n > FILL_TASK ? threads : 1, (n + FILL_TASK - 1) / FILL_TASK, fill_task, &j);
        int rc = sink(sctx, buf, (size_t)(n * es), err, errsz);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int st_sink(void *w, const void *d, size_t len, char *err, size_t errsz)
{
    return tx_st_writer_write(w, d, len, err, errsz);
}

static int onnx_sink(void *w, const void *d, size_t len, char *err, size_t errsz)
{
    return tx_onnx_writer_append(w, d, len, err, errsz);
}

static int progress_last;

static void progress(const struct tx_synth_opts *o, uint64_t done, uint64_t total, const char *what)
{
    if (!o->progress)
        return;
    int last = progress_last;
    int pct = total ? (int)(done * 100 / total) : 100;
    if (pct / 10 != last / 10 || done == total) {
        fprintf(stderr, "glm-synth: %3d%% %s\n", pct, what);
        progress_last = pct;
    }
}

static int write_hf(const char *outdir, const struct tx_synth_opts *o, struct glist *l,
                    uint64_t shard_bytes, unsigned char *buf, int threads, char *err, size_t errsz)
{
    uint64_t total = 0;
    for (size_t i = 0; i < l->n; i++)
        total += l->g[i].nelem * tx_elem_size(l->g[i].type);
    /* shard assignment */
    size_t *shard = calloc(l->n + 1, sizeof(size_t));
    if (!shard)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    size_t nshards = 1;
    uint64_t acc = 0;
    for (size_t i = 0; i < l->n; i++) {
        uint64_t b = l->g[i].nelem * tx_elem_size(l->g[i].type);
        if (shard_bytes && acc > 0 && acc + b > shard_bytes) {
            nshards++;
            acc = 0;
        }
        shard[i] = nshards - 1;
        acc += b;
    }
    char **fnames = calloc(nshards, sizeof(char *));
    struct tx_tensor_decl *decls = calloc(l->n + 1, sizeof(*decls));
    const char **names = calloc(l->n + 1, sizeof(char *));
    const char **files = calloc(l->n + 1, sizeof(char *));
    int rc = 0;
    if (!fnames || !decls || !names || !files) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t s = 0; s < nshards; s++) {
        fnames[s] = malloc(64);
        if (!fnames[s]) {
            rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            goto out;
        }
        if (nshards == 1)
            snprintf(fnames[s], 64, "model.safetensors");
        else
            snprintf(fnames[s], 64, "model-%05zu-of-%05zu.safetensors", s + 1, nshards);
    }
    uint64_t done = 0;
    static const char *const meta[] = {"format", "pt", NULL};
    for (size_t s = 0, i = 0; s < nshards; s++) {
        size_t i0 = i, nd = 0;
        for (; i < l->n && shard[i] == s; i++, nd++) {
            decls[nd].name = l->g[i].name;
            decls[nd].type = l->g[i].type;
            decls[nd].ndim = l->g[i].ndim;
            decls[nd].shape[0] = l->g[i].shape[0];
            decls[nd].shape[1] = l->g[i].shape[1];
            names[i] = l->g[i].name;
            files[i] = fnames[s];
        }
        char *path = txm_path_join(outdir, fnames[s]);
        struct tx_st_writer *w = NULL;
        rc = path ? tx_st_writer_open(path, decls, nd, meta, &w, err, errsz)
                  : tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        free(path);
        if (rc < 0)
            goto out;
        for (size_t k = i0; k < i; k++) {
            rc = emit_tensor(&l->g[k], buf, threads, st_sink, w, err, errsz);
            if (rc < 0) {
                tx_st_writer_abort(w);
                goto out;
            }
            done += l->g[k].nelem * tx_elem_size(l->g[k].type);
            progress(o, done, total, fnames[s]);
        }
        rc = tx_st_writer_finish(w, err, errsz);
        if (rc < 0)
            goto out;
    }
    if (nshards > 1) {
        char *ip = txm_path_join(outdir, "model.safetensors.index.json");
        rc = ip ? tx_st_write_index(ip, names, files, l->n, total, err, errsz)
                : tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        free(ip);
    }
out:
    if (fnames)
        for (size_t s = 0; s < nshards; s++)
            free(fnames[s]);
    free(fnames);
    free(decls);
    free(names);
    free(files);
    free(shard);
    return rc;
}

static int write_onnx(const char *outdir, const struct tx_synth_opts *o, struct glist *l,
                      const char *config_json, int external, unsigned char *buf, int threads,
                      int vocab, char *err, size_t errsz)
{
    char *path = txm_path_join(outdir, "model.onnx");
    if (!path)
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    const char *meta[] = {"config", config_json, "producer", "glm-synth", NULL};
    struct tx_onnx_writer *w;
    int rc = tx_onnx_writer_open(path, external ? "model.onnx.data" : NULL, meta, &w, err, errsz);
    free(path);
    if (rc < 0)
        return rc;
    uint64_t total = 0, done = 0;
    for (size_t i = 0; i < l->n; i++)
        total += l->g[i].nelem * tx_elem_size(l->g[i].type);
    for (size_t i = 0; i < l->n; i++) {
        const struct gen *g = &l->g[i];
        struct tx_tensor_decl d = {g->name, g->type, g->ndim, {g->shape[0], g->shape[1]}};
        size_t es = tx_elem_size(g->type);
        if (external) {
            rc = tx_onnx_writer_begin(w, &d, err, errsz);
            if (rc == 0)
                rc = emit_tensor(g, buf, threads, onnx_sink, w, err, errsz);
        } else {
            void *all = malloc(g->nelem * es + 1);
            if (!all) {
                rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            } else {
                struct fill_job j = {g, 0, g->nelem, all, es};
                txm_parallel(threads, (g->nelem + FILL_TASK - 1) / FILL_TASK, fill_task, &j);
                rc = tx_onnx_writer_add(w, &d, all, err, errsz);
                free(all);
            }
        }
        if (rc < 0) {
            tx_onnx_writer_abort(w);
            return rc;
        }
        done += g->nelem * es;
        progress(o, done, total, "model.onnx");
    }
    /* A placeholder graph (embedding gather, then lm_head): readers use the
     * initializers and the config, never the nodes. */
    struct tx_onnx_value in = {"input_ids", TX_ELEM_I64, 2, {-1, -1}, {"batch", "sequence"}};
    struct tx_onnx_value outv = {
        "logits", TX_ELEM_BF16, 3, {-1, -1, vocab}, {"batch", "sequence", NULL}};
    const char *g_in[] = {"model.embed_tokens.weight", "input_ids"};
    const char *g_out[] = {"inputs_embeds"};
    const char *t_in[] = {"lm_head.weight"};
    const char *t_out[] = {"lm_head_t"};
    const char *m_in[] = {"inputs_embeds", "lm_head_t"};
    const char *m_out[] = {"logits"};
    const int64_t perm[] = {1, 0};
    rc = tx_onnx_writer_io(w, 0, &in, err, errsz);
    if (rc == 0)
        rc = tx_onnx_writer_io(w, 1, &outv, err, errsz);
    if (rc == 0)
        rc =
            tx_onnx_writer_node(w, "Gather", "embed", g_in, 2, g_out, 1, NULL, NULL, 0, err, errsz);
    if (rc == 0)
        rc = tx_onnx_writer_node(w, "Transpose", "lm_head_transpose", t_in, 1, t_out, 1, "perm",
                                 perm, 2, err, errsz);
    if (rc == 0)
        rc = tx_onnx_writer_node(w, "MatMul", "lm_head", m_in, 2, m_out, 1, NULL, NULL, 0, err,
                                 errsz);
    if (rc < 0) {
        tx_onnx_writer_abort(w);
        return rc;
    }
    return tx_onnx_writer_finish(w, err, errsz);
}

/* "key=value[,key=value...]" onto the config.json text cj (--config-set;
 * common/config_set.h) */
int tx_synth_apply_config_set(const char *cj, const char *set, char **out, char *err, size_t errsz)
{
    *out = NULL;
    size_t setlen = strnlen(set, TX_SYNTH_CONFIG_SET_MAX + 1);
    if (setlen > TX_SYNTH_CONFIG_SET_MAX)
        return tx_errbuf(err, errsz, TX_EINVAL, "--config-set: more than %u bytes (the limit)",
                         TX_SYNTH_CONFIG_SET_MAX);
    struct json_object *o = json_tokener_parse(cj);
    if (!o || !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return tx_errbuf(err, errsz, TX_EINVAL, "--config-set: the config is not a JSON object");
    }
    char *dup = strdup(set);
    int rc = 0;
    if (!dup) {
        json_object_put(o);
        return tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    }
    char *save = NULL;
    for (char *item = strtok_r(dup, ",", &save); item && !rc; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq || eq == item || !eq[1]) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "--config-set: '%.80s' is not KEY=VALUE (e.g. hidden_size=2048)",
                           item);
            break;
        }
        *eq = 0;
        const char *v = eq + 1;
        if (!json_object_object_get_ex(o, item, NULL)) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "--config-set: %.80s: not a field of this architecture's config.json",
                           item);
            break;
        }
        char *end;
        long long iv = strtoll(v, &end, 10);
        struct json_object *jv;
        if (!*end)
            jv = json_object_new_int64(iv);
        else if ((void)strtod(v, &end), !*end) {
            double d = strtod(v, NULL);
            if (!isfinite(d)) {
                /* json-c would write NaN / Infinity: not JSON */
                rc = tx_errbuf(err, errsz, TX_EINVAL,
                               "--config-set: %.80s: '%.40s' is not a finite number", item, v);
                break;
            }
            jv = json_object_new_double(d);
        } else if (!strcmp(v, "true") || !strcmp(v, "false"))
            jv = json_object_new_boolean(v[0] == 't');
        else if (!strcmp(v, "null"))
            jv = NULL;
        else
            jv = json_object_new_string(v);
        json_object_object_add(o, item, jv);
    }
    if (!rc) {
        const char *txt = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
        *out = txt ? strdup(txt) : NULL;
        if (!*out)
            rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
    }
    free(dup);
    json_object_put(o);
    return rc;
}

/* The config text with the quantization_config of the FP8 releases. */
static char *fp8_config(const char *cj)
{
    struct json_object *o = json_tokener_parse(cj), *q = json_object_new_object();
    struct json_object *bs = json_object_new_array();
    char *r = NULL;
    if (o && q && bs) {
        json_object_object_add(q, "activation_scheme", json_object_new_string("dynamic"));
        json_object_object_add(q, "fmt", json_object_new_string("e4m3"));
        json_object_object_add(q, "quant_method", json_object_new_string("fp8"));
        json_object_array_add(bs, json_object_new_int(TXM_FP8_BLOCK));
        json_object_array_add(bs, json_object_new_int(TXM_FP8_BLOCK));
        json_object_object_add(q, "weight_block_size", bs);
        json_object_object_add(o, "quantization_config", q);
        q = bs = NULL;
        const char *t = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
        r = t ? strdup(t) : NULL;
    }
    json_object_put(bs);
    json_object_put(q);
    json_object_put(o);
    return r;
}

int tx_synth_write(const char *outdir, const struct tx_synth_opts *o, char *err, size_t errsz)
{
    if ((unsigned)o->preset > TX_SYNTH_BENCH || !tx_arch_get(o->arch))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "glm-synth: unknown architecture or preset (architectures: %s)",
                         tx_arch_list_model_types());
    if (o->routing == TX_SYNTH_ROUTING_SKEWED &&
        (!(o->routing_corr >= 0.0f && o->routing_corr <= 1.0f) ||
         !(o->routing_skew >= 0.0f && o->routing_skew <= 100.0f)))
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "glm-synth: routing correlation must be in [0, 1] and skew in [0, 100]");
    if (o->fp8 && o->format != TX_SYNTH_HF)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "glm-synth: --fp8 writes the Hugging Face FP8 layout (safetensors), not "
                         "ONNX");
    if (o->n_experts < 0 || o->n_experts > 4096)
        return tx_errbuf(err, errsz, TX_EINVAL, "glm-synth: %d routed experts (1..4096)",
                         o->n_experts);
    int rc;
    int vocab = o->vocab_size;
    struct tx_synth_tokenizer tk;
    memset(&tk, 0, sizeof(tk));
    if (o->tokenizer_dir) {
        char *tok = txm_path_join(o->tokenizer_dir, "tokenizer.json");
        int have = tok && txm_file_exists(tok);
        free(tok);
        if (!have)
            return tx_errbuf(err, errsz, TX_ENOENT, "%s: no tokenizer.json there",
                             o->tokenizer_dir);
        rc = tx_synth_glm_tokenizer(o->tokenizer_dir, o->arch, &tk, err, errsz);
        if (rc < 0)
            return rc;
        if (vocab == 0)
            vocab = tk.vocab_size;
        else if (vocab < tk.vocab_size) {
            rc = tx_errbuf(err, errsz, TX_EINVAL,
                           "vocab_size %d does not cover the tokenizer's %d ids", vocab,
                           tk.vocab_size);
            tx_synth_tokenizer_free(&tk);
            return rc;
        }
    }
    if (vocab <= 0) {
        tx_synth_tokenizer_free(&tk);
        return tx_errbuf(err, errsz, TX_EINVAL, "glm-synth: no tokenizer and no vocab_size");
    }
    if (mkdir(outdir, 0755) < 0 && errno != EEXIST) {
        rc = -errno;
        tx_synth_tokenizer_free(&tk);
        return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: %s", outdir, strerror(-rc));
    }
    char *cj = tk.tokenizer_json
                   ? tx_synth_config_json_ex(o->arch, o->preset, vocab, tk.eos, 3, tk.pad)
                   : tx_synth_config_json(o->arch, o->preset, vocab);
    struct glm_config cfg;
    struct glist l = {.seed = o->seed, .blocks = !o->dense_ffn, .o = o};
    unsigned char *buf = NULL;
    int threads = o->threads > 0 ? o->threads : txm_ncpus();
    char sub[TX_ERR_MAX];
    progress_last = -10;
    if (!cj) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto out;
    }
    if (o->n_experts > 0) { /* --experts: the preset with another expert count */
        struct json_object *jo = json_tokener_parse(cj);
        const char *key = jo && json_object_object_get_ex(jo, "num_experts", NULL)
                              ? "num_experts"
                              : "n_routed_experts";
        char *nj = NULL;
        if (jo) {
            json_object_object_add(jo, key, json_object_new_int(o->n_experts));
            nj = strdup(json_object_to_json_string_ext(jo, JSON_C_TO_STRING_PRETTY));
        }
        json_object_put(jo);
        if (!nj) {
            rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            goto out;
        }
        free(cj);
        cj = nj;
    }
    if (o->config_set) {
        char *nj = NULL;
        rc = tx_synth_apply_config_set(cj, o->config_set, &nj, err, errsz);
        if (rc < 0)
            goto out;
        free(cj);
        cj = nj;
    }
    if (o->fp8) {
        char *nj = fp8_config(cj);
        if (!nj) {
            rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            goto out;
        }
        free(cj);
        cj = nj;
    }
    rc = glm_config_from_json(cj, &cfg, sub, sizeof(sub));
    if (rc < 0) {
        tx_errbuf(err, errsz, rc, "glm-synth: generated config rejected: %s", sub);
        goto out;
    }
    l.E = cfg.n_routed_experts;
    rc = glm_config_tensor_list(&cfg, glist_cb, &l);
    if (rc == 0 && cfg.num_nextn_predict_layers > 0) /* Qwen3-MoE has no MTP layer */
        rc = o->mtp_layer ? txm_mtp_tensor_list(&cfg, glist_cb, &l) : add_mtp(&l, &cfg);
    buf = malloc((size_t)CHUNK_ELEMS * 4);
    if (rc < 0 || !buf) {
        rc = tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        goto out;
    }
    if (o->format == TX_SYNTH_ONNX) {
        int ext = o->onnx_external < 0 ? o->preset != TX_SYNTH_TINY : o->onnx_external;
        rc = write_onnx(outdir, o, &l, cj, ext, buf, threads, vocab, err, errsz);
    } else {
        uint64_t sb = o->shard_bytes;
        if (!sb)
            sb = o->preset == TX_SYNTH_TINY    ? 0
                 : o->preset == TX_SYNTH_SMALL ? (32ull << 20)
                                               : (512ull << 20);
        rc = write_hf(outdir, o, &l, sb, buf, threads, err, errsz);
        if (rc == 0) {
            char *cp = txm_path_join(outdir, "config.json");
            rc = cp ? txm_write_text(cp, cj, NULL, err, errsz)
                    : tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            free(cp);
        }
        if (rc == 0)
            rc = write_generation_config(outdir, &cfg, err, errsz);
    }
    if (rc == 0 && tk.tokenizer_json) {
        char *dst = txm_path_join(outdir, "tokenizer.json");
        rc = dst ? txm_write_text(dst, tk.tokenizer_json, NULL, err, errsz)
                 : tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
        free(dst);
        if (rc == 0 && tk.tokenizer_config_json) {
            dst = txm_path_join(outdir, "tokenizer_config.json");
            rc = dst ? txm_write_text(dst, tk.tokenizer_config_json, NULL, err, errsz)
                     : tx_errbuf(err, errsz, TX_ENOMEM, "out of memory");
            free(dst);
        }
    }
out:
    free(buf);
    free(l.g);
    free(cj);
    tx_synth_tokenizer_free(&tk);
    return rc;
}
