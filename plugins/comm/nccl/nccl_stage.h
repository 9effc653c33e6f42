/* Host buffers in the NCCL plugin: the plan of one staged call.
 *
 * NCCL moves device memory only. A buffer whose descriptor says
 * WEFT_COMM_DEVICE_CPU (the trainer's loss, evaluation sums, the 16-mixed
 * overflow flag, the config hash, broadcast run paths ...) is staged: the
 * plugin copies what the collective reads into a device scratch area
 * (through a pinned host block, so the copy is asynchronous on the comm
 * stream), runs the collective there, and copies what it writes back the
 * same way. This header is the pure part: which bytes go where in the
 * scratch area, decided from pointers and sizes only, so it is tested on
 * machines without a GPU (tests/cuda/test_nccl_stage_plan.c).
 *
 * Aliasing is kept: when send and recv are both host memory and their
 * ranges overlap (in place: all_reduce with send == recv, all_gather with
 * send inside recv, reduce_scatter with recv inside send, broadcast), one
 * scratch region covers both ranges and each pointer keeps its offset
 * from the lower one, so the collective sees on the device exactly the
 * aliasing it was given on the host. Only the bytes read are copied in
 * and only the bytes written are copied out: a small reduction costs one
 * small copy each way.
 */
#ifndef WEFT_NCCL_STAGE_H
#define WEFT_NCCL_STAGE_H

#include <stddef.h>
#include <stdint.h>

/* Scratch regions start at multiples of this (bytes). */
#define NCCL_STAGE_ALIGN 256

/* One side (send or recv) of a call, as the plan sees it. */
typedef struct nccl_stage_side {
	const void *data; /* the caller's pointer; NULL with bytes 0 is fine */
	size_t bytes;     /* count x element size */
	int host;         /* lives in host memory: needs staging */
	int used;         /* the call passes this pointer to NCCL */
	int copy;         /* its bytes matter: the call reads them (send side, copied
			   * in) or writes them for the caller (recv side, copied out) */
} nccl_stage_side;

/* Where a call's data goes. Offsets are into the scratch area. */
typedef struct nccl_stage_plan {
	int staged;        /* some side is host memory: the call needs a scratch area */
	size_t bytes;      /* scratch bytes the call needs (may be 0 when staged: a
			    * zero-length host buffer still gets a device pointer) */
	int send_mapped;   /* the send pointer becomes scratch + send_off */
	size_t send_off;
	int recv_mapped;   /* the recv pointer becomes scratch + recv_off */
	size_t recv_off;
	size_t in_off, in_bytes;   /* copied in: scratch[in_off..) <- send host data */
	size_t out_off, out_bytes; /* copied out: recv host data <- scratch[out_off..) */
} nccl_stage_plan;

/* Fills *plan for a call with sides send and recv. A side with used == 0
 * takes no part (send-only and recv-only calls); one with copy == 0 gets a
 * device pointer but no copy (a broadcast's send side on a non-root rank,
 * its recv side on the root, whose data NCCL leaves as it was). A side
 * with host == 0 stays where it is (device memory). Pure; never fails. */
void nccl_stage_plan_make(const nccl_stage_side *send, const nccl_stage_side *recv,
			  nccl_stage_plan *plan);

/* The capacity to allocate for a scratch area of `need` bytes: the next
 * power of two, at least min_bytes (so the few sizes a run uses share a
 * handful of areas). Pure. */
size_t nccl_stage_capacity(size_t need, size_t min_bytes);

#endif /* WEFT_NCCL_STAGE_H */
