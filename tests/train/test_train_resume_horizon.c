/* Resuming with a larger trainer.max_steps continues the learning-rate
 * schedule when lr_scheduler.max_steps is left to the trainer: the lr goes
 * on from the checkpoint's step without a jump and the rest of the old
 * decay is stretched to end at the new horizon, and one info line says so.
 *
 * Cosine, lr 1e-2, warmup 4, min_lr_ratio 0.1. Run A: max_steps 20, saves
 * every 10 steps. Run B resumes A's step-10 save with max_steps 40: its
 * first step uses A's lr of step 11 (t = 10), the lr never rises, and step
 * index t >= 10 gets the old schedule at tau = 10 + (t - 10) * 10 / 30
 * (so step 40, t = 39, is near the end value). Run C resumes A's last
 * (step 20: the old schedule had ended) with max_steps 30: the lr stays at
 * the end value 1e-3 and the info line says the schedule had ended.
 *
 * Tolerance: metrics.csv prints 9 significant digits: relative 1e-7.
 */
#include <math.h>

#include "train_test.h"

static const char *yaml =
	"seed_everything: 4\n"
	"trainer:\n"
	"  max_steps: 20\n"
	"  log_every_n_steps: 1\n"
	"  enable_progress_bar: false\n"
	"  callbacks:\n"
	"    model_checkpoint: {every_n_train_steps: 10, every_n_epochs: 0, save_top_k: -1}\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 8, val_fraction: 0.25}\n"
	"optimizer: {name: sgd, lr: 1.0e-2}\n"
	"lr_scheduler: {name: cosine, warmup_steps: 4, min_lr_ratio: 0.1}\n";

/* The old schedule (horizon 20) at a real step tau >= warmup. */
static double old_cosine(double tau)
{
	const double lr = 1e-2, r = 0.1 * lr, w = 4, T = 20;

	if (tau - w >= T - w)
		return r;
	return r + (lr - r) * (1.0 + cos(M_PI * (tau - w) / (T - w))) / 2.0;
}

int main(void)
{
	char *a, *b, *c;
	int rc;

	tt_scratch("train_resume_horizon");
	tt_make_npy_dataset(512, 16, 4); /* 48 steps an epoch: no epoch ends */
	tt_write_text(tt_path("h.yaml"), yaml);
	rc = tt_weft("a", "fit", "--config", "h.yaml");
	WT_REQUIRE(tt_expect_ok("a", rc));
	rc = tt_weft("b", "fit", "--config", "h.yaml", "--trainer.max_steps=40",
		     "--trainer.resume=runs/h/version_0/checkpoints/epoch=0-step=10");
	WT_REQUIRE(tt_expect_ok("b", rc));
	rc = tt_weft("c", "fit", "--config", "h.yaml", "--trainer.max_steps=30",
		     "--trainer.resume=runs/h/version_0/checkpoints/last");
	WT_REQUIRE(tt_expect_ok("c", rc));
	a = tt_read(tt_path("runs/h/version_0/metrics.csv"), NULL);
	b = tt_read(tt_path("runs/h/version_1/metrics.csv"), NULL);
	c = tt_read(tt_path("runs/h/version_2/metrics.csv"), NULL);
	WT_REQUIRE(a && b && c);

	WT_STR_CONTAINS(tt_output("b", "err"), "max_steps is now 40 (the checkpoint's schedule "
			"spanned 20): the cosine schedule continues from step 10");
	WT_CLOSE(tt_csv_value(b, "lr", 11), tt_csv_value(a, "lr", 11), 1e-7, 0);
	for (int step = 12; step <= 40; step++) {
		double tau = 10.0 + (double)(step - 1 - 10) * 10.0 / 30.0;

		WT_CHECK(tt_csv_value(b, "lr", step) <= tt_csv_value(b, "lr", step - 1));
		WT_CLOSE(tt_csv_value(b, "lr", step), old_cosine(tau), 1e-7, 0);
	}

	WT_STR_CONTAINS(tt_output("c", "err"), "schedule ended at step 20");
	for (int step = 21; step <= 30; step++)
		WT_CLOSE(tt_csv_value(c, "lr", step), 1e-3, 1e-7, 0);
	free(a);
	free(b);
	free(c);
	tt_cleanup();
	return wt_done("test_train_resume_horizon");
}
