/* SPDX-License-Identifier: BSD-3-Clause */
/* The phases' names, as the hang records write them (phase.h). */
#include <string.h>

#include "engine/health/fit/phase.h"

static const char *const phase_names[] = {
    "start", "data", "forward", "backward", "allreduce", "optimizer", "checkpoint", "validation", "done",
};
_Static_assert(sizeof(phase_names) / sizeof(phase_names[0]) == CT_PHASE_N, "a name for every phase");

const char *ct_hang_phase_name(int phase)
{
    return phase >= 0 && phase < CT_PHASE_N ? phase_names[phase] : "unknown";
}

int ct_hang_phase_parse(const char *name)
{
    for (int i = 0; i < CT_PHASE_N; i++)
        if (!strcmp(name, phase_names[i]))
            return i;
    return -1;
}
