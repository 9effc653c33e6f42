/* weft/kernel_args.h - the argument structs the kernel table's members
 * take (weft/kernels.h includes this file): copy and element ranges,
 * optimizer-step descriptions, rotary positions, with the inline helpers
 * that fill or read them. */
#ifndef WEFT_KERNEL_ARGS_H
#define WEFT_KERNEL_ARGS_H

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- since ABI 1.3: the device services of strategies ------------------ */

/* One stretch of a many-range copy (weft_kernel_table.copy_ranges): `count`
 * elements from element `src` of the source to element `dst` of the
 * destination. */
typedef struct weft_copy_range {
	int64_t dst, src, count;
} weft_copy_range;

/* One stretch of elements [offset, offset + count) of a buffer
 * (weft_kernel_table.sum_squares_ranges). */
typedef struct weft_elem_range {
	int64_t offset, count;
} weft_elem_range;

/* One stretch of an optimizer step on the device (weft_kernel_table.
 * optim_step): `count` elements, the first at params[param],
 * grads[grad] and slots[k][state] (element offsets; the three arrays may
 * be laid out differently, as a ZeRO shard's packed gradients are).
 * decay != 0: the weight decay of the update applies to these elements
 * (the host's per-tensor decision, weft_optim_segment.decay). */
typedef struct weft_optim_range {
	int64_t param, grad, state, count;
	int32_t decay;
	int32_t reserved; /* 0 */
} weft_optim_range;

/* Updates a device optimizer step can run (weft_optim_kernel.kind). Values
 * are part of the ABI: only ever appended. */
typedef enum weft_optim_kernel_kind {
	/* Adam and AdamW (weft/optim.h, weft_optim_adam_params), slots
	 * exp_avg, exp_avg_sq (and max_exp_avg_sq with amsgrad). */
	WEFT_OPTIM_KERNEL_ADAM = 0,
	/* SGD with momentum, dampening, Nesterov and L2 decay (weft/optim.h,
	 * weft_optim_sgd_params), slot momentum_buffer when momentum != 0. */
	WEFT_OPTIM_KERNEL_SGD = 1
} weft_optim_kernel_kind;

/* The per-step description of a device optimizer update: the optimizer
 * plugin's hyper-parameters and the step's learning rate, turned into the
 * float coefficients the built-in plugin computes (in double, then
 * rounded to float), so that a kernel that rounds every operation as the
 * plugin does is bit-identical to it. weft_optim_kernel_adam and
 * weft_optim_kernel_sgd fill it; members a kind does not use are 0. */
typedef struct weft_optim_kernel {
	uint32_t struct_size;        /* sizeof as the caller saw it */
	int32_t kind;                /* weft_optim_kernel_kind */
	int32_t l2;                  /* the L2 term (decay ranges): g += weight_decay p */
	int32_t decoupled;           /* AdamW's decay (decay ranges): p *= decay_factor */
	int32_t amsgrad;             /* slot 2 keeps max(v); v is read from it */
	float grad_scale;            /* gradients are multiplied by this as read */
	float weight_decay;          /* the L2 coefficient */
	float decay_factor;          /* 1 - lr * weight_decay */
	float beta1, one_minus_beta1;
	float beta2, one_minus_beta2;
	float bias_correction2_sqrt; /* sqrt(1 - beta2^step) */
	float eps;
	float neg_step_size;         /* -lr / (1 - beta1^step) */
	/* SGD */
	int32_t momentum_on;         /* slot 0 is the momentum buffer */
	int32_t first;               /* step 1: the buffer starts as the gradient */
	int32_t nesterov;
	float momentum, one_minus_dampening;
	float neg_lr;                /* -lr */
} weft_optim_kernel;

/* Fills *k for one Adam (decoupled 0) or AdamW (decoupled 1) step: `step`
 * is 1-based, lr the step's learning rate, grad_scale the factor the
 * gradients are read with (clipping, averaging), the rest the optimizer's
 * hyper-parameters (weft_optim_adam_params). The element update is
 *   g = g * grad_scale;  g = g + weight_decay * p  (l2, decay ranges)
 *   p = p * decay_factor                         (decoupled, decay ranges)
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g
 *   vmax = max(vmax, v), used for v              (amsgrad)
 *   p = p + neg_step_size m / (sqrt(v) / bias_correction2_sqrt + eps)
 * each operation rounded to float in that order (no fused multiply-add). */
static inline void weft_optim_kernel_adam(weft_optim_kernel *k, int decoupled, int amsgrad,
					  double beta1, double beta2, double eps,
					  double weight_decay, double lr, int64_t step,
					  double grad_scale)
{
	double t = (double)step;
	double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);

	memset(k, 0, sizeof(*k)); /* members this kind does not use are 0 */
	k->struct_size = (uint32_t)sizeof(*k);
	k->kind = WEFT_OPTIM_KERNEL_ADAM;
	k->l2 = !decoupled && weight_decay != 0.0;
	k->decoupled = decoupled && weight_decay != 0.0;
	k->amsgrad = amsgrad != 0;
	k->grad_scale = (float)grad_scale;
	k->weight_decay = (float)weight_decay;
	k->decay_factor = (float)(1.0 - lr * weight_decay);
	k->beta1 = (float)beta1;
	k->one_minus_beta1 = (float)(1.0 - beta1);
	k->beta2 = (float)beta2;
	k->one_minus_beta2 = (float)(1.0 - beta2);
	k->bias_correction2_sqrt = (float)sqrt(bc2);
	k->eps = (float)eps;
	k->neg_step_size = (float)-(lr / bc1);
}

/* Fills *k for one SGD step (weft_optim_sgd_params' update), `step`
 * 1-based:
 *   d = g * grad_scale;  d = d + weight_decay * p   (l2, decay ranges)
 *   b = d (first), else b = momentum * b + one_minus_dampening * d
 *   d = nesterov ? d + momentum * b : b             (momentum_on)
 *   p = p + neg_lr * d
 * each operation rounded to float in that order. */
static inline void weft_optim_kernel_sgd(weft_optim_kernel *k, double momentum,
					 double dampening, int nesterov, double weight_decay,
					 double lr, int64_t step, double grad_scale)
{
	memset(k, 0, sizeof(*k)); /* members this kind does not use are 0 */
	k->struct_size = (uint32_t)sizeof(*k);
	k->kind = WEFT_OPTIM_KERNEL_SGD;
	k->l2 = weight_decay != 0.0;
	k->grad_scale = (float)grad_scale;
	k->weight_decay = (float)weight_decay;
	k->momentum_on = momentum != 0.0;
	k->first = step == 1;
	k->nesterov = nesterov != 0;
	k->momentum = (float)momentum;
	k->one_minus_dampening = (float)(1.0 - dampening);
	k->neg_lr = (float)-lr;
}

/* ---- since ABI 1.4: rotary position embeddings ------------------------ */

/* Frequency scalings of rotary embeddings (weft_rope.scaling). Values are
 * part of the ABI: only ever appended. */
typedef enum weft_rope_scaling {
	WEFT_ROPE_PLAIN = 0,  /* inv_freq = theta^(-2i / head_dim) */
	WEFT_ROPE_LLAMA3 = 1  /* Llama 3.1's: Hugging Face's rope_type "llama3" */
} weft_rope_scaling;

/* The frequencies of a rotary embedding (weft_kernel_table.rope_forward),
 * as Hugging Face's config.json gives them: rope_theta, and for "llama3"
 * rope_scaling's factor, low_freq_factor, high_freq_factor and
 * original_max_position_embeddings. */
typedef struct weft_rope {
	uint32_t struct_size;   /* sizeof as the caller saw it */
	int32_t scaling;        /* weft_rope_scaling */
	double theta;           /* base, e.g. 10000 or 500000 */
	double factor;          /* LLAMA3: 8 for Llama 3.1 */
	double low_freq_factor; /* LLAMA3: 1 */
	double high_freq_factor;/* LLAMA3: 4 */
	double original_max_positions; /* LLAMA3: 8192 */
} weft_rope;

/* The inverse frequency of rotation pair i (0 <= i < head_dim / 2), the
 * value every kernel uses (computed in double, rounded once to float):
 *   f = theta^(-2i / head_dim)
 * and with LLAMA3, with w = 2 pi / f, lo = original_max_positions /
 * low_freq_factor and hi = original_max_positions / high_freq_factor:
 * f / factor when w > lo; f when w < hi; otherwise
 * (1 - s) f / factor + s f with s = (original_max_positions / w -
 * low_freq_factor) / (high_freq_factor - low_freq_factor). */
static inline float weft_rope_inv_freq(const weft_rope *r, int64_t head_dim, int64_t i)
{
	double f = 1.0 / pow(r->theta, (double)(2 * i) / (double)head_dim);

	if (r->scaling == WEFT_ROPE_LLAMA3) {
		double w = 2.0 * 3.14159265358979323846 / f;
		double lo = r->original_max_positions / r->low_freq_factor;
		double hi = r->original_max_positions / r->high_freq_factor;

		if (w > lo) {
			f = f / r->factor;
		} else if (!(w < hi)) {
			double s = (r->original_max_positions / w - r->low_freq_factor) /
				   (r->high_freq_factor - r->low_freq_factor);

			f = (1.0 - s) * f / r->factor + s * f;
		}
	}
	return (float)f;
}

#ifdef __cplusplus
}
#endif

#endif /* WEFT_KERNEL_ARGS_H */
