/* Pipeline parallelism (strategy pp) on CUDA, on a GPU or under the CUDA
 * emulator: `weft fit` of a small GPT (4 blocks) on 2 pipeline ranks over
 * comm gloo (which stages the device message buffers through host
 * memory), gpipe and 1f1b (2 stages) and interleaved_1f1b (4 stages) with
 * 4 micro-batches, 3 steps with AdamW and
 * gradient clipping at 0.5; every step's train loss and gradient norm
 * within 1e-5 relative of the same run on accelerator: cpu.
 * Why 1e-5: both runs are F32 and step the optimizer with the same
 * rounding (optim_step is bit-identical to the plugin); they differ only
 * in the order of the GEMMs' and the norm's sums (~1e-7 relative per
 * value after 2 updates). A defect does not hide under it: a message
 * read before it was written, the tied embedding's gradient added once or
 * not at all, a stage's parameters not copied back or a clipping factor
 * left out each move the loss of step 2 or 3 by 1e-4 or more at lr 3e-3.
 * A checkpoint written on cuda resumes to the CPU run's losses.
 * Also: lion on cuda is refused at create with one message saying what
 * runs. (hybrid dp x pp on cuda: test_cuda_hybrid_fit.)
 * Skips (77) without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"

#define STEPS 3

static int write_config(const char *dir, const char *name, const char *corpus,
			const char *strategy, const char *optimizer)
{
	char path[1200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.yaml", dir, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"seed_everything: 11\n"
		"trainer:\n"
		"  accelerator: cpu\n"
		"  devices: 2\n"
		"  comm: gloo\n"
		"  strategy: %s\n"
		"  accumulate_grad_batches: 4\n"
		"  max_steps: %d\n"
		"  log_every_n_steps: 1\n"
		"  limit_val_batches: 0\n"
		"  enable_checkpointing: false\n"
		"  enable_progress_bar: false\n"
		"  gradient_clip_val: 0.5\n"
		"  default_root_dir: %s/runs\n"
		"model: {class: gpt, n_layer: 4, n_head: 2, n_embd: 16, vocab_size: 256,\n"
		"        block_size: 8, bias: true, dropout: 0.0}\n"
		"data: {class: text, paths: [%s], block_size: 8, batch_size: 2,\n"
		"       val_fraction: 0.1, shuffle: false}\n"
		"optimizer: %s\n",
		strategy, STEPS, dir, corpus, optimizer);
	return fclose(f);
}

/* The optimizer state leaves the device for a checkpoint (a host mirror)
 * and goes back on resume: 3 steps on cuda, a checkpoint, a resumed run
 * to step 5, against 5 steps on the CPU (losses within 1e-5: a state slot
 * lost or not uploaded moves step 4's loss by 1e-3 at lr 3e-3). */
static void test_resume(const char *dir, const char *corpus)
{
	double cl[5], cn[5], gl[5], gn[5];
	int nc, ng;

	WT_REQUIRE(write_config(dir, "resume", corpus, "{name: pp, pp: 2, schedule: 1f1b}",
				"{name: adamw, lr: 3.0e-3, weight_decay: 0.1}") == 0);
	WT_CHECK(ct_fit(dir, "resume", "resume", "cpu", "--trainer.max_steps=5") == 0);
	WT_CHECK(ct_fit(dir, "resume", "resume_cuda", "cuda",
			  "--trainer.enable_checkpointing=true --trainer.max_steps=3") == 0);
	WT_CHECK(ct_fit(dir, "resume", "resume_cuda", "cuda",
			  "--trainer.enable_checkpointing=true --trainer.max_steps=5 "
			  "--trainer.resume=auto") == 0);
	nc = ct_read_metrics(dir, "resume", 0, cl, cn, 5);
	ng = ct_read_metrics(dir, "resume_cuda", 1, gl, gn, 2);
	WT_CHECK(nc == 5 && ng == 2);
	for (int s = 0; s < 2 && nc == 5 && ng == 2; s++)
		WT_CLOSE(gl[s], cl[3 + s], 1e-5, 0.0);
}

static void test_schedule(const char *dir, const char *corpus, const char *schedule, int v)
{
	char cname[64], gname[64], strategy[128];
	double cl[STEPS], cn[STEPS], gl[STEPS], gn[STEPS];
	int nc, ng;

	snprintf(cname, sizeof(cname), "pp_%s_cpu", schedule);
	snprintf(gname, sizeof(gname), "pp_%s_cuda", schedule);
	snprintf(strategy, sizeof(strategy), "{name: pp, pp: 2, schedule: %s, virtual_stages: %d}",
		 schedule, v);
	WT_REQUIRE(write_config(dir, cname, corpus, strategy,
				"{name: adamw, lr: 3.0e-3, weight_decay: 0.1}") == 0);
	WT_CHECK(ct_fit(dir, cname, cname, "cpu", "") == 0);
	WT_CHECK(ct_fit(dir, cname, gname, "cuda", "") == 0);
	nc = ct_read_metrics(dir, cname, 0, cl, cn, STEPS);
	ng = ct_read_metrics(dir, gname, 0, gl, gn, STEPS);
	WT_CHECK(nc == STEPS && ng == STEPS);
	for (int s = 0; s < nc && s < ng; s++) {
		WT_CLOSE(gl[s], cl[s], 1e-5, 0.0);
		WT_CLOSE(gn[s], cn[s], 1e-5, 0.0);
	}
	/* the runs trained */
	WT_CHECK(nc == STEPS && cl[STEPS - 1] < cl[0]);
}

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_pp_fit_XXXXXX", corpus[256], log[1200];

	ct_setup("test_cuda_pp_fit");
	ct_teardown();
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	test_schedule(dir, corpus, "gpipe", 1);
	test_schedule(dir, corpus, "1f1b", 1);
	test_schedule(dir, corpus, "interleaved_1f1b", 2);
	test_resume(dir, corpus);

	/* an optimizer without a device kernel: one clear refusal */
	WT_REQUIRE(write_config(dir, "lion", corpus, "{name: pp, pp: 2}",
				"{name: lion, lr: 1.0e-4}") == 0);
	WT_CHECK(ct_fit(dir, "lion", "lion_cuda", "cuda", "") != 0);
	snprintf(log, sizeof(log), "%s/lion_cuda.log", dir);
	WT_CHECK(ct_file_has(log, "strategy 'pp' on accelerator: cuda steps the optimizer") &&
		 ct_file_has(log, "use optimizer adam, adamw or sgd, or accelerator: cpu"));
	ct_finish_dir(dir);
	return wt_done("test_cuda_pp_fit");
}
