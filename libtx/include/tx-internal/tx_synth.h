/* SPDX-License-Identifier: MIT */
/*
 * Synthetic GLM checkpoints in the real formats (the library behind
 * glm-synth): config.json with the field set the real checkpoints ship,
 * BF16 safetensors with the real tensor names and shapes (sharded with
 * model.safetensors.index.json for the larger presets) or an ONNX model,
 * and the tokenizer of a tokenizer directory with GLM's special tokens
 * added (tx_synth_glm_tokenizer).
 *
 * Weights are deterministic pseudo-random functions of (seed, tensor name,
 * element index), normal, scaled so that the forward pass stays healthy
 * across layers like a trained model's: embedding rows N(0, 1); matrices
 * std 1/sqrt(fan_in) (unit-scale outputs; the router's logits have unit
 * spread), except those writing into the residual stream (o_proj and every
 * down_proj), std 0.1/sqrt(fan_in), so each layer adds a correction of
 * ~10-20% of the residual; norm weights 1 + N(0, 0.05^2); biases
 * N(0, 0.02^2); the router's e_score_correction_bias N(0, 0.02^2), stored
 * in F32 as the real checkpoints do. FFN and expert matrices (dense MLP, shared and routed
 * experts) have block-structured magnitudes unless dense_ffn is set: in
 * every row one block of 32 columns in each pair of blocks is "weak"
 * (scaled by 0.05; the overall std is unchanged), like the weights of a
 * model trained for structured sparsity, so that glm-export --optimize
 * sparse at 50% removes only ~0.3% of their energy.
 */
#ifndef TX_SYNTH_H
#define TX_SYNTH_H

#include <tx/glm_config.h>
#include <tx-internal/tx_model.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tx_synth_preset {
    TX_SYNTH_TINY = 0,  /* a few layers, dims of tens: unit tests */
    TX_SYNTH_SMALL = 1, /* ~80 MB: the demo */
    TX_SYNTH_BENCH = 2, /* ~1.8 GB: decode bandwidth benchmarks */
};

enum tx_synth_format {
    TX_SYNTH_HF = 0,   /* config.json + safetensors */
    TX_SYNTH_ONNX = 1, /* model.onnx (+ model.onnx.data) */
};

/* "tiny", "small", "bench" -> preset, -1 if unknown. */
TX_API int tx_synth_preset_parse(const char *s);
TX_API const char *tx_synth_preset_name(enum tx_synth_preset p);

enum { TX_SYNTH_ROUTING_UNIFORM = 0, TX_SYNTH_ROUTING_SKEWED = 1 };

struct tx_synth_opts {
    enum glm_arch arch;
    enum tx_synth_preset preset;
    uint64_t seed;
    enum tx_synth_format format;
    /* directory holding tokenizer.json (+ tokenizer_config.json), written
     * into the output with GLM's special tokens added
     * (tx_synth_glm_tokenizer); the resulting vocabulary sets vocab_size
     * (rounded up to a multiple of 128) and the config's eos_token_id /
     * pad_token_id. NULL: no tokenizer, and vocab_size must be given. */
    const char *tokenizer_dir;
    int vocab_size; /* 0: from the tokenizer */
    /* ONNX: -1 preset default (inline for tiny, external otherwise), 0
     * inline, 1 external data in model.onnx.data */
    int onnx_external;
    uint64_t shard_bytes; /* HF: 0 preset default (tiny: one file) */
    int dense_ffn;        /* 1: no block structure in FFN/expert weights */
    /* Routers (docs/glm-inference.md, "Synthetic routing"): UNIFORM (random
     * rows, the default) or SKEWED: hot experts (routing_skew, >= 0, 1 =
     * about 35% of the calls to the hottest eighth on the bench preset)
     * and layer-to-layer correlation of the choices (routing_corr in
     * [0, 1]). */
    int routing;
    float routing_skew, routing_corr;
    int n_experts; /* routed experts per MoE layer (0: the preset's) */
    int threads;   /* 0: all CPUs */
    int progress;  /* 1: progress lines on stderr */
    /* config.json overrides "key=value[,key=value...]" applied to the
     * preset's config before the tensors are made (glm-synth --config-set;
     * values: integer, number, true/false, null or a string); NULL: none */
    const char *config_set;
    /* 1: an FP8 block-quantised checkpoint in the layout of the FP8
     * releases (HF format only): config.json's quantization_config
     * {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme":
     * "dynamic", "weight_block_size": [128, 128]}; the projection matrices
     * of attention, dense MLP and experts (embedding, lm_head, routers,
     * norms and biases stay BF16/F32) stored F8_E4M3, each followed by its
     * F32 "<name>_scale_inv" [ceil(N/128), ceil(K/128)], quantised from
     * the synthetic values per 128 x 128 block as Hugging Face's
     * FineGrainedFP8 quantiser does (scale = 448 / amax, scale_inv =
     * 1 / scale; narrower edge blocks when N or K is not a multiple of
     * 128). */
    int fp8;
    /* 1: the whole MTP (NextN) layer in the real layout (eh_proj, enorm,
     * hnorm, a decoder layer with attention and MoE, shared_head.norm),
     * which glm-export keeps and --spec-type mtp runs; 0: its four
     * projection/norm tensors only, as before (glm-export ignores them) */
    int mtp_layer;
};

/* The config.json text (malloc'd) of an architecture/preset, with the
 * given vocab_size, and eos_token_id / pad_token_id of the tokenizer
 * glm-synth writes from the Qwen3 one (TX_SYNTH_QWEN3_GLM_*). */
TX_API char *tx_synth_config_json(enum glm_arch arch, enum tx_synth_preset preset, int vocab_size);

/* The same with the given stop tokens (eos_token_id, 1..8 ids) and
 * pad_token_id. NULL for a bad argument or out of memory. */
TX_API char *tx_synth_config_json_ex(enum glm_arch arch, enum tx_synth_preset preset,
                                     int vocab_size, const int32_t *eos, int n_eos, int32_t pad);

/*
 * GLM's special tokens, in the order of GLM-4.5's and GLM-5's tokenizers
 * (which put them at consecutive ids right after their BPE vocabulary:
 * 151329.. for GLM-4.5/4.6/4.7, 154820.. for GLM-5):
 * <|endoftext|> [MASK] [gMASK] [sMASK] <sop> <eop> <|system|> <|user|>
 * <|assistant|> <|observation|> <|begin_of_image|> <|end_of_image|>
 * <|begin_of_video|> <|end_of_video|> <|begin_of_audio|> <|end_of_audio|>
 * <|begin_of_transcription|> <|end_of_transcription|> <|code_prefix|>
 * <|code_middle|> <|code_suffix|> <think> </think> <tool_call> </tool_call>
 * <tool_response> </tool_response> <arg_key> </arg_key> <arg_value>
 * </arg_value> /nothink <|begin_of_box|> <|end_of_box|> <|image|> <|video|>
 */
#define TX_SYNTH_GLM_SPECIAL_COUNT 36
TX_API const char *tx_synth_glm_special_token(int i); /* NULL outside 0..35 */

/* Ids in the tokenizer glm-synth makes from the Qwen3 one (151643 BPE
 * tokens, 26 added tokens): the 7 GLM specials Qwen3 already has keep their
 * ids (<|endoftext|> 151643, <tool_call> 151657, </tool_call> 151658,
 * <tool_response> 151665, </tool_response> 151666, <think> 151667, </think>
 * 151668), the 29 others follow at 151669..151697 in the order above. */
#define TX_SYNTH_QWEN3_GLM_ENDOFTEXT 151643
#define TX_SYNTH_QWEN3_GLM_GMASK 151670
#define TX_SYNTH_QWEN3_GLM_SOP 151672
#define TX_SYNTH_QWEN3_GLM_SYSTEM 151674
#define TX_SYNTH_QWEN3_GLM_USER 151675
#define TX_SYNTH_QWEN3_GLM_ASSISTANT 151676
#define TX_SYNTH_QWEN3_GLM_OBSERVATION 151677
#define TX_SYNTH_QWEN3_GLM_VOCAB 151808 /* 151698 rounded up to 128 */

/* A tokenizer made GLM-ready by tx_synth_glm_tokenizer. */
struct tx_synth_tokenizer {
    char *tokenizer_json;        /* malloc'd, NUL-terminated */
    char *tokenizer_config_json; /* malloc'd; NULL when the source has none */
    int vocab_size;              /* largest id + 1, rounded up to 128 */
    int32_t eos[3];              /* <|endoftext|>, <|user|>, <|observation|> */
    int32_t pad;                 /* <|endoftext|> */
    int n_added;                 /* special tokens added (0 for a GLM tokenizer) */
    int32_t first_added;         /* id of the first added one (-1 if none) */
};

/*
 * Reads DIR/tokenizer.json (+ DIR/tokenizer_config.json if present) and
 * adds every GLM special token whose content is not already a token as an
 * added token ("special": true, not normalized) at the ids after the
 * largest existing one, in the order above; tokens already present keep
 * their id and entry. tokenizer_config.json gets the new tokens in
 * added_tokens_decoder and additional_special_tokens, eos_token and
 * pad_token "<|endoftext|>", and a chat_template in the GLM-4.5 (glm4) or
 * GLM-5 (glm5) form (system, user, assistant and tool turns, no tool
 * definitions). A tokenizer that already has all of them (a real GLM one)
 * comes out unchanged apart from JSON formatting. Free with
 * tx_synth_tokenizer_free.
 */
TX_API int tx_synth_glm_tokenizer(const char *tokenizer_dir, enum glm_arch arch,
                                  struct tx_synth_tokenizer *out, char *err, size_t errsz);
TX_API void tx_synth_tokenizer_free(struct tx_synth_tokenizer *t);

/* vocab_size for a tokenizer.json: 1 + the largest id of its model vocab
 * and added tokens, rounded up to a multiple of 128. */
TX_API int tx_synth_vocab_for_tokenizer(const char *tokenizer_json_path, int *vocab_size, char *err,
                                        size_t errsz);

/* The synthetic value of element i of a tensor (what tx_synth_write stores,
 * before rounding to the stored dtype). */
TX_API float tx_synth_value(const struct glm_tensor_info *t, uint64_t seed, int dense_ffn,
                            uint64_t i);

/* Writes the checkpoint into outdir (created if missing). Files are
 * written through temporary names: an error leaves no partial file. */
TX_API int tx_synth_write(const char *outdir, const struct tx_synth_opts *o, char *err,
                          size_t errsz);

#ifdef __cplusplus
}
#endif
#endif
