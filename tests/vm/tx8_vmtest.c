/* SPDX-License-Identifier: MIT */
/*
 * In-guest tests of tx8.ko through its raw UAPI (include/uapi/drm/tx8_accel.h).
 *
 *   tx8_vmtest list            the test names
 *   tx8_vmtest NAME [DEV]      run one test on /dev/accel/accelDEV (default 0)
 *
 * Each run prints "PASS NAME" or "FAIL NAME: reason" and exits 0 or 1.
 * tests/vm/run-suite runs them one process each (a crash fails one test).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/netlink.h>
#include <linux/sync_file.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <xf86drm.h>

#include <tx8/tx8_hw.h>
#include <uapi/drm/tx8_accel.h>

static const char *test_name = "?";
static int dev_index;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fail_msg(__LINE__, __VA_ARGS__);                                                           \
        return 1;                                                                                  \
    } while (0)
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            FAIL(__VA_ARGS__);                                                                     \
    } while (0)
#define CHECK_ERR(expr, err)                                                                       \
    do {                                                                                           \
        int r_ = (expr);                                                                           \
        if (r_ != -(err))                                                                          \
            FAIL("%s: got %d (%s), expected -%s", #expr, r_, strerror(r_ < 0 ? -r_ : 0), #err);    \
    } while (0)
#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        int r_ = (expr);                                                                           \
        if (r_ != 0)                                                                               \
            FAIL("%s: %d (%s)", #expr, r_, strerror(r_ < 0 ? -r_ : 0));                            \
    } while (0)

static void fail_msg(int line, const char *fmt, ...)
{
    va_list ap;

    printf("FAIL %s: line %d: ", test_name, line);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static int xioctl(int fd, unsigned long req, void *arg)
{
    int r;

    do {
        r = ioctl(fd, req, arg);
    } while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : 0;
}

static int dev_open(int n)
{
    char path[64];

    snprintf(path, sizeof(path), "/dev/accel/accel%d", n);
    return open(path, O_RDWR | O_CLOEXEC);
}

static int bo_new(int fd, uint64_t size, const char *label, struct drm_tx8_bo_create *bo)
{
    memset(bo, 0, sizeof(*bo));
    bo->size = size;
    if (label)
        snprintf(bo->label, sizeof(bo->label), "%s", label);
    return xioctl(fd, DRM_IOCTL_TX8_BO_CREATE, bo);
}

static int bo_close(int fd, uint32_t handle)
{
    struct drm_gem_close c = {.handle = handle};

    return xioctl(fd, DRM_IOCTL_GEM_CLOSE, &c);
}

static void *bo_map(int fd, const struct drm_tx8_bo_create *bo)
{
    void *p = mmap(NULL, bo->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)bo->mmap_offset);

    return p == MAP_FAILED ? NULL : p;
}

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int submit(int fd, uint32_t cmd, uint64_t off, uint64_t size,
                  const struct drm_tx8_bo_ref *refs, uint32_t n, uint64_t *seqno)
{
    struct drm_tx8_submit s;
    int r;

    memset(&s, 0, sizeof(s));
    s.cmd_handle = cmd;
    s.cmd_offset = off;
    s.cmd_size = size;
    s.bos = (uintptr_t)refs;
    s.bo_count = n;
    s.bo_stride = sizeof(*refs);
    s.timeout_ns = INT64_MAX; /* no limit (0 polls) */
    r = xioctl(fd, DRM_IOCTL_TX8_SUBMIT, &s);
    if (!r && seqno)
        *seqno = s.seqno;
    return r;
}

static int wait_job(int fd, uint64_t seqno, int64_t timeout_ms, struct drm_tx8_wait *w)
{
    memset(w, 0, sizeof(*w));
    w->seqno = seqno;
    w->timeout_ns = now_ns() + timeout_ms * 1000000ll;
    return xioctl(fd, DRM_IOCTL_TX8_WAIT, w);
}

static size_t put_fill(void *at, uint64_t dst, uint64_t bytes, uint32_t value)
{
    struct tx8_cmd_fill c;

    memset(&c, 0, sizeof(c));
    c.hdr.opcode = TX8_OP_FILL;
    c.hdr.size = sizeof(c);
    c.dst = dst;
    c.bytes = bytes;
    c.value = value;
    memcpy(at, &c, sizeof(c));
    return sizeof(c);
}

static size_t put_copy(void *at, uint64_t dst, uint64_t src, uint64_t bytes)
{
    struct tx8_cmd_copy c;

    memset(&c, 0, sizeof(c));
    c.hdr.opcode = TX8_OP_COPY;
    c.hdr.size = sizeof(c);
    c.dst = dst;
    c.src = src;
    c.bytes = bytes;
    memcpy(at, &c, sizeof(c));
    return sizeof(c);
}

/* A device file with a 64 KiB command BO mapped. */
struct ctx {
    int fd;
    struct drm_tx8_bo_create cmd;
    uint8_t *cmdmap;
};

static int ctx_open(struct ctx *c, int n)
{
    memset(c, 0, sizeof(*c));
    c->fd = dev_open(n);
    if (c->fd < 0)
        return -errno;
    if (bo_new(c->fd, 65536, "vmtest-cmd", &c->cmd) < 0)
        return -1;
    c->cmdmap = bo_map(c->fd, &c->cmd);
    return c->cmdmap ? 0 : -1;
}

static void ctx_close(struct ctx *c)
{
    if (c->cmdmap)
        munmap(c->cmdmap, c->cmd.size);
    if (c->fd >= 0)
        close(c->fd);
}

/* Run one FILL of bytes at dst with the BO refs given (plus the cmd BO). */
static int run_fill(struct ctx *c, uint64_t dst, uint64_t bytes, uint32_t value,
                    const struct drm_tx8_bo_ref *refs, uint32_t n, struct drm_tx8_wait *w)
{
    uint64_t seq;
    int r;

    size_t len = put_fill(c->cmdmap, dst, bytes, value);
    r = submit(c->fd, c->cmd.handle, 0, len, refs, n, &seq);
    if (r)
        return r;
    return wait_job(c->fd, seq, 20000, w);
}

static int read_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n, total = 0;

    if (fd < 0)
        return -errno;
    while ((size_t)total < size - 1 && (n = read(fd, buf + total, size - 1 - total)) > 0)
        total += n;
    close(fd);
    buf[total] = 0;
    return (int)total;
}

static int write_file(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -errno;
    n = write(fd, s, strlen(s));
    close(fd);
    return n < 0 ? -errno : 0;
}

/* The value of "Key:" in a meminfo-style text, or -1. */
static long long meminfo_value(const char *text, const char *key)
{
    size_t kl = strlen(key);

    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (!strncmp(p, key, kl) && p[kl] == ':')
            return strtoll(p + kl + 1, NULL, 10);
    }
    return -1;
}

static char sysdir[256];

static const char *sysattr_dir(int n)
{
    snprintf(sysdir, sizeof(sysdir), "/sys/class/accel/accel%d/device/tx8", n);
    return sysdir;
}

static long long sysattr(int n, const char *name)
{
    char path[320], buf[64];

    snprintf(path, sizeof(path), "%s/%s", sysattr_dir(n), name);
    if (read_file(path, buf, sizeof(buf)) <= 0)
        return -1;
    return strtoll(buf, NULL, 10);
}

/* PCI address of accelN, e.g. "0000:00:03.0". */
static int pci_addr(int n, char *out, size_t size)
{
    char link[128], target[64];
    ssize_t len;

    snprintf(link, sizeof(link), "/sys/class/accel/accel%d/device", n);
    len = readlink(link, target, sizeof(target) - 1);
    if (len < 0)
        return -errno;
    target[len] = 0;
    snprintf(out, size, "%s", strrchr(target, '/') ? strrchr(target, '/') + 1 : target);
    return 0;
}

static int debugfs_path(int n, const char *file, char *out, size_t size)
{
    char addr[64];

    if (pci_addr(n, addr, sizeof(addr)))
        return -1;
    snprintf(out, size, "/sys/kernel/debug/accel/%s/%s", addr, file);
    return access(out, F_OK) ? -1 : 0;
}

/* ------------------------------------------------------------------------ */
/* UAPI conformance                                                          */

static int t_query(void)
{
    struct drm_tx8_device_info info;
    struct drm_tx8_counters cnt;
    unsigned char big[sizeof(info) + 64];
    struct drm_tx8_query q;
    int fd = dev_open(dev_index);

    CHECK(fd >= 0, "open: %s", strerror(errno));
    memset(&q, 0, sizeof(q));
    q.query = DRM_TX8_QUERY_DEVICE;
    CHECK_OK(xioctl(fd, DRM_IOCTL_TX8_QUERY, &q));
    CHECK(q.size == sizeof(info), "size query: %u, expected %zu", q.size, sizeof(info));

    memset(&info, 0xaa, sizeof(info));
    q.size = sizeof(info);
    q.data = (uintptr_t)&info;
    CHECK_OK(xioctl(fd, DRM_IOCTL_TX8_QUERY, &q));
    CHECK(TX8_IF_MAJOR(info.if_version) == TX8_IF_VERSION_MAJOR, "if_version %#x", info.if_version);
    CHECK(info.num_cores >= 1 && info.num_cores <= TX8_MAX_CORES, "num_cores %u", info.num_cores);
    CHECK(info.mem_size >= TX8_MIN_MEMORY, "mem_size %" PRIu64, info.mem_size);
    CHECK(info.heap_size > 0 && info.heap_offset >= TX8_CTRL_SIZE &&
              info.heap_offset + info.heap_size <= info.mem_size,
          "heap %#" PRIx64 "+%#" PRIx64, info.heap_offset, info.heap_size);
    CHECK(info.max_bos >= 2 && info.max_bos <= TX8_JOB_MAX_RANGES, "max_bos %u", info.max_bos);
    CHECK(info.dtypes & TX8_DTYPE_BIT(TX8_DTYPE_F32), "dtypes %#x", info.dtypes);
    CHECK(info.sq_entries == TX8_SQ_ENTRIES, "sq_entries %u", info.sq_entries);
    CHECK(memchr(info.name, 0, sizeof(info.name)) && !strncmp(info.name, "TX8", 3), "name '%.32s'",
          info.name);

    /* short: only the prefix is written */
    memset(big, 0x55, sizeof(big));
    q.size = 8;
    q.data = (uintptr_t)big;
    CHECK_OK(xioctl(fd, DRM_IOCTL_TX8_QUERY, &q));
    CHECK(q.size == sizeof(info), "short query size %u", q.size);
    CHECK(!memcmp(big, &info, 8) && big[8] == 0x55, "short query wrote past 8 bytes");
    /* long: the tail is zero-filled */
    memset(big, 0x55, sizeof(big));
    q.size = sizeof(big);
    CHECK_OK(xioctl(fd, DRM_IOCTL_TX8_QUERY, &q));
    for (size_t i = sizeof(info); i < sizeof(big); i++)
        CHECK(big[i] == 0, "long query: byte %zu not zeroed", i);

    q.data = 8; /* bad pointer */
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_QUERY, &q), EFAULT);
    q.data = (uintptr_t)&info;
    q.size = sizeof(info);
    q.query = 99;
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_QUERY, &q), EINVAL);
    q.query = DRM_TX8_QUERY_DEVICE;
    q.flags = 1;
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_QUERY, &q), EINVAL);
    q.flags = 0;
    q.pad = 1;
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_QUERY, &q), EINVAL);

    memset(&q, 0, sizeof(q));
    q.query = DRM_TX8_QUERY_COUNTERS;
    q.size = sizeof(cnt);
    q.data = (uintptr_t)&cnt;
    CHECK_OK(xioctl(fd, DRM_IOCTL_TX8_QUERY, &q));
    CHECK(q.size == sizeof(cnt), "counters size %u", q.size);
    CHECK(cnt.num_cores == info.num_cores, "counters num_cores %u", cnt.num_cores);
    CHECK(cnt.queue_state == TX8_QUEUE_ACTIVE, "queue state %u", cnt.queue_state);
    CHECK(cnt.client_mem == 0, "client_mem %" PRIu64 " of a new file", cnt.client_mem);

    /* an ioctl number the driver does not have */
    CHECK_ERR(xioctl(fd, DRM_IOWR(DRM_COMMAND_BASE + 0x3f, struct drm_tx8_query), &q), EINVAL);
    close(fd);
    return 0;
}

static int t_bo_create(void)
{
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_info bi;
    struct drm_tx8_bo_set_label sl;
    int fd = dev_open(dev_index);

    CHECK(fd >= 0, "open: %s", strerror(errno));
    CHECK_ERR(bo_new(fd, 0, NULL, &bo), EINVAL);
    CHECK_ERR(bo_new(fd, 1ull << 62, NULL, &bo), ENOMEM);
    CHECK_ERR(bo_new(fd, UINT64_MAX, NULL, &bo), ENOMEM);
    CHECK_ERR(bo_new(fd, UINT64_MAX - 4095, NULL, &bo), ENOMEM);
    memset(&bo, 0, sizeof(bo));
    bo.size = 4096;
    bo.flags = 1;
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_BO_CREATE, &bo), EINVAL);
    CHECK_ERR(bo_new(fd, 4096, "tab\there", &bo), EINVAL);
    CHECK_ERR(bo_new(fd, 4096, "high\xe9", &bo), EINVAL);
    memset(&bo, 0, sizeof(bo));
    bo.size = 4096;
    memset(bo.label, 'A', sizeof(bo.label)); /* not terminated */
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_BO_CREATE, &bo), EINVAL);
    memset(&bo, 0, sizeof(bo));
    bo.size = 4096;
    bo.label[0] = 'A';
    bo.label[5] = 'B'; /* garbage after the NUL */
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_BO_CREATE, &bo), EINVAL);

    CHECK_OK(bo_new(fd, 5000, "GLM-5.1_Test", &bo));
    CHECK(bo.size == 8192, "size rounded to %" PRIu64, bo.size);
    CHECK(bo.handle != 0 && bo.dev_addr % 4096 == 0 && bo.mmap_offset % 4096 == 0,
          "handle %u addr %#" PRIx64 " offset %#" PRIx64, bo.handle, bo.dev_addr, bo.mmap_offset);

    memset(&bi, 0, sizeof(bi));
    bi.handle = bo.handle;
    CHECK_OK(xioctl(fd, DRM_IOCTL_TX8_BO_INFO, &bi));
    CHECK(bi.size == bo.size && bi.dev_addr == bo.dev_addr && bi.mmap_offset == bo.mmap_offset &&
              !strcmp(bi.label, "GLM-5.1_Test"),
          "bo_info mismatch");
    bi.flags = 1;
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_BO_INFO, &bi), EINVAL);
    bi.flags = 0;
    bi.handle = 0xdead;
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_BO_INFO, &bi), ENOENT);
    bi.handle = 0;
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_BO_INFO, &bi), ENOENT);

    memset(&sl, 0, sizeof(sl));
    sl.handle = bo.handle;
    strcpy(sl.label, "Relabelled");
    CHECK_OK(xioctl(fd, DRM_IOCTL_TX8_BO_SET_LABEL, &sl));
    bi.handle = bo.handle;
    CHECK_OK(xioctl(fd, DRM_IOCTL_TX8_BO_INFO, &bi));
    CHECK(!strcmp(bi.label, "Relabelled"), "label '%s'", bi.label);
    strcpy(sl.label, "bad\nlabel");
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_BO_SET_LABEL, &sl), EINVAL);
    memset(sl.label, 0, sizeof(sl.label));
    strcpy(sl.label, "x");
    sl.flags = 2;
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_BO_SET_LABEL, &sl), EINVAL);
    sl.flags = 0;
    sl.handle = 777;
    CHECK_ERR(xioctl(fd, DRM_IOCTL_TX8_BO_SET_LABEL, &sl), ENOENT);

    /* short struct (an older program without dev_addr/mmap_offset) */
    {
        struct drm_tx8_bo_create full;

        memset(&full, 0, sizeof(full));
        full.size = 4096;
        full.dev_addr = 0x5a5a;
        full.mmap_offset = 0x5a5a;
        CHECK_OK(
            xioctl(fd, DRM_IOWR(DRM_COMMAND_BASE + DRM_TX8_BO_CREATE, unsigned char[48]), &full));
        CHECK(full.handle != 0, "short create: no handle");
        CHECK(full.dev_addr == 0x5a5a && full.mmap_offset == 0x5a5a,
              "short create wrote past its 48 bytes");
        CHECK_OK(bo_close(fd, full.handle));
    }
    /* long struct (a newer program): the unknown tail is ignored */
    {
        unsigned char l[sizeof(struct drm_tx8_bo_create) + 16];
        struct drm_tx8_bo_create *p = (void *)l;

        memset(l, 0x77, sizeof(l));
        memset(p, 0, sizeof(*p));
        p->size = 4096;
        CHECK_OK(xioctl(fd,
                        DRM_IOWR(DRM_COMMAND_BASE + DRM_TX8_BO_CREATE,
                                 unsigned char[sizeof(struct drm_tx8_bo_create) + 16]),
                        l));
        CHECK(p->handle != 0 && p->dev_addr != 0, "long create failed");
        CHECK(l[sizeof(*p)] == 0x77, "long create: tail changed");
        CHECK_OK(bo_close(fd, p->handle));
    }

    CHECK_OK(bo_close(fd, bo.handle));
    CHECK_ERR(bo_close(fd, bo.handle), EINVAL);
    CHECK_ERR(bo_close(fd, 12345), EINVAL);
    close(fd);
    return 0;
}

static int t_mmap(void)
{
    struct drm_tx8_bo_create bo, bo2;
    int fd = dev_open(dev_index);
    uint32_t *p, *p2;

    CHECK(fd >= 0, "open: %s", strerror(errno));
    CHECK_OK(bo_new(fd, 3 * 4096, NULL, &bo));
    p = bo_map(fd, &bo);
    CHECK(p, "mmap: %s", strerror(errno));
    for (size_t i = 0; i < bo.size / 4; i++)
        CHECK(p[i] == 0, "new BO not zero at %zu", i);
    for (size_t i = 0; i < bo.size / 4; i++)
        p[i] = (uint32_t)i * 2654435761u;
    /* a second mapping sees the same memory */
    p2 = bo_map(fd, &bo);
    CHECK(p2 && p2 != p, "second mmap");
    for (size_t i = 0; i < bo.size / 4; i++)
        CHECK(p2[i] == (uint32_t)i * 2654435761u, "second mapping differs at %zu", i);
    munmap(p2, bo.size);
    /* larger than the BO, or at an offset that is no BO */
    CHECK(mmap(NULL, bo.size + 4096, PROT_READ, MAP_SHARED, fd, (off_t)bo.mmap_offset) ==
              MAP_FAILED,
          "mmap larger than the BO worked");
    CHECK(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, (off_t)(bo.mmap_offset + (1ull << 30))) ==
              MAP_FAILED,
          "mmap of a bad offset worked");
    CHECK(mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED, "mmap at 0 worked");

    /* the BO stays valid while mapped after GEM_CLOSE */
    CHECK_OK(bo_new(fd, 4096, NULL, &bo2));
    p2 = bo_map(fd, &bo2);
    CHECK(p2, "mmap bo2");
    p2[0] = 0x1234;
    CHECK_OK(bo_close(fd, bo2.handle));
    CHECK(p2[0] == 0x1234, "mapping after close");
    munmap(p2, bo2.size);
    munmap(p, bo.size);
    close(fd);
    return 0;
}

static int t_submit_args(void)
{
    struct ctx c;
    struct drm_tx8_bo_create data;
    struct drm_tx8_bo_ref refs[2], big[TX8_JOB_MAX_RANGES + 2];
    struct drm_tx8_submit s;
    struct drm_tx8_wait w;
    uint64_t seq;
    size_t len;
    uint32_t syncobj = 0;

    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &data));
    len = put_fill(c.cmdmap, data.dev_addr, 4096, 7);
    refs[0].handle = data.handle;
    refs[0].access = DRM_TX8_ACCESS_WRITE;

#define S_INIT()                                                                                   \
    do {                                                                                           \
        memset(&s, 0, sizeof(s));                                                                  \
        s.cmd_handle = c.cmd.handle;                                                               \
        s.cmd_size = len;                                                                          \
        s.bos = (uintptr_t)refs;                                                                   \
        s.bo_count = 1;                                                                            \
        s.bo_stride = sizeof(refs[0]);                                                             \
    } while (0)

    S_INIT();
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s));
    CHECK(s.seqno > 0, "seqno %" PRIu64, s.seqno);
    CHECK_OK(wait_job(c.fd, s.seqno, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "status %u", w.status);

    S_INIT();
    /* the first undefined flag (1, 2: priorities, 4: profile, 8: batch
     * invariant) */
    s.flags = 1u << 4;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    S_INIT();
    s.cmd_handle = 999;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), ENOENT);
    S_INIT();
    s.cmd_size = 0;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    S_INIT();
    s.cmd_size = len + 4;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    S_INIT();
    s.cmd_offset = 4;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    S_INIT();
    s.cmd_offset = UINT64_MAX - 7; /* offset + size overflows */
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    S_INIT();
    s.cmd_offset = c.cmd.size; /* past the end */
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    S_INIT();
    s.cmd_size = 1ull << 40;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    S_INIT();
    s.bo_count = UINT32_MAX;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    S_INIT();
    for (unsigned i = 0; i < TX8_JOB_MAX_RANGES + 2; i++)
        big[i] = refs[0];
    s.bos = (uintptr_t)big;
    s.bo_count = TX8_JOB_MAX_RANGES + 1;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    S_INIT();
    s.bo_count = TX8_JOB_MAX_RANGES - 1; /* duplicates are merged: fine */
    s.bos = (uintptr_t)big;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s));
    CHECK_OK(wait_job(c.fd, s.seqno, 20000, &w));
    S_INIT();
    s.bo_stride = 4;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    S_INIT();
    s.bos = 16; /* bad pointer */
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EFAULT);
    {
        /* a longer element: the unknown tail must be zero */
        struct {
            struct drm_tx8_bo_ref r;
            uint64_t ext;
        } ext[1] = {{refs[0], 0}};

        S_INIT();
        s.bos = (uintptr_t)ext;
        s.bo_stride = sizeof(ext[0]);
        CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s));
        CHECK_OK(wait_job(c.fd, s.seqno, 20000, &w));
        ext[0].ext = 1;
        CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    }
    S_INIT();
    refs[1].handle = 4242;
    refs[1].access = DRM_TX8_ACCESS_READ;
    s.bo_count = 2;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), ENOENT);
    refs[1].handle = data.handle;
    refs[1].access = 0;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    refs[1].access = 4;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);

    /* syncobjs */
    S_INIT();
    s.out_syncobj = 77;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), ENOENT);
    S_INIT();
    s.in_syncobj_count = 1000;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EINVAL);
    {
        uint32_t bad = 55;

        S_INIT();
        s.in_syncobjs = (uintptr_t)&bad;
        s.in_syncobj_count = 1;
        CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), ENOENT);
        s.in_syncobjs = 24;
        CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EFAULT);
    }
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &syncobj));
    S_INIT();
    s.out_syncobj = syncobj;
    s.user_data = 0xfeedbeef;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s));
    CHECK_OK(drmSyncobjWait(c.fd, &syncobj, 1, now_ns() + 20000000000ll, 0, NULL));
    seq = s.seqno;
    S_INIT();
    s.in_syncobjs = (uintptr_t)&syncobj;
    s.in_syncobj_count = 1;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s));
    CHECK(s.seqno > seq, "seqno not increasing");
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.user_data == 0xfeedbeef, "user_data %#" PRIx64, w.user_data);
    CHECK(w.end_ns >= w.start_ns && w.start_ns > 0, "job times %" PRIu64 "..%" PRIu64, w.start_ns,
          w.end_ns);

    /* WAIT arguments */
    memset(&w, 0, sizeof(w));
    w.seqno = s.seqno + 1000;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_WAIT, &w), EINVAL);
    w.seqno = 0;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_WAIT, &w), EINVAL);
    w.seqno = s.seqno;
    w.flags = 1;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_WAIT, &w), EINVAL);
    w.flags = 0;
    w.timeout_ns = now_ns() + 20000000000ll;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_WAIT, &w));
    memset(&w, 0, sizeof(w));
    w.handle = 9999;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_WAIT, &w), ENOENT);
    w.handle = data.handle;
    w.timeout_ns = now_ns() + 20000000000ll;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_WAIT, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "BO wait status %u", w.status);

    /* the other ioctls' reserved fields */
    {
        struct drm_tx8_reset r = {.flags = 1};
        struct drm_tx8_inject_fault f = {.kind = 99};

        CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_RESET, &r), EINVAL);
        r.flags = 0;
        r.pad = 1;
        CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_RESET, &r), EINVAL);
        CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_INJECT_FAULT, &f), EINVAL);
        f.kind = DRM_TX8_FAULT_HANG;
        f.flags = 1;
        CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_INJECT_FAULT, &f), EINVAL);
        f.flags = 0;
        f.param = 5; /* param only for SLOW */
        CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_INJECT_FAULT, &f), EINVAL);
    }
    drmSyncobjDestroy(c.fd, syncobj);
    ctx_close(&c);
    return 0;
}

/* Device-side failures come back as job statuses. */
static int t_job_status(void)
{
    struct ctx c;
    struct drm_tx8_bo_create a, b;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    uint64_t seq;
    uint32_t *pa;

    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 8192, NULL, &a));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &b));
    pa = bo_map(c.fd, &a);
    CHECK(pa, "mmap");

    ref.handle = a.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    CHECK_OK(run_fill(&c, a.dev_addr, 8192, 0x3f800000u, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "fill status %u", w.status);
    for (int i = 0; i < 2048; i++)
        CHECK(pa[i] == 0x3f800000u, "fill result at %d: %#x", i, pa[i]);

    /* past the end of the BO */
    CHECK_OK(run_fill(&c, a.dev_addr, 8192 + 4096, 1, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_ADDR_FAULT, "overrun status %u", w.status);
    /* into a BO of ours that the job did not list */
    CHECK_OK(run_fill(&c, b.dev_addr, 4096, 1, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_ADDR_FAULT, "unlisted BO status %u", w.status);
    CHECK(w.fault_addr >= b.dev_addr && w.fault_addr < b.dev_addr + 4096,
          "fault_addr %#" PRIx64 " not in %#" PRIx64, w.fault_addr, b.dev_addr);
    /* writing a BO listed read-only */
    ref.access = DRM_TX8_ACCESS_READ;
    CHECK_OK(run_fill(&c, a.dev_addr, 4096, 2, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_ADDR_FAULT, "read-only BO status %u", w.status);
    CHECK(pa[0] == 0x3f800000u, "read-only BO written");
    /* garbage commands */
    memset(c.cmdmap, 0xff, 64);
    CHECK_OK(submit(c.fd, c.cmd.handle, 0, 64, NULL, 0, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_INVALID_CMD, "garbage status %u", w.status);
    /* still working */
    ref.access = DRM_TX8_ACCESS_RW;
    CHECK_OK(run_fill(&c, a.dev_addr, 4096, 5, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK && pa[0] == 5, "after failures: status %u", w.status);
    munmap(pa, a.size);
    ctx_close(&c);
    return 0;
}

/* SUBMIT of a job of one BO with in-syncobjs, flags and timeout_ns. */
static int submit_full(struct ctx *c, uint64_t off, size_t len, const struct drm_tx8_bo_ref *ref,
                       const uint32_t *in, uint32_t nin, uint32_t out, uint32_t flags,
                       int64_t timeout_ns, uint64_t *seqno)
{
    struct drm_tx8_submit s;
    int r;

    memset(&s, 0, sizeof(s));
    s.cmd_handle = c->cmd.handle;
    s.cmd_offset = off;
    s.cmd_size = len;
    s.bos = (uintptr_t)ref;
    s.bo_count = 1;
    s.bo_stride = sizeof(*ref);
    s.in_syncobjs = (uintptr_t)in;
    s.in_syncobj_count = nin;
    s.out_syncobj = out;
    s.flags = flags;
    s.timeout_ns = timeout_ns;
    r = xioctl(c->fd, DRM_IOCTL_TX8_SUBMIT, &s);
    if (!r && seqno)
        *seqno = s.seqno;
    return r;
}

/* SUBMIT of a job with in-syncobjs, no time limit. */
static int submit_dep(struct ctx *c, uint64_t off, size_t len, const struct drm_tx8_bo_ref *ref,
                      const uint32_t *in, uint32_t nin, uint32_t out, uint64_t *seqno)
{
    return submit_full(c, off, len, ref, in, nin, out, 0, INT64_MAX, seqno);
}

static int inject(int fd, uint32_t kind, uint32_t param, uint32_t count)
{
    struct drm_tx8_inject_fault f;

    memset(&f, 0, sizeof(f));
    f.kind = kind;
    f.param = param;
    f.count = count;
    return xioctl(fd, DRM_IOCTL_TX8_INJECT_FAULT, &f);
}

/*
 * A producer whose fence signals about ms from now: the next job of the
 * queue is made slow (fault injection), a 4 KiB FILL of a BO of its own
 * (at cmd offset off of c), its fence into out.
 */
static int slow_producer(struct ctx *c, uint32_t ms, uint64_t off, uint32_t out, uint64_t *seqno)
{
    struct drm_tx8_bo_create scratch;
    struct drm_tx8_bo_ref ref;
    size_t len;
    int r;

    r = bo_new(c->fd, 4096, "vmtest-producer", &scratch);
    if (r)
        return r;
    ref.handle = scratch.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    r = inject(c->fd, DRM_TX8_FAULT_SLOW, ms, 1);
    if (r)
        return r;
    len = put_fill(c->cmdmap + off, scratch.dev_addr, 4096, 0xfeu);
    return submit_dep(c, off, len, &ref, NULL, 0, out, seqno);
}

/*
 * In-syncobjs are waited for asynchronously: SUBMIT returns at once, the
 * job runs when its in-fences signal, a failed in-fence fails it unrun.
 * (An in-syncobj must have a fence when SUBMIT looks at it: test
 * fence_bounds.)
 */
static int t_deps(void)
{
    struct ctx c, c2;
    struct drm_tx8_bo_create data;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    uint32_t in, out, go, sa, sb, sc, sf, pend;
    uint64_t seq, sqa, sqb, sqc;
    uint32_t *p;
    int64_t t0;
    size_t len;

    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 3 * 4096, "vmtest-deps", &data));
    p = bo_map(c.fd, &data);
    CHECK(p, "mmap");
    memset(p, 0x11, 3 * 4096);
    ref.handle = data.handle;
    ref.access = DRM_TX8_ACCESS_RW;

    /* B waits for a slow producer P (about 1.5 s) */
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &in));
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &out));
    CHECK_OK(slow_producer(&c, 1500, 2048, in, &seq));
    len = put_fill(c.cmdmap, data.dev_addr, 4096, 0x5a5a5a5au);
    t0 = now_ns();
    CHECK_OK(submit_dep(&c, 0, len, &ref, &in, 1, out, &seq));
    CHECK(now_ns() - t0 < 1000000000ll, "SUBMIT blocked %" PRId64 " ms", (now_ns() - t0) / 1000000);
    CHECK_ERR(wait_job(c.fd, seq, 300, &w), ETIME);
    /* the out-syncobj holds B's fence at once, unsignalled */
    CHECK_ERR(drmSyncobjWait(c.fd, &out, 1, now_ns() + 100000000ll, 0, NULL), ETIME);
    for (int i = 0; i < 1024; i++)
        CHECK(p[i] == 0x11111111u, "B ran before its in-fence: %#x at %d", p[i], i);
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "B status %u", w.status);
    CHECK(p[0] == 0x5a5a5a5au && p[1023] == 0x5a5a5a5au, "B result %#x", p[0]);
    CHECK_OK(drmSyncobjWait(c.fd, &out, 1, now_ns() + 20000000000ll, 0, NULL));

    /* A -> B -> C through syncobjs, all submitted before A may start */
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &go));
    CHECK_OK(slow_producer(&c, 1500, 2304, go, &seq));
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &sa));
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &sb));
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &sc));
    len = put_fill(c.cmdmap + 256, data.dev_addr, 4096, 0x01020304u);
    CHECK_OK(submit_dep(&c, 256, len, &ref, &go, 1, sa, &sqa));
    len = put_copy(c.cmdmap + 512, data.dev_addr + 4096, data.dev_addr, 4096);
    CHECK_OK(submit_dep(&c, 512, len, &ref, &sa, 1, sb, &sqb));
    len = put_copy(c.cmdmap + 768, data.dev_addr + 8192, data.dev_addr + 4096, 4096);
    CHECK_OK(submit_dep(&c, 768, len, &ref, &sb, 1, sc, &sqc));
    CHECK(sqa < sqb && sqb < sqc, "seqnos %" PRIu64 " %" PRIu64 " %" PRIu64, sqa, sqb, sqc);
    CHECK_ERR(wait_job(c.fd, sqc, 200, &w), ETIME);
    CHECK(p[1024] == 0x11111111u && p[2048] == 0x11111111u, "chain ran early");
    CHECK_OK(wait_job(c.fd, sqc, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "C status %u", w.status);
    CHECK_OK(wait_job(c.fd, sqa, 0, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "A status %u", w.status);
    CHECK_OK(wait_job(c.fd, sqb, 0, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "B status %u", w.status);
    for (int i = 0; i < 1024; i++)
        CHECK(p[i] == 0x01020304u && p[1024 + i] == 0x01020304u && p[2048 + i] == 0x01020304u,
              "chain out of order at %d: %#x %#x %#x", i, p[i], p[1024 + i], p[2048 + i]);
    CHECK_OK(drmSyncobjWait(c.fd, &sc, 1, now_ns() + 20000000000ll, 0, NULL));

    /* a failed in-fence fails the job without running it */
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &sf));
    memset(c.cmdmap + 1024, 0xff, 64);
    CHECK_OK(submit_dep(&c, 1024, 64, &ref, NULL, 0, sf, &sqa));
    len = put_fill(c.cmdmap + 1280, data.dev_addr, 4096, 7);
    CHECK_OK(submit_dep(&c, 1280, len, &ref, &sf, 1, 0, &sqb));
    CHECK_OK(wait_job(c.fd, sqb, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_ABORTED, "dependent of a failed job: status %u", w.status);
    CHECK(w.start_ns == 0, "dependent of a failed job ran");
    CHECK(p[0] == 0x01020304u, "dependent of a failed job wrote %#x", p[0]);
    CHECK_OK(wait_job(c.fd, sqa, 0, &w));
    CHECK(w.status == DRM_TX8_STATUS_INVALID_CMD, "garbage status %u", w.status);

    /* the RESET ioctl aborts the caller's waiting jobs too */
    CHECK_OK(ctx_open(&c2, dev_index));
    {
        struct drm_tx8_reset r;
        uint32_t never;

        /* its in-fence is another client's slow job */
        CHECK_OK(drmSyncobjCreate(c2.fd, 0, &pend));
        CHECK_OK(slow_producer(&c2, 2000, 0, pend, &seq));
        {
            int sfd = -1;

            CHECK_OK(drmSyncobjHandleToFD(c2.fd, pend, &sfd));
            CHECK_OK(drmSyncobjFDToHandle(c.fd, sfd, &never));
            close(sfd);
        }
        len = put_fill(c.cmdmap + 1536, data.dev_addr, 4096, 6);
        CHECK_OK(submit_dep(&c, 1536, len, &ref, &never, 1, 0, &seq));
        memset(&r, 0, sizeof(r));
        CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_RESET, &r));
        CHECK(r.aborted >= 1, "RESET aborted %llu", (unsigned long long)r.aborted);
        CHECK_OK(wait_job(c.fd, seq, 0, &w));
        CHECK(w.status == DRM_TX8_STATUS_ABORTED && w.start_ns == 0, "waiting job after RESET: %u",
              w.status);
        CHECK(p[0] == 0x01020304u, "aborted waiting job wrote %#x", p[0]);
        drmSyncobjDestroy(c.fd, never);
    }

    /* closing a file with a job still waiting frees it; the device goes on */
    {
        struct drm_tx8_bo_create d2;
        struct drm_tx8_bo_ref r2;

        CHECK_OK(slow_producer(&c2, 1500, 256, pend, &seq));
        CHECK_OK(bo_new(c2.fd, 4096, NULL, &d2));
        r2.handle = d2.handle;
        r2.access = DRM_TX8_ACCESS_WRITE;
        len = put_fill(c2.cmdmap, d2.dev_addr, 4096, 9);
        CHECK_OK(submit_dep(&c2, 0, len, &r2, &pend, 1, 0, &seq));
        CHECK_ERR(wait_job(c2.fd, seq, 0, &w), ETIME);
    }
    ctx_close(&c2);
    CHECK_OK(run_fill(&c, data.dev_addr, 4096, 8, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK && p[0] == 8, "after close: status %u", w.status);

    drmSyncobjDestroy(c.fd, in);
    drmSyncobjDestroy(c.fd, out);
    drmSyncobjDestroy(c.fd, go);
    drmSyncobjDestroy(c.fd, sa);
    drmSyncobjDestroy(c.fd, sb);
    drmSyncobjDestroy(c.fd, sc);
    drmSyncobjDestroy(c.fd, sf);
    munmap(p, data.size);
    ctx_close(&c);
    return 0;
}

/* Process B cannot reach process A's buffer, whatever it submits. */
static int t_isolation(void)
{
    struct ctx a;
    struct drm_tx8_bo_create secret;
    uint32_t *p;
    int pipefd[2], status;
    pid_t pid;

    CHECK_OK(ctx_open(&a, dev_index));
    CHECK_OK(bo_new(a.fd, 16384, "secret", &secret));
    p = bo_map(a.fd, &secret);
    CHECK(p, "mmap");
    for (int i = 0; i < 4096; i++)
        p[i] = 0xa5a5a5a5u;
    CHECK(pipe(pipefd) == 0, "pipe");

    pid = fork();
    if (pid == 0) {
        struct ctx b;
        struct drm_tx8_bo_create mine;
        struct drm_tx8_bo_ref ref;
        struct drm_tx8_wait w;
        uint64_t seq;
        size_t len;
        int bad = 0;

        if (ctx_open(&b, dev_index) || bo_new(b.fd, 16384, NULL, &mine))
            _exit(10);
        ref.handle = mine.handle;
        ref.access = DRM_TX8_ACCESS_RW;
        /* 1: overwrite A's buffer by its device address */
        if (run_fill(&b, secret.dev_addr, 16384, 0, &ref, 1, &w) ||
            w.status != DRM_TX8_STATUS_ADDR_FAULT)
            bad |= 1;
        /* 2: copy A's buffer into B's */
        len = put_copy(b.cmdmap, mine.dev_addr, secret.dev_addr, 4096);
        if (submit(b.fd, b.cmd.handle, 0, len, &ref, 1, &seq) || wait_job(b.fd, seq, 20000, &w) ||
            w.status != DRM_TX8_STATUS_ADDR_FAULT)
            bad |= 2;
        /* 3: a range that starts in B's buffer and runs into the next */
        if (run_fill(&b, mine.dev_addr, 1ull << 24, 0, &ref, 1, &w) ||
            w.status != DRM_TX8_STATUS_ADDR_FAULT)
            bad |= 4;
        /* 4: map A's buffer through B's file with A's fake offset */
        if (mmap(NULL, 4096, PROT_READ, MAP_SHARED, b.fd, (off_t)secret.mmap_offset) != MAP_FAILED)
            bad |= 8;
        /* 5: A's GEM handle means nothing (or B's own BO) in B's file */
        ref.handle = secret.handle;
        if (run_fill(&b, secret.dev_addr, 16384, 0, &ref, 1, &w) == 0 &&
            w.status == DRM_TX8_STATUS_OK)
            bad |= 16;
        ctx_close(&b);
        _exit(bad);
    }
    CHECK(pid > 0, "fork");
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process B: status %#x", status);
    for (int i = 0; i < 4096; i++)
        CHECK(p[i] == 0xa5a5a5a5u, "A's data changed at %d: %#x", i, p[i]);
    munmap(p, secret.size);
    ctx_close(&a);
    close(pipefd[0]);
    close(pipefd[1]);
    return 0;
}

/*
 * The smaps entry of the mapping at va: it must be a VM_IO | VM_PFNMAP
 * mapping (flags "io" and "pf": the BAR pages themselves) holding no RAM
 * (Rss 0), i.e. no copy of the data lives in system memory.
 */
static int check_smaps(const void *va, char *why, size_t size)
{
    static char text[1 << 20];
    char start[32];
    const char *p, *flags, *rss;

    if (read_file("/proc/self/smaps", text, sizeof(text)) <= 0) {
        snprintf(why, size, "no smaps");
        return -1;
    }
    snprintf(start, sizeof(start), "\n%lx-", (unsigned long)(uintptr_t)va);
    p = strstr(text, start);
    if (!p) {
        snprintf(why, size, "no smaps entry at %p", va);
        return -1;
    }
    rss = strstr(p, "\nRss:");
    flags = strstr(p, "\nVmFlags:");
    if (!rss || !flags) {
        snprintf(why, size, "smaps entry incomplete");
        return -1;
    }
    if (strtol(rss + 5, NULL, 10) != 0) {
        snprintf(why, size, "Rss %ld kB: RAM pages behind the mapping", strtol(rss + 5, NULL, 10));
        return -1;
    }
    if (!strstr(flags, " io") || !strstr(flags, " pf")) {
        snprintf(why, size, "VmFlags without io/pf: %.80s", flags + 1);
        return -1;
    }
    return 0;
}

static int t_zero_copy(void)
{
    struct ctx c;
    struct drm_tx8_bo_create src, dst;
    struct drm_tx8_bo_ref refs[2];
    struct drm_tx8_wait w;
    uint64_t seq;
    uint8_t *ps, *pd;
    size_t len, n = 256 * 1024;
    long long faults0, faults1;

    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, n, "zc-src", &src));
    CHECK_OK(bo_new(c.fd, n, "zc-dst", &dst));
    ps = bo_map(c.fd, &src);
    pd = bo_map(c.fd, &dst);
    CHECK(ps && pd, "mmap");
    faults0 = sysattr(dev_index, "page_faults");
    for (size_t i = 0; i < n; i++)
        ps[i] = (uint8_t)(i * 131 + 7);
    faults1 = sysattr(dev_index, "page_faults");
    CHECK(faults1 - faults0 >= (long long)(n / 4096), "page_faults %lld -> %lld", faults0, faults1);

    /* the mapping is the device memory itself */
    {
        char why[160];

        CHECK(check_smaps(ps, why, sizeof(why)) == 0, "%s", why);
    }

    /* what the CPU wrote is what the device reads, and vice versa */
    len = put_copy(c.cmdmap, dst.dev_addr, src.dev_addr, n);
    refs[0].handle = src.handle;
    refs[0].access = DRM_TX8_ACCESS_READ;
    refs[1].handle = dst.handle;
    refs[1].access = DRM_TX8_ACCESS_WRITE;
    CHECK_OK(submit(c.fd, c.cmd.handle, 0, len, refs, 2, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "copy status %u", w.status);
    CHECK(!memcmp(ps, pd, n), "device copy differs from what the CPU wrote");
    /* the command buffer itself was read by the device from the mapping */
    ps[100] ^= 0xff;
    CHECK_OK(submit(c.fd, c.cmd.handle, 0, len, refs, 2, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(pd[100] == ps[100], "second copy did not see the CPU's change");
    munmap(ps, n);
    munmap(pd, n);
    ctx_close(&c);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Robustness                                                                */

static int uevent_socket(void)
{
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = 1};
    int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);

    if (s < 0)
        return -1;
    if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(s);
        return -1;
    }
    return s;
}

/* Wait up to ms for a uevent containing key; 1 if seen. */
static int uevent_seen(int s, const char *key, int ms)
{
    char buf[4096];
    int64_t end = now_ns() + (int64_t)ms * 1000000;

    while (now_ns() < end) {
        struct pollfd pfd = {.fd = s, .events = POLLIN};
        ssize_t n;

        if (poll(&pfd, 1, 100) <= 0)
            continue;
        while ((n = recv(s, buf, sizeof(buf) - 1, 0)) > 0) {
            buf[n] = 0;
            for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1)
                if (!strcmp(buf + i, key))
                    return 1;
        }
    }
    return 0;
}

static int t_hang_reset(void)
{
    struct ctx a, b;
    struct drm_tx8_bo_create ba, bb;
    struct drm_tx8_bo_ref ra, rb;
    struct drm_tx8_inject_fault f;
    struct drm_tx8_wait w;
    uint64_t sa, sb;
    uint32_t *pb;
    long long resets0, timeouts0;
    size_t len;
    int ue;

    CHECK_OK(write_file("/sys/module/tx8/parameters/job_timeout_ms", "1500"));
    ue = uevent_socket();
    CHECK(ue >= 0, "uevent socket: %s", strerror(errno));
    CHECK_OK(ctx_open(&a, dev_index));
    CHECK_OK(ctx_open(&b, dev_index));
    CHECK_OK(bo_new(a.fd, 4096, NULL, &ba));
    CHECK_OK(bo_new(b.fd, 4096, NULL, &bb));
    pb = bo_map(b.fd, &bb);
    CHECK(pb, "mmap");
    resets0 = sysattr(dev_index, "resets");
    timeouts0 = sysattr(dev_index, "timeouts");

    memset(&f, 0, sizeof(f));
    f.kind = DRM_TX8_FAULT_HANG;
    CHECK_OK(xioctl(a.fd, DRM_IOCTL_TX8_INJECT_FAULT, &f));
    /* A's job hangs; B's job queued behind it must still complete */
    ra.handle = ba.handle;
    ra.access = DRM_TX8_ACCESS_WRITE;
    len = put_fill(a.cmdmap, ba.dev_addr, 4096, 1);
    CHECK_OK(submit(a.fd, a.cmd.handle, 0, len, &ra, 1, &sa));
    rb.handle = bb.handle;
    rb.access = DRM_TX8_ACCESS_WRITE;
    len = put_fill(b.cmdmap, bb.dev_addr, 4096, 0xb0b0b0b0u);
    CHECK_OK(submit(b.fd, b.cmd.handle, 0, len, &rb, 1, &sb));

    /* not done yet after 300 ms: a poll says -ETIME */
    memset(&w, 0, sizeof(w));
    w.seqno = sa;
    w.timeout_ns = now_ns() + 300000000ll;
    CHECK_ERR(xioctl(a.fd, DRM_IOCTL_TX8_WAIT, &w), ETIME);
    CHECK_OK(wait_job(a.fd, sa, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_TIMEOUT, "hung job status %u", w.status);
    CHECK_OK(wait_job(b.fd, sb, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "other client's job status %u", w.status);
    CHECK(pb[0] == 0xb0b0b0b0u, "other client's job did not run");
    CHECK(sysattr(dev_index, "resets") == resets0 + 1, "resets %lld -> %lld", resets0,
          sysattr(dev_index, "resets"));
    CHECK(sysattr(dev_index, "timeouts") == timeouts0 + 1, "timeouts");
    CHECK(uevent_seen(ue, "TX8_REASON=timeout", 3000), "no reset uevent");

    /* next job of A: fine */
    CHECK_OK(run_fill(&a, ba.dev_addr, 4096, 3, &ra, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "job after reset: status %u", w.status);

    /* device error injection */
    f.kind = DRM_TX8_FAULT_ERROR;
    CHECK_OK(xioctl(a.fd, DRM_IOCTL_TX8_INJECT_FAULT, &f));
    CHECK_OK(run_fill(&a, ba.dev_addr, 4096, 3, &ra, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_DEVICE_ERROR, "injected error: status %u", w.status);

    /* a client reset aborts that client's queued job only */
    f.kind = DRM_TX8_FAULT_HANG;
    CHECK_OK(xioctl(a.fd, DRM_IOCTL_TX8_INJECT_FAULT, &f));
    len = put_fill(a.cmdmap, ba.dev_addr, 4096, 1);
    CHECK_OK(submit(a.fd, a.cmd.handle, 0, len, &ra, 1, &sa));
    usleep(200000);
    {
        struct drm_tx8_reset r;

        memset(&r, 0, sizeof(r));
        CHECK_OK(xioctl(a.fd, DRM_IOCTL_TX8_RESET, &r));
        CHECK(r.aborted == 1, "reset aborted %" PRIu64, r.aborted);
    }
    CHECK_OK(wait_job(a.fd, sa, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_ABORTED, "reset job status %u", w.status);
    CHECK_OK(run_fill(&b, bb.dev_addr, 4096, 9, &rb, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "B after A's reset: status %u", w.status);

    /* debugfs: reset trigger and fault injection */
    {
        char path[256];

        if (debugfs_path(dev_index, "inject_fault", path, sizeof(path)) == 0) {
            CHECK_OK(write_file(path, "error 1"));
            CHECK_OK(run_fill(&b, bb.dev_addr, 4096, 9, &rb, 1, &w));
            CHECK(w.status == DRM_TX8_STATUS_DEVICE_ERROR, "debugfs error: %u", w.status);
            CHECK(write_file(path, "bogus") == -EINVAL, "debugfs bad fault accepted");
            debugfs_path(dev_index, "reset", path, sizeof(path));
            resets0 = sysattr(dev_index, "resets");
            CHECK_OK(write_file(path, "1"));
            CHECK(sysattr(dev_index, "resets") == resets0 + 1, "debugfs reset not counted");
        } else {
            FAIL("no debugfs files");
        }
    }
    write_file("/sys/module/tx8/parameters/job_timeout_ms", "5000");
    munmap(pb, bb.size);
    ctx_close(&a);
    ctx_close(&b);
    close(ue);
    return 0;
}

static int t_close_frees(void)
{
    long long used0 = sysattr(dev_index, "mem_used");
    struct ctx c;
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    uint64_t seq;
    size_t len;

    CHECK(used0 >= 0, "sysfs mem_used");
    CHECK_OK(ctx_open(&c, dev_index));
    for (int i = 0; i < 8; i++)
        CHECK_OK(bo_new(c.fd, 1 << 20, "leak-test", &bo));
    CHECK(sysattr(dev_index, "mem_used") >= used0 + 8 * (1 << 20) + 65536, "mem_used did not grow");
    /* close with a job in flight and a mapping gone */
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    len = put_fill(c.cmdmap, bo.dev_addr, 1 << 20, 1);
    CHECK_OK(submit(c.fd, c.cmd.handle, 0, len, &ref, 1, &seq));
    ctx_close(&c);
    for (int i = 0; i < 600 && sysattr(dev_index, "mem_used") != used0; i++)
        usleep(50000);
    CHECK(sysattr(dev_index, "mem_used") == used0, "mem_used %lld after close, was %lld",
          sysattr(dev_index, "mem_used"), used0);
    /* out of device memory is an error, not a crash */
    {
        int fd = dev_open(dev_index);
        long long total = sysattr(dev_index, "mem_total");
        int n = 0, r = 0;

        CHECK(fd >= 0, "open");
        while (n < 10000 && (r = bo_new(fd, 16 << 20, NULL, &bo)) == 0)
            n++;
        CHECK(r == -ENOMEM, "exhaustion: %d after %d BOs", r, n);
        CHECK(n >= total / (16 << 20) - 2, "only %d BOs of 16 MiB in %lld bytes", n, total);
        close(fd);
        for (int i = 0; i < 100 && sysattr(dev_index, "mem_used") != used0; i++)
            usleep(50000);
        CHECK(sysattr(dev_index, "mem_used") == used0, "mem_used after exhaustion");
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* /proc, fdinfo, sysfs                                                      */

static int t_meminfo(void)
{
    static char text[16384];
    struct drm_tx8_bo_create w, kv;
    long long used0, faults0;
    char key[64];
    uint8_t *p;
    int fd = dev_open(dev_index);

    CHECK(fd >= 0, "open");
    CHECK(read_file("/proc/tx_meminfo", text, sizeof(text)) > 0, "read /proc/tx_meminfo");
    used0 = meminfo_value(text, "DeviceUsed");
    faults0 = meminfo_value(text, "PageFaults");
    CHECK(used0 >= 0 && faults0 >= 0 && meminfo_value(text, "DeviceTotal") > 0 &&
              meminfo_value(text, "DeviceFree") >= 0 && meminfo_value(text, "CacheMiss") >= 0 &&
              meminfo_value(text, "Resets") >= 0,
          "totals missing:\n%s", text);
    CHECK(!strncmp(text, "DeviceTotal:", 12), "first line: %.40s", text);
    CHECK_OK(bo_new(fd, 4 << 20, "GLM-5.1_Weights", &w));
    CHECK_OK(bo_new(fd, 1 << 20, "GLM-5.1 KVCache", &kv));
    p = bo_map(fd, &kv);
    CHECK(p, "mmap");
    p[0] = 1;
    p[4096] = 1;
    CHECK(read_file("/proc/tx_meminfo", text, sizeof(text)) > 0, "read");
    CHECK(meminfo_value(text, "GLM-5.1_Weights") == 4096, "GLM-5.1_Weights: %lld\n%s",
          meminfo_value(text, "GLM-5.1_Weights"), text);
    CHECK(meminfo_value(text, "GLM-5.1_KVCache") == 1024, "GLM-5.1_KVCache");
    snprintf(key, sizeof(key), "accel%d_GLM-5.1_Weights", dev_index);
    CHECK(meminfo_value(text, key) == 4096, "%s missing", key);
    CHECK(meminfo_value(text, "DeviceUsed") == used0 + 5120, "DeviceUsed %lld, was %lld",
          meminfo_value(text, "DeviceUsed"), used0);
    CHECK(meminfo_value(text, "PageFaults") >= faults0 + 2, "PageFaults");
    CHECK(meminfo_value(text, "DeviceFree") ==
              meminfo_value(text, "DeviceTotal") - meminfo_value(text, "DeviceUsed"),
          "DeviceFree");
    /* meminfo style: "Key:" padded, value right-aligned, " kB" */
    {
        const char *l = strstr(text, "\nDeviceUsed:");

        CHECK(l && strstr(l + 1, " kB\n") && strchr(l + 1, '\n') > strstr(l + 1, " kB\n") - 1,
              "DeviceUsed line format");
    }
    munmap(p, kv.size);
    close(fd);
    CHECK(read_file("/proc/tx_meminfo", text, sizeof(text)) > 0, "read");
    CHECK(meminfo_value(text, "GLM-5.1_Weights") < 0, "label still listed after close");
    return 0;
}

static int t_fdinfo(void)
{
    char path[64], text[4096], pdev[64], want[128];
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    struct ctx c;

    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 1 << 20, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    CHECK_OK(run_fill(&c, bo.dev_addr, 1 << 20, 1, &ref, 1, &w));
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", c.fd);
    CHECK(read_file(path, text, sizeof(text)) > 0, "read %s", path);
    CHECK(strstr(text, "drm-driver:\ttx8\n"), "drm-driver:\n%s", text);
    CHECK(strstr(text, "drm-client-id:\t"), "drm-client-id");
    CHECK_OK(pci_addr(dev_index, pdev, sizeof(pdev)));
    snprintf(want, sizeof(want), "drm-pdev:\t%s\n", pdev);
    CHECK(strstr(text, want), "no '%s' in\n%s", want, text);
    CHECK(strstr(text, "drm-engine-compute:\t"), "drm-engine-compute");
    CHECK(strstr(text, " ns\n"), "engine time unit");
    CHECK(strtoull(strstr(text, "drm-engine-compute:\t") + 20, NULL, 10) > 0, "no busy time");
    snprintf(want, sizeof(want), "drm-total-vram:\t%" PRIu64 " KiB\n",
             (uint64_t)(bo.size + c.cmd.size) >> 10);
    CHECK(strstr(text, want), "no '%s' in\n%s", want, text);
    snprintf(want, sizeof(want), "drm-resident-vram:\t%" PRIu64 " KiB\n",
             (uint64_t)(bo.size + c.cmd.size) >> 10);
    CHECK(strstr(text, want), "no '%s'", want);
    ctx_close(&c);
    return 0;
}

static int t_sysfs(void)
{
    static const char *const names[] = {"busy_ns", "mem_total",   "mem_used",
                                        "jobs",    "resets",      "timeouts",
                                        "cores",   "page_faults", "cache_misses"};
    struct drm_tx8_device_info info;
    struct drm_tx8_query q = {.query = DRM_TX8_QUERY_DEVICE, .size = sizeof(info)};
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_bo_create bo;
    struct drm_tx8_wait w;
    struct ctx c;
    long long jobs0, busy0;

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[320], buf[64], *end;

        snprintf(path, sizeof(path), "%s/%s", sysattr_dir(dev_index), names[i]);
        CHECK(read_file(path, buf, sizeof(buf)) > 0, "read %s", path);
        strtoull(buf, &end, 10);
        CHECK(end != buf && !strcmp(end, "\n"), "%s: not one value: '%s'", names[i], buf);
    }
    CHECK_OK(ctx_open(&c, dev_index));
    q.data = (uintptr_t)&info;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_QUERY, &q));
    CHECK(sysattr(dev_index, "cores") == info.num_cores, "cores");
    CHECK(sysattr(dev_index, "mem_total") == (long long)info.heap_size, "mem_total");
    CHECK(sysattr(dev_index, "mem_used") == (long long)info.heap_used, "mem_used");
    jobs0 = sysattr(dev_index, "jobs");
    busy0 = sysattr(dev_index, "busy_ns");
    CHECK_OK(bo_new(c.fd, 4 << 20, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    CHECK_OK(run_fill(&c, bo.dev_addr, 4 << 20, 1, &ref, 1, &w));
    CHECK(sysattr(dev_index, "jobs") == jobs0 + 1, "jobs");
    CHECK(sysattr(dev_index, "busy_ns") > busy0, "busy_ns did not grow");
    ctx_close(&c);
    return 0;
}

/* The hwmon directory of accelN's device ("tx8"), or -ENOENT. */
static int hwmon_dir(int n, char *out, size_t size)
{
    char dir[64], path[400], name[32];
    struct dirent *de;
    DIR *d;
    int rc = -ENOENT;

    snprintf(dir, sizeof(dir), "/sys/class/accel/accel%d/device/hwmon", n);
    d = opendir(dir);
    if (!d)
        return -errno;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "hwmon", 5))
            continue;
        snprintf(path, sizeof(path), "%s/%s/name", dir, de->d_name);
        if (read_file(path, name, sizeof(name)) > 0 && !strcmp(name, "tx8\n")) {
            snprintf(out, size, "%s/%s", dir, de->d_name);
            rc = 0;
            break;
        }
    }
    closedir(d);
    return rc;
}

static long long hwmon_value(const char *dir, const char *file)
{
    char path[512], buf[64];

    snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (read_file(path, buf, sizeof(buf)) <= 0)
        return -1;
    return strtoll(buf, NULL, 10);
}

static double mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* hwmon (issue 41): the power model's figures in the hwmon sysfs ABI; an
 * idle device draws its static power, energy grows, and a power cap set
 * through power1_cap slows a job down as the model says. */
static int t_hwmon(void)
{
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_bo_create bo;
    struct drm_tx8_wait w;
    struct ctx c;
    char dir[400], capf[420], val[32];
    long long p_idle, e0, e1, cap;
    double t0, free_ms, capped_ms;

    CHECK_OK(hwmon_dir(dev_index, dir, sizeof(dir)));
    usleep(1200 * 1000); /* a whole 1 s window without jobs */
    p_idle = hwmon_value(dir, "power1_average");
    CHECK(p_idle > 0, "power1_average %lld uW", p_idle);
    CHECK(hwmon_value(dir, "power1_input") == p_idle, "idle: power1_input %lld != average %lld",
          hwmon_value(dir, "power1_input"), p_idle);
    CHECK(hwmon_value(dir, "power1_average_interval") == 1000, "power1_average_interval");
    e0 = hwmon_value(dir, "energy1_input");
    usleep(200 * 1000);
    e1 = hwmon_value(dir, "energy1_input");
    CHECK(e0 >= 0 && e1 > e0, "energy1_input %lld -> %lld", e0, e1);
    CHECK(hwmon_value(dir, "power1_cap") == 0, "power1_cap not 0 at start");

    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 64 << 20, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    /* the uncapped time: the faster of two fills after a warm-up one (the
     * first fill of the BO also pays the host's first touch of its pages,
     * which took longer than the capped fill on a loaded host) */
    CHECK_OK(run_fill(&c, bo.dev_addr, 64 << 20, 1, &ref, 1, &w));
    free_ms = 1e9;
    for (int i = 0; i < 2; i++) {
        double ms;

        t0 = mono_ms();
        CHECK_OK(run_fill(&c, bo.dev_addr, 64 << 20, 1, &ref, 1, &w));
        ms = mono_ms() - t0;
        if (ms < free_ms)
            free_ms = ms;
    }
    /* 1 mW above the static power: the 64 MiB fill (about 2 mJ of memory
     * traffic at 32 pJ/B) runs at the lowest modelled clock, 1/1000 */
    snprintf(val, sizeof(val), "%lld", p_idle + 1000);
    snprintf(capf, sizeof(capf), "%s/power1_cap", dir);
    CHECK_OK(write_file(capf, val));
    cap = hwmon_value(dir, "power1_cap");
    CHECK(cap == p_idle + 1000, "power1_cap reads %lld, wrote %s", cap, val);
    t0 = mono_ms();
    CHECK_OK(run_fill(&c, bo.dev_addr, 64 << 20, 2, &ref, 1, &w));
    capped_ms = mono_ms() - t0;
    CHECK_OK(write_file(capf, "0"));
    /* modelled: 64 MiB / 409.6 GB/s = 164 us at the nominal clock */
    CHECK(capped_ms >= 150.0 && capped_ms > free_ms, "capped fill %.1f ms, uncapped %.1f ms",
          capped_ms, free_ms);
    CHECK(hwmon_value(dir, "power1_cap") == 0, "power1_cap not back to 0");
    /* energy1_input never goes backwards, also across a RESET (hwmon's
     * rule for energy*_input; a device restart: dev_restart) */
    {
        struct drm_tx8_reset r;
        long long before = hwmon_value(dir, "energy1_input"), after;

        memset(&r, 0, sizeof(r));
        CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_RESET, &r));
        after = hwmon_value(dir, "energy1_input");
        CHECK(before > 0 && after >= before, "energy1_input %lld before RESET, %lld after",
              before, after);
    }
    /* fdinfo: this client's share of the energy (two 64 MiB fills: about
     * 4 mJ of memory traffic; the only client, so the share is all) */
    {
        char path[64], text[4096];
        const char *e;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", c.fd);
        CHECK(read_file(path, text, sizeof(text)) > 0, "read %s", path);
        e = strstr(text, "drm-energy-compute:\t");
        CHECK(e && strstr(e, " uJ\n"), "no drm-energy-compute in\n%s", text);
        CHECK(strtoull(e + 20, NULL, 10) >= 3000, "drm-energy-compute %llu uJ",
              strtoull(e + 20, NULL, 10));
    }
    ctx_close(&c);
    return 0;
}

/* A number after `key` in text (0 with *found false when absent). */
static unsigned long long key_value(const char *text, const char *key, bool *found)
{
    const char *e = strstr(text, key);

    *found = e != NULL;
    return e ? strtoull(e + strlen(key), NULL, 10) : 0;
}

/* This client's drm-client-id and drm-energy-compute (uJ) from its fdinfo. */
static int client_fdinfo(int fd, unsigned long long *id, unsigned long long *uj)
{
    char path[64], text[4096];
    bool f1, f2;

    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    CHECK(read_file(path, text, sizeof(text)) > 0, "read %s", path);
    *id = key_value(text, "drm-client-id:\t", &f1);
    *uj = key_value(text, "drm-energy-compute:\t", &f2);
    CHECK(f1 && f2, "no drm-client-id or drm-energy-compute in\n%s", text);
    return 0;
}

/* Each client's energy (issue 41): the energies of its jobs' completion
 * records (DRM_IOCTL_TX8_WAIT.energy_pj, interface 1.9) add up to its
 * fdinfo drm-energy-compute and to its /proc/tx_meminfo ClientN_Energy line,
 * exactly, for two clients doing different amounts of work at once. */
static int t_client_energy(void)
{
    struct ctx a, b;
    struct drm_tx8_bo_create bo_a, bo_b;
    struct drm_tx8_bo_ref ref_a, ref_b;
    struct drm_tx8_wait w;
    unsigned long long pj_a = 0, pj_b = 0, id_a, id_b, uj_a, uj_b, m_a, m_b;
    char text[16384], key[64];
    bool found;

    CHECK_OK(ctx_open(&a, dev_index));
    CHECK_OK(ctx_open(&b, dev_index));
    CHECK_OK(bo_new(a.fd, 16 << 20, NULL, &bo_a));
    CHECK_OK(bo_new(b.fd, 16 << 20, NULL, &bo_b));
    ref_a.handle = bo_a.handle;
    ref_a.access = DRM_TX8_ACCESS_WRITE;
    ref_b.handle = bo_b.handle;
    ref_b.access = DRM_TX8_ACCESS_WRITE;
    for (int i = 0; i < 4; i++) {
        CHECK_OK(run_fill(&a, bo_a.dev_addr, 16 << 20, (uint32_t)i, &ref_a, 1, &w));
        CHECK(w.energy_pj > 0, "client A job %d: energy_pj 0", i);
        pj_a += w.energy_pj;
        if (i % 2)
            continue;
        CHECK_OK(run_fill(&b, bo_b.dev_addr, 16 << 20, (uint32_t)i, &ref_b, 1, &w));
        CHECK(w.energy_pj > 0, "client B job %d: energy_pj 0", i);
        pj_b += w.energy_pj;
    }
    /* the same fill costs the same: A did twice B's work */
    CHECK(pj_a > pj_b + pj_b / 2, "client A %llu pJ, client B %llu pJ", pj_a, pj_b);
    CHECK_OK(client_fdinfo(a.fd, &id_a, &uj_a));
    CHECK_OK(client_fdinfo(b.fd, &id_b, &uj_b));
    CHECK(uj_a == pj_a / 1000000 && uj_b == pj_b / 1000000,
          "fdinfo drm-energy-compute %llu / %llu uJ, records %llu / %llu pJ", uj_a, uj_b, pj_a,
          pj_b);
    CHECK(uj_b > 0, "client B: %llu pJ is below 1 uJ", pj_b);
    CHECK(read_file("/proc/tx_meminfo", text, sizeof(text)) > 0, "read /proc/tx_meminfo");
    snprintf(key, sizeof(key), "accel%d_Client%llu_Energy:", dev_index, id_a);
    m_a = key_value(text, key, &found);
    CHECK(found, "no %s line in /proc/tx_meminfo:\n%s", key, text);
    snprintf(key, sizeof(key), "accel%d_Client%llu_Energy:", dev_index, id_b);
    m_b = key_value(text, key, &found);
    CHECK(found, "no %s line in /proc/tx_meminfo:\n%s", key, text);
    CHECK(m_a == uj_a && m_b == uj_b, "/proc/tx_meminfo %llu / %llu uJ, fdinfo %llu / %llu uJ",
          m_a, m_b, uj_a, uj_b);
    ctx_close(&b);
    /* a closed client's line goes */
    CHECK(read_file("/proc/tx_meminfo", text, sizeof(text)) > 0, "read /proc/tx_meminfo");
    key_value(text, key, &found);
    CHECK(!found, "%s still in /proc/tx_meminfo after close", key);
    ctx_close(&a);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Unbind / rebind and module reload with clients open                       */

static sigjmp_buf segv_jmp;

static void on_sigbus(int sig)
{
    siglongjmp(segv_jmp, sig);
}

static int wait_for_node(int n, bool present, int ms)
{
    char path[64];

    snprintf(path, sizeof(path), "/dev/accel/accel%d", n);
    for (int i = 0; i < ms / 20; i++) {
        if ((access(path, F_OK) == 0) == present)
            return 0;
        usleep(20000);
    }
    return -1;
}

static int t_unbind(void)
{
    char addr[64];
    struct ctx c;
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    struct drm_tx8_query q;
    struct drm_tx8_device_info info;
    volatile uint32_t *p;
    int sig;

    CHECK_OK(pci_addr(dev_index, addr, sizeof(addr)));
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 65536, NULL, &bo));
    p = bo_map(c.fd, &bo);
    CHECK(p, "mmap");
    p[0] = 42;
    /* two jobs waiting for in-fences: X for a slow producer, Y for X */
    {
        uint32_t g, o;
        uint64_t sx, sy, sg;
        size_t len;

        ref.handle = bo.handle;
        ref.access = DRM_TX8_ACCESS_WRITE;
        CHECK_OK(drmSyncobjCreate(c.fd, 0, &g));
        CHECK_OK(drmSyncobjCreate(c.fd, 0, &o));
        CHECK_OK(slow_producer(&c, 4000, 4096, g, &sg));
        len = put_fill(c.cmdmap, bo.dev_addr, 4096, 1);
        CHECK_OK(submit_dep(&c, 0, len, &ref, &g, 1, o, &sx));
        CHECK_OK(submit_dep(&c, 0, len, &ref, &o, 1, 0, &sy));
        CHECK_ERR(wait_job(c.fd, sy, 0, &w), ETIME);
    }

    CHECK_OK(write_file("/sys/bus/pci/drivers/tx8/unbind", addr));
    CHECK_OK(wait_for_node(dev_index, false, 5000));
    /* every call of the open file fails with -ENODEV */
    memset(&q, 0, sizeof(q));
    q.query = DRM_TX8_QUERY_DEVICE;
    q.size = sizeof(info);
    q.data = (uintptr_t)&info;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_QUERY, &q), ENODEV);
    {
        struct drm_tx8_bo_create nb;

        CHECK_ERR(bo_new(c.fd, 4096, NULL, &nb), ENODEV);
    }
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    CHECK_ERR(submit(c.fd, c.cmd.handle, 0, sizeof(struct tx8_cmd_fill), &ref, 1, NULL), ENODEV);
    CHECK_ERR(wait_job(c.fd, 1, 10, &w), ENODEV);
    /* and the mapping of device memory is gone: SIGBUS, not stale access */
    signal(SIGBUS, on_sigbus);
    signal(SIGSEGV, on_sigbus);
    sig = sigsetjmp(segv_jmp, 1);
    if (sig == 0) {
        (void)p[1];
        FAIL("mapping still readable after unbind");
    }
    signal(SIGBUS, SIG_DFL);
    signal(SIGSEGV, SIG_DFL);
    /* the last user goes: the old minor is freed, the new one takes it */
    munmap((void *)p, bo.size);
    ctx_close(&c);

    CHECK_OK(write_file("/sys/bus/pci/drivers/tx8/bind", addr));
    CHECK_OK(wait_for_node(dev_index, true, 5000));
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    CHECK_OK(run_fill(&c, bo.dev_addr, 4096, 1, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "after rebind: status %u", w.status);
    ctx_close(&c);
    return 0;
}

static int run_cmd(const char *cmd)
{
    int st = system(cmd);

    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/*
 * rmmod once the last user is gone. Besides the open files, every live
 * fence of a tx8 job holds the module (its ops are module text), and the
 * driver's last references to a finished job go asynchronously: the
 * scheduler's free_job work and the completion path's retirement run
 * after the fence signalled, so shortly after the last close() the module
 * can still be held for a moment. As IGT's module unload does
 * (igt_kmod_unload, and kmod's `modprobe -r --wait`), retry while the
 * kernel says it is busy, within 5 s, and say how long it took. Returns 0
 * when the module went.
 */
static int rmmod_when_released(const char *what)
{
    double t0 = mono_ms(), ms = 0;
    int err;

    for (int tries = 0;; tries++) {
        if (syscall(SYS_delete_module, "tx8", O_NONBLOCK) == 0) {
            if (tries)
                printf("%s: the module was still held %.0f ms after the last user went (%d "
                       "retries)\n",
                       what, ms, tries);
            return 0;
        }
        err = errno;
        ms = mono_ms() - t0;
        if ((err != EAGAIN && err != EWOULDBLOCK && err != EBUSY) || ms >= 5000)
            break;
        usleep(10000);
    }
    {
        char refcnt[32] = "?";
        FILE *f = fopen("/sys/module/tx8/refcnt", "r");

        if (f) {
            if (!fgets(refcnt, sizeof(refcnt), f))
                snprintf(refcnt, sizeof(refcnt), "?");
            fclose(f);
        }
        refcnt[strcspn(refcnt, "\n")] = 0;
        printf("%s: delete_module(tx8): %s after %.0f ms (refcnt %s)\n", what, strerror(err), ms,
               refcnt);
    }
    return -1;
}

static int t_reload(void)
{
    struct ctx c;
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;

    CHECK_OK(ctx_open(&c, dev_index));
    /* an open file holds the module: rmmod refuses, nothing breaks */
    CHECK(run_cmd("rmmod tx8 2>/dev/null") != 0, "rmmod succeeded with a client open");
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    CHECK_OK(run_fill(&c, bo.dev_addr, 4096, 1, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "status %u", w.status);
    ctx_close(&c);
    CHECK(rmmod_when_released("reload") == 0, "rmmod failed after close");
    CHECK(access("/proc/tx_meminfo", F_OK) != 0, "/proc/tx_meminfo after rmmod");
    CHECK(access("/dev/accel/accel0", F_OK) != 0, "accel0 after rmmod");
    CHECK(run_cmd("modprobe tx8") == 0, "modprobe failed");
    CHECK_OK(wait_for_node(dev_index, true, 5000));
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    CHECK_OK(run_fill(&c, bo.dev_addr, 4096, 1, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "after reload: status %u", w.status);
    ctx_close(&c);
    return 0;
}

/* Both devices at once, each with its own memory and jobs. */
static int t_two_devices(void)
{
    struct ctx c[2];
    struct drm_tx8_bo_create bo[2];
    struct drm_tx8_bo_ref ref[2];
    struct drm_tx8_wait w;
    uint64_t seq[2];
    uint32_t *p[2];
    size_t len;
    static char text[16384];

    CHECK(access("/dev/accel/accel1", F_OK) == 0, "no second device");
    for (int d = 0; d < 2; d++) {
        CHECK_OK(ctx_open(&c[d], d));
        CHECK_OK(bo_new(c[d].fd, 1 << 20, d ? "Two-B" : "Two-A", &bo[d]));
        p[d] = bo_map(c[d].fd, &bo[d]);
        CHECK(p[d], "mmap %d", d);
        ref[d].handle = bo[d].handle;
        ref[d].access = DRM_TX8_ACCESS_WRITE;
    }
    for (int d = 0; d < 2; d++) {
        len = put_fill(c[d].cmdmap, bo[d].dev_addr, 1 << 20, 0x1000u + (uint32_t)d);
        CHECK_OK(submit(c[d].fd, c[d].cmd.handle, 0, len, &ref[d], 1, &seq[d]));
    }
    for (int d = 0; d < 2; d++) {
        CHECK_OK(wait_job(c[d].fd, seq[d], 20000, &w));
        CHECK(w.status == DRM_TX8_STATUS_OK, "device %d: status %u", d, w.status);
        for (int i = 0; i < (1 << 18); i += 997)
            CHECK(p[d][i] == 0x1000u + (uint32_t)d, "device %d: wrong data", d);
    }
    /* a handle of one device means nothing on the other */
    {
        struct drm_tx8_bo_info bi = {.handle = bo[0].handle + 100};

        CHECK_ERR(xioctl(c[1].fd, DRM_IOCTL_TX8_BO_INFO, &bi), ENOENT);
    }
    CHECK(read_file("/proc/tx_meminfo", text, sizeof(text)) > 0, "meminfo");
    CHECK(meminfo_value(text, "accel0_Two-A") == 1024 &&
              meminfo_value(text, "accel1_Two-B") == 1024,
          "per-device labels:\n%s", text);
    CHECK(meminfo_value(text, "accel0_Total") + meminfo_value(text, "accel1_Total") ==
              meminfo_value(text, "DeviceTotal"),
          "DeviceTotal is not the sum");
    for (int d = 0; d < 2; d++) {
        munmap(p[d], bo[d].size);
        ctx_close(&c[d]);
    }
    return 0;
}

/* Many submitters at once: the ring fills and drains, all jobs finish. */
static int t_stress(void)
{
    enum { PROCS = 4, JOBS = 64 };
    pid_t pids[PROCS];
    int status;

    for (int i = 0; i < PROCS; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            struct ctx c;
            struct drm_tx8_bo_create bo;
            struct drm_tx8_bo_ref ref;
            struct drm_tx8_wait w;
            uint64_t seqs[JOBS];
            uint32_t *p;

            if (ctx_open(&c, dev_index) || bo_new(c.fd, JOBS * 4096, NULL, &bo))
                _exit(2);
            p = bo_map(c.fd, &bo);
            ref.handle = bo.handle;
            ref.access = DRM_TX8_ACCESS_WRITE;
            for (int j = 0; j < JOBS; j++) {
                size_t len = put_fill(c.cmdmap + j * 64, bo.dev_addr + (uint64_t)j * 4096, 4096,
                                      (uint32_t)(i * 1000 + j));

                if (submit(c.fd, c.cmd.handle, (uint64_t)j * 64, len, &ref, 1, &seqs[j]))
                    _exit(3);
            }
            for (int j = 0; j < JOBS; j++)
                if (wait_job(c.fd, seqs[j], 30000, &w) || w.status != DRM_TX8_STATUS_OK)
                    _exit(4);
            for (int j = 0; j < JOBS; j++)
                if (!p || p[j * 1024 + 5] != (uint32_t)(i * 1000 + j))
                    _exit(5);
            _exit(0);
        }
        CHECK(pids[i] > 0, "fork");
    }
    for (int i = 0; i < PROCS; i++) {
        CHECK(waitpid(pids[i], &status, 0) == pids[i], "waitpid");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "submitter %d: status %#x", i, status);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Hostile clients (issue 9)                                                 */

/* A copy-on-write mapping of device memory is refused (it used to BUG). */
static int t_mmap_cow(void)
{
    struct drm_tx8_bo_create bo;
    uint32_t *p;
    void *m;
    int fd = dev_open(dev_index);

    CHECK(fd >= 0, "open: %s", strerror(errno));
    CHECK_OK(bo_new(fd, 8192, NULL, &bo));
    m = mmap(NULL, bo.size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, (off_t)bo.mmap_offset);
    if (m != MAP_FAILED)
        munmap(m, bo.size); /* not touched: that would crash an old kernel */
    CHECK(m == MAP_FAILED && errno == EINVAL, "MAP_PRIVATE read-write: %s",
          m == MAP_FAILED ? strerror(errno) : "mapped");
    m = mmap(NULL, bo.size, PROT_READ, MAP_PRIVATE, fd, (off_t)bo.mmap_offset);
    if (m != MAP_FAILED)
        munmap(m, bo.size);
    CHECK(m == MAP_FAILED && errno == EINVAL, "MAP_PRIVATE read-only: %s",
          m == MAP_FAILED ? strerror(errno) : "mapped");
    /* MAP_SHARED goes on working */
    p = bo_map(fd, &bo);
    CHECK(p, "MAP_SHARED: %s", strerror(errno));
    p[0] = 7;
    CHECK(p[0] == 7, "MAP_SHARED write");
    munmap(p, bo.size);
    close(fd);
    return 0;
}

/* After munmap/mprotect split a mapping, faults map the right pages. */
static int t_mmap_split(void)
{
    enum { PAGES = 4 };
    struct drm_tx8_bo_create bo;
    uint8_t *p, *q, *r;
    int fd = dev_open(dev_index);

#define PAGE_WORD(m, i) (((volatile uint32_t *)((m) + (size_t)(i) * 4096))[5])
    CHECK(fd >= 0, "open: %s", strerror(errno));
    CHECK_OK(bo_new(fd, PAGES * 4096, NULL, &bo));
    p = bo_map(fd, &bo);
    CHECK(p, "mmap");
    for (int i = 0; i < PAGES; i++)
        PAGE_WORD(p, i) = 0x1000u + (uint32_t)i;

    /* the head unmapped: the rest starts at page 1 of the BO */
    q = bo_map(fd, &bo);
    CHECK(q, "mmap q");
    CHECK(munmap(q, 4096) == 0, "munmap head");
    for (int i = 1; i < PAGES; i++)
        CHECK(PAGE_WORD(q, i) == 0x1000u + (uint32_t)i, "after munmap: page %d reads %#x", i,
              PAGE_WORD(q, i));
    PAGE_WORD(q, 2) = 0x2002u;
    CHECK(PAGE_WORD(p, 2) == 0x2002u, "write through the split mapping went elsewhere");
    munmap(q + 4096, (PAGES - 1) * 4096);

    /* mprotect in the middle: three VMAs */
    r = bo_map(fd, &bo);
    CHECK(r, "mmap r");
    CHECK(mprotect(r + 4096, 4096, PROT_READ) == 0, "mprotect");
    CHECK(PAGE_WORD(r, 3) == 0x1003u, "after mprotect: page 3 reads %#x", PAGE_WORD(r, 3));
    CHECK(PAGE_WORD(r, 1) == 0x1001u, "after mprotect: page 1 reads %#x", PAGE_WORD(r, 1));
    CHECK(PAGE_WORD(r, 2) == 0x2002u, "after mprotect: page 2 reads %#x", PAGE_WORD(r, 2));
    CHECK(PAGE_WORD(r, 0) == 0x1000u, "after mprotect: page 0 reads %#x", PAGE_WORD(r, 0));
    munmap(r, PAGES * 4096);

    /* a shrinking mremap keeps the pages; growing is refused */
    r = bo_map(fd, &bo);
    CHECK(r, "mmap r2");
    CHECK(mremap(r, PAGES * 4096, (PAGES + 4) * 4096, 0) == MAP_FAILED, "mremap grew");
    CHECK(mremap(r, PAGES * 4096, 2 * 4096, 0) == r, "mremap shrink: %s", strerror(errno));
    CHECK(PAGE_WORD(r, 1) == 0x1001u, "after mremap: page 1 reads %#x", PAGE_WORD(r, 1));
    munmap(r, 2 * 4096);
#undef PAGE_WORD
    munmap(p, bo.size);
    close(fd);
    return 0;
}

/* WAIT on jobs whose records are being trimmed, while jobs are submitted. */
/* Lines of the kernel log matching the extended regex pat. */
static int klog_count(const char *pat)
{
    char cmd[256], buf[32] = "";
    FILE *p;

    snprintf(cmd, sizeof(cmd), "dmesg | grep -cE '%s'", pat);
    p = popen(cmd, "r");
    if (!p)
        return -1;
    if (!fgets(buf, sizeof(buf), p))
        buf[0] = 0;
    pclose(p);
    return atoi(buf);
}

/* The last n lines of the kernel log (a static buffer). */
static const char *klog_tail(int n)
{
    static char buf[4096];
    char cmd[64];
    size_t len = 0;
    FILE *p;

    snprintf(cmd, sizeof(cmd), "dmesg | tail -n %d", n);
    buf[0] = 0;
    p = popen(cmd, "r");
    if (!p)
        return buf;
    len = fread(buf, 1, sizeof(buf) - 1, p);
    buf[len] = 0;
    pclose(p);
    return buf;
}

/*
 * Defect 5: SUBMIT trims the oldest job records while WAIT, on the same
 * file, takes a reference on one of them. The race window is a few
 * instructions wide; the driver's fault-injection knob
 * fault_history_delay_us widens it at both ends (with records erased under
 * the file lock it only slows things down), so that a driver with the
 * defect warns (refcount_t: addition on 0) within the run.
 */
#define HISTORY_DELAY "/sys/module/tx8/parameters/fault_history_delay_us"

static int t_history_race(void)
{
    enum { JOBS = 1700 };
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    volatile uint64_t *last;
    uint64_t first, seq = 0;
    struct ctx c;
    pid_t pid;
    size_t len;
    int status;

    int warn0 = klog_count("refcount_t|use-after-free|BUG|WARNING");

    /* the fault-injection knob widens the race window (off by default) */
    CHECK_OK(write_file(HISTORY_DELAY, "200"));
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    len = put_fill(c.cmdmap, bo.dev_addr, 64, 1);
    CHECK_OK(submit(c.fd, c.cmd.handle, 0, len, &ref, 1, &first));
    last = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(last != MAP_FAILED, "shared page");
    last[0] = first;
    last[1] = 0;
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        /* the same file: WAIT right at the edge of the trimmed records */
        for (uint64_t k = 0; !last[1]; k++) {
            uint64_t l = last[0], s = l > first + 1024 ? l - 1024 + k % 6 - 3 : first + k % 4;
            int r;

            memset(&w, 0, sizeof(w));
            w.seqno = s;
            r = xioctl(c.fd, DRM_IOCTL_TX8_WAIT, &w);
            if (r && r != -ETIME && r != -ENOENT && r != -EINVAL)
                _exit(10);
        }
        _exit(0);
    }
    for (int j = 0; j < JOBS; j++) {
        int r = submit(c.fd, c.cmd.handle, 0, len, &ref, 1, &seq);

        if (r) {
            last[1] = 1;
            waitpid(pid, &status, 0);
            write_file(HISTORY_DELAY, "0");
            FAIL("submit %d: %d", j, r);
        }
        last[0] = seq;
    }
    last[1] = 1;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    write_file(HISTORY_DELAY, "0");
    CHECK(klog_count("refcount_t|use-after-free|BUG|WARNING") == warn0,
          "the kernel warned (a WAIT took a reference on a freed job record):\n%s", klog_tail(6));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "waiter: status %#x", status);
    CHECK_OK(wait_job(c.fd, seq, 30000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "last job status %u", w.status);
    CHECK_ERR(wait_job(c.fd, first, 0, &w), ENOENT);
    munmap((void *)last, 4096);
    ctx_close(&c);
    return 0;
}

/*
 * Defect 11: tfile->lock (a plain spinlock, taken with IRQs enabled) must
 * never nest inside the irqsave job_lock. The knob fault_file_lock_delay_us
 * makes every file-lock critical section last 200 us and harvests
 * completions in the completion vector's hard IRQ handler (job_lock in hard
 * IRQ context). One process per CPU holds the file lock over and over
 * (WAIT by number on the file's first job) while the file's jobs complete:
 * a driver that takes the file lock inside job_lock when a job finishes
 * spins in the interrupt on the lock the interrupted WAIT holds, and the
 * guest locks up (both CPUs: the other one spins on job_lock with IRQs
 * off). The test says on the console when it starts, so the host's hang
 * report (scripts/vm/run's time limit, TX8_VM_TIMEOUT) names it; a
 * watchdog process that never touches the device prints FAIL on the
 * console after 20 s without a completed job if a CPU is still alive.
 */
#define FILE_LOCK_DELAY "/sys/module/tx8/parameters/fault_file_lock_delay_us"

static int t_irq_lock_order(void)
{
    enum { JOBS = 600, HAMMERS = 2 };
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    volatile uint64_t *sh;
    pid_t pids[HAMMERS + 1];
    uint64_t first, seq = 0;
    int64_t t0;
    struct ctx c;
    size_t len;
    int status, bad = 0;

    int warn0 = klog_count("BUG|WARNING|lockup|stall");

    sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED, "shared page");
    sh[0] = 0; /* jobs completed */
    sh[1] = 0; /* stop */
    sh[2] = 0; /* file-lock holds (WAITs) */
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    len = put_fill(c.cmdmap, bo.dev_addr, 64, 1);
    CHECK_OK(submit(c.fd, c.cmd.handle, 0, len, &ref, 1, &first));
    CHECK_OK(wait_job(c.fd, first, 30000, &w));
    /* on the console at once: a guest that hangs from here on has the defect */
    {
        int fd = open("/dev/console", O_WRONLY | O_NOCTTY);

        if (fd >= 0) {
            dprintf(fd, "irq_lock_order: started; a guest hang now is issue 9 defect 11 "
                        "(the file lock nested in job_lock)\n");
            close(fd);
        }
    }
    CHECK_OK(write_file(FILE_LOCK_DELAY, "200"));

    /* the watchdog: no device calls, only the shared page and the console */
    pids[0] = fork();
    CHECK(pids[0] >= 0, "fork");
    if (pids[0] == 0) {
        uint64_t seen = 0;
        int still = 0;

        while (!sh[1]) {
            sleep(1);
            if (sh[0] != seen) {
                seen = sh[0];
                still = 0;
            } else if (++still == 20) {
                int fd = open("/dev/console", O_WRONLY | O_NOCTTY);

                dprintf(fd >= 0 ? fd : 2,
                        "FAIL irq_lock_order: no job completed for 20 s (%" PRIu64
                        " done, %" PRIu64 " file-lock holds): the file lock nests in job_lock "
                        "(issue 9 defect 11), the guest is deadlocked\n", seen, sh[2]);
                _exit(1);
            }
        }
        _exit(0);
    }
    for (int i = 0; i < HAMMERS; i++) {
        pids[i + 1] = fork();
        CHECK(pids[i + 1] >= 0, "fork");
        if (pids[i + 1] == 0) {
            cpu_set_t set;

            CPU_ZERO(&set);
            CPU_SET(i, &set);
            sched_setaffinity(0, sizeof(set), &set); /* one per CPU (a 1-CPU guest: ok) */
            while (!sh[1]) {
                int r;

                memset(&w, 0, sizeof(w));
                w.seqno = first; /* finished: WAIT returns at once */
                r = xioctl(c.fd, DRM_IOCTL_TX8_WAIT, &w);
                if (r && r != -ENOENT)
                    _exit(10);
                __atomic_fetch_add(&sh[2], 1, __ATOMIC_RELAXED);
            }
            _exit(0);
        }
    }
    t0 = now_ns();
    for (int j = 0; j < JOBS && !bad; j++) {
        if (submit(c.fd, c.cmd.handle, 0, len, &ref, 1, &seq))
            bad = 1;
        else if (j % 8 == 7 && (wait_job(c.fd, seq, 30000, &w) || w.status != DRM_TX8_STATUS_OK))
            bad = 2;
        else if (j % 8 == 7)
            sh[0] = j + 1;
    }
    sh[1] = 1;
    for (int i = 0; i <= HAMMERS; i++) {
        CHECK(waitpid(pids[i], &status, 0) == pids[i], "waitpid");
        if (!WIFEXITED(status) || WEXITSTATUS(status))
            bad = bad ? bad : 3 + i;
    }
    write_file(FILE_LOCK_DELAY, "0");
    printf("irq_lock_order: %d jobs, %" PRIu64 " file-lock holds in %" PRId64 " ms\n", JOBS, sh[2],
           (now_ns() - t0) / 1000000);
    CHECK(!bad, "jobs or waiters failed (%d)", bad);
    CHECK(sh[2] > 0, "no WAIT held the file lock");
    CHECK(klog_count("BUG|WARNING|lockup|stall") == warn0, "the kernel warned:\n%s", klog_tail(6));
    CHECK_OK(wait_job(c.fd, seq, 30000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "last job status %u", w.status);
    munmap((void *)sh, 4096);
    ctx_close(&c);
    return 0;
}

/* RESET affects only the caller's jobs; a device-wide reset is admin only. */
static int t_reset_scope(void)
{
    struct ctx a, b;
    struct drm_tx8_bo_create ba, bb;
    struct drm_tx8_bo_ref ra, rb;
    struct drm_tx8_reset r;
    struct drm_tx8_wait w;
    uint64_t sa, sb;
    long long resets0;
    char path[320];
    int64_t t0;
    size_t len;
    int status;
    pid_t pid;

    CHECK_OK(ctx_open(&a, dev_index));
    CHECK_OK(ctx_open(&b, dev_index));
    CHECK_OK(bo_new(a.fd, 4096, NULL, &ba));
    CHECK_OK(bo_new(b.fd, 4096, NULL, &bb));
    ra.handle = ba.handle;
    ra.access = DRM_TX8_ACCESS_WRITE;
    rb.handle = bb.handle;
    rb.access = DRM_TX8_ACCESS_WRITE;
    resets0 = sysattr(dev_index, "resets");

    /* A's job runs (slow); B, with no job, resets: A's job is not touched */
    CHECK_OK(inject(a.fd, DRM_TX8_FAULT_SLOW, 1500, 1));
    len = put_fill(a.cmdmap, ba.dev_addr, 4096, 0xa1u);
    CHECK_OK(submit(a.fd, a.cmd.handle, 0, len, &ra, 1, &sa));
    usleep(300000);
    memset(&r, 0, sizeof(r));
    t0 = now_ns();
    CHECK_OK(xioctl(b.fd, DRM_IOCTL_TX8_RESET, &r));
    CHECK(r.aborted == 0, "B's reset aborted %llu", (unsigned long long)r.aborted);
    CHECK(now_ns() - t0 < 1000000000ll, "B's reset took %" PRId64 " ms", (now_ns() - t0) / 1000000);
    CHECK_OK(wait_job(a.fd, sa, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "A's job after B's reset: status %u", w.status);
    CHECK(sysattr(dev_index, "resets") == resets0, "B's reset reset the device (%lld -> %lld)",
          resets0, sysattr(dev_index, "resets"));

    /* B's job queued behind A's running one: B's reset spares A's job */
    CHECK_OK(inject(a.fd, DRM_TX8_FAULT_SLOW, 1500, 1));
    CHECK_OK(submit(a.fd, a.cmd.handle, 0, len, &ra, 1, &sa));
    len = put_fill(b.cmdmap, bb.dev_addr, 4096, 0xb1u);
    CHECK_OK(submit(b.fd, b.cmd.handle, 0, len, &rb, 1, &sb));
    usleep(300000);
    memset(&r, 0, sizeof(r));
    CHECK_OK(xioctl(b.fd, DRM_IOCTL_TX8_RESET, &r));
    CHECK_OK(wait_job(a.fd, sa, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "A's running job after B's reset: status %u", w.status);
    CHECK_OK(wait_job(b.fd, sb, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK || w.status == DRM_TX8_STATUS_ABORTED,
          "B's job after its reset: status %u", w.status);

    /* an unprivileged client may reset itself, not the device */
    snprintf(path, sizeof(path), "%s/reset", sysattr_dir(dev_index));
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        struct drm_tx8_reset rr;

        memset(&rr, 0, sizeof(rr));
        if (setgid(65534) || setuid(65534))
            _exit(10);
        if (write_file(path, "1") == 0)
            _exit(11);
        if (xioctl(b.fd, DRM_IOCTL_TX8_RESET, &rr))
            _exit(12);
        _exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "unprivileged child: status %#x", status);
    /* the admin resets the device */
    resets0 = sysattr(dev_index, "resets");
    CHECK_OK(write_file(path, "1"));
    CHECK(sysattr(dev_index, "resets") == resets0 + 1, "admin reset not counted");
    len = put_fill(b.cmdmap, bb.dev_addr, 4096, 0xb2u);
    CHECK_OK(run_fill(&b, bb.dev_addr, 4096, 0xb2u, &rb, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "after admin reset: status %u", w.status);
    ctx_close(&a);
    ctx_close(&b);
    return 0;
}

/* No job waits for ever on a fence that does not exist or on itself. */
static int t_fence_bounds(void)
{
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    uint32_t empty, sig, shared;
    uint64_t seq;
    struct ctx c;
    int64_t t0;
    size_t len, len0;
    int r, status;
    pid_t pid;

    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    len0 = len = put_fill(c.cmdmap, bo.dev_addr, 4096, 3);

    /* an in-syncobj that never gets a fence: refused after a bounded wait */
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &empty));
    t0 = now_ns();
    r = submit_dep(&c, 0, len, &ref, &empty, 1, 0, &seq);
    if (r == 0) {
        r = wait_job(c.fd, seq, 3000, &w);
        FAIL("a job waiting for a fenceless syncobj was accepted (WAIT: %d)", r);
    }
    CHECK(r == -ETIME, "fenceless in-syncobj: %d, expected -ETIME", r);
    CHECK(now_ns() - t0 < 5000000000ll, "SUBMIT waited %" PRId64 " ms",
          (now_ns() - t0) / 1000000);

    /* the same syncobj in and out: refused */
    CHECK_OK(drmSyncobjCreate(c.fd, DRM_SYNCOBJ_CREATE_SIGNALED, &sig));
    r = submit_dep(&c, 0, len, &ref, &sig, 1, sig, &seq);
    if (r == 0)
        wait_job(c.fd, seq, 3000, &w);
    CHECK(r == -EINVAL, "in == out syncobj: %d, expected -EINVAL", r);
    /* a signalled syncobj as in-fence runs at once */
    CHECK_OK(submit_dep(&c, 0, len, &ref, &sig, 1, 0, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "after signalled in-fence: status %u", w.status);

    /* a fence attached while SUBMIT waits for it (wait-for-submit) */
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &shared));
    /* the child has the file, not the mapping (VM_DONTCOPY) */
    len = put_fill(c.cmdmap + 1024, bo.dev_addr, 4096, 4);
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        uint64_t s;

        usleep(200000);
        _exit(submit_dep(&c, 1024, len, &ref, NULL, 0, shared, &s) ? 1 : 0);
    }
    r = submit_dep(&c, 0, len0, &ref, &shared, 1, 0, &seq);
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
          "producer: status %#x", status);
    CHECK(r == 0, "SUBMIT with a fence attached 200 ms later: %d", r);
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "wait-for-submit job: status %u", w.status);
    drmSyncobjDestroy(c.fd, empty);
    drmSyncobjDestroy(c.fd, sig);
    drmSyncobjDestroy(c.fd, shared);
    ctx_close(&c);
    return 0;
}

/*
 * Unbind while a SUBMIT waits for room on the waiting list: the unplug
 * does not wait for it (it used to, for as long as the job timeout).
 */
static int t_unbind_submit(void)
{
    char addr[64];
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    uint32_t hs;
    uint64_t seq, hung;
    struct ctx c;
    int64_t t0, t1;
    size_t len;
    int status, wstatus[2];
    pid_t pid, wpid[2];

    CHECK_OK(pci_addr(dev_index, addr, sizeof(addr)));
    CHECK_OK(write_file("/sys/module/tx8/parameters/job_timeout_ms", "60000"));
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    len = put_fill(c.cmdmap, bo.dev_addr, 4096, 1);
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &hs));
    CHECK_OK(inject(c.fd, DRM_TX8_FAULT_HANG, 0, 1));
    CHECK_OK(submit_dep(&c, 0, len, &ref, NULL, 0, hs, &hung));
    for (int i = 0; i < 256; i++)
        CHECK_OK(submit_dep(&c, 0, len, &ref, &hs, 1, 0, &seq));
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        int r = submit_dep(&c, 0, len, &ref, &hs, 1, 0, &seq);

        _exit(r == -ENODEV ? 0 : 20 + (r < 0 ? -r : 0) % 100);
    }
    /* and WAITs blocked on the hung job and on the last queued one */
    for (int i = 0; i < 2; i++) {
        wpid[i] = fork();
        CHECK(wpid[i] >= 0, "fork");
        if (wpid[i] == 0) {
            int r = wait_job(c.fd, i ? seq : hung, 60000, &w);

            if (r == -ENODEV || (!r && (w.status == DRM_TX8_STATUS_ABORTED ||
                                        w.status == DRM_TX8_STATUS_DEVICE_ERROR)))
                _exit(0);
            _exit(r ? 20 + -r % 100 : 10 + (int)w.status);
        }
    }
    usleep(500000);
    CHECK(waitpid(pid, &status, WNOHANG) == 0, "the 257th SUBMIT did not block");
    for (int i = 0; i < 2; i++)
        CHECK(waitpid(wpid[i], &wstatus[i], WNOHANG) == 0, "WAIT %d did not block", i);
    t0 = now_ns();
    CHECK_OK(write_file("/sys/bus/pci/drivers/tx8/unbind", addr));
    t1 = now_ns();
    for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; i++)
        usleep(100000);
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k < 50 && waitpid(wpid[i], &wstatus[i], WNOHANG) == 0; k++)
            usleep(100000);
        if (waitpid(wpid[i], &wstatus[i], WNOHANG) == 0) {
            kill(wpid[i], SIGKILL);
            waitpid(wpid[i], &wstatus[i], 0);
        }
    }
    write_file("/sys/module/tx8/parameters/job_timeout_ms", "5000");
    ctx_close(&c);
    CHECK_OK(write_file("/sys/bus/pci/drivers/tx8/bind", addr));
    CHECK_OK(wait_for_node(dev_index, true, 5000));
    CHECK(t1 - t0 < 10000000000ll, "unbind took %" PRId64 " ms", (t1 - t0) / 1000000);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the blocked SUBMIT: status %#x", status);
    for (int i = 0; i < 2; i++)
        CHECK(WIFEXITED(wstatus[i]) && WEXITSTATUS(wstatus[i]) == 0,
              "the WAIT blocked on the %s job: status %#x", i ? "last queued" : "hung", wstatus[i]);
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    CHECK_OK(run_fill(&c, bo.dev_addr, 4096, 1, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "after rebind: status %u", w.status);
    ctx_close(&c);
    return 0;
}

/* A job's fence, exported as a sync_file, outlives its device and file. */
static int sync_file_check(int sf, char *why, size_t size)
{
    struct sync_fence_info fi;
    struct sync_file_info info;

    memset(&info, 0, sizeof(info));
    memset(&fi, 0, sizeof(fi));
    info.num_fences = 1;
    info.sync_fence_info = (uintptr_t)&fi;
    if (ioctl(sf, SYNC_IOC_FILE_INFO, &info)) {
        snprintf(why, size, "SYNC_IOC_FILE_INFO: %s", strerror(errno));
        return -1;
    }
    /* the out-syncobj holds the GPU scheduler's finished fence */
    if (info.status != 1 || fi.status != 1 || strcmp(fi.driver_name, "drm_sched")) {
        snprintf(why, size, "sync_file status %d/%d driver '%.32s'", info.status, fi.status,
                 fi.driver_name);
        return -1;
    }
    return 0;
}

static int t_fence_lifetime(void)
{
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    char addr[64], why[128];
    uint32_t o;
    uint64_t seq;
    struct ctx c;
    int sf = -1;

    CHECK_OK(pci_addr(dev_index, addr, sizeof(addr)));
    /* 1: unbind, with the device's last file closed */
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &o));
    CHECK_OK(submit_dep(&c, 0, put_fill(c.cmdmap, bo.dev_addr, 4096, 1), &ref, NULL, 0, o, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK_OK(drmSyncobjExportSyncFile(c.fd, o, &sf));
    ctx_close(&c);
    CHECK_OK(write_file("/sys/bus/pci/drivers/tx8/unbind", addr));
    CHECK_OK(wait_for_node(dev_index, false, 5000));
    CHECK(sync_file_check(sf, why, sizeof(why)) == 0, "after unbind: %s", why);
    close(sf);
    CHECK_OK(write_file("/sys/bus/pci/drivers/tx8/bind", addr));
    CHECK_OK(wait_for_node(dev_index, true, 5000));

    /* 2: rmmod, with every file closed: the fence holds the module */
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &o));
    CHECK_OK(submit_dep(&c, 0, put_fill(c.cmdmap, bo.dev_addr, 4096, 2), &ref, NULL, 0, o, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK_OK(drmSyncobjExportSyncFile(c.fd, o, &sf));
    ctx_close(&c);
    CHECK(run_cmd("rmmod tx8 2>/dev/null") != 0,
          "rmmod succeeded while a sync_file of a tx8 fence exists");
    CHECK(sync_file_check(sf, why, sizeof(why)) == 0, "after rmmod attempt: %s", why);
    close(sf);
    CHECK(rmmod_when_released("fence_lifetime") == 0,
          "rmmod failed after the sync_file was closed");
    CHECK(run_cmd("modprobe tx8") == 0, "modprobe failed");
    CHECK_OK(wait_for_node(dev_index, true, 5000));
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    CHECK_OK(run_fill(&c, bo.dev_addr, 4096, 1, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "after reload: status %u", w.status);
    ctx_close(&c);
    return 0;
}

/*
 * The out-fence of a job the scheduler never ran (its file closed while
 * it waited for an in-fence: drm_sched kills it) outlives the file in a
 * sync_file: it names the driver's scheduler, so it must keep the module
 * (and the scheduler's memory) until it goes.
 */
static int t_fence_unrun(void)
{
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct sync_file_info info;
    struct drm_tx8_wait w;
    struct pollfd pfd;
    uint32_t o1, o2;
    uint64_t s1, s2;
    struct ctx c;
    int sf = -1, rm;

    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &o1));
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &o2));
    CHECK_OK(slow_producer(&c, 1500, 4096, o1, &s1));
    CHECK_OK(submit_dep(&c, 0, put_fill(c.cmdmap, bo.dev_addr, 4096, 1), &ref, &o1, 1, o2, &s2));
    CHECK_OK(drmSyncobjExportSyncFile(c.fd, o2, &sf));
    ctx_close(&c); /* the second job never runs */
    pfd.fd = sf;
    pfd.events = POLLIN;
    CHECK(poll(&pfd, 1, 20000) == 1, "the never-run job's out-fence did not signal");
    memset(&info, 0, sizeof(info));
    CHECK(ioctl(sf, SYNC_IOC_FILE_INFO, &info) == 0, "SYNC_IOC_FILE_INFO: %s", strerror(errno));
    CHECK(info.status < 0, "the never-run job's out-fence: status %d, expected an error",
          info.status);
    rm = run_cmd("rmmod tx8 2>/dev/null");
    if (rm == 0) {
        /* the defect: the module went; its scheduler's memory with it */
        memset(&info, 0, sizeof(info));
        ioctl(sf, SYNC_IOC_FILE_INFO, &info);
        close(sf);
        run_cmd("modprobe tx8");
        wait_for_node(dev_index, true, 5000);
        FAIL("rmmod succeeded while a sync_file of a never-run tx8 job's fence exists");
    }
    memset(&info, 0, sizeof(info));
    CHECK(ioctl(sf, SYNC_IOC_FILE_INFO, &info) == 0 && info.status < 0,
          "SYNC_IOC_FILE_INFO after the rmmod attempt: %s, status %d", strerror(errno),
          info.status);
    close(sf);
    CHECK(rmmod_when_released("fence_unrun") == 0, "rmmod failed after the sync_file was closed");
    CHECK(run_cmd("modprobe tx8") == 0, "modprobe failed");
    CHECK_OK(wait_for_node(dev_index, true, 5000));
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    CHECK_OK(run_fill(&c, bo.dev_addr, 4096, 1, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "after reload: status %u", w.status);
    ctx_close(&c);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* A misbehaving device (tx8-emu fault injection, interface 1.2)             */

/* The kernel log has a line containing s (since boot). */
static int klog_has(const char *s)
{
    char cmd[256];

    snprintf(cmd, sizeof(cmd), "dmesg | grep -q -- '%s'", s);
    return run_cmd(cmd) == 0;
}

static int rebind_ok(const char *addr)
{
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    struct ctx c;

    if (write_file("/sys/bus/pci/drivers/tx8/bind", addr) || wait_for_node(dev_index, true, 5000))
        return -1;
    if (ctx_open(&c, dev_index))
        return -2;
    if (bo_new(c.fd, 4096, NULL, &bo))
        return -3;
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    if (run_fill(&c, bo.dev_addr, 4096, 1, &ref, 1, &w) || w.status != DRM_TX8_STATUS_OK)
        return -4;
    ctx_close(&c);
    return 0;
}

/* Capabilities the device scribbles over later are never read again. */
static int t_dev_bad_caps(void)
{
    struct drm_tx8_device_info info0, info;
    struct drm_tx8_query q = {.query = DRM_TX8_QUERY_DEVICE, .size = sizeof(info)};
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    char addr[64];
    struct ctx c;
    int64_t t0;
    int r;

    CHECK_OK(pci_addr(dev_index, addr, sizeof(addr)));
    CHECK_OK(ctx_open(&c, dev_index));
    q.data = (uintptr_t)&info0;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_QUERY, &q));
    t0 = now_ns();
    CHECK_OK(inject(c.fd, DRM_TX8_FAULT_BAD_CAPS, 4000, 1));
    q.data = (uintptr_t)&info;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_QUERY, &q));
    if (info.mem_size != info0.mem_size || info.num_cores != info0.num_cores ||
        info.max_bos != info0.max_bos || info.max_cmd_size != info0.max_cmd_size) {
        /* leave the device as it was for the next tests, then fail */
        ctx_close(&c);
        while (now_ns() - t0 < 4500000000ll)
            usleep(100000);
        FAIL("QUERY follows the corrupted capabilities: mem_size %" PRIu64 " cores %u max_bos %u",
             info.mem_size, info.num_cores, info.max_bos);
    }
    CHECK_OK(bo_new(c.fd, 8192, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    CHECK_OK(run_fill(&c, bo.dev_addr, 8192, 1, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "job with corrupted caps: status %u", w.status);
    ctx_close(&c);
    /* a new probe sees them and refuses the device, clearly */
    CHECK_OK(write_file("/sys/bus/pci/drivers/tx8/unbind", addr));
    CHECK_OK(wait_for_node(dev_index, false, 5000));
    r = write_file("/sys/bus/pci/drivers/tx8/bind", addr);
    CHECK(r != 0, "bind with corrupted capabilities succeeded");
    CHECK(klog_has("control block inconsistent"), "no clear message in the kernel log");
    while (now_ns() - t0 < 4500000000ll)
        usleep(100000);
    r = rebind_ok(addr);
    CHECK(r == 0, "after the capabilities were restored: %d", r);
    return 0;
}

/* A lease the device places outside its memory (base + size wraps). */
static int t_dev_bad_lease(void)
{
    char addr[64];
    struct ctx c;
    int r;

    CHECK_OK(pci_addr(dev_index, addr, sizeof(addr)));
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(inject(c.fd, DRM_TX8_FAULT_BAD_LEASE, 0, 1));
    ctx_close(&c);
    CHECK_OK(write_file("/sys/bus/pci/drivers/tx8/unbind", addr));
    CHECK_OK(wait_for_node(dev_index, false, 5000));
    r = write_file("/sys/bus/pci/drivers/tx8/bind", addr);
    if (r == 0) {
        /* do not touch it: an old driver would memset outside the BAR */
        write_file("/sys/bus/pci/drivers/tx8/unbind", addr);
        rebind_ok(addr);
        FAIL("the driver took a lease outside the device memory");
    }
    CHECK(klog_has("device leased a bad range"), "no clear message in the kernel log");
    r = rebind_ok(addr);
    CHECK(r == 0, "after a good lease: %d", r);
    return 0;
}

/* Completion records with a wrong seqno and a tail far ahead. */
static int t_dev_bad_record(void)
{
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    uint64_t seq;
    struct ctx c;
    size_t len;

    CHECK_OK(write_file("/sys/module/tx8/parameters/job_timeout_ms", "1500"));
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    CHECK_OK(inject(c.fd, DRM_TX8_FAULT_BAD_RECORD, 0, 1));
    len = put_fill(c.cmdmap, bo.dev_addr, 4096, 1);
    CHECK_OK(submit(c.fd, c.cmd.handle, 0, len, &ref, 1, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_TIMEOUT, "job without its record: status %u", w.status);
    CHECK_OK(run_fill(&c, bo.dev_addr, 4096, 2, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "after bad records: status %u", w.status);
    write_file("/sys/module/tx8/parameters/job_timeout_ms", "5000");
    ctx_close(&c);
    return 0;
}

/* A device that restarts (new boot_id) or stops answering is lost. */
static int lost_checks(struct ctx *c, const char *what)
{
    struct drm_tx8_bo_create bo;

    CHECK_ERR(bo_new(c->fd, 4096, NULL, &bo), EIO);
    CHECK_ERR(submit(c->fd, c->cmd.handle, 0, sizeof(struct tx8_cmd_fill), NULL, 0, NULL), EIO);
    (void)what;
    return 0;
}

static int t_dev_restart(void)
{
    struct drm_tx8_bo_create bo;
    volatile uint32_t *p;
    char addr[64];
    struct ctx c;
    char hw[400];
    long long e0, e1;
    int ue, r, sig;

    CHECK_OK(pci_addr(dev_index, addr, sizeof(addr)));
    /* the energy read through hwmon before the restart */
    CHECK_OK(hwmon_dir(dev_index, hw, sizeof(hw)));
    e0 = hwmon_value(hw, "energy1_input");
    CHECK(e0 > 0, "energy1_input %lld", e0);
    ue = uevent_socket();
    CHECK(ue >= 0, "uevent socket");
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    p = bo_map(c.fd, &bo);
    CHECK(p, "mmap");
    p[0] = 1;
    CHECK_OK(inject(c.fd, DRM_TX8_FAULT_RESTART, 0, 1));
    CHECK(uevent_seen(ue, "WEDGED=rebind", 3000), "no wedged uevent after a device restart");
    if (lost_checks(&c, "restart"))
        return 1;
    /* the memory may be another peer's now: the mapping is gone */
    signal(SIGBUS, on_sigbus);
    signal(SIGSEGV, on_sigbus);
    sig = sigsetjmp(segv_jmp, 1);
    if (sig == 0) {
        (void)p[1];
        FAIL("mapping still usable after the device restarted");
    }
    signal(SIGBUS, SIG_DFL);
    signal(SIGSEGV, SIG_DFL);
    CHECK(klog_has("device restarted"), "no clear message in the kernel log");
    munmap((void *)p, bo.size);
    ctx_close(&c);
    close(ue);
    CHECK_OK(write_file("/sys/bus/pci/drivers/tx8/unbind", addr));
    CHECK_OK(wait_for_node(dev_index, false, 5000));
    r = rebind_ok(addr);
    CHECK(r == 0, "rebind after the restart: %d", r);
    /* the restarted device's energy counter went on (hwmon's rule: never
     * backwards), and the new hwmon device reads it */
    CHECK_OK(hwmon_dir(dev_index, hw, sizeof(hw)));
    e1 = hwmon_value(hw, "energy1_input");
    CHECK(e1 >= e0, "energy1_input %lld before the device restart, %lld after", e0, e1);
    return 0;
}

static int t_dev_stop(void)
{
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    char addr[64];
    uint64_t seq;
    struct ctx c;
    int64_t t0;
    size_t len;
    int ue, r;

    CHECK_OK(pci_addr(dev_index, addr, sizeof(addr)));
    ue = uevent_socket();
    CHECK(ue >= 0, "uevent socket");
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    t0 = now_ns();
    CHECK_OK(inject(c.fd, DRM_TX8_FAULT_STOP, 7000, 1));
    len = put_fill(c.cmdmap, bo.dev_addr, 4096, 1);
    CHECK_OK(submit(c.fd, c.cmd.handle, 0, len, &ref, 1, &seq));
    /* the heartbeat stops: the job fails well before the device wakes */
    CHECK_OK(wait_job(c.fd, seq, 6000, &w));
    CHECK(w.status == DRM_TX8_STATUS_DEVICE_ERROR, "job on a silent device: status %u", w.status);
    CHECK(now_ns() - t0 < 6000000000ll, "took %" PRId64 " ms", (now_ns() - t0) / 1000000);
    CHECK(uevent_seen(ue, "WEDGED=rebind", 3000), "no wedged uevent");
    if (lost_checks(&c, "stop"))
        return 1;
    CHECK(klog_has("heartbeat stopped"), "no clear message in the kernel log");
    ctx_close(&c);
    close(ue);
    while (now_ns() - t0 < 7500000000ll)
        usleep(100000);
    CHECK_OK(write_file("/sys/bus/pci/drivers/tx8/unbind", addr));
    CHECK_OK(wait_for_node(dev_index, false, 5000));
    r = rebind_ok(addr);
    CHECK(r == 0, "rebind after the device woke up: %d", r);
    return 0;
}

/* A job the device takes just before a reset is not run again. */
static int t_reset_taken(void)
{
    struct drm_tx8_counters k0, k1;
    struct drm_tx8_query q = {.query = DRM_TX8_QUERY_COUNTERS, .size = sizeof(k0)};
    struct ctx a, b;
    struct drm_tx8_bo_create ba, bb;
    struct drm_tx8_bo_ref ra, rb;
    struct drm_tx8_wait w;
    uint64_t sa, sb;
    char path[320];
    size_t len;

    CHECK_OK(ctx_open(&a, dev_index));
    CHECK_OK(ctx_open(&b, dev_index));
    CHECK_OK(bo_new(a.fd, 4096, NULL, &ba));
    CHECK_OK(bo_new(b.fd, 4096, NULL, &bb));
    ra.handle = ba.handle;
    ra.access = DRM_TX8_ACCESS_WRITE;
    rb.handle = bb.handle;
    rb.access = DRM_TX8_ACCESS_WRITE;
    q.data = (uintptr_t)&k0;
    CHECK_OK(xioctl(a.fd, DRM_IOCTL_TX8_QUERY, &q));
    /* A's job hangs, B's waits in the ring behind it */
    CHECK_OK(inject(a.fd, DRM_TX8_FAULT_HANG, 0, 1));
    len = put_fill(a.cmdmap, ba.dev_addr, 4096, 0xa1u);
    CHECK_OK(submit(a.fd, a.cmd.handle, 0, len, &ra, 1, &sa));
    len = put_fill(b.cmdmap, bb.dev_addr, 4096, 0xb1u);
    CHECK_OK(submit(b.fd, b.cmd.handle, 0, len, &rb, 1, &sb));
    usleep(300000);
    /* the device takes (and runs) B's job as the reset arrives */
    CHECK_OK(inject(a.fd, DRM_TX8_FAULT_TAKE_ON_RESET, 0, 1));
    snprintf(path, sizeof(path), "%s/reset", sysattr_dir(dev_index));
    CHECK_OK(write_file(path, "1"));
    CHECK_OK(wait_job(a.fd, sa, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_ABORTED, "hung job: status %u", w.status);
    CHECK_OK(wait_job(b.fd, sb, 20000, &w));
    q.data = (uintptr_t)&k1;
    CHECK_OK(xioctl(a.fd, DRM_IOCTL_TX8_QUERY, &q));
    CHECK(k1.jobs_submitted - k0.jobs_submitted == 2,
          "the device took %llu descriptors for 2 jobs: a job ran twice (B's status %u)",
          (unsigned long long)(k1.jobs_submitted - k0.jobs_submitted), w.status);
    CHECK(w.status == DRM_TX8_STATUS_ABORTED, "B's job, taken at the reset: status %u", w.status);
    ctx_close(&a);
    ctx_close(&b);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Hostile-client fuzzer                                                     */

/*
 * Two unprivileged processes issue random sequences of every ioctl with
 * random and bit-flipped arguments, mmap variants (MAP_PRIVATE, partial
 * munmap, mprotect, mremap, fork with mappings), syncobj graphs with
 * cycles, and close files at random points. Fixed seed, bounded number of
 * operations (TX8_FUZZ_OPS, default 20000 per process) and time (150 s).
 * Then a normal client must still be served and no device memory leak.
 * run-suite checks the kernel log afterwards.
 */
enum { FZ_FDS = 4, FZ_BOS = 48, FZ_SYNCS = 32, FZ_MAPS = 24 };

struct fz_bo {
    int fd; /* index into fds, -1 when free */
    uint32_t handle;
    uint64_t size, offset, addr;
};

struct fz_map {
    uint8_t *p;
    size_t len;
};

struct fz {
    uint64_t rng;
    int fds[FZ_FDS];
    struct fz_bo bos[FZ_BOS];
    struct {
        int fd;
        uint32_t handle;
    } syncs[FZ_SYNCS];
    struct fz_map maps[FZ_MAPS];
    uint64_t last_seq[FZ_FDS];
    uint64_t ops, ok, err;
    char path[64];
};

static uint64_t fz_rand(struct fz *f)
{
    f->rng ^= f->rng << 13;
    f->rng ^= f->rng >> 7;
    f->rng ^= f->rng << 17;
    return f->rng;
}

static unsigned fz_below(struct fz *f, unsigned n)
{
    return n ? (unsigned)(fz_rand(f) % n) : 0;
}

/* With probability 1/3 flip 1..3 random bits of the argument struct. */
static void fz_flip(struct fz *f, void *arg, size_t size)
{
    if (fz_below(f, 3))
        return;
    for (unsigned i = 0, n = 1 + fz_below(f, 3); i < n; i++)
        ((uint8_t *)arg)[fz_below(f, (unsigned)size)] ^= (uint8_t)(1u << fz_below(f, 8));
}

static int fz_fd(struct fz *f)
{
    unsigned i = fz_below(f, FZ_FDS);

    for (unsigned k = 0; k < FZ_FDS; k++)
        if (f->fds[(i + k) % FZ_FDS] >= 0)
            return (int)((i + k) % FZ_FDS);
    return -1;
}

static struct fz_bo *fz_bo(struct fz *f, int fdi)
{
    unsigned i = fz_below(f, FZ_BOS);

    for (unsigned k = 0; k < FZ_BOS; k++) {
        struct fz_bo *b = &f->bos[(i + k) % FZ_BOS];

        if (b->fd >= 0 && (fdi < 0 || b->fd == fdi))
            return b;
    }
    return NULL;
}

static uint32_t fz_sync(struct fz *f, int fdi)
{
    unsigned i = fz_below(f, FZ_SYNCS);

    for (unsigned k = 0; k < FZ_SYNCS; k++)
        if (f->syncs[(i + k) % FZ_SYNCS].fd == fdi)
            return f->syncs[(i + k) % FZ_SYNCS].handle;
    return fz_below(f, 4) ? 0 : (uint32_t)fz_rand(f);
}

static void fz_result(struct fz *f, int r)
{
    f->ops++;
    if (r)
        f->err++;
    else
        f->ok++;
}

/* Read or write a byte of a mapping; SIGBUS/SIGSEGV are expected outcomes. */
static void fz_touch(struct fz *f, struct fz_map *m)
{
    volatile uint8_t *volatile p;

    if (!m->p)
        return;
    p = m->p + fz_below(f, (unsigned)m->len);
    signal(SIGBUS, on_sigbus);
    signal(SIGSEGV, on_sigbus);
    if (sigsetjmp(segv_jmp, 1) == 0) {
        if (fz_below(f, 2))
            *p = (uint8_t)fz_rand(f);
        else
            (void)*p;
    }
    signal(SIGBUS, SIG_DFL);
    signal(SIGSEGV, SIG_DFL);
}

static void fz_close_fd(struct fz *f, int i)
{
    close(f->fds[i]);
    f->fds[i] = -1;
    for (int k = 0; k < FZ_BOS; k++)
        if (f->bos[k].fd == i)
            f->bos[k].fd = -1;
    for (int k = 0; k < FZ_SYNCS; k++)
        if (f->syncs[k].fd == i)
            f->syncs[k].fd = -1;
}

static void fz_submit(struct fz *f, int fdi)
{
    struct drm_tx8_bo_ref refs[4];
    struct drm_tx8_submit s;
    struct fz_bo *cmd = fz_bo(f, fdi), *b;
    uint32_t in[4];
    unsigned n = fz_below(f, 4);
    int r;

    if (!cmd)
        return;
    memset(&s, 0, sizeof(s));
    s.cmd_handle = cmd->handle;
    s.cmd_offset = fz_below(f, 4) ? 0 : 8u * fz_below(f, 64);
    s.cmd_size = fz_below(f, 8) ? sizeof(struct tx8_cmd_fill) : 8u * (1 + fz_below(f, 512));
    for (unsigned i = 0; i < n; i++) {
        b = fz_bo(f, fdi);
        refs[i].handle = b ? b->handle : (uint32_t)fz_rand(f);
        refs[i].access = 1 + fz_below(f, 3);
    }
    s.bos = (uintptr_t)refs;
    s.bo_count = n;
    s.bo_stride = sizeof(refs[0]);
    n = fz_below(f, 4);
    for (unsigned i = 0; i < n; i++)
        in[i] = fz_sync(f, fdi);
    s.in_syncobjs = (uintptr_t)in;
    s.in_syncobj_count = n;
    s.out_syncobj = fz_below(f, 2) ? fz_sync(f, fdi) : 0;
    s.user_data = fz_rand(f);
    /* bounded: a deadline soon, rarely none (an in-syncobj without a fence costs 1 s) */
    s.timeout_ns = fz_below(f, 500) ? (uint64_t)(now_ns() + 20000000ll) : 0;
    fz_flip(f, &s, sizeof(s));
    r = xioctl(f->fds[fdi], DRM_IOCTL_TX8_SUBMIT, &s);
    if (!r)
        f->last_seq[fdi] = s.seqno;
    fz_result(f, r);
}

static void fz_one(struct fz *f)
{
    int fdi = fz_fd(f), r = 0;
    struct fz_bo *b;
    struct fz_map *m = &f->maps[fz_below(f, FZ_MAPS)];
    unsigned op = fz_below(f, 22);

    if (fdi < 0)
        op = 0;
    switch (op) {
    case 0: /* open */
        for (int i = 0; i < FZ_FDS; i++) {
            if (f->fds[i] < 0) {
                f->fds[i] = open(f->path, O_RDWR | O_CLOEXEC);
                fz_result(f, f->fds[i] < 0);
                break;
            }
        }
        break;
    case 1: /* close at a random point */
        if (!fz_below(f, 4))
            fz_close_fd(f, fdi);
        break;
    case 2:
    case 3: { /* BO_CREATE */
        static const uint64_t sizes[] = {4096, 8192, 65536, 1 << 20, 0, 1ull << 62, 4097, 3 << 20};
        struct drm_tx8_bo_create c;

        memset(&c, 0, sizeof(c));
        c.size = sizes[fz_below(f, 8)];
        snprintf(c.label, sizeof(c.label), "fz%u", fz_below(f, 1000));
        fz_flip(f, &c, sizeof(c));
        r = xioctl(f->fds[fdi], DRM_IOCTL_TX8_BO_CREATE, &c);
        fz_result(f, r);
        if (!r) {
            struct fz_bo *slot = NULL;

            for (int i = 0; i < FZ_BOS && !slot; i++)
                if (f->bos[i].fd < 0)
                    slot = &f->bos[i];
            if (!slot) {
                bo_close(f->fds[fdi], c.handle);
                break;
            }
            slot->fd = fdi;
            slot->handle = c.handle;
            slot->size = c.size;
            slot->offset = c.mmap_offset;
            slot->addr = c.dev_addr;
        }
        break;
    }
    case 4: /* GEM_CLOSE */
        b = fz_bo(f, fdi);
        fz_result(f, bo_close(f->fds[fdi], b && fz_below(f, 4) ? b->handle : (uint32_t)fz_rand(f)));
        if (b && !fz_below(f, 2))
            b->fd = -1;
        break;
    case 5: { /* BO_INFO, SET_LABEL */
        struct drm_tx8_bo_set_label l;
        struct drm_tx8_bo_info i;

        b = fz_bo(f, fdi);
        memset(&i, 0, sizeof(i));
        i.handle = b ? b->handle : (uint32_t)fz_rand(f);
        fz_flip(f, &i, sizeof(i));
        fz_result(f, xioctl(f->fds[fdi], DRM_IOCTL_TX8_BO_INFO, &i));
        memset(&l, 0, sizeof(l));
        l.handle = b ? b->handle : (uint32_t)fz_rand(f);
        snprintf(l.label, sizeof(l.label), "fz-label %u", fz_below(f, 100));
        fz_flip(f, &l, sizeof(l));
        fz_result(f, xioctl(f->fds[fdi], DRM_IOCTL_TX8_BO_SET_LABEL, &l));
        break;
    }
    case 6:
    case 7: { /* mmap variants */
        static const int flags[] = {MAP_SHARED, MAP_SHARED, MAP_PRIVATE, MAP_SHARED | MAP_FIXED};
        int fl = flags[fz_below(f, 4)];
        size_t len;
        off_t off;
        void *p;

        b = fz_bo(f, fdi);
        if (!b || m->p)
            break;
        len = (size_t)b->size - (fz_below(f, 3) ? 0 : 4096);
        if (!len || !fz_below(f, 8))
            len = (size_t)b->size + 4096;
        off = (off_t)b->offset + (fz_below(f, 8) ? 0 : 4096);
        if (fl & MAP_FIXED)
            fl = MAP_SHARED; /* never over our own memory */
        p = mmap(NULL, len, fz_below(f, 4) ? PROT_READ | PROT_WRITE : PROT_READ, fl,
                 f->fds[fdi], off);
        fz_result(f, p == MAP_FAILED);
        if (p != MAP_FAILED) {
            m->p = p;
            m->len = len;
        }
        break;
    }
    case 8:
    case 9: /* touch */
        fz_touch(f, m);
        break;
    case 10: /* partial or full munmap */
        if (!m->p)
            break;
        if (m->len > 4096 && fz_below(f, 2)) {
            if (fz_below(f, 2)) {
                munmap(m->p, 4096);
                m->p += 4096;
            } else {
                munmap(m->p + m->len - 4096, 4096);
            }
            m->len -= 4096;
        } else {
            munmap(m->p, m->len);
            m->p = NULL;
        }
        break;
    case 11: /* mprotect a page */
        if (m->p)
            fz_result(f, mprotect(m->p + 4096 * fz_below(f, (unsigned)(m->len / 4096)), 4096,
                                  fz_below(f, 2) ? PROT_READ : PROT_NONE));
        fz_touch(f, m);
        break;
    case 12: { /* mremap: shrink, grow, move */
        void *p;
        size_t nl;

        if (!m->p)
            break;
        nl = fz_below(f, 2) && m->len > 4096 ? m->len - 4096 : m->len + 4096;
        p = mremap(m->p, m->len, nl, fz_below(f, 2) ? MREMAP_MAYMOVE : 0);
        fz_result(f, p == MAP_FAILED);
        if (p != MAP_FAILED) {
            m->p = p;
            m->len = nl;
        }
        fz_touch(f, m);
        break;
    }
    case 13: { /* fork with mappings (not inherited: VM_DONTCOPY) */
        pid_t pid = fork();
        int st;

        if (pid == 0) {
            struct drm_tx8_reset rr = {0};

            fz_touch(f, m);
            xioctl(f->fds[fdi], DRM_IOCTL_TX8_RESET, &rr);
            _exit(0);
        }
        if (pid > 0)
            waitpid(pid, &st, 0);
        break;
    }
    case 14: { /* syncobjs */
        uint32_t h = 0;
        int slot = (int)fz_below(f, FZ_SYNCS);

        switch (fz_below(f, 4)) {
        case 0:
            if (f->syncs[slot].fd >= 0 && f->fds[f->syncs[slot].fd] >= 0)
                drmSyncobjDestroy(f->fds[f->syncs[slot].fd], f->syncs[slot].handle);
            r = drmSyncobjCreate(f->fds[fdi], fz_below(f, 2) ? DRM_SYNCOBJ_CREATE_SIGNALED : 0,
                                 &h);
            f->syncs[slot].fd = r ? -1 : fdi;
            f->syncs[slot].handle = h;
            break;
        case 1:
            h = fz_sync(f, fdi);
            r = drmSyncobjSignal(f->fds[fdi], &h, 1);
            break;
        case 2:
            h = fz_sync(f, fdi);
            r = drmSyncobjReset(f->fds[fdi], &h, 1);
            break;
        default: {
            int sf = -1;

            h = fz_sync(f, fdi);
            r = drmSyncobjExportSyncFile(f->fds[fdi], h, &sf);
            if (!r) {
                uint32_t h2 = fz_sync(f, fdi);

                drmSyncobjImportSyncFile(f->fds[fdi], h2, sf);
                close(sf);
            }
        }
        }
        fz_result(f, r);
        break;
    }
    case 15:
    case 16: /* SUBMIT */
        fz_submit(f, fdi);
        break;
    case 17: { /* a syncobj cycle: A in s1 out s2, B in s2 out s1 */
        uint32_t s1 = fz_sync(f, fdi), s2 = fz_sync(f, fdi);
        struct drm_tx8_submit s;

        b = fz_bo(f, fdi);
        if (!b)
            break;
        for (int k = 0; k < 2; k++) {
            memset(&s, 0, sizeof(s));
            s.cmd_handle = b->handle;
            s.cmd_size = 64;
            s.in_syncobjs = (uintptr_t)(k ? &s2 : &s1);
            s.in_syncobj_count = 1;
            s.out_syncobj = k ? s1 : s2;
            s.timeout_ns = (uint64_t)(now_ns() + 20000000ll);
            fz_result(f, xioctl(f->fds[fdi], DRM_IOCTL_TX8_SUBMIT, &s));
        }
        break;
    }
    case 18: { /* WAIT, bounded */
        struct drm_tx8_wait w;

        memset(&w, 0, sizeof(w));
        w.seqno = f->last_seq[fdi] - fz_below(f, 8) + fz_below(f, 3);
        if (!fz_below(f, 4)) {
            b = fz_bo(f, fdi);
            w.handle = b ? b->handle : (uint32_t)fz_rand(f);
        }
        fz_flip(f, &w, sizeof(w));
        w.timeout_ns = fz_below(f, 2) ? 0 : (uint64_t)(now_ns() + 20000000ll);
        fz_result(f, xioctl(f->fds[fdi], DRM_IOCTL_TX8_WAIT, &w));
        break;
    }
    case 19: { /* QUERY, RESET, INJECT_FAULT (refused: not admin) */
        static uint8_t buf[8192];
        struct drm_tx8_query q;
        struct drm_tx8_reset rr;
        struct drm_tx8_inject_fault fi;

        memset(&q, 0, sizeof(q));
        q.query = fz_below(f, 3);
        q.size = fz_below(f, 2) ? 4096 : (uint32_t)fz_rand(f) % 8192;
        q.data = fz_below(f, 8) ? (uintptr_t)buf : (uintptr_t)fz_rand(f);
        fz_flip(f, &q, sizeof(q));
        fz_result(f, xioctl(f->fds[fdi], DRM_IOCTL_TX8_QUERY, &q));
        if (!fz_below(f, 8)) {
            memset(&rr, 0, sizeof(rr));
            fz_flip(f, &rr, sizeof(rr));
            fz_result(f, xioctl(f->fds[fdi], DRM_IOCTL_TX8_RESET, &rr));
        }
        memset(&fi, 0, sizeof(fi));
        fi.kind = fz_below(f, 12);
        r = xioctl(f->fds[fdi], DRM_IOCTL_TX8_INJECT_FAULT, &fi);
        if (r == 0)
            f->err += 1000000; /* an unprivileged client injected a fault */
        break;
    }
    case 20: { /* a raw ioctl of the driver's range with random bytes */
        static uint8_t buf[4096];
        unsigned nr = DRM_COMMAND_BASE + fz_below(f, 12), size = 8 * fz_below(f, 40);
        unsigned long req;

        for (unsigned i = 0; i < size; i++)
            buf[i] = (uint8_t)fz_rand(f);
        req = _IOC(fz_below(f, 4), DRM_IOCTL_BASE, nr, size);
        /* INJECT_FAULT is refused anyway; keep the ring of this test quiet */
        fz_result(f, xioctl(f->fds[fdi], req, buf));
        break;
    }
    default: /* fill the command BO through a mapping, if any */
        if (m->p && m->len >= 64) {
            signal(SIGBUS, on_sigbus);
            signal(SIGSEGV, on_sigbus);
            if (sigsetjmp(segv_jmp, 1) == 0) {
                b = fz_bo(f, fdi);
                if (fz_below(f, 2) && b)
                    put_fill(m->p, b->addr, fz_below(f, 2) ? 4096 : b->size + 4096, 7);
                else
                    memset(m->p, (int)fz_rand(f), 64);
            }
            signal(SIGBUS, SIG_DFL);
            signal(SIGSEGV, SIG_DFL);
        }
        break;
    }
}

static int fz_run(int idx, uint64_t seed, uint64_t ops)
{
    struct fz f;
    int64_t end = now_ns() + 150000000000ll;

    memset(&f, 0, sizeof(f));
    f.rng = seed * 0x9e3779b97f4a7c15ull + (uint64_t)idx + 1;
    snprintf(f.path, sizeof(f.path), "/dev/accel/accel%d", dev_index);
    for (int i = 0; i < FZ_FDS; i++)
        f.fds[i] = -1;
    for (int i = 0; i < FZ_BOS; i++)
        f.bos[i].fd = -1;
    for (int i = 0; i < FZ_SYNCS; i++)
        f.syncs[i].fd = -1;
    while (f.ops < ops && now_ns() < end)
        fz_one(&f);
    printf("fuzz: process %d: %" PRIu64 " operations, %" PRIu64 " succeeded, %" PRIu64
           " refused\n",
           idx, f.ops, f.ok, f.err);
    if (f.err >= 1000000)
        return 3; /* an unprivileged client injected a fault */
    /* a fuzzer whose every call fails tests nothing */
    return f.ok * 10 < f.ops ? 4 : 0;
}

static int t_fuzz(void)
{
    const char *e = getenv("TX8_FUZZ_OPS");
    uint64_t ops = e ? strtoull(e, NULL, 0) : 20000, seed = 20261201;
    long long used0 = sysattr(dev_index, "mem_used");
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    struct stat st;
    char path[64];
    pid_t pids[2];
    struct ctx c;
    int status;

    snprintf(path, sizeof(path), "/dev/accel/accel%d", dev_index);
    CHECK(stat(path, &st) == 0, "stat %s", path);
    /* unprivileged clients: the node is opened to everyone meanwhile */
    CHECK(chmod(path, 0666) == 0, "chmod");
    fflush(stdout);
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            if (setgid(65534) || setuid(65534))
                _exit(10);
            _exit(fz_run(i, seed, ops));
        }
    }
    for (int i = 0; i < 2; i++) {
        if (pids[i] < 0 || waitpid(pids[i], &status, 0) != pids[i]) {
            chmod(path, st.st_mode & 07777);
            FAIL("fuzzer %d: fork/waitpid", i);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status)) {
            chmod(path, st.st_mode & 07777);
            FAIL("fuzzer %d: status %#x", i, status);
        }
    }
    chmod(path, st.st_mode & 07777);
    /* the device still serves a normal client, and nothing leaked */
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    CHECK_OK(run_fill(&c, bo.dev_addr, 4096, 1, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "after the fuzzer: status %u", w.status);
    ctx_close(&c);
    for (int i = 0; i < 50 && sysattr(dev_index, "mem_used") != used0; i++)
        usleep(100000);
    CHECK(sysattr(dev_index, "mem_used") == used0, "device memory leaked: %lld bytes used, was %lld",
          sysattr(dev_index, "mem_used"), used0);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Implicit sync and the smaller items (issue 9, 12 and 13)                  */

/*
 * WAIT on a BO waits for every job using it (dma_resv), not only the last:
 * here the last one fails unrun at once while an earlier one still runs.
 */
static int t_bo_wait_resv(void)
{
    struct drm_tx8_bo_create x;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    uint32_t sf;
    uint64_t sa, sb, s0;
    struct ctx c;
    size_t len;

    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &x));
    ref.handle = x.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    /* a failed fence */
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &sf));
    memset(c.cmdmap + 1024, 0xff, 64);
    CHECK_OK(submit_dep(&c, 1024, 64, &ref, NULL, 0, sf, &s0));
    CHECK_OK(wait_job(c.fd, s0, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_INVALID_CMD, "garbage: status %u", w.status);
    /* A writes X slowly; B uses X and fails at once (failed in-fence) */
    CHECK_OK(inject(c.fd, DRM_TX8_FAULT_SLOW, 1500, 1));
    len = put_fill(c.cmdmap, x.dev_addr, 4096, 0xa5u);
    CHECK_OK(submit_dep(&c, 0, len, &ref, NULL, 0, 0, &sa));
    ref.access = DRM_TX8_ACCESS_READ;
    CHECK_OK(submit_dep(&c, 0, len, &ref, &sf, 1, 0, &sb));
    CHECK_OK(wait_job(c.fd, sb, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_ABORTED, "B: status %u", w.status);
    CHECK_ERR(wait_job(c.fd, sa, 0, &w), ETIME);
    /* WAIT on X returns only when A is done too */
    memset(&w, 0, sizeof(w));
    w.handle = x.handle;
    w.timeout_ns = now_ns() + 20000000000ll;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_WAIT, &w));
    CHECK(wait_job(c.fd, sa, 0, &w) == 0, "WAIT on the BO returned while job A still wrote it");
    CHECK(w.status == DRM_TX8_STATUS_OK, "A: status %u", w.status);
    /* a poll on an idle BO */
    memset(&w, 0, sizeof(w));
    w.handle = x.handle;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_WAIT, &w));
    drmSyncobjDestroy(c.fd, sf);
    ctx_close(&c);
    return 0;
}

/* /proc/tx_meminfo: labels never pass for fixed keys; others' are hidden. */
static int t_meminfo_keys(void)
{
    static char text[65536];
    static const char *const tricky[] = {"Total", "DeviceTotal", "accel7_Total", "Label_x",
                                         "Buffers"};
    struct drm_tx8_bo_create bo;
    long long total, dtotal;
    char key[96];
    int fd = dev_open(dev_index), status;
    pid_t pid;

    CHECK(fd >= 0, "open");
    for (size_t i = 0; i < sizeof(tricky) / sizeof(tricky[0]); i++)
        CHECK_OK(bo_new(fd, 8192, tricky[i], &bo));
    CHECK(read_file("/proc/tx_meminfo", text, sizeof(text)) > 0, "read");
    dtotal = meminfo_value(text, "DeviceTotal");
    snprintf(key, sizeof(key), "accel%d_Total", dev_index);
    total = meminfo_value(text, key);
    CHECK(total > 8, "%s %lld: a label took the key", key, total);
    CHECK(dtotal >= total, "DeviceTotal %lld", dtotal);
    snprintf(key, sizeof(key), "accel%d_Label_Total", dev_index);
    CHECK(meminfo_value(text, key) == 8, "%s missing:\n%s", key, text);
    CHECK(meminfo_value(text, "Label_DeviceTotal") == 8, "Label_DeviceTotal missing");
    CHECK(meminfo_value(text, "Label_accel7_Total") == 8, "Label_accel7_Total missing");
    CHECK(meminfo_value(text, "Label_Label_x") == 8, "Label_Label_x missing");
    CHECK(meminfo_value(text, "Label_Buffers") == 8, "Label_Buffers missing");
    close(fd);

    /* 300 labels: the 256th keeps its name, the rest are OtherLabels */
    fd = dev_open(dev_index);
    CHECK(fd >= 0, "open");
    for (int i = 0; i < 300; i++) {
        char l[32];

        snprintf(l, sizeof(l), "many-%03d", i);
        CHECK_OK(bo_new(fd, 4096, l, &bo));
    }
    CHECK(read_file("/proc/tx_meminfo", text, sizeof(text)) > 0, "read");
    CHECK(meminfo_value(text, "OtherLabels") > 0, "no OtherLabels");
    CHECK(!strstr(text, "\nOther:"), "a label was renamed Other");
    {
        int named = 0;

        for (int i = 0; i < 300; i++) {
            snprintf(key, sizeof(key), "many-%03d", i);
            named += meminfo_value(text, key) == 4;
        }
        CHECK(named >= 250 && named <= 256, "%d labels listed by name", named);
    }

    /* another user sees the totals, not our labels */
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        if (setgid(65534) || setuid(65534))
            _exit(10);
        if (read_file("/proc/tx_meminfo", text, sizeof(text)) <= 0)
            _exit(11);
        if (meminfo_value(text, "DeviceUsed") <= 0)
            _exit(12);
        if (strstr(text, "many-0"))
            _exit(13);
        _exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "another user: status %#x (13: saw labels)",
          status);
    close(fd);
    return 0;
}

/* job_timeout_ms is checked; SUBMIT's timeout 0 polls; fdinfo is live. */
static int t_small_items(void)
{
    char path[64], text[4096];
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_submit s;
    struct drm_tx8_reset r;
    struct drm_tx8_wait w;
    unsigned long long e0, e1;
    uint32_t hs;
    uint64_t seq;
    struct ctx c;
    int64_t t0;
    size_t len;

    {
        int r0 = write_file("/sys/module/tx8/parameters/job_timeout_ms", "0");
        int r10 = write_file("/sys/module/tx8/parameters/job_timeout_ms", "10");

        /* restored first: a timeout of 0 would fail every later job */
        CHECK_OK(write_file("/sys/module/tx8/parameters/job_timeout_ms", "5000"));
        CHECK(r0 != 0, "job_timeout_ms 0 accepted");
        CHECK(r10 != 0, "job_timeout_ms 10 accepted");
    }

    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(bo_new(c.fd, 4096, NULL, &bo));
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    len = put_fill(c.cmdmap, bo.dev_addr, 4096, 1);

    /* fdinfo counts the running job */
    CHECK_OK(inject(c.fd, DRM_TX8_FAULT_SLOW, 2000, 1));
    CHECK_OK(submit(c.fd, c.cmd.handle, 0, len, &ref, 1, &seq));
    usleep(300000);
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", c.fd);
    CHECK(read_file(path, text, sizeof(text)) > 0, "fdinfo");
    e0 = strtoull(strstr(text, "drm-engine-compute:\t") + 20, NULL, 10);
    usleep(500000);
    CHECK(read_file(path, text, sizeof(text)) > 0, "fdinfo");
    e1 = strtoull(strstr(text, "drm-engine-compute:\t") + 20, NULL, 10);
    CHECK_ERR(wait_job(c.fd, seq, 0, &w), ETIME);
    CHECK(e1 > e0 + 100000000ull, "drm-engine-compute did not grow while a job ran: %llu -> %llu",
          e0, e1);
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));

    /* a full waiting list: timeout 0 polls (-EBUSY at once) */
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &hs));
    CHECK_OK(inject(c.fd, DRM_TX8_FAULT_HANG, 0, 1));
    CHECK_OK(submit_dep(&c, 0, len, &ref, NULL, 0, hs, &seq));
    for (int i = 0; i < 256; i++)
        CHECK_OK(submit_dep(&c, 0, len, &ref, &hs, 1, 0, &seq));
    memset(&s, 0, sizeof(s));
    s.cmd_handle = c.cmd.handle;
    s.cmd_size = len;
    s.in_syncobjs = (uintptr_t)&hs;
    s.in_syncobj_count = 1;
    t0 = now_ns();
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EBUSY);
    CHECK(now_ns() - t0 < 1000000000ll, "SUBMIT with timeout 0 waited %" PRId64 " ms",
          (now_ns() - t0) / 1000000);
    s.timeout_ns = now_ns() + 300000000ll;
    CHECK_ERR(xioctl(c.fd, DRM_IOCTL_TX8_SUBMIT, &s), EBUSY);
    CHECK(now_ns() - t0 >= 250000000ll, "SUBMIT did not wait for its deadline");
    memset(&r, 0, sizeof(r));
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_RESET, &r));
    CHECK(r.aborted == 257, "RESET aborted %llu of 257", (unsigned long long)r.aborted);
    CHECK_OK(run_fill(&c, bo.dev_addr, 4096, 2, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "after the reset: status %u", w.status);
    drmSyncobjDestroy(c.fd, hs);
    ctx_close(&c);
    return 0;
}

/* Two clients saturating the device both make progress. */
static int fair_client(int secs)
{
    enum { DEPTH = 16 };
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    uint64_t seqs[DEPTH], done = 0, n = 0;
    int64_t end = now_ns() + (int64_t)secs * 1000000000ll;
    struct ctx c;
    size_t len;

    if (ctx_open(&c, dev_index) || bo_new(c.fd, 256 * 1024, NULL, &bo))
        return -1;
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    len = put_fill(c.cmdmap, bo.dev_addr, 256 * 1024, 5);
    while (now_ns() < end) {
        if (n >= DEPTH) {
            if (wait_job(c.fd, seqs[n % DEPTH], 20000, &w) || w.status != DRM_TX8_STATUS_OK)
                return -2;
            done++;
        }
        if (submit(c.fd, c.cmd.handle, 0, len, &ref, 1, &seqs[n % DEPTH]))
            return -3;
        n++;
    }
    /* jobs finished after the end do not count */
    ctx_close(&c);
    return (int)done;
}

static int t_fairness(void)
{
    int pipes[2][2], status, got[2];
    pid_t pids[2];

    for (int i = 0; i < 2; i++) {
        CHECK(pipe(pipes[i]) == 0, "pipe");
        pids[i] = fork();
        CHECK(pids[i] >= 0, "fork");
        if (pids[i] == 0) {
            int r = fair_client(6);

            if (write(pipes[i][1], &r, sizeof(r)) != sizeof(r))
                _exit(2);
            _exit(0);
        }
        close(pipes[i][1]);
    }
    for (int i = 0; i < 2; i++) {
        CHECK(read(pipes[i][0], &got[i], sizeof(got[i])) == sizeof(got[i]), "client %d: no result",
              i);
        close(pipes[i][0]);
        CHECK(waitpid(pids[i], &status, 0) == pids[i] && WIFEXITED(status) && !WEXITSTATUS(status),
              "client %d: status %#x", i, status);
        CHECK(got[i] >= 0, "client %d failed: %d", i, got[i]);
    }
    printf("fairness: %d and %d jobs completed in 6 s\n", got[0], got[1]);
    CHECK(got[0] + got[1] > 20, "too few jobs: %d + %d", got[0], got[1]);
    CHECK(got[0] * 3 >= got[0] + got[1] && got[1] * 3 >= got[0] + got[1],
          "unfair: %d and %d jobs", got[0], got[1]);
    return 0;
}

/*
 * SUBMIT priorities (drm_sched entities per priority): bad flags are
 * refused, HIGH needs CAP_SYS_NICE, and a HIGH job overtakes normal jobs
 * still queued behind a full ring.
 */
static int submit_flags(struct ctx *c, uint64_t off, size_t len, const struct drm_tx8_bo_ref *ref,
                        uint32_t flags, uint64_t *seqno)
{
    struct drm_tx8_submit s;
    int r;

    memset(&s, 0, sizeof(s));
    s.cmd_handle = c->cmd.handle;
    s.flags = flags;
    s.cmd_offset = off;
    s.cmd_size = len;
    s.bos = (uintptr_t)ref;
    s.bo_count = 1;
    s.bo_stride = sizeof(*ref);
    s.timeout_ns = INT64_MAX;
    r = xioctl(c->fd, DRM_IOCTL_TX8_SUBMIT, &s);
    if (!r && seqno)
        *seqno = s.seqno;
    return r;
}

static int t_priority(void)
{
    struct drm_tx8_bo_create ba, bb, bh;
    struct drm_tx8_bo_ref ra, rb, rh;
    struct drm_tx8_wait w, wl, wh;
    uint64_t seq, last = 0, sh;
    struct ctx a, b, h;
    size_t la, lb, lh;
    int status;
    pid_t pid;

    CHECK_OK(ctx_open(&a, dev_index));
    CHECK_OK(ctx_open(&b, dev_index));
    CHECK_OK(ctx_open(&h, dev_index));
    CHECK_OK(bo_new(a.fd, 4096, NULL, &ba));
    CHECK_OK(bo_new(b.fd, 4096, NULL, &bb));
    CHECK_OK(bo_new(h.fd, 4096, NULL, &bh));
    ra.handle = ba.handle;
    ra.access = DRM_TX8_ACCESS_WRITE;
    rb.handle = bb.handle;
    rb.access = DRM_TX8_ACCESS_WRITE;
    rh.handle = bh.handle;
    rh.access = DRM_TX8_ACCESS_WRITE;
    la = put_fill(a.cmdmap, ba.dev_addr, 4096, 1);
    lb = put_fill(b.cmdmap, bb.dev_addr, 4096, 2);
    lh = put_fill(h.cmdmap, bh.dev_addr, 4096, 3);

    CHECK_ERR(submit_flags(&a, 0, la, &ra, DRM_TX8_SUBMIT_PRIORITY_LOW | DRM_TX8_SUBMIT_PRIORITY_HIGH,
                           &seq), EINVAL);
    CHECK_ERR(submit_flags(&a, 0, la, &ra, 1u << 4, &seq), EINVAL);
    CHECK_ERR(submit_flags(&a, 0, la, &ra, ~DRM_TX8_SUBMIT_FLAGS_MASK, &seq), EINVAL);
    CHECK_ERR(submit_flags(&a, 0, la, &ra, 1u << 31, &seq), EINVAL);
    CHECK_OK(submit_flags(&a, 0, la, &ra, DRM_TX8_SUBMIT_PRIORITY_LOW, &seq));
    CHECK_OK(wait_job(a.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "LOW job: status %u", w.status);
    /* HIGH without CAP_SYS_NICE */
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        uint64_t s2;

        if (setgid(65534) || setuid(65534))
            _exit(10);
        _exit(submit_flags(&a, 0, la, &ra, DRM_TX8_SUBMIT_PRIORITY_HIGH, &s2) == -EPERM ? 0 : 11);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
          "unprivileged HIGH SUBMIT: status %#x", status);

    /* A's slow job runs; B queues 40 jobs (the ring holds 16); then H's HIGH job */
    CHECK_OK(inject(a.fd, DRM_TX8_FAULT_SLOW, 1500, 1));
    CHECK_OK(submit_flags(&a, 0, la, &ra, 0, &seq));
    usleep(200000);
    for (int i = 0; i < 40; i++)
        CHECK_OK(submit_flags(&b, 0, lb, &rb, 0, &last));
    CHECK_OK(submit_flags(&h, 0, lh, &rh, DRM_TX8_SUBMIT_PRIORITY_HIGH, &sh));
    CHECK_OK(wait_job(h.fd, sh, 30000, &wh));
    CHECK(wh.status == DRM_TX8_STATUS_OK, "HIGH job: status %u", wh.status);
    CHECK_OK(wait_job(b.fd, last, 30000, &wl));
    CHECK(wl.status == DRM_TX8_STATUS_OK, "last normal job: status %u", wl.status);
    CHECK(wh.end_ns < wl.end_ns, "the HIGH job did not overtake queued normal jobs (%llu >= %llu)",
          (unsigned long long)wh.end_ns, (unsigned long long)wl.end_ns);
    CHECK_OK(wait_job(a.fd, seq, 20000, &w));
    ctx_close(&a);
    ctx_close(&b);
    ctx_close(&h);
    return 0;
}


/*
 * The job timeout is measured from when the job started on the device:
 * a hung job fails within job_timeout_ms (+ slack), however many jobs
 * enter the ring behind it meanwhile (6.12's drm_sched timeout restarts
 * at each of them), and jobs that each run less than job_timeout_ms but
 * together longer are not failed.
 */
#define JOB_TIMEOUT "/sys/module/tx8/parameters/job_timeout_ms"

static int t_timeout_start(void)
{
    struct drm_tx8_bo_create ba, bb;
    struct drm_tx8_bo_ref ra, rb;
    struct drm_tx8_wait w;
    uint64_t sa, s1, s2, last = 0;
    int64_t t0, t1;
    struct ctx a, b;
    size_t la, lb;
    int status, r;
    pid_t pid;

    CHECK_OK(write_file(JOB_TIMEOUT, "2000"));
    CHECK_OK(ctx_open(&a, dev_index));
    CHECK_OK(ctx_open(&b, dev_index));
    CHECK_OK(bo_new(a.fd, 4096, NULL, &ba));
    CHECK_OK(bo_new(b.fd, 4096, NULL, &bb));
    ra.handle = ba.handle;
    ra.access = DRM_TX8_ACCESS_WRITE;
    rb.handle = bb.handle;
    rb.access = DRM_TX8_ACCESS_WRITE;
    la = put_fill(a.cmdmap, ba.dev_addr, 4096, 1);
    lb = put_fill(b.cmdmap, bb.dev_addr, 4096, 2);

    /* 1: two 1.5 s jobs back to back (3 s in all) both finish OK */
    CHECK_OK(inject(a.fd, DRM_TX8_FAULT_SLOW, 1500, 2));
    CHECK_OK(submit(a.fd, a.cmd.handle, 0, la, &ra, 1, &s1));
    CHECK_OK(submit(a.fd, a.cmd.handle, 0, la, &ra, 1, &s2));
    CHECK_OK(wait_job(a.fd, s2, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "second 1.5 s job (timeout 2 s): status %u", w.status);
    CHECK_OK(wait_job(a.fd, s1, 0, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "first 1.5 s job (timeout 2 s): status %u", w.status);

    /* 2: A's job hangs; B queues a job behind it every 300 ms for 4.5 s */
    CHECK_OK(inject(a.fd, DRM_TX8_FAULT_HANG, 0, 1));
    t0 = now_ns();
    CHECK_OK(submit(a.fd, a.cmd.handle, 0, la, &ra, 1, &sa));
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        for (int i = 0; i < 15; i++) {
            usleep(300000);
            if (submit(b.fd, b.cmd.handle, 0, lb, &rb, 1, &last))
                _exit(10);
        }
        if (wait_job(b.fd, last, 30000, &w) || w.status != DRM_TX8_STATUS_OK)
            _exit(11);
        _exit(0);
    }
    r = wait_job(a.fd, sa, 30000, &w);
    t1 = now_ns();
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    write_file(JOB_TIMEOUT, "5000");
    CHECK(r == 0, "WAIT of the hung job: %d", r);
    printf("timeout_start: the hung job failed after %" PRId64 " ms (job_timeout_ms 2000)\n",
           (t1 - t0) / 1000000);
    CHECK(w.status == DRM_TX8_STATUS_TIMEOUT, "hung job: status %u", w.status);
    CHECK(t1 - t0 >= 1900000000ll, "the hung job failed early: %" PRId64 " ms",
          (t1 - t0) / 1000000);
    CHECK(t1 - t0 <= 3000000000ll,
          "the hung job failed after %" PRId64 " ms, more than job_timeout_ms 2000 + 1000",
          (t1 - t0) / 1000000);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "B's jobs queued behind the hung one: status %#x", status);
    ctx_close(&a);
    ctx_close(&b);
    return 0;
}

/*
 * LOW priority: ready jobs of normal priority are served before ready LOW
 * jobs (strictly), LOW jobs keep their order, and they all complete.
 */
static int t_priority_low(void)
{
    struct drm_tx8_bo_create ba, bb, bn;
    struct drm_tx8_bo_ref ra, rb, rn;
    struct drm_tx8_wait w, wl, wn, wp;
    uint64_t seq, lows[40], norms[5];
    struct ctx a, b, n;
    size_t la, lb, ln;

    CHECK_OK(ctx_open(&a, dev_index));
    CHECK_OK(ctx_open(&b, dev_index));
    CHECK_OK(ctx_open(&n, dev_index));
    CHECK_OK(bo_new(a.fd, 4096, NULL, &ba));
    CHECK_OK(bo_new(b.fd, 4096, NULL, &bb));
    CHECK_OK(bo_new(n.fd, 4096, NULL, &bn));
    ra.handle = ba.handle;
    ra.access = DRM_TX8_ACCESS_WRITE;
    rb.handle = bb.handle;
    rb.access = DRM_TX8_ACCESS_WRITE;
    rn.handle = bn.handle;
    rn.access = DRM_TX8_ACCESS_WRITE;
    la = put_fill(a.cmdmap, ba.dev_addr, 4096, 1);
    lb = put_fill(b.cmdmap, bb.dev_addr, 4096, 2);
    ln = put_fill(n.cmdmap, bn.dev_addr, 4096, 3);

    /* A's slow job runs; B queues 40 LOW jobs (the ring holds 16); N 5 normal ones */
    CHECK_OK(inject(a.fd, DRM_TX8_FAULT_SLOW, 1500, 1));
    CHECK_OK(submit_flags(&a, 0, la, &ra, 0, &seq));
    usleep(200000);
    for (int i = 0; i < 40; i++)
        CHECK_OK(submit_flags(&b, 0, lb, &rb, DRM_TX8_SUBMIT_PRIORITY_LOW, &lows[i]));
    for (int i = 0; i < 5; i++)
        CHECK_OK(submit_flags(&n, 0, ln, &rn, 0, &norms[i]));
    CHECK_OK(wait_job(n.fd, norms[4], 30000, &wn));
    CHECK(wn.status == DRM_TX8_STATUS_OK, "normal job: status %u", wn.status);
    CHECK_OK(wait_job(b.fd, lows[39], 30000, &wl));
    CHECK(wl.status == DRM_TX8_STATUS_OK, "last LOW job: status %u", wl.status);
    printf("priority_low: last normal job ended at %llu, last LOW job at %llu (device ns)\n",
           (unsigned long long)wn.end_ns, (unsigned long long)wl.end_ns);
    CHECK(wn.end_ns < wl.end_ns,
          "normal jobs submitted after 40 LOW jobs did not overtake the queued LOW ones");
    /* the LOW jobs in order, all OK */
    memset(&wp, 0, sizeof(wp));
    for (int i = 0; i < 40; i++) {
        CHECK_OK(wait_job(b.fd, lows[i], 0, &w));
        CHECK(w.status == DRM_TX8_STATUS_OK, "LOW job %d: status %u", i, w.status);
        CHECK(i == 0 || w.start_ns >= wp.end_ns, "LOW job %d started before LOW job %d ended", i,
              i - 1);
        wp = w;
    }
    CHECK_OK(wait_job(a.fd, seq, 20000, &w));
    ctx_close(&a);
    ctx_close(&b);
    ctx_close(&n);
    return 0;
}

/*
 * Issue 18: DRM_TX8_SUBMIT_PROFILE. The profiling buffer is a BO of the
 * file, validated like any other (handle of this file, offset and size
 * inside it), added to the job's BOs with WRITE access; the device writes
 * the header and one record per command there. Unprofiled jobs write
 * nothing.
 */
static int submit_prof(struct ctx *c, size_t len, const struct drm_tx8_bo_ref *ref, uint32_t flags,
                       uint32_t ph, uint64_t off, uint64_t size, uint64_t *seqno)
{
    struct drm_tx8_submit s;
    int r;

    memset(&s, 0, sizeof(s));
    s.cmd_handle = c->cmd.handle;
    s.flags = flags;
    s.cmd_size = len;
    s.bos = (uintptr_t)ref;
    s.bo_count = 1;
    s.bo_stride = sizeof(*ref);
    s.timeout_ns = INT64_MAX;
    s.prof_handle = ph;
    s.prof_offset = off;
    s.prof_size = size;
    r = xioctl(c->fd, DRM_IOCTL_TX8_SUBMIT, &s);
    if (!r && seqno)
        *seqno = s.seqno;
    return r;
}

static int t_profile(void)
{
    struct drm_tx8_bo_create dst, prof, other[3];
    struct drm_tx8_device_info info;
    struct drm_tx8_query q;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    const struct tx8_prof_header *h;
    const struct tx8_prof_record *rec;
    uint8_t *pm;
    uint64_t seq;
    struct ctx c, d;
    size_t len = 0;
    const uint32_t P = DRM_TX8_SUBMIT_PROFILE;

    CHECK_OK(ctx_open(&c, dev_index));
    memset(&q, 0, sizeof(q));
    q.query = DRM_TX8_QUERY_DEVICE;
    q.size = sizeof(info);
    q.data = (uintptr_t)&info;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_QUERY, &q));
    CHECK((info.driver_version & 0xffff) >= 1, "driver version %#x: no profiling (1.1)",
          info.driver_version);
    CHECK(TX8_IF_MINOR(info.if_version) >= 5, "device interface %#x < 1.5", info.if_version);
    CHECK_OK(bo_new(c.fd, 8192, NULL, &dst));
    CHECK_OK(bo_new(c.fd, 4096, "vmtest-profile", &prof));
    pm = bo_map(c.fd, &prof);
    CHECK(pm, "mmap of the profiling BO");
    ref.handle = dst.handle;
    ref.access = DRM_TX8_ACCESS_RW;
    len += put_fill(c.cmdmap + len, dst.dev_addr, 4096, 7);
    len += put_copy(c.cmdmap + len, dst.dev_addr + 4096, dst.dev_addr, 4096);
    len += put_fill(c.cmdmap + len, dst.dev_addr, 64, 9);

    /* bad profiling arguments */
    CHECK_ERR(submit_prof(&c, len, &ref, P, 0, 0, 4096, &seq), EINVAL);
    CHECK_ERR(submit_prof(&c, len, &ref, P, 999, 0, 4096, &seq), ENOENT);
    CHECK_ERR(submit_prof(&c, len, &ref, P, prof.handle, 4, 1024, &seq), EINVAL);
    CHECK_ERR(submit_prof(&c, len, &ref, P, prof.handle, 0, 32, &seq), EINVAL);
    CHECK_ERR(submit_prof(&c, len, &ref, P, prof.handle, 4096 - 56, 64, &seq), EINVAL);
    CHECK_ERR(submit_prof(&c, len, &ref, P, prof.handle, 0, 4096 + 8, &seq), EINVAL);
    CHECK_ERR(submit_prof(&c, len, &ref, P, prof.handle, 1ull << 63, (1ull << 63) + 64, &seq),
              EINVAL);
    CHECK_ERR(submit_prof(&c, len, &ref, P, prof.handle, UINT64_MAX - 7, 64, &seq), EINVAL);
    /* without the flag the fields must be zero */
    CHECK_ERR(submit_prof(&c, len, &ref, 0, prof.handle, 0, 0, &seq), EINVAL);
    CHECK_ERR(submit_prof(&c, len, &ref, 0, 0, 0, 4096, &seq), EINVAL);
    CHECK_ERR(submit_prof(&c, len, &ref, 0, 0, 8, 0, &seq), EINVAL);
    /* a handle of another file is no handle here */
    CHECK_OK(ctx_open(&d, dev_index));
    for (int i = 0; i < 3; i++)
        CHECK_OK(bo_new(d.fd, 4096, NULL, &other[i]));
    CHECK(other[2].handle > prof.handle, "handles %u / %u", other[2].handle, prof.handle);
    CHECK_ERR(submit_prof(&c, len, &ref, P, other[2].handle, 0, 4096, &seq), ENOENT);
    ctx_close(&d);

    /* an unprofiled job writes nothing there */
    memset(pm, 0, 4096);
    CHECK_OK(submit_prof(&c, len, &ref, 0, 0, 0, 0, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "unprofiled job: status %u", w.status);
    for (int i = 0; i < 4096; i++)
        CHECK(!pm[i], "an unprofiled job wrote byte %d of the profiling BO", i);

    /* a profiled job: header + 3 records, inside the job's time */
    CHECK_OK(submit_prof(&c, len, &ref, P, prof.handle, 512, 1024, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "profiled job: status %u", w.status);
    h = (const void *)(pm + 512);
    rec = (const void *)(h + 1);
    CHECK(h->magic == TX8_PROF_MAGIC && h->version == TX8_PROF_VERSION,
          "profiling header: magic %#x version %u", h->magic, h->version);
    CHECK(h->count == 3 && h->dropped == 0 && h->capacity == (1024 - 64) / 64,
          "profiling header: count %u dropped %u capacity %u", h->count, h->dropped, h->capacity);
    for (unsigned i = 0; i < 3; i++) {
        CHECK(rec[i].index == i && rec[i].opcode == (i == 1 ? TX8_OP_COPY : TX8_OP_FILL),
              "record %u: index %u opcode %u", i, rec[i].index, rec[i].opcode);
        CHECK(rec[i].start_ns >= w.start_ns && rec[i].end_ns >= rec[i].start_ns &&
                  rec[i].end_ns <= w.end_ns && rec[i].ncores >= 1,
              "record %u: %llu..%llu outside the job's %llu..%llu (cores %u)", i,
              (unsigned long long)rec[i].start_ns, (unsigned long long)rec[i].end_ns,
              (unsigned long long)w.start_ns, (unsigned long long)w.end_ns, rec[i].ncores);
    }
    CHECK(rec[1].bytes_read == 4096 && rec[1].bytes_written == 4096,
          "COPY record: read %llu written %llu", (unsigned long long)rec[1].bytes_read,
          (unsigned long long)rec[1].bytes_written);
    for (int i = 0; i < 512; i++)
        CHECK(!pm[i], "the device wrote before the profiling buffer (byte %d)", i);
    for (int i = 512 + 1024; i < 4096; i++)
        CHECK(!pm[i], "the device wrote after the profiling buffer (byte %d)", i);

    /* room for one record: the other two are counted as dropped */
    memset(pm, 0, 4096);
    CHECK_OK(submit_prof(&c, len, &ref, P, prof.handle, 0, 128, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "profiled job, small buffer: status %u", w.status);
    h = (const void *)pm;
    CHECK(h->count == 1 && h->dropped == 2, "small buffer: count %u dropped %u", h->count,
          h->dropped);
    /* the profiling BO given in bos[] too (read only there): merged, writable */
    ref.handle = prof.handle;
    ref.access = DRM_TX8_ACCESS_READ;
    len = put_fill(c.cmdmap, prof.dev_addr + 2048, 64, 1);
    CHECK_OK(submit_prof(&c, len, &ref, P, prof.handle, 0, 1024, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "profiling BO also in bos[]: status %u", w.status);
    CHECK(h->count == 1, "profiling BO also in bos[]: count %u", h->count);
    munmap(pm, 4096);
    ctx_close(&c);
    return 0;
}

/*
 * Issue 17: DRM_TX8_SUBMIT_BATCH_INVARIANT (driver 1.2, interface 1.6). A
 * job with the flag runs (alone and with a priority), its results are
 * right, and bits beyond DRM_TX8_SUBMIT_FLAGS_MASK are still refused. That
 * the flag reaches the device as TX8_JOB_F_BATCH_INVARIANT is checked by
 * test_device (batch_invariant_rows) and test_runtime (bit-identical
 * batched decode) in this suite, on this node.
 */
static int t_batch_invariant(void)
{
    const uint32_t BI = DRM_TX8_SUBMIT_BATCH_INVARIANT;
    struct drm_tx8_device_info info;
    struct drm_tx8_bo_create dst;
    struct drm_tx8_query q;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    uint64_t seq;
    uint32_t *dm;
    struct ctx c;
    size_t len = 0;

    CHECK_OK(ctx_open(&c, dev_index));
    memset(&q, 0, sizeof(q));
    q.query = DRM_TX8_QUERY_DEVICE;
    q.size = sizeof(info);
    q.data = (uintptr_t)&info;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_QUERY, &q));
    CHECK((info.driver_version >> 16) == 1 && (info.driver_version & 0xffff) >= 2,
          "driver version %#x: no batch-invariant flag (1.2)", info.driver_version);
    CHECK(TX8_IF_MINOR(info.if_version) >= 6, "device interface %#x < 1.6", info.if_version);
    CHECK_OK(bo_new(c.fd, 8192, "vmtest-bi", &dst));
    dm = (uint32_t *)bo_map(c.fd, &dst);
    CHECK(dm, "mmap of the destination BO");
    ref.handle = dst.handle;
    ref.access = DRM_TX8_ACCESS_RW;
    len += put_fill(c.cmdmap + len, dst.dev_addr, 4096, 0x5a5a5a5a);
    len += put_copy(c.cmdmap + len, dst.dev_addr + 4096, dst.dev_addr, 4096);

    /* unknown bits: still refused, queueing nothing */
    CHECK_ERR(submit_prof(&c, len, &ref, BI | (1u << 4), 0, 0, 0, &seq), EINVAL);
    CHECK_ERR(submit_prof(&c, len, &ref, 1u << 31, 0, 0, 0, &seq), EINVAL);
    CHECK_ERR(submit_prof(&c, len, &ref, BI | DRM_TX8_SUBMIT_PRIORITY_LOW |
                                            DRM_TX8_SUBMIT_PRIORITY_HIGH, 0, 0, 0, &seq),
              EINVAL);
    for (int i = 0; i < 2048; i++)
        CHECK(!dm[i], "a refused submit ran (word %d is %#x)", i, dm[i]);

    /* the flag alone, with a low priority, and with profiling */
    CHECK_OK(submit_prof(&c, len, &ref, BI, 0, 0, 0, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "batch-invariant job: status %u", w.status);
    for (int i = 0; i < 2048; i++)
        CHECK(dm[i] == 0x5a5a5a5a, "batch-invariant job: word %d is %#x", i, dm[i]);
    CHECK_OK(submit_prof(&c, len, &ref, BI | DRM_TX8_SUBMIT_PRIORITY_LOW, 0, 0, 0, &seq));
    CHECK_OK(wait_job(c.fd, seq, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "batch-invariant low-priority job: status %u",
          w.status);
    munmap(dm, 8192);
    ctx_close(&c);
    return 0;
}

/*
 * tx-top as a normal user: it runs, sees the device and its memory, and
 * sees no label of another user's BO (/proc/tx_meminfo hides them).
 */
static int t_txtop_user(void)
{
    static char out[65536];
    struct drm_tx8_bo_create bo;
    char dev[64];
    int p[2], status, fd = dev_open(dev_index);
    size_t n = 0;
    ssize_t r;
    pid_t pid;

    CHECK(fd >= 0, "open");
    CHECK_OK(bo_new(fd, 1 << 20, "RootSecret_Weights", &bo));
    snprintf(dev, sizeof(dev), "/dev/accel/accel%d", dev_index);
    CHECK(pipe(p) == 0, "pipe");
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        if (setgid(65534) || setuid(65534))
            _exit(10);
        execlp("tx-top", "tx-top", "--json", "-d", dev, "-d", "5", (char *)NULL);
        _exit(11);
    }
    close(p[1]);
    while (n < sizeof(out) - 1 && (r = read(p[0], out + n, sizeof(out) - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    close(p[0]);
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tx-top as uid 65534: status %#x\n%s",
          status, out);
    CHECK(strstr(out, "\"devices\"") && strstr(out, "\"status\": \"ok\"") &&
              strstr(out, "\"total\": "),
          "tx-top as a normal user does not see the device and its memory:\n%s", out);
    CHECK(!strstr(out, "RootSecret"), "a normal user sees root's BO label:\n%s", out);
    close(fd);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* RESET recovers the caller's context only (issue 36)                       */

/* Two files of this device, each with a 4 KiB BO it may write. */
static int two_clients(struct ctx *a, struct ctx *b, struct drm_tx8_bo_create *ba,
                       struct drm_tx8_bo_create *bb, struct drm_tx8_bo_ref *ra,
                       struct drm_tx8_bo_ref *rb)
{
    if (ctx_open(a, dev_index) || ctx_open(b, dev_index) || bo_new(a->fd, 4096, NULL, ba) ||
        bo_new(b->fd, 4096, NULL, bb))
        return -1;
    ra->handle = ba->handle;
    ra->access = DRM_TX8_ACCESS_WRITE;
    rb->handle = bb->handle;
    rb->access = DRM_TX8_ACCESS_WRITE;
    return 0;
}

/* A FILL job of c's on its BO ref, command at cmd offset off. */
static int submit_fill_at(struct ctx *c, uint64_t off, const struct drm_tx8_bo_ref *ref,
                          uint64_t dst, uint32_t value, uint64_t *seqno)
{
    size_t len = put_fill(c->cmdmap + off, dst, 4096, value);

    return submit(c->fd, c->cmd.handle, off, len, ref, 1, seqno);
}

/* RESET of fd in a child process as uid 65534; its aborted count, or -1. */
static long long unpriv_reset(int fd, int64_t *took_ns)
{
    int64_t t0 = now_ns();
    int status, p[2];
    long long n = -1;
    pid_t pid;

    if (pipe(p))
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        struct drm_tx8_reset r;

        close(p[0]);
        memset(&r, 0, sizeof(r));
        if (setgid(65534) || setuid(65534) || xioctl(fd, DRM_IOCTL_TX8_RESET, &r))
            _exit(1);
        if (write(p[1], &r.aborted, sizeof(r.aborted)) != sizeof(r.aborted))
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    {
        uint64_t v;

        if (read(p[0], &v, sizeof(v)) == sizeof(v))
            n = (long long)v;
    }
    close(p[0]);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        n = -1;
    if (took_ns)
        *took_ns = now_ns() - t0;
    return n;
}

/*
 * A client with one job queued behind another client's long jobs resets
 * itself: after job_timeout_ms + 1 s the other client's running job must
 * not be aborted (it was, by a queue reset at RESET's deadline).
 */
static int t_reset_deadline(void)
{
    struct ctx v, a;
    struct drm_tx8_bo_create bv, ba;
    struct drm_tx8_bo_ref rv, ra;
    struct drm_tx8_wait w;
    uint64_t sv[5], sa;
    long long resets0, n;
    int64_t took;

    CHECK_OK(write_file(JOB_TIMEOUT, "1000"));
    CHECK_OK(two_clients(&v, &a, &bv, &ba, &rv, &ra));
    resets0 = sysattr(dev_index, "resets");
    /* the victim: five jobs of 600 ms each, each within the 1 s timeout */
    CHECK_OK(inject(v.fd, DRM_TX8_FAULT_SLOW, 600, 5));
    for (int i = 0; i < 5; i++)
        CHECK_OK(submit_fill_at(&v, 256 * (uint64_t)i, &rv, bv.dev_addr, 0x100u + (unsigned)i,
                                &sv[i]));
    CHECK_OK(submit_fill_at(&a, 0, &ra, ba.dev_addr, 0xa1u, &sa));
    usleep(200000);
    n = unpriv_reset(a.fd, &took);
    CHECK(n == 1, "the attacker's RESET: aborted %lld (expected its one job)", n);
    CHECK(took < 2500000000ll, "RESET took %" PRId64 " ms", took / 1000000);
    for (int i = 0; i < 5; i++) {
        CHECK_OK(wait_job(v.fd, sv[i], 20000, &w));
        CHECK(w.status == DRM_TX8_STATUS_OK,
              "victim job %d of 5 after another client's RESET: status %u", i + 1, w.status);
    }
    CHECK_OK(wait_job(a.fd, sa, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_ABORTED, "the attacker's job: status %u", w.status);
    CHECK(w.start_ns == 0 || w.end_ns == w.start_ns, "the attacker's job ran");
    CHECK(sysattr(dev_index, "resets") == resets0, "a client RESET reset the device queue");
    CHECK_OK(write_file(JOB_TIMEOUT, "5000"));
    ctx_close(&v);
    ctx_close(&a);
    return 0;
}

/*
 * One round of t_reset_toctou: the caller's 30 ms job, another client's
 * job behind it, the caller's RESET delay_us after its SUBMIT. 1 if the
 * caller's job was aborted, 0 if it had ended, -1 with a message if the
 * other client's job did not end OK.
 */
static int toctou_round(struct ctx *a, struct ctx *v, const struct drm_tx8_bo_ref *ra,
                        const struct drm_tx8_bo_ref *rv, uint64_t da, uint64_t dv, int delay_us)
{
    struct drm_tx8_reset r;
    struct drm_tx8_wait w;
    uint64_t sa, sv;

    if (inject(a->fd, DRM_TX8_FAULT_SLOW, 30, 1) || submit_fill_at(a, 0, ra, da, 0xa0u, &sa) ||
        submit_fill_at(v, 0, rv, dv, 0xb0u, &sv))
        return -1;
    usleep((useconds_t)delay_us);
    memset(&r, 0, sizeof(r));
    if (xioctl(a->fd, DRM_IOCTL_TX8_RESET, &r) || wait_job(a->fd, sa, 20000, &w))
        return -1;
    if (w.status != DRM_TX8_STATUS_OK && w.status != DRM_TX8_STATUS_ABORTED)
        return -1;
    r.aborted = w.status == DRM_TX8_STATUS_ABORTED;
    if (wait_job(v->fd, sv, 20000, &w))
        return -1;
    if (w.status != DRM_TX8_STATUS_OK) {
        printf("reset_toctou: RESET %d us after SUBMIT: the other client's next job: status %u\n",
               delay_us, w.status);
        return -1;
    }
    return (int)r.aborted;
}

/*
 * The caller's job at the head ends just as it resets: the next job,
 * another client's, must never be aborted (RESET checked "my job is the
 * head", then reset the queue without looking again). A coarse sweep finds
 * the RESET delay at which the caller's job starts to end on its own; a
 * fine sweep then walks 4 ms around it in 31 us steps.
 */
static int t_reset_toctou(void)
{
    struct ctx v, a;
    struct drm_tx8_bo_create bv, ba;
    struct drm_tx8_bo_ref rv, ra;
    int edge = 46000, hit = 0, n = 0;

    CHECK_OK(two_clients(&v, &a, &bv, &ba, &rv, &ra));
    /* the edge: just after the last delay at which the job was aborted */
    for (int d = 22000; d <= 46000; d += 1000) {
        int k = toctou_round(&a, &v, &ra, &rv, ba.dev_addr, bv.dev_addr, d);

        CHECK(k >= 0, "coarse sweep, RESET %d us after SUBMIT: see above", d);
        n++;
        hit += k;
        if (k)
            edge = d + 500;
    }
    for (int i = 0; i < 128; i++) {
        int d = edge - 2000 + (i * 31) % 4000;
        int k = toctou_round(&a, &v, &ra, &rv, ba.dev_addr, bv.dev_addr, d);

        CHECK(k >= 0, "fine sweep round %d, RESET %d us after SUBMIT: see above", i, d);
        n++;
        hit += k;
    }
    printf("reset_toctou: the caller's job ends on its own from a RESET about %d us after SUBMIT; aborted in %d of %d rounds\n",
           edge, hit, n);
    ctx_close(&v);
    ctx_close(&a);
    return 0;
}

/*
 * A job of accel1 that takes ms (job timeout raised by the caller), its
 * fence as a sync_file; P must stay open while the fence is used.
 */
static int far_fence(struct ctx *p, uint32_t ms, int *sync_file)
{
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    uint32_t out;
    uint64_t seq;

    if (ctx_open(p, 1))
        return -ENODEV;
    if (bo_new(p->fd, 4096, NULL, &bo) || drmSyncobjCreate(p->fd, 0, &out))
        return -1;
    ref.handle = bo.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    if (inject(p->fd, DRM_TX8_FAULT_SLOW, ms, 1))
        return -1;
    if (submit_dep(p, 0, put_fill(p->cmdmap, bo.dev_addr, 4096, 1), &ref, NULL, 0, out, &seq))
        return -1;
    return drmSyncobjExportSyncFile(p->fd, out, sync_file) ? -1 : 0;
}

/* End the far fence's job (its own RESET) and close its file. */
static void far_fence_end(struct ctx *p, int sync_file)
{
    struct drm_tx8_reset r;

    memset(&r, 0, sizeof(r));
    xioctl(p->fd, DRM_IOCTL_TX8_RESET, &r);
    close(sync_file);
    ctx_close(p);
}

/*
 * A file c of this device with a 4 KiB BO (*bo, *ref: WRITE) and an
 * in-syncobj *in holding a fence of accel1 (file p, sync_file *sf) that
 * signals after ms; the job timeout is raised above ms (the caller puts
 * it back). 1 without accel1 (the caller skips), 0, or -1.
 */
static int far_waiter(struct ctx *p, int *sf, uint32_t ms, struct ctx *c,
                      struct drm_tx8_bo_create *bo, struct drm_tx8_bo_ref *ref, uint32_t *in)
{
    char t[16];

    if (access("/dev/accel/accel1", F_OK))
        return 1;
    snprintf(t, sizeof(t), "%u", ms + 10000);
    if (write_file(JOB_TIMEOUT, t) || far_fence(p, ms, sf) || ctx_open(c, dev_index) ||
        bo_new(c->fd, 4096, NULL, bo) || drmSyncobjCreate(c->fd, 0, in) ||
        drmSyncobjImportSyncFile(c->fd, *in, *sf))
        return -1;
    ref->handle = bo->handle;
    ref->access = DRM_TX8_ACCESS_WRITE;
    return 0;
}

/* The child of t_reset_caps, uid 65534: 0 or the line that failed. */
static int reset_caps_child(struct ctx *c, uint32_t in, uint32_t out,
                            const struct drm_tx8_bo_ref *ref)
{
    struct drm_tx8_reset r;
    struct drm_tx8_wait w;

    if (setgid(65534) || setuid(65534))
        return __LINE__;
    for (int round = 0; round < 4; round++) {
        int i;

        for (i = 0; i < 256; i++)
            if (submit_full(c, 0, sizeof(struct tx8_cmd_fill), ref, &in, 1, out, 0, INT64_MAX, NULL))
                return __LINE__;
        /* the per-file cap holds: no room for one more now */
        if (submit_full(c, 0, sizeof(struct tx8_cmd_fill), ref, &in, 1, out, 0, 0, NULL) != -EBUSY)
            return __LINE__;
        memset(&r, 0, sizeof(r));
        if (xioctl(c->fd, DRM_IOCTL_TX8_RESET, &r) || r.aborted != 256) {
            printf("reset_caps: round %d: RESET aborted %llu of 256\n", round,
                   (unsigned long long)r.aborted);
            return __LINE__;
        }
        /* every cancelled job left the scheduler: its fences signalled */
        memset(&w, 0, sizeof(w));
        w.handle = ref->handle;
        w.timeout_ns = now_ns() + 3000000000ll;
        if (xioctl(c->fd, DRM_IOCTL_TX8_WAIT, &w)) {
            printf("reset_caps: round %d: cancelled jobs' fences still unsignalled 3 s after RESET\n",
                   round);
            return __LINE__;
        }
        if (drmSyncobjWait(c->fd, &out, 1, now_ns() + 1000000000ll, 0, NULL))
            return __LINE__;
    }
    return 0;
}

/*
 * RESET cancels jobs waiting for a far-away fence: they must leave the
 * kernel at once (fences signalled), so the per-file cap of 256 waiting
 * jobs holds under SUBMIT/RESET sequences (one uid-65534 file had 1200 jobs
 * accepted with 18 RESETs, all still held, their fences unsignalled).
 */
static int t_reset_caps(void)
{
    struct ctx p, c;
    struct drm_tx8_bo_create bo;
    struct drm_tx8_bo_ref ref;
    uint32_t in, out;
    int sf, status, line, r;
    pid_t pid;

    r = far_waiter(&p, &sf, 20000, &c, &bo, &ref, &in);
    if (r == 1) {
        printf("SKIP reset_caps: needs a second device for a fence that stays unsignalled\n");
        return 0;
    }
    CHECK(r == 0, "setup: a job waiting for a fence of accel1");
    CHECK_OK(drmSyncobjCreate(c.fd, 0, &out));
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0)
        _exit(reset_caps_child(&c, in, out, &ref) & 0xff);
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    line = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    far_fence_end(&p, sf);
    CHECK_OK(write_file(JOB_TIMEOUT, "5000"));
    CHECK(line == 0, "uid-65534 child failed (line %% 256 = %d, status %#x)", line, status);
    ctx_close(&c);
    return 0;
}

/*
 * One job of the file waits long (for a fence of accel1): the file's job
 * history must still be bounded (trimming stopped at the first record not
 * done, so every later record was kept).
 */
static int t_history_bound(void)
{
    struct ctx p, c;
    struct drm_tx8_bo_create bo, lbo;
    struct drm_tx8_bo_ref ref, lref;
    struct drm_tx8_wait w;
    uint64_t slong, first = 0, last = 0;
    uint32_t in;
    int sf, r;

    r = far_waiter(&p, &sf, 50000, &c, &bo, &ref, &in);
    if (r == 1) {
        printf("SKIP history_bound: needs a second device for a fence that stays unsignalled\n");
        return 0;
    }
    CHECK(r == 0, "setup: a job waiting for a fence of accel1");
    /*
     * the long-waiting job, at low priority, on a BO of its own: the
     * others do not queue behind it
     */
    CHECK_OK(bo_new(c.fd, 4096, NULL, &lbo));
    lref.handle = lbo.handle;
    lref.access = DRM_TX8_ACCESS_WRITE;
    put_fill(c.cmdmap + 256, lbo.dev_addr, 4096, 7);
    CHECK_OK(submit_full(&c, 256, sizeof(struct tx8_cmd_fill), &lref, &in, 1, 0,
                         DRM_TX8_SUBMIT_PRIORITY_LOW, INT64_MAX, &slong));
    put_fill(c.cmdmap, bo.dev_addr, 4096, 8);
    /* more than the history (1024) of short jobs */
    for (int i = 0; i < 1100; i++) {
        CHECK_OK(submit(c.fd, c.cmd.handle, 0, sizeof(struct tx8_cmd_fill), &ref, 1, &last));
        if (!first)
            first = last;
    }
    CHECK_OK(wait_job(c.fd, last, 60000, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "last short job: status %u", w.status);
    /* the oldest short job's record is gone; the long one's is kept */
    CHECK_ERR(wait_job(c.fd, first, 100, &w), ENOENT);
    CHECK_ERR(wait_job(c.fd, slong, 100, &w), ETIME);
    far_fence_end(&p, sf);
    CHECK_OK(wait_job(c.fd, slong, 20000, &w));
    CHECK(w.status == DRM_TX8_STATUS_ABORTED, "long job after its in-fence failed: status %u",
          w.status);
    CHECK_OK(write_file(JOB_TIMEOUT, "5000"));
    ctx_close(&c);
    return 0;
}

/* The SUBMIT/RESET/close race: shared state of t_submit_race's threads. */
struct race {
    struct ctx *c;
    uint32_t handles[64];
    unsigned nbo;
    uint32_t in;
    volatile int stop;
    long submits, resets, closes, errors;
};

static void *race_submit(void *arg)
{
    struct race *r = arg;
    struct drm_tx8_bo_ref refs[64];
    struct drm_tx8_submit s;

    while (!r->stop) {
        for (unsigned i = 0; i < r->nbo; i++) {
            refs[i].handle = __atomic_load_n(&r->handles[i], __ATOMIC_RELAXED);
            refs[i].access = DRM_TX8_ACCESS_READ;
        }
        memset(&s, 0, sizeof(s));
        s.cmd_handle = r->c->cmd.handle;
        s.cmd_size = sizeof(struct tx8_cmd_fill);
        s.bos = (uintptr_t)refs;
        s.bo_count = r->nbo;
        s.bo_stride = sizeof(refs[0]);
        s.in_syncobjs = (uintptr_t)&r->in;
        s.in_syncobj_count = 1;
        s.timeout_ns = now_ns() + 2000000000ll;
        if (xioctl(r->c->fd, DRM_IOCTL_TX8_SUBMIT, &s) == 0)
            r->submits++;
        else
            r->errors++;
    }
    return NULL;
}

static void *race_reset(void *arg)
{
    struct race *r = arg;
    struct drm_tx8_reset rs;

    while (!r->stop) {
        memset(&rs, 0, sizeof(rs));
        xioctl(r->c->fd, DRM_IOCTL_TX8_RESET, &rs);
        r->resets++;
    }
    return NULL;
}

static void *race_close(void *arg)
{
    struct race *r = arg;
    struct drm_tx8_bo_create bo;
    unsigned i = 0;

    while (!r->stop) {
        uint32_t old = __atomic_load_n(&r->handles[i], __ATOMIC_RELAXED);

        if (bo_new(r->c->fd, 4096, "vmtest-race", &bo) == 0) {
            __atomic_store_n(&r->handles[i], bo.handle, __ATOMIC_RELAXED);
            bo_close(r->c->fd, old);
            r->closes++;
        }
        i = (i + 1) % r->nbo;
    }
    return NULL;
}

/* Join t within ms; false if it did not end (the driver hung it). */
static bool join_within(pthread_t t, int ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000l;
    if (ts.tv_nsec >= 1000000000l) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000l;
    }
    return pthread_timedjoin_np(t, NULL, &ts) == 0;
}

/*
 * SUBMIT racing RESET on one file, with many BOs and their handles closed
 * at the same time: every thread ends in bounded time (a reservation lock
 * left held hangs the next SUBMIT of its BO), the file works afterwards and
 * its memory is freed at close. run-suite checks the kernel log.
 */
static int t_submit_race(void)
{
    static char text[16384];
    struct drm_tx8_query q;
    struct drm_tx8_device_info info;
    struct drm_tx8_bo_create bo, data;
    struct drm_tx8_bo_ref ref;
    struct drm_tx8_wait w;
    struct race r;
    struct ctx c, p;
    pthread_t ts, tr, tc;
    long long used0;
    bool ok1, ok2, ok3;
    int sf = -1, have_far;

    CHECK(read_file("/proc/tx_meminfo", text, sizeof(text)) > 0, "read /proc/tx_meminfo");
    used0 = meminfo_value(text, "DeviceUsed");
    CHECK_OK(ctx_open(&c, dev_index));
    memset(&q, 0, sizeof(q));
    q.query = DRM_TX8_QUERY_DEVICE;
    q.size = sizeof(info);
    q.data = (uintptr_t)&info;
    CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_QUERY, &q));
    memset(&r, 0, sizeof(r));
    r.c = &c;
    r.nbo = info.max_bos > 2 ? info.max_bos - 2 : 1;
    if (r.nbo > 64)
        r.nbo = 64;
    for (unsigned i = 0; i < r.nbo; i++) {
        CHECK_OK(bo_new(c.fd, 4096, "vmtest-race", &bo));
        r.handles[i] = bo.handle;
    }
    /* the jobs wait (far fence) or run at once (a signalled one) */
    have_far = !access("/dev/accel/accel1", F_OK);
    if (have_far) {
        CHECK_OK(write_file(JOB_TIMEOUT, "30000"));
        CHECK_OK(far_fence(&p, 20000, &sf));
        CHECK_OK(drmSyncobjCreate(c.fd, 0, &r.in));
        CHECK_OK(drmSyncobjImportSyncFile(c.fd, r.in, sf));
    } else {
        CHECK_OK(drmSyncobjCreate(c.fd, DRM_SYNCOBJ_CREATE_SIGNALED, &r.in));
    }
    put_fill(c.cmdmap, 0, 0, 0);
    CHECK(pthread_create(&ts, NULL, race_submit, &r) == 0, "thread");
    CHECK(pthread_create(&tr, NULL, race_reset, &r) == 0, "thread");
    CHECK(pthread_create(&tc, NULL, race_close, &r) == 0, "thread");
    sleep(4);
    r.stop = 1;
    ok1 = join_within(ts, 15000);
    ok2 = join_within(tr, 15000);
    ok3 = join_within(tc, 15000);
    printf("submit_race: %ld submits (%ld refused), %ld resets, %ld handle closes, %u BOs a job\n",
           r.submits, r.errors, r.resets, r.closes, r.nbo);
    if (!ok1 || !ok2 || !ok3) {
        /* a SUBMIT or RESET stuck in the driver: never returns */
        FAIL("threads still in the driver 15 s after the race: submit %s, reset %s, close %s",
             ok1 ? "ended" : "STUCK", ok2 ? "ended" : "STUCK", ok3 ? "ended" : "STUCK");
    }
    CHECK(r.submits > 0 && r.resets > 0 && r.closes > 0, "the race did not run");
    if (have_far)
        far_fence_end(&p, sf);
    /* every BO still usable: a job on all of them runs */
    CHECK_OK(bo_new(c.fd, 4096, NULL, &data));
    ref.handle = data.handle;
    ref.access = DRM_TX8_ACCESS_WRITE;
    CHECK_OK(run_fill(&c, data.dev_addr, 4096, 0x5au, &ref, 1, &w));
    CHECK(w.status == DRM_TX8_STATUS_OK, "a job after the race: status %u", w.status);
    for (unsigned i = 0; i < r.nbo; i++) {
        memset(&w, 0, sizeof(w));
        w.handle = r.handles[i];
        w.timeout_ns = now_ns() + 5000000000ll;
        CHECK_OK(xioctl(c.fd, DRM_IOCTL_TX8_WAIT, &w));
    }
    ctx_close(&c);
    CHECK_OK(write_file(JOB_TIMEOUT, "5000"));
    for (int i = 0; i < 50; i++) {
        CHECK(read_file("/proc/tx_meminfo", text, sizeof(text)) > 0, "read /proc/tx_meminfo");
        if (meminfo_value(text, "DeviceUsed") == used0)
            break;
        usleep(100000);
    }
    CHECK(meminfo_value(text, "DeviceUsed") == used0, "device memory not freed: %lld kB, was %lld",
          meminfo_value(text, "DeviceUsed"), used0);
    return 0;
}


#define FAULT_RESTART_PARAM "/sys/module/tx8/parameters/fault_restart_delay_us"
#define FR_KEEP 64

/*
 * The child of t_fault_restart: maps and touches its BO again and again
 * (every touch a page fault) until the device's restart makes a touch
 * fail, then checks its last FR_KEEP mappings: none may still reach the
 * memory. Exit 0, or 1 with a message.
 */
static int fault_restart_child(void)
{
    static volatile uint32_t *maps[FR_KEEP];
    struct drm_tx8_bo_create bo;
    volatile unsigned n = 0;
    volatile unsigned live = 0;
    int fd = dev_open(dev_index);

    if (fd < 0 || bo_new(fd, 4096, NULL, &bo))
        return 1;
    signal(SIGBUS, on_sigbus);
    signal(SIGSEGV, on_sigbus);
    if (sigsetjmp(segv_jmp, 1) == 0) {
        for (;;) {
            volatile uint32_t *p = bo_map(fd, &bo);

            if (!p) {
                printf("fault_restart: mmap failed before the restart showed\n");
                return 1;
            }
            if (maps[n % FR_KEEP])
                munmap((void *)maps[n % FR_KEEP], 4096);
            maps[n % FR_KEEP] = p;
            n = n + 1;
            (void)p[0]; /* the fault */
            if (n > 2000000) {
                printf("fault_restart: the restart never showed in the mapping\n");
                return 1;
            }
        }
    }
    /* the restart showed: every mapping, old or new, is gone */
    for (volatile unsigned i = 0; i < FR_KEEP; i++) {
        if (!maps[i])
            continue;
        if (sigsetjmp(segv_jmp, 1) == 0) {
            (void)maps[i][0];
            live++;
        }
    }
    if (live) {
        printf("fault_restart: %u of the last %u mappings still reach device memory after the restart (%u faults)\n",
               live, FR_KEEP, n);
        return 1;
    }
    printf("fault_restart: %u faults before the restart showed, no mapping left\n", n);
    return 0;
}

/*
 * Faults racing a device restart: the restart's zap must come after every
 * PTE the fault handler inserts on a "not restarted" check, or a mapping
 * keeps reaching memory that may be another peer's now. The test knob
 * fault_restart_delay_us widens the window between check and insert.
 */
static int t_fault_restart(void)
{
    char addr[64];
    struct ctx c;
    int status, r;
    pid_t pid;

    CHECK_OK(pci_addr(dev_index, addr, sizeof(addr)));
    CHECK(access(FAULT_RESTART_PARAM, F_OK) == 0,
          "no test knob fault_restart_delay_us (the window cannot be widened)");
    CHECK_OK(write_file(FAULT_RESTART_PARAM, "20000"));
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0)
        _exit(fault_restart_child());
    usleep(500000);
    CHECK_OK(ctx_open(&c, dev_index));
    CHECK_OK(inject(c.fd, DRM_TX8_FAULT_RESTART, 0, 1));
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    write_file(FAULT_RESTART_PARAM, "0");
    ctx_close(&c);
    CHECK_OK(write_file("/sys/bus/pci/drivers/tx8/unbind", addr));
    CHECK_OK(wait_for_node(dev_index, false, 5000));
    r = rebind_ok(addr);
    CHECK(r == 0, "rebind after the restart: %d", r);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %#x", status);
    return 0;
}


/*
 * BOs are not shareable: a GEM_FLINK name of one file's BO cannot be
 * opened (GEM_OPEN) by another file, and so gives nobody else its memory.
 */
static int t_gem_flink(void)
{
    struct drm_tx8_bo_create bo;
    struct drm_gem_flink fl;
    struct drm_gem_open op;
    int a = dev_open(dev_index), b = dev_open(dev_index), r;

    CHECK(a >= 0 && b >= 0, "open");
    CHECK_OK(bo_new(a, 4096, "vmtest-flink", &bo));
    memset(&fl, 0, sizeof(fl));
    fl.handle = bo.handle;
    r = xioctl(a, DRM_IOCTL_GEM_FLINK, &fl);
    if (r) {
        /* no global name at all: nothing to open */
        printf("gem_flink: GEM_FLINK refused (%s)\n", strerror(-r));
    } else {
        memset(&op, 0, sizeof(op));
        op.name = fl.name;
        r = xioctl(b, DRM_IOCTL_GEM_OPEN, &op);
        CHECK(r < 0, "another file opened the BO by its flink name (handle %u, size %llu)",
              op.handle, (unsigned long long)op.size);
        CHECK(r == -EACCES, "GEM_OPEN by another file: %d (%s), expected -EACCES", r,
              strerror(-r));
        /* the creator itself may: one more handle of its own BO */
        memset(&op, 0, sizeof(op));
        op.name = fl.name;
        CHECK_OK(xioctl(a, DRM_IOCTL_GEM_OPEN, &op));
        CHECK(op.size == bo.size, "creator's GEM_OPEN: size %llu", (unsigned long long)op.size);
        CHECK_OK(bo_close(a, op.handle));
    }
    close(a);
    close(b);
    return 0;
}

static const struct test {
    const char *name;
    int (*fn)(void);
} tests[] = {
    {"query", t_query},
    {"bo_create", t_bo_create},
    {"mmap", t_mmap},
    {"submit_args", t_submit_args},
    {"job_status", t_job_status},
    {"deps", t_deps},
    {"isolation", t_isolation},
    {"zero_copy", t_zero_copy},
    {"meminfo", t_meminfo},
    {"fdinfo", t_fdinfo},
    {"sysfs", t_sysfs},
    {"hwmon", t_hwmon},
    {"client_energy", t_client_energy},
    {"close_frees", t_close_frees},
    {"stress", t_stress},
    {"hang_reset", t_hang_reset},
    {"two_devices", t_two_devices},
    {"unbind", t_unbind},
    {"reload", t_reload},
    {"mmap_cow", t_mmap_cow},
    {"mmap_split", t_mmap_split},
    {"history_race", t_history_race},
    {"irq_lock_order", t_irq_lock_order},
    {"reset_scope", t_reset_scope},
    {"fence_bounds", t_fence_bounds},
    {"unbind_submit", t_unbind_submit},
    {"fence_lifetime", t_fence_lifetime},
    {"fence_unrun", t_fence_unrun},
    {"reset_taken", t_reset_taken},
    {"dev_bad_record", t_dev_bad_record},
    {"dev_bad_caps", t_dev_bad_caps},
    {"dev_bad_lease", t_dev_bad_lease},
    {"dev_restart", t_dev_restart},
    {"dev_stop", t_dev_stop},
    {"fuzz", t_fuzz},
    {"bo_wait_resv", t_bo_wait_resv},
    {"meminfo_keys", t_meminfo_keys},
    {"small_items", t_small_items},
    {"fairness", t_fairness},
    {"priority", t_priority},
    {"priority_low", t_priority_low},
    {"timeout_start", t_timeout_start},
    {"profile", t_profile},
    {"batch_invariant", t_batch_invariant},
    {"txtop_user", t_txtop_user},
    {"reset_deadline", t_reset_deadline},
    {"reset_toctou", t_reset_toctou},
    {"reset_caps", t_reset_caps},
    {"history_bound", t_history_bound},
    {"submit_race", t_submit_race},
    {"fault_restart", t_fault_restart},
    {"gem_flink", t_gem_flink},
};

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2 || !strcmp(argv[1], "list")) {
        for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
            printf("%s\n", tests[i].name);
        return argc < 2 ? 2 : 0;
    }
    if (argc > 2)
        dev_index = atoi(argv[2]);
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        if (strcmp(argv[1], tests[i].name))
            continue;
        test_name = tests[i].name;
        if (tests[i].fn())
            return 1;
        printf("PASS %s\n", test_name);
        return 0;
    }
    fprintf(stderr, "tx8_vmtest: no test '%s'\n", argv[1]);
    return 2;
}
