/* SPDX-License-Identifier: BSD-3-Clause */
/* The binding planner on real machine topologies (t/fixtures/topologies, from hwloc's test suite
 * and LLNL mpibind's published machines):
 * disjointness, locality, even spread, determinism and the documented short-resource behaviour. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <hwloc.h>

#include "ctrain/bind.h"
#include "ctrain/gres.h"
#include "ctrain/net.h"
#include "ctrain/util.h"
#include "engine/bind/cpuset.h"
#include "engine/bind/node_summary.h"
#include "engine/bind/topology_model.h"

static char dir[1024];

static void fixture(const char *name, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", dir, name);
}

/* An independent view of the same file, to check the plan against hwloc directly. */
struct view {
    hwloc_topology_t hw;
    ct_topology *topo;
};

static void view_load(const char *name, struct view *v)
{
    char path[1200];
    ct_error err;

    fixture(name, path, sizeof(path));
    assert_int_equal(ct_topology_load(path, CT_TOPOLOGY_IO, &v->topo, &err), 0);
    assert_int_equal(hwloc_topology_init(&v->hw), 0);
    hwloc_topology_set_io_types_filter(v->hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    assert_int_equal(hwloc_topology_set_xml(v->hw, path), 0);
    assert_int_equal(hwloc_topology_load(v->hw), 0);
}

static void view_free(struct view *v)
{
    ct_topology_free(v->topo);
    hwloc_topology_destroy(v->hw);
}

static hwloc_obj_t osdev(hwloc_topology_t hw, const char *name)
{
    for (hwloc_obj_t o = hwloc_get_next_osdev(hw, NULL); o; o = hwloc_get_next_osdev(hw, o))
        if (o->name && !strcmp(o->name, name))
            return o;
    return NULL;
}

/* A GPU of a plan: its OS device, or its PCI device when named by bus id (no OS device). */
static hwloc_obj_t gpu_obj(hwloc_topology_t hw, const char *name)
{
    hwloc_obj_t o = osdev(hw, name);

    return o ? o : hwloc_get_pcidev_by_busidstring(hw, name);
}

static hwloc_bitmap_t task_cpuset(const ct_bind_task *t)
{
    hwloc_bitmap_t cs = hwloc_bitmap_alloc();

    for (int c = 0; c < t->ncpus; c++)
        hwloc_bitmap_set(cs, (unsigned)t->cpus[c]);
    return cs;
}

/* An object of the type over the same CPUs as an earlier one (KNL's MCDRAM beside its DDR). */
static int same_cpus_as_earlier(hwloc_topology_t hw, hwloc_obj_type_t type, int i)
{
    for (int e = 0; e < i; e++)
        if (hwloc_bitmap_isequal(hwloc_get_obj_by_type(hw, type, (unsigned)e)->cpuset,
                                 hwloc_get_obj_by_type(hw, type, (unsigned)i)->cpuset))
            return 1;
    return 0;
}

/* Objects of the type with distinct CPUs. */
static int count_distinct(hwloc_topology_t hw, hwloc_obj_type_t type)
{
    int n = 0;

    for (int i = 0; i < hwloc_get_nbobjs_by_type(hw, type); i++)
        n += !same_cpus_as_earlier(hw, type, i);
    return n;
}

/* Packages (or NUMA nodes, one per set of CPUs) the task's CPUs touch. */
static int count_touched(hwloc_topology_t hw, hwloc_obj_type_t type, hwloc_const_bitmap_t cs, int *first)
{
    int n = 0;

    for (int i = 0; i < hwloc_get_nbobjs_by_type(hw, type); i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(hw, type, (unsigned)i);

        if (!same_cpus_as_earlier(hw, type, i) && hwloc_bitmap_intersects(o->cpuset, cs)) {
            if (!n)
                *first = i;
            n++;
        }
    }
    return n;
}

static ct_bind_plan *plan_for(struct view *v, int ntasks, const char *gpus, const char *cpus)
{
    ct_bind_request req = { .allowed_cpus = cpus, .gpus = gpus, .ntasks = ntasks };
    ct_bind_plan *plan = NULL;
    ct_error err;

    ct_error_clear(&err);
    if (ct_bind_plan_create(v->topo, &req, &plan, &err) != 0)
        fail_msg("plan for %d tasks: %s", ntasks, err.msg);
    assert_int_equal(ct_bind_plan_ntasks(plan), ntasks);
    return plan;
}

/* The rules every plan follows, checked for 1, 2, 4, 8 and 16 tasks on one topology. */
static void check_rules_with(const char *name, int uneven_numa)
{
    static const int counts[] = { 1, 2, 3, 4, 6, 8, 12, 16, 24, 40 };
    struct view v;

    view_load(name, &v);
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        int n = counts[ci];
        ct_bind_plan *plan = plan_for(&v, n, NULL, NULL), *again = plan_for(&v, n, NULL, NULL);
        char *j1 = ct_bind_plan_to_json(plan), *j2 = ct_bind_plan_to_json(again);
        hwloc_bitmap_t used = hwloc_bitmap_alloc(), usedcores = hwloc_bitmap_alloc();
        int npus = hwloc_get_nbobjs_by_type(v.hw, HWLOC_OBJ_PU);
        int ncores = hwloc_get_nbobjs_by_type(v.hw, HWLOC_OBJ_CORE);
        int npkg = hwloc_get_nbobjs_by_type(v.hw, HWLOC_OBJ_PACKAGE);
        int nnuma = count_distinct(v.hw, HWLOC_OBJ_NUMANODE);
        int ngpus = ct_topology_gpu_count(v.topo), given = 0, per_numa[64] = { 0 }, per_pkg[64] = { 0 };
        char seen[CT_BIND_MAX_GPUS * 4][32];
        int nseen = 0;

        assert_string_equal(j1, j2); /* deterministic */
        for (int r = 0; r < n; r++) {
            const ct_bind_task *t = ct_bind_plan_task(plan, r);
            hwloc_bitmap_t cs = task_cpuset(t);
            int first = 0;

            assert_int_equal(t->local_rank, r);
            assert_true(t->ncpus >= 1);
            assert_true(t->threads >= 1);
            assert_true(strlen(t->reason) > 0);
            /* No PU given twice while there are enough; no core twice while there are enough. */
            if (n <= npus)
                assert_false(hwloc_bitmap_intersects(cs, used));
            hwloc_bitmap_or(used, used, cs);
            if (n <= ncores) {
                hwloc_bitmap_t cores = hwloc_bitmap_alloc();

                for (int c = 0; c < t->ncpus; c++)
                    hwloc_bitmap_set(cores, hwloc_get_pu_obj_by_os_index(v.hw, (unsigned)t->cpus[c])->parent->logical_index);
                assert_false(hwloc_bitmap_intersects(cores, usedcores));
                hwloc_bitmap_or(usedcores, usedcores, cores);
                hwloc_bitmap_free(cores);
            }
            /* With at least one task per package, a task stays inside one package and NUMA node. */
            if (n >= npkg && n >= nnuma) {
                assert_int_equal(count_touched(v.hw, HWLOC_OBJ_PACKAGE, cs, &first), 1);
                per_pkg[first]++;
                assert_int_equal(count_touched(v.hw, HWLOC_OBJ_NUMANODE, cs, &first), 1);
                per_numa[first]++;
            }
            /* Its GPUs are local to its cores when it shares a NUMA node with them. */
            for (int g = 0; g < t->ngpus; g++) {
                hwloc_obj_t dev = gpu_obj(v.hw, t->gpus[g]);

                assert_non_null(dev);
                if (n >= nnuma)
                    assert_true(hwloc_bitmap_intersects(hwloc_get_non_io_ancestor_obj(v.hw, dev)->cpuset, cs));
                for (int s = 0; s < nseen; s++)
                    assert_string_not_equal(seen[s], t->gpus[g]); /* no GPU twice */
                ct_str_copy(seen[nseen++], sizeof(seen[0]), t->gpus[g]);
                given++;
            }
            /* An HCA whenever the node has one; a local one whenever one is near these cores
             * (and the task has no GPU whose PCIe switch or host bridge decides). */
            if (t->nic[0]) {
                int local_exists = 0, any_hca = 0;
                hwloc_obj_t nic = osdev(v.hw, t->nic);

                assert_non_null(nic);
                for (hwloc_obj_t o = hwloc_get_next_osdev(v.hw, NULL); o; o = hwloc_get_next_osdev(v.hw, o))
                    if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
                        any_hca = 1;
                        local_exists |= hwloc_bitmap_intersects(hwloc_get_non_io_ancestor_obj(v.hw, o)->cpuset, cs);
                    }
                if (any_hca)
                    assert_int_equal(nic->attr->osdev.type, HWLOC_OBJ_OSDEV_OPENFABRICS);
                if (local_exists && !t->ngpus)
                    assert_true(hwloc_bitmap_intersects(hwloc_get_non_io_ancestor_obj(v.hw, nic)->cpuset, cs));
            }
            hwloc_bitmap_free(cs);
        }
        /* Every GPU is used while there are at least as many GPUs as tasks. */
        if (ngpus >= n)
            assert_int_equal(given, ngpus);
        /* Tasks spread evenly over packages and NUMA nodes (CPU-weighted plans: fewer GPUs than
         * tasks; these machines have the same cores in each). */
        if (n >= nnuma && n >= npkg && ngpus < n) {
            int lo = n, hi = 0, plo = n, phi = 0;

            for (int i = 0; i < hwloc_get_nbobjs_by_type(v.hw, HWLOC_OBJ_NUMANODE); i++) {
                if (same_cpus_as_earlier(v.hw, HWLOC_OBJ_NUMANODE, i))
                    continue;
                lo = per_numa[i] < lo ? per_numa[i] : lo;
                hi = per_numa[i] > hi ? per_numa[i] : hi;
            }
            for (int i = 0; i < npkg; i++) {
                plo = per_pkg[i] < plo ? per_pkg[i] : plo;
                phi = per_pkg[i] > phi ? per_pkg[i] : phi;
            }
            if (!uneven_numa)
                assert_true(hi - lo <= 1);
            assert_true(phi - plo <= 1);
        }
        hwloc_bitmap_free(used);
        hwloc_bitmap_free(usedcores);
        free(j1);
        free(j2);
        ct_bind_plan_free(plan);
        ct_bind_plan_free(again);
    }
    view_free(&v);
}

static void check_rules(const char *name) { check_rules_with(name, 0); }

static void test_rules_dgx2(void **state) { check_rules("nvidia-dgx2.xml"); }
static void test_rules_lassen(void **state) { check_rules("llnl-lassen.xml"); }
static void test_rules_lassen_pci_only(void **state) { check_rules("llnl-lassen-pci-only.xml"); }
static void test_rules_tioga(void **state) { check_rules("llnl-tioga.xml"); }
/* KNL's clusters have 18, 18, 16 and 16 cores: tasks follow the cores, not the cluster count. */
static void test_rules_knl(void **state) { check_rules_with("knl-snc4-flat.xml", 1); }
static void test_rules_dual_gpu_ib(void **state) { check_rules("32em64t-2n8c2t-pci-wholeio.xml"); }
static void test_rules_dual_eth_ib(void **state) { check_rules("24em64t-2n6c2t-pci.xml"); }
static void test_rules_quad_numa(void **state) { check_rules("96em64t-4n4d3ca2co-pci.xml"); }

/* DGX-2: 8 GPUs per socket; 4 tasks get 4 GPUs each, in PCI order, beside their socket's cores. */
static void test_dgx2_four_tasks(void **state)
{
    struct view v;
    ct_bind_plan *plan;

    view_load("nvidia-dgx2.xml", &v);
    assert_int_equal(ct_topology_gpu_count(v.topo), 16);
    plan = plan_for(&v, 4, NULL, NULL);
    assert_int_equal(ct_bind_plan_task(plan, 1)->ngpus, 4);
    assert_string_equal(ct_bind_plan_task(plan, 1)->gpus[0], "nvml4");
    assert_string_equal(ct_bind_plan_task(plan, 3)->gpus[3], "nvml15");
    assert_int_equal(ct_bind_plan_task(plan, 2)->cpus[0], 24); /* first core of socket 1 */
    /* NVML knows the UUIDs: CUDA_VISIBLE_DEVICES names them, starting with nvml4's. */
    assert_memory_equal(ct_bind_plan_task(plan, 1)->cuda_visible_devices, "GPU-d256cac8-", 13);
    ct_bind_plan_free(plan);
    /* 16 tasks on 4 CPUs: one GPU each, CPUs shared, and the reason says so. */
    plan = plan_for(&v, 16, NULL, NULL);
    for (int r = 0; r < 16; r++) {
        assert_int_equal(ct_bind_plan_task(plan, r)->ngpus, 1);
        assert_non_null(strstr(ct_bind_plan_task(plan, r)->reason, "oversubscribed"));
    }
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* SLURM gave the step two GPUs of socket 0: both tasks go there, one GPU each. */
static void test_dgx2_allocated_gpus(void **state)
{
    struct view v;
    ct_bind_plan *plan;

    view_load("nvidia-dgx2.xml", &v);
    plan = plan_for(&v, 2, "3,nvml5", NULL);
    assert_int_equal(ct_bind_plan_task(plan, 0)->ngpus, 1);
    assert_string_equal(ct_bind_plan_task(plan, 0)->gpus[0], "nvml3");
    assert_string_equal(ct_bind_plan_task(plan, 1)->gpus[0], "nvml5");
    assert_true(ct_bind_plan_task(plan, 1)->cpus[0] < 24);
    ct_bind_plan_free(plan);
    /* No GPU allocated: nobody gets one. */
    plan = plan_for(&v, 2, "", NULL);
    assert_int_equal(ct_bind_plan_task(plan, 0)->ngpus, 0);
    assert_string_equal(ct_bind_plan_task(plan, 0)->cuda_visible_devices, "");
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* Dual socket with the GPU and the HCA on socket 1: the task there gets both, index 0 in PCI order. */
static void test_dual_gpu_and_hca_together(void **state)
{
    struct view v;
    ct_bind_plan *plan;
    const ct_bind_task *t;

    view_load("32em64t-2n8c2t-pci-wholeio.xml", &v);
    assert_int_equal(ct_topology_gpu_count(v.topo), 1);
    plan = plan_for(&v, 2, NULL, NULL);
    t = ct_bind_plan_task(plan, 1);
    assert_int_equal(t->ngpus, 1);
    assert_string_equal(t->gpus[0], "cuda0");
    assert_string_equal(t->cuda_visible_devices, "0");
    assert_string_equal(t->nic, "mlx5_0");
    assert_int_equal(t->nic_is_openfabrics, 1);
    assert_string_equal(t->netdev, "ib0");
    assert_non_null(strstr(t->reason, "NIC mlx5_0 (fabric) on the GPU's PCIe switch"));
    assert_int_equal(ct_bind_plan_task(plan, 0)->ngpus, 0);
    assert_non_null(strstr(ct_bind_plan_task(plan, 0)->reason, "no GPU"));
    ct_bind_plan_free(plan);
    /* Inside an allowed cpuset of socket 0 only: the GPU goes to the task anyway, flagged not local. */
    plan = plan_for(&v, 1, NULL, "0-3");
    t = ct_bind_plan_task(plan, 0);
    assert_int_equal(t->ncpus, 4);
    assert_int_equal(t->cpus[3], 3);
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* cpus_per_task sets the threads; more than the share is reported, not failed. */
static void test_cpus_per_task(void **state)
{
    struct view v;
    ct_bind_plan *plan;
    ct_bind_request req = { .ntasks = 4, .cpus_per_task = 2 };
    ct_error err;

    view_load("24em64t-2n6c2t-pci.xml", &v);
    assert_int_equal(ct_bind_plan_create(v.topo, &req, &plan, &err), 0);
    assert_int_equal(ct_bind_plan_task(plan, 0)->threads, 2);
    assert_string_equal(ct_bind_plan_task(plan, 0)->nic, "mlx4_0");
    ct_bind_plan_free(plan);
    req.cpus_per_task = 100;
    assert_int_equal(ct_bind_plan_create(v.topo, &req, &plan, &err), 0);
    assert_int_equal(ct_bind_plan_task(plan, 0)->threads, 6);
    assert_non_null(strstr(ct_bind_plan_task(plan, 0)->reason, "asked 100 CPUs"));
    ct_bind_plan_free(plan);
    view_free(&v);
}

static void test_bad_requests(void **state)
{
    struct view v;
    ct_bind_plan *plan = NULL;
    ct_bind_request req = { .ntasks = 2, .gpus = "nvml16" };
    ct_error err;

    view_load("nvidia-dgx2.xml", &v);
    assert_int_equal(ct_bind_plan_create(v.topo, &req, &plan, &err), CT_EINVAL);
    assert_null(plan);
    assert_non_null(strstr(err.msg, "nvml16"));
    assert_non_null(strstr(err.hint, "16 GPUs"));
    req.gpus = "1,,2";
    assert_int_equal(ct_bind_plan_create(v.topo, &req, &plan, &err), 0); /* empty items are skipped by strtok */
    ct_bind_plan_free(plan);
    req.gpus = NULL;
    req.allowed_cpus = "abc";
    assert_int_equal(ct_bind_plan_create(v.topo, &req, &plan, &err), CT_EINVAL);
    assert_non_null(strstr(err.msg, "abc"));
    req.allowed_cpus = "100-200";
    assert_int_equal(ct_bind_plan_create(v.topo, &req, &plan, &err), CT_EINVAL);
    req.allowed_cpus = NULL;
    req.ntasks = 0;
    assert_int_equal(ct_bind_plan_create(v.topo, &req, &plan, &err), CT_EINVAL);
    view_free(&v);
    assert_int_equal(ct_topology_load("/nonexistent.xml", CT_TOPOLOGY_IO, &v.topo, &err), CT_ENOENT);
    assert_null(v.topo);
}

/* A task's CPUs as a list ("8-47"), to compare with mpibind's published answers. */
static void cpus_text(const ct_bind_task *t, char *buf, size_t size)
{
    hwloc_bitmap_t cs = task_cpuset(t);

    hwloc_bitmap_list_snprintf(buf, size, cs);
    hwloc_bitmap_free(cs);
}

/* LLNL mpibind's expected mappings on Lassen (test-suite/expected/expected.coral-lassen): same
 * cores and GPUs; mpibind's thread counts are its own (one PU per core unless asked). */
static void test_lassen_mpibind_expected(void **state)
{
    struct view v;
    ct_bind_plan *plan;
    char buf[256];

    view_load("llnl-lassen.xml", &v);
    assert_int_equal(ct_topology_gpu_count(v.topo), 4);
    /* #7 two tasks at max SMT: 8-87 with GPUs 0-1, 96-175 with GPUs 2-3. */
    plan = plan_for(&v, 2, NULL, NULL);
    cpus_text(ct_bind_plan_task(plan, 0), buf, sizeof(buf));
    assert_string_equal(buf, "8-87");
    cpus_text(ct_bind_plan_task(plan, 1), buf, sizeof(buf));
    assert_string_equal(buf, "96-175");
    assert_string_equal(ct_bind_plan_task(plan, 0)->gpus[1], "nvml1");
    assert_string_equal(ct_bind_plan_task(plan, 1)->gpus[0], "nvml2");
    ct_bind_plan_free(plan);
    /* #1 one task per core: task r on the r-th core (8, 12, ... 84, 96, ... 172). */
    plan = plan_for(&v, 40, NULL, NULL);
    for (int r = 0; r < 40; r++)
        assert_int_equal(ct_bind_plan_task(plan, r)->cpus[0], r < 20 ? 8 + 4 * r : 96 + 4 * (r - 20));
    ct_bind_plan_free(plan);
    /* #9 two tasks restricted to NUMA 0: cores 8-44 with GPU 0, 48-84 with GPU 1 (the local GPUs
     * first; GPUs 2 and 3 of the other socket are left out and the reason says so). */
    plan = plan_for(&v, 2, NULL, "8-87");
    cpus_text(ct_bind_plan_task(plan, 0), buf, sizeof(buf));
    assert_string_equal(buf, "8-47");
    cpus_text(ct_bind_plan_task(plan, 1), buf, sizeof(buf));
    assert_string_equal(buf, "48-87");
    assert_int_equal(ct_bind_plan_task(plan, 0)->ngpus, 1);
    assert_string_equal(ct_bind_plan_task(plan, 0)->gpus[0], "nvml0");
    assert_string_equal(ct_bind_plan_task(plan, 1)->gpus[0], "nvml1");
    assert_non_null(strstr(ct_bind_plan_task(plan, 1)->reason, "2 allocated GPUs near no allowed CPU left out"));
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* Lassen through Debian's hwloc (no NVML/CUDA OS devices): the four V100s are found by PCI class,
 * in PCI bus order; the ASPEED BMC VGA is no GPU; HCAs before the Broadcom Ethernet; one HCA
 * list for the node; local numbering among the allocated GPUs. */
static void test_lassen_pci_only(void **state)
{
    struct view v;
    ct_bind_plan *plan;
    const ct_bind_task *t;

    view_load("llnl-lassen-pci-only.xml", &v);
    assert_int_equal(ct_topology_gpu_count(v.topo), 4);
    plan = plan_for(&v, 4, NULL, NULL);
    for (int r = 0; r < 4; r++) {
        char want[8];

        t = ct_bind_plan_task(plan, r);
        snprintf(want, sizeof(want), "%d", r);
        assert_string_equal(t->cuda_visible_devices, want);
        assert_int_equal(t->nic_is_openfabrics, 1);
        snprintf(want, sizeof(want), "mlx5_%d", r);
        assert_string_equal(t->nic, want);
    }
    assert_string_equal(ct_bind_plan_task(plan, 0)->gpus[0], "0004:04:00.0");
    assert_string_equal(ct_bind_plan_task(plan, 3)->ucx_net_devices, "mlx5_3:1");
    assert_string_equal(ct_bind_plan_ib_hca(plan), "=mlx5_0,mlx5_1,mlx5_2,mlx5_3");
    ct_bind_plan_free(plan);
    /* The step has GPUs 2 and 3: node-wide 2,3; numbered 0,1 inside a device cgroup. */
    plan = plan_for(&v, 2, "2,3", NULL);
    assert_string_equal(ct_bind_plan_task(plan, 0)->cuda_visible_devices, "2");
    assert_string_equal(ct_bind_plan_task(plan, 0)->cuda_local_devices, "0");
    assert_string_equal(ct_bind_plan_task(plan, 1)->cuda_local_devices, "1");
    assert_true(ct_bind_plan_task(plan, 0)->cpus[0] >= 96);
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* HPE EX235a (Tioga): 8 MI250X GCDs (RSMI) and 4 Slingshot NICs attached to the machine, 4 NUMA
 * nodes. Two GCDs per NUMA node; each GCD's NIC is the Slingshot on its host bridge, else the
 * nearest by bus with fewest GCDs; never the Ethernet; no NCCL_IB_HCA (no HCA). */
static void test_tioga_gcds_and_slingshot(void **state)
{
    static const char *const nic[8] = { "hsi0", "hsi0", "hsi1", "hsi1", "hsi2", "hsi2", "hsi3", "hsi3" };
    struct view v;
    ct_bind_plan *plan;

    view_load("llnl-tioga.xml", &v);
    assert_int_equal(ct_topology_gpu_count(v.topo), 8);
    plan = plan_for(&v, 8, NULL, NULL);
    for (int r = 0; r < 8; r++) {
        const ct_bind_task *t = ct_bind_plan_task(plan, r);
        char want[8];

        snprintf(want, sizeof(want), "rsmi%d", r);
        assert_string_equal(t->gpus[0], want);
        assert_int_equal(t->cpus[0], 8 * r);
        assert_int_equal(t->ncpus, 8);
        assert_string_equal(t->nic, nic[r]);
        assert_string_equal(t->ucx_net_devices, nic[r]);
        if (r % 2)
            assert_non_null(strstr(t->reason, "on the GPU's host bridge"));
    }
    assert_string_equal(ct_bind_plan_ib_hca(plan), "");
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* KNL SNC-4 flat: 8 NUMA nodes over 4 sets of CPUs. 4 tasks get one cluster each (not two tasks
 * on the same cores through DDR and MCDRAM nodes). */
static void test_knl_mcdram_shares_cpus(void **state)
{
    struct view v;
    ct_bind_plan *plan;
    char buf[256];

    view_load("knl-snc4-flat.xml", &v);
    plan = plan_for(&v, 4, NULL, NULL);
    cpus_text(ct_bind_plan_task(plan, 0), buf, sizeof(buf));
    assert_string_equal(buf, "0-17,68-85,136-153,204-221");
    cpus_text(ct_bind_plan_task(plan, 3), buf, sizeof(buf));
    assert_string_equal(buf, "52-67,120-135,188-203,256-271");
    assert_non_null(strstr(ct_bind_plan_task(plan, 0)->reason, "NUMA 0+4"));
    /* Its BMC's Matrox VGA has DRM devices (card0) and is no GPU; InfiniBand before Ethernet. */
    assert_int_equal(ct_topology_gpu_count(v.topo), 0);
    for (int r = 0; r < 4; r++)
        assert_string_equal(ct_bind_plan_task(plan, r)->nic, "mlx5_0");
    assert_string_equal(ct_bind_plan_ib_hca(plan), "=mlx5_0");
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* Display adapters that are not GPUs: a Matrox BMC VGA beside NVIDIA GPUs and a Radeon (CUDA
 * numbers NVIDIA's only); an ATI ES1000 server VGA with a DRM card alone is no GPU. */
static void test_display_adapters_not_gpus(void **state)
{
    struct view v;

    view_load("32em64t-2n8c2t-pci-wholeio.xml", &v);
    assert_int_equal(ct_topology_gpu_count(v.topo), 1);
    view_free(&v);
    view_load("96em64t-4n4d3ca2co-pci.xml", &v);
    assert_int_equal(ct_topology_gpu_count(v.topo), 0);
    view_free(&v);
}

/* Only the CPUs of a plan that are the first PU of their core on Corona (PUs 0-47; their siblings
 * are 48-95): mpibind's answers list one PU per core. */
static void first_pus_text(const ct_bind_task *t, char *buf, size_t size)
{
    hwloc_bitmap_t cs = task_cpuset(t);

    hwloc_bitmap_clr_range(cs, 48, -1);
    hwloc_bitmap_list_snprintf(buf, size, cs);
    hwloc_bitmap_free(cs);
}

/* LLNL mpibind's expected mappings on Corona (test-suite/expected/expected.epyc-corona): 2 EPYC
 * sockets x 4 NUMA nodes, 4 MI50 in NUMA 1, 2, 5, 7. Through hwloc's OpenCL devices and, as
 * Debian's hwloc in slurmstepd sees it (no OpenCL), by PCI class. */
static void check_corona(const char *file, const char *gpu0, const char *gpu3)
{
    static const char *const eight[8] = { "0-5", "6-11", "12-17", "18-23", "24-29", "30-35", "36-41", "42-47" };
    static const int eight_gpu[8] = { -1, 0, 1, -1, -1, 2, -1, 3 };
    struct view v;
    ct_bind_plan *plan;
    char buf[256];

    view_load(file, &v);
    assert_int_equal(ct_topology_gpu_count(v.topo), 4); /* the ASPEED VGA is not one */
    /* #2 one task: every CPU and GPU. */
    plan = plan_for(&v, 1, NULL, NULL);
    cpus_text(ct_bind_plan_task(plan, 0), buf, sizeof(buf));
    assert_string_equal(buf, "0-95");
    assert_int_equal(ct_bind_plan_task(plan, 0)->ngpus, 4);
    assert_string_equal(ct_bind_plan_task(plan, 0)->gpus[0], gpu0);
    assert_string_equal(ct_bind_plan_task(plan, 0)->gpus[3], gpu3);
    assert_string_equal(ct_bind_plan_task(plan, 0)->cuda_visible_devices, "0,1,2,3");
    ct_bind_plan_free(plan);
    /* #3 two tasks: a socket each, GPUs 0,1 and 2,3. */
    plan = plan_for(&v, 2, NULL, NULL);
    cpus_text(ct_bind_plan_task(plan, 0), buf, sizeof(buf));
    assert_string_equal(buf, "0-23,48-71");
    cpus_text(ct_bind_plan_task(plan, 1), buf, sizeof(buf));
    assert_string_equal(buf, "24-47,72-95");
    assert_string_equal(ct_bind_plan_task(plan, 0)->cuda_visible_devices, "0,1");
    assert_string_equal(ct_bind_plan_task(plan, 1)->cuda_visible_devices, "2,3");
    ct_bind_plan_free(plan);
    /* #10 eight tasks: a NUMA node each; the four GPUs go to the tasks of their NUMA nodes. */
    plan = plan_for(&v, 8, NULL, NULL);
    for (int r = 0; r < 8; r++) {
        const ct_bind_task *t = ct_bind_plan_task(plan, r);

        first_pus_text(t, buf, sizeof(buf));
        assert_string_equal(buf, eight[r]);
        assert_int_equal(t->ngpus, eight_gpu[r] >= 0);
        if (eight_gpu[r] >= 0) {
            char want[8];

            snprintf(want, sizeof(want), "%d", eight_gpu[r]);
            assert_string_equal(t->cuda_visible_devices, want);
        }
        assert_string_equal(t->nic, "mlx5_0"); /* InfiniBand, never the I350 Ethernet */
    }
    ct_bind_plan_free(plan);
    /* #5 two tasks on one core's two threads, #12 eight tasks on one PU (CPUs only: mpibind gives
     * no GPU there, ctrain hands the step's GPUs out when none is local; see README). */
    plan = plan_for(&v, 2, NULL, "0,48");
    assert_int_equal(ct_bind_plan_task(plan, 0)->cpus[0], 0);
    assert_int_equal(ct_bind_plan_task(plan, 1)->cpus[0], 48);
    assert_int_equal(ct_bind_plan_task(plan, 1)->ncpus, 1);
    ct_bind_plan_free(plan);
    plan = plan_for(&v, 8, NULL, "0");
    for (int r = 0; r < 8; r++)
        assert_int_equal(ct_bind_plan_task(plan, r)->cpus[0], 0);
    ct_bind_plan_free(plan);
    /* #9 two tasks inside NUMA 0: cores 0-2 and 3-5. */
    plan = plan_for(&v, 2, NULL, "0-5,48-53");
    first_pus_text(ct_bind_plan_task(plan, 0), buf, sizeof(buf));
    assert_string_equal(buf, "0-2");
    first_pus_text(ct_bind_plan_task(plan, 1), buf, sizeof(buf));
    assert_string_equal(buf, "3-5");
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* Four sockets on one NUMA node (hwloc's 16em64t-4s2c2t, PUs interleaved over the sockets): the
 * packages are the domains; 4 tasks get a socket each, 6 tasks are 2, 2, 1, 1 per socket. */
static void test_four_sockets(void **state)
{
    struct view v;
    ct_bind_plan *plan;
    char buf[64], want[64];

    view_load("16em64t-4s2c2t.xml", &v);
    plan = plan_for(&v, 4, NULL, NULL);
    for (int r = 0; r < 4; r++) {
        cpus_text(ct_bind_plan_task(plan, r), buf, sizeof(buf));
        snprintf(want, sizeof(want), "%d,%d,%d,%d", r, r + 4, r + 8, r + 12);
        assert_string_equal(buf, want);
    }
    ct_bind_plan_free(plan);
    plan = plan_for(&v, 6, NULL, NULL);
    for (int r = 0; r < 6; r++) {
        static const int pkg[6] = { 0, 0, 1, 1, 2, 3 };
        hwloc_bitmap_t cs = task_cpuset(ct_bind_plan_task(plan, r));
        int first = -1;

        assert_int_equal(count_touched(v.hw, HWLOC_OBJ_PACKAGE, cs, &first), 1);
        assert_int_equal(first, pkg[r]);
        hwloc_bitmap_free(cs);
    }
    ct_bind_plan_free(plan);
    view_free(&v);
}

static void test_rules_four_sockets(void **state) { check_rules("16em64t-4s2c2t.xml"); }

static void test_corona_mpibind_expected(void **state) { check_corona("llnl-corona.xml", "opencl0d0", "opencl0d3"); }
static void test_corona_pci_only(void **state) { check_corona("llnl-corona-pci-only.xml", "0000:13:00.0", "0000:73:00.0"); }
static void test_rules_corona(void **state) { check_rules("llnl-corona-pci-only.xml"); }

/* The topology file is checked with the effective uid (the user's, in slurmstepd's user_init),
 * not the real one (root): as euid nobody, a root-only file is refused with the system's reason. */
static void test_topology_file_effective_uid(void **state)
{
    char tdir[] = "/tmp/ctrain-test-bind-XXXXXX", path[128];
    ct_topology *t = NULL;
    ct_error err;
    FILE *f;
    int rc;

    (void)state;
    if (getuid() != 0) {
        skip();
        return;
    }
    assert_non_null(mkdtemp(tdir));
    snprintf(path, sizeof(path), "%s/topo.xml", tdir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("<topology/>\n", f);
    fclose(f);
    chmod(path, 0600);
    assert_int_equal(seteuid(65534), 0);
    ct_error_clear(&err);
    rc = ct_topology_load(path, 0, &t, &err);
    assert_int_equal(seteuid(0), 0);
    unlink(path);
    rmdir(tdir);
    assert_int_equal(rc, CT_ENOENT);
    assert_string_equal(err.id, "topology-missing");
    assert_non_null(strstr(err.msg, "Permission denied"));
}

/* Calls of setenv/unsetenv while counting: this program's definitions come before libc's, so
 * the library's calls land here too. */
static int env_writes, env_counting;

int setenv(const char *name, const char *value, int overwrite)
{
    int (*real)(const char *, const char *, int) = (int (*)(const char *, const char *, int))dlsym(RTLD_NEXT, "setenv");

    env_writes += env_counting;
    return real(name, value, overwrite);
}

int unsetenv(const char *name)
{
    int (*real)(const char *) = (int (*)(const char *))dlsym(RTLD_NEXT, "unsetenv");

    env_writes += env_counting;
    return real(name);
}

/* Loading never writes the process's environment, not even for a moment: slurmstepd is
 * multithreaded when the plugin loads a topology, and setenv/unsetenv race with getenv in its
 * other threads (it set and removed HWLOC_PLUGINS_BLACKLIST around hwloc's initialisation). */
static void test_topology_environment_untouched(void **state)
{
    ct_topology *t = NULL;
    ct_error err;

    (void)state;
    unsetenv("HWLOC_PLUGINS_BLACKLIST");
    env_writes = 0;
    env_counting = 1;
    assert_int_equal(ct_topology_load(NULL, 0, &t, &err), 0);
    ct_topology_free(t);
    t = NULL;
    assert_int_equal(ct_topology_load(NULL, CT_TOPOLOGY_IO, &t, &err), 0);
    env_counting = 0;
    assert_null(getenv("HWLOC_PLUGINS_BLACKLIST"));
    assert_int_equal(env_writes, 0);
    ct_topology_free(t);
}

/* ct_topology_prepare in this thread, ct_topology_discover in another (the SPANK plugin's discovery
 * thread in slurmstepd): the same machine as ct_topology_load, the same plan; ct_topology_allows
 * tells which CPU lists its allowed PUs cover. */
static void *discover_in_thread(void *arg)
{
    ct_topology *t = arg;
    ct_error err;

    return (void *)(long)ct_topology_discover(t, &err);
}

static void plan_cpus(const ct_topology *t, char *out, size_t size)
{
    ct_bind_request req = { .ntasks = 2 };
    ct_bind_plan *plan = NULL;
    ct_error err;
    size_t len = 0;

    assert_int_equal(ct_bind_plan_create(t, &req, &plan, &err), 0);
    out[0] = '\0';
    for (int i = 0; i < 2; i++) {
        const ct_bind_task *task = ct_bind_plan_task(plan, i);

        for (int c = 0; c < task->ncpus && len + 16 < size; c++)
            len += (size_t)snprintf(out + len, size - len, "%d%s", task->cpus[c], c + 1 < task->ncpus ? "," : ";");
    }
    ct_bind_plan_free(plan);
}

static void test_topology_discovered_in_a_thread(void **state)
{
    ct_topology *whole = NULL, *halves = NULL;
    char want[4096], got[4096], mine[64];
    cpu_set_t set;
    pthread_t th;
    void *rc = NULL;
    ct_error err;
    int first = -1;

    (void)state;
    assert_int_equal(ct_topology_load(NULL, 0, &whole, &err), 0);
    assert_int_equal(ct_topology_prepare(0, &halves, &err), 0);
    assert_int_equal(pthread_create(&th, NULL, discover_in_thread, halves), 0);
    assert_int_equal(pthread_join(th, &rc), 0);
    assert_int_equal((long)rc, 0);
    plan_cpus(whole, want, sizeof(want));
    plan_cpus(halves, got, sizeof(got));
    assert_string_equal(got, want);
    CPU_ZERO(&set);
    assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &set))
            first = c;
    snprintf(mine, sizeof(mine), "%d", first);
    assert_int_equal(ct_topology_allows(halves, mine), 1);
    assert_int_equal(ct_topology_allows(halves, "100000"), 0);     /* no such CPU here */
    assert_int_equal(ct_topology_allows(halves, "not a list"), 0);
    ct_topology_free(halves);
    ct_topology_free(whole);
}

/* Network variables (include/ctrain/net.h): the plan's NIC on a topology file, the node's own
 * interfaces as getifaddrs would list them. */
static const ct_net_iface node_ifs[] = {
    { "lo", 1, 1, "127.0.0.1" }, { "eth0", 1, 0, "10.9.0.2" }, { "eth0", 1, 0, "fe80::2" },
    { "ib0", 1, 0, "10.1.0.2" }, { "eth4", 0, 0, "10.4.0.2" }, { "eth2", 1, 0, "10.2.0.2" },
};

static int choose(const ct_bind_plan *plan, int rank, const ct_net_iface *ifs, int nifs, const char *addr,
                  int allow_loopback, ct_net_vars *v)
{
    const char *addrs[1] = { addr };
    ct_net_request req = { .task = plan ? ct_bind_plan_task(plan, rank) : NULL,
                           .ib_hca = plan ? ct_bind_plan_ib_hca(plan) : NULL, .ifaces = ifs, .nifaces = nifs,
                           .node_addrs = addrs, .naddrs = addr ? 1 : 0, .allow_loopback = allow_loopback };

    return ct_net_choose(&req, v);
}

/* A fabric HCA with its IPoIB interface up: sockets on ib0, UCX and NCCL on the HCA; a GPU step and
 * a CPU-only step alike. Without ib0 here the sockets go to the node's Ethernet, and say why. */
static void test_net_fabric(void **state)
{
    struct view v;
    ct_bind_plan *plan;
    ct_net_vars nv;
    int n = (int)(sizeof(node_ifs) / sizeof(node_ifs[0]));

    view_load("32em64t-2n8c2t-pci-wholeio.xml", &v);
    for (int cpu_only = 0; cpu_only < 2; cpu_only++) {
        plan = plan_for(&v, 2, cpu_only ? "" : NULL, NULL);
        assert_int_equal(choose(plan, 1, node_ifs, n, "10.9.0.2", 0, &nv), 1);
        assert_string_equal(nv.socket_ifname, "=ib0");
        assert_string_equal(nv.ifname, "ib0");
        assert_string_equal(nv.ucx_net_devices, "mlx5_0:1");
        assert_string_equal(nv.ib_hca, "=mlx5_0");
        ct_bind_plan_free(plan);
    }
    plan = plan_for(&v, 2, NULL, NULL);
    assert_int_equal(choose(plan, 0, node_ifs, 3, "10.9.0.2", 0, &nv), 1); /* no ib0 listed */
    assert_string_equal(nv.socket_ifname, "=eth0");
    assert_string_equal(nv.ucx_net_devices, "mlx5_0:1");
    assert_non_null(strstr(nv.reason, "ib0 is not up with an address here"));
    assert_non_null(strstr(nv.reason, "eth0 carries the node's address 10.9.0.2"));
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* Ethernet NICs from hwloc: the task's own when up; a down one falls back to the node's address. */
static void test_net_topology_ethernet(void **state)
{
    struct view v;
    ct_bind_plan *plan;
    ct_net_vars nv;
    int n = (int)(sizeof(node_ifs) / sizeof(node_ifs[0]));

    view_load("96em64t-4n4d3ca2co-pci.xml", &v);
    plan = plan_for(&v, 2, "", NULL);
    assert_string_equal(ct_bind_plan_task(plan, 0)->netdev, "eth0");
    assert_int_equal(choose(plan, 0, node_ifs, n, "10.9.0.2", 0, &nv), 1);
    assert_string_equal(nv.socket_ifname, "=eth0");
    assert_string_equal(nv.ucx_net_devices, "eth0");
    assert_string_equal(nv.ib_hca, "");
    /* eth4 is down on this node: the interface carrying the node's address instead. */
    assert_string_equal(ct_bind_plan_task(plan, 1)->netdev, "eth4");
    assert_int_equal(choose(plan, 1, node_ifs, n, "10.9.0.2", 0, &nv), 1);
    assert_string_equal(nv.ifname, "eth0");
    assert_non_null(strstr(nv.reason, "eth4 is not up"));
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* No network device in the topology (veth and bridges are no PCI devices): the interface carrying
 * the node's address; loopback only for a one-host cluster; otherwise nothing, with the reason. */
static void test_net_no_nic_in_topology(void **state)
{
    struct view v;
    ct_bind_plan *plan;
    ct_net_vars nv;
    int n = (int)(sizeof(node_ifs) / sizeof(node_ifs[0]));
    const ct_net_iface down[] = { { "eth0", 0, 0, "10.9.0.2" } };

    view_load("16em64t-4s2c2t.xml", &v);
    plan = plan_for(&v, 4, "", NULL);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(choose(plan, r, node_ifs, n, "10.9.0.2", 0, &nv), 1);
        assert_string_equal(nv.socket_ifname, "=eth0");
        assert_string_equal(nv.ifname, "eth0");
        assert_string_equal(nv.ucx_net_devices, "eth0");
        assert_non_null(strstr(nv.reason, "no network device in the topology"));
    }
    assert_int_equal(choose(plan, 0, node_ifs, n, "fe80::2", 0, &nv), 1); /* an IPv6 NodeAddr */
    assert_string_equal(nv.ifname, "eth0");
    assert_int_equal(choose(plan, 0, node_ifs, n, "127.0.0.1", 1, &nv), 1);
    assert_string_equal(nv.socket_ifname, "=lo");
    /* Debian's 127.0.1.1-style hostname entry on a multi-host cluster: no answer rather than lo. */
    assert_int_equal(choose(plan, 0, node_ifs, n, "127.0.0.1", 0, &nv), 0);
    assert_string_equal(nv.socket_ifname, "");
    assert_string_equal(nv.ucx_net_devices, "");
    assert_non_null(strstr(nv.reason, "loopback"));
    assert_int_equal(choose(plan, 0, node_ifs, n, "10.77.0.1", 0, &nv), 0);
    assert_non_null(strstr(nv.reason, "no interface that is up carries the node's address 10.77.0.1"));
    assert_int_equal(choose(plan, 0, down, 1, "10.9.0.2", 0, &nv), 0);
    assert_int_equal(choose(plan, 0, node_ifs, n, NULL, 0, &nv), 0);
    assert_non_null(strstr(nv.reason, "address is unknown"));
    assert_int_equal(choose(NULL, 0, node_ifs, n, "10.9.0.2", 0, &nv), 1); /* no plan at all */
    assert_string_equal(nv.ifname, "eth0");
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* The shared topologies (/work/shared/topologies when present, same files as the fixtures): every
 * task of every file gets an interface when the node's address is on one, never a down one. */
static void test_net_every_fixture(void **state)
{
    static const char *files[] = { "nvidia-dgx2.xml", "24em64t-2n6c2t-pci.xml", "32em64t-2n8c2t-pci-wholeio.xml",
                                   "96em64t-4n4d3ca2co-pci.xml", "llnl-lassen.xml", "llnl-tioga.xml",
                                   "llnl-corona.xml", "knl-snc4-flat.xml" };
    int n = (int)(sizeof(node_ifs) / sizeof(node_ifs[0]));

    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        struct view v;
        ct_bind_plan *plan;
        ct_net_vars nv;

        view_load(files[f], &v);
        plan = plan_for(&v, 4, "", NULL);
        for (int r = 0; r < 4; r++) {
            assert_int_equal(choose(plan, r, node_ifs, n, "10.9.0.2", 0, &nv), 1);
            assert_true(nv.ucx_net_devices[0] != '\0');
            if (nv.ifname[0])
                assert_string_not_equal(nv.ifname, "eth4");
        }
        ct_bind_plan_free(plan);
        view_free(&v);
    }
}

/* SLURM's per-task GPUs beside the plan: a task's GPUs are within a list, or not; the list's forms
 * are ct_bind_request.gpus's, and a GPU the node lacks is an error. */
static void test_task_gpus_in(void **state)
{
    struct view v;
    ct_bind_plan *plan;
    ct_error err;

    view_load("nvidia-dgx2.xml", &v);
    plan = plan_for(&v, 2, "3,5", NULL); /* an allocated subset: task 0 nvml3, task 1 nvml5 */
    assert_int_equal(ct_bind_task_gpus_in(v.topo, ct_bind_plan_task(plan, 0), "3,5", &err), 1);
    assert_int_equal(ct_bind_task_gpus_in(v.topo, ct_bind_plan_task(plan, 0), "3", &err), 1);
    assert_int_equal(ct_bind_task_gpus_in(v.topo, ct_bind_plan_task(plan, 0), "nvml3", &err), 1);
    assert_int_equal(ct_bind_task_gpus_in(v.topo, ct_bind_plan_task(plan, 1), "3", &err), 0);
    assert_int_equal(ct_bind_task_gpus_in(v.topo, ct_bind_plan_task(plan, 1), "", &err), 0);
    assert_int_not_equal(ct_bind_task_gpus_in(v.topo, ct_bind_plan_task(plan, 1), "3,99", &err), 1);
    assert_string_equal(err.id, "bind-gpu-unknown");
    ct_bind_plan_free(plan);
    view_free(&v);
}

/* The node summary against hwloc's own view of every fixture: the allowed PUs, NUMA nodes,
 * packages and cores (or PUs) as the same CPU sets in the same order, every GPU and NIC with its
 * name, PCI position and the CPUs near it; and what is written is what is read back. */
static int same_set(const uint64_t *w, unsigned nw, hwloc_const_bitmap_t cs)
{
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    int same;

    for (unsigned i = 0; i < nw * 64; i++)
        if (w[i / 64] & (1ull << (i % 64)))
            hwloc_bitmap_set(b, i);
    same = hwloc_bitmap_isequal(b, cs);
    hwloc_bitmap_free(b);
    return same;
}

static void check_level(struct view *v, const ct_node_summary *s, hwloc_obj_type_t type, int n, int *at)
{
    assert_int_equal(n, hwloc_get_nbobjs_by_type(v->hw, type) < 0 ? 0 : hwloc_get_nbobjs_by_type(v->hw, type));
    for (int i = 0; i < n; i++, (*at)++)
        assert_true(same_set(s->sets + (size_t)*at * s->head->nwords, s->head->nwords,
                             hwloc_get_obj_by_type(v->hw, type, (unsigned)i)->cpuset));
}

static void check_devs(struct view *v, const ct_node_summary *s)
{
    const struct ct_node_summary_head *h = s->head;

    assert_int_equal(h->ngpus, ct_topology_gpu_count(v->topo));
    for (int i = 0; i < h->ngpus; i++) {
        hwloc_obj_t o = osdev(v->hw, s->gpus[i].name);
        const char *pci = ct_topology_gpu_pci(v->topo, i);

        if (o)
            assert_true(same_set(s->sets + (size_t)s->gpus[i].locality * h->nwords, h->nwords,
                                 hwloc_get_non_io_ancestor_obj(v->hw, o)->cpuset));
        if (pci) {
            char mine[16];

            snprintf(mine, sizeof(mine), "%04x:%02x:%02x.%x", s->gpus[i].pci[0], s->gpus[i].pci[1],
                     s->gpus[i].pci[2], s->gpus[i].pci[3]);
            assert_string_equal(mine, pci);
        }
    }
    for (int i = 0; i < h->nnics; i++) {
        hwloc_obj_t o = osdev(v->hw, s->nics[i].name);

        assert_non_null(o);
        assert_true(same_set(s->sets + (size_t)s->nics[i].locality * h->nwords, h->nwords,
                             hwloc_get_non_io_ancestor_obj(v->hw, o)->cpuset));
        assert_int_equal(s->nics[i].locality_depth, hwloc_get_non_io_ancestor_obj(v->hw, o)->depth);
    }
}

static void check_summary(const char *name, const char *path)
{
    struct view v;
    ct_node_summary back;
    const ct_node_summary *s;
    ct_error err;
    char xml[1200];
    int at = 0, ncores;

    view_load(name, &v);
    s = &v.topo->model;
    assert_true(same_set(s->sets, s->head->nwords, hwloc_topology_get_allowed_cpuset(v.hw)));
    at = 1;
    check_level(&v, s, HWLOC_OBJ_NUMANODE, s->head->nnuma, &at);
    check_level(&v, s, HWLOC_OBJ_PACKAGE, s->head->npackages, &at);
    for (int i = 0; i < s->head->nnuma; i++)
        assert_int_equal(s->os_index[i], hwloc_get_obj_by_type(v.hw, HWLOC_OBJ_NUMANODE, (unsigned)i)->os_index);
    for (int i = 0; i < s->head->npackages; i++)
        assert_int_equal(s->os_index[s->head->nnuma + i],
                         hwloc_get_obj_by_type(v.hw, HWLOC_OBJ_PACKAGE, (unsigned)i)->os_index);
    ncores = hwloc_get_nbobjs_by_type(v.hw, HWLOC_OBJ_CORE);
    assert_int_equal(s->head->units_are_cores, ncores > 0);
    check_level(&v, s, ncores > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU, s->head->nunits, &at);
    check_devs(&v, s);
    assert_int_equal(ct_topology_summary_write(v.topo, "test", path, &err), 0);
    /* Made from the file: it serves a reader of that file, not one that would discover. */
    assert_int_equal(ct_node_summary_read(path, CT_TOPOLOGY_IO, "test", NULL, &back, &err), CT_EFORMAT);
    assert_non_null(strstr(err.msg, "topology file"));
    fixture(name, xml, sizeof(xml));
    assert_int_equal(ct_node_summary_read(path, CT_TOPOLOGY_IO, "test", xml, &back, &err), 0);
    assert_int_equal(back.head->size, s->head->size);
    assert_memory_equal(back.head, s->head, s->head->size);
    ct_node_summary_free(&back);
    view_free(&v);
}

static void test_node_summary_every_fixture(void **state)
{
    static const char *files[] = { "16em64t-4s2c2t.xml", "24em64t-2n6c2t-pci.xml", "32em64t-2n8c2t-pci-wholeio.xml",
                                   "96em64t-4n4d3ca2co-pci.xml", "knl-snc4-flat.xml", "llnl-corona-pci-only.xml",
                                   "llnl-corona.xml", "llnl-lassen-pci-only.xml", "llnl-lassen.xml",
                                   "llnl-tioga.xml", "nvidia-dgx2.xml" };
    char tdir[] = "/tmp/ctrain-test-summary-XXXXXX", path[128];

    assert_non_null(mkdtemp(tdir));
    snprintf(path, sizeof(path), "%s/node", tdir);
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++)
        check_summary(files[f], path);
    unlink(path);
    rmdir(tdir);
}

/* The plan of every request on a topology and on the same topology written to a summary and read
 * back: the same JSON, byte for byte. Requests: 1 to more tasks than PUs, all GPUs, none, every
 * other one, one; all CPUs, the first half, every third; an even share and 3 CPUs per task. */
static void plans_equal(const ct_topology *a, const ct_topology *b, const char *what)
{
    static const char *gpu_lists[] = { NULL, "", "0", "0,2,4,6,8,10,12,14", "1,3" };
    int npus = ct_cpuset_weight(ct_topology_set(a, 0), a->model.head->nwords), last = -1, checked = 0;
    char half[4096] = "", third[4096] = "";
    size_t hl = 0, tl = 0;

    for (int i = 0, id = -1; (id = ct_cpuset_next(ct_topology_set(a, 0), a->model.head->nwords, id)) >= 0; i++) {
        if (i < npus / 2 && hl + 12 < sizeof(half))
            hl += (size_t)snprintf(half + hl, sizeof(half) - hl, "%s%d", hl ? "," : "", id);
        if (i % 3 == 0 && tl + 12 < sizeof(third))
            tl += (size_t)snprintf(third + tl, sizeof(third) - tl, "%s%d", tl ? "," : "", id);
        last = id;
    }
    assert_true(last >= 0);
    for (int ntasks = 1; ntasks <= npus + 3; ntasks = ntasks < 16 ? ntasks + 1 : ntasks * 2)
        for (size_t g = 0; g < sizeof(gpu_lists) / sizeof(gpu_lists[0]); g++)
            for (int c = 0; c < 3; c++)
                for (int cpt = 0; cpt <= 3; cpt += 3) {
                    const char *cpus = c == 0 ? NULL : c == 1 ? (half[0] ? half : NULL) : third;
                    ct_bind_request req = { .allowed_cpus = cpus, .gpus = gpu_lists[g], .ntasks = ntasks,
                                            .cpus_per_task = cpt };
                    ct_bind_plan *pa = NULL, *pb = NULL;
                    ct_error ea, eb;
                    int ra = ct_bind_plan_create(a, &req, &pa, &ea), rb = ct_bind_plan_create(b, &req, &pb, &eb);

                    assert_int_equal(ra, rb);
                    if (ra == 0) {
                        char *ja = ct_bind_plan_to_json(pa), *jb = ct_bind_plan_to_json(pb);

                        if (strcmp(ja, jb))
                            fail_msg("%s: %d tasks, GPUs %s, CPUs %s, %d per task: %s\n  !=\n%s", what, ntasks,
                                     gpu_lists[g] ? gpu_lists[g] : "(all)", cpus ? cpus : "(all)", cpt, ja, jb);
                        free(ja);
                        free(jb);
                        checked++;
                    } else {
                        assert_string_equal(ea.msg, eb.msg);
                    }
                    ct_bind_plan_free(pa);
                    ct_bind_plan_free(pb);
                }
    assert_true(checked > 0);
}

static void test_summary_plans_equal_every_fixture(void **state)
{
    static const char *files[] = { "16em64t-4s2c2t.xml", "24em64t-2n6c2t-pci.xml", "32em64t-2n8c2t-pci-wholeio.xml",
                                   "96em64t-4n4d3ca2co-pci.xml", "knl-snc4-flat.xml", "llnl-corona-pci-only.xml",
                                   "llnl-corona.xml", "llnl-lassen-pci-only.xml", "llnl-lassen.xml",
                                   "llnl-tioga.xml", "nvidia-dgx2.xml" };
    char tdir[] = "/tmp/ctrain-test-summary-XXXXXX", path[128], xml[1200], what[1300];

    assert_non_null(mkdtemp(tdir));
    snprintf(path, sizeof(path), "%s/node", tdir);
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        ct_topology *io = NULL, *cpu = NULL, *back = NULL, *back_cpu = NULL;
        ct_error err;

        fixture(files[f], xml, sizeof(xml));
        assert_int_equal(ct_topology_load(xml, CT_TOPOLOGY_IO, &io, &err), 0);
        assert_int_equal(ct_topology_load(xml, 0, &cpu, &err), 0);
        assert_int_equal(ct_topology_summary_write(io, "test", path, &err), 0);
        assert_int_equal(ct_topology_summary_read(path, CT_TOPOLOGY_IO, "test", xml, &back, &err), 0);
        assert_int_equal(ct_topology_gpu_count(back), ct_topology_gpu_count(io));
        snprintf(what, sizeof(what), "%s with I/O", files[f]);
        plans_equal(io, back, what);
        /* A step without I/O plans on an I/O summary as on a topology loaded without I/O. */
        assert_int_equal(ct_topology_summary_read(path, 0, "test", xml, &back_cpu, &err), 0);
        assert_int_equal(ct_topology_gpu_count(back_cpu), 0);
        snprintf(what, sizeof(what), "%s without I/O", files[f]);
        plans_equal(cpu, back_cpu, what);
        ct_topology_free(io);
        ct_topology_free(cpu);
        ct_topology_free(back);
        ct_topology_free(back_cpu);
    }
    unlink(path);
    rmdir(tdir);
}

/* The node's own discovery, written and read back: the same plans (what the plugin's slurmd writes
 * and its slurmstepd reads), and the same allowed CPUs. */
static void test_summary_of_this_machine(void **state)
{
    char tdir[] = "/tmp/ctrain-test-summary-XXXXXX", path[128];
    ct_topology *io = NULL, *back = NULL;
    ct_error err;

    assert_non_null(mkdtemp(tdir));
    snprintf(path, sizeof(path), "%s/node", tdir);
    assert_int_equal(ct_topology_load(NULL, CT_TOPOLOGY_IO, &io, &err), 0);
    assert_int_equal(ct_topology_summary_write(io, "test", path, &err), 0);
    assert_int_equal(ct_topology_summary_read(path, CT_TOPOLOGY_IO, "test", NULL, &back, &err), 0);
    plans_equal(io, back, "this machine");
    ct_topology_free(back);
    assert_int_equal(ct_topology_summary_read(path, CT_TOPOLOGY_IO, "other", NULL, &back, &err), CT_EFORMAT);
    assert_null(back);
    ct_topology_free(io);
    unlink(path);
    rmdir(tdir);
}

/* A summary's bytes as they are (no checksum recomputed): what a bug, a disk or a hostile writer
 * leaves. Root-owned, 0644, like the plugin's. */
static void write_raw(const struct ct_node_summary_head *h, size_t size, const char *path)
{
    FILE *f;

    unlink(path);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(h, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, 0644), 0);
}

/* A summary rewritten with one thing changed (checksum recomputed unless corrupting it is the point). */
static void write_changed(const ct_node_summary *s, const char *path, void (*change)(struct ct_node_summary_head *),
                          int fix_checksum)
{
    struct ct_node_summary_head *c = malloc(s->head->size);

    assert_non_null(c);
    memcpy(c, s->head, s->head->size);
    change(c);
    if (fix_checksum)
        c->checksum = ct_node_summary_checksum(c, c->size);
    write_raw(c, s->head->size, path);
    free(c);
}

static void change_boot(struct ct_node_summary_head *h) { h->boot_id[0] = h->boot_id[0] == 'x' ? 'y' : 'x'; }
static void change_host(struct ct_node_summary_head *h) { ct_str_copy(h->host, sizeof(h->host), "elsewhere-node"); }
static void change_version(struct ct_node_summary_head *h) { ct_str_copy(h->version, sizeof(h->version), "0.0"); }
static void change_flags(struct ct_node_summary_head *h) { h->flags = 0; }
static void change_format(struct ct_node_summary_head *h) { h->format++; }
static void change_count(struct ct_node_summary_head *h) { h->nunits++; }
static void change_byte(struct ct_node_summary_head *h) { ((unsigned char *)h)[h->size - 1] ^= 0x40; }
static void change_source(struct ct_node_summary_head *h) { ct_str_copy(h->source, sizeof(h->source), "/elsewhere.xml"); }
static void change_mtime(struct ct_node_summary_head *h) { h->source_mtime_ns++; }

static void expect_refused(const char *path, const char *source, const char *why)
{
    ct_node_summary back;
    ct_topology *topo = (ct_topology *)&back; /* not NULL: the read must clear it */
    ct_error err;

    assert_int_equal(ct_node_summary_read(path, CT_TOPOLOGY_IO, "test", source, &back, &err), CT_EFORMAT);
    assert_null(back.head);
    assert_non_null(strstr(err.msg, path));
    if (!strstr(err.msg, why))
        fail_msg("'%s' does not say '%s'", err.msg, why);
    /* What the plugin calls: it refuses the same way, and hands back no topology to plan on. */
    assert_int_equal(ct_topology_summary_read(path, CT_TOPOLOGY_IO, "test", source, &topo, &err), CT_EFORMAT);
    assert_null(topo);
}

static void test_node_summary_refused(void **state)
{
    struct view v;
    ct_node_summary back;
    const ct_node_summary *s;
    ct_error err;
    char tdir[] = "/tmp/ctrain-test-summary-XXXXXX", path[128], other[160], xml[1200];

    assert_non_null(mkdtemp(tdir));
    snprintf(path, sizeof(path), "%s/node", tdir);
    assert_int_equal(ct_node_summary_read(path, 0, "test", NULL, &back, &err), CT_ENOENT);
    view_load("llnl-lassen.xml", &v);
    fixture("llnl-lassen.xml", xml, sizeof(xml));
    assert_int_equal(ct_topology_summary_write(v.topo, "test", path, &err), 0); /* stamps the version */
    s = &v.topo->model;
    write_changed(s, path, change_byte, 0);
    expect_refused(path, xml, "checksum");
    write_changed(s, path, change_boot, 1);
    expect_refused(path, xml, "last boot");
    write_changed(s, path, change_host, 1);
    expect_refused(path, xml, "another node");
    write_changed(s, path, change_version, 1);
    expect_refused(path, xml, "another ctrain version");
    write_changed(s, path, change_flags, 1);
    expect_refused(path, xml, "without the GPUs and NICs");
    write_changed(s, path, change_format, 1);
    expect_refused(path, xml, "another format");
    write_changed(s, path, change_count, 1);
    expect_refused(path, xml, "size");
    write_changed(s, path, change_source, 1);
    expect_refused(path, xml, "topology file as it is now");
    write_changed(s, path, change_mtime, 1);
    expect_refused(path, xml, "topology file as it is now");
    assert_int_equal(ct_topology_summary_write(v.topo, "test", path, &err), 0);
    expect_refused(path, NULL, "made from a topology file");
    assert_int_equal(truncate(path, (off_t)s->head->size - 8), 0);
    expect_refused(path, xml, "size");
    assert_int_equal(ct_topology_summary_write(v.topo, "test", path, &err), 0);
    assert_int_equal(chmod(path, 0666), 0);
    expect_refused(path, xml, "writable by root only");
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(chmod(tdir, 0777), 0);
    expect_refused(path, xml, "its directory is not owned and writable by root only");
    assert_int_equal(chmod(tdir, 0755), 0);
    /* A FIFO planted as the summary (issue 48 item 4): refused at once, never waited on in
     * slurmstepd (the alarm ends the test where an open would block); a link to a good summary is
     * refused as well. */
    snprintf(other, sizeof(other), "%s/good", tdir);
    assert_int_equal(rename(path, other), 0);
    assert_int_equal(mkfifo(path, 0644), 0);
    alarm(10);
    expect_refused(path, xml, "it is not a regular file");
    alarm(0);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink(other, path), 0);
    expect_refused(path, xml, "it is a symbolic link");
    assert_int_equal(unlink(path), 0);
    assert_int_equal(unlink(other), 0);
    assert_int_equal(ct_topology_summary_write(v.topo, "test", path, &err), 0);
    assert_int_equal(ct_node_summary_read(path, 0, "test", xml, &back, &err), 0); /* CPUs only: an I/O one serves */
    ct_node_summary_free(&back);
    unlink(path);
    rmdir(tdir);
    view_free(&v);
}

/* Random bytes of a valid summary changed and its checksum made to match (what a bug or a
 * hostile writer could leave): read refuses it, or everything it hands back is within the file,
 * and a plan on it either fails cleanly or gives every task CPUs of the node. */
static void test_node_summary_random_damage(void **state)
{
    struct view v;
    ct_node_summary back;
    const ct_node_summary *s;
    ct_error err;
    char tdir[] = "/tmp/ctrain-test-summary-XXXXXX", path[128], xml[1200];
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

    print_message("# random damage, seed %u\n", seed);
    srand(seed);
    assert_non_null(mkdtemp(tdir));
    snprintf(path, sizeof(path), "%s/node", tdir);
    view_load("nvidia-dgx2.xml", &v);
    fixture("nvidia-dgx2.xml", xml, sizeof(xml));
    assert_int_equal(ct_topology_summary_write(v.topo, "test", path, &err), 0);
    s = &v.topo->model;
    for (int round = 0; round < 300; round++) {
        struct ct_node_summary_head *c = malloc(s->head->size);
        size_t at = (size_t)rand() % (round % 2 ? sizeof(*s->head) : s->head->size);
        ct_topology *topo = NULL;
        int rv;

        assert_non_null(c);
        memcpy(c, s->head, s->head->size);
        ((unsigned char *)c)[at] ^= (unsigned char)(1 + rand() % 255);
        c->size = s->head->size; /* the writer writes this many bytes */
        c->checksum = ct_node_summary_checksum(c, s->head->size);
        write_raw(c, s->head->size, path);
        free(c);
        rv = ct_node_summary_read(path, CT_TOPOLOGY_IO, "test", xml, &back, &err);
        if (rv != 0 && rv != CT_EFORMAT)
            fail_msg("seed %u round %d: read returned %d", seed, round, rv);
        if (rv == 0) {
            assert_int_equal(ct_node_summary_size(back.head), back.head->size);
            for (int d = 0; d < back.head->ngpus + back.head->nnics; d++)
                assert_in_range(back.gpus[d].locality, 0, back.head->nsets - 1);
            ct_node_summary_free(&back);
        }
        if (ct_topology_summary_read(path, CT_TOPOLOGY_IO, "test", xml, &topo, &err) == 0) {
            ct_bind_request req = { .ntasks = 1 + round % 20 };
            ct_bind_plan *plan = NULL;

            if (ct_bind_plan_create(topo, &req, &plan, &err) == 0)
                for (int r = 0; r < ct_bind_plan_ntasks(plan); r++)
                    for (int i = 0; i < ct_bind_plan_task(plan, r)->ncpus; i++)
                        assert_in_range(ct_bind_plan_task(plan, r)->cpus[i], 0, 64 * topo->model.head->nwords - 1);
            ct_bind_plan_free(plan);
            ct_topology_free(topo);
        }
    }
    unlink(path);
    rmdir(tdir);
    view_free(&v);
}

int main(void)
{
    const char *d = getenv("CT_TOPOLOGIES");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topology_file_effective_uid),
        cmocka_unit_test(test_topology_environment_untouched),
        cmocka_unit_test(test_topology_discovered_in_a_thread),
        cmocka_unit_test(test_rules_dgx2),
        cmocka_unit_test(test_rules_dual_gpu_ib),
        cmocka_unit_test(test_rules_dual_eth_ib),
        cmocka_unit_test(test_rules_quad_numa),
        cmocka_unit_test(test_dgx2_four_tasks),
        cmocka_unit_test(test_dgx2_allocated_gpus),
        cmocka_unit_test(test_dual_gpu_and_hca_together),
        cmocka_unit_test(test_cpus_per_task),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_rules_lassen),
        cmocka_unit_test(test_rules_lassen_pci_only),
        cmocka_unit_test(test_rules_tioga),
        cmocka_unit_test(test_rules_knl),
        cmocka_unit_test(test_lassen_mpibind_expected),
        cmocka_unit_test(test_lassen_pci_only),
        cmocka_unit_test(test_tioga_gcds_and_slingshot),
        cmocka_unit_test(test_knl_mcdram_shares_cpus),
        cmocka_unit_test(test_display_adapters_not_gpus),
        cmocka_unit_test(test_corona_mpibind_expected),
        cmocka_unit_test(test_corona_pci_only),
        cmocka_unit_test(test_rules_corona),
        cmocka_unit_test(test_four_sockets),
        cmocka_unit_test(test_rules_four_sockets),
        cmocka_unit_test(test_task_gpus_in),
        cmocka_unit_test(test_net_fabric),
        cmocka_unit_test(test_net_topology_ethernet),
        cmocka_unit_test(test_net_no_nic_in_topology),
        cmocka_unit_test(test_net_every_fixture),
        cmocka_unit_test(test_node_summary_every_fixture),
        cmocka_unit_test(test_summary_plans_equal_every_fixture),
        cmocka_unit_test(test_summary_of_this_machine),
        cmocka_unit_test(test_node_summary_refused),
        cmocka_unit_test(test_node_summary_random_damage),
    };

    snprintf(dir, sizeof(dir), "%s", d ? d : "t/fixtures/topologies");
    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
