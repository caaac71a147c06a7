/* SPDX-License-Identifier: MIT */
/*
 * The chat template glm-server and glm-inference render with by default:
 * the package's own chat_template (or --chat-template-file FILE), by
 * libtx's Jinja renderer (tx/tx_jinja.h), as transformers'
 * apply_chat_template(tokenize=True) does (tools/lib/chat_template.c).
 */
#ifndef TXC_CHAT_TEMPLATE_H
#define TXC_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include <tx/tx_tokenizer.h>

struct txc_chat_template;

/* The template of file (a chat_template.jinja, or a tokenizer_config.json:
 * its chat_template and special tokens), else of package pkg's
 * tokenizer_config.json; the special tokens from pkg when file is a
 * .jinja. TX_ENOENT: pkg has no chat_template (the caller falls back to the
 * C chat formats); another TX_E* code: the template does not compile or a
 * file cannot be read, err says which. */
int txc_chat_template_load(const char *pkg, const char *file, struct txc_chat_template **out,
                           char *err, size_t errsz);

/* What it was loaded from ("the package's chat_template", a file name),
 * and the sha256-free length of the template in bytes. */
const char *txc_chat_template_source(const struct txc_chat_template *ct);

/* Renders messages_json (a JSON array of OpenAI messages), tools_json (a
 * JSON array or NULL), kwargs_json (a JSON object of template kwargs or
 * NULL) and the generation prompt (add_gen) and encodes the text with tok as
 * apply_chat_template(tokenize=True) does: special-token text in the
 * rendering is a special token, no post-processor tokens are added. A tool
 * call's "arguments" given as a JSON string is passed as the object it
 * encodes (as transformers documents and vLLM does); if the template fails
 * with objects, it is rendered again with the strings as sent (a template
 * that concatenates them, DeepSeek-V3.1's). *text (if text is not NULL) is
 * the rendered text. *raised is 1 when the failure is the template's
 * raise_exception (err is then its message). */
int txc_chat_template_encode(const struct txc_chat_template *ct, const struct tx_tokenizer *tok,
                             const char *messages_json, const char *tools_json,
                             const char *kwargs_json, int add_gen, int32_t **ids, size_t *n,
                             char **text, int *raised, char *err, size_t errsz);

void txc_chat_template_free(struct txc_chat_template *ct);

#endif
