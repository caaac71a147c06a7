/* SPDX-License-Identifier: MIT */
/*
 * libtx: reading a component's settings table from the environment
 * (common/settings.h).
 */
#include "common/settings.h"

#include <tx-internal/tx_errors.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* index of word v among range's '|'-separated words, -1 */
static int word_of(const char *range, const char *v)
{
    size_t n = strlen(v);
    int i = 0;
    for (const char *p = range; p; i++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n))
            return i;
        p = bar ? bar + 1 : NULL;
    }
    return TX_NONE;
}

static int uint_of(const struct tx_setting *s, const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || *v == '-' || x < s->lo || x > s->hi)
        return TX_EINVAL;
    *out = x;
    return 0;
}

int tx_settings_parse(const struct tx_setting_table *t, const char *who, struct tx_setting_val *v)
{
    for (size_t i = 0; i < t->n; i++) {
        const struct tx_setting *s = &t->s[i];
        const char *e = getenv(s->name);
        memset(&v[i], 0, sizeof(v[i]));
        v[i].word = -1;
        if (!e || !*e)
            continue;
        int ok = 1;
        if (s->kind == TX_SETTING_WORD)
            ok = (v[i].word = word_of(s->range, e)) >= 0;
        else if (s->kind == TX_SETTING_UINT)
            ok = !uint_of(s, e, &v[i].num);
        if (!ok && s->strict)
            return tx_error(TX_EINVAL, "%s: %s=%s: expected %s", who, s->name, e, s->expected);
        v[i].set = ok;
        v[i].text = ok ? e : NULL;
    }
    return TX_OK;
}

void tx_settings_print(const struct tx_setting_table *t, const struct tx_setting_val *v)
{
    for (size_t i = 0; i < t->n; i++) {
        const char *e = getenv(t->s[i].name);
        if (v[i].set)
            tx_debug("settings (%s): %s=%s (environment)", t->component, t->s[i].name, v[i].text);
        else if (e && *e)
            tx_debug("settings (%s): %s=%s ignored: not %s; default %s", t->component, t->s[i].name,
                     e, t->s[i].range, t->s[i].def);
        else
            tx_debug("settings (%s): %s default %s", t->component, t->s[i].name, t->s[i].def);
    }
}

int tx_settings_read(const struct tx_setting_table *t, const char *who, struct tx_setting_val *v)
{
    int rc = tx_settings_parse(t, who, v);
    if (!rc && tx_debug_enabled())
        tx_settings_print(t, v);
    return rc;
}
