#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Load benchmark of a running glm-server (standard library only).

    bench.py URL [--levels 1,4,8,16,32] [--requests N] [--max-tokens N]

For each concurrency level c: a fixed number of streamed requests
(--requests, default max(8, 2c)), at most c in flight, each with a distinct
prompt and max_tokens; every response must be complete and well formed
(200, only "data:" events of valid JSON, one finish_reason, usage, [DONE]).
Prints a table of aggregate generated tokens/s, mean and p99
time-to-first-token and inter-token latency (gaps between content
events), then the ratios c8/c1 of tokens/s and of p99 ITL. Exits 1 if a
response was malformed. A benchmark, not a timed test.
"""
import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("--levels", default="1,4,8,16,32")
ap.add_argument("--requests", type=int, default=0)
ap.add_argument("--max-tokens", type=int, default=32)
ap.add_argument("--timeout", type=float, default=300)
a = ap.parse_args()
U = urllib.parse.urlparse(a.url)


def one(i, res):
    t0 = time.monotonic()
    c = http.client.HTTPConnection(U.hostname, U.port, timeout=a.timeout)
    body = {"prompt": "Benchmark request %d: tell me about the TX8 accelerator" % i,
            "max_tokens": a.max_tokens, "temperature": 0.7, "seed": i, "stream": True,
            "stream_options": {"include_usage": True}}
    err = None
    times, usage, finish, done = [], None, [], False
    try:
        c.request("POST", "/v1/completions", body=json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            err = "status %d" % r.status
        while err is None:
            line = r.readline()
            if not line:
                break
            line = line.rstrip(b"\r\n")
            if not line:
                continue
            if not line.startswith(b"data: "):
                err = "not an SSE data line: %r" % line[:80]
                break
            p = line[6:]
            if p == b"[DONE]":
                done = True
                continue
            j = json.loads(p)
            if "error" in j:
                err = "error event: %s" % j["error"]["message"]
                break
            if j.get("usage"):
                usage = j["usage"]
            for ch in j.get("choices", []):
                if ch.get("finish_reason"):
                    finish.append(ch["finish_reason"])
                elif ch.get("text"):
                    times.append(time.monotonic())
    except Exception as e:  # noqa: BLE001 - any failure is a malformed response
        err = repr(e)
    finally:
        c.close()
    if err is None and not done:
        err = "no [DONE]"
    if err is None and (len(finish) != 1 or not usage):
        err = "finish_reason %s, usage %s" % (finish, usage)
    if err is None and finish[0] == "length" and usage["completion_tokens"] != a.max_tokens:
        err = "finish_reason length after %d of %d tokens" % (usage["completion_tokens"], a.max_tokens)
    res[i] = {"t0": t0, "times": times, "usage": usage, "err": err}


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]


def level(c):
    n = a.requests or max(8, 2 * c)
    res = [None] * n
    nxt = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= n:
                return
            one(i, res)

    t0 = time.monotonic()
    ths = [threading.Thread(target=worker) for _ in range(c)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(a.timeout)
    wall = time.monotonic() - t0
    bad = [r["err"] for r in res if r is None or r["err"]]
    ok = [r for r in res if r and not r["err"]]
    toks = sum(r["usage"]["completion_tokens"] for r in ok)
    ttft = [r["times"][0] - r["t0"] for r in ok if r["times"]]
    itl = [b - x for r in ok for x, b in zip(r["times"], r["times"][1:])]
    return {"c": c, "n": n, "ok": len(ok), "bad": bad, "tps": toks / wall, "toks": toks,
            "wall": wall, "ttft_mean": sum(ttft) / max(1, len(ttft)), "ttft_p99": pct(ttft, 99),
            "itl_mean": sum(itl) / max(1, len(itl)), "itl_p99": pct(itl, 99)}


levels = [int(x) for x in a.levels.split(",")]
rows = []
print("glm-server load benchmark: %s, %d tokens per request, streamed" % (a.url, a.max_tokens))
print("%5s %5s %6s %8s %9s %10s %10s %9s %9s" % ("conc", "reqs", "ok", "tokens", "tok/s",
                                               "TTFT mean", "TTFT p99", "ITL mean", "ITL p99"))
for c in levels:
    r = level(c)
    rows.append(r)
    print("%5d %5d %6d %8d %9.1f %8.1fms %8.1fms %7.1fms %7.1fms" % (
        r["c"], r["n"], r["ok"], r["toks"], r["tps"], r["ttft_mean"] * 1e3, r["ttft_p99"] * 1e3,
        r["itl_mean"] * 1e3, r["itl_p99"] * 1e3))
    sys.stdout.flush()
    for e in r["bad"][:5]:
        print("   malformed response: %s" % e)
by = {r["c"]: r for r in rows}
if 1 in by and 8 in by:
    print("ratio c8/c1: tokens/s %.2fx (target >= 4), p99 ITL %.2fx (target <= 2.5)" % (
        by[8]["tps"] / by[1]["tps"], by[8]["itl_p99"] / by[1]["itl_p99"]))
sys.exit(1 if any(r["bad"] for r in rows) else 0)
