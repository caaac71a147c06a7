/* SPDX-License-Identifier: MIT */
/*
 * Test harness: start and stop a tx8-emu for a test program.
 *
 *   struct tx_test_emu emu;
 *   tx_test_emu_start(&emu, "64M", "--cores", "2", NULL);   // 0 or -1
 *   ... tx_device_open(emu.spec, &dev) ...
 *   tx_test_emu_stop(&emu);
 *
 * The emulator is $BUILD/bin/tx8-emu (BUILD defaults to "build"), listening
 * on a socket in a fresh temporary directory; its stderr goes to emu.log in
 * that directory (TX_TEST_EMU_VERBOSE=1: to the test's stderr, with -v).
 * start() returns when the socket accepts connections.
 *
 * Nothing is left running, whatever happens to the test:
 * - stop() sends SIGTERM, waits up to 3 s, then SIGKILL, reaps the process
 *   and removes the directory;
 * - every emulator a process starts is also stopped by an atexit handler of
 *   that process (not of children forked later, e.g. Check's test
 *   processes);
 * - the emulator gets PR_SET_PDEATHSIG: it is killed when the process that
 *   started it dies (a test that crashes or calls _exit).
 * With Check (CK_FORK=yes), start emulators in an unchecked fixture
 * (tcase_add_unchecked_fixture): it runs in the runner process, which
 * survives failing tests, and its teardown stops the emulator. A test that
 * needs its own emulator (e.g. to kill it) starts it inside the test; the
 * death signal and atexit cover it when the test fails.
 */
#ifndef TX_TEST_EMU_H
#define TX_TEST_EMU_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tx_test_tmp.h"

#define TX_TEST_EMU_MAX_ARGS 32

struct tx_test_emu {
    pid_t pid;   /* 0 when not running */
    pid_t owner; /* the process that started it */
    int status;  /* wait status once reaped */
    bool reaped;
    char dir[64];   /* temporary directory */
    char sock[128]; /* socket path */
    char spec[160]; /* "emu:" + sock, for tx_device_open() */
    char log[128];  /* the emulator's stderr */
};

/* Emulators started by this process, for the atexit handler. */
static struct tx_test_emu *tx_test_emu_live[16];

/*
 * Problems seen when stopping emulators in this process: a sanitizer report
 * in an emulator's log, or an emulator that did not exit cleanly (status 0)
 * on SIGTERM. A test program's main() should fail when it is non-zero
 * (fixtures stop emulators outside any test).
 */
static int tx_test_emu_problems;

static inline void tx_test_emu_sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* The path of a program of the build tree: $BUILD/bin/name. */
static inline const char *tx_test_bin(const char *name, char *buf, size_t size)
{
    const char *build = getenv("BUILD");

    snprintf(buf, size, "%s/bin/%s", build && *build ? build : "build", name);
    return buf;
}

/* For a process we cannot reap (started by another process, e.g. the Check
 * runner): running unless gone or a zombie. */
static inline bool tx_test_pid_running(pid_t pid)
{
    char path[64], buf[256], *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return false;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/*
 * Whether it is still running (reaping it if it exited and this process
 * started it). Works from any process, e.g. a Check test process looking at
 * the emulator of an unchecked fixture (then e->status is not known).
 */
static inline bool tx_test_emu_alive(struct tx_test_emu *e)
{
    int st;

    if (!e->pid || e->reaped)
        return false;
    if (e->owner != getpid())
        return tx_test_pid_running(e->pid);
    if (waitpid(e->pid, &st, WNOHANG) == e->pid) {
        e->status = st;
        e->reaped = true;
        return false;
    }
    return true;
}

/* Wait up to ms for the process to exit; true if it did. */
static inline bool tx_test_emu_wait_exit(struct tx_test_emu *e, unsigned ms)
{
    for (unsigned t = 0;; t += 5) {
        if (!tx_test_emu_alive(e))
            return true;
        if (t >= ms)
            return false;
        tx_test_emu_sleep_ms(5);
    }
}

static inline void tx_test_emu_untrack(struct tx_test_emu *e)
{
    for (size_t i = 0; i < sizeof(tx_test_emu_live) / sizeof(tx_test_emu_live[0]); i++)
        if (tx_test_emu_live[i] == e)
            tx_test_emu_live[i] = NULL;
}

static inline void tx_test_emu_rmdir(struct tx_test_emu *e)
{
    tx_test_rmtree(e->dir);
    e->dir[0] = 0;
}

static inline void tx_test_emu_dump_log(const struct tx_test_emu *e);

/* Whether the log holds a sanitizer report. */
static inline bool tx_test_emu_log_has_report(const struct tx_test_emu *e)
{
    char line[1024];
    bool found = false;
    FILE *f = e->log[0] ? fopen(e->log, "r") : NULL;

    if (!f)
        return false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, "Sanitizer") || strstr(line, "runtime error:");
    fclose(f);
    return found;
}

/*
 * Stop (SIGTERM, then SIGKILL after 3 s), reap, remove the directory.
 * Returns 0 if the emulator ended cleanly (exit status 0 on SIGTERM, or it
 * had already ended, e.g. killed by the test) and its log has no sanitizer
 * report; -1 otherwise (also counted in tx_test_emu_problems, with the log
 * printed). Idempotent.
 */
static inline int tx_test_emu_stop(struct tx_test_emu *e)
{
    bool bad = false;

    if (e->pid && e->owner == getpid()) {
        if (tx_test_emu_alive(e)) {
            kill(e->pid, SIGTERM);
            if (!tx_test_emu_wait_exit(e, 3000)) {
                kill(e->pid, SIGKILL);
                tx_test_emu_wait_exit(e, 3000);
                bad = true;
            } else {
                bad = !WIFEXITED(e->status) || WEXITSTATUS(e->status) != 0;
            }
        }
        if (tx_test_emu_log_has_report(e))
            bad = true;
        if (bad) {
            fprintf(stderr, "tx_test_emu: emulator %d did not end cleanly (wait status 0x%x)\n",
                    (int)e->pid, e->status);
            tx_test_emu_dump_log(e);
            tx_test_emu_problems++;
        }
        e->pid = 0;
        tx_test_emu_untrack(e);
        tx_test_emu_rmdir(e);
    }
    return bad ? -1 : 0;
}

/* Send sig (e.g. SIGKILL to play a crash) and wait up to 5 s for the end.
 * Returns the wait status if this process started it, else 0 when it ended
 * and -1 if it did not. */
static inline int tx_test_emu_kill(struct tx_test_emu *e, int sig)
{
    if (!e->pid)
        return -1;
    if (tx_test_emu_alive(e))
        kill(e->pid, sig);
    if (!tx_test_emu_wait_exit(e, 5000))
        return -1;
    return e->owner == getpid() ? e->status : 0;
}

static void tx_test_emu_atexit(void)
{
    for (size_t i = 0; i < sizeof(tx_test_emu_live) / sizeof(tx_test_emu_live[0]); i++) {
        struct tx_test_emu *e = tx_test_emu_live[i];

        if (e && e->owner == getpid())
            tx_test_emu_stop(e);
    }
}

/* Print the emulator's log to stderr (for failing tests). */
static inline void tx_test_emu_dump_log(const struct tx_test_emu *e)
{
    char buf[4096];
    size_t n;
    FILE *f = e->log[0] ? fopen(e->log, "r") : NULL;

    if (!f)
        return;
    fprintf(stderr, "---- %s ----\n", e->log);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, stderr);
    fclose(f);
}

/*
 * Start tx8-emu with --memory `memory` and the extra arguments (NULL
 * terminated). Returns 0 when it accepts connections, -1 otherwise (with a
 * message on stderr; nothing left running).
 */
static inline int tx_test_emu_startv(struct tx_test_emu *e, const char *memory, va_list ap)
{
    static bool registered;
    const char *argv[TX_TEST_EMU_MAX_ARGS + 8];
    const char *verbose = getenv("TX_TEST_EMU_VERBOSE");
    bool loud = verbose && *verbose && strcmp(verbose, "0");
    char bin[256];
    int argc = 0, slot = -1;
    const char *a;
    pid_t parent = getpid();
    struct stat st;

    memset(e, 0, sizeof(*e));
    for (size_t i = 0; i < sizeof(tx_test_emu_live) / sizeof(tx_test_emu_live[0]); i++)
        if (!tx_test_emu_live[i] || tx_test_emu_live[i]->owner != parent) {
            slot = (int)i;
            break;
        }
    if (slot < 0) {
        fprintf(stderr, "tx_test_emu: too many emulators\n");
        return -1;
    }
    tx_test_bin("tx8-emu", bin, sizeof(bin));
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "tx_test_emu: %s: %s (set BUILD to the build tree)\n", bin,
                strerror(errno));
        return -1;
    }
    snprintf(e->dir, sizeof(e->dir), "/tmp/tx8-test-XXXXXX");
    if (!mkdtemp(e->dir)) {
        fprintf(stderr, "tx_test_emu: mkdtemp: %s\n", strerror(errno));
        e->dir[0] = 0;
        return -1;
    }
    snprintf(e->sock, sizeof(e->sock), "%s/tx8.sock", e->dir);
    snprintf(e->spec, sizeof(e->spec), "emu:%s", e->sock);
    snprintf(e->log, sizeof(e->log), "%s/emu.log", e->dir);

    argv[argc++] = bin;
    argv[argc++] = "--socket";
    argv[argc++] = e->sock;
    argv[argc++] = "--memory";
    argv[argc++] = memory;
    if (loud)
        argv[argc++] = "-v";
    while ((a = va_arg(ap, const char *)) && argc < TX_TEST_EMU_MAX_ARGS)
        argv[argc++] = a;
    argv[argc] = NULL;

    fflush(NULL);
    e->owner = parent;
    e->pid = fork();
    if (e->pid < 0) {
        fprintf(stderr, "tx_test_emu: fork: %s\n", strerror(errno));
        e->pid = 0;
        tx_test_emu_rmdir(e);
        return -1;
    }
    if (e->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        if (!loud) {
            int fd = open(e->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

            if (fd >= 0) {
                dup2(fd, STDERR_FILENO);
                dup2(fd, STDOUT_FILENO);
            }
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    tx_test_emu_live[slot] = e;
    if (!registered) {
        atexit(tx_test_emu_atexit);
        registered = true;
    }
    /* Ready when the socket exists (tx8-emu renames it into place once it
     * listens). */
    for (unsigned t = 0; t < 20000; t += 2) {
        if (stat(e->sock, &st) == 0 && S_ISSOCK(st.st_mode))
            return 0;
        if (!tx_test_emu_alive(e))
            break;
        tx_test_emu_sleep_ms(2);
    }
    fprintf(stderr, "tx_test_emu: %s did not come up\n", bin);
    tx_test_emu_dump_log(e);
    tx_test_emu_stop(e);
    return -1;
}

static inline int tx_test_emu_start(struct tx_test_emu *e, const char *memory, ...)
{
    va_list ap;
    int rc;

    va_start(ap, memory);
    rc = tx_test_emu_startv(e, memory, ap);
    va_end(ap);
    return rc;
}

#endif /* TX_TEST_EMU_H */
