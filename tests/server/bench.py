#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Load benchmark of a running glm-server (standard library only).

    bench.py URL [--levels 1,4,8,16,32] [--requests N] [--max-tokens N]
    bench.py URL --interference 4096 [--streams 8]
    bench.py URL --trace SECONDS --rates 1,2,4 [--pid SERVER_PID]

For each concurrency level c: a fixed number of streamed requests
(--requests, default max(8, 2c)), at most c in flight, each with a distinct
prompt and max_tokens; every response must be complete and well formed
(200, only "data:" events of valid JSON, one finish_reason, usage, [DONE]).
Prints a table of aggregate generated tokens/s, mean and p99
time-to-first-token and inter-token latency (gaps between content
events), then the ratios c8/c1 of tokens/s and of p99 ITL. Exits 1 if a
response was malformed. A benchmark, not a timed test.

--interference N: --streams (8) streams decode long replies; their p99
inter-token latency is measured over 2 s of steady state, then while a
prompt of N tokens is prefilled beside them (it arrives alone, max_tokens
1); prints both p99s and their ratio (issue 40's target: <= 2). The server
needs --parallel > streams and a --ctx-size above N.

--trace SECONDS: for each rate of --rates (requests/s), requests arrive as
a Poisson process for SECONDS, with prompts of 16-512 and replies of 8-128
tokens drawn from a fixed mix (seeded); prints goodput (completed requests
and tokens per second), p50/p99 TTFT and ITL, the errors (must be 0) and,
with --pid, the server's RSS at the start and the end of each rate (and
of it, the prefix cache's KV blocks, which grow up to --cache-ram), then
the highest rate whose p99 TTFT stayed under 1 s, and whether the RSS
without the prefix cache's blocks stayed within 5% from the trace's start
to its end (exit 1 if not, as for errors).
"""
import random
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
ap.add_argument("--interference", type=int, default=0)
ap.add_argument("--streams", type=int, default=8)
ap.add_argument("--trace", type=float, default=0)
ap.add_argument("--rates", default="1,2,4")
ap.add_argument("--pid", type=int, default=0)
a = ap.parse_args()
U = urllib.parse.urlparse(a.url)


def one(i, res, prompt=None, max_tokens=None):
    t0 = time.monotonic()
    max_tokens = max_tokens or a.max_tokens
    c = http.client.HTTPConnection(U.hostname, U.port, timeout=a.timeout)
    body = {"prompt": prompt or "Benchmark request %d: tell me about the TX8 accelerator" % i,
            "max_tokens": max_tokens, "temperature": 0.7, "seed": i, "stream": True,
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
    if err is None and finish[0] == "length" and usage["completion_tokens"] != max_tokens:
        err = "finish_reason length after %d of %d tokens" % (usage["completion_tokens"], max_tokens)
    res[i] = {"t0": t0, "times": times, "usage": usage, "err": err, "t1": time.monotonic()}


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


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def get(path):
    """The body of GET path on the server, as text"""
    c = http.client.HTTPConnection(U.hostname, U.port, timeout=30)
    c.request("GET", path)
    return c.getresponse().read().decode()


def prefix_cache_mib():
    """The prefix cache's KV blocks held (host memory, within the RSS), MiB"""
    try:
        for line in get("/metrics").splitlines():
            if line.startswith("glm_server_prefix_cache_bytes "):
                return float(line.split()[1]) / (1 << 20)
    except (OSError, ValueError):
        pass
    return -1.0


def interference():
    """p99 ITL of running streams: steady, then during a long prefill."""
    n = a.streams
    res = [None] * (n + 1)
    ths = [threading.Thread(target=one, args=(i, res, None, 100000 // 100)) for i in range(n)]
    for t in ths:
        t.start()
    time.sleep(1.0)  # all streams decoding
    s0 = time.monotonic()
    time.sleep(2.0)
    s1 = time.monotonic()
    long_prompt = [(7 * k + 11) % 1000 + 100 for k in range(a.interference)]
    one(n, res, long_prompt, 1)
    p0, p1 = res[n]["t0"], res[n]["t1"]
    for t in ths:
        t.join(a.timeout)
    bad = [r["err"] for r in res if r is None or r["err"]]

    def gaps(lo, hi):
        return [b - x for r in res[:n] if r for x, b in zip(r["times"], r["times"][1:])
                if lo <= x and b <= hi]
    steady, during = pct(gaps(s0, s1), 99), pct(gaps(p0, p1), 99)
    print("prefill of %d tokens beside %d decoding streams: their p99 ITL %.1f ms steady, "
          "%.1f ms during the prefill (%.1f s): ratio %.2f (target <= 2)" % (
              a.interference, n, steady * 1e3, during * 1e3, p1 - p0, during / steady))
    for e in bad[:5]:
        print("   malformed response: %s" % e)
    return 1 if bad else 0


def total_slots():
    """The server's slots (/props total_slots), or 8"""
    try:
        return int(json.loads(get("/props")).get("total_slots", 8))
    except (OSError, ValueError, TypeError):
        return 8


def trace():
    """Poisson arrivals of a mixed workload at each rate, for --trace s."""
    rnd = random.Random(1234)
    prompts = [16, 32, 64, 128, 256, 512]
    outs = [8, 16, 32, 64, 128]
    words = "the device memory expert router token layer cache prompt reply".split()
    # warm-up: every slot once with the mix's longest prompt and reply, so
    # that the RSS at the start is the server's steady state (slot buffers,
    # HTTP threads, allocator arenas), not a cold process
    n = total_slots()
    wres = [None] * n
    ths = [threading.Thread(target=one, args=(
        i, wres, "warm-up %d " % i + " ".join(words[(i + k) % len(words)]
                                                      for k in range(prompts[-1])), outs[-1]))
        for i in range(n)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(a.timeout)
    wbad = [r["err"] if r else "no response" for r in wres if r is None or r["err"]]
    print("warm-up: %d requests (every slot, %d-word prompts, %d tokens), %d errors" % (
        n, prompts[-1], outs[-1], len(wbad)))
    for e in wbad[:3]:
        print("   error: %s" % e)
    best = None
    mem = []  # per rate: (RSS KiB, prefix-cache MiB) at its start and end
    rc = 1 if wbad else 0
    print("%6s %6s %5s %6s %9s %9s %9s %9s %9s %7s %11s %s" % (
        "rate", "reqs", "ok", "errors", "goodput", "tok/s", "TTFT p50", "TTFT p99", "ITL p99",
        "", "RSS start/end", "(of which prefix-cache blocks)"))
    for rate in [float(x) for x in a.rates.split(",")]:
        arrivals, t = [], 0.0
        while True:
            t += rnd.expovariate(rate)
            if t >= a.trace:
                break
            arrivals.append(t)
        res = [None] * len(arrivals)
        rss0 = rss_kib(a.pid) if a.pid else -1
        pc0 = prefix_cache_mib()
        start = time.monotonic()
        ths = []
        for i, at in enumerate(arrivals):
            time.sleep(max(0.0, start + at - time.monotonic()))
            pl = rnd.choice(prompts)
            prompt = " ".join(rnd.choice(words) for _ in range(pl))
            th = threading.Thread(target=one, args=(i, res, prompt, rnd.choice(outs)))
            th.start()
            ths.append(th)
        for th in ths:
            th.join(a.timeout)
        wall = time.monotonic() - start
        rss1 = rss_kib(a.pid) if a.pid else -1
        pc1 = prefix_cache_mib()
        ok = [r for r in res if r and not r["err"]]
        bad = [r["err"] if r else "no response" for r in res if r is None or r["err"]]
        ttft = [r["times"][0] - r["t0"] for r in ok if r["times"]]
        itl = [b - x for r in ok for x, b in zip(r["times"], r["times"][1:])]
        toks = sum(r["usage"]["completion_tokens"] for r in ok)
        print("%6.2f %6d %5d %6d %7.2f/s %9.1f %7.0fms %7.0fms %7.1fms %7s %5d/%d MiB (%.0f/%.0f)" % (
            rate, len(res), len(ok), len(bad), len(ok) / wall, toks / wall,
            pct(ttft, 50) * 1e3, pct(ttft, 99) * 1e3, pct(itl, 99) * 1e3, "",
            rss0 // 1024, rss1 // 1024, pc0, pc1))
        for e in bad[:3]:
            print("   error: %s" % e)
        sys.stdout.flush()
        if bad:
            rc = 1
        if ttft and pct(ttft, 99) < 1.0 and not bad:
            best = rate
        mem.append(((rss0, pc0), (rss1, pc1)))
    print("highest rate with p99 TTFT < 1 s and no errors: %s requests/s" %
          ("%.2f" % best if best else "none of those tried"))
    first, last = (mem[0][0], mem[-1][1]) if mem else ((-1, -1), (-1, -1))
    if a.pid and min(first[0], last[0]) > 0 and min(first[1], last[1]) >= 0:
        # the prefix cache's blocks are a cache the server fills up to
        # --cache-ram on purpose; what must stay flat is the rest
        own0 = first[0] / 1024 - first[1]
        own1 = last[0] / 1024 - last[1]
        growth = (own1 - own0) / own0
        flat = abs(growth) <= 0.05
        print("server RSS without the prefix cache's blocks: %.1f MiB at the start of the trace, "
              "%.1f MiB at its end (%+.1f%%, must stay within 5%%): %s" % (
                  own0, own1, 100 * growth, "flat" if flat else "NOT FLAT"))
        if not flat:
            rc = 1
    return rc


if a.interference:
    sys.exit(interference())
if a.trace:
    sys.exit(trace())

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
    print("ratio c8/c1: tokens/s %.2fx (target >= 4), p99 ITL %.2fx (target <= 2)" % (
        by[8]["tps"] / by[1]["tps"], by[8]["itl_p99"] / by[1]["itl_p99"]))
sys.exit(1 if any(r["bad"] for r in rows) else 0)
