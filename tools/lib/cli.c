/* SPDX-License-Identifier: MIT */
/*
 * The tools' library: helpers shared by the command-line tools (see
 * tools/include/common/cli.h).
 */
#include "common/cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tx-internal/tx_errors.h>
#include <tx-internal/tx_file.h>

int txc_read_stream(FILE *in, char **out, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return TX_ENOMEM;
    for (;;) {
        if (n == cap) {
            char *b = realloc(buf, cap * 2 + 1);
            if (!b) {
                free(buf);
                return TX_ENOMEM;
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
        return TX_EIO;
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
    if (!f) {
        int e = errno;
        return tx_error(tx_errno_code(e), "%s: %s", path, strerror(e));
    }
    int rc = txc_read_stream(f, out, len);
    fclose(f);
    return rc;
}

int txc_write_text(const char *path, const char *txt)
{
    if (!strcmp(path, "-")) {
        fputs(txt, stdout);
        return fflush(stdout) == 0 ? 0 : TX_EIO;
    }
    char err[256];
    return tx_file_write_text(path, txt, NULL, err, sizeof(err));
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

int txc_opt_long(const char *prog, const char *opt, const char *s, long long lo, long long hi,
                 const char *note, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    /* strtoll skips leading blanks: an option value is the number only */
    if (errno || end == s || *end || isspace((unsigned char)*s) || x < lo || x > hi) {
        fprintf(stderr, "%s: %s: '%s' is not an integer in [%lld, %lld]%s%s%s; try --help\n", prog,
                opt, s, lo, hi, note ? " (" : "", note ? note : "", note ? ")" : "");
        return -1;
    }
    *out = x;
    return 0;
}

int txc_opt_int(const char *prog, const char *opt, const char *s, int lo, int hi, const char *note,
                int *out)
{
    long long x;
    if (txc_opt_long(prog, opt, s, lo, hi, note, &x) < 0)
        return -1;
    *out = (int)x;
    return 0;
}

int txc_opt_u64(const char *prog, const char *opt, const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    /* strtoull accepts "-1" as ULLONG_MAX: only digits here */
    if (errno || end == s || *end || !isdigit((unsigned char)*s)) {
        fprintf(stderr, "%s: %s: '%s' is not an integer in [0, %llu]; try --help\n", prog, opt, s,
                ULLONG_MAX);
        return -1;
    }
    *out = x;
    return 0;
}

int txc_opt_double(const char *prog, const char *opt, const char *s, double lo, double hi, int open,
                   double *out)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    /* decimal only: strtod also takes "nan", "inf" and hex floats */
    int bad = errno || end == s || *end || isspace((unsigned char)*s) || !isfinite(x) ||
              strpbrk(s, "xXnNiI") != NULL;
    if (!bad)
        bad = (open & TXC_LO_OPEN) ? !(x > lo) : !(x >= lo);
    if (!bad)
        bad = (open & TXC_HI_OPEN) ? !(x < hi) : !(x <= hi);
    if (bad) {
        fprintf(stderr, "%s: %s: '%s' is not a number in %c%g, %g%c; try --help\n", prog, opt, s,
                (open & TXC_LO_OPEN) ? '(' : '[', lo, hi, (open & TXC_HI_OPEN) ? ')' : ']');
        return -1;
    }
    *out = x;
    return 0;
}

int txc_opt_float(const char *prog, const char *opt, const char *s, double lo, double hi, int open,
                  float *out)
{
    double x;
    if (txc_opt_double(prog, opt, s, lo, hi, open, &x) < 0)
        return -1;
    *out = (float)x;
    return 0;
}

int txc_getopt(const char *prog, int argc, char **argv, const char *optstring,
               const struct option *lo)
{
    opterr = 0;
    int ch = getopt_long(argc, argv, optstring, lo, NULL);
    if (ch != '?')
        return ch;
    const char *a = argv[optind - 1];
    if (!strcmp(a, "--version")) {
        txc_print_version(prog);
        return TXC_OPT_VERSION;
    }
    /* the option at fault: a long one when getopt_long says none (optopt
     * 0: unknown or ambiguous) or argv[optind - 1] names the long option
     * whose value optopt is; else a short one (argv[optind - 1] may then be
     * an earlier argument: the fault is inside a cluster) */
    const struct option *hit = NULL;
    int matches = 0, n = 0;
    const char *eq = NULL;
    if (!strncmp(a, "--", 2)) {
        eq = strchr(a, '=');
        n = eq ? (int)(eq - a) : (int)strlen(a);
        for (const struct option *o = lo; o && o->name; o++)
            if (!strncmp(o->name, a + 2, (size_t)n - 2)) {
                hit = o;
                if (!o->name[n - 2]) { /* exact: getopt_long takes it */
                    matches = 1;
                    break;
                }
                matches++; /* a prefix, unique or not */
            }
    }
    if (!strncmp(a, "--", 2) && (!optopt || (hit && matches == 1 && hit->val == optopt))) {
        if (matches > 1)
            fprintf(stderr, "%s: option '%.*s' is ambiguous; try --help\n", prog, n, a);
        else if (hit && eq && hit->has_arg == no_argument)
            fprintf(stderr, "%s: %.*s: takes no value; try --help\n", prog, n, a);
        else if (hit)
            fprintf(stderr, "%s: %s: needs a value; try --help\n", prog, a);
        else
            fprintf(stderr, "%s: unknown option '%.*s'; try --help\n", prog, n, a);
    } else {
        const char *p = strchr(optstring, optopt);
        if (optopt && optopt != ':' && p && p[1] == ':')
            fprintf(stderr, "%s: -%c: needs a value; try --help\n", prog, optopt);
        else
            fprintf(stderr, "%s: unknown option '-%c'; try --help\n", prog, optopt);
    }
    return '?';
}

int txc_help_or_usage(int opt, void (*usage)(FILE *))
{
    if (opt == 'h') {
        usage(stdout);
        return 0;
    }
    if (opt == TXC_OPT_VERSION)
        return 0;
    return 2; /* txc_getopt has said which option, and "try --help" */
}

int txc_usage_error(const char *prog, void (*usage)(FILE *), const char *fmt, ...)
{
    (void)usage;
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("; try --help\n", stderr);
    return 2;
}
