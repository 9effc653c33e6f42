/* Lightning's num_sanity_val_steps and fast_dev_run.
 *   - by default 2 validation batches run before training (one line says
 *     so), -1 runs them all, 0 none; the sanity check changes nothing of
 *     training: metrics.csv of the default run and of the run with 0 are
 *     byte for byte the same (no tolerance: the claim is identity);
 *   - fast_dev_run: true trains 1 batch and validates 1, fast_dev_run: 3
 *     trains 3 and validates 3, with no checkpoints, metrics.csv or
 *     TensorBoard file and no sanity check;
 *   - the pipeline strategies take part: pp (1f1b) and hybrid dp 2 x pp 2
 *     run the sanity batches before their first step (their evaluation
 *     used to need state the first step makes, and crashed) and train
 *     exactly as without it (metrics.csv identical).
 */
#include <dirent.h>

#include "train_test.h"

static const char *yaml =
	"seed_everything: 10\n"
	"trainer:\n"
	"  max_epochs: 2\n"
	"  log_every_n_steps: 1\n"
	"  enable_progress_bar: false\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4, dropout: 0.1}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 8, val_fraction: 0.25}\n"
	"optimizer: {name: adamw, lr: 1.0e-2}\n";

static const char *pp_yaml =
	"seed_everything: 7\n"
	"trainer:\n"
	"  max_steps: 3\n"
	"  log_every_n_steps: 1\n"
	"  accumulate_grad_batches: 2\n"
	"  enable_progress_bar: false\n"
	"  limit_val_batches: 2\n"
	"model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 16, vocab_size: 256, block_size: 8, "
	"dropout: 0.0}\n"
	"data: {class: text, paths: [/usr/share/games/fortunes/fortunes], block_size: 8, "
	"batch_size: 4, val_fraction: 0.1}\n"
	"optimizer: {name: sgd, lr: 0.05}\n";

/* A pipeline strategy with and without the sanity check: same metrics. */
static void pipeline_case(const char *name, const char *devices, const char *strategy)
{
	char on[64], off[64], a[128], b[128], nm_on[96], nm_off[96];
	int rc;

	snprintf(on, sizeof(on), "%s_on", name);
	snprintf(off, sizeof(off), "%s_off", name);
	snprintf(nm_on, sizeof(nm_on), "--trainer.name=%s", on);
	snprintf(nm_off, sizeof(nm_off), "--trainer.name=%s", off);
	rc = tt_weft(on, "fit", "--config", "pp.yaml", nm_on, devices, strategy);
	WT_REQUIRE(tt_expect_ok(on, rc));
	WT_STR_CONTAINS(tt_output(on, "err"), "Sanity Checking: 2/2 validation batches");
	rc = tt_weft(off, "fit", "--config", "pp.yaml", nm_off, devices, strategy,
		     "--trainer.num_sanity_val_steps=0");
	WT_REQUIRE(tt_expect_ok(off, rc));
	snprintf(a, sizeof(a), "runs/%s/version_0/metrics.csv", on);
	snprintf(b, sizeof(b), "runs/%s/version_0/metrics.csv", off);
	WT_CHECK(tt_same_file(tt_path(a), tt_path(b)));
}

int main(void)
{
	char *s;
	int rc;

	tt_scratch("train_sanity_fastdev");
	tt_make_npy_dataset(128, 16, 4); /* 4 validation batches of 8 */
	tt_write_text(tt_path("s.yaml"), yaml);

	rc = tt_weft("dflt", "fit", "--config", "s.yaml", "--trainer.name=dflt");
	WT_REQUIRE(tt_expect_ok("dflt", rc));
	WT_STR_CONTAINS(tt_output("dflt", "err"), "Sanity Checking: 2/2 validation batches");
	rc = tt_weft("off", "fit", "--config", "s.yaml", "--trainer.name=off",
		     "--trainer.num_sanity_val_steps=0");
	WT_REQUIRE(tt_expect_ok("off", rc));
	WT_CHECK(!strstr(tt_output("off", "err"), "Sanity Checking"));
	WT_CHECK(tt_same_file(tt_path("runs/dflt/version_0/metrics.csv"),
			      tt_path("runs/off/version_0/metrics.csv")));
	rc = tt_weft("all", "fit", "--config", "s.yaml", "--trainer.name=all",
		     "--trainer.num_sanity_val_steps=-1", "--trainer.max_steps=1");
	WT_REQUIRE(tt_expect_ok("all", rc));
	WT_STR_CONTAINS(tt_output("all", "err"), "Sanity Checking: 4/4 validation batches");
	rc = tt_weft("neg", "fit", "--config", "s.yaml", "--trainer.num_sanity_val_steps=-2");
	WT_CHECK(rc == 1);
	WT_STR_CONTAINS(tt_output("neg", "err"), "must be a number of batches >= 0, or -1");

	rc = tt_weft("fd1", "fit", "--config", "s.yaml", "--trainer.name=fd1",
		     "--trainer.fast_dev_run=true");
	WT_REQUIRE(tt_expect_ok("fd1", rc));
	s = tt_read(tt_path("runs/fd1/version_0/summary.json"), NULL);
	WT_REQUIRE(s);
	WT_STR_CONTAINS(s, "\"steps\": 1,");
	WT_STR_CONTAINS(s, "\"val_loss\"");
	free(s);
	WT_CHECK(!tt_exists(tt_path("runs/fd1/version_0/metrics.csv")));
	WT_CHECK(!tt_exists(tt_path("runs/fd1/version_0/checkpoints")));
	WT_CHECK(!strstr(tt_output("fd1", "err"), "Sanity Checking"));
	WT_STR_CONTAINS(tt_output("fd1", "err"), "fast_dev_run: 1 training and 1 validation batch,");
	rc = tt_weft("fd3", "fit", "--config", "s.yaml", "--trainer.name=fd3",
		     "--trainer.fast_dev_run=3");
	WT_REQUIRE(tt_expect_ok("fd3", rc));
	s = tt_read(tt_path("runs/fd3/version_0/summary.json"), NULL);
	WT_REQUIRE(s);
	WT_STR_CONTAINS(s, "\"steps\": 3,");
	free(s);

	if (tt_exists("/usr/share/games/fortunes/fortunes")) {
		tt_write_text(tt_path("pp.yaml"), pp_yaml);
		pipeline_case("pp", "--trainer.devices=2", "--trainer.strategy=pp");
		pipeline_case("hybrid", "--trainer.devices=4",
			      "--trainer.strategy={name: hybrid, dp: 2, pp: 2}");
	} else {
		printf("pipeline cases skipped: /usr/share/games/fortunes/fortunes is missing "
		       "(apt-get install fortunes-min)\n");
	}
	tt_cleanup();
	return wt_done("test_train_sanity_fastdev");
}
