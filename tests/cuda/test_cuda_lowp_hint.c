/* The trainer expects the loss's upstream gradient it will seed backward
 * with (the fused classifier, ABI 1.7): `weft fit` of a GPT on CUDA at
 * 16-mixed (its loss scale) with two micro-batches a step (each loss
 * weighted 1/2), under the CUDA emulator's EMU_COUNTS: every step's head
 * makes the loss's gradient in its forward (k_ce_lowp_fused, one per
 * micro-batch), the loss-backward kernel never runs (no k_ce_lowp_bwd),
 * and each backward's correction (k_ce_lowp_regrad) reads the device
 * scalar and writes nothing: the upstream gradient equalled the hint
 * (the micro-batch weight times the loss scale) every time, so the
 * gradients have the two-pass path's bits. A trainer that left the hint
 * at 1 would make each correction rescale the logits' gradient (its line
 * would count written bytes). Skips (77) on a real GPU, which cannot
 * count, and without one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit_table.h"

#define MODEL "class: gpt, n_layer: 1, n_head: 2, n_embd: 16, vocab_size: 256, bias: true"

int main(void)
{
	static const ft_row row = { .name = "hint16", .devices = 1, .precision = "16-mixed",
				    .model = MODEL, .accumulate = 2, .steps = 2, .no_clip = 1 };
	char dir[] = "/tmp/weft_test_cuda_lowp_hint_XXXXXX", corpus[256], counts[1200];
	char line[512], name[128];
	int fused = 0, bwd = 0, regrad = 0, regrad_wrote = 0, lines = 0;
	double rd, wr;
	FILE *f;

	ct_require_gpu("test_cuda_lowp_hint");
	WT_REQUIRE(mkdtemp(dir) != NULL);
	ct_write_corpus(dir, corpus, sizeof(corpus));
	snprintf(counts, sizeof(counts), "%s/fit.counts", dir);
	setenv("EMU_COUNTS", counts, 1); /* one process: strategy single */
	WT_REQUIRE(ft_write_config(dir, row.name, corpus, &row) == 0);
	WT_CHECK(ct_fit(dir, row.name, row.name, "cuda", "") == 0);
	f = fopen(counts, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (line[0] != 'K' || sscanf(line + 2, "%127[^\t]\t%lf\t%lf", name, &rd, &wr) != 3)
			continue;
		lines++;
		fused += !strcmp(name, "k_ce_lowp_fused");
		bwd += !strcmp(name, "k_ce_lowp_bwd");
		regrad += !strcmp(name, "k_ce_lowp_regrad");
		regrad_wrote += !strcmp(name, "k_ce_lowp_regrad") && wr > 0;
	}
	if (f)
		fclose(f);
	if (lines == 0) {
		ct_finish_dir(dir);
		printf("test_cuda_lowp_hint: skipped: not under the CUDA emulator (its EMU_COUNTS "
		       "are what this test reads)\n");
		return 77;
	}
	fprintf(stderr, "2 steps of 2 micro-batches at 16-mixed: k_ce_lowp_fused %d, "
		"k_ce_lowp_bwd %d, k_ce_lowp_regrad %d (%d wrote)\n", fused, bwd, regrad,
		regrad_wrote);
	WT_CHECK(fused == 4);
	WT_CHECK(bwd == 0);
	WT_CHECK(regrad == 4);
	WT_CHECK(regrad_wrote == 0);
	ct_finish_dir(dir);
	return wt_done("test_cuda_lowp_hint");
}
