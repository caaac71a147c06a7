/* SPDX-License-Identifier: MIT */
/*
 * Removing the temporary directories tests make (recursively, without
 * following links): one helper for every test program.
 */
#ifndef TX_TEST_TMP_H
#define TX_TEST_TMP_H

#include <ftw.h>
#include <stdio.h>
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

#endif /* TX_TEST_TMP_H */
