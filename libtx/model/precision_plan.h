/* SPDX-License-Identifier: MIT */
/* Internal: the precision-plan vocabulary (model/precision_plan.c), shared by
 * the runtime's per-device plans and the export. The public half
 * (glm_plan_parse, glm_plan_format, glm_plan_golden, ...) is in <tx/glm.h>. */
#ifndef TX_MODEL_PRECISION_PLAN_H
#define TX_MODEL_PRECISION_PLAN_H

#include <stddef.h>

#include <tx/glm.h>

/* The layer types with a name: the public ones and the runtime's router
 * (rt_internal.h RT_NLTYPES) */
#define PLAN_NLTYPES (GLM_LAYER_TYPE_COUNT + 1)

/* TX_OK, or the error (recorded) of a layer type / precision pair that no
 * plan may hold (FP8 norms, INT8 norms, out-of-range values) */
int plan_check_entry(glm_layer_type_t t, glm_precision_t p);
/* A precision's name ("fp16", "int8", "f8_e4m3", any case) of length n:
 * its glm_precision_t, or -1 */
int plan_precision_parse(const char *s, size_t n);
/* Short form for reports: "golden", "fp32", "int8", or the full list */
const char *plan_short(const glm_precision_plan_t *plan, char *buf, size_t bufsz);

#endif
