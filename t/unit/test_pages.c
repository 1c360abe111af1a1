/* SPDX-License-Identifier: BSD-3-Clause */
/* engine/util/pages.c's pool: pages moved out of a range into a slot and into another range,
 * measured with mincore; a slot chosen by the smallest that holds enough; refusals change nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine/util/pages.h"

static void fill(unsigned char *p, size_t n, unsigned char v) { memset(p, v, n); }

static int all(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

/* Where the kernel (or emulator) does not move pages as Linux does, the pool is never made. */
static int no_pool(ct_pages_pool *pool, int slots, size_t bytes)
{
    if (ct_pages_pool_init(pool, slots, bytes) == 0)
        return 0;
    printf("# this kernel or emulator does not move pages with MREMAP_DONTUNMAP (qemu-user): no pool\n");
    return 1;
}

static void test_pool_moves(void **state)
{
    size_t ps = ct_pages_size(), four = 4 * ps;
    unsigned char *a = ct_pages_alloc(16 * ps);
    ct_pages_pool pool;

    (void)state;
    assert_non_null(a);
    if (no_pool(&pool, 2, four)) {
        ct_pages_free(a, 16 * ps);
        skip();
    }
    fill(a, four, 0xab);
    assert_int_equal(ct_pages_resident(a, four), four);
    /* out of the range: the range reads zeros and holds nothing, the slot holds the pages */
    assert_int_equal(ct_pages_pool_put(&pool, a, four), 1);
    assert_int_equal(ct_pages_resident(a, four), 0);
    assert_true(all(a, four, 0));
    assert_int_equal(ct_pages_pool_resident(&pool), four);
    /* into another range, its contents the moved pages' */
    fill(a + four, four, 0x11);
    assert_int_equal(ct_pages_pool_take(&pool, a + four, four), 1);
    assert_true(all(a + four, four, 0xab));
    assert_int_equal(ct_pages_pool_resident(&pool), 0);
    assert_int_equal(ct_pages_pool_take(&pool, a + 8 * ps, four), 0);   /* nothing left */
    ct_pages_pool_free(&pool);
    ct_pages_free(a, 16 * ps);
}

static void test_pool_slots(void **state)
{
    size_t ps = ct_pages_size();
    unsigned char *a = ct_pages_alloc(16 * ps);
    ct_pages_pool pool;

    (void)state;
    if (no_pool(&pool, 2, 4 * ps)) {
        ct_pages_free(a, 16 * ps);
        skip();
    }
    fill(a, 16 * ps, 0);
    fill(a, 4 * ps, 1);
    fill(a + 4 * ps, 2 * ps, 2);
    fill(a + 8 * ps, 4 * ps, 3);
    /* larger than a slot, or not page-aligned: refused, nothing moved */
    assert_int_equal(ct_pages_pool_put(&pool, a, 5 * ps), 0);
    assert_int_equal(ct_pages_pool_put(&pool, a + 1, ps), 0);
    assert_true(all(a, 4 * ps, 1));
    assert_int_equal(ct_pages_pool_put(&pool, a, 4 * ps), 1);
    assert_int_equal(ct_pages_pool_put(&pool, a + 4 * ps, 2 * ps), 1);
    /* both slots full: the third stays where it is */
    assert_int_equal(ct_pages_pool_put(&pool, a + 8 * ps, 4 * ps), 0);
    assert_true(all(a + 8 * ps, 4 * ps, 3));
    /* two pages: the slot holding two, not the one holding four */
    assert_int_equal(ct_pages_pool_take(&pool, a + 12 * ps, 2 * ps), 1);
    assert_true(all(a + 12 * ps, 2 * ps, 2));
    /* more than any slot holds: the fullest slot's four pages fill the first four */
    fill(a + 8 * ps, 8 * ps, 4);
    assert_int_equal(ct_pages_pool_take(&pool, a + 8 * ps, 8 * ps), 1);
    assert_true(all(a + 8 * ps, 4 * ps, 1));
    assert_true(all(a + 12 * ps, 4 * ps, 4));
    assert_int_equal(ct_pages_pool_resident(&pool), 0);
    /* three of four pages: the rest of that slot goes back to the system */
    assert_int_equal(ct_pages_pool_put(&pool, a + 8 * ps, 4 * ps), 1);
    assert_int_equal(ct_pages_pool_take(&pool, a, 3 * ps), 1);
    assert_true(all(a, 3 * ps, 1));
    assert_int_equal(ct_pages_pool_resident(&pool), 0);
    /* trim: whatever is held goes back */
    fill(a + 8 * ps, 3 * ps, 5);
    assert_int_equal(ct_pages_pool_put(&pool, a + 8 * ps, 3 * ps), 1);
    assert_int_equal(ct_pages_pool_resident(&pool), 3 * ps);
    ct_pages_pool_trim(&pool);
    assert_int_equal(ct_pages_pool_resident(&pool), 0);
    assert_int_equal(ct_pages_pool_take(&pool, a, ps), 0);
    ct_pages_pool_free(&pool);
    /* a pool that could not be made holds nothing: every put and take is 0 */
    assert_int_equal(ct_pages_pool_init(&pool, 0, ps), -1);
    assert_int_equal(ct_pages_pool_put(&pool, a, ps), 0);
    assert_int_equal(ct_pages_pool_take(&pool, a, ps), 0);
    ct_pages_pool_free(&pool);
    ct_pages_free(a, 16 * ps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_moves),
        cmocka_unit_test(test_pool_slots),
    };

    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
