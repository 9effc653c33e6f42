/* plan/plan.h - memory and communication per rank before launch.
 *
 * From the model's parameter list and the strategy's options, the bytes
 * each rank will hold per memory category (weft/memory.h) and the elements
 * it will move per optimizer step, for single, dp, ddp and the ZeRO stages,
 * at any world size. ZeRO's layout is computed as the zero plugin lays it
 * out (plugins/strategies/zero/zero.h: units of whole parameters, each
 * split into N equal chunks), so the shard sizes are exact; the transient
 * buckets and gathered weights are an estimate, kept apart. Communication
 * counts what ring algorithms send per rank: an all-reduce of c elements
 * 2c(N-1)/N, a reduce-scatter or all-gather of N chunks of c: (N-1)c. */
#ifndef WEFT_PLAN_PLAN_H
#define WEFT_PLAN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "weft/config.h"
#include "weft/memory.h"
#include "weft/tensor.h"

typedef enum weft_plan_kind {
	WEFT_PLAN_REPLICATED = 0, /* single, dp, ddp */
	WEFT_PLAN_ZERO = 1
} weft_plan_kind;

typedef struct weft_plan_opts {
	const char *strategy;             /* the name as the config gives it */
	weft_plan_kind kind;
	int stage;                        /* ZeRO stage 1..3 */
	int64_t reduce_bucket_size;       /* DeepSpeed's names and defaults */
	int64_t allgather_bucket_size;
	int64_t prefetch_bucket_size;
	int64_t persistence_threshold;
	int32_t world;                    /* ranks */
	size_t n_slots;                   /* optimizer state slots per element */
	int64_t n_micro;                  /* accumulate_grad_batches */
} weft_plan_opts;

typedef struct weft_plan {
	int64_t numel;                    /* F32 parameter elements (Psi) */
	int64_t shard_numel;              /* ZeRO: the largest rank's shard */
	int64_t n_units, max_chunk;       /* ZeRO's units */
	int64_t bytes[WEFT_MEM_NUM_CATEGORIES]; /* params, grads, optim, comm: resident,
						  * without the working set */
	int64_t working_params, working_grads; /* ZeRO 2/3 buckets and gathered weights
						 * (an estimate) */
	int64_t moved_elements;           /* per rank per step, gradients and parameters */
	int64_t collective_elements;      /* sum of each collective's whole count (the
					   * strategies' comm_elements, metrics excluded) */
} weft_plan;

/* Reads trainer.strategy (a name or a mapping, with a DeepSpeed-style
 * zero_optimization block), trainer.devices x trainer.num_nodes (unless
 * world > 0) and trainer.accumulate_grad_batches from a config root into
 * *o. n_slots is left to the caller (the optimizer plugin knows it).
 * Nothing is marked used. Errors: WEFT_ERR_CONFIG naming the key and
 * file:line:col for a strategy the planner does not know or a bad value. */
weft_status weft_plan_opts_from_config(const weft_cfg *root, int32_t world, weft_plan_opts *o);

/* Computes the plan for the F32 parameters of `ps` (from their names,
 * shapes and flat offsets; no data is read). Errors: WEFT_ERR_INVALID_ARG
 * for a world size < 1 or a ZeRO stage outside 1..3. */
weft_status weft_plan_compute(const weft_params *ps, const weft_plan_opts *o, weft_plan *out);

#endif
