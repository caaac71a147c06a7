/* SPDX-License-Identifier: MIT */
/*
 * tx-bench --device SPEC: the host-device round trip, submit to completion,
 * through libtx on a real backend (emu: a running tx8-emu; accel: tx8.ko).
 *
 * Rows: an empty job (one NOP: a job has at least one command), a
 * one-command job (FILL of 4 KiB), and a one-command job doing a little
 * work (a 1 MiB F16 GEMV, 512 x 1024, in cache): each submitted with
 * tx_submit_raw (the commands prepared once in a BO, no copy) and waited
 * for with tx_wait, one job at a time. The empty job's time is the fixed
 * overhead; the others' minus it is what the command costs.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <tx/tx.h>
#include <tx/tx_dtype.h>
#include <tx8/tx8_hw.h>

#include "bench.h"

static uint64_t rt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct rt_row {
    const char *name;
    double med_us, p10_us, p90_us;
};

#define RT_GEMV_N 512u
#define RT_GEMV_K 1024u

int txb_roundtrip(const char *spec, unsigned reps, int json)
{
    tx_device_t *dev = NULL;
    tx_bo_t *bo = NULL;
    struct tx_device_info info;
    uint8_t *p;
    uint64_t base;
    int rc;

    if ((rc = tx_device_open(spec, &dev)) < 0) {
        fprintf(stderr, "tx-bench: --device %s: %s\n", spec, tx_last_error());
        return 1;
    }
    tx_device_info(dev, &info);
    /* commands at 0 (3 x 256 bytes), FILL target at 4 KiB, GEMV weights at
     * 64 KiB, x and y after them */
    uint64_t w_off = 65536, x_off = w_off + (uint64_t)RT_GEMV_N * RT_GEMV_K * 2;
    uint64_t y_off = x_off + RT_GEMV_K * 4, size = y_off + RT_GEMV_N * 4;
    if ((rc = tx_bo_alloc(dev, size, 0, "tx-bench-roundtrip", &bo)) < 0 ||
        (rc = tx_bo_map(bo, (void **)&p)) < 0 || (rc = tx_bo_addr(bo, &base)) < 0) {
        fprintf(stderr, "tx-bench: --device %s: %s\n", spec, tx_last_error());
        if (bo)
            tx_bo_free(bo);
        tx_device_close(dev);
        return 1;
    }
    memset(p, 0, size);
    uint16_t *w = (uint16_t *)(void *)(p + w_off);
    for (size_t i = 0; i < (size_t)RT_GEMV_N * RT_GEMV_K; i++)
        w[i] = tx_f32_to_f16((float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f);
    float *x = (float *)(void *)(p + x_off);
    for (unsigned i = 0; i < RT_GEMV_K; i++)
        x[i] = (float)(i % 7) / 7.0f;

    struct tx8_cmd_hdr nop = {TX8_OP_NOP, 0, sizeof(nop)};
    memcpy(p, &nop, sizeof(nop));
    struct tx8_cmd_fill f;
    memset(&f, 0, sizeof(f));
    f.hdr = (struct tx8_cmd_hdr){TX8_OP_FILL, 0, sizeof(f)};
    f.dst = base + 4096;
    f.bytes = 4096;
    f.value = 0x5a5a5a5au;
    memcpy(p + 256, &f, sizeof(f));
    struct tx8_cmd_matmul m;
    memset(&m, 0, sizeof(m));
    m.hdr = (struct tx8_cmd_hdr){TX8_OP_MATMUL, 0, sizeof(m)};
    m.y = base + y_off;
    m.x = base + x_off;
    m.w.data = base + w_off;
    m.w.dtype = TX8_DTYPE_F16;
    m.w.rows = RT_GEMV_N;
    m.w.cols = RT_GEMV_K;
    m.tokens = 1;
    m.ld_x = RT_GEMV_K;
    m.ld_y = RT_GEMV_N;
    m.act_dtype = TX8_DTYPE_F32;
    memcpy(p + 512, &m, sizeof(m));

    static const struct {
        const char *name;
        uint64_t off;
        uint32_t size;
    } jobs[3] = {{"empty job (1 NOP)", 0, sizeof(struct tx8_cmd_hdr)},
                 {"1 command (FILL 4 KiB)", 256, sizeof(struct tx8_cmd_fill)},
                 {"1 command (GEMV f16 1 MiB)", 512, sizeof(struct tx8_cmd_matmul)}};
    struct rt_row rows[3];
    uint64_t *t = calloc(reps, sizeof(uint64_t));
    struct tx_bo_use use = {bo, TX_ACCESS_RW};
    int fail = 0;
    for (unsigned j = 0; j < 3 && !fail; j++) {
        struct tx_raw_job rj = {bo, jobs[j].off, jobs[j].size, 1, &use, 0, 0};
        /* warm-up: a tenth of the runs */
        for (unsigned r = 0; r < reps + reps / 10 && !fail; r++) {
            tx_job_t id;
            struct tx_job_result res;
            uint64_t t0 = rt_now_ns();
            if (tx_submit_raw(dev, &rj, &id) < 0 || tx_wait(dev, id, 10000000000ll, &res) < 0) {
                fprintf(stderr, "tx-bench: --device %s: %s: %s\n", spec, jobs[j].name,
                        tx_last_error());
                fail = 1;
                break;
            }
            uint64_t t1 = rt_now_ns();
            if (r >= reps / 10)
                t[r - reps / 10] = t1 - t0;
        }
        if (fail)
            break;
        qsort(t, reps, sizeof(*t), cmp_u64);
        rows[j].name = jobs[j].name;
        rows[j].med_us = t[reps / 2] / 1e3;
        rows[j].p10_us = t[reps / 10] / 1e3;
        rows[j].p90_us = t[reps * 9 / 10] / 1e3;
    }
    free(t);
    tx_bo_free(bo);
    tx_device_close(dev);
    if (fail)
        return 1;
    if (json) {
        json_object *root = json_object_new_object(), *arr = json_object_new_array();
        json_object_object_add(root, "device", json_object_new_string(spec));
        json_object_object_add(root, "backend", json_object_new_string(info.backend));
        json_object_object_add(root, "runs", json_object_new_int((int)reps));
        for (unsigned j = 0; j < 3; j++) {
            json_object *e = json_object_new_object();
            json_object_object_add(e, "job", json_object_new_string(rows[j].name));
            json_object_object_add(e, "median_us", json_object_new_double(rows[j].med_us));
            json_object_object_add(e, "p10_us", json_object_new_double(rows[j].p10_us));
            json_object_object_add(e, "p90_us", json_object_new_double(rows[j].p90_us));
            json_object_object_add(e, "over_empty_us",
                                   json_object_new_double(rows[j].med_us - rows[0].med_us));
            json_object_array_add(arr, e);
        }
        json_object_object_add(root, "roundtrip", arr);
        printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                                                JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(root);
        return 0;
    }
    printf("tx-bench: round trip (tx_submit_raw to tx_wait returning), device %s (%s), %u runs "
           "per row\n\n",
           spec, info.backend, reps);
    printf("| job                        | median us | p10 us | p90 us | over empty us |\n");
    printf("| -------------------------- | --------: | -----: | -----: | ------------: |\n");
    for (unsigned j = 0; j < 3; j++)
        printf("| %-26s | %9.1f | %6.1f | %6.1f | %13.1f |\n", rows[j].name, rows[j].med_us,
               rows[j].p10_us, rows[j].p90_us, rows[j].med_us - rows[0].med_us);
    return 0;
}
