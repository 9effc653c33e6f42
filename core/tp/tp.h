/* core/tp: Megatron-style tensor parallelism - the tensor-parallel group,
 * the differentiable communication ops, and shard <-> full conversion.
 *
 * A tensor-parallel group (weft_tp_group) belongs to one model's parameter
 * set: the model builder creates it (unbound: only size, rank and flags),
 * records for each parameter how it is split, and the strategy binds a
 * communicator of exactly that size and rank to it before the first
 * forward. Ops find the group through the model; the strategy finds it
 * with weft_tp_group_find(params).
 *
 * The ops (Megatron's conjugate pairs; tensors (B, T, ...) with the
 * sequence in dim 1):
 *   weft_tp_copy          f: identity forward, all-reduce (sum) backward;
 *                         before a column-parallel linear.
 *   weft_tp_reduce        g: all-reduce (sum) forward, identity backward;
 *                         after a row-parallel linear.
 *   weft_tp_seq_split     keep this rank's T/size positions forward,
 *                         all-gather backward; enters a sequence-parallel
 *                         region from a replicated tensor.
 *   weft_tp_seq_gather    all-gather along T forward; backward either
 *                         reduce-scatter (WEFT_TP_BW_REDUCE_SCATTER: the
 *                         consumer was column-parallel, each rank holds a
 *                         partial gradient) or keep this rank's positions
 *                         (WEFT_TP_BW_SPLIT: the consumer was replicated,
 *                         every rank holds the whole gradient).
 *   weft_tp_seq_reduce_scatter  reduce-scatter along T forward,
 *                         all-gather backward; after a row-parallel linear
 *                         under sequence parallelism.
 * Every collective is counted (weft_tp_stats) by pass and kind with the
 * elements of the whole (unsplit) tensor it works on: b*s*h for one
 * activation of a transformer block.
 *
 * Calls on one group are not thread-safe (one model, one thread).
 */
#ifndef WEFT_CORE_TP_H
#define WEFT_CORE_TP_H

#include <stddef.h>
#include <stdint.h>

#include "dist/pg.h"
#include "weft/autograd.h"
#include "weft/comm.h"
#include "weft/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_tp_group weft_tp_group;

/* weft_tp_group flags (and weft_model_options.tp_flags). */
enum {
	WEFT_TP_SEQUENCE_PARALLEL = 1u << 0, /* layernorm/dropout regions split along T */
	WEFT_TP_VOCAB_PARALLEL = 1u << 1     /* wte split by vocabulary rows; the tied
					      * head gives logits split by vocabulary */
};

/* How one parameter is split over the group. Values are stored with the
 * parameter; only ever appended. */
typedef enum weft_tp_split {
	WEFT_TP_REPLICATE = 0, /* whole on every rank */
	WEFT_TP_ROWS = 1,      /* dim 0 split in size equal blocks, rank r holds block r
				* (column-parallel Linear weight [out, in], its bias) */
	WEFT_TP_COLS = 2,      /* dim 1 split (row-parallel Linear weight [out, in]) */
	WEFT_TP_ROWS3 = 3,     /* dim 0 is three packed parts (q | k | v); each part is
				* split as WEFT_TP_ROWS and rank r holds its block of
				* each, packed again (nanoGPT's c_attn) */
	WEFT_TP_ROWS_PARTS = 4 /* dim 0 is up to WEFT_TP_MAX_PARTS packed parts of any
				* rows (weft_tp_group_set_parts): a split part as
				* WEFT_TP_ROWS, a shared part whole on every rank with
				* a partial gradient (each rank adds what its shard of
				* the computation saw: sum it over the group). The
				* grouped-query q | k | v and SwiGLU's gate | up. */
} weft_tp_split;

#define WEFT_TP_MAX_PARTS 3

/* One contiguous run of a rank's shard of a WEFT_TP_ROWS_PARTS parameter:
 * `count` elements at element `local` of the shard are elements
 * [whole, whole + count) of the whole parameter; shared: a part every rank
 * holds whole (partial gradient), else this rank's block of a split one. */
typedef struct weft_tp_run {
	int64_t local, whole, count;
	int32_t shared;
} weft_tp_run;

/* Backward modes of weft_tp_seq_gather. */
typedef enum weft_tp_bw {
	WEFT_TP_BW_REDUCE_SCATTER = 0,
	WEFT_TP_BW_SPLIT = 1
} weft_tp_bw;

/* Collective kinds counted by the group. */
typedef enum weft_tp_coll {
	WEFT_TP_ALL_REDUCE = 0,
	WEFT_TP_ALL_GATHER = 1,
	WEFT_TP_REDUCE_SCATTER = 2,
	WEFT_TP_NUM_COLL = 3
} weft_tp_coll;

/* What a group issued since its last reset: [pass][kind], pass being
 * WEFT_PASS_FORWARD / WEFT_PASS_BACKWARD. `elements` are those of the
 * whole tensor (all-reduce: the buffer; all-gather: the output;
 * reduce-scatter: the input); `bytes` what this rank contributed
 * (all-reduce: the buffer; all-gather and reduce-scatter: its block). */
typedef struct weft_tp_stats {
	int64_t calls[2][WEFT_TP_NUM_COLL];
	int64_t elements[2][WEFT_TP_NUM_COLL];
	int64_t bytes[2][WEFT_TP_NUM_COLL];
	int64_t ns;                 /* time spent in collectives */
} weft_tp_stats;

/* Creates an unbound group of `size` ranks (this one `rank`) for the
 * parameter set `owner` (borrowed; the group is registered under it for
 * weft_tp_group_find until freed). Every parameter starts as
 * WEFT_TP_REPLICATE. Free with weft_tp_group_free.
 * Errors: WEFT_ERR_INVALID_ARG (size < 1, rank outside [0, size), a set
 * that already has a group), WEFT_ERR_NOMEM. */
weft_status weft_tp_group_create(int32_t size, int32_t rank, uint32_t flags,
				 const weft_params *owner, weft_tp_group **out);

/* Unregisters and frees the group (not the bound communicator, which
 * stays its creator's). NULL is ignored. */
void weft_tp_group_free(weft_tp_group *g);

/* The group registered for `ps`, or NULL. Thread-safe. */
weft_tp_group *weft_tp_group_find(const weft_params *ps);

int32_t weft_tp_group_size(const weft_tp_group *g);
int32_t weft_tp_group_rank(const weft_tp_group *g);
uint32_t weft_tp_group_flags(const weft_tp_group *g);

/* Records how parameter `index` of the owner set is split, and the full
 * shape it is a shard of (ndim <= 2). Errors: WEFT_ERR_INVALID_ARG for an
 * index past the end. */
weft_status weft_tp_group_set_split(weft_tp_group *g, size_t index, weft_tp_split split,
				    int32_t ndim, const int64_t *full_shape);

/* Records parameter `index` as WEFT_TP_ROWS_PARTS: dim 0 of the full
 * shape (ndim <= 2) is `nparts` packed parts of rows[k] rows each, part k
 * split over the group when split[k] (rows[k] divisible by the size),
 * shared (whole on every rank) otherwise. Errors: WEFT_ERR_INVALID_ARG for
 * an index past the end, more than WEFT_TP_MAX_PARTS parts, rows that do
 * not sum to full_shape[0] or a split part the size does not divide. */
weft_status weft_tp_group_set_parts(weft_tp_group *g, size_t index, int32_t nparts,
				    const int64_t *rows, const int32_t *split, int32_t ndim,
				    const int64_t *full_shape);

/* The runs of rank `rank`'s shard of parameter `index` in out (at most
 * WEFT_TP_MAX_PARTS); returns their number, 0 for a parameter that is not
 * WEFT_TP_ROWS_PARTS. */
int32_t weft_tp_group_runs(const weft_tp_group *g, size_t index, int32_t rank,
			   weft_tp_run *out);

/* Marks parameter `index` (replicated) as one whose gradient each rank
 * holds only partially - a layernorm or bias inside a sequence-parallel
 * region sees only this rank's positions - so the strategy sums it over
 * the group after backward. Errors: WEFT_ERR_INVALID_ARG for an index past
 * the end. */
weft_status weft_tp_group_set_partial(weft_tp_group *g, size_t index);

/* Whether parameter `index`'s gradient is partial (see above). */
int weft_tp_group_partial(const weft_tp_group *g, size_t index);

/* How parameter `index` is split; *full_shape (2 entries) gets the full
 * shape and *ndim its dims (either may be NULL). */
weft_tp_split weft_tp_group_split(const weft_tp_group *g, size_t index, int32_t *ndim,
				  int64_t *full_shape);

/* Binds the communicator the ops use (borrowed; must stay valid while the
 * model runs); comm NULL unbinds. Its size and rank must be the group's.
 * Errors: WEFT_ERR_INVALID_ARG naming both sizes or both ranks. */
weft_status weft_tp_group_bind(weft_tp_group *g, const weft_comm_ops *ops, weft_comm *comm);

/* The bound communicator (NULL when unbound). */
weft_comm *weft_tp_group_comm(const weft_tp_group *g);
const weft_comm_ops *weft_tp_group_ops(const weft_tp_group *g);

/* Copies / zeroes the counters. */
void weft_tp_group_stats(const weft_tp_group *g, weft_tp_stats *out);
void weft_tp_group_reset_stats(weft_tp_group *g);

/* ---- differentiable communication ops (contracts as weft/ops.h) ----
 * Errors also: WEFT_ERR_INVALID_ARG when the group is not bound ("run
 * under strategy tp"); WEFT_ERR_SHAPE when T is not divisible by the
 * group size (naming both); the communicator's errors. */
weft_status weft_tp_copy(weft_ctx *ctx, weft_tp_group *g, weft_tensor *x, weft_tensor **out);
weft_status weft_tp_reduce(weft_ctx *ctx, weft_tp_group *g, weft_tensor *x, weft_tensor **out);
weft_status weft_tp_seq_split(weft_ctx *ctx, weft_tp_group *g, weft_tensor *x,
			      weft_tensor **out);
weft_status weft_tp_seq_gather(weft_ctx *ctx, weft_tp_group *g, weft_tensor *x, weft_tp_bw bw,
			       weft_tensor **out);
weft_status weft_tp_seq_reduce_scatter(weft_ctx *ctx, weft_tp_group *g, weft_tensor *x,
				       weft_tensor **out);

/* ---- vocabulary parallelism (ops_vocab.c) ----
 * Rank r of the group holds vocabulary rows [r * Vl, (r + 1) * Vl) of the
 * embedding (w: its (Vl, C) shard) and column block r of the logits. */

/* Looks up ids (any shape, I32/I64, in [0, Vl * size)) in this rank's rows
 * of the table: out (ids..., C) holds the row of each id this rank owns and
 * zeros for the others; sum the parts over the group with weft_tp_reduce.
 * Backward adds the gradient of the owned positions into w's rows.
 * Errors: unbound group; WEFT_ERR_SHAPE for a table that is not an F32
 * (Vl, C) tensor; WEFT_ERR_INVALID_ARG naming the position and the id of
 * one outside the vocabulary. */
weft_status weft_tp_vocab_embedding(weft_ctx *ctx, weft_tp_group *g, weft_tensor *ids,
				    weft_tensor *w, weft_tensor **out);

/* Mean cross-entropy of vocabulary-split logits (..., Vl) F32 against the
 * global targets (...), skipping ignore_index: the value weft_op_cross_entropy
 * gives on the gathered logits, without gathering them (row maxima
 * all-reduced with MAX, sums of exp and the owner's target logit with one
 * SUM; two forward all-reduces, none backward). The passes over the
 * logits are the kernel table's vocab_ce_stats / vocab_ce_backward where
 * it has them (the logits stay on the device; only the rows' statistics
 * reach the host), else host loops on a host copy. out: an F32 scalar,
 * the same on every rank. Errors: unbound group; WEFT_ERR_SHAPE;
 * WEFT_ERR_INVALID_ARG naming the row and the target outside [0, Vl * size). */
weft_status weft_tp_vocab_cross_entropy(weft_ctx *ctx, weft_tp_group *g, weft_tensor *logits,
					weft_tensor *targets, int64_t ignore_index,
					weft_tensor **out);

/* weft_op_accuracy over vocabulary-split logits: the arg-max over the whole
 * vocabulary (ties: the lowest index), by two all-reduces (MAX of the
 * values, MIN of the indices holding it). *correct / *counted: host
 * integers, the same on every rank. Never recorded. Errors: as above. */
weft_status weft_tp_vocab_accuracy(weft_ctx *ctx, weft_tp_group *g, weft_tensor *logits,
				   weft_tensor *targets, int64_t ignore_index, int64_t *correct,
				   int64_t *counted);

/* ---- shards and full tensors (host memory, F32) ---- */

/* Copies rank `rank`'s shard of parameter `index`'s full value `full`
 * into `shard` / places it back into `full`: weft_tp_take_shard /
 * weft_tp_put_shard of the split recorded for it, WEFT_TP_ROWS_PARTS
 * included. */
void weft_tp_group_take_shard(const weft_tp_group *g, size_t index, int32_t rank,
			      const float *full, float *shard);
void weft_tp_group_put_shard(const weft_tp_group *g, size_t index, int32_t rank,
			     const float *shard, float *full);

/* Copies this rank's shard of a full parameter (`full`, the full shape
 * recorded for it) into `shard` (numel of the local parameter). Not for
 * WEFT_TP_ROWS_PARTS, whose parts only the group knows: use
 * weft_tp_group_take_shard (this copies nothing for it). */
void weft_tp_take_shard(weft_tp_split split, const int64_t *full_shape, int32_t size,
			int32_t rank, const float *full, float *shard);

/* Places shard `rank` into `full` (the inverse of weft_tp_take_shard). */
void weft_tp_put_shard(weft_tp_split split, const int64_t *full_shape, int32_t size,
		       int32_t rank, const float *shard, float *full);

/* Elements of parameter `index` when whole. */
int64_t weft_tp_full_numel(const weft_tp_group *g, size_t index);

/* Elements of the F32 flat buffer of the whole model whose shards `ps`
 * holds (the sum of every F32 parameter's whole numel): the coordinates of
 * a checkpoint's optimizer.bin. weft_params_numel(ps, WEFT_F32) when ps
 * has no tp group. Thread-safe. */
int64_t weft_tp_whole_numel(const weft_params *ps);

/* Collective over the bound communicator: assembles parameter `index`
 * (its data, or with `grads` its gradient) whole into `full` (host,
 * weft_tp_full_numel floats) on every rank. Replicated parameters are
 * copied. Blocking. Errors: unbound group; the communicator's; NOMEM. */
weft_status weft_tp_gather_param(weft_tp_group *g, const weft_params *ps, size_t index,
				 int grads, float *full);

/* ---- host services (weft/plugin.h, since ABI 1.1: "sub-communicators and
 * tensor parallelism") ---- */

/* Makes a process group's communicator splittable by plugins
 * (host->comm_split): the trainer registers its world group. The group
 * stays the caller's; unregister it before destroying it. Thread-safe.
 * Errors: NOMEM. */
weft_status weft_tp_comm_register(weft_pg *pg);
void weft_tp_comm_unregister(weft_pg *pg);

/* The process group whose backend communicator is c, among the registered
 * ones (the world and every comm_split result); NULL when c is not one. */
weft_pg *weft_tp_comm_find(const weft_comm *c);

/* The comm vtable strategies are given (weft_strategy_env.comm_ops): the
 * backend's, except that every call on a registered communicator goes
 * through its process group, so the collective ledger records it and a
 * failed collective ends with the ledger's diagnosis (which rank fell
 * behind, vanished or called something else). A communicator the host
 * does not know goes to the backend as it is. One backend per process is
 * wrapped; for another one this returns the backend itself. Never NULL
 * for a non-NULL backend. Thread-safe. */
const weft_comm_ops *weft_tp_ledger_ops(const weft_comm_ops *backend);

/* The host members, contracts in weft/plugin.h. calls/elements/bytes of
 * tp_stats are [pass * WEFT_TP_NUM_COLL + kind]. */
weft_status weft_tp_host_comm_split(const weft_comm_ops *ops, weft_comm *comm, int32_t color,
				    int32_t key, weft_comm **out);
void weft_tp_host_comm_free(weft_comm *sub);
weft_status weft_tp_host_info(const weft_params *ps, int32_t *size, int32_t *rank,
			      uint32_t *flags);
weft_status weft_tp_host_bind(weft_params *ps, const weft_comm_ops *ops, weft_comm *comm);
int weft_tp_host_param_split(const weft_params *ps, size_t index, int *grad_partial,
			     int64_t *full_numel);
int weft_tp_host_param_runs(const weft_params *ps, size_t index, int64_t *local, int64_t *whole,
			    int64_t *count, int *shared);
void weft_tp_host_stats(const weft_params *ps, int reset, int64_t *calls, int64_t *elements,
			int64_t *bytes);
weft_status weft_tp_host_gather_param(const weft_params *ps, size_t index, int grads,
				      float *full);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_CORE_TP_H */
