/* SPDX-License-Identifier: MIT */
/*
 * txc_verify_package (declared in common/cli.h): --verify PACKAGE.smd of
 * glm-inference and glm-export. It lives here, above libtx/common, because
 * it opens the package with the .smd reader; libtx/common depends on
 * nothing above it.
 */
#include <stdio.h>
#include <time.h>

#include <tx-internal/tx_smd.h>

#include "common/cli.h"

int txc_verify_package(const char *prog, const char *path)
{
    char err[TX_ERR_MAX];
    struct tx_smd *s = NULL;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (tx_smd_open(path, TX_SMD_OPEN_VERIFY, &s, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s: verify: %s\n", prog, err);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    const struct tx_smd_header *h = tx_smd_header(s);
    fprintf(stderr, "%s: %s: %u tensors, %.1f MiB: every checksum matches (%.0f ms)\n", prog, path,
            h->tensor_count, (double)h->file_size / 1048576.0,
            (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6);
    tx_smd_close(s);
    return 0;
}
