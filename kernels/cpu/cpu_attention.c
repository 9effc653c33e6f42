/* Causal self-attention on a packed projection: multi-head on GPT's
 * (B, T, 3C), and with grouped-query heads on (B, T, (nh + 2 nkv) hs)
 * (q | k | v; MHA is nkv = nh), one implementation for both.
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

/* Whether T or a qkv row of L elements is past OpenBLAS's 32-bit sizes. */
static int too_big(int64_t T, int64_t L)
{
	return T > 0x7fffffff / 4 || L > 0x7fffffff;
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
	int64_t B, T, nh, nkv, hs;
	const float *qkv, *att, *dout;
	float *out, *att_w, *dqkv, *scratch;
	int64_t units;       /* forward: B * nh heads; backward: B * nkv groups */
	int64_t first, step; /* units first, first + step, ... */
} att_job;

/* Row lengths: qkv's (nh + 2 nkv) hs, out's nh hs. Query head h reads kv
 * head h / (nh / nkv); its q is at column h hs, that kv head's k at
 * (nh + kv) hs and v at (nh + nkv + kv) hs. */
static int64_t ld_qkv(const att_job *j)
{
	return (j->nh + 2 * j->nkv) * j->hs;
}

static void head_forward(const att_job *j, int64_t b, int64_t h)
{
	int64_t T = j->T, hs = j->hs, L = ld_qkv(j), kv = h / (j->nh / j->nkv);
	float scale = 1.0f / sqrtf((float)hs);
	const float *row = j->qkv + b * T * L;
	const float *q = row + h * hs, *k = row + (j->nh + kv) * hs;
	const float *v = row + (j->nh + j->nkv + kv) * hs;
	float *a = j->att_w + (b * j->nh + h) * T * T;
	float *o = j->out + b * T * j->nh * hs + h * hs;

	/* S = scale Q K^T on and left of the diagonal; A = softmax(S); O = A V */
	cpu_gemm_1(CPU_TRI_C_LOWER, 0, 1, T, T, hs, scale, q, L, k, L, 0.0f, a, T);
	causal_softmax(a, T);
	cpu_gemm_1(CPU_TRI_A_LOWER, 0, 0, T, hs, T, 1.0f, a, T, v, L, 0.0f, o, j->nh * hs);
}

/* Query head h's share of the gradients; `first` says it is the first of
 * its group, which writes dk and dv when the job writes. */
static void head_backward(const att_job *j, int64_t b, int64_t h, int first, float *da)
{
	int64_t T = j->T, hs = j->hs, L = ld_qkv(j), C = j->nh * hs, kv = h / (j->nh / j->nkv);
	float scale = 1.0f / sqrtf((float)hs);
	const float *row = j->qkv + b * T * L;
	const float *q = row + h * hs, *k = row + (j->nh + kv) * hs;
	const float *v = row + (j->nh + j->nkv + kv) * hs;
	const float *a = j->att + (b * j->nh + h) * T * T;
	const float *go = j->dout + b * T * C + h * hs;
	float *drow = j->dqkv + b * T * L;
	float *dq = drow + h * hs, *dk = drow + (j->nh + kv) * hs;
	float *dv = drow + (j->nh + j->nkv + kv) * hs;
	float beta_q = j->write ? 0.0f : 1.0f, beta_kv = j->write && first ? 0.0f : 1.0f;

	/* dA = dO V^T on and left of the diagonal;  dV (+)= A^T dO */
	cpu_gemm_1(CPU_TRI_C_LOWER, 0, 1, T, T, hs, 1.0f, go, C, v, L, 0.0f, da, T);
	cpu_gemm_1(CPU_TRI_A_UPPER, 1, 0, T, hs, T, 1.0f, a, T, go, C, beta_kv, dv, L);
	softmax_grad(a, da, T, scale);
	/* dQ (+)= dS K;  dK (+)= dS^T Q */
	cpu_gemm_1(CPU_TRI_A_LOWER, 0, 0, T, hs, T, 1.0f, da, T, k, L, beta_q, dq, L);
	cpu_gemm_1(CPU_TRI_A_UPPER, 1, 0, T, hs, T, 1.0f, da, T, q, L, beta_kv, dk, L);
}

/* Forward: every head is a unit of its own. Backward: a unit is a kv head
 * of one batch row with its group of query heads, run in turn, so no two
 * threads add to one kv head's gradient. */
static void att_worker(const att_job *j)
{
	float *da = j->scratch ? j->scratch + j->first * j->T * j->T : NULL;
	int64_t g = j->nh / j->nkv;

	for (int64_t i = j->first; i < j->units; i += j->step) {
		if (!j->backward) {
			head_forward(j, i / j->nh, i % j->nh);
			continue;
		}
		for (int64_t m = 0; m < g; m++)
			head_backward(j, i / j->nkv, (i % j->nkv) * g + m, m == 0, da);
	}
}

/* Task t of att_run: the units t, t + step, ... */
static void att_task(void *arg, int64_t t0, int64_t t1)
{
	for (int64_t t = t0; t < t1; t++) {
		att_job j = *(const att_job *)arg;

		j.first = t;
		att_worker(&j);
	}
}

/* Runs the job over all units, one task a thread (cpu_parallel_tasks);
 * each head's products single-threaded. */
static void att_run(const att_job *tmpl)
{
	int64_t n = att_threads(tmpl->units);
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

static weft_status att_forward(int64_t B, int64_t T, int64_t nh, int64_t nkv, int64_t hs,
			       const void *qkv, void *out, void *att)
{
	att_job j = { .backward = 0, .B = B, .T = T, .nh = nh, .nkv = nkv, .hs = hs, .qkv = qkv,
		      .out = out, .att_w = att, .units = B * nh };

	if (too_big(T, (nh + 2 * nkv) * hs))
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "attention: T %lld, row %lld exceed "
				      "OpenBLAS's 32-bit sizes", (long long)T,
				      (long long)((nh + 2 * nkv) * hs));
	if (B > 0 && T > 0 && nh > 0 && hs > 0)
		att_run(&j);
	return WEFT_OK;
}

static weft_status att_backward(int write, int64_t B, int64_t T, int64_t nh, int64_t nkv,
				int64_t hs, const void *qkv, const void *att, const void *dout,
				void *dqkv, void *scratch)
{
	att_job j = { .backward = 1, .write = write, .B = B, .T = T, .nh = nh, .nkv = nkv,
		      .hs = hs, .qkv = qkv, .att = att, .dout = dout, .dqkv = dqkv,
		      .scratch = scratch, .units = B * nkv };

	if (!dqkv || B <= 0 || T <= 0 || nh <= 0 || hs <= 0)
		return WEFT_OK;
	if (too_big(T, (nh + 2 * nkv) * hs))
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "attention: T %lld, row %lld exceed "
				      "OpenBLAS's 32-bit sizes", (long long)T,
				      (long long)((nh + 2 * nkv) * hs));
	att_run(&j);
	return WEFT_OK;
}

weft_status cpu_attention_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				  int64_t nh, const void *qkv, void *out, void *att,
				  void *scratch)
{
	(void)kctx;
	(void)dt;
	(void)scratch;
	return att_forward(B, T, nh, nh, C / nh, qkv, out, att);
}

weft_status cpu_attention_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T, int64_t C,
				   int64_t nh, const void *qkv, const void *att,
				   const void *dout, void *dqkv, void *scratch)
{
	(void)kctx;
	(void)dt;
	return att_backward(0, B, T, nh, nh, C / nh, qkv, att, dout, dqkv, scratch);
}

weft_status cpu_attention_backward_write(void *kctx, weft_dtype dt, int64_t B, int64_t T,
					 int64_t C, int64_t nh, const void *qkv, const void *att,
					 const void *dout, void *dqkv, void *scratch)
{
	(void)kctx;
	(void)dt;
	return att_backward(1, B, T, nh, nh, C / nh, qkv, att, dout, dqkv, scratch);
}

size_t cpu_attention_gqa_scratch(weft_dtype dt, int64_t B, int64_t T, int64_t nh, int64_t nkv,
				 int64_t hs)
{
	(void)dt;
	(void)nh;
	(void)hs;
	/* dA for one group per thread, in backward */
	return (size_t)(T * T) * sizeof(float) * (size_t)att_threads(B * nkv);
}

weft_status cpu_attention_gqa_forward(void *kctx, weft_dtype dt, int64_t B, int64_t T,
				      int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				      void *out, void *att, void *scratch)
{
	(void)kctx;
	(void)dt;
	(void)scratch;
	return att_forward(B, T, nh, nkv, hs, qkv, out, att);
}

weft_status cpu_attention_gqa_backward(void *kctx, weft_dtype dt, int64_t B, int64_t T,
				       int64_t nh, int64_t nkv, int64_t hs, const void *qkv,
				       const void *att, const void *dout, void *dqkv,
				       void *scratch)
{
	(void)kctx;
	(void)dt;
	return att_backward(0, B, T, nh, nkv, hs, qkv, att, dout, dqkv, scratch);
}
