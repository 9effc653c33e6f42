/* LearningRateMonitor, as Lightning's: a column lr-<optimizer class>
 * (lr-SGD here) in metrics.csv holding the learning rate of the step,
 *   - logging_interval: step, at every logged step (log_every_n_steps),
 *     given in Lightning's list form callbacks: [{class: ...}];
 *   - logging_interval: epoch, once per epoch at its first step, given in
 *     the mapping form callbacks: {learning_rate_monitor: ...};
 * and an unknown class in the list is one error naming the built-ins.
 * Tolerance: both columns are printed from the same double: exact.
 */
#include <math.h>

#include "train_test.h"

static const char *yaml =
	"seed_everything: 8\n"
	"trainer:\n"
	"  max_epochs: 2\n"
	"  log_every_n_steps: 4\n"
	"  enable_progress_bar: false\n"
	"  enable_checkpointing: false\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 8, val_fraction: 0.25}\n"
	"optimizer: {name: sgd, lr: 1.0e-2}\n"
	"lr_scheduler: {name: cosine, warmup_steps: 2}\n";

int main(void)
{
	char *csv;
	int rc;

	tt_scratch("train_lr_monitor");
	tt_make_npy_dataset(128, 16, 4); /* 96 training rows: 12 steps an epoch */
	tt_write_text(tt_path("m.yaml"), yaml);

	rc = tt_weft("step", "fit", "--config", "m.yaml", "--trainer.name=step",
		     "--trainer.callbacks=[{class: LearningRateMonitor, logging_interval: step}]");
	WT_REQUIRE(tt_expect_ok("step", rc));
	csv = tt_read(tt_path("runs/step/version_0/metrics.csv"), NULL);
	WT_REQUIRE(csv);
	for (int step = 4; step <= 24; step += 4) {
		WT_CHECK(!isnan(tt_csv_value(csv, "lr-SGD", step)));
		WT_CHECK(tt_csv_value(csv, "lr-SGD", step) == tt_csv_value(csv, "lr", step));
	}
	WT_CHECK(isnan(tt_csv_value(csv, "lr-SGD", 5)));
	free(csv);

	rc = tt_weft("epoch", "fit", "--config", "m.yaml", "--trainer.name=epoch",
		     "--trainer.callbacks={learning_rate_monitor: {logging_interval: epoch}}",
		     "--trainer.log_every_n_steps=1");
	WT_REQUIRE(tt_expect_ok("epoch", rc));
	csv = tt_read(tt_path("runs/epoch/version_0/metrics.csv"), NULL);
	WT_REQUIRE(csv);
	for (int step = 1; step <= 24; step++) {
		int first = step == 1 || step == 13;

		WT_CHECK(isnan(tt_csv_value(csv, "lr-SGD", step)) == !first);
		if (first)
			WT_CHECK(tt_csv_value(csv, "lr-SGD", step) == tt_csv_value(csv, "lr", step));
	}
	free(csv);

	rc = tt_weft("bad", "fit", "--config", "m.yaml",
		     "--trainer.callbacks=[{class: LearningRateMonitr}]");
	WT_CHECK(rc == 1);
	WT_STR_CONTAINS(tt_output("bad", "err"), "'LearningRateMonitr' is not a built-in "
			"callback class (ModelCheckpoint, EarlyStopping, LearningRateMonitor, "
			"ThroughputMonitor)");
	tt_cleanup();
	return wt_done("test_train_lr_monitor");
}
