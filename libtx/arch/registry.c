// SPDX-License-Identifier: MIT
/*
 * The registry of architecture modules: model_type / architectures[0] /
 * short name -> module. Adding an architecture adds one line to `modules`.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <tx-internal/tx_arch.h>

static const struct tx_arch_ops *const modules[] = {
    &tx_arch_glm4_moe,
    &tx_arch_glm_moe_dsa,
    &tx_arch_qwen3_moe,
    &tx_arch_deepseek_v3,
};

#define N_MODULES ((int)(sizeof(modules) / sizeof(modules[0])))

int tx_arch_count(void)
{
    return N_MODULES;
}

const struct tx_arch_ops *tx_arch_at(int i)
{
    return i >= 0 && i < N_MODULES ? modules[i] : NULL;
}

const struct tx_arch_ops *tx_arch_get(enum glm_arch id)
{
    for (int i = 0; i < N_MODULES; i++)
        if (modules[i]->id == id)
            return modules[i];
    return NULL;
}

const struct tx_arch_ops *tx_arch_by_model_type(const char *model_type)
{
    for (int i = 0; model_type && i < N_MODULES; i++)
        if (!strcmp(modules[i]->model_type, model_type))
            return modules[i];
    return NULL;
}

const struct tx_arch_ops *tx_arch_by_class(const char *class_name)
{
    for (int i = 0; class_name && i < N_MODULES; i++)
        if (!strcmp(modules[i]->class_name, class_name))
            return modules[i];
    return NULL;
}

const struct tx_arch_ops *tx_arch_by_name(const char *name)
{
    const struct tx_arch_ops *a = tx_arch_by_model_type(name);
    if (!a)
        a = tx_arch_by_class(name);
    for (int i = 0; !a && name && i < N_MODULES; i++)
        for (const char *const *s = modules[i]->aliases; s && *s; s++)
            if (!strcmp(*s, name))
                return modules[i];
    return a;
}

/* the lists for messages and help texts, built once (thread-safe) */
static char list_types[256], list_classes[512], list_help[1024];
static pthread_once_t lists_once = PTHREAD_ONCE_INIT;

static void build_lists(void)
{
    size_t a = 0, b = 0, h = 0;
    for (int i = 0; i < N_MODULES; i++) {
        const struct tx_arch_ops *m = modules[i];
        if (a < sizeof(list_types))
            a += (size_t)snprintf(list_types + a, sizeof(list_types) - a, "%s%s", i ? ", " : "",
                                  m->model_type);
        if (b < sizeof(list_classes))
            b += (size_t)snprintf(list_classes + b, sizeof(list_classes) - b, "%s%s", i ? ", " : "",
                                  m->class_name);
        if (h < sizeof(list_help))
            h += (size_t)snprintf(list_help + h, sizeof(list_help) - h, "  %-22s %-12s %s\n",
                                  m->class_name, m->model_type, m->models);
    }
}

const char *tx_arch_list_model_types(void)
{
    pthread_once(&lists_once, build_lists);
    return list_types;
}

const char *tx_arch_list_classes(void)
{
    pthread_once(&lists_once, build_lists);
    return list_classes;
}

/* ---- public helpers (include/tx/glm_config.h) ---- */

const char *glm_arch_name(enum glm_arch arch)
{
    const struct tx_arch_ops *a = tx_arch_get(arch);
    return a ? a->model_type : "unknown";
}

const char *glm_arch_class_name(enum glm_arch arch)
{
    const struct tx_arch_ops *a = tx_arch_get(arch);
    return a ? a->class_name : "unknown";
}

const char *glm_arch_family(enum glm_arch arch)
{
    const struct tx_arch_ops *a = tx_arch_get(arch);
    return a ? a->family : "unknown";
}

const char *glm_arch_models(enum glm_arch arch)
{
    const struct tx_arch_ops *a = tx_arch_get(arch);
    return a ? a->models : "unknown";
}

const char *glm_arch_short_name(enum glm_arch arch)
{
    const struct tx_arch_ops *a = tx_arch_get(arch);
    return a && a->aliases && a->aliases[0] ? a->aliases[0] : glm_arch_name(arch);
}

enum glm_arch glm_arch_from_name(const char *name)
{
    const struct tx_arch_ops *a = tx_arch_by_name(name);
    return a ? a->id : GLM_ARCH_UNKNOWN;
}

int glm_arch_count(void)
{
    return N_MODULES;
}

enum glm_arch glm_arch_nth(int i)
{
    return i >= 0 && i < N_MODULES ? modules[i]->id : GLM_ARCH_UNKNOWN;
}

const char *glm_arch_supported(void)
{
    pthread_once(&lists_once, build_lists);
    return list_help;
}
