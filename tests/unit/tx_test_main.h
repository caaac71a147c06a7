/* SPDX-License-Identifier: MIT */
/*
 * The main() of a test program that is one Check suite of one case:
 *     const TTest *const tests[] = {test_a, test_b};   (in main: not constants)
 *     int main(void) { return tx_test_main("name", tests, 2); }
 * (CK_FORK and CK_RUN_CASE as usual); 0 when every test passed.
 */
#ifndef TX_TEST_MAIN_H
#define TX_TEST_MAIN_H

#include <check.h>
#include <stddef.h>

static inline int tx_test_main(const char *name, const TTest *const *tests, size_t n)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

#endif /* TX_TEST_MAIN_H */
