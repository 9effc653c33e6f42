/* weft fit checks weft plan's per-rank peak before it starts the ranks:
 * against --memory SIZE a ddp run of a GPT on 2 ranks that needs more is
 * refused (exit 1) before anything runs (no run directory), with the
 * verdict naming the sizes and what to change; a bad SIZE is a usage error
 * (exit 2) naming the flag and the form; the same run with a budget it
 * fits in, with --memory off, and without --memory (the memory the machine
 * has available now) trains; without --memory a model far larger than the
 * machine is refused, naming the memory available. Skipped (77) without the gloo plugin. */
#include <stdlib.h>
#include <string.h>

#include "train_test.h"

static const char *yaml =
	"seed_everything: 5\n"
	"trainer:\n"
	"  devices: 2\n"
	"  strategy: ddp\n"
	"  max_steps: 1\n"
	"  threads: 1\n"
	"  enable_progress_bar: false\n"
	"  enable_checkpointing: false\n"
	"  limit_val_batches: 1\n"
	"model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 32, vocab_size: 256, block_size: 32,\n"
	"        bias: true, dropout: 0.0}\n"
	"data: {class: text, paths: [corpus.txt], block_size: 32, batch_size: 4,\n"
	"       val_fraction: 0.1}\n"
	"optimizer: {name: adamw, lr: 1.0e-3}\n";

int main(void)
{
	const char *pd = getenv("WEFT_PLUGIN_DIR");
	char gloo[TT_PATH];
	const char *err;
	int rc;

	snprintf(gloo, sizeof(gloo), "%s/comm_gloo.so", pd ? pd : "");
	if (!pd || !tt_exists(gloo)) {
		fprintf(stderr, "skipped: %s was not built\n", gloo);
		return 77;
	}
	tt_scratch("train_fit_memory_check");
	tt_make_text(50000);
	tt_write_text(tt_path("m.yaml"), yaml);
	rc = tt_weft("small", "fit", "--config", "m.yaml", "--trainer.name=small", "--memory",
		     "100KiB");
	err = tt_output("small", "err");
	fprintf(stderr, "%s", err);
	WT_CHECK(rc == 1);
	WT_STR_CONTAINS(err, "weft fit: refusing to start: strategy ddp on 2 ranks does not fit "
			"in --memory 100KiB per rank");
	WT_STR_CONTAINS(err, "does not fit");
	WT_STR_CONTAINS(err, "--memory off");
	WT_CHECK(!tt_exists(tt_path("runs/small")));
	rc = tt_weft("bad", "fit", "--config", "m.yaml", "--memory=lots");
	WT_CHECK(rc == 2);
	WT_STR_CONTAINS(tt_output("bad", "err"), "weft fit --memory: 'lots' is not a memory size");
	rc = tt_weft("fits", "fit", "--config", "m.yaml", "--trainer.name=fits", "--memory", "1GB");
	WT_CHECK(tt_expect_ok("fits", rc));
	rc = tt_weft("off", "fit", "--config", "m.yaml", "--trainer.name=off", "--memory=off");
	WT_CHECK(tt_expect_ok("off", rc));
	rc = tt_weft("machine", "fit", "--config", "m.yaml", "--trainer.name=machine");
	WT_CHECK(tt_expect_ok("machine", rc));
	/* without --memory, the memory available now (a 69-billion-parameter
	 * MLP, planned from its shapes in milliseconds, needs ~1.1 TB per
	 * rank under ddp) */
	rc = tt_weft("huge", "fit", "--config", "m.yaml", "--trainer.name=huge",
		     "--model={class: mlp, in_features: 16, hidden: [262144, 262144], "
		     "out_features: 4}");
	err = tt_output("huge", "err");
	WT_CHECK(rc == 1);
	WT_STR_CONTAINS(err, "weft fit: refusing to start: strategy ddp on 2 ranks does not fit "
			"in the ");
	WT_STR_CONTAINS(err, "GiB of memory this machine has available now (of ");
	WT_CHECK(!tt_exists(tt_path("runs/huge")));
	tt_cleanup();
	return wt_done("test_train_fit_memory_check");
}
