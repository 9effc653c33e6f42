/* copy and zero without a context return when the work is done, as
 * weft/device.h promises for kctx == NULL (weft_tensor_copy* and zero rely
 * on it outside any context): nothing is left pending on the device's
 * legacy default stream when they return. cudaMemset of device memory and
 * cudaMemcpy device to device (or from pageable host memory) do not wait
 * for the copy, so calling them alone breaks the promise; the shim
 * (cuda_shim.h) keeps CUDA's synchronization rules and says what is still
 * pending. The data is checked too: zero, then a device to device copy of
 * the zeros over a filled buffer, read back. */
#include <stdint.h>

#include "cuda_test.h"
#include "cuda_shim.h"

enum { BYTES = 1 << 20 };

int main(void)
{
	static unsigned char host[BYTES];
	void *a = NULL, *b = NULL;

	ct_setup("test_cuda_null_ctx_sync");
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, BYTES, &a));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, BYTES, &b));
	memset(host, 0x5a, sizeof(host));

	WT_OK(ct_gpu->copy(NULL, a, host, BYTES, WEFT_COPY_HOST_TO_DEVICE));
	WT_CHECK(!shim_pending); /* copy host to device without a context */
	WT_OK(ct_gpu->copy(NULL, b, host, BYTES, WEFT_COPY_HOST_TO_DEVICE));
	WT_OK(ct_gpu->zero(NULL, a, BYTES));
	WT_CHECK(!shim_pending); /* zero without a context */
	WT_OK(ct_gpu->copy(NULL, b, a, BYTES, WEFT_COPY_DEVICE_TO_DEVICE));
	WT_CHECK(!shim_pending); /* copy device to device without a context */
	WT_OK(ct_gpu->fill(NULL, WEFT_F32, 16, 1.0f, a));
	WT_CHECK(!shim_pending); /* fill without a context */

	memset(host, 0x5a, sizeof(host));
	WT_OK(ct_gpu->copy(NULL, host, b, BYTES, WEFT_COPY_DEVICE_TO_HOST));
	{
		size_t nonzero = 0;

		for (size_t i = 0; i < BYTES; i++)
			nonzero += host[i] != 0;
		WT_CHECK(nonzero == 0);
	}
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, a, BYTES);
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, b, BYTES);
	ct_teardown();
	return wt_done("test_cuda_null_ctx_sync");
}
