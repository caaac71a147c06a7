/* SPDX-License-Identifier: MIT */
/*
 * A GLM model as found on disk, ready to convert: a Hugging Face checkpoint
 * directory or an ONNX model, with its config (tx/glm_config.h), tokenizer
 * and every tensor the architecture expects, validated.
 *
 * Hugging Face directory: config.json, the safetensors files (single,
 * sharded with model.safetensors.index.json, or a set of *.safetensors),
 * tokenizer.json (and tokenizer_config.json) if present.
 *
 * ONNX file (*.onnx): the graph's initializers are the tensors; their names
 * are the Hugging Face parameter names (what torch.onnx.export keeps for
 * parameters, e.g. "model.layers.0.self_attn.q_proj.weight"). The config is
 * the metadata_props entry "config" (the config.json text) or else the
 * config.json next to the .onnx file; the tokenizer is the tokenizer.json
 * next to it. Graph nodes are not executed: the architecture comes from the
 * config.
 *
 * Validation: every tensor of glm_config_tensor_list() must be present with
 * that shape and a BF16, F16 or F32 dtype; the message names the file and
 * the tensor. FP8 block-quantised checkpoints (quantization_config
 * quant_method "fp8", fmt "e4m3", activation_scheme "dynamic",
 * weight_block_size [128, 128]; any other quantization_config is refused
 * naming the field and value) may store a matrix as F8_E4M3 with its F32
 * or BF16 "<name>_scale_inv" [ceil(N/128), ceil(K/128)]: the scales are
 * checked (present, shape, finite and >= 0) and bound to the tensor
 * (tx_tensor.scale_inv), so tx_tensor_read_f32 returns the dequantised
 * weights. Tensors of the MTP layers (model.layers.N with
 * num_hidden_layers <= N < num_hidden_layers + num_nextn_predict_layers, a
 * layer that has its eh_proj) and known non-parameter buffers
 * (*.rotary_emb.inv_freq) are reported (tx_ckpt_ignored) and otherwise
 * ignored; any other tensor is an error naming it (a renamed parameter, or
 * a decoder layer a lowered num_hidden_layers would drop).
 */
#ifndef TX_CHECKPOINT_H
#define TX_CHECKPOINT_H

#include <tx/glm_config.h>
#include <tx-internal/tx_model.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tx_ckpt_format {
    TX_CKPT_HF = 1,   /* Hugging Face checkpoint directory */
    TX_CKPT_ONNX = 2, /* ONNX model */
};

/* One expected tensor: what the architecture says and where it is. */
struct tx_ckpt_tensor {
    struct glm_tensor_info info; /* name, shape, role, class, layer, expert */
    const struct tx_tensor *t;   /* the tensor in the input file */
};

struct tx_ckpt;

TX_API int tx_ckpt_open(const char *path, struct tx_ckpt **out, char *err, size_t errsz);
TX_API void tx_ckpt_close(struct tx_ckpt *c);

TX_API enum tx_ckpt_format tx_ckpt_format(const struct tx_ckpt *c);
TX_API const char *tx_ckpt_path(const struct tx_ckpt *c);
TX_API const struct glm_config *tx_ckpt_config(const struct tx_ckpt *c);
/* The config.json text as found (NUL-terminated). */
TX_API const char *tx_ckpt_config_json(const struct tx_ckpt *c, size_t *len);
/* Path of tokenizer.json / tokenizer_config.json, or NULL if absent. */
TX_API const char *tx_ckpt_tokenizer_path(const struct tx_ckpt *c);
TX_API const char *tx_ckpt_tokenizer_config_path(const struct tx_ckpt *c);
/* Path of generation_config.json next to the model, or NULL if absent. */
TX_API const char *tx_ckpt_generation_config_path(const struct tx_ckpt *c);

/* The expected tensors, in glm_config_tensor_list() order. */
TX_API size_t tx_ckpt_count(const struct tx_ckpt *c);
TX_API const struct tx_ckpt_tensor *tx_ckpt_tensor(const struct tx_ckpt *c, size_t i);
TX_API const struct tx_ckpt_tensor *tx_ckpt_find(const struct tx_ckpt *c, const char *name);
/* Bytes of the expected tensors in the input. */
TX_API uint64_t tx_ckpt_bytes(const struct tx_ckpt *c);

/* What the expected tensors are stored as: tensors and bytes per element
 * type and, for an FP8 checkpoint, the block scales bound to its F8_E4M3
 * weights (quant_fp8 = 1, blocks of block_rows x block_cols). */
struct tx_ckpt_storage {
    uint64_t tensors[TX_ELEM_COUNT], bytes[TX_ELEM_COUNT];
    uint64_t scale_tensors, scale_bytes;
    int quant_fp8;
    uint32_t block_rows, block_cols;
};
TX_API const struct tx_ckpt_storage *tx_ckpt_storage(const struct tx_ckpt *c);

/* Tensors present but not used: *is_mtp = 1 for MTP-layer tensors, 0 for
 * known non-parameter buffers (*.rotary_emb.inv_freq). */
TX_API size_t tx_ckpt_n_ignored(const struct tx_ckpt *c);
TX_API const char *tx_ckpt_ignored(const struct tx_ckpt *c, size_t i, int *is_mtp);

/* The MTP (NextN) layer model.layers.{num_hidden_layers} when the
 * checkpoint has all of it (eh_proj, enorm, hnorm, the decoder layer with
 * its attention and MoE, shared_head.norm) in BF16, F16 or F32: its
 * tensors (then not listed by tx_ckpt_ignored), in the order of the
 * catalogue; 0 otherwise (the MTP tensors are then ignored). Not part of
 * tx_ckpt_count / tx_ckpt_source_hash. Since libtx 2.8. */
TX_API size_t tx_ckpt_mtp_count(const struct tx_ckpt *c);
TX_API const struct tx_ckpt_tensor *tx_ckpt_mtp_tensor(const struct tx_ckpt *c, size_t i);

/* Content hash of the source tensors, recorded in a package's metadata
 * ("source_hash") so glm-inference --validate can find out whether a model
 * on disk is the one the package was made from: a CRC32C chained over, for
 * every expected tensor in tx_ckpt_tensor() order, its name (with the NUL),
 * element type (u32), rank (u32), dims (u64 each) and the CRC32C of its raw
 * bytes as stored in the checkpoint (all little-endian). Reads every tensor
 * once. tx_ckpt_hash_tensor() is one step of the chain (for writers that
 * hash the bytes while streaming them). */
TX_API int tx_ckpt_source_hash(const struct tx_ckpt *c, uint32_t *hash, char *err, size_t errsz);
TX_API uint32_t tx_ckpt_hash_tensor(uint32_t h, const struct tx_tensor *t, uint32_t data_crc);
/* After an F8_E4M3 weight's own step, the step of its bound scale tensor
 * (t->scale_inv: name, type, dims, CRC32C of its bytes) */
TX_API uint32_t tx_ckpt_hash_scales(uint32_t h, const struct tx_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
