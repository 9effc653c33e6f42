/* strategy "single": one process, one device (Lightning's
 * SingleDeviceStrategy). Micro-batches run one after another, their
 * gradients accumulating; then clipping and the optimizer over the whole
 * model. The default when trainer.devices x trainer.num_nodes is 1. */
#include <stdlib.h>
#include <string.h>

#include "replicated.h"
#include "replicated_plan.h"

typedef struct single {
	replicated rep;
	const weft_strategy_env *env;
} single;

static weft_status single_create(const weft_cfg *section, const weft_strategy_env *env, void **out)
{
	single *s;

	if (section)
		g_host->cfg_get(section, "name");
	if (env->world_size != 1)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "strategy 'single' runs one process, but the world size is "
					 "%d; use strategy: ddp for several processes",
					 env->world_size);
	s = calloc(1, sizeof(*s));
	if (!s)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'single': out of memory");
	s->env = env;
	*out = s;
	return WEFT_OK;
}

static weft_status single_setup(void *p)
{
	single *s = p;

	return replicated_init(&s->rep, s->env);
}

static weft_status single_train_step(void *p, const weft_step_input *in, weft_step_report *out)
{
	single *s = p;
	weft_accumulate acc = weft_accumulate_env(g_host, s->env);
	int64_t rows = weft_step_rows(in->micro, in->n_micro);
	double loss_sum;
	weft_step_clock clock;
	weft_status st;

	weft_step_clock_start(&clock);
	st = weft_step_accumulate(&acc, in->micro, in->n_micro, rows, &loss_sum);
	if (!st)
		st = replicated_step(&s->rep, &in->optim, 1.0, &out->grad_norm);
	if (st)
		return st;
	replicated_report(&s->rep, out);
	out->loss = loss_sum / (double)rows;
	weft_step_clock_finish(&clock, out);
	return WEFT_OK;
}

static weft_status single_eval_step(void *p, const weft_micro_batch *b, weft_eval_report *out)
{
	single *s = p;

	g_host->ctx_step_begin(s->env->ctx);
	return s->env->evaluate(s->env->trainer, b, out);
}

static weft_status single_state(void *p, weft_strategy_state *out)
{
	single *s = p;

	return replicated_state(&s->rep, out);
}

static void single_destroy(void *p)
{
	single *s = p;

	if (!s)
		return;
	replicated_fini(&s->rep);
	free(s);
}

const weft_strategy_ops weft_strategy_single = {
	.head = WEFT_PLUGIN_HEAD(weft_strategy_ops, "single"),
	.create = single_create,
	.setup = single_setup,
	.train_step = single_train_step,
	.eval_step = single_eval_step,
	.state = single_state,
	.destroy = single_destroy,
	.memory_plan = single_memory_plan,
};
