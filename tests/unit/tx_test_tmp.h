/* SPDX-License-Identifier: MIT */
/*
 * Removing the temporary directories tests make (recursively, without
 * following links) and reading the files they leave: helpers for every
 * test program.
 */
#ifndef TX_TEST_TMP_H
#define TX_TEST_TMP_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static inline int tx_test_rmtree_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

/* Remove path and everything below it; a missing or empty path is fine. */
static inline void tx_test_rmtree(const char *path)
{
    if (path && path[0])
        nftw(path, tx_test_rmtree_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* The first max - 1 bytes of path, NUL-terminated, in a calloc'd buffer
 * (empty when the file is missing); the caller frees it. */
static inline char *tx_test_slurp(const char *path, size_t max)
{
    FILE *f = fopen(path, "rb");
    char *b = calloc(1, max);
    if (b && f)
        b[fread(b, 1, max - 1, f)] = 0;
    if (f)
        fclose(f);
    return b;
}

#endif /* TX_TEST_TMP_H */
