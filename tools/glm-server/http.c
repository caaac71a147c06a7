/* SPDX-License-Identifier: MIT */
/*
 * glm-server's HTTP layer on libmicrohttpd (Debian's libmicrohttpd12).
 *
 * Mode: event-driven: a small pool of threads, each with its own epoll set
 * (MHD_USE_AUTO_INTERNAL_THREAD with MHD_OPTION_THREAD_POOL_SIZE), and no
 * handler ever blocks. A completion's handler queues its request and
 * suspends the connection (MHD_suspend_connection); a stream's content
 * reader suspends it when it has no event to send. The scheduler thread --
 * the only one driving the device -- marks a request's connection to be
 * woken when its output or state changes (http_wake) and resumes it
 * outside its lock (http_wake_flush); libmicrohttpd then calls the handler
 * or the reader again. A suspended connection's socket is not watched by
 * libmicrohttpd, so the scheduler looks at those sockets every 50 ms
 * (http_reap_gone: poll POLLRDHUP): a client that has gone away cancels
 * its request, and its slot is free before the next device pass. Idle
 * connections cost no thread, only their buffers.
 *
 * Connections are admitted, evicted and timed out by conn.c: idle and
 * slow clients cannot hold the server (docs/glm-server.md).
 *
 * Bodies: accumulated up to --body-limit bytes (413 beyond, also when
 * Content-Length announces more). With --api-key every endpoint but
 * /health and /metrics needs "Authorization: Bearer KEY" (401 otherwise;
 * the scheme's name in any case, as RFC 9110 says); /metrics needs
 * --metrics-key when that is set. CORS: --cors-origin (default "*", as
 * llama-server and vLLM; "none" turns it off) answers a browser's
 * preflight (OPTIONS) and marks every reply.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "conn.h"
#include "server.h"

struct http_ctx {
    struct srv *S;
    struct MHD_Connection *c;
    char *body;
    size_t len, cap;
    int too_big;
    struct request *req; /* its completion request (released when the connection is done) */
    int suspended;       /* srv.mu: suspended until the scheduler wakes it */
    struct sse_state sse;
    char *ev; /* event being written */
    size_t ev_len, ev_off;
};

/* HTTP threads: handlers never block, so a few serve any number of
 * connections; more than one so that a long tokenisation (a 1 MiB body)
 * does not hold the others up. */
#define HTTP_THREADS 4

static struct MHD_Daemon *g_daemon;
static int g_inflight; /* requests between their first callback and completion */

int http_client_gone(struct http_ctx *hc)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(hc->c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 1;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
        return 1;
    if (p.revents & POLLIN) { /* EOF, or pipelined bytes (not gone) */
        char b;
        ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0;
    }
    return 0;
}

static int ct_eq(const char *a, const char *b) /* constant time in b's length */
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < lb; i++)
        d |= (unsigned char)(a[i < la ? i : 0] ^ b[i]);
    return d == 0;
}

/* The Origin this reply may name in Access-Control-Allow-Origin, or NULL. */
static const char *cors_allow(const struct srv *S, struct MHD_Connection *c)
{
    const char *list = S->o.cors_origin;
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!list || !strcmp(list, "none") || !origin)
        return NULL;
    if (!strcmp(list, "*"))
        return "*";
    size_t ol = strlen(origin);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == ol && !strncmp(p, origin, n))
            return origin;
        p += n + (e ? 1 : 0);
    }
    return NULL;
}

static enum MHD_Result queue(struct srv *S, struct MHD_Connection *c, unsigned status,
                             struct MHD_Response *resp)
{
    const char *allow = cors_allow(S, c);
    if (allow) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow);
        if (strcmp(allow, "*"))
            MHD_add_response_header(resp, "Vary", "Origin");
    }
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* A browser's preflight: 204 with what the API takes. */
static enum MHD_Result send_preflight(struct srv *S, struct MHD_Connection *c)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Allow", "GET, POST, OPTIONS");
    if (cors_allow(S, c)) {
        const char *rh =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                                rh ? rh : "Authorization, Content-Type");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    }
    return queue(S, c, 204, resp);
}

/* "Authorization: Bearer KEY": the scheme in any case, then the key. */
static int bearer_ok(struct MHD_Connection *c, const char *key)
{
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!a || strncasecmp(a, "Bearer", 6) || (a[6] != ' ' && a[6] != '\t'))
        return 0;
    a += 6;
    while (*a == ' ' || *a == '\t')
        a++;
    return ct_eq(a, key);
}

static enum MHD_Result send_json(struct srv *S, struct MHD_Connection *c, int status, char *body)
{
    if (!body)
        body = strdup("{}");
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    if (status == 503)
        MHD_add_response_header(resp, "Retry-After", "1");
    if (status == 401)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    return queue(S, c, (unsigned)status, resp);
}

static enum MHD_Result send_reloading(struct srv *S, struct MHD_Connection *c)
{
    return send_json(S, c, 503, api_error_json(503, "the model is being reloaded; retry later"));
}

/* srv.mu held: wait for the scheduler (http_wake resumes the connection). */
static void suspend_locked(struct http_ctx *hc)
{
    hc->suspended = 1;
    for (int i = 0; i < choices_count(hc->req); i++) /* n > 1: any choice wakes it */
        choices_get(hc->req, i)->hc = hc;
    MHD_suspend_connection(hc->c);
}

void http_wake(struct srv *S, struct request *r)
{
    struct http_ctx *hc = r->hc;
    if (!hc || !hc->suspended)
        return;
    if (S->n_wake == S->wake_cap) {
        int cap = S->wake_cap ? 2 * S->wake_cap : 64;
        struct MHD_Connection **w = realloc(S->wake, (size_t)cap * sizeof(*w));
        if (!w)
            return; /* woken by the next change, or the 50 ms socket check */
        S->wake = w;
        S->wake_cap = cap;
    }
    /* suspended: libmicrohttpd calls nothing of this connection until it is
     * resumed, so c stays valid until http_wake_flush resumes it */
    hc->suspended = 0;
    S->wake[S->n_wake++] = hc->c;
}

void http_wake_flush(struct srv *S)
{
    struct MHD_Connection *w[64];
    for (;;) {
        pthread_mutex_lock(&S->mu);
        int n = S->n_wake < 64 ? S->n_wake : 64;
        S->n_wake -= n;
        if (n)
            memcpy(w, S->wake + S->n_wake, (size_t)n * sizeof(*w));
        pthread_mutex_unlock(&S->mu);
        if (!n)
            return;
        for (int i = 0; i < n; i++)
            MHD_resume_connection(w[i]);
    }
}

void http_reap_gone(struct srv *S)
{
    double now = srv_now();
    if (now - S->last_gone_check < 0.05)
        return;
    S->last_gone_check = now;
    struct request *rs[SRV_MAX_PARALLEL];
    int n = 0;
    for (int i = 0; i < S->o.parallel; i++)
        if (S->slots[i].r)
            rs[n++] = S->slots[i].r;
    for (int k = 0; k < n; k++) {
        struct request *r = rs[k];
        if (r->hc && r->hc->suspended && !r->cancelled && http_client_gone(r->hc))
            r->cancelled = 1;
    }
    for (struct request *r = S->q_head; r; r = r->next)
        if (r->hc && r->hc->suspended && !r->cancelled && http_client_gone(r->hc))
            r->cancelled = 1;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct http_ctx *hc = cls;
    struct srv *S = hc->S;
    if (!hc->ev) {
        pthread_mutex_lock(&S->mu);
        int r = sse_next_event(S, hc->req, &hc->sse, &hc->ev, &hc->ev_len);
        if (r == 2)
            suspend_locked(hc);
        pthread_mutex_unlock(&S->mu);
        if (r == 2)
            return 0; /* called again when resumed */
        if (r < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (r == 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
        hc->ev_off = 0;
    }
    size_t n = hc->ev_len - hc->ev_off;
    if (n > max)
        n = max;
    memcpy(buf, hc->ev + hc->ev_off, n);
    hc->ev_off += n;
    if (hc->ev_off == hc->ev_len) {
        free(hc->ev);
        hc->ev = NULL;
    }
    return (ssize_t)n;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    struct http_ctx *hc = *req_cls;
    conn_set_phase(c, CONN_WAIT);
    if (!hc)
        return;
    if (hc->req) {
        pthread_mutex_lock(&hc->S->mu);
        for (int i = 0; i < choices_count(hc->req); i++)
            choices_get(hc->req, i)->hc = NULL;
        pthread_mutex_unlock(&hc->S->mu);
        sched_release(hc->S, hc->req);
    }
    free(hc->ev);
    free(hc->body);
    free(hc);
    *req_cls = NULL;
    __atomic_sub_fetch(&g_inflight, 1, __ATOMIC_SEQ_CST);
}

static int path_is(const char *url, const char *a)
{
    return !strcmp(url, a);
}

/* A non-streaming completion: its reply once done, else suspend (called
 * again when the scheduler wakes the connection). */
static enum MHD_Result answer_when_done(struct srv *S, struct http_ctx *hc)
{
    struct request *r = hc->req;
    pthread_mutex_lock(&S->mu);
    if (!choices_done(r)) {
        suspend_locked(hc);
        pthread_mutex_unlock(&S->mu);
        return MHD_YES;
    }
    int status = 500;
    char *reply = r->err_status == 499 ? NULL : api_final_json(S, r, &status);
    for (int i = 0; i < choices_count(r); i++)
        choices_get(r, i)->hc = NULL;
    pthread_mutex_unlock(&S->mu);
    hc->req = NULL;
    sched_release(S, r);
    if (!reply)
        return MHD_NO; /* the client went away: close */
    return send_json(S, hc->c, status, reply);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)version;
    struct srv *S = cls;
    struct http_ctx *hc = *req_cls;
    if (!hc) {
        hc = calloc(1, sizeof(*hc));
        if (!hc)
            return MHD_NO;
        hc->S = S;
        hc->c = c;
        *req_cls = hc;
        conn_set_phase(c, CONN_BODY);
        __atomic_add_fetch(&g_inflight, 1, __ATOMIC_SEQ_CST);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > S->o.body_limit)
            hc->too_big = 1;
        return MHD_YES;
    }
    if (hc->req && !hc->req->stream)
        return answer_when_done(S, hc); /* resumed */
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (hc->too_big)
            return MHD_YES;
        if (hc->len + n > S->o.body_limit) {
            hc->too_big = 1;
            free(hc->body);
            hc->body = NULL;
            hc->len = hc->cap = 0;
            return MHD_YES;
        }
        if (hc->len + n + 1 > hc->cap) {
            size_t cap = hc->cap ? hc->cap : 4096;
            while (cap < hc->len + n + 1)
                cap *= 2;
            char *b = realloc(hc->body, cap);
            if (!b)
                return MHD_NO;
            hc->body = b;
            hc->cap = cap;
        }
        memcpy(hc->body + hc->len, upload_data, n);
        hc->len += n;
        hc->body[hc->len] = 0;
        return MHD_YES;
    }

    conn_set_phase(c, CONN_HANDLING);
    __atomic_add_fetch(&S->mx.http_requests, 1, __ATOMIC_SEQ_CST);
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(method, "OPTIONS"))
        return send_preflight(S, c);
    if (path_is(url, "/health") || path_is(url, "/v1/health")) {
        if (!get)
            return send_json(S, c, 405, api_error_json(405, "%s: use GET", url));
        char *reply = NULL;
        int st = api_health(S, &reply);
        return send_json(S, c, st, reply);
    }
    if (path_is(url, "/metrics")) {
        if (!get)
            return send_json(S, c, 405, api_error_json(405, "%s: use GET", url));
        if (S->o.metrics_key && !bearer_ok(c, S->o.metrics_key))
            return send_json(S, c, 401,
                             api_error_json(401, "/metrics needs 'Authorization: Bearer KEY' "
                                                 "with the --metrics-key"));
        char *t = metrics_text(S);
        if (!t)
            return send_json(S, c, 500, api_error_json(500, "out of memory"));
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(strlen(t), t, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
            free(t);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
        return queue(S, c, 200, resp);
    }
    if (S->o.api_key && !bearer_ok(c, S->o.api_key)) {
        const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        return send_json(S, c, 401,
                         api_error_json(401, a ? "invalid API key"
                                               : "missing API key: send 'Authorization: "
                                                 "Bearer KEY'"));
    }
    if (hc->too_big)
        return send_json(S, c, 413,
                         api_error_json(413,
                                        "the request body exceeds the limit of %zu bytes "
                                        "(--body-limit)",
                                        S->o.body_limit));
    int chat = path_is(url, "/v1/chat/completions") || path_is(url, "/chat/completions");
    int compl = path_is(url, "/v1/completions") || path_is(url, "/completions");
    char *reply = NULL;
    int st;
    if (chat || compl ) {
        if (!post)
            return send_json(S, c, 405, api_error_json(405, "%s: use POST", url));
        struct request *sr = NULL;
        st = api_completions(S, hc->body, hc->len, chat, &reply, &sr);
        if (!sr)
            return send_json(S, c, st, reply);
        hc->req = sr;
        if (!sr->stream)
            return answer_when_done(S, hc);
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, hc, NULL);
        if (!resp)
            return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        return queue(S, c, 200, resp);
    }
    if (path_is(url, "/v1/models") || path_is(url, "/models")) {
        if (!get)
            return send_json(S, c, 405, api_error_json(405, "%s: use GET", url));
        if (!dev_model_get(S))
            return send_reloading(S, c);
        st = api_models(S, &reply);
        dev_model_put(S);
        return send_json(S, c, st, reply);
    }
    if (path_is(url, "/slots") || !strncmp(url, "/slots/", 7)) { /* slots.c */
        st = api_slots(S, url, method,
                       MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action"),
                       MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot"),
                       hc->body, hc->len, &reply);
        return send_json(S, c, st, reply);
    }
    if (path_is(url, "/props")) {
        if (!get)
            return send_json(S, c, 405, api_error_json(405, "%s: use GET", url));
        if (!dev_model_get(S))
            return send_reloading(S, c);
        st = api_props(S, &reply);
        dev_model_put(S);
        return send_json(S, c, st, reply);
    }
    if (path_is(url, "/tokenize") || path_is(url, "/detokenize")) {
        if (!post)
            return send_json(S, c, 405, api_error_json(405, "%s: use POST", url));
        if (!dev_model_get(S))
            return send_reloading(S, c);
        st = url[1] == 't' ? api_tokenize(S, hc->body, hc->len, &reply)
                           : api_detokenize(S, hc->body, hc->len, &reply);
        dev_model_put(S);
        return send_json(S, c, st, reply);
    }
    return send_json(S, c, 404, api_error_json(404, "no endpoint %s %s", method, url));
}

/* The request line is in: its headers have --header-timeout. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)uri;
    conn_set_phase(c, CONN_HEADERS);
    return NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct srv *S = cls;
    if (!S->o.verbose)
        return;
    fprintf(stderr, "glm-server: http: ");
    vfprintf(stderr, fmt, ap);
}

int http_start(struct srv *S)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof(port), "%d", S->o.port);
    int g = getaddrinfo(S->o.host, port, &hints, &ai);
    if (g || !ai) {
        fprintf(stderr, "glm-server: --host %s: %s\n", S->o.host, gai_strerror(g));
        return -1;
    }
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
    if (conn_start(S)) {
        freeaddrinfo(ai);
        fprintf(stderr, "glm-server: cannot start the connection watchdog\n");
        return -1;
    }
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (S->o.verbose)
        flags |= MHD_USE_ERROR_LOG;
    /* conn_accept keeps the open connections at --max-connections; MHD's
     * own limit only bounds those we have shut down and it has not yet
     * reaped. MHD's inactivity timeout catches a client that stops
     * reading a reply; conn.c's deadlines the ones that send slowly. */
    unsigned limit = (unsigned)S->o.max_connections + 64;
    g_daemon = MHD_start_daemon(
        flags, (uint16_t)S->o.port, conn_accept, S, on_request, S, MHD_OPTION_SOCK_ADDR,
        ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)120, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS,
        MHD_OPTION_NOTIFY_CONNECTION, conn_notify, S, MHD_OPTION_URI_LOG_CALLBACK, on_uri, S,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, S, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, S,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!g_daemon) {
        conn_stop();
        fprintf(stderr,
                "glm-server: cannot listen on %s:%d (in use, or not an address of this "
                "machine)\n",
                S->o.host, S->o.port);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(g_daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (di)
        S->o.port = di->port;
    return 0;
}

void http_quiesce(struct srv *S)
{
    (void)S;
    if (g_daemon) { /* stop accepting: MHD hands the listening socket back */
        MHD_socket fd = MHD_quiesce_daemon(g_daemon);
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
    }
}

void http_stop(struct srv *S)
{
    (void)S;
    /* the streams end by themselves once every request is done: let them
     * write their last events (at most 3 s) */
    for (int i = 0; i < 300 && __atomic_load_n(&g_inflight, __ATOMIC_SEQ_CST) > 0; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (g_daemon)
        MHD_stop_daemon(g_daemon);
    g_daemon = NULL;
    conn_stop();
}
