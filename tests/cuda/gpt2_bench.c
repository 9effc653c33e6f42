/* GPT-2 124M training step on the CUDA kernel table in bf16 (bf16-mixed:
 * bf16 weights, activations and gradients for compute, fp32 master
 * weights and AdamW state through the fused AdamW kernel). Calls the
 * table directly, layer by layer as llm.c does, so it measures the CUDA
 * kernels whatever the state of the model layer. Prints tokens/s and MFU:
 * (6 N + 12 L C T) FLOPs per token (N all parameters, the attention term
 * as nanoGPT counts it) over the GPU's dense bf16 peak (--peak-tflops,
 * default 989: H100/H200 SXM). Not a test: scripts/gpu-check runs it.
 *
 *   cuda_gpt2_bench [--batch B] [--steps S] [--warmup W] [--peak-tflops P]
 *
 * The last line is "RESULT tokens_per_s=... mfu=... step_ms=...".
 */
#include <dlfcn.h>
#include <stdint.h>
#include <time.h>

#include "cuda_test.h"
#include "cuda/kernels_cuda.h"

#define L 12
#define C 768
#define NH 12
#define T 1024
#define V 50257
#define BF WEFT_BF16

static const weft_kernel_table *k;
static void *kc;

/* Every call goes through here: the first failure is reported and ends
 * the run. */
static void ok(weft_status st, const char *what)
{
	if (st == WEFT_OK)
		return;
	fprintf(stderr, "cuda_gpt2_bench: %s: %s: %s\n", what, weft_status_str(st),
		weft_error_last());
	exit(1);
}

static void *dalloc(size_t bytes)
{
	void *p = NULL;

	ok(k->mem_alloc(0, WEFT_MEM_ACTIVATIONS, bytes, &p), "allocating");
	ok(k->zero(kc, p, bytes), "zeroing");
	return p;
}

/* Parameter offsets (elements) in the flat buffers. */
enum { P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_PROJW, P_PROJB, P_LN2W, P_LN2B, P_FCW, P_FCB,
       P_FCPW, P_FCPB, P_PER_LAYER };
static const int64_t layer_sizes[P_PER_LAYER] = { C, C, 3 * C * C, 3 * C, C * C, C, C, C,
						  4 * C * C, 4 * C, 4 * C * C, C };

static int64_t layer_off[L][P_PER_LAYER], wte_off, wpe_off, lnfw_off, lnfb_off, nparams;

static void layout(void)
{
	int64_t o = 0;

	wte_off = o;
	o += (int64_t)V * C;
	wpe_off = o;
	o += (int64_t)T * C;
	for (int l = 0; l < L; l++)
		for (int p = 0; p < P_PER_LAYER; p++) {
			layer_off[l][p] = o;
			o += layer_sizes[p];
		}
	lnfw_off = o;
	o += C;
	lnfb_off = o;
	o += C;
	nparams = o;
}

/* Saved activations of one layer. */
struct acts {
	void *x, *ln1, *qkv, *atty, *att, *x2, *ln2, *fc, *g;
	float *m1, *r1, *m2, *r2;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* y (rows x n) = x (rows x kk) @ w^T (w: n x kk) + bias */
static void linear(int64_t rows, int64_t n, int64_t kk, const void *x, const void *w,
		   const void *bias, void *y)
{
	ok(k->gemm(kc, BF, 0, 1, rows, n, kk, 1.0f, x, kk, 0, w, kk, 0, 0.0f, y, n, 0, 1), "gemm");
	ok(k->add(kc, BF, rows * n, y, n, bias, y), "bias");
}

/* dx = dy @ w (beta 0); dw += dy^T @ x; db += sum_rows(dy) */
static void linear_back(int64_t rows, int64_t n, int64_t kk, const void *x, const void *w,
			const void *dy, void *dx, void *dw, void *db)
{
	if (dx)
		ok(k->gemm(kc, BF, 0, 0, rows, kk, n, 1.0f, dy, n, 0, w, kk, 0, 0.0f, dx, kk, 0, 1),
		   "gemm dx");
	ok(k->gemm(kc, BF, 1, 0, n, kk, rows, 1.0f, dy, n, 0, x, kk, 0, 1.0f, dw, kk, 0, 1),
	   "gemm dw");
	ok(k->sum_rows(kc, BF, rows, n, dy, db), "sum_rows");
}

int main(int argc, char **argv)
{
	int64_t Bn = 8, steps = 5, warmup = 2, BT;
	double peak = 989.0, best = 1e30, total = 0.0, flops_tok;
	const weft_cuda_extras *ex;
	weft_cuda_extras_fn exfn;
	char *w, *gr, *scratch, *dres, *dbuf1, *dbuf4, *dfc, *lnf, *logits, *probs, *res;
	float *master, *mom, *var, *mf, *rf, *loss, *count, *dloss, one = 1.0f, hloss = 0.0f;
	int32_t *ids, *tgt, *pos, *hbuf;
	struct acts a[L];
	size_t es = 2, sb;
	void *h;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			Bn = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
			warmup = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--peak-tflops") && i + 1 < argc)
			peak = atof(argv[++i]);
		else {
			fprintf(stderr, "usage: cuda_gpt2_bench [--batch B] [--steps S] [--warmup W] "
				"[--peak-tflops P]\n");
			return 2;
		}
	}
	ct_require_gpu("cuda_gpt2_bench");
	ok(weft_kernels_get((weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 }, &k), "loading");
	ok(k->ctx_create(0, &kc), "context");
	h = ct_kernels_handle(k);
	exfn = h ? (weft_cuda_extras_fn)(uintptr_t)dlsym(h, WEFT_CUDA_EXTRAS_SYMBOL) : NULL;
	if (!exfn) {
		fprintf(stderr, "cuda_gpt2_bench: the kernel library has no extras\n");
		return 1;
	}
	ex = exfn();
	layout();
	BT = Bn * T;

	/* parameters: bf16 compute copy, bf16 grads, f32 master, m, v */
	w = dalloc((size_t)nparams * es);
	gr = dalloc((size_t)nparams * es);
	master = dalloc((size_t)nparams * 4);
	mom = dalloc((size_t)nparams * 4);
	var = dalloc((size_t)nparams * 4);
	ok(k->fill(kc, WEFT_F32, nparams, 0.02f, master), "init");
	for (int l = 0; l < L; l++) /* layernorm weights 1 */
		for (int p = P_LN1W; p <= P_LN2W; p += P_LN2W - P_LN1W)
			ok(k->fill(kc, WEFT_F32, C, 1.0f, master + layer_off[l][p]), "init");
	ok(k->convert(kc, nparams, WEFT_F32, master, BF, w), "init");

	for (int l = 0; l < L; l++) {
		a[l].x = dalloc((size_t)BT * C * es);
		a[l].ln1 = dalloc((size_t)BT * C * es);
		a[l].qkv = dalloc((size_t)BT * 3 * C * es);
		a[l].atty = dalloc((size_t)BT * C * es);
		a[l].att = dalloc((size_t)Bn * NH * T * T * es);
		a[l].x2 = dalloc((size_t)BT * C * es);
		a[l].ln2 = dalloc((size_t)BT * C * es);
		a[l].fc = dalloc((size_t)BT * 4 * C * es);
		a[l].g = dalloc((size_t)BT * 4 * C * es);
		a[l].m1 = dalloc((size_t)BT * 4);
		a[l].r1 = dalloc((size_t)BT * 4);
		a[l].m2 = dalloc((size_t)BT * 4);
		a[l].r2 = dalloc((size_t)BT * 4);
	}
	res = dalloc((size_t)BT * C * es);
	lnf = dalloc((size_t)BT * C * es);
	mf = dalloc((size_t)BT * 4);
	rf = dalloc((size_t)BT * 4);
	logits = dalloc((size_t)BT * V * es);
	probs = dalloc((size_t)BT * V * es);
	dres = dalloc((size_t)BT * C * es);
	dbuf1 = dalloc((size_t)BT * C * es);
	dbuf4 = dalloc((size_t)BT * 4 * C * es);
	dfc = dalloc((size_t)BT * 4 * C * es);
	sb = k->attention_scratch(BF, Bn, T, C, NH);
	scratch = dalloc(sb);
	loss = dalloc(4);
	count = dalloc(4);
	dloss = dalloc(4);
	ok(k->copy(kc, dloss, &one, 4, WEFT_COPY_HOST_TO_DEVICE), "dloss");
	ids = dalloc((size_t)BT * 4);
	tgt = dalloc((size_t)BT * 4);
	pos = dalloc((size_t)BT * 4);
	hbuf = malloc((size_t)BT * 4);
	for (int64_t i = 0; i < BT; i++)
		hbuf[i] = (int32_t)((i * 2654435761u) % V);
	ok(k->copy(kc, ids, hbuf, (size_t)BT * 4, WEFT_COPY_HOST_TO_DEVICE), "ids");
	for (int64_t i = 0; i < BT; i++)
		hbuf[i] = (int32_t)((i * 40503u + 7) % V);
	ok(k->copy(kc, tgt, hbuf, (size_t)BT * 4, WEFT_COPY_HOST_TO_DEVICE), "targets");
	for (int64_t i = 0; i < BT; i++)
		hbuf[i] = (int32_t)(i % T);
	ok(k->copy(kc, pos, hbuf, (size_t)BT * 4, WEFT_COPY_HOST_TO_DEVICE), "positions");

#define P(off) (w + (size_t)(off) * es)
#define G(off) (gr + (size_t)(off) * es)
	for (int64_t s = -warmup; s < steps; s++) {
		double t0 = now_s(), dt;

		/* forward */
		ok(k->zero(kc, gr, (size_t)nparams * es), "zero grads");
		ok(k->embedding_forward(kc, BF, BT, C, WEFT_I32, ids, V, P(wte_off), a[0].x), "wte");
		ok(k->embedding_forward(kc, BF, BT, C, WEFT_I32, pos, T, P(wpe_off), dbuf1), "wpe");
		ok(k->add(kc, BF, BT * C, a[0].x, BT * C, dbuf1, a[0].x), "embed add");
		for (int l = 0; l < L; l++) {
			const int64_t *o = layer_off[l];
			struct acts *A = &a[l];
			void *out = l + 1 < L ? a[l + 1].x : res;

			ok(k->layernorm_forward(kc, BF, BT, C, 1e-5f, A->x, P(o[P_LN1W]), P(o[P_LN1B]),
						A->ln1, A->m1, A->r1), "ln1");
			linear(BT, 3 * C, C, A->ln1, P(o[P_QKVW]), P(o[P_QKVB]), A->qkv);
			ok(k->attention_forward(kc, BF, Bn, T, C, NH, A->qkv, A->atty, A->att, scratch),
			   "attention");
			linear(BT, C, C, A->atty, P(o[P_PROJW]), P(o[P_PROJB]), dbuf1);
			ok(k->add(kc, BF, BT * C, A->x, BT * C, dbuf1, A->x2), "residual");
			ok(k->layernorm_forward(kc, BF, BT, C, 1e-5f, A->x2, P(o[P_LN2W]), P(o[P_LN2B]),
						A->ln2, A->m2, A->r2), "ln2");
			linear(BT, 4 * C, C, A->ln2, P(o[P_FCW]), P(o[P_FCB]), A->fc);
			ok(k->gelu_forward(kc, BF, BT * 4 * C, A->fc, A->g), "gelu");
			linear(BT, C, 4 * C, A->g, P(o[P_FCPW]), P(o[P_FCPB]), dbuf1);
			ok(k->add(kc, BF, BT * C, A->x2, BT * C, dbuf1, out), "residual");
		}
		ok(k->layernorm_forward(kc, BF, BT, C, 1e-5f, res, P(lnfw_off), P(lnfb_off), lnf, mf,
					rf), "ln_f");
		ok(k->gemm(kc, BF, 0, 1, BT, V, C, 1.0f, lnf, C, 0, P(wte_off), C, 0, 0.0f, logits, V,
			   0, 1), "lm_head");
		ok(k->cross_entropy_forward(kc, BF, BT, V, logits, WEFT_I32, tgt, -1, probs, loss,
					    count), "cross_entropy");
		/* backward; dlogits go where the logits were */
		ok(k->zero(kc, dres, (size_t)BT * C * es), "zero");
		ok(k->zero(kc, logits, (size_t)BT * V * es), "zero");
		ok(k->cross_entropy_backward(kc, BF, BT, V, probs, WEFT_I32, tgt, -1, dloss, count,
					     logits), "cross_entropy back");
		ok(k->gemm(kc, BF, 0, 0, BT, C, V, 1.0f, logits, V, 0, P(wte_off), C, 0, 0.0f, dbuf1,
			   C, 0, 1), "dlnf");
		ok(k->gemm(kc, BF, 1, 0, V, C, BT, 1.0f, logits, V, 0, lnf, C, 0, 1.0f, G(wte_off), C,
			   0, 1), "dwte");
		ok(k->layernorm_backward(kc, BF, BT, C, res, P(lnfw_off), mf, rf, dbuf1, dres,
					 G(lnfw_off), G(lnfb_off)), "ln_f back");
		for (int l = L - 1; l >= 0; l--) {
			const int64_t *o = layer_off[l];
			struct acts *A = &a[l];

			linear_back(BT, C, 4 * C, A->g, P(o[P_FCPW]), dres, dbuf4, G(o[P_FCPW]),
				    G(o[P_FCPB]));
			ok(k->zero(kc, dfc, (size_t)BT * 4 * C * es), "zero");
			ok(k->gelu_backward(kc, BF, BT * 4 * C, A->fc, dbuf4, dfc), "gelu back");
			linear_back(BT, 4 * C, C, A->ln2, P(o[P_FCW]), dfc, dbuf1, G(o[P_FCW]),
				    G(o[P_FCB]));
			ok(k->layernorm_backward(kc, BF, BT, C, A->x2, P(o[P_LN2W]), A->m2, A->r2, dbuf1,
						 dres, G(o[P_LN2W]), G(o[P_LN2B])), "ln2 back");
			linear_back(BT, C, C, A->atty, P(o[P_PROJW]), dres, dbuf1, G(o[P_PROJW]),
				    G(o[P_PROJB]));
			ok(k->zero(kc, dbuf4, (size_t)BT * 3 * C * es), "zero"); /* dqkv */
			ok(k->attention_backward(kc, BF, Bn, T, C, NH, A->qkv, A->att, dbuf1, dbuf4,
						 scratch), "attention back");
			linear_back(BT, 3 * C, C, A->ln1, P(o[P_QKVW]), dbuf4, dbuf1, G(o[P_QKVW]),
				    G(o[P_QKVB]));
			ok(k->layernorm_backward(kc, BF, BT, C, A->x, P(o[P_LN1W]), A->m1, A->r1, dbuf1,
						 dres, G(o[P_LN1W]), G(o[P_LN1B])), "ln1 back");
		}
		ok(k->embedding_backward(kc, BF, BT, C, WEFT_I32, ids, dres, G(wte_off)), "wte back");
		ok(k->embedding_backward(kc, BF, BT, C, WEFT_I32, pos, dres, G(wpe_off)), "wpe back");
		{
			weft_cuda_adamw_coef cf;

			weft_cuda_adamw_coef_make(0.9, 0.95, 1e-8, 0.1, 6e-4, s + warmup + 1, 1.0, 1,
						  &cf);
			ok(ex->adamw_step(kc, &cf, nparams, master, BF, gr, mom, var, BF, w), "adamw");
		}
		ok(k->copy(kc, &hloss, loss, 4, WEFT_COPY_DEVICE_TO_HOST), "loss");
		dt = now_s() - t0;
		if (s >= 0) {
			total += dt;
			best = dt < best ? dt : best;
		}
		printf("step %lld: loss %.4f, %.1f ms\n", (long long)s, (double)hloss, dt * 1e3);
	}
	flops_tok = 6.0 * (double)nparams + 12.0 * L * C * T;
	{
		double step = total / (double)steps, tok = (double)BT / step;
		double mfu = tok * flops_tok / (peak * 1e12);

		printf("GPT-2 124M (%lld params, L %d C %d heads %d T %d V %d), batch %lld, bf16: "
		       "%.0f tokens/s, %.1f ms/step (best %.1f), %.1f TFLOP/s, MFU %.1f%% of %.0f "
		       "TFLOP/s\n", (long long)nparams, L, C, NH, T, V, (long long)Bn, tok, step * 1e3,
		       best * 1e3, tok * flops_tok / 1e12, 100.0 * mfu, peak);
		printf("RESULT tokens_per_s=%.0f mfu=%.4f step_ms=%.2f flops_per_token=%.4g "
		       "params=%lld\n", tok, mfu, step * 1e3, flops_tok, (long long)nparams);
	}
	free(hbuf);
	return 0;
}
