/* The host-side check of a batch's indices (data/batch.h): token ids and
 * targets are host arrays until the trainer uploads them, so they are
 * checked here, once per batch, and the device kernels need not read them
 * back (weft/kernels.h: a CUDA embedding or cross-entropy would wait for
 * the device to report a bad index). */
#include "data/batch.h"
#include "weft/status.h"

/* The first element of `a` (I32) outside [0, limit) and not `skip`; -1 if
 * none. With allow_skip 0 every element is checked against the range. */
static int64_t first_outside(const weft_host_array *a, int64_t limit, int allow_skip,
			     int64_t skip)
{
	const int32_t *v = a->data;
	int64_t n = 1;

	for (int i = 0; i < a->ndim; i++)
		n *= a->shape[i];
	for (int64_t i = 0; i < n; i++)
		if ((v[i] < 0 || v[i] >= limit) && !(allow_skip && v[i] == skip))
			return i;
	return -1;
}

weft_status weft_batch_check_indices(const weft_host_batch *b, const weft_batch_limits *lim)
{
	int64_t at;

	if (lim->id_limit > 0 && b->x.dtype == WEFT_HOST_I32 &&
	    (at = first_outside(&b->x, lim->id_limit, 0, 0)) >= 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "batch %lld of epoch %lld: id %lld at "
				      "position %lld is outside the table's vocab [0, %lld): check "
				      "the tokenizer or the vocab_size", (long long)b->index,
				      (long long)b->epoch, (long long)((const int32_t *)b->x.data)[at],
				      (long long)at, (long long)lim->id_limit);
	if (lim->target_limit > 0 && b->y.dtype == WEFT_HOST_I32 &&
	    (at = first_outside(&b->y, lim->target_limit, 1, lim->ignore_index)) >= 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "batch %lld of epoch %lld: target %lld "
				      "at row %lld is outside [0, %lld) and is not the ignore index "
				      "%lld: check the data's labels against %s",
				      (long long)b->index, (long long)b->epoch,
				      (long long)((const int32_t *)b->y.data)[at], (long long)at,
				      (long long)lim->target_limit, (long long)lim->ignore_index,
				      lim->target_what ? lim->target_what : "the model's classes");
	return WEFT_OK;
}
