/* weft/tensor.h - tensors, dtypes, flat parameter sets, half-float helpers.
 *
 * A tensor is dense, row-major and contiguous, of up to 8 dims, on one
 * device (`cpu` or `cuda:N`). Its data may be a view into a larger buffer:
 * `data` = `base` + `offset`. The struct is public so that strategies and
 * kernels read shape and data without calls; fields marked "autograd" are
 * owned by core/tensor and must not be written by anyone else.
 *
 * A model's parameters live in one flat buffer per dtype (weft_params):
 * each parameter is a named view (name, shape, byte offset) into it, and
 * its gradient is the view at the same offset into a flat gradient buffer
 * that mirrors it. Buckets (DDP) and shards (ZeRO) are slices of those
 * buffers; optimizer state in "global flat coordinates" is indexed by the
 * element offset `offset / weft_dtype_size(dtype)`.
 */
#ifndef WEFT_TENSOR_H
#define WEFT_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include "weft/status.h"
#include "weft/memory.h"
#include "weft/device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_MAX_DIMS 8

/* ---- dtypes ------------------------------------------------------------ */

/* Bytes per element; 0 for an unknown dtype. */
WEFT_API size_t weft_dtype_size(weft_dtype dt);

/* The safetensors name: "F32", "F16", "BF16", "I32", "I64", "U8", "U16";
 * "unknown" for anything else. Static storage. */
WEFT_API const char *weft_dtype_name(weft_dtype dt);

/* Parses a safetensors name (case-insensitive; also "float32", "float16",
 * "bfloat16", "int32", "int64", "uint8", "uint16"). Errors:
 * WEFT_ERR_DTYPE quoting the text and listing the names weft knows. */
WEFT_API weft_status weft_dtype_parse(const char *text, weft_dtype *out);

/* 1 for F32, F16, BF16; 0 otherwise. */
WEFT_API int weft_dtype_is_float(weft_dtype dt);

/* ---- half-precision conversion (host) ---------------------------------- */

/* IEEE binary16 and bfloat16 from/to float. To-half conversions round to
 * nearest even; overflow gives infinity; NaN stays NaN. */
WEFT_API uint16_t weft_f32_to_f16(float x);
WEFT_API float weft_f16_to_f32(uint16_t h);
WEFT_API uint16_t weft_f32_to_bf16(float x);
WEFT_API float weft_bf16_to_f32(uint16_t h);

/* Converts n elements between F32, F16 and BF16 in host memory (same dtype:
 * a copy). Errors: WEFT_ERR_DTYPE naming the dtype that is not a float. */
WEFT_API weft_status weft_convert_host(int64_t n, weft_dtype src_dt, const void *src,
				       weft_dtype dst_dt, void *dst);

/* ---- the tensor --------------------------------------------------------- */

/* weft_tensor.flags */
enum {
	WEFT_TENSOR_OWNS_DATA = 1u << 0,   /* weft_tensor_free frees `base` */
	WEFT_TENSOR_REQUIRES_GRAD = 1u << 1, /* backward computes a gradient for it */
	WEFT_TENSOR_PARAM = 1u << 2,       /* a parameter (view into a weft_params) */
	WEFT_TENSOR_IN_ARENA = 1u << 3,    /* struct and data live in a step's arena */
	WEFT_TENSOR_GRAD_IN_ARENA = 1u << 4 /* autograd: `grad` lives in the arena */
};

struct weft_tape_node;

typedef struct weft_tensor {
	int32_t dtype;                  /* weft_dtype */
	int32_t ndim;                   /* 0 (a scalar) .. WEFT_MAX_DIMS */
	int64_t shape[WEFT_MAX_DIMS];   /* dims past ndim are 0 */
	weft_device device;
	void *data;                     /* first element: (char *)base + offset */
	void *base;                     /* start of the buffer this is a view into */
	size_t offset;                  /* byte offset of data from base */
	uint32_t flags;                 /* WEFT_TENSOR_* */
	uint32_t mem_category;          /* weft_mem_category of an owned buffer */
	const char *name;               /* for messages and checkpoints; may be NULL */
	struct weft_tensor *grad;       /* same shape and device, or NULL */
	void *user;                     /* free for the owner (a strategy, a module) */

	/* autograd (core/tensor only) */
	struct weft_tape_node *producer; /* the op that made it in this step */
	uint64_t ag_stamp;              /* which step `producer`/pending/grad belong to */
	int64_t ag_pending;             /* uses not yet back-propagated */
	int64_t param_index;            /* index in its weft_params, else -1 */
} weft_tensor;

/* Elements: the product of shape[0..ndim); 1 for a scalar. */
WEFT_API int64_t weft_tensor_numel(const weft_tensor *t);

/* Bytes of data: numel * dtype size. */
WEFT_API size_t weft_tensor_nbytes(const weft_tensor *t);

/* Writes the shape as "[4, 8]" ("[]" for a scalar) into buf and returns
 * buf; the form every error message uses. */
WEFT_API const char *weft_shape_str(const weft_tensor *t, char *buf, size_t len);

/* Fills *t (a struct the caller owns, nothing allocated) as a borrowed
 * tensor over `data` on `dev`. Shape dims must be >= 0; ndim 0..8.
 * Errors: WEFT_ERR_SHAPE naming the bad dim or ndim; WEFT_ERR_DTYPE. */
WEFT_API weft_status weft_tensor_init(weft_tensor *t, weft_dtype dt, int32_t ndim,
				      const int64_t *shape, weft_device dev, void *data);

/* A new tensor with its own zero-filled buffer on `dev`, counted under
 * `cat`. Free with weft_tensor_free. `name` is copied (NULL: none).
 * Errors: WEFT_ERR_SHAPE, WEFT_ERR_DTYPE, WEFT_ERR_NOMEM (naming the name,
 * shape and bytes). */
WEFT_API weft_status weft_tensor_alloc(const char *name, weft_dtype dt, int32_t ndim,
				       const int64_t *shape, weft_device dev,
				       weft_mem_category cat, weft_tensor **out);

/* A new tensor struct viewing `numel(shape)` elements of `src` starting
 * `elem_offset` elements into src's data; shares src's buffer (src must
 * outlive the view). Free with weft_tensor_free (frees only the struct).
 * Errors: WEFT_ERR_SHAPE when the view does not fit inside src, naming both
 * shapes and the offset. */
WEFT_API weft_status weft_tensor_view(const weft_tensor *src, int64_t elem_offset, int32_t ndim,
				      const int64_t *shape, weft_tensor **out);

/* Frees a tensor from weft_tensor_alloc or weft_tensor_view, its own
 * buffer (when it owns one) and a gradient it owns. NULL is ignored.
 * Never call on parameters (weft_params_free) or arena tensors. */
WEFT_API void weft_tensor_free(weft_tensor *t);

/* Copies n = numel(t) elements between host memory and t (on any device).
 * Blocking. `bytes` must equal weft_tensor_nbytes(t).
 * Errors: WEFT_ERR_SHAPE naming the tensor and both sizes. */
WEFT_API weft_status weft_tensor_copy_from_host(weft_tensor *t, const void *src, size_t bytes);
WEFT_API weft_status weft_tensor_copy_to_host(const weft_tensor *t, void *dst, size_t bytes);

/* Copies src's data into dst (same dtype and numel; any devices).
 * Errors: WEFT_ERR_SHAPE / WEFT_ERR_DTYPE naming both tensors. */
WEFT_API weft_status weft_tensor_copy(weft_tensor *dst, const weft_tensor *src);

/* Sets every element to zero / to `value` (float dtypes only for fill).
 * Errors: WEFT_ERR_DTYPE for fill on an integer tensor. */
WEFT_API weft_status weft_tensor_zero(weft_tensor *t);
WEFT_API weft_status weft_tensor_fill(weft_tensor *t, float value);

/* ---- flat parameter sets ------------------------------------------------ */

typedef struct weft_params weft_params; /* opaque */

/* An empty parameter set for `dev`. Free with weft_params_free. */
WEFT_API weft_status weft_params_create(weft_device dev, weft_params **out);

/* Frees the set, its flat buffers and every parameter tensor. NULL ok. */
WEFT_API void weft_params_free(weft_params *ps);

/* Declares a parameter (before weft_params_finalize). `name` is copied
 * (dotted, as PyTorch names it: "transformer.h.0.attn.c_attn.weight").
 * *out is the parameter tensor, owned by the set, stable for the set's
 * life; its data is NULL until finalize. Parameters of one dtype are laid
 * out in declaration order with no padding.
 * Errors: WEFT_ERR_INVALID_ARG for a duplicate name (naming it) or after
 * finalize; WEFT_ERR_SHAPE; WEFT_ERR_DTYPE; WEFT_ERR_NOMEM. */
WEFT_API weft_status weft_params_add(weft_params *ps, const char *name, weft_dtype dt,
				     int32_t ndim, const int64_t *shape, weft_tensor **out);

/* Allocates one zero-filled flat buffer per dtype (WEFT_MEM_PARAMS) and
 * points every parameter into it; with `with_grads`, also one flat gradient
 * buffer per dtype (WEFT_MEM_GRADS), zero-filled, each parameter's `grad`
 * being the view at the same offset. Parameters get REQUIRES_GRAD when
 * with_grads. Errors: WEFT_ERR_NOMEM naming the dtype and bytes (nothing is
 * kept); WEFT_ERR_INVALID_ARG when called twice. */
WEFT_API weft_status weft_params_finalize(weft_params *ps, int with_grads);

/* Number of parameters and the i-th (declaration order); NULL past the end. */
WEFT_API size_t weft_params_count(const weft_params *ps);
WEFT_API weft_tensor *weft_params_at(const weft_params *ps, size_t i);

/* The parameter called `name`, or NULL. */
WEFT_API weft_tensor *weft_params_find(const weft_params *ps, const char *name);

/* The whole flat buffer of `dt` as a 1-D tensor (borrowed, owned by the
 * set) in *flat and the matching gradient buffer in *flat_grad (NULL when
 * there are no gradients); either pointer may be NULL. Both are NULL when
 * the set has no parameter of that dtype. Valid after finalize. */
WEFT_API void weft_params_flat(const weft_params *ps, weft_dtype dt, weft_tensor **flat,
			       weft_tensor **flat_grad);

/* Total elements of dtype dt. */
WEFT_API int64_t weft_params_numel(const weft_params *ps, weft_dtype dt);

/* Zeroes every gradient buffer. */
WEFT_API weft_status weft_params_zero_grad(weft_params *ps);

/* ---- since ABI 1.7: the 16-bit weight copy of mixed precision ----
 *
 * A finalized set may keep one 16-bit copy (dt WEFT_BF16 or WEFT_F16, the
 * autocast dtype) of its flat F32 parameters: one buffer on the set's
 * device, element i the rounding of flat F32 element i, counted under
 * WEFT_MEM_PARAMS (2 bytes per F32 parameter) and freed with the set. A
 * context told to read it (weft_ctx_use_params_copy, weft/autograd.h)
 * takes its 16-bit products' weights from it instead of rounding each
 * weight in every forward. Whoever writes the F32 weights keeps it current
 * (weft_params_copy_refresh, or an optimizer kernel that writes both). */

/* Allocates the copy (values unspecified until refreshed). Again with the
 * same dt: nothing. Errors: WEFT_ERR_DTYPE (dt not BF16 or F16, or another
 * dt than the copy the set keeps); WEFT_ERR_INVALID_ARG (not finalized,
 * or no F32 parameters); WEFT_ERR_NOMEM naming the bytes. */
WEFT_API weft_status weft_params_copy_enable(weft_params *ps, weft_dtype dt);

/* The copy as a 1-D tensor of weft_params_numel(ps, WEFT_F32) elements
 * (borrowed, owned by the set), or NULL when the set keeps none. */
WEFT_API weft_tensor *weft_params_copy(const weft_params *ps);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_TENSOR_H */
