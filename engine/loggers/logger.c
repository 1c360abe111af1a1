/* SPDX-License-Identifier: BSD-3-Clause */
/* metrics.csv and the progress display (global zero only). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "ctrain/util.h"
#include "engine/loggers/logger_state.h"
#include "engine/loggers/loggers.h"
#include "engine/util/fsutil.h"

/* Resuming: metrics.csv keeps its header and its whole rows of steps up to the checkpoint's (a
 * stopped run may have logged past its checkpoint, and the resumed run logs those steps again; a
 * row cut short by a kill goes too). Read through the descriptor's own file, so the file checked
 * is the file cut; one that cannot be read back is refused as it is. */
static int trim_rows(int fd, const char *path, int64_t last_step, ct_error *err)
{
    char self[64], line[8192];
    long keep = 0;
    long long step;
    FILE *rf;

    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    if (!(rf = fopen(self, "rb"))) {
        ct_error_set(err, CT_EIO, "metrics-open", "%s: cannot read it back to keep its rows up to step %lld: %s; it "
                     "is left as it is", path, (long long)last_step, strerror(errno));
        return ct_error_hint(err, "make it readable (chmod u+r), or move it out of the run directory");
    }
    while (fgets(line, sizeof(line), rf)) {
        size_t len = strlen(line);

        if (line[len - 1] != '\n' || (keep > 0 && (sscanf(line, "%lld,", &step) != 1 || step > last_step)))
            break;
        keep += (long)len;
    }
    fclose(rf);
    if (ftruncate(fd, keep))
        return ct_error_set(err, CT_EIO, "metrics-open", "%s: cannot cut it after step %lld: %s", path,
                            (long long)last_step, strerror(errno));
    return 0;
}

int ct_loggers_create(ct_run *run, int use_bar, int use_plain, ct_error *err)
{
    struct ct_loggers *lg = calloc(1, sizeof(*lg));

    if (!lg)
        return ct_error_set(err, CT_ENOMEM, "oom", "out of memory for the loggers");
    lg->use_bar = use_bar;
    lg->use_plain = use_plain;
    run->loggers = lg;
    return 0;
}

void ct_loggers_free(ct_run *run)
{
    if (!run->loggers)
        return;
    ct_logger_close(run);
    ct_tb_close(run);
    free(run->loggers);
    run->loggers = NULL;
}

void ct_logger_set_stragglers(ct_run *run, const char *nodes)
{
    if (run->loggers)
        snprintf(run->loggers->stragglers, sizeof(run->loggers->stragglers), "%s", nodes);
}

int ct_logger_open(ct_run *run, int append, ct_error *err)
{
    struct ct_loggers *lg = run->loggers;
    char path[1100];
    long size;
    int fd;

    if (!run->is_zero || !lg)
        return 0;
    snprintf(path, sizeof(path), "%s/metrics.csv", run->opt.root_dir);
    /* Not through a planted symlink, not into another user's file (engine/util/fsutil.h). */
    fd = ct_fs_open_output(path, append, err);
    if (fd < 0)
        return err->code;
    if (append && trim_rows(fd, path, run->st.global_step, err)) {
        close(fd);
        return err->code;
    }
    lg->metrics = fdopen(fd, append ? "a" : "w");
    if (!lg->metrics) {
        close(fd);
        return ct_error_set(err, CT_EIO, "metrics-open", "%s: cannot open for writing: %s", path, strerror(errno));
    }
    fseek(lg->metrics, 0, SEEK_END);
    size = ftell(lg->metrics);
    if (size <= 0) {
        fprintf(lg->metrics, "step,epoch,train_loss,val_loss,val_acc,lr,samples_per_sec,grad_norm");
        for (int i = 0; i < run->model->info.n_metrics; i++)
            fprintf(lg->metrics, ",val_%s", run->model->info.metric_names[i]);
        if (run->opt.on_straggler != CT_STRAGGLER_OFF)
            fputs(",stragglers", lg->metrics); /* the nodes slow in the last window, ';' between */
        fputc('\n', lg->metrics);
    }
    fflush(lg->metrics);
    return 0;
}

void ct_logger_close(ct_run *run)
{
    struct ct_loggers *lg = run->loggers;

    if (lg && lg->metrics)
        fclose(lg->metrics);
    if (lg)
        lg->metrics = NULL;
}

static void field(FILE *f, double v, const char *fmt)
{
    fputc(',', f);
    if (!isnan(v))
        fprintf(f, fmt, v);
}

/* The row's scalars for TensorBoard, under metrics.csv's column names. */
static void tb_row(ct_run *run, double train_loss, const ct_eval_result *val, double lr, double samples_per_sec,
                   double grad_norm)
{
    char tag[40];

    if (!isnan(train_loss)) {
        ct_tb_scalar(run, "train_loss", train_loss);
        ct_tb_scalar(run, "lr", lr);
        ct_tb_scalar(run, "epoch", (double)(run->st.step_in_epoch ? run->st.epoch : run->st.epoch - 1));
    }
    if (!isnan(samples_per_sec))
        ct_tb_scalar(run, "samples_per_sec", samples_per_sec);
    if (!isnan(grad_norm))
        ct_tb_scalar(run, "grad_norm", grad_norm);
    if (val) {
        ct_tb_scalar(run, "val_loss", val->loss);
        if (!isnan(val->acc))
            ct_tb_scalar(run, "val_acc", val->acc);
        for (int i = 0; i < run->model->info.n_metrics; i++) {
            snprintf(tag, sizeof(tag), "val_%s", run->model->info.metric_names[i]);
            ct_tb_scalar(run, tag, val->metrics[i]);
        }
    }
    ct_tb_flush(run);
}

void ct_logger_row(ct_run *run, double train_loss, const ct_eval_result *val, double lr, double samples_per_sec,
                   double grad_norm)
{
    FILE *f = run->loggers ? run->loggers->metrics : NULL;

    if (!f)
        return;
    tb_row(run, train_loss, val, lr, samples_per_sec, grad_norm);
    /* epoch: 1-based, the epoch the step belongs to. */
    fprintf(f, "%lld,%lld", (long long)run->st.global_step,
            (long long)(run->st.step_in_epoch ? run->st.epoch + 1 : run->st.epoch));
    field(f, train_loss, "%.6f");
    field(f, val ? val->loss : NAN, "%.6f");
    field(f, val ? val->acc : NAN, "%.6f");
    field(f, lr, "%g");
    field(f, samples_per_sec, "%.1f");
    field(f, grad_norm, "%.6g");
    for (int i = 0; i < run->model->info.n_metrics; i++)
        field(f, val ? val->metrics[i] : NAN, "%.6f");
    if (run->opt.on_straggler != CT_STRAGGLER_OFF)
        fprintf(f, ",%s", run->loggers->stragglers);
    fputc('\n', f);
    fflush(f);
}

static void format_eta(double seconds, char *buf, size_t size)
{
    long s = isfinite(seconds) && seconds > 0 ? (long)(seconds + 0.5) : 0;

    snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

void ct_progress_step(ct_run *run, size_t steps_per_epoch, long total_steps, double loss,
                      double samples_per_sec)
{
    static double last_draw;
    const ct_progress_state *st = &run->st;
    double now = ct_time_now();
    /* ETA from this process's own step times (a resumed run starts measuring afresh). */
    double per_step = run->train_seconds / (double)(run->steps_this_run ? run->steps_this_run : 1);
    long left = total_steps - (long)st->global_step;
    char eta[32];

    struct ct_loggers *lg = run->loggers;

    if (!run->is_zero || !lg || (!lg->use_bar && !lg->use_plain))
        return;
    format_eta(per_step * (double)(left > 0 ? left : 0), eta, sizeof(eta));
    if (lg->use_bar) {
        int width = 24, filled = (int)((double)width * (double)st->step_in_epoch / (double)steps_per_epoch);
        char bar[32];

        /* Redraw at most 10 times a second, and always at the end of an epoch or of the fit. */
        if (now - last_draw < 0.1 && (size_t)st->step_in_epoch != steps_per_epoch && left > 0)
            return;
        last_draw = now;
        for (int i = 0; i < width; i++)
            bar[i] = i < filled ? '#' : '.';
        bar[width] = '\0';
        printf("\rEpoch %lld/%d [%s] %lld/%zu loss %.4f %.0f samples/s ETA %s\033[K",
               (long long)st->epoch + 1, run->opt.max_epochs, bar, (long long)st->step_in_epoch, steps_per_epoch,
               loss, samples_per_sec, eta);
        fflush(stdout);
        lg->bar_active = 1;
    } else if (st->global_step % run->opt.log_every_n_steps == 0) {
        printf("ctrain: epoch %lld/%d step %lld/%zu (global %lld) loss %.4f %.0f samples/s ETA %s\n",
               (long long)st->epoch + 1, run->opt.max_epochs, (long long)st->step_in_epoch, steps_per_epoch,
               (long long)st->global_step, loss, samples_per_sec, eta);
        fflush(stdout);
    }
}

void ct_progress_line(ct_run *run, const char *fmt, ...)
{
    struct ct_loggers *lg = run->loggers;
    va_list ap;

    if (!run->is_zero || !lg || (!lg->use_bar && !lg->use_plain))
        return;
    if (lg->bar_active) {
        putchar('\n');
        lg->bar_active = 0;
    }
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

void ct_progress_say(ct_run *run, const char *fmt, ...)
{
    struct ct_loggers *lg = run->loggers;
    va_list ap;

    if (!run->is_zero)
        return;
    if (lg && lg->bar_active) {
        putchar('\n');
        lg->bar_active = 0;
    }
    fflush(stdout);
    fputs("ctrain: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}
