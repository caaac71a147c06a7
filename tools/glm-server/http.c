/* SPDX-License-Identifier: MIT */
/*
 * glm-server's HTTP layer on libmicrohttpd (Debian's libmicrohttpd12).
 *
 * Mode: one thread per connection (MHD_USE_THREAD_PER_CONNECTION with the
 * internal polling thread). A completion's handler simply blocks until its
 * request is done, and a stream's content reader blocks until the next
 * piece of text: both wait on the request's condition variable, which the
 * scheduler thread -- the only one driving the device -- signals. Each
 * wait wakes every 50 ms to look at the socket (poll POLLRDHUP): a client
 * that has gone away cancels its request, and the scheduler frees its slot
 * before the next device pass. Connections are bounded (--parallel +
 * --queue-limit + a margin) so threads are too.
 *
 * Bodies: accumulated up to --body-limit bytes (413 beyond, also when
 * Content-Length announces more). With --api-key every endpoint but
 * /health needs "Authorization: Bearer KEY" (401 otherwise).
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "server.h"

struct http_ctx {
    struct srv *S;
    struct MHD_Connection *c;
    char *body;
    size_t len, cap;
    int too_big;
    struct request *stream; /* streaming request (released when the connection is done) */
    struct sse_state sse;
    char *ev; /* event being written */
    size_t ev_len, ev_off;
};

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

static enum MHD_Result send_json(struct MHD_Connection *c, int status, char *body)
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
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct http_ctx *hc = cls;
    if (!hc->ev) {
        int r = sse_next_event(hc->S, hc->stream, hc, &hc->sse, &hc->ev, &hc->ev_len);
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
    (void)c;
    (void)toe;
    struct http_ctx *hc = *req_cls;
    if (!hc)
        return;
    if (hc->stream)
        sched_release(hc->S, hc->stream);
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
        __atomic_add_fetch(&g_inflight, 1, __ATOMIC_SEQ_CST);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > S->o.body_limit)
            hc->too_big = 1;
        return MHD_YES;
    }
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

    __atomic_add_fetch(&S->mx.http_requests, 1, __ATOMIC_SEQ_CST);
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (path_is(url, "/health") || path_is(url, "/v1/health")) {
        if (!get)
            return send_json(c, 405, api_error_json(405, "%s: use GET", url));
        char *reply = NULL;
        int st = api_health(S, &reply);
        return send_json(c, st, reply);
    }
    if (S->o.api_key) {
        const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        if (!a || strncmp(a, "Bearer ", 7) || !ct_eq(a + 7, S->o.api_key))
            return send_json(c, 401,
                             api_error_json(401, a ? "invalid API key"
                                                   : "missing API key: send 'Authorization: "
                                                     "Bearer KEY'"));
    }
    if (hc->too_big)
        return send_json(c, 413,
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
            return send_json(c, 405, api_error_json(405, "%s: use POST", url));
        struct request *sr = NULL;
        st = api_completions(S, hc->body, hc->len, chat, &reply, &sr, hc);
        if (st == 499)
            return MHD_NO; /* the client went away: close */
        if (!sr)
            return send_json(c, st, reply);
        hc->stream = sr;
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, hc, NULL);
        if (!resp)
            return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        enum MHD_Result ret = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    if (path_is(url, "/v1/models") || path_is(url, "/models")) {
        if (!get)
            return send_json(c, 405, api_error_json(405, "%s: use GET", url));
        st = api_models(S, &reply);
        return send_json(c, st, reply);
    }
    if (path_is(url, "/metrics")) {
        if (!get)
            return send_json(c, 405, api_error_json(405, "%s: use GET", url));
        char *t = metrics_text(S);
        if (!t)
            return send_json(c, 500, api_error_json(500, "out of memory"));
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(strlen(t), t, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
        enum MHD_Result ret = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    if (path_is(url, "/tokenize") || path_is(url, "/detokenize")) {
        if (!post)
            return send_json(c, 405, api_error_json(405, "%s: use POST", url));
        st = url[1] == 't' ? api_tokenize(S, hc->body, hc->len, &reply)
                           : api_detokenize(S, hc->body, hc->len, &reply);
        return send_json(c, st, reply);
    }
    return send_json(c, 404, api_error_json(404, "no endpoint %s %s", method, url));
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
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (S->o.verbose)
        flags |= MHD_USE_ERROR_LOG;
    unsigned limit = (unsigned)(S->o.parallel + S->o.queue_limit + 16);
    g_daemon =
        MHD_start_daemon(flags, (uint16_t)S->o.port, NULL, NULL, on_request, S,
                         MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, limit,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_NOTIFY_COMPLETED,
                         on_completed, S, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, S, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!g_daemon) {
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
}
