/* SPDX-License-Identifier: MIT */
/*
 * libtx internal: helpers shared by the command-line tools (tools/NAME/).
 *
 * Not part of the public API (no export; the tools link libtx.a, where
 * hidden symbols link like any other). Include as "common/cli.h".
 */
#ifndef TX_COMMON_CLI_H
#define TX_COMMON_CLI_H

#include <stddef.h>
#include <stdio.h>

/* Reads all of in into a malloc'd buffer, NUL-terminated (the NUL is not
 * counted in *len; len may be NULL). 0, -ENOMEM or -EIO. */
int txc_read_stream(FILE *in, char **out, size_t *len);

/* Opens path and reads it whole like txc_read_stream. 0 or -errno. */
int txc_read_path(const char *path, char **out, size_t *len);

/* Writes txt to stdout for "-", else to path all or nothing (a temporary
 * name next to it, renamed over path once complete). 0 or -errno. */
int txc_write_text(const char *path, const char *txt);

/* Parses the whole of s as a decimal integer in [lo, hi]. 0, or -1 (and
 * *out untouched) for anything else. */
int txc_parse_long(const char *s, long lo, long hi, long *out);

/* The end of a getopt_long switch: for 'h' (--help) prints usage on stdout
 * and returns 0, for anything else ('?': getopt_long has named the bad
 * option) prints usage on stderr and returns 2. main returns the result. */
int txc_help_or_usage(int opt, void (*usage)(FILE *));

/* Prints "prog: " and the message on stderr, then usage(stderr); returns 2,
 * the exit status of a usage error. */
int txc_usage_error(const char *prog, void (*usage)(FILE *), const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
