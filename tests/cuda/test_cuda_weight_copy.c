/* The 16-bit weight copy (trainer.weight_copy) of `weft fit` on CUDA, on a
 * GPU or under the emulator: a small GPT on one device (strategy single),
 * bf16-mixed with 16-bit activations (CUDA's default), accumulate_grad_
 * batches 2, gradient clipping at 0.5, 4 steps, checkpoints every 2.
 *
 * For adamw (the fused kernel, which writes the new weights and their bf16
 * copy in one pass: logged "(fused kernel)") and for sgd with momentum
 * (host-staged: the trainer rounds the stepped weights into the copy with
 * one conversion), the run whose linear layers read the copy logs every
 * step's train loss and gradient norm as the run that rounds each weight
 * in every forward (weight_copy: false) does, to the last digit, and both
 * end with byte-identical step-4 weights; bits, because both round the
 * same F32 weights to bf16 with the same round-to-nearest-even. A copy
 * left stale by a step (a fused kernel that did not write it while saying
 * it did, a conversion skipped) gives the next forwards the previous
 * weights and parts the runs at the next step. The copy run resumed from
 * its step-2 checkpoint (the copy rebuilt from the loaded weights) logs
 * steps 3-4 as the unbroken run and ends with the same weights.
 * Skips (77) without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit_table.h"

#define STEPS 4
#define MODEL "class: gpt, n_layer: 1, n_head: 2, n_embd: 32, vocab_size: 256, bias: true"
#define CKPT "--trainer.enable_checkpointing=true " \
	     "--trainer.callbacks.model_checkpoint.every_n_train_steps=2 " \
	     "--trainer.callbacks.model_checkpoint.save_top_k=-1"

/* Whether two files hold the same bytes. */
static int same_file(const char *a, const char *b)
{
	char cmd[2600];

	snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", a, b);
	return system(cmd) == 0;
}

static void weights_path(const char *dir, const char *run, int version, int step, char *out,
			 size_t len)
{
	snprintf(out, len, "%s/runs/%s/version_%d/checkpoints/epoch=0-step=%d/model.safetensors",
		 dir, run, version, step);
}

static void test_optimizer(const char *dir, const char *corpus, const char *name,
			   const char *optimizer, const char *path_logged)
{
	ft_row r = { .name = name, .devices = 1, .precision = "bf16-mixed", .model = MODEL,
		     .block = 16, .optimizer = optimizer, .accumulate = 2, .steps = STEPS };
	char round[64], copy[64], resumed[64], extra[1400], log[1200], wa[1300], wb[1300];
	double la[STEPS], na[STEPS], lb[STEPS], nb[STEPS];

	snprintf(round, sizeof(round), "%s_round", name);
	snprintf(copy, sizeof(copy), "%s_copy", name);
	snprintf(resumed, sizeof(resumed), "%s_resumed", name);
	WT_REQUIRE(ft_write_config(dir, name, corpus, &r) == 0);
	WT_CHECK(ct_fit(dir, name, round, "cuda", CKPT " --trainer.weight_copy=false") == 0);
	WT_CHECK(ct_fit(dir, name, copy, "cuda", CKPT) == 0);
	snprintf(log, sizeof(log), "%s/%s.log", dir, copy);
	WT_CHECK(ct_file_has(log, "the linear layers read a BF16 copy of the weights"));
	WT_CHECK(ct_file_has(log, path_logged));
	snprintf(log, sizeof(log), "%s/%s.log", dir, round);
	WT_CHECK(!ct_file_has(log, "copy of the weights"));

	WT_CHECK(ct_read_metrics(dir, round, 0, la, na, STEPS) == STEPS);
	WT_CHECK(ct_read_metrics(dir, copy, 0, lb, nb, STEPS) == STEPS);
	for (int i = 0; i < STEPS; i++) {
		WT_CHECK(la[i] == lb[i] && na[i] == nb[i]);
		fprintf(stderr, "%s step %d: loss %.9g / %.9g, norm %.9g / %.9g (round / copy)\n",
			name, i + 1, la[i], lb[i], na[i], nb[i]);
	}
	weights_path(dir, round, 0, STEPS, wa, sizeof(wa));
	weights_path(dir, copy, 0, STEPS, wb, sizeof(wb));
	WT_CHECK(same_file(wa, wb));

	/* resume the copy run from step 2 */
	weights_path(dir, copy, 0, 2, wb, sizeof(wb));
	snprintf(extra, sizeof(extra), CKPT " --trainer.resume='%.*s'",
		 (int)(strlen(wb) - strlen("/model.safetensors")), wb);
	WT_CHECK(ct_fit(dir, name, resumed, "cuda", extra) == 0);
	WT_CHECK(ct_read_metrics(dir, resumed, 0, la, na, STEPS) == STEPS - 2);
	for (int i = 0; i < STEPS - 2; i++)
		WT_CHECK(la[i] == lb[i + 2] && na[i] == nb[i + 2]);
	weights_path(dir, resumed, 0, STEPS, wb, sizeof(wb));
	WT_CHECK(same_file(wa, wb));
}

int main(void)
{
	char dir[] = "/tmp/weft_test_cuda_weight_copy_XXXXXX", corpus[256];

	ct_require_gpu("test_cuda_weight_copy");
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	test_optimizer(dir, corpus, "adamw", "{name: adamw, lr: 1.0e-2, weight_decay: 0.1}",
		       "(fused kernel)");
	test_optimizer(dir, corpus, "sgd", "{name: sgd, lr: 0.3, momentum: 0.9}", "(host-staged");
	ct_finish_dir(dir);
	return wt_done("test_cuda_weight_copy");
}
