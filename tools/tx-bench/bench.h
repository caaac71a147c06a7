/* SPDX-License-Identifier: MIT */
#ifndef TX_BENCH_H
#define TX_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* Read every byte of buf (64-byte aligned, bytes a multiple of 64), with
 * or without software prefetch. */
uint64_t txb_read_avx512(const void *buf, size_t bytes, int prefetch);

/* tx-bench --device SPEC: round-trip rows (roundtrip.c); exit status. */
int txb_roundtrip(const char *spec, unsigned reps, int json);

#endif
