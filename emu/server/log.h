/* SPDX-License-Identifier: MIT */
/* tx8-emu: logging to stderr. */
#ifndef TX8_EMU_LOG_H
#define TX8_EMU_LOG_H

extern int emu_verbose;
extern int emu_quiet; /* 1: emu_log prints nothing either (the fuzz target fuzz_socket) */

/* "tx8-emu[pid]: message" on stderr; emu_debug only with -v. */
void emu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void emu_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
