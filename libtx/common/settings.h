/* SPDX-License-Identifier: MIT */
/*
 * libtx internal: settings -- the environment variables a component of
 * libtx reads, as one table per component of {name, kind, range, default,
 * doc}. A component reads its table once, at the point the table's comment
 * names (process start, device open, model load), into values it keeps;
 * with TX_DEBUG=1 every read prints each setting and where its value came
 * from. docs/settings.md lists every table (tests/unit/test_settings.c
 * checks that it does).
 */
#ifndef TX_COMMON_SETTINGS_H
#define TX_COMMON_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

enum tx_setting_kind {
    TX_SETTING_WORD, /* one of the '|'-separated words of range */
    TX_SETTING_UINT, /* a decimal integer in [lo, hi] */
    TX_SETTING_TEXT, /* any text (a path, a device list, a size) */
};

struct tx_setting {
    const char *name; /* the environment variable */
    enum tx_setting_kind kind;
    const char *range; /* WORD: "a|b|c"; UINT, TEXT: as documented */
    uint64_t lo, hi;   /* UINT */
    const char *def;   /* the default, as documented */
    /* a value outside range: 1 fails the read (TX_EINVAL "WHO: NAME=value:
     * expected EXPECTED"); 0 leaves the default (as the component always
     * did), noted under TX_DEBUG */
    int strict;
    const char *expected; /* strict: the words of the message */
    const char *doc;      /* one line */
};

struct tx_setting_table {
    const char *component; /* "runtime: model load", ... */
    const char *when;      /* when it is read */
    const struct tx_setting *s;
    size_t n;
};

/* A setting's value: set from the environment (non-empty, valid), its
 * text, its word's index (WORD) or number (UINT). */
struct tx_setting_val {
    int set;
    const char *text;
    int word;
    uint64_t num;
};

/* Reads t's settings into v[t->n]; TX_EINVAL naming the first bad strict
 * value (who: the message's prefix). Prints each under TX_DEBUG. */
int tx_settings_read(const struct tx_setting_table *t, const char *who, struct tx_setting_val *v);
/* The same without printing (TX_DEBUG's own table); then, once TX_DEBUG
 * is known, tx_settings_print. */
int tx_settings_parse(const struct tx_setting_table *t, const char *who, struct tx_setting_val *v);
void tx_settings_print(const struct tx_setting_table *t, const struct tx_setting_val *v);

/* The tables (docs/settings.md) */
extern const struct tx_setting_table tx_settings_common;    /* common/error.c */
extern const struct tx_setting_table tx_settings_profile;   /* profile/profile.c */
extern const struct tx_setting_table tx_settings_device;    /* device/device.c, registry.c */
extern const struct tx_setting_table tx_settings_telemetry; /* telemetry/shm.c */
extern const struct tx_setting_table tx_settings_cpu_cache; /* common/cpu_cache.c */
extern const struct tx_setting_table tx_settings_load;      /* runtime/load_options.c */

#endif
