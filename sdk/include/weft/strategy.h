/* weft/strategy.h - the parallel-strategy plugin ABI.
 *
 * One step, as every built-in strategy writes train_step (the helpers are
 * header-only, in weft/step.h):
 *     weft_step_clock_start(&clk)                 the step's clock (a timeline:
 *                                                 weft_step_clock_events)
 *     rows = weft_step_rows(in->micro, in->n_micro)
 *     weft_step_accumulate(&acc, in->micro, in->n_micro, rows, &loss_sum)
 *         zero grads; each micro-batch: ctx_step_begin, forward_backward
 *         with loss_scale rows_b / rows; loss_sum += loss * rows_b
 *     gradients made global (all-reduce, reduce-scatter; hooks may start it)
 *     loss_sum and rows summed over the ranks: out->loss = sum / rows
 *     env->grads_check (16-mixed), clipping, the optimizer on this rank's part
 *     parameters made current everywhere (all-gather, broadcast)
 *     weft_step_clock_finish(&clk, out)           compute_ns, events
 *
 * A strategy decides where parameters, gradients and optimizer state live
 * (replicated, sharded, split by tensor or by stage) and runs one optimizer
 * step's worth of micro-batches: forward, backward, the collectives, and the
 * optimizer over whatever slice of the parameters this rank owns. The
 * trainer (core/train) owns the model, the data and the schedule; it hands
 * the strategy a weft_strategy_env at create time and one weft_step_input
 * per optimizer step.
 *
 * Lifecycle, all on the trainer's thread:
 *     create(section, env)   parse own options (strict), nothing allocated
 *                            that depends on other ranks
 *     setup()                place/shard, allocate buffers and optimizer
 *                            state, broadcast initial parameters, register
 *                            autograd hooks
 *     train_step() ...       one optimizer step each
 *     eval_step() ...        forward only, metrics
 *     state()                where the optimizer state lives, for checkpoints
 *     destroy()
 *
 * A strategy reaches the core only through the host services table
 * (weft/plugin.h) and the callbacks in weft_strategy_env; the comm backend
 * and optimizer are plugins whose vtables the env hands over.
 */
#ifndef WEFT_STRATEGY_H
#define WEFT_STRATEGY_H

#include <stddef.h>
#include <stdint.h>
#include "weft/status.h"
#include "weft/config.h"
#include "weft/plugin.h"
#include "weft/tensor.h"
#include "weft/autograd.h"
#include "weft/comm.h"
#include "weft/optim.h"
#include "weft/module.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One micro-batch of this rank. */
typedef struct weft_micro_batch {
	weft_batch data;       /* inputs and targets (weft/module.h) */
	int64_t rows;          /* dim-0 rows (samples) in this micro-batch */
	int64_t row_offset;    /* index of its first row in the global batch of
				* this micro-step, for the dropout RNG */
} weft_micro_batch;

/* weft_step_input.flags (since ABI 1.6; 0 before, when the member was
 * `reserved`). Values are part of the ABI. */
enum {
	/* The trainer does not use this step's loss (it keeps each micro-batch's
	 * on the device until a logging step: docs/design.md, "The step's data
	 * flow"): forward_backward gives NAN for *loss, weft_step_report.loss
	 * is ignored, and the strategy may skip reducing the loss over the
	 * ranks (ddp does: no host wait in the step). */
	WEFT_STEP_LOSS_DEFERRED = 1u << 0
};

/* What the trainer gives a strategy for one optimizer step. */
typedef struct weft_step_input {
	uint32_t struct_size;
	uint32_t flags;                  /* WEFT_STEP_* (since ABI 1.6) */
	const weft_micro_batch *micro;   /* this rank's micro-batches */
	size_t n_micro;            /* >= 1: trainer.accumulate_grad_batches */
	weft_optim_step_info optim; /* step number and lr from the schedule */
} weft_step_input;

/* One interval of a rank's step timeline (weft_step_report.events): what
 * ran, on which track, from t0_ns to t1_ns on this process's
 * CLOCK_MONOTONIC, and the CPU time of the thread that ran it (what the
 * interval cost, apart from time other processes took the cores; kernel
 * worker threads are not counted). Intervals of one track do not overlap. */
typedef struct weft_step_event {
	int32_t track;      /* WEFT_TRACK_* */
	int32_t kind;       /* WEFT_EVENT_* */
	int32_t micro;      /* micro-batch index in the step, or -1 */
	int32_t stage;      /* pipeline stage, or -1 */
	int64_t t0_ns, t1_ns;
	int64_t cpu_ns;     /* CLOCK_THREAD_CPUTIME_ID over the interval; < 0: not measured */
} weft_step_event;

/* Tracks of the timeline. Values are part of the ABI. */
enum { WEFT_TRACK_COMPUTE = 0, WEFT_TRACK_COMM = 1 };

/* Kinds of events. Values are part of the ABI: only ever appended. */
enum {
	WEFT_EVENT_STEP = 0,       /* a whole train_step (strategies giving no events) */
	WEFT_EVENT_FORWARD = 1,
	WEFT_EVENT_BACKWARD = 2,
	WEFT_EVENT_SEND_ACT = 3,   /* posting an activation to the next stage */
	WEFT_EVENT_RECV_ACT = 4,   /* waiting for one from the previous stage */
	WEFT_EVENT_SEND_GRAD = 5,
	WEFT_EVENT_RECV_GRAD = 6,
	WEFT_EVENT_OPTIMIZER = 7,
	WEFT_EVENT_SYNC = 8,       /* step-end collectives (tied weights, loss, grads) */
	WEFT_EVENT_KIND_COUNT = 9
};

/* What a strategy reports for one step. The trainer zero-fills it and sets
 * struct_size; the strategy fills what it measured. */
typedef struct weft_step_report {
	uint32_t struct_size;
	int32_t skipped;            /* 1: the optimizer step was skipped */
	double loss;                /* mean loss over the GLOBAL batch (all ranks);
				     * ignored with WEFT_STEP_LOSS_DEFERRED */
	double grad_norm;           /* global L2 norm before clipping; < 0 when not computed */
	int64_t compute_ns;         /* forward + backward + optimizer */
	int64_t comm_ns;            /* time collectives were in flight */
	int64_t exposed_comm_ns;    /* time the step waited on collectives */
	int64_t comm_bytes;         /* bytes this rank contributed to collectives */
	int64_t comm_elements;      /* elements this rank contributed to collectives */
	/* ---- since ABI 1.0: the split of the step's communication ---- */
	int64_t metric_comm_bytes;  /* of comm_bytes: metric reductions (the global loss
				     * and row count); comm_bytes - metric_comm_bytes is
				     * gradient (and parameter) traffic */
	int64_t comm_calls;         /* collectives this rank issued in the step */
	/* ---- since ABI 1.1: transient buffers ---- */
	int64_t working_set_bytes;  /* bytes of the strategy's transient parameter and
				     * gradient buffers (ZeRO-3's gathered weights, ZeRO-2/3
				     * gradient buckets) held at the step's peak; 0 for
				     * strategies that keep none */
	/* ---- since ABI 1.1: pipeline bubble ---- */
	double bubble_fraction;     /* pipeline strategies: the share of this rank's
				     * pipeline time (first to last forward/backward of
				     * the step) spent not computing; 0 otherwise */
	/* ---- since ABI 1.1: the step's timeline; check struct_size (offsetof) before
	 * writing. The step's intervals on this rank, borrowed until the next
	 * train_step; NULL: the strategy records none (the trainer then
	 * records the whole step as one compute interval). */
	const weft_step_event *events;
	size_t n_events;
	/* ---- since ABI 1.7: check struct_size (offsetof) before writing ---- */
	int32_t copy_refreshed;     /* 1: the step wrote every element of
				     * env->params_copy from the new parameters (so the
				     * trainer does not round them again); 0: it did not */
	int32_t reserved;
} weft_step_report;

/* What eval_step returns: sums over this call's batch on ALL ranks. */
typedef struct weft_eval_report {
	uint32_t struct_size;
	uint32_t reserved;
	double loss_sum;     /* sum over rows of the per-row mean loss */
	int64_t rows;        /* rows evaluated */
	int64_t correct;     /* classifier: rows whose arg-max was right; else 0 */
	int64_t counted;     /* classifier: rows counted for accuracy; else 0 */
} weft_eval_report;

/* Where this rank's optimizer state lives, for checkpoints: slots[k] holds
 * global flat elements [begin, end) of slot k (weft/optim.h). A replicated
 * strategy owns [0, numel). Borrowed; valid until the next train_step. */
typedef struct weft_strategy_state {
	uint32_t struct_size;
	uint32_t n_slots;
	int64_t begin, end;
	float *const *slots;
	/* ---- since ABI 1.1: a shard made of several ranges. A reader
	 * checks struct_size (offsetof) first; absent or n_ranges == 0 means
	 * the one range [begin, end). Otherwise this rank's state covers the
	 * sorted, disjoint global ranges [ranges[2i], ranges[2i + 1]) for
	 * i < n_ranges, stored one after another in each slot: element
	 * ranges[2i] of slot k is slots[k][sum of the lengths of ranges
	 * 0 .. i-1]; begin and end then span all of them. */
	uint32_t n_ranges;
	uint32_t reserved;
	const int64_t *ranges;
} weft_strategy_state;

/* The trainer's side, given to create and valid until destroy. */
typedef struct weft_strategy_env {
	uint32_t struct_size;
	int32_t rank, world_size;       /* of the whole job */
	int32_t local_rank, local_world_size;
	weft_device device;
	int64_t comm_timeout_ms;

	const weft_comm_ops *comm_ops;  /* NULL in a one-process run */
	weft_comm *world;               /* the world communicator, or NULL */

	weft_ctx *ctx;                  /* where ops run; hooks register here */
	weft_params *params;            /* the model's parameters (flat, F32 master) */

	const weft_optim_ops *optim_ops;
	void *optim;                    /* from optim_ops->create; owned by the trainer */
	const weft_optim_segment *segs; /* one per parameter, global flat F32 coords */
	size_t nseg;

	double gradient_clip_val;       /* clip the global grad norm to this; 0: off */

	/* Runs forward of one micro-batch on ctx (grad on, training mode),
	 * multiplies the loss by loss_scale and back-propagates it; hooks
	 * fire during the backward. *loss receives the unscaled mean loss of
	 * the micro-batch (NAN on a step with WEFT_STEP_LOSS_DEFERRED: the
	 * loss stays on the device). The strategy calls weft_ctx_step_begin (through the
	 * host) between steps as it needs; this callback does not. */
	weft_status (*forward_backward)(void *trainer, const weft_micro_batch *b, double loss_scale,
					double *loss);
	/* Forward only (grad off, eval mode): adds the micro-batch's results
	 * into *rep (this rank only). */
	weft_status (*evaluate)(void *trainer, const weft_micro_batch *b, weft_eval_report *rep);
	void *trainer;

	/* ---- since ABI 1.0: model replicas for one-process, several-device
	 * strategies. A trainer that cannot make replicas leaves them NULL
	 * (check struct_size with offsetof); dp then refuses to run. ----
	 *
	 * Makes replica `index` (>= 1; the trainer's own model is replica 0)
	 * of the model on `device`: its own parameters with gradients (same
	 * names, shapes and flat layout as env->params; values unspecified,
	 * the strategy copies them) and its own context, on which only the
	 * thread the strategy chooses runs ops. *replica is an opaque handle
	 * for replica_forward_backward, freed with replica_free; *params and
	 * *ctx are borrowed until then. Blocking. Errors: NOMEM, the model's
	 * and the device's. */
	weft_status (*replica_create)(void *trainer, int32_t index, weft_device device,
				      void **replica, weft_params **params, weft_ctx **ctx);
	/* As forward_backward, on a replica's model and context; replica NULL
	 * means the trainer's own model on env->ctx. Called concurrently for
	 * different replicas from different threads; never for one replica
	 * from two threads at once. */
	weft_status (*replica_forward_backward)(void *trainer, void *replica,
						const weft_micro_batch *b, double loss_scale,
						double *loss);
	/* Frees a replica from replica_create. NULL is ignored. */
	void (*replica_free)(void *trainer, void *replica);
	int32_t n_devices;              /* dp: devices to spread over (trainer.devices) */
	int32_t reserved2;

	/* ---- since ABI 1.1: pipeline stages of a GPT (weft/module.h,
	 * "Pipeline stages"). A trainer that cannot build stages leaves them
	 * NULL (check struct_size with offsetof); pp then refuses to run. ----
	 *
	 * Builds one stage of the trainer's model: GPT blocks [layer_begin,
	 * layer_end) and the parts `parts` names (WEFT_STAGE_BLOCKS always,
	 * WEFT_STAGE_EMBED, WEFT_STAGE_HEAD), on env->device, with gradients. Parameter values
	 * are unspecified: the strategy copies them from env->params by name.
	 * *stage is an opaque handle for stage_forward and stage_free; *params
	 * is borrowed until stage_free. Blocking. Errors: WEFT_ERR_UNSUPPORTED
	 * when the model is not a GPT (naming its class); those of
	 * weft_model_create_gpt; NOMEM. */
	weft_status (*stage_create)(void *trainer, uint32_t parts, int64_t layer_begin,
				    int64_t layer_end, void **stage, weft_params **params);
	/* Runs micro-batch b through a stage on `ctx` (a context the strategy
	 * made with host->ctx_create on env->device). x is the hidden state
	 * (rows, T, n_embd) the previous stage sent, or NULL on the EMBED stage
	 * (b's inputs are used). train = 1: grad and training mode on, the
	 * dropout row offset b->row_offset; train = 0: both off. A stage
	 * without HEAD gives its hidden state in *out. A HEAD stage gives in
	 * *out its mean loss times loss_scale (recorded when training, so
	 * backward from it trains), the unscaled loss in *loss, and when not
	 * training adds the batch's results to *rep (as `evaluate` does; rep
	 * may be NULL when training). *out is borrowed from ctx's arena until
	 * its next step_begin. Errors: those of weft_model_forward and
	 * weft_model_loss. */
	weft_status (*stage_forward)(void *trainer, void *stage, weft_ctx *ctx,
				     const weft_micro_batch *b, weft_tensor *x, int train,
				     double loss_scale, weft_tensor **out, double *loss,
				     weft_eval_report *rep);
	/* Frees a stage from stage_create. NULL is ignored. */
	void (*stage_free)(void *trainer, void *stage);

	/* ---- since ABI 1.1: 16-mixed's dynamic loss scaling. NULL
	 * when the run scales no loss; check struct_size (offsetof) first. ----
	 *
	 * The step's loss was multiplied by the loss scale and
	 * weft_step_input.optim.grad_scale divides it out again. A strategy
	 * calls this once per train_step on EVERY rank (it is collective over
	 * the world communicator), after this rank's gradients are final
	 * (reduced, or reduce-scattered into its shard) and before clipping
	 * and the optimizer, with the n F32 arrays (lens[i] elements each) its
	 * optimizer step will read. *skip is set to 1 on every rank when any
	 * rank's arrays hold an inf or a NaN (the scale overflowed): the
	 * strategy then leaves the parameters and the optimizer state as they
	 * are, does whatever else keeps its ranks consistent, and reports
	 * weft_step_report.skipped = 1. A strategy that runs no optimizer on a
	 * rank still calls it (n = 0). The trainer refuses a 16-mixed step in
	 * which the strategy did not call it. Blocking. Errors: comm errors. */
	weft_status (*grads_check)(void *trainer, const float *const *arrays, const int64_t *lens,
				   size_t n, int *skip);

	/* ---- since ABI 1.7: the 16-bit weight copy; check struct_size
	 * (offsetof) first. ----
	 *
	 * params_copy: the 16-bit copy of env->params' flat F32 buffer
	 * (weft_params_copy_enable: same element order, params_copy_dtype
	 * BF16 or F16, on env->device) that the forward's products read, or
	 * NULL when the run keeps none. The trainer keeps it only for
	 * strategies without gather_params and plan (whole parameters in
	 * env->params at all times: single, dp, ddp), and rounds all of
	 * env->params into it after every train_step unless the step reports
	 * weft_step_report.copy_refreshed. A strategy whose optimizer kernel
	 * writes the new parameters also writes them here, rounded to nearest
	 * even, in the same pass (every element of the flat buffer) and says
	 * so; any other strategy ignores it. */
	void *params_copy;
	int32_t params_copy_dtype;      /* weft_dtype; WEFT_F32 when params_copy is NULL */
	int32_t reserved3;
} weft_strategy_env;

/* ---- since ABI 1.2: what `weft plan` asks a strategy (memory_plan) ---- */

/* One parameter of the model as rank 0 would hold it, in flat order. */
typedef struct weft_plan_param {
	const char *name;       /* "transformer.h.0.attn.c_attn.weight" */
	int32_t dtype;          /* weft_dtype */
	int32_t split;          /* tensor parallel: 0 whole on every rank, 1 rows,
				 * 2 columns, 3 rows of packed q|k|v (as
				 * host->tp_param_split) */
	int64_t numel;          /* elements this rank holds */
	int64_t full_numel;     /* elements when whole (numel unless split) */
} weft_plan_param;

/* The question: the model and what the strategy cannot read from its
 * options. Borrowed for the call. */
typedef struct weft_plan_query {
	uint32_t struct_size;
	int32_t world_size;     /* ranks to plan for (also env->world_size; strategy
				 * dp: the devices it drives) */
	size_t n_slots;         /* the optimizer's state slots per element (F32) */
	int64_t n_micro;        /* micro-batches per optimizer step (>= 1) */
	size_t n_params;
	const weft_plan_param *params; /* env->params as a list, flat order */
	/* ---- since ABI 1.5 ---- */
	weft_device device;     /* where the run's parameters will live
				 * (trainer.accelerator; the env's device is the
				 * CPU while planning); absent (struct_size) means
				 * the CPU */
} weft_plan_query;

/* Since ABI 1.5: how a pipeline strategy holds activations, for the
 * activation term of `weft plan` (which runs the stages' trial steps
 * itself): n_stages stages, stage s holding blocks [stage_bounds[s],
 * stage_bounds[s + 1]) (stage 0 also the embedding, the last the head);
 * pipeline rank r runs stages r, r + pp, ... (virtual_stages of them)
 * with `schedule` (a weft_pp_kind of weft/pp_schedule.h) over the step's
 * micro-batches, each forward and backward of a micro-batch's stage in a
 * context (activation arena) of its own, made with arena_bytes and
 * tape_bytes and reused once that micro-batch's backward is done.
 * World rank of pipeline rank r (dp and tp index 0): r * rank_stride. */
#define WEFT_PLAN_MAX_STAGES 256
typedef struct weft_plan_pipeline {
	int32_t pp;             /* pipeline ranks; 0: not a pipeline (every rank runs
				 * its model on the trainer's context) */
	int32_t virtual_stages; /* chunks per pipeline rank */
	int32_t schedule;       /* weft_pp_kind */
	int32_t n_stages;       /* pp * virtual_stages, <= WEFT_PLAN_MAX_STAGES */
	int32_t rank_stride;    /* world ranks between pipeline ranks (dp * tp) */
	int32_t reserved;
	int64_t arena_bytes;    /* a stage context's first arena block (0: the default) */
	int64_t tape_bytes;     /* its tape arena's (0: the default) */
	int64_t stage_bounds[WEFT_PLAN_MAX_STAGES + 1];
} weft_plan_pipeline;

/* The answer, per rank (the one holding the most; other ranks hold at most
 * as much). The caller zero-fills it and sets struct_size. */
typedef struct weft_plan_result {
	uint32_t struct_size;
	int32_t rank;           /* the rank the bytes are for */
	int64_t numel;          /* F32 parameter elements of the whole model (Psi) */
	int64_t bytes[WEFT_MEM_NUM_CATEGORIES]; /* resident bytes per category
						  * (weft/memory.h), without the
						  * working set */
	int64_t working_params; /* transient gathered parameters at the peak (an
				 * estimate; 0 when none) */
	int64_t working_grads;  /* transient gradient buckets at the peak (an estimate) */
	int64_t collective_elements; /* per optimizer step: the sum of each
				      * collective's whole element count (what
				      * weft_step_report.comm_elements counts,
				      * metric reductions and activations
				      * excluded) */
	int64_t moved_elements; /* per optimizer step: elements this rank sends
				 * (ring algorithms: an all-reduce of c 2c(N-1)/N,
				 * a reduce-scatter or all-gather of N chunks of c
				 * (N-1)c); pipeline activations excluded */
	char layout[160];       /* (optional) one line on the layout, "ZeRO stage
				 * 3, 12 units, largest chunk 4096"; "" for none */
	char formula[64];       /* (optional) a published formula for params +
				 * grads + optim ("ZeRO paper, fp32 Adam: 16Psi/N"),
				 * its value in formula_bytes; "" for none */
	double formula_bytes;
	char comm_formula[96];  /* (optional) the same for the communication,
				 * written out ("ring all-reduce: 2Psi(N-1)/N = 42") */
	/* ---- since ABI 1.5 ---- */
	weft_plan_pipeline pipeline; /* (optional) a pipeline's stages and schedule;
				      * pp 0 (as zeroed) for other strategies */
	int32_t n_sub_comms;    /* (optional) communicators the strategy splits off
				 * the world on out->rank (host->comm_split), at most
				 * 8; the plan adds the comm backend's own buffers of
				 * each to the world's */
	int32_t sub_comm_size[8]; /* their sizes (ranks) */
	int64_t host_bytes[WEFT_MEM_NUM_CATEGORIES]; /* (optional) of bytes[], those
						       * in host memory while the
						       * parameters live on another
						       * device (optimizer offload);
						       * the rest is the device's.
						       * All 0 on the CPU */
	int64_t setup_bytes;    /* (optional) since ABI 1.5: the most out->rank holds
				 * during setup, before the first step (the whole
				 * parameters beside the shard being taken from
				 * them, say), comm backend excluded; the plan's
				 * total is the larger of this and the steps'.
				 * 0: setup holds no more than the steps */
} weft_plan_result;

/* The strategy vtable (kind WEFT_PLUGIN_STRATEGY). head.name is what
 * `trainer.strategy` selects ("ddp"; a mapping's `name:`). */
typedef struct weft_strategy_ops {
	weft_plugin_head head;

	/* Parses the strategy's own options from `section` (the
	 * trainer.strategy mapping, or NULL when it was given as a plain
	 * string) through the host's cfg_* calls, range errors at file:line:col
	 * via host->cfg_error; checks the env (world size, device) fits.
	 * *out receives a new object, freed with destroy. Does not block and
	 * does not communicate. Errors: WEFT_ERR_CONFIG, WEFT_ERR_UNSUPPORTED
	 * (a device or world size it cannot serve, saying which), NOMEM. */
	weft_status (*create)(const weft_cfg *section, const weft_strategy_env *env, void **out);

	/* Places parameters, allocates gradient buffers and optimizer state
	 * (zeroed, counted under WEFT_MEM_OPTIM), makes every rank start from
	 * rank 0's parameters, registers its hooks. Collective: every rank
	 * calls it. Errors: comm errors, NOMEM. */
	weft_status (*setup)(void *s);

	/* One optimizer step over in->n_micro micro-batches: gradients of the
	 * global batch (mean over all ranks' rows), optional clipping to
	 * env->gradient_clip_val, the optimizer over this rank's slice, and
	 * whatever makes every rank's parameters current again. Collective.
	 * Errors: comm errors (naming the peer when known), a callback's. */
	weft_status (*train_step)(void *s, const weft_step_input *in, weft_step_report *out);

	/* Evaluates one batch (this rank's share); fills *out with sums over
	 * every rank. Collective. */
	weft_status (*eval_step)(void *s, const weft_micro_batch *b, weft_eval_report *out);

	/* Where this rank's optimizer state lives (for checkpoints). */
	weft_status (*state)(void *s, weft_strategy_state *out);

	/* Frees everything setup made, unregisters hooks. NULL ignored. */
	void (*destroy)(void *s);

	/* ---- since ABI 1.1: whole parameters on demand ---- */

	/* (optional) Makes the parameters whole or shards them again, for
	 * callers that read or write every parameter through env->params
	 * (saving or loading model.safetensors, copying weights out).
	 * gather = 1: every rank's parameter tensors (and the F32 flat buffer)
	 * hold the full current values, in memory the model owns until the
	 * matching gather = 0. gather = 0: the strategy takes its shards from
	 * the parameters' current values (so weights loaded while gathered
	 * become the training state) and releases the full buffer. Calls pair
	 * up and do not nest. Collective: every rank calls it. Errors: comm
	 * errors, NOMEM. NULL member: parameters are always whole (replicated
	 * strategies); callers then skip the calls. */
	weft_status (*gather_params)(void *s, int gather);

	/* ---- since ABI 1.1: what the trainer builds ---- */

	/* (optional) What the strategy needs built: called by the trainer
	 * before it builds the model and the data loaders, with the strategy's
	 * section (NULL when given as a plain string) and the job's rank and
	 * world size. May set the tensor-parallel fields of *mo (tp_size,
	 * tp_rank, tp_flags: the model is then built as this rank's shards),
	 * no_grads (1: the model gets no gradient buffers, for a strategy
	 * whose own copies of the parameters hold them, as pp's stages do,
	 * or that keeps gradients in its own buckets and shards, as zero_2
	 * and zero_3 do: their setup gives the parameters gradient tensors
	 * without data; the parameters' grad is NULL until then)
	 * and *data_rank / *data_world, preset to rank and world_size: the
	 * rank and number of ranks the distributed sampler splits the data
	 * over (the ranks of one tensor-parallel group read the same rows).
	 * Reads its options as create does; does not block or communicate.
	 * Errors: WEFT_ERR_CONFIG at the option's file:line:col. NULL member:
	 * the whole model, data over every rank. */
	weft_status (*plan)(const weft_cfg *section, int32_t rank, int32_t world_size,
			    weft_model_options *mo, int32_t *data_rank, int32_t *data_world);

	/* ---- since ABI 1.2: the memory plan (`weft plan`) ---- */

	/* (optional) What each rank will hold and move, before anything runs.
	 * Called on a strategy fresh from create(section, env) with a planning
	 * env, without setup(): env->world_size is the world to plan for,
	 * env->rank 0, env->device the CPU, env->params the model as the
	 * trainer would build it for rank 0 (after this vtable's `plan`
	 * member; its gradients may be absent, its values are not read; q
	 * lists its parameters), env->comm_ops / world a communicator
	 * that fails every call with WEFT_ERR_UNSUPPORTED, the stage and
	 * replica callbacks likewise, env->ctx and env->optim NULL. Must not
	 * communicate or allocate anything in proportion to the model beyond
	 * its own bookkeeping. Fills *out (zeroed by the caller, struct_size
	 * set) for q's world: bytes per memory category on the rank that
	 * holds the most (out->rank), the transient working set apart, and
	 * the elements of one optimizer step's collectives. Does not block.
	 * Errors: WEFT_ERR_UNSUPPORTED (a model it cannot plan for, saying
	 * why), WEFT_ERR_NOMEM. NULL or absent member (a strategy built
	 * against ABI 1.0 or 1.1): `weft plan` says the strategy gives no plan. */
	weft_status (*memory_plan)(void *s, const weft_plan_query *q,
				   weft_plan_result *out);

	/* ---- since ABI 1.4: whole parameters a few at a time ---- */

	/* (optional) Calls fn(user, i, p) for every parameter index i of
	 * env->params in order, on every rank, with p's data holding the
	 * parameter's full current values (on the model's device, valid during
	 * the call only), making no more than the strategy's working set whole
	 * at once: for callers that read each parameter once (saving
	 * model.safetensors), where gather_params would hold the whole model.
	 * fn must not communicate; an error from it stops the visit on that
	 * rank only, so a caller that writes on one rank records its error and
	 * returns WEFT_OK. Not between gather_params(1) and (0). Collective:
	 * every rank calls it. Errors: comm errors, NOMEM, fn's. NULL or absent
	 * member: callers use gather_params. */
	weft_status (*params_visit)(void *s,
				    weft_status (*fn)(void *user, size_t index, const weft_tensor *p),
				    void *user);
} weft_strategy_ops;

/* Since ABI 1.7: whether a strategy keeps the whole parameters in
 * env->params' flat buffer at all times, the model's own forward reading
 * them: it has neither gather_params (no shards to gather) nor plan (no
 * tensor-parallel shards, no pipeline stages of its own). The trainer
 * keeps the 16-bit weight copy (weft_strategy_env.params_copy) only for
 * these (single, dp, ddp among the built-in ones). */
static inline int weft_strategy_whole_params(const weft_strategy_ops *ops)
{
	int gathers = WEFT_HAS_MEMBER(ops, weft_strategy_ops, gather_params) && ops->gather_params;
	int plans = WEFT_HAS_MEMBER(ops, weft_strategy_ops, plan) && ops->plan;

	return !gathers && !plans;
}

/* struct_size of weft_strategy_ops at ABI 1.0: the loader refuses a
 * smaller strategy vtable. */
#define WEFT_STRATEGY_OPS_MIN_SIZE \
	((uint32_t)(offsetof(weft_strategy_ops, destroy) + sizeof(((weft_strategy_ops *)0)->destroy)))

#ifdef __cplusplus
}
#endif
#endif /* WEFT_STRATEGY_H */
