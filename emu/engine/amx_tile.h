/* SPDX-License-Identifier: MIT */
/*
 * The tile-op layer of the AMX kernels (kern_amx.inc): tile configuration,
 * zero, load, store, the two dot products, release. Two implementations:
 *
 *   AMX_HW   the instructions (<immintrin.h> _tile_*; the including object
 *            is built with -mamx-tile -mamx-int8 -mamx-bf16, kern_amx_hw.c)
 *   AMX_EMU  C emulation of the documented semantics (Intel SDM, Vol. 2,
 *            LDTILECFG / TILELOADD / TILESTORED / TILEZERO / TDPBSSD /
 *            TDPBF16PS / TILERELEASE, palette 1), per thread, so that the
 *            same kernel source runs on any CPU (kern_amx_emu.c). Where the
 *            instruction would fault (#GP on a bad configuration, #UD on
 *            unconfigured tiles or mismatched shapes) the emulation prints
 *            why and aborts.
 *
 * Tile numbers are compile-time constants (the instructions encode them).
 */
#ifndef TX8_AMX_TILE_H
#define TX8_AMX_TILE_H

#include <stdint.h>

/* The 64-byte LDTILECFG operand, palette 1: 8 tiles of at most 16 rows x
 * 64 bytes. */
struct amx_tilecfg {
    uint8_t palette;   /* 1 */
    uint8_t start_row; /* 0 */
    uint8_t rsvd0[14];
    uint16_t colsb[16]; /* bytes per row, tiles 0..7 (8..15: 0) */
    uint8_t rows[16];   /* rows, tiles 0..7 (8..15: 0) */
};
_Static_assert(sizeof(struct amx_tilecfg) == 64, "LDTILECFG operand is 64 bytes");

#define AMX_TILES 8
#define AMX_MAX_ROWS 16
#define AMX_MAX_COLSB 64

#if defined(AMX_HW)
#include <immintrin.h>

#define TL_CONFIG(cfg) _tile_loadconfig(cfg)
#define TL_RELEASE() _tile_release()
#define TL_ZERO(t) _tile_zero(t)
#define TL_LOAD(t, base, stride) _tile_loadd(t, base, stride)
#define TL_STORE(t, base, stride) _tile_stored(t, base, stride)
#define TL_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)
#define TL_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)

#elif defined(AMX_EMU)

void amx_emu_config(const struct amx_tilecfg *cfg);
void amx_emu_release(void);
void amx_emu_zero(int t);
void amx_emu_load(int t, const void *base, long stride);
void amx_emu_store(int t, void *base, long stride);
void amx_emu_dpbssd(int c, int a, int b);
void amx_emu_dpbf16ps(int c, int a, int b);

#define TL_CONFIG(cfg) amx_emu_config((const struct amx_tilecfg *)(cfg))
#define TL_RELEASE() amx_emu_release()
#define TL_ZERO(t) amx_emu_zero(t)
#define TL_LOAD(t, base, stride) amx_emu_load(t, base, (long)(stride))
#define TL_STORE(t, base, stride) amx_emu_store(t, base, (long)(stride))
#define TL_DPBSSD(c, a, b) amx_emu_dpbssd(c, a, b)
#define TL_DPBF16PS(c, a, b) amx_emu_dpbf16ps(c, a, b)

#else
#error "define AMX_HW or AMX_EMU"
#endif

#endif /* TX8_AMX_TILE_H */
