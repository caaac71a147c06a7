// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the state behind tx8-emu's mailbox: the lease
 * allocator (emu/server/lease.c) that the LEASE, RELEASE and SET_LABEL
 * requests act on with host-chosen arguments, and the lease table it
 * publishes into the control block.
 *
 * Input: a sequence of 20-byte requests: u8 kind (% 5: LEASE, RELEASE,
 * SET_LABEL, peer leaves, RELEASE of a listed lease), u8 owner (% 4), then
 * u64 arg0 and u64 arg1 (little-endian) and 2 label bytes; LEASE takes
 * (size, align), RELEASE / SET_LABEL a base. Properties after every
 * request (abort() on violation): leases are sorted, page aligned, inside
 * the heap, do not overlap; `used` is their sum; a lease's alignment is what
 * was asked; answers are 0 or the documented negative errno values; a
 * failed request changes nothing; labels are NUL-terminated without control
 * characters; the published table equals the private one.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx8/tx8_hw.h>

#include "server/lease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FM_HEAP_START TX8_CTRL_SIZE
#define FM_MEM (64ull << 20)

#define FM_FAIL(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "fuzz_mailbox: " __VA_ARGS__);                                             \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void fm_check(const struct emu_heap *h, const uint8_t *ctrl)
{
    uint64_t sum = 0;
    if (h->n > TX8_MAX_LEASES)
        FM_FAIL("%u leases", h->n);
    for (unsigned i = 0; i < h->n; i++) {
        const struct emu_lease *l = &h->l[i];
        if (l->base % TX8_PAGE_SIZE || l->size % TX8_PAGE_SIZE || l->size == 0)
            FM_FAIL("lease %u [%#llx, +%#llx) not page aligned", i, (unsigned long long)l->base,
                    (unsigned long long)l->size);
        if (l->base < h->start || l->base > h->end || l->size > h->end - l->base)
            FM_FAIL("lease %u outside the heap", i);
        if (i && l->base < h->l[i - 1].base + h->l[i - 1].size)
            FM_FAIL("leases %u and %u overlap or are unsorted", i - 1, i);
        if (memchr(l->label, 0, TX8_LABEL_LEN) == NULL)
            FM_FAIL("label of lease %u not terminated", i);
        for (const char *c = l->label; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                FM_FAIL("label of lease %u has a control character", i);
        sum += l->size;
    }
    if (sum != h->used)
        FM_FAIL("used %llu, leases sum to %llu", (unsigned long long)h->used,
                (unsigned long long)sum);
    const struct tx8_ctrl *cb = (const void *)ctrl;
    if (cb->num_leases != h->n || cb->heap_used != h->used)
        FM_FAIL("published table: %u leases, %llu used; private: %u, %llu", cb->num_leases,
                (unsigned long long)cb->heap_used, h->n, (unsigned long long)h->used);
    const struct tx8_lease *t = (const void *)(ctrl + TX8_LEASE_TABLE_OFFSET);
    for (unsigned i = 0; i < TX8_MAX_LEASES; i++) {
        uint64_t b = i < h->n ? h->l[i].base : 0, z = i < h->n ? h->l[i].size : 0;
        if (t[i].base != b || t[i].size != z)
            FM_FAIL("published lease %u differs", i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct emu_heap h, saved;
    static uint8_t *ctrl;
    if (!ctrl && !(ctrl = calloc(1, TX8_CTRL_SIZE)))
        return 0;
    heap_init(&h, FM_HEAP_START, FM_MEM);
    heap_publish(&h, ctrl);
    for (size_t off = 0; off + 20 <= size; off += 20) {
        const uint8_t *r = data + off;
        unsigned kind = r[0] % 5;
        int32_t owner = r[1] % 4;
        uint64_t a0 = rd64(r + 2), a1 = rd64(r + 10);
        char label[TX8_LABEL_LEN], raw[TX8_LABEL_LEN];
        memset(raw, 'a' + (r[18] % 26), sizeof(raw));
        raw[r[19] % TX8_LABEL_LEN] = (char)r[18]; /* may be a control char or NUL */
        raw[TX8_LABEL_LEN - 1] = r[19] & 0x80 ? 'z' : 0; /* unterminated sometimes */
        heap_label_copy(label, raw);
        memcpy(&saved, &h, sizeof(h));
        int st = 0;
        uint64_t base = 0;
        switch (kind) {
        case 0:
            st = heap_lease(&h, a0 % (2 * FM_MEM), a1 & 1 ? a1 : a1 % (1ull << 26), owner, label,
                            &base);
            if (st && st != -EINVAL && st != -ENOMEM && st != -ENOSPC)
                FM_FAIL("LEASE: %d", st);
            if (!st) {
                int i = heap_find(&h, base);
                if (i < 0 || h.l[i].owner != owner)
                    FM_FAIL("LEASE: base %#llx not in the table", (unsigned long long)base);
                uint64_t al = a1 % (1ull << 26);
                if (!(a1 & 1) && al > TX8_PAGE_SIZE && base % al)
                    FM_FAIL("LEASE: base %#llx not aligned to %#llx", (unsigned long long)base,
                            (unsigned long long)al);
                if (h.l[i].size < a0 % (2 * FM_MEM))
                    FM_FAIL("LEASE: %llu bytes for %llu", (unsigned long long)h.l[i].size,
                            (unsigned long long)(a0 % (2 * FM_MEM)));
            }
            break;
        case 1:
        case 4:
            if (kind == 4 && h.n)
                a0 = h.l[a0 % h.n].base;
            st = heap_release(&h, a0, owner);
            if (st && st != -ENOENT && st != -EPERM)
                FM_FAIL("RELEASE: %d", st);
            break;
        case 2:
            if (h.n && (a1 & 1))
                a0 = h.l[a0 % h.n].base;
            st = heap_set_label(&h, a0, owner, label);
            if (st && st != -ENOENT && st != -EPERM)
                FM_FAIL("SET_LABEL: %d", st);
            break;
        default: {
            uint64_t bytes = 0, had = heap_owner_bytes(&h, owner);
            heap_release_owner(&h, owner, &bytes);
            if (bytes != had || heap_owner_bytes(&h, owner) != 0)
                FM_FAIL("peer %d left: %llu of %llu bytes released", owner,
                        (unsigned long long)bytes, (unsigned long long)had);
            break;
        }
        }
        if (st && memcmp(&saved, &h, sizeof(h)))
            FM_FAIL("a failed request (kind %u, %d) changed the table", kind, st);
        heap_publish(&h, ctrl);
        fm_check(&h, ctrl);
    }
    return 0;
}
