/* The Gloo comm plugin's internals, shared by gloo_comm.cc (objects,
 * thread, C boundary) and gloo_ops.cc (the collectives themselves). */
#ifndef WEFT_GLOO_IMPL_H
#define WEFT_GLOO_IMPL_H

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "weft/comm.h"

namespace weft_gloo {

extern const weft_host *host;

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

/* Point-to-point slots live above every collective's. */
constexpr uint64_t kP2PSlotBase = 0xF0ull << 56;

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
};

namespace weft_gloo {

/* Runs one collective on the comm thread. Throws on failure
 * (gloo::Exception, std::exception); returns normally on success. For
 * send/recv it only posts the transfer into w->p2p. */
void run_op(weft_comm *comm, weft_comm_work *w);

}  // namespace weft_gloo

#endif /* WEFT_GLOO_IMPL_H */
