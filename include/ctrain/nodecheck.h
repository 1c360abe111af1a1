/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — a node's own checks before a step's tasks start (--ctrain-preflight).
 *
 * A pure function of what the caller gathered (the step's GPUs and their device files, the NIC the
 * binding plan chose, the interfaces getifaddrs() lists) and of the files it reads under the roots
 * it is given (proc_root, sys_root: "/proc" and "/sys" on a node; a directory made to look like them
 * in unit tests). libctrain-core: the SPANK plugin runs it in slurmstepd, as the job's user.
 *
 * The checks, each cheap (without GPUs a few file reads, 0.01 ms; with GPUs one pass over /proc's fd
 * directories, about 2 ms for 100 processes on the test machine):
 *   gpu      each GPU SLURM gave the step: its device file exists and is a character device; the
 *            node's topology shows it (the caller mapped it to a PCI position); no process outside
 *            the step holds it open (every /proc/PID/fd entry whose file is the device, the
 *            driver's files' view of "in use"; NVML is not loaded into slurmstepd)
 *   nic      the plan's fabric device (an OpenFabrics HCA) has a port ACTIVE in sysfs; the
 *            interface the task's sockets use is up, running (carrier) and has an address
 *   run_dir  the run directory, when given, takes a new file (created, written, synced, removed)
 *   memory   MemAvailable is at least what the job asks per node (or a floor)
 */
#ifndef CTRAIN_NODECHECK_H
#define CTRAIN_NODECHECK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CT_NODECHECK_MAX_GPUS 64
#define CT_NODECHECK_MAX_FINDINGS 16

typedef struct ct_nodecheck_gpu {
    int index;           /* SLURM's number (SLURM_STEP_GPUS) */
    const char *file;    /* its device file, e.g. "/dev/nvidia1"; NULL when gres.conf names none */
    int in_topology;     /* 1: the node's topology shows the GPU (the plugin mapped it) */
} ct_nodecheck_gpu;

typedef struct ct_nodecheck_iface {
    const char *name;
    int up;              /* IFF_UP */
    int running;         /* IFF_RUNNING: carrier */
    int has_addr;        /* an IPv4 or IPv6 address */
} ct_nodecheck_iface;

/* ct_nodecheck_input.checks: which to run (0: all). */
enum { CT_NODECHECK_GPUS = 1, CT_NODECHECK_NET = 2, CT_NODECHECK_RUN_DIR = 4, CT_NODECHECK_MEMORY = 8 };

typedef struct ct_nodecheck_input {
    unsigned checks;                    /* CT_NODECHECK_* ored; 0: every check */
    const char *node;                   /* SLURM's name for this node, for the messages */
    const ct_nodecheck_gpu *gpus;
    int ngpus;
    const char *hca;                    /* the plan's OpenFabrics device ("mlx5_0"); NULL/"" none */
    const char *ifname;                 /* the interface the sockets use; NULL/"" none chosen */
    const ct_nodecheck_iface *ifaces;
    int nifaces;
    const char *run_dir;                /* NULL/"": not given */
    uint64_t mem_needed_mb;             /* 0: no floor */
    pid_t self;                         /* not a holder: the checking process (slurmstepd) */
    const char *proc_root;              /* "/proc" */
    const char *sys_root;               /* "/sys" */
} ct_nodecheck_input;

typedef struct ct_nodecheck_result {
    int nbad;                                        /* findings that make the node bad */
    char bad[CT_NODECHECK_MAX_FINDINGS][256];        /* "GPU 1 (/dev/nvidia1): no such device file" */
    char summary[512];                               /* what was checked and passed, one line */
} ct_nodecheck_result;

/* Runs the checks in->checks names; fills out; returns out->nbad. */
int ct_nodecheck_run(const ct_nodecheck_input *in, ct_nodecheck_result *out);
/* The same, adding to what out holds (checks run in two steps: the GPUs as root, the rest as the
 * job's user); returns out->nbad. */
int ct_nodecheck_more(const ct_nodecheck_input *in, ct_nodecheck_result *out);
/* out->bad joined with "; " into buf (the one line a bad node gets). */
void ct_nodecheck_join(const ct_nodecheck_result *r, char *buf, size_t size);

#endif
