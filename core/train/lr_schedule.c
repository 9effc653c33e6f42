/* Learning-rate schedules: parsing and the closed-form lr of each step. */
#include <math.h>
#include "train/lr_schedule.h"

static const char *const kind_names[] = {
	[WEFT_LR_CONSTANT] = "constant",
	[WEFT_LR_WARMUP] = "warmup",
	[WEFT_LR_COSINE] = "cosine",
	[WEFT_LR_LINEAR] = "linear",
	[WEFT_LR_STEP] = "step",
	[WEFT_LR_DS_WARMUP] = "WarmupLR",
	[WEFT_LR_DS_WARMUP_DECAY] = "WarmupDecayLR",
	[WEFT_LR_DS_WARMUP_COSINE] = "WarmupCosineLR",
	NULL,
};

const char *weft_lr_kind_name(weft_lr_kind kind)
{
	if ((unsigned)kind >= sizeof(kind_names) / sizeof(kind_names[0]) - 1)
		return "unknown";
	return kind_names[kind];
}

/* ---- reading ------------------------------------------------------- */

/* An integer key >= lo; `def` when absent. */
static weft_status read_int(const weft_cfg *sec, const char *key, int64_t def, int64_t lo,
			    const char *advice, int64_t *out)
{
	weft_status st = weft_cfg_int(sec, key, def, out);

	if (st != WEFT_OK)
		return st;
	if (*out < lo)
		return weft_cfg_error(weft_cfg_get(sec, key), "must be >= %lld, got %lld; %s",
				      (long long)lo, (long long)*out, advice);
	return WEFT_OK;
}

/* A finite float key in [lo, hi]; `def` when absent. */
static weft_status read_float(const weft_cfg *sec, const char *key, double def, double lo,
			      double hi, const char *advice, double *out)
{
	weft_status st = weft_cfg_float(sec, key, def, out);

	if (st != WEFT_OK)
		return st;
	if (!isfinite(*out) || *out < lo || *out > hi) {
		if (isinf(hi))
			return weft_cfg_error(weft_cfg_get(sec, key),
					      "must be a finite number >= %g, got %g; %s", lo, *out,
					      advice);
		return weft_cfg_error(weft_cfg_get(sec, key), "must be in [%g, %g], got %g; %s", lo,
				      hi, *out, advice);
	}
	return WEFT_OK;
}

/* The total step count: `key` if given, else the trainer's default. */
static weft_status read_total(const weft_cfg *sec, const char *key, int64_t def,
			      const char *name, int64_t *out, int *from_trainer)
{
	if (!weft_cfg_get(sec, key) && def <= 0)
		return weft_cfg_error(sec,
				      "schedule '%s' needs %s, the total number of optimizer steps "
				      "it spans; add '%s: N' here or set trainer.max_steps",
				      name, key, key);
	*from_trainer = weft_cfg_get(sec, key) == NULL;
	return read_int(sec, key, def, 1, "it is the total number of optimizer steps", out);
}

/* A total step count that leaves no room after the warmup. */
static weft_status total_error(const weft_cfg *sec, const char *key, int64_t total,
			       const char *warmup_key, int64_t warmup)
{
	const weft_cfg *node = weft_cfg_get(sec, key);

	if (node)
		return weft_cfg_error(node,
				      "must be greater than %s (%lld), got %lld: the decay runs "
				      "from the end of the warmup to %s",
				      warmup_key, (long long)warmup, (long long)total, key);
	return weft_cfg_error(sec,
			      "%s (%lld, from trainer.max_steps) must be greater than %s "
			      "(%lld); shorten the warmup or set %s here",
			      key, (long long)total, warmup_key, (long long)warmup, key);
}

/* warmup_steps and warmup_start_factor of the weft schedules. */
static weft_status read_warmup(const weft_cfg *sec, int64_t min_steps, weft_lr_schedule *s)
{
	weft_status st;

	st = read_int(sec, "warmup_steps", 0, min_steps,
		      "warmup_steps is the number of steps the lr ramps up over", &s->warmup_steps);
	if (st != WEFT_OK)
		return st;
	return read_float(sec, "warmup_start_factor", 1.0 / (double)(s->warmup_steps + 1), 0.0, 1.0,
			  "it is the fraction of lr the first step uses", &s->warmup_start_factor);
}

/* warmup_num_steps and warmup_type of the DeepSpeed schedules. */
static weft_status read_ds_warmup(const weft_cfg *sec, weft_lr_schedule *s)
{
	static const char *const types[] = { "log", "linear", NULL };
	int type;
	weft_status st;

	st = read_int(sec, "warmup_num_steps", 1000, 0,
		      "warmup_num_steps is the number of steps the lr ramps up over",
		      &s->warmup_steps);
	if (st != WEFT_OK)
		return st;
	/* DeepSpeed: self.warmup_num_steps = max(2, warmup_num_steps) */
	if (s->warmup_steps < 2)
		s->warmup_steps = 2;
	st = weft_cfg_choice(sec, "warmup_type", types, "log", &type);
	if (st != WEFT_OK)
		return st;
	s->warmup_log = type == 0;
	return WEFT_OK;
}

static weft_status parse_weft(const weft_cfg *sec, int64_t def_total, weft_lr_schedule *s)
{
	const char *name = kind_names[s->kind];
	weft_status st;

	switch (s->kind) {
	case WEFT_LR_CONSTANT:
		return WEFT_OK;
	case WEFT_LR_WARMUP:
		return read_warmup(sec, 1, s);
	case WEFT_LR_STEP:
		st = read_warmup(sec, 0, s);
		if (st != WEFT_OK)
			return st;
		if (!weft_cfg_get(sec, "step_size"))
			return weft_cfg_error(sec,
					      "schedule 'step' needs step_size, the number of steps "
					      "between decays by gamma; add 'step_size: N' here");
		st = read_int(sec, "step_size", 1, 1, "it counts optimizer steps", &s->step_size);
		if (st != WEFT_OK)
			return st;
		return read_float(sec, "gamma", 0.1, 1e-300, INFINITY,
				  "gamma multiplies the lr every step_size steps (typical 0.1)",
				  &s->gamma);
	default: /* cosine, linear */
		st = read_warmup(sec, 0, s);
		if (st != WEFT_OK)
			return st;
		st = read_total(sec, "max_steps", def_total, name, &s->max_steps,
				&s->max_steps_from_trainer);
		if (st != WEFT_OK)
			return st;
		if (s->max_steps <= s->warmup_steps)
			return total_error(sec, "max_steps", s->max_steps, "warmup_steps",
					   s->warmup_steps);
		return read_float(sec, "min_lr_ratio", 0.0, 0.0, 1.0,
				  "the lr decays to min_lr_ratio * lr (typical 0.1 or 0)",
				  &s->min_lr_ratio);
	}
}

static weft_status parse_deepspeed(const weft_cfg *sec, int64_t def_total, weft_lr_schedule *s)
{
	const char *name = kind_names[s->kind];
	weft_status st;

	if (s->kind == WEFT_LR_DS_WARMUP_COSINE) {
		st = read_total(sec, "total_num_steps", def_total, name, &s->max_steps,
				&s->max_steps_from_trainer);
		if (st != WEFT_OK)
			return st;
		st = read_float(sec, "warmup_min_ratio", 0.0, 0.0, 1.0,
				"warmup starts at warmup_min_ratio * lr", &s->warmup_min_ratio);
		if (st != WEFT_OK)
			return st;
		st = read_float(sec, "cos_min_ratio", 0.0001, 0.0, 1.0,
				"the cosine ends at cos_min_ratio * lr", &s->cos_min_ratio);
		if (st != WEFT_OK)
			return st;
		st = read_ds_warmup(sec, s);
		if (st != WEFT_OK)
			return st;
		if (s->max_steps <= s->warmup_steps)
			return total_error(sec, "total_num_steps", s->max_steps,
					   "warmup_num_steps", s->warmup_steps);
		return WEFT_OK;
	}
	if (s->kind == WEFT_LR_DS_WARMUP_DECAY) {
		st = read_total(sec, "total_num_steps", def_total, name, &s->max_steps,
				&s->max_steps_from_trainer);
		if (st != WEFT_OK)
			return st;
	}
	st = read_float(sec, "warmup_min_lr", 0.0, 0.0, INFINITY, "the lr warmup starts from",
			&s->warmup_min_lr);
	if (st != WEFT_OK)
		return st;
	st = read_float(sec, "warmup_max_lr", s->base_lr, 0.0, INFINITY,
			"the lr warmup ends at (defaults to optimizer.lr)", &s->warmup_max_lr);
	if (st != WEFT_OK)
		return st;
	return read_ds_warmup(sec, s);
}

weft_status weft_lr_schedule_parse(const weft_cfg *section, double base_lr,
				   int64_t default_max_steps, weft_lr_schedule *out)
{
	weft_lr_schedule s = {
		.kind = WEFT_LR_CONSTANT,
		.base_lr = base_lr,
		.warmup_start_factor = 1.0,
		.gamma = 1.0,
	};
	int kind;
	weft_status st;

	if (!isfinite(base_lr) || base_lr < 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "lr schedule: base lr must be finite and >= 0, got %g", base_lr);
	if (section && weft_cfg_kind_of(section) != WEFT_CFG_NULL) {
		if (weft_cfg_kind_of(section) != WEFT_CFG_MAP)
			return weft_cfg_error(section,
					      "must be a mapping like {name: cosine, warmup_steps: "
					      "100}");
		if (!weft_cfg_get(section, "name"))
			return weft_cfg_error(section,
					      "needs a name: one of constant, warmup, cosine, linear, "
					      "step, WarmupLR, WarmupDecayLR, WarmupCosineLR");
		st = weft_cfg_choice(section, "name", kind_names, "constant", &kind);
		if (st != WEFT_OK)
			return st;
		s.kind = (weft_lr_kind)kind;
		if (s.kind >= WEFT_LR_DS_WARMUP)
			st = parse_deepspeed(section, default_max_steps, &s);
		else
			st = parse_weft(section, default_max_steps, &s);
		if (st != WEFT_OK)
			return st;
	}
	*out = s;
	return WEFT_OK;
}

/* ---- evaluating ---------------------------------------------------- */

/* Linear warmup, PyTorch LinearLR(start_factor=s, end_factor=1,
 * total_iters=w) in closed form, for t < w:
 *   factor(t) = s + (1 - s) * t / w                                     */
static double warmup_factor(const weft_lr_schedule *s, int64_t t)
{
	return s->warmup_start_factor +
	       (1.0 - s->warmup_start_factor) * (double)t / (double)s->warmup_steps;
}

/* DeepSpeed's warmup fraction (WarmupLR._get_gamma), for t < W:
 *   log:    log(t + 1) / log(W)    (as (1 / log W) * log(t + 1))
 *   linear: t / W                                                        */
static double ds_warmup_gamma(const weft_lr_schedule *s, int64_t t)
{
	if (s->warmup_log)
		return (1.0 / log((double)s->warmup_steps)) * log((double)(t + 1));
	return (double)t / (double)s->warmup_steps;
}

/* The schedules with a horizon after their warmup, at a real-valued step
 * tau >= warmup_steps (the same formulas as below, in tau). */
static double after_warmup_at(const weft_lr_schedule *s, double tau)
{
	const double lr = s->base_lr, w = (double)s->warmup_steps, T = (double)s->max_steps;
	double r, g, span = T - w;

	switch (s->kind) {
	case WEFT_LR_COSINE:
		r = s->min_lr_ratio * lr;
		if (tau - w >= span)
			return r;
		return r + (lr - r) * (1.0 + cos(M_PI * (tau - w) / span)) / 2.0;
	case WEFT_LR_LINEAR:
		return lr * (1.0 + (s->min_lr_ratio - 1.0) * fmin(tau - w, span) / span);
	case WEFT_LR_DS_WARMUP_DECAY:
		g = (T - tau) / (span > 1.0 ? span : 1.0);
		return s->warmup_min_lr + (s->warmup_max_lr - s->warmup_min_lr) * (g > 0 ? g : 0);
	case WEFT_LR_DS_WARMUP_COSINE:
		g = (1.0 + cos(M_PI * (tau - w + 1.0) / span)) / 2.0;
		g = s->cos_min_ratio + (1.0 - s->cos_min_ratio) * g;
		return lr * (g > 0.0 ? g : 0.0);
	default:
		return lr;
	}
}

int weft_lr_schedule_continue(weft_lr_schedule *s, int64_t step, int64_t old_max)
{
	int64_t a = step > s->warmup_steps ? step : s->warmup_steps;

	if (!s->max_steps_from_trainer || old_max <= s->warmup_steps || old_max == s->max_steps)
		return 0;
	if (s->kind != WEFT_LR_COSINE && s->kind != WEFT_LR_LINEAR &&
	    s->kind != WEFT_LR_DS_WARMUP_DECAY && s->kind != WEFT_LR_DS_WARMUP_COSINE)
		return 0;
	if (step <= s->warmup_steps)
		return 0; /* no decay yet: the new horizon applies from its start */
	/* with nothing left to stretch (old_max <= a), weft_lr_schedule_at
	 * holds the old schedule's value at a */
	s->warp_from = a;
	s->warp_old_max = old_max;
	return 1;
}

double weft_lr_schedule_at(const weft_lr_schedule *s, int64_t t)
{
	const double lr = s->base_lr;
	int64_t u, span;
	double r, g;

	if (t < 0)
		t = 0;
	if (s->warp_from > 0) {
		weft_lr_schedule old = *s;
		double a = (double)s->warp_from, tau;

		old.max_steps = s->warp_old_max;
		old.warp_from = 0;
		if (t <= s->warp_from)
			return weft_lr_schedule_at(&old, t);
		if (s->max_steps <= s->warp_from || s->warp_old_max <= s->warp_from)
			return weft_lr_schedule_at(&old, s->warp_from);
		tau = a + (double)(t - s->warp_from) * ((double)s->warp_old_max - a) /
				  ((double)s->max_steps - a);
		return after_warmup_at(&old, tau);
	}
	switch (s->kind) {
	case WEFT_LR_CONSTANT:
		return lr;
	case WEFT_LR_WARMUP:
		/* warmup, then lr */
		return t < s->warmup_steps ? lr * warmup_factor(s, t) : lr;
	case WEFT_LR_COSINE:
		/* u = t - w, U = T - w, eta = r * lr:
		 *   eta + (lr - eta) * (1 + cos(pi * u / U)) / 2   for u < U
		 *   eta                                          after    */
		if (t < s->warmup_steps)
			return lr * warmup_factor(s, t);
		u = t - s->warmup_steps;
		span = s->max_steps - s->warmup_steps;
		r = s->min_lr_ratio * lr;
		if (u >= span)
			return r;
		return r + (lr - r) * (1.0 + cos(M_PI * (double)u / (double)span)) / 2.0;
	case WEFT_LR_LINEAR:
		/* lr * (1 + (r - 1) * min(u, U) / U), LinearLR(1, r, U) */
		if (t < s->warmup_steps)
			return lr * warmup_factor(s, t);
		u = t - s->warmup_steps;
		span = s->max_steps - s->warmup_steps;
		if (u > span)
			u = span;
		return lr * (1.0 + (s->min_lr_ratio - 1.0) * (double)u / (double)span);
	case WEFT_LR_STEP:
		/* lr * gamma^floor(u / step_size), StepLR counted from w */
		if (t < s->warmup_steps)
			return lr * warmup_factor(s, t);
		u = t - s->warmup_steps;
		return lr * pow(s->gamma, (double)(u / s->step_size));
	case WEFT_LR_DS_WARMUP:
		/* min_lr + (max_lr - min_lr) * gamma, gamma = 1 after warmup */
		g = t < s->warmup_steps ? ds_warmup_gamma(s, t) : 1.0;
		return s->warmup_min_lr + (s->warmup_max_lr - s->warmup_min_lr) * g;
	case WEFT_LR_DS_WARMUP_DECAY:
		/* after warmup: gamma = max(0, (T - t) / max(1, T - W)) */
		if (t < s->warmup_steps) {
			g = ds_warmup_gamma(s, t);
		} else {
			double d = (double)(s->max_steps - s->warmup_steps);

			g = (double)(s->max_steps - t) / (d > 1.0 ? d : 1.0);
			if (g < 0.0)
				g = 0.0;
		}
		return s->warmup_min_lr + (s->warmup_max_lr - s->warmup_min_lr) * g;
	case WEFT_LR_DS_WARMUP_COSINE:
		/* ratio during warmup: wmr + gamma * (1 - wmr); after:
		 *   k = t - W + 1, K = T - W,
		 *   ratio = max(0, cmr + (1 - cmr) * (1 + cos(pi * k / K)) / 2)
		 * (DeepSpeed does not clamp k at K: past T the cosine rises
		 * again, and so does this). lr * ratio. */
		if (t < s->warmup_steps) {
			g = ds_warmup_gamma(s, t);
			return lr * (s->warmup_min_ratio + g * (1.0 - s->warmup_min_ratio));
		}
		g = (1.0 + cos(M_PI * (double)(t - s->warmup_steps + 1) /
			       (double)(s->max_steps - s->warmup_steps))) / 2.0;
		g = s->cos_min_ratio + (1.0 - s->cos_min_ratio) * g;
		return lr * (g > 0.0 ? g : 0.0);
	}
	return lr;
}
