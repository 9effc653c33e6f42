/* Early stopping stops where Lightning's EarlyStopping does.
 *
 * Lightning's rule: a check improves when it beats the best by more than
 * min_delta; otherwise its wait count grows by one, and training stops
 * as soon as the wait count reaches patience (so patience 2 stops at the
 * second bad check in a row, not the third).
 *
 * 1. Recorded val_loss / val_acc sequences replayed through the state
 *    machine (core/train/early_stop.c), each with the 1-based check at
 *    which Lightning stops (worked out by hand from the rule; 0: never).
 * 2. A run validating every 5 steps (check_val_every_n_epoch: null) with
 *    min_delta 10, which no check after the first can beat: patience 2
 *    stops after the third check, at step 15 (the old rule gave step 20),
 *    and says why in Lightning's words.
 * No tolerance: step numbers and check indices are exact.
 */
#include <math.h>

#include "train/early_stop.h"
#include "train_test.h"

typedef struct es_case {
	const char *what;
	int mode_max;
	int64_t patience;
	double min_delta;
	int n;
	double v[10];
	int stop_at; /* 1-based check; 0: never */
} es_case;

static const es_case cases[] = {
	{ "patience 2, two bad checks", 0, 2, 0.0, 8,
	  { 1.0, 0.9, 0.95, 0.93, 0.8, 0.85, 0.86, 0.7 }, 4 },
	{ "patience 3, an improvement resets the wait", 0, 3, 0.0, 9,
	  { 1.0, 1.1, 1.2, 0.9, 0.95, 0.96, 0.91, 0.92 }, 7 },
	{ "min_delta: smaller gains are no improvement", 0, 2, 0.05, 4,
	  { 1.0, 0.97, 0.96, 0.5 }, 3 },
	{ "equal is no improvement", 0, 1, 0.0, 3, { 0.5, 0.5, 0.4 }, 2 },
	{ "patience 0 stops at the first bad check", 0, 0, 0.0, 4,
	  { 3.0, 2.0, 2.5, 1.0 }, 3 },
	{ "mode max (val_acc)", 1, 2, 0.0, 6, { 0.5, 0.6, 0.6, 0.59, 0.7, 0.8 }, 4 },
	{ "mode max with min_delta", 1, 2, 0.01, 5, { 0.5, 0.505, 0.509, 0.6, 0.7 }, 3 },
	{ "never stops while improving", 0, 1, 0.0, 5, { 5, 4, 3, 2, 1 }, 0 },
};

static void replay(void)
{
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const es_case *k = &cases[c];
		weft_early_stop_config ec = { .enabled = 1, .monitor = "val_loss",
					      .mode_max = k->mode_max, .patience = k->patience,
					      .min_delta = k->min_delta };
		double best = weft_early_stop_initial_best(&ec);
		int64_t wait = 0;
		int stopped = 0;

		WT_CHECK(isinf(best) && (k->mode_max ? best < 0 : best > 0));
		for (int i = 0; i < k->n && !stopped; i++)
			if (weft_early_stop_update(&ec, k->v[i], &best, &wait))
				stopped = i + 1;
		if (stopped != k->stop_at)
			fprintf(stderr, "case '%s': stopped at check %d, Lightning stops at %d\n",
				k->what, stopped, k->stop_at);
		WT_CHECK(stopped == k->stop_at);
	}
}

static void run_case(void)
{
	const char *err;
	char *s;
	int rc;

	tt_make_npy_dataset(256, 16, 4); /* 192 training rows: 24 steps an epoch */
	tt_write_text(tt_path("es.yaml"),
		      "seed_everything: 3\n"
		      "trainer:\n"
		      "  max_steps: 60\n"
		      "  val_check_interval: 5\n"
		      "  check_val_every_n_epoch: null\n"
		      "  enable_progress_bar: false\n"
		      "  enable_checkpointing: false\n"
		      "  callbacks:\n"
		      "    early_stopping: {monitor: val_loss, patience: 2, min_delta: 10.0}\n"
		      "model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
		      "data: {class: npy, x: x.npy, y: y.npy, batch_size: 8, val_fraction: 0.25}\n"
		      "optimizer: {name: sgd, lr: 1.0e-2}\n");
	rc = tt_weft("es", "fit", "--config", "es.yaml");
	WT_REQUIRE(tt_expect_ok("es", rc));
	s = tt_read(tt_path("runs/es/version_0/summary.json"), NULL);
	WT_REQUIRE(s);
	if (!strstr(s, "\"steps\": 15,"))
		fprintf(stderr, "summary.json:\n%s\n", s);
	WT_STR_CONTAINS(s, "\"steps\": 15,");
	free(s);
	err = tt_output("es", "err");
	WT_STR_CONTAINS(err, "did not improve in the last 2");
	WT_STR_CONTAINS(err, "`Trainer.fit` stopped: early stopping");
}

int main(void)
{
	replay();
	tt_scratch("train_early_stop");
	run_case();
	tt_cleanup();
	return wt_done("test_train_early_stop");
}
