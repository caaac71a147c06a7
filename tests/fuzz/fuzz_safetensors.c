/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the safetensors reader (libFuzzer entry point
 * LLVMFuzzerTestOneInput): the input is a .safetensors file. It is opened;
 * if it opens, every tensor is looked up by name and its first elements are
 * converted (which must succeed exactly for F32/F16/BF16). A violated
 * property calls abort().
 *
 * Builds (libtx/model.mk):
 *   make BUILD=... fuzz-build        libFuzzer binaries (clang) in $(BUILD)/fuzz/
 *   make BUILD=... tests             $(BUILD)/fuzz/fuzz_safetensors_replay:
 *                                    -DTX_FUZZ_STANDALONE, a main() replaying
 *                                    the files and directories named
 * tests/unit/test_model_fuzz.c includes this file and replays
 * tests/fuzz/corpus/safetensors/ on every unit-test run.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tx-internal/tx_safetensors.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fst_check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz property violated: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    struct tx_st_file *f = NULL;
    char err[TX_ERR_MAX];
    err[0] = 0;
    int rc = tx_st_open(path, &f, err, sizeof(err));
    if (rc < 0) {
        fst_check(f == NULL, "failed open returns a file");
        fst_check(err[0] != 0 && strstr(err, path) != NULL, "error names the file");
    } else {
        for (size_t i = 0; i < tx_st_count(f); i++) {
            const struct tx_tensor *t = tx_st_tensor(f, i);
            fst_check(tx_st_find(f, t->name) == t, "lookup by name");
            fst_check(t->file_offset + t->nbytes <= size, "tensor inside the file");
            float v[16];
            uint64_t n = t->nelem < 16 ? t->nelem : 16;
            int r = tx_tensor_read_f32(t, 0, n, v, err, sizeof(err));
            fst_check((r == 0) == (tx_elem_supported(t->type) != 0),
                      "conversion of a supported type");
            if (t->nelem > 16)
                tx_tensor_read_f32(t, t->nelem - 16, 16, v, err, sizeof(err));
        }
        tx_st_close(f);
    }
    close(fd);
    return 0;
}

#ifdef TX_FUZZ_STANDALONE
#define FUZZ_NAME "fuzz_safetensors"
#include "fuzz_model_replay.h"
#endif
