/* The pipeline strategies plugin: pp, and hybrid (dp x pp meshes). */
#include "pp.h"

extern const weft_strategy_ops weft_strategy_pp;
extern const weft_strategy_ops weft_strategy_hybrid;

static const weft_plugin_entry_item items[] = {
	{ .kind = WEFT_PLUGIN_STRATEGY, .vtable = &weft_strategy_pp },
	{ .kind = WEFT_PLUGIN_STRATEGY, .vtable = &weft_strategy_hybrid },
};

WEFT_PLUGIN_NAMES("strategy:pp strategy:hybrid");

static const weft_plugin_desc desc = {
	.head = WEFT_PLUGIN_HEAD(weft_plugin_desc, "pipeline strategies"),
	.count = sizeof(items) / sizeof(items[0]),
	.items = items,
};

WEFT_PLUGIN_ENTRY(host)
{
	g_host = host;
	return &desc;
}
