/* ddp's bf16 and fp16 comm hooks on CUDA (plugins/strategies/ddp/ddp.c:
 * the casts are the kernel table's convert on the compute stream, the
 * 16-bit buffer is device memory tagged WEFT_COMM_DEVICE_CUDA), on a GPU or
 * under the CUDA emulator: `weft fit` of a small GPT on 2 ranks over comm
 * gloo (which stages the device buffers through host memory), 3 steps with
 * AdamW, logs every step's train loss within 2e-2 relative of the same run
 * on accelerator: cpu.
 * Why 2e-2: it is the tolerance tests/strategy/test_strategy_ddp states
 * for the 16-bit hooks on the CPU (every gradient rounded to 8 or 11
 * mantissa bits). Here both runs round the same way, so they differ far
 * less (the GEMMs' sums in another order can move a gradient across a
 * rounding boundary: one 16-bit ulp on a few elements; the measured worst
 * is printed). A hook whose cast back is missing or reads the buffer
 * before the all-reduce wrote it trains on zeros or one rank's gradients
 * and fails even that bound by step 2 or 3, and without device casts the
 * cuda run is refused at create.
 * The rows and the comparison: fit_table.h.
 * Skips (77) without a GPU. */
#include "fit_table.h"

/* No clipping (the hooks' rows compare the loss alone); the reference's
 * loss falls within the 3 steps. */
static const ft_row rows[] = {
	{ .name = "ddp_bf16_cuda", .no_clip = 1, .rtol = 2e-2, .falls = 1,
	  .strategy = "{name: ddp, comm_hook: bf16, bucket_cap_mb: 0.004, first_bucket_mb: 0.002}" },
	{ .name = "ddp_fp16_cuda", .no_clip = 1, .rtol = 2e-2, .falls = 1,
	  .strategy = "{name: ddp, comm_hook: fp16, bucket_cap_mb: 0.004, first_bucket_mb: 0.002}" },
};

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_ddp_hooks_XXXXXX", corpus[256];

	ct_setup("test_cuda_ddp_hooks");
	ct_teardown();
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	ft_check_rows(dir, corpus, rows, sizeof(rows) / sizeof(rows[0]));
	ct_finish_dir(dir);
	return wt_done("test_cuda_ddp_hooks");
}
