/* SPDX-License-Identifier: MIT */
/*
 * libtx internal: the checks and copy of a custom attention mask (struct
 * glm_attn_mask, tx/glm.h), shared by the runtime (runtime/attn_mask.c)
 * and the FP32 reference (glm_ref_session_set_attn_mask), so that both
 * refuse the same masks with the same messages.
 */
#ifndef TX_COMMON_ATTN_MASK_H
#define TX_COMMON_ATTN_MASK_H

#include <stddef.h>
#include <stdint.h>

#include <tx/glm.h>

/* TX_OK, or TX_EINVAL naming `who`, the row and the range at fault (into
 * err when err is not NULL, always for tx_last_error()). max_tokens: the
 * positions left in the session (n_tokens must fit). */
int tx_attn_mask_check(const struct glm_attn_mask *m, int max_tokens, const char *who, char *err,
                       size_t errsz);
/* malloc()ed copies of row_start [n_tokens + 1] and ranges; TX_ENOMEM */
int tx_attn_mask_copy(const struct glm_attn_mask *m, int32_t **row_start, int32_t **ranges);

#endif
