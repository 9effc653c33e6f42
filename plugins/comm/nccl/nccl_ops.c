/* The collectives of the NCCL plugin: argument checks with messages that
 * name the communicator, the staging plan for host buffers (nccl_stage.h),
 * then the NCCL calls (grouped for all_to_all), issued on the comm stream
 * by nccl_issue.
 *
 * How a host buffer is told from device memory: by its descriptor
 * (weft_comm_buf.device), which every caller sets and comm gloo relies on
 * the same way; no driver call on the device path. A buffer that says
 * "cpu" is checked once with cudaPointerGetAttributes (CUDA 11 and later,
 * 12 and 13 included, answer cudaSuccess for any pointer: plain host
 * memory is cudaMemoryTypeUnregistered, pinned cudaMemoryTypeHost, both
 * staged; cudaMemoryTypeDevice is a mislabelled GPU buffer and refused
 * with advice, since the staging memcpy would fault on it; managed memory
 * is host-readable and staged). */
#include <stdio.h>

#include "nccl_impl.h"

static ncclDataType_t nccl_type(weft_comm_dtype dt)
{
	switch (dt) {
	case WEFT_COMM_F64: return ncclFloat64;
	case WEFT_COMM_I32: return ncclInt32;
	case WEFT_COMM_I64: return ncclInt64;
	case WEFT_COMM_BF16: return ncclBfloat16;
	case WEFT_COMM_F16: return ncclFloat16;
	default: return ncclFloat32;
	}
}

static ncclRedOp_t nccl_op(weft_comm_redop op)
{
	switch (op) {
	case WEFT_COMM_AVG: return ncclAvg;
	case WEFT_COMM_MAX: return ncclMax;
	case WEFT_COMM_MIN: return ncclMin;
	default: return ncclSum;
	}
}

static weft_status check_buf(const weft_comm *c, const char *op, const char *which,
			     const weft_comm_buf *b)
{
	char who[256];

	nccl_who(c, who, sizeof(who));
	if (!b)
		return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "%s: %s: %s is NULL", who, op, which);
	if (b->count < 0)
		return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "%s: %s: %s count %lld is negative",
					    who, op, which, (long long)b->count);
	if (weft_comm_dtype_size(b->dtype) == 0)
		return nccl_host->error_set(WEFT_ERR_DTYPE, "%s: %s: %s has unknown dtype %d", who, op,
					    which, (int)b->dtype);
	if (b->device != WEFT_COMM_DEVICE_CUDA && b->device != WEFT_COMM_DEVICE_CPU)
		return nccl_host->error_set(WEFT_ERR_UNSUPPORTED, "%s: %s: %s is on device kind %d, "
					    "which the nccl backend does not know: it moves CUDA "
					    "buffers, and host buffers through a device copy", who, op,
					    which, (int)b->device);
	if (b->count > 0 && !b->data)
		return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "%s: %s: %s has %lld elements but "
					    "no data pointer", who, op, which, (long long)b->count);
	if (b->device == WEFT_COMM_DEVICE_CPU) {
		struct cudaPointerAttributes at;

		if (b->count == 0)
			return WEFT_OK;
		/* on c's GPU: a thread with no current device would get a context
		 * on GPU 0 from its first runtime call */
		if (cudaSetDevice(c->device) != cudaSuccess ||
		    cudaPointerGetAttributes(&at, b->data) != cudaSuccess) {
			cudaGetLastError(); /* before CUDA 11: unknown host memory */
			return WEFT_OK;
		}
		if (at.type == cudaMemoryTypeDevice)
			return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "%s: %s: %s says host "
						    "memory (device cpu) but points into the "
						    "memory of cuda:%d; describe it as device "
						    "cuda, index %d", who, op, which,
						    at.device, at.device);
		return WEFT_OK;
	}
	if (b->device_index != c->device)
		return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "%s: %s: %s is on cuda:%d but the "
					    "communicator is on cuda:%d", who, op, which,
					    (int)b->device_index, (int)c->device);
	return WEFT_OK;
}

static weft_status check_pair(const weft_comm *c, const char *op, const weft_comm_buf *s,
			      const weft_comm_buf *r, int64_t send_mul, int64_t recv_mul)
{
	char who[256];
	weft_status st;

	if ((st = check_buf(c, op, "send", s)) || (st = check_buf(c, op, "recv", r)))
		return st;
	nccl_who(c, who, sizeof(who));
	if (s->dtype != r->dtype)
		return nccl_host->error_set(WEFT_ERR_DTYPE, "%s: %s: send is %s but recv is %s; both "
					    "must have the same dtype", who, op,
					    weft_comm_dtype_name(s->dtype),
					    weft_comm_dtype_name(r->dtype));
	if (s->count * send_mul != r->count * recv_mul)
		return nccl_host->error_set(WEFT_ERR_SHAPE, "%s: %s: send has %lld elements and recv "
					    "%lld; with %d ranks %s", who, op, (long long)s->count,
					    (long long)r->count, (int)c->size,
					    send_mul == recv_mul ? "they must be equal" :
					    send_mul > recv_mul ? "send must be size x recv" :
					    "recv must be size x send");
	return WEFT_OK;
}

static weft_status check_redop(const weft_comm *c, const char *op, weft_comm_redop redop)
{
	char who[256];

	if ((unsigned)redop < WEFT_COMM_NUM_REDOPS)
		return WEFT_OK;
	return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "%s: %s: unknown reduction %d (use sum, "
				    "avg, max or min)", nccl_who(c, who, sizeof(who)), op,
				    (int)redop);
}

static weft_status check_rank(const weft_comm *c, const char *op, const char *what, int32_t r)
{
	char who[256];

	if (r >= 0 && r < c->size)
		return WEFT_OK;
	return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "%s: %s: %s %d is not a rank of this "
				    "communicator (0..%d)", nccl_who(c, who, sizeof(who)), op, what,
				    (int)r, (int)c->size - 1);
}

static nccl_stage_side side(const weft_comm_buf *b, int used, int copy)
{
	if (!b || !used)
		return (nccl_stage_side){ 0 };
	return (nccl_stage_side){
		.data = b->data,
		.bytes = (size_t)b->count * weft_comm_dtype_size(b->dtype),
		.host = b->device == WEFT_COMM_DEVICE_CPU,
		.used = 1,
		.copy = copy,
	};
}

/* The staging plan of a call reading send (when copy_in) and writing recv
 * (when copy_out); a NULL side takes no part. */
static void plan(struct nccl_call *k, int copy_in, int copy_out)
{
	nccl_stage_side s = side(k->send, k->send != NULL, copy_in);
	nccl_stage_side r = side(k->recv, k->recv != NULL, copy_out);

	nccl_stage_plan_make(&s, &r, &k->plan);
}

static ncclResult_t do_all_reduce(weft_comm *c, const struct nccl_call *k)
{
	return ncclAllReduce(k->sdev, k->rdev, (size_t)k->recv->count,
			     nccl_type(k->recv->dtype), nccl_op(k->redop), c->nc, c->stream);
}

static ncclResult_t do_reduce_scatter(weft_comm *c, const struct nccl_call *k)
{
	return ncclReduceScatter(k->sdev, k->rdev, (size_t)k->recv->count,
				 nccl_type(k->recv->dtype), nccl_op(k->redop), c->nc, c->stream);
}

static ncclResult_t do_all_gather(weft_comm *c, const struct nccl_call *k)
{
	return ncclAllGather(k->sdev, k->rdev, (size_t)k->send->count,
			     nccl_type(k->send->dtype), c->nc, c->stream);
}

static ncclResult_t do_broadcast(weft_comm *c, const struct nccl_call *k)
{
	return ncclBroadcast(k->sdev, k->rdev, (size_t)k->send->count,
			     nccl_type(k->send->dtype), k->peer, c->nc, c->stream);
}

static ncclResult_t do_send(weft_comm *c, const struct nccl_call *k)
{
	return ncclSend(k->sdev, (size_t)k->send->count, nccl_type(k->send->dtype), k->peer,
			c->nc, c->stream);
}

static ncclResult_t do_recv(weft_comm *c, const struct nccl_call *k)
{
	return ncclRecv(k->rdev, (size_t)k->recv->count, nccl_type(k->recv->dtype), k->peer,
			c->nc, c->stream);
}

/* One group: a send and a receive per peer, so NCCL schedules them as one
 * operation (the same grouping serves bucketed collectives). */
static ncclResult_t do_all_to_all(weft_comm *c, const struct nccl_call *k)
{
		size_t n = (size_t)(k->send->count / c->size), es = weft_comm_dtype_size(k->send->dtype);
	ncclDataType_t t = nccl_type(k->send->dtype);
	ncclResult_t r = ncclGroupStart(), e;

	for (int32_t j = 0; j < c->size && (r == ncclSuccess || r == ncclInProgress); j++) {
		r = ncclSend((const char *)k->sdev + (size_t)j * n * es, n, t, j, c->nc,
			     c->stream);
		if (r == ncclSuccess || r == ncclInProgress)
			r = ncclRecv((char *)k->rdev + (size_t)j * n * es, n, t, j, c->nc,
				     c->stream);
	}
	e = ncclGroupEnd();
	return r == ncclSuccess || r == ncclInProgress ? e : r;
}

static ncclResult_t do_barrier(weft_comm *c, const struct nccl_call *k)
{
	(void)k;
	return ncclAllReduce(c->barrier_buf, c->barrier_buf, 1, ncclInt32, ncclSum, c->nc,
			     c->stream);
}

static void describe(char *buf, size_t len, const char *op, const weft_comm_buf *b,
		     const weft_comm_redop *redop)
{
	if (redop)
		snprintf(buf, len, "%s (%s x %lld, %s)", op, weft_comm_dtype_name(b->dtype),
			 (long long)b->count, weft_comm_redop_name(*redop));
	else
		snprintf(buf, len, "%s (%s x %lld)", op, weft_comm_dtype_name(b->dtype),
			 (long long)b->count);
}

weft_status nccl_all_reduce(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			    weft_comm_redop op, weft_comm_work **work)
{
	struct nccl_call k = { .send = s, .recv = r, .redop = op };
	char what[128];
	weft_status st;

	if ((st = check_pair(c, "all_reduce", s, r, 1, 1)) ||
	    (st = check_redop(c, "all_reduce", op)))
		return st;
	describe(what, sizeof(what), "all_reduce", r, &op);
	plan(&k, 1, 1);
	return nccl_issue(c, what, do_all_reduce, &k, work);
}

weft_status nccl_reduce_scatter(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
				weft_comm_redop op, weft_comm_work **work)
{
	struct nccl_call k = { .send = s, .recv = r, .redop = op };
	char what[128];
	weft_status st;

	if ((st = check_pair(c, "reduce_scatter", s, r, 1, c->size)) ||
	    (st = check_redop(c, "reduce_scatter", op)))
		return st;
	describe(what, sizeof(what), "reduce_scatter", r, &op);
	plan(&k, 1, 1);
	return nccl_issue(c, what, do_reduce_scatter, &k, work);
}

weft_status nccl_all_gather(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			    weft_comm_work **work)
{
	struct nccl_call k = { .send = s, .recv = r };
	char what[128];
	weft_status st;

	if ((st = check_pair(c, "all_gather", s, r, c->size, 1)))
		return st;
	describe(what, sizeof(what), "all_gather", r, NULL);
	plan(&k, 1, 1);
	return nccl_issue(c, what, do_all_gather, &k, work);
}

weft_status nccl_broadcast(weft_comm *c, const weft_comm_buf *b, int32_t root,
			   weft_comm_work **work)
{
	struct nccl_call k = { .send = b, .recv = b, .peer = root };
	char what[128];
	weft_status st;

	if ((st = check_buf(c, "broadcast", "buf", b)) ||
	    (st = check_rank(c, "broadcast", "root", root)))
		return st;
	describe(what, sizeof(what), "broadcast", b, NULL);
	/* the root sends its data, the others receive: one copy each */
	plan(&k, c->rank == root, c->rank != root);
	return nccl_issue(c, what, do_broadcast, &k, work);
}

weft_status nccl_send(weft_comm *c, const weft_comm_buf *b, int32_t peer, weft_comm_work **work)
{
	struct nccl_call k = { .send = b, .peer = peer };
	char what[128];
	weft_status st;

	if ((st = check_buf(c, "send", "buf", b)) || (st = check_rank(c, "send", "peer", peer)))
		return st;
	snprintf(what, sizeof(what), "send to rank %d (%s x %lld)", (int)peer,
		 weft_comm_dtype_name(b->dtype), (long long)b->count);
	plan(&k, 1, 0);
	return nccl_issue(c, what, do_send, &k, work);
}

weft_status nccl_recv(weft_comm *c, const weft_comm_buf *b, int32_t peer, weft_comm_work **work)
{
	struct nccl_call k = { .recv = b, .peer = peer };
	char what[128];
	weft_status st;

	if ((st = check_buf(c, "recv", "buf", b)) || (st = check_rank(c, "recv", "peer", peer)))
		return st;
	snprintf(what, sizeof(what), "recv from rank %d (%s x %lld)", (int)peer,
		 weft_comm_dtype_name(b->dtype), (long long)b->count);
	plan(&k, 0, 1);
	return nccl_issue(c, what, do_recv, &k, work);
}

weft_status nccl_all_to_all(weft_comm *c, const weft_comm_buf *s, const weft_comm_buf *r,
			    weft_comm_work **work)
{
	struct nccl_call k = { .send = s, .recv = r };
	char what[128], who[256];
	weft_status st;

	if ((st = check_pair(c, "all_to_all", s, r, 1, 1)))
		return st;
	if (s->count % c->size)
		return nccl_host->error_set(WEFT_ERR_SHAPE, "%s: all_to_all: %lld elements do not "
					    "split into %d equal blocks", nccl_who(c, who, sizeof(who)),
					    (long long)s->count, (int)c->size);
	if (s->data == r->data && s->count)
		return nccl_host->error_set(WEFT_ERR_INVALID_ARG, "%s: all_to_all cannot run in place; "
					    "give it separate send and recv buffers",
					    nccl_who(c, who, sizeof(who)));
	describe(what, sizeof(what), "all_to_all", r, NULL);
	plan(&k, 1, 1);
	return nccl_issue(c, what, do_all_to_all, &k, work);
}

weft_status nccl_barrier(weft_comm *c, weft_comm_work **work)
{
	return nccl_issue(c, "barrier", do_barrier, NULL, work);
}
