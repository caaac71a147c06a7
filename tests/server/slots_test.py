#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""glm-server's /slots (standard library only).

    slots_test.py GLM_SERVER DEVICE PACKAGE OTHER_PACKAGE NO_PATH_URL DIR

Starts its own servers (by PID, every wait bounded, all stopped at the end):
PACKAGE with --parallel 2 --slot-save-path DIR, the same again after a
restart, and OTHER_PACKAGE (another export of the same model) with
--no-slots. NO_PATH_URL: a running server without --slot-save-path.

Checks: GET /slots lists the slots and their state; save / erase / restore
and their replies; a continuation after a restore (into another slot, and
after a restart) is the unsaved slot's, token for token, and reuses the
restored tokens; a file of another package, truncated, damaged or not a
slot file is a 400 naming why and leaves the slot as it was; file names
with a path are 400s; a busy slot is a 503; a save that cannot be written
leaves no file behind; no --slot-save-path: 501; --no-slots: 501.
Prints "slots: N passed, N failed".
"""
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

from checks import check, summary
from http_json import events, post

SERVER, DEV, PKG, OTHER, NOPATH, DIR = sys.argv[1:7]
procs = []
stopped = []


def start(pkg, *extra):
    log = os.path.join(DIR, "..", "slots-srv-%d.log" % len(procs))
    f = open(log, "w")
    p = subprocess.Popen([SERVER, "--checkpoint", pkg, "--device", DEV, "--port", "0",
                          "--parallel", "2", "--ctx-size", "256", "--shutdown-timeout", "1",
                          *extra], stderr=f, stdout=subprocess.DEVNULL)
    procs.append(p)
    for _ in range(600):
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(log).read())
        if m:
            return p, "http://127.0.0.1:" + m.group(1)
        if p.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit("slots: a server did not start: " + open(log).read())


def stop(p, checked=True):
    """SIGTERM; a server must exit 0 (under ASan/UBSan: no report)"""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    if checked and p not in stopped:
        stopped.append(p)
        check(p.returncode == 0, "server %d: SIGTERM, exit %s" % (procs.index(p),
                                                                   p.returncode))


def get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


def action(base, slot, act, filename=None):
    body = {"filename": filename} if filename is not None else {}
    return post(base, "/slots/%s?action=%s" % (slot, act), body)


def gen(base, prompt, n=10):
    st, j = post(base, "/v1/completions", {"prompt": prompt, "max_tokens": n, "temperature": 0})
    assert st == 200, j
    return j["choices"][0]["text"], j["usage"].get("prompt_tokens_details", {}).get(
        "cached_tokens", 0)


def cached_slot(base):
    s = [x for x in get(base + "/slots") if x["n_cached"] > 0]
    return s[0]["id"] if len(s) == 1 else -1


def leftovers():
    return sorted(f for f in os.listdir(DIR) if f.startswith("."))


try:
    a, A = start(PKG, "--slot-save-path", DIR)
    sl = get(A + "/slots")
    check(isinstance(sl, list) and [x["id"] for x in sl] == [0, 1] and
          all(x["n_ctx"] == 256 and x["is_processing"] is False and x["state"] == "idle"
              for x in sl), "GET /slots: two idle slots with their context", str(sl))

    P = "The TX8 card serves a model of"
    T, _ = gen(A, P)
    s = cached_slot(A)
    st, j = action(A, s, "save", "conv.bin")
    check(st == 200 and j["id_slot"] == s and j["filename"] == "conv.bin" and
          j["n_saved"] > 0 and j["n_written"] == os.path.getsize(os.path.join(DIR, "conv.bin")),
          "save: id_slot, n_saved tokens, n_written = the file's size", str(j))
    n_saved = j.get("n_saved", 0)
    check(leftovers() == [], "save: no temporary file left in the directory", str(leftovers()))
    Q = P + T + " and then"
    X1, c1 = gen(A, Q)  # the unsaved slot's continuation
    for i in (0, 1):
        st, j = action(A, i, "erase")
        check(st == 200 and j["id_slot"] == i, "erase slot %d: n_erased %s" % (i, j.get("n_erased")))
    check(all(x["n_cached"] == 0 for x in get(A + "/slots")), "after erase: nothing cached")
    other = 1 - s
    st, j = action(A, other, "restore", "conv.bin")
    check(st == 200 and j["n_restored"] == n_saved and j["id_slot"] == other,
          "restore into the other slot: n_restored = n_saved (%d)" % n_saved, str(j))
    X2, c2 = gen(A, Q)
    check(X2 == X1 and c2 >= n_saved - 1 and c2 > 0,
          "after the restore: the continuation is the unsaved slot's, token for token, from "
          "%d restored tokens (%d cached before)" % (c2, c1), repr((X1, X2, c1, c2)))

    # a busy slot: 503
    res = {}
    th = threading.Thread(target=lambda: res.update(r=events(
        A, "/v1/completions", {"prompt": "Busy", "max_tokens": 150, "temperature": 0,
                               "stream": True})))
    th.start()
    busy = -1
    for _ in range(200):
        b = [x for x in get(A + "/slots") if x["is_processing"]]
        if b:
            busy = b[0]
            break
        time.sleep(0.02)
    st, j = action(A, busy["id"] if busy != -1 else 0, "save", "busy.bin")
    check(busy != -1 and busy["id_task"] and busy["params"]["n_predict"] == 150 and st == 503 and
          "busy" in j["error"]["message"] and not os.path.exists(os.path.join(DIR, "busy.bin")),
          "a slot running a request: GET /slots shows it, save is a 503", str((busy, st, j)))
    st, j = post(A, "/slots/%d?action=erase" % (busy["id"] if busy != -1 else 0), {})
    check(st == 503, "... and erase too")
    th.join(120)

    # bad requests
    for what, slot, act, fn, code, word in [
            ("a path in the name", 0, "save", "../escape.bin", 400, "filename"),
            ("an absolute path", 0, "restore", "/etc/passwd", 400, "filename"),
            ("a hidden name", 0, "save", ".x", 400, "filename"),
            ("a sub-directory", 0, "save", "a/b", 400, "filename"),
            ("no filename", 0, "save", None, 400, "filename"),
            ("an unknown action", 0, "copy", "x", 400, "action"),
            ("slot 2 of 2", 2, "save", "x", 400, "slot"),
            ("slot -1", -1, "save", "x", 400, "slot"),
            ("a missing file", 0, "restore", "missing.bin", 404, "missing.bin")]:
        st, j = action(A, slot, act, fn)
        msg = j["error"]["message"] if isinstance(j, dict) and "error" in j else str(j)
        check(st == code and word in msg, "%s: %d (%s)" % (what, code, msg))
    check(not os.path.exists(os.path.join(DIR, "..", "escape.bin")), "nothing written outside")

    # damaged files: refused with the reason, the slot unchanged
    data = open(os.path.join(DIR, "conv.bin"), "rb").read()
    bad = {"trunc.bin": data[:len(data) - 9], "junk.bin": b"hello, this is not a slot" * 20,
           "flip.bin": data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 0x40]) +
           data[len(data) // 2 + 1:], "empty.bin": b""}
    for n, b in bad.items():
        open(os.path.join(DIR, n), "wb").write(b)
    before = get(A + "/slots")
    for n, word in [("trunc.bin", "size is wrong"), ("junk.bin", "not a glm-server slot file"),
                    ("flip.bin", "checksum"), ("empty.bin", "not a glm-server slot file")]:
        st, j = action(A, 0, "restore", n)
        msg = j["error"]["message"] if isinstance(j, dict) and "error" in j else str(j)
        check(st == 400 and word in msg, "restore %s: 400 (%s)" % (n, msg))
    check(get(A + "/slots") == before, "the refused restores left the slots as they were")

    # a save that cannot be written: no partial file
    os.mkdir(os.path.join(DIR, "adir"))
    st, j = action(A, other, "save", "adir")
    check(st == 500 and leftovers() == [] and os.path.isdir(os.path.join(DIR, "adir")),
          "a save whose rename fails (a directory has the name): 500, no file left (%s)" %
          (j.get("error", {}).get("message") if isinstance(j, dict) else j), str(leftovers()))

    # a restart: the same continuation
    stop(a)
    a, A = start(PKG, "--slot-save-path", DIR)
    st, j = action(A, 0, "restore", "conv.bin")
    X3, c3 = gen(A, Q)
    check(st == 200 and X3 == X1 and c3 == c2,
          "after a restart of the server: restored, the same continuation", repr((X1, X3)))
    stop(a)

    # another package of the same model: refused
    b, B = start(OTHER, "--slot-save-path", DIR, "--no-slots")
    gen(B, P)
    st, j = post(B, "/slots/0?action=save", {"filename": "other.bin"})
    st2, _ = post(B, "/slots/1?action=save", {"filename": "other1.bin"})
    code = urllib.request.Request(B + "/slots")
    try:
        urllib.request.urlopen(code, timeout=30)
        st3 = 200
    except urllib.error.HTTPError as e:
        st3 = e.code
    check(st3 == 501, "--no-slots: GET /slots is 501")
    stop(b)
    a, A = start(PKG, "--slot-save-path", DIR)
    st, j = action(A, 0, "restore", "other.bin")
    msg = j["error"]["message"] if isinstance(j, dict) and "error" in j else str(j)
    check(st == 400 and "another model" in msg,
          "a file saved from another package of the model: 400 (%s)" % msg)
    stop(a)

    st, j = post(NOPATH, "/slots/0?action=save", {"filename": "x.bin"})
    msg = j["error"]["message"] if isinstance(j, dict) and "error" in j else str(j)
    check(st == 501 and "--slot-save-path" in msg, "no --slot-save-path: 501 (%s)" % msg)
finally:
    for p in procs:
        stop(p, checked=False)
sys.exit(summary("slots"))
