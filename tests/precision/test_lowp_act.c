/* 16-bit activations (weft_ctx_set_lowp_activations) on the CPU's
 * reference kernels: the gate, its refusal, and what one GPT training step
 * under it runs, through a kernel table that counts calls.
 *
 * Gate: auto keeps the CPU's activations F32 (its lowp_act_dtypes is 0);
 * on turns them to the autocast dtype (BF16 / F16); off and autocast F32
 * keep F32; the mode survives weft_ctx_set_autocast. On a table without
 * gemm_lowp_ex, on is refused with one message naming the table, the
 * member and the config key to change.
 *
 * One step of a 2-layer GPT (bf16-mixed) under the gate:
 * - the head and its loss run as one op (weft_op_linear_cross_entropy):
 *   no logits tensor comes back, the one product writing them has the
 *   row stride 128 for the vocabulary of 64 (BF16 logits in the arena);
 *   the loss F32; parameters and their gradients F32;
 * - GELU is in c_fc's product (one GELU epilogue per layer) and its
 *   derivative in the product of c_proj's dx (one DGELU epilogue per
 *   layer); the separate GELU kernels never run;
 * - the loss's gradient is written over the logits in the forward's pass
 *   (the fused classifier, ABI 1.7: cross_entropy_lowp_fused, never
 *   _backward; the backward's correction takes the logits' pointer, with
 *   the hint 1 that weft_backward seeds) and nothing of rows x vocab is
 *   zero-filled: the backward zero-fills one activation gradient, the
 *   position embedding's (T x C F32, which the broadcast add of tokens and
 *   positions sums over the batch into), and nothing else (every other
 *   first contribution writes);
 * - every residual add of the blocks is in a layernorm's pass: the
 *   16-bit layernorm takes a residual 2 LAYERS times (ln_2 of each block,
 *   and the MLP's branch in the next block's ln_1 or in ln_f), and the
 *   forward's one add kernel is the embedding's tokens + positions (F32);
 * - the loss and every parameter gradient agree with the same step with F32
 *   activations (bf16-mixed as before): loss within 2e-3 relative, each
 *   gradient within 5e-2 of its norm (relative L2). bf16 keeps 8 bits, a
 *   stored activation is off by up to 2^-9 relative; the loss sums ~500
 *   such terms that mostly cancel (measured 2.9e-5), the gradients pass
 *   through ~10 rounded tensors each (measured at most 9.2e-3), and a
 *   wrong epilogue or a lost term is off by order 1.
 *
 * The bias gradients in the weight gradients' products (WEFT_EPI_BGRAD,
 * since ABI 1.7): the same 16-bit step on the CPU table as it is (each of
 * the 4 LAYERS linear layers with a bias sums db in its dw product: 4
 * LAYERS BGRAD products, no sum_rows_lowp) and on a copy whose
 * gemm_lowp_ex_epilogues is ABI 1.6's (db by sum_rows_lowp, 4 LAYERS
 * calls, no BGRAD) gives the same loss and every parameter gradient bit
 * for bit: the CPU's BGRAD adds each column of dy in sum_rows_lowp's
 * order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/autograd.h"
#include "weft/config.h"
#include "weft/gemm_ex.h"
#include "weft/kernels.h"
#include "weft/module.h"
#include "weft/ops.h"
#include "weft/tensor.h"
#include "weft_test.h"


static const weft_kernel_table *cpu;
static weft_kernel_table counting;
static int n_epi[4], n_sum_rows, n_gelu_kernels, n_padded, in_backward, n_fwd_adds,
	n_ln_residuals;
static size_t zero_bytes;
static const void *ce_logits, *ce_dlogits;
static int n_ce_bw;
static float ce_hint;

static weft_status count_gemm_ex(void *kctx, weft_dtype in_dt, int ta, int tb, int64_t m,
				 int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
				 const void *b, int64_t ldb, float beta, weft_dtype c_dt, void *c,
				 int64_t ldc, const float *bias, int32_t epi, void *aux)
{
	if (epi >= 0 && epi < 4)
		n_epi[epi]++;
	if (ldc != n)
		n_padded++;
	return cpu->gemm_lowp_ex(kctx, in_dt, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c_dt,
				 c, ldc, bias, epi, aux);
}

static weft_status count_sum_rows(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
				  const void *x, float *out)
{
	n_sum_rows++;
	return cpu->sum_rows_lowp(kctx, dt, rows, cols, x, out);
}

static weft_status count_zero(void *kctx, void *dst, size_t bytes)
{
	if (in_backward)
		zero_bytes += bytes;
	return cpu->zero(kctx, dst, bytes);
}

static weft_status count_add(void *kctx, weft_dtype dt, int64_t n, const void *a, int64_t nb,
			    const void *b, void *out)
{
	n_fwd_adds += !in_backward;
	return cpu->add(kctx, dt, n, a, nb, b, out);
}

static weft_status count_ln_fw(void *kctx, weft_dtype dt, int64_t rows, int64_t cols, float eps,
			       const void *x, const void *r, void *sum, const float *w,
			       const float *b, void *y, float *mean, float *rstd)
{
	n_ln_residuals += r != NULL;
	return cpu->layernorm_lowp_forward(kctx, dt, rows, cols, eps, x, r, sum, w, b, y, mean,
					   rstd);
}

static weft_status count_gelu_fw(void *kctx, weft_dtype dt, int64_t n, const void *x, void *o)
{
	n_gelu_kernels++;
	return cpu->gelu_forward(kctx, dt, n, x, o);
}

static weft_status count_gelu_bw(void *kctx, weft_dtype dt, int64_t n, const void *x,
				 const void *dy, void *dx)
{
	n_gelu_kernels++;
	return cpu->gelu_backward(kctx, dt, n, x, dy, dx);
}

static weft_status count_ce_bw(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
			       int64_t ld, const void *logits, weft_dtype idx_dt,
			       const void *targets, int64_t ignore_index, const float *lse,
			       const float *dloss, const float *count, void *dlogits)
{
	n_ce_bw++;
	return cpu->cross_entropy_lowp_backward(kctx, dt, rows, vocab, ld, logits, idx_dt, targets,
						ignore_index, lse, dloss, count, dlogits);
}

static weft_status count_ce_fused(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
				  int64_t ld, void *logits, weft_dtype idx_dt, const void *targets,
				  int64_t ignore_index, float hint, float *lse, float *loss,
				  float *count)
{
	ce_logits = logits;
	return cpu->cross_entropy_lowp_fused(kctx, dt, rows, vocab, ld, logits, idx_dt, targets,
					     ignore_index, hint, lse, loss, count);
}

static weft_status count_ce_regrad(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
				   int64_t ld, void *dlogits, weft_dtype idx_dt,
				   const void *targets, int64_t ignore_index, float hint,
				   const float *dloss)
{
	ce_dlogits = dlogits;
	ce_hint = hint;
	return cpu->cross_entropy_lowp_regrad(kctx, dt, rows, vocab, ld, dlogits, idx_dt, targets,
					      ignore_index, hint, dloss);
}

static void test_gate(void)
{
	weft_ctx_options o = { 0 };
	weft_ctx *ctx;
	char abi[64];

	WT_OK(weft_ctx_create(&o, &ctx));
	WT_OK(weft_ctx_set_autocast(ctx, WEFT_BF16));
	WT_CHECK(weft_ctx_lowp_activations(ctx) == WEFT_F32); /* auto: the CPU's mask is 0 */
	WT_OK(weft_ctx_set_lowp_activations(ctx, WEFT_LOWP_ACT_ON));
	WT_CHECK(weft_ctx_lowp_activations(ctx) == WEFT_BF16);
	WT_OK(weft_ctx_set_autocast(ctx, WEFT_F16));
	WT_CHECK(weft_ctx_lowp_activations(ctx) == WEFT_F16);
	WT_OK(weft_ctx_set_autocast(ctx, WEFT_F32));
	WT_CHECK(weft_ctx_lowp_activations(ctx) == WEFT_F32);
	WT_OK(weft_ctx_set_autocast(ctx, WEFT_BF16));
	WT_OK(weft_ctx_set_lowp_activations(ctx, WEFT_LOWP_ACT_OFF));
	WT_CHECK(weft_ctx_lowp_activations(ctx) == WEFT_F32);
	WT_FAILS(weft_ctx_set_lowp_activations(ctx, (weft_lowp_act)7), WEFT_ERR_INVALID_ARG,
		 "unknown mode 7");
	/* 16-bit logits (a linear layer's under the gate, or the fused
	 * head's) against a target outside the vocabulary: the op names the
	 * row and the target */
	{
		int64_t xs[2] = { 2, 4 }, ws[2] = { 5, 4 }, ts[1] = { 2 };
		weft_tensor *x, *w, *t, *z, *loss;

		WT_OK(weft_ctx_set_lowp_activations(ctx, WEFT_LOWP_ACT_ON));
		weft_ctx_step_begin(ctx);
		WT_OK(weft_ctx_tensor(ctx, "x", WEFT_F32, 2, xs, &x));
		WT_OK(weft_ctx_tensor(ctx, "w", WEFT_F32, 2, ws, &w));
		WT_OK(weft_ctx_tensor(ctx, "t", WEFT_I64, 1, ts, &t));
		memset(x->data, 0, weft_tensor_nbytes(x));
		memset(w->data, 0, weft_tensor_nbytes(w));
		((int64_t *)t->data)[0] = 1;
		((int64_t *)t->data)[1] = 5;
		WT_OK(weft_op_linear(ctx, x, w, NULL, &z));
		WT_CHECK(z->dtype == WEFT_BF16);
		WT_FAILS(weft_op_cross_entropy(ctx, z, t, -1, &loss), WEFT_ERR_INVALID_ARG,
			 "cross_entropy: row 1 has target 5, outside [0, 5) and not the "
			 "ignore_index -1; check the data's token ids against the model's "
			 "vocab_size");
		/* the same from the head and its loss in one op */
		WT_FAILS(weft_op_linear_cross_entropy(ctx, x, w, t, -1, &loss),
			 WEFT_ERR_INVALID_ARG, "cross_entropy: row 1 has target 5, outside "
			 "[0, 5) and not the ignore_index -1; check the data's token ids "
			 "against the model's vocab_size");
	}
	weft_ctx_free(ctx);

	/* a table without gemm_lowp_ex: on is refused, auto stays off */
	counting = *cpu;
	counting.gemm_lowp_ex = NULL;
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, &counting));
	WT_OK(weft_ctx_create(&o, &ctx));
	WT_OK(weft_ctx_set_autocast(ctx, WEFT_BF16));
	/* the table's version is the header's (the minor grows) */
	snprintf(abi, sizeof(abi), "(device cpu, ABI %d.%d) lacks", WEFT_ABI_MAJOR, WEFT_ABI_MINOR);
	WT_FAILS(weft_ctx_set_lowp_activations(ctx, WEFT_LOWP_ACT_ON), WEFT_ERR_UNSUPPORTED,
		 "16-bit activations: the 'cpu' kernel table ", abi,
		 "lacks the members they need (gemm_lowp_ex, sum_rows_lowp, layernorm_lowp_*, "
		 "cross_entropy_lowp_*, since ABI 1.6); rebuild that kernel library against "
		 "this weft's SDK, or set trainer.lowp_activations to auto or false");
	WT_CHECK(weft_ctx_lowp_activations(ctx) == WEFT_F32);
	weft_ctx_free(ctx);
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, cpu));
}

enum { B = 2, T = 8, C = 16, V = 64, LAYERS = 2 };

static weft_model *build(void)
{
	static const char yaml[] = "model: {class: gpt, n_layer: 2, n_head: 2, n_embd: 16, "
				   "vocab_size: 64, block_size: 8, dropout: 0.0}\n";
	weft_config *cfg;
	weft_model *m;

	WT_OK(weft_config_load_string("m.yaml", yaml, strlen(yaml), &cfg));
	WT_OK(weft_model_from_config(weft_cfg_get(weft_config_root(cfg), "model"), NULL, &m));
	weft_config_free(cfg);
	return m;
}

/* One step's loss and every parameter gradient (F32, concatenated, into
 * *grads: malloc'd) with activations in 16 bits (lowp) or F32. */
static double step(int lowp, float **grads, size_t *n_grads, weft_dtype *logits_dt)
{
	weft_ctx_options o = { 0 };
	int64_t shape[2] = { B, T };
	weft_model *m = build();
	weft_params *ps = weft_model_params(m);
	weft_tensor *ids, *tg;
	weft_model_output out;
	weft_ctx *ctx;
	size_t n = 0;
	float loss;

	WT_OK(weft_ctx_create(&o, &ctx));
	WT_OK(weft_ctx_set_autocast(ctx, WEFT_BF16));
	WT_OK(weft_ctx_set_lowp_activations(ctx, lowp ? WEFT_LOWP_ACT_ON : WEFT_LOWP_ACT_OFF));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_params_zero_grad(ps));
	WT_OK(weft_ctx_tensor(ctx, "ids", WEFT_I64, 2, shape, &ids));
	WT_OK(weft_ctx_tensor(ctx, "targets", WEFT_I64, 2, shape, &tg));
	for (int64_t i = 0; i < B * T; i++) {
		((int64_t *)ids->data)[i] = (i * 7 + 3) % V;
		((int64_t *)tg->data)[i] = ((i + 1) * 7 + 3) % V;
	}
	WT_OK(weft_model_loss(m, ctx, &(weft_batch){ .inputs = ids, .targets = tg }, &out));
	*logits_dt = out.logits ? (weft_dtype)out.logits->dtype : WEFT_DTYPE_COUNT;
	WT_CHECK(out.loss->dtype == WEFT_F32);
	loss = *(const float *)out.loss->data;
	in_backward = 1;
	WT_OK(weft_backward(ctx, out.loss));
	in_backward = 0;
	for (size_t i = 0; i < weft_params_count(ps); i++)
		n += (size_t)weft_tensor_numel(weft_params_at(ps, i));
	*grads = malloc(n * sizeof(float));
	WT_REQUIRE(*grads != NULL);
	*n_grads = 0;
	for (size_t i = 0; i < weft_params_count(ps); i++) {
		weft_tensor *p = weft_params_at(ps, i);

		WT_CHECK(p->dtype == WEFT_F32 && p->grad && p->grad->dtype == WEFT_F32);
		memcpy(*grads + *n_grads, p->grad->data, weft_tensor_nbytes(p));
		*n_grads += (size_t)weft_tensor_numel(p);
	}
	weft_ctx_free(ctx);
	weft_model_free(m);
	return loss;
}

static void test_step(void)
{
	float *g32, *g16;
	size_t n32, n16;
	weft_dtype dt32, dt16;
	double l32, l16, worst = 0;

	counting = *cpu;
	counting.gemm_lowp_ex = count_gemm_ex;
	counting.zero = count_zero;
	counting.gelu_forward = count_gelu_fw;
	counting.gelu_backward = count_gelu_bw;
	counting.cross_entropy_lowp_backward = count_ce_bw;
	counting.cross_entropy_lowp_fused = count_ce_fused;
	counting.cross_entropy_lowp_regrad = count_ce_regrad;
	counting.add = count_add;
	counting.layernorm_lowp_forward = count_ln_fw;
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, &counting));

	l32 = step(0, &g32, &n32, &dt32);
	WT_CHECK(dt32 == WEFT_F32);
	memset(n_epi, 0, sizeof(n_epi));
	n_gelu_kernels = 0;
	n_padded = 0;
	zero_bytes = 0;
	n_ce_bw = 0;
	n_fwd_adds = 0;
	n_ln_residuals = 0;
	l16 = step(1, &g16, &n16, &dt16);
	WT_CHECK(n_ln_residuals == 2 * LAYERS);
	WT_CHECK(n_fwd_adds == 1);
	if (n_ln_residuals != 2 * LAYERS || n_fwd_adds != 1)
		fprintf(stderr, "layernorms with a residual %d (want %d), forward adds %d "
			"(want 1)\n", n_ln_residuals, 2 * LAYERS, n_fwd_adds);
	WT_CHECK(dt16 == WEFT_DTYPE_COUNT); /* no logits: the fused head */
	WT_CHECK(n_padded == 1);
	WT_CHECK(n_epi[WEFT_EPI_GELU] == LAYERS);
	WT_CHECK(n_epi[WEFT_EPI_DGELU] == LAYERS);
	WT_CHECK(n_gelu_kernels == 0);
	WT_CHECK(ce_dlogits != NULL && ce_dlogits == ce_logits);
	WT_CHECK(n_ce_bw == 0 && ce_hint == 1.0f);
	WT_CHECK(zero_bytes == T * C * sizeof(float));
	if (zero_bytes != T * C * sizeof(float))
		fprintf(stderr, "the backward zero-filled %zu bytes\n", zero_bytes);
	WT_CHECK(fabs(l16 - l32) <= 2e-3 * fabs(l32));
	fprintf(stderr, "loss: F32 activations %.7f, BF16 %.7f (relative %.2g)\n", l32, l16,
		fabs(l16 - l32) / fabs(l32));
	WT_REQUIRE(n16 == n32);
	/* per parameter: relative L2 of the difference, over a gradient */
	{
		weft_model *m = build();
		weft_params *ps = weft_model_params(m);
		size_t off = 0;

		for (size_t i = 0; i < weft_params_count(ps); i++) {
			weft_tensor *p = weft_params_at(ps, i);
			size_t k = (size_t)weft_tensor_numel(p);
			double d = 0, s = 0;

			for (size_t j = off; j < off + k; j++) {
				d += ((double)g16[j] - g32[j]) * ((double)g16[j] - g32[j]);
				s += (double)g32[j] * g32[j];
			}
			off += k;
			if (s > 0 && sqrt(d / s) > worst)
				worst = sqrt(d / s);
			if (s > 0 && !(sqrt(d / s) <= 5e-2))
				fprintf(stderr, "gradient of %s: relative L2 %.3g > 5e-2\n", p->name,
					sqrt(d / s));
			WT_CHECK(s == 0 || sqrt(d / s) <= 5e-2);
		}
		weft_model_free(m);
	}
	fprintf(stderr, "gradients: worst relative L2 %.3g\n", worst);
	free(g32);
	free(g16);
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, cpu));
}

/* The 16-bit step with db in the dw products (the CPU table's BGRAD) and
 * with db apart (the table's epilogues set to ABI 1.6's): the same bits. */
static void test_bgrad_bits(void)
{
	float *gf, *gu;
	size_t nf, nu;
	weft_dtype dt;
	double lf, lu;

	WT_REQUIRE(weft_gemm_ex_epilogues(cpu) & (1u << WEFT_EPI_BGRAD));
	counting = *cpu;
	counting.gemm_lowp_ex = count_gemm_ex;
	counting.sum_rows_lowp = count_sum_rows;
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, &counting));
	memset(n_epi, 0, sizeof(n_epi));
	n_sum_rows = 0;
	lf = step(1, &gf, &nf, &dt);
	WT_CHECK(n_epi[WEFT_EPI_BGRAD] == 4 * LAYERS && n_sum_rows == 0);
	counting.gemm_lowp_ex_epilogues = WEFT_GEMM_EX_EPILOGUES_1_6;
	memset(n_epi, 0, sizeof(n_epi));
	n_sum_rows = 0;
	lu = step(1, &gu, &nu, &dt);
	WT_CHECK(n_epi[WEFT_EPI_BGRAD] == 0 && n_sum_rows == 4 * LAYERS);
	WT_REQUIRE(nf == nu);
	WT_CHECK(lf == lu);
	WT_CHECK(!memcmp(gf, gu, nf * sizeof(float)));
	if (memcmp(gf, gu, nf * sizeof(float)))
		for (size_t i = 0; i < nf; i++)
			if (memcmp(&gf[i], &gu[i], sizeof(float))) {
				fprintf(stderr, "gradient element %zu: fused %.9g, apart %.9g\n", i,
					(double)gf[i], (double)gu[i]);
				break;
			}
	free(gf);
	free(gu);
	WT_OK(weft_kernels_register(WEFT_DEVICE_CPU, cpu));
}

int main(void)
{
	WT_OK(weft_kernels_get(WEFT_CPU, &cpu));
	test_gate();
	test_step();
	test_bgrad_bits();
	return wt_done("test_lowp_act");
}
