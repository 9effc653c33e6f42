/* copy, zero and fill without a context keep kernels.h's contract for
 * kctx == NULL (since ABI 1.6; weft_tensor_copy* and zero use them outside
 * any context): ordered on the device's legacy default stream, the host
 * waiting only where it must. A copy to the host returns with the data; a
 * copy from pinned host memory returns once the source was read (nothing
 * left pending); a copy from pageable memory, within the device, and a
 * zero return once queued (pending on the legacy stream, as CUDA's rules
 * say: cuda_shim.h keeps them), so a training step uploads its batch and
 * zeroes its gradients without waiting for the device. The data is
 * checked too: zero, then a device to device copy of the zeros over a
 * filled buffer, read back in order on the host. */
#include <stdint.h>

#include "cuda_test.h"
#include "cuda_shim.h"

enum { BYTES = 1 << 20 };

int main(void)
{
	static unsigned char host[BYTES];
	void *a = NULL, *b = NULL;
	unsigned char *pinned = NULL;

	ct_setup("test_cuda_null_ctx_sync");
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, BYTES, &a));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, BYTES, &b));
	memset(host, 0x5a, sizeof(host));

	WT_REQUIRE(cudaMallocHost((void **)&pinned, 4096) == cudaSuccess);
	memset(pinned, 0x5a, 4096);
	WT_OK(ct_gpu->copy(NULL, a, pinned, 4096, WEFT_COPY_HOST_TO_DEVICE));
	WT_CHECK(!shim_pending); /* from pinned memory: waited for (read when it runs) */
	WT_OK(ct_gpu->copy(NULL, a, host, BYTES, WEFT_COPY_HOST_TO_DEVICE));
	WT_CHECK(shim_pending); /* from pageable memory: staged, not waited for */
	WT_OK(ct_gpu->copy(NULL, b, host, BYTES, WEFT_COPY_HOST_TO_DEVICE));
	WT_OK(ct_gpu->zero(NULL, a, BYTES));
	WT_CHECK(shim_pending); /* zero: queued */
	WT_OK(ct_gpu->copy(NULL, b, a, BYTES, WEFT_COPY_DEVICE_TO_DEVICE));
	WT_CHECK(shim_pending); /* device to device: queued */
	WT_OK(ct_gpu->fill(NULL, WEFT_F32, 16, 1.0f, a));
	WT_CHECK(!shim_pending); /* fill still waits (kernels.h allows either) */

	memset(host, 0x5a, sizeof(host));
	WT_OK(ct_gpu->copy(NULL, host, b, BYTES, WEFT_COPY_DEVICE_TO_HOST));
	{
		size_t nonzero = 0;

		for (size_t i = 0; i < BYTES; i++)
			nonzero += host[i] != 0;
		WT_CHECK(nonzero == 0);
	}
	cudaFreeHost(pinned);
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, a, BYTES);
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, b, BYTES);
	ct_teardown();
	return wt_done("test_cuda_null_ctx_sync");
}
