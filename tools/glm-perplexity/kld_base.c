// SPDX-License-Identifier: MIT
/*
 * The --kl-divergence-base file. Layout (little-endian):
 *   "GLMKLD01"                          8 bytes
 *   u32 n_vocab, n_ctx, n_chunk, first  the scored positions of a chunk are
 *                                       first .. n_ctx - 2
 *   u64 n_tok                           n_chunk * n_ctx
 *   i32 tokens[n_tok]                   the text's tokens the chunks cover
 *   f32 logits[n_chunk][n_ctx - 1 - first][n_vocab]
 * Written under a temporary name and renamed when complete: a failed run
 * leaves no file.
 */
#include "kld_base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char magic[8] = {'G', 'L', 'M', 'K', 'L', 'D', '0', '1'};

static int fail(char *msg, size_t msgsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t msgsz, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msgsz, fmt, ap);
    va_end(ap);
    return -1;
}

int kld_base_create(struct kld_base *b, const char *path, uint32_t n_vocab, uint32_t n_ctx,
                    uint32_t n_chunk, uint32_t first, const int32_t *tok, char *msg, size_t msgsz)
{
    memset(b, 0, sizeof(*b));
    size_t l = strlen(path);
    b->path = strdup(path);
    b->tmp = malloc(l + 16);
    if (!b->path || !b->tmp) {
        kld_base_finish(b, 0, msg, msgsz);
        return fail(msg, msgsz, "out of memory");
    }
    snprintf(b->tmp, l + 16, "%s.tmp%ld", path, (long)getpid());
    b->f = fopen(b->tmp, "wb");
    if (!b->f) {
        int e = errno;
        kld_base_finish(b, 0, msg, msgsz);
        return fail(msg, msgsz, "%s: %s", path, strerror(e));
    }
    b->n_vocab = n_vocab;
    b->n_ctx = n_ctx;
    b->n_chunk = n_chunk;
    b->first = first;
    b->n_tok = (uint64_t)n_chunk * n_ctx;
    uint32_t h[4] = {n_vocab, n_ctx, n_chunk, first};
    int bad = fwrite(magic, 1, 8, b->f) != 8 || fwrite(h, 4, 4, b->f) != 4 ||
              fwrite(&b->n_tok, 8, 1, b->f) != 1 || fwrite(tok, 4, b->n_tok, b->f) != b->n_tok;
    if (bad) {
        int e = errno;
        kld_base_finish(b, 0, msg, msgsz);
        return fail(msg, msgsz, "%s: %s", path, strerror(e));
    }
    return 0;
}

int kld_base_write_row(struct kld_base *b, const float *logits, char *msg, size_t msgsz)
{
    if (fwrite(logits, 4, b->n_vocab, b->f) != b->n_vocab)
        return fail(msg, msgsz, "%s: %s", b->path, strerror(errno));
    return 0;
}

int kld_base_finish(struct kld_base *b, int commit, char *msg, size_t msgsz)
{
    int rc = 0;
    if (b->f) {
        if (fclose(b->f) != 0 && commit)
            rc = fail(msg, msgsz, "%s: %s", b->path, strerror(errno));
        b->f = NULL;
    }
    if (b->tmp) {
        if (commit && rc == 0 && rename(b->tmp, b->path) != 0)
            rc = fail(msg, msgsz, "%s: %s", b->path, strerror(errno));
        if (!commit || rc)
            unlink(b->tmp);
    }
    free(b->tmp);
    free(b->path);
    b->tmp = b->path = NULL;
    return rc;
}

int kld_base_open(struct kld_base *b, const char *path, uint32_t n_vocab, const int32_t *tok,
                  uint64_t n_tok, uint32_t n_ctx, char *msg, size_t msgsz)
{
    memset(b, 0, sizeof(*b));
    b->f = fopen(path, "rb");
    if (!b->f)
        return fail(msg, msgsz, "%s: %s", path, strerror(errno));
    char m[8];
    uint32_t h[4];
    if (fread(m, 1, 8, b->f) != 8 || memcmp(m, magic, 8) != 0) {
        kld_base_close(b);
        return fail(msg, msgsz, "%s: not a glm-perplexity --kl-divergence-base file", path);
    }
    if (fread(h, 4, 4, b->f) != 4 || fread(&b->n_tok, 8, 1, b->f) != 1) {
        kld_base_close(b);
        return fail(msg, msgsz, "%s: truncated header", path);
    }
    b->n_vocab = h[0];
    b->n_ctx = h[1];
    b->n_chunk = h[2];
    b->first = h[3];
    if (!b->n_ctx || b->first >= b->n_ctx - 1 || b->n_tok != (uint64_t)b->n_chunk * b->n_ctx ||
        !b->n_chunk) {
        kld_base_close(b);
        return fail(msg, msgsz, "%s: inconsistent header (context %u, %u chunks, %llu tokens)",
                    path, h[1], h[2], (unsigned long long)b->n_tok);
    }
    if (b->n_vocab != n_vocab) {
        kld_base_close(b);
        return fail(msg, msgsz,
                    "%s: the base has a vocabulary of %u tokens, this model %u: another model "
                    "family or tokenizer",
                    path, h[0], n_vocab);
    }
    if (n_ctx && b->n_ctx != n_ctx) {
        kld_base_close(b);
        return fail(msg, msgsz, "%s: the base was made with -c %u, not %u", path, h[1], n_ctx);
    }
    if (b->n_tok > n_tok) {
        kld_base_close(b);
        return fail(msg, msgsz, "%s: the base covers %llu tokens, this text has %llu: another text",
                    path, (unsigned long long)b->n_tok, (unsigned long long)n_tok);
    }
    b->tok = malloc(b->n_tok * 4);
    if (!b->tok) {
        kld_base_close(b);
        return fail(msg, msgsz, "out of memory");
    }
    if (fread(b->tok, 4, b->n_tok, b->f) != b->n_tok) {
        kld_base_close(b);
        return fail(msg, msgsz, "%s: truncated token list", path);
    }
    for (uint64_t i = 0; i < b->n_tok; i++) {
        if (b->tok[i] != tok[i]) {
            fail(msg, msgsz,
                 "%s: token %llu of the base (%d) differs from this text's (%d): the base was "
                 "made from another text or tokenizer",
                 path, (unsigned long long)i, b->tok[i], tok[i]);
            kld_base_close(b);
            return -1;
        }
    }
    return 0;
}

int kld_base_read_row(struct kld_base *b, float *logits, char *msg, size_t msgsz)
{
    if (fread(logits, 4, b->n_vocab, b->f) != b->n_vocab)
        return fail(msg, msgsz, "the base file is truncated (fewer logits than its header says)");
    return 0;
}

void kld_base_close(struct kld_base *b)
{
    if (b->f)
        fclose(b->f);
    free(b->tok);
    memset(b, 0, sizeof(*b));
}
