/* comm gloo on CUDA tensors: device buffers are staged through pinned host
 * memory, so GPU code can be tested against Gloo and ranks that share one
 * GPU (which NCCL refuses) can still train together.
 *
 * How the plugin reaches CUDA. It must build and load on machines without
 * the CUDA toolkit, so it does not link libcudart, and dlopen'ing
 * libcudart by soname would tie the plugin to one toolkit version and
 * duplicate the CUDA error handling. A CUDA buffer can only exist in a
 * process where core/tensor already loaded weft_kernels_cuda.so (on the
 * first use of a cuda device), and that library's extras table
 * (weft/cuda_extras.h) has pinned host allocation and a synchronous copy.
 * The host hands that table out (host->cuda_extras, since ABI 1.3: the
 * core's one lookup, which loads nothing), and every CUDA operation of
 * this plugin goes through it.
 *
 * Ordering. copy_sync runs on the device's legacy default stream, which
 * waits for everything issued earlier on every blocking stream of the
 * device (each kernel-table context's compute stream is one): a gradient
 * that kernels are still writing when the strategy issues the collective
 * is read only once they finished. It returns when the copy is done, and
 * compute work issued after the collective's wait runs after the copy
 * back. So no event or stream handle has to cross the comm ABI.
 *
 * Buffers. Collectives stage into two pinned buffers per communicator
 * (send side, recv side), used only by its comm thread and grown when a
 * larger collective comes, never shrunk: steady-state training allocates
 * nothing. A point-to-point transfer is finished by the issuer's wait, not
 * on the comm thread, so each work handle has its own pinned buffer, kept
 * when the handle is recycled. All are freed with the communicator. */
#include <atomic>
#include <cstring>

#include "gloo_impl.h"

namespace weft_gloo {

namespace {

std::atomic<const weft_cuda_extras *> extras{ nullptr };

/* The extras table of the loaded kernel library, or NULL with the reason
 * in *why. Only a success is remembered: the library may be loaded later
 * than the first question. */
const weft_cuda_extras *lookup(std::string *why)
{
	const weft_cuda_extras *ex = extras.load(std::memory_order_acquire);
	const char *file = nullptr;

	if (ex)
		return ex;
	if (!WEFT_HAS_MEMBER(host, weft_host, cuda_extras) || !host->cuda_extras) {
		*why = "this weft's host has no cuda_extras (ABI " +
		       std::to_string(WEFT_ABI_VERSION_MAJOR(host->head.abi_version)) + "." +
		       std::to_string(WEFT_ABI_VERSION_MINOR(host->head.abi_version)) +
		       ", 1.3 needed): use the weft this plugin was built with";
		return nullptr;
	}
	if (host->cuda_extras(&ex, &file) != WEFT_OK) {
		*why = host->error_last();
		return nullptr;
	}
	if (!WEFT_HAS_MEMBER(ex, weft_cuda_extras, copy_sync) || !ex->host_alloc ||
	    !ex->host_free || !ex->copy_sync) {
		*why = std::string(file ? file : "the CUDA kernel library") + " has no staging "
		       "copies (" WEFT_CUDA_EXTRAS_SYMBOL "'s copy_sync): it was built for an "
		       "older weft; rebuild it with this one";
		return nullptr;
	}
	extras.store(ex, std::memory_order_release);
	return ex;
}

/* Copies between a staged CUDA buffer and its pinned host copy. */
void copy(const weft_comm_buf &dev, void *dst, const void *src, size_t bytes, weft_copy_kind kind)
{
	const weft_cuda_extras *ex = extras.load(std::memory_order_acquire);
	weft_status st = ex->copy_sync(dev.device_index, dst, src, bytes, kind);

	if (st)
		throw StatusError(st, std::string("staging cuda:") +
				  std::to_string(dev.device_index) + " memory through pinned host "
				  "memory: " + host->error_last());
}

size_t bytes_of(const weft_comm_buf &b)
{
	return (size_t)b.count * weft_comm_dtype_size(b.dtype);
}

bool on_cuda(const weft_comm_buf &b)
{
	return b.device == WEFT_COMM_DEVICE_CUDA && b.count > 0;
}

weft_comm_buf host_view(const weft_comm_buf &b, void *data)
{
	weft_comm_buf h = b;

	h.data = data;
	h.device = WEFT_COMM_DEVICE_CPU;
	h.device_index = 0;
	return h;
}

}  // namespace

weft_status cuda_staging_check(const char *who, const weft_comm_buf *b)
{
	std::string why;

	if (lookup(&why))
		return WEFT_OK;
	return host->error_set(WEFT_ERR_UNSUPPORTED, "%s is CUDA memory (cuda:%d), which comm "
			       "gloo stages through pinned host memory with the CUDA kernel "
			       "library, but %s; or use trainer.comm=nccl", who,
			       (int)b->device_index, why.c_str());
}

Pinned::~Pinned()
{
	if (ptr_)
		extras.load(std::memory_order_acquire)->host_free(WEFT_MEM_COMM, ptr_, size_);
}

void *Pinned::get(size_t bytes)
{
	const weft_cuda_extras *ex = extras.load(std::memory_order_acquire);
	void *p = nullptr;
	weft_status st;

	if (bytes <= size_ && ptr_)
		return ptr_;
	st = ex->host_alloc(WEFT_MEM_COMM, bytes, &p);
	if (st)
		throw StatusError(st, std::string("staging buffer: ") + host->error_last());
	if (ptr_)
		ex->host_free(WEFT_MEM_COMM, ptr_, size_);
	ptr_ = p;
	size_ = bytes;
	return ptr_;
}

void run_staged(weft_comm *c, weft_comm_work *w)
{
	const weft_comm_buf ds = w->send, dr = w->recv;

	switch (w->op) {
	case Op::send: {
		/* the transfer reads the pinned copy until the issuer's wait */
		void *h = w->pin.get(bytes_of(dr));

		copy(dr, h, dr.data, bytes_of(dr), WEFT_COPY_DEVICE_TO_HOST);
		w->send = w->recv = host_view(dr, h);
		return run_host_op(c, w);
	}
	case Op::recv: {
		/* the issuer's wait copies the received bytes to the device */
		void *h = w->pin.get(bytes_of(dr));

		w->staged_dst = dr;
		w->send = w->recv = host_view(dr, h);
		return run_host_op(c, w);
	}
	case Op::broadcast: {
		void *h = c->pin_recv.get(bytes_of(dr));

		if (c->rank == w->root)
			copy(dr, h, dr.data, bytes_of(dr), WEFT_COPY_DEVICE_TO_HOST);
		w->send = w->recv = host_view(dr, h);
		run_host_op(c, w);
		if (c->rank != w->root)
			copy(dr, dr.data, h, bytes_of(dr), WEFT_COPY_HOST_TO_DEVICE);
		w->send = ds;
		w->recv = dr;
		return;
	}
	case Op::all_reduce:
	case Op::reduce_scatter:
	case Op::all_gather:
	case Op::all_to_all:
	case Op::barrier:
		break;
	}
	/* separate host copies: an in-place call becomes an out-of-place one
	 * on the host, with the same result */
	if (on_cuda(ds)) {
		void *h = c->pin_send.get(bytes_of(ds));

		copy(ds, h, ds.data, bytes_of(ds), WEFT_COPY_DEVICE_TO_HOST);
		w->send = host_view(ds, h);
	}
	if (on_cuda(dr))
		w->recv = host_view(dr, c->pin_recv.get(bytes_of(dr)));
	run_host_op(c, w);
	if (on_cuda(dr))
		copy(dr, dr.data, w->recv.data, bytes_of(dr), WEFT_COPY_HOST_TO_DEVICE);
	w->send = ds;
	w->recv = dr;
}

void finish_staged_recv(weft_comm_work *w)
{
	const weft_comm_buf dst = w->staged_dst;

	w->staged_dst = weft_comm_buf{};
	copy(dst, dst.data, w->recv.data, bytes_of(dst), WEFT_COPY_HOST_TO_DEVICE);
}

}  // namespace weft_gloo
