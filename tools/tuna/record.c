/* SPDX-License-Identifier: MIT */
/*
 * tuna record -o TRACE.json -- CMD [ARGS...]: runs CMD with
 * TX_PROFILE=TRACE.json (an absolute path; libtx writes the trace at exit).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tuna.h"

/* out as an absolute path in abs[PATH_MAX]; 0, or 2 with a message */
static int absolute_path(const char *out, char *abs)
{
    if (out[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)) || snprintf(abs, PATH_MAX, "%s/%s", cwd, out) >= PATH_MAX) {
            fprintf(stderr, "tuna record: path too long: %s\n", out);
            return 2;
        }
    } else if (snprintf(abs, PATH_MAX, "%s", out) >= PATH_MAX) {
        fprintf(stderr, "tuna record: path too long: %s\n", out);
        return 2;
    }
    return 0;
}

/* Runs cmd with TX_PROFILE=abs; its exit status (128 + signal), or -1
 * with a message. */
static int run_profiled(char **cmd, const char *abs)
{
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "tuna record: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setenv("TX_PROFILE", abs, 1);
        execvp(cmd[0], cmd);
        fprintf(stderr, "tuna record: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "tuna record: waitpid: %s\n", strerror(errno));
            return -1;
        }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int tuna_record(int argc, char **argv)
{
    const char *out = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else {
            fprintf(stderr, "tuna record: unknown argument '%s'\n", argv[i]);
            tuna_usage(stderr);
            return 2;
        }
    }
    if (!out || !*out || i >= argc) {
        fprintf(stderr, "tuna record: %s\n", !out ? "missing -o TRACE.json" : "missing command");
        tuna_usage(stderr);
        return 2;
    }
    char abs[PATH_MAX];
    if (absolute_path(out, abs))
        return 2;
    unlink(abs); /* a stale trace must not pass for this run's */
    int code = run_profiled(argv + i, abs);
    if (code < 0)
        return 1;
    struct stat sb;
    if (stat(abs, &sb) != 0) {
        fprintf(stderr, "tuna record: %s wrote no trace (is it a libtx program?)\n", argv[i]);
        return code ? code : 1;
    }
    fprintf(stderr, "tuna record: %s (%lld bytes)%s\n", out, (long long)sb.st_size,
            code ? ", the command failed" : "");
    return code;
}
