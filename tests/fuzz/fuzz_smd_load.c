// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the .smd loader path glm-inference uses:
 * glm_model_load() of a package onto a device (a tx8-emu this process
 * starts once, in LLVMFuzzerInitialize, with tests/unit/tx_test_emu.h;
 * $BUILD/bin/tx8-emu, BUILD defaults to "build").
 *
 * Input: byte 0 is a mode, the rest the package. Mode bit 0 set: reseal
 * the file first (recompute the section and header checksums, as
 * fuzz_smd.c does) so mutations reach the loader's structural checks
 * behind them. Properties: the load fails cleanly (a TX_E* code, a
 * message, no model) or succeeds; a loaded model describes a config that
 * validates and is freed with TX_OK; either way the device's memory use
 * returns to what it was (nothing leaks on the device), and the emulator
 * is still alive.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tx/glm.h>
#include <tx/glm_config.h>
#include <tx/tx.h>
#include <tx-internal/tx_smd.h>

#include "fuzz_smd_reseal.h"

#include "../unit/tx_test_emu.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct tx_test_emu fsl_emu;
static tx_device_t *fsl_dev;
static char fsl_path[96];

#define FSL_FAIL(...)                                                                              \
    do {                                                                                           \
        fprintf(stderr, "fuzz_smd_load: " __VA_ARGS__);                                            \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (tx_test_emu_start(&fsl_emu, "64M", "--cores", "1", NULL) != 0)
        FSL_FAIL("cannot start tx8-emu (build it: make; BUILD names the build tree)");
    if (tx_device_open(fsl_emu.spec, &fsl_dev) != TX_OK)
        FSL_FAIL("cannot open %s: %s", fsl_emu.spec, tx_last_error());
    snprintf(fsl_path, sizeof(fsl_path), "%s/fuzz.smd", fsl_emu.dir);
    return 0;
}


static uint64_t fsl_used(void)
{
    struct tx_device_info info;
    if (tx_device_info(fsl_dev, &info) != TX_OK)
        FSL_FAIL("device info: %s (the emulator died?)", tx_last_error());
    return info.mem_used;
}

/* outcome of the last input (for the unit test's replay) */
static int fsl_last_rc;

/* Close the device and stop the emulator (the unit test's replay; under
 * libFuzzer the emulator's atexit handler and death signal do it). */
static void fsl_shutdown(void) __attribute__((unused));
static void fsl_shutdown(void)
{
    if (fsl_dev)
        tx_device_close(fsl_dev);
    fsl_dev = NULL;
    if (tx_test_emu_stop(&fsl_emu) != 0)
        FSL_FAIL("tx8-emu did not stop cleanly (log: %s)", fsl_emu.log);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fsl_dev)
        LLVMFuzzerInitialize(NULL, NULL);
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
    FILE *f = fopen(fsl_path, "wb");
    if (!f || fwrite(copy, 1, size, f) != size || fclose(f) != 0)
        FSL_FAIL("cannot write %s", fsl_path);
    free(copy);

    uint64_t before = fsl_used();
    glm_model_t *m = NULL;
    int rc = glm_model_load(fsl_dev, fsl_path, NULL, &m);
    fsl_last_rc = rc;
    if (getenv("FUZZ_SMD_LOAD_VERBOSE"))
        fprintf(stderr, "fuzz_smd_load: %zu bytes: %s\n", size,
                rc == TX_OK ? "loaded" : tx_last_error());
    if (rc != TX_OK) {
        if (rc > 0 || m)
            FSL_FAIL("failed load (%d) returned a model or a positive code", rc);
        const char *e = tx_last_error();
        if (!e || !e[0])
            FSL_FAIL("failed load (%d) without a message", rc);
    } else {
        if (!m)
            FSL_FAIL("successful load without a model");
        char err[256];
        if (glm_config_validate(glm_model_config(m), err, sizeof(err)) != 0)
            FSL_FAIL("loaded config does not validate: %s", err);
        if (glm_model_free(m) != TX_OK)
            FSL_FAIL("glm_model_free: %s", tx_last_error());
    }
    uint64_t after = fsl_used();
    if (after != before)
        FSL_FAIL("device memory in use %llu before the load, %llu after (rc %d)",
                 (unsigned long long)before, (unsigned long long)after, rc);
    unlink(fsl_path);
    return 0;
}
