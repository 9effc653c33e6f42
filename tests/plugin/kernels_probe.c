/* For test_kernels_relocated: asks the libweft it runs with for the CUDA
 * kernels and prints where they came from:
 *   libweft FILE   the libweft.so that runs
 *   loaded FILE    the kernel library holding the table (its head's name)
 *   error MESSAGE  weft_kernels_get's error
 * Exits 0 after printing, 1 when the files cannot be told. */
#include <dlfcn.h>
#include <stdio.h>

#include "weft/device.h"
#include "weft/status.h"

int main(void)
{
	const weft_kernel_table *t = NULL;
	Dl_info info;

	if (!dladdr((void *)(uintptr_t)weft_kernels_get, &info) || !info.dli_fname)
		return 1;
	printf("libweft %s\n", info.dli_fname);
	if (weft_kernels_get((weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 }, &t) != WEFT_OK) {
		printf("error %s\n", weft_error_last());
		return 0;
	}
	if (!dladdr(t, &info) || !info.dli_fname)
		return 1;
	printf("loaded %s (%s)\n", info.dli_fname, t->head.name);
	return 0;
}
