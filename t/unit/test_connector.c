/* SPDX-License-Identifier: BSD-3-Clause */
/* The connector: every catalogue entry has a case that triggers it, and every row of the README's
 * auto table resolves as documented. Cases run through the public API with fixture environments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctrain/connector.h"
#include "ctrain/engine.h"
#include "ctrain/model.h"
#include "ctrain/strategy.h"
#include "engine/checkpoint/hf_io.h"
#include "engine/strategies/fsdp_auto.h"

/* A fixture environment: "NAME=value" strings. */
static const char *fixture_getenv(const char *name, void *ctx)
{
    const char *const *vars = ctx;
    size_t len = strlen(name);

    for (; vars && *vars; vars++)
        if (!strncmp(*vars, name, len) && (*vars)[len] == '=')
            return *vars + len + 1;
    return NULL;
}

struct error_case {
    const char *id;                /* expected catalogue id */
    const char *flags[8];          /* flag, value, flag, value, ... */
    const char *env[12];
    enum ct_cuda_probe cuda;
    int cuda_count;
    const char *mentions;          /* text the message must contain (the input named) */
};

#define SLURM_2x2 "SLURM_JOB_ID=4242", "SLURM_STEP_ID=0", "SLURM_NTASKS=4", "SLURM_PROCID=1", \
    "SLURM_LOCALID=1", "SLURM_NODEID=0", "SLURM_NNODES=2", "SLURM_TASKS_PER_NODE=2(x2)", \
    "SLURM_STEP_NODELIST=n[1-2]", "SLURM_NODELIST=n[1-2]"

static const struct error_case error_cases[] = {
    { "flag-duplicate", { "--strategy", "ddp", "--strategy", "single_device" }, {0}, 0, 0, "--strategy" },
    { "accelerator-empty", { "--accelerator", "" }, {0}, 0, 0, "--accelerator" },
    { "accelerator-unknown", { "--accelerator", "cdua" }, {0}, 0, 0, "cuda" },
    { "accelerator-unknown", { 0 }, { "CTRAIN_ACCELERATOR=tpu" }, 0, 0, "CTRAIN_ACCELERATOR" },
    { "accelerator-is-strategy", { "--accelerator", "ddp" }, {0}, 0, 0, "--strategy ddp" },
    { "accelerator-is-precision", { "--accelerator", "bf16-mixed" }, {0}, 0, 0, "--precision" },
    { "accelerator-not-available", { "--accelerator", "cuda" }, {0}, CT_CUDA_ABSENT, 0, "cpu" },
    { "accelerator-not-available", { "--accelerator", "gpu" }, {0}, CT_CUDA_ASK, 0, "CUDA" },
    { "strategy-empty", { "--strategy", "" }, {0}, 0, 0, "--strategy" },
    { "strategy-unknown", { "--strategy", "dpp" }, {0}, 0, 0, "ddp" },
    { "strategy-unknown", { 0 }, { "CTRAIN_STRATEGY=deepspeed" }, 0, 0, "CTRAIN_STRATEGY" },
    { "strategy-is-accelerator", { "--strategy", "cuda" }, {0}, 0, 0, "--accelerator cuda" },
    { "strategy-is-precision", { "--strategy", "16-mixed" }, {0}, 0, 0, "--precision" },
    { "strategy-option-malformed", { "--strategy", "ddp:bucket_mb" }, {0}, 0, 0, "key=value" },
    { "strategy-option-malformed", { "--strategy", "ddp:" }, {0}, 0, 0, "key=value" },
    { "strategy-option-unknown", { "--strategy", "ddp:buckets=2" }, {0}, 0, 0, "buckets" },
    { "strategy-option-unknown", { "--strategy", "single_device:overlap=1" }, {0}, 0, 0, "overlap" },
    { "strategy-option-value", { "--strategy", "ddp:bucket_mb=abc" }, {0}, 0, 0, "bucket_mb" },
    { "strategy-option-value", { "--strategy", "ddp:overlap=2" }, {0}, 0, 0, "overlap" },
    { "strategy-option-without-strategy", { "--strategy", "auto:bucket_mb=2" }, {0}, 0, 0, "auto" },
    { "strategy-unsupported-accelerator", { "--strategy", "ddp_nccl", "--accelerator", "cpu" }, {0}, 0, 0, "cpu" },
    { "strategy-unsupported-accelerator", { "--strategy", "ddp_nccl" }, {0}, CT_CUDA_ABSENT, 0, "cuda" },
    { "strategy-single-device-many", { "--strategy", "single_device", "--devices", "2" }, {0}, 0, 0, "ddp" },
    { "strategy-single-device-many", { "--strategy", "single_device" }, { SLURM_2x2 }, 0, 0, "slurm" },
    { "strategy-single-device-multinode", { "--strategy", "single_device", "--num-nodes", "2" }, {0}, 0, 0,
      "--num-nodes" },
    { "strategy-fork-multinode", { "--strategy", "ddp_spawn", "--num-nodes", "2" }, {0}, 0, 0, "srun" },
    { "strategy-sharded-one-device", { "--strategy", "ddp_sharded", "--accelerator", "cpu" }, {0}, 0, 0, "--devices 2" },
    { "strategy-sharded-one-device", { "--strategy", "ddp_sharded:stage=1", "--devices", "1" }, {0}, 0, 0,
      "single_device" },
    { "strategy-option-value", { "--strategy", "ddp_sharded:stage=3", "--devices", "2" }, {0}, 0, 0, "stage" },
    { "strategy-option-unknown", { "--strategy", "ddp_sharded:overlap=0", "--devices", "2" }, {0}, 0, 0, "overlap" },
    { "strategy-option-unknown", { "--strategy", "ddp:stage=1", "--devices", "2" }, {0}, 0, 0, "stage" },
    { "strategy-unsupported-accelerator", { "--strategy", "ddp_sharded", "--accelerator", "cuda", "--devices", "2" },
      {0}, CT_CUDA_PRESENT, 2, "cpu" },
    { "strategy-fork-external", { "--strategy", "ddp_fork" }, { SLURM_2x2 }, 0, 0, "--strategy ddp" },
    { "strategy-backend-accelerator", { "--strategy", "ddp:backend=nccl", "--accelerator", "cpu", "--devices", "2" },
      {0}, 0, 0, "backend=gloo" },
    { "strategy-backend-accelerator", { "--strategy", "fsdp:backend=nccl", "--devices", "2" }, {0}, CT_CUDA_ABSENT, 0,
      "fsdp:backend=nccl" },
    { "strategy-backend-accelerator", { "--strategy", "ddp:backend=gloo", "--accelerator", "cuda", "--devices", "2" },
      {0}, CT_CUDA_PRESENT, 2, "backend=nccl" },
    { "precision-empty", { "--precision", "" }, {0}, 0, 0, "--precision" },
    { "precision-unknown", { "--precision", "32-tru" }, {0}, 0, 0, "32-true" },
    { "precision-unknown", { 0 }, { "CTRAIN_PRECISION=fp8" }, 0, 0, "CTRAIN_PRECISION" },
    { "precision-is-accelerator", { "--precision", "cuda" }, {0}, 0, 0, "--accelerator" },
    { "precision-is-strategy", { "--precision", "ddp" }, {0}, 0, 0, "--strategy" },
    { "precision-not-implemented", { "--precision", "16-true" }, {0}, 0, 0, "GPU path" },
    { "precision-unsupported-accelerator", { "--precision", "64-true", "--accelerator", "cuda" }, {0}, CT_CUDA_PRESENT,
      2, "cpu" },
    { "strategy-precision-unsupported", { "--strategy", "ddp_sharded", "--devices", "2", "--precision", "64-true" },
      {0}, 0, 0, "ddp_sharded" },
    { "precision-unsupported-accelerator", { "--precision", "bf16-true", "--accelerator", "cuda" }, {0},
      CT_CUDA_PRESENT, 2, "cpu" },
    { "strategy-precision-unsupported", { "--strategy", "ddp_sharded", "--devices", "2", "--precision", "bf16-true" },
      {0}, 0, 0, "ddp_sharded" },
    { "strategy-precision-unsupported", { "--strategy", "ddp_sharded", "--devices", "2", "--precision", "64" },
      {0}, 0, 0, "64-true" },
    { "precision-unsupported-accelerator", { "--precision", "16-mixed", "--accelerator", "cpu" }, {0}, 0, 0,
      "32-true" },
    { "precision-unsupported-accelerator", { "--precision", "16-mixed" }, {0}, CT_CUDA_ABSENT, 0, "cpu" },
    { "devices-empty", { "--devices", "" }, {0}, 0, 0, "--devices" },
    { "devices-zero", { "--devices", "0" }, {0}, 0, 0, "--devices '0'" },
    { "devices-negative", { "--devices", "-2" }, {0}, 0, 0, "-1" },
    { "devices-negative", { "--devices", "0,-1" }, {0}, 0, 0, "negative" },
    { "devices-not-number", { "--devices", "two" }, {0}, 0, 0, "'two'" },
    { "devices-not-number", { "--devices", "1.5" }, {0}, 0, 0, "'1.5'" },
    { "devices-not-number", { "--devices", "0,a" }, {0}, 0, 0, "'0,a'" },
    { "devices-list-malformed", { "--devices", "0,,1" }, {0}, 0, 0, "'0,,1'" },
    { "devices-duplicate", { "--devices", "0,0" }, {0}, 0, 0, "twice" },
    { "devices-out-of-range", { "--devices", "0,3", "--accelerator", "cuda" }, {0}, CT_CUDA_PRESENT, 2, "id 3" },
    { "devices-too-many", { "--devices", "4", "--accelerator", "cuda" }, {0}, CT_CUDA_PRESENT, 2, "2 cuda" },
    { "devices-too-many", { "--devices", "100000" }, {0}, 0, 0, "--devices" },
    { "devices-list-on-cpu", { "--devices", "0,1", "--accelerator", "cpu" }, {0}, 0, 0, "--devices 2" },
    { "num-nodes-not-number", { "--num-nodes", "two" }, {0}, 0, 0, "--num-nodes" },
    { "num-nodes-nonpositive", { "--num-nodes", "0" }, {0}, 0, 0, "--num-nodes" },
    { "num-nodes-nonpositive", { "--num-nodes", "-3" }, {0}, 0, 0, "--num-nodes" },
    { "multinode-without-launcher", { "--num-nodes", "2", "--strategy", "ddp" }, {0}, 0, 0, "srun -N 2" },
    { "env-unknown", { "--cluster-env", "slrum" }, {0}, 0, 0, "slurm" },
    { "env-absent", { "--cluster-env", "slurm" }, {0}, 0, 0, "SLURM_JOB_ID" },
    { "env-absent", { "--cluster-env", "torchelastic" }, { SLURM_2x2 }, 0, 0, "torchelastic" },
    { "env-devices-mismatch", { "--devices", "4" }, { SLURM_2x2 }, 0, 0, "--ntasks-per-node=4" },
    { "env-num-nodes-mismatch", { "--num-nodes", "3" }, { SLURM_2x2 }, 0, 0, "--num-nodes" },
    { "env-world-size-mismatch", { "--devices", "2", "--num-nodes", "2" }, { "RANK=0", "LOCAL_RANK=0",
      "WORLD_SIZE=5", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=0", "GROUP_WORLD_SIZE=2", "MASTER_ADDR=n1",
      "MASTER_PORT=29400", "TORCHELASTIC_RUN_ID=x" }, 0, 0, "WORLD_SIZE" },
    { "env-unequal-tasks", { "--devices", "2" }, { "SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURM_NTASKS=3",
      "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NNODES=2", "SLURM_TASKS_PER_NODE=2,1",
      "SLURM_STEP_NODELIST=n[1-2]" }, 0, 0, "--devices 2" },
    { "env-variable-malformed", { 0 }, { "SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURM_NTASKS=four",
      "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NNODES=1", "SLURM_TASKS_PER_NODE=4",
      "SLURM_STEP_NODELIST=n1" }, 0, 0, "SLURM_NTASKS" },
    { "env-inconsistent", { 0 }, { "SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURM_NTASKS=4",
      "SLURM_PROCID=9", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NNODES=1", "SLURM_TASKS_PER_NODE=4",
      "SLURM_STEP_NODELIST=n1" }, 0, 0, "SLURM_PROCID" },
    /* A flag and its CTRAIN_* variable that disagree (Lightning refuses these too). */
    { "flag-env-conflict", { "--strategy", "ddp" }, { "CTRAIN_STRATEGY=ddp_fork" }, 0, 0, "CTRAIN_STRATEGY=ddp_fork" },
    { "flag-env-conflict", { "--strategy", "ddp:bucket_mb=2" }, { "CTRAIN_STRATEGY=ddp" }, 0, 0, "--strategy" },
    { "flag-env-conflict", { "--precision", "32-true" }, { "CTRAIN_PRECISION=16-mixed" }, CT_CUDA_ABSENT, 0,
      "CTRAIN_PRECISION=16-mixed" },
    { "flag-env-conflict", { "--accelerator", "cpu" }, { "CTRAIN_ACCELERATOR=cuda" }, 0, 0, "--accelerator cpu" },
    { "flag-env-conflict", { "--strategy", "auto" }, { "CTRAIN_STRATEGY=ddp" }, 0, 0, "CTRAIN_STRATEGY" },
    /* The flag's own error comes first: a typo gets its "did you mean". */
    { "strategy-unknown", { "--strategy", "dpp" }, { "CTRAIN_STRATEGY=ddp" }, 0, 0, "did you mean 'ddp'" },
    /* The cpu device-list rule holds when auto chose cpu. */
    { "devices-list-on-cpu", { "--devices", "3," }, {0}, CT_CUDA_ABSENT, 0, "cuda is not available" },
    { "devices-list-on-cpu", { "--devices", "0,1", "--accelerator", "CPU" }, {0}, 0, 0, "--devices 2" },
    /* mpirun on two nodes without PMIx: no variable says the node (--map-by node). */
    { "env-layout-unknown", { 0 }, { "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
      "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_MCA_orte_num_nodes=2" }, 0, 0,
      "OMPI_COMM_WORLD_RANK" },
    /* Processes started by hand with no --num-nodes, --devices or LOCAL_WORLD_SIZE. */
    { "env-layout-unknown", { 0 }, { "MASTER_ADDR=n1", "MASTER_PORT=29500", "WORLD_SIZE=4", "NODE_RANK=1",
      "LOCAL_RANK=0" }, 0, 0, "--num-nodes" },
    { "env-variable-missing", { "--num-nodes", "2" }, { "NODE_RANK=1", "LOCAL_RANK=0", "WORLD_SIZE=4" }, 0, 0,
      "MASTER_ADDR, MASTER_PORT" },
    { "env-world-size-mismatch", { "--num-nodes", "3" }, { "MASTER_ADDR=n1", "MASTER_PORT=29500", "WORLD_SIZE=4",
      "NODE_RANK=1", "LOCAL_RANK=0" }, 0, 0, "--num-nodes 3" },
    { "env-num-nodes-mismatch", { "--num-nodes", "3" }, { "MASTER_ADDR=n1", "MASTER_PORT=29500", "WORLD_SIZE=4",
      "LOCAL_WORLD_SIZE=2", "NODE_RANK=1", "LOCAL_RANK=0" }, 0, 0, "NODE_RANK" },
    { "hostlist-malformed", { 0 }, { "SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURM_NTASKS=2",
      "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NNODES=1", "SLURM_TASKS_PER_NODE=2",
      "SLURM_STEP_NODELIST=n[1-" }, 0, 0, "n[1-" },
    { "model-empty", { "--model", "" }, {0}, 0, 0, "--model" },
    { "model-unknown", { "--model", "mlpp" }, {0}, 0, 0, "'mlp'" },
    { "model-unknown", { 0 }, { "CTRAIN_MODEL=resnet" }, 0, 0, "CTRAIN_MODEL" },
    { "model-config-syntax", { "--model-config", "hidden" }, {0}, 0, 0, "key=value" },
    { "model-config-syntax", { "--model-config", "hidden=8,hidden=9" }, {0}, 0, 0, "twice" },
    { "model-config-key", { "--model-config", "n_layer=4" }, {0}, 0, 0, "hidden" },
    { "model-config-value", { "--model-config", "hidden=512-0" }, {0}, 0, 0, "hidden=512-0" },
    { "model-config-value", { "--model-config", "hidden=big" }, {0}, 0, 0, "model mlp" },
    { "model-config-value", { "--model", "test_cpu_only", "--model-config", "width=3" }, {0}, 0, 0, "[4, 64]" },
    { "model-not-on-accelerator", { "--model", "test_cpu_only", "--accelerator", "cuda" }, {0}, CT_CUDA_PRESENT,
      2, "--accelerator cpu" },
    { "model-not-on-accelerator", { "--model", "gpt", "--accelerator", "cuda" }, {0}, CT_CUDA_PRESENT, 2,
      "compiled but has not passed its GPU checks yet" },
    { "model-config-value", { "--model", "gpt", "--model-config", "n_layer=0" }, {0}, 0, 0, "n_layer=0" },
    { "model-config-key", { "--model", "gpt", "--model-config", "hidden=64" }, {0}, 0, 0, "n_layer" },
    { "model-precision-unsupported", { "--model", "test_cpu_only", "--precision", "bf16-mixed" }, {0}, 0, 0,
      "32-true" },
    /* --activation-checkpointing (a switch: its pair's value is ignored) on a model that cannot, and on
     * gpt where it cannot (cuda) */
    { "model-activation-checkpointing-unsupported", { "--activation-checkpointing", "", "--model", "mlp" }, {0}, 0, 0,
      "drop --activation-checkpointing" },
    { "model-activation-checkpointing-unsupported", { "--activation-checkpointing", "", "--model", "test_cpu_only" },
      {0}, 0, 0, "model test_cpu_only" },
    { "model-activation-checkpointing-unsupported", { "--activation-checkpointing", "", "--model", "test_ckpt_cpu",
      "--accelerator", "cuda" }, {0}, CT_CUDA_PRESENT, 2, "--accelerator cpu" },
    { "datamodule-empty", { "--datamodule", "" }, {0}, 0, 0, "--datamodule" },
    { "datamodule-unknown", { "--datamodule", "fashion-mnst" }, {0}, 0, 0, "'fashion-mnist'" },
    { "datamodule-missing", { "--model", "test_no_data" }, {0}, 0, 0, "--datamodule" },
};

static int run_flags(const char *const *fv, const char *const *env, enum ct_cuda_probe cuda, int cuda_count,
                     ct_connector **conn, ct_error *err)
{
    ct_connector_flags flags = { 0 };
    ct_connector_context ctx = { fixture_getenv, (void *)env, cuda, cuda_count, 2, CT_CPU_BF16_PRESENT };
    int rc;

    for (int i = 0; i < 8 && fv[i]; i += 2) {
        if (!strcmp(fv[i], "--activation-checkpointing")) {
            flags.activation_checkpointing = 1;
            continue;
        }
        rc = ct_connector_flags_set(&flags, fv[i], fv[i + 1], err);
        if (rc)
            return rc;
    }
    return ct_connector_create(&flags, &ctx, conn, err);
}

static void test_error_catalogue(void **state)
{
    for (size_t i = 0; i < sizeof(error_cases) / sizeof(error_cases[0]); i++) {
        const struct error_case *c = &error_cases[i];
        ct_connector *conn = NULL;
        ct_error err;
        int rc;

        ct_error_clear(&err);
        rc = run_flags(c->flags, c->env, c->cuda, c->cuda_count, &conn, &err);
        int named = strstr(err.msg, c->mentions) || strstr(err.hint, c->mentions);
        if (rc == 0 || strcmp(err.id, c->id) || !named || !err.hint[0]) {
            print_error("case %zu (%s): rc=%d id='%s' msg='%s' hint='%s'\n", i, c->id, rc, err.id, err.msg,
                        err.hint);
            ct_connector_free(conn);
            fail();
        }
        assert_true(rc < 0);
        assert_null(conn);
    }
}

/* Every id in the catalogue is exercised above (flag-missing-value and implementation-missing have
 * their own tests: the CLI and a connector without registered implementations; the Trainer's
 * trainer-* ids are checked after the connector, in t/08-trainer-controls.t). */
static void test_catalogue_covered(void **state)
{
    int n;
    const ct_catalogue_entry *cat = ct_connector_catalogue(&n);

    assert_true(n >= 40);
    for (int i = 0; i < n; i++) {
        int found = !strcmp(cat[i].id, "flag-missing-value") || !strcmp(cat[i].id, "implementation-missing") ||
                    !strncmp(cat[i].id, "trainer-", 8);
        for (size_t j = 0; !found && j < sizeof(error_cases) / sizeof(error_cases[0]); j++)
            found = !strcmp(error_cases[j].id, cat[i].id);
        if (!found) {
            print_error("catalogue entry '%s' has no test case\n", cat[i].id);
            fail();
        }
    }
}

struct auto_case {
    const char *row;
    const char *flags[8];
    const char *env[12];
    enum ct_cuda_probe cuda;
    int cuda_count;
    const char *accelerator, *strategy, *launcher, *precision;
    int n_devices, num_nodes, world_size;
};

/* The README's auto table, row by row. */
static const struct auto_case auto_cases[] = {
    { "no flags on a cpu machine", { 0 }, {0}, CT_CUDA_ABSENT, 0, "cpu", "single_device", "external", "32-true",
      1, 1, 1 },
    { "accelerator auto with cuda", { 0 }, {0}, CT_CUDA_PRESENT, 4, "cuda", "ddp", "subprocess", "32-true", 4, 1, 4 },
    { "devices > 1 -> ddp", { "--devices", "2" }, {0}, CT_CUDA_ABSENT, 0, "cpu", "ddp", "subprocess", "32-true",
      2, 1, 2 },
    { "devices -1 on cpu -> all cores", { "--devices", "-1", "--accelerator", "cpu" }, {0}, 0, 0, "cpu", "ddp",
      "subprocess", "32-true", 2, 1, 2 },
    { "one device -> single_device", { "--devices", "1" }, {0}, CT_CUDA_ABSENT, 0, "cpu", "single_device",
      "external", "32-true", 1, 1, 1 },
    { "cuda ids list", { "--devices", "1,", "--accelerator", "cuda" }, {0}, CT_CUDA_PRESENT, 2, "cuda",
      "single_device", "external", "32-true", 1, 1, 1 },
    { "num_nodes > 1 under slurm -> ddp, external", { "--num-nodes", "2" }, { SLURM_2x2 }, CT_CUDA_ABSENT, 0,
      "cpu", "ddp", "external", "32-true", 2, 2, 4 },
    { "slurm tasks decide devices and nodes", { 0 }, { SLURM_2x2 }, CT_CUDA_ABSENT, 0, "cpu", "ddp", "external",
      "32-true", 2, 2, 4 },
    { "ddp_spawn alias -> fork launcher", { "--strategy", "ddp_spawn", "--devices", "2" }, {0}, CT_CUDA_ABSENT, 0,
      "cpu", "ddp_fork", "fork", "32-true", 2, 1, 2 },
    { "ddp with one device -> no launcher", { "--strategy", "ddp" }, {0}, CT_CUDA_ABSENT, 0, "cpu", "ddp",
      "external", "32-true", 1, 1, 1 },
    { "CTRAIN_STRATEGY default", { "--devices", "2" }, { "CTRAIN_STRATEGY=ddp_no_overlap" }, CT_CUDA_ABSENT, 0,
      "cpu", "ddp_no_overlap", "subprocess", "32-true", 2, 1, 2 },
    { "flag equal to CTRAIN_PRECISION (legacy name)", { "--precision", "32" }, { "CTRAIN_PRECISION=32-true" },
      CT_CUDA_ABSENT, 0, "cpu", "single_device", "external", "32-true", 1, 1, 1 },
    { "flag equal to CTRAIN_STRATEGY (case, default options)", { "--strategy", "DDP", "--devices", "2" },
      { "CTRAIN_STRATEGY=ddp:bucket_mb=0.5" }, CT_CUDA_ABSENT, 0, "cpu", "ddp", "subprocess", "32-true", 2, 1, 2 },
    { "names ignore case", { "--strategy", "Ddp", "--accelerator", "CPU", "--precision", "BF16-Mixed", "--devices",
      "2" }, {0}, CT_CUDA_PRESENT, 2, "cpu", "ddp", "subprocess", "bf16-mixed", 2, 1, 2 },
    { "CTRAIN_ACCELERATOR ignores case", { 0 }, { "CTRAIN_ACCELERATOR=CPU" }, CT_CUDA_PRESENT, 2, "cpu",
      "single_device", "external", "32-true", 1, 1, 1 },
    { "AUTO ignores case", { "--accelerator", "AUTO", "--devices", "Auto", "--strategy", "Auto" }, {0},
      CT_CUDA_ABSENT, 0, "cpu", "single_device", "external", "32-true", 1, 1, 1 },
    { "flag equal to CTRAIN_ACCELERATOR (alias)", { "--accelerator", "gpu" }, { "CTRAIN_ACCELERATOR=cuda" },
      CT_CUDA_PRESENT, 1, "cuda", "single_device", "external", "32-true", 1, 1, 1 },
    { "processes started by hand, --num-nodes 2", { "--num-nodes", "2", "--strategy", "ddp" }, { "MASTER_ADDR=n1",
      "MASTER_PORT=29500", "WORLD_SIZE=4", "NODE_RANK=1", "LOCAL_RANK=0" }, CT_CUDA_ABSENT, 0, "cpu", "ddp",
      "external", "32-true", 2, 2, 4 },
    { "processes started by hand, LOCAL_WORLD_SIZE", { 0 }, { "MASTER_ADDR=n1", "MASTER_PORT=29500", "WORLD_SIZE=4",
      "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1", "LOCAL_RANK=1" }, CT_CUDA_ABSENT, 0, "cpu", "ddp", "external", "32-true",
      2, 2, 4 },
    { "processes started by hand, --devices 2", { "--devices", "2" }, { "MASTER_ADDR=n1", "MASTER_PORT=29500",
      "WORLD_SIZE=4", "NODE_RANK=0", "LOCAL_RANK=1" }, CT_CUDA_ABSENT, 0, "cpu", "ddp", "external", "32-true",
      2, 2, 4 },
    { "multi-task srun --pty step", { 0 }, { SLURM_2x2, "SLURM_PTY_PORT=40000" }, CT_CUDA_ABSENT, 0, "cpu", "ddp",
      "external", "32-true", 2, 2, 4 },
    { "legacy precision 32 -> 32-true", { "--precision", "32" }, {0}, CT_CUDA_ABSENT, 0, "cpu", "single_device",
      "external", "32-true", 1, 1, 1 },
    { "bf16-mixed on cuda", { "--precision", "bf16-mixed" }, {0}, CT_CUDA_PRESENT, 1, "cuda", "single_device",
      "external", "bf16-mixed", 1, 1, 1 },
    { "bf16-mixed on cpu", { "--precision", "bf16-mixed" }, {0}, CT_CUDA_ABSENT, 0, "cpu", "single_device",
      "external", "bf16-mixed", 1, 1, 1 },
    { "legacy bf16 -> bf16-mixed on cpu", { "--precision", "bf16", "--accelerator", "cpu" }, {0}, CT_CUDA_PRESENT, 1,
      "cpu", "single_device", "external", "bf16-mixed", 1, 1, 1 },
    { "accelerator unknown in srun (plugin) stays auto", { "--strategy", "ddp" }, {0}, CT_CUDA_UNKNOWN, 0, "auto",
      "ddp", "external", "32-true", 1, 1, 1 },
};

static void test_auto_table(void **state)
{
    for (size_t i = 0; i < sizeof(auto_cases) / sizeof(auto_cases[0]); i++) {
        const struct auto_case *c = &auto_cases[i];
        ct_connector *conn = NULL;
        const ct_plan *p;
        ct_error err;

        ct_error_clear(&err);
        if (run_flags(c->flags, c->env, c->cuda, c->cuda_count, &conn, &err)) {
            print_error("row '%s': %s (%s)\n", c->row, err.msg, err.id);
            fail();
        }
        p = ct_connector_plan(conn);
        if (strcmp(ct_plan_part_name(p->accelerator), c->accelerator) || strcmp(p->strategy->name, c->strategy) ||
            strcmp(p->launcher->name, c->launcher) || strcmp(p->precision->name, c->precision) ||
            p->n_devices != c->n_devices || p->num_nodes != c->num_nodes || p->world_size != c->world_size) {
            print_error("row '%s': got %s/%s/%s/%s devices=%d nodes=%d world=%d\n", c->row,
                        ct_plan_part_name(p->accelerator), p->strategy->name, p->launcher->name, p->precision->name,
                        p->n_devices, p->num_nodes, p->world_size);
            ct_connector_free(conn);
            fail();
        }
        ct_connector_free(conn);
    }
}

/* The README's backend table (process_group_backend), row by row: mpi where a PMIx server starts or
 * started the ranks, else gloo on cpu and nccl on cuda, for ddp and ddp_sharded alike; an explicit
 * backend= as given; one rank none; strategies without collectives no backend at all. */
struct backend_case {
    const char *row;
    const char *flags[8];
    const char *env[14];
    enum ct_cuda_probe cuda;
    int cuda_count;
    const char *backend, *why;
};

#define BY_HAND "MASTER_ADDR=n1", "MASTER_PORT=29500", "WORLD_SIZE=2", "NODE_RANK=0", "LOCAL_RANK=1"

static const struct backend_case backend_cases[] = {
    { "ctrain's launcher (--devices 2)", { "--devices", "2" }, {0}, CT_CUDA_ABSENT, 0, "mpi",
      "auto: ctrain's launcher hosts a PMIx server" },
    { "srun --mpi=pmix", { 0 }, { SLURM_2x2, "PMIX_RANK=1" }, CT_CUDA_ABSENT, 0, "mpi",
      "auto: a PMIx server started the ranks" },
    { "srun --mpi=none", { 0 }, { SLURM_2x2 }, CT_CUDA_ABSENT, 0, "gloo", "auto: no PMIx server" },
    { "processes started by hand, cpu", { "--devices", "2" }, { BY_HAND }, CT_CUDA_ABSENT, 0, "gloo",
      "auto: no PMIx server" },
    { "processes started by hand, cuda", { "--devices", "2" }, { BY_HAND }, CT_CUDA_PRESENT, 2, "nccl",
      "auto: no PMIx server" },
    { "ddp_sharded started by hand", { "--strategy", "ddp_sharded", "--devices", "2" }, { BY_HAND },
      CT_CUDA_ABSENT, 0, "gloo", "auto: no PMIx server" },
    { "ddp_sharded under ctrain's launcher", { "--strategy", "ddp_sharded", "--devices", "2" }, {0},
      CT_CUDA_ABSENT, 0, "mpi", "auto: ctrain's launcher" },
    { "backend=gloo under ctrain's launcher", { "--strategy", "ddp:backend=gloo", "--devices", "2" }, {0},
      CT_CUDA_ABSENT, 0, "gloo", "backend=gloo" },
    { "ddp_sharded:backend=gloo", { "--strategy", "ddp_sharded:backend=gloo", "--devices", "2" }, { BY_HAND },
      CT_CUDA_ABSENT, 0, "gloo", "backend=gloo" },
    { "ddp on one rank", { "--strategy", "ddp" }, {0}, CT_CUDA_ABSENT, 0, "none", "one rank" },
    { "single_device", { 0 }, {0}, CT_CUDA_ABSENT, 0, "", "" },
};

static void test_backend_table(void **state)
{
    for (size_t i = 0; i < sizeof(backend_cases) / sizeof(backend_cases[0]); i++) {
        const struct backend_case *c = &backend_cases[i];
        ct_connector *conn = NULL;
        const ct_plan *p;
        ct_error err;

        ct_error_clear(&err);
        if (run_flags(c->flags, c->env, c->cuda, c->cuda_count, &conn, &err)) {
            print_error("row '%s': %s (%s)\n", c->row, err.msg, err.id);
            fail();
        }
        p = ct_connector_plan(conn);
        if (strcmp(p->backend, c->backend) || strncmp(p->backend_why, c->why, strlen(c->why))) {
            print_error("row '%s': got backend '%s' (%s)\n", c->row, p->backend, p->backend_why);
            ct_connector_free(conn);
            fail();
        }
        ct_connector_free(conn);
    }
}

/* libctrain-core alone (as in the SPANK plugin: before ct_engine_init here) has no reader of model
 * files: --init-from is refused naming it, never ignored; a bad --model-config is refused first
 * (it is parsed before the file would be read). */
static void test_init_from_unregistered(void **state)
{
    ct_connector_flags flags = { .model = "gpt", .init_from = "/nonexistent/model.safetensors" };
    ct_connector *conn = NULL;
    ct_error err;

    ct_error_clear(&err);
    assert_int_equal(ct_connector_create(&flags, NULL, &conn, &err), CT_EINVAL);
    assert_null(conn);
    assert_string_equal(err.id, "init-from");
    assert_non_null(strstr(err.msg, "--init-from /nonexistent/model.safetensors"));
    assert_true(err.hint[0] != '\0');
    flags.model_config = "n_layer=0";
    assert_int_equal(ct_connector_create(&flags, NULL, &conn, &err), CT_EINVAL);
    assert_string_equal(err.id, "model-config-value");
}

/* With libctrain's reader registered, the plan's config holds a GPT-2 file's shape: a real file
 * (ctrain's own GPT written in Hugging Face's layout), the user's keys in any order, set in place. */
/* The GPT-2 file's folder (mkdtemp's template): made by the setup, removed by the teardown, also
 * when an assertion ends the test early. */
static char hf_dir[] = "/tmp/ctrain-unit-hf-XXXXXX";

static int hf_dir_setup(void **state)
{
    (void)state;
    strcpy(hf_dir, "/tmp/ctrain-unit-hf-XXXXXX");
    return mkdtemp(hf_dir) ? 0 : -1;
}

static int hf_dir_teardown(void **state)
{
    static const char *const names[] = { "model.safetensors", "config.json" };
    char path[64];

    (void)state;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", hf_dir, names[i]);
        unlink(path);
    }
    return rmdir(hf_dir) ? -1 : 0;
}

static void test_init_from_plan(void **state)
{
    ct_connector_flags flags = { .model = "gpt", .model_config = "seq_len=4,n_head=2" };
    ct_connector_context ctx = { fixture_getenv, NULL, CT_CUDA_ABSENT, 0, 2, CT_CPU_BF16_PRESENT };
    const char *dir = hf_dir;
    char file[64], text[CT_CONFIG_TEXT_MAX];
    ct_connector *conn = NULL;
    ct_model *m = NULL;
    ct_data_info data;
    ct_error err;

    (void)state;
    ct_error_clear(&err);
    memset(&data, 0, sizeof(data));
    data.x.dtype = data.y.dtype = CT_DTYPE_I32;
    data.x.ndim = data.y.ndim = 1;
    snprintf(file, sizeof(file), "%s/model.safetensors", dir);
    assert_int_equal(ct_model_create("gpt", "n_layer=1,n_head=2,n_embd=16,seq_len=8,vocab=40", &data, 1, &m, &err), 0);
    assert_int_equal(ct_hf_save(m, dir, &err), 0);
    ct_model_free(m);
    flags.init_from = file;
    assert_int_equal(ct_connector_create(&flags, &ctx, &conn, &err), 0);
    assert_string_equal(ct_config_print(&ct_connector_plan(conn)->model_config, text, sizeof(text)),
                        "n_layer=1,n_head=2,n_embd=16,seq_len=4,vocab=40");
    ct_connector_free(conn);
    flags.model_config = "n_embd=32"; /* the file's say 16: refused, naming both */
    assert_int_equal(ct_connector_create(&flags, &ctx, &conn, &err), CT_EINVAL);
    assert_null(conn);
    assert_non_null(strstr(err.msg, "--model-config n_embd=32, but the --init-from checkpoint has n_embd=16"));
}

/* A name known to the registry but with no implementation linked: creating the strategy from the plan says so. */
static void test_implementation_missing(void **state)
{
    const char *flags[8] = { "--accelerator", "cpu" };
    const char *env[1] = { NULL };
    ct_connector *conn = NULL;
    ct_strategy *s = NULL;
    ct_error err;

    ct_error_clear(&err);
    assert_int_equal(run_flags(flags, env, CT_CUDA_ABSENT, 0, &conn, &err), 0);
    assert_int_equal(ct_strategy_create_from_plan(ct_connector_plan(conn), &s, &err), CT_ENOTAVAIL);
    assert_null(s);
    assert_string_equal(err.id, "implementation-missing");
    ct_connector_free(conn);
    ct_engine_init();
}

/* A bf16 precision on the cpu of a CPU without bf16 instructions is a plan-time notice (its products
 * compute in fp32 on the widened values), never a silent slow run; the CPU's reading is the context's
 * (the real CPU is t/11-plan.t's). Nothing is said for other precisions, for cuda, for a CPU with the
 * instructions, or where the CPU or the accelerator is not known yet (the SPANK plugin). */
struct bf16_case {
    const char *row;
    const char *flags[8];
    enum ct_cuda_probe cuda;
    enum ct_cpu_bf16_probe cpu_bf16;
    const char *notice;   /* the last notice must contain it; NULL: no notice at all */
    int n_notices;
};

static const struct bf16_case bf16_cases[] = {
    { "bf16-true, no bf16 instructions", { "--precision", "bf16-true" }, CT_CUDA_ABSENT, CT_CPU_BF16_ABSENT,
      "precision bf16-true on this CPU: it has no ", 1 },
    { "bf16-mixed, no bf16 instructions", { "--precision", "bf16-mixed" }, CT_CUDA_ABSENT, CT_CPU_BF16_ABSENT,
      "bf16 storage is kept and the products compute in fp32 on the widened values", 1 },
    { "legacy bf16 on cpu: both notices", { "--precision", "bf16", "--accelerator", "cpu" }, CT_CUDA_PRESENT,
      CT_CPU_BF16_ABSENT, "precision bf16-mixed on this CPU", 2 },
    { "bf16-true with bf16 instructions", { "--precision", "bf16-true" }, CT_CUDA_ABSENT, CT_CPU_BF16_PRESENT, NULL, 0 },
    { "bf16-mixed on cuda", { "--precision", "bf16-mixed" }, CT_CUDA_PRESENT, CT_CPU_BF16_ABSENT, NULL, 0 },
    { "32-true", { "--precision", "32-true" }, CT_CUDA_ABSENT, CT_CPU_BF16_ABSENT, NULL, 0 },
    { "64-true", { "--precision", "64-true" }, CT_CUDA_ABSENT, CT_CPU_BF16_ABSENT, NULL, 0 },
    { "CPU unknown (the plugin)", { "--precision", "bf16-true" }, CT_CUDA_ABSENT, CT_CPU_BF16_UNKNOWN, NULL, 0 },
    { "accelerator unknown (the plugin)", { "--precision", "bf16-mixed" }, CT_CUDA_UNKNOWN, CT_CPU_BF16_ABSENT,
      NULL, 0 },
};

static void test_cpu_bf16_notice(void **state)
{
    for (size_t i = 0; i < sizeof(bf16_cases) / sizeof(bf16_cases[0]); i++) {
        const struct bf16_case *c = &bf16_cases[i];
        ct_connector_flags flags = { 0 };
        ct_connector_context ctx = { fixture_getenv, NULL, c->cuda, c->cuda == CT_CUDA_PRESENT, 2, c->cpu_bf16 };
        ct_connector *conn = NULL;
        const ct_plan *p;
        ct_error err;
        char *json;

        ct_error_clear(&err);
        for (int f = 0; f < 8 && c->flags[f]; f += 2)
            assert_int_equal(ct_connector_flags_set(&flags, c->flags[f], c->flags[f + 1], &err), 0);
        if (ct_connector_create(&flags, &ctx, &conn, &err)) {
            print_error("row '%s': %s (%s)\n", c->row, err.msg, err.id);
            fail();
        }
        p = ct_connector_plan(conn);
        if (p->n_notices != c->n_notices ||
            (c->notice && !strstr(p->notices[p->n_notices - 1], c->notice))) {
            print_error("row '%s': %d notices, last '%s'\n", c->row, p->n_notices,
                        p->n_notices ? p->notices[p->n_notices - 1] : "");
            ct_connector_free(conn);
            fail();
        }
        /* `ctrain plan` shows it in the plan's JSON too */
        json = ct_plan_to_json(p);
        if (c->notice && !strstr(json, c->notice)) {
            print_error("row '%s': not in the plan's JSON\n", c->row);
            free(json);
            ct_connector_free(conn);
            fail();
        }
        free(json);
        ct_connector_free(conn);
    }
}

static void test_sources_and_json(void **state)
{
    const char *flags[8] = { "--devices", "2" };
    const char *env[] = { "CTRAIN_STRATEGY=ddp", NULL };
    ct_connector *conn = NULL;
    ct_error err;
    char *json;

    assert_int_equal(run_flags(flags, env, CT_CUDA_ABSENT, 0, &conn, &err), 0);
    json = ct_plan_to_json(ct_connector_plan(conn));
    assert_non_null(strstr(json, "\"strategy\":\t\"ddp\""));
    assert_non_null(strstr(json, "CTRAIN_STRATEGY"));
    assert_non_null(strstr(json, "\"world_size\":\t2"));
    free(json);
    ct_connector_free(conn);
}

/* Models a user program registers (ct_registry_add): one that runs on cpu in 32-true only, one
 * without a default data module. */
static const ct_config_key width_schema[] = {
    { .key = "width", .type = CT_CONFIG_INT, .min = 4, .max = 64, .dflt = "8", .help = "units" },
    { .key = NULL },
};

static void register_test_models(void)
{
    ct_registry_entry cpu_only = { .name = "test_cpu_only", .description = "test", .accelerators = CT_ACCEL_CPU,
                                   .config = width_schema, .precisions = "32-true", .datamodule = "fashion-mnist" };
    ct_registry_entry no_data = { .name = "test_no_data", .description = "test", .accelerators = CT_ACCEL_CPU,
                                  .precisions = "32-true" };
    /* runs on both, recomputes its activations on cpu only */
    ct_registry_entry ckpt_cpu = { .name = "test_ckpt_cpu", .description = "test",
                                   .accelerators = CT_ACCEL_CPU | CT_ACCEL_CUDA, .precisions = "32-true",
                                   .datamodule = "fashion-mnist", .activation_checkpointing = CT_ACCEL_CPU };

    assert_int_equal(ct_registry_add(CT_REG_MODEL, &cpu_only), 0);
    assert_int_equal(ct_registry_add(CT_REG_MODEL, &no_data), 0);
    assert_int_equal(ct_registry_add(CT_REG_MODEL, &ckpt_cpu), 0);
    assert_int_equal(ct_registry_add(CT_REG_MODEL, &no_data), CT_EINVAL);     /* name taken */
    assert_int_equal(ct_registry_add(CT_REG_STRATEGY, &cpu_only), CT_EINVAL); /* not a kind users add */
}

/* ct_config_set checks a pair as ct_config_parse does (one rule, the same messages) and replaces
 * a given key in its place. */
static void test_config_set(void **state)
{
    ct_config c;
    ct_error perr, serr;
    char text[CT_CONFIG_TEXT_MAX];

    ct_error_clear(&perr);
    ct_error_clear(&serr);
    assert_int_equal(ct_config_parse(width_schema, "--model-config", "model t", "width=8", &c, &perr), 0);
    assert_int_equal(ct_config_set(&c, "--model-config", "model t", "width", "16", &serr), 0);
    assert_string_equal(ct_config_print(&c, text, sizeof(text)), "width=16");
    assert_int_equal(ct_config_int(&c, "width"), 16);
    assert_int_equal(ct_config_parse(width_schema, "--model-config", "model t", "width=65", &c, &perr), CT_EINVAL);
    assert_int_equal(ct_config_set(&c, "--model-config", "model t", "width", "65", &serr), CT_EINVAL);
    assert_string_equal(serr.id, perr.id);
    assert_string_equal(serr.msg, perr.msg);
    assert_string_equal(serr.hint, perr.hint);
    assert_int_equal(ct_config_parse(width_schema, "--model-config", "model t", "depth=2", &c, &perr), CT_EINVAL);
    assert_int_equal(ct_config_set(&c, "--model-config", "model t", "depth", "2", &serr), CT_EINVAL);
    assert_string_equal(serr.msg, perr.msg);
    assert_int_equal(c.n, 0); /* nothing stored by a refused set */
}

static void test_register_models(void **state)
{
    register_test_models();
    assert_non_null(ct_registry_find(CT_REG_MODEL, "test_cpu_only"));
    assert_non_null(ct_registry_find(CT_REG_MODEL, "mlp"));
}

/* The plan carries the model, its config and the data module's descriptor (default mlp on fashion-mnist). */
static void test_plan_model(void **state)
{
    static const char *const env[] = { NULL };
    const char *fv[8] = { "--model-config", "hidden=64-32" };
    ct_connector *conn = NULL;
    ct_error err;
    char *json;

    assert_int_equal(run_flags(fv, env, CT_CUDA_ABSENT, 0, &conn, &err), 0);
    assert_string_equal(ct_connector_plan(conn)->model->name, "mlp");
    assert_ptr_equal(ct_connector_plan(conn)->datamodule, ct_registry_find(CT_REG_DATAMODULE, "fashion-mnist"));
    assert_string_equal(ct_connector_plan(conn)->datamodule->name, "fashion-mnist");
    json = ct_plan_to_json(ct_connector_plan(conn));
    assert_non_null(strstr(json, "\"model\":\t\"mlp\""));
    assert_non_null(strstr(json, "\"model_config\":\t\"hidden=64-32\""));
    free(json);
    ct_connector_free(conn);
}

/* --activation-checkpointing on a model that declares it (gpt on cpu): planned, and in the plan's JSON. */
static void test_plan_activation_checkpointing(void **state)
{
    static const char *const env[] = { NULL };
    const char *fv[8] = { "--activation-checkpointing", "", "--model", "gpt" };
    ct_connector *conn = NULL;
    ct_error err;
    char *json;

    ct_error_clear(&err);
    assert_int_equal(run_flags(fv, env, CT_CUDA_ABSENT, 0, &conn, &err), 0);
    assert_int_equal(ct_connector_plan(conn)->activation_checkpointing, 1);
    json = ct_plan_to_json(ct_connector_plan(conn));
    assert_non_null(strstr(json, "\"activation_checkpointing\":\ttrue"));
    free(json);
    ct_connector_free(conn);
    fv[0] = "--model";
    fv[1] = "gpt";
    fv[2] = NULL;
    assert_int_equal(run_flags(fv, env, CT_CUDA_ABSENT, 0, &conn, &err), 0);
    assert_int_equal(ct_connector_plan(conn)->activation_checkpointing, 0);
    ct_connector_free(conn);
}

/* The plan carries the model's descriptor and its config parsed once: typed values, read with the
 * getters (given keys and the schema's defaults), nobody parses the text again. */
static void test_plan_model_config(void **state)
{
    static const char *const env[] = { "CTRAIN_MODEL=gpt", NULL };
    const char *fv[8] = { "--model-config", "n_layer=2,n_embd=64" };
    const ct_connector_flags named = { .model = "mlp" }, unknown = { .model = "resnet" }, none = { 0 };
    ct_connector_context ctx = { fixture_getenv, (void *)env, CT_CUDA_ABSENT, 0, 2, CT_CPU_BF16_PRESENT };
    const ct_plan *plan;
    ct_connector *conn = NULL;
    ct_error err;
    char text[CT_CONFIG_TEXT_MAX];

    assert_int_equal(run_flags(fv, env, CT_CUDA_ABSENT, 0, &conn, &err), 0);
    plan = ct_connector_plan(conn);
    assert_ptr_equal(plan->model, ct_registry_find(CT_REG_MODEL, "gpt"));
    assert_ptr_equal(plan->model_config.schema, plan->model->config);
    assert_int_equal(ct_config_int(&plan->model_config, "n_layer"), 2);
    assert_int_equal(ct_config_int(&plan->model_config, "n_embd"), 64);
    assert_int_equal(ct_config_int(&plan->model_config, "n_head"), 4); /* the schema's default */
    assert_int_equal(ct_config_given(&plan->model_config, "n_head"), 0);
    assert_string_equal(ct_config_print(&plan->model_config, text, sizeof(text)), "n_layer=2,n_embd=64");
    ct_connector_free(conn);
    /* The model the connector plans, as the CLI asks before folding its --hidden alias in. */
    assert_ptr_equal(ct_connector_model(&none, &ctx), ct_registry_find(CT_REG_MODEL, "gpt"));
    assert_ptr_equal(ct_connector_model(&named, &ctx), ct_registry_find(CT_REG_MODEL, "mlp"));
    assert_null(ct_connector_model(&unknown, &ctx));
    ctx.getenv_ctx = NULL;
    assert_ptr_equal(ct_connector_model(&none, &ctx), ct_registry_default(CT_REG_MODEL));
}

/* The descriptors hold together: every strategy's defaults parse against its own schema (what the
 * implementation reads them with), a base names a registered strategy, auto has exactly one
 * strategy per world shape, and each kind with a default has exactly one. */
static void test_descriptors(void **state)
{
    static const enum ct_registry_kind with_default[] = { CT_REG_ACCELERATOR, CT_REG_PRECISION, CT_REG_MODEL };
    int one = 0, many = 0;
    char buf[128];

    for (int i = 0; i < ct_registry_count(CT_REG_STRATEGY); i++) {
        const ct_registry_entry *e = ct_registry_at(CT_REG_STRATEGY, i);
        const char *opts = ct_registry_strategy_options(e, NULL, buf, sizeof(buf));
        ct_config cfg;
        ct_error err;

        assert_int_equal(ct_config_parse(e->option_schema, "--strategy", e->name, opts ? opts : "", &cfg, &err), 0);
        if (e->base)
            assert_non_null(ct_registry_find(CT_REG_STRATEGY, e->base));
        one += e->auto_rule == CT_AUTO_ONE_PROCESS;
        many += e->auto_rule == CT_AUTO_PROCESSES;
    }
    assert_int_equal(one, 1);
    assert_int_equal(many, 1);
    for (size_t k = 0; k < sizeof(with_default) / sizeof(with_default[0]); k++) {
        int n = 0;

        for (int i = 0; i < ct_registry_count(with_default[k]); i++)
            n += ct_registry_at(with_default[k], i)->is_default;
        assert_int_equal(n, 1);
    }
    /* A user's value, else the name's own default, else the schema's. */
    assert_string_equal(ct_registry_strategy_options(ct_registry_find(CT_REG_STRATEGY, "ddp_no_overlap"),
                                                     "bucket_mb=2", buf, sizeof(buf)),
                        "bucket_mb=2,overlap=0,backend=auto");
    assert_null(ct_registry_strategy_options(ct_registry_find(CT_REG_STRATEGY, "single_device"), NULL, buf,
                                             sizeof(buf)));
    assert_string_equal(buf, "");
}

/* fsdp's sharding_strategy=auto on made-up layouts: { node, memory } per rank. */
static void test_fsdp_auto(void **state)
{
    const int64_t MiB = 1 << 20;
    const int64_t one_node[] = { 0, 1024 * MiB, 0, 1024 * MiB, 0, 1024 * MiB, 0, 1024 * MiB };
    const int64_t two_nodes[] = { 0, 1024 * MiB, 0, 1024 * MiB, 1, 1024 * MiB, 1, 512 * MiB };
    const int64_t uneven[] = { 0, 1024 * MiB, 0, 1024 * MiB, 0, 1024 * MiB, 1, 1024 * MiB };
    const int64_t unknown[] = { 0, 0, 0, 0, 1, 0, 1, 0 };
    const int64_t node_ids[] = { 7, 1024 * MiB, 3, 1024 * MiB, 7, 1024 * MiB, 3, 1024 * MiB };
    char why[256];

    (void)state;
    assert_int_equal(ct_fsdp_auto_hybrid(one_node, 4, 10 * MiB, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "full_shard (one node)"));
    /* two nodes of two: fits within half the smallest memory (512 MiB) */
    assert_int_equal(ct_fsdp_auto_hybrid(two_nodes, 4, 256 * MiB, why, sizeof(why)), 1);
    assert_non_null(strstr(why, "hybrid_shard (2 nodes of 2 ranks"));
    /* one byte more than half of the smallest: full_shard, saying both sizes */
    assert_int_equal(ct_fsdp_auto_hybrid(two_nodes, 4, 256 * MiB + 1, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "full_shard (a node's ranks would hold the model's 256.0 MiB"));
    assert_non_null(strstr(why, "more than half of 512.0 MiB"));
    assert_int_equal(ct_fsdp_auto_hybrid(uneven, 4, MiB, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "2 nodes with unequal numbers of ranks"));
    assert_int_equal(ct_fsdp_auto_hybrid(unknown, 4, MiB, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "no rank knows the memory"));
    /* node indices as SLURM numbers them, interleaved ranks: still two nodes of two */
    assert_int_equal(ct_fsdp_auto_hybrid(node_ids, 4, MiB, why, sizeof(why)), 1);
    assert_int_equal(ct_fsdp_auto_hybrid(one_node, 1, MiB, why, sizeof(why)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptors),
        cmocka_unit_test(test_register_models),
        cmocka_unit_test(test_plan_model),
        cmocka_unit_test(test_plan_model_config),
        cmocka_unit_test(test_plan_activation_checkpointing),
        cmocka_unit_test(test_init_from_unregistered),
        cmocka_unit_test(test_config_set),
        cmocka_unit_test(test_implementation_missing),
        cmocka_unit_test_setup_teardown(test_init_from_plan, hf_dir_setup, hf_dir_teardown),
        cmocka_unit_test(test_error_catalogue),
        cmocka_unit_test(test_catalogue_covered),
        cmocka_unit_test(test_auto_table),
        cmocka_unit_test(test_backend_table),
        cmocka_unit_test(test_sources_and_json),
        cmocka_unit_test(test_cpu_bf16_notice),
        cmocka_unit_test(test_fsdp_auto),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
