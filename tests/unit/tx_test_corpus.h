/* SPDX-License-Identifier: MIT */
/*
 * Test helper: the path of a committed fuzz corpus (or a file in it),
 * tests/fuzz/corpus/NAME, relative to where make runs the tests (the
 * repository root; this header's own path, as the compiler saw it, gives
 * any prefix).
 */
#ifndef TX_TEST_CORPUS_H
#define TX_TEST_CORPUS_H
#include <stdio.h>
#include <string.h>

static void tx_test_corpus_dir(const char *name, char *out, size_t n)
{
    const char *src = __FILE__; /* tests/unit/tx_test_corpus.h */
    const char *s = strstr(src, "tests/unit/");
    size_t pre = s ? (size_t)(s - src) : 0;
    snprintf(out, n, "%.*stests/fuzz/corpus/%s", (int)pre, src, name);
}
#endif
