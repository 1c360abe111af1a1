/* SPDX-License-Identifier: BSD-3-Clause */
/* ctrain SPANK plugin — the node's files that say which GPU SLURM's numbers are: gres.conf's
 * device files for this node and the drivers' device file -> PCI table (include/ctrain/gres.h
 * maps them; this file only reads). */
#ifndef CTRAIN_SPANK_GRES_H
#define CTRAIN_SPANK_GRES_H

#include "ctrain/error.h"
#include "ctrain/gres_conf.h"

struct ct_spank_gres {
    char conf[1024];                      /* the gres.conf read, "" when none */
    ct_gres_files files;                  /* its gpu files for this node */
    ct_gpu_dev devs[CT_GRES_MAX_FILES];   /* what the drivers say: nvidiaM and renderDN -> PCI */
    int ndevs;
};

/* Read gres.conf (beside $SLURM_CONF, else /etc/slurm) for node, and the NVIDIA driver's
 * /proc/driver/nvidia/gpus/BUS/information minors and /sys/class/drm/renderD* devices. A missing
 * gres.conf or driver table is no error (SLURM's own numbering is used); a gres.conf that does not
 * parse is (CT_EFORMAT). */
int ct_spank_gres_read(const char *node, struct ct_spank_gres *g, ct_error *err);

#endif
