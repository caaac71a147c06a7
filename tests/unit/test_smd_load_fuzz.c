// SPDX-License-Identifier: MIT
/*
 * Replays the corpus of the .smd loader fuzz target (tests/fuzz/
 * fuzz_smd_load.c, tests/fuzz/corpus/smd_load/) through the target: each
 * package loads onto a tx8-emu and is freed, or fails cleanly, leaving the
 * device's memory use as it was. The valid seeds must load.
 */
#include <check.h>

#include "tx_test_corpus.h"
#include <dirent.h>

#include "../fuzz/fuzz_smd_load.c"
#include "tx_test_main.h"


START_TEST(replay_smd_load)
{
    char dir[1024];
    tx_test_corpus_dir("smd_load", dir, sizeof(dir));
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "%s: corpus missing", dir);
    LLVMFuzzerInitialize(NULL, NULL);
    int count = 0, loaded = 0;
    struct dirent *e;
    static uint8_t buf[1 << 20];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[2048];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "rb");
        ck_assert_ptr_nonnull(f);
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
        int valid = !strncmp(e->d_name, "dense_1layer", 12) || !strncmp(e->d_name, "moe_2layers", 11);
        if (valid)
            ck_assert_msg(fsl_last_rc == TX_OK, "%s: %s", e->d_name, tx_last_error());
        loaded += fsl_last_rc == TX_OK;
        count++;
    }
    closedir(d);
    fsl_shutdown();
    ck_assert_int_ge(count, 4);
    ck_assert_int_ge(loaded, 4);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("smd_load_fuzz");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, replay_smd_load);
    suite_add_tcase(s, tc);
    return tx_test_run(s);
}
