/* optim_builtin.so - the built-in optimizers: sgd, adam, adamw, lion. */
#include "builtin_impl.h"

static const weft_plugin_entry_item items[] = {
	{ .kind = WEFT_PLUGIN_OPTIM, .vtable = &optim_sgd_ops },
	{ .kind = WEFT_PLUGIN_OPTIM, .vtable = &optim_adam_ops },
	{ .kind = WEFT_PLUGIN_OPTIM, .vtable = &optim_adamw_ops },
	{ .kind = WEFT_PLUGIN_OPTIM, .vtable = &optim_lion_ops },
};

WEFT_PLUGIN_NAMES("optim:sgd optim:adam optim:adamw optim:lion");

static const weft_plugin_desc desc = {
	.head = WEFT_PLUGIN_HEAD(weft_plugin_desc, "optim_builtin"),
	.count = sizeof(items) / sizeof(items[0]),
	.items = items,
};

/* Records the host table every optimizer reads its config and reports its
 * errors through, and describes the four optimizers. Called once by the
 * loader after dlopen. */
WEFT_PLUGIN_ENTRY(host)
{
	optim_host = host;
	return &desc;
}
