/* SPDX-License-Identifier: MIT */
/*
 * The AMX GEMM blocks on an emulated tile unit: kern_amx.inc over a C
 * emulation of the instructions' documented semantics (Intel SDM Vol. 2:
 * LDTILECFG, TILERELEASE, TILEZERO, TILELOADD, TILESTORED, TDPBSSD,
 * TDPBF16PS; palette 1: 8 tiles of up to 16 rows x 64 bytes). Used by the
 * unit tests, and by engines created with eng_amx_emulate set (tests
 * only), so that the AMX path runs on CPUs without AMX. The tile state is
 * per thread, as the hardware's is per logical CPU; an instruction that
 * would fault (#GP, #UD) prints why and aborts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AMX_EMU 1
#define AMX_FN(name) name##_emu
#include "kern_amx.inc"

int eng_amx_break_layout;
int eng_amx_emulate;
_Atomic uint64_t eng_amx_emu_tdp;

static _Thread_local struct {
    int valid; /* a palette-1 configuration is loaded */
    uint8_t rows[AMX_TILES];
    uint16_t colsb[AMX_TILES];
    uint8_t t[AMX_TILES][AMX_MAX_ROWS][AMX_MAX_COLSB];
} amx;

static void amx_fault(const char *insn, const char *why)
{
    fprintf(stderr, "amx-emu: %s would fault: %s\n", insn, why);
    abort();
}

void amx_emu_config(const struct amx_tilecfg *cfg)
{
    memset(&amx, 0, sizeof(amx));
    if (cfg->palette == 0)
        return; /* palette 0: the init state, tiles unconfigured */
    if (cfg->palette != 1)
        amx_fault("ldtilecfg", "palette is not 0 or 1 (#GP)");
    for (int i = 0; i < 14; i++)
        if (cfg->rsvd0[i])
            amx_fault("ldtilecfg", "reserved bytes 2-15 not zero (#GP)");
    if (cfg->start_row)
        amx_fault("ldtilecfg", "start_row not zero (only set by an interrupted load)");
    for (int i = 0; i < 16; i++) {
        if (i >= AMX_TILES) {
            if (cfg->rows[i] || cfg->colsb[i])
                amx_fault("ldtilecfg", "tile 8-15 configured in palette 1 (#GP)");
            continue;
        }
        if (cfg->rows[i] > AMX_MAX_ROWS || cfg->colsb[i] > AMX_MAX_COLSB)
            amx_fault("ldtilecfg", "rows > 16 or colsb > 64 (#GP)");
        if (!cfg->rows[i] != !cfg->colsb[i])
            amx_fault("ldtilecfg", "rows and colsb must be both zero or both set (#GP)");
        amx.rows[i] = cfg->rows[i];
        amx.colsb[i] = cfg->colsb[i];
    }
    amx.valid = 1;
}

void amx_emu_release(void)
{
    memset(&amx, 0, sizeof(amx));
}

static void amx_check(const char *insn, int t)
{
    if (!amx.valid)
        amx_fault(insn, "tiles not configured (#UD)");
    if (t < 0 || t >= AMX_TILES || !amx.rows[t])
        amx_fault(insn, "tile not configured (#UD)");
}

void amx_emu_zero(int t)
{
    amx_check("tilezero", t);
    memset(amx.t[t], 0, sizeof(amx.t[t]));
}

void amx_emu_load(int t, const void *base, long stride)
{
    amx_check("tileloadd", t);
    const uint8_t *p = base;
    memset(amx.t[t], 0, sizeof(amx.t[t])); /* bytes past colsb and rows: 0 */
    for (int r = 0; r < amx.rows[t]; r++)
        memcpy(amx.t[t][r], p + (long)r * stride, amx.colsb[t]);
}

void amx_emu_store(int t, void *base, long stride)
{
    amx_check("tilestored", t);
    uint8_t *p = base;
    for (int r = 0; r < amx.rows[t]; r++)
        memcpy(p + (long)r * stride, amx.t[t][r], amx.colsb[t]);
}

/* shape checks common to TDPBSSD and TDPBF16PS */
static void amx_dp_check(const char *insn, int c, int a, int b)
{
    amx_check(insn, c);
    amx_check(insn, a);
    amx_check(insn, b);
    if (c == a || c == b || a == b)
        amx_fault(insn, "tile operands not distinct (#UD)");
    if (amx.colsb[c] % 4 || amx.colsb[a] % 4)
        amx_fault(insn, "colsb not a multiple of 4 (#UD)");
    if (amx.rows[c] != amx.rows[a])
        amx_fault(insn, "dst.rows != src1.rows (#UD)");
    if (amx.colsb[a] / 4 != amx.rows[b])
        amx_fault(insn, "src1.colsb / 4 != src2.rows (#UD)");
    if (amx.colsb[c] != amx.colsb[b])
        amx_fault(insn, "dst.colsb != src2.colsb (#UD)");
}

/* dst.dword[m][n] += sum over k of the 4 signed byte products of
 * src1.row[m].dword[k] and src2.row[k].dword[n] (int32, wrapping) */
void amx_emu_dpbssd(int c, int a, int b)
{
    amx_dp_check("tdpbssd", c, a, b);
    atomic_fetch_add_explicit(&eng_amx_emu_tdp, 1, memory_order_relaxed);
    for (int m = 0; m < amx.rows[c]; m++) {
        int32_t tmp[16];
        memcpy(tmp, amx.t[c][m], 64);
        for (int k = 0; k < amx.colsb[a] / 4; k++)
            for (int n = 0; n < amx.colsb[c] / 4; n++) {
                const int8_t *x = (const int8_t *)&amx.t[a][m][4 * k];
                const int8_t *y = (const int8_t *)&amx.t[b][k][4 * n];
                int32_t d = x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3];
                tmp[n] = (int32_t)((uint32_t)tmp[n] + (uint32_t)d);
            }
        memset(amx.t[c][m], 0, 64); /* write_row_and_zero */
        memcpy(amx.t[c][m], tmp, (size_t)amx.colsb[c]);
    }
}

static float bf16_daz(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    if (!(h & 0x7f80))
        h &= 0x8000; /* denormal (and zero) inputs: signed zero */
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float ftz(float f)
{
    return fpclassify(f) == FP_SUBNORMAL ? copysignf(0.0f, f) : f;
}

/* dst.fp32[m][n] += a.bf16[m][2k] * b.bf16[k][2n], then += the odd pair,
 * per k in order: products exact in f32, each add rounded to nearest even;
 * inputs denormal-as-zero, results flushed to zero (the instruction ignores
 * MXCSR) */
void amx_emu_dpbf16ps(int c, int a, int b)
{
    amx_dp_check("tdpbf16ps", c, a, b);
    atomic_fetch_add_explicit(&eng_amx_emu_tdp, 1, memory_order_relaxed);
    for (int m = 0; m < amx.rows[c]; m++) {
        float tmp[16];
        memcpy(tmp, amx.t[c][m], 64);
        for (int k = 0; k < amx.colsb[a] / 4; k++)
            for (int n = 0; n < amx.colsb[c] / 4; n++) {
                const uint8_t *x = &amx.t[a][m][4 * k];
                const uint8_t *y = &amx.t[b][k][4 * n];
                tmp[n] = ftz(tmp[n] + bf16_daz(x) * bf16_daz(y));
                tmp[n] = ftz(tmp[n] + bf16_daz(x + 2) * bf16_daz(y + 2));
            }
        memset(amx.t[c][m], 0, 64);
        memcpy(amx.t[c][m], tmp, (size_t)amx.colsb[c]);
    }
}
