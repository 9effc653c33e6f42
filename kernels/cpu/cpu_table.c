/* The CPU kernel table: host memory through the accounted allocator,
 * OpenBLAS threads, and the compute kernels of the cpu_*.c files. */
#include <cblas.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"
#include "kernels_cpu.h"

static atomic_llong cpu_threads;

static weft_status cpu_mem_alloc(int32_t index, weft_mem_category cat, size_t bytes, void **out)
{
	(void)index;
	*out = weft_mem_alloc(cat, bytes);
	return *out ? WEFT_OK : WEFT_ERR_NOMEM; /* weft_mem_alloc set the message */
}

static void cpu_mem_free(int32_t index, weft_mem_category cat, void *ptr, size_t bytes)
{
	(void)index;
	(void)cat;
	(void)bytes;
	weft_mem_free(ptr);
}

/* Copies and fills of host memory split over the CPU threads from
 * CPY_GRAIN bytes a thread (a gradient zeroed at the start of a step, a
 * gradient passed on in backward, a bias broadcast over a batch's rows):
 * one core alone does not reach the memory bandwidth of two. */
#define CPY_GRAIN ((int64_t)CPU_GRAIN * 8)

typedef struct bytes_args {
	char *dst;
	const char *src;
	size_t row, stride; /* rows_range: bytes a row, and between rows of dst */
} bytes_args;

static void copy_range(void *p, int64_t b0, int64_t b1)
{
	const bytes_args *a = p;

	memcpy(a->dst + b0, a->src + b0, (size_t)(b1 - b0));
}

static void zero_range(void *p, int64_t b0, int64_t b1)
{
	const bytes_args *a = p;

	memset(a->dst + b0, 0, (size_t)(b1 - b0));
}

static void rows_range(void *p, int64_t r0, int64_t r1)
{
	const bytes_args *a = p;

	for (int64_t r = r0; r < r1; r++)
		memcpy(a->dst + (size_t)r * a->stride, a->src, a->row);
}

static weft_status cpu_copy(void *kctx, void *dst, const void *src, size_t bytes,
			    weft_copy_kind kind)
{
	bytes_args a = { .dst = dst, .src = src };
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;

	(void)kctx;
	(void)kind;
	if (!bytes)
		return WEFT_OK;
	if (bytes > INT64_MAX || (int64_t)bytes < 2 * CPY_GRAIN || (d < s + bytes && s < d + bytes))
		memmove(dst, src, bytes); /* small, or overlapping: one pass in order */
	else
		cpu_parallel_for((int64_t)bytes, CPY_GRAIN, copy_range, &a);
	return WEFT_OK;
}

static weft_status cpu_zero(void *kctx, void *dst, size_t bytes)
{
	bytes_args a = { .dst = dst };

	(void)kctx;
	if (bytes && bytes <= INT64_MAX) /* no object is larger */
		cpu_parallel_for((int64_t)bytes, CPY_GRAIN, zero_range, &a);
	return WEFT_OK;
}

void cpu_broadcast_rows_ld(int64_t rows, size_t row_bytes, const void *src, void *dst,
			   size_t stride)
{
	bytes_args a = { .dst = dst, .src = src, .row = row_bytes, .stride = stride };

	if (rows > 0 && row_bytes)
		cpu_parallel_for(rows, CPY_GRAIN / (int64_t)(row_bytes + 1) + 1, rows_range, &a);
}

weft_status cpu_broadcast_rows(void *kctx, int64_t rows, size_t row_bytes,
				      const void *src, void *dst)
{
	(void)kctx;
	cpu_broadcast_rows_ld(rows, row_bytes, src, dst, row_bytes);
	return WEFT_OK;
}

static weft_status cpu_synchronize(void *kctx)
{
	(void)kctx;
	return WEFT_OK;
}

/* How long OpenBLAS's idle worker threads spin before they sleep.
 *
 * OpenBLAS reads OPENBLAS_THREAD_TIMEOUT (log2 of a cycle count) in its
 * constructor and gives its workers that spin once, when it starts them.
 * Its default, 2^28 cycles, is about 0.1 s (measured: 103 ms of CPU in a
 * 300 ms sleep after one 2-thread product): a worker spins through all the
 * non-GEMM work between two products, on the core that weft's own kernel
 * threads need. 2^16 cycles (tens of microseconds) still covers the gap
 * between products issued back to back; at gpt-small-cpu on 2 threads a
 * training step is ~8 % faster with it (bench/gpt/RESULTS.md).
 *
 * So when the user has not set the variable, this constructor (it runs
 * after OpenBLAS's, before main, while the process has one thread) sets
 * it for a moment, has OpenBLAS read its environment again and stops its
 * workers; OpenBLAS starts them again, with the new spin, at the next
 * product that uses threads. openblas_read_env and blas_thread_shutdown_
 * are exported by OpenBLAS but are not its documented API, hence weak:
 * without them the default stays (tests/tensor/test_blas_spin.c fails,
 * which says so). */
extern void openblas_read_env(void) __attribute__((weak));
extern int blas_thread_shutdown_(void) __attribute__((weak));
extern int openblas_thread_timeout(void) __attribute__((weak));

__attribute__((constructor)) static void cpu_blas_spin_init(void)
{
	if (getenv("OPENBLAS_THREAD_TIMEOUT") || !openblas_read_env || !blas_thread_shutdown_)
		return;
	if (setenv("OPENBLAS_THREAD_TIMEOUT", WEFT_BLAS_THREAD_TIMEOUT, 0))
		return;
	openblas_read_env();
	unsetenv("OPENBLAS_THREAD_TIMEOUT");
	blas_thread_shutdown_();
}

int weft_kernels_cpu_blas_spin(void)
{
	return openblas_thread_timeout ? openblas_thread_timeout() : -1;
}

void weft_kernels_cpu_set_threads(int64_t n)
{
	if (n < 1)
		n = 1;
	if (n > 4096)
		n = 4096;
	openblas_set_num_threads((int)n);
	atomic_store(&cpu_threads, (long long)n);
}

int64_t weft_kernels_cpu_get_threads(void)
{
	long long n = atomic_load(&cpu_threads);

	return n > 0 ? (int64_t)n : (int64_t)openblas_get_num_threads();
}

static const weft_kernel_table cpu_table = {
	.head = WEFT_PLUGIN_HEAD(weft_kernel_table, "cpu"),
	.float_dtypes = WEFT_DTYPE_BIT(WEFT_F32),
	.mem_alloc = cpu_mem_alloc,
	.mem_free = cpu_mem_free,
	.copy = cpu_copy,
	.zero = cpu_zero,
	.synchronize = cpu_synchronize,
	.gemm = cpu_gemm,
	.sum_rows = cpu_sum_rows,
	.add = cpu_add,
	.mul = cpu_mul,
	.mul_backward = cpu_mul_backward,
	.scale = cpu_scale,
	.axpy = cpu_axpy,
	.fill = cpu_fill,
	.convert = cpu_convert,
	.relu_forward = cpu_relu_forward,
	.relu_backward = cpu_relu_backward,
	.gelu_forward = cpu_gelu_forward,
	.gelu_backward = cpu_gelu_backward,
	.softmax_forward = cpu_softmax_forward,
	.softmax_backward = cpu_softmax_backward,
	.layernorm_forward = cpu_layernorm_forward,
	.layernorm_backward = cpu_layernorm_backward,
	.embedding_forward = cpu_embedding_forward,
	.embedding_backward = cpu_embedding_backward,
	.attention_forward = cpu_attention_forward,
	.attention_backward = cpu_attention_backward,
	.attention_scratch = cpu_attention_scratch,
	.dropout_forward = cpu_dropout_forward,
	.dropout_backward = cpu_dropout_backward,
	.cross_entropy_forward = cpu_cross_entropy_forward,
	.cross_entropy_backward = cpu_cross_entropy_backward,
	.accuracy = cpu_accuracy,
	.set_threads = weft_kernels_cpu_set_threads,
	.gemm_lowp = cpu_gemm_lowp,
	.gemm_lowp_scratch = cpu_gemm_lowp_scratch,
	.gelu_backward_write = cpu_gelu_backward_write,
	.attention_backward_write = cpu_attention_backward_write,
	.broadcast_rows = cpu_broadcast_rows,
	.gemm_bias = cpu_gemm_bias,
	.gemm_tn_sum = cpu_gemm_tn_sum,
};

const weft_kernel_table *weft_kernels_cpu_table(void)
{
	return &cpu_table;
}
