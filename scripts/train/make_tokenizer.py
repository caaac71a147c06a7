#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Cut the Qwen3 byte-level BPE the project ships (data/tokenizers/qwen3)
to its 256 byte tokens and first N merges: a valid tokenizer.json with the
same normalizer, pre-tokenizer and decoder, ids 0 .. 255+N, and no added
tokens (glm-synth adds GLM's special tokens after them). Qwen3's merge i
makes token 256 + i, so the cut vocabulary is closed under its merges;
the script checks it.

usage: make_tokenizer.py SRC_TOKENIZER_JSON N_MERGES OUTDIR
"""
import json
import os
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: make_tokenizer.py SRC_TOKENIZER_JSON N_MERGES OUTDIR")
    src, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(src, encoding="utf-8") as f:
        t = json.load(f)
    m = t["model"]
    keep = 256 + n
    vocab = {s: i for s, i in m["vocab"].items() if i < keep}
    if sorted(vocab.values()) != list(range(keep)):
        sys.exit("make_tokenizer: ids 0..%d are not all in the source vocabulary" % (keep - 1))
    merges = m["merges"][:n]
    for i, mg in enumerate(merges):
        a, b = mg if isinstance(mg, list) else mg.split(" ", 1)
        if a not in vocab or b not in vocab or vocab.get(a + b) != 256 + i:
            sys.exit("make_tokenizer: merge %d (%r %r) does not make token %d" % (i, a, b, 256 + i))
    m["vocab"] = vocab
    m["merges"] = merges
    t["added_tokens"] = []
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(t, f, ensure_ascii=False, indent=1)
        f.write("\n")
    # tokenizer_config.json: glm-synth fills in the special tokens and template
    cfg = {"clean_up_tokenization_spaces": False, "model_max_length": 4096,
           "tokenizer_class": "PreTrainedTokenizerFast", "added_tokens_decoder": {},
           "additional_special_tokens": []}
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    print("make_tokenizer: %d tokens (%d merges) -> %s" % (keep, n, out))


if __name__ == "__main__":
    main()
