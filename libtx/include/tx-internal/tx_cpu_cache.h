/* SPDX-License-Identifier: MIT */
/*
 * libtx internal: the host's last-level cache (LLC), for sizing
 * bandwidth measurements.
 *
 * A streaming-read figure means memory bandwidth only when the working set
 * is much larger than the caches: every bandwidth-bound measurement of the
 * project (tx-bench's GEMV rows and read reference, the read probe of
 * glm-inference --bench) reads at least TX_LLC_FACTOR x the LLC, or
 * refuses to report a bandwidth figure.
 *
 * The LLC is read from sysfs: ROOT/cpuN/cache/indexM/{level,type,size,
 * shared_cpu_list} (ROOT normally /sys/devices/system/cpu). The LLC is the
 * highest level of a Data or Unified cache; its size is the sum over the
 * distinct instances (caches with different shared_cpu_list sets, e.g. one
 * L3 per CCX), since a working set spread over the cores is spread over all
 * of them. An override (a tool's --llc SIZE, or TX_LLC_BYTES in the
 * environment) replaces sysfs.
 *
 * Not part of the public API (not installed, not exported from libtx.so):
 * private to libtx, the tools (tx-bench) and the tests, which find it in
 * libtx/include. Include as <tx-internal/tx_cpu_cache.h>.
 */
#ifndef TX_CPU_CACHE_H
#define TX_CPU_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define TX_LLC_SYSFS_ROOT "/sys/devices/system/cpu"
#define TX_LLC_ENV "TX_LLC_BYTES"
/* minimum working set of a bandwidth measurement, in LLC sizes */
#define TX_LLC_FACTOR 4u
/* largest accepted cache size (sysfs or override): 1 TiB */
#define TX_LLC_MAX (1ull << 40)

struct tx_llc {
    uint64_t bytes;          /* sum over distinct instances; 0: unknown */
    uint64_t instance_bytes; /* largest single instance */
    unsigned level;          /* cache level (3 for an L3); 0: from an override */
    unsigned instances;      /* distinct instances (1 for an override) */
    char source[64];         /* "sysfs", "--llc", "TX_LLC_BYTES" */
    char error[256];         /* when bytes is 0: why the size is unknown */
};

/*
 * Parses a byte count: decimal digits with an optional binary suffix K, M,
 * G or T (also KiB, MiB, ..., KB, ..., case-insensitive; 1K = 1024), as
 * sysfs writes cache sizes ("32768K"). 0 and *out set, or TX_EINVAL (-1) for anything
 * else (empty, junk, overflow past TX_LLC_MAX).
 */
int tx_llc_parse_size(const char *s, uint64_t *out);

/*
 * Reads the LLC from the sysfs tree under root (NULL: TX_LLC_SYSFS_ROOT).
 * 0, or -1 with out->bytes = 0 and out->error naming what was missing or
 * malformed (no CPU cache directories, an index directory without its
 * level/type/size, an LLC without shared_cpu_list / shared_cpu_map, a bad
 * size). Never guesses: a partial tree is an error, since a missing level
 * could hide the real LLC and undersize the working set.
 */
int tx_llc_read_sysfs(const char *root, struct tx_llc *out);

/*
 * The LLC to size measurements with: override (a tool's option value) if
 * not NULL, else $TX_LLC_BYTES if set and non-empty, else sysfs under root
 * (NULL: the real one). 0 (out->bytes > 0), or -1: out->error says why.
 * *bad_override is set to 1 when the failure is a malformed or zero
 * override (a usage error), 0 otherwise (may be NULL).
 */
int tx_llc_resolve(const char *override, const char *root, struct tx_llc *out, int *bad_override);

/* TX_LLC_FACTOR x llc->bytes, or 0 when the LLC is unknown. */
uint64_t tx_llc_min_working_set(const struct tx_llc *llc);

/*
 * Whether a measurement reading ws bytes per pass may report a bandwidth
 * figure: 1 when the LLC is known and ws >= TX_LLC_FACTOR x LLC; else 0
 * with why (if not NULL) saying why not, e.g. "working set 64.0 MiB < 4 x
 * LLC (4 x 32.0 MiB = 128.0 MiB)" or "LLC size unknown: ...".
 */
int tx_llc_check(const struct tx_llc *llc, uint64_t ws, char *why, size_t whysz);

/* One line describing llc, e.g. "32.0 MiB (L3, 1 instance, sysfs)" or
 * "unknown (...)". */
void tx_llc_describe(const struct tx_llc *llc, char *buf, size_t bufsz);

#endif
