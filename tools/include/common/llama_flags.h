/* SPDX-License-Identifier: MIT */
/*
 * llama.cpp's spellings on the tools' command lines (glm-inference,
 * glm-server): llama.cpp's multi-letter short flags (-ngl, -sys, -cnv, -fa,
 * -ctk, -ctv, -np, -ns, ...) and the flags that mean nothing on a TX8 are
 * sorted out before getopt_long sees argv. docs/llama-cpp-flags.md is the
 * table of every llama.cpp flag and what it does here.
 */
#ifndef TX_TOOLS_LLAMA_FLAGS_H
#define TX_TOOLS_LLAMA_FLAGS_H

#include <getopt.h>

enum txc_llama_kind {
    TXC_LLAMA_ALIAS,       /* the tool's own option under another spelling */
    TXC_LLAMA_NOOP,        /* accepted, noted once on stderr, dropped */
    TXC_LLAMA_QUIET,       /* accepted and dropped without a note (--log-disable) */
    TXC_LLAMA_UNSUPPORTED, /* refused: one line with the reason, exit 2 */
};

enum txc_llama_value {
    TXC_LLAMA_NONE,     /* a switch */
    TXC_LLAMA_REQUIRED, /* takes the next argument (or =VALUE) */
    TXC_LLAMA_OPTIONAL, /* -fa [on|off|auto]: takes the next argument if it is one of
                         * on, off, auto, enabled, disabled, true, false, 1, 0 */
};

struct txc_llama_flag {
    const char *names; /* llama.cpp's spellings, '|'-separated: "-ngl|--n-gpu-layers" */
    enum txc_llama_kind kind;
    enum txc_llama_value value;
    const char *what; /* ALIAS: the tool's long option ("--system"); else why */
};

/*
 * Rewrites argv[1..*argc) in place for getopt_long(optstring, lo): an
 * ALIAS spelling becomes the tool's (with its =VALUE kept), a NOOP or
 * QUIET flag is removed with its value (a NOOP noted once: "prog: note:
 * -ngl: no effect here: REASON"), an UNSUPPORTED flag stops with "prog:
 * FLAG: not supported here: REASON; try --help". Arguments that are the
 * value of an option (as optstring and lo say) and everything after "--"
 * are left alone. Returns -1 to go on (*argc updated) or 2.
 */
int txc_llama_flags(const char *prog, int *argc, char **argv, const char *optstring,
                    const struct option *lo, const struct txc_llama_flag *tab);

/* The flags every tool treats alike (no-ops on a TX8 and the unsupported
 * features), ending with {NULL}; a tool's own table comes first and is
 * searched first. */
extern const struct txc_llama_flag txc_llama_common[];

#endif
