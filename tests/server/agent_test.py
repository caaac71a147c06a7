#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""glm-server's tool calls and reasoning from a client (issue 37).

    agent_test.py URL agent       a server with the package's own template
    agent_test.py URL reasoning   a server whose template leaves <think> open

agent: a multi-turn agent loop with tools -- the reply's shape (content,
tool_calls with ids and JSON-object arguments, finish_reason), the streamed
deltas add up to the non-streamed message, the assistant's tool calls and
the tool results go back in and are rendered, tool_choice "none" leaves the
tools out, a bad tool_choice is a 400. With the official OpenAI Python
client installed the loop also runs through it; without it that part
prints SKIP (Debian has no package of it).
reasoning: the text after the prompt's open <think> is reasoning_content
up to </think> (all of it when the model never closes it), streamed as
reasoning_content deltas that add up to the non-streamed reply;
reasoning_format "none" keeps it all in content.

Standard library only; every request has a timeout. Prints one line per
check and "N passed, N failed".
"""
import http.client
import json
import sys
import urllib.parse

BASE, MODE = sys.argv[1], sys.argv[2]
U = urllib.parse.urlparse(BASE)
TIMEOUT = 120
passed = failed = 0

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}]


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what + (": " + detail if detail else ""))
    sys.stdout.flush()


def post(body):
    c = http.client.HTTPConnection(U.hostname, U.port, timeout=TIMEOUT)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode("utf-8")
    c.close()
    return r.status, json.loads(text)


def stream(body):
    """The streamed reply accumulated as OpenAI clients do: (message, finish, ok)."""
    body = dict(body, stream=True)
    c = http.client.HTTPConnection(U.hostname, U.port, timeout=TIMEOUT)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    msg = {"content": "", "reasoning_content": "", "tool_calls": []}
    finish, ok, done = None, r.status == 200, False
    while ok:
        line = r.readline()
        if not line:
            break
        line = line.rstrip(b"\r\n")
        if not line:
            continue
        if not line.startswith(b"data: "):
            ok = False
            break
        if line[6:] == b"[DONE]":
            done = True
            continue
        ch = json.loads(line[6:])
        for choice in ch.get("choices", []):
            d = choice.get("delta", {})
            msg["content"] += d.get("content") or ""
            msg["reasoning_content"] += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls") or []:
                i = tc["index"]
                while len(msg["tool_calls"]) <= i:
                    msg["tool_calls"].append({"id": None, "type": "function",
                                              "function": {"name": "", "arguments": ""}})
                t = msg["tool_calls"][i]
                t["id"] = tc.get("id") or t["id"]
                f = tc.get("function") or {}
                t["function"]["name"] += f.get("name") or ""
                t["function"]["arguments"] += f.get("arguments") or ""
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    c.close()
    return msg, finish, ok and done


def valid_calls(calls):
    for tc in calls:
        if not (isinstance(tc.get("id"), str) and tc.get("type") == "function" and
                isinstance(tc["function"].get("name"), str) and tc["function"]["name"]):
            return False
        if not isinstance(json.loads(tc["function"]["arguments"]), dict):
            return False
    return True


def same_message(streamed, m):
    calls = [{"id": t["id"], "type": "function", "function": t["function"]}
             for t in m.get("tool_calls") or []]
    return (streamed["content"] == (m.get("content") or "") and
            streamed["reasoning_content"] == (m.get("reasoning_content") or "") and
            streamed["tool_calls"] == calls)


def agent():
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    body = {"messages": msgs, "tools": TOOLS, "max_tokens": 24, "temperature": 0}
    st, j = post(body)
    m = j["choices"][0]["message"] if st == 200 else {}
    fin = j["choices"][0]["finish_reason"] if st == 200 else None
    check(st == 200 and m.get("role") == "assistant" and
          (m.get("content") is None or isinstance(m.get("content"), str)) and
          fin in ("stop", "length", "tool_calls") and
          (fin != "tool_calls" or m.get("tool_calls")) and valid_calls(m.get("tool_calls") or []),
          "chat with tools: a well-formed message and finish_reason", str(j))
    s, sfin, ok = stream(body)
    check(ok and same_message(s, m) and sfin == fin,
          "chat with tools, streamed: the deltas add up to the non-streamed message",
          f"{s} / {m} ({sfin} / {fin})")
    # the agent loop: the model's tool call (here written as an agent would
    # have received it) and the tool's result go back in
    call = {"id": "call_abc123def", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "days": 2})}}
    loop = msgs + [{"role": "assistant", "content": None, "tool_calls": [call]},
                   {"role": "tool", "tool_call_id": "call_abc123def", "content": "{\"temp_c\": 21}"}]
    st2, j2 = post({"messages": loop, "tools": TOOLS, "max_tokens": 8, "temperature": 0})
    check(st2 == 200 and st == 200 and
          j2["usage"]["prompt_tokens"] > j["usage"]["prompt_tokens"],
          "agent loop: the tool call and its result are rendered into the next prompt",
          f"{st2} {j2}")
    st3, j3 = post({"messages": msgs, "tools": TOOLS, "tool_choice": "none", "max_tokens": 1})
    check(st3 == 200 and st == 200 and j3["usage"]["prompt_tokens"] < j["usage"]["prompt_tokens"],
          "tool_choice none: the tools are left out of the prompt", str(j3))
    st4, j4 = post({"messages": msgs, "tools": TOOLS, "tool_choice": "sometimes"})
    check(st4 == 400 and j4["error"]["param"] == "tool_choice", "bad tool_choice: 400", str(j4))
    st5, j5 = post({"messages": msgs, "tools": TOOLS, "tool_choice":
                    {"type": "function", "function": {"name": "get_weather"}}, "max_tokens": 1})
    check(st5 == 200, "tool_choice naming a function is accepted", str(j5))
    try:
        import openai
    except ImportError:
        print("SKIP the official OpenAI Python client is not installed (no Debian package); "
              "the same loop ran over HTTP above, and through the official Node.js client "
              "in tests/server/openai_client.mjs")
        return
    client = openai.OpenAI(base_url=BASE + "/v1", api_key="none", timeout=TIMEOUT)
    r = client.chat.completions.create(model="m", messages=msgs, tools=TOOLS, max_tokens=24,
                                       temperature=0)
    r2 = client.chat.completions.create(model="m", messages=loop, tools=TOOLS, max_tokens=8,
                                        temperature=0)
    check(r.choices[0].finish_reason in ("stop", "length", "tool_calls") and
          r2.usage.prompt_tokens > r.usage.prompt_tokens,
          "the official OpenAI client: an agent loop with tool results")


def reasoning():
    body = {"messages": [{"role": "user", "content": "Is 7 prime?"}], "max_tokens": 24,
            "temperature": 0}
    st, j = post(body)
    stn, jn = post(dict(body, reasoning_format="none"))
    if st != 200 or stn != 200:
        check(False, "reasoning: replies", f"{j} {jn}")
        return
    m, raw = j["choices"][0]["message"], jn["choices"][0]["message"]["content"]
    if "</think>" in raw:
        want_r, want_c = raw.split("</think>", 1)[0], raw.split("</think>", 1)[1].lstrip()
    else:
        want_r, want_c = raw, ""
    check(m.get("reasoning_content") == want_r and (m.get("content") or "") == want_c and
          "reasoning_content" not in jn["choices"][0]["message"],
          "reasoning: the text after the prompt's open <think> is reasoning_content "
          f"({len(want_r)} bytes, {'closed' if '</think>' in raw else 'never closed'})",
          f"{m} / raw {raw!r}")
    s, fin, ok = stream(body)
    check(ok and same_message(s, m) and fin == j["choices"][0]["finish_reason"],
          "reasoning, streamed: reasoning_content deltas add up to the non-streamed reply",
          f"{s} / {m}")


agent() if MODE == "agent" else reasoning()
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
