/* strategy tp's internals shared by its files: the strategy's state and
 * the host table. tp.c reads the options, creates the strategy and hands
 * out its state (checkpoints); tp_setup.c builds the mesh's communicators
 * and the flat buffer's bookkeeping; tp_step.c runs a step's collectives. */
#ifndef WEFT_TP_IMPL_H
#define WEFT_TP_IMPL_H

#include "weft/strategy.h"
#include "tp_dev.h"
#include "tp_zero.h"

extern const weft_host *g_host; /* tp_host.c */

typedef struct tp_strategy {
	const weft_strategy_env *env;
	int32_t size, dp;           /* tp size, dp replicas */
	int32_t tp_rank, dp_rank;
	int sp;                     /* sequence parallel */
	int vocab;                  /* vocabulary parallel */
	int zero;                   /* dp_strategy zero_1 (and dp > 1) */
	tp_dpz z;                   /* its state, when zero */
	tp_dev dev;                 /* the kernel table every buffer is reached by */
	weft_comm *tp_comm, *dp_comm;
	float *params, *grads;      /* flat F32 on the device (borrowed) */
	int64_t numel;
	size_t n_slots;
	float *slot_mem;            /* n_slots x numel, WEFT_MEM_OPTIM, on the device */
	float *slots[TP_MAX_SLOTS];
	tp_mirror mirror;           /* the slots' host copy for checkpoints (off the CPU) */
	weft_optim_range *opt;      /* off the CPU: the step's ranges over [0, numel) */
	size_t n_opt;
	int64_t *partial;           /* [offset, count) pairs of the flat gradient that are
				     * partial: sequence-parallel parameters, shared parts */
	size_t n_partial;
	float *partial_buf;         /* their gradients packed, WEFT_MEM_COMM */
	int64_t partial_numel;
	weft_copy_range *pack, *unpack; /* gradients <-> partial_buf, n_partial each */
	weft_elem_range *sq[2];     /* per parameter, whole [0] and split [1] ones: its
				     * gradient (the clipping norm); zero_1: the pieces
				     * of the slice and (dp rank 0) the tail */
	size_t n_sq[2];
	int64_t *ranges;            /* this rank's flat buffer in the whole model's
				     * flat coordinates: sorted [begin, end) pairs */
	uint32_t n_ranges;
} tp_strategy;
/* weft/strategy.h, setup: prints the rank layout, finds the device, splits
 * the world into the tp and dp communicators, lays out the partial
 * gradients, the optimizer state, the flat buffer's global ranges and the
 * clipping norm's ranges, and broadcasts dp rank 0's parameters over dp
 * (tp_setup.c). */
weft_status tp_setup(void *p);

/* weft/strategy.h, train_step and eval_step (tp_step.c). */
weft_status tp_train_step(void *p, const weft_step_input *in, weft_step_report *out);
weft_status tp_eval_step(void *p, const weft_micro_batch *b, weft_eval_report *out);

#endif /* WEFT_TP_IMPL_H */
