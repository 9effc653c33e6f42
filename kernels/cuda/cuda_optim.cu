/* Training-loop kernels that are not ops (kernels_cuda.h): the fused AdamW
 * step and the loss-scale check of 16-mixed precision. */
#include "cuda_dev.cuh"

#define THREADS 256

/* Every operation is rounded on its own (the _rn intrinsics are never
 * contracted into fused multiply-adds), in the CPU adamw plugin's order,
 * so the results are bit-identical to it. */
__global__ void k_adamw(int64_t n, weft_cuda_adamw_coef c, float *p, int gdt, const void *g,
			float *m, float *v, int cdt, void *copy)
{
	GRID_STRIDE(i, n) {
		float gi = __fmul_rn(ld(g, i, gdt), c.grad_scale);
		float pi = p[i];
		float mi, vi, denom;

		if (c.decay_factor != 1.0f)
			pi = __fmul_rn(pi, c.decay_factor);
		mi = __fadd_rn(__fmul_rn(m[i], c.beta1), __fmul_rn(c.one_minus_beta1, gi));
		vi = __fadd_rn(__fmul_rn(v[i], c.beta2),
			       __fmul_rn(__fmul_rn(c.one_minus_beta2, gi), gi));
		m[i] = mi;
		v[i] = vi;
		denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bias_correction2_sqrt), c.eps);
		pi = __fadd_rn(pi, __fdiv_rn(__fmul_rn(c.neg_step_size, mi), denom));
		p[i] = pi;
		if (copy)
			st(copy, i, cdt, pi);
	}
}

__global__ void k_unscale_check(int64_t n, int dt, void *g, float factor, float *found)
{
	bool bad = false;

	GRID_STRIDE(i, n) {
		float x = ld(g, i, dt);

		if (!isfinite(x))
			bad = true;
		st(g, i, dt, x * factor);
	}
	if (bad)
		*found = 1.0f; /* a benign race: every writer stores the same value */
}

static int floating(weft_dtype dt)
{
	return dt == WEFT_F32 || dt == WEFT_BF16 || dt == WEFT_F16;
}

extern "C" weft_status cuda_adamw_step(void *kctx, const weft_cuda_adamw_coef *coef, int64_t n,
				       float *param, weft_dtype grad_dt, const void *grad,
				       float *exp_avg, float *exp_avg_sq, weft_dtype copy_dt,
				       void *param_copy)
{
	const char *name = "adamw_step";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);

	if (ret)
		return ret;
	if (!floating(grad_dt) || (param_copy && !floating(copy_dt)))
		return cuda_host->error_set(WEFT_ERR_DTYPE, "cuda kernel %s: gradients (%s) and "
					    "the parameter copy (%s) must be f32, bf16 or f16",
					    name, cuda_dt_name(grad_dt), cuda_dt_name(copy_dt));
	if (n <= 0)
		return WEFT_OK;
	k_adamw<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, *coef, param, grad_dt, grad,
								   exp_avg, exp_avg_sq, copy_dt,
								   param_copy);
	return cuda_launched(c, name, "n %lld grads %s", (long long)n, cuda_dt_name(grad_dt));
}

extern "C" weft_status cuda_unscale_check(void *kctx, weft_dtype dt, int64_t n, void *grad,
					  float factor, float *found_nonfinite)
{
	const char *name = "unscale_check";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);

	if (ret)
		return ret;
	if (!floating(dt))
		return cuda_host->error_set(WEFT_ERR_DTYPE, "cuda kernel %s: gradients must be f32, "
					    "bf16 or f16, not %s", name, cuda_dt_name(dt));
	if (n <= 0)
		return WEFT_OK;
	k_unscale_check<<<grid_for(n, THREADS), THREADS, 0, c->stream>>>(n, dt, grad, factor,
									   found_nonfinite);
	return cuda_launched(c, name, "%s n %lld", cuda_dt_name(dt), (long long)n);
}
