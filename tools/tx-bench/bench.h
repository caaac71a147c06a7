/* SPDX-License-Identifier: MIT */
#ifndef TX_BENCH_H
#define TX_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* Read every byte of buf (64-byte aligned, bytes a multiple of 64), with
 * or without software prefetch. */
uint64_t txb_read_avx512(const void *buf, size_t bytes, int prefetch);

/* Instruction families whose multiply-accumulate throughput peak.c measures. */
enum txb_family {
    TXB_NONE,
    TXB_SCALAR,
    TXB_FMA256,
    TXB_FMA512,
    TXB_VNNI512,
    TXB_BF16,
    /* AMX tiles (only with an amx engine, which got the tile state) */
    TXB_AMX_I8,   /* TDPBSSD, 16 x 16 x 64 = 16384 MACs */
    TXB_AMX_BF16, /* TDPBF16PS, 16 x 16 x 32 = 8192 MACs */
    TXB_FAMILIES
};

struct txb_peak {
    double ipc;             /* instructions retired per cycle, one core */
    unsigned macs_per_insn; /* multiply-accumulates per instruction */
};

/* Core clock in GHz, measured (dependent adds), or 0 when unknown. */
double txb_clock_ghz(void);
/* One family's throughput on this core (the CPU must have it): 0 or -1. */
int txb_peak(enum txb_family f, double ghz, struct txb_peak *out);

/* tx-bench --device SPEC: round-trip rows (roundtrip.c); exit status. */
int txb_roundtrip(const char *spec, unsigned reps, int json);

/* tx-bench --moe: fused vs per-expert MOE_FFN rows (moe.c); exit status. */
int txb_moe(unsigned threads, unsigned reps);

/* tx-bench --attn: tile vs per-token ATTENTION / DSA_INDEX rows (attn.c); exit status. */
int txb_attn(unsigned threads, unsigned reps);

#endif
