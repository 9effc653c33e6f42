/* strategy "dp": one process, several devices (PyTorch's DataParallel).
 * Each device holds a replica of the model (made by the trainer through
 * env->replica_create) driven by its own thread; on the CPU the "devices"
 * are threads sharing the cores. One step: scatter every micro-batch's rows
 * over the replicas, forward and backward on each (gradients accumulate in
 * each replica), reduce the replicas' gradients into replica 0 (each
 * thread sums one slice of the flat buffer), step the optimizer on replica
 * 0, broadcast its parameters back to every replica. As PyTorch's
 * documentation says, ddp (one process per device) is the recommended
 * choice; dp logs that once (per load of the plugin, i.e. once per
 * process for a trainer, which keeps its plugins loaded). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "replicated.h"
#include "replicated_plan.h"

enum { TASK_NONE = 0, TASK_FORWARD, TASK_REDUCE, TASK_BROADCAST, TASK_EXIT };

struct dp;

typedef struct dp_replica {
	struct dp *s;
	int32_t index;
	void *handle;            /* the trainer's replica; NULL for replica 0 */
	weft_params *params;
	weft_ctx *ctx;
	float *flat, *flat_grad;
	weft_micro_batch *parts; /* this step's slices of the micro-batches */
	weft_tensor *views;      /* their inputs and targets, 2 per micro-batch */
	size_t cap_parts;
	pthread_t thread;
	int started;
	/* results of the last task */
	double loss_sum;
	weft_status st;
	char err[1024];
} dp_replica;

typedef struct dp {
	replicated rep;
	const weft_strategy_env *env;
	int32_t n;               /* replicas (devices) */
	dp_replica *r;

	pthread_mutex_t mu;
	pthread_cond_t go, done;
	int sync_ready;
	uint64_t gen;            /* task generation */
	int task;
	int pending;             /* workers still on the current task */

	const weft_step_input *in;
	int64_t rows;            /* rows of the whole step */
} dp;

static size_t dtype_bytes(int32_t dt)
{
	switch (dt) {
	case WEFT_F32: case WEFT_I32: return 4;
	case WEFT_F16: case WEFT_BF16: case WEFT_U16: return 2;
	case WEFT_I64: return 8;
	case WEFT_U8: return 1;
	default: return 0;
	}
}

/* A borrowed view of rows [lo, lo + n) of t (dim 0). */
static void slice_rows(const weft_tensor *t, int64_t lo, int64_t n, weft_tensor *out)
{
	size_t row = (size_t)g_host->tensor_numel(t) * dtype_bytes(t->dtype) /
		     (size_t)(t->shape[0] ? t->shape[0] : 1);

	*out = *t;
	out->shape[0] = n;
	out->data = (char *)t->data + (size_t)lo * row;
	out->offset = t->offset + (size_t)lo * row;
	out->flags &= ~(uint32_t)(WEFT_TENSOR_OWNS_DATA | WEFT_TENSOR_REQUIRES_GRAD |
				  WEFT_TENSOR_GRAD_IN_ARENA);
	out->grad = NULL;
	out->producer = NULL;
}

/* Rows of a micro-batch of `rows` that replica d takes: [lo, hi). */
static void share(int64_t rows, int32_t n, int32_t d, int64_t *lo, int64_t *hi)
{
	*lo = rows * d / n;
	*hi = rows * (d + 1) / n;
}

/* Cuts this replica's rows out of every micro-batch of the step into
 * r->parts (grown when a step has more micro-batches than any before). */
static weft_status replica_slices(dp *s, dp_replica *r)
{
	const weft_step_input *in = s->in;

	if (in->n_micro > r->cap_parts) {
		free(r->parts);
		free(r->views);
		r->parts = calloc(in->n_micro, sizeof(*r->parts));
		r->views = calloc(2 * in->n_micro, sizeof(*r->views));
		r->cap_parts = r->parts && r->views ? in->n_micro : 0;
		if (!r->cap_parts)
			return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'dp': out of memory "
						 "for %zu micro-batches", in->n_micro);
	}
	for (size_t m = 0; m < in->n_micro; m++) {
		const weft_micro_batch *b = &in->micro[m];
		weft_tensor *x = &r->views[2 * m], *y = &r->views[2 * m + 1];
		int64_t lo, hi;

		share(b->rows, s->n, r->index, &lo, &hi);
		slice_rows(b->data.inputs, lo, hi - lo, x);
		slice_rows(b->data.targets, lo, hi - lo, y);
		r->parts[m] = (weft_micro_batch){
			.data = { .inputs = x, .targets = y },
			.rows = hi - lo,
			.row_offset = b->row_offset + lo,
		};
	}
	return WEFT_OK;
}

/* One replica's slice of a micro-batch; an empty slice runs nothing. */
static weft_status replica_micro(void *user, size_t i, const weft_micro_batch *part,
				 double loss_scale, double *loss)
{
	dp_replica *r = user;
	const weft_strategy_env *env = r->s->env;

	(void)i;
	if (!part->rows)
		return WEFT_OK;
	if (r->index == 0)
		return env->forward_backward(env->trainer, part, loss_scale, loss);
	return env->replica_forward_backward(env->trainer, r->handle, part, loss_scale, loss);
}

/* Every replica steps its context for every micro-batch, even one whose
 * slice is empty, so their step counters (the dropout keys) stay equal;
 * each slice's loss is weighted by the whole step's rows. */
static weft_status replica_forward(dp *s, dp_replica *r)
{
	weft_accumulate acc = weft_accumulate_env(g_host, s->env);
	weft_status st;

	r->loss_sum = 0.0;
	st = replica_slices(s, r);
	if (st)
		return st;
	acc.ctx = r->ctx;
	acc.zero = r->params;
	acc.run = replica_micro;
	acc.user = r;
	return weft_step_accumulate(&acc, r->parts, s->in->n_micro, s->rows, &r->loss_sum);
}

/* Slice d of the flat buffer: replica 0's gradient += every other's. */
static void reduce_slice(dp *s, int32_t d)
{
	int64_t lo = s->rep.numel * d / s->n, hi = s->rep.numel * (d + 1) / s->n;
	float *g0 = s->r[0].flat_grad;

	for (int32_t k = 1; k < s->n; k++) {
		const float *g = s->r[k].flat_grad;

		for (int64_t i = lo; i < hi; i++)
			g0[i] += g[i];
	}
}

static void run_task(dp *s, dp_replica *r, int task)
{
	r->st = WEFT_OK;
	switch (task) {
	case TASK_FORWARD:
		r->st = replica_forward(s, r);
		if (r->st)
			snprintf(r->err, sizeof(r->err), "%s", g_host->error_last());
		break;
	case TASK_REDUCE:
		reduce_slice(s, r->index);
		break;
	case TASK_BROADCAST:
		if (r->index)
			memcpy(r->flat, s->r[0].flat, (size_t)s->rep.numel * sizeof(float));
		break;
	default:
		break;
	}
}

static void *worker(void *arg)
{
	dp_replica *r = arg;
	dp *s = r->s;
	uint64_t seen = 0;

	for (;;) {
		int task;

		pthread_mutex_lock(&s->mu);
		while (s->gen == seen)
			pthread_cond_wait(&s->go, &s->mu);
		seen = s->gen;
		task = s->task;
		pthread_mutex_unlock(&s->mu);
		if (task == TASK_EXIT)
			return NULL;
		run_task(s, r, task);
		pthread_mutex_lock(&s->mu);
		if (--s->pending == 0)
			pthread_cond_signal(&s->done);
		pthread_mutex_unlock(&s->mu);
	}
}

/* Runs `task` on every replica (replica 0 on this thread) and waits. */
static weft_status run_all(dp *s, int task)
{
	pthread_mutex_lock(&s->mu);
	s->task = task;
	s->pending = s->n - 1;
	s->gen++;
	pthread_cond_broadcast(&s->go);
	pthread_mutex_unlock(&s->mu);
	run_task(s, &s->r[0], task);
	pthread_mutex_lock(&s->mu);
	while (s->pending > 0)
		pthread_cond_wait(&s->done, &s->mu);
	pthread_mutex_unlock(&s->mu);
	for (int32_t d = 0; d < s->n; d++)
		if (s->r[d].st)
			return g_host->error_set(s->r[d].st, "strategy 'dp': device %d: %s", d,
						 s->r[d].err);
	return WEFT_OK;
}

static int env_has_replicas(const weft_strategy_env *env)
{
	return env->struct_size >= offsetof(weft_strategy_env, reserved2) &&
	       env->replica_create && env->replica_forward_backward && env->replica_free;
}

static weft_status dp_create(const weft_cfg *section, const weft_strategy_env *env, void **out)
{
	static int told;
	int64_t devices = 0;
	dp *s;
	weft_status st;

	if (section)
		g_host->cfg_get(section, "name");
	if (env_has_replicas(env))
		devices = env->n_devices;
	st = g_host->cfg_int(section, "devices", devices > 0 ? devices : 1, &devices);
	if (st)
		return st;
	if (devices < 1 || devices > 256)
		return g_host->cfg_error(g_host->cfg_get(section, "devices"),
					 "must be between 1 and 256, got %lld", (long long)devices);
	if (env->world_size != 1)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy 'dp' runs in one process, but the world size is "
					 "%d; use strategy: ddp for several processes",
					 env->world_size);
	if (env->device.type != WEFT_DEVICE_CPU)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy 'dp' spreads over CPU threads only: on GPUs "
					 "one process would drive every device, and each step "
					 "would reduce all replicas' gradients into one device "
					 "and copy the parameters back out, serialised behind "
					 "that device, while ddp (one process per GPU) "
					 "all-reduces buckets during backward; set "
					 "trainer.devices to the GPU count and use strategy: ddp");
	if (devices > 1 && !env_has_replicas(env))
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy 'dp' needs model replicas, and this trainer "
					 "does not provide replica_create; use strategy: ddp");
	s = calloc(1, sizeof(*s));
	if (!s)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'dp': out of memory");
	s->env = env;
	s->n = (int32_t)devices;
	if (!told) {
		told = 1;
		g_host->log(WEFT_LOG_WARN, "strategy 'dp' runs %d replicas in one process; "
			    "strategy: ddp (one process per device) is the recommended choice "
			    "even on one machine, as PyTorch's documentation says", s->n);
	}
	*out = s;
	return WEFT_OK;
}

static weft_status dp_setup(void *p)
{
	dp *s = p;
	const weft_strategy_env *env = s->env;
	weft_tensor *flat, *grad;
	weft_status st;

	st = replicated_init(&s->rep, env);
	if (st)
		return st;
	s->r = calloc((size_t)s->n, sizeof(*s->r));
	if (!s->r)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'dp': out of memory");
	if (pthread_mutex_init(&s->mu, NULL) || pthread_cond_init(&s->go, NULL) ||
	    pthread_cond_init(&s->done, NULL))
		return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'dp': pthread init failed");
	s->sync_ready = 1;
	for (int32_t d = 0; d < s->n; d++) {
		dp_replica *r = &s->r[d];

		r->s = s;
		r->index = d;
		if (d == 0) {
			r->params = env->params;
			r->ctx = env->ctx;
		} else {
			st = env->replica_create(env->trainer, d, env->device, &r->handle,
						 &r->params, &r->ctx);
			if (st)
				return g_host->error_wrap(st, "strategy 'dp': making replica %d", d);
		}
		g_host->params_flat(r->params, WEFT_F32, &flat, &grad);
		if (!flat || !grad || g_host->tensor_numel(flat) != s->rep.numel)
			return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'dp': replica %d's "
						 "parameters do not match the model's (%lld "
						 "elements)", d, (long long)s->rep.numel);
		r->flat = flat->data;
		r->flat_grad = grad->data;
		if (d)
			memcpy(r->flat, s->rep.params, (size_t)s->rep.numel * sizeof(float));
	}
	for (int32_t d = 1; d < s->n; d++) {
		if (pthread_create(&s->r[d].thread, NULL, worker, &s->r[d]))
			return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'dp': cannot start "
						 "the thread of device %d", d);
		s->r[d].started = 1;
	}
	return WEFT_OK;
}

static weft_status dp_train_step(void *p, const weft_step_input *in, weft_step_report *out)
{
	dp *s = p;
	double loss_sum = 0.0;
	int64_t t1;
	weft_step_clock clock;
	weft_status st;

	weft_step_clock_start(&clock);
	s->in = in;
	s->rows = weft_step_rows(in->micro, in->n_micro);
	st = run_all(s, TASK_FORWARD);
	if (st)
		return st;
	for (int32_t d = 0; d < s->n; d++)
		loss_sum += s->r[d].loss_sum;
	t1 = weft_clock_ns();
	if (s->n > 1)
		run_all(s, TASK_REDUCE);
	out->comm_ns = weft_clock_ns() - t1;
	st = replicated_step(&s->rep, &in->optim, 1.0, &out->grad_norm);
	if (st)
		return st;
	replicated_report(&s->rep, out);
	t1 = weft_clock_ns();
	if (s->n > 1)
		run_all(s, TASK_BROADCAST);
	out->comm_ns += weft_clock_ns() - t1;
	out->exposed_comm_ns = out->comm_ns;
	/* bytes moved between devices: every replica's gradients into device
	 * 0, device 0's parameters out to every replica */
	out->comm_elements = 2 * (int64_t)(s->n - 1) * s->rep.numel;
	out->comm_bytes = out->comm_elements * 4;
	out->comm_calls = s->n > 1 ? 2 : 0;
	out->loss = loss_sum / (double)s->rows;
	weft_step_clock_finish(&clock, out);
	return WEFT_OK;
}

static weft_status dp_eval_step(void *p, const weft_micro_batch *b, weft_eval_report *out)
{
	dp *s = p;

	for (int32_t d = 1; d < s->n; d++)
		g_host->ctx_step_begin(s->r[d].ctx);
	g_host->ctx_step_begin(s->env->ctx);
	return s->env->evaluate(s->env->trainer, b, out);
}

static weft_status dp_state(void *p, weft_strategy_state *out)
{
	dp *s = p;

	return replicated_state(&s->rep, out);
}

static void dp_destroy(void *p)
{
	dp *s = p;

	if (!s)
		return;
	if (s->sync_ready) {
		pthread_mutex_lock(&s->mu);
		s->task = TASK_EXIT;
		s->gen++;
		pthread_cond_broadcast(&s->go);
		pthread_mutex_unlock(&s->mu);
	}
	for (int32_t d = 1; s->r && d < s->n; d++) {
		if (s->r[d].started)
			pthread_join(s->r[d].thread, NULL);
		if (s->r[d].handle)
			s->env->replica_free(s->env->trainer, s->r[d].handle);
	}
	for (int32_t d = 0; s->r && d < s->n; d++) {
		free(s->r[d].parts);
		free(s->r[d].views);
	}
	if (s->sync_ready) {
		pthread_cond_destroy(&s->done);
		pthread_cond_destroy(&s->go);
		pthread_mutex_destroy(&s->mu);
	}
	free(s->r);
	replicated_fini(&s->rep);
	free(s);
}

const weft_strategy_ops weft_strategy_dp = {
	.head = WEFT_PLUGIN_HEAD(weft_strategy_ops, "dp"),
	.create = dp_create,
	.setup = dp_setup,
	.train_step = dp_train_step,
	.eval_step = dp_eval_step,
	.state = dp_state,
	.destroy = dp_destroy,
	.memory_plan = dp_memory_plan,
};
