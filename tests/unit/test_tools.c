/* SPDX-License-Identifier: MIT */
/*
 * Bad input and trust, as a user meets them through the tools (issue 8,
 * section 5): the binaries of the build tree run against a tiny synthetic
 * GLM-5.1 package on a tx8-emu started for this program.
 *
 * - flipped bytes in tensor data fail the load, --validate, and
 *   glm-inference / glm-export --verify with a message naming the tensor;
 * - numeric options: -n 0 generates nothing, -n -1 runs to the end of the
 *   context, wrap-around and nan are refused; every error names the option
 *   and its accepted range, in every tool;
 * - a tx8-emu that dies mid-generation gives one line naming the device;
 * - SIGINT during generation prints the timings, exits 130 and removes the
 *   model's telemetry file; glm-export killed with SIGKILL leaves no
 *   temporary file; a truncated tokenizer makes no package;
 * - --expert-stats and --memory-view write to stderr, stdout carries only
 *   the generated text;
 * - build/lib/pkgconfig/libtx-uninstalled.pc builds and runs a program
 *   against the tree; the prefixed precision names compile beside a
 *   conflicting FP16 macro.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <json-c/json.h>
#include <tx/tx.h>

#include "test_runtime_synth.h"
#include "tx_test_main.h"

static char g_smd[300];  /* GLM-5.1 tiny, FP32 */
static char g_smd8[300]; /* the same, golden (INT8 with scales) */
static char g_ck[300];   /* its checkpoint directory */

static void fixture_setup(void)
{
    if (rts_device_setup("256M"))
        ck_abort_msg("cannot start tx8-emu");
    snprintf(g_ck, sizeof(g_ck), "%s/ck", rts_tmpdir());
    snprintf(g_smd, sizeof(g_smd), "%s/m.smd", rts_tmpdir());
    snprintf(g_smd8, sizeof(g_smd8), "%s/m8.smd", rts_tmpdir());
    if (rts_write_checkpoint(g_ck, GLM_ARCH_GLM_MOE_DSA, NULL) || rts_export(g_ck, g_smd, "none") ||
        rts_export(g_ck, g_smd8, "int8"))
        ck_abort_msg("cannot make the test packages");
}

static void fixture_teardown(void)
{
    rts_device_teardown();
    rts_cleanup();
}

/* ---- running the tools ---------------------------------------------------- */

static char t_dir[128]; /* per test */

static void t_setup(void)
{
    snprintf(t_dir, sizeof(t_dir), "%s/t-XXXXXX", rts_tmpdir());
    ck_assert_ptr_nonnull(mkdtemp(t_dir));
}

static void t_teardown(void)
{
    tx_test_rmtree(t_dir);
}

static const char *tpath(const char *name)
{
    static char b[32][400];
    static int k;
    char *p = b[k++ & 31];
    snprintf(p, 400, "%s/%s", t_dir, name);
    return p;
}

static char *slurp(const char *path)
{
    char *b = tx_test_slurp(path, 1 << 20);
    ck_assert_ptr_nonnull(b);
    return b;
}

static const char *bin(const char *name)
{
    static char b[4][300];
    static int k;
    return tx_test_bin(name, b[k++ & 3], sizeof(b[0]));
}

/* Starts argv[0] with stdout and stderr to t_dir/out, t_dir/err; extra
 * environment "K=V" entries (may be NULL). */
static pid_t spawn_to(const char *const *argv, const char *const *env, const char *out,
                      const char *err)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int n = open("/dev/null", O_RDONLY);
        if (o < 0 || e < 0 || n < 0)
            _exit(126);
        dup2(n, 0);
        dup2(o, 1);
        dup2(e, 2);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static pid_t spawn(const char *const *argv, const char *const *env)
{
    return spawn_to(argv, env, tpath("out"), tpath("err"));
}

/* Waits up to ms for pid; its exit status, 128 + signal, or -1 (killed on
 * timeout). */
static int reap(pid_t pid, unsigned ms)
{
    int st;
    for (unsigned t = 0; t < ms; t += 10) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        tx_test_emu_sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

struct res {
    int rc;
    char *out, *err;
};

static struct res run_env(const char *const *argv, const char *const *env)
{
    struct res r;
    r.rc = reap(spawn(argv, env), 240000);
    r.out = slurp(tpath("out"));
    r.err = slurp(tpath("err"));
    return r;
}

static struct res run(const char *const *argv)
{
    return run_env(argv, NULL);
}

static void res_free(struct res *r)
{
    free(r->out);
    free(r->err);
}

#define HAS(s, sub) ck_assert_msg(strstr((s), (sub)) != NULL, "\"%s\" lacks \"%s\"", (s), (sub))
#define LACKS(s, sub) ck_assert_msg(strstr((s), (sub)) == NULL, "\"%s\" has \"%s\"", (s), (sub))

static void copy_file(const char *from, const char *to)
{
    char *cmd = NULL;
    ck_assert_int_gt(asprintf(&cmd, "cp '%s' '%s'", from, to), 0);
    ck_assert_int_eq(system(cmd), 0);
    free(cmd);
}

/* Flips one bit of tensor name's data (or, scales != 0, of its scales). */
static void flip(const char *path, const char *name, int scales)
{
    char err[TX_ERR_MAX];
    struct tx_smd *s;
    ck_assert_int_eq(tx_smd_open(path, 0, &s, err, sizeof(err)), 0);
    const struct tx_smd_tensor *t = tx_smd_find(s, name);
    ck_assert_ptr_nonnull(t);
    uint64_t off = scales ? t->scales_offset : t->data_offset + t->data_size / 2;
    tx_smd_close(s);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char b;
    ck_assert_int_eq(pread(fd, &b, 1, (off_t)off), 1);
    b ^= 0x10;
    ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
}

/* ---- checksums -------------------------------------------------------------- */

START_TEST(crc_flipped_bytes)
{
    const char *victim = "model.layers.1.mlp.experts.3.down_proj.weight";
    char p[400];
    snprintf(p, sizeof(p), "%s", tpath("flipped.smd"));
    copy_file(g_smd8, p);

    /* the intact package verifies */
    const char *v0[] = {bin("glm-inference"), "--checkpoint", g_smd8, "--verify", NULL};
    struct res r = run(v0);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.err, "every checksum matches");
    res_free(&r);

    flip(p, victim, 0);
    const char *v1[] = {bin("glm-inference"), "--checkpoint", p, "--verify", NULL};
    r = run(v1);
    ck_assert_int_eq(r.rc, 1);
    HAS(r.err, victim);
    HAS(r.err, "data checksum mismatch");
    res_free(&r);
    const char *v2[] = {bin("glm-export"), "--verify", p, NULL};
    r = run(v2);
    ck_assert_int_eq(r.rc, 1);
    HAS(r.err, victim);
    res_free(&r);

    /* the load checks by default: generation and --validate stop there */
    const char *g[] = {bin("glm-inference"),
                       "--device",
                       rts_spec,
                       "--checkpoint",
                       p,
                       "--no-moe-config",
                       "--tokens",
                       "1,2,3",
                       "-n",
                       "2",
                       NULL};
    r = run(g);
    ck_assert_int_eq(r.rc, 1);
    HAS(r.err, victim);
    HAS(r.err, "checksum mismatch");
    res_free(&r);
    const char *va[] = {bin("glm-inference"),
                        "--device",
                        rts_spec,
                        "--checkpoint",
                        p,
                        "--no-moe-config",
                        "--validate",
                        "--validate-inputs",
                        "1",
                        NULL};
    r = run(va);
    ck_assert_int_eq(r.rc, 1);
    HAS(r.err, victim);
    res_free(&r);

    /* the library: io_uring (overlapped with the reads) and pread paths */
    tx_device_t *dev;
    ck_assert_int_eq(tx_device_open(rts_spec, &dev), TX_OK);
    glm_model_t *m = NULL;
    ck_assert_int_eq(glm_model_load(dev, p, NULL, &m), TX_EINVAL);
    HAS(tx_last_error(), victim);
    struct glm_load_options lo = {.flags = GLM_LOAD_NO_URING};
    ck_assert_int_eq(glm_model_load(dev, p, &lo, &m), TX_EINVAL);
    HAS(tx_last_error(), victim);
    /* GLM_LOAD_NO_VERIFY: the caller's choice */
    lo.flags = GLM_LOAD_NO_VERIFY;
    ck_assert_int_eq(glm_model_load(dev, p, &lo, &m), TX_OK);
    glm_model_free(m);

    /* a flipped scale is caught the same way */
    copy_file(g_smd8, p);
    flip(p, victim, 1);
    ck_assert_int_eq(glm_model_load(dev, p, NULL, &m), TX_EINVAL);
    HAS(tx_last_error(), victim);
    HAS(tx_last_error(), "scales checksum");
    tx_device_close(dev);
}
END_TEST

/* ---- numbers ------------------------------------------------------------------ */

struct bad_opt {
    const char *tool, *opt, *val, *expect;
};

static int count(const char *s, const char *sub);

START_TEST(option_errors)
{
    static const struct bad_opt cases[] = {
        {"glm-inference", "-n", "4294967297",
         "-n: '4294967297' is not an integer in [-1, 2147483647]"},
        {"glm-inference", "-n", "-5", "-n: '-5' is not an integer in [-1, 2147483647] (-1 = "},
        {"glm-inference", "-n", "1x", "-n: '1x'"},
        {"glm-inference", "--temp", "nan", "--temp: 'nan' is not a number in [0, 100]"},
        {"glm-inference", "--temp", "inf", "--temp: 'inf' is not a number in [0, 100]"},
        {"glm-inference", "--temp", "0x1p3", "--temp: '0x1p3' is not a number in [0, 100]"},
        {"glm-inference", "--top-p", "0", "--top-p: '0' is not a number in (0, 1]"},
        {"glm-inference", "--top-k", "-1", "--top-k: '-1' is not an integer in [0, 2147483647]"},
        {"glm-inference", "--min-p", "1.5", "--min-p: '1.5' is not a number in [0, 1]"},
        {"glm-inference", "--repeat-last-n", "5000", "--repeat-last-n: '5000' is not an integer"},
        {"glm-inference", "--repeat-penalty", "-1", "--repeat-penalty: '-1' is not a number"},
        {"glm-inference", "--samplers", "top_p;top_k;temperature",
         "--samplers: 'top_p;top_k;temperature' is not an order the device has"},
        {"glm-inference", "--chat-template-format", "llama3",
         "--chat-template-format: unknown chat format \"llama3\""},
        {"glm-inference", "--sampler-order", "random",
         "--sampler-order: 'random' is not llama or temp-first"},
        {"glm-inference", "-c", "-1", "-c: '-1' is not an integer in [0, 2147483647]"},
        {"glm-inference", "-b", "99999999999", "-b: '99999999999' is not an integer in [0, "},
        {"glm-inference", "-s", "-2", "-s: '-2' is not an integer in [-1, "},
        {"glm-inference", "-t", "5000", "-t: '5000' is not an integer in [0, 4096]"},
        {"glm-inference", "--lambda", "-1", "--lambda: '-1' is not a number in [0, 100]"},
        {"glm-inference", "--validate-inputs", "0",
         "--validate-inputs: '0' is not an integer in [1, "},
        {"glm-inference", "--validate-seed", "-1",
         "--validate-seed: '-1' is not an integer in [0, "},
        {"glm-inference", "--bench-pp", "0", "--bench-pp: '0' is not an integer in [1, "},
        {"glm-inference", "--max-weight-mem", "lots", "--max-weight-mem: 'lots' is not a size"},
        {"glm-inference", "--cache-type-k", "q5_1",
         "--cache-type-k q5_1: expected f32, f16, bf16, q8_0 (int8) or q4_0 (int4)"},
        {"glm-inference", "--cache-type-v", "", "--cache-type-v : expected f32, f16"},
        {"glm-inference", "--bench-depth", "1,,2",
         "--bench-depth: '1,,2': expected depths >= 0 separated by commas"},
        {"glm-inference", "--bench-depth", "0,-5", "--bench-depth: '0,-5': expected depths"},
        {"glm-inference", "--bench-depth", "5,", "--bench-depth: '5,': trailing comma"},
        {"glm-inference", "--bench-reps", "0", "--bench-reps: '0' is not an integer in [1, 100]"},
        {"glm-export", "--threads", "0", "--threads: '0' is not an integer in [1, 256]"},
        {"glm-export", "--sparsity", "1", "--sparsity: '1' is not a number in [0, 1)"},
        {"glm-export", "--sparsity", "nan", "--sparsity: 'nan' is not a number in [0, 1)"},
        {"glm-export", "--group-size", "48",
         "--group-size: '48' is not an integer in [0, 1048576]"},
        {"glm-synth", "--threads", "x", "--threads: 'x' is not an integer in [1, 256]"},
        {"glm-synth", "--seed", "-1", "--seed: '-1' is not an integer in [0, "},
        {"glm-analyze", "--seq", "0", "--seq: '0' is not an integer in [1, 16777216]"},
        {"glm-analyze", "--ctx", "4294967297", "--ctx: '4294967297' is not an integer in [1, "},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_opt *c = &cases[i];
        const char *argv[] = {bin(c->tool), c->opt, c->val, NULL};
        struct res r = run(argv);
        ck_assert_msg(r.rc == 2, "%s %s %s: exit %d: %s", c->tool, c->opt, c->val, r.rc, r.err);
        char want[300];
        snprintf(want, sizeof(want), "%s: %s", c->tool, c->expect);
        ck_assert_msg(strstr(r.err, want), "%s %s %s: \"%s\" lacks \"%s\"", c->tool, c->opt, c->val,
                      r.err, want);
        /* one line, naming the option, ending with the pointer to --help */
        ck_assert_msg(strstr(r.err, "; try --help\n") && count(r.err, "\n") == 1,
                      "%s %s %s: not one line ending \"; try --help\": \"%s\"", c->tool, c->opt,
                      c->val, r.err);
        res_free(&r);
    }
}
END_TEST

static int count(const char *s, const char *sub)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub))
        n++;
    return n;
}

/* glm-inference --attn-mask FILE (custom attention masks): a spans mask
 * changes the prompt's logits from its first masked token on (and not
 * before); a bad file fails with the reason and writes no logits file */
static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(attn_mask_cli)
{
    const char *masked = tpath("masked.bin"), *plain = tpath("plain.bin");
    const char *good = tpath("good.json"), *bad = tpath("bad.json");
    write_text(good, "{\"spans\": [[2, 5], [5, 8]]}");
    write_text(bad, "{\"spans\": [[0, 3], [2, 4]]}");
    const char *mask_file[3] = {good, NULL, bad}, *out[3] = {masked, plain, tpath("bad.bin")};
    for (int i = 0; i < 3; i++) {
        const char *a[] = {bin("glm-inference"),
                           "--device",
                           rts_spec,
                           "--checkpoint",
                           g_smd,
                           "--no-moe-config",
                           "--tokens",
                           "1,2,3,4,5,6,7,8,9,10",
                           "--logits",
                           out[i],
                           mask_file[i] ? "--attn-mask" : NULL,
                           mask_file[i],
                           NULL};
        struct res r = run(a);
        if (i < 2) {
            ck_assert_msg(r.rc == 0, "%s", r.err);
        } else {
            ck_assert_int_ne(r.rc, 0);
            HAS(r.err, "--attn-mask ");
            HAS(r.err, "bad.json: span 1 [2, 4) overlaps span 0 [0, 3)");
            ck_assert_int_ne(access(out[i], F_OK), 0); /* no logits file */
        }
        res_free(&r);
    }
    char *lm = NULL, *lp = NULL;
    size_t nm = 0, np = 0;
    FILE *f = fopen(masked, "rb"), *g = fopen(plain, "rb");
    ck_assert(f && g);
    lm = malloc(1 << 22);
    lp = malloc(1 << 22);
    ck_assert(lm && lp);
    nm = fread(lm, 1, 1 << 22, f);
    np = fread(lp, 1, 1 << 22, g);
    fclose(f);
    fclose(g);
    ck_assert(nm == np && nm % 10 == 0 && nm > 0);
    size_t row = nm / 10; /* the rows of tokens 0..2 see what they saw unmasked */
    ck_assert_msg(!memcmp(lm, lp, 3 * row), "rows before the first masked token changed");
    ck_assert_msg(memcmp(lm + 3 * row, lp + 3 * row, nm - 3 * row), "the mask changed nothing");
    free(lm);
    free(lp);
}
END_TEST

START_TEST(n_predict)
{
    /* -n 0: the prompt only, not one token */
    const char *a0[] = {bin("glm-inference"),
                        "--device",
                        rts_spec,
                        "--checkpoint",
                        g_smd,
                        "--no-moe-config",
                        "--tokens",
                        "1,2,3",
                        "-n",
                        "0",
                        "--temp",
                        "0",
                        "--ignore-eos",
                        NULL};
    struct res r = run(a0);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.err, "generated 0 tokens (length)");
    /* the defaults are llama.cpp's, labelled with their order */
    HAS(r.err, "sampling on the device: penalties;top_k;top_p;min_p;temperature; temp 0.00, "
               "top-k 40, top-p 0.95, min-p 0.05, repeat-penalty 1.00, presence 0.00, "
               "frequency 0.00, last-n 64");
    HAS(r.err, "eval time =       0.00 ms /     0 runs");
    ck_assert_str_eq(r.out, "\n");
    res_free(&r);
    /* -n 3 */
    const char *a3[] = {bin("glm-inference"),
                        "--device",
                        rts_spec,
                        "--checkpoint",
                        g_smd,
                        "--no-moe-config",
                        "--tokens",
                        "1,2,3",
                        "-n",
                        "3",
                        "--temp",
                        "0",
                        "--ignore-eos",
                        NULL};
    r = run(a3);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.err, "generated 3 tokens (length)");
    HAS(r.err, "/     2 runs"); /* n_eval: the passes after the prompt's */
    res_free(&r);
    /* --batch-invariant: the same run with batch-invariant device jobs */
    const char *abi[] = {bin("glm-inference"),
                         "--device",
                         rts_spec,
                         "--checkpoint",
                         g_smd,
                         "--no-moe-config",
                         "--batch-invariant",
                         "--tokens",
                         "1,2,3",
                         "-n",
                         "3",
                         "--temp",
                         "0",
                         "--ignore-eos",
                         NULL};
    r = run(abi);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.err, "generated 3 tokens (length)");
    res_free(&r);
    /* -n -1: until the context is full */
    const char *am[] = {bin("glm-inference"),
                        "--device",
                        rts_spec,
                        "--checkpoint",
                        g_smd,
                        "--no-moe-config",
                        "--tokens",
                        "1,2,3",
                        "-n",
                        "-1",
                        "-c",
                        "12",
                        "--temp",
                        "0",
                        "--ignore-eos",
                        NULL};
    r = run(am);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.err, "generated 10 tokens (context full)"); /* positions 3..12 */
    res_free(&r);
}
END_TEST

/* ---- diagnostics on stderr ---------------------------------------------------- */

/* -i on a terminal (a pty in raw mode, so lines longer than the tty's
 * canonical 4096 bytes pass): the conversation is rendered through the
 * template each turn reusing the cache's common prefix, whole lines are
 * read, a message that cannot fit is refused, a full context drops the
 * oldest turns (issue 17 item 6). */
START_TEST(interactive_chat)
{
    int mfd = posix_openpt(O_RDWR | O_NOCTTY);
    ck_assert_int_ge(mfd, 0);
    ck_assert_int_eq(grantpt(mfd), 0);
    ck_assert_int_eq(unlockpt(mfd), 0);
    char sname[128];
    ck_assert_int_eq(ptsname_r(mfd, sname, sizeof(sname)), 0);
    const char *argv[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                          "--no-moe-config", "-i", "-c", "96", "-n", "6", "--temp", "0", NULL};
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(mfd); /* else the master never closes: no end of input */
        setsid();
        int sl = open(sname, O_RDWR | O_NOCTTY); /* a terminal, not the controlling one */
        int o = open(tpath("out"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(tpath("err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        struct termios tio;
        if (sl < 0 || o < 0 || e < 0 || tcgetattr(sl, &tio))
            _exit(126);
        cfmakeraw(&tio);
        tcsetattr(sl, TCSANOW, &tio);
        dup2(sl, 0);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    char *big = malloc(6002);
    ck_assert(big);
    memset(big, 'a', 6000);
    big[6000] = '\n';
    big[6001] = 0;
    const char *lines[] = {"hello there\n", big, "how are you\n", "tell me more\n",
                           "and again\n", "one more time\n"};
    int nl = (int)(sizeof(lines) / sizeof(lines[0])), prompts = 0;
    char *err = NULL;
    for (int i = 0; i < nl; i++) {
        /* wait for the prompt of turn i */
        for (int w = 0; w < 24000; w++) {
            free(err);
            err = slurp(tpath("err"));
            prompts = count(err, "\n> ");
            if (prompts > i)
                break;
            tx_test_emu_sleep_ms(10);
        }
        ck_assert_msg(prompts > i, "no prompt for line %d: %s", i, err);
        size_t len = strlen(lines[i]);
        for (size_t off = 0; off < len;) {
            ssize_t k = write(mfd, lines[i] + off, len - off);
            ck_assert_int_gt(k, 0);
            off += (size_t)k;
        }
    }
    for (int w = 0; w < 24000 && prompts <= nl; w++) {
        free(err);
        err = slurp(tpath("err"));
        prompts = count(err, "\n> ");
        tx_test_emu_sleep_ms(10);
    }
    close(mfd); /* end of input */
    int rc = reap(pid, 60000);
    free(err);
    err = slurp(tpath("err"));
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err);
    HAS(err, "chat format ");
    /* the 6000-byte line is one message (fgets 4096 made it two) */
    ck_assert_int_eq(count(err, "positions (-c): not sent"), 1);
    HAS(err, "[chat: ");
    /* the second turn reuses the first turn's prompt from the cache */
    const char *t2 = strstr(strstr(err, "[chat: ") + 1, "[chat: ");
    ck_assert_ptr_nonnull(t2);
    size_t ntok = 0, reused = 0;
    ck_assert_int_eq(sscanf(t2, "[chat: %zu tokens, %zu reused", &ntok, &reused), 2);
    ck_assert_msg(reused > 0 && reused < ntok, "turn 2: %zu of %zu reused", reused, ntok);
    HAS(err, "dropping the oldest turn");
    printf("[tools] interactive: %d prompts, whole 6000-byte line, context shift by turns\n",
           prompts);
    free(err);
    free(big);
}
END_TEST

START_TEST(diagnostics_to_stderr)
{
    const char *a[] = {bin("glm-inference"),
                       "--device",
                       rts_spec,
                       "--checkpoint",
                       g_smd,
                       "--no-moe-config",
                       "--tokens",
                       "1,2,3",
                       "-n",
                       "4",
                       "--temp",
                       "0",
                       "--ignore-eos",
                       "--expert-stats",
                       "--memory-view",
                       NULL};
    struct res r = run(a);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.err, "expert utilisation");
    HAS(r.err, "TX8 device memory view");
    LACKS(r.out, "expert");
    LACKS(r.out, "memory view");
    LACKS(r.out, "label");
    res_free(&r);
}
END_TEST

/* ---- a device that dies --------------------------------------------------------- */

static int wait_file_nonempty(const char *path, unsigned ms)
{
    for (unsigned t = 0; t < ms; t += 10) {
        struct stat st;
        if (stat(path, &st) == 0 && st.st_size > 0)
            return 0;
        tx_test_emu_sleep_ms(10);
    }
    return -1;
}

START_TEST(device_lost_one_line)
{
    struct tx_test_emu emu;
    ck_assert_int_eq(tx_test_emu_start(&emu, "256M", "--cores", "2", NULL), 0);
    const char *a[] = {bin("glm-inference"),
                       "--device",
                       emu.spec,
                       "--checkpoint",
                       g_smd,
                       "--no-moe-config",
                       "--tokens",
                       "1,2,3",
                       "-n",
                       "-1",
                       "--ignore-eos",
                       "--temp",
                       "0",
                       NULL};
    pid_t pid = spawn(a, NULL);
    ck_assert_msg(wait_file_nonempty(tpath("out"), 120000) == 0, "no output");
    ck_assert_int_ge(tx_test_emu_kill(&emu, SIGKILL), 0);
    int rc = reap(pid, 60000);
    char *err = slurp(tpath("err"));
    ck_assert_msg(rc == 1, "exit %d: %s", rc, err);
    char want[300];
    snprintf(want, sizeof(want), "\nglm-inference: device %s: ", emu.spec);
    HAS(err, want);
    HAS(err, ": device lost\n");
    ck_assert_msg(count(err, "device lost") == 1, "%s", err);
    LACKS(err, "forward:");
    LACKS(err, "wait:");
    free(err);
    tx_test_emu_stop(&emu);

    /* library: the message of the first failing call, whatever wraps it */
    ck_assert_int_eq(tx_test_emu_start(&emu, "256M", "--cores", "2", NULL), 0);
    tx_device_t *dev;
    ck_assert_int_eq(tx_device_open(emu.spec, &dev), TX_OK);
    glm_model_t *m;
    ck_assert_int_eq(glm_model_load(dev, g_smd, NULL, &m), TX_OK);
    glm_session_t *s;
    ck_assert_int_eq(glm_session_create(m, NULL, &s), TX_OK);
    ck_assert_int_ge(tx_test_emu_kill(&emu, SIGKILL), 0);
    int32_t ids[3] = {1, 2, 3};
    struct glm_generate_params gp;
    memset(&gp, 0, sizeof(gp));
    gp.prompt = ids;
    gp.n_prompt = 3;
    gp.n_predict = 4;
    ck_assert_int_eq(glm_generate(s, &gp, NULL, 0, NULL, NULL), TX_EDEVICE_LOST);
    snprintf(want, sizeof(want), "device %s: ", emu.spec);
    ck_assert_msg(!strncmp(tx_last_error(), want, strlen(want)), "%s", tx_last_error());
    HAS(tx_last_error(), "device lost");
    glm_session_free(s);
    glm_model_free(m);
    tx_device_close(dev);
    tx_test_emu_stop(&emu);
}
END_TEST

/* ---- signals ----------------------------------------------------------------------- */

static int dir_has_prefix(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d)
        closedir(d);
    return n;
}

/* Counts of sub in the file at path (re-read each time) */
static int count_in(const char *path, const char *sub)
{
    char *b = slurp(path);
    int n = count(b, sub);
    free(b);
    return n;
}

/* Waits up to ms until path holds n copies of sub: 0, or -1 */
static int wait_count(const char *path, const char *sub, int n, unsigned ms)
{
    for (unsigned t = 0; t < ms; t += 20) {
        if (count_in(path, sub) >= n)
            return 0;
        tx_test_emu_sleep_ms(20);
    }
    return -1;
}

/* -cnv as llama-cli (issue 42 item 6): a scripted conversation from a pipe
 * (-sys, a continued line, /regen, /clear, /exit), then Ctrl-C stopping a
 * reply and returning to the prompt, and Ctrl-C at the prompt ending the
 * chat with the timings */
/* Starts argv[0] reading stdin from a new pipe (its write end in *in),
 * stdout and stderr to t_dir/out, err */
static pid_t spawn_piped(const char *const *argv, const char *out, const char *err, int *in)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0)
            _exit(126);
        close(p[1]);
        dup2(p[0], 0);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[0]);
    *in = p[1];
    return pid;
}

START_TEST(chat_as_llama_cli)
{
    const char *a[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                       "--no-moe-config", "-cnv", "-sys", "be brief", "-n", "4", "--temp", "0",
                       NULL};
    int in;
    pid_t pid = spawn_piped(a, tpath("out"), tpath("err"), &in);
    const char *script = "hello there\ntell me \\\nmore\n/regen\n/clear\nagain\n/exit\nnot read\n";
    ck_assert_int_eq(write(in, script, strlen(script)), (ssize_t)strlen(script));
    close(in);
    int rc = reap(pid, 240000);
    char *err = slurp(tpath("err")), *out = slurp(tpath("out"));
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    /* four replies (hello, the two-line message, its regeneration, again),
     * one line each; the system message is the first turn of every render */
    ck_assert_int_eq(count(err, "[chat: "), 4);
    ck_assert_int_eq(count(out, "\n"), 4);
    HAS(err, "> ... [chat: ");   /* the continued line */
    HAS(err, "[chat cleared]");
    /* /regen renders the same conversation again: all but one token reused */
    const char *t3 = strstr(strstr(strstr(err, "[chat: ") + 1, "[chat: ") + 1, "[chat: ");
    size_t n3 = 0, r3 = 0;
    ck_assert_int_eq(sscanf(t3, "[chat: %zu tokens, %zu reused", &n3, &r3), 2);
    ck_assert_uint_eq(r3, n3 - 1);
    /* after /clear nothing is reused; /exit ends it: "not read" never sent */
    const char *t4 = strstr(t3 + 1, "[chat: ");
    ck_assert_int_eq(sscanf(t4, "[chat: %zu tokens, %zu reused", &n3, &r3), 2);
    ck_assert_uint_eq(r3, 0);
    HAS(err, "llama_perf_context_print:       total time =");
    free(err);
    free(out);

    /* Ctrl-C during a long reply: back to the prompt; at the prompt: the end */
    const char *b[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                       "--no-moe-config", "-cnv", "-n", "100000", "--ignore-eos", "--temp", "0",
                       "-c", "4096", NULL};
    pid = spawn_piped(b, tpath("out2"), tpath("err2"), &in);
    ck_assert_int_eq(write(in, "hello\n", 6), 6);
    ck_assert_msg(wait_file_nonempty(tpath("out2"), 120000) == 0, "no reply");
    kill(pid, SIGINT);
    ck_assert_msg(wait_count(tpath("err2"), "[reply stopped", 1, 60000) == 0, "not stopped");
    ck_assert_msg(wait_count(tpath("err2"), "\n> ", 2, 60000) == 0, "no prompt after Ctrl-C");
    tx_test_emu_sleep_ms(100); /* let it block reading the prompt */
    ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), 0); /* still chatting */
    kill(pid, SIGINT);
    rc = reap(pid, 60000);
    close(in);
    err = slurp(tpath("err2"));
    ck_assert_msg(rc == 130, "exit %d: %s", rc, err);
    HAS(err, "llama_perf_context_print:        eval time =");
    free(err);
}
END_TEST

/* t_dir/telemetry, and "TX_TELEMETRY_DIR=" it for the tools' environment */
static void tele_dir(char *tele, size_t tsz, char *env, size_t esz)
{
    snprintf(tele, tsz, "%s", tpath("telemetry"));
    mkdir(tele, 0755);
    snprintf(env, esz, "TX_TELEMETRY_DIR=%s", tele);
}

START_TEST(sigint_prints_timings)
{
    char tele[400], env[512];
    tele_dir(tele, sizeof(tele), env, sizeof(env));
    const char *envv[] = {env, NULL};
    const char *a[] = {bin("glm-inference"),
                       "--device",
                       rts_spec,
                       "--checkpoint",
                       g_smd,
                       "--no-moe-config",
                       "--tokens",
                       "1,2,3",
                       "-n",
                       "-1",
                       "--ignore-eos",
                       "--temp",
                       "0",
                       NULL};
    pid_t pid = spawn(a, envv);
    ck_assert_msg(wait_file_nonempty(tpath("out"), 120000) == 0, "no output");
    char own[64];
    snprintf(own, sizeof(own), "tx8-telemetry-%d", (int)pid);
    ck_assert_int_eq(dir_has_prefix(tele, own), 1);
    kill(pid, SIGINT);
    int rc = reap(pid, 60000);
    char *err = slurp(tpath("err"));
    ck_assert_msg(rc == 130, "exit %d: %s", rc, err);
    HAS(err, "(interrupted)");
    HAS(err, "llama_perf_context_print: prompt eval time =");
    HAS(err, "llama_perf_context_print:        eval time =");
    HAS(err, "llama_perf_context_print:       total time =");
    ck_assert_int_eq(dir_has_prefix(tele, "tx8-telemetry-"), 0);
    free(err);
}
END_TEST

/* Telemetry objects (issue 42 item 7): a reader that closes the pipe
 * (| head -c 20) ends the run cleanly, object removed; a SIGKILLed
 * publisher's object is swept by the next program that publishes. */
START_TEST(telemetry_sigpipe_sigkill)
{
    char tele[400], env[512];
    tele_dir(tele, sizeof(tele), env, sizeof(env));
    const char *a[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                       "--no-moe-config", "--tokens", "1,2,3", "-n", "-1", "--ignore-eos",
                       "--temp", "0", NULL};
    /* SIGPIPE: stdout a pipe whose reader reads 20 bytes and closes it */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int e = open(tpath("err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int n = open("/dev/null", O_RDONLY);
        if (e < 0 || n < 0)
            _exit(126);
        close(fds[0]);
        dup2(n, 0);
        dup2(fds[1], 1);
        dup2(e, 2);
        putenv(env);
        execv(a[0], (char *const *)a);
        _exit(127);
    }
    close(fds[1]);
    char buf[20];
    size_t got = 0;
    while (got < sizeof(buf)) {
        ssize_t k = read(fds[0], buf + got, sizeof(buf) - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    ck_assert_uint_eq(got, sizeof(buf));
    close(fds[0]);
    int rc = reap(pid, 120000);
    char *err = slurp(tpath("err"));
    ck_assert_msg(rc == 0, "exit %d after the reader closed the pipe: %s", rc, err);
    HAS(err, "stdout was closed: stopped after");
    free(err);
    ck_assert_int_eq(dir_has_prefix(tele, "tx8-telemetry-"), 0);

    /* SIGKILL: the object stays behind ... */
    const char *envv[] = {env, NULL};
    pid = spawn(a, envv);
    ck_assert_msg(wait_file_nonempty(tpath("out"), 120000) == 0, "no output");
    char own[64];
    snprintf(own, sizeof(own), "tx8-telemetry-%d", (int)pid);
    ck_assert_int_eq(dir_has_prefix(tele, own), 1);
    kill(pid, SIGKILL);
    ck_assert_int_eq(reap(pid, 60000), 128 + SIGKILL);
    ck_assert_int_eq(dir_has_prefix(tele, own), 1);
    /* ... until the next publisher sweeps it, and removes its own at exit */
    const char *b[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                       "--no-moe-config", "--tokens", "1,2,3", "-n", "1", "--temp", "0", NULL};
    struct res r = run_env(b, envv);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    res_free(&r);
    ck_assert_int_eq(dir_has_prefix(tele, "tx8-telemetry-"), 0);
}
END_TEST

/* Ctrl-C during --bench: the rows so far, the JSON array closed, exit
 * 130, the telemetry object removed (issue 42 item 7) */
START_TEST(bench_sigint)
{
    char tele[400], env[512];
    tele_dir(tele, sizeof(tele), env, sizeof(env));
    const char *envv[] = {env, NULL};
    const char *a[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                       "--no-moe-config", "--bench", "--bench-plans", "fp32", "-p", "8",
                       "-n", "16", "-r", "100", "-o", "jsonl", NULL};
    pid_t pid = spawn(a, envv);
    /* the first row (100 samples of pp8) is out: the tg row is running */
    ck_assert_msg(wait_file_nonempty(tpath("out"), 120000) == 0, "no row");
    char own[64];
    snprintf(own, sizeof(own), "tx8-telemetry-%d", (int)pid);
    ck_assert_int_eq(dir_has_prefix(tele, own), 1);
    kill(pid, SIGINT);
    int rc = reap(pid, 60000);
    char *err = slurp(tpath("err")), *out = slurp(tpath("out"));
    ck_assert_msg(rc == 130, "exit %d: %s", rc, err);
    HAS(err, "--bench interrupted");
    ck_assert_int_eq(count(out, "\n"), 1); /* the pp8 row, whole */
    json_object *j = json_tokener_parse(out);
    ck_assert_msg(j != NULL, "not JSON: %s", out);
    json_object_put(j);
    ck_assert_int_eq(dir_has_prefix(tele, "tx8-telemetry-"), 0);
    free(err);
    free(out);
}
END_TEST

START_TEST(export_killed_leaves_nothing)
{
    /* whenever SIGKILL lands, nothing but a complete package is left */
    static const unsigned delays_ms[] = {0, 30, 80, 150, 300};
    for (size_t i = 0; i < sizeof(delays_ms) / sizeof(delays_ms[0]); i++) {
        char out[400];
        snprintf(out, sizeof(out), "%s", tpath("k.smd"));
        const char *a[] = {bin("glm-export"), "--input", g_ck, "--output", out, "--quiet", NULL};
        pid_t pid = spawn(a, NULL);
        tx_test_emu_sleep_ms(delays_ms[i]);
        kill(pid, SIGKILL);
        reap(pid, 60000);
        ck_assert_int_eq(dir_has_prefix(t_dir, "k.smd.tmp."), 0);
        unlink(out);
    }
    /* a stale temporary of a dead writer (a kill between link and rename,
     * or a file system without O_TMPFILE) goes with the next export */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    char stale[400];
    snprintf(stale, sizeof(stale), "%s.tmp.%d.0", tpath("k.smd"), (int)dead);
    FILE *f = fopen(stale, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    char out[400];
    snprintf(out, sizeof(out), "%s", tpath("k.smd"));
    const char *a[] = {bin("glm-export"), "--input",  g_ck, "--output", out,
                       "--quiet",         "--verify", out,  NULL};
    struct res r = run(a);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.err, "every checksum matches");
    ck_assert_int_eq(dir_has_prefix(t_dir, "k.smd.tmp."), 0);
    res_free(&r);
}
END_TEST

START_TEST(export_truncated_tokenizer)
{
    char tp[400];
    snprintf(tp, sizeof(tp), "%s/tokenizer.json", g_ck);
    char *tok = slurp(tp);
    size_t n = strlen(tok);
    ck_assert_uint_gt(n, 100);
    FILE *f = fopen(tpath("truncated.json"), "w");
    ck_assert_ptr_nonnull(f);
    fwrite(tok, 1, n / 2, f);
    fclose(f);
    free(tok);
    char out[400], tk[400];
    snprintf(out, sizeof(out), "%s", tpath("t.smd"));
    snprintf(tk, sizeof(tk), "%s", tpath("truncated.json"));
    const char *a[] = {bin("glm-export"), "--input", g_ck,      "--output", out,
                       "--tokenizer",     tk,        "--quiet", NULL};
    struct res r = run(a);
    ck_assert_int_eq(r.rc, 1);
    HAS(r.err, "truncated.json: not a valid JSON object");
    HAS(r.err, "nothing written");
    ck_assert_int_eq(dir_has_prefix(t_dir, "t.smd"), 0);
    res_free(&r);
}
END_TEST

/* ---- generation_config.json (issue 17 item 1) ------------------------------ */

/* t_dir/ck: the test checkpoint with generation_config.json = json (NULL:
 * without one) */
static const char *ck_with_gen(const char *json)
{
    const char *ck = tpath("ck");
    char *cmd = NULL;
    ck_assert_int_gt(asprintf(&cmd, "rm -rf '%s' && cp -r '%s' '%s'", ck, g_ck, ck), 0);
    ck_assert_int_eq(system(cmd), 0);
    free(cmd);
    if (json) {
        char p[450];
        snprintf(p, sizeof(p), "%s/generation_config.json", ck);
        FILE *f = fopen(p, "w");
        ck_assert_ptr_nonnull(f);
        fputs(json, f);
        fclose(f);
    }
    return ck;
}

static struct res gen_export(const char *json, const char *out)
{
    const char *ck = ck_with_gen(json);
    const char *a[] = {bin("glm-export"), "--input", ck, "--output", out, "--quant", "none",
                       "--quiet",         NULL};
    return run(a);
}

static struct res gen_infer(const char *smd, const char *extra)
{
    const char *a[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", smd,
                       "--no-moe-config",    "--tokens", "1,2,3",  "-n",          "2",
                       "--ignore-eos",       "-s",       "5",      extra,         NULL};
    return run(a);
}

START_TEST(generation_config)
{
    char smd[400];
    snprintf(smd, sizeof(smd), "%s", tpath("g.smd"));
    /* kept in the package; eos ids join the stop tokens; sampling defaults */
    struct res r = gen_export("{\"_from_model_config\": true, \"do_sample\": true, "
                              "\"eos_token_id\": [2, 7], \"pad_token_id\": 2, \"temperature\": "
                              "0.5, \"top_k\": 7, \"top_p\": 0.8, \"min_p\": null, "
                              "\"transformers_version\": \"4.57.1\"}",
                              smd);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    res_free(&r);
    tx_device_t *dev = NULL;
    ck_assert_int_eq(tx_device_open(rts_spec, &dev), 0);
    glm_model_t *m = NULL;
    ck_assert_int_eq(glm_model_load(dev, smd, NULL, &m), 0);
    struct glm_generation_config g;
    ck_assert_int_eq(glm_model_generation_config(m, &g), 1);
    ck_assert_uint_eq(g.has, GLM_GEN_HAS_EOS | GLM_GEN_HAS_DO_SAMPLE | GLM_GEN_HAS_TEMPERATURE |
                                 GLM_GEN_HAS_TOP_K | GLM_GEN_HAS_TOP_P);
    ck_assert_int_eq(g.n_eos, 2);
    ck_assert_int_eq(g.eos_token_ids[1], 7);
    ck_assert_int_eq(g.top_k, 7);
    int32_t st[32];
    int n = glm_model_stop_tokens(m, st, 32), has2 = 0, has7 = 0;
    for (int i = 0; i < n && i < 32; i++) {
        has2 |= st[i] == 2;
        has7 |= st[i] == 7;
    }
    ck_assert_msg(has2 && has7, "generation_config's eos ids are not stop tokens (%d ids)", n);
    ck_assert_int_eq(glm_model_free(m), 0);
    tx_device_close(dev);
    r = gen_infer(smd, NULL);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.err, "sampling defaults from the package's generation_config.json: temperature 0.50, "
               "top_k 7, top_p 0.80 (the rest: glm-inference's own; the command line overrides)");
    HAS(r.err, "temp 0.50, top-k 7, top-p 0.80, min-p 0.05");
    res_free(&r);
    r = gen_infer(smd, "--temp=0");
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.err, "generation_config.json: top_k 7, top_p 0.80 (");
    HAS(r.err, "temp 0.00, top-k 7, top-p 0.80");
    res_free(&r);
    /* do_sample false: greedy */
    r = gen_export("{\"do_sample\": false, \"temperature\": 0.7, \"eos_token_id\": 2}", smd);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    res_free(&r);
    r = gen_infer(smd, NULL);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.err, "generation_config.json: do_sample false (greedy) (");
    HAS(r.err, "temp 0.00, top-k 40, top-p 0.95");
    res_free(&r);
    /* none: said so */
    r = gen_export(NULL, smd);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    res_free(&r);
    r = gen_infer(smd, NULL);
    HAS(r.err, "sampling defaults: glm-inference's own (the package has no "
               "generation_config.json)");
    res_free(&r);
    /* refused, naming the field; nothing written */
    static const char *const bad[][2] = {
        {"{\"top_p\": 2}", "generation_config.json: top_p: expected a number in (0, 1]"},
        {"{\"top_p\": 0}", "top_p: expected a number in (0, 1]"},
        {"{\"temperature\": -1}", "temperature: expected a number in [0, 100]"},
        {"{\"temperature\": \"hot\"}", "temperature: expected a number in [0, 100]"},
        {"{\"top_k\": 1.5}", "top_k: expected an integer in [0, 4096] (0 = off)"},
        {"{\"top_k\": 5000}", "top_k: expected an integer in [0, 4096]"},
        {"{\"do_sample\": 1}", "do_sample: expected true or false"},
        {"{\"eos_token_id\": [1, \"x\"]}", "eos_token_id[1]: expected an integer token id"},
        {"{\"eos_token_id\": []}", "eos_token_id: a list of 1 to 16 token ids expected, got 0"},
        {"{\"eos_token_id\": 99999999}", "eos_token_id: token id 99999999 outside [0, 1048576)"},
        {"{\"eos_token_id\": {}}", "eos_token_id: expected an integer, a list of integers or null"},
        {"[1, 2]", "generation_config.json: not a valid JSON object"},
        {"{\"top_p\": 0.9", "generation_config.json: not a valid JSON object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        unlink(smd);
        r = gen_export(bad[i][0], smd);
        ck_assert_msg(r.rc == 1, "%s: exported", bad[i][0]);
        HAS(r.err, bad[i][1]);
        HAS(r.err, "nothing written");
        ck_assert_int_eq(access(smd, F_OK), -1);
        res_free(&r);
    }
}
END_TEST

/* ---- building against the tree -------------------------------------------------------- */

static const char *build_dir(void)
{
    const char *b = getenv("BUILD");
    return b && *b ? b : "build";
}

START_TEST(pkgconfig_uninstalled)
{
    const char *src = tpath("app.c");
    FILE *f = fopen(src, "w");
    ck_assert_ptr_nonnull(f);
    fputs("#include <stdio.h>\n#include <tx/glm.h>\n"
          "int main(void)\n{\n"
          "    printf(\"%s %d\\n\", tx_strerror(TX_EDEVICE_LOST), (int)GLM_PRECISION_FP16);\n"
          "    return 0;\n}\n",
          f);
    fclose(f);
    char cwd[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
#if defined(__SANITIZE_ADDRESS__)
    const char *san = "-fsanitize=address,undefined"; /* libtx.so of this tree is sanitized */
#else
    const char *san = "";
#endif
    char *cmd = NULL;
    ck_assert_int_gt(asprintf(&cmd,
                              "PKG_CONFIG_PATH='%s/%s/lib/pkgconfig' pkg-config --cflags --libs "
                              "libtx-uninstalled > '%s' 2>&1",
                              cwd, build_dir(), tpath("flags")),
                     0);
    ck_assert_int_eq(system(cmd), 0);
    free(cmd);
    char *flags = slurp(tpath("flags"));
    char *nl = strchr(flags, '\n');
    if (nl)
        *nl = 0;
    HAS(flags, "-Wl,-rpath,");
    ck_assert_int_gt(asprintf(&cmd, "cc %s -o '%s' '%s' %s > '%s' 2>&1", san, tpath("app"), src,
                              flags, tpath("cc.log")),
                     0);
    int rc = system(cmd);
    char *log = slurp(tpath("cc.log"));
    ck_assert_msg(rc == 0, "%s: %s", cmd, log);
    free(log);
    free(cmd);
    free(flags);
    /* no LD_LIBRARY_PATH: the rpath finds build/lib/libtx.so.1 */
    ck_assert_int_gt(
        asprintf(&cmd, "env -u LD_LIBRARY_PATH '%s' > '%s' 2>&1", tpath("app"), tpath("app.out")),
        0);
    rc = system(cmd);
    char *out = slurp(tpath("app.out"));
    ck_assert_msg(rc == 0, "%s", out);
    ck_assert_str_eq(out, "device lost 1\n");
    free(out);
    free(cmd);
}
END_TEST

/* --bench-depth rounds: every depth's rows, medians over --bench-reps
 * rounds, the ratio's range, the tg passes of all rounds */
START_TEST(bench_depth_rounds)
{
    const char *a3[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                        "--no-moe-config", "--bench-depth", "0,8", "--bench-pp", "4",
                        "--bench-tg", "2", "--bench-reps", "3", NULL};
    struct res r = run(a3);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.out, "3 rounds, each running every depth in turn");
    HAS(r.out, " | pp4 @ d0 | ");
    HAS(r.out, " | tg2 @ d0 | ");
    HAS(r.out, " | pp4 @ d8 | ");
    HAS(r.out, " | tg2 @ d8 | ");
    ck_assert_int_ge(count(r.out, " | 1.00 [1.00-1.00] | "), 2); /* depth 0 against itself */
    HAS(r.out, "  tg2 @ d8: ");
    ck_assert_int_eq(count(r.out, " of 6 passes"), 2); /* 3 rounds x 2 passes per depth */
    res_free(&r);
    /* one round: one ratio, no range */
    const char *a1[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                        "--no-moe-config", "--bench-depth", "8,0", "--bench-pp", "4",
                        "--bench-tg", "2", NULL};
    r = run(a1);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    LACKS(r.out, "rounds");
    LACKS(r.out, "[");
    ck_assert_int_ge(count(r.out, " | 1.00 | "), 2);
    ck_assert_int_eq(count(r.out, " of 2 passes"), 2);
    res_free(&r);
}
END_TEST

START_TEST(precision_names_clash)
{
    /* A program with its own FP16 macro and BF16 enum builds with the
     * prefixed names only. */
    const char *src = tpath("clash.c");
    FILE *f = fopen(src, "w");
    ck_assert_ptr_nonnull(f);
    fputs("#define FP16 0x10\nenum other { BF16 = 7 };\n"
          "#define GLM_NO_SHORT_PRECISION_NAMES\n#include <tx/glm.h>\n"
          "int f(void);\nint f(void)\n{\n"
          "    glm_layer_config_t c = {GLM_MLP, GLM_PRECISION_FP16};\n"
          "    return (int)c.precision + FP16 + BF16 + GLM_PRECISION_INT8_MIXED;\n}\n",
          f);
    fclose(f);
    char *cmd = NULL;
    ck_assert_int_gt(asprintf(&cmd,
                              "cc -std=c11 -Wall -Wextra -Werror -Iinclude -c -o '%s' '%s' "
                              "> '%s' 2>&1",
                              tpath("clash.o"), src, tpath("cc.log")),
                     0);
    int rc = system(cmd);
    char *log = slurp(tpath("cc.log"));
    ck_assert_msg(rc == 0, "%s", log);
    free(log);
    free(cmd);
}
END_TEST

/* --seed -1: from the OS, printed; two processes started together differ;
 * the printed seed given back reproduces the text (issue 42 item 4) */
START_TEST(seed_from_os)
{
    const char *a[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                       "--no-moe-config", "--tokens", "1,2,3", "-n", "12", "--temp", "1.5",
                       "--top-k", "0", "--top-p", "1", "--min-p", "0", "--ignore-eos", NULL};
    pid_t p1 = spawn_to(a, NULL, tpath("o1"), tpath("e1"));
    pid_t p2 = spawn_to(a, NULL, tpath("o2"), tpath("e2"));
    ck_assert_int_eq(reap(p1, 240000), 0);
    ck_assert_int_eq(reap(p2, 240000), 0);
    char *o1 = slurp(tpath("o1")), *o2 = slurp(tpath("o2"));
    char *e1 = slurp(tpath("e1")), *e2 = slurp(tpath("e2"));
    const char *s1 = strstr(e1, ", seed "), *s2 = strstr(e2, ", seed ");
    ck_assert_ptr_nonnull(s1);
    ck_assert_ptr_nonnull(s2);
    unsigned long long v1 = strtoull(s1 + 7, NULL, 10), v2 = strtoull(s2 + 7, NULL, 10);
    ck_assert_msg(v1 != v2, "two processes drew the same seed %llu", v1);
    ck_assert_str_ne(o1, o2); /* 12 tokens at temperature 1.5 over the whole vocabulary */
    char seed[32];
    snprintf(seed, sizeof(seed), "%llu", v1);
    const char *b[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                       "--no-moe-config", "--tokens", "1,2,3", "-n", "12", "--temp", "1.5",
                       "--top-k", "0", "--top-p", "1", "--min-p", "0", "--ignore-eos", "-s",
                       seed, NULL};
    struct res r = run(b);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_str_eq(r.out, o1);
    res_free(&r);
    free(o1);
    free(o2);
    free(e1);
    free(e2);
}
END_TEST

/* --bench as llama-bench: -p/-n lists, -pg, -d, -r N samples, -o json with
 * llama-bench's field names; md with mean ± sd (issue 42 item 3) */
START_TEST(bench_llama_bench)
{
    const char *a[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                       "--no-moe-config", "--bench", "--bench-plans", "fp32", "-p", "8,0",
                       "-n", "2", "-pg", "4,2", "-d", "0,6", "-r", "2", "-o", "json", NULL};
    struct res r = run(a);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    json_object *j = json_tokener_parse(r.out);
    ck_assert_msg(j && json_object_is_type(j, json_type_array), "not a JSON array: %s", r.out);
    /* pp8, tg2, pp4+tg2 at depths 0 and 6 (-p 0 is no test, as llama-bench) */
    ck_assert_int_eq((int)json_object_array_length(j), 6);
    static const int want[6][3] = {{8, 0, 0}, {0, 2, 0}, {4, 2, 0},
                                   {8, 0, 6}, {0, 2, 6}, {4, 2, 6}};
    for (int i = 0; i < 6; i++) {
        json_object *o = json_object_array_get_idx(j, (size_t)i), *v;
        static const char *const f[] = {"build_commit", "cpu_info", "gpu_info", "backends",
                                        "model_filename", "model_type", "model_size",
                                        "model_n_params", "n_batch", "n_threads", "type_k",
                                        "type_v", "test_time", "avg_ns", "stddev_ns",
                                        "stddev_ts"};
        for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
            ck_assert_msg(json_object_object_get_ex(o, f[k], NULL), "row %d lacks %s", i, f[k]);
        ck_assert(json_object_object_get_ex(o, "n_prompt", &v));
        ck_assert_int_eq(json_object_get_int(v), want[i][0]);
        ck_assert(json_object_object_get_ex(o, "n_gen", &v));
        ck_assert_int_eq(json_object_get_int(v), want[i][1]);
        ck_assert(json_object_object_get_ex(o, "n_depth", &v));
        ck_assert_int_eq(json_object_get_int(v), want[i][2]);
        ck_assert(json_object_object_get_ex(o, "samples_ns", &v));
        ck_assert_int_eq((int)json_object_array_length(v), 2);
        ck_assert(json_object_object_get_ex(o, "avg_ts", &v));
        ck_assert(json_object_get_double(v) > 0);
    }
    json_object_put(j);
    res_free(&r);
    /* md: llama-bench's test names and mean ± sd */
    const char *b[] = {bin("glm-inference"), "--device", rts_spec, "--checkpoint", g_smd,
                       "--no-moe-config", "--bench", "--bench-plans", "fp32", "-p", "8",
                       "-n", "2", "-d", "6", "-r", "3", NULL};
    r = run(b);
    ck_assert_msg(r.rc == 0, "%s", r.err);
    HAS(r.out, "| fp32 | pp8 @ d6 | ");
    HAS(r.out, "| fp32 | tg2 @ d6 | ");
    HAS(r.out, " ± ");
    res_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tools");
    TCase *tc = tcase_create("core");
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_add_checked_fixture(tc, t_setup, t_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, crc_flipped_bytes);
    tcase_add_test(tc, option_errors);
    tcase_add_test(tc, n_predict);
    tcase_add_test(tc, attn_mask_cli);
    tcase_add_test(tc, interactive_chat);
    tcase_add_test(tc, diagnostics_to_stderr);
    tcase_add_test(tc, device_lost_one_line);
    tcase_add_test(tc, sigint_prints_timings);
    tcase_add_test(tc, export_killed_leaves_nothing);
    tcase_add_test(tc, export_truncated_tokenizer);
    tcase_add_test(tc, generation_config);
    tcase_add_test(tc, pkgconfig_uninstalled);
    tcase_add_test(tc, precision_names_clash);
    tcase_add_test(tc, bench_depth_rounds);
    tcase_add_test(tc, seed_from_os);
    tcase_add_test(tc, bench_llama_bench);
    tcase_add_test(tc, telemetry_sigpipe_sigkill);
    tcase_add_test(tc, chat_as_llama_cli);
    tcase_add_test(tc, bench_sigint);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run_emu(suite());
}
