/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the FP8 checkpoint loader (libtx/model/fp8.c, what
 * tx_ckpt_open does for an FP8 checkpoint). The input is
 *   u16 little-endian L, L bytes of config.json text, a .safetensors file.
 * The config's quantization_config is checked (txm_quant_config_parse:
 * 0, or an error naming "quantization_config."); if it is an FP8 one, every
 * F8_E4M3 tensor with a "<name>_scale_inv" companion is bound
 * (txm_fp8_bind: shape, dtype, finite non-negative scales, else an error
 * naming the scale tensor) and read back with tx_tensor_read_f32 in pieces
 * across rows and blocks: every value must be e4m3(code) x the scale of
 * its 128 x 128 block (NaN for the NaN codes). A violated property calls
 * abort().
 *
 * Builds: tests/fuzz.mk (libFuzzer), libtx/model.mk (replay driver
 * $(BUILD)/fuzz/fuzz_fp8_replay); tests/unit/test_model_fuzz.c replays
 * tests/fuzz/corpus/fp8/ (made by tests/fuzz/fp8_seeds.py).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tx/tx_dtype.h>
#include <tx-internal/tx_safetensors.h>

#include <tx-internal/tx_fp8.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void ff8_check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz property violated: %s\n", what);
        abort();
    }
}

static void ff8_read_back(const struct tx_tensor *t)
{
    uint64_t C = t->shape[1], SC = txm_fp8_grid(C, t->block_cols);
    uint64_t n = t->nelem < 4096 ? t->nelem : 4096;
    float v[4096];
    char err[TX_ERR_MAX];
    /* [0, a) and [a, n) with a inside a row */
    uint64_t a = n / 3;
    ff8_check(tx_tensor_read_f32(t, 0, a, v, err, sizeof(err)) == 0, "read of a bound tensor");
    ff8_check(tx_tensor_read_f32(t, a, n - a, v + a, err, sizeof(err)) == 0,
              "read of a bound tensor");
    const uint8_t *raw = t->data;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t r = k / C, c = k % C;
        float s = txm_fp8_scale_at(t->scale_inv, (r / t->block_rows) * SC + c / t->block_cols);
        float want = tx_e4m3_to_f32(raw[k]) * s;
        ff8_check(isnan(want) ? isnan(v[k]) : v[k] == want, "value is e4m3 x block scale");
    }
    ff8_check(tx_tensor_read_f32(t, t->nelem, 1, v, err, sizeof(err)) == TX_EINVAL,
              "read past the end");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t L = (size_t)data[0] | (size_t)data[1] << 8;
    if (L > size - 2)
        return 0;
    char *cfg = malloc(L + 1);
    if (!cfg)
        return 0;
    memcpy(cfg, data + 2, L);
    cfg[L] = 0;
    char err[TX_ERR_MAX];
    struct txm_quant_config q;
    err[0] = 0;
    int rc = txm_quant_config_parse(cfg, "config.json", &q, err, sizeof(err));
    free(cfg);
    if (rc < 0) {
        ff8_check(rc == TX_EINVAL || rc == TX_ENOTSUP, "config error code");
        ff8_check(strstr(err, "config.json") != NULL, "config error names the file");
        ff8_check(rc != TX_ENOTSUP || strstr(err, "quantization_config.") != NULL,
                  "refusal names the field");
        return 0;
    }
    ff8_check(!q.fp8 || (q.block_rows == 128 && q.block_cols == 128), "block size");
    int fd = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t rest = size - 2 - L;
    if (rest && write(fd, data + 2 + L, rest) != (ssize_t)rest) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    struct tx_st_file *f = NULL;
    if (tx_st_open(path, &f, err, sizeof(err)) == 0) {
        for (size_t i = 0; i < tx_st_count(f); i++) {
            const struct tx_tensor *w = tx_st_tensor(f, i);
            char sname[TX_ST_MAX_NAME + 16];
            snprintf(sname, sizeof(sname), "%s%s", w->name, TXM_FP8_SCALE_SUFFIX);
            const struct tx_tensor *s = tx_st_find(f, sname);
            float v;
            if (w->type == TX_ELEM_F8_E4M3 && w->nelem)
                ff8_check(tx_tensor_read_f32(w, 0, 1, &v, err, sizeof(err)) == TX_ENOTSUP,
                          "an unbound F8_E4M3 tensor is not read");
            if (!s)
                continue;
            struct tx_tensor b;
            err[0] = 0;
            rc = txm_fp8_bind(w, s, &q, &b, err, sizeof(err));
            if (rc < 0) {
                ff8_check(strstr(err, w->name) != NULL || strstr(err, s->name) != NULL,
                          "bind error names the tensor");
                continue;
            }
            ff8_check(q.fp8 && w->type == TX_ELEM_F8_E4M3 && w->ndim == 2, "what binds");
            if (b.nelem)
                ff8_read_back(&b);
        }
        tx_st_close(f);
    }
    close(fd);
    return 0;
}

#ifdef TX_FUZZ_STANDALONE
#define FUZZ_NAME "fuzz_fp8"
#include "fuzz_model_replay.h"
#endif
