/* idx files (plain or gzip, through zlib), datasets built from them, and
 * Fashion-MNIST from its Debian package. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/file.h"
#include "data/dataset.h"
#include "weft/memory.h"

void weft_dataset_free(weft_dataset *ds)
{
	if (!ds)
		return;
	weft_mem_free(ds->x);
	weft_mem_free(ds->y);
	memset(ds, 0, sizeof(*ds));
}

weft_status weft_dataset_split_tail(weft_dataset *ds, int64_t count, weft_dataset *tail)
{
	int64_t keep = ds->n - count;
	size_t xb = (size_t)count * (size_t)ds->example_numel * sizeof(float);

	if (count < 1 || count >= ds->n)
		return weft_error_set(WEFT_ERR_INVALID_ARG,
				      "%s: cannot split %" PRId64 " of %" PRId64 " examples off for "
				      "validation (need 1 to n - 1)", ds->source, count, ds->n);
	*tail = *ds;
	tail->n = count;
	tail->first = ds->first + keep;
	tail->x = weft_mem_alloc(WEFT_MEM_OTHER, xb);
	tail->y = ds->y ? weft_mem_alloc(WEFT_MEM_OTHER, (size_t)count * sizeof(int32_t)) : NULL;
	if (!tail->x || (ds->y && !tail->y)) {
		weft_mem_free(tail->x);
		weft_mem_free(tail->y);
		memset(tail, 0, sizeof(*tail));
		return weft_error_wrap(WEFT_ERR_NOMEM, "splitting %s", ds->source);
	}
	memcpy(tail->x, ds->x + keep * ds->example_numel, xb);
	if (ds->y)
		memcpy(tail->y, ds->y + keep, (size_t)count * sizeof(int32_t));
	ds->n = keep;
	return WEFT_OK;
}

weft_status weft_dataset_normalize(weft_dataset *ds, double mean, double std)
{
	float m = (float)mean, inv;
	int64_t total = ds->n * ds->example_numel;

	if (!(std > 0))
		return weft_error_set(WEFT_ERR_INVALID_ARG, "normalization std must be > 0, got %g",
				      std);
	inv = (float)(1.0 / std);
	for (int64_t i = 0; i < total; i++)
		ds->x[i] = (ds->x[i] - m) * inv;
	return WEFT_OK;
}

void weft_idx_free(weft_idx *idx)
{
	if (!idx)
		return;
	weft_mem_free(idx->data);
	memset(idx, 0, sizeof(*idx));
}

static weft_status gz_fail(gzFile gz, const char *path, const char *what)
{
	int code = 0;
	const char *msg = gzerror(gz, &code);

	return weft_error_set(WEFT_ERR_CORRUPT, "'%s': %s: %s", path, what,
			      code == Z_ERRNO ? strerror(errno) : msg);
}

/* Reads up to len bytes (gzread takes unsigned int counts). */
static int64_t gz_read_all(gzFile gz, uint8_t *dst, int64_t len)
{
	int64_t got = 0;

	while (got < len) {
		int64_t want = len - got > (1 << 30) ? (1 << 30) : len - got;
		int r = gzread(gz, dst + got, (unsigned)want);

		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += r;
	}
	return got;
}

weft_status weft_idx_read(const char *path, weft_idx *out)
{
	static const char *const type_names[] = { [0x08] = "unsigned byte", [0x09] = "signed byte",
						  [0x0B] = "short", [0x0C] = "int",
						  [0x0D] = "float", [0x0E] = "double" };
	uint8_t head[4], dimb[4 * WEFT_DATA_MAX_DIMS], extra;
	weft_status st = WEFT_OK;
	int64_t fsize;
	int fd;
	int64_t count = 1, got;
	gzFile gz;

	memset(out, 0, sizeof(*out));
	st = weft_file_open_read(path, "idx file", &fd, &fsize);
	if (st)
		return st;
	gz = gzdopen(fd, "rb");
	if (!gz) {
		close(fd);
		return weft_error_set(WEFT_ERR_NOMEM, "cannot open idx file '%s': out of memory",
				      path);
	}
	gzbuffer(gz, 1 << 17);
	if (gz_read_all(gz, head, 4) != 4) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': truncated: shorter than the 4-byte idx "
				    "magic", path);
		goto out_close;
	}
	if (head[0] != 0 || head[1] != 0 || head[3] == 0 || head[3] > WEFT_DATA_MAX_DIMS) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': not an idx file (magic %02x %02x %02x "
				    "%02x; expected 00 00 <type> <1..%d dims>)", path, head[0],
				    head[1], head[2], head[3], WEFT_DATA_MAX_DIMS);
		goto out_close;
	}
	if (head[2] != 0x08) {
		const char *tn = head[2] < sizeof(type_names) / sizeof(type_names[0]) &&
					 type_names[head[2]] ? type_names[head[2]] : "unknown";

		st = weft_error_set(WEFT_ERR_UNSUPPORTED, "'%s': idx element type 0x%02x (%s) is "
				    "not supported; weft reads unsigned-byte (0x08) idx files",
				    path, head[2], tn);
		goto out_close;
	}
	out->ndim = head[3];
	if (gz_read_all(gz, dimb, 4 * out->ndim) != 4 * out->ndim) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': truncated inside the %d dimension "
				    "sizes", path, out->ndim);
		goto out_close;
	}
	for (int i = 0; i < out->ndim; i++) {
		out->dims[i] = (int64_t)dimb[4 * i] << 24 | (int64_t)dimb[4 * i + 1] << 16 |
			       (int64_t)dimb[4 * i + 2] << 8 | dimb[4 * i + 3];
		if (out->dims[i] == 0 || count > ((int64_t)1 << 40) / out->dims[i]) {
			st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': implausible dimension %d size "
					    "%" PRId64, path, i, out->dims[i]);
			goto out_close;
		}
		count *= out->dims[i];
	}
	/* A plain file's length is known up front: refuse a short one before
	 * allocating for it. */
	if (gzdirect(gz) && fsize != 4 + 4 * out->ndim + count) {
		int64_t have = fsize - 4 - 4 * out->ndim;

		st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': %s: expected %" PRId64 " bytes of data "
				    "after the header, found %" PRId64, path,
				    have < count ? "truncated" : "trailing bytes", count, have);
		goto out_close;
	}
	out->data = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)count);
	if (!out->data) {
		st = weft_error_wrap(WEFT_ERR_NOMEM, "reading '%s'", path);
		goto out_close;
	}
	out->count = count;
	got = gz_read_all(gz, out->data, count);
	if (got < 0) {
		st = gz_fail(gz, path, "decompression failed");
		goto out_free;
	}
	if (got < count) {
		int code = 0;

		gzerror(gz, &code);
		st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': truncated: expected %" PRId64 " bytes "
				    "of data after the header, found %" PRId64 "%s", path, count,
				    got, code ? " (the compressed stream ends early)" : "");
		goto out_free;
	}
	if (gzread(gz, &extra, 1) > 0) {
		st = weft_error_set(WEFT_ERR_CORRUPT, "'%s': trailing bytes after the %" PRId64
				    " bytes of data the header announces", path, count);
		goto out_free;
	}
	gzclose(gz);
	return WEFT_OK;
out_free:
	weft_idx_free(out);
out_close:
	gzclose(gz);
	return st;
}

weft_status weft_dataset_from_idx(const char *images, const char *labels, weft_dataset *out)
{
	weft_idx im = { 0 }, lb = { 0 };
	weft_status st;
	int64_t n;

	memset(out, 0, sizeof(*out));
	st = weft_idx_read(images, &im);
	if (st)
		return st;
	if (labels) {
		st = weft_idx_read(labels, &lb);
		if (st)
			goto out_free;
		if (lb.ndim != 1 || lb.dims[0] != im.dims[0]) {
			st = weft_error_set(WEFT_ERR_SHAPE, "labels '%s' hold %" PRId64 " entries "
					    "(%d-D) but images '%s' hold %" PRId64 " examples; they "
					    "must pair up one to one", labels, lb.count, lb.ndim,
					    images, im.dims[0]);
			goto out_free;
		}
	}
	n = im.dims[0];
	out->n = n;
	out->ndim = im.ndim - 1;
	out->example_numel = 1;
	for (int i = 1; i < im.ndim; i++) {
		out->shape[i - 1] = im.dims[i];
		out->example_numel *= im.dims[i];
	}
	snprintf(out->source, sizeof(out->source), "%s", images);
	if (labels)
		snprintf(out->labels_source, sizeof(out->labels_source), "%s", labels);
	out->x = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)im.count * sizeof(float));
	if (!out->x) {
		st = weft_error_wrap(WEFT_ERR_NOMEM, "loading '%s'", images);
		goto out_free;
	}
	for (int64_t i = 0; i < im.count; i++)
		out->x[i] = (float)im.data[i] * (1.0f / 255.0f);
	if (labels) {
		out->y = weft_mem_alloc(WEFT_MEM_OTHER, (size_t)n * sizeof(int32_t));
		if (!out->y) {
			st = weft_error_wrap(WEFT_ERR_NOMEM, "loading '%s'", labels);
			goto out_free;
		}
		for (int64_t i = 0; i < n; i++) {
			out->y[i] = lb.data[i];
			if (lb.data[i] + 1 > out->num_classes)
				out->num_classes = lb.data[i] + 1;
		}
	}
	weft_idx_free(&im);
	weft_idx_free(&lb);
	return WEFT_OK;
out_free:
	weft_idx_free(&im);
	weft_idx_free(&lb);
	weft_dataset_free(out);
	return st;
}

weft_status weft_fashion_mnist_load(const char *dir, const char *split, weft_dataset *out)
{
	char images[4096], labels[4096];
	const char *prefix;
	struct stat sb;

	memset(out, 0, sizeof(*out));
	if (!dir)
		dir = WEFT_FASHION_MNIST_DIR;
	if (split && strcmp(split, "train") == 0)
		prefix = "train";
	else if (split && strcmp(split, "test") == 0)
		prefix = "t10k";
	else
		return weft_error_set(WEFT_ERR_INVALID_ARG, "Fashion-MNIST split must be 'train' "
				      "or 'test', got '%s'", split ? split : "(null)");
	snprintf(images, sizeof(images), "%s/%s-images-idx3-ubyte.gz", dir, prefix);
	snprintf(labels, sizeof(labels), "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
	for (int i = 0; i < 2; i++) {
		const char *p = i ? labels : images;

		if (stat(p, &sb) != 0)
			return weft_error_set(WEFT_ERR_NOT_FOUND, "Fashion-MNIST file '%s' not found; "
					      "install the Debian package dataset-fashion-mnist "
					      "(apt-get install dataset-fashion-mnist), or set "
					      "data.path to the directory holding the idx files", p);
	}
	return weft_dataset_from_idx(images, labels, out);
}
