/* emu_stream.cpp - streams and events that defer work, as a GPU does.
 *
 * Every stream operation (kernel, async copy or memset, GEMM, host
 * function, event record, event wait) becomes a node of a dependency graph
 * and runs only when something forces it: a stream, event or device
 * synchronize, an event query, a host-synchronous copy or memset. Forcing
 * a node runs exactly the nodes CUDA orders before it, nothing else:
 *   - the previous operation of the same stream;
 *   - the legacy default stream (0, cudaStreamLegacy) waits for all
 *     earlier work of every blocking stream, and every blocking stream's
 *     operation waits for all earlier work of the legacy stream;
 *     cudaStreamNonBlocking streams take part in neither;
 *   - cudaStreamPerThread is a blocking stream of the calling thread;
 *   - cudaStreamWaitEvent(s, e) makes s's next work wait for the work e
 *     captured at its last cudaEventRecord.
 * So work on stream B that reads stream A's output without an event wait
 * runs before A's producer when B is synchronized, and reads stale data.
 *
 * Host functions (cudaLaunchHostFunc) run in stream order with device
 * memory open to plain loads and stores. Inside one, cudaMemcpy,
 * cudaMemcpyAsync, cudaMemset, cudaMemsetAsync run at once, synchronously,
 * on any stream, and cudaStreamSynchronize / cudaDeviceSynchronize run
 * what they can without waiting for the host function itself (and what
 * comes after it). A host function may block; other threads' device work
 * goes on meanwhile.
 *
 * One piece of device work runs at a time in the process (`device`); the
 * thread that forces a node runs it. */
#include "emu_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_set>
#include <vector>

namespace {

enum op_state { OP_PENDING, OP_RUNNING, OP_DONE };

struct op {
	const char *what = "";
	std::function<void()> work; /* empty for event records and waits */
	int host_fn = 0;
	std::vector<std::shared_ptr<op>> deps; /* dropped when done */
	op_state state = OP_PENDING;
	std::thread::id runner;
	int stream_id = 0;
	int dev = 0; /* the device whose memory the work may touch */
};
typedef std::shared_ptr<op> op_ref;

enum stream_kind { ST_LEGACY, ST_BLOCKING, ST_NONBLOCKING };

struct stream {
	stream_kind kind = ST_BLOCKING;
	unsigned flags = 0;
	op_ref last;
	int destroyed = 0;
	int id = 0;
	int dev = 0; /* current at creation; the legacy and per-thread streams
		      * take the enqueuing thread's */
};

struct event {
	op_ref at; /* the marker of the last record; null before one */
	unsigned flags = 0;
};

std::mutex g_mu; /* the graph, the stream and event sets */
std::condition_variable g_cv; /* a node finished */
std::recursive_mutex device; /* one piece of device work at a time */
/* the legacy default stream */
stream legacy_stream(void)
{
	stream s;

	s.kind = ST_LEGACY;
	s.id = 0;
	return s;
}
stream legacy = legacy_stream();
std::set<stream *> streams; /* created and per-thread streams, destroyed ones until drained */
std::set<event *> events;
int next_stream_id = 3;
thread_local int host_fn_depth;

/* The per-thread default stream of a thread: blocking, gone with the thread. */
struct per_thread_stream {
	stream *s = nullptr;
	~per_thread_stream()
	{
		std::lock_guard<std::mutex> g(g_mu);
		if (s)
			s->destroyed = 1;
	}
};
thread_local per_thread_stream per_thread;

int done(const op_ref &o)
{
	return !o || o->state == OP_DONE;
}

/* Drops destroyed streams whose work is done. */
void reap_locked(void)
{
	for (auto it = streams.begin(); it != streams.end();) {
		if ((*it)->destroyed && done((*it)->last)) {
			delete *it;
			it = streams.erase(it);
		} else {
			++it;
		}
	}
}

/* The stream behind a handle, or null for an unknown or destroyed one. */
stream *resolve_locked(cudaStream_t h)
{
	if (h == 0 || h == cudaStreamLegacy)
		return &legacy;
	if (h == cudaStreamPerThread) {
		if (!per_thread.s) {
			per_thread.s = new stream();
			per_thread.s->kind = ST_BLOCKING;
			per_thread.s->id = next_stream_id++;
			streams.insert(per_thread.s);
		}
		return per_thread.s;
	}
	stream *s = (stream *)h;
	if (!streams.count(s) || s->destroyed)
		return nullptr;
	return s;
}

/* A new node at the end of stream s, after what CUDA orders it after
 * (the top of this file) and after `extra`. */
op_ref append_locked(stream *s, const char *what, std::function<void()> work, int host_fn,
		     const op_ref &extra)
{
	op_ref o = std::make_shared<op>();

	o->what = what;
	o->work = std::move(work);
	o->host_fn = host_fn;
	o->stream_id = s->id;
	o->dev = s->kind == ST_LEGACY || s == per_thread.s ? emu_current_device() : s->dev;
	if (!done(s->last))
		o->deps.push_back(s->last);
	if (s->kind == ST_LEGACY) {
		for (stream *t : streams)
			if (t->kind == ST_BLOCKING && !done(t->last))
				o->deps.push_back(t->last);
	} else if (s->kind == ST_BLOCKING && !done(legacy.last)) {
		o->deps.push_back(legacy.last);
	}
	if (!done(extra))
		o->deps.push_back(extra);
	s->last = o;
	emu_deferred++;
	if (emu_tracing())
		fprintf(stderr, "emu: queue %s on stream %d (%zu dependencies)\n", what, s->id,
			o->deps.size());
	return o;
}

void execute(const op_ref &o)
{
	if (emu_tracing())
		fprintf(stderr, "emu: run %s (stream %d)\n", o->what, o->stream_id);
	if (!o->work)
		return;
	if (o->host_fn) {
		host_fn_depth++;
		emu_dev_enter(o->dev);
		o->work();
		emu_dev_exit(o->dev);
		host_fn_depth--;
		return;
	}
	std::lock_guard<std::recursive_mutex> g(device);
	emu_dev_enter(o->dev);
	o->work();
	emu_dev_exit(o->dev);
}

/* Runs the pending nodes `target` depends on and then target, in an order
 * that respects every dependency. A node this thread is running (the host
 * function that called us) and whatever depends on it are left pending:
 * 0 is returned when target is among them. Waits for nodes another thread
 * runs. */
int force_locked(const op_ref &target, std::unique_lock<std::mutex> &lk)
{
	std::vector<op_ref> order;
	std::unordered_set<op *> seen;
	std::vector<std::pair<op_ref, size_t>> stack;
	std::unordered_set<op *> blocked;
	std::thread::id me = std::this_thread::get_id();

	if (done(target))
		return 1;
	/* iterative post-order walk: stream chains are long */
	stack.emplace_back(target, 0);
	seen.insert(target.get());
	while (!stack.empty()) {
		auto &top = stack.back();
		if (top.second < top.first->deps.size()) {
			op_ref d = top.first->deps[top.second++];
			if (!done(d) && seen.insert(d.get()).second)
				stack.emplace_back(d, 0);
			continue;
		}
		order.push_back(top.first);
		stack.pop_back();
	}
	/* a device's memory stays open across a run of its operations (one
	 * mprotect pass, not two per operation); only that device's */
	int open_dev = -1;
	for (const op_ref &o : order) {
		if (o->work && o->dev != open_dev) {
			if (open_dev >= 0)
				emu_dev_exit(open_dev);
			open_dev = o->dev;
			emu_dev_enter(open_dev);
		}
		for (;;) {
			if (o->state == OP_DONE)
				break;
			if (o->state == OP_RUNNING) {
				if (o->runner == me) {
					blocked.insert(o.get());
					break;
				}
				g_cv.wait(lk);
				continue;
			}
			int wait = 0, stuck = 0;
			for (const op_ref &d : o->deps) {
				if (d->state == OP_DONE)
					continue;
				if (blocked.count(d.get()) || d->state == OP_PENDING)
					stuck = 1;
				else if (d->runner == me)
					stuck = 1;
				else
					wait = 1;
			}
			if (stuck) {
				blocked.insert(o.get());
				break;
			}
			if (wait) {
				g_cv.wait(lk);
				continue;
			}
			o->state = OP_RUNNING;
			o->runner = me;
			lk.unlock();
			execute(o);
			lk.lock();
			o->state = OP_DONE;
			o->deps.clear();
			o->work = nullptr;
			g_cv.notify_all();
			break;
		}
	}
	if (open_dev >= 0)
		emu_dev_exit(open_dev);
	return done(target);
}

void force(const op_ref &target)
{
	std::unique_lock<std::mutex> lk(g_mu);

	force_locked(target, lk);
}

/* Runs work now as device work (inside a host function). */
void run_now(const std::function<void()> &work)
{
	std::lock_guard<std::recursive_mutex> g(device);
	int dev = emu_current_device();

	emu_dev_enter(dev);
	work();
	emu_dev_exit(dev);
}

} /* namespace */

int emu_in_host_fn(void)
{
	return host_fn_depth > 0;
}

static cudaError_t enqueue(cudaStream_t h, const char *what, std::function<void()> work,
			   int host_fn, int sync)
{
	op_ref o;
	{
		std::lock_guard<std::mutex> g(g_mu);
		stream *s = resolve_locked(h);
		if (!s) {
			emu_report("%s on stream %p: not a live stream (destroyed, or never created "
				   "by cudaStreamCreate)", what, (void *)h);
			return emu_set_error(cudaErrorInvalidResourceHandle);
		}
		o = append_locked(s, what, std::move(work), host_fn, nullptr);
	}
	if (sync)
		force(o);
	return cudaSuccess;
}

cudaError_t emu_enqueue(cudaStream_t s, const char *what, std::function<void()> work)
{
	return enqueue(s, what, std::move(work), 0, 0);
}

cudaError_t emu_enqueue_sync(cudaStream_t s, const char *what, std::function<void()> work)
{
	return enqueue(s, what, std::move(work), 0, 1);
}

/* ---- copies and memsets ---- */

static const char *kind_str(cudaMemcpyKind k)
{
	switch (k) {
	case cudaMemcpyHostToDevice: return "HostToDevice";
	case cudaMemcpyDeviceToHost: return "DeviceToHost";
	case cudaMemcpyDeviceToDevice: return "DeviceToDevice";
	case cudaMemcpyHostToHost: return "HostToHost";
	default: return "Default";
	}
}

/* Checks a copy's direction and bounds; 0 when it must not run. */
static int copy_ok(void *d, const void *s, size_t n, cudaMemcpyKind k, const char *who,
		   int *dd, int *sd)
{
	*dd = emu_is_dev(d);
	*sd = emu_is_dev(s);
	if ((unsigned)k > (unsigned)cudaMemcpyDefault) {
		emu_report("%s(%p <- %p, %zu): unknown cudaMemcpyKind %d", who, d, s, n, (int)k);
		return 0;
	}
	if (k != cudaMemcpyDefault) {
		int wd = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
		int ws = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;

		if (wd != *dd || ws != *sd)
			emu_report("%s(%p <- %p, %zu, %s): the pointers are %s <- %s", who, d, s, n,
				   kind_str(k), *dd ? "device" : "host", *sd ? "device" : "host");
	}
	if ((*dd && !emu_dev_range_ok(d, n)) || (*sd && !emu_dev_range_ok(s, n))) {
		emu_report("%s(%p <- %p, %zu): outside its device allocation", who, d, s, n);
		return 0;
	}
	return 1;
}

/* EMU_COUNTS: a copy (src_dev, dst_dev: which sides are device memory) or,
 * with memset set, a memset of n bytes. */
static void copy_count(int dst_dev, int src_dev, size_t n, int is_memset)
{
	if (!emu_counting())
		return;
	if (is_memset)
		emu_count_record('C', "cudaMemset", 0.0, (double)n, 0.0, "-");
	else if (dst_dev && src_dev)
		emu_count_record('C', "cudaMemcpy DtoD", (double)n, (double)n, 0.0, "-");
	else if (dst_dev)
		emu_count_record('C', "cudaMemcpy HtoD", 0.0, (double)n, 0.0, "h2d");
	else if (src_dev)
		emu_count_record('C', "cudaMemcpy DtoH", (double)n, 0.0, 0.0, "d2h");
}

extern "C" {

cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind k)
{
	int dd, sd;

	if (!n)
		return cudaSuccess;
	if (!copy_ok(d, s, n, k, "cudaMemcpy", &dd, &sd))
		return emu_set_error(cudaErrorInvalidValue);
	auto work = [=] {
		copy_count(dd, sd, n, 0);
		memmove(d, s, n);
	};
	if (emu_in_host_fn()) {
		run_now(work);
		return cudaSuccess;
	}
	emu_host_count(sd && !dd ? EMU_WAIT_MEMCPY_D2H : EMU_WAIT_MEMCPY_OTHER);
	return emu_enqueue_sync(cudaStreamLegacy, "cudaMemcpy", work);
}

/* Pageable host memory behaves as CUDA documents: a copy from it reads
 * the source before returning (staging), a copy into it returns when done;
 * pinned memory is read and written when the copy runs. */
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st)
{
	int dd, sd;

	if (!n)
		return cudaSuccess;
	if (!copy_ok(d, s, n, k, "cudaMemcpyAsync", &dd, &sd))
		return emu_set_error(cudaErrorInvalidValue);
	if (emu_in_host_fn()) {
		run_now([=] {
			copy_count(dd, sd, n, 0);
			memmove(d, s, n);
		});
		return cudaSuccess;
	}
	int src_pageable = !sd && !emu_is_pinned(s);
	int dst_pageable = !dd && !emu_is_pinned(d);
	if (dst_pageable) /* returns when the copy is done: the host waits */
		emu_host_count(EMU_WAIT_MEMCPY_D2H);
	if (src_pageable) {
		auto staged = std::make_shared<std::vector<char>>((const char *)s,
								  (const char *)s + n);
		auto work = [=] {
			copy_count(dd, sd, n, 0);
			memmove(d, staged->data(), n);
		};
		return dst_pageable ? emu_enqueue_sync(st, "cudaMemcpyAsync", work) :
				      emu_enqueue(st, "cudaMemcpyAsync", work);
	}
	auto work = [=] {
		copy_count(dd, sd, n, 0);
		memmove(d, s, n);
	};
	return dst_pageable ? emu_enqueue_sync(st, "cudaMemcpyAsync", work) :
			      emu_enqueue(st, "cudaMemcpyAsync", work);
}

static int set_ok(void *d, size_t n, const char *who)
{
	if (emu_dev_range_ok(d, n))
		return 1;
	emu_report("%s(%p, %zu): not inside a device allocation", who, d, n);
	return 0;
}

cudaError_t cudaMemset(void *d, int v, size_t n)
{
	if (!n)
		return cudaSuccess;
	if (!set_ok(d, n, "cudaMemset"))
		return emu_set_error(cudaErrorInvalidValue);
	auto work = [=] {
		copy_count(1, 0, n, 1);
		memset(d, v, n);
	};
	if (emu_in_host_fn()) {
		run_now(work);
		return cudaSuccess;
	}
	emu_host_count(EMU_WAIT_MEMSET);
	return emu_enqueue_sync(cudaStreamLegacy, "cudaMemset", work);
}

cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t s)
{
	if (!n)
		return cudaSuccess;
	if (!set_ok(d, n, "cudaMemsetAsync"))
		return emu_set_error(cudaErrorInvalidValue);
	auto work = [=] {
		copy_count(1, 0, n, 1);
		memset(d, v, n);
	};
	if (emu_in_host_fn()) {
		run_now(work);
		return cudaSuccess;
	}
	return emu_enqueue(s, "cudaMemsetAsync", work);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data)
{
	if (!fn) {
		emu_report("cudaLaunchHostFunc: the function is NULL");
		return emu_set_error(cudaErrorInvalidValue);
	}
	return enqueue(s, "cudaLaunchHostFunc", [=] { fn(data); }, 1, 0);
}

/* ---- streams ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
	std::lock_guard<std::mutex> g(g_mu);
	stream *s = new stream();

	s->flags = flags;
	s->kind = flags & cudaStreamNonBlocking ? ST_NONBLOCKING : ST_BLOCKING;
	s->id = next_stream_id++;
	s->dev = emu_current_device();
	streams.insert(s);
	*out = (cudaStream_t)s;
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *out)
{
	return cudaStreamCreateWithFlags(out, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *out, unsigned int flags, int priority)
{
	(void)priority;
	return cudaStreamCreateWithFlags(out, flags);
}

/* As in CUDA, work queued on a destroyed stream still runs (when forced
 * by a device synchronize or by work that depends on it). */
cudaError_t cudaStreamDestroy(cudaStream_t h)
{
	std::lock_guard<std::mutex> g(g_mu);
	stream *s = h == 0 || h == cudaStreamLegacy || h == cudaStreamPerThread ? nullptr :
										   resolve_locked(h);

	if (!s) {
		emu_report("cudaStreamDestroy(%p): not a live created stream", (void *)h);
		return emu_set_error(cudaErrorInvalidResourceHandle);
	}
	s->destroyed = 1;
	reap_locked();
	return cudaSuccess;
}

cudaError_t cudaStreamGetFlags(cudaStream_t h, unsigned int *flags)
{
	std::lock_guard<std::mutex> g(g_mu);
	stream *s = resolve_locked(h);

	if (!s)
		return emu_set_error(cudaErrorInvalidResourceHandle);
	*flags = s->flags;
	return cudaSuccess;
}

static cudaError_t stream_force(cudaStream_t h, const char *who)
{
	std::unique_lock<std::mutex> lk(g_mu);
	stream *s = resolve_locked(h);

	if (!s) {
		emu_report("%s(%p): not a live stream", who, (void *)h);
		return emu_set_error(cudaErrorInvalidResourceHandle);
	}
	op_ref last = s->last;
	force_locked(last, lk);
	reap_locked();
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
	emu_host_count(EMU_WAIT_STREAM_SYNC);
	return stream_force(h, "cudaStreamSynchronize");
}

cudaError_t cudaStreamQuery(cudaStream_t h)
{
	emu_host_count(EMU_WAIT_STREAM_QUERY);
	return stream_force(h, "cudaStreamQuery");
}

cudaError_t cudaDeviceSynchronize(void)
{
	emu_host_count(EMU_WAIT_DEVICE_SYNC);
	std::unique_lock<std::mutex> lk(g_mu);
	std::vector<op_ref> lasts;

	lasts.push_back(legacy.last);
	for (stream *s : streams)
		lasts.push_back(s->last);
	for (const op_ref &o : lasts)
		force_locked(o, lk);
	reap_locked();
	return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned int flags)
{
	std::lock_guard<std::mutex> g(g_mu);
	stream *s = resolve_locked(h);
	event *ev = (event *)e;

	(void)flags;
	if (!s || !events.count(ev)) {
		emu_report("cudaStreamWaitEvent(%p, %p): %s", (void *)h, (void *)e,
			   !s ? "not a live stream" : "not a live event");
		return emu_set_error(!s ? cudaErrorInvalidResourceHandle : cudaErrorInvalidValue);
	}
	append_locked(s, "cudaStreamWaitEvent", nullptr, 0, ev->at);
	return cudaSuccess;
}

/* ---- events ---- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags)
{
	std::lock_guard<std::mutex> g(g_mu);
	event *e = new event();

	e->flags = flags;
	events.insert(e);
	*out = (cudaEvent_t)e;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *out)
{
	return cudaEventCreateWithFlags(out, cudaEventDefault);
}

/* A pending record keeps its work: destroying the event does not lose it. */
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	std::lock_guard<std::mutex> g(g_mu);

	if (!events.erase((event *)e)) {
		emu_report("cudaEventDestroy(%p): not a live event", (void *)e);
		return emu_set_error(cudaErrorInvalidValue);
	}
	delete (event *)e;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h)
{
	std::lock_guard<std::mutex> g(g_mu);
	stream *s = resolve_locked(h);
	event *ev = (event *)e;

	if (!s || !events.count(ev)) {
		emu_report("cudaEventRecord(%p, %p): %s", (void *)e, (void *)h,
			   !s ? "not a live stream" : "not a live event");
		return emu_set_error(!s ? cudaErrorInvalidResourceHandle : cudaErrorInvalidValue);
	}
	ev->at = append_locked(s, "cudaEventRecord", nullptr, 0, nullptr);
	return cudaSuccess;
}

static cudaError_t event_force(cudaEvent_t e, const char *who)
{
	std::unique_lock<std::mutex> lk(g_mu);
	event *ev = (event *)e;

	if (!events.count(ev)) {
		emu_report("%s(%p): not a live event", who, (void *)e);
		return emu_set_error(cudaErrorInvalidResourceHandle);
	}
	op_ref at = ev->at;
	force_locked(at, lk);
	return cudaSuccess;
}

/* A query runs the recorded work (the emulator has no clock to let it
 * finish by itself) and reports it complete. */
cudaError_t cudaEventQuery(cudaEvent_t e)
{
	emu_host_count(EMU_WAIT_EVENT_QUERY);
	return event_force(e, "cudaEventQuery");
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	emu_host_count(EMU_WAIT_EVENT_SYNC);
	return event_force(e, "cudaEventSynchronize");
}

} /* extern "C" */
