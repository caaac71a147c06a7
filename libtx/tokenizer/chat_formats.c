/* SPDX-License-Identifier: MIT */
/*
 * The chat-format registry (chat_formats.h): every format libtx renders in
 * C, in the order a package's chat_template is recognised, and the lookups
 * over it (by id, by name, by template text).
 */
#include "chat_formats.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <tx-internal/tx_chat_format.h>
#include <tx-internal/tx_errors.h>

/* ---- recognising a chat_template ------------------------------------------ */

/* Qwen3: ChatML turns; not the ChatML variants that render otherwise:
 * Qwen3-Coder's XML tool calls ("<function=NAME>") and the thinking-only
 * Qwen3-2507 templates, whose generation prompt forces "<think>\n"
 * (refused: choose the format explicitly) */
static int is_qwen3(const char *t)
{
    if (!strstr(t, "<|im_start|>") || !strstr(t, "<|im_end|>") || strstr(t, "[gMASK]<sop>"))
        return 0;
    if (strstr(t, "<function=") || strstr(t, "assistant\\n<think>\\n'") ||
        strstr(t, "assistant\n<think>\n'"))
        return TX_NONE;
    return 1;
}

#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"

/* DeepSeek-V3: fullwidth-bar User / Assistant markers */
static int is_deepseek(const char *t)
{
    return strstr(t, DS_USER) && strstr(t, DS_ASSISTANT);
}

/* V3.1: an assistant turn opens "<｜Assistant｜></think>" */
static int is_deepseek31(const char *t)
{
    return is_deepseek(t) && strstr(t, DS_ASSISTANT "</think>");
}

static int is_deepseek3(const char *t)
{
    return is_deepseek(t) && !strstr(t, DS_ASSISTANT "</think>");
}

/* A GLM template, and what follows its first "<|user|>": a newline (raw,
 * or the two characters \n of a Jinja string) in GLM-4 and GLM-4.5/4.6,
 * content directly in GLM-4.7 and GLM-5 (-1: not a GLM template) */
static int glm_user_newline(const char *t)
{
    if (!strstr(t, "[gMASK]<sop>") || !strstr(t, "<|assistant|>"))
        return TX_NONE;
    const char *u = strstr(t, "<|user|>");
    if (!u)
        return TX_NONE;
    u += 8;
    return *u == '\n' || (u[0] == '\\' && u[1] == 'n');
}

/* GLM-4 (glm-4-9b-chat): "<|user|>\n", no thinking */
static int is_glm4(const char *t)
{
    return glm_user_newline(t) == 1 && !strstr(t, "<think>");
}

/* GLM-4.5/4.6: "<|user|>\n", "/nothink", generation prompt "<|assistant|>"
 * + "\n<think></think>" without thinking */
static int is_glm45(const char *t)
{
    return glm_user_newline(t) == 1 && strstr(t, "<think>") && strstr(t, "/nothink");
}

/* GLM-4.7/5: "<|user|>" + content, generation prompt "<|assistant|><think>"
 * or "<|assistant|></think>" */
static int is_glm5(const char *t)
{
    return glm_user_newline(t) == 0 && strstr(t, "<think>") && strstr(t, "</think>") &&
           !strstr(t, "/nothink");
}

/* ---- the registry ---------------------------------------------------------- */

static const char *const glm4_names[] = {"glm4", NULL};
static const char *const glm45_names[] = {"glm4.5", "glm4.6", NULL};
static const char *const glm5_names[] = {"glm4.7", "glm5", "glm5.1", NULL};
static const char *const qwen3_names[] = {"qwen3", NULL};
static const char *const qwen3_also[] = {"chatml", NULL};
static const char *const ds3_names[] = {"deepseek3", NULL};
static const char *const ds3_also[] = {"deepseekv3", NULL};
static const char *const ds31_names[] = {"deepseek3.1", NULL};
static const char *const ds31_also[] = {"deepseekv3.1", NULL};

/* recognition order: the first entry whose recogniser answers decides */
static const struct chat_format formats[] = {
    {TX_CHAT_QWEN3, "qwen3", "Qwen3 (ChatML)", qwen3_names, qwen3_also, is_qwen3,
     chat_render_qwen3, 0},
    {TX_CHAT_DEEPSEEK31, "deepseek3.1", "DeepSeek-V3.1", ds31_names, ds31_also, is_deepseek31,
     chat_render_deepseek31, 0},
    {TX_CHAT_DEEPSEEK3, "deepseek3", "DeepSeek-V3", ds3_names, ds3_also, is_deepseek3,
     chat_render_deepseek3, 0},
    {TX_CHAT_GLM4, "glm4", "GLM-4 (glm-4-9b-chat)", glm4_names, NULL, is_glm4, chat_render_glm,
     CHAT_F_NO_TOOLS | CHAT_F_GLM},
    {TX_CHAT_GLM45, "glm4.5", "GLM-4.5/4.6", glm45_names, NULL, is_glm45, chat_render_glm,
     CHAT_F_GLM},
    {TX_CHAT_GLM5, "glm4.7", "GLM-4.7/GLM-5", glm5_names, NULL, is_glm5, chat_render_glm,
     CHAT_F_GLM},
};
#define N_FORMATS (sizeof(formats) / sizeof(formats[0]))

const struct chat_format *chat_format_get(int id)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        if ((int)formats[i].id == id)
            return &formats[i];
    return NULL;
}

int tx_chat_format_valid(int fmt)
{
    return chat_format_get(fmt) != NULL;
}

/* name folded for comparison: lower case, without '-', '_' and '.' */
static void fold(const char *s, char *k, size_t ksz)
{
    size_t j = 0;
    for (size_t i = 0; s[i] && j + 1 < ksz; i++) {
        char ch = (char)tolower((unsigned char)s[i]);
        if (ch != '-' && ch != '_' && ch != '.')
            k[j++] = ch;
    }
    k[j] = 0;
}

static int listed(const char *const *names, const char *key)
{
    char k[16];
    for (size_t i = 0; names && names[i]; i++) {
        fold(names[i], k, sizeof(k));
        if (!strcmp(k, key))
            return 1;
    }
    return 0;
}

int tx_chat_format_from_name(const char *name)
{
    if (!name)
        return tx_errbuf(NULL, 0, TX_EINVAL, "chat format: NULL name");
    char key[16];
    fold(name, key, sizeof(key));
    char list[160];
    size_t o = 0;
    list[0] = 0;
    for (size_t i = 0; i < N_FORMATS; i++) {
        if (listed(formats[i].names, key) || listed(formats[i].also, key))
            return formats[i].id;
    }
    /* the message lists the names in the enum's order */
    for (int id = TX_CHAT_GLM4; id <= TX_CHAT_DEEPSEEK31; id++) {
        const struct chat_format *f = chat_format_get(id);
        for (size_t j = 0; f && f->names[j] && o < sizeof(list); j++) {
            int w = snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", f->names[j]);
            o += w > 0 ? (size_t)w : 0;
        }
    }
    return tx_errbuf(NULL, 0, TX_EINVAL, "unknown chat format \"%.32s\" (%s)", name, list);
}

int tx_chat_format_of_template(const char *t, const char **which)
{
    const char *dummy;
    if (!which)
        which = &dummy;
    *which = "";
    if (!t)
        return TX_NONE;
    for (size_t i = 0; i < N_FORMATS; i++) {
        int r = formats[i].recognise(t);
        if (r < 0)
            return TX_NONE;
        if (r > 0) {
            *which = formats[i].family;
            return formats[i].id;
        }
    }
    return TX_NONE;
}

const char *tx_chat_format_name(int f)
{
    const struct chat_format *e = chat_format_get(f);
    return e ? e->name : "glm4.7";
}
