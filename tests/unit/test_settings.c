/* SPDX-License-Identifier: MIT */
/*
 * libtx's settings tables (libtx/common/settings.h, docs/settings.md): every
 * entry of every table is documented on the one page; words, ranges,
 * strict and lenient values, empty variables; what the model-load table
 * does to glm_load_options (runtime/load_options.c); the TX_DEBUG lines;
 * the compute engine's table (emu/engine/settings.h), read once at its
 * creation.
 */
#include <check.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tx-internal/tx_errors.h>
#include "common/settings.h"
#include "engine/engine_internal.h"
#include "runtime/rt_internal.h"
#include "tx_test_main.h"

static const struct tx_setting_table *const tables[] = {
    &tx_settings_common,    &tx_settings_profile,   &tx_settings_device,
    &tx_settings_telemetry, &tx_settings_cpu_cache, &tx_settings_load,
};
#define NTABLES (sizeof(tables) / sizeof(tables[0]))

/* the whole of docs/settings.md (the tests run from the tree's root or
 * from BUILD/tests) */
static char *read_doc(void)
{
    char path[4096], exe[4096];
    FILE *f = fopen("docs/settings.md", "r");
    if (!f) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        ck_assert_int_gt(n, 0);
        exe[n] = 0;
        snprintf(path, sizeof(path), "%s/../../docs/settings.md", dirname(exe));
        f = fopen(path, "r");
    }
    ck_assert_msg(f != NULL, "docs/settings.md not found");
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

START_TEST(every_setting_documented)
{
    const char *doc = read_doc();
    char row[128];
    for (size_t t = 0; t < NTABLES; t++) {
        ck_assert_msg(strstr(doc, tables[t]->component), "component '%s' not in docs/settings.md",
                      tables[t]->component);
        for (size_t i = 0; i < tables[t]->n; i++) {
            const struct tx_setting *s = &tables[t]->s[i];
            snprintf(row, sizeof(row), "| `%s` |", s->name);
            ck_assert_msg(strstr(doc, row), "%s (%s) has no row in docs/settings.md", s->name,
                          tables[t]->component);
            ck_assert_ptr_nonnull(s->doc);
            ck_assert_ptr_nonnull(s->def);
            ck_assert_msg(!s->strict || s->expected, "%s: strict without its message", s->name);
        }
    }
    ck_assert_msg(strstr(doc, "### engine"), "the engine's table not in docs/settings.md");
    for (size_t i = 0; i < eng_settings_count; i++) {
        const struct eng_setting *s = &eng_settings_table[i];
        snprintf(row, sizeof(row), "| `%s` |", s->name);
        ck_assert_msg(strstr(doc, row), "%s (engine) has no row in docs/settings.md", s->name);
        ck_assert_ptr_nonnull(s->doc);
        ck_assert_ptr_nonnull(s->def);
    }
}
END_TEST

/* an engine on 64 MiB of anonymous memory, portable ISA (any CPU) */
static struct tx8_engine *engine_new(void **mem)
{
    const uint64_t size = 64ull << 20;
    *mem = aligned_alloc(4096, size);
    ck_assert_ptr_nonnull(*mem);
    struct tx8_engine_config cfg = {.cores = 1, .numa_node = -1, .isa = TX8_ISA_PORTABLE};
    struct tx8_engine *e = NULL;
    ck_assert_int_eq(tx8_engine_create(&e, *mem, size, 1 << 20, &cfg, NULL), 0);
    return e;
}

/* the engine reads its environment once, at creation: later changes of
 * the environment do not reach it; tx8_engine_setting changes only the
 * per-command settings */
START_TEST(engine_reads_once)
{
    void *mem;
    setenv("TX8_ATTN_TILE", "0", 1);
    setenv("TX8_DSA_TILE", "1", 1);
    setenv("TX8_ATTN_DECODE", "", 1); /* empty: unset */
    setenv("TX8_ENGINE_MOE_UNFUSED", "1", 1);
    setenv("TX8_GEMV_PREFETCH", "maybe", 1); /* not 0 or 1: the default */
    struct tx8_engine *e = engine_new(&mem);
    unsetenv("TX8_ATTN_TILE");
    setenv("TX8_DSA_TILE", "0", 1);
    unsetenv("TX8_ATTN_DECODE");
    unsetenv("TX8_ENGINE_MOE_UNFUSED");
    unsetenv("TX8_GEMV_PREFETCH");
    ck_assert_int_eq(e->set.attn_tile, 0);
    ck_assert_int_eq(e->set.dsa_tile, -1);
    ck_assert_int_eq(e->set.attn_decode, -1);
    ck_assert_int_eq(e->moe_unfused, 1);
    ck_assert_int_eq(e->set.gemv_prefetch, -1);
    /* the per-command ones change on the live engine, the others do not */
    ck_assert_int_eq(tx8_engine_setting(e, "TX8_ATTN_TILE", NULL), 0);
    ck_assert_int_eq(e->set.attn_tile, -1);
    ck_assert_int_eq(tx8_engine_setting(e, "TX8_DSA_TILE", "0"), 0);
    ck_assert_int_eq(e->set.dsa_tile, 0);
    ck_assert_int_eq(tx8_engine_setting(e, "TX8_ATTN_DECODE", "07"), 0);
    ck_assert_int_eq(e->set.attn_decode, 0);
    ck_assert_int_eq(tx8_engine_setting(e, "TX8_ENGINE_ISA", "avx2"), -EINVAL);
    ck_assert_int_eq(tx8_engine_setting(e, "TX8_ENGINE_MOE_UNFUSED", "0"), -EINVAL);
    ck_assert_int_eq(tx8_engine_setting(e, "TX8_NO_SUCH", "0"), -EINVAL);
    ck_assert_int_eq(tx8_engine_setting(NULL, "TX8_DSA_TILE", "0"), -EINVAL);
    ck_assert_int_eq(e->moe_unfused, 1);
    tx8_engine_destroy(e);
    free(mem);
    unsetenv("TX8_DSA_TILE");
    ck_assert_ptr_null(tx8_engine_setting_env("TX8_DSA_TILE"));
    setenv("TX8_DSA_TILE", "0", 1);
    ck_assert_str_eq(tx8_engine_setting_env("TX8_DSA_TILE"), "0");
    ck_assert_ptr_null(tx8_engine_setting_env("HOME")); /* not the engine's */
    unsetenv("TX8_DSA_TILE");
}
END_TEST

START_TEST(words_ranges_strictness)
{
    struct tx_setting_val v[8];
    /* a strict word: a bad value fails, naming it */
    setenv("TX_MLA_FORM", "sideways", 1);
    ck_assert_int_eq(tx_settings_read(&tx_settings_load, "who", v), TX_EINVAL);
    ck_assert_str_eq(tx_last_error(), "who: TX_MLA_FORM=sideways: expected absorbed, expanded or "
                                      "auto");
    setenv("TX_MLA_FORM", "expanded", 1);
    setenv("TX_DECODE_GRAPH", "verify", 1);
    setenv("TX_GLM_LOAD_IO", "sometimes", 1); /* lenient: ignored */
    setenv("TX_BATCH_INVARIANT", "", 1);      /* empty: unset */
    ck_assert_int_eq(tx_settings_read(&tx_settings_load, "who", v), TX_OK);
    ck_assert_int_eq(v[1].set, 1);
    ck_assert_int_eq(v[1].word, 1);
    ck_assert_int_eq(v[2].word, 4);
    ck_assert_int_eq(v[3].set, 0);
    ck_assert_int_eq(v[4].set, 0);
    ck_assert_int_eq(v[4].word, -1);
    unsetenv("TX_MLA_FORM");
    unsetenv("TX_DECODE_GRAPH");
    unsetenv("TX_GLM_LOAD_IO");
    unsetenv("TX_BATCH_INVARIANT");
    /* a lenient number: outside its range, the default */
    const char *bad[] = {"0", "86400000", "abc", "-5", "12x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("TX_SUBMIT_TIMEOUT_MS", bad[i], 1);
        ck_assert_int_eq(tx_settings_read(&tx_settings_device, "who", v), TX_OK);
        ck_assert_msg(!v[0].set, "TX_SUBMIT_TIMEOUT_MS=%s taken", bad[i]);
    }
    setenv("TX_SUBMIT_TIMEOUT_MS", "86399999", 1);
    ck_assert_int_eq(tx_settings_read(&tx_settings_device, "who", v), TX_OK);
    ck_assert_int_eq(v[0].set, 1);
    ck_assert_uint_eq(v[0].num, 86399999);
    unsetenv("TX_SUBMIT_TIMEOUT_MS");
}
END_TEST

/* the model-load table into glm_load_options: a set variable overrides
 * the flags it names, and only those */
START_TEST(load_options_from_the_environment)
{
    struct glm_load_options in, o;
    memset(&in, 0, sizeof(in));
    in.flags = GLM_LOAD_MLA_ABSORBED | GLM_LOAD_DIRECT | GLM_LOAD_BATCH_INVARIANT;
    in.io_depth = 7;
    ck_assert_int_eq(rt_load_options(&in, &o), TX_OK);
    ck_assert_uint_eq(o.flags, in.flags);
    ck_assert_uint_eq(o.io_depth, 7);
    setenv("TX_MLA_FORM", "expanded", 1);
    setenv("TX_ATTENTION_BF16", "0", 1);
    setenv("TX_GLM_LOAD_IO", "buffered", 1);
    setenv("TX_BATCH_INVARIANT", "0", 1); /* 0: the flag as given */
    setenv("TX_DECODE_GRAPH", "off", 1);
    ck_assert_int_eq(rt_load_options(&in, &o), TX_OK);
    ck_assert_uint_eq(o.flags, GLM_LOAD_MLA_EXPANDED | GLM_LOAD_NO_ATTENTION_BF16 |
                                   GLM_LOAD_BATCH_INVARIANT | GLM_LOAD_NO_DECODE_GRAPH);
    setenv("TX_ATTENTION_BF16", "1", 1);
    setenv("TX_MLA_FORM", "auto", 1);
    setenv("TX_DECODE_GRAPH", "verify", 1);
    setenv("TX_GLM_LOAD_IO", "pread", 1);
    in.flags = GLM_LOAD_NO_ATTENTION_BF16 | GLM_LOAD_MLA_EXPANDED | GLM_LOAD_NO_DECODE_GRAPH;
    ck_assert_int_eq(rt_load_options(&in, &o), TX_OK);
    ck_assert_uint_eq(o.flags, GLM_LOAD_DECODE_GRAPH_VERIFY | GLM_LOAD_NO_URING);
    unsetenv("TX_ATTENTION_BF16");
    unsetenv("TX_MLA_FORM");
    unsetenv("TX_DECODE_GRAPH");
    unsetenv("TX_GLM_LOAD_IO");
    unsetenv("TX_BATCH_INVARIANT");
    /* TX_DSA_QUERY_Q8: 0 sets GLM_LOAD_NO_DSA_QUERY_Q8, 1 clears it, other
     * values (which always meant 8-bit) leave the flag as given */
    in.flags = 0;
    setenv("TX_DSA_QUERY_Q8", "0", 1);
    ck_assert_int_eq(rt_load_options(&in, &o), TX_OK);
    ck_assert_uint_eq(o.flags, GLM_LOAD_NO_DSA_QUERY_Q8);
    setenv("TX_DSA_QUERY_Q8", "yes", 1);
    ck_assert_int_eq(rt_load_options(&in, &o), TX_OK);
    ck_assert_uint_eq(o.flags, 0);
    in.flags = GLM_LOAD_NO_DSA_QUERY_Q8;
    setenv("TX_DSA_QUERY_Q8", "1", 1);
    ck_assert_int_eq(rt_load_options(&in, &o), TX_OK);
    ck_assert_uint_eq(o.flags, 0);
    unsetenv("TX_DSA_QUERY_Q8");
    /* contradictory flags */
    in.flags = GLM_LOAD_MLA_ABSORBED | GLM_LOAD_MLA_EXPANDED;
    ck_assert_int_eq(rt_load_options(&in, &o), TX_EINVAL);
    ck_assert_ptr_nonnull(strstr(tx_last_error(), "GLM_LOAD_MLA_ABSORBED"));
    in.flags = GLM_LOAD_NO_DECODE_GRAPH | GLM_LOAD_DECODE_GRAPH_VERIFY;
    ck_assert_int_eq(rt_load_options(&in, &o), TX_EINVAL);
    ck_assert_int_eq(rt_load_options(NULL, &o), TX_OK);
    ck_assert_uint_eq(o.flags, 0);
}
END_TEST

/* TX_DEBUG=1: each read prints its settings (a fresh process: TX_DEBUG is
 * read once per process) */
START_TEST(debug_prints_the_settings)
{
    const char *fork_mode = getenv("CK_FORK");
    if (fork_mode && !strcmp(fork_mode, "no")) {
        printf("[settings] SKIP the TX_DEBUG lines: CK_FORK=no (TX_DEBUG is read once per "
               "process)\n");
        return;
    }
    setenv("TX_DEBUG", "1", 1);
    setenv("TX_SUBMIT_TIMEOUT_MS", "250", 1);
    setenv("TX_DEVICE", "", 1);
    char tmpl[] = "/tmp/tx-settings-XXXXXX";
    int fd = mkstemp(tmpl);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    struct tx_setting_val v[2];
    ck_assert_int_eq(tx_settings_read(&tx_settings_device, "who", v), TX_OK);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[4096];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    unlink(tmpl);
    ck_assert_int_gt(n, 0);
    buf[n] = 0;
    ck_assert_msg(strstr(buf, "settings (common): TX_DEBUG=1 (environment)"), "%s", buf);
    ck_assert_msg(strstr(buf, "settings (device): TX_SUBMIT_TIMEOUT_MS=250 (environment)"), "%s",
                  buf);
    ck_assert_msg(strstr(buf, "settings (device): TX_DEVICE default "), "%s", buf);
    /* the engine's table, at its creation */
    setenv("TX8_ATTN_DECODE", "0", 1);
    setenv("TX8_ATTN_BF16_DOT", "fp64", 1);
    char tmpl2[] = "/tmp/tx-settings-XXXXXX";
    fd = mkstemp(tmpl2);
    ck_assert_int_ge(fd, 0);
    saved = dup(2);
    dup2(fd, 2);
    void *mem;
    tx8_engine_destroy(engine_new(&mem));
    free(mem);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    unlink(tmpl2);
    ck_assert_int_gt(n, 0);
    buf[n] = 0;
    ck_assert_msg(strstr(buf, "tx8-engine: settings (engine): TX8_ATTN_DECODE=0 (environment)"),
                  "%s", buf);
    ck_assert_msg(strstr(buf, "tx8-engine: settings (engine): TX8_ATTN_BF16_DOT=fp64 ignored: not "
                              "f32|vdpbf16ps; default "),
                  "%s", buf);
    ck_assert_msg(strstr(buf, "tx8-engine: settings (engine): TX8_DSA_TILE default on"), "%s", buf);
    unsetenv("TX8_ATTN_DECODE");
    unsetenv("TX8_ATTN_BF16_DOT");
    unsetenv("TX_DEBUG");
    unsetenv("TX_SUBMIT_TIMEOUT_MS");
    unsetenv("TX_DEVICE");
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {every_setting_documented, words_ranges_strictness,
                                  load_options_from_the_environment, debug_prints_the_settings,
                                  engine_reads_once};
    return tx_test_main("settings", tests, sizeof(tests) / sizeof(tests[0]));
}
