/* SPDX-License-Identifier: MIT */
/*
 * glm-server's connection admission and read deadlines: what keeps idle,
 * slow and hostile clients from starving the server (docs/glm-server.md,
 * "Connections and timeouts").
 *
 * Every connection libmicrohttpd accepts is tracked here (its notify-
 * connection callback) with its phase and the time it entered it:
 *
 *   WAIT      open, or its last reply sent: waiting for a request
 *   HEADERS   the request line is in (MHD's URI-log callback)
 *   BODY      the headers are in (the first call of the access handler)
 *   HANDLING  the body is in: the request is being answered
 *
 * A watchdog thread closes (shutdown(2): the connection's thread sees EOF
 * and MHD cleans up) a connection that overstays its phase:
 *
 *   WAIT      --idle-timeout, and --idle-timeout + --header-timeout even
 *             while bytes trickle in (a client that sends one byte a
 *             second never finishes a request line)
 *   HEADERS   --header-timeout
 *   BODY      --body-timeout
 *   HANDLING  none: a request ends by itself or when its client goes away
 *
 * Admission: a new connection when --max-connections are open closes the
 * one that has waited longest of those not being answered (WAIT, HEADERS
 * or BODY), so that idle sockets can never lock out /health or a real
 * request; when every open connection is being answered the new one is
 * refused (closed at once) instead of hanging in the listen backlog.
 * Requests being answered are bounded by --parallel + --queue-limit, and
 * --max-connections is at least that plus a reserve, so /health and
 * /metrics always find room.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

#include "conn.h"
#include "server.h"

struct conn {
    struct conn *prev, *next;
    int fd;
    enum conn_phase phase;
    double since;    /* entered the phase (monotonic seconds) */
    double wait_t0;  /* entered WAIT */
    int closing;     /* shut down by us; MHD has not closed it yet */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct conn head; /* circular list, oldest WAIT first is not kept: scanned */
    int n_open, n_closing;
    int stop;
    pthread_t watchdog;
    int watchdog_running;
    const struct srv_opts *o;
    struct srv_metrics *mx;
} C = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* C.mu held */
static void conn_close_locked(struct conn *k, uint64_t *counter)
{
    if (k->closing)
        return;
    k->closing = 1;
    C.n_closing++;
    shutdown(k->fd, SHUT_RDWR);
    if (counter)
        __atomic_add_fetch(counter, 1, __ATOMIC_SEQ_CST);
}

/* C.mu held: close the connection not being answered that has waited
 * longest; 0 if there is none. */
static int evict_one_locked(void)
{
    struct conn *best = NULL;
    for (struct conn *k = C.head.next; k != &C.head; k = k->next)
        if (!k->closing && k->phase != CONN_HANDLING && (!best || k->since < best->since))
            best = k;
    if (!best)
        return 0;
    conn_close_locked(best, &C.mx->conn_evicted);
    return 1;
}

enum MHD_Result conn_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)cls;
    (void)addr;
    (void)addrlen;
    enum MHD_Result ok = MHD_YES;
    pthread_mutex_lock(&C.mu);
    if (C.n_open - C.n_closing >= C.o->max_connections && !evict_one_locked()) {
        ok = MHD_NO;
        __atomic_add_fetch(&C.mx->conn_refused, 1, __ATOMIC_SEQ_CST);
    }
    pthread_mutex_unlock(&C.mu);
    return ok;
}

void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                 enum MHD_ConnectionNotificationCode code)
{
    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        struct conn *k = calloc(1, sizeof(*k));
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = k;
        if (!k)
            return;
        k->fd = ci ? ci->connect_fd : -1;
        k->phase = CONN_WAIT;
        k->since = k->wait_t0 = srv_now();
        pthread_mutex_lock(&C.mu);
        k->next = &C.head;
        k->prev = C.head.prev;
        C.head.prev->next = k;
        C.head.prev = k;
        C.n_open++;
        pthread_mutex_unlock(&C.mu);
        __atomic_add_fetch(&C.mx->conn_accepted, 1, __ATOMIC_SEQ_CST);
        return;
    }
    struct conn *k = *socket_context;
    *socket_context = NULL;
    if (!k)
        return;
    pthread_mutex_lock(&C.mu);
    k->prev->next = k->next;
    k->next->prev = k->prev;
    C.n_open--;
    if (k->closing)
        C.n_closing--;
    pthread_mutex_unlock(&C.mu);
    free(k);
}

void conn_set_phase(struct MHD_Connection *c, enum conn_phase phase)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct conn *k = ci ? ci->socket_context : NULL;
    if (!k)
        return;
    pthread_mutex_lock(&C.mu);
    if (k->phase != phase) {
        k->phase = phase;
        k->since = srv_now();
        if (phase == CONN_WAIT)
            k->wait_t0 = k->since;
    }
    pthread_mutex_unlock(&C.mu);
}

int conn_open_count(void)
{
    pthread_mutex_lock(&C.mu);
    int n = C.n_open;
    pthread_mutex_unlock(&C.mu);
    return n;
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&C.mu);
    while (!C.stop) {
        double now = srv_now();
        double idle = C.o->idle_timeout_s, hdr = C.o->header_timeout_s, body = C.o->body_timeout_s;
        for (struct conn *k = C.head.next; k != &C.head; k = k->next) {
            if (k->closing)
                continue;
            double in = now - k->since;
            int late = (k->phase == CONN_WAIT && (in > idle || now - k->wait_t0 > idle + hdr)) ||
                       (k->phase == CONN_HEADERS && in > hdr) ||
                       (k->phase == CONN_BODY && in > body);
            if (late)
                conn_close_locked(k, &C.mx->conn_timed_out);
        }
        srv_cond_wait_ms(&C.cv, &C.mu, 250);
    }
    pthread_mutex_unlock(&C.mu);
    return NULL;
}

int conn_start(struct srv *S)
{
    C.o = &S->o;
    C.mx = &S->mx;
    C.head.next = C.head.prev = &C.head;
    C.stop = 0;
    if (pthread_create(&C.watchdog, NULL, watchdog_main, NULL))
        return -1;
    C.watchdog_running = 1;
    return 0;
}

void conn_stop(void)
{
    if (!C.watchdog_running)
        return;
    pthread_mutex_lock(&C.mu);
    C.stop = 1;
    pthread_cond_signal(&C.cv);
    pthread_mutex_unlock(&C.mu);
    pthread_join(C.watchdog, NULL);
    C.watchdog_running = 0;
}
