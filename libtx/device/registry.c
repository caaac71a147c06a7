/* SPDX-License-Identifier: MIT */
/*
 * libtx device layer: the backends, device specs, enumeration.
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tx-internal/tx_errors.h>
#include "common/settings.h"
#include "device/device_internal.h"
#include "device/backend.h"

/* The accel backend is compiled in when its source exists (it is written
 * with the kernel driver); emu/server.mk rebuilds this file when it
 * appears. */
#if defined(__has_include)
#if __has_include("device/backend_accel.c")
#define TX_HAVE_ACCEL 1
#endif
#endif

static const struct tx_backend_ops *accel_ops(void)
{
#ifdef TX_HAVE_ACCEL
    return &tx_backend_accel_ops;
#else
    return NULL;
#endif
}

static int starts_with(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* Whether /dev/accel/accelN is driven by tx8 (sysfs driver link). */
static int accel_is_tx8(const char *name)
{
    char link[PATH_MAX], target[PATH_MAX];
    ssize_t n;
    const char *base;

    snprintf(link, sizeof(link), "/sys/class/accel/%s/device/driver", name);
    n = readlink(link, target, sizeof(target) - 1);
    if (n < 0)
        return 0;
    target[n] = 0;
    base = strrchr(target, '/');
    base = base ? base + 1 : target;
    return strcmp(base, "tx8") == 0;
}

/* Accel nodes in numeric order. */
static int list_accel(char names[][64], int max)
{
    int n = 0;

    for (int i = 0; i < 64 && n < max; i++) {
        char path[64];

        snprintf(path, sizeof(path), "/dev/accel/accel%d", i);
        if (access(path, F_OK) == 0 && accel_is_tx8(path + strlen("/dev/accel/")))
            snprintf(names[n++], 64, "%s", path);
    }
    return n;
}

static int is_socket(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

int tx_backend_resolve(const char *spec, const struct tx_backend_ops **ops, char *path,
                       size_t path_size)
{
    const char *p;

    if (!spec || !*spec) {
        char names[1][64];
        struct tx_setting_val v[TXD_SETTING_COUNT];

        tx_settings_read(&tx_settings_device, "tx_device_open", v);
        if (v[TXD_SETTING_DEVICE].set)
            return tx_backend_resolve(v[TXD_SETTING_DEVICE].text, ops, path, path_size);
        if (accel_ops() && list_accel(names, 1) == 1)
            return tx_backend_resolve(names[0], ops, path, path_size);
        spec = "emu:" TX_DEFAULT_EMU_SOCKET;
    }
    if (starts_with(spec, "emu:")) {
        *ops = &tx_backend_emu_ops;
        p = spec + 4;
    } else if (starts_with(spec, "accel:") || starts_with(spec, "/dev/")) {
        p = starts_with(spec, "accel:") ? spec + 6 : spec;
        *ops = accel_ops();
        if (!*ops)
            return tx_error(TX_ENOTSUP,
                            "device '%s': this libtx was built without the accel "
                            "backend",
                            spec);
    } else if (spec[0] == '/' && is_socket(spec)) {
        *ops = &tx_backend_emu_ops;
        p = spec;
    } else {
        return tx_error(TX_EINVAL,
                        "device '%s': unknown device spec (use emu:/path.sock or "
                        "/dev/accel/accelN)",
                        spec);
    }
    if (!*p)
        return tx_error(TX_EINVAL, "device '%s': empty path", spec);
    if (strlen(p) >= path_size)
        return tx_error(TX_EINVAL, "device '%s': path too long", spec);
    strcpy(path, p);
    return TX_OK;
}

#define ENUM_MAX 160

static void add_desc(struct tx_device_desc *all, size_t *n, const char *backend, const char *path)
{
    char spec[TX_SPEC_MAX];

    if ((size_t)snprintf(spec, sizeof(spec), "%s:%s", backend, path) >= sizeof(spec))
        return;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(all[i].spec, spec) == 0)
            return;
    if (*n >= ENUM_MAX)
        return;
    memset(&all[*n], 0, sizeof(all[*n]));
    memcpy(all[*n].spec, spec, sizeof(spec));
    snprintf(all[*n].backend, sizeof(all[*n].backend), "%s", backend);
    (*n)++;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

TX_API int tx_device_enumerate(struct tx_device_desc *list, size_t max, size_t *count)
{
    struct tx_device_desc *all;
    char names[64][64];
    const char *env;
    size_t n = 0;
    DIR *dir;

    if (!count || (max && !list))
        return tx_error(TX_EINVAL, "tx_device_enumerate: %s",
                        !count ? "NULL count" : "NULL list with max > 0");
    all = calloc(ENUM_MAX, sizeof(*all));
    if (!all)
        return tx_error(TX_ENOMEM, "tx_device_enumerate: out of memory");
    if (accel_ops()) {
        int na = list_accel(names, 64);

        for (int i = 0; i < na; i++)
            add_desc(all, &n, "accel", names[i]);
    }
    struct tx_setting_val v[TXD_SETTING_COUNT];
    tx_settings_parse(&tx_settings_device, "tx_device_enumerate", v);
    env = v[TXD_SETTING_DEVICE].text;
    if (env && starts_with(env, "emu:") && env[4])
        add_desc(all, &n, "emu", env + 4);
    dir = opendir("/run/tx8");
    if (dir) {
        struct dirent *e;
        char *paths[64];
        size_t np = 0;

        while ((e = readdir(dir)) && np < 64) {
            size_t l = strlen(e->d_name);
            char path[300];

            if (l < 6 || strcmp(e->d_name + l - 5, ".sock"))
                continue;
            snprintf(path, sizeof(path), "/run/tx8/%s", e->d_name);
            if (is_socket(path) && (paths[np] = strdup(path)))
                np++;
        }
        closedir(dir);
        qsort(paths, np, sizeof(paths[0]), cmp_str);
        for (size_t i = 0; i < np; i++) {
            add_desc(all, &n, "emu", paths[i]);
            free(paths[i]);
        }
    }
    for (size_t i = 0; i < n && i < max; i++)
        list[i] = all[i];
    free(all);
    *count = n;
    return TX_OK;
}

TX_API int tx_device_count(unsigned *count)
{
    size_t n = 0;
    int rc;

    if (!count)
        return tx_error(TX_EINVAL, "tx_device_count: NULL count");
    rc = tx_device_enumerate(NULL, 0, &n);
    if (rc == 0)
        *count = (unsigned)n;
    return rc;
}
