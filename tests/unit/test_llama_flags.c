/* SPDX-License-Identifier: MIT */
/*
 * llama.cpp's command lines on glm-inference and glm-server (issue 42):
 *
 * - txc_llama_flags (tools/lib/llama_flags.c) rewrites argv: the
 *   multi-letter short forms become the tools' options, values and "--"
 *   are left alone, no-ops are dropped and noted once, unsupported flags
 *   refused;
 * - every line of tests/unit/data/llama-cmdlines/corpus.txt (real
 *   llama-cli, llama-server and llama-bench command lines) runs against the
 *   binaries with the test's package and a device that does not exist: an
 *   accepted line gets as far as opening the device (every check before it
 *   passed), a refused one exits 2 with one line naming the flag;
 * - an unknown option, a missing value or a value given to a switch prints
 *   one line and "try --help", exit 2, in every tool that parses options
 *   with txc_getopt;
 * - --version on every tool: the release, the git commit, the TX8
 *   hardware interface.
 */
#include <check.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wordexp.h>

#include <tx/tx.h>

#include <tx8/tx8_hw.h>

#include "common/cli.h"
#include "common/llama_flags.h"
#include "test_runtime_synth.h"
#include "tx_test_main.h"

static char g_smd[300];    /* a tiny GLM-5.1 package */
static char g_prompt[300]; /* a prompt file */

static void fixture_setup(void)
{
    char ck[300];
    snprintf(ck, sizeof(ck), "%s/ck", rts_tmpdir());
    snprintf(g_smd, sizeof(g_smd), "%s/m.smd", rts_tmpdir());
    snprintf(g_prompt, sizeof(g_prompt), "%s/prompt.txt", rts_tmpdir());
    if (rts_write_checkpoint(ck, GLM_ARCH_GLM_MOE_DSA, NULL) || rts_export(ck, g_smd, "none"))
        ck_abort_msg("cannot make the test package");
    FILE *f = fopen(g_prompt, "w");
    ck_assert_ptr_nonnull(f);
    fputs("User: Hello, Bob.\nBob:", f);
    fclose(f);
}

static void fixture_teardown(void)
{
    rts_cleanup();
}

/* ---- txc_llama_flags ------------------------------------------------------ */

static const struct option t_lo[] = {
    {"system", required_argument, NULL, 1},
    {"interactive", no_argument, NULL, 'i'},
    {"prompt", required_argument, NULL, 'p'},
    {"chat", no_argument, NULL, 2},
    {NULL, 0, NULL, 0},
};
static const struct txc_llama_flag t_tab[] = {
    {"-sys|--system-prompt", TXC_LLAMA_ALIAS, TXC_LLAMA_REQUIRED, "--system"},
    {"-cnv", TXC_LLAMA_ALIAS, TXC_LLAMA_NONE, "--interactive"},
    {NULL, 0, 0, NULL},
};

/* runs txc_llama_flags on the words of line; the result joined by ' ' */
static int rewrite(const char *line, char *out, size_t outsz, const char *errfile)
{
    wordexp_t w;
    ck_assert_int_eq(wordexp(line, &w, WRDE_NOCMD), 0);
    int argc = (int)w.we_wordc;
    char **argv = calloc((size_t)argc + 1, sizeof(char *));
    memcpy(argv, w.we_wordv, (size_t)argc * sizeof(char *));
    fflush(stderr);
    int saved = dup(2);
    int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    int rc = txc_llama_flags("t", &argc, argv, "p:ih", t_lo, t_tab);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    out[0] = 0;
    for (int i = 0; i < argc; i++) {
        strncat(out, argv[i], outsz - strlen(out) - 1);
        if (i + 1 < argc)
            strncat(out, " ", outsz - strlen(out) - 1);
    }
    ck_assert_ptr_null(argv[argc]);
    free(argv);
    wordfree(&w);
    return rc;
}

static char *slurp(const char *path)
{
    char *b = tx_test_slurp(path, 1 << 16);
    ck_assert_ptr_nonnull(b);
    return b;
}

static int count(const char *s, const char *sub)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, sub)); p++)
        n++;
    return n;
}

START_TEST(rewrite_argv)
{
    char out[512], ef[320];
    snprintf(ef, sizeof(ef), "%s/err", rts_tmpdir());
    /* aliases, values kept, no-ops dropped with their values and noted once */
    ck_assert_int_eq(rewrite("x -ngl 99 -sys 'be brief' -cnv -ngl 5 -fa on -p -ngl --color", out,
                             sizeof(out), ef),
                     -1);
    ck_assert_str_eq(out, "x --system be brief --interactive -p -ngl");
    char *e = slurp(ef);
    ck_assert_int_eq(count(e, "note: -ngl: no effect here"), 1);
    ck_assert_int_eq(count(e, "note: -fa"), 1);
    ck_assert_int_eq(count(e, "note: --color"), 1);
    free(e);
    /* =VALUE spellings; -fa takes a following word only if it is a setting */
    ck_assert_int_eq(
        rewrite("x --system-prompt=hi --n-gpu-layers=3 -fa -p on", out, sizeof(out), ef), -1);
    ck_assert_str_eq(out, "x --system=hi -p on");
    /* after "--" nothing is touched; a value of -p is not a flag */
    ck_assert_int_eq(rewrite("x -p -cnv -- -ngl -sys", out, sizeof(out), ef), -1);
    ck_assert_str_eq(out, "x -p -cnv -- -ngl -sys");
    /* --log-disable is dropped without a note */
    ck_assert_int_eq(rewrite("x --log-disable", out, sizeof(out), ef), -1);
    ck_assert_str_eq(out, "x");
    e = slurp(ef);
    ck_assert_str_eq(e, "");
    free(e);
    /* unsupported, a missing value, a value on a switch: exit 2, one line */
    ck_assert_int_eq(rewrite("x --lora a.gguf", out, sizeof(out), ef), 2);
    e = slurp(ef);
    ck_assert_str_eq(e, "t: --lora: not supported here: adapters are not applied to a package; "
                        "try --help\n");
    free(e);
    ck_assert_int_eq(rewrite("x -ngl", out, sizeof(out), ef), 2);
    e = slurp(ef);
    ck_assert_str_eq(e, "t: -ngl: needs a value; try --help\n");
    free(e);
    ck_assert_int_eq(rewrite("x --mlock=1", out, sizeof(out), ef), 2);
    e = slurp(ef);
    ck_assert_str_eq(e, "t: --mlock: takes no value; try --help\n");
    free(e);
}
END_TEST

/* ---- the corpus ------------------------------------------------------------ */

struct res {
    int rc;
    char *err;
};

/* runs argv with stdout to out (NULL: /dev/null), stderr kept in the result */
static struct res run_to(char *const *argv, const char *out)
{
    char ef[320];
    snprintf(ef, sizeof(ef), "%s/run.err", rts_tmpdir());
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int e = open(ef, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int n = open("/dev/null", O_RDWR);
        if (e < 0 || n < 0)
            _exit(126);
        int o = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : n;
        if (o < 0)
            _exit(126);
        dup2(n, 0);
        dup2(o, 1);
        dup2(e, 2);
        unsetenv("TX_DEVICE");
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    struct res r = {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), slurp(ef)};
    return r;
}

static struct res run(char *const *argv)
{
    return run_to(argv, NULL);
}

static const char *bin(const char *name)
{
    static char b[4][300];
    static int k;
    return tx_test_bin(name, b[k++ & 3], sizeof(b[0]));
}

START_TEST(corpus)
{
    FILE *f = fopen("tests/unit/data/llama-cmdlines/corpus.txt", "r");
    ck_assert_msg(f != NULL, "tests/unit/data/llama-cmdlines/corpus.txt: run from the tree");
    char line[2048];
    int n_ok = 0, n_refused = 0;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        wordexp_t w;
        ck_assert_msg(wordexp(line, &w, WRDE_NOCMD) == 0, "cannot split: %s", line);
        ck_assert_uint_ge(w.we_wordc, 2);
        const char *expect = w.we_wordv[0], *tool = w.we_wordv[1];
        int bench = !strcmp(tool, "llama-bench");
        char *argv[128];
        int a = 0;
        argv[a++] = (char *)bin(bench ? "glm-inference" : tool);
        if (bench)
            argv[a++] = "--bench";
        for (size_t i = 2; i < w.we_wordc && a < 120; i++) {
            const char *v = w.we_wordv[i];
            argv[a++] = w.we_wordv[i];
            if (i + 1 < w.we_wordc && (!strcmp(v, "-m") || !strcmp(v, "--model"))) {
                argv[a++] = g_smd;
                i++;
            } else if (i + 1 < w.we_wordc && (!strcmp(v, "-f") || !strcmp(v, "--file"))) {
                argv[a++] = g_prompt;
                i++;
            }
        }
        argv[a++] = "--device";
        argv[a++] = "emu:/nonexistent/tx8-llama-flags.sock";
        argv[a] = NULL;
        struct res r = run(argv);
        if (!strcmp(expect, "ok")) {
            ck_assert_msg(r.rc == 1 && strstr(r.err, "cannot open device emu:/nonexistent"),
                          "%s\n  expected to reach the device (exit 1), got exit %d:\n%s", line,
                          r.rc, r.err);
            ck_assert_msg(!strstr(r.err, "try --help"), "%s: %s", line, r.err);
            /* each no-op noted at most once */
            ck_assert_msg(count(r.err, "note: -ngl") <= 1, "%s: %s", line, r.err);
            n_ok++;
        } else {
            ck_assert_msg(!strncmp(expect, "refused:", 8), "bad EXPECT: %s", expect);
            /* one line, after the notes of the no-ops before the refused flag */
            ck_assert_msg(r.rc == 2 && strstr(r.err, expect + 8) &&
                              count(r.err, "\n") == 1 + count(r.err, ": note: "),
                          "%s\n  expected exit 2 and one line with '%s', got exit %d:\n%s", line,
                          expect + 8, r.rc, r.err);
            n_refused++;
        }
        free(r.err);
        wordfree(&w);
    }
    fclose(f);
    ck_assert_int_ge(n_ok, 20);
    ck_assert_int_ge(n_refused, 5);
    printf("[llama_flags] corpus: %d command lines accepted, %d refused as expected\n", n_ok,
           n_refused);
}
END_TEST

/* ---- errors ------------------------------------------------------------------ */

START_TEST(unknown_option_one_line)
{
    static const struct {
        const char *tool, *arg, *want;
    } c[] = {
        {"glm-inference", "--bogus", "glm-inference: unknown option '--bogus'; try --help\n"},
        {"glm-inference", "-q", "glm-inference: unknown option '-q'; try --help\n"},
        {"glm-inference", "--chat=yes", "glm-inference: --chat: takes no value; try --help\n"},
        {"glm-inference", "--temp", "glm-inference: --temp: needs a value; try --help\n"},
        {"glm-inference", "--top", "glm-inference: option '--top' is ambiguous; try --help\n"},
        {"glm-inference", "-ivq", "glm-inference: unknown option '-q'; try --help\n"},
        {"glm-server", "--bogus", "glm-server: unknown option '--bogus'; try --help\n"},
        {"glm-export", "--bogus", "glm-export: unknown option '--bogus'; try --help\n"},
        {"glm-synth", "--bogus", "glm-synth: unknown option '--bogus'; try --help\n"},
        {"glm-tokenize", "--bogus", "glm-tokenize: unknown option '--bogus'; try --help\n"},
        {"glm-analyze", "--bogus", "glm-analyze: unknown option '--bogus'; try --help\n"},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        char *argv[] = {(char *)bin(c[i].tool), (char *)c[i].arg, NULL};
        struct res r = run(argv);
        ck_assert_msg(r.rc == 2, "%s %s: exit %d", c[i].tool, c[i].arg, r.rc);
        ck_assert_str_eq(r.err, c[i].want);
        free(r.err);
    }
}
END_TEST

/* every tool: its name, the release, the git commit, the interface */
START_TEST(version_every_tool)
{
    static const char *tools[] = {"glm-inference", "glm-server",  "glm-export", "glm-synth",
                                  "glm-tokenize",  "glm-analyze", "tuna",       "tx-top",
                                  "tx-bench",      "tx8-emu"};
    char want[128];
    snprintf(want, sizeof(want), "(git commit %s, TX8 hardware interface %d.%d)\n",
             txc_git_commit(), TX8_IF_VERSION_MAJOR, TX8_IF_VERSION_MINOR);
    ck_assert_str_ne(txc_git_commit(), ""); /* "unknown" outside a git tree */
    for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
        char out[320];
        snprintf(out, sizeof(out), "%s/version.out", rts_tmpdir());
        char *argv[] = {(char *)bin(tools[i]), "--version", NULL};
        struct res r = run_to(argv, out);
        char *o = slurp(out);
        ck_assert_msg(r.rc == 0, "%s --version: exit %d: %s", tools[i], r.rc, r.err);
        char head[64];
        snprintf(head, sizeof(head), "%s %s ", tools[i], txc_version());
        ck_assert_msg(!strncmp(o, head, strlen(head)) && strstr(o, want), "%s --version: '%s'",
                      tools[i], o);
        free(o);
        free(r.err);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("llama_flags");
    TCase *t = tcase_create("flags");
    tcase_add_unchecked_fixture(t, fixture_setup, fixture_teardown);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, rewrite_argv);
    tcase_add_test(t, corpus);
    tcase_add_test(t, unknown_option_one_line);
    tcase_add_test(t, version_every_tool);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
