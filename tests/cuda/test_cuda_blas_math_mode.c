/* Every context's cuBLAS handle runs in a math mode that keeps GEMMs as
 * precise as the CPU kernels assume: no TF32 for F32 products
 * (CUBLAS_TF32_TENSOR_OP_MATH unset) and, for BF16/F16 products, no
 * reduction of split-K partial sums in 16 bits
 * (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION set): with it unset
 * cuBLAS may add the partial sums of a long k in the inputs' own type,
 * losing the F32 accumulation the table promises. The shim
 * (cuda_shim.h) records the mode the library sets; the emulated cuBLAS
 * cannot show the rounding itself. */
#include "cuda_test.h"
#include "cuda_shim.h"

int main(void)
{
	void *kctx = NULL;

	ct_setup("test_cuda_blas_math_mode");
	shim_math_mode = -1;
	WT_OK(ct_gpu->ctx_create(0, &kctx));
	WT_REQUIRE(shim_math_mode != -1); /* ctx_create sets a mode */
	WT_CHECK(shim_math_mode & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
	WT_CHECK(!(shim_math_mode & CUBLAS_TF32_TENSOR_OP_MATH));
	ct_gpu->ctx_destroy(kctx);
	ct_teardown();
	return wt_done("test_cuda_blas_math_mode");
}
