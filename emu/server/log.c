/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int emu_verbose;
int emu_quiet;

static void vlog(const char *fmt, va_list ap)
{
    char buf[1024];
    struct timespec ts;
    struct tm tm;
    int n;

    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    n = snprintf(buf, sizeof(buf), "tx8-emu[%d] %02d:%02d:%02d.%03ld: ", (int)getpid(), tm.tm_hour,
                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    if (n < 0)
        return;
    vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", buf);
}

void emu_log(const char *fmt, ...)
{
    va_list ap;

    if (emu_quiet)
        return;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

void emu_debug(const char *fmt, ...)
{
    va_list ap;

    if (!emu_verbose || emu_quiet)
        return;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}
