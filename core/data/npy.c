/* .npy files (NumPy's format, versions 1.0 to 3.0) and datasets from them. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "data/dataset.h"
#include "weft/memory.h"

void weft_npy_free(weft_npy *a)
{
	if (!a)
		return;
	weft_mem_free(a->data);
	memset(a, 0, sizeof(*a));
}

/* The value text after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *h, const char *key)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof(pat), "'%s'", key);
	p = strstr(h, pat);
	if (!p) {
		snprintf(pat, sizeof(pat), "\"%s\"", key);
		p = strstr(h, pat);
	}
	if (!p)
		return NULL;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	if (*p != ':')
		return NULL;
	p++;
	while (*p == ' ')
		p++;
	return p;
}

static weft_status parse_header(const char *path, const char *h, weft_npy *a)
{
	static const struct {
		const char *descr;
		weft_npy_dtype dtype;
		int bytes;
	} types[] = {
		{ "<f4", WEFT_NPY_F4, 4 }, { "<f8", WEFT_NPY_F8, 8 }, { "<i4", WEFT_NPY_I4, 4 },
		{ "<i8", WEFT_NPY_I8, 8 }, { "|u1", WEFT_NPY_U1, 1 }, { "<u1", WEFT_NPY_U1, 1 },
		{ "<u2", WEFT_NPY_U2, 2 },
	};
	const char *d = dict_value(h, "descr"), *f = dict_value(h, "fortran_order"),
		   *s = dict_value(h, "shape");
	char descr[16] = "";
	size_t i;

	if (!d || !f || !s || (*d != '\'' && *d != '"') || *s != '(')
		return weft_error_set(WEFT_ERR_CORRUPT, "'%s': npy header lacks descr, "
				      "fortran_order or shape: %.200s", path, h);
	for (i = 0; i + 1 < sizeof(descr) && d[i + 1] && d[i + 1] != *d; i++)
		descr[i] = d[i + 1];
	descr[i] = '\0';
	if (strncmp(f, "True", 4) == 0)
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "'%s': the array is stored in Fortran "
				      "(column-major) order; weft reads C order only: save it with "
				      "np.save(path, np.ascontiguousarray(a))", path);
	if (strncmp(f, "False", 5) != 0)
		return weft_error_set(WEFT_ERR_CORRUPT, "'%s': npy fortran_order is neither True "
				      "nor False", path);
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(descr, types[i].descr) == 0)
			break;
	if (i == sizeof(types) / sizeof(types[0]))
		return weft_error_set(WEFT_ERR_UNSUPPORTED, "'%s': npy dtype '%s' is not supported "
				      "(weft reads <f4 <f8 <i4 <i8 |u1 <u2, little-endian); convert "
				      "with a.astype('<f4')", path, descr);
	a->dtype = types[i].dtype;
	a->elem_bytes = types[i].bytes;
	a->ndim = 0;
	a->count = 1;
	for (s++;;) {
		char *end;
		long long v;

		while (*s == ' ' || *s == ',')
			s++;
		if (*s == ')')
			break;
		errno = 0;
		v = strtoll(s, &end, 10);
		if (end == s || errno || v < 0 || a->ndim == WEFT_DATA_MAX_DIMS ||
		    (v && a->count > ((int64_t)1 << 50) / v))
			return weft_error_set(WEFT_ERR_CORRUPT, "'%s': npy shape is malformed or "
					      "has more than %d dims: %.100s", path,
					      WEFT_DATA_MAX_DIMS, dict_value(h, "shape"));
		a->shape[a->ndim++] = v;
		a->count *= v;
		s = end;
		if (*s == 'L')
			s++;
	}
	return WEFT_OK;
}

weft_status weft_npy_read(const char *path, weft_npy *out)
{
	uint8_t pre[12];
	weft_status st = WEFT_OK;
	char *header = NULL;
	size_t hlen, pre_len;
	long size, data_len;
	FILE *f;

	memset(out, 0, sizeof(*out));
	st = weft_file_fopen_read(path, "npy file", &f, NULL);
	if (st)
		return st;
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		st = weft_error_set(WEFT_ERR_IO, "cannot size '%s'", path);
		goto out_close;
	}
	if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': not an npy file (no \\x93NUMPY magic)",
				    path);
		goto out_close;
	}
	if (pre[6] == 1) {
		hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
		pre_len = 10;
	} else if (pre[6] == 2 || pre[6] == 3) {
		if (fread(pre + 10, 1, 2, f) != 2) {
			st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': truncated npy preamble", path);
			goto out_close;
		}
		hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 |
		       (size_t)pre[11] << 24;
		pre_len = 12;
	} else {
		st = weft_error_set(WEFT_ERR_UNSUPPORTED, "'%s': npy format version %d.%d is not "
				    "supported (1.0, 2.0, 3.0 are)", path, pre[6], pre[7]);
		goto out_close;
	}
	if ((long)(pre_len + hlen) > size || hlen > (1u << 24)) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': truncated: the npy header claims %zu "
				    "bytes but the file has %ld", path, hlen, size);
		goto out_close;
	}
	header = malloc(hlen + 1);
	if (!header) {
		st = weft_error_set(WEFT_ERR_NOMEM, "out of memory reading '%s'", path);
		goto out_close;
	}
	if (fread(header, 1, hlen, f) != hlen) {
		st = weft_error_set(WEFT_ERR_IO, "error reading the header of '%s'", path);
		goto out_free_header;
	}
	header[hlen] = '\0';
	st = parse_header(path, header, out);
	if (st)
		goto out_free_header;
	data_len = size - (long)(pre_len + hlen);
	if (data_len != (long)(out->count * out->elem_bytes)) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': %s: the shape needs %" PRId64 " bytes "
				    "of data, the file holds %ld", path,
				    data_len < out->count * out->elem_bytes ? "truncated"
									     : "trailing bytes",
				    out->count * out->elem_bytes, data_len);
		goto out_free_header;
	}
	out->data = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)data_len);
	if (!out->data) {
		st = weft_error_wrap(WEFT_ERR_NOMEM, "reading '%s'", path);
		goto out_free_header;
	}
	if (fread(out->data, 1, (size_t)data_len, f) != (size_t)data_len) {
		st = weft_error_set(WEFT_ERR_IO, "error reading the data of '%s'", path);
		weft_npy_free(out);
	}
out_free_header:
	free(header);
out_close:
	fclose(f);
	return st;
}

static double as_double(const weft_npy *a, int64_t i)
{
	const uint8_t *p = (const uint8_t *)a->data + i * a->elem_bytes;

	switch (a->dtype) {
	case WEFT_NPY_F4: { float v; memcpy(&v, p, 4); return v; }
	case WEFT_NPY_F8: { double v; memcpy(&v, p, 8); return v; }
	case WEFT_NPY_I4: { int32_t v; memcpy(&v, p, 4); return v; }
	case WEFT_NPY_I8: { int64_t v; memcpy(&v, p, 8); return (double)v; }
	case WEFT_NPY_U1: return *p;
	case WEFT_NPY_U2: { uint16_t v; memcpy(&v, p, 2); return v; }
	}
	return 0;
}

weft_status weft_dataset_from_npy(const char *x, const char *y, weft_dataset *out)
{
	weft_npy xa = { 0 }, ya = { 0 };
	weft_status st;

	memset(out, 0, sizeof(*out));
	st = weft_npy_read(x, &xa);
	if (st)
		return st;
	if (xa.ndim < 1 || xa.shape[0] < 1) {
		st = weft_error_set(WEFT_ERR_SHAPE, "'%s': features need a leading example "
				    "dimension (shape (N, ...)), got %d-D", x, xa.ndim);
		goto out_free;
	}
	if (y) {
		st = weft_npy_read(y, &ya);
		if (st)
			goto out_free;
		if (ya.ndim != 1 || ya.shape[0] != xa.shape[0]) {
			st = weft_error_set(WEFT_ERR_SHAPE, "labels '%s' have %d-D shape with %" PRId64
					    " entries but features '%s' hold %" PRId64 " examples; "
					    "labels must be 1-D, one per example", y, ya.ndim,
					    ya.count, x, xa.shape[0]);
			goto out_free;
		}
		if (ya.dtype == WEFT_NPY_F4 || ya.dtype == WEFT_NPY_F8) {
			st = weft_error_set(WEFT_ERR_DTYPE, "labels '%s' are floating point; class "
					    "labels must be integers (save with a.astype('<i4'))", y);
			goto out_free;
		}
	}
	out->n = xa.shape[0];
	out->ndim = xa.ndim - 1;
	out->example_numel = 1;
	for (int i = 1; i < xa.ndim; i++) {
		out->shape[i - 1] = xa.shape[i];
		out->example_numel *= xa.shape[i];
	}
	snprintf(out->source, sizeof(out->source), "%s", x);
	if (y)
		snprintf(out->labels_source, sizeof(out->labels_source), "%s", y);
	out->x = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)xa.count * sizeof(float));
	if (!out->x) {
		st = weft_error_wrap(WEFT_ERR_NOMEM, "loading '%s'", x);
		goto out_free;
	}
	if (xa.dtype == WEFT_NPY_F4)
		memcpy(out->x, xa.data, (size_t)xa.count * sizeof(float));
	else
		for (int64_t i = 0; i < xa.count; i++)
			out->x[i] = (float)as_double(&xa, i);
	if (y) {
		out->y = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)ya.count * sizeof(int32_t));
		if (!out->y) {
			st = weft_error_wrap(WEFT_ERR_NOMEM, "loading '%s'", y);
			goto out_free;
		}
		for (int64_t i = 0; i < ya.count; i++) {
			double v = as_double(&ya, i);

			if (v < 0 || v > INT32_MAX) {
				st = weft_error_set(WEFT_ERR_DTYPE, "labels '%s': entry %" PRId64
						    " is %.0f; class labels must be in [0, 2^31)",
						    y, i, v);
				goto out_free;
			}
			out->y[i] = (int32_t)v;
			if (out->y[i] + 1 > out->num_classes)
				out->num_classes = (int64_t)out->y[i] + 1;
		}
	}
	weft_npy_free(&xa);
	weft_npy_free(&ya);
	return WEFT_OK;
out_free:
	weft_npy_free(&xa);
	weft_npy_free(&ya);
	weft_dataset_free(out);
	return st;
}
