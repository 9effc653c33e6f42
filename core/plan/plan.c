/* Memory and communication plans (plan.h): the strategy's own answer. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "plan/plan_comm.h"
#include "plan/plan_env.h"
#include "plugin/registry.h"
#include "weft/status.h"
#include "weft/strategy.h"

/* trainer.comm as the trainer reads it (a name or a mapping with name:,
 * auto by accelerator) and gloo's shm option. */
static weft_status comm_of(const weft_cfg *tr, weft_plan_opts *o)
{
	const weft_cfg *cn = weft_cfg_get(tr, "comm");
	const char *name = NULL, *accel = "cpu", *shm = NULL;
	weft_status st = weft_cfg_str(tr, "accelerator", "cpu", &accel);

	if (!st && cn && weft_cfg_kind_of(cn) == WEFT_CFG_MAP) {
		st = weft_cfg_str(cn, "name", NULL, &name);
		if (!st)
			st = weft_cfg_str(cn, "shm", NULL, &shm);
	} else if (!st && cn) {
		st = weft_cfg_as_str(cn, &name);
	}
	if (st)
		return st;
	if (!name || !strcmp(name, "auto"))
		name = accel && (!strcmp(accel, "cuda") || !strcmp(accel, "gpu")) ? "nccl" : "gloo";
	o->comm = name;
	o->comm_shm_off = shm && !strcmp(shm, "off");
	if (accel && (!strcmp(accel, "cuda") || !strcmp(accel, "gpu")))
		o->device = (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 };
	return WEFT_OK;
}

/* The 16-bit weight copy the trainer would keep (trainer_precision.c):
 * 16-bit activations (lowp_activations true, or auto on CUDA) under
 * bf16-mixed or 16-mixed, with weight_copy on (the default); strategy tp
 * keeps F32 activations. Whether the strategy's parameters are whole is
 * weft_plan_compute's to ask. */
static weft_status weight_copy_of(const weft_cfg *tr, weft_plan_opts *o)
{
	static const char *const lowp_modes[] = { "auto", "true", "false", NULL };
	const char *prec = "32-true";
	int lowp = 0, keep = 1;
	weft_status st;

	o->weight_copy = WEFT_F32;
	if ((st = weft_cfg_str(tr, "precision", "32-true", &prec)) ||
	    (st = weft_cfg_choice(tr, "lowp_activations", lowp_modes, "auto", &lowp)) ||
	    (st = weft_cfg_bool(tr, "weight_copy", 1, &keep)))
		return st;
	if (!keep || lowp == 2 || (lowp == 0 && o->device.type != WEFT_DEVICE_CUDA) ||
	    !strcmp(o->strategy, "tp"))
		return WEFT_OK;
	o->weight_copy = !strcmp(prec, "bf16-mixed") ? WEFT_BF16 :
			 !strcmp(prec, "16-mixed") ? WEFT_F16 : WEFT_F32;
	return WEFT_OK;
}

weft_status weft_plan_opts_from_config(const weft_cfg *root, int32_t world, weft_plan_opts *o)
{
	const weft_cfg *tr = root ? weft_cfg_get(root, "trainer") : NULL;
	const weft_cfg *sn = tr ? weft_cfg_get(tr, "strategy") : NULL;
	const char *name = NULL;
	int64_t devices = 1, nodes = 1, accum = 1;
	weft_status st;

	memset(o, 0, sizeof(*o));
	o->device = (weft_device){ .type = WEFT_DEVICE_CPU, .index = 0 };
	if (sn && weft_cfg_kind_of(sn) == WEFT_CFG_MAP) {
		st = weft_cfg_str(sn, "name", NULL, &name);
		if (!st && !name)
			return weft_cfg_error(sn, "trainer.strategy needs a name: (ddp, zero_2, ...)");
		if (st)
			return st;
		o->section = sn;
	} else if (sn) {
		st = weft_cfg_as_str(sn, &name);
		if (st)
			return st;
	}
	if (tr) {
		const weft_cfg *dn = weft_cfg_get(tr, "devices");

		/* devices: auto is the launcher's world; alone, 1 (or --world-size) */
		if (dn && weft_cfg_scalar(dn) && !strcmp(weft_cfg_scalar(dn), "auto"))
			st = WEFT_OK;
		else
			st = weft_cfg_int(tr, "devices", 1, &devices);
		if (!st)
			st = weft_cfg_int(tr, "num_nodes", 1, &nodes);
		if (!st)
			st = weft_cfg_int(tr, "accumulate_grad_batches", 1, &accum);
		if (st)
			return st;
	}
	if (tr) {
		st = comm_of(tr, o);
		if (st)
			return st;
	}
	o->nodes = (int32_t)(nodes > 0 ? nodes : 1);
	o->node = sn;
	o->world = world > 0 ? world : (int32_t)(devices * nodes);
	/* no trainer.strategy: the trainer's default for the world */
	o->strategy = name ? name : o->world > 1 ? "ddp" : "single";
	o->n_micro = accum > 0 ? accum : 1;
	return tr ? weight_copy_of(tr, o) : WEFT_OK;
}

/* The registry with the default search path and the strategy's vtable in
 * it; free the registry when done with the vtable. A name no plugin gives
 * is a config error at trainer.strategy listing the strategies found. */
static weft_status find_strategy(const weft_plan_opts *o, weft_registry **reg,
				 const weft_strategy_ops **ops, const char **file)
{
	const weft_registry_entry *e = NULL;
	const void *vt = NULL;
	char names[512] = "", why[1024];
	size_t n = 0, used = 0;
	weft_status st;

	*reg = NULL;
	*ops = NULL;
	st = weft_registry_create(reg);
	if (!st)
		st = weft_registry_add_default_paths(*reg);
	if (st)
		return st;
	st = weft_registry_find(*reg, WEFT_PLUGIN_STRATEGY, o->strategy, &vt, file);
	if (st != WEFT_ERR_NOT_FOUND) {
		*ops = vt;
		return st;
	}
	snprintf(why, sizeof(why), "%s", weft_error_last());
	if (!weft_registry_list(*reg, &e, &n))
		for (size_t i = 0; i < n && used + 2 < sizeof(names); i++) {
			int w;

			if (e[i].kind != WEFT_PLUGIN_STRATEGY)
				continue;
			w = snprintf(names + used, sizeof(names) - used, "%s%s", used ? ", " : "",
				     e[i].name);
			if (w > 0)
				used += (size_t)w < sizeof(names) - used ? (size_t)w :
									   sizeof(names) - used - 1;
		}
	return weft_cfg_error(o->node, "weft plan knows strategies %s (the strategy plugins it "
			      "found), not '%s'; pick one, or put the plugin that provides it on "
			      "WEFT_PLUGIN_PATH (%s)", used ? names : "(none)", o->strategy, why);
}

/* strategy dp drives trainer.devices devices from one process: the trainer
 * gives it a world of 1 and n_devices (core/train, one_process_strategy),
 * so the plan does too. */
static int one_process(const char *name)
{
	return !strcmp(name, "dp");
}

weft_status weft_plan_model_options(const weft_plan_opts *o, weft_model_options *mo)
{
	return weft_plan_model_options_rank(o, 0, mo);
}

weft_status weft_plan_model_options_rank(const weft_plan_opts *o, int32_t rank,
					 weft_model_options *mo)
{
	const weft_strategy_ops *ops = NULL;
	weft_registry *reg = NULL;
	int32_t data_rank = 0, data_world = o->world;
	weft_status st = find_strategy(o, &reg, &ops, NULL);

	if (!st && (rank < 0 || rank >= o->world))
		st = weft_error_set(WEFT_ERR_INVALID_ARG, "plan: rank %d of a world of %d",
				    (int)rank, (int)o->world);
	if (!st && WEFT_HAS_MEMBER(ops, weft_strategy_ops, plan) && ops->plan &&
	    !one_process(o->strategy))
		st = ops->plan(o->section, rank, o->world, mo, &data_rank, &data_world);
	/* tp_plan points into the plugin, which is unloaded with the
	 * registry: keep a copy (one plan per process) */
	if (!st && mo->tp_plan) {
		static char plan_copy[8192];

		snprintf(plan_copy, sizeof(plan_copy), "%s", mo->tp_plan);
		mo->tp_plan = plan_copy;
	}
	weft_registry_free(reg);
	return st;
}

/* The weight copy's dtype for o's run with strategy ops (F32: none). */
static weft_dtype copy_kept(const weft_plan_opts *o, const weft_strategy_ops *ops)
{
	return weft_strategy_whole_params(ops) ? o->weight_copy : WEFT_F32;
}

weft_status weft_plan_weight_copy(const weft_plan_opts *o, weft_dtype *dt)
{
	weft_registry *reg = NULL;
	const weft_strategy_ops *ops = NULL;
	weft_status st = WEFT_OK;

	*dt = WEFT_F32;
	if (o->weight_copy != WEFT_F32 && !(st = find_strategy(o, &reg, &ops, NULL)))
		*dt = copy_kept(o, ops);
	weft_registry_free(reg);
	return st;
}

static weft_status no_plan(const weft_plan_opts *o, const weft_strategy_ops *ops,
			   const char *file)
{
	uint32_t v = ops->head.abi_version;

	if (!WEFT_HAS_MEMBER(ops, weft_strategy_ops, memory_plan))
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "weft plan: strategy '%s' (%s) gives "
				      "no plan: it was built against weft plugin ABI %u.%u, and "
				      "strategies give one through the memory_plan member since "
				      "ABI 1.2; rebuild it against this weft's SDK with a "
				      "memory_plan (weft/strategy.h)", o->strategy,
				      file ? file : "?", WEFT_ABI_VERSION_MAJOR(v),
				      WEFT_ABI_VERSION_MINOR(v));
	return weft_error_set(WEFT_ERR_UNSUPPORTED, "weft plan: strategy '%s' (%s) gives no plan: "
			      "its memory_plan member is NULL; its author can add one "
			      "(weft/strategy.h)", o->strategy, file ? file : "?");
}

/* The comm backend's own buffers per rank. gloo (plugins/comm/gloo,
 * gloo_shm.cc) maps one shared segment per communicator when every rank
 * is on one host (shm auto or on, at most 64 ranks): a 4 KiB header, a
 * 128-byte control line per rank rounded up to 4 KiB pages, and a 1 MiB
 * slot per rank, counted under WEFT_MEM_COMM on every rank. Its tcp path
 * and other backends size their buffers by the messages they see: not
 * known ahead, so 0 with a note. */
static void comm_backend(const weft_plan_opts *o, weft_plan *p)
{
	int64_t n = o->world;

	if (n <= 1 || !o->comm) {
		snprintf(p->comm_backend, sizeof(p->comm_backend), "none (one process)");
		return;
	}
	if (!strcmp(o->comm, "gloo") && !o->comm_shm_off && o->nodes <= 1 && n <= 64) {
		p->comm_backend_bytes = plan_gloo_shm_bytes(n);
		snprintf(p->comm_backend, sizeof(p->comm_backend), "gloo shared memory: %lld "
			 "slots of 1 MiB and a control block", (long long)n);
		return;
	}
	snprintf(p->comm_backend, sizeof(p->comm_backend), "%s%s: sized by the messages at run "
		 "time, not planned", o->comm, !strcmp(o->comm, "gloo") ? " over tcp" : "");
}

static void copy_result(const weft_plan_result *r, weft_plan *p)
{
	p->rank = r->rank;
	p->numel = r->numel;
	memcpy(p->bytes, r->bytes, sizeof(p->bytes));
	p->pipeline = r->pipeline;
	memcpy(p->host_bytes, r->host_bytes, sizeof(p->host_bytes));
	p->working_params = r->working_params;
	p->working_grads = r->working_grads;
	p->setup_bytes = r->setup_bytes;
	p->moved_elements = r->moved_elements;
	p->collective_elements = r->collective_elements;
	snprintf(p->layout, sizeof(p->layout), "%.*s", (int)sizeof(r->layout), r->layout);
	snprintf(p->formula, sizeof(p->formula), "%.*s", (int)sizeof(r->formula), r->formula);
	p->formula_bytes = r->formula_bytes;
	snprintf(p->comm_formula, sizeof(p->comm_formula), "%.*s", (int)sizeof(r->comm_formula),
		 r->comm_formula);
}

weft_status weft_plan_compute(const weft_params *ps, const weft_plan_opts *o, weft_plan *out)
{
	const weft_strategy_ops *ops = NULL;
	weft_registry *reg = NULL;
	const char *file = NULL;
	weft_strategy_env env;
	plan_comm comm;
	weft_plan_query q = { .struct_size = sizeof(q) };
	weft_plan_result r;
	const weft_host *host = weft_host_services();
	weft_plan_param *list = NULL;
	size_t n;
	void *s = NULL;
	weft_status st;

	memset(out, 0, sizeof(*out));
	if (o->world < 1)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "plan: world size %d; it must be >= 1",
				      (int)o->world);
	st = find_strategy(o, &reg, &ops, &file);
	if (st)
		goto out;
	if (!WEFT_HAS_MEMBER(ops, weft_strategy_ops, memory_plan) || !ops->memory_plan) {
		st = no_plan(o, ops, file);
		goto out;
	}
	plan_env_init(&env, &comm, one_process(o->strategy) ? 1 : o->world, (weft_params *)ps);
	if (one_process(o->strategy))
		env.n_devices = o->world;
	st = ops->create(o->section, &env, &s);
	if (st) {
		st = weft_error_wrap(st, "weft plan: strategy '%s' for a world of %d", o->strategy,
				     (int)o->world);
		goto out;
	}
	n = weft_params_count(ps);
	list = calloc(n ? n : 1, sizeof(*list));
	if (!list) {
		st = weft_error_set(WEFT_ERR_NOMEM, "weft plan: a list of %zu parameters", n);
		goto out_destroy;
	}
	for (size_t i = 0; i < n; i++) {
		const weft_tensor *t = weft_params_at(ps, i);
		int partial = 0;

		list[i] = (weft_plan_param){ .name = t->name ? t->name : "", .dtype = t->dtype,
					     .numel = weft_tensor_numel(t) };
		list[i].split = host->tp_param_split(ps, i, &partial, &list[i].full_numel);
	}
	q.n_params = n;
	q.params = list;
	q.world_size = o->world;
	q.n_slots = o->n_slots;
	q.n_micro = o->n_micro > 0 ? o->n_micro : 1;
	q.device = o->device;
	memset(&r, 0, sizeof(r));
	r.struct_size = sizeof(r);
	st = ops->memory_plan(s, &q, &r);
	if (st)
		st = weft_error_wrap(st, "weft plan: strategy '%s'", o->strategy);
	else
		copy_result(&r, out);
	/* the trainer's copy of the weights, beside the strategy's F32 ones */
	if (!st && copy_kept(o, ops) != WEFT_F32) {
		out->weight_copy_bytes = 2 * out->numel;
		out->bytes[WEFT_MEM_PARAMS] += out->weight_copy_bytes;
	}
	if (!st)
		comm_backend(o, out);
	if (!st)
		plan_sub_comms(&r, out);
out_destroy:
	ops->destroy(s);
	free(list);
out:
	weft_registry_free(reg);
	return st;
}
