/* The connector's error catalogue: one row per misconfiguration, by the id its ct_error carries.
 * t/unit/test_connector.c fails if a row has no test case; `ctrain plan --errors` prints it. */
#include "ctrain/connector.h"

static const ct_catalogue_entry catalogue[] = {
    { "flag-duplicate", "any connector flag", "the same flag given twice" },
    { "flag-env-conflict", "--accelerator/--strategy/--precision, CTRAIN_*", "a flag that disagrees with its CTRAIN_* variable" },
    { "flag-missing-value", "any connector flag", "a flag at the end of the line without its value" },
    { "accelerator-empty", "--accelerator, CTRAIN_ACCELERATOR", "empty accelerator name" },
    { "accelerator-unknown", "--accelerator, CTRAIN_ACCELERATOR", "unknown name (did you mean ...)" },
    { "accelerator-is-strategy", "--accelerator", "a strategy name given as accelerator (--accelerator ddp)" },
    { "accelerator-is-precision", "--accelerator", "a precision given as accelerator" },
    { "accelerator-not-available", "--accelerator cuda", "CUDA asked for where there is no driver or device" },
    { "strategy-empty", "--strategy, CTRAIN_STRATEGY", "empty strategy name" },
    { "strategy-unknown", "--strategy, CTRAIN_STRATEGY", "unknown name (did you mean ...)" },
    { "strategy-is-accelerator", "--strategy", "an accelerator name given as strategy (--strategy cuda)" },
    { "strategy-is-precision", "--strategy", "a precision given as strategy" },
    { "strategy-option-malformed", "--strategy NAME:opts", "an option that is not key=value" },
    { "strategy-option-unknown", "--strategy NAME:opts", "an option the strategy does not have" },
    { "strategy-option-value", "--strategy NAME:opts", "an option value out of range" },
    { "strategy-option-without-strategy", "--strategy auto:opts", "options without a strategy name" },
    { "strategy-unsupported-accelerator", "--strategy, --accelerator", "a strategy that needs GPUs on cpu" },
    { "strategy-single-device-many", "--strategy single_device, --devices", "single_device with several devices or tasks" },
    { "strategy-single-device-multinode", "--strategy single_device, --num-nodes", "single_device over several nodes" },
    { "strategy-fork-multinode", "--strategy ddp_fork, --num-nodes", "fork launcher asked to span nodes" },
    { "strategy-fork-external", "--strategy ddp_fork, srun/mpirun", "forking workers where the launcher already started ranks" },
    { "precision-empty", "--precision, CTRAIN_PRECISION", "empty precision" },
    { "precision-unknown", "--precision, CTRAIN_PRECISION", "unknown precision (did you mean ...)" },
    { "precision-is-accelerator", "--precision", "an accelerator name given as precision" },
    { "precision-is-strategy", "--precision", "a strategy name given as precision" },
    { "precision-not-implemented", "--precision", "a known precision ctrain's engine does not compute in" },
    { "precision-unsupported-accelerator", "--precision, --accelerator", "e.g. 16-mixed on cpu (an error, not a switch)" },
    { "devices-empty", "--devices", "empty value" },
    { "devices-zero", "--devices", "zero devices" },
    { "devices-negative", "--devices", "negative other than -1, or a negative id" },
    { "devices-not-number", "--devices", "not a number" },
    { "devices-list-malformed", "--devices", "an empty entry inside a list (0,,1)" },
    { "devices-duplicate", "--devices", "an id listed twice" },
    { "devices-out-of-range", "--devices", "an id the node does not have" },
    { "devices-too-many", "--devices", "more devices than the node has" },
    { "devices-list-on-cpu", "--devices, --accelerator cpu", "a list of ids where cpu takes a count" },
    { "num-nodes-not-number", "--num-nodes", "not a number" },
    { "num-nodes-nonpositive", "--num-nodes", "zero or negative" },
    { "multinode-without-launcher", "--num-nodes", "several nodes but nothing started processes on them" },
    { "env-unknown", "--cluster-env", "unknown cluster environment (did you mean ...)" },
    { "env-absent", "--cluster-env", "a cluster environment forced but not present" },
    { "env-devices-mismatch", "--devices, srun/torchrun/mpirun", "--devices differs from the tasks started on this node" },
    { "env-num-nodes-mismatch", "--num-nodes, srun/torchrun/mpirun", "--num-nodes differs from the nodes in the job" },
    { "env-world-size-mismatch", "--devices, --num-nodes, WORLD_SIZE", "devices x nodes is not the launcher's world size" },
    { "env-layout-unknown", "mpirun/mpiexec on several nodes, manual", "no launcher answer for the node of a rank, or hand-started processes with no processes per node" },
    { "env-variable-missing", "MASTER_ADDR, WORLD_SIZE, LOCAL_RANK, ...", "a variable the environment needs is not set (named)" },
    { "env-unequal-tasks", "--devices, SLURM_TASKS_PER_NODE", "different task counts per node where equal ones are needed" },
    { "env-variable-malformed", "SLURM_*, RANK, OMPI_*, ...", "a launcher variable that is not a number / list" },
    { "env-inconsistent", "SLURM_PROCID, RANK, ...", "launcher variables that contradict each other" },
    { "hostlist-malformed", "SLURM_STEP_NODELIST, SLURM_NODELIST", "a node list SLURM could not have written" },
    { "implementation-missing", "--strategy, --accelerator, ...", "a registered name with no implementation linked" },
};

const ct_catalogue_entry *ct_connector_catalogue(int *n)
{
    *n = (int)(sizeof(catalogue) / sizeof(catalogue[0]));
    return catalogue;
}
