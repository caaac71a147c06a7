// SPDX-License-Identifier: MIT
/*
 * Replays the corpus of the socket-transport fuzz target (tests/fuzz/
 * fuzz_socket.c, tests/fuzz/corpus/socket/) through the target, with the
 * device model's server part compiled in (emu/server/ is not part of libtx
 * or the engine library): every property the target checks holds for every
 * committed input, also in the sanitizer build.
 */
#include <check.h>

#include "tx_test_corpus.h"
#include <dirent.h>

#include "../../emu/server/lease.c"
#include "../../emu/server/log.c"
#include "../../emu/server/device.c"
#include "../../emu/server/transport.c"
#include "../fuzz/fuzz_socket.c"
#include "tx_test_main.h"

START_TEST(replay_socket)
{
    static uint8_t buf[1 << 16];
    int count = tx_test_corpus_replay("socket", LLVMFuzzerTestOneInput, buf, sizeof(buf));
    ck_assert_int_ge(count, 8);
    ck_assert_int_eq(srv_peer_count(&fs_srv), 0);
    fs_cleanup();
    ck_assert_int_ne(access(fs_path, F_OK), 0); /* the socket and its directory are gone */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("socket_fuzz");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, replay_socket);
    suite_add_tcase(s, tc);
    return tx_test_run(s);
}
