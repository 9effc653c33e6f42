/* Whole models against PyTorch: the fixtures (tests/fixtures/
 * gen_model_fixtures.py) hold a GPT and two MLP classifiers with PyTorch's
 * initial weights, one batch, and the float64 reference's logits, loss
 * and every parameter gradient, rounded to float32.
 *
 * Tolerances, |weft - torch| <= atol + rtol |torch|:
 * - loss: rtol 1e-5. weft computes in float32; the loss is a mean of ~20
 *   log-softmax terms of size ~4, whose float32 rounding is ~1e-7 relative
 *   each, so 1e-5 leaves two orders of magnitude for summation order.
 * - logits: rtol 1e-4, atol 1e-5: logits are O(1) products of K <= 128
 *   term dot products through 2 blocks; float32 error is ~1e-6 absolute.
 * - gradients: rtol 1e-4, atol 1e-6 (the brief's 1e-4 relative). Gradients
 *   are O(1e-3..1e-1); atol 1e-6 covers elements that are sums cancelling
 *   to near zero, where a relative bound is meaningless, and it is still 3
 *   orders of magnitude below a typical element, so a wrong gradient (a
 *   missing term, a transposed layout, an untied head) fails.
 * The unused wpe rows (batch shorter than block_size) must be exactly 0.
 */
#include "nn_test_util.h"

#define LOSS_RTOL 1e-5
#define LOGIT_RTOL 1e-4
#define LOGIT_ATOL 1e-5
#define GRAD_RTOL 1e-4
#define GRAD_ATOL 1e-6

static void check_case(const char *name)
{
	char path[1024], file[256];
	weft_model *m = fixture_model(name, NULL);
	weft_params *ps = weft_model_params(m);
	weft_ctx_options copt = { 0 };
	weft_ctx *ctx;
	weft_st_file *g;
	weft_tensor *x, *targets, *want_logits, *want_loss;
	weft_model_output o;
	weft_eval_result ev;
	size_t n_grads = 0;
	float loss;

	snprintf(file, sizeof(file), "%s_golden.safetensors", name);
	WT_OK(weft_st_open(fixture(file, path, sizeof(path)), &g));
	x = golden_tensor(g, "x");
	targets = golden_tensor(g, "targets");
	want_logits = golden_tensor(g, "logits");
	want_loss = golden_tensor(g, "loss");
	WT_OK(weft_ctx_create(&copt, &ctx));

	weft_ctx_step_begin(ctx);
	WT_OK(weft_model_loss(m, ctx, &(weft_batch){ .inputs = x, .targets = targets }, &o));
	WT_OK(weft_backward(ctx, o.loss));
	WT_OK(weft_tensor_copy_to_host(o.loss, &loss, sizeof(loss)));
	fprintf(stderr, "%s: loss %.9g, torch %.9g\n", name, loss, *(float *)want_loss->data);
	WT_CLOSE(loss, *(float *)want_loss->data, LOSS_RTOL, 0);
	WT_CHECK(weft_tensor_numel(o.logits) == weft_tensor_numel(want_logits));
	CHECK_ALL_CLOSE("logits", (float *)o.logits->data, (float *)want_logits->data,
			weft_tensor_numel(want_logits), LOGIT_RTOL, LOGIT_ATOL);

	for (size_t i = 0; i < weft_params_count(ps); i++) {
		weft_tensor *p = weft_params_at(ps, i);
		char gname[600];
		const weft_st_tensor *gt;
		weft_tensor *want;

		snprintf(gname, sizeof(gname), "grad.%s", p->name);
		gt = weft_st_find(g, gname);
		WT_CHECK(gt != NULL);
		if (!gt)
			continue;
		want = golden_tensor(g, gname);
		WT_CHECK(weft_tensor_numel(want) == weft_tensor_numel(p));
		CHECK_ALL_CLOSE(p->name, (float *)p->grad->data, (float *)want->data,
				weft_tensor_numel(p), GRAD_RTOL, GRAD_ATOL);
		weft_tensor_free(want);
	}
	for (size_t i = 0; i < g->count; i++)
		n_grads += !strncmp(g->tensors[i].name, "grad.", 5);
	WT_CHECK(n_grads == weft_params_count(ps)); /* no gradient left unchecked */

	if (weft_model_get_class(m) == WEFT_MODEL_GPT) {
		weft_tensor *wpe = weft_params_find(ps, "transformer.wpe.weight");
		int64_t T = x->shape[1], C = wpe->shape[1], nonzero = 0;

		for (int64_t j = T * C; j < weft_tensor_numel(wpe); j++)
			nonzero += ((float *)wpe->grad->data)[j] != 0.0f;
		WT_CHECK(T < wpe->shape[0]);
		WT_CHECK(nonzero == 0);
	}

	/* the eval path: same loss with grad off; accuracy counts against the
	 * reference logits' arg-max (ties are measure-zero with these values) */
	{
		int64_t V = want_logits->shape[want_logits->ndim - 1];
		int64_t rows = weft_tensor_numel(targets), correct = 0, counted = 0;
		const float *wl = want_logits->data;
		const int64_t *t = targets->data;
		int64_t ignore = weft_model_ignore_index(m);

		for (int64_t r = 0; r < rows; r++) {
			int64_t best = 0;

			if (t[r] == ignore)
				continue;
			for (int64_t v = 1; v < V; v++)
				if (wl[r * V + v] > wl[r * V + best])
					best = v;
			counted++;
			correct += best == t[r];
		}
		weft_ctx_step_begin(ctx);
		WT_OK(weft_model_eval(m, ctx, &(weft_batch){ .inputs = x, .targets = targets }, &ev));
		WT_CLOSE(ev.loss, *(float *)want_loss->data, LOSS_RTOL, 0);
		WT_CHECK(ev.counted == counted && counted == rows - 1);
		WT_CHECK(ev.correct == correct);
		WT_CHECK(weft_ctx_grad_enabled(ctx) && weft_ctx_training(ctx)); /* restored */
	}

	weft_tensor_free(x);
	weft_tensor_free(targets);
	weft_tensor_free(want_logits);
	weft_tensor_free(want_loss);
	weft_st_close(g);
	weft_ctx_free(ctx);
	weft_model_free(m);
}

int main(void)
{
	check_case("gpt");
	check_case("mlp_relu");
	check_case("mlp_gelu");
	return wt_done("test_nn_golden");
}
