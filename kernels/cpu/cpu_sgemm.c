/* F32 matrix product on AVX-512, for the model-sized products of training
 * (linear layers forward and backward), where it replaces OpenBLAS's sgemm
 * (kernels/cpu/cpu_blas.c chooses).
 *
 * An 8 x 48 block of C lives in 24 registers; each step along k loads
 * three vectors of B and broadcasts eight elements of A (8 x 32 blocks,
 * two vectors, where n is a multiple of 32 and not of 48: attention's
 * 64-wide heads). Per block of k (at most 384) and of columns (at most
 * 768), B is packed into panels of 48 columns (a copy, or a transpose by
 * 16 x 16 blocks when B is transposed), 1.2 MB that stays in L2; then for
 * each 8 rows of A (12 KB, in L1 while the kernel walks every panel) the
 * kernel runs over all the panels, prefetching each panel's rows ahead.
 * (Blocks of k 256 / 384 / 512 and columns 512 to 1536 measured within 2 %
 * of each other in the gpt-small-cpu step; 384 x 768 was among the best.)
 *
 * Two differences from a general BLAS matter at these sizes:
 *  - A is read where it lies when its rows run along k (C = A B and
 *    C = A B^T: every forward and input-gradient product), so A, the large
 *    activation, is never copied; only a transposed A (the weight
 *    gradients, C = A^T B) is packed, two blocks of 8 columns at a time
 *    (a 64-byte line of each row of A read once).
 *  - beta = 0 writes C without reading it (no pass zeroing C first), and
 *    a linear layer's bias is added as C is written (no pass copying it
 *    into C first).
 *
 * Element (i, j) of C is the F32 sum, one FMA per term in k order, of
 * each k block, the blocks added to C in order; the k blocks depend on k
 * alone, so the bits of a row of C do not depend on the other rows, on n,
 * or on the thread count.
 *
 * With a triangle (enum cpu_tri, causal attention's products), a block of
 * 8 rows skips the panels right of its diagonal (C_LOWER), or the k where
 * its rows of A hold only zeros (A_LOWER, A_UPPER).
 *
 * The threads share the work by columns (no operand packed twice when A
 * is read in place) or by rows (when A is packed and B is the smaller),
 * one slice per thread; attention's per-head products run on one thread
 * each (threads = 1). */
#include <stdint.h>

#include "cpu_impl.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(WEFT_NO_SGEMM)
#include <immintrin.h>
#include <pthread.h>

#include "kernels_cpu.h"

#define SG_TARGET __attribute__((target("avx512f,fma")))
#define SG_INLINE __attribute__((always_inline)) inline

enum {
	MR = 8,     /* rows of the C block */
	NVMAX = 3,  /* 16-float vectors across it: 3 (48 columns), or 2 where n is a
		       multiple of 32 and not of 48 (attention's 64-wide heads) */
	KC = 384,   /* most k of a block (A's 8 rows: 12 KB, in L1) */
	NC = 768,   /* most columns of B packed at once (384 x 768 floats: 1.2 MB, in L2) */
	SG_PF = 16, /* rows of a B panel prefetched ahead of the kernel (measured: 4 to 24
		       rows ahead give the same; none is 8 % slower) */
	SG_PFB = 8, /* pack_b fetches B this many rows (a copy) or 64 floats (a
		       transpose) ahead, pack_a A this many rows: packing B's share of
		       a 1-thread gpt-small-cpu step 5.3-5.6 % -> 4.7-5.2 %, A's
		       (with the loops around the kernel) 3.4-3.8 % -> 3.3-3.4 % */
};

static int sg_ok = -1;

static void sg_probe(void)
{
	__builtin_cpu_init();
	sg_ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}

int cpu_sgemm_usable(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, sg_probe);
	return sg_ok;
}

typedef struct sg_args {
	int ta, tb;
	int64_t m, n, k, lda, ldb, ldc;
	float alpha, beta;
	const float *a, *b, *bias;
	float *c;
	float *sum; /* with ta: sum[i] += A(l, i) over l in order, or NULL */
	int nv, nr; /* vectors and columns of a C block (nr = 16 nv) */
	int tri; /* enum cpu_tri: which triangle of C is wanted, or of op(A) is not zero */
	int by_rows; /* slices of rows (else of columns) */
	int64_t parts;
	float *scratch; /* SG_SCRATCH floats a part */
} sg_args;

/* The size of k blocks: k in equal blocks of at most KC. */
static int64_t k_block(int64_t k)
{
	int64_t nb = (k + KC - 1) / KC;

	return (k + nb - 1) / nb;
}

/* The mask of vector v's lanes among the first nr columns. */
static SG_INLINE __mmask16 lanes(int nr, int v)
{
	int r = nr - 16 * v;

	return r >= 16 ? (__mmask16)0xffff : r <= 0 ? (__mmask16)0 : (__mmask16)((1u << r) - 1);
}

/* C[mr x nr] = alpha * sum_l A(i, l) Bp[l][:] + (bias ? bias[:] : beta *
 * C) (beta 0 or a bias: C not read), A(i, l) at a[i * rs + l * cs]; C past
 * nr columns untouched. */
SG_TARGET static SG_INLINE void kernel(int64_t kc, const float *a, int64_t rs, int64_t cs,
				       const float *bp, float *c, int64_t ldc, float alpha,
				       float beta, const float *bias, const int nv, int mr, int nr)
{
	__m512 acc[MR][NVMAX];

	for (int i = 0; i < MR; i++)
		for (int v = 0; v < nv; v++)
			acc[i][v] = _mm512_setzero_ps();
	for (int i = 0; i < MR && i < mr; i++)
		for (int v = 0; v < nv; v++)
			_mm_prefetch((const char *)(c + i * ldc + 16 * v), _MM_HINT_T0);
	for (int64_t l = 0; l < kc; l++) {
		const float *al = a + l * cs;
		__m512 bv[NVMAX];

		for (int v = 0; v < nv; v++) {
			_mm_prefetch((const char *)(bp + (l + SG_PF) * 16 * nv + 16 * v),
				     _MM_HINT_T0);
			bv[v] = _mm512_load_ps(bp + l * 16 * nv + 16 * v);
		}
#pragma GCC unroll 8
		for (int i = 0; i < MR; i++) {
			if (i < mr) {
				__m512 ai = _mm512_set1_ps(al[i * rs]);

				for (int v = 0; v < nv; v++)
					acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
			}
		}
	}
	for (int i = 0; i < MR && i < mr; i++) {
		float *ci = c + i * ldc;

		for (int v = 0; v < nv; v++) {
			__mmask16 mk = lanes(nr, v);
			__m512 x = _mm512_mul_ps(acc[i][v], _mm512_set1_ps(alpha));

			if (bias)
				x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk, bias + 16 * v));
			else if (beta != 0.0f)
				x = _mm512_fmadd_ps(_mm512_set1_ps(beta),
						    _mm512_maskz_loadu_ps(mk, ci + 16 * v), x);
			_mm512_mask_storeu_ps(ci + 16 * v, mk, x);
		}
	}
}

/* The three shapes the loops call, each for 3 and 2 vectors: whole blocks
 * with A in place (rows of stride lda) or packed (rows of stride 1, k of
 * stride MR), and any partial block. */
SG_TARGET static void kernel_rows(int64_t kc, const float *a, int64_t lda, const float *bp,
				  float *c, int64_t ldc, float alpha, float beta,
				  const float *bias, int nv)
{
	if (nv == 3)
		kernel(kc, a, lda, 1, bp, c, ldc, alpha, beta, bias, 3, MR, 48);
	else
		kernel(kc, a, lda, 1, bp, c, ldc, alpha, beta, bias, 2, MR, 32);
}

SG_TARGET static void kernel_packed(int64_t kc, const float *a, const float *bp, float *c,
				    int64_t ldc, float alpha, float beta, const float *bias,
				    int nv)
{
	if (nv == 3)
		kernel(kc, a, 1, MR, bp, c, ldc, alpha, beta, bias, 3, MR, 48);
	else
		kernel(kc, a, 1, MR, bp, c, ldc, alpha, beta, bias, 2, MR, 32);
}

SG_TARGET static void kernel_edge(int64_t kc, const float *a, int64_t rs, int64_t cs,
				  const float *bp, float *c, int64_t ldc, float alpha, float beta,
				  const float *bias, int nv, int mr, int nr)
{
	if (nv == 3)
		kernel(kc, a, rs, cs, bp, c, ldc, alpha, beta, bias, 3, mr, nr);
	else
		kernel(kc, a, rs, cs, bp, c, ldc, alpha, beta, bias, 2, mr, nr);
}

/* r[0..15] (16 rows of 16) transposed in place. */
SG_TARGET static SG_INLINE void transpose16(__m512 r[16])
{
	__m512 t[16];

	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	}
	for (int i = 0; i < 16; i += 4) {
		__m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
		__m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);

		r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
		r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
		r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
		r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
	}
	for (int i = 0; i < 4; i++) {
		t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
		t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
		t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
		t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
	}
	for (int i = 0; i < 4; i++) {
		r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
		r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
		r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
		r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
	}
}

/* B's rows k0 .. k0 + kc, columns j0 .. j0 + nr (nr <= NR = g->nr) as
 * bp[l][NR], zero past nr. B(l, j) is b[l * ldb + j], or b[j * ldb + l]
 * when tb. */
SG_TARGET static void pack_b(const sg_args *g, int64_t k0, int64_t kc, int64_t j0, int64_t nr,
			     float *bp)
{
	const float *b = g->b;
	int64_t ldb = g->ldb, l = 0, NR = g->nr;
	int NV = g->nv;

	if (!g->tb) {
		for (; l < kc; l++) {
			const float *s = b + (k0 + l) * ldb + j0;

			for (int v = 0; v < NV; v++)
				_mm_prefetch((const char *)(s + SG_PFB * ldb + 16 * v), _MM_HINT_T0);

			for (int v = 0; v < NV; v++)
				_mm512_store_ps(bp + l * NR + 16 * v,
						_mm512_maskz_loadu_ps(lanes((int)nr, v), s + 16 * v));
		}
		return;
	}
	if (nr == NR) {
		for (; l + 16 <= kc; l += 16) {
			for (int v = 0; v < NV; v++) {
				__m512 r[16];

				for (int j = 0; j < 16; j++) {
					const float *src = b + (j0 + 16 * v + j) * ldb + k0 + l;

					_mm_prefetch((const char *)(src + 8 * SG_PFB), _MM_HINT_T0);
					r[j] = _mm512_loadu_ps(src);
				}
				transpose16(r);
				for (int q = 0; q < 16; q++)
					_mm512_store_ps(bp + (l + q) * NR + 16 * v, r[q]);
			}
		}
	}
	for (; l < kc; l++)
		for (int64_t j = 0; j < NR; j++)
			bp[l * NR + j] = j < nr ? b[(j0 + j) * ldb + k0 + l] : 0.0f;
}

/* A^T's rows i0 .. i0 + mr (mr <= 2 MR), k0 .. k0 + kc, as ap[l][MR] and,
 * past MR rows, the next block as (ap + MR KC)[l][MR]; zero past mr:
 * A(i, l) is a[l * lda + i]. Two blocks at once read each line of A (16
 * floats) once instead of once a block. With `sum`, also sum[i0 + r] +=
 * A(l, i0 + r) for each l in order (the k blocks come in order too). */
SG_TARGET static void pack_a(const sg_args *g, int64_t k0, int64_t kc, int64_t i0, int64_t mr,
			     float *ap, float *sum)
{
	__mmask16 mk = (__mmask16)((1u << mr) - 1);
	__m512 s = sum ? _mm512_maskz_loadu_ps(mk, sum + i0) : _mm512_setzero_ps();
	float *ap2 = ap + MR * KC - MR; /* lanes 8..15 of row l land at ap2 + l MR + MR */

	for (int64_t l = 0; l < kc; l++) {
		__m512 x = _mm512_maskz_loadu_ps(mk, g->a + (k0 + l) * g->lda + i0);

		_mm_prefetch((const char *)(g->a + (k0 + l + SG_PFB) * g->lda + i0), _MM_HINT_T0);

		_mm512_mask_storeu_ps(ap + l * MR, 0x00ff, x);
		if (mr > MR)
			_mm512_mask_storeu_ps(ap2 + l * MR, 0xff00, x);
		s = _mm512_add_ps(s, x);
	}
	if (sum)
		_mm512_mask_storeu_ps(sum + i0, mk, s);
}

/* A part's packing space: B's panels, then two of A's blocks (floats, a
 * multiple of 16 so that every part's space starts 64-byte aligned). */
#define SG_SCRATCH ((int64_t)KC * (NC + 16 * NVMAX) + 2 * (int64_t)MR * KC + 16)

/* C's rows [m0, m1) x columns [n0, n1). */
SG_TARGET static void sgemm_block(const sg_args *g, int64_t m0, int64_t m1, int64_t n0,
				  int64_t n1, float *bp, float *ap)
{
	int64_t kb = k_block(g->k), NR = g->nr;

	for (int64_t jc = n0; jc < n1; jc += NC) {
		int64_t je = n1 - jc < NC ? n1 : jc + NC, np = (je - jc + NR - 1) / NR;

		for (int64_t k0 = 0; k0 < g->k; k0 += kb) {
			int64_t kc = g->k - k0 < kb ? g->k - k0 : kb;
			float beta = k0 ? 1.0f : g->beta;
			const float *bias = k0 ? NULL : g->bias;
			int64_t l0_pair = 0; /* the k where the packed pair of blocks starts */

			for (int64_t p = 0; p < np; p++) {
				int64_t j0 = jc + p * NR;

				pack_b(g, k0, kc, j0, je - j0 < NR ? je - j0 : NR, bp + p * kc * NR);
			}
			for (int64_t i = m0; i < m1; i += MR) {
				int mr = (int)(m1 - i < MR ? m1 - i : MR);
				/* the k [l0, l1) of this block and the panels [0, npi)
				 * these rows need (all but with a triangle) */
				int64_t l0 = 0, l1 = kc, npi = np, rs = g->lda, cs = 1;
				const float *pa;

				if (g->tri == CPU_TRI_A_LOWER)
					l1 = i + mr - k0 < kc ? i + mr - k0 : kc;
				else if (g->tri == CPU_TRI_A_UPPER)
					l0 = i - k0 < 0 ? 0 : i - k0 < kc ? i - k0 : kc;
				else if (g->tri == CPU_TRI_C_LOWER && i + mr - 1 < je)
					npi = i + mr - 1 < jc ? 0 : (i + mr - 1 - jc) / NR + 1;
				/* nothing to add (the first k block still sets C) */
				if ((l1 <= l0 || !npi) && k0)
					continue;
				if (l1 < l0)
					l1 = l0;
				pa = g->a + i * g->lda + k0 + l0;
				if (g->ta && (g->tri == CPU_TRI_NONE || g->tri == CPU_TRI_A_UPPER)) {
					/* blocks in pairs, each line of A read once (the
					 * second block's k starts at or after the first's);
					 * the sums once: by the part with the first
					 * columns, in its first block of them */
					if ((i - m0) / MR % 2 == 0) {
						l0_pair = l0;
						pack_a(g, k0 + l0, kc - l0, i,
						       m1 - i < 2 * MR ? m1 - i : 2 * MR, ap,
						       jc == 0 ? g->sum : NULL);
						pa = ap;
					} else {
						pa = ap + MR * KC + (l0 - l0_pair) * MR;
					}
					rs = 1;
					cs = MR;
				} else if (g->ta) {
					pack_a(g, k0 + l0, l1 - l0, i, mr, ap, NULL);
					pa = ap;
					rs = 1;
					cs = MR;
				}
				for (int64_t p = 0; p < npi; p++) {
					int64_t j0 = jc + p * NR, nr = je - j0 < NR ? je - j0 : NR;
					const float *pb = bp + (p * kc + l0) * NR;
					float *cb = g->c + i * g->ldc + j0;
					const float *bj = bias ? bias + j0 : NULL;

					if (mr == MR && nr == NR && g->ta)
						kernel_packed(l1 - l0, pa, pb, cb, g->ldc, g->alpha,
							      beta, bj, g->nv);
					else if (mr == MR && nr == NR)
						kernel_rows(l1 - l0, pa, g->lda, pb, cb, g->ldc,
							    g->alpha, beta, bj, g->nv);
					else
						kernel_edge(l1 - l0, pa, rs, cs, pb, cb, g->ldc,
							    g->alpha, beta, bj, g->nv, mr, (int)nr);
				}
			}
		}
	}
}

/* Slice t of g->parts: rows in whole MR blocks, or columns in whole NR. */
static void sgemm_part(void *p, int64_t t, int64_t t1)
{
	const sg_args *g = p;
	int64_t unit = g->by_rows ? MR : g->nr, total = g->by_rows ? g->m : g->n;
	int64_t units = (total + unit - 1) / unit;
	int64_t u0 = units * t / g->parts, u1 = units * (t + 1) / g->parts;
	int64_t lo = u0 * unit, hi = u1 * unit < total ? u1 * unit : total;
	float *buf = g->scratch + t * SG_SCRATCH;

	(void)t1;
	if (lo >= hi)
		return;
	if (g->by_rows)
		sgemm_block(g, lo, hi, 0, g->n, buf, buf + KC * (NC + 16 * NVMAX));
	else
		sgemm_block(g, 0, g->m, lo, hi, buf, buf + KC * (NC + 16 * NVMAX));
}

/* Runs the product g describes (all but its slicing and scratch) on
 * `threads` threads. */
static int sgemm_run(sg_args *g, int64_t threads)
{
	int64_t units;

	if (!cpu_sgemm_usable())
		return 0;
	g->nv = g->n % 48 && g->n % 32 == 0 ? 2 : 3;
	g->nr = 16 * g->nv;
	/* Slicing columns packs A again in every slice when A is packed;
	 * slicing rows packs B again in every slice. */
	g->by_rows = g->ta && g->n < g->m;
	units = g->by_rows ? (g->m + MR - 1) / MR : (g->n + g->nr - 1) / g->nr;
	if (threads <= 0)
		threads = weft_kernels_cpu_get_threads();
	g->parts = threads < 1 ? 1 : threads > units ? units : threads;
	g->scratch = cpu_pack_buffer((size_t)(g->parts * SG_SCRATCH) * sizeof(float) + 64);
	if (!g->scratch)
		return 0;
	g->scratch = (float *)(((uintptr_t)g->scratch + 63) & ~(uintptr_t)63);
	if (g->parts <= 1)
		sgemm_part(g, 0, 1);
	else
		cpu_parallel_tasks(g->parts, sgemm_part, g);
	return 1;
}

int cpu_sgemm_tri(int tri, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
		  float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
		  const float *bias, float *c, int64_t ldc, int64_t threads)
{
	sg_args g = {
		.tri = tri, .ta = trans_a, .tb = trans_b, .m = m, .n = n, .k = k, .lda = lda,
		.ldb = ldb, .ldc = ldc, .alpha = alpha, .beta = beta, .a = a, .b = b,
		.bias = bias, .c = c,
	};

	return sgemm_run(&g, threads);
}

int cpu_sgemm_tn_sum(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
		     const float *b, int64_t ldb, float beta, float *c, int64_t ldc, float *sum,
		     int64_t threads)
{
	sg_args g = {
		.ta = 1, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc,
		.alpha = alpha, .beta = beta, .a = a, .b = b, .c = c, .sum = sum,
	};

	return sgemm_run(&g, threads);
}

int cpu_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
	      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
	      const float *bias, float *c, int64_t ldc, int64_t threads)
{
	return cpu_sgemm_tri(CPU_TRI_NONE, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
			     beta, bias, c, ldc, threads);
}

#else /* no AVX-512 kernels in this build */

int cpu_sgemm_usable(void)
{
	return 0;
}

int cpu_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
	      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
	      const float *bias, float *c, int64_t ldc, int64_t threads)
{
	(void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a;
	(void)lda, (void)b, (void)ldb, (void)beta, (void)bias, (void)c, (void)ldc;
	(void)threads;
	return 0;
}

int cpu_sgemm_tri(int tri, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
		  float alpha, const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
		  const float *bias, float *c, int64_t ldc, int64_t threads)
{
	(void)tri;
	return cpu_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc,
			 threads);
}

int cpu_sgemm_tn_sum(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
		     const float *b, int64_t ldb, float beta, float *c, int64_t ldc, float *sum,
		     int64_t threads)
{
	(void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb;
	(void)beta, (void)c, (void)ldc, (void)sum, (void)threads;
	return 0;
}

#endif
