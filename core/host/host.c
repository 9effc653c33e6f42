/* The host services table every plugin and kernel library receives
 * (weft/plugin.h): the facade of the core below it (host/host.h). */
#include "host/host.h"
#include "weft/plugin.h"
#include "weft/autograd.h"
#include "weft/tensor.h"
#include "train/clip.h"
#include "tp/tp.h"
#include "nn/nn_impl.h"
#include "tensor/cuda_extras.h"
#include "weft/ops.h"

static weft_status host_params_add(weft_params *ps, const char *name, int dtype, int32_t ndim,
				   const int64_t *shape, weft_tensor **out)
{
	return weft_params_add(ps, name, (weft_dtype)dtype, ndim, shape, out);
}

static void host_ctx_kernels(const weft_ctx *ctx, const weft_kernel_table **kernels, void **kctx)
{
	*kernels = weft_ctx_kernels(ctx);
	*kctx = weft_ctx_kctx(ctx);
}

/* Adapters where the table spells an enum as int (the table cannot name
 * the enums of headers that include plugin.h). */
static void host_params_flat(const weft_params *ps, int dtype, weft_tensor **flat,
			     weft_tensor **flat_grad)
{
	weft_params_flat(ps, (weft_dtype)dtype, flat, flat_grad);
}

static int64_t host_params_numel(const weft_params *ps, int dtype)
{
	return weft_params_numel(ps, (weft_dtype)dtype);
}

static weft_status host_ctx_tensor(weft_ctx *ctx, const char *name, int dtype, int32_t ndim,
				   const int64_t *shape, weft_tensor **out)
{
	return weft_ctx_tensor(ctx, name, (weft_dtype)dtype, ndim, shape, out);
}

static weft_status host_ctx_add_hook(weft_ctx *ctx, int kind, weft_hook_fn fn, void *user,
				     int64_t *handle)
{
	return weft_ctx_add_hook(ctx, (weft_hook_kind)kind, fn, user, handle);
}

/* Set by core/plugin (plugin/hooks.c): the registry lives above this file. */
static weft_host_finder_fn plugin_finder;

void weft_host_set_plugin_finder(weft_host_finder_fn fn)
{
	plugin_finder = fn;
}

weft_status weft_host_no_registry(const char *name)
{
	return weft_error_set(WEFT_ERR_UNSUPPORTED,
			      "find_plugin('%s'): no plugin registry is active in this "
			      "process; plugins can find each other only when weft loaded "
			      "them (weft fit, or a weft_registry in a test)",
			      name);
}

/* host->find_plugin (ABI 1.1). */
static weft_status host_find_plugin(weft_plugin_kind kind, const char *name, const void **vtable)
{
	if (!name || !vtable)
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "find_plugin: name and vtable must not be NULL");
	if (!plugin_finder)
		return weft_host_no_registry(name);
	return plugin_finder(kind, name, vtable);
}

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
	.params_count = weft_params_count,
	.params_at = weft_params_at,
	.params_flat = host_params_flat,
	.params_numel = host_params_numel,
	.params_zero_grad = weft_params_zero_grad,
	.tensor_numel = weft_tensor_numel,
	.shape_str = weft_shape_str,
	.ctx_add_hook = host_ctx_add_hook,
	.ctx_remove_hook = weft_ctx_remove_hook,
	.ctx_step_begin = weft_ctx_step_begin,
	.autograd_flush = weft_autograd_flush,
	.clip_sum_squares = weft_clip_sum_squares,
	.clip_coef = weft_clip_coef,
	.find_plugin = host_find_plugin,
	.ctx_create = weft_ctx_create,
	.ctx_free = weft_ctx_free,
	.ctx_tensor = host_ctx_tensor,
	.tensor_requires_grad = weft_tensor_requires_grad,
	.backward = weft_backward,
	.backward_from = weft_backward_from,
	.comm_split = weft_tp_host_comm_split,
	.comm_free = weft_tp_host_comm_free,
	.tp_info = weft_tp_host_info,
	.tp_bind = weft_tp_host_bind,
	.tp_param_split = weft_tp_host_param_split,
	.tp_stats = weft_tp_host_stats,
	.tp_gather_param = weft_tp_host_gather_param,
	.params_add = host_params_add,
	.param_init_normal = nn_init_normal,
	.param_init_uniform = nn_init_uniform,
	.module_begin = weft_module_begin,
	.module_end = weft_module_end,
	.op_matmul = weft_op_matmul,
	.op_linear = weft_op_linear,
	.op_add = weft_op_add,
	.op_mul = weft_op_mul,
	.op_scale = weft_op_scale,
	.op_bias = weft_op_bias,
	.op_relu = weft_op_relu,
	.op_gelu = weft_op_gelu,
	.op_softmax = weft_op_softmax,
	.op_layernorm = weft_op_layernorm,
	.op_embedding = weft_op_embedding,
	.op_attention = weft_op_attention,
	.op_dropout = weft_op_dropout,
	.op_cross_entropy = weft_op_cross_entropy,
	.op_reshape = weft_op_reshape,
	.ctx_kernels = host_ctx_kernels,
	.parallel_for = weft_cpu_parallel_for,
	.cuda_extras = weft_cuda_extras_find,
	.tp_param_runs = weft_tp_host_param_runs,
	.mem_account_device = weft_mem_account_device,
};

const weft_host *weft_host_services(void)
{
	return &host;
}
