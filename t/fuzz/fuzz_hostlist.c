/* libFuzzer target: arbitrary bytes as a SLURM hostlist expression (what SLURM_JOB_NODELIST,
 * SLURM_STEP_NODELIST and --nodelist carry). Expansion must succeed or fail with a CT_E* code;
 * when it succeeds, compressing the hosts and expanding the result again must give the same hosts
 * in the same order (make fuzz). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctrain/hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The expression as a C string: hostlists come from the environment and argv, which hold no NUL. */
static char *to_string(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

static void check_same(const ct_hostlist *a, const ct_hostlist *b)
{
    if (ct_hostlist_count(a) != ct_hostlist_count(b))
        abort();
    for (size_t i = 0; i < ct_hostlist_count(a); i++)
        if (strcmp(ct_hostlist_get(a, i), ct_hostlist_get(b, i)))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *expr = to_string(data, size), *packed = NULL;
    ct_hostlist *hl = NULL, *again = NULL;
    ct_error err;

    if (ct_hostlist_expand(expr, &hl, &err) != 0) {
        if (err.code >= 0 || hl)
            abort(); /* a failure carries a CT_E* code and leaves no list */
        goto done;
    }
    if (ct_hostlist_compress(hl, &packed, &err) != 0)
        abort();     /* every list expand gives can be written back */
    if (ct_hostlist_expand(packed, &again, &err) != 0)
        abort();     /* and what compress writes is a valid expression */
    check_same(hl, again);
    for (size_t i = 0; i < ct_hostlist_count(hl) && i < 64; i++)
        if (ct_hostlist_find(again, ct_hostlist_get(hl, i)) < 0)
            abort();
done:
    ct_hostlist_free(again);
    ct_hostlist_free(hl);
    free(packed);
    free(expr);
    return 0;
}
