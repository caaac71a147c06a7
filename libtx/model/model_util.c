/* SPDX-License-Identifier: MIT */
/* Shared helpers of the model-format code: errors, files, element types,
 * conversions and CRC32C. */
#include <tx-internal/tx_fp8.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tx/tx_dtype.h>

int txm_map_file(const char *path, struct txm_map *m, char *err, size_t errsz)
{
    struct stat st;
    memset(m, 0, sizeof(*m));
    m->fd = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return tx_errbuf(err, errsz, tx_errno_code(e), "%s: %s", path, strerror(e));
    }
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return tx_errbuf(err, errsz, tx_errno_code(e), "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: not a regular file", path);
    }
    m->fd = fd;
    m->size = (uint64_t)st.st_size;
    if (m->size == 0)
        return 0;
    if (m->size > (uint64_t)SIZE_MAX) {
        txm_unmap(m);
        return tx_errbuf(err, errsz, TX_ENOTSUP, "%s: too large to map", path);
    }
    void *a = mmap(NULL, (size_t)m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (a == MAP_FAILED) {
        int e = errno;
        txm_unmap(m);
        return tx_errbuf(err, errsz, tx_errno_code(e), "%s: mmap: %s", path, strerror(e));
    }
    m->addr = a;
    return 0;
}

void txm_unmap(struct txm_map *m)
{
    if (m->addr)
        munmap(m->addr, (size_t)m->size);
    if (m->fd >= 0)
        close(m->fd);
    m->addr = NULL;
    m->fd = -1;
    m->size = 0;
}

int txm_read_file(const char *path, uint64_t max, char **out, size_t *len, char *err, size_t errsz)
{
    *out = NULL;
    if (len)
        *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return tx_errbuf(err, errsz, tx_errno_code(e), "%s: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tx_errbuf(err, errsz, TX_EINVAL, "%s: not a readable regular file", path);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                         "%s: %" PRIu64 " bytes, more than the %" PRIu64 " allowed", path,
                         (uint64_t)st.st_size, max);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return tx_errbuf(err, errsz, TX_ENOMEM, "%s: out of memory", path);
    }
    int rc = txm_pread_all(fd, buf, n, 0);
    close(fd);
    if (rc < 0) {
        free(buf);
        return tx_errbuf(err, errsz, tx_errno_code(rc), "%s: read: %s", path, strerror(-rc));
    }
    buf[n] = 0;
    *out = buf;
    if (len)
        *len = n;
    return 0;
}

char *txm_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t o = a;
    if (a && dir[a - 1] != '/')
        p[o++] = '/';
    memcpy(p + o, name, b + 1);
    return p;
}

char *txm_dirname(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return strdup(".");
    if (s == path)
        return strdup("/");
    return strndup(path, (size_t)(s - path));
}

int txm_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int txm_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int txm_buf_put(struct txm_buf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->len + n + 1)
            c *= 2;
        char *q = realloc(b->p, c);
        if (!q)
            return TX_ENOMEM;
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

void txm_buf_free(struct txm_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ---- element types ------------------------------------------------------ */

static const struct {
    const char *name;
    size_t size;
} elem_info[TX_ELEM_COUNT] = {
    [TX_ELEM_F32] = {"F32", 4},         [TX_ELEM_F16] = {"F16", 2},
    [TX_ELEM_BF16] = {"BF16", 2},       [TX_ELEM_F64] = {"F64", 8},
    [TX_ELEM_I64] = {"I64", 8},         [TX_ELEM_I32] = {"I32", 4},
    [TX_ELEM_I16] = {"I16", 2},         [TX_ELEM_I8] = {"I8", 1},
    [TX_ELEM_U64] = {"U64", 8},         [TX_ELEM_U32] = {"U32", 4},
    [TX_ELEM_U16] = {"U16", 2},         [TX_ELEM_U8] = {"U8", 1},
    [TX_ELEM_BOOL] = {"BOOL", 1},       [TX_ELEM_F8_E4M3] = {"F8_E4M3", 1},
    [TX_ELEM_F8_E5M2] = {"F8_E5M2", 1},
};

const char *tx_elem_name(enum tx_elem_type t)
{
    return (unsigned)t < TX_ELEM_COUNT ? elem_info[t].name : "?";
}

size_t tx_elem_size(enum tx_elem_type t)
{
    return (unsigned)t < TX_ELEM_COUNT ? elem_info[t].size : 0;
}

int tx_elem_supported(enum tx_elem_type t)
{
    return t == TX_ELEM_F32 || t == TX_ELEM_F16 || t == TX_ELEM_BF16;
}

int txm_elem_from_name(const char *s)
{
    for (int i = 0; i < TX_ELEM_COUNT; i++)
        if (strcmp(s, elem_info[i].name) == 0)
            return i;
    return TX_NONE;
}

uint64_t tx_tensor_rows(const struct tx_tensor *t)
{
    uint64_t r = 1;
    for (int i = 0; i + 1 < t->ndim; i++)
        r *= t->shape[i];
    return r;
}

uint64_t tx_tensor_cols(const struct tx_tensor *t)
{
    return t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
}

int tx_tensor_read_f32(const struct tx_tensor *t, uint64_t first, uint64_t count, float *dst,
                       char *err, size_t errsz)
{
    if (first > t->nelem || count > t->nelem - first)
        return tx_errbuf(err, errsz, TX_EINVAL,
                         "%s: %s: elements [%" PRIu64 ", +%" PRIu64 ") outside the tensor (%" PRIu64
                         " elements)",
                         t->file ? t->file : "?", t->name, first, count, t->nelem);
    const unsigned char *src = t->data;
    switch (t->type) {
    case TX_ELEM_F32:
        memcpy(dst, src + first * 4, count * 4);
        return 0;
    case TX_ELEM_BF16:
        src += first * 2;
        for (uint64_t i = 0; i < count; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = tx_bf16_to_f32(h);
        }
        return 0;
    case TX_ELEM_F16:
        src += first * 2;
        for (uint64_t i = 0; i < count; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = tx_f16_to_f32(h);
        }
        return 0;
    case TX_ELEM_F8_E4M3:
        if (t->scale_inv)
            return txm_fp8_read_f32(t, first, count, dst, err, errsz);
        /* fall through */
    default:
        return tx_errbuf(err, errsz, TX_ENOTSUP,
                         "%s: tensor %s has dtype %s; only BF16, F16 and F32 are supported",
                         t->file ? t->file : "?", t->name, tx_elem_name(t->type));
    }
}

int txm_tensor_read_f64(const struct tx_tensor *t, uint64_t first, uint64_t count, double *dst,
                        char *err, size_t errsz)
{
    float buf[1024];
    if (first > t->nelem || count > t->nelem - first)
        return tx_tensor_read_f32(t, first, count, buf, err, errsz); /* its range error */
    if (t->type == TX_ELEM_F8_E4M3 && t->scale_inv)
        return txm_fp8_read_f64(t, first, count, dst, err, errsz);
    for (uint64_t done = 0; done < count;) {
        uint64_t n = count - done < 1024 ? count - done : 1024;
        int rc = tx_tensor_read_f32(t, first + done, n, buf, err, errsz);
        if (rc < 0)
            return rc;
        for (uint64_t k = 0; k < n; k++)
            dst[done + k] = (double)buf[k];
        done += n;
    }
    return 0;
}

void tx_tensor_release(const struct tx_tensor *t)
{
    tx_tensor_release_range(t, 0, t->nelem);
}

void tx_tensor_release_range(const struct tx_tensor *t, uint64_t first, uint64_t count)
{
    if (!(t->flags & TX_TENSOR_MAPPED) || first >= t->nelem || !count)
        return;
    if (count > t->nelem - first)
        count = t->nelem - first;
    size_t es = tx_elem_size(t->type);
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)t->data + (uintptr_t)(first * es);
    uintptr_t e = a + (uintptr_t)(count * es);
    a &= ~(uintptr_t)(pg - 1);
    e = (e + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
    madvise((void *)a, e - a, MADV_DONTNEED);
}

char *tx_shape_str(const uint64_t *shape, int ndim, char *buf, size_t bufsz)
{
    size_t o = 0;
    if (!bufsz)
        return buf;
    buf[0] = 0;
    o += (size_t)snprintf(buf + o, bufsz - o, "[");
    for (int i = 0; i < ndim && o < bufsz; i++)
        o += (size_t)snprintf(buf + o, bufsz - o, "%s%" PRIu64, i ? ", " : "", shape[i]);
    if (o < bufsz)
        snprintf(buf + o, bufsz - o, "]");
    return buf;
}

/* ---- CRC32C ------------------------------------------------------------- */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_hw;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t len)
{
    while (len && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
            crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
            crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
            crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][(w >> 56) & 0xff];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw_run(uint32_t c, const unsigned char *p,
                                                             size_t len)
{
    uint64_t c64 = c;
    while (len && ((uintptr_t)p & 7)) {
        c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
        p += 8;
        len -= 8;
    }
    while (len--)
        c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
    return (uint32_t)c64;
}
#endif

uint32_t tx_crc32c(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&crc_once, crc_init);
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (crc_hw)
        return ~crc_hw_run(c, data, len);
#endif
    return ~crc_sw(c, data, len);
}

/* ---- parallel loops ----------------------------------------------------- */

struct par {
    txm_task_fn fn;
    void *ctx;
    uint64_t n;
    atomic_uint_fast64_t next;
    atomic_int rc;
};

static void *par_worker(void *arg)
{
    struct par *p = arg;
    for (;;) {
        if (atomic_load(&p->rc))
            break;
        uint64_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n)
            break;
        int rc = p->fn(p->ctx, i);
        if (rc) {
            int zero = 0;
            atomic_compare_exchange_strong(&p->rc, &zero, rc);
            break;
        }
    }
    return NULL;
}

int txm_ncpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

int txm_parallel(int nthreads, uint64_t ntasks, txm_task_fn fn, void *ctx)
{
    struct par p = {.fn = fn, .ctx = ctx, .n = ntasks};
    atomic_init(&p.next, 0);
    atomic_init(&p.rc, 0);
    if (nthreads < 1)
        nthreads = 1;
    if ((uint64_t)nthreads > ntasks)
        nthreads = ntasks ? (int)ntasks : 1;
    pthread_t th[256];
    int started = 0;
    for (int i = 1; i < nthreads && i < 256; i++) {
        if (pthread_create(&th[started], NULL, par_worker, &p) != 0)
            break;
        started++;
    }
    par_worker(&p);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return atomic_load(&p.rc);
}

/* ---- JSON syntax check -------------------------------------------------- */

static size_t js_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t'))
        i++;
    return i;
}

static int js_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return TX_NONE;
}

/* Length of the well-formed UTF-8 sequence at s (shortest form, no
 * surrogates, at most U+10FFFF), 0 if ill-formed. */
static size_t js_utf8(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < need + 1 || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k <= need; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return need + 1;
}

/* A string at s[i] == '"'; the index after it, 0 if not accepted. */
static size_t js_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"')
            return i + 1;
        if (c < 0x20)
            return 0;
        if (c == '\\') {
            if (i + 1 >= n)
                return 0;
            char e = s[i + 1];
            if (e == 'u') {
                if (i + 6 > n)
                    return 0;
                int v = 0;
                for (size_t k = i + 2; k < i + 6; k++) {
                    int h = js_hex(s[k]);
                    if (h < 0)
                        return 0;
                    v = v << 4 | h;
                }
                if (v >= 0xD800 && v <= 0xDFFF) /* escaped surrogates: left to json-c */
                    return 0;
                i += 6;
            } else if (strchr("\"\\/bfnrt", e) && e) {
                i += 2;
            } else {
                return 0;
            }
            continue;
        }
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t l = js_utf8((const unsigned char *)s + i, n - i);
        if (!l)
            return 0;
        i += l;
    }
    return 0;
}

/* A number at s[i]; the index after it, 0 if not accepted. Long or
 * large-exponent numbers are left to json-c. */
static size_t js_number(const char *s, size_t n, size_t i)
{
    size_t st = i;
    if (i < n && s[i] == '-')
        i++;
    size_t d = i;
    if (i < n && s[i] == '0')
        i++;
    else
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    if (i == d || i - d > 18)
        return 0;
    if (i < n && s[i] == '.') {
        size_t f = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == f || i - f > 30)
            return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t e = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == e || i - e > 2)
            return 0;
    }
    return i - st > 40 ? 0 : i;
}

int txm_json_object_ok(const char *s, size_t n)
{
    /* containers open: bit k of stack = 1 for an object at depth k */
    uint32_t stack = 0;
    int depth = 0;
    size_t i = js_ws(s, n, 0);
    if (i >= n || s[i] != '{')
        return 0;
    enum { VALUE, KEY_OR_END, VALUE_OR_END, AFTER } want = VALUE;
    for (;;) {
        i = js_ws(s, n, i);
        if (i >= n)
            return 0;
        char c = s[i];
        if (want == AFTER) {
            int obj = depth && (stack >> (depth - 1) & 1);
            if (c == ',') {
                i++;
                if (obj) {
                    i = js_ws(s, n, i);
                    if (i >= n || s[i] != '"' || !(i = js_string(s, n, i)))
                        return 0;
                    i = js_ws(s, n, i);
                    if (i >= n || s[i] != ':')
                        return 0;
                    i++;
                }
                want = VALUE;
                continue;
            }
            if (c != (obj ? '}' : ']'))
                return 0;
            i++;
            if (--depth == 0)
                return js_ws(s, n, i) == n;
            continue;
        }
        if ((want == KEY_OR_END && c == '}') || (want == VALUE_OR_END && c == ']')) {
            i++;
            want = AFTER;
            if (--depth == 0)
                return js_ws(s, n, i) == n;
            continue;
        }
        if (want == KEY_OR_END) {
            if (c != '"' || !(i = js_string(s, n, i)))
                return 0;
            i = js_ws(s, n, i);
            if (i >= n || s[i] != ':')
                return 0;
            i++;
            want = VALUE;
            continue;
        }
        /* a value */
        if (c == '{' || c == '[') {
            if (depth >= 16) /* deeper documents are left to json-c */
                return 0;
            stack = (stack & ~(1u << depth)) | ((uint32_t)(c == '{') << depth);
            depth++;
            i++;
            want = c == '{' ? KEY_OR_END : VALUE_OR_END;
            continue;
        }
        if (c == '"')
            i = js_string(s, n, i);
        else if (c == '-' || (c >= '0' && c <= '9'))
            i = js_number(s, n, i);
        else if (n - i >= 4 && !memcmp(s + i, "true", 4))
            i += 4;
        else if (n - i >= 5 && !memcmp(s + i, "false", 5))
            i += 5;
        else if (n - i >= 4 && !memcmp(s + i, "null", 4))
            i += 4;
        else
            return 0;
        if (!i)
            return 0;
        want = AFTER;
    }
}
