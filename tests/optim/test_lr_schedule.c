/* Learning-rate schedules against torch.optim.lr_scheduler (LinearLR,
 * CosineAnnealingLR, StepLR, chained with SequentialLR for the warmup) and
 * against DeepSpeed's formulas (WarmupLR, WarmupDecayLR, WarmupCosineLR),
 * at every step of the fixture (tests/fixtures/optim/schedules.txt), plus
 * hand-computed values, behaviour past max_steps, and config errors.
 *
 * Tolerance 1e-12 relative (+1e-18 absolute for lrs that reach 0): weft
 * evaluates closed forms in double while PyTorch steps its chainable
 * (recursive) forms, which multiply ratios once per step; over at most
 * 100 steps that rounding stays below 1e-13 relative.
 */
#include <math.h>
#include "train/lr_schedule.h"
#include "optim_test.h"

static weft_lr_schedule parse_ok(const char *yaml, double base_lr, int64_t def_total)
{
	weft_config *cfg = ot_config(yaml);
	weft_lr_schedule s;

	WT_OK(weft_lr_schedule_parse(weft_cfg_get(weft_config_root(cfg), "lr_scheduler"), base_lr,
				     def_total, &s));
	WT_OK(weft_config_check_unused(cfg));
	weft_config_free(cfg);
	return s;
}

static weft_status parse_err(const char *yaml, int64_t def_total)
{
	weft_config *cfg = ot_config(yaml);
	weft_lr_schedule s;
	weft_status st;

	st = weft_lr_schedule_parse(weft_cfg_get(weft_config_root(cfg), "lr_scheduler"), 0.1,
				    def_total, &s);
	if (st == WEFT_OK)
		st = weft_config_check_unused(cfg);
	weft_config_free(cfg);
	return st;
}

static void fixtures(void)
{
	char path[4096], *line = NULL, id[64] = "";
	size_t cap = 0;
	double base = 0;
	int n = 0, cases = 0;
	weft_lr_schedule s = { 0 };
	FILE *f;

	ot_fixture_path(path, sizeof(path), "schedules.txt");
	f = fopen(path, "r");
	WT_REQUIRE(f != NULL);
	while (getline(&line, &cap, f) > 0) {
		if (!strncmp(line, "schedule ", 9)) {
			WT_REQUIRE(sscanf(line + 9, "%63s %lf %d", id, &base, &n) == 3);
		} else if (!strncmp(line, "config ", 7)) {
			char yaml[512];

			snprintf(yaml, sizeof(yaml), "lr_scheduler: %s", line + 7);
			s = parse_ok(yaml, base, 0);
		} else if (!strncmp(line, "lr ", 3)) {
			char *p = line + 3, *end;
			int bad = 0;

			for (int t = 0; t < n; t++) {
				double want = strtod(p, &end), got = weft_lr_schedule_at(&s, t);

				WT_REQUIRE(end != p);
				p = end;
				wt_checks++;
				if (!(fabs(got - want) <= 1e-12 * fabs(want) + 1e-18)) {
					wt_failures++;
					if (bad++ < 3)
						fprintf(stderr, "%s t=%d: %.17g vs reference %.17g\n", id,
							t, got, want);
				}
			}
			cases++;
		}
	}
	free(line);
	fclose(f);
	WT_CHECK(cases == 14);
}

static void hand_values(void)
{
	weft_lr_schedule s;

	/* null or absent section: constant */
	s = parse_ok("lr_scheduler:\n", 0.3, 0);
	WT_CHECK(s.kind == WEFT_LR_CONSTANT);
	WT_OK(weft_lr_schedule_parse(NULL, 0.3, 0, &s));
	WT_CHECK(s.kind == WEFT_LR_CONSTANT);
	WT_CHECK(weft_lr_schedule_at(&s, 0) == 0.3 && weft_lr_schedule_at(&s, 1000000) == 0.3);

	/* nanoGPT's warmup: lr (t+1)/(w+1); cosine to 0.1 lr, held after max_steps */
	s = parse_ok("lr_scheduler: {name: cosine, warmup_steps: 3, max_steps: 13, "
		     "min_lr_ratio: 0.1}\n", 1.0, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 0), 0.25, 1e-15, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 2), 0.75, 1e-15, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 3), 1.0, 1e-15, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 8), 0.55, 1e-15, 0); /* halfway: (1 + 0.1) / 2 */
	WT_CLOSE(weft_lr_schedule_at(&s, 13), 0.1, 1e-15, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 500), 0.1, 1e-15, 0); /* held, not periodic */
	WT_CLOSE(weft_lr_schedule_at(&s, -4), 0.25, 1e-15, 0);

	/* max_steps from the trainer when the section does not give it */
	s = parse_ok("lr_scheduler: {name: linear}\n", 2.0, 4);
	WT_CHECK(s.max_steps == 4);
	WT_CLOSE(weft_lr_schedule_at(&s, 1), 1.5, 1e-15, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 9), 0.0, 0, 1e-300);

	/* WarmupLR log: log(t+1)/log(W); at t = 9 with W = 100 that is 1/2 */
	s = parse_ok("lr_scheduler: {name: WarmupLR, warmup_min_lr: 0.1, warmup_max_lr: 0.3, "
		     "warmup_num_steps: 100}\n", 0.5, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 0), 0.1, 1e-15, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 9), 0.2, 1e-15, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 100), 0.3, 1e-15, 0);
	/* warmup_max_lr defaults to the optimizer's lr; warmup_num_steps < 2 means 2 */
	s = parse_ok("lr_scheduler: {name: WarmupLR, warmup_num_steps: 0, warmup_type: linear}\n",
		     0.5, 0);
	WT_CHECK(s.warmup_steps == 2);
	WT_CLOSE(weft_lr_schedule_at(&s, 1), 0.25, 1e-15, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 2), 0.5, 1e-15, 0);
	/* WarmupDecayLR reaches 0 at total_num_steps and stays there */
	s = parse_ok("lr_scheduler: {name: WarmupDecayLR, total_num_steps: 20, "
		     "warmup_num_steps: 10, warmup_type: linear}\n", 1.0, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 15), 0.5, 1e-15, 0);
	WT_CHECK(weft_lr_schedule_at(&s, 20) == 0.0 && weft_lr_schedule_at(&s, 99) == 0.0);

	/* step: gamma^floor(t / step_size) */
	s = parse_ok("lr_scheduler: {name: step, step_size: 2, gamma: 0.5}\n", 8.0, 0);
	WT_CLOSE(weft_lr_schedule_at(&s, 5), 2.0, 1e-15, 0);
	WT_CHECK(!strcmp(weft_lr_kind_name(s.kind), "step"));
}

static void errors(void)
{
	WT_FAILS(parse_err("lr_scheduler:\n  name: cosin\n", 0), WEFT_ERR_CONFIG, "cfg.yaml:2:",
		 "cosine");
	WT_FAILS(parse_err("lr_scheduler: {warmup_steps: 3}\n", 0), WEFT_ERR_CONFIG,
		 "cfg.yaml:1:", "needs a name", "WarmupCosineLR");
	WT_FAILS(parse_err("lr_scheduler:\n  name: cosine\n  warmup_steps: 10\n", 0),
		 WEFT_ERR_CONFIG, "cfg.yaml:2:", "needs max_steps", "trainer.max_steps");
	WT_FAILS(parse_err("lr_scheduler:\n  name: cosine\n  warmup_steps: 10\n  max_steps: 10\n", 0),
		 WEFT_ERR_CONFIG, "cfg.yaml:4:", "lr_scheduler.max_steps",
		 "must be greater than warmup_steps (10), got 10");
	WT_FAILS(parse_err("lr_scheduler:\n  name: linear\n  warmup_steps: 10\n", 8),
		 WEFT_ERR_CONFIG, "cfg.yaml:2:", "max_steps (8, from trainer.max_steps) must be greater");
	WT_FAILS(parse_err("lr_scheduler:\n  name: linear\n  max_steps: 10\n  warmup_steps: -1\n", 0),
		 WEFT_ERR_CONFIG, "cfg.yaml:4:", "must be >= 0, got -1");
	WT_FAILS(parse_err("lr_scheduler:\n  name: cosine\n  max_steps: 10\n  min_lr_ratio: 1.5\n", 0),
		 WEFT_ERR_CONFIG, "cfg.yaml:4:", "must be in [0, 1], got 1.5");
	WT_FAILS(parse_err("lr_scheduler:\n  name: step\n  gamma: 0.5\n", 0), WEFT_ERR_CONFIG,
		 "cfg.yaml:2:", "needs step_size");
	WT_FAILS(parse_err("lr_scheduler:\n  name: step\n  step_size: 5\n  gamma: 0\n", 0),
		 WEFT_ERR_CONFIG, "cfg.yaml:4:", "gamma");
	WT_FAILS(parse_err("lr_scheduler:\n  name: warmup\n", 0), WEFT_ERR_CONFIG,
		 "must be >= 1, got 0");
	WT_FAILS(parse_err("lr_scheduler:\n  name: WarmupLR\n  warmup_type: cubic\n", 0),
		 WEFT_ERR_CONFIG, "cfg.yaml:3:", "linear");
	WT_FAILS(parse_err("lr_scheduler:\n  name: WarmupCosineLR\n  total_num_steps: 2\n"
			   "  warmup_num_steps: 1\n", 0),
		 WEFT_ERR_CONFIG, "cfg.yaml:3:", "must be greater than warmup_num_steps (2), got 2");
	/* a key that belongs to another schedule is an unknown key here */
	WT_FAILS(parse_err("lr_scheduler:\n  name: cosine\n  max_steps: 10\n  step_size: 3\n", 0),
		 WEFT_ERR_CONFIG, "cfg.yaml:4:", "step_size");
	WT_FAILS(parse_err("lr_scheduler: 3\n", 0), WEFT_ERR_CONFIG, "cfg.yaml:1:",
		 "must be a mapping");
}

int main(void)
{
	fixtures();
	hand_values();
	errors();
	return wt_done("test_lr_schedule");
}
