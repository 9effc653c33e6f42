/* emu_host_access - the emulator's host-access trap, as a strategy would
 * hit it: a gradient buffer allocated on the device through weft's CUDA
 * kernel table (the emulated build, found on WEFT_PLUGIN_PATH).
 *
 *   emu_host_access copy    reads it back with the table's copy (the
 *                           right way): the values arrive, exit 0
 *   emu_host_access memcpy  packs it with host memcpy, as a strategy that
 *                           forgets the buffer lives on the GPU would: the
 *                           emulator names the allocation and the process
 *                           dies of SIGSEGV (a GPU build would read
 *                           garbage or crash, depending on the driver) */
#include <stdio.h>
#include <string.h>

#include "weft/device.h"
#include "weft_test.h"

#define N 1024

int main(int argc, char **argv)
{
	const weft_kernel_table *t;
	float host[N], packed[N];
	void *kctx = NULL, *grad = NULL;
	int wrong = argc > 1 && !strcmp(argv[1], "memcpy");

	for (int i = 0; i < N; i++)
		host[i] = (float)i * 0.5f;
	WT_OK(weft_kernels_get((weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 }, &t));
	WT_OK(t->ctx_create(0, &kctx));
	WT_OK(t->mem_alloc(0, WEFT_MEM_GRADS, sizeof(host), &grad));
	WT_OK(t->copy(kctx, grad, host, sizeof(host), WEFT_COPY_HOST_TO_DEVICE));
	WT_OK(t->synchronize(kctx));
	memset(packed, 0, sizeof(packed));
	if (wrong) {
		fprintf(stderr, "emu_host_access: packing the device gradients with memcpy\n");
		memcpy(packed, grad, sizeof(packed));
		fprintf(stderr, "emu_host_access: memcpy read device memory without a fault\n");
	} else {
		WT_OK(t->copy(kctx, packed, grad, sizeof(packed), WEFT_COPY_DEVICE_TO_HOST));
	}
	WT_CHECK(!memcmp(packed, host, sizeof(host)));
	t->mem_free(0, WEFT_MEM_GRADS, grad, sizeof(host));
	t->ctx_destroy(kctx);
	/* a memcpy that did not fault is the failure this program exists for */
	return wrong ? 1 : wt_done("emu_host_access");
}
