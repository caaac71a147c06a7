// SPDX-License-Identifier: MIT
// glm-server through the official OpenAI client (npm "openai", installed
// into build/npm by scripts/install-deps): what a client application sees.
//
//   node tests/server/openai_client.mjs URL MODEL [OPENAI_MODULE_DIR]
//
// A chat completion and a streamed one (their texts equal at temperature
// 0), an agent loop with tools (the assistant's tool call and the tool's
// result go back in and are rendered into the next prompt; finish_reason
// is one the client knows), tool_choice "none", an unknown model as the
// client's NotFoundError (404) and a bad field as its BadRequestError (400);
// logprobs with top_logprobs and n > 1 (chat, streamed, completions);
// tool_choice "required" streamed through the client's stream helper (the
// accumulated arguments parse) and response_format json_schema.
// Prints one line per check and "openai-client: N passed, N failed"; when
// the module is not installed, "SKIP ..." and "openai-client: 0 passed, 0
// failed". Every request has a timeout.
import { existsSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [url, model, moduleDir = "build/npm/node_modules/openai"] = process.argv.slice(2);
let passed = 0;
let failed = 0;
function check(ok, what, detail = "") {
    if (ok) {
        passed++;
        console.log("ok   " + what);
    } else {
        failed++;
        console.log("FAIL " + what + (detail ? ": " + detail : ""));
    }
}

const entry = path.resolve(moduleDir, "index.mjs");
if (!existsSync(entry)) {
    console.log("SKIP the official OpenAI client is not installed (" + entry +
                "; scripts/install-deps installs it with npm)");
    console.log("openai-client: 0 passed, 0 failed");
    process.exit(0);
}
const { default: OpenAI } = await import(pathToFileURL(entry).href);
const client = new OpenAI({ baseURL: url + "/v1", apiKey: "none", timeout: 120000, maxRetries: 0 });
const version = JSON.parse(
    (await import("node:fs")).readFileSync(path.resolve(moduleDir, "package.json"), "utf8")).version;
console.log("openai-client: the official OpenAI client for Node.js, version " + version);

const tools = [{
    type: "function",
    function: {
        name: "get_weather",
        description: "Weather of a city",
        parameters: {
            type: "object",
            properties: { city: { type: "string" }, days: { type: "integer" } },
            required: ["city"],
        },
    },
}];
const msgs = [{ role: "system", content: "You answer with tools." },
              { role: "user", content: "What is the weather in Paris?" }];
const known = ["stop", "length", "tool_calls"];

try {
    const r = await client.chat.completions.create(
        { model, messages: msgs, max_tokens: 12, temperature: 0 });
    const s = await client.chat.completions.create(
        { model, messages: msgs, max_tokens: 12, temperature: 0, stream: true });
    let text = "";
    let finish = null;
    for await (const chunk of s)
        for (const c of chunk.choices) {
            text += c.delta?.content ?? "";
            if (c.finish_reason)
                finish = c.finish_reason;
        }
    const m = r.choices[0].message;
    check(typeof r.id === "string" && r.object === "chat.completion" && known.includes(
              r.choices[0].finish_reason) && (m.content ?? "") === text &&
              finish === r.choices[0].finish_reason,
          "a completion and the same one streamed: the same text and finish_reason (" +
              r.usage.completion_tokens + " tokens)",
          JSON.stringify({ m, text, finish }));

    const t1 = await client.chat.completions.create(
        { model, messages: msgs, tools, max_tokens: 24, temperature: 0 });
    const call = { id: "call_abc123def", type: "function",
                   function: { name: "get_weather",
                               arguments: JSON.stringify({ city: "Paris", days: 2 }) } };
    const loop = [...msgs, { role: "assistant", content: null, tool_calls: [call] },
                  { role: "tool", tool_call_id: call.id, content: "{\"temp_c\": 21}" }];
    const t2 = await client.chat.completions.create(
        { model, messages: loop, tools, max_tokens: 8, temperature: 0 });
    const calls = t1.choices[0].message.tool_calls ?? [];
    check(known.includes(t1.choices[0].finish_reason) &&
              calls.every((c) => c.type === "function" && typeof c.id === "string" &&
                                 typeof JSON.parse(c.function.arguments) === "object") &&
              t2.usage.prompt_tokens > t1.usage.prompt_tokens && known.includes(
                  t2.choices[0].finish_reason),
          "an agent loop with tools: the tool call and its result rendered into the next " +
              "prompt (" + t1.usage.prompt_tokens + " -> " + t2.usage.prompt_tokens + " tokens)",
          JSON.stringify({ t1: t1.choices[0], t2: t2.usage }));
    const t3 = await client.chat.completions.create(
        { model, messages: msgs, tools, tool_choice: "none", max_tokens: 1 });
    check(t3.usage.prompt_tokens < t1.usage.prompt_tokens,
          "tool_choice none: the tools left out of the prompt");
} catch (e) {
    check(false, "the client's requests", String(e));
}

// logprobs with top_logprobs and n > 1 (issue 40 item 6), as the client types them
try {
    const q = [{ role: "user", content: "Hello" }];
    const r = await client.chat.completions.create(
        { model, messages: q, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3,
          n: 2 });
    const lp = r.choices.map((c) => c.logprobs?.content ?? []);
    check(r.choices.length === 2 && r.choices[1].index === 1 && lp.every((a) => a.length > 0 &&
              a.every((e) => typeof e.token === "string" && e.logprob <= 0 &&
                             Array.isArray(e.bytes) && e.top_logprobs.length === 3 &&
                             e.top_logprobs[0].token === e.token)) &&
              r.usage.completion_tokens === lp[0].length + lp[1].length,
          "chat n=2 with logprobs and top_logprobs=3: two choices, greedy tokens first of " +
              "their alternatives, usage counts both",
          JSON.stringify(r).slice(0, 400));
    const s = await client.chat.completions.create(
        { model, messages: q, max_tokens: 6, temperature: 0.8, seed: 4, n: 2, stream: true,
          logprobs: true });
    const text = ["", ""];
    const count = [0, 0];
    for await (const chunk of s)
        for (const c of chunk.choices) {
            text[c.index] += (c.delta?.content ?? "") + (c.delta?.reasoning_content ?? "");
            count[c.index] += c.logprobs?.content?.length ?? 0;
        }
    check(count[0] > 0 && count[1] > 0, "chat n=2 streamed with logprobs: each choice's chunks " +
          "carry its tokens' logprobs (" + count + " tokens)", JSON.stringify({ text, count }));
    const c = await client.completions.create(
        { model, prompt: "The TX8 is", max_tokens: 4, temperature: 0, logprobs: 2 });
    const l = c.choices[0].logprobs;
    check(l && l.tokens.join("") === c.choices[0].text && l.token_logprobs.length === 4 &&
              l.top_logprobs.every((d, i) => Math.max(...Object.values(d)) ===
                                             l.token_logprobs[i]) && l.text_offset[0] === 0,
          "completions logprobs=2: tokens spell the text, greedy logprob the largest",
          JSON.stringify(c.choices[0]).slice(0, 400));
} catch (e) {
    check(false, "logprobs and n through the client", String(e));
}

// constrained output through the client: a streamed tool call with
// tool_choice "required" (the client's stream helper adds the deltas up;
// the arguments parse and equal the non-streamed call at the same seed) and
// response_format json_schema (the content parses with the schema's keys)
try {
    const tools2 = [{ type: "function", function: { name: "get_weather", parameters: {
        type: "object", properties: { city: { type: "string", enum: ["Paris", "Oslo"] },
                                      days: { enum: [1, 2, 3] } },
        required: ["city", "days"], additionalProperties: false } } }];
    // short: the suite's slots hold 256 tokens, the tool's prompt ~150
    const body = { model, messages: [{ role: "user", content: "Weather?" }], tools: tools2,
                   tool_choice: "required", max_tokens: 90, temperature: 1, seed: 11 };
    const whole = await client.chat.completions.create(body);
    const streamApi = client.chat.completions.stream ? client.chat.completions
                                                     : client.beta.chat.completions;
    const st = streamApi.stream(body);
    let heads = 0, frags = 0;
    st.on("chunk", (ch) => {
        for (const c of ch.choices)
            for (const d of c.delta?.tool_calls ?? [])
                if (d.id) {
                    heads++;
                    if (d.function?.arguments !== "")
                        frags = -1000; // the head must carry empty arguments
                } else if (d.function?.arguments) {
                    frags++;
                }
    });
    const fin = await st.finalChatCompletion();
    const sc = fin.choices[0].message.tool_calls ?? [];
    const wc = whole.choices[0].message.tool_calls ?? [];
    const args = sc.length ? JSON.parse(sc[0].function.arguments) : null;
    check(sc.length === 1 && wc.length === 1 && fin.choices[0].finish_reason === "tool_calls" &&
              sc[0].function.name === "get_weather" && heads === 1 && frags > 0 &&
              sc[0].function.arguments === wc[0].function.arguments &&
              ["Paris", "Oslo"].includes(args.city) && [1, 2, 3].includes(args.days),
          "tool_choice required, streamed: the client's accumulated arguments " +
              (sc.length ? sc[0].function.arguments : "(none)") + " parse and equal the " +
              "non-streamed call (" + frags + " argument fragments after the head)",
          JSON.stringify({ fin: fin.choices[0], whole: whole.choices[0], heads, frags }));
    const schema = { type: "object", properties: { name: { type: "string", maxLength: 6 },
                                                   n: { type: "integer" } },
                     required: ["name", "n"], additionalProperties: false };
    const j = await client.chat.completions.create(
        { model, messages: msgs, max_tokens: 60, temperature: 0.7, seed: 3,
          response_format: { type: "json_schema",
                             json_schema: { name: "person", schema, strict: true } } });
    const v = JSON.parse(j.choices[0].message.content);
    check(typeof v.name === "string" && v.name.length <= 6 && Number.isInteger(v.n) &&
              Object.keys(v).length === 2 && j.choices[0].finish_reason === "stop",
          "response_format json_schema: " + j.choices[0].message.content,
          JSON.stringify(j.choices[0]));
} catch (e) {
    check(false, "constrained output through the client", String(e));
}

async function expectError(what, cls, status, body) {
    try {
        await client.chat.completions.create(body);
        check(false, what, "no error");
    } catch (e) {
        check(e instanceof cls && e.status === status, what + ": " + e.constructor.name + " " +
              e.status, String(e));
    }
}
await expectError("an unknown model", OpenAI.NotFoundError, 404,
                  { model: "gpt-4", messages: msgs, max_tokens: 1 });
await expectError("a bad temperature", OpenAI.BadRequestError, 400,
                  { model, messages: msgs, max_tokens: 1, temperature: "hot" });

console.log("openai-client: " + passed + " passed, " + failed + " failed");
process.exit(failed ? 1 : 0);
