// SPDX-License-Identifier: MIT
/* glm_reference.c built as the float64 reference (ref_real = double): ref_real.h */
#define TXREF_F64 1
#include "glm_reference.c"
