/* SPDX-License-Identifier: MIT */
/*
 * Tuna profiling (docs/tuna.md): a timeline of device commands and host
 * spans written as Chrome Trace Event JSON (Perfetto, chrome://tracing).
 *
 * Setting TX_PROFILE=trace.json in the environment of any libtx program
 * turns it on: every job libtx submits to an emu device of interface >= 1.5
 * carries a profiling buffer (TX8_JOB_F_PROFILE), each finished job's
 * per-command records (start/end, cores, bytes, MACs; named with layer and
 * tensor by the GLM runtime) are collected, and the trace is written when
 * the process exits (or by tx_profile_write). Without TX_PROFILE nothing is
 * recorded and jobs carry no buffer.
 *
 * All times are CLOCK_MONOTONIC nanoseconds of the host; device times are
 * mapped to it (docs/hardware.md, "Profiling").
 */
#ifndef TX_PROFILE_H
#define TX_PROFILE_H

#include <stdint.h>

#include <tx/tx_error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when profiling is on ($TX_PROFILE set and non-empty), else 0. */
TX_API int tx_profile_enabled(void);

/* CLOCK_MONOTONIC in ns (the trace's clock). */
TX_API uint64_t tx_profile_now(void);

/* Record a host span [start_ns, end_ns) of the calling thread named name
 * (copied). No-op when profiling is off. */
TX_API void tx_profile_span(const char *name, uint64_t start_ns, uint64_t end_ns);

/* Record a counter sample (a "C" event) at the current time. */
TX_API void tx_profile_counter(const char *name, double value);

/* Write what was recorded so far to path (NULL: $TX_PROFILE) as Trace Event
 * JSON, atomically (a temporary file renamed). TX_OK, TX_EINVAL (no path,
 * profiling off), TX_EIO. */
TX_API int tx_profile_write(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* TX_PROFILE_H */
