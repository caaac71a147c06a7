/* SPDX-License-Identifier: MIT */
/*
 * libtx internal: error reporting.
 *
 * tx_error(code, fmt, ...) records a message for tx_last_error() in the
 * calling thread and returns code, so failing paths read
 *     return tx_error(TX_EINVAL, "tx_bo_alloc: size 0");
 * With TX_DEBUG=1 in the environment every message is also printed to
 * stderr as it is recorded.
 */
#ifndef TX_COMMON_ERROR_H
#define TX_COMMON_ERROR_H

#include <tx/tx_device.h>

int tx_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like tx_error, for a message that says all there is to say (a lost
 * device: "device emu:/x.sock: tx8-emu closed the connection ..."): later
 * tx_error calls with the same code that merely wrap it ("forward: %s",
 * tx_last_error()) leave it as it is, so the caller prints one clear line. */
int tx_error_final(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Map an errno value (positive or negative) to a TX_E* code. */
int tx_errno_code(int err);

/* Whether TX_DEBUG is set to something other than "" or "0". */
int tx_debug_enabled(void);

/* Print "libtx: ..." to stderr when TX_DEBUG is enabled. */
void tx_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
