"""JSON over HTTP for the suite scripts (standard library only): a request
and its decoded reply, and a streamed request's server-sent events."""
import json
import urllib.error
import urllib.request

TIMEOUT = 120


def post(base, path, body, timeout=TIMEOUT):
    """POST body as JSON: (status, decoded JSON reply or its text)."""
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode("utf-8")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def events(base, path, body, timeout=TIMEOUT):
    """A streamed request: (status, [JSON chunks], saw data: [DONE], other lines)."""
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    chunks, done, other = [], False, []
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            for line in r:
                line = line.rstrip(b"\r\n")
                if not line:
                    continue
                if not line.startswith(b"data: "):
                    other.append(line)
                elif line[6:] == b"[DONE]":
                    done = True
                else:
                    chunks.append(json.loads(line[6:].decode("utf-8")))
            return r.status, chunks, done, other
    except urllib.error.HTTPError as e:
        return e.code, chunks, done, [e.read()]
