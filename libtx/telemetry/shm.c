/* SPDX-License-Identifier: MIT */
/*
 * libtx telemetry channel: publisher and reader of the per-process
 * shared-memory objects (tx/tx_telemetry.h, layout in telemetry_shm.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tx-internal/tx_errors.h>
#include "common/settings.h"
#include "telemetry/telemetry_shm.h"

struct tx_telemetry_pub {
    pthread_mutex_t lock;
    struct txt_shm_hdr *hdr; /* the mapping */
    uint64_t *layer_ns;
    uint64_t *counts;
    size_t size;
    uint32_t layers, experts;
    char path[PATH_MAX];
};

static const struct tx_setting telemetry_settings[] = {
    {"TX_TELEMETRY_DIR", TX_SETTING_TEXT, "a directory", 0, 0, "/dev/shm", 0, NULL,
     "where the telemetry channels (tx-top) are created and found"},
};

const struct tx_setting_table tx_settings_telemetry = {
    "telemetry", "at every channel opened (printed) or scanned", telemetry_settings, 1};

/* print: under TX_DEBUG (a publisher's open; not every scan of a monitor) */
static const char *telemetry_dir(int print)
{
    struct tx_setting_val v;

    if (print)
        tx_settings_read(&tx_settings_telemetry, "libtx", &v);
    else
        tx_settings_parse(&tx_settings_telemetry, "libtx", &v);
    return v.set ? v.text : "/dev/shm";
}

static uint64_t realtime_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t txt_proc_start_time(int pid)
{
    char path[64], buf[1024];
    unsigned long long st = 0;
    const char *p;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    /* comm may contain spaces and parentheses: fields follow the last ')' */
    p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++;
    /* field 3 (state) is the first after ')'; starttime is field 22 */
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (!p)
            return 0;
    }
    if (sscanf(p + 1, "%llu", &st) != 1)
        return 0;
    return st;
}

/* ------------------------------------------------------------------------ */
/* Publisher                                                                 */
/* ------------------------------------------------------------------------ */

static void copy_name(char *dst, size_t size, const char *src)
{
    size_t n = src ? strlen(src) : 0;

    if (n >= size)
        n = size - 1;
    memset(dst, 0, size);
    if (n)
        memcpy(dst, src, n);
}

/* Whether an existing object of our own PID was left by an earlier process
 * with the same PID (then it may be replaced). */
static int own_pid_stale(const char *path, uint64_t my_start)
{
    struct txt_shm_hdr h;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

    if (fd < 0)
        return errno == ENOENT;
    n = pread(fd, &h, sizeof(h), 0);
    close(fd);
    if (n != (ssize_t)sizeof(h) || h.magic != TXT_MAGIC)
        return 1; /* not a valid object of a live publisher of this process */
    return h.pid != (int32_t)getpid() || h.start_time != my_start;
}

static void sweep_dead(const char *dir);

TX_API int tx_telemetry_open_publisher(const char *model_name, const char *device_name,
                                       uint32_t layers, uint32_t experts, tx_telemetry_pub_t **out)
{
    static unsigned counter;
    const char *dir = telemetry_dir(1);
    struct tx_telemetry_pub *pub;
    char tmp[PATH_MAX];
    uint64_t start = txt_proc_start_time((int)getpid());
    uint64_t size;
    void *map;
    int fd, rc;

    if (!out)
        return tx_error(TX_EINVAL, "tx_telemetry_open_publisher: NULL pub");
    *out = NULL;
    if (!model_name || !*model_name)
        return tx_error(TX_EINVAL, "tx_telemetry_open_publisher: empty model name");
    if (layers == 0 || layers > TX_TELEMETRY_MAX_LAYERS || experts == 0 ||
        experts > TX_TELEMETRY_MAX_EXPERTS || (uint64_t)layers * experts > TX_TELEMETRY_MAX_CELLS)
        return tx_error(TX_EINVAL,
                        "tx_telemetry_open_publisher: %" PRIu32 " layers x %" PRIu32
                        " experts out of range (at most %u x %u, %u cells)",
                        layers, experts, TX_TELEMETRY_MAX_LAYERS, TX_TELEMETRY_MAX_EXPERTS,
                        TX_TELEMETRY_MAX_CELLS);
    size = TXT_HDR_SIZE + 8ull * layers + 8ull * layers * experts;
    /* the objects of publishers that died without closing (SIGKILL, a
     * crash) go now, not when a monitor next looks */
    sweep_dead(dir);

    pub = calloc(1, sizeof(*pub));
    if (!pub)
        return tx_error(TX_ENOMEM, "tx_telemetry_open_publisher: out of memory");
    pthread_mutex_init(&pub->lock, NULL);
    pub->layers = layers;
    pub->experts = experts;
    pub->size = (size_t)size;

    /* Build the object under a hidden name, then link it into place so that
     * readers never see a half-initialised header. */
    snprintf(tmp, sizeof(tmp), "%s/.%s%d-%u.tmp", dir, TXT_PREFIX, (int)getpid(),
             __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        rc = tx_error(tx_errno_code(errno), "tx_telemetry_open_publisher: cannot create %s: %s",
                      tmp, strerror(errno));
        goto fail;
    }
    fchmod(fd, 0644); /* readable by monitors of other users whatever the umask */
    if (ftruncate(fd, (off_t)size) < 0) {
        rc = tx_error(tx_errno_code(errno), "tx_telemetry_open_publisher: %s: %s", tmp,
                      strerror(errno));
        close(fd);
        unlink(tmp);
        goto fail;
    }
    map = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        rc = tx_error(tx_errno_code(errno), "tx_telemetry_open_publisher: mmap %s: %s", tmp,
                      strerror(errno));
        unlink(tmp);
        goto fail;
    }
    pub->hdr = map;
    pub->layer_ns = (uint64_t *)((char *)map + TXT_HDR_SIZE);
    pub->counts = pub->layer_ns + layers;
    pub->hdr->magic = TXT_MAGIC;
    pub->hdr->version = TX_TELEMETRY_VERSION;
    pub->hdr->header_size = TXT_HDR_SIZE;
    pub->hdr->seq = 0;
    pub->hdr->total_size = size;
    pub->hdr->pid = (int32_t)getpid();
    pub->hdr->layers = layers;
    pub->hdr->experts = experts;
    pub->hdr->start_time = start;
    pub->hdr->created_ns = realtime_ns();
    pub->hdr->layer_offset = TXT_HDR_SIZE;
    pub->hdr->counts_offset = TXT_HDR_SIZE + 8ull * layers;
    copy_name(pub->hdr->model, sizeof(pub->hdr->model), model_name);
    copy_name(pub->hdr->device, sizeof(pub->hdr->device), device_name);

    /* tx8-telemetry-<pid>, then <pid>.1, <pid>.2, ... for further
     * publishers of this process. */
    rc = TX_EIO;
    for (unsigned n = 0; n < 1000; n++) {
        if (n == 0)
            snprintf(pub->path, sizeof(pub->path), "%s/%s%d", dir, TXT_PREFIX, (int)getpid());
        else
            snprintf(pub->path, sizeof(pub->path), "%s/%s%d.%u", dir, TXT_PREFIX, (int)getpid(), n);
        if (link(tmp, pub->path) == 0) {
            rc = TX_OK;
            break;
        }
        if (errno != EEXIST) {
            rc = tx_error(tx_errno_code(errno), "tx_telemetry_open_publisher: link %s: %s",
                          pub->path, strerror(errno));
            break;
        }
        if (own_pid_stale(pub->path, start) && unlink(pub->path) == 0 &&
            link(tmp, pub->path) == 0) {
            rc = TX_OK;
            break;
        }
    }
    unlink(tmp);
    if (rc != TX_OK) {
        if (rc == TX_EIO)
            tx_error(TX_EIO, "tx_telemetry_open_publisher: no free object name in %s", dir);
        munmap(map, (size_t)size);
        goto fail;
    }
    *out = pub;
    return TX_OK;

fail:
    pthread_mutex_destroy(&pub->lock);
    free(pub);
    return rc;
}

TX_API int tx_telemetry_update_experts(tx_telemetry_pub_t *pub, uint32_t layer,
                                       const uint64_t *counts, uint32_t n)
{
    struct txt_shm_hdr *h;
    uint64_t *dst;
    uint32_t s;

    if (!pub || (!counts && n))
        return tx_error(TX_EINVAL, "tx_telemetry_update_experts: NULL %s",
                        !pub ? "publisher" : "counts");
    if (layer >= pub->layers)
        return tx_error(TX_EINVAL,
                        "tx_telemetry_update_experts: layer %" PRIu32 " >= %" PRIu32 " layers",
                        layer, pub->layers);
    if (n > pub->experts)
        return tx_error(TX_EINVAL,
                        "tx_telemetry_update_experts: %" PRIu32 " counts for %" PRIu32 " experts",
                        n, pub->experts);
    h = pub->hdr;
    dst = pub->counts + (size_t)layer * pub->experts;
    pthread_mutex_lock(&pub->lock);
    s = __atomic_load_n(&h->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&h->seq, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    for (uint32_t e = 0; e < n; e++)
        __atomic_store_n(&dst[e], counts[e], __ATOMIC_RELAXED);
    uint64_t now = realtime_ns();
    __atomic_store_n(&pub->layer_ns[layer], now, __ATOMIC_RELAXED);
    __atomic_store_n(&h->updated_ns, now, __ATOMIC_RELAXED);
    __atomic_store_n(&h->updates, h->updates + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&h->seq, s + 2, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&pub->lock);
    return TX_OK;
}

TX_API int tx_telemetry_update_cache(tx_telemetry_pub_t *pub, const struct tx_telemetry_cache *c)
{
    struct txt_shm_hdr *h;
    uint32_t s;

    if (!pub || !c)
        return tx_error(TX_EINVAL, "tx_telemetry_update_cache: NULL argument");
    h = pub->hdr;
    pthread_mutex_lock(&pub->lock);
    s = __atomic_load_n(&h->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&h->seq, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    h->cache = *c;
    __atomic_store_n(&h->flags, h->flags | TXT_F_CACHE, __ATOMIC_RELAXED);
    __atomic_store_n(&h->seq, s + 2, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&pub->lock);
    return TX_OK;
}

TX_API int tx_telemetry_close(tx_telemetry_pub_t *pub)
{
    if (!pub)
        return TX_OK;
    unlink(pub->path);
    munmap(pub->hdr, pub->size);
    pthread_mutex_destroy(&pub->lock);
    free(pub);
    return TX_OK;
}

TX_API const char *tx_telemetry_path(const tx_telemetry_pub_t *pub)
{
    return pub ? pub->path : "";
}

/* ------------------------------------------------------------------------ */
/* Reader                                                                    */
/* ------------------------------------------------------------------------ */

/* "tx8-telemetry-<pid>" or "tx8-telemetry-<pid>.<n>": the PID, else -1. */
static int name_pid(const char *name)
{
    const char *p;
    char *end;
    long pid;

    if (strncmp(name, TXT_PREFIX, strlen(TXT_PREFIX)))
        return TX_NONE;
    p = name + strlen(TXT_PREFIX);
    if (*p < '1' || *p > '9')
        return TX_NONE;
    errno = 0;
    pid = strtol(p, &end, 10);
    if (errno || pid <= 0 || pid > INT32_MAX)
        return TX_NONE;
    if (*end == '.') {
        const char *q = end + 1;

        if (!*q)
            return TX_NONE;
        for (; *q; q++)
            if (*q < '0' || *q > '9')
                return TX_NONE;
    } else if (*end) {
        return TX_NONE;
    }
    return (int)pid;
}

enum { OBJ_OK, OBJ_SKIP, OBJ_STALE };

static int publisher_dead(int pid, uint64_t start_time);

/* ".tx8-telemetry-<pid>-<n>.tmp" (an object being built): the PID, else -1 */
static int tmp_name_pid(const char *name)
{
    char *end;
    long pid;

    if (name[0] != '.' || strncmp(name + 1, TXT_PREFIX, strlen(TXT_PREFIX)))
        return TX_NONE;
    errno = 0;
    pid = strtol(name + 1 + strlen(TXT_PREFIX), &end, 10);
    if (errno || pid <= 0 || pid > INT32_MAX || *end != '-' || !strstr(end, ".tmp"))
        return TX_NONE;
    return (int)pid;
}

/*
 * Unlinks the objects (and half-built hidden objects) in dir whose
 * publisher is gone: a process that no longer exists, or whose PID now
 * belongs to a process started later than the object's. Objects of other
 * users are left (unlinkat fails without permission: ignored).
 */
static void sweep_dead(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;

    if (!d)
        return;
    while ((de = readdir(d))) {
        int pid = name_pid(de->d_name), tmp = 0;
        uint64_t start = 0;

        if (pid < 0) {
            pid = tmp_name_pid(de->d_name);
            tmp = 1;
        }
        if (pid < 0 || pid == (int)getpid())
            continue;
        if (!tmp) {
            struct txt_shm_hdr h;
            int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

            if (fd < 0)
                continue;
            if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && h.magic == TXT_MAGIC &&
                h.pid == pid)
                start = h.start_time;
            close(fd);
        }
        if (publisher_dead(pid, start))
            unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
}

/* Whether the object's publisher is gone. */
static int publisher_dead(int pid, uint64_t start_time)
{
    uint64_t now_start;

    if (kill(pid, 0) < 0 && errno == ESRCH)
        return 1;
    if (!start_time)
        return 0;
    now_start = txt_proc_start_time(pid);
    /* a different process now has this PID */
    return now_start && now_start != start_time;
}

/*
 * Read one object into m (arrays malloc()ed into *layer_valid / *counts).
 * Reads with pread (never mmap: a publisher that truncates its object must
 * not crash the reader).
 */
static int read_object(int dirfd, const char *name, int pid, struct tx_telemetry_model *m,
                       uint8_t **layer_valid, uint64_t **counts)
{
    struct txt_shm_hdr h;
    struct stat st;
    uint64_t *data = NULL;
    size_t data_size;
    int fd, result = OBJ_SKIP;

    fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return OBJ_SKIP;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)TXT_HDR_SIZE)
        goto out;
    if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
        goto out;
    if (h.magic != TXT_MAGIC || h.header_size != TXT_HDR_SIZE || h.pid != pid)
        goto out;
    /* An object of a dead publisher is stale whatever its version. */
    if (publisher_dead(pid, h.start_time)) {
        result = OBJ_STALE;
        goto out;
    }
    if (h.version != TX_TELEMETRY_VERSION)
        goto out;
    if (h.layers == 0 || h.layers > TX_TELEMETRY_MAX_LAYERS || h.experts == 0 ||
        h.experts > TX_TELEMETRY_MAX_EXPERTS ||
        (uint64_t)h.layers * h.experts > TX_TELEMETRY_MAX_CELLS)
        goto out;
    if (h.layer_offset != TXT_HDR_SIZE || h.counts_offset != TXT_HDR_SIZE + 8ull * h.layers ||
        h.total_size != h.counts_offset + 8ull * h.layers * h.experts ||
        (uint64_t)st.st_size < h.total_size)
        goto out;
    data_size = (size_t)(h.total_size - TXT_HDR_SIZE);
    data = malloc(data_size);
    *layer_valid = malloc(h.layers);
    if (!data || !*layer_valid)
        goto out;

    for (int attempt = 0; attempt < 16; attempt++) {
        uint32_t s2;

        if (attempt) {
            if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
                goto out;
            if (h.total_size != TXT_HDR_SIZE + data_size)
                goto out; /* the layout changed under us */
        }
        if (h.seq & 1) {
            sched_yield();
            continue;
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (pread(fd, data, data_size, TXT_HDR_SIZE) != (ssize_t)data_size)
            goto out;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (pread(fd, &s2, sizeof(s2), offsetof(struct txt_shm_hdr, seq)) != sizeof(s2))
            goto out;
        if (s2 != h.seq) {
            sched_yield();
            continue;
        }
        memset(m, 0, sizeof(*m));
        m->pid = pid;
        memcpy(m->model, h.model, sizeof(m->model));
        m->model[sizeof(m->model) - 1] = 0;
        memcpy(m->device, h.device, sizeof(m->device));
        m->device[sizeof(m->device) - 1] = 0;
        m->layers = h.layers;
        m->experts = h.experts;
        m->created_ns = h.created_ns;
        m->updated_ns = h.updated_ns;
        m->updates = h.updates;
        m->has_cache = (h.flags & TXT_F_CACHE) != 0;
        if (m->has_cache)
            m->cache = h.cache;
        for (uint32_t l = 0; l < h.layers; l++)
            (*layer_valid)[l] = data[l] != 0;
        *counts = data;
        data = NULL;
        result = OBJ_OK;
        break;
    }
out:
    free(data);
    close(fd);
    return result;
}

struct entry {
    int pid;
    char name[NAME_MAX + 1];
};

static int cmp_entry(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;

    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return strcmp(x->name, y->name);
}

TX_API int tx_telemetry_scan(tx_telemetry_scan_cb cb, void *arg, unsigned *skipped)
{
    const char *dir = telemetry_dir(0);
    struct entry *list = NULL;
    size_t n = 0, cap = 0;
    unsigned skip = 0;
    int visited = 0, dfd;
    struct dirent *de;
    DIR *d;

    if (skipped)
        *skipped = 0;
    if (!cb)
        return tx_error(TX_EINVAL, "tx_telemetry_scan: NULL callback");
    d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0; /* no /dev/shm: nothing published */
        return tx_error(tx_errno_code(errno), "tx_telemetry_scan: %s: %s", dir, strerror(errno));
    }
    while ((de = readdir(d))) {
        int pid = name_pid(de->d_name);

        if (pid < 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct entry *nl = realloc(list, ncap * sizeof(*nl));

            if (!nl)
                break;
            list = nl;
            cap = ncap;
        }
        list[n].pid = pid;
        snprintf(list[n].name, sizeof(list[n].name), "%s", de->d_name);
        n++;
    }
    if (n)
        qsort(list, n, sizeof(*list), cmp_entry);
    dfd = dirfd(d);
    for (size_t i = 0; i < n; i++) {
        struct tx_telemetry_model m;
        uint8_t *valid = NULL;
        uint64_t *data = NULL;
        int r = read_object(dfd, list[i].name, list[i].pid, &m, &valid, &data);

        if (r == OBJ_STALE) {
            unlinkat(dfd, list[i].name, 0); /* may fail without permission: ignored */
        } else if (r == OBJ_SKIP) {
            skip++;
        } else {
            int stop;

            snprintf(m.path, sizeof(m.path), "%s/%s", dir, list[i].name);
            m.layer_valid = valid;
            m.counts = data + m.layers;
            visited++;
            stop = cb(&m, arg);
            free(valid);
            free(data);
            if (stop)
                break;
            continue;
        }
        free(valid);
        free(data);
    }
    closedir(d);
    free(list);
    if (skipped)
        *skipped = skip;
    return visited;
}

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

TX_API double tx_telemetry_util_std(const uint64_t *counts, uint32_t n)
{
    double total = 0, mean, s2 = 0;

    if (!counts || n == 0)
        return 0;
    for (uint32_t e = 0; e < n; e++)
        total += (double)counts[e];
    if (total <= 0)
        return 0;
    mean = total / n;
    for (uint32_t e = 0; e < n; e++) {
        double u = (double)counts[e] / mean - 1.0;

        s2 += u * u;
    }
    return sqrt(s2 / n) * 100.0;
}

TX_API int tx_telemetry_model_stats(const struct tx_telemetry_model *m,
                                    struct tx_telemetry_stats *st)
{
    double all_s2 = 0, sum_std = 0;
    uint64_t all_n = 0;
    uint32_t valid = 0;

    if (!m || !st || !m->counts || !m->layer_valid)
        return tx_error(TX_EINVAL, "tx_telemetry_model_stats: NULL argument");
    memset(st, 0, sizeof(*st));
    st->max_layer = -1;
    st->min_share = NAN;
    for (uint32_t l = 0; l < m->layers; l++) {
        const uint64_t *c = m->counts + (size_t)l * m->experts;
        uint64_t tot = 0, mx = 0, mn = UINT64_MAX;
        double layer_std, mean;

        if (!m->layer_valid[l])
            continue;
        valid++;
        for (uint32_t e = 0; e < m->experts; e++) {
            tot += c[e];
            mx = c[e] > mx ? c[e] : mx;
            mn = c[e] < mn ? c[e] : mn;
        }
        if (!tot)
            continue;
        st->moe_layers++;
        st->total += tot;
        mean = (double)tot / m->experts;
        for (uint32_t e = 0; e < m->experts; e++) {
            double u = (double)c[e] / mean - 1.0;

            all_s2 += u * u;
            all_n++;
        }
        layer_std = tx_telemetry_util_std(c, m->experts);
        sum_std += layer_std;
        if (st->max_layer < 0 || layer_std > st->max_layer_std) {
            st->max_layer_std = layer_std;
            st->max_layer = (int32_t)l;
        }
        if (100.0 * (double)mx / (double)tot > st->max_share)
            st->max_share = 100.0 * (double)mx / (double)tot;
        if (isnan(st->min_share) || 100.0 * (double)mn / (double)tot < st->min_share)
            st->min_share = 100.0 * (double)mn / (double)tot;
    }
    if (isnan(st->min_share))
        st->min_share = 0;
    st->overall_std = all_n ? sqrt(all_s2 / (double)all_n) * 100.0 : 0;
    st->mean_layer_std = valid ? sum_std / valid : 0;
    return TX_OK;
}
