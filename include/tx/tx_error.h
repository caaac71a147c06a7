/* SPDX-License-Identifier: MIT */
/*
 * libtx: the one error convention of the SDK.
 *
 * Every public libtx function that can fail returns TX_OK (0) or one of
 * the negative codes below -- never -errno (the values differ: -ENOENT is
 * -2, which is TX_ENOMEM here). Operating-system errors are mapped once,
 * inside libtx, to the nearest code (ENOENT -> TX_ENOENT "not found",
 * EACCES -> TX_EPERM, ...). On failure the calling thread's message
 * (tx_last_error()) names what went wrong; functions that take an
 * (err, errsz) buffer write the same message there.
 *
 * The numeric values are ABI (libtx.so.2): they never change, new codes
 * get new numbers. This header includes nothing else.
 */
#ifndef TX_ERROR_H
#define TX_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* The mark of the exported functions, defined here once for every SDK
 * header (each includes this one) */
#ifndef TX_API
#define TX_API __attribute__((visibility("default")))
#endif

enum tx_status {
    TX_OK = 0,
    TX_EINVAL = -1,       /* invalid argument or handle, malformed input */
    TX_ENOMEM = -2,       /* out of host memory */
    TX_ENOSPC = -3,       /* out of device memory (or device tables full) */
    TX_ENODEV = -4,       /* no such device, or it cannot be reached */
    TX_EBUSY = -5,        /* resource busy (e.g. submission ring stays full) */
    TX_ETIMEDOUT = -6,    /* the wait ended before the job finished */
    TX_EDEVICE_LOST = -7, /* the device went away (emulator died, unplugged) */
    TX_EIO = -8,          /* operating-system or I/O error */
    TX_ENOTSUP = -9,      /* not supported by this device, backend or version */
    TX_ENOENT = -10,      /* not found: no such file, job, tensor or key */
    TX_EPROTO = -11,      /* incompatible device or protocol violation */
    TX_EJOB = -12,        /* the job finished with a failure status */
    TX_EPERM = -13,       /* permission denied */
    TX_ECANCELED = -14,   /* cancelled by the caller (libtx 2.1) */
};

/* Name of a code, e.g. "not found", "device lost". Never NULL; "unknown
 * error" for a value that is not a TX_E* code. */
TX_API const char *tx_strerror(int code);

/* The calling thread's message about its last failed call ("" if none).
 * Success leaves the message as it was. */
TX_API const char *tx_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TX_ERROR_H */
