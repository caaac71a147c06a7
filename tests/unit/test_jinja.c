/* SPDX-License-Identifier: MIT */
/*
 * tx/tx_jinja.h: the chat-template renderer's interface -- arguments,
 * errors with line and column, raise_exception's message and flag, the
 * step / output / memory limits, strftime_now at a given time, the
 * variables of tx_chat_template_vars, tx_chat_template_of_config, and two
 * threads rendering one compiled template at once. (Byte-exactness against
 * Jinja2 is tests/chat-template/check-jinja's.)
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_jinja.h>
#include "tx_test_main.h"

static char *render(const char *tmpl, const char *vars, struct tx_jinja_opts *o, int *rc,
                    char *err, size_t errsz)
{
    struct tx_jinja *t = NULL;
    char *out = NULL;
    size_t n = 0;
    *rc = tx_jinja_compile(tmpl, strlen(tmpl), &t, err, errsz);
    if (*rc)
        return NULL;
    *rc = tx_jinja_render(t, vars, vars ? strlen(vars) : 0, o, &out, &n, err, errsz);
    tx_jinja_free(t);
    if (!*rc)
        ck_assert_uint_eq(strlen(out), n);
    return out;
}

START_TEST(renders_and_errors)
{
    char err[512];
    int rc;
    char *s = render("{% for m in messages %}{{ loop.index }}:{{ m.content|upper }} {% endfor %}",
                     "{\"messages\": [{\"content\": \"a\"}, {\"content\": \"\\u00e9\"}]}", NULL,
                     &rc, err, sizeof(err));
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(s, "1:A 2:\xc3\x89 ");
    free(s);
    s = render("x\n  {% include 'y' %}", NULL, NULL, &rc, err, sizeof(err));
    ck_assert_int_eq(rc, TX_ENOTSUP);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err, "line 2, column 6: unsupported tag '{% include %}'"), "%s", err);
    s = render("{{ a.b }}", "{}", NULL, &rc, err, sizeof(err));
    ck_assert_ptr_null(s);
    ck_assert_int_eq(rc, TX_EINVAL);
    ck_assert_msg(strstr(err, "line 1, column 5: 'a' is undefined"), "%s", err);
    s = render("{{ x }}", "[1]", NULL, &rc, err, sizeof(err));
    ck_assert_ptr_null(s);
    ck_assert_int_eq(rc, TX_EINVAL);
    struct tx_jinja *t = NULL;
    ck_assert_int_eq(tx_jinja_compile(NULL, 1, &t, err, sizeof(err)), TX_EINVAL);
    ck_assert_int_eq(tx_jinja_compile("a\0b", 3, &t, err, sizeof(err)), TX_EINVAL);
    ck_assert_int_eq(tx_jinja_compile("{% if %}", 8, &t, err, sizeof(err)), TX_EINVAL);
    ck_assert_ptr_null(t);
    tx_jinja_free(NULL);
}
END_TEST

START_TEST(raise_exception)
{
    char err[512];
    int rc;
    struct tx_jinja_opts o = {0};
    char *s = render("a{{ raise_exception('roles must alternate (' ~ n ~ ')') }}", "{\"n\": 3}", &o,
                     &rc, err, sizeof(err));
    ck_assert_ptr_null(s);
    ck_assert_int_eq(rc, TX_EINVAL);
    ck_assert_int_eq(o.raised, 1);
    ck_assert_str_eq(err, "roles must alternate (3)");
    s = render("{{ 1 + 'a' }}", "{}", &o, &rc, err, sizeof(err));
    ck_assert_ptr_null(s);
    ck_assert_int_eq(o.raised, 0);
}
END_TEST

START_TEST(limits)
{
    char err[512];
    int rc;
    struct tx_jinja_opts o = {.max_steps = 10000};
    char *s = render("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
                     "{}", &o, &rc, err, sizeof(err));
    ck_assert_ptr_null(s);
    ck_assert_int_eq(rc, TX_ETIMEDOUT);
    ck_assert_msg(strstr(err, "step limit"), "%s", err);
    o = (struct tx_jinja_opts){.max_output = 1000};
    s = render("{% for i in range(100) %}0123456789abcdef{% endfor %}", "{}", &o, &rc, err,
               sizeof(err));
    ck_assert_ptr_null(s);
    ck_assert_int_eq(rc, TX_ENOMEM);
    ck_assert_msg(strstr(err, "output limit"), "%s", err);
    o = (struct tx_jinja_opts){.max_memory = 1 << 20};
    s = render("{% set ns = namespace(s='x' * 1000) %}{% for i in range(30) %}"
               "{% set ns.s = ns.s + ns.s %}{% endfor %}",
               "{}", &o, &rc, err, sizeof(err));
    ck_assert_ptr_null(s);
    ck_assert_int_eq(rc, TX_ENOMEM);
    ck_assert_msg(strstr(err, "memory limit"), "%s", err);
    s = render("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "{}", NULL, &rc, err,
               sizeof(err));
    ck_assert_ptr_null(s);
    ck_assert_int_eq(rc, TX_EINVAL);
    ck_assert_msg(strstr(err, "nested more than"), "%s", err);
}
END_TEST

START_TEST(strftime_now_at)
{
    char err[512];
    int rc;
    setenv("TZ", "UTC", 1);
    struct tx_jinja_opts o = {.now = 1700000000}; /* 2023-11-14 22:13:20 UTC */
    char *s = render("{{ strftime_now('%Y-%m-%d %d %b %Y') }}", "{}", &o, &rc, err, sizeof(err));
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(s, "2023-11-14 14 Nov 2023");
    free(s);
}
END_TEST

START_TEST(chat_vars)
{
    char err[512], *vars = NULL, *tmpl = NULL;
    const char *tc = "{\"bos_token\": {\"content\": \"<s>\"}, \"eos_token\": \"</s>\", "
                     "\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, "
                     "{\"name\": \"default\", \"template\": \"{{ bos_token }}D\"}]}";
    ck_assert_int_eq(tx_chat_template_vars(tc, "[{\"role\": \"user\", \"content\": \"hi\"}]", NULL,
                                           1, "{\"enable_thinking\": false, "
                                              "\"add_generation_prompt\": false}",
                                           &vars, err, sizeof(err)),
                     0);
    ck_assert_str_eq(vars, "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"messages\":[{\"role\":"
                           "\"user\",\"content\":\"hi\"}],\"tools\":null,\"documents\":null,"
                           "\"add_generation_prompt\":false,\"enable_thinking\":false}");
    free(vars);
    ck_assert_int_eq(tx_chat_template_vars(NULL, "{}", NULL, 1, NULL, &vars, err, sizeof(err)),
                     TX_EINVAL);
    ck_assert_int_eq(tx_chat_template_of_config(tc, &tmpl, err, sizeof(err)), 0);
    ck_assert_str_eq(tmpl, "{{ bos_token }}D");
    free(tmpl);
    ck_assert_int_eq(tx_chat_template_of_config("{\"x\": 1}", &tmpl, err, sizeof(err)), TX_ENOENT);
    ck_assert_int_eq(tx_chat_template_of_config("{", &tmpl, err, sizeof(err)), TX_EINVAL);
}
END_TEST

struct job {
    const struct tx_jinja *t;
    int ok;
};

static void *worker(void *p)
{
    struct job *j = p;
    const char *vars = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}";
    j->ok = 1;
    for (int i = 0; i < 200; i++) {
        char *out = NULL, err[256];
        size_t n = 0;
        if (tx_jinja_render(j->t, vars, strlen(vars), NULL, &out, &n, err, sizeof(err)) ||
            strcmp(out, "user=x|user=x|"))
            j->ok = 0;
        free(out);
    }
    return NULL;
}

START_TEST(threads)
{
    struct tx_jinja *t = NULL;
    char err[256];
    const char *src = "{% set ns = namespace(s='') %}{% for k in range(2) %}{% for m in messages %}"
                      "{% set ns.s = ns.s ~ m.role ~ '=' ~ m.content ~ '|' %}{% endfor %}"
                      "{% endfor %}{{ ns.s }}";
    ck_assert_int_eq(tx_jinja_compile(src, strlen(src), &t, err, sizeof(err)), 0);
    struct job a = {t, 0}, b = {t, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, worker, &a);
    pthread_create(&tb, NULL, worker, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert(a.ok && b.ok);
    tx_jinja_free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jinja");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, renders_and_errors);
    tcase_add_test(tc, raise_exception);
    tcase_add_test(tc, limits);
    tcase_add_test(tc, strftime_now_at);
    tcase_add_test(tc, chat_vars);
    tcase_add_test(tc, threads);
    suite_add_tcase(s, tc);
    return tx_test_run(s);
}
