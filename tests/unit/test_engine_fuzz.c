// SPDX-License-Identifier: MIT
/*
 * Replays the corpus of the engine fuzz target (tests/fuzz/fuzz_engine.c,
 * tests/fuzz/corpus/engine/) through the target itself: every property it
 * checks (no write outside the writable ranges, fault addresses outside the
 * ranges, the verdict of the reference checker) holds for every committed
 * input, also in the sanitizer build.
 */
#include <check.h>

#include "tx_test_corpus.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/fuzz_engine.c"
#include "tx_test_main.h"


START_TEST(replay_engine)
{
    char dir[1024];
    tx_test_corpus_dir("engine", dir, sizeof(dir));
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "%s: corpus missing", dir);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[2048];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "rb");
        ck_assert_ptr_nonnull(f);
        static uint8_t buf[1 << 16];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
        count++;
    }
    closedir(d);
    ck_assert_int_ge(count, 20);
}
END_TEST

/* The reference and the engine agree on the seeds' verdicts */
START_TEST(seed_verdicts)
{
    static const struct {
        const char *name;
        unsigned status;
    } want[] = {
        {"fill", TX8_STATUS_OK},
        {"matmul_i8_bias", TX8_STATUS_OK},
        {"embed", TX8_STATUS_OK},
        {"fault_end", TX8_STATUS_ADDR_FAULT},
        {"fault_ro", TX8_STATUS_ADDR_FAULT},
        {"bad_range", TX8_STATUS_INVALID_JOB},
        {"bad_opcode", TX8_STATUS_INVALID_CMD},
        {"overflow", TX8_STATUS_ADDR_FAULT},
        {"rope_neox", TX8_STATUS_OK},
        {"rope_attn_factor", TX8_STATUS_OK},
        {"route_sigmoid", TX8_STATUS_OK},
        {"route_softmax", TX8_STATUS_OK},
        {"route_softmax_bias", TX8_STATUS_INVALID_CMD},
        /* issue 16: every opcode, the 1.6 additions */
        {"nop", TX8_STATUS_OK},
        {"nop_flags", TX8_STATUS_INVALID_CMD},
        {"layernorm", TX8_STATUS_OK},
        {"attention_f32", TX8_STATUS_OK},
        {"attention_q8_v_f16", TX8_STATUS_OK},
        {"attention_q4_sel", TX8_STATUS_OK},
        {"attention_bad_v_dtype", TX8_STATUS_UNSUPPORTED_DTYPE},
        {"attention_bf16", TX8_STATUS_OK}, /* 1.7 */
        {"attention_bf16_odd", TX8_STATUS_INVALID_CMD},
        {"convert_q8_0", TX8_STATUS_OK},
        {"convert_q4_0_f16", TX8_STATUS_OK},
        {"convert_q8_0_cols", TX8_STATUS_INVALID_CMD},
        {"convert_q8_0_wrap", TX8_STATUS_ADDR_FAULT},
        {"matmul_sparse", TX8_STATUS_OK},
        {"matmul_batch_invariant", TX8_STATUS_OK},
        {"job_unknown_flag", TX8_STATUS_INVALID_JOB},
        {"moe_ffn_xcache", TX8_STATUS_OK},
        {"moe_ffn_bad_flag", TX8_STATUS_INVALID_CMD},
        {"dsa_index_f32", TX8_STATUS_OK},
        {"dsa_index_q8_0", TX8_STATUS_OK},
        {"sample_1_3", TX8_STATUS_OK},
        {"sample_1_2", TX8_STATUS_OK},
        /* 1.10: the key bitmap of ATTENTION / DSA_INDEX */
        {"attention_1_10_mask", TX8_STATUS_OK},
        {"attention_1_10_sel_mask", TX8_STATUS_OK},
        {"attention_1_10_short_ld", TX8_STATUS_INVALID_CMD},
        {"attention_1_10_mask_fault", TX8_STATUS_ADDR_FAULT},
        {"dsa_index_1_10_mask", TX8_STATUS_OK},
    };
    char dir[1024];
    tx_test_corpus_dir("engine", dir, sizeof(dir));
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char p[2048];
        snprintf(p, sizeof(p), "%s/%s", dir, want[i].name);
        FILE *f = fopen(p, "rb");
        ck_assert_ptr_nonnull(f);
        static uint8_t buf[1 << 16];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
        ck_assert_msg(fe_last_status == want[i].status, "%s: status %u", want[i].name,
                      fe_last_status);
        ck_assert_msg(fe_last_ref == (int)want[i].status, "%s: reference %d", want[i].name,
                      fe_last_ref);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine_fuzz");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, replay_engine);
    tcase_add_test(tc, seed_verdicts);
    suite_add_tcase(s, tc);
    return tx_test_run(s);
}
