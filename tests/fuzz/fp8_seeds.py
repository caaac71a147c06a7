#!/usr/bin/env python3
# Writes the seed corpus of fuzz_fp8 (tests/fuzz/corpus/fp8/): FP8 block
# checkpoints' config + safetensors pairs, valid (edge blocks, F32 and BF16
# scales, NaN codes) and broken (NaN / negative scale, misshapen scale,
# other quantisation configs). Layout of an input: tests/fuzz/fuzz_fp8.c.
# Run from the repository root.
import json
import os
import struct

out = "tests/fuzz/corpus/fp8"
FP8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
       "weight_block_size": [128, 128]}


def st(tensors):
    """tensors: list of (name, dtype, shape, bytes)"""
    hdr, off, blob = {}, 0, b""
    for name, dt, shape, data in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        blob += data
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + blob


def seed(name, qc, tensors):
    cfg = json.dumps({"hidden_size": 8, "quantization_config": qc} if qc else {}).encode()
    with open(os.path.join(out, name), "wb") as f:
        f.write(struct.pack("<H", len(cfg)) + cfg + st(tensors))


def codes(n, start=0):
    return bytes((start + 37 * i) % 256 for i in range(n))


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


os.makedirs(out, exist_ok=True)
R, C = 130, 260  # edge blocks of 2 rows and 4 columns
seed("valid_edges", FP8, [("w.weight", "F8_E4M3", [R, C], codes(R * C)),
                          ("w.weight_scale_inv", "F32", [2, 3], f32(0.5, 1.0, 2.0, 0.25, 3.0, 0.0))])
seed("valid_bf16_scale", FP8, [("w.weight", "F8_E4M3", [4, 5], codes(20, 1)),
                               ("w.weight_scale_inv", "BF16", [1, 1], struct.pack("<H", 0x3f00))])
seed("nan_scale", FP8, [("w.weight", "F8_E4M3", [4, 5], codes(20)),
                        ("w.weight_scale_inv", "F32", [1, 1], f32(float("nan")))])
seed("negative_scale", FP8, [("w.weight", "F8_E4M3", [4, 5], codes(20)),
                             ("w.weight_scale_inv", "F32", [1, 1], f32(-1.0))])
seed("misshapen_scale", FP8, [("w.weight", "F8_E4M3", [200, 5], codes(1000)),
                              ("w.weight_scale_inv", "F32", [1, 1], f32(1.0))])
seed("scale_of_bf16", FP8, [("w.weight", "BF16", [2, 2], bytes(8)),
                            ("w.weight_scale_inv", "F32", [1, 1], f32(1.0))])
seed("no_quant_config", None, [("w.weight", "F8_E4M3", [2, 2], codes(4)),
                               ("w.weight_scale_inv", "F32", [1, 1], f32(1.0))])
seed("gptq", {"quant_method": "gptq", "bits": 4}, [])
seed("static_act", dict(FP8, activation_scheme="static"), [])
seed("block_64", dict(FP8, weight_block_size=[64, 64]), [])
