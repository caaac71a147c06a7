#!/usr/bin/env python3
"""glm-server's prefix cache: a multi-turn chat, turn by turn.

  prefix_cache.py URL_WITHOUT URL_WITH TURNS [--bench] [--others N]
                  [--cross-slot] [--evicts] [--tag TEXT]

Plays a chat of TURNS turns at temperature 0 on two servers of the same
package: URL_WITHOUT runs with --no-prefix-cache, URL_WITH with the cache
(the default). Each turn sends the whole conversation so far (a long
system message, the earlier turns and their replies) plus a new user
message, as a chat client does, to both, and the replies are compared.

Checks (printed as ok/FAIL, then "prefix: N passed, N failed"):
  - every turn's reply is the same text with and without the cache
    (greedy; run the servers with --batch-invariant so that the KV of a
    prefix is the same bits however it was batched);
  - from the second turn on, the cached server reports
    usage.prompt_tokens_details.cached_tokens > 0 (the earlier turns), the
    other none; a request with "cache_prompt": false gets none either.
--others N: after each turn, N other conversations (each its own long
system message) go to the cached server, so that with N >= --parallel the
chat's slot has been taken by another prompt: its earlier turns can only
come from the KV blocks (prefix_cache_restored_tokens_total grows).
--cross-slot: a request whose prefix was computed by a slot that is busy
(a long stream sharing it runs there) is served by another slot from the
stored blocks: cached tokens, the restored-tokens counter grows, the same
reply as without the cache.
--evicts: /metrics must count evicted blocks (a server with a small
--cache-ram) -- the replies above are still the same.
--tag TEXT: put TEXT in the system messages (a run whose prompts no
earlier run on the server has seen).
With --bench it also prints the last turn's time to first token
(timings.ttft_ms) without and with the cache, and their ratio (the
issue's target: <= 0.25 for a 10-turn chat).
Standard library only; every request has a timeout.
"""
import argparse
import json
import threading
import urllib.request

from checks import check, summary

ap = argparse.ArgumentParser()
ap.add_argument("cold")
ap.add_argument("warm")
ap.add_argument("turns", type=int)
ap.add_argument("--bench", action="store_true")
ap.add_argument("--others", type=int, default=0)
ap.add_argument("--cross-slot", action="store_true")
ap.add_argument("--evicts", action="store_true")
ap.add_argument("--tag", default="")
a = ap.parse_args()
URL_COLD = a.cold.rstrip("/")
URL_WARM = a.warm.rstrip("/")
TURNS = a.turns


def chat(url, messages, cache=True, max_tokens=24):
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0}
    if not cache:
        body["cache_prompt"] = False
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


def metric(url, name):
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("glm_server_" + name + " "):
                return float(line.split()[1])
    return -1.0


def cached(reply):
    return reply["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)


SYSTEM = ("You are the assistant of a library of old texts%s. " % a.tag +
          "Answer briefly, quote the text where you can, and say when you do not know. " * 12)
QUESTIONS = ["In the beginning", "What came next", "Who spoke", "Where were they", "Why then",
             "What did they see", "Tell me more", "And after that", "Summarise it",
             "One last question", "Thank you", "Goodbye"]


OPENINGS = ["Harbour", "Ledger", "Cargo", "Tides", "Anchors", "Lighthouse", "Customs", "Docks"]


def other(t, i):
    """Another conversation: its own long system message, whose first word
    is another than the chat's and the other conversations' of the turn, so
    that it shares no more with one slot's tokens than with another's: the
    least recently used slot takes it, and with --others >= --parallel the
    chat's slot is taken"""
    sysm = ("%s (conversation %d.%d%s): you keep the accounts of a harbour. "
            % (OPENINGS[i % len(OPENINGS)], t, i, a.tag) +
            "List the ships, their cargo and the fees due, one line each. " * 10)
    return [{"role": "system", "content": sysm}, {"role": "user", "content": "The ledger?"}]


messages = [{"role": "system", "content": SYSTEM}]
ttft = None
restored0 = metric(URL_WARM, "prefix_cache_restored_tokens_total")
for t in range(TURNS):
    messages.append({"role": "user", "content": QUESTIONS[t % len(QUESTIONS)] + " (turn %d)?" % t})
    cold = chat(URL_COLD, messages)
    warm = chat(URL_WARM, messages)
    a_txt = cold["choices"][0]["message"]["content"]
    b_txt = warm["choices"][0]["message"]["content"]
    check(a_txt == b_txt, "turn %d: the same reply with and without the prefix cache (%d prompt "
          "tokens)" % (t + 1, warm["usage"]["prompt_tokens"]), "%r / %r" % (a_txt, b_txt))
    if t > 0:
        check(cached(warm) > 0 and cached(cold) == 0,
              "turn %d: %d of %d prompt tokens from the cache (uncached request: %d)"
              % (t + 1, cached(warm), warm["usage"]["prompt_tokens"], cached(cold)))
    ttft = (cold["timings"]["ttft_ms"], warm["timings"]["ttft_ms"])
    messages.append({"role": "assistant", "content": b_txt})
    for i in range(a.others):
        chat(URL_WARM, other(t, i), max_tokens=4)
if a.others and TURNS > 1:
    restored = metric(URL_WARM, "prefix_cache_restored_tokens_total") - restored0
    check(restored > 0, "%d other conversations between turns: %d tokens copied from the KV "
          "blocks into slots" % (a.others, restored))

if a.cross_slot:
    # a long stream sharing the system message holds the slot that computed it
    base = [{"role": "system", "content": SYSTEM + " Cross-slot."}]
    chat(URL_WARM, base + [{"role": "user", "content": "Start?"}], max_tokens=2)
    body = {"messages": base + [{"role": "user", "content": "Start?"}], "max_tokens": 400,
            "temperature": 0, "stream": True}
    req = urllib.request.Request(URL_WARM + "/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    long = urllib.request.urlopen(req, timeout=300)
    long.readline()  # the stream has begun: the slot is busy
    got = {}

    def drain():
        got["rest"] = long.read()
    th = threading.Thread(target=drain)
    th.start()
    before = metric(URL_WARM, "prefix_cache_restored_tokens_total")
    msgs = base + [{"role": "user", "content": "Another question?"}]
    warm = chat(URL_WARM, msgs)
    after = metric(URL_WARM, "prefix_cache_restored_tokens_total")
    busy = th.is_alive()
    th.join(300)
    long.close()
    cold = chat(URL_COLD, msgs)
    check(busy and cached(warm) > 0 and after > before,
          "a prompt whose prefix another (busy) slot computed: %d of %d tokens from the cache, "
          "%d copied from the KV blocks (the other slot still streaming: %s)"
          % (cached(warm), warm["usage"]["prompt_tokens"], after - before, busy))
    check(warm["choices"][0]["message"]["content"] == cold["choices"][0]["message"]["content"],
          "... the same reply as without the cache")

if a.evicts:
    ev = metric(URL_WARM, "prefix_cache_evicted_blocks_total")
    held = metric(URL_WARM, "prefix_cache_bytes")
    budget = metric(URL_WARM, "prefix_cache_budget_bytes")
    check(ev > 0 and 0 <= held <= budget,
          "a small --cache-ram: %d blocks evicted, %d of %d bytes held" % (ev, held, budget))

# a request that asks for no reuse gets none, and the same reply
messages.append({"role": "user", "content": "And once more?"})
off = chat(URL_WARM, messages, cache=False)
ref = chat(URL_COLD, messages)
check(cached(off) == 0 and
      off["choices"][0]["message"]["content"] == ref["choices"][0]["message"]["content"],
      '"cache_prompt": false: nothing from the cache, the same reply')

if a.bench and ttft:
    print("prefix cache, %d-turn chat%s, last turn: time to first token %.1f ms without the "
          "cache, %.1f ms with it: ratio %.3f"
          % (TURNS, " (%d other conversations between turns)" % a.others if a.others else "",
             ttft[0], ttft[1], ttft[1] / ttft[0]))
raise SystemExit(summary("prefix"))
