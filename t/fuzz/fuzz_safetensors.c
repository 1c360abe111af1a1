/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: arbitrary bytes as a safetensors checkpoint. Loading must return 0 or a clean
 * CT_E* error, never crash, read out of bounds or leak (make fuzz). A file that loads must also
 * satisfy, checked here independently of the loader (Hugging Face's rules and ctrain's limits):
 * header at most 1 MiB; no key twice at the top or in __metadata__; sorted by offset the tensors'
 * data ranges follow each other from 0 with no gap or overlap and end exactly at the end of the
 * file. Each input is loaded twice: asking for two tensors (weights), and for none (the header);
 * then listed (--init-from reads another library's file so): a listing must describe tensors whose
 * sizes are their shapes' and accept exactly what the header pass accepts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ctrain/checkpoint_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct range {
    double begin, end;
};

static int range_cmp(const void *a, const void *b)
{
    const struct range *x = a, *y = b;

    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static void no_duplicates(const cJSON *obj)
{
    for (const cJSON *a = obj ? obj->child : NULL; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (!strcmp(a->string, b->string))
                abort(); /* a key twice was accepted */
}

/* Called only for an input the loader accepted. */
static void check_invariants(const uint8_t *data, size_t size)
{
    uint64_t hlen = 0;
    cJSON *root;
    const cJSON *e;
    struct range *r;
    size_t k = 0;
    double at = 0;

    if (size < 8)
        abort();
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)data[i] << (8 * i);
    if (hlen > ((uint64_t)1 << 20) || hlen > size - 8)
        abort(); /* a header over the limit was accepted */
    root = cJSON_ParseWithLength((const char *)data + 8, (size_t)hlen);
    if (!cJSON_IsObject(root))
        abort();
    no_duplicates(root);
    no_duplicates(cJSON_GetObjectItemCaseSensitive(root, "__metadata__"));
    r = calloc((size_t)cJSON_GetArraySize(root) + 1, sizeof(*r));
    if (!r)
        abort();
    cJSON_ArrayForEach(e, root) {
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");

        if (!strcmp(e->string, "__metadata__"))
            continue;
        r[k].begin = cJSON_GetArrayItem(offs, 0)->valuedouble;
        r[k++].end = cJSON_GetArrayItem(offs, 1)->valuedouble;
    }
    qsort(r, k, sizeof(*r), range_cmp);
    for (size_t i = 0; i < k; i++) {
        if (r[i].begin != at || r[i].end < r[i].begin)
            abort(); /* overlapping, gapped or backward ranges were accepted */
        at = r[i].end;
    }
    if (at != (double)(size - 8 - hlen))
        abort(); /* trailing bytes were accepted */
    free(r);
    cJSON_Delete(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    static ct_ckpt c;
    static float w[6], b[2];
    ct_error err;
    FILE *f;

    if (!path[0])
        snprintf(path, sizeof(path), "/tmp/ctrain-fuzz-st-%d", (int)getpid());
    f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    int header_ok = 0;

    for (int pass = 0; pass < 2; pass++) {
        memset(&c, 0, sizeof(c));
        if (pass == 0) {
            c.n_tensors = 2;
            snprintf(c.tensors[0].name, sizeof(c.tensors[0].name), "layers.0.weight");
            c.tensors[0].ndim = 2;
            c.tensors[0].shape[0] = 2;
            c.tensors[0].shape[1] = 3;
            c.tensors[0].data = w;
            c.tensors[0].nbytes = sizeof(w);
            snprintf(c.tensors[1].name, sizeof(c.tensors[1].name), "layers.0.bias");
            c.tensors[1].ndim = 1;
            c.tensors[1].shape[0] = 2;
            c.tensors[1].data = b;
            c.tensors[1].nbytes = sizeof(b);
        }
        if (ct_checkpoint_io_safetensors.load(path, &c, &err) != 0) {
            if (err.code >= 0)
                abort(); /* a failure must carry a CT_E* code */
        } else {
            check_invariants(data, size);
            header_ok = pass == 1;
        }
    }
    memset(&c, 0, sizeof(c));
    if (ct_checkpoint_io_safetensors.list(path, &c, &err) != 0) {
        if (err.code >= 0 || (header_ok && strcmp(err.id, "ckpt-header")))
            abort(); /* a failure without a code, or a header pass accepted what the listing refuses */
    } else {
        if (!header_ok)
            abort(); /* listed what loading the header refused */
        for (int i = 0; i < c.n_tensors; i++) {
            size_t numel = 1;

            for (int d = 0; d < c.tensors[i].ndim; d++)
                numel *= (size_t)c.tensors[i].shape[d];
            if (c.tensors[i].data || !c.tensors[i].name[0] || numel * (c.tensors[i].dtype == CT_DTYPE_F64 ? 8 :
                c.tensors[i].dtype == CT_DTYPE_F32 ? 4 : 2) != c.tensors[i].nbytes)
                abort();
        }
    }
    unlink(path);
    return 0;
}
