/* SPDX-License-Identifier: MIT */
/*
 * A sandboxed Jinja renderer for chat templates: renders a checkpoint's
 * own chat_template as Hugging Face transformers' apply_chat_template does
 * (Jinja2 with trim_blocks, lstrip_blocks, loopcontrols, transformers'
 * tojson, raise_exception and strftime_now). docs/chat-template.md lists the
 * language it implements; a construct outside it is an error naming it and
 * its line and column, never a silent misrender.
 *
 * A template is untrusted input: rendering is bounded by a step count (the
 * time), an output size and a memory size (struct tx_jinja_opts), and the
 * template can reach nothing but its variables (no attribute of a Python
 * object, no file, no include).
 *
 * Errors follow tx_error.h: 0 on success, a negative enum tx_status on
 * failure, with the message in err (and tx_last_error()):
 *   TX_EINVAL    a syntax error, or an error while rendering (an undefined
 *                variable's attribute, a type error, raise_exception...)
 *   TX_ENOTSUP   a construct or a value this renderer does not implement
 *   TX_ETIMEDOUT the step limit was reached
 *   TX_ENOMEM    the memory or output limit was reached, or malloc failed
 * A compiled template is immutable: any number of threads may render it at
 * once.
 */
#ifndef TX_JINJA_H
#define TX_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include <tx/tx_error.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tx_jinja;

/* the defaults of struct tx_jinja_opts' zero fields */
#define TX_JINJA_DEFAULT_STEPS 4000000ull
#define TX_JINJA_DEFAULT_OUTPUT (16u << 20)
#define TX_JINJA_DEFAULT_MEMORY (256u << 20)
#define TX_JINJA_MAX_SOURCE (4u << 20)

struct tx_jinja_opts {
    uint64_t max_steps;  /* evaluation steps (0: TX_JINJA_DEFAULT_STEPS) */
    size_t max_output;   /* bytes of rendered text (0: TX_JINJA_DEFAULT_OUTPUT) */
    size_t max_memory;   /* bytes the render may allocate (0: TX_JINJA_DEFAULT_MEMORY) */
    long long now;       /* strftime_now's time, seconds since the epoch (0: now) */
    int raised;          /* out: 1 when the failure is the template's
                          * raise_exception(message); err is then the message */
};

/* Compiles src[0..len) (UTF-8, at most TX_JINJA_MAX_SOURCE bytes). */
TX_API int tx_jinja_compile(const char *src, size_t len, struct tx_jinja **out, char *err,
                            size_t errsz);

/* Renders t with the members of the JSON object vars_json[0..vars_len) as
 * its variables (messages, tools, add_generation_prompt, bos_token, ...;
 * object keys keep their order). *out is malloc'd and NUL-terminated,
 * *out_len bytes. opts may be NULL. */
TX_API int tx_jinja_render(const struct tx_jinja *t, const char *vars_json, size_t vars_len,
                           struct tx_jinja_opts *opts, char **out, size_t *out_len, char *err,
                           size_t errsz);

TX_API void tx_jinja_free(struct tx_jinja *t);

/* The variables transformers' apply_chat_template gives a chat template,
 * as one JSON object text (*out, malloc'd): the special tokens of
 * tokenizer_config_json (bos_token, eos_token, unk_token, pad_token,
 * sep_token, cls_token, mask_token, additional_special_tokens; a token
 * given as {"content": ...} is its content; NULL: none), then "messages"
 * (messages_json, a JSON array), "tools" (tools_json, a JSON array; NULL:
 * null), "documents" (null), "add_generation_prompt", then every member of
 * the JSON object kwargs_json (NULL: none; chat_template_kwargs such as
 * enable_thinking), which override the ones before. */
TX_API int tx_chat_template_vars(const char *tokenizer_config_json, const char *messages_json,
                                 const char *tools_json, int add_generation_prompt,
                                 const char *kwargs_json, char **out, char *err, size_t errsz);

/* The chat template of a tokenizer_config.json text: its "chat_template"
 * string, or the template named "default" of a list of named templates;
 * *out malloc'd. TX_ENOENT when there is none. */
TX_API int tx_chat_template_of_config(const char *tokenizer_config_json, char **out, char *err,
                                      size_t errsz);

#ifdef __cplusplus
}
#endif

#endif
