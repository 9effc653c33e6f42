/* The ZeRO strategies (stages 1, 2 and 3), shared between the files of
 * this plugin.
 *
 * Layout. The F32 flat parameter buffer is cut into units: contiguous
 * ranges of whole parameters (buckets of reduce_bucket_size elements for
 * stages 1 and 2; for stage 3 one unit per module, i.e. per run of
 * parameters sharing a dotted prefix, so a module's weights are gathered
 * together). Unit k of L elements is split evenly over the N ranks, FSDP
 * style: chunk c = ceil(L / N), rank r owns [lo + r c, min(lo + (r+1) c,
 * hi)). A collective over a unit works on a padded buffer of N c elements
 * (reduce-scatter in place, all-gather in place), so every rank moves
 * (N - 1) c elements per collective: over all units (N - 1) / N of the
 * model, as the ZeRO paper counts. This rank's shard is the concatenation
 * of its pieces ("packed" arrays): optimizer slots (all stages), gradients
 * (stages 2, 3), parameters (stage 3). */
#ifndef WEFT_STRATEGY_ZERO_H
#define WEFT_STRATEGY_ZERO_H

#include <stdint.h>

#include "weft/step.h"

extern const weft_host *g_host; /* host.c */

#define ZERO_MAX_SLOTS 8
#define ZERO_MAX_DEPTH 64

/* DeepSpeed's defaults of the size options, in elements: the most a
 * default may be (zero_auto_sizes sizes an option left out to the model,
 * up to these). */
#define ZERO_DEF_BUCKET 500000000
#define ZERO_DEF_PREFETCH 50000000
#define ZERO_DEF_PERSIST 100000
#define ZERO_DEF_LIVE 1000000000

/* Gradient buckets of stages 2 and 3: the one being filled, one held open
 * through the whole backward (a tied head's weight gets its first gradient
 * at the start of backward and its last at the end), and one whose
 * reduce-scatter is in flight. */
#define ZERO_GRAD_BUFFERS 3

typedef struct zunit {
	int64_t lo, hi;            /* global flat range [lo, hi), whole parameters */
	int64_t chunk;             /* ceil((hi - lo) / N) */
	int64_t mine_lo, mine_hi;  /* this rank's piece (may be empty) */
	int64_t packed;            /* offset of the piece in the packed shard arrays */
	size_t p_first, p_count;   /* parameters weft_params_at(p_first + i) */
	int persist;               /* stage 3: small enough to stay whole */

	/* per step */
	float *pbuf;               /* stage 3: gathered parameters (N * chunk), or NULL */
	float *gbuf;               /* stages 2, 3: gradient bucket (N * chunk), or NULL */
	int ag;                    /* stage 3: 0 released, 1 all-gather in flight, 2 whole */
	const void *owner;         /* stage 3: module it was gathered in (released at its end) */
	int used;                  /* stage 3: a parameter of it was used since gathered */
	size_t ready;              /* parameters whose gradient is final (this micro-batch) */
	int rs_launched;
} zunit;

/* Free buffers of one size (a unit's padded size, N * chunk). */
typedef struct zpool_class {
	int64_t elems;
	float **free_list;
	size_t n_free, n_total;
} zpool_class;

/* A buffer pool by exact size, grown on demand and kept for the run: a
 * step allocates nothing after the first, and a small unit never takes a
 * large unit's buffer. */
typedef struct zpool {
	weft_mem_category cat;
	zpool_class *cls;          /* one per distinct unit size */
	size_t n_cls;
	int uniform;               /* one class of the largest size serves every unit */
	size_t reserved;           /* buffers made at setup (zero_pool_reserve) */
	int64_t bytes_total;       /* allocated, in use or free */
} zpool;

/* One collective in flight (FIFO, as the comm thread runs them). */
typedef struct zwork {
	weft_comm_work *work;
	int kind;                  /* ZW_RS / ZW_AG */
	size_t unit;
	int64_t t_launch;
} zwork;

enum { ZW_RS = 1, ZW_AG = 2 };

typedef struct zero {
	const weft_strategy_env *env;
	const weft_comm_ops *ops;
	weft_comm *comm;
	int stage, rank, world;
	const char *label;         /* "zero_2" ... for messages */

	/* options (DeepSpeed's names) */
	int overlap_comm, contiguous_gradients;
	int64_t reduce_bucket_size, allgather_bucket_size;
	int64_t prefetch_bucket_size, persistence_threshold, max_live_parameters;
	struct {                   /* which of them the config gave */
		int reduce_bucket, allgather_bucket, prefetch, persist, live;
	} given;

	/* layout */
	int64_t numel;             /* F32 elements */
	size_t n_params;
	zunit *units;
	size_t n_units;
	int32_t *unit_of;          /* per parameter index: its unit */
	int64_t *param_off;        /* per parameter: flat element offset */
	int64_t shard_numel;       /* sum of this rank's pieces */
	int64_t max_chunk;
	int64_t gather_elems;      /* stage 3: the largest non-persistent unit's N * chunk */
	int64_t n_gathered;        /* stage 3: non-persistent units */
	int64_t *ranges;           /* 2 per non-empty piece, for checkpoints */
	size_t n_ranges;

	/* memory */
	weft_tensor *flat;         /* the model's flat F32 parameter tensor (borrowed) */
	float *full_params;        /* the model's flat F32 parameters (stages 1, 2; stage 3
				    * only while gathered by gather_params) */
	float *full_grads;         /* the model's flat F32 gradients (stage 1) */
	float *pshard;             /* stage 3: parameter shard (WEFT_MEM_PARAMS) */
	float *gshard;             /* stages 2, 3: gradient shard (WEFT_MEM_GRADS) */
	float *slot_mem;           /* optimizer slots, packed (WEFT_MEM_OPTIM) */
	float *slots[ZERO_MAX_SLOTS];
	size_t n_slots;
	float *staging;            /* stages 1, 2: one padded unit (WEFT_MEM_COMM) */
	zpool ppool, gpool;        /* stage 3 parameters; stages 2, 3 gradients */
	int64_t persist_bytes;     /* stage 3: resident buffers of persistent units */
	int gathered_whole;        /* gather_params(1) is in effect */
	weft_tensor *own_grads;    /* stages 2, 3 on a model built without gradients:
				    * the parameters' gradient tensors (no data of
				    * their own; attach_grads), per parameter index */
	size_t n_own_grads;

	/* hooks */
	int64_t hooks[6];
	size_t n_hooks;
	int reducing;              /* backward of a micro-batch that reduces */
	size_t next_rs;            /* units reduce-scattered so far, from the last */
	const void *mod_stack[ZERO_MAX_DEPTH];
	int depth;
	int64_t live_elems;        /* stage 3: gathered (non-persistent) elements */

	/* collectives in flight */
	zwork *q;
	size_t q_head, q_tail, q_cap;

	/* device services (zero_dev.c) */
	const weft_kernel_table *k; /* the model context's kernels */
	void *kctx;                /* and their device context */
	int32_t dev_index;
	int on_cpu;                /* host memory: the plugin's step() may run on it */
	int fused;                 /* the optimizer steps as k->optim_step */
	int32_t kind;              /* weft_optim_kernel_kind, when fused */
	weft_optim_adam_params ap; /* its hyper-parameters, when fused */
	weft_optim_sgd_params sp;
	weft_optim_range *opt_ranges; /* this rank's pieces cut by decay (fused) */
	size_t n_opt_ranges;
	weft_elem_range *sq_ranges; /* this rank's gradient pieces (clipping) */
	size_t n_sq_ranges;
	float *mirror;             /* host copy of device slots for a checkpoint, or NULL */
	float *mirror_slots[ZERO_MAX_SLOTS];

	/* optimizer offload (offload_optimizer: {device: cpu}, on a device
	 * other than the CPU): slot_mem, the master shard and the gradient
	 * shard's copy are host memory, stepped by the CPU table's optim_step */
	int offload_asked;         /* the config asked for it */
	int offload;               /* in effect (not on accelerator: cpu) */
	struct weft_ctx *hctx;     /* a CPU context, for the CPU kernel table */
	const weft_kernel_table *hk; /* the CPU kernel table */
	float *h_master;           /* this rank's parameter pieces, packed (host) */
	float *h_grads;            /* this rank's gradient pieces, packed (host) */
	weft_optim_range *h_ranges; /* opt_ranges over the packed host arrays */
	int master_stale;          /* device parameters may differ from h_master */
	int last_micro;            /* the micro-batch running is the step's last */
	size_t n_micro;            /* micro-batches of this step */
	int64_t grads_down;        /* gradient elements copied down this step */

	/* this step */
	int64_t busy_ns, last_done_ns, exposed_ns, bytes, elements, calls;
	int64_t gathers;
} zero;

/* ---- zero_dev.c (below all): the device services ---- */
/* Refuses, at create, a device other than the CPU with an optimizer that
 * has no device kernel (one clear message naming what runs). */
weft_status zero_dev_check(const weft_strategy_env *env, const char *label);
/* Takes the context's kernel table, checks its services, and chooses how
 * the optimizer steps (setup, before any buffer is made). */
weft_status zero_dev_init(zero *z);
/* The device ranges of this rank's pieces (after zero_build_units). */
weft_status zero_dev_layout(zero *z);
void zero_dev_fini(zero *z);
/* n floats of device memory counted under cat (zeroed when `zeroed`), or
 * NULL with an error naming `what`. Free with zero_dfree and the same n. */
float *zero_dalloc(zero *z, weft_mem_category cat, int64_t n, int zeroed, const char *what);
void zero_dfree(zero *z, weft_mem_category cat, float *p, int64_t n);
/* Stream-ordered: dst[0..n) = src[0..n); = 0; += src. */
weft_status zero_dcopy(zero *z, float *dst, const float *src, int64_t n);
weft_status zero_dzero(zero *z, float *dst, int64_t n);
weft_status zero_dadd(zero *z, float *dst, const float *src, int64_t n);
/* The sum of squares of this rank's gradient pieces (waits for it). */
weft_status zero_dev_sumsq(zero *z, double *out);
/* The optimizer step over this rank's pieces. */
weft_status zero_dev_step(zero *z, const weft_optim_step_info *in);
/* The slots as host memory for a checkpoint (device slots are copied to a
 * host mirror, which the next step copies back; offloaded slots are host
 * memory already). */
weft_status zero_dev_state(zero *z, float *const **slots);
/* Offload: makes the host slots, master shard and gradient copy, and
 * fills the master from the device parameters (setup, after the
 * broadcast, before stage 3 drops the whole parameters). */
weft_status zero_offload_setup(zero *z);
/* Offload, stages 2 and 3: unit u's reduced gradient piece is final (the
 * step's last micro-batch): it goes down to the host now. */
weft_status zero_offload_grads_down(zero *z, const zunit *u);
void zero_offload_fini(zero *z);

/* ---- zero_layout.c (bottom): the pools, the units, shard memory ---- */
/* A buffer of `elems` floats (not zeroed), or NULL with the error set:
 * a free one, else a new one (the pool grows past what setup reserved). */
float *zero_pool_get(zero *z, zpool *pool, int64_t elems);
/* A free buffer of `elems` floats when more than `keep` are free, else
 * NULL; never allocates (prefetching takes only what setup reserved). */
float *zero_pool_try(zpool *pool, int64_t elems, size_t keep);
/* A uniform pool: makes `count` buffers now (setup), so that the steps
 * allocate nothing and the working set is what the plan says. */
weft_status zero_pool_reserve(zero *z, zpool *pool, int64_t count);
/* Returns a buffer from zero_pool_get of the same `elems`; NULL ignored. */
void zero_pool_put(zpool *pool, float *buf, int64_t elems);
/* Sizes the pool for every unit's padded size (setup). uniform > 0: one
 * size, uniform floats (the largest unit's padded size), so any free
 * buffer serves any unit; 0: one class per unit size. */
weft_status zero_pool_init(zero *z, zpool *pool, weft_mem_category cat, int64_t uniform);
/* Frees the pool's free buffers and its classes. */
void zero_pool_fini(zero *z, zpool *pool);
weft_comm_buf zero_buf(const zero *z, float *data, int64_t count);
/* Cuts the flat buffer into units and this rank's pieces (setup): units,
 * unit_of, param_off, shard_numel, max_chunk, gather_elems, n_gathered,
 * ranges. */
weft_status zero_build_units(zero *z);
/* Points the unit's parameters (data) at buf, or NULL. */
void zero_point_params(zero *z, const zunit *u, float *buf);
/* Points the unit's parameters' gradients at buf, or NULL. */
void zero_point_grads(zero *z, const zunit *u, float *buf);
/* Frees one of the model's flat F32 buffers (of category cat). */
void zero_drop_flat(zero *z, weft_tensor *flat, weft_mem_category cat);
/* n zeroed floats of device memory in category `cat`, or NULL with an
 * out-of-memory error naming `what`. */
float *zero_alloc_f32(zero *z, weft_mem_category cat, int64_t n, const char *what);
/* Stage 3: copies this rank's pieces of the parameters out of `full`. */
weft_status zero_take_shard(zero *z, const float *full);
/* Stage 3: persistent units get their resident buffer, filled from `full`. */
weft_status zero_place_persistent(zero *z, const float *full);

/* ---- zero_units.c: the unit rule, for setup and for the plan ---- */
/* The largest unit of stages 1 and 2, in elements. */
int64_t zero_unit_cap(const zero *z);
/* Whether parameter `name` of n elements starts a new unit after the open
 * unit whose first parameter is `first` (NULL: none yet) and which holds
 * len elements. */
int zero_unit_starts(const zero *z, const char *first, int64_t len, const char *name, int64_t n);
/* Sets u's chunk, rank's piece [mine_lo, mine_hi) and persist from its
 * [lo, hi) and z's world, stage and persistence threshold. */
void zero_unit_split(const zero *z, zunit *u, int32_t rank);

/* The sizes of the options the config left out (z->given), from the
 * model's psi float32 elements: the unit cap of stages 1 and 2 (both
 * bucket sizes) and stage 3's persistence threshold. Before the units are
 * cut (setup and the plan alike). */
void zero_auto_sizes(zero *z, int64_t psi);
/* Stage 3's prefetch size left out: the largest gathered unit's padded
 * size, gather_elems (N * chunk), so one unit is gathered ahead. After the
 * units are cut. */
void zero_auto_prefetch(zero *z, int64_t gather_elems);
/* Stage 3's gathered-parameter buffers, each of gather_elems floats (the
 * largest non-persistent unit, padded), made at setup: the unit in use, one
 * held across a pass (a tied head's weight, used at both ends of the
 * model), and the units prefetched (stage3_prefetch_bucket_size, within
 * stage3_max_live_parameters); at most gathered_units (the non-persistent
 * units). 0 for other stages or with nothing to gather. */
int64_t zero_gather_buffers(const zero *z, int64_t gather_elems, int64_t gathered_units);
/* Stages 2, 3: gradient buckets made at setup (ZERO_GRAD_BUFFERS, at
 * most `units`), each of the largest unit's padded size; 0 for stage 1. */
int64_t zero_grad_buffers(const zero *z, int64_t units);

/* ---- zero_plan.c: weft plan's question (weft/strategy.h) ---- */
weft_status zero_memory_plan(void *p, const weft_plan_query *q, weft_plan_result *out);

/* ---- zero_comm.c (middle): collectives in flight, hooks ---- */
weft_status zero_hooks_add(zero *z);
/* Waits for every collective in flight (and applies its result). */
weft_status zero_drain(zero *z);
/* Gathers unit k of stage 3 now (blocking). */
weft_status zero_gather_unit(zero *z, size_t k);
/* Releases every gathered non-persistent unit (stage 3). */
void zero_release_all(zero *z);
/* Launches, from the last unit backward, every complete unit's
 * reduce-scatter (stages 2, 3). */
weft_status zero_launch_ready(zero *z);
/* A blocking collective of unit k on the staging buffer (stages 1, 2):
 * reduce = 1 reduce-scatters (averages) its gradients, 0 all-gathers its
 * parameters. */
weft_status zero_staged(zero *z, size_t k, int reduce);
/* Stage 3, after the step: persistent units take their new values. */
weft_status zero_refresh_persistent(zero *z);

/* ---- zero_step.c (top): the strategy's members (entry.c's vtables) ---- */
weft_status zero_create_stage(const weft_cfg *section, const weft_strategy_env *env, int stage,
			      void **out);
/* weft/strategy.h's plan (what the trainer builds): stages 2 and 3 (the
 * stage from the options, `stage` fixed by the strategy's name or 0) ask
 * for a model without gradient buffers. Errors: the options' CONFIG. */
weft_status zero_build_plan_stage(const weft_cfg *section, int stage, weft_model_options *mo);
weft_status zero_setup(void *p);
void zero_destroy(void *p);
weft_status zero_state(void *p, weft_strategy_state *out);
weft_status zero_gather_params(void *p, int gather);
/* weft/strategy.h's params_visit: stage 3 gathers one unit at a time (into
 * a working-set buffer) and releases it after visiting its parameters. */
weft_status zero_params_visit(void *p, weft_status (*fn)(void *user, size_t index,
							 const weft_tensor *t),
			      void *user);
weft_status zero_train_step(void *p, const weft_step_input *in, weft_step_report *out);
weft_status zero_eval_step(void *p, const weft_micro_batch *b, weft_eval_report *out);

#endif
