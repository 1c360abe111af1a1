/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — slurmstepd, the GPU variables: the step's GPUs as SLURM numbers them, and
 * each task's CUDA_VISIBLE_DEVICES and its kin. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/util.h"
#include "spank/log.h"
#include "spank/remote_gpus.h"
#include "spank/step.h"

/* The step's GPUs as SLURM gave them (gres indexes); NULL when the step has none. Never the
 * job's SLURM_JOB_GPUS: a batch script's value reaches `srun --gres=none` steps too. */
const char *ct_spank_slurm_gpus(char **env)
{
    return ct_spank_job_getenv("SLURM_STEP_GPUS", env);
}

/* 1 when the task sees only the step's GPUs, numbered from 0: SLURM's gres/gpu plugin decides
 * it (local indexes exactly when cgroup.conf has ConstrainDevices=yes) and says so in the
 * variables it sets for the step: CUDA_VISIBLE_DEVICES (or ROCR_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL)
 * is "0,1,..." while SLURM_STEP_GPUS names other indexes. The plugin follows SLURM's decision:
 * probing device nodes instead would initialise every GPU a task may open. */
int ct_spank_gpus_numbered_locally(char **env)
{
    static const char *const vars[] = { "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL" };
    const char *step = ct_spank_job_getenv("SLURM_STEP_GPUS", env), *seen = NULL;
    char want[1024];
    size_t len = 0;
    int n = 0;

    for (int i = 0; i < 3 && !seen; i++)
        seen = ct_spank_job_getenv(vars[i], env);
    if (!step || !seen)
        return 0;
    for (const char *p = step; *p; p++)
        n += p == step || p[-1] == ',';
    want[0] = '\0';
    for (int i = 0; i < n && len + 12 < sizeof(want); i++)
        len += (size_t)snprintf(want + len, sizeof(want) - len, "%s%d", i ? "," : "", i);
    return !strcmp(seen, want) && strcmp(step, want);
}

static int list_count(const char *list)
{
    int n = list[0] != '\0';

    for (const char *p = list; *p; p++)
        n += *p == ',';
    return n;
}

/* CUDA_VISIBLE_DEVICES for GPUs given as PCI positions (list): as they are, or numbered among the
 * step's GPUs (step, PCI positions too) when the cgroup hides the others. */
static void cuda_devices(const char *list, const char *step, int local_gpus, char *out, size_t size)
{
    char buf[1024], *save = NULL;
    size_t len = 0;

    out[0] = '\0';
    ct_str_copy(buf, sizeof(buf), list);
    for (char *tok = strtok_r(buf, ",", &save); tok && len + 12 < size; tok = strtok_r(NULL, ",", &save)) {
        long k = strtol(tok, NULL, 10), rank = 0;

        for (const char *p = step; local_gpus && *p; p += strcspn(p, ","), p += *p == ',')
            rank += strtol(p, NULL, 10) < k;
        len += (size_t)snprintf(out + len, size - len, "%s%ld", len ? "," : "", local_gpus ? rank : k);
    }
}

/* A task's GPUs, where SLURM may have bound some itself (--gpus-per-task, --gpu-bind,
 * --ntasks-per-gpu: the task's own SLURM_STEP_GPUS, gres indexes, mapped like the step's). The
 * plan's GPUs are set when they are among the task's; else SLURM's binding stands, and where
 * SLURM's numbers are not the GPUs' PCI positions (gres.conf's files out of PCI order) the plugin
 * names SLURM's GPUs by position in CUDA_VISIBLE_DEVICES. Either way a difference is said, in the
 * task's stderr with --ctrain-bind=verbose and in slurmd's log. */
int ct_spank_gpus_apply(spank_t sp, const struct step *s, const ct_bind_task *t, uint32_t rank, int local_gpus,
                      const char *task_gpus, int *kept)
{
    const char *cvd = local_gpus ? t->cuda_local_devices : t->cuda_visible_devices;
    char why[1024] = "", mapped[1024] = "", moved[1024] = "", slurm_cvd[1024];
    ct_error err;
    int within = 1;

    /* CUDA_VISIBLE_DEVICES only where SLURM said which GPUs the step has: never more than those;
     * numbered among the step's GPUs when the cgroup hides the others. */
    if (!s->gpus_managed || s->ops->topology_gpu_count(s->topo) == 0)
        return 0;
    if (task_gpus && strcmp(task_gpus, s->step_gpus)) {
        ct_error_clear(&err);
        if (s->ops->gres_map(s->topo, task_gpus, &s->gres.files, s->gres.devs, s->gres.ndevs, mapped,
                             sizeof(mapped), moved, sizeof(moved), &err) != 0)
            mapped[0] = moved[0] = '\0';
        within = mapped[0] && t->ngpus > 0 && s->ops->task_gpus_in(s->topo, t, mapped, &err) == 1;
        if (!within)
            snprintf(why, sizeof(why), "SLURM bound this task to GPU%s %s%s%s%s of the step's %s, ctrain's plan chose "
                     "%s: SLURM's binding is kept%s%s", strchr(task_gpus, ',') ? "s" : "", task_gpus,
                     moved[0] ? " (" : "", moved[0] ? mapped : "", moved[0] ? " in PCI order)" : "", s->step_gpus,
                     t->ngpus ? t->cuda_visible_devices : "none", err.code ? " (" : "", err.code ? err.msg : "");
        if (!within && err.code)
            snprintf(why + strlen(why), sizeof(why) - strlen(why), ")");
    }
    if (within && task_gpus && t->ngpus != list_count(task_gpus))
        snprintf(why, sizeof(why), "SLURM gave this task GPU%s %s; ctrain narrows that to %s (%s)",
                 strchr(task_gpus, ',') ? "s" : "", task_gpus, t->ngpus ? t->cuda_visible_devices : "none",
                 t->ngpus ? "its share of the node's GPUs, nearest its cores" : "more tasks than GPUs here");
    if (why[0]) {
        ct_spank_info("rank %u: %s", rank, why);
        if (s->bind == CT_SPANK_BIND_VERBOSE)
            fprintf(stderr, "ctrain: bind: rank %u: %s\n", rank, why);
    }
    if (s->gres_why[0] && s->bind == CT_SPANK_BIND_VERBOSE)
        fprintf(stderr, "ctrain: bind: rank %u: %s\n", rank, s->gres_why);
    *kept = !within;
    /* SLURM's binding kept, but its CUDA_VISIBLE_DEVICES counts PCI order where its files are not
     * in PCI order: the GPUs SLURM allocated, by their positions. */
    if (!within && moved[0] && mapped[0]) {
        cuda_devices(mapped, s->step_mapped, local_gpus, slurm_cvd, sizeof(slurm_cvd));
        ct_spank_info("rank %u: %s: CUDA_VISIBLE_DEVICES=%s names them", rank, moved, slurm_cvd);
        if (s->bind == CT_SPANK_BIND_VERBOSE)
            fprintf(stderr, "ctrain: bind: rank %u: %s: CUDA_VISIBLE_DEVICES=%s names them\n", rank, moved,
                    slurm_cvd);
        return ct_spank_task_setenv(sp, "CUDA_VISIBLE_DEVICES", slurm_cvd, 1) ||
                       ct_spank_task_setenv(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1)
                   ? -1
                   : 0;
    }
    if (!within)
        return 0;
    if (ct_spank_task_setenv(sp, "CUDA_VISIBLE_DEVICES", cvd, 1) ||
        (strncmp(cvd, "GPU-", 4) && ct_spank_task_setenv(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1)))
        return -1;
    return 0;
}
