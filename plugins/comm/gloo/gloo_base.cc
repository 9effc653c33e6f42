/* What every file of the Gloo comm plugin uses, below them all: the host
 * services table (set by the entry symbol in gloo_comm.cc), operation
 * names, the messages that name a communicator and a collective, and
 * scratch memory. */
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

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

weft_status fail(weft_status st, const std::string &msg)
{
	return host->error_set(st, "%s", msg.c_str());
}

}  // namespace weft_gloo
