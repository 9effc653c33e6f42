/* builtin_impl.h - helpers shared by the built-in optimizers (internal).
 *
 * The built-in optimizers are one plugin, optim_builtin.so, that links
 * nothing of the core: everything comes through the host table handed to
 * weft_plugin_entry (entry.c), kept in optim_host.
 */
#ifndef WEFT_OPTIM_BUILTIN_IMPL_H
#define WEFT_OPTIM_BUILTIN_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include "weft/optim.h"

/* On the loops that update the elements: a version per x86-64 level, the
 * widest the machine runs picked at load time. The element updates take
 * no sums across elements and the plugin builds with -ffp-contract=off,
 * so every version rounds each element exactly as the baseline one does:
 * only the speed differs (AVX-512 does 16 sqrt/div at a time, the
 * baseline SSE2 4). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OPTIM_HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define OPTIM_HOT
#endif

/* The host services table; set by weft_plugin_entry before any create. */
extern const weft_host *optim_host;

extern const weft_optim_ops optim_sgd_ops;
extern const weft_optim_ops optim_adam_ops;
extern const weft_optim_ops optim_adamw_ops;
extern const weft_optim_ops optim_lion_ops;

/* Reads a float `key` of `section` (default `def` when absent) that must be
 * finite and within [lo, hi] (hi_open: [lo, hi)). Otherwise WEFT_ERR_CONFIG
 * at the value's file:line:col, followed by `advice`. */
weft_status optim_read_float(const weft_cfg *section, const char *key, double def, double lo,
			     double hi, int hi_open, const char *advice, double *out);

/* Reads `betas: [b1, b2]` (default {def1, def2} when absent): a list of
 * exactly two numbers, each in [0, 1). Errors: WEFT_ERR_CONFIG at the list
 * or at the offending item, with advice. */
weft_status optim_read_betas(const weft_cfg *section, double def1, double def2, double out[2]);

/* Checks a step call's arguments (see weft_optim_ops.step); `who` names the
 * optimizer in messages. WEFT_ERR_INVALID_ARG with the specifics. */
weft_status optim_check_step(const char *who, const weft_optim_segment *segs, size_t nseg,
			     const float *params, const float *grads, float *const *slots,
			     size_t nslots, int64_t begin, int64_t end,
			     const weft_optim_step_info *info);

/* Index of the first segment that ends after `begin` (nseg if none);
 * segments are sorted and disjoint (checked by optim_check_step). */
size_t optim_first_segment(const weft_optim_segment *segs, size_t nseg, int64_t begin);

/* The part of segment `seg` inside [begin, end), as shard-local indices
 * [*lo, *hi) (index 0 = global element begin). Returns 0 when empty. */
static inline int optim_clip_segment(const weft_optim_segment *seg, int64_t begin, int64_t end,
				     int64_t *lo, int64_t *hi)
{
	int64_t a = seg->offset > begin ? seg->offset : begin;
	int64_t b = seg->offset + seg->numel < end ? seg->offset + seg->numel : end;

	if (a >= b)
		return 0;
	*lo = a - begin;
	*hi = b - begin;
	return 1;
}

#endif /* WEFT_OPTIM_BUILTIN_IMPL_H */
