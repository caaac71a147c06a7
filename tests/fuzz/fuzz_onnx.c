/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the ONNX reader (libFuzzer entry point
 * LLVMFuzzerTestOneInput): the input is an .onnx file (protobuf). It is
 * parsed; if it opens, every initializer is looked up by name and its
 * first and last elements converted. External data references resolve
 * relative to the file's directory and must stay inside it, so only a
 * fixed external file "fuzz.data" (4 KiB of zeros, created next to the
 * input) can be reached.
 *
 * Builds: see fuzz_safetensors.c (fuzz_onnx, fuzz_onnx_replay).
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tx-internal/tx_onnx.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fonnx_check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz property violated: %s\n", what);
        abort();
    }
}

static char fonnx_dir[PATH_MAX];

static void fonnx_cleanup(void)
{
    char p[PATH_MAX + 16];
    snprintf(p, sizeof(p), "%s/fuzz.data", fonnx_dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/model.onnx", fonnx_dir);
    unlink(p);
    rmdir(fonnx_dir);
}

static int fonnx_setup(void)
{
    if (fonnx_dir[0])
        return 0;
    const char *t = getenv("TMPDIR");
    snprintf(fonnx_dir, sizeof(fonnx_dir), "%s/fuzz-onnx-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(fonnx_dir)) {
        fonnx_dir[0] = 0;
        return -1;
    }
    atexit(fonnx_cleanup);
    char p[PATH_MAX + 16];
    snprintf(p, sizeof(p), "%s/fuzz.data", fonnx_dir);
    FILE *f = fopen(p, "wb");
    if (!f)
        return -1;
    static const char zeros[4096];
    fwrite(zeros, 1, sizeof(zeros), f);
    fclose(f);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fonnx_setup() < 0)
        return 0;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/model.onnx", fonnx_dir);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    int ok = fwrite(data, 1, size, f) == size;
    ok &= fclose(f) == 0;
    if (!ok)
        return 0;
    struct tx_onnx *m = NULL;
    char err[TX_ERR_MAX];
    err[0] = 0;
    int rc = tx_onnx_open(path, &m, err, sizeof(err));
    if (rc < 0) {
        fonnx_check(m == NULL, "failed open returns a model");
        fonnx_check(strstr(err, path) != NULL || strstr(err, "out of memory"),
                    "error names the file");
    } else {
        for (size_t i = 0; i < tx_onnx_count(m); i++) {
            const struct tx_tensor *t = tx_onnx_tensor(m, i);
            fonnx_check(tx_onnx_find(m, t->name) != NULL, "lookup by name");
            float v[8];
            uint64_t n = t->nelem < 8 ? t->nelem : 8;
            int r = tx_tensor_read_f32(t, 0, n, v, err, sizeof(err));
            fonnx_check((r == 0) == (tx_elem_supported(t->type) != 0),
                        "conversion of a supported type");
            if (t->nelem > 8)
                tx_tensor_read_f32(t, t->nelem - 8, 8, v, err, sizeof(err));
        }
        tx_onnx_metadata(m, "config");
        tx_onnx_close(m);
    }
    unlink(path);
    return 0;
}

#ifdef TX_FUZZ_STANDALONE
#define FUZZ_NAME "fuzz_onnx"
#include "fuzz_model_replay.h"
#endif
