/* Tensors: creation, views, copies between host and device. */
#include <stdio.h>
#include <string.h>

#include "weft/tensor.h"
#include "tensor/tensor_impl.h"

int64_t weft_tensor_numel(const weft_tensor *t)
{
	int64_t n = 1;

	for (int32_t i = 0; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}

size_t weft_tensor_nbytes(const weft_tensor *t)
{
	return (size_t)weft_tensor_numel(t) * weft_dtype_size((weft_dtype)t->dtype);
}

const char *weft_shape_str(const weft_tensor *t, char *buf, size_t len)
{
	size_t off = 0;

	if (!len)
		return buf;
	off += (size_t)snprintf(buf, len, "[");
	for (int32_t i = 0; t && i < t->ndim && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? ", " : "",
					(long long)t->shape[i]);
	if (off < len)
		snprintf(buf + off, len - off, "]");
	return buf;
}

weft_status tensor_check_shape(const char *what, weft_dtype dt, int32_t ndim, const int64_t *shape)
{
	int64_t n = 1;

	if ((unsigned)dt >= WEFT_DTYPE_COUNT)
		return weft_error_set(WEFT_ERR_DTYPE,
				      "%s: unknown dtype %d: use one of F32, F16, BF16, I32, I64, U8, U16",
				      what, (int)dt);
	if (ndim < 0 || ndim > WEFT_MAX_DIMS)
		return weft_error_set(WEFT_ERR_SHAPE, "%s: %d dims; a tensor has 0 to %d", what,
				      (int)ndim, WEFT_MAX_DIMS);
	for (int32_t i = 0; i < ndim; i++) {
		if (shape[i] < 0)
			return weft_error_set(WEFT_ERR_SHAPE, "%s: dim %d is %lld; dims must be >= 0",
					      what, (int)i, (long long)shape[i]);
		if (shape[i] && n > INT64_MAX / 16 / shape[i])
			return weft_error_set(WEFT_ERR_SHAPE, "%s: shape overflows 64-bit sizes", what);
		n *= shape[i];
	}
	return WEFT_OK;
}

weft_status weft_tensor_init(weft_tensor *t, weft_dtype dt, int32_t ndim, const int64_t *shape,
			     weft_device dev, void *data)
{
	weft_status st = tensor_check_shape("tensor_init", dt, ndim, shape);

	if (st)
		return st;
	memset(t, 0, sizeof(*t));
	t->dtype = dt;
	t->ndim = ndim;
	for (int32_t i = 0; i < ndim; i++)
		t->shape[i] = shape[i];
	t->device = dev;
	t->data = data;
	t->base = data;
	t->param_index = -1;
	return WEFT_OK;
}

weft_status weft_tensor_alloc(const char *name, weft_dtype dt, int32_t ndim, const int64_t *shape,
			      weft_device dev, weft_mem_category cat, weft_tensor **out)
{
	weft_tensor *t;
	size_t namelen = name ? strlen(name) + 1 : 0;
	void *data = NULL;
	weft_status st;

	*out = NULL;
	st = tensor_check_shape(name ? name : "tensor_alloc", dt, ndim, shape);
	if (st)
		return st;
	t = weft_mem_alloc(WEFT_MEM_OTHER, sizeof(*t) + namelen);
	if (!t)
		return weft_error_wrap(WEFT_ERR_NOMEM, "allocating tensor '%s'", name ? name : "");
	weft_tensor_init(t, dt, ndim, shape, dev, NULL);
	if (name) {
		memcpy(t + 1, name, namelen);
		t->name = (const char *)(t + 1);
	}
	st = weft_device_alloc(dev, cat, weft_tensor_nbytes(t), &data);
	if (st) {
		char sh[160];

		weft_error_wrap(st, "allocating tensor '%s' %s %s", name ? name : "",
				weft_dtype_name(dt), weft_shape_str(t, sh, sizeof(sh)));
		weft_mem_free(t);
		return st;
	}
	t->data = t->base = data;
	t->flags = WEFT_TENSOR_OWNS_DATA;
	t->mem_category = (uint32_t)cat;
	st = weft_tensor_zero(t);
	if (st) {
		weft_tensor_free(t);
		return st;
	}
	*out = t;
	return WEFT_OK;
}

weft_status weft_tensor_view(const weft_tensor *src, int64_t elem_offset, int32_t ndim,
			     const int64_t *shape, weft_tensor **out)
{
	weft_tensor tmp, *t;
	char a[160], b[160];
	weft_status st;

	*out = NULL;
	st = weft_tensor_init(&tmp, (weft_dtype)src->dtype, ndim, shape, src->device, NULL);
	if (st)
		return st;
	if (elem_offset < 0 || elem_offset > weft_tensor_numel(src) ||
	    weft_tensor_numel(&tmp) > weft_tensor_numel(src) - elem_offset)
		return weft_error_set(WEFT_ERR_SHAPE,
				      "view %s at element %lld does not fit inside '%s' %s",
				      weft_shape_str(&tmp, a, sizeof(a)), (long long)elem_offset,
				      src->name ? src->name : "tensor", weft_shape_str(src, b, sizeof(b)));
	t = weft_mem_alloc(WEFT_MEM_OTHER, sizeof(*t));
	if (!t)
		return weft_error_wrap(WEFT_ERR_NOMEM, "allocating a view");
	*t = tmp;
	t->base = src->base;
	t->offset = src->offset + (size_t)elem_offset * weft_dtype_size((weft_dtype)src->dtype);
	t->data = src->data ? (char *)src->data +
		(size_t)elem_offset * weft_dtype_size((weft_dtype)src->dtype) : NULL;
	t->name = src->name;
	*out = t;
	return WEFT_OK;
}

void weft_tensor_free(weft_tensor *t)
{
	if (!t)
		return;
	if (t->flags & WEFT_TENSOR_OWNS_DATA)
		weft_device_free(t->device, (weft_mem_category)t->mem_category, t->base,
				 weft_tensor_nbytes(t));
	/* an arena gradient may be gone with its context: never touch it */
	if (t->grad && !(t->flags & WEFT_TENSOR_GRAD_IN_ARENA) &&
	    (t->grad->flags & WEFT_TENSOR_OWNS_DATA))
		weft_tensor_free(t->grad);
	weft_mem_free(t);
}

static weft_status host_copy(weft_tensor *t, void *host, size_t bytes, int to_host)
{
	const weft_kernel_table *k;
	weft_status st;
	char sh[160];

	if (bytes != weft_tensor_nbytes(t))
		return weft_error_set(WEFT_ERR_SHAPE,
				      "copy %s host: '%s' %s %s holds %zu bytes, the host buffer %zu",
				      to_host ? "to" : "from", t->name ? t->name : "tensor",
				      weft_dtype_name((weft_dtype)t->dtype),
				      weft_shape_str(t, sh, sizeof(sh)), weft_tensor_nbytes(t), bytes);
	if (!bytes)
		return WEFT_OK;
	st = weft_kernels_get(t->device, &k);
	if (st)
		return st;
	if (to_host)
		return k->copy(NULL, host, t->data, bytes, WEFT_COPY_DEVICE_TO_HOST);
	return k->copy(NULL, t->data, host, bytes, WEFT_COPY_HOST_TO_DEVICE);
}

weft_status weft_tensor_copy_from_host(weft_tensor *t, const void *src, size_t bytes)
{
	return host_copy(t, (void *)src, bytes, 0);
}

weft_status weft_tensor_copy_to_host(const weft_tensor *t, void *dst, size_t bytes)
{
	return host_copy((weft_tensor *)t, dst, bytes, 1);
}

weft_status weft_tensor_copy(weft_tensor *dst, const weft_tensor *src)
{
	const weft_kernel_table *k;
	char a[160], b[160];
	size_t bytes = weft_tensor_nbytes(src);
	weft_status st;

	if (dst->dtype != src->dtype)
		return weft_error_set(WEFT_ERR_DTYPE, "copy: '%s' is %s, '%s' is %s",
				      dst->name ? dst->name : "dst", weft_dtype_name((weft_dtype)dst->dtype),
				      src->name ? src->name : "src", weft_dtype_name((weft_dtype)src->dtype));
	if (weft_tensor_numel(dst) != weft_tensor_numel(src))
		return weft_error_set(WEFT_ERR_SHAPE, "copy: '%s' %s and '%s' %s differ in size",
				      dst->name ? dst->name : "dst", weft_shape_str(dst, a, sizeof(a)),
				      src->name ? src->name : "src", weft_shape_str(src, b, sizeof(b)));
	if (!bytes)
		return WEFT_OK;
	if (weft_device_equal(dst->device, src->device)) {
		st = weft_kernels_get(dst->device, &k);
		return st ? st : k->copy(NULL, dst->data, src->data, bytes, WEFT_COPY_DEVICE_TO_DEVICE);
	}
	if (src->device.type == WEFT_DEVICE_CPU) {
		st = weft_kernels_get(dst->device, &k);
		return st ? st : k->copy(NULL, dst->data, src->data, bytes, WEFT_COPY_HOST_TO_DEVICE);
	}
	if (dst->device.type == WEFT_DEVICE_CPU) {
		st = weft_kernels_get(src->device, &k);
		return st ? st : k->copy(NULL, dst->data, src->data, bytes, WEFT_COPY_DEVICE_TO_HOST);
	}
	return weft_error_set(WEFT_ERR_UNSUPPORTED, "copy between two GPUs ('%s', '%s') goes "
			      "through the host: copy to a CPU tensor first",
			      dst->name ? dst->name : "dst", src->name ? src->name : "src");
}

weft_status weft_tensor_zero(weft_tensor *t)
{
	const weft_kernel_table *k;
	weft_status st;

	if (!weft_tensor_nbytes(t))
		return WEFT_OK;
	st = weft_kernels_get(t->device, &k);
	return st ? st : k->zero(NULL, t->data, weft_tensor_nbytes(t));
}

weft_status weft_tensor_fill(weft_tensor *t, float value)
{
	const weft_kernel_table *k;
	weft_status st;

	if (!weft_dtype_is_float((weft_dtype)t->dtype))
		return weft_error_set(WEFT_ERR_DTYPE, "fill: '%s' is %s; fill takes F32, F16 or BF16",
				      t->name ? t->name : "tensor", weft_dtype_name((weft_dtype)t->dtype));
	st = weft_kernels_get(t->device, &k);
	if (st)
		return st;
	if (!(k->float_dtypes & WEFT_DTYPE_BIT(t->dtype)))
		return weft_error_set(WEFT_ERR_DTYPE, "fill: '%s' is %s; the %s kernels take other "
				      "float dtypes", t->name ? t->name : "tensor",
				      weft_dtype_name((weft_dtype)t->dtype), k->head.name);
	return k->fill(NULL, (weft_dtype)t->dtype, weft_tensor_numel(t), value, t->data);
}
