/* SPDX-License-Identifier: BSD-3-Clause */
/* The checkpoint connector (Lightning's CheckpointConnector): which checkpoint fit resumes
 * (--ckpt-path, "auto" under SLURM so a requeued job continues) and validate/test evaluate, and the
 * output directory they live in. ModelCheckpoint writes the files; a restore reads one through a single
 * call into engine/checkpoint/checkpoint.c (it checks the metadata against the run). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/trainer/trainer_internal.h"
#include "engine/util/fsutil.h"

/* "last" / "best" name files in the root directory; anything else is a path. */
static void resolve_ckpt(const ct_trainer_config *cfg, const char *given, char *out, size_t size)
{
    if (!strcmp(given, "last") || !strcmp(given, "best"))
        snprintf(out, size, "%s/%s.safetensors", cfg->default_root_dir, given);
    else
        snprintf(out, size, "%s", given);
}

static int mkdir_p(const char *dir, ct_error *err)
{
    char failed[CT_TRAINER_PATH_MAX];

    if (ct_fs_mkdirs(dir, failed, sizeof(failed)) == 0)
        return 0;
    ct_error_set(err, CT_EIO, "trainer-root-dir", "--default-root-dir %s: cannot create %s: %s", dir, failed,
                 strerror(errno));
    return ct_error_hint(err, "choose a writable directory");
}

static int root_dir_ok(const ct_trainer_config *cfg, ct_error *err)
{
    return ct_fs_check_dir(cfg->default_root_dir, "--default-root-dir", err);
}

/* --ckpt-path auto: last.safetensors when it exists, nothing when it does not; the restore checks
 * that this SLURM job wrote it (the job was requeued): one written by another job (or outside
 * SLURM) is neither resumed nor overwritten silently (meta.c's rule). Fills resume ("" = from
 * scratch). */
static int choose_auto(ct_run *run, const ct_trainer_config *cfg, char *resume, size_t size, ct_error *err)
{
    char path[CT_TRAINER_PATH_MAX + 32];
    struct stat st;
    int exists, rc;

    snprintf(path, sizeof(path), "%s/last.safetensors", cfg->default_root_dir);
    if ((rc = ct_rank_zero_file_exists(run, path, &exists, err)))
        return rc;
    if (!exists)
        return 0;
    /* Its job id is easy to copy: a file another user owns (or a link to one) is not resumed; a
     * sharded checkpoint's metadata is its index's (CT_CKPT_SHARDED_INDEX, engine/checkpoint/sharded.h). */
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(path + strlen(path), sizeof(path) - strlen(path), "/index.safetensors");
    rc = run->is_zero ? ct_fs_check_owned(path, "--ckpt-path auto:", err) : 0;
    if ((rc = ct_rank_zero_status(run, rc, err)))
        return rc;
    snprintf(resume, size, "%s/last.safetensors", cfg->default_root_dir);
    return 0;
}

/* Which checkpoint fit resumes from ("" = none). Under SLURM the default is auto, so a requeued
 * job picks up where it was stopped. */
static int choose_resume(ct_run *run, const ct_trainer_config *cfg, char *resume, size_t size, int *automatic,
                         ct_error *err)
{
    const char *mode = cfg->ckpt_path[0] ? cfg->ckpt_path : run->opt.job_id[0] ? "auto" : "";

    resume[0] = '\0';
    *automatic = !strcmp(mode, "auto");
    if (*automatic)
        return choose_auto(run, cfg, resume, size, err);
    if (mode[0])
        resolve_ckpt(cfg, mode, resume, size);
    return 0;
}

int ct_ckpt_connector_make_root(const ct_trainer_config *cfg, ct_error *err)
{
    int rc = mkdir_p(cfg->default_root_dir, err);

    return rc ? rc : root_dir_ok(cfg, err);
}

/* One call into the checkpoint code: it reads the file's metadata once, checks it against the run
 * (the job under auto, the model, what a resume must match, --deterministic's settings) and loads. */
int ct_ckpt_connector_restore(ct_run *run, const ct_trainer_job *job, int *resumed, ct_error *err)
{
    const ct_trainer_config *cfg = job->cfg;
    char resume[CT_TRAINER_PATH_MAX + 32];
    ct_ckpt_restore how = { cfg->weights_only, job->plan->deterministic && !cfg->weights_only, 0 };
    int rc;

    *resumed = 0;
    /* The run's directory must be this user's before anything in it is trusted or written. */
    rc = run->is_zero && access(cfg->default_root_dir, F_OK) == 0 ? root_dir_ok(cfg, err) : 0;
    if ((rc = ct_rank_zero_status(run, rc, err)) ||
        (rc = choose_resume(run, cfg, resume, sizeof(resume), &how.same_job, err)))
        return rc;
    if (!resume[0])
        return 0;
    if ((rc = ct_run_restore_checkpoint(run, resume, &how, err))) {
        if (rc == CT_ENOENT && !cfg->weights_only)
            ct_error_hint(err, "--ckpt-path %s: no such checkpoint; start without --ckpt-path, or pass "
                               "the --default-root-dir of the run to resume", cfg->ckpt_path[0] ? cfg->ckpt_path : "auto");
        return rc;
    }
    if (cfg->weights_only) {
        /* Fine-tuning: the weights only; counters, optimizer and logs start anew. */
        ct_progress_line(run, "ctrain: loaded the weights of %s; a new run starts (--weights-only)", resume);
        return 0;
    }
    ct_progress_line(run, "ctrain: resumed from %s at epoch %lld, step %lld", resume,
                     (long long)run->st.epoch + 1, (long long)run->st.global_step);
    *resumed = 1;
    return 0;
}

int ct_ckpt_connector_open_outputs(ct_run *run, const ct_trainer_config *cfg, int resumed, ct_error *err)
{
    int rc = run->is_zero ? mkdir_p(cfg->default_root_dir, err) : 0;

    if (!rc && run->is_zero)
        rc = root_dir_ok(cfg, err);
    if (!rc)
        rc = ct_logger_open(run, resumed, err);
    if (!rc)
        rc = ct_tb_open(run, resumed ? run->st.global_step : -1, err);
    return ct_rank_zero_status(run, rc, err);
}

/* Test the best checkpoint (the current weights when fit trained nothing and none exists). */
int ct_ckpt_connector_load_best(ct_run *run, const ct_trainer_config *cfg, char *best, size_t size, ct_error *err)
{
    const ct_ckpt_restore weights = { 1, 0, 0 };
    int exists = 0, rc;

    snprintf(best, size, "%s/best.safetensors", cfg->default_root_dir);
    if ((rc = ct_rank_zero_file_exists(run, best, &exists, err)))
        return rc;
    if (exists && (rc = ct_run_restore_checkpoint(run, best, &weights, err)))
        return rc;
    if (!exists)
        best[0] = '\0';
    return 0;
}

int ct_ckpt_connector_load_eval(ct_run *run, const ct_trainer_config *cfg, char *path, size_t size, ct_error *err)
{
    const ct_ckpt_restore weights = { 1, 0, 0 };
    int rc;

    resolve_ckpt(cfg, cfg->ckpt_path[0] ? cfg->ckpt_path : "best", path, size);
    if ((rc = ct_run_restore_checkpoint(run, path, &weights, err))) {
        if (rc == CT_ENOENT)
            ct_error_hint(err, "run 'ctrain fit --default-root-dir %s' first, or pass --ckpt-path FILE",
                          cfg->default_root_dir);
        return rc;
    }
    return 0;
}
