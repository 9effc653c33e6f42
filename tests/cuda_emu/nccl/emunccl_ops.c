/* The emulated NCCL's operations: collectives, send/recv and groups.
 *
 * Every operation is checked when it is issued and then handed to its
 * stream as one host function (cudaLaunchHostFunc): it runs in stream
 * order, when the stream's work runs, with device memory open to plain
 * loads and stores. A group (ncclGroupStart/End) becomes one host
 * function per communicator, holding all its operations, so that its
 * sends and receives make progress together in any order, as NCCL's do.
 *
 * Collectives exchange through the per-rank chunks of the segment, a
 * chunk at a time: every rank writes its part, a round (barrier), every
 * rank reads what it needs and reduces in rank order, a round. The first
 * round also compares the ranks' descriptors, so ranks that called
 * different collectives (or counts, types, ops, roots) fail with a
 * message instead of exchanging garbage.
 *
 * Send/recv go through a ring per ordered pair of ranks: an 8-byte size,
 * then the bytes. A send completes only when the receiver has taken all
 * of it (a rendezvous), so two ranks that each send before they receive,
 * outside a group, deadlock here as they can on a GPU, and the deadline
 * reports it.
 *
 * A failed operation (deadline, a peer that failed, aborted, left or
 * died, a mismatch) sets the communicator's asynchronous error; the host
 * function then holds the stream for up to EMU_NCCL_HOLD_MS (default 2000)
 * or until the communicator is aborted or destroyed here, so that a
 * caller polling the stream's event and ncclCommGetAsyncError sees the
 * error before the event. Where the runtime runs the host function inside
 * cudaLaunchHostFunc (an eager stream), the issuing call returns the
 * error itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emunccl_impl.h"

struct emu_op {
	enum emu_kind kind;
	const void *send;
	void *recv;
	size_t count; /* all_gather: per rank sent; reduce_scatter: per rank received */
	ncclDataType_t dtype;
	ncclRedOp_t redop;
	int peer; /* root or peer */
	uint64_t seq;
	char what[112];
	/* send/recv progress */
	int started, hdr_done, done;
	uint64_t base, pushed, total, got;
};

struct emu_task {
	struct ncclComm *c;
	cudaStream_t stream;
	int n, cap;
	struct emu_op *ops;
	int ran_eagerly;
	ncclResult_t result;
};

static __thread struct emu_task *launching;
static __thread int group_depth;
static __thread struct emu_task **group_tasks;
static __thread int group_n, group_cap;
static __thread ncclResult_t group_err;

static const char *kind_name(enum emu_kind k)
{
	switch (k) {
	case EMU_ALL_REDUCE: return "all_reduce";
	case EMU_REDUCE: return "reduce";
	case EMU_BROADCAST: return "broadcast";
	case EMU_ALL_GATHER: return "all_gather";
	case EMU_REDUCE_SCATTER: return "reduce_scatter";
	case EMU_SEND: return "send";
	case EMU_RECV: return "recv";
	default: return "split";
	}
}

static void describe(struct emu_op *o)
{
	int n = snprintf(o->what, sizeof(o->what), "%s #%llu (%s x %zu", kind_name(o->kind),
			 (unsigned long long)o->seq, emu_type_name(o->dtype), o->count);

	if (n < 0 || (size_t)n >= sizeof(o->what))
		return;
	switch (o->kind) {
	case EMU_ALL_REDUCE: case EMU_REDUCE_SCATTER:
		snprintf(o->what + n, sizeof(o->what) - (size_t)n, ", %s)", emu_op_name(o->redop));
		break;
	case EMU_REDUCE:
		snprintf(o->what + n, sizeof(o->what) - (size_t)n, ", %s, root %d)",
			 emu_op_name(o->redop), o->peer);
		break;
	case EMU_BROADCAST:
		snprintf(o->what + n, sizeof(o->what) - (size_t)n, ", root %d)", o->peer);
		break;
	case EMU_SEND: case EMU_RECV:
		snprintf(o->what + n, sizeof(o->what) - (size_t)n, ", %s rank %d)",
			 o->kind == EMU_SEND ? "to" : "from", o->peer);
		break;
	default:
		snprintf(o->what + n, sizeof(o->what) - (size_t)n, ")");
		break;
	}
}

/* ---- collectives ---- */

static char *chunk_of(struct ncclComm *c, int r)
{
	return c->data + (size_t)r * c->hdr->chunk_bytes;
}

/* After the first round: every rank called the same thing. */
static ncclResult_t check_descs(struct ncclComm *c, const struct emu_op *o)
{
	const struct emu_desc *me = &c->slots[c->rank].desc;

	for (int r = 0; r < c->nranks; r++) {
		const struct emu_desc *d = &c->slots[r].desc;

		if (d->kind != me->kind || d->dtype != me->dtype || d->count != me->count ||
		    d->root != me->root ||
		    ((me->kind == EMU_ALL_REDUCE || me->kind == EMU_REDUCE ||
		      me->kind == EMU_REDUCE_SCATTER) && d->redop != me->redop))
			return emu_fail(ncclInvalidUsage, "emunccl: %s: %s does not match rank %d's "
					"collective #%llu (%s, %s x %llu, op %s, root %d): every rank "
					"must issue the same collectives in the same order",
					c->label, o->what, r, (unsigned long long)d->seq,
					kind_name((enum emu_kind)d->kind),
					emu_type_name((ncclDataType_t)d->dtype),
					(unsigned long long)d->count,
					emu_op_name((ncclRedOp_t)d->redop), (int)d->root);
	}
	return ncclSuccess;
}

static ncclResult_t run_coll(struct ncclComm *c, struct emu_op *o, int64_t deadline)
{
	size_t es = emu_type_size(o->dtype), n = (size_t)c->nranks, chunk = c->hdr->chunk_bytes;
	size_t per = o->kind == EMU_REDUCE_SCATTER ? chunk / (n * es) : chunk / es;
	const void **in = calloc(n, sizeof(*in));
	ncclResult_t r = ncclSuccess;
	size_t off = 0;

	if (!in)
		return emu_fail(ncclSystemError, "emunccl: out of memory");
	c->slots[c->rank].desc = (struct emu_desc){
		.kind = o->kind, .dtype = o->dtype, .redop = o->redop,
		.root = o->kind == EMU_REDUCE || o->kind == EMU_BROADCAST ? o->peer : -1,
		.count = o->count, .seq = o->seq };
	do {
		size_t m = o->count - off < per ? o->count - off : per;
		char *mine = chunk_of(c, c->rank);
		const char *src = o->send;
		char *dst = o->recv;

		/* write this rank's part (count 0: the rounds alone, to compare) */
		switch (m ? o->kind : EMU_SPLIT) {
		case EMU_SPLIT:
			break;
		case EMU_BROADCAST:
			if (c->rank == o->peer)
				memcpy(mine, src + off * es, m * es);
			break;
		case EMU_REDUCE_SCATTER:
			for (size_t j = 0; j < n; j++)
				memcpy(mine + j * m * es, src + (j * o->count + off) * es, m * es);
			break;
		default:
			memcpy(mine, src + off * es, m * es);
			break;
		}
		if ((r = emu_round(c, deadline, o->what)))
			break;
		if (off == 0 && (r = check_descs(c, o)))
			break;
		/* read what this rank needs */
		switch (m ? o->kind : EMU_SPLIT) {
		case EMU_SPLIT:
			break;
		case EMU_ALL_REDUCE: case EMU_REDUCE:
			if (o->kind == EMU_REDUCE && c->rank != o->peer)
				break;
			for (size_t j = 0; j < n; j++)
				in[j] = chunk_of(c, (int)j);
			emu_reduce(dst + off * es, in, c->nranks, m, o->dtype, o->redop);
			break;
		case EMU_REDUCE_SCATTER:
			for (size_t j = 0; j < n; j++)
				in[j] = chunk_of(c, (int)j) + (size_t)c->rank * m * es;
			emu_reduce(dst + off * es, in, c->nranks, m, o->dtype, o->redop);
			break;
		case EMU_BROADCAST:
			memmove(dst + off * es, chunk_of(c, o->peer), m * es);
			break;
		default: /* all_gather */
			for (size_t j = 0; j < n; j++)
				memmove(dst + (j * o->count + off) * es, chunk_of(c, (int)j), m * es);
			break;
		}
		/* nobody writes the chunks again before everyone has read them */
		if ((r = emu_round(c, deadline, o->what)))
			break;
		off += m;
	} while (off < o->count);
	free(in);
	return r;
}

/* ---- send/recv ---- */

static struct emu_mbox *box(struct ncclComm *c, int from, int to)
{
	return &c->mbox[(size_t)from * (size_t)c->nranks + (size_t)to];
}

static char *ring(struct ncclComm *c, int from, int to)
{
	return c->rings + ((size_t)from * (size_t)c->nranks + (size_t)to) * c->hdr->mbox_bytes;
}

/* Copies n bytes between the ring (at stream position pos) and mem. */
static void ring_copy(char *rg, size_t cap, uint64_t pos, void *mem, size_t n, int to_ring)
{
	size_t at = (size_t)(pos % cap), first = cap - at < n ? cap - at : n;

	if (to_ring) {
		memcpy(rg + at, mem, first);
		memcpy(rg, (char *)mem + first, n - first);
	} else {
		memcpy(mem, rg + at, first);
		memcpy((char *)mem + first, rg, n - first);
	}
}

/* Whether an earlier op of the task on the same pair still has to go first. */
static int behind(const struct emu_task *t, int i)
{
	const struct emu_op *o = &t->ops[i];

	for (int j = 0; j < i; j++) {
		const struct emu_op *p = &t->ops[j];

		if (p->kind == o->kind && p->peer == o->peer &&
		    (o->kind == EMU_SEND ? p->pushed < p->total || !p->started : !p->done))
			return 1;
	}
	return 0;
}

static ncclResult_t send_step(struct ncclComm *c, struct emu_task *t, int i, int *moved)
{
	struct emu_op *o = &t->ops[i];
	struct emu_mbox *b = box(c, c->rank, o->peer);
	size_t cap = c->hdr->mbox_bytes;
	char *rg = ring(c, c->rank, o->peer);
	uint64_t bytes = (uint64_t)o->count * emu_type_size(o->dtype);

	if (atomic_load(&b->err))
		return emu_fail(ncclInvalidUsage, "emunccl: %s: %s: rank %d's matching recv expects a "
				"different number of bytes than the %llu sent", c->label, o->what,
				o->peer, (unsigned long long)bytes);
	if (!o->started) {
		if (behind(t, i))
			return ncclSuccess;
		o->started = 1;
		o->base = atomic_load(&b->head);
		o->total = 8 + bytes;
	}
	while (o->pushed < o->total) {
		uint64_t head = o->base + o->pushed, room = cap - (head - atomic_load(&b->tail));
		uint64_t k = o->total - o->pushed < room ? o->total - o->pushed : room;

		if (!k)
			break;
		if (o->pushed < 8) { /* the size first */
			k = 8 - o->pushed < k ? 8 - o->pushed : k;
			ring_copy(rg, cap, head, (char *)&bytes + o->pushed, (size_t)k, 1);
		} else {
			ring_copy(rg, cap, head, (char *)o->send + (o->pushed - 8), (size_t)k, 1);
		}
		o->pushed += k;
		atomic_store(&b->head, o->base + o->pushed);
		*moved = 1;
	}
	if (o->pushed == o->total && atomic_load(&b->tail) >= o->base + o->total)
		o->done = 1;
	return ncclSuccess;
}

static ncclResult_t recv_step(struct ncclComm *c, struct emu_task *t, int i, int *moved)
{
	struct emu_op *o = &t->ops[i];
	struct emu_mbox *b = box(c, o->peer, c->rank);
	size_t cap = c->hdr->mbox_bytes;
	char *rg = ring(c, o->peer, c->rank);
	uint64_t bytes = (uint64_t)o->count * emu_type_size(o->dtype);
	uint64_t tail, avail;

	if (behind(t, i))
		return ncclSuccess;
	tail = atomic_load(&b->tail);
	avail = atomic_load(&b->head) - tail;
	if (!o->hdr_done) {
		uint64_t len;

		if (avail < 8)
			return ncclSuccess;
		ring_copy(rg, cap, tail, &len, 8, 0);
		if (len != bytes) {
			atomic_store(&b->err, 1);
			emu_ring(c);
			return emu_fail(ncclInvalidUsage, "emunccl: %s: %s expects %llu bytes but rank "
					"%d sent %llu: a send and its recv must have the same count "
					"and type", c->label, o->what, (unsigned long long)bytes,
					o->peer, (unsigned long long)len);
		}
		o->hdr_done = 1;
		tail += 8;
		avail -= 8;
		atomic_store(&b->tail, tail);
		*moved = 1;
	}
	if (o->got < bytes && avail) {
		uint64_t k = bytes - o->got < avail ? bytes - o->got : avail;

		ring_copy(rg, cap, tail, (char *)o->recv + o->got, (size_t)k, 0);
		o->got += k;
		atomic_store(&b->tail, tail + k);
		*moved = 1;
	}
	if (o->got == bytes)
		o->done = 1;
	return ncclSuccess;
}

struct p2p_arg {
	struct emu_task *t;
	ncclResult_t err;
};

/* One pass over the task's sends and receives; ready when all are done. */
static int p2p_ready(struct ncclComm *c, void *arg, int *blocker)
{
	struct p2p_arg *a = arg;
	int moved = 0, pending = 0;

	for (int i = 0; i < a->t->n; i++) {
		struct emu_op *o = &a->t->ops[i];
		ncclResult_t r;

		if (o->done || (o->kind != EMU_SEND && o->kind != EMU_RECV))
			continue;
		r = o->kind == EMU_SEND ? send_step(c, a->t, i, &moved) :
					  recv_step(c, a->t, i, &moved);
		if (r != ncclSuccess) {
			a->err = r;
			return 1;
		}
		if (!o->done && !pending++)
			*blocker = o->peer;
	}
	if (moved)
		emu_ring(c);
	return pending == 0;
}

static ncclResult_t run_p2p(struct ncclComm *c, struct emu_task *t, int64_t deadline)
{
	struct p2p_arg a = { .t = t, .err = ncclSuccess };
	const char *what = NULL;
	char buf[160];
	ncclResult_t r;
	int n = 0;

	for (int i = 0; i < t->n; i++)
		if (t->ops[i].kind == EMU_SEND || t->ops[i].kind == EMU_RECV)
			if (!n++)
				what = t->ops[i].what;
	if (!n)
		return ncclSuccess;
	if (n > 1) {
		snprintf(buf, sizeof(buf), "a group of %d sends and receives (the first: %s)", n,
			 what);
		what = buf;
	}
	r = emu_wait(c, p2p_ready, &a, deadline, what);
	return r != ncclSuccess ? r : a.err;
}

/* ---- the stream hand-off ---- */

static int64_t hold_ms(void)
{
	const char *v = getenv("EMU_NCCL_HOLD_MS");

	return v && *v ? atoll(v) : 2000;
}

static void CUDART_CB run_task(void *p)
{
	struct emu_task *t = p;
	struct ncclComm *c = t->c;
	int eager = launching == t;
	ncclResult_t r = ncclSuccess;

	pthread_mutex_lock(&c->exec_mu);
	if (atomic_load(&c->aborted) || atomic_load(&c->destroyed)) {
		r = emu_fail(ncclInvalidUsage, "emunccl: %s: %s ran after the communicator was %s",
			     c->label, t->ops[0].what, atomic_load(&c->aborted) ? "aborted" :
			     "destroyed");
	} else if (atomic_load(&c->async_err) != ncclSuccess) {
		r = (ncclResult_t)atomic_load(&c->async_err);
	} else {
		int64_t deadline = emu_now_ms() + c->timeout_ms;

		if (emu_tracing())
			for (int i = 0; i < t->n; i++)
				fprintf(stderr, "emunccl: %s: %s\n", c->label, t->ops[i].what);
		for (int i = 0; i < t->n && r == ncclSuccess; i++)
			if (t->ops[i].kind != EMU_SEND && t->ops[i].kind != EMU_RECV)
				r = run_coll(c, &t->ops[i], deadline);
		if (r == ncclSuccess)
			r = run_p2p(c, t, deadline);
		if (r != ncclSuccess && !atomic_load(&c->aborted) && !atomic_load(&c->destroyed)) {
			emu_comm_fail(c, r, ncclGetLastError(c));
			if (!eager) {
				/* hold the stream so that a poller sees the error first */
				int64_t hold = hold_ms(), until = emu_now_ms() + hold;
				struct timespec ts = { 0, 5 * 1000 * 1000 };

				while (emu_now_ms() < until && !atomic_load(&c->aborted) &&
				       !atomic_load(&c->destroyed))
					nanosleep(&ts, NULL);
				if (hold > 0 && !atomic_load(&c->aborted) &&
				    !atomic_load(&c->destroyed))
					fprintf(stderr, "emunccl: %s: %s failed (%s) and the "
						"communicator was not aborted within EMU_NCCL_HOLD_MS; "
						"its stream goes on, so a caller that trusts the "
						"stream's event without ncclCommGetAsyncError takes a "
						"buffer this operation did not write\n", c->label,
						t->ops[0].what, ncclGetErrorString(r));
			}
		}
	}
	pthread_mutex_unlock(&c->exec_mu);
	t->result = r;
	if (eager) {
		t->ran_eagerly = 1; /* the launcher reads the result and frees t */
		emu_comm_unref(c);
		return;
	}
	emu_comm_unref(c);
	free(t->ops);
	free(t);
}

static ncclResult_t launch(struct emu_task *t)
{
	struct ncclComm *c = t->c;
	cudaError_t err;
	ncclResult_t r;

	atomic_fetch_add(&c->refs, 1);
	launching = t;
	err = cudaLaunchHostFunc(t->stream, run_task, t);
	launching = NULL;
	if (err != cudaSuccess) {
		r = emu_fail(ncclUnhandledCudaError, "emunccl: %s: %s: cudaLaunchHostFunc failed: "
			     "%s", c->label, t->ops[0].what, cudaGetErrorString(err));
		emu_comm_unref(c);
		free(t->ops);
		free(t);
		return r;
	}
	if (!t->ran_eagerly)
		return ncclSuccess;
	r = t->result;
	free(t->ops);
	free(t);
	return r;
}

static struct emu_task *task_new(struct ncclComm *c, cudaStream_t stream)
{
	struct emu_task *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->c = c;
	t->stream = stream;
	return t;
}

static int task_add(struct emu_task *t, const struct emu_op *o)
{
	if (t->n == t->cap) {
		int cap = t->cap ? 2 * t->cap : 4;
		struct emu_op *ops = realloc(t->ops, (size_t)cap * sizeof(*ops));

		if (!ops)
			return -1;
		t->ops = ops;
		t->cap = cap;
	}
	t->ops[t->n++] = *o;
	return 0;
}

/* Checks a buffer the GPU would read or write. */
static ncclResult_t check_buf(struct ncclComm *c, const struct emu_op *o, const void *p,
			      const char *which)
{
	struct cudaPointerAttributes at;

	if (!p)
		return emu_fail(ncclInvalidArgument, "emunccl: %s: %s: %s is NULL", c->label, o->what,
				which);
	if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
		cudaGetLastError();
		return ncclSuccess; /* the runtime cannot tell: let it run */
	}
	if (at.type == cudaMemoryTypeUnregistered)
		return emu_fail(ncclInvalidArgument, "emunccl: %s: %s: %s %p is pageable host "
				"memory; NCCL needs device memory (or pinned host memory)",
				c->label, o->what, which, p);
	return ncclSuccess;
}

static ncclResult_t submit(struct ncclComm *c, struct emu_op *o, cudaStream_t stream)
{
	struct emu_task *t = NULL;
	ncclResult_t r;

	if (!c)
		return emu_fail(ncclInvalidArgument, "emunccl: %s: comm is NULL", kind_name(o->kind));
	o->seq = ++c->op_seq;
	describe(o);
	if (atomic_load(&c->aborted) || atomic_load(&c->destroyed) || atomic_load(&c->finalized))
		return emu_fail(ncclInvalidUsage, "emunccl: %s: %s issued after the communicator "
				"was %s", c->label, o->what, atomic_load(&c->aborted) ? "aborted" :
				atomic_load(&c->destroyed) ? "destroyed" : "finalized");
	if (atomic_load(&c->async_err) != ncclSuccess)
		return emu_fail((ncclResult_t)atomic_load(&c->async_err), "emunccl: %s: %s refused: "
				"the communicator failed earlier (%s)", c->label, o->what,
				c->err_msg);
	if (atomic_load(&c->joining))
		return emu_fail(ncclInvalidUsage, "emunccl: %s: %s issued before the communicator "
				"finished initialising (poll ncclCommGetAsyncError until it is "
				"not ncclInProgress)", c->label, o->what);
	if (!emu_type_size(o->dtype))
		return emu_fail(ncclInvalidArgument, "emunccl: %s: %s: data type %d is not one the "
				"emulator handles (int8/uint8/int32/uint32/int64/uint64/f16/bf16/"
				"f32/f64)", c->label, o->what, (int)o->dtype);
	if ((unsigned)o->redop >= (unsigned)ncclNumOps)
		return emu_fail(ncclInvalidArgument, "emunccl: %s: %s: reduction op %d is not one "
				"the emulator handles (sum, prod, max, min, avg)", c->label,
				o->what, (int)o->redop);
	if ((o->kind == EMU_REDUCE || o->kind == EMU_BROADCAST || o->kind == EMU_SEND ||
	     o->kind == EMU_RECV) && (o->peer < 0 || o->peer >= c->nranks))
		return emu_fail(ncclInvalidArgument, "emunccl: %s: %s: %s %d is not a rank of this "
				"communicator (0..%d)", c->label, o->what,
				o->kind == EMU_SEND || o->kind == EMU_RECV ? "peer" : "root", o->peer,
				c->nranks - 1);
	if (o->kind == EMU_REDUCE_SCATTER &&
	    (size_t)c->nranks * emu_type_size(o->dtype) > c->hdr->chunk_bytes)
		return emu_fail(ncclInvalidUsage, "emunccl: %s: %s: %d ranks of %zu-byte elements do "
				"not fit the emulator's %llu-byte chunk; raise EMU_NCCL_CHUNK_BYTES",
				c->label, o->what, c->nranks, emu_type_size(o->dtype),
				(unsigned long long)c->hdr->chunk_bytes);
	if ((o->kind == EMU_SEND || o->kind == EMU_RECV) && o->peer == c->rank && group_depth == 0)
		return emu_fail(ncclInvalidUsage, "emunccl: %s: %s: a %s this rank itself outside a "
				"group can never complete (its %s would have to run first); put "
				"both in one ncclGroupStart/ncclGroupEnd", c->label, o->what,
				o->kind == EMU_SEND ? "send to" : "recv from",
				o->kind == EMU_SEND ? "recv" : "send");
	if (o->count && o->kind != EMU_RECV &&
	    (o->kind != EMU_BROADCAST || c->rank == o->peer) &&
	    (r = check_buf(c, o, o->send, "sendbuff")))
		return r;
	if (o->count && o->kind != EMU_SEND && (o->kind != EMU_REDUCE || c->rank == o->peer) &&
	    (r = check_buf(c, o, o->recv, "recvbuff")))
		return r;
	if (group_depth > 0) {
		for (int i = 0; i < group_n; i++)
			if (group_tasks[i]->c == c)
				t = group_tasks[i];
		if (t && t->stream != stream)
			return group_err = emu_fail(ncclInvalidUsage, "emunccl: %s: %s: a group's "
						    "operations on one communicator must use one "
						    "stream", c->label, o->what);
		if (!t) {
			if (group_n == group_cap) {
				int cap = group_cap ? 2 * group_cap : 4;
				struct emu_task **a = realloc(group_tasks, (size_t)cap * sizeof(*a));

				if (!a)
					return group_err = emu_fail(ncclSystemError, "emunccl: out "
								    "of memory");
				group_tasks = a;
				group_cap = cap;
			}
			t = task_new(c, stream);
			if (!t)
				return group_err = emu_fail(ncclSystemError, "emunccl: out of memory");
			group_tasks[group_n++] = t;
		}
		if (task_add(t, o))
			return group_err = emu_fail(ncclSystemError, "emunccl: out of memory");
		return ncclSuccess;
	}
	t = task_new(c, stream);
	if (!t || task_add(t, o)) {
		free(t);
		return emu_fail(ncclSystemError, "emunccl: out of memory");
	}
	return launch(t);
}

ncclResult_t ncclGroupStart(void)
{
	if (group_depth++ == 0)
		group_err = ncclSuccess;
	return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
	ncclResult_t r;

	if (group_depth == 0)
		return emu_fail(ncclInvalidUsage, "emunccl: ncclGroupEnd without ncclGroupStart");
	if (--group_depth > 0)
		return ncclSuccess;
	r = group_err;
	for (int i = 0; i < group_n; i++) {
		ncclResult_t e;

		if (r != ncclSuccess) { /* an operation of the group was refused: none runs */
			free(group_tasks[i]->ops);
			free(group_tasks[i]);
			continue;
		}
		e = launch(group_tasks[i]);
		if (e != ncclSuccess && r == ncclSuccess)
			r = e;
	}
	group_n = 0;
	free(group_tasks);
	group_tasks = NULL;
	group_cap = 0;
	return r;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			   cudaStream_t stream)
{
	struct emu_op o = { .kind = EMU_ALL_REDUCE, .send = sendbuff, .recv = recvbuff,
			    .count = count, .dtype = datatype, .redop = op };

	return submit(comm, &o, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
			ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
			cudaStream_t stream)
{
	struct emu_op o = { .kind = EMU_REDUCE, .send = sendbuff, .recv = recvbuff,
			    .count = count, .dtype = datatype, .redop = op, .peer = root };

	return submit(comm, &o, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
			   ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
	struct emu_op o = { .kind = EMU_BROADCAST, .send = sendbuff, .recv = recvbuff,
			    .count = count, .dtype = datatype, .peer = root };

	return submit(comm, &o, stream);
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
		       ncclComm_t comm, cudaStream_t stream)
{
	return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
			   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	struct emu_op o = { .kind = EMU_ALL_GATHER, .send = sendbuff, .recv = recvbuff,
			    .count = sendcount, .dtype = datatype };

	return submit(comm, &o, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
			       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
			       cudaStream_t stream)
{
	struct emu_op o = { .kind = EMU_REDUCE_SCATTER, .send = sendbuff, .recv = recvbuff,
			    .count = recvcount, .dtype = datatype, .redop = op };

	return submit(comm, &o, stream);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream)
{
	struct emu_op o = { .kind = EMU_SEND, .send = sendbuff, .count = count,
			    .dtype = datatype, .peer = peer };

	return submit(comm, &o, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
		      ncclComm_t comm, cudaStream_t stream)
{
	struct emu_op o = { .kind = EMU_RECV, .recv = recvbuff, .count = count,
			    .dtype = datatype, .peer = peer };

	return submit(comm, &o, stream);
}
