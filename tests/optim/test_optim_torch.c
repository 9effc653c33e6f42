/* The built-in optimizers against torch.optim, step for step.
 *
 * Fixtures (tests/fixtures/optim/gen_optim_fixtures.py) hold 20 steps of
 * SGD with Nesterov momentum, SGD with dampening, Adam, Adam with amsgrad
 * and AdamW on four tensors (two matrices that decay, two vectors that do
 * not), with the lr halved every 7 steps. Each step here is one call over
 * the whole flat buffer, fed the fixture's gradient and lr; parameters and
 * every state slot must match after every step.
 *
 * Tolerance: |ours - torch| <= 1e-6 |torch| + 1e-6 max|torch over the array|.
 * Both sides compute in float32 in the same order, but PyTorch's
 * vectorised CPU kernels fuse some multiply-adds (FMA), so single results
 * differ by up to an ulp (6e-8 relative) and such differences compound
 * over 20 steps. The relative term is the 1e-6; the absolute term,
 * one millionth of the array's largest magnitude, covers elements that
 * pass near zero by cancellation (an exp_avg whose gradient changed sign),
 * whose absolute error is that of the large operands they came from.
 */
#include <math.h>
#include "train/optim_config.h"
#include "optim_test.h"

static double worst_rel; /* largest |diff| / (|ref| + max|ref|), for the report */

static void compare(const char *what, const char *file, int step, const float *got,
		    const float *ref, int64_t n)
{
	double maxref = 0.0;
	int bad = 0;

	for (int64_t i = 0; i < n; i++)
		maxref = fmax(maxref, fabs(ref[i]));
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - (double)ref[i]);
		double tol = 1e-6 * fabs(ref[i]) + 1e-6 * maxref;

		worst_rel = fmax(worst_rel, d / (fabs(ref[i]) + maxref));
		wt_checks++;
		if (!(d <= tol)) {
			wt_failures++;
			if (bad++ < 5)
				fprintf(stderr, "%s step %d %s[%lld]: %.9g vs torch %.9g (tol %.3g)\n",
					file, step, what, (long long)i, got[i], ref[i], tol);
		}
	}
}

static void run_case(const char *file)
{
	ot_case c;
	weft_config *cfg;
	weft_optim_config oc;
	const weft_optim_ops *ops;
	void *opt = NULL;
	float *params, *grads, *slots[OT_MAX_SLOTS] = { 0 };

	ot_case_load(file, &c);
	cfg = ot_config(c.config);
	WT_OK(weft_optim_config_parse(weft_cfg_get(weft_config_root(cfg), "optimizer"), &oc));
	/* the default rule (ndim >= 2 decays) is the fixture's param groups */
	weft_optim_set_decay(&oc, c.segs, c.ntensors);
	for (size_t t = 0; t < c.ntensors; t++)
		WT_CHECK(c.segs[t].decay == c.decay_ref[t]);

	ops = ot_find(oc.name);
	WT_OK(ops->create(oc.section, &opt));
	WT_OK(weft_config_check_unused(cfg));
	WT_CHECK(ops->state_slots(opt) == c.nslots);
	for (size_t k = 0; k < c.nslots; k++)
		WT_CHECK(ops->slot_name(opt, k) && !strcmp(ops->slot_name(opt, k), c.slot_names[k]));
	WT_CHECK(ops->slot_name(opt, c.nslots) == NULL);

	params = weft_mem_alloc(WEFT_MEM_PARAMS, (size_t)c.total * sizeof(float));
	grads = weft_mem_alloc(WEFT_MEM_GRADS, (size_t)c.total * sizeof(float));
	WT_REQUIRE(params && grads);
	memcpy(params, c.init, (size_t)c.total * sizeof(float));
	for (size_t k = 0; k < c.nslots; k++) {
		slots[k] = weft_mem_calloc(WEFT_MEM_OPTIM, (size_t)c.total * sizeof(float));
		WT_REQUIRE(slots[k]);
	}

	for (int s = 0; s < c.nsteps; s++) {
		weft_optim_step_info info = {
			.struct_size = sizeof(info), .step = s + 1, .lr = c.lr[s], .grad_scale = 1.0,
		};

		memcpy(grads, c.grad[s], (size_t)c.total * sizeof(float));
		WT_OK(ops->step(opt, c.segs, c.ntensors, params, grads, slots, 0, c.total, &info));
		/* the step must not write the gradients */
		WT_CHECK(!memcmp(grads, c.grad[s], (size_t)c.total * sizeof(float)));
		compare("param", file, s + 1, params, c.param[s], c.total);
		for (size_t k = 0; k < c.nslots; k++)
			compare(c.slot_names[k], file, s + 1, slots[k], c.slot[s][k], c.total);
	}
	/* the run must have moved the parameters, or the comparison proves little */
	WT_CHECK(memcmp(params, c.init, (size_t)c.total * sizeof(float)) != 0);

	for (size_t k = 0; k < c.nslots; k++)
		weft_mem_free(slots[k]);
	weft_mem_free(grads);
	weft_mem_free(params);
	ops->destroy(opt);
	weft_config_free(cfg);
	ot_case_free(&c);
}

int main(void)
{
	static const char *const files[] = {
		"sgd_nesterov.txt", "sgd_dampening.txt", "adam.txt", "adam_amsgrad.txt", "adamw.txt",
	};

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		run_case(files[i]);
	fprintf(stderr, "largest error relative to (|torch| + max|torch|): %.3g\n", worst_rel);
	ot_release();
	return wt_done("test_optim_torch");
}
