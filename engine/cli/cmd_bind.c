/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain bind — print the binding plan of a node (for admins and tests); see include/ctrain/bind.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/bind.h"
#include "ctrain/error.h"
#include "ctrain/util.h"
#include "engine/cli/commands.h"

static void bind_usage(FILE *out)
{
    fprintf(out,
            "usage: ctrain bind --tasks N [--topology FILE] [--cpus-per-task C] [--gpus LIST] [--cpus LIST] [--json]\n"
            "\n"
            "Print which cores, GPUs and NIC each of N tasks on this node gets, and why — the plan the\n"
            "SPANK plugin applies with --ctrain-bind=closest.\n"
            "\n"
            "  --tasks N          tasks on the node (1-4096)\n"
            "  --topology FILE    an hwloc XML file (lstopo --of xml --whole-io FILE); default: this machine\n"
            "  --cpus-per-task C  CPUs per task (as srun -c); default: an even share of the allowed cores\n"
            "  --gpus LIST        allocated GPUs: CUDA indexes in PCI bus order, OS device names (nvml3),\n"
            "                     PCI bus ids (0000:04:00.0, GPUs without OS device) or UUIDs,\n"
            "                     comma-separated; \"\" for none; default: every GPU\n"
            "  --cpus LIST        allowed CPUs as OS indexes (0-7,16); default: every allowed CPU\n"
            "  --json             one JSON object: {\"tasks\":[{\"local_rank\",\"cpus\",\"gpus\",\n"
            "                     \"cuda_visible_devices\",\"cuda_local_devices\",\"nic\",\"netdev\",\n"
            "                     \"ucx_net_devices\",\"threads\",\"reason\"}],\"nccl_ib_hca\"}\n");
}

static void print_text(const ct_bind_plan *plan)
{
    for (int i = 0; i < ct_bind_plan_ntasks(plan); i++) {
        const ct_bind_task *t = ct_bind_plan_task(plan, i);

        printf("task %d: cpus", t->local_rank);
        for (int c = 0; c < t->ncpus; c++)
            printf("%s%d", c ? "," : " ", t->cpus[c]);
        printf("  gpus");
        for (int g = 0; g < t->ngpus; g++)
            printf("%s%s", g ? "," : " ", t->gpus[g]);
        printf("%s  nic %s  threads %d\n", t->ngpus ? "" : " -", t->nic[0] ? t->nic : "-", t->threads);
        printf("        CUDA_VISIBLE_DEVICES=%s\n        why: %s\n", t->cuda_visible_devices, t->reason);
    }
    printf("node: NCCL_IB_HCA=%s\n", ct_bind_plan_ib_hca(plan)[0] ? ct_bind_plan_ib_hca(plan) : "(none)");
}

int ct_cmd_bind(int argc, char **argv)
{
    static const char *const flags[] = { "--tasks", "--topology", "--cpus-per-task", "--gpus", "--cpus", "--json",
                                         "--help", NULL };
    const char *topology = NULL, *v;
    ct_bind_request req = { 0 };
    ct_topology *topo = NULL;
    ct_bind_plan *plan = NULL;
    ct_error err;
    long n;
    int json = 0, missing = 0, rv = 2;

    ct_error_clear(&err);
    for (int i = 1; i < argc; i++) {
        missing = 0;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            bind_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--tasks", &missing))) {
            if (ct_parse_long(v, 1, 4096, &n) != 0) {
                ct_error_set(&err, CT_EINVAL, "bind-tasks", "--tasks '%s' is not a number from 1 to 4096", v);
                ct_error_hint(&err, "give the number of tasks on this node, e.g. --tasks 4");
                goto fail;
            }
            req.ntasks = (int)n;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--cpus-per-task", &missing))) {
            if (ct_parse_long(v, 1, 65536, &n) != 0) {
                ct_error_set(&err, CT_EINVAL, "bind-cpus-per-task", "--cpus-per-task '%s' is not a positive number", v);
                ct_error_hint(&err, "give CPUs per task as srun -c does, e.g. --cpus-per-task 8");
                goto fail;
            }
            req.cpus_per_task = (int)n;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--topology", &missing))) {
            topology = v;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--gpus", &missing))) {
            req.gpus = v;
        } else if ((v = ct_cli_flag_value(argc, argv, &i, "--cpus", &missing))) {
            req.allowed_cpus = v;
        } else {
            if (missing) {
                ct_error_set(&err, CT_EINVAL, "flag-value", "flag '%s' needs a value", argv[i]);
                ct_error_hint(&err, "run 'ctrain bind --help' for the flags");
            } else {
                ct_cli_flag_unknown("bind", argv[i], flags, &err);
            }
            goto fail;
        }
    }
    if (req.ntasks == 0) {
        ct_error_set(&err, CT_EINVAL, "bind-tasks", "ctrain bind needs --tasks N");
        ct_error_hint(&err, "give the number of tasks on this node, e.g. --tasks 4");
        goto fail;
    }
    if (ct_topology_load(topology, CT_TOPOLOGY_IO, &topo, &err) != 0 || ct_bind_plan_create(topo, &req, &plan, &err) != 0)
        goto fail;
    if (json) {
        char *s = ct_bind_plan_to_json(plan);

        if (!s) {
            ct_error_set(&err, CT_ENOMEM, "out-of-memory", "printing the plan: out of memory");
            goto fail;
        }
        printf("%s\n", s);
        free(s);
    } else {
        print_text(plan);
    }
    rv = 0;
fail:
    if (rv != 0) {
        ct_error_print(stderr, &err);
        rv = ct_error_exit_status(err.code);
    }
    ct_bind_plan_free(plan);
    ct_topology_free(topo);
    return rv;
}
