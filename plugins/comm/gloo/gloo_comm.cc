/* The Gloo comm plugin: a C++ shim over Debian's libgloo (tcp transport)
 * exposing weft_comm_ops; between ranks of one host its collectives go
 * through shared memory (gloo_shm.cc; backend option `shm`). Every entry
 * point catches every exception and turns it into a weft_status with a
 * message; nothing is thrown into C.
 *
 * Each communicator owns one comm thread that runs its collectives in
 * issue order (FIFO). Issuers get a work handle and wait on it with a
 * deadline. The first failure breaks the communicator: queued and later
 * collectives fail fast, so no rank waits on a peer that already gave up.
 */
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <stdexcept>

#include <gloo/transport/tcp/device.h>

#include "gloo_impl.h"

namespace weft_gloo {

const weft_host *host;

const char *op_name(Op op)
{
	switch (op) {
	case Op::all_reduce: return "all_reduce";
	case Op::reduce_scatter: return "reduce_scatter";
	case Op::all_gather: return "all_gather";
	case Op::broadcast: return "broadcast";
	case Op::send: return "send";
	case Op::recv: return "recv";
	case Op::all_to_all: return "all_to_all";
	case Op::barrier: return "barrier";
	}
	return "?";
}

Scratch::~Scratch()
{
	if (ptr_)
		host->mem_free(ptr_);
}

void *Scratch::get(size_t bytes)
{
	if (bytes <= size_)
		return ptr_;
	void *p = host->mem_alloc(WEFT_MEM_COMM, bytes);
	if (!p)
		throw std::bad_alloc();
	if (ptr_)
		host->mem_free(ptr_);
	ptr_ = p;
	size_ = bytes;
	return ptr_;
}

namespace {

using ms = std::chrono::milliseconds;

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return buf;
}

/* A store failure carried through Gloo's rendezvous as an exception. */
struct StoreError : std::runtime_error {
	weft_status st;
	StoreError(weft_status s, const std::string &m) : std::runtime_error(m), st(s) {}
};

/* Gloo's rendezvous store interface over weft's store vtable, with every
 * key under "<comm name>/". */
class StoreAdapter : public gloo::rendezvous::Store {
public:
	StoreAdapter(const weft_store *vt, const std::string &prefix, int64_t timeout_ms)
		: vt_(vt), prefix_(prefix + "/"), timeout_ms_(timeout_ms)
	{
	}

	void set(const std::string &key, const std::vector<char> &data) override
	{
		std::string k = prefix_ + key;
		weft_status st = vt_->set(vt_->ctx, k.c_str(), data.data(), data.size());

		if (st)
			throw StoreError(st, host->error_last());
	}

	std::vector<char> get(const std::string &key) override
	{
		std::string k = prefix_ + key;
		void *v = nullptr;
		size_t len = 0;
		weft_status st = vt_->get(vt_->ctx, k.c_str(), timeout_ms_, &v, &len);

		if (st)
			throw StoreError(st, host->error_last());
		std::vector<char> out((char *)v, (char *)v + len);
		vt_->release(vt_->ctx, v);
		return out;
	}

	void wait(const std::vector<std::string> &keys) override
	{
		wait(keys, ms(timeout_ms_));
	}

	void wait(const std::vector<std::string> &keys, const ms &timeout) override
	{
		std::vector<std::string> full;
		std::vector<const char *> ptrs;

		for (const auto &k : keys)
			full.push_back(prefix_ + k);
		for (const auto &k : full)
			ptrs.push_back(k.c_str());
		weft_status st = vt_->wait(vt_->ctx, ptrs.data(), ptrs.size(),
					   timeout.count() > 0 ? timeout.count() : timeout_ms_);
		if (st == WEFT_ERR_TIMEOUT)
			throw StoreError(st, missing(keys));
		if (st)
			throw StoreError(st, host->error_last());
	}

private:
	/* Which of keys (rank numbers in Gloo's rendezvous) are absent. */
	std::string missing(const std::vector<std::string> &keys)
	{
		std::string list;

		for (const auto &k : keys) {
			std::string fk = prefix_ + k;
			void *v = nullptr;
			size_t len;

			if (vt_->get(vt_->ctx, fk.c_str(), 0, &v, &len) == WEFT_OK) {
				vt_->release(vt_->ctx, v);
				continue;
			}
			list += (list.empty() ? "" : ", ") + k;
		}
		return "these ranks did not arrive at the rendezvous: " + list +
		       " (are they running? did they fail to start? see their logs)";
	}

	const weft_store *vt_;
	std::string prefix_;
	int64_t timeout_ms_;
};

/* One tcp device (and its event-loop thread) per bind address, shared by
 * every communicator of the process. */
std::shared_ptr<gloo::transport::Device> device_for(const char *bind_host)
{
	static std::mutex mu;
	static std::map<std::string, std::weak_ptr<gloo::transport::Device>> cache;
	const char *iface = getenv("GLOO_SOCKET_IFNAME");
	std::string key = bind_host ? std::string("host:") + bind_host :
			  iface ? std::string("iface:") + iface : std::string("default");
	std::lock_guard<std::mutex> g(mu);
	auto dev = cache[key].lock();

	if (!dev) {
		gloo::transport::tcp::attr attr;

		if (bind_host)
			attr.hostname = bind_host;
		else if (iface)
			attr.iface = iface;
		dev = gloo::transport::tcp::CreateDevice(attr);
		cache[key] = dev;
	}
	return dev;
}

std::string who(const weft_comm *c)
{
	return format("comm '%s' rank %d/%d", c->name.c_str(), c->rank, c->size);
}

std::string describe(const weft_comm_work *w)
{
	if (w->op == Op::send || w->op == Op::recv)
		return format("%s %s rank %d (%s x %lld)", op_name(w->op),
			      w->op == Op::send ? "to" : "from", w->root,
			      weft_comm_dtype_name(w->recv.dtype), (long long)w->recv.count);
	if (w->op == Op::barrier)
		return format("barrier #%llu", (unsigned long long)w->seq);
	if (w->op == Op::all_reduce || w->op == Op::reduce_scatter)
		return format("%s #%llu (%s x %lld, %s)", op_name(w->op),
			      (unsigned long long)w->seq, weft_comm_dtype_name(w->recv.dtype),
			      (long long)w->recv.count, weft_comm_redop_name(w->redop));
	return format("%s #%llu (%s x %lld)", op_name(w->op), (unsigned long long)w->seq,
		      weft_comm_dtype_name(w->recv.dtype), (long long)w->recv.count);
}

/* Gloo reports deadlines as "Timed out ..." IoExceptions. */
weft_status classify(const char *what)
{
	return (strstr(what, "Timed out") || strstr(what, "timed out") ||
		strstr(what, "deadline")) ? WEFT_ERR_TIMEOUT : WEFT_ERR_COMM;
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

/* Reads the backend options (trainer.comm's mapping): `shm`. */
weft_status read_options(const weft_comm_init_args *a, weft_gloo::ShmMode *shm)
{
	static const char *const modes[] = { "auto", "on", "off", nullptr };
	const weft_cfg *opts = a->struct_size >= offsetof(weft_comm_init_args, options) +
			       sizeof(a->options) ? a->options : nullptr;
	int m = 0;
	weft_status st = host->cfg_choice(opts, "shm", modes, "auto", &m);

	if (st)
		return st;
	*shm = m == 1 ? ShmMode::on : m == 2 ? ShmMode::off : ShmMode::auto_;
	return WEFT_OK;
}

weft_status fail(weft_status st, const std::string &msg)
{
	return host->error_set(st, "%s", msg.c_str());
}

weft_status check_buf(const weft_comm *c, const char *op, const char *which,
		      const weft_comm_buf *b)
{
	if (!b)
		return fail(WEFT_ERR_INVALID_ARG, who(c) + ": " + op + ": " + which + " is NULL");
	if (b->count < 0)
		return fail(WEFT_ERR_INVALID_ARG, format("%s: %s: %s count %lld is negative",
							 who(c).c_str(), op, which,
							 (long long)b->count));
	if (weft_comm_dtype_size(b->dtype) == 0)
		return fail(WEFT_ERR_DTYPE, format("%s: %s: %s has unknown dtype %d",
						   who(c).c_str(), op, which, (int)b->dtype));
	int32_t kind = device_kind(&b->device);
	if (kind != WEFT_COMM_DEVICE_CPU && kind != WEFT_COMM_DEVICE_CUDA)
		return fail(WEFT_ERR_UNSUPPORTED,
			    format("%s: %s: %s is on device kind %d, which the gloo backend does "
				   "not know: it moves CPU and CUDA buffers", who(c).c_str(), op,
				   which, (int)kind));
	if (b->count > 0 && !b->data)
		return fail(WEFT_ERR_INVALID_ARG, format("%s: %s: %s has %lld elements but no "
							 "data pointer", who(c).c_str(), op, which,
							 (long long)b->count));
	/* CUDA memory is staged through pinned host memory (gloo_cuda.cc) */
	if (b->device == WEFT_COMM_DEVICE_CUDA && b->count > 0)
		return cuda_staging_check((who(c) + ": " + op + ": " + which).c_str(), b);
	return WEFT_OK;
}

weft_status check_pair(const weft_comm *c, const char *op, const weft_comm_buf *s,
		       const weft_comm_buf *r, int64_t send_mul, int64_t recv_mul)
{
	weft_status st;

	if ((st = check_buf(c, op, "send", s)) || (st = check_buf(c, op, "recv", r)))
		return st;
	if (s->dtype != r->dtype)
		return fail(WEFT_ERR_DTYPE, format("%s: %s: send is %s but recv is %s; both must "
						   "have the same dtype", who(c).c_str(), op,
						   weft_comm_dtype_name(s->dtype),
						   weft_comm_dtype_name(r->dtype)));
	if (s->count * send_mul != r->count * recv_mul)
		return fail(WEFT_ERR_SHAPE,
			    format("%s: %s: send has %lld elements and recv %lld; with %d ranks "
				   "%s", who(c).c_str(), op, (long long)s->count,
				   (long long)r->count, c->size,
				   send_mul == recv_mul ? "they must be equal" :
				   send_mul > recv_mul ? "send must be size x recv" :
							 "recv must be size x send"));
	return WEFT_OK;
}

weft_status check_redop(const weft_comm *c, const char *op, weft_comm_redop redop)
{
	if ((unsigned)redop >= WEFT_COMM_NUM_REDOPS)
		return fail(WEFT_ERR_INVALID_ARG, format("%s: %s: unknown reduction %d (use sum, "
							 "avg, max or min)", who(c).c_str(), op,
							 (int)redop));
	return WEFT_OK;
}

weft_status check_rank(const weft_comm *c, const char *op, const char *what, int32_t r)
{
	if (r < 0 || r >= c->size)
		return fail(WEFT_ERR_INVALID_ARG, format("%s: %s: %s %d is not a rank of this "
							 "communicator (0..%d)", who(c).c_str(), op,
							 what, r, c->size - 1));
	return WEFT_OK;
}

/* Queues a prepared work; waits for it when work_out is NULL. */
weft_status wait_impl(weft_comm_work *w, int64_t timeout_ms);

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

/* ---- the vtable ------------------------------------------------------ */

weft_status g_init(const weft_comm_init_args *a, weft_comm **out)
{
	if (!a || !out || !a->store)
		return host->error_set(WEFT_ERR_INVALID_ARG, "gloo: init needs args, a store and "
				       "an output pointer");
	if (a->size < 1 || a->rank < 0 || a->rank >= a->size)
		return host->error_set(WEFT_ERR_INVALID_ARG, "gloo: rank %d is not in a group of "
				       "size %d", a->rank, a->size);
	if (a->timeout_ms <= 0)
		return host->error_set(WEFT_ERR_INVALID_ARG, "gloo: the comm timeout must be "
				       "positive, got %lld ms", (long long)a->timeout_ms);
	/* CUDA buffers are staged through pinned host memory (gloo_cuda.cc);
	 * whether that can work is checked with the first CUDA buffer, since
	 * the CUDA kernel library may be loaded only after init */
	int32_t kind = device_kind(&a->device);
	if (kind != WEFT_COMM_DEVICE_CPU && kind != WEFT_COMM_DEVICE_CUDA)
		return host->error_set(WEFT_ERR_UNSUPPORTED, "gloo: comm '%s' rank %d/%d: device "
				       "kind %d is unknown; gloo moves CPU and CUDA buffers",
				       a->name ? a->name : "world", a->rank, a->size, (int)kind);
	weft_gloo::ShmMode shm_mode;
	weft_status st = read_options(a, &shm_mode);
	if (st)
		return st;
	weft_comm *c = nullptr;
	try {
		c = new weft_comm();
		c->name = a->name ? a->name : "world";
		c->rank = a->rank;
		c->size = a->size;
		c->timeout_ms = a->timeout_ms;
		c->send_seq.assign((size_t)a->size, 0);
		c->recv_seq.assign((size_t)a->size, 0);
		c->ctx = std::make_shared<gloo::rendezvous::Context>(a->rank, a->size);
		c->ctx->setTimeout(ms(a->timeout_ms));
		if (a->size > 1) {
			auto dev = device_for(a->bind_host);
			StoreAdapter store(a->store, c->name, a->timeout_ms);
			c->ctx->connectFullMesh(store, dev);
			c->shm = Shm::setup(a, shm_mode, kShmSlotBytes, &c->aborted);
		}
		c->thread = std::thread(comm_thread, c);
	} catch (const StatusError &e) {
		delete c;
		return host->error_set(e.st, "gloo: comm '%s' rank %d/%d: %s",
				       a->name ? a->name : "world", a->rank, a->size, e.what());
	} catch (const StoreError &e) {
		delete c;
		return host->error_set(e.st, "gloo: comm '%s' rank %d/%d could not meet its peers: "
				       "%s", a->name ? a->name : "world", a->rank, a->size, e.what());
	} catch (const std::exception &e) {
		delete c;
		return host->error_set(classify(e.what()), "gloo: comm '%s' rank %d/%d could not "
				       "connect: %s", a->name ? a->name : "world", a->rank, a->size,
				       e.what());
	} catch (...) {
		delete c;
		return host->error_set(WEFT_ERR_INTERNAL, "gloo: unknown C++ exception in init");
	}
	host->log(WEFT_LOG_DEBUG, "gloo: comm '%s' rank %d/%d connected", c->name.c_str(),
		  c->rank, c->size);
	*out = c;
	return WEFT_OK;
}

#define GUARD(expr)                                                                       \
	try {                                                                             \
		return (expr);                                                            \
	} catch (const std::exception &e) {                                               \
		return host->error_set(WEFT_ERR_INTERNAL, "gloo: %s", e.what());          \
	} catch (...) {                                                                   \
		return host->error_set(WEFT_ERR_INTERNAL, "gloo: unknown C++ exception"); \
	}

weft_status do_all_reduce(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			  weft_comm_redop op, weft_comm_work **work)
{
	weft_status st;

	if ((st = check_pair(c, "all_reduce", s, r, 1, 1)) || (st = check_redop(c, "all_reduce", op)))
		return st;
	weft_comm_work p{};
	p.op = Op::all_reduce;
	p.send = *s;
	p.recv = *r;
	p.redop = op;
	return issue(c, p, work);
}

weft_status g_all_reduce(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			 weft_comm_redop op, weft_comm_work **work)
{
	GUARD(do_all_reduce(c, s, r, op, work));
}

weft_status do_reduce_scatter(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			      weft_comm_redop op, weft_comm_work **work)
{
	weft_status st;

	if ((st = check_pair(c, "reduce_scatter", s, r, 1, c->size)) ||
	    (st = check_redop(c, "reduce_scatter", op)))
		return st;
	weft_comm_work p{};
	p.op = Op::reduce_scatter;
	p.send = *s;
	p.recv = *r;
	p.redop = op;
	return issue(c, p, work);
}

weft_status g_reduce_scatter(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			     weft_comm_redop op, weft_comm_work **work)
{
	GUARD(do_reduce_scatter(c, s, r, op, work));
}

weft_status do_all_gather(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			  weft_comm_work **work)
{
	weft_status st;

	if ((st = check_pair(c, "all_gather", s, r, c->size, 1)))
		return st;
	weft_comm_work p{};
	p.op = Op::all_gather;
	p.send = *s;
	p.recv = *r;
	return issue(c, p, work);
}

weft_status g_all_gather(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			 weft_comm_work **work)
{
	GUARD(do_all_gather(c, s, r, work));
}

weft_status do_broadcast(weft_comm *c, const weft_comm_buf *b, int32_t root,
			 weft_comm_work **work)
{
	weft_status st;

	if ((st = check_buf(c, "broadcast", "buf", b)) ||
	    (st = check_rank(c, "broadcast", "root", root)))
		return st;
	weft_comm_work p{};
	p.op = Op::broadcast;
	p.send = *b;
	p.recv = *b;
	p.root = root;
	return issue(c, p, work);
}

weft_status g_broadcast(weft_comm *c, const weft_comm_buf *b, int32_t root, weft_comm_work **work)
{
	GUARD(do_broadcast(c, b, root, work));
}

weft_status do_p2p(weft_comm *c, Op op, const weft_comm_buf *b, int32_t peer,
		   weft_comm_work **work)
{
	weft_status st;
	const char *name = op_name(op);

	if ((st = check_buf(c, name, "buf", b)) || (st = check_rank(c, name, "peer", peer)))
		return st;
	if (peer == c->rank)
		return fail(WEFT_ERR_INVALID_ARG, who(c) + ": " + name + ": peer is this rank "
			    "itself; copy the buffer instead");
	weft_comm_work p{};
	p.op = op;
	p.send = *b;
	p.recv = *b;
	p.root = peer;
	return issue(c, p, work);
}

weft_status g_send(weft_comm *c, const weft_comm_buf *b, int32_t peer, weft_comm_work **work)
{
	GUARD(do_p2p(c, Op::send, b, peer, work));
}

weft_status g_recv(weft_comm *c, const weft_comm_buf *b, int32_t peer, weft_comm_work **work)
{
	GUARD(do_p2p(c, Op::recv, b, peer, work));
}

weft_status do_all_to_all(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			  weft_comm_work **work)
{
	weft_status st;

	if ((st = check_pair(c, "all_to_all", s, r, 1, 1)))
		return st;
	if (s->count % c->size)
		return fail(WEFT_ERR_SHAPE, format("%s: all_to_all: %lld elements do not split "
						   "into %d equal blocks", who(c).c_str(),
						   (long long)s->count, c->size));
	if (s->count && s->data == r->data)
		return fail(WEFT_ERR_INVALID_ARG, who(c) + ": all_to_all cannot run in place; "
			    "give it a separate recv buffer");
	weft_comm_work p{};
	p.op = Op::all_to_all;
	p.send = *s;
	p.recv = *r;
	return issue(c, p, work);
}

weft_status g_all_to_all(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			 weft_comm_work **work)
{
	GUARD(do_all_to_all(c, s, r, work));
}

weft_status g_barrier(weft_comm *c, weft_comm_work **work)
{
	weft_comm_work p{};
	p.op = Op::barrier;
	p.send.dtype = WEFT_COMM_F32;
	p.recv.dtype = WEFT_COMM_F32;
	GUARD(issue(c, p, work));
}

weft_status g_wait(weft_comm_work *w, int64_t timeout_ms)
{
	if (!w)
		return host->error_set(WEFT_ERR_INVALID_ARG, "gloo: wait on a NULL work handle");
	GUARD(wait_impl(w, timeout_ms));
}

weft_status g_test(weft_comm_work *w, int *done)
{
	if (!w || !done)
		return host->error_set(WEFT_ERR_INVALID_ARG, "gloo: test needs a handle and an "
				       "output");
	std::lock_guard<std::mutex> g(w->comm->mu);
	*done = w->done;
	return WEFT_OK;
}

void g_abort(weft_comm *c)
{
	if (!c)
		return;
	try {
		std::lock_guard<std::mutex> g(c->mu);

		if (!c->broken) {
			c->broken = true;
			c->broken_reason = who(c) + " was aborted";
		}
		c->aborted.store(true);
		while (!c->queue.empty()) {
			weft_comm_work *w = c->queue.front();

			c->queue.pop_front();
			finish_locked(c, w, WEFT_ERR_CANCELLED,
				      who(c) + ": " + describe(w) + " cancelled: the communicator "
				      "was aborted");
		}
	} catch (...) {
		/* abort never fails; the flag above is what matters */
	}
}

void g_destroy(weft_comm *c)
{
	if (!c)
		return;
	try {
		{
			std::lock_guard<std::mutex> g(c->mu);
			c->stopping = true;
			c->cv_queue.notify_all();
		}
		if (c->thread.joinable())
			c->thread.join();
		for (weft_comm_work *w : c->free_works)
			delete w;
		c->free_works.clear();
		c->ctx.reset();
		delete c;
	} catch (...) {
		host->log(WEFT_LOG_ERROR, "gloo: exception while destroying a communicator");
	}
}

int32_t g_rank(const weft_comm *c)
{
	return c->rank;
}

int32_t g_size(const weft_comm *c)
{
	return c->size;
}

const weft_comm_ops gloo_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_comm_ops, "gloo"),
	.init = g_init,
	.split = nullptr,
	.all_reduce = g_all_reduce,
	.reduce_scatter = g_reduce_scatter,
	.all_gather = g_all_gather,
	.broadcast = g_broadcast,
	.send = g_send,
	.recv = g_recv,
	.all_to_all = g_all_to_all,
	.barrier = g_barrier,
	.wait = g_wait,
	.test = g_test,
	.abort = g_abort,
	.destroy = g_destroy,
	.rank = g_rank,
	.size = g_size,
};

const weft_plugin_entry_item items[] = {
	{ WEFT_PLUGIN_COMM, &gloo_ops },
};

const weft_plugin_desc desc = {
	WEFT_PLUGIN_HEAD(weft_plugin_desc, "gloo"),
	sizeof(items) / sizeof(items[0]),
	items,
};

}  // namespace
}  // namespace weft_gloo

extern "C" {
WEFT_PLUGIN_ENTRY(h)
{
	weft_gloo::host = h;
	return &weft_gloo::desc;
}
}
