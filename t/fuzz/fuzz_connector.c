/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: the connector's flag parsing and parts 1 and 2 (validate, choose) as the SPANK
 * plugin runs them inside srun — ct_connector_flags_set for each --flag=value line, then
 * ct_connector_create with the fuzzed variables as the job's environment (CTRAIN_* defaults and
 * cluster variables) and CUDA unknown or present. Input: one byte of context, then the text of
 * fuzz_env.h. Every outcome is a plan or a CT_E* error with a catalogue id (make fuzz). */
#include "ctrain/connector.h"
#include "fuzz_env.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Each flag line into flags; values point into the input, as argv's do. */
static int set_flags(struct fuzz_env *e, ct_connector_flags *flags)
{
    ct_error err;

    ct_error_clear(&err);
    for (int i = 0; i < e->n_flags; i++) {
        char *flag = e->flags[i], *eq = strchr(flag, '=');
        const char *value = "";

        if (!strcmp(flag, "--deterministic")) {
            flags->deterministic = 1;
            continue;
        }
        if (eq) {
            *eq = '\0';
            value = eq + 1;
        }
        int rc = ct_connector_flags_set(flags, flag, value, &err);
        if (rc < 0) {
            fuzz_check_refusal(&err);
            return rc;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ct_connector_flags flags = { 0 };
    ct_connector_context ctx = { 0 };
    ct_connector *c = NULL;
    struct fuzz_env e;
    ct_error err;

    if (size < 1)
        return 0;
    /* bit 0: CUDA unknown (srun on a login node) or present; bits 1-3: device count; 4-7: cpus */
    ctx.cuda = (data[0] & 1) ? CT_CUDA_PRESENT : CT_CUDA_UNKNOWN;
    ctx.cuda_device_count = ctx.cuda == CT_CUDA_PRESENT ? (data[0] >> 1 & 7) + 1 : 0;
    ctx.cpu_count = (data[0] >> 4) + 1;
    /* a CPU without bf16 instructions: the bf16 notice's path, the same on every machine */
    ctx.cpu_bf16 = CT_CPU_BF16_ABSENT;
    ct_error_clear(&err);
    fuzz_env_parse(&e, data + 1, size - 1);
    ctx.getenv_fn = fuzz_getenv;
    ctx.getenv_ctx = &e;
    if (set_flags(&e, &flags) == 0) {
        if (ct_connector_create(&flags, &ctx, &c, &err) == 0) {
            char *json = ct_plan_to_json(ct_connector_plan(c));

            if (!json)
                abort();
            free(json);
            ct_connector_free(c);
        } else {
            if (c)
                abort(); /* a refusal leaves no connector */
            fuzz_check_refusal(&err);
        }
    }
    fuzz_env_done(&e);
    return 0;
}
