/* SPDX-License-Identifier: BSD-3-Clause */
/* The external launcher: srun, mpirun, jsrun or torchrun already started every process; each
 * runs the body once, here. See include/ctrain/launcher.h. */
#include "ctrain/launcher.h"

static int external_launch(const ct_launch_spec *spec, ct_launch_body body, void *arg,
                           void *result, size_t result_size, ct_error *err)
{
    return body(arg, result, result_size, err);
}

const struct ct_launcher_ops ct_launcher_external = {
    .launch = external_launch,
};
