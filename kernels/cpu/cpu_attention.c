/* Multi-head causal self-attention on the packed (B, T, 3C) projection.
 * Per (batch, head), in row tiles of TILE queries: a tile of queries only
 * sees keys up to its last row, so the GEMMs skip the masked upper
 * triangle beyond the tile (about half the work for long sequences). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "cpu_impl.h"
#include "kernels_cpu.h"

#define TILE 64

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

/* Causal softmax of rows [r0, r1) of the T x T score matrix `a`, in place;
 * entries right of the diagonal, up to column r1, become 0: the tile's
 * products read columns [0, r1) only, and nothing reads further right. */
CPU_HOT
static void causal_softmax(float *a, int64_t T, int64_t r0, int64_t r1)
{
	for (int64_t i = r0; i < r1; i++) {
		float *restrict row = a + i * T;
		float mx = cpu_max(row, i + 1), inv;

		for (int64_t j = 0; j <= i; j++)
			row[j] = cpu_expf(row[j] - mx);
		inv = 1.0f / cpu_sum(row, i + 1);
		for (int64_t j = 0; j <= i; j++)
			row[j] *= inv;
		for (int64_t j = i + 1; j < r1; j++)
			row[j] = 0.0f;
	}
}

/* Rows [r0, r1) of dS = A * (dA - rowsum(A * dA)) * scale, in place in
 * da (rows of T); entries right of the diagonal (up to r1) become 0. */
CPU_HOT
static void softmax_grad(const float *a, float *da, int64_t T, int64_t r0, int64_t r1,
			 float scale)
{
	for (int64_t i = r0; i < r1; i++) {
		const float *restrict ar = a + i * T;
		float *restrict dr = da + i * T;
		float dot = cpu_dot(ar, dr, i + 1);

		for (int64_t jj = 0; jj <= i; jj++)
			dr[jj] = ar[jj] * (dr[jj] - dot) * scale;
		for (int64_t jj = i + 1; jj < r1; jj++)
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

	for (int64_t r0 = 0; r0 < T; r0 += TILE) {
		int64_t r1 = r0 + TILE < T ? r0 + TILE : T;

		cpu_gemm_1(0, 1, r1 - r0, r1, hs, scale, q + r0 * C3, C3, k, C3, 0.0f, a + r0 * T, T);
		causal_softmax(a, T, r0, r1);
		cpu_gemm_1(0, 0, r1 - r0, hs, r1, 1.0f, a + r0 * T, T, v, C3, 0.0f, o + r0 * C, C);
	}
}

/* The tiles run from the last to the first: the last tile's products
 * cover every key, so in write mode its dK and dV products write all T
 * rows (beta 0) and the earlier tiles add; each tile's dQ rows are its
 * own (beta 0 in write mode). */
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
	float beta_q = j->write ? 0.0f : 1.0f;

	for (int64_t r0 = T > 0 ? (T - 1) / TILE * TILE : -1; r0 >= 0; r0 -= TILE) {
		int64_t r1 = r0 + TILE < T ? r0 + TILE : T, nr = r1 - r0;
		float beta_kv = j->write && r1 == T ? 0.0f : 1.0f;

		/* dA = dO V^T;  dV += A^T dO */
		cpu_gemm_1(0, 1, nr, r1, hs, 1.0f, go + r0 * C, C, v, C3, 0.0f, da + r0 * T, T);
		cpu_gemm_1(1, 0, r1, hs, nr, 1.0f, a + r0 * T, T, go + r0 * C, C, beta_kv, dv, C3);
		softmax_grad(a, da, T, r0, r1, scale);
		/* dQ += dS K;  dK += dS^T Q */
		cpu_gemm_1(0, 0, nr, hs, r1, 1.0f, da + r0 * T, T, k, C3, beta_q, dq + r0 * C3, C3);
		cpu_gemm_1(1, 0, r1, hs, nr, 1.0f, da + r0 * T, T, q + r0 * C3, C3, beta_kv, dk, C3);
	}
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
