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
 *
 * Builds: see fuzz_safetensors.c (fuzz_config, fuzz_config_replay).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <tx/glm_config.h>

#include "model/model_internal.h"

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
