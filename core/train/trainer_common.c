/* The helpers every trainer file uses (trainer_common.h): the clock, the
 * collectives the trainer itself needs, and which strategies run in one
 * process. */
#include <string.h>

#include "train/trainer_impl.h"
#include "weft/step.h"

double weft_trainer_now(void)
{
	return (double)weft_clock_ns() * 1e-9;
}

/* ---- collectives the trainer itself needs ------------------------------ */

weft_status weft_trainer_broadcast_bytes(weft_trainer *t, void *buf, size_t len)
{
	weft_comm_buf b = { .data = buf, .count = (int64_t)len, .dtype = WEFT_COMM_I32 };

	if (!t->pg)
		return WEFT_OK;
	/* Bytes travel as i32 words: pad the length up. */
	if (len % 4)
		return weft_error_set(WEFT_ERR_INTERNAL, "broadcast of %zu bytes is not whole words",
				      len);
	b.count = (int64_t)(len / 4);
	return weft_pg_broadcast(t->pg, &b, 0, NULL);
}

weft_status weft_trainer_all_gather_i64(weft_trainer *t, const int64_t *mine, size_t n,
					int64_t *all)
{
	weft_comm_buf send = { .data = (void *)mine, .count = (int64_t)n, .dtype = WEFT_COMM_I64 };
	weft_comm_buf recv = { .data = all, .count = (int64_t)n * t->world,
			       .dtype = WEFT_COMM_I64 };

	if (!t->pg) {
		memcpy(all, mine, n * sizeof(*mine));
		return WEFT_OK;
	}
	return weft_pg_all_gather(t->pg, &send, &recv, NULL);
}

weft_status weft_trainer_barrier(weft_trainer *t)
{
	return t->pg ? weft_pg_barrier(t->pg, NULL) : WEFT_OK;
}

/* strategy dp: one process drives trainer.devices devices itself */
int weft_trainer_one_process_strategy(const weft_trainer *t)
{
	return strcmp(t->tc.strategy_name, "dp") == 0;
}
