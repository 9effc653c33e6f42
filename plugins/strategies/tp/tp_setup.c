/* strategy tp's setup (tp_impl.h): the mesh's communicators, the flat
 * buffer's bookkeeping (partial gradients, optimizer state, the global
 * ranges of checkpoints, the clipping norm's ranges) and the replicas'
 * common start. */
#include <stdio.h>

#include "tp_impl.h"

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

weft_status tp_setup(void *p)
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
