/* strategy "pp": pipeline parallelism (GPipe, 1F1B, interleaved 1F1B).
 *
 * The GPT is split into S = pp * virtual_stages stages by blocks
 * (pp_config.c); rank r holds stages r, r + pp, ... (its chunks), each
 * built by the trainer as a model of its own (env->stage_create) with the
 * whole model's parameter names and values. One optimizer step runs the
 * schedule weft/pp_schedule.h gives for (kind, rank, pp, m, v) over
 * the trainer's m micro-batches: every forward runs on a context of its
 * own taken from a pool, so a micro-batch's activations are released when
 * its backward finished (1F1B holds at most pp of them, GPipe all m).
 * Activations and their gradients travel with send/recv (pp_msg.c). After
 * the flush the first and the last stage sum the tied embedding's
 * gradients, the optimizer steps each rank's own parameters, and the loss
 * is reduced so every rank reports it. Each rank keeps the values of the
 * stages it owns current in env->params after every step;
 * gather_params(1) makes all of env->params current on every rank.
 * Strategy hybrid runs dp replicas of the pipeline (pp_dp.c) and, with
 * tp > 1, tensor-parallel stages: the plan has the trainer build this
 * rank's tp shard, every stage is the same shard of its blocks, and a tp
 * communicator per stage replica is bound to both (pp_tp.c maps the
 * optimizer state to whole-model coordinates). */
#include <stdio.h>
#include <string.h>

#include "pp.h"

typedef struct pp_inflight {
	weft_ctx *ctx;
	weft_tensor *x;         /* received activation (requires grad) or NULL */
	weft_tensor *out;       /* hidden state, or the scaled loss on the head */
	weft_tensor *g;         /* received gradient of out */
} pp_inflight;

/* Creates strategy `who` ("pp" or "hybrid"). */
weft_status pp_create_as(const char *who, const weft_cfg *section,
			 const weft_strategy_env *env, void **out)
{
	pp_strategy *s;
	weft_status st;

	s = calloc(1, sizeof(*s));
	if (!s)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy '%s': out of memory", who);
	st = pp_options_parse(section, env, who, &s->o);
	if (st)
		goto out_free;
	st = pp_mesh_check(&s->o, env->rank, env->world_size, &s->mesh);
	if (st)
		goto out_free;
	if (env->struct_size < offsetof(weft_strategy_env, stage_free) + sizeof(env->stage_free) ||
	    !env->stage_create || !env->stage_forward || !env->stage_free) {
		st = g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': this trainer cannot "
				       "build pipeline stages (no stage callbacks in the strategy "
				       "env); update weft", who);
		goto out_free;
	}
	if (!WEFT_HAS_MEMBER(g_host, weft_host, backward_from)) {
		st = g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': the host has no "
				       "autograd services for pipeline stages; update weft", who);
		goto out_free;
	}
	if (s->o.pp < env->world_size && !WEFT_HAS_MEMBER(g_host, weft_host, comm_split)) {
		st = g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': the host cannot split "
				       "communicators (dp %d x pp %d); update weft", who, s->o.dp,
				       s->o.pp);
		goto out_free;
	}
	if (s->o.tp > 1) {
		int32_t msize = 1, mrank = 0;
		uint32_t mflags = 0;

		if (!WEFT_HAS_MEMBER(g_host, weft_host, tp_gather_param)) {
			st = g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': tp %d needs a "
					       "host with the tensor-parallel services (weft ABI "
					       "1.1 with tp); update weft", who, s->o.tp);
			goto out_free;
		}
		g_host->tp_info(env->params, &msize, &mrank, &mflags);
		if (msize != s->o.tp || mrank != s->mesh.tp_idx || mflags) {
			st = g_host->error_set(WEFT_ERR_CONFIG, "strategy '%s': tp %d puts world rank "
					       "%d at tp rank %d, but the model was built as tp rank "
					       "%d of %d (flags 0x%x); the trainer builds it from the "
					       "strategy's plan: build it with weft_model_options "
					       "tp_size %d, tp_rank %d, tp_flags 0", who, s->o.tp,
					       (int)env->rank, s->mesh.tp_idx, (int)mrank, (int)msize,
					       mflags, s->o.tp, s->mesh.tp_idx);
			goto out_free;
		}
	}
	st = pp_dev_check(who, env, &s->o);
	if (st)
		goto out_free;
	if (env->world_size > 1 && (!env->comm_ops || !env->world)) {
		st = g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy '%s': world size is %d but "
				       "the trainer gave no communicator; set trainer.comm: gloo",
				       who, env->world_size);
		goto out_free;
	}
	s->env = env;
	/* the pipeline's communicator is the world's, or a split made in setup */
	s->g = (pp_group){ .ops = env->comm_ops, .comm = env->world, .rank = s->mesh.pp_idx,
			   .size = s->o.pp,
			   .device_type = env->device.type == WEFT_DEVICE_CPU ?
					  WEFT_COMM_DEVICE_CPU : WEFT_COMM_DEVICE_CUDA,
			   .device_index = env->device.index };
	s->S = s->o.pp * s->o.v;
	*out = s;
	return WEFT_OK;

out_free:
	free(s);
	return st;
}

static weft_status pp_create(const weft_cfg *section, const weft_strategy_env *env, void **out)
{
	return pp_create_as("pp", section, env, out);
}

/* Every rank of a pipeline reads the same rows: the data is split over
 * the dp coordinate only (not at all for strategy pp). The model is built
 * whole (each rank then builds its stages from it). */
weft_status pp_plan_as(const char *who, const weft_cfg *section, int32_t rank,
		       int32_t world, int32_t *data_rank, int32_t *data_world)
{
	weft_strategy_env env = { .struct_size = sizeof(env), .rank = rank, .world_size = world };
	pp_options o;
	pp_mesh m;
	weft_status st;

	st = pp_options_parse(section, &env, who, &o);
	if (!st)
		st = pp_mesh_check(&o, rank, world, &m);
	if (st)
		return st;
	*data_rank = m.dp_idx;
	*data_world = o.dp;
	return WEFT_OK;
}

static weft_status pp_plan(const weft_cfg *section, int32_t rank, int32_t world,
			   weft_model_options *mo, int32_t *data_rank, int32_t *data_world)
{
	mo->no_grads = 1; /* the stages hold the gradients */
	return pp_plan_as("pp", section, rank, world, data_rank, data_world);
}

/* The mesh in Megatron's order (tp fastest, then dp, then pp), printed by
 * world rank 0: one line per pipeline. */
static void print_mesh(const pp_strategy *s)
{
	const pp_options *o = &s->o;

	if (!o->hybrid || s->env->rank != 0)
		return;
	g_host->log(WEFT_LOG_INFO, "strategy hybrid: mesh tp %d x dp %d x pp %d over %d ranks "
		    "(Megatron order: rank = (pp * %d + dp) * %d + tp), dp_strategy %s", o->tp,
		    o->dp, o->pp, s->env->world_size, o->dp, o->tp,
		    o->dp_strategy == PP_DP_ZERO_1 ? "zero_1" : "ddp");
	for (int d = 0; d < o->dp; d++)
		for (int t = 0; t < o->tp; t++) {
			char line[256];
			int n = 0;

			for (int q = 0; q < o->pp && n < (int)sizeof(line) - 16; q++)
				n += snprintf(line + n, sizeof(line) - (size_t)n, "%s%d", q ? " " : "",
					      (q * o->dp + d) * o->tp + t);
			g_host->log(WEFT_LOG_INFO, "strategy hybrid:   dp %d tp %d: pipeline ranks "
				    "[%s] (stage order)", d, t, line);
		}
}

/* The pipeline's and the dp replicas' communicators (collective). */
static weft_status split_comms(pp_strategy *s)
{
	const weft_strategy_env *env = s->env;
	const pp_options *o = &s->o;
	const pp_mesh *m = &s->mesh;
	weft_status st;

	if (o->pp < env->world_size) {
		st = g_host->comm_split(env->comm_ops, env->world, m->dp_idx * o->tp + m->tp_idx,
					m->pp_idx, &s->pp_comm);
		if (st)
			return g_host->error_wrap(st, "strategy hybrid: the pipeline of rank %d",
						  env->rank);
		s->g.comm = s->pp_comm;
	}
	if (o->dp > 1) {
		st = g_host->comm_split(env->comm_ops, env->world, m->pp_idx * o->tp + m->tp_idx,
					m->dp_idx, &s->dp_comm);
		if (st)
			return g_host->error_wrap(st, "strategy hybrid: the dp group of rank %d",
						  env->rank);
	}
	if (o->tp > 1) {
		/* the tp shards of one stage replica: ranks tp_idx 0..tp-1 */
		st = g_host->comm_split(env->comm_ops, env->world, m->pp_idx * o->dp + m->dp_idx,
					m->tp_idx, &s->tp_comm);
		if (!st)
			st = g_host->tp_bind(env->params, env->comm_ops, s->tp_comm);
		if (st)
			return g_host->error_wrap(st, "strategy hybrid: the tp group of rank %d",
						  env->rank);
	}
	return WEFT_OK;
}

weft_status pp_setup(void *p)
{
	pp_strategy *s = p;
	weft_status st;

	print_mesh(s);
	st = split_comms(s);
	if (!st)
		st = pp_chunks_build(s);
	if (!st)
		st = pp_dp_setup(s);
	if (st)
		return st;
	if (g_host->log_enabled(WEFT_LOG_INFO)) {
		char line[512];
		size_t len = 0;

		for (int k = 0; k < s->o.v; k++)
			len += (size_t)snprintf(line + len, sizeof(line) - len, "%s stage %d: blocks "
						"%lld..%lld%s%s", k ? ";" : "", s->chunk[k].stage,
						(long long)s->chunk[k].layer_begin,
						(long long)s->chunk[k].layer_end - 1,
						s->chunk[k].parts & WEFT_STAGE_EMBED ? " + embedding" : "",
						s->chunk[k].parts & WEFT_STAGE_HEAD ? " + head" : "");
		g_host->log(WEFT_LOG_INFO, "pp: %s, %d stages over %d ranks;%s",
			    weft_pp_kind_name((weft_pp_kind)s->o.schedule), s->S, s->g.size, line);
	}
	return WEFT_OK;
}

static weft_status get_ctx(pp_strategy *s, weft_ctx **out)
{
	weft_ctx_options co = { .device = s->env->device, .arena_bytes = PP_CTX_ARENA_BYTES,
				.tape_bytes = PP_CTX_TAPE_BYTES };
	weft_status st;

	if (s->n_ctx_free) {
		*out = s->ctx_free[--s->n_ctx_free];
	} else {
		if (s->n_ctx == (int)(sizeof(s->all_ctx) / sizeof(s->all_ctx[0])))
			return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy 'pp': more than %d "
						 "micro-batches in flight", s->n_ctx);
		st = g_host->ctx_create(&co, out);
		if (st)
			return st;
		s->all_ctx[s->n_ctx++] = *out;
	}
	g_host->ctx_step_begin(*out);
	return WEFT_OK;
}

static void put_ctx(pp_strategy *s, weft_ctx *ctx)
{
	s->ctx_free[s->n_ctx_free++] = ctx;
}

/* Sizes the per-step tables for m micro-batches. */
static weft_status plan(pp_strategy *s, int m)
{
	char err[256];
	size_t cap = weft_pp_max_actions(m, s->o.v);
	weft_status st;

	if (weft_pp_check((weft_pp_kind)s->o.schedule, s->g.size, m, s->o.v, err, sizeof(err)))
		return g_host->error_set(WEFT_ERR_CONFIG, "strategy 'pp': %s", err);
	if (m == s->sched_m)
		return WEFT_OK;
	g_host->mem_free(s->actions);
	g_host->mem_free(s->fl);
	g_host->mem_free(s->ev);
	g_host->mem_free(s->counts);
	s->actions = g_host->mem_alloc(WEFT_MEM_OTHER, cap * sizeof(weft_pp_action));
	s->fl = g_host->mem_calloc(WEFT_MEM_OTHER, (size_t)m * (size_t)s->o.v * sizeof(pp_inflight));
	s->ev = g_host->mem_alloc(WEFT_MEM_OTHER, (cap + 8) * sizeof(weft_step_event));
	s->counts = g_host->mem_alloc(WEFT_MEM_OTHER, (size_t)m * sizeof(int64_t));
	s->sched_m = 0;
	if (!s->actions || !s->fl || !s->ev || !s->counts)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'pp': schedule of %d micro-batches",
					 m);
	s->cap_ev = cap + 8;
	s->n_ctx_free = 0;
	for (int i = 0; i < s->n_ctx; i++)
		s->ctx_free[s->n_ctx_free++] = s->all_ctx[i];
	if (weft_pp_schedule((weft_pp_kind)s->o.schedule, s->g.rank, s->g.size, m, s->o.v,
			     s->actions, cap, &s->n_actions, err, sizeof(err)))
		return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'pp': %s", err);
	s->peak_in_flight = weft_pp_max_in_flight(s->actions, s->n_actions);
	st = pp_msgs_plan(&s->msgs, &s->g, (weft_pp_kind)s->o.schedule, m, s->o.v, 0);
	if (st)
		return st;
	s->sched_m = m;
	return WEFT_OK;
}

/* The timeline's kind (WEFT_EVENT_*) of a weft_pp_op or PP_EV_*. */
static int32_t event_kind(int kind)
{
	static const int32_t of_op[] = {
		[WEFT_PP_FORWARD] = WEFT_EVENT_FORWARD,     [WEFT_PP_BACKWARD] = WEFT_EVENT_BACKWARD,
		[WEFT_PP_SEND_ACT] = WEFT_EVENT_SEND_ACT,   [WEFT_PP_RECV_ACT] = WEFT_EVENT_RECV_ACT,
		[WEFT_PP_SEND_GRAD] = WEFT_EVENT_SEND_GRAD, [WEFT_PP_RECV_GRAD] = WEFT_EVENT_RECV_GRAD,
	};

	if (kind == PP_EV_OPTIM)
		return WEFT_EVENT_OPTIMIZER;
	if (kind == PP_EV_SYNC)
		return WEFT_EVENT_SYNC;
	return of_op[kind];
}

/* Records the interval since `from` on the step's timeline. */
static void note(pp_strategy *s, int kind, int micro, int stage, weft_step_mark from)
{
	weft_step_clock_note(&s->clock, from, event_kind(kind), micro, stage);
}

/* One action of the schedule. */
static weft_status act(pp_strategy *s, const weft_pp_action *a, const weft_step_input *in,
		       int64_t rows, double *loss_sum)
{
	const weft_strategy_env *env = s->env;
	pp_chunk *c = &s->chunk[a->chunk];
	pp_inflight *f = &s->fl[(size_t)a->micro * (size_t)s->o.v + (size_t)a->chunk];
	const weft_micro_batch *b = &in->micro[a->micro];
	int64_t shape[3] = { b->rows, b->data.inputs->shape[1], s->n_embd };
	int64_t n = s->counts[a->micro];
	weft_step_mark from = weft_step_clock_mark();
	double loss = 0.0;
	weft_status st = WEFT_OK;

	switch (a->op) {
	case WEFT_PP_RECV_ACT:
		st = get_ctx(s, &f->ctx);
		if (!st)
			st = g_host->ctx_tensor(f->ctx, "pp.recv", WEFT_F32, 3, shape, &f->x);
		if (!st)
			st = pp_msgs_recv(&s->msgs, f->ctx, a->op, a->micro, a->stage, a->peer,
					  f->x->data, n);
		if (!st)
			g_host->tensor_requires_grad(f->x, 1);
		break;
	case WEFT_PP_FORWARD:
		if (!f->ctx) {
			st = get_ctx(s, &f->ctx);
			f->x = NULL;
		}
		if (!st)
			st = env->stage_forward(env->trainer, c->handle, f->ctx, b, f->x, 1,
						(double)b->rows / (double)rows, &f->out, &loss, NULL);
		if (!st && (c->parts & WEFT_STAGE_HEAD))
			*loss_sum += loss * (double)b->rows;
		break;
	case WEFT_PP_SEND_ACT:
		st = pp_msgs_send(&s->msgs, f->ctx, a->op, a->micro, a->stage, a->peer,
				  f->out->data, n);
		break;
	case WEFT_PP_RECV_GRAD:
		st = g_host->ctx_tensor(f->ctx, "pp.grad", WEFT_F32, 3, shape, &f->g);
		if (!st)
			st = pp_msgs_recv(&s->msgs, f->ctx, a->op, a->micro, a->stage, a->peer,
					  f->g->data, n);
		break;
	case WEFT_PP_BACKWARD:
		st = (c->parts & WEFT_STAGE_HEAD) ? g_host->backward(f->ctx, f->out) :
		     g_host->backward_from(f->ctx, f->out, f->g);
		if (!st && a->stage == 0) {
			put_ctx(s, f->ctx);
			memset(f, 0, sizeof(*f));
		}
		break;
	case WEFT_PP_SEND_GRAD:
		if (!f->x->grad)
			return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'pp': stage %d's input "
						 "received no gradient (micro-batch %d)", a->stage,
						 a->micro);
		st = pp_msgs_send(&s->msgs, f->ctx, a->op, a->micro, a->stage, a->peer,
				  f->x->grad->data, n);
		put_ctx(s, f->ctx);
		memset(f, 0, sizeof(*f));
		break;
	default:
		st = g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'pp': unknown action %d", a->op);
	}
	note(s, a->op, a->micro, a->stage, from);
	return st;
}

/* The measured bubble: the share of the step's pipeline span [from, to)
 * this rank did not spend in forward or backward. */
static double bubble_of(const pp_strategy *s, int64_t from, int64_t to)
{
	int64_t busy = 0;

	for (size_t i = 0; i < s->clock.n_ev; i++)
		if (s->ev[i].kind == WEFT_EVENT_FORWARD || s->ev[i].kind == WEFT_EVENT_BACKWARD)
			busy += s->ev[i].t1_ns - s->ev[i].t0_ns;
	return to > from ? 1.0 - (double)busy / (double)(to - from) : 0.0;
}

weft_status pp_train_step(void *p, const weft_step_input *in, weft_step_report *out)
{
	pp_strategy *s = p;
	int m = (int)in->n_micro;
	int64_t rows = 0, bytes0, calls0, wait0, dp_bytes = 0, dp_calls = 0;
	double loss_sum = 0.0, red[2];
	weft_step_mark from;
	weft_status st;

	weft_step_clock_start(&s->clock);
	st = plan(s, m);
	if (st)
		return st;
	{
		int64_t most = 0;

		for (int i = 0; i < m; i++) {
			const weft_micro_batch *b = &in->micro[i];

			rows += b->rows;
			s->counts[i] = b->rows * b->data.inputs->shape[1] * s->n_embd;
			if (s->counts[i] > most)
				most = s->counts[i];
		}
		if (most > s->msgs.buf_numel) {
			st = pp_msgs_plan(&s->msgs, &s->g, (weft_pp_kind)s->o.schedule, m, s->o.v,
					  most);
			if (st)
				return st;
		}
		s->msgs.counts = s->counts;
	}
	for (int k = 0; k < s->o.v; k++) {
		st = g_host->params_zero_grad(s->chunk[k].params);
		if (st)
			return st;
	}
	bytes0 = s->msgs.bytes;
	calls0 = s->msgs.calls;
	wait0 = s->msgs.wait_ns;
	weft_step_clock_events(&s->clock, s->ev, s->cap_ev);
	for (size_t i = 0; i < s->n_actions && !st; i++)
		st = act(s, &s->actions[i], in, rows, &loss_sum);
	{
		weft_status f = pp_msgs_finish(&s->msgs);

		if (!st)
			st = f;
	}
	/* an error leaves contexts taken: give them all back */
	for (int i = 0; i < m * s->o.v; i++)
		if (s->fl[i].ctx) {
			put_ctx(s, s->fl[i].ctx);
			memset(&s->fl[i], 0, sizeof(s->fl[i]));
		}
	/* the micro-batches' streams wrote the gradients the rest reads */
	if (!st)
		st = pp_dev_sync(s);
	if (st)
		return st;
	from = weft_step_clock_mark();
	st = pp_sync_wte(s);
	if (!st)
		st = pp_tp_sum_shared(s, &dp_bytes, &dp_calls);
	if (!st)
		st = pp_dp_grads(s, &dp_bytes, &dp_calls);
	if (st)
		return st;
	red[0] = loss_sum;
	red[1] = (s->chunk[s->o.v - 1].parts & WEFT_STAGE_HEAD) ? (double)rows : 0.0;
	st = pp_sum(s, red, 2);
	if (!st)
		st = pp_dp_sum(s, red, 2, &dp_bytes, &dp_calls);
	if (st)
		return st;
	note(s, PP_EV_SYNC, -1, -1, from);
	/* every rank leaves the reduction together: the span from entering the
	 * step to here is the pipeline's, on any rank, with no common clock */
	out->bubble_fraction = bubble_of(s, s->clock.t0_ns, weft_clock_ns());
	s->last_bubble = out->bubble_fraction;
	from = weft_step_clock_mark();
	st = pp_optim_step(s, &in->optim, &out->grad_norm);
	out->skipped = s->skipped;
	if (!st)
		st = pp_dp_params(s, &dp_bytes, &dp_calls);
	if (st)
		return st;
	st = pp_copy_params(s, 0);
	/* the next step's forwards, on other streams, read the parameters */
	if (!st)
		st = pp_dev_sync(s);
	if (st)
		return st;
	note(s, PP_EV_OPTIM, -1, -1, from);
	out->loss = red[1] > 0 ? red[0] / red[1] : 0.0;
	out->comm_bytes = s->msgs.bytes - bytes0 + (int64_t)sizeof(red) + dp_bytes;
	out->metric_comm_bytes = (int64_t)sizeof(red) * (s->dp_comm ? 2 : 1);
	out->comm_calls = s->msgs.calls - calls0 + dp_calls;
	out->exposed_comm_ns = s->msgs.wait_ns - wait0;
	out->comm_ns = out->exposed_comm_ns;
	weft_step_clock_finish(&s->clock, out);
	return WEFT_OK;
}

/* Forward only, stage by stage along the pipeline. */
weft_status pp_eval_step(void *p, const weft_micro_batch *b, weft_eval_report *out)
{
	pp_strategy *s = p;
	weft_eval_report mine = { .struct_size = sizeof(mine) };
	int64_t shape[3] = { b->rows, b->data.inputs->shape[1], s->n_embd };
	int64_t n = shape[0] * shape[1] * shape[2];
	int next = (s->g.rank + 1) % s->g.size, prev = (s->g.rank + s->g.size - 1) % s->g.size;
	double red[4], loss;
	weft_ctx *ctx;
	weft_status st;

	st = get_ctx(s, &ctx);
	if (st)
		return st;
	for (int k = 0; k < s->o.v && !st; k++) {
		pp_chunk *c = &s->chunk[k];
		weft_tensor *x = NULL, *o = NULL;
		weft_comm_buf buf = { .count = n, .dtype = WEFT_COMM_F32,
				      .device = (weft_comm_device)s->g.device_type,
				      .device_index = s->g.device_index };

		if (c->stage > 0) {
			st = g_host->ctx_tensor(ctx, "pp.recv", WEFT_F32, 3, shape, &x);
			buf.data = x ? x->data : NULL;
			if (!st)
				st = s->g.ops->recv(s->g.comm, &buf, prev, NULL);
			if (st)
				break;
		}
		st = s->env->stage_forward(s->env->trainer, c->handle, ctx, b, x, 0, 1.0, &o, &loss,
					   &mine);
		if (!st && c->stage < s->S - 1) {
			buf.data = o->data;
			st = s->g.ops->send(s->g.comm, &buf, next, NULL);
		}
	}
	put_ctx(s, ctx);
	if (st)
		return g_host->error_wrap(st, "strategy 'pp': evaluation");
	red[0] = mine.loss_sum;
	red[1] = (double)mine.rows;
	red[2] = (double)mine.correct;
	red[3] = (double)mine.counted;
	st = pp_sum(s, red, 4);
	if (!st) {
		int64_t b = 0, c = 0;

		st = pp_dp_sum(s, red, 4, &b, &c);
	}
	if (st)
		return st;
	out->loss_sum += red[0];
	out->rows += (int64_t)red[1];
	out->correct += (int64_t)red[2];
	out->counted += (int64_t)red[3];
	return WEFT_OK;
}

weft_status pp_state(void *p, weft_strategy_state *out)
{
	return pp_state_build(p, out);
}

weft_status pp_gather_params(void *p, int gather)
{
	pp_strategy *s = p;
	weft_status st = gather ? pp_gather(s) : pp_copy_params(s, 1);

	return st ? st : pp_dev_sync(s);
}

void pp_destroy(void *p)
{
	pp_strategy *s = p;

	if (!s)
		return;
	pp_msgs_free(&s->msgs);
	for (int i = 0; i < s->n_ctx; i++)
		g_host->ctx_free(s->all_ctx[i]);
	pp_chunks_free(s);
	pp_dp_free(s);
	if (s->tp_comm) {
		g_host->tp_bind(s->env->params, s->env->comm_ops, NULL);
		g_host->comm_free(s->tp_comm);
	}
	g_host->comm_free(s->dp_comm);
	g_host->comm_free(s->pp_comm);
	g_host->mem_free(s->actions);
	g_host->mem_free(s->fl);
	g_host->mem_free(s->ev);
	g_host->mem_free(s->counts);
	free(s);
}

const weft_strategy_ops weft_strategy_pp = {
	.head = WEFT_PLUGIN_HEAD(weft_strategy_ops, "pp"),
	.create = pp_create,
	.setup = pp_setup,
	.train_step = pp_train_step,
	.eval_step = pp_eval_step,
	.state = pp_state,
	.destroy = pp_destroy,
	.gather_params = pp_gather_params,
	.plan = pp_plan,
	.memory_plan = pp_memory_plan,
};
