/* strategy "local_sgd": local SGD (Stich 2019; Lin et al. 2020, "Don't use
 * large mini-batches, use local SGD"). Every rank holds the whole model and
 * its own optimizer state and steps on its own gradients, with no
 * communication; every k optimizer steps the ranks average their
 * parameters (one all_reduce AVG of the flat parameter buffer). Compared
 * with ddp it communicates k times less often, at the price of ranks
 * drifting apart between averages.
 *
 *     trainer:
 *       strategy: {name: local_sgd, k: 4}
 *
 * Equivalence: with k: 1 and plain SGD (optimizer sgd without momentum),
 * averaging the parameters after each local step gives
 * mean_r(p - lr g_r) = p - lr mean_r(g_r), which is exactly ddp's step
 * (weight decay is linear in p and keeps the identity). With momentum or
 * Adam the optimizer state is per rank and not averaged, so the two differ
 * even at k: 1.
 *
 * Between averages the ranks' parameters differ: evaluation runs on each
 * rank's own parameters and the checkpoint holds rank 0's, so pick
 * trainer.max_steps (and validation points) at multiples of k when that
 * matters.
 *
 * Built only against the installed SDK (find_package(weft) or
 * `pkg-config --cflags weft`); it links nothing of weft: every service
 * comes from the host table given to weft_plugin_entry. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime (weft/step.h) under -std=c11 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/step.h>

#define LOCAL_SGD_MAX_SLOTS 8

static const weft_host *g_host;

typedef struct local_sgd {
	const weft_strategy_env *env;
	int64_t k;            /* average every k optimizer steps */
	int64_t since_avg;    /* local steps since the last average */
	float *params;        /* flat F32 parameters (borrowed from env->params) */
	float *grads;         /* flat F32 gradients (borrowed) */
	int64_t numel;
	size_t n_slots;
	float *slot_mem;      /* n_slots * numel floats, WEFT_MEM_OPTIM */
	float *slots[LOCAL_SGD_MAX_SLOTS];
} local_sgd;

static weft_comm_device comm_device(const weft_strategy_env *env)
{
	return env->device.type == WEFT_DEVICE_CUDA ? WEFT_COMM_DEVICE_CUDA : WEFT_COMM_DEVICE_CPU;
}

static weft_status local_sgd_create(const weft_cfg *section, const weft_strategy_env *env,
				    void **out)
{
	local_sgd *s;
	int64_t k = 4;
	weft_status st;

	if (section)
		g_host->cfg_get(section, "name");
	st = g_host->cfg_int(section, "k", 4, &k);
	if (st)
		return st;
	if (k < 1 || k > 1000000)
		return g_host->cfg_error(g_host->cfg_get(section, "k"),
					 "must be a number of optimizer steps between parameter "
					 "averages in 1..1000000, got %lld; k: 1 averages after every "
					 "step", (long long)k);
	if (env->world_size > 1 && (!env->comm_ops || !env->world))
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy 'local_sgd': world size is %d but the trainer gave "
					 "no communicator; set trainer.comm (gloo on CPUs)",
					 env->world_size);
	s = calloc(1, sizeof(*s));
	if (!s)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'local_sgd': out of memory");
	s->env = env;
	s->k = k;
	*out = s;
	return WEFT_OK;
}

/* Averages (or, with op SUM, adds) `count` elements of `dtype` at `data`
 * over every rank, in place, blocking. */
static weft_status all_reduce(local_sgd *s, void *data, int64_t count, weft_comm_dtype dtype,
			      weft_comm_redop op, weft_comm_device dev)
{
	weft_comm_buf b = {
		.data = data,
		.count = count,
		.dtype = dtype,
		.device = dev,
		.device_index = dev == WEFT_COMM_DEVICE_CUDA ? s->env->device.index : 0,
	};

	return s->env->comm_ops->all_reduce(s->env->world, &b, &b, op, NULL);
}

static weft_status local_sgd_setup(void *p)
{
	local_sgd *s = p;
	const weft_strategy_env *env = s->env;
	weft_tensor *flat = NULL, *flat_grad = NULL;
	weft_status st;

	g_host->params_flat(env->params, WEFT_F32, &flat, &flat_grad);
	if (!flat || !flat_grad)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy 'local_sgd': the model has no float32 parameters "
					 "with gradients; only float32 master weights are supported");
	s->params = flat->data;
	s->grads = flat_grad->data;
	s->numel = g_host->tensor_numel(flat);
	s->n_slots = env->optim_ops->state_slots(env->optim);
	if (s->n_slots > LOCAL_SGD_MAX_SLOTS)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy 'local_sgd': optimizer '%s' wants %zu state slots "
					 "per element; at most %d are supported",
					 env->optim_ops->head.name, s->n_slots, LOCAL_SGD_MAX_SLOTS);
	if (s->n_slots) {
		s->slot_mem = g_host->mem_calloc(WEFT_MEM_OPTIM,
						 s->n_slots * (size_t)s->numel * sizeof(float));
		if (!s->slot_mem)
			return g_host->error_set(WEFT_ERR_NOMEM,
						 "strategy 'local_sgd': out of memory for %zu "
						 "optimizer slots of %lld elements",
						 s->n_slots, (long long)s->numel);
		for (size_t k = 0; k < s->n_slots; k++)
			s->slots[k] = s->slot_mem + k * (size_t)s->numel;
	}
	if (env->world_size == 1)
		return WEFT_OK;
	/* Every rank starts from rank 0's parameters. */
	{
		weft_comm_buf all = {
			.data = s->params,
			.count = s->numel,
			.dtype = WEFT_COMM_F32,
			.device = comm_device(env),
			.device_index = env->device.index,
		};

		st = env->comm_ops->broadcast(env->world, &all, 0, NULL);
	}
	if (st)
		return g_host->error_wrap(st, "strategy 'local_sgd': broadcasting rank 0's %lld "
					  "parameters at setup", (long long)s->numel);
	return WEFT_OK;
}

/* Clips this rank's own gradients (when asked) and steps the optimizer
 * over every element with them. */
static weft_status local_step(local_sgd *s, const weft_optim_step_info *info, double *grad_norm)
{
	const weft_strategy_env *env = s->env;
	weft_optim_step_info in = *info;

	*grad_norm = -1.0;
	if (env->gradient_clip_val > 0) {
		const float *arr = s->grads;
		int64_t len = s->numel;
		double sumsq = g_host->clip_sum_squares(&arr, &len, 1) * in.grad_scale *
			       in.grad_scale;

		in.grad_scale *= g_host->clip_coef(sumsq, env->gradient_clip_val, grad_norm);
	}
	return env->optim_ops->step(env->optim, env->segs, env->nseg, s->params, s->grads,
				    s->slots, 0, s->numel, &in);
}

static weft_status local_sgd_train_step(void *p, const weft_step_input *in,
					weft_step_report *out)
{
	local_sgd *s = p;
	const weft_strategy_env *env = s->env;
	weft_accumulate acc = weft_accumulate_env(g_host, env);
	int64_t rows = weft_step_rows(in->micro, in->n_micro), t1;
	double loss_sum, red[2];
	weft_step_clock clock;
	weft_status st;

	weft_step_clock_start(&clock);
	/* this rank's mean loss: micro-batches weighted by their rows */
	st = weft_step_accumulate(&acc, in->micro, in->n_micro, rows, &loss_sum);
	if (st)
		return st;
	st = local_step(s, &in->optim, &out->grad_norm);
	if (st)
		return st;
	s->since_avg++;
	out->loss = loss_sum / (double)rows;
	if (env->world_size == 1)
		goto out_report;
	t1 = weft_clock_ns();
	if (s->since_avg >= s->k) {
		st = all_reduce(s, s->params, s->numel, WEFT_COMM_F32, WEFT_COMM_AVG,
				comm_device(env));
		if (st)
			return g_host->error_wrap(st, "strategy 'local_sgd' (rank %d): averaging "
						  "%lld parameters after step %lld", env->rank,
						  (long long)s->numel, (long long)in->optim.step);
		s->since_avg = 0;
		out->comm_bytes += s->numel * (int64_t)sizeof(float);
		out->comm_elements += s->numel;
		out->comm_calls++;
	}
	/* the reported loss is the global batch's mean, as every strategy's */
	red[0] = loss_sum;
	red[1] = (double)rows;
	st = all_reduce(s, red, 2, WEFT_COMM_F64, WEFT_COMM_SUM, WEFT_COMM_DEVICE_CPU);
	if (st)
		return g_host->error_wrap(st, "strategy 'local_sgd': all-reduce of the loss");
	out->loss = red[0] / red[1];
	out->metric_comm_bytes = (int64_t)sizeof(red);
	out->comm_bytes += (int64_t)sizeof(red);
	out->comm_elements += 2;
	out->comm_calls++;
	out->comm_ns = weft_clock_ns() - t1;
	out->exposed_comm_ns = out->comm_ns; /* blocking collectives: nothing overlaps */
out_report:
	weft_step_clock_finish(&clock, out);
	return WEFT_OK;
}

static weft_status local_sgd_eval_step(void *p, const weft_micro_batch *b, weft_eval_report *out)
{
	local_sgd *s = p;
	weft_eval_report mine = { .struct_size = sizeof(mine) };
	double red[4];
	weft_status st;

	g_host->ctx_step_begin(s->env->ctx);
	st = s->env->evaluate(s->env->trainer, b, &mine);
	if (st)
		return st;
	red[0] = mine.loss_sum;
	red[1] = (double)mine.rows;
	red[2] = (double)mine.correct;
	red[3] = (double)mine.counted;
	if (s->env->world_size > 1) {
		st = all_reduce(s, red, 4, WEFT_COMM_F64, WEFT_COMM_SUM, WEFT_COMM_DEVICE_CPU);
		if (st)
			return g_host->error_wrap(st, "strategy 'local_sgd': all-reduce of eval "
						  "metrics");
	}
	out->loss_sum += red[0];
	out->rows += (int64_t)red[1];
	out->correct += (int64_t)red[2];
	out->counted += (int64_t)red[3];
	return WEFT_OK;
}

static weft_status local_sgd_state(void *p, weft_strategy_state *out)
{
	local_sgd *s = p;

	out->struct_size = sizeof(*out);
	out->n_slots = (uint32_t)s->n_slots;
	out->begin = 0;
	out->end = s->numel;
	out->slots = s->slots;
	return WEFT_OK;
}

static void local_sgd_destroy(void *p)
{
	local_sgd *s = p;

	if (!s)
		return;
	g_host->mem_free(s->slot_mem);
	free(s);
}

#if WEFT_ABI_MAJOR > 1 || WEFT_ABI_MINOR >= 2
/* weft plan's question (memory_plan, since ABI 1.2): every rank holds the
 * whole model, its gradients and its own optimizer state; every k steps
 * one all-reduce of the parameters, 2 Psi (N-1)/N elements sent per rank,
 * counted here per step as its average over the k steps. */
static weft_status local_sgd_memory_plan(void *p, const weft_plan_query *q,
					 weft_plan_result *out)
{
	const local_sgd *s = p;
	int64_t n = 0, w = q->world_size;

	for (size_t i = 0; i < q->n_params; i++)
		if (q->params[i].dtype == WEFT_F32)
			n += q->params[i].numel;
	out->rank = 0;
	out->numel = n;
	out->bytes[WEFT_MEM_PARAMS] = 4 * n;
	out->bytes[WEFT_MEM_GRADS] = 4 * n;
	out->bytes[WEFT_MEM_OPTIM] = 4 * (int64_t)q->n_slots * n;
	if (w > 1) {
		out->collective_elements = n / s->k;
		out->moved_elements = 2 * n * (w - 1) / w / s->k;
	}
	snprintf(out->layout, sizeof(out->layout), "local SGD, parameters averaged every %lld "
		 "steps", (long long)s->k);
	return WEFT_OK;
}
#endif

static const weft_strategy_ops local_sgd_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_strategy_ops, "local_sgd"),
	.create = local_sgd_create,
	.setup = local_sgd_setup,
	.train_step = local_sgd_train_step,
	.eval_step = local_sgd_eval_step,
	.state = local_sgd_state,
	.destroy = local_sgd_destroy,
#if WEFT_ABI_MAJOR > 1 || WEFT_ABI_MINOR >= 2
	.memory_plan = local_sgd_memory_plan,
#endif
};

static const weft_plugin_entry_item items[] = {
	{ .kind = WEFT_PLUGIN_STRATEGY, .vtable = &local_sgd_ops },
};

#ifdef WEFT_PLUGIN_NAMES /* since ABI 1.3: lets weft index this file without loading it */
WEFT_PLUGIN_NAMES("strategy:local_sgd");
#endif

static const weft_plugin_desc desc = {
	.head = WEFT_PLUGIN_HEAD(weft_plugin_desc, "example: local SGD"),
	.count = sizeof(items) / sizeof(items[0]),
	.items = items,
};

WEFT_PLUGIN_ENTRY(host)
{
	g_host = host;
	return &desc;
}
