#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Train one of the project's small GLM models (docs/trained-models.md).

  /usr/bin/python3 scripts/train/train.py --skeleton DIR --train FILE
      --test FILE --tokenizer-tool glm-tokenize --output DIR [--steps N]
      [--seed N] [--threads N]

SKELETON is a checkpoint glm-synth wrote (scripts/train/train-models runs
it): its config.json, tokenizer files and safetensors tensor list are the
real Hugging Face layout the stack reads. This script trains every tensor
of that list, plus the MTP/NextN layer's attention and MoE (the layer
model.layers.{num_hidden_layers}: eh_proj, enorm, hnorm, shared_head.norm
and a full decoder layer), and writes them in BF16 under the same names
(the router correction bias in F32, as the real checkpoints keep it).

The forward pass is the one libtx runs (libtx/arch/glm4_moe.c,
glm_moe_dsa.c, attn_mla.c; libtx/reference/ref_blocks.c):
  GLM-4.5  GQA with q/k/v biases, per-head q/k RMSNorm, partial NeoX RoPE;
  GLM-5.1  MLA (q and kv latents with RMSNorm eps 1e-6, interleaved RoPE on
           the shared rope key) whose keys the DSA lightning indexer picks:
           sum_h w_h relu(q_h . k / sqrt(d)), w = weights_proj(x) / sqrt(H),
           k = LayerNorm(wk x) (eps 1e-6), top index_topk causal keys;
  both     pre-norm layers, dense MLP in the first first_k_dense_replace
           layers, then MoE: sigmoid router + e_score_correction_bias for the
           choice (noaux_tc), weights from the unbiased scores normalised and
           scaled by routed_scaling_factor, plus the shared expert.

Training: next-token cross-entropy + 0.3 x the MTP layer's next-next-token
cross-entropy; the router bias is updated aux-loss-free (DeepSeek-V3: bias
+= 1e-3 sign(mean load - load)); GLM-5.1's indexer is distilled from the
attention (KL from the heads' mean attention distribution, inputs
detached, as DeepSeek-V3.2's warm-up) and, after the first 20% of the
steps, the attention runs over the keys the indexer selects (V3.2's sparse
stage). Deterministic for a seed on one thread (torch.use_deterministic_
algorithms). Writes OUT/model.safetensors, the skeleton's other files,
OUT/train-log.json (losses, held-out perplexity, indexer recall) and
OUT/reference-logits.bin + reference-tokens.txt (FP32 logits of the
BF16-rounded weights over held-out tokens: tests/models compares the
stack's FP32 run with them).
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

MLA_NORM_EPS = 1e-6
INDEXER_NORM_EPS = 1e-6
MTP_WEIGHT = 0.3
BIAS_UPDATE = 1e-3
N_REF_TOKENS = 80


# ---- safetensors --------------------------------------------------------

def read_safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    hdr.pop("__metadata__", None)
    return hdr


def write_safetensors(path, tensors):
    """tensors: list of (name, torch tensor float32, dtype 'BF16'|'F32')"""
    hdr, blobs, off = {}, [], 0
    for name, t, dt in tensors:
        t = t.detach().contiguous()
        if dt == "BF16":
            raw = t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        else:
            raw = t.to(torch.float32).numpy().astype("<f4").tobytes()
        hdr[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hdr["__metadata__"] = {"format": "pt"}
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


# ---- the model ----------------------------------------------------------

def rmsnorm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope_tables(inv_freq, T):
    """cos/sin as libtx computes them: angle = pos * inv_freq in f32, cos in
    double rounded to f32"""
    pos = np.arange(T, dtype=np.float32)[:, None]
    ang = (pos * inv_freq[None, :]).astype(np.float32)
    return (torch.from_numpy(np.cos(ang.astype(np.float64)).astype(np.float32)),
            torch.from_numpy(np.sin(ang.astype(np.float64)).astype(np.float32)))


def apply_rope(x, cos, sin, dim, interleaved):
    """x [..., T, heads, d]: rotate the first dim dims (cos/sin [T, dim/2])"""
    c = cos[:, None, :]
    s = sin[:, None, :]
    r, rest = x[..., :dim], x[..., dim:]
    if interleaved:
        a, b = r[..., 0::2], r[..., 1::2]
        out = torch.stack((a * c - b * s, b * c + a * s), dim=-1).flatten(-2)
    else:
        h = dim // 2
        a, b = r[..., :h], r[..., h:]
        out = torch.cat((a * c - b * s, b * c + a * s), dim=-1)
    return torch.cat((out, rest), dim=-1)


class Model:
    def __init__(self, cfg, names, seed):
        self.cfg = cfg
        self.arch = cfg["architectures"][0]
        self.mla = self.arch == "GlmMoeDsaForCausalLM"
        self.L = cfg["num_hidden_layers"]
        self.H = cfg["hidden_size"]
        self.eps = cfg["rms_norm_eps"]
        dense = cfg.get("first_k_dense_replace", 0)
        self.moe = [l >= dense for l in range(self.L)] + [True]  # the MTP layer: MoE
        theta = cfg.get("rope_theta") or cfg.get("rope_parameters", {}).get("rope_theta", 10000.0)
        if self.mla:
            self.rot = cfg["qk_rope_head_dim"]
        else:
            self.rot = int(cfg["head_dim"] * cfg.get("partial_rotary_factor", 1.0))
        self.inv_freq = np.array([1.0 / math.pow(theta, 2 * i / self.rot)
                                  for i in range(self.rot // 2)], dtype=np.float64).astype(np.float32)
        self.shapes = {n: s for n, s in names.items()}
        self.add_mtp_layer()
        g = torch.Generator().manual_seed(seed)
        self.p = {}
        std = cfg.get("initializer_range", 0.02)
        for n in sorted(self.shapes):
            shape = self.shapes[n]
            if n.endswith("e_score_correction_bias"):
                t = torch.zeros(shape)
            elif len(shape) == 1:
                t = torch.zeros(shape) if n.endswith(".bias") else torch.ones(shape)
            else:
                t = torch.randn(shape, generator=g) * std
                if n.endswith(("o_proj.weight", "down_proj.weight")):
                    t /= math.sqrt(2 * (self.L + 1))
            t.requires_grad_(not n.endswith("e_score_correction_bias"))
            self.p[n] = t

    def add_mtp_layer(self):
        """The MTP layer's decoder-layer tensors: those of the last MoE
        layer, renamed to layer num_hidden_layers (the norms and eh_proj
        glm-synth already lists)"""
        src = "model.layers.%d." % (self.L - 1)
        dst = "model.layers.%d." % self.L
        for n, s in list(self.shapes.items()):
            if n.startswith(src):
                self.shapes[dst + n[len(src):]] = s
        self.shapes[dst + "shared_head.norm.weight"] = [self.H]

    def params(self):
        return [t for n, t in self.p.items() if t.requires_grad]

    def w(self, l, suffix):
        return self.p.get("model.layers.%d.%s" % (l, suffix))

    # -- attention --

    def gqa(self, l, x, cos, sin, T):
        c = self.cfg
        nh, nkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        B = x.shape[0]
        q = F.linear(x, self.w(l, "self_attn.q_proj.weight"), self.w(l, "self_attn.q_proj.bias"))
        k = F.linear(x, self.w(l, "self_attn.k_proj.weight"), self.w(l, "self_attn.k_proj.bias"))
        v = F.linear(x, self.w(l, "self_attn.v_proj.weight"), self.w(l, "self_attn.v_proj.bias"))
        q = q.view(B, T, nh, hd)
        k = k.view(B, T, nkv, hd)
        v = v.view(B, T, nkv, hd)
        if c.get("use_qk_norm"):
            q = rmsnorm(q, self.w(l, "self_attn.q_norm.weight"), self.eps)
            k = rmsnorm(k, self.w(l, "self_attn.k_norm.weight"), self.eps)
        q = apply_rope(q, cos, sin, self.rot, False)
        k = apply_rope(k, cos, sin, self.rot, False)
        rep = nh // nkv
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        s = torch.einsum("bthd,bshd->bhts", q, k) * (hd ** -0.5)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        s = s.masked_fill(~mask, float("-inf"))
        a = torch.softmax(s, dim=-1)
        o = torch.einsum("bhts,bshd->bthd", a, v).reshape(B, T, nh * hd)
        return F.linear(o, self.w(l, "self_attn.o_proj.weight")), None

    def indexer_scores(self, l, x, qa, cos, sin, T):
        c = self.cfg
        inh, ihd = c["index_n_heads"], c["index_head_dim"]
        B = x.shape[0]
        iq = F.linear(qa, self.w(l, "self_attn.indexer.wq_b.weight")).view(B, T, inh, ihd)
        iq = apply_rope(iq, cos, sin, self.rot, c.get("indexer_rope_interleave", True))
        ik = F.linear(x, self.w(l, "self_attn.indexer.wk.weight"))
        ik = F.layer_norm(ik, (ihd,), self.w(l, "self_attn.indexer.k_norm.weight"),
                          self.w(l, "self_attn.indexer.k_norm.bias"), INDEXER_NORM_EPS)
        ik = apply_rope(ik[:, :, None, :], cos, sin, self.rot,
                        c.get("indexer_rope_interleave", True))[:, :, 0, :]
        iw = F.linear(x, self.w(l, "self_attn.indexer.weights_proj.weight")) * (inh ** -0.5)
        d = torch.relu(torch.einsum("bthd,bsd->bths", iq, ik) * (ihd ** -0.5))
        return torch.einsum("bths,bth->bts", d, iw)

    def mla_attn(self, l, x, cos, sin, T, st):
        c = self.cfg
        nh, nope, rope, vd = (c["num_attention_heads"], c["qk_nope_head_dim"],
                              c["qk_rope_head_dim"], c["v_head_dim"])
        kvr, K = c["kv_lora_rank"], c["index_topk"]
        B = x.shape[0]
        qa = rmsnorm(F.linear(x, self.w(l, "self_attn.q_a_proj.weight")),
                     self.w(l, "self_attn.q_a_layernorm.weight"), MLA_NORM_EPS)
        q = F.linear(qa, self.w(l, "self_attn.q_b_proj.weight")).view(B, T, nh, nope + rope)
        kva = F.linear(x, self.w(l, "self_attn.kv_a_proj_with_mqa.weight"))
        lat = rmsnorm(kva[..., :kvr], self.w(l, "self_attn.kv_a_layernorm.weight"), MLA_NORM_EPS)
        kr = apply_rope(kva[..., None, kvr:], cos, sin, rope, c.get("rope_interleave", True))
        kvb = F.linear(lat, self.w(l, "self_attn.kv_b_proj.weight")).view(B, T, nh, nope + vd)
        qn, qr = q[..., :nope], apply_rope(q[..., nope:], cos, sin, rope,
                                            c.get("rope_interleave", True))
        kn, v = kvb[..., :nope], kvb[..., nope:]
        s = (torch.einsum("bthd,bshd->bhts", qn, kn) +
             torch.einsum("bthd,bsd->bhts", qr, kr[:, :, 0, :])) * ((nope + rope) ** -0.5)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        s = s.masked_fill(~causal, float("-inf"))
        # the DSA indexer: its own inputs detached (trained by distillation only)
        isc = self.indexer_scores(l, x.detach(), qa.detach(), cos, sin, T)
        isc_m = isc.masked_fill(~causal, float("-inf"))
        mask = causal
        if T > K:
            top = isc_m.detach().topk(K, dim=-1).indices
            sel = torch.zeros(B, T, T, dtype=torch.bool).scatter_(-1, top, True)
            sel = sel | (torch.arange(T)[:, None] < K)  # rows with <= K causal keys: all
            sel = sel & causal
        else:
            sel = causal.expand(B, T, T)
        dense_p = torch.softmax(s, dim=-1)
        aux = {}
        if st is not None:
            # distillation: KL(mean-over-heads attention || softmax(indexer scores))
            tgt = dense_p.detach().mean(1)
            logq = torch.log_softmax(isc_m, dim=-1)
            kl = (tgt * (torch.log(tgt.clamp_min(1e-30)) - logq)).masked_fill(~causal, 0.0)
            aux["kl"] = kl.sum(-1).mean()
            aux["sel"] = sel
            aux["dense_p"] = dense_p.detach()
        if st is None or st.get("sparse", True):
            a = torch.softmax(s.masked_fill(~sel[:, None, :, :], float("-inf")), dim=-1)
        else:
            a = dense_p
        o = torch.einsum("bhts,bshd->bthd", a, v).reshape(B, T, nh * vd)
        return F.linear(o, self.w(l, "self_attn.o_proj.weight"),
                        self.w(l, "self_attn.o_proj.bias")), aux

    # -- MLP / MoE --

    @staticmethod
    def swiglu(x, g, u, d):
        return F.linear(F.silu(F.linear(x, g)) * F.linear(x, u), d)

    def mlp(self, l, x, st):
        if not self.moe[l]:
            return self.swiglu(x, self.w(l, "mlp.gate_proj.weight"), self.w(l, "mlp.up_proj.weight"),
                               self.w(l, "mlp.down_proj.weight"))
        c = self.cfg
        E, K = c["n_routed_experts"], c["num_experts_per_tok"]
        shp = x.shape
        xf = x.reshape(-1, shp[-1])
        logits = F.linear(xf, self.w(l, "mlp.gate.weight"))
        s = torch.sigmoid(logits)
        bias = self.w(l, "mlp.gate.e_score_correction_bias")
        # n_group 1 / topk_group 1: the group limit keeps every expert
        assert c.get("n_group", 1) == 1
        idx = (s.detach() + bias).topk(K, dim=-1).indices
        wts = s.gather(-1, idx)
        if c.get("norm_topk_prob", True):
            wts = wts / (wts.sum(-1, keepdim=True) + 1e-20)
        wts = wts * c["routed_scaling_factor"]
        y = torch.zeros_like(xf)
        for e in range(E):
            hit = idx == e
            rows = hit.any(-1).nonzero(as_tuple=True)[0]
            if rows.numel() == 0:
                continue
            we = (wts * hit).sum(-1)[rows]
            ye = self.swiglu(xf[rows], self.w(l, "mlp.experts.%d.gate_proj.weight" % e),
                             self.w(l, "mlp.experts.%d.up_proj.weight" % e),
                             self.w(l, "mlp.experts.%d.down_proj.weight" % e))
            y = y.index_add(0, rows, ye * we[:, None])
        y = y + self.swiglu(xf, self.w(l, "mlp.shared_experts.gate_proj.weight"),
                            self.w(l, "mlp.shared_experts.up_proj.weight"),
                            self.w(l, "mlp.shared_experts.down_proj.weight"))
        if st is not None:
            st.setdefault("load", {})[l] = torch.bincount(idx.flatten(), minlength=E)
        return y.view(shp)

    def layer(self, l, h, cos, sin, T, st):
        x = rmsnorm(h, self.w(l, "input_layernorm.weight"), self.eps)
        if self.mla:
            a, aux = self.mla_attn(l, x, cos, sin, T, st)
        else:
            a, aux = self.gqa(l, x, cos, sin, T)
        if st is not None and aux:
            st.setdefault("attn", {})[l] = aux
        h = h + a
        x = rmsnorm(h, self.w(l, "post_attention_layernorm.weight"), self.eps)
        return h + self.mlp(l, x, st)

    def forward(self, ids, st=None, mtp_ids=None):
        """ids [B, T] -> logits [B, T, V]; with mtp_ids (the next tokens,
        [B, T]) also the MTP layer's logits"""
        T = ids.shape[1]
        cos, sin = rope_tables(self.inv_freq, T)
        emb = self.p["model.embed_tokens.weight"]
        h = F.embedding(ids, emb)
        for l in range(self.L):
            h = self.layer(l, h, cos, sin, T, st)
        head = self.p["lm_head.weight"]
        logits = F.linear(rmsnorm(h, self.p["model.norm.weight"], self.eps), head)
        if mtp_ids is None:
            return logits, None
        m = self.L
        e = rmsnorm(F.embedding(mtp_ids, emb), self.w(m, "enorm.weight"), self.eps)
        hh = rmsnorm(h, self.w(m, "hnorm.weight"), self.eps)
        x = F.linear(torch.cat((e, hh), dim=-1), self.w(m, "eh_proj.weight"))
        x = self.layer(m, x, cos, sin, T, st)
        mlog = F.linear(rmsnorm(x, self.w(m, "shared_head.norm.weight"), self.eps), head)
        return logits, mlog


# ---- data ---------------------------------------------------------------

def tokenize(tool, tok_json, path):
    with open(path, "rb") as f:
        out = subprocess.run([tool, "--tokenizer", tok_json, "--no-special"], stdin=f,
                             check=True, capture_output=True).stdout
    return np.array([int(x) for x in out.decode().replace("\n", ",").split(",") if x.strip()],
                    dtype=np.int64)


def evaluate(model, ids, T, max_chunks=None):
    """mean NLL over non-overlapping chunks of T tokens (every position)"""
    nll, n = 0.0, 0
    chunks = len(ids) // T
    if max_chunks:
        chunks = min(chunks, max_chunks)
    with torch.no_grad():
        for i in range(chunks):
            x = torch.from_numpy(ids[i * T:(i + 1) * T])[None]
            lg, _ = model.forward(x[:, :-1])
            nll += F.cross_entropy(lg[0], x[0, 1:], reduction="sum").item()
            n += T - 1
    return nll / max(n, 1)


def indexer_recall(model, ids, T, chunks):
    """mean over layers, held-out queries with more than index_topk causal
    keys: |indexer top-k ∩ full-attention top-k| / k (full attention: the
    heads' mean probability), with dense attention"""
    K = model.cfg["index_topk"]
    hits, tot, mass = 0.0, 0, 0.0
    with torch.no_grad():
        for i in range(chunks):
            x = torch.from_numpy(ids[i * T:(i + 1) * T])[None]
            st = {"sparse": True}
            model.forward(x, st)
            for l, aux in st["attn"].items():
                p = aux["dense_p"].mean(1)[0]  # [T, T]
                sel = aux["sel"][0]
                for t in range(K, T):
                    top = set(p[t, :t + 1].topk(K).indices.tolist())
                    chosen = set(sel[t, :t + 1].nonzero().flatten().tolist())
                    hits += len(top & chosen) / K
                    mass += p[t][sel[t]].sum().item()
                    tot += 1
    return hits / max(tot, 1), mass / max(tot, 1)


# ---- main ---------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skeleton", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--tokenizer-tool", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bench", type=int, default=0, help="time N steps and exit")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    with open(os.path.join(a.skeleton, "config.json")) as f:
        cfg = json.load(f)
    hdr = read_safetensors_header(os.path.join(a.skeleton, "model.safetensors"))
    names = {n: v["shape"] for n, v in hdr.items()}
    dtypes = {n: v["dtype"] for n, v in hdr.items()}
    model = Model(cfg, names, a.seed)
    for n in model.p:  # the MTP layer's router bias: F32 as the others
        if n.endswith("e_score_correction_bias"):
            dtypes[n] = "F32"
    tok_json = os.path.join(a.skeleton, "tokenizer.json")
    t0 = time.time()
    train_ids = tokenize(a.tokenizer_tool, tok_json, a.train)
    test_ids = tokenize(a.tokenizer_tool, tok_json, a.test)
    print("tokens: train %d, test %d (%.1fs)" % (len(train_ids), len(test_ids), time.time() - t0),
          flush=True)
    V = cfg["vocab_size"]
    # the unigram model of the training text (add-one smoothing over the vocabulary)
    cnt = np.bincount(train_ids, minlength=V).astype(np.float64) + 1.0
    uni_nll = -np.mean(np.log(cnt[test_ids[1:]] / cnt.sum()))
    opt = torch.optim.AdamW(model.params(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    rng = np.random.RandomState(a.seed)
    T, B = a.ctx, a.batch
    warm = max(1, a.steps // 20)
    sparse_from = a.steps // 5
    log = {"steps": [], "seed": a.seed, "batch": B, "ctx": T, "lr": a.lr}
    t0 = time.time()
    steps = a.bench or a.steps
    ema = None
    for step in range(steps):
        lr = a.lr * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = rng.randint(0, len(train_ids) - T - 2, size=B)
        win = torch.from_numpy(np.stack([train_ids[s:s + T + 2] for s in starts]))
        st = {"sparse": step >= sparse_from}
        logits, mlog = model.forward(win[:, :T], st, mtp_ids=win[:, 1:T + 1])
        loss_main = F.cross_entropy(logits.reshape(-1, V), win[:, 1:T + 1].reshape(-1))
        loss_mtp = F.cross_entropy(mlog.reshape(-1, V), win[:, 2:T + 2].reshape(-1))
        loss = loss_main + MTP_WEIGHT * loss_mtp
        kl = None
        if model.mla:
            kl = sum(aux["kl"] for aux in st["attn"].values()) / len(st["attn"])
            loss = loss + kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.params(), 1.0)
        opt.step()
        with torch.no_grad():  # aux-loss-free balancing
            for l, load in st["load"].items():
                lf = load.float()
                model.w(l, "mlp.gate.e_score_correction_bias").add_(
                    BIAS_UPDATE * torch.sign(lf.mean() - lf))
        ema = loss_main.item() if ema is None else 0.98 * ema + 0.02 * loss_main.item()
        if step % 50 == 0 or step == steps - 1:
            e = {"step": step, "loss": round(loss_main.item(), 4), "mtp_loss": round(loss_mtp.item(), 4),
                 "indexer_kl": round(kl.item(), 4) if kl is not None else None,
                 "lr": round(lr, 6), "elapsed_s": round(time.time() - t0, 1)}
            log["steps"].append(e)
            print(json.dumps(e), flush=True)
    if a.bench:
        print("bench: %.3f s/step" % ((time.time() - t0) / a.bench))
        return
    log["train_seconds"] = round(time.time() - t0, 1)
    log["final_train_loss_ema"] = round(ema, 4)
    # round to BF16 as stored; everything below uses the stored weights
    with torch.no_grad():
        for n, t in model.p.items():
            if dtypes.get(n, "BF16") == "BF16":
                t.copy_(t.to(torch.bfloat16).to(torch.float32))
    nll = evaluate(model, test_ids, T)
    log["heldout_tokens"] = int(len(test_ids))
    log["heldout_ppl_ctx%d" % T] = round(math.exp(nll), 3)
    log["unigram_ppl"] = round(float(math.exp(uni_nll)), 3)
    if model.mla:
        r, m = indexer_recall(model, test_ids, T, 8)
        log["indexer_topk_recall"] = round(r, 4)
        log["indexer_attention_mass"] = round(m, 4)
    os.makedirs(a.output, exist_ok=True)
    for f in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.skeleton, f), os.path.join(a.output, f))
    out = [(n, model.p[n], dtypes.get(n, "BF16")) for n in sorted(model.p)]
    write_safetensors(os.path.join(a.output, "model.safetensors"), out)
    # reference logits of the stored weights over the first held-out tokens
    ref = test_ids[:N_REF_TOKENS]
    with torch.no_grad():
        lg, _ = model.forward(torch.from_numpy(ref)[None])
    lg[0].numpy().astype("<f4").tofile(os.path.join(a.output, "reference-logits.bin"))
    with open(os.path.join(a.output, "reference-tokens.txt"), "w") as f:
        f.write(",".join(str(int(x)) for x in ref) + "\n")
    with open(os.path.join(a.output, "train-log.json"), "w") as f:
        json.dump(log, f, indent=1)
        f.write("\n")
    print(json.dumps({k: v for k, v in log.items() if k != "steps"}), flush=True)


if __name__ == "__main__":
    main()
