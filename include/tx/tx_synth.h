/* SPDX-License-Identifier: MIT */
/*
 * Synthetic GLM checkpoints in the real formats (the library behind
 * glm-synth): config.json with the field set the real checkpoints ship,
 * BF16 safetensors with the real tensor names and shapes (sharded with
 * model.safetensors.index.json for the larger presets) or an ONNX model,
 * and the tokenizer copied from a tokenizer directory.
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
#include <tx/tx_model.h>

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

struct tx_synth_opts {
    enum glm_arch arch;
    enum tx_synth_preset preset;
    uint64_t seed;
    enum tx_synth_format format;
    /* directory holding tokenizer.json (+ tokenizer_config.json), copied
     * into the output; its vocabulary (model vocab and added tokens) sets
     * vocab_size (rounded up to a multiple of 128). NULL: no tokenizer, and
     * vocab_size must be given. */
    const char *tokenizer_dir;
    int vocab_size; /* 0: from the tokenizer */
    /* ONNX: -1 preset default (inline for tiny, external otherwise), 0
     * inline, 1 external data in model.onnx.data */
    int onnx_external;
    uint64_t shard_bytes; /* HF: 0 preset default (tiny: one file) */
    int dense_ffn;        /* 1: no block structure in FFN/expert weights */
    int threads;          /* 0: all CPUs */
    int progress;         /* 1: progress lines on stderr */
};

/* The config.json text (malloc'd) of an architecture/preset, with the
 * given vocab_size. */
TX_API char *tx_synth_config_json(enum glm_arch arch, enum tx_synth_preset preset, int vocab_size);

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
