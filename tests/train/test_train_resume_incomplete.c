/* resume: auto skips an incomplete checkpoint folder and takes the newest
 * complete one, with a warning that names the folder and why.
 *
 * The incomplete folders are the state an interrupted save_top_k removal
 * left before removals renamed the folder away first: a checkpoint's
 * folder with some of its files deleted.
 *   1. the newest save (epoch=2-step=36) lost model.safetensors and
 *      optimizer.bin (manifest.json still lists them): the run resumes from
 *      epoch=1-step=24 beside it;
 *   2. every save of the newest version lost manifest.json: the run falls
 *      back to the newest complete save of the version before;
 *   3. save_top_k 1 through a whole run leaves exactly the kept save and
 *      `last` in checkpoints/: nothing half-deleted, nothing hidden.
 * Steps are exact integers: no tolerance applies.
 */
#include <dirent.h>

#include "train_test.h"

static const char *yaml =
	"seed_everything: 5\n"
	"trainer:\n"
	"  name: r\n"
	"  max_epochs: 3\n"
	"  enable_progress_bar: false\n"
	"  callbacks:\n"
	"    model_checkpoint: {monitor: val_loss, save_top_k: -1, save_last: false}\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 32, val_fraction: 0.25}\n"
	"optimizer: {name: adamw, lr: 0.01}\n";

static void rm(const char *path)
{
	if (unlink(path) != 0) {
		wt_failures++;
		fprintf(stderr, "cannot remove '%s': %s\n", path, strerror(errno));
	}
}

/* `dir` holds exactly the entries `a` and `b` (hidden ones count). */
static void only_entries(const char *dir, const char *a, const char *b)
{
	struct dirent *e;
	DIR *d = opendir(dir);
	int n = 0;

	WT_REQUIRE(d);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		n++;
		if (strcmp(e->d_name, a) != 0 && strcmp(e->d_name, b) != 0) {
			wt_failures++;
			fprintf(stderr, "'%s' holds '%s'; only '%s' and '%s' expected\n", dir,
				e->d_name, a, b);
		}
	}
	closedir(d);
	WT_CHECK(n == 2);
}

int main(void)
{
	const char *err;
	int rc;

	tt_scratch("weft_resume_incomplete");
	tt_make_npy_dataset(512, 16, 4); /* 384 train rows: 12 batches of 32 per epoch */
	tt_write_text(tt_path("r.yaml"), yaml);

	rc = tt_weft("r0", "fit", "--config", "r.yaml");
	WT_REQUIRE(tt_expect_ok("r0", rc));
	WT_REQUIRE(tt_exists(tt_path("runs/r/version_0/checkpoints/epoch=1-step=24/manifest.json")));

	/* 1. the newest save half-deleted, manifest.json left */
	rm(tt_path("runs/r/version_0/checkpoints/epoch=2-step=36/model.safetensors"));
	rm(tt_path("runs/r/version_0/checkpoints/epoch=2-step=36/optimizer.bin"));
	rc = tt_weft("r1", "fit", "--config", "r.yaml", "--trainer.max_epochs=4",
		     "--trainer.resume=auto");
	WT_REQUIRE(tt_expect_ok("r1", rc));
	err = tt_output("r1", "err");
	WT_STR_CONTAINS(err, "resume: auto skips 'runs/r/version_0/checkpoints/epoch=2-step=36': "
			     "model.safetensors is listed in manifest.json but missing");
	WT_STR_CONTAINS(err, "taking the newest complete checkpoint instead");
	WT_STR_CONTAINS(err, "resumed from runs/r/version_0/checkpoints/epoch=1-step=24 at step 24 "
			     "(epoch 2)");
	WT_CHECK(tt_exists(tt_path("runs/r/version_1/checkpoints/epoch=3-step=48/manifest.json")));

	/* 2. every save of version_1 lost manifest.json (deleted first) */
	rm(tt_path("runs/r/version_1/checkpoints/epoch=2-step=36/manifest.json"));
	rm(tt_path("runs/r/version_1/checkpoints/epoch=3-step=48/manifest.json"));
	rc = tt_weft("r2", "fit", "--config", "r.yaml", "--trainer.max_epochs=4",
		     "--trainer.resume=auto");
	WT_REQUIRE(tt_expect_ok("r2", rc));
	err = tt_output("r2", "err");
	WT_STR_CONTAINS(err, "skips 'runs/r/version_1/checkpoints/epoch=3-step=48': it has no "
			     "manifest.json");
	WT_STR_CONTAINS(err, "skips 'runs/r/version_1/checkpoints/epoch=2-step=36': it has no "
			     "manifest.json");
	WT_STR_CONTAINS(err, "skips 'runs/r/version_0/checkpoints/epoch=2-step=36'");
	WT_STR_CONTAINS(err, "resumed from runs/r/version_0/checkpoints/epoch=1-step=24 at step 24");

	/* 3. save_top_k 1 removes whole saves: only the kept one and last stay */
	rc = tt_weft("k0", "fit", "--config", "r.yaml", "--trainer.name=k",
		     "--trainer.callbacks={model_checkpoint: {save_top_k: 1}}");
	WT_REQUIRE(tt_expect_ok("k0", rc));
	only_entries(tt_path("runs/k/version_0/checkpoints"), "epoch=2-step=36", "last");

	tt_cleanup();
	return wt_done("test_train_resume_incomplete");
}
