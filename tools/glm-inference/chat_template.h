/* SPDX-License-Identifier: MIT */
/* glm-inference -cnv / -sys / --chat: the package's chat template (chat_template.c) */
#ifndef GI_CHAT_TEMPLATE_H
#define GI_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include <tx/glm.h>

/* Loads the chat template of package pkg (or of file, a .jinja or a
 * tokenizer_config.json, when not NULL) for gi_chat_encode. 1: loaded (a
 * line on stderr says which); 0: the package has none, gi_chat_encode uses
 * libtx's C format (glm_chat_encode); -1: an error, printed. */
int gi_chat_template_init(const char *prog, const char *pkg, const char *file);

/* glm_chat_encode, with the loaded template when there is one:
 * TX_CHAT_NO_THINKING / TX_CHAT_THINKING become enable_thinking false / true,
 * the generation prompt is added. 0 or a TX_E* code (tx_last_error()). */
int gi_chat_encode(glm_model_t *m, const struct tx_chat_message *msgs, size_t n_msgs,
                   unsigned flags, int32_t **ids, size_t *n_ids);

/* Frees the loaded template (at exit). */
void gi_chat_template_free(void);

#endif
