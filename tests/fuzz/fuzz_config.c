/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the GLM config.json parser (glm_config_from_json,
 * libtx/model/glm_config.c; libFuzzer entry point LLVMFuzzerTestOneInput).
 * The input is the config.json text (a NUL byte ends it, as for the C
 * string the parser takes). Properties:
 *   - the parser returns 0 or a negative errno, with a message on error;
 *   - an accepted config validates, converts back to JSON
 *     (glm_config_to_json), and that JSON is accepted again and converts
 *     to the same text (a fixed point);
 *   - an accepted config has a tensor list (glm_config_tensor_count >= 0,
 *     the first tensors enumerate) when it is of a sane size;
 *   - the .smd reader's fast JSON syntax check (txm_json_object_ok) never
 *     accepts a document json-c's parser rejects, since the reader trusts
 *     it in place of json-c (libtx/model/smd.c).
 * The same input is also read as (issue 16, parsers added after f3390af):
 *   - a generation_config.json (txm_gen_config_parse, gen_config.c):
 *     0 or a negative TX_E* code with a message; an accepted one has its
 *     fields in their documented ranges, is accepted without a vocabulary
 *     bound whenever it is with one, and written back
 *     (txm_gen_config_to_object) it reads back to the same values;
 *   - a glm-synth --config-set list (its first line, tx_synth_apply_config_set,
 *     tools/lib/synth.c) over the tiny GLM-4.5 and GLM-5 configs: 0 with a
 *     JSON object, or an error with a message and no output; the result
 *     is parsed by glm_config_from_json like any config.json;
 *   - a chat_template (tx_chat_format_of_template): -1 or a known format
 *     with its family's name.
 *
 * Builds: see fuzz_safetensors.c (fuzz_config, fuzz_config_replay).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/glm.h>
#include <tx/glm_config.h>
#include <tx-internal/tx_chat_format.h>
#include <tx/tx_error.h>
#include <tx-internal/tx_synth.h>
#include <tx/tx_tokenizer.h>

#include "common/config_set.h"
#include <tx-internal/tx_model_internal.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fcfg_check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz property violated: %s\n", what);
        abort();
    }
}

/* json-c's verdict as the .smd reader's fallback path takes it (default
 * flags and depth, an object, nothing but white space after it). */
static int fcfg_jsonc_object(const char *s, size_t n)
{
    struct json_tokener *tok = json_tokener_new();
    if (!tok)
        return -1;
    struct json_object *o = json_tokener_parse_ex(tok, s, (int)n);
    int ok = o && json_tokener_get_error(tok) == json_tokener_success &&
             json_object_is_type(o, json_type_object);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    json_object_put(o);
    for (size_t i = end; ok && i < n; i++)
        if (!strchr(" \t\n\r\f\v", s[i]))
            ok = 0;
    return ok;
}

static int fcfg_count_cb(void *ctx, const struct glm_tensor_info *t)
{
    (void)t;
    return ++*(int *)ctx >= 64; /* the first tensors are enough */
}

static int fcfg_gen_equal(const struct glm_generation_config *a,
                          const struct glm_generation_config *b)
{
    return a->has == b->has && a->n_eos == b->n_eos &&
           !memcmp(a->eos_token_ids, b->eos_token_ids, sizeof(a->eos_token_ids)) &&
           a->do_sample == b->do_sample && a->temperature == b->temperature &&
           a->top_p == b->top_p && a->top_k == b->top_k;
}

/* The input as a generation_config.json, with and without a vocabulary. */
static void fcfg_gen_config(const char *text, size_t size)
{
    struct glm_generation_config g, g0, g2;
    char err[TX_ERR_MAX];
    err[0] = 0;
    int rc = txm_gen_config_parse(text, size, "generation_config.json", 1000, &g, err, sizeof(err));
    fcfg_check(rc <= 0, "gen_config: returns 0 or a negative code");
    if (rc < 0) {
        fcfg_check(err[0] != 0 && strstr(err, "generation_config.json"),
                   "gen_config: an error names the file");
        return;
    }
    fcfg_check(txm_gen_config_parse(text, size, "g", 0, &g0, err, sizeof(err)) == 0 &&
                   fcfg_gen_equal(&g, &g0),
               "gen_config: accepted with vocab 1000 => accepted alike with no vocab bound");
    fcfg_check(!(g.has & ~0x1fu), "gen_config: has");
    fcfg_check((g.has & GLM_GEN_HAS_EOS) ? g.n_eos >= 1 && g.n_eos <= GLM_MAX_EOS : g.n_eos == 0,
               "gen_config: n_eos");
    for (int i = 0; i < g.n_eos; i++)
        fcfg_check(g.eos_token_ids[i] >= 0 && g.eos_token_ids[i] < 1000, "gen_config: eos id");
    fcfg_check(g.do_sample == 0 || g.do_sample == 1, "gen_config: do_sample");
    fcfg_check(g.temperature >= 0 && g.temperature <= GLM_GEN_MAX_TEMPERATURE,
               "gen_config: temperature");
    fcfg_check(!(g.has & GLM_GEN_HAS_TOP_P) || (g.top_p > 0 && g.top_p <= 1), "gen_config: top_p");
    fcfg_check(g.top_k >= 0 && g.top_k <= GLM_GEN_MAX_TOP_K, "gen_config: top_k");
    struct json_object *o = txm_gen_config_to_object(&g);
    fcfg_check(o != NULL, "gen_config: to_object");
    const char *j = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    fcfg_check(j && txm_gen_config_parse(j, strlen(j), "g", 1000, &g2, err, sizeof(err)) == 0,
               "gen_config: the written object is accepted");
    fcfg_check(fcfg_gen_equal(&g, &g2), "gen_config: written and read back, the same values");
    json_object_put(o);
}

/* The input's first line as a --config-set list over a preset config. */
static void fcfg_config_set(const char *text)
{
    static char *base[2];
    if (!base[0]) {
        base[0] = tx_synth_config_json(GLM_ARCH_GLM4_MOE, TX_SYNTH_TINY, 256);
        base[1] = tx_synth_config_json(GLM_ARCH_GLM_MOE_DSA, TX_SYNTH_TINY, 256);
        fcfg_check(base[0] && base[1], "config_set: the preset configs");
    }
    size_t n = strcspn(text, "\n");
    if (n > TX_SYNTH_CONFIG_SET_MAX + 8)
        n = TX_SYNTH_CONFIG_SET_MAX + 8;
    char *set = strndup(text, n);
    if (!set)
        return;
    for (int b = 0; b < 2; b++) {
        char err[TX_ERR_MAX];
        char *out = (char *)1;
        err[0] = 0;
        int rc = tx_synth_apply_config_set(base[b], set, &out, err, sizeof(err));
        fcfg_check(rc <= 0, "config_set: returns 0 or a negative code");
        if (rc < 0) {
            fcfg_check(out == NULL && strstr(err, "--config-set"),
                       "config_set: no output, and a message naming --config-set");
            continue;
        }
        fcfg_check(out && fcfg_jsonc_object(out, strlen(out)) == 1,
                   "config_set: the result is a JSON object");
        struct glm_config cfg;
        rc = glm_config_from_json(out, &cfg, err, sizeof(err));
        fcfg_check(rc <= 0 && (rc == 0 || err[0]), "config_set: the result parses or errs");
        if (rc == 0)
            fcfg_check(glm_config_validate(&cfg, err, sizeof(err)) == 0,
                       "config_set: an accepted result validates");
        free(out);
        if (b == 0 && n > 64)
            break; /* long lists: one base is enough */
    }
    free(set);
}

/* The input as a chat_template. */
static void fcfg_chat_template(const char *text)
{
    const char *which = NULL;
    int f = tx_chat_format_of_template(text, &which);
    fcfg_check(which != NULL, "chat_template: which is set");
    fcfg_check(f == -1 ? which[0] == 0
                       : (f == TX_CHAT_GLM4 || f == TX_CHAT_GLM45 || f == TX_CHAT_GLM5 ||
                          f == TX_CHAT_QWEN3 || f == TX_CHAT_DEEPSEEK3 || f == TX_CHAT_DEEPSEEK31) &&
                             which[0] != 0 && tx_chat_format_name(f) != NULL,
               "chat_template: -1, or a known format with a name");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;

    if (!memchr(text, 0, size) && txm_json_object_ok(text, size))
        fcfg_check(fcfg_jsonc_object(text, size) != 0,
                   "the fast JSON check accepts only what json-c accepts");

    fcfg_gen_config(text, size);
    fcfg_config_set(text);
    fcfg_chat_template(text);

    struct glm_config cfg;
    char err[TX_ERR_MAX];
    err[0] = 0;
    int rc = glm_config_from_json(text, &cfg, err, sizeof(err));
    fcfg_check(rc <= 0, "returns 0 or a negative errno");
    if (rc < 0) {
        fcfg_check(err[0] != 0, "an error comes with a message");
        free(text);
        return 0;
    }
    fcfg_check(glm_config_validate(&cfg, err, sizeof(err)) == 0, "an accepted config validates");
    char *j1 = glm_config_to_json(&cfg);
    fcfg_check(j1 != NULL, "to_json");
    struct glm_config c2;
    fcfg_check(glm_config_from_json(j1, &c2, err, sizeof(err)) == 0, "to_json output is accepted");
    char *j2 = glm_config_to_json(&c2);
    fcfg_check(j2 && !strcmp(j1, j2), "to_json(from_json(to_json(c))) == to_json(c)");
    free(j1);
    free(j2);
    int64_t nt = glm_config_tensor_count(&cfg);
    fcfg_check(nt >= 0, "tensor count");
    if (nt > 0) {
        int seen = 0;
        glm_config_tensor_list(&cfg, fcfg_count_cb, &seen);
        fcfg_check(seen > 0, "the tensor list enumerates");
    }
    free(text);
    return 0;
}

#ifdef TX_FUZZ_STANDALONE
#define FUZZ_NAME "fuzz_config"
#include "fuzz_model_replay.h"
#endif
