/* SPDX-License-Identifier: BSD-3-Clause */
/* idx_subset SRC_DIR DST_DIR N_TRAIN N_TEST — write the first samples of Fashion-MNIST as a smaller
 * data set in the same gzip'd IDX format, so tests train on real images in a fraction of the time. */
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#include "engine/data/fashion_mnist.h"

static int write_idx(const char *path, int ndim, const uint32_t *dims, const uint8_t *data, size_t n)
{
    unsigned char hdr[16] = { 0, 0, 8, (unsigned char)ndim };
    gzFile f = gzopen(path, "wb1");

    if (!f)
        return -1;
    for (int i = 0; i < ndim; i++)
        for (int b = 0; b < 4; b++)
            hdr[4 + 4 * i + b] = (unsigned char)(dims[i] >> (24 - 8 * b));
    if (gzwrite(f, hdr, (unsigned)(4 + 4 * ndim)) <= 0 || gzwrite(f, data, (unsigned)n) <= 0)
        return gzclose(f), -1;
    return gzclose(f) == Z_OK ? 0 : -1;
}

static int subset(const char *src, const char *dst, const char *prefix, uint32_t n)
{
    char in[4096], out[4096];
    uint32_t idims[3], ldims[1];
    uint8_t *img, *lab;
    ct_error err;

    snprintf(in, sizeof(in), "%s/%s-images-idx3-ubyte.gz", src, prefix);
    if (ct_idx_read_u8(in, 3, idims, &img, &err))
        return fprintf(stderr, "idx_subset: %s\n", err.msg), -1;
    snprintf(in, sizeof(in), "%s/%s-labels-idx1-ubyte.gz", src, prefix);
    if (ct_idx_read_u8(in, 1, ldims, &lab, &err))
        return fprintf(stderr, "idx_subset: %s\n", err.msg), -1;
    if (n > idims[0])
        n = idims[0];
    idims[0] = ldims[0] = n;
    snprintf(out, sizeof(out), "%s/%s-images-idx3-ubyte.gz", dst, prefix);
    if (write_idx(out, 3, idims, img, (size_t)n * idims[1] * idims[2]))
        return fprintf(stderr, "idx_subset: cannot write %s\n", out), -1;
    snprintf(out, sizeof(out), "%s/%s-labels-idx1-ubyte.gz", dst, prefix);
    if (write_idx(out, 1, ldims, lab, n))
        return fprintf(stderr, "idx_subset: cannot write %s\n", out), -1;
    free(img);
    free(lab);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: idx_subset SRC_DIR DST_DIR N_TRAIN N_TEST\n");
        return 2;
    }
    if (subset(argv[1], argv[2], "train", (uint32_t)atol(argv[3])) ||
        subset(argv[1], argv[2], "t10k", (uint32_t)atol(argv[4])))
        return 1;
    return 0;
}
