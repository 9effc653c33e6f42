/* 16-mixed's dynamic loss scaler (core/train/precision.c) on its own:
 * - hysteresis: with hysteresis 2 the first overflow of a run of them only
 *   uses up the tolerance, the second and every further one halves; a
 *   clean step gives the tolerance back; with hysteresis 1 every overflow
 *   halves (torch's GradScaler);
 * - the floor: never below min_loss_scale;
 * - growth: doubled after loss_scale_window clean steps in a row, and an
 *   overflow restarts that count;
 * - every overflow is counted as a skipped step;
 * - the overflow test finds an inf, a -inf or a NaN anywhere in any array
 *   and nothing in finite ones (FLT_MAX included);
 * - trainer.loss_scale: defaults, values, and each user error (with
 *   another precision, out of range) as advice at file:line:col.
 * All values are exact (powers of two), so every check is exact.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "train/precision.h"
#include "weft/config.h"
#include "weft_test.h"

static weft_loss_scaler make(int64_t power, int64_t window, int64_t hysteresis, double floor)
{
	weft_loss_scale_config c = { .enabled = 1, .initial_scale_power = power,
				     .window = window, .hysteresis = hysteresis,
				     .min_scale = floor };
	weft_loss_scaler s;

	weft_loss_scaler_init(&s, &c);
	return s;
}

static void test_hysteresis_and_floor(void)
{
	weft_loss_scaler s = make(4, 3, 2, 2.0);

	WT_CHECK(s.scale == 16.0 && s.hysteresis_left == 2 && s.skipped == 0);
	WT_CHECK(weft_loss_scaler_update(&s, 1) == 0); /* tolerated */
	WT_CHECK(s.scale == 16.0 && s.hysteresis_left == 1 && s.skipped == 1);
	WT_CHECK(weft_loss_scaler_update(&s, 1) == 1); /* second in a row: halves */
	WT_CHECK(s.scale == 8.0);
	WT_CHECK(weft_loss_scaler_update(&s, 1) == 1); /* and each further one */
	WT_CHECK(s.scale == 4.0);
	WT_CHECK(weft_loss_scaler_update(&s, 1) == 1);
	WT_CHECK(s.scale == 2.0);
	WT_CHECK(weft_loss_scaler_update(&s, 1) == 0); /* the floor */
	WT_CHECK(s.scale == 2.0 && s.skipped == 5);
	/* a clean step restores the tolerance: the next overflow is free */
	WT_CHECK(weft_loss_scaler_update(&s, 0) == 0);
	WT_CHECK(s.hysteresis_left == 2 && s.good_steps == 1 && s.skipped == 5);
	WT_CHECK(weft_loss_scaler_update(&s, 1) == 0);
	WT_CHECK(s.scale == 2.0 && s.good_steps == 0 && s.hysteresis_left == 1);

	/* hysteresis 1: every overflow halves (GradScaler's behaviour) */
	s = make(10, 1000, 1, 1.0);
	for (int i = 0; i < 4; i++)
		WT_CHECK(weft_loss_scaler_update(&s, 1) == 1);
	WT_CHECK(s.scale == 64.0 && s.skipped == 4);
}

static void test_growth(void)
{
	weft_loss_scaler s = make(4, 3, 2, 1.0);

	WT_CHECK(weft_loss_scaler_update(&s, 0) == 0);
	WT_CHECK(weft_loss_scaler_update(&s, 0) == 0);
	WT_CHECK(weft_loss_scaler_update(&s, 0) == 1); /* third clean step: doubles */
	WT_CHECK(s.scale == 32.0 && s.good_steps == 0);
	WT_CHECK(weft_loss_scaler_update(&s, 0) == 0);
	WT_CHECK(weft_loss_scaler_update(&s, 0) == 0);
	WT_CHECK(weft_loss_scaler_update(&s, 1) == 0); /* restarts the count */
	WT_CHECK(weft_loss_scaler_update(&s, 0) == 0);
	WT_CHECK(weft_loss_scaler_update(&s, 0) == 0);
	WT_CHECK(s.scale == 32.0);
	WT_CHECK(weft_loss_scaler_update(&s, 0) == 1);
	WT_CHECK(s.scale == 64.0 && s.skipped == 1);
}

static void test_nonfinite(void)
{
	float a[37], b[70];
	const float *arr[2] = { a, b };
	int64_t lens[2] = { 37, 70 };
	const float bad[3] = { INFINITY, -INFINITY, NAN };

	for (int i = 0; i < 37; i++)
		a[i] = (float)(i - 18) * 1e3f;
	for (int i = 0; i < 70; i++)
		b[i] = i % 2 ? FLT_MAX : -FLT_MAX;
	WT_CHECK(weft_grads_nonfinite(arr, lens, 2) == 0);
	WT_CHECK(weft_grads_nonfinite(arr, lens, 0) == 0);
	for (int k = 0; k < 3; k++) {
		for (int at = 0; at < 70; at += 23) {
			float keep = b[at];

			b[at] = bad[k];
			WT_CHECK(weft_grads_nonfinite(arr, lens, 2) == 1);
			WT_CHECK(weft_grads_nonfinite(arr, lens, 1) == 0); /* only a is read */
			b[at] = keep;
		}
		a[36] = bad[k];
		WT_CHECK(weft_grads_nonfinite(arr, lens, 1) == 1);
		a[36] = 0.0f;
	}
}

static weft_status parse(const char *yaml, weft_dtype *ac, weft_loss_scale_config *ls)
{
	weft_config *cfg;
	const weft_cfg *tr, *prec;
	weft_status st;

	WT_OK(weft_config_load_string("cfg.yaml", yaml, strlen(yaml), &cfg));
	tr = weft_cfg_get(weft_config_root(cfg), "trainer");
	prec = weft_cfg_get(tr, "precision");
	st = weft_precision_parse(tr, prec ? weft_cfg_scalar(prec) : "32-true", ac, ls);
	weft_config_free(cfg);
	return st;
}

static void test_config(void)
{
	weft_dtype ac;
	weft_loss_scale_config ls;

	WT_OK(parse("trainer: {precision: 16-mixed}\n", &ac, &ls));
	WT_CHECK(ac == WEFT_F16 && ls.enabled && ls.initial_scale_power == 16 &&
		 ls.window == 1000 && ls.hysteresis == 2 && ls.min_scale == 1.0);
	WT_OK(parse("trainer:\n  precision: 16-mixed\n  loss_scale: {initial_scale_power: 40, "
		    "loss_scale_window: 5, hysteresis: 3, min_loss_scale: 0.5}\n", &ac, &ls));
	WT_CHECK(ls.initial_scale_power == 40 && ls.window == 5 && ls.hysteresis == 3 &&
		 ls.min_scale == 0.5);
	WT_OK(parse("trainer: {precision: bf16-mixed}\n", &ac, &ls));
	WT_CHECK(ac == WEFT_BF16 && !ls.enabled);
	WT_OK(parse("trainer: {}\n", &ac, &ls));
	WT_CHECK(ac == WEFT_F32 && !ls.enabled);

	WT_FAILS(parse("trainer:\n  precision: bf16-mixed\n  loss_scale: {hysteresis: 2}\n", &ac,
		       &ls), WEFT_ERR_CONFIG, "cfg.yaml:3:", "16-mixed only", "bf16-mixed",
		 "remove trainer.loss_scale");
	WT_FAILS(parse("trainer:\n  precision: 16-mixed\n  loss_scale: 8\n", &ac, &ls),
		 WEFT_ERR_CONFIG, "cfg.yaml:3:", "must be a mapping");
	WT_FAILS(parse("trainer:\n  precision: 16-mixed\n  loss_scale:\n"
		       "    initial_scale_power: 200\n", &ac, &ls),
		 WEFT_ERR_CONFIG, "cfg.yaml:4:", "0..120", "got 200");
	WT_FAILS(parse("trainer:\n  precision: 16-mixed\n  loss_scale: {loss_scale_window: 0}\n",
		       &ac, &ls), WEFT_ERR_CONFIG, "loss_scale_window", "must be >= 1");
	WT_FAILS(parse("trainer:\n  precision: 16-mixed\n  loss_scale: {hysteresis: 0}\n", &ac,
		       &ls), WEFT_ERR_CONFIG, "hysteresis", "must be >= 1");
	WT_FAILS(parse("trainer:\n  precision: 16-mixed\n  loss_scale: {initial_scale_power: 4, "
		       "min_loss_scale: 32}\n", &ac, &ls), WEFT_ERR_CONFIG, "min_loss_scale",
		 "at most the first scale 2^4 = 16", "got 32");
}

int main(void)
{
	test_hysteresis_and_floor();
	test_growth();
	test_nonfinite();
	test_config();
	return wt_done("test_loss_scaler");
}
