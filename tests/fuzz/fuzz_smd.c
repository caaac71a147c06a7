/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the .smd package reader (libFuzzer entry point
 * LLVMFuzzerTestOneInput). The first input byte is a mode, the rest the
 * file:
 *   bit 0 set: before opening, "reseal" the file -- recompute every section
 *              checksum (for sections inside the file) and the header
 *              checksum -- so that mutations reach the structural checks
 *              behind the checksums;
 *   bit 1 set: open with TX_SMD_OPEN_VERIFY.
 * If the package opens, every tensor is looked up by name, read, verified
 * and (when small) dequantised. Properties: a successful open only
 * describes extents inside the file; a failed one names the file.
 *
 * Builds: see fuzz_safetensors.c (fuzz_smd, fuzz_smd_replay).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tx-internal/tx_smd.h>

#include "fuzz_smd_reseal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fsmd_check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz property violated: %s\n", what);
        abort();
    }
}


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    data++;
    size--;
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    if (mode & 1)
        fuzz_smd_reseal(copy, size);
    int fd = memfd_create("fuzz.smd", MFD_CLOEXEC);
    if (fd < 0 || (size && write(fd, copy, size) != (ssize_t)size)) {
        if (fd >= 0)
            close(fd);
        free(copy);
        return 0;
    }
    free(copy);
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    struct tx_smd *s = NULL;
    char err[TX_ERR_MAX];
    err[0] = 0;
    int rc = tx_smd_open(path, (mode & 2) ? TX_SMD_OPEN_VERIFY : 0, &s, err, sizeof(err));
    if (rc < 0) {
        fsmd_check(s == NULL, "failed open returns a package");
        fsmd_check(strstr(err, path) != NULL || strstr(err, "out of memory"),
                   "error names the file");
    } else {
        fsmd_check(tx_smd_config_json(s, NULL) != NULL, "config present");
        fsmd_check(tx_smd_tokenizer_json(s, NULL) != NULL, "tokenizer present");
        for (unsigned l = 0; l < TX_SMD_LAYER_COUNT; l++)
            fsmd_check(tx_smd_plan(s, l)->precision < TX_SMD_PREC_COUNT, "plan valid");
        for (size_t i = 0; i < tx_smd_tensor_count(s); i++) {
            const struct tx_smd_tensor *t = tx_smd_tensor_at(s, i);
            fsmd_check(t->data_offset + t->extent_size <= size, "extent inside the file");
            fsmd_check(tx_smd_find(s, tx_smd_tensor_name(s, t)) == t, "lookup by name");
            void *ext = malloc((size_t)t->extent_size);
            if (!ext)
                continue;
            if (tx_smd_read_extent(s, t, ext, (size_t)t->extent_size, 1, err, sizeof(err)) == 0 &&
                (uint64_t)t->rows * t->cols <= (1u << 20)) {
                float *d = malloc((size_t)t->rows * t->cols * sizeof(float) + 4);
                if (d)
                    fsmd_check(tx_smd_dequant(t, ext, d, err, sizeof(err)) == 0,
                               "a verified tensor dequantises");
                free(d);
            }
            free(ext);
        }
        tx_smd_close(s);
    }
    close(fd);
    return 0;
}

#ifdef TX_FUZZ_STANDALONE
#define FUZZ_NAME "fuzz_smd"
#include "fuzz_model_replay.h"
#endif
