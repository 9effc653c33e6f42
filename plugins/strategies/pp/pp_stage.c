/* The chunks (stages) a rank holds: building them from the trainer's
 * model, their optimizer state, the tied embedding shared by the first and
 * the last stage (a model with its own lm_head.weight has none: the first
 * stage owns wte, the last lm_head), and moving values between them and
 * env->params. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp.h"

static const char *const WTE = "transformer.wte.weight";
static const char *const LM_HEAD = "lm_head.weight";

/* The block index of "transformer.h.<i>." names; -1 for other names. */
static int64_t block_of(const char *name)
{
	const char *pre = "transformer.h.";
	char *end;
	long long i;

	if (!name || strncmp(name, pre, strlen(pre)))
		return -1;
	i = strtoll(name + strlen(pre), &end, 10);
	return *end == '.' ? i : -1;
}

static weft_tensor *global_find(const pp_strategy *s, const char *name)
{
	size_t n = g_host->params_count(s->env->params);

	for (size_t i = 0; i < n; i++) {
		weft_tensor *t = g_host->params_at(s->env->params, i);

		if (t->name && !strcmp(t->name, name))
			return t;
	}
	return NULL;
}

static const float *global_flat(const pp_strategy *s)
{
	weft_tensor *flat = NULL;

	g_host->params_flat(s->env->params, WEFT_F32, &flat, NULL);
	return flat ? flat->data : NULL;
}

/* The whole model's shape from its parameter names: blocks, n_embd, the
 * parameters per block and of the embedding and the head. */
static weft_status model_shape(pp_strategy *s, int64_t **cost, int64_t *embed, int64_t *head)
{
	size_t n = g_host->params_count(s->env->params);
	weft_tensor *wte = global_find(s, WTE);

	s->n_layer = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t b = block_of(g_host->params_at(s->env->params, i)->name);

		if (b + 1 > s->n_layer)
			s->n_layer = b + 1;
	}
	if (!wte || s->n_layer < 1)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy 'pp': the model is not a "
					 "GPT (no transformer.wte.weight or transformer.h.* "
					 "parameters); pipeline stages are built from a GPT's blocks");
	s->n_embd = wte->shape[1];
	s->untied = global_find(s, LM_HEAD) != NULL;
	*cost = g_host->mem_calloc(WEFT_MEM_OTHER, (size_t)s->n_layer * sizeof(int64_t));
	if (!*cost)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'pp': block costs");
	*embed = 0;
	*head = s->untied ? 0 : g_host->tensor_numel(wte); /* the tied head's matrix */
	for (size_t i = 0; i < n; i++) {
		weft_tensor *t = g_host->params_at(s->env->params, i);
		int64_t b = block_of(t->name);

		if (b >= 0)
			(*cost)[b] += g_host->tensor_numel(t);
		else if (!strncmp(t->name, "transformer.ln_f", 16) || !strcmp(t->name, LM_HEAD))
			*head += g_host->tensor_numel(t);
		else
			*embed += g_host->tensor_numel(t);
	}
	return WEFT_OK;
}

/* Pieces: runs of the chunk's parameters that are contiguous both in the
 * chunk's flat buffer and in the whole model's. */
static weft_status chunk_pieces(pp_strategy *s, pp_chunk *c)
{
	const float *gbase = global_flat(s);
	size_t n = g_host->params_count(c->params);

	c->n_pieces = 0;
	for (size_t i = 0; i < n; i++) {
		weft_tensor *t = g_host->params_at(c->params, i);
		weft_tensor *g = global_find(s, t->name);
		int64_t local = (const float *)t->data - c->flat, len = g_host->tensor_numel(t);
		int64_t begin;
		int mirror = !strcmp(t->name, WTE) && !(c->parts & WEFT_STAGE_EMBED);
		pp_piece *p = c->n_pieces ? &c->piece[c->n_pieces - 1] : NULL;

		if (!g || g_host->tensor_numel(g) != len)
			return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'pp': stage %d's "
						 "parameter '%s' has no match in the model",
						 c->stage, t->name);
		begin = (const float *)g->data - gbase;
		if (p && p->mirror == mirror && p->end == begin &&
		    p->local + (p->end - p->begin) == local) {
			p->end += len;
			continue;
		}
		if (c->n_pieces == PP_MAX_PIECES)
			return g_host->error_set(WEFT_ERR_INTERNAL, "strategy 'pp': stage %d's "
						 "parameters are not contiguous in the model",
						 c->stage);
		c->piece[c->n_pieces++] = (pp_piece){ .local = local, .begin = begin,
						      .end = begin + len, .mirror = mirror };
	}
	return WEFT_OK;
}

/* The optimizer state's device block: n_slots arrays of state_numel
 * floats (one float more, so that no state is never no block). */
static size_t state_bytes(const pp_strategy *s)
{
	return (s->n_slots * (size_t)s->state_numel + 1) * sizeof(float);
}

static int cmp_piece(const void *a, const void *b)
{
	const pp_piece *x = *(pp_piece *const *)a, *y = *(pp_piece *const *)b;

	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Optimizer state: one block per slot holding every piece this rank
 * steps, in global order, so state() can describe it as ranges. The
 * mirror piece (the head's wte copy) is one of them: its state equals the
 * embedding stage's (same gradients, same steps), so both ranks report
 * that range and a checkpoint loads it into both copies. */
static weft_status alloc_state(pp_strategy *s)
{
	pp_piece *own[PP_MAX_CHUNKS * PP_MAX_PIECES];
	int n_own = 0;
	int64_t total = 0, at = 0;

	s->n_slots = s->env->optim_ops->state_slots(s->env->optim);
	if (s->n_slots > 8)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy 'pp': optimizer '%s' wants "
					 "%zu state slots per element; at most 8 are supported",
					 s->env->optim_ops->head.name, s->n_slots);
	for (int k = 0; k < s->o.v; k++)
		for (int i = 0; i < s->chunk[k].n_pieces; i++) {
			pp_piece *p = &s->chunk[k].piece[i];

			if (p->sh_hi == p->sh_lo)
				continue;
			own[n_own++] = p;
			total += p->sh_hi - p->sh_lo;
		}
	qsort(own, (size_t)n_own, sizeof(own[0]), cmp_piece);
	s->ranges = g_host->mem_alloc(WEFT_MEM_OTHER, (size_t)(2 * n_own + 1) * sizeof(int64_t));
	s->state_slots = g_host->mem_calloc(WEFT_MEM_OTHER, 9 * sizeof(float *));
	if (!s->ranges || !s->state_slots)
		return g_host->error_set(WEFT_ERR_NOMEM, "strategy 'pp': optimizer state of %lld "
					 "elements", (long long)total);
	s->state_numel = total;
	s->state_mem = pp_dalloc(s, WEFT_MEM_OPTIM, state_bytes(s), "the optimizer state");
	if (!s->state_mem)
		return g_host->error_wrap(WEFT_ERR_NOMEM, "strategy 'pp': optimizer state of %lld "
					  "elements", (long long)total);
	for (size_t q = 0; q < s->n_slots; q++)
		s->state_slots[q] = s->state_mem + q * (size_t)total;
	s->n_ranges = 0;
	for (int i = 0; i < n_own; i++) {
		for (size_t q = 0; q < s->n_slots; q++)
			own[i]->slots[q] = s->state_slots[q] + at;
		own[i]->state_at = at;
		at += own[i]->sh_hi - own[i]->sh_lo;
		if (s->n_ranges && s->ranges[2 * s->n_ranges - 1] == own[i]->sh_lo) {
			s->ranges[2 * s->n_ranges - 1] = own[i]->sh_hi;
			continue;
		}
		s->ranges[2 * s->n_ranges] = own[i]->sh_lo;
		s->ranges[2 * s->n_ranges + 1] = own[i]->sh_hi;
		s->n_ranges++;
	}
	return pp_dev_ranges(s);
}

weft_status pp_chunks_build(pp_strategy *s)
{
	int64_t *cost = NULL, embed = 0, head = 0;
	weft_status st;

	st = pp_dev_init(s);
	if (!st)
		st = model_shape(s, &cost, &embed, &head);
	if (st)
		goto out;
	s->bounds = g_host->mem_alloc(WEFT_MEM_OTHER, (size_t)(s->S + 1) * sizeof(int64_t));
	if (!s->bounds) {
		st = g_host->error_set(WEFT_ERR_NOMEM, "strategy 'pp': stage bounds");
		goto out;
	}
	st = pp_partition(&s->o, s->S, s->n_layer, cost, embed, head, s->bounds);
	if (st)
		goto out;
	for (int k = 0; k < s->o.v; k++) {
		pp_chunk *c = &s->chunk[k];
		weft_tensor *flat = NULL, *grad = NULL, *w;

		c->stage = k * s->g.size + s->g.rank;
		c->layer_begin = s->bounds[c->stage];
		c->layer_end = s->bounds[c->stage + 1];
		c->parts = WEFT_STAGE_BLOCKS | (c->stage == 0 ? WEFT_STAGE_EMBED : 0u) |
			   (c->stage == s->S - 1 ? WEFT_STAGE_HEAD : 0u);
		st = s->env->stage_create(s->env->trainer, c->parts, c->layer_begin, c->layer_end,
					  &c->handle, &c->params);
		if (!st && s->tp_comm)
			st = g_host->tp_bind(c->params, s->env->comm_ops, s->tp_comm);
		if (st)
			goto out;
		g_host->params_flat(c->params, WEFT_F32, &flat, &grad);
		if (!flat || !grad) {
			st = g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy 'pp': stage %d has no "
					       "float32 parameters with gradients", c->stage);
			goto out;
		}
		c->flat = flat->data;
		c->grad = grad->data;
		c->numel = g_host->tensor_numel(flat);
		st = chunk_pieces(s, c);
		if (st)
			goto out;
		for (int i = 0; i < c->n_pieces; i++)
			pp_dp_shard(s, &c->piece[i]);
		for (size_t i = 0; i < g_host->params_count(c->params); i++) {
			w = g_host->params_at(c->params, i);
			if (s->S > 1 && !s->untied && !strcmp(w->name, WTE)) {
				c->wte = w->data;
				c->wte_grad = w->grad->data;
				c->wte_numel = g_host->tensor_numel(w);
			}
		}
	}
	st = alloc_state(s);
	if (!st)
		st = pp_copy_params(s, 1);
	if (!st)
		st = pp_dev_sync(s);
out:
	g_host->mem_free(cost);
	return st;
}

void pp_chunks_free(pp_strategy *s)
{
	for (int k = 0; k < s->o.v; k++) {
		pp_chunk *c = &s->chunk[k];

		for (int i = 0; i < c->n_pieces; i++)
			g_host->mem_free(c->piece[i].slot_mem);
		if (c->handle)
			s->env->stage_free(s->env->trainer, c->handle);
		memset(c, 0, sizeof(*c));
	}
	g_host->mem_free(s->bounds);
	g_host->mem_free(s->ranges);
	g_host->mem_free(s->whole_ranges);
	s->whole_ranges = NULL;
	g_host->mem_free(s->state_slots);
	if (s->k) {
		pp_dfree(s, WEFT_MEM_OPTIM, s->state_mem, state_bytes(s));
		pp_dfree(s, WEFT_MEM_COMM, s->wte_tmp, (size_t)s->wte_tmp_numel * sizeof(float));
	}
	pp_dev_fini(s);
	s->bounds = s->ranges = NULL;
	s->state_slots = NULL;
	s->state_mem = s->wte_tmp = NULL;
}

weft_status pp_copy_params(pp_strategy *s, int to_stage)
{
	float *gbase = (float *)global_flat(s);

	for (int k = 0; k < s->o.v; k++) {
		pp_chunk *c = &s->chunk[k];
		weft_copy_range r[PP_MAX_PIECES];
		size_t n = 0;
		weft_status st;

		for (int i = 0; i < c->n_pieces; i++) {
			pp_piece *p = &c->piece[i];

			if (to_stage)
				r[n++] = (weft_copy_range){ .dst = p->local, .src = p->begin,
							    .count = p->end - p->begin };
			else if (!p->mirror)
				r[n++] = (weft_copy_range){ .dst = p->begin, .src = p->local,
							    .count = p->end - p->begin };
		}
		if (!n)
			continue;
		st = to_stage ? s->k->copy_ranges(s->kctx, sizeof(float), r, n, c->flat, gbase) :
				s->k->copy_ranges(s->kctx, sizeof(float), r, n, gbase, c->flat);
		if (st)
			return g_host->error_wrap(st, "strategy 'pp': copying stage %d's parameters "
						  "%s the model", c->stage, to_stage ? "from" : "to");
	}
	return WEFT_OK;
}

/* The first stage's embedding and the last stage's head are one tied
 * matrix held twice: both add the other's gradient (a + b == b + a in
 * IEEE arithmetic), so the two copies stay bit-identical. An untied head
 * (lm_head.weight) shares nothing: no chunk records a wte and nothing is
 * exchanged. The exchange is
 * ordered so that it cannot deadlock on a backend whose sends wait for
 * the matching receive (NCCL's rendezvous): pipeline rank 0 sends first,
 * then receives; the last rank receives first, then sends. */
weft_status pp_sync_wte(pp_strategy *s)
{
	pp_chunk *c = NULL;
	int peer, first;
	weft_comm_buf sb, rb;
	weft_comm_work *ws = NULL, *wr = NULL;
	weft_status st, st2;

	if (s->S == 1 || s->untied)
		return WEFT_OK;
	if (s->g.rank == 0 && s->chunk[0].wte) {
		c = &s->chunk[0];
		peer = s->g.size - 1;
		first = 1;
	} else if (s->g.rank == s->g.size - 1 && s->chunk[s->o.v - 1].wte) {
		c = &s->chunk[s->o.v - 1];
		peer = 0;
		first = 0;
	} else {
		return WEFT_OK;
	}
	if (!s->wte_tmp) {
		s->wte_tmp = pp_dalloc(s, WEFT_MEM_COMM, (size_t)c->wte_numel * sizeof(float),
				       "the tied embedding's buffer");
		if (!s->wte_tmp)
			return g_host->error_wrap(WEFT_ERR_NOMEM, "strategy 'pp': tied embedding");
		s->wte_tmp_numel = c->wte_numel;
	}
	sb = (weft_comm_buf){ .data = c->wte_grad, .count = c->wte_numel, .dtype = WEFT_COMM_F32,
			      .device = (weft_comm_device)s->g.device_type,
			      .device_index = s->g.device_index };
	rb = sb;
	rb.data = s->wte_tmp;
	if (first) {
		st = s->g.ops->send(s->g.comm, &sb, peer, &ws);
		if (!st)
			st = s->g.ops->wait(ws, -1);
		if (!st)
			st = s->g.ops->recv(s->g.comm, &rb, peer, &wr);
		st2 = st ? st : s->g.ops->wait(wr, -1);
	} else {
		st = s->g.ops->recv(s->g.comm, &rb, peer, &wr);
		if (!st)
			st = s->g.ops->wait(wr, -1);
		if (!st)
			st = s->g.ops->send(s->g.comm, &sb, peer, &ws);
		st2 = st ? st : s->g.ops->wait(ws, -1);
	}
	if (!st)
		st = st2;
	if (st)
		return g_host->error_wrap(st, "strategy 'pp': exchanging the tied embedding's "
					  "gradient between pipeline ranks 0 and %d", s->g.size - 1);
	s->msgs.bytes += 4 * c->wte_numel;
	s->msgs.calls += 2;
	st = s->k->axpy(s->kctx, WEFT_F32, c->wte_numel, 1.0f, s->wte_tmp, c->wte_grad);
	return st ? g_host->error_wrap(st, "strategy 'pp': adding the tied embedding's gradients")
		  : WEFT_OK;
}

weft_status pp_optim_step(pp_strategy *s, const weft_optim_step_info *info, double *grad_norm)
{
	const weft_strategy_env *env = s->env;
	weft_optim_step_info in = *info;
	weft_status st;

	*grad_norm = -1.0;
	s->skipped = 0;
	/* 16-mixed: every rank of every stage agrees whether the gradients
	 * overflowed (each rank checks its chunks' flat gradients) */
	if (env->struct_size >= offsetof(weft_strategy_env, grads_check) +
				sizeof(env->grads_check) && env->grads_check) {
		const float *arr[PP_MAX_CHUNKS];
		int64_t len[PP_MAX_CHUNKS];

		for (int k = 0; k < s->o.v; k++) {
			arr[k] = s->chunk[k].grad;
			len[k] = s->chunk[k].numel;
		}
		st = env->grads_check(env->trainer, arr, len, (size_t)s->o.v, &s->skipped);
		if (st || s->skipped)
			return st;
	}
	if (env->gradient_clip_val > 0) {
		double sumsq = 0.0, part[2];

		/* piece by piece, added in this order: the sum the CPU always
		 * gave, bit for bit */
		for (int k = 0; k < s->o.v && !s->tp_comm; k++)
			for (int i = 0; i < s->chunk[k].n_pieces; i++) {
				const pp_piece *p = &s->chunk[k].piece[i];
				weft_elem_range r = { .offset = p->local, .count = p->end - p->begin };
				double part_p = 0.0;

				if (p->mirror)
					continue;
				st = s->k->sum_squares_ranges(s->kctx, s->chunk[k].grad, &r, 1,
							      &part_p);
				if (st)
					return g_host->error_wrap(st, "strategy 'pp': the gradient "
								  "norm of stage %d",
								  s->chunk[k].stage);
				sumsq += part_p;
			}
		/* under tp the pieces hold shards of the split parameters: their
		 * squares are summed over the tp group, the replicated ones (the
		 * same on every tp rank) counted once */
		if (s->tp_comm) {
			st = pp_tp_sum_squares(s, part);
			if (!st)
				st = pp_tp_sum(s, &part[1], 1);
			if (st)
				return st;
			sumsq = part[0] + part[1];
		}
		st = pp_sum(s, &sumsq, 1);
		if (st)
			return st;
		sumsq *= in.grad_scale * in.grad_scale;
		in.grad_scale *= g_host->clip_coef(sumsq, env->gradient_clip_val, grad_norm);
	}
	if (s->fused)
		return pp_dev_step(s, &in);
	for (int k = 0; k < s->o.v; k++) {
		pp_chunk *c = &s->chunk[k];

		for (int i = 0; i < c->n_pieces; i++) {
			pp_piece *p = &c->piece[i];
			int64_t off = p->local + (p->sh_lo - p->begin);

			if (p->sh_hi == p->sh_lo)
				continue;
			st = env->optim_ops->step(env->optim, env->segs, env->nseg, c->flat + off,
						  c->grad + off, p->slots, p->sh_lo, p->sh_hi, &in);
			if (st)
				return st;
		}
	}
	return WEFT_OK;
}

/* The global range stage `st` owns (its pieces other than the mirror). */
static void stage_range(const pp_strategy *s, int stage, int64_t *lo, int64_t *hi)
{
	const float *gbase = global_flat(s);
	size_t n = g_host->params_count(s->env->params);

	*lo = INT64_MAX;
	*hi = 0;
	for (size_t i = 0; i < n; i++) {
		weft_tensor *t = g_host->params_at(s->env->params, i);
		int64_t b = block_of(t->name), off = (const float *)t->data - gbase;
		int mine;

		if (b >= 0)
			mine = b >= s->bounds[stage] && b < s->bounds[stage + 1];
		else if (!strncmp(t->name, "transformer.ln_f", 16) || !strcmp(t->name, LM_HEAD))
			mine = stage == s->S - 1;
		else
			mine = stage == 0;
		if (!mine)
			continue;
		if (off < *lo)
			*lo = off;
		if (off + g_host->tensor_numel(t) > *hi)
			*hi = off + g_host->tensor_numel(t);
	}
}

weft_status pp_gather(pp_strategy *s)
{
	float *gbase = (float *)global_flat(s);
	weft_status st;

	pp_copy_params(s, 0);
	if (s->g.size == 1)
		return WEFT_OK;
	for (int stage = 0; stage < s->S; stage++) {
		int64_t lo, hi;
		weft_comm_buf b;

		stage_range(s, stage, &lo, &hi);
		b = (weft_comm_buf){ .data = gbase + lo, .count = hi - lo, .dtype = WEFT_COMM_F32,
				     .device = (weft_comm_device)s->g.device_type,
				     .device_index = s->g.device_index };
		st = s->g.ops->broadcast(s->g.comm, &b, stage % s->g.size, NULL);
		if (st)
			return g_host->error_wrap(st, "strategy 'pp': gathering stage %d's parameters "
						  "from pipeline rank %d", stage, stage % s->g.size);
	}
	return WEFT_OK;
}

weft_status pp_state_build(pp_strategy *s, weft_strategy_state *out)
{
	const int64_t *ranges = s->ranges;
	int n_ranges = s->n_ranges;
	float *const *slots = NULL;
	weft_status st = pp_tp_ranges(s);

	if (st)
		return st;
	if (s->tp_comm) {
		ranges = s->whole_ranges;
		n_ranges = s->n_whole_ranges;
	}
	st = pp_dev_state(s, &slots);
	if (st)
		return st;
	out->n_slots = (uint32_t)s->n_slots;
	out->slots = slots;
	out->begin = n_ranges ? ranges[0] : 0;
	out->end = n_ranges ? ranges[2 * n_ranges - 1] : 0;
	if (n_ranges > 1) {
		if (out->struct_size < offsetof(weft_strategy_state, ranges) + sizeof(out->ranges))
			return g_host->error_set(WEFT_ERR_UNSUPPORTED, "strategy 'pp': this rank's "
						 "optimizer state covers %d separate ranges of the "
						 "model (interleaved stages) and the trainer reads "
						 "only one", n_ranges);
		out->n_ranges = (uint32_t)n_ranges;
		out->ranges = ranges;
	}
	return WEFT_OK;
}
