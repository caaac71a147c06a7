// SPDX-License-Identifier: MIT
/*
 * The registry of architecture modules: model_type / architectures[0] /
 * short name -> module. Adding an architecture adds one line to `modules`.
 */
#include <stdio.h>
#include <string.h>

#include "arch/arch.h"

static const struct tx_arch_ops *const modules[] = {
    &tx_arch_glm4_moe,
    &tx_arch_glm_moe_dsa,
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

static const char *list(char *buf, size_t sz, int classes)
{
    if (buf[0])
        return buf;
    size_t o = 0;
    for (int i = 0; i < N_MODULES && o < sz; i++)
        o += (size_t)snprintf(buf + o, sz - o, "%s%s", i ? ", " : "",
                              classes ? modules[i]->class_name : modules[i]->model_type);
    return buf;
}

const char *tx_arch_list_model_types(void)
{
    static char buf[256];
    return list(buf, sizeof(buf), 0);
}

const char *tx_arch_list_classes(void)
{
    static char buf[512];
    return list(buf, sizeof(buf), 1);
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
