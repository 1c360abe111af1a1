/* SPDX-License-Identifier: BSD-3-Clause */
/* Test helper: a program that calls the library, the way a user's C program would, with
 * --strategy ddp_fork: the call to ct_trainer_fit forks the ranks at that point, and rank 0's
 * result comes back to this process through a pipe.
 *
 *   fit_fork DATA_DIR ROOT_DIR DEVICES MAX_EPOCHS [first]
 *
 * With "first", the program first trains single_device (into ROOT_DIR/first), as a program that
 * trains twice does: the ddp_fork workers are then forked from a process whose OpenMP threads ran.
 *
 * Prints "fit_fork: pid P" first (the test tells the workers from the caller by it), then, when
 * fit returns 0, "fit_fork: result filled F world_size W steps S test_acc A best B summary J"
 * from the ct_trainer_result this process holds; else the error. Exit status: 0, or
 * ct_error_exit_status of the error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrain/connector.h"
#include "ctrain/engine.h"
#include "ctrain/trainer.h"

int main(int argc, char **argv)
{
    ct_connector_flags flags = { 0 };
    ct_trainer_config cfg;
    ct_trainer_result res = { 0 };
    ct_connector *conn = NULL;
    ct_error err;
    int rc;

    if (argc != 5 && !(argc == 6 && !strcmp(argv[5], "first"))) {
        fprintf(stderr, "usage: fit_fork DATA_DIR ROOT_DIR DEVICES MAX_EPOCHS [first]\n");
        return 2;
    }
    printf("fit_fork: pid %ld\n", (long)getpid());
    fflush(stdout);
    ct_error_clear(&err);
    ct_engine_init();
    flags.strategy = "ddp_fork";
    flags.devices = argv[3];
    flags.deterministic = 1;
    ct_trainer_config_default(&cfg);
    snprintf(cfg.data_dir, sizeof(cfg.data_dir), "%s", argv[1]);
    snprintf(cfg.default_root_dir, sizeof(cfg.default_root_dir), "%s", argv[2]);
    cfg.max_epochs = atoi(argv[4]);
    cfg.batch_size = 64;
    cfg.progress = CT_TRAINER_PROGRESS_OFF;
    if (argc == 6) {
        ct_connector_flags one = flags;
        ct_trainer_config first = cfg;

        one.strategy = "single_device";
        one.devices = "1";
        snprintf(first.default_root_dir, sizeof(first.default_root_dir), "%s/first", argv[2]);
        rc = ct_connector_create(&one, NULL, &conn, &err);
        if (rc == 0)
            rc = ct_trainer_fit(&first, conn, &res, &err);
        ct_connector_free(conn);
        conn = NULL;
        if (rc) {
            ct_error_print(stderr, &err);
            return ct_error_exit_status(rc);
        }
        memset(&res, 0, sizeof(res));
    }
    rc = ct_connector_create(&flags, NULL, &conn, &err);
    if (rc == 0)
        rc = ct_trainer_fit(&cfg, conn, &res, &err);
    if (rc) {
        ct_error_print(stderr, &err);
        ct_connector_free(conn);
        return ct_error_exit_status(rc);
    }
    printf("fit_fork: result filled %d world_size %d steps %ld test_acc %.4f best %s summary %s\n", res.filled,
           res.world_size, res.steps, res.test_acc, res.best_checkpoint, res.summary_path);
    ct_connector_free(conn);
    return 0;
}
