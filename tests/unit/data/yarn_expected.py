#!/usr/bin/env python3
# Expected values of test_rope_scaling.c (YaRN inv_freq, attention factor,
# DeepSeek-V3 softmax-scale multiplier), derived here independently of the C
# code from the formulas of transformers' _compute_yarn_parameters and
# DeepseekV3Attention (docs/model-blocks.md). Plain python3, no numpy.
#
#   python3 tests/unit/data/yarn_expected.py
#
# prints, per case, inv_freq in double precision rounded once to float32
# (what libtx computes) as C hex floats, and the largest relative distance
# to torch's float32 pipeline (emulated by rounding after every operation).
import math
import struct


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def mscale_of(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def corr_range(bf, bs, dim, base, orig, truncate):
    def cd(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))
    lo, hi = cd(bf), cd(bs)
    if truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    return max(lo, 0), min(hi, dim - 1)


def yarn(base, dim, factor, orig, bf=32, bs=1, truncate=True):
    lo, hi = corr_range(bf, bs, dim, base, orig, truncate)
    if lo == hi:
        hi += 0.001
    out, torch_like = [], []
    for i in range(dim // 2):
        pf = base ** (2 * i / dim)
        ramp = min(max((i - lo) / (hi - lo), 0.0), 1.0)
        ef = 1 - ramp
        out.append(f32((1 / (factor * pf)) * (1 - ef) + (1 / pf) * ef))
        # torch: float32 tensors, each op rounded
        pf32 = f32(base ** f32(f32(2 * i) / dim))
        ex, it = f32(1 / pf32), f32(1 / f32(factor * pf32))
        r32 = f32(min(max(f32(f32(i - lo) / f32(hi - lo)), 0.0), 1.0))
        ef32 = f32(1 - r32)
        torch_like.append(f32(f32(it * f32(1 - ef32)) + f32(ex * ef32)))
    dist = max(abs(a - b) / a for a, b in zip(out, torch_like))
    return lo, hi, out, dist


def chex(v):
    m, e = float.hex(v).split("p")
    m = m.rstrip("0").rstrip(".") if "." in m else m
    return m + "p" + e + "f"


def show(name, base, dim, factor, orig, **kw):
    lo, hi, inv, dist = yarn(base, dim, factor, orig, **kw)
    print(f"/* {name}: low {lo} high {hi}; max rel. distance to torch f32: {dist:.3g} */")
    for i in range(0, len(inv), 4):
        print("    " + ", ".join(chex(v) for v in inv[i:i + 4]) + ",")


# DeepSeek-V3 config.json: qk_rope_head_dim 64, rope_theta 10000, factor 40,
# original 4096, betas 32 / 1, mscale = mscale_all_dim = 1
show("deepseek_v3", 10000.0, 64, 40.0, 4096)
print("attention_factor deepseek_v3 = %r" % (mscale_of(40, 1.0) / mscale_of(40, 1.0)))
print("softmax_mult deepseek_v3 = %r (%s)" % (mscale_of(40, 1.0) ** 2,
                                            float.hex(mscale_of(40, 1.0) ** 2)))
# no mscale fields, truncate false, factor 4, original 2048, rotary dim 16
show("untruncated", 50000.0, 16, 4.0, 2048, truncate=False)
print("attention_factor untruncated = %r (%s)" % (mscale_of(4.0), float.hex(mscale_of(4.0))))
# mscale 0.707, mscale_all_dim 1 (a YaRN with a cos/sin factor != 1)
a = mscale_of(40, 0.707) / mscale_of(40, 1.0)
print("attention_factor mscale_0.707 = %r (%s)" % (a, float.hex(a)))
