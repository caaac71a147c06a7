/* SPDX-License-Identifier: MIT */
/*
 * The tools' library (libtx-tools.a, tools/lib/): helpers shared by the
 * command-line tools (tools/NAME/). Not part of the SDK, never installed.
 * Include as "common/cli.h" (the tools get -Itools/include; the name is
 * the one it had in libtx/common, kept until phase 2 of issue 10 renames
 * it in glm-inference and glm-synth).
 */
#ifndef TX_COMMON_CLI_H
#define TX_COMMON_CLI_H

#include <stddef.h>
#include <stdio.h>

#include <tx/tx_error.h>

/* Reads all of in into a malloc'd buffer, NUL-terminated (the NUL is not
 * counted in *len; len may be NULL). 0, TX_ENOMEM or TX_EIO. */
int txc_read_stream(FILE *in, char **out, size_t *len);

/* Opens path and reads it whole like txc_read_stream. 0 or a TX_E* code
 * (a missing file: TX_ENOENT); tx_last_error() names path and the reason. */
int txc_read_path(const char *path, char **out, size_t *len);

/* Writes txt to stdout for "-", else to path all or nothing (a temporary
 * name next to it, renamed over path once complete). 0 or a TX_E* code;
 * tx_last_error() names path and the reason. */
int txc_write_text(const char *path, const char *txt);

/* Parses the whole of s as a decimal integer in [lo, hi]. 0, or -1 (and
 * *out untouched) for anything else. */
int txc_parse_long(const char *s, long lo, long hi, long *out);

/*
 * Option values (every tool): parse the whole of s, or print one line
 * naming the option and its accepted range, as llama.cpp does,
 *     glm-inference: --temp: 'nan' is not a number in [0, 100]
 *     glm-inference: -n: '-5' is not an integer in [-1, 2147483647] (-1 = ...)
 * and return -1 (*out untouched); 0 on success. note (may be NULL) is
 * appended in parentheses. Integers: decimal, no wrap-around (4294967297
 * is out of the range of an int option, not 1). Numbers: finite decimal
 * values only (no nan, inf or hex floats); open (TXC_LO_OPEN, TXC_HI_OPEN)
 * excludes a bound ("(0, 1]", "[0, 1)").
 */
int txc_opt_long(const char *prog, const char *opt, const char *s, long long lo, long long hi,
                 const char *note, long long *out);
int txc_opt_int(const char *prog, const char *opt, const char *s, int lo, int hi, const char *note,
                int *out);
int txc_opt_u64(const char *prog, const char *opt, const char *s, unsigned long long *out);
#define TXC_LO_OPEN 1 /* (lo, ... */
#define TXC_HI_OPEN 2 /* ..., hi) */
int txc_opt_double(const char *prog, const char *opt, const char *s, double lo, double hi, int open,
                   double *out);
int txc_opt_float(const char *prog, const char *opt, const char *s, double lo, double hi, int open,
                  float *out);

/* --verify PACKAGE.smd (glm-inference, glm-export): opens the package and
 * checks every checksum (header, sections, each tensor's data, scales and
 * sparse index; INT8 scales finite and >= 0), without a device. Prints
 * "prog: PATH: N tensors, X MiB: every checksum matches (T ms)" on stderr,
 * or the first mismatch naming the tensor. Returns the exit status, 0 or 1. */
int txc_verify_package(const char *prog, const char *path); /* in libtx/model/verify_package.c */

/*
 * getopt_long with the tools' errors: an unknown option, a missing value or
 * a value given to a switch prints one line naming it, "prog: unknown option
 * '--x'; try --help", and returns '?' (then exit 2). opterr is set to 0.
 * --version, unless the tool has its own, prints the version and returns
 * TXC_OPT_VERSION (then exit 0).
 */
struct option;
int txc_getopt(const char *prog, int argc, char **argv, const char *optstring,
               const struct option *lo);

/* A sampling seed from the OS (getrandom), in [0, 2^63): the default of
 * --seed -1 (tools/lib/random_seed.c). */
unsigned long long txc_random_seed(void);

/* --version: "prog 2.6.0 (git commit abc123, TX8 hardware interface 1.7)"
 * on stdout (tools/lib/version.c); txc_getopt prints it for --version. */
void txc_print_version(const char *prog);
const char *txc_git_commit(void); /* the commit the tools were built from */
const char *txc_version(void);    /* the release (libtx's version) */
/* what txc_getopt returns after printing the version */
#define TXC_OPT_VERSION 0x7fff0001

/* The end of a txc_getopt switch: for 'h' (--help) prints usage on stdout
 * and returns 0, for TXC_OPT_VERSION returns 0; for anything else ('?': txc_getopt has named the
 * bad option) returns 2. main returns the result. */
int txc_help_or_usage(int opt, void (*usage)(FILE *));

/* Prints "prog: MESSAGE; try --help" on stderr (one line; usage is not
 * printed, so the message stays on the screen) and returns 2, the exit
 * status of a usage error. */
int txc_usage_error(const char *prog, void (*usage)(FILE *), const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
