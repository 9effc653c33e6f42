/* strategy "tp": Megatron-style tensor parallelism, composed with data
 * parallelism on a dp x tp mesh.
 *
 *   strategy: {name: tp, size: T, sequence_parallel: false, vocab_parallel: false,
 *              dp_strategy: ddp,   # or zero_1 (tp_zero.c)
 *              plan: {"*.c_attn": colwise, "*.c_fc": colwise, "*.c_proj": rowwise}}
 *
 * World rank r sits at (dp, tp) = (r / T, r % T): the T ranks of a tensor-
 * parallel group are consecutive (on one node, where the fast links are),
 * and the world size / T data-parallel replicas of the split model are the
 * groups of ranks with the same tp coordinate. The model is built split
 * (weft_model_options.tp_size, core/tp): its forward and backward run the
 * tensor-parallel collectives themselves over the tp communicator this
 * strategy binds. After backward the strategy
 *   - sums over the tp group the gradients each rank holds only partially
 *     (layernorms and row-parallel biases under sequence parallelism, and
 *     the key/value projection every rank holds whole when a grouped-query
 *     model has fewer key/value heads than tp ranks: shared parts),
 *   - averages every gradient over the dp group (DDP's mean),
 *   - clips by the global norm (split parameters' squares summed over the
 *     tp group, whole ones counted once),
 *   - runs the optimizer over this rank's parameters (its shards and its
 *     copy of the whole ones), which keeps every copy equal.
 * The rank layout is printed at setup (docs/parallelism.md).
 *
 * This file reads the options, creates the strategy, hands out its state
 * for checkpoints and names the vtable; tp_setup.c lays out the mesh and
 * the flat buffer, tp_step.c runs the step (tp_impl.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_impl.h"
#include "tp_plan.h"

/* ---- options and checks ---- */

/* The plan as the model builder takes it (weft_model_options.tp_plan):
 * "PATTERN=STYLE" lines. One strategy section per process: static. */
static char g_plan[8192];

/* Reads `plan` (a mapping of module-name patterns to colwise / rowwise /
 * replicate, in order) into g_plan; *has 0 when there is none. */
static weft_status parse_plan(const weft_cfg *section, int *has)
{
	const weft_cfg *plan = g_host->cfg_get(section, "plan");
	size_t n, used = 0;

	*has = 0;
	g_plan[0] = '\0';
	if (!plan)
		return WEFT_OK;
	if (g_host->cfg_kind_of(plan) != WEFT_CFG_MAP)
		return g_host->cfg_error(plan, "strategy tp: plan must be a mapping of module-name "
					 "patterns to colwise, rowwise or replicate, e.g. "
					 "{\"*.c_attn\": colwise, \"*.c_proj\": rowwise}");
	n = g_host->cfg_size(plan);
	for (size_t i = 0; i < n; i++) {
		const char *pat = g_host->cfg_key_at(plan, i), *style = NULL;
		const weft_cfg *v = g_host->cfg_at(plan, i);
		weft_status st = g_host->cfg_as_str(v, &style);
		int w;

		if (st)
			return st;
		if (strcmp(style, "colwise") && strcmp(style, "rowwise") && strcmp(style, "replicate"))
			return g_host->cfg_error(v, "strategy tp: plan: '%s' for '%s' is not a style; "
						 "use colwise, rowwise or replicate", style, pat);
		if (strchr(pat, '=') || strchr(pat, '\n'))
			return g_host->cfg_error(v, "strategy tp: plan: the pattern '%s' may not "
						 "contain '=' or a line break", pat);
		w = snprintf(g_plan + used, sizeof(g_plan) - used, "%s%s=%s", used ? "\n" : "",
			     pat, style);
		if (w < 0 || (size_t)w >= sizeof(g_plan) - used)
			return g_host->cfg_error(plan, "strategy tp: the plan is longer than %zu "
						 "bytes", sizeof(g_plan) - 1);
		used += (size_t)w;
	}
	*has = n > 0;
	return WEFT_OK;
}

/* Options of the model split (weft_model_options.tp_flags bits). */
enum { FLAG_SP = 1u << 0, FLAG_VOCAB = 1u << 1 };

/* Reads dp_strategy: *zero 1 for zero_1, 0 for ddp (the default). */
static weft_status parse_dp_strategy(const weft_cfg *section, int *zero)
{
	const char *name = "ddp";
	weft_status st;

	*zero = 0;
	if (!section)
		return WEFT_OK;
	if ((st = g_host->cfg_str(section, "dp_strategy", "ddp", &name)))
		return st;
	if (!strcmp(name, "zero_1")) {
		*zero = 1;
		return WEFT_OK;
	}
	if (strcmp(name, "ddp"))
		return g_host->cfg_error(g_host->cfg_get(section, "dp_strategy"), "strategy tp: "
					 "dp_strategy '%s' is not one of ddp (gradients averaged, "
					 "optimizer state on every replica) or zero_1 (optimizer "
					 "state sharded over the dp replicas)", name);
	return WEFT_OK;
}

/* Reads size, sequence_parallel, vocab_parallel, dp_strategy and plan;
 * *where gets the place to name. */
static weft_status parse_options(const weft_cfg *section, int32_t world, int64_t *size, int *sp,
				 int *vocab, int *zero, int *has_plan, char *where, size_t len)
{
	weft_status st;

	*size = world;
	*sp = 0;
	*vocab = 0;
	*has_plan = 0;
	if ((st = parse_dp_strategy(section, zero)))
		return st;
	snprintf(where, len, "trainer.strategy");
	if (section) {
		g_host->cfg_get(section, "name");
		if ((st = g_host->cfg_int(section, "size", world, size)) ||
		    (st = g_host->cfg_bool(section, "sequence_parallel", 0, sp)) ||
		    (st = g_host->cfg_bool(section, "vocab_parallel", 0, vocab)) ||
		    (st = parse_plan(section, has_plan)))
			return st;
		if (g_host->cfg_get(section, "size"))
			g_host->cfg_where(g_host->cfg_get(section, "size"), where, len);
	}
	if (*size < 1 || world % *size)
		return g_host->error_set(WEFT_ERR_CONFIG, "%s: strategy tp: size %lld does not "
					 "divide the world size %d; the mesh is dp x tp, so pick a "
					 "size that divides %d (processes = devices x num_nodes)",
					 where, (long long)*size, (int)world, (int)world);
	return WEFT_OK;
}

/* The trainer builds this rank's shards and splits the data over the dp
 * coordinate: every rank of a tp group reads the same rows. */
static weft_status tp_plan(const weft_cfg *section, int32_t rank, int32_t world,
			   weft_model_options *mo, int32_t *data_rank, int32_t *data_world)
{
	int64_t size;
	int sp, vocab, zero, has_plan;
	char where[160];
	weft_status st = parse_options(section, world, &size, &sp, &vocab, &zero, &has_plan, where,
				       sizeof(where));

	if (st)
		return st;
	if (size > 1) {
		mo->tp_size = (int32_t)size;
		mo->tp_rank = rank % (int32_t)size;
		mo->tp_flags = (sp ? FLAG_SP : 0u) | (vocab ? FLAG_VOCAB : 0u);
		mo->tp_plan = has_plan ? g_plan : NULL;
	}
	*data_rank = rank / (int32_t)size;
	*data_world = world / (int32_t)size;
	return WEFT_OK;
}

static weft_status tp_create(const weft_cfg *section, const weft_strategy_env *env, void **out)
{
	tp_strategy *s;
	int64_t size;
	int sp, vocab, zero, has_plan;
	int32_t msize = 1, mrank = 0;
	uint32_t mflags = 0;
	char where[160];
	weft_status st;

	*out = NULL;
	if (!WEFT_HAS_MEMBER(g_host, weft_host, tp_gather_param))
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy 'tp' needs a host with "
					 "the tensor-parallel services (weft ABI 1.1 with tp)");
	if ((st = parse_options(section, env->world_size, &size, &sp, &vocab, &zero, &has_plan,
				where, sizeof(where))) ||
	    (st = tp_dev_check(g_host, env)))
		return st;
	if (size > 1 && !env->comm_ops)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy tp: size %lld needs %lld "
					 "processes with a comm backend; this is a one-process run",
					 (long long)size, (long long)size);
	g_host->tp_info(env->params, &msize, &mrank, &mflags);
	if (msize != size)
		return g_host->error_set(WEFT_ERR_CONFIG, "%s: strategy tp: size %lld, but the "
					 "model was built for tensor-parallel size %d; build it with "
					 "weft_model_options.tp_size = %lld (the trainer does this "
					 "for strategy tp)", where, (long long)size, (int)msize,
					 (long long)size);
	if (msize > 1 && mrank != env->rank % msize)
		return g_host->error_set(WEFT_ERR_CONFIG, "strategy tp: world rank %d is tp rank "
					 "%d of the mesh, but its model holds the shards of tp rank "
					 "%d", (int)env->rank, (int)(env->rank % msize), (int)mrank);
	if (msize > 1 && !!(mflags & FLAG_SP) != !!sp)
		return g_host->error_set(WEFT_ERR_CONFIG, "%s: strategy tp: sequence_parallel is "
					 "%s but the model was built %s it", where,
					 sp ? "true" : "false", (mflags & FLAG_SP) ? "with" : "without");
	if (msize > 1 && !!(mflags & FLAG_VOCAB) != !!vocab)
		return g_host->error_set(WEFT_ERR_CONFIG, "%s: strategy tp: vocab_parallel is %s "
					 "but the model was built %s it (weft_model_options.tp_flags "
					 "bit 2)", where, vocab ? "true" : "false",
					 (mflags & FLAG_VOCAB) ? "with" : "without");
	s = calloc(1, sizeof(*s));
	if (!s)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy tp: out of memory");
	s->env = env;
	s->size = (int32_t)size;
	s->dp = env->world_size / (int32_t)size;
	s->tp_rank = env->rank % (int32_t)size;
	s->dp_rank = env->rank / (int32_t)size;
	s->sp = sp && size > 1;
	s->vocab = vocab && size > 1;
	s->zero = zero && s->dp > 1;
	*out = s;
	return WEFT_OK;
}

/* This rank's optimizer state in the whole model's flat coordinates
 * (checkpoints, weft/strategy.h): its slots hold its flat buffer, which
 * setup_ranges maps onto sorted global runs. Whole parameters are held -
 * and written, with the same values - by every rank, as DDP's replicas
 * are; a split parameter's elements by its one owner per dp replica. */
static weft_status tp_state(void *p, weft_strategy_state *out)
{
	tp_strategy *s = p;
	weft_status st;

	if (s->zero)
		return tp_dpz_state(&s->z, out);
	memset(out, 0, sizeof(*out));
	out->struct_size = sizeof(*out);
	out->n_slots = (uint32_t)s->n_slots;
	out->begin = 0;
	out->end = s->numel;
	st = tp_dev_state(&s->dev, s->slots, &s->mirror, s->slot_mem, s->n_slots, s->numel,
			  &out->slots);
	if (st)
		return st;
	if (s->size > 1) {
		out->n_ranges = s->n_ranges;
		out->ranges = s->ranges;
		out->begin = s->ranges[0];
		out->end = s->ranges[2 * s->n_ranges - 1];
	}
	return WEFT_OK;
}

static void tp_destroy(void *p)
{
	tp_strategy *s = p;

	if (!s)
		return;
	if (s->tp_comm)
		g_host->tp_bind(s->env->params, s->env->comm_ops, NULL);
	g_host->comm_free(s->dp_comm);
	g_host->comm_free(s->tp_comm);
	tp_dev_free(&s->dev, WEFT_MEM_OPTIM, s->slot_mem, (int64_t)s->n_slots * s->numel);
	tp_dev_free(&s->dev, WEFT_MEM_COMM, s->partial_buf, s->partial_numel);
	tp_dev_mirror_free(&s->dev, &s->mirror);
	g_host->mem_free(s->opt);
	g_host->mem_free(s->pack);
	g_host->mem_free(s->unpack);
	g_host->mem_free(s->sq[0]);
	g_host->mem_free(s->sq[1]);
	g_host->mem_free(s->partial);
	g_host->mem_free(s->ranges);
	if (s->zero)
		tp_dpz_free(&s->z);
	free(s);
}

static weft_status tp_memory_plan(void *p, const weft_plan_query *q, weft_plan_result *out)
{
	const tp_strategy *s = p;

	return tp_plan_compute(s->size, s->dp, s->zero, q, out);
}

static const weft_strategy_ops tp_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_strategy_ops, "tp"),
	.create = tp_create,
	.setup = tp_setup,
	.train_step = tp_train_step,
	.eval_step = tp_eval_step,
	.state = tp_state,
	.destroy = tp_destroy,
	.plan = tp_plan,
	.memory_plan = tp_memory_plan,
};

static const weft_plugin_entry_item items[] = {
	{ .kind = WEFT_PLUGIN_STRATEGY, .vtable = &tp_ops },
};

WEFT_PLUGIN_NAMES("strategy:tp");

static const weft_plugin_desc desc = {
	.head = WEFT_PLUGIN_HEAD(weft_plugin_desc, "tensor-parallel strategy"),
	.count = 1,
	.items = items,
};

WEFT_PLUGIN_ENTRY(host)
{
	g_host = host;
	return &desc;
}
