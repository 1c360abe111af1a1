/* SPDX-License-Identifier: BSD-3-Clause */
/* st_compare [--tol X] A B [PREFIX] — exit 0 when every tensor of safetensors file A (whose name
 * starts with PREFIX, default all) has the same dtype, shape and bytes in B; prints the first
 * difference. --tol X: F32 tensors need only agree within X relative to the tensor's largest
 * magnitude (max |a - b| / max |a|); prints the largest such difference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

struct st {
    unsigned char *buf;
    long size;
    cJSON *hdr;
    unsigned char *data;
};

static int st_open(const char *path, struct st *s)
{
    FILE *f = fopen(path, "rb");
    unsigned long long n = 0;

    if (!f)
        return fprintf(stderr, "st_compare: cannot open %s\n", path), -1;
    fseek(f, 0, SEEK_END);
    s->size = ftell(f);
    rewind(f);
    s->buf = malloc((size_t)s->size + 1);
    if (fread(s->buf, 1, (size_t)s->size, f) != (size_t)s->size || s->size < 8)
        return fclose(f), fprintf(stderr, "st_compare: cannot read %s\n", path), -1;
    fclose(f);
    for (int i = 0; i < 8; i++)
        n |= (unsigned long long)s->buf[i] << (8 * i);
    if (n > (unsigned long long)s->size - 8)
        return fprintf(stderr, "st_compare: %s: bad header length\n", path), -1;
    s->hdr = cJSON_ParseWithLength((const char *)s->buf + 8, n);
    s->data = s->buf + 8 + n;
    return s->hdr ? 0 : (fprintf(stderr, "st_compare: %s: bad header\n", path), -1);
}

static void st_close(struct st *s)
{
    cJSON_Delete(s->hdr);
    free(s->buf);
}

static long off(const cJSON *t, int i)
{
    return (long)cJSON_GetArrayItem(cJSON_GetObjectItem(t, "data_offsets"), i)->valuedouble;
}

/* max |a - b| / max |a| over n floats (unaligned in the file: copied out). */
static double rel_diff(const unsigned char *pa, const unsigned char *pb, size_t n)
{
    double big = 0, diff = 0;

    for (size_t i = 0; i < n; i++) {
        float x, y;

        memcpy(&x, pa + 4 * i, 4);
        memcpy(&y, pb + 4 * i, 4);
        if (fabs(x) > big)
            big = fabs(x);
        if (fabs((double)x - y) > diff || x != x || y != y)
            diff = x != x || y != y ? 1e30 : fabs((double)x - y);
    }
    return big > 0 ? diff / big : diff;
}

int main(int argc, char **argv)
{
    struct st a, b;
    const cJSON *ta;
    const char *prefix;
    double tol = -1, worst = 0;
    int compared = 0;

    if (argc > 2 && !strcmp(argv[1], "--tol")) {
        tol = atof(argv[2]);
        argc -= 2;
        argv += 2;
    }
    prefix = argc > 3 ? argv[3] : "";
    if (argc < 3 || st_open(argv[1], &a) || st_open(argv[2], &b))
        return 2;
    cJSON_ArrayForEach(ta, a.hdr) {
        const cJSON *tb;
        char *sa, *sb;
        int same;

        if (!strcmp(ta->string, "__metadata__") || strncmp(ta->string, prefix, strlen(prefix)))
            continue;
        tb = cJSON_GetObjectItem(b.hdr, ta->string);
        if (!tb) {
            printf("tensor %s missing in %s\n", ta->string, argv[2]);
            compared = -1;
            break;
        }
        sa = cJSON_PrintUnformatted(cJSON_GetObjectItem(ta, "shape"));
        sb = cJSON_PrintUnformatted(cJSON_GetObjectItem(tb, "shape"));
        same = !strcmp(sa, sb) && off(ta, 1) - off(ta, 0) == off(tb, 1) - off(tb, 0);
        if (same && tol >= 0 && !strcmp(cJSON_GetObjectItem(ta, "dtype")->valuestring, "F32")) {
            double r = rel_diff(a.data + off(ta, 0), b.data + off(tb, 0), (size_t)(off(ta, 1) - off(ta, 0)) / 4);

            if (r > worst)
                worst = r;
            same = r <= tol;
        } else if (same) {
            same = !memcmp(a.data + off(ta, 0), b.data + off(tb, 0), (size_t)(off(ta, 1) - off(ta, 0)));
        }
        free(sa);
        free(sb);
        if (!same) {
            printf("tensor %s differs\n", ta->string);
            compared = -1;
            break;
        }
        compared++;
    }
    st_close(&a);
    st_close(&b);
    if (compared > 0 && tol >= 0)
        printf("%d tensors within %g (largest relative difference %.2e)\n", compared, tol, worst);
    else if (compared > 0)
        printf("%d tensors identical\n", compared);
    else if (tol >= 0)
        printf("largest relative difference %.2e\n", worst);
    return compared > 0 ? 0 : 1;
}
