/* plan/plan_comm.h - the comm backend's own buffers in the plan: those of
 * the world communicator (plan.c) and of the communicators a strategy
 * splits off it (weft_plan_result.sub_comm_size, since ABI 1.5). */
#ifndef WEFT_PLAN_PLAN_COMM_H
#define WEFT_PLAN_PLAN_COMM_H

#include <stdint.h>

#include "plan/plan.h"
#include "weft/strategy.h"

/* gloo's shared-memory segment of one communicator of n > 1 ranks on one
 * host (plugins/comm/gloo, gloo_shm.cc): a 4 KiB header, a 128-byte
 * control line per rank rounded up to 4 KiB pages and a 1 MiB slot per
 * rank, counted under WEFT_MEM_COMM on every rank. 0 for n <= 1 (no
 * segment). */
int64_t plan_gloo_shm_bytes(int64_t n);

/* Adds to p->comm_backend_bytes the segments of the communicators the
 * strategy's answer r says it splits off the world, when the plan knows
 * the world's (p->comm_backend_bytes > 0: gloo over shared memory), and
 * says so in p->comm_backend. */
void plan_sub_comms(const weft_plan_result *r, weft_plan *p);

#endif /* WEFT_PLAN_PLAN_COMM_H */
