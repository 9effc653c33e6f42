/* The replicated strategies plugin: single (one process), ddp (one process
 * per device, gradients all-reduced in buckets), dp (one process, one thread
 * per device). */
#include "replicated.h"

extern const weft_strategy_ops weft_strategy_single;
extern const weft_strategy_ops weft_strategy_ddp;
extern const weft_strategy_ops weft_strategy_dp;

static const weft_plugin_entry_item items[] = {
	{ .kind = WEFT_PLUGIN_STRATEGY, .vtable = &weft_strategy_single },
	{ .kind = WEFT_PLUGIN_STRATEGY, .vtable = &weft_strategy_ddp },
	{ .kind = WEFT_PLUGIN_STRATEGY, .vtable = &weft_strategy_dp },
};

WEFT_PLUGIN_NAMES("strategy:single strategy:ddp strategy:dp");

static const weft_plugin_desc desc = {
	.head = WEFT_PLUGIN_HEAD(weft_plugin_desc, "replicated strategies"),
	.count = sizeof(items) / sizeof(items[0]),
	.items = items,
};

WEFT_PLUGIN_ENTRY(host)
{
	g_host = host;
	return &desc;
}
