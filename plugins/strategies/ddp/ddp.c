/* strategy "ddp": distributed data parallel (PyTorch's
 * DistributedDataParallel). Every rank holds the whole model and optimizer
 * state; rank 0's parameters are broadcast at setup. Gradients are
 * all-reduced (averaged) in buckets, contiguous slices of the flat
 * gradient buffer built from its end backward (parameters are declared in
 * forward order, so that is the reverse order of use), the first one small
 * (first_bucket_mb) so communication starts early. The GRAD_FINAL hook
 * counts the parameters of each bucket that are ready and launches the
 * bucket's all-reduce on the comm thread as soon as it is complete and
 * every earlier bucket was launched (every rank then issues the same
 * collectives in the same order), so communication overlaps the rest of
 * backward. Micro-batches before the last run without communication
 * (no_sync). After the last backward, parameters whose hook never fired
 * are an error naming them, or (find_unused_parameters) count as ready.
 * An optional hook compresses each bucket to bf16 or f16 for the wire:
 * the casts are the kernel table's convert on the context's compute
 * stream and the 16-bit copy is a buffer from its mem_alloc, so the hook
 * never touches gradient memory from the host and runs wherever the
 * gradients live (on the CPU the table's convert is weft/half.h's
 * rounding, bit for bit; on CUDA the comm backend is handed a buffer
 * tagged WEFT_COMM_DEVICE_CUDA and orders its reads after the cast). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/device.h"
#include "replicated.h"
#include "replicated_plan.h"

enum { HOOK_NONE = 0, HOOK_BF16 = 1, HOOK_FP16 = 2 };

typedef struct ddp_bucket {
	int64_t begin, end;      /* flat element range [begin, end) */
	size_t n_params, ready;  /* parameters in it / ready this step */
	weft_comm_work *work;    /* in flight, not yet waited on */
	int done_seen;           /* finished (seen by test or wait) */
	int64_t t_launch;
} ddp_bucket;

typedef struct ddp {
	replicated rep;
	const weft_strategy_env *env;
	const weft_comm_ops *ops;
	weft_comm *comm;
	int world;

	double bucket_cap_mb, first_bucket_mb;
	int find_unused, comm_hook;

	size_t n_params;
	int32_t *param_bucket;   /* per parameter index: its bucket, -1: not F32 */
	uint8_t *param_ready;
	ddp_bucket *buckets;
	size_t n_buckets, next_launch;
	uint16_t *half;          /* compressed copy of the gradients (comm_hook), in the
				  * gradients' memory (the kernel table's mem_alloc) */
	size_t half_bytes;
	const weft_kernel_table *k; /* the context's kernel table and device context */
	void *kctx;
	int64_t hook_handle;
	int hooked;
	int syncing;             /* the hook launches collectives (last micro-batch) */

	/* this step */
	int64_t busy_ns, last_done_ns, bytes, elements, calls;
	size_t n_micro;
	ddp_bucket loss;         /* the loss all-reduce, launched after every bucket */
	double red[2];           /* its buffer: loss sum, rows */
} ddp;

static const char *const hook_names[] = { "none", "bf16", "fp16", NULL };

static weft_comm_dtype wire_dtype(const ddp *s)
{
	return s->comm_hook == HOOK_BF16 ? WEFT_COMM_BF16 :
	       s->comm_hook == HOOK_FP16 ? WEFT_COMM_F16 : WEFT_COMM_F32;
}

/* The dtype the comm hook compresses gradients to (the kernel table's
 * convert rounds to nearest even). */
static weft_dtype hook_dtype(const ddp *s)
{
	return s->comm_hook == HOOK_BF16 ? WEFT_BF16 : WEFT_F16;
}

static weft_comm_device comm_device(const weft_strategy_env *env)
{
	return env->device.type == WEFT_DEVICE_CUDA ? WEFT_COMM_DEVICE_CUDA : WEFT_COMM_DEVICE_CPU;
}

static weft_status read_mb(const weft_cfg *section, const char *key, double def, double *out)
{
	weft_status st = g_host->cfg_float(section, key, def, out);

	if (st)
		return st;
	if (!(*out > 0.0 && *out <= 65536.0))
		return g_host->cfg_error(g_host->cfg_get(section, key),
					 "must be a size in MB in (0, 65536], got %g; buckets of "
					 "a few MB to a few tens of MB overlap best", *out);
	return WEFT_OK;
}

static weft_status ddp_create(const weft_cfg *section, const weft_strategy_env *env, void **out)
{
	ddp *s;
	weft_status st;

	s = calloc(1, sizeof(*s));
	if (!s)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'ddp': out of memory");
	if (section)
		g_host->cfg_get(section, "name");
	st = read_mb(section, "bucket_cap_mb", 25.0, &s->bucket_cap_mb);
	if (!st)
		st = read_mb(section, "first_bucket_mb", 1.0, &s->first_bucket_mb);
	if (!st)
		st = g_host->cfg_bool(section, "find_unused_parameters", 0, &s->find_unused);
	if (!st)
		st = g_host->cfg_choice(section, "comm_hook", hook_names, "none", &s->comm_hook);
	if (st)
		goto out_free;
	if (env->world_size > 1 && (!env->comm_ops || !env->world)) {
		st = g_host->error_set(WEFT_ERR_UNSUPPORTED,
				       "strategy 'ddp': world size is %d but the trainer gave no "
				       "communicator; set trainer.comm (gloo on CPUs, nccl on GPUs)",
				       env->world_size);
		goto out_free;
	}
	s->env = env;
	s->world = env->world_size;
	s->ops = env->comm_ops;
	s->comm = env->world;
	*out = s;
	return WEFT_OK;

out_free:
	free(s);
	return st;
}

/* The first parameter (in declaration order) after the "tail": the
 * leading parameters that together reach first_bucket_mb. They are used
 * first in forward (embeddings; a tied head's weight too), so their
 * gradients are final last, and the bucket holding them always waits for
 * the end of backward: it is kept as small as the first bucket, so little
 * communication is left exposed. */
static size_t tail_split(ddp *s)
{
	double have = 0.0, cap = s->first_bucket_mb * 1048576.0;

	for (size_t i = 0; i < s->n_params; i++) {
		weft_tensor *p = g_host->params_at(s->env->params, i);

		if (p->dtype != WEFT_F32 || !p->grad)
			continue;
		have += (double)g_host->tensor_numel(p) * 4.0;
		if (have >= cap)
			return i + 1;
	}
	return s->n_params;
}

/* Buckets from the end of the flat buffer backward, whole parameters each:
 * a bucket closes once it holds at least its cap (first_bucket_mb for the
 * first, bucket_cap_mb after), as PyTorch's bucket assignment does, and
 * also where the tail (tail_split) begins. */
static weft_status build_buckets(ddp *s)
{
	const float *base = s->rep.grads;
	double cap = s->first_bucket_mb * 1048576.0, have = 0.0;
	ddp_bucket *cur = NULL;
	size_t split;

	s->n_params = g_host->params_count(s->env->params);
	s->param_bucket = g_host->mem_alloc(WEFT_MEM_OTHER, s->n_params * sizeof(int32_t) + 1);
	s->param_ready = g_host->mem_calloc(WEFT_MEM_OTHER, s->n_params + 1);
	s->buckets = g_host->mem_calloc(WEFT_MEM_OTHER, (s->n_params + 1) * sizeof(ddp_bucket));
	if (!s->param_bucket || !s->param_ready || !s->buckets)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'ddp': out of memory for "
					 "%zu parameters' buckets", s->n_params);
	split = tail_split(s);
	for (size_t i = s->n_params; i-- > 0;) {
		weft_tensor *p = g_host->params_at(s->env->params, i);
		int64_t off, n;

		s->param_bucket[i] = -1;
		if (p->dtype != WEFT_F32 || !p->grad)
			continue;
		off = (const float *)p->grad->data - base;
		n = g_host->tensor_numel(p);
		if (cur && i + 1 == split) {
			cur = NULL;
			cap = s->bucket_cap_mb * 1048576.0;
		}
		if (!cur) {
			cur = &s->buckets[s->n_buckets++];
			cur->end = off + n;
			have = 0.0;
		}
		if (off + n != cur->begin && cur->n_params)
			return g_host->error_set(WEFT_ERR_INTERNAL,
						 "strategy 'ddp': parameter '%s' is not adjacent to the "
						 "next one in the flat gradient buffer", p->name);
		cur->begin = off;
		cur->n_params++;
		s->param_bucket[i] = (int32_t)(cur - s->buckets);
		have += (double)n * 4.0;
		if (have >= cap) {
			cur = NULL;
			cap = s->bucket_cap_mb * 1048576.0;
		}
	}
	if (s->n_buckets && s->buckets[s->n_buckets - 1].begin != 0)
		return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'ddp': buckets do not cover "
					 "the flat gradient buffer");
	return WEFT_OK;
}

/* Records the finish time of buckets whose collective completed, in
 * launch order (they finish in FIFO order on the comm thread), and adds
 * the time the comm thread spent on each to busy_ns. */
static void note_done(ddp *s, ddp_bucket *b, int64_t now)
{
	int64_t start = b->t_launch > s->last_done_ns ? b->t_launch : s->last_done_ns;

	b->done_seen = 1;
	s->busy_ns += now > start ? now - start : 0;
	s->last_done_ns = now;
}

static void poll_done(ddp *s)
{
	for (size_t k = 0; k < s->next_launch; k++) {
		ddp_bucket *b = &s->buckets[k];
		int done = 0;

		if (b->done_seen)
			continue;
		if (s->ops->test(b->work, &done) || !done)
			return;
		note_done(s, b, weft_clock_ns());
	}
}

static weft_status launch(ddp *s, ddp_bucket *b)
{
	int64_t n = b->end - b->begin;
	weft_comm_buf buf = {
		.data = s->rep.grads + b->begin,
		.count = n,
		.dtype = wire_dtype(s),
		.device = comm_device(s->env),
		.device_index = s->env->device.index,
	};
	weft_status st;

	if (s->comm_hook != HOOK_NONE) {
		st = s->k->convert(s->kctx, n, WEFT_F32, s->rep.grads + b->begin, hook_dtype(s),
				   s->half + b->begin);
		if (st)
			return g_host->error_wrap(st, "strategy 'ddp': casting gradient bucket %zu "
						  "to %s for comm_hook", (size_t)(b - s->buckets),
						  hook_names[s->comm_hook]);
		buf.data = s->half + b->begin;
	}
	b->t_launch = weft_clock_ns();
	st = s->ops->all_reduce(s->comm, &buf, &buf, WEFT_COMM_AVG, &b->work);
	if (st)
		return g_host->error_wrap(st, "strategy 'ddp': launching the all-reduce of gradient "
					  "bucket %zu (elements %lld..%lld)",
					  (size_t)(b - s->buckets), (long long)b->begin,
					  (long long)b->end);
	s->bytes += n * (int64_t)weft_comm_dtype_size(buf.dtype);
	s->elements += n;
	s->calls++;
	return WEFT_OK;
}

/* Launches every complete bucket whose predecessors were all launched. */
static weft_status launch_ready(ddp *s)
{
	weft_status st;

	while (s->next_launch < s->n_buckets) {
		ddp_bucket *b = &s->buckets[s->next_launch];

		if (b->ready < b->n_params)
			break;
		st = launch(s, b);
		if (st)
			return st;
		s->next_launch++;
	}
	return WEFT_OK;
}

static weft_status mark_ready(ddp *s, size_t i)
{
	int32_t k = s->param_bucket[i];

	if (k < 0 || s->param_ready[i])
		return WEFT_OK;
	s->param_ready[i] = 1;
	s->buckets[k].ready++;
	return WEFT_OK;
}

static weft_status grad_final_hook(struct weft_ctx *ctx, const struct weft_hook_event *ev,
				   void *user)
{
	ddp *s = user;
	int64_t i;

	(void)ctx;
	if (!s->syncing || !ev->param)
		return WEFT_OK;
	i = ev->param->param_index;
	if (i < 0 || (size_t)i >= s->n_params ||
	    g_host->params_at(s->env->params, (size_t)i) != ev->param)
		return WEFT_OK;
	mark_ready(s, (size_t)i);
	if (s->next_launch)
		poll_done(s);
	return launch_ready(s);
}

/* The comm hook's device services (the context's kernel table) and its
 * 16-bit copy of the flat gradient buffer, beside the gradients. */
static weft_status hook_init(ddp *s)
{
	void *half = NULL;
	weft_status st;

	if (!WEFT_HAS_MEMBER(g_host, weft_host, ctx_kernels) || !g_host->ctx_kernels)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy 'ddp': comm_hook %s "
					 "needs the host's ctx_kernels, which this weft lacks (an "
					 "older weft); rebuild the plugin and weft together, or "
					 "use comm_hook: none", hook_names[s->comm_hook]);
	g_host->ctx_kernels(s->env->ctx, &s->k, &s->kctx);
	if (!s->k || !s->k->convert || !s->k->mem_alloc || !s->k->mem_free)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy 'ddp': comm_hook %s "
					 "casts gradients with the kernel table's convert and "
					 "allocates with its mem_alloc, and the '%s' table lacks "
					 "them; use comm_hook: none, or rebuild the kernel library "
					 "with this weft", hook_names[s->comm_hook],
					 s->k ? s->k->head.name : "?");
	s->half_bytes = (size_t)s->rep.numel * sizeof(uint16_t);
	st = s->k->mem_alloc(s->env->device.index, WEFT_MEM_COMM, s->half_bytes, &half);
	if (st)
		return g_host->error_wrap(st, "strategy 'ddp': allocating the %s gradient buffer "
					  "(%zu bytes)", hook_names[s->comm_hook], s->half_bytes);
	s->half = half;
	return WEFT_OK;
}

static weft_status ddp_setup(void *p)
{
	ddp *s = p;
	weft_status st;

	st = replicated_init(&s->rep, s->env);
	if (st)
		return st;
	st = build_buckets(s);
	if (st)
		return st;
	if (s->world == 1)
		return WEFT_OK;
	if (s->comm_hook != HOOK_NONE) {
		st = hook_init(s);
		if (st)
			return st;
	}
	{
		weft_comm_buf all = {
			.data = s->rep.params,
			.count = s->rep.numel,
			.dtype = WEFT_COMM_F32,
			.device = comm_device(s->env),
			.device_index = s->env->device.index,
		};

		st = s->ops->broadcast(s->comm, &all, 0, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy 'ddp': broadcasting rank 0's %lld "
						  "parameters at setup", (long long)s->rep.numel);
	}
	st = g_host->ctx_add_hook(s->env->ctx, WEFT_HOOK_GRAD_FINAL, grad_final_hook, s,
				  &s->hook_handle);
	if (st)
		return st;
	s->hooked = 1;
	if (g_host->log_enabled(WEFT_LOG_DEBUG))
		g_host->log(WEFT_LOG_DEBUG, "ddp: %zu buckets over %lld gradients (first %.3g MB, "
			    "then %.3g MB), comm_hook %s", s->n_buckets, (long long)s->rep.numel,
			    s->first_bucket_mb, s->bucket_cap_mb, hook_names[s->comm_hook]);
	return WEFT_OK;
}

/* Waits for every launched bucket (after an error: ignoring theirs), so no
 * collective is left in flight. */
static void drain(ddp *s)
{
	for (size_t k = 0; k < s->n_buckets; k++) {
		ddp_bucket *b = &s->buckets[k];

		if (b->work) {
			s->ops->wait(b->work, -1);
			b->work = NULL;
		}
	}
}

static void reset_step(ddp *s)
{
	memset(s->param_ready, 0, s->n_params);
	for (size_t k = 0; k < s->n_buckets; k++) {
		s->buckets[k].ready = 0;
		s->buckets[k].work = NULL;
		s->buckets[k].done_seen = 0;
	}
	s->next_launch = 0;
	s->busy_ns = s->last_done_ns = s->bytes = s->elements = s->calls = 0;
}

/* After the last backward: every parameter must be ready, or (with
 * find_unused_parameters) counts as ready with whatever gradient it has. */
static weft_status settle_unused(ddp *s)
{
	char names[512];
	size_t n_unused = 0, len = 0;
	const char *first = NULL;

	names[0] = '\0';
	for (size_t i = 0; i < s->n_params; i++) {
		weft_tensor *p;

		if (s->param_bucket[i] < 0 || s->param_ready[i])
			continue;
		if (s->find_unused) {
			mark_ready(s, i);
			continue;
		}
		p = g_host->params_at(s->env->params, i);
		if (!first)
			first = p->name;
		if (n_unused < 8 && len < sizeof(names) - 1)
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s'%s'",
						n_unused ? ", " : "", p->name ? p->name : "?");
		n_unused++;
	}
	if (!n_unused)
		return launch_ready(s);
	return g_host->error_set(WEFT_ERR_INVALID_ARG,
				 "strategy 'ddp' (rank %d): %zu parameter%s received no gradient "
				 "in this step: %s%s. They were not used in forward, or what they "
				 "computed did not reach the loss. Remove them from the model, or "
				 "set trainer.strategy: {name: ddp, find_unused_parameters: true} "
				 "to all-reduce them as they are",
				 s->env->rank, n_unused, n_unused == 1 ? "" : "s", names,
				 n_unused > 8 ? ", ..." : "");
}

/* Waits for collective b; the time spent waiting is exposed unless it was
 * seen done before. */
static weft_status wait_work(ddp *s, ddp_bucket *b, int64_t *exposed)
{
	int64_t t0 = weft_clock_ns(), t1;
	weft_status w = s->ops->wait(b->work, -1);

	b->work = NULL;
	t1 = weft_clock_ns();
	if (!b->done_seen) {
		*exposed += t1 - t0;
		note_done(s, b, t1);
	}
	return w;
}

/* Waits for every bucket in launch order; the time spent in the waits is
 * exposed communication (every bucket was launched before, so from the
 * first wait on the comm thread is busy until the last is done: exposed
 * <= busy). Decompresses 16-bit buckets, which is the hook's compute and
 * not counted as exposed. */
static weft_status wait_all(ddp *s, int64_t *exposed)
{
	weft_status st = WEFT_OK;

	*exposed = 0;
	for (size_t k = 0; k < s->n_buckets; k++) {
		ddp_bucket *b = &s->buckets[k];
		weft_status w;

		if (!b->work)
			continue;
		w = wait_work(s, b, exposed);
		if (w && !st)
			st = g_host->error_wrap(w, "strategy 'ddp': all-reduce of gradient bucket "
						"%zu", k);
		if (!w && s->comm_hook != HOOK_NONE) {
			w = s->k->convert(s->kctx, b->end - b->begin, hook_dtype(s),
					  s->half + b->begin, WEFT_F32, s->rep.grads + b->begin);
			if (w && !st)
				st = g_host->error_wrap(w, "strategy 'ddp': casting gradient "
							"bucket %zu back from %s", k,
							hook_names[s->comm_hook]);
		}
	}
	return st;
}

/* One micro-batch: gradients are communicated during the last one's
 * backward only (no_sync before it). */
static weft_status ddp_micro(void *user, size_t i, const weft_micro_batch *b, double loss_scale,
			     double *loss)
{
	ddp *s = user;

	s->syncing = s->world > 1 && i + 1 == s->n_micro;
	return s->env->forward_backward(s->env->trainer, b, loss_scale, loss);
}

/* Launches the sum of this rank's loss sum and rows over the ranks. */
static weft_status reduce_loss(ddp *s, double loss_sum, int64_t rows)
{
	weft_comm_buf b = { .data = s->red, .count = 2, .dtype = WEFT_COMM_F64,
			    .device = WEFT_COMM_DEVICE_CPU };
	weft_status st;

	s->red[0] = loss_sum;
	s->red[1] = (double)rows;
	s->loss = (ddp_bucket){ .t_launch = weft_clock_ns() };
	st = s->ops->all_reduce(s->comm, &b, &b, WEFT_COMM_SUM, &s->loss.work);
	if (st)
		return g_host->error_wrap(st, "strategy 'ddp': all-reduce of the loss");
	s->calls++;
	return WEFT_OK;
}

/* Waits for every bucket, then for the loss, which the comm thread runs
 * after them; *loss_sum and *rows become the global batch's. */
static weft_status wait_step(ddp *s, double *loss_sum, int64_t *rows, int64_t *exposed)
{
	weft_status st = wait_all(s, exposed), w = wait_work(s, &s->loss, exposed);

	if (w && !st)
		st = g_host->error_wrap(w, "strategy 'ddp': all-reduce of the loss");
	if (st)
		return st;
	if (s->red[1] != (double)*rows * s->world)
		return g_host->error_set(WEFT_ERR_INVALID_ARG,
					 "strategy 'ddp': rank %d had %lld rows in this step "
					 "but all ranks together had %.0f, not %d x %lld; ddp "
					 "averages per-rank gradients, so every rank needs the "
					 "same rows per step (use the distributed sampler, "
					 "which pads or drops the uneven tail)",
					 s->env->rank, (long long)*rows, s->red[1], s->world,
					 (long long)*rows);
	*loss_sum = s->red[0];
	*rows = (int64_t)s->red[1];
	return WEFT_OK;
}

static weft_status ddp_train_step(void *p, const weft_step_input *in, weft_step_report *out)
{
	ddp *s = p;
	weft_accumulate acc = weft_accumulate_env(g_host, s->env);
	int64_t rows = weft_step_rows(in->micro, in->n_micro), exposed = 0;
	double loss_sum;
	weft_step_clock clock;
	weft_status st;

	weft_step_clock_start(&clock);
	reset_step(s);
	acc.run = ddp_micro;
	acc.user = s;
	s->n_micro = in->n_micro;
	st = weft_step_accumulate(&acc, in->micro, in->n_micro, rows, &loss_sum);
	if (!st && s->world > 1) {
		st = g_host->autograd_flush(s->env->ctx);
		if (!st)
			st = settle_unused(s);
		s->syncing = 0;
		/* a loss the trainer does not read is not reduced (weft/strategy.h) */
		if (!st && (in->flags & WEFT_STEP_LOSS_DEFERRED)) {
			st = wait_all(s, &exposed);
		} else {
			if (!st)
				st = reduce_loss(s, loss_sum, rows);
			if (!st)
				st = wait_step(s, &loss_sum, &rows, &exposed);
			out->metric_comm_bytes = (int64_t)sizeof(s->red);
		}
	}
	if (!st)
		st = replicated_step(&s->rep, &in->optim, 1.0, &out->grad_norm);
	if (st) {
		s->syncing = 0;
		drain(s);
		return st;
	}
	replicated_report(&s->rep, out);
	out->loss = loss_sum / (double)rows;
	out->comm_bytes = s->bytes + out->metric_comm_bytes;
	out->comm_elements = s->elements + (out->metric_comm_bytes ? 2 : 0);
	out->comm_calls = s->calls;
	out->comm_ns = s->busy_ns;
	out->exposed_comm_ns = exposed;
	weft_step_clock_finish(&clock, out);
	return WEFT_OK;
}

static weft_status ddp_eval_step(void *p, const weft_micro_batch *b, weft_eval_report *out)
{
	ddp *s = p;
	weft_eval_report mine = { .struct_size = sizeof(mine) };
	double red[4];
	weft_comm_buf buf = { .data = red, .count = 4, .dtype = WEFT_COMM_F64,
			      .device = WEFT_COMM_DEVICE_CPU };
	weft_status st;

	g_host->ctx_step_begin(s->env->ctx);
	st = s->env->evaluate(s->env->trainer, b, &mine);
	if (st)
		return st;
	red[0] = mine.loss_sum;
	red[1] = (double)mine.rows;
	red[2] = (double)mine.correct;
	red[3] = (double)mine.counted;
	if (s->world > 1) {
		st = s->ops->all_reduce(s->comm, &buf, &buf, WEFT_COMM_SUM, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy 'ddp': all-reduce of eval metrics");
	}
	out->loss_sum += red[0];
	out->rows += (int64_t)red[1];
	out->correct += (int64_t)red[2];
	out->counted += (int64_t)red[3];
	return WEFT_OK;
}

static weft_status ddp_state(void *p, weft_strategy_state *out)
{
	ddp *s = p;

	return replicated_state(&s->rep, out);
}

static void ddp_destroy(void *p)
{
	ddp *s = p;

	if (!s)
		return;
	if (s->hooked)
		g_host->ctx_remove_hook(s->env->ctx, s->hook_handle);
	if (s->half)
		s->k->mem_free(s->env->device.index, WEFT_MEM_COMM, s->half, s->half_bytes);
	g_host->mem_free(s->buckets);
	g_host->mem_free(s->param_ready);
	g_host->mem_free(s->param_bucket);
	replicated_fini(&s->rep);
	free(s);
}

const weft_strategy_ops weft_strategy_ddp = {
	.head = WEFT_PLUGIN_HEAD(weft_strategy_ops, "ddp"),
	.create = ddp_create,
	.setup = ddp_setup,
	.train_step = ddp_train_step,
	.eval_step = ddp_eval_step,
	.state = ddp_state,
	.destroy = ddp_destroy,
	.memory_plan = ddp_memory_plan,
};
