/* SPDX-License-Identifier: MIT */
/* glm-export: chat_template.jinja into the package's tokenizer_config.json */
#ifndef TX_EXPORT_CHAT_TEMPLATE_H
#define TX_EXPORT_CHAT_TEMPLATE_H

#include <stddef.h>

/* When the directory of checkpoint ckpt (a directory, or a file in it) holds a chat_template.jinja, *tokcfg (a malloc'd
 * tokenizer_config.json text of *len bytes, or NULL: none) becomes that
 * JSON with the file's text as its "chat_template" (transformers prefers
 * the file). 0 (also without the file) or a TX_E* code with err set. */
int txe_merge_chat_template(const char *ckpt, char **tokcfg, size_t *len, char *err, size_t errsz);

/* When the checkpoint's directory holds a special_tokens_map.json, the
 * special tokens (bos_token, eos_token...) *tokcfg lacks are added from it
 * (nothing without a *tokcfg). 0 or a TX_E* code with err set. */
int txe_merge_special_tokens(const char *ckpt, char **tokcfg, size_t *len, char *err,
                             size_t errsz);

#endif
