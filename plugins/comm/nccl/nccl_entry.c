/* The NCCL comm plugin's vtable and entry symbol, on top of the
 * communicators (nccl_comm.c) and the collectives (nccl_ops.c). */
#include "nccl_impl.h"

static int32_t nccl_rank(const weft_comm *c)
{
	return c->rank;
}

static int32_t nccl_size(const weft_comm *c)
{
	return c->size;
}

static const weft_comm_ops nccl_ops = {
	.head = WEFT_PLUGIN_HEAD(weft_comm_ops, "nccl"),
	.init = nccl_init,
	.split = NULL, /* the host builds groups through the store and calls init */
	.all_reduce = nccl_all_reduce,
	.reduce_scatter = nccl_reduce_scatter,
	.all_gather = nccl_all_gather,
	.broadcast = nccl_broadcast,
	.send = nccl_send,
	.recv = nccl_recv,
	.all_to_all = nccl_all_to_all,
	.barrier = nccl_barrier,
	.wait = nccl_wait,
	.test = nccl_test,
	.abort = nccl_abort,
	.destroy = nccl_destroy,
	.rank = nccl_rank,
	.size = nccl_size,
};

static const weft_plugin_entry_item nccl_items[] = {
	{ .kind = WEFT_PLUGIN_COMM, .vtable = &nccl_ops },
};

WEFT_PLUGIN_NAMES("comm:nccl");

static const weft_plugin_desc nccl_desc = {
	.head = WEFT_PLUGIN_HEAD(weft_plugin_desc, "comm-nccl"),
	.count = 1,
	.items = nccl_items,
};

WEFT_PLUGIN_ENTRY(host)
{
	nccl_host = host;
	return &nccl_desc;
}
