/* SPDX-License-Identifier: MIT */
/*
 * The GLM chat templates, rendered in C exactly as the Jinja templates
 * shipped with the models render them (HF apply_chat_template, which uses
 * trim_blocks and lstrip_blocks), without tools:
 *   GLM-4:          llama.cpp's "chatglm4" template (glm-4-9b-chat)
 *   GLM-4.5 / 4.6:  chat_template.jinja of zai-org/GLM-4.5 and GLM-4.6
 *   GLM-4.7 / 5:    chat_template.jinja of zai-org/GLM-4.7 and GLM-5
 */
#include <ctype.h>
#include <sys/types.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

#include <tx/tx_chat_format.h>

struct render {
    struct tok_buf b;
    struct tok_range *lit;
    size_t n_lit, cap_lit;
};

static int put(struct render *r, const char *s, size_t n)
{
    return tok_buf_put(&r->b, s, n);
}

static int puts_(struct render *r, const char *s)
{
    return put(r, s, strlen(s));
}

/* Message text: remembered as a literal range for TX_CHAT_LITERAL_CONTENT. */
static int put_content(struct render *r, const char *s, size_t n)
{
    if (!n)
        return 0;
    if (r->n_lit == r->cap_lit) {
        size_t cap = r->cap_lit ? r->cap_lit * 2 : 16;
        struct tok_range *v = realloc(r->lit, cap * sizeof(*v));
        if (!v)
            return TX_ENOMEM;
        r->lit = v;
        r->cap_lit = cap;
    }
    r->lit[r->n_lit++] = (struct tok_range){r->b.len, r->b.len + n};
    return put(r, s, n);
}

/* Python str.isspace() for the characters that matter here. */
static bool py_space(uint32_t cp)
{
    return tok_is_white_space(cp) || (cp >= 0x1C && cp <= 0x1F);
}

/* Python str.strip() on [*s, *s + *n). */
static void py_strip(const char **s, size_t *n)
{
    const char *p = *s;
    size_t len = *n;
    while (len) {
        uint32_t cp;
        size_t l = tok_utf8_decode((const unsigned char *)p, len, &cp);
        if (!l || !py_space(cp))
            break;
        p += l;
        len -= l;
    }
    while (len) {
        size_t i = len - 1;
        while (i > 0 && len - i < 4 && ((unsigned char)p[i] & 0xC0) == 0x80)
            i--;
        uint32_t cp;
        if (tok_utf8_decode((const unsigned char *)p + i, len - i, &cp) != len - i || !py_space(cp))
            break;
        len = i;
    }
    *s = p;
    *n = len;
}

static const char *memmem_(const char *h, size_t hn, const char *n, size_t nn)
{
    return memmem(h, hn, n, nn);
}

static const char *memmem_last(const char *h, size_t hn, const char *n, size_t nn)
{
    const char *last = NULL, *p = h;
    size_t left = hn;
    const char *f;
    while ((f = memmem_(p, left, n, nn))) {
        last = f;
        left -= (size_t)(f - p) + 1;
        p = f + 1;
    }
    return last;
}

/*
 * The templates' reasoning extraction from an assistant message without a
 * separate reasoning field:
 *   reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
 *   content   = content.split('</think>')[-1].lstrip('\n')
 */
static void split_reasoning(const char **c, size_t *cn, const char **r, size_t *rn)
{
    const char *s = *c;
    size_t n = *cn;
    const char *close = memmem_(s, n, "</think>", 8);
    if (!close)
        return;
    const char *before = s;
    size_t bn = (size_t)(close - s);
    while (bn && before[bn - 1] == '\n')
        bn--;
    const char *open = memmem_last(before, bn, "<think>", 7);
    if (open) {
        bn -= (size_t)(open + 7 - before);
        before = open + 7;
    }
    while (bn && *before == '\n') {
        before++;
        bn--;
    }
    *r = before;
    *rn = bn;
    const char *last_close = memmem_last(s, n, "</think>", 8);
    const char *after = last_close + 8;
    size_t an = n - (size_t)(after - s);
    while (an && *after == '\n') {
        after++;
        an--;
    }
    *c = after;
    *cn = an;
}

static const char *role_of(const char *role)
{
    if (!role)
        return NULL;
    if (!strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant"))
        return role;
    if (!strcmp(role, "tool") || !strcmp(role, "observation"))
        return "tool";
    return NULL;
}

/* Qwen3 (ChatML), as Qwen3's chat_template renders messages without tools:
 * tool results grouped in one user turn, reasoning kept only for the
 * assistant turns after the last user turn. */
static int render_qwen3(struct render *r, const struct tx_chat_message *msgs, size_t n,
                        ssize_t last_user, unsigned flags, char *err, size_t errsz)
{
    for (size_t i = 0; i < n; i++) {
        const char *role = role_of(msgs[i].role);
        const char *c = msgs[i].content ? msgs[i].content : "";
        size_t cn = strlen(c);
        if (tok_utf8_validate(c, cn) != cn)
            return tx_errbuf(err, errsz, TX_EINVAL, "message %zu: content is not valid UTF-8", i);
        int rc = 0;
        if (!strcmp(role, "system") || !strcmp(role, "user")) {
            rc = puts_(r, "<|im_start|>") || puts_(r, role) || puts_(r, "\n") ||
                 put_content(r, c, cn) || puts_(r, "<|im_end|>\n");
        } else if (!strcmp(role, "assistant")) {
            const char *rs = "";
            size_t rn = 0;
            if (msgs[i].reasoning) {
                rs = msgs[i].reasoning;
                rn = strlen(rs);
                if (tok_utf8_validate(rs, rn) != rn)
                    return tx_errbuf(err, errsz, TX_EINVAL,
                                     "message %zu: reasoning is not valid UTF-8", i);
            } else {
                split_reasoning(&c, &cn, &rs, &rn);
            }
            /* reasoning_content.strip('\n'), content.lstrip('\n') */
            while (rn && *rs == '\n') {
                rs++;
                rn--;
            }
            while (rn && rs[rn - 1] == '\n')
                rn--;
            while (cn && *c == '\n') {
                c++;
                cn--;
            }
            rc = puts_(r, "<|im_start|>assistant\n");
            if (!rc && (ssize_t)i > last_user && rn)
                rc = puts_(r, "<think>\n") || put_content(r, rs, rn) || puts_(r, "\n</think>\n\n");
            rc = rc || put_content(r, c, cn) || puts_(r, "<|im_end|>\n");
        } else { /* tool */
            bool first = i == 0 || strcmp(role_of(msgs[i - 1].role), "tool");
            bool last = i + 1 == n || strcmp(role_of(msgs[i + 1].role), "tool");
            rc = (first && puts_(r, "<|im_start|>user")) || puts_(r, "\n<tool_response>\n") ||
                 put_content(r, c, cn) || puts_(r, "\n</tool_response>") ||
                 (last && puts_(r, "<|im_end|>\n"));
        }
        if (rc)
            return TX_ENOMEM;
    }
    if (flags & TX_CHAT_ADD_GENERATION_PROMPT) {
        if (puts_(r, "<|im_start|>assistant\n") ||
            ((flags & TX_CHAT_NO_THINKING) && puts_(r, "<think>\n\n</think>\n\n")))
            return TX_ENOMEM;
    }
    return tok_buf_reserve(&r->b, 0) ? TX_ENOMEM : 0;
}

#define DS_BOS "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
#define DS_OUTS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81outputs\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_OUTS_END "<\xef\xbd\x9ctool\xe2\x96\x81outputs\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_OUT_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_OUT_END "<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81" "end\xef\xbd\x9c>"

/* DeepSeek-V3, as its tokenizer_config.json chat_template renders messages
 * without tool calls: the system messages first (joined by a blank line),
 * then the turns; after tool outputs the assistant's content follows
 * "tool outputs end" instead of a new Assistant marker. Reasoning is
 * dropped (content after the last "</think>", as R1's template does). */
static int render_deepseek3(struct render *r, const struct tx_chat_message *msgs, size_t n,
                            unsigned flags, char *err, size_t errsz)
{
    bool first_sp = true, is_tool = false, output_first = true;
    int rc = puts_(r, DS_BOS);
    for (size_t i = 0; i < n && !rc; i++) {
        const char *c = msgs[i].content ? msgs[i].content : "";
        size_t cn = strlen(c);
        if (tok_utf8_validate(c, cn) != cn)
            return tx_errbuf(err, errsz, TX_EINVAL, "message %zu: content is not valid UTF-8", i);
        if (strcmp(role_of(msgs[i].role), "system"))
            continue;
        rc = (!first_sp && puts_(r, "\n\n")) || put_content(r, c, cn);
        first_sp = false;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        const char *role = role_of(msgs[i].role);
        const char *c = msgs[i].content ? msgs[i].content : "";
        size_t cn = strlen(c);
        if (!strcmp(role, "user")) {
            is_tool = false;
            rc = puts_(r, DS_USER) || put_content(r, c, cn);
        } else if (!strcmp(role, "assistant")) {
            const char *rs = "";
            size_t rn = 0;
            if (!msgs[i].reasoning)
                split_reasoning(&c, &cn, &rs, &rn);
            rc = puts_(r, is_tool ? DS_OUTS_END : DS_ASSISTANT) || put_content(r, c, cn) ||
                 puts_(r, DS_EOS);
            is_tool = false;
        } else if (!strcmp(role, "tool")) {
            is_tool = true;
            rc = puts_(r, output_first ? DS_OUTS_BEGIN DS_OUT_BEGIN : "\n" DS_OUT_BEGIN) ||
                 put_content(r, c, cn) || puts_(r, DS_OUT_END);
            output_first = false;
        }
    }
    if (!rc && is_tool)
        rc = puts_(r, DS_OUTS_END);
    if (!rc && (flags & TX_CHAT_ADD_GENERATION_PROMPT) && !is_tool)
        rc = puts_(r, DS_ASSISTANT);
    if (rc)
        return TX_ENOMEM;
    return tok_buf_reserve(&r->b, 0) ? TX_ENOMEM : 0;
}

static int render(struct render *r, enum tx_chat_format fmt, const struct tx_chat_message *msgs,
                  size_t n, unsigned flags, char *err, size_t errsz)
{
    bool think = !(flags & TX_CHAT_NO_THINKING);
    bool nl = fmt != TX_CHAT_GLM5; /* GLM-4.7/5 dropped the newlines */
    ssize_t last_user = -1;
    for (size_t i = 0; i < n; i++) {
        const char *role = role_of(msgs[i].role);
        if (!role)
            return tx_errbuf(err, errsz, TX_EINVAL, "message %zu: unknown role \"%.32s\"", i,
                             msgs[i].role ? msgs[i].role : "(null)");
        if (!strcmp(role, "user"))
            last_user = (ssize_t)i;
    }
    if (fmt == TX_CHAT_QWEN3)
        return render_qwen3(r, msgs, n, last_user, flags, err, errsz);
    if (fmt == TX_CHAT_DEEPSEEK3)
        return render_deepseek3(r, msgs, n, flags, err, errsz);
    if (puts_(r, "[gMASK]<sop>"))
        return TX_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *role = role_of(msgs[i].role);
        const char *c = msgs[i].content ? msgs[i].content : "";
        size_t cn = strlen(c);
        if (tok_utf8_validate(c, cn) != cn)
            return tx_errbuf(err, errsz, TX_EINVAL, "message %zu: content is not valid UTF-8", i);
        int rc = 0;
        if (fmt == TX_CHAT_GLM4) {
            const char *tag = !strcmp(role, "tool") ? "observation" : role;
            rc = puts_(r, "<|") || puts_(r, tag) || puts_(r, "|>\n") || put_content(r, c, cn);
        } else if (!strcmp(role, "system") || !strcmp(role, "user")) {
            rc = puts_(r, !strcmp(role, "user") ? "<|user|>" : "<|system|>") ||
                 (nl && puts_(r, "\n")) || put_content(r, c, cn);
            if (!rc && fmt == TX_CHAT_GLM45 && !think && !strcmp(role, "user") &&
                !(cn >= 8 && !memcmp(c + cn - 8, "/nothink", 8)))
                rc = puts_(r, "/nothink");
        } else if (!strcmp(role, "assistant")) {
            const char *rs = "";
            size_t rn = 0;
            if (msgs[i].reasoning) {
                rs = msgs[i].reasoning;
                rn = strlen(rs);
                if (tok_utf8_validate(rs, rn) != rn)
                    return tx_errbuf(err, errsz, TX_EINVAL,
                                     "message %zu: reasoning is not valid UTF-8", i);
            } else {
                split_reasoning(&c, &cn, &rs, &rn);
            }
            rc = puts_(r, "<|assistant|>");
            if (!rc && (ssize_t)i > last_user && rn) {
                py_strip(&rs, &rn);
                rc = puts_(r, nl ? "\n<think>" : "<think>") || put_content(r, rs, rn) ||
                     puts_(r, "</think>");
            } else if (!rc) {
                rc = puts_(r, nl ? "\n<think></think>" : "</think>");
            }
            py_strip(&c, &cn);
            if (!rc && cn)
                rc = (nl && puts_(r, "\n")) || put_content(r, c, cn);
        } else { /* tool */
            if (i == 0 || strcmp(role_of(msgs[i - 1].role), "tool"))
                rc = puts_(r, "<|observation|>");
            rc = rc || puts_(r, nl ? "\n<tool_response>\n" : "<tool_response>") ||
                 put_content(r, c, cn) || puts_(r, nl ? "\n</tool_response>" : "</tool_response>");
        }
        if (rc)
            return TX_ENOMEM;
    }
    if (flags & TX_CHAT_ADD_GENERATION_PROMPT) {
        int rc;
        if (fmt == TX_CHAT_GLM4)
            rc = puts_(r, "<|assistant|>\n");
        else if (fmt == TX_CHAT_GLM45)
            rc = puts_(r, "<|assistant|>") || (!think && puts_(r, "\n<think></think>"));
        else
            rc = puts_(r, think ? "<|assistant|><think>" : "<|assistant|></think>");
        if (rc)
            return TX_ENOMEM;
    }
    return tok_buf_reserve(&r->b, 0) ? TX_ENOMEM : 0;
}

static int check_args(enum tx_chat_format fmt, const struct tx_chat_message *msgs, size_t n,
                      char *err, size_t errsz)
{
    if (fmt != TX_CHAT_GLM4 && fmt != TX_CHAT_GLM45 && fmt != TX_CHAT_GLM5 && fmt != TX_CHAT_QWEN3 &&
        fmt != TX_CHAT_DEEPSEEK3)
        return tx_errbuf(err, errsz, TX_EINVAL, "unknown chat format %d", (int)fmt);
    if (!msgs && n)
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    return 0;
}

int tx_tokenizer_chat_render(enum tx_chat_format fmt, const struct tx_chat_message *msgs,
                             size_t n_msgs, unsigned flags, char **text, size_t *len, char *err,
                             size_t errsz)
{
    if (err && errsz)
        err[0] = 0;
    if (!text)
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    *text = NULL;
    int rc = check_args(fmt, msgs, n_msgs, err, errsz);
    if (rc)
        return rc;
    struct render r = {{0}, NULL, 0, 0};
    rc = render(&r, fmt, msgs, n_msgs, flags, err, errsz);
    free(r.lit);
    if (rc) {
        free(r.b.p);
        return rc == TX_ENOMEM ? tx_errbuf(err, errsz, rc, "out of memory") : rc;
    }
    *text = r.b.p;
    if (len)
        *len = r.b.len;
    return 0;
}

int tx_tokenizer_chat_encode(const struct tx_tokenizer *tok, enum tx_chat_format fmt,
                             const struct tx_chat_message *msgs, size_t n_msgs, unsigned flags,
                             int32_t **ids, size_t *n_ids, char *err, size_t errsz)
{
    if (err && errsz)
        err[0] = 0;
    if (!tok || !ids || !n_ids)
        return tx_errbuf(err, errsz, TX_EINVAL, "invalid argument");
    int rc = check_args(fmt, msgs, n_msgs, err, errsz);
    if (rc)
        return rc;
    struct render r = {{0}, NULL, 0, 0};
    rc = render(&r, fmt, msgs, n_msgs, flags, err, errsz);
    if (!rc) {
        bool lit = flags & TX_CHAT_LITERAL_CONTENT;
        rc = tok_encode_ex(tok, r.b.p, r.b.len, 0, lit ? r.lit : NULL, lit ? r.n_lit : 0, ids,
                           n_ids, err, errsz);
    } else if (rc == TX_ENOMEM) {
        rc = tx_errbuf(err, errsz, rc, "out of memory");
    }
    free(r.lit);
    free(r.b.p);
    return rc;
}

int tx_tokenizer_chat_stop_tokens(const struct tx_tokenizer *tok, int32_t *ids, size_t cap)
{
    static const char *const names[] = {"<|endoftext|>", "<|user|>", "<|observation|>"};
    if (!tok || (!ids && cap))
        return tx_errbuf(NULL, 0, TX_EINVAL, "tx_tokenizer_chat_stop_tokens: NULL argument");
    int n = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        int32_t id = tok_lookup(tok, names[i], strlen(names[i]));
        if (id < 0)
            continue;
        if ((size_t)n < cap)
            ids[n] = id;
        n++;
    }
    return n;
}

int tx_chat_format_from_name(const char *name)
{
    if (!name)
        return tx_errbuf(NULL, 0, TX_EINVAL, "chat format: NULL name");
    char k[16];
    size_t j = 0;
    for (size_t i = 0; name[i]; i++) {
        char ch = (char)tolower((unsigned char)name[i]);
        if (ch == '-' || ch == '_' || ch == '.')
            continue;
        if (j + 1 >= sizeof(k))
            break;
        k[j++] = ch;
    }
    k[j] = 0;
    if (!strcmp(k, "glm4"))
        return TX_CHAT_GLM4;
    if (!strcmp(k, "glm45") || !strcmp(k, "glm46"))
        return TX_CHAT_GLM45;
    if (!strcmp(k, "glm47") || !strcmp(k, "glm5") || !strcmp(k, "glm51"))
        return TX_CHAT_GLM5;
    if (!strcmp(k, "qwen3") || !strcmp(k, "chatml"))
        return TX_CHAT_QWEN3;
    if (!strcmp(k, "deepseek3") || !strcmp(k, "deepseekv3"))
        return TX_CHAT_DEEPSEEK3;
    return tx_errbuf(NULL, 0, TX_EINVAL,
                     "unknown chat format \"%.32s\" (glm4, glm4.5, glm4.6, glm4.7, glm5, glm5.1, "
                     "qwen3, deepseek3)",
                     name);
}

/* ---- recognising a chat_template ------------------------------------------ */

/* What follows the first "<|user|>" of the template text: a newline (raw,
 * or the two characters \n of a Jinja string) in GLM-4 and GLM-4.5/4.6,
 * content directly in GLM-4.7 and GLM-5. */
static int user_newline(const char *t)
{
    const char *u = strstr(t, "<|user|>");
    if (!u)
        return -1;
    u += 8;
    return *u == '\n' || (u[0] == '\\' && u[1] == 'n');
}

int tx_chat_format_of_template(const char *t, const char **which)
{
    const char *dummy;
    if (!which)
        which = &dummy;
    *which = "";
    if (!t)
        return -1;
    /* Qwen3: ChatML turns */
    if (strstr(t, "<|im_start|>") && strstr(t, "<|im_end|>") && !strstr(t, "[gMASK]<sop>")) {
        *which = "Qwen3 (ChatML)";
        return TX_CHAT_QWEN3;
    }
    /* DeepSeek-V3: fullwidth-bar User / Assistant markers */
    if (strstr(t, "<\xef\xbd\x9cUser\xef\xbd\x9c>") &&
        strstr(t, "<\xef\xbd\x9c"
                  "Assistant\xef\xbd\x9c>")) {
        *which = "DeepSeek-V3";
        return TX_CHAT_DEEPSEEK3;
    }
    if (!strstr(t, "[gMASK]<sop>") || !strstr(t, "<|assistant|>") || !strstr(t, "<|user|>"))
        return -1;
    int nl = user_newline(t);
    int think = strstr(t, "<think>") != NULL;
    if (nl == 1 && !think) {
        *which = "GLM-4 (glm-4-9b-chat)";
        return TX_CHAT_GLM4;
    }
    /* GLM-4.5/4.6: "<|user|>\n", "/nothink", generation prompt
     * "<|assistant|>" + "\n<think></think>" without thinking */
    if (nl == 1 && think && strstr(t, "/nothink")) {
        *which = "GLM-4.5/4.6";
        return TX_CHAT_GLM45;
    }
    /* GLM-4.7/5: "<|user|>" + content, generation prompt "<|assistant|><think>"
     * or "<|assistant|></think>" */
    if (nl == 0 && think && strstr(t, "</think>") && !strstr(t, "/nothink")) {
        *which = "GLM-4.7/GLM-5";
        return TX_CHAT_GLM5;
    }
    return -1;
}

const char *tx_chat_format_name(int f)
{
    return f == TX_CHAT_GLM4        ? "glm4"
           : f == TX_CHAT_GLM45     ? "glm4.5"
           : f == TX_CHAT_QWEN3     ? "qwen3"
           : f == TX_CHAT_DEEPSEEK3 ? "deepseek3"
                                    : "glm4.7";
}
