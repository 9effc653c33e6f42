/* `weft fit` of a Llama (model.preset llama3-tiny: RMSNorm, RoPE with
 * Llama 3's scaling, SwiGLU, 4 query heads on 2 KV heads) on CUDA, on a
 * GPU or under the CUDA emulator: 1 block, context 8, 2 ranks over comm
 * gloo with ddp and with zero_1, 32-true, 3 steps with AdamW and gradient
 * clipping at 0.5; every step's train loss and gradient norm within 1e-5
 * relative of the same run on accelerator: cpu, and the loss falls.
 * Why 1e-5: as for the GPT rows (test_cuda_zero_fit): both runs are F32
 * and step the optimizer with the same rounding; they differ only in the
 * order of sums (~1e-7 relative after 2 updates). A Llama kernel that
 * is wrong on the device (a rotation by the wrong angle or on the wrong
 * pairs, an RMS over the wrong width, the gate and up halves swapped, a
 * KV head shared by the wrong query heads) changes the forward loss of
 * step 1 by far more than 1e-5, and a backward that is wrong moves the
 * gradient norm of step 1 and the losses after it.
 * Skips (77) without a GPU. */
#include "fit_table.h"

#define LLAMA "preset: llama3-tiny, n_layer: 1"

static const ft_row rows[] = {
	{ .name = "llama_ddp", .model = LLAMA, .falls = 1,
	  .strategy = "{name: ddp, bucket_cap_mb: 0.004, first_bucket_mb: 0.002}" },
	{ .name = "llama_zero_1", .model = LLAMA, .falls = 1,
	  .strategy = "{name: zero_1, reduce_bucket_size: 1000, allgather_bucket_size: 1000}" },
};

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_llama_fit_XXXXXX", corpus[256];

	ct_setup("test_cuda_llama_fit");
	ct_teardown();
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	ft_check_rows(dir, corpus, rows, sizeof(rows) / sizeof(rows[0]));
	ct_finish_dir(dir);
	return wt_done("test_cuda_llama_fit");
}
