/* Pipeline parallelism (strategy pp) on CUDA, on a GPU or under the CUDA
 * emulator: `weft fit` of a small GPT (a block per stage: 2, and 4 for
 * interleaved) on 2 pipeline ranks over
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
 * The rows and the comparison: fit_table.h.
 * Skips (77) without a GPU. */
#include "fit_table.h"

/* 2 blocks for 2 stages (gpipe, 1f1b); 4 for interleaved_1f1b's 4 */
#define MODEL2 "class: gpt, n_layer: 2, n_head: 2, n_embd: 16, vocab_size: 256, bias: true"
#define MODEL4 "class: gpt, n_layer: 4, n_head: 2, n_embd: 16, vocab_size: 256, bias: true"

static const ft_row rows[] = {
	{ .name = "pp_gpipe_cuda", .model = MODEL2, .accumulate = 4, .falls = 1,
	  .strategy = "{name: pp, pp: 2, schedule: gpipe, virtual_stages: 1}" },
	{ .name = "pp_1f1b_cuda", .model = MODEL2, .accumulate = 4, .falls = 1,
	  .strategy = "{name: pp, pp: 2, schedule: 1f1b, virtual_stages: 1}" },
	{ .name = "pp_interleaved_1f1b_cuda", .model = MODEL4, .accumulate = 4, .falls = 1,
	  .strategy = "{name: pp, pp: 2, schedule: interleaved_1f1b, virtual_stages: 2}" },
};

/* the resumed run's configuration, and lion's (no device kernel) */
static const ft_row resume = { .name = "resume", .model = MODEL2, .accumulate = 4,
			       .strategy = "{name: pp, pp: 2, schedule: 1f1b}" };
static const ft_row lion = { .name = "lion_cuda", .model = MODEL2, .accumulate = 4,
			     .strategy = "{name: pp, pp: 2}",
			     .optimizer = "{name: lion, lr: 1.0e-4}" };

/* The optimizer state leaves the device for a checkpoint (a host mirror)
 * and goes back on resume: 3 steps on cuda, a checkpoint, a resumed run
 * to step 5, against 5 steps on the CPU (losses within 1e-5: a state slot
 * lost or not uploaded moves step 4's loss by 1e-3 at lr 3e-3). */
static void test_resume(const char *dir, const char *corpus)
{
	double cl[5], cn[5], gl[5], gn[5];
	int nc, ng;

	WT_REQUIRE(ft_write_config(dir, "resume", corpus, &resume) == 0);
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

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_pp_fit_XXXXXX", corpus[256];

	ct_setup("test_cuda_pp_fit");
	ct_teardown();
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	ft_check_rows(dir, corpus, rows, sizeof(rows) / sizeof(rows[0]));
	test_resume(dir, corpus);
	/* an optimizer without a device kernel: one clear refusal */
	ft_check_refused(dir, corpus, &lion,
			 "strategy 'pp' on accelerator: cuda steps the optimizer",
			 "use optimizer adam, adamw or sgd, or accelerator: cpu");
	ct_finish_dir(dir);
	return wt_done("test_cuda_pp_fit");
}
