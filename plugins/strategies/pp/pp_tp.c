/* Strategy hybrid with tp > 1: where a rank's optimizer state lies in the
 * whole model.
 *
 * The chunks' flat buffers, env->params and the pieces' ranges are in the
 * coordinates of this rank's tp shard of the model; optimizer.bin is in
 * the whole model's (weft_tp_whole_numel elements). Parameters keep their
 * order in both and a shard's elements keep theirs within a parameter, so
 * the map from shard to whole coordinates is increasing: the state, stored
 * range after range in shard order, is already in the order of the whole
 * ranges it maps to. A shard range maps to one run per whole parameter,
 * one per row-split one (this rank's rows), up to three per packed q|k|v
 * one and one per row of a column-split matrix. */
#include <string.h>

#include "pp.h"

enum { SPLIT_WHOLE = 0, SPLIT_ROWS = 1, SPLIT_COLS = 2, SPLIT_ROWS3 = 3, SPLIT_PARTS = 4 };

/* The runs of a packed-parts parameter (split kind 4, host->tp_param_runs
 * since ABI 1.5); 0 for the other kinds. */
static int parts_runs(const weft_params *ps, size_t i, int64_t *local, int64_t *whole,
		      int64_t *count, int *shared)
{
	if (!WEFT_HAS_MEMBER(g_host, weft_host, tp_param_runs) || !g_host->tp_param_runs)
		return 0;
	return g_host->tp_param_runs(ps, i, local, whole, count, shared);
}

/* Appends [b, e) to out (merged with the last range when adjacent); with
 * out NULL only counts. */
static void emit(int64_t *out, int *n, int64_t b, int64_t e)
{
	if (e <= b)
		return;
	if (*n && out && out[2 * *n - 1] == b) {
		out[2 * *n - 1] = e;
		return;
	}
	if (out) {
		out[2 * *n] = b;
		out[2 * *n + 1] = e;
	}
	(*n)++;
}

/* Local elements [a, b) of a parameter split into `blocks` blocks of
 * `inner` elements (this rank's block k lies at whole offset
 * g + k * inner * T + r * inner). */
static void emit_blocks(int64_t *out, int *n, int64_t g, int64_t a, int64_t b, int64_t inner,
			int64_t blocks, int32_t T, int32_t r)
{
	for (int64_t k = a / inner; k < blocks && k * inner < b; k++) {
		int64_t lo = a > k * inner ? a : k * inner;
		int64_t hi = b < (k + 1) * inner ? b : (k + 1) * inner;
		int64_t base = g + k * inner * T + (int64_t)r * inner - k * inner;

		emit(out, n, base + lo, base + hi);
	}
}

/* The whole-model ranges of shard range [lo, hi); out NULL: counts. */
static void map_range(const pp_strategy *s, const float *gbase, int64_t lo, int64_t hi,
		      int64_t *out, int *n)
{
	weft_params *ps = s->env->params;
	size_t np = g_host->params_count(ps);
	int32_t T = s->o.tp, r = s->mesh.tp_idx;
	int64_t g = 0;

	for (size_t i = 0; i < np; i++) {
		weft_tensor *t = g_host->params_at(ps, i);
		int64_t local = g_host->tensor_numel(t), off = (const float *)t->data - gbase, full;
		int64_t a = (lo > off ? lo : off) - off, b = (hi < off + local ? hi : off + local) - off;
		int partial = 0, split = g_host->tp_param_split(ps, i, &partial, &full);

		if (a < b) {
			switch (split) {
			case SPLIT_ROWS:
				emit(out, n, g + r * local + a, g + r * local + b);
				break;
			case SPLIT_ROWS3:
				emit_blocks(out, n, g, a, b, local / 3, 3, T, r);
				break;
			case SPLIT_COLS:
				emit_blocks(out, n, g, a, b, local / t->shape[0], t->shape[0], T, r);
				break;
			case SPLIT_PARTS: {
				int64_t lo_[3], wh[3], cnt[3];
				int sh[3], runs = parts_runs(ps, i, lo_, wh, cnt, sh);

				for (int k = 0; k < runs; k++) {
					int64_t x = a > lo_[k] ? a : lo_[k];
					int64_t y = b < lo_[k] + cnt[k] ? b : lo_[k] + cnt[k];

					if (x < y)
						emit(out, n, g + wh[k] + x - lo_[k],
						     g + wh[k] + y - lo_[k]);
				}
				break;
			}
			default:
				emit(out, n, g + a, g + b);
				break;
			}
		}
		g += split == SPLIT_WHOLE ? local : full;
	}
}

weft_status pp_tp_ranges(pp_strategy *s)
{
	weft_tensor *flat = NULL;
	const float *gbase;
	int n = 0;

	if (!s->tp_comm || s->whole_ranges)
		return WEFT_OK;
	g_host->params_flat(s->env->params, WEFT_F32, &flat, NULL);
	if (!flat)
		return g_host->error_set(WEFT_ERR_INTERNAL, "strategy hybrid: the model has no "
					 "float32 flat buffer");
	gbase = flat->data;
	for (int i = 0; i < s->n_ranges; i++)
		map_range(s, gbase, s->ranges[2 * i], s->ranges[2 * i + 1], NULL, &n);
	s->whole_ranges = g_host->mem_alloc(WEFT_MEM_OTHER, (size_t)(2 * n + 2) * sizeof(int64_t));
	if (!s->whole_ranges)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy hybrid: %d optimizer-state "
					 "ranges", n);
	s->n_whole_ranges = 0;
	for (int i = 0; i < s->n_ranges; i++)
		map_range(s, gbase, s->ranges[2 * i], s->ranges[2 * i + 1], s->whole_ranges,
			  &s->n_whole_ranges);
	return WEFT_OK;
}

/* ---- the clipping norm under tp ------------------------------------------
 *
 * The split parameters' gradients are shards, summed over the tp group;
 * the whole ones are the same on every tp rank and counted once, so the
 * two sums stay apart (pp_optim_step). Each is a sum_squares_ranges over
 * the chunk's gradient buffer, one range per parameter in parameter order:
 * the kernel table reads the device memory, the strategy only offsets. */

static const char *const TP_WTE = "transformer.wte.weight";

/* Walks chunk c's parameters of kind `split_kind` (0 whole, 1 split): counts
 * them, or with r appends their ranges at r[*n]. Off the CPU a range that
 * touches the one before it joins it (every range is a launch there); on
 * the CPU each parameter stays a range of its own (clipping's sum, bit for
 * bit). */
static weft_status sq_walk(const pp_strategy *s, const pp_chunk *c, int split_kind,
			   weft_elem_range *r, size_t *n)
{
	size_t np = g_host->params_count(c->params), first = *n;

	for (size_t i = 0; i < np; i++) {
		weft_tensor *t = g_host->params_at(c->params, i);
		int64_t full;
		int partial = 0, split = g_host->tp_param_split(c->params, i, &partial, &full);

		int64_t lo[3], wh[3], cnt[3];
		int sh[3], runs;

		if (!strcmp(t->name, TP_WTE) && !(c->parts & WEFT_STAGE_EMBED))
			continue;
		if (!t->grad)
			return g_host->error_set(WEFT_ERR_INTERNAL, "strategy hybrid: stage %d's "
						 "'%s' has no gradient", c->stage, t->name);
		runs = split == SPLIT_PARTS ? parts_runs(c->params, i, lo, wh, cnt, sh) : 0;
		if (!runs) {
			/* one run: the whole shard, split unless kind 0 */
			lo[0] = 0;
			cnt[0] = g_host->tensor_numel(t);
			sh[0] = split == SPLIT_WHOLE;
			runs = 1;
		}
		for (int k = 0; k < runs; k++) {
			weft_elem_range e = { .offset = (const float *)t->grad->data - c->grad + lo[k],
					      .count = cnt[k] };

			/* a shared part, summed over tp before the norm, counts once */
			if ((sh[k] == 0) != (split_kind != 0))
				continue;
			if (r && !s->on_cpu && *n > first &&
			    r[*n - 1].offset + r[*n - 1].count == e.offset) {
				r[*n - 1].count += e.count;
				continue;
			}
			if (r)
				r[*n] = e;
			(*n)++;
		}
	}
	return WEFT_OK;
}

weft_status pp_tp_sq_setup(pp_strategy *s)
{
	size_t n = 0;
	weft_status st;

	if (!s->tp_comm || s->tp_sq)
		return WEFT_OK;
	for (int k = 0; k < s->o.v; k++)
		for (int kind = 0; kind < 2; kind++)
			if ((st = sq_walk(s, &s->chunk[k], kind, NULL, &n)))
				return st;
	s->tp_sq = g_host->mem_alloc(WEFT_MEM_OTHER, (n ? n : 1) * sizeof(*s->tp_sq));
	if (!s->tp_sq)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy hybrid: %zu gradient-norm "
					 "ranges", n);
	n = 0;
	for (int k = 0; k < s->o.v; k++) {
		s->tp_sq_at[k][0] = n;
		if ((st = sq_walk(s, &s->chunk[k], 0, s->tp_sq, &n)))
			return st;
		s->tp_sq_at[k][1] = n;
		if ((st = sq_walk(s, &s->chunk[k], 1, s->tp_sq, &n)))
			return st;
		s->tp_sq_at[k][2] = n;
	}
	return WEFT_OK;
}

/* Adds to *acc the squares over ranges r[0..n) of chunk c's gradients. On
 * the CPU range by range, each sum added in parameter order: the host's
 * clipping sum as this strategy always added it, bit for bit. Elsewhere
 * one call (one wait) for all of them. */
static weft_status sq_add(pp_strategy *s, const pp_chunk *c, const weft_elem_range *r,
			  size_t n, double *acc)
{
	size_t per = s->on_cpu ? 1 : n;

	for (size_t i = 0; i < n; i += per) {
		double v = 0.0;
		weft_status st = s->k->sum_squares_ranges(s->kctx, c->grad, r + i, per, &v);

		if (st)
			return g_host->error_wrap(st, "strategy hybrid: the gradient norm of stage "
						  "%d on %s", c->stage, s->k->head.name);
		*acc += v;
	}
	return WEFT_OK;
}

weft_status pp_tp_sum_squares(pp_strategy *s, double part[2])
{
	weft_status st;

	part[0] = part[1] = 0.0;
	if ((st = pp_tp_sq_setup(s)))
		return st;
	for (int k = 0; k < s->o.v; k++)
		for (int kind = 0; kind < 2; kind++) {
			size_t lo = s->tp_sq_at[k][kind], hi = s->tp_sq_at[k][kind + 1];

			if (hi > lo && (st = sq_add(s, &s->chunk[k], s->tp_sq + lo, hi - lo,
						    &part[kind])))
				return st;
		}
	return WEFT_OK;
}

/* The shared parts' gradients (a grouped-query model's key/value
 * projection when there are fewer key/value heads than tp ranks: every
 * rank holds it whole and adds only what its query heads saw) summed over
 * the tp group in place, part by part in parameter order, the same on
 * every tp rank. */
weft_status pp_tp_sum_shared(pp_strategy *s, int64_t *bytes, int64_t *calls)
{
	if (!s->tp_comm)
		return WEFT_OK;
	for (int c = 0; c < s->o.v; c++) {
		pp_chunk *ch = &s->chunk[c];
		size_t np = g_host->params_count(ch->params);

		for (size_t i = 0; i < np; i++) {
			weft_tensor *t = g_host->params_at(ch->params, i);
			int64_t lo[3], wh[3], cnt[3], full;
			int sh[3], partial = 0, runs = 0;

			if (g_host->tp_param_split(ch->params, i, &partial, &full) == SPLIT_PARTS)
				runs = parts_runs(ch->params, i, lo, wh, cnt, sh);
			for (int k = 0; k < runs; k++) {
				weft_comm_buf b;
				weft_status st;

				if (!sh[k])
					continue;
				b = (weft_comm_buf){ .data = (float *)t->grad->data + lo[k],
						     .count = cnt[k], .dtype = WEFT_COMM_F32,
						     .device = (weft_comm_device)s->g.device_type,
						     .device_index = s->g.device_index };
				st = s->env->comm_ops->all_reduce(s->tp_comm, &b, &b, WEFT_COMM_SUM,
								  NULL);
				if (st)
					return g_host->error_wrap(st, "strategy hybrid: summing the "
								  "shared gradient of '%s' over the "
								  "tp group", t->name);
				*bytes += 4 * cnt[k];
				(*calls)++;
			}
		}
	}
	return WEFT_OK;
}

void pp_tp_free(pp_strategy *s)
{
	g_host->mem_free(s->tp_sq);
	s->tp_sq = NULL;
}
