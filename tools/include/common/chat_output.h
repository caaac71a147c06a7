/* SPDX-License-Identifier: MIT */
/*
 * A chat model's output text split into reasoning (<think>...</think>),
 * content and OpenAI tool calls, as vLLM's reasoning and tool parsers and
 * llama-server do (tools/lib/chat_output.c): GLM-4.5/4.6/4.7/5.x XML tool
 * calls (<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>
 * </tool_call>, values typed by the tool's JSON schema), Qwen3 / Hermes JSON
 * tool calls (<tool_call>{"name": ..., "arguments": {...}}</tool_call>),
 * DeepSeek-V3.1 and DeepSeek-V3 (<｜tool▁calls▁begin｜>...).
 *
 * The parse is a function of the text so far: what it calls settled only
 * grows as the text grows (a stream's deltas are the differences), and the
 * final parse of the whole text gives the same parts.
 */
#ifndef TXC_CHAT_OUTPUT_H
#define TXC_CHAT_OUTPUT_H

#include <stddef.h>

#include <json-c/json.h>

struct chat_out_opts {
    int reasoning;      /* split <think>...</think> into reasoning_content */
    int think_open;     /* the prompt ends inside <think>: the text starts as reasoning */
    json_object *tools; /* the request's tool definitions (NULL: no tool-call parsing) */
};

struct chat_parsed {
    const char *reasoning; /* settled reasoning: a slice of the text */
    size_t reasoning_len;
    char *content; /* settled content (malloc'd, NUL-terminated) */
    size_t content_len;
    json_object *calls;  /* settled tool calls: OpenAI's [{"id", "type", "function":
                          * {"name", "arguments": JSON text}}] (owned) */
    int has_reasoning;   /* a reasoning part was found (even empty) */
    int malformed;       /* a tool call that did not parse went to the content */
    /* not final: a tool call after the settled ones is being generated */
    int partial;
    char *partial_name; /* its name once complete (malloc'd), or NULL */
    char *partial_args; /* a prefix of its arguments text (GLM XML: "{" and the
                         * pairs so far; malloc'd), or NULL */
};

/* Parses text[0, len); final: the text is complete (an unclosed reasoning
 * is all reasoning, an unclosed or malformed tool call is content).
 * id_prefix names the calls (id_prefix + index). 0, or -1 out of memory. */
int chat_output_parse(const struct chat_out_opts *o, const char *id_prefix, const char *text,
                      size_t len, int final, struct chat_parsed *p);
void chat_parsed_free(struct chat_parsed *p);

/* The id chat_output_parse gives call index of id_prefix ("call_P_I"). */
void chat_call_id(char *buf, size_t sz, const char *id_prefix, size_t index);

/* Whether the prompt's text tail leaves a <think> open (the last <think>
 * after the last </think>). */
int chat_prompt_think_open(const char *tail, size_t len);

#endif
