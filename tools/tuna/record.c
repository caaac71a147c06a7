/* SPDX-License-Identifier: MIT */
/* tuna record: runs a command with TX_PROFILE set (docs/tuna.md). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "tuna.h"

int cmd_record(int argc, char **argv)
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
    if (out[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)) ||
            snprintf(abs, sizeof(abs), "%s/%s", cwd, out) >= (int)sizeof(abs)) {
            fprintf(stderr, "tuna record: path too long: %s\n", out);
            return 2;
        }
    } else if (snprintf(abs, sizeof(abs), "%s", out) >= (int)sizeof(abs)) {
        fprintf(stderr, "tuna record: path too long: %s\n", out);
        return 2;
    }
    unlink(abs); /* a stale trace must not pass for this run's */
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "tuna record: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        setenv("TX_PROFILE", abs, 1);
        execvp(argv[i], argv + i);
        fprintf(stderr, "tuna record: cannot run %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "tuna record: waitpid: %s\n", strerror(errno));
            return 1;
        }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    struct stat sb;
    if (stat(abs, &sb) != 0) {
        fprintf(stderr, "tuna record: %s wrote no trace (is it a libtx program?)\n", argv[i]);
        return code ? code : 1;
    }
    fprintf(stderr, "tuna record: %s (%lld bytes)%s\n", out, (long long)sb.st_size,
            code ? ", the command failed" : "");
    return code;
}
