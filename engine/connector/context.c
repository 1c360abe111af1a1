/* SPDX-License-Identifier: BSD-3-Clause */
/* What the connector may ask the world (ct_connector_context): the defaults filled in, and the one
 * way its parts read a variable. A leaf: the other connector files call it, it calls none of them. */
#include <string.h>

#include "engine/connector/connector_internal.h"

void ct_connector_context_fill(const ct_connector_context *in, ct_connector_context *out)
{
    if (in)
        *out = *in;
    else
        memset(out, 0, sizeof(*out));
    if (!out->getenv_fn) {
        out->getenv_fn = ct_getenv_process;
        out->getenv_ctx = NULL;
    }
}

const char *ct_connector_getenv(const ct_connector_context *ctx, const char *name)
{
    return ctx->getenv_fn(name, ctx->getenv_ctx);
}
