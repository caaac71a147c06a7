/* SPDX-License-Identifier: MIT */
/* glm-tokenize --print-tokenizer-config / --chat-render (chat_render.c) */
#ifndef GLM_TOKENIZE_CHAT_RENDER_H
#define GLM_TOKENIZE_CHAT_RENDER_H

/* Prints the tokenizer_config.json section of package pkg. Exit status. */
int gt_print_tokenizer_config(const char *prog, const char *pkg);
/* Renders the conversation of the JSON file conv (see chat_render.c) as
 * libtx renders it, in format fmt (a name, or NULL: recognised from the
 * package's chat_template), and writes the text to stdout exactly. Exit
 * status. */
int gt_chat_render(const char *prog, const char *pkg, const char *conv, const char *fmt);

/* Prints the chat format libtx recognises in the template of file path (a
 * chat_template.jinja, or a tokenizer_config.json: its chat_template
 * string) and which template it is; exit status 0, 1 when not recognised
 * or the file is unreadable. */
int gt_recognise_template(const char *prog, const char *path);

/* Renders the conversation of the JSON file conv with the chat template
 * file tmpl (a .jinja, or a tokenizer_config.json) by libtx's Jinja
 * renderer (chat_jinja.c); kwargs: a JSON object of template kwargs or
 * NULL; tokcfg: a tokenizer_config.json for the special tokens or NULL.
 * Exit status. */
int gt_chat_render_jinja(const char *prog, const char *tmpl, const char *conv, const char *kwargs,
                         const char *tokcfg);

#endif
