/* Elementwise kernels on CUDA against the CPU: add, mul (with broadcast
 * and in place), mul_backward, scale, axpy, fill, relu, gelu (tanh form)
 * and gelu_erf (exact form) forward and backward (backward accumulates into
 * a non-zero gradient), dropout (the
 * kept set must be identical to the CPU's, element for element: the
 * counter-based RNG is bit-identical), and convert (bit-exact round to
 * nearest even, ties, subnormals, overflow, inf and NaN). */
#include <stdint.h>

#include "cuda_test.h"

enum op {
	ADD, ADD_INPLACE, MUL, MUL_DA, MUL_DB, SCALE_INPLACE, AXPY, AXPY_ONE, FILL,
	RELU_F, RELU_B, GELU_F, GELU_B, DROP_F, DROP_B, GELU_ERF_F, GELU_ERF_B, NOPS
};

static const char *const op_names[NOPS] = {
	"add", "add in place", "mul", "mul_backward da", "mul_backward db", "scale in place",
	"axpy", "axpy alpha 1", "fill", "relu_forward", "relu_backward", "gelu_forward",
	"gelu_backward", "dropout_forward", "dropout_backward", "gelu_erf_forward",
	"gelu_erf_backward",
};

#define P_DROP 0.3f
#define KEY 0x1234abcdULL
#define FIRST 12345

/* Runs op on d: x (n), b (nb), acc (n: the output's or gradient's initial
 * contents; nb for MUL_DB). Writes the result (n, or nb for MUL_DB). */
static void run(ct_dev *d, enum op op, int64_t n, int64_t nb, const float *x, const float *b,
		const float *acc, float *res)
{
	int64_t nres = op == MUL_DB ? nb : n;
	void *xd = ct_in(d, x, n), *bd = ct_in(d, b, nb), *ad = ct_in(d, acc, nres);
	const weft_kernel_table *t = d->t;
	void *k = d->kctx;
	weft_dtype dt = d->dt;

	switch (op) {
	case ADD: WT_OK(t->add(k, dt, n, xd, nb, bd, ad)); break;
	case ADD_INPLACE: WT_OK(t->add(k, dt, n, xd, nb, bd, xd)); ad = xd; break;
	case MUL: WT_OK(t->mul(k, dt, n, xd, nb, bd, ad)); break;
	/* dy = x here: da += dy * b */
	case MUL_DA: WT_OK(t->mul_backward(k, dt, n, xd, nb, bd, xd, ad, NULL)); break;
	/* db += dy * a with a = dy = x */
	case MUL_DB: WT_OK(t->mul_backward(k, dt, n, xd, nb, bd, xd, NULL, ad)); break;
	case SCALE_INPLACE: WT_OK(t->scale(k, dt, n, -1.75f, xd, xd)); ad = xd; break;
	case AXPY: WT_OK(t->axpy(k, dt, n, 0.3f, xd, ad)); break;
	case AXPY_ONE: WT_OK(t->axpy(k, dt, n, 1.0f, xd, ad)); break;
	case FILL: WT_OK(t->fill(k, dt, n, 2.5f, ad)); break;
	case RELU_F: WT_OK(t->relu_forward(k, dt, n, xd, ad)); break;
	case RELU_B: WT_OK(t->relu_backward(k, dt, n, xd, xd, ad)); break;
	case GELU_F: WT_OK(t->gelu_forward(k, dt, n, xd, ad)); break;
	case GELU_B: WT_OK(t->gelu_backward(k, dt, n, xd, xd, ad)); break;
	case DROP_F: WT_OK(t->dropout_forward(k, dt, n, P_DROP, KEY, FIRST, xd, ad)); break;
	case DROP_B: WT_OK(t->dropout_backward(k, dt, n, P_DROP, KEY, FIRST, xd, ad)); break;
	case GELU_ERF_F: WT_OK(t->gelu_erf_forward(k, dt, n, xd, ad)); break;
	case GELU_ERF_B: WT_OK(t->gelu_erf_backward(k, dt, n, xd, xd, ad)); break;
	case NOPS: break;
	}
	ct_out(d, ad, nres, res);
	ct_release(d);
}

static void test_ops(weft_dtype dt)
{
	const int64_t n = 6000, nbs[] = { 6000, 40, 1 };

	for (int op = 0; op < NOPS; op++) {
		for (size_t bi = 0; bi < 3; bi++) {
			int64_t nb = nbs[bi], nres = op == MUL_DB ? nb : n;
			float *x = ct_random(7 + op, n, -3.0f, 3.0f, dt);
			float *b = ct_random(8 + op, nb, -2.0f, 2.0f, dt);
			float *acc = ct_random(9 + op, nres, -1.0f, 1.0f, dt);
			float *want = malloc((size_t)nres * sizeof(float));
			float *got = malloc((size_t)nres * sizeof(float));
			ct_dev cpu = ct_cpu_dev(), gpu = ct_gpu_dev(dt);
			char what[96];
			/* db sums n / nb products of size ~4; others are one or two roundings */
			double scale = op == MUL_DB ? 4.0 * sqrt((double)(n / nb)) : 4.0;

			if (bi > 0 && op != ADD && op != ADD_INPLACE && op != MUL && op != MUL_DA &&
			    op != MUL_DB)
				goto next; /* nb only matters to the broadcasting ops */
			WT_REQUIRE(want && got);
			if (op == DROP_F || op == DROP_B) /* no zeros in x: zeros mean dropped */
				for (int64_t i = 0; i < n; i++)
					x[i] = x[i] == 0.0f ? 1.0f : x[i];
			run(&cpu, (enum op)op, n, nb, x, b, acc, want);
			run(&gpu, (enum op)op, n, nb, x, b, acc, got);
			snprintf(what, sizeof(what), "%s (n %lld nb %lld)", op_names[op], (long long)n,
				 (long long)nb);
			ct_expect_close(what, dt, got, want, nres, ct_tol_for(dt, scale));
			if (op == DROP_F) {
				int64_t differ = 0, dropped = 0;

				for (int64_t i = 0; i < n; i++) {
					differ += (got[i] == 0.0f) != (want[i] == 0.0f);
					dropped += want[i] == 0.0f;
				}
				WT_CHECK(differ == 0);
				/* p = 0.3 of 6000: 1800 +- 4.5 sigma (sigma ~35) */
				WT_CHECK(dropped > 1640 && dropped < 1960);
			}
		next:
			free(x);
			free(b);
			free(acc);
			free(want);
			free(got);
		}
	}
}

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Whether 16-bit pattern u is a NaN of dtype dt (payloads may differ). */
static int nan16(weft_dtype dt, uint16_t u)
{
	if (dt == WEFT_BF16)
		return (u & 0x7f80u) == 0x7f80u && (u & 0x007fu);
	return (u & 0x7c00u) == 0x7c00u && (u & 0x03ffu);
}

/* convert: every pair of float dtypes, bit for bit against the CPU. */
static void test_convert(void)
{
	enum { N = 4096 + 16 };
	static float src[N];
	static uint16_t h16[N], g16[N];
	static float hf[N], gf[N];
	static const weft_dtype halves[] = { WEFT_BF16, WEFT_F16 };
	void *dsrc, *dmid, *dout;
	int64_t i = 0;

	/* specials: ties, subnormals, overflow, inf, NaN, signed zero */
	src[i++] = bits_f32(0x3f808000u); /* 1 + 2^-8: bf16 tie, rounds to even (down) */
	src[i++] = bits_f32(0x3f818000u); /* tie, rounds up */
	src[i++] = bits_f32(0x3f801000u); /* 1 + 2^-11: f16 tie */
	src[i++] = bits_f32(0x3f803000u); /* f16 tie, rounds up */
	src[i++] = 5.96e-8f;              /* smallest f16 subnormal */
	src[i++] = 2.9e-8f;               /* below half of it: 0 */
	src[i++] = 6.1e-5f;               /* near the f16 normal limit */
	src[i++] = 65504.0f;
	src[i++] = 65520.0f; /* f16 overflow */
	src[i++] = 3.0e38f;
	src[i++] = INFINITY;
	src[i++] = -INFINITY;
	src[i++] = -0.0f;
	src[i++] = 1e-40f; /* f32 subnormal */
	src[i++] = NAN;
	src[i++] = -1.5f;
	for (uint64_t k = 0; i < N; i++, k++) /* random bit patterns across exponents */
		src[i] = bits_f32((uint32_t)weft_rng_hash(77, k) & 0xbfffffffu);

	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, sizeof(src), &dsrc));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, sizeof(h16), &dmid));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, sizeof(src), &dout));
	WT_OK(ct_gpu->copy(ct_kctx, dsrc, src, sizeof(src), WEFT_COPY_HOST_TO_DEVICE));
	for (int h = 0; h < 2; h++) {
		weft_dtype dt = halves[h], other = halves[1 - h];
		int64_t bad = 0;

		/* f32 -> half */
		WT_OK(ct_cpu->convert(NULL, N, WEFT_F32, src, dt, h16));
		WT_OK(ct_gpu->convert(ct_kctx, N, WEFT_F32, dsrc, dt, dmid));
		WT_OK(ct_gpu->copy(ct_kctx, g16, dmid, sizeof(g16), WEFT_COPY_DEVICE_TO_HOST));
		for (int64_t j = 0; j < N; j++) {
			int nan_h = isnan(src[j]);

			if (nan_h ? !nan16(dt, g16[j]) : g16[j] != h16[j]) {
				if (bad++ < 5)
					fprintf(stderr, "convert f32 -> %s of %a (0x%08x): cuda 0x%04x, "
						"cpu 0x%04x\n", ct_name(dt), (double)src[j],
						(unsigned)f32_bits(src[j]), g16[j], h16[j]);
			}
		}
		WT_CHECK(bad == 0);
		/* half -> f32 (exact) and half -> the other half */
		WT_OK(ct_cpu->convert(NULL, N, dt, h16, WEFT_F32, hf));
		WT_OK(ct_gpu->convert(ct_kctx, N, dt, dmid, WEFT_F32, dout));
		WT_OK(ct_gpu->copy(ct_kctx, gf, dout, sizeof(gf), WEFT_COPY_DEVICE_TO_HOST));
		bad = 0;
		for (int64_t j = 0; j < N; j++)
			bad += isnan(hf[j]) ? !isnan(gf[j]) : f32_bits(hf[j]) != f32_bits(gf[j]);
		WT_CHECK(bad == 0);
		WT_OK(ct_cpu->convert(NULL, N, dt, h16, other, g16 + 0));
		memcpy(h16, g16, sizeof(h16)); /* cpu result of half -> other */
		WT_OK(ct_gpu->convert(ct_kctx, N, dt, dmid, other, dout));
		WT_OK(ct_gpu->copy(ct_kctx, g16, dout, sizeof(g16), WEFT_COPY_DEVICE_TO_HOST));
		bad = 0;
		for (int64_t j = 0; j < N; j++)
			bad += isnan(hf[j]) ? !nan16(other, g16[j]) : g16[j] != h16[j];
		WT_CHECK(bad == 0);
	}
	WT_OK(ct_gpu->synchronize(ct_kctx));
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, dsrc, sizeof(src));
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, dmid, sizeof(h16));
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, dout, sizeof(src));
}

int main(void)
{
	ct_setup("test_cuda_elementwise");
	for (int i = 0; i < CT_NDTYPES; i++)
		test_ops(ct_float_dtypes[i]);
	test_convert();
	ct_teardown();
	return wt_done("test_cuda_elementwise");
}
