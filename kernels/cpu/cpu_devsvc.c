/* The CPU table's device services for strategies (weft/device.h, since ABI
 * 1.3): many-range copies, the sum of squares over many ranges, and the
 * optimizer step over ranges. On the CPU "device memory" is host memory,
 * so each is a loop that returns when done; what makes them worth a
 * member is that a strategy written against them runs unchanged on a GPU.
 *
 * Bit-identity. sum_squares_ranges sums each range exactly as weft's
 * gradient clipping does (core/train/clip.c, the host's clip_sum_squares):
 * four double accumulators, and for long ranges fixed chunks whose sums
 * are added in order, so a strategy that moves to it keeps its norms to
 * the bit. optim_step rounds every operation in the order of the built-in
 * adam/adamw plugin (plugins/optim/builtin/adam.c) and this file is
 * compiled with -ffp-contract=off as that plugin is, so a step here gives
 * the plugin's bits. tests/tensor/test_kernels_devsvc.c checks both. */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

/* ---- copy_ranges ---------------------------------------------------------- */

static weft_status check_range(const char *kernel, size_t i, int64_t a, int64_t b, int64_t count)
{
	if (a < 0 || b < 0 || count < 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "%s: range %zu has a negative offset "
				      "or count (%lld, %lld, %lld)", kernel, i, (long long)a,
				      (long long)b, (long long)count);
	return WEFT_OK;
}

weft_status cpu_copy_ranges(void *kctx, size_t elem_bytes, const weft_copy_range *ranges,
			    size_t n, void *dst, const void *src)
{
	(void)kctx;
	if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "copy_ranges: elements of %zu bytes; "
				      "1, 2, 4 or 8 are accepted", elem_bytes);
	for (size_t i = 0; i < n; i++) {
		const weft_copy_range *r = &ranges[i];
		weft_status st = check_range("copy_ranges", i, r->dst, r->src, r->count);

		if (st)
			return st;
		if (r->count)
			memmove((char *)dst + (size_t)r->dst * elem_bytes,
				(const char *)src + (size_t)r->src * elem_bytes,
				(size_t)r->count * elem_bytes);
	}
	return WEFT_OK;
}

/* ---- sum_squares_ranges: clipping's sum, range by range ------------------- */

/* The constants and the order of core/train/clip.c. */
#define SQ_CHUNK ((int64_t)4096)
#define SQ_MAX_CHUNKS 1024
#define SQ_SPLIT (32 * SQ_CHUNK)

static double sum_squares(const float *x, int64_t len)
{
	double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
	int64_t i = 0;

	for (; i + 4 <= len; i += 4) {
		s0 += (double)x[i] * (double)x[i];
		s1 += (double)x[i + 1] * (double)x[i + 1];
		s2 += (double)x[i + 2] * (double)x[i + 2];
		s3 += (double)x[i + 3] * (double)x[i + 3];
	}
	for (; i < len; i++)
		s0 += (double)x[i] * (double)x[i];
	return (s0 + s1) + (s2 + s3);
}

typedef struct sq_job {
	const float *x;
	int64_t len, chunk;
	double *part;
} sq_job;

static void sq_chunks(void *arg, int64_t c0, int64_t c1)
{
	const sq_job *j = arg;

	for (int64_t c = c0; c < c1; c++) {
		int64_t lo = c * j->chunk, n = j->len - lo < j->chunk ? j->len - lo : j->chunk;

		j->part[c] = sum_squares(j->x + lo, n);
	}
}

static double range_sum_squares(const float *x, int64_t len)
{
	double total = 0.0, part[SQ_MAX_CHUNKS];
	sq_job j = { .x = x, .len = len, .chunk = SQ_CHUNK, .part = part };
	int64_t chunks;

	if (len < SQ_SPLIT)
		return sum_squares(x, len);
	if (len > SQ_CHUNK * SQ_MAX_CHUNKS)
		j.chunk = (len + SQ_MAX_CHUNKS - 1) / SQ_MAX_CHUNKS;
	chunks = (len + j.chunk - 1) / j.chunk;
	cpu_parallel_for(chunks, 1, sq_chunks, &j);
	for (int64_t c = 0; c < chunks; c++)
		total += part[c];
	return total;
}

weft_status cpu_sum_squares_ranges(void *kctx, const float *x, const weft_elem_range *ranges,
				   size_t n, double *out)
{
	double total = 0.0;

	(void)kctx;
	*out = 0.0;
	for (size_t i = 0; i < n; i++) {
		weft_status st = check_range("sum_squares_ranges", i, ranges[i].offset, 0,
					     ranges[i].count);

		if (st)
			return st;
		total += range_sum_squares(x + ranges[i].offset, ranges[i].count);
	}
	*out = total;
	return WEFT_OK;
}

/* ---- optim_step: the Adam family, as the built-in plugin rounds it -------- */


typedef struct adam_job {
	const weft_optim_kernel *k;
	float *p, *m, *v, *vmax;
	const float *g;
	int l2, dec;
} adam_job;

/* The update of elements [i0, i1): plugins/optim/builtin/adam.c's adam_run,
 * operation for operation. */
static void adam_part(void *arg, int64_t i0, int64_t i1)
{
	const adam_job *j = arg;
	const weft_optim_kernel *c = j->k;
	float *restrict p = j->p, *restrict m = j->m, *restrict v = j->v;
	float *restrict vmax = j->vmax;
	const float *restrict g = j->g;
	const float gs = c->grad_scale, wd = c->weight_decay, keep = c->decay_factor;
	const float b1 = c->beta1, b1c = c->one_minus_beta1;
	const float b2 = c->beta2, b2c = c->one_minus_beta2;
	const float bc2 = c->bias_correction2_sqrt, eps = c->eps, nss = c->neg_step_size;

	for (int64_t i = i0; i < i1; i++) {
		float gi = g[i] * gs;
		float pi = p[i];
		float mi, vi, denom;

		if (j->l2)
			gi = gi + wd * pi;
		if (j->dec)
			pi = pi * keep;
		mi = m[i] * b1 + b1c * gi;
		vi = v[i] * b2 + b2c * gi * gi;
		m[i] = mi;
		v[i] = vi;
		if (vmax) {
			vi = vmax[i] > vi ? vmax[i] : vi;
			vmax[i] = vi;
		}
		denom = sqrtf(vi) / bc2 + eps;
		p[i] = pi + nss * mi / denom;
	}
}

/* ---- optim_step: SGD, as the built-in plugin rounds it ------------------- */

typedef struct sgd_job {
	const weft_optim_kernel *k;
	float *p, *buf;
	const float *g;
	int l2;
} sgd_job;

/* The update of elements [i0, i1): plugins/optim/builtin/sgd.c's sgd_run,
 * operation for operation. */
static void sgd_part(void *arg, int64_t i0, int64_t i1)
{
	const sgd_job *j = arg;
	const weft_optim_kernel *c = j->k;
	float *restrict p = j->p, *restrict buf = j->buf;
	const float *restrict g = j->g;
	const float gs = c->grad_scale, wd = c->weight_decay, mom = c->momentum;
	const float damp1 = c->one_minus_dampening, neg_lr = c->neg_lr;

	for (int64_t i = i0; i < i1; i++) {
		float d = g[i] * gs;

		if (j->l2)
			d = d + wd * p[i];
		if (buf) {
			float b = c->first ? d : buf[i] * mom + damp1 * d;

			buf[i] = b;
			d = c->nesterov ? d + mom * b : b;
		}
		p[i] = p[i] + neg_lr * d;
	}
}

weft_status cpu_optim_step(void *kctx, const weft_optim_kernel *k, const weft_optim_range *ranges,
			   size_t n, float *params, const float *grads, float *const *slots)
{
	(void)kctx;
	if (!k || k->struct_size < sizeof(*k))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "optim_step: the update description "
				      "is %u bytes, older than this table's %zu; rebuild the caller "
				      "against this SDK", k ? k->struct_size : 0u, sizeof(*k));
	if (k->kind != WEFT_OPTIM_KERNEL_ADAM && k->kind != WEFT_OPTIM_KERNEL_SGD)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "optim_step: the cpu table has no kernel "
				      "for update kind %d (it has adam/adamw, kind %d, and sgd, "
				      "kind %d)", (int)k->kind, (int)WEFT_OPTIM_KERNEL_ADAM,
				      (int)WEFT_OPTIM_KERNEL_SGD);
	for (size_t i = 0; i < n; i++) {
		const weft_optim_range *r = &ranges[i];
		weft_status st = check_range("optim_step", i, r->param, r->grad, r->count);
		adam_job j;

		if (!st && r->state < 0)
			st = check_range("optim_step", i, r->state, 0, 0);
		if (st)
			return st;
		if (k->kind == WEFT_OPTIM_KERNEL_SGD) {
			sgd_job sj = {
				.k = k,
				.p = params + r->param,
				.g = grads + r->grad,
				.buf = k->momentum_on ? slots[0] + r->state : NULL,
				.l2 = r->decay && k->l2,
			};

			if (r->count)
				cpu_parallel_for(r->count, CPU_GRAIN, sgd_part, &sj);
			continue;
		}
		j = (adam_job){
			.k = k,
			.p = params + r->param,
			.g = grads + r->grad,
			.m = slots[0] + r->state,
			.v = slots[1] + r->state,
			.vmax = k->amsgrad ? slots[2] + r->state : NULL,
			.l2 = r->decay && k->l2,
			.dec = r->decay && k->decoupled,
		};
		if (r->count)
			cpu_parallel_for(r->count, CPU_GRAIN, adam_part, &j);
	}
	return WEFT_OK;
}
