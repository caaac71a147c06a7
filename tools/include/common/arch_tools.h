/* SPDX-License-Identifier: MIT */
/*
 * The tools' side of an architecture module: what only glm-analyze and
 * glm-synth ask of a model family, kept out of libtx (its side is
 * <tx-internal/tx_arch.h>, libtx/arch/<model_type>.c). One file per
 * family, tools/lib/arch_tools_<model_type>.c, listed in
 * tools/lib/arch_tools.c. How to add one: docs/architectures.md.
 */
#ifndef TX_TOOLS_ARCH_TOOLS_H
#define TX_TOOLS_ARCH_TOOLS_H

#include <stdint.h>

#include <tx/glm_config.h>
#include <tx-internal/tx_synth.h>

struct json_object;

/* Per-token cost figures of attention for glm-analyze (bytes / MACs). */
struct tx_arch_cost {
    double kv_layer;      /* KV cache bytes per token and layer (F16 K/V, as cached) */
    double kv_latent;     /* the same for the compressed latent only (MLA) */
    double kv_expanded;   /* the same for the expanded per-head K/V (MLA before issue 11) */
    double kv_elems;      /* K/V cache elements per token and layer (cache-type scaled) */
    double ik_elems;      /* key-selector cache elements per token and layer */
    double pair_macs;     /* MACs of one (query, key) pair over all heads */
    double sel_pair_macs; /* MACs of one (query, key) pair of the key selector */
    int select_k;         /* keys a query attends at most (0: all) */
    int kv_run;           /* element runs of the K/V rows (tx_arch_kv.run) */
};

struct tx_arch_tools {
    enum glm_arch id;
    /* ---- glm-analyze ---- */
    void (*cost)(const struct glm_config *c, struct tx_arch_cost *out);
    /* the attention's own dimensions into the JSON report's arch object */
    void (*analyze_json)(const struct glm_config *c, struct json_object *ar);
    /* ---- glm-synth ---- */
    const char *chat_template; /* the Jinja template a synthetic checkpoint ships */
    /* config.json object of a synthetic checkpoint (the real field set) */
    struct json_object *(*synth_config)(enum tx_synth_preset p, int vocab_size, const int32_t *eos,
                                        int n_eos, int32_t pad);
};

/* The tools' side of architecture id, NULL for an unknown one */
const struct tx_arch_tools *tx_arch_tools_get(enum glm_arch id);

/* Shared by the families (arch_tools.c): GQA's and MLA's cost figures and
 * the attention fields of glm-analyze's JSON */
void tx_gqa_cost(const struct glm_config *c, struct tx_arch_cost *o);
/* head_dim, rotary_dim, use_qk_norm, attention_bias */
void tx_gqa_analyze_json(const struct glm_config *c, struct json_object *ar);
/* the MLA part of tx_arch_cost (kv_layer, kv_latent, pair_macs) */
void tx_mla_cost(const struct glm_config *c, struct tx_arch_cost *o);
/* q_lora_rank .. v_head_dim */
void tx_mla_analyze_json(const struct glm_config *c, struct json_object *ar);

/* The synthetic GLM-5 chat template (arch_tools_glm_moe_dsa.c), shipped by
 * every synthetic checkpoint that carries GLM's special tokens */
extern const char tx_arch_glm5_synth_template[];

extern const struct tx_arch_tools tx_arch_tools_glm4_moe;
extern const struct tx_arch_tools tx_arch_tools_glm_moe_dsa;
extern const struct tx_arch_tools tx_arch_tools_qwen3_moe;
extern const struct tx_arch_tools tx_arch_tools_deepseek_v3;

#endif
