/* The Gloo comm plugin's internals, shared by its files, from the bottom
 * up: gloo_base.cc (the host table, messages, scratch memory),
 * gloo_reduce.cc (the float loops), gloo_shm.cc (shared memory),
 * gloo_ops.cc (the collectives on host memory), gloo_cuda.cc (CUDA buffers
 * staged through them), gloo_thread.cc (the comm thread, issue and wait),
 * gloo_comm.cc (init, the vtable and the entry symbol). */
#ifndef WEFT_GLOO_IMPL_H
#define WEFT_GLOO_IMPL_H

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "weft/cuda_extras.h"
#include "weft/comm.h"

namespace weft_gloo {

extern const weft_host *host; /* gloo_base.cc; set by the entry symbol */

enum class Op {
	all_reduce,
	reduce_scatter,
	all_gather,
	broadcast,
	send,
	recv,
	all_to_all,
	barrier,
};

const char *op_name(Op op);

/* ---- messages (gloo_base.cc) ---- */

/* printf into a std::string (at most 1023 bytes). */
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "comm 'world' rank 1/4". */
std::string who(const weft_comm *c);
/* "all_reduce #3 (f32 x 1024, sum)": the collective of w, for messages. */
std::string describe(const weft_comm_work *w);
/* WEFT_ERR_TIMEOUT for Gloo's deadline messages, else WEFT_ERR_COMM. */
weft_status classify(const char *what);
/* Sets the last error to msg; returns st. */
weft_status fail(weft_status st, const std::string &msg);

/* Scratch memory owned by a communicator, counted under WEFT_MEM_COMM and
 * grown only when a larger collective comes (never shrunk), so steady
 * state training allocates nothing. */
class Scratch {
public:
	~Scratch();
	/* At least `bytes` bytes; throws std::bad_alloc when the host cannot. */
	void *get(size_t bytes);

private:
	void *ptr_ = nullptr;
	size_t size_ = 0;
};

/* Pinned host memory for staging CUDA buffers (gloo_cuda.cc), from the
 * CUDA kernel library's extras, counted under WEFT_MEM_COMM; grown only
 * when a larger transfer comes, freed by the destructor. Only used once
 * cuda_staging_check succeeded. */
class Pinned {
public:
	~Pinned();
	/* At least `bytes` bytes; throws StatusError when they cannot be had. */
	void *get(size_t bytes);

private:
	void *ptr_ = nullptr;
	size_t size_ = 0;
};

/* A device tag as the C caller stored it: a value outside the enum is
 * undefined behaviour to load as the C++ enum, so validation reads the
 * integer. */
inline int32_t device_kind(const weft_comm_device *d)
{
	int32_t v;

	static_assert(sizeof(*d) == sizeof(v), "weft_comm_device is 32 bits in the C ABI");
	memcpy(&v, d, sizeof(v));
	return v;
}

/* A failure that already has a weft_status and a message. */
struct StatusError : std::runtime_error {
	weft_status st;
	StatusError(weft_status s, const std::string &m) : std::runtime_error(m), st(s) {}
};

/* A store failure carried through Gloo's rendezvous as an exception. */
struct StoreError : std::runtime_error {
	weft_status st;
	StoreError(weft_status s, const std::string &m) : std::runtime_error(m), st(s) {}
};

/* Point-to-point slots live above every collective's. */
constexpr uint64_t kP2PSlotBase = 0xF0ull << 56;

/* ---- reductions (gloo_reduce.cc; used by gloo_ops.cc and gloo_shm.cc) ---- */

/* out[i] = a[i] + b[i] and p[i] /= d, vectorized per x86-64 level; the
 * same bits at every level (elementwise IEEE operations). */
void add_f32(float *out, const float *a, const float *b, size_t n);
void divide_f32(float *p, size_t n, float d);

/* out[i] = a[i] op b[i] (avg adds; divide afterwards). out may be a or b. */
template <typename T> void reduce_into(T *out, const T *a, const T *b, size_t n, weft_comm_redop op)
{
	if constexpr (std::is_same_v<T, float>) {
		if (op == WEFT_COMM_SUM || op == WEFT_COMM_AVG) {
			add_f32(out, a, b, n);
			return;
		}
	}
	switch (op) {
	case WEFT_COMM_SUM:
	case WEFT_COMM_AVG:
		for (size_t i = 0; i < n; i++)
			out[i] = a[i] + b[i];
		break;
	case WEFT_COMM_MAX:
		for (size_t i = 0; i < n; i++)
			out[i] = a[i] > b[i] ? a[i] : b[i];
		break;
	case WEFT_COMM_MIN:
		for (size_t i = 0; i < n; i++)
			out[i] = a[i] < b[i] ? a[i] : b[i];
		break;
	case WEFT_COMM_NUM_REDOPS:
		throw std::invalid_argument("unknown reduction");
	}
}

/* p[i] /= size: the last step of an avg. */
template <typename T> void divide(T *p, size_t n, int size)
{
	if constexpr (std::is_same_v<T, float>) {
		divide_f32(p, n, (float)size);
		return;
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (T)(p[i] / (T)size);
}

/* ---- shared memory between the ranks of one host (gloo_shm.cc) ---- */

/* The backend option `shm`: auto (use it when every rank of the group can
 * map rank 0's segment, else tcp), on (an error when they cannot), off. */
enum class ShmMode { auto_, on, off };

/* Groups larger than this stay on tcp. */
constexpr int kMaxRanks = 64;

/* Bytes of one rank's slot, the most a collective moves per piece. */
constexpr size_t kShmSlotBytes = 1u << 20;

/* A communicator's shared segment and the collectives run through it. All
 * calls but setup run on the comm thread; they throw what run_op throws
 * (gloo::IoException on a timeout, a dead rank, an abort, or ranks in
 * different collectives). */
class Shm {
public:
	struct Impl;

	/* Collective over the store of args: rank 0 creates a segment, the others
	 * map it, and all agree whether every rank could. Returns the segment
	 * (counted under WEFT_MEM_COMM), or nullptr when the ranks stay on tcp
	 * (mode off, another host, /dev/shm full: logged at debug level). Throws
	 * StatusError: store failures, and WEFT_ERR_UNSUPPORTED in mode on
	 * naming the rank that could not join and why. `aborted` is read while
	 * waiting; it outlives the segment. */
	static std::unique_ptr<Shm> setup(const weft_comm_init_args *args, ShmMode mode,
					  size_t slot_bytes, const std::atomic<bool> *aborted);
	~Shm();

	/* Held by the comm thread from its start to its end: a peer that finds
	 * it abandoned knows this rank died. */
	void hold_alive();
	void release_alive();
	size_t slot_bytes() const;

	/* The collectives of w, over host memory: the same results as the tcp
	 * algorithms (a reduction sums in rank order). */
	template <typename T>
	void all_reduce(const weft_comm_work *w, const T *in, T *out, size_t n, weft_comm_redop op);
	template <typename T>
	void reduce_scatter(const weft_comm_work *w, const T *in, T *out, size_t n,
			    weft_comm_redop op);
	void all_gather(const weft_comm_work *w, const char *in, char *out, size_t bytes);
	void broadcast(const weft_comm_work *w, char *buf, size_t bytes);
	void barrier(const weft_comm_work *w);

private:
	explicit Shm(std::unique_ptr<Impl> impl);
	std::unique_ptr<Impl> impl_;
};

}  // namespace weft_gloo

/* One queued collective. Two references: the issuer's (dropped by wait)
 * and the comm thread's (dropped when it finished running it). */
struct weft_comm_work {
	weft_comm *comm;
	weft_gloo::Op op;
	weft_comm_buf send;
	weft_comm_buf recv;
	weft_comm_redop redop;
	int32_t root;     /* broadcast root, or p2p peer */
	uint64_t seq;     /* this comm's collective sequence number (1-based) */
	uint64_t p2p_seq; /* per-peer sequence for send/recv slots */
	/* posted p2p transfer, waited on by the issuer */
	std::unique_ptr<gloo::transport::UnboundBuffer> p2p;
	int64_t timeout_ms;
	/* a CUDA-memory recv staged in `pin`: the issuer's wait copies the
	 * bytes there (count 0: none) */
	weft_comm_buf staged_dst;
	weft_gloo::Pinned pin; /* this handle's p2p staging, kept when recycled */

	/* protected by comm->mu */
	bool done;
	bool posted;
	int refs;
	weft_status status;
	std::string message;
};

struct weft_comm {
	std::string name;
	int32_t rank = 0;
	int32_t size = 0;
	int64_t timeout_ms = 0;
	std::shared_ptr<gloo::rendezvous::Context> ctx;

	std::mutex mu;
	std::condition_variable cv_queue; /* the thread waits for work */
	std::condition_variable cv_done;  /* issuers wait for completion */
	std::deque<weft_comm_work *> queue;
	bool stopping = false;
	bool broken = false;
	std::string broken_reason;
	uint64_t next_seq = 0;
	std::vector<uint64_t> send_seq; /* per peer */
	std::vector<uint64_t> recv_seq;
	std::vector<weft_comm_work *> free_works; /* recycled handles */
	std::thread thread;

	/* touched only by the comm thread */
	weft_gloo::Scratch scratch_a;
	weft_gloo::Scratch scratch_b;
	weft_gloo::Pinned pin_send; /* staged CUDA buffers of collectives */
	weft_gloo::Pinned pin_recv;

	/* collectives through shared memory when every rank shares this host;
	 * nullptr: over Gloo's tcp transport */
	std::unique_ptr<weft_gloo::Shm> shm;
	std::atomic<bool> aborted{ false }; /* g_abort: shm waits give up */
};

namespace weft_gloo {

/* ---- the comm thread and its queue (gloo_thread.cc) ---- */

/* Runs queued collectives in order until destroy; the thread's body
 * (holds the shared segment's liveness while it runs). */
void comm_thread(weft_comm *c);
/* Marks w done with st and msg (st breaks the communicator), wakes the
 * waiters and drops the comm thread's reference. Holds c->mu. */
void finish_locked(weft_comm *c, weft_comm_work *w, weft_status st, const std::string &msg);
/* Queues a work like proto; hands back its handle (work_out) or waits for
 * it with the comm's timeout (work_out NULL). */
weft_status issue(weft_comm *c, const weft_comm_work &proto, weft_comm_work **work_out);
/* Waits for w (timeout_ms < 0: the comm's) and drops the issuer's
 * reference; finishes a posted send/recv. */
weft_status wait_impl(weft_comm_work *w, int64_t timeout_ms);

/* Runs one collective on the comm thread. Throws on failure
 * (gloo::Exception, std::exception); returns normally on success. For
 * send/recv it only posts the transfer into w->p2p. */
void run_op(weft_comm *comm, weft_comm_work *w);

/* run_op for buffers in host memory only (gloo_ops.cc). */
void run_host_op(weft_comm *comm, weft_comm_work *w);

/* ---- CUDA buffers, staged through pinned host memory (gloo_cuda.cc) ---- */

/* Whether a CUDA buffer can be staged here: finds the loaded CUDA kernel
 * library's staging copies once. `who` starts the message ("comm 'world'
 * rank 0/2: all_reduce: send"). Errors: WEFT_ERR_UNSUPPORTED saying why
 * (the library is not loaded, or too old) and what to do. Issuer thread. */
weft_status cuda_staging_check(const char *who, const weft_comm_buf *b);

/* run_op for a work with a CUDA buffer: copies it to pinned host memory
 * (after the device's pending work), runs the collective there, and copies
 * the result back before returning; a recv's copy back is left to
 * finish_staged_recv. Comm thread. Throws StatusError (CUDA failures) or
 * what run_host_op throws. */
void run_staged(weft_comm *comm, weft_comm_work *w);

/* Copies a finished staged recv (w->staged_dst.count > 0) to the device
 * and clears staged_dst. Issuer thread, in wait. Throws StatusError. */
void finish_staged_recv(weft_comm_work *w);

}  // namespace weft_gloo

#endif /* WEFT_GLOO_IMPL_H */
