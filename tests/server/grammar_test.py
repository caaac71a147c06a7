#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""glm-server's constrained output on a random-weight model (issue 40 item
5, issue 37 item 3).

    grammar_test.py URL N_SCHEMAS [tools]

- response_format json_schema: N_SCHEMAS random schemas (objects with
  required and optional properties, additionalProperties false, arrays
  with minItems/maxItems, strings with enum/const/maxLength, numbers,
  integers, booleans, null, type lists, anyOf, $defs/$ref, nesting), each
  at a random seed and temperature, 4 requests at a time: every reply ends
  with finish_reason "stop" and its content parses and validates against
  its schema (python3-jsonschema, Draft 2020-12);
- response_format json_object: the content is a JSON object;
- a GBNF "grammar" (llama-server's field): the content is in its language;
- bad grammars and schemas: 400 naming the problem;
- tool_choice "required" and a named function, with random tools: the
  reply is tool_calls (finish_reason "tool_calls"), each call names a
  given tool (the named one), its arguments parse and validate against
  the tool's parameters; streamed, the deltas are vLLM's (a head with
  index, id, type, name and empty arguments, then argument fragments) and
  add up to the same calls as the non-streamed reply at the same seed.
  With "tools", only these tool-call checks (a server whose template writes
  another tool-call format: Qwen3's JSON, DeepSeek-V3's).

Prints one line per check and "grammar: N passed, N failed". Every request has a
timeout; the whole run is bounded by the caller's timeout.
"""
import concurrent.futures
import http.client
import json
import random
import re
import sys
import urllib.parse

import checks

try:
    import jsonschema
except ImportError:  # scripts/install-deps installs python3-jsonschema
    jsonschema = None

BASE = sys.argv[1]
N_SCHEMAS = int(sys.argv[2]) if len(sys.argv) > 2 else 24
U = urllib.parse.urlparse(BASE)
TIMEOUT = 300
MAX_TOKENS = 400

def check(ok, what, detail=""):
    checks.check(ok, what, detail[:1500])


def post(body, path="/v1/chat/completions"):
    c = http.client.HTTPConnection(U.hostname, U.port, timeout=TIMEOUT)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode("utf-8")
    c.close()
    if body.get("stream") and r.status == 200:
        return r.status, [json.loads(l[6:]) for l in text.splitlines()
                          if l.startswith("data: ") and l != "data: [DONE]"]
    return r.status, json.loads(text)


def valid(schema, value):
    """'' when value satisfies schema, else why not"""
    if jsonschema is None:
        return ""
    try:
        jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)
        return ""
    except jsonschema.ValidationError as e:
        return e.message


# ---- random schemas --------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta", "x", "y_z", "Name", "id", "ok", "é"]


def rand_string(rng):
    s = {"type": "string", "maxLength": rng.randint(0, 8)}
    if rng.random() < 0.3:
        s["minLength"] = rng.randint(0, s["maxLength"])
    return s


def rand_schema(rng, depth, defs):
    kinds = ["string", "integer", "number", "boolean", "null", "enum", "const", "typelist"]
    if depth < 3:
        kinds += ["object", "object", "array", "anyof"]
    if defs and depth < 3:
        kinds.append("ref")
    k = rng.choice(kinds)
    if k == "string":
        return rand_string(rng)
    if k in ("integer", "number", "boolean", "null"):
        return {"type": k}
    if k == "enum":
        vals = rng.sample(["red", "green", "blue", 1, 2.5, True, None, "a\"b", "日本"],
                          rng.randint(1, 4))
        return {"enum": vals}
    if k == "const":
        return {"const": rng.choice(["fixed", 42, False, None, "with space"])}
    if k == "typelist":
        return {"type": rng.sample(["string", "integer", "null", "boolean"], 2), "maxLength": 5}
    if k == "anyof":
        return {"anyOf": [rand_schema(rng, depth + 1, defs) for _ in range(rng.randint(1, 3))]}
    if k == "ref":
        return {"$ref": "#/$defs/" + rng.choice(sorted(defs))}
    if k == "array":
        lo = rng.randint(0, 2)
        return {"type": "array", "items": rand_schema(rng, depth + 1, defs),
                "minItems": lo, "maxItems": lo + rng.randint(0, 2)}
    props = {}
    for w in rng.sample(WORDS, rng.randint(0, 4)):
        props[w] = rand_schema(rng, depth + 1, defs)
    req = [p for p in props if rng.random() < 0.6]
    return {"type": "object", "properties": props, "required": req,
            "additionalProperties": False}


def random_schema(rng):
    defs = {}
    if rng.random() < 0.4:
        defs["item"] = {"type": "object", "properties": {"v": {"type": "integer"},
                                                          "tag": rand_string(rng)},
                        "required": ["v"], "additionalProperties": False}
    s = rand_schema(rng, 0, defs) if rng.random() < 0.2 else {
        "type": "object", "properties": {w: rand_schema(rng, 1, defs)
                                         for w in rng.sample(WORDS, rng.randint(1, 4))},
        "additionalProperties": False}
    if s.get("type") == "object" and s.get("properties"):
        s["required"] = [p for p in s["properties"] if rng.random() < 0.7]
    if defs:
        s["$defs"] = defs
    return s


def chat_body(rng, seed, **kw):
    b = {"messages": [{"role": "user", "content": "Answer in JSON."}], "seed": seed,
         "max_tokens": MAX_TOKENS, "temperature": rng.choice([0, 0.7, 1.0, 1.5])}
    b.update(kw)
    return b


def schema_case(i):
    rng = random.Random(1000 + i)
    schema = random_schema(rng)
    body = chat_body(rng, rng.randint(0, 1 << 30), response_format={
        "type": "json_schema", "json_schema": {"name": "s%d" % i, "schema": schema,
                                               "strict": True}})
    st, r = post(body)
    if st != 200:
        return False, "schema %d: HTTP %d %s" % (i, st, r)
    c = r["choices"][0]
    text = c["message"].get("content") or ""
    try:
        value = json.loads(text)
    except ValueError as e:
        return False, "schema %d (%s): not JSON (%s): %r" % (i, c["finish_reason"], e, text)
    why = valid(schema, value)
    if c["finish_reason"] != "stop" or why:
        return False, "schema %d: finish %s, %s: %r for %s" % (i, c["finish_reason"], why,
                                                               text, json.dumps(schema))
    return True, "%d tokens" % r["usage"]["completion_tokens"]


def run_schemas():
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        res = list(ex.map(schema_case, range(N_SCHEMAS)))
    bad = [d for ok, d in res if not ok]
    toks = [int(d.split()[0]) for ok, d in res if ok]
    check(not bad, "response_format json_schema: %d random schemas at random seeds and "
          "temperatures: every reply stops, parses and validates (%s tokens each)%s" %
          (N_SCHEMAS, "%d-%d" % (min(toks), max(toks)) if toks else "no",
           "" if jsonschema else " [jsonschema missing: parsed only]"), "; ".join(bad))


class _End(Exception):
    pass


def json_prefix(s):
    """whether s is a JSON object or the beginning of one (a random-weight
    model's unbounded strings run into max_tokens)"""
    i = 0

    def at():
        if i >= len(s):
            raise _End()
        return s[i]

    def ws():
        nonlocal i
        while i < len(s) and s[i] in " \t\n\r":
            i += 1

    def lit(w):
        nonlocal i
        for ch in w:
            if at() != ch:
                raise ValueError(w)
            i += 1

    def string():
        nonlocal i
        lit('"')
        while at() != '"':
            if at() == "\\":
                i += 1
                if at() == "u":
                    i += 1
                    for _ in range(4):
                        if at() not in "0123456789abcdefABCDEF":
                            raise ValueError("\\u")
                        i += 1
                    continue
                if at() not in '"\\/bfnrt':
                    raise ValueError("escape")
            elif ord(at()) < 0x20:
                raise ValueError("control character")
            i += 1
        i += 1

    def value():
        nonlocal i
        ws()
        c = at()
        if c == "{":
            i += 1
            ws()
            if at() == "}":
                i += 1
                return
            while True:
                ws()
                string()
                ws()
                lit(":")
                value()
                ws()
                if at() == "}":
                    i += 1
                    return
                lit(",")
        elif c == "[":
            i += 1
            ws()
            if at() == "]":
                i += 1
                return
            while True:
                value()
                ws()
                if at() == "]":
                    i += 1
                    return
                lit(",")
        elif c == '"':
            string()
        elif c in "tfn":
            lit({"t": "true", "f": "false", "n": "null"}[c])
        else:
            m = re.match(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?", s[i:])
            if not m or not m.group(0):
                raise ValueError("number")
            i += len(m.group(0))
    try:
        ws()
        if at() != "{":
            return False
        value()
        ws()
        return i == len(s)
    except _End:
        return True
    except ValueError:
        return False


def run_json_object():
    res = []
    for seed in range(3):
        st, r = post(chat_body(random.Random(seed), seed, temperature=0.8,
                               response_format={"type": "json_object"}))
        if st != 200:
            res.append((False, "HTTP %d" % st))
            continue
        c = r["choices"][0]
        text = c["message"].get("content") or ""
        if c["finish_reason"] == "stop":
            try:
                ok = isinstance(json.loads(text), dict)
            except ValueError:
                ok = False
        else:
            ok = c["finish_reason"] == "length" and json_prefix(text)
        res.append((ok, "%s %d: %r" % (c["finish_reason"], len(text), text[:200])))
    check(all(ok for ok, _ in res), "response_format json_object: a JSON object (or its "
          "beginning when max_tokens ends it: %s)" % ", ".join(d.split(":")[0] for _, d in res),
          "; ".join(d for _, d in res))


def run_gbnf():
    g = 'root ::= ("yes" | "no") " " num\nnum ::= [1-9] [0-9]{0,2}\n'
    outs = []
    for seed in range(3):
        st, r = post({"prompt": "Say", "grammar": g, "seed": seed, "max_tokens": 20,
                      "temperature": 1.0}, "/v1/completions")
        outs.append(r["choices"][0]["text"] if st == 200 else "HTTP %d" % st)
    check(all(re.fullmatch(r"(yes|no) [1-9][0-9]{0,2}", o) for o in outs),
          "GBNF grammar on /v1/completions: the text is in the grammar's language", str(outs))


def run_errors():
    cases = [
        ({"grammar": "root ::= foo\n"}, "rule 'foo' is not defined"),
        ({"grammar": "root ::= \"a\nb\"\n"}, "line 1, column 10: unterminated literal"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}}}},
         "'/properties/a': 'pattern' is not supported"),
        ({"response_format": {"type": "json_schema"}}, "needs \"json_schema\""),
        ({"response_format": {"type": "yaml"}}, "type 'yaml' is unknown"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
         "'nope', which is not in 'tools'"),
        ({"tool_choice": "required"}, "needs 'tools'"),
    ]
    for extra, want in cases:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        body.update(extra)
        st, r = post(body)
        msg = r.get("error", {}).get("message", "") if isinstance(r, dict) else ""
        check(st == 400 and want in msg, "400 for %s: %s" % (json.dumps(extra)[:60], msg[:90]),
              "HTTP %d %s" % (st, r))


# ---- tool calls ------------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {
            "city": {"type": "string", "enum": ["Paris", "Oslo", "Rome"]},
            "days": {"type": "integer"},
            "unit": {"type": "string", "maxLength": 6},
            "opts": {"type": "object", "properties": {"wind": {"type": "boolean"}},
                     "required": ["wind"], "additionalProperties": False}},
        "required": ["city", "days"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "book_table", "parameters": {
        "type": "object", "properties": {
            "people": {"type": "integer"},
            "names": {"type": "array", "items": {"type": "string", "maxLength": 4},
                      "maxItems": 2},
            "note": {"type": ["string", "null"], "maxLength": 4}},
        "required": ["people"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "ping", "parameters": {
        "type": "object", "properties": {}, "additionalProperties": False}}},
]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def check_calls(calls, only):
    """'' when every call names a tool (only: that one) with valid arguments"""
    if not calls:
        return "no tool_calls"
    for c in calls:
        f = c.get("function", {})
        name = f.get("name")
        if name not in PARAMS or (only and name != only):
            return "call of %r" % name
        if c.get("type") != "function" or not isinstance(c.get("id"), str):
            return "call shape %s" % c
        try:
            args = json.loads(f.get("arguments"))
        except (TypeError, ValueError) as e:
            return "arguments %r: %s" % (f.get("arguments"), e)
        why = valid(PARAMS[name], args)
        if why:
            return "arguments %s of %s: %s" % (f.get("arguments"), name, why)
    return ""


def accumulate(chunks):
    """the tool calls of a stream, as the OpenAI client adds the deltas up"""
    calls, finish, heads_ok = {}, None, True
    for ch in chunks:
        for c in ch.get("choices", []):
            finish = c.get("finish_reason") or finish
            for d in c.get("delta", {}).get("tool_calls") or []:
                i = d["index"]
                if i not in calls:
                    # vLLM's first delta of a call: index, id, type, name
                    heads_ok &= "id" in d and d.get("type") == "function" and \
                        "name" in d.get("function", {})
                    calls[i] = {"id": d.get("id"), "type": d.get("type"),
                                "function": {"name": d["function"].get("name"),
                                             "arguments": ""}}
                calls[i]["function"]["arguments"] += d.get("function", {}).get("arguments", "")
    return [calls[i] for i in sorted(calls)], finish, heads_ok


def tool_case(k):
    rng = random.Random(500 + k)
    tools = rng.sample(TOOLS, rng.randint(1, 3))
    named = rng.random() < 0.5
    only = rng.choice(tools)["function"]["name"] if named else None
    choice = {"type": "function", "function": {"name": only}} if named else "required"
    body = chat_body(rng, rng.randint(0, 1 << 30), tools=tools, tool_choice=choice,
                     messages=[{"role": "user", "content": "Use a tool."}])
    st, r = post(body)
    if st != 200:
        return False, "HTTP %d %s" % (st, r), 0
    c = r["choices"][0]
    why = check_calls(c["message"].get("tool_calls"), only)
    if why or c["finish_reason"] != "tool_calls":
        return False, "%s (finish %s): %s" % (why, c["finish_reason"], c["message"]), 0
    body["stream"] = True
    st, chunks = post(body)
    calls, finish, heads_ok = accumulate(chunks) if st == 200 else ([], None, False)
    frags = sum(1 for ch in chunks for cc in ch.get("choices", [])
                for d in cc.get("delta", {}).get("tool_calls") or []
                if "id" not in d) if st == 200 else 0
    strip = [{"name": x["function"]["name"], "arguments": x["function"]["arguments"]}
             for x in calls]
    want = [{"name": x["function"]["name"], "arguments": x["function"]["arguments"]}
            for x in c["message"]["tool_calls"]]
    if strip != want or finish != "tool_calls" or not heads_ok:
        return False, "stream %s (finish %s, heads %s) != %s" % (strip, finish, heads_ok,
                                                                 want), 0
    return True, "", frags


def run_tools(n):
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        res = list(ex.map(tool_case, range(n)))
    bad = [d for ok, d, _ in res if not ok]
    frags = sum(f for ok, _, f in res if ok)
    check(not bad, "tool_choice required / named: %d random requests: valid calls, "
          "finish_reason tool_calls; streamed heads then %d argument fragments add up to "
          "the same calls" % (n, frags), "; ".join(bad))


if len(sys.argv) > 3 and sys.argv[3] == "tools":  # another template's tool-call format
    run_tools(max(4, N_SCHEMAS // 3))
else:
    run_errors()
    run_gbnf()
    run_json_object()
    run_schemas()
    run_tools(max(4, N_SCHEMAS // 3))
sys.exit(checks.summary("grammar"))
