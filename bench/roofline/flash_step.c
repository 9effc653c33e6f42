/* bench_flash_step - the flash attention of a GPT step alone, for the
 * roofline estimate of its kernels (bench/roofline/run_flash): on the CUDA
 * kernel table, L layers of flash_attention_forward, then L of
 * flash_attention_backward, between the counts marks "step begin" and
 * "step end" (emu_count_mark of the CUDA emulator, looked up with dlsym;
 * on a GPU, or without EMU_COUNTS, the marks are skipped).
 *
 *   bench_flash_step B T [--layers L] [--heads H] [--kv-heads K]
 *                    [--head-dim D] [--dtype bf16|f16|f32]
 *
 * Defaults: GPT-2 124M's attention, 12 layers of 12 heads of 64, bf16.
 * Inputs are zeros: the counts (bytes touched, tile products issued) do
 * not depend on the values. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/kernels.h"
#include "weft/status.h"

static void (*mark)(const char *label);

static int check(weft_status st, const char *what)
{
	if (st == WEFT_OK)
		return 0;
	fprintf(stderr, "bench_flash_step: %s failed (status %d): %s\n", what, (int)st,
		weft_error_last());
	return 1;
}

int main(int argc, char **argv)
{
	long long B, T, L = 12, H = 12, K = 0, D = 64;
	weft_dtype dt = WEFT_BF16;
	const weft_kernel_table *k;
	void *kctx = NULL, *qkv = NULL, *out = NULL, *dout = NULL, *dqkv = NULL, *lse = NULL;
	size_t esz, nq, no, nl;
	int rc = 1;

	if (argc < 3 || (B = atoll(argv[1])) <= 0 || (T = atoll(argv[2])) <= 0) {
		fprintf(stderr, "usage: bench_flash_step B T [--layers L] [--heads H] [--kv-heads K] "
			"[--head-dim D] [--dtype bf16|f16|f32]\n");
		return 2;
	}
	for (int i = 3; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--layers"))
			L = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "--heads"))
			H = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "--kv-heads"))
			K = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "--head-dim"))
			D = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "--dtype"))
			dt = !strcmp(argv[i + 1], "f32") ? WEFT_F32 :
			     !strcmp(argv[i + 1], "f16") ? WEFT_F16 : WEFT_BF16;
		else {
			fprintf(stderr, "bench_flash_step: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (!K)
		K = H;
	if (L <= 0 || H <= 0 || K <= 0 || D <= 0 || H % K) {
		fprintf(stderr, "bench_flash_step: --layers, --heads, --kv-heads and --head-dim must "
			"be positive, and the kv heads must divide the heads\n");
		return 2;
	}
	*(void **)&mark = dlsym(RTLD_DEFAULT, "emu_count_mark");
	esz = dt == WEFT_F32 ? 4 : 2;
	nq = (size_t)(B * T * (H + 2 * K) * D);
	no = (size_t)(B * T * H * D);
	nl = (size_t)(B * H * T);
	if (check(weft_kernels_get((weft_device){ .type = WEFT_DEVICE_CUDA, .index = 0 }, &k),
		  "loading the CUDA kernels") ||
	    check(k->ctx_create(0, &kctx), "ctx_create"))
		return 1;
	if (!k->flash_attention_forward || !k->flash_attention_backward) {
		fprintf(stderr, "bench_flash_step: this CUDA kernel table has no flash attention\n");
		goto out_ctx;
	}
	if (check(k->mem_alloc(0, WEFT_MEM_OTHER, nq * esz, &qkv), "mem_alloc") ||
	    check(k->mem_alloc(0, WEFT_MEM_OTHER, nq * esz, &dqkv), "mem_alloc") ||
	    check(k->mem_alloc(0, WEFT_MEM_OTHER, no * esz, &out), "mem_alloc") ||
	    check(k->mem_alloc(0, WEFT_MEM_OTHER, no * esz, &dout), "mem_alloc") ||
	    check(k->mem_alloc(0, WEFT_MEM_OTHER, nl * 4, &lse), "mem_alloc") ||
	    check(k->zero(kctx, qkv, nq * esz), "zero") || check(k->zero(kctx, dout, no * esz), "zero") ||
	    check(k->zero(kctx, dqkv, nq * esz), "zero") || check(k->synchronize(kctx), "synchronize"))
		goto out_free;
	if (mark)
		mark("step begin");
	for (long long l = 0; l < L; l++)
		if (check(k->flash_attention_forward(kctx, dt, B, T, H, K, D, qkv, out, lse),
			  "flash_attention_forward"))
			goto out_free;
	for (long long l = 0; l < L; l++)
		if (check(k->flash_attention_backward(kctx, dt, B, T, H, K, D, qkv, out, lse, dout,
						      dqkv), "flash_attention_backward"))
			goto out_free;
	if (check(k->synchronize(kctx), "synchronize"))
		goto out_free;
	if (mark)
		mark("step end");
	printf("bench_flash_step: B %lld T %lld, %lld layers of %lld heads (%lld kv) of %lld\n", B, T,
	       L, H, K, D);
	rc = 0;
out_free:
	if (lse)
		k->mem_free(0, WEFT_MEM_OTHER, lse, nl * 4);
	if (dout)
		k->mem_free(0, WEFT_MEM_OTHER, dout, no * esz);
	if (out)
		k->mem_free(0, WEFT_MEM_OTHER, out, no * esz);
	if (dqkv)
		k->mem_free(0, WEFT_MEM_OTHER, dqkv, nq * esz);
	if (qkv)
		k->mem_free(0, WEFT_MEM_OTHER, qkv, nq * esz);
out_ctx:
	if (k->ctx_destroy)
		k->ctx_destroy(kctx);
	return rc;
}
