/* SPDX-License-Identifier: MIT */
/*
 * glm-server's log-probabilities: OpenAI's "logprobs" / "top_logprobs".
 *
 * The numbers are the model's: log_softmax of the lm_head row the device's
 * SAMPLE command drew the token from (glm_decode_batch_prefill_logits
 * copies that row out of the device's activation memory), over the ids the
 * sampler may choose (glm_model_sample_vocab), before penalties,
 * temperature and top-k/top-p/min-p. That is vLLM's default
 * (--logprobs-mode raw_logprobs): a greedy token is always the most likely
 * one, and the figures do not change with the sampling settings, which is
 * what an evaluation harness wants. docs/glm-server.md, "Log-probabilities".
 *
 *   chat:        "logprobs": true, "top_logprobs": 0..20
 *                -> {"content": [{"token", "logprob", "bytes", "top_logprobs":
 *                   [{"token", "logprob", "bytes"}]}]}
 *   completions: "logprobs": 0..20 (alternatives per token)
 *                -> {"tokens", "token_logprobs", "top_logprobs": [{token:
 *                   logprob}], "text_offset" (characters into the text)}
 *
 * A -inf log-probability is written as -9999.0, as OpenAI does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_tokenizer.h>
#include <utf8proc.h>

#include "server.h"

#define LP_MIN -9999.0 /* OpenAI's stand-in for -inf */

int lp_parse(json_object *o, int chat, struct request *r, char **reply)
{
    json_object *lp = NULL, *tl = NULL;
    json_object_object_get_ex(o, "logprobs", &lp);
    json_object_object_get_ex(o, "top_logprobs", &tl);
    if (chat) {
        if (lp && !json_object_is_type(lp, json_type_boolean))
            return srv_bad_request(reply, "logprobs", "'logprobs' must be true or false");
        r->logprobs = lp && json_object_get_boolean(lp);
        if (!tl)
            return 0;
        if (!json_object_is_type(tl, json_type_int) || json_object_get_int64(tl) < 0 ||
            json_object_get_int64(tl) > SRV_MAX_TOP_LOGPROBS)
            return srv_bad_request(reply, "top_logprobs",
                                   "'top_logprobs' must be an integer in [0, 20]");
        if (!r->logprobs && json_object_get_int(tl) > 0)
            return srv_bad_request(reply, "top_logprobs",
                                   "'top_logprobs' needs \"logprobs\": true");
        r->top_logprobs = json_object_get_int(tl);
        return 0;
    }
    if (!lp)
        return 0;
    if (json_object_is_type(lp, json_type_boolean)) { /* false: none; true: the token's own */
        r->logprobs = json_object_get_boolean(lp);
        return 0;
    }
    if (!json_object_is_type(lp, json_type_int) || json_object_get_int64(lp) < 0 ||
        json_object_get_int64(lp) > SRV_MAX_TOP_LOGPROBS)
        return srv_bad_request(reply, "logprobs",
                               "'logprobs' must be an integer in [0, 20]: the alternatives "
                               "returned per token");
    r->logprobs = 1; /* 0: the sampled token's log-probability alone (as vLLM) */
    r->top_logprobs = json_object_get_int(lp);
    return 0;
}

int lp_record(struct srv *S, struct request *r, const float *logits, int32_t tok)
{
    if (r->n_lp == r->cap_lp) {
        int cap = r->cap_lp ? 2 * r->cap_lp : 64;
        struct lp_entry *e = realloc(r->lp, (size_t)cap * sizeof(*e));
        if (!e)
            return -1;
        r->lp = e;
        r->cap_lp = cap;
    }
    int V = S->sample_vocab, k = r->top_logprobs;
    struct lp_entry *e = &r->lp[r->n_lp++];
    memset(e, 0, sizeof(*e));
    e->tok = tok;
    e->off = (uint32_t)r->lp_bytes;
    e->chars = (uint32_t)r->lp_chars;
    const char *b;
    int nb = tx_tokenizer_token_bytes(S->tok, tok, &b);
    for (int i = 0; i < nb; i++) /* a character: a byte that does not continue one */
        r->lp_chars += ((unsigned char)b[i] & 0xc0) != 0x80;
    r->lp_bytes += nb > 0 ? (size_t)nb : 0;
    /* log-sum-exp over the sampler's ids; the k largest by insertion */
    float mx = -INFINITY;
    for (int i = 0; i < V; i++)
        if (logits[i] > mx)
            mx = logits[i];
    double sum = 0;
    if (isfinite(mx))
        for (int i = 0; i < V; i++)
            sum += exp((double)logits[i] - mx);
    double lse = isfinite(mx) ? mx + log(sum) : INFINITY;
    for (int i = 0; i < V && k > 0; i++) {
        float l = logits[i];
        if (l != l || (e->n_top == k && l <= e->top_lp[k - 1]))
            continue;
        int j = e->n_top < k ? e->n_top++ : k - 1;
        while (j > 0 && e->top_lp[j - 1] < l) { /* ties: the lower id first */
            e->top_lp[j] = e->top_lp[j - 1];
            e->top_id[j] = e->top_id[j - 1];
            j--;
        }
        e->top_lp[j] = l;
        e->top_id[j] = i;
    }
    for (int j = 0; j < e->n_top; j++)
        e->top_lp[j] = (float)((double)e->top_lp[j] - lse);
    e->lp = (float)((double)logits[tok] - lse);
    return 0;
}

static json_object *lp_number(float v)
{
    return json_object_new_double(isfinite(v) && v > LP_MIN ? (double)v : LP_MIN);
}

/* The token's text: its bytes when they are UTF-8, else vLLM's
 * "bytes:\xNN..." spelling */
static json_object *token_text(const char *b, int n)
{
    int ok = 1;
    for (int i = 0; i < n && ok;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)b + i, n - i, &cp);
        ok = k > 0;
        i += ok ? (int)k : 0;
    }
    if (ok)
        return json_object_new_string_len(b, n);
    char *s = malloc((size_t)n * 4 + 7);
    if (!s)
        return NULL;
    int k = snprintf(s, 7, "bytes:");
    for (int i = 0; i < n; i++)
        k += snprintf(s + k, 5, "\\x%02x", (unsigned char)b[i]);
    json_object *t = json_object_new_string_len(s, k);
    free(s);
    return t;
}

static int bytes_of(struct srv *S, int32_t id, const char **b)
{
    int n = tx_tokenizer_token_bytes(S->tok, id, b);
    if (n <= 0)
        *b = "";
    return n > 0 ? n : 0;
}

static json_object *byte_array(const char *b, int n)
{
    json_object *a = json_object_new_array();
    for (int i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_int((unsigned char)b[i]));
    return a;
}

/* chat: {"token", "logprob", "bytes"} */
static json_object *chat_item(struct srv *S, int32_t id, float lp)
{
    const char *b;
    int n = bytes_of(S, id, &b);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "token", token_text(b, n));
    json_object_object_add(o, "logprob", lp_number(lp));
    json_object_object_add(o, "bytes", byte_array(b, n));
    return o;
}

/* The entries [from, to) in the chat or the completions shape */
static json_object *lp_shape(struct srv *S, struct request *r, int from, int to)
{
    json_object *o = json_object_new_object();
    if (r->chat) {
        json_object *content = json_object_new_array();
        for (int i = from; i < to; i++) {
            const struct lp_entry *e = &r->lp[i];
            json_object *it = chat_item(S, e->tok, e->lp), *top = json_object_new_array();
            for (int j = 0; j < e->n_top; j++)
                json_object_array_add(top, chat_item(S, e->top_id[j], e->top_lp[j]));
            json_object_object_add(it, "top_logprobs", top);
            json_object_array_add(content, it);
        }
        json_object_object_add(o, "content", content);
        return o;
    }
    json_object *toks = json_object_new_array(), *lps = json_object_new_array(),
                *tops = json_object_new_array(), *offs = json_object_new_array();
    for (int i = from; i < to; i++) {
        const struct lp_entry *e = &r->lp[i];
        const char *b;
        int n = bytes_of(S, e->tok, &b);
        json_object_array_add(toks, token_text(b, n));
        json_object_array_add(lps, lp_number(e->lp));
        json_object_array_add(offs, json_object_new_int64((int64_t)e->chars));
        /* the k most likely and, as OpenAI and vLLM, the sampled token */
        json_object *d = json_object_new_object();
        int has = 0;
        for (int j = 0; j < e->n_top; j++) {
            n = bytes_of(S, e->top_id[j], &b);
            json_object *t = token_text(b, n);
            json_object_object_add(d, json_object_get_string(t), lp_number(e->top_lp[j]));
            json_object_put(t);
            has |= e->top_id[j] == e->tok;
        }
        if (!has) {
            n = bytes_of(S, e->tok, &b);
            json_object *t = token_text(b, n);
            json_object_object_add(d, json_object_get_string(t), lp_number(e->lp));
            json_object_put(t);
        }
        json_object_array_add(tops, d);
    }
    json_object_object_add(o, "tokens", toks);
    json_object_object_add(o, "token_logprobs", lps);
    json_object_object_add(o, "top_logprobs", tops);
    json_object_object_add(o, "text_offset", offs);
    return o;
}

json_object *lp_json(struct srv *S, struct request *r, int stream)
{
    if (!r->logprobs)
        return NULL;
    /* the tokens whose text is out: a stop string cuts the text (and the
     * tokens after its start); a token decoding to nothing yet goes with
     * the next */
    int done = r->state == RQ_DONE, to = r->n_lp;
    if (!done || r->out_len < r->lp_bytes)
        while (to > 0 && r->lp[to - 1].off >= r->out_len)
            to--;
    int from = stream ? r->lp_sent : 0;
    if (stream && to <= from)
        return NULL; /* a chunk without new tokens (the role, the finish) */
    if (stream)
        r->lp_sent = to;
    return lp_shape(S, r, from, to > from ? to : from);
}
