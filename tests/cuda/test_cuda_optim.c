/* The CUDA extras (kernels/cuda/kernels_cuda.h): the fused AdamW step is
 * bit-identical to the built-in CPU adamw plugin over several steps, with
 * and without weight decay, with F32 and BF16 gradients and a grad_scale,
 * and its bf16 parameter copy is the rounded master weight; the loss-scale
 * check scales gradients and flags inf and NaN, never clearing the flag. */
#include <dlfcn.h>
#include <stdint.h>

#include "cuda_test.h"
#include "cuda/kernels_cuda.h"
#include "plugin/loader_impl.h"
#include "weft/optim.h"

#define OPTIM_SO WEFT_PLUGIN_DIR_FOR_TESTS "/optim_builtin.so"

static const weft_cuda_extras *extras;

static const weft_optim_ops *find_adamw(void **handle)
{
	const weft_plugin_desc *desc;

	WT_OK(weft_plugin_open(OPTIM_SO, handle, &desc));
	for (size_t i = 0; i < desc->count; i++) {
		const weft_plugin_head *h = desc->items[i].vtable;

		if (desc->items[i].kind == WEFT_PLUGIN_OPTIM && !strcmp(h->name, "adamw"))
			return desc->items[i].vtable;
	}
	WT_REQUIRE(!"optim_builtin.so has no adamw");
	return NULL;
}

static int64_t bits_differ(const float *a, const float *b, int64_t n)
{
	int64_t d = 0;

	for (int64_t i = 0; i < n; i++)
		d += memcmp(&a[i], &b[i], 4) != 0;
	return d;
}

static void test_adamw(const weft_optim_ops *adamw, weft_dtype grad_dt)
{
	enum { N = 5000, SPLIT = 3000 };
	const weft_optim_segment segs[2] = {
		{ .name = "w", .offset = 0, .numel = SPLIT, .ndim = 2, .decay = 1 },
		{ .name = "b", .offset = SPLIT, .numel = N - SPLIT, .ndim = 1, .decay = 0 },
	};
	static float p[N], m[N], v[N], gp[N], gm[N], gv[N], copy[N], want_copy[N];
	uint16_t copy16[N];
	float *g = ct_random(600, N, -1.0f, 1.0f, grad_dt), *slots[2] = { m, v };
	void *state = NULL, *dp, *dm, *dv, *dg, *dcopy;
	ct_dev gpu = ct_gpu_dev(grad_dt);
	float *init = ct_random(601, N, -2.0f, 2.0f, WEFT_F32);

	memcpy(p, init, sizeof(p));
	memset(m, 0, sizeof(m));
	memset(v, 0, sizeof(v));
	WT_OK(adamw->create(NULL, &state));
	dp = ct_in_raw(&gpu, p, sizeof(p));
	dm = ct_in_raw(&gpu, m, sizeof(m));
	dv = ct_in_raw(&gpu, v, sizeof(v));
	dg = ct_in(&gpu, g, N);
	dcopy = ct_alloc(&gpu, (size_t)N * 2);
	for (int64_t step = 1; step <= 3; step++) {
		weft_optim_step_info info = { .struct_size = sizeof(info), .step = step,
					      .lr = 1e-3 * (double)step, .grad_scale = 0.5 };

		WT_OK(adamw->step(state, segs, 2, p, g, slots, 0, N, &info));
		for (int s = 0; s < 2; s++) {
			weft_cuda_adamw_coef c;
			int64_t lo = segs[s].offset;

			/* the plugin's defaults: betas (0.9, 0.999), eps 1e-8, weight decay 0.01 */
			weft_cuda_adamw_coef_make(0.9, 0.999, 1e-8, 0.01, info.lr, step,
						  info.grad_scale, segs[s].decay, &c);
			WT_OK(extras->adamw_step(ct_kctx, &c, segs[s].numel, (float *)dp + lo, grad_dt,
						 (const char *)dg + lo * (int64_t)ct_size(grad_dt),
						 (float *)dm + lo, (float *)dv + lo, WEFT_BF16,
						 (char *)dcopy + lo * 2));
		}
	}
	WT_OK(ct_gpu->copy(ct_kctx, gp, dp, sizeof(gp), WEFT_COPY_DEVICE_TO_HOST));
	WT_OK(ct_gpu->copy(ct_kctx, gm, dm, sizeof(gm), WEFT_COPY_DEVICE_TO_HOST));
	WT_OK(ct_gpu->copy(ct_kctx, gv, dv, sizeof(gv), WEFT_COPY_DEVICE_TO_HOST));
	WT_OK(ct_gpu->copy(ct_kctx, copy16, dcopy, sizeof(copy16), WEFT_COPY_DEVICE_TO_HOST));
	/* bit for bit */
	WT_CHECK(bits_differ(gp, p, N) == 0);
	WT_CHECK(bits_differ(gm, m, N) == 0);
	WT_CHECK(bits_differ(gv, v, N) == 0);
	WT_CHECK(bits_differ(p, init, N) == N); /* the step moved every parameter */
	WT_OK(ct_cpu->convert(NULL, N, WEFT_BF16, copy16, WEFT_F32, copy));
	ct_round(WEFT_BF16, memcpy(want_copy, p, sizeof(p)), N);
	WT_CHECK(bits_differ(copy, want_copy, N) == 0);

	/* a gradient dtype that is not floating is refused */
	WT_FAILS(extras->adamw_step(ct_kctx, &(weft_cuda_adamw_coef){ 0 }, N, dp, WEFT_I32, dg, dm,
				    dv, WEFT_BF16, NULL),
		 WEFT_ERR_DTYPE, "adamw_step", "must be f32, bf16 or f16");
	adamw->destroy(state);
	ct_release(&gpu);
	free(g);
	free(init);
}

static void test_unscale(weft_dtype dt)
{
	enum { N = 3000 };
	float *g = ct_random(700, N, -4.0f, 4.0f, dt), got[N], flag = -1.0f, zero = 0.0f;
	ct_dev gpu = ct_gpu_dev(dt);
	void *dg = ct_in(&gpu, g, N);
	float *dflag = ct_in_raw(&gpu, &zero, 4);

	/* finite: scaled exactly (a power of two), flag stays 0 */
	WT_OK(extras->unscale_check(ct_kctx, dt, N, dg, 0.25f, dflag));
	ct_out(&gpu, dg, N, got);
	ct_out_f32(&gpu, dflag, 1, &flag);
	WT_CHECK(flag == 0.0f);
	{
		int64_t bad = 0;

		for (int64_t i = 0; i < N; i++)
			bad += got[i] != g[i] * 0.25f;
		WT_CHECK(bad == 0);
	}
	/* one inf, then one NaN in a second tensor: the flag is set and stays */
	g[1234] = INFINITY;
	ct_release(&gpu);
	dg = ct_in(&gpu, g, N);
	dflag = ct_in_raw(&gpu, &zero, 4);
	WT_OK(extras->unscale_check(ct_kctx, dt, N, dg, 0.5f, dflag));
	ct_out_f32(&gpu, dflag, 1, &flag);
	WT_CHECK(flag == 1.0f);
	g[1234] = 1.0f;
	dg = ct_in(&gpu, g, N);
	WT_OK(extras->unscale_check(ct_kctx, dt, N, dg, 0.5f, dflag));
	ct_out_f32(&gpu, dflag, 1, &flag);
	WT_CHECK(flag == 1.0f); /* never cleared */
	g[7] = NAN;
	dg = ct_in(&gpu, g, N);
	flag = -1.0f;
	dflag = ct_in_raw(&gpu, &zero, 4);
	WT_OK(extras->unscale_check(ct_kctx, dt, N, dg, 0.5f, dflag));
	ct_out_f32(&gpu, dflag, 1, &flag);
	WT_CHECK(flag == 1.0f);
	ct_release(&gpu);
	free(g);
}

int main(void)
{
	void *kh, *oh = NULL;
	weft_cuda_extras_fn fn;
	const weft_optim_ops *adamw;

	ct_setup("test_cuda_optim");
	kh = ct_kernels_handle(ct_gpu);
	WT_REQUIRE(kh != NULL); /* loaded by weft_kernels_get in ct_setup */
	fn = (weft_cuda_extras_fn)(uintptr_t)dlsym(kh, WEFT_CUDA_EXTRAS_SYMBOL);
	WT_REQUIRE(fn != NULL);
	extras = fn();
	WT_CHECK(!strcmp(extras->head.name, "cuda-extras"));
	adamw = find_adamw(&oh);
	test_adamw(adamw, WEFT_F32);
	test_adamw(adamw, WEFT_BF16);
	for (int i = 0; i < CT_NDTYPES; i++)
		test_unscale(ct_float_dtypes[i]);
	dlclose(kh);
	dlclose(oh);
	ct_teardown();
	return wt_done("test_cuda_optim");
}
