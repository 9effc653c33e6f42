/* The collectives, run on a communicator's comm thread. With a shared
 * segment (every rank on this host) all but all_to_all and send/recv go
 * through it (gloo_shm.cc); otherwise Gloo's own
 * algorithms serve all_reduce (ring), all_gather, broadcast, all_to_all and
 * barrier; reduce_scatter is a ring over Gloo's unbound buffers, so that
 * it moves (P-1)/P of the data like NCCL's. bf16 and f16 are widened to
 * f32 in scratch memory, reduced there, and rounded back once. */
#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <type_traits>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>

#include "gloo_impl.h"
#include "weft/half.h"

namespace weft_gloo {

namespace {

using ms = std::chrono::milliseconds;
using clk = std::chrono::steady_clock;

constexpr uint64_t kReduceScatterSlotBase = 0xE0ull << 56;

template <typename T>
gloo::AllreduceOptions::Func reducer(weft_comm_redop op)
{
	return [op](void *out, const void *a, const void *b, size_t n) {
		reduce_into<T>((T *)out, (const T *)a, (const T *)b, n, op);
	};
}

void widen(float *dst, const void *src, size_t n, weft_comm_dtype dt)
{
	const uint16_t *s = (const uint16_t *)src;

	if (dt == WEFT_COMM_BF16)
		for (size_t i = 0; i < n; i++)
			dst[i] = weft_half_bf16_to_f32(s[i]);
	else
		for (size_t i = 0; i < n; i++)
			dst[i] = weft_half_f16_to_f32(s[i]);
}

void narrow(void *dst, const float *src, size_t n, weft_comm_dtype dt)
{
	uint16_t *d = (uint16_t *)dst;

	if (dt == WEFT_COMM_BF16)
		for (size_t i = 0; i < n; i++)
			d[i] = weft_half_f32_to_bf16(src[i]);
	else
		for (size_t i = 0; i < n; i++)
			d[i] = weft_half_f32_to_f16(src[i]);
}

ms remaining(clk::time_point deadline)
{
	auto l = std::chrono::duration_cast<ms>(deadline - clk::now());

	if (l.count() <= 0)
		throw gloo::IoException("deadline passed");
	return l;
}

template <typename T>
void all_reduce_typed(weft_comm *c, const weft_comm_work *w, const T *in, T *out, size_t n,
		      weft_comm_redop op)
{
	if (c->shm)
		return c->shm->all_reduce<T>(w, in, out, n, op);
	gloo::AllreduceOptions opts(c->ctx);

	if (in != out)
		opts.setInput<T>(const_cast<T *>(in), n);
	opts.setOutput<T>(out, n);
	opts.setReduceFunction(reducer<T>(op));
	opts.setTag((uint32_t)w->seq);
	opts.setTimeout(ms(c->timeout_ms));
	gloo::allreduce(opts);
	if (op == WEFT_COMM_AVG)
		divide<T>(out, n, c->size);
}

void all_reduce(weft_comm *c, weft_comm_work *w)
{
	size_t n = (size_t)w->recv.count;
	const void *in = w->send.data;
	void *out = w->recv.data;

	if (n == 0)
		return;
	if (c->size == 1) {
		if (in != out)
			memcpy(out, in, n * weft_comm_dtype_size(w->recv.dtype));
		return;
	}
	switch (w->recv.dtype) {
	case WEFT_COMM_F32:
		return all_reduce_typed<float>(c, w, (const float *)in, (float *)out, n, w->redop);
	case WEFT_COMM_F64:
		return all_reduce_typed<double>(c, w, (const double *)in, (double *)out, n,
						w->redop);
	case WEFT_COMM_I32:
		return all_reduce_typed<int32_t>(c, w, (const int32_t *)in, (int32_t *)out, n,
						 w->redop);
	case WEFT_COMM_I64:
		return all_reduce_typed<int64_t>(c, w, (const int64_t *)in, (int64_t *)out, n,
						 w->redop);
	case WEFT_COMM_BF16:
	case WEFT_COMM_F16: {
		float *wide = (float *)c->scratch_a.get(n * sizeof(float));

		widen(wide, in, n, w->recv.dtype);
		all_reduce_typed<float>(c, w, wide, wide, n, w->redop);
		narrow(out, wide, n, w->recv.dtype);
		return;
	}
	case WEFT_COMM_NUM_DTYPES:
		break;
	}
	throw std::invalid_argument("unknown dtype");
}

/* Ring reduce-scatter over elements of T in work[size * n]: after it, block
 * `rank` of work holds the reduction. tmp holds n elements. */
template <typename T>
void ring_reduce_scatter(weft_comm *c, T *work, T *tmp, size_t n, weft_comm_redop op,
			 uint64_t seq)
{
	const int P = c->size, r = c->rank;
	const size_t bytes = n * sizeof(T);
	auto deadline = clk::now() + ms(c->timeout_ms);
	auto out = c->ctx->createUnboundBuffer(work, bytes * (size_t)P);
	auto in = c->ctx->createUnboundBuffer(tmp, bytes);
	const int right = (r + 1) % P, left = (r - 1 + P) % P;

	for (int s = 0; s < P - 1; s++) {
		int sb = ((r - s - 1) % P + P) % P;
		int rb = ((r - s - 2) % P + P) % P;
		uint64_t slot = kReduceScatterSlotBase | ((seq & 0xffffffffffull) << 16) | (uint64_t)s;

		out->send(right, slot, (size_t)sb * bytes, bytes);
		in->recv(left, slot, 0, bytes);
		if (!in->waitRecv(remaining(deadline)) || !out->waitSend(remaining(deadline)))
			throw gloo::IoException("reduce_scatter aborted");
		reduce_into<T>(work + (size_t)rb * n, work + (size_t)rb * n, tmp, n, op);
	}
	if (op == WEFT_COMM_AVG)
		divide<T>(work + (size_t)r * n, n, P);
}

template <typename T>
void reduce_scatter_typed(weft_comm *c, const weft_comm_work *w, const T *in, T *out, size_t n,
			  weft_comm_redop op)
{
	if (c->shm)
		return c->shm->reduce_scatter<T>(w, in, out, n, op);
	const size_t P = (size_t)c->size;
	T *work = (T *)c->scratch_a.get(P * n * sizeof(T));
	T *tmp = (T *)c->scratch_b.get(n * sizeof(T));

	memcpy(work, in, P * n * sizeof(T));
	ring_reduce_scatter<T>(c, work, tmp, n, op, w->seq);
	memcpy(out, work + (size_t)c->rank * n, n * sizeof(T));
}

void reduce_scatter(weft_comm *c, weft_comm_work *w)
{
	size_t n = (size_t)w->recv.count;
	const void *in = w->send.data;
	void *out = w->recv.data;

	if (n == 0)
		return;
	if (c->size == 1) {
		if (in != out)
			memcpy(out, in, n * weft_comm_dtype_size(w->recv.dtype));
		return;
	}
	switch (w->recv.dtype) {
	case WEFT_COMM_F32:
		return reduce_scatter_typed<float>(c, w, (const float *)in, (float *)out, n,
						   w->redop);
	case WEFT_COMM_F64:
		return reduce_scatter_typed<double>(c, w, (const double *)in, (double *)out, n,
						    w->redop);
	case WEFT_COMM_I32:
		return reduce_scatter_typed<int32_t>(c, w, (const int32_t *)in, (int32_t *)out, n,
						     w->redop);
	case WEFT_COMM_I64:
		return reduce_scatter_typed<int64_t>(c, w, (const int64_t *)in, (int64_t *)out, n,
						     w->redop);
	case WEFT_COMM_BF16:
	case WEFT_COMM_F16: {
		const size_t P = (size_t)c->size;
		float *work = (float *)c->scratch_a.get(P * n * sizeof(float));
		float *tmp = (float *)c->scratch_b.get(n * sizeof(float));

		widen(work, in, P * n, w->recv.dtype);
		if (c->shm) {
			c->shm->reduce_scatter<float>(w, work, tmp, n, w->redop);
			narrow(out, tmp, n, w->recv.dtype);
			return;
		}
		ring_reduce_scatter<float>(c, work, tmp, n, w->redop, w->seq);
		narrow(out, work + (size_t)c->rank * n, n, w->recv.dtype);
		return;
	}
	case WEFT_COMM_NUM_DTYPES:
		break;
	}
	throw std::invalid_argument("unknown dtype");
}

void all_gather(weft_comm *c, weft_comm_work *w)
{
	size_t es = weft_comm_dtype_size(w->send.dtype);
	size_t bytes = (size_t)w->send.count * es;
	char *out = (char *)w->recv.data;
	const char *in = (const char *)w->send.data;

	if (bytes == 0)
		return;
	if (c->size == 1) {
		if (in != out)
			memcpy(out, in, bytes);
		return;
	}
	if (c->shm)
		return c->shm->all_gather(w, in, out, bytes);
	gloo::AllgatherOptions opts(c->ctx);
	/* in place when the input already sits in this rank's block */
	if (in != out + (size_t)c->rank * bytes)
		opts.setInput<char>(const_cast<char *>(in), bytes);
	opts.setOutput<char>(out, bytes * (size_t)c->size);
	opts.setTag((uint32_t)w->seq);
	opts.setTimeout(ms(c->timeout_ms));
	gloo::allgather(opts);
}

void broadcast(weft_comm *c, weft_comm_work *w)
{
	size_t bytes = (size_t)w->recv.count * weft_comm_dtype_size(w->recv.dtype);

	if (bytes == 0 || c->size == 1)
		return;
	if (c->shm)
		return c->shm->broadcast(w, (char *)w->recv.data, bytes);
	gloo::BroadcastOptions opts(c->ctx);
	opts.setOutput<char>((char *)w->recv.data, bytes);
	opts.setRoot(w->root);
	opts.setTag((uint32_t)w->seq);
	opts.setTimeout(ms(c->timeout_ms));
	gloo::broadcast(opts);
}

void all_to_all(weft_comm *c, weft_comm_work *w)
{
	size_t bytes = (size_t)w->send.count * weft_comm_dtype_size(w->send.dtype);

	if (bytes == 0)
		return;
	if (c->size == 1) {
		memcpy(w->recv.data, w->send.data, bytes);
		return;
	}
	gloo::AlltoallOptions opts(c->ctx);
	opts.setInput<char>((char *)w->send.data, bytes);
	opts.setOutput<char>((char *)w->recv.data, bytes);
	opts.setTag((uint32_t)w->seq);
	opts.setTimeout(ms(c->timeout_ms));
	gloo::alltoall(opts);
}

void barrier(weft_comm *c, weft_comm_work *w)
{
	if (c->size == 1)
		return;
	if (c->shm)
		return c->shm->barrier(w);
	gloo::BarrierOptions opts(c->ctx);
	opts.setTag((uint32_t)w->seq);
	opts.setTimeout(ms(c->timeout_ms));
	gloo::barrier(opts);
}

void post_p2p(weft_comm *c, weft_comm_work *w)
{
	size_t bytes = (size_t)w->recv.count * weft_comm_dtype_size(w->recv.dtype);
	uint64_t slot = kP2PSlotBase | (w->p2p_seq & 0xffffffffffffull);

	if (bytes == 0)
		return; /* nothing to move; wait finds no transfer */
	w->p2p = c->ctx->createUnboundBuffer(w->recv.data, bytes);
	if (w->op == Op::send)
		w->p2p->send(w->root, slot);
	else
		w->p2p->recv(w->root, slot);
}

}  // namespace

void run_host_op(weft_comm *c, weft_comm_work *w)
{
	switch (w->op) {
	case Op::all_reduce: return all_reduce(c, w);
	case Op::reduce_scatter: return reduce_scatter(c, w);
	case Op::all_gather: return all_gather(c, w);
	case Op::broadcast: return broadcast(c, w);
	case Op::send:
	case Op::recv: return post_p2p(c, w);
	case Op::all_to_all: return all_to_all(c, w);
	case Op::barrier: return barrier(c, w);
	}
	throw std::invalid_argument("unknown operation");
}

}  // namespace weft_gloo
