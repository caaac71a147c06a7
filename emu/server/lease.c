/* SPDX-License-Identifier: MIT */
/* tx8-emu: device-side allocator of device memory (see lease.h). */
#include "lease.h"

#include <errno.h>
#include <string.h>

void heap_init(struct emu_heap *h, uint64_t start, uint64_t end)
{
    memset(h, 0, sizeof(*h));
    h->start = start;
    h->end = end;
}

void heap_label_copy(char dst[TX8_LABEL_LEN], const char *src)
{
    size_t i = 0;

    memset(dst, 0, TX8_LABEL_LEN);
    if (!src)
        return;
    for (; i < TX8_LABEL_LEN - 1 && src[i]; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

int heap_lease(struct emu_heap *h, uint64_t size, uint64_t align, int32_t owner, const char *label,
               uint64_t *base)
{
    uint64_t best_base = 0, best_gap = UINT64_MAX;
    unsigned best_idx = 0, i;

    if (size == 0 || size > h->end - h->start)
        return size == 0 ? -EINVAL : -ENOMEM;
    if (align == 0)
        align = TX8_PAGE_SIZE;
    if (align & (align - 1))
        return -EINVAL;
    if (align < TX8_PAGE_SIZE)
        align = TX8_PAGE_SIZE;
    if (align > h->end)
        return -EINVAL;
    size = align_up(size, TX8_PAGE_SIZE);
    if (h->n >= TX8_MAX_LEASES)
        return -ENOSPC;

    /* Gaps: before lease 0, between leases, after the last one. */
    for (i = 0; i <= h->n; i++) {
        uint64_t gap_start = i == 0 ? h->start : h->l[i - 1].base + h->l[i - 1].size;
        uint64_t gap_end = i == h->n ? h->end : h->l[i].base;
        uint64_t b = align_up(gap_start, align);

        if (b < gap_start || b >= gap_end || gap_end - b < size)
            continue;
        if (gap_end - gap_start < best_gap) {
            best_gap = gap_end - gap_start;
            best_base = b;
            best_idx = i;
        }
    }
    if (best_gap == UINT64_MAX)
        return -ENOMEM;

    memmove(&h->l[best_idx + 1], &h->l[best_idx], (h->n - best_idx) * sizeof(h->l[0]));
    h->l[best_idx].base = best_base;
    h->l[best_idx].size = size;
    h->l[best_idx].owner = owner;
    heap_label_copy(h->l[best_idx].label, label);
    h->n++;
    h->used += size;
    *base = best_base;
    return 0;
}

int heap_find(const struct emu_heap *h, uint64_t base)
{
    unsigned lo = 0, hi = h->n;

    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;

        if (h->l[mid].base == base)
            return (int)mid;
        if (h->l[mid].base < base)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static void heap_remove(struct emu_heap *h, unsigned i)
{
    h->used -= h->l[i].size;
    memmove(&h->l[i], &h->l[i + 1], (h->n - i - 1) * sizeof(h->l[0]));
    h->n--;
    memset(&h->l[h->n], 0, sizeof(h->l[0]));
}

int heap_release(struct emu_heap *h, uint64_t base, int32_t owner)
{
    int i = heap_find(h, base);

    if (i < 0)
        return -ENOENT;
    if (h->l[i].owner != owner)
        return -EPERM;
    heap_remove(h, (unsigned)i);
    return 0;
}

int heap_set_label(struct emu_heap *h, uint64_t base, int32_t owner, const char *label)
{
    int i = heap_find(h, base);

    if (i < 0)
        return -ENOENT;
    if (h->l[i].owner != owner)
        return -EPERM;
    heap_label_copy(h->l[i].label, label);
    return 0;
}

unsigned heap_release_owner(struct emu_heap *h, int32_t owner, uint64_t *bytes)
{
    unsigned count = 0, i = 0;
    uint64_t total = 0;

    while (i < h->n) {
        if (h->l[i].owner == owner) {
            total += h->l[i].size;
            heap_remove(h, i);
            count++;
        } else {
            i++;
        }
    }
    if (bytes)
        *bytes = total;
    return count;
}

bool heap_owner_covers(const struct emu_heap *h, int32_t owner, uint64_t addr, uint64_t size)
{
    unsigned lo = 0, hi = h->n;

    if (size == 0 || addr + size < addr)
        return false;
    /* Last lease with base <= addr. */
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;

        if (h->l[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return false;
    const struct emu_lease *l = &h->l[lo - 1];
    return l->owner == owner && addr + size <= l->base + l->size;
}

uint64_t heap_owner_bytes(const struct emu_heap *h, int32_t owner)
{
    uint64_t total = 0;

    for (unsigned i = 0; i < h->n; i++)
        if (h->l[i].owner == owner)
            total += h->l[i].size;
    return total;
}

void heap_publish(const struct emu_heap *h, void *mem)
{
    struct tx8_ctrl *ctrl = mem;
    struct tx8_lease *t = (struct tx8_lease *)((char *)mem + TX8_LEASE_TABLE_OFFSET);
    unsigned i;

    for (i = 0; i < TX8_MAX_LEASES; i++) {
        struct tx8_lease e;

        memset(&e, 0, sizeof(e));
        if (i < h->n) {
            e.base = h->l[i].base;
            e.size = h->l[i].size;
            e.owner_peer = h->l[i].owner;
            memcpy(e.label, h->l[i].label, TX8_LABEL_LEN);
        }
        memcpy(&t[i], &e, sizeof(e));
    }
    __atomic_store_n(&ctrl->num_leases, h->n, __ATOMIC_RELEASE);
    __atomic_store_n(&ctrl->heap_used, h->used, __ATOMIC_RELEASE);
}
