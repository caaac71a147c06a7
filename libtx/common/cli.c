/* SPDX-License-Identifier: MIT */
/*
 * libtx internal: helpers shared by the command-line tools (see cli.h).
 */
#include "common/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

int txc_read_stream(FILE *in, char **out, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        if (n == cap) {
            char *b = realloc(buf, cap * 2 + 1);
            if (!b) {
                free(buf);
                return -ENOMEM;
            }
            buf = b;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, in);
        n += r;
        if (r == 0)
            break;
    }
    if (ferror(in)) {
        free(buf);
        return -EIO;
    }
    buf[n] = 0;
    *out = buf;
    if (len)
        *len = n;
    return 0;
}

int txc_read_path(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    int rc = txc_read_stream(f, out, len);
    fclose(f);
    return rc;
}

int txc_write_text(const char *path, const char *txt)
{
    if (!strcmp(path, "-")) {
        fputs(txt, stdout);
        return fflush(stdout) == 0 ? 0 : -EIO;
    }
    char err[256];
    return txm_write_text(path, txt, NULL, err, sizeof(err));
}

int txc_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

int txc_help_or_usage(int opt, void (*usage)(FILE *))
{
    if (opt == 'h') {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}

int txc_usage_error(const char *prog, void (*usage)(FILE *), const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    usage(stderr);
    return 2;
}
