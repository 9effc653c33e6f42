/* comm backend "counting": wraps another comm backend, hands it every call
 * unchanged, and counts the calls and bytes of each kind of collective.
 * When a communicator is destroyed it logs one line per collective kind
 * (at info level, on every rank):
 *
 *     counting: comm 'world-r0' rank 1/2 over 'gloo': all_reduce 12 calls 2400 bytes
 *
 * and, with log_each: true, one debug line per call as it is issued.
 * Bytes are what this rank hands to the backend: the send buffer of
 * all_reduce, reduce_scatter, all_gather, all_to_all and send, the buffer
 * of broadcast and recv; barrier moves 0.
 *
 *     trainer:
 *       comm: {name: counting, inner: gloo, log_each: false}
 *
 * Keys: inner (default gloo: the backend that does the work, any comm
 * plugin but counting itself), log_each (default false).
 *
 * It finds the inner backend with host->find_plugin, appended in plugin
 * ABI 1.1: on an older weft, init fails saying so. Work handles are the
 * inner backend's own, so wait and test go to that backend: every
 * counting communicator of a process must wrap the same inner backend.
 * split is left to the host (it builds the new group through the store
 * and calls init again with the same options). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/comm.h>

enum {
	OP_ALL_REDUCE,
	OP_REDUCE_SCATTER,
	OP_ALL_GATHER,
	OP_BROADCAST,
	OP_SEND,
	OP_RECV,
	OP_ALL_TO_ALL,
	OP_BARRIER,
	OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
	"all_reduce", "reduce_scatter", "all_gather", "broadcast",
	"send", "recv", "all_to_all", "barrier",
};

static const weft_host *g_host;
/* The inner backend, fixed by the first init (see the top comment). */
static const weft_comm_ops *g_inner;

struct weft_comm {
	weft_comm *inner;
	char name[128];
	int log_each;
	_Atomic int64_t calls[OP_COUNT];
	_Atomic int64_t bytes[OP_COUNT];
};

static int64_t buf_bytes(const weft_comm_buf *b)
{
	return b ? b->count * (int64_t)weft_comm_dtype_size(b->dtype) : 0;
}

/* Counts one call; with log_each, logs it. Never allocates. */
static void count(weft_comm *c, int op, const weft_comm_buf *b)
{
	int64_t n = buf_bytes(b);

	atomic_fetch_add_explicit(&c->calls[op], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->bytes[op], n, memory_order_relaxed);
	if (c->log_each && g_host->log_enabled(WEFT_LOG_DEBUG))
		g_host->log(WEFT_LOG_DEBUG, "counting: comm '%s' %s %" PRId64 " bytes (%s)",
			    c->name, op_names[op], n, b ? weft_comm_dtype_name(b->dtype) : "-");
}

static weft_status find_inner(const char *name, const weft_comm_ops **out)
{
	const void *vt = NULL;
	weft_status st;

	if (!strcmp(name, "counting"))
		return g_host->error_set(WEFT_ERR_CONFIG,
					 "comm 'counting': inner: counting would wrap itself; name "
					 "the backend that does the work (inner: gloo)");
	if (!WEFT_HAS_MEMBER(g_host, weft_host, find_plugin) || !g_host->find_plugin)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "comm 'counting' needs weft plugin ABI 1.1 or newer "
					 "(host->find_plugin) to load its inner backend '%s'; this "
					 "weft has ABI %u.%u: upgrade weft",
					 name, WEFT_ABI_VERSION_MAJOR(g_host->head.abi_version),
					 WEFT_ABI_VERSION_MINOR(g_host->head.abi_version));
	st = g_host->find_plugin(WEFT_PLUGIN_COMM, name, &vt);
	if (st)
		return g_host->error_wrap(st, "comm 'counting': inner backend");
	*out = vt;
	return WEFT_OK;
}

static weft_status counting_init(const weft_comm_init_args *args, weft_comm **out)
{
	const weft_cfg *opts = args->struct_size >= offsetof(weft_comm_init_args, options) +
			       sizeof(args->options) ? args->options : NULL;
	const char *inner_name = "gloo";
	const weft_comm_ops *inner = NULL;
	weft_comm *c;
	int log_each = 0;
	weft_status st;

	st = g_host->cfg_str(opts, "inner", "gloo", &inner_name);
	if (!st)
		st = g_host->cfg_bool(opts, "log_each", 0, &log_each);
	if (!st)
		st = find_inner(inner_name, &inner);
	if (st)
		return st;
	if (g_inner && g_inner != inner)
		return g_host->error_set(WEFT_ERR_UNSUPPORTED,
					 "comm 'counting': this process already wraps '%s', now "
					 "asked to wrap '%s'; all counting communicators of a "
					 "process must wrap one backend",
					 g_inner->head.name, inner->head.name);
	c = calloc(1, sizeof(*c));
	if (!c)
		return g_host->error_set(WEFT_ERR_NOMEM, "comm 'counting': out of memory");
	snprintf(c->name, sizeof(c->name), "%s", args->name ? args->name : "?");
	c->log_each = log_each;
	st = inner->init(args, &c->inner);
	if (st) {
		free(c);
		return st;
	}
	g_inner = inner;
	*out = c;
	return WEFT_OK;
}

static weft_status counting_all_reduce(weft_comm *c, const weft_comm_buf *send,
				       const weft_comm_buf *recv, weft_comm_redop op,
				       weft_comm_work **work)
{
	count(c, OP_ALL_REDUCE, send);
	return g_inner->all_reduce(c->inner, send, recv, op, work);
}

static weft_status counting_reduce_scatter(weft_comm *c, const weft_comm_buf *send,
					   const weft_comm_buf *recv, weft_comm_redop op,
					   weft_comm_work **work)
{
	count(c, OP_REDUCE_SCATTER, send);
	return g_inner->reduce_scatter(c->inner, send, recv, op, work);
}

static weft_status counting_all_gather(weft_comm *c, const weft_comm_buf *send,
				       const weft_comm_buf *recv, weft_comm_work **work)
{
	count(c, OP_ALL_GATHER, send);
	return g_inner->all_gather(c->inner, send, recv, work);
}

static weft_status counting_broadcast(weft_comm *c, const weft_comm_buf *buf, int32_t root,
				      weft_comm_work **work)
{
	count(c, OP_BROADCAST, buf);
	return g_inner->broadcast(c->inner, buf, root, work);
}

static weft_status counting_send(weft_comm *c, const weft_comm_buf *buf, int32_t peer,
				 weft_comm_work **work)
{
	count(c, OP_SEND, buf);
	return g_inner->send(c->inner, buf, peer, work);
}

static weft_status counting_recv(weft_comm *c, const weft_comm_buf *buf, int32_t peer,
				 weft_comm_work **work)
{
	count(c, OP_RECV, buf);
	return g_inner->recv(c->inner, buf, peer, work);
}

static weft_status counting_all_to_all(weft_comm *c, const weft_comm_buf *send,
				       const weft_comm_buf *recv, weft_comm_work **work)
{
	count(c, OP_ALL_TO_ALL, send);
	return g_inner->all_to_all(c->inner, send, recv, work);
}

static weft_status counting_barrier(weft_comm *c, weft_comm_work **work)
{
	count(c, OP_BARRIER, NULL);
	return g_inner->barrier(c->inner, work);
}

static weft_status counting_wait(weft_comm_work *work, int64_t timeout_ms)
{
	return g_inner->wait(work, timeout_ms);
}

static weft_status counting_test(weft_comm_work *work, int *done)
{
	return g_inner->test(work, done);
}

static void counting_abort(weft_comm *c)
{
	g_inner->abort(c->inner);
}

static int32_t counting_rank(const weft_comm *c)
{
	return g_inner->rank(c->inner);
}

static int32_t counting_size(const weft_comm *c)
{
	return g_inner->size(c->inner);
}

/* Logs the totals, then destroys the inner communicator. */
static void counting_destroy(weft_comm *c)
{
	int64_t total = 0;

	if (!c)
		return;
	for (int op = 0; op < OP_COUNT; op++) {
		int64_t n = atomic_load(&c->calls[op]), b = atomic_load(&c->bytes[op]);

		if (!n)
			continue;
		total += b;
		g_host->log(WEFT_LOG_INFO, "counting: comm '%s' rank %d/%d over '%s': %s %" PRId64
			    " calls %" PRId64 " bytes", c->name, (int)g_inner->rank(c->inner),
			    (int)g_inner->size(c->inner), g_inner->head.name, op_names[op], n, b);
	}
	g_host->log(WEFT_LOG_INFO, "counting: comm '%s' total %" PRId64 " bytes", c->name, total);
	g_inner->destroy(c->inner);
	free(c);
}

static const weft_comm_ops counting_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_comm_ops, "counting"),
	.init = counting_init,
	.split = NULL, /* the host splits through the store and calls init */
	.all_reduce = counting_all_reduce,
	.reduce_scatter = counting_reduce_scatter,
	.all_gather = counting_all_gather,
	.broadcast = counting_broadcast,
	.send = counting_send,
	.recv = counting_recv,
	.all_to_all = counting_all_to_all,
	.barrier = counting_barrier,
	.wait = counting_wait,
	.test = counting_test,
	.abort = counting_abort,
	.destroy = counting_destroy,
	.rank = counting_rank,
	.size = counting_size,
};

static const weft_plugin_entry_item items[] = {
	{ .kind = WEFT_PLUGIN_COMM, .vtable = &counting_ops },
};

#ifdef WEFT_PLUGIN_NAMES /* since ABI 1.3: lets weft index this file without loading it */
WEFT_PLUGIN_NAMES("comm:counting");
#endif

static const weft_plugin_desc desc = {
	.head = WEFT_PLUGIN_HEAD(weft_plugin_desc, "example: counting comm wrapper"),
	.count = sizeof(items) / sizeof(items[0]),
	.items = items,
};

WEFT_PLUGIN_ENTRY(host)
{
	g_host = host;
	return &desc;
}
