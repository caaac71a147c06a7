/* SPDX-License-Identifier: MIT */
/* libtx: error codes, per-thread messages, TX_DEBUG. */
#include <tx-internal/tx_errors.h>
#include "common/settings.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[512];

static const struct tx_setting common_settings[] = {
    {"TX_DEBUG", TX_SETTING_TEXT, "anything but 0", 0, 0, "off", 0, NULL,
     "print every error message as it is recorded, and each component's debug lines "
     "(settings, loads, passes) on stderr"},
};

const struct tx_setting_table tx_settings_common = {"common", "once per process", common_settings,
                                                    1};

static pthread_once_t debug_once = PTHREAD_ONCE_INIT;
static struct tx_setting_val debug_val;
static int debug_on;
static atomic_int debug_printed;

static void debug_init(void)
{
    tx_settings_parse(&tx_settings_common, "libtx", &debug_val);
    debug_on = debug_val.set && strcmp(debug_val.text, "0") != 0;
}

int tx_debug_enabled(void)
{
    pthread_once(&debug_once, debug_init);
    /* the table's line, once (its tx_debug comes back here: printed by then) */
    if (debug_on && !atomic_exchange(&debug_printed, 1))
        tx_settings_print(&tx_settings_common, &debug_val);
    return debug_on;
}

void tx_debug(const char *fmt, ...)
{
    va_list ap;

    if (!tx_debug_enabled())
        return;
    va_start(ap, fmt);
    fputs("libtx: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/*
 * The message is formatted into a local buffer first: callers wrap the
 * previous message ("forward: %s", tx_last_error()), and formatting into
 * last_error while reading from it (overlapping vsnprintf) truncated and
 * garbled the inner message.
 *
 * A final message (tx_error_final: a lost device) is kept as it is when a
 * caller wraps it with the same code: the one line names the device and
 * what happened, without a chain of "generate: forward: wait: ..." around
 * it. Any other error replaces it.
 */
static _Thread_local int last_final;      /* last_error is a final message */
static _Thread_local int last_final_code; /* ... of this code */

static int record(int code, int final, const char *fmt, va_list ap)
{
    char msg[sizeof(last_error)];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (!final && last_final && code == last_final_code && strstr(msg, last_error))
        return code; /* a wrapper of the final message: keep it */
    memcpy(last_error, msg, sizeof(msg));
    last_final = final;
    last_final_code = code;
    if (tx_debug_enabled())
        fprintf(stderr, "libtx: error: %s (%s)\n", last_error, tx_strerror(code));
    return code;
}

int tx_error(int code, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = record(code, 0, fmt, ap);
    va_end(ap);
    return rc;
}

int tx_error_final(int code, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = record(code, 1, fmt, ap);
    va_end(ap);
    return rc;
}

int tx_verrbuf(char *err, size_t errsz, int code, const char *fmt, va_list ap)
{
    char msg[2 * sizeof(last_error)];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (err && errsz)
        snprintf(err, errsz, "%s", msg);
    return tx_error(code, "%s", msg);
}

int tx_errbuf(char *err, size_t errsz, int code, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = tx_verrbuf(err, errsz, code, fmt, ap);
    va_end(ap);
    return rc;
}

TX_API const char *tx_last_error(void)
{
    return last_error;
}

TX_API const char *tx_strerror(int code)
{
    switch (code) {
    case TX_OK:
        return "success";
    case TX_EINVAL:
        return "invalid argument";
    case TX_ENOMEM:
        return "out of host memory";
    case TX_ENOSPC:
        return "out of device memory";
    case TX_ENODEV:
        return "no such device";
    case TX_EBUSY:
        return "device or resource busy";
    case TX_ETIMEDOUT:
        return "timed out";
    case TX_EDEVICE_LOST:
        return "device lost";
    case TX_EIO:
        return "I/O error";
    case TX_ENOTSUP:
        return "not supported";
    case TX_ENOENT:
        return "not found";
    case TX_EPROTO:
        return "protocol error or incompatible device";
    case TX_EJOB:
        return "job failed";
    case TX_EPERM:
        return "permission denied";
    case TX_ECANCELED:
        return "cancelled";
    default:
        return "unknown error";
    }
}

int tx_errno_code(int err)
{
    if (err < 0)
        err = -err;
    switch (err) {
    case 0:
        return TX_OK;
    case EINVAL:
    case EFAULT:
    case EBADF:
    case E2BIG:
    case EOVERFLOW:
        return TX_EINVAL;
    case ENOMEM:
        return TX_ENOMEM;
    case ENOSPC:
        return TX_ENOSPC;
    case ENODEV:
    case ENXIO:
    case ECONNREFUSED:
        return TX_ENODEV;
    case ENOENT:
        return TX_ENOENT;
    case EBUSY:
    case EAGAIN:
        return TX_EBUSY;
    case ETIMEDOUT:
    case ETIME:
        return TX_ETIMEDOUT;
    case EPIPE:
    case ECONNRESET:
    case ESHUTDOWN:
        return TX_EDEVICE_LOST;
    case EOPNOTSUPP:
    case ENOSYS:
    case ENOTTY:
        return TX_ENOTSUP;
    case EPROTO:
        return TX_EPROTO;
    case EPERM:
    case EACCES:
        return TX_EPERM;
    case ECANCELED:
        return TX_ECANCELED;
    default:
        return TX_EIO;
    }
}
