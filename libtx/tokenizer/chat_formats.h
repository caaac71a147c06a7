/* SPDX-License-Identifier: MIT */
/*
 * The chat formats libtx renders in C, one registry entry each
 * (chat_formats.c), as the architectures have theirs: the format's names,
 * how its chat_template is recognised, what it renders (tool definitions
 * and calls or not) and its renderer (tok_chat.c). Adding a format is one
 * entry here, one renderer there, and a value of enum tx_chat_format.
 */
#ifndef TX_TOK_CHAT_FORMATS_H
#define TX_TOK_CHAT_FORMATS_H

#include <stddef.h>

#include <tx/tx_tokenizer.h>

struct render;     /* the text being rendered (tok_chat.c) */
struct chat_tools; /* the parsed tool definitions and calls (tok_chat.c) */

typedef int (*chat_render_fn)(struct render *r, enum tx_chat_format fmt,
                              const struct tx_chat_message *msgs, size_t n, unsigned flags,
                              const struct chat_tools *t, char *err, size_t errsz);

#define CHAT_F_NO_TOOLS 1u /* renders no tool definitions or calls (GLM-4) */
#define CHAT_F_GLM 2u      /* the GLM family: "[gMASK]<sop>", calls key by key */

struct chat_format {
    enum tx_chat_format id;
    const char *name;               /* tx_chat_format_name: "glm4.5" */
    const char *family;             /* what a recognised template is: "GLM-4.5/4.6" */
    const char *const *names;       /* tx_chat_format_from_name, listed in its error */
    const char *const *also;        /* accepted too, not listed ("chatml") */
    /* 1: tmpl is this format's template; 0: not; -1: a variant libtx
     * refuses to render (no other format is tried) */
    int (*recognise)(const char *tmpl);
    chat_render_fn render;
    unsigned flags;
};

/* The entry of format id, NULL for one libtx does not render */
const struct chat_format *chat_format_get(int id);

/* The renderers (tok_chat.c) */
int chat_render_glm(struct render *r, enum tx_chat_format fmt, const struct tx_chat_message *msgs,
                    size_t n, unsigned flags, const struct chat_tools *t, char *err, size_t errsz);
int chat_render_qwen3(struct render *r, enum tx_chat_format fmt,
                      const struct tx_chat_message *msgs, size_t n, unsigned flags,
                      const struct chat_tools *t, char *err, size_t errsz);
int chat_render_deepseek3(struct render *r, enum tx_chat_format fmt,
                          const struct tx_chat_message *msgs, size_t n, unsigned flags,
                          const struct chat_tools *t, char *err, size_t errsz);
int chat_render_deepseek31(struct render *r, enum tx_chat_format fmt,
                           const struct tx_chat_message *msgs, size_t n, unsigned flags,
                           const struct chat_tools *t, char *err, size_t errsz);

#endif
