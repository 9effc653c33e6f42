/* Mixed precision's matrix product on Intel AMX (the tile registers of
 * Sapphire Rapids and later): BF16 A and B, F32 C, every product exact
 * and every sum taken in F32 by TDPBF16PS, so the result is the F32 GEMM
 * of the 16-bit values up to the order of the sums (and AMX's flush of
 * F32 subnormal results to zero).
 *
 * Both operands are packed per call into the tiles' layouts, zero-padded
 * to whole tiles: A in blocks of 32 rows, each 32-element chunk of k a
 * 16 x 64-byte tile pair; B in panels of 16 columns with the k pairs
 * interleaved (the VNNI layout TDPBF16PS reads). A 32 x 32 block of C is
 * four accumulator tiles; each step of 32 along k loads two A tiles and
 * two B tiles and issues four TDPBF16PS. The blocks of C are shared out
 * over the kernel threads.
 *
 * The tile registers need the kernel's permission once per process
 * (arch_prctl ARCH_REQ_XCOMP_PERM) and a configuration per thread; where
 * either is missing (no AMX, an old kernel, a hypervisor that hides it)
 * cpu_amx_usable() is 0 and the reference path runs instead. */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(WEFT_NO_AMX)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f")))

enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };

/* The tile configuration (palette 1): tiles 0-3 C (16 x 16 F32), 4-5 A
 * (16 rows x 32 BF16), 6-7 B (16 k pairs x 16 columns x 2 BF16). */
typedef struct tile_cfg {
	uint8_t palette, start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} tile_cfg;

static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_ok;

static void amx_probe(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return;
	/* EDX bit 22: AMX-BF16, bit 24: AMX-TILE */
	if (!(d & (1u << 22)) || !(d & (1u << 24)))
		return;
	amx_ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

int cpu_amx_usable(void)
{
	pthread_once(&amx_once, amx_probe);
	return amx_ok;
}

/* k chunk of a tile pair: 32 BF16 = 16 pairs */
#define KC 32

typedef struct amx_args {
	int64_t m, n, k, kp;      /* kp: k rounded up to KC */
	int64_t mb, nb;           /* blocks of 32 rows, panels of 16 columns */
	const uint16_t *a, *b;    /* this batch item's operands */
	int64_t lda, ldb;
	int trans_a, trans_b;
	uint16_t *pa, *pb;        /* packed A (mb * 32 * kp), packed B (nb * kp * 16) */
	float alpha, beta;
	float *c;
	int64_t ldc;
} amx_args;

/* A element (i, l) of op(A), 0 outside the matrix. */
static inline uint16_t a_at(const amx_args *g, int64_t i, int64_t l)
{
	if (i >= g->m || l >= g->k)
		return 0;
	return g->trans_a ? g->a[l * g->lda + i] : g->a[i * g->lda + l];
}

static inline uint16_t b_at(const amx_args *g, int64_t l, int64_t j)
{
	if (l >= g->k || j >= g->n)
		return 0;
	return g->trans_b ? g->b[j * g->ldb + l] : g->b[l * g->ldb + j];
}

/* tile[r][l] = src[l * ld + r] for r, l < 32: a 32 x 32 block of a
 * transposed A. One 32-bit gather of 16 rows l at an even column r takes
 * the elements of columns r and r + 1 (both inside the block), which
 * become tile rows r and r + 1. */
AMX_TARGET static void transpose_tile(uint16_t *tile, const uint16_t *src, int64_t ld)
{
	const __m512i step = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7,
								  6, 5, 4, 3, 2, 1, 0),
						_mm512_set1_epi32((int)(ld * 2)));

	for (int64_t r = 0; r < 32; r += 2) {
		const uint16_t *col = src + r;
		__m512i v0 = _mm512_i32gather_epi32(step, col, 1);
		__m512i v1 = _mm512_i32gather_epi32(step, col + 16 * ld, 1);

		_mm256_storeu_si256((__m256i *)(tile + r * KC), _mm512_cvtepi32_epi16(v0));
		_mm256_storeu_si256((__m256i *)(tile + r * KC + 16), _mm512_cvtepi32_epi16(v1));
		_mm256_storeu_si256((__m256i *)(tile + (r + 1) * KC),
				    _mm512_cvtepi32_epi16(_mm512_srli_epi32(v0, 16)));
		_mm256_storeu_si256((__m256i *)(tile + (r + 1) * KC + 16),
				    _mm512_cvtepi32_epi16(_mm512_srli_epi32(v1, 16)));
	}
}

/* Packs blocks [i0, i1) of 32 rows: block r, chunk q is two 16 x 32 tiles
 * (rows 0-15, then 16-31), rows of 64 bytes. Whole tiles inside A are
 * copied row by row (A as stored) or transposed 32 x 32 (A transposed);
 * tiles at A's edges go element by element, zeros outside. */
static void pack_a(void *p, int64_t i0, int64_t i1)
{
	const amx_args *g = p;

	for (int64_t blk = i0; blk < i1; blk++) {
		uint16_t *dst = g->pa + blk * 32 * g->kp;
		int rows_in = (blk + 1) * 32 <= g->m;

		for (int64_t q = 0; q < g->kp / KC; q++) {
			uint16_t *tile = dst + q * 32 * KC;

			if (rows_in && (q + 1) * KC <= g->k && !g->trans_a) {
				for (int64_t r = 0; r < 32; r++)
					memcpy(tile + r * KC, g->a + (blk * 32 + r) * g->lda + q * KC,
					       KC * 2);
			} else if (rows_in && (q + 1) * KC <= g->k && g->lda <= INT32_MAX / 64) {
				transpose_tile(tile, g->a + q * KC * g->lda + blk * 32, g->lda);
			} else {
				for (int64_t r = 0; r < 32; r++)
					for (int64_t l = 0; l < KC; l++)
						tile[r * KC + l] = a_at(g, blk * 32 + r, q * KC + l);
			}
		}
	}
}

/* d[t][c] = (r[2t][c], r[2t+1][c]) for 16 columns c and t < pairs: two
 * rows of 16 BF16 become one 64-byte row of pairs. */
AMX_TARGET static void interleave_rows(uint16_t *d, const uint16_t *r, int64_t ld, int64_t pairs)
{
	for (int64_t t = 0; t < pairs; t++) {
		__m256i lo = _mm256_loadu_si256((const __m256i *)(r + 2 * t * ld));
		__m256i hi = _mm256_loadu_si256((const __m256i *)(r + (2 * t + 1) * ld));
		__m512i v = _mm512_or_si512(_mm512_cvtepu16_epi32(lo),
					    _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));

		_mm512_storeu_si512(d + t * 32, v);
	}
}

/* Packs panels [j0, j1) of 16 columns: pair row t holds (B[2t][j],
 * B[2t+1][j]) for the panel's 16 columns j. With B transposed (stored
 * n x k) a pair is one 32-bit word of a stored row; otherwise two rows
 * interleave. Pairs at B's edges go element by element, zeros outside. */
static void pack_b(void *p, int64_t j0, int64_t j1)
{
	const amx_args *g = p;
	const int64_t full_t = g->k / 2; /* pairs with both rows inside B */

	for (int64_t pan = j0; pan < j1; pan++) {
		uint16_t *dst = g->pb + pan * g->kp * 16;
		int64_t t0 = 0;

		if ((pan + 1) * 16 <= g->n && g->trans_b) {
			for (int64_t c = 0; c < 16; c++) {
				const uint16_t *row = g->b + (pan * 16 + c) * g->ldb;

				for (int64_t t = 0; t < full_t; t++)
					memcpy(dst + (t * 16 + c) * 2, row + 2 * t, 4);
			}
			t0 = full_t;
		} else if ((pan + 1) * 16 <= g->n) {
			interleave_rows(dst, g->b + pan * 16, g->ldb, full_t);
			t0 = full_t;
		}
		for (int64_t t = t0; t < g->kp / 2; t++)
			for (int64_t c = 0; c < 16; c++) {
				dst[(t * 16 + c) * 2] = b_at(g, 2 * t, pan * 16 + c);
				dst[(t * 16 + c) * 2 + 1] = b_at(g, 2 * t + 1, pan * 16 + c);
			}
	}
}

AMX_TARGET static void amx_config(void)
{
	tile_cfg cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.palette = 1;
	for (int t = 0; t < 8; t++) {
		cfg.rows[t] = 16;
		cfg.colsb[t] = 64;
	}
	_tile_loadconfig(&cfg);
}

/* C block (rows r0.., columns c0..) = alpha * acc + beta * C, where acc is
 * 32 x 32 F32; only the part inside C. */
static void store_block(const amx_args *g, const float *acc, int64_t r0, int64_t c0)
{
	int64_t rows = g->m - r0 < 32 ? g->m - r0 : 32, cols = g->n - c0 < 32 ? g->n - c0 : 32;

	for (int64_t r = 0; r < rows; r++) {
		float *crow = g->c + (r0 + r) * g->ldc + c0;
		const float *arow = acc + r * 32;

		if (g->beta == 0.0f)
			for (int64_t j = 0; j < cols; j++)
				crow[j] = g->alpha * arow[j];
		else
			for (int64_t j = 0; j < cols; j++)
				crow[j] = g->alpha * arow[j] + g->beta * crow[j];
	}
}

/* Blocks [b0, b1) of C, numbered row block major (blocks of 32 x 32). */
AMX_TARGET static void amx_blocks(void *p, int64_t b0, int64_t b1)
{
	const amx_args *g = p;
	const int64_t ncb = (g->nb + 1) / 2; /* column blocks of 32 */
	float acc[32 * 32] __attribute__((aligned(64)));

	amx_config();
	for (int64_t blk = b0; blk < b1; blk++) {
		int64_t rb = blk / ncb, cb = blk % ncb;
		const uint16_t *pa = g->pa + rb * 32 * g->kp;
		const uint16_t *pb0 = g->pb + (2 * cb) * g->kp * 16;
		/* an odd last panel pairs with itself; its second half is dropped */
		const uint16_t *pb1 = 2 * cb + 1 < g->nb ? pb0 + g->kp * 16 : pb0;

		_tile_zero(0);
		_tile_zero(1);
		_tile_zero(2);
		_tile_zero(3);
		for (int64_t q = 0; q < g->kp / KC; q++) {
			_tile_loadd(4, pa + (q * 32) * KC, KC * 2);
			_tile_loadd(5, pa + (q * 32 + 16) * KC, KC * 2);
			_tile_loadd(6, pb0 + q * (KC / 2) * 32, 64);
			_tile_loadd(7, pb1 + q * (KC / 2) * 32, 64);
			_tile_dpbf16ps(0, 4, 6);
			_tile_dpbf16ps(1, 4, 7);
			_tile_dpbf16ps(2, 5, 6);
			_tile_dpbf16ps(3, 5, 7);
		}
		_tile_stored(0, acc, 128);
		_tile_stored(1, acc + 16, 128);
		_tile_stored(2, acc + 16 * 32, 128);
		_tile_stored(3, acc + 16 * 32 + 16, 128);
		store_block(g, acc, rb * 32, cb * 32);
	}
	_tile_release();
}

size_t cpu_amx_scratch(int64_t m, int64_t n, int64_t k)
{
	int64_t kp = (k + KC - 1) / KC * KC;
	int64_t mb = (m + 31) / 32, nb = (n + 15) / 16;

	return (size_t)(mb * 32 * kp + nb * kp * 16) * sizeof(uint16_t);
}

weft_status cpu_amx_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
			      float alpha, const uint16_t *a, int64_t lda, int64_t stride_a,
			      const uint16_t *b, int64_t ldb, int64_t stride_b, float beta,
			      float *c, int64_t ldc, int64_t stride_c, int64_t batch, void *scratch)
{
	amx_args g = {
		.m = m, .n = n, .k = k, .kp = (k + KC - 1) / KC * KC,
		.mb = (m + 31) / 32, .nb = (n + 15) / 16,
		.lda = lda, .ldb = ldb, .trans_a = trans_a, .trans_b = trans_b,
		.alpha = alpha, .beta = beta, .ldc = ldc,
	};

	g.pa = scratch;
	g.pb = g.pa + g.mb * 32 * g.kp;
	for (int64_t i = 0; i < batch; i++) {
		g.a = a + i * stride_a;
		g.b = b + i * stride_b;
		g.c = c + i * stride_c;
		cpu_parallel_for(g.mb, 1, pack_a, &g);
		cpu_parallel_for(g.nb, 1, pack_b, &g);
		cpu_parallel_for(g.mb * ((g.nb + 1) / 2), 1, amx_blocks, &g);
	}
	return WEFT_OK;
}

#else /* no AMX in this build */

int cpu_amx_usable(void)
{
	return 0;
}

size_t cpu_amx_scratch(int64_t m, int64_t n, int64_t k)
{
	(void)m, (void)n, (void)k;
	return 0;
}

weft_status cpu_amx_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
			      float alpha, const uint16_t *a, int64_t lda, int64_t stride_a,
			      const uint16_t *b, int64_t ldb, int64_t stride_b, float beta,
			      float *c, int64_t ldc, int64_t stride_c, int64_t batch, void *scratch)
{
	(void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a;
	(void)lda, (void)stride_a, (void)b, (void)ldb, (void)stride_b, (void)beta, (void)c;
	(void)ldc, (void)stride_c, (void)batch, (void)scratch;
	return weft_error_set(WEFT_ERR_UNSUPPORTED, "gemm_lowp: this build has no AMX kernels");
}

#endif
