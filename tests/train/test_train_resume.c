/* Exact resume: a run stopped at step k and resumed reaches step n with the
 * bytes of an unbroken run, weights and optimizer state alike.
 *
 * Cases (each compares checkpoints/last of the unbroken and the resumed run
 * byte for byte: model.safetensors, optimizer.bin, and the training
 * position in trainer_state.json):
 *   1. MLP, shuffled sampler, stopped mid-epoch by max_steps (k = 17 of
 *      12-step epochs), continued with `resume: auto`;
 *   2. the same with accumulate_grad_batches 2 (k = 5 optimizer steps = 10
 *      micro-batches, mid-epoch);
 *   3. a rank killed (SIGKILL via WEFT_FAULT_KILL_AT_STEP) after step 11 with
 *      saves every 5 steps, resumed from the step-10 save (mid-epoch); cosine schedule
 *      with warm-up, so the schedule position must come back too;
 *   4. a tiny GPT with dropout 0.1, random windows, cosine schedule and
 *      validation inside epochs (validation steps also advance the tensor
 *      context's step counter, which keyed the dropout masks before the
 *      trainer set it from the global step), resumed from a mid-epoch save;
 *   5. early stopping: its best score and patience count survive a resume,
 *      so the resumed run stops at the unbroken run's step;
 *   6. ddp on 2 processes over gloo (each rank writes its slice of
 *      optimizer.bin), stopped at step 5 and resumed with `resume: auto`
 *      (skipped when the gloo plugin was not built).
 * No tolerance: the claim is bit-identity, so any difference fails.
 */
#include "train_test.h"

static const char *mlp_yaml =
	"seed_everything: 7\n"
	"trainer:\n"
	"  max_epochs: 3\n"
	"  log_every_n_steps: 5\n"
	"  enable_progress_bar: false\n"
	"model: {class: mlp, in_features: 16, hidden: [32], out_features: 4, dropout: 0.1}\n"
	"data:\n"
	"  class: npy\n"
	"  x: x.npy\n"
	"  y: y.npy\n"
	"  batch_size: 32\n"
	"  shuffle: true\n"
	"  val_fraction: 0.25\n"
	"optimizer: {name: adamw, lr: 1.0e-2, weight_decay: 0.01}\n";

static const char *gpt_yaml =
	"seed_everything: 3\n"
	"trainer:\n"
	"  max_steps: 24\n"
	"  val_check_interval: 5\n"
	"  limit_val_batches: 2\n"
	"  log_every_n_steps: 4\n"
	"  enable_progress_bar: false\n"
	"  gradient_clip_val: 1.0\n"
	"  callbacks:\n"
	"    model_checkpoint: {every_n_train_steps: 10, save_top_k: -1}\n"
	"model: {class: gpt, n_layer: 1, n_head: 2, n_embd: 32, vocab_size: 256, block_size: 32,\n"
	"        bias: false, dropout: 0.1}\n"
	"data:\n"
	"  class: text\n"
	"  paths: [corpus.txt]\n"
	"  block_size: 32\n"
	"  batch_size: 8\n"
	"  batches_per_epoch: 7\n"
	"optimizer: {name: adamw, lr: 3.0e-3}\n"
	"lr_scheduler: {name: cosine, warmup_steps: 5}\n";

/* Compares checkpoints/last of two versions of run `name`. */
static void same_last(const char *name, int va, int vb, const char *what)
{
	static const char *const files[] = { "model.safetensors", "optimizer.bin" };
	char a[TT_PATH], b[TT_PATH];

	for (size_t i = 0; i < 2; i++) {
		snprintf(a, sizeof(a), "%s", tt_path("runs/%s/version_%d/checkpoints/last/%s", name,
						     va, files[i]));
		snprintf(b, sizeof(b), "%s", tt_path("runs/%s/version_%d/checkpoints/last/%s", name,
						     vb, files[i]));
		if (!tt_same_file(a, b)) {
			wt_failures++;
			fprintf(stderr, "%s: %s differs between the unbroken run (version_%d) and the "
				"resumed one (version_%d)\n", what, files[i], va, vb);
		}
		wt_checks++;
	}
	/* the same position: global_step, epoch, next_batch lines */
	{
		char *sa = tt_read(tt_path("runs/%s/version_%d/checkpoints/last/trainer_state.json",
					   name, va), NULL);
		char *sb = tt_read(tt_path("runs/%s/version_%d/checkpoints/last/trainer_state.json",
					   name, vb), NULL);
		const char *keys[] = { "\"global_step\"", "\"epoch\"", "\"next_batch\"" };

		WT_REQUIRE(sa && sb);
		for (size_t i = 0; i < 3; i++) {
			const char *pa = strstr(sa, keys[i]), *pb = strstr(sb, keys[i]);

			WT_CHECK(pa && pb && strtoll(strchr(pa, ':') + 1, NULL, 10) ==
						     strtoll(strchr(pb, ':') + 1, NULL, 10));
		}
		free(sa);
		free(sb);
	}
}

static void mlp_cases(void)
{
	int rc;

	tt_make_npy_dataset(512, 16, 4); /* 384 train rows: 12 batches of 32 per epoch */
	tt_write_text(tt_path("mlp.yaml"), mlp_yaml);

	/* 1. stopped mid-epoch 2 (step 17 = epoch 1, batch 5), resume: auto */
	rc = tt_weft("m0", "fit", "--config", "mlp.yaml");
	WT_REQUIRE(tt_expect_ok("m0", rc));
	rc = tt_weft("m1", "fit", "--config", "mlp.yaml", "--trainer.max_steps=17");
	WT_REQUIRE(tt_expect_ok("m1", rc));
	rc = tt_weft("m2", "fit", "--config", "mlp.yaml", "--trainer.resume=auto");
	WT_REQUIRE(tt_expect_ok("m2", rc));
	WT_STR_CONTAINS(tt_output("m2", "err"), "resumed from runs/mlp/version_1/checkpoints/last "
						"at step 17 (epoch 1)");
	same_last("mlp", 0, 2, "MLP, shuffled, stopped at step 17");

	/* 2. accumulate_grad_batches 2: 6 steps per epoch, stop at 5 */
	rc = tt_weft("a0", "fit", "--config", "mlp.yaml", "--trainer.accumulate_grad_batches=2");
	WT_REQUIRE(tt_expect_ok("a0", rc));
	rc = tt_weft("a1", "fit", "--config", "mlp.yaml", "--trainer.accumulate_grad_batches=2",
		     "--trainer.max_steps=5");
	WT_REQUIRE(tt_expect_ok("a1", rc));
	rc = tt_weft("a2", "fit", "--config", "mlp.yaml", "--trainer.accumulate_grad_batches=2",
		     "--trainer.resume=auto");
	WT_REQUIRE(tt_expect_ok("a2", rc));
	WT_STR_CONTAINS(tt_output("a2", "err"), "at step 5 (epoch 0)");
	same_last("mlp", 3, 5, "MLP, accumulate_grad_batches 2, stopped at step 5");

	/* 3. killed after step 11; saves every 5 steps; cosine with warm-up over
	 * the full 36 steps in both runs */
	rc = tt_weft("k0", "fit", "--config", "mlp.yaml", "--trainer.name=kill",
		     "--lr_scheduler={name: cosine, warmup_steps: 6}",
		     "--trainer.callbacks={model_checkpoint: {every_n_train_steps: 5}}");
	WT_REQUIRE(tt_expect_ok("k0", rc));
	rc = tt_weft_env("k1", "WEFT_FAULT_KILL_AT_STEP=11", "fit", "--config", "mlp.yaml",
			 "--trainer.name=kill", "--lr_scheduler={name: cosine, warmup_steps: 6}",
			 "--trainer.callbacks={model_checkpoint: {every_n_train_steps: 5}}",
			 (const char *)NULL);
	WT_CHECK(rc == 128 + 9);
	WT_CHECK(!tt_exists(tt_path("runs/kill/version_1/checkpoints/last")));
	rc = tt_weft("k2", "fit", "--config", "mlp.yaml", "--trainer.name=kill",
		     "--lr_scheduler={name: cosine, warmup_steps: 6}",
		     "--trainer.callbacks={model_checkpoint: {every_n_train_steps: 5}}",
		     "--trainer.resume=auto");
	WT_REQUIRE(tt_expect_ok("k2", rc));
	WT_STR_CONTAINS(tt_output("k2", "err"), "version_1/checkpoints/epoch=0-step=10 at step 10");
	same_last("kill", 0, 2, "MLP killed after step 11, cosine schedule");
}

static void gpt_case(void)
{
	int rc;

	tt_make_text(30000);
	tt_write_text(tt_path("gpt.yaml"), gpt_yaml);
	rc = tt_weft("g0", "fit", "--config", "gpt.yaml");
	WT_REQUIRE(tt_expect_ok("g0", rc));
	/* step 10 is batch 3 of epoch 1 (7 batches per epoch); validation ran
	 * at steps 5 and 10 (and at the end of epoch 0) before it */
	rc = tt_weft("g1", "fit", "--config", "gpt.yaml",
		     "--trainer.resume=runs/gpt/version_0/checkpoints/epoch=1-step=10");
	WT_REQUIRE(tt_expect_ok("g1", rc));
	WT_STR_CONTAINS(tt_output("g1", "err"), "at step 10 (epoch 1)");
	same_last("gpt", 0, 1, "GPT with dropout, resumed at step 10");
}

/* Early stopping with min_delta 10 (no validation can improve by that):
 * the first check sets the best, the next is bad, and patience 1 stops
 * there (Lightning's rule: the wait count reached patience), at the end of
 * epoch 1 (step 24). The resumed run starts at step 18, after the first
 * check; it must stop at step 24 as well. */
static void early_stop_case(void)
{
	const char *es = "--trainer.callbacks={early_stopping: {monitor: val_loss, patience: 1, "
			 "min_delta: 10.0}, model_checkpoint: {every_n_train_steps: 18, save_top_k: -1}}";
	char *s0, *s1;
	int rc;

	rc = tt_weft("e0", "fit", "--config", "mlp.yaml", "--trainer.name=es",
		     "--trainer.max_epochs=10", es);
	WT_REQUIRE(tt_expect_ok("e0", rc));
	WT_STR_CONTAINS(tt_output("e0", "err"), "early stopping");
	rc = tt_weft("e1", "fit", "--config", "mlp.yaml", "--trainer.name=es",
		     "--trainer.max_epochs=10", es,
		     "--trainer.resume=runs/es/version_0/checkpoints/epoch=1-step=18");
	WT_REQUIRE(tt_expect_ok("e1", rc));
	s0 = tt_read(tt_path("runs/es/version_0/summary.json"), NULL);
	s1 = tt_read(tt_path("runs/es/version_1/summary.json"), NULL);
	WT_REQUIRE(s0 && s1);
	WT_STR_CONTAINS(s0, "\"steps\": 24,");
	WT_STR_CONTAINS(s1, "\"steps\": 24,");
	free(s0);
	free(s1);
	same_last("es", 0, 1, "early stopping across a resume");
}

static void ddp_case(void)
{
	const char *pd = getenv("WEFT_PLUGIN_DIR");
	char gloo[TT_PATH];
	int rc;

	snprintf(gloo, sizeof(gloo), "%s/comm_gloo.so", pd ? pd : "");
	if (!pd || !tt_exists(gloo)) {
		fprintf(stderr, "ddp case skipped: %s was not built\n", gloo);
		return;
	}
	rc = tt_weft("d0", "fit", "--config", "mlp.yaml", "--trainer.name=ddp",
		     "--trainer.devices=2", "--trainer.strategy=ddp", "--trainer.max_epochs=2");
	WT_REQUIRE(tt_expect_ok("d0", rc));
	rc = tt_weft("d1", "fit", "--config", "mlp.yaml", "--trainer.name=ddp",
		     "--trainer.devices=2", "--trainer.strategy=ddp", "--trainer.max_epochs=2",
		     "--trainer.max_steps=5");
	WT_REQUIRE(tt_expect_ok("d1", rc));
	rc = tt_weft("d2", "fit", "--config", "mlp.yaml", "--trainer.name=ddp",
		     "--trainer.devices=2", "--trainer.strategy=ddp", "--trainer.max_epochs=2",
		     "--trainer.resume=auto");
	WT_REQUIRE(tt_expect_ok("d2", rc));
	WT_STR_CONTAINS(tt_output("d2", "err"), "at step 5 (epoch 0)");
	same_last("ddp", 0, 2, "ddp on 2 ranks, stopped at step 5");
}

int main(void)
{
	double t0 = tt_now();

	tt_scratch("weft_train_resume");
	mlp_cases();
	gpt_case();
	early_stop_case();
	ddp_case();
	fprintf(stderr, "resume cases took %.1f s\n", tt_now() - t0);
	tt_cleanup();
	return wt_done("test_train_resume");
}
