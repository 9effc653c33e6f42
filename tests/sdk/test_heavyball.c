/* The example optimizer "heavyball" (examples/plugins/heavyball.c), built
 * in-tree from the example's source and loaded through the registry as
 * weft fit loads it: its rule against values computed by hand, its
 * difference from torch-style SGD momentum under a changing lr, piecewise
 * stepping (the optim.h determinism contract) and its config errors. */
#include <string.h>

#include "plugin/registry.h"
#include "weft/config.h"
#include "weft/optim.h"
#include "weft_test.h"

static weft_config *cfg;

static const weft_cfg *section(const char *yaml)
{
	weft_config_free(cfg);
	cfg = NULL;
	WT_OK(weft_config_load_string("hb.yaml", yaml, strlen(yaml), &cfg));
	return weft_cfg_get(weft_config_root(cfg), "optimizer");
}

/* Two tensors and one padding element no segment covers:
 * "w" (2 elements, decays) at 0, "b" (1 element, no decay) at 2, pad at 3. */
static const weft_optim_segment segs[] = {
	{ .name = "w", .offset = 0, .numel = 2, .ndim = 2, .decay = 1 },
	{ .name = "b", .offset = 2, .numel = 1, .ndim = 1, .decay = 0 },
};

static void step(const weft_optim_ops *ops, void *st, float *p, const float *g, float *d,
		 int64_t begin, int64_t end, int64_t n, double lr, double scale)
{
	weft_optim_step_info info = { .struct_size = sizeof(info), .step = n, .lr = lr,
				      .grad_scale = scale };
	float *slots[1] = { d + begin };

	WT_OK(ops->step(st, segs, 2, p + begin, g + begin, slots, begin, end, &info));
}

static void test_rule_by_hand(const weft_optim_ops *ops)
{
	float p[4] = { 1.0f, -2.0f, 0.5f, 7.0f }, g[4] = { 0.5f, 1.0f, -1.0f, 3.0f };
	float d[4] = { 0 };
	void *st = NULL;

	WT_OK(ops->create(section("optimizer: {name: heavyball, lr: 0.1, beta: 0.9, "
				  "weight_decay: 0.01}"), &st));
	WT_CHECK(ops->state_slots(st) == 1);
	WT_CHECK(!strcmp(ops->slot_name(st, 0), "displacement"));
	WT_CHECK(ops->slot_name(st, 1) == NULL);
	/* step 1, lr 0.1, grad_scale 1:
	 *   p0: g' = 0.5 + 0.01 * 1 = 0.51;     d = -0.051;  p = 0.949
	 *   p1: g' = 1 + 0.01 * -2 = 0.98;      d = -0.098;  p = -2.098
	 *   p2 (no decay): g' = -1;             d = 0.1;     p = 0.6
	 *   p3 (padding): untouched */
	step(ops, st, p, g, d, 0, 4, 1, 0.1, 1.0);
	WT_CLOSE(p[0], 0.949, 0, 1e-6);
	WT_CLOSE(p[1], -2.098, 0, 1e-6);
	WT_CLOSE(p[2], 0.6, 0, 1e-6);
	WT_CHECK(p[3] == 7.0f && d[3] == 0.0f);
	WT_CLOSE(d[0], -0.051, 0, 1e-7);
	/* step 2, lr 0.2, grad_scale 0.5:
	 *   p0: g' = 0.25 + 0.01 * 0.949 = 0.25949; d = 0.9 * -0.051 - 0.2 * 0.25949
	 *       = -0.097798; p = 0.851202
	 *   p1: g' = 0.5 - 0.02098 = 0.47902; d = -0.0882 - 0.095804 = -0.184004;
	 *       p = -2.282004
	 *   p2: g' = -0.5; d = 0.09 + 0.1 = 0.19; p = 0.79
	 * Tolerance 1e-6: float32 rounding of values near 1 over two steps
	 * (about 10 operations of 6e-8 each). */
	step(ops, st, p, g, d, 0, 4, 2, 0.2, 0.5);
	WT_CLOSE(p[0], 0.851202, 0, 1e-6);
	WT_CLOSE(p[1], -2.282004, 0, 1e-6);
	WT_CLOSE(p[2], 0.79, 0, 1e-6);
	WT_CHECK(p[3] == 7.0f);
	ops->destroy(st);
}

/* torch.optim.SGD(momentum=0.9) scales the whole velocity by the current
 * lr: p = 1, g = 0.5, lr 0.1 then 0.2 gives 0.95 then 0.95 - 0.2 * 0.95 =
 * 0.76; heavyball keeps each gradient's own lr: 0.95 then 0.805. */
static void test_differs_from_sgd_momentum(const weft_optim_ops *hb, const weft_optim_ops *sgd)
{
	static const weft_optim_segment one = { .name = "x", .offset = 0, .numel = 1, .ndim = 1 };
	const weft_optim_ops *ops[2] = { hb, sgd };
	const char *yaml[2] = { "optimizer: {name: heavyball, beta: 0.9}",
				"optimizer: {name: sgd, momentum: 0.9}" };
	const double want[2] = { 0.805, 0.76 };

	for (int k = 0; k < 2; k++) {
		float p = 1.0f, g = 0.5f, slot = 0.0f, *slots[1] = { &slot };
		void *st = NULL;

		WT_OK(ops[k]->create(section(yaml[k]), &st));
		for (int n = 1; n <= 2; n++) {
			weft_optim_step_info info = { .struct_size = sizeof(info), .step = n,
						      .lr = 0.1 * n, .grad_scale = 1.0 };

			WT_OK(ops[k]->step(st, &one, 1, &p, &g, slots, 0, 1, &info));
		}
		WT_CLOSE(p, want[k], 0, 1e-6);
		ops[k]->destroy(st);
	}
}

/* Stepping [0, 1) and [1, 4) must give the bits of stepping [0, 4). */
static void test_pieces(const weft_optim_ops *ops)
{
	float pa[4] = { 1.0f, -2.0f, 0.5f, 7.0f }, pb[4], g[4] = { 0.3f, -0.7f, 0.11f, 2.0f };
	float da[4] = { 0 }, db[4] = { 0 };
	void *st = NULL;

	memcpy(pb, pa, sizeof(pa));
	WT_OK(ops->create(section("optimizer: {name: heavyball, weight_decay: 0.1}"), &st));
	for (int n = 1; n <= 3; n++) {
		step(ops, st, pa, g, da, 0, 4, n, 0.05 * n, 0.7);
		step(ops, st, pb, g, db, 0, 1, n, 0.05 * n, 0.7);
		step(ops, st, pb, g, db, 1, 4, n, 0.05 * n, 0.7);
	}
	WT_CHECK(!memcmp(pa, pb, sizeof(pa)));
	WT_CHECK(!memcmp(da, db, sizeof(da)));
	ops->destroy(st);
}

static void test_errors(const weft_optim_ops *ops)
{
	void *st = NULL;

	WT_FAILS(ops->create(section("optimizer:\n  name: heavyball\n  beta: 1.0\n"), &st),
		 WEFT_ERR_CONFIG, "hb.yaml:3:9", "'optimizer.beta' must be in [0, 1), got 1",
		 "fraction of the last displacement kept");
	WT_FAILS(ops->create(section("optimizer: {name: heavyball, weight_decay: -1}"), &st),
		 WEFT_ERR_CONFIG, "'optimizer.weight_decay' must be a finite number >= 0, got -1");
	WT_FAILS(ops->create(section("optimizer: {name: heavyball, beta: fast}"), &st),
		 WEFT_ERR_CONFIG, "'optimizer.beta' must be");
}

int main(void)
{
	const weft_optim_ops *hb = NULL, *sgd = NULL;
	weft_registry *reg = NULL;

	WT_OK(weft_registry_create(&reg));
	WT_OK(weft_registry_add_dir(reg, SDK_FX "/current"));
	WT_OK(weft_registry_add_default_paths(reg));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_OPTIM, "heavyball", (const void **)&hb, NULL));
	WT_OK(weft_registry_find(reg, WEFT_PLUGIN_OPTIM, "sgd", (const void **)&sgd, NULL));
	test_rule_by_hand(hb);
	test_differs_from_sgd_momentum(hb, sgd);
	test_pieces(hb);
	test_errors(hb);
	weft_config_free(cfg);
	weft_registry_free(reg);
	return wt_done("sdk_heavyball");
}
