/* Lion against its published update rule, computed by hand.
 *
 * Chen et al. 2023, Algorithm 2 (with decoupled weight decay):
 *   c = b1 m + (1 - b1) g;  p = p (1 - lr wd) - lr sign(c);  m = b2 m + (1 - b2) g
 * Here lr 0.1, betas [0.9, 0.99], weight_decay 0.5 on the first tensor
 * (two elements, a matrix) and none on the second (a bias). The gradients
 * are chosen so that sign(c) differs from sign(m) and from sign(g) in
 * places (the interpolation c, not m, must drive the update) and so that
 * c = 0 once (sign 0: no move). Expected values, worked out in decimal:
 *
 * step 1, g = [0.5, -1, 0, 2], m = 0:
 *   c = 0.1 g = [0.05, -0.1, 0, 0.2] -> sign [1, -1, 0, 1]
 *   p = [1*0.95 - 0.1, -2*0.95 + 0.1, 0.5 - 0, 3 - 0.1] = [0.85, -1.8, 0.5, 2.9]
 *   m = 0.01 g = [0.005, -0.01, 0, 0.02]
 * step 2, g = [-1, -1, 0.25, -0.1]:
 *   c = 0.9 m + 0.1 g = [-0.0955, -0.109, 0.025, 0.008] -> sign [-1, -1, 1, 1]
 *   p = [0.85*0.95 + 0.1, -1.8*0.95 + 0.1, 0.5 - 0.1, 2.9 - 0.1]
 *     = [0.9075, -1.61, 0.4, 2.8]
 *   m = 0.99 m + 0.01 g = [-0.00505, -0.0199, 0.0025, 0.0188]
 * step 3, g = [0.6, 2, -0.3, -0.2]:
 *   c = [0.055455, 0.18209, -0.02775, -0.00308] -> sign [1, 1, -1, -1]
 *     (elements 2 and 4: sign(c) is not sign(m))
 *   p = [0.9075*0.95 - 0.1, -1.61*0.95 - 0.1, 0.4 + 0.1, 2.8 + 0.1]
 *     = [0.762125, -1.6295, 0.5, 2.9]
 *   m = [0.0010005, 0.000299, -0.000525, 0.016612]
 *
 * Tolerance 1e-6 relative (plus 1e-9 absolute for m near zero): the
 * plugin computes in float32, whose rounding (6e-8 relative per
 * operation) over three steps stays well inside it.
 */
#include "optim_test.h"

int main(void)
{
	static const float grads[3][4] = {
		{ 0.5f, -1.0f, 0.0f, 2.0f },
		{ -1.0f, -1.0f, 0.25f, -0.1f },
		{ 0.6f, 2.0f, -0.3f, -0.2f },
	};
	static const double want_p[3][4] = {
		{ 0.85, -1.8, 0.5, 2.9 },
		{ 0.9075, -1.61, 0.4, 2.8 },
		{ 0.762125, -1.6295, 0.5, 2.9 },
	};
	static const double want_m[3][4] = {
		{ 0.005, -0.01, 0.0, 0.02 },
		{ -0.00505, -0.0199, 0.0025, 0.0188 },
		{ 0.0010005, 0.000299, -0.000525, 0.016612 },
	};
	const weft_optim_segment segs[2] = {
		{ .name = "fc.weight", .offset = 0, .numel = 2, .ndim = 2, .decay = 1 },
		{ .name = "fc.bias", .offset = 2, .numel = 2, .ndim = 1, .decay = 0 },
	};
	weft_config *cfg = ot_config(
		"optimizer:\n  name: lion\n  betas: [0.9, 0.99]\n  weight_decay: 0.5\n");
	const weft_optim_ops *ops = ot_find("lion");
	float p[4] = { 1.0f, -2.0f, 0.5f, 3.0f }, m[4] = { 0 };
	float *slots[1] = { m };
	void *opt = NULL;

	WT_OK(ops->create(weft_cfg_get(weft_config_root(cfg), "optimizer"), &opt));
	weft_cfg_get(weft_cfg_get(weft_config_root(cfg), "optimizer"), "name");
	WT_OK(weft_config_check_unused(cfg));
	WT_CHECK(ops->state_slots(opt) == 1);
	WT_CHECK(!strcmp(ops->slot_name(opt, 0), "exp_avg"));

	for (int s = 0; s < 3; s++) {
		weft_optim_step_info info = {
			.struct_size = sizeof(info), .step = s + 1, .lr = 0.1, .grad_scale = 1.0,
		};

		WT_OK(ops->step(opt, segs, 2, p, grads[s], slots, 0, 4, &info));
		for (int i = 0; i < 4; i++) {
			WT_CLOSE(p[i], want_p[s][i], 1e-6, 0.0);
			WT_CLOSE(m[i], want_m[s][i], 1e-6, 1e-9);
		}
	}
	/* the default betas are the paper's (0.9, 0.99) and no weight decay */
	ops->destroy(opt);
	weft_config_free(cfg);
	cfg = ot_config("optimizer: {name: lion}\n");
	WT_OK(ops->create(weft_cfg_get(weft_config_root(cfg), "optimizer"), &opt));
	{
		float q[4] = { 1.0f, -2.0f, 0.5f, 3.0f }, n[4] = { 0 };
		float *nslots[1] = { n };
		weft_optim_step_info info = {
			.struct_size = sizeof(info), .step = 1, .lr = 0.1, .grad_scale = 1.0,
		};

		WT_OK(ops->step(opt, segs, 2, q, grads[0], nslots, 0, 4, &info));
		WT_CLOSE(q[0], 0.9, 1e-6, 0.0); /* no decay: 1 - 0.1 */
		WT_CLOSE(n[3], 0.02, 1e-6, 0.0); /* (1 - 0.99) * 2 */
	}
	ops->destroy(opt);
	weft_config_free(cfg);
	ot_release();
	return wt_done("test_optim_lion");
}
