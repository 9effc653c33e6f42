/* The kernel library frees no device memory while a context lives, unless
 * asked to (mem_free): cudaFree waits for the whole device, and a rank
 * whose collective is stuck behind a lost peer would hang in it instead of
 * reaching the comm's timeout. The per-context row scratch grows with the
 * largest call (cross-entropy rows, sum_squares, the embedding gradient's
 * sort keys); the blocks it outgrows are kept until ctx_destroy. The shim
 * (cuda_shim.h) counts cudaFree calls.
 *
 * Checked: calls that grow the scratch several times over (cross-entropy
 * with 8, 300 and 5000 rows; embedding backward with 20000 positions) make
 * no cudaFree, and still compute the right loss (the mean of log(vocab)
 * for uniform logits, 1e-5 relative: F32 logf and a mean of equal terms);
 * ctx_destroy frees the retired blocks with the live one (at least 3
 * cudaFree calls, the check slot's included). */
#include <math.h>
#include <stdint.h>

#include "cuda_test.h"
#include "cuda_shim.h"

enum { VOCAB = 8, MAX_ROWS = 5000, EMB_N = 20000 };

static void cross_entropy(void *kctx, int64_t rows, void *logits, void *targets, void *probs,
			  float *loss_d)
{
	float loss[2] = { 0 };

	WT_OK(ct_gpu->cross_entropy_forward(kctx, WEFT_F32, rows, VOCAB, logits, WEFT_I32,
					     targets, -100, probs, loss_d, loss_d + 1));
	WT_OK(ct_gpu->copy(kctx, loss, loss_d, sizeof(loss), WEFT_COPY_DEVICE_TO_HOST));
	WT_CLOSE(loss[0], logf((float)VOCAB), 1e-5, 0.0);
	WT_CHECK(loss[1] == (float)rows);
}

int main(void)
{
	static int32_t ids[EMB_N];
	static const int64_t rows[] = { 8, 300, MAX_ROWS };
	size_t lbytes = (size_t)MAX_ROWS * VOCAB * 4, ebytes = (size_t)EMB_N * 4 * 4;
	void *kctx = NULL, *logits, *targets, *probs, *loss_d, *idd, *dy, *tab;
	long frees;

	ct_setup("test_cuda_scratch_kept");
	WT_OK(ct_gpu->ctx_create(0, &kctx));
	for (int i = 0; i < EMB_N; i++)
		ids[i] = i % 7;
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, lbytes, &logits));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, lbytes, &probs));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, (size_t)MAX_ROWS * 4, &targets));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, 8, &loss_d));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, sizeof(ids), &idd));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, ebytes, &dy));
	WT_OK(ct_gpu->mem_alloc(0, WEFT_MEM_OTHER, 7 * 4 * 4, &tab));
	WT_OK(ct_gpu->zero(kctx, logits, lbytes));
	WT_OK(ct_gpu->zero(kctx, targets, (size_t)MAX_ROWS * 4));
	WT_OK(ct_gpu->zero(kctx, dy, ebytes));
	WT_OK(ct_gpu->zero(kctx, tab, 7 * 4 * 4));
	WT_OK(ct_gpu->copy(kctx, idd, ids, sizeof(ids), WEFT_COPY_HOST_TO_DEVICE));

	frees = shim_frees;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		cross_entropy(kctx, rows[i], logits, targets, probs, loss_d);
	WT_OK(ct_gpu->embedding_backward(kctx, WEFT_F32, EMB_N, 4, WEFT_I32, idd, dy, tab));
	WT_OK(ct_gpu->synchronize(kctx));
	WT_CHECK(shim_frees == frees); /* no cudaFree while the context lives */

	ct_gpu->ctx_destroy(kctx);
	WT_CHECK(shim_frees >= frees + 3); /* the live and retired blocks, at destroy */
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, logits, lbytes);
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, probs, lbytes);
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, targets, (size_t)MAX_ROWS * 4);
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, loss_d, 8);
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, idd, sizeof(ids));
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, dy, ebytes);
	ct_gpu->mem_free(0, WEFT_MEM_OTHER, tab, 7 * 4 * 4);
	ct_teardown();
	return wt_done("test_cuda_scratch_kept");
}
