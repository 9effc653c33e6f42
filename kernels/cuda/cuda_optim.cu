/* Training-loop kernels that are not ops (kernels_cuda.h): the fused AdamW
 * step and the loss-scale check of 16-mixed precision; and the device
 * services of strategies (weft/device.h, since ABI 1.3): the optimizer
 * step over ranges and the many-range copy. */
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

/* One range of weft_kernel_table.optim_step (the Adam family), each
 * operation rounded on its own in the order of the built-in plugin
 * (plugins/optim/builtin/adam.c), so the bits are the plugin's. */
__global__ void k_adam_range(int64_t n, weft_optim_kernel c, int l2, int dec, float *p,
			     const float *g, float *m, float *v, float *vmax)
{
	GRID_STRIDE(i, n) {
		float gi = __fmul_rn(g[i], c.grad_scale);
		float pi = p[i];
		float mi, vi, denom;

		if (l2)
			gi = __fadd_rn(gi, __fmul_rn(c.weight_decay, pi));
		if (dec)
			pi = __fmul_rn(pi, c.decay_factor);
		mi = __fadd_rn(__fmul_rn(m[i], c.beta1), __fmul_rn(c.one_minus_beta1, gi));
		vi = __fadd_rn(__fmul_rn(v[i], c.beta2),
			       __fmul_rn(__fmul_rn(c.one_minus_beta2, gi), gi));
		m[i] = mi;
		v[i] = vi;
		if (vmax) {
			vi = vmax[i] > vi ? vmax[i] : vi;
			vmax[i] = vi;
		}
		denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bias_correction2_sqrt), c.eps);
		p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(c.neg_step_size, mi), denom));
	}
}

/* One range of optim_step for SGD, rounded as plugins/optim/builtin/sgd.c
 * rounds it. */
__global__ void k_sgd_range(int64_t n, weft_optim_kernel c, int l2, float *p, const float *g,
			    float *buf)
{
	GRID_STRIDE(i, n) {
		float d = __fmul_rn(g[i], c.grad_scale);

		if (l2)
			d = __fadd_rn(d, __fmul_rn(c.weight_decay, p[i]));
		if (buf) {
			float b = c.first ? d : __fadd_rn(__fmul_rn(buf[i], c.momentum),
							  __fmul_rn(c.one_minus_dampening, d));

			buf[i] = b;
			d = c.nesterov ? __fadd_rn(d, __fmul_rn(c.momentum, b)) : b;
		}
		p[i] = __fadd_rn(p[i], __fmul_rn(c.neg_lr, d));
	}
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

extern "C" weft_status cuda_optim_step(void *kctx, const weft_optim_kernel *k,
				       const weft_optim_range *ranges, size_t n, float *params,
				       const float *grads, float *const *slots)
{
	const char *name = "optim_step";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);

	if (ret)
		return ret;
	if (!k || k->struct_size < sizeof(*k))
		return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "cuda kernel %s: the update "
					    "description is %u bytes, older than this table's %zu; "
					    "rebuild the caller against this SDK", name,
					    k ? k->struct_size : 0u, sizeof(*k));
	if (k->kind != WEFT_OPTIM_KERNEL_ADAM && k->kind != WEFT_OPTIM_KERNEL_SGD)
		return cuda_host->error_set(WEFT_ERR_UNSUPPORTED, "cuda kernel %s: no kernel for "
					    "update kind %d (there are adam/adamw, kind %d, and "
					    "sgd, kind %d)", name, (int)k->kind,
					    (int)WEFT_OPTIM_KERNEL_ADAM, (int)WEFT_OPTIM_KERNEL_SGD);
	for (size_t i = 0; i < n; i++) {
		const weft_optim_range *r = &ranges[i];

		if (r->param < 0 || r->grad < 0 || r->state < 0 || r->count < 0)
			return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "cuda kernel %s: range %zu "
						    "has a negative offset or count", name, i);
		if (r->count == 0)
			continue;
		if (k->kind == WEFT_OPTIM_KERNEL_SGD) {
			k_sgd_range<<<grid_for(r->count, THREADS), THREADS, 0, c->stream>>>(
				r->count, *k, r->decay && k->l2, params + r->param,
				grads + r->grad, k->momentum_on ? slots[0] + r->state : NULL);
			ret = cuda_launched(c, name, "sgd, range %zu of %zu, n %lld", i, n,
					    (long long)r->count);
			if (ret)
				return ret;
			continue;
		}
		k_adam_range<<<grid_for(r->count, THREADS), THREADS, 0, c->stream>>>(
			r->count, *k, r->decay && k->l2, r->decay && k->decoupled,
			params + r->param, grads + r->grad, slots[0] + r->state,
			slots[1] + r->state, k->amsgrad ? slots[2] + r->state : NULL);
		ret = cuda_launched(c, name, "range %zu of %zu, n %lld", i, n,
				    (long long)r->count);
		if (ret)
			return ret;
	}
	return WEFT_OK;
}

extern "C" weft_status cuda_copy_ranges(void *kctx, size_t elem_bytes,
					const weft_copy_range *ranges, size_t n, void *dst,
					const void *src)
{
	const char *name = "copy_ranges";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);

	if (ret)
		return ret;
	if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8)
		return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "cuda %s: elements of %zu bytes; "
					    "1, 2, 4 or 8 are accepted", name, elem_bytes);
	for (size_t i = 0; i < n; i++) {
		const weft_copy_range *r = &ranges[i];
		cudaError_t err;

		if (r->dst < 0 || r->src < 0 || r->count < 0)
			return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "cuda %s: range %zu has a "
						    "negative offset or count (%lld, %lld, %lld)",
						    name, i, (long long)r->dst, (long long)r->src,
						    (long long)r->count);
		if (r->count == 0)
			continue;
		err = cudaMemcpyAsync((char *)dst + (size_t)r->dst * elem_bytes,
				      (const char *)src + (size_t)r->src * elem_bytes,
				      (size_t)r->count * elem_bytes, cudaMemcpyDeviceToDevice,
				      c->stream);
		if (err != cudaSuccess)
			return cuda_fail(name, c->index, err, "range %zu of %zu, %lld elements of %zu "
					 "bytes", i, n, (long long)r->count, elem_bytes);
	}
	return WEFT_OK;
}
