/* SPDX-License-Identifier: MIT */
/*
 * Hugging Face `tokenizer.json` byte-level BPE tokenizer and the GLM chat
 * template.
 *
 * Supported (see docs/tokenizer.md for the exact semantics):
 *   normalizer     null, NFC, NFD, NFKC, NFKD, Sequence of those
 *   pre_tokenizer  null, Split (Regex or String pattern, every behavior,
 *                  invert), ByteLevel (add_prefix_space, use_regex),
 *                  Digits, Sequence of those
 *   model          BPE: vocab, merges as "a b" strings or [a, b] arrays,
 *                  unk_token, fuse_unk, byte_fallback, ignore_merges,
 *                  continuing_subword_prefix, end_of_word_suffix
 *   added_tokens   special and non-special, single_word, lstrip, rstrip,
 *                  normalized
 *   post_processor ByteLevel (no effect on ids), TemplateProcessing,
 *                  RobertaProcessing, BertProcessing, Sequence: the tokens
 *                  they add are only added with TX_TOKENIZER_ADD_SPECIAL
 *   decoder        null (tokens joined by spaces), ByteLevel, Sequence of
 *                  ByteLevel
 * Anything else is rejected at load time with TX_ENOTSUP and a message.
 *
 * A loaded tokenizer is immutable apart from an internal, lock-protected
 * word cache: every function taking a `const struct tx_tokenizer *` may be
 * called from any number of threads at once.
 *
 * Errors follow the libtx convention of tx_error.h: functions that can
 * fail return 0 (or a count / an id) on success and a negative enum
 * tx_status code on failure:
 *   TX_EINVAL   malformed tokenizer file, bad argument, input text that is
 *               not valid UTF-8, a token id outside the vocabulary
 *   TX_ENOTSUP  a component type or option this implementation does not have
 *   TX_ENOENT   file or token not found
 *   TX_EIO      read error
 *   TX_ENOMEM   out of memory
 * The message naming the problem (file, JSON path, byte offset, token id)
 * is available from tx_last_error() in the calling thread and, for the
 * functions with an `err` parameter, is also written to err[0..errsz-1]
 * when err is not NULL (always NUL-terminated; 512 bytes is plenty).
 * Nothing prints, exits or aborts on bad input.
 */
#ifndef TX_TOKENIZER_H
#define TX_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include <tx/tx_error.h> /* enum tx_status, tx_last_error() */

#ifdef __cplusplus
extern "C" {
#endif

struct tx_tokenizer;

/* ------------------------------------------------------------------ */
/* Loading */

/* Reads and parses a tokenizer.json file. */
TX_API int tx_tokenizer_load_file(const char *path, struct tx_tokenizer **out, char *err,
                                  size_t errsz);

/* Parses tokenizer.json content held in memory (len bytes, no terminator
 * needed; e.g. the copy embedded in an .smd package). */
TX_API int tx_tokenizer_load_buffer(const void *json, size_t len, struct tx_tokenizer **out,
                                    char *err, size_t errsz);

TX_API void tx_tokenizer_free(struct tx_tokenizer *tok);

/* ------------------------------------------------------------------ */
/* Encoding */

enum tx_tokenizer_encode_flags {
    /* Treat special added tokens ("special": true) as plain text instead of
     * matching them (HF `split_special_tokens=True`). Non-special added
     * tokens are still matched. */
    TX_TOKENIZER_NO_SPECIAL = 1u << 0,
    /* Add the tokens of the post-processor (e.g. a TemplateProcessing
     * "[gMASK]<sop>" prefix), HF `add_special_tokens=True`. Off by default. */
    TX_TOKENIZER_ADD_SPECIAL = 1u << 1,
};

/*
 * Encodes `len` bytes of UTF-8 text (embedded NULs allowed) into token ids.
 * On success returns 0 and stores a malloc()ed array in *ids (free() it;
 * NULL when *n_ids is 0) and its length in *n_ids.
 */
TX_API int tx_tokenizer_encode(const struct tx_tokenizer *tok, const char *text, size_t len,
                               unsigned flags, int32_t **ids, size_t *n_ids, char *err,
                               size_t errsz);

/* ------------------------------------------------------------------ */
/* Decoding */

enum tx_tokenizer_decode_flags {
    /* Leave out special added tokens (HF skip_special_tokens=True). */
    TX_TOKENIZER_SKIP_SPECIAL = 1u << 0,
    /* Silently drop ids that name no token (as HF does) instead of failing
     * with TX_EINVAL. */
    TX_TOKENIZER_SKIP_UNKNOWN = 1u << 1,
};

/*
 * Decodes ids back to text: the decoder's bytes, with every ill-formed UTF-8
 * sequence replaced by U+FFFD (as HF's from_utf8_lossy). On success returns
 * 0, *text is a malloc()ed NUL-terminated string (free() it) and *len its
 * length without the terminator.
 */
TX_API int tx_tokenizer_decode(const struct tx_tokenizer *tok, const int32_t *ids, size_t n_ids,
                               unsigned flags, char **text, size_t *len, char *err, size_t errsz);

/*
 * The raw bytes one token decodes to (may be an incomplete UTF-8 sequence,
 * e.g. half of a CJK character). Returns the byte count and sets *bytes to
 * memory owned by the tokenizer, or TX_EINVAL for an unknown id.
 */
TX_API int tx_tokenizer_token_bytes(const struct tx_tokenizer *tok, int32_t id, const char **bytes);

/*
 * Streaming decoder for generation: feed ids one by one, get back only
 * complete UTF-8 text (bytes of a character split over several tokens are
 * held back until the character is complete).
 */
struct tx_tokenizer_stream;
TX_API struct tx_tokenizer_stream *tx_tokenizer_stream_new(const struct tx_tokenizer *tok,
                                                           unsigned decode_flags);
/* Appends the text that became complete to *text (valid until the next call
 * on this stream, NUL-terminated) and its length to *len. TX_EINVAL for
 * an unknown id (unless TX_TOKENIZER_SKIP_UNKNOWN). */
TX_API int tx_tokenizer_stream_put(struct tx_tokenizer_stream *st, int32_t id, const char **text,
                                   size_t *len);
/* Returns what is still held back (an incomplete character becomes
 * U+FFFD) and resets the stream. */
TX_API int tx_tokenizer_stream_flush(struct tx_tokenizer_stream *st, const char **text,
                                     size_t *len);
TX_API void tx_tokenizer_stream_free(struct tx_tokenizer_stream *st);

/* ------------------------------------------------------------------ */
/* Vocabulary */

/* One more than the largest token id (model vocabulary and added tokens). */
TX_API size_t tx_tokenizer_vocab_size(const struct tx_tokenizer *tok);

/* Id of a token given its exact string (added tokens first, then the model
 * vocabulary, in the model's alphabet, e.g. "Ġthe"); TX_ENOENT if none. */
TX_API int32_t tx_tokenizer_token_to_id(const struct tx_tokenizer *tok, const char *token,
                                        size_t len);

/* The token string of an id (NUL-terminated, owned by the tokenizer, in the
 * model's alphabet), or NULL for an unknown id. */
TX_API const char *tx_tokenizer_id_to_token(const struct tx_tokenizer *tok, int32_t id);

/* 1 if id is a special added token, 0 otherwise. */
TX_API int tx_tokenizer_is_special(const struct tx_tokenizer *tok, int32_t id);

struct tx_tokenizer_added_token {
    int32_t id;
    const char *content; /* owned by the tokenizer */
    size_t content_len;
    int special, single_word, lstrip, rstrip, normalized;
};

/* Number of added tokens, and the i-th one in file order. */
TX_API size_t tx_tokenizer_added_count(const struct tx_tokenizer *tok);
TX_API int tx_tokenizer_added_get(const struct tx_tokenizer *tok, size_t i,
                                  struct tx_tokenizer_added_token *out);

/* ------------------------------------------------------------------ */
/* GLM chat template */

enum tx_chat_format {
    /* GLM-4 (glm-4-9b-chat, llama.cpp "chatglm4"): "<|role|>\n" + content,
     * generation prompt "<|assistant|>\n". */
    TX_CHAT_GLM4 = 1,
    /* GLM-4.5 / GLM-4.6: "<|role|>\n" + content; assistant turns
     * "<|assistant|>\n<think>...</think>\n" + content; generation prompt
     * "<|assistant|>" (+ "\n<think></think>" without thinking). */
    TX_CHAT_GLM45 = 2,
    /* GLM-4.7 / GLM-5 / GLM-5.1: "<|role|>" + content (no newline);
     * assistant turns "<|assistant|></think>" + content; generation prompt
     * "<|assistant|><think>" (or "<|assistant|></think>" without thinking). */
    TX_CHAT_GLM5 = 3,
    /* Qwen3 (ChatML): "<|im_start|>" + role + "\n" + content +
     * "<|im_end|>\n"; tool results as user turns in <tool_response>; the
     * last assistant turns after the last user turn keep their reasoning
     * "<think>\n...\n</think>\n\n"; generation prompt
     * "<|im_start|>assistant\n" (+ "<think>\n\n</think>\n\n" without
     * thinking). No "[gMASK]<sop>" prefix. */
    TX_CHAT_QWEN3 = 4,
    /* DeepSeek-V3 (and Kimi-K2's DeepseekV3ForCausalLM packages that ship
     * DeepSeek's template): "<｜begin▁of▁sentence｜>" + the system
     * messages (joined by "\n\n") + "<｜User｜>" + content +
     * "<｜Assistant｜>" + content + "<｜end▁of▁sentence｜>";
     * tool results "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>"
     * ... "<｜tool▁output▁end｜>" ... "<｜tool▁outputs▁end｜>";
     * generation prompt "<｜Assistant｜>". No thinking: reasoning of
     * earlier turns is dropped (as R1's template does) and
     * TX_CHAT_NO_THINKING changes nothing. */
    TX_CHAT_DEEPSEEK3 = 5,
    /* DeepSeek-V3.1 (its chat_template, hybrid thinking): the system
     * messages first, "<｜User｜>" + content; an assistant turn right after
     * a user turn opens "<｜Assistant｜></think>" (reasoning dropped: the
     * content after the first "</think>"); tool calls
     * "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>" NAME "<｜tool▁sep｜>"
     * ARGUMENTS "<｜tool▁call▁end｜>" ... "<｜tool▁calls▁end｜>"; tool results
     * "<｜tool▁output▁begin｜>" ... "<｜tool▁output▁end｜>"; generation prompt
     * (only after a user turn) "<｜Assistant｜></think>", or
     * "<｜Assistant｜><think>" with TX_CHAT_THINKING: the template's thinking
     * is off unless enable_thinking is passed as true. */
    TX_CHAT_DEEPSEEK31 = 6,
};

enum tx_chat_flags {
    TX_CHAT_ADD_GENERATION_PROMPT = 1u << 0,
    /* enable_thinking=false in the HF template. */
    TX_CHAT_NO_THINKING = 1u << 1,
    /* tx_tokenizer_chat_encode only: special-token strings inside message
     * contents are encoded as plain text (prompt-injection safe); only the
     * template's own markers become special tokens. Without this flag the
     * whole rendered text is encoded as HF apply_chat_template(tokenize=True)
     * does. */
    TX_CHAT_LITERAL_CONTENT = 1u << 2,
    /* enable_thinking=true passed explicitly. Only the formats whose
     * template thinks only when asked (TX_CHAT_DEEPSEEK31) read it; the
     * others think unless TX_CHAT_NO_THINKING (which wins over it). */
    TX_CHAT_THINKING = 1u << 3,
};

struct tx_chat_message {
    const char *role;      /* "system", "user", "assistant", "tool" ("observation") */
    const char *content;   /* UTF-8, NUL-terminated; NULL = empty */
    const char *reasoning; /* assistant only, optional ("reasoning_content") */
};

/* "glm4", "glm4.5"/"glm45"/"glm4.6", "glm4.7"/"glm5"/"glm5.1" (case, '-',
 * '_' and '.' ignored); TX_EINVAL for anything else. */
TX_API int tx_chat_format_from_name(const char *name);

/*
 * Renders a conversation as the model's prompt text ("[gMASK]<sop>..."). On
 * success returns 0, *text is malloc()ed, NUL-terminated (free() it).
 */
TX_API int tx_tokenizer_chat_render(enum tx_chat_format fmt, const struct tx_chat_message *msgs,
                                    size_t n_msgs, unsigned flags, char **text, size_t *len,
                                    char *err, size_t errsz);

/* Renders and encodes (special tokens resolved by the tokenizer). */
TX_API int tx_tokenizer_chat_encode(const struct tx_tokenizer *tok, enum tx_chat_format fmt,
                                    const struct tx_chat_message *msgs, size_t n_msgs,
                                    unsigned flags, int32_t **ids, size_t *n_ids, char *err,
                                    size_t errsz);

/*
 * Tool use, in OpenAI's shapes (libtx 2.3; docs/libtx-glm.md, "Tools"):
 * as tx_tokenizer_chat_render / _encode, plus
 *   tools_json       NULL, or a JSON array of tool definitions, e.g.
 *                    [{"type": "function", "function": {"name": "get_weather",
 *                      "description": "...", "parameters": {...}}}];
 *                    rendered as the family's template renders `tools`
 *                    (GLM-4.5/4.6, GLM-4.7/5: a <|system|> turn after
 *                    [gMASK]<sop>; Qwen3: the first system turn; DeepSeek-V3's
 *                    template does not render tool definitions: ignored).
 *   tool_calls_json  NULL, or n_msgs entries, each NULL or (for an assistant
 *                    message) a JSON array of its tool calls:
 *                    [{"id": "...", "type": "function", "function":
 *                      {"name": "get_weather", "arguments": {"city": "Paris"}}}]
 *                    with arguments an object or a JSON string (OpenAI sends a
 *                    string: Qwen3 and DeepSeek-V3 print it as it is; for GLM
 *                    it must hold an object, rendered key by key).
 * Objects are written as the templates' tojson writes them (Python's
 * json.dumps, ensure_ascii=False, keys in the given order). Tool results
 * are messages of role "tool". The GLM-4 format renders no tools
 * (TX_ENOTSUP). Bad JSON or a bad shape: TX_EINVAL naming the message.
 */
TX_API int tx_tokenizer_chat_render_tools(enum tx_chat_format fmt,
                                          const struct tx_chat_message *msgs, size_t n_msgs,
                                          const char *tools_json,
                                          const char *const *tool_calls_json, unsigned flags,
                                          char **text, size_t *len, char *err, size_t errsz);
TX_API int tx_tokenizer_chat_encode_tools(const struct tx_tokenizer *tok, enum tx_chat_format fmt,
                                          const struct tx_chat_message *msgs, size_t n_msgs,
                                          const char *tools_json,
                                          const char *const *tool_calls_json, unsigned flags,
                                          int32_t **ids, size_t *n_ids, char *err, size_t errsz);

/*
 * The GLM stop tokens present in this tokenizer, in the order of the GLM
 * config's eos_token_id: <|endoftext|>, <|user|>, <|observation|>. Writes at
 * most `cap` ids and returns how many exist (tokens missing from the
 * vocabulary are left out).
 */
TX_API int tx_tokenizer_chat_stop_tokens(const struct tx_tokenizer *tok, int32_t *ids, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
