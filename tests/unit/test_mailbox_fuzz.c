// SPDX-License-Identifier: MIT
/*
 * Replays the corpus of the mailbox/lease fuzz target (tests/fuzz/
 * fuzz_mailbox.c, tests/fuzz/corpus/mailbox/) through the target, with the
 * device's lease allocator compiled in (emu/server/lease.c is not part of
 * libtx or the engine library).
 */
#include <check.h>

#include "tx_test_corpus.h"
#include <dirent.h>

#include "../../emu/server/lease.c"
#include "../fuzz/fuzz_mailbox.c"


START_TEST(replay_mailbox)
{
    char dir[1024];
    tx_test_corpus_dir("mailbox", dir, sizeof(dir));
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "%s: corpus missing", dir);
    int count = 0;
    struct dirent *e;
    static uint8_t buf[1 << 16];
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
        count++;
    }
    closedir(d);
    ck_assert_int_ge(count, 5);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mailbox_fuzz");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, replay_mailbox);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
