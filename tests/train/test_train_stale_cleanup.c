/* `weft fit` cleans, at start, what interrupted checkpoint saves and
 * removals left in the checkpoints/ folders of its run name:
 *   - `<save>.tmp-<pid>` (a kill during a save: a full-size copy),
 *     `.<save>.del-<pid>` (a kill during a save_top_k removal) and
 *     `last.old-<pid>` of a process that is gone are removed, with a line
 *     saying how many and where;
 *   - the same leftover of a process still running (it may be writing) is
 *     kept, and removed by the first start after that process ended;
 *   - resume: auto cleans the same way and still resumes;
 *   - complete checkpoints are never touched.
 * Counts are exact: no tolerance applies.
 */
#include <signal.h>

#include "train_test.h"

static const char *yaml =
	"seed_everything: 2\n"
	"trainer:\n"
	"  name: c\n"
	"  max_epochs: 2\n"
	"  enable_progress_bar: false\n"
	"model: {class: mlp, in_features: 16, hidden: [8], out_features: 4}\n"
	"data: {class: npy, x: x.npy, y: y.npy, batch_size: 32, val_fraction: 0.25}\n"
	"optimizer: {name: adamw, lr: 0.01}\n";

/* A leftover folder as an interrupted save leaves it: the checkpoint's
 * weights copied in, no manifest. */
static void leftover(const char *name, long pid)
{
	char rel[256], p[TT_PATH];
	size_t len = 0;
	char *w;

	snprintf(rel, sizeof(rel), "runs/c/version_0/checkpoints/%s%ld", name, pid);
	snprintf(p, sizeof(p), "%s", tt_path("%s", rel));
	WT_REQUIRE(mkdir(p, 0777) == 0);
	w = tt_read(tt_path("runs/c/version_0/checkpoints/last/model.safetensors"), &len);
	WT_REQUIRE(w);
	tt_write(tt_path("%s/model.safetensors", rel), w, len);
	free(w);
}

static int left(const char *name, long pid)
{
	return tt_exists(tt_path("runs/c/version_0/checkpoints/%s%ld", name, pid));
}

int main(void)
{
	pid_t dead, live;
	int rc, status;

	tt_scratch("weft_stale_cleanup");
	tt_make_npy_dataset(512, 16, 4);
	tt_write_text(tt_path("c.yaml"), yaml);
	rc = tt_weft("c0", "fit", "--config", "c.yaml");
	WT_REQUIRE(tt_expect_ok("c0", rc));

	/* a pid that ran and is gone, and a process that runs on */
	dead = fork();
	WT_REQUIRE(dead >= 0);
	if (dead == 0)
		_exit(0);
	waitpid(dead, &status, 0);
	live = fork();
	WT_REQUIRE(live >= 0);
	if (live == 0) {
		pause();
		_exit(0);
	}
	leftover("epoch=0-step=12.tmp-", dead);
	leftover("last.tmp-", dead);
	leftover(".epoch=0-step=12.del-", dead);
	leftover("last.old-", dead);
	leftover("epoch=1-step=24.tmp-", live);

	rc = tt_weft("c1", "fit", "--config", "c.yaml");
	WT_REQUIRE(tt_expect_ok("c1", rc));
	WT_STR_CONTAINS(tt_output("c1", "err"), "removed 4 folders left in "
						"runs/c/version_0/checkpoints by interrupted "
						"checkpoint saves");
	WT_CHECK(!left("epoch=0-step=12.tmp-", dead));
	WT_CHECK(!left("last.tmp-", dead));
	WT_CHECK(!left(".epoch=0-step=12.del-", dead));
	WT_CHECK(!left("last.old-", dead));
	WT_CHECK(left("epoch=1-step=24.tmp-", live));
	WT_CHECK(tt_exists(tt_path("runs/c/version_0/checkpoints/last/manifest.json")));
	WT_CHECK(tt_exists(tt_path("runs/c/version_0/checkpoints/epoch=1-step=24/manifest.json")));

	/* its writer gone, the next start (a resume) removes it too */
	kill(live, SIGKILL);
	waitpid(live, &status, 0);
	rc = tt_weft("c2", "fit", "--config", "c.yaml", "--trainer.max_epochs=3",
		     "--trainer.resume=auto");
	WT_REQUIRE(tt_expect_ok("c2", rc));
	WT_STR_CONTAINS(tt_output("c2", "err"), "removed 1 folder left in "
						"runs/c/version_0/checkpoints");
	WT_STR_CONTAINS(tt_output("c2", "err"), "resumed from runs/c/version_1/checkpoints/last "
						"at step 24");
	WT_CHECK(!left("epoch=1-step=24.tmp-", live));

	tt_cleanup();
	return wt_done("test_train_stale_cleanup");
}
