/* SPDX-License-Identifier: MIT */
/*
 * libtx internal: opaque handles with use-after-free detection.
 *
 * Public handles (tx_device_t *, tx_bo_t *, tx_cmdbuf_t *) are not pointers
 * to memory: they encode (generation, slot, type) of a process-wide table.
 * A freed handle's slot gets a new generation, so a stale handle is refused
 * and never dereferenced. Objects are reference counted: tx_handle_get()
 * returns the object with a reference the caller drops with tx_obj_put();
 * the table holds one reference until tx_handle_remove().
 */
#ifndef TX_COMMON_HANDLE_H
#define TX_COMMON_HANDLE_H

#include <stdint.h>

enum tx_obj_type {
    TX_OBJ_DEVICE = 1,
    TX_OBJ_BO = 2,
    TX_OBJ_CMDBUF = 3,
};

struct tx_obj {
    uint32_t type;
    uint32_t refs;   /* guarded by the table lock */
    uint64_t handle; /* 0 once removed from the table */
    void (*destroy)(struct tx_obj *o);
};

/* Initialise o (one reference, the caller's) and enter it in the table
 * (which takes its own reference). Returns the handle, or 0 when out of
 * memory. */
uint64_t tx_handle_add(struct tx_obj *o, uint32_t type, void (*destroy)(struct tx_obj *));

/* The live object of handle h and type, with a new reference; NULL if h is
 * not a live handle of that type. */
struct tx_obj *tx_handle_get(uint64_t h, uint32_t type);

/* Make h invalid and drop the table's reference. Returns 0, or TX_ENOENT if
 * h was not live (e.g. freed twice). */
int tx_handle_remove(uint64_t h, uint32_t type);

void tx_obj_get(struct tx_obj *o);
void tx_obj_put(struct tx_obj *o);

#define TX_HANDLE(p) ((uint64_t)(uintptr_t)(p))
#define TX_PTR(type, h) ((type *)(uintptr_t)(h))

#endif
