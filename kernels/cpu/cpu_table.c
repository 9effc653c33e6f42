/* The CPU kernel table: host memory through the accounted allocator,
 * OpenBLAS's idle spin, and the compute kernels of the cpu_*.c files (the
 * table refers to them; none of them calls back here). */
#include <cblas.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"
#include "weft/gemm_ex.h"
#include "kernels_cpu.h"

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
	.copy_ranges = cpu_copy_ranges,
	.sum_squares_ranges = cpu_sum_squares_ranges,
	.optim_step = cpu_optim_step,
	.vocab_ce_stats = cpu_vocab_ce_stats,
	.vocab_ce_backward = cpu_vocab_ce_backward,
	.rmsnorm_forward = cpu_rmsnorm_forward,
	.rmsnorm_backward = cpu_rmsnorm_backward,
	.rope_forward = cpu_rope_forward,
	.rope_backward = cpu_rope_backward,
	.swiglu_forward = cpu_swiglu_forward,
	.swiglu_backward = cpu_swiglu_backward,
	.attention_gqa_forward = cpu_attention_gqa_forward,
	.attention_gqa_backward = cpu_attention_gqa_backward,
	.attention_gqa_scratch = cpu_attention_gqa_scratch,
	.gelu_erf_forward = cpu_gelu_erf_forward,
	.gelu_erf_backward = cpu_gelu_erf_backward,
	/* 0: the references below are there to test 16-bit activations
	 * (trainer.lowp_activations: true); by default the CPU's stay F32 */
	.lowp_act_dtypes = 0,
	.gemm_lowp_ex = cpu_gemm_lowp_ex,
	.sum_rows_lowp = cpu_sum_rows_lowp,
	.layernorm_lowp_forward = cpu_layernorm_lowp_forward,
	.layernorm_lowp_backward = cpu_layernorm_lowp_backward,
	.cross_entropy_lowp_forward = cpu_cross_entropy_lowp_forward,
	.cross_entropy_lowp_backward = cpu_cross_entropy_lowp_backward,
	/* since ABI 1.7 */
	.gemm_lowp_ex_epilogues = WEFT_GEMM_EX_EPILOGUES_1_6 | 1u << WEFT_EPI_BGRAD,
	.cross_entropy_lowp_fused = cpu_cross_entropy_lowp_fused,
	.cross_entropy_lowp_regrad = cpu_cross_entropy_lowp_regrad,
};

const weft_kernel_table *weft_kernels_cpu_table(void)
{
	return &cpu_table;
}
