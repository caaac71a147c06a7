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
#include "tx_test_main.h"


START_TEST(replay_mailbox)
{
    static uint8_t buf[1 << 16];
    int count = tx_test_corpus_replay("mailbox", LLVMFuzzerTestOneInput, buf, sizeof(buf));
    ck_assert_int_ge(count, 5);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mailbox_fuzz");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, replay_mailbox);
    suite_add_tcase(s, tc);
    return tx_test_run(s);
}
