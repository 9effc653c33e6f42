/* Vocabulary parallelism (Megatron): the token embedding split by rows
 * over the tensor-parallel group, the tied head's logits split by vocab
 * columns, and the cross-entropy / accuracy over such split logits.
 *
 * Rank r holds vocabulary rows [r * Vl, (r + 1) * Vl). The embedding
 * looks up the ids this rank owns and gives zero rows for the others (the
 * caller sums the parts with weft_tp_reduce). The cross-entropy never
 * gathers the logits: per row it all-reduces the local maxima (MAX), then
 * the local sums of exp(z - max) together with the target's logit, which
 * only its owner contributes (SUM); its backward is local.
 *
 * The embedding is composed from the kernel table (it runs on any device).
 * The cross-entropy's per-row passes over the logits are the table's
 * vocab_ce_stats and vocab_ce_backward (weft/device.h, since ABI 1.4), so
 * the logits never leave the device: the collectives work on the rows'
 * statistics in device buffers, and only those statistics (three doubles
 * a row) come to the host for the mean. A table without those members
 * (an older or a third party's) gets the same loops on the host, on a
 * host copy of the logits. The accuracy (evaluation only, never recorded)
 * runs its arg-max on a host copy. */
#include <math.h>
#include <string.h>

#include "tensor/tensor_impl.h"
#include "tp/tp_impl.h"
#include "weft/step.h"

#define DT(t) ((weft_dtype)(t)->dtype)

static int on_cpu(const weft_ctx *ctx)
{
	return weft_ctx_device(ctx).type == WEFT_DEVICE_CPU;
}

/* Host scratch for this step (the tape arena, reset with the step). */
static weft_status host_scratch(weft_ctx *ctx, const char *op, size_t bytes, void **out)
{
	weft_status st = weft_arena_alloc(ctx->tape_arena, bytes ? bytes : 1, 64, out);

	return st ? weft_error_wrap(st, "%s: host scratch of %zu bytes", op, bytes) : WEFT_OK;
}

/* The host view of device data: the data itself on the CPU, else a copy. */
static weft_status host_view(weft_ctx *ctx, const char *op, void *data, size_t bytes,
			     void **out)
{
	weft_status st;

	if (on_cpu(ctx)) {
		*out = data;
		return WEFT_OK;
	}
	if ((st = host_scratch(ctx, op, bytes, out)))
		return st;
	/* ordered after ctx's kernels; returns when the data is here */
	return ctx->k->copy(ctx->kctx, *out, data, bytes, WEFT_COPY_DEVICE_TO_HOST);
}

/* Ids or targets (I32 / I64) as host int64. */
static weft_status host_ids(weft_ctx *ctx, const char *op, const weft_tensor *t, int64_t **out)
{
	int64_t n = weft_tensor_numel(t);
	void *raw;
	weft_status st;

	if ((st = host_scratch(ctx, op, (size_t)n * sizeof(int64_t), (void **)out)) ||
	    (st = host_view(ctx, op, t->data, weft_tensor_nbytes(t), &raw)))
		return st;
	for (int64_t i = 0; i < n; i++)
		(*out)[i] = t->dtype == WEFT_I64 ? ((const int64_t *)raw)[i] :
						   (int64_t)((const int32_t *)raw)[i];
	return WEFT_OK;
}

/* One counted all-reduce of F64 values over the group, in place: host
 * memory, or with on_device memory of ctx's device that kernels queued on
 * ctx write (the backend reads it after them: weft/comm.h). */
static weft_status reduce_f64(weft_ctx *ctx, weft_tp_group *g, const char *op, weft_pass pass,
			      double *v, int64_t n, weft_comm_redop how, int on_device)
{
	weft_device dev = weft_ctx_device(ctx);
	int cuda = on_device && dev.type == WEFT_DEVICE_CUDA;
	weft_comm_buf b = { .data = v, .count = n, .dtype = WEFT_COMM_F64,
			    .device = cuda ? WEFT_COMM_DEVICE_CUDA : WEFT_COMM_DEVICE_CPU,
			    .device_index = cuda ? dev.index : 0 };
	int64_t t0 = weft_clock_ns();
	weft_status st = g->ops->all_reduce(g->comm, &b, &b, how, NULL);

	if (st)
		return weft_error_wrap(st, "%s (%s, tp rank %d of %d)", op,
				       pass == WEFT_PASS_FORWARD ? "forward" : "backward",
				       (int)g->rank, (int)g->size);
	g->stats.calls[pass][WEFT_TP_ALL_REDUCE]++;
	g->stats.elements[pass][WEFT_TP_ALL_REDUCE] += n;
	g->stats.bytes[pass][WEFT_TP_ALL_REDUCE] += n * (int64_t)sizeof(double);
	g->stats.ns += weft_clock_ns() - t0;
	return WEFT_OK;
}

static weft_status check_group(const char *op, const weft_tp_group *g)
{
	if (!g || !g->comm)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: this model was built for tensor "
				      "parallelism but no communicator is bound to its tp group; "
				      "run it under strategy tp (which binds one)", op);
	return WEFT_OK;
}

/* ---- the embedding: this rank's rows, zeros elsewhere ---- */

static weft_status vembed_backward(weft_ctx *ctx, weft_tape_node *n)
{
	void *dw = bw_grad(n, 0), *dm;
	int64_t rows = n->i[0], C = n->i[1];
	weft_status st;

	if (!dw)
		return WEFT_OK;
	if ((st = op_scratch(ctx, n->op, (size_t)(rows * C) * sizeof(float), &dm)) ||
	    (st = ctx->k->mul(ctx->kctx, WEFT_F32, rows * C, n->out->grad->data, rows * C,
			      n->saved[1], dm)))
		return st;
	return ctx->k->embedding_backward(ctx->kctx, WEFT_F32, rows, C, WEFT_I32, n->saved[0], dm,
					  dw);
}

weft_status weft_tp_vocab_embedding(weft_ctx *ctx, weft_tp_group *g, weft_tensor *ids,
				    weft_tensor *w, weft_tensor **out)
{
	const char *op = "tp_vocab_embedding";
	int64_t shape[WEFT_MAX_DIMS], n, C, Vl, begin, *id;
	int32_t *local_h, *mask_h;
	void *local, *maskidx, *masktab, *maskexp;
	weft_tensor *y;
	weft_tape_node *node;
	weft_status st;

	*out = NULL;
	if ((st = check_group(op, g)) || (st = op_check(ctx, op, "ids", ids, 0)) ||
	    (st = op_check(ctx, op, "table", w, 1)))
		return st;
	if (w->ndim != 2 || DT(w) != WEFT_F32 || ids->ndim >= WEFT_MAX_DIMS)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: the table must be an F32 (rows, dim) "
				      "shard and ids at most %d-D", op, WEFT_MAX_DIMS - 1);
	n = weft_tensor_numel(ids);
	Vl = w->shape[0];
	C = w->shape[1];
	begin = (int64_t)g->rank * Vl;
	memcpy(shape, ids->shape, sizeof(shape));
	shape[ids->ndim] = C;
	if ((st = host_ids(ctx, op, ids, &id)) ||
	    (st = host_scratch(ctx, op, (size_t)n * sizeof(int32_t), (void **)&local_h)) ||
	    (st = host_scratch(ctx, op, (size_t)n * sizeof(int32_t), (void **)&mask_h)))
		return st;
	for (int64_t i = 0; i < n; i++) {
		int owned = id[i] >= begin && id[i] < begin + Vl;

		if (id[i] < 0 || id[i] >= Vl * g->size)
			return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: position %lld holds id %lld, "
					      "outside the vocabulary [0, %lld)", op, (long long)i,
					      (long long)id[i], (long long)(Vl * g->size));
		local_h[i] = owned ? (int32_t)(id[i] - begin) : 0;
		mask_h[i] = owned;
	}
	if ((st = op_pre_use(ctx, op, w, WEFT_PASS_FORWARD)) ||
	    (st = op_output(ctx, op, WEFT_F32, ids->ndim + 1, shape, &y)) ||
	    (st = op_scratch(ctx, op, (size_t)n * sizeof(int32_t), &local)) ||
	    (st = op_scratch(ctx, op, (size_t)n * sizeof(int32_t), &maskidx)) ||
	    (st = op_scratch(ctx, op, (size_t)(2 * C) * sizeof(float), &masktab)) ||
	    (st = op_scratch(ctx, op, (size_t)(n * C) * sizeof(float), &maskexp)))
		return st;
	/* the mask (n, C) from a two-row table {0, 1} looked up by ownership;
	 * the lookup of the local rows times the mask */
	if ((st = ctx->k->copy(ctx->kctx, local, local_h, (size_t)n * sizeof(int32_t),
			       WEFT_COPY_HOST_TO_DEVICE)) ||
	    (st = ctx->k->copy(ctx->kctx, maskidx, mask_h, (size_t)n * sizeof(int32_t),
			       WEFT_COPY_HOST_TO_DEVICE)) ||
	    (st = ctx->k->fill(ctx->kctx, WEFT_F32, C, 0.0f, masktab)) ||
	    (st = ctx->k->fill(ctx->kctx, WEFT_F32, C, 1.0f, (float *)masktab + C)))
		return st;
	if (n && C &&
	    ((st = ctx->k->embedding_forward(ctx->kctx, WEFT_F32, n, C, WEFT_I32, maskidx, 2,
					     masktab, maskexp)) ||
	     (st = ctx->k->embedding_forward(ctx->kctx, WEFT_F32, n, C, WEFT_I32, local, Vl,
					     w->data, y->data)) ||
	     (st = ctx->k->mul(ctx->kctx, WEFT_F32, n * C, y->data, n * C, maskexp, y->data))))
		return weft_error_wrap(st, "%s", op);
	if ((st = op_record(ctx, op, vembed_backward, y, 1, &w, &node)))
		return st;
	if (node) {
		node->i[0] = n;
		node->i[1] = C;
		node->saved[0] = local;
		node->saved[1] = maskexp;
	}
	*out = y;
	return WEFT_OK;
}

/* ---- the cross-entropy over vocab-split logits ---- */

/* Whether ctx's table computes the loss's per-row passes itself. */
static int table_vce(const weft_ctx *ctx)
{
	return WEFT_HAS_MEMBER(ctx->k, weft_kernel_table, vocab_ce_backward) &&
	       ctx->k->vocab_ce_stats && ctx->k->vocab_ce_backward;
}

/* What the backward reads. With on_device, z, mx and sum are the step's
 * device memory and targets the target tensor's; else z is a host view of
 * the logits, mx and sum host memory of the step. */
typedef struct vce_saved {
	const float *z;      /* logits (rows, Vl) */
	const int64_t *tg;   /* targets, host */
	const void *targets; /* targets, on the device (on_device) */
	weft_dtype idx_dt;
	int on_device;
	const double *mx;    /* global row maxima */
	const double *sum;   /* global sums of exp(z - max) */
	double count;        /* counted rows */
	int64_t rows, Vl, begin, ignore;
} vce_saved;

static weft_status vce_backward(weft_ctx *ctx, weft_tape_node *n)
{
	const vce_saved *v = n->saved[0];
	void *dx = bw_grad(n, 0);
	float dloss, *acc, *dev = NULL;
	size_t bytes = (size_t)(v->rows * v->Vl) * sizeof(float);
	double scale;
	weft_status st;

	if (!dx || v->count == 0)
		return WEFT_OK;
	if ((st = ctx->k->copy(ctx->kctx, &dloss, n->out->grad->data, sizeof(float),
			       WEFT_COPY_DEVICE_TO_HOST)))
		return st;
	scale = (double)dloss / v->count;
	if (v->on_device)
		return ctx->k->vocab_ce_backward(ctx->kctx, v->rows, v->Vl, v->z, v->idx_dt,
						 v->targets, v->ignore, v->begin, v->mx, v->sum,
						 scale, dx);
	if (on_cpu(ctx)) {
		acc = dx;
	} else {
		if ((st = host_scratch(ctx, n->op, bytes, (void **)&acc)))
			return st;
		memset(acc, 0, bytes);
		dev = dx;
	}
	for (int64_t i = 0; i < v->rows; i++) {
		const float *z = v->z + i * v->Vl;
		float *d = acc + i * v->Vl;
		int64_t t = v->tg[i] - v->begin;

		if (v->tg[i] == v->ignore)
			continue;
		for (int64_t j = 0; j < v->Vl; j++)
			d[j] += (float)(exp((double)z[j] - v->mx[i]) / v->sum[i] * scale);
		if (t >= 0 && t < v->Vl)
			d[t] -= (float)scale;
	}
	if (dev) {
		void *tmp;

		if ((st = op_scratch(ctx, n->op, bytes, &tmp)) ||
		    (st = ctx->k->copy(ctx->kctx, tmp, acc, bytes, WEFT_COPY_HOST_TO_DEVICE)))
			return st;
		return ctx->k->axpy(ctx->kctx, WEFT_F32, v->rows * v->Vl, 1.0f, tmp, dev);
	}
	return WEFT_OK;
}

static weft_status vce_check(const char *op, const weft_tensor *logits,
			     const weft_tensor *targets)
{
	if (DT(logits) != WEFT_F32 || logits->ndim < 1 || targets->ndim != logits->ndim - 1 ||
	    memcmp(targets->shape, logits->shape, (size_t)targets->ndim * sizeof(int64_t)))
		return weft_error_set(WEFT_ERR_SHAPE, "%s: logits must be F32 (..., V/T) and targets "
				      "their shape without the last dim", op);
	return WEFT_OK;
}

/* The rows' global maxima (*mx) and [sums of exp(z - max) | the target's
 * logit] (*st2, 2 * rows), host memory, by the table's kernels on the
 * logits where they are: two all-reduces of device buffers (MAX, SUM);
 * the statistics come to the host for the mean. Fills v's device fields
 * for the backward. */
static weft_status vce_rows_table(weft_ctx *ctx, weft_tp_group *g, const char *op, vce_saved *v,
				  const weft_tensor *logits, const weft_tensor *targets,
				  const double **mx, const double **st2)
{
	size_t n = (size_t)v->rows;
	void *dmx, *dst, *hmx, *hst;
	weft_status st;

	if ((st = op_scratch(ctx, op, (n ? n : 1) * sizeof(double), &dmx)) ||
	    (st = op_scratch(ctx, op, (n ? 2 * n : 1) * sizeof(double), &dst)) ||
	    (st = ctx->k->vocab_ce_stats(ctx->kctx, v->rows, v->Vl, logits->data, DT(targets),
					 targets->data, v->begin, NULL, dmx)) ||
	    (st = reduce_f64(ctx, g, op, WEFT_PASS_FORWARD, dmx, v->rows, WEFT_COMM_MAX, 1)) ||
	    (st = ctx->k->vocab_ce_stats(ctx->kctx, v->rows, v->Vl, logits->data, DT(targets),
					 targets->data, v->begin, dmx, dst)) ||
	    (st = reduce_f64(ctx, g, op, WEFT_PASS_FORWARD, dst, 2 * v->rows, WEFT_COMM_SUM, 1)) ||
	    (st = host_view(ctx, op, dmx, n * sizeof(double), &hmx)) ||
	    (st = host_view(ctx, op, dst, 2 * n * sizeof(double), &hst)))
		return st;
	v->on_device = 1;
	v->z = logits->data;
	v->targets = targets->data;
	v->idx_dt = DT(targets);
	v->mx = dmx;
	v->sum = dst;
	*mx = hmx;
	*st2 = hst;
	return WEFT_OK;
}

/* As vce_rows_table, with the loops on the host over a host view of the
 * logits (a table without vocab_ce_stats). */
static weft_status vce_rows_host(weft_ctx *ctx, weft_tp_group *g, const char *op, vce_saved *v,
				 const weft_tensor *logits, const double **mx_out,
				 const double **st2_out)
{
	const int64_t *tg = v->tg;
	double *mx, *st2;
	void *zh;
	weft_status st;

	if ((st = host_view(ctx, op, logits->data, weft_tensor_nbytes(logits), &zh)) ||
	    (st = host_scratch(ctx, op, (size_t)v->rows * sizeof(double), (void **)&mx)) ||
	    (st = host_scratch(ctx, op, (size_t)(2 * v->rows) * sizeof(double), (void **)&st2)))
		return st;
	v->z = zh;
	for (int64_t i = 0; i < v->rows; i++) {
		const float *z = v->z + i * v->Vl;
		float m = -INFINITY;

		for (int64_t j = 0; j < v->Vl; j++)
			m = z[j] > m ? z[j] : m;
		mx[i] = m;
	}
	if ((st = reduce_f64(ctx, g, op, WEFT_PASS_FORWARD, mx, v->rows, WEFT_COMM_MAX, 0)))
		return st;
	/* st2: [sum of exp(z - max) | the target's logit] per row */
	for (int64_t i = 0; i < v->rows; i++) {
		const float *z = v->z + i * v->Vl;
		int64_t t = tg[i] - v->begin;
		double s = 0.0;

		for (int64_t j = 0; j < v->Vl; j++)
			s += exp((double)z[j] - mx[i]);
		st2[i] = s;
		st2[v->rows + i] = t >= 0 && t < v->Vl ? (double)z[t] : 0.0;
	}
	if ((st = reduce_f64(ctx, g, op, WEFT_PASS_FORWARD, st2, 2 * v->rows, WEFT_COMM_SUM, 0)))
		return st;
	v->mx = mx;
	v->sum = st2;
	*mx_out = mx;
	*st2_out = st2;
	return WEFT_OK;
}

weft_status weft_tp_vocab_cross_entropy(weft_ctx *ctx, weft_tp_group *g, weft_tensor *logits,
					weft_tensor *targets, int64_t ignore_index,
					weft_tensor **out)
{
	const char *op = "tp_vocab_cross_entropy";
	vce_saved *v;
	const double *mx, *st2;
	double loss = 0.0;
	float lossf;
	int64_t *tg, V;
	weft_tensor *y;
	weft_tape_node *node;
	weft_status st;

	*out = NULL;
	if ((st = check_group(op, g)) || (st = op_check(ctx, op, "logits", logits, 1)) ||
	    (st = op_check(ctx, op, "targets", targets, 0)) || (st = vce_check(op, logits, targets)) ||
	    (st = host_scratch(ctx, op, sizeof(*v), (void **)&v)))
		return st;
	v->rows = weft_tensor_numel(targets);
	v->Vl = logits->shape[logits->ndim - 1];
	v->begin = (int64_t)g->rank * v->Vl;
	v->ignore = ignore_index;
	v->on_device = 0;
	V = v->Vl * g->size;
	if ((st = op_pre_use(ctx, op, logits, WEFT_PASS_FORWARD)) ||
	    (st = host_ids(ctx, op, targets, &tg)))
		return st;
	v->tg = tg;
	for (int64_t i = 0; i < v->rows; i++)
		if (tg[i] != ignore_index && (tg[i] < 0 || tg[i] >= V))
			return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: row %lld has target %lld, "
					      "outside [0, %lld)", op, (long long)i,
					      (long long)tg[i], (long long)V);
	st = table_vce(ctx) ? vce_rows_table(ctx, g, op, v, logits, targets, &mx, &st2) :
			      vce_rows_host(ctx, g, op, v, logits, &mx, &st2);
	if (st)
		return st;
	v->count = 0;
	for (int64_t i = 0; i < v->rows; i++) {
		if (tg[i] == ignore_index)
			continue;
		loss += log(st2[i]) + mx[i] - st2[v->rows + i];
		v->count += 1;
	}
	lossf = v->count > 0 ? (float)(loss / v->count) : 0.0f;
	if ((st = op_output(ctx, op, WEFT_F32, 0, NULL, &y)) ||
	    (st = ctx->k->copy(ctx->kctx, y->data, &lossf, sizeof(float), WEFT_COPY_HOST_TO_DEVICE)) ||
	    (st = op_record(ctx, op, vce_backward, y, 1, &logits, &node)))
		return st;
	if (node)
		node->saved[0] = v;
	*out = y;
	return WEFT_OK;
}

weft_status weft_tp_vocab_accuracy(weft_ctx *ctx, weft_tp_group *g, weft_tensor *logits,
				   weft_tensor *targets, int64_t ignore_index, int64_t *correct,
				   int64_t *counted)
{
	const char *op = "tp_vocab_accuracy";
	int64_t rows, Vl, begin, *tg;
	double *best, *who;
	void *zh;
	weft_status st;

	*correct = *counted = 0;
	if ((st = check_group(op, g)) || (st = op_check(ctx, op, "logits", logits, 1)) ||
	    (st = op_check(ctx, op, "targets", targets, 0)) || (st = vce_check(op, logits, targets)))
		return st;
	rows = weft_tensor_numel(targets);
	Vl = logits->shape[logits->ndim - 1];
	begin = (int64_t)g->rank * Vl;
	if ((st = host_ids(ctx, op, targets, &tg)) ||
	    (st = host_view(ctx, op, logits->data, weft_tensor_nbytes(logits), &zh)) ||
	    (st = host_scratch(ctx, op, (size_t)rows * sizeof(double), (void **)&best)) ||
	    (st = host_scratch(ctx, op, (size_t)rows * sizeof(double), (void **)&who)))
		return st;
	/* the largest logit (MAX), then the lowest global index holding it (MIN) */
	for (int64_t i = 0; i < rows; i++) {
		const float *z = (const float *)zh + i * Vl;
		int64_t a = 0;

		for (int64_t j = 1; j < Vl; j++)
			a = z[j] > z[a] ? j : a;
		best[i] = Vl ? (double)z[a] : -INFINITY;
		who[i] = (double)(begin + a);
	}
	if ((st = reduce_f64(ctx, g, op, WEFT_PASS_FORWARD, best, rows, WEFT_COMM_MAX, 0)))
		return st;
	for (int64_t i = 0; i < rows; i++) {
		const float *z = (const float *)zh + i * Vl;
		int64_t a = (int64_t)who[i] - begin;

		if (!Vl || (double)z[a] != best[i])
			who[i] = INFINITY;
	}
	if ((st = reduce_f64(ctx, g, op, WEFT_PASS_FORWARD, who, rows, WEFT_COMM_MIN, 0)))
		return st;
	for (int64_t i = 0; i < rows; i++) {
		if (tg[i] == ignore_index)
			continue;
		*counted += 1;
		*correct += who[i] == (double)tg[i];
	}
	return WEFT_OK;
}
