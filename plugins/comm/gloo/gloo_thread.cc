/* A communicator's comm thread and its queue: issue puts a work handle
 * on the queue, the thread runs the collectives in issue order (run_op:
 * host buffers through gloo_ops.cc, CUDA buffers staged through
 * gloo_cuda.cc), and wait blocks on a handle with a deadline. The first
 * failure breaks the communicator: queued and later collectives fail
 * fast. */
#include <chrono>
#include <cstring>
#include <new>
#include <stdexcept>

#include "gloo_impl.h"

namespace weft_gloo {

namespace {

using ms = std::chrono::milliseconds;

}  // namespace

void run_op(weft_comm *c, weft_comm_work *w)
{
	if ((w->send.device == WEFT_COMM_DEVICE_CUDA && w->send.count > 0) ||
	    (w->recv.device == WEFT_COMM_DEVICE_CUDA && w->recv.count > 0))
		return run_staged(c, w);
	run_host_op(c, w);
}

/* Drops one reference; the last one recycles the work. Holds c->mu. */
void unref_locked(weft_comm *c, weft_comm_work *w)
{
	if (--w->refs == 0) {
		w->p2p.reset();
		w->message.clear();
		c->free_works.push_back(w);
	}
}

void finish_locked(weft_comm *c, weft_comm_work *w, weft_status st, const std::string &msg)
{
	w->status = st;
	w->message = msg;
	w->done = true;
	if (st && !c->broken) {
		c->broken = true;
		c->broken_reason = msg;
	}
	c->cv_done.notify_all();
	unref_locked(c, w);
}

/* Runs queued collectives in order until destroy. */
void comm_loop(weft_comm *c)
{
	std::unique_lock<std::mutex> lk(c->mu);

	for (;;) {
		c->cv_queue.wait(lk, [c] { return c->stopping || !c->queue.empty(); });
		if (c->queue.empty())
			break;
		weft_comm_work *w = c->queue.front();
		c->queue.pop_front();
		if (c->broken) {
			finish_locked(c, w, WEFT_ERR_COMM,
				      who(c) + ": " + describe(w) + " was not run: the communicator "
				      "broke earlier (" + c->broken_reason + ")");
			continue;
		}
		lk.unlock();
		weft_status st = WEFT_OK;
		std::string msg;
		bool peer_advice = true; /* a staging failure is this rank's own */
		try {
			run_op(c, w);
		} catch (const StoreError &e) {
			st = e.st;
			msg = e.what();
		} catch (const StatusError &e) {
			st = e.st;
			msg = e.what();
			peer_advice = false;
		} catch (const std::bad_alloc &) {
			st = WEFT_ERR_NOMEM;
			msg = "out of memory for scratch buffers";
		} catch (const std::exception &e) {
			st = classify(e.what());
			msg = e.what();
		} catch (...) {
			st = WEFT_ERR_INTERNAL;
			msg = "unknown C++ exception";
		}
		if (st)
			msg = who(c) + ": " + describe(w) + " failed: " + msg +
			      (!peer_advice ? "" : st == WEFT_ERR_TIMEOUT ?
				       " (a peer is stuck or behind; raise trainer.comm_timeout "
				       "if it is merely slow)" :
				       " (a peer has probably exited; see its log)");
		lk.lock();
		finish_locked(c, w, st, msg);
	}
}

void comm_thread(weft_comm *c)
{
	if (c->shm)
		c->shm->hold_alive();
	comm_loop(c);
	if (c->shm)
		c->shm->release_alive();
}

/* Queues a prepared work; waits for it when work_out is NULL. */
weft_status issue(weft_comm *c, const weft_comm_work &proto, weft_comm_work **work_out)
{
	weft_comm_work *w;
	{
		std::lock_guard<std::mutex> g(c->mu);

		if (c->broken)
			return fail(WEFT_ERR_COMM, who(c) + ": " + op_name(proto.op) +
				    " refused: the communicator broke earlier (" +
				    c->broken_reason + ")");
		if (c->free_works.empty()) {
			w = new weft_comm_work();
		} else {
			w = c->free_works.back();
			c->free_works.pop_back();
		}
		w->comm = c;
		w->op = proto.op;
		w->send = proto.send;
		w->recv = proto.recv;
		w->redop = proto.redop;
		w->root = proto.root;
		w->seq = 0;
		w->p2p_seq = 0;
		w->staged_dst = weft_comm_buf{};
		if (proto.op == Op::send)
			w->p2p_seq = ++c->send_seq[(size_t)proto.root];
		else if (proto.op == Op::recv)
			w->p2p_seq = ++c->recv_seq[(size_t)proto.root];
		else
			w->seq = ++c->next_seq;
		w->done = false;
		w->status = WEFT_OK;
		w->refs = 2;
		c->queue.push_back(w);
		c->cv_queue.notify_one();
	}
	if (work_out) {
		*work_out = w;
		return WEFT_OK;
	}
	return wait_impl(w, -1);
}

weft_status wait_impl(weft_comm_work *w, int64_t timeout_ms)
{
	weft_comm *c = w->comm;
	auto deadline = std::chrono::steady_clock::now() +
			ms(timeout_ms < 0 ? c->timeout_ms : timeout_ms);
	std::unique_lock<std::mutex> lk(c->mu);

	if (!c->cv_done.wait_until(lk, deadline, [w] { return w->done; })) {
		std::string msg = who(c) + ": " + describe(w) +
				  format(" did not finish within %lld ms; a peer is stuck, "
					 "behind, or called a different collective",
					 (long long)(timeout_ms < 0 ? c->timeout_ms : timeout_ms));
		if (!c->broken) {
			c->broken = true;
			c->broken_reason = msg;
		}
		unref_locked(c, w);
		return fail(WEFT_ERR_TIMEOUT, msg);
	}
	weft_status st = w->status;
	std::string msg = w->message;
	if (!st && w->p2p) {
		/* the transfer was posted on the comm thread; finish it here */
		lk.unlock();
		try {
			auto left = std::chrono::duration_cast<ms>(deadline -
								   std::chrono::steady_clock::now());
			if (left.count() <= 0)
				left = ms(1);
			bool ok = w->op == Op::send ? w->p2p->waitSend(left) : w->p2p->waitRecv(left);
			if (!ok) {
				st = WEFT_ERR_CANCELLED;
				msg = who(c) + ": " + describe(w) + " was aborted";
			} else if (w->staged_dst.count > 0) {
				finish_staged_recv(w); /* a CUDA recv: to the device now */
			}
		} catch (const StatusError &e) {
			st = e.st;
			msg = who(c) + ": " + describe(w) + " failed: " + e.what();
		} catch (const std::exception &e) {
			st = classify(e.what());
			msg = who(c) + ": " + describe(w) + " failed: " + e.what();
		}
		lk.lock();
		if (st && !c->broken) {
			c->broken = true;
			c->broken_reason = msg;
		}
	}
	unref_locked(c, w);
	lk.unlock();
	if (st)
		return fail(st, msg);
	return WEFT_OK;
}

}  // namespace weft_gloo
