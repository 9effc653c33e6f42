/* weft/optim.h - the optimizer plugin ABI.
 *
 * An optimizer updates parameters from gradients over a contiguous range of
 * elements of the flat parameter buffer. The same call serves a whole
 * tensor, a whole model, or a ZeRO shard [begin, end) of the flat buffer:
 * the host passes the segments (one per parameter tensor, in global flat
 * coordinates) so per-tensor rules such as "no weight decay on biases"
 * still apply when a shard starts or ends in the middle of a tensor.
 *
 * Who decides what:
 * - The host owns the optimizer section keys `name`, `lr` and `no_decay`.
 *   It reads `lr` (the base learning rate, handed to the lr schedule), and
 *   decides per tensor whether weight decay applies (weft_optim_segment
 *   .decay): by default nanoGPT's rule (tensors of 2 or more dims decay;
 *   biases, norm weights and other vectors do not), or, when the section
 *   has `no_decay: [glob, ...]`, every tensor whose dotted name matches one
 *   of the globs is exempt and every other tensor decays. The plugin never
 *   re-decides: it applies weight_decay exactly where segment.decay != 0.
 * - The plugin reads every other key of the section (its hyper-parameters)
 *   through the host table's cfg_* calls, so a key nobody reads is reported
 *   by the config's strictness check as an unknown key with file:line:col.
 * - The learning rate of each step comes from the host's schedule, in
 *   weft_optim_step_info.lr; the plugin never reads `lr` itself.
 *
 * Optimizer state is `state_slots` fp32 values per element ("slots"), each
 * slot a flat array parallel to the parameters. The host allocates them
 * (sized to the range it steps, e.g. the shard), zero-fills them before the
 * first step, and saves and loads them in flat global coordinates, slot
 * after slot, so a checkpoint written by any sharding can be read by any
 * other (core/train/optim_state.h).
 *
 * Determinism contract: the new value of element i (parameter and slots)
 * depends only on that element's parameter, gradient and slot values, its
 * segment's flags and the step info. Hence stepping a range whole or in any
 * number of contiguous pieces gives bit-identical results; the built-in
 * plugins are compiled with -ffp-contract=off so that no vector/scalar
 * split changes the rounding.
 */
#ifndef WEFT_OPTIM_H
#define WEFT_OPTIM_H

#include <stddef.h>
#include <stdint.h>
#include "weft/status.h"
#include "weft/config.h"
#include "weft/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One parameter tensor, placed in the flat buffer. The layout of this
 * struct is fixed for ABI major 1 (it is passed as an array); information
 * added later goes into weft_optim_step_info. */
typedef struct weft_optim_segment {
	const char *name; /* dotted parameter name ("transformer.h.0.attn.c_attn.bias"); borrowed */
	int64_t offset;   /* global flat index of the tensor's first element */
	int64_t numel;    /* number of elements (> 0) */
	int32_t ndim;     /* number of dimensions of the tensor */
	int32_t decay;    /* nonzero: weight decay applies to this tensor (decided by the host) */
} weft_optim_segment;

/* Per-step information from the host. The host sets struct_size to the
 * sizeof it was built with; a plugin checks it before reading a member
 * appended after ABI 1.0. */
typedef struct weft_optim_step_info {
	uint32_t struct_size; /* sizeof(weft_optim_step_info) as the host saw it */
	uint32_t flags;       /* reserved for appended options; 0 */
	int64_t step;         /* 1-based number of this optimizer step (1 on the first) */
	double lr;            /* learning rate for this step, from the schedule; >= 0 */
	double grad_scale;    /* gradients are multiplied by this before use (gradient
			       * clipping or loss-scale removal fused into the step);
			       * 1.0 for none */
} weft_optim_step_info;

/* What an optimizer of the Adam family is, for a host that runs its update
 * as a fused device kernel instead of calling step() on host memory
 * (weft_optim_ops.adam_params). The update is exactly the one
 * plugins/optim/builtin/adam.c documents, element by element:
 *   g = g * grad_scale;  g = g + weight_decay * p   (decoupled 0, decay tensors)
 *   p = p * (1 - lr * weight_decay)                  (decoupled 1, decay tensors)
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g
 *   vmax = max(vmax, v), used for v                  (amsgrad)
 *   p = p - (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * with slots exp_avg, exp_avg_sq (and max_exp_avg_sq with amsgrad). */
typedef struct weft_optim_adam_params {
	uint32_t struct_size;  /* sizeof as the plugin saw it */
	int32_t decoupled;     /* 1: AdamW's decoupled decay; 0: Adam's L2 term */
	int32_t amsgrad;       /* 1: the max_exp_avg_sq slot is used */
	int32_t reserved;
	double beta1, beta2, eps, weight_decay;
} weft_optim_adam_params;

/* What an SGD optimizer is, for a host that runs its update as a device
 * kernel (weft_optim_ops.sgd_params; since ABI 1.3). The update is exactly
 * the one plugins/optim/builtin/sgd.c documents, element by element:
 *   d = g * grad_scale;  d = d + weight_decay * p   (decay tensors)
 *   b = d (step 1), else b = momentum b + (1 - dampening) d   (momentum != 0)
 *   d = nesterov ? d + momentum b : b                         (momentum != 0)
 *   p = p + (-lr) d
 * with one slot, momentum_buffer, when momentum != 0 (none otherwise). */
typedef struct weft_optim_sgd_params {
	uint32_t struct_size;  /* sizeof as the plugin saw it */
	int32_t nesterov;
	double momentum, dampening, weight_decay;
} weft_optim_sgd_params;

/* The optimizer vtable (kind WEFT_PLUGIN_OPTIM). head.name is the name the
 * config selects it by: `optimizer: {name: adamw}`. */
typedef struct weft_optim_ops {
	weft_plugin_head head;

	/* Creates an optimizer from the config's `optimizer` section (a
	 * mapping; NULL means every default). Reads the plugin's own keys
	 * through the host's cfg_* calls and checks their ranges; a bad value
	 * is WEFT_ERR_CONFIG set by host->cfg_error on the offending node, so
	 * the message starts with file:line:col. On success *state_out is a new
	 * object owned by the caller, freed with destroy. Does not block.
	 * Errors: WEFT_ERR_CONFIG (bad value), WEFT_ERR_NOMEM. */
	weft_status (*create)(const weft_cfg *section, void **state_out);

	/* Frees an object from create. NULL is ignored. */
	void (*destroy)(void *state);

	/* Number of fp32 state slots per element this optimizer needs (0 for
	 * plain SGD, 1 for SGD with momentum or Lion, 2 for Adam/AdamW, 3 with
	 * amsgrad). Constant for the life of the object. */
	size_t (*state_slots)(const void *state);

	/* Name of slot `slot` (< state_slots), as PyTorch names the state of
	 * the same optimizer ("momentum_buffer", "exp_avg", "exp_avg_sq",
	 * "max_exp_avg_sq"); used in checkpoints. Static storage; NULL when
	 * slot is out of range. */
	const char *(*slot_name)(const void *state, size_t slot);

	/* One optimizer step over the global flat elements [begin, end).
	 *
	 * params, grads and each slots[k] (k < state_slots) point at the
	 * element `begin`: index 0 is global element begin, and each array has
	 * end - begin floats. params and slots are updated in place; grads is
	 * read only (and multiplied by info->grad_scale as it is read). slots
	 * may be NULL when state_slots is 0.
	 *
	 * segs[0..nseg) are sorted by offset and do not overlap; they may
	 * describe the whole model (the plugin uses the ones that intersect
	 * [begin, end)). Elements of [begin, end) that no segment covers
	 * (padding of a shard) are left untouched.
	 *
	 * Slots are zero before step 1; optimizers whose first step differs
	 * (SGD momentum starts as the first gradient) key on info->step == 1.
	 *
	 * Never allocates and never blocks; the object is only read, so
	 * disjoint ranges may be stepped concurrently from several threads.
	 * Errors: WEFT_ERR_INVALID_ARG (begin > end, info->step < 1, a
	 * negative or non-finite lr, unsorted segments), with nothing updated. */
	weft_status (*step)(const void *state, const weft_optim_segment *segs, size_t nseg,
			    float *params, const float *grads, float *const *slots,
			    int64_t begin, int64_t end, const weft_optim_step_info *info);

	/* ---- since ABI 1.1: device optimizers; check WEFT_HAS_MEMBER(ops,
	 * weft_optim_ops, adam_params) first. ---- */

	/* (optional) Says whether this optimizer's update is exactly the Adam
	 * family's of weft_optim_adam_params (same rounding, same slots in
	 * the same order): returns 1 and fills *out (its struct_size set by
	 * the caller) when it is, 0 when it is not. A host may then run the
	 * update as a fused kernel on device memory (the CUDA strategies do,
	 * docs/cuda.md) instead of step(). Never blocks, never fails. NULL
	 * member: never fused; step() runs on host copies. */
	int (*adam_params)(const void *state, weft_optim_adam_params *out);

	/* ---- since ABI 1.3: SGD on the device; check WEFT_HAS_MEMBER(ops,
	 * weft_optim_ops, sgd_params) first. ---- */

	/* (optional) As adam_params, for SGD: returns 1 and fills *out (its
	 * struct_size set by the caller) when this optimizer's update is
	 * exactly weft_optim_sgd_params's (same rounding, same slot), 0 when
	 * not. Never blocks, never fails. NULL member: never on the device. */
	int (*sgd_params)(const void *state, weft_optim_sgd_params *out);
} weft_optim_ops;

/* struct_size of weft_optim_ops at ABI 1.0: the loader refuses a smaller
 * optimizer vtable. Members appended later lie beyond this size. */
#define WEFT_OPTIM_OPS_MIN_SIZE \
	((uint32_t)(offsetof(weft_optim_ops, step) + sizeof(((weft_optim_ops *)0)->step)))

#ifdef __cplusplus
}
#endif
#endif /* WEFT_OPTIM_H */
