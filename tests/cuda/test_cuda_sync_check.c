/* WEFT_CUDA_SYNC_CHECK=1 names the kernel that faulted. CUDA reports a
 * running kernel's fault (an illegal address, say) at a later call, so
 * without the check the error surfaces in whatever op comes next and its
 * message names that op. The shim (cuda_shim.h) injects such a fault into
 * the next kernel and reports it as CUDA would (at the first synchronizing
 * call, or at the next launch's error check).
 *
 * - With WEFT_CUDA_SYNC_CHECK=1 when the context is made: `scale`, whose
 *   kernel faults, fails itself, naming "kernel scale" and saying it
 *   failed while running.
 * - Without it: `scale` returns, the next op (`add`) reports the fault,
 *   and its message says an earlier kernel may have caused it and to rerun
 *   with WEFT_CUDA_SYNC_CHECK=1.
 * - With it and no fault, ops compute as usual (scale by 2, exactly).
 * - Any other value is refused at ctx_create, saying what to set. */
#include <stdint.h>
#include <stdlib.h>

#include "cuda_test.h"
#include "cuda_shim.h"

enum { N = 1000 };

int main(void)
{
	static float h[N], out[N];
	void *on = NULL, *off = NULL, *bad = NULL, *x = NULL, *y = NULL;

	ct_setup("test_cuda_sync_check");
	setenv("WEFT_CUDA_SYNC_CHECK", "1", 1);
	WT_OK(ct_gpu->ctx_create(0, &on));
	unsetenv("WEFT_CUDA_SYNC_CHECK");
	WT_OK(ct_gpu->ctx_create(0, &off));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, N * sizeof(float), &x));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, N * sizeof(float), &y));
	for (int i = 0; i < N; i++)
		h[i] = (float)i - 500.0f;
	WT_OK(ct_gpu->copy(on, x, h, sizeof(h), WEFT_COPY_HOST_TO_DEVICE));

	/* no fault: the checked context computes as usual */
	WT_OK(ct_gpu->scale(on, WEFT_F32, N, 2.0f, x, y));
	WT_OK(ct_gpu->copy(on, out, y, sizeof(out), WEFT_COPY_DEVICE_TO_HOST));
	for (int i = 0; i < N; i++)
		WT_REQUIRE(out[i] == 2.0f * h[i]);

	/* checked: the faulting kernel's own call fails and names it */
	shim_inject_fault(cudaErrorIllegalAddress);
	WT_FAILS(ct_gpu->scale(on, WEFT_F32, N, 2.0f, x, y), WEFT_ERR_INTERNAL, "kernel scale",
		 "while running", "WEFT_CUDA_SYNC_CHECK=1");
	shim_clear_fault();

	/* unchecked: the next op sees it, and the message says how to find it */
	shim_inject_fault(cudaErrorIllegalAddress);
	WT_OK(ct_gpu->scale(off, WEFT_F32, N, 2.0f, x, y));
	WT_FAILS(ct_gpu->add(off, WEFT_F32, N, x, N, y, y), WEFT_ERR_INTERNAL, "kernel add",
		 "an earlier kernel may have caused it", "rerun with WEFT_CUDA_SYNC_CHECK=1");
	shim_clear_fault();

	/* a value other than 0 or 1 */
	setenv("WEFT_CUDA_SYNC_CHECK", "yes", 1);
	WT_FAILS(ct_gpu->ctx_create(0, &bad), WEFT_ERR_INVALID_ARG,
		 "WEFT_CUDA_SYNC_CHECK is 'yes'", "set it to 1");
	WT_CHECK(bad == NULL);
	unsetenv("WEFT_CUDA_SYNC_CHECK");

	ct_gpu->mem_free(0, WEFT_MEM_OTHER, x, N * sizeof(float));
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, y, N * sizeof(float));
	ct_gpu->ctx_destroy(on);
	ct_gpu->ctx_destroy(off);
	ct_teardown();
	return wt_done("test_cuda_sync_check");
}
