/* Embedding, cross-entropy (whole, and the vocabulary-parallel rows of
 * weft/device.h's vocab_ce_stats / vocab_ce_backward) and accuracy.
 * Embedding ids and cross-entropy targets are not checked here: reading a
 * check back would make the host wait for the device at every call (twice
 * in a GPT's forward, once in its loss), and they were host data a moment
 * before, where the trainer checks them once per batch
 * (core/data/batch_check.c, with the CPU kernels' wording). An id outside
 * the table gives a zero row, a target outside [0, vocab) a row that
 * counts as ignored, so nothing is read or written out of bounds.
 * accuracy, which returns host counts anyway, still reports a bad target:
 * its counters come back in the same wait. */
#include <limits.h>

#include "cuda_dev.cuh"

#define THREADS 256

__global__ void k_embed_fwd(int64_t n, int64_t dim, int dt, const void *idx, int idx_dt,
			    int64_t vocab, const void *table, void *out)
{
	GRID_STRIDE(e, n * dim) {
		int64_t i = e / dim, j = e % dim, id = ld_index(idx, i, idx_dt);

		st(out, e, dt, id < 0 || id >= vocab ? 0.0f : ld(table, id * dim + j, dt));
	}
}

/* Embedding backward without atomics. Many positions share an id (a
 * frequent token), and adding their gradients with atomicAdd in BF16/F16
 * rounds every add to 16 bits (the sum stops growing once the addends fall
 * below half an ulp of it) in an order that changes from run to run. So the
 * positions are sorted by (id, position), and one thread per (id, column)
 * sums its run of positions in F32, in position order, and adds the sum to
 * the table once: one rounding to the dtype, the same bits every run.
 *
 * The sort key of position i: id << 32 | i, or EMBED_SKIP for a negative id
 * (the forward reported it) and for the padding up to a power of two;
 * EMBED_SKIP sorts last. */
#define EMBED_SKIP 0xffffffffffffffffull

__global__ void k_embed_keys(int64_t n, int64_t npad, const void *idx, int idx_dt,
			     unsigned long long *keys)
{
	GRID_STRIDE(i, npad) {
		int64_t id = i < n ? ld_index(idx, i, idx_dt) : -1;

		keys[i] = id < 0 || id >= 0xffffffffll ? EMBED_SKIP :
			  (unsigned long long)id << 32 | (unsigned long long)i;
	}
}

/* The keys are sorted by a bitonic network over npad keys (a power of
 * two): stage k (2, 4, .., npad) runs compare-exchange steps j = k/2, ..,
 * 1, key i with key i ^ j, ascending where i & k is 0. Keys are distinct
 * (they hold the position) except EMBED_SKIP, so the sorted order is the
 * one order of (id, position) whatever network sorts them. A step whose j
 * is below EMBED_CHUNK pairs keys within one aligned chunk of EMBED_CHUNK
 * keys, so one launch of k_embed_sort_chunk runs all of them for a chunk
 * in shared memory: every stage up to EMBED_CHUNK at once, then per later
 * stage its steps j < EMBED_CHUNK; only the steps j >= EMBED_CHUNK of the
 * stages above EMBED_CHUNK take a launch each (k_embed_sort_step). For
 * npad keys, 1 + sum over those stages of (1 + their global steps)
 * launches instead of log2(npad) (log2(npad) + 1) / 2: 10 instead of 105
 * for 16384 tokens. */
#define EMBED_CHUNK 2048

/* Block b sorts keys [b c, b c + c), c = min(npad, EMBED_CHUNK), in shared
 * memory with c / 2 threads: stages k_first .. k_last (powers of two),
 * each from its step j = min(k, c) / 2 down to 1. */
__global__ void k_embed_sort_chunk(int64_t npad, int64_t k_first, int64_t k_last,
				   unsigned long long *keys)
{
	__shared__ unsigned long long sh[EMBED_CHUNK];
	int64_t c = npad < EMBED_CHUNK ? npad : EMBED_CHUNK, base = (int64_t)blockIdx.x * c;
	int t = threadIdx.x;

	sh[t] = keys[base + t];
	sh[t + c / 2] = keys[base + t + c / 2];
	__syncthreads();
	for (int64_t k = k_first; k <= k_last; k <<= 1)
		for (int64_t j = (k < c ? k : c) >> 1; j > 0; j >>= 1) {
			/* the pair's lower key: t with a 0 bit inserted at j */
			int64_t i = (t & ~(j - 1)) << 1 | (t & (j - 1)), l = i | j;
			unsigned long long a = sh[i], b = sh[l];

			if ((a > b) == (((base + i) & k) == 0)) {
				sh[i] = b;
				sh[l] = a;
			}
			__syncthreads();
		}
	keys[base + t] = sh[t];
	keys[base + t + c / 2] = sh[t + c / 2];
}

/* One compare-exchange step (k, j) of the network over all npad keys (j >=
 * EMBED_CHUNK: the pairs span chunks). */
__global__ void k_embed_sort_step(int64_t npad, int64_t k, int64_t j, unsigned long long *keys)
{
	GRID_STRIDE(i, npad) {
		int64_t l = i ^ j;

		if (l > i) {
			unsigned long long a = keys[i], b = keys[l];
			bool up = (i & k) == 0;

			if ((a > b) == up) {
				keys[i] = b;
				keys[l] = a;
			}
		}
	}
}

/* Thread (s, j) with s the first sorted position of its id: the column-j
 * sum of that id's rows of dy, in F32, added to dtable once. */
__global__ void k_embed_bwd(int64_t n, int64_t dim, int dt, const unsigned long long *keys,
			    const void *dy, void *dtable)
{
	GRID_STRIDE(e, n * dim) {
		int64_t s = e / dim, j = e % dim, at;
		unsigned long long id = keys[s] >> 32;
		float sum = 0.0f;

		if (keys[s] == EMBED_SKIP || (s > 0 && keys[s - 1] >> 32 == id))
			continue;
		for (int64_t t = s; t < n && keys[t] >> 32 == id; t++)
			sum += ld(dy, (int64_t)(keys[t] & 0xffffffffull) * dim + j, dt);
		at = (int64_t)id * dim + j;
		st(dtable, at, dt, ld(dtable, at, dt) + sum);
	}
}

/* One block per row: probabilities, and the row's loss (double, as the
 * CPU sums it) and whether it counts. */
__global__ void k_ce_rows(int64_t rows, int64_t vocab, int dt, const void *logits,
			  const void *targets, int idx_dt, int64_t ignore, void *probs,
			  double *row_loss, float *row_count)
{
	__shared__ float sh[32];

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		int64_t off = r * vocab, t = ld_index(targets, r, idx_dt);
		float mx = -INFINITY, sum = 0.0f, inv;

		for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
			mx = fmaxf(mx, ld(logits, off + j, dt));
		mx = block_max(mx, sh);
		for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
			sum += expf(ld(logits, off + j, dt) - mx);
		sum = block_sum(sum, sh);
		inv = 1.0f / sum;
		for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
			st(probs, off + j, dt, expf(ld(logits, off + j, dt) - mx) * inv);
		if (threadIdx.x != 0)
			continue;
		row_loss[r] = 0.0;
		row_count[r] = 0.0f;
		if (t == ignore || t < 0 || t >= vocab)
			continue;
		row_loss[r] = (double)logf(sum) + (double)mx - (double)ld(logits, off + t, dt);
		row_count[r] = 1.0f;
	}
}

/* One block: the mean over counted rows, in a fixed order. */
__global__ void k_ce_reduce(int64_t rows, const double *row_loss, const float *row_count,
			    float *loss, float *count)
{
	__shared__ double shl[1024];
	__shared__ double shc[1024];
	double l = 0.0, n = 0.0;

	for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
		l += row_loss[r];
		n += (double)row_count[r];
	}
	shl[threadIdx.x] = l;
	shc[threadIdx.x] = n;
	__syncthreads();
	for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s) {
			shl[threadIdx.x] += shl[threadIdx.x + s];
			shc[threadIdx.x] += shc[threadIdx.x + s];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		*loss = shc[0] > 0.0 ? (float)(shl[0] / shc[0]) : 0.0f;
		*count = (float)shc[0];
	}
}

__global__ void k_ce_bwd(int64_t rows, int64_t vocab, int dt, const void *probs,
			 const void *targets, int idx_dt, int64_t ignore, const float *dloss,
			 const float *count, void *dlogits)
{
	float scale;

	if (*count == 0.0f)
		return;
	scale = *dloss / *count;
	GRID_STRIDE(e, rows * vocab) {
		int64_t r = e / vocab, j = e % vocab, t = ld_index(targets, r, idx_dt);
		float v;

		if (t == ignore || t < 0 || t >= vocab) /* a bad target counts as ignored */
			continue;
		v = ld(dlogits, e, dt) + ld(probs, e, dt) * scale;
		if (j == t)
			v -= scale;
		st(dlogits, e, dt, v);
	}
}

/* One block per row: arg-max (lowest index on ties), then counters
 * check[1] (counted) and check[2] (correct). */
__global__ void k_accuracy(int64_t rows, int64_t vocab, int dt, const void *logits,
			   const void *targets, int idx_dt, int64_t ignore,
			   unsigned long long *check)
{
	__shared__ float shv[THREADS];
	__shared__ int64_t shi[THREADS];

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		int64_t off = r * vocab, best = -1, t;
		float bv = -INFINITY;

		for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
			float v = ld(logits, off + j, dt);

			if (best < 0 || v > bv) {
				bv = v;
				best = j;
			}
		}
		shv[threadIdx.x] = bv;
		shi[threadIdx.x] = best;
		__syncthreads();
		for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
			if (threadIdx.x < s) {
				float ov = shv[threadIdx.x + s];
				int64_t oi = shi[threadIdx.x + s];

				if (oi >= 0 && (shi[threadIdx.x] < 0 || ov > shv[threadIdx.x] ||
						(ov == shv[threadIdx.x] && oi < shi[threadIdx.x]))) {
					shv[threadIdx.x] = ov;
					shi[threadIdx.x] = oi;
				}
			}
			__syncthreads();
		}
		if (threadIdx.x == 0) {
			t = ld_index(targets, r, idx_dt);
			if (t != ignore) {
				if (t < 0 || t >= vocab) {
					atomicMin(check, (unsigned long long)r);
				} else {
					atomicAdd(check + 1, 1ull);
					if (shi[0] == t)
						atomicAdd(check + 2, 1ull);
				}
			}
		}
		__syncthreads(); /* shv/shi are reused by the next row */
	}
}

/* The vocabulary-parallel loss's statistics, one block per row (THREADS
 * threads): with max NULL the row's largest logit; else the row's sum of
 * exp(z - max) in double, reduced over the block in a fixed tree, and the
 * target's logit where this rank holds its column. */
__global__ void k_vce_stats(int64_t rows, int64_t vocab, const float *logits,
			    const void *targets, int idx_dt, int64_t begin, const double *max,
			    double *stats)
{
	__shared__ float shf[32];
	__shared__ double shd[THREADS];

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *z = logits + r * vocab;

		if (!max) {
			float m = -INFINITY;

			for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
				m = fmaxf(m, z[j]);
			m = block_max(m, shf);
			if (threadIdx.x == 0)
				stats[r] = (double)m;
			continue;
		}
		{
			double acc = 0.0;

			for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
				acc += exp((double)z[j] - max[r]);
			shd[threadIdx.x] = acc;
			__syncthreads();
			for (unsigned int h = blockDim.x / 2; h > 0; h >>= 1) {
				if (threadIdx.x < h)
					shd[threadIdx.x] += shd[threadIdx.x + h];
				__syncthreads();
			}
			if (threadIdx.x == 0) {
				int64_t t = ld_index(targets, r, idx_dt) - begin;

				stats[r] = shd[0];
				stats[rows + r] = t >= 0 && t < vocab ? (double)z[t] : 0.0;
			}
			__syncthreads(); /* shd is reused by the next row */
		}
	}
}

__global__ void k_vce_bwd(int64_t rows, int64_t vocab, const float *logits, const void *targets,
			  int idx_dt, int64_t ignore, int64_t begin, const double *max,
			  const double *sum, double scale, float *dlogits)
{
	GRID_STRIDE(e, rows * vocab) {
		int64_t r = e / vocab, j = e % vocab, t = ld_index(targets, r, idx_dt);
		float v;

		if (t == ignore)
			continue;
		v = dlogits[e] + (float)(exp((double)logits[e] - max[r]) / sum[r] * scale);
		if (j == t - begin)
			v -= (float)scale;
		dlogits[e] = v;
	}
}

static unsigned int row_grid(int64_t rows)
{
	return rows > 0x7fffffff ? 0x7fffffffu : (unsigned int)rows;
}

/* Reads one index element back for an error message. */
static int64_t index_at(const void *idx, weft_dtype idx_dt, int64_t i)
{
	int64_t v64 = 0;
	int32_t v32 = 0;

	if (idx_dt == WEFT_I64) {
		cudaMemcpy(&v64, (const int64_t *)idx + i, sizeof(v64), cudaMemcpyDeviceToHost);
		return v64;
	}
	cudaMemcpy(&v32, (const int32_t *)idx + i, sizeof(v32), cudaMemcpyDeviceToHost);
	return v32;
}

static weft_status check_idx_dt(const char *kernel, weft_dtype idx_dt)
{
	if (idx_dt == WEFT_I32 || idx_dt == WEFT_I64)
		return WEFT_OK;
	return cuda_host->error_set(WEFT_ERR_DTYPE, "cuda kernel %s: indices must be i32 or i64, "
				    "not dtype %d", kernel, (int)idx_dt);
}

extern "C" weft_status cuda_embedding_forward(void *kctx, weft_dtype dt, int64_t n, int64_t dim,
					      weft_dtype idx_dt, const void *idx, int64_t vocab,
					      const void *table, void *out)
{
	const char *name = "embedding_forward";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);

	if (ret || (ret = check_idx_dt(name, idx_dt)))
		return ret;
	if (n <= 0 || dim <= 0)
		return WEFT_OK;
	k_embed_fwd<<<grid_for(n * dim, THREADS), THREADS, 0, c->stream>>>(
		n, dim, dt, idx, idx_dt, vocab, table, out);
	return cuda_launched(c, name, "%s n %lld dim %lld vocab %lld", cuda_dt_name(dt),
			     (long long)n, (long long)dim, (long long)vocab);
}

extern "C" weft_status cuda_embedding_backward(void *kctx, weft_dtype dt, int64_t n, int64_t dim,
					       weft_dtype idx_dt, const void *idx, const void *dy,
					       void *dtable)
{
	const char *name = "embedding_backward";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);
	unsigned long long *keys;
	int64_t npad = 1, chunk;

	if (ret || (ret = check_idx_dt(name, idx_dt)))
		return ret;
	if (n <= 0 || dim <= 0 || !dtable)
		return WEFT_OK;
	if (n >= 0xffffffffll) /* positions live in the low 32 bits of a sort key */
		return cuda_host->error_set(WEFT_ERR_UNSUPPORTED, "cuda:%d kernel %s: %lld "
					    "positions; at most 2^32 - 2 per call: split the batch",
					    (int)c->index, name, (long long)n);
	while (npad < n)
		npad <<= 1;
	if ((ret = cuda_rows_reserve(c, name, (size_t)npad * sizeof(*keys))))
		return ret;
	keys = (unsigned long long *)c->rows;
	k_embed_keys<<<grid_for(npad, THREADS), THREADS, 0, c->stream>>>(n, npad, idx, idx_dt,
									   keys);
	if ((ret = cuda_launched(c, name, "n %lld: sort keys", (long long)n)))
		return ret;
	chunk = npad < EMBED_CHUNK ? npad : EMBED_CHUNK;
	for (int64_t k = chunk; npad > 1 && k <= npad; k <<= 1) {
		for (int64_t j = k >> 1; j >= chunk; j >>= 1) {
			k_embed_sort_step<<<grid_for(npad, THREADS), THREADS, 0, c->stream>>>(
				npad, k, j, keys);
			if ((ret = cuda_launched(c, name, "n %lld: sorting, step %lld/%lld",
						 (long long)n, (long long)k, (long long)j)))
				return ret;
		}
		/* the first launch: every stage up to the chunk */
		k_embed_sort_chunk<<<(unsigned int)(npad / chunk), (unsigned int)(chunk / 2), 0,
				     c->stream>>>(npad, k == chunk ? 2 : k, k, keys);
		if ((ret = cuda_launched(c, name, "n %lld: sorting in chunks of %lld, stage %lld",
					 (long long)n, (long long)chunk, (long long)k)))
			return ret;
	}
	k_embed_bwd<<<grid_for(n * dim, THREADS), THREADS, 0, c->stream>>>(n, dim, dt, keys, dy,
									     dtable);
	return cuda_launched(c, name, "%s n %lld dim %lld", cuda_dt_name(dt), (long long)n,
			     (long long)dim);
}

static weft_status bad_target(const void *targets, weft_dtype idx_dt, int64_t row,
			      int64_t vocab, int64_t ignore)
{
	return cuda_host->error_set(WEFT_ERR_INVALID_ARG, "target %lld at row %lld is outside "
				    "[0, %lld) and is not the ignore index %lld",
				    (long long)index_at(targets, idx_dt, row), (long long)row,
				    (long long)vocab, (long long)ignore);
}

extern "C" weft_status cuda_cross_entropy_forward(void *kctx, weft_dtype dt, int64_t rows,
						  int64_t vocab, const void *logits,
						  weft_dtype idx_dt, const void *targets,
						  int64_t ignore_index, void *probs, float *loss,
						  float *count)
{
	const char *name = "cross_entropy_forward";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);
	double *row_loss;
	float *row_count;

	if (ret || (ret = check_idx_dt(name, idx_dt)))
		return ret;
	if (rows < 0 || vocab <= 0)
		rows = 0;
	if ((ret = cuda_rows_reserve(c, name, (size_t)rows * 12 + 16)))
		return ret;
	row_loss = (double *)c->rows;
	row_count = (float *)(row_loss + rows);
	if (rows > 0) {
		k_ce_rows<<<row_grid(rows), THREADS, 0, c->stream>>>(
			rows, vocab, dt, logits, targets, idx_dt, ignore_index, probs, row_loss,
			row_count);
		if ((ret = cuda_launched(c, name, "%s rows %lld vocab %lld", cuda_dt_name(dt),
					 (long long)rows, (long long)vocab)))
			return ret;
	}
	k_ce_reduce<<<1, 1024, 0, c->stream>>>(rows, row_loss, row_count, loss, count);
	return cuda_launched(c, name, "reducing %lld rows", (long long)rows);
}

extern "C" weft_status cuda_cross_entropy_backward(void *kctx, weft_dtype dt, int64_t rows,
						   int64_t vocab, const void *probs,
						   weft_dtype idx_dt, const void *targets,
						   int64_t ignore_index, const float *dloss,
						   const float *count, void *dlogits)
{
	const char *name = "cross_entropy_backward";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);

	if (ret || (ret = check_idx_dt(name, idx_dt)))
		return ret;
	if (rows <= 0 || vocab <= 0 || !dlogits)
		return WEFT_OK;
	k_ce_bwd<<<grid_for(rows * vocab, THREADS), THREADS, 0, c->stream>>>(
		rows, vocab, dt, probs, targets, idx_dt, ignore_index, dloss, count, dlogits);
	return cuda_launched(c, name, "%s rows %lld vocab %lld", cuda_dt_name(dt),
			     (long long)rows, (long long)vocab);
}

extern "C" weft_status cuda_accuracy(void *kctx, weft_dtype dt, int64_t rows, int64_t vocab,
				     const void *logits, weft_dtype idx_dt, const void *targets,
				     int64_t ignore_index, int64_t *correct, int64_t *counted)
{
	const char *name = "accuracy";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);

	*correct = *counted = 0;
	if (ret || (ret = check_idx_dt(name, idx_dt)))
		return ret;
	if (rows <= 0 || vocab <= 0)
		return WEFT_OK;
	if ((ret = cuda_check_reset(c, name)))
		return ret;
	k_accuracy<<<row_grid(rows), THREADS, 0, c->stream>>>(rows, vocab, dt, logits, targets,
								idx_dt, ignore_index, c->check_dev);
	if ((ret = cuda_launched(c, name, "%s rows %lld vocab %lld", cuda_dt_name(dt),
				 (long long)rows, (long long)vocab)) ||
	    (ret = cuda_check_fetch(c, name)))
		return ret;
	if (c->check_host[0] != ULLONG_MAX)
		return bad_target(targets, idx_dt, (int64_t)c->check_host[0], vocab, ignore_index);
	*counted = (int64_t)c->check_host[1];
	*correct = (int64_t)c->check_host[2];
	return WEFT_OK;
}

extern "C" weft_status cuda_vocab_ce_stats(void *kctx, int64_t rows, int64_t vocab,
					   const float *logits, weft_dtype idx_dt,
					   const void *targets, int64_t begin, const double *max,
					   double *stats)
{
	const char *name = "vocab_ce_stats";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);

	if (ret || (ret = check_idx_dt(name, idx_dt)))
		return ret;
	if (rows <= 0)
		return WEFT_OK;
	k_vce_stats<<<row_grid(rows), THREADS, 0, c->stream>>>(rows, vocab, logits, targets,
								 idx_dt, begin, max, stats);
	return cuda_launched(c, name, "rows %lld vocab %lld%s", (long long)rows, (long long)vocab,
			     max ? " (sums)" : " (maxima)");
}

extern "C" weft_status cuda_vocab_ce_backward(void *kctx, int64_t rows, int64_t vocab,
					      const float *logits, weft_dtype idx_dt,
					      const void *targets, int64_t ignore_index,
					      int64_t begin, const double *max, const double *sum,
					      double scale, float *dlogits)
{
	const char *name = "vocab_ce_backward";
	cuda_ctx *c = (cuda_ctx *)kctx;
	weft_status ret = cuda_need_ctx(c, name);

	if (ret || (ret = check_idx_dt(name, idx_dt)))
		return ret;
	if (rows <= 0 || vocab <= 0 || !dlogits)
		return WEFT_OK;
	k_vce_bwd<<<grid_for(rows * vocab, THREADS), THREADS, 0, c->stream>>>(
		rows, vocab, logits, targets, idx_dt, ignore_index, begin, max, sum, scale, dlogits);
	return cuda_launched(c, name, "rows %lld vocab %lld", (long long)rows, (long long)vocab);
}
