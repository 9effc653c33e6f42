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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/step.h"
#include "tp_dev.h"
#include "tp_zero.h"
#include "tp_plan.h"

static const weft_host *g_host;

typedef struct tp_strategy {
	const weft_strategy_env *env;
	int32_t size, dp;           /* tp size, dp replicas */
	int32_t tp_rank, dp_rank;
	int sp;                     /* sequence parallel */
	int vocab;                  /* vocabulary parallel */
	int zero;                   /* dp_strategy zero_1 (and dp > 1) */
	tp_dpz z;                   /* its state, when zero */
	tp_dev dev;                 /* the kernel table every buffer is reached by */
	weft_comm *tp_comm, *dp_comm;
	float *params, *grads;      /* flat F32 on the device (borrowed) */
	int64_t numel;
	size_t n_slots;
	float *slot_mem;            /* n_slots x numel, WEFT_MEM_OPTIM, on the device */
	float *slots[TP_MAX_SLOTS];
	tp_mirror mirror;           /* the slots' host copy for checkpoints (off the CPU) */
	weft_optim_range *opt;      /* off the CPU: the step's ranges over [0, numel) */
	size_t n_opt;
	int64_t *partial;           /* [offset, count) pairs of the flat gradient that are
				     * partial: sequence-parallel parameters, shared parts */
	size_t n_partial;
	float *partial_buf;         /* their gradients packed, WEFT_MEM_COMM */
	int64_t partial_numel;
	weft_copy_range *pack, *unpack; /* gradients <-> partial_buf, n_partial each */
	weft_elem_range *sq[2];     /* per parameter, whole [0] and split [1] ones: its
				     * gradient (the clipping norm); zero_1: the pieces
				     * of the slice and (dp rank 0) the tail */
	size_t n_sq[2];
	int64_t *ranges;            /* this rank's flat buffer in the whole model's
				     * flat coordinates: sorted [begin, end) pairs */
	uint32_t n_ranges;
} tp_strategy;

static weft_comm_buf buf(void *data, int64_t n, weft_comm_dtype dt)
{
	return (weft_comm_buf){ .data = data, .count = n, .dtype = dt };
}

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

/* ---- setup ---- */

static void print_layout(const tp_strategy *s)
{
	if (s->env->rank != 0)
		return;
	g_host->log(WEFT_LOG_INFO, "strategy tp: mesh dp %d x tp %d over %d ranks (tp fastest: "
		    "rank = dp * %d + tp)%s%s%s", (int)s->dp, (int)s->size, (int)s->env->world_size,
		    (int)s->size, s->sp ? ", sequence parallel" : "",
		    s->vocab ? ", vocabulary parallel" : "",
		    s->zero ? ", optimizer state sharded over dp (zero_1)" : "");
	for (int32_t d = 0; d < s->dp; d++) {
		char line[256];
		int n = 0;

		for (int32_t t = 0; t < s->size && n < (int)sizeof(line) - 16; t++)
			n += snprintf(line + n, sizeof(line) - (size_t)n, "%s%d", t ? " " : "",
				      (int)(d * s->size + t));
		g_host->log(WEFT_LOG_INFO, "strategy tp:   dp %d: tp group ranks [%s]", (int)d,
			    line);
	}
}

static weft_status setup_comms(tp_strategy *s)
{
	const weft_strategy_env *env = s->env;
	weft_status st;

	if (s->size > 1) {
		st = g_host->comm_split(env->comm_ops, env->world, s->dp_rank, s->tp_rank,
					&s->tp_comm);
		if (!st)
			st = g_host->tp_bind(env->params, env->comm_ops, s->tp_comm);
		if (st)
			return g_host->error_wrap(st, "strategy tp: tp group of rank %d",
						  (int)env->rank);
	}
	if (s->dp > 1) {
		st = g_host->comm_split(env->comm_ops, env->world, s->tp_rank, s->dp_rank,
					&s->dp_comm);
		if (st)
			return g_host->error_wrap(st, "strategy tp: dp group of rank %d",
						  (int)env->rank);
	}
	return WEFT_OK;
}

/* The offset of parameter i's gradient in the flat gradient buffer (the
 * pointers are compared, never dereferenced: they may be device memory). */
static int64_t grad_at(const tp_strategy *s, size_t i)
{
	const weft_tensor *t = g_host->params_at(s->env->params, i);

	return (const float *)t->grad->data - s->grads;
}

/* The partial gradients (sequence-parallel parameters, shared parts of
 * packed ones): packed into partial_buf and back by one copy_ranges each
 * way. */
static weft_status setup_partial(tp_strategy *s)
{
	int64_t off = 0;

	if (!s->partial_numel)
		return WEFT_OK;
	s->partial_buf = tp_dev_alloc(&s->dev, WEFT_MEM_COMM, s->partial_numel,
				      "the sequence-parallel gradients' buffer");
	s->pack = g_host->mem_alloc(WEFT_MEM_OTHER, s->n_partial * sizeof(*s->pack));
	s->unpack = g_host->mem_alloc(WEFT_MEM_OTHER, s->n_partial * sizeof(*s->unpack));
	if (!s->partial_buf)
		return WEFT_ERR_NOMEM;
	if (!s->pack || !s->unpack)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy tp: out of memory for %zu "
					 "copy ranges", s->n_partial);
	for (size_t k = 0; k < s->n_partial; k++) {
		int64_t g = s->partial[2 * k], n = s->partial[2 * k + 1];

		s->pack[k] = (weft_copy_range){ .dst = off, .src = g, .count = n };
		s->unpack[k] = (weft_copy_range){ .dst = g, .src = off, .count = n };
		off += n;
	}
	return WEFT_OK;
}

/* Parameter i's gradient as runs of the flat buffer (offset, count, split
 * over tp or not, shared: a whole part with a partial gradient): one run,
 * or one per part of a packed parameter (split kind 4, ABI 1.5). Returns
 * their number (at most 3). */
static int param_runs(const tp_strategy *s, size_t i, int64_t *off, int64_t *cnt, int *split,
		      int *shared)
{
	weft_params *ps = s->env->params;
	int64_t full, local[3], whole[3];
	int partial = 0, kind = g_host->tp_param_split(ps, i, &partial, &full), n;

	if (kind == 4 && WEFT_HAS_MEMBER(g_host, weft_host, tp_param_runs) &&
	    g_host->tp_param_runs) {
		n = g_host->tp_param_runs(ps, i, local, whole, cnt, shared);
		for (int k = 0; k < n; k++) {
			off[k] = grad_at(s, i) + local[k];
			split[k] = !shared[k];
		}
		return n;
	}
	off[0] = grad_at(s, i);
	cnt[0] = g_host->tensor_numel(g_host->params_at(ps, i));
	split[0] = kind != 0;
	shared[0] = partial && s->sp;
	return 1;
}

static weft_status setup_params(tp_strategy *s)
{
	const weft_strategy_env *env = s->env;
	size_t n = g_host->params_count(env->params);
	weft_tensor *flat = NULL, *flat_grad = NULL;
	weft_status st;

	g_host->params_flat(env->params, WEFT_F32, &flat, &flat_grad);
	if (!flat || !flat_grad)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy tp: the model has no "
					 "float32 parameters with gradients");
	s->params = flat->data;
	s->grads = flat_grad->data;
	s->numel = g_host->tensor_numel(flat);
	s->partial = g_host->mem_calloc(WEFT_MEM_OTHER, (6 * n + 1) * sizeof(*s->partial));
	if (!s->partial)
		return WEFT_ERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		int64_t off[3], cnt[3];
		int split[3], shared[3], runs = param_runs(s, i, off, cnt, split, shared);

		for (int k = 0; k < runs; k++) {
			if (!shared[k])
				continue;
			s->partial[2 * s->n_partial] = off[k];
			s->partial[2 * s->n_partial + 1] = cnt[k];
			s->n_partial++;
			s->partial_numel += cnt[k];
		}
	}
	if ((st = setup_partial(s)))
		return st;
	s->n_slots = env->optim_ops->state_slots(env->optim);
	if (s->n_slots > TP_MAX_SLOTS)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy tp: optimizer '%s' wants "
					 "%zu state slots; at most %d are supported",
					 env->optim_ops->head.name, s->n_slots, TP_MAX_SLOTS);
	if (s->n_slots && !s->zero) {
		s->slot_mem = tp_dev_alloc(&s->dev, WEFT_MEM_OPTIM,
					   (int64_t)s->n_slots * s->numel, "the optimizer state");
		if (!s->slot_mem)
			return WEFT_ERR_NOMEM;
		for (size_t k = 0; k < s->n_slots; k++)
			s->slots[k] = s->slot_mem + k * (size_t)s->numel;
	}
	if (!s->dev.on_cpu && !s->zero) {
		s->opt = g_host->mem_alloc(WEFT_MEM_OTHER, (env->nseg + 1) * sizeof(*s->opt));
		if (!s->opt)
			return g_host->error_set(WEFT_ERR_NOMEM, "strategy tp: optimizer ranges");
		tp_dev_cut(&s->dev, 0, s->numel, 0, s->opt, &s->n_opt);
	}
	return WEFT_OK;
}

/* Appends [off, off + count) to s->sq[k]. On the CPU every piece stays a
 * range of its own, so each is summed exactly as clipping sums it (the
 * bits the host's loop gave); off the CPU, where the sum is taken in
 * another order anyway, touching pieces merge: the device sums each range
 * with two launches, whatever its length. */
static void add_sq(tp_strategy *s, int k, int64_t off, int64_t count)
{
	weft_elem_range *last = s->n_sq[k] ? &s->sq[k][s->n_sq[k] - 1] : NULL;

	if (!s->dev.on_cpu && last && last->offset + last->count == off) {
		last->count += count;
		return;
	}
	s->sq[k][s->n_sq[k]++] = (weft_elem_range){ .offset = off, .count = count };
}

/* Appends the pieces of the parameters within flat elements [b, e) to
 * s->sq, split parameters' to sq[1], whole ones' to sq[0], in order. */
static void add_sq_span(tp_strategy *s, int64_t b, int64_t e)
{
	size_t n = g_host->params_count(s->env->params);

	for (size_t i = 0; i < n && b < e; i++) {
		int64_t off[3], len[3];
		int split[3], shared[3], runs = param_runs(s, i, off, len, split, shared);

		for (int k = 0; k < runs; k++) {
			int64_t lo = off[k] > b ? off[k] : b;
			int64_t hi = off[k] + len[k] < e ? off[k] + len[k] : e;

			if (lo < hi)
				add_sq(s, split[k], lo, hi - lo);
		}
	}
}

/* The ranges of the clipping norm: every parameter's gradient, or under
 * zero_1 the pieces of this dp rank's slice and (dp rank 0) of the tail;
 * summed range by range in parameter order, as clipping sums. */
static weft_status setup_sq(tp_strategy *s)
{
	const weft_strategy_env *env = s->env;
	size_t n = g_host->params_count(env->params);

	for (int k = 0; k < 2; k++) {
		s->sq[k] = g_host->mem_alloc(WEFT_MEM_OTHER, (4 * n + 1) * sizeof(*s->sq[k]));
		if (!s->sq[k])
			return g_host->error_set(WEFT_ERR_NOMEM, "strategy tp: out of memory for "
						 "the gradient norm's ranges");
	}
	if (s->zero) {
		add_sq_span(s, s->z.begin, s->z.end);
		if (s->dp_rank == 0)
			add_sq_span(s, s->z.prefix, s->numel);
		return WEFT_OK;
	}
	for (size_t i = 0; i < n; i++) {
		int64_t off[3], len[3];
		int split[3], shared[3], runs = param_runs(s, i, off, len, split, shared);

		for (int k = 0; k < runs; k++)
			add_sq(s, split[k], off[k], len[k]);
	}
	return WEFT_OK;
}

/* Split kinds of host->tp_param_split (weft/plugin.h). */
enum { SPLIT_WHOLE = 0, SPLIT_ROWS = 1, SPLIT_COLS = 2, SPLIT_ROWS3 = 3, SPLIT_PARTS = 4 };

/* Appends global range [b, e) to s->ranges, merging it with the last one
 * when they touch. */
static void add_range(tp_strategy *s, int64_t b, int64_t e)
{
	if (s->n_ranges && s->ranges[2 * s->n_ranges - 1] == b) {
		s->ranges[2 * s->n_ranges - 1] = e;
		return;
	}
	s->ranges[2 * s->n_ranges] = b;
	s->ranges[2 * s->n_ranges + 1] = e;
	s->n_ranges++;
}

/* Where this rank's flat buffer lies in the whole model's flat buffer (the
 * coordinates of optimizer.bin). Parameters keep their order in both, and
 * within one parameter a shard's elements keep theirs, so walking the
 * shards in buffer order gives sorted, disjoint global runs: one per whole
 * parameter, one per row-split parameter (rank r's block of rows), three
 * per packed q|k|v parameter, and one per row of a column-split matrix.
 * The optimizer slots are therefore already stored range after range, as
 * weft_strategy_state.ranges wants: no copy, no gather. */
static weft_status setup_ranges(tp_strategy *s)
{
	weft_params *ps = s->env->params;
	size_t n = g_host->params_count(ps);
	int64_t cap = 0, g = 0, covered = 0;
	int32_t T = s->size, r = s->tp_rank;

	for (size_t i = 0; i < n; i++) {
		weft_tensor *t = g_host->params_at(ps, i);
		int partial;
		int64_t full;
		int split = g_host->tp_param_split(ps, i, &partial, &full);

		cap += split == SPLIT_COLS ? t->shape[0] : split >= SPLIT_ROWS3 ? 3 : 1;
	}
	s->ranges = g_host->mem_alloc(WEFT_MEM_OTHER, (size_t)(2 * (cap ? cap : 1)) * sizeof(int64_t));
	if (!s->ranges)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy tp: out of memory for %lld "
					 "optimizer-state ranges", (long long)cap);
	for (size_t i = 0; i < n; i++) {
		weft_tensor *t = g_host->params_at(ps, i);
		int64_t local = g_host->tensor_numel(t), full, inner, part;
		int partial;
		int split = g_host->tp_param_split(ps, i, &partial, &full);

		inner = t->ndim > 1 ? local / t->shape[0] : 1;
		switch (split) {
		case SPLIT_ROWS:
			add_range(s, g + r * local, g + (r + 1) * local);
			break;
		case SPLIT_ROWS3:
			part = local / 3; /* this rank's block of q, of k, of v */
			for (int64_t k = 0; k < 3; k++)
				add_range(s, g + k * part * T + r * part, g + k * part * T + (r + 1) * part);
			break;
		case SPLIT_COLS:
			for (int64_t row = 0; row < t->shape[0]; row++)
				add_range(s, g + row * inner * T + r * inner,
					  g + row * inner * T + (r + 1) * inner);
			break;
		case SPLIT_PARTS: {
			int64_t loc[3], whole[3], cnt[3];
			int shared[3], runs = g_host->tp_param_runs(ps, i, loc, whole, cnt, shared);

			for (int k = 0; k < runs; k++)
				add_range(s, g + whole[k], g + whole[k] + cnt[k]);
			break;
		}
		default:
			add_range(s, g, g + full);
			break;
		}
		covered += split == SPLIT_WHOLE ? full : local;
		g += full;
	}
	if (covered != s->numel)
		return g_host->error_set(WEFT_ERR_INVALID_ARG, "strategy tp: the shards cover %lld "
					 "elements but the flat buffer holds %lld; the model's split "
					 "bookkeeping is inconsistent", (long long)covered,
					 (long long)s->numel);
	return WEFT_OK;
}

static weft_status tp_setup(void *p)
{
	tp_strategy *s = p;
	weft_status st;

	print_layout(s);
	if ((st = tp_dev_init(&s->dev, g_host, s->env)) || (st = setup_comms(s)) ||
	    (st = setup_params(s)) || (st = setup_ranges(s)))
		return st;
	if (s->zero && (st = tp_dpz_setup(&s->z, &s->dev, s->env->comm_ops, s->dp_comm, s->dp,
					  s->dp_rank, s->numel, s->n_slots, s->ranges,
					  s->n_ranges)))
		return st;
	if ((st = setup_sq(s)))
		return st;
	/* the replicas of one shard start from dp rank 0's values */
	if (s->dp_comm) {
		weft_comm_buf b = tp_dev_buf(&s->dev, s->params, s->numel, WEFT_COMM_F32);

		st = s->env->comm_ops->broadcast(s->dp_comm, &b, 0, NULL);
	}
	return st;
}

/* ---- one step ---- */

/* Sums the partial gradients over the tp group (sequence parallelism):
 * packed into one buffer, all-reduced, unpacked. */
static weft_status sum_partial(tp_strategy *s, int64_t *bytes, int64_t *calls)
{
	const weft_strategy_env *env = s->env;
	const tp_dev *d = &s->dev;
	weft_comm_buf b;
	weft_status st;

	if (!s->partial_numel)
		return WEFT_OK;
	st = d->k->copy_ranges(d->kctx, sizeof(float), s->pack, s->n_partial, s->partial_buf,
			       s->grads);
	if (!st) {
		b = tp_dev_buf(d, s->partial_buf, s->partial_numel, WEFT_COMM_F32);
		st = env->comm_ops->all_reduce(s->tp_comm, &b, &b, WEFT_COMM_SUM, NULL);
	}
	if (!st)
		st = d->k->copy_ranges(d->kctx, sizeof(float), s->unpack, s->n_partial, s->grads,
				       s->partial_buf);
	if (st)
		return g_host->error_wrap(st, "strategy tp: summing sequence-parallel gradients");
	*bytes += s->partial_numel * (int64_t)sizeof(float);
	*calls += 1;
	return WEFT_OK;
}

/* The squares of this rank's gradient ranges (s->sq): whole parameters'
 * in part[0], split ones' in part[1]. One wait per part. */
static weft_status local_sumsq(tp_strategy *s, double *part)
{
	const tp_dev *d = &s->dev;

	for (int k = 0; k < 2; k++) {
		weft_status st = s->n_sq[k] ? d->k->sum_squares_ranges(d->kctx, s->grads, s->sq[k],
									s->n_sq[k], &part[k]) :
					     WEFT_OK;

		if (st)
			return g_host->error_wrap(st, "strategy tp: the gradient norm over %zu "
						  "ranges", s->n_sq[k]);
	}
	return WEFT_OK;
}

/* The global squared norm: split parameters' squares summed over the tp
 * group, whole ones once (every tp rank holds the same copy). */
static weft_status global_sumsq(tp_strategy *s, double *out, int64_t *bytes, int64_t *calls)
{
	const weft_strategy_env *env = s->env;
	double part[2] = { 0.0, 0.0 };
	weft_status st;

	if ((st = local_sumsq(s, part)))
		return st;
	if (s->tp_comm) {
		weft_comm_buf b = buf(&part[1], 1, WEFT_COMM_F64);

		st = env->comm_ops->all_reduce(s->tp_comm, &b, &b, WEFT_COMM_SUM, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy tp: gradient norm");
		*bytes += (int64_t)sizeof(double);
		*calls += 1;
	}
	*out = part[0] + part[1];
	return WEFT_OK;
}

/* zero_1: the global squared norm from each dp rank's slice (the tail,
 * which every dp rank holds, counted by dp rank 0): summed over dp, the
 * split parameters' part then over tp. */
static weft_status zero_sumsq(tp_strategy *s, double *out, int64_t *bytes, int64_t *calls)
{
	const weft_strategy_env *env = s->env;
	double part[2] = { 0.0, 0.0 };
	weft_comm_buf b = buf(part, 2, WEFT_COMM_F64), b1 = buf(&part[1], 1, WEFT_COMM_F64);
	weft_status st;

	if ((st = local_sumsq(s, part)))
		return st;
	st = env->comm_ops->all_reduce(s->dp_comm, &b, &b, WEFT_COMM_SUM, NULL);
	if (!st && s->tp_comm)
		st = env->comm_ops->all_reduce(s->tp_comm, &b1, &b1, WEFT_COMM_SUM, NULL);
	if (st)
		return g_host->error_wrap(st, "strategy tp: gradient norm (zero_1)");
	*bytes += 2 * (int64_t)sizeof(double) + (s->tp_comm ? (int64_t)sizeof(double) : 0);
	*calls += s->tp_comm ? 2 : 1;
	*out = part[0] + part[1];
	return WEFT_OK;
}

static weft_status tp_train_step(void *p, const weft_step_input *in, weft_step_report *out)
{
	tp_strategy *s = p;
	const weft_strategy_env *env = s->env;
	weft_optim_step_info info = in->optim;
	weft_accumulate acc = weft_accumulate_env(g_host, env);
	int64_t rows = weft_step_rows(in->micro, in->n_micro);
	double loss_sum, metric[2];
	int64_t comm_ns = 0, bytes = 0, calls = 0, c0;
	int64_t tc[6], te[6], tb[6];
	weft_step_clock clock;
	weft_status st;

	weft_step_clock_start(&clock);
	g_host->tp_stats(env->params, 1, tc, te, tb);
	if ((st = weft_step_accumulate(&acc, in->micro, in->n_micro, rows, &loss_sum)))
		return st;
	c0 = weft_clock_ns();
	if ((st = sum_partial(s, &bytes, &calls)))
		return st;
	if (s->zero) {
		if ((st = tp_dpz_reduce(&s->z, s->grads, &bytes, &calls)))
			return st;
	} else if (s->dp_comm) {
		weft_comm_buf b = tp_dev_buf(&s->dev, s->grads, s->numel, WEFT_COMM_F32);

		st = env->comm_ops->all_reduce(s->dp_comm, &b, &b, WEFT_COMM_AVG, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy tp: averaging gradients over dp");
		bytes += s->numel * (int64_t)sizeof(float);
		calls++;
	}
	out->grad_norm = -1.0;
	/* 16-mixed: agree over the world whether the gradients overflowed (a
	 * local inf or NaN makes the reduced value non-finite too) */
	if (env->struct_size >= offsetof(weft_strategy_env, grads_check) +
				sizeof(env->grads_check) && env->grads_check) {
		const float *arr = s->grads;
		int64_t len = s->numel;
		int skip = 0;

		st = env->grads_check(env->trainer, &arr, &len, 1, &skip);
		if (st)
			return st;
		out->skipped = skip;
	}
	if (env->gradient_clip_val > 0 && !out->skipped) {
		double sumsq = 0.0;

		st = s->zero ? zero_sumsq(s, &sumsq, &bytes, &calls) :
			       global_sumsq(s, &sumsq, &bytes, &calls);
		if (st)
			return st;
		sumsq *= info.grad_scale * info.grad_scale;
		info.grad_scale *= g_host->clip_coef(sumsq, env->gradient_clip_val,
						     &out->grad_norm);
	}
	comm_ns += weft_clock_ns() - c0;
	if (s->zero) {
		st = out->skipped ? WEFT_OK : tp_dpz_step(&s->z, env, s->params, s->grads, &info);
		c0 = weft_clock_ns();
		if (!st)
			st = tp_dpz_gather(&s->z, s->params, &bytes, &calls);
		comm_ns += weft_clock_ns() - c0;
	} else if (!out->skipped && s->dev.on_cpu) {
		st = env->optim_ops->step(env->optim, env->segs, env->nseg, s->params, s->grads,
					  s->slots, 0, s->numel, &info);
	} else if (!out->skipped) {
		st = tp_dev_step(&s->dev, &info, s->opt, s->n_opt, s->params, s->grads, s->slots,
				 &s->mirror, s->slot_mem, s->n_slots, s->numel);
	}
	if (st)
		return st;
	/* the global batch's mean loss: tp ranks agree, dp ranks hold parts */
	metric[0] = loss_sum;
	metric[1] = (double)rows;
	if (s->dp_comm) {
		weft_comm_buf b = buf(metric, 2, WEFT_COMM_F64);

		c0 = weft_clock_ns();
		st = env->comm_ops->all_reduce(s->dp_comm, &b, &b, WEFT_COMM_SUM, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy tp: loss over dp");
		comm_ns += weft_clock_ns() - c0;
		out->metric_comm_bytes = 2 * (int64_t)sizeof(double);
		bytes += out->metric_comm_bytes;
		calls++;
	}
	out->loss = metric[0] / metric[1];
	g_host->tp_stats(env->params, 0, tc, te, tb);
	for (int k = 0; k < 6; k++) {
		bytes += tb[k];
		calls += tc[k];
	}
	out->comm_bytes = bytes;
	out->comm_elements = bytes / (int64_t)sizeof(float);
	out->comm_calls = calls;
	out->comm_ns = comm_ns;
	out->exposed_comm_ns = comm_ns;
	weft_step_clock_finish(&clock, out);
	return WEFT_OK;
}

static weft_status tp_eval_step(void *p, const weft_micro_batch *b, weft_eval_report *out)
{
	tp_strategy *s = p;
	double v[4];
	weft_comm_buf cb = buf(v, 4, WEFT_COMM_F64);
	weft_status st;

	g_host->ctx_step_begin(s->env->ctx);
	st = s->env->evaluate(s->env->trainer, b, out);
	if (st || !s->dp_comm)
		return st;
	v[0] = out->loss_sum;
	v[1] = (double)out->rows;
	v[2] = (double)out->correct;
	v[3] = (double)out->counted;
	st = s->env->comm_ops->all_reduce(s->dp_comm, &cb, &cb, WEFT_COMM_SUM, NULL);
	if (st)
		return g_host->error_wrap(st, "strategy tp: evaluation over dp");
	out->loss_sum = v[0];
	out->rows = (int64_t)v[1];
	out->correct = (int64_t)v[2];
	out->counted = (int64_t)v[3];
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
