/* SPDX-License-Identifier: MIT */
/*
 * Compute engine: its settings -- the environment variables it reads, as
 * one table of {name, values, default, doc} (settings.c). They are read
 * once, by tx8_engine_create, into the engine (e->set) and passed down from
 * there; TX_DEBUG=1 prints each at every creation ("tx8-engine: settings
 * (engine): ..."). docs/settings.md lists them (tests/unit/test_settings.c
 * checks that it does). tx8_engine_setting (tx8_engine.h) changes the
 * per-command ones of a live engine (A/B comparisons).
 */
#ifndef TX8_ENGINE_SETTINGS_H
#define TX8_ENGINE_SETTINGS_H

#include <stddef.h>

/* -1: unset (the default); else the index of the value's word */
struct eng_settings {
    int isa;           /* TX8_ENGINE_ISA: enum tx8_engine_isa; -2 not a name */
    int avx512bf16;    /* TX8_ENGINE_AVX512BF16: 0 = off */
    int moe_unfused;   /* TX8_ENGINE_MOE_UNFUSED: 0 = "1", MOE_FFN per expert */
    int attn_bf16_dot; /* TX8_ATTN_BF16_DOT: 0 = f32, 1 = vdpbf16ps */
    int gemv_prefetch; /* TX8_GEMV_PREFETCH: 0, 1 */
    int attn_tile;     /* TX8_ATTN_TILE: 0 = the per-token path */
    int attn_decode;   /* TX8_ATTN_DECODE: 0 = the per-token path */
    int dsa_tile;      /* TX8_DSA_TILE: 0 = the per-token path */
};

/* Reads the environment into s, printing each setting under TX_DEBUG. */
void eng_settings_read(struct eng_settings *s);

/* Sets the setting named name (a variable of the table) in s to what
 * value (NULL: unset) would give it; live: only those a running engine
 * may change. 0, or -EINVAL (unknown name, or not live). */
int eng_settings_set(struct eng_settings *s, const char *name, const char *value, int live);

#define ENG_SETTING_WORDS 6

/* The table, for the documentation check (tests/unit/test_settings.c). */
struct eng_setting {
    const char *name; /* the environment variable */
    /* its values (NULL-terminated); {"0*"}: a value that starts with 0 */
    const char *words[ENG_SETTING_WORDS];
    const char *def; /* the default, as documented */
    const char *doc; /* one line */
    size_t off;      /* its int in struct eng_settings */
    int strict;      /* another value: -2, and tx8_engine_create fails */
    int live;        /* may change between commands (tx8_engine_setting) */
};
extern const struct eng_setting eng_settings_table[];
extern const size_t eng_settings_count;

#endif /* TX8_ENGINE_SETTINGS_H */
