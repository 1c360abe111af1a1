/* ctrain — the Accelerator: knows its device and nothing else.
 *
 * Availability, device count, setting the device, memory stats. It knows nothing about ranks,
 * collectives or checkpoints (those are the Strategy's). Implementations register themselves by
 * name with ct_registry_set_accelerator_ops(); libctrain-core only has their names.
 */
#ifndef CTRAIN_ACCELERATOR_H
#define CTRAIN_ACCELERATOR_H

#include <stddef.h>

#include "ctrain/error.h"

/* Most devices one node may use (ids and process counts). */
#define CT_MAX_DEVICES 256

typedef struct ct_memstats {
    size_t used_bytes;   /* device memory in use by this process (cpu: resident set size) */
    size_t total_bytes;  /* device capacity (cpu: physical memory) */
    size_t peak_bytes;   /* high-water mark (cpu: peak RSS) */
} ct_memstats;

struct ct_accelerator_ops {
    const char *name;
    /* 1 when usable here; 0 with a reason in why (e.g. "no CUDA driver"). */
    int (*is_available)(char *why, size_t why_size);
    /* Devices this process may use (cpu: online cores; cuda: after CUDA_VISIBLE_DEVICES). */
    int (*device_count)(void);
    /* Make device id current for this process/thread. */
    int (*set_device)(int id, ct_error *err);
    int (*memory_stats)(int id, ct_memstats *out);
};

#endif
