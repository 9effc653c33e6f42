/* Stepping in shards is stepping whole, bit for bit.
 *
 * A ZeRO rank steps only its slice [begin, end) of the flat buffer, which
 * may start and end inside tensors. For every built-in optimizer (with the
 * options that change its inner loop), five steps over the whole buffer
 * must equal, byte for byte (memcmp), five steps done as 1, 2, 3 or 7
 * contiguous shards (ZeRO's ceil split, so the last shard is shorter) and
 * as shards with ragged boundaries. The buffer has padding between tensors
 * that no segment covers: it must stay untouched. Also: grad_scale equals
 * pre-scaled gradients, and bad step arguments are refused with nothing
 * changed.
 */
#include <math.h>
#include "optim_test.h"

#define NSEG 6
#define STEPS 5

/* tensor sizes chosen odd so that vector bodies and scalar tails and
 * shard boundaries fall everywhere; gaps are padding */
static const struct { const char *name; int64_t numel; int ndim; int decay; int64_t gap; } model[NSEG] = {
	{ "wte.weight", 257, 2, 1, 0 },
	{ "h.0.ln_1.weight", 31, 1, 0, 3 },
	{ "h.0.attn.c_attn.weight", 389, 2, 1, 0 },
	{ "h.0.attn.c_attn.bias", 17, 1, 0, 5 },
	{ "h.0.mlp.c_fc.weight", 203, 2, 1, 1 },
	{ "lm_head.bias", 9, 1, 0, 0 },
};

static weft_optim_segment segs[NSEG];
static int64_t total;

/* Deterministic values in about [-scale, scale] (a small LCG). */
static void fill(float *x, int64_t n, uint32_t seed, float scale)
{
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		x[i] = scale * ((float)(seed >> 8) / 8388608.0f - 1.0f);
	}
}

static void layout(void)
{
	for (int s = 0; s < NSEG; s++) {
		total += model[s].gap;
		segs[s] = (weft_optim_segment){ .name = model[s].name, .offset = total,
						.numel = model[s].numel, .ndim = model[s].ndim,
						.decay = model[s].decay };
		total += model[s].numel;
	}
	total += 4; /* trailing padding */
}

struct run {
	float *params;
	float *slots[OT_MAX_SLOTS];
};

static void run_alloc(struct run *r, size_t nslots)
{
	r->params = weft_mem_alloc(WEFT_MEM_PARAMS, (size_t)total * sizeof(float));
	WT_REQUIRE(r->params);
	fill(r->params, total, 1, 1.0f);
	for (size_t k = 0; k < OT_MAX_SLOTS; k++) {
		r->slots[k] = NULL;
		if (k < nslots) {
			r->slots[k] = weft_mem_calloc(WEFT_MEM_OPTIM, (size_t)total * sizeof(float));
			WT_REQUIRE(r->slots[k]);
		}
	}
}

static void run_free(struct run *r)
{
	weft_mem_free(r->params);
	for (size_t k = 0; k < OT_MAX_SLOTS; k++)
		weft_mem_free(r->slots[k]);
}

/* STEPS steps of `ops`, each done as the shards given by bounds[0..n]. */
static void run_steps(const weft_optim_ops *ops, const void *opt, size_t nslots, struct run *r,
		      const float *const *grads, const int64_t *bounds, size_t nshards)
{
	for (int s = 0; s < STEPS; s++) {
		weft_optim_step_info info = {
			.struct_size = sizeof(info), .step = s + 1, .lr = 0.01 * (1.0 + 0.1 * s),
			.grad_scale = 1.0,
		};

		for (size_t sh = 0; sh < nshards; sh++) {
			int64_t b = bounds[sh], e = bounds[sh + 1];
			float *slot_views[OT_MAX_SLOTS] = { 0 };

			/* a shard's slots are sized to the shard: pass views
			 * that start at its first element */
			for (size_t k = 0; k < nslots; k++)
				slot_views[k] = r->slots[k] + b;
			WT_OK(ops->step(opt, segs, NSEG, r->params + b, grads[s] + b, slot_views, b, e,
					&info));
		}
	}
}

static int same(const struct run *a, const struct run *b, size_t nslots)
{
	if (memcmp(a->params, b->params, (size_t)total * sizeof(float)))
		return 0;
	for (size_t k = 0; k < nslots; k++)
		if (memcmp(a->slots[k], b->slots[k], (size_t)total * sizeof(float)))
			return 0;
	return 1;
}

static void check_optimizer(const char *yaml, float *const *grads)
{
	weft_config *cfg = ot_config(yaml);
	const weft_cfg *sec = weft_cfg_get(weft_config_root(cfg), "optimizer");
	const char *name = weft_cfg_scalar(weft_cfg_get(sec, "name"));
	const weft_optim_ops *ops = ot_find(name);
	void *opt = NULL;
	size_t nslots;
	struct run whole, part;
	int64_t bounds[16];

	weft_cfg_get(sec, "lr");
	WT_OK(ops->create(sec, &opt));
	WT_OK(weft_config_check_unused(cfg));
	nslots = ops->state_slots(opt);

	run_alloc(&whole, nslots);
	bounds[0] = 0;
	bounds[1] = total;
	run_steps(ops, opt, nslots, &whole, (const float *const *)grads, bounds, 1);

	/* the padding (segment gaps) is untouched */
	{
		float *ref = malloc((size_t)total * sizeof(float));
		int64_t prev_end = 0, pad_ok = 1;

		WT_REQUIRE(ref);
		fill(ref, total, 1, 1.0f);
		for (int s = 0; s <= NSEG; s++) {
			int64_t pad_end = s < NSEG ? segs[s].offset : total;

			for (int64_t i = prev_end; i < pad_end; i++)
				pad_ok &= whole.params[i] == ref[i] &&
					  (nslots == 0 || whole.slots[0][i] == 0.0f);
			if (s < NSEG)
				prev_end = segs[s].offset + segs[s].numel;
		}
		WT_CHECK(pad_ok);
		/* and the tensors moved */
		WT_CHECK(memcmp(whole.params + segs[2].offset, ref + segs[2].offset,
				(size_t)segs[2].numel * sizeof(float)) != 0);
		free(ref);
	}

	for (int n = 1; n <= 7; n++) {
		int64_t per = (total + n - 1) / n;

		if (n != 1 && n != 2 && n != 3 && n != 7)
			continue;
		for (int i = 0; i <= n; i++)
			bounds[i] = (int64_t)i * per < total ? (int64_t)i * per : total;
		run_alloc(&part, nslots);
		run_steps(ops, opt, nslots, &part, (const float *const *)grads, bounds, (size_t)n);
		if (!same(&whole, &part, nslots))
			fprintf(stderr, "%s: %d shards differ from the whole step\n", name, n);
		WT_CHECK(same(&whole, &part, nslots));
		run_free(&part);
	}

	/* ragged boundaries: 1-element shards, empty shards, cuts at odd places */
	{
		const int64_t cuts[] = { 0, 1, 1, 2, 100, 257, 258, 261, 600, 601, 905, total };
		size_t ncuts = sizeof(cuts) / sizeof(cuts[0]);

		run_alloc(&part, nslots);
		run_steps(ops, opt, nslots, &part, (const float *const *)grads, cuts, ncuts - 1);
		WT_CHECK(same(&whole, &part, nslots));
		run_free(&part);
	}

	/* grad_scale s on g is the step on s * g (the first thing done to g) */
	{
		struct run scaled, prescaled;
		float *pg = malloc((size_t)total * sizeof(float));
		weft_optim_step_info info = {
			.struct_size = sizeof(info), .step = 1, .lr = 0.01, .grad_scale = 0.375,
		};

		WT_REQUIRE(pg);
		for (int64_t i = 0; i < total; i++)
			pg[i] = grads[0][i] * 0.375f;
		run_alloc(&scaled, nslots);
		run_alloc(&prescaled, nslots);
		WT_OK(ops->step(opt, segs, NSEG, scaled.params, grads[0], scaled.slots, 0, total,
				&info));
		info.grad_scale = 1.0;
		WT_OK(ops->step(opt, segs, NSEG, prescaled.params, pg, prescaled.slots, 0, total,
				&info));
		WT_CHECK(same(&scaled, &prescaled, nslots));
		run_free(&scaled);
		run_free(&prescaled);
		free(pg);
	}

	run_free(&whole);
	ops->destroy(opt);
	weft_config_free(cfg);
}

static void check_bad_steps(float *const *grads)
{
	const weft_optim_ops *ops = ot_find("adamw");
	void *opt = NULL;
	struct run r, before;
	weft_optim_step_info info = {
		.struct_size = sizeof(info), .step = 1, .lr = 0.01, .grad_scale = 1.0,
	};
	weft_optim_segment unsorted[2] = { segs[2], segs[0] };

	WT_OK(ops->create(NULL, &opt));
	WT_CHECK(ops->state_slots(opt) == 2);
	run_alloc(&r, 2);
	run_alloc(&before, 2);

	WT_FAILS(ops->step(opt, segs, NSEG, r.params, grads[0], r.slots, 10, 5, &info),
		 WEFT_ERR_INVALID_ARG, "adamw step", "[10, 5)");
	info.step = 0;
	WT_FAILS(ops->step(opt, segs, NSEG, r.params, grads[0], r.slots, 0, total, &info),
		 WEFT_ERR_INVALID_ARG, "step count must start at 1, got 0");
	info.step = 3;
	info.lr = -0.5;
	WT_FAILS(ops->step(opt, segs, NSEG, r.params, grads[0], r.slots, 0, total, &info),
		 WEFT_ERR_INVALID_ARG, "adamw step 3", "learning rate", "-0.5");
	info.lr = 0.01;
	WT_FAILS(ops->step(opt, unsorted, 2, r.params, grads[0], r.slots, 0, total, &info),
		 WEFT_ERR_INVALID_ARG, "segment 1", "wte.weight", "sorted by offset");
	WT_FAILS(ops->step(opt, segs, NSEG, r.params, grads[0], NULL, 0, total, &info),
		 WEFT_ERR_INVALID_ARG, "state slot 0 of 2 is NULL");
	info.struct_size = 8;
	WT_FAILS(ops->step(opt, segs, NSEG, r.params, grads[0], r.slots, 0, total, &info),
		 WEFT_ERR_INVALID_ARG, "step info");
	/* none of the refused calls changed anything */
	WT_CHECK(same(&r, &before, 2));
	/* an empty range is a no-op, not an error */
	info.struct_size = sizeof(info);
	WT_OK(ops->step(opt, segs, NSEG, r.params, grads[0], r.slots, 7, 7, &info));
	WT_CHECK(same(&r, &before, 2));

	run_free(&r);
	run_free(&before);
	ops->destroy(opt);
}

int main(void)
{
	static const char *const configs[] = {
		"optimizer: {name: sgd, lr: 0.1}\n",
		"optimizer: {name: sgd, momentum: 0.9, nesterov: true, weight_decay: 0.01}\n",
		"optimizer: {name: sgd, momentum: 0.5, dampening: 0.3}\n",
		"optimizer: {name: adam, weight_decay: 0.02, amsgrad: true}\n",
		"optimizer: {name: adam}\n",
		"optimizer: {name: adamw, weight_decay: 0.1}\n",
		"optimizer: {name: adamw, amsgrad: true, betas: [0.8, 0.95]}\n",
		"optimizer: {name: lion, weight_decay: 0.5}\n",
	};
	float *grads[STEPS];

	layout();
	for (int s = 0; s < STEPS; s++) {
		grads[s] = malloc((size_t)total * sizeof(float));
		WT_REQUIRE(grads[s]);
		fill(grads[s], total, 100u + (uint32_t)s, s == 2 ? 5.0f : 0.5f);
		grads[s][segs[1].offset] = 0.0f; /* Lion's sign(0) */
	}
	for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++)
		check_optimizer(configs[i], grads);
	check_bad_steps(grads);
	for (int s = 0; s < STEPS; s++)
		free(grads[s]);
	ot_release();
	return wt_done("test_optim_shards");
}
