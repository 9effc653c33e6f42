/* trainer.precision and 16-mixed's dynamic loss scaler (precision.h). */
#include <math.h>
#include <string.h>

#include "train/precision.h"
#include "weft/autograd.h"

weft_status weft_precision_parse(const weft_cfg *trainer, const char *precision,
				 weft_dtype *autocast, weft_loss_scale_config *ls)
{
	const weft_cfg *sec = weft_cfg_get(trainer, "loss_scale");
	int fp16 = !strcmp(precision, "16-mixed");
	weft_status st;

	*autocast = fp16 ? WEFT_F16 : !strcmp(precision, "bf16-mixed") ? WEFT_BF16 : WEFT_F32;
	memset(ls, 0, sizeof(*ls));
	ls->enabled = fp16;
	if (sec && !fp16)
		return weft_cfg_error(sec, "applies to trainer.precision 16-mixed only, and this run "
				      "uses %s (bf16 and f32 have float32's range: their gradients "
				      "need no scaling); remove trainer.loss_scale or set "
				      "trainer.precision: 16-mixed", precision);
	if (sec && weft_cfg_kind_of(sec) != WEFT_CFG_MAP)
		return weft_cfg_error(sec, "must be a mapping {initial_scale_power: 16, "
				      "loss_scale_window: 1000, hysteresis: 2, min_loss_scale: 1}");
	if ((st = weft_cfg_int(sec, "initial_scale_power", 16, &ls->initial_scale_power)) ||
	    (st = weft_cfg_int(sec, "loss_scale_window", 1000, &ls->window)) ||
	    (st = weft_cfg_int(sec, "hysteresis", 2, &ls->hysteresis)) ||
	    (st = weft_cfg_float(sec, "min_loss_scale", 1.0, &ls->min_scale)))
		return st;
	/* 2^120 still fits a float32 loss times a few (float32 ends near 2^128) */
	if (ls->initial_scale_power < 0 || ls->initial_scale_power > 120)
		return weft_cfg_error(weft_cfg_get(sec, "initial_scale_power"),
				      "must be in 0..120 (the first loss scale is 2^this), got %lld",
				      (long long)ls->initial_scale_power);
	if (ls->window < 1)
		return weft_cfg_error(weft_cfg_get(sec, "loss_scale_window"),
				      "must be >= 1 (clean steps before the scale doubles), got %lld",
				      (long long)ls->window);
	if (ls->hysteresis < 1)
		return weft_cfg_error(weft_cfg_get(sec, "hysteresis"),
				      "must be >= 1 (overflows before the scale halves), got %lld",
				      (long long)ls->hysteresis);
	if (!(ls->min_scale > 0) || !isfinite(ls->min_scale) ||
	    ls->min_scale > ldexp(1.0, (int)ls->initial_scale_power))
		return weft_cfg_error(weft_cfg_get(sec, "min_loss_scale"),
				      "must be > 0 and at most the first scale 2^%lld = %g, got %g",
				      (long long)ls->initial_scale_power,
				      ldexp(1.0, (int)ls->initial_scale_power), ls->min_scale);
	return WEFT_OK;
}

void weft_loss_scaler_init(weft_loss_scaler *s, const weft_loss_scale_config *c)
{
	memset(s, 0, sizeof(*s));
	s->cfg = *c;
	s->scale = c->enabled ? ldexp(1.0, (int)c->initial_scale_power) : 1.0;
	s->hysteresis_left = c->hysteresis;
}

int weft_loss_scaler_update(weft_loss_scaler *s, int overflow)
{
	double old = s->scale;

	if (overflow) {
		s->skipped++;
		s->good_steps = 0;
		if (s->hysteresis_left > 1)
			s->hysteresis_left--;
		else
			s->scale = fmax(s->scale * 0.5, s->cfg.min_scale);
		return s->scale != old;
	}
	s->hysteresis_left = s->cfg.hysteresis;
	if (++s->good_steps >= s->cfg.window) {
		s->good_steps = 0;
		s->scale *= 2.0;
	}
	return s->scale != old;
}

int weft_grads_nonfinite(const float *const *arrays, const int64_t *lens, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const float *g = arrays[i];
		float acc = 0.0f;

		/* inf - inf and NaN - NaN are NaN; every finite x gives 0: one
		 * test per array, and a loop the compiler vectorizes */
		for (int64_t j = 0; j < lens[i]; j++)
			acc += g[j] - g[j];
		if (acc != 0.0f)
			return 1;
	}
	return 0;
}
