/* SPDX-License-Identifier: MIT */
/*
 * libtx: the TX8 SDK. Include this one header.
 *
 * Parts append their public header here.
 */
#ifndef TX_H
#define TX_H

#include <tx/tx_error.h>
#include <tx/tx_dtype.h>
#include <tx/tx_device.h>
#include <tx/tx_tokenizer.h>

#include <tx/glm.h>
#include <tx/tx_telemetry.h>
#include <tx/tx_profile.h>

#endif /* TX_H */
