#!/usr/bin/env python3
"""Hostile clients against a running glm-server (tests/server/run-tests).

  hostile.py PORT SERVER_PID [IDLE] [SLOW] [SECONDS] [API_KEY]

Opens IDLE (default 1000) sockets that send nothing and SLOW (default 50)
clients that send a request's headers one byte a second, all on loopback,
and keeps them for SECONDS (default 12). Throughout, /health is asked every
100 ms on a new connection and must answer 200 within 100 ms, and one
normal chat completion must complete. The server's RSS (VmRSS) at the end
must be within 64 MiB of the start. Then the slow clients must have been
dropped by the server (--header-timeout), and once the hostile sockets are
closed the server must accept and answer as before.

Prints one line per check and "hostile: N passed, N failed"; exit 1 on a
failure. Bounded: every socket has a timeout, the run ends after SECONDS.
"""
import json
import socket
import sys
import threading
import time

from checks import check, summary

PORT = int(sys.argv[1])
PID = int(sys.argv[2])
N_IDLE = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
N_SLOW = int(sys.argv[4]) if len(sys.argv) > 4 else 50
SECONDS = float(sys.argv[5]) if len(sys.argv) > 5 else 12.0
API_KEY = sys.argv[6] if len(sys.argv) > 6 else None




def rss_kib():
    with open("/proc/%d/status" % PID) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def http(method, path, body=None, timeout=5.0):
    """One request on a new connection: (status, body bytes, seconds)."""
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else b""
        req = "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" % (method, path)
        if API_KEY:
            req += "Authorization: Bearer %s\r\n" % API_KEY
        if body is not None:
            req += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(data)
        s.sendall(req.encode() + b"\r\n" + data)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1]) if head else 0
        return status, rest, time.monotonic() - t0
    finally:
        s.close()


rss0 = rss_kib()
status, _, _ = http("GET", "/health")
check(status == 200, "health before the hostile clients: %d" % status)

idle = []
refused_or_closed = 0
for i in range(N_IDLE):
    try:
        s = socket.create_connection(("127.0.0.1", PORT), timeout=2.0)
        idle.append(s)
    except OSError:
        refused_or_closed += 1

stop = threading.Event()
slow_dropped = [0]
slow_lock = threading.Lock()


def slow_client():
    req = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 64 + b"\r\n\r\n"
    try:
        s = socket.create_connection(("127.0.0.1", PORT), timeout=2.0)
    except OSError:
        with slow_lock:
            slow_dropped[0] += 1
        return
    try:
        for b in req:
            if stop.is_set():
                return
            s.send(bytes([b]))
            if stop.wait(1.0):
                return
        # sent it all: SECONDS were not enough to finish (not expected)
    except OSError:
        with slow_lock:
            slow_dropped[0] += 1
    finally:
        s.close()


slow = [threading.Thread(target=slow_client, daemon=True) for _ in range(N_SLOW)]
for t in slow:
    t.start()

chat_result = {}


def chat():
    try:
        st, body, dt = http("POST", "/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "Hello"}],
                             "max_tokens": 8, "temperature": 0}, timeout=30.0)
        chat_result["status"] = st
        chat_result["body"] = body
    except OSError as e:
        chat_result["status"] = 0
        chat_result["body"] = str(e).encode()


slow_t0 = time.monotonic()
worst = 0.0
n_health = 0
bad_health = []
chat_t = None
t_end = time.monotonic() + SECONDS
while time.monotonic() < t_end:
    try:
        st, _, dt = http("GET", "/health", timeout=2.0)
    except OSError as e:
        st, dt = 0, 2.0
    n_health += 1
    worst = max(worst, dt)
    if st != 200 or dt >= 0.1:
        bad_health.append((st, round(dt * 1000, 1), round(time.monotonic() - slow_t0, 1)))
    if chat_t is None and n_health == 5:
        chat_t = threading.Thread(target=chat, daemon=True)
        chat_t.start()
    time.sleep(0.1)
if chat_t:
    chat_t.join(30)

check(n_health >= 10 and not bad_health,
      "/health every 100 ms under %d idle + %d slow clients: %d asked, worst %.1f ms, "
      "bad %s" % (N_IDLE, N_SLOW, n_health, worst * 1000, bad_health[:5]))
ok_chat = chat_result.get("status") == 200
try:
    ok_chat = ok_chat and json.loads(chat_result["body"])["choices"][0]["finish_reason"]
except (ValueError, KeyError, IndexError):
    ok_chat = False
check(bool(ok_chat), "a chat completion beside them: %s" % chat_result.get("status"))
rss1 = rss_kib()
check(rss0 > 0 and rss1 - rss0 < 64 * 1024,
      "server RSS %d -> %d KiB (bounded)" % (rss0, rss1))

# the server dropped the slow clients (header timeout) and evicted idle
# sockets: count those the server has closed
closed = 0
for s in idle:
    s.setblocking(False)
    try:
        if s.recv(1) == b"":
            closed += 1
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
check(refused_or_closed + closed > 0,
      "idle sockets beyond --max-connections closed by the server: %d of %d"
      % (refused_or_closed + closed, N_IDLE))
stop.set()
for t in slow:
    t.join(3)
check(slow_dropped[0] == N_SLOW,
      "slow-header clients dropped by the server: %d of %d" % (slow_dropped[0], N_SLOW))
for s in idle:
    s.close()
time.sleep(0.5)
status, _, dt = http("GET", "/health")
check(status == 200, "health after: %d in %.1f ms" % (status, dt * 1000))
sys.exit(summary("hostile"))
