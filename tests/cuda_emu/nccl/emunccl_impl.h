/* The emulated NCCL's internals, shared by emunccl_comm.c (ids,
 * communicators, errors), emunccl_shm.c (the shared segment, waiting,
 * peers' liveness), emunccl_ops.c (collectives, send/recv, groups, the
 * stream hand-off) and emunccl_reduce.c (arithmetic per type and op).
 *
 * One communicator is one POSIX shared-memory segment that every rank (a
 * process) maps. Its name is carried by the unique id; it is made by
 * ncclGetUniqueId and unlinked as soon as every rank has joined, so an id
 * used a second time (a stale id) finds nothing and fails at once.
 *
 * Layout: a header page; one emu_slot per rank (its state, barrier
 * counter, the descriptor of its current collective); one data chunk per
 * rank that collectives exchange through; one ring buffer (emu_mbox) per
 * ordered pair of ranks for send/recv. */
#ifndef EMUNCCL_IMPL_H
#define EMUNCCL_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#define EMU_MAGIC 0x314c43434e554d45ull /* "EMUNCCL1" */
#define EMU_HDR_BYTES 4096
#define EMU_NAME_MAX 64

/* What a unique id holds (inside ncclUniqueId.internal). */
struct emu_id {
	uint64_t magic;
	char name[EMU_NAME_MAX]; /* the segment: /emunccl.<pid>.<generation>.<nonce> */
};

struct emu_hdr {
	uint64_t magic;
	uint64_t chunk_bytes; /* per-rank collective chunk (EMU_NCCL_CHUNK_BYTES at id time) */
	uint64_t mbox_bytes;  /* per-pair ring (EMU_NCCL_MBOX_BYTES at id time) */
	_Atomic int32_t nranks; /* set by the first rank to join */
	_Atomic int32_t joined;
	_Atomic uint32_t bell; /* futex word: bumped after every change anyone waits for */
};

/* emu_slot.state */
enum { EMU_LIVE = 0, EMU_LEFT = 1, EMU_ABORTED = 2, EMU_FAILED = 3 };

/* The kinds of operation. */
enum emu_kind {
	EMU_ALL_REDUCE, EMU_REDUCE, EMU_BROADCAST, EMU_ALL_GATHER, EMU_REDUCE_SCATTER,
	EMU_SEND, EMU_RECV, EMU_SPLIT
};

/* What a rank says its current collective is; compared across ranks. */
struct emu_desc {
	int32_t kind, dtype, redop, root;
	uint64_t count, seq;
};

struct emu_slot {
	_Atomic uint32_t joined;
	_Atomic uint32_t state;
	_Atomic int32_t pid;
	_Atomic uint64_t arrive;     /* collective rounds this rank has finished writing */
	_Atomic uint64_t ctl_arrive; /* host-side rounds (split), apart from the stream's */
	struct emu_desc desc;
	int32_t split_color, split_key;
	struct emu_id split_id; /* set by the first rank of each new group */
	char pad[64];
};

struct emu_mbox {
	_Atomic uint64_t head; /* bytes the sender has written, ever */
	_Atomic uint64_t tail; /* bytes the receiver has taken, ever */
	_Atomic uint32_t err;  /* the receiver found a size mismatch */
	char pad[64 - 20];
};

struct ncclComm {
	struct emu_id id;
	char label[160]; /* "comm 'world' rank 1/4" for messages */
	int rank, nranks, device, blocking;
	int64_t timeout_ms;
	int fd; /* this rank's own open of the segment: holds its liveness lock */
	void *base;
	size_t bytes;
	struct emu_hdr *hdr;
	struct emu_slot *slots;
	char *data;            /* nranks chunks */
	struct emu_mbox *mbox; /* nranks * nranks, then their rings */
	char *rings;

	_Atomic int refs;    /* the owner (until destroy/abort) and every queued task */
	_Atomic int joining; /* init posted, not every rank has joined yet */
	_Atomic int aborted, destroyed, finalized;
	_Atomic int async_err; /* ncclResult_t: the first failure */
	char err_msg[768];
	pthread_mutex_t exec_mu; /* one task of this communicator runs at a time */
	uint64_t bar_seq, ctl_seq; /* rounds passed (stream side, host side) */
	uint64_t op_seq;           /* operations issued, for messages */
};

/* ---- emunccl_comm.c ---- */

/* The operation timeout (EMU_NCCL_TIMEOUT_MS). */
int64_t emu_timeout_ms(void);
int emu_tracing(void);
/* Records msg as the last error (ncclGetLastError) and returns r. */
ncclResult_t emu_fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Marks c failed with r and msg (the first failure is kept), tells the peers. */
void emu_comm_fail(struct ncclComm *c, ncclResult_t r, const char *msg);
void emu_comm_unref(struct ncclComm *c);
/* Makes a new id (a new segment) into *id. */
ncclResult_t emu_new_id(struct emu_id *id);
/* Joins the communicator of id as rank of nranks (blocking: waits for all). */
ncclResult_t emu_comm_join(struct ncclComm **out, int nranks, const struct emu_id *id, int rank,
			   int blocking, const char *name);

/* ---- emunccl_shm.c ---- */

int64_t emu_now_ms(void);
/* Wakes every waiter of c's segment. */
void emu_ring(struct ncclComm *c);
/* Waits until the bell moves from `seen` or 20 ms pass. */
void emu_doze(struct ncclComm *c, uint32_t seen);
/* 1 while rank r's process holds its liveness lock on c's segment. */
int emu_peer_alive(struct ncclComm *c, int r);
/* Checks whether waiting on rank r can still end: NULL if it can, else
 * a reason written into buf ("rank 1 left the communicator ..."). */
const char *emu_peer_gone(struct ncclComm *c, int r, int check_lock, char *buf, size_t len);
/* Maps the segment of id (created by emu_new_id) sized for nranks. */
ncclResult_t emu_shm_attach(struct ncclComm *c, int nranks);
void emu_shm_detach(struct ncclComm *c);

/* Waiting with a deadline: `ready(c, arg, &blocker)` says whether the wait
 * is over and, if not, which rank it waits for (-1: several). Returns
 * ncclSuccess when ready, else an error whose message names what and the
 * rank: ncclSystemError after the deadline, ncclRemoteError when the rank
 * left, aborted, failed or its process is gone, ncclInvalidUsage when c
 * was aborted here. */
typedef int (*emu_ready_fn)(struct ncclComm *c, void *arg, int *blocker);
ncclResult_t emu_wait(struct ncclComm *c, emu_ready_fn ready, void *arg, int64_t deadline,
		      const char *what);

/* A barrier round among all ranks on the stream side (arrive) or the
 * host side (ctl_arrive). */
ncclResult_t emu_round(struct ncclComm *c, int64_t deadline, const char *what);
ncclResult_t emu_ctl_round(struct ncclComm *c, int64_t deadline, const char *what);

/* ---- emunccl_reduce.c ---- */

/* Bytes of one element, 0 for a type the emulator does not handle. */
size_t emu_type_size(ncclDataType_t t);
const char *emu_type_name(ncclDataType_t t);
const char *emu_op_name(ncclRedOp_t op);
/* out[i] = in[0][i] op in[1][i] op ... in rank order (rounded to the type
 * after each step; avg divides the sum by n at the end). */
void emu_reduce(void *out, const void *const *in, int n, size_t count, ncclDataType_t t,
		ncclRedOp_t op);

#endif /* EMUNCCL_IMPL_H */
