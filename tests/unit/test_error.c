/* SPDX-License-Identifier: MIT */
/*
 * The one error convention of libtx (include/tx/tx_error.h, docs/libtx.md
 * "Errors"): the TX_E* values are ABI, tx_error.h stands alone, errno is
 * mapped once (tx_errno_code), the one message-buffer helper (tx_errbuf)
 * fills err and tx_last_error() alike, and a missing file is "not found"
 * (TX_ENOENT), not "invalid argument", at the public entry points that open
 * files.
 */
#include <tx/tx_error.h> /* first: it needs no other header */

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <tx/glm.h>
#include <tx/tx_tokenizer.h>

#include <tx-internal/tx_errors.h>
#include "tx_test_main.h"

START_TEST(values_are_abi)
{
    /* libtx.so.2: these numbers never change */
    ck_assert_int_eq(TX_OK, 0);
    ck_assert_int_eq(TX_EINVAL, -1);
    ck_assert_int_eq(TX_ENOMEM, -2);
    ck_assert_int_eq(TX_ENOSPC, -3);
    ck_assert_int_eq(TX_ENODEV, -4);
    ck_assert_int_eq(TX_EBUSY, -5);
    ck_assert_int_eq(TX_ETIMEDOUT, -6);
    ck_assert_int_eq(TX_EDEVICE_LOST, -7);
    ck_assert_int_eq(TX_EIO, -8);
    ck_assert_int_eq(TX_ENOTSUP, -9);
    ck_assert_int_eq(TX_ENOENT, -10);
    ck_assert_int_eq(TX_EPROTO, -11);
    ck_assert_int_eq(TX_EJOB, -12);
    ck_assert_int_eq(TX_EPERM, -13);
    ck_assert_int_eq(TX_ECANCELED, -14);
}
END_TEST

START_TEST(names)
{
    ck_assert_str_eq(tx_strerror(TX_OK), "success");
    ck_assert_str_eq(tx_strerror(TX_EINVAL), "invalid argument");
    ck_assert_str_eq(tx_strerror(TX_ENOENT), "not found");
    ck_assert_str_eq(tx_strerror(TX_ENOMEM), "out of host memory");
    ck_assert_str_eq(tx_strerror(TX_EDEVICE_LOST), "device lost");
    ck_assert_str_eq(tx_strerror(TX_EPERM), "permission denied");
    ck_assert_str_eq(tx_strerror(TX_ECANCELED), "cancelled");
    for (int c = TX_ECANCELED; c <= TX_OK; c++)
        ck_assert_str_ne(tx_strerror(c), "unknown error");
    ck_assert_str_eq(tx_strerror(1), "unknown error");
    ck_assert_str_eq(tx_strerror(-15), "unknown error");
    ck_assert_str_eq(tx_strerror(-ENOENT), "out of host memory"); /* why -errno is refused */
}
END_TEST

START_TEST(errno_mapped_once)
{
    ck_assert_int_eq(tx_errno_code(0), TX_OK);
    ck_assert_int_eq(tx_errno_code(ENOENT), TX_ENOENT);
    ck_assert_int_eq(tx_errno_code(-ENOENT), TX_ENOENT);
    ck_assert_int_eq(tx_errno_code(ENOMEM), TX_ENOMEM);
    ck_assert_int_eq(tx_errno_code(EINVAL), TX_EINVAL);
    ck_assert_int_eq(tx_errno_code(EACCES), TX_EPERM);
    ck_assert_int_eq(tx_errno_code(EPERM), TX_EPERM);
    ck_assert_int_eq(tx_errno_code(ECANCELED), TX_ECANCELED);
    ck_assert_int_eq(tx_errno_code(ENOSPC), TX_ENOSPC);
    ck_assert_int_eq(tx_errno_code(EPIPE), TX_EDEVICE_LOST);
    ck_assert_int_eq(tx_errno_code(ETIMEDOUT), TX_ETIMEDOUT);
    ck_assert_int_eq(tx_errno_code(EOPNOTSUPP), TX_ENOTSUP);
    ck_assert_int_eq(tx_errno_code(EISDIR), TX_EIO); /* anything else */
}
END_TEST

START_TEST(errbuf)
{
    char err[64];
    ck_assert_int_eq(tx_errbuf(err, sizeof(err), TX_ENOENT, "%s: %d", "x.json", 7), TX_ENOENT);
    ck_assert_str_eq(err, "x.json: 7");
    ck_assert_str_eq(tx_last_error(), "x.json: 7");
    /* no buffer: only tx_last_error() */
    ck_assert_int_eq(tx_errbuf(NULL, 0, TX_EINVAL, "bad %s", "value"), TX_EINVAL);
    ck_assert_str_eq(tx_last_error(), "bad value");
    /* err itself as an argument (wrapping the previous message) */
    ck_assert_int_eq(tx_errbuf(err, sizeof(err), TX_EIO, "load: %s", err), TX_EIO);
    ck_assert_str_eq(err, "load: x.json: 7");
    /* truncated to errsz, NUL-terminated */
    char small[5];
    tx_errbuf(small, sizeof(small), TX_EINVAL, "%s", "abcdefgh");
    ck_assert_str_eq(small, "abcd");
}
END_TEST

START_TEST(missing_file_is_not_found)
{
    const char *path = "/nonexistent-tx8-dir/tokenizer.json";
    struct tx_tokenizer *tok = NULL;
    char err[512];
    int rc = tx_tokenizer_load_file(path, &tok, err, sizeof(err));
    ck_assert_int_eq(rc, TX_ENOENT);
    ck_assert_str_eq(tx_strerror(rc), "not found");
    ck_assert_ptr_null(tok);
    ck_assert_msg(strstr(err, path), "%s", err);
    ck_assert_str_eq(tx_last_error(), err);

    struct glm_moe_options o;
    glm_moe_defaults(&o);
    rc = glm_moe_config_load("/nonexistent-tx8-dir/expert_parallel.yaml", &o);
    ck_assert_int_eq(rc, TX_ENOENT);
    ck_assert_msg(strstr(tx_last_error(), "/nonexistent-tx8-dir/expert_parallel.yaml"), "%s",
                  tx_last_error());
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("error");
    TCase *tc = tcase_create("convention");
    tcase_add_test(tc, values_are_abi);
    tcase_add_test(tc, names);
    tcase_add_test(tc, errno_mapped_once);
    tcase_add_test(tc, errbuf);
    tcase_add_test(tc, missing_file_is_not_found);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
