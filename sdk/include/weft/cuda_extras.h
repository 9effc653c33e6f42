/* weft/cuda_extras.h - the CUDA kernel library's extras, beyond the kernel
 * table: kernels the training loop uses that are not ops (the fused AdamW
 * step, the loss-scale check of 16-mixed precision, the clipping sum of
 * squares), the staging of host-side comm backends (pinned host memory,
 * a synchronous copy) and the event ordering of a comm stream after the
 * compute streams (since ABI 1.4).
 *
 * weft_kernels_cuda.so exports two C symbols: weft_kernels_entry (the
 * weft_kernel_table for `cuda`, weft/device.h) and weft_kernels_cuda_extras
 * (this table). Nobody outside the core looks the second one up: a plugin
 * asks the host, `host->cuda_extras(&ex, &file)` (weft/plugin.h, since ABI
 * 1.3), and the core finds the table once, in the library that holds the
 * process's CUDA kernel table. Needs no CUDA header: pointers are device
 * memory and `kctx` is the context from the kernel table's ctx_create.
 * Members are only appended: check WEFT_HAS_MEMBER(ex, weft_cuda_extras, m)
 * before using one newer than ABI 1.0, and that it is not NULL.
 */
#ifndef WEFT_CUDA_EXTRAS_H
#define WEFT_CUDA_EXTRAS_H

#include <math.h>
#include <stdint.h>

#include "weft/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The per-step coefficients of Adam/AdamW, in float, computed in double
 * exactly as the built-in adam/adamw optimizer plugin computes them
 * (plugins/optim/builtin/adam.c); weft_cuda_adamw_coef_make fills them. */
typedef struct weft_cuda_adamw_coef {
	float grad_scale;            /* gradients are multiplied by this as read */
	float decay_factor;          /* 1 - lr * weight_decay; 1 when no decay */
	float beta1, one_minus_beta1;
	float beta2, one_minus_beta2;
	float bias_correction2_sqrt; /* sqrt(1 - beta2^step) */
	float eps;
	float neg_step_size;         /* -lr / (1 - beta1^step) */
} weft_cuda_adamw_coef;

/* Fills *c for one AdamW step (`step` is 1-based; `decay` nonzero when
 * weight decay applies to the tensor). */
static inline void weft_cuda_adamw_coef_make(double beta1, double beta2, double eps,
					     double weight_decay, double lr, int64_t step,
					     double grad_scale, int decay,
					     weft_cuda_adamw_coef *c)
{
	double t = (double)step;
	double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);

	c->grad_scale = (float)grad_scale;
	c->decay_factor = decay && weight_decay != 0.0 ? (float)(1.0 - lr * weight_decay) : 1.0f;
	c->beta1 = (float)beta1;
	c->one_minus_beta1 = (float)(1.0 - beta1);
	c->beta2 = (float)beta2;
	c->one_minus_beta2 = (float)(1.0 - beta2);
	c->bias_correction2_sqrt = (float)sqrt(bc2);
	c->eps = (float)eps;
	c->neg_step_size = (float)-(lr / bc1);
}

/* The extras table: static storage in the kernel library, valid while it is
 * loaded (the life of the process). */
typedef struct weft_cuda_extras {
	weft_plugin_head head; /* name: "cuda-extras" */

	/* One fused AdamW step over n elements, in place, on kctx's stream:
	 *   g = grad * grad_scale; p *= decay_factor;
	 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g;
	 *   p += neg_step_size * m / (sqrt(v) / bias_correction2_sqrt + eps)
	 * param, exp_avg, exp_avg_sq are F32 (master weights and optimizer
	 * state); grad has dtype grad_dt (F32, BF16 or F16). Every operation is
	 * rounded separately in the plugin's order (no fused multiply-add), so
	 * the result is bit-identical to the CPU adamw plugin on the same
	 * inputs. When param_copy is not NULL the new parameters are also
	 * written there in copy_dt (the bf16/f16 compute copy of mixed
	 * precision). Asynchronous. Errors: WEFT_ERR_DTYPE for a grad_dt or
	 * copy_dt that is not floating; CUDA errors naming the sizes. */
	weft_status (*adamw_step)(void *kctx, const weft_cuda_adamw_coef *coef, int64_t n,
				  float *param, weft_dtype grad_dt, const void *grad,
				  float *exp_avg, float *exp_avg_sq, weft_dtype copy_dt,
				  void *param_copy);

	/* Dynamic loss scaling (16-mixed): multiplies n gradients of dtype dt
	 * by `factor` (1 / loss_scale) in place and sets the F32 device flag
	 * *found_nonfinite to 1.0 when any gradient (before scaling) is inf or
	 * NaN; the flag is only ever set, never cleared, so one flag can
	 * collect several tensors (zero it before the first). Asynchronous. */
	weft_status (*unscale_check)(void *kctx, weft_dtype dt, int64_t n, void *grad, float factor,
				     float *found_nonfinite);

	/* ---- since ABI 1.1: staging for host-side comm backends (comm gloo on
	 * CUDA tensors). Check WEFT_HAS_MEMBER(ex, weft_cuda_extras,
	 * copy_sync) first. ---- */

	/* Allocates `bytes` (0 counts as 1) of pinned, portable host memory
	 * (cudaHostAlloc), counted under `cat` with the host's mem_account.
	 * The caller owns it; free with host_free and the same cat and bytes.
	 * Blocking. Errors: WEFT_ERR_NOMEM naming the bytes and category. */
	weft_status (*host_alloc)(weft_mem_category cat, size_t bytes, void **out);
	/* Frees a block from host_alloc (cudaFreeHost, which waits for copies
	 * still using it). NULL is ignored. */
	void (*host_free)(weft_mem_category cat, void *ptr, size_t bytes);
	/* Copies `bytes` between memory of device `index` and host memory
	 * (`kind` says which side is the host; pinned host memory is fastest)
	 * on the device's legacy default stream, from any thread: the copy
	 * starts after all work issued earlier on every blocking stream of the
	 * device (each kernel-table context's stream is one), so a buffer
	 * that kernels are still writing is read only once they finished, and
	 * work issued on those streams later starts after it. Returns when the
	 * copy is complete. Device `index` is left current for the calling
	 * thread (one GPU per process; restoring a thread's default device 0
	 * would create a context on GPU 0 in every rank).
	 * Errors: CUDA's, naming the device, the bytes and the direction. */
	weft_status (*copy_sync)(int32_t index, void *dst, const void *src, size_t bytes,
				 weft_copy_kind kind);

	/* ---- since ABI 1.1: gradient clipping on the device. Check
	 * WEFT_HAS_MEMBER(ex, weft_cuda_extras, sum_squares) first. ---- */

	/* Stores in *out (host memory) the sum of x[i]^2 over n F32 device
	 * elements, accumulated in double in a fixed order (the same inputs
	 * give the same bits every time; the order differs from the CPU's
	 * weft_clip_sum_squares, so the two agree to double rounding, about
	 * 1e-15 relative). Runs on kctx's stream after the work issued there
	 * before and waits for the result. Scratch: the context's reduction
	 * buffer, kept (steady state allocates nothing). Errors: CUDA's,
	 * naming n and the device. */
	weft_status (*sum_squares)(void *kctx, int64_t n, const float *x, double *out);

	/* ---- since ABI 1.4: ordering a side stream after compute with
	 * events (the NCCL plugin's comm stream). Check
	 * WEFT_HAS_MEMBER(ex, weft_cuda_extras, stream_wait_compute) first. ---- */

	/* Makes `stream` (a cudaStream_t of device `index`, passed as void *)
	 * wait for the work issued so far on the stream of every live
	 * kernel-table context of that device: an event recorded on each
	 * context's stream (the context's own, reused) and waited for with
	 * cudaStreamWaitEvent. Work issued on the contexts after the call is
	 * not waited for; nothing else (no legacy default stream, no other
	 * stream) is. Why every context and not the caller's: a comm call
	 * carries no context (weft_comm_buf cannot grow), and one rank may
	 * compute on several (pp's micro-batches). Does not block the host;
	 * thread-safe (contexts are made and destroyed concurrently).
	 * Device `index` is left current for the calling thread. Errors:
	 * CUDA's, naming the device. */
	weft_status (*stream_wait_compute)(int32_t index, void *stream);
} weft_cuda_extras;

/* The symbol the kernel library exports and its type: for the core's lookup
 * and for kernel libraries (or test stand-ins) that provide the table. */
#define WEFT_CUDA_EXTRAS_SYMBOL "weft_kernels_cuda_extras"
typedef const weft_cuda_extras *(*weft_cuda_extras_fn)(void);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_CUDA_EXTRAS_H */
