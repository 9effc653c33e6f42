/* train/trainer_common.h - what every file of the trainer uses: the sizes
 * of its paths and tables, the callback hook offsets, the clock and the
 * two collectives over the world group. It sits below trainer.c,
 * trainer_setup.c, trainer_env.c, loop.c and checkpoint.c and calls none of
 * them. The state itself is in trainer_impl.h. */
#ifndef WEFT_TRAIN_TRAINER_COMMON_H
#define WEFT_TRAIN_TRAINER_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "weft/status.h"
#include "weft/trainer.h"

#define WEFT_TRAINER_PATH 1024
#define WEFT_TRAINER_MAX_MICRO 256
/* micro-batch losses kept on the device between two reads (loss_defer.c) */
#define WEFT_TRAINER_LOSS_RING 1024
#define WEFT_TOPK_MAX 64
#define WEFT_MAX_CALLBACKS 16

/* The `hook` argument of weft_trainer_callbacks_call for the
 * weft_callback_ops member named `member`. */
#define WEFT_CALLBACK_HOOK(member) offsetof(weft_callback_ops, member)

typedef struct weft_trainer weft_trainer;

/* Seconds on the monotonic clock (CLOCK_MONOTONIC); differences only. */
double weft_trainer_now(void);

/* Rank 0's `len` bytes into `buf` on every rank (collective over the world
 * group; a no-op with one process). len must be a multiple of 4: the bytes
 * travel as i32 words; otherwise WEFT_ERR_INTERNAL. */
weft_status weft_trainer_broadcast_bytes(weft_trainer *t, void *buf, size_t len);

/* Every rank's `n` int64 values into all[rank * n + i] on every rank
 * (collective over the world group; with one process, a copy of `mine`).
 * Errors: WEFT_ERR_NOMEM; the comm backend's. */
weft_status weft_trainer_all_gather_i64(weft_trainer *t, const int64_t *mine, size_t n,
					int64_t *all);

/* Waits for every rank (collective over the world group; a no-op with one
 * process). Errors: the comm backend's (timeout, a failed peer). */
weft_status weft_trainer_barrier(weft_trainer *t);

/* Whether the strategy drives trainer.devices devices from this one
 * process (strategy dp), rather than one rank per device. */
int weft_trainer_one_process_strategy(const weft_trainer *t);

#endif /* WEFT_TRAIN_TRAINER_COMMON_H */
