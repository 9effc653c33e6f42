/* ZeRO stages 1, 2 and 3 on CUDA (plugins/strategies/zero through the
 * kernel table's device services), on a GPU or under the CUDA emulator:
 * `weft fit` of a small GPT on 2 ranks over comm gloo (which stages the
 * device buffers through host memory), 3 steps with AdamW and gradient
 * clipping at 0.5, logs every step's train loss and gradient norm within
 * 1e-5 relative of the same run on accelerator: cpu.
 * Why 1e-5: both runs are F32 and step the optimizer with the same
 * rounding (optim_step is bit-identical to the plugin); they differ only
 * in the order of the GEMMs' and the norm's sums (~1e-7 relative per
 * value after 2 updates: measured 4e-8). A defect does not hide under it:
 * a piece stepped twice or not at all, a bucket added to the wrong shard
 * offset, a gather of stale parameters or a clipping factor left out each
 * move the loss of step 2 or 3 by 1e-4 or more at lr 3e-3.
 * zero_3 with sgd (momentum, decay) the same way: optim_step's SGD kernel.
 * Also: lion on cuda is refused at create with one message naming the
 * optimizers that run there.
 * The rows and the comparison: fit_table.h.
 * Skips (77) without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit_table.h"

#define ZERO_3 "{name: zero_3, reduce_bucket_size: 1000, allgather_bucket_size: 1000, " \
	"stage3_param_persistence_threshold: 100, stage3_prefetch_bucket_size: 2000}"

/* AdamW rows: the reference's loss falls within the 3 steps (measured
 * 5.526 -> 5.495); SGD's 3 steps need not, so only AdamW is held to it. */
static const ft_row rows[] = {
	{ .name = "zero_1_adamw", .falls = 1,
	  .strategy = "{name: zero_1, reduce_bucket_size: 1000, allgather_bucket_size: 1000}" },
	{ .name = "zero_2_adamw", .falls = 1,
	  .strategy = "{name: zero_2, reduce_bucket_size: 1000, allgather_bucket_size: 1000}" },
	{ .name = "zero_3_adamw", .falls = 1, .strategy = ZERO_3 },
	{ .name = "zero_3_sgd", .strategy = ZERO_3, .optimizer = FT_SGD },
};

/* lion on cuda: no device kernel */
static const ft_row lion = { .name = "lion_cuda", .optimizer = "{name: lion, lr: 1.0e-4}",
			     .strategy = "{name: zero_2, reduce_bucket_size: 1000, "
					 "allgather_bucket_size: 1000}" };

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_zero_fit_XXXXXX", corpus[256];

	ct_setup("test_cuda_zero_fit");
	ct_teardown();
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	ft_check_rows(dir, corpus, rows, sizeof(rows) / sizeof(rows[0]));
	/* an optimizer without a device kernel: one clear refusal */
	ft_check_refused(dir, corpus, &lion, "optimizer 'lion' has no device kernel",
			 "use optimizer adam, adamw or sgd, or accelerator: cpu");
	ct_finish_dir(dir);
	return wt_done("test_cuda_zero_fit");
}
