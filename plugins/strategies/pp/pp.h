/* strategy "pp": pipeline parallelism over GPT stages (internal). */
#ifndef WEFT_STRATEGY_PP_H
#define WEFT_STRATEGY_PP_H

#include <stdlib.h>

#include "weft/device.h"
#include "weft/optim.h"
#include "weft/pp_schedule.h"
#include "weft/step.h"

extern const weft_host *g_host; /* host.c */

#define PP_MAX_CHUNKS 16
#define PP_MAX_PIECES 4
/* The first blocks of a micro-batch context's arena and tape arena (they
 * grow to what the stage's forward and backward use). */
#define PP_CTX_ARENA_BYTES (64 << 10)
#define PP_CTX_TAPE_BYTES (16 << 10)

enum { PP_PART_UNIFORM = 0, PP_PART_PARAMETERS = 1, PP_PART_LIST = 2 };

/* Options of the strategy section. */
typedef struct pp_options {
	int pp;                 /* pipeline ranks */
	int schedule;           /* weft_pp_kind */
	int v;                  /* virtual stages (chunks) per rank */
	int partition;          /* PP_PART_* */
	int64_t layers[256];    /* PP_PART_LIST: blocks per stage */
	int n_layers_list;
	const weft_cfg *partition_node; /* for errors at file:line:col */
	const weft_cfg *section;
	/* strategy "hybrid": the mesh dp x tp x pp (Megatron's order: tp
	 * fastest, then dp, then pp) and how the dp replicas keep in step */
	int hybrid;
	int dp, tp;
	int dp_strategy;        /* PP_DP_* */
} pp_options;

enum { PP_DP_DDP = 0, PP_DP_ZERO_1 = 1 };

/* This rank's place on the mesh: rank = (pp_idx * dp + dp_idx) * tp + tp_idx. */
typedef struct pp_mesh {
	int pp_idx, dp_idx, tp_idx;
} pp_mesh;

/* The ranks of one pipeline and how to talk to them. */
typedef struct pp_group {
	const weft_comm_ops *ops;
	weft_comm *comm;        /* p2p and collectives over the pipeline's ranks */
	int rank, size;         /* this rank's pipeline index, p */
	int device_type;        /* weft_comm_device */
	int device_index;
} pp_group;

/* A contiguous run of a chunk's flat buffer that is also contiguous in
 * the whole model's flat coordinates. */
typedef struct pp_piece {
	int64_t local;          /* first element in the chunk's flat buffer */
	int64_t begin, end;     /* global flat range */
	int mirror;             /* the head's copy of wte: another stage owns it */
	int64_t sh_lo, sh_hi;   /* global range this rank steps: [begin, end), or its dp
				 * shard of it under dp_strategy zero_1 */
	float *slot_mem;        /* n_slots * (sh_hi - sh_lo), WEFT_MEM_OPTIM */
	float *slots[8];
	int64_t state_at;       /* its state's first element in each slot array */
} pp_piece;

/* One model chunk (stage) this rank holds. */
typedef struct pp_chunk {
	int stage;
	int64_t layer_begin, layer_end;
	uint32_t parts;
	void *handle;           /* from env->stage_create */
	weft_params *params;
	float *flat, *grad;
	int64_t numel;
	pp_piece piece[PP_MAX_PIECES];
	int n_pieces;
	float *wte, *wte_grad;  /* EMBED or HEAD stage with a tied wte; else NULL */
	int64_t wte_numel;
} pp_chunk;

/* Messages between neighbouring stages (pp_msg.c). */
typedef struct pp_msg pp_msg;
typedef struct pp_chan pp_chan;

typedef struct pp_msgs {
	pp_group *g;
	const weft_kernel_table *k; /* the buffers' device (mem_alloc / mem_free) */
	int32_t dev_index;
	int64_t buf_numel;      /* floats per buffer */
	const int64_t *counts;  /* [m]: floats of each micro-batch's messages */
	float **free_bufs;
	int n_free, cap_free;
	int n_bufs;
	pp_chan *from;          /* [p]: what each peer sends this rank, in its order */
	pp_msg *sends;          /* outstanding sends */
	int n_sends, cap_sends;
	int64_t *send_idx;      /* [n_send_idx]: the global order of this rank's sends */
	int n_send_idx;
	int n_sent;             /* sends issued this step */
	int64_t bytes, calls;
	int64_t wait_ns;        /* time spent blocked in receives and send waits */
} pp_msgs;

/* Timeline events of a step are weft_step_events (weft/strategy.h): the
 * actions of the schedule (weft_pp_op) and these. */
enum { PP_EV_OPTIM = 16, PP_EV_SYNC = 17 };

typedef struct pp_strategy {
	const weft_strategy_env *env;
	pp_options o;
	pp_mesh mesh;
	pp_group g;
	weft_comm *pp_comm;     /* from comm_split when the pipeline is not the world */
	weft_comm *dp_comm;     /* the dp replicas of this rank's stages, or NULL */
	weft_comm *tp_comm;     /* hybrid tp > 1: the tp shards of this rank's stages */
	int S;                  /* stages: p * v */
	int64_t n_layer;
	int64_t n_embd;
	int untied;             /* the model has lm_head.weight: no tied wte to exchange */
	int64_t *bounds;        /* [S + 1]: stage s holds blocks [bounds[s], bounds[s+1]) */
	pp_chunk chunk[PP_MAX_CHUNKS];
	int skipped;            /* 16-mixed: pp_optim_step skipped this step (overflow) */
	size_t n_slots;
	pp_msgs msgs;

	/* contexts, one per micro-batch chunk in flight */
	int n_ctx_free, n_ctx;
	weft_ctx *all_ctx[256];
	weft_ctx *ctx_free[256];        /* of all_ctx, those not in use; evaluation
					 * takes one before any schedule exists */

	/* per step */
	weft_pp_action *actions;
	size_t n_actions, cap_actions;
	int sched_m;            /* m the action list was built for */
	struct pp_inflight *fl; /* [m * v] */
	int cap_fl;
	int64_t *counts;        /* [m]: floats of each micro-batch's messages */
	weft_step_event *ev;    /* [cap_ev]: the step's timeline (clock) */
	size_t cap_ev;
	weft_step_clock clock;
	int64_t peak_in_flight;
	double last_bubble;

	/* optimizer state of the owned pieces, as ranges for checkpoints */
	int64_t *ranges;        /* [2 * n_ranges] */
	int n_ranges;
	int64_t *whole_ranges;  /* tp > 1: the same state in the whole model's coordinates */
	int n_whole_ranges;
	int64_t state_numel;
	float *wte_tmp;         /* the other copy's tied-embedding gradient */
	float *dp_stage;        /* zero_1: dp * the largest piece's shard, WEFT_MEM_COMM on
				 * the model's device */
	int64_t dp_stage_numel;
	float **state_slots;
	float *state_mem;       /* on the device, n_slots * state_numel (+1 byte) */
	int gathered;

	/* pp_dev.c: the device services of env->ctx's kernel table (weft/
	 * device.h, ABI 1.3) through which every touch of parameter,
	 * gradient, state and message memory goes */
	const weft_kernel_table *k;
	void *kctx;
	int on_cpu;
	int fused;              /* the optimizer steps with optim_step (not on the CPU) */
	int okind;              /* WEFT_OPTIM_KERNEL_* when fused */
	weft_optim_adam_params ap;
	weft_optim_sgd_params sp;
	weft_optim_range *opt;  /* chunk k's ranges: opt[opt_at[k] .. opt_at[k + 1]) */
	size_t opt_at[PP_MAX_CHUNKS + 1];
	float *mirror;          /* a host copy of the state handed to a checkpoint */
	float *mirror_slots[8];
	int64_t wte_tmp_numel;
	/* pp_tp.c, tp > 1: the clipping norm's ranges of chunk k's gradient
	 * buffer, one per parameter: those every tp rank holds whole in
	 * tp_sq[tp_sq_at[k][0] .. tp_sq_at[k][1]), its shards of the split
	 * ones in tp_sq[tp_sq_at[k][1] .. tp_sq_at[k][2]) */
	weft_elem_range *tp_sq;
	size_t tp_sq_at[PP_MAX_CHUNKS][3];
} pp_strategy;

/* pp.c: the pipeline runtime strategies pp and hybrid (hybrid.c) share.
 * pp_create_as creates strategy `who` ("pp" or "hybrid"); pp_plan_as gives
 * the data split (every rank of a pipeline reads the same rows); the rest
 * are the vtable members of both. */
weft_status pp_create_as(const char *who, const weft_cfg *section,
			 const weft_strategy_env *env, void **out);
weft_status pp_plan_as(const char *who, const weft_cfg *section, int32_t rank,
		       int32_t world, int32_t *data_rank, int32_t *data_world);
weft_status pp_setup(void *p);
weft_status pp_train_step(void *p, const weft_step_input *in, weft_step_report *out);
weft_status pp_eval_step(void *p, const weft_micro_batch *b, weft_eval_report *out);
weft_status pp_state(void *p, weft_strategy_state *out);
weft_status pp_gather_params(void *p, int gather);
void pp_destroy(void *p);

/* pp_config.c */
weft_status pp_options_parse(const weft_cfg *section, const weft_strategy_env *env,
			     const char *who, pp_options *o);
/* Checks pp x tp x dp == world (a config error naming the numbers) and
 * what this version can run; fills *m for `rank`. */
weft_status pp_mesh_check(const pp_options *o, int32_t rank, int32_t world, pp_mesh *m);
/* Splits n_layer blocks into S stages by o->partition; `cost` gives each
 * block's parameter count, embed/head those of the first/last stage's
 * extra parts. bounds gets S + 1 entries. Errors: WEFT_ERR_CONFIG naming
 * the numbers. */
weft_status pp_partition(const pp_options *o, int S, int64_t n_layer, const int64_t *cost,
			 int64_t embed, int64_t head, int64_t *bounds);

/* pp_msg.c */
weft_status pp_msgs_plan(pp_msgs *ms, pp_group *g, weft_pp_kind kind, int m, int v,
			 int64_t buf_numel);
/* send copies data (n floats, device memory written on ctx) into a pool
 * buffer on ctx's stream and sends it; recv copies the message into data
 * on ctx's stream. */
weft_status pp_msgs_send(pp_msgs *ms, weft_ctx *ctx, int op, int micro, int stage, int peer,
			 const float *data, int64_t n);
weft_status pp_msgs_recv(pp_msgs *ms, weft_ctx *ctx, int op, int micro, int stage, int peer,
			 float *data, int64_t n);
weft_status pp_msgs_finish(pp_msgs *ms);
void pp_msgs_free(pp_msgs *ms);

/* pp_stage.c: chunks, their optimizer state and the tied embedding */
weft_status pp_chunks_build(pp_strategy *s);
void pp_chunks_free(pp_strategy *s);
weft_status pp_copy_params(pp_strategy *s, int to_stage);
weft_status pp_sync_wte(pp_strategy *s);
weft_status pp_optim_step(pp_strategy *s, const weft_optim_step_info *info, double *grad_norm);
weft_status pp_gather(pp_strategy *s);
weft_status pp_state_build(pp_strategy *s, weft_strategy_state *out);

/* pp_dev.c: the device side. pp_dev_check (create): whether this run can
 * use the device at all (optimizers without a device kernel are refused
 * off the CPU, with the reason). pp_dev_init (setup,
 * before the chunks): the kernel table. pp_dalloc / pp_dfree: zeroed
 * F32 buffers on the device by category. pp_dev_ranges (after the state
 * is laid out): the optimizer's ranges (and under tp the norm's,
 * pp_tp_sq_setup). pp_dev_step: the fused step of
 * every chunk. pp_dev_state: the slots a checkpoint reads (a host mirror
 * off the CPU). pp_dev_sync: waits for every context of the rank. */
weft_status pp_dev_check(const char *who, const weft_strategy_env *env, const pp_options *o);
weft_status pp_dev_init(pp_strategy *s);
float *pp_dalloc(pp_strategy *s, weft_mem_category cat, size_t bytes, const char *what);
void pp_dfree(pp_strategy *s, weft_mem_category cat, void *p, size_t bytes);
weft_status pp_dev_ranges(pp_strategy *s);
weft_status pp_dev_step(pp_strategy *s, const weft_optim_step_info *in);
weft_status pp_dev_state(pp_strategy *s, float *const **slots);
weft_status pp_dev_sync(pp_strategy *s);
void pp_dev_fini(pp_strategy *s);

/* pp_group.c: the in-place f64 sum of v[0..n) over `comm` (blocking; the
 * backend's error, unwrapped), and the f64 sums over the pipeline group
 * (a no-op for one stage rank) and over the tp group of a hybrid mesh (a
 * no-op without one). */
weft_status pp_f64_sum(pp_strategy *s, weft_comm *comm, double *v, int n);
weft_status pp_sum(pp_strategy *s, double *v, int n);
weft_status pp_tp_sum(pp_strategy *s, double *v, int n);

/* pp_tp.c: under tp > 1, whole_ranges from ranges (once; a no-op
 * without tp). Errors: WEFT_ERR_NOMEM. pp_tp_sq_setup (after the
 * chunks, a no-op without tp): the norm's ranges, tp_sq. pp_tp_sum_squares:
 * the squares of this rank's gradients through the kernel table (the
 * head's mirror of wte excluded, as in the norm), part[0] of the
 * parameters every tp rank holds whole, part[1] of its shards of the split
 * ones; waits for the sums. pp_tp_free: frees tp_sq. */
weft_status pp_tp_ranges(pp_strategy *s);
weft_status pp_tp_sq_setup(pp_strategy *s);
weft_status pp_tp_sum_squares(pp_strategy *s, double part[2]);
void pp_tp_free(pp_strategy *s);
/* pp_tp.c: sums the shared parts' partial gradients (split kind 4, runs
 * every tp rank holds whole) over the tp group after the flush; counts
 * what it moved into *bytes / *calls. A no-op without tp. */
weft_status pp_tp_sum_shared(pp_strategy *s, int64_t *bytes, int64_t *calls);

/* pp_plan.c: weft plan's question for pp and hybrid (weft/strategy.h,
 * memory_plan), from the options and mesh create read. */
weft_status pp_memory_plan(void *s, const weft_plan_query *q, weft_plan_result *out);

/* pp_dp.c: the dp replicas of a hybrid mesh. pp_dp_shard: the range of a
 * piece this rank steps. pp_dp_setup: buffers (after the chunks). The
 * rest are collectives over the dp group, no-ops without one: grads
 * averages every chunk's gradients, params (zero_1) gathers the stepped
 * shards, sum adds f64 values. bytes and calls count what was sent. */
void pp_dp_shard(const pp_strategy *s, pp_piece *p);
weft_status pp_dp_setup(pp_strategy *s);
weft_status pp_dp_grads(pp_strategy *s, int64_t *bytes, int64_t *calls);
weft_status pp_dp_params(pp_strategy *s, int64_t *bytes, int64_t *calls);
weft_status pp_dp_sum(pp_strategy *s, double *v, int n, int64_t *bytes, int64_t *calls);
void pp_dp_free(pp_strategy *s);

#endif
