/* SPDX-License-Identifier: MIT */
/*
 * Shared by the .smd fuzz targets (fuzz_smd.c, fuzz_smd_load.c): "reseal"
 * a mutated package -- recompute every section checksum (for sections
 * inside the buffer) and the header checksum -- so that mutations reach
 * the structural checks behind the checksums.
 */
#ifndef FUZZ_SMD_RESEAL_H
#define FUZZ_SMD_RESEAL_H
#include <stdint.h>
#include <string.h>

#include <tx-internal/tx_smd.h>

static void fuzz_smd_reseal(uint8_t *b, size_t size)
{
    struct tx_smd_header h;
    if (size < sizeof(h))
        return;
    memcpy(&h, b, sizeof(h));
    if (h.section_count > 64 || sizeof(h) + 32ull * h.section_count > size)
        return;
    for (uint32_t i = 0; i < h.section_count; i++) {
        struct tx_smd_section sc;
        memcpy(&sc, b + sizeof(h) + 32 * i, 32);
        if (sc.offset <= size && sc.size <= size - sc.offset) {
            sc.crc = tx_crc32c(0, b + sc.offset, (size_t)sc.size);
            memcpy(b + sizeof(h) + 32 * i, &sc, 32);
        }
    }
    h.header_size = (uint32_t)(sizeof(h) + 32u * h.section_count);
    h.file_size = size;
    h.header_crc = 0;
    memcpy(b, &h, sizeof(h));
    h.header_crc = tx_crc32c(0, b, h.header_size);
    memcpy(b, &h, sizeof(h));
}
#endif
