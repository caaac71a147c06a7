// SPDX-License-Identifier: MIT
/*
 * A custom attention mask's checks and copy (common/attn_mask.h).
 */
#include "common/attn_mask.h"

#include <stdlib.h>
#include <string.h>

#include <tx-internal/tx_errors.h>

int tx_attn_mask_check(const struct glm_attn_mask *m, int max_tokens, const char *who, char *err,
                       size_t errsz)
{
    if (!m || !m->row_start)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: NULL mask or row_start", who);
    int n = m->n_tokens;
    if (n <= 0)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: n_tokens %d must be > 0", who, n);
    if (!m->ranges && m->row_start[n] > 0)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: %d ranges and ranges is NULL", who,
                         m->row_start[n]);
    if (n > max_tokens)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: the mask describes %d tokens, the session has %d positions left", who,
                         n, max_tokens);
    if (m->row_start[0] != 0)
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: row_start[0] is %d, must be 0", who,
                         m->row_start[0]);
    for (int i = 0; i < n; i++) {
        int32_t k0 = m->row_start[i], k1 = m->row_start[i + 1];
        if (k1 < k0)
            return tx_errbuf(err, errsz, TX_EINVAL,
                             "%s: row %d: row_start[%d] = %d is below row_start[%d] = %d", who, i,
                             i + 1, k1, i, k0);
        int32_t prev_end = 0;
        for (int32_t k = k0; k < k1; k++) {
            int32_t a = m->ranges[2 * (int64_t)k], b = m->ranges[2 * (int64_t)k + 1];
            if (a < 0 || b > n || a >= b)
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "%s: row %d: range [%d, %d) is empty or outside the prompt's %d "
                                 "tokens [0, %d)",
                                 who, i, a, b, n, n);
            if (k > k0 && a < prev_end)
                return tx_errbuf(err, errsz, TX_EINVAL,
                                 "%s: row %d: range [%d, %d) overlaps or precedes the range before "
                                 "it (ending at %d): sort a row's ranges, without overlaps",
                                 who, i, a, b, prev_end);
            prev_end = b;
        }
    }
    return TX_OK;
}

int tx_attn_mask_copy(const struct glm_attn_mask *m, int32_t **row_start, int32_t **ranges)
{
    size_t nr = (size_t)m->row_start[m->n_tokens];
    *row_start = malloc(sizeof(int32_t) * ((size_t)m->n_tokens + 1));
    *ranges = malloc(sizeof(int32_t) * (2 * nr + 1));
    if (!*row_start || !*ranges) {
        free(*row_start);
        free(*ranges);
        *row_start = *ranges = NULL;
        return tx_error(TX_ENOMEM, "attention mask: out of memory");
    }
    memcpy(*row_start, m->row_start, sizeof(int32_t) * ((size_t)m->n_tokens + 1));
    if (nr)
        memcpy(*ranges, m->ranges, sizeof(int32_t) * 2 * nr);
    return TX_OK;
}
