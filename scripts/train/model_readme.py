#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Write data/models/NAME/README.md from the model's config.json and the
train-log.json train.py wrote (scripts/train/train-models runs it).

usage: model_readme.py MODEL_DIR STEPS SEED
"""
import json
import os
import sys


def main():
    d, steps, seed = sys.argv[1], sys.argv[2], sys.argv[3]
    name = os.path.basename(os.path.normpath(d))
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(d, "train-log.json")) as f:
        log = json.load(f)
    arch = cfg["architectures"][0]
    family = "GLM-5.1" if arch == "GlmMoeDsaForCausalLM" else "GLM-4.5"
    size = os.path.getsize(os.path.join(d, "model.safetensors"))
    last = log["steps"][-1]
    ctx = log["ctx"]
    lines = [
        "# %s: a small %s-architecture model trained by the TX8 project" % (name, family),
        "",
        "`%s` (`model_type` %s), hidden size %d, %d layers (%d dense) + 1 MTP layer, "
        "%d routed experts (top-%d) + %d shared, vocabulary %d; %.1f MB of BF16 safetensors. "
        "Trained on the King James Bible and Tang/Song poems (data/corpus/NOTICE); "
        "docs/trained-models.md describes the corpus, the tokenizer, the training and "
        "the quality figures." % (
            arch, cfg["model_type"], cfg["hidden_size"], cfg["num_hidden_layers"],
            cfg.get("first_k_dense_replace", 0), cfg["n_routed_experts"],
            cfg["num_experts_per_tok"], cfg["n_shared_experts"], cfg["vocab_size"], size / 1e6),
        "",
        "| figure | value |",
        "|---|---|",
        "| training | %s steps of %d x %d tokens, seed %s, %.0f s wall time on one thread (2 shared vCPUs, load ~12-20) |" % (
            steps, log["batch"], ctx, seed, log["train_seconds"]),
        "| training loss (last step; EMA of the last ~50 steps) | %.4f; %.4f |" % (
            last["loss"], log["final_train_loss_ema"]),
        "| MTP next-next-token loss (last step) | %.4f |" % last["mtp_loss"],
        "| held-out perplexity (%d tokens, every position of %d-token chunks, BF16 weights in FP32) | %.3f |" % (
            log["heldout_tokens"], ctx, log["heldout_ppl_ctx%d" % ctx]),
        "| unigram model of the training text (add-one), same held-out tokens | %.3f |" % log["unigram_ppl"],
    ]
    if "indexer_topk_recall" in log:
        lines.append("| DSA indexer: top-%d recall vs full attention (held-out queries past %d keys) | %.4f |" % (
            cfg["index_topk"], cfg["index_topk"], log["indexer_topk_recall"]))
        lines.append("| DSA indexer: attention mass of the keys it selects | %.4f |" % log["indexer_attention_mass"])
    lines += [
        "",
        "Made by (docs/trained-models.md):",
        "",
        "```",
        "scripts/train/train-models    # STEPS=%s SEED=%s: both models" % (steps, seed),
        "```",
        "",
        "which runs `scripts/train/train.py --skeleton build/train/skeleton-%s "
        "--train build/train/corpus/train.txt --test data/corpus/test.txt "
        "--tokenizer-tool build/bin/glm-tokenize --output data/models/%s --steps %s "
        "--seed %s`." % (name.split("-")[0], name, steps, seed),
        "",
        "Licence: the weights derive from public-domain text and the fortunes-zh "
        "compilation (GPL-3.0+), see data/corpus/NOTICE; the tokenizer from the Qwen3 "
        "tokenizer (Apache-2.0, data/tokenizers/qwen3/NOTICE).",
        "",
    ]
    with open(os.path.join(d, "README.md"), "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
