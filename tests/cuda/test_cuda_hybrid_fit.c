/* Strategy hybrid, dp 2 x pp 2 and tp 2 x pp 2, on CUDA (plugins/
 * strategies/pp/pp_dp.c: the dp group's average and zero_1's gather on
 * device buffers; pp_tp.c: tp shards as stages, the clipping norm of whole
 * and split parameters summed apart on the device), on a GPU
 * or under the CUDA emulator: `weft fit` of a small GPT (2 blocks, one per
 * stage) on 4
 * ranks over comm gloo (which stages the device buffers through host
 * memory), gpipe and 1f1b with dp_strategy ddp, 1f1b with zero_1, and
 * tp 2 x pp 2 with 1f1b, 4 micro-batches, 3 steps with AdamW and gradient clipping at 0.5; every
 * step's train loss and gradient norm within 1e-5 relative of the same
 * run on accelerator: cpu.
 * Why 1e-5: both runs are F32 and step the optimizer with the same
 * rounding (optim_step is bit-identical to the plugin); they differ only
 * in the order of the GEMMs' and the norm's sums (~1e-7 relative per
 * value after 2 updates). A defect does not hide under it: gradients not
 * averaged over the replicas (each replica then steps on its own rows),
 * averaged before the tied embedding's sum was written, a zero_1 shard
 * gathered from a stale buffer or not copied back each move the loss of
 * step 2 or 3 by 1e-4 or more at lr 3e-3; under tp a norm that counts
 * the whole parameters once per tp rank, or misses the split ones' other
 * shards, moves the clipped norm (reported every step) by far more.
 * The rows and the comparison: fit_table.h.
 * Skips (77) without a GPU. */
#include "fit_table.h"

/* 2 blocks: one per pipeline stage (schedules gpipe and 1f1b, 2 stages) */
#define MODEL "class: gpt, n_layer: 2, n_head: 2, n_embd: 16, vocab_size: 256, bias: true"

static const ft_row rows[] = {
	{ .name = "hybrid_dp2_gpipe_ddp", .devices = 4, .model = MODEL, .accumulate = 4,
	  .falls = 1,
	  .strategy = "{name: hybrid, dp: 2, tp: 1, pp: 2, schedule: gpipe, dp_strategy: ddp}" },
	{ .name = "hybrid_dp2_1f1b_ddp", .devices = 4, .model = MODEL, .accumulate = 4,
	  .falls = 1,
	  .strategy = "{name: hybrid, dp: 2, tp: 1, pp: 2, schedule: 1f1b, dp_strategy: ddp}" },
	{ .name = "hybrid_dp2_1f1b_zero_1", .devices = 4, .model = MODEL, .accumulate = 4,
	  .falls = 1,
	  .strategy = "{name: hybrid, dp: 2, tp: 1, pp: 2, schedule: 1f1b, dp_strategy: zero_1}" },
	{ .name = "hybrid_tp2_1f1b", .devices = 4, .model = MODEL, .accumulate = 4, .falls = 1,
	  .strategy = "{name: hybrid, dp: 1, tp: 2, pp: 2, schedule: 1f1b, dp_strategy: ddp}" },
};

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_hybrid_fit_XXXXXX", corpus[256];

	ct_setup("test_cuda_hybrid_fit");
	ct_teardown();
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	ft_check_rows(dir, corpus, rows, sizeof(rows) / sizeof(rows[0]));
	ct_finish_dir(dir);
	return wt_done("test_cuda_hybrid_fit");
}
