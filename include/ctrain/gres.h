/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain — SLURM's GPU numbers (SLURM_STEP_GPUS) mapped to the physical GPUs of a topology.
 *
 * What SLURM puts in SLURM_STEP_GPUS / SLURM_JOB_GPUS (22.05 and 24.11, gres/gpu): gres indexes,
 * the positions of the allocated GPUs in slurmd's list of the node's GPU device files. That list
 * is gres.conf's File= entries in the order written (slurmd does not sort them), or with
 * AutoDetect=nvml/rsmi/oneapi the library's order, which is PCI bus order. SLURM puts the same
 * numbers in CUDA_VISIBLE_DEVICES (renumbered from 0 with ConstrainDevices=yes), meaning the N-th
 * GPU in PCI order. The device file is what SLURM allocated (its cgroup grants that file); the
 * number is a GPU in PCI order only when the files are listed in PCI order. /dev/nvidiaN's N is
 * the NVIDIA driver's minor, which need not follow PCI order (the driver says which PCI device
 * has which minor in /proc/driver/nvidia/gpus/BUS/information); AMD's /dev/dri/renderDN points
 * at its PCI device in /sys/class/drm/renderDN/device.
 *
 * Pure functions (LLNL mpibind style): the plugin reads gres.conf (parsed by include/ctrain/gres_conf.h)
 * and the driver's table and hands them here. */
#ifndef CTRAIN_GRES_H
#define CTRAIN_GRES_H

#include <stddef.h>

#include "ctrain/bind.h"
#include "ctrain/error.h"

#define CT_GRES_MAX_FILES 64

/* The node's gpu GRES device files as slurmd lists them (gres index order). */
typedef struct ct_gres_files {
    int autodetect;      /* AutoDetect other than off for this node: SLURM orders the GPUs itself
                            (the library's index: PCI order) */
    int unknown;         /* gres.conf uses what is not followed here (Include, MultipleFiles):
                            the list is not known */
    int nfiles;          /* 0: gres.conf names no gpu device file for this node */
    char files[CT_GRES_MAX_FILES][64]; /* basenames, "nvidia3", "renderD129" */
    char paths[CT_GRES_MAX_FILES][256]; /* the same files as gres.conf names them ("/dev/nvidia3"):
                                           what --ctrain-preflight checks exist */
} ct_gres_files;

/* One device file the driver knows: "nvidia3" (minor 3) or "renderD129" at a PCI bus id. */
typedef struct ct_gpu_dev {
    char file[64];
    char pci[16];        /* "0000:02:00.0" */
} ct_gpu_dev;

/* SLURM's numbers (list: "0,2") as the planner's GPU list (PCI positions in topo, "1,0") into out.
 * With gres.conf's files and the driver's table (devs), number N is the GPU of the N-th file;
 * else (AutoDetect, no files listed, files no driver table names such as MIG's nvidia-caps, no
 * driver table: stand-in device files) the N-th GPU in PCI order, SLURM's own meaning. Where the file's GPU is not the N-th in PCI order, why says so
 * (SLURM's CUDA_VISIBLE_DEVICES names another GPU) and the file's GPU is used: the one SLURM
 * allocated. CT_EINVAL naming SLURM's number when it cannot be mapped: beyond the node's files or
 * GPUs, a file the driver does not list, a PCI device the topology lacks. */
int ct_gres_map(const ct_topology *topo, const char *list, const ct_gres_files *files, const ct_gpu_dev *devs,
                int ndevs, char *out, size_t size, char *why, size_t wsize, ct_error *err);

/* The PCI bus id of the topology's GPU in PCI position k ("0000:01:00.0"); NULL when none. */
const char *ct_topology_gpu_pci(const ct_topology *topo, int k);

#endif
