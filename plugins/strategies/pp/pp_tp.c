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

enum { SPLIT_WHOLE = 0, SPLIT_ROWS = 1, SPLIT_COLS = 2, SPLIT_ROWS3 = 3 };

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
