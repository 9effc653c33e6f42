/* The classifier head and its loss in one op (weft_op_linear_cross_entropy)
 * in a GPT training step on CUDA, on a GPU or under the CUDA emulator, with
 * bf16-mixed and 16-bit activations (CUDA's default), a vocabulary of 67
 * (logits rows of 134 bytes: no 16-byte-aligned leading dimension):
 *   - weft_model_loss takes the fused head (no logits come back), and the
 *     step's loss and gradient norm equal the CPU's same step (the CPU's
 *     reference kernels with 16-bit activations forced, the same weights)
 *     within 1e-4 relative, the bf16-mixed bound of precision_fit.h and
 *     its argument: both devices round the same F32 values to bf16, and
 *     differ by the order of F32 sums and what that does to the next
 *     rounding (one step here, so further inside the bound than its
 *     three-step runs). The differences are printed.
 *   - under the emulator, with its EMU_COUNTS: the step launches no GEMM
 *     epilogue kernel (the head's products all take the padded, aligned
 *     row stride; every other product of this model has aligned
 *     dimensions), while the head as two ops (weft_op_linear, then
 *     weft_op_cross_entropy: rows of 67) on the same inputs launches one,
 *     so the count does see the unfused path;
 *   - and, with a vocabulary of 4096, the fused classifier (ABI 1.7): no
 *     loss-backward kernel, the logits read once and written once by the
 *     loss kernels (fused_classifier_counts).
 * Skips (77) without a GPU. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_test.h"
#include "weft/autograd.h"
#include "weft/config.h"
#include "weft/module.h"
#include "weft/ops.h"

enum { B = 2, T = 8, V = 67, V_BIG = 4096 };

static int64_t vocab = V; /* of the model build() makes next */

static const weft_device cuda0 = { .type = WEFT_DEVICE_CUDA, .index = 0 };

static weft_model *build(weft_device dev)
{
	weft_model_options mo = { .device = dev };
	weft_config *cfg;
	weft_model *m;
	char yaml[256];

	snprintf(yaml, sizeof(yaml), "model: {class: gpt, n_layer: 1, n_head: 2, n_embd: 32, "
		 "vocab_size: %lld, block_size: 8, dropout: 0.0}\n", (long long)vocab);
	WT_OK(weft_config_load_string("m.yaml", yaml, strlen(yaml), &cfg));
	WT_OK(weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), &mo, &m));
	weft_config_free(cfg);
	return m;
}

/* The batch on the host: two rows ignored (GPT's ignore_index -1). */
static void batch(weft_tensor **ids, weft_tensor **tg)
{
	int64_t shape[2] = { B, T };

	WT_OK(weft_tensor_alloc("ids", WEFT_I64, 2, shape, WEFT_CPU, WEFT_MEM_OTHER, ids));
	WT_OK(weft_tensor_alloc("targets", WEFT_I64, 2, shape, WEFT_CPU, WEFT_MEM_OTHER, tg));
	for (int64_t i = 0; i < B * T; i++) {
		((int64_t *)(*ids)->data)[i] = (i * 11 + 3) % vocab;
		((int64_t *)(*tg)->data)[i] = i == 5 || i == 12 ? -1 : (i * 13 + 7) % vocab;
	}
}

/* One step of m on dev: the loss, the gradient norm (every parameter's),
 * whether logits came back. fused 0: the head as two ops instead. */
static void step(weft_model *m, weft_device dev, int fused, void (*mark)(const char *),
		 const char *label, double *loss, double *gnorm, int *has_logits)
{
	weft_ctx_options co = { .device = dev };
	weft_params *ps = weft_model_params(m);
	weft_tensor *ids, *tg, *dtg, *l;
	weft_model_output out = { 0 };
	char at[64];
	float lf;
	weft_ctx *ctx;

	batch(&ids, &tg);
	WT_OK(weft_ctx_create(&co, &ctx));
	WT_OK(weft_ctx_set_autocast(ctx, WEFT_BF16));
	WT_OK(weft_ctx_set_lowp_activations(ctx, WEFT_LOWP_ACT_ON));
	WT_OK(weft_params_zero_grad(ps));
	weft_ctx_step_begin(ctx);
	if (mark) {
		snprintf(at, sizeof(at), "%s begin", label);
		mark(at);
	}
	if (fused) {
		WT_OK(weft_model_loss(m, ctx, &(weft_batch){ .inputs = ids, .targets = tg }, &out));
		l = out.loss;
	} else {
		WT_OK(weft_model_forward(m, ctx, ids, &out.logits));
		WT_OK(weft_ctx_tensor(ctx, "targets", WEFT_I64, 2, tg->shape, &dtg));
		WT_OK(weft_tensor_copy(dtg, tg));
		WT_OK(weft_op_cross_entropy(ctx, out.logits, dtg, -1, &l));
	}
	WT_OK(weft_backward(ctx, l));
	if (mark) {
		snprintf(at, sizeof(at), "%s end", label);
		mark(at);
	}
	*has_logits = out.logits != NULL;
	WT_OK(weft_tensor_copy_to_host(l, &lf, sizeof(lf)));
	*loss = lf;
	*gnorm = 0;
	for (size_t i = 0; i < weft_params_count(ps); i++) {
		weft_tensor *p = weft_params_at(ps, i);
		int64_t n = weft_tensor_numel(p);
		float *g = malloc((size_t)n * sizeof(float));

		WT_REQUIRE(g && p->grad);
		WT_OK(weft_tensor_copy_to_host(p->grad, g, (size_t)n * sizeof(float)));
		for (int64_t j = 0; j < n; j++)
			*gnorm += (double)g[j] * g[j];
		free(g);
	}
	*gnorm = sqrt(*gnorm);
	weft_ctx_free(ctx);
	weft_tensor_free(ids);
	weft_tensor_free(tg);
}

/* The fused classifier's traffic in one step of a model whose logits span
 * many pages (vocabulary 4096: 16 rows of 8 KiB): no loss-backward kernel
 * runs; the loss kernels read the logits once (their bytes read, whole
 * pages, are under the logits' bytes plus 8 pages: the targets, the lse,
 * the scalars, a partial page at each end; the two-pass head reads them
 * twice) and write them once (the gradient over them). */
static void fused_classifier_counts(const char *path, void (*mark)(const char *))
{
	double logits = (double)(B * T) * (double)((V_BIG + 127) / 128 * 128) * 2, l, gn;
	double page = (double)sysconf(_SC_PAGESIZE);
	weft_model *m;
	ct_span ce, bwd;
	int has_logits;

	vocab = V_BIG;
	m = build(cuda0);
	step(m, cuda0, 1, mark, "big", &l, &gn, &has_logits);
	WT_CHECK(!has_logits && isfinite(l) && isfinite(gn));
	ce = ct_count_span(path, "big begin", "big end", "k_ce_lowp");
	bwd = ct_count_span(path, "big begin", "big end", "k_ce_lowp_bwd");
	fprintf(stderr, "vocabulary %d, logits %.0f bytes: loss kernels %s read %.0f, wrote "
		"%.0f bytes; k_ce_lowp_bwd launches %d\n", V_BIG, logits, ce.k_names,
		ce.k_matched_read, ce.k_matched_written, bwd.k_matched);
	WT_CHECK(bwd.k_matched == 0);
	WT_CHECK(ce.k_matched_read >= logits && ce.k_matched_read <= logits + 8 * page);
	WT_CHECK(ce.k_matched_written >= logits && ce.k_matched_written <= logits + 8 * page);
	weft_model_free(m);
	vocab = V;
}

int main(void)
{
	char path[] = "/tmp/weft_lowp_head_counts_XXXXXX";
	void (*mark)(const char *) = NULL;
	double lc, gc, lg, gg, lu, gu;
	weft_model *mc, *mg;
	weft_params *pc, *pg;
	int fd = mkstemp(path), logits;

	WT_REQUIRE(fd >= 0);
	close(fd);
	setenv("EMU_COUNTS", path, 1); /* before any device work; only the emulator reads it */
	ct_setup("test_cuda_lowp_head");
	*(void **)&mark = dlsym(RTLD_DEFAULT, "emu_count_mark");

	mc = build(WEFT_CPU);
	mg = build(cuda0);
	pc = weft_model_params(mc);
	pg = weft_model_params(mg);
	WT_REQUIRE(weft_params_count(pc) == weft_params_count(pg));
	for (size_t i = 0; i < weft_params_count(pc); i++) /* the same weights */
		WT_OK(weft_tensor_copy(weft_params_at(pg, i), weft_params_at(pc, i)));

	step(mc, WEFT_CPU, 1, NULL, NULL, &lc, &gc, &logits);
	WT_CHECK(!logits);
	step(mg, cuda0, 1, mark, "fused", &lg, &gg, &logits);
	WT_CHECK(!logits); /* the fused head */
	WT_CHECK(fabs(lg - lc) <= 1e-4 * fabs(lc));
	WT_CHECK(fabs(gg - gc) <= 1e-4 * fabs(gc));
	fprintf(stderr, "fused head, cuda vs cpu: loss %.7g vs %.7g (rel %.2g), gradient norm "
		"%.7g vs %.7g (rel %.2g)\n", lg, lc, fabs(lg - lc) / fabs(lc), gg, gc,
		fabs(gg - gc) / fabs(gc));
	if (mark) {
		int fused_epi, split_epi;

		step(mg, cuda0, 0, mark, "split", &lu, &gu, &logits);
		WT_CHECK(logits);
		fused_epi = ct_count_span(path, "fused begin", "fused end", "epilogue").k_matched;
		split_epi = ct_count_span(path, "split begin", "split end", "epilogue").k_matched;
		fprintf(stderr, "GEMM epilogue kernels: fused head %d, head as two ops %d\n",
			fused_epi, split_epi);
		WT_CHECK(fused_epi == 0);
		WT_CHECK(split_epi >= 1);
		/* the same step: the two ways agree to the bf16-mixed bound */
		WT_CHECK(fabs(lu - lg) <= 1e-4 * fabs(lg));
		fused_classifier_counts(path, mark);
	}
	weft_model_free(mc);
	weft_model_free(mg);
	ct_teardown();
	unlink(path);
	return wt_done("test_cuda_lowp_head");
}
