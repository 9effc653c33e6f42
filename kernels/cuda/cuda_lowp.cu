/* 16-bit activations (weft_kernel_table, since ABI 1.6): the bias sum, the
 * layernorm with its residual add, and the classifier's loss over F16 /
 * BF16 rows, each moving every element through DRAM once.
 *
 * - Rows are walked 8 elements (128 bits) at a time by each lane when the
 *   row starts of every operand are 16-byte aligned, then a scalar tail;
 *   one element at a time otherwise. Columns past a row's width (the
 *   padding of ld) are never touched.
 * - Every computation is in F32; a 16-bit result is rounded once.
 * - Column sums (sum_rows_lowp, layernorm's dw and db) are deterministic:
 *   each block sums a fixed run of rows, in an order fixed by the run
 *   (col_tile), into its own slot of the context's row scratch, then one
 *   pass adds the slots to the output in block order. No float atomics;
 *   the order depends on (rows, cols) alone.
 * - The loss's mean is a fixed tree over per-row terms, in double.
 * - Nothing waits for the device and nothing is allocated once the
 *   context's scratch is large enough (cuda_rows_reserve); targets are not
 *   checked (the caller has). */
#include <stdint.h>

#include "cuda_dev.cuh"

#define LP_THREADS 256 /* threads of a row block */
#define LP_WARPS (LP_THREADS / 32)
/* Rows of one partial sum: a layernorm-backward block's, and a
 * sum_rows_lowp block's. A slot costs 4 bytes per column and sum, written
 * and read once more, per run of rows, against 2 bytes per element of each
 * 16-bit operand: bench/kernels/bench_lowp_bytes counts 6 % more bytes
 * than the operands' for sum_rows_lowp and 8 % for layernorm backward
 * (two sums over 32 rows of s, dy and dx); fewer, longer runs would leave
 * a GPU's SMs idle at a training step's 8192 rows. */
#define LN_BWD_ROWS 32
#define SUM_ROWS 64
#define LOSS_THREADS 1024 /* the mean's tree (a power of two) */

/* Eight 16-bit elements: one 128-bit load or store. */
struct alignas(16) pack8 {
	unsigned short h[8];
};

__device__ __forceinline__ float h2f(unsigned short b, int dt)
{
	return dt == WEFT_BF16 ? __bfloat162float(__ushort_as_bfloat16(b))
			       : __half2float(__ushort_as_half(b));
}

/* Round to nearest even, as the CPU's half.h does. */
__device__ __forceinline__ unsigned short f2h(float v, int dt)
{
	return dt == WEFT_BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v))
			       : __half_as_ushort(__float2half_rn(v));
}

/* v[0..n) = elements e..e+n of p, n 8 (e's address 16-byte aligned: one
 * 128-bit load) or 1. */
__device__ __forceinline__ void ld8(const void *p, int64_t e, int n, int dt, float *v)
{
	const unsigned short *q = (const unsigned short *)p + e;

	if (n == 8) {
		pack8 pk = *(const pack8 *)q;

		for (int k = 0; k < 8; k++)
			v[k] = h2f(pk.h[k], dt);
	} else {
		v[0] = h2f(q[0], dt);
	}
}

/* Elements e..e+n of p = v[0..n) rounded, as ld8 loads them. */
__device__ __forceinline__ void st8(void *p, int64_t e, int n, int dt, const float *v)
{
	unsigned short *q = (unsigned short *)p + e;

	if (n == 8) {
		pack8 pk;

		for (int k = 0; k < 8; k++)
			pk.h[k] = f2h(v[k], dt);
		*(pack8 *)q = pk;
	} else {
		q[0] = f2h(v[0], dt);
	}
}

/* Whether element e of p (NULL: no operand) starts 16 bytes aligned. */
__device__ __forceinline__ bool al16(const void *p, int64_t e)
{
	return !p || ((uintptr_t)((const unsigned short *)p + e) & 15u) == 0;
}

/* A lane's walk over a row of `cols` elements, `nl` lanes sharing it: the
 * first c8 elements (a multiple of 8; 0 when the row is not aligned) 8 at
 * a time, lane l taking the 8 at 8 (l + nl i), then the rest one at a
 * time, l taking c8 + l + nl i. Each stretch is j .. j + walk_len(j, c8).
 * The same lane visits the same elements in every pass over a row, so a
 * pass may read back what an earlier one stored. */
__device__ __forceinline__ int64_t walk_first(int64_t c8, int lane)
{
	return (int64_t)lane * 8 < c8 ? (int64_t)lane * 8 : c8 + lane;
}

__device__ __forceinline__ int64_t walk_next(int64_t j, int64_t c8, int lane, int nl)
{
	if (j >= c8)
		return j + nl;
	j += (int64_t)nl * 8;
	return j < c8 ? j : c8 + lane;
}

__device__ __forceinline__ int walk_len(int64_t j, int64_t c8)
{
	return j < c8 ? 8 : 1;
}

/* ---- sums over rows ---- */

/* A column-sum pass of a block: CS_X groups of columns (8 columns a group
 * with 128-bit loads, else 1) by CS_Y row lanes. */
#define CS_X 32
#define CS_Y (LP_THREADS / CS_X)

/* Over rows r0, r0 + CS_Y, ... below r1, in that order, of columns j .. j +
 * n (n 8: aligned 128-bit loads; or 1): sg[k] += g, and with s, sgn[k] +=
 * g (s - mean) rstd, g = dy[r][j + k] (layernorm's db and dw). */
__device__ __forceinline__ void col_lane(int64_t r0, int64_t r1, int64_t cols, int64_t j, int n,
					 int dt, const void *dy, const void *s, const float *mean,
					 const float *rstd, float *sg, float *sgn)
{
	float g[8], x[8];

	for (int64_t r = r0; r < r1; r += CS_Y) {
		float m = s ? mean[r] : 0.0f, sd = s ? rstd[r] : 0.0f;

		ld8(dy, r * cols + j, n, dt, g);
		if (s)
			ld8(s, r * cols + j, n, dt, x);
		for (int k = 0; k < n; k++) {
			sg[k] += g[k];
			if (s)
				sgn[k] += g[k] * ((x[k] - m) * sd);
		}
	}
}

/* The block's sums over rows [r0, r1) of the CS_X groups of n columns of
 * column tile `tile`, to part_g[c] (of dy) and part_gn[c] (of dy (s -
 * mean) rstd; s NULL: none); either may be NULL. Row lane y sums rows r0 +
 * y, r0 + y + CS_Y, ... in order; the lanes' sums are then added in lane
 * order, so the result depends on (r0, r1) alone. Every thread of the
 * block must call it (it synchronizes the block). */
__device__ void col_tile(int64_t r0, int64_t r1, int64_t cols, int64_t tile, int n, int dt,
			 const void *dy, const void *s, const float *mean, const float *rstd,
			 float *part_g, float *part_gn)
{
	__shared__ float shg[CS_Y][CS_X * 8], shgn[CS_Y][CS_X * 8];
	int gx = threadIdx.x % CS_X, y = threadIdx.x / CS_X, slot = threadIdx.x;
	int64_t j = (tile * CS_X + gx) * n;
	float sg[8] = { 0 }, sgn[8] = { 0 };

	if (j + n <= cols)
		col_lane(r0 + y, r1, cols, j, n, dt, dy, s, mean, rstd, sg, sgn);
	__syncthreads(); /* the previous tile's sums have been read */
	for (int k = 0; k < 8; k++) {
		shg[y][gx * 8 + k] = sg[k];
		shgn[y][gx * 8 + k] = sgn[k];
	}
	__syncthreads();
	/* thread `slot` adds column slot % 8 of group slot / 8 over the lanes */
	j = (tile * CS_X + slot / 8) * n + slot % 8;
	if (slot % 8 < n && j < cols) {
		float a = 0.0f, b = 0.0f;

		for (int l = 0; l < CS_Y; l++) {
			a += shg[l][slot];
			b += shgn[l][slot];
		}
		if (part_g)
			part_g[j] = a;
		if (part_gn)
			part_gn[j] = b;
	}
}

/* out[j] += the nparts slots part[p][j] (cols floats each), in slot
 * order: the second stage of every column sum here. */
__global__ void k_add_parts(int64_t nparts, int64_t cols, const float *part, float *out)
{
	GRID_STRIDE(j, cols) {
		float a = out[j];

		for (int64_t p = 0; p < nparts; p++)
			a += part[p * cols + j];
		out[j] = a;
	}
}

/* Block (x, y): rows [x SUM_ROWS, +SUM_ROWS), column tile y; the sums to
 * slot x. */
__global__ void k_sum_rows_part(int64_t rows, int64_t cols, int dt, const void *x, int vec,
				float *part)
{
	int64_t r0 = (int64_t)blockIdx.x * SUM_ROWS;
	int64_t r1 = r0 + SUM_ROWS < rows ? r0 + SUM_ROWS : rows;

	col_tile(r0, r1, cols, blockIdx.y, vec ? 8 : 1, dt, x, NULL, NULL, NULL,
		 part + (int64_t)blockIdx.x * cols, NULL);
}

/* ---- layernorm ---- */

/* s = a + b rounded to dt (b NULL: a) at elements e..e+n, as ld8. */
__device__ __forceinline__ void ld_sum(const void *a, const void *b, int64_t e, int n, int dt,
				       float *v)
{
	float q[8];

	ld8(a, e, n, dt, v);
	if (!b)
		return;
	ld8(b, e, n, dt, q);
	for (int k = 0; k < n; k++)
		v[k] = h2f(f2h(v[k] + q[k], dt), dt);
}

/* A warp per row: s = x (+ r) rounded (to sum), mean and variance of s as
 * stored (two passes: the mean, then squared deviations from it), then
 * y = (s - mean) rstd w + b. The later passes take s again from x and r
 * (from sum when it is x), the lane's own earlier loads (cache hits), so
 * sum is only written. */
__global__ void k_ln_lowp_fwd(int64_t rows, int64_t cols, float eps, int dt, const void *x,
			      const void *r, void *sum, const float *w, const float *b, void *y,
			      float *mean, float *rstd)
{
	int lane = threadIdx.x & 31;
	const void *sa = r && sum == x ? sum : x, *sb = r && sum != x ? r : NULL;

	for (int64_t row = (int64_t)blockIdx.x * LP_WARPS + (threadIdx.x >> 5); row < rows;
	     row += (int64_t)gridDim.x * LP_WARPS) {
		int64_t off = row * cols;
		int64_t c8 = al16(x, off) && al16(r, off) && al16(sum, off) && al16(y, off) ?
				     cols & ~(int64_t)7 : 0;
		float v[8], acc = 0.0f, m, sd;

		for (int64_t j = walk_first(c8, lane); j < cols; j = walk_next(j, c8, lane, 32)) {
			int n = walk_len(j, c8);

			ld_sum(x, r, off + j, n, dt, v);
			if (sum && (r || sum != x))
				st8(sum, off + j, n, dt, v);
			for (int k = 0; k < n; k++)
				acc += v[k];
		}
		m = warp_sum(acc) / (float)cols;
		acc = 0.0f;
		for (int64_t j = walk_first(c8, lane); j < cols; j = walk_next(j, c8, lane, 32)) {
			int n = walk_len(j, c8);

			ld_sum(sa, sb, off + j, n, dt, v);
			for (int k = 0; k < n; k++)
				acc += (v[k] - m) * (v[k] - m);
		}
		sd = 1.0f / sqrtf(warp_sum(acc) / (float)cols + eps);
		for (int64_t j = walk_first(c8, lane); j < cols; j = walk_next(j, c8, lane, 32)) {
			int n = walk_len(j, c8);

			ld_sum(sa, sb, off + j, n, dt, v);
			for (int k = 0; k < n; k++)
				v[k] = (v[k] - m) * sd * w[j + k] + (b ? b[j + k] : 0.0f);
			st8(y, off + j, n, dt, v);
		}
		if (lane == 0) {
			mean[row] = m;
			rstd[row] = sd;
		}
	}
}

/* Block b: rows [b LN_BWD_ROWS, +LN_BWD_ROWS). With n = (s - mean) rstd
 * and g = dy w: dx (=, or +=) (g - mean(g) - n mean(g n)) rstd, a warp per
 * row; then the block's column sums of dy n and dy over its rows
 * (col_tile, re-reading what the rows just loaded, from cache) to slot b
 * of part_w and part_b. */
__global__ void k_ln_lowp_bwd(int64_t rows, int64_t cols, int dt, const void *s, const float *w,
			      const float *mean, const float *rstd, const void *dy, void *dx,
			      int dx_write, int vec_cols, float *part_w, float *part_b)
{
	int64_t r0 = (int64_t)blockIdx.x * LN_BWD_ROWS;
	int64_t r1 = r0 + LN_BWD_ROWS < rows ? r0 + LN_BWD_ROWS : rows;
	int lane = threadIdx.x & 31, n = vec_cols ? 8 : 1;

	for (int64_t row = r0 + (threadIdx.x >> 5); dx && row < r1; row += LP_WARPS) {
		int64_t off = row * cols;
		int64_t c8 = al16(s, off) && al16(dy, off) && al16(dx, off) ? cols & ~(int64_t)7 : 0;
		float m = mean[row], sd = rstd[row], sum_g = 0.0f, sum_gn = 0.0f, gm, gnm;
		float v[8], g[8], d[8];

		for (int64_t j = walk_first(c8, lane); j < cols; j = walk_next(j, c8, lane, 32)) {
			int nj = walk_len(j, c8);

			ld8(s, off + j, nj, dt, v);
			ld8(dy, off + j, nj, dt, g);
			for (int k = 0; k < nj; k++) {
				float gw = g[k] * w[j + k];

				sum_g += gw;
				sum_gn += gw * ((v[k] - m) * sd);
			}
		}
		gm = warp_sum(sum_g) / (float)cols;
		gnm = warp_sum(sum_gn) / (float)cols;
		for (int64_t j = walk_first(c8, lane); j < cols; j = walk_next(j, c8, lane, 32)) {
			int nj = walk_len(j, c8);

			ld8(s, off + j, nj, dt, v);
			ld8(dy, off + j, nj, dt, g);
			if (!dx_write)
				ld8(dx, off + j, nj, dt, d);
			for (int k = 0; k < nj; k++) {
				float gd = (g[k] * w[j + k] - gm - (v[k] - m) * sd * gnm) * sd;

				d[k] = dx_write ? gd : d[k] + gd;
			}
			st8(dx, off + j, nj, dt, d);
		}
	}
	if (!part_w && !part_b)
		return;
	for (int64_t tile = 0; tile * CS_X * n < cols; tile++)
		col_tile(r0, r1, cols, tile, n, dt, dy, s, mean, rstd,
			 part_b ? part_b + (int64_t)blockIdx.x * cols : NULL,
			 part_w ? part_w + (int64_t)blockIdx.x * cols : NULL);
}

/* ---- the classifier's loss ---- */

/* A row's block: CE_THREADS threads. The fused classifier reads its row
 * twice, the second time (the gradient) from L2: at most two such blocks
 * fit on an SM (2048 threads), so the rows in flight are two per SM, 264
 * rows of 50304 bf16 logits (26.6 MB) on an H100's 132 SMs, within its 50
 * MB of L2. The forward alone takes the same blocks, so both compute the
 * same statistics, bit for bit. */
#define CE_THREADS 1024
/* Blocks of the correction: each returns at once when dloss is the hint. */
#define REGRAD_BLOCKS 1024

/* The statistics of one row, by the whole block: each thread keeps the
 * running max of its elements and the sum of exp(z - max), rescaled when
 * the max grows (once per 8 elements); the block merges them. Returns lse
 * (every thread); thread 0 writes lse[row], the row's term of the mean
 * (lse - z[target]) and whether it counts to term[row] and term[rows +
 * row]. z[target] is read before the block's first barrier, so a gradient
 * written over the row after this returns cannot change it. */
__device__ __forceinline__ float ce_row_stats(int64_t rows, int64_t row, int64_t vocab,
					      int64_t off, int64_t c8, int dt, const void *z,
					      int64_t t, int64_t ignore, float *lse, float *term,
					      float *sh)
{
	/* a target outside the row reads nothing (the caller checked) */
	bool in = t != ignore && t >= 0 && t < vocab;
	float m = -INFINITY, sum = 0.0f, v[8], mx, l, zt = 0.0f;

	if (threadIdx.x == 0 && in)
		zt = h2f(((const unsigned short *)z)[off + t], dt);
	for (int64_t j = walk_first(c8, threadIdx.x); j < vocab;
	     j = walk_next(j, c8, threadIdx.x, blockDim.x)) {
		int n = walk_len(j, c8);
		float top = m;

		ld8(z, off + j, n, dt, v);
		for (int k = 0; k < n; k++)
			top = fmaxf(top, v[k]);
		if (top > m) { /* exp(-inf) is 0: the first stretch starts the sum */
			sum *= expf(m - top);
			m = top;
		}
		for (int k = 0; k < n; k++)
			sum += expf(v[k] - m);
	}
	mx = block_max(m, sh);
	sum = block_sum(m == -INFINITY ? 0.0f : sum * expf(m - mx), sh);
	l = mx + logf(sum);
	if (threadIdx.x == 0) {
		lse[row] = l;
		term[row] = in ? l - zt : 0.0f;
		term[rows + row] = t != ignore ? 1.0f : 0.0f;
	}
	return l;
}

/* A row's gradient, by the whole block: dz = (exp(z - l) - (j == t))
 * scale, one read and one write per element (dz may be z: each thread
 * reads its elements before it writes them); 0 on an ignore_index row
 * (nothing read). */
__device__ __forceinline__ void ce_row_grad(int64_t vocab, int64_t off, int64_t c8, int dt,
					    const void *z, int64_t t, int64_t ignore, float l,
					    float scale, void *dz)
{
	float v[8];

	for (int64_t j = walk_first(c8, threadIdx.x); j < vocab;
	     j = walk_next(j, c8, threadIdx.x, blockDim.x)) {
		int n = walk_len(j, c8);

		if (t == ignore) {
			for (int k = 0; k < 8; k++)
				v[k] = 0.0f;
		} else {
			ld8(z, off + j, n, dt, v);
			for (int k = 0; k < n; k++)
				v[k] = (expf(v[k] - l) - (j + k == t ? 1.0f : 0.0f)) * scale;
		}
		st8(dz, off + j, n, dt, v);
	}
}

/* A block per row, one pass: the statistics (ce_row_stats). */
__global__ void __launch_bounds__(CE_THREADS)
	k_ce_lowp_fwd(int64_t rows, int64_t vocab, int64_t ldz, int dt, const void *z,
		      const void *targets, int idx_dt, int64_t ignore, float *lse, float *term)
{
	__shared__ float sh[32];

	for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
		int64_t off = row * ldz, c8 = al16(z, off) ? vocab & ~(int64_t)7 : 0;

		ce_row_stats(rows, row, vocab, off, c8, dt, z, ld_index(targets, row, idx_dt),
			     ignore, lse, term, sh);
	}
}

/* The fused classifier: a block per row reads it for the statistics, then
 * again (from L2) for the gradient with scale hint / count, written over
 * it; *count is k_ce_lowp_count's, made before. */
__global__ void __launch_bounds__(CE_THREADS)
	k_ce_lowp_fused(int64_t rows, int64_t vocab, int64_t ldz, int dt, void *z,
			const void *targets, int idx_dt, int64_t ignore, float hint,
			const float *count, float *lse, float *term)
{
	__shared__ float sh[32];
	float cnt = *count, scale = cnt != 0.0f ? hint / cnt : 0.0f;

	for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
		int64_t off = row * ldz, t = ld_index(targets, row, idx_dt);
		int64_t c8 = al16(z, off) ? vocab & ~(int64_t)7 : 0;
		float l = ce_row_stats(rows, row, vocab, off, c8, dt, z, t, ignore, lse, term, sh);

		ce_row_grad(vocab, off, c8, dt, z, t, ignore, l, scale, z);
	}
}

/* *count = the rows whose target is not ignore: each of LOSS_THREADS
 * threads counts rows i, i + LOSS_THREADS, ..., then a tree (integers:
 * exact in any order). */
__global__ void k_ce_lowp_count(int64_t rows, const void *targets, int idx_dt, int64_t ignore,
				float *count)
{
	__shared__ int64_t shc[LOSS_THREADS];
	int64_t c = 0;

	for (int64_t r = threadIdx.x; r < rows; r += LOSS_THREADS)
		c += ld_index(targets, r, idx_dt) != ignore;
	shc[threadIdx.x] = c;
	__syncthreads();
	for (int h = LOSS_THREADS / 2; h > 0; h >>= 1) {
		if ((int)threadIdx.x < h)
			shc[threadIdx.x] += shc[threadIdx.x + h];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		*count = (float)shc[0];
}

/* *loss = the sum of term[0..rows) / the count (0 when none), *count =
 * the sum of term[rows..2 rows): each of LOSS_THREADS threads adds rows
 * i, i + LOSS_THREADS, ... in double, then a fixed tree. */
__global__ void k_ce_lowp_mean(int64_t rows, const float *term, float *loss, float *count)
{
	__shared__ double shl[LOSS_THREADS], shc[LOSS_THREADS];
	double l = 0.0, c = 0.0;

	for (int64_t r = threadIdx.x; r < rows; r += LOSS_THREADS) {
		l += (double)term[r];
		c += (double)term[rows + r];
	}
	shl[threadIdx.x] = l;
	shc[threadIdx.x] = c;
	__syncthreads();
	for (int h = LOSS_THREADS / 2; h > 0; h >>= 1) {
		if ((int)threadIdx.x < h) {
			shl[threadIdx.x] += shl[threadIdx.x + h];
			shc[threadIdx.x] += shc[threadIdx.x + h];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		*loss = shc[0] > 0.0 ? (float)(shl[0] / shc[0]) : 0.0f;
		*count = (float)shc[0];
	}
}

/* A block per row: the gradient (ce_row_grad) from the saved lse, scale
 * dloss / count. */
__global__ void k_ce_lowp_bwd(int64_t rows, int64_t vocab, int64_t ldz, int dt, const void *z,
			      const void *targets, int idx_dt, int64_t ignore, const float *lse,
			      const float *dloss, const float *count, void *dz)
{
	float cnt = *count, scale = cnt != 0.0f ? *dloss / cnt : 0.0f;

	for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
		int64_t off = row * ldz;
		int64_t c8 = al16(z, off) && al16(dz, off) ? vocab & ~(int64_t)7 : 0;

		ce_row_grad(vocab, off, c8, dt, z, ld_index(targets, row, idx_dt), ignore,
			    lse[row], scale, dz);
	}
}

/* The correction: every block reads *dloss and returns when it is the
 * hint; else the rows not ignored, each element times dloss / hint,
 * rounded again, in place. */
__global__ void k_ce_lowp_regrad(int64_t rows, int64_t vocab, int64_t ldz, int dt, void *dz,
				 const void *targets, int idx_dt, int64_t ignore, float hint,
				 const float *dloss)
{
	float d = *dloss, ratio, v[8];

	if (d == hint)
		return;
	ratio = d / hint;
	for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
		int64_t off = row * ldz, c8 = al16(dz, off) ? vocab & ~(int64_t)7 : 0;

		if (ld_index(targets, row, idx_dt) == ignore)
			continue;
		for (int64_t j = walk_first(c8, threadIdx.x); j < vocab;
		     j = walk_next(j, c8, threadIdx.x, blockDim.x)) {
			int n = walk_len(j, c8);

			ld8(dz, off + j, n, dt, v);
			for (int k = 0; k < n; k++)
				v[k] *= ratio;
			st8(dz, off + j, n, dt, v);
		}
	}
}

/* ---- table members ---- */

static unsigned int capped_grid(int64_t blocks)
{
	return blocks > 0x7fffffff ? 0x7fffffffu : blocks < 1 ? 1u : (unsigned int)blocks;
}

/* The context, and dt a 16-bit dtype (idx_dt I32 or I64 when idx). */
static weft_status lowp_begin(cuda_ctx *c, const char *name, weft_dtype dt, int idx,
			      weft_dtype idx_dt)
{
	weft_status ret = cuda_need_ctx(c, name);

	if (ret)
		return ret;
	if (dt != WEFT_BF16 && dt != WEFT_F16)
		return cuda_host->error_set(WEFT_ERR_DTYPE, "cuda kernel %s: activations of dtype "
					    "%s; it takes bf16 or f16 (the table's "
					    "lowp_act_dtypes)", name, cuda_dt_name(dt));
	if (idx && idx_dt != WEFT_I32 && idx_dt != WEFT_I64)
		return cuda_host->error_set(WEFT_ERR_DTYPE, "cuda kernel %s: targets must be i32 "
					    "or i64, not %s", name, cuda_dt_name(idx_dt));
	return WEFT_OK;
}

/* Whether every row of rows x cols 16-bit elements at p starts 16 bytes
 * aligned (NULL: no operand). */
static int rows_aligned(const void *p, int64_t cols)
{
	return !p || (((uintptr_t)p & 15u) == 0 && cols % 8 == 0);
}

/* The second stage: out += the nparts slots of cols floats at part. */
static weft_status add_parts(cuda_ctx *c, const char *name, int64_t nparts, int64_t cols,
			     const float *part, float *out)
{
	k_add_parts<<<grid_for(cols, LP_THREADS), LP_THREADS, 0, c->stream>>>(nparts, cols, part,
									       out);
	return cuda_launched(c, name, "cols %lld: adding %lld partial sums", (long long)cols,
			     (long long)nparts);
}

#define SIZES_RC "%s rows %lld cols %lld", cuda_dt_name(dt), (long long)rows, (long long)cols

extern "C" weft_status cuda_sum_rows_lowp(void *kctx, weft_dtype dt, int64_t rows, int64_t cols,
					  const void *x, float *out)
{
	const char *name = "sum_rows_lowp";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = lowp_begin(c, name, dt, 0, WEFT_I32);
	int64_t nparts = (rows + SUM_ROWS - 1) / SUM_ROWS;
	int vec = rows_aligned(x, cols);
	int64_t tiles = ((vec ? cols / 8 : cols) + CS_X - 1) / CS_X;

	if (ret || rows <= 0 || cols <= 0)
		return ret;
	if (tiles > 65535 || nparts > 0x7fffffff)
		return cuda_host->error_set(WEFT_ERR_UNSUPPORTED, "cuda:%d kernel %s: %lld x %lld "
					    "is past a grid's reach (at most %d columns): split "
					    "the columns", (int)c->index, name, (long long)rows,
					    (long long)cols, 65535 * CS_X);
	if ((ret = cuda_rows_reserve(c, name, (size_t)(nparts * cols) * sizeof(float))))
		return ret;
	k_sum_rows_part<<<dim3((unsigned int)nparts, (unsigned int)tiles), LP_THREADS, 0,
			  c->stream>>>(rows, cols, dt, x, vec, c->rows);
	if ((ret = cuda_launched(c, name, SIZES_RC)))
		return ret;
	return add_parts(c, name, nparts, cols, c->rows, out);
}

extern "C" weft_status cuda_layernorm_lowp_forward(void *kctx, weft_dtype dt, int64_t rows,
						   int64_t cols, float eps, const void *x,
						   const void *r, void *sum, const float *w,
						   const float *b, void *y, float *mean,
						   float *rstd)
{
	const char *name = "layernorm_lowp_forward";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = lowp_begin(c, name, dt, 0, WEFT_I32);

	if (ret || rows <= 0 || cols <= 0)
		return ret;
	if (r && !sum)
		return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "cuda kernel %s: a residual r "
					    "needs the sum output (x + r) for backward; pass "
					    "`sum`", name);
	k_ln_lowp_fwd<<<capped_grid((rows + LP_WARPS - 1) / LP_WARPS), LP_THREADS, 0, c->stream>>>(
		rows, cols, eps, dt, x, r, sum, w, b, y, mean, rstd);
	return cuda_launched(c, name, SIZES_RC);
}

extern "C" weft_status cuda_layernorm_lowp_backward(void *kctx, weft_dtype dt, int64_t rows,
						    int64_t cols, const void *s, const float *w,
						    const float *mean, const float *rstd,
						    const void *dy, void *dx, int32_t dx_write,
						    float *dw, float *db)
{
	const char *name = "layernorm_lowp_backward";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = lowp_begin(c, name, dt, 0, WEFT_I32);
	int64_t nparts = (rows + LN_BWD_ROWS - 1) / LN_BWD_ROWS;
	float *part_w = NULL, *part_b = NULL;

	if (ret || rows <= 0 || cols <= 0 || (!dx && !dw && !db))
		return ret;
	if (nparts > 0x7fffffff)
		return cuda_host->error_set(WEFT_ERR_UNSUPPORTED, "cuda:%d kernel %s: %lld rows; "
					    "split the rows", (int)c->index, name, (long long)rows);
	if (dw || db) {
		if ((ret = cuda_rows_reserve(c, name, (size_t)(2 * nparts * cols) * sizeof(float))))
			return ret;
		part_w = dw ? c->rows : NULL;
		part_b = db ? c->rows + nparts * cols : NULL;
	}
	k_ln_lowp_bwd<<<(unsigned int)nparts, LP_THREADS, 0, c->stream>>>(
		rows, cols, dt, s, w, mean, rstd, dy, dx, dx_write != 0,
		rows_aligned(s, cols) && rows_aligned(dy, cols), part_w, part_b);
	if ((ret = cuda_launched(c, name, SIZES_RC)))
		return ret;
	if (dw && (ret = add_parts(c, name, nparts, cols, part_w, dw)))
		return ret;
	if (db && (ret = add_parts(c, name, nparts, cols, part_b, db)))
		return ret;
	return WEFT_OK;
}

#define SIZES_RV "%s rows %lld vocab %lld ld %lld", cuda_dt_name(dt), (long long)rows, \
	(long long)vocab, (long long)ld

/* The hint the fused members take: finite and not 0. */
static weft_status hint_check(cuda_ctx *c, const char *name, float hint)
{
	if (isfinite(hint) && hint != 0.0f)
		return WEFT_OK;
	return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "cuda:%d kernel %s: dloss_hint %g; pass "
				    "the finite, nonzero upstream gradient the loss expects (1, or "
				    "the loss scale)", (int)c->index, name, (double)hint);
}

/* The loss's forward, and with fused the gradient for `hint` in the same
 * pass: the count first (fused), the rows, the mean. */
static weft_status ce_forward(cuda_ctx *c, const char *name, weft_dtype dt, int64_t rows,
			     int64_t vocab, int64_t ld, void *logits, weft_dtype idx_dt,
			     const void *targets, int64_t ignore_index, int fused, float hint,
			     float *lse, float *loss, float *count)
{
	weft_status ret = lowp_begin(c, name, dt, 1, idx_dt);

	if (ret)
		return ret;
	if (rows < 0 || vocab <= 0)
		rows = 0;
	if ((ret = cuda_rows_reserve(c, name, (size_t)(2 * rows + 1) * sizeof(float))))
		return ret;
	if (rows > 0 && fused) {
		k_ce_lowp_count<<<1, LOSS_THREADS, 0, c->stream>>>(rows, targets, idx_dt,
								   ignore_index, count);
		if ((ret = cuda_launched(c, name, "rows %lld: the count", (long long)rows)))
			return ret;
		k_ce_lowp_fused<<<capped_grid(rows), CE_THREADS, 0, c->stream>>>(
			rows, vocab, ld, dt, logits, targets, idx_dt, ignore_index, hint, count, lse,
			c->rows);
	} else if (rows > 0) {
		k_ce_lowp_fwd<<<capped_grid(rows), CE_THREADS, 0, c->stream>>>(
			rows, vocab, ld, dt, logits, targets, idx_dt, ignore_index, lse, c->rows);
	}
	if (rows > 0 && (ret = cuda_launched(c, name, SIZES_RV)))
		return ret;
	k_ce_lowp_mean<<<1, LOSS_THREADS, 0, c->stream>>>(rows, c->rows, loss, count);
	return cuda_launched(c, name, "rows %lld: the mean", (long long)rows);
}

extern "C" weft_status cuda_cross_entropy_lowp_forward(void *kctx, weft_dtype dt, int64_t rows,
						       int64_t vocab, int64_t ld,
						       const void *logits, weft_dtype idx_dt,
						       const void *targets, int64_t ignore_index,
						       float *lse, float *loss, float *count)
{
	/* not fused: the logits are only read */
	return ce_forward((cuda_ctx *)kctx, "cross_entropy_lowp_forward", dt, rows, vocab, ld,
			  (void *)logits, idx_dt, targets, ignore_index, 0, 1.0f, lse, loss, count);
}

extern "C" weft_status cuda_cross_entropy_lowp_backward(void *kctx, weft_dtype dt, int64_t rows,
							int64_t vocab, int64_t ld,
							const void *logits, weft_dtype idx_dt,
							const void *targets, int64_t ignore_index,
							const float *lse, const float *dloss,
							const float *count, void *dlogits)
{
	const char *name = "cross_entropy_lowp_backward";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = lowp_begin(c, name, dt, 1, idx_dt);

	if (ret || rows <= 0 || vocab <= 0)
		return ret;
	k_ce_lowp_bwd<<<capped_grid(rows), LP_THREADS, 0, c->stream>>>(
		rows, vocab, ld, dt, logits, targets, idx_dt, ignore_index, lse, dloss, count,
		dlogits);
	return cuda_launched(c, name, SIZES_RV);
}

/* Three launches: the count, the rows (statistics and gradient), the mean
 * (as the forward's). */
extern "C" weft_status cuda_cross_entropy_lowp_fused(void *kctx, weft_dtype dt, int64_t rows,
						     int64_t vocab, int64_t ld, void *logits,
						     weft_dtype idx_dt, const void *targets,
						     int64_t ignore_index, float dloss_hint,
						     float *lse, float *loss, float *count)
{
	const char *name = "cross_entropy_lowp_fused";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);

	if (!ret)
		ret = hint_check(c, name, dloss_hint);
	if (ret)
		return ret;
	return ce_forward(c, name, dt, rows, vocab, ld, logits, idx_dt, targets, ignore_index, 1,
			  dloss_hint, lse, loss, count);
}

extern "C" weft_status cuda_cross_entropy_lowp_regrad(void *kctx, weft_dtype dt, int64_t rows,
						      int64_t vocab, int64_t ld, void *dlogits,
						      weft_dtype idx_dt, const void *targets,
						      int64_t ignore_index, float dloss_hint,
						      const float *dloss)
{
	const char *name = "cross_entropy_lowp_regrad";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = lowp_begin(c, name, dt, 1, idx_dt);

	if (!ret)
		ret = hint_check(c, name, dloss_hint);
	if (ret || rows <= 0 || vocab <= 0)
		return ret;
	k_ce_lowp_regrad<<<capped_grid(rows < REGRAD_BLOCKS ? rows : REGRAD_BLOCKS), LP_THREADS, 0,
			   c->stream>>>(rows, vocab, ld, dt, dlogits, targets, idx_dt, ignore_index,
					dloss_hint, dloss);
	return cuda_launched(c, name, SIZES_RV);
}
