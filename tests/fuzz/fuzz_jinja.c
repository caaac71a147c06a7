/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the chat-template Jinja renderer (tx/tx_jinja.h,
 * libtx/tokenizer/jinja_*.c). The input is a template: it is compiled and,
 * if it compiles, rendered twice over a fixed conversation with tools, tool
 * calls and special tokens, under small limits (steps, output, memory).
 * Properties: compile and render return 0 or a negative TX_E* code with a
 * message; a render's text is NUL-terminated at its length; the two
 * renders give the same status and the same bytes (the renderer keeps no
 * state); never a crash, a leak or an unbounded run (the limits).
 *
 * Builds: make fuzz-jinja (clang -fsanitize=fuzzer, tests/fuzz/README.md);
 * -DTX_FUZZ_STANDALONE: a main() that replays the files named.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_jinja.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char VARS[] =
    "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"messages\": ["
    "{\"role\": \"system\", \"content\": \"Be brief.\"},"
    "{\"role\": \"user\", \"content\": \"caf\\u00e9 <think>x</think> 21\\u00b0C\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"hm\","
    " \"tool_calls\": [{\"id\": \"call_123456789\", \"type\": \"function\", \"function\":"
    " {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2,"
    " \"x\": [1.5, null, true, {\"k\": \"v\"}]}}}]},"
    "{\"role\": \"tool\", \"content\": \"{\\\"temp\\\": 9}\"},"
    "{\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"9\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
    " \"description\": \"Weather\\nof a city\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}],"
    " \"documents\": null, \"add_generation_prompt\": true, \"enable_thinking\": false}";

static void check_status(int rc, const char *err)
{
    if (rc > 0 || (rc < 0 && !err[0]))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512] = "";
    struct tx_jinja *t = NULL;
    int rc = tx_jinja_compile((const char *)data, size, &t, err, sizeof(err));
    check_status(rc, err);
    if (rc) {
        if (t)
            abort();
        return 0;
    }
    char *out[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    int st[2];
    for (int i = 0; i < 2; i++) {
        struct tx_jinja_opts o = {.max_steps = 200000, .max_output = 1 << 20,
                                  .max_memory = 32u << 20, .now = 1700000000};
        err[0] = 0;
        st[i] = tx_jinja_render(t, VARS, sizeof(VARS) - 1, &o, &out[i], &len[i], err,
                                sizeof(err));
        check_status(st[i], err);
        if (!st[i] && (!out[i] || out[i][len[i]] != 0))
            abort();
        if (st[i] && out[i])
            abort();
    }
    if (st[0] != st[1] || len[0] != len[1] || (len[0] && memcmp(out[0], out[1], len[0])))
        abort();
    free(out[0]);
    free(out[1]);
    tx_jinja_free(t);
    return 0;
}

#ifdef TX_FUZZ_STANDALONE
#define FUZZ_NAME "fuzz_jinja"
#include "fuzz_model_replay.h"
#endif
