/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: SLURM hostlists (what SLURM_JOB_NODELIST, SLURM_STEP_NODELIST and --nodelist
 * carry) and task counts (SLURM_TASKS_PER_NODE) from arbitrary bytes. Never a crash; a refusal is
 * a CT_E* code naming the list, with a hint, and leaves no list; an accepted hostlist compresses to
 * a form that expands to the same hosts in the same order (round trip). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/envs.h"
#include "ctrain/error.h"
#include "ctrain/hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const char *text)
{
    ct_hostlist *hl = NULL, *back = NULL;
    ct_error err;
    char *packed = NULL;

    ct_error_clear(&err);
    if (ct_hostlist_expand(text, &hl, &err)) {
        if (err.code >= 0 || hl)
            abort();
        if (err.code == CT_EINVAL && (!strstr(err.msg, "hostlist") || !err.hint[0]))
            abort();
        return;
    }
    if (ct_hostlist_compress(hl, &packed, &err) || ct_hostlist_expand(packed, &back, &err))
        abort();
    if (ct_hostlist_count(hl) != ct_hostlist_count(back))
        abort();
    for (size_t i = 0; i < ct_hostlist_count(hl); i++)
        if (strcmp(ct_hostlist_get(hl, i), ct_hostlist_get(back, i)))
            abort();
    for (size_t i = 0; i < ct_hostlist_count(hl) && i < 64; i++)
        if (ct_hostlist_find(back, ct_hostlist_get(hl, i)) < 0)
            abort();
    free(packed);
    ct_hostlist_free(hl);
    ct_hostlist_free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text;
    int *counts = NULL, n = 0;
    ct_error err;

    if (size > 4096)
        return 0;
    text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    round_trip(text);
    if (!ct_env_tasks_per_node_parse("SLURM_TASKS_PER_NODE", text, &counts, &n, &err))
        for (int i = 0; i < n; i++)
            if (counts[i] < 1)
                abort();
    free(counts);
    free(text);
    return 0;
}
