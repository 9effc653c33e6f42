/* plan/plan.h - memory and communication per rank before launch.
 *
 * `weft plan` asks the strategy the config selects (through the plugin
 * registry, whatever plugin provides it) for its memory plan: the
 * strategy's optional memory_plan member (weft/strategy.h, since ABI 1.2),
 * called on a strategy made by create with a planning env (plan_env.c:
 * the world size to plan for, rank 0, no communication) and the model as
 * the trainer would build it for rank 0. The numbers are the strategy's
 * own: ZeRO's come from the layout code the zero plugin shards with, tp's
 * from the model's real shards, pp's from its stage partition. A strategy
 * without the member (built against ABI 1.0 or 1.1) gives no plan, and
 * weft plan says so. */
#ifndef WEFT_PLAN_PLAN_H
#define WEFT_PLAN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "weft/config.h"
#include "weft/memory.h"
#include "weft/module.h"
#include "weft/strategy.h"
#include "weft/tensor.h"

typedef struct weft_plan_opts {
	const char *strategy;             /* the name as the config gives it */
	const weft_cfg *section;          /* the trainer.strategy mapping, or NULL */
	const weft_cfg *node;             /* trainer.strategy itself (for errors), or NULL */
	int32_t world;                    /* ranks */
	size_t n_slots;                   /* optimizer state slots per element */
	int64_t n_micro;                  /* accumulate_grad_batches */
	const char *comm;                 /* the comm backend (trainer.comm; auto: gloo
					   * on cpu, nccl on cuda) */
	int comm_shm_off;                 /* gloo's option shm: off */
	int32_t nodes;                    /* trainer.num_nodes */
	weft_device device;               /* trainer.accelerator's device (cuda: cuda:0) */
	weft_dtype weight_copy;           /* the dtype of the 16-bit weight copy the run
					   * keeps for a strategy with whole parameters
					   * (trainer.precision, lowp_activations as the
					   * device takes them, weight_copy); F32: none */
} weft_plan_opts;

/* What the strategy answered (weft_plan_result), copied out of the plugin. */
typedef struct weft_plan {
	int32_t rank;                     /* the rank the bytes are for (the largest) */
	int64_t numel;                    /* F32 parameter elements (Psi) */
	int64_t bytes[WEFT_MEM_NUM_CATEGORIES]; /* params, grads, optim, comm: resident,
						  * without the working set */
	int64_t host_bytes[WEFT_MEM_NUM_CATEGORIES]; /* of bytes[], those in host
						       * memory on an accelerator
						       * (optimizer offload); 0 on
						       * the CPU */
	int64_t working_params, working_grads; /* transient gathered weights and
						 * gradient buckets (an estimate) */
	int64_t moved_elements;           /* per rank per step, gradients and parameters */
	int64_t collective_elements;      /* sum of each collective's whole count (the
					   * strategies' comm_elements, metrics excluded) */
	char layout[160];                 /* the strategy's line on its layout, or "" */
	char formula[64];                 /* a published formula for params + grads +
					   * optim, or "" */
	double formula_bytes;
	char comm_formula[96];            /* the same for communication, or "" */
	/* the comm backend's own buffers on each rank (not the strategy's,
	 * which are in bytes[WEFT_MEM_COMM]): gloo's shared-memory segment;
	 * 0 where the backend's are not known ahead (comm_backend says so) */
	int64_t comm_backend_bytes;
	char comm_backend[128];
	weft_plan_pipeline pipeline;      /* a pipeline's stages and schedule (pp 0: none) */
	int64_t setup_bytes;              /* the most held during the strategy's setup,
					   * comm backend excluded, when the strategy
					   * says (0: no more than the steps) */
	int64_t weight_copy_bytes;        /* of bytes[WEFT_MEM_PARAMS]: the 16-bit weight
					   * copy (2 bytes per F32 parameter; 0: none) */
} weft_plan;

/* Reads trainer.strategy (a name or a mapping), trainer.devices x
 * trainer.num_nodes (unless world > 0), trainer.accumulate_grad_batches,
 * trainer.comm (with gloo's shm option) and what decides the weight copy
 * (trainer.precision, lowp_activations, weight_copy) from a config root
 * into *o; borrowed from the config. n_slots is left to
 * the caller (the optimizer plugin knows it). Nothing is marked used.
 * Errors: WEFT_ERR_CONFIG at file:line:col for a mapping without a name or
 * a bad value. */
weft_status weft_plan_opts_from_config(const weft_cfg *root, int32_t world, weft_plan_opts *o);

/* How the trainer would build the model for rank 0 of o->world: asks the
 * strategy's build plan (its `plan` member), which may set mo's
 * tensor-parallel fields. Errors: those of weft_plan_compute's lookup, the
 * strategy's WEFT_ERR_CONFIG. */
weft_status weft_plan_model_options(const weft_plan_opts *o, weft_model_options *mo);

/* The same for rank `rank` of o->world (its pipeline stage, its tensor-
 * parallel shard). Errors: as above; WEFT_ERR_INVALID_ARG for a rank
 * outside [0, world). */
weft_status weft_plan_model_options_rank(const weft_plan_opts *o, int32_t rank,
					 weft_model_options *mo);

/* Asks the strategy for its plan over `ps` (the model as
 * weft_plan_model_options says to build it; gradients may be absent, no
 * data is read), and adds the 16-bit weight copy to the parameters' bytes
 * where the trainer would keep one (o->weight_copy, and a strategy with
 * whole parameters: weft_strategy_whole_params). Blocks on loading the
 * plugins. Errors:
 * WEFT_ERR_INVALID_ARG for a world size < 1; WEFT_ERR_CONFIG at
 * trainer.strategy for a strategy no plugin provides (listing the ones
 * found); WEFT_ERR_UNSUPPORTED for a strategy that gives no plan (built
 * before ABI 1.2, or with no memory_plan member), naming its file; the
 * strategy's create and memory_plan errors. */
weft_status weft_plan_compute(const weft_params *ps, const weft_plan_opts *o, weft_plan *out);

/* The dtype of the 16-bit weight copy o's run keeps (o->weight_copy when
 * the strategy keeps whole parameters), WEFT_F32 for none, in *dt.
 * Errors: the strategy lookup's, as weft_plan_compute's. */
weft_status weft_plan_weight_copy(const weft_plan_opts *o, weft_dtype *dt);

#endif
