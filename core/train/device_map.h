/* Which GPU each local rank of a job uses, and when ranks may share one.
 *
 * Local rank r takes CUDA device r mod (visible GPUs): with at least as
 * many GPUs as local ranks every rank has its own; with fewer, ranks share
 * them round-robin (r and r + count on one GPU), which comm gloo supports
 * (it stages CUDA buffers through host memory) and NCCL does not (a NCCL
 * communicator needs a distinct GPU per rank, and says only "duplicate
 * GPU" when it finds two on one). Header-only: the trainer calls
 * weft_device_map_apply once, before the comm backend starts.
 */
#ifndef WEFT_TRAIN_DEVICE_MAP_H
#define WEFT_TRAIN_DEVICE_MAP_H

#include <stdint.h>
#include <string.h>

#include "weft/device.h"
#include "weft/status.h"

/* The CUDA ordinal of local rank `local_rank` when `count` GPUs are
 * visible: local_rank mod count, in *index. Pure. Errors:
 * WEFT_ERR_INVALID_ARG for count < 1 or local_rank < 0 (naming both). */
static inline weft_status weft_device_map_index(int32_t local_rank, int32_t count, int32_t *index)
{
	if (count < 1 || local_rank < 0)
		return weft_error_set(WEFT_ERR_INVALID_ARG, "device map: local rank %d with %d "
				      "visible GPUs: the rank must be >= 0 and a GPU visible",
				      (int)local_rank, (int)count);
	*index = local_rank % count;
	return WEFT_OK;
}

/* Whether comm backend `comm` can run `local_world` ranks on this node
 * with `count` GPUs: more ranks than GPUs means some GPU has two, which
 * "nccl" refuses; every other backend is accepted. Pure. Errors:
 * WEFT_ERR_UNSUPPORTED for nccl, naming the counts and what to do. */
static inline weft_status weft_device_map_check(const char *comm, int32_t local_world,
						int32_t count)
{
	if (local_world <= count || !comm || strcmp(comm, "nccl") != 0)
		return WEFT_OK;
	return weft_error_set(WEFT_ERR_UNSUPPORTED,
			      "trainer.comm: nccl: %d ranks on this node but %d GPU%s visible, so "
			      "ranks would share a GPU, which NCCL does not support (it needs a "
			      "GPU of its own for each rank): use trainer.devices=%d or fewer, "
			      "make more GPUs visible (CUDA_VISIBLE_DEVICES), or set "
			      "trainer.comm=gloo, which lets ranks share a GPU by staging "
			      "collectives through host memory (slower)",
			      (int)local_world, (int)count, count == 1 ? " is" : "s are",
			      (int)count);
}

/* For a CUDA device: asks the CUDA kernel table how many GPUs are visible
 * (weft_kernel_table.device_count; a table without it counts as 1), checks
 * the comm backend with weft_device_map_check, and sets dev->index with
 * weft_device_map_index. local_world <= 0 counts as 1. Leaves a CPU
 * device alone. Blocking (the first call loads the CUDA kernels). Errors:
 * weft_kernels_get's (no CUDA kernels, no GPU), device_count's, and the
 * two functions above. */
static inline weft_status weft_device_map_apply(weft_device *dev, int32_t local_rank,
						int32_t local_world, const char *comm)
{
	const weft_kernel_table *k;
	int32_t count = 1;
	weft_status st;

	if (dev->type != WEFT_DEVICE_CUDA)
		return WEFT_OK;
	if ((st = weft_kernels_get(*dev, &k)))
		return st;
	if (WEFT_HAS_MEMBER(k, weft_kernel_table, device_count) && k->device_count &&
	    (st = k->device_count(&count)))
		return st;
	if ((st = weft_device_map_check(comm, local_world > 0 ? local_world : 1, count)))
		return st;
	return weft_device_map_index(local_rank, count, &dev->index);
}

#endif /* WEFT_TRAIN_DEVICE_MAP_H */
