/* SPDX-License-Identifier: BSD-3-Clause */
/* Connector, part 2: choose the cluster environment, accelerator, devices, nodes, strategy,
 * precision and launcher from the final flags — the "auto" rules of the README's table.
 *
 * Each choice is one function; each records where its value came from. A rule that cannot be
 * satisfied is an error with a hint, never a quiet switch to something else.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ctrain/accelerator.h"
#include "ctrain/envs.h"
#include "ctrain/precision.h"
#include "ctrain/util.h"
#include "engine/connector/connector_internal.h"
#include "engine/registry/components.h"
#include "engine/util/cpu.h"

static void set_source(ct_plan *plan, enum ct_plan_field f, enum ct_source src, const char *detail)
{
    plan->source[f] = src;
    snprintf(plan->source_detail[f], sizeof(plan->source_detail[f]), "%s", detail);
}

static void keep_source(ct_plan *plan, const ct_final_flags *ff, enum ct_plan_field f)
{
    set_source(plan, f, ff->source[f], ff->source_detail[f]);
}

static int choose_environment(const ct_final_flags *ff, const ct_connector_context *ctx, ct_plan *plan,
                              ct_error *err)
{
    const struct ct_env_ops *ops = NULL;
    int rc;

    int devices = ff->devices_kind == CT_DEVICES_COUNT ? ff->devices_count
                  : ff->devices_kind == CT_DEVICES_LIST ? ff->n_device_ids : 0;

    rc = ct_env_detect(ctx->getenv_fn, ctx->getenv_ctx, ff->cluster_env, &ops, &plan->env, err);
    /* What only the flags can say (processes per node of a hand-started run, envs/manual.c). */
    if (!rc)
        rc = ct_env_complete(ops, ctx->getenv_fn, ctx->getenv_ctx, &plan->env, devices, ff->num_nodes, err);
    if (rc)
        return rc;
    snprintf(plan->cluster_env, sizeof(plan->cluster_env), "%s", ops->name);
    if (ff->cluster_env && strcasecmp(ff->cluster_env, "auto"))
        keep_source(plan, ff, CT_PLAN_CLUSTER_ENV);
    else
        set_source(plan, CT_PLAN_CLUSTER_ENV, CT_SOURCE_AUTO, "detected from the environment variables");
    return 0;
}

/* The accelerator whose devices are probed (cuda), and the one auto falls back to (cpu): what
 * their descriptors say. */
static const ct_registry_entry *probed_accelerator(void)
{
    for (int i = 0; i < ct_registry_count(CT_REG_ACCELERATOR); i++)
        if (ct_registry_at(CT_REG_ACCELERATOR, i)->probe_devices)
            return ct_registry_at(CT_REG_ACCELERATOR, i);
    return NULL;
}

/* 1, 0, or -1 when unknown (the SPANK plugin on a login node). */
static int cuda_available(const ct_connector_context *ctx, int explicit, char *why, size_t size)
{
    const ct_registry_entry *cuda = probed_accelerator();
    const struct ct_accelerator_ops *ops = cuda ? cuda->ops : NULL;

    snprintf(why, size, "no CUDA driver or device");
    if (ctx->cuda == CT_CUDA_UNKNOWN)
        return -1;
    if (ctx->cuda != CT_CUDA_ASK)
        return ctx->cuda == CT_CUDA_PRESENT;
    if (!ops) {
        snprintf(why, size, "this build of ctrain has no CUDA support (built without the CUDA toolkit)");
        return 0;
    }
    /* Auto-detection looks for the driver first: a CPU node answers without loading CUDA's
     * libraries (libctrain-cuda.so.0); --accelerator cuda asks the accelerator itself. */
    if (!explicit && ops->is_present && !ops->is_present(why, size))
        return 0;
    return ops->is_available(why, size);
}

static int cuda_device_count(const ct_connector_context *ctx)
{
    const ct_registry_entry *cuda = probed_accelerator();
    const struct ct_accelerator_ops *ops = cuda ? cuda->ops : NULL;

    if (ctx->cuda != CT_CUDA_ASK)
        return ctx->cuda == CT_CUDA_PRESENT ? ctx->cuda_device_count : 0;
    return ops ? ops->device_count() : 0;
}

static int choose_accelerator(const ct_final_flags *ff, const ct_connector_context *ctx, ct_plan *plan,
                              ct_error *err)
{
    char why[600];
    int avail;

    /* An accelerator named that is not probed (cpu) needs no question about CUDA. */
    if (ff->accelerator && !ff->accelerator->probe_devices) {
        plan->accelerator = ff->accelerator;
        keep_source(plan, ff, CT_PLAN_ACCELERATOR);
        return 0;
    }
    avail = cuda_available(ctx, ff->accelerator != NULL, why, sizeof(why));
    if (ff->accelerator) {
        plan->accelerator = ff->accelerator;
        keep_source(plan, ff, CT_PLAN_ACCELERATOR);
        if (ff->accelerator->probe_devices && avail == 0) {
            ct_error_set(err, CT_ENOTAVAIL, "accelerator-not-available",
                         "%s cuda: CUDA is not available on this machine (%s)",
                         plan->source_detail[CT_PLAN_ACCELERATOR], why);
            return ct_error_hint(err, "run on a GPU node (srun --gres=gpu:N), or use --accelerator cpu");
        }
        return 0;
    }
    if (avail < 0) {
        /* Resolved where the tasks run; the plugin cannot see the compute node's GPUs. */
        plan->accelerator = NULL;
        set_source(plan, CT_PLAN_ACCELERATOR, CT_SOURCE_AUTO, "resolved on the compute node");
        return 0;
    }
    plan->accelerator = avail ? probed_accelerator() : ct_registry_default(CT_REG_ACCELERATOR);
    if (!avail) {
        /* Say why: "no CUDA driver (...)" is the answer to "why did auto not pick my GPU?". */
        char detail[sizeof(plan->source_detail[0])];

        snprintf(detail, sizeof(detail), "cuda is not available: %s", why);
        set_source(plan, CT_PLAN_ACCELERATOR, CT_SOURCE_AUTO, detail);
        return 0;
    }
    set_source(plan, CT_PLAN_ACCELERATOR, CT_SOURCE_AUTO, "cuda is available");
    return 0;
}

static int cpu_count(const ct_connector_context *ctx)
{
    long n = ctx->cpu_count > 0 ? ctx->cpu_count : sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int devices_beyond(const char *id, const ct_plan *plan, int asked, int have, ct_error *err)
{
    ct_error_set(err, CT_ENOTAVAIL, id, "--devices asks for %s%d but this node has %d %s device%s", 
                 !strcmp(id, "devices-out-of-range") ? "device id " : "", asked, have,
                 ct_plan_part_name(plan->accelerator),
                 have == 1 ? "" : "s");
    return ct_error_hint(err, "use --devices %d or fewer%s", have,
                         !strcmp(id, "devices-out-of-range") ? " (ids count from 0 within CUDA_VISIBLE_DEVICES)"
                                                             : "");
}

/* How many local processes (cpu) or which device ids (cuda) this node uses. */
static int choose_devices(const ct_final_flags *ff, const ct_connector_context *ctx, ct_plan *plan,
                          ct_error *err)
{
    const ct_registry_entry *accel = plan->accelerator;
    int is_cuda = accel && accel->probe_devices;
    int have = is_cuda ? cuda_device_count(ctx) : cpu_count(ctx);
    int external = plan->env.creates_processes_externally;
    int n = 0;

    keep_source(plan, ff, CT_PLAN_DEVICES);
    switch (ff->devices_kind) {
    case CT_DEVICES_AUTO:
        n = external ? plan->env.local_world_size : (is_cuda ? have : 1);
        set_source(plan, CT_PLAN_DEVICES, CT_SOURCE_AUTO,
                   external ? "tasks on this node" : (is_cuda ? "all visible GPUs" : "one process"));
        break;
    case CT_DEVICES_ALL:
        n = have;
        break;
    case CT_DEVICES_COUNT:
        n = ff->devices_count;
        if (is_cuda && !external && n > have)
            return devices_beyond("devices-too-many", plan, n, have, err);
        break;
    case CT_DEVICES_LIST:
        /* The rule of part 1 for --accelerator cpu holds when auto chose cpu too. */
        if (!is_cuda) {
            ct_error_set(err, CT_EINVAL, "devices-list-on-cpu", "accelerator cpu (%s) takes a process count in "
                         "--devices, not a list of ids", plan->source_detail[CT_PLAN_ACCELERATOR]);
            return ct_error_hint(err, "use --devices %d for %d processes, or run where CUDA is available",
                                 ff->n_device_ids, ff->n_device_ids);
        }
        n = ff->n_device_ids;
        for (int i = 0; i < n; i++) {
            if (is_cuda && ff->device_ids[i] >= have)
                return devices_beyond("devices-out-of-range", plan, ff->device_ids[i], have, err);
            plan->devices[i] = ff->device_ids[i];
        }
        break;
    }
    if (n < 1)
        n = 1;
    if (ff->devices_kind != CT_DEVICES_LIST)
        for (int i = 0; i < n && i < CT_MAX_DEVICES; i++)
            plan->devices[i] = i;
    plan->n_devices = n > CT_MAX_DEVICES ? CT_MAX_DEVICES : n;
    return 0;
}

static int choose_num_nodes(const ct_final_flags *ff, ct_plan *plan, ct_error *err)
{
    if (ff->num_nodes) {
        plan->num_nodes = ff->num_nodes;
        keep_source(plan, ff, CT_PLAN_NUM_NODES);
    } else if (plan->env.creates_processes_externally) {
        plan->num_nodes = plan->env.num_nodes;
        set_source(plan, CT_PLAN_NUM_NODES, CT_SOURCE_CLUSTER, plan->env.source[CT_ENV_NUM_NODES]);
    } else {
        plan->num_nodes = 1;
        set_source(plan, CT_PLAN_NUM_NODES, CT_SOURCE_DEFAULT, "one node");
    }
    if (plan->num_nodes > 1 && !plan->env.creates_processes_externally) {
        ct_error_set(err, CT_ECONFLICT, "multinode-without-launcher",
                     "--num-nodes %d needs processes on %d nodes, but nothing started them (cluster environment: %s)",
                     plan->num_nodes, plan->num_nodes, plan->cluster_env);
        return ct_error_hint(err, "run under srun -N %d (or mpirun/torchrun on every node); ctrain's own launcher "
                                  "starts processes on this node only", plan->num_nodes);
    }
    return 0;
}

static int choose_world(const ct_final_flags *ff, ct_plan *plan, ct_error *err)
{
    const struct ct_env_ops *ops = ct_env_lookup(plan->cluster_env);
    int devices = ff->devices_kind == CT_DEVICES_AUTO ? 0 : plan->n_devices;

    if (plan->env.creates_processes_externally && ops && ops->validate) {
        int rc = ops->validate(&plan->env, devices, ff->num_nodes, err);
        if (rc)
            return rc;
        plan->world_size = plan->env.world_size;
        return 0;
    }
    plan->world_size = plan->n_devices * plan->num_nodes;
    return 0;
}

/* Auto's choice: the strategy whose descriptor claims a world of this size. */
static const ct_registry_entry *auto_strategy(int world_size)
{
    enum ct_auto_rule rule = world_size > 1 ? CT_AUTO_PROCESSES : CT_AUTO_ONE_PROCESS;

    for (int i = 0; i < ct_registry_count(CT_REG_STRATEGY); i++)
        if (ct_registry_at(CT_REG_STRATEGY, i)->auto_rule == rule)
            return ct_registry_at(CT_REG_STRATEGY, i);
    return NULL;
}

static int choose_strategy(const ct_final_flags *ff, ct_plan *plan, ct_error *err)
{
    const ct_registry_entry *st = ff->strategy;

    if (!st) {
        if (!(st = auto_strategy(plan->world_size)))
            return ct_error_set(err, CT_EINTERNAL, "implementation-missing", "no strategy is registered for auto");
        plan->strategy = st;
        ct_registry_strategy_options(st, NULL, plan->strategy_options, sizeof(plan->strategy_options));
        if (ct_connector_strategy_defaults(st, &plan->strategy_config, err))
            return err->code;
        set_source(plan, CT_PLAN_STRATEGY, CT_SOURCE_AUTO,
                   plan->world_size > 1 ? (plan->num_nodes > 1 ? "num_nodes > 1" : "world size > 1")
                                        : "one device");
        return 0;
    }
    plan->strategy = st;
    snprintf(plan->strategy_options, sizeof(plan->strategy_options), "%s", ff->strategy_options);
    plan->strategy_config = ff->strategy_config;
    keep_source(plan, ff, CT_PLAN_STRATEGY);
    if (st->one_process && plan->world_size > 1) {
        ct_error_set(err, CT_ECONFLICT, "strategy-single-device-many",
                     "%s %s runs one process, but %d processes are in this run (%s)",
                     plan->source_detail[CT_PLAN_STRATEGY], st->name, plan->world_size,
                     plan->env.creates_processes_externally ? plan->cluster_env : "--devices");
        return ct_error_hint(err, "use --strategy ddp, or start a single task (srun -n 1, --devices 1)");
    }
    if (st->min_world > 1 && plan->world_size < st->min_world) {
        ct_error_set(err, CT_ECONFLICT, "strategy-sharded-one-device",
                     "%s %s %s, but this run has %d process%s (%s)", plan->source_detail[CT_PLAN_STRATEGY],
                     st->name, st->min_world_why ? st->min_world_why : "needs more processes", plan->world_size,
                     plan->world_size == 1 ? "" : "es",
                     plan->env.creates_processes_externally ? plan->cluster_env : "--devices");
        return ct_error_hint(err, "use --devices %d or more (srun -n %d, mpirun -n %d), or --strategy single_device",
                             st->min_world, st->min_world, st->min_world);
    }
    return 0;
}

/* The model must have an implementation on the accelerator and compute in the precision. */
static int check_model(const ct_final_flags *ff, const ct_plan *plan, unsigned bit, ct_error *err)
{
    const ct_registry_entry *m = ff->model;
    char list[128];

    if (!(m->accelerators & bit) && m->pending) {
        ct_error_set(err, CT_ENOTAVAIL, "model-not-on-accelerator", "model %s does not run on accelerator %s (%s) yet: %s",
                     m->name, ct_plan_part_name(plan->accelerator), plan->source_detail[CT_PLAN_ACCELERATOR], m->pending);
        return ct_error_hint(err, "%s runs on: %s; use --accelerator %s", m->name,
                             ct_registry_accel_list(m->accelerators, list, sizeof(list)), "cpu");
    }
    if (!(m->accelerators & bit)) {
        ct_error_set(err, CT_ENOTAVAIL, "model-not-on-accelerator",
                     "model %s is not implemented on accelerator %s (%s)", m->name, ct_plan_part_name(plan->accelerator),
                     plan->source_detail[CT_PLAN_ACCELERATOR]);
        return ct_error_hint(err, "%s runs on: %s; use --accelerator %s", m->name,
                             ct_registry_accel_list(m->accelerators, list, sizeof(list)),
                             m->accelerators & CT_ACCEL_CPU ? "cpu" : "cuda");
    }
    if (!ct_registry_model_has_precision(m, plan->precision->name)) {
        ct_error_set(err, CT_ENOTAVAIL, "model-precision-unsupported", "model %s does not compute in --precision %s",
                     m->name, plan->precision->name);
        return ct_error_hint(err, "%s computes in: %s", m->name, m->precisions ? m->precisions : "32-true");
    }
    return 0;
}

/* --activation-checkpointing on a model that cannot recompute its activations (its entry's mask
 * lacks the accelerator; with the accelerator unknown yet, lacks every one): refused here, before
 * anything is launched. */
static int check_activation_checkpointing(const ct_final_flags *ff, const ct_plan *plan, unsigned bit, ct_error *err)
{
    const ct_registry_entry *m = ff->model;
    unsigned can = m->activation_checkpointing;
    char list[128];

    if (!ff->activation_checkpointing || (bit ? can & bit : can))
        return 0;
    if (!can) {
        ct_error_set(err, CT_ENOTAVAIL, "model-activation-checkpointing-unsupported",
                     "--activation-checkpointing: model %s cannot recompute its activations", m->name);
        return ct_error_hint(err, "drop --activation-checkpointing for %s (--model gpt recomputes its blocks)",
                             m->name);
    }
    ct_error_set(err, CT_ENOTAVAIL, "model-activation-checkpointing-unsupported",
                 "--activation-checkpointing: model %s does not recompute its activations on accelerator %s", m->name,
                 ct_plan_part_name(plan->accelerator));
    ct_registry_accel_list(can, list, sizeof(list));
    return ct_error_hint(err, "%s recomputes them on: %s; use --accelerator %s, or drop --activation-checkpointing",
                         m->name, list, list);
}

/* With the accelerator known, the strategy, precision and model must all run on it. */
static int check_support(const ct_final_flags *ff, ct_plan *plan, ct_error *err)
{
    unsigned bit = plan->accelerator ? plan->accelerator->accelerators : 0;
    const ct_registry_entry *st = plan->strategy;
    const ct_registry_entry *pr = ff->precision ? ff->precision : ct_registry_default(CT_REG_PRECISION);
    char list[128];
    int rc;

    plan->precision = pr;
    if (ff->precision)
        keep_source(plan, ff, CT_PLAN_PRECISION);
    else
        set_source(plan, CT_PLAN_PRECISION, CT_SOURCE_DEFAULT, pr->name);
    if (!bit)
        return check_activation_checkpointing(ff, plan, 0, err); /* accelerator resolved on the compute node */
    if (!(st->accelerators & bit)) {
        ct_error_set(err, CT_ECONFLICT, "strategy-unsupported-accelerator",
                     "strategy %s does not run on accelerator %s (%s)", st->name, ct_plan_part_name(plan->accelerator),
                     plan->source_detail[CT_PLAN_ACCELERATOR]);
        return ct_error_hint(err, "%s runs on: %s; choose it with --accelerator, or another strategy", st->name,
                             ct_registry_accel_list(st->accelerators, list, sizeof(list)));
    }
    if (st->precisions && !ct_registry_model_has_precision(st, pr->name)) {
        ct_error_set(err, CT_ECONFLICT, "strategy-precision-unsupported", "strategy %s does not run with --precision "
                     "%s", st->name, pr->name);
        return ct_error_hint(err, "%s runs with: %s; use --strategy ddp for %s", st->name, st->precisions, pr->name);
    }
    if (!(pr->accelerators & bit)) {
        ct_error_set(err, CT_ECONFLICT, "precision-unsupported-accelerator",
                     "precision %s is not supported on accelerator %s (%s)", pr->name, ct_plan_part_name(plan->accelerator),
                     plan->source_detail[CT_PLAN_ACCELERATOR]);
        return ct_error_hint(err, "%s runs on: %s; on %s use --precision 32-true", pr->name,
                             ct_registry_accel_list(pr->accelerators, list, sizeof(list)), ct_plan_part_name(plan->accelerator));
    }
    if ((rc = check_model(ff, plan, bit, err)))
        return rc;
    return check_activation_checkpointing(ff, plan, bit, err);
}

/* A precision that multiplies bf16 (bf16-mixed, bf16-true: what its row declares, not its name) on
 * the cpu accelerator of a CPU without bf16 instructions: said at plan time, so that its speed is no
 * surprise. The engine keeps bf16 storage and computes each product in fp32 on the widened values
 * (engine/nn/gemm.c). Unknown (the SPANK plugin, another architecture): nothing to say. */
static void note_cpu_bf16(const ct_final_flags *ff, const ct_connector_context *ctx, ct_plan *plan)
{
    const ct_registry_entry *pr = ff->precision ? ff->precision : ct_registry_default(CT_REG_PRECISION);
    const struct ct_precision_ops *ops = pr->ops;
    int has;

    if (!(plan->accelerator && (plan->accelerator->accelerators & CT_ACCEL_CPU)) || !ops || ops->gemm_dtype != CT_DTYPE_BF16 ||
        plan->n_notices >= (int)(sizeof(plan->notices) / sizeof(plan->notices[0])))
        return;
    has = ctx->cpu_bf16 == CT_CPU_BF16_ASK ? ct_cpu_bf16_instructions()
          : ctx->cpu_bf16 == CT_CPU_BF16_UNKNOWN ? -1 : ctx->cpu_bf16 == CT_CPU_BF16_PRESENT;
    if (has != 0)
        return;
    snprintf(plan->notices[plan->n_notices++], sizeof(plan->notices[0]), "precision %s on this CPU: it has no %s "
             "instructions, so bf16 storage is kept and the products compute in fp32 on the widened values",
             pr->name, CT_CPU_BF16_ISA);
}

/* *own: ctrain's own launcher (fork, subprocess) starts the ranks, and hosts a PMIx server. */
static int choose_launcher(ct_plan *plan, int *own, ct_error *err)
{
    const ct_registry_entry *st = plan->strategy;
    int external = plan->env.creates_processes_externally;
    const ct_registry_entry *launcher = ct_launcher_external_desc;
    const char *why = "one process";

    if (st->launch == CT_LAUNCH_FORK) {
        if (external && plan->env.world_size > 1) {
            ct_error_set(err, CT_ECONFLICT, "strategy-fork-external",
                         "--strategy %s forks workers, but %s already started %d processes", st->name,
                         plan->cluster_env, plan->env.world_size);
            return ct_error_hint(err, "use --strategy ddp under %s, or run one task and let %s fork",
                                 plan->cluster_env, st->name);
        }
        launcher = ct_launcher_fork_desc;
        why = "strategy forks its workers";
    } else if (st->launch == CT_LAUNCH_PROCESSES) {
        if (external) {
            why = "processes started by the cluster environment";
        } else if (plan->n_devices > 1) {
            launcher = ct_launcher_subprocess_desc;
            why = "more than one device on this node";
        }
    }
    *own = st->launch == CT_LAUNCH_FORK || (st->launch == CT_LAUNCH_PROCESSES && !external && plan->n_devices > 1);
    plan->launcher = launcher;
    set_source(plan, CT_PLAN_LAUNCHER, CT_SOURCE_AUTO, why);
    return 0;
}

/* A backend named for the other kind of tensor: nccl moves device memory, gloo host memory (what
 * the ranks' collectives layer would refuse after launch, refused before). An accelerator the
 * compute node resolves is checked there. */
static int check_backend(const ct_plan *plan, const char *asked, ct_error *err)
{
    unsigned bit = plan->accelerator ? plan->accelerator->accelerators : 0;
    int nccl = !strcmp(asked, "nccl"), gloo = !strcmp(asked, "gloo");

    if (!bit || !((nccl && !(bit & CT_ACCEL_CUDA)) || (gloo && (bit & CT_ACCEL_CUDA))))
        return 0;
    ct_error_set(err, CT_ECONFLICT, "strategy-backend-accelerator", "--strategy %s:backend=%s runs on %s tensors, "
                 "and the accelerator is %s (%s)", plan->strategy->name, asked, nccl ? "cuda" : "cpu",
                 ct_plan_part_name(plan->accelerator), plan->source_detail[CT_PLAN_ACCELERATOR]);
    return ct_error_hint(err, nccl ? "on cpu use backend=gloo or mpi (auto chooses), or --accelerator cuda"
                                   : "on cuda use backend=nccl or mpi (auto chooses), or --accelerator cpu");
}

/* backend=auto as ddp resolves it in the rank: mpi where a PMIx server starts or started the ranks
 * (ctrain's own launchers host one; srun --mpi=pmix and mpirun give PMIX_RANK), else gloo on cpu and
 * nccl on cuda. */
static int choose_backend(const ct_connector_context *ctx, ct_plan *plan, int own, ct_error *err)
{
    char asked[16];
    int pmix = own || ct_connector_getenv(ctx, "PMIX_RANK") || plan->env.enriched_by[0];
    int cuda = plan->accelerator && (plan->accelerator->accelerators & CT_ACCEL_CUDA);

    if (!ct_options_get(plan->strategy_options, "backend", asked, sizeof(asked)))
        return 0;
    if (plan->world_size == 1 && !pmix) {
        snprintf(plan->backend, sizeof(plan->backend), "none");
        snprintf(plan->backend_why, sizeof(plan->backend_why), "one rank: no collectives");
        return 0;
    }
    if (strcmp(asked, "auto")) {
        snprintf(plan->backend, sizeof(plan->backend), "%s", asked);
        snprintf(plan->backend_why, sizeof(plan->backend_why), "backend=%s", asked);
        return check_backend(plan, asked, err);
    }
    snprintf(plan->backend, sizeof(plan->backend), "%s", pmix ? "mpi" : cuda ? "nccl" : "gloo");
    snprintf(plan->backend_why, sizeof(plan->backend_why), "auto: %s, accelerator %s",
             own ? "ctrain's launcher hosts a PMIx server" : pmix ? "a PMIx server started the ranks"
                                                          : "no PMIx server (ranks meet at MASTER_ADDR:MASTER_PORT)",
             ct_plan_part_name(plan->accelerator));
    return 0;
}

int ct_connector_choose(const ct_final_flags *ff, const ct_connector_context *ctx, ct_plan *plan,
                        ct_error *err)
{
    int rc, own = 0;

    memset(plan, 0, sizeof(*plan));
    plan->collective_timeout_s = CT_PLAN_COLLECTIVE_TIMEOUT_S;
    plan->deterministic = ff->deterministic;
    plan->activation_checkpointing = ff->activation_checkpointing;
    plan->model = ff->model;
    plan->model_config = ff->model_config;
    plan->datamodule = ff->datamodule;
    plan->checkpoint_io = ct_checkpoint_io_safetensors_desc;
    for (int i = 0; i < ff->n_notices; i++)
        snprintf(plan->notices[plan->n_notices++], sizeof(plan->notices[0]), "%s", ff->notices[i]);
    if ((rc = choose_environment(ff, ctx, plan, err)))
        return rc;
    if ((rc = choose_accelerator(ff, ctx, plan, err)))
        return rc;
    if ((rc = choose_devices(ff, ctx, plan, err)))
        return rc;
    if ((rc = choose_num_nodes(ff, plan, err)))
        return rc;
    if ((rc = choose_world(ff, plan, err)))
        return rc;
    if ((rc = choose_strategy(ff, plan, err)))
        return rc;
    if ((rc = check_support(ff, plan, err)))
        return rc;
    note_cpu_bf16(ff, ctx, plan);
    if ((rc = choose_launcher(plan, &own, err)))
        return rc;
    return choose_backend(ctx, plan, own, err);
}
