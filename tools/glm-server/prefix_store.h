/* SPDX-License-Identifier: MIT */
/*
 * glm-server's block prefix cache (prefix_store.c): KV blocks of
 * PS_BLOCK positions shared by content hash across requests and slots,
 * kept in host memory, evicted least recently used under a byte budget
 * (docs/glm-server.md, "Prefix cache").
 */
#ifndef GLM_SERVER_PREFIX_STORE_H
#define GLM_SERVER_PREFIX_STORE_H

#include <stdint.h>

#include <tx/glm.h>

#define PS_BLOCK 64 /* positions of a block */

struct prefix_store;

struct ps_stats {
    uint64_t query_tokens;    /* prompt tokens (whole blocks) looked up */
    uint64_t hit_tokens;      /* ... found in the store */
    uint64_t restored_tokens; /* tokens copied from the store into a slot */
    uint64_t stored_blocks;   /* blocks published */
    uint64_t evicted_blocks;  /* blocks evicted (budget or out of host memory) */
    uint64_t blocks, bytes;   /* held now */
    uint64_t budget;          /* bytes */
};

/* A store of at most budget bytes (0: the store is off); NULL when out of
 * memory. */
struct prefix_store *ps_new(uint64_t budget);
void ps_free(struct prefix_store *ps);
/* Every block dropped (the model was reloaded). */
void ps_clear(struct prefix_store *ps);
/* The KV format of the blocks: a hash of everything that changes a
 * position's KV bits besides its tokens (model, plan, cache types, batch
 * invariance); a different one than the blocks' drops them all. */
void ps_set_format(struct prefix_store *ps, uint64_t format);
/* Session s holds ids[0, have) of ids[0, n): the longest chain of stored
 * blocks of ids is copied into s beyond have (s is truncated to the first
 * block boundary at or below have). Returns the positions s now holds
 * (>= have unless a copy failed: then s holds what it says, logged in
 * *err). */
int ps_restore(struct prefix_store *ps, glm_session_t *s, const int32_t *ids, int n, int have,
               char *err, size_t errlen);
/* Session s holds ids[0, n): its whole blocks not in the store are read
 * from it and stored (older blocks evicted to stay within the budget);
 * those already stored become the most recently used. 0, or -1 with *err
 * (a read failed). */
int ps_publish(struct prefix_store *ps, glm_session_t *s, const int32_t *ids, int n, char *err,
               size_t errlen);
void ps_get_stats(const struct prefix_store *ps, struct ps_stats *st);

#endif
