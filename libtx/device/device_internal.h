/* SPDX-License-Identifier: MIT */
/* libtx device layer: objects shared by device.c and cmdbuf.c. */
#ifndef TX_DEVICE_INTERNAL_H
#define TX_DEVICE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/handle.h"
#include "device/backend.h"

/* A chunk of the command arena lent to a job. */
struct arena_chunk {
    uint64_t off, len;
    uint64_t job; /* 0 while the submit is in progress */
    bool failed;  /* the submit failed: free at once */
};

/* A command buffer too big for the arena: a BO of its own for one job. */
struct cmd_dedicated {
    struct tx_backend_bo bo;
    uint64_t job;
    bool failed;
    struct cmd_dedicated *next;
};

struct cmd_arena {
    bool have;
    struct tx_backend_bo bo;
    uint8_t *map;
    uint64_t head;         /* next free byte */
    struct arena_chunk *q; /* FIFO ring of chunks, oldest first */
    unsigned qcap, qhead, qlen;
    struct cmd_dedicated *dedicated;
};

struct tx_bo;
struct tx_cmdbuf;

struct tx_device {
    struct tx_obj obj;
    const struct tx_backend_ops *ops;
    struct tx_backend *be;
    char spec[TX_SPEC_MAX];
    struct tx_device_info info; /* static part, read at open */

    /* Held shared by every API call using the backend, exclusively by
     * tx_device_close(), so the backend is never closed under a call. */
    pthread_rwlock_t oplock;
    bool closed;
    int closing; /* set (atomically) when tx_device_close() starts */

    /* Guards the lists, the arena and BO state. Never held across a
     * blocking backend call. */
    pthread_mutex_t lock;
    struct tx_bo *bos;     /* live */
    struct tx_bo *zombies; /* freed by the user, still used by a job */
    struct tx_cmdbuf *cmdbufs;
    struct cmd_arena arena;
    uint64_t submit_timeout_ns; /* TX_SUBMIT_TIMEOUT_MS (tx_settings_device) */
    /* Profiling ($TX_PROFILE): buffers of jobs in flight / free (d->lock) */
    struct txd_prof *prof_busy, *prof_free;
    bool prof_base; /* the expert-cache counters' baseline was taken */
};

struct tx_bo {
    struct tx_obj obj;
    struct tx_device *dev; /* holds a reference */
    struct tx_backend_bo b;
    uint32_t flags;
    char label[TX8_LABEL_LEN];
    uint64_t last_job; /* newest job that may use it */
    unsigned inflight; /* submits using it in progress */
    bool mapped;
    bool dead; /* freed by the user or the device closed */
    struct tx_bo *prev, *next;
};

/* Enter/leave an API call on a device handle (reference + shared oplock).
 * fn names the API function in error messages. */
int txd_enter(tx_device_t *h, struct tx_device **out, const char *fn);
void txd_leave(struct tx_device *d);

/* The live BO of a handle with a reference (NULL + message if invalid). */
struct tx_bo *txd_bo_get(tx_bo_t *h, const char *fn, const char *what, int *rc);

/* cmdbuf.c */
void txd_cmdbuf_close_all(struct tx_device *d); /* d->lock not held */
/* Profiling: name the next command appended to cb (copied). */
int txd_cmdbuf_name(tx_cmdbuf_t *cb, const char *name);
/* Profiling: move the names of cb's commands out (*names: n entries, each
 * NULL or malloc'ed; free them and the array). */
int txd_cmdbuf_take_names(tx_cmdbuf_t *cb, char ***names, unsigned *n);

/* The buffer of tx_cmdbuf_profile (*bo = 0: none). */
int txd_cmdbuf_prof(tx_cmdbuf_t *cb, uint64_t *bo, uint64_t *off, uint64_t *size);

int txd_cmdbuf_snapshot(tx_cmdbuf_t *h, struct tx_device *d, uint8_t **bytes, size_t *len,
                        uint64_t **bo_handles, uint32_t **access, unsigned *nuses);

/* The commands of cb into dst (at most cap bytes; *len: how many) and its
 * BOs with their access (*uses: malloc'ed, *nuses entries): a job to keep
 * in device memory and submit with tx_submit_raw (runtime/decode_graph.c). */
int txd_cmdbuf_copy_out(tx_cmdbuf_t *cb, void *dst, size_t cap, size_t *len,
                        struct tx_bo_use **uses, unsigned *nuses);

/* tx_cmd_sample with the allowed-token mask of interface 1.9 (grammar
 * sampling): u32 [rows][ld_allow] words at allow; ld_allow 0: no mask (the
 * shorter form tx_cmd_sample sends). A device older than 1.9: TX_ENOTSUP. */
int txd_cmd_sample_allow(tx_cmdbuf_t *cb, const struct tx_sample_args *a, tx_ref_t allow,
                         uint32_t ld_allow);

/* Copy a label, truncated to TX8_LABEL_LEN - 1 bytes. */
void txd_label(char dst[TX8_LABEL_LEN], const char *src);

/* Whether jobs of dev may carry TX_SUBMIT_BATCH_INVARIANT (interface >= 1.6
 * and a backend that passes it: emu, accel with tx8.ko >= 1.2). */
int txd_can_batch_invariant(tx_device_t *dev);
/* tx_cmd_dsa_index_ex, with query_q8: TX8_DSA_F_QUERY_Q8 (8-bit products
 * over the Q8_0 keys, interface 1.9) */
int txd_cmd_dsa_index_q8(tx_cmdbuf_t *cb, const struct tx_dsa_index_args *a, uint16_t k_dtype,
                         int query_q8);

/* tx_cmd_attention_flags / txd_cmd_dsa_index_q8 with the key bitmap of
 * interface 1.10 (custom attention masks): u64 [tokens][ld_mask] words at
 * mask; ld_mask 0: no bitmap (the 1.9 form is sent). A device older than
 * 1.10: TX_ENOTSUP. */
int txd_cmd_attention_mask(tx_cmdbuf_t *cb, const struct tx_attention_args *a, uint16_t v_dtype,
                           uint16_t aflags, tx_ref_t mask, uint32_t ld_mask);
int txd_cmd_dsa_index_mask(tx_cmdbuf_t *cb, const struct tx_dsa_index_args *a, uint16_t k_dtype,
                           int query_q8, tx_ref_t mask, uint32_t ld_mask);

/* device.c: tx_settings_device's entries */
enum { TXD_SETTING_SUBMIT_TIMEOUT, TXD_SETTING_DEVICE, TXD_SETTING_COUNT };

#endif
