/* SPDX-License-Identifier: MIT */
/*
 * libtx internal: the host's last-level cache from sysfs (see cpu_cache.h).
 */
#include <tx-internal/tx_cpu_cache.h>

#include <tx-internal/tx_errors.h>
#include "common/settings.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB_F (1024.0 * 1024.0)

__attribute__((format(printf, 2, 3))) static int fail(struct tx_llc *out, const char *fmt, ...)
{
    va_list ap;
    out->bytes = 0;
    va_start(ap, fmt);
    vsnprintf(out->error, sizeof(out->error), fmt, ap);
    va_end(ap);
    return TX_EINVAL;
}

int tx_llc_parse_size(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return TX_EINVAL;
    uint64_t v = 0;
    for (; isdigit((unsigned char)*s); s++) {
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > TX_LLC_MAX)
            return TX_EINVAL;
    }
    unsigned shift = 0;
    switch (toupper((unsigned char)*s)) {
    case 0:
        break;
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    default:
        return TX_EINVAL;
    }
    if (shift) {
        s++;
        /* K, KB, KiB (any case) */
        if (toupper((unsigned char)s[0]) == 'I' && toupper((unsigned char)s[1]) == 'B')
            s += 2;
        else if (toupper((unsigned char)s[0]) == 'B')
            s++;
        if (*s)
            return TX_EINVAL;
        if (v > (TX_LLC_MAX >> shift))
            return TX_EINVAL;
        v <<= shift;
    }
    *out = v;
    return 0;
}

/* Whole file, trailing white space removed. 0 or -1 (errno set). */
static int read_text(const char *path, char *buf, size_t sz)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return TX_EIO;
    size_t n = fread(buf, 1, sz - 1, f);
    int err = ferror(f);
    fclose(f);
    if (err) {
        errno = EIO;
        return TX_EIO;
    }
    buf[n] = 0;
    while (n && isspace((unsigned char)buf[n - 1]))
        buf[--n] = 0;
    return 0;
}

/* name is prefix followed by one or more digits only */
static int numbered(const char *name, const char *prefix)
{
    size_t p = strlen(prefix);
    if (strncmp(name, prefix, p) || !name[p])
        return 0;
    for (const char *c = name + p; *c; c++)
        if (!isdigit((unsigned char)*c))
            return 0;
    return 1;
}

struct cache_ent {
    unsigned level;
    uint64_t size;
    char *key;       /* shared_cpu_list (or _map) text; NULL: neither file */
    char where[528]; /* "cpuN/cache/indexM" (two d_name) */
};

struct scan {
    const char *root;
    struct cache_ent *v;
    size_t n, cap;
};

/* One ROOT/cpuN/cache/indexM directory. Instruction caches are left out. */
static int read_index(struct tx_llc *out, struct scan *sc, const char *cpu, const char *idx)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], buf[4096];
    if ((size_t)snprintf(dir, sizeof(dir), "%s/%s/cache/%s", sc->root, cpu, idx) >= sizeof(dir))
        return fail(out, "%s/%s/cache/%s: path too long", sc->root, cpu, idx);

    snprintf(path, sizeof(path), "%s/type", dir);
    if (read_text(path, buf, sizeof(buf)))
        return fail(out, "cannot read %s: %s", path, strerror(errno));
    if (!strcmp(buf, "Instruction"))
        return 0;

    snprintf(path, sizeof(path), "%s/level", dir);
    if (read_text(path, buf, sizeof(buf)))
        return fail(out, "cannot read %s: %s", path, strerror(errno));
    char *end;
    errno = 0;
    unsigned long level = strtoul(buf, &end, 10);
    if (errno || end == buf || *end || level < 1 || level > 16)
        return fail(out, "%s: invalid cache level '%s'", path, buf);

    snprintf(path, sizeof(path), "%s/size", dir);
    if (read_text(path, buf, sizeof(buf)))
        return fail(out, "cannot read %s: %s", path, strerror(errno));
    uint64_t size;
    if (tx_llc_parse_size(buf, &size) || !size)
        return fail(out, "%s: invalid cache size '%s'", path, buf);

    char *key = NULL;
    snprintf(path, sizeof(path), "%s/shared_cpu_list", dir);
    if (read_text(path, buf, sizeof(buf)) == 0 && buf[0]) {
        key = strdup(buf);
    } else {
        snprintf(path, sizeof(path), "%s/shared_cpu_map", dir);
        if (read_text(path, buf, sizeof(buf)) == 0 && buf[0]) {
            /* prefix so a map never equals a list of another entry */
            size_t L = strlen(buf) + 5;
            key = malloc(L);
            if (key)
                snprintf(key, L, "map:%s", buf);
        } else {
            buf[0] = 0;
        }
    }
    if (buf[0] && !key)
        return fail(out, "out of memory reading %s", dir);

    if (sc->n == sc->cap) {
        size_t nc = sc->cap ? sc->cap * 2 : 16;
        struct cache_ent *nv = realloc(sc->v, nc * sizeof(*nv));
        if (!nv) {
            free(key);
            return fail(out, "out of memory reading %s", dir);
        }
        sc->v = nv;
        sc->cap = nc;
    }
    struct cache_ent *e = &sc->v[sc->n++];
    e->level = (unsigned)level;
    e->size = size;
    e->key = key;
    snprintf(e->where, sizeof(e->where), "%s/cache/%s", cpu, idx);
    return 0;
}

static int scan_tree(struct tx_llc *out, struct scan *sc)
{
    DIR *d = opendir(sc->root);
    if (!d)
        return fail(out, "cannot read %s: %s", sc->root, strerror(errno));
    int rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        if (!numbered(de->d_name, "cpu"))
            continue;
        char cdir[PATH_MAX];
        if ((size_t)snprintf(cdir, sizeof(cdir), "%s/%s/cache", sc->root, de->d_name) >=
            sizeof(cdir)) {
            rc = fail(out, "%s/%s/cache: path too long", sc->root, de->d_name);
            break;
        }
        DIR *cd = opendir(cdir);
        if (!cd) /* no cache information for this CPU (e.g. offline) */
            continue;
        struct dirent *ce;
        while (!rc && (ce = readdir(cd)))
            if (numbered(ce->d_name, "index"))
                rc = read_index(out, sc, de->d_name, ce->d_name);
        closedir(cd);
    }
    closedir(d);
    return rc;
}

int tx_llc_read_sysfs(const char *root, struct tx_llc *out)
{
    memset(out, 0, sizeof(*out));
    struct scan sc = {root ? root : TX_LLC_SYSFS_ROOT, NULL, 0, 0};
    int rc = scan_tree(out, &sc);
    if (!rc && !sc.n)
        rc = fail(out,
                  "no CPU cache described under %s (no cpuN/cache/indexM with a data or "
                  "unified cache)",
                  sc.root);
    unsigned level = 0;
    for (size_t i = 0; !rc && i < sc.n; i++)
        if (sc.v[i].level > level)
            level = sc.v[i].level;
    uint64_t sum = 0, inst_max = 0;
    unsigned inst = 0;
    for (size_t i = 0; !rc && i < sc.n; i++) {
        struct cache_ent *e = &sc.v[i];
        if (e->level != level)
            continue;
        if (!e->key) {
            rc = fail(out,
                      "%s/%s has neither shared_cpu_list nor shared_cpu_map: cannot tell "
                      "which CPUs share the L%u cache",
                      sc.root, e->where, level);
            break;
        }
        /* a new instance unless an earlier entry of this level has the
         * same CPU set (then the larger size is kept) */
        size_t j;
        for (j = 0; j < i; j++)
            if (sc.v[j].level == level && sc.v[j].key && !strcmp(sc.v[j].key, e->key))
                break;
        if (j < i) {
            if (e->size > sc.v[j].size) {
                sum += e->size - sc.v[j].size;
                sc.v[j].size = e->size;
            }
        } else {
            sum += e->size;
            inst++;
        }
        if (sc.v[j < i ? j : i].size > inst_max)
            inst_max = sc.v[j < i ? j : i].size;
        if (sum > TX_LLC_MAX)
            rc = fail(out, "implausible L%u cache total under %s (over 1 TiB)", level, sc.root);
    }
    for (size_t i = 0; i < sc.n; i++)
        free(sc.v[i].key);
    free(sc.v);
    if (rc)
        return rc;
    out->bytes = sum;
    out->instance_bytes = inst_max;
    out->level = level;
    out->instances = inst;
    snprintf(out->source, sizeof(out->source), "sysfs");
    return 0;
}

static const struct tx_setting cpu_cache_settings[] = {
    {TX_LLC_ENV, TX_SETTING_TEXT, "a size: bytes, or with K, M, G (e.g. 480M)", 0, 0, "from sysfs",
     0, NULL,
     "the host's last-level cache, where sysfs is missing or wrong: the bandwidth probes' "
     "working sets (docs/engine.md)"},
};

const struct tx_setting_table tx_settings_cpu_cache = {
    "host cache probe", "at every probe of the last-level cache", cpu_cache_settings, 1};

int tx_llc_resolve(const char *override, const char *root, struct tx_llc *out, int *bad_override)
{
    const char *src = "--llc";
    if (bad_override)
        *bad_override = 0;
    if (!override) {
        struct tx_setting_val v;
        tx_settings_read(&tx_settings_cpu_cache, "libtx", &v);
        if (v.set) {
            override = v.text;
            src = TX_LLC_ENV;
        }
    }
    if (!override)
        return tx_llc_read_sysfs(root, out);
    memset(out, 0, sizeof(*out));
    uint64_t v;
    if (tx_llc_parse_size(override, &v) || !v) {
        if (bad_override)
            *bad_override = 1;
        return fail(out,
                    "%s: invalid cache size '%s' (bytes, 1 to 1 TiB, optionally with a K, M, "
                    "G or T suffix, e.g. 32M)",
                    src, override);
    }
    out->bytes = v;
    out->instance_bytes = v;
    out->instances = 1;
    snprintf(out->source, sizeof(out->source), "%s", src);
    return 0;
}

uint64_t tx_llc_min_working_set(const struct tx_llc *llc)
{
    return llc && llc->bytes ? (uint64_t)TX_LLC_FACTOR * llc->bytes : 0;
}

int tx_llc_check(const struct tx_llc *llc, uint64_t ws, char *why, size_t whysz)
{
    char tmp[8];
    if (!why || !whysz) {
        why = tmp;
        whysz = sizeof(tmp);
    }
    if (!llc || !llc->bytes) {
        snprintf(why, whysz,
                 "LLC size unknown (%s): no bandwidth figure; set " TX_LLC_ENV " (or --llc)",
                 llc && llc->error[0] ? llc->error : "not read");
        return 0;
    }
    uint64_t min = tx_llc_min_working_set(llc);
    if (ws < min) {
        snprintf(why, whysz,
                 "working set %.1f MiB < %u x LLC (%u x %.1f MiB = %.1f MiB): the figure "
                 "would include cache hits",
                 (double)ws / MIB_F, TX_LLC_FACTOR, TX_LLC_FACTOR, (double)llc->bytes / MIB_F,
                 (double)min / MIB_F);
        return 0;
    }
    why[0] = 0;
    return 1;
}

void tx_llc_describe(const struct tx_llc *llc, char *buf, size_t bufsz)
{
    if (!llc || !llc->bytes)
        snprintf(buf, bufsz, "unknown (%s)", llc && llc->error[0] ? llc->error : "not read");
    else if (llc->level)
        snprintf(buf, bufsz, "%.1f MiB (L%u, %u instance%s of %.1f MiB, %s)",
                 (double)llc->bytes / MIB_F, llc->level, llc->instances,
                 llc->instances == 1 ? "" : "s", (double)llc->instance_bytes / MIB_F, llc->source);
    else
        snprintf(buf, bufsz, "%.1f MiB (%s)", (double)llc->bytes / MIB_F, llc->source);
}
