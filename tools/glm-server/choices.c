/* SPDX-License-Identifier: MIT */
/*
 * glm-server's "n": several choices for one prompt.
 *
 * Choice 0 is the request the HTTP side holds; choices 1..n-1 are copies
 * of it (same prompt, stop strings, sampling) that the scheduler runs as
 * requests of their own, in their own slots, with the seeds seed, seed + 1,
 * ..., seed + n - 1 (as vLLM's parallel sampling seeds its children), so
 * that each choice is what a request with that seed gives alone. The reply
 * has choices[i].index = i; a stream carries every choice's chunks as they
 * come, each with its index; the usage counts the prompt once and the
 * tokens of every choice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

int choices_parse(struct srv *S, json_object *o, struct request *r, char **reply)
{
    json_object *v = NULL;
    r->n_choices = 1;
    if (!json_object_object_get_ex(o, "n", &v) || !v)
        return 0;
    int max = SRV_MAX_N;
    if (max > S->o.parallel + S->o.queue_limit)
        max = S->o.parallel + S->o.queue_limit;
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
        json_object_get_int64(v) > max) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "'n' must be an integer in [1, %d] (at most %d choices, and at most --parallel "
                 "+ --queue-limit)",
                 max, SRV_MAX_N);
        return srv_bad_request(reply, "n", msg);
    }
    r->n_choices = json_object_get_int(v);
    return 0;
}

/* choice i of r: a copy of what the HTTP side set */
static struct request *clone_choice(const struct request *r, int i)
{
    struct request *c = req_new();
    if (!c)
        return NULL;
    c->prompt = malloc((size_t)r->n_prompt * sizeof(*c->prompt));
    if (!c->prompt) {
        free(c);
        return NULL;
    }
    memcpy(c->prompt, r->prompt, (size_t)r->n_prompt * sizeof(*c->prompt));
    c->n_prompt = r->n_prompt;
    c->max_tokens = r->max_tokens;
    c->smp = r->smp;
    c->smp.seed = r->smp.seed + (uint64_t)i;
    for (int k = 0; k < r->n_stop; k++) {
        c->stop[k] = strdup(r->stop[k]);
        if (!c->stop[k])
            break;
        c->n_stop++;
    }
    c->stream = r->stream;
    c->chat = r->chat;
    c->include_usage = r->include_usage;
    c->cache_prompt = r->cache_prompt;
    memcpy(c->id, r->id, sizeof(c->id));
    c->created = r->created;
    c->t_arrive = r->t_arrive;
    c->parse_output = r->parse_output;
    c->co = r->co;
    c->co.tools = json_object_get(r->co.tools);
    c->logprobs = r->logprobs;
    c->top_logprobs = r->top_logprobs;
    c->index = i;
    if (r->gr) /* constrained output: its own matcher from the grammar's start */
        c->gr = srv_grammar_clone(r->gr);
    return c; /* out of memory for a stop string: fewer stop strings, refused by the caller */
}

int choices_make(struct request *r)
{
    if (r->n_choices <= 1)
        return 0;
    r->choice = calloc((size_t)r->n_choices, sizeof(*r->choice));
    if (!r->choice)
        return -1;
    r->choice[0] = r;
    for (int i = 1; i < r->n_choices; i++) {
        struct request *c = clone_choice(r, i);
        if (c)
            r->choice[i] = c; /* r's reference (req_new's), dropped with r */
        if (!c || c->n_stop != r->n_stop || (r->gr && !c->gr)) {
            r->n_choices = c ? i + 1 : i; /* the ones made are freed with r */
            return -1;
        }
    }
    return 0;
}

int choices_count(const struct request *r)
{
    return r->choice ? r->n_choices : 1;
}

struct request *choices_get(struct request *r, int i)
{
    return r->choice ? r->choice[i] : r;
}

int choices_done(struct request *r)
{
    for (int i = 0; i < choices_count(r); i++)
        if (choices_get(r, i)->state != RQ_DONE)
            return 0;
    return 1;
}

int choices_completion_tokens(struct request *r)
{
    int n = 0;
    for (int i = 0; i < choices_count(r); i++)
        n += choices_get(r, i)->n_completion;
    return n;
}
