/* SPDX-License-Identifier: BSD-3-Clause */
/* The live hang record: DIR/hang/rank-R.live, a file each rank of a fit maps shared and keeps its
 * progress record in (engine/health/fit/hang.c), so that where a rank is can be read while it cannot
 * write anything itself (stopped, or dead): ctrain diagnose (engine/health/fit/diagnose.c) reads it for
 * a rank that wrote no rank-R.json. Written and read by the same build of ctrain (the layout is
 * checked by the magic and the size, not kept stable across versions). */
#ifndef CTRAIN_HEALTH_HANG_LIVE_H
#define CTRAIN_HEALTH_HANG_LIVE_H

#include <stdint.h>

#include "ctrain/strategy.h"

#define CT_HANG_LIVE_MAGIC "ctlive01"   /* 8 bytes, no terminator kept */
#define CT_HANG_LIVE_HOST 64

/* The progress record proper: what the loops and the strategy store on the step. */
struct ct_hang_rec {
    volatile int64_t step;
    volatile int phase;
    volatile double entered;              /* ct_time_now() (CLOCK_MONOTONIC) when the phase was entered */
    ct_collective_trace coll;             /* coll.what is a pointer into the writer: not for readers */
};

struct ct_hang_live {
    char magic[8];
    uint32_t size;                        /* sizeof(struct ct_hang_live) */
    int32_t rank, world;
    int32_t reserved;
    int64_t pid;
    char host[CT_HANG_LIVE_HOST];         /* SLURM's node name (ct_node_name) */
    double mono_to_wall;                  /* CLOCK_REALTIME - CLOCK_MONOTONIC at the start: monotonic to Unix time */
    double started_wall;                  /* when this process began the record (Unix time) */
    struct ct_hang_rec rec;
};

#endif
