/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the expert parallel settings parser
 * (config/expert_parallel.yaml, glm_moe_config_load in
 * libtx/runtime/moe.c, libyaml; libFuzzer entry point
 * LLVMFuzzerTestOneInput). The input is the YAML file; it is given to the
 * parser as a memfd, as a file path. Properties:
 *   - the parser returns TX_OK or a negative tx_status, with a message
 *     (tx_last_error) naming the file on error;
 *   - a failed load leaves the options untouched;
 *   - a successful load gives options in their documented ranges
 *     (expert_parallel >= 1, capacity_factor >= 0 and finite,
 *     min_expert_util in [0, 1], lambda >= 0 and finite, a known
 *     balancing mode), and loading the same file again gives the same
 *     options.
 *
 * Builds: see fuzz_safetensors.c (fuzz_moe_yaml, fuzz_moe_yaml_replay).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tx/glm.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fmoe_check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz property violated: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    int fd = memfd_create("fuzz.yaml", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

    struct glm_moe_options o, before;
    glm_moe_defaults(&o);
    o.lambda = 0.5f; /* not a default, to see that errors leave it */
    before = o;
    int rc = glm_moe_config_load(path, &o);
    fmoe_check(rc <= 0, "returns TX_OK or a negative status");
    if (rc < 0) {
        const char *msg = tx_last_error();
        fmoe_check(msg && strstr(msg, path), "an error names the file");
        fmoe_check(!memcmp(&o, &before, sizeof(o)), "a failed load changes nothing");
    } else {
        fmoe_check(o.expert_parallel >= 1, "expert_parallel >= 1");
        fmoe_check(o.capacity_factor >= 0 && isfinite(o.capacity_factor), "capacity_factor");
        fmoe_check(o.min_expert_util >= 0 && o.min_expert_util <= 1, "min_expert_util");
        fmoe_check(o.lambda >= 0 && isfinite(o.lambda), "lambda");
        fmoe_check((unsigned)o.balance <= GLM_BALANCE_AUTO, "balance mode");
        struct glm_moe_options again = before;
        fmoe_check(glm_moe_config_load(path, &again) == 0 && !memcmp(&again, &o, sizeof(o)),
                   "loading is deterministic");
    }
    close(fd);
    return 0;
}

#ifdef TX_FUZZ_STANDALONE
#define FUZZ_NAME "fuzz_moe_yaml"
#include "fuzz_model_replay.h"
#endif
