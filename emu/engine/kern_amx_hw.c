/* SPDX-License-Identifier: MIT */
/*
 * The AMX GEMM blocks on the real tile unit: kern_amx.inc over the
 * instructions. This object alone is built with -mamx-tile -mamx-int8
 * -mamx-bf16 (Makefile, SIMD_AMX; plus the AVX-512 flags of the packing
 * and the epilogue, as kern_amx_emu.c); eng_amx_mm_hw is installed in an
 * engine's kernel table only after CPUID reported AMX-TILE/INT8/BF16 and
 * the kernel granted the tile data state (engine.c, amx_usable).
 */
#define AMX_HW 1
#define AMX_FN(name) name##_hw
#include "kern_amx.inc"
