#!/usr/bin/env python3
"""glm-server's prefix cache: a multi-turn chat, turn by turn.

  prefix_cache.py URL_WITHOUT URL_WITH TURNS [--bench]

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
With --bench it also prints the last turn's time to first token
(timings.ttft_ms) without and with the cache, and their ratio (the
issue's target: <= 0.25 for a 10-turn chat).
Standard library only; every request has a timeout.
"""
import json
import sys
import urllib.request

from checks import check, summary

URL_COLD = sys.argv[1].rstrip("/")
URL_WARM = sys.argv[2].rstrip("/")
TURNS = int(sys.argv[3])
BENCH = "--bench" in sys.argv[4:]




def chat(url, messages, cache=True):
    body = {"messages": messages, "max_tokens": 24, "temperature": 0}
    if not cache:
        body["cache_prompt"] = False
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


SYSTEM = ("You are the assistant of a library of old texts. " +
          "Answer briefly, quote the text where you can, and say when you do not know. " * 12)
QUESTIONS = ["In the beginning", "What came next", "Who spoke", "Where were they", "Why then",
             "What did they see", "Tell me more", "And after that", "Summarise it",
             "One last question", "Thank you", "Goodbye"]

messages = [{"role": "system", "content": SYSTEM}]
ttft = None
for t in range(TURNS):
    messages.append({"role": "user", "content": QUESTIONS[t % len(QUESTIONS)] + " (turn %d)?" % t})
    cold = chat(URL_COLD, messages)
    warm = chat(URL_WARM, messages)
    a = cold["choices"][0]["message"]["content"]
    b = warm["choices"][0]["message"]["content"]
    cached_cold = cold["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
    cached_warm = warm["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
    check(a == b, "turn %d: the same reply with and without the prefix cache (%d prompt tokens)"
          % (t + 1, warm["usage"]["prompt_tokens"]))
    if t > 0:
        check(cached_warm > 0 and cached_cold == 0,
              "turn %d: %d of %d prompt tokens from the cache (uncached request: %d)"
              % (t + 1, cached_warm, warm["usage"]["prompt_tokens"], cached_cold))
    ttft = (cold["timings"]["ttft_ms"], warm["timings"]["ttft_ms"])
    messages.append({"role": "assistant", "content": b})

# a request that asks for no reuse gets none, and the same reply
messages.append({"role": "user", "content": "And once more?"})
off = chat(URL_WARM, messages, cache=False)
ref = chat(URL_COLD, messages)
check(off["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0) == 0 and
      off["choices"][0]["message"]["content"] == ref["choices"][0]["message"]["content"],
      '"cache_prompt": false: nothing from the cache, the same reply')

if BENCH and ttft:
    print("prefix cache, %d-turn chat, last turn: time to first token %.1f ms without the cache, "
          "%.1f ms with it: ratio %.3f" % (TURNS, ttft[0], ttft[1], ttft[1] / ttft[0]))
sys.exit(summary("prefix"))
