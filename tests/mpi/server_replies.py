"""glm-server's temperature-0 replies, for tests/mpi/server: chat and
completions, streamed and not, for several prompts -- one request at a time,
then all of them at once (several slots in one device pass) -- written as
JSON lines (the text, the reasoning text, the finish reason, the token
counts) so that two servers' files compare byte for byte.

    server_replies.py BASE_URL OUT_FILE

Standard library only (tests/server/http_json.py). Exit 0, or 1 naming the
request that failed (nothing is written then)."""
import json
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from http_json import events, post  # noqa: E402

PROMPTS = [
    "The TX8 runs",
    "Hello there, how are you today?",
    "1, 2, 3, 4,",
    "Write a haiku about experts spread over four hosts.",
]
MAX_TOKENS = 24


def requests():
    """(name, path, body) of every request, in a fixed order."""
    out = []
    for i, p in enumerate(PROMPTS):
        for stream in (False, True):
            s = "stream" if stream else "plain"
            chat = {"messages": [{"role": "user", "content": p}], "max_tokens": MAX_TOKENS,
                    "temperature": 0, "stream": stream}
            comp = {"prompt": p, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": stream}
            if stream:
                chat["stream_options"] = {"include_usage": True}
                comp["stream_options"] = {"include_usage": True}
            out.append((f"chat {i} {s}", "/v1/chat/completions", chat))
            out.append((f"completions {i} {s}", "/v1/completions", comp))
    return out


def counts(usage):
    """The token counts of a usage object (not the prefix cache's hits, which
    depend on which slot a request got)."""
    if usage is None:
        return None
    return {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}


def reply(base, name, path, body):
    """The reply as a dict of what must match, or raises naming the failure."""
    chat = path.endswith("chat/completions")
    if not body["stream"]:
        status, r = post(base, path, body)
        if status != 200 or not isinstance(r, dict):
            raise RuntimeError(f"{name}: HTTP {status}: {str(r)[:300]}")
        c = r["choices"][0]
        if chat:
            m = c["message"]
            text, reasoning = m.get("content") or "", m.get("reasoning_content") or ""
        else:
            text, reasoning = c["text"], ""
        return {"request": name, "text": text, "reasoning": reasoning,
                "finish": c["finish_reason"], "usage": counts(r["usage"])}
    status, chunks, done, other = events(base, path, body)
    if status != 200 or not done:
        raise RuntimeError(f"{name}: HTTP {status}, [DONE] {done}: {other[:3]}")
    text, reasoning, finish, usage = "", "", None, None
    for ch in chunks:
        if ch.get("usage"):
            usage = ch["usage"]
        for c in ch.get("choices", []):
            if chat:
                d = c.get("delta", {})
                text += d.get("content") or ""
                reasoning += d.get("reasoning_content") or ""
            else:
                text += c.get("text") or ""
            if c.get("finish_reason"):
                finish = c["finish_reason"]
    return {"request": name, "text": text, "reasoning": reasoning, "finish": finish,
            "usage": counts(usage)}


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    base, path_out = sys.argv[1].rstrip("/"), sys.argv[2]
    reqs = requests()
    lines = []
    try:
        for name, path, body in reqs:
            r = reply(base, name, path, body)
            lines.append(json.dumps(r, sort_keys=True, ensure_ascii=False))
    except (RuntimeError, OSError, KeyError, ValueError) as e:
        print(f"server_replies: {e}", file=sys.stderr)
        return 1
    # the same requests at once: several slots in each device pass
    res, errs = [None] * len(reqs), []

    def one(k):
        name, path, body = reqs[k]
        try:
            r = reply(base, name + " concurrent", path, body)
            res[k] = json.dumps(r, sort_keys=True, ensure_ascii=False)
        except (RuntimeError, OSError, KeyError, ValueError) as e:
            errs.append(str(e))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errs:
        print(f"server_replies: {errs[0]}", file=sys.stderr)
        return 1
    lines += res
    with open(path_out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
