/* SPDX-License-Identifier: MIT */
/*
 * tok-load-bench: load time of a tokenizer.json through the two load paths
 * of libtx/tokenizer (docs/tokenizer.md, "Loading"):
 *   fast   tx_tokenizer_load_buffer: model.vocab and model.merges read by
 *          the loader's own strict scanner (tok_load_fast.c), the rest of
 *          the document by json-c
 *   json-c the whole document as one json-c tree (TOK_LOAD_NO_FAST)
 * The file is read into memory once; the two paths alternate, RUNS times
 * each, and the best and median wall times are printed.
 *
 *   make BUILD=build tok-load-bench
 *   build/bench/tok-load-bench [FILE [RUNS]]
 *       (default data/tokenizers/qwen3/tokenizer.json, 10 runs)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tx/tx_tokenizer.h>

#include "tokenizer/tok_internal.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "data/tokenizers/qwen3/tokenizer.json";
    long runs = argc > 2 ? strtol(argv[2], NULL, 10) : 10;
    if (runs < 1 || runs > 1000) {
        fprintf(stderr, "tok-load-bench: RUNS must be in [1, 1000]\n");
        return 2;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *buf = len > 0 ? malloc((size_t)len) : NULL;
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "tok-load-bench: %s: cannot read\n", path);
        return 1;
    }
    fclose(f);
    double *t[2] = {calloc((size_t)runs, sizeof(double)), calloc((size_t)runs, sizeof(double))};
    const char *name[2] = {"fast", "json-c"};
    const unsigned flags[2] = {0, TOK_LOAD_NO_FAST};
    size_t vocab[2] = {0, 0};
    for (long r = 0; r < runs; r++) {
        for (int p = 0; p < 2; p++) {
            char err[512];
            struct tx_tokenizer *tok = NULL;
            double a = now_ms();
            int rc = tok_load_buffer_ex(buf, (size_t)len, flags[p], &tok, err, sizeof(err));
            double b = now_ms();
            if (rc) {
                fprintf(stderr, "tok-load-bench: %s: %s path: %s\n", path, name[p], err);
                return 1;
            }
            vocab[p] = tx_tokenizer_vocab_size(tok);
            tx_tokenizer_free(tok);
            t[p][r] = b - a;
        }
    }
    printf("tok-load-bench: %s, %ld bytes, %ld runs per path\n", path, len, runs);
    for (int p = 0; p < 2; p++) {
        qsort(t[p], (size_t)runs, sizeof(double), cmp);
        printf("  %-7s best %7.1f ms  median %7.1f ms  (vocab %zu)\n", name[p], t[p][0],
               t[p][runs / 2], vocab[p]);
    }
    free(t[0]);
    free(t[1]);
    free(buf);
    return 0;
}
