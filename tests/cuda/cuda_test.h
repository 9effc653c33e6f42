/* cuda_test.h - what the CUDA kernel tests share: the skip rule, the two
 * kernel tables (CPU reference and CUDA), and a tiny "device" layer so one
 * function runs an op on either table from host float arrays.
 *
 * Skipping: with no usable GPU (cudaGetDeviceCount fails or finds none)
 * a test prints "skipped: no CUDA device (...)" and exits with 77, which
 * ctest reports as skipped (SKIP_RETURN_CODE). WEFT_CUDA_TESTS_REQUIRE_GPU=1
 * (set by scripts/gpu-check) turns that skip into a failure.
 *
 * Tolerances are per dtype (ct_tol): F32 results differ from the CPU only
 * by summation order and libm (1e-5 relative); BF16 and F16 inputs are
 * rounded before both sides see them, so the difference is the rounding
 * of outputs and intermediates (8 and 11 bits of mantissa: 2^-8 ~ 0.4%,
 * 2^-11 ~ 0.05%), with a margin of 4x for chains of a few roundings.
 */
#ifndef WEFT_CUDA_TEST_H
#define WEFT_CUDA_TEST_H

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/autograd.h"
#include "weft/device.h"
#include "weft/ops.h"
#include "weft/status.h"
#include "weft/tensor.h"
#include "weft_test.h"

/* The CUDA table, its context, and the CPU table. */
static const weft_kernel_table *ct_gpu;
static const weft_kernel_table *ct_cpu;
static void *ct_kctx;

/* Exits 77 ("skipped") when this machine has no usable GPU, or 1 when
 * WEFT_CUDA_TESTS_REQUIRE_GPU=1 asks for a GPU. */
static inline void ct_require_gpu(const char *name)
{
	int n = 0;
	cudaError_t err = cudaGetDeviceCount(&n);
	const char *req = getenv("WEFT_CUDA_TESTS_REQUIRE_GPU");
	char why[256];

	if (err == cudaSuccess && n > 0)
		return;
	if (err != cudaSuccess)
		snprintf(why, sizeof(why), "cudaGetDeviceCount: %s: %s", cudaGetErrorName(err),
			 cudaGetErrorString(err));
	else
		snprintf(why, sizeof(why), "cudaGetDeviceCount found 0 GPUs");
	if (req && !strcmp(req, "1")) {
		fprintf(stderr, "%s: FAILED: a GPU is required (WEFT_CUDA_TESTS_REQUIRE_GPU=1) but "
			"there is no CUDA device (%s)\n", name, why);
		exit(1);
	}
	printf("%s: skipped: no CUDA device (%s)\n", name, why);
	exit(77);
}

#ifdef WEFT_PLUGIN_DIR_FOR_TESTS
/* The kernel library file under test: WEFT_TEST_KERNELS_DIR's
 * weft_kernels_cuda.so when that is set (the cuda_emu label points it at
 * the emulated build of tests/cuda_emu), else the build's own. */
static inline const char *ct_kernels_file(void)
{
	static char path[4096];
	const char *dir = getenv("WEFT_TEST_KERNELS_DIR");

	snprintf(path, sizeof(path), "%s/weft_kernels_cuda.so",
		 dir && *dir ? dir : WEFT_PLUGIN_DIR_FOR_TESTS);
	return path;
}
#endif

/* A new reference (dlclose it) to the loaded library that holds `table`
 * (a kernel table from weft_kernels_get), wherever the core found it;
 * NULL when it cannot be told. */
static inline void *ct_kernels_handle(const void *table)
{
	Dl_info info;

	if (!dladdr(table, &info) || !info.dli_fname)
		return NULL;
	return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
}

/* Loads both tables and makes a CUDA context on GPU 0. */
static inline void ct_setup(const char *name)
{
	ct_require_gpu(name);
	WT_OK(weft_kernels_get(WEFT_CPU, &ct_cpu));
	WT_OK(weft_kernels_get((weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 }, &ct_gpu));
	WT_OK(ct_gpu->ctx_create(0, &ct_kctx));
}

static inline void ct_teardown(void)
{
	ct_gpu->ctx_destroy(ct_kctx);
	ct_kctx = NULL;
}

/* An EMU_COUNTS file's lines between the marks `from` and `to` (the
 * emulator's counts: tests/cuda_emu/emu_count.cpp): G and K lines
 * counted, their bytes (read + written) summed, the last G line's name
 * and bytes read, the K lines' names (comma-joined, as many as fit), and
 * the K lines whose name contains k_match (NULL: none), with their bytes
 * read and written. */
typedef struct ct_span {
	int g, k, k_matched;
	double bytes, g_read, k_matched_read, k_matched_written;
	char g_name[128], k_names[256];
} ct_span;

static inline ct_span ct_count_span(const char *path, const char *from, const char *to,
				    const char *k_match)
{
	FILE *f = fopen(path, "r");
	char line[512], name[128];
	double rd, wr;
	ct_span sc = { 0 };
	int in = 0;

	WT_REQUIRE(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (line[0] == 'M') {
			if (in && !strcmp(line + 2, to))
				break;
			in = in || !strcmp(line + 2, from);
			continue;
		}
		if (!in || sscanf(line + 2, "%127[^\t]\t%lf\t%lf", name, &rd, &wr) != 3)
			continue;
		sc.bytes += rd + wr;
		if (line[0] == 'G') {
			sc.g++;
			sc.g_read = rd;
			snprintf(sc.g_name, sizeof(sc.g_name), "%s", name);
		} else if (line[0] == 'K') {
			sc.k++;
			if (k_match && strstr(name, k_match)) {
				sc.k_matched++;
				sc.k_matched_read += rd;
				sc.k_matched_written += wr;
			}
			if (strlen(sc.k_names) + strlen(name) + 2 < sizeof(sc.k_names))
				strcat(strcat(sc.k_names, sc.k_names[0] ? "," : ""), name);
		}
	}
	fclose(f);
	return sc;
}

/* One side of a comparison: a table, its context and the dtype it
 * computes in (the CPU table is F32 only). Allocations are remembered and
 * freed by ct_release. */
#define CT_MAX_ALLOCS 64
typedef struct ct_dev {
	const weft_kernel_table *t;
	void *kctx;
	weft_dtype dt;
	size_t nalloc;
	void *ptr[CT_MAX_ALLOCS];
	size_t bytes[CT_MAX_ALLOCS];
} ct_dev;

static inline ct_dev ct_cpu_dev(void)
{
	return (ct_dev){ .t = ct_cpu, .kctx = NULL, .dt = WEFT_F32 };
}

static inline ct_dev ct_gpu_dev(weft_dtype dt)
{
	return (ct_dev){ .t = ct_gpu, .kctx = ct_kctx, .dt = dt };
}

static inline size_t ct_size(weft_dtype dt)
{
	return dt == WEFT_F32 || dt == WEFT_I32 ? 4 : dt == WEFT_I64 ? 8 : 2;
}

static inline const char *ct_name(weft_dtype dt)
{
	return dt == WEFT_F32 ? "f32" : dt == WEFT_BF16 ? "bf16" : dt == WEFT_F16 ? "f16" : "?";
}

/* `bytes` of memory on d's device (zeroed). */
static inline void *ct_alloc(ct_dev *d, size_t bytes)
{
	void *p = NULL;

	WT_REQUIRE(d->nalloc < CT_MAX_ALLOCS);
	WT_OK(d->t->mem_alloc(0, WEFT_MEM_OTHER, bytes ? bytes : 1, &p));
	WT_OK(d->t->zero(d->kctx, p, bytes ? bytes : 1));
	d->ptr[d->nalloc] = p;
	d->bytes[d->nalloc++] = bytes ? bytes : 1;
	return p;
}

static inline void ct_release(ct_dev *d)
{
	WT_OK(d->t->synchronize(d->kctx));
	for (size_t i = 0; i < d->nalloc; i++)
		d->t->mem_free(0, WEFT_MEM_OTHER, d->ptr[i], d->bytes[i]);
	d->nalloc = 0;
}

/* n floats from the host, stored on d in d->dt. */
static inline void *ct_in(ct_dev *d, const float *h, int64_t n)
{
	size_t bytes = (size_t)n * ct_size(d->dt);
	void *tmp = malloc(bytes ? bytes : 1), *p = ct_alloc(d, bytes);

	WT_REQUIRE(tmp != NULL);
	WT_OK(ct_cpu->convert(NULL, n, WEFT_F32, h, d->dt, tmp));
	WT_OK(d->t->copy(d->kctx, p, tmp, bytes, WEFT_COPY_HOST_TO_DEVICE));
	free(tmp);
	return p;
}

/* Raw bytes (indices, F32 statistics) onto d. */
static inline void *ct_in_raw(ct_dev *d, const void *h, size_t bytes)
{
	void *p = ct_alloc(d, bytes);

	WT_OK(d->t->copy(d->kctx, p, h, bytes, WEFT_COPY_HOST_TO_DEVICE));
	return p;
}

/* n elements of d->dt at p, as floats in h. */
static inline void ct_out(ct_dev *d, const void *p, int64_t n, float *h)
{
	size_t bytes = (size_t)n * ct_size(d->dt);
	void *tmp = malloc(bytes ? bytes : 1);

	WT_REQUIRE(tmp != NULL);
	WT_OK(d->t->copy(d->kctx, tmp, p, bytes, WEFT_COPY_DEVICE_TO_HOST));
	WT_OK(ct_cpu->convert(NULL, n, d->dt, tmp, WEFT_F32, h));
	free(tmp);
}

/* n F32 values at p (statistics) into h. */
static inline void ct_out_f32(ct_dev *d, const float *p, int64_t n, float *h)
{
	WT_OK(d->t->copy(d->kctx, h, p, (size_t)n * 4, WEFT_COPY_DEVICE_TO_HOST));
}

/* Rounds x in place to what dtype dt can hold, so both sides see the same
 * inputs. */
static inline void ct_round(weft_dtype dt, float *x, int64_t n)
{
	void *tmp = malloc((size_t)n * 2 + 1);

	if (dt == WEFT_F32)
		goto out_free;
	WT_REQUIRE(tmp != NULL);
	WT_OK(ct_cpu->convert(NULL, n, WEFT_F32, x, dt, tmp));
	WT_OK(ct_cpu->convert(NULL, n, dt, tmp, WEFT_F32, x));
out_free:
	free(tmp);
}

/* Deterministic uniform values in [lo, hi), rounded to dt. */
static inline float *ct_random(uint64_t seed, int64_t n, float lo, float hi, weft_dtype dt)
{
	float *x = malloc((size_t)(n ? n : 1) * sizeof(float));

	WT_REQUIRE(x != NULL);
	for (int64_t i = 0; i < n; i++)
		x[i] = lo + (hi - lo) * weft_rng_uniform(seed, (uint64_t)i);
	ct_round(dt, x, n);
	return x;
}

/* Relative and absolute tolerance of results in dtype dt, for values of
 * size about 1 (see the top of this file). `scale` multiplies both for
 * results that went through longer chains (reductions, GEMMs). */
typedef struct ct_tol {
	double rtol, atol;
} ct_tol;

static inline ct_tol ct_tol_for(weft_dtype dt, double scale)
{
	switch (dt) {
	case WEFT_BF16: return (ct_tol){ 1.6e-2 * scale, 1.6e-2 * scale };
	case WEFT_F16: return (ct_tol){ 2e-3 * scale, 2e-3 * scale };
	default: return (ct_tol){ 1e-5 * scale, 1e-5 * scale };
	}
}

/* The dtype's relative tolerance with a given absolute floor: for results
 * far below 1 (probabilities), where ct_tol_for's atol would hide errors. */
static inline ct_tol ct_tol_rel(weft_dtype dt, double atol)
{
	return (ct_tol){ ct_tol_for(dt, 1.0).rtol, atol };
}

/* Checks |got - want| <= atol + rtol |want| element by element; one check
 * per call, printing the count and the worst element on failure. */
static inline void ct_expect_close(const char *what, weft_dtype dt, const float *got,
				   const float *want, int64_t n, ct_tol tol)
{
	int64_t bad = 0, worst = -1;
	double worst_excess = 0.0;

	for (int64_t i = 0; i < n; i++) {
		double diff = fabs((double)got[i] - (double)want[i]);
		double lim = tol.atol + tol.rtol * fabs((double)want[i]);

		if (!(diff <= lim)) {
			bad++;
			if (worst < 0 || diff - lim > worst_excess) {
				worst = i;
				worst_excess = diff - lim;
			}
		}
	}
	wt_checks++;
	if (bad) {
		wt_failures++;
		fprintf(stderr, "%s (%s): %lld of %lld elements differ beyond rtol %g atol %g; "
			"worst [%lld]: cuda %.9g, cpu %.9g\n", what, ct_name(dt), (long long)bad,
			(long long)n, tol.rtol, tol.atol, (long long)worst, (double)got[worst],
			(double)want[worst]);
	}
}

/* Both sides for one dtype: runs `body` as ct_run(dt) does in the tests. */
static const weft_dtype ct_float_dtypes[] = { WEFT_F32, WEFT_BF16, WEFT_F16 };
#define CT_NDTYPES 3


/* ---- the flash tests' reference attention (test_cuda_flash,
 * test_cuda_gpt_flash) ---- */

/* The CPU table's materialized causal attention (attention_gqa_*, F32) on
 * host arrays: qkv (B, T, (nh + 2 nkv) hs), dout (B, T, nh hs); writes
 * out (B, T, nh hs) and dqkv = dqkv0 plus the accumulated gradient. */
static inline void ct_attention_ref(int64_t B, int64_t T, int64_t nh, int64_t nkv, int64_t hs,
				    const float *qkv, const float *dout, const float *dqkv0,
				    float *out, float *dqkv)
{
	int64_t nq = B * T * (nh + 2 * nkv) * hs, no = B * T * nh * hs;
	ct_dev cpu = ct_cpu_dev();
	size_t sb = cpu.t->attention_gqa_scratch(WEFT_F32, B, T, nh, nkv, hs);
	void *qd = ct_in(&cpu, qkv, nq), *od = ct_alloc(&cpu, (size_t)no * 4);
	void *ad = ct_alloc(&cpu, (size_t)(B * nh * T * T) * 4);
	void *dod = ct_in(&cpu, dout, no), *dqd = ct_in(&cpu, dqkv0, nq);
	void *scratch = ct_alloc(&cpu, sb);

	WT_OK(cpu.t->attention_gqa_forward(NULL, WEFT_F32, B, T, nh, nkv, hs, qd, od, ad, scratch));
	WT_OK(cpu.t->attention_gqa_backward(NULL, WEFT_F32, B, T, nh, nkv, hs, qd, ad, dod, dqd,
					    scratch));
	ct_out(&cpu, od, no, out);
	ct_out(&cpu, dqd, nq, dqkv);
	ct_release(&cpu);
}

/* The log-sum-exp flash attention saves, lse[b][h][t] (natural log of the
 * sum over keys j <= t of exp(q_t k_j / sqrt(hs))), summed in double from
 * the host copy of qkv. */
static inline void ct_attention_lse_ref(const float *qkv, int64_t B, int64_t T, int64_t nh,
					int64_t nkv, int64_t hs, float *lse)
{
	int64_t L = (nh + 2 * nkv) * hs, g = nh / nkv;
	double scale = 1.0 / sqrt((double)hs), *s = malloc((size_t)T * sizeof(double));

	WT_REQUIRE(s != NULL);
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < nh; h++)
			for (int64_t t = 0; t < T; t++) {
				const float *q = qkv + (b * T + t) * L + h * hs;
				double m = -INFINITY, sum = 0.0;

				for (int64_t j = 0; j <= t; j++) {
					const float *k = qkv + (b * T + j) * L + (nh + h / g) * hs;
					double acc = 0.0;

					for (int64_t d = 0; d < hs; d++)
						acc += (double)q[d] * (double)k[d];
					s[j] = acc * scale;
					m = s[j] > m ? s[j] : m;
				}
				for (int64_t j = 0; j <= t; j++)
					sum += exp(s[j] - m);
				lse[(b * nh + h) * T + t] = (float)(m + log(sum));
			}
	free(s);
}

/* The core's attention op forward and backward (F32) on a context of dev:
 * weft_op_attention_gqa, or GPT's weft_op_attention (one kv head per
 * query head) when nkv is 0. Writes the output into y and qkv's gradient
 * into dqkv; *arena_bytes: the activation arena's bytes the forward took. */
static inline void ct_attention_op(weft_device dev, int64_t B, int64_t T, int64_t nh, int64_t nkv,
				   int64_t hs, const float *qkv_h, const float *gy_h, float *y_h,
				   float *dqkv_h, size_t *arena_bytes)
{
	int64_t s[3] = { B, T, (nh + 2 * (nkv ? nkv : nh)) * hs }, so[3] = { B, T, nh * hs };
	weft_ctx_options o = { .device = dev };
	weft_ctx *ctx = NULL;
	weft_tensor *qkv, *gy, *y;
	weft_arena_stats before, after;

	WT_OK(weft_ctx_create(&o, &ctx));
	weft_ctx_step_begin(ctx);
	WT_OK(weft_ctx_tensor(ctx, "qkv", WEFT_F32, 3, s, &qkv));
	WT_OK(weft_ctx_tensor(ctx, "gy", WEFT_F32, 3, so, &gy));
	WT_OK(weft_tensor_copy_from_host(qkv, qkv_h, weft_tensor_nbytes(qkv)));
	WT_OK(weft_tensor_copy_from_host(gy, gy_h, weft_tensor_nbytes(gy)));
	weft_tensor_requires_grad(qkv, 1);
	weft_arena_get_stats(weft_ctx_arena(ctx), &before);
	if (nkv)
		WT_OK(weft_op_attention_gqa(ctx, qkv, nh, nkv, &y));
	else
		WT_OK(weft_op_attention(ctx, qkv, nh, &y));
	weft_arena_get_stats(weft_ctx_arena(ctx), &after);
	*arena_bytes = after.used - before.used;
	WT_OK(weft_backward_from(ctx, y, gy));
	WT_REQUIRE(qkv->grad != NULL);
	WT_OK(weft_tensor_copy_to_host(y, y_h, weft_tensor_nbytes(y)));
	WT_OK(weft_tensor_copy_to_host(qkv->grad, dqkv_h, weft_tensor_nbytes(qkv)));
	weft_ctx_free(ctx);
}

/* The op (as ct_attention_op) on CUDA against the op on the CPU, F32 on
 * inputs drawn from `seed`: output within ct_tol_for(F32, 1) (the same
 * sums in another order), the gradient within scale 2 (two chained
 * reductions, over keys and over the head dim). The CPU's activations
 * hold the (B, nh, T, T) probabilities; CUDA's, when `fused`, less than
 * them (the flash path saves the (B, nh, T) log-sum-exp), else at least
 * them (the materialized path). */
static inline void ct_attention_op_case(int64_t B, int64_t T, int64_t nh, int64_t nkv,
					int64_t hs, int fused, uint64_t seed)
{
	int64_t nq = B * T * (nh + 2 * (nkv ? nkv : nh)) * hs, no = B * T * nh * hs;
	size_t probs = (size_t)(B * nh * T * T) * 4, bytes[2];
	float *qkv = ct_random(seed, nq, -2.0f, 2.0f, WEFT_F32);
	float *gy = ct_random(seed + 1, no, -1.0f, 1.0f, WEFT_F32);
	float *y[2], *dq[2];
	char what[160];

	for (int k = 0; k < 2; k++) {
		y[k] = malloc((size_t)no * 4);
		dq[k] = malloc((size_t)nq * 4);
		WT_REQUIRE(y[k] && dq[k]);
		ct_attention_op(k ? (weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 } : WEFT_CPU,
				B, T, nh, nkv, hs, qkv, gy, y[k], dq[k], &bytes[k]);
	}
	snprintf(what, sizeof(what), "%s B %lld T %lld nh %lld nkv %lld hs %lld",
		 nkv ? "weft_op_attention_gqa" : "weft_op_attention", (long long)B, (long long)T,
		 (long long)nh, (long long)(nkv ? nkv : nh), (long long)hs);
	ct_expect_close(what, WEFT_F32, y[1], y[0], no, ct_tol_for(WEFT_F32, 1.0));
	ct_expect_close(what, WEFT_F32, dq[1], dq[0], nq, ct_tol_for(WEFT_F32, 2.0));
	WT_CHECK(bytes[0] >= probs);
	if (fused)
		WT_CHECK(bytes[1] < probs);
	else
		WT_CHECK(bytes[1] >= probs);
	fprintf(stderr, "%s: activations cpu %zu, cuda %zu bytes (probabilities %zu)\n", what,
		bytes[0], bytes[1], probs);
	for (int k = 0; k < 2; k++) {
		free(y[k]);
		free(dq[k]);
	}
	free(qkv);
	free(gy);
}

/* ---- the `weft fit` tests' shared steps ---- */

/* train_loss and, when norm is not NULL, grad_norm (the columns
 * step,train_loss,lr,epoch,grad_norm) of DIR/runs/RUN/version_V/metrics.csv,
 * at most max rows; returns how many were read. */
static inline int ct_read_metrics(const char *dir, const char *run, int version, double *loss,
				  double *norm, int max)
{
	char path[1200], line[512];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/runs/%s/version_%d/metrics.csv", dir, run, version);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		long step, epoch;
		double l, lr, g;
		int got = sscanf(line, "%ld,%lf,%lf,%ld,%lf", &step, &l, &lr, &epoch, &g);

		if (norm ? got == 5 : got >= 2) {
			loss[n] = l;
			if (norm)
				norm[n] = g;
			n++;
		}
	}
	fclose(f);
	return n;
}

/* Whether the first 64 KiB of the file at path hold text. */
static inline int ct_file_has(const char *path, const char *text)
{
	char buf[65536];
	size_t n;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return strstr(buf, text) != NULL;
}

#ifdef WEFT_CLI
/* Runs `weft fit` on DIR/NAME.yaml as run RUN on accelerator ACC with
 * EXTRA arguments, output in DIR/RUN.log (its tail on stderr when it
 * fails); returns the exit code. */
static inline int ct_fit(const char *dir, const char *name, const char *run, const char *acc,
			 const char *extra)
{
	char cmd[4096];
	int rc;

	snprintf(cmd, sizeof(cmd), "'%s' fit --config '%s/%s.yaml' --trainer.name=%s "
		 "--trainer.accelerator=%s %s > '%s/%s.log' 2>&1", WEFT_CLI, dir, name, run, acc,
		 extra, dir, run);
	rc = system(cmd);
	if (rc != 0) {
		snprintf(cmd, sizeof(cmd), "tail -n 20 '%s/%s.log' >&2", dir, run);
		if (system(cmd) != 0)
			fprintf(stderr, "%s: no log\n", run);
	}
	return rc;
}
#endif

/* The fit tests' text: 64 KiB of words drawn by a fixed generator, so that
 * what the tests measure (and their "the loss falls" checks) does not move
 * when the project's docs are edited. `corpus` receives its path. */
static inline void ct_write_corpus(const char *dir, char *corpus, size_t len)
{
	static const char *const words[] = { "the", "gradient", "of", "a", "stage", "is",
					     "averaged", "over", "ranks", "and", "stepped",
					     "on", "device", "memory", "with", "each", "shard",
					     "kernel", "loss", "scale", "\n" };
	uint32_t x = 12345u;
	size_t n = 0;
	FILE *f;

	snprintf(corpus, len, "%s/corpus.txt", dir);
	f = fopen(corpus, "w");
	WT_REQUIRE(f != NULL);
	while (n < 65536) {
		x = x * 1664525u + 1013904223u;
		n += (size_t)fprintf(f, "%s ", words[(x >> 16) % (sizeof(words) / sizeof(words[0]))]);
	}
	WT_REQUIRE(fclose(f) == 0);
}

/* Removes a test's scratch dir when every check passed; else keeps it and
 * says where. */
static inline void ct_finish_dir(const char *dir)
{
	char cmd[1024];

	if (wt_failures == 0) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	} else {
		fprintf(stderr, "runs and logs kept in %s\n", dir);
	}
}

#endif /* WEFT_CUDA_TEST_H */
