/* SPDX-License-Identifier: MIT */
/*
 * Architecture modules (private to libtx): everything that differs between
 * model architectures sits behind one ops table, one module per
 * architecture (libtx/arch/<model_type>.c), listed in libtx/arch/registry.c.
 * Nothing outside libtx/arch branches on the architecture: the config
 * parser, the tensor catalogue, the runtime graph, the KV cache, the FP32
 * reference, glm-export and --validate ask the module. What only the
 * tools ask (glm-analyze's cost figures, glm-synth's config.json and chat
 * template) is the tools' side of the module, tools/lib/arch_tools_*.c
 * (tools/include/common/arch_tools.h). How to add one:
 * docs/architectures.md.
 */
#ifndef TX_ARCH_H
#define TX_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include <tx/glm_config.h>

struct json_object;
struct gctx;    /* runtime graph context of one pass (runtime/blocks.h) */
/* The reference's attention blocks an architecture picks from */
enum tx_ref_attention {
    TX_REF_ATTN_GQA = 0, /* Glm4MoeAttention / Qwen3MoeAttention */
    TX_REF_ATTN_MLA,     /* DeepseekV3Attention: every causal key */
    TX_REF_ATTN_MLA_DSA, /* GlmMoeDsaAttention: MLA over the DSA indexer's keys */
};
struct act_layout;
struct rt_fwd; /* one pass: its segments (runtime/rt_internal.h) */

/* Per-token elements of one layer's caches (K, V in the KV cache dtype;
 * v may be 0 when V is read from the K rows, as MLA's latent cache does;
 * ik: a key cache of a key selector such as the DSA indexer, 0 if the
 * layer has none). ref_k, ref_v: the per-token K/V widths of the FP32
 * reference's cache (the expanded form: transformers' key_states /
 * value_states), equal to k, v for GQA. */
struct tx_arch_kv {
    uint64_t k, v, ik;
    uint64_t ref_k, ref_v;
    /* every K/V operand's element counts are multiples of run (head_dim;
     * MLA: gcd of kv_lora_rank and qk_rope_head_dim): a cache block type
     * (32 elements) needs run % 32 == 0 */
    uint64_t run;
};

/* tx_arch_ops.router: how a MoE layer scores its experts (blk_ffn, the
 * reference MoE) */
enum tx_arch_router {
    TX_ROUTER_SIGMOID = 0, /* DeepSeek-V3 family: sigmoid + correction bias, groups */
    TX_ROUTER_SOFTMAX = 1, /* Qwen3-MoE: softmax, top-k, optional renormalisation */
};

/* tx_arch_ops.layer_tensor: "use the common shape" */
#define TX_ARCH_COMMON 1

struct tx_arch_ops {
    /* ---- identity ---- */
    enum glm_arch id;
    const char *model_type;     /* config.json model_type: "glm4_moe" */
    const char *class_name;     /* architectures[0]: "Glm4MoeForCausalLM" */
    const char *family;         /* display name when the package names none: "GLM-4.5" */
    const char *models;         /* help text: "GLM-4.5/4.6/4.7" */
    const char *const *aliases; /* short names (glm-synth --arch), NULL-terminated */
    const char *attn_short;     /* glm-analyze JSON "attention": "GQA" */
    const char *attn_long;      /* glm-analyze text: "GQA attention" */

    /* ---- config.json (tx-internal/tx_config_json.h helpers) ---- */
    /* the transformers configuration class's defaults (c is zeroed and the
     * common defaults are set) */
    void (*defaults)(struct glm_config *c);
    /* the MoE fields (router family), after the common ones:
     * tx_cfg_parse_moe_sigmoid or the module's own */
    int (*parse_moe)(struct json_object *root, struct glm_config *c, char *err, size_t errsz);
    /* the architecture's own fields, after the MoE ones */
    int (*parse)(struct json_object *root, struct glm_config *c, char *err, size_t errsz);
    /* mlp_layer_types (dense / MoE per layer), after the layer count is
     * checked: tx_cfg_parse_mlp_layers or the module's own */
    int (*parse_mlp_layers)(struct json_object *root, struct glm_config *c, char *err,
                            size_t errsz);
    /* per-layer lists and derived fields, after mlp_layer_types */
    int (*parse_layers)(struct json_object *root, struct glm_config *c, char *err, size_t errsz);
    /* validation of the architecture's fields (after the common checks) */
    int (*validate)(const struct glm_config *c, char *err, size_t errsz);
    /* the architecture's fields into a config.json object; returns non-zero
     * on an allocation failure */
    int (*to_json)(const struct glm_config *c, struct json_object *o);
    double (*attn_scale)(const struct glm_config *c);

    /* ---- tensor catalogue ---- */
    /* Shape of the tensor (role, layer, expert) of a decoder layer, asked
     * before the common rule: 0 (t->ndim/shape set), TX_ENOENT if this
     * architecture/config/layer has none, TX_ARCH_COMMON for the common
     * shape (norms, dense MLP, router, experts, shared experts: see
     * libtx/model/tensors.c; an attention role is absent there). Names,
     * roles and classes come from the common role table. */
    int (*layer_tensor)(const struct glm_config *c, enum glm_tensor_role role, int layer,
                        int expert, struct glm_tensor_info *t);
    /* ", indexer full" etc. for messages about a layer ("" if nothing) */
    const char *(*layer_note)(const struct glm_config *c, int layer);
    /* 1 if layer l selects keys (top-k) itself: --validate compares the selection */
    int (*layer_selects)(const struct glm_config *c, int l);
    /* model-load check across layers (message prefixed by path); may be NULL */
    int (*load_check)(const struct glm_config *c, const char *path, char *err, size_t errsz);

    /* ---- runtime (libtx/runtime/blocks.h) ---- */
    /* KV cache geometry of layer l */
    void (*kv_geometry)(const struct glm_config *c, int l, struct tx_arch_kv *kv);
    /* activation buffers of the attention block for t rows (take() them
     * from *off); returns the widest row that a norm output rounded through
     * 16 bits has (for the r16 scratch) */
    int (*act_layout)(const struct glm_config *c, uint64_t t, struct act_layout *a, uint64_t *off);
    /* MLA: the keys of the pass's longest segment if its attention runs
     * in the expanded form, 0 for the absorbed form (NULL: never); form:
     * the model's TX_MLA_FORM (-1 absorbed, 1 expanded, 0 choose) */
    uint64_t (*expand_keys)(const struct glm_config *c, const struct rt_fwd *f, int form);
    /* keys a query of a selecting layer keeps at most (0: the architecture
     * never selects keys): sizes the selection dump and buffers */
    int (*select_k)(const struct glm_config *c);
    /* the commands of one decoder layer (shared blocks, runtime/blocks.c) */
    void (*layer)(struct gctx *g, int l);
    /* enum tx_arch_router of the MoE layers (0: sigmoid) */
    int router;

    /* ---- host reference (libtx/reference/ref_blocks.h) ---- */
    /* the attention of its decoder layer (enum tx_ref_attention): data,
     * not a function, as the reference is built in FP32 and float64 */
    int ref_attention;

    /* ---- chat ---- */
    int chat_format; /* enum tx_chat_format when the package has no template */
    /* glm-analyze's cost figures, the chat template and the config.json of
     * glm-synth are the tools' (tools/include/common/arch_tools.h) */
};

static inline void tx_shape1(struct glm_tensor_info *t, int64_t a)
{
    t->ndim = 1;
    t->shape[0] = a;
    t->shape[1] = 0;
}

static inline void tx_shape2(struct glm_tensor_info *t, int64_t out, int64_t in)
{
    t->ndim = 2;
    t->shape[0] = out;
    t->shape[1] = in;
}

/* ---- shared config parts (libtx/model/glm_config.c) ---- */
/* DeepSeek-V3 family MoE fields (sigmoid router, noaux_tc, groups, shared
 * experts, first_k_dense_replace) */
int tx_cfg_parse_moe_sigmoid(struct json_object *root, struct glm_config *c, char *err,
                             size_t errsz);
/* mlp_layer_types, else first_k_dense_replace dense layers then MoE */
int tx_cfg_parse_mlp_layers(struct json_object *root, struct glm_config *c, char *err,
                            size_t errsz);

/* RoPE scaling of the config (libtx/model/rope_scaling.h): the cos/sin
 * multiplier (YaRN attention_factor; 1 otherwise) and the softmax-scale
 * multiplier of DeepseekV3Attention (get_mscale(factor, mscale_all_dim)^2;
 * 1 otherwise) */
double tx_cfg_rope_attn_factor(const struct glm_config *c);
double tx_cfg_rope_softmax_mult(const struct glm_config *c);

/* ---- registry (libtx/arch/registry.c) ---- */
int tx_arch_count(void);
const struct tx_arch_ops *tx_arch_at(int i);
/* NULL for GLM_ARCH_UNKNOWN or an unknown value */
const struct tx_arch_ops *tx_arch_get(enum glm_arch id);
const struct tx_arch_ops *tx_arch_by_model_type(const char *model_type);
const struct tx_arch_ops *tx_arch_by_class(const char *class_name);
/* model_type, class name or alias */
const struct tx_arch_ops *tx_arch_by_name(const char *name);
/* "glm4_moe, glm_moe_dsa" / "Glm4MoeForCausalLM, GlmMoeDsaForCausalLM" */
const char *tx_arch_list_model_types(void);
const char *tx_arch_list_classes(void);

/* the modules */
extern const struct tx_arch_ops tx_arch_glm4_moe;
extern const struct tx_arch_ops tx_arch_glm_moe_dsa;
extern const struct tx_arch_ops tx_arch_qwen3_moe;
extern const struct tx_arch_ops tx_arch_deepseek_v3;

#endif
