#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Build the training corpus of the project's trained models from Debian
packages (sources and licences: data/corpus/NOTICE):

  bible-kjv     the King James Bible (public domain), dumped by `bible`
  fortunes-zh   Tang 300 poems and Song 100 ci (classical Chinese texts;
                the package's compilation is GPL-3.0+)

Deterministic: the same packages give the same files. Every 20th KJV
chapter and every 20th poem (index % 20 == 7) form the held-out test split;
the rest is the training split. Writes OUT/train.txt and OUT/test.txt.

usage: make_corpus.py OUTDIR
"""
import os
import re
import subprocess
import sys

HOLD = 20
HOLD_AT = 7
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def kjv_chapters():
    txt = subprocess.run(["bible", "-l100000", "Ge1:1-Re22:21"], check=True,
                         capture_output=True, text=True).stdout
    chapters, cur = [], None
    for line in txt.split("\n"):
        if not line.strip():
            continue
        m = re.match(r"^\s+\d+ (.*)$", line)
        if m:
            cur[1].append(m.group(1).strip())
        else:
            cur = (line.strip(), [])
            chapters.append(cur)
    return ["%s\n%s\n" % (h, "\n".join(v)) for h, v in chapters]


def poems(path):
    with open(path, encoding="utf-8") as f:
        raw = ANSI.sub("", f.read())
    out = []
    for p in raw.split("\n%\n"):
        lines = [ln.strip() for ln in p.strip().split("\n") if ln.strip() and ln.strip() != "%"]
        if lines:
            out.append("\n".join(lines) + "\n")
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    train, test = [], []
    docs = kjv_chapters()
    if len(docs) != 1189:
        sys.exit("make_corpus: expected 1189 KJV chapters from `bible`, got %d" % len(docs))
    for name in ("tang300", "song100"):
        docs += poems("/usr/share/games/fortunes/" + name)
    for i, d in enumerate(docs):
        (test if i % HOLD == HOLD_AT else train).append(d)
    for name, part in (("train.txt", train), ("test.txt", test)):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write("\n".join(part))
    print("make_corpus: %d documents: %d train (%d bytes), %d test (%d bytes)" %
          (len(docs), len(train), sum(len(d.encode()) for d in train), len(test),
           sum(len(d.encode()) for d in test)))


if __name__ == "__main__":
    main()
