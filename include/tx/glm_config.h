/* SPDX-License-Identifier: MIT */
/*
 * GLM model configuration: config.json (as the Hugging Face checkpoints ship
 * it) to a plain, copyable C struct, validation, serialisation back to JSON,
 * and the list of tensors (real Hugging Face names and shapes) that the
 * architecture expects.
 *
 * Architectures:
 *   GLM_ARCH_GLM4_MOE     GLM-4.5 / 4.5-Air / 4.6 / 4.7   model_type "glm4_moe",
 *                         architectures ["Glm4MoeForCausalLM"]
 *   GLM_ARCH_GLM_MOE_DSA  GLM-5 / 5.1                     model_type "glm_moe_dsa",
 *                         architectures ["GlmMoeDsaForCausalLM"]
 *
 * Each architecture is one module in libtx/arch/ (docs/architectures.md);
 * the glm_arch_* helpers below list and name the registry's modules.
 *
 * Semantics of every field: docs/glm-architectures.md.
 *
 * Errors: every function returns 0 on success or a negative TX_E* code of
 * tx/tx_error.h (TX_EINVAL malformed, TX_ENOTSUP unsupported, TX_ENOENT
 * missing file or tensor, TX_EIO, TX_ENOMEM), never -errno, and, when `err`
 * is not NULL, writes a one-line message naming the offending field into
 * err[0..errsz-1] (always NUL-terminated).
 */
#ifndef TX_GLM_CONFIG_H
#define TX_GLM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <tx/tx_error.h> /* TX_API */

#ifdef __cplusplus
extern "C" {
#endif

/* Limits of config.json fields (docs/glm-architectures.md, "Limits"): far
 * above the largest real checkpoints, low enough that nothing sized by them
 * can exhaust memory or time. glm_config_validate() enforces them. */
#define GLM_MAX_LAYERS 512         /* num_hidden_layers (GLM-4.5: 92, GLM-5: 78) */
#define GLM_MAX_EOS 16             /* eos_token_id list */
#define GLM_MAX_VOCAB 1048576      /* vocab_size, token ids (largest real: 262144) */
#define GLM_MAX_HIDDEN 65536       /* hidden_size, q/kv_lora_rank (largest: 16384) */
#define GLM_MAX_FFN 262144         /* (moe_)intermediate_size (largest: 53248) */
#define GLM_MAX_NEXTN 16           /* num_nextn_predict_layers (real: 1) */
#define GLM_MAX_HEADS 1024         /* attention / KV / indexer heads (largest: 128) */
#define GLM_MAX_HEAD_DIM 4096      /* head_dim and the MLA/indexer head dims (largest: 256) */
#define GLM_MAX_POSITIONS 16777216 /* max_position_embeddings, index_topk (largest: 10M) */
#define GLM_MAX_EXPERTS 4096       /* n_routed_experts, top-k, groups (largest: 384) */
#define GLM_MAX_SHARED_EXPERTS 64  /* n_shared_experts (real: 1-2) */
#define GLM_MAX_TENSORS 262144     /* tensors of the expected list (Kimi-K2: ~70k) */
#define GLM_TENSOR_NAME_MAX 128

enum glm_arch {
    GLM_ARCH_UNKNOWN = 0,
    GLM_ARCH_GLM4_MOE = 1,    /* Glm4MoeForCausalLM */
    GLM_ARCH_GLM_MOE_DSA = 2, /* GlmMoeDsaForCausalLM */
    GLM_ARCH_QWEN3_MOE = 3,   /* Qwen3MoeForCausalLM */
    GLM_ARCH_DEEPSEEK_V3 = 4, /* DeepseekV3ForCausalLM (DeepSeek-V3/R1, Kimi-K2) */
};

enum glm_dtype {
    GLM_DTYPE_UNSPECIFIED = 0,
    GLM_DTYPE_BF16 = 1,
    GLM_DTYPE_F16 = 2,
    GLM_DTYPE_F32 = 3,
};

/* RoPE variants. Only these three are supported; anything else (dynamic,
 * longrope, llama3, ...) is refused by the parser with TX_ENOTSUP. */
enum glm_rope_type {
    GLM_ROPE_DEFAULT = 0, /* inv_freq[i] = theta^(-2i/rotary_dim) */
    GLM_ROPE_LINEAR = 1,  /* inv_freq[i] = theta^(-2i/rotary_dim) / factor */
    GLM_ROPE_YARN = 2,    /* YaRN (libtx/model/rope_scaling.h, docs/model-blocks.md) */
};

enum glm_mlp_type { GLM_MLP_DENSE = 0, GLM_MLP_SPARSE = 1 };
enum glm_indexer_type { GLM_INDEXER_FULL = 0, GLM_INDEXER_SHARED = 1 };

struct glm_config {
    enum glm_arch arch;
    char model_type[32];   /* "glm4_moe" / "glm_moe_dsa" */
    char architecture[64]; /* architectures[0] */
    enum glm_dtype dtype;  /* "dtype" or legacy "torch_dtype" */
    char quant_method[32]; /* quantization_config.quant_method, "" if none */

    /* common */
    int vocab_size;
    int hidden_size;
    int intermediate_size;     /* dense MLP */
    int moe_intermediate_size; /* one routed expert */
    int num_hidden_layers;     /* MTP layers (index >= this) are ignored */
    int num_nextn_predict_layers;
    int num_attention_heads;
    int num_key_value_heads;
    int head_dim; /* glm4_moe: attention head size ("head_dim" or hidden/heads);
                     glm_moe_dsa: as given (transformers repoints it to qk_rope_head_dim) */
    int max_position_embeddings;
    double rms_norm_eps;
    int attention_bias; /* glm4_moe: q/k/v biases; glm_moe_dsa: q_a/kv_a/o biases */
    int use_qk_norm;    /* glm4_moe only */
    int tie_word_embeddings;

    /* RoPE */
    double rope_theta;
    enum glm_rope_type rope_type;
    double rope_factor; /* linear / yarn, else 1.0 */
    /* yarn only (rope_scaling of DeepSeek-V3 / Kimi-K2); 0 = absent */
    int rope_yarn_original_max_pos;
    double rope_yarn_beta_fast, rope_yarn_beta_slow;
    double rope_yarn_mscale, rope_yarn_mscale_all_dim;
    double rope_yarn_attention_factor; /* explicit attention_factor if rope_yarn_has_af */
    int rope_yarn_has_af;
    int rope_yarn_truncate;
    double partial_rotary_factor; /* glm4_moe (default 0.5); 1.0 for glm_moe_dsa */
    int rotary_dim;               /* derived: dims that rotate per head */
    int rope_interleave;          /* 0 = NeoX (rotate_half), 1 = interleaved pairs */
    int indexer_rope_interleave;  /* glm_moe_dsa indexer */

    /* MoE */
    int n_routed_experts;
    int n_shared_experts;
    int num_experts_per_tok;
    double routed_scaling_factor;
    int n_group;
    int topk_group;
    int norm_topk_prob;
    int first_k_dense_replace;
    uint8_t mlp_layer_types[GLM_MAX_LAYERS]; /* enum glm_mlp_type per layer */

    /* MLA (glm_moe_dsa) */
    int q_lora_rank;
    int kv_lora_rank;
    int qk_nope_head_dim;
    int qk_rope_head_dim;
    int qk_head_dim; /* derived: nope + rope */
    int v_head_dim;

    /* DSA lightning indexer (glm_moe_dsa) */
    int index_topk;
    int index_head_dim;
    int index_n_heads;
    uint8_t indexer_types[GLM_MAX_LAYERS]; /* enum glm_indexer_type per layer */

    /* special tokens (-1 = none) */
    int bos_token_id;
    int pad_token_id;
    int n_eos;
    int eos_token_ids[GLM_MAX_EOS];
};

/* Parse config.json text / file. The result is validated (glm_config_validate). */
TX_API int glm_config_from_json(const char *json, struct glm_config *cfg, char *err, size_t errsz);
TX_API int glm_config_load(const char *path, struct glm_config *cfg, char *err, size_t errsz);

/* Checks dimensions, divisibility and cross-field consistency; the message
 * names the field (e.g. "num_attention_heads (96) is not a multiple of
 * num_key_value_heads (7)"). */
TX_API int glm_config_validate(const struct glm_config *cfg, char *err, size_t errsz);

/* A config.json equivalent of cfg (all fields explicit, per-layer lists
 * included); glm_config_from_json() of it gives back an identical struct.
 * Returns a malloc'd NUL-terminated string (free() it) or NULL on ENOMEM. */
TX_API char *glm_config_to_json(const struct glm_config *cfg);

/* The architecture registry (libtx/arch/, docs/architectures.md): one module
 * per architecture. */
TX_API const char *glm_arch_name(enum glm_arch arch);       /* model_type: "glm4_moe", ... */
TX_API const char *glm_arch_class_name(enum glm_arch arch); /* "Glm4MoeForCausalLM", ... */
TX_API const char *glm_arch_family(enum glm_arch arch);     /* display name: "GLM-4.5", ... */
TX_API const char *glm_arch_models(enum glm_arch arch);     /* "GLM-4.5/4.6/4.7", ... */
TX_API const char *glm_arch_short_name(enum glm_arch arch); /* "glm4", ... */
/* model_type, architectures[0] class name or short name; GLM_ARCH_UNKNOWN if
 * no module has it */
TX_API enum glm_arch glm_arch_from_name(const char *name);
TX_API int glm_arch_count(void);          /* modules in the registry */
TX_API enum glm_arch glm_arch_nth(int i); /* i in [0, glm_arch_count()) */
/* one line per module, for help texts:
 * "  Glm4MoeForCausalLM     glm4_moe     GLM-4.5/4.6/4.7\n..." */
TX_API const char *glm_arch_supported(void);

/* RoPE inverse frequencies: out[i] for i in [0, rotary_dim/2), computed in
 * double precision exactly as transformers' default/linear rope init
 * (base ** (arange(0, dim, 2) / dim), then / factor) and rounded to float. */
TX_API int glm_config_rope_inv_freq(const struct glm_config *cfg, float *out, int n);

/* Softmax scale of the main attention: head_dim^-0.5 (glm4_moe) or
 * qk_head_dim^-0.5 (glm_moe_dsa). */
TX_API double glm_config_attn_scale(const struct glm_config *cfg);

/* ---- tensors ------------------------------------------------------------ */

/* What a tensor is for; `cls` groups them like the article's precision API. */
enum glm_tensor_class {
    GLM_TC_EMBEDDING = 0, /* model.embed_tokens */
    GLM_TC_ATTENTION = 1, /* q/k/v/o, MLA projections, indexer projections */
    GLM_TC_MLP = 2,       /* dense SwiGLU MLP (first layers) and shared experts */
    GLM_TC_EXPERT = 3,    /* routed experts */
    GLM_TC_NORM = 4,      /* every RMSNorm/LayerNorm weight and bias */
    GLM_TC_OUTPUT = 5,    /* lm_head */
    GLM_TC_ROUTER = 6,    /* mlp.gate.weight, mlp.gate.e_score_correction_bias */
};

enum glm_tensor_role {
    GLM_T_EMBED = 0,
    GLM_T_FINAL_NORM,
    GLM_T_LM_HEAD,
    GLM_T_INPUT_NORM,
    GLM_T_POST_ATTN_NORM,
    /* glm4_moe attention */
    GLM_T_Q_PROJ,
    GLM_T_Q_BIAS,
    GLM_T_K_PROJ,
    GLM_T_K_BIAS,
    GLM_T_V_PROJ,
    GLM_T_V_BIAS,
    GLM_T_Q_NORM,
    GLM_T_K_NORM,
    GLM_T_O_PROJ,
    GLM_T_O_BIAS, /* glm_moe_dsa with attention_bias only */
    /* glm_moe_dsa MLA */
    GLM_T_Q_A_PROJ,
    GLM_T_Q_A_BIAS,
    GLM_T_Q_A_NORM,
    GLM_T_Q_B_PROJ,
    GLM_T_KV_A_PROJ,
    GLM_T_KV_A_BIAS,
    GLM_T_KV_A_NORM,
    GLM_T_KV_B_PROJ,
    /* glm_moe_dsa indexer */
    GLM_T_IDX_WQ_B,
    GLM_T_IDX_WK,
    GLM_T_IDX_K_NORM,
    GLM_T_IDX_K_NORM_BIAS,
    GLM_T_IDX_WEIGHTS_PROJ,
    /* feed-forward */
    GLM_T_MLP_GATE,
    GLM_T_MLP_UP,
    GLM_T_MLP_DOWN,
    GLM_T_ROUTER,
    GLM_T_ROUTER_BIAS,
    GLM_T_EXP_GATE,
    GLM_T_EXP_UP,
    GLM_T_EXP_DOWN,
    GLM_T_SHEXP_GATE,
    GLM_T_SHEXP_UP,
    GLM_T_SHEXP_DOWN,
    /* the MTP (NextN) layer model.layers.{num_hidden_layers} (libtx 2.8):
     * besides a full decoder layer (the roles above at that layer index) */
    GLM_T_MTP_EH_PROJ,   /* eh_proj: [hidden, 2 x hidden] */
    GLM_T_MTP_ENORM,     /* enorm: RMSNorm of the next token's embedding */
    GLM_T_MTP_HNORM,     /* hnorm: RMSNorm of the main model's hidden state */
    GLM_T_MTP_HEAD_NORM, /* shared_head.norm */
    GLM_T_MTP_HEAD,      /* shared_head.head (optional: lm_head otherwise) */
    GLM_T_MTP_EMBED,     /* embed_tokens (optional: the model's otherwise) */
    GLM_T_ROLE_COUNT
};

struct glm_tensor_info {
    char name[GLM_TENSOR_NAME_MAX]; /* real HF checkpoint name */
    int ndim;                       /* 1 or 2 */
    int64_t shape[2];               /* PyTorch order: Linear weight = [out, in] */
    enum glm_tensor_role role;
    enum glm_tensor_class cls;
    int layer;  /* -1 for model-level tensors */
    int expert; /* routed expert index, else -1 */
    /* dtype the real checkpoints use for it when the model dtype is 16-bit:
     * e_score_correction_bias is float32 in GLM checkpoints, all others the
     * model dtype. Loaders accept BF16/F16/F32 for any tensor. */
    int keep_fp32;
};

/* Calls cb for every tensor the model has (embedding, layers 0..L-1 in
 * order, final norm, lm_head unless tied). Stops and returns cb's value if it
 * is non-zero; returns 0 after the last tensor. */
typedef int (*glm_tensor_cb)(void *ctx, const struct glm_tensor_info *t);
TX_API int glm_config_tensor_list(const struct glm_config *cfg, glm_tensor_cb cb, void *ctx);

/* Number of tensors glm_config_tensor_list() yields. */
TX_API int64_t glm_config_tensor_count(const struct glm_config *cfg);

/* Looks a checkpoint tensor name up (O(1) in the number of tensors):
 *   0        expected tensor, *out filled
 *   1        an MTP-layer tensor (model.layers.N.* with num_hidden_layers <= N <
 *            num_hidden_layers + num_nextn_predict_layers): not part of the
 *            main model (out->layer = N); since libtx 2.8 *out is filled
 *            in full (role, shape, class) when the name is one of the MTP
 *            layer's catalogue (GLM_T_MTP_* or a decoder-layer role),
 *            else out->role is GLM_T_ROLE_COUNT; a layer index beyond
 *            that is TX_ENOENT
 *   TX_ENOENT  not a tensor of this architecture/config (message in err) */
TX_API int glm_config_tensor_lookup(const struct glm_config *cfg, const char *name,
                                    struct glm_tensor_info *out, char *err, size_t errsz);

/* Builds the name of one tensor (role, layer, expert) into out; returns 0,
 * or TX_ENOENT if that tensor does not exist for this config/layer. */
TX_API int glm_config_tensor_info(const struct glm_config *cfg, enum glm_tensor_role role,
                                  int layer, int expert, struct glm_tensor_info *out);

TX_API const char *glm_tensor_class_name(enum glm_tensor_class cls);

#ifdef __cplusplus
}
#endif
#endif
