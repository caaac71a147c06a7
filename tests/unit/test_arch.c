// SPDX-License-Identifier: MIT
/*
 * The architecture registry (libtx/arch/): every module resolves by its
 * model_type, class name and short names, has a complete ops table, and an
 * unknown architecture is refused with the list of the supported ones.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tx/tx_error.h>
#include <tx/glm_config.h>
#include <tx-internal/tx_synth.h>

#include <tx-internal/tx_arch.h>
#include "common/arch_tools.h"
#include "tx_test_main.h"

START_TEST(test_lookup)
{
    ck_assert_int_ge(tx_arch_count(), 2);
    ck_assert_int_eq(glm_arch_count(), tx_arch_count());
    for (int i = 0; i < tx_arch_count(); i++) {
        const struct tx_arch_ops *a = tx_arch_at(i);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_eq(tx_arch_get(a->id), a);
        ck_assert_ptr_eq(tx_arch_by_model_type(a->model_type), a);
        ck_assert_ptr_eq(tx_arch_by_class(a->class_name), a);
        ck_assert_ptr_eq(tx_arch_by_name(a->model_type), a);
        ck_assert_ptr_eq(tx_arch_by_name(a->class_name), a);
        for (const char *const *s = a->aliases; s && *s; s++)
            ck_assert_ptr_eq(tx_arch_by_name(*s), a);
        ck_assert_int_eq(glm_arch_nth(i), a->id);
        ck_assert_int_eq(glm_arch_from_name(a->model_type), a->id);
        ck_assert_str_eq(glm_arch_name(a->id), a->model_type);
        ck_assert_str_eq(glm_arch_class_name(a->id), a->class_name);
        ck_assert_str_eq(glm_arch_family(a->id), a->family);
        /* each id once */
        for (int j = 0; j < i; j++)
            ck_assert_int_ne(tx_arch_at(j)->id, a->id);
    }
    ck_assert_ptr_null(tx_arch_get(GLM_ARCH_UNKNOWN));
    ck_assert_ptr_null(tx_arch_by_name("mistral"));
    ck_assert_ptr_null(tx_arch_by_name(NULL));
    ck_assert_int_eq(glm_arch_from_name("llama"), GLM_ARCH_UNKNOWN);
    ck_assert_str_eq(glm_arch_name(GLM_ARCH_UNKNOWN), "unknown");
    ck_assert_int_eq(glm_arch_from_name("glm4"), GLM_ARCH_GLM4_MOE);
    ck_assert_int_eq(glm_arch_from_name("glm5"), GLM_ARCH_GLM_MOE_DSA);
    ck_assert_int_eq(glm_arch_from_name("qwen3moe"), GLM_ARCH_QWEN3_MOE);
    ck_assert_int_eq(glm_arch_from_name("Qwen3MoeForCausalLM"), GLM_ARCH_QWEN3_MOE);
    ck_assert_str_eq(glm_arch_family(GLM_ARCH_GLM4_MOE), "GLM-4.5");
    ck_assert_str_eq(glm_arch_family(GLM_ARCH_GLM_MOE_DSA), "GLM-5.1");
    ck_assert_int_eq(glm_arch_from_name("deepseek_v3"), GLM_ARCH_DEEPSEEK_V3);
    ck_assert_int_eq(glm_arch_from_name("DeepseekV3ForCausalLM"), GLM_ARCH_DEEPSEEK_V3);
    ck_assert_int_eq(glm_arch_from_name("kimi-k2"), GLM_ARCH_DEEPSEEK_V3);
    ck_assert_str_eq(glm_arch_family(GLM_ARCH_DEEPSEEK_V3), "DeepSeek-V3");
    /* the lists start with the GLM modules, in registry order */
    ck_assert_ptr_eq(strstr(tx_arch_list_model_types(), "glm4_moe, glm_moe_dsa"),
                     tx_arch_list_model_types());
    ck_assert_ptr_nonnull(strstr(tx_arch_list_model_types(), "deepseek_v3"));
    ck_assert_ptr_eq(strstr(tx_arch_list_classes(), "Glm4MoeForCausalLM, GlmMoeDsaForCausalLM"),
                     tx_arch_list_classes());
    ck_assert_ptr_nonnull(strstr(tx_arch_list_classes(), "DeepseekV3ForCausalLM"));
    ck_assert_ptr_nonnull(strstr(tx_arch_list_model_types(), "qwen3_moe"));
    ck_assert_ptr_nonnull(strstr(tx_arch_list_classes(), "Qwen3MoeForCausalLM"));
    /* the help text of the tools: one line per module */
    const char *h = glm_arch_supported();
    for (int i = 0; i < tx_arch_count(); i++) {
        const char *line = strstr(h, tx_arch_at(i)->class_name);
        ck_assert_ptr_nonnull(line);
        ck_assert_ptr_nonnull(strstr(line, tx_arch_at(i)->model_type));
    }
}
END_TEST

/* every hook a module must have is set */
START_TEST(test_ops_complete)
{
    for (int i = 0; i < tx_arch_count(); i++) {
        const struct tx_arch_ops *a = tx_arch_at(i);
        ck_assert_msg(a->model_type && a->class_name && a->family && a->models && a->attn_short &&
                          a->attn_long,
                      "%d: a name is missing", i);
        ck_assert_msg(a->defaults && a->parse_moe && a->parse && a->parse_mlp_layers &&
                          a->parse_layers && a->validate && a->to_json && a->attn_scale,
                      "%s: a config hook is missing", a->model_type);
        ck_assert_msg(a->layer_tensor && a->layer_selects, "%s: a tensor hook is missing",
                      a->model_type);
        ck_assert_msg(a->kv_geometry && a->act_layout && a->select_k && a->layer,
                      "%s: a runtime hook is missing", a->model_type);
        ck_assert_msg(a->ref_attention >= TX_REF_ATTN_GQA &&
                          a->ref_attention <= TX_REF_ATTN_MLA_DSA,
                      "%s: the reference attention %d is none of the reference's", a->model_type,
                      a->ref_attention);
        /* the tools' side of the module (common/arch_tools.h) */
        const struct tx_arch_tools *t = tx_arch_tools_get(a->id);
        ck_assert_msg(t && t->id == a->id && t->cost && t->analyze_json && t->synth_config &&
                          t->chat_template && t->chat_template[0],
                      "%s: the tools' side (analyze/synth) is missing", a->model_type);
        ck_assert_int_gt(a->chat_format, 0);
    }
}
END_TEST

/* a synthetic config of every module parses back to that module */
START_TEST(test_synth_roundtrip)
{
    for (int i = 0; i < glm_arch_count(); i++) {
        enum glm_arch id = glm_arch_nth(i);
        char *j = tx_synth_config_json(id, TX_SYNTH_TINY, 256);
        ck_assert_ptr_nonnull(j);
        struct glm_config c;
        char err[256];
        ck_assert_msg(glm_config_from_json(j, &c, err, sizeof(err)) == 0, "%s: %s",
                      glm_arch_name(id), err);
        ck_assert_int_eq(c.arch, id);
        ck_assert_str_eq(c.model_type, glm_arch_name(id));
        ck_assert_str_eq(c.architecture, glm_arch_class_name(id));
        free(j);
    }
    ck_assert_ptr_null(tx_synth_config_json(GLM_ARCH_UNKNOWN, TX_SYNTH_TINY, 256));
    ck_assert_ptr_null(tx_synth_config_json((enum glm_arch)99, TX_SYNTH_TINY, 256));
}
END_TEST

/* an architecture no module has: refused, naming the supported ones */
START_TEST(test_unknown_refused)
{
    struct glm_config c;
    char err[512];
    ck_assert_int_eq(glm_config_from_json("{\"model_type\": \"mistral\"}", &c, err, sizeof(err)),
                     TX_EINVAL);
    ck_assert_msg(strstr(err, "\"mistral\" is not supported") &&
                      strstr(err, "supported: glm4_moe, glm_moe_dsa"),
                  "%s", err);
    ck_assert_int_eq(
        glm_config_from_json("{\"architectures\": [\"MixtralForCausalLM\"]}", &c, err, sizeof(err)),
        TX_EINVAL);
    ck_assert_msg(strstr(err, "\"MixtralForCausalLM\" is not supported") &&
                      strstr(err, "supported: Glm4MoeForCausalLM, GlmMoeDsaForCausalLM"),
                  "%s", err);
    /* a config struct of no module */
    char *j = tx_synth_config_json(GLM_ARCH_GLM4_MOE, TX_SYNTH_TINY, 256);
    ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), 0);
    free(j);
    c.arch = (enum glm_arch)99;
    ck_assert_int_eq(glm_config_validate(&c, err, sizeof(err)), TX_EINVAL);
    ck_assert_msg(strstr(err, "unknown architecture 99 (supported: glm4_moe, glm_moe_dsa"), "%s",
                  err);
    ck_assert_ptr_null(glm_config_to_json(&c));
    struct glm_tensor_info t;
    ck_assert_int_eq(glm_config_tensor_info(&c, GLM_T_Q_PROJ, 0, -1, &t), TX_EINVAL);
}
END_TEST

/* the KV geometry the modules give (what the runtime and the reference
 * allocate) */
START_TEST(test_kv_geometry)
{
    struct glm_config c;
    char err[256];
    char *j = tx_synth_config_json(GLM_ARCH_GLM4_MOE, TX_SYNTH_TINY, 256);
    ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), 0);
    free(j);
    struct tx_arch_kv kv;
    tx_arch_get(c.arch)->kv_geometry(&c, 0, &kv);
    ck_assert_uint_eq(kv.k, (uint64_t)c.num_key_value_heads * c.head_dim);
    ck_assert_uint_eq(kv.v, kv.k);
    ck_assert_uint_eq(kv.ik, 0);
    ck_assert_uint_eq(kv.ref_k, kv.k);
    ck_assert_uint_eq(kv.ref_v, kv.v);
    ck_assert_uint_eq(kv.run, (uint64_t)c.head_dim);
    ck_assert_int_eq(tx_arch_get(c.arch)->select_k(&c), 0);
    j = tx_synth_config_json(GLM_ARCH_GLM_MOE_DSA, TX_SYNTH_TINY, 256);
    ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), 0);
    free(j);
    tx_arch_get(c.arch)->kv_geometry(&c, 0, &kv);
    /* absorbed MLA: the latent once per position, V read from it; the
     * reference keeps the expanded per-head K/V */
    ck_assert_uint_eq(kv.k, (uint64_t)c.kv_lora_rank + c.qk_rope_head_dim);
    ck_assert_uint_eq(kv.v, 0);
    ck_assert_uint_eq(kv.ref_k, (uint64_t)c.num_attention_heads * c.qk_head_dim);
    ck_assert_uint_eq(kv.ref_v, (uint64_t)c.num_attention_heads * c.v_head_dim);
    ck_assert_uint_eq(kv.ik, (uint64_t)c.index_head_dim);
    ck_assert_int_eq(tx_arch_get(c.arch)->select_k(&c), c.index_topk);
    /* deepseek_v3: the latent MLA cache, no selector */
    j = tx_synth_config_json(GLM_ARCH_DEEPSEEK_V3, TX_SYNTH_TINY, 256);
    ck_assert_int_eq(glm_config_from_json(j, &c, err, sizeof(err)), 0);
    free(j);
    tx_arch_get(c.arch)->kv_geometry(&c, 0, &kv);
    ck_assert_uint_eq(kv.k, (uint64_t)c.kv_lora_rank + c.qk_rope_head_dim);
    ck_assert_uint_eq(kv.v, 0);
    ck_assert_uint_eq(kv.ref_k, (uint64_t)c.num_attention_heads * c.qk_head_dim);
    ck_assert_uint_eq(kv.ref_v, (uint64_t)c.num_attention_heads * c.v_head_dim);
    ck_assert_uint_eq(kv.ik, 0);
    ck_assert_int_eq(tx_arch_get(c.arch)->select_k(&c), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("arch");
    TCase *tc = tcase_create("registry");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_lookup);
    tcase_add_test(tc, test_ops_complete);
    tcase_add_test(tc, test_synth_roundtrip);
    tcase_add_test(tc, test_unknown_refused);
    tcase_add_test(tc, test_kv_geometry);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tx_test_run(suite());
}
