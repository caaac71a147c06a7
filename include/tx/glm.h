/* SPDX-License-Identifier: MIT */
/*
 * libtx GLM inference API: run GLM-4.5/4.6/4.7 (Glm4MoeForCausalLM) and
 * GLM-5/5.1 (GlmMoeDsaForCausalLM) models from an .smd package on a TX8.
 *
 *   - the article's per-layer precision API (set_layer_precision), with the
 *     "golden configuration" as the default plan;
 *   - models: a package loaded onto a device (zero copy: liburing reads the
 *     tensor extents straight into mapped device memory);
 *   - sessions: one sequence each, with its KV cache in device memory;
 *     batched prefill, single and batched decode;
 *   - generation with sampling on the device (SAMPLE), streaming callback,
 *     stop tokens, the GLM chat template, llama.cpp-style timings;
 *   - expert load balancing (article 5.1) and config/expert_parallel.yaml;
 *   - validation against the FP32 host reference (tx-internal/glm_reference.h, private to libtx and the tools).
 *
 * Conventions (those of the device layer, tx/tx_device.h): every function
 * that can fail returns TX_OK (0) or a negative enum tx_status code and
 * leaves a message for tx_last_error() in the calling thread. Nothing prints
 * (except with TX_DEBUG=1, to stderr), exits or aborts on bad input.
 *
 * Threads: a model and its sessions may be used from several threads; the
 * forward passes of one model are serialised by the model.
 *
 * Documentation with an example program: docs/libtx-glm.md.
 */
#ifndef TX_GLM_H
#define TX_GLM_H

#include <stddef.h>
#include <stdint.h>

#include <tx/glm_config.h>
#include <tx/tx_device.h>
#include <tx/tx_tokenizer.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Precision API (article section 2.2)                                       */
/* ------------------------------------------------------------------------ */
/*
 *     glm_layer_config_t cfg;
 *     cfg.layer_type = GLM_MLP;
 *     cfg.precision  = INT8_MIXED;
 *     set_layer_precision(device, cfg);
 *
 * The plan belongs to the device handle: it applies to every model loaded on
 * that handle from its next forward pass on. A plan entry decides, for the
 * tensors of that layer type, the weight data type the device multiplies
 * with and how activations enter the products (MATMUL/MOE_FFN act_dtype):
 *
 *   FP32        F32 weights, f32 activations
 *   FP16        F16 weights, activations rounded to f16, f32 accumulation
 *   BF16        BF16 weights, activations rounded to bf16, f32 accumulation
 *   INT8_MIXED  I8 weights (per-channel or per-group f32 scales), activations
 *               quantised per row to int8 on the fly, int32 accumulation,
 *               f32 outputs (act_dtype I8)
 *
 * Special cases: GLM_EMBEDDING selects the data type of the embedding table
 * (EMBED gathers from F32/F16/BF16/I8 tables); GLM_ATTENTION also selects the
 * KV cache type (F32 for FP32, BF16 for BF16, F16 for FP16 and INT8_MIXED,
 * except an MLA latent cache under INT8_MIXED on a device of interface >=
 * 1.7: BF16); with BF16 caches, BF16 and INT8_MIXED make ATTENTION's own
 * products BF16 too (TX8_ATTN_F_BF16, interface 1.7);
 * GLM_NORM: normalisation is computed in f32 on the TX8, and FP16/BF16 round
 * the normalised outputs through that type (INT8_MIXED is refused for norms,
 * TX_ENOTSUP). The MoE router gate always runs in FP32 (as transformers
 * computes it).
 *
 * When the package stores a tensor in another type than the plan asks for,
 * the runtime converts it on the device (CONVERT) into a per-precision copy
 * that is kept for later passes (see docs/libtx-glm.md, "Memory").
 */
typedef enum glm_layer_type {
    GLM_EMBEDDING = 0, /* model.embed_tokens */
    GLM_ATTENTION = 1, /* attention projections (GQA or MLA, DSA indexer) */
    GLM_MLP = 2,       /* dense SwiGLU MLP of the first layers, shared experts */
    GLM_EXPERT = 3,    /* routed MoE experts */
    GLM_NORM = 4,      /* RMSNorm / LayerNorm */
    GLM_OUTPUT = 5,    /* lm_head */
    GLM_LAYER_TYPE_COUNT = 6
} glm_layer_type_t;

/*
 * Precision names. FP32, FP16, BF16 and INT8_MIXED are the article's API and
 * stay, but they are global enumerators with common names: a program that
 * also includes another library defining FP16 or BF16 (a macro or another
 * enum: CUDA, oneDNN, some BLAS and DSP headers) does not compile, or worse,
 * gets the macro's value. Every name therefore also has a prefixed spelling,
 * GLM_PRECISION_FP32 ... GLM_PRECISION_INT8_MIXED, with the same value; new
 * code should use those. Defining GLM_NO_SHORT_PRECISION_NAMES before
 * including this header leaves the short names out altogether.
 */
typedef enum glm_precision {
    GLM_PRECISION_FP32 = 0,
    GLM_PRECISION_FP16 = 1,
    GLM_PRECISION_BF16 = 2,
    GLM_PRECISION_INT8_MIXED = 3,
    /* FP8 weights (E4M3 with an f32 scale per 128 x 128 block, as the
     * Hugging Face FP8 checkpoints store them) with f32 activations: for
     * attention, mlp, experts and output matrices (issue 38) */
    GLM_PRECISION_FP8 = 4,
#ifndef GLM_NO_SHORT_PRECISION_NAMES
    FP32 = GLM_PRECISION_FP32,
    FP16 = GLM_PRECISION_FP16,
    BF16 = GLM_PRECISION_BF16,
    INT8_MIXED = GLM_PRECISION_INT8_MIXED,
#endif
    GLM_PRECISION_COUNT = 5
} glm_precision_t;

typedef struct glm_layer_config {
    glm_layer_type_t layer_type;
    glm_precision_t precision;
} glm_layer_config_t;

/* Set one layer type's precision on a device (article API). TX_EINVAL for a
 * bad handle, type or precision; TX_ENOTSUP for INT8_MIXED norms. */
TX_API int set_layer_precision(tx_device_t *device, glm_layer_config_t cfg);

/* The precision in force for a layer type (the golden default if never set;
 * FP32 for an invalid type). */
TX_API glm_precision_t get_layer_precision(tx_device_t *device, glm_layer_type_t type);

/* A whole plan. */
typedef struct glm_precision_plan {
    glm_precision_t precision[GLM_LAYER_TYPE_COUNT];
} glm_precision_plan_t;

/* The article's golden configuration: embedding INT8_MIXED, attention FP16,
 * MLP and experts INT8_MIXED, norms FP32, output FP32. */
TX_API void glm_plan_golden(glm_precision_plan_t *plan);
/* Every layer type at p (FP32 ... INT8_MIXED) except norms, which stay FP32
 * (they are computed in f32; glm-export stores them F32): the plan the words
 * "fp32", "fp16", "bf16", "int8" of glm_plan_parse name. */
TX_API void glm_plan_uniform(glm_precision_plan_t *plan, glm_precision_t p);
TX_API int glm_plan_set(tx_device_t *device, const glm_precision_plan_t *plan);
TX_API int glm_plan_get(tx_device_t *device, glm_precision_plan_t *plan);

/*
 * Parse a plan text, starting from *plan as given: "golden", "fp32", "fp16",
 * "bf16", "int8" (whole plans, glm_plan_golden / glm_plan_uniform), and/or
 * "TYPE=PREC" items separated by commas, e.g. "mlp=int8,attention=fp16" or
 * "golden,output=fp16". TYPE: embedding, attention, mlp, expert(s), norm(s),
 * output (or GLM_MLP, ...), or all (= glm_plan_uniform); PREC: fp32, fp16,
 * bf16, int8 / int8_mixed (case-insensitive). The one precision syntax of
 * libtx: glm-inference --precision and glm-export --precision / --quant
 * parse with it (docs/precision.md).
 */
TX_API int glm_plan_parse(const char *text, glm_precision_plan_t *plan);
/* "embedding=INT8_MIXED,attention=FP16,..." into buf; returns buf. */
TX_API char *glm_plan_format(const glm_precision_plan_t *plan, char *buf, size_t bufsz);

TX_API const char *glm_layer_type_name(glm_layer_type_t t); /* "embedding", ... */
TX_API const char *glm_precision_name(glm_precision_t p);   /* "FP32", ... */

/* ------------------------------------------------------------------------ */
/* Models                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct glm_model glm_model_t;
typedef struct glm_session glm_session_t;

/* Load flags */
/*
 * Checksums: every resident tensor's CRC32C (data, scales, sparse index) is
 * checked by default as its extent lands, overlapped with the reads still
 * in flight, and INT8 scales must be finite and >= 0; a mismatch fails the
 * load with TX_EINVAL and a message naming the tensor. GLM_LOAD_VERIFY also
 * reads the streamed layers back from the file to check them;
 * GLM_LOAD_NO_VERIFY skips the checks (sparse indices are still checked).
 */
#define GLM_LOAD_VERIFY (1u << 0)    /* also verify streamed layers (re-read) */
#define GLM_LOAD_NO_URING (1u << 1)  /* read with pread() instead of io_uring */
#define GLM_LOAD_STREAM (1u << 2)    /* stream the layers (parameter shard prefetch) */
#define GLM_LOAD_DIRECT (1u << 3)    /* O_DIRECT reads (bypass the page cache) */
#define GLM_LOAD_NO_VERIFY (1u << 4) /* no checksums at load (see above) */
/* Expert cache (docs/glm-inference.md, "Expert cache"): the routed experts
 * live in the package and in a cache of expert slots in device memory;
 * everything else is resident. Used by default when the whole model does
 * not fit (or exceeds max_weight_bytes) but its non-expert part does;
 * GLM_LOAD_STREAM (whole layers through two slots) stays the fallback when
 * even that part does not fit. */
#define GLM_LOAD_EXPERT_CACHE (1u << 5)       /* use it even when the model fits */
#define GLM_LOAD_EXPERT_LRU (1u << 6)         /* plain LRU replacement (comparison) */
#define GLM_LOAD_EXPERT_NO_PREFETCH (1u << 7) /* no predicted prefetch (comparison) */
/* Batch-invariant decode: every job of the model runs with
 * TX_SUBMIT_BATCH_INVARIANT, so that a session's logits are bit-identical
 * whatever the other sessions of a glm_forward_batch (see "Batched decode:
 * the guarantee" below), at a cost in single-token decode speed (f32
 * ~1.1x, bf16 ~1.5x, int8 ~1.2x CPU time per MATMUL at K = 4096, ~2x at
 * K = 128..512; docs/libtx-glm.md). The environment variable
 * TX_BATCH_INVARIANT=1 sets it for any program (0 or unset: the flag as
 * given; anything else fails the load with TX_EINVAL). Needs a device of
 * interface >= 1.6, emu or /dev/accel with tx8.ko >= 1.2: the load fails
 * with TX_ENOTSUP otherwise. */
#define GLM_LOAD_BATCH_INVARIANT (1u << 8)
/* Settings the environment also gives (docs/libtx-glm.md, "Load
 * settings"); a variable that is set overrides the flag. */
/* ATTENTION's products in f32 on a device that offers BF16 ones
 * (TX_ATTENTION_BF16=0) */
#define GLM_LOAD_NO_ATTENTION_BF16 (1u << 9)
/* MLA's attention form for every pass: absorbed or expanded (TX_MLA_FORM);
 * neither: chosen per pass; both: the load fails with TX_EINVAL */
#define GLM_LOAD_MLA_ABSORBED (1u << 10)
#define GLM_LOAD_MLA_EXPANDED (1u << 11)
/* The decode graph (docs/libtx-glm.md, TX_DECODE_GRAPH): off, or verified
 * against a freshly built pass every step; neither: on; both: TX_EINVAL */
#define GLM_LOAD_NO_DECODE_GRAPH (1u << 12)
#define GLM_LOAD_DECODE_GRAPH_VERIFY (1u << 13)
/* Load the package's MTP (NextN) layer too, for speculative decoding
 * (glm_generate with glm_generate_params.spec_draft_max > 0; since libtx
 * 2.8): the layer model.layers.{num_hidden_layers} glm-export keeps, on
 * the device with the rest (resident or with the expert cache, not with
 * GLM_LOAD_STREAM), and its own KV cache in every session. Without the
 * flag, or for a package without a complete MTP layer, it is not read
 * (glm_model_has_mtp says which). */
#define GLM_LOAD_MTP (1u << 14)
/* The DSA indexer's products in f32 over a Q8_0 indexer key cache, not the
 * 8-bit ones (TX8_DSA_F_QUERY_Q8) a device of interface >= 1.9 offers
 * (TX_DSA_QUERY_Q8=0; since libtx 2.8) */
#define GLM_LOAD_NO_DSA_QUERY_Q8 (1u << 15)

/*
 * Options of a load; zero-initialise the whole struct (all zero: the
 * defaults). Its size and layout are part of the ABI of libtx.so.2 and
 * change only by appending: a new setting takes the next GLM_LOAD_* bit or
 * the first reserved word (rsvd0, then rsvd[0..3], which must be 0), so a
 * caller built against an older header passes zeros there and gets the
 * defaults (docs/libtx-abi.md, "Option structs").
 */
struct glm_load_options {
    /* Model name for labels and reports (device memory labels are
     * "<name>_Weights", "<name>_KVCache", "<name>_Activations"). NULL: from
     * the package ("GLM-5.1" for glm_moe_dsa, "GLM-4.5" for glm4_moe, unless
     * the package metadata names the model). At most 16 bytes are kept. */
    const char *name;
    unsigned flags; /* GLM_LOAD_* */
    /* Upper bound of device memory for weights (0 = whatever is free). When
     * the model does not fit, layers are streamed through a device-side
     * cache with prefetch of the next layer (parameter shard prefetch). */
    uint64_t max_weight_bytes;
    uint32_t io_depth; /* io_uring queue depth (0 = 32) */
    uint32_t rsvd0;
    /* Bytes of device memory for the expert cache (0: what is free after
     * the resident part, less a reserve for KV caches and activations;
     * with max_weight_bytes: that bound less the resident part). */
    uint64_t expert_cache_bytes;
    uint32_t rsvd[4];
};

/* Load a package onto a device. opt may be NULL. */
TX_API int glm_model_load(tx_device_t *device, const char *smd_path,
                          const struct glm_load_options *opt, glm_model_t **out);
/* Free a model (its sessions must be freed first; TX_EBUSY otherwise). */
TX_API int glm_model_free(glm_model_t *model);

TX_API const struct glm_config *glm_model_config(const glm_model_t *model);
TX_API const char *glm_model_name(const glm_model_t *model);
TX_API tx_device_t *glm_model_device(const glm_model_t *model);
/* The package's tokenizer (NULL if it could not be parsed). */
TX_API const struct tx_tokenizer *glm_model_tokenizer(const glm_model_t *model);

struct glm_model_info {
    uint64_t n_params;               /* all parameters (MTP layers excluded) */
    uint64_t n_params_active;        /* parameters used per token (top-k experts) */
    uint64_t package_bytes;          /* tensor extents read from the package */
    uint64_t weights_bytes;          /* device memory of the stored weights */
    uint64_t converted_bytes;        /* device memory of per-precision copies */
    uint64_t kv_bytes;               /* KV caches of all live sessions */
    uint64_t activation_bytes;       /* activation buffers of all live sessions */
    uint64_t decode_bytes_per_token; /* weight bytes one decode step reads
                                        under the current plan (active experts) */
    double load_ms;                  /* glm_model_load wall time */
    double io_ms;                    /* of which reading the package */
    double io_mib_s;                 /* read throughput */
    int streaming;                   /* 1: parameter-shard prefetch in use
                                        (whole layers), 2: expert cache */
    int n_sessions;
    glm_precision_plan_t plan;               /* plan of the last forward pass */
    glm_precision_plan_t stored;             /* package's plan (storage types) */
    uint64_t forwards;                       /* forward passes run */
    uint64_t prefetch_hits, prefetch_misses; /* streaming: layer cache */
};
TX_API int glm_model_info(glm_model_t *model, struct glm_model_info *info);

/* Free the per-precision weight copies the current plan does not use. */
TX_API int glm_model_trim(glm_model_t *model);

/* ------------------------------------------------------------------------ */
/* Sessions, forward passes                                                  */
/* ------------------------------------------------------------------------ */

/*
 * KV-cache element types (llama.cpp's --cache-type-k / --cache-type-v
 * names). GLM_CACHE_DEFAULT follows the plan's attention precision (F32
 * for FP32, BF16 for BF16, F16 for FP16 and INT8_MIXED; an MLA latent
 * cache under INT8_MIXED: BF16 on a device of interface >= 1.7 unless
 * TX_ATTENTION_BF16=0). Q8_0 (int8) and
 * Q4_0 (4-bit) keep one f16 scale per 32 elements (interface 1.6 KV-cache
 * block types, docs/hardware.md): 8.5 and 4.5 bits per element. For MLA
 * architectures the cache holds the latent only: the K type is the latent
 * cache's type, and V (the latent read as value) has no cache of its own,
 * so the V type is ignored. A DSA key selector's cache is Q8_0 whenever
 * the K type is not F32 (and its width is a multiple of 32), else F32.
 */
typedef enum glm_cache_type {
    GLM_CACHE_DEFAULT = 0,
    GLM_CACHE_F32 = 1,
    GLM_CACHE_F16 = 2,
    GLM_CACHE_BF16 = 3,
    GLM_CACHE_Q8_0 = 4,
    GLM_CACHE_Q4_0 = 5,
    GLM_CACHE_TYPE_COUNT = 6
} glm_cache_type_t;

/* "default", "f32", "f16", "bf16", "q8_0" (or "int8"), "q4_0" (or "int4",
 * "q4"), case-insensitive; -1 if unknown */
TX_API int glm_cache_type_parse(const char *s);
/* "default", "f32", ..., "q4_0"; "?" for an invalid value */
TX_API const char *glm_cache_type_name(glm_cache_type_t t);

/* The cache types of sessions created later without their own
 * (glm_session_options.cache_type_k / _v = GLM_CACHE_DEFAULT), glm_validate
 * and glm_layer_outputs included. TX_EINVAL for an invalid type, TX_ENOTSUP
 * for a block type the model's cache rows cannot take (a K/V run not a
 * multiple of 32 elements) or a device of interface < 1.6. */
TX_API int glm_model_set_cache_types(glm_model_t *model, glm_cache_type_t k, glm_cache_type_t v);

struct glm_session_options {
    int n_ctx;   /* positions (0 = min(4096, max_position_embeddings)) */
    int n_batch; /* most tokens per device pass (0 = 512); longer inputs are
                    split into passes of n_batch tokens */
    /* since libtx 2.2 (formerly reserved, 0): enum glm_cache_type of the K
     * and V caches; GLM_CACHE_DEFAULT: the model's types
     * (glm_model_set_cache_types), else the plan's */
    int cache_type_k, cache_type_v;
    int rsvd[4];
};

TX_API int glm_session_create(glm_model_t *model, const struct glm_session_options *opt,
                              glm_session_t **out);
TX_API void glm_session_free(glm_session_t *s);
/* Forget the sequence (position 0); the KV cache memory stays. With expert
 * load balancing on, routing also depends on the model-wide expert counts
 * of every earlier pass (all sessions), which this does not reset: call
 * glm_model_expert_stats_reset too for a decode that repeats exactly. */
TX_API int glm_session_reset(glm_session_t *s);
TX_API int glm_session_pos(const glm_session_t *s);
/* Attention work of the session's passes so far, summed over layers: the
 * (query, key) pairs the ATTENTION commands computed (a DSA layer: its
 * index_topk selected keys) and the pairs dense causal attention would
 * have (since libtx 2.2). The MACs are pairs x heads x (qk + v dims). */
TX_API int glm_session_attention_stats(const glm_session_t *s, uint64_t *pairs,
                                       uint64_t *pairs_dense);
TX_API int glm_session_n_ctx(const glm_session_t *s);
TX_API glm_model_t *glm_session_model(const glm_session_t *s);
/* Keep the first pos positions of the sequence (0 <= pos <= the current
 * position; the KV cache of positions [0, pos) is reused as it is, later
 * evaluation overwrites the rest). glm_session_reset is truncate to 0. */
TX_API int glm_session_truncate(glm_session_t *s, int pos);

/* Label the session's KV cache buffer in device memory views (tx-top
 * --json memory.labels, /proc/tx_meminfo), e.g. "GLM-5.1_KV_slot3"
 * instead of the model's "<name>_KVCache"; at most 31 bytes. glm-server
 * labels its slots so. Since libtx 2.2 (LIBTX_2.2). */
TX_API int glm_session_set_label(glm_session_t *s, const char *label);

/*
 * A session's state as bytes: its token ids and the KV cache of positions
 * [0, pos) (every layer's K, V and key-selector rows, in the cache's types).
 * save: *blob (malloc()ed, free() it) and *size. load: into a session of a
 * model of the same geometry and the same KV cache types, whose context
 * holds the positions; the session then stands where the saved one stood
 * (its next tokens are the same bits). A blob of another model or cache
 * types, truncated, or not a state, is TX_EINVAL naming what differs, and
 * the session is left as it was. The session must not be in a pass.
 * Since libtx 2.8 (LIBTX_2.8); glm-server's /slots save and restore.
 */
TX_API int glm_session_state_save(glm_session_t *s, void **blob, size_t *size);
TX_API int glm_session_state_load(glm_session_t *s, const void *blob, size_t size);

/*
 * A range of a session's KV rows as bytes: positions [pos, pos + n) of
 * every layer's caches (K and V, or an MLA model's latent; a DSA key
 * selector's; the MTP layer's), in the cache's own types (a quantised
 * cache's blocks as they are: no conversion). kv_bytes: the bytes of n
 * positions (0 for n <= 0), the same for any n positions of the session.
 * read: [pos, pos + n) within [0, glm_session_pos) into buf. write: buf
 * (from a read of a session of the same model and cache types) into
 * [pos, pos + n), pos <= glm_session_pos (no gap), pos + n <= n_ctx, with
 * ids[n] the tokens of those positions; the session then stands at
 * pos + n, and its next tokens are those of the session the rows were
 * read from, bit for bit. A range outside, a short buffer or an id outside
 * the vocabulary is TX_EINVAL and changes nothing. The session must not
 * be in a pass. Since libtx 2.9 (LIBTX_2.9); glm-server's block prefix
 * cache.
 */
TX_API uint64_t glm_session_kv_bytes(const glm_session_t *s, int n);
TX_API int glm_session_kv_read(glm_session_t *s, int pos, int n, void *buf, size_t size);
TX_API int glm_session_kv_write(glm_session_t *s, int pos, const int32_t *ids, int n,
                                const void *buf, size_t size);

/*
 * Grammar-constrained sampling: the ids the session's sampled tokens may
 * take from now on (glm_generate, glm_decode_batch*, every SAMPLE of one
 * of its rows) until the mask changes. mask: n_words u32 words, bit i % 32
 * of word i / 32 set = id i allowed; n_words must be
 * (glm_model_sample_vocab + 31) / 32. A masked-out id is never chosen
 * (greedy included) and takes no probability mass: the device's SAMPLE
 * applies the mask (interface 1.9; an older device fails the pass with
 * TX_ENOTSUP). A mask allowing nothing is TX_EINVAL; NULL removes the mask.
 * Passes sampling a masked session are built each time (no decode graph).
 * The grammar engine that computes masks is tools' (docs/grammar.md).
 * Since libtx 2.8 (LIBTX_2.8).
 */
TX_API int glm_session_set_token_mask(glm_session_t *s, const uint32_t *mask, int n_words);

/*
 * Custom attention masks (Hugging Face's 4D attention masks; the table
 * understanding of the vendor article): which tokens each token of the
 * session's next n_tokens positions may attend to. Query i (0-based, at
 * position p + i where p is glm_session_pos at the call) attends token
 * p + j for j in the ranges [start, end) of its row, always intersected
 * with the causal rule (j <= i); it always sees itself, and every position
 * before p (an earlier turn's context). Rows: the ranges of query i are
 * pairs ranges[2 * k], ranges[2 * k + 1] for k in [row_start[i],
 * row_start[i + 1]); row_start[0] == 0; a row's ranges sorted by start, not
 * overlapping, inside [0, n_tokens). A row [0, n_tokens) is the causal
 * mask. Tokens at positions from p + n_tokens on (the generated ones) see
 * every earlier token, as without a mask.
 * The device's ATTENTION applies it as a key bitmap (interface 1.10, the
 * bitmap path of DSA's selections; an older device fails the pass with
 * TX_ENOTSUP); with a DSA indexer (glm_moe_dsa) the indexer's top-k is
 * chosen among the keys the mask leaves visible (DeepSeek-V3.2's
 * index_score += mask), so the mask always wins.
 * glm_session_set_attn_mask copies the mask; a malformed one is TX_EINVAL
 * naming the row and range (the session keeps its earlier mask). It stays
 * until a pass has computed all its positions (then dropped), NULL, or
 * glm_session_reset / glm_session_truncate. Passes with masked positions
 * are built each time (no decode graph). The JSON file format of
 * glm-inference --attn-mask (spans, table cells, rows): docs/glm-inference.md.
 * Since libtx 2.9 (LIBTX_2.9).
 */
struct glm_attn_mask {
    int n_tokens;             /* the positions it describes */
    const int32_t *row_start; /* [n_tokens + 1] */
    const int32_t *ranges;    /* [2 * row_start[n_tokens]] */
};

TX_API int glm_session_set_attn_mask(glm_session_t *s, const struct glm_attn_mask *m);

/* glm_eval flags */
#define GLM_EVAL_ALL_LOGITS (1u << 0) /* logits of every position, else the last */

/*
 * Run n tokens at the session's position (prefill when n > 1, decode when
 * n == 1) and append them to its KV cache. logits: NULL, or [n x vocab]
 * floats with GLM_EVAL_ALL_LOGITS, or [vocab] floats (last position).
 */
TX_API int glm_eval(glm_session_t *s, const int32_t *ids, int n, unsigned flags, float *logits);

/* Sampling parameters of the device's SAMPLE command. With temperature > 0
 * a top_k above the device's limit (caps.max_topk, 4096 on tx8-emu), a
 * negative top_k, a top_p outside (0, 1] or a NaN temperature are refused
 * (TX_EINVAL naming the field); greedy ignores top_k and top_p. */
struct glm_sampling {
    float temperature; /* <= 0: greedy (argmax) */
    int top_k;         /* 0 = all */
    float top_p;       /* (0, 1], 1 = all */
    uint64_t seed;     /* same seed and inputs give the same tokens */
    /* Appended (zero = off / llama.cpp's order). A literal of the first four
     * fields keeps its meaning except the order: see enum glm_sampler_order. */
    float min_p;             /* [0, 1]: keep p >= min_p * p_max; 0 = off */
    float repeat_penalty;    /* >= 0; 0 or 1 = off */
    float presence_penalty;  /* subtracted once from a logit of a seen id */
    float frequency_penalty; /* subtracted per occurrence */
    int repeat_last_n;       /* ids looked back for the penalties: 0 = none (off),
                                -1 = the context up to GLM_MAX_REPEAT_LAST_N */
    int order;               /* enum glm_sampler_order */
};
#define GLM_MAX_REPEAT_LAST_N 4096
/*
 * Penalties come first (llama.cpp's penalties sampler, on the last
 * repeat_last_n ids of the session: prompt and generated), also for greedy.
 * Then, with temperature > 0:
 *  LLAMA (0):      top-k, top-p, min-p on the probabilities at temperature 1,
 *                  then the temperature on the kept tokens (llama.cpp);
 *  TEMP_FIRST (1): the temperature first, then top-k, top-p, min-p on the
 *                  tempered probabilities (transformers' warpers; the only
 *                  order before min-p existed).
 */
enum glm_sampler_order {
    GLM_SAMPLER_ORDER_LLAMA = 0,
    GLM_SAMPLER_ORDER_TEMP_FIRST = 1,
};
/* llama.cpp's defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
 * repeat_penalty 1 (off), presence/frequency 0, repeat_last_n 64, the
 * LLAMA order, seed 0. */
TX_API void glm_sampling_default(struct glm_sampling *s);

/* How many ids the device sampler chooses from: the tokenizer's vocabulary
 * size when the package has a tokenizer with fewer ids than
 * config.vocab_size (the other lm_head rows are padding and are never
 * sampled, greedy included), else vocab_size. Logits returned by glm_eval
 * and glm_decode_batch still have vocab_size entries. */
TX_API int glm_model_sample_vocab(const glm_model_t *m);

/*
 * Batched decode: one token for each of n sessions (of the same model) in one
 * device pass. logits: NULL or [n x vocab]. If sampling is not NULL, a token
 * is drawn on the device for every session into next[n] (sessions sample
 * with counter = their position). By default not bit-identical to
 * single-session decoding: the matmul kernels tile the rows of a pass, so
 * the reduction order of a row depends on the batch; per row the logits
 * agree within 1e-5 of the row's largest |logit|, and tokens agree except
 * at near-ties of that size. A model loaded with GLM_LOAD_BATCH_INVARIANT
 * (or TX_BATCH_INVARIANT=1) is bit-identical: a session's logits (and so
 * its token) are the same bytes as when it decodes alone, whatever the
 * other sessions of the batch, their number and positions; holds for one
 * model, plan and device ISA path, with expert load balancing off, and
 * costs single-token decode speed (docs/libtx-glm.md, "Batched decode:
 * the guarantee").
 */
TX_API int glm_decode_batch(glm_session_t *const *sessions, const int32_t *ids, int n,
                            float *logits, const struct glm_sampling *sampling, int32_t *next);
/*
 * glm_decode_batch with one glm_sampling per session: sampling[i] (its
 * temperature, top-k, top-p and seed) draws next[i]. The random number of
 * a draw is keyed by (sampling[i].seed, the session's position), so every
 * session has its own stream: a session gives the tokens it would give
 * alone with that seed, whatever the other sessions of the batch use.
 * With glm_decode_batch (one glm_sampling for all) sessions at the same
 * position draw the same number.
 */
TX_API int glm_decode_batch_each(glm_session_t *const *sessions, const int32_t *ids, int n,
                                 float *logits, const struct glm_sampling *sampling,
                                 int32_t *next);

/*
 * Continuous batching (glm-server): ONE device pass that decodes one token
 * for each of n sessions (as glm_decode_batch_each: sampling[i] draws
 * next[i]) and also appends chunks[j].n prompt tokens chunks[j].ids to
 * chunks[j].session for each of n_chunks chunks (pieces of their prefill;
 * no logits, nothing sampled for them), so new requests' prompts are
 * evaluated without stalling the running streams. n may be 0 (chunks
 * only); n_chunks 0 is glm_decode_batch_each without logits. A chunk's
 * session must not be a decode session nor appear twice; n <= 32,
 * n_chunks <= 32. On an error nothing is evaluated. The decode rows'
 * values depend on the pass's composition as glm_decode_batch's do (its
 * guarantee applies). Since libtx 2.2 (LIBTX_2.2).
 */
struct glm_prefill_chunk {
    glm_session_t *session;
    const int32_t *ids;
    int n;
};
TX_API int glm_decode_batch_prefill(glm_session_t *const *sessions, const int32_t *ids, int n,
                                    const struct glm_sampling *sampling, int32_t *next,
                                    const struct glm_prefill_chunk *chunks, int n_chunks);
/*
 * glm_decode_batch_prefill that also copies decode row i's logits (the
 * lm_head output the device's SAMPLE command drew next[i] from, before any
 * penalty or temperature; vocab_size floats) into row_logits[i] when that
 * pointer is not NULL (row_logits may be NULL: no copies). For
 * log-probabilities of the sampled tokens (glm-server's "logprobs"). Since
 * libtx 2.7 (LIBTX_2.7).
 */
TX_API int glm_decode_batch_prefill_logits(glm_session_t *const *sessions, const int32_t *ids,
                                           int n, const struct glm_sampling *sampling,
                                           int32_t *next, const struct glm_prefill_chunk *chunks,
                                           int n_chunks, float *const *row_logits);

/* ------------------------------------------------------------------------ */
/* Generation                                                                */
/* ------------------------------------------------------------------------ */

/* Called for every generated token with its text piece (complete UTF-8; may
 * be empty). Return non-zero to stop. */
typedef int (*glm_token_cb)(void *user, int32_t token, const char *piece, size_t len);

enum glm_stop_reason {
    GLM_STOP_NONE = 0,
    GLM_STOP_TOKEN = 1,    /* a stop token was generated (not emitted) */
    GLM_STOP_LENGTH = 2,   /* n_predict tokens generated */
    GLM_STOP_CONTEXT = 3,  /* the context is full */
    GLM_STOP_CALLBACK = 4, /* the callback asked to stop */
};

struct glm_generate_params {
    const int32_t *prompt; /* appended at the session's position */
    int n_prompt;
    int n_predict; /* tokens to generate; 0: the prompt only (nothing emitted);
                    * < 0: until a stop token or the context is full */
    struct glm_sampling sampling;
    /* Stop tokens; NULL with n_stop 0: the model's (glm_model_stop_tokens).
     * n_stop < 0: none at all. */
    const int32_t *stop;
    int n_stop;
    glm_token_cb on_token; /* may be NULL */
    void *user;
    unsigned flags; /* GLM_GEN_* (was rsvd[0]: zero keeps the old behaviour) */
    /* Speculative decoding (since libtx 2.8; were rsvd[0..1], zero = off):
     * spec_draft_max k in [1, GLM_SPEC_MAX_DRAFT] drafts k tokens per step
     * with the model's MTP layer (a model loaded with GLM_LOAD_MTP whose
     * package has one) and verifies them and the current token in one
     * pass (docs/speculative-decoding.md); spec_mode: GLM_SPEC_* */
    int spec_draft_max;
    int spec_mode;
    /* libtx 2.8 (was rsvd[0]): llama.cpp's --draft-p-min: a draft the MTP
     * layer gives a probability below this is dropped and ends the round's
     * drafts; 0: the default (GLM_SPEC_P_MIN_DEFAULT), < 0: none dropped */
    float spec_p_min;
};
#define GLM_SPEC_P_MIN_DEFAULT 0.1f
#define GLM_SPEC_MAX_DRAFT 8
/* spec_mode: where the drafts come from, and adaptivity */
#define GLM_SPEC_MTP 0     /* the MTP layer (default) */
#define GLM_SPEC_PERFECT 1 /* test: the main model's own choices (acceptance 100%) */
#define GLM_SPEC_WRONG 2   /* test: a token other than the main model's (acceptance 0%) */
#define GLM_SPEC_MODE_MASK 0xff
#define GLM_SPEC_NO_ADAPT (1 << 8) /* never switch drafting off for low acceptance */

/* Speculative decoding figures of a session, summed over its glm_generate
 * calls (since libtx 2.8) */
struct glm_spec_stats {
    uint64_t rounds;      /* verify passes */
    uint64_t drafted;     /* draft tokens verified */
    uint64_t accepted;    /* of which accepted */
    uint64_t emitted;     /* tokens the verify passes produced (accepted + 1 each) */
    uint64_t plain_steps; /* single-token steps while drafting was switched off */
    uint64_t off_switches; /* times low acceptance switched drafting off */
};
TX_API int glm_session_spec_stats(const glm_session_t *s, struct glm_spec_stats *out);
/*
 * Continuous batching with speculative decoding (glm-server --spec-type
 * mtp; since libtx 2.8): as glm_decode_batch_prefill, but every decode
 * session i drafts up to draft_max tokens with the MTP layer (a model
 * loaded with GLM_LOAD_MTP) after its current token ids[i], and one pass
 * verifies every session's drafts (each row sampled with sampling[i] at
 * its own position: the tokens are those of non-speculative decoding) and
 * evaluates the chunks. next[i * (GLM_SPEC_MAX_DRAFT + 1) ...] receives
 * the n_next[i] tokens session i produced (its accepted drafts and the
 * token after them: the last is its next current token); the session's
 * position advances by n_next[i]. n in 1..32, n_chunks 0..32. The drafts
 * and acceptance count in glm_session_spec_stats.
 */
TX_API int glm_decode_batch_spec(glm_session_t *const *sessions, const int32_t *ids, int n,
                                 const struct glm_sampling *sampling, int draft_max,
                                 int32_t *next, int *n_next, const struct glm_prefill_chunk *chunks,
                                 int n_chunks);
/* 1 if the model was loaded with its MTP layer (GLM_LOAD_MTP and a package
 * that has one), else 0 */
TX_API int glm_model_has_mtp(const glm_model_t *m);
/* glm_generate_params.flags: the stop tokens (stop[], or the model's when
 * stop is NULL and n_stop 0) get a -inf logit bias on the device, as
 * llama.cpp's --ignore-eos: they are never sampled, and generation runs to
 * n_predict or the end of the context. */
#define GLM_GEN_IGNORE_EOS (1u << 0)

struct glm_timings {
    double load_ms;   /* the model's load time */
    double prompt_ms; /* prompt evaluation (prefill) wall time */
    int n_prompt;
    double eval_ms; /* generation wall time (forward + on-device sampling) */
    /* Single-token forward passes after the prompt: llama.cpp's eval "runs",
     * eval_ms / n_eval is the time per decode pass. The first generated
     * token is sampled by the prompt's pass, so with n generated tokens
     * (*n_out) n_eval is n - 1 when n_predict or a full context ends
     * generation, n when a stop token does (the pass that sampled the stop
     * token counts; the stop token is not emitted), 0 for n_predict 0 (the
     * prompt pass only, nothing emitted). A callback that stops generation
     * (GLM_STOP_CALLBACK) leaves the passes done so far. */
    int n_eval;
    double total_ms;
    double prompt_tps; /* n_prompt / prompt_ms * 1000 */
    double eval_tps;
    double device_ms; /* device busy time of all passes (completion records) */
    uint64_t macs;    /* multiply-accumulates executed by the device */
    enum glm_stop_reason stop;
};

/*
 * Evaluate the prompt, then generate: each step runs one forward pass whose
 * job ends with the SAMPLE command, so only the chosen token id comes back.
 * out (may be NULL) receives up to cap generated tokens (stop token
 * excluded), *n_out their count; t (may be NULL) the timings.
 */
TX_API int glm_generate(glm_session_t *s, const struct glm_generate_params *p, int32_t *out,
                        int cap, int *n_out, struct glm_timings *t);

/*
 * The defaults of the checkpoint's generation_config.json, which glm-export
 * keeps in the package (metadata "generation_config", docs/smd-format.md):
 * `has` says which fields the file gave (GLM_GEN_HAS_*); the others are 0.
 * glm_model_stop_tokens includes its eos_token_id; glm-inference uses
 * do_sample / temperature / top_p / top_k as its sampling defaults when
 * the command line gives none. Returns 1 (and *out) when the package has
 * one, 0 (out zeroed) when not, TX_EINVAL for a NULL argument.
 */
#define GLM_GEN_HAS_EOS (1u << 0)
#define GLM_GEN_HAS_DO_SAMPLE (1u << 1)
#define GLM_GEN_HAS_TEMPERATURE (1u << 2)
#define GLM_GEN_HAS_TOP_P (1u << 3)
#define GLM_GEN_HAS_TOP_K (1u << 4)
#define GLM_GEN_MAX_TEMPERATURE 100.0f /* larger values are refused */
#define GLM_GEN_MAX_TOP_K 4096         /* the device's limit */
struct glm_generation_config {
    unsigned has; /* GLM_GEN_HAS_* */
    int n_eos;
    int32_t eos_token_ids[GLM_MAX_EOS];
    int do_sample;     /* 0 / 1 */
    float temperature; /* [0, GLM_GEN_MAX_TEMPERATURE] */
    float top_p;       /* (0, 1] */
    int top_k;         /* [0, GLM_GEN_MAX_TOP_K], 0 = off */
};
TX_API int glm_model_generation_config(const glm_model_t *model,
                                       struct glm_generation_config *out);

/* The model's stop tokens: eos_token_id of the config, then those of the
 * package's generation_config.json, plus the chat stop tokens of its
 * tokenizer (<|endoftext|>, <|user|>, <|observation|>), without duplicates.
 * Returns how many (may exceed cap). */
TX_API int glm_model_stop_tokens(const glm_model_t *model, int32_t *ids, int cap);

/*
 * The chat format glm_chat_encode uses (enum tx_chat_format): the one set by
 * glm_model_set_chat_format, else recognised from the text of the package's
 * chat_template (tokenizer_config.json): GLM-4 ("<|user|>\n", no <think>),
 * GLM-4.5/4.6 ("<|user|>\n", "/nothink") or GLM-4.7/5 ("<|user|>" then the
 * content, "<|assistant|><think>"). An unknown template fails with
 * TX_ENOTSUP (glm_chat_encode too) rather than render the wrong format; a
 * package without a template gets the format of its architecture and why
 * says so. why (may be NULL) receives one line: the format and the reason.
 */
TX_API int glm_model_chat_format(const glm_model_t *model, char *why, size_t whysz);
/* fmt: an enum tx_chat_format (see tx_chat_format_from_name), 0 = from the
 * package again. */
TX_API int glm_model_set_chat_format(glm_model_t *model, int fmt);

/* Encode a conversation with the GLM chat template of the model's
 * architecture ("[gMASK]<sop><|system|>...<|user|>...<|assistant|>").
 * flags: TX_CHAT_* (tx_tokenizer.h); the generation prompt is added.
 * *ids is malloc()ed (free() it). */
TX_API int glm_chat_encode(const glm_model_t *model, const struct tx_chat_message *msgs,
                           size_t n_msgs, unsigned flags, int32_t **ids, size_t *n_ids);

/* glm_chat_encode with tool use (libtx 2.3): tools_json, a JSON array of
 * tool definitions (OpenAI's "tools"), and tool_calls_json, NULL or one
 * entry per message (NULL, or the JSON array of an assistant message's
 * "tool_calls"), rendered as the model family's template renders them;
 * see tx_tokenizer_chat_render_tools (tx_tokenizer.h) and docs/libtx-glm.md,
 * "Tools". Bad JSON or shapes fail with TX_EINVAL naming the message. */
TX_API int glm_chat_encode_tools(const glm_model_t *model, const struct tx_chat_message *msgs,
                                 size_t n_msgs, const char *tools_json,
                                 const char *const *tool_calls_json, unsigned flags,
                                 int32_t **ids, size_t *n_ids);

/* Encode plain text (no template, no special prefix). *ids malloc()ed. */
TX_API int glm_tokenize(const glm_model_t *model, const char *text, int32_t **ids, size_t *n_ids);

/* ------------------------------------------------------------------------ */
/* Expert load balancing and expert parallel settings (article 5.1, 7)       */
/* ------------------------------------------------------------------------ */

enum glm_balance_mode {
    GLM_BALANCE_OFF = 0,  /* router as trained */
    GLM_BALANCE_ON = 1,   /* score -= lambda * load in every MoE layer */
    GLM_BALANCE_AUTO = 2, /* only in layers that currently have cold experts */
};

struct glm_moe_options {
    enum glm_balance_mode balance; /* default OFF */
    float lambda;                  /* penalty factor, default 0.2 (the article's) */
    /* config/expert_parallel.yaml keys; meaning on one device in
     * docs/libtx-glm.md, "Expert parallel settings". */
    int expert_parallel;   /* expert groups (default 1; must divide n_routed_experts) */
    float capacity_factor; /* per-pass capacity of an expert relative to the
                              uniform share (default 0 = unlimited) */
    float min_expert_util; /* cold threshold relative to the uniform share
                              (default 0.3) */
    int rsvd[4];
};

TX_API void glm_moe_defaults(struct glm_moe_options *o);
/* Read a YAML file with a "moe:" mapping (expert_parallel, capacity_factor,
 * min_expert_util, and optionally load_balance: on|off|auto, lambda) into
 * *o (keys not present keep their values). libyaml; errors name the key. */
TX_API int glm_moe_config_load(const char *path, struct glm_moe_options *o);
TX_API int glm_model_set_moe(glm_model_t *model, const struct glm_moe_options *o);
TX_API int glm_model_get_moe(const glm_model_t *model, struct glm_moe_options *o);

/*
 * Expert utilisation, from the live per-expert counters the device keeps
 * (MOE_ROUTE counts) since the load or the last reset. For layer l and
 * expert e, util = count / mean count of the layer (1 = the uniform share);
 * util_std is the standard deviation of util over the experts, in percent.
 */
struct glm_expert_stats {
    int n_moe_layers;
    int n_experts;
    int top_k;
    int expert_parallel;
    int *layer;              /* [n_moe_layers] model layer index */
    uint64_t *counts;        /* [n_moe_layers][n_experts] selections */
    double *util_std;        /* [n_moe_layers] percent */
    double *max_share;       /* [n_moe_layers] hottest expert's share of calls, percent */
    double *min_share;       /* [n_moe_layers] coldest expert's share, percent */
    int *cold;               /* [n_moe_layers] experts below min_expert_util */
    double *group_imbalance; /* [n_moe_layers] max/mean load of the expert groups */
    uint64_t *overflow;      /* [n_moe_layers] selections beyond capacity (all passes) */
    double overall_std;      /* util std over all (layer, expert) pairs, percent */
    double mean_layer_std;   /* mean of util_std */
    uint64_t total;          /* all selections */
};
TX_API int glm_model_expert_stats(glm_model_t *model, struct glm_expert_stats **out);
TX_API void glm_expert_stats_free(struct glm_expert_stats *st);
TX_API int glm_model_expert_stats_reset(glm_model_t *model);

/*
 * Expert cache counters (models loaded with the expert cache, info.streaming
 * == 2; all zero otherwise). An expert "use" is one (MoE layer, expert)
 * that a pass routes at least one row to. docs/glm-inference.md.
 */
struct glm_expert_cache_stats {
    uint64_t slots;               /* experts the cache holds */
    uint64_t slot_bytes;          /* device bytes of one slot */
    uint64_t cache_bytes;         /* device bytes of the cache */
    uint64_t experts;             /* routed experts of the model (all layers) */
    uint64_t hits;                /* uses found in the cache (loaded or being loaded) */
    uint64_t misses;              /* uses not there when the layer ran: read then */
    uint64_t prefetches;          /* experts read ahead of need (prediction) */
    uint64_t prefetch_useful;     /* of which used before being evicted */
    uint64_t evictions;           /* slots given to another expert */
    uint64_t bytes_read;          /* bytes read from the package into slots */
    uint64_t decode_tokens;       /* rows of passes where every row was a decode step */
    uint64_t decode_misses;       /* misses of those passes */
    uint64_t decode_bytes_read;   /* bytes read during those passes (misses + prefetches) */
    uint64_t decode_bytes_needed; /* stored bytes of the experts those passes used */
    int policy;                   /* 0: frequency + recency (LRFU), 1: plain LRU */
    int prefetch;                 /* 1: predicted prefetch on */
    int direct;                   /* 1: O_DIRECT reads (package larger than host RAM) */
    int rsvd[5];
};
TX_API int glm_model_expert_cache_stats(glm_model_t *model, struct glm_expert_cache_stats *out);

/* ------------------------------------------------------------------------ */
/* Validation against the original model (article 3.3)                      */
/* ------------------------------------------------------------------------ */

/*
 * Two FP32 host references run beside the device: one on the package's
 * weights expanded to FP32 (device vs it = the device's arithmetic: plan,
 * conversions), and one on the ORIGINAL checkpoint's weights (BF16/F16/F32
 * expanded to FP32; package reference vs it = the export's quantisation).
 * The original is the checkpoint the package records as its source
 * (metadata "source_path", verified against "source_hash"), or
 * glm_validate_options.original. Without it only the device arithmetic is
 * measured (report->original == 0, report->original_note says why).
 * The pass criterion is the article's: every input's cosine (over all its
 * positions' logits) of the device against the original >= threshold, and
 * no non-finite value anywhere in the outputs.
 */
enum glm_validate_original {
    GLM_VALIDATE_ORIGINAL_AUTO = 0,    /* use it when found and its hash matches */
    GLM_VALIDATE_ORIGINAL_REQUIRE = 1, /* error when it cannot be used */
    GLM_VALIDATE_ORIGINAL_NONE = -1,   /* device arithmetic only */
};

struct glm_validate_options {
    int n_inputs;     /* random inputs (0 = 100) */
    int n_tokens;     /* tokens per input (0 = 8) */
    uint64_t seed;    /* input generator seed */
    double threshold; /* pass if every cosine >= threshold (0 = 0.99) */
    int ref_threads;  /* reference threads (0 = 1) */
    /* progress callback after each input (may be NULL); cosine is the
     * input's pass figure (NaN for a non-finite output) */
    void (*progress)(void *user, int done, int total, double cosine);
    void *user;
    /* the original checkpoint (HF directory or .onnx) instead of the
     * recorded source path (NULL: the recorded one); with a path given a
     * hash mismatch is an error (TX_EINVAL), in AUTO mode without one it
     * is a note and validation falls back to device arithmetic only */
    const char *original;
    int use_original; /* enum glm_validate_original */
    int rsvd[1];
};

/* Statistics of one layer's output (residual stream after the layer; index
 * num_hidden_layers = the final norm output), over all inputs. */
struct glm_layer_stats {
    double mean, std, max_abs; /* of the device values */
    double ref_mean, ref_std, ref_max_abs;
    double cosine_min, cosine_mean; /* device vs reference, per input */
    double max_abs_err;
    /* discrete decisions of the layer, device vs reference (-1: none):
     * tokens whose routed expert set differs, and queries whose DSA key
     * selection differs, as fractions of those decided */
    double route_mismatch;
    double dsa_mismatch;
};

struct glm_validate_report {
    int n_inputs, n_tokens;
    double *cosine; /* [n_inputs] logits cosine similarity */
    double min_cosine, mean_cosine;
    int worst_input;
    double max_rel_err; /* max |dev - ref| / max |ref| over the logits */
    int n_layers;       /* num_hidden_layers + 1 */
    struct glm_layer_stats *layers;
    double threshold;
    int passed; /* n_nonfinite == 0 && min_cosine >= threshold */
    glm_precision_plan_t plan;
    double device_ms, reference_ms;

    /* --- against the original model (see above) ------------------------ */
    int original;         /* 1: the original's reference ran; cosine[] etc. are
                           * device vs original, else device vs package */
    char *original_path;  /* the checkpoint used (NULL if none) */
    char *original_note;  /* why it was not used / what to know (NULL: nothing) */
    char source_hash[32]; /* recorded by the package ("" for an old package) */
    /* worst single position of each input ([n_inputs], same pair as
     * cosine[]) and over all inputs */
    double *position_cosine;
    double min_position_cosine;
    int worst_position_input, worst_position;
    /* inputs with a non-finite value in the device's or a reference's
     * logits (they count as failed: cosine[] NaN) */
    int n_nonfinite;
    /* device vs package reference: device arithmetic alone */
    double *device_cosine; /* [n_inputs] */
    double device_min_cosine, device_mean_cosine;
    /* package reference vs original reference: quantisation alone
     * (1 when no original) */
    double *quant_cosine; /* [n_inputs] */
    double quant_min_cosine, quant_mean_cosine;
    /* per layer, package reference ("device" fields) vs original reference
     * ("ref" fields); NULL without the original */
    struct glm_layer_stats *quant_layers;
    /* Which layer type is responsible, measured on the worst input:
     *   device_alone[T]: cosine (device vs package) with only type T at its
     *     plan precision and every other type FP32;
     *   quant_alone[T]: cosine (package vs original reference) with only
     *     type T's weights from the package, every other from the original.
     * < -1: not measured (type absent, not quantised, or no original).
     * device_blame / quant_blame: the type with the lowest figure, or -1. */
    double device_alone[GLM_LAYER_TYPE_COUNT];
    double quant_alone[GLM_LAYER_TYPE_COUNT];
    int device_blame, quant_blame;
    /* 1: the original is an FP8 checkpoint and its reference ran in
     * float64 on the exactly dequantised weights (libtx 2.7) */
    int original_f64;
};

/* Runs the inputs on the device (one fresh sequence each), on the host
 * reference with the package's weights expanded to FP32 and, when found,
 * on the host reference with the original checkpoint's weights. */
TX_API int glm_validate(glm_model_t *model, const struct glm_validate_options *opt,
                        struct glm_validate_report **out);
/* glm_validate on real text instead of random ids (libtx 2.7): input k is
 * tokens[k * n_tokens, (k + 1) * n_tokens) for k < opt->n_inputs
 * (defaults as glm_validate's; opt->seed unused); TX_EINVAL when the
 * tokens hold fewer inputs or an id is outside the vocabulary. The
 * article's deployment check on held-out text. */
TX_API int glm_validate_tokens(glm_model_t *model, const struct glm_validate_options *opt,
                               const int32_t *tokens, size_t n_tokens,
                               struct glm_validate_report **out);
TX_API void glm_validate_report_free(struct glm_validate_report *r);

/* Per-layer outputs of a forward pass (for validation and TX_DEBUG dumps):
 * run ids at position 0 of a fresh internal sequence and copy the residual
 * stream after every layer and the final norm output into
 * layers[(num_hidden_layers + 1) x n x hidden] (may be NULL), logits into
 * [n x vocab] (may be NULL). */
TX_API int glm_forward_layers(glm_model_t *model, const int32_t *ids, int n, float *layers,
                              float *logits);

/* ------------------------------------------------------------------------ */
/* Measurement helpers                                                       */
/* ------------------------------------------------------------------------ */

/*
 * Streaming-read bandwidth of device memory as the device's cores see it:
 * `threads` threads (0 = the device's core count) sum 64-bit words of a
 * working set of at least 4 x the host's last-level cache (sysfs
 * /sys/devices/system/cpu/cpuN/cache, summed over the LLC instances; or
 * TX_LLC_BYTES in the environment, e.g. "480M"), best of `reps` (0: 3)
 * passes. The working set is the model's mapped weights when they are that
 * large, else a scratch buffer of device memory of 4 x LLC, allocated and
 * freed by the call.
 *
 * Returns TX_OK with either gbs > 0, or gbs = 0 and `refused` saying why no
 * figure was measured (the LLC size is unknown, or the device has no room
 * for the scratch buffer); an error code for bad arguments or a failing
 * device.
 */
struct glm_read_bandwidth {
    double gbs;               /* GB/s (1e9 bytes/s); 0 when refused */
    uint64_t working_set;     /* bytes read per pass */
    uint64_t llc_bytes;       /* host last-level cache used for sizing; 0: unknown */
    uint64_t min_working_set; /* 4 x llc_bytes */
    uint32_t llc_level;       /* 3 for an L3; 0: from TX_LLC_BYTES */
    uint32_t llc_instances;   /* distinct LLC instances summed */
    int32_t threads;
    int32_t scratch;     /* 1: a scratch buffer was read (the weights are smaller) */
    char llc_source[32]; /* "sysfs" or "TX_LLC_BYTES" */
    char refused[320];   /* "" or why there is no figure */
};
TX_API int glm_probe_read_bandwidth(glm_model_t *model, int threads, int reps,
                                    struct glm_read_bandwidth *out);

/* The same as one figure: the working set is max(bytes, 4 x LLC) (bytes 0:
 * as glm_probe_read_bandwidth); TX_ENOTSUP (tx_last_error() says why) where
 * glm_probe_read_bandwidth would refuse. */
TX_API int glm_measure_read_bandwidth(glm_model_t *model, int threads, uint64_t bytes, int reps,
                                      double *gbs);

/* ------------------------------------------------------------------------ */
/* Expert parallelism: one model on several devices, one or several          */
/* processes (libtx 2.3, docs/multi-device.md)                               */
/* ------------------------------------------------------------------------ */
/*
 * One model on N devices. The device list is global and ordered (the
 * `--device A,B,...` list); device 0 ("the primary") holds everything but
 * the routed experts -- embedding, attention, dense and shared MLPs,
 * routers, norms, lm_head, the KV caches and activations -- and runs the
 * pass as on one device. The routed experts are partitioned: the
 * expert_parallel groups of every MoE layer are assigned to devices
 * (placement below); device d holds its experts in a buffer labelled
 * "<name>_Experts_d<d>" (on the primary too: "<name>_Experts_d0").
 *
 * Each MoE layer: MOE_ROUTE on the primary; the host reads the routing and
 * builds, per device, the list of (row, expert) pairs whose expert the
 * device owns, copies each pair's input row straight from the primary's
 * mapped activations into that device's mapped pair buffer (no staging
 * copy); every device then runs one MOE_FFN over its pairs (top_k 1, gate
 * weight 1, so each pair's output is the expert's raw output) -- all jobs
 * submitted, then all waited for; the host combines row t as
 *   h[t] = fma(w[t,k], out[t,k], h[t])   for the row's experts in increasing id
 * (the order and rounding the hardware interface defines for MOE_FFN's own
 * sum), so the result
 * is the same bits as one MOE_FFN on one device (FP32 plan; other plans:
 * the same as one device with that plan, within its tolerance).
 *
 * Placement (glm_ep_options, docs/multi-device.md "Placement"): groups =
 * expert_parallel (0: every expert a group). Every device has a room (its
 * free memory at load less its tables, scratch and pair buffer; device 0
 * also less reserve_bytes). By memory (default): the expert bytes are
 * shared at equal memory utilisation, device 0's resident part (the
 * primary and reserve_bytes) included, so device 0 and smaller devices
 * get fewer experts; with expert_load (counters, e.g. a previous run's
 * MOE_ROUTE counts): per MoE layer greedy LPT of the groups by their
 * selections. Only within the rooms: TX_ENOSPC naming the shortfall when
 * the experts fit nowhere. More devices than groups is an error. Under a
 * transport every rank sends rank 0 its devices' memory at load; rank 0
 * places and broadcasts. glm_model_ep_rebalance places again by the live
 * counters and moves the experts whose device changes.
 *
 * Several processes (MPI or anything else): the library never links MPI;
 * the caller passes a transport. Every rank calls glm_model_load_ep with
 * its share of the global device list (glm_ep_share: rank r drives the
 * contiguous share [first, first + count) in rank order), the same package
 * path, load options and glm_ep_options (n_devices_total = the length of
 * the whole list). Loading is collective (all ranks fail if one fails).
 * Rank 0 owns the primary (its first device is global device 0), runs the
 * passes, tokenisation, sampling and I/O with the ordinary API; ranks > 0
 * call glm_ep_worker_run(model), which serves the MoE layers until rank
 * 0's glm_model_free, then returns TX_OK (the worker then frees its model).
 * Protocol per MoE layer (all collective, root 0):
 *   bcast   header: op (1 layer, 2 stop, 3 rebalance: then the placement
 *           [n_moe][E] int16, a status round, one alltoallv of the experts
 *           that change rank), MoE layer index, expert precision,
 *           submit flags, pairs per global device [n_devices_total]
 *   alltoallv  rank 0 -> rank r: its pairs (int32 expert, f32 row [dim])
 *   alltoallv  rank r -> rank 0: int32 status, 4 bytes padding, then the
 *              pairs' outputs (f32 [dim] each)
 * A rank > 0 model accepts only glm_ep_worker_run, glm_model_ep_stats,
 * glm_model_info and glm_model_free.
 */
#define GLM_EP_MAX_DEVICES 64

struct glm_ep_transport {
    int rank, size; /* this process's rank in [0, size); size >= 1 */
    void *ctx;      /* passed back to the callbacks */
    /* Collective, as MPI_Alltoallv on bytes: sends scounts[i] bytes from
     * sbuf + sdispls[i] to rank i and receives rcounts[i] bytes from rank i
     * into rbuf + rdispls[i]; arrays of `size` entries. 0 on success, any
     * other value is an error (the model call fails with TX_EIO). */
    int (*alltoallv)(void *ctx, const void *sbuf, const size_t *scounts, const size_t *sdispls,
                     void *rbuf, const size_t *rcounts, const size_t *rdispls);
    /* Collective, as MPI_Bcast of `bytes` bytes from rank root. */
    int (*bcast)(void *ctx, void *buf, size_t bytes, int root);
};

struct glm_ep_options {
    const struct glm_ep_transport *transport; /* NULL: every device in this process */
    int n_devices_total;         /* with a transport: the whole list's length (0: n_local) */
    int expert_parallel;         /* expert groups per MoE layer (0: n_routed_experts); divides it */
    const uint64_t *expert_load; /* NULL, or [n_moe_layers * n_routed_experts] counters */
    uint64_t n_expert_load;      /* entries of expert_load */
    /* device 0 bytes kept free for KV caches and session activations: the
     * placement counts them as resident on device 0 (0: none) */
    uint64_t reserve_bytes;
    uint32_t rsvd[6];
};

/* The devices global index range of `rank` of `size` for a list of n_total
 * devices: first = rank * n_total / size, count = the next rank's first -
 * first (>= 1 needs n_total >= size: TX_EINVAL otherwise). */
TX_API int glm_ep_share(int n_total, int rank, int size, int *first, int *count);
/* One model on devs[0 .. n) of this process (n >= 1; n = 1 is glm_model_load
 * with the experts in their own buffer). The devices must be distinct. */
TX_API int glm_model_load_multi(tx_device_t **devs, int n, const char *smd_path,
                                const struct glm_load_options *opt, glm_model_t **out);
/* The general form: this rank's n_local devices (ep may be NULL). */
TX_API int glm_model_load_ep(tx_device_t **devs, int n_local, const char *smd_path,
                             const struct glm_load_options *opt, const struct glm_ep_options *ep,
                             glm_model_t **out);
/* Ranks > 0: serve MoE layers until rank 0 frees its model. */
TX_API int glm_ep_worker_run(glm_model_t *model);

struct glm_ep_device_stats {
    int rank;              /* the rank driving it */
    int local;             /* 1: driven by this process */
    uint32_t experts;      /* (MoE layer, expert) pairs placed on it */
    uint64_t expert_bytes; /* device memory of its expert buffer */
    uint64_t pairs;        /* (row, expert) pairs it computed */
    uint64_t bytes_in;     /* dispatch bytes sent to it (ids + rows) */
    uint64_t bytes_out;    /* output bytes sent back */
    double compute_ms;     /* device busy time of its MOE_FFN jobs (local devices) */
};
struct glm_ep_stats {
    int n_devices, n_ranks, rank;
    int expert_parallel;  /* groups per MoE layer used by the placement */
    uint64_t layers;      /* MoE layer passes run */
    uint64_t tokens;      /* rows of those passes (sum over layers) */
    double dispatch_ms;   /* host: routing read + row copies + sends */
    double wait_ms;       /* host: from the last submit to the last result */
    double combine_ms;    /* host: the weighted sums */
    uint32_t dim;
    struct glm_ep_device_stats dev[GLM_EP_MAX_DEVICES];
};
/* Figures of a multi-device model (TX_EINVAL for a one-device model). */
TX_API int glm_model_ep_stats(glm_model_t *model, struct glm_ep_stats *out);
/* Global device index of expert e of MoE layer mi (-1: bad arguments or
 * not a multi-device model). */
TX_API int glm_model_ep_owner(const glm_model_t *model, int moe_layer, int expert);
/* Rank 0 (or the one process): place the experts again by the live
 * selection counters (glm_model_expert_stats counts since the load or the
 * last reset), per MoE layer greedy LPT within every device's room, and
 * move the experts whose device changes -- slot to slot through the two
 * devices' mappings, over the transport (alltoallv) when the two devices
 * belong to different ranks; ranks > 0 follow inside glm_ep_worker_run.
 * Output is unchanged (the combine order is by expert id). No counters
 * yet: TX_OK, nothing moved. flags: 0. Not during a pass (takes the model
 * lock). TX_ENOSPC (nothing moved) when the new placement does not fit. */
TX_API int glm_model_ep_rebalance(glm_model_t *model, unsigned flags);

/* Placement figures (libtx 2.4; struct glm_ep_stats keeps its 2.3 layout):
 * per device the memory the placement saw at load and the live selections
 * of the experts it owns now; the rebalances so far (imbalance: max / mean
 * of the devices' selections by the live counters; rank 0). TX_EINVAL for
 * a one-device model. */
struct glm_ep_device_placement {
    uint64_t mem_size;       /* the device's usable memory (heap) at load */
    uint64_t room_bytes;     /* bytes its experts could take at load (free - reserves) */
    uint64_t resident_bytes; /* bytes of the model besides its experts (device 0) */
    uint64_t selections;     /* rank 0: live MOE_ROUTE counts of the experts it owns now */
};
struct glm_ep_placement_stats {
    int n_devices;
    uint32_t rebalances;         /* rebalances run */
    uint64_t experts_moved;      /* (MoE layer, expert) pairs that changed device, all rebalances */
    uint64_t bytes_moved;        /* expert bytes copied between devices for them */
    uint64_t bytes_moved_remote; /* of which over the transport */
    double imbalance;            /* now, with the current placement */
    double imbalance_before;     /* the last rebalance: with the placement it replaced */
    double imbalance_after;      /* the last rebalance: with the placement it made */
    uint64_t rsvd[4];
    struct glm_ep_device_placement dev[GLM_EP_MAX_DEVICES];
};
TX_API int glm_model_ep_placement_stats(glm_model_t *model, struct glm_ep_placement_stats *out);

/* ------------------------------------------------------------------------ */
/* Decode pass timing (libtx 2.4)                                            */
/* ------------------------------------------------------------------------ */

/* Sums over the model's decode passes so far (passes whose every segment is
 * one token: glm_decode*, glm_eval of one token): wall time from the pass's
 * entry to its last job waited for, of which the host's time until the
 * first job was submitted (building the commands of layer 0, see
 * docs/glm-inference.md) and the device's (its jobs' end - start). wall -
 * device is the host's share of a decode step. Any pointer may be NULL. */
struct glm_decode_times {
    uint64_t passes, jobs;
    double wall_ms, build_ms, device_ms;
    /* libtx 2.6: passes that ran the decode graph (recorded once per
     * session set and plan, patched per token: docs/libtx-glm.md) */
    uint64_t replays;
    double rsvd[3];
};
TX_API int glm_model_decode_times(glm_model_t *model, struct glm_decode_times *out);
/* libtx 2.8: the same sums over the other forward passes (prefill: a
 * segment of more than one token; replays stay 0). A prompt's passes up to
 * its sampled token are the time to the first token: device_ms is its
 * compute, wall_ms - device_ms the host's share (building the commands,
 * job round trips, the expert cache's reads), jobs the round trips. */
TX_API int glm_model_prefill_times(glm_model_t *model, struct glm_decode_times *out);

#ifdef __cplusplus
}
#endif
#endif
