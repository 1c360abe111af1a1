/* ctrain SPANK plugin — where rank 0 of a step listens (MASTER_ADDR, MASTER_PORT). */
#ifndef CTRAIN_SPANK_RENDEZVOUS_H
#define CTRAIN_SPANK_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "ctrain/environment.h"
#include "ctrain/error.h"

/* The node of task 0 (the first of SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST; for an arbitrary
 * distribution the one slurmctld's step layout names) as a name that resolves here — the node
 * name, else SLURM's NodeAddr for it — and the port: srun --resv-ports' first reserved port, else
 * the envs/ port rule of the job and step ids (port_base 0: the default). One value for every
 * task of the step; a user's MASTER_PORT is kept by remote.c. */
int ct_spank_rendezvous(ct_getenv_fn get, void *ctx, uint32_t job_id, uint32_t step_id, long port_base,
                        char *addr, size_t size, int *port, ct_error *err);

#endif
