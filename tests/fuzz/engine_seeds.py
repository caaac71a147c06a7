#!/usr/bin/env python3
# Writes the seed corpus of fuzz_engine (tests/fuzz/corpus/engine/): one
# valid job per covered opcode plus a few multi-command and faulting jobs.
# Layout of an input: tests/fuzz/fuzz_engine.c. Run from the repository root.
import os
import struct

HEAP = 0x10000
DATA = HEAP + 0x1000          # first byte after the command buffer
RD, WR, RW = 1, 2, 3
out = "tests/fuzz/corpus/engine"


def hdr(op, size, flags=0):
    return struct.pack("<HHI", op, flags, size)


def fill(dst, n, v=7):
    return hdr(1, 32) + struct.pack("<QQII", dst, n, v, 0)


def copy(dst, src, n):
    return hdr(2, 32) + struct.pack("<QQQ", dst, src, n)


def convert(dst, src, scales, rows, cols, ldd, lds, dd, sd):
    return hdr(3, 56) + struct.pack("<QQQIIIIHHI", dst, src, scales, rows, cols, ldd, lds, dd, sd, 0)


def weight(data, rows, cols, dtype=0, scales=0, group=0):
    return struct.pack("<QQQIIIIHHI", data, scales, 0, rows, cols, 0, group, dtype, 0, 0)


def matmul(y, x, bias, w, T, ldx, ldy, act=0, flags=0):
    body = struct.pack("<QQQ", y, x, bias) + w + struct.pack("<IIIHH", T, ldx, ldy, act, 0)
    return hdr(4, 8 + len(body), flags) + body


def rmsnorm(y, x, g, rows, dim):
    return hdr(5, 56) + struct.pack("<QQQIIIIfI", y, x, g, rows, dim, dim, dim, 1e-5, 0)


def add(y, a, b, n):
    return hdr(10, 48) + struct.pack("<QQQQff", y, a, b, n, 1.0, 1.0)


def swiglu(y, g, u, rows, cols):
    return hdr(9, 56) + struct.pack("<QQQIIIIII", y, g, u, rows, cols, cols, cols, cols, 0)


def embed(out_, ids, table, scales, T, V, D, dtype=0):
    return hdr(11, 64) + struct.pack("<QQQQIIIIHHI", out_, ids, table, scales, T, V, D, D, dtype, 0, 0)


def rope(x, pos, freq, T, H, ldt, ldh, off, rot, mode=0, flags=0, attn_factor=0.0):
    # interface 1.4: flags TX8_ROPE_F_ATTN_FACTOR (1) with attn_factor
    return hdr(7, 64, flags) + struct.pack("<QQQIIIIIIIf", x, pos, freq, T, H, ldt, ldh, off, rot,
                                           mode, attn_factor)


def moe_route(ids, w, logits, bias, counts, T, E, K, ng=0, tkg=0, scaling=1.0, lam=0.0, flags=0):
    # flags: NORM_TOPK 1, LOAD_PENALTY 2, COUNT 4, SOFTMAX 8 (interface 1.4)
    return hdr(12, 80, flags) + struct.pack("<QQQQQIIIIIffI", ids, w, logits, bias, counts, T, E, K,
                                            ng, tkg, scaling, lam, 0)


def job(ranges, cmds, flags=0, blob=None):
    # byte 0: ranges + 9 * (job flag bits: 1 NO_IRQ, 2 BATCH_INVARIANT,
    # 4 an unknown flag; 8: the last 1024 bytes are data at DATA)
    f = flags | (8 if blob is not None else 0)
    b = bytes([len(ranges) + 9 * f])
    for a, s, acc in ranges:
        b += struct.pack("<III", a, s, acc)
    b += b"".join(cmds)
    if blob is not None:
        b += blob.ljust(1024, b"\0")
    return b


# interface 1.6 KV block types
Q8_0, Q4_0 = 16, 17


def nop(flags=0):
    return hdr(0, 8, flags)


def layernorm(y, x, g, beta, rows, dim):
    return hdr(6, 64) + struct.pack("<QQQQIIIIfI", y, x, g, beta, rows, dim, dim, dim, 1e-5, 0)


def attention(out_, q, k, v, sel, T, qh, kvh, qk, vd, kv_len, pos0, sel_k, ldq, ldk, ldv, ldo,
              kv_dtype=0, v_dtype=None, scale=0.25, bf16=False, mask=None):
    # flags: TX8_ATTN_F_V_DTYPE (1) when v_dtype is given, TX8_ATTN_F_BF16
    # (2, interface 1.7) with bf16; mask: (bitmap address, words per token)
    # -- the 1.10 form (120 bytes), else the 1.9 form (104 bytes)
    flags = (0 if v_dtype is None else 1) | (2 if bf16 else 0)
    body = struct.pack("<QQQQQIIIIIIIIIIIIfHH", out_, q, k, v, sel, T, qh, kvh, qk, vd, kv_len,
                       pos0, sel_k, ldq, ldk, ldv, ldo, scale, kv_dtype, v_dtype or 0)
    if mask is not None:
        body += struct.pack("<QII", mask[0], mask[1], 0)
    return hdr(8, 8 + len(body), flags) + body


def weight_sparse(data, index, rows, cols, nnz, dtype=0):
    return struct.pack("<QQQIIIIHHI", data, 0, index, rows, cols, nnz, 0, dtype, 1, 0)


def weight_x(data, rows, cols, rsvd=0):
    # a MOE_FFN table entry: f32 dense, rsvd = the 1.6 expert-cache flags
    return struct.pack("<QQQIIIIHHI", data, 0, 0, rows, cols, 0, 0, 0, 0, rsvd)


def moe_ffn(y, x, ids, w, experts, T, K, NE, D, F, act=0, flags=0):
    return hdr(13, 80, flags) + struct.pack("<QQQQQIIIIIIIHH", y, x, ids, w, experts, T, K, NE, D, F,
                                            D, D, act, 0)


def dsa_index(sel, q, k, w, T, H, dim, kv_len, pos0, K, ldq, ldk, flags=0, mask=None):
    # mask: (bitmap address, words per token) -- the 1.10 form (88 bytes)
    body = struct.pack("<QQQQIIIIIIII", sel, q, k, w, T, H, dim, kv_len, pos0, K, ldq, ldk)
    if mask is not None:
        body += struct.pack("<QII", mask[0], mask[1], 0)
    return hdr(14, 8 + len(body), flags) + body


def sample(out_, logits, probs, rows, V, top_k, temp, top_p, v13=None, flags=0, allow=None):
    # v13: (min_p, repeat, presence, frequency, history, n_history) -- the
    # 1.3 form (104 bytes); None: the 1.2 form (72 bytes)
    # allow: (mask address, words per row) -- the 1.9 form (120 bytes)
    body = struct.pack("<QQQQQIIIIff", out_, logits, probs, 1, 0, rows, V, V, top_k, temp, top_p)
    if v13 is not None or allow is not None:
        body += struct.pack("<ffffQII", *(v13 or (0.0, 0.0, 0.0, 0.0, 0, 0)), 0)
    if allow is not None:
        body += struct.pack("<QII", allow[0], allow[1], 0)
    return hdr(15, 8 + len(body), flags) + body


A, B, C, D = DATA, DATA + 0x4000, DATA + 0x8000, DATA + 0xC000
whole = [(DATA, 0x20000, RW)]
seeds = {
    "fill": job(whole, [fill(A, 1000)]),
    "copy": job(whole, [copy(B, A, 999)]),
    "convert_bf16": job(whole, [convert(B, A, 0, 5, 33, 35, 40, 2, 0)]),
    "convert_quant": job(whole, [convert(B, A, C, 5, 33, 35, 40, 3, 0)]),
    "matmul_f32": job(whole, [matmul(C, A, 0, weight(B, 10, 64), 3, 64, 10)]),
    "matmul_i8_bias": job(whole, [matmul(C, A, D, weight(B, 10, 64, 3, D + 64, 32), 3, 64, 10, 0, 2)]),
    "matmul_bf16_acc": job(whole, [matmul(C, A, 0, weight(B, 8, 32, 2), 2, 32, 8, 0, 1)]),
    # FP8 weights (TX8_DTYPE_F8_E4M3 = 18): 130 x 40 codes, 2 x 1 block scales
    "matmul_fp8": job(whole, [fill(D, 2, 0x3f800000), matmul(C, A, 0, weight(B, 130, 40, 18, D, 128), 2, 40, 130)]),
    "rmsnorm": job(whole, [rmsnorm(B, A, C, 3, 50)]),
    "add": job(whole, [add(C, A, B, 77)]),
    "swiglu": job(whole, [swiglu(C, A, B, 4, 30)]),
    "embed": job(whole, [fill(A, 64, 1), embed(C, A, B, 0, 4, 8, 16)]),
    "embed_i8": job(whole, [fill(A, 64, 2), embed(C, A, B, D, 4, 8, 16, 3)]),
    "chain": job(whole, [fill(A, 4096, 0), add(B, A, A, 1024), rmsnorm(C, B, A, 4, 256),
                         swiglu(D, B, C, 4, 256)]),
    "rope_neox": job(whole, [fill(B, 16, 3), rope(A, B, C, 3, 2, 80, 40, 4, 32)]),
    "rope_attn_factor": job(whole, [fill(B, 16, 5), rope(A, B, C, 3, 2, 80, 40, 4, 32, 1, 1, 1.25)]),
    "route_sigmoid": job(whole, [moe_route(B, C, A, D, D + 512, 4, 16, 4, 4, 2, 2.5, 0.1, 7)]),
    "route_softmax": job(whole, [moe_route(B, C, A, 0, D + 512, 4, 16, 16, 1, 1, 1.0, 0.0, 8 | 4 | 1)]),
    "route_softmax_bias": job(whole, [moe_route(B, C, A, D, 0, 4, 16, 4, 0, 0, 1.0, 0.0, 8)]),
    # exact operand ranges, separate read and write ranges
    "split_ranges": job([(A, 3 * 64 * 4, RD), (B, 10 * 64 * 4, RD), (C, 3 * 10 * 4, WR)],
                        [matmul(C, A, 0, weight(B, 10, 64), 3, 64, 10)]),
    # faults: past the range end, read-only destination, below the heap
    "fault_end": job([(A, 996, WR)], [fill(A, 1000)]),
    "fault_ro": job([(A, 1000, RD)], [fill(A, 1000)]),
    "fault_ctrl": job(whole, [copy(A, 0x100, 64)]),
    "bad_range": job([(0x100, 64, RW)], [fill(A, 64)]),
    "bad_opcode": job(whole, [hdr(99, 8)]),
    "overflow": job(whole, [rmsnorm(B, A, C, 0xFFFFFFFF, 0xFFFFFFFF)]),
    # issue 16: the rest of the opcodes
    "nop": job(whole, [nop(), fill(A, 16)]),
    "nop_flags": job(whole, [nop(1)]),
    "layernorm": job(whole, [layernorm(B, A, C, D, 3, 50)]),
    "attention_f32": job(whole, [attention(D, A, B, C, 0, 2, 4, 2, 16, 16, 8, 6, 0, 16, 16, 16, 16)]),
    "attention_q8_v_f16": job(whole, [attention(D, A, B, C, 0, 2, 4, 2, 32, 32, 8, 6, 0, 32, 32, 32,
                                                32, Q8_0, 1)]),
    "attention_q4_sel": job(whole, [attention(D, B, C, C + 0x800, A, 2, 2, 1, 32, 32, 8, 6, 4, 32,
                                              32, 32, 32, Q4_0)],
                            blob=struct.pack("<8i", 0, 1, 2, -1, 3, 4, 5, 6)),
    "attention_sel_bad": job(whole, [attention(D, B, C, C + 0x800, A, 2, 2, 1, 32, 32, 8, 6, 4, 32,
                                               32, 32, 32, Q4_0)],
                             blob=struct.pack("<8i", 0, 1, 2, 100, 3, 4, 5, 6)),
    "attention_bad_v_dtype": job(whole, [attention(D, A, B, C, 0, 2, 4, 2, 16, 16, 8, 6, 0, 16, 16,
                                                   16, 16, 0, 3)]),
    # interface 1.7: BF16 dot products (even dims), and an odd qk_dim
    "attention_bf16": job(whole, [attention(D, A, B, B, 0, 2, 16, 1, 16, 8, 8, 6, 0, 16, 16, 16, 8,
                                            2, bf16=True)]),
    "attention_bf16_odd": job(whole, [attention(D, A, B, C, 0, 2, 4, 2, 15, 16, 8, 6, 0, 16, 16,
                                                16, 16, 2, bf16=True)]),
    "convert_q8_0": job(whole, [convert(B, A, 0, 3, 64, 64, 64, Q8_0, 0)]),
    "convert_q4_0_f16": job(whole, [convert(B, A, 0, 3, 64, 64, 64, 1, Q4_0)]),
    "convert_q8_0_cols": job(whole, [convert(B, A, 0, 3, 33, 64, 64, Q8_0, 0)]),
    # a block extent whose byte count passes 2^64: (rows - 1) * ld + cols
    # elements = 542551296285575061 Q8_0 blocks, 34 bytes each = 2^64 + 458
    "convert_q8_0_wrap": job(whole, [convert(B, A, 0, 4194611741, 32, 4139034208, 4139034208,
                                             Q8_0, Q8_0)]),
    "matmul_sparse": job(whole, [matmul(C, B + 0x1000, 0, weight_sparse(B, A, 4, 64, 4), 2, 64, 4)],
                         blob=struct.pack("<5I4H", 0, 1, 2, 3, 4, 0, 1, 0, 1)),
    "matmul_batch_invariant": job(whole, [matmul(C, A, 0, weight(B, 10, 64), 3, 64, 10)], flags=2),
    "job_unknown_flag": job(whole, [fill(A, 16)], flags=4),
    "moe_ffn_xcache": job(whole, [moe_ffn(D, C, A + 512, A + 528, A, 2, 2, 2, 16, 8)],
                          blob=(weight_x(B, 8, 16, 1) + weight_x(B + 512, 8, 16) +
                                weight_x(B + 1024, 16, 8) + weight_x(B, 8, 16, 3) +
                                weight_x(B + 512, 8, 16) + weight_x(B + 1024, 16, 8)).ljust(512, b"\0") +
                          struct.pack("<4i4f", 0, 1, 1, -1, 0.5, 0.5, 1.0, 0.0)),
    "moe_ffn_bad_flag": job(whole, [moe_ffn(D, C, A + 512, A + 528, A, 2, 2, 2, 16, 8)],
                            blob=(weight_x(B, 8, 16, 4) + weight_x(B + 512, 8, 16) +
                                  weight_x(B + 1024, 16, 8) + weight_x(B, 8, 16) +
                                  weight_x(B + 512, 8, 16) + weight_x(B + 1024, 16, 8)).ljust(512, b"\0") +
                            struct.pack("<4i4f", 0, 1, 1, -1, 0.5, 0.5, 1.0, 0.0)),
    "dsa_index_f32": job(whole, [dsa_index(D, A, B, C, 2, 2, 16, 8, 6, 4, 16, 16)]),
    "dsa_index_q8_0": job(whole, [dsa_index(D, A, B, C, 2, 2, 32, 8, 6, 4, 32, 32, 1)]),
    "sample_1_3": job(whole, [sample(C, A, D, 2, 100, 10, 0.8, 0.9, (0.05, 1.1, 0.0, 0.0, B, 4))]),
    "sample_1_2": job(whole, [sample(C, A, D, 2, 100, 10, 0.8, 0.9)]),
    "sample_1_9_mask": job(whole, [fill(B, 32, 0x00F0F0F0),
                                   sample(C, A, D, 2, 100, 10, 0.8, 0.9, allow=(B, 4))]),
    "sample_1_9_greedy_mask": job(whole, [fill(B, 32, 0x0000FF00),
                                          sample(C, A, D, 2, 100, 0, 0.0, 1.0, allow=(B, 4))]),
    "sample_1_9_short_ld": job(whole, [sample(C, A, D, 2, 100, 10, 0.8, 0.9, allow=(B, 3))]),
    # 1.10: the key bitmap of ATTENTION / DSA_INDEX (custom attention masks)
    "attention_1_10_mask": job(whole, [fill(D + 0x800, 16, 0x55),
                                       attention(D, A, B, C, 0, 2, 4, 2, 16, 16, 8, 6, 0, 16, 16, 16,
                                                 16, mask=(D + 0x800, 1))]),
    "attention_1_10_sel_mask": job(whole, [fill(D + 0x800, 16, 0x33),
                                           attention(D, B, C, C + 0x800, A, 2, 2, 1, 32, 32, 8, 6, 4,
                                                     32, 32, 32, 32, Q4_0, mask=(D + 0x800, 1))],
                                   blob=struct.pack("<8i", 0, 1, 2, -1, 3, 4, 5, 6)),
    "attention_1_10_short_ld": job(whole, [attention(D, A, B, C, 0, 2, 4, 2, 16, 16, 80, 78, 0, 16,
                                                     16, 16, 16, mask=(D + 0x800, 1))]),
    "attention_1_10_mask_fault": job([(A, 0x3000, RW)],
                                     [attention(A + 0x2000, A, A + 0x800, A + 0x1000, 0, 2, 4, 2, 16,
                                                16, 8, 6, 0, 16, 16, 16, 16,
                                                mask=(A + 0x2ff8, 1))]),
    "dsa_index_1_10_mask": job(whole, [fill(D + 0x800, 16, 0x0F),
                                       dsa_index(D, A, B, C, 2, 2, 16, 8, 6, 4, 16, 16,
                                                 mask=(D + 0x800, 1))]),
}
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
