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
 *   conn.c     connection admission, eviction and read deadlines
 *   device.c   the device and the model: open/load, heartbeat, loss, reload
 *   logprobs.c OpenAI's logprobs / top_logprobs from the device's logits rows
 *   choices.c  "n": the choices of a request, each a request of its own
 *   slots.c    GET /slots, the slots' save / restore / erase actions
 *   prefix_store.c  the prefix cache's KV blocks, shared by content hash
 *              across slots, LRU-evicted (prefix_store.h)
 *   sigbus.c   SIGBUS on revoked device mappings: recorded, not fatal
 *   ranks.c    under mpirun: rank 0 serves, ranks > 0 compute their experts
 *
 * Threads: libmicrohttpd's four event-driven HTTP threads (handlers never
 * block: a waiting request suspends its connection, the scheduler wakes
 * it); the scheduler, the only thread that runs device passes; conn.c's
 * watchdog. They meet in struct srv under srv.mu: the queue, every
 * request's state and output text.
 */
#ifndef GLM_SERVER_H
#define GLM_SERVER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>
#include <tx/glm.h>

#include "common/chat_output.h"
#include "common/chat_template.h"

struct MHD_Connection;

#define SRV_MAX_PARALLEL 32 /* decode rows of one device pass */
#define SRV_MAX_STOP 16
#define SRV_HIST_BUCKETS 12 /* latency histogram bounds (metrics.c), + Inf */

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
    const char *chat_template_file; /* --chat-template-file */
    size_t body_limit;
    int queue_limit;
    int shutdown_grace_ms;
    int verbose;
    int batch_invariant; /* --batch-invariant: GLM_LOAD_BATCH_INVARIANT */
    int ep_rebalance;    /* --ep-rebalance N: several devices, every N device passes (0: off) */
    int spec_mtp, draft_max; /* --spec-type mtp, --draft-max N (glm_decode_batch_spec) */
    int cache_k, cache_v; /* --cache-type-k/-v (GLM_CACHE_*) */
    int chat_fmt;         /* --chat-format (0: the package's) */
    const char *plan;     /* --precision as given (NULL: the golden plan) */
    /* connections (conn.c) */
    int max_connections;
    double idle_timeout_s, header_timeout_s, body_timeout_s;
    const char *cors_origin; /* --cors-origin: "*" or a comma-separated list */
    const char *metrics_key; /* --metrics-key: /metrics needs it (else open) */
    int exit_on_device_loss;
    int no_prefix_cache; /* --no-prefix-cache */
    long long cache_ram_mib; /* --cache-ram: the block store's budget (-1: none, 0: off) */
    const char *slot_save_path; /* --slot-save-path: /slots actions (slots.c); NULL: off */
    int no_slots;               /* --no-slots: GET /slots is 501 */
    int rank_timeout_s;         /* --rank-timeout: under mpirun (ranks.c) */
};

enum req_state { RQ_QUEUED, RQ_PREFILL, RQ_DECODE, RQ_DONE };

#define SRV_MAX_TOP_LOGPROBS 20 /* OpenAI's limit of top_logprobs */
#define SRV_MAX_N 16            /* choices of one request ("n") */

/* A stream's progress (sse.c): the whole stream's, and each choice's */
struct sse_state {
    int phase;
    size_t sent;
    size_t r_sent, c_sent, calls_sent; /* chat_reply.c: reasoning, content bytes, calls sent */
    size_t open_call, args_sent; /* the call whose head went out (index + 1, 0: none) and
                                    the bytes of its arguments sent */
};

/* One generated token's log-probabilities (logprobs.c) */
struct lp_entry {
    int32_t tok;
    float lp;
    uint32_t off;   /* its first byte in the generated text */
    uint32_t chars; /* ... in characters (OpenAI's text_offset) */
    int n_top;
    int32_t top_id[SRV_MAX_TOP_LOGPROBS];
    float top_lp[SRV_MAX_TOP_LOGPROBS];
};

struct request {
    /* set by the HTTP side before submission, read-only afterwards */
    int32_t *prompt;
    int n_prompt;
    int max_tokens; /* < 0: until a stop token or the end of the context */
    struct glm_sampling smp;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int stream, chat, include_usage;
    int cache_prompt; /* reuse a slot's cached prefix (llama-server's field; default 1) */
    int n_cached;     /* prompt tokens found in the slot's cache */
    char id[48];
    long long created;
    double t_arrive;
    int parse_output;       /* chat: reasoning and tool calls split out (chat_reply.c) */
    struct chat_out_opts co; /* ... how (its tools: a reference, freed with the request) */
    int logprobs;            /* return log-probabilities (logprobs.c) */
    int top_logprobs;        /* ... with this many alternatives per token */
    /* n > 1 (choices.c): choice 0 is the request the HTTP side holds; it
     * owns a reference to each sibling in choice[1..n-1] */
    int index;                /* this choice's index */
    int n_choices;            /* choice 0: n (0 or 1: one choice) */
    struct request **choice;  /* choice 0: [n_choices], choice[0] itself; else NULL */
    struct sse_state sse;     /* this choice's stream progress */
    struct srv_grammar *gr;  /* constrained output (grammar_request.c), or NULL */

    /* shared, under srv.mu */
    enum req_state state;
    char *out;         /* confirmed output text (stop strings cut) */
    size_t out_len, out_cap;
    int n_completion;   /* generated tokens (stop token excluded) */
    const char *finish; /* "stop", "length" once done; NULL if failed */
    int err_status;     /* != 0: failed with this HTTP status */
    char err[256];
    int cancelled; /* the client went away (or shutdown) */
    int refs;      /* HTTP side + scheduler */
    struct http_ctx *hc; /* the connection waiting on it (http.c), or NULL */
    int woken;           /* queued in srv.wake */
    double t_first, t_done;
    double t_last; /* the last token's time (inter-token latency) */

    /* the scheduler's */
    int slot;
    int n_fed;   /* prompt tokens in the KV cache */
    int32_t cur; /* token the next decode row feeds */
    struct tx_tokenizer_stream *ts;
    char *text; /* all generated text so far */
    size_t text_len, text_cap;
    struct lp_entry *lp; /* logprobs: one per generated token (stop token excluded) */
    int n_lp, cap_lp;
    size_t lp_bytes, lp_chars; /* the generated tokens' bytes, characters so far */
    int lp_sent;     /* streamed entries */
    struct request *next; /* queue link */
};

struct slot {
    glm_session_t *s;
    struct request *r; /* NULL: free */
    /* prefix cache: the tokens whose KV the session holds, positions
     * [0, n_hist), kept after its request ends for the next one to reuse */
    int32_t *hist;
    int n_hist, cap_hist;
    double last_used;
    int action; /* a /slots action (slots.c) is using it: no request is given it */
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
    uint64_t prompt_tokens_cached; /* prefix-cache hits */
    /* latency histograms (Prometheus buckets, cumulative at export) */
    uint64_t ttft_bucket[SRV_HIST_BUCKETS + 1], itl_bucket[SRV_HIST_BUCKETS + 1];
    double ttft_sum, itl_sum;
    uint64_t ttft_count, itl_count;
    uint64_t passes, pass_rows;
    uint64_t spec_drafted, spec_accepted; /* --spec-type mtp */
    /* connections (conn.c) */
    uint64_t conn_accepted, conn_refused, conn_evicted, conn_timed_out;
    /* device (device.c) */
    uint64_t device_lost_total, device_reloads;
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
    char model_name[128]; /* the package's (a request may name it too) */

    /* device state (device.c), under mu: the scheduler thread alone opens,
     * loads and frees; the HTTP side reads the model under model_lock */
    int dev_lost;          /* 1: lost (or not responding); requests get 503 */
    char dev_lost_why[256];
    int reload_requested; /* SIGHUP */
    pthread_rwlock_t model_lock; /* held for reading while using m or tok */
    pthread_t main_thread;
    struct txc_chat_template *ct; /* the Jinja chat template, NULL: the C format */
    struct srv_gvocab *gvocab;    /* the grammar engine's vocabulary (grammar_request.c) */

    pthread_mutex_t mu;
    pthread_cond_t cv; /* scheduler wake-up */
    struct request *q_head, *q_tail;
    int q_len;
    struct slot slots[SRV_MAX_PARALLEL];
    struct prefix_store *ps; /* the KV blocks of the prefix cache (prefix_store.c), or NULL */
    int n_active;
    int stopping;   /* SIGTERM: no new requests */
    int sched_exit; /* scheduler: leave the loop */
    double stop_deadline;
    pthread_t sched_thread;
    struct srv_metrics mx;
    /* connections to resume (http_wake), srv.mu */
    struct MHD_Connection **wake;
    int n_wake, wake_cap;
    double last_gone_check;
};

/* chat_template.c: the package's chat template (or --chat-template-file)
 * by libtx's Jinja renderer; a package without one keeps the C format.
 * 0, or -1 with a message (the server does not start). */
int srv_chat_template_load(struct srv *S, const char *prog);
/* The prompt of a chat request o rendered with S->ct: 0, or the HTTP status
 * with *reply set (400 with the template's raise_exception message). */
int srv_chat_prompt_template(struct srv *S, json_object *o, int32_t **ids, size_t *n,
                             char **reply);

/* grammar_request.c: constrained output. setup: the request's
 * response_format, grammar, json_schema and (chat) tool_choice required /
 * named into r->gr (the prompt may gain a closing </think>: *n_prompt);
 * 0 or 400 with *reply. mask: before a pass, the session's allowed tokens
 * (none for a request without a grammar); accept: a sampled token advances
 * the grammar. vocab_drop: the model goes away. */
struct srv_grammar;
struct srv_gvocab;
int srv_grammar_setup(struct srv *S, json_object *o, struct request *r, size_t *n_prompt,
                      char **reply);
void srv_grammar_mask(struct srv *S, struct request *r, glm_session_t *s);
void srv_grammar_accept(struct srv *S, struct request *r, int32_t tok);
void srv_grammar_free(struct srv_grammar *gr);
/* a fresh copy of gr for another choice of the request (n > 1): the same
 * grammar from its start; NULL when out of memory */
struct srv_grammar *srv_grammar_clone(const struct srv_grammar *gr);
void srv_grammar_vocab_drop(struct srv *S);

/* api.c: a 400 naming the request field param, message msg: sets *reply */
int srv_bad_request(char **reply, const char *param, const char *msg);
/* api.c: message i's content c (a string, null, or an array of text parts)
 * as one malloc'd string (*out NULL for null); 0 or 400 with *reply set */
int srv_content_text(json_object *c, int i, char **out, char **reply);

/* chat_reply.c: a chat request's output split into reasoning_content,
 * content and tool_calls. setup: from the request o and the prompt (r's
 * prompt is set); message: the non-streamed message (*finish: the
 * finish_reason, "tool_calls" when the model called tools); stream_delta:
 * the next chunk of what is new (NULL: nothing), final once done;
 * stream_finish: the final chunk's finish_reason. srv.mu held but setup. */
void srv_chat_output_setup(struct srv *S, json_object *o, struct request *r);
json_object *srv_chat_message(struct srv *S, struct request *r, const char **finish);
struct sse_state;
char *srv_chat_stream_delta(struct srv *S, struct request *r, struct sse_state *st, int final);
const char *srv_chat_stream_finish(const struct request *r, const struct sse_state *st);
/* api.c: a stream chunk whose choice has this delta (owned) and finish */
char *api_chunk_delta_json(struct srv *S, struct request *r, json_object *delta,
                           const char *finish);

/* main.c */
double srv_now(void); /* monotonic seconds */
uint64_t srv_random64(void); /* from the OS (getrandom) */
/* pthread_cond_timedwait for at most ms milliseconds (mu held) */
void srv_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms);
void srv_log(const struct srv *S, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* sched.c */
int sched_start(struct srv *S);
void sched_stop(struct srv *S);
/* Queue r (srv.mu not held). 0, or 503 when the queue is full / stopping. */
int sched_submit(struct srv *S, struct request *r);
/* The HTTP side lets go of r (client gone or reply sent). */
void sched_release(struct srv *S, struct request *r);
struct request *req_new(void);
/* srv.mu held: every queued and running request ends with status, msg. */
void sched_fail_all(struct srv *S, int status, const char *msg);
/* The slots' prefix caches and the KV blocks are forgotten (their sessions
 * are freed; srv.mu not held). */
void sched_forget_slots(struct srv *S);

/* api.c: every handler returns the HTTP status and sets *reply (JSON text,
 * malloc()ed); a completion admitted to the queue instead sets *req, which
 * http.c answers (at once or streamed) when the scheduler wakes it. */
struct http_ctx; /* http.c */
int api_completions(struct srv *S, const char *body, size_t len, int chat, char **reply,
                    struct request **req);
int api_models(struct srv *S, char **reply);
int api_health(struct srv *S, char **reply);
int api_props(struct srv *S, char **reply); /* model read lock held */
int api_tokenize(struct srv *S, const char *body, size_t len, char **reply);
int api_detokenize(struct srv *S, const char *body, size_t len, char **reply);
char *api_error_json(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* the same naming the request's field (param) */
char *api_error_json_param(int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The reply JSON of a done request (srv.mu held). */
char *api_final_json(struct srv *S, struct request *r, int *status);
/* One chunk of a stream as JSON (sse.c). */
char *api_chunk_json(struct srv *S, struct request *r, const char *text, size_t len, int first,
                     const char *finish, int usage_only);

/* device.c: the device(s), the model and the slots' sessions. */
int dev_up(struct srv *S, int verbose);   /* open + load + sessions + warm-up; 0 or -1 */
/* open + plan + load only (every rank under mpirun); 0 or -1 (said why) */
int dev_load(struct srv *S, int verbose, glm_model_t **out);
void dev_down(struct srv *S);             /* sessions, model, devices freed */
/* Scheduler thread, srv.mu held, idle: a heartbeat job when one is due;
 * 0, or -1 when the device is lost (dev_lost set). */
int dev_heartbeat(struct srv *S, double now);
/* srv.mu held: mark the device lost (once) with why; every queued and
 * running request ends with 503. */
void dev_mark_lost(struct srv *S, const char *why);
/* Scheduler thread, srv.mu held, device lost (or SIGHUP): try to reopen
 * and reload (drops srv.mu while loading); 0 when serving again. */
int dev_recover(struct srv *S);
/* HTTP side: the model for tokenising, or NULL (503) while lost/reloading;
 * dev_model_put() after use. */
glm_model_t *dev_model_get(struct srv *S);
void dev_model_put(struct srv *S);

/* conn.c */
enum conn_phase { CONN_WAIT, CONN_HEADERS, CONN_BODY, CONN_HANDLING };
int conn_start(struct srv *S);
void conn_stop(void);
int conn_open_count(void);
void conn_set_phase(struct MHD_Connection *c, enum conn_phase phase);

/* http.c */
int http_start(struct srv *S);
void http_quiesce(struct srv *S);
void http_stop(struct srv *S);
/* 1 if the client of this connection has gone away */
int http_client_gone(struct http_ctx *hc);
/* srv.mu held: r's output or state changed; a connection suspended on it
 * is queued to be resumed (http_wake_flush, without srv.mu). */
void http_wake(struct srv *S, struct request *r);
/* Resume the connections queued by http_wake. srv.mu NOT held. */
void http_wake_flush(struct srv *S);
/* srv.mu held: cancel requests whose suspended connection's client is gone
 * (checked at most every 50 ms). */
void http_reap_gone(struct srv *S);

/* sse.c: the next event of a stream (srv.mu held): 1 with *ev (malloc()ed
 * "data: ...\n\n") set, 0 at the end (after "data: [DONE]"), 2 when there
 * is none yet (the caller suspends until http_wake), -1 on failure. st: the
 * stream's state (its choices' own are in their requests). */
int sse_next_event(struct srv *S, struct request *r, struct sse_state *st, char **ev,
                   size_t *evlen);

/* logprobs.c: the request's "logprobs" / "top_logprobs" (0, or 400 with
 * *reply); record: token tok drawn from logits (the device's lm_head row,
 * vocab floats) for r (srv.mu held); json: OpenAI's "logprobs" of a choice
 * -- chat {"content": [...]}, completions {"tokens", "token_logprobs",
 * "top_logprobs", "text_offset"} -- for the entries not sent yet whose text
 * is out (all of them once done; stream: advances r->lp_sent), or NULL
 * when the request asked for none. */
int lp_parse(json_object *o, int chat, struct request *r, char **reply);
int lp_record(struct srv *S, struct request *r, const float *logits, int32_t tok);
json_object *lp_json(struct srv *S, struct request *r, int stream);

/* choices.c: n > 1. parse: the request's "n" into r (0 or 400); make: the
 * siblings of r (copies with seed + i), 0 or -1 (out of memory); count:
 * r's choices; get: choice i; done: all choices done (srv.mu held);
 * completion_tokens: the sum over the choices. */
int choices_parse(struct srv *S, json_object *o, struct request *r, char **reply);
int choices_make(struct request *r);
int choices_count(const struct request *r);
struct request *choices_get(struct request *r, int i);
int choices_done(struct request *r);
int choices_completion_tokens(struct request *r);

/* sigbus.c: a SIGBUS on revoked device memory (the device restarted)
 * becomes a recorded fault instead of the process's death; seen: since the
 * last clear (a successful reload) */
void srv_sigbus_install(void);
int srv_sigbus_seen(void);
void srv_sigbus_clear(void);

/* ranks.c: glm-server under mpirun (docs/glm-server.md, "Several hosts"):
 * the experts over the ranks' devices, rank 0 the server. Without an MPI
 * launcher every function is the one-process case.
 * begin: after the options, with the signals blocked: MPI_Init and this
 * rank's share of --device (S->o.device); -1 on rank 0 (go on serving), or
 * the exit status -- a rank > 0 follows rank 0 in here until it quits.
 * tell_load: rank 0, before dev_load: the workers load with it (0 or -1).
 * agree: every rank's ok (1: all; verbose: the others say one failed).
 * serving: rank 0's model is up (1) or going (0): --rank-timeout applies.
 * load: the package on S->devs (over the transport under mpirun). devices:
 * the devices of the whole job. broken: the transport failed (a rank is
 * gone). prog: "glm-server", or "glm-server: rank R of N" on a worker.
 * end: rank 0 at exit: the workers quit (after a lost rank: MPI_Abort,
 * every rank ends); returns the exit status. */
int ranks_begin(struct srv *S, int *argc, char ***argv);
int ranks_tell_load(void);
int ranks_agree(int ok, int verbose);
void ranks_serving(const struct srv *S, int on);
int ranks_load(struct srv *S, const struct glm_load_options *lo, uint64_t kv_reserve,
               glm_model_t **out);
int ranks_devices(const struct srv *S);
int ranks_broken(void);
const char *ranks_prog(void);
int ranks_end(int rc);

/* slots.c: GET /slots, POST /slots/{id}?action=save|restore|erase; the
 * HTTP status with *reply set. action, fail_on_no_slot: the query's (or
 * NULL). */
int api_slots(struct srv *S, const char *url, const char *method, const char *action,
              const char *fail_on_no_slot, const char *body, size_t len, char **reply);

/* metrics.c */
char *metrics_text(struct srv *S);
/* srv.mu held: one time to first token / one inter-token latency (s). */
void metrics_observe_ttft(struct srv *S, double s);
void metrics_observe_itl(struct srv *S, double s);

/* options.c: the defaults, the command line (llama-server's spellings),
 * the checks that need no device (--ctx-size against the package). -1: go
 * on; else the exit status, said why (0 for --help, --version). */
int srv_parse_options(struct srv_opts *o, int *cache_k, int *cache_v, int *fmt, int argc,
                      char **argv);

#endif
