/* SPDX-License-Identifier: MIT */
/*
 * Scalar conversions between float and the TX8's 16- and 8-bit types, and
 * the dtypes' sizes and names (tx_f32_to_bf16, tx_e4m3_to_f32,
 * tx_dtype_size, ...). The number formats are the hardware's: they are
 * defined once, in the hardware interface <tx8/tx8_dtype.h>, which the
 * device model includes too; this is the SDK's spelling of it.
 */
#ifndef TX_DTYPE_H
#define TX_DTYPE_H

#include <tx8/tx8_dtype.h>

#endif /* TX_DTYPE_H */
