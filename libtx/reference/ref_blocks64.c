// SPDX-License-Identifier: MIT
/* ref_blocks.c built as the float64 reference (ref_real = double): ref_real.h */
#define TXREF_F64 1
#include "ref_blocks.c"
