/* SPDX-License-Identifier: MIT */
/*
 * Test helper: the path of a committed fuzz corpus (or a file in it),
 * tests/fuzz/corpus/NAME, relative to where make runs the tests (the
 * repository root; this header's own path, as the compiler saw it, gives
 * any prefix).
 */
#ifndef TX_TEST_CORPUS_H
#define TX_TEST_CORPUS_H
#include <check.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void tx_test_corpus_dir(const char *name, char *out, size_t n)
{
    const char *src = __FILE__; /* tests/unit/tx_test_corpus.h */
    const char *s = strstr(src, "tests/unit/");
    size_t pre = s ? (size_t)(s - src) : 0;
    snprintf(out, n, "%.*stests/fuzz/corpus/%s", (int)pre, src, name);
}

/* Feeds every file of corpus NAME (its first cap bytes) to fn, the fuzz
 * target's entry point; returns the number of files. */
static inline int tx_test_corpus_replay(const char *name, int (*fn)(const uint8_t *, size_t),
                                        uint8_t *buf, size_t cap)
{
    char dir[1024];
    tx_test_corpus_dir(name, dir, sizeof(dir));
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "%s: corpus missing", dir);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[2048];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "rb");
        ck_assert_ptr_nonnull(f);
        size_t n = fread(buf, 1, cap, f);
        fclose(f);
        fn(buf, n);
        count++;
    }
    closedir(d);
    return count;
}
#endif
