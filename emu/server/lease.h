/* SPDX-License-Identifier: MIT */
/*
 * tx8-emu: the device-side memory allocator ("leases").
 *
 * Device memory [start, end) is handed out in page-aligned leases, best fit.
 * The authoritative table is private to the device; heap_publish() mirrors it
 * into the lease table of the control block (sorted by base, num_leases
 * valid entries), which hosts may read but never influence.
 */
#ifndef TX8_EMU_LEASE_H
#define TX8_EMU_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include <tx8/tx8_hw.h>

struct emu_lease {
    uint64_t base;
    uint64_t size;
    int32_t owner;
    char label[TX8_LABEL_LEN];
};

struct emu_heap {
    uint64_t start; /* first allocatable byte (page aligned) */
    uint64_t end;   /* one past the last */
    uint64_t used;  /* bytes leased */
    unsigned n;     /* leases, sorted by base */
    struct emu_lease l[TX8_MAX_LEASES];
};

void heap_init(struct emu_heap *h, uint64_t start, uint64_t end);

/* Copy a host-provided label: at most TX8_LABEL_LEN - 1 bytes up to the
 * first NUL, control characters replaced by '?', NUL padded. */
void heap_label_copy(char dst[TX8_LABEL_LEN], const char *src);

/* Lease `size` bytes (rounded up to pages) aligned to `align` (0 = page;
 * else a power of two, raised to a page). Returns 0 and the base, or
 * -EINVAL (size 0, bad alignment), -ENOMEM (no gap large enough), -ENOSPC
 * (lease table full). */
int heap_lease(struct emu_heap *h, uint64_t size, uint64_t align, int32_t owner, const char *label,
               uint64_t *base);

/* Find the lease starting exactly at base: index or -1. */
int heap_find(const struct emu_heap *h, uint64_t base);

/* Release the lease at base: 0, -ENOENT (none there), -EPERM (not owner). */
int heap_release(struct emu_heap *h, uint64_t base, int32_t owner);

/* Relabel the lease at base: 0, -ENOENT, -EPERM. */
int heap_set_label(struct emu_heap *h, uint64_t base, int32_t owner, const char *label);

/* Release every lease of owner; returns how many, *bytes their size. */
unsigned heap_release_owner(struct emu_heap *h, int32_t owner, uint64_t *bytes);

/* Whether [addr, addr + size) lies inside one lease of owner. */
bool heap_owner_covers(const struct emu_heap *h, int32_t owner, uint64_t addr, uint64_t size);

/* Bytes leased by owner. */
uint64_t heap_owner_bytes(const struct emu_heap *h, int32_t owner);

/* Write the table, num_leases and heap_used into the control block. */
void heap_publish(const struct emu_heap *h, void *mem);

#endif /* TX8_EMU_LEASE_H */
