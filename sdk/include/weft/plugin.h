/* weft/plugin.h - the plugin ABI: entry symbol, vtable head, host services.
 *
 * A plugin is a shared object that exports one C symbol,
 *
 *     const weft_plugin_desc *weft_plugin_entry(const weft_host *host);
 *
 * returning a description of the plugins it provides (one or several, of
 * the kinds below). The host calls it once, right after dlopen. Every
 * vtable a plugin provides is a `static const struct` whose first member is
 * a weft_plugin_head: the ABI version it was built against, its own
 * sizeof, and its name as the config selects it ("ddp", "gloo", "adamw").
 *
 * Compatibility rules:
 * - Members are only ever appended to a vtable or to weft_host. A reader
 *   checks struct_size (WEFT_HAS_MEMBER) before touching a member that a
 *   newer minor version added; an absent or NULL optional member has the
 *   default its contract states.
 * - The host refuses a plugin whose ABI major differs from its own, naming
 *   both versions and the file; a newer minor is accepted if the members
 *   the host uses are there.
 * - A plugin never links against the core: everything it needs comes from
 *   the host services table it is given. It never calls exit() or abort(),
 *   never lets a C++ exception cross into C, and reports failure by
 *   returning a weft_status after host->error_set(...).
 */
#ifndef WEFT_PLUGIN_H
#define WEFT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include "weft/status.h"
#include "weft/log.h"
#include "weft/memory.h"
#include "weft/config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_ABI_MAJOR 1
#define WEFT_ABI_MINOR 7
#define WEFT_ABI_MAKE(major, minor) (((uint32_t)(major) << 16) | (uint32_t)(minor))
#define WEFT_ABI_VERSION WEFT_ABI_MAKE(WEFT_ABI_MAJOR, WEFT_ABI_MINOR)
#define WEFT_ABI_VERSION_MAJOR(v) ((uint32_t)(v) >> 16)
#define WEFT_ABI_VERSION_MINOR(v) ((uint32_t)(v) & 0xffffu)

/* Whether a struct that reports `struct_size` bytes contains `member`. */
#define WEFT_HAS_MEMBER(ptr, type, member) \
	((ptr)->head.struct_size >= offsetof(type, member) + sizeof(((type *)0)->member))

/* The first member of every vtable, of weft_host and weft_plugin_desc. */
typedef struct weft_plugin_head {
	uint32_t abi_version;  /* WEFT_ABI_VERSION the struct was built with */
	uint32_t struct_size;  /* sizeof the whole struct as its builder saw it */
	const char *name;      /* the name a config selects it by; static storage */
} weft_plugin_head;

/* Initializer for a head: WEFT_PLUGIN_HEAD(struct weft_optim_ops, "adamw") */
#define WEFT_PLUGIN_HEAD(type, nm) \
	{ .abi_version = WEFT_ABI_VERSION, .struct_size = (uint32_t)sizeof(type), .name = (nm) }

/* Kinds. Values are part of the ABI. */
typedef enum weft_plugin_kind {
	WEFT_PLUGIN_COMM = 1,     /* vtable: weft_comm_ops (weft/comm.h) */
	WEFT_PLUGIN_STRATEGY = 2, /* vtable: weft_strategy_ops (weft/strategy.h) */
	WEFT_PLUGIN_OPTIM = 3,    /* vtable: weft_optim_ops (weft/optim.h) */
	WEFT_PLUGIN_CALLBACK = 4, /* vtable: weft_callback_ops (weft/trainer.h); since ABI 1.1 */
	WEFT_PLUGIN_MODEL = 5     /* vtable: weft_module_ops (weft/trainer.h); since ABI 1.1 */
} weft_plugin_kind;

/* "comm", "strategy", "optim"; "unknown" otherwise. */
static inline const char *weft_plugin_kind_name(weft_plugin_kind kind)
{
	switch (kind) {
	case WEFT_PLUGIN_COMM: return "comm";
	case WEFT_PLUGIN_STRATEGY: return "strategy";
	case WEFT_PLUGIN_OPTIM: return "optim";
	case WEFT_PLUGIN_CALLBACK: return "callback";
	case WEFT_PLUGIN_MODEL: return "model";
	}
	return "unknown";
}

/* One plugin in a shared object. */
typedef struct weft_plugin_entry_item {
	weft_plugin_kind kind;
	const void *vtable; /* points at a struct starting with weft_plugin_head */
} weft_plugin_entry_item;

/* What weft_plugin_entry returns; static storage in the plugin. */
typedef struct weft_plugin_desc {
	weft_plugin_head head;  /* name: the package's name, for listings */
	size_t count;
	const weft_plugin_entry_item *items;
} weft_plugin_desc;

struct weft_tensor;
struct weft_params;
struct weft_ctx;
struct weft_hook_event;
struct weft_ctx_options;
struct weft_comm;     /* weft/comm.h (comm_split, since ABI 1.1) */
struct weft_comm_ops;
struct weft_kernel_table; /* weft/device.h (ctx_kernels, since ABI 1.1) */
struct weft_cuda_extras;  /* weft/cuda_extras.h (cuda_extras, since ABI 1.3) */

/* Services the host gives every plugin. Valid for the life of the process.
 * Members are only appended; check head.struct_size (WEFT_HAS_MEMBER)
 * before using a member newer than the ABI minor you need. */
typedef struct weft_host {
	weft_plugin_head head; /* name: "weft" */

	/* errors (weft/status.h) */
	weft_status (*error_set)(weft_status st, const char *fmt, ...) WEFT_PRINTF(2, 3);
	weft_status (*error_wrap)(weft_status st, const char *fmt, ...) WEFT_PRINTF(2, 3);
	const char *(*error_last)(void);

	/* logging (weft/log.h) */
	void (*log)(weft_log_level level, const char *fmt, ...) WEFT_PRINTF(2, 3);
	int (*log_enabled)(weft_log_level level);

	/* accounted memory (weft/memory.h) */
	void *(*mem_alloc)(weft_mem_category cat, size_t bytes);
	void *(*mem_calloc)(weft_mem_category cat, size_t bytes);
	void (*mem_free)(void *ptr);
	void (*mem_account)(weft_mem_category cat, int64_t delta);

	/* config access (weft/config.h); same contracts as the weft_cfg_* calls */
	const weft_cfg *(*cfg_get)(const weft_cfg *map, const char *key);
	weft_cfg_kind (*cfg_kind_of)(const weft_cfg *node);
	size_t (*cfg_size)(const weft_cfg *node);
	const weft_cfg *(*cfg_at)(const weft_cfg *node, size_t i);
	const char *(*cfg_key_at)(const weft_cfg *map, size_t i);
	const char *(*cfg_scalar)(const weft_cfg *node);
	const char *(*cfg_where)(const weft_cfg *node, char *buf, size_t len);
	weft_status (*cfg_int)(const weft_cfg *map, const char *key, int64_t def, int64_t *out);
	weft_status (*cfg_float)(const weft_cfg *map, const char *key, double def, double *out);
	weft_status (*cfg_bool)(const weft_cfg *map, const char *key, int def, int *out);
	weft_status (*cfg_str)(const weft_cfg *map, const char *key, const char *def, const char **out);
	weft_status (*cfg_choice)(const weft_cfg *map, const char *key, const char *const *choices,
				  const char *def, int *out);
	weft_status (*cfg_error)(const weft_cfg *node, const char *fmt, ...) WEFT_PRINTF(2, 3);
	void (*cfg_mark_used)(const weft_cfg *node);
	weft_status (*cfg_as_int)(const weft_cfg *node, int64_t *out);
	weft_status (*cfg_as_float)(const weft_cfg *node, double *out);
	weft_status (*cfg_as_str)(const weft_cfg *node, const char **out);

	/* ---- since ABI 1.0: tensors and autograd for strategies ----
	 * Same contracts as the weft_* functions of the same names in
	 * weft/tensor.h and weft/autograd.h. The hook type is
	 * weft_hook_fn (weft/autograd.h); `kind` is a weft_hook_kind. */
	size_t (*params_count)(const struct weft_params *ps);
	struct weft_tensor *(*params_at)(const struct weft_params *ps, size_t i);
	void (*params_flat)(const struct weft_params *ps, int dtype, struct weft_tensor **flat,
			    struct weft_tensor **flat_grad);
	int64_t (*params_numel)(const struct weft_params *ps, int dtype);
	weft_status (*params_zero_grad)(struct weft_params *ps);
	int64_t (*tensor_numel)(const struct weft_tensor *t);
	const char *(*shape_str)(const struct weft_tensor *t, char *buf, size_t len);
	weft_status (*ctx_add_hook)(struct weft_ctx *ctx, int kind,
				    weft_status (*fn)(struct weft_ctx *ctx,
						      const struct weft_hook_event *ev, void *user),
				    void *user, int64_t *handle);
	weft_status (*ctx_remove_hook)(struct weft_ctx *ctx, int64_t handle);
	void (*ctx_step_begin)(struct weft_ctx *ctx);
	weft_status (*autograd_flush)(struct weft_ctx *ctx);

	/* gradient clipping by global L2 norm (torch.nn.utils.clip_grad_norm_):
	 * clip_sum_squares adds sum(g^2) over n arrays in double (shards add
	 * partial sums); clip_coef turns a global sum of squares into the norm
	 * (*norm_out) and the factor to multiply gradients by (1 when no
	 * clipping is needed or the norm is not finite). */
	double (*clip_sum_squares)(const float *const *arrays, const int64_t *lens, size_t n);
	double (*clip_coef)(double sumsq, double max_norm, double *norm_out);

	/* ---- since ABI 1.1: finding another plugin ---- */

	/* Finds another plugin of `kind` named `name` in the registry this
	 * process runs with (the one that loaded the caller), so that a plugin
	 * can wrap or delegate to another one: a comm backend that counts
	 * bytes and hands every collective to "gloo". On success *vtable is
	 * that plugin's static vtable (check its head.struct_size like the
	 * host does before calling members newer than you need), borrowed
	 * until the registry is freed at the end of the run. Call it from
	 * create/init, not from a hot path: the first lookup may load every
	 * plugin on the search path (blocking on file I/O). Errors:
	 * WEFT_ERR_NOT_FOUND with the registry's message ("no comm plugin
	 * named 'glo' (did you mean 'gloo'?); available: ..."),
	 * WEFT_ERR_INVALID_ARG for a NULL name or vtable, WEFT_ERR_UNSUPPORTED
	 * when no registry is active (the plugin's entry was called directly,
	 * as in a unit test). Check WEFT_HAS_MEMBER(host, weft_host,
	 * find_plugin) first: a 1.0 host does not have it. */
	weft_status (*find_plugin)(weft_plugin_kind kind, const char *name, const void **vtable);

	/* ---- since ABI 1.1: contexts and autograd for pipeline stages ----
	 * Same contracts as weft_ctx_create, weft_ctx_free, weft_ctx_tensor,
	 * weft_tensor_requires_grad, weft_backward and weft_backward_from
	 * (weft/autograd.h); `dtype` is a weft_dtype. A pipeline strategy makes
	 * one context per micro-batch it holds in flight, so a micro-batch's
	 * activations are released when its backward is done. Check
	 * WEFT_HAS_MEMBER(host, weft_host, backward_from) first. */
	weft_status (*ctx_create)(const struct weft_ctx_options *opt, struct weft_ctx **out);
	void (*ctx_free)(struct weft_ctx *ctx);
	weft_status (*ctx_tensor)(struct weft_ctx *ctx, const char *name, int dtype, int32_t ndim,
				  const int64_t *shape, struct weft_tensor **out);
	void (*tensor_requires_grad)(struct weft_tensor *t, int on);
	weft_status (*backward)(struct weft_ctx *ctx, struct weft_tensor *loss);
	weft_status (*backward_from)(struct weft_ctx *ctx, struct weft_tensor *out,
				     const struct weft_tensor *grad);

	/* ---- since ABI 1.1: sub-communicators and tensor parallelism ----
	 * Check WEFT_HAS_MEMBER(host, weft_host, tp_gather_param) first.
	 *
	 * Splits `comm` (of backend `ops`; the world communicator a strategy
	 * is given, or one from an earlier comm_split) collectively: ranks
	 * passing the same color form a new communicator of the same backend,
	 * ordered by key (ties by rank); color < 0 gives *out = NULL. Every
	 * rank of comm must call it. Blocking (a rendezvous through the
	 * store). Free *out with comm_free, before comm. Errors:
	 * WEFT_ERR_UNSUPPORTED when comm was not made by the host; the
	 * backend's and the store's (naming a rank that did not take part). */
	weft_status (*comm_split)(const struct weft_comm_ops *ops, struct weft_comm *comm,
				  int32_t color, int32_t key, struct weft_comm **out);
	/* Frees a communicator from comm_split. NULL is ignored. */
	void (*comm_free)(struct weft_comm *sub);
	/* The tensor-parallel layout the model owning `ps` was built with:
	 * *size 1 (rank 0, flags 0) for a whole model; else the tp size, this
	 * rank's tp coordinate and WEFT_TP_* flags (1: sequence parallel,
	 * 2: vocabulary parallel). */
	weft_status (*tp_info)(const struct weft_params *ps, int32_t *size, int32_t *rank,
			       uint32_t *flags);
	/* Binds the tp communicator (borrowed; keep it until the model is no
	 * longer run, or unbind with comm NULL) the model's communication ops
	 * use. Errors:
	 * WEFT_ERR_INVALID_ARG for a whole model, or when the communicator's
	 * size or rank differ from the model's (naming both). */
	weft_status (*tp_bind)(struct weft_params *ps, const struct weft_comm_ops *ops,
			       struct weft_comm *comm);
	/* How parameter `index` of ps is split: 0 whole on every rank, 1 rows,
	 * 2 columns, 3 rows of packed q|k|v, 4 (since ABI 1.5) rows of packed
	 * parts of any sizes, some shared (tp_param_runs). *grad_partial: 1 when each rank
	 * holds a partial gradient of a whole parameter (sequence parallel
	 * layernorms and biases: sum it over the tp group). *full_numel: its
	 * elements when whole. */
	int (*tp_param_split)(const struct weft_params *ps, size_t index, int *grad_partial,
			      int64_t *full_numel);
	/* The model's tp collectives since the last reset, indexed
	 * [pass * 3 + kind] (pass 0 forward, 1 backward; kind 0 all-reduce, 1
	 * all-gather, 2 reduce-scatter): calls, elements of the whole tensors,
	 * bytes this rank contributed; reset = 1 zeroes them after reading.
	 * A whole model reports zeros. */
	void (*tp_stats)(const struct weft_params *ps, int reset, int64_t calls[6],
			 int64_t elements[6], int64_t bytes[6]);
	/* Collective over the bound tp communicator: parameter `index` (its
	 * gradient with grads = 1) whole, into host memory `full`
	 * (tp_param_split's full_numel floats) on every rank. Blocking. */
	weft_status (*tp_gather_param)(const struct weft_params *ps, size_t index, int grads,
				       float *full);

	/* ---- since ABI 1.1: layers for model plugins (weft/trainer.h) ----
	 * What a model written as a plugin needs to declare, initialise and run
	 * its layers. Same contracts as weft_params_add (weft/tensor.h) and the
	 * weft_op_* calls of the same names (weft/ops.h), weft_module_begin /
	 * end (weft/autograd.h); `dtype` is a weft_dtype. param_init_normal /
	 * _uniform fill a parameter from weft's counter-based RNG keyed by
	 * (seed, the parameter's name, element index), so values do not depend
	 * on devices or shards. Check WEFT_HAS_MEMBER(host, weft_host, op_reshape)
	 * first. */
	weft_status (*params_add)(struct weft_params *ps, const char *name, int dtype, int32_t ndim,
				  const int64_t *shape, struct weft_tensor **out);
	weft_status (*param_init_normal)(struct weft_tensor *t, uint64_t seed, float std);
	weft_status (*param_init_uniform)(struct weft_tensor *t, uint64_t seed, float bound);
	weft_status (*module_begin)(struct weft_ctx *ctx, const char *name, void *module_ptr);
	weft_status (*module_end)(struct weft_ctx *ctx, const char *name, void *module_ptr);
	weft_status (*op_matmul)(struct weft_ctx *ctx, struct weft_tensor *a, struct weft_tensor *b,
				 struct weft_tensor **out);
	weft_status (*op_linear)(struct weft_ctx *ctx, struct weft_tensor *x, struct weft_tensor *w,
				 struct weft_tensor *b, struct weft_tensor **out);
	weft_status (*op_add)(struct weft_ctx *ctx, struct weft_tensor *a, struct weft_tensor *b,
			      struct weft_tensor **out);
	weft_status (*op_mul)(struct weft_ctx *ctx, struct weft_tensor *a, struct weft_tensor *b,
			      struct weft_tensor **out);
	weft_status (*op_scale)(struct weft_ctx *ctx, struct weft_tensor *x, float alpha,
				struct weft_tensor **out);
	weft_status (*op_bias)(struct weft_ctx *ctx, struct weft_tensor *x, struct weft_tensor *b,
			       struct weft_tensor **out);
	weft_status (*op_relu)(struct weft_ctx *ctx, struct weft_tensor *x, struct weft_tensor **out);
	weft_status (*op_gelu)(struct weft_ctx *ctx, struct weft_tensor *x, struct weft_tensor **out);
	weft_status (*op_softmax)(struct weft_ctx *ctx, struct weft_tensor *x,
				  struct weft_tensor **out);
	weft_status (*op_layernorm)(struct weft_ctx *ctx, struct weft_tensor *x, struct weft_tensor *w,
				    struct weft_tensor *b, float eps, struct weft_tensor **out);
	weft_status (*op_embedding)(struct weft_ctx *ctx, struct weft_tensor *ids,
				    struct weft_tensor *table, struct weft_tensor **out);
	weft_status (*op_attention)(struct weft_ctx *ctx, struct weft_tensor *qkv, int64_t n_head,
				    struct weft_tensor **out);
	weft_status (*op_dropout)(struct weft_ctx *ctx, struct weft_tensor *x, float p,
				  struct weft_tensor **out);
	weft_status (*op_cross_entropy)(struct weft_ctx *ctx, struct weft_tensor *logits,
					struct weft_tensor *targets, int64_t ignore_index,
					struct weft_tensor **out);
	weft_status (*op_reshape)(struct weft_ctx *ctx, struct weft_tensor *x, int32_t ndim,
				  const int64_t *shape, struct weft_tensor **out);

	/* ---- since ABI 1.1: a context's kernel table (device optimizers);
	 * check WEFT_HAS_MEMBER(host, weft_host, ctx_kernels) first. ----
	 * The kernel table (struct weft_kernel_table, weft/device.h) a context
	 * runs its ops on and that table's device context, borrowed for the
	 * context's life: a strategy launches device work ordered with the
	 * context's ops (the fused optimizer step on its stream) and allocates
	 * device memory through it. Never fails; never blocks. */
	void (*ctx_kernels)(const struct weft_ctx *ctx, const struct weft_kernel_table **kernels,
			    void **kctx);

	/* ---- since ABI 1.1: host-side parallel loops; check
	 * WEFT_HAS_MEMBER(host, weft_host, parallel_for) first. ----
	 * Host-side work over [0, n) split over the process's CPU threads
	 * (trainer.threads), as weft_cpu_parallel_for (weft/device.h): an
	 * optimizer step over disjoint ranges of the flat buffers, say. */
	void (*parallel_for)(int64_t n, int64_t grain,
			     void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

	/* ---- since ABI 1.3: the CUDA kernel library's extras; check
	 * WEFT_HAS_MEMBER(host, weft_host, cuda_extras) first. ----
	 * The extras table (struct weft_cuda_extras, weft/cuda_extras.h: the
	 * fused AdamW step, the loss-scale check, the clipping sum of squares,
	 * pinned host memory and synchronous staging copies) of the CUDA
	 * kernel library this process computes with, in *out, borrowed for
	 * the life of the process; the library's path in *file (static
	 * storage, for messages; file may be NULL). The core finds it once,
	 * in the object holding the CUDA kernel table; it never loads the
	 * library (device memory exists only once a tensor on a cuda device
	 * loaded it). Check WEFT_HAS_MEMBER(ex, weft_cuda_extras, member) and
	 * that the member is not NULL before calling one. Thread-safe; does
	 * not block. Errors (*out NULL): WEFT_ERR_UNSUPPORTED saying why: the
	 * library is not loaded in this process, or it has no extras (built
	 * for an older weft: rebuild it). */
	weft_status (*cuda_extras)(const struct weft_cuda_extras **out, const char **file);

	/* ---- since ABI 1.5: packed parts under tensor parallelism; check
	 * WEFT_HAS_MEMBER(host, weft_host, tp_param_runs) first. ----
	 * The shard of a parameter of split kind 4 (tp_param_split) on this
	 * rank as runs (at most 3): run k is count[k] elements at element
	 * local[k] of the shard, elements [whole[k], whole[k] + count[k]) of
	 * the whole parameter; shared[k] 1 for a part every tp rank holds
	 * whole with a partial gradient (sum it over the tp group, count it
	 * once in a norm: grouped-query attention's k and v when there are
	 * fewer key/value heads than tp ranks), 0 for this rank's block of a
	 * split part. Returns the number of runs; 0 for other kinds. Does not
	 * block. */
	int (*tp_param_runs)(const struct weft_params *ps, size_t index, int64_t local[3],
			     int64_t whole[3], int64_t count[3], int shared[3]);

	/* ---- since ABI 1.5: device memory counted apart; check
	 * WEFT_HAS_MEMBER(host, weft_host, mem_account_device) first, and use
	 * mem_account on a host without it. ----
	 * As mem_account, for bytes on a device (a device allocator's blocks,
	 * not pinned host memory): counted in the totals as mem_account's are
	 * and in the device's own counters per category (weft/memory.h,
	 * weft_mem_account_device), so summary.json can show the host/device
	 * split. Thread-safe; does not block. */
	void (*mem_account_device)(weft_mem_category cat, int64_t delta);
} weft_host;

/* Counts delta bytes of device memory under cat through host: its
 * mem_account_device, or mem_account on a host older than ABI 1.5. */
static inline void weft_host_account_device(const weft_host *host, weft_mem_category cat,
					    int64_t delta)
{
	if (WEFT_HAS_MEMBER(host, weft_host, mem_account_device) && host->mem_account_device)
		host->mem_account_device(cat, delta);
	else
		host->mem_account(cat, delta);
}

/* The entry symbol's name and type. */
#define WEFT_PLUGIN_ENTRY_SYMBOL "weft_plugin_entry"
typedef const weft_plugin_desc *(*weft_plugin_entry_fn)(const weft_host *host);

#if defined(__GNUC__)
#define WEFT_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define WEFT_PLUGIN_EXPORT
#endif

/* Declares, in a section of the shared object (".weft_plugins"), the
 * plugins its entry returns, as "kind:name" words separated by spaces:
 *     WEFT_PLUGIN_NAMES("strategy:single strategy:ddp strategy:dp");
 * Once per plugin file, at file scope. The host reads the section without
 * loading the file and loads (dlopen, constructors, entry) only the files
 * that provide what a run names; a file whose entry returns a plugin it
 * did not declare, or declares one it does not return, is refused. A
 * file without the section (built before ABI 1.3) is loaded only when a
 * name is found in no declaring file, or for a listing (`weft plugins`).
 * Since ABI 1.3 (a macro: the host of any 1.x version ignores it). */
#define WEFT_PLUGIN_NAMES(words) \
	__attribute__((used, section(".weft_plugins"))) static const char \
		weft_plugin_names_[] = "weft-plugins 1\n" words

/* Declares the entry symbol in a plugin's source:
 *     WEFT_PLUGIN_ENTRY(host) { g_host = host; return &desc; }           */
#define WEFT_PLUGIN_ENTRY(hostvar) \
	WEFT_PLUGIN_EXPORT const weft_plugin_desc *weft_plugin_entry(const weft_host *hostvar)

/* The host's own services table (libweft). */
WEFT_API const weft_host *weft_host_services(void);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_PLUGIN_H */
