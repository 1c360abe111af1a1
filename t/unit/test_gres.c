/* SPDX-License-Identifier: BSD-3-Clause */
/* SLURM's GPU numbers (gres indexes) mapped to physical GPUs: gres.conf's files, the driver's
 * minor -> PCI table and a topology file. A node whose minors are not in PCI order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ctrain/bind.h"
#include "ctrain/gres.h"
#include "ctrain/gres_conf.h"

static char dir[1024];

static ct_topology *load(const char *name)
{
    char path[1200];
    ct_topology *t = NULL;
    ct_error err;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_int_equal(ct_topology_load(path, CT_TOPOLOGY_IO, &t, &err), 0);
    return t;
}

static void test_conf_parse(void **state)
{
    ct_gres_files f;
    ct_error err;
    char text[] = "# a site's gres.conf\n"
                  "AutoDetect=off\n"
                  "NodeName=gpu[01-04] Name=gpu Type=a100 File=/dev/nvidia[0-3] Cores=0-31   # four\n"
                  "NodeName=gpu05 Name=gpu File=/dev/nvidia2\n"
                  "NodeName=gpu05 Name=gpu File=/dev/nvidia[0,1]\n"
                  "NodeName=gpu06 Name=gpu File=/dev/nvidia3,/dev/nvidia1\n"
                  "Name=mps Count=100\n"
                  "NodeName=amd01 AutoDetect=rsmi\n"
                  "NodeName=amd01 Name=gpu File=/dev/dri/renderD[128-129]\n";

    (void)state;
    assert_int_equal(ct_gres_conf_parse(text, "gpu03", &f, &err), 0);
    assert_int_equal(f.nfiles, 4);
    assert_int_equal(f.autodetect, 0);
    assert_string_equal(f.files[0], "nvidia0");
    assert_string_equal(f.files[3], "nvidia3");
    /* The order as written, not sorted: slurmd numbers them so. */
    assert_int_equal(ct_gres_conf_parse(text, "gpu05", &f, &err), 0);
    assert_int_equal(f.nfiles, 3);
    assert_string_equal(f.files[0], "nvidia2");
    assert_string_equal(f.files[1], "nvidia0");
    assert_string_equal(f.files[2], "nvidia1");
    assert_int_equal(ct_gres_conf_parse(text, "gpu06", &f, &err), 0);
    assert_int_equal(f.nfiles, 2);
    assert_string_equal(f.files[0], "nvidia3");
    assert_string_equal(f.files[1], "nvidia1");
    /* A node's own AutoDetect wins over the global line. */
    assert_int_equal(ct_gres_conf_parse(text, "amd01", &f, &err), 0);
    assert_int_equal(f.autodetect, 1);
    assert_int_equal(f.nfiles, 2);
    assert_string_equal(f.files[1], "renderD129");
    assert_int_equal(ct_gres_conf_parse(text, "cpu01", &f, &err), 0);
    assert_int_equal(f.nfiles, 0);
    assert_int_equal(ct_gres_conf_parse("AutoDetect=nvml\n", "gpu01", &f, &err), 0);
    assert_int_equal(f.autodetect, 1);
    assert_int_equal(ct_gres_conf_parse("Include /etc/slurm/gres.d/gpu.conf\n", "gpu01", &f, &err), 0);
    assert_int_equal(f.unknown, 1);
    assert_int_equal(ct_gres_conf_parse("Name=gpu File=/dev/nvidia[0-\n", "gpu01", &f, &err), CT_EFORMAT);
    assert_non_null(strstr(err.msg, "nvidia[0-"));
    assert_int_equal(ct_gres_conf_parse("Name=gpu File=/dev/ # not a file\n", "gpu01", &f, &err), CT_EFORMAT);
    assert_non_null(strstr(err.msg, "names a directory"));
    assert_int_equal(ct_gres_conf_parse(NULL, "gpu01", &f, &err), 0);
    assert_int_equal(f.nfiles, 0);
}

/* The DGX-2's 16 GPUs with the driver's minors in reverse PCI order: minor m is GPU 15-m. */
static int reversed_minors(const ct_topology *t, ct_gpu_dev *devs)
{
    for (int m = 0; m < 16; m++) {
        snprintf(devs[m].file, sizeof(devs[m].file), "nvidia%d", m);
        snprintf(devs[m].pci, sizeof(devs[m].pci), "%s", ct_topology_gpu_pci(t, 15 - m));
    }
    return 16;
}

/* Each mapping test: the DGX-2 with reversed minors, and the buffers ct_gres_map writes. */
struct dgx {
    ct_topology *t;
    ct_gpu_dev devs[16];
    int n;
    ct_gres_files f;
    char out[256], why[1024];
    ct_error err;
};

static int dgx_setup(void **state)
{
    struct dgx *d = calloc(1, sizeof(*d));

    if (!d)
        return -1;
    d->t = load("nvidia-dgx2.xml");
    d->n = reversed_minors(d->t, d->devs);
    *state = d;
    return 0;
}

static int dgx_teardown(void **state)
{
    struct dgx *d = *state;

    ct_topology_free(d->t);
    free(d);
    return 0;
}

/* d->f from one gres.conf text for node "dgx". */
static int conf(struct dgx *d, const char *text) { return ct_gres_conf_parse(text, "dgx", &d->f, &d->err); }

/* SLURM's numbers gpus through files (NULL: no gres.conf) and the first ndevs driver entries. */
static int map(struct dgx *d, const char *gpus, const ct_gres_files *files, int ndevs)
{
    return ct_gres_map(d->t, gpus, files, d->devs, ndevs, d->out, sizeof(d->out), d->why, sizeof(d->why), &d->err);
}

static void test_minors_not_in_pci_order(void **state)
{
    struct dgx *d = *state;

    assert_int_equal(ct_topology_gpu_count(d->t), 16);
    assert_non_null(ct_topology_gpu_pci(d->t, 0));
    assert_null(ct_topology_gpu_pci(d->t, 16));
    assert_int_equal(conf(d, "Name=gpu File=/dev/nvidia[0-15]\n"), 0);
    /* gres index 0 is /dev/nvidia0, minor 0: the last GPU in PCI order. */
    assert_int_equal(map(d, "0,1", &d->f, d->n), 0);
    assert_string_equal(d->out, "15,14");
    assert_non_null(strstr(d->why, "SLURM's GPU 0 is nvidia0, at PCI "));
    assert_non_null(strstr(d->why, "GPU 15 in PCI order, where SLURM's CUDA_VISIBLE_DEVICES counts GPU 0"));
    /* The planner takes that list: the task gets the GPU of the file SLURM allocated. */
    {
        ct_bind_request req = { .gpus = d->out, .ntasks = 1 };
        ct_bind_plan *plan = NULL;
        const ct_bind_task *task;

        assert_int_equal(ct_bind_plan_create(d->t, &req, &plan, &d->err), 0);
        task = ct_bind_plan_task(plan, 0);
        assert_int_equal(task->ngpus, 2);
        assert_int_equal(ct_bind_task_gpus_in(d->t, task, "14,15", &d->err), 1);
        assert_int_equal(ct_bind_task_gpus_in(d->t, task, "0,1", &d->err), 0);
        ct_bind_plan_free(plan);
    }
    /* Files listed in PCI order (what AutoDetect=nvml writes): index N is GPU N, nothing to say. */
    {
        char text[1024];
        size_t len = 0;

        for (int m = 15; m >= 0; m--)
            len += (size_t)snprintf(text + len, sizeof(text) - len, "Name=gpu File=/dev/nvidia%d\n", m);
        assert_int_equal(conf(d, text), 0);
        assert_int_equal(d->f.nfiles, 16);
        assert_string_equal(d->f.files[0], "nvidia15");
        assert_int_equal(map(d, "0,3", &d->f, d->n), 0);
        assert_string_equal(d->out, "0,3");
        assert_string_equal(d->why, "");
    }
}

/* Where the number cannot go through a file: SLURM's own meaning, the N-th GPU in PCI order. */
static void test_pci_order_fallbacks(void **state)
{
    struct dgx *d = *state;

    /* AutoDetect: SLURM ordered the GPUs by the library's index, PCI order. */
    assert_int_equal(conf(d, "AutoDetect=nvml\nName=gpu File=/dev/nvidia[0-15]\n"), 0);
    assert_int_equal(map(d, "2", &d->f, d->n), 0);
    assert_string_equal(d->out, "2");
    assert_string_equal(d->why, "");
    /* No driver table (stand-in device files, no driver loaded). */
    assert_int_equal(conf(d, "Name=gpu File=/dev/nvidia[0-15]\n"), 0);
    assert_int_equal(map(d, "2", &d->f, 0), 0);
    assert_string_equal(d->out, "2");
    /* MIG's capability files are no driver table entry: PCI order. */
    assert_int_equal(conf(d, "Name=gpu File=/dev/nvidia-caps/nvidia-cap[21-22]\n"), 0);
    assert_int_equal(d->f.nfiles, 2);
    assert_int_equal(map(d, "1", &d->f, d->n), 0);
    assert_string_equal(d->out, "1");
    /* No gres.conf known. */
    assert_int_equal(map(d, "4,5", NULL, d->n), 0);
    assert_string_equal(d->out, "4,5");
    assert_int_equal(map(d, "16", NULL, 0), CT_EINVAL);
    assert_non_null(strstr(d->err.msg, "SLURM's GPU 16 is not on this node's topology (16 GPUs)"));
}

/* Sources that disagree are an error naming SLURM's number, never a guess. */
static void test_unmappable(void **state)
{
    struct dgx *d = *state;

    assert_int_equal(conf(d, "Name=gpu File=/dev/nvidia[0-3]\n"), 0);
    assert_int_equal(map(d, "4", &d->f, d->n), CT_EINVAL);
    assert_non_null(strstr(d->err.msg, "SLURM's GPU 4 has no device file: gres.conf lists 4 for this node"));
    assert_int_equal(conf(d, "Name=gpu File=/dev/nvidia[30-31]\n"), 0);
    assert_int_equal(map(d, "1", &d->f, d->n), CT_EINVAL);
    assert_non_null(strstr(d->err.msg, "SLURM's GPU 1 is nvidia31 (gres.conf), a device the driver does not list"));
    assert_int_equal(conf(d, "Name=gpu File=/dev/nvidia[0-1]\n"), 0);
    snprintf(d->devs[1].pci, sizeof(d->devs[1].pci), "0000:ee:00.0");
    assert_int_equal(map(d, "1", &d->f, d->n), CT_EINVAL);
    assert_non_null(strstr(d->err.msg, "SLURM's GPU 1 is nvidia1 at PCI 0000:ee:00.0, which the topology has no GPU at"));
    assert_int_equal(map(d, "0,x", &d->f, d->n), CT_EINVAL);
    assert_non_null(strstr(d->err.msg, "'x', not a GPU number"));
}

int main(void)
{
    const char *d = getenv("CT_TOPOLOGIES");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conf_parse),
        cmocka_unit_test_setup_teardown(test_minors_not_in_pci_order, dgx_setup, dgx_teardown),
        cmocka_unit_test_setup_teardown(test_pci_order_fallbacks, dgx_setup, dgx_teardown),
        cmocka_unit_test_setup_teardown(test_unmappable, dgx_setup, dgx_teardown),
    };

    snprintf(dir, sizeof(dir), "%s", d ? d : "t/fixtures/topologies");
    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
