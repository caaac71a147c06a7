#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""glm-server's logprobs / top_logprobs and n > 1 (standard library only).

    logprobs_n.py URL [REF_LOGITS PROMPT]

REF_LOGITS: float32 logits [T x vocab] of PROMPT (glm-inference --logits,
computed from the full logits on its own session); the first generated
token's logprob and top_logprobs must match log_softmax of its last row
over the sampler's ids (/v1/models meta.n_vocab_sample).

Checks: greedy tokens are the first of their top_logprobs, log-probabilities
are <= 0 and their probabilities add up to <= 1, the tokens spell the text,
text_offset, a stream carries the same logprobs, a stop string cuts them;
n > 1: indexes 0..n-1, choice i = the request alone with seed + i, streamed
choices = non-streamed, usage counts every choice; bad values are 400s.
Prints "logprobs-n: N passed, N failed".
"""
import array
import json
import math
import sys
import urllib.request

from checks import check, summary
from http_json import events, post

BASE = sys.argv[1]
# Logits of one sequence differ within ~1e-5 of their largest with the
# composition of the pass and a prefill's split (docs/libtx-glm.md,
# "Batched decode: the guarantee"): log-probabilities compare within TOL.
TOL = 2e-3


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= TOL for x, y in zip(a, b))


def same_content(a, b):
    """chat logprobs.content lists: the same tokens, logprobs within TOL"""
    return [e["token"] for e in a] == [e["token"] for e in b] and close(
        [e["logprob"] for e in a], [e["logprob"] for e in b]) and all(
        [t["token"] for t in x["top_logprobs"]] == [t["token"] for t in y["top_logprobs"]]
        for x, y in zip(a, b))


def comp(**kw):
    body = {"prompt": "The TX8 is", "max_tokens": 8, "temperature": 0}
    body.update(kw)
    return post(BASE, "/v1/completions", body)


def chat(**kw):
    body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8,
            "temperature": 0}
    body.update(kw)
    return post(BASE, "/v1/chat/completions", body)


# ---- completions: shape and consistency ------------------------------------
st, j = comp(logprobs=5)
c = j["choices"][0] if st == 200 else {}
lp = c.get("logprobs") or {}
toks, tlp, tops, offs = (lp.get(k, []) for k in ("tokens", "token_logprobs", "top_logprobs",
                                                  "text_offset"))
n = j.get("usage", {}).get("completion_tokens", -1) if st == 200 else -1
check(st == 200 and len(toks) == len(tlp) == len(tops) == len(offs) == n == 8,
      "completions logprobs=5: tokens, token_logprobs, top_logprobs, text_offset, one per token",
      str(j)[:400])
greedy_ok = all(max(d.values()) == v and d.get(t) == v for t, v, d in zip(toks, tlp, tops))
check(st == 200 and greedy_ok and all(len(d) >= 5 for d in tops),
      "greedy: each token's logprob is the largest of its top_logprobs (5 alternatives)",
      str(list(zip(toks, tlp, tops)))[:400])
check(st == 200 and all(v <= 0 for v in tlp) and
      all(sum(math.exp(x) for x in d.values()) <= 1 + 1e-6 for d in tops),
      "log-probabilities <= 0, each token's alternatives add up to <= 1")
check(st == 200 and "".join(toks) == c["text"] and
      offs == [len("".join(toks[:i])) for i in range(len(toks))],
      "the tokens spell the text; text_offset is where each starts (characters)",
      repr(("".join(toks), c.get("text"), offs)))
top1 = tlp

# ---- chat: shape, the same numbers -----------------------------------------
st, j = chat(logprobs=True, top_logprobs=3)
content = (j["choices"][0].get("logprobs") or {}).get("content", []) if st == 200 else []
ok = st == 200 and len(content) == j["usage"]["completion_tokens"] and all(
    set(e) >= {"token", "logprob", "bytes", "top_logprobs"} and len(e["top_logprobs"]) == 3 and
    e["top_logprobs"][0]["logprob"] == e["logprob"] and e["top_logprobs"][0]["token"] == e["token"]
    and bytes(e["bytes"]).decode("utf-8", "replace") == e["token"]
    and all(e["top_logprobs"][k]["logprob"] >= e["top_logprobs"][k + 1]["logprob"]
            for k in range(2))
    for e in content)
check(ok, "chat logprobs + top_logprobs=3: content[] {token, logprob, bytes, top_logprobs[3]}, "
      "greedy = the first alternative, alternatives in order", str(j)[:400])
st, j = chat(logprobs=True)
check(st == 200 and all(e["top_logprobs"] == [] for e in j["choices"][0]["logprobs"]["content"]),
      "chat logprobs without top_logprobs: no alternatives")
st, j = chat()
check(st == 200 and j["choices"][0]["logprobs"] is None, "no logprobs asked: logprobs null")

# ---- streaming: the same logprobs --------------------------------------------
st, chunks, done, _ = events(BASE, "/v1/completions",
                             {"prompt": "The TX8 is", "max_tokens": 8, "temperature": 0,
                              "logprobs": 5, "stream": True})
s_lp = [v for ch in chunks for c in ch["choices"] if c.get("logprobs")
        for v in c["logprobs"]["token_logprobs"]]
check(st == 200 and done and close(s_lp, top1),
      "completions stream: the chunks' token_logprobs = the non-streamed ones", str(s_lp))
st, chunks, done, _ = events(BASE, "/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "Hello"}],
                              "max_tokens": 8, "temperature": 0, "logprobs": True,
                              "top_logprobs": 3, "stream": True})
s_content = [e for ch in chunks for c in ch["choices"] if c.get("logprobs")
             for e in c["logprobs"]["content"]]
check(st == 200 and done and same_content(s_content, content),
      "chat stream: the chunks' logprobs.content = the non-streamed content[]",
      "%d vs %d entries" % (len(s_content), len(content)))

# ---- a stop string cuts the text and its tokens --------------------------------
st, j = comp(max_tokens=8)
full = j["choices"][0]["text"] if st == 200 else ""
cut = full[len(full) // 2:][:3] if len(full) > 4 else ""
if cut and cut not in full[:len(full) // 2]:
    st, j = comp(logprobs=1, stop=[cut])
    c = j["choices"][0] if st == 200 else {}
    toks = c.get("logprobs", {}).get("tokens", []) if c else []
    joined = "".join(toks)
    check(st == 200 and c["finish_reason"] == "stop" and joined.startswith(c["text"]) and
          (len("".join(toks[:-1])) < len(c["text"]) if toks else c["text"] == ""),
          "a stop string: the logprobs stop with the token where the text ends",
          repr((c.get("text"), toks)))

# ---- the reference: log_softmax of the full logits of the prompt ----------------
if len(sys.argv) > 3:
    meta = json.load(urllib.request.urlopen(BASE + "/v1/models", timeout=60))["data"][0]["meta"]
    V, SV = meta["n_vocab"], meta["n_vocab_sample"]
    a = array.array("f")
    a.frombytes(open(sys.argv[2], "rb").read())
    T = len(a) // V
    row = a[(T - 1) * V:(T - 1) * V + SV]
    m = max(row)
    lse = m + math.log(sum(math.exp(x - m) for x in row))
    ref = sorted(((x - lse, i) for i, x in enumerate(row)), key=lambda t: (-t[0], t[1]))[:5]
    st, j = post(BASE, "/v1/completions", {"prompt": sys.argv[3], "max_tokens": 1,
                                          "temperature": 0, "logprobs": 5})
    lpj = j["choices"][0]["logprobs"] if st == 200 else {}
    got = sorted(lpj.get("top_logprobs", [{}])[0].values(), reverse=True)
    st2, tk = post(BASE, "/tokenize", {"content": sys.argv[3]})
    ok = (st == 200 and j["usage"]["prompt_tokens"] == T and len(got) == 5 and
          all(abs(g - r[0]) <= TOL for g, r in zip(got, ref)) and
          abs(lpj["token_logprobs"][0] - ref[0][0]) <= TOL)
    st3, dt = post(BASE, "/detokenize", {"tokens": [ref[0][1]]})
    check(ok and st3 == 200 and dt["content"] == lpj["tokens"][0],
          "the first token's logprob and top 5 = log_softmax of the full logits (%d x %d, "
          "%d sampled ids) within %g; max |diff| %.2g" %
          (T, V, SV, TOL, max([abs(g - r[0]) for g, r in zip(got, ref)] or [9])),
          str((got, ref)))

# ---- n > 1 ----------------------------------------------------------------------
st, j = comp(n=3, temperature=0.9, seed=11, max_tokens=6)
ch = j.get("choices", []) if st == 200 else []
one = [comp(temperature=0.9, seed=11 + i, max_tokens=6)[1] for i in range(3)]
alone = [o["choices"][0]["text"] for o in one]
check(st == 200 and [c["index"] for c in ch] == [0, 1, 2] and
      [c["text"] for c in ch] == alone,
      "n=3 with seed 11: choices 0, 1, 2 = the request alone with seeds 11, 12, 13",
      repr(([c.get("text") for c in ch], alone)))
check(st == 200 and j["usage"]["completion_tokens"] ==
      sum(o["usage"]["completion_tokens"] for o in one) and
      j["usage"]["prompt_tokens"] == one[0]["usage"]["prompt_tokens"],
      "n=3: usage counts every choice's tokens (%s), the prompt once (%s)" %
      (j.get("usage", {}).get("completion_tokens"), j.get("usage", {}).get("prompt_tokens")))
st, chunks, done, _ = events(BASE, "/v1/completions",
                             {"prompt": "The TX8 is", "max_tokens": 6, "temperature": 0.9,
                              "seed": 11, "n": 3, "stream": True,
                              "stream_options": {"include_usage": True}})
texts = ["", "", ""]
fin = [None] * 3
for e in chunks:
    for c in e["choices"]:
        texts[c["index"]] += c["text"]
        fin[c["index"]] = c["finish_reason"] or fin[c["index"]]
usage = [e["usage"] for e in chunks if e.get("usage")]
check(st == 200 and done and texts == alone and all(fin) and usage and
      usage[0]["completion_tokens"] == j["usage"]["completion_tokens"],
      "n=3 streamed: each index's deltas add up to its choice, each finishes, one usage",
      repr((texts, alone, fin, usage)))
st, j = chat(n=2, logprobs=True, top_logprobs=1)
ch = j.get("choices", []) if st == 200 else []
check(st == 200 and len(ch) == 2 and ch[0]["message"] == ch[1]["message"] and
      same_content(ch[0]["logprobs"]["content"], ch[1]["logprobs"]["content"]) and
      ch[1]["index"] == 1 and
      j["usage"]["completion_tokens"] == 2 * len(ch[0]["logprobs"]["content"]),
      "chat n=2 greedy: two identical choices with their logprobs", str(j)[:300])
st, chunks, done, _ = events(BASE, "/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "Hello"}],
                              "max_tokens": 5, "temperature": 1.0, "seed": 3, "n": 2,
                              "stream": True})
roles = [c["index"] for e in chunks for c in e["choices"] if c["delta"].get("role")]
fins = [c["index"] for e in chunks for c in e["choices"] if c["finish_reason"]]
check(st == 200 and done and sorted(roles) == [0, 1] and sorted(fins) == [0, 1],
      "chat n=2 streamed: each choice has its role chunk and its finish chunk")

# ---- bad values ------------------------------------------------------------------
for what, path, body, word in [
        ("n = 0", "/v1/completions", {"prompt": "x", "n": 0}, "'n'"),
        ("n = 1000", "/v1/completions", {"prompt": "x", "n": 1000}, "'n'"),
        ("logprobs 21", "/v1/completions", {"prompt": "x", "logprobs": 21}, "logprobs"),
        ("logprobs a string", "/v1/completions", {"prompt": "x", "logprobs": "5"}, "logprobs"),
        ("chat logprobs 3", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": "x"}], "logprobs": 3}, "logprobs"),
        ("top_logprobs 21", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 21},
         "top_logprobs"),
        ("top_logprobs without logprobs", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}, "top_logprobs")]:
    st, j = post(BASE, path, body)
    msg = j["error"]["message"] if isinstance(j, dict) and "error" in j else str(j)
    check(st == 400 and word in msg and j["error"].get("param") in word,
          "%s: 400 naming the field (%s)" % (what, msg))

sys.exit(summary("logprobs-n"))
