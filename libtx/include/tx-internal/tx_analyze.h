/* SPDX-License-Identifier: MIT */
/*
 * Architecture analysis (the library behind glm-analyze): parameter counts
 * per module kind, active parameters per token, per-layer FLOPs and bytes
 * for prefill and decode, memory at each precision, whether the model fits
 * a device, and the article's recommended precision/parallel plan.
 *
 * Counting rules (docs/tools-export.md has the full list):
 *   - parameters: every tensor of glm_config_tensor_list() (MTP layers
 *     excluded), grouped by module kind;
 *   - active per token: all parameters except the routed experts, plus
 *     num_experts_per_tok / n_routed_experts of them;
 *   - FLOPs = 2 x multiply-accumulates of the weight matrices and of the
 *     attention (QK^T and PV over the visible keys; glm_moe_dsa: at most
 *     index_topk keys per query, plus the indexer's scores over every
 *     causal key); prefill computes logits for the last position only;
 *     decode is one token with seq_len tokens already cached;
 *   - bytes: weight bytes read under the golden plan (prefill: every expert
 *     the seq_len tokens are expected to touch; decode: the top-k experts)
 *     plus KV-cache bytes read and written (FP16 cache).
 */
#ifndef TX_ANALYZE_H
#define TX_ANALYZE_H

#include <tx/glm_config.h>
#include <tx-internal/tx_checkpoint.h>
#include <tx-internal/tx_model.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tx_module_kind {
    TX_MOD_EMBEDDING = 0,
    TX_MOD_ATTENTION,      /* projections, biases, DSA indexer projections */
    TX_MOD_DENSE_MLP,      /* SwiGLU MLP of the first_k_dense_replace layers */
    TX_MOD_ROUTED_EXPERTS, /* mlp.experts.* */
    TX_MOD_SHARED_EXPERTS, /* mlp.shared_experts.* */
    TX_MOD_ROUTER,         /* mlp.gate.weight and e_score_correction_bias */
    TX_MOD_NORMS,          /* every RMSNorm/LayerNorm weight and bias */
    TX_MOD_OUTPUT,         /* lm_head */
    TX_MOD_COUNT
};

TX_API const char *tx_module_kind_name(enum tx_module_kind k); /* "embedding", ... */

struct tx_layer_cost {
    int layer;
    int moe; /* 1: MoE feed-forward */
    double prefill_flops, decode_flops;
    double prefill_bytes, decode_bytes;
    double attn_prefill_flops, attn_decode_flops; /* of which attention */
    double ffn_prefill_flops, ffn_decode_flops;   /* of which feed-forward */
};

struct tx_analysis {
    enum glm_arch arch;
    uint64_t params[TX_MOD_COUNT];
    uint64_t total_params;
    uint64_t active_params; /* per token */
    /* storage bytes of all weights */
    uint64_t bytes_fp32, bytes_fp16, bytes_bf16, bytes_int8, bytes_golden;
    /* KV cache per token (all layers, F16 cache): as the runtime caches it
     * (MLA: the absorbed latent, once per position; a DSA indexer's q8_0
     * keys), MLA's compressed latent, and the expanded per-head K/V that
     * the runtime cached before issue 11 (for the ratio) */
    uint64_t kv_bytes_per_token, kv_latent_bytes_per_token, kv_expanded_bytes_per_token;
    /* per cache type (enum tx_kv_type): bytes per token, per token and
     * layer, the longest context the device fits beside the golden
     * weights (batch 1; 0: the type does not apply: the cache rows are
     * not a multiple of 32 elements) */
    uint64_t kv_type_bytes_per_token[5];
    double kv_type_bytes_per_token_layer[5];
    uint64_t kv_type_max_ctx[5];
    int seq_len, ctx_len;
    uint64_t device_memory;
    int nlayers;
    struct tx_layer_cost *layers;       /* nlayers entries, malloc'd */
    double prefill_flops, decode_flops; /* whole model incl. lm_head */
    double prefill_bytes, decode_bytes;
    int expert_parallel; /* n_routed_experts / 2 (article) */
};

/* glm-analyze's cache types (glm_cache_type's f32 .. q4_0) */
enum tx_kv_type { TX_KV_F32, TX_KV_F16, TX_KV_BF16, TX_KV_Q8_0, TX_KV_Q4_0, TX_KV_TYPE_COUNT };

/* Computes the analysis of a config. seq_len: prefill length and decode
 * context; ctx_len: KV cache length for the memory figures. Free with
 * tx_analysis_free. */
TX_API int tx_analyze_config(const struct glm_config *cfg, int seq_len, int ctx_len,
                             uint64_t device_memory, struct tx_analysis *a, char *err,
                             size_t errsz);
TX_API void tx_analysis_free(struct tx_analysis *a);

/* The glm-analyze report (JSON text, malloc'd) and the human summary. */
TX_API char *tx_analysis_json(const struct tx_analysis *a, const struct glm_config *cfg,
                              const char *model_path, const char *source_format);
TX_API char *tx_analysis_summary(const struct tx_analysis *a, const struct glm_config *cfg);

/* Loads the config of a model given as an HF directory, an .onnx file, an
 * .smd package or a bare config.json; *format receives "hf", "onnx",
 * "smd" or "config". Tensors of HF/ONNX inputs are validated too. */
TX_API int tx_analyze_load_config(const char *path, struct glm_config *cfg, const char **format,
                                  char *err, size_t errsz);

/* The same, and (storage not NULL) what an HF/ONNX checkpoint's tensors
 * are stored as (zeroed for an .smd or a config): returns 1 for a
 * checkpoint, 0 for the others, < 0 on error. */
TX_API int tx_analyze_load_config_storage(const char *path, struct glm_config *cfg,
                                          const char **format, struct tx_ckpt_storage *storage,
                                          char *err, size_t errsz);
/* The "stored" object of glm-analyze's report (quantization, bytes, by
 * dtype, FP8 scale tensors and bytes) and its summary line; malloc'd. */
TX_API char *tx_storage_json(const struct tx_ckpt_storage *s);
TX_API char *tx_storage_summary(const struct tx_ckpt_storage *s);

/* "512", "4K", "256M", "8G", "1T" (binary units) -> bytes; -1 on error. */
TX_API int64_t tx_parse_size(const char *s);

#ifdef __cplusplus
}
#endif
#endif
