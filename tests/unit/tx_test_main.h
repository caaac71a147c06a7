/* SPDX-License-Identifier: MIT */
/*
 * The main() of a test program:
 *     int main(void) { return tx_test_run(my_suite()); }
 * runs the suite (CK_FORK, CK_RUN_CASE and CK_VERBOSITY as usual) and
 * returns 0 when every test passed; for one suite of one case,
 *     const TTest *const tests[] = {test_a, test_b};   (in main: not constants)
 *     int main(void) { return tx_test_main("name", tests, 2); }
 */
#ifndef TX_TEST_MAIN_H
#define TX_TEST_MAIN_H

#include <check.h>
#include <stddef.h>
#include <stdio.h>

static inline int tx_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

#ifdef TX_TEST_EMU_H
/* tx_test_run, failing too when an emulator this process stopped had a
 * problem (tx_test_emu.h, included before this header) */
static inline int tx_test_run_emu(Suite *s)
{
    int rc = tx_test_run(s);
    if (tx_test_emu_problems)
        fprintf(stderr, "%d emulator problem(s), see above\n", tx_test_emu_problems);
    return rc || tx_test_emu_problems ? 1 : 0;
}
#endif

static inline int tx_test_main(const char *name, const TTest *const *tests, size_t n)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return tx_test_run(s);
}

#endif /* TX_TEST_MAIN_H */
