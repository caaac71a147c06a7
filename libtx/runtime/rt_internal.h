/* SPDX-License-Identifier: MIT */
/*
 * libtx GLM runtime, internal: models on a device, weights in their
 * execution precisions, sessions, the forward-pass graph.
 *
 * Device memory of a model (every BO is labelled with the model's name so
 * /proc/tx_meminfo and the emulator's memory view can attribute it):
 *   <name>_Weights      the package's tensor extents, as stored (one BO)
 *   <name>_Weights      "meta": f32 vectors (norm weights, biases), RoPE
 *                       frequencies, MoE expert tables, expert counters
 *   <name>_Weights      one BO per (layer type, precision) that needs
 *                       converted copies of the stored tensors
 *   <name>_Activations  the activations of one forward pass (model-wide,
 *                       passes are serialised)
 *   <name>_KVCache      one BO per session
 */
#ifndef TX_RT_INTERNAL_H
#define TX_RT_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <liburing.h>

#include <tx/glm.h>
#include <tx-internal/glm_reference.h>
#include <tx-internal/tx_smd.h>
#include <tx/tx_telemetry.h>

#include <tx-internal/tx_errors.h>
#include "model/precision_plan.h"

/* Layer types: the six public ones and the router (always FP32). */
#define RT_ROUTER GLM_LAYER_TYPE_COUNT
#define RT_NLTYPES PLAN_NLTYPES

#define RT_NONE (-1)

/* A copy of a matrix in one execution precision. */
struct rt_copy {
    tx_bo_t *bo;           /* NULL: not present */
    uint64_t data, scales; /* offsets in bo */
    uint16_t dtype;
    uint32_t group;
};

/* One tensor of the package, resident in the weights BO. */
struct rt_tensor {
    const struct tx_smd_tensor *smd;
    struct glm_tensor_info info;
    uint64_t off; /* extent offset in the weights BO, or in its layer's slot */
    int ltype;    /* precision class (enum glm_layer_type or RT_ROUTER) */
    int streamed; /* a layer matrix streamed through the slots */
};

/* A matrix as the graph uses it (a tensor in a precision class; a tied
 * lm_head is the embedding tensor in class OUTPUT). */
struct rt_mat {
    int t;     /* tensor index */
    int ltype; /* precision class */
    uint32_t rows, cols;
    struct rt_copy copy[GLM_PRECISION_COUNT];
};

/* An f32 vector in the meta BO. */
struct rt_vec {
    int t;
    uint64_t off;
    uint32_t n;
};

struct rt_conv_bo {
    tx_bo_t *bo;
    void *map;
    uint64_t size;
};

/*
 * Parameter shard streaming (model larger than device memory): the decoder
 * layers' matrices live in the package and pass through RT_SLOTS device
 * buffers ("slots", one layer each): while the device runs layer l from one
 * slot, io_uring reads layer l + 1 into the other (prefetch). Converted
 * copies of a streamed layer are made into the slot's conversion buffer by
 * CONVERT commands at the start of the layer's job.
 */
#define RT_SLOTS 2
struct rt_stream {
    int on;
    uint64_t slot_size; /* largest layer's extents */
    tx_bo_t *slot_bo[RT_SLOTS];
    void *slot_map[RT_SLOTS];
    int slot_layer[RT_SLOTS]; /* layer held or being read, -1 */
    int inflight[RT_SLOTS];   /* reads outstanding */
    int slot_err[RT_SLOTS];
    uint64_t slot_job[RT_SLOTS]; /* last job reading the slot (0: none) */
    tx_bo_t *cslot_bo[RT_SLOTS]; /* converted copies of the slot's layer */
    void *cslot_map[RT_SLOTS];
    uint64_t cslot_size;
    tx_bo_t *scratch_bo; /* f32 scratch of the conversions */
    uint64_t scratch_size;
    glm_precision_plan_t conv_plan;
    int conv_valid;
    struct rt_copy *conv;  /* [n_mats] copy in the cslot under conv_plan */
    uint64_t *layer_bytes; /* [L] */
    struct io_uring *ring;
    int fd;
    uint64_t hits, misses, bytes_read;
    uint64_t table_off;     /* tx8_weight [RT_SLOTS][E][3] in meta */
    int *lt_idx, *lt_start; /* layer l's tensors: lt_idx[lt_start[l] .. lt_start[l+1]) */
};

struct rt_xcache;
struct rt_store_ops;

struct glm_model {
    tx_device_t *dev;
    /* TX_SUBMIT_* of every job (TX_SUBMIT_BATCH_INVARIANT with
     * GLM_LOAD_BATCH_INVARIANT / TX_BATCH_INVARIANT=1) */
    uint32_t submit_flags;
    /* ATTENTION's products in BF16 (TX8_ATTN_F_BF16) for the BF16 and
     * INT8_MIXED attention precisions: a device of interface >= 1.7 and
     * not TX_ATTENTION_BF16=0 */
    int attn_bf16;
    /* DSA_INDEX over a Q8_0 indexer key cache with 8-bit products
     * (TX8_DSA_F_QUERY_Q8, interface >= 1.9; TX_DSA_QUERY_Q8=0: f32) */
    int dsa_q8;
    /* MLA attention form of a pass (TX_MLA_FORM at load): -1 absorbed,
     * 1 expanded, 0 chosen per pass (tx_mla_expand_keys) */
    int mla_form;
    struct tx_device_info dinfo;
    char name[24];
    char label_w[TX8_LABEL_LEN], label_kv[TX8_LABEL_LEN], label_act[TX8_LABEL_LEN];
    struct glm_config cfg;
    struct tx_smd *smd;
    struct tx_tokenizer *tok;
    int chat_format_override; /* glm_model_set_chat_format; 0 = from the package */
    int has_gen;              /* the package has a generation_config */
    struct glm_generation_config gen;
    glm_precision_plan_t stored_plan;
    uint32_t plan_group[RT_NLTYPES];

    int n_tensors;
    struct rt_tensor *tensors;
    int n_mats, cap_mats;
    struct rt_mat *mats;
    int n_vecs, cap_vecs;
    struct rt_vec *vecs;
    int n_role_slots; /* GLM_T_ROLE_COUNT * (L + 2): layers -1 .. L (L: the MTP layer) */
    int *role_mat;    /* [role][layer + 1] -> mat, or RT_NONE */
    int *role_vec;    /* [role][layer + 1] -> vec, or RT_NONE */
    int *exp_mat;     /* [layer][expert][3] -> mat (gate, up, down), layers 0 .. L */
    /* the MTP (NextN) layer is loaded as layer L = num_hidden_layers
     * (GLM_LOAD_MTP and a package that has it; runtime/mtp.c) */
    int mtp;
    int n_moe_layers;
    int *moe_index; /* [layer] -> MoE layer index or -1 */
    int *moe_layer; /* [n_moe] -> layer */

    /* device memory */
    tx_bo_t *w_bo;
    void *w_map;
    uint64_t w_size;
    tx_bo_t *meta_bo;
    void *meta_map;
    uint64_t meta_size;
    uint64_t inv_freq_off; /* f32 [rotary_dim / 2] */
    int n_inv_freq;
    uint64_t table_off;  /* tx8_weight [n_moe][E][3] */
    uint64_t counts_off; /* u64 [n_moe][E] */
    struct rt_conv_bo conv[RT_NLTYPES][GLM_PRECISION_COUNT];
    tx_bo_t *act_bo;
    void *act_map;
    uint64_t act_size;

    /* state, under lock */
    pthread_mutex_t lock;
    glm_precision_plan_t active;
    int active_valid;
    int tables_prec; /* precision the expert tables describe, -1 none */
    struct glm_moe_options moe;
    uint64_t *counts_prev; /* [n_moe][E] counters after the previous pass */
    uint64_t *overflow;    /* [n_moe] */
    int *cold_layer;       /* [n_moe] 1: cold experts seen (AUTO balance) */
    int n_sessions;
    struct glm_session **sessions; /* live sessions (for KV accounting) */
    int cap_sessions;
    uint64_t forwards;
    double load_ms, io_ms, io_mib_s;
    uint64_t package_bytes;
    int streaming;
    uint64_t n_params, n_params_active;
    /* where the weights live: the weight store chosen at load
     * (runtime/weight_store.h), and the state of its mode, which only that
     * mode's file reads */
    const struct rt_store_ops *store;
    struct rt_stream st;  /* streamed (stream.c) */
    struct rt_xcache *xc; /* expert cache (expert_cache.c), NULL: none */
    struct rt_ep *ep;     /* expert parallelism (expert_parallel.c), NULL: one device */
    int ep_worker;        /* a rank > 0 of expert parallelism: no passes */
    int cache_k, cache_v; /* glm_model_set_cache_types (enum glm_cache_type) */
    /* absorbed MLA: W_UK^T / W_UV per head (absorb.c); off [L][4]: W_UK^T,
     * W_UV, their I8 scales */
    struct {
        tx_bo_t *bo;
        uint64_t *off;
        uint64_t size;
        int prec;
        uint16_t dtype;
    } ab;

    /* telemetry channel (telemetry.c), under lock; NULL: not published */
    tx_telemetry_pub_t *telem;
    double telem_last_ms; /* rt_now_ms() of the last update */
    int telem_dirty;      /* passes ran since then */

    /* decode passes (every segment one token): host and device time
     * (glm_model_decode_times, TX_DEBUG); prefill passes (any longer
     * segment: glm_model_prefill_times, the time to the first token), under
     * lock */
    struct rt_pass_times {
        uint64_t passes, jobs;
        uint64_t wall_ns;   /* pass entry to the last job waited for */
        uint64_t build_ns;  /* pass entry to the first job's submission */
        uint64_t device_ns; /* the jobs' device time (end - start) */
        uint64_t replays;   /* passes that ran the decode graph */
    } dec, pre;
    /* the decode graph (runtime/decode_graph.c), under lock; its mode
     * (TX_DECODE_GRAPH at load: RT_DG_*) */
    struct rt_dgraph *dg;
    int dg_mode;
};

struct glm_session {
    glm_model_t *m;
    int n_ctx, n_batch, pos;
    tx_bo_t *kv_bo;
    void *kv_map;
    uint64_t kv_size;
    uint16_t kv_dtype;                /* K cache type (MLA: the latent cache's) */
    uint16_t v_dtype;                 /* V cache type (MLA: = kv_dtype, no V cache) */
    uint16_t ik_dtype;                /* key-selector cache type: F32 or Q8_0 */
    int want_k, want_v;               /* glm_session_options.cache_type_k / _v */
    uint64_t attn_pairs, attn_pairs_dense; /* glm_session_attention_stats */
    uint64_t *k_off, *v_off, *ik_off; /* per layer; ik_off = RT_NONE-less: UINT64_MAX */
    int32_t *toks;                    /* [n_ctx] the ids at positions [0, pos) */
    struct glm_spec_stats spec;       /* speculative decoding (spec.c) */
    /* glm_decode_batch_spec's MTP state (spec_batch.c): the hidden row
     * before position sp_pos, the first draft made for position sp_d1_pos
     * and the MTP layer's output row that made it; NULL until used */
    float *sp_h, *sp_g;
    int sp_pos, sp_d1_pos;
    int32_t sp_d1;
    uint32_t *allow;                  /* allowed-token mask of its samplings, or NULL
                                         (glm_session_set_token_mask, runtime/token_mask.c) */
    struct rt_attn_mask *amask;       /* custom attention mask of positions [base, base + n),
                                         or NULL (runtime/attn_mask.c) */
};

/* A session's custom attention mask (glm_session_set_attn_mask): the rows
 * of positions [base, base + n), prompt-relative ranges */
struct rt_attn_mask {
    int base, n;
    int32_t *row_start; /* [n + 1] */
    int32_t *ranges;    /* [2 * row_start[n]] */
};

/* One sequence's part of a forward pass. */
struct rt_seg {
    glm_session_t *s;
    int pos0; /* first position */
    int n;    /* tokens */
    int row0; /* first activation row */
};

struct rt_fwd {
    int n_seg;
    struct rt_seg *seg;
    int T;              /* rows */
    const int32_t *ids; /* [T] */
    int lrow0, lrows;   /* rows of the final norm output fed to lm_head (lrows may be 0) */
    float *logits;      /* host destination [lrows x vocab] or NULL */
    float *const *row_logits; /* [lrows]: NULL, or per row NULL or a [vocab] destination */
    const struct glm_sampling *sampling; /* sample every logits row on the device */
    int n_sampling;                      /* 1: sampling[0] for all rows; lrows: one per row */
    int32_t *sampled;                    /* [lrows] */
    const int32_t *ban;                  /* ids whose logit is set to -inf before sampling */
    int n_ban;
    float *dump;       /* [(L + 1) x T x D] per-layer outputs, or NULL */
    int32_t *dump_rid; /* [n_moe x T x top_k] routed experts (with dump) */
    int32_t *dump_sel; /* [L x T x index_topk] DSA selections (with dump) */
    /* speculative decoding (runtime/spec.c): */
    const int *row_seg; /* [lrows] the segment of each logits row (NULL: seg[r] when
                           n_seg == lrows, else seg[0]) */
    int row_pos;        /* sampled row r samples the position after its own row
                           (a verify pass), not after the segment's last */
    int mtp;            /* an MTP pass: the MTP layer instead of the decoder layers */
    const float *hin;   /* MTP pass: [T x D] the hidden states hnorm takes */
    float *hout;        /* [T x D] the last layer's output rows (before the final
                           norm), or NULL */
    float *probs;       /* [lrows] the sampled tokens' probabilities (softmax at
                           temperature 1 for greedy rows), or NULL */
    int mtp_tail;       /* a verify pass followed, in the same job, by the MTP
                           layer over its rows (next ids: the sampled tokens;
                           hidden: hout's rows); needs lrow0 0, lrows T */
    int32_t *mtp_sampled; /* mtp_tail: [T] the MTP layer's greedy drafts */
    float *mtp_hout;      /* mtp_tail: [T x D] the MTP layer's output rows */
    /* results */
    uint64_t busy_ns, macs;
    uint64_t attn_pairs, attn_pairs_dense; /* MLA: (query, key) pairs attended / dense causal */
};

/* decode_graph.c (the rest: decode_graph.h). Its modes (GLM_LOAD_*DECODE_GRAPH*,
 * TX_DECODE_GRAPH); drop: free the model's graph (model lock held:
 * whenever what it names may change) */
enum { RT_DG_OFF = 0, RT_DG_ON = 1, RT_DG_VERIFY = 2 };
void rt_dgraph_drop(glm_model_t *m);

/* absorb.c */
int rt_absorb_enabled(const glm_model_t *m);
int rt_absorb_prepare(glm_model_t *m, glm_precision_t p);
void rt_absorb_free(glm_model_t *m);
int rt_absorb_ref(const glm_model_t *m, int l, int h, int which, struct tx_weight_ref *w);

/* Decoder layers with tables and KV caches: L, + 1 with the MTP layer */
static inline int rt_layers(const glm_model_t *m)
{
    return m->cfg.num_hidden_layers + (m->mtp ? 1 : 0);
}

/* precision.c */
void rt_plan_of(tx_device_t *dev, glm_precision_plan_t *plan, uint64_t *generation);

/* load_options.c: *o = *opt (NULL: all zero) with the environment's
 * settings applied (TX_EINVAL naming a bad value) */
int rt_load_options(const struct glm_load_options *opt, struct glm_load_options *o);

/* model.c */
uint16_t rt_prec_dtype(glm_precision_t p);
uint16_t rt_prec_act_dtype(glm_precision_t p);
/* weight dtypes that carry f32 scales (I8 per row/group, FP8 per block) */
static inline int rt_dtype_scaled(unsigned dt)
{
    return dt == TX8_DTYPE_I8 || dt == TX8_DTYPE_F8_E4M3;
}
uint16_t rt_kv_dtype(glm_precision_t attention);
int rt_mat_of(const glm_model_t *m, int role, int layer);
int rt_vec_of(const glm_model_t *m, int role, int layer);
int rt_prepare_plan(glm_model_t *m, const glm_precision_plan_t *plan);
int rt_weight_ref(glm_model_t *m, int mat, glm_precision_t p, struct tx_weight_ref *w);
int rt_ensure_act(glm_model_t *m, uint64_t bytes);
/* tables.c: package tensors -> matrix/vector tables; the meta BO */
int rt_build_tables(glm_model_t *m);
int rt_build_meta(glm_model_t *m);
int rt_run(glm_model_t *m, tx_cmdbuf_t *cb, const char *what, struct tx_job_result *res);
int rt_session_kv_convert(glm_session_t *s, const uint16_t dt[3]);
void rt_session_kv_types(const glm_session_t *s, const glm_precision_plan_t *plan, uint16_t dt[3]);
int rt_cache_types_check(const glm_model_t *m, int k, int v);
uint64_t rt_decode_bytes(const glm_model_t *m, const glm_precision_plan_t *plan);

int rt_stored_fits(const glm_model_t *m, const struct rt_mat *x, glm_precision_t p);
uint32_t rt_copy_group(const glm_model_t *m, const struct rt_mat *x);
uint64_t rt_copy_data_bytes(const glm_model_t *m, const struct rt_mat *x, uint16_t dtype);
uint64_t rt_copy_scales_bytes(const glm_model_t *m, const struct rt_mat *x, uint16_t dtype,
                              uint32_t g);
void rt_host_convert_sparse(const struct tx_smd_tensor *st, const uint8_t *base,
                            const struct rt_copy *c, void *cmap);
int rt_emit_convert(tx_cmdbuf_t *cmd, const struct tx_smd_tensor *st, tx_bo_t *src_bo,
                    uint64_t src_off, tx_bo_t *dst_bo, const struct rt_copy *c, tx_bo_t *tmp);

/* stream.c (the weight store "streamed"): a streamed tensor's reference
 * in its layer's slot; a streamed tensor read into a host buffer */
int rt_stream_weight_ref(glm_model_t *m, int mat, glm_precision_t p, struct tx_weight_ref *w);
int rt_stream_read_tensor(glm_model_t *m, int t, void **buf);

/* graph.c */
int rt_forward(glm_model_t *m, struct rt_fwd *f);
/* runtime/token_mask.c: the words of a session's allowed-token mask, and
 * whether a pass samples a row of a session that has one */
uint32_t rt_token_mask_words(const glm_model_t *m);
int rt_fwd_has_token_mask(const struct rt_fwd *f);
/* runtime/attn_mask.c: a session's custom attention mask freed (reset,
 * truncate, free) */
void rt_attn_mask_drop(glm_session_t *s);

/* Ids the sampler may choose: [0, tokenizer vocabulary size) when the
 * package has a tokenizer smaller than config.vocab_size (the rest are
 * padding rows of lm_head), else [0, vocab_size). */
int rt_sample_vocab(const glm_model_t *m);
/* TX_OK, or TX_EINVAL naming `who` and the field the device cannot honour. */
int rt_sampling_check(const glm_model_t *m, const struct glm_sampling *s, const char *who);

/* spec.c: speculative decoding inside glm_generate (model lock held for
 * prompt and step) */
struct spec_state;
int rt_spec_begin(glm_session_t *s, const struct glm_generate_params *p, uint64_t *busy,
                  uint64_t *macs, const int32_t *ban, int n_ban, struct spec_state **out);
int rt_spec_prompt(struct spec_state *st, const int32_t *prompt, int n, int32_t *tok);
int rt_spec_step(struct spec_state *st, int32_t t, int k, int32_t *y, int *ny);
void rt_spec_end(struct spec_state *st);

/* moe.c */
void rt_moe_after_pass(glm_model_t *m, int T);

/* telemetry.c: publish the expert counters for monitors (tx-top) */
#define RT_TELEMETRY_PERIOD_MS 100.0 /* at most one update per period after passes */
void rt_telemetry_open(glm_model_t *m);
void rt_telemetry_publish(glm_model_t *m, int force); /* model lock held */
void rt_telemetry_close(glm_model_t *m);

/* helpers */
double rt_now_ms(void);
int rt_debug_on(void);
void rt_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
