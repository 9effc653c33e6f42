/* Loading weft_kernels_cuda.so: on a machine without a GPU the library
 * still loads (every symbol resolves) and refuses with a clear message; on
 * a GPU the table is complete, contexts and memory work, allocations are
 * counted, and misuse gives errors that say what to do. Runs everywhere
 * (never skipped): that the CUDA build loads is worth checking on CI. */
#include <dlfcn.h>
#include <stddef.h>

#include "cuda_test.h"
#include "cuda/kernels_cuda.h"
#include "weft/memory.h"

static int have_gpu(void)
{
	int n = 0;

	return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* The library's own symbols, whatever the machine. */
static void test_symbols(void)
{
	void *h = dlopen(ct_kernels_file(), RTLD_NOW | RTLD_LOCAL);

	if (!h)
		fprintf(stderr, "dlopen: %s\n", dlerror());
	WT_REQUIRE(h != NULL);
	WT_CHECK(dlsym(h, WEFT_KERNELS_ENTRY_SYMBOL) != NULL);
	WT_CHECK(dlsym(h, WEFT_CUDA_EXTRAS_SYMBOL) != NULL);
	dlclose(h);
}

static void test_no_gpu(void)
{
	const weft_kernel_table *t = (const weft_kernel_table *)1;
	weft_device dev = { .type = WEFT_DEVICE_CUDA, .index = 0 };

	WT_FAILS(weft_kernels_get(dev, &t), WEFT_ERR_UNSUPPORTED, "no kernels for device cuda:0",
		 "no CUDA device", "cudaGetDeviceCount", "use accelerator: cpu");
	WT_CHECK(t == NULL);
}

static void test_table(void)
{
	const weft_kernel_table *t;
	size_t first = offsetof(weft_kernel_table, ctx_create);
	size_t last = offsetof(weft_kernel_table, set_threads);

	WT_OK(weft_kernels_get((weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 }, &t));
	WT_CHECK(!strcmp(t->head.name, "cuda"));
	WT_CHECK(t->head.abi_version == WEFT_ABI_VERSION);
	WT_CHECK(t->head.struct_size == sizeof(weft_kernel_table));
	WT_CHECK(t->float_dtypes == (WEFT_DTYPE_BIT(WEFT_F32) | WEFT_DTYPE_BIT(WEFT_BF16) |
				     WEFT_DTYPE_BIT(WEFT_F16)));
	/* every member up to set_threads (optional, unused on CUDA) is set */
	for (size_t off = first; off < last; off += sizeof(void (*)(void))) {
		void (*fn)(void);

		memcpy(&fn, (const char *)t + off, sizeof(fn));
		if (!fn)
			fprintf(stderr, "member at offset %zu is NULL\n", off);
		WT_CHECK(fn != NULL);
	}
}

static void test_memory(void)
{
	const weft_kernel_table *t;
	weft_mem_stats before, during, after;
	float host[256], back[256];
	void *kctx, *p = NULL, *q = NULL, *huge = (void *)1;

	WT_OK(weft_kernels_get((weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 }, &t));
	WT_OK(t->ctx_create(0, &kctx));
	weft_mem_get_stats(&before);
	WT_OK(t->mem_alloc(0, WEFT_MEM_GRADS, sizeof(host), &p));
	WT_OK(t->mem_alloc(0, WEFT_MEM_GRADS, 0, &q)); /* zero bytes: valid, freeable */
	WT_CHECK(p != NULL && q != NULL && ((uintptr_t)p & 63) == 0);
	weft_mem_get_stats(&during);
	WT_CHECK(during.current[WEFT_MEM_GRADS] - before.current[WEFT_MEM_GRADS] ==
		 (int64_t)sizeof(host));

	/* round trip through both kinds of copy, with and without a context */
	for (int i = 0; i < 256; i++)
		host[i] = (float)i * 0.5f - 3.0f;
	WT_OK(t->copy(kctx, p, host, sizeof(host), WEFT_COPY_HOST_TO_DEVICE));
	WT_OK(t->copy(kctx, back, p, sizeof(back), WEFT_COPY_DEVICE_TO_HOST));
	WT_CHECK(!memcmp(host, back, sizeof(host)));
	WT_OK(t->zero(kctx, p, 16 * sizeof(float)));
	WT_OK(t->copy(NULL, back, p, sizeof(back), WEFT_COPY_DEVICE_TO_HOST));
	WT_CHECK(back[0] == 0.0f && back[15] == 0.0f && back[16] == host[16]);
	WT_OK(t->synchronize(kctx));

	t->mem_free(0, WEFT_MEM_GRADS, p, sizeof(host));
	t->mem_free(0, WEFT_MEM_GRADS, q, 0);
	t->mem_free(0, WEFT_MEM_GRADS, NULL, 0);
	weft_mem_get_stats(&after);
	WT_CHECK(after.current[WEFT_MEM_GRADS] == before.current[WEFT_MEM_GRADS]);

	/* out of memory is an error naming the size and category, not a crash */
	WT_FAILS(t->mem_alloc(0, WEFT_MEM_PARAMS, (size_t)1 << 50, &huge), WEFT_ERR_NOMEM,
		 "cuda:0: cannot allocate 1125899906842624 bytes for params",
		 "use a smaller batch or model");
	WT_CHECK(huge == NULL);
	weft_mem_get_stats(&after);
	WT_CHECK(after.current[WEFT_MEM_PARAMS] == before.current[WEFT_MEM_PARAMS]);

	/* fill and zero without a context run on the default stream and wait */
	WT_OK(t->mem_alloc(0, WEFT_MEM_GRADS, sizeof(host), &p));
	WT_OK(t->fill(NULL, WEFT_F32, 256, 1.5f, p));
	WT_OK(t->copy(NULL, back, p, sizeof(back), WEFT_COPY_DEVICE_TO_HOST));
	WT_CHECK(back[0] == 1.5f && back[255] == 1.5f);
	WT_OK(t->zero(NULL, p, sizeof(host)));
	WT_OK(t->copy(NULL, back, p, sizeof(back), WEFT_COPY_DEVICE_TO_HOST));
	WT_CHECK(back[0] == 0.0f && back[255] == 0.0f);
	/* fill of host memory without a context is refused */
	WT_FAILS(t->fill(NULL, WEFT_F32, 4, 1.0f, back), WEFT_ERR_INVALID_ARG, "is not device memory");
	t->mem_free(0, WEFT_MEM_GRADS, p, sizeof(host));
	/* other compute members need the context */
	WT_FAILS(t->gelu_forward(NULL, WEFT_F32, 4, back, back), WEFT_ERR_INVALID_ARG,
		 "cuda kernel gelu_forward was called without a context", "ctx_create");
	/* a GEMM beyond cuBLAS's 32-bit sizes is refused before touching memory */
	WT_FAILS(t->gemm(kctx, WEFT_F32, 0, 0, (int64_t)1 << 31, 4, 4, 1.0f, NULL, 4, 0, NULL, 4, 0,
			 0.0f, NULL, 4, 0, 1),
		 WEFT_ERR_UNSUPPORTED, "gemm", "2147483648 x 4 x 4", "exceeds cuBLAS's 32-bit sizes",
		 "split the operation");
	t->ctx_destroy(kctx);
	t->ctx_destroy(NULL);
}

int main(void)
{
	test_symbols();
	if (!have_gpu()) {
		test_no_gpu();
		return wt_done("test_cuda_load (no GPU: load and refusal checked)");
	}
	test_table();
	test_memory();
	return wt_done("test_cuda_load");
}
