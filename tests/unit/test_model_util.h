/* SPDX-License-Identifier: MIT */
/* Helpers of the model-format unit tests (test_safetensors, test_checkpoint,
 * test_onnx, test_smd, test_export, test_analyze, test_model_fuzz). */
#ifndef TEST_MODEL_UTIL_H
#define TEST_MODEL_UTIL_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include "tx_test_tmp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh temporary directory per test (Check forks each test). */
static char tm_dir[256];

static inline void tm_setup(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tm_dir, sizeof(tm_dir), "%s/txfmt-XXXXXX", t && *t ? t : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tm_dir));
}

static inline void tm_teardown(void)
{
    tx_test_rmtree(tm_dir);
    tm_dir[0] = 0;
}

/* tm_dir/name into a static rotating buffer */
static inline const char *tm_path(const char *name)
{
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ & 7];
    snprintf(b, 512, "%s/%s", tm_dir, name);
    return b;
}

static inline void tm_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static inline void *tm_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    b[n] = 0;
    if (len)
        *len = (size_t)n;
    return b;
}

static inline int tm_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Number of entries in tm_dir (to prove no temporary file was left). */
static inline int tm_count_files(void)
{
    int n = 0;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", tm_dir);
    FILE *p = popen(cmd, "r");
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* Asserts that err mentions every given string. */
#define tm_err_has(err, s)                                                                         \
    ck_assert_msg(strstr((err), (s)) != NULL, "error \"%s\" lacks \"%s\"", (err), (s))

/* Deterministic pseudo-random floats in [-1, 1). */
static inline float tm_rand(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

/* A minimal tokenizer.json (a JSON object; the model code only stores it). */
static const char TM_TOKENIZER[] __attribute__((unused)) =
    "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, "
    "\"merges\": []}, \"added_tokens\": []}";

#endif
