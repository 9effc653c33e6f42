/* strategy tp, dp_strategy zero_1: ZeRO stage 1 over the data-parallel
 * replicas of one tensor-parallel shard (tp_zero.c).
 *
 * The D dp ranks holding the same tp shard (flat buffer of N elements)
 * split it in D equal slices of per = N / D elements (the first D * per)
 * and a tail of N - D * per < D elements every one of them keeps. After
 * backward the gradients are reduce-scattered (averaged) over dp, so each
 * rank holds the mean gradient of its slice (and the tail, all-reduced);
 * each steps the optimizer over its slice and the tail only, holding
 * optimizer state for per + tail elements; then the slices are
 * all-gathered back into every replica's parameters. Every buffer is
 * reached through the kernel table (tp_dev.h), on the CPU and on CUDA. */
#ifndef WEFT_TP_ZERO_H
#define WEFT_TP_ZERO_H

#include "weft/strategy.h"
#include "tp_dev.h"

typedef struct tp_dpz {
	const weft_host *host;
	const tp_dev *dev;           /* the strategy's (borrowed) */
	const weft_comm_ops *ops;
	weft_comm *dp;
	int32_t size, rank;          /* dp */
	int64_t numel, per, prefix;  /* N, N / D, D * per */
	int64_t begin, end;          /* this rank's slice of the flat buffer */
	size_t n_slots;
	float *slot_mem;             /* n_slots x (per + tail), WEFT_MEM_OPTIM, on the device */
	float *slots[TP_MAX_SLOTS];  /* at the slice */
	float *tail_slots[TP_MAX_SLOTS]; /* at the tail */
	tp_mirror mirror;            /* the slots' host copy for checkpoints (off the CPU) */
	weft_optim_range *opt;       /* off the CPU: the slice's and the tail's ranges */
	size_t n_opt;
	int64_t *ranges;             /* the slice and tail in whole-model coordinates */
	uint32_t n_ranges;
} tp_dpz;

/* Sizes the slices and allocates the state (zeroed) on dev's device.
 * tp_ranges: the flat buffer's runs in whole-model coordinates (sorted
 * pairs), mapped to this rank's for checkpoints. Errors: NOMEM. */
weft_status tp_dpz_setup(tp_dpz *z, const tp_dev *dev, const weft_comm_ops *ops,
			 weft_comm *dp, int32_t size, int32_t rank, int64_t numel, size_t n_slots,
			 const int64_t *tp_ranges, uint32_t n_tp_ranges);

/* Averages grads over dp: this rank's slice (reduce-scatter, in place)
 * and the tail (all-reduce). Adds what it sent to *bytes, *calls.
 * Collective over dp. */
weft_status tp_dpz_reduce(tp_dpz *z, float *grads, int64_t *bytes, int64_t *calls);

/* The optimizer over the slice and the tail (the plugin's step() on the
 * CPU, optim_step elsewhere). */
weft_status tp_dpz_step(tp_dpz *z, const weft_strategy_env *env, float *params,
			const float *grads, const weft_optim_step_info *info);

/* Every replica's parameters from the slices (all-gather, in place).
 * Collective over dp. */
weft_status tp_dpz_gather(tp_dpz *z, float *params, int64_t *bytes, int64_t *calls);

/* The slice and tail's state in whole-model coordinates (checkpoints);
 * off the CPU its slots are a host mirror (tp_dev_state). Errors: NOMEM,
 * the device's. */
weft_status tp_dpz_state(tp_dpz *z, weft_strategy_state *out);

/* Frees the state. */
void tp_dpz_free(tp_dpz *z);

#endif /* WEFT_TP_ZERO_H */
