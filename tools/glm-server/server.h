/* SPDX-License-Identifier: MIT */
/*
 * glm-server: an OpenAI-compatible HTTP server for GLM models on a TX8,
 * with continuous batching (docs/glm-server.md).
 *
 *   main.c     options, device and model, signals, shutdown
 *   http.c     libmicrohttpd: routing, bodies, limits, API key, replies
 *   api.c      the OpenAI / llama-server endpoints: requests in, JSON out
 *   sse.c      server-sent events: the chunks of a streamed reply
 *   sched.c    the scheduler thread that owns the device: slots, queue,
 *              one device pass per step (decode rows + one prefill chunk)
 *   metrics.c  counters and the Prometheus text of GET /metrics
 *
 * Threads: libmicrohttpd runs one thread per connection; the scheduler is
 * the only thread that runs device passes. They meet in struct srv under
 * srv.mu: the queue, every request's state and output text.
 */
#ifndef GLM_SERVER_H
#define GLM_SERVER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>
#include <tx/glm.h>

#define SRV_MAX_PARALLEL 32 /* decode rows of one device pass */
#define SRV_MAX_STOP 16

struct srv_opts {
    const char *checkpoint;
    const char *device;
    const char *host;
    int port;
    int parallel;
    int ctx_size;
    int batch_size; /* tokens per device pass: decode rows + prefill chunk */
    const char *api_key;
    const char *precision;
    const char *alias;
    const char *chat_format;
    size_t body_limit;
    int queue_limit;
    int shutdown_grace_ms;
    int verbose;
    int batch_invariant; /* --batch-invariant: GLM_LOAD_BATCH_INVARIANT */
    int ep_rebalance;    /* --ep-rebalance N: several devices, every N device passes (0: off) */
};

enum req_state { RQ_QUEUED, RQ_PREFILL, RQ_DECODE, RQ_DONE };

struct request {
    /* set by the HTTP side before submission, read-only afterwards */
    int32_t *prompt;
    int n_prompt;
    int max_tokens; /* < 0: until a stop token or the end of the context */
    struct glm_sampling smp;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int stream, chat, include_usage;
    char id[48];
    long long created;
    double t_arrive;

    /* shared, under srv.mu */
    enum req_state state;
    pthread_cond_t cv; /* signalled when output, state or cancelled change */
    char *out;         /* confirmed output text (stop strings cut) */
    size_t out_len, out_cap;
    int n_completion;   /* generated tokens (stop token excluded) */
    const char *finish; /* "stop", "length" once done; NULL if failed */
    int err_status;     /* != 0: failed with this HTTP status */
    char err[256];
    int cancelled; /* the client went away (or shutdown) */
    int refs;      /* HTTP side + scheduler */
    double t_first, t_done;

    /* the scheduler's */
    int slot;
    int n_fed;   /* prompt tokens in the KV cache */
    int32_t cur; /* token the next decode row feeds */
    struct tx_tokenizer_stream *ts;
    char *text; /* all generated text so far */
    size_t text_len, text_cap;
    struct request *next; /* queue link */
};

struct slot {
    glm_session_t *s;
    struct request *r; /* NULL: free */
};

struct srv_metrics {
    uint64_t requests_total;     /* admitted */
    uint64_t requests_ok;        /* finished (stop/length) */
    uint64_t requests_cancelled; /* client went away / shutdown */
    uint64_t requests_failed;    /* device errors */
    uint64_t rejected_queue_full;
    uint64_t rejected_bad_request; /* 4xx answers */
    uint64_t http_requests;
    uint64_t prompt_tokens, completion_tokens;
    uint64_t passes, pass_rows;
    double busy_s;          /* wall time in device passes */
    double started;         /* monotonic seconds at start */
    long long started_wall; /* time(NULL) at start */
    /* recent window (sched.c) */
    double win_t0, win_busy;
    uint64_t win_tokens;
    double tokens_per_s, busy_ratio;
    /* refreshed by the scheduler about once a second */
    double expert_std; /* percent; < 0: no MoE */
    uint64_t kv_bytes;
    /* the device's power-model counters (interface >= 1.8, else !has_energy) */
    int has_energy;
    uint64_t energy_uj, energy_active_uj, power_mw, power_avg_mw;
    double last_refresh;
};

struct srv {
    struct srv_opts o;
    tx_device_t *dev;                         /* devs[0]: sessions, KV, sampling */
    tx_device_t *devs[GLM_EP_MAX_DEVICES];    /* --device A,B,...: expert parallel */
    int n_devs;
    glm_model_t *m;
    const struct tx_tokenizer *tok;
    int vocab, sample_vocab;
    int max_topk;
    int32_t stop_ids[16];
    int n_stop_ids;
    char model_id[128];

    pthread_mutex_t mu;
    pthread_cond_t cv; /* scheduler wake-up */
    struct request *q_head, *q_tail;
    int q_len;
    struct slot slots[SRV_MAX_PARALLEL];
    int n_active;
    int stopping;   /* SIGTERM: no new requests */
    int sched_exit; /* scheduler: leave the loop */
    double stop_deadline;
    pthread_t sched_thread;
    struct srv_metrics mx;
    uint64_t seq; /* request ids, default seeds */
};

/* main.c */
double srv_now(void); /* monotonic seconds */
void srv_log(const struct srv *S, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* sched.c */
int sched_start(struct srv *S);
void sched_stop(struct srv *S);
/* Queue r (srv.mu not held). 0, or 503 when the queue is full / stopping. */
int sched_submit(struct srv *S, struct request *r);
/* The HTTP side lets go of r (client gone or reply sent). */
void sched_release(struct srv *S, struct request *r);
struct request *req_new(void);

/* api.c: every handler returns the HTTP status and sets *reply (JSON text,
 * malloc()ed); streaming completions instead set *stream_req. */
struct http_ctx; /* http.c */
int api_completions(struct srv *S, const char *body, size_t len, int chat, char **reply,
                    struct request **stream_req, struct http_ctx *hc);
int api_models(struct srv *S, char **reply);
int api_health(struct srv *S, char **reply);
int api_tokenize(struct srv *S, const char *body, size_t len, char **reply);
int api_detokenize(struct srv *S, const char *body, size_t len, char **reply);
char *api_error_json(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Wait until r is done (or the client disconnects); the reply JSON. */
char *api_final_json(struct srv *S, struct request *r, int *status, struct http_ctx *hc);
/* One chunk of a stream as JSON (sse.c). */
char *api_chunk_json(struct srv *S, struct request *r, const char *text, size_t len, int first,
                     const char *finish, int usage_only);

/* http.c */
int http_start(struct srv *S);
void http_quiesce(struct srv *S);
void http_stop(struct srv *S);
/* 1 if the client of this connection has gone away */
int http_client_gone(struct http_ctx *hc);

/* sse.c: the next event of a stream, blocking until there is one: 1 with
 * *ev (malloc()ed "data: ...\n\n") set, 0 at the end (after
 * "data: [DONE]"), -1 when the client is gone. */
struct sse_state {
    int phase;
    size_t sent;
};
int sse_next_event(struct srv *S, struct request *r, struct http_ctx *hc, struct sse_state *st,
                   char **ev, size_t *evlen);

/* metrics.c */
char *metrics_text(struct srv *S);

#endif
