/* Differentiable communication ops for tensor and sequence parallelism
 * (Megatron's f / g and the sequence-parallel all-gather / reduce-scatter
 * pairs), recorded on the tape with their conjugate backward. */
#include <string.h>

#include "tensor/tensor_impl.h"
#include "tp/tp_impl.h"
#include "weft/step.h"

#define DT(t) ((weft_dtype)(t)->dtype)

static weft_comm_dtype comm_dtype(weft_dtype dt)
{
	switch (dt) {
	case WEFT_F16: return WEFT_COMM_F16;
	case WEFT_BF16: return WEFT_COMM_BF16;
	default: return WEFT_COMM_F32;
	}
}

static weft_comm_buf buf_of(weft_ctx *ctx, weft_dtype dt, void *data, int64_t n)
{
	weft_device dev = weft_ctx_device(ctx);

	return (weft_comm_buf){
		.data = data,
		.count = n,
		.dtype = comm_dtype(dt),
		.device = dev.type == WEFT_DEVICE_CUDA ? WEFT_COMM_DEVICE_CUDA : WEFT_COMM_DEVICE_CPU,
		.device_index = dev.type == WEFT_DEVICE_CUDA ? dev.index : 0,
	};
}

/* One collective of group g, run blocking, and counted. n_send / n_recv in
 * elements; `full` the elements of the whole tensor. The host does not
 * wait for the kernels queued on ctx first: a backend reads device memory
 * after the work queued earlier on the device's compute streams (weft/comm.h;
 * NCCL orders its stream after them with events, gloo copies on the legacy
 * default stream, which waits for them). */
static weft_status coll(weft_ctx *ctx, weft_tp_group *g, const char *op, weft_pass pass,
			weft_tp_coll kind, weft_dtype dt, void *send, int64_t n_send, void *recv,
			int64_t n_recv)
{
	weft_comm_buf s = buf_of(ctx, dt, send, n_send), r = buf_of(ctx, dt, recv, n_recv);
	int64_t t0 = weft_clock_ns(), full = 0, mine = 0;
	weft_status st = WEFT_OK;

	switch (kind) {
	case WEFT_TP_ALL_REDUCE:
		st = g->ops->all_reduce(g->comm, &s, &r, WEFT_COMM_SUM, NULL);
		full = mine = n_send;
		break;
	case WEFT_TP_ALL_GATHER:
		st = g->ops->all_gather(g->comm, &s, &r, NULL);
		full = n_recv;
		mine = n_send;
		break;
	case WEFT_TP_REDUCE_SCATTER:
		st = g->ops->reduce_scatter(g->comm, &s, &r, WEFT_COMM_SUM, NULL);
		full = n_send;
		mine = n_recv;
		break;
	case WEFT_TP_NUM_COLL:
		break;
	}
	if (st)
		return weft_error_wrap(st, "%s (%s, tp rank %d of %d)", op,
				       pass == WEFT_PASS_FORWARD ? "forward" : "backward",
				       (int)g->rank, (int)g->size);
	g->stats.calls[pass][kind]++;
	g->stats.elements[pass][kind] += full;
	g->stats.bytes[pass][kind] += mine * (int64_t)weft_dtype_size(dt);
	g->stats.ns += weft_clock_ns() - t0;
	return WEFT_OK;
}

static weft_status check(weft_ctx *ctx, const char *op, weft_tp_group *g, weft_tensor *x,
			 int seq)
{
	char sh[160];
	weft_status st;

	if (!g || !g->comm)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: this model was built for tensor "
				      "parallelism but no communicator is bound to its tp group; "
				      "run it under strategy tp (which binds one)", op);
	if ((st = op_check(ctx, op, "x", x, 1)))
		return st;
	if (seq && (x->ndim < 2 || x->shape[1] % g->size))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: x %s: the sequence length (dim 1) %lld "
				      "must be divisible by the tensor-parallel size %d for "
				      "sequence parallelism", op, weft_shape_str(x, sh, sizeof(sh)),
				      x->ndim >= 2 ? (long long)x->shape[1] : 0LL, (int)g->size);
	return WEFT_OK;
}

/* Geometry of a (B, T, R...) tensor split along T in `size` parts. */
typedef struct seq_geom {
	int64_t B, T, Tl, R; /* R: elements per position */
} seq_geom;

static seq_geom geom(const weft_tensor *full_or_local, int32_t size, int local)
{
	seq_geom q = { .B = full_or_local->shape[0], .T = full_or_local->shape[1] };

	q.R = (q.B && q.T) ? weft_tensor_numel(full_or_local) / (q.B * q.T) : 0;
	if (local) {
		q.Tl = q.T;
		q.T *= size;
	} else {
		q.Tl = q.T / size;
	}
	return q;
}

/* blocks (size, B, Tl, R) <-> seq (B, T, R). to_seq: blocks -> seq.
 * accumulate: add into the destination instead of copying. */
static weft_status permute(weft_ctx *ctx, weft_dtype dt, const seq_geom *q, int32_t size,
			   void *blocks, void *seq, int to_seq, int accumulate)
{
	size_t es = weft_dtype_size(dt);
	int64_t run = q->Tl * q->R;
	weft_status st = WEFT_OK;

	for (int32_t r = 0; r < size && !st; r++)
		for (int64_t b = 0; b < q->B && !st; b++) {
			char *bl = (char *)blocks + (size_t)((r * q->B + b) * run) * es;
			char *sq = (char *)seq + (size_t)((b * q->T + r * q->Tl) * q->R) * es;
			void *dst = to_seq ? (void *)sq : (void *)bl;
			const void *src = to_seq ? (const void *)bl : (const void *)sq;

			if (accumulate)
				st = ctx->k->axpy(ctx->kctx, dt, run, 1.0f, src, dst);
			else
				st = ctx->k->copy(ctx->kctx, dst, src, (size_t)run * es,
						  WEFT_COPY_DEVICE_TO_DEVICE);
		}
	return st;
}

/* Rank r's positions of seq (B, T, R) <-> local (B, Tl, R). */
static weft_status local_part(weft_ctx *ctx, weft_dtype dt, const seq_geom *q, int32_t rank,
			      void *seq, void *local, int to_local, int accumulate)
{
	size_t es = weft_dtype_size(dt);
	int64_t run = q->Tl * q->R;
	weft_status st = WEFT_OK;

	for (int64_t b = 0; b < q->B && !st; b++) {
		char *lo = (char *)local + (size_t)(b * run) * es;
		char *sq = (char *)seq + (size_t)((b * q->T + rank * q->Tl) * q->R) * es;
		void *dst = to_local ? (void *)lo : (void *)sq;
		const void *src = to_local ? (const void *)sq : (const void *)lo;

		if (accumulate)
			st = ctx->k->axpy(ctx->kctx, dt, run, 1.0f, src, dst);
		else
			st = ctx->k->copy(ctx->kctx, dst, src, (size_t)run * es,
					  WEFT_COPY_DEVICE_TO_DEVICE);
	}
	return st;
}

static weft_status record(weft_ctx *ctx, const char *op, tape_backward_fn bw, weft_tensor *x,
			  weft_tensor *y, weft_tp_group *g, int64_t mode)
{
	weft_tape_node *node;
	weft_status st = op_record(ctx, op, bw, y, 1, &x, &node);

	if (!st && node) {
		node->saved[0] = g;
		node->i[0] = mode;
	}
	return st;
}

/* ---- f: identity forward, all-reduce backward ---- */

static weft_status copy_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tp_group *g = n->saved[0];
	void *dx = bw_grad(n, 0), *dy = n->out->grad->data;
	int64_t numel = weft_tensor_numel(n->out);
	weft_status st;

	if (!dx)
		return WEFT_OK;
	st = coll(ctx, g, n->op, WEFT_PASS_BACKWARD, WEFT_TP_ALL_REDUCE, DT(n->out), dy, numel, dy,
		  numel);
	return st ? st : ctx->k->axpy(ctx->kctx, DT(n->out), numel, 1.0f, dy, dx);
}

weft_status weft_tp_copy(weft_ctx *ctx, weft_tp_group *g, weft_tensor *x, weft_tensor **out)
{
	const char *op = "tp_copy";
	weft_tensor *y;
	weft_status st;

	*out = NULL;
	if ((st = check(ctx, op, g, x, 0)) ||
	    (st = op_output(ctx, op, DT(x), x->ndim, x->shape, &y)))
		return st;
	if (weft_tensor_nbytes(x))
		st = ctx->k->copy(ctx->kctx, y->data, x->data, weft_tensor_nbytes(x),
				  WEFT_COPY_DEVICE_TO_DEVICE);
	if (st || (st = record(ctx, op, copy_backward, x, y, g, 0)))
		return st;
	*out = y;
	return WEFT_OK;
}

/* ---- g: all-reduce forward, identity backward ---- */

static weft_status reduce_backward(weft_ctx *ctx, weft_tape_node *n)
{
	void *dx = bw_grad(n, 0);

	if (!dx)
		return WEFT_OK;
	return ctx->k->axpy(ctx->kctx, DT(n->out), weft_tensor_numel(n->out), 1.0f,
			    n->out->grad->data, dx);
}

weft_status weft_tp_reduce(weft_ctx *ctx, weft_tp_group *g, weft_tensor *x, weft_tensor **out)
{
	const char *op = "tp_reduce";
	int64_t numel = weft_tensor_numel(x);
	weft_tensor *y;
	weft_status st;

	*out = NULL;
	if ((st = check(ctx, op, g, x, 0)) ||
	    (st = op_output(ctx, op, DT(x), x->ndim, x->shape, &y)) ||
	    (st = coll(ctx, g, op, WEFT_PASS_FORWARD, WEFT_TP_ALL_REDUCE, DT(x), x->data, numel,
		       y->data, numel)) ||
	    (st = record(ctx, op, reduce_backward, x, y, g, 0)))
		return st;
	*out = y;
	return WEFT_OK;
}

/* ---- sequence split: keep this rank's positions, all-gather backward ---- */

/* dx (B, T, R) += all_gather(dy (B, Tl, R)) */
static weft_status gather_into(weft_ctx *ctx, weft_tp_group *g, const char *op, weft_dtype dt,
			       const seq_geom *q, void *dy_local, void *dx_seq)
{
	void *blocks;
	int64_t nl = q->B * q->Tl * q->R;
	weft_status st = op_scratch(ctx, op, (size_t)(nl * g->size) * weft_dtype_size(dt), &blocks);

	if (!st)
		st = coll(ctx, g, op, WEFT_PASS_BACKWARD, WEFT_TP_ALL_GATHER, dt, dy_local, nl,
			  blocks, nl * g->size);
	return st ? st : permute(ctx, dt, q, g->size, blocks, dx_seq, 1, 1);
}

static weft_status split_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tp_group *g = n->saved[0];
	void *dx = bw_grad(n, 0);
	seq_geom q = geom(n->out, g->size, 1);

	return dx ? gather_into(ctx, g, n->op, DT(n->out), &q, n->out->grad->data, dx) : WEFT_OK;
}

static weft_status seq_output(weft_ctx *ctx, const char *op, const weft_tensor *x, int64_t T,
			      weft_tensor **out)
{
	int64_t shape[WEFT_MAX_DIMS];

	memcpy(shape, x->shape, sizeof(shape));
	shape[1] = T;
	return op_output(ctx, op, DT(x), x->ndim, shape, out);
}

weft_status weft_tp_seq_split(weft_ctx *ctx, weft_tp_group *g, weft_tensor *x,
			      weft_tensor **out)
{
	const char *op = "tp_seq_split";
	weft_tensor *y;
	seq_geom q;
	weft_status st;

	*out = NULL;
	if ((st = check(ctx, op, g, x, 1)))
		return st;
	q = geom(x, g->size, 0);
	if ((st = seq_output(ctx, op, x, q.Tl, &y)) ||
	    (st = local_part(ctx, DT(x), &q, g->rank, x->data, y->data, 1, 0)) ||
	    (st = record(ctx, op, split_backward, x, y, g, 0)))
		return st;
	*out = y;
	return WEFT_OK;
}

/* ---- sequence gather: all-gather forward; reduce-scatter or split back ---- */

/* dx (B, Tl, R) += reduce_scatter(dy (B, T, R)) along T */
static weft_status scatter_into(weft_ctx *ctx, weft_tp_group *g, const char *op, weft_dtype dt,
				const seq_geom *q, void *dy_seq, void *dx_local, weft_pass pass)
{
	void *blocks, *mine;
	int64_t nl = q->B * q->Tl * q->R;
	size_t es = weft_dtype_size(dt);
	weft_status st = op_scratch(ctx, op, (size_t)(nl * g->size) * es, &blocks);

	if (!st)
		st = op_scratch(ctx, op, (size_t)nl * es, &mine);
	if (!st)
		st = permute(ctx, dt, q, g->size, blocks, dy_seq, 0, 0);
	if (!st)
		st = coll(ctx, g, op, pass, WEFT_TP_REDUCE_SCATTER, dt, blocks, nl * g->size, mine,
			  nl);
	if (st)
		return st;
	if (pass == WEFT_PASS_FORWARD)
		return ctx->k->copy(ctx->kctx, dx_local, mine, (size_t)nl * es,
				    WEFT_COPY_DEVICE_TO_DEVICE);
	return ctx->k->axpy(ctx->kctx, dt, nl, 1.0f, mine, dx_local);
}

static weft_status gather_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tp_group *g = n->saved[0];
	void *dx = bw_grad(n, 0);
	seq_geom q = geom(n->out, g->size, 0);

	if (!dx)
		return WEFT_OK;
	if (n->i[0] == WEFT_TP_BW_SPLIT)
		return local_part(ctx, DT(n->out), &q, g->rank, n->out->grad->data, dx, 1, 1);
	return scatter_into(ctx, g, n->op, DT(n->out), &q, n->out->grad->data, dx,
			    WEFT_PASS_BACKWARD);
}

weft_status weft_tp_seq_gather(weft_ctx *ctx, weft_tp_group *g, weft_tensor *x, weft_tp_bw bw,
			       weft_tensor **out)
{
	const char *op = "tp_seq_gather";
	weft_tensor *y;
	void *blocks;
	seq_geom q;
	int64_t nl;
	weft_status st;

	*out = NULL;
	if ((st = check(ctx, op, g, x, 0)))
		return st;
	q = geom(x, g->size, 1);
	nl = q.B * q.Tl * q.R;
	if ((st = seq_output(ctx, op, x, q.T, &y)) ||
	    (st = op_scratch(ctx, op, (size_t)(nl * g->size) * weft_dtype_size(DT(x)), &blocks)) ||
	    (st = coll(ctx, g, op, WEFT_PASS_FORWARD, WEFT_TP_ALL_GATHER, DT(x), x->data, nl,
		       blocks, nl * g->size)) ||
	    (st = permute(ctx, DT(x), &q, g->size, blocks, y->data, 1, 0)) ||
	    (st = record(ctx, op, gather_backward, x, y, g, bw)))
		return st;
	*out = y;
	return WEFT_OK;
}

/* ---- sequence reduce-scatter: reduce-scatter forward, all-gather back ---- */

static weft_status rs_backward(weft_ctx *ctx, weft_tape_node *n)
{
	weft_tp_group *g = n->saved[0];
	void *dx = bw_grad(n, 0);
	seq_geom q = geom(n->out, g->size, 1);

	return dx ? gather_into(ctx, g, n->op, DT(n->out), &q, n->out->grad->data, dx) : WEFT_OK;
}

weft_status weft_tp_seq_reduce_scatter(weft_ctx *ctx, weft_tp_group *g, weft_tensor *x,
				       weft_tensor **out)
{
	const char *op = "tp_seq_reduce_scatter";
	weft_tensor *y;
	seq_geom q;
	weft_status st;

	*out = NULL;
	if ((st = check(ctx, op, g, x, 1)))
		return st;
	q = geom(x, g->size, 0);
	if ((st = seq_output(ctx, op, x, q.Tl, &y)) ||
	    (st = scatter_into(ctx, g, op, DT(x), &q, x->data, y->data, WEFT_PASS_FORWARD)) ||
	    (st = record(ctx, op, rs_backward, x, y, g, 0)))
		return st;
	*out = y;
	return WEFT_OK;
}
