/* train/optim_state.h - optimizer state in flat global coordinates.
 *
 * An optimizer's state is nslots fp32 arrays ("slots", weft/optim.h), each
 * as long as the flat parameter buffer (total elements). In a checkpoint
 * it is one region of a file, slot after slot:
 *
 *   byte region_offset + 4 * (k * total + i) = slot k, global element i
 *
 * as little-endian IEEE-754 float32, whatever sharding wrote it. A rank
 * that owns elements [begin, end) writes exactly its slice of each slot
 * and reads back any slice, so a checkpoint written by 3 ZeRO ranks loads
 * into 2, or into one process. Writes use pwrite: ranks may write their
 * disjoint slices of the same file at the same time. The step count (for
 * bias corrections and the schedule) is trainer state, saved elsewhere.
 */
#ifndef WEFT_TRAIN_OPTIM_STATE_H
#define WEFT_TRAIN_OPTIM_STATE_H

#include <stddef.h>
#include <stdint.h>
#include "weft/status.h"

/* Size in bytes of the region holding nslots slots of total elements. */
int64_t weft_optim_state_bytes(size_t nslots, int64_t total);

/* Writes elements [begin, end) of each slot into the region at byte
 * region_offset of the open file descriptor fd. slots[k] points at global
 * element begin (the rank's shard). `path` only names the file in
 * messages. Blocks on I/O. Errors: WEFT_ERR_INVALID_ARG for a range
 * outside [0, total] or a NULL slot; WEFT_ERR_IO naming the path, the slot
 * and the OS reason. */
weft_status weft_optim_state_write(int fd, const char *path, int64_t region_offset, int64_t total,
				   size_t nslots, const float *const *slots, int64_t begin,
				   int64_t end);

/* Reads elements [begin, end) of each slot from the region into slots[k]
 * (which point at global element begin). Errors: as write, and
 * WEFT_ERR_CORRUPT when the file ends before the region does (a truncated
 * checkpoint, or one written for a model of another size). */
weft_status weft_optim_state_read(int fd, const char *path, int64_t region_offset, int64_t total,
				  size_t nslots, float *const *slots, int64_t begin, int64_t end);

#endif /* WEFT_TRAIN_OPTIM_STATE_H */
