/* Multi-head causal self-attention on the packed (B, T, 3C) projection.
 * Per (batch, head), each product over the whole head, told of its
 * triangle (cpu_gemm_1's enum cpu_tri): the scores are computed on and
 * left of the diagonal only, and the products that read the probabilities
 * (or their gradient) skip the zeros right of it, in blocks of 8 rows
 * (CPU_TRI_TILE rows where OpenBLAS does the products): a little over half
 * the work of the full square for long sequences. Each operand is packed
 * once per head and product. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "cpu_impl.h"
#include "kernels_cpu.h"

/* Heads run in parallel on the CPU threads, each head's GEMMs single-
 * threaded: OpenBLAS's own threading costs more than it gains on these
 * small products. */
static int64_t att_threads(int64_t heads)
{
	int64_t n = weft_kernels_cpu_get_threads();

	return n < 1 ? 1 : (n > heads ? (heads ? heads : 1) : n);
}

size_t cpu_attention_scratch(weft_dtype dt, int64_t B, int64_t T, int64_t C, int64_t nh)
{
	(void)dt;
	(void)C;
	/* dA for one head per thread, in backward */
	return (size_t)(T * T) * sizeof(float) * (size_t)att_threads(B * nh);
}

static int too_big(int64_t T, int64_t C)
{
	return T > 0x7fffffff / 4 || 3 * C > 0x7fffffff;
}

/* The first column right of row i's diagonal that the products with a
 * triangle read no further than (see enum cpu_tri). */
static int64_t zero_end(int64_t i, int64_t T)
{
	int64_t e = (i / CPU_TRI_TILE + 1) * CPU_TRI_TILE;

	return e < T ? e : T;
}

/* Row i's columns the softmax passes run over: the diagonal's whole
 * vector of CPU_LANES (right of the diagonal they write zeros), no further
 * than zero_end. */
static int64_t lanes_end(int64_t i, int64_t T)
{
	int64_t w = (i / CPU_LANES + 1) * CPU_LANES, e = zero_end(i, T);

	return w < e ? w : e;
}

/* Causal softmax of the T x T score matrix `a` (rows on and left of the
 * diagonal computed), in place; entries right of the diagonal, up to
 * zero_end, become 0, and nothing reads further right. The exponentials
 * are summed as they are written, in the lanes of cpu_sum. */
CPU_HOT
static void causal_softmax(float *a, int64_t T)
{
	for (int64_t i = 0; i < T; i++) {
		float *restrict row = a + i * T;
		float mx = cpu_max(row, i + 1), acc[CPU_LANES] = { 0 }, inv;
		int64_t w = lanes_end(i, T), e = zero_end(i, T), j = 0;

		for (; j + CPU_LANES <= w; j += CPU_LANES)
			for (int l = 0; l < CPU_LANES; l++) {
				float x = j + l <= i ? cpu_expf(row[j + l] - mx) : 0.0f;

				row[j + l] = x;
				acc[l] += x;
			}
		for (int l = 0; j + l < w; l++) {
			row[j + l] = j + l <= i ? cpu_expf(row[j + l] - mx) : 0.0f;
			acc[l] += row[j + l];
		}
		for (int v = CPU_LANES / 2; v > 0; v /= 2)
			for (int l = 0; l < v; l++)
				acc[l] += acc[l + v];
		inv = 1.0f / acc[0];
		for (j = 0; j < w; j++)
			row[j] *= inv;
		for (j = w; j < e; j++)
			row[j] = 0.0f;
	}
}

/* dS = A * (dA - rowsum(A * dA)) * scale, in place in da (T x T, rows on
 * and left of the diagonal computed); entries right of the diagonal, up to
 * zero_end, become 0. */
CPU_HOT
static void softmax_grad(const float *a, float *da, int64_t T, float scale)
{
	for (int64_t i = 0; i < T; i++) {
		const float *restrict ar = a + i * T;
		float *restrict dr = da + i * T;
		float dot = cpu_dot(ar, dr, i + 1);

		int64_t w = lanes_end(i, T), e = zero_end(i, T);

		for (int64_t jj = 0; jj < w; jj++)
			dr[jj] = jj <= i ? ar[jj] * (dr[jj] - dot) * scale : 0.0f;
		for (int64_t jj = w; jj < e; jj++)
			dr[jj] = 0.0f;
	}
}

typedef struct att_job {
	int backward;
	int write; /* backward: write dqkv rather than add to it */
	int64_t B, T, C, nh;
	const float *qkv, *att, *dout;
	float *out, *att_w, *dqkv, *scratch;
	int64_t first, step; /* heads first, first + step, ... */
} att_job;

static void head_forward(const att_job *j, int64_t b, int64_t h)
{
	int64_t T = j->T, C = j->C, hs = C / j->nh, C3 = 3 * C;
	float scale = 1.0f / sqrtf((float)hs);
	const float *q = j->qkv + b * T * C3 + h * hs;
	const float *k = q + C, *v = q + 2 * C;
	float *a = j->att_w + (b * j->nh + h) * T * T;
	float *o = j->out + b * T * C + h * hs;

	/* S = scale Q K^T on and left of the diagonal; A = softmax(S); O = A V */
	cpu_gemm_1(CPU_TRI_C_LOWER, 0, 1, T, T, hs, scale, q, C3, k, C3, 0.0f, a, T);
	causal_softmax(a, T);
	cpu_gemm_1(CPU_TRI_A_LOWER, 0, 0, T, hs, T, 1.0f, a, T, v, C3, 0.0f, o, C);
}

static void head_backward(const att_job *j, int64_t b, int64_t h, float *da)
{
	int64_t T = j->T, C = j->C, hs = C / j->nh, C3 = 3 * C;
	float scale = 1.0f / sqrtf((float)hs);
	const float *q = j->qkv + b * T * C3 + h * hs;
	const float *k = q + C, *v = q + 2 * C;
	const float *a = j->att + (b * j->nh + h) * T * T;
	const float *go = j->dout + b * T * C + h * hs;
	float *dq = j->dqkv + b * T * C3 + h * hs;
	float *dk = dq + C, *dv = dq + 2 * C;
	float beta = j->write ? 0.0f : 1.0f;

	/* dA = dO V^T on and left of the diagonal;  dV (+)= A^T dO */
	cpu_gemm_1(CPU_TRI_C_LOWER, 0, 1, T, T, hs, 1.0f, go, C, v, C3, 0.0f, da, T);
	cpu_gemm_1(CPU_TRI_A_UPPER, 1, 0, T, hs, T, 1.0f, a, T, go, C, beta, dv, C3);
	softmax_grad(a, da, T, scale);
	/* dQ (+)= dS K;  dK (+)= dS^T Q */
	cpu_gemm_1(CPU_TRI_A_LOWER, 0, 0, T, hs, T, 1.0f, da, T, k, C3, beta, dq, C3);
	cpu_gemm_1(CPU_TRI_A_UPPER, 1, 0, T, hs, T, 1.0f, da, T, q, C3, beta, dk, C3);
}

static void att_worker(const att_job *j)
{
	float *da = j->scratch ? j->scratch + j->first * j->T * j->T : NULL;

	for (int64_t i = j->first; i < j->B * j->nh; i += j->step) {
		if (j->backward)
			head_backward(j, i / j->nh, i % j->nh, da);
		else
			head_forward(j, i / j->nh, i % j->nh);
	}
}

/* Task t of att_run: the heads t, t + step, ... */
static void att_task(void *arg, int64_t t0, int64_t t1)
{
	for (int64_t t = t0; t < t1; t++) {
		att_job j = *(const att_job *)arg;

		j.first = t;
		att_worker(&j);
	}
}

/* Runs the job over all heads, one task a thread (cpu_parallel_tasks);
 * each head's products single-threaded. */
static void att_run(const att_job *tmpl)
{
	int64_t n = att_threads(tmpl->B * tmpl->nh);
	int blas_threads = (int)weft_kernels_cpu_get_threads();
	att_job j = *tmpl;

	if (n > 64) /* cpu_parallel_tasks' cap */
		n = 64;
	j.step = n;
	if (n == 1) {
		att_task(&j, 0, 1);
		return;
	}
	openblas_set_num_threads(1);
	cpu_parallel_tasks(n, att_task, &j);
	openblas_set_num_threads(blas_threads);
}

weft_status cpu_attention_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				  int64_t nh, const void *qkv, void *out, void *att,
				  void *scratch)
{
	att_job j = { .backward = 0, .B = B, .T = T, .C = C, .nh = nh, .qkv = qkv, .out = out,
		      .att_w = att };

	(void)kctx;
	(void)dt;
	(void)scratch;
	if (too_big(T, C))
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "attention: T %lld, C %lld exceed "
				      "OpenBLAS's 32-bit sizes", (long long)T, (long long)C);
	att_run(&j);
	return WEFT_OK;
}

static weft_status attention_backward(int write, int64_t B, int64_t T, int64_t C, int64_t nh,
				      const void *qkv, const void *att, const void *dout, void *dqkv,
				      void *scratch)
{
	att_job j = { .backward = 1, .write = write, .B = B, .T = T, .C = C, .nh = nh, .qkv = qkv, .att = att,
		      .dout = dout, .dqkv = dqkv, .scratch = scratch };

	if (!dqkv)
		return WEFT_OK;
	if (too_big(T, C))
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "attention: T %lld, C %lld exceed "
				      "OpenBLAS's 32-bit sizes", (long long)T, (long long)C);
	att_run(&j);
	return WEFT_OK;
}

weft_status cpu_attention_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				   int64_t nh, const void *qkv, const void *att,
				   const void *dout, void *dqkv, void *scratch)
{
	(void)kctx;
	(void)dt;
	return attention_backward(0, B, T, C, nh, qkv, att, dout, dqkv, scratch);
}

weft_status cpu_attention_backward_write(void *kctx, weft_dtype dt, int64_t B, int64_t T,
					 int64_t C, int64_t nh, const void *qkv, const void *att,
					 const void *dout, void *dqkv, void *scratch)
{
	(void)kctx;
	(void)dt;
	return attention_backward(1, B, T, C, nh, qkv, att, dout, dqkv, scratch);
}
