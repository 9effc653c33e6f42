/* The planning env (plan_env.h): what a strategy's create sees under
 * `weft plan`. Every service that would communicate or run the model
 * fails with one message, so a strategy that tries reads why. */
#include <string.h>

#include "plan/plan_env.h"

static weft_status refuse(const char *what)
{
	return weft_error_set(WEFT_ERR_UNSUPPORTED, "weft plan: the strategy called %s while "
			      "planning; a strategy's create and memory_plan may not communicate "
			      "or run the model (weft/strategy.h, memory_plan)", what);
}

static const plan_comm *pc(const weft_comm *c)
{
	return (const plan_comm *)(const void *)c;
}

static weft_status c_init(const weft_comm_init_args *a, weft_comm **out)
{
	(void)a;
	*out = NULL;
	return refuse("comm init");
}

static weft_status c_split(weft_comm *c, int32_t color, int32_t key, const char *name,
			   weft_comm **out)
{
	(void)c, (void)color, (void)key, (void)name;
	*out = NULL;
	return refuse("comm split");
}

static weft_status c_reduce(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			    weft_comm_redop op, weft_comm_work **w)
{
	(void)c, (void)s, (void)r, (void)op, (void)w;
	return refuse("a reduction (all_reduce or reduce_scatter)");
}

static weft_status c_pair(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			  weft_comm_work **w)
{
	(void)c, (void)s, (void)r, (void)w;
	return refuse("all_gather or all_to_all");
}

static weft_status c_root(weft_comm *c, const weft_comm_buf *b, int32_t root, weft_comm_work **w)
{
	(void)c, (void)b, (void)root, (void)w;
	return refuse("a broadcast, send or recv");
}

static weft_status c_barrier(weft_comm *c, weft_comm_work **w)
{
	(void)c, (void)w;
	return refuse("barrier");
}

static weft_status c_wait(weft_comm_work *w, int64_t timeout_ms)
{
	(void)w, (void)timeout_ms;
	return refuse("comm wait");
}

static weft_status c_test(weft_comm_work *w, int *done)
{
	(void)w;
	*done = 1;
	return refuse("comm test");
}

static void c_nothing(weft_comm *c)
{
	(void)c;
}

static int32_t c_rank(const weft_comm *c)
{
	(void)c;
	return 0;
}

static int32_t c_size(const weft_comm *c)
{
	return pc(c)->size;
}

static const weft_comm_ops plan_comm_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_comm_ops, "plan"),
	.init = c_init,
	.split = c_split,
	.all_reduce = c_reduce,
	.reduce_scatter = c_reduce,
	.all_gather = c_pair,
	.broadcast = c_root,
	.send = c_root,
	.recv = c_root,
	.all_to_all = c_pair,
	.barrier = c_barrier,
	.wait = c_wait,
	.test = c_test,
	.abort = c_nothing,
	.destroy = c_nothing,
	.rank = c_rank,
	.size = c_size,
};

static weft_status t_fwbw(void *t, const weft_micro_batch *b, double scale, double *loss)
{
	(void)t, (void)b, (void)scale, (void)loss;
	return refuse("forward_backward");
}

static weft_status t_eval(void *t, const weft_micro_batch *b, weft_eval_report *rep)
{
	(void)t, (void)b, (void)rep;
	return refuse("evaluate");
}

static weft_status t_replica(void *t, int32_t index, weft_device dev, void **replica,
			     weft_params **params, weft_ctx **ctx)
{
	(void)t, (void)index, (void)dev, (void)params, (void)ctx;
	*replica = NULL;
	return refuse("replica_create");
}

static weft_status t_replica_fwbw(void *t, void *replica, const weft_micro_batch *b,
				  double scale, double *loss)
{
	(void)t, (void)replica, (void)b, (void)scale, (void)loss;
	return refuse("replica_forward_backward");
}

static void t_free(void *t, void *obj)
{
	(void)t, (void)obj;
}

static weft_status t_stage(void *t, uint32_t parts, int64_t lb, int64_t le, void **stage,
			   weft_params **params)
{
	(void)t, (void)parts, (void)lb, (void)le, (void)params;
	*stage = NULL;
	return refuse("stage_create");
}

static weft_status t_stage_fw(void *t, void *stage, weft_ctx *ctx, const weft_micro_batch *b,
			      weft_tensor *x, int train, double scale, weft_tensor **out,
			      double *loss, weft_eval_report *rep)
{
	(void)t, (void)stage, (void)ctx, (void)b, (void)x, (void)train, (void)scale;
	(void)out, (void)loss, (void)rep;
	return refuse("stage_forward");
}

static weft_status t_grads_check(void *t, const float *const *arrays, const int64_t *lens,
				 size_t n, int *skip)
{
	(void)t, (void)arrays, (void)lens, (void)n;
	*skip = 0;
	return refuse("grads_check");
}

void plan_env_init(weft_strategy_env *env, plan_comm *comm, int32_t world, weft_params *ps)
{
	memset(env, 0, sizeof(*env));
	comm->size = world;
	env->struct_size = sizeof(*env);
	env->rank = 0;
	env->world_size = world;
	env->local_rank = 0;
	env->local_world_size = world;
	env->device = (weft_device){ .type = WEFT_DEVICE_CPU, .index = 0 };
	env->comm_ops = &plan_comm_ops;
	env->world = (weft_comm *)(void *)comm;
	env->params = ps;
	env->forward_backward = t_fwbw;
	env->evaluate = t_eval;
	env->replica_create = t_replica;
	env->replica_forward_backward = t_replica_fwbw;
	env->replica_free = t_free;
	env->n_devices = 1;
	env->stage_create = t_stage;
	env->stage_forward = t_stage_fw;
	env->stage_free = t_free;
	env->grads_check = t_grads_check;
}
