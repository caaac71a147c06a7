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

#include <stdarg.h>
#include <stddef.h>

#include <tx/tx_error.h>

int tx_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A lookup's "none" (no such name, index, digit or format): -1, not a
 * status. A status is TX_OK or a TX_E* code (tx/tx_error.h), never a bare
 * -1 -- which is TX_EINVAL's value; tests/check-errors rejects returning a
 * literal -1, and -errno, outside the system-call wrappers (common/file.c,
 * device/backend_accel.c). */
#define TX_NONE (-1)

/* Like tx_error, for a message that says all there is to say (a lost
 * device: "device emu:/x.sock: tx8-emu closed the connection ..."): later
 * tx_error calls with the same code that merely wrap it ("forward: %s",
 * tx_last_error()) leave it as it is, so the caller prints one clear line. */
int tx_error_final(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The one message-buffer helper of libtx: formats the message (through a
 * local buffer, so err itself may be an argument), copies it into err
 * (if err is not NULL and errsz > 0), records it for tx_last_error() like
 * tx_error, and returns code. For the functions with an (err, errsz)
 * parameter:
 *     return tx_errbuf(err, errsz, TX_ENOENT, "%s: %s", path, strerror(e));
 * txm_err (libtx/model) is this function (a macro, until phase 2 of
 * issue 10 renames its callers).
 */
int tx_errbuf(char *err, size_t errsz, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int tx_verrbuf(char *err, size_t errsz, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* The one errno -> TX_E* mapping of libtx: an errno value (positive or
 * negative) to the nearest code (ENOENT -> TX_ENOENT, EACCES/EPERM ->
 * TX_EPERM, EPIPE/ECONNRESET -> TX_EDEVICE_LOST, unknown -> TX_EIO). */
int tx_errno_code(int err);

/* Whether TX_DEBUG is set to something other than "" or "0". */
int tx_debug_enabled(void);

/* Print "libtx: ..." to stderr when TX_DEBUG is enabled. */
void tx_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
