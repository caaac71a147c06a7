/* SPDX-License-Identifier: MIT */
/*
 * tools/lib/chat_output.c: a chat model's output split into reasoning,
 * content and tool calls (GLM XML with schema-typed values, Qwen3 JSON,
 * DeepSeek-V3.1 and V3), malformed calls as content; and for every text,
 * every prefix's settled parts are prefixes of the final parts (a stream's
 * deltas add up to the non-streamed reply).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/chat_output.h"
#include "tx_test_main.h"

/* struct want literals leave the trailing fields zero */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static json_object *tools(void)
{
    return json_tokener_parse(
        "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
        "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": "
        "{\"type\": \"integer\"}, \"zip\": {\"type\": \"string\"}, \"opts\": {\"type\": "
        "\"object\"}}}}}]");
}

struct want {
    const char *reasoning; /* NULL: none */
    const char *content;
    int calls;
    const char *name0, *args0; /* the first call */
    int malformed;
};

/* Parses text finally and checks want; then every prefix non-finally:
 * settled parts are prefixes of the final ones, calls a prefix of the calls. */
static void check_text(const struct chat_out_opts *o, const char *text, const struct want *w)
{
    struct chat_parsed f;
    size_t n = strlen(text);
    ck_assert_int_eq(chat_output_parse(o, "t", text, n, 1, &f), 0);
    if (w->reasoning) {
        ck_assert_msg(f.has_reasoning, "%s: no reasoning", text);
        ck_assert_int_eq(f.reasoning_len, strlen(w->reasoning));
        ck_assert(!memcmp(f.reasoning, w->reasoning, f.reasoning_len));
    } else {
        ck_assert_msg(!f.has_reasoning, "%s: unexpected reasoning", text);
    }
    ck_assert_msg(!strcmp(f.content, w->content), "%s: content '%s', want '%s'", text, f.content,
                  w->content);
    ck_assert_int_eq((int)json_object_array_length(f.calls), w->calls);
    ck_assert_int_eq(f.malformed, w->malformed);
    if (w->calls) {
        json_object *c = json_object_array_get_idx(f.calls, 0), *fn, *nm, *a;
        ck_assert(json_object_object_get_ex(c, "function", &fn));
        ck_assert(json_object_object_get_ex(fn, "name", &nm));
        ck_assert(json_object_object_get_ex(fn, "arguments", &a));
        ck_assert_str_eq(json_object_get_string(nm), w->name0);
        ck_assert_str_eq(json_object_get_string(a), w->args0);
    }
    for (size_t l = 0; l <= n; l++) {
        struct chat_parsed p;
        ck_assert_int_eq(chat_output_parse(o, "t", text, l, 0, &p), 0);
        ck_assert_msg(p.reasoning_len <= f.reasoning_len &&
                          (!p.reasoning_len || !memcmp(p.reasoning, f.reasoning, p.reasoning_len)),
                      "%s: prefix %zu: reasoning not a prefix", text, l);
        ck_assert_msg(p.content_len <= f.content_len && !memcmp(p.content, f.content, p.content_len),
                      "%s: prefix %zu: content '%s' not a prefix of '%s'", text, l, p.content,
                      f.content);
        size_t pc = json_object_array_length(p.calls);
        ck_assert(pc <= json_object_array_length(f.calls));
        for (size_t k = 0; k < pc; k++)
            ck_assert(json_object_equal(json_object_array_get_idx(p.calls, k),
                                        json_object_array_get_idx(f.calls, k)));
        chat_parsed_free(&p);
    }
    chat_parsed_free(&f);
}

START_TEST(reasoning)
{
    struct chat_out_opts o = {.reasoning = 1, .think_open = 1};
    check_text(&o, "7 is prime.</think>\n\nYes.", &(struct want){"7 is prime.", "Yes."});
    check_text(&o, "still thinking", &(struct want){"still thinking", ""});
    o.think_open = 0;
    check_text(&o, "<think>\nhm\n</think>answer", &(struct want){"\nhm\n", "answer"});
    check_text(&o, "  <think>open", &(struct want){"open", ""});
    check_text(&o, "plain answer <think> later", &(struct want){NULL, "plain answer <think> later"});
    check_text(&o, "<thin", &(struct want){NULL, "<thin"});
    o.reasoning = 0;
    check_text(&o, "<think>x</think>y", &(struct want){NULL, "<think>x</think>y"});
}
END_TEST

START_TEST(glm_calls)
{
    struct chat_out_opts o = {.reasoning = 1, .think_open = 1, .tools = tools()};
    check_text(&o,
               "Call it.</think>Let me check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
               "<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n"
               "<arg_key>zip</arg_key>\n<arg_value>75001</arg_value>\n<arg_key>opts</arg_key>\n"
               "<arg_value>{\"unit\": \"C\"}</arg_value>\n</tool_call>",
               &(struct want){"Call it.", "Let me check.", 1, "get_weather",
                              "{\"city\":\"Paris\",\"days\":2,\"zip\":\"75001\",\"opts\":{\"unit\":\"C\"}}"});
    /* GLM-4.7 (no new lines), two calls, no content */
    check_text(&o,
               "</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value>"
               "</tool_call><tool_call>ping</tool_call>",
               &(struct want){"", "", 2, "get_weather", "{\"city\":\"Oslo\"}"});
    /* never closed, and a bad one: content */
    check_text(&o, "</think>x <tool_call>get_weather<arg_key>city",
               &(struct want){"", "x <tool_call>get_weather<arg_key>city", 0, NULL, NULL, 1});
    check_text(&o, "</think><tool_call>a b\nc<arg_key></tool_call>",
               &(struct want){"", "<tool_call>a b\nc<arg_key></tool_call>", 0, NULL, NULL, 1});
    json_object_put(o.tools);
}
END_TEST

START_TEST(json_and_deepseek_calls)
{
    struct chat_out_opts o = {.reasoning = 1, .tools = tools()};
    check_text(&o,
               "<think>\nq\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
               "{\"city\": \"K\\u00f8benhavn\"}}\n</tool_call>",
               &(struct want){"\nq\n", "", 1, "get_weather", "{\"city\":\"København\"}"});
    check_text(&o,
               "Sure.<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
               "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>get_weather"
               "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>{\"city\": \"Oslo\"}"
               "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
               "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
               &(struct want){NULL, "Sure.", 1, "get_weather", "{\"city\":\"Oslo\"}"});
    /* DeepSeek-V3: function<sep>NAME\n```json\nARGS\n``` */
    check_text(&o,
               "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
               "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>function"
               "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>get_weather\n```json\n"
               "{\"city\": \"Oslo\", \"days\": 3}\n```"
               "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
               "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
               &(struct want){NULL, "", 1, "get_weather", "{\"city\":\"Oslo\",\"days\":3}"});
    /* without tools in the request: no parsing */
    json_object_put(o.tools);
    o.tools = NULL;
    check_text(&o, "<tool_call>{\"name\": \"x\"}</tool_call>",
               &(struct want){NULL, "<tool_call>{\"name\": \"x\"}</tool_call>"});
}
END_TEST

START_TEST(prompt_think_open)
{
    ck_assert(chat_prompt_think_open("<|assistant|><think>", 20));
    ck_assert(!chat_prompt_think_open("<|assistant|><think></think>", 28));
    ck_assert(!chat_prompt_think_open("<|assistant|>", 13));
    ck_assert(chat_prompt_think_open("</think>x<|assistant|><think>", 29));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("chat_output");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, reasoning);
    tcase_add_test(tc, glm_calls);
    tcase_add_test(tc, json_and_deepseek_calls);
    tcase_add_test(tc, prompt_think_open);
    suite_add_tcase(s, tc);
    return tx_test_run(s);
}
