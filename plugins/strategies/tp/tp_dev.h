/* strategy tp, the lowest layer (tp_dev.c): every touch of parameter,
 * gradient, optimizer-state and message memory goes through the kernel
 * table of the model's context (weft/device.h, since ABI 1.3: mem_alloc /
 * mem_free by category, zero, copy_ranges, sum_squares_ranges,
 * optim_step) and device comm buffers, so the same strategy code runs on
 * the CPU and on CUDA.
 *
 * On the CPU nothing changes in what is computed: the buffers are host
 * memory from the host's allocator as before, copy_ranges and
 * sum_squares_ranges are the CPU table's loops (bit for bit the host's
 * memcpy and clip_sum_squares), and the optimizer steps with its plugin's
 * step(). Off the CPU the optimizer's update must be one optim_step
 * computes (adam, adamw, sgd); it runs over ranges cut where weight decay
 * starts or stops, with the state slots in device memory. */
#ifndef WEFT_TP_DEV_H
#define WEFT_TP_DEV_H

#include "weft/strategy.h"

#define TP_MAX_SLOTS 8

typedef struct tp_dev {
	const weft_host *host;
	const weft_strategy_env *env;
	const weft_kernel_table *k;
	void *kctx;
	int32_t index;              /* the device's index */
	int on_cpu;
	int okind;                  /* weft_optim_kernel_kind, off the CPU */
	weft_optim_adam_params ap;
	weft_optim_sgd_params sp;
} tp_dev;

/* A host copy of device optimizer state handed out for a checkpoint
 * (NULL mem: none). */
typedef struct tp_mirror {
	float *mem;
	float *slots[TP_MAX_SLOTS];
} tp_mirror;

/* Refuses, with one message naming the optimizers that run there, an
 * optimizer whose update no device kernel computes when env's device is
 * not the CPU. */
weft_status tp_dev_check(const weft_host *host, const weft_strategy_env *env);

/* Finds the kernel table of env->ctx and, off the CPU, the optimizer's
 * device update. Errors: UNSUPPORTED (an older host or table, an
 * optimizer without a device kernel). */
weft_status tp_dev_init(tp_dev *d, const weft_host *host, const weft_strategy_env *env);

/* A comm buffer of n elements of dt at data, on the context's device. */
weft_comm_buf tp_dev_buf(const tp_dev *d, void *data, int64_t n, weft_comm_dtype dt);

/* n zeroed floats of device memory counted under cat (host memory from the
 * host's allocator on the CPU); NULL with the last error set. Free with
 * tp_dev_free(d, cat, p, n). */
float *tp_dev_alloc(const tp_dev *d, weft_mem_category cat, int64_t n, const char *what);
void tp_dev_free(const tp_dev *d, weft_mem_category cat, float *p, int64_t n);

/* Appends to r[*n] the ranges of flat elements [lo, hi) cut where the
 * optimizer's weight decay starts or stops (env->segs), each with
 * param = grad = its flat offset and state = state_at + (offset - lo),
 * merging touching ranges of one decay. r holds at least nseg + 1 more. */
void tp_dev_cut(const tp_dev *d, int64_t lo, int64_t hi, int64_t state_at, weft_optim_range *r,
		size_t *n);

/* Off the CPU: one optimizer step over the ranges (tp_dev_cut) of params,
 * grads and slots on the device, after copying a checkpoint's mirror (if
 * any, n_slots x len floats) back into slot_mem. */
weft_status tp_dev_step(const tp_dev *d, const weft_optim_step_info *in,
			const weft_optim_range *r, size_t n, float *params, const float *grads,
			float *const *slots, tp_mirror *m, float *slot_mem, size_t n_slots,
			int64_t len);

/* The slots a checkpoint reads and writes: `slots` themselves on the CPU,
 * else a host mirror of slot_mem (n_slots x len floats, made once and
 * kept until the next step uploads it). */
weft_status tp_dev_state(const tp_dev *d, float *const *slots, tp_mirror *m,
			 const float *slot_mem, size_t n_slots, int64_t len, float *const **out);

/* Frees the mirror. */
void tp_dev_mirror_free(const tp_dev *d, tp_mirror *m);

#endif /* WEFT_TP_DEV_H */
