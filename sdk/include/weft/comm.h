/* weft/comm.h - the communication backend ABI (Gloo, NCCL, third parties).
 *
 * A comm plugin provides a `weft_comm_ops` vtable (plugin kind
 * WEFT_PLUGIN_COMM). The host creates one communicator per process group
 * with `init`, runs collectives on it, and destroys it. Everything the
 * plugin needs from the outside (errors, logging, memory) comes from the
 * weft_host table it got at entry; the rendezvous store comes as the small
 * `weft_store` vtable below, so a plugin never links the core.
 *
 * Buffers are raw pointers with an element count, a dtype and a device tag
 * (weft_comm_buf); this header does not depend on the tensor header.
 *
 * Asynchrony: every collective takes `weft_comm_work **work`.
 *   - work == NULL: the call blocks until the collective finished (or failed,
 *     or the communicator's timeout passed) and returns its status.
 *   - work != NULL: the call enqueues the collective and returns at once with
 *     *work set to a handle; the caller must pass it to `wait` exactly once.
 *     Collectives on one communicator run in the order they were issued
 *     (FIFO), on the backend's comm thread (Gloo) or stream (NCCL). The
 *     buffers must stay valid and untouched until `wait` returned.
 * Device memory (WEFT_COMM_DEVICE_CUDA) is read after the work queued
 * earlier on the device's compute streams (every kernel-table context's):
 * NCCL orders its stream after them with events, Gloo copies on the legacy
 * default stream, which waits for them. A caller need not synchronize
 * before a collective (core/tp does not, since ABI 1.6). And "finished"
 * for a collective whose buffers are all device memory means finished for
 * the device: the blocking call or `wait` may return before it ran, with
 * the work queued afterwards on the device's compute streams (and its
 * legacy default stream) ordered after it; NCCL does so since ABI 1.6, so
 * a training step does not wait on the host. Host buffers, and barriers,
 * are finished on the host when the call returns.
 * Every rank of a communicator must issue the same collectives, in the same
 * order, with matching counts and dtypes; the host's collective ledger
 * (core/dist) names the rank that did not when a collective times out.
 *
 * Failure: after a collective failed or timed out, the communicator is
 * broken: every later call fails fast with WEFT_ERR_COMM until `destroy`.
 * Errors name the communicator ("comm 'world' rank 1/4") and the operation.
 */
#ifndef WEFT_COMM_H
#define WEFT_COMM_H

#include <stddef.h>
#include <stdint.h>
#include "weft/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- element types, reductions, devices ----------------------------- */

/* Element types. Values are part of the ABI: only ever appended. */
typedef enum weft_comm_dtype {
	WEFT_COMM_F32 = 0,
	WEFT_COMM_F64 = 1,
	WEFT_COMM_I32 = 2,
	WEFT_COMM_I64 = 3,
	WEFT_COMM_BF16 = 4, /* reduced in f32, rounded to nearest even */
	WEFT_COMM_F16 = 5,  /* reduced in f32, rounded to nearest even */
	WEFT_COMM_NUM_DTYPES = 6
} weft_comm_dtype;

/* Reductions. AVG divides the sum by the communicator's size (integer
 * types: truncating division). Values are part of the ABI. */
typedef enum weft_comm_redop {
	WEFT_COMM_SUM = 0,
	WEFT_COMM_AVG = 1,
	WEFT_COMM_MAX = 2,
	WEFT_COMM_MIN = 3,
	WEFT_COMM_NUM_REDOPS = 4
} weft_comm_redop;

/* Where a buffer lives. Values are part of the ABI. */
typedef enum weft_comm_device {
	WEFT_COMM_DEVICE_CPU = 0,
	WEFT_COMM_DEVICE_CUDA = 1
} weft_comm_device;

/* One buffer: `count` elements of `dtype` at `data`, on `device`
 * (device_index picks the GPU; 0 for the CPU). Borrowed by every call. */
typedef struct weft_comm_buf {
	void *data;
	int64_t count;
	weft_comm_dtype dtype;
	weft_comm_device device;
	int32_t device_index;
} weft_comm_buf;

/* Bytes per element: 4, 8, 4, 8, 2, 2; 0 for an unknown dtype. */
static inline size_t weft_comm_dtype_size(weft_comm_dtype dt)
{
	switch (dt) {
	case WEFT_COMM_F32: return 4;
	case WEFT_COMM_F64: return 8;
	case WEFT_COMM_I32: return 4;
	case WEFT_COMM_I64: return 8;
	case WEFT_COMM_BF16: return 2;
	case WEFT_COMM_F16: return 2;
	case WEFT_COMM_NUM_DTYPES: break;
	}
	return 0;
}

/* "f32" "f64" "i32" "i64" "bf16" "f16"; "?" otherwise. */
static inline const char *weft_comm_dtype_name(weft_comm_dtype dt)
{
	static const char *const names[] = { "f32", "f64", "i32", "i64", "bf16", "f16" };
	return ((unsigned)dt < WEFT_COMM_NUM_DTYPES) ? names[dt] : "?";
}

/* "sum" "avg" "max" "min"; "?" otherwise. */
static inline const char *weft_comm_redop_name(weft_comm_redop op)
{
	static const char *const names[] = { "sum", "avg", "max", "min" };
	return ((unsigned)op < WEFT_COMM_NUM_REDOPS) ? names[op] : "?";
}

/* ---- the rendezvous store, as a plugin sees it ----------------------- */

/* A key-value store shared by every rank of the job (core/dist serves it
 * over TCP). Keys are NUL-terminated strings; values are bytes. All calls
 * are thread-safe and may block; timeout_ms < 0 means the store's own
 * default. On failure they set the last error (through the host's
 * error_set) and return a status: WEFT_ERR_TIMEOUT when the deadline
 * passed, WEFT_ERR_COMM when the store cannot be reached. */
typedef struct weft_store {
	uint32_t struct_size; /* sizeof(weft_store) as the host built it */
	uint32_t reserved;
	void *ctx;            /* passed back to every member */

	/* Sets key to a copy of value[0..len). Overwrites; wakes waiters. */
	weft_status (*set)(void *ctx, const char *key, const void *value, size_t len);

	/* Waits until key exists (at most timeout_ms), then returns a copy of
	 * its value in *value (length *len; may be 0). The caller frees it with
	 * `release`. */
	weft_status (*get)(void *ctx, const char *key, int64_t timeout_ms, void **value,
			   size_t *len);

	/* Atomically adds delta to the 64-bit integer at key (missing: 0) and
	 * returns the new value in *result (may be NULL). */
	weft_status (*add)(void *ctx, const char *key, int64_t delta, int64_t *result);

	/* Waits until every one of keys[0..nkeys) exists, at most timeout_ms. */
	weft_status (*wait)(void *ctx, const char *const *keys, size_t nkeys, int64_t timeout_ms);

	/* Frees a value returned by get. NULL is ignored. */
	void (*release)(void *ctx, void *value);
} weft_store;

/* ---- communicators ---------------------------------------------------- */

typedef struct weft_comm weft_comm;           /* opaque, owned by the plugin */
typedef struct weft_comm_work weft_comm_work; /* opaque, one pending collective */

/* What `init` needs. The host zero-fills it and sets struct_size, so a
 * plugin can tell which members its host knows. */
typedef struct weft_comm_init_args {
	uint32_t struct_size;
	int32_t rank;             /* 0 <= rank < size */
	int32_t size;
	int32_t reserved;
	const weft_store *store;  /* borrowed; valid until destroy */
	const char *name;         /* unique job-wide name of this group ("world",
				   * "world/split1/c0"); the plugin prefixes its
				   * store keys with it. Borrowed during init. */
	int64_t timeout_ms;       /* deadline of every collective and of the
				   * rendezvous itself (trainer.comm_timeout) */
	weft_comm_device device;  /* where the buffers will live */
	int32_t device_index;
	const char *bind_host;    /* address or host name to listen on; NULL:
				   * the backend's default for this machine */
	const weft_cfg *options;  /* trainer.comm's options mapping, or NULL;
				   * read through the host's cfg_* members */
} weft_comm_init_args;

typedef struct weft_comm_ops {
	weft_plugin_head head;

	/* Creates this rank's communicator and meets the other ranks through
	 * args->store (every rank of the group calls init with the same name
	 * and size). Blocks until all ranks connected or args->timeout_ms
	 * passed. Returns a new communicator in *out; free with destroy.
	 * Errors: WEFT_ERR_INVALID_ARG (bad rank/size), WEFT_ERR_TIMEOUT
	 * (naming the ranks that did not arrive when known), WEFT_ERR_COMM. */
	weft_status (*init)(const weft_comm_init_args *args, weft_comm **out);

	/* (optional) Splits `comm` collectively: ranks passing the same color
	 * form a new communicator, ordered by key (ties by old rank); a color
	 * < 0 takes no part and gets *out == NULL. Every rank of comm must call
	 * it. NULL member: the host computes the membership through the store
	 * and calls init for the new group. */
	weft_status (*split)(weft_comm *comm, int32_t color, int32_t key, const char *name,
			     weft_comm **out);

	/* Sums (or avg/max/min) send over all ranks into recv on every rank.
	 * send->count == recv->count; same dtype; send->data == recv->data is
	 * in place. */
	weft_status (*all_reduce)(weft_comm *comm, const weft_comm_buf *send,
				  const weft_comm_buf *recv, weft_comm_redop op,
				  weft_comm_work **work);

	/* Reduces send (size * n elements) and leaves block `rank` (n elements)
	 * in recv. In place when recv->data == send->data + rank * n elements. */
	weft_status (*reduce_scatter)(weft_comm *comm, const weft_comm_buf *send,
				      const weft_comm_buf *recv, weft_comm_redop op,
				      weft_comm_work **work);

	/* Gathers every rank's send (n elements) into recv (size * n, rank r's
	 * block at r * n). In place when send->data == recv->data + rank * n. */
	weft_status (*all_gather)(weft_comm *comm, const weft_comm_buf *send,
				  const weft_comm_buf *recv, weft_comm_work **work);

	/* Copies root's buf to every rank's buf (same count everywhere). */
	weft_status (*broadcast)(weft_comm *comm, const weft_comm_buf *buf, int32_t root,
				 weft_comm_work **work);

	/* Point to point: send buf to rank peer / receive buf from rank peer.
	 * Matched in issue order per (sender, receiver) pair. */
	weft_status (*send)(weft_comm *comm, const weft_comm_buf *buf, int32_t peer,
			    weft_comm_work **work);
	weft_status (*recv)(weft_comm *comm, const weft_comm_buf *buf, int32_t peer,
			    weft_comm_work **work);

	/* send holds size blocks of n elements; block j goes to rank j, and
	 * rank j's block `rank` lands in recv's block j. Not in place. */
	weft_status (*all_to_all)(weft_comm *comm, const weft_comm_buf *send,
				  const weft_comm_buf *recv, weft_comm_work **work);

	/* Returns on each rank once every rank entered it. */
	weft_status (*barrier)(weft_comm *comm, weft_comm_work **work);

	/* Waits for a handle from a collective, at most timeout_ms (< 0: the
	 * communicator's timeout), and releases it: the handle is invalid
	 * after wait returns, whatever the outcome. Returns the collective's
	 * status; WEFT_ERR_TIMEOUT (naming the op and its sequence number)
	 * when the deadline passed, after which the communicator is broken. */
	weft_status (*wait)(weft_comm_work *work, int64_t timeout_ms);

	/* Whether a handle's collective finished (*done = 1) without waiting.
	 * Does not release it. */
	weft_status (*test)(weft_comm_work *work, int *done);

	/* Marks comm broken: queued collectives fail with WEFT_ERR_CANCELLED,
	 * later calls fail fast; a collective in flight ends at the latest when
	 * the communicator's timeout passes. Never blocks; thread-safe. */
	void (*abort)(weft_comm *comm);

	/* Frees comm. Blocks until its comm thread stopped (a collective in
	 * flight ends at the latest at the timeout). Pending handles must have
	 * been waited on. NULL is ignored. */
	void (*destroy)(weft_comm *comm);

	/* This rank's place and the group's size. */
	int32_t (*rank)(const weft_comm *comm);
	int32_t (*size)(const weft_comm *comm);
} weft_comm_ops;

/* The struct_size of ABI 1.0's weft_comm_ops: the loader refuses a comm
 * plugin that reports less. */
#define WEFT_COMM_OPS_MIN_SIZE \
	((uint32_t)(offsetof(weft_comm_ops, size) + sizeof(((weft_comm_ops *)0)->size)))

#ifdef __cplusplus
}
#endif
#endif /* WEFT_COMM_H */
