/* The Gloo comm plugin: a C++ shim over Debian's libgloo (tcp transport)
 * exposing weft_comm_ops; between ranks of one host its collectives go
 * through shared memory (gloo_shm.cc; backend option `shm`). Every entry
 * point catches every exception and turns it into a weft_status with a
 * message; nothing is thrown into C. This file is the top of the plugin:
 * init (the rendezvous through the store), the argument checks, the
 * vtable and the entry symbol (gloo_impl.h lists the files below it).
 *
 * Each communicator owns one comm thread that runs its collectives in
 * issue order (FIFO; gloo_thread.cc). Issuers get a work handle and wait on
 * it with a deadline. The first failure breaks the communicator: queued
 * and later collectives fail fast, so no rank waits on a peer that already
 * gave up.
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

namespace {

using ms = std::chrono::milliseconds;

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

WEFT_PLUGIN_NAMES("comm:gloo");

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
