// SPDX-License-Identifier: MIT
/*
 * Writes the seed package of fuzz_smd_load (tests/fuzz/corpus/smd_load/):
 * a GLM-4.5-architecture checkpoint with the smallest dimensions the
 * exporter takes (hidden 32, 2 layers, 4 experts of 16, vocabulary 32),
 * random BF16 weights and a two-token tokenizer, exported with the default
 * precision plan -- a few tens of KiB, under libFuzzer's -max_len. glm-synth's
 * tiny preset is ~860 KB as a package, too big to mutate quickly.
 *
 *   cc ... tests/fuzz/smd_load_seed.c build/lib/libtx.a ... (see tests/fuzz/README.md)
 *   smd_load_seed TMPDIR OUT.smd [dense]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/glm_config.h>
#include <tx-internal/tx_export.h>

static const char TOK[] = "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\", \"vocab\": "
                          "{\"a\": 0, \"b\": 1}, \"merges\": []}, \"added_tokens\": []}";

static const char CONFIG[] =
    "{\"architectures\": [\"Glm4MoeForCausalLM\"], \"model_type\": \"glm4_moe\", "
    "\"attention_bias\": true, \"head_dim\": 16, \"hidden_size\": 32, "
    "\"partial_rotary_factor\": 0.5, \"intermediate_size\": 32, "
    "\"max_position_embeddings\": 256, \"moe_intermediate_size\": 16, \"norm_topk_prob\": true, "
    "\"num_attention_heads\": 2, \"n_group\": 1, \"topk_group\": 1, \"n_routed_experts\": 4, "
    "\"n_shared_experts\": 1, \"routed_scaling_factor\": 2.5, \"num_experts_per_tok\": 2, "
    "\"first_k_dense_replace\": 1, \"num_hidden_layers\": 2, \"num_key_value_heads\": 1, "
    "\"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"num_nextn_predict_layers\": 0, "
    "\"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"use_qk_norm\": true, "
    "\"vocab_size\": 32, \"eos_token_id\": [1], \"pad_token_id\": 0}\n";

/* one dense layer, no biases or qk norm: the fewest tensors (each extent
 * of a package is 4 KiB-aligned), ~50 KiB */
static const char CONFIG_DENSE[] =
    "{\"architectures\": [\"Glm4MoeForCausalLM\"], \"model_type\": \"glm4_moe\", "
    "\"attention_bias\": false, \"head_dim\": 16, \"hidden_size\": 32, "
    "\"partial_rotary_factor\": 0.5, \"intermediate_size\": 32, "
    "\"max_position_embeddings\": 256, \"num_attention_heads\": 2, \"n_routed_experts\": 4, "
    "\"moe_intermediate_size\": 16, \"n_shared_experts\": 1, \"num_experts_per_tok\": 2, "
    "\"n_group\": 1, \"topk_group\": 1, \"norm_topk_prob\": true, \"routed_scaling_factor\": 1.0, "
    "\"first_k_dense_replace\": 1, \"num_hidden_layers\": 1, \"num_key_value_heads\": 1, "
    "\"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"num_nextn_predict_layers\": 0, "
    "\"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"use_qk_norm\": false, "
    "\"vocab_size\": 32, \"eos_token_id\": [1], \"pad_token_id\": 0}\n";

struct list {
    char *hdr;
    size_t hlen, cap;
    uint64_t off;
};

static int add_cb(void *ctx, const struct glm_tensor_info *t)
{
    struct list *l = ctx;
    uint64_t n = (uint64_t)t->shape[0] * (t->ndim == 2 ? (uint64_t)t->shape[1] : 1);
    char e[512];
    int k = snprintf(e, sizeof(e), "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld%s%lld],"
                     "\"data_offsets\":[%llu,%llu]}",
                     l->hlen > 1 ? "," : "", t->name, (long long)t->shape[0],
                     t->ndim == 2 ? "," : "", t->ndim == 2 ? (long long)t->shape[1] : 0LL,
                     (unsigned long long)l->off, (unsigned long long)(l->off + 2 * n));
    if (t->ndim != 2) /* "[N0]" without a second dimension */
        k = snprintf(e, sizeof(e), "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[%lld],"
                     "\"data_offsets\":[%llu,%llu]}",
                     l->hlen > 1 ? "," : "", t->name, (long long)t->shape[0],
                     (unsigned long long)l->off, (unsigned long long)(l->off + 2 * n));
    if (l->hlen + (size_t)k + 2 > l->cap) {
        l->cap = 2 * (l->cap + (size_t)k);
        l->hdr = realloc(l->hdr, l->cap);
        if (!l->hdr)
            return -1;
    }
    memcpy(l->hdr + l->hlen, e, (size_t)k);
    l->hlen += (size_t)k;
    l->off += 2 * n;
    return 0;
}

static int put(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "%s: cannot write\n", path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: smd_load_seed TMPDIR OUT.smd [dense]\n");
        return 2;
    }
    const char *config = argc == 4 && !strcmp(argv[3], "dense") ? CONFIG_DENSE : CONFIG;
    char err[512];
    struct glm_config c;
    if (glm_config_from_json(config, &c, err, sizeof(err)) < 0) {
        fprintf(stderr, "config: %s\n", err);
        return 1;
    }
    struct list l = {malloc(256), 1, 256, 0};
    l.hdr[0] = '{';
    if (glm_config_tensor_list(&c, add_cb, &l) < 0)
        return 1;
    l.hdr[l.hlen++] = '}';
    while ((l.hlen + 8) % 8)
        l.hdr[l.hlen++] = ' ';
    size_t total = 8 + l.hlen + l.off;
    uint8_t *st = malloc(total);
    uint64_t hl = l.hlen;
    memcpy(st, &hl, 8);
    memcpy(st + 8, l.hdr, l.hlen);
    uint32_t s = 12345;
    for (uint64_t i = 0; i < l.off / 2; i++) { /* BF16 in [-0.125, 0.125) */
        s = s * 1103515245u + 12345u;
        float f = ((float)(s >> 9) / 8388608.0f - 0.5f) * 0.25f;
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t b = (uint16_t)(u >> 16);
        memcpy(st + 8 + l.hlen + 2 * i, &b, 2);
    }
    if (put(argv[1], "config.json", config, strlen(config)) ||
        put(argv[1], "tokenizer.json", TOK, strlen(TOK)) ||
        put(argv[1], "model.safetensors", st, total))
        return 1;
    free(st);
    free(l.hdr);
    struct tx_export_opts eo;
    tx_export_default_opts(&eo);
    if (tx_export(argv[1], argv[2], &eo, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "export: %s\n", err);
        return 1;
    }
    return 0;
}
