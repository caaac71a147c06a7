#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""glm-server's API from a Python client (standard library only).

    client_test.py http://127.0.0.1:PORT

Runs against a server started with --parallel >= 16 and temperature 0
requests; prints one line per check and "N passed, N failed" at the end.
Every request has a timeout: the script ends by itself.
"""
import http.client
import json
import re
import socket
import sys
import threading
import time
import urllib.parse

from checks import check, summary

BASE = sys.argv[1]
U = urllib.parse.urlparse(BASE)
TIMEOUT = 120


def request(method, path, body=None, headers=None, raw=None):
    c = http.client.HTTPConnection(U.hostname, U.port, timeout=TIMEOUT)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode("utf-8")
    c.close()
    try:
        return r.status, json.loads(text), r
    except ValueError:
        return r.status, text, r


def stream(path, body):
    """The events of a streamed request: (list of JSON chunks, saw [DONE], times)."""
    c = http.client.HTTPConnection(U.hostname, U.port, timeout=TIMEOUT)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    chunks, done, times = [], False, []
    if r.status != 200:
        c.close()
        return r.status, chunks, done, times
    while True:
        line = r.readline()
        if not line:
            break
        line = line.rstrip(b"\r\n")
        if not line:
            continue
        if not line.startswith(b"data: "):
            chunks.append({"bad_line": line.decode("utf-8", "replace")})
            continue
        payload = line[6:]
        if payload == b"[DONE]":
            done = True
            continue
        times.append(time.monotonic())
        chunks.append(json.loads(payload.decode("utf-8")))
    c.close()
    return r.status, chunks, done, times


def complete(prompt, **kw):
    body = {"prompt": prompt, "max_tokens": 16, "temperature": 0}
    body.update(kw)
    return request("POST", "/v1/completions", body)


def metrics():
    st, text, _ = request("GET", "/metrics")
    out = {}
    for ln in text.splitlines():
        if ln and not ln.startswith("#"):
            k, v = ln.split(" ")
            out[k] = float(v)
    return out


# ---- basics ---------------------------------------------------------------
st, j, _ = request("GET", "/v1/models")
check(st == 200 and j["object"] == "list" and j["data"][0]["object"] == "model",
      "GET /v1/models lists the model", str(j))
model_id = j["data"][0]["id"] if st == 200 else "?"

# ---- the model field (issue 42): absent or the served id; else a 404 -------
st, j, _ = complete("Hi", max_tokens=2, model=model_id)
check(st == 200 and j["model"] == model_id, "model: the served id is accepted", str(j))
st, j, _ = complete("Hi", max_tokens=2, model="gpt-4")
check(st == 404 and isinstance(j, dict) and j["error"]["param"] == "model" and
      "gpt-4" in j["error"]["message"] and model_id in j["error"]["message"],
      "model 'gpt-4': 404 naming it and the served id", "%d %s" % (st, j))
st, j, _ = request("POST", "/v1/chat/completions",
                   {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                    "model": "gpt-4"})
check(st == 404, "chat: model 'gpt-4': 404", "%d %s" % (st, j))
st, j, _ = complete("Hi", max_tokens=2, model=7)
check(st == 400 and j["error"]["param"] == "model", "model 7: 400, not a string", str(j))
# max_tokens beyond the slot's context: clamped to what fits (docs/glm-server.md)
st, j, _ = complete("Hi", max_tokens=1e9)
ok = (st == 200 and j["choices"][0]["finish_reason"] == "length" and
      j["usage"]["prompt_tokens"] + j["usage"]["completion_tokens"] <= 256)
check(ok, "max_tokens 1e9: clamped to the slot's context, finish_reason length (%s)" %
      (j.get("usage") if isinstance(j, dict) else None), "%d %s" % (st, j))

st, j, _ = request("POST", "/tokenize", {"content": "Hello world, the TX8 serves GLM"})
ntok = len(j["tokens"]) if st == 200 else -1
check(st == 200 and ntok > 0, "POST /tokenize", str(j))
st2, j2, _ = request("POST", "/detokenize", {"tokens": j["tokens"]})
check(st2 == 200 and j2["content"] == "Hello world, the TX8 serves GLM", "POST /detokenize round trip",
      str(j2))

st, j, _ = complete("Hello world, the TX8 serves GLM", max_tokens=12)
ok = (st == 200 and j["object"] == "text_completion" and j["model"] == model_id and
      j["usage"]["prompt_tokens"] == ntok and
      j["usage"]["total_tokens"] == ntok + j["usage"]["completion_tokens"] and
      j["choices"][0]["finish_reason"] in ("stop", "length"))
check(ok, "POST /v1/completions: usage.prompt_tokens = /tokenize's count", str(j))
if ok and j["choices"][0]["finish_reason"] == "length":
    check(j["usage"]["completion_tokens"] == 12, "finish_reason length after max_tokens tokens")
alone_text = j["choices"][0]["text"] if st == 200 else None

# the same request streamed gives the same text, in well-formed chunks
st, chunks, done, _ = stream("/v1/completions", {"prompt": "Hello world, the TX8 serves GLM",
                                                 "max_tokens": 12, "temperature": 0, "stream": True,
                                                 "stream_options": {"include_usage": True}})
text = "".join(c["choices"][0]["text"] for c in chunks if c.get("choices"))
fin = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
usage = [c["usage"] for c in chunks if c.get("usage")]
check(st == 200 and done and text == alone_text and fin[-1] in ("stop", "length") and
      all(f is None for f in fin[:-1]) and usage and
      usage[0]["completion_tokens"] == j["usage"]["completion_tokens"],
      "stream:true: SSE chunks end with [DONE], same text and usage as without streaming",
      "%r vs %r, done %s" % (text, alone_text, done))

# chat, streamed and not
msgs = [{"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "text", "text": "Name a colour."}]}]
st, j, _ = request("POST", "/v1/chat/completions",
                   {"messages": msgs, "max_tokens": 10, "temperature": 0, "some_unknown_field": 1})
ok = st == 200 and j["object"] == "chat.completion" and j["choices"][0]["message"]["role"] == "assistant"
check(ok, "POST /v1/chat/completions (unknown fields ignored)", str(j))
chat_text = j["choices"][0]["message"]["content"] if ok else None
st, chunks, done, _ = stream("/v1/chat/completions",
                             {"messages": msgs, "max_tokens": 10, "temperature": 0, "stream": True})
ok = (st == 200 and done and chunks and chunks[0]["object"] == "chat.completion.chunk" and
      chunks[0]["choices"][0]["delta"].get("role") == "assistant" and
      chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length") and
      "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == chat_text)
check(ok, "chat stream: role chunk, content deltas = the non-streamed content, finish chunk, [DONE]")

# tools (issue 17): the definitions and a tool-call history are rendered into
# the prompt (more prompt tokens), OpenAI's JSON-string arguments accepted
tools = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
tmsgs = [{"role": "user", "content": "Weather in Paris?"},
         {"role": "assistant", "content": None, "tool_calls": [
             {"id": "call_1", "type": "function",
              "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
         {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\": 21}"}]
st0, j0, _ = request("POST", "/v1/chat/completions",
                     {"messages": tmsgs[:1], "max_tokens": 4, "temperature": 0})
st1, j1, _ = request("POST", "/v1/chat/completions",
                     {"messages": tmsgs[:1], "tools": tools, "max_tokens": 4, "temperature": 0})
st2, j2, _ = request("POST", "/v1/chat/completions",
                     {"messages": tmsgs, "tools": tools, "tool_choice": "auto", "max_tokens": 4,
                      "temperature": 0})
ok = (st0 == 200 and st1 == 200 and st2 == 200 and
      j1["usage"]["prompt_tokens"] > j0["usage"]["prompt_tokens"] + 40 and
      j2["usage"]["prompt_tokens"] > j1["usage"]["prompt_tokens"])
check(ok, "chat with tools: definitions and a tool-call history rendered (prompt tokens %s)" %
      ([j.get("usage", {}).get("prompt_tokens") if isinstance(j, dict) else None
        for j in (j0, j1, j2)]), "%s %s %s" % (j0, j1, j2))
tbad = [
    ("tools not an array", {"messages": tmsgs[:1], "tools": {"a": 1}}, "tools"),
    ("tool_calls not an array", {"messages": [tmsgs[0], dict(tmsgs[1], tool_calls=3)]},
     "tool_calls"),
    ("tool call arguments not a JSON object",
     {"messages": [tmsgs[0], {"role": "assistant", "content": "", "tool_calls": [
         {"type": "function", "function": {"name": "f", "arguments": "[1, 2]"}}]}]},
     "arguments"),
    ("tool call without a name",
     {"messages": [tmsgs[0], {"role": "assistant", "content": "", "tool_calls": [
         {"type": "function", "function": {"arguments": "{}"}}]}]}, "name"),
]
for what, body, word in tbad:
    st, j, _ = request("POST", "/v1/chat/completions", body)
    msg = j["error"]["message"] if isinstance(j, dict) and "error" in j else str(j)
    check(st == 400 and word in msg, "%s: 400 with a JSON error naming it" % what,
          "%d %s" % (st, msg))

# stop strings: cut before the stop string, finish_reason stop
st, j, _ = complete("The device memory of a TX8 is", max_tokens=24)
full = j["choices"][0]["text"] if st == 200 else ""
if len(full) >= 8:
    stop = full[4:7]
    st, j2, _ = complete("The device memory of a TX8 is", max_tokens=24, stop=[stop, "\u00a7never"])
    cut = full[:full.find(stop)]
    check(st == 200 and j2["choices"][0]["text"] == cut and j2["choices"][0]["finish_reason"] == "stop",
          "stop strings cut the text before the first occurrence", "%r %r %r" % (full, stop, j2))
    st, chunks, done, _ = stream("/v1/completions", {"prompt": "The device memory of a TX8 is",
                                                     "max_tokens": 24, "temperature": 0,
                                                     "stop": stop, "stream": True})
    text = "".join(c["choices"][0]["text"] for c in chunks)
    check(done and text == cut and chunks[-1]["choices"][0]["finish_reason"] == "stop",
          "stop strings in a stream (held back until decided)", "%r vs %r" % (text, cut))
else:
    check(False, "stop strings", "text too short: %r" % full)

# seeds: same seed, same text (also with other requests running)
a = complete("Random words:", temperature=1.0, seed=1234, max_tokens=16)
b = complete("Random words:", temperature=1.0, seed=1234, max_tokens=16)
c = complete("Random words:", temperature=1.0, seed=99, max_tokens=16)
check(a[0] == 200 and a[1]["choices"][0]["text"] == b[1]["choices"][0]["text"],
      "sampling: the same seed gives the same text")
check(c[0] == 200 and c[1]["choices"][0]["text"] != a[1]["choices"][0]["text"],
      "sampling: another seed gives another text")

# ---- determinism under batching: 16 concurrent = alone ---------------------
prompts = ["Request %d: the accelerator %s" % (i, w) for i, w in
           enumerate("reads writes maps routes samples decodes batches streams "
                     "prefetches caches quantises converts balances loads serves answers".split())]
lens = [8 + (i * 5) % 17 for i in range(16)]
alone = []
for p, n in zip(prompts, lens):
    st, j, _ = complete(p, max_tokens=n)
    alone.append(j["choices"][0]["text"] if st == 200 else None)
together = [None] * 16
ttft = [None] * 16


def worker(i):
    if i % 2:
        st, chunks, done, _ = stream("/v1/completions", {"prompt": prompts[i], "max_tokens": lens[i],
                                                         "temperature": 0, "stream": True})
        together[i] = "".join(c["choices"][0]["text"] for c in chunks) if done else None
    else:
        st, j, _ = complete(prompts[i], max_tokens=lens[i])
        together[i] = j["choices"][0]["text"] if st == 200 else None


ths = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
t0 = time.monotonic()
for t in ths:
    t.start()
for t in ths:
    t.join(TIMEOUT)
diff = [i for i in range(16) if together[i] != alone[i]]
check(None not in alone and not diff,
      "temperature 0: 16 concurrent requests (8 streamed) each return the text they return alone",
      "differ: %s; e.g. %r vs %r" % (diff, together[diff[0]] if diff else "", alone[diff[0]] if diff else ""))
m = metrics()
check(m.get("glm_server_slots_active") == 0 and m.get("glm_server_queue_depth") == 0,
      "after them: no active slot, empty queue")

# ---- bad input never disturbs a running request ---------------------------
res = {}


def long_stream():
    res["s"] = stream("/v1/completions", {"prompt": "A long answer:", "max_tokens": 40,
                                          "temperature": 0, "stream": True,
                                          "stream_options": {"include_usage": True}})


th = threading.Thread(target=long_stream)
th.start()
time.sleep(0.2)
bads = [
    ("malformed JSON", "/v1/completions", '{"prompt": "x",', 400, "malformed JSON"),
    ("not an object", "/v1/completions", '[1, 2]', 400, "JSON object"),
    ("wrong type", "/v1/completions", '{"prompt": "x", "max_tokens": "many"}', 400, "max_tokens"),
    ("wrong type", "/v1/chat/completions", '{"messages": "hi"}', 400, "messages"),
    ("bad role", "/v1/chat/completions", '{"messages": [{"role": "robot", "content": "x"}]}', 400, "role"),
    ("n = 0", "/v1/completions", '{"prompt": "x", "n": 0}', 400, "'n'"),
    ("top_p 0", "/v1/completions", '{"prompt": "x", "top_p": 0}', 400, "top_p"),
    ("top_k too big", "/v1/completions", '{"prompt": "x", "top_k": 100000, "temperature": 1}', 400, "top_k"),
    ("token outside the vocabulary", "/v1/completions", '{"prompt": [1, 99999999]}', 400, "vocabulary"),
    ("empty prompt", "/v1/completions", '{"prompt": ""}', 400, "empty"),
    ("prompt longer than the context", "/v1/completions",
     json.dumps({"prompt": "word " * 5000}), 400, "context"),
    ("unknown endpoint", "/v1/embeddings", '{"input": "x"}', 404, "no endpoint"),
    ("logprobs 21", "/v1/completions", '{"prompt": "x", "logprobs": 21}', 400, "logprobs"),
]
for what, path, raw, want, word in bads:
    st, j, _ = request("POST", path, raw=raw)
    msg = j["error"]["message"] if isinstance(j, dict) and "error" in j else str(j)
    check(st == want and word in msg, "%s: %d with a JSON error naming it" % (what, want),
          "%d %s" % (st, msg))
st, j, _ = request("GET", "/v1/completions")
check(st == 405, "GET on a POST endpoint: 405")
th.join(TIMEOUT)
st, chunks, done, _ = res["s"]
usage = [c["usage"] for c in chunks if c.get("usage")]
check(done and usage and usage[0]["completion_tokens"] > 0 and
      chunks[-1]["usage"]["completion_tokens"] == usage[0]["completion_tokens"],
      "the stream running meanwhile completed normally")

# ---- a long prompt is prefilled in chunks between a running stream's tokens --
# (the server under test runs --batch-size 32: a ~200-token prompt takes
# about 7 passes, and the stream gets a token in each of them; prefilled in
# one pass it would get about 2 while the long request runs)
ev = {"times": []}


def timed_stream():
    c = http.client.HTTPConnection(U.hostname, U.port, timeout=TIMEOUT)
    c.request("POST", "/v1/completions", body=json.dumps(
        {"prompt": "Keep going:", "max_tokens": 200, "temperature": 0, "stream": True}),
        headers={"Content-Type": "application/json"})
    r = c.getresponse()
    while True:
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data: {"):
            ev["times"].append(time.monotonic())
    c.close()


th = threading.Thread(target=timed_stream)
th.start()
t_wait = time.monotonic()
while len(ev["times"]) < 3 and time.monotonic() - t_wait < 30:
    time.sleep(0.005)
tl0 = time.monotonic()
st, j, _ = complete("word " * 199 + "end", max_tokens=1)
tl1 = time.monotonic()
during = [t for t in ev["times"] if tl0 <= t <= tl1]
th.join(TIMEOUT)
check(st == 200 and j["usage"]["prompt_tokens"] >= 150 and len(during) >= 5,
      "a %s-token prompt is prefilled in chunks: the running stream got %d tokens meanwhile" %
      (j["usage"]["prompt_tokens"] if st == 200 else "?", len(during)), str(j)[:200])

# ---- a client that disconnects frees its slot at once ---------------------
before = metrics()
s = socket.create_connection((U.hostname, U.port), timeout=TIMEOUT)
body = json.dumps({"prompt": "Disconnect me", "max_tokens": 100000, "temperature": 0,
                   "stream": True}).encode()
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body)
got = b""
while b"data: " not in got:
    got += s.recv(4096)
during = metrics()
s.close()
t0 = time.monotonic()
freed = None
while time.monotonic() - t0 < 5:
    m = metrics()
    if m["glm_server_slots_active"] == 0:
        freed = time.monotonic() - t0
        break
    time.sleep(0.01)
check(during["glm_server_slots_active"] == 1 and freed is not None and
      m["glm_server_requests_cancelled_total"] == before["glm_server_requests_cancelled_total"] + 1,
      "a client that disconnects cancels its request; its slot is free %.0f ms later" %
      ((freed or 0) * 1e3))

# ---- metrics --------------------------------------------------------------
st, text, r = request("GET", "/metrics")
lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
# samples, with Prometheus's label syntax for the histograms' buckets
wellformed = all(re.match(r"^glm_server_[a-z_]+ [-0-9.e+]+$", ln) or
                 re.match(r'^glm_server_[a-z_]+_bucket\{le="(\+Inf|[0-9.e+-]+)"\} [0-9]+$', ln)
                 for ln in lines)
names = {ln.split(" ")[0] for ln in lines}
want = {"glm_server_requests_total", "glm_server_completion_tokens_total",
        "glm_server_tokens_per_second", "glm_server_queue_depth", "glm_server_slots_active",
        "glm_server_kv_cache_usage_ratio", "glm_server_device_utilisation_ratio",
        "glm_server_expert_utilisation_std_percent"}
check(st == 200 and wellformed and want <= names and
      r.getheader("Content-Type", "").startswith("text/plain"),
      "GET /metrics: Prometheus text with requests, tokens, tokens/s, queue, slots, KV, device, experts",
      str(want - names))

# the device's power-model counters (interface 1.8, docs/hardware.md section 7)
m = metrics()
check(m.get("glm_server_device_energy_joules_total", 0) > 0 and
      m.get("glm_server_device_command_energy_joules_total", 0) > 0 and
      m.get("glm_server_device_command_energy_joules_total", 0) <=
      m.get("glm_server_device_energy_joules_total", 0) and
      m.get("glm_server_device_power_watts", 0) > 0 and
      m.get("glm_server_device_power_average_watts", 0) > 0,
      "GET /metrics: the device's energy (J, commands and board) and power (W)",
      str({k: v for k, v in m.items() if "energy" in k or "power" in k}))


sys.exit(summary("client"))
