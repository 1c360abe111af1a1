/* The data-module seam: open a registered data module by name and dispatch to its ops
 * (include/ctrain/datamodule.h). */
#include <stdio.h>
#include <stdlib.h>

#include "ctrain/datamodule.h"
#include "ctrain/registry.h"

int ct_datamodule_open(const char *name, const char *dir, double val_fraction, unsigned splits,
                       ct_datamodule **out, ct_error *err)
{
    const ct_registry_entry *e = ct_registry_find(CT_REG_DATAMODULE, name);
    const struct ct_datamodule_class *cls = e ? e->ops : NULL;

    *out = NULL;
    if (!e)
        return ct_error_set(err, CT_EINVAL, "datamodule-unknown", "--datamodule '%s' is not a known data module",
                            name);
    if (!cls || !cls->open) {
        ct_error_set(err, CT_ENOTAVAIL, "implementation-missing", "data module %s is not linked into this program",
                     e->name);
        return ct_error_hint(err, "call ct_engine_init() (and register your data module) before training");
    }
    return cls->open(dir && dir[0] ? dir : e->default_dir, val_fraction, splits, out, err);
}

int ct_datamodule_setup(ct_datamodule *dm, const ct_tensor_spec *x, const ct_tensor_spec *y, ct_error *err)
{
    return dm->ops->setup ? dm->ops->setup(dm, x, y, err) : 0;
}

size_t ct_datamodule_size(const ct_datamodule *dm, enum ct_split split)
{
    return dm->ops->size(dm, split);
}

int ct_datamodule_gather(const ct_datamodule *dm, enum ct_split split, const uint32_t *idx, int count,
                         ct_batch *b, ct_error *err)
{
    return dm->ops->gather(dm, split, idx, count, b, err);
}

const ct_data_info *ct_datamodule_info(const ct_datamodule *dm)
{
    return &dm->info;
}

void ct_datamodule_free(ct_datamodule *dm)
{
    if (dm && dm->ops && dm->ops->destroy)
        dm->ops->destroy(dm);
}

size_t ct_tensor_spec_numel(const ct_tensor_spec *spec)
{
    size_t n = 1;

    for (int d = 0; d < spec->ndim; d++)
        n *= (size_t)spec->shape[d];
    return n;
}

static const char *dtype_name(enum ct_dtype t)
{
    switch (t) {
    case CT_DTYPE_F32:  return "f32";
    case CT_DTYPE_F64:  return "f64";
    case CT_DTYPE_BF16: return "bf16";
    case CT_DTYPE_F16:  return "f16";
    case CT_DTYPE_U8:   return "u8";
    case CT_DTYPE_U16:  return "u16";
    case CT_DTYPE_I32:  return "i32";
    }
    return "?";
}

const char *ct_tensor_spec_str(const ct_tensor_spec *spec, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "%s[", dtype_name(spec->dtype));

    for (int d = 0; d < spec->ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "," : "", (long long)spec->shape[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}
