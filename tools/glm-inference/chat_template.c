/* SPDX-License-Identifier: MIT */
/*
 * glm-inference's chat rendering: the package's own chat_template by libtx's
 * Jinja renderer (common/chat_template.h) when the package has one and no
 * C format was asked for (--chat-template NAME); libtx's C format otherwise.
 */
#include <stdio.h>
#include <stdlib.h>

#include <json-c/json.h>

#include <tx/tx_error.h>

#include "chat_template.h"
#include "common/chat_template.h"

static struct txc_chat_template *g_ct;

int gi_chat_template_init(const char *prog, const char *pkg, const char *file)
{
    char err[1024];
    int rc = txc_chat_template_load(pkg, file, &g_ct, err, sizeof(err));
    if (rc == TX_ENOENT && !file)
        return 0;
    if (rc) {
        fprintf(stderr, "%s: chat template: %s\n", prog, err);
        return -1;
    }
    fprintf(stderr, "%s: chat template: %s (Jinja)\n", prog, txc_chat_template_source(g_ct));
    return 1;
}

void gi_chat_template_free(void)
{
    txc_chat_template_free(g_ct);
    g_ct = NULL;
}

int gi_chat_encode(glm_model_t *m, const struct tx_chat_message *msgs, size_t n_msgs,
                   unsigned flags, int32_t **ids, size_t *n_ids)
{
    if (!g_ct)
        return glm_chat_encode(m, msgs, n_msgs, flags, ids, n_ids);
    struct json_object *arr = json_object_new_array(), *kw = json_object_new_object();
    for (size_t i = 0; arr && i < n_msgs; i++) {
        struct json_object *e = json_object_new_object();
        json_object_object_add(e, "role", json_object_new_string(msgs[i].role));
        json_object_object_add(e, "content",
                               msgs[i].content ? json_object_new_string(msgs[i].content) : NULL);
        if (msgs[i].reasoning)
            json_object_object_add(e, "reasoning_content",
                                   json_object_new_string(msgs[i].reasoning));
        json_object_array_add(arr, e);
    }
    if (flags & (TX_CHAT_NO_THINKING | TX_CHAT_THINKING))
        json_object_object_add(kw, "enable_thinking",
                               json_object_new_boolean(!(flags & TX_CHAT_NO_THINKING)));
    const int plain = JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE;
    char err[1024];
    int raised = 0;
    int rc = arr && kw ? txc_chat_template_encode(g_ct, glm_model_tokenizer(m),
                                                  json_object_to_json_string_ext(arr, plain), NULL,
                                                  json_object_to_json_string_ext(kw, plain), 1,
                                                  ids, n_ids, NULL, &raised, err, sizeof(err))
                       : TX_ENOMEM;
    json_object_put(arr);
    json_object_put(kw);
    (void)raised; /* the message (the template's own for raise_exception) is tx_last_error() */
    return rc;
}
