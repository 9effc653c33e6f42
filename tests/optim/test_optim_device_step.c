/* The device services of strategies on the CPU table (weft/device.h,
 * since ABI 1.3), against what they replace, bit for bit:
 *   - optim_step over ranges equals the built-in adam / adamw / sgd
 *     plugin's step() (memcmp of parameters and every slot after 5 steps)
 *     for L2 decay, decoupled decay and amsgrad; sgd with and without
 *     momentum, dampening, Nesterov and decay; with a grad_scale, when the
 *     ranges cut the buffer at the segments and when the gradients and
 *     the state are packed at other offsets than the parameters (a ZeRO
 *     shard's layout); padding no range covers stays untouched;
 *   - sum_squares_ranges equals the host's clipping sum
 *     (weft_clip_sum_squares) added range by range, for ranges shorter
 *     and longer than clipping's parallel split and its chunk cap;
 *   - copy_ranges packs and unpacks pieces exactly;
 *   - bad arguments give one message naming what was wrong: an element
 *     size of 3, a negative count, an update kind the table lacks, an
 *     update description older than the table.
 * Zero tolerance throughout: these are the same operations in the same
 * order, so any difference is a defect. */
#include <math.h>

#include "optim_test.h"
#include "train/clip.h"
#include "weft/device.h"

#define STEPS 5
#define NSEG 5

static const struct { int64_t numel; int decay; int64_t gap; } model[NSEG] = {
	{ 257, 1, 0 }, { 31, 0, 3 }, { 389, 1, 0 }, { 17, 0, 5 }, { 203, 1, 2 },
};

static weft_optim_segment segs[NSEG];
static int64_t total;
static const weft_kernel_table *k;

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
		segs[s] = (weft_optim_segment){ .name = "t", .offset = total,
						.numel = model[s].numel, .ndim = 1,
						.decay = model[s].decay };
		total += model[s].numel;
	}
	total += 4;
}

/* STEPS steps of the plugin over the whole buffer against STEPS of the
 * table's optim_step; packed != 0 puts gradients and state at offsets
 * shifted by 11 and 7 elements (plus the gaps squeezed out). */
static void compare(const char *name, const char *yaml, int packed)
{
	const weft_optim_ops *ops = ot_find(name);
	weft_config *cfg = ot_config(yaml);
	void *st = NULL;
	weft_optim_adam_params ap = { .struct_size = sizeof(ap) };
	weft_optim_sgd_params sp = { .struct_size = sizeof(sp) };
	int adam;
	double wd;
	size_t nslots;
	float *p1, *p2, *g, *g2, *s1[3] = { 0 }, *s2[3] = { 0 };
	weft_optim_range r[NSEG];
	int64_t gofs = packed ? 11 : 0, sofs = packed ? 7 : 0, at = 0;

	WT_OK(ops->create(weft_cfg_get(weft_config_root(cfg), "optimizer"), &st));
	adam = ops->adam_params && ops->adam_params(st, &ap);
	WT_REQUIRE(adam || (WEFT_HAS_MEMBER(ops, weft_optim_ops, sgd_params) && ops->sgd_params &&
			    ops->sgd_params(st, &sp)));
	wd = adam ? ap.weight_decay : sp.weight_decay;
	nslots = ops->state_slots(st);
	p1 = calloc((size_t)total, sizeof(float));
	p2 = calloc((size_t)total, sizeof(float));
	g = calloc((size_t)total, sizeof(float));
	g2 = calloc((size_t)(total + gofs), sizeof(float));
	WT_REQUIRE(p1 && p2 && g && g2);
	for (size_t i = 0; i < nslots; i++) {
		s1[i] = calloc((size_t)total, sizeof(float));
		s2[i] = calloc((size_t)(total + sofs), sizeof(float));
		WT_REQUIRE(s1[i] && s2[i]);
	}
	fill(p1, total, 3, 1.0f);
	memcpy(p2, p1, (size_t)total * sizeof(float));
	for (int s = 0; s < NSEG; s++) {
		r[s] = (weft_optim_range){ .param = segs[s].offset,
					   .grad = packed ? gofs + at : segs[s].offset,
					   .state = packed ? sofs + at : segs[s].offset,
					   .count = segs[s].numel,
					   .decay = segs[s].decay && wd != 0.0 };
		at += segs[s].numel;
	}
	for (int step = 1; step <= STEPS; step++) {
		weft_optim_step_info info = { .struct_size = sizeof(info), .step = step,
					      .lr = 0.01 * step, .grad_scale = 0.7 };
		weft_optim_kernel ok;

		fill(g, total, 100 + (uint32_t)step, 2.0f);
		for (int s = 0; s < NSEG; s++)
			memcpy(g2 + r[s].grad, g + segs[s].offset,
			       (size_t)segs[s].numel * sizeof(float));
		WT_OK(ops->step(st, segs, NSEG, p1, g, s1, 0, total, &info));
		if (adam)
			weft_optim_kernel_adam(&ok, ap.decoupled, ap.amsgrad, ap.beta1, ap.beta2,
					       ap.eps, ap.weight_decay, info.lr, info.step,
					       info.grad_scale);
		else
			weft_optim_kernel_sgd(&ok, sp.momentum, sp.dampening, sp.nesterov,
					      sp.weight_decay, info.lr, info.step, info.grad_scale);
		WT_OK(k->optim_step(NULL, &ok, r, NSEG, p2, g2, s2));
	}
	WT_CHECK(memcmp(p1, p2, (size_t)total * sizeof(float)) == 0);
	for (size_t i = 0; i < nslots; i++)
		for (int s = 0; s < NSEG; s++)
			WT_CHECK(memcmp(s1[i] + segs[s].offset, s2[i] + r[s].state,
					(size_t)segs[s].numel * sizeof(float)) == 0);
	for (size_t i = 0; i < nslots; i++) {
		free(s1[i]);
		free(s2[i]);
	}
	free(p1);
	free(p2);
	free(g);
	free(g2);
	ops->destroy(st);
	weft_config_free(cfg);
}

static void sum_squares(void)
{
	/* shorter than clipping's split, longer, and past its chunk cap */
	static const int64_t lens[] = { 0, 5, 4099, 32 * 4096 + 3, 4 * 1024 * 1024 + 17 };
	int64_t n = 0, at = 0;
	weft_elem_range r[5];
	double want = 0.0, got = -1.0;
	float *x;

	for (int i = 0; i < 5; i++)
		n += lens[i] + 1;
	x = malloc((size_t)n * sizeof(float));
	WT_REQUIRE(x);
	fill(x, n, 9, 3.0f);
	for (int i = 0; i < 5; i++) {
		const float *a = x + at + 1;
		int64_t len = lens[i];

		r[i] = (weft_elem_range){ .offset = at + 1, .count = len };
		want += weft_clip_sum_squares(&a, &len, 1);
		at += len + 1;
	}
	WT_OK(k->sum_squares_ranges(NULL, x, r, 5, &got));
	WT_CHECK(memcmp(&got, &want, sizeof(got)) == 0);
	WT_OK(k->sum_squares_ranges(NULL, x, r, 0, &got));
	WT_CHECK(got == 0.0);
	r[2].count = -1;
	WT_FAILS(k->sum_squares_ranges(NULL, x, r, 5, &got), WEFT_ERR_INVALID_ARG,
		 "sum_squares_ranges: range 2", "negative offset or count");
	free(x);
}

static void copies(void)
{
	float src[40], packed[12], back[40];
	weft_copy_range pack[3] = { { 0, 3, 4 }, { 4, 17, 5 }, { 9, 37, 3 } };
	weft_copy_range unpack[3] = { { 3, 0, 4 }, { 17, 4, 5 }, { 37, 9, 3 } };

	fill(src, 40, 5, 1.0f);
	memset(back, 0, sizeof(back));
	WT_OK(k->copy_ranges(NULL, sizeof(float), pack, 3, packed, src));
	WT_CHECK(!memcmp(packed, src + 3, 16) && !memcmp(packed + 4, src + 17, 20) &&
		 !memcmp(packed + 9, src + 37, 12));
	WT_OK(k->copy_ranges(NULL, sizeof(float), unpack, 3, back, packed));
	for (int i = 0; i < 40; i++) {
		int in = (i >= 3 && i < 7) || (i >= 17 && i < 22) || i >= 37;

		WT_CHECK(back[i] == (in ? src[i] : 0.0f));
	}
	WT_FAILS(k->copy_ranges(NULL, 3, pack, 3, packed, src), WEFT_ERR_INVALID_ARG,
		 "elements of 3 bytes", "1, 2, 4 or 8");
	pack[1].count = -2;
	WT_FAILS(k->copy_ranges(NULL, sizeof(float), pack, 3, packed, src), WEFT_ERR_INVALID_ARG,
		 "copy_ranges: range 1", "negative");
}

static void refusals(void)
{
	weft_optim_kernel ok;
	weft_optim_range r = { .count = 1 };
	float p = 1, g = 1, m = 0, v = 0, *slots[2] = { &m, &v };

	weft_optim_kernel_adam(&ok, 1, 0, 0.9, 0.999, 1e-8, 0.0, 1e-3, 1, 1.0);
	ok.kind = 7;
	WT_FAILS(k->optim_step(NULL, &ok, &r, 1, &p, &g, slots), WEFT_ERR_UNSUPPORTED,
		 "no kernel for update kind 7", "adam/adamw, kind 0, and sgd, kind 1");
	ok.kind = WEFT_OPTIM_KERNEL_ADAM;
	ok.struct_size = 8;
	WT_FAILS(k->optim_step(NULL, &ok, &r, 1, &p, &g, slots), WEFT_ERR_INVALID_ARG,
		 "is 8 bytes, older than", "rebuild the caller");
	WT_CHECK(p == 1.0f && m == 0.0f);
}

int main(void)
{
	WT_OK(weft_kernels_get(WEFT_CPU, &k));
	WT_REQUIRE(WEFT_HAS_MEMBER(k, weft_kernel_table, optim_step) && k->optim_step &&
		   k->copy_ranges && k->sum_squares_ranges);
	layout();
	for (int packed = 0; packed < 2; packed++) {
		compare("adamw", "optimizer: {weight_decay: 0.1}", packed);
		compare("adam", "optimizer: {weight_decay: 0.05}", packed);
		compare("adamw", "optimizer: {weight_decay: 0.1, amsgrad: true}", packed);
		compare("adam", "optimizer: {betas: [0.8, 0.99], eps: 1.0e-6}", packed);
		compare("sgd", "optimizer: {}", packed);
		compare("sgd", "optimizer: {weight_decay: 0.01}", packed);
		compare("sgd", "optimizer: {momentum: 0.9, dampening: 0.1, weight_decay: 0.01}",
			packed);
		compare("sgd", "optimizer: {momentum: 0.9, nesterov: true}", packed);
	}
	sum_squares();
	copies();
	refusals();
	ot_release();
	return wt_done("test_optim_device_step");
}
