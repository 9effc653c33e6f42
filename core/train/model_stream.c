/* model.safetensors streamed from a strategy's params_visit (model_stream.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "nn/safetensors.h"
#include "train/model_stream.h"
#include "weft/module.h"
#include "weft/status.h"
#include "weft/tensor.h"

typedef struct stream {
	FILE *fp;
	const char *path;
	void *host;          /* staging for a device's parameters */
	size_t host_bytes;
	size_t next;         /* the parameter index expected next */
	weft_status st;      /* the writer's first error */
} stream;

int weft_model_stream_available(const weft_strategy_ops *ops)
{
	return ops && WEFT_HAS_MEMBER(ops, weft_strategy_ops, params_visit) && ops->params_visit;
}

/* The header weft_st_write writes for the same tensors: their entries in
 * order, each right after the previous one, then spaces up to a multiple
 * of 8 bytes. */
static weft_status write_header(FILE *fp, const char *path, const weft_params *ps,
				const weft_model_meta *meta)
{
	static const char spaces[8] = "        ";
	weft_json_writer w;
	unsigned char len8[8];
	char *text = NULL;
	size_t n = weft_params_count(ps), hlen, pad;
	int64_t at = 0;
	weft_status st;

	weft_json_writer_string(&w, 0);
	weft_st_header_begin(&w, meta ? meta->pairs : NULL, meta ? meta->n : 0);
	for (size_t i = 0; i < n; i++) {
		const weft_tensor *p = weft_params_at(ps, i);
		int64_t bytes = (int64_t)weft_tensor_nbytes(p);

		weft_st_header_tensor(&w, p->name, (weft_dtype)p->dtype, p->ndim, p->shape, at,
				      at + bytes);
		at += bytes;
	}
	weft_json_end_object(&w);
	st = weft_json_finish(&w, &text);
	if (st)
		return weft_error_wrap(st, "%s: building the safetensors header", path);
	hlen = strlen(text);
	pad = (8 - hlen % 8) % 8;
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)(hlen + pad) >> (8 * i));
	if (fwrite(len8, 1, 8, fp) != 8 || fwrite(text, 1, hlen, fp) != hlen ||
	    fwrite(spaces, 1, pad, fp) != pad)
		st = weft_error_set(WEFT_ERR_IO, "%s: write failed: %s (is the disk full?)", path,
				    strerror(errno));
	free(text);
	return st;
}

/* One parameter, whole: its bytes appended (the writer), or nothing. */
static weft_status visit(void *user, size_t index, const weft_tensor *p)
{
	stream *s = user;
	size_t bytes = weft_tensor_nbytes(p);
	const void *src = p->data;

	if (!s->fp || s->st)
		return WEFT_OK;
	if (index != s->next) {
		s->st = weft_error_set(WEFT_ERR_INTERNAL, "%s: the strategy visited parameter %zu "
				       "where %zu comes next in the file", s->path, index, s->next);
		return WEFT_OK;
	}
	s->next++;
	if (p->device.type != WEFT_DEVICE_CPU && bytes) {
		if (bytes > s->host_bytes) {
			void *h = realloc(s->host, bytes);

			if (!h) {
				s->st = weft_error_set(WEFT_ERR_NOMEM, "%s: out of memory copying "
						       "'%s' to the host", s->path, p->name);
				return WEFT_OK;
			}
			s->host = h;
			s->host_bytes = bytes;
		}
		s->st = weft_tensor_copy_to_host(p, s->host, bytes);
		if (s->st)
			return WEFT_OK;
		src = s->host;
	}
	if (bytes && fwrite(src, 1, bytes, s->fp) != bytes)
		s->st = weft_error_set(WEFT_ERR_IO, "%s: write failed: %s (is the disk full?)",
				       s->path, strerror(errno));
	return WEFT_OK;
}

weft_status weft_model_stream_save(const weft_strategy_ops *ops, void *strategy,
				   const weft_params *ps, const weft_model_meta *meta, int writer,
				   const char *path)
{
	stream s = { .path = path };
	weft_status st;

	if (writer) {
		s.fp = fopen(path, "wb");
		if (!s.fp)
			s.st = weft_error_set(WEFT_ERR_IO, "%s: cannot create: %s", path,
					      strerror(errno));
		else
			s.st = write_header(s.fp, path, ps, meta);
	}
	/* the visit runs on every rank whatever the writer's state */
	st = ops->params_visit(strategy, visit, &s);
	if (!st && !s.st && writer && s.next != weft_params_count(ps))
		s.st = weft_error_set(WEFT_ERR_INTERNAL, "%s: the strategy visited %zu of %zu "
				      "parameters", path, s.next, weft_params_count(ps));
	if (s.fp && fclose(s.fp) && !s.st)
		s.st = weft_error_set(WEFT_ERR_IO, "%s: write failed: %s (is the disk full?)", path,
				      strerror(errno));
	free(s.host);
	if (st)
		return weft_error_wrap(st, "saving %s", path);
	return s.st;
}
