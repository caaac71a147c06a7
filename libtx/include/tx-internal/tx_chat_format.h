/* SPDX-License-Identifier: MIT */
/*
 * Private (not installed): how libtx recognises the chat format of a
 * package's chat_template text, shared by glm_model_chat_format and the
 * tools (glm-tokenize --chat-render, tools/chat-template-check).
 */
#ifndef TX_CHAT_FORMAT_H
#define TX_CHAT_FORMAT_H

#include <tx/tx_tokenizer.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The enum tx_chat_format of a chat_template text, or -1 (not a template
 * libtx renders); *which names the template family ("GLM-4.5/4.6"). */
TX_API int tx_chat_format_of_template(const char *tmpl, const char **which);
/* "glm4", "glm4.5", "glm4.7", "qwen3", "deepseek3", "deepseek3.1" */
TX_API const char *tx_chat_format_name(int fmt);
/* 1 if fmt is a format libtx renders (libtx/tokenizer/chat_formats.c) */
int tx_chat_format_valid(int fmt);

#ifdef __cplusplus
}
#endif

#endif /* TX_CHAT_FORMAT_H */
