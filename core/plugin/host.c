/* The host services table every plugin receives (weft/plugin.h). */
#include "weft/plugin.h"

static const weft_host host = {
	.head = WEFT_PLUGIN_HEAD(weft_host, "weft"),
	.error_set = weft_error_set,
	.error_wrap = weft_error_wrap,
	.error_last = weft_error_last,
	.log = weft_log,
	.log_enabled = weft_log_enabled,
	.mem_alloc = weft_mem_alloc,
	.mem_calloc = weft_mem_calloc,
	.mem_free = weft_mem_free,
	.mem_account = weft_mem_account,
	.cfg_get = weft_cfg_get,
	.cfg_kind_of = weft_cfg_kind_of,
	.cfg_size = weft_cfg_size,
	.cfg_at = weft_cfg_at,
	.cfg_key_at = weft_cfg_key_at,
	.cfg_scalar = weft_cfg_scalar,
	.cfg_where = weft_cfg_where,
	.cfg_int = weft_cfg_int,
	.cfg_float = weft_cfg_float,
	.cfg_bool = weft_cfg_bool,
	.cfg_str = weft_cfg_str,
	.cfg_choice = weft_cfg_choice,
	.cfg_error = weft_cfg_error,
	.cfg_mark_used = weft_cfg_mark_used,
	.cfg_as_int = weft_cfg_as_int,
	.cfg_as_float = weft_cfg_as_float,
	.cfg_as_str = weft_cfg_as_str,
};

const weft_host *weft_host_services(void)
{
	return &host;
}
