/* The plan of a staged NCCL call (nccl_stage.h): pure arithmetic on
 * pointers and sizes, shared by the plugin and its CPU test. */
#include "nccl_stage.h"

static size_t align_up(size_t n)
{
	return (n + NCCL_STAGE_ALIGN - 1) / NCCL_STAGE_ALIGN * NCCL_STAGE_ALIGN;
}

/* Whether two byte ranges share a byte, or are the same empty range. */
static int overlap(const nccl_stage_side *a, const nccl_stage_side *b)
{
	uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;

	if (a0 == b0)
		return 1;
	return a0 < b0 + b->bytes && b0 < a0 + a->bytes;
}

void nccl_stage_plan_make(const nccl_stage_side *send, const nccl_stage_side *recv,
			  nccl_stage_plan *plan)
{
	int sh = send->used && send->host, rh = recv->used && recv->host;

	*plan = (nccl_stage_plan){ 0 };
	if (!sh && !rh)
		return;
	plan->staged = 1;
	if (sh && rh && overlap(send, recv)) {
		/* one region over both ranges, offsets kept */
		uintptr_t s0 = (uintptr_t)send->data, r0 = (uintptr_t)recv->data;
		uintptr_t base = s0 < r0 ? s0 : r0;
		uintptr_t end = s0 + send->bytes > r0 + recv->bytes ? s0 + send->bytes :
								       r0 + recv->bytes;

		plan->send_mapped = plan->recv_mapped = 1;
		plan->send_off = (size_t)(s0 - base);
		plan->recv_off = (size_t)(r0 - base);
		plan->bytes = (size_t)(end - base);
	} else {
		size_t at = 0;

		if (sh) {
			plan->send_mapped = 1;
			plan->send_off = 0;
			at = align_up(send->bytes);
		}
		if (rh) {
			plan->recv_mapped = 1;
			plan->recv_off = at;
			at += recv->bytes;
		}
		plan->bytes = at;
	}
	if (sh && send->copy) {
		plan->in_off = plan->send_off;
		plan->in_bytes = send->bytes;
	}
	if (rh && recv->copy) {
		plan->out_off = plan->recv_off;
		plan->out_bytes = recv->bytes;
	}
}

size_t nccl_stage_capacity(size_t need, size_t min_bytes)
{
	size_t cap = min_bytes ? min_bytes : 1;

	while (cap < need && cap <= SIZE_MAX / 2)
		cap *= 2;
	return cap < need ? need : cap;
}
