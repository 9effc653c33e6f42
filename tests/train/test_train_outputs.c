/* What a run writes, switched as Lightning's Trainer switches it:
 *   - trainer.logger: csv writes metrics.csv and no TensorBoard file;
 *     tensorboard the reverse; [csv, tensorboard] (and the default) both;
 *     false neither (and no hparams.yaml);
 *   - hparams.yaml in the run directory holds the resolved model, data,
 *     optimizer and lr_scheduler sections and nothing of the trainer;
 *   - enable_model_summary: false leaves out the model summary table;
 *   - a logger that does not exist is one clear error at its position.
 * No tolerance: presence and text.
 */
#include <dirent.h>

#include "train_test.h"

static const char *yaml =
	"seed_everything: 6\n"
	"trainer:\n"
	"  max_steps: 3\n"
	"  enable_progress_bar: false\n"
	"  enable_checkpointing: false\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 8, val_fraction: 0.25}\n"
	"optimizer: {name: sgd, lr: 1.0e-2}\n"
	"lr_scheduler: {name: cosine, warmup_steps: 1}\n";

/* 1 when run directory `dir` holds a TensorBoard events file. */
static int has_events(const char *dir)
{
	DIR *d = opendir(tt_path("%s", dir));
	struct dirent *e;
	int found = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "events.out.tfevents.", 20))
			found = 1;
	closedir(d);
	return found;
}

static void run(const char *tag, const char *logger, int csv, int tb)
{
	char dir[256], flag[128];
	int rc;

	snprintf(flag, sizeof(flag), "--trainer.logger=%s", logger);
	snprintf(dir, sizeof(dir), "runs/%s/version_0", tag);
	rc = tt_weft(tag, "fit", "--config", "o.yaml", flag, "--trainer.name", tag,
		     "--trainer.enable_model_summary=false");
	WT_REQUIRE(tt_expect_ok(tag, rc));
	WT_CHECK(tt_exists(tt_path("%s/metrics.csv", dir)) == csv);
	WT_CHECK(has_events(dir) == tb);
	WT_CHECK(tt_exists(tt_path("%s/hparams.yaml", dir)) == (csv || tb));
	WT_CHECK(!strstr(tt_output(tag, "err"), "Trainable params"));
}

int main(void)
{
	char *hp;
	int rc;

	tt_scratch("train_outputs");
	tt_make_npy_dataset(128, 16, 4);
	tt_write_text(tt_path("o.yaml"), yaml);
	run("csv", "csv", 1, 0);
	run("tb", "tensorboard", 0, 1);
	run("both", "[csv, tensorboard]", 1, 1);
	run("none", "false", 0, 0);

	rc = tt_weft("dflt", "fit", "--config", "o.yaml");
	WT_REQUIRE(tt_expect_ok("dflt", rc));
	WT_STR_CONTAINS(tt_output("dflt", "err"), "Trainable params");
	WT_CHECK(tt_exists(tt_path("runs/o/version_0/metrics.csv")));
	WT_CHECK(has_events("runs/o/version_0"));
	hp = tt_read(tt_path("runs/o/version_0/hparams.yaml"), NULL);
	WT_REQUIRE(hp);
	WT_STR_CONTAINS(hp, "model:\n  class: mlp\n");
	WT_STR_CONTAINS(hp, "\ndata:\n  class: npy\n");
	WT_STR_CONTAINS(hp, "\noptimizer:\n  name: sgd\n");
	WT_STR_CONTAINS(hp, "\nlr_scheduler:\n  name: cosine\n");
	WT_CHECK(!strstr(hp, "trainer:") && !strstr(hp, "seed_everything"));
	free(hp);

	rc = tt_weft("bad", "fit", "--config", "o.yaml", "--trainer.logger=wandb");
	WT_CHECK(rc == 1);
	WT_STR_CONTAINS(tt_output("bad", "err"), "is not a logger: give csv, tensorboard");
	tt_cleanup();
	return wt_done("test_train_outputs");
}
