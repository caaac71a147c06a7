/* SPDX-License-Identifier: MIT */
/*
 * Compute engine: the settings table and its reader (settings.h,
 * docs/settings.md). The only place the engine reads its environment.
 */
#include "settings.h"
#include "tx8_engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFF(f) offsetof(struct eng_settings, f)

const struct eng_setting eng_settings_table[] = {
    {.name = "TX8_ENGINE_ISA",
     .words = {"auto", "portable", "avx2", "avx512", "amx"},
     .def = "auto",
     .doc =
         "the compute ISA when the creator asks for TX8_ISA_AUTO (docs/engine.md); another value "
         "fails the creation",
     .off = OFF(isa),
     .strict = 1},
    {.name = "TX8_ENGINE_AVX512BF16",
     .words = {"0", "1"},
     .def = "1",
     .doc = "0: no AVX512-BF16 tiles at the avx512 and amx levels",
     .off = OFF(avx512bf16)},
    {.name = "TX8_ENGINE_MOE_UNFUSED",
     .words = {"0", "1"},
     .def = "0",
     .doc = "1: MOE_FFN computed expert by expert (comparison)",
     .off = OFF(moe_unfused)},
    {.name = "TX8_ATTN_BF16_DOT",
     .words = {"f32", "vdpbf16ps"},
     .def = "vdpbf16ps on AMD, f32 elsewhere",
     .doc = "the BF16 attention products' form on the AVX-512 tile and decode kernel",
     .off = OFF(attn_bf16_dot)},
    {.name = "TX8_GEMV_PREFETCH",
     .words = {"0", "1"},
     .def = "the CPU family's",
     .doc = "the AVX-512 float/FP8 GEMV's software prefetch (comparisons; no result changes)",
     .off = OFF(gemv_prefetch)},
    {.name = "TX8_ATTN_TILE",
     .words = {"0*"},
     .def = "on",
     .doc = "a value starting with 0: ATTENTION's per-token path on every ISA "
            "(A/B checks)",
     .off = OFF(attn_tile),
     .live = 1},
    {.name = "TX8_ATTN_DECODE",
     .words = {"0*"},
     .def = "on",
     .doc = "a value starting with 0: no decode kernel, one-token ATTENTION on the tile or "
            "per-token path",
     .off = OFF(attn_decode),
     .live = 1},
    {.name = "TX8_DSA_TILE",
     .words = {"0*"},
     .def = "on",
     .doc = "a value starting with 0: DSA_INDEX's per-token scoring on every ISA (A/B checks)",
     .off = OFF(dsa_tile),
     .live = 1},
};
const size_t eng_settings_count = sizeof(eng_settings_table) / sizeof(eng_settings_table[0]);

/* index of v among the setting's words, -1 */
static int word_index(const struct eng_setting *s, const char *v)
{
    for (int i = 0; i < ENG_SETTING_WORDS && s->words[i]; i++)
        if (!strcmp(s->words[i], v))
            return i;
    return -1;
}

/* What value (NULL or empty: unset) gives setting s: -1 the default, a
 * word's index, -2 a bad strict value. */
static int value_of(const struct eng_setting *s, const char *value)
{
    if (!value || !*value)
        return -1;
    if (!strcmp(s->words[0], "0*"))
        return value[0] == '0' ? 0 : -1;
    int w = word_index(s, value);
    return w >= 0 ? w : s->strict ? -2 : -1;
}

static int *field(struct eng_settings *set, const struct eng_setting *s)
{
    return (int *)(void *)((char *)set + s->off);
}

static void print_setting(const struct eng_setting *s, const char *e, int v)
{
    char words[128] = ""; /* "a|b|c" */
    for (int i = 0; i < ENG_SETTING_WORDS && s->words[i]; i++)
        snprintf(words + strlen(words), sizeof(words) - strlen(words), "%s%s", i ? "|" : "",
                 s->words[i]);
    if (v >= 0)
        fprintf(stderr, "tx8-engine: settings (engine): %s=%s (environment)\n", s->name, e);
    else if (v == -2)
        fprintf(stderr,
                "tx8-engine: settings (engine): %s=%s: not %s (the engine is not created)\n",
                s->name, e, words);
    else if (e && *e)
        fprintf(stderr, "tx8-engine: settings (engine): %s=%s ignored: not %s; default %s\n",
                s->name, e, words, s->def);
    else
        fprintf(stderr, "tx8-engine: settings (engine): %s default %s\n", s->name, s->def);
}

void eng_settings_read(struct eng_settings *set)
{
    const char *dbg = getenv("TX_DEBUG"); /* libtx's: anything but 0 */
    int debug = dbg && *dbg && strcmp(dbg, "0") != 0;
    for (size_t i = 0; i < eng_settings_count; i++) {
        const struct eng_setting *s = &eng_settings_table[i];
        const char *e = getenv(s->name);
        int v = value_of(s, e);
        *field(set, s) = v;
        if (debug)
            print_setting(s, e, v);
    }
}

int eng_settings_set(struct eng_settings *set, const char *name, const char *value, int live)
{
    for (size_t i = 0; name && i < eng_settings_count; i++) {
        const struct eng_setting *s = &eng_settings_table[i];
        if (strcmp(s->name, name))
            continue;
        if (live && !s->live)
            return -EINVAL;
        *field(set, s) = value_of(s, value);
        return 0;
    }
    return -EINVAL;
}

const char *tx8_engine_setting_env(const char *name)
{
    for (size_t i = 0; name && i < eng_settings_count; i++)
        if (!strcmp(eng_settings_table[i].name, name))
            return getenv(name);
    return NULL;
}
