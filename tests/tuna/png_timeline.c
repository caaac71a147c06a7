/* SPDX-License-Identifier: MIT */
/*
 * png_timeline SHOT.png: find tuna's HTML timeline in a browser screenshot
 * and say whether it is drawn (tests/tuna/browser-check).
 *
 * The timeline is an SVG box of 1220 x 120 CSS pixels filled with #f4f4f4
 * (tools/tuna/report_html.c): the first screenshot row with a run of at least
 * 1000 such pixels is its top. Its host band (y 18..42) holds the host
 * spans (#4a7), its command band (y 68..108) the device commands in
 * colours per opcode. Prints what it found; exit 0 when both bands have
 * coloured pixels (not grey), 1 when they are blank or no timeline was
 * found, 2 for an unreadable PNG (8-bit RGB or RGBA, not interlaced, as
 * Chromium writes them).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);

    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

static int die(const char *path, const char *why)
{
    fprintf(stderr, "png_timeline: %s: %s\n", path, why);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: png_timeline SHOT.png\n");
        return 2;
    }
    const char *path = argv[1];
    FILE *f = fopen(path, "rb");
    if (!f)
        return die(path, "cannot open");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n < 8 + 25 || n > (1l << 28)) {
        fclose(f);
        return die(path, "not a PNG (size)");
    }
    uint8_t *buf = malloc((size_t)n);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        return die(path, "cannot read");
    }
    fclose(f);
    if (memcmp(buf, "\x89PNG\r\n\x1a\n", 8))
        return die(path, "not a PNG (signature)");

    uint32_t w = 0, h = 0, bpp = 0;
    uint8_t *idat = NULL;
    size_t ilen = 0;
    for (long off = 8; off + 12 <= n;) {
        uint32_t len = be32(buf + off);
        const uint8_t *type = buf + off + 4, *d = buf + off + 8;
        if (len > (uint32_t)(n - off - 12))
            return die(path, "truncated chunk");
        if (!memcmp(type, "IHDR", 4) && len >= 13) {
            w = be32(d);
            h = be32(d + 4);
            if (d[8] != 8 || (d[9] != 2 && d[9] != 6) || d[12] != 0)
                return die(path, "not 8-bit RGB/RGBA, non-interlaced");
            bpp = d[9] == 6 ? 4 : 3;
        } else if (!memcmp(type, "IDAT", 4)) {
            uint8_t *p = realloc(idat, ilen + len);
            if (!p)
                return die(path, "out of memory");
            idat = p;
            memcpy(idat + ilen, d, len);
            ilen += len;
        } else if (!memcmp(type, "IEND", 4)) {
            break;
        }
        off += 12 + (long)len;
    }
    if (!w || !h || !idat || w > 20000 || h > 60000)
        return die(path, "no image data");
    size_t stride = (size_t)w * bpp, rawlen = (stride + 1) * h;
    uint8_t *raw = malloc(rawlen), *img = malloc(stride * h);
    uLongf got = rawlen;
    if (!raw || !img || uncompress(raw, &got, idat, ilen) != Z_OK || got != rawlen)
        return die(path, "bad image data");
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *src = raw + y * (stride + 1) + 1;
        uint8_t *row = img + y * stride, *prev = y ? row - stride : NULL;
        int ft = raw[y * (stride + 1)];
        for (size_t x = 0; x < stride; x++) {
            int a = x >= bpp ? row[x - bpp] : 0, b = prev ? prev[x] : 0,
                c = prev && x >= bpp ? prev[x - bpp] : 0, v = src[x];
            switch (ft) {
            case 0:
                break;
            case 1:
                v += a;
                break;
            case 2:
                v += b;
                break;
            case 3:
                v += (a + b) / 2;
                break;
            case 4:
                v += paeth(a, b, c);
                break;
            default:
                return die(path, "bad filter type");
            }
            row[x] = (uint8_t)v;
        }
    }

#define PX(x, y) (img + (size_t)(y)*stride + (size_t)(x)*bpp)
#define IS_BG(p) ((p)[0] == 0xf4 && (p)[1] == 0xf4 && (p)[2] == 0xf4)
    /* the timeline's top-left corner: the first long run of #f4f4f4 */
    long top = -1, left = -1;
    for (uint32_t y = 0; y < h && top < 0; y++) {
        uint32_t run = 0;
        for (uint32_t x = 0; x < w; x++) {
            run = IS_BG(PX(x, y)) ? run + 1 : 0;
            if (run >= 1000) {
                top = y;
                left = x - run + 1;
                break;
            }
        }
    }
    if (top < 0) {
        printf("png_timeline: %s (%ux%u): no timeline box (#f4f4f4, >= 1000 px wide)\n", path, w,
               h);
        return 1;
    }
    /* coloured (not grey, not background) pixels in each band */
    long band[2] = {0, 0};
    const int y0[2] = {18, 68}, y1[2] = {42, 108};
    for (int b = 0; b < 2; b++)
        for (long y = top + y0[b]; y < top + y1[b] && y < (long)h; y++)
            for (long x = left; x < left + 1220 && x < (long)w; x++) {
                const uint8_t *p = PX(x, y);
                int mx = p[0] > p[1] ? (p[0] > p[2] ? p[0] : p[2]) : (p[1] > p[2] ? p[1] : p[2]);
                int mn = p[0] < p[1] ? (p[0] < p[2] ? p[0] : p[2]) : (p[1] < p[2] ? p[1] : p[2]);
                if (mx - mn >= 24)
                    band[b]++;
            }
    printf("png_timeline: %s (%ux%u): timeline at (%ld, %ld): %ld coloured pixels in the host "
           "band, %ld in the device-command band\n",
           path, w, h, left, top, band[0], band[1]);
    free(raw);
    free(img);
    free(idat);
    free(buf);
    return band[0] > 0 && band[1] >= 100 ? 0 : 1;
}
